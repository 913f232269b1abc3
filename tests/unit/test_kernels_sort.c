/* The kernel library's sort and top-k (kernels/sort.c, sort_merge.c,
 * topk.c) against plain C references: every dtype, random shapes (padded
 * lengths, rows of 1, other axes), stability, NaN and -0.0 placement,
 * several keys, argsort, descending, rows longer than a block (a small
 * vmem_budget_bytes), top-k; on the interpreter and, when built, the cpu
 * backend; parameter errors. */
#include <math.h>
#include <stdlib.h>

#include "array_values.h"
#include "harness.h"
#include "random_values.h"
#include "tessera/kernels.h"


/* ---- a reference: the order of jax.lax.sort / jax.lax.top_k on one element ---- */

static uint32_t rng_state = 12345;
static uint32_t rnd(void) { return tsr_test_xorshift32(&rng_state); }

/* jax.lax.sort's comparison: NaNs (any sign) above everything and equal,
 * -0.0 == +0.0. */
static int lax_cmp(double a, double b) {
  bool na = isnan(a), nb = isnan(b);
  if (na || nb) return na - nb;
  return (a > b) - (a < b);
}

static size_t bytes_at(const tsr_array_t *a, int64_t i, void *out) {
  size_t s = tsr_dtype_size(a->dtype);
  memcpy(out, (const char *)a->data + i * (int64_t)s, s);
  return s;
}

/* ---- running ---- */

static tsr_context_t *ctx;

static tsr_status_t run(tsr_ir_module_t *m, tsr_backend_t backend, tsr_array_t **ops, size_t n) {
  return tsr_test_run_module(ctx, m, backend, ops, n);
}

/* Random elements from a few distinct values (ties), with specials. */
static const tsr_test_fill_t fill_mix = {
    .f32_divisor = 2, .f32_special_shift = 24, .half_patterns = 10,
    .i32 = TSR_TEST_INT_MIXED, .u32 = TSR_TEST_INT_MIXED, .i16 = TSR_TEST_INT_MIXED,
    .u16 = TSR_TEST_INT_WIDE, .i8 = TSR_TEST_INT_WIDE, .u8 = TSR_TEST_INT_TIES};

/* ---- the sort reference: stable, by keys then input position ---- */

typedef struct ref_ctx {
  const tsr_array_t *ops;
  uint32_t nk;
  bool descending;
  int64_t base, stride;
} ref_ctx_t;

static ref_ctx_t *the_ref;

static int ref_cmp(const void *pa, const void *pb) {
  int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
  const ref_ctx_t *r = the_ref;
  for (uint32_t k = 0; k < r->nk; k++) {
    int c = lax_cmp(tv_get(&r->ops[k], r->base + a * r->stride),
                    tv_get(&r->ops[k], r->base + b * r->stride));
    if (c) return r->descending ? -c : c;
  }
  return (a > b) - (a < b);
}

typedef struct sort_case {
  uint32_t rank;
  int64_t dims[3];
  int32_t axis;
  uint32_t num_operands, num_keys;
  tsr_dtype_t dtypes[3];
  bool descending, stable, indices;
  int64_t budget;
} sort_case_t;

/* Runs one case; for stable sorts checks every output exactly (bits), for
 * others the keys' order and that each output row is a permutation. */
