/* Shapes, reductions and dot for the TPU (tpu/emit_internal.h): iota,
 * broadcast, reshape, transpose, slice, concatenate, roll
 * (tpu.dynamic_rotate), gather (tpu.dynamic_gather), the reductions
 * (vector.multi_reduction, tpu.reduce_index, of the kinds their rows of
 * ir/ops_tpu.def name) and dot (tpu.matmul). sort and argsort are refused
 * by their rows. */
#include <stdio.h>

#include "tpu/emit_internal.h"

/* ---- Shapes -------------------------------------------------------------------- */

/* Makes `v` (already named) another name for `alias` (no op emitted). */
static void alias_value(tpu_emitter_t *em, const tsr_value_t *v, const tsr_value_t *alias) {
  tpu_set_name(em, v, tpu_name(em, alias));
}

void tpu_op_iota(tpu_emitter_t *em, const tsr_op_t *op) {
  const tsr_type_t *rt = &op->results[0]->type;
  tsr_type_t it = with_dtype(rt, TSR_DTYPE_I32);
  char ty[TPU_TYPE_MAX];
  if (rt->rank == 1) {
    int64_t d2[2];
    tpu_at_least_2d(rt, d2);
    const char *t2 = tpu_tmp(em);
    tpu_line(em, "%s = tpu.iota {dimensions = array<i32: 1>} : %s", t2,
             tpu_vector(ty, TSR_DTYPE_I32, 2, d2));
    const char *flat = tpu_reshape_to(em, t2, TSR_DTYPE_I32, 2, d2, 1, rt->dims);
    if (rt->dtype == TSR_DTYPE_I32 || rt->dtype == TSR_DTYPE_U32) {
      tpu_set_name(em, op->results[0], flat);
      return;
    }
    char fn[32];
    snprintf(fn, sizeof fn, "%s", flat);
    tpu_convert(em, op, tpu_result_name(em, op, 0), fn, &it, rt);
    return;
  }
  if (rt->dtype == TSR_DTYPE_I32 || rt->dtype == TSR_DTYPE_U32) {
    tpu_line(em, "%s = tpu.iota {dimensions = array<i32: %lld>} : %s", tpu_result_name(em, op, 0),
             (long long)op->ints[0], tpu_type(ty, rt));
    return;
  }
  const char *t = tpu_tmp(em);
  tpu_line(em, "%s = tpu.iota {dimensions = array<i32: %lld>} : %s", t, (long long)op->ints[0],
           tpu_type(ty, &it));
  tpu_convert(em, op, tpu_result_name(em, op, 0), t, &it, rt);
}

void tpu_op_broadcast(tpu_emitter_t *em, const tsr_op_t *op) {
  const tsr_value_t *x = op->operands[0];
  const tsr_type_t *rt = &op->results[0]->type;
  char a[TPU_TYPE_MAX], b[TPU_TYPE_MAX];
  if (tsr_type_equal(&x->type, rt)) {
    alias_value(em, op->results[0], x);
    return;
  }
  if (is_bool(rt->dtype)) { /* see tpu_bits_i32 */
    tsr_type_t xt = with_dtype(&x->type, TSR_DTYPE_I32), wt = with_dtype(rt, TSR_DTYPE_I32);
    char xi[32], w[32];
    if (x->type.kind == TSR_TYPE_VECTOR) {
      snprintf(xi, sizeof xi, "%s", tpu_bits_i32(em, tpu_name(em, x), &x->type));
    } else {
      snprintf(xi, sizeof xi, "%s", tpu_tmp(em));
      tpu_line(em, "%s = arith.extui %s : i1 to i32", xi, tpu_name(em, x));
    }
    snprintf(w, sizeof w, "%s", tpu_tmp(em));
    tpu_line(em, "%s = vector.broadcast %s : %s to %s", w, xi, tpu_type(a, &xt), tpu_type(b, &wt));
    tpu_bits_i1(em, tpu_result_name(em, op, 0), w, rt);
    return;
  }
  tpu_line(em, "%s = vector.broadcast %s : %s to %s", tpu_result_name(em, op, 0), tpu_name(em, x),
           tpu_type(a, &x->type), tpu_type(b, rt));
}

void tpu_op_reshape(tpu_emitter_t *em, const tsr_op_t *op) {
  const tsr_value_t *x = op->operands[0];
  const tsr_type_t *rt = &op->results[0]->type;
  int64_t fd[TSR_MAX_RANK], td[TSR_MAX_RANK];
  uint32_t fr = tpu_value_dims(&x->type, fd), tr = tpu_value_dims(rt, td);
  const char *r = tpu_reshape_to(em, tpu_name(em, x), rt->dtype, fr, fd, tr, td);
  tpu_set_name(em, op->results[0], r);
}

