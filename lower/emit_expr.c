/* Elementwise semantics and lazy expressions of the MLIR text emitter.
 * em_elementwise/em_convert/em_bitcast reproduce interp/blockops.c on
 * compute values (f32 for every float dtype, rounded after each op; iN for
 * integers, wrapping; i1): XLA integer division, shifts by the bit width,
 * saturating float -> int, NaN-propagating max/min. Expressions are trees of
 * such ops that their consumer evaluates inside its own loop nest, so that a
 * chain like load -> add -> mul -> store is one loop; whether a value stays
 * one is decided here too (layer 1, emit_internal.h). */
#include <stdio.h>

#include "base/expf.h"
#include "lower/emit_internal.h"

/* ---- Elementwise ops --------------------------------------------------------------- */

/* interp/blockops.c max_f/min_f as selects: NaN propagates (a's NaN first,
 * so NaN payloads match too: arith.maximumf leaves the choice between two
 * NaNs to the target), -0 < +0. */
ssa_t em_fmax(emitter_t *em, ssa_t a, ssa_t b, uint32_t lanes, bool is_max) {
  tstr_t T = em_vtype("f32", lanes), I = em_vtype("i32", lanes);
  ssa_t better = em_cmp(em, "cmpf", is_max ? "ogt" : "olt", a, b, T.s);
  ssa_t m = em_select(em, better, a, b, "f32", lanes, true);
  ssa_t ai = em_cast(em, "arith.bitcast", a, T.s, I.s);
  ssa_t bi = em_cast(em, "arith.bitcast", b, T.s, I.s);
  ssa_t zi = em_op2(em, is_max ? "arith.andi" : "arith.ori", ai, bi, I.s);
  ssa_t z = em_cast(em, "arith.bitcast", zi, I.s, T.s);
  ssa_t eq = em_cmp(em, "cmpf", "oeq", a, b, T.s);
  m = em_select(em, eq, z, m, "f32", lanes, true);
  ssa_t nan = em_cmp(em, "cmpf", "uno", a, a, T.s);
  return em_select(em, nan, a, m, "f32", lanes, true);
}

ssa_t em_libm_call(emitter_t *em, const char *name, ssa_t x, uint32_t lanes) {
  em->need_log1pf = true;
  if (!lanes) {
    ssa_t r = em_fresh(em);
    em_line(em, "%s = func.call @%s(%s) : (f32) -> f32", r.s, name, x.s);
    return r;
  }
  tstr_t t = em_vtype("f32", lanes);
  ssa_t acc = em_cf32(em, lanes, 0.0f);
  for (uint32_t l = 0; l < lanes; l++) {
    ssa_t e = em_fresh(em), r = em_fresh(em), w = em_fresh(em);
    em_line(em, "%s = vector.extract %s[%u] : f32 from %s", e.s, x.s, l, t.s);
    em_line(em, "%s = func.call @%s(%s) : (f32) -> f32", r.s, name, e.s);
    em_line(em, "%s = vector.insert %s, %s[%u] : f32 into %s", w.s, r.s, acc.s, l, t.s);
    acc = w;
  }
  return acc;
}

/* exp on f32: base/expf.h's steps (the interpreter's tsr_expf), written out
 * on vectors instead of a libm call per lane (which cost flash attention a
 * fifth of its time): in f64, x * N/ln2 (N = 32) split into k + r with fused
 * multiply-adds, 2^(k/N) from the 32-entry table and k's bits, a cubic in r
 * (fused), times the scale, rounded once to f32; the special cases (NaN:
 * x+x, overflow: +inf, underflow: 0, and the "may underflow" range:
 * 0x1p-149) as selects. math.fma is an FMA instruction at x86-64-v3 and
 * libm's exact fma at the baseline: the same bits at every level, and the
 * interpreter's (docs/lowering.md, "exp"). */
void em_expf_table(tsr_strbuf_t *out) {
  tsr_strbuf_puts(out, "  memref.global \"private\" constant @tsr_expf_table : memref<32xi64> = dense<[");
  for (int i = 0; i < 32; i++)
    tsr_strbuf_printf(out, "%s%lld", i ? ", " : "", (long long)tsr_expf_table[i]);
  tsr_strbuf_puts(out, "]> {alignment = 64 : i64}\n");
}

static ssa_t cf64_bits(emitter_t *em, uint32_t lanes, uint64_t bits) {
  char lit[48];
  snprintf(lit, sizeof lit, lanes ? "dense<0x%016llX>" : "0x%016llX", (unsigned long long)bits);
  return em_const(em, em_vtype("f64", lanes).s, lit);
}

static ssa_t em_expf(emitter_t *em, ssa_t x, uint32_t lanes) {
  tstr_t F = em_vtype("f32", lanes), D = em_vtype("f64", lanes), L = em_vtype("i64", lanes);
  tstr_t I = em_vtype("i32", lanes), B = em_vtype("i1", lanes);
  em->need_expf_table = true;
  ssa_t inv = cf64_bits(em, lanes, TSR_EXPF_INV_LN2_N);   /* N/ln2 */
  ssa_t shift = cf64_bits(em, lanes, TSR_EXPF_SHIFT); /* 0x1.8p52 */
  ssa_t c0 = cf64_bits(em, lanes, TSR_EXPF_C0);
  ssa_t c1 = cf64_bits(em, lanes, TSR_EXPF_C1);
  ssa_t c2 = cf64_bits(em, lanes, TSR_EXPF_C2);
  ssa_t one = cf64_bits(em, lanes, 0x3ff0000000000000ull);
  ssa_t xd = em_cast(em, "arith.extf", x, F.s, D.s);
  ssa_t kd0 = em_fresh(em), r = em_fresh(em), z = em_fresh(em), y1 = em_fresh(em), y2 = em_fresh(em);
  em_line(em, "%s = math.fma %s, %s, %s : %s", kd0.s, inv.s, xd.s, shift.s, D.s);
  ssa_t ki = em_cast(em, "arith.bitcast", kd0, D.s, L.s);
  ssa_t kd = em_op2(em, "arith.subf", kd0, shift, D.s);
  ssa_t nkd = em_op1(em, "arith.negf", kd, D.s);
  em_line(em, "%s = math.fma %s, %s, %s : %s", r.s, inv.s, xd.s, nkd.s, D.s);
  /* the table entry of k mod N */
  ssa_t j = em_cast(em, "arith.trunci", em_op2(em, "arith.andi", ki, em_cint(em, "i64", lanes, 31), L.s),
                    L.s, I.s);
  ssa_t tab = em_fresh(em), entry = em_fresh(em);
  em_line(em, "%s = memref.get_global @tsr_expf_table : memref<32xi64>", tab.s);
  if (lanes) {
    em_line(em, "%s = vector.gather %s[%s][%s], %s, %s : memref<32xi64>, %s, %s, %s into %s",
            entry.s, tab.s, em_cidx(em, 0).s, j.s, em_cbool(em, lanes, true).s,
            em_cint(em, "i64", lanes, 0).s, I.s, B.s, L.s, L.s);
  } else {
    ssa_t ji = em_cast(em, "arith.index_cast", j, "i32", "index");
    em_line(em, "%s = memref.load %s[%s] : memref<32xi64>", entry.s, tab.s, ji.s);
  }
  ssa_t t = em_op2(em, "arith.addi", entry,
                   em_op2(em, "arith.shli", ki, em_cint(em, "i64", lanes, 47), L.s), L.s);
  ssa_t s = em_cast(em, "arith.bitcast", t, L.s, D.s);
  em_line(em, "%s = math.fma %s, %s, %s : %s", z.s, r.s, c0.s, c1.s, D.s);
  ssa_t r2 = em_op2(em, "arith.mulf", r, r, D.s);
  em_line(em, "%s = math.fma %s, %s, %s : %s", y1.s, r.s, c2.s, one.s, D.s);
  em_line(em, "%s = math.fma %s, %s, %s : %s", y2.s, z.s, r2.s, y1.s, D.s);
  ssa_t y = em_op2(em, "arith.mulf", y2, s, D.s);
  ssa_t res = em_cast(em, "arith.truncf", y, D.s, F.s);
  /* the slow path's results */
  ssa_t over = em_cmp(em, "cmpf", "ogt", x, em_cf32_bits(em, lanes, TSR_EXPF_OVERFLOW), F.s);
  res = em_select(em, over, em_cf32_bits(em, lanes, 0x7f800000u), res, "f32", lanes, true);
  ssa_t maybe = em_cmp(em, "cmpf", "olt", x, em_cf32_bits(em, lanes, TSR_EXPF_MAY_UNDERFLOW), F.s);
  res = em_select(em, maybe, em_cf32_bits(em, lanes, 0x00000001u), res, "f32", lanes, true);
  ssa_t under = em_cmp(em, "cmpf", "olt", x, em_cf32_bits(em, lanes, TSR_EXPF_UNDERFLOW), F.s);
  res = em_select(em, under, em_cf32(em, lanes, 0.0f), res, "f32", lanes, true);
  ssa_t nan = em_cmp(em, "cmpf", "uno", x, x, F.s);
  return em_select(em, nan, em_op2(em, "arith.addf", x, x, F.s), res, "f32", lanes, true);
}

