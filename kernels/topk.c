/* tsr_kernels_topk: the k largest (or smallest) elements along an axis and
 * their indices, as jax.lax.top_k (tessera/kernels.h), on (key, position)
 * pairs: the key in the IEEE total order, ties by lower position. A block
 * keeps its best K by the slab network (unrolled over 128-lane or 8-row
 * slices), the column network (loops on an (L, 128) tile), the folding
 * network or a full sort, whichever fits; rows longer than a block run as
 * a grid over the row's blocks with a running best K in VMEM scratch.
 * docs/kernels.md, "Top-k". */
#include <string.h>

#include "kernels/sort_internal.h"

static tsr_ir_value_t *slice_axis(kb_t *b, const sort_layout_t *l, tsr_ir_value_t *v,
                                  int64_t start, int64_t stop);

/* The first `k` positions of `v` along the layout's axis. */
static tsr_ir_value_t *first_k(kb_t *b, const sort_layout_t *l, tsr_ir_value_t *v, int64_t k) {
  if (!v) return NULL;
  if (k != v->type.dims[l->vis_axis]) return slice_axis(b, l, v, 0, k);
  return v;
}

/* Positions start..stop of `v` (the layout's vis shape, any extent on the
 * axis) along the axis. */
static tsr_ir_value_t *slice_axis(kb_t *b, const sort_layout_t *l, tsr_ir_value_t *v,
                                  int64_t start, int64_t stop) {
  if (!v) return NULL;
  tsr_ir_index_t idx[TSR_MAX_RANK];
  int64_t dims[TSR_MAX_RANK];
  for (uint32_t d = 0; d < l->vis_rank; d++) {
    dims[d] = v->type.dims[d];
    idx[d] = (tsr_ir_index_t){TSR_INDEX_FULL, -1, 0, dims[d], dims[d], 1};
  }
  idx[l->vis_axis] = kb_slice(start, stop);
  dims[l->vis_axis] = stop - start;
  tsr_ir_type_t t = kb_vec((tsr_dtype_t)v->type.dtype, l->vis_rank, dims);
  tsr_ir_op_params_t p = {.mnemonic = "slice", .operands = &v, .num_operands = 1,
                          .result_types = &t, .num_results = 1, .indices = idx,
                          .num_indices = l->vis_rank};
  return kb_op(b, &p, NULL);
}

/* The layout narrowed to `width` positions along the axis. */
static sort_layout_t narrowed(const sort_layout_t *l, int64_t width) {
  sort_layout_t n = *l;
  n.p = n.n = width;
  n.vis[n.vis_axis] = width;
  return n;
}

/* Top-k by folding (a partial network) on (key, position), both i32 and
 * distinct: runs of K (a power of two >= k) sorted, the lower half of the
 * row ascending and the upper descending; then, while the row is at least
 * 2 x max(K, 128) wide, fold it: the lexicographic min of its two halves
 * (each pair of runs, ascending against descending, keeps the K smallest
 * of both as a bitonic run), then the runs sorted again by the network's
 * last level (half-cleaners), the new lower half ascending and upper
 * descending. Each fold halves the work; a full sort of what is left ends
 * it. Halves of at least 128 keep the slices lane-aligned for a TPU. */
static void fold_topk(kb_t *b, const sort_layout_t *l, tsr_ir_value_t **arrays, int64_t kk) {
  int lk = log2_of(kk);
  int64_t width = l->p;
  sort_layout_t cur = narrowed(l, width);
  if (lk > 1) sort_network_range(b, &cur, arrays, 2, 2, 1, lk - 1, 0, true);
  sort_network_range(b, &cur, arrays, 2, 2, lk, lk, width / 2, true);
  int64_t floor_width = kk > 128 ? kk : 128;
  while (width / 2 >= floor_width && width / 2 >= kk) {
    int64_t half = width / 2;
    tsr_ir_value_t *lo[2], *hi[2];
    for (int a = 0; a < 2; a++) {
      lo[a] = slice_axis(b, &cur, arrays[a], 0, half);
      hi[a] = slice_axis(b, &cur, arrays[a], half, width);
    }
    tsr_ir_value_t *take = sort_lex_less(b, hi, lo, 2);
    for (int a = 0; a < 2; a++) arrays[a] = kb_select(b, take, hi[a], lo[a]);
    width = half;
    cur = narrowed(l, width);
    if (width > kk)
      sort_network_range(b, &cur, arrays, 2, 2, lk, lk, width / 2, true);
    else
      sort_network_range(b, &cur, arrays, 2, 2, lk, lk, 0, true);
  }
  if (width > kk) sort_network_range(b, &cur, arrays, 2, 2, 1, 0, 0, true);
}

/* ---- the column network: rows on the lanes as (lead..., L, 128) ----
 *
 * Top-k needs the best K, not an order of the block, so the block's
 * positions may sit anywhere: a row of p = 128 L positions is reshaped
 * (row-major, the lanes kept whole, as Mosaic wants) to L rows of 128
 * lanes, and each lane is a column of L elements. Every exchange is along
 * the rows (a roll along the second-minor axis: vectorized on the cpu
 * backend, sublane rotates on a TPU) and every fold is a static slice:
 *  1. runs of K along each column are sorted (the bitonic levels 1..log2 K);
 *  2. the rows are folded, L -> L/2 -> .. -> K: the lexicographic min of the
 *     lower and upper halves (an ascending run against a descending one
 *     keeps the best K of both, bitonic), then the network's last level
 *     (half-cleaners at distances K/2..1) sorts the runs again, the new
 *     halves in opposite directions;
 *  3. the lanes are folded the same way, 128 -> 64 -> .. -> 1 (slices of
 *     lanes; libtpu compiles them);
 * leaving (lead..., K, 1): the best K, best first. Keys and positions are
 * distinct as pairs, so "partner before me" decides an exchange alone. */

