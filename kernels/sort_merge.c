/* The multi-block sort: rows longer than one VMEM block (or than
 * MERGE_BLOCK_MAX positions) are sorted block by block in VMEM and merged
 * through HBM, every block moved by DMAs (docs/kernels.md, "Rows longer
 * than a block").
 *
 * The network is the bitonic sort in its "flip" form, where every
 * compare-exchange puts the smaller element at the lower position and
 * exchanges only when strictly smaller: then padding keys (the largest)
 * at positions >= n never move, so blocks past the data are never stored
 * and the last block is moved at its own (static) size. Per merge level
 * K = 2B, 4B, .., p (B the block):
 *   1. flip: block c of each lower half against its mirror block
 *      c ^ (K/B - 1), element e against element B-1-e (a gather reverses);
 *   2. half-cleaners across blocks: c against c + j/B for j = K/4 .. B;
 *   3. half-cleaners inside each block (j = B/2 .. 1): the network's last
 *      level on the block.
 * Stable sorts carry the input position as the last key, stored between
 * passes in the `indices` output (so they need return_indices).
 *
 * For a TPU, every DMA moves whole HBM tiles: a grid step takes the rows
 * of one tile at once (rows_per_step), and the offsets are multiple_of
 * values that libtpu can prove aligned; the network runs on one row at a
 * time from a (rows, 1, B) copy of the buffers. A ragged last block or
 * row group (ending at the array's edge) is moved from a static start
 * into a VMEM buffer of its exact shape (move_array). */
#include <stdio.h>
#include <string.h>

#include "kernels/sort_internal.h"

/* Positions per block at most: a block's arrays stay in a CPU's L2, and a
 * VMEM block stays small. */
#define MERGE_BLOCK_MAX ((int64_t)1 << 13)
#define MERGE_BLOCK_MIN ((int64_t)128)
#define ROWS_WHOLE ((int64_t)64)

/* VMEM a position costs in the single-block layout and in a merge block. */
static int64_t operand_bytes(const tsr_kernels_sort_params_t *p) {
  int64_t bytes = p->return_indices ? 4 : 0;
  for (uint32_t i = 0; i < p->num_operands && i < TSR_KERNELS_MAX_OPERANDS; i++)
    bytes += (int64_t)tsr_dtype_size(p->dtypes[i]);
  return bytes;
}

/* Rows of the second-to-last dim moved per grid step. A TPU tiles an HBM
 * array's last two dims (8 x 128 for 32-bit elements, 16 rows of 16-bit,
 * 32 of 8-bit; as many rows as the array has below that: (2, 128) for a
 * (2, 5000) f32 array), and libtpu refused the DMA of one row of it at a
 * dynamic row ("Offsets along tiled dimensions must be aligned to tiles")
 * and of a last, partial group of rows ("Slice sizes ..."). A step takes
 * the rows of one tile of the narrowest operand (a multiple of every
 * operand's tile), or all rows when there are no more (and, below
 * ROWS_WHOLE, when tiles do not divide them); 1 for rank 1. */
static int64_t rows_per_step(const tsr_kernels_sort_params_t *p) {
  if (p->rank < 2) return 1;
  size_t narrowest = 4; /* the indices, if any, are i32 */
  for (uint32_t i = 0; i < p->num_operands && i < TSR_KERNELS_MAX_OPERANDS; i++) {
    size_t size = tsr_dtype_size(p->dtypes[i]);
    if (size >= 1 && size < narrowest) narrowest = size;
  }
  int64_t tile = 8 * (int64_t)(4 / narrowest);
  int64_t rows = p->dims[p->rank - 2];
  if (rows < 1) return 1;
  /* Up to ROWS_WHOLE rows that tiles do not divide: all of them (one DMA
   * of whole dims), which keeps the block at its largest under the
   * default budget; more: tiles, and the last group is partial (moved
   * from its static first row, through transit buffers where its rows are
   * not whole packed sublanes: move_array). */
  if (rows <= tile || (rows % tile != 0 && rows <= ROWS_WHOLE)) return rows;
  return tile;
}

/* VMEM per position of a block: two blocks of each operand in scratch for
 * each row of a step (twice with several rows: the (rows, 1, B) copies),
 * and the network's values of one row. */
static int64_t merge_bytes_per_position(const tsr_kernels_sort_params_t *params,
                                        int64_t arrays) {
  int64_t rows = rows_per_step(params);
  return 2 * operand_bytes(params) * rows * (rows > 1 ? 2 : 1) + 2 * 12 * arrays;
}

/* Whether the (rows, size) head of a (rows_step, B) buffer of `dtype` is
 * not whole tiles for a DMA: lanes not a multiple of 128, or a last
 * group's rows not a multiple of the dtype's packing (2 rows of 16-bit
 * elements, 4 of 8-bit, in a sublane). Such a DMA goes through a transit
 * buffer of exactly (rows, size) (move_array). */
static bool needs_transit(tsr_dtype_t dtype, int64_t rows_step, int64_t rows, int64_t size) {
  size_t bytes = tsr_dtype_size(dtype);
  int64_t packing = bytes >= 1 && bytes < 4 ? (int64_t)(4 / bytes) : 1;
  return size % MERGE_BLOCK_MIN != 0 || (rows < rows_step && rows % packing != 0);
}