void tpu_op_transpose(tpu_emitter_t *em, const tsr_op_t *op) {
  const tsr_value_t *x = op->operands[0];
  char a[TPU_TYPE_MAX], b[TPU_TYPE_MAX], perm[128] = "";
  size_t at = 0;
  for (uint32_t i = 0; i < op->num_ints && at < sizeof perm; i++)
    at += (size_t)snprintf(perm + at, sizeof perm - at, "%s%lld", i ? ", " : "",
                           (long long)op->ints[i]);
  if (is_bool(x->type.dtype)) {
    /* libtpu cannot relayout i1 blocks ("changeBitwidth when src bitwidth
     * and dst bitwidth differs too much"): transpose them as i32. */
    const tsr_type_t *rt = &op->results[0]->type;
    tsr_type_t xi = with_dtype(&x->type, TSR_DTYPE_I32), ri = with_dtype(rt, TSR_DTYPE_I32);
    char bits[32], tr[32];
    snprintf(bits, sizeof bits, "%s", tpu_tmp(em));
    tpu_line(em, "%s = arith.extui %s : %s to %s", bits, tpu_name(em, x), tpu_type(a, &x->type),
             tpu_type(b, &xi));
    snprintf(tr, sizeof tr, "%s", tpu_tmp(em));
    tpu_line(em, "%s = vector.transpose %s, [%s] : %s to %s", tr, bits, perm, b,
             tpu_type(a, &ri));
    const char *z = tpu_constant(em, &ri, 0.0, 0);
    tpu_line(em, "%s = arith.cmpi ne, %s, %s : %s", tpu_result_name(em, op, 0), tr, z, a);
    return;
  }
  tpu_line(em, "%s = vector.transpose %s, [%s] : %s to %s", tpu_result_name(em, op, 0),
           tpu_name(em, x), perm, tpu_type(a, &x->type), tpu_type(b, &op->results[0]->type));
}

void tpu_op_slice(tpu_emitter_t *em, const tsr_op_t *op) {
  const tsr_value_t *x = op->operands[0];
  const tsr_type_t *xt = &x->type;
  char offs[256] = "", sizes[256] = "", strides[256] = "", a[TPU_TYPE_MAX], b[TPU_TYPE_MAX];
  int64_t view[TSR_MAX_RANK];
  size_t ao = 0, as = 0, at = 0;
  for (uint32_t i = 0; i < op->num_indices; i++) {
    const tsr_index_t *ix = &op->indices[i];
    int64_t start = ix->kind == TSR_INDEX_FULL ? 0 : ix->start;
    int64_t size = tsr_index_extent(ix, xt->dims[i]);
    int64_t stride = ix->kind == TSR_INDEX_SLICE || ix->kind == TSR_INDEX_DS ? ix->stride : 1;
    if (stride != 1) {
      tpu_unimplemented(em, op, "strided slices are not emitted yet");
      return;
    }
    view[i] = size;
    ao += (size_t)snprintf(offs + ao, sizeof offs - ao, "%s%lld", i ? ", " : "", (long long)start);
    as += (size_t)snprintf(sizes + as, sizeof sizes - as, "%s%lld", i ? ", " : "", (long long)size);
    at += (size_t)snprintf(strides + at, sizeof strides - at, "%s1", i ? ", " : "");
  }
  /* i1 as i32 (see tpu_bits_i32): v6e cannot slice a 1-D mask of a bf16
   * compare from lane 128 on ("Input offsets outside of the first tile") */
  bool bits = is_bool(xt->dtype);
  tsr_type_t wt = with_dtype(xt, TSR_DTYPE_I32);
  const char *src = bits ? tpu_bits_i32(em, tpu_name(em, x), xt) : tpu_name(em, x);
  const char *t = tpu_tmp(em);
  tpu_line(em,
           "%s = \"vector.extract_strided_slice\"(%s) <{offsets = [%s], sizes = [%s], strides = "
           "[%s]}> : (%s) -> %s",
           t, src, offs, sizes, strides, tpu_type(a, bits ? &wt : xt),
           tpu_vector(b, bits ? TSR_DTYPE_I32 : xt->dtype, xt->rank, view));
  int64_t rd[TSR_MAX_RANK];
  uint32_t rr = tpu_value_dims(&op->results[0]->type, rd);
  if (bits) {
    char wn[32], r[512];
    snprintf(wn, sizeof wn, "%s", tpu_reshape_to(em, t, TSR_DTYPE_I32, xt->rank, view, rr, rd));
    tsr_type_t rt = op->results[0]->type;
    if (rt.kind == TSR_TYPE_VECTOR) {
      snprintf(r, sizeof r, "%s", tpu_result_name(em, op, 0));
      tpu_bits_i1(em, r, wn, &rt);
    } else { /* a point slice: the element */
      snprintf(r, sizeof r, "%s", tpu_result_name(em, op, 0));
      const char *z = tpu_i32_const(em, 0);
      tpu_line(em, "%s = arith.cmpi ne, %s, %s : i32", r, wn, z);
    }
    return;
  }
  tpu_set_name(em, op->results[0], tpu_reshape_to(em, t, xt->dtype, xt->rank, view, rr, rd));
}

