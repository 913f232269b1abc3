/* The kernel library's conveniences over the builder API (kbuild.h). */
#include "kernels/kbuild.h"

#include <stdio.h>
#include <string.h>

tsr_ir_value_t *kb_fail(kb_t *b, tsr_status_t status) {
  if (!b->status)
    b->status = status;
  else
    tsr_status_free(status);
  return NULL;
}

void kb_begin(kb_t *b, const char *name) {
  memset(b, 0, sizeof *b);
  char file[96];
  snprintf(file, sizeof file, "tessera/kernels/%s", name);
  b->status = tsr_ir_module_create(file, &b->module);
  if (!b->status) b->status = tsr_ir_kernel_create(b->module, name, &b->kernel);
  if (!b->status) b->region = tsr_ir_kernel_body(b->kernel);
  /* The module's copy of the name: `file` dies with this call. */
  if (b->module) b->loc = (tsr_loc_t){b->module->filename, 0, 0};
}

tsr_status_t kb_finish(kb_t *b, tsr_ir_module_t **out_module) {
  if (!b->status) b->status = tsr_ir_module_verify(b->module);
  tsr_status_t status = b->status;
  if (status) {
    tsr_ir_module_destroy(b->module);
  } else {
    *out_module = b->module;
  }
  b->module = NULL;
  b->status = NULL;
  return status;
}

void kb_grid(kb_t *b, uint32_t rank, const int64_t *dims,
             const tsr_ir_dim_semantics_t *semantics) {
  if (kb_ok(b)) kb_fail(b, tsr_ir_kernel_set_grid(b->kernel, rank, dims, semantics));
}

tsr_ir_value_t *kb_operand(kb_t *b, tsr_ir_role_t role, const char *name, tsr_dtype_t dtype,
                           uint32_t rank, const int64_t *dims, tsr_ir_space_t space,
                           const int64_t *block, tsr_ir_region_t **out_index_map) {
  if (!kb_ok(b)) return NULL;
  tsr_ir_operand_params_t p = {role, name, tsr_ir_type_vector(dtype, rank, dims), space, block,
                               -1};
  if (rank == 0) p.array = tsr_ir_type_scalar(dtype);
  tsr_ir_value_t *ref = NULL;
  tsr_status_t s = tsr_ir_kernel_add_operand(b->kernel, &p, &ref, out_index_map);
  return s ? kb_fail(b, s) : ref;
}

tsr_ir_value_t *kb_scratch(kb_t *b, const char *name, tsr_ir_space_t space, tsr_dtype_t dtype,
                           uint32_t rank, const int64_t *dims) {
  if (!kb_ok(b)) return NULL;
  tsr_ir_operand_params_t p = {TSR_ROLE_SCRATCH, name, tsr_ir_type_ref(space, dtype, rank, dims),
                               space, NULL, -1};
  tsr_ir_value_t *ref = NULL;
  tsr_status_t s = tsr_ir_kernel_add_operand(b->kernel, &p, &ref, NULL);
  return s ? kb_fail(b, s) : ref;
}

tsr_ir_value_t *kb_scratch_sem(kb_t *b, const char *name, tsr_ir_sem_kind_t kind, uint32_t rank,
                               const int64_t *dims) {
  if (!kb_ok(b)) return NULL;
  tsr_ir_operand_params_t p = {TSR_ROLE_SCRATCH, name, tsr_ir_type_sem(kind, rank, dims),
                               TSR_SPACE_SMEM, NULL, -1};
  tsr_ir_value_t *ref = NULL;
  tsr_status_t s = tsr_ir_kernel_add_operand(b->kernel, &p, &ref, NULL);
  return s ? kb_fail(b, s) : ref;
}

tsr_ir_type_t kb_vec(tsr_dtype_t dtype, uint32_t rank, const int64_t *dims) {
  return rank ? tsr_ir_type_vector(dtype, rank, dims) : tsr_ir_type_scalar(dtype);
}