/* Whether array i (the operands, then the indices: i == num_operands) needs
 * a transit buffer for the DMAs of [last row group][last block] with blocks
 * of `block` positions; if so its dtype and (rows, size). */
static bool transit_of(const tsr_kernels_sort_params_t *p, int64_t block, int row_part, int part,
                       uint32_t i, tsr_dtype_t *dtype, int64_t dims[2]) {
  if (i == p->num_operands && !p->return_indices) return false;
  int64_t step = rows_per_step(p), rows = p->rank >= 2 ? p->dims[p->rank - 2] : 1;
  int64_t n = p->dims[p->rank - 1];
  dims[0] = row_part ? rows % step : step;
  dims[1] = part ? n % block : block;
  if (dims[0] == 0 || dims[1] == 0 || (row_part == 0 && rows / step == 0) ||
      (part == 0 && n / block == 0))
    return false;
  *dtype = i < p->num_operands ? p->dtypes[i] : TSR_DTYPE_I32;
  return needs_transit(*dtype, step, dims[0], dims[1]);
}

/* VMEM of the transit buffers with blocks of `block` positions. */
static int64_t transit_bytes(const tsr_kernels_sort_params_t *p, int64_t block) {
  int64_t total = 0, dims[2];
  tsr_dtype_t dt;
  for (int row_part = 0; row_part < 2; row_part++)
    for (int part = 0; part < 2; part++)
      for (uint32_t i = 0; i <= p->num_operands; i++)
        if (transit_of(p, block, row_part, part, i, &dt, dims))
          total += dims[0] * dims[1] * (int64_t)tsr_dtype_size(dt);
  return total;
}

/* The longest block of at most `start` positions (halving, not below
 * MERGE_BLOCK_MIN) whose scratch fits the budget. */
static int64_t block_for_budget(const tsr_kernels_sort_params_t *params, int64_t start) {
  int64_t budget =
      params->vmem_budget_bytes > 0 ? params->vmem_budget_bytes : SORT_DEFAULT_BUDGET;
  int64_t per_position = merge_bytes_per_position(params, 2 * (int64_t)params->num_operands + 2);
  int64_t block = start;
  while (block > MERGE_BLOCK_MIN && block * per_position + transit_bytes(params, block) > budget)
    block /= 2;
  return block;
}

bool sort_merge_wanted(const tsr_kernels_sort_params_t *params, int64_t *out_block) {
  if (params->rank < 1 || params->rank > TSR_MAX_RANK) return false;
  int32_t axis = params->axis < 0 ? params->axis + (int32_t)params->rank : params->axis;
  if (axis != (int32_t)params->rank - 1) return false;
  int64_t n = params->dims[axis];
  if (n < 1) return false;
  int64_t p = pow2_at_least(n);
  int64_t budget =
      params->vmem_budget_bytes > 0 ? params->vmem_budget_bytes : SORT_DEFAULT_BUDGET;
  int64_t arrays = 2 * (int64_t)params->num_operands + 2;
  int64_t single = p * (4 * operand_bytes(params) + 12 * arrays);
  if (p <= MERGE_BLOCK_MAX && single <= budget) return false;
  int64_t block = block_for_budget(params, MERGE_BLOCK_MAX);
  if (block >= p) return false;
  *out_block = block;
  return true;
}

bool sort_merge_wanted_forced(const tsr_kernels_sort_params_t *params, int64_t *out_block) {
  if (params->rank < 1 || params->rank > TSR_MAX_RANK) return false;
  int32_t axis = params->axis < 0 ? params->axis + (int32_t)params->rank : params->axis;
  if (axis != (int32_t)params->rank - 1 || params->dims[axis] < 1) return false;
  int64_t p = pow2_at_least(params->dims[axis]);
  if (p < 2 * MERGE_BLOCK_MIN) return false;
  *out_block = block_for_budget(params, p / 2 < MERGE_BLOCK_MAX ? p / 2 : MERGE_BLOCK_MAX);
  return true;
}

typedef struct merge {
  kb_t b;
  const tsr_kernels_sort_params_t *params;
  uint32_t rank, n_ops, nk_user;
  int64_t n, p, block, full_blocks, rem;
  tsr_ir_value_t *in[TSR_KERNELS_MAX_OPERANDS], *out[TSR_KERNELS_MAX_OPERANDS], *idx_out;
  tsr_ir_value_t *buf[2][TSR_KERNELS_MAX_OPERANDS], *idx_buf[2];
  /* With several rows per step, the buffers again as (rows, 1, B): the
   * network's row is a dynamic index on their leading dim. */
  tsr_ir_value_t *rows_buf[2][TSR_KERNELS_MAX_OPERANDS], *idx_rows_buf[2];
  /* Transit buffers of exactly (rows, size) for the DMAs whose VMEM side
   * would not be whole tiles, by [last row group][last block] (move_array);
   * NULL where the buffers' head is moved directly. The indices' last. */
  tsr_ir_value_t *transit[2][2][TSR_KERNELS_MAX_OPERANDS + 1];
  tsr_ir_value_t *sem;
  tsr_ir_value_t *lead[TSR_MAX_RANK]; /* program ids of the dims before the rows */
  /* The rows (second-to-last dim) a step moves: rows_per_step() of them
   * from row group_start (a multiple of rows_step), rows_rem in the last
   * group when they do not divide; rank 1: one row. */
  int64_t rows_step, full_groups, rows_rem;
  tsr_ir_value_t *group, *group_start; /* NULL with one group */
  tsr_ir_value_t *row; /* the buffers' row the network is on; NULL: one row */
  sort_tile_t tile;      /* a block in the network: (128, B/128), sort_tile.c */
  tsr_ir_value_t *rev_l; /* L-1-lane: a block's lanes reversed */
  bool canonical[TSR_KERNELS_MAX_OPERANDS];
  uint32_t payloads;
  bool padded;
} merge_t;