void tpu_op_concatenate(tpu_emitter_t *em, const tsr_op_t *op) {
  tsr_strbuf_t args, types;
  tsr_strbuf_initialize(&args);
  tsr_strbuf_initialize(&types);
  char ty[TPU_TYPE_MAX];
  const tsr_type_t *rt = &op->results[0]->type;
  bool bits = is_bool(rt->dtype); /* see tpu_bits_i32 */
  for (uint32_t i = 0; i < op->num_operands; i++) {
    const tsr_type_t *t = &op->operands[i]->type;
    tsr_type_t wt = with_dtype(t, TSR_DTYPE_I32);
    tsr_strbuf_printf(&args, "%s%s", i ? ", " : "",
                      bits ? tpu_bits_i32(em, tpu_name(em, op->operands[i]), t)
                           : tpu_name(em, op->operands[i]));
    tsr_strbuf_printf(&types, "%s%s", i ? ", " : "", tpu_type(ty, bits ? &wt : t));
  }
  tsr_type_t wr = with_dtype(rt, TSR_DTYPE_I32);
  const char *w = bits ? tpu_tmp(em) : tpu_result_name(em, op, 0);
  if (args.failed || types.failed) tpu_fail(em, TSR_OOM());
  else
    tpu_line(em, "%s = \"tpu.concatenate\"(%s) <{dimension = %lld : i32}> : (%s) -> %s", w,
             SB(args), (long long)op->ints[0], SB(types), tpu_type(ty, bits ? &wr : rt));
  if (bits && TPU_OK(em)) tpu_bits_i1(em, tpu_result_name(em, op, 0), w, rt);
  tsr_strbuf_deinitialize(&args);
  tsr_strbuf_deinitialize(&types);
}

void tpu_op_roll(tpu_emitter_t *em, const tsr_op_t *op) {
  const tsr_value_t *x = op->operands[0], *shift = op->operands[1];
  int64_t axis = op->ints[0], n = x->type.dims[axis];
  char ty[TPU_TYPE_MAX];
  /* tessera's shift may be negative or exceed n; tpu.dynamic_rotate is
   * jnp.roll for 0 <= shift < n: ((shift % n) + n) % n. */
  const char *cn = tpu_i32_const(em, n);
  const char *m1 = tpu_tmp(em);
  tpu_line(em, "%s = arith.remsi %s, %s : i32", m1, tpu_name(em, shift), cn);
  const char *p = tpu_tmp(em);
  tpu_line(em, "%s = arith.addi %s, %s : i32", p, m1, cn);
  const char *amt = tpu_tmp(em);
  tpu_line(em, "%s = arith.remsi %s, %s : i32", amt, p, cn);
  char amt_name[32], src[512];
  snprintf(amt_name, sizeof amt_name, "%s", amt);
  /* i1 blocks are rotated as i32 (libtpu: "changeBitwidth when src
   * bitwidth and dst bitwidth differs too much"; see tpu_bits_i32). */
  bool bits = is_bool(x->type.dtype);
  tsr_type_t xt = with_dtype(&x->type, bits ? TSR_DTYPE_I32 : x->type.dtype);
  snprintf(src, sizeof src, "%s",
           bits ? tpu_bits_i32(em, tpu_name(em, x), &x->type) : tpu_name(em, x));
  char rotated[512];
  if (x->type.rank == 1) { /* rotated as a (1, n) block (tpu_at_least_2d) */
    char flat[32];
    int64_t d2[2];
    tpu_at_least_2d(&x->type, d2);
    const char *s2 = tpu_reshape_to(em, src, xt.dtype, 1, xt.dims, 2, d2);
    char s2n[512];
    snprintf(s2n, sizeof s2n, "%s", s2);
    tpu_vector(ty, xt.dtype, 2, d2);
    snprintf(flat, sizeof flat, "%s", tpu_tmp(em));
    tpu_line(em, "%s = \"tpu.dynamic_rotate\"(%s, %s) <{dimension = 1 : si32}> : (%s, i32) -> %s",
             flat, s2n, amt_name, ty, ty);
    snprintf(rotated, sizeof rotated, "%s", tpu_reshape_to(em, flat, xt.dtype, 2, d2, 1, xt.dims));
  } else {
    snprintf(rotated, sizeof rotated, "%s", bits ? tpu_tmp(em) : tpu_result_name(em, op, 0));
    tpu_type(ty, &xt);
    /* A stride (rank >= 2 only: its axis differs from the rolled one):
     * Mosaic's stride and stride_dimension, pltpu.roll's own lowering. */
    char stride[96] = "";
    if (op->num_ints == 3)
      snprintf(stride, sizeof stride, ", stride = %lld : si32, stride_dimension = %lld : si32",
               (long long)op->ints[1], (long long)op->ints[2]);
    tpu_line(em,
             "%s = \"tpu.dynamic_rotate\"(%s, %s) <{dimension = %lld : si32%s}> : (%s, i32) -> %s",
             rotated, src, amt_name, (long long)axis, stride, ty, ty);
    if (!bits) return;
  }
  if (bits)
    tpu_bits_i1(em, tpu_result_name(em, op, 0), rotated, &x->type);
  else
    tpu_set_name(em, op->results[0], rotated);
}

