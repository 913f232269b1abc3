/* Construction of modules, kernels, values, regions and ops in the module's
 * arena, and the op table generated from ir/ops.def. The parser and the
 * public builder (ir/api.c) both build through these functions. */
#include <stdio.h>

#include "ir/ir.h"

const tsr_op_info_t tsr_op_table[TSR_OP_COUNT] = {
#define TSR_OP(E, m, syn, rule, fam, mino, maxo, nres, nreg, flags, text) \
  {m,    TSR_SYN_##syn, TSR_RULE_##rule, TSR_FAM_##fam, mino, maxo, nres, nreg, \
   (flags) & ~(uint32_t)TSR_E_ALL, (flags) & (uint32_t)TSR_E_ALL, text},
#include "ir/ops.def"
#undef TSR_OP
};

/* The TPU column, from ir/ops_tpu.def (its top says why it is a file of its
 * own). Complete by construction: each row declares tsr_tpu_row_<OP> (a
 * second row for one op redeclares it), and every op of ir/ops.def names
 * its row below, so an op without one does not build. */
#define TSR_TPU_OP(E, s) TSR_TPU_BY_CLASS(E, s, s, s)
#define TSR_TPU_CODE(E) TSR_TPU_BY_CLASS(E, NULL, NULL, NULL)
enum {
#define TSR_TPU_BY_CLASS(E, f, s, u) tsr_tpu_row_##E,
#define TSR_TPU_REFUSE(E, why) tsr_tpu_row_##E,
#include "ir/ops_tpu.def"
#undef TSR_TPU_BY_CLASS
#undef TSR_TPU_REFUSE
};
#define TSR_OP(E, ...) enum { tsr_tpu_row_of_##E = tsr_tpu_row_##E };
#include "ir/ops.def"
#undef TSR_OP

const tsr_op_tpu_t tsr_op_tpu_table[TSR_OP_COUNT] = {
#define TSR_TPU_BY_CLASS(E, f, s, u) [TSR_OP_##E] = {{f, s, u}, NULL},
#define TSR_TPU_REFUSE(E, why) [TSR_OP_##E] = {{NULL, NULL, NULL}, why},
#include "ir/ops_tpu.def"
#undef TSR_TPU_BY_CLASS
#undef TSR_TPU_REFUSE
};
#undef TSR_TPU_OP
#undef TSR_TPU_CODE

tsr_opcode_t tsr_op_lookup(const char *mnemonic, size_t len) {
  for (int i = 0; i < TSR_OP_COUNT; i++) {
    const char *m = tsr_op_table[i].mnemonic;
    if (strlen(m) == len && memcmp(m, mnemonic, len) == 0) return (tsr_opcode_t)i;
  }
  return TSR_OP_COUNT;
}

/* An arena array of `count` elements, NULL when `count` is 0 (so a NULL
 * result with a nonzero count means out of memory). */
static void *arena_array(tsr_module_t *module, uint32_t count, size_t size) {
  return count ? tsr_arena_alloc_array(&module->arena, count, size) : NULL;
}

bool tsr_op_flags_accept(uint32_t flags, tsr_dtype_t dtype) {
  switch (tsr_dtype_class(dtype)) {
    case TSR_CLASS_FLOAT: return (flags & TSR_F_FLT) != 0;
    case TSR_CLASS_SINT:
    case TSR_CLASS_UINT: return (flags & TSR_F_INT) != 0;
    case TSR_CLASS_BOOL: return (flags & TSR_F_BOOL) != 0;
  }
  return false;
}

const char *tsr_module_strdup(tsr_module_t *module, const char *s, size_t n) {
  return tsr_arena_strndup(&module->arena, s, n);
}

/* One copied file name; a module sees few (usually one), so a list will do. */
struct tsr_file_name {
  struct tsr_file_name *next;
  const char *name;
};

