/* What the reduction and scan generators (reduce.c, scan.c) share: the
 * accumulation dtype and identity of each op, the choice of block shapes
 * under Pallas's block rules and a VMEM budget, the grid layout with its
 * index maps, and the masks that keep padded edge blocks out of a result. */
#ifndef TESSERA_KERNELS_REDUCE_UTIL_H
#define TESSERA_KERNELS_REDUCE_UTIL_H

#include "kernels/kbuild.h"

#define RU_DEFAULT_VMEM_BUDGET ((int64_t)16 << 20)

/* f32 for floats, i32 for integers and i1: every op of a kernel is done in
 * 32 bits (libtpu has no i8 vector arithmetic, and bf16 sums lose
 * everything past 8 bits). Narrow integer sums and products wrap when
 * converted back, exactly as in the narrow dtype. */
tsr_dtype_t ru_acc_dtype(tsr_dtype_t dtype);
/* A value of `dtype` into the accumulation dtype and back. u32 travels as
 * its bits in i32 (sums and products wrap the same), with the sign bit
 * flipped for the ordering ops (max, min, arg*) so that signed order is
 * unsigned order: Mosaic cannot legalize arith.minui/maxui, and its
 * canonicalizer turns the emitter's flip-minsi-flip of u32 back into one
 * (libtpu: "failed to legalize operation 'arith.minui'"). */
tsr_ir_value_t *ru_to_acc(kb_t *b, tsr_ir_value_t *v, tsr_dtype_t dtype, tsr_kernels_op_t op);
tsr_ir_value_t *ru_from_acc(kb_t *b, tsr_ir_value_t *v, tsr_dtype_t dtype, tsr_kernels_op_t op);
bool ru_is_float(tsr_dtype_t dtype);

/* The identity of SUM/PROD/MAX/MIN (and of ARGMAX/ARGMIN: MAX's, MIN's)
 * as a constant of `type` (an accumulation dtype). */
tsr_ir_value_t *ru_identity(kb_t *b, tsr_kernels_op_t op, tsr_ir_type_t type);
/* "add", "mul", "max", "min" for SUM, PROD, MAX, MIN. */
const char *ru_binary_name(tsr_kernels_op_t op);
/* "reduce_sum", ... for SUM, PROD, MAX, MIN. */
const char *ru_reduce_name(tsr_kernels_op_t op);

/* Block dims for an array: each block dim is the array's or a multiple of
 * `granule[d]` (the Pallas rule: 8 and 128 on the last two dims), grown
 * from the last dim towards the first while the block holds at most
 * `limit` elements (never below the granules), preferring block dims that
 * divide the array's (no padded edge block). */
void ru_choose_blocks(uint32_t rank, const int64_t *dims, const int64_t *granule, int64_t limit,
                      int64_t *blocks);

/* How an array of `rank` dims is cut into blocks and walked by the grid. */
typedef struct ru_layout {
  uint32_t rank;
  int64_t dims[TSR_MAX_RANK];
  int64_t blocks[TSR_MAX_RANK];
  int64_t counts[TSR_MAX_RANK];  /* blocks along each dim */
  int32_t axis_of[TSR_MAX_RANK]; /* the grid axis walking the dim, -1: none (one block) */
  bool reversed[TSR_MAX_RANK];   /* the grid walks the dim's blocks last to first */
  uint32_t grid_rank;            /* >= 1 (grid(1) when every dim is one block) */
  int64_t grid[TSR_MAX_RANK];
  tsr_ir_dim_semantics_t semantics[TSR_MAX_RANK];
} ru_layout_t;

/* Fills counts, and the grid from `order` (the dims in the order of their
 * grid axes; dims of one block get none); `parallel` leading entries of
 * `order` are parallel, the rest arbitrary. */
void ru_layout_grid(ru_layout_t *l, const uint32_t *order, uint32_t n, uint32_t parallel);

/* Declares an in/out operand of `rank` dims `dims`, dim i being layout dim
 * src[i] (same block, same grid index) or, for src[i] < 0, a dim of size 1
 * (block 1 at index 0). A rank-0 operand is the whole array, in `space`. */
tsr_ir_value_t *ru_operand(kb_t *b, const ru_layout_t *l, tsr_ir_role_t role, const char *name,
                           tsr_dtype_t dtype, uint32_t rank, const int64_t *dims,
                           const int32_t *src, tsr_ir_space_t space);

/* The block index of layout dim d at this step (i32 scalar). */
tsr_ir_value_t *ru_block_index(kb_t *b, const ru_layout_t *l, uint32_t d);
/* The number of valid elements of this step's block along dim d (i32). */
tsr_ir_value_t *ru_valid_extent(kb_t *b, const ru_layout_t *l, uint32_t d);
/* i1 of the block's shape, true on the elements inside the array; NULL when
 * no dim is padded (every block is full). */
tsr_ir_value_t *ru_valid_mask(kb_t *b, const ru_layout_t *l);
/* The whole block of `ref` (the layout's block shape), read under the
 * valid mask when there is one. */
tsr_ir_value_t *ru_load_block(kb_t *b, const ru_layout_t *l, tsr_ir_value_t *ref,
                              tsr_ir_value_t *mask);

/* The element budget of a block: budget / bytes_per_element, at least 1024. */
int64_t ru_block_limit(int64_t vmem_budget_bytes, int64_t bytes_per_element);

#endif /* TESSERA_KERNELS_REDUCE_UTIL_H */
