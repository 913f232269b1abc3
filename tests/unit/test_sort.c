/* base/sort.c (the sort and argsort ops) against a reference written from
 * jax.lax.sort's definition with float arithmetic, not bit keys: a stable
 * sort whose comparison puts NaNs last and equal, and -0.0 == +0.0. Every
 * dtype, lines along every axis, rows of 1 to 20000 elements (short ones
 * merge-sorted, long ones on vqsort), several keys,
 * inputs full of ties, both zeros and NaNs of both signs. */
#include <math.h>
#include <pthread.h>

#include "base/sort.h"
#include "harness.h"
#include "random_values.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) { return tsr_test_xorshift64(&rng_state); }

static const tsr_dtype_t all_dtypes[] = {TSR_DTYPE_F32, TSR_DTYPE_BF16, TSR_DTYPE_F16,
                                         TSR_DTYPE_I32, TSR_DTYPE_U32,  TSR_DTYPE_I16,
                                         TSR_DTYPE_U16, TSR_DTYPE_I8,   TSR_DTYPE_U8,
                                         TSR_DTYPE_I1};

/* Element i as its bits, and as a number (NaN for NaNs). */
static uint32_t bits_at(tsr_dtype_t dt, const void *p, int64_t i) {
  switch (tsr_dtype_size(dt)) {
    case 4: return ((const uint32_t *)p)[i];
    case 2: return ((const uint16_t *)p)[i];
    default: return ((const uint8_t *)p)[i];
  }
}

static double value_at(tsr_dtype_t dt, const void *p, int64_t i) {
  uint32_t b = bits_at(dt, p, i);
  switch (dt) {
    case TSR_DTYPE_F32: {
      float f;
      memcpy(&f, &b, 4);
      return f;
    }
    case TSR_DTYPE_BF16: return tsr_bf16_to_f32((uint16_t)b);
    case TSR_DTYPE_F16: return tsr_f16_to_f32((uint16_t)b);
    case TSR_DTYPE_I32: return (int32_t)b;
    case TSR_DTYPE_I16: return (int16_t)b;
    case TSR_DTYPE_I8: return (int8_t)b;
    default: return b;
  }
}

/* lax.sort's comparison of two numbers: -1, 0, 1 (NaNs last, all equal). */
static int lax_compare(double a, double b) {
  if (isnan(a) || isnan(b)) return isnan(a) - isnan(b);
  return (a > b) - (a < b);
}

/* Random data with many ties; floats also get both zeros and NaNs of both
 * signs. */
static bool finite_only; /* f32 lines without NaNs and infinities */
static bool normal_only; /* f32 lines of normal numbers only (vqsort's float sort) */