typedef struct columns {
  uint32_t rank;              /* lead rank + 2 */
  int64_t dims[TSR_MAX_RANK]; /* lead..., rows, lanes */
} columns_t;

static tsr_ir_value_t *col_slice(kb_t *b, tsr_ir_value_t *v, uint32_t axis, int64_t start,
                                 int64_t stop) {
  if (!v) return NULL;
  uint32_t r = v->type.rank;
  tsr_ir_index_t idx[TSR_MAX_RANK];
  int64_t dims[TSR_MAX_RANK];
  for (uint32_t d = 0; d < r; d++) {
    dims[d] = v->type.dims[d];
    idx[d] = (tsr_ir_index_t){TSR_INDEX_FULL, -1, 0, dims[d], dims[d], 1};
  }
  idx[axis] = kb_slice(start, stop);
  dims[axis] = stop - start;
  tsr_ir_type_t t = kb_vec((tsr_dtype_t)v->type.dtype, r, dims);
  tsr_ir_op_params_t p = {.mnemonic = "slice", .operands = &v, .num_operands = 1,
                          .result_types = &t, .num_results = 1, .indices = idx,
                          .num_indices = r};
  return kb_op(b, &p, NULL);
}

/* (key, position) pairs: a before c (i1). */
static tsr_ir_value_t *pair_less(kb_t *b, tsr_ir_value_t *const *a, tsr_ir_value_t *const *c) {
  tsr_ir_value_t *tie = kb_binary(b, "and", kb_compare(b, "eq", a[0], c[0]),
                                  kb_compare(b, "lt", a[1], c[1]));
  return kb_binary(b, "or", kb_compare(b, "lt", a[0], c[0]), tie);
}

static tsr_ir_value_t *iota_of(kb_t *b, const columns_t *c, uint32_t axis) {
  return kb_iota(b, kb_vec(TSR_DTYPE_I32, c->rank, c->dims), axis);
}

/* `iota & bit == 0` (i1). */
static tsr_ir_value_t *bit_clear(kb_t *b, tsr_ir_value_t *iota, tsr_ir_value_t *bit) {
  return kb_compare(b, "eq", kb_binary(b, "and", iota, bit), kb_i32(b, 0));
}

/* Exchanges at distances 2^(lk-1) .. 1 along the rows (a `for` over the
 * distance), ascending where `asc`, descending elsewhere. */
static void col_stages(kb_t *b, const columns_t *c, tsr_ir_value_t **x, tsr_ir_value_t *row,
                       tsr_ir_value_t *asc, tsr_ir_value_t *lk) {
  uint32_t ax = c->rank - 2;
  tsr_ir_value_t *one = kb_i32(b, 1);
  kb_for_t loop = kb_begin_for(b, kb_i32(b, 0), lk, x, 2);
  tsr_ir_value_t *t = kb_for_iv(&loop);
  tsr_ir_value_t *y[2] = {kb_for_carried(&loop, 0), kb_for_carried(&loop, 1)};
  tsr_ir_value_t *j = kb_binary(b, "shl", one,
                                kb_binary(b, "sub", kb_binary(b, "sub", lk, one), t));
  tsr_ir_value_t *up = kb_binary(b, "sub", kb_i32(b, c->dims[ax]), j);
  tsr_ir_value_t *lower = bit_clear(b, row, j);
  tsr_ir_value_t *want_max = kb_binary(b, "xor", lower, asc);
  tsr_ir_value_t *partner[2];
  for (int a = 0; a < 2; a++)
    partner[a] = kb_select(b, lower, kb_roll(b, y[a], up, ax), kb_roll(b, y[a], j, ax));
  /* distinct pairs: the partner wins when it is smaller and the min is
   * wanted, or larger and the max is */
  tsr_ir_value_t *take = kb_binary(b, "xor", pair_less(b, partner, y), want_max);
  for (int a = 0; a < 2; a++) y[a] = kb_select(b, take, partner[a], y[a]);
  kb_end_for(b, &loop, y, 2);
  for (int a = 0; a < 2; a++) x[a] = kb_for_result(&loop, a);
}

/* The fold along `axis`: the lexicographic min of the two halves. */
static void col_fold(kb_t *b, columns_t *c, tsr_ir_value_t **x, uint32_t axis) {
  int64_t half = c->dims[axis] / 2;
  tsr_ir_value_t *lo[2], *hi[2];
  for (int a = 0; a < 2; a++) {
    lo[a] = col_slice(b, x[a], axis, 0, half);
    hi[a] = col_slice(b, x[a], axis, half, 2 * half);
  }
  tsr_ir_value_t *take = pair_less(b, hi, lo);
  for (int a = 0; a < 2; a++) x[a] = kb_select(b, take, hi[a], lo[a]);
  c->dims[axis] = half;
}

/* Steps 2 and 3 of the column network from `x` (rows sorted in runs of K,
 * each run in the direction the next fold wants; with `first_sorted` the
 * runs need no re-sorting before the first fold), ending with the best K
 * of each row in arrays (vis shape, K on the axis). */
