/* The kernel library's reductions and cumulative ops (kernels/reduce.c,
 * kernels/scan.c) against plain C references: seeded random shapes (non
 * powers of two, dims of 1, padded edge blocks), every op and dtype, random
 * axes, keepdims, and small VMEM budgets that force multi-step grids with
 * accumulators and carries; on the interpreter and, when the build has it,
 * the cpu backend (the same kernel, compared too). Plus parameter errors,
 * deterministic generation and Mosaic emission of each kernel class. */
#include <math.h>

#include "array_values.h"
#include "harness.h"
#include "random_values.h"

/* ---- element access -------------------------------------------------- */

/* v wrapped to `dtype`'s width and signedness. */
static int64_t wrap(tsr_dtype_t dtype, uint64_t v) {
  switch (dtype) {
  case TSR_DTYPE_I32: return (int32_t)(uint32_t)v;
  case TSR_DTYPE_U32: return (uint32_t)v;
  case TSR_DTYPE_I16: return (int16_t)(uint16_t)v;
  case TSR_DTYPE_U16: return (uint16_t)v;
  case TSR_DTYPE_I8: return (int8_t)(uint8_t)v;
  case TSR_DTYPE_U8: return (uint8_t)v;
  default: return v != 0;
  }
}

static bool is_float(tsr_dtype_t d) { return tsr_dtype_class(d) == TSR_CLASS_FLOAT; }

/* The tolerance of a float result: relative to the magnitudes summed. */
static double tolerance(tsr_dtype_t d) {
  return d == TSR_DTYPE_F32 ? 1e-5 : d == TSR_DTYPE_BF16 ? 1.0 / 64 : 1.0 / 512;
}

/* ---- random cases ---------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15u;
static uint32_t rnd(uint32_t n) {
  return (uint32_t)((tsr_test_xorshift64(&rng_state) >> 11) % n);
}

static const tsr_dtype_t all_dtypes[] = {
    TSR_DTYPE_F32, TSR_DTYPE_BF16, TSR_DTYPE_F16, TSR_DTYPE_I32, TSR_DTYPE_U32,
    TSR_DTYPE_I16, TSR_DTYPE_U16,  TSR_DTYPE_I8,  TSR_DTYPE_U8,  TSR_DTYPE_I1};

static void random_shape(uint32_t *rank, int64_t *dims) {
  static const int64_t sizes[] = {1, 2, 3, 5, 7, 8, 9, 16, 17, 31, 100, 128, 130, 257};
  *rank = 1 + rnd(4);
  int64_t total = 1;
  for (uint32_t d = 0; d < *rank; d++) {
    dims[d] = sizes[rnd(sizeof sizes / sizeof sizes[0])];
    if (total * dims[d] > 60000) dims[d] = 1 + rnd(3);
    total *= dims[d];
  }
}

/* Fills `a` for `op`: floats k/4 in [-8, 8) (products: 1 but for about 30
 * factors of 2, 0.5 or -1), an occasional NaN when `nan`; integers over the dtype's range
 * (sums wrap), small for products; i1 random. */
static void fill(tsr_array_t *a, tsr_kernels_op_t op, bool nan) {
  int64_t n = tsr_array_element_count(a);
  for (int64_t i = 0; i < n; i++) {
    if (is_float(a->dtype)) {
      float v = (float)((int)rnd(64) - 32) / 4.0f;
      if (op == TSR_KERNELS_PROD) { /* about 30 factors not 1: no overflow */
        static const float f[] = {2, 0.5f, -1};
        v = rnd((uint32_t)(n / 30 + 2)) == 0 ? f[rnd(3)] : 1.0f;
      }
      tv_set_float(a, i, v);
    } else if (a->dtype == TSR_DTYPE_I1) {
      tv_set_int(a, i, rnd(4) == 0);
    } else {
      int64_t v = op == TSR_KERNELS_PROD ? (int64_t)rnd(5) - 1 : (int64_t)rnd(1u << 30) - (1 << 29);
      tv_set_int(a, i, wrap(a->dtype, (uint64_t)v));
    }
  }
  if (nan && n > 0) tv_set_float(a, rnd((uint32_t)n), NAN);
}