tsr_ir_type_t kb_retype(tsr_ir_type_t like, tsr_dtype_t dtype) {
  like.dtype = (uint8_t)dtype;
  return like;
}

tsr_ir_value_t *kb_op(kb_t *b, const tsr_ir_op_params_t *params, tsr_ir_op_t **out_op) {
  if (!kb_ok(b)) return NULL;
  for (uint32_t i = 0; i < params->num_operands; i++)
    if (!params->operands[i]) /* an earlier shorthand failed without a status */
      return kb_fail(b, TSR_STATUS(TSR_INTERNAL, "kernels: '%s' built on a missing value",
                                   params->mnemonic));
  tsr_ir_op_params_t p = *params;
  p.loc = b->loc;
  tsr_ir_op_t *op = NULL;
  tsr_status_t s = tsr_ir_build_op(b->kernel, b->region, &p, &op);
  if (s) return kb_fail(b, s);
  if (out_op) *out_op = op;
  return tsr_ir_op_result(op, 0);
}

static tsr_ir_value_t *build(kb_t *b, const char *mnemonic, tsr_ir_type_t result,
                             tsr_ir_value_t *const *operands, uint32_t n, const int64_t *ints,
                             uint32_t num_ints) {
  tsr_ir_op_params_t p = {.mnemonic = mnemonic, .operands = operands, .num_operands = n,
                          .result_types = &result, .num_results = 1, .ints = ints,
                          .num_ints = num_ints};
  return kb_op(b, &p, NULL);
}

tsr_ir_value_t *kb_const_f(kb_t *b, tsr_ir_type_t type, double value) {
  tsr_ir_op_params_t p = {.mnemonic = "const", .result_types = &type, .num_results = 1,
                          .literal.f = value};
  return kb_op(b, &p, NULL);
}

tsr_ir_value_t *kb_const_i(kb_t *b, tsr_ir_type_t type, int64_t value) {
  tsr_ir_op_params_t p = {.mnemonic = "const", .result_types = &type, .num_results = 1,
                          .literal.i = value};
  return kb_op(b, &p, NULL);
}

tsr_ir_value_t *kb_i32(kb_t *b, int64_t value) {
  return kb_const_i(b, tsr_ir_type_scalar(TSR_DTYPE_I32), value);
}

/* Shorthands whose first operand may be NULL after a failure: the type is
 * read only when it exists (kb_op then reports the missing operand). */
static tsr_ir_type_t type_or_scalar(const tsr_ir_value_t *v) {
  return v ? v->type : tsr_ir_type_scalar(TSR_DTYPE_I32);
}

tsr_ir_value_t *kb_unary(kb_t *b, const char *mnemonic, tsr_ir_value_t *a) {
  return build(b, mnemonic, type_or_scalar(a), &a, 1, NULL, 0);
}

tsr_ir_value_t *kb_binary(kb_t *b, const char *mnemonic, tsr_ir_value_t *x, tsr_ir_value_t *y) {
  tsr_ir_value_t *xy[] = {x, y};
  return build(b, mnemonic, type_or_scalar(x), xy, 2, NULL, 0);
}

tsr_ir_value_t *kb_compare(kb_t *b, const char *mnemonic, tsr_ir_value_t *x, tsr_ir_value_t *y) {
  tsr_ir_value_t *xy[] = {x, y};
  return build(b, mnemonic, kb_retype(type_or_scalar(x), TSR_DTYPE_I1), xy, 2, NULL, 0);
}

tsr_ir_value_t *kb_select(kb_t *b, tsr_ir_value_t *cond, tsr_ir_value_t *x, tsr_ir_value_t *y) {
  tsr_ir_value_t *cxy[] = {cond, x, y};
  return build(b, "select", type_or_scalar(x), cxy, 3, NULL, 0);
}

