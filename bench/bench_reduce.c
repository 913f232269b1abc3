/* The kernel library's reductions and cumulative sum (kernels/reduce.c,
 * kernels/scan.c) over 64 MiB arrays, compiled (cpu backend) and
 * interpreted, next to the best C this program's author could write for the
 * same job, compiled with -O3 -march=native (docs/benchmarks.md, "The
 * library's scans and reductions").
 *
 * Usage: bench_reduce [--quick] [--no-interp] [--reps N] [--only TEXT]
 * Each figure is the best of N runs (default 15; --quick 3), the C loops and
 * the compiled kernel taking turns (the interpreter after, best of 3). GB/s counts the
 * bytes read (the 64 MiB input; outputs are small). The C references:
 *   plain   the obvious loop (one accumulator: gcc keeps float adds in
 *           order without -ffast-math, so it is scalar)
 *   best    the fastest of what was tried: 4 x 8 (AVX2) or 4 x 16
 *           (AVX-512) lanes of independent accumulators with intrinsics,
 *           NaN-propagating for max. */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessera/tessera.h"

#define BENCH_NAME "bench_reduce"
#include "bench/bench_util.h"

enum { N = 4096 };                 /* 4096 x 4096 f32 = 64 MiB */
static const size_t COUNT = (size_t)N * N;
static int reps = 15, no_interp;
static const char *only; /* run the cases whose name contains it */

typedef struct data {
  float *f;       /* 4096 x 4096 f32 */
  uint16_t *h;    /* 4096 x 8192 bf16 (the same 64 MiB) */
  float *out;     /* N floats */
  float *scan;    /* N x N floats */
  volatile float sink;
} data_t;

/* ---- C references ------------------------------------------------------ */

static void sum_plain(void *p) {
  data_t *d = p;
  float s = 0;
  for (size_t i = 0; i < COUNT; i++) s += d->f[i];
  d->sink = s;
}

static float hsum8(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
  lo = _mm_add_ps(lo, hi);
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_shuffle_ps(lo, lo, 1));
  return _mm_cvtss_f32(lo);
}

static void sum_best(void *p) {
  data_t *d = p;
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i < COUNT; i += 32) {
    a0 = _mm256_add_ps(a0, _mm256_load_ps(d->f + i));
    a1 = _mm256_add_ps(a1, _mm256_load_ps(d->f + i + 8));
    a2 = _mm256_add_ps(a2, _mm256_load_ps(d->f + i + 16));
    a3 = _mm256_add_ps(a3, _mm256_load_ps(d->f + i + 24));
  }
  d->sink = hsum8(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
}

static void max_plain(void *p) {
  data_t *d = p;
  float m = -INFINITY;
  for (size_t i = 0; i < COUNT; i++) {
    float v = d->f[i];
    m = (v > m || v != v) ? v : m;
  }
  d->sink = m;
}

/* max with NaN propagation: vmaxps plus an unordered-compare flag. */
static void max_best(void *p) {
  data_t *d = p;
  __m256 m0 = _mm256_set1_ps(-INFINITY), m1 = m0, m2 = m0, m3 = m0;
  __m256 nan = _mm256_setzero_ps();
  for (size_t i = 0; i < COUNT; i += 32) {
    __m256 x0 = _mm256_load_ps(d->f + i), x1 = _mm256_load_ps(d->f + i + 8);
    __m256 x2 = _mm256_load_ps(d->f + i + 16), x3 = _mm256_load_ps(d->f + i + 24);
    m0 = _mm256_max_ps(m0, x0);
    m1 = _mm256_max_ps(m1, x1);
    m2 = _mm256_max_ps(m2, x2);
    m3 = _mm256_max_ps(m3, x3);
    nan = _mm256_or_ps(nan, _mm256_or_ps(_mm256_cmp_ps(x0, x1, _CMP_UNORD_Q),
                                         _mm256_cmp_ps(x2, x3, _CMP_UNORD_Q)));
  }
  m0 = _mm256_max_ps(_mm256_max_ps(m0, m1), _mm256_max_ps(m2, m3));
  float out[8];
  _mm256_storeu_ps(out, m0);
  float m = out[0];
  for (int i = 1; i < 8; i++) m = out[i] > m ? out[i] : m;
  d->sink = _mm256_movemask_ps(nan) ? NAN : m;
}