/* The arrays of one block in the network: keys, [index key], payloads,
 * [index payload]; value_from/from_key say where each operand's values
 * come back from. */
typedef struct arrays {
  tsr_ir_value_t *a[SORT_MAX_ARRAYS + 2];
  uint32_t m, nk;
  int32_t value_from[TSR_KERNELS_MAX_OPERANDS];
  bool from_key[TSR_KERNELS_MAX_OPERANDS];
  int32_t index_at;
} arrays_t;

/* DMAs between HBM column block `start` (`size` positions) of `rows` rows
 * and the head of the VMEM buffer, started and waited. The rows are the
 * step's group from `multiple_of g * rows_step` (full groups), or the
 * last, partial group from its static first row (`last_group`): libtpu
 * takes a DMA slice that ends at the array's edge when its start is
 * static, not at a dynamic one. */
static void dma_block(merge_t *g, tsr_ir_value_t *hbm, tsr_ir_value_t *vmem, bool to_vmem,
                      tsr_ir_value_t *start, int64_t size, int64_t rows, bool last_group) {
  kb_t *b = &g->b;
  uint32_t r = g->rank, n = 0;
  tsr_ir_index_t hidx[TSR_MAX_RANK], vidx[2] = {kb_point(0), kb_slice(0, size)};
  tsr_ir_value_t *starts[TSR_MAX_RANK];
  for (uint32_t d = 0; d + 2 < r; d++) {
    hidx[d] = (tsr_ir_index_t){TSR_INDEX_POINT, (int32_t)n, 0, 0, 1, 1};
    starts[n++] = g->lead[d];
  }
  if (r >= 2) {
    if (last_group) {
      int64_t first = g->full_groups * g->rows_step;
      hidx[r - 2] = kb_slice(first, first + rows);
    } else if (g->group_start) {
      hidx[r - 2] = kb_ds((int32_t)n, rows);
      starts[n++] = g->group_start;
    } else {
      hidx[r - 2] = kb_slice(0, rows);
    }
    vidx[0] = kb_slice(0, rows);
  }
  hidx[r - 1] = kb_ds((int32_t)n, size);
  starts[n++] = start;
  for (int pass = 0; pass < 2; pass++) {
    const char *op = pass == 0 ? "dma_start" : "dma_wait";
    if (to_vmem)
      kb_dma(b, op, hbm, hidx, r, vmem, vidx, 2, g->sem, starts, n);
    else
      kb_dma(b, op, vmem, vidx, 2, hbm, hidx, r, g->sem, starts, n);
  }
}

/* A transit buffer's (rows, size) as the head of a block buffer, copied
 * to the transit buffer (to_transit) or back, by a vector load and a
 * (masked) store. */
static void copy_transit(merge_t *g, tsr_ir_value_t *buf, tsr_ir_value_t *transit,
                         bool to_transit) {
  kb_t *b = &g->b;
  tsr_ir_index_t idx[2] = {kb_slice(0, transit->type.dims[0]),
                           kb_slice(0, transit->type.dims[1])};
  if (to_transit)
    kb_store_all(b, transit,
                 kb_load(b, buf, idx, 2, NULL, 0,
                         kb_vec((tsr_dtype_t)transit->type.dtype, 2, transit->type.dims)));
  else
    kb_store(b, buf, idx, 2, NULL, 0, kb_load_all(b, transit));
}

/* One array's block between HBM and buffer `vmem`: directly, or through a
 * transit buffer. A TPU's DMA moves whole VMEM tiles: libtpu refuses the
 * DMA of a (2, 392) head of a (2, 512) f32 buffer ("Slice sizes along
 * tiled dimensions must be aligned to tiles") and of 6 rows of a (32, 128)
 * i8 one (not "aligned to the unit subtile (4)"), and takes the DMA of the
 * whole (2, 392) or (6, 128) buffer, with the HBM slice ending at the
 * array's edge. */
static void move_array(merge_t *g, tsr_ir_value_t *hbm, tsr_ir_value_t *vmem,
                       tsr_ir_value_t *transit, bool to_vmem, tsr_ir_value_t *start,
                       int64_t size, int64_t rows, bool last_group) {
  if (!transit) {
    dma_block(g, hbm, vmem, to_vmem, start, size, rows, last_group);
    return;
  }
  if (!to_vmem) copy_transit(g, vmem, transit, true);
  dma_block(g, hbm, transit, to_vmem, start, size, rows, last_group);
  if (to_vmem) copy_transit(g, vmem, transit, false);
}