/* An elementwise opcode with no lowering for its element type: an error
 * naming the op and its location (never a result), and a placeholder value
 * so that the op being emitted can finish before emission stops. */
/* interp/blockops.c nextafter_bits on the dtype's storage bits (in i32):
 * f32 values are their bits; the narrower floats' compute values (f32) go
 * to their storage bits and back, so that the step is one ulp of the dtype.
 * The constants are blockops.c's: the sign bit, +infinity (e4m3fn: its
 * largest finite magnitude), the quiet NaN, and the magnitude below which
 * XLA:CPU's compare takes values as zeros. */
static ssa_t em_nextafter(emitter_t *em, tsr_dtype_t dtype, const ssa_t *a, uint32_t lanes) {
  int64_t sign, inf, qnan, tiny;
  switch (dtype) {
  case TSR_DTYPE_BF16: sign = 0x8000, inf = 0x7f80, qnan = 0x7fc0, tiny = 0x0080; break;
  case TSR_DTYPE_F16: sign = 0x8000, inf = 0x7c00, qnan = 0x7e00, tiny = 1; break;
  case TSR_DTYPE_F8E4M3FN: sign = 0x80, inf = 0x7e, qnan = 0x7f, tiny = 1; break;
  case TSR_DTYPE_F8E5M2: sign = 0x80, inf = 0x7c, qnan = 0x7e, tiny = 1; break;
  default: sign = 0x80000000ll, inf = 0x7f800000, qnan = 0x7fc00000, tiny = 0x00800000; break;
  }
  const bool wide = dtype == TSR_DTYPE_F32;
  char storage[8];
  snprintf(storage, sizeof storage, "i%u", tsr_dtype_bits(dtype));
  tstr_t F = em_vtype("f32", lanes), I = em_vtype("i32", lanes), S = em_vtype(storage, lanes);
  ssa_t x[2];
  for (int i = 0; i < 2; i++)
    x[i] = wide ? em_cast(em, "arith.bitcast", a[i], F.s, I.s)
                : em_cast(em, "arith.extui", em_to_storage(em, dtype, a[i], lanes), S.s, I.s);
  ssa_t mask = em_cint(em, "i32", lanes, (int32_t)(sign - 1)), cinf = em_cint(em, "i32", lanes, inf);
  ssa_t csign = em_cint(em, "i32", lanes, (int32_t)(uint32_t)sign);
  ssa_t zero = em_cint(em, "i32", lanes, 0), one = em_cint(em, "i32", lanes, 1);
  ssa_t fa = em_op2(em, "arith.andi", x[0], mask, I.s);
  ssa_t ta = em_op2(em, "arith.andi", x[1], mask, I.s);
  ssa_t nan = em_op2(em, "arith.ori", em_cmp(em, "cmpi", "sgt", fa, cinf, I.s),
                     em_cmp(em, "cmpi", "sgt", ta, cinf, I.s), em_vtype("i1", lanes).s);
  ssa_t diff_sign = em_cmp(em, "cmpi", "ne",
                           em_op2(em, "arith.andi", em_op2(em, "arith.xori", x[0], x[1], I.s),
                                  csign, I.s), zero, I.s);
  ssa_t smaller = em_op2(em, "arith.ori", em_cmp(em, "cmpi", "sgt", fa, ta, I.s), diff_sign,
                         em_vtype("i1", lanes).s);
  ssa_t r = em_op2(em, "arith.addi", x[0],
                   em_select(em, smaller, em_cint(em, "i32", lanes, -1), one, "i32", lanes, true),
                   I.s);
  ssa_t from_zero = em_op2(em, "arith.ori", em_op2(em, "arith.andi", x[1], csign, I.s), one, I.s);
  r = em_select(em, em_cmp(em, "cmpi", "eq", fa, zero, I.s), from_zero, r, "i32", lanes, true);
  /* a == b as XLA:CPU compares floats: f32 (bf16) subnormals are zeros */
  ssa_t ctiny = em_cint(em, "i32", lanes, tiny);
  ssa_t both_tiny = em_op2(em, "arith.andi", em_cmp(em, "cmpi", "slt", fa, ctiny, I.s),
                           em_cmp(em, "cmpi", "slt", ta, ctiny, I.s), em_vtype("i1", lanes).s);
  ssa_t eq = em_op2(em, "arith.ori", em_cmp(em, "cmpi", "eq", x[0], x[1], I.s), both_tiny,
                    em_vtype("i1", lanes).s);
  r = em_select(em, eq, x[1], r, "i32", lanes, true);
  r = em_select(em, nan, em_cint(em, "i32", lanes, qnan), r, "i32", lanes, true);
  if (wide) return em_cast(em, "arith.bitcast", r, I.s, F.s);
  return em_to_compute(em, dtype, em_cast(em, "arith.trunci", r, I.s, S.s), lanes);
}

static ssa_t unlowered(emitter_t *em, tsr_opcode_t opcode, const char *types, ssa_t placeholder) {
  char why[96];
  snprintf(why, sizeof why, "'%s' has no lowering for %s", tsr_op_table[opcode].mnemonic, types);
  if (em->op)
    em_unimplemented(em, em->op, why);
  else
    em_fail(em, TSR_STATUS(TSR_UNIMPLEMENTED, "op %s in the cpu backend", why));
  return placeholder;
}

