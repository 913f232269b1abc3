/* The verifier's type rules: one per TSR_RULE_* of ir/ops.def (those of
 * load/store, DMA and semaphore ops are in verify_view.c), and
 * vf_apply_rule, which picks an op's rule (ir/verify_internal.h). */
#include <float.h>
#include <math.h>

#include "ir/verify_internal.h"

/* ---- Per-op type rules -------------------------------------------------------------
 * Each runs only when the arity matches the op table, every operand is
 * visible and well typed, refs/semaphores appear only where allowed, and
 * every result is a well-typed scalar or block. */
/* Operands [first, first + n) mixed elementwise: every block has the shape
 * of the first block, scalars broadcast, and operand first+i has dtype
 * dtypes[i]. *out_shape: the first block operand's type, NULL if none. */
static bool elementwise_operands(verifier_t *v, const tsr_op_t *op, uint32_t first,
                                 uint32_t n, const uint8_t *dtypes,
                                 const tsr_type_t **out_shape) {
  const tsr_type_t *shape = NULL;
  for (uint32_t i = first; i < first + n && !shape; i++)
    if (op->operands[i]->type.kind == TSR_TYPE_VECTOR) shape = &op->operands[i]->type;
  bool ok = true;
  for (uint32_t i = first; i < first + n; i++) {
    const tsr_type_t *t = &op->operands[i]->type;
    tsr_type_t want = same_shape(t->kind == TSR_TYPE_VECTOR ? shape : NULL,
                                 dtypes[i - first]);
    ok &= vf_expect_operand(v, op, i, &want, "");
  }
  *out_shape = shape;
  return ok;
}

static void rule_elementwise(verifier_t *v, const tsr_op_t *op, uint32_t flags,
                             bool compare) {
  if (!vf_expect_class(v, op, 0, flags)) return;
  uint8_t dtypes[2] = {op->operands[0]->type.dtype, op->operands[0]->type.dtype};
  const tsr_type_t *shape;
  if (!elementwise_operands(v, op, 0, op->num_operands, dtypes, &shape)) return;
  tsr_type_t want = same_shape(shape, compare ? TSR_DTYPE_I1 : dtypes[0]);
  vf_expect_result(v, op, 0, &want, "");
}

static void rule_select(verifier_t *v, const tsr_op_t *op) {
  uint8_t dtypes[3] = {TSR_DTYPE_I1, op->operands[1]->type.dtype,
                       op->operands[1]->type.dtype};
  const tsr_type_t *shape;
  if (!elementwise_operands(v, op, 0, 3, dtypes, &shape)) return;
  tsr_type_t want = same_shape(shape, dtypes[1]);
  vf_expect_result(v, op, 0, &want, "");
}

/* convert and bitcast: the result has the operand's shape. */
static void rule_cast(verifier_t *v, const tsr_op_t *op, bool bitcast) {
  const tsr_type_t *a = &op->operands[0]->type, *r = &op->results[0]->type;
  const char *m = mnemonic(op);
  tsr_type_t want = same_shape(a, r->dtype);
  if (!tsr_type_equal(r, &want)) {
    vf_report(v, op->loc, "'%s' result #1 (%%%s): expected the shape of operand #1 (%s), found %s",
              m, vname(op->results[0]), TYPE_TEXT(a), TYPE_TEXT(r));
    return;
  }
  if (!bitcast) return;
  if (a->dtype == TSR_DTYPE_I1 || r->dtype == TSR_DTYPE_I1) {
    vf_report(v, op->loc, "'%s' cannot reinterpret i1 (found %s to %s; use convert)", m,
              TYPE_TEXT(a), TYPE_TEXT(r));
    return;
  }
  /* by the value's width: i4 and i8 both take a byte of a host array, but
   * reinterpreting one as the other has no meaning */
  uint32_t as = tsr_dtype_bits((tsr_dtype_t)a->dtype), rs = tsr_dtype_bits((tsr_dtype_t)r->dtype);
  if (as != rs)
    vf_report(v, op->loc,
              "'%s' result #1 (%%%s): expected a %u-bit dtype (as operand #1, %s), found %s",
              m, vname(op->results[0]), as, TYPE_TEXT(a), TYPE_TEXT(r));
}