tsr_ir_value_t *kb_convert(kb_t *b, tsr_ir_value_t *a, tsr_dtype_t dtype) {
  return build(b, "convert", kb_retype(type_or_scalar(a), dtype), &a, 1, NULL, 0);
}

tsr_ir_value_t *kb_bitcast(kb_t *b, tsr_ir_value_t *a, tsr_dtype_t dtype) {
  return build(b, "bitcast", kb_retype(type_or_scalar(a), dtype), &a, 1, NULL, 0);
}

tsr_ir_value_t *kb_iota(kb_t *b, tsr_ir_type_t type, int64_t dim) {
  return build(b, "iota", type, NULL, 0, &dim, 1);
}

tsr_ir_value_t *kb_broadcast(kb_t *b, tsr_ir_value_t *a, tsr_ir_type_t type) {
  return build(b, "broadcast", type, &a, 1, NULL, 0);
}

tsr_ir_value_t *kb_reshape(kb_t *b, tsr_ir_value_t *a, tsr_ir_type_t type) {
  return build(b, "reshape", type, &a, 1, NULL, 0);
}

tsr_ir_value_t *kb_roll(kb_t *b, tsr_ir_value_t *a, tsr_ir_value_t *shift, int64_t axis) {
  tsr_ir_value_t *as[] = {a, shift};
  return build(b, "roll", type_or_scalar(a), as, 2, &axis, 1);
}

tsr_ir_value_t *kb_gather(kb_t *b, tsr_ir_value_t *a, tsr_ir_value_t *index, int64_t axis) {
  tsr_ir_value_t *ai[] = {a, index};
  tsr_ir_type_t t = index ? kb_retype(index->type, a ? (tsr_dtype_t)a->type.dtype : TSR_DTYPE_I32)
                          : type_or_scalar(a);
  return build(b, "gather", t, ai, 2, &axis, 1);
}

tsr_ir_value_t *kb_sort(kb_t *b, tsr_ir_value_t *a, int64_t axis) {
  return build(b, "sort", type_or_scalar(a), &a, 1, &axis, 1);
}

tsr_ir_value_t *kb_argsort(kb_t *b, tsr_ir_value_t *const *keys, uint32_t n, int64_t axis) {
  tsr_ir_type_t t = n && keys[0] ? kb_retype(keys[0]->type, TSR_DTYPE_I32)
                                 : tsr_ir_type_scalar(TSR_DTYPE_I32);
  return build(b, "argsort", t, keys, n, &axis, 1);
}

tsr_ir_value_t *kb_reduce(kb_t *b, const char *mnemonic, tsr_ir_value_t *a, const int64_t *axes,
                          uint32_t num_axes, tsr_ir_type_t result) {
  return build(b, mnemonic, result, &a, 1, axes, num_axes);
}

tsr_ir_value_t *kb_program_id(kb_t *b, int64_t axis) {
  return build(b, "program_id", tsr_ir_type_scalar(TSR_DTYPE_I32), NULL, 0, &axis, 1);
}

/* The type a whole-ref load gives: the ref's dims as a block (a rank-0 ref
 * gives a scalar). */
static tsr_ir_type_t ref_value_type(const tsr_ir_value_t *ref) {
  tsr_ir_type_t t = ref->type;
  if (t.rank == 0) return tsr_ir_type_scalar((tsr_dtype_t)t.dtype);
  return tsr_ir_type_vector((tsr_dtype_t)t.dtype, t.rank, t.dims);
}

tsr_ir_value_t *kb_load_all(kb_t *b, tsr_ir_value_t *ref) {
  if (!ref) return kb_fail(b, TSR_STATUS(TSR_INTERNAL, "kernels: load of a missing ref"));
  tsr_ir_index_t idx[TSR_MAX_RANK];
  for (uint32_t d = 0; d < ref->type.rank; d++) idx[d] = kb_full();
  return kb_load(b, ref, idx, ref->type.rank, NULL, 0, ref_value_type(ref));
}