void tpu_op_gather(tpu_emitter_t *em, const tsr_op_t *op) {
  const tsr_value_t *x = op->operands[0], *idx = op->operands[1];
  int64_t axis = op->ints[0];
  char a[TPU_TYPE_MAX], b[TPU_TYPE_MAX], c[TPU_TYPE_MAX];
  if (idx->type.dtype != TSR_DTYPE_I32) {
    tpu_unimplemented(em, op, "gather indices must be i32 on TPU");
    return;
  }
  if (axis + 2 < (int64_t)x->type.rank) {
    tpu_unimplemented(em, op, "Mosaic gathers along the last two dims only (libtpu: "
                              "\"DynamicGatherOp only implemented for last two dimensions\"), "
                              "not dim %lld of a rank-%u block", (long long)axis, x->type.rank);
    return;
  }
  /* Mosaic gathers within one vreg along the gathered dim (libtpu: "Not
   * implemented: Multiple source vregs along gather dimension"): at most
   * 128 lanes along the last dim, 8 sublanes of 32 bits (the data is
   * gathered as 32 bits) along the one before. */
  int64_t along = x->type.dims[axis], most = axis + 1 == (int64_t)x->type.rank ? 128 : 8;
  if (along > most) {
    tpu_unimplemented(em, op, "Mosaic gathers within one vreg (libtpu: \"Multiple source vregs "
                              "along gather dimension\"): dim %lld has %lld elements, more than "
                              "%lld", (long long)axis, (long long)along, (long long)most);
    return;
  }
  /* A 1-D gather is a (1, n) one (tpu_at_least_2d; libtpu: "Invalid input
   * layout" for 1-D). */
  bool flat = x->type.rank == 1;
  tsr_type_t xt = x->type, it = idx->type;
  char xs[512], is[512];
  snprintf(xs, sizeof xs, "%s", tpu_name(em, x));
  snprintf(is, sizeof is, "%s", tpu_name(em, idx));
  if (flat) {
    xt.rank = it.rank = tpu_at_least_2d(&x->type, xt.dims);
    memcpy(it.dims, xt.dims, sizeof xt.dims);
    snprintf(xs, sizeof xs, "%s", tpu_reshape_to(em, xs, xt.dtype, 1, x->type.dims, 2, xt.dims));
    snprintf(is, sizeof is, "%s", tpu_reshape_to(em, is, it.dtype, 1, idx->type.dims, 2, it.dims));
    axis = 1;
  }
  tpu_type(a, &xt);
  tpu_type(b, &it);
  /* As Pallas's take_along_axis: negative indices count from the end. */
  char z[32], n[32], neg[32], up[32], fixed[32];
  snprintf(z, sizeof z, "%s", tpu_constant(em, &it, 0.0, 0));
  snprintf(n, sizeof n, "%s", tpu_constant(em, &it, 0.0, xt.dims[axis]));
  snprintf(neg, sizeof neg, "%s", tpu_tmp(em));
  tpu_line(em, "%s = arith.cmpi slt, %s, %s : %s", neg, is, z, b);
  snprintf(up, sizeof up, "%s", tpu_tmp(em));
  tpu_line(em, "%s = arith.addi %s, %s : %s", up, is, n, b);
  snprintf(fixed, sizeof fixed, "%s", tpu_tmp(em));
  tsr_type_t ct = with_dtype(&it, TSR_DTYPE_I1);
  tpu_line(em, "%s = arith.select %s, %s, %s : %s, %s", fixed, neg, up, is, tpu_type(c, &ct), b);
  tsr_dtype_t d = xt.dtype;
  char g[512];
  snprintf(g, sizeof g, "%s", flat ? tpu_tmp(em) : tpu_result_name(em, op, 0));
  if (bits_of(d) == 32) {
    tpu_line(em, "%s = tpu.dynamic_gather %s[%s] in [%lld] : %s, %s -> %s", g, xs, fixed,
             (long long)axis, a, b, a);
  } else {
    /* The data must have the indices' width ("Gather indices and result
     * have different bitwidths"; i1: "Only 8-, 16- or 32-bit gathers"): it
     * is gathered widened to 32 bits and narrowed back, the same values. */
    char wide[32], wg[32], wt_s[TPU_TYPE_MAX];
    tsr_type_t wt = with_dtype(&xt, is_float(d) ? TSR_DTYPE_F32 : TSR_DTYPE_I32);
    tpu_type(wt_s, &wt);
    if (is_bool(d)) {
      snprintf(wide, sizeof wide, "%s", tpu_bits_i32(em, xs, &xt));
    } else {
      snprintf(wide, sizeof wide, "%s", tpu_tmp(em));
      tpu_line(em, "%s = %s %s : %s to %s", wide,
               is_float(d) ? "arith.extf" : is_uint(d) ? "arith.extui" : "arith.extsi", xs, a,
               wt_s);
    }
    snprintf(wg, sizeof wg, "%s", tpu_tmp(em));
    tpu_line(em, "%s = tpu.dynamic_gather %s[%s] in [%lld] : %s, %s -> %s", wg, wide, fixed,
             (long long)axis, wt_s, b, wt_s);
    if (is_bool(d))
      tpu_bits_i1(em, g, wg, &xt);
    else
      tpu_line(em, "%s = %s %s : %s to %s", g, is_float(d) ? "arith.truncf" : "arith.trunci", wg,
               wt_s, a);
  }
  if (flat) tpu_set_name(em, op->results[0], tpu_reshape_to(em, g, d, 2, xt.dims, 1, x->type.dims));
}