/* The elementwise families' per-op code (TSR_FAM_UNARY, BINARY, COMPARE of
 * ir/ops.def): float_op and int_op each start with a switch generated from
 * ops.def that jumps to the op's label (flt_<OP>, int_<OP>). A row added to
 * those families without its labels is a build error (a goto to an undefined
 * label); an op with no lowering for an element class has its label on the
 * shared "unlowered" line: TSR_UNIMPLEMENTED naming the op, its location
 * and the cpu target, never a result. */
#define FLT_CASE(E) case TSR_OP_##E: goto flt_##E;
#define INT_CASE(E) case TSR_OP_##E: goto int_##E;
#define ELEMWISE_UNARY(X, E) X(E)
#define ELEMWISE_BINARY(X, E) X(E)
#define ELEMWISE_COMPARE(X, E) X(E)
#define ELEMWISE_CONST(X, E)
#define ELEMWISE_QUERY(X, E)
#define ELEMWISE_MEMORY(X, E)
#define ELEMWISE_SELECT(X, E) /* em_elementwise_family */
#define ELEMWISE_CONVERT(X, E) /* em_elementwise_family */
#define ELEMWISE_SHAPE(X, E)
#define ELEMWISE_REDUCE(X, E)
#define ELEMWISE_ARG_REDUCE(X, E)
#define ELEMWISE_DOT(X, E)
#define ELEMWISE_CONTROL(X, E)
#define ELEMWISE_DEBUG(X, E)
#define ELEMWISE_DMA(X, E)
#define ELEMWISE_SEMAPHORE(X, E)
#define ELEMWISE_HINT(X, E)

static ssa_t float_op(emitter_t *em, tsr_opcode_t op, const ssa_t *a, uint32_t lanes) {
  tstr_t t = em_vtype("f32", lanes);
  const char *T = t.s;
  switch (op) {
#define TSR_OP(E, m, syn, rule, fam, mino, maxo, nres, nreg, flags, text) \
  ELEMWISE_##fam(FLT_CASE, E)
#include "ir/ops.def"
#undef TSR_OP
    default: break; /* not an elementwise op: the error below */
  }
  {
    flt_NEG: return em_op1(em, "arith.negf", a[0], T);
    flt_ABS: return em_op1(em, "math.absf", a[0], T);
    flt_SIGN: {
      ssa_t z = em_cf32(em, lanes, 0.0f);
      ssa_t gt = em_cmp(em, "cmpf", "ogt", a[0], z, T);
      ssa_t lt = em_cmp(em, "cmpf", "olt", a[0], z, T);
      ssa_t r = em_select(em, lt, em_cf32(em, lanes, -1.0f), a[0], "f32", lanes, true);
      return em_select(em, gt, em_cf32(em, lanes, 1.0f), r, "f32", lanes, true);
    }
    flt_EXP: return em_expf(em, a[0], lanes);
    flt_EXP2: return em_op1(em, "math.exp2", a[0], T);
    flt_LOG: return em_op1(em, "math.log", a[0], T);
    /* convert-math-to-llvm makes math.log1p log(1 + x), inexact near 0 */
    flt_LOG1P: return em_libm_call(em, "log1pf", a[0], lanes);
    flt_SQRT: return em_op1(em, "math.sqrt", a[0], T);
    flt_RSQRT: {
      ssa_t s = em_op1(em, "math.sqrt", a[0], T);
      return em_op2(em, "arith.divf", em_cf32(em, lanes, 1.0f), s, T);
    }
    flt_TANH: return em_op1(em, "math.tanh", a[0], T);
    flt_LOGISTIC: {
      /* as interp/blockops.c logistic_f: no overflow for large |a| */
      ssa_t m = em_op1(em, "math.absf", a[0], T);
      m = em_op1(em, "arith.negf", m, T);
      ssa_t e = em_expf(em, m, lanes);
      ssa_t one = em_cf32(em, lanes, 1.0f);
      ssa_t d = em_op2(em, "arith.addf", one, e, T);
      ssa_t r = em_op2(em, "arith.divf", one, d, T);
      ssa_t er = em_op2(em, "arith.mulf", e, r, T);
      ssa_t ge = em_cmp(em, "cmpf", "oge", a[0], em_cf32(em, lanes, 0.0f), T);
      return em_select(em, ge, r, er, "f32", lanes, true);
    }
    flt_SIN: return em_op1(em, "math.sin", a[0], T);
    flt_COS: return em_op1(em, "math.cos", a[0], T);
    flt_FLOOR: return em_op1(em, "math.floor", a[0], T);
    flt_CEIL: return em_op1(em, "math.ceil", a[0], T);
    flt_ROUND: return em_op1(em, "math.roundeven", a[0], T);
    flt_ADD: return em_op2(em, "arith.addf", a[0], a[1], T);
    flt_SUB: return em_op2(em, "arith.subf", a[0], a[1], T);
    flt_MUL: return em_op2(em, "arith.mulf", a[0], a[1], T);
    flt_DIV: return em_op2(em, "arith.divf", a[0], a[1], T);
    flt_REM: return em_op2(em, "arith.remf", a[0], a[1], T);
    flt_MAX: return em_fmax(em, a[0], a[1], lanes, true);
    flt_MIN: return em_fmax(em, a[0], a[1], lanes, false);
    flt_POW: return em_op2(em, "math.powf", a[0], a[1], T);
    flt_NEXTAFTER: return em_nextafter(em, TSR_DTYPE_F32, a, lanes);
    flt_EQ: return em_cmp(em, "cmpf", "oeq", a[0], a[1], T);
    flt_NE: return em_cmp(em, "cmpf", "une", a[0], a[1], T);
    flt_LT: return em_cmp(em, "cmpf", "olt", a[0], a[1], T);
    flt_LE: return em_cmp(em, "cmpf", "ole", a[0], a[1], T);
    flt_GT: return em_cmp(em, "cmpf", "ogt", a[0], a[1], T);
    flt_GE: return em_cmp(em, "cmpf", "oge", a[0], a[1], T);
    flt_NOT: flt_CLZ: flt_POPCOUNT:
    flt_AND: flt_OR: flt_XOR: flt_SHL: flt_SHRL: flt_SHRA:
    return unlowered(em, op, "floats", a[0]);
  }
}

