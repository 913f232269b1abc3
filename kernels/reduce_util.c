/* Shared pieces of the reduction and scan generators (reduce_util.h). */
#include "kernels/reduce_util.h"

#include <math.h>
#include <stdint.h>

bool ru_is_float(tsr_dtype_t dtype) { return tsr_dtype_class(dtype) == TSR_CLASS_FLOAT; }

tsr_dtype_t ru_acc_dtype(tsr_dtype_t dtype) {
  return ru_is_float(dtype) ? TSR_DTYPE_F32 : TSR_DTYPE_I32;
}

static bool orders(tsr_kernels_op_t op) {
  return op == TSR_KERNELS_MAX || op == TSR_KERNELS_MIN || op == TSR_KERNELS_ARGMAX ||
         op == TSR_KERNELS_ARGMIN;
}

tsr_ir_value_t *ru_to_acc(kb_t *b, tsr_ir_value_t *v, tsr_dtype_t dtype, tsr_kernels_op_t op) {
  tsr_dtype_t acc = ru_acc_dtype(dtype);
  if (dtype != TSR_DTYPE_U32) return dtype == acc ? v : kb_convert(b, v, acc);
  v = kb_bitcast(b, v, TSR_DTYPE_I32);
  if (!orders(op)) return v;
  return kb_binary(b, "xor", v, kb_const_i(b, kb_type_of(v), INT32_MIN));
}

tsr_ir_value_t *ru_from_acc(kb_t *b, tsr_ir_value_t *v, tsr_dtype_t dtype, tsr_kernels_op_t op) {
  if (dtype != TSR_DTYPE_U32) return dtype == ru_acc_dtype(dtype) ? v : kb_convert(b, v, dtype);
  if (orders(op)) v = kb_binary(b, "xor", v, kb_const_i(b, kb_type_of(v), INT32_MIN));
  return kb_bitcast(b, v, TSR_DTYPE_U32);
}

tsr_ir_value_t *ru_identity(kb_t *b, tsr_kernels_op_t op, tsr_ir_type_t type) {
  tsr_dtype_t dt = (tsr_dtype_t)type.dtype;
  bool is_max = op == TSR_KERNELS_MAX || op == TSR_KERNELS_ARGMAX;
  bool is_min = op == TSR_KERNELS_MIN || op == TSR_KERNELS_ARGMIN;
  if (ru_is_float(dt)) {
    if (is_max) return kb_const_f(b, type, -INFINITY);
    if (is_min) return kb_const_f(b, type, INFINITY);
    return kb_const_f(b, type, op == TSR_KERNELS_PROD ? 1.0 : 0.0);
  }
  bool is_unsigned = dt == TSR_DTYPE_U32;
  if (is_max) return kb_const_i(b, type, is_unsigned ? 0 : INT32_MIN);
  if (is_min) return kb_const_i(b, type, is_unsigned ? (int64_t)UINT32_MAX : INT32_MAX);
  return kb_const_i(b, type, op == TSR_KERNELS_PROD ? 1 : 0);
}

const char *ru_binary_name(tsr_kernels_op_t op) {
  switch (op) {
  case TSR_KERNELS_PROD: return "mul";
  case TSR_KERNELS_MAX: case TSR_KERNELS_ARGMAX: return "max";
  case TSR_KERNELS_MIN: case TSR_KERNELS_ARGMIN: return "min";
  default: return "add";
  }
}

const char *ru_reduce_name(tsr_kernels_op_t op) {
  switch (op) {
  case TSR_KERNELS_PROD: return "reduce_prod";
  case TSR_KERNELS_MAX: case TSR_KERNELS_ARGMAX: return "reduce_max";
  case TSR_KERNELS_MIN: case TSR_KERNELS_ARGMIN: return "reduce_min";
  default: return "reduce_sum";
  }
}

int64_t ru_block_limit(int64_t vmem_budget_bytes, int64_t bytes_per_element) {
  int64_t budget = vmem_budget_bytes > 0 ? vmem_budget_bytes : RU_DEFAULT_VMEM_BUDGET;
  int64_t limit = budget / (bytes_per_element > 0 ? bytes_per_element : 1);
  return limit < 1024 ? 1024 : limit;
}

void ru_choose_blocks(uint32_t rank, const int64_t *dims, const int64_t *granule, int64_t limit,
                      int64_t *blocks) {
  int64_t size = 1;
  for (uint32_t d = 0; d < rank; d++) {
    blocks[d] = dims[d] <= granule[d] ? dims[d] : granule[d];
    size *= blocks[d];
  }
  for (uint32_t i = rank; i-- > 0;) {
    int64_t others = size / blocks[i];
    if (others * dims[i] <= limit) { /* the whole dim fits */
      blocks[i] = dims[i];
      size = others * dims[i];
      continue;
    }
    int64_t q = granule[i];
    int64_t most = limit / others / q * q;
    if (most <= blocks[i]) break;
    /* A multiple of q dividing the dim, if one is at least half the most. */
    int64_t best = most;
    for (int64_t c = most; c >= q && c * 2 >= most; c -= q)
      if (dims[i] % c == 0) {
        best = c;
        break;
      }
    blocks[i] = best;
    break;
  }
}