static void fill(tsr_dtype_t dt, void *p, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    uint64_t r = rnd();
    uint32_t b = (uint32_t)(r >> 32);
    int pick = (int)(r % 10);
    if (dt == TSR_DTYPE_F32) {
      float f = (float)((int)(b % 9) - 4) * 0.5f;
      uint32_t fb;
      memcpy(&fb, &f, 4);
      uint32_t special[] = {0x80000000u, 0x00000000u, 0x7fc00000u, 0xffc00001u, 0x7f800000u,
                            0xff800000u};
      if (pick < 3) fb = special[b % 6];
      if (pick == 3) fb = b; /* anything, NaNs and subnormals included */
      if (finite_only && (fb & 0x7f800000u) == 0x7f800000u) fb &= 0xbf7fffffu; /* no NaN, no inf */
      if (normal_only && ((fb & 0x7f800000u) == 0 || (fb & 0x7f800000u) == 0x7f800000u))
        fb = (fb & 0x807fffffu) | 0x3f800000u; /* the lines vqsort sorts as floats */
      ((uint32_t *)p)[i] = fb;
    } else if (dt == TSR_DTYPE_BF16 || dt == TSR_DTYPE_F16) {
      uint16_t hb = dt == TSR_DTYPE_BF16 ? tsr_f32_to_bf16((float)((int)(b % 9) - 4))
                                         : tsr_f32_to_f16((float)((int)(b % 9) - 4));
      uint16_t bf_special[] = {0x8000, 0x0000, 0x7fc1, 0xffc0, 0x7f80, 0xff80};
      uint16_t h_special[] = {0x8000, 0x0000, 0x7e01, 0xfe00, 0x7c00, 0xfc00};
      if (pick < 3) hb = dt == TSR_DTYPE_BF16 ? bf_special[b % 6] : h_special[b % 6];
      if (pick == 3) hb = (uint16_t)b;
      ((uint16_t *)p)[i] = hb;
    } else if (dt == TSR_DTYPE_I1) {
      ((uint8_t *)p)[i] = (uint8_t)(b & 1);
    } else {
      uint32_t v = pick < 5 ? b % 5 : b; /* ties, and the whole range */
      if (pick == 5) v = (b & 1) ? 0xffffffffu >> (32 - 8 * tsr_dtype_size(dt)) : 0; /* the ends */
      if (pick == 6) v = (0xffffffffu >> (33 - 8 * tsr_dtype_size(dt))) + (b & 1);
      switch (tsr_dtype_size(dt)) {
        case 4: ((uint32_t *)p)[i] = v; break;
        case 2: ((uint16_t *)p)[i] = (uint16_t)v; break;
        default: ((uint8_t *)p)[i] = (uint8_t)v; break;
      }
    }
  }
}

/* The reference: the stable order of line (off, stride, n) of the keys:
 * qsort by lax_compare of each key in turn, then by position. */
static struct {
  uint32_t nk;
  const tsr_dtype_t *dts;
  const void *const *keys;
  int64_t off, stride;
} ref;

static int ref_compare(const void *pa, const void *pb) {
  int32_t a = *(const int32_t *)pa, b = *(const int32_t *)pb;
  for (uint32_t k = 0; k < ref.nk; k++) {
    int c = lax_compare(value_at(ref.dts[k], ref.keys[k], ref.off + a * ref.stride),
                        value_at(ref.dts[k], ref.keys[k], ref.off + b * ref.stride));
    if (c) return c;
  }
  return (a > b) - (a < b);
}

static void reference_order(uint32_t nk, const tsr_dtype_t *dts, const void *const *keys,
                            int64_t off, int64_t stride, int64_t n, int32_t *order) {
  ref.nk = nk;
  ref.dts = dts;
  ref.keys = keys;
  ref.off = off;
  ref.stride = stride;
  for (int64_t i = 0; i < n; i++) order[i] = (int32_t)i;
  qsort(order, (size_t)n, sizeof *order, ref_compare);
}

typedef struct shape {
  uint32_t rank, axis;
  int64_t dims[3];
} shape_t;

static const shape_t shapes[] = {
    {1, 0, {1}},          {1, 0, {2}},         {1, 0, {33}},         {1, 0, {3000}},
    {2, 1, {8, 128}},     {2, 0, {8, 128}},    {2, 1, {3, 257}},     {2, 0, {65, 3}},
    {3, 1, {2, 40, 3}},   {3, 2, {2, 3, 100}}, {3, 0, {17, 2, 2}},   {2, 1, {4, 1}},
    {1, 0, {2048}},       {2, 1, {3, 1500}},
    /* longer than base/sort.c's SHORT_LINE: Highway's vqsort */
    {1, 0, {20000}},      {2, 1, {2, 4100}},   {2, 0, {2500, 3}},
};

static void line_geometry(const shape_t *s, int64_t *outer, int64_t *n, int64_t *inner) {
  *outer = 1;
  *inner = 1;
  *n = s->dims[s->axis];
  for (uint32_t d = 0; d < s->axis; d++) *outer *= s->dims[d];
  for (uint32_t d = s->axis + 1; d < s->rank; d++) *inner *= s->dims[d];
}

