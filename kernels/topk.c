/* tsr_kernels_topk: the k largest (or smallest) elements along an axis and
 * their indices, as jax.lax.top_k (tessera/kernels.h): the sort network of
 * sort_internal.h on (key, position), descending by the key in the IEEE
 * total order, ties by lower position, then the first k positions. */
#include <string.h>

#include "kernels/sort_internal.h"

/* The first `k` positions of `v` along the layout's axis. */
static tsr_ir_value_t *first_k(kb_t *b, const sort_layout_t *l, tsr_ir_value_t *v, int64_t k) {
  if (!v) return NULL;
  tsr_ir_index_t idx[TSR_MAX_RANK];
  int64_t dims[TSR_MAX_RANK];
  for (uint32_t d = 0; d < l->vis_rank; d++) {
    dims[d] = l->vis[d];
    idx[d] = (tsr_ir_index_t){TSR_INDEX_FULL, -1, 0, l->vis[d], l->vis[d], 1};
  }
  if (k == l->vis[l->vis_axis]) return v;
  idx[l->vis_axis] = kb_slice(0, k);
  dims[l->vis_axis] = k;
  tsr_ir_type_t t = kb_vec((tsr_dtype_t)v->type.dtype, l->vis_rank, dims);
  tsr_ir_op_params_t p = {.mnemonic = "slice", .operands = &v, .num_operands = 1,
                          .result_types = &t, .num_results = 1, .indices = idx,
                          .num_indices = l->vis_rank};
  return kb_op(b, &p, NULL);
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
  sort_network(&b, &l, arrays, 2, 2);
  tsr_ir_value_t *v = sort_from_key(&b, first_k(&b, &l, arrays[0], params->k), params->dtype,
                                    SORT_ORDER_TOTAL, !params->smallest);
  sort_store(&b, &l, values, v);
  sort_store(&b, &l, indices, first_k(&b, &l, arrays[1], params->k));
  return kb_finish(&b, out_module);
}