/* ---- Reductions and dot -------------------------------------------------------- */

/* vector.multi_reduction of `x` (named xs, of x's shape with dtype xd)
 * over op's axes into `r` of rt's shape with dtype xd. */
static void multi_reduction(tpu_emitter_t *em, const tsr_op_t *op, const char *r, const char *kind,
                            const char *xs, tsr_dtype_t xd, double fi, int64_t ii) {
  const tsr_value_t *x = op->operands[0];
  tsr_type_t xt = with_dtype(&x->type, xd), rt = with_dtype(&op->results[0]->type, xd);
  const char *acc = tpu_constant(em, &rt, fi, ii);
  char dims[128] = "", a[TPU_TYPE_MAX], b[TPU_TYPE_MAX];
  size_t at = 0;
  for (uint32_t i = 0; i < op->num_ints && at < sizeof dims; i++)
    at += (size_t)snprintf(dims + at, sizeof dims - at, "%s%lld", i ? ", " : "",
                           (long long)op->ints[i]);
  tpu_line(em, "%s = vector.multi_reduction <%s>, %s, %s [%s] : %s to %s", r, kind, xs, acc, dims,
           tpu_type(a, &xt), tpu_type(b, &rt));
}

/* The identity of reduction `opc`, its accumulator's first value, for
 * floats (*f) and 32-bit integers (*i). */
static void identity(tsr_opcode_t opc, double *f, int64_t *i) {
  const int64_t imin = -2147483647ll - 1, imax = 2147483647ll;
  bool max = opc == TSR_OP_REDUCE_MAX || opc == TSR_OP_REDUCE_OR;
  *f = opc == TSR_OP_REDUCE_SUM ? 0.0 : max ? -__builtin_inf() : __builtin_inf();
  *i = opc == TSR_OP_REDUCE_SUM ? 0 : max ? imin : imax;
}

/* Mosaic reduces with add, max and min only, and integers only as signed
 * 32-bit (libtpu: "Only sum, maxsi and minsi ... i32 reductions
 * supported"; "Unsupported reduction kind"): the kinds of the op's row of
 * ir/ops_tpu.def, for floats and 32-bit integers. i1 and/or become min/max
 * of the bits as i32; u32 max/min, which have no kind of their own, the
 * signed kind between sign-bit flips. */