void ru_layout_grid(ru_layout_t *l, const uint32_t *order, uint32_t n, uint32_t parallel) {
  l->grid_rank = 0;
  for (uint32_t d = 0; d < l->rank; d++) {
    l->counts[d] = (l->dims[d] + l->blocks[d] - 1) / l->blocks[d];
    l->axis_of[d] = -1;
  }
  for (uint32_t i = 0; i < n; i++) {
    uint32_t d = order[i];
    if (l->counts[d] <= 1) continue;
    l->axis_of[d] = (int32_t)l->grid_rank;
    l->grid[l->grid_rank] = l->counts[d];
    l->semantics[l->grid_rank] = i < parallel ? TSR_DIM_PARALLEL : TSR_DIM_ARBITRARY;
    l->grid_rank++;
  }
  if (l->grid_rank == 0) {
    l->grid_rank = 1;
    l->grid[0] = 1;
    l->semantics[0] = TSR_DIM_ARBITRARY;
  }
}

tsr_ir_value_t *ru_operand(kb_t *b, const ru_layout_t *l, tsr_ir_role_t role, const char *name,
                           tsr_dtype_t dtype, uint32_t rank, const int64_t *dims,
                           const int32_t *src, tsr_ir_space_t space) {
  if (rank == 0) return kb_operand(b, role, name, dtype, 0, dims, space, NULL, NULL);
  int64_t block[TSR_MAX_RANK];
  for (uint32_t i = 0; i < rank; i++) block[i] = src[i] < 0 ? 1 : l->blocks[src[i]];
  tsr_ir_region_t *map = NULL;
  tsr_ir_value_t *ref = kb_operand(b, role, name, dtype, rank, dims, space, block, &map);
  if (!ref || !map) return ref;
  tsr_ir_region_t *body = b->region;
  b->region = map;
  tsr_ir_value_t *index[TSR_MAX_RANK];
  for (uint32_t i = 0; i < rank; i++) {
    int32_t axis = src[i] < 0 ? -1 : l->axis_of[src[i]];
    if (axis < 0) {
      index[i] = kb_i32(b, 0);
    } else {
      index[i] = tsr_ir_region_arg(map, (uint32_t)axis);
      if (l->reversed[src[i]])
        index[i] = kb_binary(b, "sub", kb_i32(b, l->counts[src[i]] - 1), index[i]);
    }
  }
  kb_yield(b, index, rank);
  b->region = body;
  return ref;
}

tsr_ir_value_t *ru_block_index(kb_t *b, const ru_layout_t *l, uint32_t d) {
  if (l->axis_of[d] < 0) return kb_i32(b, 0);
  tsr_ir_value_t *pid = kb_program_id(b, l->axis_of[d]);
  return l->reversed[d] ? kb_binary(b, "sub", kb_i32(b, l->counts[d] - 1), pid) : pid;
}

tsr_ir_value_t *ru_valid_extent(kb_t *b, const ru_layout_t *l, uint32_t d) {
  int64_t tail = l->dims[d] - (l->counts[d] - 1) * l->blocks[d];
  if (tail == l->blocks[d]) return kb_i32(b, l->blocks[d]);
  tsr_ir_value_t *last = kb_compare(b, "eq", ru_block_index(b, l, d), kb_i32(b, l->counts[d] - 1));
  return kb_select(b, last, kb_i32(b, tail), kb_i32(b, l->blocks[d]));
}

tsr_ir_value_t *ru_valid_mask(kb_t *b, const ru_layout_t *l) {
  tsr_ir_type_t t = kb_vec(TSR_DTYPE_I32, l->rank, l->blocks);
  tsr_ir_value_t *mask = NULL;
  for (uint32_t d = 0; d < l->rank; d++) {
    if (l->dims[d] % l->blocks[d] == 0) continue;
    tsr_ir_value_t *inside = kb_compare(b, "lt", kb_iota(b, t, d), ru_valid_extent(b, l, d));
    mask = mask ? kb_binary(b, "and", mask, inside) : inside;
  }
  return mask;
}

tsr_ir_value_t *ru_load_block(kb_t *b, const ru_layout_t *l, tsr_ir_value_t *ref,
                              tsr_ir_value_t *mask) {
  if (!mask) return kb_load_all(b, ref);
  if (!ref) return kb_fail(b, TSR_STATUS(TSR_INTERNAL, "kernels: load of a missing ref"));
  tsr_ir_index_t idx[TSR_MAX_RANK];
  for (uint32_t d = 0; d < l->rank; d++) idx[d] = kb_full();
  tsr_ir_value_t *ops[] = {ref, mask};
  tsr_ir_type_t t = kb_vec((tsr_dtype_t)ref->type.dtype, l->rank, l->blocks);
  tsr_ir_op_params_t p = {.mnemonic = "load", .operands = ops, .num_operands = 2,
                          .result_types = &t, .num_results = 1, .indices = idx,
                          .num_indices = l->rank, .flags = TSR_OPF_MASK};
  return kb_op(b, &p, NULL);
}