static void bf16_sum_plain(void *p) {
  data_t *d = p;
  float s = 0;
  for (size_t i = 0; i < 2 * COUNT; i++) {
    uint32_t bits = (uint32_t)d->h[i] << 16;
    float v;
    memcpy(&v, &bits, 4);
    s += v;
  }
  d->sink = s;
}

static inline __m256 bf16x8(const uint16_t *p) {
  __m256i w = _mm256_cvtepu16_epi32(_mm_load_si128((const __m128i *)p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}

static void bf16_sum_best(void *p) {
  data_t *d = p;
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i < 2 * COUNT; i += 32) {
    a0 = _mm256_add_ps(a0, bf16x8(d->h + i));
    a1 = _mm256_add_ps(a1, bf16x8(d->h + i + 8));
    a2 = _mm256_add_ps(a2, bf16x8(d->h + i + 16));
    a3 = _mm256_add_ps(a3, bf16x8(d->h + i + 24));
  }
  d->sink = hsum8(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
}

static void rowsum_plain(void *p) {
  data_t *d = p;
  for (size_t r = 0; r < N; r++) {
    float s = 0;
    for (size_t c = 0; c < N; c++) s += d->f[r * N + c];
    d->out[r] = s;
  }
}

static void rowsum_best(void *p) {
  data_t *d = p;
  for (size_t r = 0; r < N; r++) {
    const float *row = d->f + r * N;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t c = 0; c < N; c += 32) {
      a0 = _mm256_add_ps(a0, _mm256_load_ps(row + c));
      a1 = _mm256_add_ps(a1, _mm256_load_ps(row + c + 8));
      a2 = _mm256_add_ps(a2, _mm256_load_ps(row + c + 16));
      a3 = _mm256_add_ps(a3, _mm256_load_ps(row + c + 24));
    }
    d->out[r] = hsum8(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  }
}

/* Column sums: rows streamed into an N-float accumulator (gcc vectorizes
 * the inner loop: no reassociation is needed). */
static void colsum_plain(void *p) {
  data_t *d = p;
  for (size_t c = 0; c < N; c++) d->out[c] = 0;
  for (size_t r = 0; r < N; r++)
    for (size_t c = 0; c < N; c++) d->out[c] += d->f[r * N + c];
}

/* Column sums: 8 whole rows at a time (8 sequential streams) added into
 * the N-float accumulator (16 KiB, in L1). Strips of 1024 columns walked
 * over all rows (4 rows a step) ran at 15.6-17 GB/s, this at 22-24. */
static void colsum_best(void *p) {
  data_t *d = p;
  for (size_t c = 0; c < N; c += 8) _mm256_store_ps(d->out + c, _mm256_setzero_ps());
  for (size_t r = 0; r < N; r += 8)
    for (size_t c = 0; c < N; c += 8) {
      const float *x = d->f + r * N + c;
      __m256 s0 = _mm256_add_ps(_mm256_load_ps(x), _mm256_load_ps(x + N));
      __m256 s1 = _mm256_add_ps(_mm256_load_ps(x + 2 * N), _mm256_load_ps(x + 3 * N));
      __m256 s2 = _mm256_add_ps(_mm256_load_ps(x + 4 * N), _mm256_load_ps(x + 5 * N));
      __m256 s3 = _mm256_add_ps(_mm256_load_ps(x + 6 * N), _mm256_load_ps(x + 7 * N));
      __m256 s = _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3));
      _mm256_store_ps(d->out + c, _mm256_add_ps(_mm256_load_ps(d->out + c), s));
    }
}