static tsr_context_t *ctx; /* made and destroyed by main */

static tsr_status_t run(tsr_ir_module_t *m, tsr_backend_t backend, tsr_array_t *in,
                        tsr_array_t *out) {
  tsr_executable_options_t eo;
  tsr_executable_options_initialize(&eo);
  eo.backend = backend;
  eo.run.strict = true; /* a warning (an uninitialized read) fails the case */
  tsr_executable_t *exe = NULL;
  tsr_status_t s = tsr_executable_create(ctx, tsr_ir_module_kernel(m, 0), &eo, &exe);
  if (!s) {
    tsr_array_t *ops[] = {in, out};
    s = tsr_executable_run(exe, ops, 2, NULL, NULL);
  }
  tsr_executable_destroy(exe);
  return s;
}

static bool cpu_missing;

/* Runs `m` on `in` on both backends (cpu: when `cpu`), into outputs of the
 * kernel's output shape; *out is the interpreter's. The cpu result must
 * equal it (floats within `tol` of the magnitude). */
static bool run_both(tsr_ir_module_t *m, tsr_array_t *in, tsr_array_t *out, bool cpu,
                     const char *what) {
  tsr_ir_operand_info_t oi;
  tsr_ir_kernel_operand_info(tsr_ir_module_kernel(m, 0), 1, &oi);
  if (tsr_array_initialize(oi.dtype, oi.rank, oi.dims, out)) return false;
  tsr_status_t s = run(m, TSR_BACKEND_INTERP, in, out);
  if (s) {
    TSR_FAIL_AT("%s: interp: %s", what, tsr_status_message(s));
    tsr_status_free(s);
    return false;
  }
  if (!cpu || cpu_missing) return true;
  tsr_array_t c;
  if (tsr_array_initialize(oi.dtype, oi.rank, oi.dims, &c)) return false;
  s = run(m, TSR_BACKEND_CPU, in, &c);
  if (s && tsr_test_cpu_absent(s)) {
    cpu_missing = true;
    printf("# no cpu backend in this build: interpreter only\n");
  } else if (s) {
    TSR_FAIL_AT("%s: cpu: %s", what, tsr_status_message(s));
  } else {
    int64_t n = tsr_array_element_count(out), bad = 0;
    for (int64_t i = 0; i < n; i++) {
      if (is_float(oi.dtype)) {
        double x = tv_get(out, i), y = tv_get(&c, i);
        bad += !(x == y || (isnan(x) && isnan(y)) ||
                 fabs(x - y) <= tolerance(oi.dtype) * (1 + fabs(x)));
      } else {
        bad += tv_get_int(out, i) != tv_get_int(&c, i);
      }
    }
    if (bad) TSR_FAIL_AT("%s: cpu differs from interp in %lld elements", what, (long long)bad);
  }
  tsr_status_free(s);
  tsr_array_deinitialize(&c);
  return true;
}

static void describe(char *buf, size_t size, const char *kind, tsr_kernels_op_t op,
                     tsr_dtype_t dt, uint32_t rank, const int64_t *dims, uint32_t mask,
                     int64_t budget) {
  int n = snprintf(buf, size, "%s %s %s [", kind, tsr_kernels_op_name(op), tsr_dtype_name(dt));
  for (uint32_t d = 0; d < rank && n > 0 && (size_t)n < size; d++)
    n += snprintf(buf + n, size - (size_t)n, "%s%lld", d ? "," : "", (long long)dims[d]);
  if (n > 0 && (size_t)n < size)
    snprintf(buf + n, size - (size_t)n, "] axes 0x%x budget %lld", mask, (long long)budget);
}

/* ---- reductions ------------------------------------------------------ */

static tsr_kernels_op_t random_reduce_op(tsr_dtype_t dt) {
  for (;;) {
    tsr_kernels_op_t op = (tsr_kernels_op_t)rnd(TSR_KERNELS_OP_COUNT);
    bool floats_only = op == TSR_KERNELS_MEAN || op == TSR_KERNELS_VARIANCE ||
                       op == TSR_KERNELS_LOGSUMEXP;
    if (floats_only && !is_float(dt)) continue;
    if (dt == TSR_DTYPE_I1 && (op == TSR_KERNELS_SUM || op == TSR_KERNELS_PROD)) continue;
    return op;
  }
}

