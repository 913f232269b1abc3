/* tsr_kernels_sort: sort along an axis with a bitonic network in VMEM
 * (tessera/kernels.h). The network and the block layout (sort_net.c) and
 * the keys (sort_keys.c) are shared with top-k (sort_internal.h);
 * docs/kernels.md, "Sort and top-k". */
#include <stdio.h>

#include "kernels/sort_internal.h"

static tsr_status_t check_params(const tsr_kernels_sort_params_t *p) {
  if (p->num_operands < 1 || p->num_operands > TSR_KERNELS_MAX_OPERANDS)
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "sort: num_operands must be 1..%d, got %u",
                      TSR_KERNELS_MAX_OPERANDS, p->num_operands);
  if (p->num_keys < 1 || p->num_keys > p->num_operands)
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "sort: num_keys must be 1..num_operands (%u), got %u",
                      p->num_operands, p->num_keys);
  if (p->target != TSR_KERNELS_FOR_TPU && p->target != TSR_KERNELS_FOR_HOST)
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "sort: target must be TSR_KERNELS_FOR_TPU or "
                      "TSR_KERNELS_FOR_HOST, got %d", (int)p->target);
  for (uint32_t i = 0; i < p->num_operands; i++) {
    if ((unsigned)p->dtypes[i] >= TSR_DTYPE_COUNT)
      return TSR_STATUS(TSR_INVALID_ARGUMENT, "sort: dtypes[%u] is not a dtype (%d)", i,
                        (int)p->dtypes[i]);
    if (!sort_dtype_supported(p->dtypes[i]))
      return TSR_STATUS(TSR_UNIMPLEMENTED, "sort: dtypes[%u] is %s; the library sorts f32, bf16, "
                        "f16, i32, u32, i16, u16, i8 and u8", i, tsr_dtype_name(p->dtypes[i]));
  }
  return NULL;
}

