/* Unit tests for interp/blockops.c: every (op, dtype) loop the tables accept
 * against a scalar reference computed here independently (in double, then
 * rounded to f32 and to the dtype), conversions between every pair of
 * dtypes, strided copies, reductions over every axis subset, argmax/argmin,
 * dot, roll, gather, scatter, iota, select, fill, uninit values and literals. */
#include <float.h>
#include <math.h>

#include "base/base_internal.h"
#include "interp/blockops.h"
#include "tests/harness.h"

/* ==== Reference arithmetic ====================================================
 * Values travel as doubles: every element of every dtype is exact in a
 * double. The encoders and the rounding below are written from the format
 * definitions, not with the library's helpers. */

#define NDTYPES ((int)TSR_DTYPE_COUNT)
#define MAX_REPORTS 6 /* mismatches printed per checked combination */

static bool is_float(tsr_dtype_t dt) { return tsr_dtype_class(dt) == TSR_CLASS_FLOAT; }
static bool is_sint(tsr_dtype_t dt) { return tsr_dtype_class(dt) == TSR_CLASS_SINT; }
static bool is_bool(tsr_dtype_t dt) { return tsr_dtype_class(dt) == TSR_CLASS_BOOL; }
static int width(tsr_dtype_t dt) { return (int)tsr_dtype_bits(dt); }

/* Round-to-nearest-even of v to a binary format with p significand bits,
 * minimum normal exponent emin and largest finite value maxf. */
static double round_format(double v, int p, int emin, double maxf) {
  if (isnan(v) || isinf(v) || v == 0) return v;
  int e;
  frexp(fabs(v), &e); /* |v| in [2^(e-1), 2^e) */
  int exp = e - 1 < emin ? emin : e - 1;
  double quantum = ldexp(1.0, exp - p + 1);
  double r = nearbyint(v / quantum) * quantum;
  if (fabs(r) > maxf) return copysign(INFINITY, v);
  return r;
}

static const double BF16_MAX = 3.3895313892515355e38; /* (2 - 2^-7) * 2^127 */

/* Wraps an integer to dtype's width (two's complement), as a double. */
static double wrap_int(tsr_dtype_t dt, int64_t v) {
  if (is_bool(dt)) return v != 0;
  int w = width(dt);
  uint64_t mask = (w == 64) ? ~0ull : ((1ull << w) - 1);
  uint64_t u = (uint64_t)v & mask;
  if (is_sint(dt) && (u >> (w - 1))) return (double)(int64_t)u - ldexp(1.0, w);
  return (double)u;
}

/* v rounded (floats) or wrapped (integers; v integral) into dt. */
static double to_dtype(tsr_dtype_t dt, double v) {
  switch (dt) {
  case TSR_DTYPE_F32: return isnan(v) ? v : (double)(float)v;
  case TSR_DTYPE_BF16: return round_format(v, 8, -126, BF16_MAX);
  case TSR_DTYPE_F16: return round_format(v, 11, -14, 65504.0);
  case TSR_DTYPE_F8E4M3FN: { /* no infinity: what overflows is NaN */
    double r = round_format(v, 4, -6, 448.0);
    return isinf(r) ? NAN : r;
  }
  case TSR_DTYPE_F8E5M2: return round_format(v, 3, -14, 57344.0);
  default: return wrap_int(dt, (int64_t)v);
  }
}
/* The result of a float op computed in f32 and stored in dt. */
static double via_f32(tsr_dtype_t dt, double v) {
  return to_dtype(dt, to_dtype(TSR_DTYPE_F32, v));
}

static double dtype_min(tsr_dtype_t dt) {
  return is_sint(dt) ? -ldexp(1.0, width(dt) - 1) : 0.0;
}
static double dtype_max(tsr_dtype_t dt) {
  if (is_bool(dt)) return 1;
  return is_sint(dt) ? ldexp(1.0, width(dt) - 1) - 1 : ldexp(1.0, width(dt)) - 1;
}

static uint16_t f16_encode(double v) { /* v exact in f16, or inf/NaN */
  uint16_t s = signbit(v) ? 0x8000 : 0;
  if (isnan(v)) return (uint16_t)(s | 0x7e00);
  v = fabs(v);
  if (isinf(v)) return (uint16_t)(s | 0x7c00);
  if (v < ldexp(1.0, -14)) return (uint16_t)(s | (uint16_t)ldexp(v, 24));
  int e;
  double m = frexp(v, &e); /* v = m * 2^e, m in [0.5, 1) */
  return (uint16_t)(s | (uint16_t)((e + 14) << 10) | (uint16_t)(ldexp(m, 11) - 1024));
}
static double f16_decode(uint16_t h) {
  int e = (h >> 10) & 31, m = h & 1023;
  double v = e == 31 ? (m ? NAN : INFINITY) : e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
  return (h & 0x8000) ? -v : v;
}

/* 8-bit floats with `mbits` mantissa bits and exponent bias `bias`; `ieee`:
 * e5m2's infinities and NaNs, else e4m3fn's S1111111 NaN and no infinity. */
static uint8_t f8_encode(double v, int mbits, int bias, bool ieee) { /* v exact */
  uint8_t s = signbit(v) ? 0x80 : 0;
  if (isnan(v)) return (uint8_t)(s | (ieee ? 0x7e : 0x7f));
  v = fabs(v);
  if (isinf(v)) return (uint8_t)(s | 0x7c);
  if (v < ldexp(1.0, 1 - bias)) return (uint8_t)(s | (uint8_t)ldexp(v, bias - 1 + mbits));
  int e;
  double m = frexp(v, &e); /* v = m * 2^e, m in [0.5, 1) */
  return (uint8_t)(s | (uint8_t)((e - 1 + bias) << mbits) |
                   (uint8_t)(ldexp(m, mbits + 1) - ldexp(1.0, mbits)));
}
static double f8_decode(uint8_t h, int mbits, int bias, bool ieee) {
  int e = (h & 0x7f) >> mbits, m = h & ((1 << mbits) - 1);
  double v = ieee && e == (0x7f >> mbits)   ? (m ? NAN : INFINITY)
             : !ieee && (h & 0x7f) == 0x7f ? NAN
             : e == 0                      ? ldexp(m, 1 - bias - mbits)
                                           : ldexp((1 << mbits) + m, e - bias - mbits);
  return (h & 0x80) ? -v : v;
}

/* Element i of a dtype buffer as a double, and back (v must be exact). */
static double get(tsr_dtype_t dt, const void *p, size_t i) {
  const unsigned char *b = (const unsigned char *)p + i * tsr_dtype_size(dt);
  switch (dt) {
  case TSR_DTYPE_F32: { float f; memcpy(&f, b, 4); return f; }
  case TSR_DTYPE_BF16: {
    uint16_t h;
    memcpy(&h, b, 2);
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
  }
  case TSR_DTYPE_F16: { uint16_t h; memcpy(&h, b, 2); return f16_decode(h); }
  case TSR_DTYPE_I32: { int32_t x; memcpy(&x, b, 4); return x; }
  case TSR_DTYPE_U32: { uint32_t x; memcpy(&x, b, 4); return x; }
  case TSR_DTYPE_I16: { int16_t x; memcpy(&x, b, 2); return x; }
  case TSR_DTYPE_U16: { uint16_t x; memcpy(&x, b, 2); return x; }
  case TSR_DTYPE_I8: { int8_t x; memcpy(&x, b, 1); return x; }
  case TSR_DTYPE_U8: return b[0];
  case TSR_DTYPE_I1: return b[0];
  case TSR_DTYPE_I4: case TSR_DTYPE_I2: { /* ml_dtypes' layout: the low bits, zeros above */
    int w = width(dt);
    TSR_CHECK(b[0] >> w == 0);
    return (b[0] >> (w - 1)) ? (double)b[0] - ldexp(1.0, w) : (double)b[0];
  }
  case TSR_DTYPE_U4: case TSR_DTYPE_U2: return b[0];
  case TSR_DTYPE_F8E4M3FN: return f8_decode(b[0], 3, 7, false);
  case TSR_DTYPE_F8E5M2: return f8_decode(b[0], 2, 15, true);
  case TSR_DTYPE_COUNT: break;
  }
  return NAN;
}
static void put(tsr_dtype_t dt, void *p, size_t i, double v) {
  unsigned char *b = (unsigned char *)p + i * tsr_dtype_size(dt);
  switch (dt) {
  case TSR_DTYPE_F32: { float f = (float)v; memcpy(b, &f, 4); return; }
  case TSR_DTYPE_BF16: {
    float f = (float)v;
    uint32_t u;
    memcpy(&u, &f, 4);
    uint16_t h = isnan(v) ? (uint16_t)((u >> 16) | 0x40) : (uint16_t)(u >> 16);
    memcpy(b, &h, 2);
    return;
  }
  case TSR_DTYPE_F16: { uint16_t h = f16_encode(v); memcpy(b, &h, 2); return; }
  case TSR_DTYPE_I32: { int32_t x = (int32_t)v; memcpy(b, &x, 4); return; }
  case TSR_DTYPE_U32: { uint32_t x = (uint32_t)v; memcpy(b, &x, 4); return; }
  case TSR_DTYPE_I16: { int16_t x = (int16_t)v; memcpy(b, &x, 2); return; }
  case TSR_DTYPE_U16: { uint16_t x = (uint16_t)v; memcpy(b, &x, 2); return; }
  case TSR_DTYPE_I8: { int8_t x = (int8_t)v; memcpy(b, &x, 1); return; }
  case TSR_DTYPE_U8: b[0] = (uint8_t)v; return;
  case TSR_DTYPE_I1: b[0] = v != 0; return;
  case TSR_DTYPE_I4: case TSR_DTYPE_I2: b[0] = (uint8_t)((int64_t)v & ((1 << width(dt)) - 1)); return;
  case TSR_DTYPE_U4: case TSR_DTYPE_U2: b[0] = (uint8_t)v; return;
  case TSR_DTYPE_F8E4M3FN: b[0] = f8_encode(v, 3, 7, false); return;
  case TSR_DTYPE_F8E5M2: b[0] = f8_encode(v, 2, 15, true); return;
  case TSR_DTYPE_COUNT: break;
  }
}

/* Raw bits of element i (for exact comparisons of floats incl. -0). */
static uint32_t raw(tsr_dtype_t dt, const void *p, size_t i) {
  uint32_t u = 0;
  memcpy(&u, (const unsigned char *)p + i * tsr_dtype_size(dt), tsr_dtype_size(dt));
  return u;
}

/* Same value: both NaN, or equal with the same sign (so -0 != +0). */
static bool same(double a, double b) {
  if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
  return a == b && signbit(a) == signbit(b);
}

/* Distance in units in the last place of dt between two dt values. */
static double ulps(tsr_dtype_t dt, double a, double b) {
  if (isnan(a) || isnan(b)) return isnan(a) && isnan(b) ? 0 : INFINITY;
  unsigned char ba[4], bb[4];
  put(dt, ba, 0, a);
  put(dt, bb, 0, b);
  int64_t ka = raw(dt, ba, 0), kb = raw(dt, bb, 0);
  int64_t sign = (int64_t)1 << (width(dt) - 1);
  ka = (ka & sign) ? -(ka & (sign - 1)) : ka;
  kb = (kb & sign) ? -(kb & (sign - 1)) : kb;
  return (double)(ka > kb ? ka - kb : kb - ka);
}

/* ==== Test data ================================================================ */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rng(void) { /* splitmix64 */
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
static double rng_unit(void) { return (double)(rng() >> 11) * 0x1p-53; }

static const double float_specials[] = {
    NAN, -NAN, INFINITY, -INFINITY, 0.0, -0.0, 1, -1, 0.5, -0.5, 1.5, 2.5,
    -2.5, 3.5, -3.5, 0.49999997, 1e-3, -7.25, 100, -100, 1e30, -1e30,
    3.4028234663852886e38, 1.1754943508222875e-38, 1e-40, 65504, 65520,
    65519, 6e-8, 1.00390625 /* bf16 tie, to even (down) */,
    1.01171875 /* bf16 tie, to even (up) */, 1.00048828125 /* f16 tie */,
    1.00146484375, 0x1p-25 /* f16 subnormal tie */, 0x3p-25, 16777217.0,
    2147483647.0, 2147483648.0, -2147483649.0, 4294967296.0, 4294967295.0,
    128, -129, 127.9, 255.5, 32768, -32769, 65535.9, 3.0, 7.0, 0.1};
#define NUM_FLOAT_SPECIALS (sizeof float_specials / sizeof float_specials[0])

static const int64_t int_specials[] = {
    0, 1, -1, 2, -2, 3, 7, -7, 8, 15, 16, 31, 32, 33, 63, 64, 100, 127, 128,
    -128, 255, 256, 257, 259, 2049, 2051, 32767, 32768, -32768, 65535, 65536,
    INT32_MIN, INT32_MAX, INT32_MIN + 1, 16777217, 16842753 /* 2^24+2^16+1 */,
    0x7fffff80, 4294967295ll, 0x40400001, -16842753, 16842751 /* 2^24+2^16-1 */,
    -16842751};
#define NUM_INT_SPECIALS (sizeof int_specials / sizeof int_specials[0])

static size_t num_specials(tsr_dtype_t dt) {
  return is_float(dt) ? NUM_FLOAT_SPECIALS : is_bool(dt) ? 2 : NUM_INT_SPECIALS;
}
static double special(tsr_dtype_t dt, size_t i) {
  if (is_float(dt)) return to_dtype(dt, float_specials[i % NUM_FLOAT_SPECIALS]);
  if (is_bool(dt)) return (double)(i % 2);
  return wrap_int(dt, int_specials[i % NUM_INT_SPECIALS]);
}
static double random_value(tsr_dtype_t dt) {
  if (is_bool(dt)) return (double)(rng() & 1);
  if (!is_float(dt)) {
    uint64_t r = rng();
    int64_t v = (r & 3) == 0 ? (int64_t)(r >> 32) : (int64_t)((r >> 40) % 41) - 20;
    return wrap_int(dt, v);
  }
  double v;
  switch (rng() % 3) {
  case 0: v = (rng_unit() * 2 - 1) * 4; break;
  case 1: v = (double)((int64_t)(rng() % 601) - 300) / 4; break;
  default: v = (rng_unit() * 2 - 1) * ldexp(1.0, (int)(rng() % 61) - 30); break;
  }
  return to_dtype(dt, v);
}
/* n elements: every third a special value (offset by `phase`), the rest random. */
/* Element-wise equality where every NaN equals every NaN: which NaN payload
 * x86 returns for NaN + NaN depends on operand order, which a compiler may
 * swap for commutative ops (clang does, in the in-place loop version). */
static bool same_block(tsr_dtype_t dt, const void *x, const void *y, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!same(get(dt, x, i), get(dt, y, i))) return false;
  return true;
}

static void fill_data(tsr_dtype_t dt, void *buf, size_t n, size_t phase) {
  for (size_t i = 0; i < n; i++)
    put(dt, buf, i, i % 3 == 0 ? special(dt, i / 3 + phase) : random_value(dt));
}

