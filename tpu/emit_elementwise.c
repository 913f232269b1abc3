/* Scalars and elementwise ops for the TPU (tpu/emit_internal.h): const,
 * the grid, device and core queries, multiple_of (tpu.assume_multiple), and
 * the unary, binary, compare, select and convert families as the arith/math
 * ops of their rows of ir/ops_tpu.def, as Pallas's TPU lowering writes them
 * (docs/tpu.md, "Conventions followed"), with libtpu's gaps filled by
 * equivalent compositions. */
#include <stdio.h>

#include "tpu/emit_internal.h"

/* ---- Constants and queries ----------------------------------------------------- */

void tpu_op_const(tpu_emitter_t *em, const tsr_op_t *op) {
  const tsr_type_t *t = &op->results[0]->type;
  char lit[64], ty[TPU_TYPE_MAX];
  tpu_literal(lit, sizeof lit, t->dtype, op->literal.f, op->literal.i);
  const char *r = tpu_result_name(em, op, 0);
  if (t->kind == TSR_TYPE_VECTOR)
    tpu_line(em, "%s = arith.constant dense<%s> : %s", r, lit, tpu_type(ty, t));
  else if (t->dtype == TSR_DTYPE_I1)
    tpu_line(em, "%s = arith.constant %s", r, lit);
  else
    tpu_line(em, "%s = arith.constant %s : %s", r, lit, tpu_elem(t->dtype));
}

void tpu_op_program_id(tpu_emitter_t *em, const tsr_op_t *op) {
  char buf[32];
  snprintf(buf, sizeof buf, "%%$g%lld", (long long)op->ints[0]);
  tpu_set_name(em, op->results[0], buf);
}

void tpu_op_num_programs(tpu_emitter_t *em, const tsr_op_t *op) {
  /* Pallas folds num_programs of a static grid to a constant; a dynamic
   * extent is Mosaic's tpu.iteration_bound, as Pallas lowers it. */
  uint32_t g = (uint32_t)op->ints[0];
  if (em->kernel->grid_bound[g])
    tpu_line(em, "%s = tpu.iteration_bound %u : i32", tpu_result_name(em, op, 0), g);
  else
    tpu_line(em, "%s = arith.constant %lld : i32", tpu_result_name(em, op, 0),
             (long long)em->kernel->grid[g]);
}

void tpu_op_device_id(tpu_emitter_t *em, const tsr_op_t *op) {
  tpu_line(em, "%s = tpu.device_id : i32", tpu_result_name(em, op, 0));
}

void tpu_op_core_id(tpu_emitter_t *em, const tsr_op_t *op) {
  tpu_set_name(em, op->results[0], tpu_core_index(em));
}

/* multiple_of: Mosaic's tpu.assume_multiple (what pl.multiple_of lowers
 * to), which proves the alignment of the dynamic offsets computed from it. */
void tpu_op_multiple_of(tpu_emitter_t *em, const tsr_op_t *op) {
  const char *a = tpu_name(em, op->operands[0]);
  tpu_line(em, "%s = tpu.assume_multiple %s, %lld : i32", tpu_result_name(em, op, 0), a,
           (long long)op->ints[0]);
}

/* ---- Elementwise --------------------------------------------------------------- */

/* `v` as a value of `target`'s shape: a scalar operand of a block op is
 * broadcast (vector.broadcast), as Pallas does. */
static const char *operand_as(tpu_emitter_t *em, const tsr_value_t *v, const tsr_type_t *target) {
  const char *name = tpu_name(em, v);
  if (v->type.kind != TSR_TYPE_SCALAR || target->kind != TSR_TYPE_VECTOR) return name;
  char a[TPU_TYPE_MAX], b[TPU_TYPE_MAX];
  tsr_type_t vt = with_dtype(target, v->type.dtype);
  const char *t = tpu_tmp(em);
  tpu_line(em, "%s = vector.broadcast %s : %s to %s", t, name, tpu_type(a, &v->type),
           tpu_type(b, &vt));
  return t;
}

