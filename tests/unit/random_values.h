/* Random test data: xorshift generators whose state the test owns (so each
 * keeps its seed and sequence), and an array of any dtype filled from a few
 * distinct values (ties) with NaNs of both signs, both zeros and infinities,
 * in proportions each test chooses. */
#ifndef TESSERA_TESTS_RANDOM_VALUES_H
#define TESSERA_TESTS_RANDOM_VALUES_H

#include <math.h>
#include <stdint.h>

#include "array_values.h"
#include "tessera/base.h"

/* Marsaglia's xorshift32 (13, 17, 5): the next value of *state. */
static inline uint32_t tsr_test_xorshift32(uint32_t *state) {
  *state ^= *state << 13;
  *state ^= *state >> 17;
  *state ^= *state << 5;
  return *state;
}

/* Marsaglia's xorshift64 (13, 7, 17): the next value of *state. */
static inline uint64_t tsr_test_xorshift64(uint64_t *state) {
  *state ^= *state << 13;
  *state ^= *state >> 7;
  *state ^= *state << 17;
  return *state;
}

/* How an integer element is drawn from its random word r. */
typedef enum tsr_test_int_draw {
  TSR_TEST_INT_TIES,  /* one of the few distinct values only */
  TSR_TEST_INT_WIDE,  /* r's low bits: the dtype's whole range */
  TSR_TEST_INT_MIXED, /* the whole range when r is odd, else a distinct value */
} tsr_test_int_draw_t;

/* The mix of tsr_test_fill_random, per dtype. */
typedef struct tsr_test_fill {
  float f32_divisor;          /* an ordinary f32 is a distinct value / this */
  uint32_t f32_special_shift; /* an f32 is NaN, -NaN, +0, -0, +inf or -inf when
                                 r >> shift is 0..5: 6 in 2^(32 - shift) */
  uint32_t half_patterns;     /* bf16 and f16 take one of the first this many
                                 (at most 12) patterns of 16 bits */
  tsr_test_int_draw_t i32, u32, i16, u16, i8, u8;
} tsr_test_fill_t;

/* Fills `a` with one random word of `state` per element: a distinct value
 * v in [-distinct / 2, distinct - distinct / 2) and specials, as `how`
 * says. */
static inline void tsr_test_fill_random(tsr_array_t *a, int distinct, const tsr_test_fill_t *how,
                                        uint32_t *state) {
  /* small values, +-1, zeros of both signs, NaNs of both signs (two
   * payloads of +NaN), infinities of both signs */
  static const uint16_t bf16[12] = {0x3f80, 0xbf80, 0x0000, 0x8000, 0x7fc0, 0xffc0,
                                    0x7f80, 0x4000, 0xc040, 0x3f00, 0x7fc1, 0xff80};
  static const uint16_t f16[12] = {0x3c00, 0xbc00, 0x0000, 0x8000, 0x7e00, 0xfe00,
                                   0x7c00, 0x4000, 0xc200, 0x3800, 0x7e01, 0xfc00};
  int64_t count = tsr_array_element_count(a);
  for (int64_t i = 0; i < count; i++) {
    uint32_t r = tsr_test_xorshift32(state);
    int v = (int)(r % (uint32_t)distinct) - distinct / 2;
    tsr_test_int_draw_t draw = TSR_TEST_INT_TIES;
    switch (a->dtype) {
    case TSR_DTYPE_F32: {
      float f = (float)v / how->f32_divisor;
      uint32_t special = r >> how->f32_special_shift;
      if (special < 6) f = (float[]){NAN, -NAN, 0.0f, -0.0f, INFINITY, -INFINITY}[special];
      ((float *)a->data)[i] = f;
      continue;
    }
    case TSR_DTYPE_BF16: case TSR_DTYPE_F16:
      ((uint16_t *)a->data)[i] =
          (a->dtype == TSR_DTYPE_BF16 ? bf16 : f16)[r % how->half_patterns];
      continue;
    case TSR_DTYPE_I32: draw = how->i32; break;
    case TSR_DTYPE_U32: draw = how->u32; break;
    case TSR_DTYPE_I16: draw = how->i16; break;
    case TSR_DTYPE_U16: draw = how->u16; break;
    case TSR_DTYPE_I8: draw = how->i8; break;
    case TSR_DTYPE_U8: draw = how->u8; break;
    default: continue;
    }
    bool wide = draw == TSR_TEST_INT_WIDE || (draw == TSR_TEST_INT_MIXED && (r & 1));
    tv_set_int(a, i, wide ? (int64_t)r : v); /* wrapped to the dtype's width */
  }
}

#endif /* TESSERA_TESTS_RANDOM_VALUES_H */