tsr_status_t tsr_kernels_sort(const tsr_kernels_sort_params_t *params,
                              tsr_ir_module_t **out_module) {
  if (!params || !out_module)
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "sort: params and out_module must not be NULL");
  tsr_status_t s = check_params(params);
  if (s) return s;
  if (params->target == TSR_KERNELS_FOR_HOST) return sort_host_generate(params, out_module);
  int64_t merge_block = 0;
  if (sort_merge_wanted(params, &merge_block))
    return sort_merge_generate(params, merge_block, out_module);
  const uint32_t n_ops = params->num_operands, nk_user = params->num_keys;
  /* Arrays of the network: keys first (the user's, then maybe the index),
   * then payloads. A float key is canonical (-0.0 == +0.0, one NaN) when
   * equality decides something: a later key or stability; its operand's
   * values then travel as a payload too. */
  bool canonical[TSR_KERNELS_MAX_OPERANDS] = {0};
  uint32_t m = 0, nk = 0, payloads = 0;
  for (uint32_t i = 0; i < nk_user; i++) {
    tsr_dtype_t dt = params->dtypes[i];
    bool is_float = dt == TSR_DTYPE_F32 || dt == TSR_DTYPE_BF16 || dt == TSR_DTYPE_F16;
    canonical[i] = is_float && (params->stable || i + 1 < nk_user);
    if (canonical[i]) payloads++;
  }
  payloads += n_ops - nk_user;
  int64_t dims_bytes = 0;
  for (uint32_t i = 0; i < n_ops; i++) dims_bytes += (int64_t)tsr_dtype_size(params->dtypes[i]);
  /* The layout first (it knows whether the axis is padded). */
  sort_layout_t l;
  uint32_t m_max = nk_user + payloads + 1;
  int64_t per_position = 2 * (2 * dims_bytes + (params->return_indices ? 4 : 0)) + 4 * 3 * m_max;
  s = sort_layout_plan(params->rank, params->dims, params->axis, per_position,
                       params->vmem_budget_bytes, "sort", &l);
  if (s && tsr_status_code(s) == TSR_UNIMPLEMENTED &&
      sort_merge_wanted_forced(params, &merge_block)) { /* over the budget: merge */
    tsr_status_free(s);
    return sort_merge_generate(params, merge_block, out_module);
  }
  if (s) return s;
  bool padded = l.p != l.n;
  bool index_key = params->stable || (padded && (payloads > 0 || params->return_indices));
  bool index_array = index_key || params->return_indices;

  kb_t b;
  kb_begin(&b, "sort");
  tsr_ir_dim_semantics_t sem[TSR_MAX_RANK];
  for (uint32_t d = 0; d < l.grid_rank; d++) sem[d] = TSR_DIM_PARALLEL;
  kb_grid(&b, l.grid_rank, l.grid, sem);
  tsr_ir_value_t *in[TSR_KERNELS_MAX_OPERANDS], *out[TSR_KERNELS_MAX_OPERANDS], *idx_out = NULL;
  char name[16];
  for (uint32_t i = 0; i < n_ops; i++) {
    snprintf(name, sizeof name, "x%u", i);
    in[i] = sort_operand(&b, &l, TSR_ROLE_IN, name, params->dtypes[i], 0);
  }
  for (uint32_t i = 0; i < n_ops; i++) {
    snprintf(name, sizeof name, "y%u", i);
    out[i] = sort_operand(&b, &l, TSR_ROLE_OUT, name, params->dtypes[i], 0);
  }
  if (params->return_indices)
    idx_out = sort_operand(&b, &l, TSR_ROLE_OUT, "indices", TSR_DTYPE_I32, 0);

  tsr_ir_value_t *arrays[SORT_MAX_ARRAYS + 2];
  int32_t value_from[TSR_KERNELS_MAX_OPERANDS]; /* operand -> array holding its value */
  bool from_key[TSR_KERNELS_MAX_OPERANDS];
  tsr_ir_value_t *loaded[TSR_KERNELS_MAX_OPERANDS];
  tsr_ir_value_t *pos = sort_positions(&b, &l);
  for (uint32_t i = 0; i < n_ops; i++) loaded[i] = sort_load(&b, &l, in[i]);
  for (uint32_t i = 0; i < nk_user; i++) {
    tsr_ir_value_t *key = sort_key(&b, loaded[i], params->dtypes[i], SORT_ORDER_LAX,
                                   canonical[i], params->descending);
    arrays[m++] = sort_pad_key(&b, &l, pos, key);
    value_from[i] = canonical[i] ? -1 : (int32_t)(m - 1);
    from_key[i] = !canonical[i];
  }
  int32_t index_at = -1;
  if (index_key) {
    index_at = (int32_t)m;
    arrays[m++] = pos;
  }
  nk = m;
  for (uint32_t i = 0; i < n_ops; i++) {
    if (i < nk_user && !canonical[i]) continue;
    value_from[i] = (int32_t)m;
    from_key[i] = false;
    arrays[m++] = sort_to_payload(&b, loaded[i], params->dtypes[i]);
  }
  if (index_array && index_at < 0) {
    index_at = (int32_t)m;
    arrays[m++] = pos;
  }
  if (m > SORT_MAX_ARRAYS) {
    tsr_ir_module_t *dead = NULL;
    tsr_status_free(kb_finish(&b, &dead));
    tsr_ir_module_destroy(dead);
    return TSR_STATUS(TSR_UNIMPLEMENTED,
                      "sort: %u operands with these options need %u arrays in the network, "
                      "more than the %d it carries", n_ops, m, SORT_MAX_ARRAYS);
  }
  sort_network(&b, &l, arrays, m, nk);
  for (uint32_t i = 0; i < n_ops; i++) {
    tsr_ir_value_t *a = arrays[value_from[i]];
    tsr_ir_value_t *v = from_key[i] ? sort_from_key(&b, a, params->dtypes[i], SORT_ORDER_LAX,
                                                    params->descending)
                                    : sort_from_payload(&b, a, params->dtypes[i]);
    sort_store(&b, &l, out[i], v);
  }
  if (idx_out) sort_store(&b, &l, idx_out, arrays[index_at]);
  return kb_finish(&b, out_module);
}