static void columns_finish(kb_t *b, const sort_layout_t *l, columns_t *cp, tsr_ir_value_t **x,
                           int64_t kk, tsr_ir_value_t *row, bool first_sorted,
                           tsr_ir_value_t **arrays) {
  columns_t c = *cp;
  uint32_t rows_ax = c.rank - 2, lanes_ax = c.rank - 1;
  int lk = log2_of(kk);
  for (;;) {
    bool on_rows = c.dims[rows_ax] > kk;
    int64_t width = on_rows ? c.dims[rows_ax] : c.dims[lanes_ax];
    tsr_ir_value_t *asc;
    if (width == 1) {
      asc = kb_const_i(b, kb_vec(TSR_DTYPE_I1, c.rank, c.dims), 1);
    } else {
      tsr_ir_value_t *iota = on_rows ? row : iota_of(b, &c, lanes_ax);
      asc = bit_clear(b, iota, kb_i32(b, width / 2));
    }
    if (lk > 0 && !first_sorted) col_stages(b, &c, x, row, asc, kb_i32(b, lk));
    first_sorted = false;
    if (width == 1) break;
    col_fold(b, &c, x, on_rows ? rows_ax : lanes_ax);
    row = iota_of(b, &c, rows_ax);
  }
  for (int a = 0; a < 2; a++) {
    int64_t dims[TSR_MAX_RANK];
    memcpy(dims, l->vis, sizeof dims);
    dims[l->vis_axis] = kk;
    arrays[a] = kb_reshape(b, x[a], kb_vec(TSR_DTYPE_I32, l->vis_rank, dims));
  }
}

/* ---- slabs: the column network unrolled over the row's 128-lane slices ----
 *
 * With 8 rows or more in a block, the slices x[..., 128 r : 128 (r + 1)]
 * of a block are whole vregs (8, 128) on a TPU and 1024-element vectors on
 * a CPU; with L of them, each (row, lane) is a column of L elements, one
 * per slab. The column network's steps 1 and 2 then need no roll, no
 * direction mask and no loop: every compare-exchange is between two slabs
 * named at generation time, min to the lower. Runs are sorted ascending in
 * the network's "flip" form (the first stage of each level pairs i with
 * its mirror), folds pair slab i of one run with slab K-1-i of the other
 * (the mirror: an ascending run against its reverse). The K slabs left are
 * then the rows of a (lead..., K, 128) tile, the upper 64 lanes' columns
 * reversed, and step 3 folds the lanes as the column network does. */

/* slab[lo], slab[hi] = the smaller and larger (key, position) pair. */
static void slab_exchange(kb_t *b, tsr_ir_value_t **key, tsr_ir_value_t **pos, int64_t lo,
                          int64_t hi) {
  tsr_ir_value_t *l[2] = {key[lo], pos[lo]}, *h[2] = {key[hi], pos[hi]};
  tsr_ir_value_t *swap = pair_less(b, h, l);
  key[lo] = kb_select(b, swap, h[0], l[0]);
  pos[lo] = kb_select(b, swap, h[1], l[1]);
  key[hi] = kb_select(b, swap, l[0], h[0]);
  pos[hi] = kb_select(b, swap, l[1], h[1]);
}

/* Half-cleaners at distances size/2 .. 1 on the runs of `size` slabs from
 * `first` to `first + count`. */
static void slab_clean(kb_t *b, tsr_ir_value_t **key, tsr_ir_value_t **pos, int64_t first,
                       int64_t count, int64_t size) {
  for (int64_t j = size / 2; j >= 1; j /= 2)
    for (int64_t r = first; r < first + count; r++)
      if (!(r & j)) slab_exchange(b, key, pos, r, r + j);
}

/* Compare-exchanges of the slab network for L slabs and K (its size in
 * ops is about 9 times this). */
static int64_t slab_exchanges(int64_t slabs, int64_t kk) {
  int lk = log2_of(kk);
  int64_t n = slabs / 2 * lk * (lk + 1) / 2;
  for (int64_t runs = slabs / kk; runs > 1; runs /= 2) n += runs / 2 * kk * (1 + lk) / 2;
  return n;
}

enum { MAX_SLABS = 64, MAX_SLAB_EXCHANGES = 400 };

/* Elements of a block per position of its axis. */
static int64_t lead_of(const sort_layout_t *l) {
  int64_t lead = 1;
  for (uint32_t d = 0; d < l->vis_rank; d++)
    if (d != l->vis_axis) lead *= l->vis[d];
  return lead;
}

/* Slabs of a block: with 8 rows or more, its 128-lane slices (lead...,
 * 128), L = p / 128 of them; with fewer, its (p / 128, 128) tile cut in
 * 8-row slices (lead..., 8, 128), p / 1024 of them, which fold their
 * sublanes before the lanes. */
static int64_t slab_rows(const sort_layout_t *l) { return lead_of(l) >= 8 ? 0 : 8; }

static int64_t slab_count(const sort_layout_t *l) {
  return slab_rows(l) ? l->p / 1024 : l->p / 128;
}

static bool slabs_fit(const sort_layout_t *l, int64_t kk) {
  int64_t slabs = slab_count(l);
  return l->vis_axis + 1 == l->vis_rank && l->vis_rank + 1 <= TSR_MAX_RANK &&
         slabs >= 2 && slabs >= kk && slabs <= MAX_SLABS &&
         slab_exchanges(slabs, kk) <= MAX_SLAB_EXCHANGES;
}

/* The block's tile (lead..., p / 128, 128) type (sublane slabs). */
static tsr_ir_type_t slab_tile_type(const sort_layout_t *l, int64_t rows) {
  int64_t dims[TSR_MAX_RANK];
  for (uint32_t d = 0; d + 1 < l->vis_rank; d++) dims[d] = l->vis[d];
  dims[l->vis_rank - 1] = rows;
  dims[l->vis_rank] = 128;
  return kb_vec(TSR_DTYPE_I32, l->vis_rank + 1, dims);
}