/* ==== Elementwise references ========================================================== */

typedef enum { EXACT, APPROX, NO_REF } ref_kind_t;

/* Float unary ops in double; *kind says whether the f32 result must be
 * exact (correctly rounded) or within a few ulps (libm functions). */
static double ref_unary_float(tsr_opcode_t op, double a, ref_kind_t *kind) {
  *kind = EXACT;
  switch (op) {
  case TSR_OP_NEG: return -a;
  case TSR_OP_ABS: return fabs(a);
  case TSR_OP_SIGN: return a > 0 ? 1.0 : a < 0 ? -1.0 : a;
  case TSR_OP_SQRT: return sqrt(a);
  case TSR_OP_FLOOR: return floor(a);
  case TSR_OP_CEIL: return ceil(a);
  case TSR_OP_ROUND: return nearbyint(a);
  default: break;
  }
  *kind = APPROX;
  switch (op) {
  case TSR_OP_EXP: return exp(a);
  case TSR_OP_EXP2: return exp2(a);
  case TSR_OP_LOG: return log(a);
  case TSR_OP_LOG1P: return log1p(a);
  case TSR_OP_RSQRT: return 1.0 / sqrt(a);
  case TSR_OP_TANH: return tanh(a);
  case TSR_OP_LOGISTIC: return 1.0 / (1.0 + exp(-a));
  case TSR_OP_SIN: return sin(a);
  case TSR_OP_COS: return cos(a);
  default: break;
  }
  *kind = NO_REF;
  return 0;
}

static int64_t bits_of(tsr_dtype_t dt, int64_t v) { /* the w-bit pattern */
  int w = width(dt);
  return (int64_t)((uint64_t)v & ((1ull << w) - 1));
}

static double ref_unary_int(tsr_opcode_t op, tsr_dtype_t dt, int64_t a, ref_kind_t *kind) {
  *kind = EXACT;
  if (is_bool(dt)) {
    if (op == TSR_OP_NOT) return !a;
    *kind = NO_REF;
    return 0;
  }
  switch (op) {
  case TSR_OP_NEG: return wrap_int(dt, -a);
  case TSR_OP_ABS: return wrap_int(dt, a < 0 ? -a : a);
  case TSR_OP_SIGN: return is_sint(dt) ? (a > 0) - (a < 0) : a != 0;
  case TSR_OP_NOT: return wrap_int(dt, ~a);
  case TSR_OP_CLZ: {
    int64_t u = bits_of(dt, a);
    int n = 0;
    for (int b = width(dt) - 1; b >= 0 && !((u >> b) & 1); b--) n++;
    return wrap_int(dt, n); /* clz(0) of i2 is 2, which wraps to -2 */
  }
  case TSR_OP_POPCOUNT: {
    int64_t u = bits_of(dt, a);
    int n = 0;
    for (int b = 0; b < width(dt); b++) n += (int)((u >> b) & 1);
    return wrap_int(dt, n);
  }
  default: *kind = NO_REF; return 0;
  }
}

/* IEEE maximum/minimum with NaN propagation and -0 < +0. */
static double ref_max(double a, double b) {
  if (isnan(a) || isnan(b)) return NAN;
  if (a == 0 && b == 0) return signbit(a) ? b : a;
  return a > b ? a : b;
}
static double ref_min(double a, double b) {
  if (isnan(a) || isnan(b)) return NAN;
  if (a == 0 && b == 0) return signbit(a) ? a : b;
  return a < b ? a : b;
}

static bool is_compare(tsr_opcode_t op) { return tsr_op_table[op].rule == TSR_RULE_COMPARE; }

static double ref_compare(tsr_opcode_t op, double a, double b) {
  switch (op) {
  case TSR_OP_EQ: return a == b;
  case TSR_OP_NE: return a != b;
  case TSR_OP_LT: return a < b;
  case TSR_OP_LE: return a <= b;
  case TSR_OP_GT: return a > b;
  case TSR_OP_GE: return a >= b;
  default: return NAN;
  }
}

static double ref_binary_float(tsr_opcode_t op, double a, double b, ref_kind_t *kind) {
  *kind = EXACT;
  switch (op) {
  case TSR_OP_ADD: return a + b;
  case TSR_OP_SUB: return a - b;
  case TSR_OP_MUL: return a * b;
  case TSR_OP_DIV: return a / b;
  case TSR_OP_REM: return fmod(a, b);
  case TSR_OP_MAX: return ref_max(a, b);
  case TSR_OP_MIN: return ref_min(a, b);
  case TSR_OP_POW: *kind = APPROX; return pow(a, b);
  default: *kind = NO_REF; return 0;
  }
}

static double ref_binary_int(tsr_opcode_t op, tsr_dtype_t dt, int64_t a, int64_t b,
                             ref_kind_t *kind) {
  *kind = EXACT;
  const int w = width(dt);
  if (is_bool(dt)) {
    switch (op) {
    case TSR_OP_AND: return a & b;
    case TSR_OP_OR: return a | b;
    case TSR_OP_XOR: return a ^ b;
    default: *kind = NO_REF; return 0;
    }
  }
  const uint64_t amount = (uint64_t)bits_of(dt, b); /* shift counts are unsigned */
  switch (op) {
  case TSR_OP_ADD: return wrap_int(dt, a + b);
  case TSR_OP_SUB: return wrap_int(dt, a - b);
  case TSR_OP_MUL: return wrap_int(dt, (int64_t)((uint64_t)a * (uint64_t)b));
  case TSR_OP_DIV: return b == 0 ? wrap_int(dt, -1) : wrap_int(dt, a / b);
  case TSR_OP_REM: return b == 0 ? (double)a : wrap_int(dt, a % b);
  case TSR_OP_MAX: return a > b ? a : b;
  case TSR_OP_MIN: return a < b ? a : b;
  case TSR_OP_AND: return wrap_int(dt, a & b);
  case TSR_OP_OR: return wrap_int(dt, a | b);
  case TSR_OP_XOR: return wrap_int(dt, a ^ b);
  case TSR_OP_SHL:
    return amount >= (uint64_t)w ? 0 : wrap_int(dt, (int64_t)((uint64_t)a << amount));
  case TSR_OP_SHRL:
    return amount >= (uint64_t)w ? 0 : wrap_int(dt, bits_of(dt, a) >> amount);
  case TSR_OP_SHRA: {
    /* The w-bit pattern as a signed value, shifted with floor division. */
    int64_t u = bits_of(dt, a);
    double s = (u >> (w - 1)) ? (double)u - ldexp(1.0, w) : (double)u;
    double r = amount >= (uint64_t)w ? (s < 0 ? -1 : 0) : floor(s / ldexp(1.0, (int)amount));
    return wrap_int(dt, (int64_t)r);
  }
  default: *kind = NO_REF; return 0;
  }
}

/* Checks element i of an elementwise result against the reference. */
static int check_elem(tsr_dtype_t rdt, const void *got_buf, size_t i, double expect,
                      ref_kind_t kind, double ulp_tol, int *reports,
                      const char *what) {
  double got = get(rdt, got_buf, i);
  bool ok = kind == EXACT ? same(got, expect)
                          : (same(got, expect) || ulps(rdt, got, expect) <= ulp_tol);
  if (!ok && (*reports)++ < MAX_REPORTS)
    TSR_FAIL_AT("%s [%zu]: got %.9g (0x%x), expected %.9g", what, i, got,
                raw(rdt, got_buf, i), expect);
  return ok ? 0 : 1;
}

static const size_t sizes[] = {1, 7, 8, 33, 1000};

/* Which ops the lookup tables must accept for dtype, per the op table. */
static bool op_accepts(tsr_opcode_t op, tsr_dtype_t dt) {
  uint32_t f = tsr_op_table[op].flags;
  switch (tsr_dtype_class(dt)) {
  case TSR_CLASS_FLOAT: return f & TSR_F_FLT;
  case TSR_CLASS_SINT:
  case TSR_CLASS_UINT: return f & TSR_F_INT;
  case TSR_CLASS_BOOL: return f & TSR_F_BOOL;
  }
  return false;
}

TSR_TEST(lookup_tables_follow_the_op_table) {
  int unary = 0, binary = 0;
  for (int o = 0; o < TSR_OP_COUNT; o++) {
    tsr_opcode_t op = (tsr_opcode_t)o;
    for (int d = 0; d < NDTYPES; d++) {
      tsr_dtype_t dt = (tsr_dtype_t)d;
      bool want_u = tsr_op_table[op].syntax == TSR_SYN_UNARY && op_accepts(op, dt);
      bool want_b = tsr_op_table[op].syntax == TSR_SYN_BINARY && op_accepts(op, dt);
      if ((tsr_blockops_unary(op, dt) != NULL) != want_u)
        TSR_FAIL_AT("unary %s %s: table disagrees with the op table",
                    tsr_op_table[op].mnemonic, tsr_dtype_name(dt));
      if ((tsr_blockops_binary(op, dt) != NULL) != want_b)
        TSR_FAIL_AT("binary %s %s: table disagrees with the op table",
                    tsr_op_table[op].mnemonic, tsr_dtype_name(dt));
      unary += want_u;
      binary += want_b;
    }
  }
  TSR_CHECK(unary > 80 && binary > 150); /* sanity: the loop saw the table */
  TSR_CHECK(tsr_blockops_unary(TSR_OP_EXP, TSR_DTYPE_I32) == NULL);
  TSR_CHECK(tsr_blockops_binary(TSR_OP_SHL, TSR_DTYPE_F32) == NULL);
  TSR_CHECK(tsr_blockops_binary(TSR_OP_ADD, TSR_DTYPE_I1) == NULL);
  TSR_CHECK(tsr_blockops_unary(TSR_OP_COUNT, TSR_DTYPE_F32) == NULL);
  TSR_CHECK(tsr_blockops_binary(TSR_OP_ADD, TSR_DTYPE_COUNT) == NULL);
  TSR_CHECK(tsr_blockops_unary(TSR_OP_ADD, TSR_DTYPE_F32) == NULL);
}

/* Buffers big enough for the largest test size of any dtype. */
#define MAXN 8192
static unsigned char buf_a[MAXN * 4], buf_b[MAXN * 4], buf_d[MAXN * 4], buf_e[MAXN * 4];

TSR_TEST(unary_ops_against_reference) {
  int combos = 0;
  for (int o = 0; o < TSR_OP_COUNT; o++) {
    tsr_opcode_t op = (tsr_opcode_t)o;
    for (int d = 0; d < NDTYPES; d++) {
      tsr_dtype_t dt = (tsr_dtype_t)d;
      tsr_unary_fn fn = tsr_blockops_unary(op, dt);
      if (!fn) continue;
      combos++;
      int reports = 0;
      char what[64];
      snprintf(what, sizeof what, "%s %s", tsr_op_table[op].mnemonic, tsr_dtype_name(dt));
      for (size_t s = 0; s < TSR_ARRAY_SIZE(sizes); s++) {
        size_t n = sizes[s];
        fill_data(dt, buf_a, n, s);
        memset(buf_d, 0xcd, sizeof buf_d);
        fn(buf_d, buf_a, n);
        for (size_t i = 0; i < n; i++) {
          ref_kind_t kind;
          double a = get(dt, buf_a, i), expect;
          if (is_float(dt)) {
            expect = via_f32(dt, ref_unary_float(op, a, &kind));
          } else {
            expect = ref_unary_int(op, dt, (int64_t)a, &kind);
          }
          if (kind == NO_REF) {
            TSR_FAIL_AT("%s: no reference", what);
            break;
          }
          check_elem(dt, buf_d, i, expect, kind, dt == TSR_DTYPE_F32 ? 4 : 1, &reports, what);
        }
        /* Nothing past n was written. */
        TSR_CHECK(buf_d[n * tsr_dtype_size(dt)] == 0xcd);
      }
      /* In place: dst == src gives the same result. */
      size_t n = 1000;
      fill_data(dt, buf_a, n, 5);
      fn(buf_d, buf_a, n);
      fn(buf_a, buf_a, n);
      if (memcmp(buf_a, buf_d, n * tsr_dtype_size(dt)) != 0)
        TSR_FAIL_AT("%s: in-place result differs", what);
    }
  }
  TSR_CHECK(combos > 80);
}

/* nextafter of dtype dt from its format (p significand bits, smallest
 * normal exponent emin, largest finite value): one ulp of a away from
 * zero, or toward it (half an ulp below a power of two). a == b as
 * XLA:CPU compares: f32 (and bf16) subnormals are zeros; f16's and the
 * 8-bit floats' are f32 normals. */
static double ref_nextafter(tsr_dtype_t dt, double a, double b) {
  if (isnan(a) || isnan(b)) return NAN;
  const bool daz = dt == TSR_DTYPE_F32 || dt == TSR_DTYPE_BF16;
  if (a == b || (daz && fabs(a) < FLT_MIN && fabs(b) < FLT_MIN)) return b;
  int p = 24, emin = -126;
  double maxv = FLT_MAX;
  switch (dt) {
  case TSR_DTYPE_BF16: p = 8, maxv = BF16_MAX; break;
  case TSR_DTYPE_F16: p = 11, emin = -14, maxv = 65504.0; break;
  case TSR_DTYPE_F8E4M3FN: p = 4, emin = -6, maxv = 448.0; break;
  case TSR_DTYPE_F8E5M2: p = 3, emin = -14, maxv = 57344.0; break;
  default: break;
  }
  if (isinf(a)) return copysign(maxv, a);
  if (a == 0) return copysign(ldexp(1, emin - p + 1), b);
  const bool away = (b > a) == (a > 0);
  int k;
  const double m = frexp(fabs(a), &k);
  const double tiny = ldexp(1, emin);
  double ulp = fabs(a) < tiny ? ldexp(1, emin - p + 1) : ldexp(1, k - p);
  if (!away && m == 0.5 && fabs(a) > tiny) ulp /= 2;
  double r = fabs(a) + (away ? ulp : -ulp);
  if (r > maxv) r = dt == TSR_DTYPE_F8E4M3FN ? NAN : INFINITY; /* e4m3fn has no infinity */
  return copysign(r, a);
}