static void rule_iota(verifier_t *v, const tsr_op_t *op) {
  const tsr_type_t *r = &op->results[0]->type;
  if (r->kind != TSR_TYPE_VECTOR || r->dtype == TSR_DTYPE_I1) {
    vf_report(v, op->loc,
              "'iota' result #1 (%%%s): expected a block of an integer or float dtype, found %s",
              vname(op->results[0]), TYPE_TEXT(r));
    return;
  }
  int64_t dim = op->ints[0];
  if (dim < 0 || dim >= r->rank)
    vf_report(v, op->loc, "'iota' dimension %lld is out of range for %s (rank %u)",
              (long long)dim, TYPE_TEXT(r), r->rank);
}

static void rule_broadcast(verifier_t *v, const tsr_op_t *op) {
  const tsr_type_t *a = &op->operands[0]->type, *r = &op->results[0]->type;
  const char *res = vname(op->results[0]);
  if (r->dtype != a->dtype) {
    vf_report(v, op->loc,
              "'broadcast' result #1 (%%%s): expected dtype %s (as operand #1), found %s",
              res, tsr_dtype_name((tsr_dtype_t)a->dtype), TYPE_TEXT(r));
    return;
  }
  if (a->kind == TSR_TYPE_SCALAR) return; /* a scalar broadcasts to anything */
  if (r->rank < a->rank) {
    vf_report(v, op->loc,
              "'broadcast' result #1 (%%%s): cannot broadcast operand #1 (%s) to %s: rank %u "
              "is smaller than %u",
              res, TYPE_TEXT(a), TYPE_TEXT(r), r->rank, a->rank);
    return;
  }
  uint32_t lead = r->rank - a->rank;
  for (uint32_t i = 0; i < a->rank; i++) {
    int64_t ad = a->dims[i], rd = r->dims[lead + i];
    if (ad != 1 && ad != rd) {
      vf_report(v, op->loc,
                "'broadcast' result #1 (%%%s): cannot broadcast operand #1 (%s) to %s: dim %u "
                "is %lld, expected 1 or %lld",
                res, TYPE_TEXT(a), TYPE_TEXT(r), i, (long long)ad, (long long)rd);
      return;
    }
  }
}

static void rule_reshape(verifier_t *v, const tsr_op_t *op) {
  const tsr_type_t *a = &op->operands[0]->type, *r = &op->results[0]->type;
  int64_t na = count_elements(a->dims, a->rank), nr = count_elements(r->dims, r->rank);
  if (r->dtype != a->dtype || na != nr)
    vf_report(v, op->loc,
              "'reshape' result #1 (%%%s): expected %lld elements of %s (as operand #1, %s), "
              "found %s",
              vname(op->results[0]), (long long)na, tsr_dtype_name((tsr_dtype_t)a->dtype),
              TYPE_TEXT(a), TYPE_TEXT(r));
}

static void rule_transpose(verifier_t *v, const tsr_op_t *op) {
  if (!vf_expect_block(v, op, 0)) return;
  const tsr_type_t *a = &op->operands[0]->type;
  if (op->num_ints != a->rank) {
    vf_report(v, op->loc, "'transpose' permutation has %u entries, expected %u (the rank of %s)",
              op->num_ints, a->rank, TYPE_TEXT(a));
    return;
  }
  bool seen[TSR_MAX_RANK] = {false};
  int64_t dims[TSR_MAX_RANK];
  for (uint32_t i = 0; i < a->rank; i++) {
    int64_t p = op->ints[i];
    if (p < 0 || p >= a->rank || seen[p]) {
      tbuf_t b = {.len = 0};
      vf_put_dims(&b, op->ints, op->num_ints, false);
      vf_report(v, op->loc, "'transpose' %s is not a permutation of 0..%u", b.s, a->rank - 1);
      return;
    }
    seen[p] = true;
    dims[i] = a->dims[p];
  }
  tsr_type_t want = tsr_type_vector((tsr_dtype_t)a->dtype, a->rank, dims);
  vf_expect_result(v, op, 0, &want, "");
}

