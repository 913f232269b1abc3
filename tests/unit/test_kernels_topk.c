/* The kernel library's top-k (kernels/topk.c) against a plain C reference
 * (jax.lax.top_k's order: the IEEE total order of the bits, largest first,
 * ties by lower index): rows in one block and rows longer than a block (a
 * small vmem_budget_bytes forces many blocks: the grid over the row with a
 * running top-k), every dtype, NaNs of both signs, -0.0 and +0.0, heavy
 * ties, k = 1, k = the whole row, k larger than a block, the smallest; on
 * the interpreter and, when built, the cpu backend, which must agree bit
 * for bit. */
#include <math.h>
#include <stdlib.h>

#include "array_values.h"
#include "harness.h"
#include "random_values.h"
#include "tessera/kernels.h"

static tsr_context_t *ctx;

static uint32_t rng_state = 2024;
static uint32_t rnd(void) { return tsr_test_xorshift32(&rng_state); }

/* Random elements from a few distinct values (ties), with specials; 8- and
 * 16-bit signed integers from the distinct values only, so that their
 * top-k is ties. */
static const tsr_test_fill_t fill_mix = {
    .f32_divisor = 4, .f32_special_shift = 25, .half_patterns = 12,
    .i32 = TSR_TEST_INT_MIXED, .u32 = TSR_TEST_INT_MIXED, .i16 = TSR_TEST_INT_TIES,
    .u16 = TSR_TEST_INT_MIXED, .i8 = TSR_TEST_INT_TIES, .u8 = TSR_TEST_INT_WIDE};

/* The total-order key of element i (larger is better). */
static int64_t total_key(const tsr_array_t *a, int64_t i) {
  size_t sz = tsr_dtype_size(a->dtype);
  uint32_t bits = 0;
  memcpy(&bits, (const char *)a->data + i * (int64_t)sz, sz);
  switch (a->dtype) {
  case TSR_DTYPE_F32: return (int32_t)(bits ^ ((bits >> 31) ? 0x7fffffffu : 0));
  case TSR_DTYPE_BF16: case TSR_DTYPE_F16: return (int16_t)(bits ^ ((bits >> 15) ? 0x7fffu : 0));
  default: return (int64_t)tv_get(a, i);
  }
}

typedef struct ranked {
  int64_t key, index;
} ranked_t;

static int by_rank(const void *pa, const void *pb) {
  const ranked_t *a = pa, *b = pb;
  if (a->key != b->key) return a->key > b->key ? -1 : 1;
  return (a->index > b->index) - (a->index < b->index);
}

static tsr_status_t run(tsr_ir_module_t *m, tsr_backend_t backend, tsr_array_t **ops, size_t n) {
  return tsr_test_run_module(ctx, m, backend, ops, n);
}

typedef struct topk_case {
  tsr_dtype_t dtype;
  uint32_t rank;
  int64_t dims[3];
  int32_t axis;
  int64_t k;
  bool smallest;
  int64_t budget;
  int distinct;     /* values drawn from this many (ties); 0: 9 */
  bool interp_only; /* a class another case compiles for the cpu backend */
} topk_case_t;

/* Generates and runs one case on the interpreter and (when built) the cpu
 * backend, checks each against the reference (indices and the values'
 * bits) and the two against each other. Returns 2 for a kernel with a
 * grid over the row's blocks, 1 for one block per row, 0 on failure. */