TSR_TEST(sort_matches_the_reference_bit_for_bit) {
  for (size_t di = 0; di < sizeof all_dtypes / sizeof *all_dtypes; di++) {
    tsr_dtype_t dt = all_dtypes[di];
    size_t es = tsr_dtype_size(dt);
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
      const shape_t *s = &shapes[si];
      int64_t count = tsr_dims_count(s->rank, s->dims), outer, n, inner;
      line_geometry(s, &outer, &n, &inner);
      void *src = malloc((size_t)count * es), *dst = malloc((size_t)count * es);
      int32_t *order = malloc((size_t)n * sizeof *order);
      fill(dt, src, count);
      tsr_status_t st = tsr_sort_block(NULL, dt, dst, src, s->rank, s->dims, s->axis);
      TSR_CHECK(st == NULL);
      tsr_status_free(st);
      int bad = 0;
      for (int64_t o = 0; o < outer && !bad; o++)
        for (int64_t j = 0; j < inner && !bad; j++) {
          int64_t off = o * n * inner + j;
          const void *k = src;
          reference_order(1, &dt, &k, off, inner, n, order);
          for (int64_t i = 0; i < n && !bad; i++) {
            uint32_t want = bits_at(dt, src, off + order[i] * inner);
            uint32_t got = bits_at(dt, dst, off + i * inner);
            if (want != got) {
              TSR_FAIL_AT("%s shape #%zu line %lld position %lld: 0x%x, expected 0x%x",
                          tsr_dtype_name(dt), si, (long long)off, (long long)i, got, want);
              bad = 1;
            }
          }
        }
      free(src);
      free(dst);
      free(order);
    }
  }
}

TSR_TEST(finite_f32_lines_match_the_reference) {
  finite_only = true;
  test_sort_matches_the_reference_bit_for_bit();
  finite_only = false;
}

/* Lines of normal numbers only: the lines base/sort.c gives vqsort's float
 * sort (with zeros or subnormals, it put zeros before tiny negatives now
 * and then; those lines go through integer keys). */
TSR_TEST(normal_f32_lines_match_the_reference) {
  normal_only = true;
  test_sort_matches_the_reference_bit_for_bit();
  normal_only = false;
}

TSR_TEST(argsort_matches_the_reference_with_several_keys) {
  for (uint32_t nk = 1; nk <= 3; nk++) {
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
      const shape_t *s = &shapes[si];
      int64_t count = tsr_dims_count(s->rank, s->dims), outer, n, inner;
      line_geometry(s, &outer, &n, &inner);
      tsr_dtype_t dts[3];
      void *keys[3];
      for (uint32_t k = 0; k < nk; k++) {
        dts[k] = all_dtypes[rnd() % (sizeof all_dtypes / sizeof *all_dtypes)];
        keys[k] = malloc((size_t)count * tsr_dtype_size(dts[k]));
        fill(dts[k], keys[k], count);
      }
      int32_t *dst = malloc((size_t)count * sizeof *dst), *order = malloc((size_t)n * sizeof *order);
      tsr_status_t st = tsr_argsort_block(NULL, nk, dts, (const void *const *)keys, dst, s->rank,
                                          s->dims, s->axis);
      TSR_CHECK(st == NULL);
      tsr_status_free(st);
      int bad = 0;
      for (int64_t o = 0; o < outer && !bad; o++)
        for (int64_t j = 0; j < inner && !bad; j++) {
          int64_t off = o * n * inner + j;
          reference_order(nk, dts, (const void *const *)keys, off, inner, n, order);
          for (int64_t i = 0; i < n && !bad; i++)
            if (dst[off + i * inner] != order[i]) {
              TSR_FAIL_AT("%u keys (%s first), shape #%zu line %lld position %lld: %d, "
                          "expected %d",
                          nk, tsr_dtype_name(dts[0]), si, (long long)off, (long long)i,
                          dst[off + i * inner], order[i]);
              bad = 1;
            }
        }
      for (uint32_t k = 0; k < nk; k++) free(keys[k]);
      free(dst);
      free(order);
    }
  }
}