static void rule_slice(verifier_t *v, const tsr_op_t *op) {
  if (!vf_expect_block(v, op, 0)) return;
  const tsr_value_t *a = op->operands[0];
  if (op->num_indices != a->type.rank) {
    vf_report(v, op->loc,
              "'slice' of %%%s: expected %u indices (one per dimension of %s), found %u",
              vname(a), a->type.rank, TYPE_TEXT(&a->type), op->num_indices);
    return;
  }
  tsr_type_t view;
  if (!vf_check_indices(v, op, vname(a), &a->type, 1, 1, false, &view)) return;
  char note[192];
  snprintf(note, sizeof note, " (the view of %%%s)", vname(a));
  vf_expect_result(v, op, 0, &view, note);
}

static void rule_concatenate(verifier_t *v, const tsr_op_t *op) {
  for (uint32_t i = 0; i < op->num_operands; i++)
    if (!vf_expect_block(v, op, i)) return;
  const tsr_type_t *first = &op->operands[0]->type;
  int64_t axis;
  if (!vf_expect_axis(v, op, first->rank, &axis)) return;
  int64_t dims[TSR_MAX_RANK];
  memcpy(dims, first->dims, sizeof dims);
  for (uint32_t i = 1; i < op->num_operands; i++) {
    const tsr_type_t *t = &op->operands[i]->type;
    if (t->dtype != first->dtype || t->rank != first->rank) {
      vf_report(v, op->loc,
                "'concatenate' operand #%u (%%%s): expected dtype %s and rank %u (as operand "
                "#1, %s), found %s",
                i + 1, vname(op->operands[i]), tsr_dtype_name((tsr_dtype_t)first->dtype),
                first->rank, TYPE_TEXT(first), TYPE_TEXT(t));
      return;
    }
    for (uint32_t d = 0; d < t->rank; d++) {
      if ((int64_t)d != axis && t->dims[d] != first->dims[d]) {
        vf_report(v, op->loc,
                  "'concatenate' operand #%u (%%%s): dim %u is %lld, expected %lld (as operand "
                  "#1; only axis %lld may differ)",
                  i + 1, vname(op->operands[i]), d, (long long)t->dims[d],
                  (long long)first->dims[d], (long long)axis);
        return;
      }
    }
    /* Each dim is <= 2^31, so the sum needs more than 2^32 operands to
     * overflow; the result's own size check then catches it. */
    if (__builtin_add_overflow(dims[axis], t->dims[axis], &dims[axis])) dims[axis] = INT64_MAX;
  }
  tsr_type_t want = tsr_type_vector((tsr_dtype_t)first->dtype, first->rank, dims);
  vf_expect_result(v, op, 0, &want, "");
}

static void rule_roll(verifier_t *v, const tsr_op_t *op) {
  if (!vf_expect_block(v, op, 0)) return;
  const tsr_type_t *a = &op->operands[0]->type;
  int64_t axis;
  if (!vf_expect_axis(v, op, a->rank, &axis)) return;
  tsr_type_t i32 = tsr_type_scalar(TSR_DTYPE_I32);
  if (!vf_expect_operand(v, op, 1, &i32, ", the shift")) return;
  if (op->num_ints == 3) { /* stride S stride_axis D */
    const int64_t stride = op->ints[1], sax = op->ints[2];
    if (stride < 0) {
      vf_report(v, op->loc, "'roll' stride %lld is negative", (long long)stride);
      return;
    }
    if (sax < 0 || sax >= (int64_t)a->rank || sax == axis) {
      vf_report(v, op->loc,
                "'roll' stride_axis %lld: expected an axis of the rank-%u operand other than "
                "the rolled axis %lld",
                (long long)sax, a->rank, (long long)axis);
      return;
    }
  }
  vf_expect_result(v, op, 0, a, " (the type of operand #1)");
}

/* gather's and scatter's operands #1 and #2: a block, an axis, and i32
 * indices of its rank whose dims are a's except along the axis. Sets *axis;
 * false (reported) if any is wrong. */