static ssa_t int_op(emitter_t *em, tsr_opcode_t op, tsr_dtype_t dtype, const ssa_t *a,
                    uint32_t lanes) {
  const char *E = em_compute(dtype);
  tstr_t t = em_vtype(E, lanes);
  const char *T = t.s;
  const bool s = em_is_signed(dtype), b1 = dtype == TSR_DTYPE_I1;
  const uint32_t bits = em_int_bits(dtype);
  ssa_t zero = em_cint(em, E, lanes, 0), ones = em_cint(em, E, lanes, -1);
  switch (op) {
#define TSR_OP(E, m, syn, rule, fam, mino, maxo, nres, nreg, flags, text) \
  ELEMWISE_##fam(INT_CASE, E)
#include "ir/ops.def"
#undef TSR_OP
    default: break; /* not an elementwise op: the error below */
  }
  {
    int_NEG: return em_op2(em, "arith.subi", zero, a[0], T);
    int_ABS: {
      if (!s) return a[0];
      ssa_t n = em_op2(em, "arith.subi", zero, a[0], T);
      ssa_t lt = em_cmp(em, "cmpi", "slt", a[0], zero, T);
      return em_select(em, lt, n, a[0], E, lanes, true);
    }
    int_SIGN: {
      tstr_t bt = em_vtype("i1", lanes);
      if (!s) {
        ssa_t ne = em_cmp(em, "cmpi", "ne", a[0], zero, T);
        return em_cast(em, "arith.extui", ne, bt.s, T);
      }
      ssa_t gt = em_cast(em, "arith.extui", em_cmp(em, "cmpi", "sgt", a[0], zero, T), bt.s, T);
      ssa_t lt = em_cast(em, "arith.extui", em_cmp(em, "cmpi", "slt", a[0], zero, T), bt.s, T);
      return em_op2(em, "arith.subi", gt, lt, T);
    }
    int_NOT: return em_op2(em, "arith.xori", a[0], b1 ? em_cbool(em, lanes, true) : ones, T);
    int_CLZ: return em_op1(em, "math.ctlz", a[0], T);
    int_POPCOUNT: return em_op1(em, "math.ctpop", a[0], T);
    int_ADD: return em_op2(em, "arith.addi", a[0], a[1], T);
    int_SUB: return em_op2(em, "arith.subi", a[0], a[1], T);
    int_MUL: return em_op2(em, "arith.muli", a[0], a[1], T);
    int_DIV:
    int_REM: {
      /* XLA: x/0 = -1, x%0 = x, MIN/-1 = MIN, MIN%-1 = 0 (divide by 1). */
      ssa_t bz = em_cmp(em, "cmpi", "eq", a[1], zero, T);
      ssa_t bad = bz;
      if (s) {
        ssa_t amin = em_cmp(em, "cmpi", "eq", a[0],
                            em_cint(em, E, lanes, -(int64_t)(1ull << (bits - 1))), T);
        ssa_t bm1 = em_cmp(em, "cmpi", "eq", a[1], ones, T);
        ssa_t ov = em_op2(em, "arith.andi", amin, bm1, em_vtype("i1", lanes).s);
        bad = em_op2(em, "arith.ori", bz, ov, em_vtype("i1", lanes).s);
      }
      ssa_t d = em_select(em, bad, em_cint(em, E, lanes, 1), a[1], E, lanes, true);
      if (op == TSR_OP_DIV) {
        ssa_t q = em_op2(em, s ? "arith.divsi" : "arith.divui", a[0], d, T);
        return em_select(em, bz, ones, q, E, lanes, true);
      }
      ssa_t r = em_op2(em, s ? "arith.remsi" : "arith.remui", a[0], d, T);
      return em_select(em, bz, a[0], r, E, lanes, true);
    }
    int_MAX: return em_op2(em, s ? "arith.maxsi" : "arith.maxui", a[0], a[1], T);
    int_MIN: return em_op2(em, s ? "arith.minsi" : "arith.minui", a[0], a[1], T);
    int_AND: return em_op2(em, "arith.andi", a[0], a[1], T);
    int_OR: return em_op2(em, "arith.ori", a[0], a[1], T);
    int_XOR: return em_op2(em, "arith.xori", a[0], a[1], T);
    int_SHL:
    int_SHRL:
    int_SHRA: {
      /* The amount is read as unsigned; >= bits gives 0 or the sign fill. */
      ssa_t w = em_cint(em, E, lanes, bits);
      ssa_t big = em_cmp(em, "cmpi", "uge", a[1], w, T);
      if (op == TSR_OP_SHRA) {
        ssa_t amt = em_select(em, big, em_cint(em, E, lanes, bits - 1), a[1], E, lanes, true);
        return em_op2(em, "arith.shrsi", a[0], amt, T);
      }
      ssa_t amt = em_op2(em, "arith.andi", a[1], em_cint(em, E, lanes, bits - 1), T);
      ssa_t r = em_op2(em, op == TSR_OP_SHL ? "arith.shli" : "arith.shrui", a[0], amt, T);
      return em_select(em, big, zero, r, E, lanes, true);
    }
    int_EQ: return em_cmp(em, "cmpi", "eq", a[0], a[1], T);
    int_NE: return em_cmp(em, "cmpi", "ne", a[0], a[1], T);
    int_LT: return em_cmp(em, "cmpi", s ? "slt" : "ult", a[0], a[1], T);
    int_LE: return em_cmp(em, "cmpi", s ? "sle" : "ule", a[0], a[1], T);
    int_GT: return em_cmp(em, "cmpi", s ? "sgt" : "ugt", a[0], a[1], T);
    int_GE: return em_cmp(em, "cmpi", s ? "sge" : "uge", a[0], a[1], T);
    int_EXP: int_EXP2: int_LOG: int_LOG1P: int_SQRT: int_RSQRT: int_TANH:
    int_LOGISTIC: int_SIN: int_COS: int_FLOOR: int_CEIL: int_ROUND: int_POW:
    int_NEXTAFTER:
    return unlowered(em, op, b1 ? "i1" : "integers", a[0]);
  }
}

static bool is_compare(tsr_opcode_t op) {
  return tsr_op_table[op].rule == TSR_RULE_COMPARE;
}

ssa_t em_elementwise(emitter_t *em, tsr_opcode_t op, tsr_dtype_t dtype,
                     const ssa_t *args, uint32_t lanes) {
  if (!em_is_float(dtype)) return int_op(em, op, dtype, args, lanes);
  /* steps of the dtype's own ulp: exact, no rounding after */
  if (op == TSR_OP_NEXTAFTER) return em_nextafter(em, dtype, args, lanes);
  ssa_t r = float_op(em, op, args, lanes);
  return is_compare(op) ? r : em_round(em, r, dtype, lanes);
}

bool em_elementwise_family(emitter_t *em, tsr_opcode_t op, tsr_dtype_t dtype,
                           tsr_dtype_t arg_dtype, const ssa_t *a, uint32_t lanes, ssa_t *out) {
  switch (tsr_op_table[op].rule) {
    case TSR_RULE_SELECT:
      *out = em_select(em, a[0], a[1], a[2], em_compute(dtype), lanes, true);
      return true;
    case TSR_RULE_CONVERT: *out = em_convert(em, a[0], arg_dtype, dtype, lanes); return true;
    case TSR_RULE_BITCAST: *out = em_bitcast(em, a[0], arg_dtype, dtype, lanes); return true;
    case TSR_RULE_ELEMWISE:
    case TSR_RULE_COMPARE: *out = em_elementwise(em, op, arg_dtype, a, lanes); return true;
    default: return false;
  }
}

/* ---- Conversions --------------------------------------------------------------------- */

/* An integer (compute type of `from`, |v| < 2^33) as f32 rounded to odd, so
 * that rounding it again to bf16/f16 rounds once (interp i64_to_f32_odd). */