/* Checks `out` of a reduction against a reference computed here. */
static void check_reduce(const tsr_kernels_reduce_params_t *p, const tsr_array_t *in,
                         const tsr_array_t *out, const char *what) {
  uint32_t r = p->rank, mask = p->axes_mask ? p->axes_mask : (1u << r) - 1;
  int64_t total = tsr_array_element_count(in), nout = tsr_array_element_count(out);
  int64_t per = total / (nout ? nout : 1);
  bool fl = is_float(p->dtype);
  /* per output element: sum / sum of squares / max / min / count ... */
  double *fs = calloc((size_t)nout, sizeof *fs), *fm = calloc((size_t)nout, sizeof *fm);
  double *mag = calloc((size_t)nout, sizeof *mag);
  int64_t *is = calloc((size_t)nout, sizeof *is), *best = calloc((size_t)nout, sizeof *best);
  bool *seen = calloc((size_t)nout, sizeof *seen);
  int64_t *oi_of = calloc((size_t)total, sizeof *oi_of), *ax_of = calloc((size_t)total, 8);
  int axis = 0;
  for (uint32_t d = 0; d < r; d++)
    if (mask >> d & 1) axis = (int)d;
  for (int64_t i = 0; i < total; i++) { /* output index and position along axis */
    int64_t rem = i, o = 0, stride = 1;
    int64_t idx[TSR_MAX_RANK];
    for (uint32_t d = r; d-- > 0;) {
      idx[d] = rem % p->dims[d];
      rem /= p->dims[d];
    }
    for (uint32_t d = r; d-- > 0;)
      if (!(mask >> d & 1)) {
        o += idx[d] * stride;
        stride *= p->dims[d];
      }
    oi_of[i] = o;
    ax_of[i] = idx[axis];
  }
  tsr_kernels_op_t op = p->op;
  for (int64_t i = 0; i < total; i++) {
    int64_t o = oi_of[i];
    if (fl) {
      double v = tv_get(in, i);
      if (!seen[o]) {
        fs[o] = op == TSR_KERNELS_PROD ? 1 : 0;
        fm[o] = v;
        best[o] = ax_of[i];
      }
      fs[o] = op == TSR_KERNELS_PROD ? fs[o] * v : fs[o] + v;
      mag[o] += fabs(v);
      bool better = op == TSR_KERNELS_MIN || op == TSR_KERNELS_ARGMIN ? v < fm[o] : v > fm[o];
      if (seen[o] && !isnan(fm[o]) && (better || isnan(v))) {
        fm[o] = v;
        best[o] = ax_of[i];
      }
    } else {
      int64_t v = tv_get_int(in, i);
      if (!seen[o]) {
        is[o] = op == TSR_KERNELS_PROD ? 1 : 0;
        fm[o] = (double)v;
        best[o] = ax_of[i];
      }
      is[o] = op == TSR_KERNELS_PROD ? (int64_t)((uint64_t)is[o] * (uint64_t)v)
                                     : (int64_t)((uint64_t)is[o] + (uint64_t)v);
      bool better = op == TSR_KERNELS_MIN || op == TSR_KERNELS_ARGMIN ? v < fm[o] : v > fm[o];
      if (seen[o] && better) {
        fm[o] = (double)v;
        best[o] = ax_of[i];
      }
    }
    seen[o] = true;
  }
  /* var and logsumexp need a second pass. */
  double *f2 = calloc((size_t)nout, sizeof *f2);
  for (int64_t i = 0; i < total && fl; i++) {
    int64_t o = oi_of[i];
    double v = tv_get(in, i), mean = fs[o] / (double)per;
    f2[o] += op == TSR_KERNELS_VARIANCE ? (v - mean) * (v - mean) : exp(v - fm[o]);
  }
  int64_t bad = 0, first = -1;
  double got_first = 0, want_first = 0;
  for (int64_t o = 0; o < nout; o++) {
    double want = 0, got, tol = 0;
    if (op == TSR_KERNELS_ARGMAX || op == TSR_KERNELS_ARGMIN) {
      want = (double)best[o];
      got = (double)((const int32_t *)out->data)[o];
    } else if (fl) {
      double t = tolerance(p->dtype);
      switch (op) {
      case TSR_KERNELS_SUM: want = fs[o], tol = t * (mag[o] + 1); break;
      case TSR_KERNELS_PROD: want = fs[o], tol = t * fabs(fs[o]); break;
      case TSR_KERNELS_MEAN:
        want = fs[o] / (double)per, tol = t * (mag[o] / (double)per + 1);
        break;
      case TSR_KERNELS_VARIANCE: want = f2[o] / (double)per, tol = t * (want + 1) * 4; break;
      case TSR_KERNELS_LOGSUMEXP: want = fm[o] + log(f2[o]), tol = t * (fabs(want) + 1); break;
      default: want = fm[o]; break; /* max, min: exact */
      }
      got = tv_get(out, o);
    } else {
      bool wraps = op == TSR_KERNELS_SUM || op == TSR_KERNELS_PROD;
      want = wraps ? (double)wrap(p->dtype, (uint64_t)is[o]) : fm[o];
      got = (double)tv_get_int(out, o);
    }
    if (p->dtype == TSR_DTYPE_F16 && fabs(want) >= 65520) want = copysign(INFINITY, want);
    bool ok = got == want || (isnan(got) && isnan(want)) || fabs(got - want) <= tol;
    if (!ok && first < 0) first = o, got_first = got, want_first = want;
    bad += !ok;
  }
  if (bad)
    TSR_FAIL_AT("%s: %lld of %lld wrong; first [%lld]: got %.9g, expected %.9g", what,
                (long long)bad, (long long)nout, (long long)first, got_first, want_first);
  free(fs), free(fm), free(mag), free(is), free(best), free(seen), free(oi_of), free(ax_of);
  free(f2);
}