static bool take_indices_ok(verifier_t *v, const tsr_op_t *op, int64_t *axis) {
  if (!vf_expect_block(v, op, 0)) return false;
  const tsr_type_t *a = &op->operands[0]->type, *idx = &op->operands[1]->type;
  const char *name = tsr_op_table[op->opcode].mnemonic;
  if (!vf_expect_axis(v, op, a->rank, axis)) return false;
  if (idx->kind != TSR_TYPE_VECTOR || idx->dtype != TSR_DTYPE_I32 || idx->rank != a->rank) {
    vf_report(v, op->loc,
              "'%s' operand #2 (%%%s, the indices): expected an i32 block of rank %u, found %s",
              name, vname(op->operands[1]), a->rank, TYPE_TEXT(idx));
    return false;
  }
  for (uint32_t d = 0; d < a->rank; d++) {
    if ((int64_t)d != *axis && idx->dims[d] != a->dims[d]) {
      vf_report(v, op->loc,
                "'%s' operand #2 (%%%s, the indices): dim %u is %lld, expected %lld (as "
                "operand #1; only axis %lld may differ)",
                name, vname(op->operands[1]), d, (long long)idx->dims[d],
                (long long)a->dims[d], (long long)*axis);
      return false;
    }
  }
  return true;
}

static void rule_gather(verifier_t *v, const tsr_op_t *op) {
  int64_t axis;
  if (!take_indices_ok(v, op, &axis)) return;
  tsr_type_t want = same_shape(&op->operands[1]->type, op->operands[0]->type.dtype);
  vf_expect_result(v, op, 0, &want, " (operand #1's dtype, the indices' shape)");
}

/* scatter %a, %idx, %u axis N: gather's inverse; idx as gather's, u of
 * idx's shape and a's dtype, the result a's type. */
static void rule_scatter(verifier_t *v, const tsr_op_t *op) {
  int64_t axis;
  if (!take_indices_ok(v, op, &axis)) return;
  const tsr_type_t *a = &op->operands[0]->type;
  tsr_type_t upd = same_shape(&op->operands[1]->type, a->dtype);
  if (!vf_expect_operand(v, op, 2, &upd, ", the updates: operand #1's dtype, the indices' shape"))
    return;
  vf_expect_result(v, op, 0, a, " (the type of operand #1)");
}

/* sort: one block, sorted along the axis; its type. */
static void rule_sort(verifier_t *v, const tsr_op_t *op) {
  if (!vf_expect_block(v, op, 0)) return;
  const tsr_type_t *a = &op->operands[0]->type;
  int64_t axis;
  if (!vf_expect_axis(v, op, a->rank, &axis)) return;
  vf_expect_result(v, op, 0, a, " (the type of operand #1)");
}

/* argsort: keys of one shape (any dtypes); i32 positions of that shape. */
static void rule_argsort(verifier_t *v, const tsr_op_t *op) {
  for (uint32_t i = 0; i < op->num_operands; i++)
    if (!vf_expect_block(v, op, i)) return;
  const tsr_type_t *first = &op->operands[0]->type;
  int64_t axis;
  if (!vf_expect_axis(v, op, first->rank, &axis)) return;
  for (uint32_t i = 1; i < op->num_operands; i++) {
    const tsr_type_t *t = &op->operands[i]->type;
    bool same = t->rank == first->rank;
    for (uint32_t d = 0; same && d < t->rank; d++) same = t->dims[d] == first->dims[d];
    if (!same) {
      vf_report(v, op->loc,
                "'argsort' operand #%u (%%%s): expected the shape of operand #1 (%s), found %s",
                i + 1, vname(op->operands[i]), TYPE_TEXT(first), TYPE_TEXT(t));
      return;
    }
  }
  if (first->dims[axis] > INT32_MAX) {
    vf_report(v, op->loc, "'argsort' along axis %lld of %lld elements: positions must fit in i32",
              (long long)axis, (long long)first->dims[axis]);
    return;
  }
  tsr_type_t want = same_shape(first, TSR_DTYPE_I32);
  vf_expect_result(v, op, 0, &want, " (i32, the shape of the keys)");
}