/* One binary op over n elements in a broadcast mode against the reference. */
static void check_binary(tsr_opcode_t op, tsr_dtype_t dt, tsr_binary_fn fn, size_t n,
                         tsr_bcast_t mode, int *reports, const char *what) {
  const bool cmp = is_compare(op);
  const tsr_dtype_t rdt = cmp ? TSR_DTYPE_I1 : dt;
  memset(buf_d, 0xcd, sizeof buf_d);
  fn(buf_d, buf_a, buf_b, n, mode);
  for (size_t i = 0; i < n; i++) {
    double a = get(dt, buf_a, mode == TSR_BCAST_A_SCALAR ? 0 : i);
    double b = get(dt, buf_b, mode == TSR_BCAST_B_SCALAR ? 0 : i);
    ref_kind_t kind = EXACT;
    double expect;
    if (cmp)
      expect = ref_compare(op, a, b);
    else if (op == TSR_OP_NEXTAFTER)
      expect = ref_nextafter(dt, a, b);
    else if (is_float(dt))
      expect = via_f32(dt, ref_binary_float(op, a, b, &kind));
    else
      expect = ref_binary_int(op, dt, (int64_t)a, (int64_t)b, &kind);
    if (kind == NO_REF) {
      TSR_FAIL_AT("%s: no reference", what);
      return;
    }
    check_elem(rdt, buf_d, i, expect, kind, dt == TSR_DTYPE_F32 ? 4 : 1, reports, what);
  }
  if (buf_d[n * tsr_dtype_size(rdt)] != 0xcd) TSR_FAIL_AT("%s: wrote past n", what);
}

TSR_TEST(binary_ops_against_reference) {
  int combos = 0;
  static const tsr_bcast_t modes[] = {TSR_BCAST_NONE, TSR_BCAST_A_SCALAR, TSR_BCAST_B_SCALAR};
  for (int o = 0; o < TSR_OP_COUNT; o++) {
    tsr_opcode_t op = (tsr_opcode_t)o;
    for (int d = 0; d < NDTYPES; d++) {
      tsr_dtype_t dt = (tsr_dtype_t)d;
      tsr_binary_fn fn = tsr_blockops_binary(op, dt);
      if (!fn) continue;
      combos++;
      int reports = 0;
      char what[80];
      for (size_t s = 0; s < TSR_ARRAY_SIZE(sizes); s++) {
        for (int m = 0; m < 3; m++) {
          size_t n = sizes[s];
          snprintf(what, sizeof what, "%s %s n=%zu bcast=%d", tsr_op_table[op].mnemonic,
                   tsr_dtype_name(dt), n, m);
          fill_data(dt, buf_a, n, s);
          fill_data(dt, buf_b, n, s + 7);
          /* Scalars cycle through the special values. */
          if (modes[m] == TSR_BCAST_A_SCALAR) put(dt, buf_a, 0, special(dt, s * 5 + 1));
          if (modes[m] == TSR_BCAST_B_SCALAR) put(dt, buf_b, 0, special(dt, s * 3 + 2));
          check_binary(op, dt, fn, n, modes[m], &reports, what);
        }
      }
      /* Every pair of special values. */
      size_t ns = num_specials(dt), n = ns * ns;
      for (size_t i = 0; i < n; i++) {
        put(dt, buf_a, i, special(dt, i / ns));
        put(dt, buf_b, i, special(dt, i % ns));
      }
      snprintf(what, sizeof what, "%s %s special pairs", tsr_op_table[op].mnemonic,
               tsr_dtype_name(dt));
      check_binary(op, dt, fn, n, TSR_BCAST_NONE, &reports, what);
      /* Scalar against every special, both sides. */
      for (size_t k = 0; k < ns; k++) {
        put(dt, buf_a, 0, special(dt, k));
        for (size_t i = 0; i < ns; i++) put(dt, buf_b, i, special(dt, i));
        check_binary(op, dt, fn, ns, TSR_BCAST_A_SCALAR, &reports, what);
        memcpy(buf_a, buf_b, ns * tsr_dtype_size(dt));
        put(dt, buf_b, 0, special(dt, k));
        check_binary(op, dt, fn, ns, TSR_BCAST_B_SCALAR, &reports, what);
      }
      /* In place on either operand. */
      if (!is_compare(op)) {
        size_t nn = 1000, bytes = nn * tsr_dtype_size(dt);
        fill_data(dt, buf_a, nn, 1);
        fill_data(dt, buf_b, nn, 2);
        fn(buf_d, buf_a, buf_b, nn, TSR_BCAST_NONE);
        memcpy(buf_e, buf_a, bytes);
        fn(buf_e, buf_e, buf_b, nn, TSR_BCAST_NONE);
        if (!same_block(dt, buf_e, buf_d, nn))
          TSR_FAIL_AT("%s %s: dst == a differs", tsr_op_table[op].mnemonic, tsr_dtype_name(dt));
        memcpy(buf_e, buf_b, bytes);
        fn(buf_e, buf_a, buf_e, nn, TSR_BCAST_NONE);
        if (!same_block(dt, buf_e, buf_d, nn))
          TSR_FAIL_AT("%s %s: dst == b differs", tsr_op_table[op].mnemonic, tsr_dtype_name(dt));
      }
    }
  }
  TSR_CHECK(combos > 150);
}

/* The AVX2 builds of the binary, compare and select loops (blockops.c,
 * "Wide loops") give the same bytes as the baseline builds: every pair of
 * special values (NaN payloads, -0.0, infinities, shift amounts from 0
 * past the width and negative), random blocks of several lengths, every
 * broadcast, in place. Where there are no wide builds (another target, a
 * CPU without AVX2) the lookups must say so. */
static unsigned char wide_d[MAXN * 4];

TSR_TEST(wide_loops_match_the_baseline_bit_for_bit) {
  static const tsr_bcast_t modes[] = {TSR_BCAST_NONE, TSR_BCAST_A_SCALAR, TSR_BCAST_B_SCALAR};
  bool available = tsr_blockops_wide_available();
  int compared = 0;
  for (int o = 0; o < TSR_OP_COUNT; o++) {
    tsr_opcode_t op = (tsr_opcode_t)o;
    for (int d = 0; d < NDTYPES; d++) {
      tsr_dtype_t dt = (tsr_dtype_t)d;
      tsr_binary_fn base = tsr_blockops_binary_variant(op, dt, false);
      tsr_binary_fn wide = tsr_blockops_binary_variant(op, dt, true);
      if (!base || !wide) {
        if (wide) TSR_FAIL_AT("%s %s: a wide loop without a baseline one",
                              tsr_op_table[op].mnemonic, tsr_dtype_name(dt));
        continue;
      }
      if (!available) TSR_FAIL_AT("a wide loop although the CPU has none");
      if (tsr_blockops_binary(op, dt) != wide) TSR_FAIL_AT("the wide loop is not the one used");
      compared++;
      size_t rsize = tsr_dtype_size(is_compare(op) ? TSR_DTYPE_I1 : dt);
      size_t ns = num_specials(dt);
      for (int round = 0; round < 8; round++) {
        size_t n;
        tsr_bcast_t mode = modes[round % 3];
        if (round == 0) { /* every pair of specials */
          n = ns * ns;
          for (size_t i = 0; i < n; i++) {
            put(dt, buf_a, i, special(dt, i / ns));
            put(dt, buf_b, i, special(dt, i % ns));
          }
          mode = TSR_BCAST_NONE;
        } else {
          n = sizes[round % TSR_ARRAY_SIZE(sizes)];
          fill_data(dt, buf_a, n, (size_t)round);
          fill_data(dt, buf_b, n, (size_t)round + 5);
        }
        memset(buf_d, 0xcd, sizeof buf_d);
        memset(wide_d, 0xcd, sizeof wide_d);
        base(buf_d, buf_a, buf_b, n, mode);
        wide(wide_d, buf_a, buf_b, n, mode);
        if (memcmp(buf_d, wide_d, (n + 1) * rsize)) {
          TSR_FAIL_AT("%s %s n=%zu bcast=%d: wide and baseline differ",
                      tsr_op_table[op].mnemonic, tsr_dtype_name(dt), n, (int)mode);
          break;
        }
        if (!is_compare(op) && mode == TSR_BCAST_NONE) { /* in place */
          memcpy(wide_d, buf_a, n * rsize);
          wide(wide_d, wide_d, buf_b, n, mode);
          if (memcmp(buf_d, wide_d, n * rsize)) {
            TSR_FAIL_AT("%s %s n=%zu: wide in place differs", tsr_op_table[op].mnemonic,
                        tsr_dtype_name(dt), n);
            break;
          }
        }
      }
    }
  }
  if (available) TSR_CHECK(compared >= 40);
  /* select: every element size, mask and scalar case. */
  static const size_t es[] = {1, 2, 4, 8};
  for (size_t e = 0; e < TSR_ARRAY_SIZE(es); e++) {
    for (int sc = 0; sc < 8; sc++) {
      size_t n = 1000;
      for (size_t i = 0; i < n * es[e]; i++) {
        buf_a[i] = (unsigned char)rng();
        buf_b[i] = (unsigned char)rng();
      }
      uint8_t cond[1000];
      for (size_t i = 0; i < n; i++) cond[i] = (uint8_t)(rng() % 3 == 0 ? rng() : 0);
      memset(buf_d, 0xcd, sizeof buf_d);
      memset(wide_d, 0xcd, sizeof wide_d);
      tsr_blockops_select_variant(false, es[e], buf_d, cond, sc & 1, buf_a, sc & 2, buf_b,
                                  sc & 4, n);
      tsr_blockops_select_variant(true, es[e], wide_d, cond, sc & 1, buf_a, sc & 2, buf_b,
                                  sc & 4, n);
      if (memcmp(buf_d, wide_d, (n + 1) * es[e]))
        TSR_FAIL_AT("select size %zu case %d: wide and baseline differ", es[e], sc);
      for (size_t i = 0; i < n; i++) { /* and both are right */
        bool c = cond[(sc & 1) ? 0 : i] != 0;
        const unsigned char *want = c ? buf_a + ((sc & 2) ? 0 : i * es[e])
                                      : buf_b + ((sc & 4) ? 0 : i * es[e]);
        if (memcmp(buf_d + i * es[e], want, es[e])) {
          TSR_FAIL_AT("select size %zu case %d: element %zu wrong", es[e], sc, i);
          break;
        }
      }
    }
  }
}

/* i32 div and rem by a scalar divisor (a quotient computed in double
 * precision, blockops.c) give the integers of the elementwise loop, for
 * dividends over the whole range and divisors from the extremes to 0 and
 * -1 (which keep the elementwise loop): both builds, wide and baseline. */
TSR_TEST(i32_div_rem_by_a_scalar_match_the_elementwise_loop) {
  static const int32_t divisors[] = {INT32_MIN, INT32_MIN + 1, -1000000007, -65536, -1000,
                                     -7, -3, -2, -1, 0, 1, 2, 3, 7, 10, 1000, 65535,
                                     1000000007, INT32_MAX - 1, INT32_MAX};
  enum { N = 4096 };
  static int32_t a[N], bs[N], want[N], got[N];
  for (size_t i = 0; i < N; i++) {
    uint32_t r = (uint32_t)rng();
    a[i] = i < 16 ? (int32_t[]){INT32_MIN, INT32_MIN + 1, -1, 0, 1, INT32_MAX, INT32_MAX - 1,
                                -7, 7, -6, 6, -1000, 1000, -999, 999, 13}[i]
                  : (int32_t)(i % 3 ? r : r % 20001 - 10000);
  }
  int checked = 0;
  for (int op = 0; op < 2; op++) {
    tsr_opcode_t code = op ? TSR_OP_REM : TSR_OP_DIV;
    for (int w = 0; w < 2; w++) {
      tsr_binary_fn fn = tsr_blockops_binary_variant(code, TSR_DTYPE_I32, w == 1);
      if (!fn) continue;
      for (size_t k = 0; k < TSR_ARRAY_SIZE(divisors); k++) {
        for (size_t i = 0; i < N; i++) bs[i] = divisors[k];
        fn(want, a, bs, N, TSR_BCAST_NONE);
        fn(got, a, &divisors[k], N, TSR_BCAST_B_SCALAR);
        checked++;
        for (size_t i = 0; i < N; i++) {
          if (got[i] != want[i]) {
            TSR_FAIL_AT("%s i32 %s: %d by %d gives %d, the elementwise loop %d",
                        op ? "rem" : "div", w ? "wide" : "baseline", a[i], divisors[k],
                        got[i], want[i]);
            break;
          }
        }
        /* and the elementwise loop is C's truncating division */
        int32_t d = divisors[k];
        if (d != 0 && d != -1) {
          for (size_t i = 0; i < N; i++) {
            int32_t c = op ? a[i] % d : a[i] / d;
            if (want[i] != c) {
              TSR_FAIL_AT("%s i32: %d by %d gives %d, not %d", op ? "rem" : "div", a[i], d,
                          want[i], c);
              break;
            }
          }
        }
      }
    }
  }
  TSR_CHECK(checked >= 2 * (int)TSR_ARRAY_SIZE(divisors));
}

/* Hand-picked integer and float corner cases, spelled out. */
TSR_TEST(integer_corner_cases) {
  tsr_binary_fn div = tsr_blockops_binary(TSR_OP_DIV, TSR_DTYPE_I32);
  tsr_binary_fn rem = tsr_blockops_binary(TSR_OP_REM, TSR_DTYPE_I32);
  int32_t a[4] = {INT32_MIN, 7, -7, INT32_MIN}, b[4] = {-1, 0, 2, 0}, r[4];
  div(r, a, b, 4, TSR_BCAST_NONE);
  TSR_CHECK_EQ_INT(r[0], INT32_MIN);
  TSR_CHECK_EQ_INT(r[1], -1);
  TSR_CHECK_EQ_INT(r[2], -3);
  TSR_CHECK_EQ_INT(r[3], -1);
  rem(r, a, b, 4, TSR_BCAST_NONE);
  TSR_CHECK_EQ_INT(r[0], 0);
  TSR_CHECK_EQ_INT(r[1], 7);
  TSR_CHECK_EQ_INT(r[2], -1);
  TSR_CHECK_EQ_INT(r[3], INT32_MIN);
  uint32_t ua[2] = {5, 9}, ub[2] = {0, 0}, ur[2];
  tsr_blockops_binary(TSR_OP_DIV, TSR_DTYPE_U32)(ur, ua, ub, 2, TSR_BCAST_NONE);
  TSR_CHECK(ur[0] == UINT32_MAX && ur[1] == UINT32_MAX);
  tsr_blockops_binary(TSR_OP_REM, TSR_DTYPE_U32)(ur, ua, ub, 2, TSR_BCAST_NONE);
  TSR_CHECK(ur[0] == 5 && ur[1] == 9);

  int32_t x = -8, counts[5] = {0, 31, 32, 100, -1}, out[5];
  tsr_blockops_binary(TSR_OP_SHL, TSR_DTYPE_I32)(out, &x, counts, 5, TSR_BCAST_A_SCALAR);
  TSR_CHECK(out[0] == -8 && out[1] == 0 && out[2] == 0 && out[3] == 0 && out[4] == 0);
  tsr_blockops_binary(TSR_OP_SHRA, TSR_DTYPE_I32)(out, &x, counts, 5, TSR_BCAST_A_SCALAR);
  TSR_CHECK(out[0] == -8 && out[1] == -1 && out[2] == -1 && out[3] == -1 && out[4] == -1);
  tsr_blockops_binary(TSR_OP_SHRL, TSR_DTYPE_I32)(out, &x, counts, 5, TSR_BCAST_A_SCALAR);
  TSR_CHECK(out[0] == -8 && out[1] == 1 && out[2] == 0 && out[3] == 0 && out[4] == 0);
  int8_t x8 = -128, c8[3] = {7, 8, -1}, o8[3];
  tsr_blockops_binary(TSR_OP_SHRA, TSR_DTYPE_I8)(o8, &x8, c8, 3, TSR_BCAST_A_SCALAR);
  TSR_CHECK(o8[0] == -1 && o8[1] == -1 && o8[2] == -1);
  tsr_blockops_binary(TSR_OP_SHRL, TSR_DTYPE_I8)(o8, &x8, c8, 3, TSR_BCAST_A_SCALAR);
  TSR_CHECK(o8[0] == 1 && o8[1] == 0 && o8[2] == 0);
  uint8_t u8 = 0x80, cu[2] = {1, 8}, ou[2];
  tsr_blockops_binary(TSR_OP_SHRA, TSR_DTYPE_U8)(ou, &u8, cu, 2, TSR_BCAST_A_SCALAR);
  TSR_CHECK(ou[0] == 0xc0 && ou[1] == 0xff); /* the bit pattern taken as signed */

  int32_t m = INT32_MIN;
  tsr_blockops_unary(TSR_OP_ABS, TSR_DTYPE_I32)(out, &m, 1);
  TSR_CHECK_EQ_INT(out[0], INT32_MIN);
  tsr_blockops_unary(TSR_OP_NEG, TSR_DTYPE_I32)(out, &m, 1);
  TSR_CHECK_EQ_INT(out[0], INT32_MIN);
  int32_t z = 0;
  tsr_blockops_unary(TSR_OP_CLZ, TSR_DTYPE_I32)(out, &z, 1);
  TSR_CHECK_EQ_INT(out[0], 32);
  int16_t z16 = 1, r16;
  tsr_blockops_unary(TSR_OP_CLZ, TSR_DTYPE_I16)(&r16, &z16, 1);
  TSR_CHECK_EQ_INT(r16, 15);
  int32_t big[2] = {INT32_MAX, INT32_MIN}, one = 1;
  tsr_blockops_binary(TSR_OP_ADD, TSR_DTYPE_I32)(out, big, &one, 2, TSR_BCAST_B_SCALAR);
  TSR_CHECK(out[0] == INT32_MIN && out[1] == INT32_MIN + 1);
  tsr_blockops_binary(TSR_OP_MUL, TSR_DTYPE_I32)(out, big, big, 2, TSR_BCAST_NONE);
  TSR_CHECK(out[0] == 1 && out[1] == 0);
}