void kb_store_all(kb_t *b, tsr_ir_value_t *ref, tsr_ir_value_t *value) {
  if (!ref) {
    kb_fail(b, TSR_STATUS(TSR_INTERNAL, "kernels: store to a missing ref"));
    return;
  }
  tsr_ir_index_t idx[TSR_MAX_RANK];
  for (uint32_t d = 0; d < ref->type.rank; d++) idx[d] = kb_full();
  kb_store(b, ref, idx, ref->type.rank, NULL, 0, value);
}

/* Operands of a load/store: the ref, [the value,] then the dynamic starts. */
enum { KB_MAX_VIEW_OPERANDS = 2 + TSR_MAX_RANK };

tsr_ir_value_t *kb_load(kb_t *b, tsr_ir_value_t *ref, const tsr_ir_index_t *indices,
                        uint32_t num_indices, tsr_ir_value_t *const *starts,
                        uint32_t num_starts, tsr_ir_type_t result) {
  if (num_starts > TSR_MAX_RANK)
    return kb_fail(b, TSR_STATUS(TSR_INTERNAL, "kernels: %u dynamic starts", num_starts));
  tsr_ir_value_t *ops[KB_MAX_VIEW_OPERANDS] = {ref};
  tsr_ir_index_t idx[TSR_MAX_RANK];
  for (uint32_t i = 0; i < num_starts; i++) ops[1 + i] = starts[i];
  for (uint32_t d = 0; d < num_indices && d < TSR_MAX_RANK; d++) {
    idx[d] = indices[d];
    if (idx[d].operand >= 0) idx[d].operand += 1; /* after the ref */
  }
  tsr_ir_op_params_t p = {.mnemonic = "load", .operands = ops, .num_operands = 1 + num_starts,
                          .result_types = &result, .num_results = 1, .indices = idx,
                          .num_indices = num_indices};
  return kb_op(b, &p, NULL);
}

void kb_store(kb_t *b, tsr_ir_value_t *ref, const tsr_ir_index_t *indices, uint32_t num_indices,
              tsr_ir_value_t *const *starts, uint32_t num_starts, tsr_ir_value_t *value) {
  if (num_starts > TSR_MAX_RANK) {
    kb_fail(b, TSR_STATUS(TSR_INTERNAL, "kernels: %u dynamic starts", num_starts));
    return;
  }
  tsr_ir_value_t *ops[KB_MAX_VIEW_OPERANDS] = {ref, value};
  tsr_ir_index_t idx[TSR_MAX_RANK];
  for (uint32_t i = 0; i < num_starts; i++) ops[2 + i] = starts[i];
  for (uint32_t d = 0; d < num_indices && d < TSR_MAX_RANK; d++) {
    idx[d] = indices[d];
    if (idx[d].operand >= 0) idx[d].operand += 2; /* after the ref and the value */
  }
  tsr_ir_op_params_t p = {.mnemonic = "store", .operands = ops, .num_operands = 2 + num_starts,
                          .indices = idx, .num_indices = num_indices};
  kb_op(b, &p, NULL);
}

void kb_yield(kb_t *b, tsr_ir_value_t *const *values, uint32_t n) {
  tsr_ir_op_params_t p = {.mnemonic = "yield", .operands = values, .num_operands = n};
  kb_op(b, &p, NULL);
}

enum { KB_MAX_CARRIED = 16 };