/* The operand's type without the dims flagged in `drop` (a scalar if none
 * are left), with dtype `dtype`. */
static tsr_type_t drop_dims(const tsr_type_t *a, const bool *drop, uint32_t dtype) {
  int64_t dims[TSR_MAX_RANK];
  uint32_t rank = 0;
  for (uint32_t d = 0; d < a->rank; d++)
    if (!drop[d]) dims[rank++] = a->dims[d];
  return rank ? tsr_type_vector((tsr_dtype_t)dtype, rank, dims)
              : tsr_type_scalar((tsr_dtype_t)dtype);
}

static void rule_reduce(verifier_t *v, const tsr_op_t *op, uint32_t flags) {
  if (!vf_expect_block(v, op, 0) || !vf_expect_class(v, op, 0, flags)) return;
  const tsr_type_t *a = &op->operands[0]->type;
  if (op->num_ints == 0) {
    vf_report(v, op->loc, "'%s' needs at least one axis", mnemonic(op));
    return;
  }
  bool drop[TSR_MAX_RANK] = {false};
  bool ok = op->num_ints <= a->rank;
  for (uint32_t i = 0; ok && i < op->num_ints; i++) {
    int64_t axis = op->ints[i];
    ok = axis >= 0 && axis < a->rank && (i == 0 || axis > op->ints[i - 1]);
    if (ok) drop[axis] = true;
  }
  if (!ok) {
    tbuf_t b = {.len = 0};
    vf_put_dims(&b, op->ints, op->num_ints, false); /* bput truncates long lists */
    vf_report(v, op->loc, "'%s' axes %s must be sorted, unique and within 0..%u (the rank of %s)",
              mnemonic(op), b.s, a->rank - 1, TYPE_TEXT(a));
    return;
  }
  tsr_type_t want = drop_dims(a, drop, a->dtype);
  vf_expect_result(v, op, 0, &want, "");
}

static void rule_arg_reduce(verifier_t *v, const tsr_op_t *op, uint32_t flags) {
  if (!vf_expect_block(v, op, 0) || !vf_expect_class(v, op, 0, flags)) return;
  const tsr_type_t *a = &op->operands[0]->type;
  int64_t axis;
  if (!vf_expect_axis(v, op, a->rank, &axis)) return;
  bool drop[TSR_MAX_RANK] = {false};
  drop[axis] = true;
  tsr_type_t want = drop_dims(a, drop, TSR_DTYPE_I32);
  vf_expect_result(v, op, 0, &want, "");
}

static void rule_dot(verifier_t *v, const tsr_op_t *op) {
  const tsr_type_t *a = &op->operands[0]->type, *b = &op->operands[1]->type;
  for (uint32_t i = 0; i < 2; i++) {
    const tsr_type_t *t = &op->operands[i]->type;
    if (t->kind != TSR_TYPE_VECTOR || t->rank != 2) {
      vf_report(v, op->loc, "'dot' operand #%u (%%%s): expected a rank-2 block, found %s", i + 1,
                vname(op->operands[i]), TYPE_TEXT(t));
      return;
    }
  }
  if (!vf_expect_class(v, op, 0, TSR_F_FLT | TSR_F_INT)) return;
  if (b->dtype != a->dtype) {
    vf_report(v, op->loc, "'dot' operand #2 (%%%s): expected dtype %s (as operand #1), found %s",
              vname(op->operands[1]), tsr_dtype_name((tsr_dtype_t)a->dtype), TYPE_TEXT(b));
    return;
  }
  bool trans = op->flags & TSR_OPF_TRANSPOSE_RHS;
  uint32_t kdim = trans ? 1 : 0;
  if (b->dims[kdim] != a->dims[1]) {
    vf_report(v, op->loc,
              "'dot' operand #2 (%%%s): contracting dim %u is %lld, expected %lld (dim 1 of "
              "operand #1, %s)%s",
              vname(op->operands[1]), kdim, (long long)b->dims[kdim], (long long)a->dims[1],
              TYPE_TEXT(a), trans ? " with transpose_rhs" : "");
    return;
  }
  const tsr_type_t *r = &op->results[0]->type;
  int64_t mn[2] = {a->dims[0], b->dims[1 - kdim]};
  bool is_float = dclass(a->dtype) == TSR_CLASS_FLOAT;
  if (r->kind != TSR_TYPE_VECTOR || r->rank != 2 || r->dims[0] != mn[0] ||
      r->dims[1] != mn[1]) {
    vf_report(v, op->loc, "'dot' result #1 (%%%s): expected shape %s, found %s",
              vname(op->results[0]), DIMS_TEXT(mn, 2), TYPE_TEXT(r));
    return;
  }
  if (is_float ? dclass(r->dtype) != TSR_CLASS_FLOAT : r->dtype != TSR_DTYPE_I32) {
    vf_report(v, op->loc, "'dot' result #1 (%%%s): expected %s for %s operands, found %s",
              vname(op->results[0]), is_float ? "a float dtype" : "i32",
              is_float ? "float" : "integer", TYPE_TEXT(r));
    return;
  }
  if (op->num_operands == 3) vf_expect_operand(v, op, 2, r, ", the accumulator");
}