TSR_TEST(float_corner_cases) {
  float a[4] = {-0.0f, 0.0f, NAN, 1.0f}, b[4] = {0.0f, -0.0f, 1.0f, NAN}, r[4];
  tsr_blockops_binary(TSR_OP_MAX, TSR_DTYPE_F32)(r, a, b, 4, TSR_BCAST_NONE);
  TSR_CHECK(r[0] == 0 && !signbit(r[0]) && r[1] == 0 && !signbit(r[1]));
  TSR_CHECK(isnan(r[2]) && isnan(r[3]));
  tsr_blockops_binary(TSR_OP_MIN, TSR_DTYPE_F32)(r, a, b, 4, TSR_BCAST_NONE);
  TSR_CHECK(signbit(r[0]) && signbit(r[1]) && isnan(r[2]) && isnan(r[3]));
  float s[4] = {NAN, -0.0f, -3.0f, 2.5f};
  tsr_blockops_unary(TSR_OP_SIGN, TSR_DTYPE_F32)(r, s, 4);
  TSR_CHECK(isnan(r[0]) && r[1] == 0 && signbit(r[1]) && r[2] == -1 && r[3] == 1);
  float h[4] = {0.5f, 1.5f, 2.5f, -2.5f};
  tsr_blockops_unary(TSR_OP_ROUND, TSR_DTYPE_F32)(r, h, 4);
  TSR_CHECK(r[0] == 0 && r[1] == 2 && r[2] == 2 && r[3] == -2);
  /* bf16 add rounds once, to nearest even: 1 + 2^-8 is a tie -> 1.0. */
  uint16_t one = 0x3f80, eps = 0x3b80 /* 2^-8 */, out;
  tsr_blockops_binary(TSR_OP_ADD, TSR_DTYPE_BF16)(&out, &one, &eps, 1, TSR_BCAST_NONE);
  TSR_CHECK_EQ_INT(out, 0x3f80);
  uint16_t three_eps = 0x3c40; /* 3 * 2^-8 -> tie between 0x3f81 and 0x3f82 */
  tsr_blockops_binary(TSR_OP_ADD, TSR_DTYPE_BF16)(&out, &one, &three_eps, 1, TSR_BCAST_NONE);
  TSR_CHECK_EQ_INT(out, 0x3f82);
}

/* ==== Conversions ================================================================ */

/* Reference value conversion from src to dst (v is a src value). */
static double ref_convert(tsr_dtype_t dst, tsr_dtype_t src, double v) {
  /* Float -> i1: neither zero nor an f32 subnormal, NaN true (XLA:CPU, TPU). */
  if (is_bool(dst)) return is_float(src) ? !(fabs(v) < FLT_MIN) : v != 0;
  if (is_float(dst)) return to_dtype(dst, v); /* exact source, one rounding */
  if (is_float(src)) {
    if (isnan(v)) return 0;
    double t = trunc(v) + 0.0; /* -0.0 -> +0.0 */
    return t < dtype_min(dst) ? dtype_min(dst) : t > dtype_max(dst) ? dtype_max(dst) : t;
  }
  return wrap_int(dst, (int64_t)v);
}

TSR_TEST(convert_every_pair) {
  for (int s = 0; s < NDTYPES; s++) {
    for (int d = 0; d < NDTYPES; d++) {
      tsr_dtype_t src = (tsr_dtype_t)s, dst = (tsr_dtype_t)d;
      char what[64];
      snprintf(what, sizeof what, "convert %s -> %s", tsr_dtype_name(src), tsr_dtype_name(dst));
      int reports = 0;
      /* Specials (every one, and every float special as a src value), then random. */
      size_t n = 0;
      for (size_t i = 0; i < num_specials(src); i++) put(src, buf_a, n++, special(src, i));
      for (size_t i = 0; i < NUM_FLOAT_SPECIALS && !is_bool(src); i++) {
        double v = float_specials[i];
        if (!is_float(src)) {
          if (isnan(v) || fabs(v) >= 0x1p62) continue;
          v = wrap_int(src, (int64_t)trunc(v));
        }
        put(src, buf_a, n++, to_dtype(src, v));
      }
      for (size_t i = 0; i < 600; i++) put(src, buf_a, n++, random_value(src));
      memset(buf_d, 0xcd, sizeof buf_d);
      tsr_blockops_convert(dst, buf_d, src, buf_a, n);
      for (size_t i = 0; i < n; i++)
        check_elem(dst, buf_d, i, ref_convert(dst, src, get(src, buf_a, i)), EXACT, 0,
                   &reports, what);
      TSR_CHECK(buf_d[n * tsr_dtype_size(dst)] == 0xcd);
    }
  }
}

TSR_TEST(convert_rounding_and_saturation) {
  /* f32 -> bf16 / f16 ties to even. */
  float f[6] = {1.00390625f, 1.01171875f, 1.00048828125f, 1.00146484375f, 0x1p-25f, 0x3p-25f};
  uint16_t h[6];
  tsr_blockops_convert(TSR_DTYPE_BF16, h, TSR_DTYPE_F32, f, 2);
  TSR_CHECK(h[0] == 0x3f80 && h[1] == 0x3f82);
  tsr_blockops_convert(TSR_DTYPE_F16, h, TSR_DTYPE_F32, f + 2, 4);
  TSR_CHECK(h[0] == 0x3c00 && h[1] == 0x3c02 && h[2] == 0x0000 && h[3] == 0x0002);
  /* i32 -> bf16 with one rounding: 2^24 + 2^16 + 1 is just above a tie. */
  int32_t i[4] = {16842753, 257, 259, 16842751};
  tsr_blockops_convert(TSR_DTYPE_BF16, h, TSR_DTYPE_I32, i, 4);
  TSR_CHECK_EQ_INT(h[0], 0x4b81); /* 2^24 + 2^17 */
  TSR_CHECK_EQ_INT(h[1], 0x4380); /* 256 */
  TSR_CHECK_EQ_INT(h[2], 0x4382); /* 260 */
  /* 2^24 + 2^16 - 1 rounds up to the tie 2^24 + 2^16 in f32; it is below
   * the tie, so bf16 gets 2^24. */
  TSR_CHECK_EQ_INT(h[3], 0x4b80);
  /* float -> int saturates, NaN -> 0, truncates toward zero. */
  float g[6] = {NAN, 1e10f, -1e10f, -2.9f, 2.9f, -INFINITY};
  int8_t i8[6];
  tsr_blockops_convert(TSR_DTYPE_I8, i8, TSR_DTYPE_F32, g, 6);
  TSR_CHECK(i8[0] == 0 && i8[1] == 127 && i8[2] == -128 && i8[3] == -2 && i8[4] == 2 &&
            i8[5] == -128);
  uint32_t u32[6];
  tsr_blockops_convert(TSR_DTYPE_U32, u32, TSR_DTYPE_F32, g, 6);
  TSR_CHECK(u32[0] == 0 && u32[1] == UINT32_MAX && u32[2] == 0 && u32[3] == 0 &&
            u32[4] == 2 && u32[5] == 0);
  uint16_t bnan = 0x7fc0;
  int32_t r32;
  tsr_blockops_convert(TSR_DTYPE_I32, &r32, TSR_DTYPE_BF16, &bnan, 1);
  TSR_CHECK_EQ_INT(r32, 0);
  uint8_t b1;
  tsr_blockops_convert(TSR_DTYPE_I1, &b1, TSR_DTYPE_BF16, &bnan, 1);
  TSR_CHECK_EQ_INT(b1, 1);
  /* Integer narrowing wraps. */
  int32_t w = 300;
  uint8_t w8;
  tsr_blockops_convert(TSR_DTYPE_U8, &w8, TSR_DTYPE_I32, &w, 1);
  TSR_CHECK_EQ_INT(w8, 44);
}

/* Float -> i1 is "neither zero nor an f32 subnormal", as XLA:CPU and a TPU
 * compute it (numpy says true for a subnormal); NaN and inf are true. */
TSR_TEST(convert_float_to_bool_subnormals) {
  const float f[] = {1e-40f, -1e-40f, 0x1p-149f, 0x1.fffffcp-127f /* largest subnormal */,
                     0.0f, -0.0f, FLT_MIN, -FLT_MIN, 1.0f, -2.5f, NAN, -NAN,
                     INFINITY, -INFINITY};
  const uint8_t want[] = {0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1};
  enum { N = sizeof f / sizeof f[0] };
  uint8_t b[N];
  tsr_blockops_convert(TSR_DTYPE_I1, b, TSR_DTYPE_F32, f, N);
  for (int i = 0; i < N; i++) TSR_CHECK_EQ_INT(b[i], want[i]);
  /* bf16: its subnormals are f32 subnormals. */
  const uint16_t bf[] = {0x0001, 0x8001, 0x007f /* largest subnormal */, 0x0000, 0x8000,
                         0x0080 /* FLT_MIN */, 0x3f80, 0x7fc0, 0x7f80, 0xff80};
  const uint8_t bwant[] = {0, 0, 0, 0, 0, 1, 1, 1, 1, 1};
  enum { NB = sizeof bf / sizeof bf[0] };
  uint8_t bb[NB];
  tsr_blockops_convert(TSR_DTYPE_I1, bb, TSR_DTYPE_BF16, bf, NB);
  for (int i = 0; i < NB; i++) TSR_CHECK_EQ_INT(bb[i], bwant[i]);
  /* f16: its subnormals are f32 normals (2^-24 and up), so they are true. */
  const uint16_t hf[] = {0x0001, 0x8001, 0x03ff, 0x0000, 0x8000, 0x3c00, 0x7e00, 0x7c00};
  const uint8_t hwant[] = {1, 1, 1, 0, 0, 1, 1, 1};
  enum { NH = sizeof hf / sizeof hf[0] };
  uint8_t hb[NH];
  tsr_blockops_convert(TSR_DTYPE_I1, hb, TSR_DTYPE_F16, hf, NH);
  for (int i = 0; i < NH; i++) TSR_CHECK_EQ_INT(hb[i], hwant[i]);
}

/* f16 <-> f32 written plainly, with branches: the reference the base
 * helpers' branch-free versions (which the interpreter's loops and every
 * other f16 conversion use) must equal bit for bit, NaN payloads included. */
static float ref_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (man << 13) | (man ? 0x400000u : 0);
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (man << 13);
  } else if (man == 0) {
    bits = sign;
  } else { /* subnormal: normalise */
    int e = -1;
    do {
      e++;
      man <<= 1;
    } while (!(man & 0x400u));
    bits = sign | ((uint32_t)(112 - e) << 23) | ((man & 0x3ffu) << 13);
  }
  return tsr_bits_f32(bits);
}

