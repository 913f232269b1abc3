/* Compiled kernels next to hand-written C and the interpreter, in one run
 * (docs/benchmarks.md, "Compiled kernels"): elementwise add, row sum and full
 * sum over 64 MiB f32 arrays, and a 1024^3 f32 matmul. The C references are
 * memcpy, plain loops (what gcc -O3 makes of them for generic x86-64) and
 * hand-written AVX2/FMA loops; the kernels are bench/kernels/lowered.tsr.
 *
 * Usage: bench_lower [--quick] [--no-interp]
 * The compiled side needs a build with MLIR (meson -Dmlir=enabled); the disk
 * cache is off in this process, so each compile is cold (warm starts are a
 * whole-process measure: bench/run.sh times them with hyperfine). */
#define _XOPEN_SOURCE 700 /* nftw */
#include <ftw.h>
#include <immintrin.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "interp/interp_runtime.h"
#include "runtime/runtime_internal.h"
#include "tessera/tessera.h"

#define BENCH_NAME "bench_lower"
#include "bench/bench_util.h"

#ifndef TSR_BENCH_SOURCE_ROOT
#define TSR_BENCH_SOURCE_ROOT "."
#endif

enum { N = 4096 }; /* 4096 x 4096 f32 = 64 MiB */
enum { MM = 1024 };

static int quick, no_interp;

/* Best time of `reps` calls of fn(ctx). */
static double best_once(void (*fn)(void *), void *ctx, int reps) {
  return best_per_call(fn, ctx, 1, reps);
}

static float *floats(size_t n) { return bench_alloc(n * sizeof(float)); }

/* ---- C references ---------------------------------------------------------- */

typedef struct arrays {
  float *a, *b, *c, *rows;
  float total;
} arrays_t;

static void ref_memcpy(void *p) {
  arrays_t *x = p;
  memcpy(x->c, x->a, (size_t)N * N * sizeof(float));
}

static void ref_add_plain(void *p) {
  arrays_t *x = p;
  for (size_t i = 0; i < (size_t)N * N; i++) x->c[i] = x->a[i] + x->b[i];
}

__attribute__((target("avx2"))) static void ref_add_avx2(void *p) {
  arrays_t *x = p;
  for (size_t i = 0; i < (size_t)N * N; i += 8)
    _mm256_store_ps(x->c + i, _mm256_add_ps(_mm256_load_ps(x->a + i), _mm256_load_ps(x->b + i)));
}

static void ref_rowsum_plain(void *p) {
  arrays_t *x = p;
  for (size_t r = 0; r < N; r++) {
    float s = 0;
    for (size_t j = 0; j < N; j++) s += x->a[r * N + j];
    x->rows[r] = s;
  }
}

__attribute__((target("avx2"))) static float hsum256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}