/* Slab i of `v`: lanes (vis shape) or rows of the tile (vis_rank + 1). */
static tsr_ir_value_t *slab_at(kb_t *b, const sort_layout_t *l, tsr_ir_value_t *v, int64_t i) {
  int64_t r = slab_rows(l);
  if (!r) return col_slice(b, v, l->vis_axis, 128 * i, 128 * (i + 1));
  return col_slice(b, v, l->vis_rank - 1, r * i, r * (i + 1));
}

/* The `n` slabs side by side (lanes, or the tile's rows). */
static tsr_ir_value_t *slab_join(kb_t *b, const sort_layout_t *l, tsr_ir_value_t **slabs,
                                 int64_t n) {
  if (n == 1 || !slabs[0]) return slabs[0];
  const tsr_ir_value_t *first = slabs[0];
  int64_t dims[TSR_MAX_RANK];
  uint32_t rank = first->type.rank;
  memcpy(dims, first->type.dims, rank * sizeof *dims);
  int64_t axis = slab_rows(l) ? rank - 2 : rank - 1;
  dims[axis] *= n;
  tsr_ir_type_t t = kb_vec(TSR_DTYPE_I32, rank, dims);
  tsr_ir_op_params_t p = {.mnemonic = "concatenate", .operands = slabs,
                          .num_operands = (uint32_t)n, .result_types = &t, .num_results = 1,
                          .ints = &axis, .num_ints = 1};
  return kb_op(b, &p, NULL);
}

/* Fold the column's best K (ascending slabs) `other` into `key`/`pos`
 * (ascending): the mirror fold and half-cleaners. */
static void slabs_merge(kb_t *b, tsr_ir_value_t **key, tsr_ir_value_t **pos,
                        tsr_ir_value_t **other_key, tsr_ir_value_t **other_pos, int64_t kk) {
  for (int64_t i = 0; i < kk; i++) {
    tsr_ir_value_t *lo[2] = {key[i], pos[i]};
    tsr_ir_value_t *hi[2] = {other_key[kk - 1 - i], other_pos[kk - 1 - i]};
    tsr_ir_value_t *take = pair_less(b, hi, lo);
    key[i] = kb_select(b, take, hi[0], lo[0]);
    pos[i] = kb_select(b, take, hi[1], lo[1]);
  }
  slab_clean(b, key, pos, 0, kk, kk);
}

/* Steps 1 and 2: arrays (vis shape) -> key[0..K), pos[0..K): the slabs
 * of each column's best K, ascending. */
static void slabs_columns(kb_t *b, const sort_layout_t *l, tsr_ir_value_t **arrays, int64_t kk,
                          tsr_ir_value_t **key, tsr_ir_value_t **pos) {
  int64_t slabs = slab_count(l);
  tsr_ir_value_t *src[2] = {arrays[0], arrays[1]};
  if (slab_rows(l))
    for (int a = 0; a < 2; a++) src[a] = kb_reshape(b, arrays[a], slab_tile_type(l, l->p / 128));
  for (int64_t r = 0; r < slabs; r++) {
    key[r] = slab_at(b, l, src[0], r);
    pos[r] = slab_at(b, l, src[1], r);
  }
  /* 1. runs of K, ascending (the flip form) */
  for (int64_t size = 2; size <= kk; size *= 2) {
    for (int64_t s = 0; s < slabs; s += size)
      for (int64_t i = 0; i < size / 2; i++) slab_exchange(b, key, pos, s + i, s + size - 1 - i);
    for (int64_t s = 0; s < slabs; s += size) slab_clean(b, key, pos, s, size, size / 2);
  }
  /* 2. fold the runs: run g against the mirror of run g + runs/2 (the
   * runs kept, 0 .. runs/2 - 1, are already in place) */
  for (int64_t runs = slabs / kk; runs > 1; runs /= 2)
    for (int64_t g = 0; g < runs / 2; g++) {
      int64_t a0 = g * kk, b0 = (g + runs / 2) * kk;
      slabs_merge(b, key + a0, pos + a0, key + b0, pos + b0, kk);
    }
}

/* Step 3: K ascending slabs -> the best K of each row in arrays (vis
 * shape, K on the axis). */
static void slabs_finish(kb_t *b, const sort_layout_t *l, tsr_ir_value_t **key,
                         tsr_ir_value_t **pos, int64_t kk, tsr_ir_value_t **arrays) {
  /* sublane slabs: fold the sublanes, 8 -> 1, each (sublane, lane) column
   * against its mirror in the upper sublanes */
  for (int64_t r = slab_rows(l); r > 1; r /= 2) {
    uint32_t sub = l->vis_rank - 1;
    tsr_ir_value_t *hk[MAX_SLABS], *hp[MAX_SLABS];
    for (int64_t i = 0; i < kk; i++) {
      hk[i] = col_slice(b, key[i], sub, r / 2, r);
      hp[i] = col_slice(b, pos[i], sub, r / 2, r);
      key[i] = col_slice(b, key[i], sub, 0, r / 2);
      pos[i] = col_slice(b, pos[i], sub, 0, r / 2);
    }
    slabs_merge(b, key, pos, hk, hp, kk);
  }
  /* 3. the K slabs as rows, the upper lanes' columns descending */
  columns_t c = {l->vis_rank + 1, {0}};
  for (uint32_t d = 0; d + 1 < l->vis_rank; d++) c.dims[d] = l->vis[d];
  uint32_t rows_ax = c.rank - 2;
  c.dims[rows_ax] = kk;
  c.dims[rows_ax + 1] = 128;
  tsr_ir_value_t *x[2];
  tsr_ir_value_t *lane = kb_iota(b, kb_type_of(key[0]), key[0] ? key[0]->type.rank - 1 : 0);
  tsr_ir_value_t *upper = kb_compare(b, "ge", lane, kb_i32(b, 64));
  for (int a = 0; a < 2; a++) {
    tsr_ir_value_t **sl = a ? pos : key;
    tsr_ir_value_t *parts[MAX_SLABS];
    for (int64_t i = 0; i < kk; i++) parts[i] = kb_select(b, upper, sl[kk - 1 - i], sl[i]);
    x[a] = kb_reshape(b, slab_join(b, l, parts, kk), kb_vec(TSR_DTYPE_I32, c.rank, c.dims));
  }
  columns_finish(b, l, &c, x, kk, iota_of(b, &c, rows_ax), true, arrays);
}