/* cumsum along rows: the sequential scan (what numpy does). */
static void cumsum_plain(void *p) {
  data_t *d = p;
  for (size_t r = 0; r < N; r++) {
    float s = 0;
    for (size_t c = 0; c < N; c++) d->scan[r * N + c] = s += d->f[r * N + c];
  }
}

/* ---- tessera ----------------------------------------------------------- */

static tsr_executable_t *prepare(tsr_context_t *ctx, tsr_ir_module_t *m, tsr_backend_t backend,
                                 double *out_seconds) {
  tsr_executable_options_t eo;
  tsr_executable_options_initialize(&eo);
  eo.backend = backend;
  eo.run.check = false;
  tsr_executable_t *exe = NULL;
  double t0 = now_seconds();
  die_on_error(tsr_executable_create(ctx, tsr_ir_module_kernel(m, 0), &eo, &exe), "prepare");
  *out_seconds = now_seconds() - t0;
  return exe;
}

typedef struct run_ctx {
  tsr_executable_t *exe;
  tsr_array_t *ops[2];
} run_ctx_t;

static void run_exe(void *p) {
  run_ctx_t *r = p;
  die_on_error(tsr_executable_run(r->exe, r->ops, 2, NULL, NULL), "run");
}

static double gbs(double bytes, double seconds) { return bytes / seconds / 1e9; }

static void line(const char *what, double t, double bytes, double best_c) {
  printf("  %-40s %8.2f ms %7.2f GB/s %6.1f%%\n", what, t * 1e3, gbs(bytes, t),
         100.0 * best_c / t);
}