static void reduce_cases(int count, bool cpu) {
  static const int64_t budgets[] = {0, 4096, 16384, 100000};
  for (int c = 0; c < count; c++) {
    tsr_kernels_reduce_params_t p;
    tsr_kernels_reduce_params_initialize(&p);
    random_shape(&p.rank, p.dims);
    p.dtype = all_dtypes[rnd(10)];
    p.op = random_reduce_op(p.dtype);
    if (p.op == TSR_KERNELS_ARGMAX || p.op == TSR_KERNELS_ARGMIN)
      p.axes_mask = 1u << rnd(p.rank);
    else
      p.axes_mask = rnd(1u << p.rank);
    p.keepdims = rnd(2);
    p.vmem_budget_bytes = budgets[rnd(4)];
    bool nan = p.dtype == TSR_DTYPE_F32 && rnd(5) == 0 &&
               (p.op == TSR_KERNELS_SUM || p.op == TSR_KERNELS_MAX || p.op == TSR_KERNELS_MIN ||
                p.op == TSR_KERNELS_ARGMAX || p.op == TSR_KERNELS_ARGMIN);
    char what[200];
    describe(what, sizeof what, "reduce", p.op, p.dtype, p.rank, p.dims, p.axes_mask,
             p.vmem_budget_bytes);
    tsr_ir_module_t *m = NULL;
    tsr_status_t s = tsr_kernels_reduce(&p, &m);
    if (s) {
      TSR_FAIL_AT("%s: %s", what, tsr_status_message(s));
      tsr_status_free(s);
      continue;
    }
    tsr_array_t in, out = {0};
    TSR_CHECK_OK(tsr_array_initialize(p.dtype, p.rank, p.dims, &in));
    fill(&in, p.op, nan);
    if (run_both(m, &in, &out, cpu, what)) check_reduce(&p, &in, &out, what);
    tsr_array_deinitialize(&in);
    tsr_array_deinitialize(&out);
    tsr_ir_module_destroy(m);
  }
}

TSR_TEST(random_reductions_interp) { reduce_cases(300, false); }
TSR_TEST(random_reductions_cpu_and_interp) { reduce_cases(30, true); }

