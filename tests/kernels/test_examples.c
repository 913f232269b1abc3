/* The example kernels (the .tsr files in kernels/examples/) run in the
 * interpreter and are compared with plain C references, under several
 * interpreter options; and the interpreter's kernel errors (small kernels in
 * tests/kernels/) are checked for their status codes and for what their
 * messages must name.
 *
 * Tolerances (also in kernels/examples/README.md):
 * - elementwise results, max/min reductions, integer and bf16 results are
 *   compared exactly: each is one correctly rounded operation (or none), so
 *   tessera must give the bits C gives;
 * - f32 sums and matmul: |got - ref| <= 1e-5 * sum|terms| + 1e-6, with ref
 *   computed in double. The rounding error of any f32 summation order is
 *   bounded by about n * 2^-24 * sum|terms| (3e-5 * sum|terms| for n = 512)
 *   and on random data sits far below; it is relative to sum|terms|, not to
 *   |ref|, because cancellation makes |ref| arbitrarily small while the
 *   rounding error stays proportional to the terms. A missing or doubled term
 *   of size > 1e-5 * sum|terms| (about 3e-3 here, against terms of mean
 *   size 0.5) is caught;
 * - softmax: |got - ref| <= 1e-5 * |ref| + 1e-7: every term is positive (no
 *   cancellation), exp is accurate to a few ulp and the row sums to ~1e-6. */
#include <ctype.h>
#include <math.h>

#include "interp/interp_runtime.h"
#include "tests/harness.h"

#define MAX_OPERANDS 8

/* ---- Loading kernels and making operands --------------------------------- */

static void source_path(char *buf, size_t size, const char *rel) {
  const char *root = getenv("TSR_SOURCE_ROOT");
  snprintf(buf, size, "%s/%s", root ? root : ".", rel);
}

/* A kernel with one array bound to each non-scratch operand. */
typedef struct bound_kernel {
  tsr_ir_module_t *module;
  tsr_ir_kernel_t *kernel;
  size_t num_operands; /* non-scratch operands: prefetch, in, out */
  tsr_ir_operand_info_t info[MAX_OPERANDS];
  tsr_array_t arrays[MAX_OPERANDS];
  tsr_array_t *ptrs[MAX_OPERANDS];
} bound_kernel_t;

static void unbind(bound_kernel_t *bk) {
  for (size_t i = 0; i < bk->num_operands; i++)
    tsr_array_deinitialize(&bk->arrays[i]);
  tsr_ir_module_destroy(bk->module);
  memset(bk, 0, sizeof *bk);
}

/* Loads `rel` (under $TSR_SOURCE_ROOT), selects `name` and binds operands:
 * prefetch and inputs get tsr_runtime_random_array(seed + operand index),
 * outputs zero arrays. Records a test failure and returns false on error. */
static bool bind(const char *rel, const char *name, uint64_t seed,
                 bound_kernel_t *bk) {
  memset(bk, 0, sizeof *bk);
  char path[4096];
  source_path(path, sizeof path, rel);
  tsr_status_t s = tsr_runtime_load_file(path, &bk->module);
  if (s) {
    TSR_FAIL_AT("loading %s: %s", path, tsr_status_message(s));
    tsr_status_free(s);
    return false;
  }
  s = tsr_runtime_select_kernel(bk->module, name, &bk->kernel);
  if (s) {
    TSR_FAIL_AT("selecting @%s: %s", name, tsr_status_message(s));
    tsr_status_free(s);
    unbind(bk);
    return false;
  }
  size_t count = tsr_ir_kernel_operand_count(bk->kernel);
  for (size_t i = 0; i < count; i++) {
    tsr_ir_operand_info_t info;
    tsr_ir_kernel_operand_info(bk->kernel, i, &info);
    if (info.role == TSR_ROLE_SCRATCH) continue;
    if (bk->num_operands == MAX_OPERANDS) {
      TSR_FAIL_AT("@%s has more than %d operands", name, MAX_OPERANDS);
      unbind(bk);
      return false;
    }
    size_t k = bk->num_operands;
    if (info.role == TSR_ROLE_OUT)
      s = tsr_array_initialize(info.dtype, info.rank, info.dims, &bk->arrays[k]);
    else
      s = tsr_runtime_random_array(&info, seed + k, &bk->arrays[k]);
    if (s) {
      TSR_FAIL_AT("operand %%%s: %s", info.name, tsr_status_message(s));
      tsr_status_free(s);
      unbind(bk);
      return false;
    }
    bk->info[k] = info;
    bk->ptrs[k] = &bk->arrays[k];
    bk->num_operands++;
  }
  return true;
}