void tpu_op_reduce(tpu_emitter_t *em, const tsr_op_t *op) {
  const tsr_value_t *x = op->operands[0];
  const tsr_type_t *rt = &op->results[0]->type;
  tsr_dtype_t d = x->type.dtype;
  bool f = is_float(d);
  double fi;
  int64_t ii;
  identity(op->opcode, &fi, &ii);
  char a[TPU_TYPE_MAX], b[TPU_TYPE_MAX];
  if (is_bool(d) && (op->opcode == TSR_OP_REDUCE_AND || op->opcode == TSR_OP_REDUCE_OR)) {
    bool is_and = op->opcode == TSR_OP_REDUCE_AND;
    tsr_type_t xi = with_dtype(&x->type, TSR_DTYPE_I32), ri = with_dtype(rt, TSR_DTYPE_I32);
    const char *bits = tpu_tmp(em);
    tpu_line(em, "%s = arith.extui %s : %s to %s", bits, tpu_name(em, x), tpu_type(a, &x->type),
             tpu_type(b, &xi));
    const char *red = tpu_tmp(em);
    char redname[32];
    snprintf(redname, sizeof redname, "%s", red);
    multi_reduction(em, op, redname, is_and ? "minsi" : "maxsi", bits, TSR_DTYPE_I32, 0, ii);
    const char *z = tpu_constant(em, &ri, 0.0, 0);
    tpu_line(em, "%s = arith.cmpi ne, %s, %s : %s", tpu_result_name(em, op, 0), redname, z,
             tpu_type(a, &ri));
    return;
  }
  const char *kind = tpu_spelling(op->opcode, d);
  if (kind && f && bits_of(d) == 16) {
    /* bf16 is reduced extended to f32 and rounded once, as tessera
     * defines reductions (docs/semantics.md); to a scalar, libtpu takes
     * no other ("Only 32-bit scalar vector.extracts supported"). */
    tsr_type_t xw = with_dtype(&x->type, TSR_DTYPE_F32);
    char wide[32], red[32];
    snprintf(wide, sizeof wide, "%s", tpu_tmp(em));
    tpu_line(em, "%s = arith.extf %s : %s to %s", wide, tpu_name(em, x), tpu_type(a, &x->type),
             tpu_type(b, &xw));
    snprintf(red, sizeof red, "%s", tpu_tmp(em));
    multi_reduction(em, op, red, kind, wide, TSR_DTYPE_F32, fi, 0);
    tsr_type_t rw = with_dtype(rt, TSR_DTYPE_F32);
    tpu_line(em, "%s = arith.truncf %s : %s to %s", tpu_result_name(em, op, 0), red,
             tpu_type(a, &rw), tpu_type(b, rt));
    return;
  }
  if (kind && (f || bits_of(d) == 32)) {
    multi_reduction(em, op, tpu_result_name(em, op, 0), kind, tpu_name(em, x), d, fi, ii);
    return;
  }
  const char *signed_kind = tpu_spelling(op->opcode, TSR_DTYPE_I32);
  if (!kind && signed_kind && d == TSR_DTYPE_U32) {
    const int64_t imin = -2147483647ll - 1;
    const char *sx = tpu_constant(em, &x->type, 0.0, imin);
    const char *flipped = tpu_tmp(em);
    char fl[32];
    snprintf(fl, sizeof fl, "%s", flipped);
    tpu_line(em, "%s = arith.xori %s, %s : %s", fl, tpu_name(em, x), sx, tpu_type(a, &x->type));
    const char *red = tpu_tmp(em);
    char rn[32];
    snprintf(rn, sizeof rn, "%s", red);
    multi_reduction(em, op, rn, signed_kind, fl, d, 0, ii);
    const char *sr = tpu_constant(em, rt, 0.0, imin);
    tpu_line(em, "%s = arith.xori %s, %s : %s", tpu_result_name(em, op, 0), rn, sr,
             tpu_type(a, rt));
    return;
  }
  tpu_unimplemented(em, op,
                    "Mosaic reduces f32/bf16 and i32 with add, max and min only (and i1 "
                    "with and/or); no %s reduction of %s",
                    tsr_op_table[op->opcode].mnemonic + 7, tsr_dtype_name(d));
}

/* argmax/argmin. Floats: tpu.reduce_index, of f32 (bf16 is extended
 * first, exactly: v5e has no bf16 index reduction, libtpu aborts with
 * "Operation not supported: kVectorMaxIndexReduceBf16", and a bf16 one
 * would give i16). Integers, which tpu.reduce_index does not take ("Only
 * f32 and bf16 input is supported"): the extreme value by
 * vector.multi_reduction over the values widened to i32 (u32 with the sign
 * bit flipped), then the least index holding it: the first, as tessera
 * defines it. A 1-D operand is reduced as a (1, n) block. */
