/* How a sort along one axis is cut into blocks (sort_layout_t), a block's
 * operands, loads and stores, and the bitonic network on a block, which
 * takes the tiled form of sort_tile.c when a row is long enough. Shared by
 * the sort (sort.c) and top-k (topk.c); docs/kernels.md, "Sort and
 * top-k". */
#include <string.h>

#include "kernels/sort_internal.h"

/* Positions per block the layout aims at when it may choose (the non-axis
 * tiles grow until a block holds about this many): big enough that a
 * block's ops amortise their dispatch, small enough to stay in a CPU's L2. */
#define TARGET_POSITIONS ((int64_t)1 << 15)

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* A tile of `dim` for a dimension whose block must be a multiple of
 * `quantum` or the whole dimension: at most `want` elements, at least one
 * quantum. */
static int64_t tile(int64_t dim, int64_t want, int64_t quantum) {
  if (dim <= want) return dim;
  int64_t t = want / quantum * quantum;
  return t < quantum ? quantum : t;
}

tsr_status_t sort_check_shape(uint32_t rank, const int64_t *dims, int32_t axis,
                              const char *entry) {
  if (rank < 1 || rank > TSR_MAX_RANK)
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "%s: rank must be 1..%d, got %u", entry,
                      TSR_MAX_RANK, rank);
  for (uint32_t d = 0; d < rank; d++)
    if (dims[d] < 1 || dims[d] > ((int64_t)1 << 31))
      return TSR_STATUS(TSR_INVALID_ARGUMENT, "%s: dims[%u] must be 1..2^31, got %lld",
                        entry, d, (long long)dims[d]);
  if (axis < -(int32_t)rank || axis >= (int32_t)rank)
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "%s: axis %d is out of range for rank %u", entry,
                      axis, rank);
  return NULL;
}

tsr_status_t sort_layout_plan(uint32_t rank, const int64_t *dims, int32_t axis,
                              int64_t bytes_per_position, int64_t budget, const char *entry,
                              sort_layout_t *out) {
  TSR_RETURN_IF_ERROR(sort_check_shape(rank, dims, axis, entry));
  if (budget < 0)
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "%s: vmem_budget_bytes must be >= 0, got %lld",
                      entry, (long long)budget);
  if (budget == 0) budget = SORT_DEFAULT_BUDGET;
  sort_layout_t l;
  memset(&l, 0, sizeof l);
  l.rank = rank;
  memcpy(l.dims, dims, rank * sizeof *dims);
  l.axis = (uint32_t)(axis < 0 ? axis + (int32_t)rank : axis);
  l.n = dims[l.axis];
  /* The axis's block: a power of two, and Pallas's TPU rules (the last dim
   * a multiple of 128 or the array's, the second-to-last of 8; rank 1: the
   * array, or a power of two of at least 128). */
  l.p = pow2_at_least(l.n);
  if (l.p != l.n) {
    if (l.axis == rank - 1 && l.p < 128) l.p = 128;
    if (rank >= 2 && l.axis == rank - 2 && l.p < 8) l.p = 8;
  }
  /* Non-axis tiles: grow to TARGET_POSITIONS, shrink to the budget. */
  int64_t want = TARGET_POSITIONS / l.p;
  if (want < 1) want = 1;
  for (;;) {
    for (uint32_t d = 0; d < rank; d++) l.block[d] = d == l.axis ? l.p : TSR_SQUEEZED;
    int64_t extent = 1;
    if (l.axis != rank - 1) {
      l.block[rank - 1] = tile(dims[rank - 1], want, 128);
      extent = l.block[rank - 1];
    }
    if (rank >= 2 && l.axis != rank - 2) {
      int64_t w = want / extent;
      l.block[rank - 2] = tile(dims[rank - 2], w < 1 ? 1 : w, 8);
      extent *= l.block[rank - 2];
    }
    int64_t bytes = extent * l.p * bytes_per_position;
    if (bytes <= budget) break;
    if (want == 1)
      return TSR_STATUS(TSR_UNIMPLEMENTED,
                        "%s: one block of the axis (%lld positions padded to %lld) needs about "
                        "%lld bytes of VMEM, more than vmem_budget_bytes (%lld); sorts that "
                        "merge blocks through HBM are not implemented yet",
                        entry, (long long)l.n, (long long)l.p, (long long)bytes,
                        (long long)budget);
    want /= 2;
  }
  /* The grid: one dimension per non-axis array dimension. */
  for (uint32_t d = 0; d < rank; d++) {
    if (d == l.axis) continue;
    int64_t bd = l.block[d] == TSR_SQUEEZED ? 1 : l.block[d];
    l.grid_dim_of[d] = l.grid_rank;
    l.grid[l.grid_rank++] = cdiv(dims[d], bd);
  }
  if (l.grid_rank == 0) l.grid[l.grid_rank++] = 1;
  /* What the body sees. */
  for (uint32_t d = 0; d < rank; d++) {
    if (l.block[d] == TSR_SQUEEZED) continue;
    if (d == l.axis) l.vis_axis = l.vis_rank;
    l.vis[l.vis_rank++] = l.block[d];
  }
  if (l.vis_rank == 1) {
    l.reshape_1d = true;
    l.vis_rank = 2;
    l.vis[0] = 1;
    l.vis[1] = l.p;
    l.vis_axis = 1;
  }
  *out = l;
  return NULL;
}

