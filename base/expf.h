/* exp on f32, the same bits on every host (docs/lowering.md, "exp"): both
 * back ends compute it with these steps, the interpreter in C here, the cpu
 * backend on vectors (lower/emit_expr.c, em_expf, from the same table). */
#ifndef TESSERA_BASE_EXPF_H
#define TESSERA_BASE_EXPF_H

#include <stdint.h>

/* 2^(i/32) as f64 bits, less i << 47 (the exponent bits the caller adds
 * back from k), for i in [0, 32). */
extern const uint64_t tsr_expf_table[32];

/* The steps' constants, as f64 bits: 32/ln 2, 0x1.8p52 (rounds k to an
 * integer), the cubic's coefficients; the f32 bounds of the special cases. */
enum {
  TSR_EXPF_OVERFLOW = 0x42b17217u,       /* above: +inf */
  TSR_EXPF_MAY_UNDERFLOW = 0xc2ce8ecfu,  /* below: 0x1p-149 */
  TSR_EXPF_UNDERFLOW = 0xc2cff1b4u,      /* below: +0 */
};
#define TSR_EXPF_INV_LN2_N 0x40471547652b82feull
#define TSR_EXPF_SHIFT 0x4338000000000000ull
#define TSR_EXPF_C0 0x3ebc6af84b912394ull
#define TSR_EXPF_C1 0x3f2ebfce50fac4f3ull
#define TSR_EXPF_C2 0x3f962e42ff0c52d6ull

/* e^x: in f64, k + r = x * 32/ln 2 with two fused multiply-adds, 2^(k/32)
 * from the table and k's bits, a cubic in r with fused multiply-adds, times
 * the scale, rounded once to f32; NaN: x + x (quiet, its payload kept).
 * The fused multiply-adds are the FMA instruction where the CPU has it, else
 * libm's fma: exact either way, so the bits never depend on the host. */
float tsr_expf(float x);

/* The two ways, for the test that compares them: with the FMA instruction
 * (only where the CPU has it) and with libm's fma. */
float tsr_expf_hw(float x);
float tsr_expf_soft(float x);
/* Whether tsr_expf_hw may run here. */
int tsr_expf_hw_available(void);

#endif /* TESSERA_BASE_EXPF_H */