const char *tsr_module_intern_file(tsr_module_t *module, const char *file) {
  if (file == module->filename || strcmp(file, module->filename) == 0)
    return module->filename;
  for (struct tsr_file_name *f = module->file_names; f; f = f->next)
    if (strcmp(f->name, file) == 0) return f->name;
  struct tsr_file_name *f = tsr_arena_alloc(&module->arena, sizeof *f);
  if (!f) return NULL;
  f->name = tsr_arena_strndup(&module->arena, file, strlen(file));
  if (!f->name) return NULL;
  f->next = module->file_names;
  module->file_names = f;
  return f->name;
}

tsr_status_t tsr_module_create(const char *filename, tsr_module_t **out_module) {
  tsr_module_t *m = tsr_calloc(1, sizeof *m);
  if (!m) return TSR_OOM();
  tsr_arena_initialize(&m->arena);
  const char *f = filename ? filename : "<builder>";
  m->filename = tsr_arena_strndup(&m->arena, f, strlen(f));
  if (!m->filename) {
    tsr_module_destroy(m);
    return TSR_OOM();
  }
  *out_module = m;
  return NULL;
}

void tsr_module_destroy(tsr_module_t *module) {
  if (!module) return;
  tsr_free(module->kernels);
  tsr_arena_deinitialize(&module->arena);
  tsr_free(module);
}

tsr_status_t tsr_kernel_create(tsr_module_t *module, const char *name,
                               size_t name_len, tsr_loc_t loc,
                               tsr_kernel_t **out_kernel) {
  if (module->num_kernels == module->capacity) {
    uint32_t cap = module->capacity ? module->capacity * 2 : 4;
    tsr_kernel_t **k = tsr_realloc(module->kernels, cap * sizeof *k);
    if (!k) return TSR_OOM();
    module->kernels = k;
    module->capacity = cap;
  }
  tsr_kernel_t *k = tsr_arena_alloc(&module->arena, sizeof *k);
  if (!k) return TSR_OOM();
  k->name = tsr_arena_strndup(&module->arena, name, name_len);
  if (!k->name) return TSR_OOM();
  k->loc = loc;
  k->module = module;
  module->kernels[module->num_kernels++] = k;
  *out_kernel = k;
  return NULL;
}

tsr_kernel_t *tsr_module_find_kernel(tsr_module_t *module, const char *name,
                                     size_t len) {
  for (uint32_t i = 0; i < module->num_kernels; i++) {
    const char *n = module->kernels[i]->name;
    if (strlen(n) == len && memcmp(n, name, len) == 0) return module->kernels[i];
  }
  return NULL;
}

tsr_status_t tsr_value_create(tsr_kernel_t *kernel, const tsr_type_t *type,
                              const char *name, size_t name_len,
                              tsr_value_t **out_value) {
  tsr_arena_t *arena = &kernel->module->arena;
  tsr_value_t *v = tsr_arena_alloc(arena, sizeof *v);
  if (!v) return TSR_OOM();
  v->type = *type;
  v->id = kernel->num_values++;
  v->decl = -1;
  if (name) {
    v->name = tsr_arena_strndup(arena, name, name_len);
  } else {
    char buf[32];
    int n = snprintf(buf, sizeof buf, "v%u", v->id);
    v->name = tsr_arena_strndup(arena, buf, (size_t)n);
  }
  if (!v->name) return TSR_OOM();
  *out_value = v;
  return NULL;
}