static void slabs_topk(kb_t *b, const sort_layout_t *l, tsr_ir_value_t **arrays, int64_t kk) {
  tsr_ir_value_t *key[MAX_SLABS], *pos[MAX_SLABS];
  slabs_columns(b, l, arrays, kk, key, pos);
  slabs_finish(b, l, key, pos, kk, arrays);
}

/* Whether the column network takes this layout's blocks for K. */
static bool columns_fit(const sort_layout_t *l, int64_t kk) {
  return l->vis_axis + 1 == l->vis_rank && l->vis_rank + 1 <= TSR_MAX_RANK && l->p >= 256 &&
         l->p / 128 >= kk;
}

/* arrays (vis shape) -> the best K, best first ((vis, K on the axis)). */
static void columns_topk(kb_t *b, const sort_layout_t *l, tsr_ir_value_t **arrays,
                         int64_t kk) {
  columns_t c = {l->vis_rank + 1, {0}};
  for (uint32_t d = 0; d + 1 < l->vis_rank; d++) c.dims[d] = l->vis[d];
  uint32_t rows_ax = c.rank - 2, lanes_ax = c.rank - 1;
  c.dims[rows_ax] = l->p / 128;
  c.dims[lanes_ax] = 128;
  tsr_ir_type_t t = kb_vec(TSR_DTYPE_I32, c.rank, c.dims);
  tsr_ir_value_t *x[2] = {kb_reshape(b, arrays[0], t), kb_reshape(b, arrays[1], t)};
  int lk = log2_of(kk);
  /* 1. runs of K: levels 1..lk-1 by the run pairs, level lk by the fold's
   * direction (the row halves', or the lane halves' when L = K) */
  tsr_ir_value_t *row = iota_of(b, &c, rows_ax);
  tsr_ir_value_t *one = kb_i32(b, 1);
  if (lk > 1) {
    kb_for_t level = kb_begin_for(b, one, kb_i32(b, lk), x, 2);
    tsr_ir_value_t *lv = kb_for_iv(&level);
    tsr_ir_value_t *y[2] = {kb_for_carried(&level, 0), kb_for_carried(&level, 1)};
    col_stages(b, &c, y, row, bit_clear(b, row, kb_binary(b, "shl", one, lv)), lv);
    kb_end_for(b, &level, y, 2);
    for (int a = 0; a < 2; a++) x[a] = kb_for_result(&level, a);
  }
  columns_finish(b, l, &c, x, kk, row, false, arrays);
}

/* The block's candidates, sorted (best first): `arrays` (key, position) of
 * the layout's vis shape, both i32, distinct as pairs, are sorted (or
 * folded, when the row on the lanes is at least 4K long) and cut to their
 * first `width` positions (width <= l->p). */
static void block_topk(kb_t *b, const sort_layout_t *l, tsr_ir_value_t **arrays, int64_t kk,
                       int64_t width) {
  bool slabs = slabs_fit(l, kk);
  if (slabs || columns_fit(l, kk)) {
    if (slabs)
      slabs_topk(b, l, arrays, kk);
    else
      columns_topk(b, l, arrays, kk);
    sort_layout_t kl = narrowed(l, kk);
    for (int a = 0; a < 2; a++) arrays[a] = first_k(b, &kl, arrays[a], width);
    return;
  }
  if (l->vis_axis + 1 == l->vis_rank && 4 * kk <= l->p && l->p >= 256)
    fold_topk(b, l, arrays, kk); /* a partial network */
  else
    sort_network(b, l, arrays, 2, 2);
  for (int a = 0; a < 2; a++) arrays[a] = first_k(b, l, arrays[a], width);
}

/* `v` (vis shape, `width` on the axis) followed by `extra` positions of
 * `fill` along the axis. */
static tsr_ir_value_t *pad_axis(kb_t *b, const sort_layout_t *l, tsr_ir_value_t *v,
                                int64_t extra, int64_t fill) {
  if (!v || extra <= 0) return v;
  int64_t dims[TSR_MAX_RANK];
  for (uint32_t d = 0; d < l->vis_rank; d++) dims[d] = v->type.dims[d];
  dims[l->vis_axis] = extra;
  tsr_ir_value_t *pad = kb_const_i(b, kb_vec(TSR_DTYPE_I32, l->vis_rank, dims), fill);
  dims[l->vis_axis] += v->type.dims[l->vis_axis];
  tsr_ir_type_t t = kb_vec(TSR_DTYPE_I32, l->vis_rank, dims);
  tsr_ir_value_t *ops[2] = {v, pad};
  int64_t axis = l->vis_axis;
  tsr_ir_op_params_t p = {.mnemonic = "concatenate", .operands = ops, .num_operands = 2,
                          .result_types = &t, .num_results = 1, .ints = &axis, .num_ints = 1};
  return kb_op(b, &p, NULL);
}

