/* The kernel library's parameter defaults and op names (tessera/kernels.h).
 * The generators live in sort.c, topk.c, scan.c and reduce.c. */
#include <string.h>

#include "tessera/kernels.h"

void tsr_kernels_sort_params_initialize(tsr_kernels_sort_params_t *params) {
  memset(params, 0, sizeof *params);
  params->num_operands = 1;
  params->dtypes[0] = TSR_DTYPE_F32;
  params->num_keys = 1;
  params->axis = -1;
}

void tsr_kernels_topk_params_initialize(tsr_kernels_topk_params_t *params) {
  memset(params, 0, sizeof *params);
  params->dtype = TSR_DTYPE_F32;
  params->k = 1;
  params->axis = -1;
}

void tsr_kernels_cumulative_params_initialize(tsr_kernels_cumulative_params_t *params) {
  memset(params, 0, sizeof *params);
  params->op = TSR_KERNELS_SUM;
  params->dtype = TSR_DTYPE_F32;
  params->axis = -1;
}

void tsr_kernels_reduce_params_initialize(tsr_kernels_reduce_params_t *params) {
  memset(params, 0, sizeof *params);
  params->op = TSR_KERNELS_SUM;
  params->dtype = TSR_DTYPE_F32;
}

static const char *const op_names[TSR_KERNELS_OP_COUNT] = {
    [TSR_KERNELS_SUM] = "sum",       [TSR_KERNELS_PROD] = "prod",
    [TSR_KERNELS_MAX] = "max",       [TSR_KERNELS_MIN] = "min",
    [TSR_KERNELS_ARGMAX] = "argmax", [TSR_KERNELS_ARGMIN] = "argmin",
    [TSR_KERNELS_MEAN] = "mean",     [TSR_KERNELS_VARIANCE] = "var",
    [TSR_KERNELS_LOGSUMEXP] = "logsumexp",
};

const char *tsr_kernels_op_name(tsr_kernels_op_t op) {
  return (unsigned)op < TSR_KERNELS_OP_COUNT ? op_names[op] : NULL;
}

bool tsr_kernels_op_from_name(const char *name, tsr_kernels_op_t *out_op) {
  for (int op = 0; op < TSR_KERNELS_OP_COUNT; op++)
    if (name && strcmp(name, op_names[op]) == 0) {
      *out_op = (tsr_kernels_op_t)op;
      return true;
    }
  return false;
}