kb_for_t kb_begin_for(kb_t *b, tsr_ir_value_t *lo, tsr_ir_value_t *hi,
                      tsr_ir_value_t *const *init, uint32_t n) {
  kb_for_t loop = {NULL, b->region};
  if (n > KB_MAX_CARRIED) {
    kb_fail(b, TSR_STATUS(TSR_INTERNAL, "kernels: a loop carrying %u values", n));
    return loop;
  }
  tsr_ir_value_t *ops[3 + KB_MAX_CARRIED] = {lo, hi, kb_i32(b, 1)};
  tsr_ir_type_t results[KB_MAX_CARRIED], args[1 + KB_MAX_CARRIED];
  args[0] = type_or_scalar(lo);
  for (uint32_t i = 0; i < n; i++) {
    ops[3 + i] = init[i];
    results[i] = args[1 + i] = type_or_scalar(init[i]);
  }
  tsr_ir_op_params_t p = {.mnemonic = "for", .operands = ops, .num_operands = 3 + n,
                          .result_types = results, .num_results = n,
                          .region_arg_types = args, .num_region_args = 1 + n};
  kb_op(b, &p, &loop.op);
  if (loop.op) b->region = tsr_ir_op_region(loop.op, 0);
  return loop;
}

tsr_ir_value_t *kb_for_iv(const kb_for_t *loop) {
  return loop->op ? tsr_ir_region_arg(tsr_ir_op_region(loop->op, 0), 0) : NULL;
}

tsr_ir_value_t *kb_for_carried(const kb_for_t *loop, uint32_t i) {
  return loop->op ? tsr_ir_region_arg(tsr_ir_op_region(loop->op, 0), 1 + i) : NULL;
}

void kb_end_for(kb_t *b, kb_for_t *loop, tsr_ir_value_t *const *next, uint32_t n) {
  if (loop->op) kb_yield(b, next, n);
  b->region = loop->outer;
}

tsr_ir_value_t *kb_for_result(const kb_for_t *loop, uint32_t i) {
  return loop->op ? tsr_ir_op_result(loop->op, i) : NULL;
}

kb_for_t kb_begin_if(kb_t *b, tsr_ir_value_t *cond) {
  kb_for_t branch = {NULL, b->region};
  tsr_ir_op_params_t p = {.mnemonic = "if", .operands = &cond, .num_operands = 1};
  kb_op(b, &p, &branch.op);
  if (branch.op) b->region = tsr_ir_op_region(branch.op, 0);
  return branch;
}

void kb_end_if(kb_t *b, kb_for_t *branch) { b->region = branch->outer; }

void kb_dma(kb_t *b, const char *mnemonic, tsr_ir_value_t *src, const tsr_ir_index_t *src_idx,
            uint32_t n_src, tsr_ir_value_t *dst, const tsr_ir_index_t *dst_idx, uint32_t n_dst,
            tsr_ir_value_t *sem, tsr_ir_value_t *const *starts, uint32_t num_starts) {
  enum { MAX_STARTS = 2 * TSR_MAX_RANK };
  if (num_starts > MAX_STARTS || n_src > TSR_MAX_RANK || n_dst > TSR_MAX_RANK) {
    kb_fail(b, TSR_STATUS(TSR_INTERNAL, "kernels: a DMA with %u starts", num_starts));
    return;
  }
  tsr_ir_value_t *ops[3 + MAX_STARTS] = {src, dst, sem};
  for (uint32_t i = 0; i < num_starts; i++) ops[3 + i] = starts[i];
  tsr_ir_index_t idx[2 * TSR_MAX_RANK];
  uint32_t n = 0;
  for (uint32_t d = 0; d < n_src; d++) idx[n++] = src_idx[d];
  for (uint32_t d = 0; d < n_dst; d++) idx[n++] = dst_idx[d];
  for (uint32_t d = 0; d < n; d++)
    if (idx[d].operand >= 0) idx[d].operand += 3; /* after src, dst and the semaphore */
  int64_t counts[3] = {n_src, n_dst, 0};
  tsr_ir_op_params_t p = {.mnemonic = mnemonic, .operands = ops, .num_operands = 3 + num_starts,
                          .indices = idx, .num_indices = n, .ints = counts, .num_ints = 3};
  kb_op(b, &p, NULL);
}

tsr_ir_value_t *kb_multiple_of(kb_t *b, tsr_ir_value_t *a, int64_t multiple) {
  if (!a) return NULL;
  return build(b, "multiple_of", a->type, &a, 1, &multiple, 1);
}