static void stage_rows(merge_t *g, int set, bool to_rows, bool indices);

/* Moves column block c (dynamic) of the step's rows of every stored array
 * between HBM and the buffers of `set`: full blocks at size B from
 * `multiple_of c * B, B` (what proves a TPU's DMA offsets aligned), the
 * last one at its size from its static start; the same for the rows,
 * full groups and the last one. */

static void move_block(merge_t *g, int set, tsr_ir_value_t *c, bool to_vmem, bool from_inputs) {
  kb_t *b = &g->b;
  if (!to_vmem) stage_rows(g, set, false, true);
  tsr_ir_value_t *full_start =
      g->full_blocks ? kb_multiple_of(b, kb_binary(b, "mul", c, kb_i32(b, g->block)), g->block)
                     : NULL;
  for (int row_part = 0; row_part < 2; row_part++) {
    int64_t rows = row_part == 0 ? g->rows_step : g->rows_rem;
    if ((row_part == 0 && g->full_groups == 0) || (row_part == 1 && g->rows_rem == 0)) continue;
    tsr_ir_value_t *row_cond =
        !g->rows_rem ? NULL
                     : kb_compare(b, row_part == 0 ? "lt" : "eq", g->group,
                                  kb_i32(b, g->full_groups));
    for (int part = 0; part < 2; part++) {
      int64_t size = part == 0 ? g->block : g->rem;
      if (part == 0 && g->full_blocks == 0) continue;
      if (part == 1 && g->rem == 0) continue;
      tsr_ir_value_t *cond =
          kb_compare(b, part == 0 ? "lt" : "eq", c, kb_i32(b, g->full_blocks));
      if (row_cond) cond = kb_binary(b, "and", row_cond, cond);
      tsr_ir_value_t *start = part == 0 ? full_start : kb_i32(b, g->full_blocks * g->block);
      kb_for_t branch = kb_begin_if(b, cond);
      bool last_group = row_part == 1;
      tsr_ir_value_t **transit = g->transit[row_part][part];
      for (uint32_t i = 0; i < g->n_ops; i++)
        move_array(g, to_vmem && from_inputs ? g->in[i] : g->out[i], g->buf[set][i],
                   transit[i], to_vmem, start, size, rows, last_group);
      if (g->idx_out && !from_inputs)
        move_array(g, g->idx_out, g->idx_buf[set], transit[g->n_ops], to_vmem, start, size,
                   rows, last_group);
      kb_end_if(b, &branch);
    }
  }
  if (to_vmem) stage_rows(g, set, true, !from_inputs);
}

/* The buffers of `set` copied to their (rows, 1, B) form (to_rows) or
 * back, with the indices' if `indices`; nothing with one row per step.
 * A copy per block moved: the cpu backend's reshapes are views. */
static void stage_rows(merge_t *g, int set, bool to_rows, bool indices) {
  kb_t *b = &g->b;
  if (g->rows_step == 1) return;
  for (uint32_t i = 0; i <= g->n_ops; i++) {
    tsr_ir_value_t *flat = i < g->n_ops ? g->buf[set][i] : g->idx_buf[set];
    tsr_ir_value_t *rows = i < g->n_ops ? g->rows_buf[set][i] : g->idx_rows_buf[set];
    if (i == g->n_ops && (!indices || !flat)) break;
    tsr_ir_value_t *from = to_rows ? flat : rows, *to = to_rows ? rows : flat;
    tsr_ir_type_t t = kb_vec((tsr_dtype_t)to->type.dtype, to->type.rank, to->type.dims);
    kb_store_all(b, to, kb_reshape(b, kb_load_all(b, from), t));
  }
}

/* A buffer's row (1, B) as loaded -> the network's (128, L) tile, and
 * back. */
static tsr_ir_value_t *to_net(merge_t *g, tsr_ir_value_t *v) {
  return sort_tile_from_line(&g->b, &g->tile, v);
}

static tsr_ir_value_t *from_net(merge_t *g, tsr_ir_value_t *v) {
  int64_t line[2] = {1, g->block};
  return sort_tile_to_line(&g->b, &g->tile, v, kb_vec(TSR_DTYPE_I32, 2, line));
}

/* Row g->row as (1, B): `rows[%row, :, :]` of the (rows, 1, B) buffer
 * (a TPU cannot prove a dynamic row of the (rows, B) one aligned to its
 * 8-row tiles), or the whole (1, B) buffer with one row per step. */
static tsr_ir_value_t *load_row(merge_t *g, tsr_ir_value_t *flat, tsr_ir_value_t *rows) {
  if (!g->row) return kb_load_all(&g->b, flat);
  tsr_ir_index_t idx[3] = {kb_point(0), kb_slice(0, 1), kb_slice(0, g->block)};
  idx[0].operand = 0;
  int64_t dims[2] = {1, g->block};
  return kb_load(&g->b, rows, idx, 3, &g->row, 1,
                 kb_vec((tsr_dtype_t)rows->type.dtype, 2, dims));
}