/* ---- cumulative ops -------------------------------------------------- */

static void check_scan(const tsr_kernels_cumulative_params_t *p, const tsr_array_t *in,
                       const tsr_array_t *out, const char *what) {
  uint32_t r = p->rank, axis = (uint32_t)(p->axis < 0 ? p->axis + (int32_t)r : p->axis);
  int64_t n = p->dims[axis], inner = 1, outer = 1;
  for (uint32_t d = axis + 1; d < r; d++) inner *= p->dims[d];
  for (uint32_t d = 0; d < axis; d++) outer *= p->dims[d];
  bool fl = is_float(p->dtype);
  int64_t bad = 0;
  double tol = fl ? tolerance(p->dtype) : 0;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t j = 0; j < inner; j++) {
      double acc = 0, mag = 0;
      int64_t iacc = 0;
      for (int64_t k0 = 0; k0 < n; k0++) {
        int64_t k = p->reverse ? n - 1 - k0 : k0;
        int64_t i = (o * n + k) * inner + j;
        double got, want;
        if (fl) {
          double v = tv_get(in, i);
          if (k0 == 0) acc = v;
          else if (p->op == TSR_KERNELS_SUM) acc += v;
          else if (p->op == TSR_KERNELS_PROD) acc *= v;
          else if (p->op == TSR_KERNELS_MAX) acc = v > acc ? v : acc;
          else acc = v < acc ? v : acc;
          mag += fabs(v);
          want = acc;
          if (p->dtype == TSR_DTYPE_F16 && fabs(want) >= 65520) want = copysign(INFINITY, want);
          got = tv_get(out, i);
          if (!(got == want || fabs(got - want) <= tol * (p->op == TSR_KERNELS_SUM ? mag + 1
                                                                                 : fabs(want))))
            bad++;
        } else {
          int64_t v = tv_get_int(in, i);
          if (k0 == 0) iacc = v;
          else if (p->op == TSR_KERNELS_SUM) iacc = wrap(p->dtype, (uint64_t)iacc + (uint64_t)v);
          else if (p->op == TSR_KERNELS_PROD) iacc = wrap(p->dtype, (uint64_t)iacc * (uint64_t)v);
          else if (p->op == TSR_KERNELS_MAX) iacc = v > iacc ? v : iacc;
          else iacc = v < iacc ? v : iacc;
          bad += tv_get_int(out, i) != iacc;
        }
      }
    }
  if (bad) TSR_FAIL_AT("%s: %lld elements wrong", what, (long long)bad);
}

static void scan_cases(int count, bool cpu) {
  static const int64_t budgets[] = {0, 4096, 16384};
  static const tsr_kernels_op_t ops[] = {TSR_KERNELS_SUM, TSR_KERNELS_PROD, TSR_KERNELS_MAX,
                                         TSR_KERNELS_MIN};
  for (int c = 0; c < count; c++) {
    tsr_kernels_cumulative_params_t p;
    tsr_kernels_cumulative_params_initialize(&p);
    random_shape(&p.rank, p.dims);
    p.dtype = all_dtypes[rnd(10)];
    p.op = ops[rnd(4)];
    if (p.dtype == TSR_DTYPE_I1) p.op = rnd(2) ? TSR_KERNELS_MAX : TSR_KERNELS_MIN;
    p.axis = (int32_t)rnd(p.rank) - (rnd(2) ? (int32_t)p.rank : 0);
    p.reverse = rnd(2);
    p.vmem_budget_bytes = budgets[rnd(3)];
    char what[200];
    describe(what, sizeof what, p.reverse ? "cumulative reversed" : "cumulative", p.op, p.dtype,
             p.rank, p.dims, (uint32_t)p.axis, p.vmem_budget_bytes);
    tsr_ir_module_t *m = NULL;
    tsr_status_t s = tsr_kernels_cumulative(&p, &m);
    if (s) {
      TSR_FAIL_AT("%s: %s", what, tsr_status_message(s));
      tsr_status_free(s);
      continue;
    }
    tsr_array_t in, out = {0};
    TSR_CHECK_OK(tsr_array_initialize(p.dtype, p.rank, p.dims, &in));
    fill(&in, p.op, false);
    if (run_both(m, &in, &out, cpu, what)) check_scan(&p, &in, &out, what);
    tsr_array_deinitialize(&in);
    tsr_array_deinitialize(&out);
    tsr_ir_module_destroy(m);
  }
}