static void check_sort(const sort_case_t *c, tsr_backend_t backend) {
  tsr_kernels_sort_params_t p;
  tsr_kernels_sort_params_initialize(&p);
  p.rank = c->rank;
  memcpy(p.dims, c->dims, sizeof c->dims);
  p.axis = c->axis;
  p.num_operands = c->num_operands;
  p.num_keys = c->num_keys;
  memcpy(p.dtypes, c->dtypes, sizeof c->dtypes);
  p.descending = c->descending;
  p.stable = c->stable;
  p.return_indices = c->indices;
  p.vmem_budget_bytes = c->budget;
  tsr_ir_module_t *m = NULL;
  TSR_CHECK_OK(tsr_kernels_sort(&p, &m));
  if (!m) return;
  tsr_array_t arrays[7];
  tsr_array_t *ptrs[7];
  uint32_t n = c->num_operands, total = 2 * n + (c->indices ? 1 : 0);
  for (uint32_t i = 0; i < total; i++) {
    tsr_dtype_t dt = i < 2 * n ? c->dtypes[i % n] : TSR_DTYPE_I32;
    TSR_CHECK_OK(tsr_array_initialize(dt, c->rank, c->dims, &arrays[i]));
    ptrs[i] = &arrays[i];
  }
  for (uint32_t i = 0; i < n; i++)
    tsr_test_fill_random(&arrays[i], i == 0 ? 9 : 5, &fill_mix, &rng_state);
  tsr_status_t s = run(m, backend, ptrs, total);
  if (s && backend == TSR_BACKEND_CPU && tsr_test_cpu_absent(s)) {
    tsr_test_skip_reason = "no cpu backend in this build";
    tsr_status_free(s);
  } else {
    TSR_CHECK_OK(s);
  }
  if (!s) {
    uint32_t axis = (uint32_t)(c->axis < 0 ? c->axis + (int32_t)c->rank : c->axis);
    int64_t len = c->dims[axis], stride = 1, outer = 1;
    for (uint32_t d = axis + 1; d < c->rank; d++) stride *= c->dims[d];
    for (uint32_t d = 0; d < c->rank; d++)
      if (d != axis) outer *= c->dims[d];
    int64_t *order = malloc((size_t)len * sizeof *order);
    ref_ctx_t r = {arrays, c->num_keys, c->descending, 0, stride};
    int bad = 0;
    for (int64_t o = 0; o < outer && order; o++) {
      r.base = (o / stride) * stride * len + o % stride;
      for (int64_t i = 0; i < len; i++) order[i] = i;
      the_ref = &r;
      qsort(order, (size_t)len, sizeof *order, ref_cmp);
      for (int64_t i = 0; i < len; i++) {
        int64_t at = r.base + i * stride, from = r.base + order[i] * stride;
        for (uint32_t k = 0; k < n; k++) {
          char want[4], got[4];
          size_t sz = bytes_at(&arrays[k], from, want);
          bytes_at(&arrays[n + k], at, got);
          if (c->stable) {
            bad += memcmp(want, got, sz) != 0;
          } else if (k < c->num_keys) {
            /* the sorted keys equal the reference's up to lax equality */
            bad += lax_cmp(tv_get(&arrays[k], from), tv_get(&arrays[n + k], at)) != 0;
          }
        }
        if (c->indices) {
          int32_t idx = ((int32_t *)arrays[2 * n].data)[at];
          if (c->stable) {
            bad += idx != order[i];
          } else if (idx < 0 || idx >= len) {
            bad++;
          } else { /* the index points at an element with the output's values */
            for (uint32_t k = 0; k < n; k++) {
              char want[4], got[4];
              size_t sz = bytes_at(&arrays[k], r.base + idx * stride, want);
              bytes_at(&arrays[n + k], at, got);
              bad += memcmp(want, got, sz) != 0;
            }
          }
        }
      }
    }
    free(order);
    if (bad)
      printf("# %u-d %s axis %d ops %u keys %u desc %d stable %d idx %d budget %lld: %d bad\n",
             c->rank, tsr_dtype_name(c->dtypes[0]), c->axis, n, c->num_keys, c->descending,
             c->stable, c->indices, (long long)c->budget, bad);
    TSR_CHECK_EQ_INT(bad, 0);
  }
  for (uint32_t i = 0; i < total; i++) tsr_array_deinitialize(&arrays[i]);
  tsr_ir_module_destroy(m);
}

static const tsr_dtype_t all_dtypes[] = {TSR_DTYPE_F32, TSR_DTYPE_BF16, TSR_DTYPE_F16,
                                         TSR_DTYPE_I32, TSR_DTYPE_U32, TSR_DTYPE_I16,
                                         TSR_DTYPE_U16, TSR_DTYPE_I8,  TSR_DTYPE_U8};
enum { NUM_DTYPES = sizeof all_dtypes / sizeof all_dtypes[0] };

static void every_dtype(tsr_backend_t backend, bool stable, bool descending) {
  for (int d = 0; d < NUM_DTYPES; d++) {
    sort_case_t c = {2, {3, 1 + (int64_t)(rnd() % 200), 0}, -1, 1, 1, {all_dtypes[d]},
                     descending, stable, stable, 0};
    check_sort(&c, backend);
  }
}