static void store_row(merge_t *g, tsr_ir_value_t *flat, tsr_ir_value_t *rows,
                      tsr_ir_value_t *v) {
  if (!g->row) {
    kb_store_all(&g->b, flat, v);
    return;
  }
  tsr_ir_index_t idx[3] = {kb_point(0), kb_slice(0, 1), kb_slice(0, g->block)};
  idx[0].operand = 0;
  kb_store(&g->b, rows, idx, 3, &g->row, 1, v);
}

/* `for row in [0, rows of this group)` around the network on the rows
 * the step moved (sets g->row; none with one row per step). The network
 * runs on one row at a time: its working set stays a block (the cpu
 * backend's speed, docs/kernels.md), where the DMAs move the rows of a
 * tile at once (the TPU's rule). */
static kb_for_t begin_rows(merge_t *g) {
  kb_t *b = &g->b;
  kb_for_t none = {NULL, b->region};
  if (g->rows_step == 1) return none;
  tsr_ir_value_t *hi = kb_i32(b, g->rows_step);
  if (g->rows_rem)
    hi = kb_select(b, kb_compare(b, "eq", g->group, kb_i32(b, g->full_groups)),
                   kb_i32(b, g->rows_rem), hi);
  kb_for_t loop = kb_begin_for(b, kb_i32(b, 0), hi, NULL, 0);
  g->row = kb_for_iv(&loop);
  return loop;
}

static void end_rows(merge_t *g, kb_for_t *loop) {
  if (g->rows_step == 1) return;
  kb_end_for(&g->b, loop, NULL, 0);
  g->row = NULL;
}

/* A block reversed (element e to B-1-e): both axes of (R, L). The rows by
 * a swap network (row ^ (R-1) as one exchange per bit, rolls along the
 * rows), the lanes by a gather within a row: Mosaic gathers within one
 * vreg only ("Multiple source vregs along gather dimension" across rows). */
static tsr_ir_value_t *reverse(merge_t *g, tsr_ir_value_t *v) {
  kb_t *b = &g->b;
  const sort_tile_t *t = &g->tile;
  uint32_t ax = t->rank - 2; /* the tile's rows; its lanes are ax + 1 */
  for (int64_t bit = 1; bit < t->rows; bit <<= 1) {
    tsr_ir_value_t *clear = kb_compare(b, "eq", kb_binary(b, "and", t->row_iota, kb_i32(b, bit)),
                                       kb_i32(b, 0));
    v = kb_select(b, clear, kb_roll(b, v, kb_i32(b, t->rows - bit), ax),
                  kb_roll(b, v, kb_i32(b, bit), ax));
  }
  if (t->lanes > 1) v = kb_gather(b, v, g->rev_l, ax + 1);
  return v;
}

/* Loads block c into the network's arrays (phase 1: from the inputs, with
 * the positions as indices). */
static void load_arrays(merge_t *g, int set, tsr_ir_value_t *c, bool phase1, arrays_t *out) {
  kb_t *b = &g->b;
  const tsr_kernels_sort_params_t *p = g->params;
  tsr_ir_value_t *gpos = kb_binary(b, "add", g->tile.pos, kb_binary(b, "mul", c, kb_i32(b, g->block)));
  tsr_ir_value_t *pad = kb_compare(b, "ge", gpos, kb_i32(b, g->n));
  tsr_ir_value_t *vals[TSR_KERNELS_MAX_OPERANDS];
  for (uint32_t i = 0; i < g->n_ops; i++)
    vals[i] = to_net(g, load_row(g, g->buf[set][i], g->rows_buf[set][i]));
  bool has_index = phase1 ? (p->return_indices || p->stable || (g->padded && g->payloads > 0))
                          : p->return_indices;
  bool index_key = p->stable || (phase1 && g->padded && (g->payloads > 0 || p->return_indices));
  tsr_ir_value_t *index = !has_index ? NULL
                          : phase1  ? gpos
                                    : to_net(g, load_row(g, g->idx_buf[set], g->idx_rows_buf[set]));
  memset(out, 0, sizeof *out);
  out->index_at = -1;
  for (uint32_t i = 0; i < g->nk_user; i++) {
    tsr_ir_value_t *key = sort_key(b, vals[i], p->dtypes[i], SORT_ORDER_LAX, g->canonical[i],
                                   p->descending);
    out->a[out->m++] = kb_select(b, pad, kb_const_i(b, key ? key->type : tsr_ir_type_scalar(
                                                        TSR_DTYPE_I32), INT32_MAX), key);
    out->value_from[i] = g->canonical[i] ? -1 : (int32_t)(out->m - 1);
    out->from_key[i] = !g->canonical[i];
  }
  if (index_key) { /* padding last also among equal keys (its stored index is stale) */
    out->index_at = (int32_t)out->m;
    out->a[out->m++] = phase1 ? index : kb_select(b, pad, kb_const_i(b, index ? index->type :
                                                  tsr_ir_type_scalar(TSR_DTYPE_I32), INT32_MAX),
                                                  index);
  }
  out->nk = out->m;
  for (uint32_t i = 0; i < g->n_ops; i++) {
    if (i < g->nk_user && !g->canonical[i]) continue;
    out->value_from[i] = (int32_t)out->m;
    out->from_key[i] = false;
    out->a[out->m++] = sort_to_payload(b, vals[i], p->dtypes[i]);
  }
  if (has_index && out->index_at < 0) {
    out->index_at = (int32_t)out->m;
    out->a[out->m++] = index;
  }
}

