/* The sorting network shared by kernels/sort.c and kernels/topk.c: how a
 * sort along one axis is tiled into blocks, the order-preserving i32 keys,
 * and the bitonic network on a block (docs/kernels.md, "Sort and top-k").
 * Internal to libtessera's kernel library.
 *
 * Layers: a file calls the files below it only, never one above it or
 * another of its own line; kbuild.c and library.c are below them all.
 *   sort.c, topk.c            the entry points: tsr_kernels_sort, _topk
 *   sort_host.c, sort_merge.c the host sort (sort and argsort ops); rows
 *                             longer than a block, merged through HBM
 *   sort_net.c                block layouts, operands, the network on a block
 *   sort_tile.c               the network on a row laid out as tiles
 *   sort_keys.c               keys, payloads, padding keys, the order */
#ifndef TESSERA_KERNELS_SORT_INTERNAL_H
#define TESSERA_KERNELS_SORT_INTERNAL_H

#include "kernels/kbuild.h"

/* The VMEM a sort or top-k block may use when vmem_budget_bytes is 0. */
#define SORT_DEFAULT_BUDGET ((int64_t)16 << 20)

/* The least power of two >= n (1 for n <= 1), and its exponent. */
static inline int64_t pow2_at_least(int64_t n) {
  int64_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

static inline int log2_of(int64_t p) {
  int l = 0;
  while (((int64_t)1 << l) < p) l++;
  return l;
}

/* How a sort along `axis` of an array is cut into blocks: the whole axis
 * (padded to the power of two `p`) in every block, the other dimensions
 * tiled (the last two by multiples of 128 and 8, the others squeezed), a
 * grid over the tiles, all parallel. */
typedef struct sort_layout {
  uint32_t rank;
  int64_t dims[TSR_MAX_RANK];
  uint32_t axis;                /* normalised */
  int64_t n;                    /* dims[axis] */
  int64_t p;                    /* the network's length: a power of two >= n */
  int64_t block[TSR_MAX_RANK];  /* TSR_SQUEEZED where squeezed */
  uint32_t grid_rank;
  int64_t grid[TSR_MAX_RANK];
  uint32_t grid_dim_of[TSR_MAX_RANK]; /* array dim -> grid dim (non-axis dims) */
  uint32_t vis_rank;            /* the block as the body sees it (rank >= 2) */
  int64_t vis[TSR_MAX_RANK];
  uint32_t vis_axis;
  bool reshape_1d;              /* a rank-1 block seen as (1, p) */
} sort_layout_t;

/* TSR_INVALID_ARGUMENT naming `entry` unless rank is 1..TSR_MAX_RANK, every
 * dim 1..2^31 and axis in -rank..rank-1. */
tsr_status_t sort_check_shape(uint32_t rank, const int64_t *dims, int32_t axis,
                              const char *entry);

/* Plans the layout; `bytes_per_position` is what one position of a block
 * costs in VMEM (operands double-buffered plus the network's values).
 * `entry` names the generator in messages. TSR_INVALID_ARGUMENT for a bad
 * shape or axis, TSR_UNIMPLEMENTED when even the smallest block is over
 * `budget`. */
tsr_status_t sort_layout_plan(uint32_t rank, const int64_t *dims, int32_t axis,
                              int64_t bytes_per_position, int64_t budget, const char *entry,
                              sort_layout_t *out);

/* Declares an in/out operand of the layout; `axis_size` > 0 replaces the
 * axis's extent (top-k's outputs: the array and its block take k). */
tsr_ir_value_t *sort_operand(kb_t *b, const sort_layout_t *l, tsr_ir_role_t role,
                             const char *name, tsr_dtype_t dtype, int64_t axis_size);
/* Loads a whole block as the network's (vis) shape; stores one back. */
tsr_ir_value_t *sort_load(kb_t *b, const sort_layout_t *l, tsr_ir_value_t *ref);
void sort_store(kb_t *b, const sort_layout_t *l, tsr_ir_value_t *ref, tsr_ir_value_t *value);

/* Key orders. */
typedef enum sort_order {
  SORT_ORDER_LAX,   /* jax.lax.sort: NaNs (either sign) after +inf */
  SORT_ORDER_TOTAL, /* the IEEE total order of the bits (jax.lax.top_k):
                       -NaN < -inf < ... < -0 < +0 < ... < +inf < NaN */
} sort_order_t;

/* The i32 key of a block `v` of `dtype` (any of the library's dtypes but
 * i1): signed comparison of keys is the order. `canonical`: keys of equal
 * values are equal (-0.0 == +0.0, all NaNs one key; not invertible);
 * else invertible (sort_from_key). `descending` reverses the order. */
tsr_ir_value_t *sort_key(kb_t *b, tsr_ir_value_t *v, tsr_dtype_t dtype, sort_order_t order,
                         bool canonical, bool descending);
tsr_ir_value_t *sort_from_key(kb_t *b, tsr_ir_value_t *key, tsr_dtype_t dtype,
                              sort_order_t order, bool descending);
/* A block as i32 bits carried through the network, and back. */
tsr_ir_value_t *sort_to_payload(kb_t *b, tsr_ir_value_t *v, tsr_dtype_t dtype);
tsr_ir_value_t *sort_from_payload(kb_t *b, tsr_ir_value_t *v, tsr_dtype_t dtype);

enum { SORT_MAX_ARRAYS = 16 };

/* Sorts the i32 blocks arrays[0..m) (vis shape) in place along the layout's
 * axis with a bitonic network in loops (the shifts are values, so the body
 * is the same ~10 + 4m ops for any length): ascending by the first `nk`
 * arrays compared lexicographically; the others follow. Positions >= n
 * must already hold keys that sort last. */
void sort_network(kb_t *b, const sort_layout_t *l, tsr_ir_value_t **arrays, uint32_t m,
                  uint32_t nk);
/* The network's levels first_level..log2(p) only: with first_level =
 * log2(p), the last merge (every run ascending, min to the lower position,
 * no exchange on ties): it sorts a block whose two halves are a bitonic
 * sequence. */
void sort_network_levels(kb_t *b, const sort_layout_t *l, tsr_ir_value_t **arrays, uint32_t m,
                         uint32_t nk, int64_t first_level);
/* Levels first..last (last <= 0: log2(p)) of the network on the layout's
 * axis; `dir_bit` > 0 replaces the runs' direction bit (bit k of the
 * position) by that bit for every level of the range; `tiles`: may use
 * sort_tile_t when the row is long enough. */
void sort_network_range(kb_t *b, const sort_layout_t *l, tsr_ir_value_t **arrays, uint32_t m,
                        uint32_t nk, int64_t first_level, int64_t last_level, int64_t dir_bit,
                        bool tiles);
/* a < c lexicographically over the first nk arrays (i1). */
tsr_ir_value_t *sort_lex_less(kb_t *b, tsr_ir_value_t *const *a, tsr_ir_value_t *const *c,
                              uint32_t nk);

/* A line of p positions (p a power of two >= 256) as a column-major
 * (R, L) = (128, p/128) tile behind `lead` dims (kernels/sort_tile.c):
 * position e at row e mod R, lane e / R. Exchanges at distances below R
 * are rolls along the rows; the others, rolls along the rows of the
 * transposed tile: no roll along the lanes, which the cpu backend's
 * lowering makes a scalar loop, and for Mosaic the load is a reshape that
 * keeps the lanes whole then a transpose. */
typedef struct sort_tile {
  uint32_t rank;               /* lead rank + 2 */
  int64_t dims[TSR_MAX_RANK];  /* lead..., R, L */
  int64_t p, rows, lanes;
  int log_r;
  tsr_ir_value_t *pos, *pos_t; /* positions in the (R, L) and (L, R) layouts */
  tsr_ir_value_t *row_iota;    /* the row, (R, L) layout */
} sort_tile_t;

bool sort_tile_fits(int64_t p, uint32_t lead_rank);
void sort_tile_init(kb_t *b, sort_tile_t *t, uint32_t lead_rank, const int64_t *lead,
                    int64_t p);
/* (lead..., p) -> (lead..., R, L); and back to `line` (its dtype is v's). */
tsr_ir_value_t *sort_tile_from_line(kb_t *b, const sort_tile_t *t, tsr_ir_value_t *v);
tsr_ir_value_t *sort_tile_to_line(kb_t *b, const sort_tile_t *t, tsr_ir_value_t *v,
                                  tsr_ir_type_t line);
/* Transposes the last two dims. */
tsr_ir_value_t *sort_tile_transpose(kb_t *b, tsr_ir_value_t *v);
/* The network's levels first_level..log2(p) on tiles. */
void sort_tile_levels(kb_t *b, const sort_tile_t *t, tsr_ir_value_t **arrays, uint32_t m,
                      uint32_t nk, int64_t first_level);
/* Levels first..last (last <= 0: log2(p)), `dir_bit` as in
 * sort_network_range. */
void sort_tile_range(kb_t *b, const sort_tile_t *t, tsr_ir_value_t **arrays, uint32_t m,
                     uint32_t nk, int64_t first_level, int64_t last_level, int64_t dir_bit);

/* tsr_kernels_sort for TSR_KERNELS_FOR_HOST (kernels/sort_host.c): the sort
 * and argsort ops on one block. */
tsr_status_t sort_host_generate(const tsr_kernels_sort_params_t *params,
                                tsr_ir_module_t **out_module);

/* The multi-block sort (kernels/sort_merge.c) of rows longer than a block:
 * blocks sorted in VMEM, then merged through HBM by DMAs. */
tsr_status_t sort_merge_generate(const tsr_kernels_sort_params_t *params, int64_t block,
                                 tsr_ir_module_t **out_module);
/* Whether tsr_kernels_sort takes the multi-block path, and its block (a
 * power of two), for these params. */
bool sort_merge_wanted(const tsr_kernels_sort_params_t *params, int64_t *out_block);
/* The merge's block when one block does not fit the budget: true for the
 * last axis and rows of 256 positions or more (blocks of p/2 at most). */
bool sort_merge_wanted_forced(const tsr_kernels_sort_params_t *params, int64_t *out_block);

/* The index of each position along the axis (i32, vis shape). */
tsr_ir_value_t *sort_positions(kb_t *b, const sort_layout_t *l);
/* `key` where the position is < n, INT32_MAX in the padding. */
tsr_ir_value_t *sort_pad_key(kb_t *b, const sort_layout_t *l, tsr_ir_value_t *positions,
                             tsr_ir_value_t *key);

bool sort_dtype_supported(tsr_dtype_t dtype);

#endif /* TESSERA_KERNELS_SORT_INTERNAL_H */