static ssa_t int_to_f32_odd(emitter_t *em, ssa_t x, tsr_dtype_t from, uint32_t lanes) {
  tstr_t xt = em_vtype(em_compute(from), lanes), lt = em_vtype("i64", lanes);
  tstr_t ft = em_vtype("f32", lanes), it = em_vtype("i32", lanes);
  ssa_t v = em_cast(em, em_is_signed(from) ? "arith.extsi" : "arith.extui", x, xt.s, lt.s);
  ssa_t f = em_cast(em, "arith.sitofp", v, lt.s, ft.s);
  ssa_t back = em_cast(em, "arith.fptosi", f, ft.s, lt.s);
  ssa_t exact = em_cmp(em, "cmpi", "eq", back, v, lt.s);
  ssa_t u = em_cast(em, "arith.bitcast", f, ft.s, it.s);
  ssa_t gt = em_cmp(em, "cmpi", "sgt", back, v, lt.s);
  ssa_t pos = em_cmp(em, "cmpi", "sgt", v, em_cint(em, "i64", lanes, 0), lt.s);
  ssa_t same = em_cmp(em, "cmpi", "eq", gt, pos, em_vtype("i1", lanes).s);
  ssa_t dec = em_op2(em, "arith.subi", u, em_cint(em, "i32", lanes, 1), it.s);
  u = em_select(em, same, dec, u, "i32", lanes, true);
  u = em_op2(em, "arith.ori", u, em_cint(em, "i32", lanes, 1), it.s);
  ssa_t odd = em_cast(em, "arith.bitcast", u, it.s, ft.s);
  return em_select(em, exact, f, odd, "f32", lanes, true);
}

ssa_t em_convert(emitter_t *em, ssa_t x, tsr_dtype_t from, tsr_dtype_t to, uint32_t lanes) {
  if (from == to) return x;
  const tsr_dtype_class_t fc = tsr_dtype_class(from), tc = tsr_dtype_class(to);
  tstr_t ft = em_vtype("f32", lanes);
  tstr_t xt = em_vtype(em_compute(from), lanes), rt = em_vtype(em_compute(to), lanes);
  if (fc == TSR_CLASS_FLOAT) {
    if (tc == TSR_CLASS_FLOAT) return em_round(em, x, to, lanes);
    if (tc == TSR_CLASS_BOOL) {
      /* |x| >= FLT_MIN or NaN ("uge"): an f32 subnormal is false, as XLA:CPU
       * and a TPU compute it (interp/blockops.c, FROM_F32_BOOL). */
      ssa_t m = em_op1(em, "math.absf", x, ft.s);
      return em_cmp(em, "cmpf", "uge", m, em_cf32_bits(em, lanes, 0x00800000u), ft.s);
    }
    /* truncate toward zero, saturate, NaN -> 0 (interp f32_to_sint/uint) */
    const uint32_t bits = em_int_bits(to);
    tstr_t i32t = em_vtype("i32", lanes);
    ssa_t r;
    if (tc == TSR_CLASS_SINT) {
      int64_t lo = -(int64_t)(1ull << (bits - 1)), hi = (int64_t)(1ull << (bits - 1)) - 1;
      ssa_t lof = em_cf32(em, lanes, (float)lo), hif = em_cf32(em, lanes, (float)hi);
      ssa_t below = em_cmp(em, "cmpf", "ole", x, lof, ft.s);
      ssa_t above = em_cmp(em, "cmpf", "oge", x, hif, ft.s);
      ssa_t nan = em_cmp(em, "cmpf", "uno", x, x, ft.s);
      tstr_t bt = em_vtype("i1", lanes);
      ssa_t out = em_op2(em, "arith.ori", below, above, bt.s);
      out = em_op2(em, "arith.ori", out, nan, bt.s);
      ssa_t safe = em_select(em, out, em_cf32(em, lanes, 0.0f), x, "f32", lanes, true);
      r = em_cast(em, "arith.fptosi", safe, ft.s, i32t.s);
      r = em_select(em, below, em_cint(em, "i32", lanes, lo), r, "i32", lanes, true);
      r = em_select(em, above, em_cint(em, "i32", lanes, hi), r, "i32", lanes, true);
      r = em_select(em, nan, em_cint(em, "i32", lanes, 0), r, "i32", lanes, true);
    } else {
      uint64_t hi = bits >= 32 ? 0xffffffffull : (1ull << bits) - 1;
      ssa_t hif = em_cf32(em, lanes, (float)hi);
      ssa_t pos = em_cmp(em, "cmpf", "ogt", x, em_cf32(em, lanes, 0.0f), ft.s);
      ssa_t above = em_cmp(em, "cmpf", "oge", x, hif, ft.s);
      ssa_t inr = em_op2(em, "arith.andi", pos, em_op2(em, "arith.xori", above,
                                                       em_cbool(em, lanes, true),
                                                       em_vtype("i1", lanes).s),
                         em_vtype("i1", lanes).s);
      ssa_t safe = em_select(em, inr, x, em_cf32(em, lanes, 0.0f), "f32", lanes, true);
      r = em_cast(em, "arith.fptoui", safe, ft.s, i32t.s);
      r = em_select(em, above, em_cint(em, "i32", lanes, (int64_t)hi), r, "i32", lanes, true);
    }
    if (bits < 32) r = em_cast(em, "arith.trunci", r, i32t.s, rt.s);
    return r;
  }
  /* integer or i1 source */
  if (tc == TSR_CLASS_FLOAT) {
    const uint32_t fbits = em_int_bits(from);
    if (to == TSR_DTYPE_F32 || fbits <= 16)
      return em_round(em,
                      em_cast(em, em_is_signed(from) ? "arith.sitofp" : "arith.uitofp", x,
                              xt.s, ft.s),
                      to, lanes);
    return em_round(em, int_to_f32_odd(em, x, from, lanes), to, lanes);
  }
  if (tc == TSR_CLASS_BOOL)
    return em_cmp(em, "cmpi", "ne", x, em_cint(em, em_compute(from), lanes, 0), xt.s);
  const uint32_t fb = em_int_bits(from), tb = em_int_bits(to);
  if (fb == tb) return x;
  if (fb < tb)
    return em_cast(em, em_is_signed(from) ? "arith.extsi" : "arith.extui", x, xt.s, rt.s);
  return em_cast(em, "arith.trunci", x, xt.s, rt.s);
}

ssa_t em_bitcast(emitter_t *em, ssa_t x, tsr_dtype_t from, tsr_dtype_t to, uint32_t lanes) {
  if (from == to) return x;
  /* through the storage bits: f32 <-> i32 reinterpret, bf16/f16 <-> i16 */
  ssa_t bits = x;
  tstr_t ft = em_vtype("f32", lanes), it = em_vtype("i32", lanes);
  if (from == TSR_DTYPE_F32)
    bits = em_cast(em, "arith.bitcast", x, ft.s, it.s);
  else if (em_is_float(from))
    bits = em_to_storage(em, from, x, lanes);
  if (to == TSR_DTYPE_F32) return em_cast(em, "arith.bitcast", bits, it.s, ft.s);
  if (em_is_float(to)) return em_to_compute(em, to, bits, lanes);
  return bits;
}

/* ---- Expressions ------------------------------------------------------------------------ */