TSR_TEST(stable_every_dtype_interp) { every_dtype(TSR_BACKEND_INTERP, true, false); }
TSR_TEST(stable_descending_every_dtype_interp) { every_dtype(TSR_BACKEND_INTERP, true, true); }
TSR_TEST(unstable_every_dtype_interp) { every_dtype(TSR_BACKEND_INTERP, false, false); }

TSR_TEST(random_shapes_and_axes_interp) {
  for (int t = 0; t < 24; t++) {
    sort_case_t c = {0};
    c.rank = 1 + rnd() % 3;
    for (uint32_t d = 0; d < c.rank; d++) c.dims[d] = 1 + rnd() % (d + 1 == c.rank ? 150 : 12);
    if (t % 6 == 0) c.dims[c.rank - 1] = 1; /* rows of one */
    c.axis = (int32_t)(rnd() % c.rank) - (int32_t)(rnd() % 2 ? c.rank : 0);
    c.num_operands = 1 + rnd() % 3;
    c.num_keys = 1 + rnd() % c.num_operands;
    for (uint32_t i = 0; i < c.num_operands; i++) c.dtypes[i] = all_dtypes[rnd() % NUM_DTYPES];
    c.descending = rnd() % 2;
    c.stable = rnd() % 2;
    c.indices = c.stable || rnd() % 2;
    check_sort(&c, TSR_BACKEND_INTERP);
  }
}

/* Rows longer than a block: the multi-block merge through HBM (blocks of
 * 128 with a 8 KiB budget), full and partial last blocks. */
TSR_TEST(rows_longer_than_a_block_interp) {
  const int64_t lengths[] = {129, 1000, 1024, 3000};
  for (int i = 0; i < 4; i++) {
    sort_case_t c = {2, {2, lengths[i], 0}, -1, 1, 1, {TSR_DTYPE_F32}, i % 2, i < 2, i < 3,
                     8192};
    check_sort(&c, TSR_BACKEND_INTERP);
    sort_case_t kv = {1, {lengths[i], 0, 0}, 0, 2, 1, {TSR_DTYPE_I32, TSR_DTYPE_BF16},
                      false, true, true, 8192};
    check_sort(&kv, TSR_BACKEND_INTERP);
  }
  for (int t = 0; t < 12; t++) { /* random ones */
    sort_case_t r = {0};
    r.rank = 1 + rnd() % 2;
    r.dims[0] = 1 + rnd() % 3;
    r.dims[r.rank - 1] = 129 + rnd() % 2000;
    r.axis = -1;
    r.num_operands = 1 + rnd() % 3;
    r.num_keys = 1 + rnd() % r.num_operands;
    for (uint32_t i = 0; i < r.num_operands; i++) r.dtypes[i] = all_dtypes[rnd() % NUM_DTYPES];
    r.descending = rnd() % 2;
    r.stable = rnd() % 2;
    r.indices = r.stable || rnd() % 2;
    r.budget = 8192;
    check_sort(&r, TSR_BACKEND_INTERP);
  }
  sort_case_t two = {1, {700, 0, 0}, 0, 3, 2, {TSR_DTYPE_U8, TSR_DTYPE_F32, TSR_DTYPE_I16},
                     true, false, false, 8192};
  check_sort(&two, TSR_BACKEND_INTERP);
}

/* The multi-block sort moves the rows of one HBM tile per step (8 rows of
 * 32-bit operands, 16 of 16-bit, 32 of 8-bit; all rows when fewer, or
 * when tiles do not divide them and they are at most 64): one group, full
 * groups, a partial last group (67 rows), rank 3 (a leading grid dim). */