/* The longest block of a multi-block top-k (positions along the row). */
#define MAX_BLOCK ((int64_t)1 << 13)

/* Top-k of rows longer than a block (the last axis): a grid over the
 * row's blocks (the last grid dim, arbitrary) after the other dims'
 * tiles. Each step takes its block's best K (sorted, best first) and
 * merges them into a running top K in VMEM scratch: the scratch holds the
 * running best sorted worst first, as (not key, not position) ascending
 * (the same network sorts both); the elementwise lexicographic minimum of
 * the block's candidates (ascending) and the running best (descending) is
 * the best K of both as a bitonic sequence, which the network's last level
 * sorts. The last step sorts it best first and writes the outputs. */
/* A layout whose tiles of the other dims reach past a dim shorter than
 * their quantum (8 rows of a 3-row array) takes the dim whole instead:
 * sort_layout_plan rounds a tile it must shrink up to the quantum, which
 * pads the block with rows of nothing. */
static void whole_small_dims(sort_layout_t *l) {
  uint32_t v = 0;
  for (uint32_t d = 0; d < l->rank; d++) {
    if (l->block[d] == TSR_SQUEEZED) continue;
    if (d != l->axis && l->block[d] > l->dims[d]) {
      l->block[d] = l->dims[d];
      l->vis[v] = l->dims[d];
      l->grid[l->grid_dim_of[d]] = 1;
    }
    v++;
  }
}

/* The last step's outputs: the first k of the best K (key, position),
 * best first, as values (refs[1]) and indices (refs[2]). */
static void store_best(kb_t *b, const sort_layout_t *kl, const tsr_kernels_topk_params_t *params,
                       tsr_ir_value_t *const *refs, tsr_ir_value_t *const *best) {
  tsr_ir_value_t *v = sort_from_key(b, first_k(b, kl, best[0], params->k), params->dtype,
                                    SORT_ORDER_TOTAL, !params->smallest);
  sort_store(b, kl, refs[1], v);
  sort_store(b, kl, refs[2], first_k(b, kl, best[1], params->k));
}