static uint16_t ref_f32_to_f16(float f) {
  uint32_t u = tsr_f32_bits(f);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
  if (abs >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* overflow: inf */
  if (abs >= 0x38800000u) { /* normal half */
    uint32_t r = abs - 0x38000000u;          /* rebias exponent 127 -> 15 */
    r += 0x0fffu + ((r >> 13) & 1u);          /* round to nearest even */
    return (uint16_t)(sign | (r >> 13));
  }
  if (abs < 0x33000000u) return (uint16_t)sign; /* rounds to zero */
  /* subnormal half: value = man * 2^-24 */
  uint32_t exp = abs >> 23;
  uint32_t man = (abs & 0x7fffffu) | 0x800000u;
  uint32_t shift = 126 - exp; /* 14..24 */
  uint32_t half = man >> shift;
  uint32_t rem = man & ((1u << shift) - 1);
  uint32_t mid = 1u << (shift - 1);
  if (rem > mid || (rem == mid && (half & 1u))) half++;
  return (uint16_t)(sign | half);
}

TSR_TEST(f16_every_value_round_trips) {
  static uint16_t all[65536], back[65536];
  static float f[65536];
  for (uint32_t i = 0; i < 65536; i++) all[i] = (uint16_t)i;
  tsr_blockops_convert(TSR_DTYPE_F32, f, TSR_DTYPE_F16, all, 65536);
  int bad = 0;
  for (uint32_t i = 0; i < 65536; i++) {
    double want = f16_decode((uint16_t)i);
    if (!same(f[i], want) && bad++ < MAX_REPORTS)
      TSR_FAIL_AT("f16 0x%04x -> f32 %.9g, expected %.9g", i, f[i], want);
  }
  tsr_blockops_convert(TSR_DTYPE_F16, back, TSR_DTYPE_F32, f, 65536);
  for (uint32_t i = 0; i < 65536; i++) {
    bool nan = (i & 0x7c00) == 0x7c00 && (i & 0x3ff);
    bool ok = nan ? ((back[i] & 0x7c00) == 0x7c00 && (back[i] & 0x3ff)) : back[i] == i;
    if (!ok && bad++ < MAX_REPORTS) TSR_FAIL_AT("f16 0x%04x round trip -> 0x%04x", i, back[i]);
  }
  /* Bit for bit the reference, NaN payloads included. */
  for (uint32_t i = 0; i < 65536; i++) {
    uint32_t got = raw(TSR_DTYPE_F32, f, i), want = tsr_f32_bits(ref_f16_to_f32((uint16_t)i));
    if (got != want && bad++ < MAX_REPORTS)
      TSR_FAIL_AT("f16 0x%04x -> 0x%08x, reference 0x%08x", i, got, want);
    if (tsr_f32_bits(tsr_f16_to_f32((uint16_t)i)) != want && bad++ < MAX_REPORTS)
      TSR_FAIL_AT("f16 0x%04x: base helper differs from the reference", i);
  }
  static float spread[1 << 16];
  static uint16_t spread_h[1 << 16];
  for (uint32_t round = 0; round < 64; round++) {
    for (uint32_t i = 0; i < (1u << 16); i++) {
      uint32_t bits = (uint32_t)(i * 65537u + round * 0x9e3779b9u) ^ (uint32_t)(round << 24);
      memcpy(&spread[i], &bits, 4);
    }
    tsr_blockops_convert(TSR_DTYPE_F16, spread_h, TSR_DTYPE_F32, spread, 1u << 16);
    for (uint32_t i = 0; i < (1u << 16); i++) {
      uint16_t want = ref_f32_to_f16(spread[i]);
      if ((spread_h[i] != want || tsr_f32_to_f16(spread[i]) != want) && bad++ < MAX_REPORTS)
        TSR_FAIL_AT("f32 0x%08x -> f16 0x%04x (base helper 0x%04x), reference 0x%04x",
                    raw(TSR_DTYPE_F32, spread, i), spread_h[i],
                    tsr_f32_to_f16(spread[i]), want);
    }
  }
  /* f32 -> f16 near every exponent boundary, against the reference rounding. */
  static float probe[8192];
  static uint16_t got[8192];
  size_t n = 0;
  for (uint32_t e = 95; e <= 145; e++)
    for (uint32_t k = 0; k < 80; k++) {
      uint32_t man = k < 16 ? (k << 9) | 0xfff : k < 32 ? ((k - 16) << 13) | 0x1000
                                            : (uint32_t)(rng() & 0x7fffff);
      uint32_t bits = (e << 23) | (man & 0x7fffff) | ((k & 1) ? 0x80000000u : 0);
      memcpy(&probe[n++], &bits, 4);
    }
  tsr_blockops_convert(TSR_DTYPE_F16, got, TSR_DTYPE_F32, probe, n);
  for (size_t j = 0; j < n; j++) {
    double want = to_dtype(TSR_DTYPE_F16, probe[j]);
    if (!same(f16_decode(got[j]), want) && bad++ < MAX_REPORTS)
      TSR_FAIL_AT("f32 %.9g -> f16 0x%04x, expected %.9g", probe[j], got[j], want);
  }
}

/* ==== Scalars ======================================================================= */

TSR_TEST(uninit_values) {
  static const uint32_t nan_mode[TSR_DTYPE_COUNT] = {
      [TSR_DTYPE_F32] = 0x7fc00000u, [TSR_DTYPE_BF16] = 0x7fc0, [TSR_DTYPE_F16] = 0x7e00,
      [TSR_DTYPE_I32] = 0x7fffffff,  [TSR_DTYPE_U32] = 0xffffffffu, [TSR_DTYPE_I16] = 0x7fff,
      [TSR_DTYPE_U16] = 0xffff,      [TSR_DTYPE_I8] = 0x7f,          [TSR_DTYPE_U8] = 0xff,
      [TSR_DTYPE_I1] = 1,            [TSR_DTYPE_I4] = 0x07,          [TSR_DTYPE_U4] = 0x0f,
      [TSR_DTYPE_I2] = 0x01,         [TSR_DTYPE_U2] = 0x03,          [TSR_DTYPE_F8E4M3FN] = 0x7f,
      [TSR_DTYPE_F8E5M2] = 0x7e};
  _Static_assert(TSR_DTYPE_COUNT == 16, "add the new dtype's uninit value here");
  for (int d = 0; d < NDTYPES; d++) {
    tsr_dtype_t dt = (tsr_dtype_t)d;
    unsigned char e[8];
    memset(e, 0xcd, sizeof e);
    tsr_blockops_uninit_value(dt, TSR_UNINIT_NAN, e);
    if (raw(dt, e, 0) != nan_mode[d])
      TSR_FAIL_AT("uninit %s: 0x%x", tsr_dtype_name(dt), raw(dt, e, 0));
    TSR_CHECK(e[tsr_dtype_size(dt)] == 0xcd);
    tsr_blockops_uninit_value(dt, TSR_UNINIT_ZERO, e);
    if (raw(dt, e, 0) != 0) TSR_FAIL_AT("uninit zero %s", tsr_dtype_name(dt));
    TSR_CHECK(e[tsr_dtype_size(dt)] == 0xcd);
  }
}

TSR_TEST(literals) {
  unsigned char e[8];
  tsr_literal_t lit;
  lit.f = 1.5;
  tsr_blockops_literal(TSR_DTYPE_F32, lit, e);
  TSR_CHECK_EQ_INT(raw(TSR_DTYPE_F32, e, 0), 0x3fc00000);
  lit.f = -2.0;
  tsr_blockops_literal(TSR_DTYPE_BF16, lit, e);
  TSR_CHECK_EQ_INT(raw(TSR_DTYPE_BF16, e, 0), 0xc000);
  lit.f = 1.0 + 0x1p-8; /* tie: to even */
  tsr_blockops_literal(TSR_DTYPE_BF16, lit, e);
  TSR_CHECK_EQ_INT(raw(TSR_DTYPE_BF16, e, 0), 0x3f80);
  lit.f = 1.0 + 0x1p-8 + 0x1p-30; /* just above the tie: one rounding goes up */
  tsr_blockops_literal(TSR_DTYPE_BF16, lit, e);
  TSR_CHECK_EQ_INT(raw(TSR_DTYPE_BF16, e, 0), 0x3f81);
  lit.f = 65520.0;
  tsr_blockops_literal(TSR_DTYPE_F16, lit, e);
  TSR_CHECK_EQ_INT(raw(TSR_DTYPE_F16, e, 0), 0x7c00);
  lit.f = -INFINITY;
  tsr_blockops_literal(TSR_DTYPE_F16, lit, e);
  TSR_CHECK_EQ_INT(raw(TSR_DTYPE_F16, e, 0), 0xfc00);
  lit.f = NAN;
  tsr_blockops_literal(TSR_DTYPE_BF16, lit, e);
  TSR_CHECK(isnan(get(TSR_DTYPE_BF16, e, 0)));
  lit.i = -1;
  tsr_blockops_literal(TSR_DTYPE_I32, lit, e);
  TSR_CHECK_EQ_INT(raw(TSR_DTYPE_I32, e, 0), 0xffffffffu);
  lit.i = 300;
  tsr_blockops_literal(TSR_DTYPE_I8, lit, e);
  TSR_CHECK_EQ_INT(get(TSR_DTYPE_I8, e, 0), 44);
  lit.i = -1;
  tsr_blockops_literal(TSR_DTYPE_U16, lit, e);
  TSR_CHECK_EQ_INT(get(TSR_DTYPE_U16, e, 0), 65535);
  lit.i = 5;
  tsr_blockops_literal(TSR_DTYPE_I1, lit, e);
  TSR_CHECK_EQ_INT(e[0], 1);
  lit.i = 0;
  tsr_blockops_literal(TSR_DTYPE_I1, lit, e);
  TSR_CHECK_EQ_INT(e[0], 0);
}

TSR_TEST(fill_and_dense_strides) {
  for (size_t es = 1; es <= 8; es++) {
    unsigned char elem[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    memset(buf_d, 0xcd, 8 * 40);
    tsr_blockops_fill(es, buf_d, elem, 33);
    for (size_t i = 0; i < 33 * es; i++)
      if (buf_d[i] != elem[i % es]) {
        TSR_FAIL_AT("fill es=%zu byte %zu", es, i);
        break;
      }
    TSR_CHECK(buf_d[33 * es] == 0xcd);
  }
  int64_t dims[4] = {2, 3, 4, 5}, st[4];
  tsr_blockops_dense_strides(4, dims, st);
  TSR_CHECK(st[0] == 60 && st[1] == 20 && st[2] == 5 && st[3] == 1);
  st[0] = -7;
  tsr_blockops_dense_strides(0, dims, st); /* rank 0: nothing to write */
  TSR_CHECK(st[0] == -7);
}

/* Flat index -> multi-index of a row-major shape. */
static void unflatten(size_t flat, uint32_t rank, const int64_t *dims, int64_t *idx) {
  for (uint32_t k = rank; k-- > 0;) {
    idx[k] = dims[k] ? (int64_t)(flat % (size_t)dims[k]) : 0;
    flat = dims[k] ? flat / (size_t)dims[k] : 0;
  }
}
static size_t count_of(uint32_t rank, const int64_t *dims) {
  size_t n = 1;
  for (uint32_t k = 0; k < rank; k++) n *= (size_t)dims[k];
  return n;
}

TSR_TEST(iota_every_dim) {
  const int64_t dims[3] = {3, 4, 5};
  const tsr_dtype_t dts[] = {TSR_DTYPE_I32, TSR_DTYPE_U32, TSR_DTYPE_F32, TSR_DTYPE_BF16, TSR_DTYPE_I8,
                             TSR_DTYPE_U16, TSR_DTYPE_F16};
  for (size_t t = 0; t < TSR_ARRAY_SIZE(dts); t++)
    for (uint32_t dim = 0; dim < 3; dim++) {
      memset(buf_d, 0xcd, sizeof buf_d); /* no stale values from the last case */
      tsr_blockops_iota(dts[t], buf_d, 3, dims, dim);
      for (size_t i = 0; i < 60; i++) {
        int64_t idx[3];
        unflatten(i, 3, dims, idx);
        if (get(dts[t], buf_d, i) != (double)idx[dim]) {
          TSR_FAIL_AT("iota %s dim %u [%zu]", tsr_dtype_name(dts[t]), dim, i);
          break;
        }
      }
    }
  /* No elements (an empty dim before the iota dim): nothing is written. */
  const int64_t empty[2] = {0, 4};
  memset(buf_d, 0xcd, 16);
  tsr_blockops_iota(TSR_DTYPE_I32, buf_d, 2, empty, 1);
  TSR_CHECK(buf_d[0] == 0xcd && buf_d[15] == 0xcd);
  const int64_t big[1] = {300};
  tsr_blockops_iota(TSR_DTYPE_BF16, buf_d, 1, big, 0);
  TSR_CHECK(get(TSR_DTYPE_BF16, buf_d, 257) == 256); /* rounded once, to even */
  TSR_CHECK(get(TSR_DTYPE_BF16, buf_d, 259) == 260);
}

TSR_TEST(select_every_scalar_combination) {
  const size_t ess[] = {1, 2, 4, 3, 8};
  uint8_t cond[1000];
  for (size_t e = 0; e < TSR_ARRAY_SIZE(ess); e++) {
    size_t es = ess[e];
    for (size_t s = 0; s < TSR_ARRAY_SIZE(sizes); s++) {
      size_t n = sizes[s];
      for (int flags = 0; flags < 8; flags++) {
        bool cs = flags & 1, as = flags & 2, bs = flags & 4;
        for (size_t i = 0; i < n; i++) cond[i] = (uint8_t)(rng() & 1);
        for (size_t i = 0; i < n * es; i++) {
          buf_a[i] = (uint8_t)rng();
          buf_b[i] = (uint8_t)rng();
        }
        memset(buf_d, 0xcd, n * es + 1);
        tsr_blockops_select(es, buf_d, cond, cs, buf_a, as, buf_b, bs, n);
        for (size_t i = 0; i < n; i++) {
          bool c = cs ? cond[0] : cond[i];
          const unsigned char *want = c ? buf_a + (as ? 0 : i * es) : buf_b + (bs ? 0 : i * es);
          if (memcmp(buf_d + i * es, want, es) != 0) {
            TSR_FAIL_AT("select es=%zu n=%zu flags=%d at %zu", es, n, flags, i);
            break;
          }
        }
        TSR_CHECK(buf_d[n * es] == 0xcd);
      }
    }
  }
}

/* ==== Strided copy ================================================================== */

/* The naive walk the copy must agree with. */
static void naive_copy(size_t es, uint32_t rank, const int64_t *dims, unsigned char *dst,
                       const int64_t *ds, const unsigned char *src, const int64_t *ss) {
  size_t n = count_of(rank, dims);
  for (size_t f = 0; f < n; f++) {
    int64_t idx[TSR_MAX_RANK], doff = 0, soff = 0;
    unflatten(f, rank, dims, idx);
    for (uint32_t k = 0; k < rank; k++) {
      doff += idx[k] * ds[k];
      soff += idx[k] * ss[k];
    }
    memcpy(dst + doff * (int64_t)es, src + soff * (int64_t)es, es);
  }
}

/* Strides of a dense layout of dims permuted by perm, each negated when
 * its bit in `neg` is set; *base is the offset of element 0 so that all
 * offsets are >= 0. Unit stride multipliers (`pad`) make gaps. */
static void layout(uint32_t rank, const int64_t *dims, const uint32_t *perm, uint32_t neg,
                   int64_t pad, int64_t *strides, int64_t *base, int64_t *span) {
  int64_t s = 1;
  *base = 0;
  for (uint32_t j = rank; j-- > 0;) {
    uint32_t k = perm[j];
    strides[k] = s;
    s *= dims[k] + (j == rank - 1 ? pad : 0);
  }
  for (uint32_t k = 0; k < rank; k++) {
    if (neg & (1u << k)) {
      *base += strides[k] * (dims[k] - 1);
      strides[k] = -strides[k];
    }
  }
  *span = s + 1;
}

static void random_perm(uint32_t rank, uint32_t *perm) {
  for (uint32_t k = 0; k < rank; k++) perm[k] = k;
  for (uint32_t k = rank; k > 1; k--) {
    uint32_t j = (uint32_t)(rng() % k), t = perm[k - 1];
    perm[k - 1] = perm[j];
    perm[j] = t;
  }
}

static unsigned char copy_src[1 << 20], copy_dst[1 << 20], copy_want[1 << 20];

static void check_copy(size_t es, uint32_t rank, const int64_t *dims, const int64_t *ds,
                       int64_t dbase, int64_t dspan, const int64_t *ss, int64_t sbase,
                       int64_t sspan, const char *what) {
  for (int64_t i = 0; i < sspan * (int64_t)es; i++) copy_src[i] = (unsigned char)(i * 7 + 3);
  memset(copy_dst, 0xcd, (size_t)dspan * es);
  memset(copy_want, 0xcd, (size_t)dspan * es);
  naive_copy(es, rank, dims, copy_want + dbase * (int64_t)es, ds, copy_src + sbase * (int64_t)es, ss);
  tsr_blockops_copy(es, rank, dims, copy_dst + dbase * (int64_t)es, ds,
                    copy_src + sbase * (int64_t)es, ss);
  if (memcmp(copy_dst, copy_want, (size_t)dspan * es) != 0) {
    char shape[128] = "";
    for (uint32_t k = 0; k < rank; k++)
      snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%lld:%lld/%lld ",
               (long long)dims[k], (long long)ds[k], (long long)ss[k]);
    TSR_FAIL_AT("%s: es=%zu dims:dst/src strides %s", what, es, shape);
  }
}

TSR_TEST(copy_random_layouts) {
  const size_t ess[] = {1, 2, 4, 3, 8};
  int cases = 0;
  for (int iter = 0; iter < 600; iter++) {
    uint32_t rank = (uint32_t)(rng() % (TSR_MAX_RANK + 1));
    int64_t dims[TSR_MAX_RANK];
    for (uint32_t k = 0; k < rank; k++) {
      uint64_t r = rng() % 10;
      dims[k] = r < 2 ? 1 : r < 3 ? (int64_t)(rng() % 40) + 1 : (int64_t)(rng() % 6) + 1;
    }
    if (count_of(rank, dims) > 20000) continue;
    size_t es = ess[rng() % TSR_ARRAY_SIZE(ess)];
    uint32_t dperm[TSR_MAX_RANK], sperm[TSR_MAX_RANK];
    random_perm(rank, dperm);
    random_perm(rank, sperm);
    int64_t ds[TSR_MAX_RANK], ss[TSR_MAX_RANK], dbase, sbase, dspan, sspan;
    uint32_t kinds = (uint32_t)rng();
    layout(rank, dims, (kinds & 1) ? dperm : (uint32_t[]){0, 1, 2, 3, 4, 5}, (kinds & 2) ? (uint32_t)rng() : 0,
           0, ds, &dbase, &dspan);
    layout(rank, dims, (kinds & 4) ? sperm : (uint32_t[]){0, 1, 2, 3, 4, 5}, (kinds & 8) ? (uint32_t)rng() : 0,
           (kinds & 16) ? (int64_t)(rng() % 3) : 0, ss, &sbase, &sspan);
    if (kinds & 32) /* broadcast some dims of src */
      for (uint32_t k = 0; k < rank; k++)
        if (rng() % 3 == 0) ss[k] = 0;
    if ((size_t)dspan * es > sizeof copy_dst || (size_t)sspan * es > sizeof copy_src) continue;
    check_copy(es, rank, dims, ds, dbase, dspan, ss, sbase, sspan, "random layout");
    cases++;
  }
  TSR_CHECK(cases > 400);
}

TSR_TEST(copy_transposes_and_edges) {
  const size_t ess[] = {1, 2, 4, 3};
  const int64_t shapes[][2] = {{70, 45}, {128, 128}, {1, 33}, {33, 1}, {31, 64}, {2, 300}};
  for (size_t e = 0; e < TSR_ARRAY_SIZE(ess); e++)
    for (size_t s = 0; s < TSR_ARRAY_SIZE(shapes); s++) {
      const int64_t r = shapes[s][0], c = shapes[s][1];
      const int64_t dims[2] = {r, c};
      /* dst [r, c] dense, src is the [c, r] dense transpose */
      const int64_t ds[2] = {c, 1}, ss[2] = {1, r};
      check_copy(ess[e], 2, dims, ds, 0, r * c, ss, 0, r * c, "transpose");
      /* batched: [3, r, c] from [3, c, r] */
      const int64_t dims3[3] = {3, r, c}, ds3[3] = {r * c, c, 1}, ss3[3] = {r * c, 1, r};
      check_copy(ess[e], 3, dims3, ds3, 0, 3 * r * c, ss3, 0, 3 * r * c, "batched transpose");
      /* src contiguous, dst transposed */
      const int64_t ds2[2] = {1, r}, ss2[2] = {c, 1};
      check_copy(ess[e], 2, dims, ds2, 0, r * c, ss2, 0, r * c, "scatter transpose");
      /* reversed rows and columns */
      const int64_t ssr[2] = {-c, -1};
      check_copy(ess[e], 2, dims, ds, 0, r * c, ssr, r * c - 1, r * c, "reverse");
      /* broadcast a row, a column and a scalar */
      const int64_t row[2] = {0, 1}, col[2] = {1, 0}, one[2] = {0, 0};
      check_copy(ess[e], 2, dims, ds, 0, r * c, row, 0, c, "broadcast row");
      check_copy(ess[e], 2, dims, ds, 0, r * c, col, 0, r, "broadcast column");
      check_copy(ess[e], 2, dims, ds, 0, r * c, one, 0, 1, "broadcast scalar");
    }
  /* rank 0 copies one element; a zero dim copies nothing. */
  check_copy(4, 0, NULL, NULL, 0, 1, NULL, 0, 1, "rank 0");
  const int64_t zero[2] = {3, 0}, zs[2] = {0, 1};
  check_copy(4, 2, zero, zs, 0, 4, zs, 0, 4, "zero dim");
}

/* ==== Reductions ============================================================================ */

static const tsr_opcode_t reduce_ops[] = {TSR_OP_REDUCE_SUM, TSR_OP_REDUCE_MAX, TSR_OP_REDUCE_MIN,
                                          TSR_OP_REDUCE_PROD, TSR_OP_REDUCE_AND, TSR_OP_REDUCE_OR};

static float ref_fop(tsr_opcode_t op, float acc, float x) {
  switch (op) {
  case TSR_OP_REDUCE_SUM: return acc + x;
  case TSR_OP_REDUCE_PROD: return acc * x;
  case TSR_OP_REDUCE_MAX: return (float)ref_max(acc, x);
  default: return (float)ref_min(acc, x);
  }
}
static float ref_fidentity(tsr_opcode_t op) {
  switch (op) {
  case TSR_OP_REDUCE_SUM: return 0.0f;
  case TSR_OP_REDUCE_PROD: return 1.0f;
  case TSR_OP_REDUCE_MAX: return -INFINITY;
  default: return INFINITY;
  }
}

/* The documented order: the reduced elements of one output in row-major
 * order form runs of C (the trailing reduced dims, unit dims ignored; C = 1
 * if the last non-unit dim is kept); each run is reduced over 16 lanes
 * (element t to lane t % 16, lanes combined 8, 4, 2, 1 apart) and the run
 * results are accumulated in order from the identity. */
static double ref_reduce_float(tsr_opcode_t op, const float *v, size_t count, size_t c) {
  float acc = ref_fidentity(op);
  if (c == 1) {
    for (size_t i = 0; i < count; i++) acc = ref_fop(op, acc, v[i]);
    return acc;
  }
  for (size_t r0 = 0; r0 < count; r0 += c) {
    float lane[16];
    for (int j = 0; j < 16; j++) lane[j] = ref_fidentity(op);
    for (size_t t = 0; t < c; t++) lane[t % 16] = ref_fop(op, lane[t % 16], v[r0 + t]);
    for (int w = 8; w > 0; w /= 2)
      for (int j = 0; j < w; j++) lane[j] = ref_fop(op, lane[j], lane[j + w]);
    acc = ref_fop(op, acc, lane[0]);
  }
  return acc;
}

static double ref_reduce_int(tsr_opcode_t op, tsr_dtype_t dt, const double *v, size_t count) {
  int64_t acc;
  switch (op) {
  case TSR_OP_REDUCE_SUM: acc = 0; break;
  case TSR_OP_REDUCE_PROD: acc = 1; break;
  case TSR_OP_REDUCE_MAX: acc = (int64_t)dtype_min(dt); break;
  case TSR_OP_REDUCE_MIN: acc = (int64_t)dtype_max(dt); break;
  case TSR_OP_REDUCE_AND: acc = is_bool(dt) ? 1 : -1; break;
  default: acc = 0; break;
  }
  for (size_t i = 0; i < count; i++) {
    int64_t x = (int64_t)v[i];
    switch (op) {
    case TSR_OP_REDUCE_SUM: acc = (int64_t)((uint64_t)acc + (uint64_t)x); break;
    case TSR_OP_REDUCE_PROD: acc = (int64_t)((uint64_t)acc * (uint64_t)x); break;
    case TSR_OP_REDUCE_MAX: acc = x > acc ? x : acc; break;
    case TSR_OP_REDUCE_MIN: acc = x < acc ? x : acc; break;
    case TSR_OP_REDUCE_AND: acc &= x; break;
    default: acc |= x; break;
    }
  }
  return wrap_int(dt, acc);
}

static double reduce_vals[1 << 16];
static float reduce_fvals[1 << 16];

/* Checks one reduction of a dims-shaped block of dt against the reference. */
static void check_reduce(tsr_opcode_t op, tsr_dtype_t dt, uint32_t rank, const int64_t *dims,
                         uint32_t mask, const void *src, int *reports) {
  int64_t odims[TSR_MAX_RANK], rdims[TSR_MAX_RANK];
  uint32_t orank = 0, rrank = 0;
  for (uint32_t k = 0; k < rank; k++) {
    if (mask & (1u << k)) rdims[rrank++] = dims[k];
    else odims[orank++] = dims[k];
  }
  size_t c = 1; /* trailing reduced non-unit dims */
  for (uint32_t k = rank; k-- > 0;) {
    if (dims[k] == 1) continue;
    if (!(mask & (1u << k))) break;
    c *= (size_t)dims[k];
  }
  int64_t st[TSR_MAX_RANK];
  tsr_blockops_dense_strides(rank, dims, st);
  size_t nout = count_of(orank, odims), nred = count_of(rrank, rdims);
  memset(buf_d, 0xcd, sizeof buf_d);
  tsr_blockops_reduce(op, dt, buf_d, src, rank, dims, mask);
  for (size_t o = 0; o < nout; o++) {
    int64_t oidx[TSR_MAX_RANK], ridx[TSR_MAX_RANK];
    unflatten(o, orank, odims, oidx);
    for (size_t r = 0; r < nred; r++) {
      unflatten(r, rrank, rdims, ridx);
      int64_t off = 0;
      uint32_t oi = 0, ri = 0;
      for (uint32_t k = 0; k < rank; k++)
        off += st[k] * ((mask & (1u << k)) ? ridx[ri++] : oidx[oi++]);
      reduce_vals[r] = get(dt, src, (size_t)off);
      reduce_fvals[r] = (float)reduce_vals[r];
    }
    double want = is_float(dt) ? to_dtype(dt, ref_reduce_float(op, reduce_fvals, nred, c))
                               : ref_reduce_int(op, dt, reduce_vals, nred);
    char what[96];
    snprintf(what, sizeof what, "%s %s dims %lldx%lldx%lld mask %u", tsr_op_table[op].mnemonic,
             tsr_dtype_name(dt), (long long)dims[0], (long long)(rank > 1 ? dims[1] : 1),
             (long long)(rank > 2 ? dims[2] : 1), mask);
    check_elem(dt, buf_d, o, want, EXACT, 0, reports, what);
  }
  if (buf_d[nout * tsr_dtype_size(dt)] != 0xcd) TSR_FAIL_AT("reduce wrote past the output");
}

static void fill_reduce_data(tsr_dtype_t dt, void *buf, size_t n, bool specials) {
  for (size_t i = 0; i < n; i++) {
    double v = random_value(dt);
    if (is_float(dt)) {
      v = to_dtype(dt, (rng_unit() * 2 - 1) * 3);
      if (specials && rng() % 23 == 0) v = special(dt, rng() % 8);
      if (rng() % 17 == 0) v = (rng() & 1) ? 0.0 : -0.0;
    } else if (!is_bool(dt) && rng() % 2) {
      v = wrap_int(dt, (int64_t)(rng() % 5) - 2);
    }
    put(dt, buf, i, v);
  }
}

TSR_TEST(reduce_every_axis_subset) {
  const int64_t shapes[][3] = {{3, 5, 37}, {4, 1, 20}, {2, 17, 3}, {5, 6, 1}, {1, 1, 1},
                               {2, 0, 3}, {6, 40, 2}};
  int combos = 0;
  for (size_t o = 0; o < TSR_ARRAY_SIZE(reduce_ops); o++) {
    for (int d = 0; d < NDTYPES; d++) {
      tsr_opcode_t op = reduce_ops[o];
      tsr_dtype_t dt = (tsr_dtype_t)d;
      if (!op_accepts(op, dt)) continue;
      combos++;
      int reports = 0;
      for (size_t s = 0; s < TSR_ARRAY_SIZE(shapes); s++) {
        size_t n = count_of(3, shapes[s]);
        for (int variant = 0; variant < 2; variant++) {
          fill_reduce_data(dt, buf_a, n, variant == 1);
          for (uint32_t mask = 0; mask < 8; mask++)
            check_reduce(op, dt, 3, shapes[s], mask, buf_a, &reports);
        }
      }
    }
  }
  TSR_CHECK_EQ_INT(combos, 4 * 5 + 6 * 10 + 2); /* float, integer and i1 dtypes */
}

TSR_TEST(reduce_large_and_higher_rank) {
  /* Outputs and rows longer than the internal chunks, and rank 4 with
   * alternating reduced dims. */
  static const struct {
    uint32_t rank;
    int64_t dims[4];
    uint32_t mask;
  } cases[] = {{2, {1100, 3}, 2},     {2, {3, 1500}, 1},    {2, {1500, 2}, 1},
               {1, {1000}, 1},        {2, {2, 2000}, 2},    {4, {3, 4, 5, 6}, 5},
               {4, {3, 4, 5, 6}, 10}, {4, {2, 3, 1, 5}, 9}, {3, {1030, 2, 2}, 6}};
  const tsr_dtype_t dts[] = {TSR_DTYPE_F32, TSR_DTYPE_BF16, TSR_DTYPE_F16, TSR_DTYPE_I32,
                             TSR_DTYPE_U8, TSR_DTYPE_I1};
  int reports = 0;
  for (size_t c = 0; c < TSR_ARRAY_SIZE(cases); c++)
    for (size_t t = 0; t < TSR_ARRAY_SIZE(dts); t++)
      for (size_t o = 0; o < TSR_ARRAY_SIZE(reduce_ops); o++) {
        if (!op_accepts(reduce_ops[o], dts[t])) continue;
        fill_reduce_data(dts[t], buf_a, count_of(cases[c].rank, cases[c].dims), true);
        check_reduce(reduce_ops[o], dts[t], cases[c].rank, cases[c].dims, cases[c].mask, buf_a,
                     &reports);
      }
}

TSR_TEST(reduce_order_and_specials) {
  /* Documented order: 2^24 + 1 + 1 + ... depends on association. With 17
   * elements along the last axis, lane 0 holds x[0] + x[16]. */
  float v[17];
  for (int i = 0; i < 17; i++) v[i] = 1.0f;
  v[0] = 16777216.0f;
  float out;
  const int64_t dims[1] = {17};
  tsr_blockops_reduce(TSR_OP_REDUCE_SUM, TSR_DTYPE_F32, &out, v, 1, dims, 1);
  /* Lanes: l0 = 2^24 + 1 -> 2^24 (tie, to even), l1..15 = 1. Tree: 8 apart
   * l0 = 2^24 + 1 -> 2^24, l1..7 = 2; 4 apart l0 = 2^24 + 2, l1..3 = 4;
   * 2 apart l0 = 2^24 + 6, l1 = 8; 1 apart l0 = 2^24 + 14. (A sequential
   * sum would give 2^24.) */
  float ref = (float)ref_reduce_float(TSR_OP_REDUCE_SUM, v, 17, 17);
  TSR_CHECK(out == ref);
  TSR_CHECK(out == 16777230.0f);
  /* Sum of -0.0 is +0.0 (starts from the identity +0). */
  float mz[3] = {-0.0f, -0.0f, -0.0f};
  const int64_t d3[1] = {3};
  tsr_blockops_reduce(TSR_OP_REDUCE_SUM, TSR_DTYPE_F32, &out, mz, 1, d3, 1);
  TSR_CHECK(out == 0 && !signbit(out));
  tsr_blockops_reduce(TSR_OP_REDUCE_MAX, TSR_DTYPE_F32, &out, mz, 1, d3, 1);
  TSR_CHECK(out == 0 && signbit(out));
  float nan3[3] = {1, NAN, 2};
  tsr_blockops_reduce(TSR_OP_REDUCE_MIN, TSR_DTYPE_F32, &out, nan3, 1, d3, 1);
  TSR_CHECK(isnan(out));
  /* Empty reductions give the identity. */
  const int64_t d0[2] = {2, 0};
  float two[2];
  tsr_blockops_reduce(TSR_OP_REDUCE_MAX, TSR_DTYPE_F32, two, v, 2, d0, 2);
  TSR_CHECK(two[0] == -INFINITY && two[1] == -INFINITY);
  int8_t i2[2];
  tsr_blockops_reduce(TSR_OP_REDUCE_AND, TSR_DTYPE_I8, i2, v, 2, d0, 2);
  TSR_CHECK(i2[0] == -1 && i2[1] == -1);
  /* bf16 sums accumulate in f32 and round once: 256 * 1.0 + 1 ... */
  uint16_t hb[300];
  for (int i = 0; i < 300; i++) hb[i] = 0x3f80; /* 1.0 */
  const int64_t d300[1] = {300};
  uint16_t hs;
  tsr_blockops_reduce(TSR_OP_REDUCE_SUM, TSR_DTYPE_BF16, &hs, hb, 1, d300, 1);
  TSR_CHECK_EQ_INT(hs, 0x4396); /* 300 exactly, bf16 of 300 */
}

/* ==== argmax / argmin =============================================================== */

TSR_TEST(argreduce_ties_and_nan) {
  const int64_t shapes[][3] = {{4, 9, 5}, {2, 1, 3}, {3, 300, 1}, {1, 7, 300}};
  int reports = 0;
  for (int d = 0; d < NDTYPES; d++) {
    tsr_dtype_t dt = (tsr_dtype_t)d;
    for (int which = 0; which < 2; which++) {
      tsr_opcode_t op = which ? TSR_OP_ARGMIN : TSR_OP_ARGMAX;
      if (!op_accepts(op, dt)) continue;
      for (size_t s = 0; s < TSR_ARRAY_SIZE(shapes); s++) {
        const int64_t *dims = shapes[s];
        size_t n = count_of(3, dims);
        for (size_t i = 0; i < n; i++) { /* few distinct values: many ties */
          double v = wrap_int(is_float(dt) ? TSR_DTYPE_I32 : dt, (int64_t)(rng() % 4));
          if (is_float(dt) && rng() % 13 == 0) v = NAN;
          if (is_float(dt) && rng() % 11 == 0) v = -0.0;
          put(dt, buf_a, i, v);
        }
        for (uint32_t axis = 0; axis < 3; axis++) {
          int32_t *out = (int32_t *)(void *)buf_d;
          memset(buf_d, 0xcd, sizeof buf_d); /* a negative index: never expected */
          tsr_blockops_argreduce(op, dt, out, buf_a, 3, dims, axis);
          int64_t st[3];
          tsr_blockops_dense_strides(3, dims, st);
          int64_t odims[2];
          for (uint32_t k = 0, j = 0; k < 3; k++)
            if (k != axis) odims[j++] = dims[k];
          for (size_t o = 0; o < count_of(2, odims); o++) {
            int64_t oi[2];
            unflatten(o, 2, odims, oi);
            int64_t base = 0;
            for (uint32_t k = 0, j = 0; k < 3; k++)
              if (k != axis) base += oi[j++] * st[k];
            int32_t want = 0;
            double best = get(dt, buf_a, (size_t)base);
            for (int64_t k = 1; k < dims[axis]; k++) {
              double v = get(dt, buf_a, (size_t)(base + k * st[axis]));
              if (isnan(best)) break;
              if (isnan(v) || (which ? v < best : v > best)) {
                best = v;
                want = (int32_t)k;
              }
            }
            if (out[o] != want && reports++ < MAX_REPORTS)
              TSR_FAIL_AT("%s %s shape %zu axis %u [%zu]: %d, expected %d",
                          tsr_op_table[op].mnemonic, tsr_dtype_name(dt), s, axis, o, out[o], want);
          }
          if (buf_d[count_of(2, odims) * sizeof *out] != 0xcd)
            TSR_FAIL_AT("%s %s shape %zu axis %u: wrote past the output",
                        tsr_op_table[op].mnemonic, tsr_dtype_name(dt), s, axis);
        }
      }
    }
  }
  float v[5] = {1, NAN, 3, NAN, 3};
  int32_t r;
  const int64_t d5[1] = {5};
  tsr_blockops_argreduce(TSR_OP_ARGMAX, TSR_DTYPE_F32, &r, v, 1, d5, 0);
  TSR_CHECK_EQ_INT(r, 1);
  tsr_blockops_argreduce(TSR_OP_ARGMIN, TSR_DTYPE_F32, &r, v, 1, d5, 0);
  TSR_CHECK_EQ_INT(r, 1);
  float t[4] = {2, 5, 5, 1};
  const int64_t d4[1] = {4};
  tsr_blockops_argreduce(TSR_OP_ARGMAX, TSR_DTYPE_F32, &r, t, 1, d4, 0);
  TSR_CHECK_EQ_INT(r, 1);
  int8_t m8[4] = {-128, 3, -128, 3};
  tsr_blockops_argreduce(TSR_OP_ARGMIN, TSR_DTYPE_I8, &r, m8, 1, d4, 0);
  TSR_CHECK_EQ_INT(r, 0);
}

/* ==== dot ============================================================================ */

static unsigned char dot_a[1 << 16], dot_b[1 << 16], dot_acc[1 << 18], dot_out[1 << 18],
    dot_out2[1 << 18];

/* Reference: for each (i, j), init then k ascending in the accumulator
 * type (f32 or wrapping 32-bit), then one conversion to out. */
static double ref_dot_elem(tsr_dtype_t out_dt, tsr_dtype_t in_dt, const void *a, const void *b,
                           const void *acc, size_t i, size_t j, size_t k, size_t n,
                           bool transpose_rhs) {
  const tsr_dtype_t acc_dt = is_float(in_dt) ? TSR_DTYPE_F32
                             : is_sint(in_dt) ? TSR_DTYPE_I32 : TSR_DTYPE_U32;
  if (acc_dt == TSR_DTYPE_F32) {
    float s = acc ? (float)ref_convert(TSR_DTYPE_F32, out_dt, get(out_dt, acc, i * n + j)) : 0.0f;
    for (size_t kk = 0; kk < k; kk++) {
      float av = (float)get(in_dt, a, i * k + kk);
      float bv = (float)get(in_dt, b, transpose_rhs ? j * k + kk : kk * n + j);
      s = fmaf(av, bv, s); /* one rounding per step, as both back ends */
    }
    return ref_convert(out_dt, TSR_DTYPE_F32, s);
  }
  uint32_t s = acc ? (uint32_t)(int64_t)ref_convert(acc_dt, out_dt, get(out_dt, acc, i * n + j)) : 0;
  for (size_t kk = 0; kk < k; kk++) {
    uint32_t av = (uint32_t)(int64_t)get(in_dt, a, i * k + kk);
    uint32_t bv = (uint32_t)(int64_t)get(in_dt, b, transpose_rhs ? j * k + kk : kk * n + j);
    s += av * bv;
  }
  double sv = acc_dt == TSR_DTYPE_I32 ? (double)(int32_t)s : (double)s;
  return ref_convert(out_dt, acc_dt, sv);
}

static void fill_dot_data(tsr_dtype_t dt, void *buf, size_t n, bool big_ints) {
  for (size_t i = 0; i < n; i++) {
    double v;
    if (is_float(dt)) v = to_dtype(dt, (rng_unit() * 2 - 1) * 2);
    else if (big_ints) v = random_value(dt);
    else v = wrap_int(dt, (int64_t)(rng() % 9) - 4);
    put(dt, buf, i, v);
  }
}

static void check_dot(tsr_dtype_t out_dt, tsr_dtype_t in_dt, size_t m, size_t k, size_t n,
                      bool with_acc, bool transpose_rhs, bool big_ints, int fail_after,
                      int *reports) {
  fill_dot_data(in_dt, dot_a, m * k, big_ints);
  fill_dot_data(in_dt, dot_b, k * n, big_ints);
  fill_dot_data(out_dt, dot_acc, m * n, false);
  memset(dot_out, 0xcd, m * n * tsr_dtype_size(out_dt) + 1);
  if (fail_after >= 0) tsr_alloc_fail_after(fail_after);
  tsr_blockops_dot(out_dt, dot_out, in_dt, dot_a, dot_b, with_acc ? dot_acc : NULL,
                   (int64_t)m, (int64_t)k, (int64_t)n, transpose_rhs);
  tsr_alloc_fail_after(-1);
  char what[128];
  snprintf(what, sizeof what, "dot %s<-%s %zux%zux%zu acc=%d tr=%d fail=%d",
           tsr_dtype_name(out_dt), tsr_dtype_name(in_dt), m, k, n, with_acc, transpose_rhs,
           fail_after);
  for (size_t i = 0; i < m; i++)
    for (size_t j = 0; j < n; j++)
      check_elem(out_dt, dot_out, i * n + j,
                 ref_dot_elem(out_dt, in_dt, dot_a, dot_b, with_acc ? dot_acc : NULL, i, j, k, n,
                              transpose_rhs),
                 EXACT, 0, reports, what);
  if (dot_out[m * n * tsr_dtype_size(out_dt)] != 0xcd) TSR_FAIL_AT("%s: wrote past", what);
}

TSR_TEST(dot_against_naive_loops) {
  static const size_t shapes[][3] = {{1, 1, 1}, {2, 3, 4}, {5, 17, 9}, {4, 8, 259},
                                     {9, 31, 300}, {7, 0, 5}, {3, 64, 1}};
  static const tsr_dtype_t pairs[][2] = {
      {TSR_DTYPE_F32, TSR_DTYPE_F32},  {TSR_DTYPE_F32, TSR_DTYPE_BF16},
      {TSR_DTYPE_BF16, TSR_DTYPE_BF16}, {TSR_DTYPE_F32, TSR_DTYPE_F16},
      {TSR_DTYPE_BF16, TSR_DTYPE_F32}, {TSR_DTYPE_I32, TSR_DTYPE_I8},
      {TSR_DTYPE_I32, TSR_DTYPE_I32},  {TSR_DTYPE_U32, TSR_DTYPE_U8},
      {TSR_DTYPE_I32, TSR_DTYPE_I16},  {TSR_DTYPE_F32, TSR_DTYPE_I8},
      {TSR_DTYPE_I8, TSR_DTYPE_I8}};
  int reports = 0;
  for (size_t p = 0; p < TSR_ARRAY_SIZE(pairs); p++)
    for (size_t s = 0; s < TSR_ARRAY_SIZE(shapes); s++)
      for (int flags = 0; flags < 4; flags++)
        check_dot(pairs[p][0], pairs[p][1], shapes[s][0], shapes[s][1], shapes[s][2], flags & 1,
                  flags & 2, false, -1, &reports);
  /* Wrapping i32 accumulation with large values. */
  check_dot(TSR_DTYPE_I32, TSR_DTYPE_I32, 5, 17, 9, true, false, true, -1, &reports);
  check_dot(TSR_DTYPE_U32, TSR_DTYPE_U32, 5, 17, 9, false, true, true, -1, &reports);
}

/* The AVX2+FMA build of the f32 loop and the baseline one (libm's fmaf)
 * give the same bits: a host without FMA computes what this one does. */
TSR_TEST(dot_wide_build_matches_the_baseline_bit_for_bit) {
  /* with the register-blocked FMA panel's cases: 16-column groups, the
   * columns after the last group, rows past the last full 4 */
  static const size_t shapes[][3] = {{1, 1, 1},    {5, 17, 9},    {4, 60, 259},
                                     {9, 31, 300}, {8, 96, 128},  {7, 120, 40},
                                     {12, 64, 17}, {4, 60, 256},  {6, 30, 512}};
  for (size_t s = 0; s < TSR_ARRAY_SIZE(shapes); s++) {
    size_t m = shapes[s][0], k = shapes[s][1], n = shapes[s][2];
    if (m * k * 4 > sizeof dot_a || k * n * 4 > sizeof dot_b || m * n * 4 > sizeof dot_out) {
      TSR_FAIL_AT("dot %zux%zux%zu does not fit the test's buffers", m, k, n);
      continue;
    }
    fill_dot_data(TSR_DTYPE_F32, dot_a, m * k, false);
    fill_dot_data(TSR_DTYPE_F32, dot_b, k * n, false);
    fill_dot_data(TSR_DTYPE_F32, dot_acc, m * n, false);
    tsr_blockops_dot_variant(false, TSR_DTYPE_F32, dot_out, TSR_DTYPE_F32, dot_a, dot_b,
                             dot_acc, (int64_t)m, (int64_t)k, (int64_t)n, false);
    tsr_blockops_dot_variant(true, TSR_DTYPE_F32, dot_out2, TSR_DTYPE_F32, dot_a, dot_b,
                             dot_acc, (int64_t)m, (int64_t)k, (int64_t)n, false);
    if (memcmp(dot_out, dot_out2, m * n * 4) != 0)
      TSR_FAIL_AT("dot %zux%zux%zu: the wide build differs from the baseline", m, k, n);
  }
}

TSR_TEST(dot_allocation_failure_same_result) {
  /* The first or second temporary fails: the slow path gives the same bits. */
  int reports = 0;
  for (int fail = 0; fail < 3; fail++) {
    check_dot(TSR_DTYPE_F32, TSR_DTYPE_BF16, 6, 20, 11, true, fail == 2, false, fail, &reports);
    check_dot(TSR_DTYPE_I32, TSR_DTYPE_I8, 6, 20, 11, false, true, false, fail, &reports);
    check_dot(TSR_DTYPE_F32, TSR_DTYPE_F32, 6, 20, 11, true, true, false, fail, &reports);
  }
  /* Bitwise identical to the fast path on the same inputs. */
  fill_dot_data(TSR_DTYPE_BF16, dot_a, 9 * 40, false);
  fill_dot_data(TSR_DTYPE_BF16, dot_b, 40 * 13, false);
  tsr_blockops_dot(TSR_DTYPE_F32, dot_out, TSR_DTYPE_BF16, dot_a, dot_b, NULL, 9, 40, 13, false);
  tsr_alloc_fail_after(0);
  tsr_blockops_dot(TSR_DTYPE_F32, dot_out2, TSR_DTYPE_BF16, dot_a, dot_b, NULL, 9, 40, 13, false);
  tsr_alloc_fail_after(-1);
  TSR_CHECK(memcmp(dot_out, dot_out2, 9 * 13 * 4) == 0);
}

TSR_TEST(dot_accumulates_in_place) {
  /* dst == acc: acc + a @ b, then + a @ b^T with b read as [N, K]. */
  float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {1, 0, 2, 1, 0, 3}, acc[4] = {0.5f, 0, 0, -1};
  tsr_blockops_dot(TSR_DTYPE_F32, acc, TSR_DTYPE_F32, a, b, acc, 2, 3, 2, false);
  TSR_CHECK(acc[0] == 5.5f && acc[1] == 11 && acc[2] == 14 && acc[3] == 22);
  tsr_blockops_dot(TSR_DTYPE_F32, acc, TSR_DTYPE_F32, a, b, acc, 2, 3, 2, true);
  /* b as [N=2, K=3]: rows (1,0,2) and (1,0,3) */
  TSR_CHECK(acc[0] == 5.5f + 7 && acc[1] == 11 + 10 && acc[2] == 14 + 16 && acc[3] == 22 + 22);
}

/* ==== roll and gather ========================================================================== */

TSR_TEST(roll_any_shift) {
  const int64_t dims[3] = {3, 7, 4};
  const int64_t shifts[] = {0, 1, -1, 3, -7, 7, 8, 100, -100, INT64_MIN, INT64_MAX, 13};
  const size_t ess[] = {1, 2, 4, 3};
  for (size_t e = 0; e < TSR_ARRAY_SIZE(ess); e++)
    for (uint32_t axis = 0; axis < 3; axis++)
      for (size_t s = 0; s < TSR_ARRAY_SIZE(shifts); s++) {
        size_t es = ess[e], n = 84;
        for (size_t i = 0; i < n * es; i++) buf_a[i] = (unsigned char)rng();
        tsr_blockops_roll(es, buf_d, buf_a, 3, dims, axis, shifts[s]);
        int64_t len = dims[axis], sh = shifts[s] % len;
        int64_t st[3];
        tsr_blockops_dense_strides(3, dims, st);
        for (size_t i = 0; i < n; i++) {
          int64_t idx[3];
          unflatten(i, 3, dims, idx);
          int64_t from = ((idx[axis] - sh) % len + len) % len;
          size_t src = i + (size_t)((from - idx[axis]) * st[axis]);
          if (memcmp(buf_d + i * es, buf_a + src * es, es) != 0) {
            TSR_FAIL_AT("roll es=%zu axis %u shift %lld at %zu", es, axis,
                        (long long)shifts[s], i);
            break;
          }
        }
      }
}

/* pltpu.roll's stride: the slice at index k along stride_axis is rolled by
 * shift + k * stride, every (axis, stride_axis) pair of a rank-3 block. */
TSR_TEST(roll_strided) {
  const int64_t dims[3] = {3, 7, 4};
  const int64_t shifts[] = {0, 1, -1, 6, -13, 100};
  const int64_t strides[] = {0, 1, 2, 7, 9};
  const size_t ess[] = {1, 2, 4, 3};
  int64_t st[3];
  tsr_blockops_dense_strides(3, dims, st);
  for (size_t e = 0; e < TSR_ARRAY_SIZE(ess); e++)
    for (uint32_t axis = 0; axis < 3; axis++)
      for (uint32_t sax = 0; sax < 3; sax++) {
        if (sax == axis) continue;
        for (size_t s = 0; s < TSR_ARRAY_SIZE(shifts); s++)
          for (size_t k = 0; k < TSR_ARRAY_SIZE(strides); k++) {
            size_t es = ess[e], n = 84;
            for (size_t i = 0; i < n * es; i++) buf_a[i] = (unsigned char)rng();
            tsr_blockops_roll_strided(es, buf_d, buf_a, 3, dims, axis, shifts[s], strides[k],
                                      sax);
            int64_t len = dims[axis];
            for (size_t i = 0; i < n; i++) {
              int64_t idx[3];
              unflatten(i, 3, dims, idx);
              int64_t sh = (shifts[s] + idx[sax] * strides[k]) % len;
              int64_t from = ((idx[axis] - sh) % len + len) % len;
              size_t src = i + (size_t)((from - idx[axis]) * st[axis]);
              if (memcmp(buf_d + i * es, buf_a + src * es, es) != 0) {
                TSR_FAIL_AT("strided roll es=%zu axis %u stride_axis %u shift %lld stride %lld "
                            "at %zu", es, axis, sax, (long long)shifts[s],
                            (long long)strides[k], i);
                return;
              }
            }
          }
      }
}

TSR_TEST(gather_in_and_out_of_range) {
  const int64_t dims[3] = {3, 5, 4};
  const int64_t src_axis[3] = {2, 6, 3};
  const size_t ess[] = {1, 2, 4, 3};
  int32_t idx[60];
  for (size_t e = 0; e < TSR_ARRAY_SIZE(ess); e++)
    for (uint32_t axis = 0; axis < 3; axis++) {
      size_t es = ess[e];
      int64_t sdims[3] = {dims[0], dims[1], dims[2]};
      sdims[axis] = src_axis[axis];
      size_t sn = count_of(3, sdims);
      for (size_t i = 0; i < sn * es; i++) buf_a[i] = (unsigned char)rng();
      for (size_t i = 0; i < 60; i++) idx[i] = (int32_t)(rng() % (uint64_t)src_axis[axis]);
      TSR_CHECK_EQ_INT(tsr_blockops_gather(es, buf_d, buf_a, idx, 3, dims, axis, src_axis[axis]), -1);
      int64_t sst[3];
      tsr_blockops_dense_strides(3, sdims, sst);
      for (size_t i = 0; i < 60; i++) {
        int64_t ii[3];
        unflatten(i, 3, dims, ii);
        ii[axis] = idx[i];
        size_t src = (size_t)(ii[0] * sst[0] + ii[1] * sst[1] + ii[2] * sst[2]);
        if (memcmp(buf_d + i * es, buf_a + src * es, es) != 0) {
          TSR_FAIL_AT("gather es=%zu axis %u at %zu", es, axis, i);
          break;
        }
      }
      /* Two bad indices: the first in flat order is reported. */
      idx[41] = (int32_t)src_axis[axis];
      idx[17] = -1;
      TSR_CHECK_EQ_INT(tsr_blockops_gather(es, buf_d, buf_a, idx, 3, dims, axis, src_axis[axis]), 17);
      idx[17] = 0;
      TSR_CHECK_EQ_INT(tsr_blockops_gather(es, buf_d, buf_a, idx, 3, dims, axis, src_axis[axis]), 41);
      idx[41] = INT32_MIN;
      TSR_CHECK_EQ_INT(tsr_blockops_gather(es, buf_d, buf_a, idx, 3, dims, axis, src_axis[axis]), 41);
    }
}

/* Long lines along the last axis (the prefetching loop): rows of 5000 4-byte
 * elements gathered from rows of 6001 by random indices, against a naive
 * loop; bad indices (negative, one past the end, INT32_MIN, also within the
 * prefetch distance of the end of a row and of the block) stop it at the
 * first in flat order, as in short lines. */
TSR_TEST(gather_of_long_lines_in_and_out_of_range) {
  enum { ROWS = 3, LEN = 5000, SRC = 6001 };
  const int64_t dims[2] = {ROWS, LEN};
  uint32_t *src = malloc(sizeof(uint32_t) * ROWS * SRC), *dst = malloc(sizeof(uint32_t) * ROWS * LEN);
  int32_t *idx = malloc(sizeof(int32_t) * ROWS * LEN);
  for (size_t i = 0; i < (size_t)ROWS * SRC; i++) src[i] = (uint32_t)rng();
  for (size_t i = 0; i < (size_t)ROWS * LEN; i++) idx[i] = (int32_t)(rng() % SRC);
  idx[0] = 0;
  idx[LEN - 1] = SRC - 1;
  TSR_CHECK_EQ_INT(tsr_blockops_gather(4, dst, src, idx, 2, dims, 1, SRC), -1);
  for (size_t r = 0; r < ROWS; r++)
    for (size_t i = 0; i < LEN; i++)
      if (dst[r * LEN + i] != src[r * SRC + (size_t)idx[r * LEN + i]]) {
        TSR_FAIL_AT("row %zu position %zu", r, i);
        r = ROWS;
        break;
      }
  const size_t bad[] = {ROWS * LEN - 1, ROWS * LEN - 20, LEN + 4990, LEN - 3, 40, 7};
  const int32_t values[] = {SRC, -1, INT32_MIN};
  for (size_t b = 0; b < TSR_ARRAY_SIZE(bad); b++) {
    int32_t saved = idx[bad[b]];
    idx[bad[b]] = values[b % 3];
    TSR_CHECK_EQ_INT(tsr_blockops_gather(4, dst, src, idx, 2, dims, 1, SRC), (int64_t)bad[b]);
    /* the elements before it are written */
    if (bad[b] > 0) TSR_CHECK(dst[bad[b] - 1] == src[((bad[b] - 1) / LEN) * SRC +
                                                     (size_t)idx[bad[b] - 1]]);
    if (b + 1 < TSR_ARRAY_SIZE(bad)) idx[bad[b]] = saved; /* the last stays: two bad */
  }
  idx[3] = -5; /* two bad: the first in flat order */
  TSR_CHECK_EQ_INT(tsr_blockops_gather(4, dst, src, idx, 2, dims, 1, SRC), 3);
  free(src);
  free(dst);
  free(idx);
}

/* put_along_axis against a naive loop, a repeated index keeping the last
 * update, and the first bad index in flat order reported. */
TSR_TEST(scatter_in_and_out_of_range) {
  const int64_t dims[3] = {3, 5, 4};
  const int64_t dst_axis[3] = {2, 6, 3};
  const size_t ess[] = {1, 2, 4, 3};
  int32_t idx[60];
  for (size_t e = 0; e < TSR_ARRAY_SIZE(ess); e++)
    for (uint32_t axis = 0; axis < 3; axis++) {
      size_t es = ess[e];
      int64_t ddims[3] = {dims[0], dims[1], dims[2]};
      ddims[axis] = dst_axis[axis];
      size_t dn = count_of(3, ddims);
      for (size_t i = 0; i < dn * es; i++) buf_d[i] = (unsigned char)rng();
      memcpy(buf_b, buf_d, dn * es); /* the expected result, by the naive loop */
      for (size_t i = 0; i < 60 * es; i++) buf_a[i] = (unsigned char)rng();
      for (size_t i = 0; i < 60; i++) idx[i] = (int32_t)(rng() % (uint64_t)dst_axis[axis]);
      int64_t dst_st[3];
      tsr_blockops_dense_strides(3, ddims, dst_st);
      for (size_t i = 0; i < 60; i++) {
        int64_t ii[3];
        unflatten(i, 3, dims, ii);
        ii[axis] = idx[i];
        size_t at = (size_t)(ii[0] * dst_st[0] + ii[1] * dst_st[1] + ii[2] * dst_st[2]);
        memcpy(buf_b + at * es, buf_a + i * es, es);
      }
      memset(buf_d + dn * es, 0xcd, 16); /* a write past the end would change these */
      TSR_CHECK_EQ_INT(tsr_blockops_scatter(es, buf_d, buf_a, idx, 3, dims, axis, dst_axis[axis]),
                       -1);
      if (memcmp(buf_d, buf_b, dn * es) != 0) TSR_FAIL_AT("scatter es=%zu axis %u", es, axis);
      for (size_t i = 0; i < 16; i++)
        if (buf_d[dn * es + i] != 0xcd) TSR_FAIL_AT("scatter es=%zu axis %u wrote past", es, axis);
      idx[41] = (int32_t)dst_axis[axis];
      idx[17] = -1;
      TSR_CHECK_EQ_INT(tsr_blockops_scatter(es, buf_d, buf_a, idx, 3, dims, axis, dst_axis[axis]),
                       17);
      idx[17] = 0;
      TSR_CHECK_EQ_INT(tsr_blockops_scatter(es, buf_d, buf_a, idx, 3, dims, axis, dst_axis[axis]),
                       41);
    }
}

int main(void) {
  TSR_RUN(lookup_tables_follow_the_op_table);
  TSR_RUN(unary_ops_against_reference);
  TSR_RUN(binary_ops_against_reference);
  TSR_RUN(i32_div_rem_by_a_scalar_match_the_elementwise_loop);
  TSR_RUN(integer_corner_cases);
  TSR_RUN(float_corner_cases);
  TSR_RUN(convert_every_pair);
  TSR_RUN(convert_rounding_and_saturation);
  TSR_RUN(convert_float_to_bool_subnormals);
  TSR_RUN(f16_every_value_round_trips);
  TSR_RUN(uninit_values);
  TSR_RUN(literals);
  TSR_RUN(fill_and_dense_strides);
  TSR_RUN(iota_every_dim);
  TSR_RUN(select_every_scalar_combination);
  TSR_RUN(copy_random_layouts);
  TSR_RUN(copy_transposes_and_edges);
  TSR_RUN(reduce_every_axis_subset);
  TSR_RUN(reduce_large_and_higher_rank);
  TSR_RUN(reduce_order_and_specials);
  TSR_RUN(argreduce_ties_and_nan);
  TSR_RUN(dot_against_naive_loops);
  TSR_RUN(dot_wide_build_matches_the_baseline_bit_for_bit);
  TSR_RUN(dot_allocation_failure_same_result);
  TSR_RUN(dot_accumulates_in_place);
  TSR_RUN(roll_any_shift);
  TSR_RUN(roll_strided);
  TSR_RUN(gather_in_and_out_of_range);
  TSR_RUN(gather_of_long_lines_in_and_out_of_range);
  TSR_RUN(scatter_in_and_out_of_range);
  TSR_RUN(wide_loops_match_the_baseline_bit_for_bit);
  return tsr_test_done();
}