expr_t *ex_new(emitter_t *em, ex_kind_t kind, tsr_dtype_t dtype, uint32_t rank,
               const int64_t *dims) {
  expr_t *e = em_alloc(em, sizeof *e);
  if (!e) {
    memset(&em->oom_expr, 0, sizeof em->oom_expr);
    em->oom_expr.kind = EX_SCALAR;
    snprintf(em->oom_expr.scalar.s, sizeof em->oom_expr.scalar.s, "%%oom");
    return &em->oom_expr;
  }
  e->kind = kind;
  e->dtype = dtype;
  e->rank = rank;
  for (uint32_t d = 0; d < rank; d++) e->dims[d] = dims[d];
  return e;
}

expr_t *ex_of_value(emitter_t *em, const tsr_value_t *v, uint32_t rank,
                    const int64_t *dims) {
  vinfo_t *vi = &em->vals[v->id];
  tsr_dtype_t dtype = (tsr_dtype_t)v->type.dtype;
  switch (vi->kind) {
    case VK_SCALAR: {
      expr_t *e = ex_new(em, EX_SCALAR, dtype, rank, dims);
      if (e) e->scalar = vi->scalar;
      return e;
    }
    case VK_MEM: {
      expr_t *e = ex_new(em, EX_MEM, dtype, rank, dims);
      if (e) e->mem = vi->mem;
      return e;
    }
    case VK_LAZY: return vi->expr;
    default:
      em_fail(em, TSR_STATUS(TSR_INTERNAL, "emit: value %%%s has no code (kind %d)", v->name,
                             (int)vi->kind));
      return ex_new(em, EX_SCALAR, dtype, rank, dims);
  }
}

/* Iota: index along `axis`, converted from i32 to the dtype. */
static ssa_t iota_read(emitter_t *em, const expr_t *e, const ssa_t *idx, const nest_t *n) {
  ssa_t i = em_cast(em, "arith.index_cast", idx[e->axis], "index", "i32");
  if (n->lanes && e->axis == e->rank - 1) {
    char lit[256] = "dense<[";
    size_t len = strlen(lit);
    for (uint32_t l = 0; l < n->lanes; l++) {
      snprintf(lit + len, sizeof lit - len, "%s%u", l ? ", " : "", l);
      len += strlen(lit + len);
    }
    snprintf(lit + len, sizeof lit - len, "]>");
    ssa_t step = em_fresh(em);
    em_line(em, "%s = arith.constant %s : vector<%uxi32>", step.s, lit, n->lanes);
    ssa_t b = em_bcast(em, i, "i32", n->lanes);
    ssa_t v = em_op2(em, "arith.addi", b, step, em_vtype("i32", n->lanes).s);
    return em_convert(em, v, TSR_DTYPE_I32, e->dtype, n->lanes);
  }
  ssa_t v = em_convert(em, i, TSR_DTYPE_I32, e->dtype, 0);
  return em_bcast(em, v, em_compute(e->dtype), n->lanes);
}

static ssa_t ex_read_node(emitter_t *em, const expr_t *e, const ssa_t *idx, const nest_t *n);

/* Within one position of a fused store (store_body), a node read twice (a
 * value recomputed by several users, em_lazy_ok) is computed once: the
 * first read's SSA value is reused. Only there: the body reads everything
 * before its one write, so no read can see a different memory. */
ssa_t ex_read(emitter_t *em, const expr_t *e, const ssa_t *idx, const nest_t *n) {
  if (!em->memo_on || e->kind == EX_SCALAR) return ex_read_node(em, e, idx, n);
  for (uint32_t i = 0; i < em->memo_count; i++)
    if (em->memo[i].e == e) return em->memo[i].value;
  ssa_t v = ex_read_node(em, e, idx, n);
  if (em->memo_count < EM_MEMO) em->memo[em->memo_count++] = (struct em_memo){e, v};
  return v;
}

static void remember_load(emitter_t *em, const view_t *v, tsr_dtype_t dtype, ssa_t value) {
  if (em->loads_count < EM_MEMO)
    em->loads[em->loads_count++] = (struct em_load){.view = *v, .dtype = dtype, .value = value};
}

static ssa_t ex_read_node(emitter_t *em, const expr_t *e, const ssa_t *idx, const nest_t *n) {
  if (!EM_OK(em)) return (ssa_t){"%oom"};
  switch (e->kind) {
    case EX_SCALAR: return em_bcast(em, e->scalar, em_compute(e->dtype), n->lanes);
    case EX_IOTA: return iota_read(em, e, idx, n);
    case EX_MEM: {
      if (!e->mask) {
        if (!em->memo_on) return em_mem_read(em, &e->mem, e->dtype, idx, n, NULL, NULL);
        for (uint32_t i = 0; i < em->loads_count; i++)
          if (em->loads[i].dtype == e->dtype && em_view_same(&em->loads[i].view, &e->mem))
            return em->loads[i].value;
        ssa_t v = em_mem_read(em, &e->mem, e->dtype, idx, n, NULL, NULL);
        remember_load(em, &e->mem, e->dtype, v);
        return v;
      }
      ssa_t m = ex_read(em, e->mask, idx, n);
      ssa_t pt = em_uninit(em, e->dtype, n->lanes);
      return em_mem_read(em, &e->mem, e->dtype, idx, n, &m, &pt);
    }
    case EX_BCAST: {
      const view_t *s = &e->mem;
      ssa_t sidx[TSR_MAX_RANK];
      uint32_t lead = e->rank - s->rank;
      for (uint32_t k = 0; k < s->rank; k++)
        sidx[k] = s->dims[k] == 1 ? em_cidx(em, 0) : idx[lead + k];
      bool inner_bcast = s->rank == 0 || s->dims[s->rank - 1] == 1;
      if (n->lanes && inner_bcast) {
        nest_t sn = *n;
        sn.lanes = 0;
        sn.masked = false;
        ssa_t v = em_mem_read(em, s, e->dtype, sidx, &sn, NULL, NULL);
        return em_bcast(em, v, em_compute(e->dtype), n->lanes);
      }
      return em_mem_read(em, s, e->dtype, sidx, n, NULL, NULL);
    }
    case EX_OP: {
      ssa_t a[3];
      for (uint32_t i = 0; i < e->nargs; i++) a[i] = ex_read(em, e->args[i], idx, n);
      const tsr_op_t *saved = em->op;
      if (e->origin) em->op = e->origin; /* errors name the op that made the node */
      ssa_t r;
      if (!em_elementwise_family(em, e->op, e->dtype, e->arg_dtype, a, n->lanes, &r))
        r = unlowered(em, e->op, "an elementwise expression", a[0]);
      em->op = saved;
      return r;
    }
  }
  return e->scalar;
}

static bool view_inner_unit(const view_t *v) {
  return v->rank == 0 || v->dims[v->rank - 1] == 1 || v->strides[v->rank - 1] == 1;
}

bool ex_vectorizable(const expr_t *e) {
  switch (e->kind) {
    case EX_MEM: return e->mem.rank > 0 && view_inner_unit(&e->mem) &&
                        (!e->mask || ex_vectorizable(e->mask));
    case EX_BCAST: {
      const view_t *s = &e->mem;
      bool inner_bcast = s->rank == 0 || s->dims[s->rank - 1] == 1;
      return inner_bcast || view_inner_unit(s);
    }
    case EX_OP:
      for (uint32_t i = 0; i < e->nargs; i++)
        if (!ex_vectorizable(e->args[i])) return false;
      return true;
    default: return true;
  }
}

