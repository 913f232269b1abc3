/* Element access for tests: an element of a tsr_array_t of any dtype read
 * as a double (or an int64 for integers) and written from one, with bf16
 * and f16 converted in plain C. */
#ifndef TESSERA_TESTS_ARRAY_VALUES_H
#define TESSERA_TESTS_ARRAY_VALUES_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "tessera/base.h"

static inline float tv_bf16_to_f32(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static inline float tv_f16_to_f32(uint16_t h) {
  uint32_t sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  float v;
  if (exp == 0) v = ldexpf((float)man, -24);
  else if (exp == 31) v = man ? NAN : INFINITY;
  else v = ldexpf((float)(man | 0x400), (int)exp - 25);
  return sign ? -v : v;
}

/* Exact for normal f16 values and zeros (what tests generate). */
static inline uint16_t tv_f32_to_f16(float v) {
  if (v == 0) return signbit(v) ? 0x8000 : 0;
  uint32_t b;
  memcpy(&b, &v, 4);
  uint32_t sign = (b >> 16) & 0x8000, exp = (b >> 23) & 0xff, man = b & 0x7fffff;
  return (uint16_t)(sign | ((exp - 127 + 15) << 10) | (man >> 13));
}

/* Element i as a double (NaN for NaNs; i1 as 0 or 1). */
static inline double tv_get(const tsr_array_t *a, int64_t i) {
  switch (a->dtype) {
  case TSR_DTYPE_F32: return ((const float *)a->data)[i];
  case TSR_DTYPE_BF16: return tv_bf16_to_f32(((const uint16_t *)a->data)[i]);
  case TSR_DTYPE_F16: return tv_f16_to_f32(((const uint16_t *)a->data)[i]);
  case TSR_DTYPE_I32: return ((const int32_t *)a->data)[i];
  case TSR_DTYPE_U32: return ((const uint32_t *)a->data)[i];
  case TSR_DTYPE_I16: return ((const int16_t *)a->data)[i];
  case TSR_DTYPE_U16: return ((const uint16_t *)a->data)[i];
  case TSR_DTYPE_I8: return ((const int8_t *)a->data)[i];
  case TSR_DTYPE_U8: return ((const uint8_t *)a->data)[i];
  case TSR_DTYPE_I1: return ((const uint8_t *)a->data)[i];
  default: return 0;
  }
}

/* Element i of an integer (or i1) array. */
static inline int64_t tv_get_int(const tsr_array_t *a, int64_t i) {
  return (int64_t)tv_get(a, i); /* every integer dtype fits a double exactly */
}

/* Writes a float element: bf16 truncated, f16 as tv_f32_to_f16. */
static inline void tv_set_float(tsr_array_t *a, int64_t i, float v) {
  uint32_t b;
  memcpy(&b, &v, 4);
  if (a->dtype == TSR_DTYPE_F32) ((float *)a->data)[i] = v;
  else if (a->dtype == TSR_DTYPE_BF16) ((uint16_t *)a->data)[i] = (uint16_t)(b >> 16);
  else ((uint16_t *)a->data)[i] = tv_f32_to_f16(v);
}

/* Writes an integer element, wrapped to the dtype's width. */
static inline void tv_set_int(tsr_array_t *a, int64_t i, int64_t v) {
  switch (a->dtype) {
  case TSR_DTYPE_I32: ((int32_t *)a->data)[i] = (int32_t)v; break;
  case TSR_DTYPE_U32: ((uint32_t *)a->data)[i] = (uint32_t)v; break;
  case TSR_DTYPE_I16: ((int16_t *)a->data)[i] = (int16_t)v; break;
  case TSR_DTYPE_U16: ((uint16_t *)a->data)[i] = (uint16_t)v; break;
  case TSR_DTYPE_I8: ((int8_t *)a->data)[i] = (int8_t)v; break;
  default: ((uint8_t *)a->data)[i] = (uint8_t)v; break;
  }
}

#endif /* TESSERA_TESTS_ARRAY_VALUES_H */
