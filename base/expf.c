/* exp on f32 with the same bits on every host (base/expf.h). The steps are
 * those glibc's expf (2.28 and later) takes on a CPU with FMA: the
 * interpreter called libm's expf per element before, whose bits were then
 * the host's (glibc without FMA rounds two inputs the other way, another
 * libm more); now both back ends compute this one function. */
#include "base/expf.h"

#include <math.h>
#include <string.h>

const uint64_t tsr_expf_table[32] = {
    0x3ff0000000000000, 0x3fefd9b0d3158574, 0x3fefb5586cf9890f, 0x3fef9301d0125b51,
    0x3fef72b83c7d517b, 0x3fef54873168b9aa, 0x3fef387a6e756238, 0x3fef1e9df51fdee1,
    0x3fef06fe0a31b715, 0x3feef1a7373aa9cb, 0x3feedea64c123422, 0x3feece086061892d,
    0x3feebfdad5362a27, 0x3feeb42b569d4f82, 0x3feeab07dd485429, 0x3feea47eb03a5585,
    0x3feea09e667f3bcd, 0x3fee9f75e8ec5f74, 0x3feea11473eb0187, 0x3feea589994cce13,
    0x3feeace5422aa0db, 0x3feeb737b0cdc5e5, 0x3feec49182a3f090, 0x3feed503b23e255d,
    0x3feee89f995ad3ad, 0x3feeff76f2fb5e47, 0x3fef199bdd85529c, 0x3fef3720dcef9069,
    0x3fef5818dcfba487, 0x3fef7c97337b9b5f, 0x3fefa4afa2a490da, 0x3fefd0765b6e4540};

static inline double f64_of(uint64_t u) {
  double d;
  memcpy(&d, &u, 8);
  return d;
}
static inline uint64_t bits_of(double d) {
  uint64_t u;
  memcpy(&u, &d, 8);
  return u;
}
static inline float f32_of(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* The steps, with FMA(a, b, c) = a * b + c rounded once. ISO C (-std=c11)
 * leaves the other products and sums unfused. */
#define EXPF_STEPS(x, FMA)                                                     \
  do {                                                                         \
    const double xd = (double)(x), shift = f64_of(TSR_EXPF_SHIFT);            \
    const double inv = f64_of(TSR_EXPF_INV_LN2_N);                            \
    const double kd0 = FMA(inv, xd, shift);                                    \
    const uint64_t ki = bits_of(kd0);                                          \
    const double kd = kd0 - shift;                                             \
    const double r = FMA(inv, xd, -kd);                                        \
    const double s = f64_of(tsr_expf_table[ki & 31] + (ki << 47));             \
    const double z = FMA(r, f64_of(TSR_EXPF_C0), f64_of(TSR_EXPF_C1));         \
    const double r2 = r * r;                                                   \
    const double y1 = FMA(r, f64_of(TSR_EXPF_C2), 1.0);                        \
    float res = (float)(FMA(z, r2, y1) * s);                                   \
    if ((x) > f32_of(TSR_EXPF_OVERFLOW)) res = INFINITY;                      \
    if ((x) < f32_of(TSR_EXPF_MAY_UNDERFLOW)) res = f32_of(1u);               \
    if ((x) < f32_of(TSR_EXPF_UNDERFLOW)) res = 0.0f;                          \
    return (x) != (x) ? (x) + (x) : res;                                       \
  } while (0)

float tsr_expf_soft(float x) { EXPF_STEPS(x, fma); }

#if defined(__GNUC__) && defined(__x86_64__)
__attribute__((target("fma"))) float tsr_expf_hw(float x) { EXPF_STEPS(x, __builtin_fma); }
int tsr_expf_hw_available(void) { return __builtin_cpu_supports("fma"); }
#else
float tsr_expf_hw(float x) { return tsr_expf_soft(x); }
int tsr_expf_hw_available(void) { return 1; }
#endif

float tsr_expf(float x) { return tsr_expf_hw_available() ? tsr_expf_hw(x) : tsr_expf_soft(x); }