tsr_ir_value_t *sort_operand(kb_t *b, const sort_layout_t *l, tsr_ir_role_t role,
                             const char *name, tsr_dtype_t dtype, int64_t axis_size) {
  int64_t dims[TSR_MAX_RANK], block[TSR_MAX_RANK];
  memcpy(dims, l->dims, sizeof dims);
  memcpy(block, l->block, sizeof block);
  if (axis_size > 0) dims[l->axis] = block[l->axis] = axis_size;
  tsr_ir_region_t *map = NULL;
  tsr_ir_value_t *ref =
      kb_operand(b, role, name, dtype, l->rank, dims, TSR_SPACE_VMEM, block, &map);
  if (!ref || !map) return ref;
  tsr_ir_region_t *body = b->region;
  b->region = map;
  tsr_ir_value_t *yields[TSR_MAX_RANK];
  tsr_ir_value_t *zero = kb_i32(b, 0);
  for (uint32_t d = 0; d < l->rank; d++)
    yields[d] = d == l->axis ? zero : tsr_ir_region_arg(map, l->grid_dim_of[d]);
  kb_yield(b, yields, l->rank);
  b->region = body;
  return ref;
}

static tsr_ir_type_t vis_type(const sort_layout_t *l, tsr_dtype_t dtype) {
  return kb_vec(dtype, l->vis_rank, l->vis);
}

tsr_ir_value_t *sort_load(kb_t *b, const sort_layout_t *l, tsr_ir_value_t *ref) {
  tsr_ir_value_t *v = kb_load_all(b, ref);
  if (l->reshape_1d && ref) v = kb_reshape(b, v, vis_type(l, (tsr_dtype_t)ref->type.dtype));
  return v;
}

void sort_store(kb_t *b, const sort_layout_t *l, tsr_ir_value_t *ref, tsr_ir_value_t *value) {
  if (l->reshape_1d && ref) value = kb_reshape(b, value, kb_vec((tsr_dtype_t)ref->type.dtype, 1,
                                                                 &ref->type.dims[0]));
  kb_store_all(b, ref, value);
}

tsr_ir_value_t *sort_positions(kb_t *b, const sort_layout_t *l) {
  return kb_iota(b, vis_type(l, TSR_DTYPE_I32), l->vis_axis);
}

/* ---- the network ---- */

/* The bitonic network: for k = 2, 4, .., p (level lk = log2 k), for
 * j = k/2, .., 1: position i and its partner i ^ j exchange so that the
 * lower one holds the smaller when bit k of i is clear (an ascending run)
 * and the larger when it is set. The partner's value is a roll by -j or +j
 * chosen by bit j of i: two rolls and a select per array, all with
 * dynamic shifts, so one loop body serves every stage. */
void sort_network(kb_t *b, const sort_layout_t *l, tsr_ir_value_t **arrays, uint32_t m,
                  uint32_t nk) {
  sort_network_levels(b, l, arrays, m, nk, 1);
}

void sort_network_levels(kb_t *b, const sort_layout_t *l, tsr_ir_value_t **arrays, uint32_t m,
                         uint32_t nk, int64_t first_level) {
  sort_network_range(b, l, arrays, m, nk, first_level, 0, 0, true);
}