void tpu_op_argreduce(tpu_emitter_t *em, const tsr_op_t *op) {
  const tsr_value_t *x = op->operands[0];
  bool max = op->opcode == TSR_OP_ARGMAX;
  if ((!max && op->opcode != TSR_OP_ARGMIN) || x->type.kind != TSR_TYPE_VECTOR) {
    tpu_unimplemented(em, op, "no TPU index reduction for this operand");
    return;
  }
  tsr_dtype_t d = x->type.dtype;
  int64_t dims[TSR_MAX_RANK], kept[TSR_MAX_RANK], ones[TSR_MAX_RANK];
  uint32_t rank = tpu_at_least_2d(&x->type, dims);
  int64_t axis = op->ints[0] + (x->type.rank == 1 ? 1 : 0);
  uint32_t nk = 0;
  for (uint32_t i = 0; i < rank; i++) {
    if ((int64_t)i != axis) kept[nk++] = dims[i];
    ones[i] = (int64_t)i == axis ? 1 : dims[i];
  }
  char a[TPU_TYPE_MAX], b[TPU_TYPE_MAX], c[TPU_TYPE_MAX], xs[512], idx[32];
  snprintf(xs, sizeof xs, "%s",
           tpu_reshape_to(em, tpu_name(em, x), d, x->type.rank, x->type.dims, rank, dims));
  tpu_vector(b, TSR_DTYPE_I32, nk, kept);
  if (is_float(d)) {
    tpu_vector(a, TSR_DTYPE_F32, rank, dims);
    if (d != TSR_DTYPE_F32) {
      const char *e = tpu_tmp(em);
      tpu_line(em, "%s = arith.extf %s : %s to %s", e, xs, tpu_vector(c, d, rank, dims), a);
      snprintf(xs, sizeof xs, "%s", e);
    }
    snprintf(idx, sizeof idx, "%s", tpu_tmp(em));
    tpu_line(em, "%s = tpu.reduce_index %s {axis = %lld : i32, kind = #tpu.reduction_kind<%s>} : "
                 "%s -> %s",
             idx, xs, (long long)axis, tpu_spelling(op->opcode, d), a, b);
  } else {
    const int64_t imin = -2147483647ll - 1, imax = 2147483647ll;
    tsr_type_t wt = {.kind = TSR_TYPE_VECTOR, .dtype = TSR_DTYPE_I32, .rank = rank};
    memcpy(wt.dims, dims, sizeof(int64_t) * rank);
    tpu_vector(a, TSR_DTYPE_I32, rank, dims);
    if (bits_of(d) < 32) {
      const char *e = tpu_tmp(em);
      tpu_line(em, "%s = %s %s : %s to %s", e, is_uint(d) ? "arith.extui" : "arith.extsi", xs,
               tpu_vector(c, d, rank, dims), a);
      snprintf(xs, sizeof xs, "%s", e);
    } else if (is_uint(d)) { /* orders u32 as signed i32 */
      char sign[32];
      snprintf(sign, sizeof sign, "%s", tpu_constant(em, &wt, 0.0, imin));
      const char *e = tpu_tmp(em);
      tpu_line(em, "%s = arith.xori %s, %s : %s", e, xs, sign, a);
      snprintf(xs, sizeof xs, "%s", e);
    }
    char acc[32], ext[32], eq[32], io[32], big[32], sel[32];
    snprintf(acc, sizeof acc, "%s", tpu_tmp(em));
    tpu_line(em, "%s = arith.constant dense<%lld> : %s", acc, (long long)(max ? imin : imax), b);
    snprintf(ext, sizeof ext, "%s", tpu_tmp(em));
    tpu_line(em, "%s = vector.multi_reduction <%s>, %s, %s [%lld] : %s to %s", ext,
             max ? "maxsi" : "minsi", xs, acc, (long long)axis, a, b);
    const char *k1 = tpu_reshape_to(em, ext, TSR_DTYPE_I32, nk, kept, rank, ones);
    const char *bc = tpu_tmp(em);
    tpu_line(em, "%s = vector.broadcast %s : %s to %s", bc, k1,
             tpu_vector(c, TSR_DTYPE_I32, rank, ones), a);
    snprintf(eq, sizeof eq, "%s", tpu_tmp(em));
    tpu_line(em, "%s = arith.cmpi eq, %s, %s : %s", eq, xs, bc, a);
    snprintf(io, sizeof io, "%s", tpu_tmp(em));
    tpu_line(em, "%s = tpu.iota {dimensions = array<i32: %lld>} : %s", io, (long long)axis, a);
    snprintf(big, sizeof big, "%s", tpu_constant(em, &wt, 0.0, imax));
    snprintf(sel, sizeof sel, "%s", tpu_tmp(em));
    tpu_line(em, "%s = arith.select %s, %s, %s : %s, %s", sel, eq, io, big,
             tpu_vector(c, TSR_DTYPE_I1, rank, dims), a);
    snprintf(acc, sizeof acc, "%s", tpu_tmp(em));
    tpu_line(em, "%s = arith.constant dense<%lld> : %s", acc, (long long)imax, b);
    snprintf(idx, sizeof idx, "%s", tpu_tmp(em));
    tpu_line(em, "%s = vector.multi_reduction <minsi>, %s, %s [%lld] : %s to %s", idx, sel, acc,
             (long long)axis, a, b);
  }
  int64_t rd[TSR_MAX_RANK];
  uint32_t rr = tpu_value_dims(&op->results[0]->type, rd);
  tpu_set_name(em, op->results[0], tpu_reshape_to(em, idx, TSR_DTYPE_I32, nk, kept, rr, rd));
}