/* A 16-bit op libtpu does not legalize on every block shape, computed in
 * 32 bits and narrowed, which gives the same bits: bf16 `rem`
 * ("failed to legalize arith.remf"; the remainder of two bf16 values is
 * exact in bf16), and i16/u16 `rem`, `div` (arith.remsi fails on 3-D
 * blocks), `max`, `min` ("failed to legalize operation 'arith.maxsi'" on
 * an (8, 4, 24) i16 block; libtpu has no arith.maxui at all), `clz` and
 * `popcount` ("failed to legalize math.ctlz/ctpop"), extended by sign or
 * zero as the dtype's class says. */
static void widened_16(tpu_emitter_t *em, const tsr_op_t *op, const char *a, const char *b,
                       const tsr_type_t *rt) {
  tsr_dtype_t d = rt->dtype;
  bool f = is_float(d), u = is_uint(d);
  tsr_type_t wt = with_dtype(rt, f ? TSR_DTYPE_F32 : TSR_DTYPE_I32);
  char nt[TPU_TYPE_MAX], wty[TPU_TYPE_MAX], wa[32], wb[32] = "", w[32];
  tpu_type(nt, rt);
  tpu_type(wty, &wt);
  const char *ext = f ? "arith.extf"
                    : u || op->opcode == TSR_OP_CLZ || op->opcode == TSR_OP_POPCOUNT
                        ? "arith.extui"
                        : "arith.extsi";
  snprintf(wa, sizeof wa, "%s", tpu_tmp(em));
  tpu_line(em, "%s = %s %s : %s to %s", wa, ext, a, nt, wty);
  if (b) {
    snprintf(wb, sizeof wb, "%s", tpu_tmp(em));
    tpu_line(em, "%s = %s %s : %s to %s", wb, ext, b, nt, wty);
  }
  snprintf(w, sizeof w, "%s", tpu_tmp(em));
  const char *name = tpu_spelling(op->opcode, d);
  if (op->opcode == TSR_OP_MAX || op->opcode == TSR_OP_MIN) {
    /* MLIR narrows trunci(maxsi(ext a, ext b)) back to an i16 maxsi: the
     * extremum is taken without one. With d = a - b (exact in i32),
     * p = d & ~(d >> 31) is max(d, 0): max = b + p, min = a - p. */
    char dd[32], sg[32], ns[32], pp[32];
    snprintf(dd, sizeof dd, "%s", tpu_tmp(em));
    tpu_line(em, "%s = arith.subi %s, %s : %s", dd, wa, wb, wty);
    char c31[32], ones[32];
    snprintf(c31, sizeof c31, "%s", tpu_constant(em, &wt, 0.0, 31));
    snprintf(ones, sizeof ones, "%s", tpu_constant(em, &wt, 0.0, -1));
    snprintf(sg, sizeof sg, "%s", tpu_tmp(em));
    tpu_line(em, "%s = arith.shrsi %s, %s : %s", sg, dd, c31, wty);
    snprintf(ns, sizeof ns, "%s", tpu_tmp(em));
    tpu_line(em, "%s = arith.xori %s, %s : %s", ns, sg, ones, wty);
    snprintf(pp, sizeof pp, "%s", tpu_tmp(em));
    tpu_line(em, "%s = arith.andi %s, %s : %s", pp, dd, ns, wty);
    if (op->opcode == TSR_OP_MAX)
      tpu_line(em, "%s = arith.addi %s, %s : %s", w, wb, pp, wty);
    else
      tpu_line(em, "%s = arith.subi %s, %s : %s", w, wa, pp, wty);
  } else if (b)
    tpu_line(em, "%s = %s %s, %s : %s", w, name, wa, wb, wty);
  else
    tpu_line(em, "%s = %s %s : %s", w, name, wa, wty);
  if (op->opcode == TSR_OP_CLZ) { /* 16 more leading zeros in 32 bits */
    char sixteen[32];
    snprintf(sixteen, sizeof sixteen, "%s", tpu_constant(em, &wt, 0.0, 16));
    const char *t = tpu_tmp(em);
    tpu_line(em, "%s = arith.subi %s, %s : %s", t, w, sixteen, wty);
    snprintf(w, sizeof w, "%s", t);
  }
  tpu_line(em, "%s = %s %s : %s to %s", tpu_result_name(em, op, 0),
           f ? "arith.truncf" : "arith.trunci", w, wty, nt);
}