bool ex_has_mutable(const expr_t *e) {
  switch (e->kind) {
    case EX_MEM: return e->mutable_mem || (e->mask && ex_has_mutable(e->mask));
    case EX_OP:
      for (uint32_t i = 0; i < e->nargs; i++)
        if (ex_has_mutable(e->args[i])) return true;
      return false;
    default: return false;
  }
}

bool ex_inplace_safe(const emitter_t *em, const expr_t *e, const view_t *dst) {
  (void)em;
  switch (e->kind) {
    case EX_MEM:
      if (e->mask && !ex_inplace_safe(em, e->mask, dst)) return false;
      return e->mem.root != dst->root || em_view_same(&e->mem, dst);
    case EX_BCAST: return e->mem.root != dst->root;
    case EX_OP:
      for (uint32_t i = 0; i < e->nargs; i++)
        if (!ex_inplace_safe(em, e->args[i], dst)) return false;
      return true;
    default: return true;
  }
}

bool ex_reads_root(const expr_t *e, uint32_t root) {
  switch (e->kind) {
    case EX_MEM: return e->mem.root == root || (e->mask && ex_reads_root(e->mask, root));
    case EX_BCAST: return e->mem.root == root;
    case EX_OP:
      for (uint32_t i = 0; i < e->nargs; i++)
        if (ex_reads_root(e->args[i], root)) return true;
      return false;
    default: return false;
  }
}

/* Whether some memory leaf of a is a leaf of b too (same root). */
static bool ex_shares_leaf(const expr_t *a, const expr_t *b) {
  switch (a->kind) {
    case EX_MEM:
      if (ex_reads_root(b, a->mem.root)) return true;
      return a->mask && ex_shares_leaf(a->mask, b);
    case EX_BCAST: return ex_reads_root(b, a->mem.root);
    case EX_OP:
      for (uint32_t i = 0; i < a->nargs; i++)
        if (ex_shares_leaf(a->args[i], b)) return true;
      return false;
    default: return false;
  }
}

typedef struct store_ctx {
  const expr_t *e, *mask;
  const view_t *dst;
} store_ctx_t;

static void store_body(emitter_t *em, const nest_t *n, void *p) {
  store_ctx_t *c = p;
  em->memo_on = true;
  em->memo_count = 0;
  em->loads_count = 0;
  ssa_t v = ex_read(em, c->e, n->idx, n);
  ssa_t m;
  if (c->mask) m = ex_read(em, c->mask, n->idx, n);
  em->memo_on = false;
  if (c->mask) {
    em_mem_write(em, c->dst, c->e->dtype, n->idx, n, v, &m);
  } else {
    em_mem_write(em, c->dst, c->e->dtype, n->idx, n, v, NULL);
  }
}

void ex_store(emitter_t *em, const expr_t *e, const view_t *dst, const expr_t *mask) {
  if (!e || !EM_OK(em)) return;
  dimv_t ext[TSR_MAX_RANK];
  for (uint32_t d = 0; d < dst->rank; d++) ext[d] = em_dimc(dst->dims[d]);
  uint32_t lanes = 0;
  if (dst->rank > 0 && view_inner_unit(dst) && ex_vectorizable(e) &&
      (!mask || ex_vectorizable(mask)))
    lanes = em_pick_lanes(dst->dims[dst->rank - 1]);
  store_ctx_t c = {.e = e, .mask = mask, .dst = dst};
  em_nest(em, dst->rank, ext, lanes, store_body, &c);
}

/* One position of the group's nest: every member in op order, each written
 * before the next reads it (a later member reads an earlier one's buffer
 * through the same dense view, so at this very position). Nodes read by
 * several members are computed once (the memo): no member writes memory
 * that another reads elsewhere than at its own position, since a slot
 * released while the group is pending is not reused before it is emitted
 * (em_release_after). */
static void group_body(emitter_t *em, const nest_t *n, void *p) {
  (void)p;
  em->memo_on = true;
  em->memo_count = 0;
  em->loads_count = 0;
  for (uint32_t i = 0; i < em->group.n; i++) {
    const expr_t *e = em->group.e[i];
    ssa_t v = ex_read(em, e, n->idx, n);
    em_mem_write(em, &em->group.dst[i], e->dtype, n->idx, n, v, NULL);
    /* Reading it back gives v again: compute values of 16-bit floats are
     * kept in their dtype's value set (em_round). */
    remember_load(em, &em->group.dst[i], e->dtype, v);
  }
  em->memo_on = false;
}

void em_group_flush(emitter_t *em) {
  struct em_group *g = &em->group;
  if (g->n && EM_OK(em)) {
    const view_t *d = &g->dst[0];
    dimv_t ext[TSR_MAX_RANK];
    for (uint32_t k = 0; k < d->rank; k++) ext[k] = em_dimc(d->dims[k]);
    em_nest(em, d->rank, ext, g->lanes, group_body, NULL);
  }
  g->n = 0;
  em_release_held(em);
}

static uint32_t store_lanes(const expr_t *e, const view_t *dst) {
  return dst->rank > 0 && dst->strides[dst->rank - 1] == 1 && ex_vectorizable(e)
             ? em_pick_lanes(dst->dims[dst->rank - 1])
             : 0;
}

/* Whether e reads memory that the pending group writes or reads. */
static bool touches_group(const emitter_t *em, const expr_t *e) {
  const struct em_group *g = &em->group;
  for (uint32_t i = 0; i < g->n; i++)
    if (ex_reads_root(e, g->dst[i].root) || ex_shares_leaf(e, g->e[i])) return true;
  return false;
}

view_t em_group_add(emitter_t *em, const expr_t *e) {
  struct em_group *g = &em->group;
  view_t v = em_value_buffer(em, e->dtype, e->rank, e->dims);
  uint32_t lanes = store_lanes(e, &v);
  /* A result joins the group when it has the group's shape and reads what
   * the group writes or reads (a compare-exchange: the mask, then the
   * selects reading it and the same operands). Unrelated results start a
   * group of their own: groups are then the same from one repetition of a
   * pattern to the next, which lets the splitter's parts be equal. */
  bool fits = g->n > 0 && g->n < EM_GROUP && lanes == g->lanes &&
              g->dst[0].rank == v.rank;
  for (uint32_t k = 0; fits && k < v.rank; k++) fits = g->dst[0].dims[k] == v.dims[k];
  if (fits) fits = touches_group(em, e);
  if (!fits) em_group_flush(em);
  g->lanes = lanes;
  g->e[g->n] = e;
  g->dst[g->n++] = v;
  return v;
}

view_t em_materialize(emitter_t *em, const expr_t *e) {
  view_t v = em_buffer(em, e->dtype, e->rank, e->dims);
  ex_store(em, e, &v, NULL);
  return v;
}

view_t em_materialize_value(emitter_t *em, const expr_t *e) {
  view_t v = em_value_buffer(em, e->dtype, e->rank, e->dims);
  ex_store(em, e, &v, NULL);
  return v;
}