static uint32_t check(const topk_case_t *c) {
  tsr_kernels_topk_params_t p;
  tsr_kernels_topk_params_initialize(&p);
  p.rank = c->rank;
  memcpy(p.dims, c->dims, c->rank * sizeof *c->dims);
  p.dtype = c->dtype;
  p.k = c->k;
  p.axis = c->axis;
  p.smallest = c->smallest;
  p.vmem_budget_bytes = c->budget;
  tsr_ir_module_t *m = NULL;
  TSR_CHECK_OK(tsr_kernels_topk(&p, &m));
  if (!m) return 0;
  /* the grid over a row's blocks is the only arbitrary dimension */
  char *text = tsr_ir_module_print(m);
  uint32_t kind = text && strstr(text, "arbitrary") ? 2 : 1;
  tsr_ir_string_free(text);
  uint32_t ax = (uint32_t)(c->axis < 0 ? c->axis + (int32_t)c->rank : c->axis);
  int64_t odims[3];
  memcpy(odims, c->dims, sizeof odims);
  odims[ax] = c->k;
  tsr_array_t x, v[2], i[2];
  TSR_CHECK_OK(tsr_array_initialize(c->dtype, c->rank, c->dims, &x));
  tsr_test_fill_random(&x, c->distinct ? c->distinct : 9, &fill_mix, &rng_state);
  int64_t len = c->dims[ax], stride = 1, outer = 1;
  for (uint32_t d = ax + 1; d < c->rank; d++) stride *= c->dims[d];
  for (uint32_t d = 0; d < c->rank; d++)
    if (d != ax) outer *= c->dims[d];
  ranked_t *order = malloc((size_t)len * sizeof *order);
  int bad = 0;
  size_t sz = tsr_dtype_size(c->dtype);
  for (int b = 0; b < 2; b++) {
    TSR_CHECK_OK(tsr_array_initialize(c->dtype, c->rank, odims, &v[b]));
    if (b == 1 && c->interp_only) {
      TSR_CHECK_OK(tsr_array_initialize(TSR_DTYPE_I32, c->rank, odims, &i[b]));
      break;
    }
    TSR_CHECK_OK(tsr_array_initialize(TSR_DTYPE_I32, c->rank, odims, &i[b]));
    tsr_array_t *ops[] = {&x, &v[b], &i[b]};
    tsr_status_t s = run(m, b ? TSR_BACKEND_CPU : TSR_BACKEND_INTERP, ops, 3);
    if (s && b == 1 && tsr_test_cpu_absent(s)) {
      tsr_test_skip_reason = "no cpu backend in this build";
      tsr_status_free(s);
      break;
    }
    TSR_CHECK_OK(s);
    if (s) break;
    for (int64_t o = 0; o < outer && order; o++) {
      int64_t base = (o / stride) * stride * len + o % stride;
      int64_t obase = (o / stride) * stride * c->k + o % stride;
      for (int64_t j = 0; j < len; j++) {
        int64_t key = total_key(&x, base + j * stride);
        order[j] = (ranked_t){c->smallest ? -key : key, j};
      }
      qsort(order, (size_t)len, sizeof *order, by_rank);
      for (int64_t r = 0; r < c->k; r++) {
        int64_t at = obase + r * stride;
        bad += ((int32_t *)i[b].data)[at] != order[r].index;
        bad += memcmp((char *)x.data + (base + order[r].index * stride) * (int64_t)sz,
                      (char *)v[b].data + at * (int64_t)sz, sz) != 0;
      }
    }
    if (b == 1) { /* both backends, bit for bit */
      bad += memcmp(v[0].data, v[1].data, (size_t)tsr_array_element_count(&v[0]) * sz) != 0;
      bad += memcmp(i[0].data, i[1].data, (size_t)tsr_array_element_count(&i[0]) * 4) != 0;
    }
  }
  if (bad)
    printf("# %s %u-d [%lld, %lld, %lld] axis %d k %lld smallest %d budget %lld: %d bad\n",
           tsr_dtype_name(c->dtype), c->rank, (long long)c->dims[0], (long long)c->dims[1],
           (long long)c->dims[2], c->axis, (long long)c->k, c->smallest,
           (long long)c->budget, bad);
  TSR_CHECK_EQ_INT(bad, 0);
  free(order);
  tsr_array_deinitialize(&x);
  for (int b = 0; b < 2; b++) {
    tsr_array_deinitialize(&v[b]);
    tsr_array_deinitialize(&i[b]);
  }
  tsr_ir_module_destroy(m);
  return bad ? 0 : kind;
}

static const tsr_dtype_t all_dtypes[] = {TSR_DTYPE_F32, TSR_DTYPE_BF16, TSR_DTYPE_F16,
                                         TSR_DTYPE_I32, TSR_DTYPE_U32, TSR_DTYPE_I16,
                                         TSR_DTYPE_U16, TSR_DTYPE_I8,  TSR_DTYPE_U8};
enum { NUM_DTYPES = sizeof all_dtypes / sizeof all_dtypes[0] };