/* 8-bit floats have no TPU vector arithmetic (libtpu: "failed to legalize
 * operation 'arith.addf'" on f8E4M3FN and f8E5M2 vectors, v5e, v6e and
 * v7x alike), and tessera computes them in f32 and rounds the result once
 * (include/tessera/dtypes.def): so does the TPU, extending each operand
 * (arith.extf, exact), computing the op's f32 spelling and rounding back
 * (arith.truncf). */
static void widened_f8(tpu_emitter_t *em, const tsr_op_t *op, const char *a, const char *b,
                       const tsr_type_t *rt) {
  tsr_type_t wt = with_dtype(rt, TSR_DTYPE_F32);
  char nt[TPU_TYPE_MAX], wty[TPU_TYPE_MAX], wa[32], wb[32] = "", w[32];
  tpu_type(nt, rt);
  tpu_type(wty, &wt);
  snprintf(wa, sizeof wa, "%s", tpu_tmp(em));
  tpu_line(em, "%s = arith.extf %s : %s to %s", wa, a, nt, wty);
  if (b) {
    snprintf(wb, sizeof wb, "%s", tpu_tmp(em));
    tpu_line(em, "%s = arith.extf %s : %s to %s", wb, b, nt, wty);
  }
  snprintf(w, sizeof w, "%s", tpu_tmp(em));
  const char *name = tpu_spelling(op->opcode, TSR_DTYPE_F32);
  if (b)
    tpu_line(em, "%s = %s %s, %s : %s", w, name, wa, wb, wty);
  else
    tpu_line(em, "%s = %s %s : %s", w, name, wa, wty);
  tpu_line(em, "%s = arith.truncf %s : %s to %s", tpu_result_name(em, op, 0), w, wty, nt);
}

static bool is_f8(tsr_dtype_t d) { return d == TSR_DTYPE_F8E4M3FN || d == TSR_DTYPE_F8E5M2; }

/* nextafter as Pallas lowers it on a TPU (pallas utils'
 * nextafter_lowering_helper): integer steps on the f32 bits, NaN if either
 * operand is NaN, b if equal (subnormals equal to zeros, as XLA:CPU and a
 * TPU compare f32), the smallest subnormal of b's sign from a zero
 * (interp/blockops.c nextafter_bits). Pallas takes f32
 * only: bf16 and f16 are the located error Pallas gives. */