static void store_arrays(merge_t *g, int set, const arrays_t *a) {
  kb_t *b = &g->b;
  const tsr_kernels_sort_params_t *p = g->params;
  for (uint32_t i = 0; i < g->n_ops; i++) {
    tsr_ir_value_t *v = a->a[a->value_from[i]];
    v = a->from_key[i] ? sort_from_key(b, v, p->dtypes[i], SORT_ORDER_LAX, p->descending)
                       : sort_from_payload(b, v, p->dtypes[i]);
    store_row(g, g->buf[set][i], g->rows_buf[set][i], from_net(g, v));
  }
  if (g->idx_out)
    store_row(g, g->idx_buf[set], g->idx_rows_buf[set], from_net(g, a->a[a->index_at]));
}

/* lo/hi exchange: hi's element goes low where it is strictly smaller. */
static void exchange(merge_t *g, arrays_t *lo, arrays_t *hi) {
  kb_t *b = &g->b;
  tsr_ir_value_t *take = sort_lex_less(b, hi->a, lo->a, lo->nk);
  for (uint32_t a = 0; a < lo->m; a++) {
    tsr_ir_value_t *l = kb_select(b, take, hi->a[a], lo->a[a]);
    hi->a[a] = kb_select(b, take, lo->a[a], hi->a[a]);
    lo->a[a] = l;
  }
}

/* Blocks c (buffers 0) and c2 (buffers 1) in, or out. */
static void move_pair(merge_t *g, tsr_ir_value_t *c, tsr_ir_value_t *c2, bool to_vmem) {
  move_block(g, 0, c, to_vmem, false);
  move_block(g, 1, c2, to_vmem, false);
}

/* `for c in [0, blocks)` around the caller's body; returns the loop. */
static kb_for_t begin_blocks(merge_t *g) {
  kb_t *b = &g->b;
  int64_t blocks = g->full_blocks + (g->rem ? 1 : 0);
  return kb_begin_for(b, kb_i32(b, 0), kb_i32(b, blocks), NULL, 0);
}

/* Whether a stable sort gives the same outputs as an unstable one: when
 * every operand is a key and of an integer dtype, keys that compare equal
 * are equal in every bit, so their order cannot be seen. (Float keys
 * compare -0.0 equal to +0.0 and all NaNs equal; payloads differ.) */
static bool stability_unobservable(const tsr_kernels_sort_params_t *p) {
  if (p->return_indices || p->num_keys != p->num_operands) return false;
  for (uint32_t i = 0; i < p->num_operands && i < TSR_KERNELS_MAX_OPERANDS; i++) {
    tsr_dtype_class_t c = tsr_dtype_class(p->dtypes[i]);
    if (c != TSR_CLASS_SINT && c != TSR_CLASS_UINT) return false;
  }
  return true;
}