view_t em_value_view(emitter_t *em, const tsr_value_t *v) {
  vinfo_t *vi = &em->vals[v->id];
  if (vi->kind == VK_MEM) return vi->mem;
  expr_t *e = ex_of_value(em, v, v->type.rank, v->type.dims);
  if (!e) {
    view_t none;
    memset(&none, 0, sizeof none);
    return none;
  }
  /* Cache it when this point dominates every later use: the value's own
   * region (its other uses are there or nested); then the buffer is the
   * value's own, released after its last use. */
  const tsr_region_t *home = v->def ? v->def->parent : v->owner;
  if (home != em->region) return em_materialize(em, e);
  view_t m = em_materialize_value(em, e);
  vi->kind = VK_MEM;
  vi->mem = m;
  em_hold(em, v, m.root);
  return m;
}

expr_t *ex_squeeze(emitter_t *em, const expr_t *e) {
  bool unit = false;
  for (uint32_t d = 0; d < e->rank; d++) unit |= e->dims[d] == 1;
  if (!unit) return (expr_t *)e;
  int64_t dims[TSR_MAX_RANK];
  uint32_t r = 0;
  for (uint32_t d = 0; d < e->rank; d++)
    if (e->dims[d] != 1) dims[r++] = e->dims[d];
  expr_t *s = ex_new(em, e->kind, e->dtype, r, dims);
  if (!s) return NULL;
  switch (e->kind) {
    case EX_SCALAR: s->scalar = e->scalar; return s;
    case EX_MEM:
      s->mem = em_view_squeeze(em, &e->mem);
      s->mutable_mem = e->mutable_mem;
      if (e->mask) {
        s->mask = ex_squeeze(em, e->mask);
        if (!s->mask) return NULL;
      }
      return s;
    case EX_OP:
      s->op = e->op;
      s->origin = e->origin;
      s->arg_dtype = e->arg_dtype;
      s->nargs = e->nargs;
      for (uint32_t i = 0; i < e->nargs; i++) {
        s->args[i] = ex_squeeze(em, e->args[i]);
        if (!s->args[i]) return NULL;
      }
      return s;
    default: return NULL; /* iota, broadcast: materialize first */
  }
}

/* ---- Values -------------------------------------------------------------------------------- */

ssa_t em_scalar(emitter_t *em, const tsr_value_t *v) {
  vinfo_t *vi = em_vi(em, v);
  if (vi->kind != VK_SCALAR) {
    em_fail(em, TSR_STATUS(TSR_INTERNAL, "emit: %%%s is not a scalar here", v->name));
    return (ssa_t){"%undef"};
  }
  return vi->scalar;
}

/* A dense view of v's elements (copying when v's view is strided). */
view_t em_dense_view_of(emitter_t *em, const tsr_value_t *a) {
  view_t v = em_value_view(em, a);
  if (em_view_is_dense(&v)) return v;
  expr_t *e = ex_new(em, EX_MEM, (tsr_dtype_t)a->type.dtype, a->type.rank, a->type.dims);
  if (!e) return v;
  e->mem = v;
  return em_materialize(em, e);
}

/* Whether `u` can evaluate its operand `v` element by element inside its own
 * loops (each element read once, at u's position). */
static bool fuses(const tsr_op_t *u, const tsr_value_t *v) {
  switch (tsr_op_table[u->opcode].rule) {
    case TSR_RULE_ELEMWISE:
    case TSR_RULE_COMPARE:
    case TSR_RULE_SELECT:
    case TSR_RULE_CONVERT:
    case TSR_RULE_BITCAST: return u->results[0]->type.kind == TSR_TYPE_VECTOR;
    case TSR_RULE_STORE: return u->operands[0] != v;
    case TSR_RULE_REDUCE:
    case TSR_RULE_TRANSPOSE:
    case TSR_RULE_CONCATENATE: return true;
    case TSR_RULE_FOR:
      for (uint32_t i = 3; i < u->num_operands; i++)
        if (u->operands[i] == v) return true;
      return false;
    case TSR_RULE_WHILE: return true;
    case TSR_RULE_DOT: /* the accumulator: each element read once, at its tile's start */
      return u->num_operands > 2 && u->operands[2] == v && u->operands[0] != v &&
             u->operands[1] != v;
    case TSR_RULE_YIELD: {
      const tsr_op_t *p = u->parent ? u->parent->parent_op : NULL;
      return p && (p->opcode == TSR_OP_FOR || p->opcode == TSR_OP_WHILE || p->opcode == TSR_OP_IF);
    }
    default: return false;
  }
}

/* Whether the block result of `op`, computed by `e`, stays an expression
 * that its only user evaluates (fusion). */
/* Op nodes of e, counting up to `limit` (a tree: a value used twice inside
 * it is counted twice). */
static uint32_t count_op_nodes(const expr_t *e, uint32_t limit) {
  uint32_t n = e->kind == EX_OP;
  if (e->kind == EX_MEM && e->mask) n += count_op_nodes(e->mask, limit);
  for (uint32_t i = 0; i < e->nargs && n <= limit; i++)
    n += count_op_nodes(e->args[i], limit - n);
  return n;
}

/* Expressions of at most this many op nodes stay lazy when every use is an
 * elementwise op or a store's value within the next EM_RECOMPUTE_WINDOW ops
 * of their region: each user computes them again, one vector at a time,
 * instead of a loop nest writing them to a buffer that the users read back.
 * A bitonic compare-exchange step (its lane masks and the partner select,
 * each used twice) went from 5 loop nests to 1 (docs/benchmarks.md, "After the fix"). */
#define EM_RECOMPUTE_NODES 4
#define EM_RECOMPUTE_WINDOW 32

static bool recompute_ok(const emitter_t *em, const tsr_op_t *op, const expr_t *e) {
  const tsr_value_t *r = op->results[0];
  if (ex_has_mutable(e) || count_op_nodes(e, EM_RECOMPUTE_NODES) > EM_RECOMPUTE_NODES)
    return false;
  uint32_t found = 0, window = 0;
  for (const tsr_op_t *u = op->next; u && window < EM_RECOMPUTE_WINDOW; u = u->next, window++) {
    bool uses_r = false;
    for (uint32_t i = 0; i < u->num_operands; i++) uses_r |= u->operands[i] == r;
    if (!uses_r) continue;
    switch (tsr_op_table[u->opcode].rule) {
      case TSR_RULE_ELEMWISE:
      case TSR_RULE_COMPARE:
      case TSR_RULE_SELECT:
      case TSR_RULE_CONVERT:
      case TSR_RULE_BITCAST:
        if (u->results[0]->type.kind != TSR_TYPE_VECTOR) return false;
        break;
      case TSR_RULE_STORE:
        if (u->operands[0] == r) return false;
        break;
      default: return false;
    }
    for (uint32_t i = 0; i < u->num_operands; i++) found += u->operands[i] == r;
    if (found == em->uses[r->id]) return true;
  }
  return false;
}

bool em_lazy_ok(emitter_t *em, const tsr_op_t *op, const expr_t *e) {
  const tsr_value_t *r = op->results[0];
  if (em->uses[r->id] > 1) return recompute_ok(em, op, e);
  if (em->uses[r->id] != 1) return false;
  const tsr_op_t *u = em->user[r->id];
  if (!u || u->parent != op->parent || !fuses(u, r)) return false;
  /* Elements of refs that the kernel writes must be read before any write:
   * the user must come right after. */
  if (ex_has_mutable(e) && u != op->next) return false;
  return true;
}