void sort_network_range(kb_t *b, const sort_layout_t *l, tsr_ir_value_t **arrays, uint32_t m,
                        uint32_t nk, int64_t first_level, int64_t last_level, int64_t dir_bit,
                        bool tiles) {
  if (l->p <= 1 || !kb_ok(b)) return;
  if (tiles && l->vis_axis + 1 == l->vis_rank && sort_tile_fits(l->p, l->vis_rank - 1)) {
    /* rows on the lanes: as (128, p/128) tiles, no roll along the lanes */
    sort_tile_t t;
    sort_tile_init(b, &t, l->vis_rank - 1, l->vis, l->p);
    for (uint32_t a = 0; a < m; a++) arrays[a] = sort_tile_from_line(b, &t, arrays[a]);
    sort_tile_range(b, &t, arrays, m, nk, first_level, last_level, dir_bit);
    for (uint32_t a = 0; a < m; a++)
      arrays[a] = sort_tile_to_line(b, &t, arrays[a], vis_type(l, TSR_DTYPE_I32));
    return;
  }
  if (m > SORT_MAX_ARRAYS) {
    kb_fail(b, TSR_STATUS(TSR_UNIMPLEMENTED, "sort: %u arrays in the network (at most %d)", m,
                          SORT_MAX_ARRAYS));
    return;
  }
  int64_t levels = 0;
  while (((int64_t)1 << levels) < l->p) levels++;
  tsr_ir_value_t *pos = sort_positions(b, l);
  tsr_ir_value_t *one = kb_i32(b, 1), *zero = kb_i32(b, 0);
  int64_t ax = l->vis_axis;
  /* A single key: min and max instead of compares. */
  bool minmax = nk == 1;

  if (last_level <= 0 || last_level > levels) last_level = levels;
  kb_for_t outer = kb_begin_for(b, kb_i32(b, first_level), kb_i32(b, last_level + 1), arrays, m);
  tsr_ir_value_t *lk = kb_for_iv(&outer);
  tsr_ir_value_t *cur[SORT_MAX_ARRAYS];
  for (uint32_t a = 0; a < m; a++) cur[a] = kb_for_carried(&outer, a);
  tsr_ir_value_t *k = dir_bit > 0 ? kb_i32(b, dir_bit) : kb_binary(b, "shl", one, lk);
  tsr_ir_value_t *asc = kb_compare(b, "eq", kb_binary(b, "and", pos, k), zero);
  tsr_ir_value_t *desc = minmax ? NULL : kb_unary(b, "not", asc);
  tsr_ir_value_t *lk_minus_1 = kb_binary(b, "sub", lk, one);

  kb_for_t inner = kb_begin_for(b, zero, lk, cur, m);
  tsr_ir_value_t *t = kb_for_iv(&inner);
  tsr_ir_value_t *x[SORT_MAX_ARRAYS] = {0}, *partner[SORT_MAX_ARRAYS] = {0};
  tsr_ir_value_t *next[SORT_MAX_ARRAYS] = {0};
  for (uint32_t a = 0; a < m; a++) x[a] = kb_for_carried(&inner, a);
  tsr_ir_value_t *j = kb_binary(b, "shl", one, kb_binary(b, "sub", lk_minus_1, t));
  tsr_ir_value_t *up = kb_binary(b, "sub", kb_i32(b, l->p), j);
  tsr_ir_value_t *lower = kb_compare(b, "eq", kb_binary(b, "and", pos, j), zero);
  /* i1 logic, no select of i1 blocks: Mosaic cannot lay those out
   * ("Invalid input layout" on the arith.extsi it makes of them). */
  tsr_ir_value_t *want_max = kb_binary(b, "xor", lower, asc);
  for (uint32_t a = 0; a < m; a++) {
    tsr_ir_value_t *above = kb_roll(b, x[a], up, ax); /* x[i + j] */
    tsr_ir_value_t *below = kb_roll(b, x[a], j, ax);  /* x[i - j] */
    partner[a] = kb_select(b, lower, above, below);
  }
  if (minmax) { /* one key: min/max, and the others follow where it changed */
    tsr_ir_value_t *lo = kb_binary(b, "min", x[0], partner[0]);
    tsr_ir_value_t *hi = kb_binary(b, "max", x[0], partner[0]);
    next[0] = kb_select(b, want_max, hi, lo);
    tsr_ir_value_t *take = m > 1 ? kb_compare(b, "ne", next[0], x[0]) : NULL;
    for (uint32_t a = 1; a < m; a++) next[a] = kb_select(b, take, partner[a], x[a]);
  } else {
    tsr_ir_value_t *partner_less = sort_lex_less(b, partner, x, nk);
    tsr_ir_value_t *self_less = sort_lex_less(b, x, partner, nk);
    tsr_ir_value_t *want_min = kb_binary(b, "xor", lower, desc);
    tsr_ir_value_t *take = kb_binary(b, "or", kb_binary(b, "and", want_min, partner_less),
                                     kb_binary(b, "and", want_max, self_less));
    for (uint32_t a = 0; a < m; a++) next[a] = kb_select(b, take, partner[a], x[a]);
  }
  kb_end_for(b, &inner, next, m);
  tsr_ir_value_t *after[SORT_MAX_ARRAYS];
  for (uint32_t a = 0; a < m; a++) after[a] = kb_for_result(&inner, a);
  kb_end_for(b, &outer, after, m);
  for (uint32_t a = 0; a < m; a++) arrays[a] = kb_for_result(&outer, a);
}