/* The array bound to operand `name`. A reference asking for an operand the
 * kernel lacks is a bug in this file: bail out (TAP) rather than crash. */
static const tsr_array_t *operand(const bound_kernel_t *bk, const char *name) {
  for (size_t i = 0; i < bk->num_operands; i++)
    if (strcmp(bk->info[i].name, name) == 0) return &bk->arrays[i];
  printf("Bail out! @%s has no operand %%%s\n",
         tsr_ir_kernel_name(bk->kernel), name);
  exit(1);
}

static const float *f32_data(const tsr_array_t *a) { return a->data; }
static const int32_t *i32_data(const tsr_array_t *a) { return a->data; }
static const uint16_t *u16_data(const tsr_array_t *a) { return a->data; }

/* bf16 <-> f32, written here so the reference does not lean on tessera's. */
static float bf16_to_float(uint16_t bits) {
  uint32_t u = (uint32_t)bits << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static uint16_t float_to_bf16(float f) { /* round to nearest even */
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

static double element_as_double(const tsr_array_t *a, int64_t i) {
  switch (a->dtype) {
    case TSR_DTYPE_F32: return ((const float *)a->data)[i];
    case TSR_DTYPE_I32: return ((const int32_t *)a->data)[i];
    case TSR_DTYPE_BF16: return bf16_to_float(((const uint16_t *)a->data)[i]);
    default: return NAN;
  }
}

/* ---- Running ------------------------------------------------------------- */

typedef struct run_config {
  const char *label;
  tsr_uninit_mode_t uninit;
  bool shuffle_parallel;
} run_config_t;

/* Every example must give the reference results under each of these. */
static const run_config_t kRunConfigs[] = {
    {"uninit=nan, checks on", TSR_UNINIT_NAN, false},
    {"uninit=zero", TSR_UNINIT_ZERO, false},
    {"shuffle_parallel", TSR_UNINIT_NAN, true},
};

/* Prepares with `options` and runs once, warnings to `warning_stream`
 * (NULL: stderr). Outputs are first filled with 0xff bytes (NaN / -1), so
 * an element the kernel fails to write shows up. */
static tsr_status_t prepare_and_run_to(const bound_kernel_t *bk,
                                       const tsr_interp_options_t *options,
                                       FILE *warning_stream, tsr_interp_stats_t *out_stats) {
  for (size_t i = 0; i < bk->num_operands; i++)
    if (bk->info[i].role == TSR_ROLE_OUT)
      memset(bk->arrays[i].data, 0xff, tsr_array_byte_size(&bk->arrays[i]));
  tsr_interp_program_t *program = NULL;
  TSR_RETURN_IF_ERROR(tsr_interp_program_prepare(bk->kernel, options, &program));
  tsr_interp_options_t defaults;
  tsr_interp_options_initialize(&defaults);
  tsr_interp_run_options_t ro;
  tsr_interp_run_options_of(options ? options : &defaults, &ro);
  ro.warning_stream = warning_stream;
  tsr_status_t s =
      tsr_interp_program_run_with(program, bk->ptrs, bk->num_operands, &ro, out_stats, NULL);
  tsr_interp_program_destroy(program);
  return s;
}

static tsr_status_t prepare_and_run(const bound_kernel_t *bk,
                                    const tsr_interp_options_t *options,
                                    tsr_interp_stats_t *out_stats) {
  return prepare_and_run_to(bk, options, NULL, out_stats);
}

static void config_options(const run_config_t *config,
                           tsr_interp_options_t *options) {
  tsr_interp_options_initialize(options);
  options->uninit = config->uninit;
  options->shuffle_parallel = config->shuffle_parallel;
  options->shuffle_seed = 20261122;
}

/* ---- Expected results ---------------------------------------------------- */

/* Expected values of one output, in double, and for tolerance comparisons the
 * magnitude the rounding error scales with (NULL: compare exactly). */
typedef struct expected {
  double *value;
  double *scale;
  int64_t count;
  double rtol, atol; /* |got - value| <= rtol * scale + atol */
} expected_t;

static void expected_init(expected_t *e, int64_t count, double rtol,
                          double atol) {
  e->count = count;
  e->value = calloc((size_t)count, sizeof(double));
  e->scale = rtol > 0 || atol > 0 ? calloc((size_t)count, sizeof(double)) : NULL;
  e->rtol = rtol;
  e->atol = atol;
}

static void expected_free(expected_t *e) {
  free(e->value);
  free(e->scale);
  memset(e, 0, sizeof *e);
}

/* Compares `got` with `e`; reports up to 5 mismatches and their count. */
static void check_output(const char *label, const char *name,
                         const tsr_array_t *got, const expected_t *e) {
  if (tsr_array_element_count(got) != e->count) {
    TSR_FAIL_AT("%s: %%%s has %lld elements, expected %lld", label, name,
                (long long)tsr_array_element_count(got), (long long)e->count);
    return;
  }
  int64_t bad = 0;
  for (int64_t i = 0; i < e->count; i++) {
    double g = element_as_double(got, i), x = e->value[i];
    /* Exact means the same bits: -0 and +0 differ. */
    bool ok = e->scale ? fabs(g - x) <= e->rtol * e->scale[i] + e->atol
                       : g == x && signbit(g) == signbit(x);
    if (ok) continue;
    if (bad < 5)
      TSR_FAIL_AT("%s: %%%s[flat %lld] = %.9g, expected %.9g", label, name,
                  (long long)i, g, x);
    bad++;
  }
  if (bad > 5)
    TSR_FAIL_AT("%s: %%%s: %lld mismatches in all", label, name,
                (long long)bad);
}

/* ---- Plain C references -------------------------------------------------- *
 * Each fills one expected_t per output, in declaration order. */

static void ref_add(const bound_kernel_t *bk, expected_t *out) {
  const float *a = f32_data(operand(bk, "a")), *b = f32_data(operand(bk, "b"));
  expected_init(&out[0], 1024 * 512, 0, 0);
  for (int64_t i = 0; i < 1024 * 512; i++) out[0].value[i] = a[i] + b[i];
}

static void ref_matmul(const bound_kernel_t *bk, expected_t *out) {
  const float *a = f32_data(operand(bk, "a")), *b = f32_data(operand(bk, "b"));
  enum { M = 256, K = 512, N = 256 };
  expected_init(&out[0], M * N, 1e-5, 1e-6);
  for (int m = 0; m < M; m++)
    for (int n = 0; n < N; n++) {
      double sum = 0, mag = 0;
      for (int k = 0; k < K; k++) {
        double t = (double)a[m * K + k] * b[k * N + n];
        sum += t;
        mag += fabs(t);
      }
      out[0].value[m * N + n] = sum;
      out[0].scale[m * N + n] = mag;
    }
}

static void ref_softmax(const bound_kernel_t *bk, expected_t *out) {
  const float *x = f32_data(operand(bk, "x"));
  enum { R = 64, C = 256 };
  expected_init(&out[0], R * C, 1e-5, 1e-7);
  for (int r = 0; r < R; r++) {
    double mx = -INFINITY, sum = 0;
    for (int c = 0; c < C; c++) mx = fmax(mx, x[r * C + c]);
    for (int c = 0; c < C; c++) sum += exp(x[r * C + c] - mx);
    for (int c = 0; c < C; c++) {
      double y = exp(x[r * C + c] - mx) / sum;
      out[0].value[r * C + c] = y;
      out[0].scale[r * C + c] = y;
    }
  }
}

enum { RED_R = 256, RED_C = 512 };

static void ref_rowsum(const bound_kernel_t *bk, expected_t *out) {
  const float *x = f32_data(operand(bk, "x"));
  expected_init(&out[0], RED_R, 1e-5, 1e-6);
  for (int r = 0; r < RED_R; r++) {
    double sum = 0, mag = 0;
    for (int c = 0; c < RED_C; c++) {
      sum += x[r * RED_C + c];
      mag += fabs(x[r * RED_C + c]);
    }
    out[0].value[r] = sum;
    out[0].scale[r] = mag;
  }
}

static void ref_rowmax(const bound_kernel_t *bk, expected_t *out) {
  const float *x = f32_data(operand(bk, "x"));
  expected_init(&out[0], RED_R, 0, 0);
  for (int r = 0; r < RED_R; r++) {
    float mx = -INFINITY;
    for (int c = 0; c < RED_C; c++) mx = fmaxf(mx, x[r * RED_C + c]);
    out[0].value[r] = mx;
  }
}

static void ref_colsum(const bound_kernel_t *bk, expected_t *out) {
  const float *x = f32_data(operand(bk, "x"));
  expected_init(&out[0], RED_C, 1e-5, 1e-6);
  for (int c = 0; c < RED_C; c++) {
    double sum = 0, mag = 0;
    for (int r = 0; r < RED_R; r++) {
      sum += x[r * RED_C + c];
      mag += fabs(x[r * RED_C + c]);
    }
    out[0].value[c] = sum;
    out[0].scale[c] = mag;
  }
}

static void ref_colmax(const bound_kernel_t *bk, expected_t *out) {
  const float *x = f32_data(operand(bk, "x"));
  expected_init(&out[0], RED_C, 0, 0);
  for (int c = 0; c < RED_C; c++) {
    float mx = -INFINITY;
    for (int r = 0; r < RED_R; r++) mx = fmaxf(mx, x[r * RED_C + c]);
    out[0].value[c] = mx;
  }
}

static void ref_gather_prefetch(const bound_kernel_t *bk, expected_t *out) {
  const int32_t *tbl = i32_data(operand(bk, "tbl"));
  const float *x = f32_data(operand(bk, "x"));
  enum { B = 128, C = 128 };
  expected_init(&out[0], 1024 * C, 0, 0);
  for (int i = 0; i < 8; i++) {
    int src = tbl[i];
    if (src < 0 || src >= 8) {
      TSR_FAIL_AT("random prefetch value %d outside [0, 8)", src);
      return;
    }
    for (int e = 0; e < B * C; e++)
      out[0].value[i * B * C + e] = x[src * B * C + e] * 2.0f;
  }
}

static void ref_ragged(const bound_kernel_t *bk, expected_t *out) {
  const float *x = f32_data(operand(bk, "x"));
  expected_init(&out[0], 1000 * 300, 0, 0);
  for (int64_t i = 0; i < 1000 * 300; i++) {
    float twice = x[i] * 2.0f; /* exact, so an FMA gives the same bits */
    out[0].value[i] = twice + 1.0f;
  }
}

static void ref_int_hash(const bound_kernel_t *bk, expected_t *out) {
  const int32_t *x = i32_data(operand(bk, "x"));
  enum { R = 256, C = 256 };
  expected_init(&out[0], R * C, 0, 0);
  expected_init(&out[1], R, 0, 0);
  expected_init(&out[2], R, 0, 0);
  for (int r = 0; r < R; r++) {
    uint32_t sum = 0;
    int32_t min = INT32_MAX;
    for (int c = 0; c < C; c++) {
      uint32_t p = (uint32_t)x[r * C + c] * 2654435761u; /* wraps */
      uint32_t u = p ^ (p >> 13);
      int32_t mixed = (int32_t)u;
      out[0].value[r * C + c] = mixed;
      sum += u;
      int32_t e = mixed % 7 + mixed / 1000; /* C truncates, like tessera */
      if (e < min) min = e;
    }
    out[1].value[r] = (int32_t)sum;
    out[2].value[r] = min;
  }
}

static void ref_bf16_axpy(const bound_kernel_t *bk, expected_t *out) {
  const uint16_t *x = u16_data(operand(bk, "x")), *y = u16_data(operand(bk, "y"));
  enum { R = 64, C = 256 };
  float alpha = bf16_to_float(float_to_bf16(0.3f));
  expected_init(&out[0], R * C, 0, 0);
  expected_init(&out[1], R, 1e-5, 1e-6);
  for (int r = 0; r < R; r++) {
    double sum = 0, mag = 0;
    for (int c = 0; c < C; c++) {
      int i = r * C + c;
      /* Each bf16 op: computed in f32, rounded to bf16 when produced. */
      float p = bf16_to_float(float_to_bf16(bf16_to_float(x[i]) * alpha));
      float z = bf16_to_float(float_to_bf16(p + bf16_to_float(y[i])));
      out[0].value[i] = z;
      sum += z;
      mag += fabs(z);
    }
    out[1].value[r] = sum;
    out[1].scale[r] = mag;
  }
}

/* ---- Example cases ------------------------------------------------------- */

typedef struct example {
  const char *file; /* under $TSR_SOURCE_ROOT */
  const char *kernel;
  uint64_t seed;
  uint64_t grid_steps;
  uint64_t min_vmem_bytes; /* double-buffered blocks + scratch, unpadded */
  void (*reference)(const bound_kernel_t *bk, expected_t *out);
} example_t;

/* Runs `ex` under every run config and checks outputs and stats. */
static void check_example(const example_t *ex) {
  bound_kernel_t bk;
  if (!bind(ex->file, ex->kernel, ex->seed, &bk)) return;
  expected_t expect[MAX_OPERANDS];
  memset(expect, 0, sizeof expect);
  ex->reference(&bk, expect);
  for (size_t c = 0; c < sizeof kRunConfigs / sizeof kRunConfigs[0]; c++) {
    const run_config_t *config = &kRunConfigs[c];
    char label[256];
    snprintf(label, sizeof label, "@%s (%s)", ex->kernel, config->label);
    tsr_interp_options_t options;
    config_options(config, &options);
    tsr_interp_stats_t stats;
    memset(&stats, 0, sizeof stats);
    tsr_status_t s = prepare_and_run(&bk, &options, &stats);
    if (s) {
      TSR_FAIL_AT("%s: %s: %s", label,
                  tsr_status_code_name(tsr_status_code(s)),
                  tsr_status_message(s));
      tsr_status_free(s);
      continue;
    }
    if (stats.grid_steps != ex->grid_steps)
      TSR_FAIL_AT("%s: grid_steps %llu, expected %llu", label,
                  (unsigned long long)stats.grid_steps,
                  (unsigned long long)ex->grid_steps);
    if (stats.vmem_bytes < ex->min_vmem_bytes)
      TSR_FAIL_AT("%s: vmem_bytes %llu, expected at least %llu", label,
                  (unsigned long long)stats.vmem_bytes,
                  (unsigned long long)ex->min_vmem_bytes);
    size_t k = 0;
    for (size_t i = 0; i < bk.num_operands; i++)
      if (bk.info[i].role == TSR_ROLE_OUT)
        check_output(label, bk.info[i].name, &bk.arrays[i], &expect[k++]);
    /* A reference value for an output the kernel does not have is a
     * reference (or kernel) out of step, not something to skip. */
    if (k < MAX_OPERANDS && expect[k].value)
      TSR_FAIL_AT("%s: the reference fills more than the kernel's %zu outputs",
                  label, k);
  }
  for (size_t k = 0; k < MAX_OPERANDS; k++) expected_free(&expect[k]);
  unbind(&bk);
}

#define KIB 1024ull

TSR_TEST(add) {
  /* a, b, c: [128, 512] f32 blocks of 256 KiB, double-buffered */
  check_example(&(example_t){"kernels/examples/add.tsr", "add", 101, 8,
                             3 * 2 * 256 * KIB, ref_add});
}

TSR_TEST(matmul) {
  /* a, b, c: 64 KiB blocks, double-buffered; acc: 64 KiB */
  check_example(&(example_t){"kernels/examples/matmul.tsr", "matmul", 202,
                             2 * 2 * 4, 3 * 2 * 64 * KIB + 64 * KIB,
                             ref_matmul});
}

TSR_TEST(softmax) {
  check_example(&(example_t){"kernels/examples/softmax.tsr", "softmax", 303,
                             8, 2 * 2 * 8 * KIB, ref_softmax});
}

TSR_TEST(rowsum) {
  check_example(&(example_t){"kernels/examples/reduce.tsr", "rowsum", 404, 8,
                             2 * (64 * KIB + 128), ref_rowsum});
}

TSR_TEST(rowmax) {
  check_example(&(example_t){"kernels/examples/reduce.tsr", "rowmax", 405, 8,
                             2 * (64 * KIB + 128), ref_rowmax});
}

TSR_TEST(colsum) {
  check_example(&(example_t){"kernels/examples/reduce.tsr", "colsum", 406,
                             4 * 8, 2 * (16 * KIB + 512), ref_colsum});
}

TSR_TEST(colmax) {
  check_example(&(example_t){"kernels/examples/reduce.tsr", "colmax", 407,
                             4 * 8, 2 * (16 * KIB + 512), ref_colmax});
}

TSR_TEST(gather_prefetch) {
  check_example(&(example_t){"kernels/examples/gather_prefetch.tsr",
                             "gather_prefetch", 508, 8, 2 * 2 * 64 * KIB,
                             ref_gather_prefetch});
}

TSR_TEST(ragged) {
  check_example(&(example_t){"kernels/examples/ragged.tsr", "ragged", 609,
                             8 * 3, 2 * 2 * 64 * KIB, ref_ragged});
}

TSR_TEST(int_hash) {
  check_example(&(example_t){"kernels/examples/int_hash.tsr", "int_hash", 710,
                             8, 2 * (2 * 32 * KIB + 2 * 128), ref_int_hash});
}

TSR_TEST(bf16_axpy) {
  check_example(&(example_t){"kernels/examples/bf16_axpy.tsr", "bf16_axpy",
                             811, 4, 2 * (3 * 8 * KIB + 64), ref_bf16_axpy});
}

/* Every .tsr this test and the benchmarks use is in canonical form. */
TSR_TEST(kernel_files_are_canonical) {
  static const char *const files[] = {
      "kernels/examples/add.tsr",        "kernels/examples/matmul.tsr",
      "kernels/examples/softmax.tsr",    "kernels/examples/reduce.tsr",
      "kernels/examples/gather_prefetch.tsr",
      "kernels/examples/ragged.tsr",     "kernels/examples/int_hash.tsr",
      "kernels/examples/bf16_axpy.tsr",  "tests/kernels/oob_index_map.tsr",
      "tests/kernels/revisit_output.tsr", "tests/kernels/uninit_scratch.tsr",
      "tests/kernels/vmem_over_budget.tsr",
      "tests/kernels/several_errors.tsr", "bench/kernels/steps_100.tsr",
      "bench/kernels/steps_100000.tsr",  "bench/kernels/stream.tsr",
      "tests/kernels/memory/dma_refill_scratch.tsr",
      "tests/kernels/memory/store_into_input_block.tsr",
      "tests/kernels/memory/smem_input_counter_per_core.tsr",
      "tests/kernels/memory/masked_window_past_end.tsr",
      "tests/kernels/memory/masked_lane_out_of_bounds.tsr",
  };
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    char *text = tsr_test_read_source(files[i], NULL);
    if (!text) {
      TSR_FAIL_AT("cannot read %s", files[i]);
      continue;
    }
    tsr_ir_module_t *module = NULL;
    tsr_status_t s = tsr_ir_module_parse(
        (tsr_string_view_t){files[i], strlen(files[i])},
        (tsr_string_view_t){text, strlen(text)}, &module);
    if (s) {
      TSR_FAIL_AT("%s: %s", files[i], tsr_status_message(s));
      tsr_status_free(s);
    } else {
      char *printed = tsr_ir_module_print(module);
      if (!printed || strcmp(printed, text) != 0)
        TSR_FAIL_AT("%s is not canonical; tessera fmt prints:\n%s", files[i],
                    printed ? printed : "(null)");
      tsr_ir_string_free(printed);
      tsr_ir_module_destroy(module);
    }
    free(text);
  }
}

/* ---- Kernel errors ------------------------------------------------------- */

/* Case-insensitive substring test. */
static bool mentions(const char *message, const char *needle) {
  size_t n = strlen(needle);
  for (const char *p = message; *p; p++) {
    size_t i = 0;
    while (i < n && p[i] &&
           tolower((unsigned char)p[i]) == tolower((unsigned char)needle[i]))
      i++;
    if (i == n) return true;
  }
  return false;
}

/* Whether the message names the index tuple `v` as "(a, b)" or "[a, b]"
 * (whitespace ignored), as grid points and block indices are written. */
static bool mentions_tuple(const char *message, const int64_t *v, int n) {
  char want[128];
  size_t len = 0;
  for (int i = 0; i < n; i++)
    len += (size_t)snprintf(want + len, sizeof want - len, "%s%lld",
                            i ? "," : "", (long long)v[i]);
  size_t size = strlen(message);
  char *squeezed = malloc(size + 1);
  if (!squeezed) return false;
  size_t k = 0;
  for (size_t i = 0; i < size; i++)
    if (!isspace((unsigned char)message[i]) || message[i] == '\n')
      squeezed[k++] = message[i];
  squeezed[k] = 0;
  bool found = false;
  for (const char *p = squeezed; !found && (p = strstr(p, want)); p++) {
    bool open = p > squeezed && (p[-1] == '(' || p[-1] == '[');
    char close = p[len];
    found = open && (close == ')' || close == ']');
  }
  free(squeezed);
  return found;
}

static size_t count_occurrences(const char *message, const char *needle) {
  size_t count = 0;
  for (const char *p = message; (p = strstr(p, needle)); p += strlen(needle))
    count++;
  return count;
}

#define CHECK_MENTIONS(message, needle)                                        \
  do {                                                                         \
    if (!mentions((message), (needle)))                                        \
      TSR_FAIL_AT("message does not mention \"%s\":\n%s", (needle), (message)); \
  } while (0)

#define CHECK_MENTIONS_TUPLE(message, ...)                                     \
  do {                                                                         \
    const int64_t tuple_[] = {__VA_ARGS__};                                    \
    if (!mentions_tuple((message), tuple_,                                     \
                        (int)(sizeof tuple_ / sizeof tuple_[0])))              \
      TSR_FAIL_AT("message does not mention (%s):\n%s", #__VA_ARGS__,          \
                  (message));                                                  \
  } while (0)

/* Runs a tests/kernels/ kernel expecting failure with `code`; returns the
 * status (caller frees) or NULL after recording a test failure. */
static tsr_status_t expect_failure(const char *rel, const char *name,
                                   const tsr_interp_options_t *options,
                                   tsr_status_code_t code) {
  bound_kernel_t bk;
  if (!bind(rel, name, 7, &bk)) return NULL;
  tsr_status_t s = prepare_and_run(&bk, options, NULL);
  unbind(&bk);
  if (tsr_status_code(s) != code) {
    TSR_FAIL_AT("@%s: expected %s, got %s: %s", name, tsr_status_code_name(code),
                tsr_status_code_name(tsr_status_code(s)), tsr_status_message(s));
    tsr_status_free(s);
    return NULL;
  }
  return s;
}

/* in %weights: 2x2 blocks read with map (i, j) -> (j, i) over grid (3, 2):
 * grid points (2, 0) and (2, 1) ask for column block 2 of 2. An operand
 * reports its first error of a run (docs/semantics.md), here (2, 0). */
TSR_TEST(error_index_map_out_of_range) {
  tsr_interp_options_t options;
  tsr_interp_options_initialize(&options);
  tsr_status_t s = expect_failure("tests/kernels/oob_index_map.tsr",
                                  "oob_index_map", &options, TSR_KERNEL_ERROR);
  if (!s) return;
  const char *m = tsr_status_message(s);
  CHECK_MENTIONS(m, "weights");
  CHECK_MENTIONS(m, "grid point");
  CHECK_MENTIONS_TUPLE(m, 2, 0); /* the first failing grid point */
  CHECK_MENTIONS_TUPLE(m, 0, 2); /* its block index */
  CHECK_MENTIONS(m, "oob_index_map.tsr:3:"); /* the operand's line */
  tsr_status_free(s);
}

/* out %partial: map (i, j) -> (j, 1) over grid (2, 3): block (0, 1) is
 * written at (0, 0) and again at (1, 0), with other blocks between. */
TSR_TEST(error_revisited_output_block) {
  tsr_interp_options_t options;
  tsr_interp_options_initialize(&options);
  tsr_status_t s = expect_failure("tests/kernels/revisit_output.tsr",
                                  "revisit_output", &options, TSR_KERNEL_ERROR);
  if (!s) return;
  const char *m = tsr_status_message(s);
  CHECK_MENTIONS(m, "partial");
  CHECK_MENTIONS_TUPLE(m, 1, 0); /* the revisiting grid point (step 3) */
  CHECK_MENTIONS_TUPLE(m, 0, 1); /* the block */
  /* The earlier visit, as a grid point or as the linear step 0. */
  const int64_t earlier[] = {0, 0};
  if (!mentions_tuple(m, earlier, 2) && !mentions(m, "steps 0.") &&
      !mentions(m, "step 0"))
    TSR_FAIL_AT("message does not name the earlier step (0, 0):\n%s", m);
  tsr_status_free(s);
}

/* scratch %stale is loaded before anything stores to it: a warning (legal
 * on a TPU, the value is garbage), an error with options.strict. */
TSR_TEST(warning_uninitialized_scratch_read) {
  bound_kernel_t bk;
  if (!bind("tests/kernels/uninit_scratch.tsr", "uninit_scratch", 7, &bk))
    return;
  tsr_interp_options_t options;
  for (int zero = 0; zero <= 1; zero++) {
    tsr_interp_options_initialize(&options);
    options.uninit = zero ? TSR_UNINIT_ZERO : TSR_UNINIT_NAN;
    /* Under uninit=zero too: the shadow memory, not the fill, finds it. */
    FILE *stream = tmpfile();
    TSR_CHECK(stream != NULL);
    if (!stream) break;
    TSR_CHECK_OK(prepare_and_run_to(&bk, &options, stream, NULL));
    char text[4096] = {0};
    rewind(stream);
    size_t n = fread(text, 1, sizeof text - 1, stream);
    text[n] = 0;
    fclose(stream);
    CHECK_MENTIONS(text, "warning:");
    CHECK_MENTIONS(text, "stale");
    CHECK_MENTIONS(text, "uninit");
    options.strict = true;
    tsr_status_t s = expect_failure("tests/kernels/uninit_scratch.tsr", "uninit_scratch",
                                    &options, TSR_KERNEL_ERROR);
    if (s) CHECK_MENTIONS(tsr_status_message(s), "stale");
    tsr_status_free(s);
  }

  /* With checks off the read is silent and yields the fill value. */
  for (int zero = 0; zero <= 1; zero++) {
    tsr_interp_options_initialize(&options);
    options.check = false;
    options.uninit = zero ? TSR_UNINIT_ZERO : TSR_UNINIT_NAN;
    TSR_CHECK_OK(prepare_and_run(&bk, &options, NULL));
    const float *y = f32_data(operand(&bk, "y"));
    int64_t bad = 0;
    for (int64_t i = 0; i < 16 * 128; i++)
      bad += zero ? !(y[i] == 0.0f && !signbit(y[i])) : !isnan(y[i]);
    if (bad)
      TSR_FAIL_AT("uninit=%s: %lld elements of %%y are not %s", zero ? "zero" : "nan",
                  (long long)bad, zero ? "+0" : "NaN");
  }
  unbind(&bk);
}

/* 20 MiB of scratch: over v4's 16 MiB of VMEM, within v5e's 128 MiB. */
TSR_TEST(error_vmem_over_budget) {
  uint64_t v4 = 0, v5e = 0;
  TSR_CHECK(tsr_interp_chip_vmem_bytes("v4", &v4));
  TSR_CHECK(tsr_interp_chip_vmem_bytes("v5e", &v5e));
  TSR_CHECK_EQ_INT(v4, 16 * 1024 * 1024);
  TSR_CHECK_EQ_INT(v5e, 128 * 1024 * 1024);
  TSR_CHECK(!tsr_interp_chip_vmem_bytes("v99", &v4));

  bound_kernel_t bk;
  if (!bind("tests/kernels/vmem_over_budget.tsr", "vmem_over_budget", 7, &bk))
    return;
  tsr_interp_options_t options;
  tsr_interp_options_initialize(&options);
  options.chip = "v4";
  tsr_interp_program_t *program = NULL;
  tsr_status_t s = tsr_interp_program_prepare(bk.kernel, &options, &program);
  if (tsr_status_code(s) != TSR_RESOURCE_EXHAUSTED) {
    TSR_FAIL_AT("chip v4: expected RESOURCE_EXHAUSTED, got %s: %s",
                tsr_status_code_name(tsr_status_code(s)), tsr_status_message(s));
  } else {
    const char *m = tsr_status_message(s);
    CHECK_MENTIONS(m, "vmem");
    if (!mentions(m, "16777216") && !mentions(m, "16 MiB") &&
        !mentions(m, "16.0 MiB") && !mentions(m, "v4"))
      TSR_FAIL_AT("message names neither the budget nor the chip:\n%s", m);
  }
  tsr_status_free(s);
  if (program) tsr_interp_program_destroy(program);

  /* The default chip (v5e) has room: preparing and running succeed. */
  tsr_interp_options_initialize(&options);
  tsr_interp_stats_t stats;
  memset(&stats, 0, sizeof stats);
  TSR_CHECK_OK(prepare_and_run(&bk, &options, &stats));
  TSR_CHECK(stats.vmem_bytes >= 20 * 1024 * 1024);
  TSR_CHECK(stats.vmem_bytes <= v5e);
  unbind(&bk);
}

/* An assert fails at step 1 and the index map leaves the array at step 3:
 * both are reported by one run, each with its IR location. */
TSR_TEST(error_several_in_one_run) {
  tsr_interp_options_t options;
  tsr_interp_options_initialize(&options);
  tsr_status_t s = expect_failure("tests/kernels/several_errors.tsr",
                                  "several_errors", &options, TSR_KERNEL_ERROR);
  if (!s) return;
  const char *m = tsr_status_message(s);
  TSR_CHECK(tsr_status_diagnostic_count(s) >= 2);
  TSR_CHECK(count_occurrences(m, "error:") >= 2);
  CHECK_MENTIONS(m, "step one is rejected");
  CHECK_MENTIONS(m, "several_errors.tsr:9:"); /* the assert's line */
  CHECK_MENTIONS(m, "short_input");
  tsr_status_free(s);

  options.max_errors = 1;
  s = expect_failure("tests/kernels/several_errors.tsr", "several_errors",
                     &options, TSR_KERNEL_ERROR);
  if (s) TSR_CHECK_EQ_INT(count_occurrences(tsr_status_message(s), "error:"), 1);
  tsr_status_free(s);
}

int main(void) {
  TSR_RUN(kernel_files_are_canonical);
  TSR_RUN(add);
  TSR_RUN(matmul);
  TSR_RUN(softmax);
  TSR_RUN(rowsum);
  TSR_RUN(rowmax);
  TSR_RUN(colsum);
  TSR_RUN(colmax);
  TSR_RUN(gather_prefetch);
  TSR_RUN(ragged);
  TSR_RUN(int_hash);
  TSR_RUN(bf16_axpy);
  TSR_RUN(error_index_map_out_of_range);
  TSR_RUN(error_revisited_output_block);
  TSR_RUN(warning_uninitialized_scratch_read);
  TSR_RUN(error_vmem_over_budget);
  TSR_RUN(error_several_in_one_run);
  return tsr_test_done();
}
