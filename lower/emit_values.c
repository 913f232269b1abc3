/* The ops that make values without loops of their own: elementwise ops,
 * constants and iota become lazy expressions (computed inside their user's
 * loops, or into a buffer when they cannot be fused); broadcast, reshape and
 * slice become views or splats of their operand (layer 3, emit_internal.h). */
#include <stdio.h>

#include "lower/emit_dispatch.h"
#include "lower/emit_internal.h"

void em_op_elementwise(emitter_t *em, const tsr_op_t *op) {
  const tsr_value_t *r = op->results[0];
  const tsr_rule_t rule = tsr_op_table[op->opcode].rule;
  const tsr_value_t *val = op->operands[rule == TSR_RULE_SELECT ? 1 : 0];
  const tsr_dtype_t arg_dtype = (tsr_dtype_t)val->type.dtype, dtype = (tsr_dtype_t)r->type.dtype;
  if (r->type.kind == TSR_TYPE_SCALAR) {
    ssa_t a[3];
    for (uint32_t i = 0; i < op->num_operands && i < 3; i++) a[i] = em_scalar(em, op->operands[i]);
    ssa_t s;
    if (!em_elementwise_family(em, op->opcode, dtype, arg_dtype, a, 0, &s)) {
      em_unimplemented(em, op, "not an elementwise op");
      return;
    }
    em_set_scalar(em, r, s);
    return;
  }
  expr_t *e = ex_new(em, EX_OP, dtype, r->type.rank, r->type.dims);
  if (!e) return;
  e->op = op->opcode;
  e->origin = op;
  e->arg_dtype = arg_dtype;
  e->nargs = op->num_operands;
  for (uint32_t i = 0; i < op->num_operands && i < 3; i++) {
    e->args[i] = ex_of_value(em, op->operands[i], r->type.rank, r->type.dims);
    if (!e->args[i]) return;
  }
  if (em_lazy_ok(em, op, e))
    em_set_lazy(em, r, e);
  else
    em_set_mem(em, r, em_group_add(em, e));
}

void em_op_const(emitter_t *em, const tsr_op_t *op) {
  const tsr_value_t *r = op->results[0];
  tsr_dtype_t dtype = (tsr_dtype_t)r->type.dtype;
  ssa_t c = em_literal(em, dtype, op->literal, 0);
  if (r->type.kind == TSR_TYPE_SCALAR) {
    em_set_scalar(em, r, c);
    return;
  }
  expr_t *e = ex_new(em, EX_SCALAR, dtype, r->type.rank, r->type.dims);
  if (!e) return;
  e->scalar = c;
  em_set_lazy(em, r, e);
}

void em_op_iota(emitter_t *em, const tsr_op_t *op) {
  const tsr_value_t *r = op->results[0];
  expr_t *e = ex_new(em, EX_IOTA, (tsr_dtype_t)r->type.dtype, r->type.rank, r->type.dims);
  if (!e) return;
  e->axis = (uint32_t)op->ints[0];
  em_set_lazy(em, r, e);
}

/* The value's splat scalar, if it is one (a scalar, or a lazy splat). */
static bool splat_of(emitter_t *em, const tsr_value_t *v, ssa_t *out) {
  vinfo_t *vi = em_vi(em, v);
  if (vi->kind == VK_SCALAR) {
    *out = vi->scalar;
    return true;
  }
  if (vi->kind == VK_LAZY && vi->expr->kind == EX_SCALAR) {
    *out = vi->expr->scalar;
    return true;
  }
  return false;
}

static void set_splat(emitter_t *em, const tsr_value_t *r, ssa_t s) {
  if (r->type.kind == TSR_TYPE_SCALAR) { /* e.g. a point slice of a splat */
    em_set_scalar(em, r, s);
    return;
  }
  expr_t *e = ex_new(em, EX_SCALAR, (tsr_dtype_t)r->type.dtype, r->type.rank, r->type.dims);
  if (!e) return;
  e->scalar = s;
  em_set_lazy(em, r, e);
}

/* A splat operand makes a splat result (true: op is done). */
static bool forward_splat(emitter_t *em, const tsr_op_t *op) {
  ssa_t s;
  if (!splat_of(em, op->operands[0], &s)) return false;
  set_splat(em, op->results[0], s);
  return true;
}