static void rule_grid_query(verifier_t *v, const tsr_op_t *op) {
  int64_t axis = op->ints[0];
  if (axis < 0 || axis >= v->kernel->grid_rank) {
    vf_report(v, op->loc, "'%s' axis %lld is out of range: the grid has rank %u", mnemonic(op),
              (long long)axis, v->kernel->grid_rank);
    return;
  }
  tsr_type_t i32 = tsr_type_scalar(TSR_DTYPE_I32);
  vf_expect_result(v, op, 0, &i32, "");
}

/* multiple_of: a scalar i32 or u32 (an index, an offset), the result of
 * its type, and a multiple in [1, 2^31 - 1] (what a 32-bit value can be a
 * positive multiple of, and what Mosaic's tpu.assume_multiple takes). */
static void rule_multiple_of(verifier_t *v, const tsr_op_t *op) {
  const tsr_type_t *a = &op->operands[0]->type;
  if (a->kind != TSR_TYPE_SCALAR || (a->dtype != TSR_DTYPE_I32 && a->dtype != TSR_DTYPE_U32)) {
    vf_report(v, op->loc, "'multiple_of' operand #1 (%%%s): expected a scalar i32 or u32, found %s",
              vname(op->operands[0]), TYPE_TEXT(a));
    return;
  }
  int64_t n = op->ints[0];
  if (n < 1 || n > INT32_MAX) {
    vf_report(v, op->loc, "'multiple_of' multiple %lld is out of range: expected 1 to %d",
              (long long)n, INT32_MAX);
    return;
  }
  vf_expect_result(v, op, 0, a, " (the type of operand #1)");
}