static void nextafter_f32(tpu_emitter_t *em, const tsr_op_t *op, const char *a, const char *b,
                          const tsr_type_t *rt) {
  if (rt->dtype != TSR_DTYPE_F32) {
    tpu_unimplemented(em, op, "Pallas's TPU nextafter takes f32 only, not %s",
                      tsr_dtype_name(rt->dtype));
    return;
  }
  tsr_type_t it = with_dtype(rt, TSR_DTYPE_I32);
  char ft[TPU_TYPE_MAX], ity[TPU_TYPE_MAX];
  tpu_type(ft, rt);
  tpu_type(ity, &it);
  const bool vec = rt->kind == TSR_TYPE_VECTOR;
  char x[32], y[32], mask[32], inf[32], sign[32], zero[32], one[32], mone[32], qnan[32];
  char fa[32], ta[32], n1[32], n2[32], nan[32], xo[32], ds[32], dsn[32], gt[32], sm[32];
  char step[32], r1[32], ysg[32], fz[32], r2[32], eq[32], r3[32], ri[32];
#define TMP(buf) snprintf(buf, sizeof buf, "%s", tpu_tmp(em))
#define CONST(buf, v) snprintf(buf, sizeof buf, "%s", tpu_constant(em, &it, 0.0, v))
  TMP(x);
  tpu_line(em, "%s = arith.bitcast %s : %s to %s", x, a, ft, ity);
  TMP(y);
  tpu_line(em, "%s = arith.bitcast %s : %s to %s", y, b, ft, ity);
  CONST(mask, 0x7fffffff);
  CONST(inf, 0x7f800000);
  CONST(sign, -2147483647ll - 1);
  CONST(zero, 0);
  CONST(one, 1);
  CONST(mone, -1);
  CONST(qnan, 0x7fc00000);
  TMP(fa);
  tpu_line(em, "%s = arith.andi %s, %s : %s", fa, x, mask, ity);
  TMP(ta);
  tpu_line(em, "%s = arith.andi %s, %s : %s", ta, y, mask, ity);
  TMP(n1);
  tpu_line(em, "%s = arith.cmpi sgt, %s, %s : %s", n1, fa, inf, ity);
  TMP(n2);
  tpu_line(em, "%s = arith.cmpi sgt, %s, %s : %s", n2, ta, inf, ity);
  char bt[TPU_TYPE_MAX];
  tsr_type_t b1 = with_dtype(rt, TSR_DTYPE_I1);
  tpu_type(bt, &b1);
  TMP(nan);
  tpu_line(em, "%s = arith.ori %s, %s : %s", nan, n1, n2, bt);
  TMP(xo);
  tpu_line(em, "%s = arith.xori %s, %s : %s", xo, x, y, ity);
  TMP(ds);
  tpu_line(em, "%s = arith.andi %s, %s : %s", ds, xo, sign, ity);
  TMP(dsn);
  tpu_line(em, "%s = arith.cmpi ne, %s, %s : %s", dsn, ds, zero, ity);
  TMP(gt);
  tpu_line(em, "%s = arith.cmpi sgt, %s, %s : %s", gt, fa, ta, ity);
  TMP(sm);
  tpu_line(em, "%s = arith.ori %s, %s : %s", sm, gt, dsn, bt);
  TMP(step);
  tpu_select(em, step, sm, vec, mone, one, &it);
  TMP(r1);
  tpu_line(em, "%s = arith.addi %s, %s : %s", r1, x, step, ity);
  TMP(ysg);
  tpu_line(em, "%s = arith.andi %s, %s : %s", ysg, y, sign, ity);
  TMP(fz);
  tpu_line(em, "%s = arith.ori %s, %s : %s", fz, ysg, one, ity);
  char az[32], tiny[32], st1[32], st2[32], bst[32], beq[32];
  TMP(az);
  tpu_line(em, "%s = arith.cmpi eq, %s, %s : %s", az, fa, zero, ity);
  TMP(r2);
  tpu_select(em, r2, az, vec, fz, r1, &it);
  CONST(tiny, 0x00800000);
  TMP(st1);
  tpu_line(em, "%s = arith.cmpi slt, %s, %s : %s", st1, fa, tiny, ity);
  TMP(st2);
  tpu_line(em, "%s = arith.cmpi slt, %s, %s : %s", st2, ta, tiny, ity);
  TMP(bst);
  tpu_line(em, "%s = arith.andi %s, %s : %s", bst, st1, st2, bt);
  TMP(beq);
  tpu_line(em, "%s = arith.cmpi eq, %s, %s : %s", beq, x, y, ity);
  TMP(eq);
  tpu_line(em, "%s = arith.ori %s, %s : %s", eq, beq, bst, bt);
  TMP(r3);
  tpu_select(em, r3, eq, vec, y, r2, &it);
  TMP(ri);
  tpu_select(em, ri, nan, vec, qnan, r3, &it);
  tpu_line(em, "%s = arith.bitcast %s : %s to %s", tpu_result_name(em, op, 0), ri, ity, ft);
#undef TMP
#undef CONST
}

