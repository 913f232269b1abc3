/* tsr_kernels_cumulative: inclusive cumulative sum, product, max and min
 * along any axis, forward or reversed, as one Pallas-style kernel.
 *
 * The array is cut into blocks as for reductions (reduce_util.c). When the
 * scan axis is one of the last two (the TPU's lanes and sublanes), a block
 * spans up to 256 elements of it and is scanned in place by the log-step
 * (Hillis-Steele) scan: log2(block) passes of `y = op(y, roll(y, s))` with
 * the rolled-in elements masked to the op's identity. A leading scan axis
 * gets blocks of one element along it (no in-block scan at all). The grid
 * walks the other dims' blocks first (parallel) and the scan axis's last
 * (arbitrary, backwards for `reverse`), carrying the running total of the
 * previous blocks in a VMEM scratch: the block's result is op(carry, scan)
 * and its last (first, reversed) slice becomes the next carry. Everything
 * is computed in 32 bits: bf16/f16 in f32, narrow integers in i32 (which
 * wrap back exactly). docs/kernels.md, "Cumulative ops and reductions". */
#include <stdio.h>

#include "kernels/reduce_util.h"

/* The in-block scan's reach along the lane and the sublane axis (log2 of
 * it is the number of passes per block), and the most elements of a block:
 * each pass reads and writes the whole block, which the cpu backend keeps
 * in memory, so blocks that stay in L1/L2 across the passes win. Measured on
 * a 4096 x 4096 f32 cumsum (cpu backend, docs/benchmarks.md): along the
 * last axis (1024, 256) blocks 229 ms, (64, 256) 61-90 ms, (16, 256) 48-53
 * ms, (8, 256) 40 ms; along the first, (256, 4096) 201 ms, (128, 256) 44
 * ms, (8, 2048) 59 ms (the machine was shared: +-20%). */
enum { SCAN_LANES = 256, SCAN_SUBLANES = 128 };
static const int64_t SCAN_LANE_BLOCK = 4096, SCAN_SUBLANE_BLOCK = 32768;

static tsr_status_t check_params(const tsr_kernels_cumulative_params_t *p, uint32_t *out_axis) {
  if (p->op != TSR_KERNELS_SUM && p->op != TSR_KERNELS_PROD && p->op != TSR_KERNELS_MAX &&
      p->op != TSR_KERNELS_MIN) {
    const char *name = tsr_kernels_op_name(p->op);
    return TSR_STATUS(TSR_INVALID_ARGUMENT,
                      "cumulative: op '%s' has no cumulative form (sum, prod, max, min)",
                      name ? name : "?");
  }
  if (p->rank < 1 || p->rank > TSR_MAX_RANK)
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "cumulative: rank %u is not in 1..%d", p->rank,
                      TSR_MAX_RANK);
  for (uint32_t d = 0; d < p->rank; d++)
    if (p->dims[d] < 1 || p->dims[d] > INT32_MAX)
      return TSR_STATUS(TSR_INVALID_ARGUMENT, "cumulative: dims[%u] = %lld is not in 1..2^31-1",
                        d, (long long)p->dims[d]);
  if ((unsigned)p->dtype >= TSR_DTYPE_COUNT)
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "cumulative: dtype %d is not a tsr_dtype_t",
                      (int)p->dtype);
  if (tsr_dtype_class(p->dtype) == TSR_CLASS_BOOL &&
      (p->op == TSR_KERNELS_SUM || p->op == TSR_KERNELS_PROD))
    return TSR_STATUS(TSR_INVALID_ARGUMENT,
                      "cumulative: op '%s' of dtype i1 is not defined; convert to an integer "
                      "dtype first", tsr_kernels_op_name(p->op));
  int64_t axis = p->axis < 0 ? (int64_t)p->axis + p->rank : p->axis;
  if (axis < 0 || axis >= (int64_t)p->rank)
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "cumulative: axis %d is out of range for rank %u",
                      (int)p->axis, p->rank);
  if (p->vmem_budget_bytes < 0)
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "cumulative: vmem_budget_bytes %lld is negative",
                      (long long)p->vmem_budget_bytes);
  *out_axis = (uint32_t)axis;
  return NULL;
}

/* The static slice [start, start + 1) of `v` along `axis`. */
static tsr_ir_value_t *slice_one(kb_t *b, tsr_ir_value_t *v, uint32_t rank, const int64_t *dims,
                                 uint32_t axis, int64_t start) {
  tsr_ir_index_t idx[TSR_MAX_RANK];
  int64_t rdims[TSR_MAX_RANK];
  for (uint32_t d = 0; d < rank; d++) {
    idx[d] = d == axis ? kb_slice(start, start + 1) : kb_full();
    rdims[d] = d == axis ? 1 : dims[d];
    if (d != axis) {
      idx[d].stop = dims[d];
      idx[d].size = dims[d];
    }
  }
  tsr_ir_type_t t = kb_vec(v ? (tsr_dtype_t)v->type.dtype : TSR_DTYPE_F32, rank, rdims);
  tsr_ir_op_params_t p = {.mnemonic = "slice", .operands = &v, .num_operands = 1,
                          .result_types = &t, .num_results = 1, .indices = idx,
                          .num_indices = rank};
  return kb_op(b, &p, NULL);
}

