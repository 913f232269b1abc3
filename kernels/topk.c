/* tsr_kernels_topk: the k largest (or smallest) elements along an axis and
 * their indices, as jax.lax.top_k (tessera/kernels.h): the sort network of
 * sort_internal.h on (key, position), descending by the key in the IEEE
 * total order, ties by lower position, then the first k positions; rows
 * on the lanes at least 4k long are folded (fold_topk) instead of fully
 * sorted. */
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

static int log2_of(int64_t p) {
  int l = 0;
  while (((int64_t)1 << l) < p) l++;
  return l;
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
  sort_layout_t l;
  tsr_status_t s = sort_layout_plan(params->rank, params->dims, params->axis,
                                    2 * (2 * bytes + 4) + 4 * 3 * 2, params->vmem_budget_bytes,
                                    "topk", &l);
  if (s) return s;
  if (params->k < 1 || params->k > l.n)
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "topk: k must be 1..%lld (the axis's length), got %lld",
                      (long long)l.n, (long long)params->k);
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
  int64_t kk = 1;
  while (kk < params->k) kk <<= 1;
  if (l.vis_axis + 1 == l.vis_rank && 4 * kk <= l.p && l.p >= 256)
    fold_topk(&b, &l, arrays, kk); /* a partial network */
  else
    sort_network(&b, &l, arrays, 2, 2);
  tsr_ir_value_t *v = sort_from_key(&b, first_k(&b, &l, arrays[0], params->k), params->dtype,
                                    SORT_ORDER_TOTAL, !params->smallest);
  sort_store(&b, &l, values, v);
  sort_store(&b, &l, indices, first_k(&b, &l, arrays[1], params->k));
  return kb_finish(&b, out_module);
}