TSR_TEST(random_scans_interp) { scan_cases(200, false); }
TSR_TEST(random_scans_cpu_and_interp) { scan_cases(20, true); }

/* A long axis through many blocks of a small budget: the carry and the
 * accumulators across hundreds of grid steps. */
TSR_TEST(multi_step_paths) {
  tsr_kernels_reduce_params_t p;
  tsr_kernels_reduce_params_initialize(&p);
  p.rank = 2, p.dims[0] = 300, p.dims[1] = 1000, p.axes_mask = 3, p.op = TSR_KERNELS_VARIANCE;
  p.vmem_budget_bytes = 2048;
  tsr_ir_module_t *m = NULL;
  TSR_CHECK_OK(tsr_kernels_reduce(&p, &m));
  if (m) {
    char *text = tsr_ir_module_print(m);
    TSR_CHECK(text && strstr(text, "semantics(arbitrary, arbitrary)"));
    TSR_CHECK(text && strstr(text, "scratch %count: smem f32"));
    tsr_ir_string_free(text);
    tsr_array_t in, out = {0};
    TSR_CHECK_OK(tsr_array_initialize(p.dtype, p.rank, p.dims, &in));
    fill(&in, p.op, false);
    if (run_both(m, &in, &out, true, "var 300x1000")) check_reduce(&p, &in, &out, "var");
    tsr_array_deinitialize(&in);
    tsr_array_deinitialize(&out);
    tsr_ir_module_destroy(m);
  }
  tsr_kernels_cumulative_params_t q;
  tsr_kernels_cumulative_params_initialize(&q);
  q.rank = 1, q.dims[0] = 5000, q.op = TSR_KERNELS_SUM, q.dtype = TSR_DTYPE_I32;
  q.reverse = true, q.vmem_budget_bytes = 1;
  m = NULL;
  TSR_CHECK_OK(tsr_kernels_cumulative(&q, &m));
  if (m) {
    tsr_array_t in, out = {0};
    TSR_CHECK_OK(tsr_array_initialize(q.dtype, q.rank, q.dims, &in));
    fill(&in, q.op, false);
    if (run_both(m, &in, &out, true, "cumsum 5000")) check_scan(&q, &in, &out, "cumsum 5000");
    tsr_array_deinitialize(&in);
    tsr_array_deinitialize(&out);
    tsr_ir_module_destroy(m);
  }
}

/* NaN: the first NaN is the argmax and the argmin (jax.numpy's rule). */
TSR_TEST(argmax_nan_and_first_occurrence) {
  tsr_kernels_reduce_params_t p;
  tsr_kernels_reduce_params_initialize(&p);
  p.rank = 1, p.dims[0] = 3000, p.op = TSR_KERNELS_ARGMAX, p.vmem_budget_bytes = 4096;
  for (int variant = 0; variant < 4; variant++) {
    p.op = variant % 2 ? TSR_KERNELS_ARGMIN : TSR_KERNELS_ARGMAX;
    tsr_ir_module_t *m = NULL;
    TSR_CHECK_OK(tsr_kernels_reduce(&p, &m));
    if (!m) continue;
    tsr_array_t in, out = {0};
    TSR_CHECK_OK(tsr_array_initialize(TSR_DTYPE_F32, 1, p.dims, &in));
    float *x = in.data;
    for (int i = 0; i < 3000; i++) x[i] = (float)(i % 7);
    x[2500] = variant % 2 ? -5 : 50, x[2700] = x[2500];     /* ties: the first */
    if (variant >= 2) x[1200] = NAN, x[2900] = NAN;          /* NaN: the first */
    int32_t want = variant >= 2 ? 1200 : 2500;
    if (run_both(m, &in, &out, true, "argmax nan")) {
      TSR_CHECK_EQ_INT(out.rank, 1);
      TSR_CHECK_EQ_INT(((int32_t *)out.data)[0], want);
    }
    tsr_array_deinitialize(&in);
    tsr_array_deinitialize(&out);
    tsr_ir_module_destroy(m);
  }
}