typedef struct bench_case {
  const char *name;
  bool scan;
  tsr_kernels_op_t op;
  tsr_dtype_t dtype;
  uint32_t axes_mask; /* reduce; scan: the axis */
  void (*plain)(void *), (*best)(void *);
} bench_case_t;

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--quick") == 0) reps = 3;
    else if (strcmp(argv[i], "--no-interp") == 0) no_interp = 1;
    else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) reps = atoi(argv[++i]);
    else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc) only = argv[++i];
    else {
      fprintf(stderr, "usage: bench_reduce [--quick] [--no-interp] [--reps N] [--only TEXT]\n");
      return 2;
    }
  }
  data_t d = {0};
  d.f = bench_alloc(COUNT * 4);
  d.h = bench_alloc(COUNT * 4);
  d.out = bench_alloc(N * 4);
  d.scan = bench_alloc(COUNT * 4);
  bench_fill(d.f, COUNT, 1);
  for (size_t i = 0; i < 2 * COUNT; i++) { /* bf16 of values in [-1, 1) */
    uint32_t bits;
    float v = d.f[i / 2] * (i % 2 ? 0.5f : 1.0f);
    memcpy(&bits, &v, 4);
    d.h[i] = (uint16_t)(bits >> 16);
  }
  memset(d.scan, 0, COUNT * 4);

  tsr_context_t *ctx = NULL;
  tsr_context_options_t co;
  tsr_context_options_initialize(&co);
  co.disk_cache = false;
  die_on_error(tsr_context_create(&co, &ctx), "context");

  static const bench_case_t cases[] = {
      {"sum f32 (all axes)", false, TSR_KERNELS_SUM, TSR_DTYPE_F32, 0, sum_plain, sum_best},
      {"max f32 (all axes)", false, TSR_KERNELS_MAX, TSR_DTYPE_F32, 0, max_plain, max_best},
      {"sum bf16 (all axes, 4096 x 8192)", false, TSR_KERNELS_SUM, TSR_DTYPE_BF16, 0,
       bf16_sum_plain, bf16_sum_best},
      {"row sums f32 (axis 1)", false, TSR_KERNELS_SUM, TSR_DTYPE_F32, 2, rowsum_plain,
       rowsum_best},
      {"column sums f32 (axis 0)", false, TSR_KERNELS_SUM, TSR_DTYPE_F32, 1, colsum_plain,
       colsum_best},
      {"cumsum f32 (axis 1)", true, TSR_KERNELS_SUM, TSR_DTYPE_F32, 1, cumsum_plain, NULL},
  };
  printf("64 MiB inputs; best of %d runs; GB/s = input bytes / time; %% = of the best C\n",
         reps);
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    const bench_case_t *bc = &cases[c];
    if (only && !strstr(bc->name, only)) continue;
    int64_t dims[2] = {N, bc->dtype == TSR_DTYPE_BF16 ? 2 * N : N};
    double bytes = (double)COUNT * 4;
    tsr_ir_module_t *m = NULL;
    if (bc->scan) {
      tsr_kernels_cumulative_params_t p;
      tsr_kernels_cumulative_params_initialize(&p);
      p.op = bc->op, p.dtype = bc->dtype, p.rank = 2, p.axis = (int32_t)bc->axes_mask;
      memcpy(p.dims, dims, sizeof dims);
      die_on_error(tsr_kernels_cumulative(&p, &m), "generate");
    } else {
      tsr_kernels_reduce_params_t p;
      tsr_kernels_reduce_params_initialize(&p);
      p.op = bc->op, p.dtype = bc->dtype, p.rank = 2, p.axes_mask = bc->axes_mask;
      p.keepdims = true;
      memcpy(p.dims, dims, sizeof dims);
      die_on_error(tsr_kernels_reduce(&p, &m), "generate");
    }
    tsr_ir_kernel_t *k = tsr_ir_module_kernel(m, 0);
    tsr_ir_operand_info_t oi;
    tsr_ir_kernel_operand_info(k, 1, &oi);
    tsr_array_t in = {bc->dtype, 2, {dims[0], dims[1]}, bc->dtype == TSR_DTYPE_BF16
                                                            ? (void *)d.h
                                                            : (void *)d.f};
    tsr_array_t out;
    die_on_error(tsr_array_initialize(oi.dtype, oi.rank, oi.dims, &out), "output");
    /* The C references and the compiled kernel run in turn, `reps` rounds,
     * each keeping its best: a change of load on the shared machine hits
     * all of them alike. The interpreter runs after, 3 rounds. */
    double t_prep = 0;
    run_ctx_t cpu = {prepare(ctx, m, TSR_BACKEND_CPU, &t_prep), {&in, &out}};
    run_exe(&cpu); /* warm */
    double t_plain = 1e30, t_intr = 1e30, t_cpu = 1e30;
    for (int i = 0; i < reps; i++) {
      double t = best_per_call(bc->plain, &d, 1, 1);
      t_plain = t < t_plain ? t : t_plain;
      if (bc->best) {
        t = best_per_call(bc->best, &d, 1, 1);
        t_intr = t < t_intr ? t : t_intr;
      }
      t = best_per_call(run_exe, &cpu, 1, 1);
      t_cpu = t < t_cpu ? t : t_cpu;
    }
    double t_best = t_plain < t_intr ? t_plain : t_intr;
    printf("== %s\n", bc->name);
    line("C plain (-O3 -march=native)", t_plain, bytes, t_best);
    if (bc->best) line("C best (intrinsics)", t_intr, bytes, t_best);
    char what[96];
    snprintf(what, sizeof what, "tessera compiled (prepare %.0f ms)", t_prep * 1e3);
    line(what, t_cpu, bytes, t_best);
    tsr_executable_destroy(cpu.exe);
    if (!no_interp) {
      run_ctx_t r = {prepare(ctx, m, TSR_BACKEND_INTERP, &t_prep), {&in, &out}};
      run_exe(&r);
      line("tessera interpreter", best_per_call(run_exe, &r, 1, 3), bytes, t_best);
      tsr_executable_destroy(r.exe);
    }
    tsr_array_deinitialize(&out);
    tsr_ir_module_destroy(m);
  }
  tsr_context_destroy(ctx);
  free(d.f);
  free(d.h);
  free(d.out);
  free(d.scan);
  return 0;
}