static void rule_const(verifier_t *v, const tsr_op_t *op) {
  const tsr_type_t *r = &op->results[0]->type;
  const char *dt = tsr_dtype_name((tsr_dtype_t)r->dtype);
  if (dclass(r->dtype) == TSR_CLASS_FLOAT) {
    double x = op->literal.f, max = r->dtype == TSR_DTYPE_F16        ? 65504.0
                                    : r->dtype == TSR_DTYPE_BF16     ? 0x1.fep127
                                    : r->dtype == TSR_DTYPE_F8E4M3FN ? 448.0
                                    : r->dtype == TSR_DTYPE_F8E5M2   ? 57344.0
                                                                     : (double)FLT_MAX;
    if (isfinite(x) && fabs(x) > max)
      vf_report(v, op->loc, "'const' literal %g does not fit in %s (largest finite value %g)", x,
                dt, max);
    return;
  }
  int64_t lo = 0, hi = 1; /* i1 */
  const uint32_t bits = tsr_dtype_bits((tsr_dtype_t)r->dtype);
  if (dclass(r->dtype) == TSR_CLASS_SINT) {
    lo = -((int64_t)1 << (bits - 1));
    hi = ((int64_t)1 << (bits - 1)) - 1;
  } else if (dclass(r->dtype) == TSR_CLASS_UINT) {
    hi = (int64_t)(((uint64_t)1 << bits) - 1);
  }
  int64_t x = op->literal.i;
  if (x < lo || x > hi)
    vf_report(v, op->loc, "'const' literal %lld does not fit in %s (%lld..%lld)", (long long)x,
              dt, (long long)lo, (long long)hi);
}
static void rule_print(verifier_t *v, const tsr_op_t *op) {
  uint32_t holes = 0;
  for (const char *p = op->text; p && *p; p++)
    if (p[0] == '{' && p[1] == '}') holes++, p++;
  if (holes != op->num_operands)
    vf_report(v, op->loc, "'print' format has %u {} placeholders but %u operands", holes,
              op->num_operands);
}
/* Runs the op's type rule (everything it reads has been checked). */
NOINLINE void vf_apply_rule(verifier_t *v, const tsr_op_t *op) {
  const tsr_op_info_t *info = &tsr_op_table[op->opcode];
  switch (info->rule) {
    case TSR_RULE_CONST: rule_const(v, op); break;
    case TSR_RULE_GRID_QUERY: rule_grid_query(v, op); break;
    case TSR_RULE_LOAD: vf_rule_memory(v, op, true); break;
    case TSR_RULE_STORE: vf_rule_memory(v, op, false); break;
    case TSR_RULE_ELEMWISE: rule_elementwise(v, op, info->flags, false); break;
    case TSR_RULE_COMPARE: rule_elementwise(v, op, info->flags, true); break;
    case TSR_RULE_SELECT: rule_select(v, op); break;
    case TSR_RULE_CONVERT: rule_cast(v, op, false); break;
    case TSR_RULE_BITCAST: rule_cast(v, op, true); break;
    case TSR_RULE_IOTA: rule_iota(v, op); break;
    case TSR_RULE_BROADCAST: rule_broadcast(v, op); break;
    case TSR_RULE_RESHAPE: rule_reshape(v, op); break;
    case TSR_RULE_TRANSPOSE: rule_transpose(v, op); break;
    case TSR_RULE_SLICE: rule_slice(v, op); break;
    case TSR_RULE_CONCATENATE: rule_concatenate(v, op); break;
    case TSR_RULE_ROLL: rule_roll(v, op); break;
    case TSR_RULE_GATHER: rule_gather(v, op); break;
    case TSR_RULE_SCATTER: rule_scatter(v, op); break;
    case TSR_RULE_SORT: rule_sort(v, op); break;
    case TSR_RULE_ARGSORT: rule_argsort(v, op); break;
    case TSR_RULE_REDUCE: rule_reduce(v, op, info->flags); break;
    case TSR_RULE_ARG_REDUCE: rule_arg_reduce(v, op, info->flags); break;
    case TSR_RULE_DOT: rule_dot(v, op); break;
    case TSR_RULE_PRINT: rule_print(v, op); break;
    case TSR_RULE_ASSERT: {
      tsr_type_t i1 = tsr_type_scalar(TSR_DTYPE_I1);
      vf_expect_operand(v, op, 0, &i1, "");
      break;
    }
    case TSR_RULE_DMA: vf_rule_dma(v, op); break;
    case TSR_RULE_SEMAPHORE: vf_rule_semaphore(v, op); break;
    case TSR_RULE_MULTIPLE_OF: rule_multiple_of(v, op); break;
    case TSR_RULE_ID_QUERY: {
      tsr_type_t i32 = tsr_type_scalar(TSR_DTYPE_I32);
      vf_expect_result(v, op, 0, &i32, "");
      break;
    }
    /* Control ops: verify_control; terminators: verify_region; reserved
     * ops (TSR_F_RESERVED) never get here. */
    case TSR_RULE_FOR: case TSR_RULE_WHILE: case TSR_RULE_IF: case TSR_RULE_SCOPED:
    case TSR_RULE_YIELD: case TSR_RULE_CONDITION: case TSR_RULE_RESERVED:
      break;
  }
}