/* A one-key argsort has no permutation buffer: it once took an offset from
 * that null pointer (undefined behaviour, whether or not it is used; clang's
 * UBSan reports it, gcc 12's does not see it). Lines short and long (the
 * merge sort and vqsort), descending i32 keys: the result is the reversal. */
TSR_TEST(one_key_argsort_uses_no_permutation) {
  const int64_t lengths[] = {5, 3000};
  for (size_t li = 0; li < sizeof lengths / sizeof *lengths; li++) {
    const int64_t n = lengths[li];
    int32_t *key = malloc((size_t)n * sizeof *key), *dst = malloc((size_t)n * sizeof *dst);
    for (int64_t i = 0; i < n; i++) key[i] = (int32_t)(n - i) - 7;
    const tsr_dtype_t dt = TSR_DTYPE_I32;
    const void *k = key;
    int64_t dims[1] = {n};
    TSR_CHECK_OK(tsr_argsort_block(NULL, 1, &dt, &k, dst, 1, dims, 0));
    for (int64_t i = 0; i < n; i++)
      if (dst[i] != (int32_t)(n - 1 - i)) {
        TSR_FAIL_AT("line of %lld: position %lld is %d, expected %lld", (long long)n,
                    (long long)i, dst[i], (long long)(n - 1 - i));
        break;
      }
    free(key);
    free(dst);
  }
}

TSR_TEST(empty_blocks_are_left_alone) {
  int64_t dims[2] = {0, 5};
  float x = 1.0f, y = 2.0f;
  TSR_CHECK(tsr_sort_block(NULL, TSR_DTYPE_F32, &y, &x, 2, dims, 1) == NULL);
  TSR_CHECK(y == 2.0f);
  int32_t p = 7;
  tsr_dtype_t dt = TSR_DTYPE_F32;
  const void *k = &x;
  TSR_CHECK(tsr_argsort_block(NULL, 1, &dt, &k, &p, 2, dims, 0) == NULL);
  TSR_CHECK_EQ_INT(p, 7);
}

/* ---- Scratch kept across sorts ---------------------------------------------------------- */

/* Random u32 keys (with ties: a small range) and their argsort and sort,
 * with and without a scratch, must be the same bits. */
static void fill_keys(uint32_t *k, int64_t n, uint32_t range) {
  for (int64_t i = 0; i < n; i++) k[i] = (uint32_t)(rnd() % range);
}

static bool argsort_equals_without_scratch(tsr_sort_scratch_t *scratch, uint32_t nk,
                                           const tsr_dtype_t *dts, const void *const *keys,
                                           uint32_t rank, const int64_t *dims, uint32_t axis) {
  int64_t n = tsr_dims_count(rank, dims);
  int32_t *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b);
  bool same = tsr_argsort_block(scratch, nk, dts, keys, a, rank, dims, axis) == NULL &&
              tsr_argsort_block(NULL, nk, dts, keys, b, rank, dims, axis) == NULL &&
              memcmp(a, b, (size_t)n * sizeof *a) == 0;
  free(a);
  free(b);
  return same;
}

/* One scratch through sorts of different sizes, short lines (the merge sort's
 * items) and long ones (vqsort's), one key and two (the permutation), and a
 * sort along a non-last axis (the dense work copy): the same results as
 * without it, and it keeps what the largest sort took. */