tsr_status_t sort_merge_generate(const tsr_kernels_sort_params_t *params, int64_t block,
                                 tsr_ir_module_t **out_module) {
  tsr_kernels_sort_params_t unstable;
  if (params->stable && stability_unobservable(params)) {
    unstable = *params;
    unstable.stable = false; /* the same outputs, without the positions */
    params = &unstable;
  }
  merge_t g;
  memset(&g, 0, sizeof g);
  g.params = params;
  g.rank = params->rank;
  g.n_ops = params->num_operands;
  g.nk_user = params->num_keys;
  g.n = params->dims[g.rank - 1];
  g.p = pow2_at_least(g.n);
  g.block = block;
  g.full_blocks = g.n / block;
  g.rem = g.n % block;
  g.padded = g.p != g.n;
  if (params->stable && !params->return_indices)
    return TSR_STATUS(TSR_UNIMPLEMENTED,
                      "sort: a stable sort of rows longer than a block (%lld positions here) "
                      "keeps the input positions in the indices output: set return_indices "
                      "(not needed when every operand is an integer key)",
                      (long long)block);
  for (uint32_t i = 0; i < g.nk_user; i++) {
    tsr_dtype_t dt = params->dtypes[i];
    bool is_float = dt == TSR_DTYPE_F32 || dt == TSR_DTYPE_BF16 || dt == TSR_DTYPE_F16;
    g.canonical[i] = is_float && (params->stable || i + 1 < g.nk_user);
    if (g.canonical[i]) g.payloads++;
  }
  g.payloads += g.n_ops - g.nk_user;
  if (g.nk_user + g.payloads + 1 > SORT_MAX_ARRAYS)
    return TSR_STATUS(TSR_UNIMPLEMENTED, "sort: %u operands with these options need more than "
                      "the %d arrays the network carries", g.n_ops, SORT_MAX_ARRAYS);
  kb_t *b = &g.b;
  kb_begin(b, "sort");
  int64_t grid[TSR_MAX_RANK];
  uint32_t grid_rank = 0;
  tsr_ir_dim_semantics_t sem[TSR_MAX_RANK];
  g.rows_step = rows_per_step(params);
  int64_t rows = g.rank >= 2 ? params->dims[g.rank - 2] : 1;
  g.full_groups = rows / g.rows_step;
  g.rows_rem = rows % g.rows_step;
  int64_t groups = g.full_groups + (g.rows_rem ? 1 : 0);
  for (uint32_t d = 0; d + 2 < g.rank; d++) grid[grid_rank++] = params->dims[d];
  if (groups > 1) grid[grid_rank++] = groups;
  if (grid_rank == 0) grid[grid_rank++] = 1;
  for (uint32_t d = 0; d < grid_rank; d++) sem[d] = TSR_DIM_PARALLEL;
  kb_grid(b, grid_rank, grid, sem);
  char name[24];
  for (uint32_t i = 0; i < g.n_ops; i++) {
    snprintf(name, sizeof name, "x%u", i);
    g.in[i] = kb_operand(b, TSR_ROLE_IN, name, params->dtypes[i], g.rank, params->dims,
                         TSR_SPACE_ANY, NULL, NULL);
  }
  for (uint32_t i = 0; i < g.n_ops; i++) {
    snprintf(name, sizeof name, "y%u", i);
    g.out[i] = kb_operand(b, TSR_ROLE_OUT, name, params->dtypes[i], g.rank, params->dims,
                          TSR_SPACE_ANY, NULL, NULL);
  }
  if (params->return_indices)
    g.idx_out = kb_operand(b, TSR_ROLE_OUT, "indices", TSR_DTYPE_I32, g.rank, params->dims,
                           TSR_SPACE_ANY, NULL, NULL);
  int64_t buf_dims[2] = {g.rows_step, block};
  for (int set = 0; set < 2; set++) {
    for (uint32_t i = 0; i < g.n_ops; i++) {
      snprintf(name, sizeof name, "%s%u", set ? "hi" : "lo", i);
      g.buf[set][i] = kb_scratch(b, name, TSR_SPACE_VMEM, params->dtypes[i], 2, buf_dims);
    }
    if (g.idx_out)
      g.idx_buf[set] = kb_scratch(b, set ? "hi_index" : "lo_index", TSR_SPACE_VMEM,
                                  TSR_DTYPE_I32, 2, buf_dims);
  }
  int64_t rows_dims[3] = {g.rows_step, 1, block};
  for (int set = 0; set < 2 && g.rows_step > 1; set++) {
    for (uint32_t i = 0; i < g.n_ops; i++) {
      snprintf(name, sizeof name, "%s_rows%u", set ? "hi" : "lo", i);
      g.rows_buf[set][i] = kb_scratch(b, name, TSR_SPACE_VMEM, params->dtypes[i], 3, rows_dims);
    }
    if (g.idx_out)
      g.idx_rows_buf[set] = kb_scratch(b, set ? "hi_index_rows" : "lo_index_rows",
                                       TSR_SPACE_VMEM, TSR_DTYPE_I32, 3, rows_dims);
  }
  for (int row_part = 0; row_part < 2; row_part++) {
    for (int part = 0; part < 2; part++) {
      for (uint32_t i = 0; i <= g.n_ops; i++) {
        int64_t dims[2];
        tsr_dtype_t dt;
        if (!transit_of(params, block, row_part, part, i, &dt, dims)) continue;
        if (i < g.n_ops)
          snprintf(name, sizeof name, "transit%d%d_%u", row_part, part, i);
        else
          snprintf(name, sizeof name, "transit%d%d_index", row_part, part);
        g.transit[row_part][part][i] = kb_scratch(b, name, TSR_SPACE_VMEM, dt, 2, dims);
      }
    }
  }
  g.sem = kb_scratch_sem(b, "sem", TSR_SEM_DMA, 0, NULL);

  /* Buffers start defined: the last block's DMAs fill only its head. */
  for (int set = 0; set < 2; set++) {
    for (uint32_t i = 0; i < g.n_ops; i++)
      kb_store_all(b, g.buf[set][i],
                   kb_const_i(b, kb_vec(params->dtypes[i], 2, buf_dims), 0));
    if (g.idx_out)
      kb_store_all(b, g.idx_buf[set], kb_const_i(b, kb_vec(TSR_DTYPE_I32, 2, buf_dims), 0));
    /* the rows of a last, partial group past its rows are copied unsorted */
    for (uint32_t i = 0; i < g.n_ops && g.rows_buf[set][i]; i++)
      kb_store_all(b, g.rows_buf[set][i],
                   kb_const_i(b, kb_vec(params->dtypes[i], 3, rows_dims), 0));
    if (g.idx_rows_buf[set])
      kb_store_all(b, g.idx_rows_buf[set],
                   kb_const_i(b, kb_vec(TSR_DTYPE_I32, 3, rows_dims), 0));
  }
  uint32_t lead_rank = 0;
  for (uint32_t d = 0; d + 2 < g.rank; d++) g.lead[d] = kb_program_id(b, lead_rank++);
  if (groups > 1) {
    g.group = kb_program_id(b, lead_rank);
    g.group_start = kb_multiple_of(b, kb_binary(b, "mul", g.group, kb_i32(b, g.rows_step)),
                                   g.rows_step);
  }
  sort_tile_init(b, &g.tile, 0, NULL, block);
  tsr_ir_type_t rl_t = kb_vec(TSR_DTYPE_I32, g.tile.rank, g.tile.dims);
  g.rev_l = kb_binary(b, "sub", kb_const_i(b, rl_t, g.tile.lanes - 1),
                      kb_iota(b, rl_t, g.tile.rank - 1));
  int64_t blocks = g.full_blocks + (g.rem ? 1 : 0);
  int log_b = log2_of(block), levels = log2_of(g.p);
  arrays_t lo, hi;

  /* 1. Every block sorted in VMEM. */
  kb_for_t loop = begin_blocks(&g);
  tsr_ir_value_t *c = kb_for_iv(&loop);
  move_block(&g, 0, c, true, true);
  kb_for_t row_loop = begin_rows(&g);
  load_arrays(&g, 0, c, true, &lo);
  sort_tile_levels(b, &g.tile, lo.a, lo.m, lo.nk, 1);
  store_arrays(&g, 0, &lo);
  end_rows(&g, &row_loop);
  move_block(&g, 0, c, false, false);
  kb_end_for(b, &loop, NULL, 0);

  /* 2. Merge levels K = 2^lk, lk = log B + 1 .. log p. */
  kb_for_t level = kb_begin_for(b, kb_i32(b, log_b + 1), kb_i32(b, levels + 1), NULL, 0);
  tsr_ir_value_t *lk = kb_for_iv(&level);
  tsr_ir_value_t *one = kb_i32(b, 1), *zero = kb_i32(b, 0), *nblocks = kb_i32(b, blocks);
  tsr_ir_value_t *kc = kb_binary(b, "shl", one, kb_binary(b, "sub", lk, kb_i32(b, log_b)));
  tsr_ir_value_t *half = kb_binary(b, "shra", kc, one);
  /* 2a. flip */
  loop = begin_blocks(&g);
  c = kb_for_iv(&loop);
  tsr_ir_value_t *c2 = kb_binary(b, "xor", c, kb_binary(b, "sub", kc, one));
  tsr_ir_value_t *is_lower = kb_compare(b, "eq", kb_binary(b, "and", c, half), zero);
  kb_for_t branch = kb_begin_if(b, kb_binary(b, "and", is_lower,
                                             kb_compare(b, "lt", c2, nblocks)));
  move_pair(&g, c, c2, true);
  row_loop = begin_rows(&g);
  load_arrays(&g, 0, c, false, &lo);
  load_arrays(&g, 1, c2, false, &hi);
  for (uint32_t a = 0; a < hi.m; a++) hi.a[a] = reverse(&g, hi.a[a]);
  exchange(&g, &lo, &hi);
  for (uint32_t a = 0; a < hi.m; a++) hi.a[a] = reverse(&g, hi.a[a]);
  store_arrays(&g, 0, &lo);
  store_arrays(&g, 1, &hi);
  end_rows(&g, &row_loop);
  move_pair(&g, c, c2, false);
  kb_end_if(b, &branch);
  kb_end_for(b, &loop, NULL, 0);
  /* 2b. half-cleaners across blocks: distance jc = 2^(lk - 2 - log B - t) blocks */
  kb_for_t steps = kb_begin_for(b, zero, kb_binary(b, "sub", lk, kb_i32(b, 1 + log_b)), NULL, 0);
  tsr_ir_value_t *t = kb_for_iv(&steps);
  tsr_ir_value_t *jc = kb_binary(
      b, "shl", one, kb_binary(b, "sub", kb_binary(b, "sub", lk, kb_i32(b, 2 + log_b)), t));
  loop = begin_blocks(&g);
  c = kb_for_iv(&loop);
  c2 = kb_binary(b, "add", c, jc);
  is_lower = kb_compare(b, "eq", kb_binary(b, "and", c, jc), zero);
  branch = kb_begin_if(b, kb_binary(b, "and", is_lower, kb_compare(b, "lt", c2, nblocks)));
  move_pair(&g, c, c2, true);
  row_loop = begin_rows(&g);
  load_arrays(&g, 0, c, false, &lo);
  load_arrays(&g, 1, c2, false, &hi);
  exchange(&g, &lo, &hi);
  store_arrays(&g, 0, &lo);
  store_arrays(&g, 1, &hi);
  end_rows(&g, &row_loop);
  move_pair(&g, c, c2, false);
  kb_end_if(b, &branch);
  kb_end_for(b, &loop, NULL, 0);
  kb_end_for(b, &steps, NULL, 0);
  /* 2c. half-cleaners inside each block */
  loop = begin_blocks(&g);
  c = kb_for_iv(&loop);
  move_block(&g, 0, c, true, false);
  row_loop = begin_rows(&g);
  load_arrays(&g, 0, c, false, &lo);
  sort_tile_levels(b, &g.tile, lo.a, lo.m, lo.nk, log_b);
  store_arrays(&g, 0, &lo);
  end_rows(&g, &row_loop);
  move_block(&g, 0, c, false, false);
  kb_end_for(b, &loop, NULL, 0);
  kb_end_for(b, &level, NULL, 0);
  return kb_finish(b, out_module);
}