static tsr_status_t topk_blocks(const tsr_kernels_topk_params_t *params, const sort_layout_t *row,
                                int64_t kk, tsr_ir_module_t **out_module) {
  int64_t bytes = (int64_t)tsr_dtype_size(params->dtype);
  int64_t per_position = 2 * (2 * bytes + 4) + 4 * 3 * 2;
  int64_t budget = params->vmem_budget_bytes ? params->vmem_budget_bytes : SORT_DEFAULT_BUDGET;
  int64_t n = row->n;
  /* The block: first the longest power of two of at most 65536 and p/2
   * that fits the budget with the running best (its 2 arrays, the merge's
   * values) and that the slab network takes (top-16 of (128, 100000) f32
   * on the cpu backend: blocks of 8192 by the column network 700 ms, of
   * 4096 by slabs 231 ms); else the longest of at most MAX_BLOCK that fits;
   * at least 128 positions (Pallas's lane rule) whatever the budget. */
  sort_layout_t l;
  int64_t dims[TSR_MAX_RANK];
  memcpy(dims, params->dims, sizeof dims);
  int64_t best_bytes = kk * 4 * 2 * 6; /* per row: the running best and the merge */
  int64_t left = budget - best_bytes;
  int64_t block = 0;
  for (int64_t b = row->p / 2 < 65536 ? row->p / 2 : 65536; b >= 256 && left > 0; b /= 2) {
    dims[row->axis] = b;
    tsr_status_t s = sort_layout_plan(params->rank, dims, params->axis, per_position, left,
                                      "topk", &l);
    if (!s) whole_small_dims(&l);
    bool ok = !s && slabs_fit(&l, kk);
    tsr_status_free(s);
    if (ok) {
      block = b;
      break;
    }
  }
  for (int64_t b = MAX_BLOCK < row->p / 2 ? MAX_BLOCK : row->p / 2; !block; b /= 2) {
    dims[row->axis] = b;
    tsr_status_t s = left > 0 ? sort_layout_plan(params->rank, dims, params->axis, per_position,
                                                 left, "topk", &l)
                              : TSR_STATUS(TSR_UNIMPLEMENTED, "over");
    if (!s) {
      block = b;
      break;
    }
    tsr_status_free(s);
    if (b <= 128) { /* over the budget: the smallest block, 8 rows at most */
      s = sort_layout_plan(params->rank, dims, params->axis, per_position,
                           per_position * b * 8, "topk", &l);
      if (s) return s;
      block = b;
    }
  }
  /* The smallest layout tiles every other dim by 8 rows at most: check the
   * running best against the budget (or the default, under a smaller one). */
  int64_t lead = 1;
  for (uint32_t d = 0; d < l.vis_rank; d++)
    if (d != l.vis_axis) lead *= l.vis[d];
  int64_t cap = budget > SORT_DEFAULT_BUDGET ? budget : SORT_DEFAULT_BUDGET;
  if (lead * best_bytes > cap)
    return TSR_STATUS(TSR_UNIMPLEMENTED,
                      "topk: k = %lld keeps a running top-%lld of about %lld bytes of VMEM per "
                      "block of rows, more than vmem_budget_bytes (%lld) allows",
                      (long long)params->k, (long long)kk, (long long)(lead * best_bytes),
                      (long long)cap);
  int64_t steps = (n + block - 1) / block;
  int64_t width = kk < block ? kk : block; /* the block's candidates */

  kb_t b;
  kb_begin(&b, "topk");
  tsr_ir_dim_semantics_t sem[TSR_MAX_RANK + 1];
  int64_t grid[TSR_MAX_RANK + 1];
  for (uint32_t d = 0; d < l.grid_rank; d++) {
    sem[d] = TSR_DIM_PARALLEL;
    grid[d] = l.grid[d];
  }
  /* rank 1: the plan's grid is one dummy dim of 1, which the steps take */
  uint32_t step_dim = params->rank == 1 ? 0 : l.grid_rank;
  sem[step_dim] = TSR_DIM_ARBITRARY;
  grid[step_dim] = steps;
  kb_grid(&b, step_dim + 1, grid, sem);
  /* Operands: x by (tiles..., step); the outputs by (tiles..., 0). */
  tsr_ir_value_t *refs[3];
  static const char *const names[3] = {"x", "values", "indices"};
  for (int o = 0; o < 3; o++) {
    int64_t adims[TSR_MAX_RANK], ablock[TSR_MAX_RANK];
    memcpy(adims, params->dims, sizeof adims);
    memcpy(ablock, l.block, sizeof ablock);
    if (o > 0) adims[l.axis] = ablock[l.axis] = params->k;
    tsr_ir_region_t *map = NULL;
    refs[o] = kb_operand(&b, o ? TSR_ROLE_OUT : TSR_ROLE_IN, names[o],
                         o == 2 ? TSR_DTYPE_I32 : params->dtype, l.rank, adims, TSR_SPACE_VMEM,
                         ablock, &map);
    if (!refs[o] || !map) continue;
    tsr_ir_region_t *body = b.region;
    b.region = map;
    tsr_ir_value_t *yields[TSR_MAX_RANK];
    tsr_ir_value_t *zero = kb_i32(&b, 0);
    for (uint32_t d = 0; d < l.rank; d++)
      yields[d] = d != l.axis        ? tsr_ir_region_arg(map, l.grid_dim_of[d])
                  : o == 0           ? tsr_ir_region_arg(map, step_dim)
                                     : zero;
    kb_yield(&b, yields, l.rank);
    b.region = body;
  }
  /* With slabs, the running best is each column's best K (K slabs side by
   * side): a step merges its block's columns, and only the last step folds
   * the lanes (top-16 of (128, 100000) f32, cpu backend: 231 ms with a
   * running best per row, 74 ms per column). */
  bool slab_best = slabs_fit(&l, kk);
  int64_t acc_dims[TSR_MAX_RANK];
  memcpy(acc_dims, l.vis, sizeof acc_dims);
  acc_dims[l.vis_axis] = slab_best ? 128 * kk : kk;
  uint32_t acc_rank = l.vis_rank;
  if (slab_best && slab_rows(&l)) { /* K sublane slabs: (lead..., 8 K, 128) */
    tsr_ir_type_t t = slab_tile_type(&l, slab_rows(&l) * kk);
    acc_rank = t.rank;
    memcpy(acc_dims, t.dims, acc_rank * sizeof *acc_dims);
  }
  tsr_ir_value_t *acc_ref[2] = {
      kb_scratch(&b, "best_key", TSR_SPACE_VMEM, TSR_DTYPE_I32, acc_rank, acc_dims),
      kb_scratch(&b, "best_pos", TSR_SPACE_VMEM, TSR_DTYPE_I32, acc_rank, acc_dims)};

  tsr_ir_value_t *step = kb_program_id(&b, step_dim);
  /* The first step: the running best is all padding (INT32_MAX, INT32_MAX),
   * stored as its complement for a running best per row. */
  kb_for_t first = kb_begin_if(&b, kb_compare(&b, "eq", step, kb_i32(&b, 0)));
  for (int a = 0; a < 2; a++)
    kb_store_all(&b, acc_ref[a], kb_const_i(&b, kb_vec(TSR_DTYPE_I32, acc_rank, acc_dims),
                                            slab_best ? INT32_MAX : INT32_MIN));
  kb_end_if(&b, &first);

  /* The block's keys at their positions in the row; past n, padding. */
  tsr_ir_value_t *pos = kb_binary(&b, "add", sort_positions(&b, &l),
                                  kb_binary(&b, "mul", step, kb_i32(&b, block)));
  tsr_ir_value_t *key = sort_key(&b, sort_load(&b, &l, refs[0]), params->dtype,
                                 SORT_ORDER_TOTAL, false, !params->smallest);
  if (n % block) {
    tsr_ir_value_t *pad = kb_compare(&b, "ge", pos, kb_i32(&b, n));
    key = kb_select(&b, pad, kb_const_i(&b, kb_type_of(key), INT32_MAX), key);
  }
  tsr_ir_value_t *cand[2] = {key, pos};
  if (slab_best) {
    tsr_ir_value_t *ck[MAX_SLABS], *cp[MAX_SLABS], *bk[MAX_SLABS], *bp[MAX_SLABS];
    slabs_columns(&b, &l, cand, kk, ck, cp);
    tsr_ir_value_t *best_all[2] = {kb_load_all(&b, acc_ref[0]), kb_load_all(&b, acc_ref[1])};
    for (int64_t i = 0; i < kk; i++) {
      bk[i] = slab_at(&b, &l, best_all[0], i);
      bp[i] = slab_at(&b, &l, best_all[1], i);
    }
    slabs_merge(&b, bk, bp, ck, cp, kk);
    kb_store_all(&b, acc_ref[0], slab_join(&b, &l, bk, kk));
    kb_store_all(&b, acc_ref[1], slab_join(&b, &l, bp, kk));
    kb_for_t last = kb_begin_if(&b, kb_compare(&b, "eq", step, kb_i32(&b, steps - 1)));
    tsr_ir_value_t *out[2];
    slabs_finish(&b, &l, bk, bp, kk, out);
    sort_layout_t kl = narrowed(&l, kk);
    store_best(&b, &kl, params, refs, out);
    kb_end_if(&b, &last);
    return kb_finish(&b, out_module);
  }
  block_topk(&b, &l, cand, kk, width);
  for (int a = 0; a < 2; a++) cand[a] = pad_axis(&b, &l, cand[a], kk - width, INT32_MAX);

  /* Merge: the best K of both, bitonic. */
  tsr_ir_value_t *best[2];
  for (int a = 0; a < 2; a++) best[a] = kb_unary(&b, "not", kb_load_all(&b, acc_ref[a]));
  tsr_ir_value_t *take = sort_lex_less(&b, cand, best, 2);
  tsr_ir_value_t *merged[2], *flipped[2];
  for (int a = 0; a < 2; a++) {
    merged[a] = kb_select(&b, take, cand[a], best[a]);
    flipped[a] = kb_unary(&b, "not", merged[a]);
  }
  sort_layout_t kl = narrowed(&l, kk);
  int lk = log2_of(kk);
  sort_network_range(&b, &kl, flipped, 2, 2, lk, lk, 0, true);
  for (int a = 0; a < 2; a++) kb_store_all(&b, acc_ref[a], flipped[a]);

  kb_for_t last = kb_begin_if(&b, kb_compare(&b, "eq", step, kb_i32(&b, steps - 1)));
  sort_network_range(&b, &kl, merged, 2, 2, lk, lk, 0, true);
  store_best(&b, &kl, params, refs, merged);
  kb_end_if(&b, &last);
  return kb_finish(&b, out_module);
}