/* ---- parameters ------------------------------------------------------ */

TSR_TEST(parameters_refused_by_name) {
  tsr_ir_module_t *m = NULL;
  tsr_kernels_reduce_params_t p;
  tsr_kernels_reduce_params_initialize(&p);
  p.rank = 2, p.dims[0] = 4, p.dims[1] = 4;
  p.rank = 0;
  TSR_CHECK_ERROR(tsr_kernels_reduce(&p, &m), TSR_INVALID_ARGUMENT, "rank");
  p.rank = 2, p.dims[1] = 0;
  TSR_CHECK_ERROR(tsr_kernels_reduce(&p, &m), TSR_INVALID_ARGUMENT, "dims[1]");
  p.dims[1] = 4, p.axes_mask = 4;
  TSR_CHECK_ERROR(tsr_kernels_reduce(&p, &m), TSR_INVALID_ARGUMENT, "axes_mask");
  p.axes_mask = 0, p.op = TSR_KERNELS_MEAN, p.dtype = TSR_DTYPE_I32;
  TSR_CHECK_ERROR(tsr_kernels_reduce(&p, &m), TSR_INVALID_ARGUMENT, "takes floats");
  p.op = TSR_KERNELS_SUM, p.dtype = TSR_DTYPE_I1;
  TSR_CHECK_ERROR(tsr_kernels_reduce(&p, &m), TSR_INVALID_ARGUMENT, "i1");
  p.dtype = TSR_DTYPE_F32, p.vmem_budget_bytes = -1;
  TSR_CHECK_ERROR(tsr_kernels_reduce(&p, &m), TSR_INVALID_ARGUMENT, "vmem_budget_bytes");
  p.vmem_budget_bytes = 0, p.op = TSR_KERNELS_ARGMAX, p.axes_mask = 3;
  TSR_CHECK_ERROR(tsr_kernels_reduce(&p, &m), TSR_UNIMPLEMENTED, "several axes");
  p.op = TSR_KERNELS_OP_COUNT;
  TSR_CHECK_ERROR(tsr_kernels_reduce(&p, &m), TSR_INVALID_ARGUMENT, "op");
  TSR_CHECK_ERROR(tsr_kernels_reduce(NULL, &m), TSR_INVALID_ARGUMENT, "NULL");

  tsr_kernels_cumulative_params_t q;
  tsr_kernels_cumulative_params_initialize(&q);
  q.rank = 2, q.dims[0] = 4, q.dims[1] = 4, q.axis = 2;
  TSR_CHECK_ERROR(tsr_kernels_cumulative(&q, &m), TSR_INVALID_ARGUMENT, "axis 2");
  q.axis = -3;
  TSR_CHECK_ERROR(tsr_kernels_cumulative(&q, &m), TSR_INVALID_ARGUMENT, "axis -3");
  q.axis = -1, q.op = TSR_KERNELS_ARGMAX;
  TSR_CHECK_ERROR(tsr_kernels_cumulative(&q, &m), TSR_INVALID_ARGUMENT, "argmax");
  q.op = TSR_KERNELS_PROD, q.dtype = TSR_DTYPE_I1;
  TSR_CHECK_ERROR(tsr_kernels_cumulative(&q, &m), TSR_INVALID_ARGUMENT, "i1");
  q.dtype = TSR_DTYPE_F32, q.dims[0] = (int64_t)1 << 32;
  TSR_CHECK_ERROR(tsr_kernels_cumulative(&q, &m), TSR_INVALID_ARGUMENT, "dims[0]");
  TSR_CHECK(m == NULL);
}