void em_op_broadcast(emitter_t *em, const tsr_op_t *op) {
  const tsr_value_t *a = op->operands[0], *r = op->results[0];
  if (forward_splat(em, op)) return;
  view_t v = em_value_view(em, a);
  if (tsr_type_equal(&a->type, &r->type)) {
    em_set_mem(em, r, v);
    return;
  }
  expr_t *e = ex_new(em, EX_BCAST, (tsr_dtype_t)r->type.dtype, r->type.rank, r->type.dims);
  if (!e) return;
  e->mem = v;
  em_set_lazy(em, r, e);
}

void em_op_reshape(emitter_t *em, const tsr_op_t *op) {
  const tsr_value_t *a = op->operands[0], *r = op->results[0];
  if (forward_splat(em, op)) return;
  view_t v = em_dense_view_of(em, a);
  int64_t strides[TSR_MAX_RANK];
  em_dense_strides(r->type.rank, r->type.dims, strides);
  em_set_mem(em, r, em_view_make(em, v.root, v.off, r->type.rank, r->type.dims, strides,
                                 em_key(em, "%s{rs%u}", v.key ? v.key : "?", r->id)));
}

void em_op_slice(emitter_t *em, const tsr_op_t *op) {
  const tsr_value_t *a = op->operands[0], *r = op->results[0];
  if (forward_splat(em, op)) return;
  view_t v = em_value_view(em, a);
  int64_t off = 0, dims[TSR_MAX_RANK], strides[TSR_MAX_RANK];
  uint32_t rank = 0;
  for (uint32_t d = 0; d < op->num_indices && d < v.rank; d++) {
    const tsr_index_t *ix = &op->indices[d];
    switch (ix->kind) {
      case TSR_INDEX_FULL:
        dims[rank] = v.dims[d];
        strides[rank++] = v.strides[d];
        break;
      case TSR_INDEX_POINT: off += ix->start * v.strides[d]; break;
      case TSR_INDEX_SLICE:
      case TSR_INDEX_DS:
        off += ix->start * v.strides[d];
        dims[rank] = ix->size;
        strides[rank++] = v.strides[d] * ix->stride;
        break;
      default: em_unimplemented(em, op, "an index of unknown kind"); return;
    }
  }
  if (rank == 0) { /* every index a point: a scalar */
    view_t e = em_view_make(em, v.root, em_iaddc(em, v.off, off), 0, dims, strides, NULL);
    nest_t n;
    memset(&n, 0, sizeof n);
    em_set_scalar(em, r, em_mem_read(em, &e, (tsr_dtype_t)r->type.dtype, NULL, &n, NULL, NULL));
    return;
  }
  em_set_mem(em, r, em_view_make(em, v.root, em_iaddc(em, v.off, off), rank, dims, strides,
                                 em_key(em, "%s{sl%u}", v.key ? v.key : "?", r->id)));
}

/* ---- Queries ----------------------------------------------------------------------------- */

/* program_id: this grid step's index along the axis. */
void em_op_program_id(emitter_t *em, const tsr_op_t *op) {
  em_set_scalar(em, op->results[0], em->grid_i32[(uint32_t)op->ints[0]]);
}

/* num_programs: the grid's size along the axis. */
void em_op_num_programs(emitter_t *em, const tsr_op_t *op) {
  uint32_t axis = (uint32_t)op->ints[0];
  if (em->k->grid_bound[axis]) /* a run-time extent (em_emit_grid read it) */
    em_set_scalar(em, op->results[0],
                  em_cast(em, "arith.index_cast", em->grid_ext[axis].s, "index", "i32"));
  else
    em_set_scalar(em, op->results[0], em_cint(em, "i32", 0, em->k->grid[axis]));
}

/* device_id and core_id: the function's arguments. */
void em_op_device_id(emitter_t *em, const tsr_op_t *op) {
  em_set_scalar(em, op->results[0], em->device);
}

void em_op_core_id(emitter_t *em, const tsr_op_t *op) {
  em_set_scalar(em, op->results[0], em->core);
}

/* ---- Hints ------------------------------------------------------------------------------ */

/* multiple_of: the operand itself. The interpreter checks the promise;
 * compiled code for a CPU has nothing to gain from it. */
void em_op_multiple_of(emitter_t *em, const tsr_op_t *op) {
  em_set_scalar(em, op->results[0], em_scalar(em, op->operands[0]));
}