TSR_TEST(multi_block_row_groups_interp) {
  sort_case_t cases[] = {
      {2, {8, 300, 0}, -1, 1, 1, {TSR_DTYPE_F32}, false, false, false, 8192},
      {2, {19, 200, 0}, -1, 1, 1, {TSR_DTYPE_F32}, true, false, true, 8192},
      {3, {2, 11, 260}, -1, 2, 1, {TSR_DTYPE_I32, TSR_DTYPE_BF16}, false, true, true, 8192},
      {2, {35, 129, 0}, -1, 2, 2, {TSR_DTYPE_U8, TSR_DTYPE_I16}, true, true, true, 8192},
      {2, {17, 1000, 0}, -1, 1, 1, {TSR_DTYPE_BF16}, false, true, true, 8192},
      {2, {67, 130, 0}, -1, 2, 1, {TSR_DTYPE_F32, TSR_DTYPE_U16}, true, true, true, 8192},
      {2, {72, 200, 0}, -1, 1, 1, {TSR_DTYPE_I32}, false, false, false, 8192},
      /* a partial last group of 16-bit tiles (16-row groups, 6 rows
       * last) and a last block of 44 positions (transit buffers) */
      {2, {70, 300, 0}, -1, 1, 1, {TSR_DTYPE_BF16}, true, true, true, 8192},
      {3, {2, 67, 257}, -1, 2, 1, {TSR_DTYPE_F32, TSR_DTYPE_I8}, false, false, true, 8192},
      /* 3 rows of i8 in the last group, whole blocks: transit buffers */
      {2, {67, 256, 0}, -1, 1, 1, {TSR_DTYPE_I8}, true, false, false, 8192},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    check_sort(&cases[i], TSR_BACKEND_INTERP);
}

/* A stable multi-block sort without the indices output: when every operand
 * is an integer key, equal keys are equal bits and the unstable network
 * gives the stable result (checked bit for bit against the stable
 * reference); with a float key or a payload it still needs the indices. */

TSR_TEST(multi_block_stable_integer_keys_without_indices) {
  sort_case_t cases[] = {
      {2, {3, 1000, 0}, -1, 1, 1, {TSR_DTYPE_I32}, false, true, false, 8192},
      {1, {700, 0, 0}, 0, 2, 2, {TSR_DTYPE_U8, TSR_DTYPE_I16}, true, true, false, 8192},
      {2, {10, 300, 0}, -1, 1, 1, {TSR_DTYPE_U32}, true, true, false, 8192},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    check_sort(&cases[i], TSR_BACKEND_INTERP);
  tsr_kernels_sort_params_t p;
  tsr_kernels_sort_params_initialize(&p);
  p.rank = 1;
  p.dims[0] = 1000;
  p.num_operands = 2;
  p.dtypes[0] = TSR_DTYPE_I32;
  p.dtypes[1] = TSR_DTYPE_I32; /* a payload: its order among equal keys shows */
  p.stable = true;
  p.vmem_budget_bytes = 8192;
  tsr_ir_module_t *m = NULL;
  TSR_CHECK_ERROR(tsr_kernels_sort(&p, &m), TSR_UNIMPLEMENTED, "return_indices");
  TSR_CHECK(m == NULL);
}

static void check_topk(tsr_dtype_t dtype, uint32_t rank, const int64_t *dims, int32_t axis,
                       int64_t k, bool smallest, tsr_backend_t backend);

/* Rows of 2048 and more in one block: the (128, p/128) tiles. */
TSR_TEST(tiled_rows_interp) {
  sort_case_t cases[] = {
      {2, {3, 2048, 0}, -1, 1, 1, {TSR_DTYPE_F32}, false, false, false, 0},
      {2, {2, 2500, 0}, -1, 2, 1, {TSR_DTYPE_BF16, TSR_DTYPE_I8}, true, true, true, 0},
      {1, {4097, 0, 0}, 0, 1, 1, {TSR_DTYPE_U32}, false, true, true, 0},
      {3, {2, 2, 3000}, -1, 2, 2, {TSR_DTYPE_I16, TSR_DTYPE_F32}, false, false, true, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    check_sort(&cases[i], TSR_BACKEND_INTERP);
  check_topk(TSR_DTYPE_F32, 2, (int64_t[]){3, 2100}, -1, 9, false, TSR_BACKEND_INTERP);
  /* the folding (partial) network: rows at least 4 x pow2(k) long */
  check_topk(TSR_DTYPE_BF16, 2, (int64_t[]){2, 1000}, -1, 5, false, TSR_BACKEND_INTERP);
  check_topk(TSR_DTYPE_I16, 1, (int64_t[]){700}, 0, 1, true, TSR_BACKEND_INTERP);
  check_topk(TSR_DTYPE_U8, 2, (int64_t[]){2, 513}, -1, 64, false, TSR_BACKEND_INTERP);
}

TSR_TEST(both_backends_agree_cpu) {
  sort_case_t cases[] = {
      {2, {5, 300, 0}, -1, 1, 1, {TSR_DTYPE_F32}, false, true, true, 0},
      {1, {128, 0, 0}, 0, 1, 1, {TSR_DTYPE_F32}, false, false, false, 0},
      {2, {40, 3, 0}, 0, 2, 1, {TSR_DTYPE_BF16, TSR_DTYPE_U32}, true, true, true, 0},
      {1, {1000, 0, 0}, 0, 1, 1, {TSR_DTYPE_I16}, true, true, true, 8192},
      {2, {2, 2500, 0}, -1, 2, 1, {TSR_DTYPE_F32, TSR_DTYPE_I32}, false, true, true, 0},
      {2, {19, 300, 0}, -1, 1, 1, {TSR_DTYPE_F32}, true, false, false, 8192},
      {3, {2, 9, 500}, -1, 2, 1, {TSR_DTYPE_I16, TSR_DTYPE_F32}, false, true, true, 8192},
      {2, {9, 400, 0}, -1, 1, 1, {TSR_DTYPE_I32}, true, true, false, 8192},
      /* ragged rows (a partial last group) and length (tail buffers) */
      {2, {67, 300, 0}, -1, 1, 1, {TSR_DTYPE_F32}, true, true, true, 8192},
      {2, {70, 129, 0}, -1, 2, 1, {TSR_DTYPE_BF16, TSR_DTYPE_U32}, false, false, false, 8192},
      {2, {67, 200, 0}, -1, 2, 1, {TSR_DTYPE_I8, TSR_DTYPE_F32}, false, true, true, 8192},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0] && !tsr_test_skip_reason; i++)
    check_sort(&cases[i], TSR_BACKEND_CPU);
}

/* NaNs of both signs after +inf, -0.0 and +0.0 equal (input order kept). */
TSR_TEST(nan_and_signed_zero_placement) {
  const float in[8] = {NAN, 1.0f, -0.0f, -NAN, 0.0f, -INFINITY, -0.0f, INFINITY};
  tsr_kernels_sort_params_t p;
  tsr_kernels_sort_params_initialize(&p);
  p.rank = 1;
  p.dims[0] = 8;
  p.stable = true;
  tsr_ir_module_t *m = NULL;
  TSR_CHECK_OK(tsr_kernels_sort(&p, &m));
  tsr_array_t x, y;
  TSR_CHECK_OK(tsr_array_initialize(TSR_DTYPE_F32, 1, p.dims, &x));
  TSR_CHECK_OK(tsr_array_initialize(TSR_DTYPE_F32, 1, p.dims, &y));
  memcpy(x.data, in, sizeof in);
  tsr_array_t *ops[] = {&x, &y};
  if (m) TSR_CHECK_OK(run(m, TSR_BACKEND_INTERP, ops, 2));
  const float *o = y.data;
  TSR_CHECK(o[0] == -INFINITY && o[1] == 0.0f && signbit(o[1]) && o[2] == 0.0f &&
            !signbit(o[2]) && o[3] == 0.0f && signbit(o[3]) && o[4] == 1.0f &&
            o[5] == INFINITY && isnan(o[6]) && !signbit(o[6]) && isnan(o[7]) && signbit(o[7]));
  tsr_array_deinitialize(&x);
  tsr_array_deinitialize(&y);
  tsr_ir_module_destroy(m);
}

/* ---- top-k: the total order of the bits, descending, ties by lower index ---- */

static void check_topk(tsr_dtype_t dtype, uint32_t rank, const int64_t *dims, int32_t axis,
                       int64_t k, bool smallest, tsr_backend_t backend) {
  tsr_kernels_topk_params_t p;
  tsr_kernels_topk_params_initialize(&p);
  p.rank = rank;
  memcpy(p.dims, dims, rank * sizeof *dims);
  p.dtype = dtype;
  p.k = k;
  p.axis = axis;
  p.smallest = smallest;
  tsr_ir_module_t *m = NULL;
  TSR_CHECK_OK(tsr_kernels_topk(&p, &m));
  if (!m) return;
  uint32_t ax = (uint32_t)(axis < 0 ? axis + (int32_t)rank : axis);
  int64_t odims[TSR_MAX_RANK];
  memcpy(odims, dims, rank * sizeof *dims);
  odims[ax] = k;
  tsr_array_t x, v, i;
  TSR_CHECK_OK(tsr_array_initialize(dtype, rank, dims, &x));
  TSR_CHECK_OK(tsr_array_initialize(dtype, rank, odims, &v));
  TSR_CHECK_OK(tsr_array_initialize(TSR_DTYPE_I32, rank, odims, &i));
  tsr_test_fill_random(&x, 7, &fill_mix, &rng_state);
  tsr_array_t *ops[] = {&x, &v, &i};
  tsr_status_t s = run(m, backend, ops, 3);
  if (s && backend == TSR_BACKEND_CPU && tsr_test_cpu_absent(s)) {
    tsr_test_skip_reason = "no cpu backend in this build";
    tsr_status_free(s);
  } else {
    TSR_CHECK_OK(s);
  }
  if (!s) {
    int64_t len = dims[ax], stride = 1, outer = 1;
    for (uint32_t d = ax + 1; d < rank; d++) stride *= dims[d];
    for (uint32_t d = 0; d < rank; d++)
      if (d != ax) outer *= dims[d];
    size_t sz = tsr_dtype_size(dtype);
    int bad = 0;
    for (int64_t o = 0; o < outer; o++) {
      int64_t base = (o / stride) * stride * len + o % stride;
      int64_t obase = (o / stride) * stride * k + o % stride;
      /* selection by the total order: a key from the bits */
      for (int64_t r = 0; r < k; r++) {
        int64_t best = -1;
        int64_t best_key = 0;
        for (int64_t j = 0; j < len; j++) {
          bool taken = false;
          for (int64_t q = 0; q < r; q++)
            taken |= ((int32_t *)i.data)[obase + q * stride] == j;
          if (taken) continue;
          uint32_t bits = 0;
          int64_t key;
          memcpy(&bits, (char *)x.data + (base + j * stride) * (int64_t)sz, sz);
          if (dtype == TSR_DTYPE_F32) key = (int32_t)(bits ^ ((bits >> 31) ? 0x7fffffffu : 0));
          else if (dtype == TSR_DTYPE_BF16 || dtype == TSR_DTYPE_F16)
            key = (int16_t)(bits ^ ((bits >> 15) ? 0x7fffu : 0));
          else key = (int64_t)tv_get(&x, base + j * stride);
          if (smallest) key = -key;
          if (best < 0 || key > best_key) {
            best = j;
            best_key = key;
          }
        }
        int32_t got = ((int32_t *)i.data)[obase + r * stride];
        bad += got != best;
        char want_v[4], got_v[4];
        bytes_at(&x, base + best * stride, want_v);
        bytes_at(&v, obase + r * stride, got_v);
        bad += memcmp(want_v, got_v, sz) != 0;
      }
    }
    if (bad) printf("# topk %s k %lld: %d bad\n", tsr_dtype_name(dtype), (long long)k, bad);
    TSR_CHECK_EQ_INT(bad, 0);
  }
  tsr_array_deinitialize(&x);
  tsr_array_deinitialize(&v);
  tsr_array_deinitialize(&i);
  tsr_ir_module_destroy(m);
}

TSR_TEST(topk_every_dtype_interp) {
  for (int d = 0; d < NUM_DTYPES; d++) {
    check_topk(all_dtypes[d], 2, (int64_t[]){3, 50}, -1, 7, false, TSR_BACKEND_INTERP);
    check_topk(all_dtypes[d], 1, (int64_t[]){9}, 0, 9, d % 2, TSR_BACKEND_INTERP);
  }
  check_topk(TSR_DTYPE_F32, 3, (int64_t[]){4, 20, 3}, 1, 5, false, TSR_BACKEND_INTERP);
  check_topk(TSR_DTYPE_I8, 2, (int64_t[]){1, 1}, -1, 1, false, TSR_BACKEND_INTERP);
}

TSR_TEST(topk_cpu) {
  check_topk(TSR_DTYPE_F32, 2, (int64_t[]){4, 130}, -1, 10, false, TSR_BACKEND_CPU);
  check_topk(TSR_DTYPE_F32, 2, (int64_t[]){2, 3000}, -1, 17, false, TSR_BACKEND_CPU);
}

/* ---- parameters ---- */

TSR_TEST(bad_parameters_are_named) {
  tsr_kernels_sort_params_t p;
  tsr_ir_module_t *m = NULL;
  tsr_kernels_sort_params_initialize(&p);
  TSR_CHECK_ERROR(tsr_kernels_sort(&p, &m), TSR_INVALID_ARGUMENT, "rank");
  p.rank = 2;
  p.dims[0] = 4;
  p.dims[1] = 0;
  TSR_CHECK_ERROR(tsr_kernels_sort(&p, &m), TSR_INVALID_ARGUMENT, "dims[1]");
  p.dims[1] = 8;
  p.axis = 2;
  TSR_CHECK_ERROR(tsr_kernels_sort(&p, &m), TSR_INVALID_ARGUMENT, "axis");
  p.axis = -1;
  p.num_keys = 2;
  TSR_CHECK_ERROR(tsr_kernels_sort(&p, &m), TSR_INVALID_ARGUMENT, "num_keys");
  p.num_keys = 1;
  p.num_operands = 9;
  TSR_CHECK_ERROR(tsr_kernels_sort(&p, &m), TSR_INVALID_ARGUMENT, "num_operands");
  p.num_operands = 1;
  p.dtypes[0] = TSR_DTYPE_I1;
  TSR_CHECK_ERROR(tsr_kernels_sort(&p, &m), TSR_UNIMPLEMENTED, "dtypes[0] is i1");
  p.dtypes[0] = TSR_DTYPE_F32;
  p.vmem_budget_bytes = -1;
  TSR_CHECK_ERROR(tsr_kernels_sort(&p, &m), TSR_INVALID_ARGUMENT, "vmem_budget_bytes");
  /* a row longer than a block, sorted stably, needs the indices output */
  p.vmem_budget_bytes = 8192;
  p.dims[1] = 5000;
  p.stable = true;
  TSR_CHECK_ERROR(tsr_kernels_sort(&p, &m), TSR_UNIMPLEMENTED, "return_indices");
  /* other axes than the last fit one block */
  p.stable = false;
  p.axis = 0;
  p.dims[0] = 5000;
  p.dims[1] = 2;
  TSR_CHECK_ERROR(tsr_kernels_sort(&p, &m), TSR_UNIMPLEMENTED, "vmem_budget_bytes");
  TSR_CHECK(m == NULL);
  tsr_kernels_topk_params_t t;
  tsr_kernels_topk_params_initialize(&t);
  t.rank = 1;
  t.dims[0] = 10;
  t.k = 11;
  TSR_CHECK_ERROR(tsr_kernels_topk(&t, &m), TSR_INVALID_ARGUMENT, "k must be 1..10");
  t.k = 0;
  TSR_CHECK_ERROR(tsr_kernels_topk(&t, &m), TSR_INVALID_ARGUMENT, "k must be");
  TSR_CHECK(m == NULL);
}

/* The same parameters give the same kernel (hence the same cache key). */
TSR_TEST(generation_is_deterministic) {
  tsr_kernels_sort_params_t p;
  tsr_kernels_sort_params_initialize(&p);
  p.rank = 2;
  p.dims[0] = 3;
  p.dims[1] = 100;
  p.num_operands = 2;
  p.dtypes[1] = TSR_DTYPE_I32;
  p.stable = true;
  tsr_ir_module_t *a = NULL, *b = NULL;
  TSR_CHECK_OK(tsr_kernels_sort(&p, &a));
  TSR_CHECK_OK(tsr_kernels_sort(&p, &b));
  if (a && b) {
    char *ta = tsr_ir_module_print(a), *tb = tsr_ir_module_print(b);
    TSR_CHECK(ta && tb && strcmp(ta, tb) == 0);
    tsr_ir_string_free(ta);
    tsr_ir_string_free(tb);
  }
  tsr_ir_module_destroy(a);
  tsr_ir_module_destroy(b);
}


int main(void) {
  TSR_CHECK_OK(tsr_context_create(NULL, &ctx));
  TSR_RUN(stable_every_dtype_interp);
  TSR_RUN(stable_descending_every_dtype_interp);
  TSR_RUN(unstable_every_dtype_interp);
  TSR_RUN(random_shapes_and_axes_interp);
  TSR_RUN(rows_longer_than_a_block_interp);
  TSR_RUN(multi_block_row_groups_interp);
  TSR_RUN(multi_block_stable_integer_keys_without_indices);
  TSR_RUN(tiled_rows_interp);
  TSR_RUN(nan_and_signed_zero_placement);
  TSR_RUN(topk_every_dtype_interp);
  TSR_RUN(bad_parameters_are_named);
  TSR_RUN(generation_is_deterministic);
  TSR_RUN_OR_SKIP(both_backends_agree_cpu);
  TSR_RUN_OR_SKIP(topk_cpu);
  tsr_context_destroy(ctx);
  return tsr_test_done();
}