/* The same parameters give the same kernel text (hence the same cache key). */
TSR_TEST(generation_is_deterministic) {
  tsr_kernels_reduce_params_t p;
  tsr_kernels_reduce_params_initialize(&p);
  p.rank = 3, p.dims[0] = 7, p.dims[1] = 100, p.dims[2] = 300, p.axes_mask = 5;
  p.op = TSR_KERNELS_LOGSUMEXP, p.vmem_budget_bytes = 50000;
  tsr_ir_module_t *a = NULL, *b = NULL;
  TSR_CHECK_OK(tsr_kernels_reduce(&p, &a));
  TSR_CHECK_OK(tsr_kernels_reduce(&p, &b));
  if (a && b) {
    char *ta = tsr_ir_module_print(a), *tb = tsr_ir_module_print(b);
    TSR_CHECK_EQ_STR(ta, tb);
    tsr_ir_string_free(ta);
    tsr_ir_string_free(tb);
  }
  tsr_ir_module_destroy(a);
  tsr_ir_module_destroy(b);
}

/* Each kernel class emits Mosaic (text; libtpu compiles them in
 * python/tests/tpu/test_library_reduce.py), f16 excepted: TPUs have no f16
 * vector loads. */
TSR_TEST(kernel_classes_emit_mosaic) {
  tsr_context_t *tpu_ctx = NULL;
  TSR_CHECK_OK(tsr_context_create(NULL, &tpu_ctx));
  for (int op = 0; op < TSR_KERNELS_OP_COUNT; op++)
    for (int axes = 1; axes <= 3; axes++) {
      tsr_kernels_reduce_params_t p;
      tsr_kernels_reduce_params_initialize(&p);
      p.rank = 2, p.dims[0] = 100, p.dims[1] = 300, p.axes_mask = (uint32_t)axes;
      p.op = (tsr_kernels_op_t)op, p.keepdims = true, p.vmem_budget_bytes = 40000;
      if ((op == TSR_KERNELS_ARGMAX || op == TSR_KERNELS_ARGMIN) && axes == 3) continue;
      tsr_ir_module_t *m = NULL;
      TSR_CHECK_OK(tsr_kernels_reduce(&p, &m));
      char *text = NULL;
      if (m) TSR_CHECK_OK(tsr_tpu_emit(tpu_ctx, tsr_ir_module_kernel(m, 0), "v6e", &text));
      TSR_CHECK(!m || (text && strstr(text, "tpu.core_type")));
      tsr_ir_string_free(text);
      tsr_ir_module_destroy(m);
    }
  for (int op = 0; op < 4; op++) {
    tsr_kernels_cumulative_params_t q;
    tsr_kernels_cumulative_params_initialize(&q);
    q.rank = 2, q.dims[0] = 100, q.dims[1] = 300, q.op = (tsr_kernels_op_t)op, q.axis = op % 2;
    q.reverse = op >= 2, q.dtype = TSR_DTYPE_BF16;
    tsr_ir_module_t *m = NULL;
    TSR_CHECK_OK(tsr_kernels_cumulative(&q, &m));
    char *text = NULL;
    if (m) TSR_CHECK_OK(tsr_tpu_emit(tpu_ctx, tsr_ir_module_kernel(m, 0), "v5e", &text));
    TSR_CHECK(!m || text);
    tsr_ir_string_free(text);
    tsr_ir_module_destroy(m);
  }
  tsr_context_destroy(tpu_ctx);
}

int main(void) {
  /* TSR_TEST_SEED varies the random cases (a failure prints its case). */
  const char *seed = getenv("TSR_TEST_SEED");
  if (seed) rng_state ^= strtoull(seed, NULL, 10) * 0x2545f4914f6cdd1du;
  tsr_status_t s = tsr_context_create(NULL, &ctx);
  if (s) {
    printf("Bail out! context: %s\n", tsr_status_message(s));
    tsr_status_free(s);
    return 1;
  }
  TSR_RUN(parameters_refused_by_name);
  TSR_RUN(generation_is_deterministic);
  TSR_RUN(argmax_nan_and_first_occurrence);
  TSR_RUN(multi_step_paths);
  TSR_RUN(random_reductions_interp);
  TSR_RUN(random_scans_interp);
  TSR_RUN(random_reductions_cpu_and_interp);
  TSR_RUN(random_scans_cpu_and_interp);
  TSR_RUN(kernel_classes_emit_mosaic);
  tsr_context_destroy(ctx);
  return tsr_test_done();
}