tsr_status_t tsr_kernel_add_decl(tsr_kernel_t *kernel, tsr_role_t role,
                                 const char *name, size_t name_len,
                                 const tsr_type_t *ref_type, tsr_loc_t loc,
                                 tsr_decl_t **out_decl) {
  tsr_arena_t *arena = &kernel->module->arena;
  /* decls live in an arena array that doubles when full (old copies stay in
   * the arena until the module dies); refs name decls by index, so moving
   * the array is safe. */
  if (kernel->num_decls == kernel->decls_capacity) {
    uint32_t cap = kernel->decls_capacity ? kernel->decls_capacity * 2 : 8;
    tsr_decl_t *decls = tsr_arena_alloc_array(arena, cap, sizeof *decls);
    if (!decls) return TSR_OOM();
    if (kernel->num_decls)
      memcpy(decls, kernel->decls, kernel->num_decls * sizeof *decls);
    kernel->decls = decls;
    kernel->decls_capacity = cap;
  }
  tsr_decl_t *decls = kernel->decls;
  tsr_decl_t *d = &decls[kernel->num_decls];
  d->role = role;
  d->loc = loc;
  d->alias = -1;
  d->array = *ref_type;
  for (uint32_t i = 0; i < ref_type->rank; i++) d->block[i] = ref_type->dims[i];
  TSR_RETURN_IF_ERROR(tsr_value_create(kernel, ref_type, name, name_len, &d->ref));
  d->ref->decl = (int32_t)kernel->num_decls;
  kernel->num_decls++;
  if (out_decl) *out_decl = d;
  return NULL;
}

tsr_status_t tsr_region_init_args(tsr_module_t *module, tsr_region_t *region,
                                  uint32_t num_args) {
  region->num_args = num_args;
  region->args = arena_array(module, num_args, sizeof *region->args);
  return num_args && !region->args ? TSR_OOM() : NULL;
}

tsr_status_t tsr_region_create(tsr_module_t *module, uint32_t num_args,
                               tsr_region_t **out_region) {
  tsr_region_t *r = tsr_arena_alloc(&module->arena, sizeof *r);
  if (!r) return TSR_OOM();
  TSR_RETURN_IF_ERROR(tsr_region_init_args(module, r, num_args));
  *out_region = r;
  return NULL;
}

tsr_status_t tsr_op_create(tsr_kernel_t *kernel, tsr_region_t *region,
                           tsr_opcode_t opcode, tsr_loc_t loc,
                           tsr_value_t *const *operands, uint32_t num_operands,
                           const tsr_type_t *result_types,
                           const char *const *result_names, uint32_t num_results,
                           uint32_t num_regions, tsr_op_t **out_op) {
  tsr_module_t *module = kernel->module;
  tsr_op_t *op = tsr_arena_alloc(&module->arena, sizeof *op);
  if (!op) return TSR_OOM();
  op->opcode = opcode;
  op->loc = loc;
  op->num_operands = num_operands;
  op->num_results = num_results;
  op->num_regions = num_regions;
  op->operands = arena_array(module, num_operands, sizeof *op->operands);
  op->results = arena_array(module, num_results, sizeof *op->results);
  op->regions = arena_array(module, num_regions, sizeof *op->regions);
  if ((num_operands && !op->operands) || (num_results && !op->results) ||
      (num_regions && !op->regions))
    return TSR_OOM();
  if (num_operands) memcpy(op->operands, operands, num_operands * sizeof *operands);
  for (uint32_t i = 0; i < num_results; i++) {
    const char *n = result_names ? result_names[i] : NULL;
    TSR_RETURN_IF_ERROR(tsr_value_create(kernel, &result_types[i], n,
                                         n ? strlen(n) : 0, &op->results[i]));
    op->results[i]->def = op;
  }
  for (uint32_t i = 0; i < num_regions; i++) op->regions[i].parent_op = op;
  op->parent = region;
  if (region->last)
    region->last->next = op;
  else
    region->first = op;
  region->last = op;
  *out_op = op;
  return NULL;
}

tsr_status_t tsr_op_alloc_indices(tsr_module_t *module, tsr_op_t *op,
                                  uint32_t count) {
  op->num_indices = count;
  op->indices = arena_array(module, count, sizeof *op->indices);
  return count && !op->indices ? TSR_OOM() : NULL;
}

tsr_status_t tsr_op_alloc_ints(tsr_module_t *module, tsr_op_t *op,
                               uint32_t count) {
  op->num_ints = count;
  op->ints = arena_array(module, count, sizeof *op->ints);
  return count && !op->ints ? TSR_OOM() : NULL;
}