tsr_status_t tsr_kernels_cumulative(const tsr_kernels_cumulative_params_t *p,
                                    tsr_ir_module_t **out_module) {
  if (!p || !out_module)
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "cumulative: params and out_module must not be NULL");
  uint32_t axis = 0;
  tsr_status_t s = check_params(p, &axis);
  if (s) return s;
  uint32_t r = p->rank;
  tsr_kernels_op_t op = p->op;
  tsr_dtype_t acc = ru_acc_dtype(p->dtype);

  ru_layout_t l = {0};
  l.rank = r;
  int64_t granule[TSR_MAX_RANK], dims[TSR_MAX_RANK];
  for (uint32_t d = 0; d < r; d++) {
    l.dims[d] = p->dims[d];
    dims[d] = p->dims[d];
    granule[d] = 1;
  }
  if (r == 1) {
    granule[0] = 1024;
  } else {
    granule[r - 1] = 128;
    granule[r - 2] = 8;
  }
  /* The scan axis's block: up to SCAN_LANES/SUBLANES on the last two dims (or of
   * a rank-1 array: the whole array up to its granule, a multiple of it
   * beyond), 1 on a leading dim. The other dims share the budget. */
  int64_t along;
  if (r == 1 || axis + 2 >= r) {
    int64_t most = axis + 1 == r ? SCAN_LANES : SCAN_SUBLANES;
    int64_t reach = granule[axis] > most ? granule[axis] : most;
    along = dims[axis] <= reach ? dims[axis] : reach;
  } else {
    along = 1;
  }
  dims[axis] = along;
  granule[axis] = along; /* the block starts (and stays) at `along` there */
  int64_t per_element = 2 * 2 * (int64_t)tsr_dtype_size(p->dtype) + 24;
  int64_t limit = ru_block_limit(p->vmem_budget_bytes, per_element);
  int64_t small = axis + 1 == r ? SCAN_LANE_BLOCK : SCAN_SUBLANE_BLOCK;
  ru_choose_blocks(r, dims, granule, limit < small ? limit : small, l.blocks);
  l.blocks[axis] = along;
  l.reversed[axis] = p->reverse;
  uint32_t order[TSR_MAX_RANK], n = 0;
  for (uint32_t d = 0; d < r; d++)
    if (d != axis) order[n++] = d;
  order[n++] = axis;
  ru_layout_grid(&l, order, n, r - 1);

  kb_t b;
  char name[64];
  snprintf(name, sizeof name, "cum%s%s", tsr_kernels_op_name(op), p->reverse ? "_reverse" : "");
  kb_begin(&b, name);
  kb_grid(&b, l.grid_rank, l.grid, l.semantics);
  int32_t src[TSR_MAX_RANK];
  for (uint32_t d = 0; d < r; d++) src[d] = (int32_t)d;
  tsr_ir_value_t *x = ru_operand(&b, &l, TSR_ROLE_IN, "x", p->dtype, r, p->dims, src,
                                 TSR_SPACE_VMEM);
  tsr_ir_value_t *y = ru_operand(&b, &l, TSR_ROLE_OUT, "y", p->dtype, r, p->dims, src,
                                 TSR_SPACE_VMEM);
  bool multi = l.axis_of[axis] >= 0;
  int64_t carry_dims[TSR_MAX_RANK];
  for (uint32_t d = 0; d < r; d++) carry_dims[d] = d == axis ? 1 : l.blocks[d];
  tsr_ir_value_t *carry = multi ? kb_scratch(&b, "carry", TSR_SPACE_VMEM, acc, r, carry_dims)
                                : NULL;

  tsr_ir_type_t block_t = kb_vec(acc, r, l.blocks);
  tsr_ir_value_t *mask = ru_valid_mask(&b, &l);
  tsr_ir_value_t *v = ru_load_block(&b, &l, x, mask);
  v = ru_to_acc(&b, v, p->dtype, op);
  /* Padding lies after the valid elements along the axis: it reaches them
   * only in a reversed scan, where it must be the identity. */
  if (mask && p->reverse) v = kb_select(&b, mask, v, ru_identity(&b, op, block_t));

  const char *combine = ru_binary_name(op);
  int64_t len = l.blocks[axis];
  if (len > 1) {
    tsr_ir_value_t *pos = kb_iota(&b, kb_vec(TSR_DTYPE_I32, r, l.blocks), axis);
    tsr_ir_value_t *ident = ru_identity(&b, op, block_t);
    for (int64_t step = 1; step < len; step *= 2) {
      /* forward: y[i] op= y[i - step] for i >= step; reversed: y[i + step]
       * for i < len - step. roll by s gives r[i] = y[i - s]. */
      tsr_ir_value_t *rolled = kb_roll(&b, v, kb_i32(&b, p->reverse ? len - step : step), axis);
      tsr_ir_value_t *take = p->reverse ? kb_compare(&b, "lt", pos, kb_i32(&b, len - step))
                                        : kb_compare(&b, "ge", pos, kb_i32(&b, step));
      v = kb_binary(&b, combine, v, kb_select(&b, take, rolled, ident));
    }
  }
  if (multi) {
    tsr_ir_value_t *first = kb_compare(&b, "eq", kb_program_id(&b, l.axis_of[axis]), kb_i32(&b, 0));
    kb_for_t when = kb_begin_if(&b, first);
    kb_store_all(&b, carry, ru_identity(&b, op, kb_vec(acc, r, carry_dims)));
    kb_end_if(&b, &when);
    tsr_ir_value_t *c = kb_load_all(&b, carry);
    v = kb_binary(&b, combine, v, len > 1 ? kb_broadcast(&b, c, block_t) : c);
    kb_store_all(&b, carry, len > 1 ? slice_one(&b, v, r, l.blocks, axis, p->reverse ? 0 : len - 1)
                                    : v);
  }
  v = ru_from_acc(&b, v, p->dtype, op);
  kb_store_all(&b, y, v);
  return kb_finish(&b, out_module);
}