TSR_TEST(scratch_is_reused_across_sizes) {
  tsr_sort_scratch_t *s = tsr_sort_scratch_create();
  TSR_CHECK(s != NULL);
  TSR_CHECK(tsr_sort_scratch_bytes(s) == 0);
  const int64_t lengths[] = {5000, 300, 100000, 2048, 2049, 7, 60000};
  for (size_t li = 0; li < sizeof lengths / sizeof *lengths; li++) {
    const int64_t n = lengths[li];
    uint32_t *k0 = malloc((size_t)n * 4), *k1 = malloc((size_t)n * 4);
    fill_keys(k0, n, li % 2 ? 50 : 0xffffffffu);
    fill_keys(k1, n, 1000);
    const tsr_dtype_t dts[2] = {TSR_DTYPE_U32, TSR_DTYPE_I32};
    const void *keys[2] = {k0, k1};
    int64_t dims[1] = {n};
    TSR_CHECK(argsort_equals_without_scratch(s, 1, dts, keys, 1, dims, 0));
    TSR_CHECK(argsort_equals_without_scratch(s, 2, dts, keys, 1, dims, 0));
    /* (n / 2, 2) along axis 0: lines with a stride, sorted through a copy */
    int64_t dims2[2] = {n / 2, 2};
    uint32_t *y0 = malloc((size_t)n * 4), *y1 = malloc((size_t)n * 4);
    TSR_CHECK_OK(tsr_sort_block(s, TSR_DTYPE_U32, y0, k0, 2, dims2, 0));
    TSR_CHECK_OK(tsr_sort_block(NULL, TSR_DTYPE_U32, y1, k0, 2, dims2, 0));
    TSR_CHECK(memcmp(y0, y1, (size_t)(n / 2) * 2 * 4) == 0);
    free(y0);
    free(y1);
    free(k0);
    free(k1);
  }
  /* the items of the 100000-element argsort (8 bytes each) are kept */
  TSR_CHECK(tsr_sort_scratch_bytes(s) >= (size_t)100000 * 8);
  tsr_sort_scratch_destroy(s);
  tsr_sort_scratch_destroy(NULL);
  TSR_CHECK(tsr_sort_scratch_bytes(NULL) == 0);
}

typedef struct sorter_arg {
  tsr_sort_scratch_t *scratch;
  uint32_t seed;
  bool ok;
} sorter_arg_t;

/* Argsorts of its own keys through the shared scratch, checked against the
 * order without scratch: two of these at once must not share a buffer
 * (TSan sees a race if they do; the results would differ). */
static void *sorter(void *p) {
  sorter_arg_t *a = p;
  a->ok = true;
  uint64_t st = 0x9e3779b97f4a7c15ull ^ a->seed;
  for (int round = 0; round < 6 && a->ok; round++) {
    const int64_t n = round % 2 ? 3000 + 500 * round : 20000 + 1000 * round;
    uint32_t *k = malloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++) k[i] = (uint32_t)(tsr_test_xorshift64(&st) % 5000);
    const tsr_dtype_t dt = TSR_DTYPE_U32;
    const void *keys[1] = {k};
    int64_t dims[1] = {n};
    a->ok = argsort_equals_without_scratch(a->scratch, 1, &dt, keys, 1, dims, 0);
    free(k);
  }
  return NULL;
}

TSR_TEST(scratch_serves_two_threads_at_once) {
  tsr_sort_scratch_t *s = tsr_sort_scratch_create();
  TSR_CHECK(s != NULL);
  sorter_arg_t args[2] = {{s, 1, false}, {s, 2, false}};
  pthread_t t[2];
  for (int i = 0; i < 2; i++) TSR_CHECK(pthread_create(&t[i], NULL, sorter, &args[i]) == 0);
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  TSR_CHECK(args[0].ok);
  TSR_CHECK(args[1].ok);
  tsr_sort_scratch_destroy(s);
}

int main(void) {
  TSR_RUN(sort_matches_the_reference_bit_for_bit);
  TSR_RUN(finite_f32_lines_match_the_reference);
  TSR_RUN(normal_f32_lines_match_the_reference);
  TSR_RUN(one_key_argsort_uses_no_permutation);
  TSR_RUN(argsort_matches_the_reference_with_several_keys);
  TSR_RUN(empty_blocks_are_left_alone);
  TSR_RUN(scratch_is_reused_across_sizes);
  TSR_RUN(scratch_serves_two_threads_at_once);
  return tsr_test_done();
}