void tpu_op_dot(tpu_emitter_t *em, const tsr_op_t *op) {
  const tsr_value_t *x = op->operands[0], *y = op->operands[1];
  const tsr_value_t *acc = op->num_operands > 2 ? op->operands[2] : NULL;
  const tsr_type_t *rt = &op->results[0]->type;
  if (x->type.rank != 2 || y->type.rank != 2) {
    tpu_unimplemented(em, op, "only 2-D dots are emitted");
    return;
  }
  tsr_dtype_t in = x->type.dtype;
  if (!is_float(in) && (bits_of(in) > 8 || bits_of(in) < 4)) {
    /* libtpu: "Bad lhs/rhs type: 'vector<..xi32>'"; 2-bit: "Unsupported
     * type for matmul" (v5e, v6e), "Integer inputs with bitwidth 2 are not
     * supported" (v7x). i4 x i4 -> i32 compiles on all three. */
    tpu_unimplemented(em, op, "the MXU multiplies floats and 8- and 4-bit integers, not %s",
                      tsr_dtype_name(in));
    return;
  }
  if (!is_float(rt->dtype) && bits_of(rt->dtype) != 32) {
    tpu_unimplemented(em, op, "an integer dot accumulates in 32 bits on TPU, not %s",
                      tsr_dtype_name(rt->dtype));
    return;
  }
  bool trans = (op->flags & TSR_OPF_TRANSPOSE_RHS) != 0;
  char a[TPU_TYPE_MAX], b[TPU_TYPE_MAX], c[TPU_TYPE_MAX], d[TPU_TYPE_MAX];
  /* The MXU accumulates in 32 bits ("Expected matmul acc to be 32-bit"):
   * a 16-bit float result is the f32 product rounded once, as Pallas's
   * preferred_element_type. As Pallas: a zero accumulator, then the add
   * of the tessera accumulator in the result dtype. */
  bool narrow = is_float(rt->dtype) && bits_of(rt->dtype) == 16;
  tsr_type_t mt = narrow ? with_dtype(rt, TSR_DTYPE_F32) : *rt;
  const char *zero = tpu_constant(em, &mt, 0.0, 0);
  char p[32];
  snprintf(p, sizeof p, "%s", (acc || narrow) ? tpu_tmp(em) : tpu_result_name(em, op, 0));
  tpu_line(
      em,
      "%s = tpu.matmul %s, %s, %s {dimension_numbers = #tpu.dot_dimension_numbers<[1], "
      "[%d], [0], [%d], [0, 0, 1, %d], [], []>, transpose_lhs_hint = false} : %s, %s, %s -> %s",
      p, tpu_name(em, x), tpu_name(em, y), zero, trans ? 1 : 0, trans ? 0 : 1, trans ? 0 : 1,
      tpu_type(a, &x->type), tpu_type(b, &y->type), tpu_type(c, &mt), c);
  tpu_type(d, rt);
  if (narrow) {
    const char *r = acc ? tpu_tmp(em) : tpu_result_name(em, op, 0);
    tpu_line(em, "%s = arith.truncf %s : %s to %s", r, p, c, d);
    snprintf(p, sizeof p, "%s", r);
  }
  if (acc)
    tpu_line(em, "%s = %s %s, %s : %s", tpu_result_name(em, op, 0),
             is_float(rt->dtype) ? "arith.addf" : "arith.addi", tpu_name(em, acc), p, d);
}