void tpu_op_elementwise(tpu_emitter_t *em, const tsr_op_t *op) {
  const tsr_type_t *rt = &op->results[0]->type;
  const tsr_op_info_t *info = &tsr_op_table[op->opcode];
  char ty[TPU_TYPE_MAX];
  switch (info->family) {
  case TSR_FAM_SELECT: {
    const tsr_value_t *c = op->operands[0];
    const char *cn = tpu_name(em, c);
    const char *a = operand_as(em, op->operands[1], rt);
    const char *b = operand_as(em, op->operands[2], rt);
    if (is_bool(rt->dtype) && rt->kind == TSR_TYPE_VECTOR) { /* see tpu_bits_i32 */
      char wa[32], wb[32], w[32];
      tsr_type_t wt = with_dtype(rt, TSR_DTYPE_I32);
      snprintf(wb, sizeof wb, "%s", b);
      snprintf(wa, sizeof wa, "%s", tpu_bits_i32(em, a, rt));
      snprintf(wb, sizeof wb, "%s", tpu_bits_i32(em, wb, rt));
      snprintf(w, sizeof w, "%s", tpu_tmp(em));
      tpu_select(em, w, cn, c->type.kind == TSR_TYPE_VECTOR, wa, wb, &wt);
      tpu_bits_i1(em, tpu_result_name(em, op, 0), w, rt);
      return;
    }
    if (rt->kind == TSR_TYPE_SCALAR && is_f8(rt->dtype)) {
      /* libtpu: "failed to legalize operation 'arith.select'" of f8
       * scalars: selected in f32 (exact both ways) */
      tsr_type_t wt = with_dtype(rt, TSR_DTYPE_F32);
      char wa[32], wb[32], w[32], nt[TPU_TYPE_MAX], wty[TPU_TYPE_MAX];
      tpu_type(nt, rt);
      tpu_type(wty, &wt);
      snprintf(wa, sizeof wa, "%s", tpu_tmp(em));
      tpu_line(em, "%s = arith.extf %s : %s to %s", wa, a, nt, wty);
      snprintf(wb, sizeof wb, "%s", tpu_tmp(em));
      tpu_line(em, "%s = arith.extf %s : %s to %s", wb, b, nt, wty);
      snprintf(w, sizeof w, "%s", tpu_tmp(em));
      tpu_select(em, w, cn, false, wa, wb, &wt);
      tpu_line(em, "%s = arith.truncf %s : %s to %s", tpu_result_name(em, op, 0), w, wty, nt);
      return;
    }
    tpu_select(em, tpu_result_name(em, op, 0), cn, c->type.kind == TSR_TYPE_VECTOR, a, b, rt);
    return;
  }
  case TSR_FAM_COMPARE: {
    const tsr_value_t *x = op->operands[0], *y = op->operands[1];
    tsr_type_t ot = with_dtype(rt, x->type.dtype);
    const char *a = operand_as(em, x, &ot), *b = operand_as(em, y, &ot);
    if (is_bool(ot.dtype) && ot.kind == TSR_TYPE_VECTOR) {
      /* MLIR rewrites a compare of i1 blocks into an extension of i1 that
       * libtpu refuses ("Invalid input layout"): compare the bits as i32. */
      tsr_type_t wt = with_dtype(&ot, TSR_DTYPE_I32);
      char wa[32], wb[32], bt[TPU_TYPE_MAX], wty[TPU_TYPE_MAX];
      tpu_type(bt, &ot);
      tpu_type(wty, &wt);
      snprintf(wa, sizeof wa, "%s", tpu_tmp(em));
      tpu_line(em, "%s = arith.extui %s : %s to %s", wa, a, bt, wty);
      snprintf(wb, sizeof wb, "%s", tpu_tmp(em));
      tpu_line(em, "%s = arith.extui %s : %s to %s", wb, b, bt, wty);
      if (!tpu_compare(em, tpu_result_name(em, op, 0), op->opcode, wa, wb, &wt)) break;
      return;
    }
    if (is_f8(ot.dtype) ||
        (ot.kind == TSR_TYPE_VECTOR && !is_float(ot.dtype) && bits_of(ot.dtype) < 8)) {
      /* libtpu compares no f8 vectors ("Target does not support this
       * comparison") and no sub-byte ones but for equality (MLIR turns
       * `sgt` into an arith.maxsi of i4 that it cannot legalize): compare
       * the values extended to 32 bits, which orders them the same. */
      tsr_dtype_t wd = is_float(ot.dtype) ? TSR_DTYPE_F32 : TSR_DTYPE_I32;
      tsr_type_t wt = with_dtype(&ot, wd);
      const char *ext = is_float(ot.dtype) ? "arith.extf"
                        : is_uint(ot.dtype) ? "arith.extui" : "arith.extsi";
      char wa[32], wb[32], nt[TPU_TYPE_MAX], wty[TPU_TYPE_MAX];
      tpu_type(nt, &ot);
      tpu_type(wty, &wt);
      snprintf(wa, sizeof wa, "%s", tpu_tmp(em));
      tpu_line(em, "%s = %s %s : %s to %s", wa, ext, a, nt, wty);
      snprintf(wb, sizeof wb, "%s", tpu_tmp(em));
      tpu_line(em, "%s = %s %s : %s to %s", wb, ext, b, nt, wty);
      /* (u4 and u2 extended by zero are non-negative i32s, which the
       * signed predicates of i32 order as the unsigned ones would) */
      if (!tpu_compare(em, tpu_result_name(em, op, 0), op->opcode, wa, wb, &wt)) break;
      return;
    }
    if (!tpu_compare(em, tpu_result_name(em, op, 0), op->opcode, a, b, &ot)) break;
    return;
  }
  case TSR_FAM_CONVERT: {
    const tsr_value_t *x = op->operands[0];
    const char *a = tpu_name(em, x);
    const char *r = tpu_result_name(em, op, 0);
    if (op->opcode == TSR_OP_CONVERT) {
      tpu_convert(em, op, r, a, &x->type, rt);
      return;
    }
    if (op->opcode == TSR_OP_BITCAST) {
      char ft[TPU_TYPE_MAX];
      if (!strcmp(tpu_type(ft, &x->type), tpu_type(ty, rt))) {
        tpu_set_name(em, op->results[0], a);
        return;
      }
      tpu_line(em, "%s = arith.bitcast %s : %s to %s", r, a, ft, ty);
      return;
    }
    break;
  }
  case TSR_FAM_UNARY: case TSR_FAM_BINARY: {
    tsr_dtype_t d = rt->dtype;
    if (rt->kind == TSR_TYPE_VECTOR && !is_float(d) && !is_bool(d) && bits_of(d) <= 8) {
      /* libtpu: "Only vector<i16> and vector<i32> are supported" (i8, u8
       * and the sub-byte i4, u4, i2, u2 alike). */
      tpu_unimplemented(em, op, "TPU vector arithmetic takes 16- and 32-bit integers, not %s; "
                                "convert to i32 first", tsr_dtype_name(d));
      return;
    }
    const char *a = operand_as(em, op->operands[0], rt);
    const char *b = op->num_operands > 1 ? operand_as(em, op->operands[1], rt) : NULL;
    const char *name = tpu_spelling(op->opcode, d);
    bool f = is_float(d);
    if (is_f8(d)) {
      if (!tpu_spelling(op->opcode, TSR_DTYPE_F32)) {
        tpu_unimplemented(em, op, "TPU vectors of %s have no arithmetic, and this op has "
                                  "no one f32 form to compute it in; convert to f32 first",
                          tsr_dtype_name(d));
        return;
      }
      if (d == TSR_DTYPE_F8E4M3FN && (op->opcode == TSR_OP_MAX || op->opcode == TSR_OP_MIN)) {
        /* MLIR narrows truncf(maximumf(extf a, extf b)) back to an
         * f8E4M3FN maximumf, which libtpu cannot legalize (v5e, v6e, v7x;
         * f8E5M2's compiles). */
        tpu_unimplemented(em, op, "libtpu cannot take the %s of f8e4m3fn vectors (MLIR folds "
                                  "the f32 one back to f8e4m3fn); convert to f32 first",
                          tsr_op_table[op->opcode].mnemonic);
        return;
      }
      widened_f8(em, op, a, b, rt);
      return;
    }
    if (op->opcode == TSR_OP_NOT) { /* xor with all ones */
      const char *ones = tpu_constant(em, rt, 0.0, -1);
      tpu_line(em, "%s = arith.xori %s, %s : %s", tpu_result_name(em, op, 0), a, ones,
               tpu_type(ty, rt));
      return;
    }
    if (op->opcode == TSR_OP_NEG && !f) { /* 0 - a */
      const char *z = tpu_constant(em, rt, 0.0, 0);
      tpu_line(em, "%s = arith.subi %s, %s : %s", tpu_result_name(em, op, 0), z, a,
               tpu_type(ty, rt));
      return;
    }
    if (op->opcode == TSR_OP_LOGISTIC) { /* 1 / (1 + exp(-a)), as jax.nn.sigmoid */
      const char *n = tpu_tmp(em);
      tpu_line(em, "%s = arith.negf %s : %s", n, a, tpu_type(ty, rt));
      const char *e = tpu_tmp(em);
      tpu_line(em, "%s = math.exp %s : %s", e, n, ty);
      const char *one = tpu_constant(em, rt, 1.0, 1);
      const char *s = tpu_tmp(em);
      tpu_line(em, "%s = arith.addf %s, %s : %s", s, one, e, ty);
      tpu_line(em, "%s = arith.divf %s, %s : %s", tpu_result_name(em, op, 0), one, s, ty);
      return;
    }
    if (op->opcode == TSR_OP_SIGN) { /* a > 0 ? 1 : a < 0 ? -1 : a (keeps 0 and NaN) */
      const char *z = tpu_constant(em, rt, 0.0, 0);
      const char *one = tpu_constant(em, rt, 1.0, 1);
      const char *mone = tpu_constant(em, rt, -1.0, -1);
      const char *gt = tpu_tmp(em);
      if (!tpu_compare(em, gt, TSR_OP_GT, a, z, rt)) break;
      const char *lt = tpu_tmp(em);
      if (!tpu_compare(em, lt, TSR_OP_LT, a, z, rt)) break;
      const char *m = tpu_tmp(em);
      tpu_select(em, m, lt, rt->kind == TSR_TYPE_VECTOR, mone, a, rt);
      tpu_select(em, tpu_result_name(em, op, 0), gt, rt->kind == TSR_TYPE_VECTOR, one, m, rt);
      return;
    }
    if ((op->opcode == TSR_OP_MAX || op->opcode == TSR_OP_MIN) && is_uint(d) &&
        d == TSR_DTYPE_U32) {
      /* libtpu cannot legalize arith.maxui/minui (and MLIR folds a
       * compare-and-select into them): flip the sign bit around the
       * signed op (the op's i32 spelling), which orders the flipped values
       * as unsigned ones. */
      const char *sign = tpu_constant(em, rt, 0.0, -2147483647ll - 1);
      char fa[32], fb[32], m[32];
      snprintf(fa, sizeof fa, "%s", tpu_tmp(em));
      tpu_line(em, "%s = arith.xori %s, %s : %s", fa, a, sign, tpu_type(ty, rt));
      snprintf(fb, sizeof fb, "%s", tpu_tmp(em));
      tpu_line(em, "%s = arith.xori %s, %s : %s", fb, b, sign, ty);
      snprintf(m, sizeof m, "%s", tpu_tmp(em));
      tpu_line(em, "%s = %s %s, %s : %s", m, tpu_spelling(op->opcode, TSR_DTYPE_I32), fa, fb, ty);
      tpu_line(em, "%s = arith.xori %s, %s : %s", tpu_result_name(em, op, 0), m, sign, ty);
      return;
    }
    if (op->opcode == TSR_OP_NEXTAFTER) {
      nextafter_f32(em, op, a, b, rt);
      return;
    }
    if (rt->kind == TSR_TYPE_VECTOR && bits_of(d) == 16 &&
        ((f && op->opcode == TSR_OP_REM) ||
         (!f && (op->opcode == TSR_OP_REM || op->opcode == TSR_OP_DIV ||
                 op->opcode == TSR_OP_MAX || op->opcode == TSR_OP_MIN ||
                 op->opcode == TSR_OP_CLZ || op->opcode == TSR_OP_POPCOUNT)))) {
      widened_16(em, op, a, b, rt);
      return;
    }
    if (!name) break;
    if (b)
      tpu_line(em, "%s = %s %s, %s : %s", tpu_result_name(em, op, 0), name, a, b, tpu_type(ty, rt));
    else
      tpu_line(em, "%s = %s %s : %s", tpu_result_name(em, op, 0), name, a, tpu_type(ty, rt));
    return;
  }
  default:
    break;
  }
  tpu_unimplemented(em, op, "no TPU form for %s", tsr_dtype_name(rt->dtype));
}