tsr_status_t tsr_kernels_topk(const tsr_kernels_topk_params_t *params,
                              tsr_ir_module_t **out_module) {
  if (!params || !out_module)
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "topk: params and out_module must not be NULL");
  if ((unsigned)params->dtype >= TSR_DTYPE_COUNT)
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "topk: dtype is not a dtype (%d)",
                      (int)params->dtype);
  if (!sort_dtype_supported(params->dtype))
    return TSR_STATUS(TSR_UNIMPLEMENTED, "topk: dtype is %s; the library sorts f32, bf16, f16, "
                      "i32, u32, i16, u16, i8 and u8", tsr_dtype_name(params->dtype));
  int64_t bytes = (int64_t)tsr_dtype_size(params->dtype);
  /* The row as one block (INT64_MAX: the budget is checked below). */
  sort_layout_t row;
  tsr_status_t s = sort_layout_plan(params->rank, params->dims, params->axis, 1, INT64_MAX / 4,
                                    "topk", &row);
  if (s) return s;
  if (params->k < 1 || params->k > row.n)
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "topk: k must be 1..%lld (the axis's length), got %lld",
                      (long long)row.n, (long long)params->k);
  int64_t kk = pow2_at_least(params->k);
  sort_layout_t l;
  s = sort_layout_plan(params->rank, params->dims, params->axis,
                       2 * (2 * bytes + 4) + 4 * 3 * 2, params->vmem_budget_bytes, "topk", &l);
  /* Rows on the lanes longer than MAX_BLOCK, or over the budget: blocks
   * along the row (a row of 100000 f32, k = 16, on the cpu backend: 5.2 ms
   * in one block, 2.7 ms in blocks of 8192). */
  bool over = s && tsr_status_code(s) == TSR_UNIMPLEMENTED;
  if ((over || (!s && row.p > MAX_BLOCK)) && row.axis + 1 == row.rank && row.p >= 256) {
    tsr_status_free(s);
    return topk_blocks(params, &row, kk, out_module);
  }
  if (s && tsr_status_code(s) == TSR_UNIMPLEMENTED) {
    tsr_status_t named = TSR_STATUS(
        TSR_UNIMPLEMENTED,
        "topk: axis %u (%lld positions) needs more VMEM than vmem_budget_bytes (%lld) for one "
        "block; only the last axis is cut into blocks (move the axis last first)",
        row.axis, (long long)row.n, (long long)params->vmem_budget_bytes);
    tsr_status_free(s);
    return named;
  }
  if (s) return s;
  kb_t b;
  kb_begin(&b, "topk");
  tsr_ir_dim_semantics_t sem[TSR_MAX_RANK];
  for (uint32_t d = 0; d < l.grid_rank; d++) sem[d] = TSR_DIM_PARALLEL;
  kb_grid(&b, l.grid_rank, l.grid, sem);
  tsr_ir_value_t *x = sort_operand(&b, &l, TSR_ROLE_IN, "x", params->dtype, 0);
  tsr_ir_value_t *values = sort_operand(&b, &l, TSR_ROLE_OUT, "values", params->dtype, params->k);
  tsr_ir_value_t *indices = sort_operand(&b, &l, TSR_ROLE_OUT, "indices", TSR_DTYPE_I32,
                                         params->k);
  tsr_ir_value_t *pos = sort_positions(&b, &l);
  tsr_ir_value_t *key = sort_key(&b, sort_load(&b, &l, x), params->dtype, SORT_ORDER_TOTAL,
                                 false, !params->smallest);
  tsr_ir_value_t *arrays[2] = {sort_pad_key(&b, &l, pos, key), pos};
  block_topk(&b, &l, arrays, kk, params->k);
  tsr_ir_value_t *v = sort_from_key(&b, arrays[0], params->dtype, SORT_ORDER_TOTAL,
                                    !params->smallest);
  sort_store(&b, &l, values, v);
  sort_store(&b, &l, indices, arrays[1]);
  return kb_finish(&b, out_module);
}