/* Four independent accumulators hide the add latency. */
__attribute__((target("avx2"))) static float sum_avx2(const float *p, size_t n) {
  __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  for (size_t j = 0; j < n; j += 32) {
    s0 = _mm256_add_ps(s0, _mm256_load_ps(p + j));
    s1 = _mm256_add_ps(s1, _mm256_load_ps(p + j + 8));
    s2 = _mm256_add_ps(s2, _mm256_load_ps(p + j + 16));
    s3 = _mm256_add_ps(s3, _mm256_load_ps(p + j + 24));
  }
  return hsum256(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
}

static void ref_rowsum_avx2(void *p) {
  arrays_t *x = p;
  for (size_t r = 0; r < N; r++) x->rows[r] = sum_avx2(x->a + r * N, N);
}

static void ref_sum_plain(void *p) {
  arrays_t *x = p;
  float s = 0;
  for (size_t i = 0; i < (size_t)N * N; i++) s += x->a[i];
  x->total = s;
}

static void ref_sum_avx2(void *p) {
  arrays_t *x = p;
  x->total = sum_avx2(x->a, (size_t)N * N);
}

typedef struct matmul {
  float *a, *b, *c;
} matmul_t;

static void ref_matmul_naive(void *p) {
  matmul_t *m = p;
  for (size_t i = 0; i < MM; i++)
    for (size_t j = 0; j < MM; j++) {
      float s = 0;
      for (size_t k = 0; k < MM; k++) s += m->a[i * MM + k] * m->b[k * MM + j];
      m->c[i * MM + j] = s;
    }
}

/* 64 x 256 blocks of C, i-k-j inside, 8-wide FMA over j. */
__attribute__((target("avx2,fma"))) static void ref_matmul_blocked(void *p) {
  matmul_t *m = p;
  enum { BI = 64, BJ = 256, BK = 256 };
  memset(m->c, 0, (size_t)MM * MM * sizeof(float));
  for (size_t i0 = 0; i0 < MM; i0 += BI)
    for (size_t k0 = 0; k0 < MM; k0 += BK)
      for (size_t j0 = 0; j0 < MM; j0 += BJ)
        for (size_t i = i0; i < i0 + BI; i++)
          for (size_t k = k0; k < k0 + BK; k++) {
            __m256 aik = _mm256_set1_ps(m->a[i * MM + k]);
            const float *brow = m->b + k * MM;
            float *crow = m->c + i * MM;
            for (size_t j = j0; j < j0 + BJ; j += 8)
              _mm256_store_ps(crow + j, _mm256_fmadd_ps(aik, _mm256_load_ps(brow + j),
                                                        _mm256_load_ps(crow + j)));
          }
}

/* ---- tessera kernels --------------------------------------------------------- */

typedef struct tessera_run {
  const tsr_interp_program_t *program;
  tsr_array_t **operands;
  size_t count;
} tessera_run_t;

static void run_interp(void *p) {
  tessera_run_t *r = p;
  die_on_error(tsr_interp_program_run(r->program, r->operands, r->count, NULL), "run");
}

typedef struct compiled_run {
  const tsr_compiled_kernel_t *kernel;
  tsr_array_t **operands;
  size_t count;
  const tsr_interp_options_t *options; /* NULL: one core */
} compiled_run_t;

static void run_compiled(void *p) {
  compiled_run_t *r = p;
  die_on_error(tsr_compiled_kernel_run(r->kernel, r->operands, r->count, r->options),
               "compiled run");
}

/* Options for a run on `cores` simulated cores (threads). */
static tsr_interp_options_t cores_options(uint32_t cores) {
  tsr_interp_options_t o;
  tsr_interp_options_initialize(&o);
  o.cores = cores;
  return o;
}

/* Compiles `k` (the disk cache is off in this process: every compile is
 * cold) and returns the seconds it took. */
static tsr_compiled_kernel_t *compile(const tsr_ir_kernel_t *k, double *out_seconds) {
  tsr_compiled_kernel_t *c = NULL;
  double t0 = now_seconds();
  tsr_status_t s = tsr_runtime_compile(k, NULL, &c);
  *out_seconds = now_seconds() - t0;
  if (s) {
    printf("  (cannot compile @%s: %s)\n", tsr_ir_kernel_name(k), tsr_status_message(s));
    tsr_status_free(s);
    return NULL;
  }
  return c;
}

/* Binds arrays to `kernel`'s operands: `data[i]` for operand i (borrowed). */
static void bind(const tsr_ir_kernel_t *kernel, float *const *data, tsr_array_t *arrays,
                 tsr_array_t **ptrs, size_t *out_count) {
  size_t n = 0;
  for (size_t i = 0; i < tsr_ir_kernel_operand_count(kernel); i++) {
    tsr_ir_operand_info_t info;
    tsr_ir_kernel_operand_info(kernel, i, &info);
    if (info.role == TSR_ROLE_SCRATCH) continue;
    memset(&arrays[n], 0, sizeof arrays[n]);
    arrays[n].dtype = info.dtype;
    arrays[n].rank = info.rank;
    memcpy(arrays[n].dims, info.dims, sizeof info.dims);
    arrays[n].data = data[n];
    ptrs[n] = &arrays[n];
    n++;
  }
  *out_count = n;
}

/* The .tsr files under kernels/ (nftw callback). */
static char **kernel_files;
static size_t num_kernel_files;

static int collect_tsr(const char *path, const struct stat *st, int type, struct FTW *ftw) {
  (void)st;
  (void)ftw;
  size_t n = strlen(path);
  if (type != FTW_F || n < 4 || strcmp(path + n - 4, ".tsr") != 0) return 0;
  char **grown = realloc(kernel_files, (num_kernel_files + 1) * sizeof *grown);
  if (!grown) return 1;
  kernel_files = grown;
  kernel_files[num_kernel_files] = strdup(path);
  return kernel_files[num_kernel_files++] ? 0 : 1;
}

static int compare_paths(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static tsr_ir_kernel_t *find(tsr_ir_module_t *m, const char *name) {
  tsr_ir_kernel_t *k = NULL;
  die_on_error(tsr_runtime_select_kernel(m, name, &k), name);
  return k;
}

/* GB/s of `bytes` moved in `t` seconds. */
static double gbs(double bytes, double t) { return bytes / t * 1e-9; }

/* One line: name, time, GB/s and % of the reference. */
static void line(const char *what, double t, double bytes, double ref_gbs) {
  double g = gbs(bytes, t);
  if (ref_gbs > 0)
    printf("  %-34s %9.2f ms %8.2f GB/s %6.1f%%\n", what, t * 1e3, g, 100.0 * g / ref_gbs);
  else
    printf("  %-34s %9.2f ms %8.2f GB/s\n", what, t * 1e3, g);
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--quick") == 0) quick = 1;
    else if (strcmp(argv[i], "--no-interp") == 0) no_interp = 1;
    else {
      fprintf(stderr, "usage: bench_lower [--quick] [--no-interp]\n");
      return 2;
    }
  }
  int reps = quick ? 2 : 7;
  setenv("TESSERA_CACHE", "off", 1); /* every compile here is cold */
  arrays_t x = {floats((size_t)N * N), floats((size_t)N * N),
                floats((size_t)N * N), floats(N), 0};
  bench_fill(x.a, (size_t)N * N, 1);
  bench_fill(x.b, (size_t)N * N, 2);
  memset(x.c, 0, (size_t)N * N * sizeof(float));
  const double big = (double)N * N * sizeof(float);

  char path[4096];
  const char *root = getenv("TSR_SOURCE_ROOT");
  snprintf(path, sizeof path, "%s/bench/kernels/lowered.tsr", root ? root : TSR_BENCH_SOURCE_ROOT);
  tsr_ir_module_t *module = NULL;
  die_on_error(tsr_runtime_load_file(path, &module), path);

  /* Cold compiles: parse -> native for every kernel under kernels/. The
   * first one also opens the lowering library (MLIR and LLVM). */
  printf("== cold compile (parse, verify, lower, LLVM -O2, link .so, load), ms\n");
  {
    double t0 = now_seconds();
    tsr_ir_module_t *probe = NULL;
    die_on_error(tsr_runtime_load_file(path, &probe), path);
    double t_first = 0;
    tsr_compiled_kernel_t *c = compile(find(probe, "add_64mib"), &t_first);
    printf("  %-34s %9.1f ms (includes opening libtessera-lower.so)\n", "first compile: add_64mib",
           t_first * 1e3);
    tsr_compiled_kernel_destroy(c);
    tsr_ir_module_destroy(probe);
    (void)t0;
    /* Every kernel file under kernels/ (examples and library), sorted. */
    char kdir[4096];
    snprintf(kdir, sizeof kdir, "%s/kernels", root ? root : TSR_BENCH_SOURCE_ROOT);
    if (nftw(kdir, collect_tsr, 16, FTW_PHYS) != 0) {
      fprintf(stderr, "bench_lower: cannot list the kernel files under %s\n", kdir);
      return 1;
    }
    qsort(kernel_files, num_kernel_files, sizeof *kernel_files, compare_paths);
    for (size_t e = 0; e < num_kernel_files; e++) {
      const char *ep = kernel_files[e];
      tsr_ir_module_t *em = NULL;
      double tp0 = now_seconds();
      die_on_error(tsr_ir_module_parse_file(ep, &em), ep);
      double parse = now_seconds() - tp0;
      for (size_t i = 0; i < tsr_ir_module_kernel_count(em); i++) {
        tsr_ir_kernel_t *k = tsr_ir_module_kernel(em, i);
        double t = 0;
        tsr_compiled_kernel_t *ck = compile(k, &t);
        printf("  %-34s %9.1f ms\n", tsr_ir_kernel_name(k), (t + (i ? 0 : parse)) * 1e3);
        tsr_compiled_kernel_destroy(ck);
      }
      tsr_ir_module_destroy(em);
      free(kernel_files[e]);
    }
    free(kernel_files);
  }

  double t_memcpy = best_once(ref_memcpy, &x, reps);
  double memcpy_gbs = gbs(2 * big, t_memcpy);
  printf("== 64 MiB f32 (memcpy: %.2f GB/s read + write)\n", memcpy_gbs);

  struct {
    const char *kernel;
    double bytes;
    void (*plain)(void *), (*avx2)(void *);
    float *const data[3];
  } streams[] = {
      {"add_64mib", 3 * big, ref_add_plain, ref_add_avx2, {x.a, x.b, x.c}},
      {"rowsum_64mib", big + N * 4.0, ref_rowsum_plain, ref_rowsum_avx2, {x.a, x.rows}},
      {"sum_64mib", big + 4.0, ref_sum_plain, ref_sum_avx2, {x.a, &x.total}},
  };
  for (size_t s = 0; s < sizeof streams / sizeof streams[0]; s++) {
    printf("%s:\n", streams[s].kernel);
    double t_plain = best_once(streams[s].plain, &x, reps);
    double t_avx2 = best_once(streams[s].avx2, &x, reps);
    /* add is measured against memcpy, the reductions against AVX2 */
    double ref = s == 0 ? memcpy_gbs : gbs(streams[s].bytes, t_avx2);
    line("C, plain loop (gcc -O3)", t_plain, streams[s].bytes, ref);
    line("C, AVX2 by hand", t_avx2, streams[s].bytes, ref);
    tsr_ir_kernel_t *k = find(module, streams[s].kernel);
    tsr_array_t arrays[4];
    tsr_array_t *ptrs[4];
    size_t count = 0;
    bind(k, streams[s].data, arrays, ptrs, &count);
    double t_compile = 0;
    tsr_compiled_kernel_t *ck = compile(k, &t_compile);
    if (ck) {
      compiled_run_t r = {ck, ptrs, count, NULL};
      run_compiled(&r);
      line("tessera compiled (cpu backend)", best_once(run_compiled, &r, reps), streams[s].bytes,
           ref);
      tsr_interp_options_t two = cores_options(2);
      r.options = &two;
      run_compiled(&r);
      line("tessera compiled, --cores 2", best_once(run_compiled, &r, reps), streams[s].bytes, ref);
      tsr_compiled_kernel_destroy(ck);
    }
    if (!no_interp) {
      tsr_interp_options_t o;
      tsr_interp_options_initialize(&o);
      tsr_interp_program_t *p = NULL;
      die_on_error(tsr_interp_program_prepare(k, &o, &p), "prepare");
      tessera_run_t r = {p, ptrs, count};
      run_interp(&r);
      line("tessera interpreter (checks on)", best_once(run_interp, &r, reps), streams[s].bytes,
           ref);
      tsr_interp_program_destroy(p);
    }
  }

  printf("== matmul %d^3 f32 (GFLOP/s)\n", MM);
  matmul_t m = {floats((size_t)MM * MM), floats((size_t)MM * MM),
                floats((size_t)MM * MM)};
  bench_fill(m.a, (size_t)MM * MM, 3);
  bench_fill(m.b, (size_t)MM * MM, 4);
  const double flop = 2.0 * MM * MM * MM;
  double t_naive = best_once(ref_matmul_naive, &m, 1);
  printf("  %-34s %9.2f ms %8.2f GFLOP/s\n", "C, naive i-j-k", t_naive * 1e3, flop / t_naive * 1e-9);
  double t_blocked = best_once(ref_matmul_blocked, &m, reps);
  printf("  %-34s %9.2f ms %8.2f GFLOP/s\n", "C, blocked AVX2+FMA by hand", t_blocked * 1e3,
         flop / t_blocked * 1e-9);
  {
    tsr_ir_kernel_t *k = find(module, "matmul_1024");
    float *const data[3] = {m.a, m.b, m.c};
    tsr_array_t arrays[3];
    tsr_array_t *ptrs[3];
    size_t count = 0;
    bind(k, data, arrays, ptrs, &count);
    double t_compile = 0;
    tsr_compiled_kernel_t *ck = compile(k, &t_compile);
    if (ck) {
      compiled_run_t r = {ck, ptrs, count, NULL};
      run_compiled(&r);
      double t = best_once(run_compiled, &r, reps);
      printf("  %-34s %9.2f ms %8.2f GFLOP/s\n", "tessera compiled (cpu backend)", t * 1e3,
             flop / t * 1e-9);
      tsr_interp_options_t two = cores_options(2);
      r.options = &two;
      run_compiled(&r);
      t = best_once(run_compiled, &r, reps);
      printf("  %-34s %9.2f ms %8.2f GFLOP/s\n", "tessera compiled, --cores 2", t * 1e3,
             flop / t * 1e-9);
      tsr_compiled_kernel_destroy(ck);
    }
  }
  if (!no_interp) {
    tsr_ir_kernel_t *k = find(module, "matmul_1024");
    float *const data[3] = {m.a, m.b, m.c};
    tsr_array_t arrays[3];
    tsr_array_t *ptrs[3];
    size_t count = 0;
    bind(k, data, arrays, ptrs, &count);
    tsr_interp_options_t o;
    tsr_interp_options_initialize(&o);
    tsr_interp_program_t *p = NULL;
    die_on_error(tsr_interp_program_prepare(k, &o, &p), "prepare");
    tessera_run_t r = {p, ptrs, count};
    double t = best_once(run_interp, &r, quick ? 1 : 3);
    printf("  %-34s %9.2f ms %8.2f GFLOP/s\n", "tessera interpreter (checks on)", t * 1e3,
           flop / t * 1e-9);
    tsr_interp_program_destroy(p);
  }
  tsr_ir_module_destroy(module);
  free(x.a), free(x.b), free(x.c), free(x.rows);
  free(m.a), free(m.b), free(m.c);
  return 0;
}