/* One block per row: sorted rows, the folding network, the columns. */
TSR_TEST(one_block) {
  const topk_case_t cases[] = {
      {TSR_DTYPE_F32, 2, {3, 50}, -1, 7, false, 0, 0, false},
      {TSR_DTYPE_F32, 2, {8, 4096}, -1, 16, false, 0, 0, false},
      {TSR_DTYPE_F32, 2, {9, 2048}, -1, 16, false, 0, 3, true},
      {TSR_DTYPE_I32, 2, {4, 3000}, -1, 20, true, 0, 0, false},
      {TSR_DTYPE_BF16, 1, {5000}, 0, 33, false, 0, 0, false},
      {TSR_DTYPE_F32, 3, {4, 20, 3}, 1, 5, false, 0, 0, false},
      {TSR_DTYPE_U8, 2, {2, 513}, -1, 64, false, 0, 0, false},
      {TSR_DTYPE_F32, 2, {2, 300}, -1, 300, false, 0, 0, false}, /* k = the whole row */
      {TSR_DTYPE_BF16, 2, {2, 8192}, -1, 4, false, 0, 0, false},  /* sublane slabs */
      {TSR_DTYPE_I16, 2, {16, 2048}, -1, 16, false, 0, 4, true}, /* lane slabs */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    TSR_CHECK_EQ_INT(check(&cases[i]) == 1, 1);
}

/* Rows longer than a block: the grid over the row's blocks. */
TSR_TEST(rows_longer_than_a_block) {
  const topk_case_t cases[] = {
      {TSR_DTYPE_F32, 2, {2, 1000}, -1, 5, false, 8192, 0, false},
      {TSR_DTYPE_F32, 2, {3, 3001}, -1, 16, false, 8192, 2, false},  /* heavy ties */
      {TSR_DTYPE_F32, 1, {1000}, 0, 1, false, 8192, 0, false},       /* k = 1 */
      {TSR_DTYPE_F32, 2, {2, 700}, -1, 700, false, 8192, 0, false},  /* k = the whole row */
      {TSR_DTYPE_F32, 2, {2, 3000}, -1, 300, false, 8192, 0, false}, /* k > a block (128) */
      {TSR_DTYPE_I32, 2, {9, 2049}, -1, 1, true, 8192, 0, false},
      {TSR_DTYPE_BF16, 3, {2, 3, 999}, -1, 7, false, 8192, 0, false},
      {TSR_DTYPE_F32, 2, {3, 20000}, -1, 16, false, 1 << 16, 0, false}, /* L > K per block */
      {TSR_DTYPE_F16, 2, {3, 9000}, -1, 8, true, 1 << 17, 5, false},
      {TSR_DTYPE_F32, 2, {3, 70001}, -1, 64, false, 0, 0, false}, /* over the default budget */
      {TSR_DTYPE_F32, 2, {2, 40000}, -1, 16, false, 0, 3, false},  /* sublane slabs, per column */
      {TSR_DTYPE_U32, 2, {16, 9000}, -1, 8, false, 0, 0, true}, /* lane slabs, per column */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    TSR_CHECK_EQ_INT(check(&cases[i]) == 2, 1);
}

/* Every dtype through the blocks, ties and specials included. */
TSR_TEST(every_dtype_in_blocks) {
  for (int d = 0; d < NUM_DTYPES; d++) {
    topk_case_t c = {all_dtypes[d], 2, {3, 1500}, -1, 9, d % 2 == 1, 8192, 0, false};
    TSR_CHECK_EQ_INT(check(&c), 2);
  }
}

/* Random lengths, k and budgets. */
TSR_TEST(random_long_rows) {
  for (int t = 0; t < 10; t++) {
    topk_case_t c = {all_dtypes[rnd() % NUM_DTYPES], 2, {1 + rnd() % 9, 0}, -1, 0, rnd() % 2,
                     0, 2 + (int)(rnd() % 30), false};
    c.dims[1] = 257 + rnd() % 6000;
    c.k = 1 + rnd() % (t % 3 == 0 ? c.dims[1] : 70);
    c.budget = (int64_t[]){8192, 1 << 15, 1 << 17}[rnd() % 3];
    c.interp_only = t % 2 == 1;
    TSR_CHECK(check(&c) >= 1);
  }
}

/* NaNs of both signs, zeros of both signs: the total order. */
TSR_TEST(nan_and_signed_zero_in_blocks) {
  tsr_kernels_topk_params_t p;
  tsr_kernels_topk_params_initialize(&p);
  p.rank = 1;
  p.dims[0] = 1000;
  p.k = 6;
  p.vmem_budget_bytes = 8192;
  tsr_ir_module_t *m = NULL;
  TSR_CHECK_OK(tsr_kernels_topk(&p, &m));
  if (!m) return;
  tsr_array_t x, v, i;
  int64_t kd = p.k;
  TSR_CHECK_OK(tsr_array_initialize(TSR_DTYPE_F32, 1, p.dims, &x));
  TSR_CHECK_OK(tsr_array_initialize(TSR_DTYPE_F32, 1, &kd, &v));
  TSR_CHECK_OK(tsr_array_initialize(TSR_DTYPE_I32, 1, &kd, &i));
  float *in = x.data;
  for (int j = 0; j < 1000; j++) in[j] = (float)(j % 7) - 3.0f;
  in[900] = -NAN;
  in[5] = INFINITY;
  in[700] = NAN;
  in[300] = -0.0f;
  in[400] = 0.0f;
  in[200] = NAN;
  tsr_array_t *ops[] = {&x, &v, &i};
  TSR_CHECK_OK(run(m, TSR_BACKEND_INTERP, ops, 3));
  const float *o = v.data;
  const int32_t *idx = i.data;
  /* +NaN (200, 700: lower index first), +inf, then the 3.0s from index 6 */
  TSR_CHECK(isnan(o[0]) && !signbit(o[0]) && idx[0] == 200);
  TSR_CHECK(isnan(o[1]) && idx[1] == 700);
  TSR_CHECK(o[2] == INFINITY && idx[2] == 5);
  TSR_CHECK(o[3] == 3.0f && idx[3] == 6 && idx[4] == 13 && idx[5] == 20);
  /* the smallest: -NaN first, then -3.0s */
  tsr_ir_module_destroy(m);
  m = NULL;
  p.smallest = true;
  TSR_CHECK_OK(tsr_kernels_topk(&p, &m));
  if (m) TSR_CHECK_OK(run(m, TSR_BACKEND_INTERP, ops, 3));
  TSR_CHECK(isnan(o[0]) && signbit(o[0]) && idx[0] == 900);
  TSR_CHECK(o[1] == -3.0f && idx[1] == 0 && idx[2] == 7);
  tsr_ir_module_destroy(m);
  /* -0.0 below +0.0: among zeros, +0.0 (400) first, then -0.0 (300) */
  float zeros[1000];
  for (int j = 0; j < 1000; j++) zeros[j] = -1.0f;
  zeros[300] = -0.0f;
  zeros[400] = 0.0f;
  zeros[999] = -0.0f;
  memcpy(in, zeros, sizeof zeros);
  p.smallest = false;
  p.k = 3;
  kd = 3;
  m = NULL;
  TSR_CHECK_OK(tsr_kernels_topk(&p, &m));
  tsr_array_t v3, i3;
  TSR_CHECK_OK(tsr_array_initialize(TSR_DTYPE_F32, 1, &kd, &v3));
  TSR_CHECK_OK(tsr_array_initialize(TSR_DTYPE_I32, 1, &kd, &i3));
  tsr_array_t *ops3[] = {&x, &v3, &i3};
  if (m) TSR_CHECK_OK(run(m, TSR_BACKEND_INTERP, ops3, 3));
  const int32_t *i3d = i3.data;
  TSR_CHECK(i3d[0] == 400 && i3d[1] == 300 && i3d[2] == 999);
  TSR_CHECK(!signbit(((float *)v3.data)[0]) && signbit(((float *)v3.data)[1]));
  tsr_ir_module_destroy(m);
  tsr_array_deinitialize(&x);
  tsr_array_deinitialize(&v);
  tsr_array_deinitialize(&i);
  tsr_array_deinitialize(&v3);
  tsr_array_deinitialize(&i3);
}

/* What the blocks do not cover is named. */
TSR_TEST(uncovered_is_named) {
  tsr_kernels_topk_params_t p;
  tsr_kernels_topk_params_initialize(&p);
  tsr_ir_module_t *m = NULL;
  /* another axis than the last, longer than a block */
  p.rank = 2;
  p.dims[0] = 5000;
  p.dims[1] = 2;
  p.axis = 0;
  p.k = 3;
  p.vmem_budget_bytes = 8192;
  TSR_CHECK_ERROR(tsr_kernels_topk(&p, &m), TSR_UNIMPLEMENTED, "vmem_budget_bytes");
  /* a running top-k over the budget */
  p.dims[0] = 64;
  p.dims[1] = 1 << 20;
  p.axis = -1;
  p.k = 1 << 19;
  p.vmem_budget_bytes = 1 << 20;
  TSR_CHECK_ERROR(tsr_kernels_topk(&p, &m), TSR_UNIMPLEMENTED, "k = 524288");
  TSR_CHECK(m == NULL);
}


int main(void) {
  TSR_CHECK_OK(tsr_context_create(NULL, &ctx));
  TSR_RUN_OR_SKIP(one_block);
  TSR_RUN_OR_SKIP(rows_longer_than_a_block);
  TSR_RUN_OR_SKIP(every_dtype_in_blocks);
  TSR_RUN_OR_SKIP(random_long_rows);
  TSR_RUN(nan_and_signed_zero_in_blocks);
  TSR_RUN(uncovered_is_named);
  tsr_context_destroy(ctx);
  return tsr_test_done();
}
