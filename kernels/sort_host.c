/* tsr_kernels_sort for TSR_KERNELS_FOR_HOST: the interpreter and the cpu
 * backend only. The whole array is one block (VMEM budgets are a TPU's), and
 * the body is the `sort` op for one operand sorted ascending, else an
 * `argsort` of the keys and a `gather` of every operand by it. Both ops are
 * stable, which is one of the orders an unstable sort may give. Descending
 * keys are the canonical i32 keys of the network sort (sort_key), inverted:
 * their ascending stable order is the descending stable order, NaNs first.
 * docs/kernels.md, "Sort and top-k". */
#include <stdio.h>

#include "kernels/sort_internal.h"

tsr_status_t sort_host_generate(const tsr_kernels_sort_params_t *params,
                                tsr_ir_module_t **out_module) {
  const uint32_t rank = params->rank, n_ops = params->num_operands;
  TSR_RETURN_IF_ERROR(sort_check_shape(rank, params->dims, params->axis, "sort"));
  const int64_t axis = params->axis < 0 ? params->axis + (int64_t)rank : params->axis;
  kb_t b;
  kb_begin(&b, "sort");
  tsr_ir_value_t *in[TSR_KERNELS_MAX_OPERANDS], *out[TSR_KERNELS_MAX_OPERANDS], *idx_out = NULL;
  char name[16];
  for (uint32_t i = 0; i < n_ops; i++) {
    snprintf(name, sizeof name, "x%u", i);
    in[i] = kb_operand(&b, TSR_ROLE_IN, name, params->dtypes[i], rank, params->dims, TSR_SPACE_VMEM, NULL, NULL);
  }
  for (uint32_t i = 0; i < n_ops; i++) {
    snprintf(name, sizeof name, "y%u", i);
    out[i] = kb_operand(&b, TSR_ROLE_OUT, name, params->dtypes[i], rank, params->dims, TSR_SPACE_VMEM, NULL, NULL);
  }
  if (params->return_indices)
    idx_out = kb_operand(&b, TSR_ROLE_OUT, "indices", TSR_DTYPE_I32, rank, params->dims, TSR_SPACE_VMEM, NULL, NULL);
  tsr_ir_value_t *loaded[TSR_KERNELS_MAX_OPERANDS];
  for (uint32_t i = 0; i < n_ops; i++) loaded[i] = kb_load_all(&b, in[i]);
  if (n_ops == 1 && !params->return_indices && !params->descending) {
    kb_store_all(&b, out[0], kb_sort(&b, loaded[0], axis));
    return kb_finish(&b, out_module);
  }
  tsr_ir_value_t *keys[TSR_KERNELS_MAX_OPERANDS];
  for (uint32_t i = 0; i < params->num_keys; i++)
    keys[i] = params->descending
                  ? sort_key(&b, loaded[i], params->dtypes[i], SORT_ORDER_LAX, true, true)
                  : loaded[i];
  tsr_ir_value_t *order = kb_argsort(&b, keys, params->num_keys, axis);
  for (uint32_t i = 0; i < n_ops; i++) kb_store_all(&b, out[i], kb_gather(&b, loaded[i], order, axis));
  if (idx_out) kb_store_all(&b, idx_out, order);
  return kb_finish(&b, out_module);
}
