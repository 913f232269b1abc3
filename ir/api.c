/* The public IR API (tessera/ir.h): thin wrappers over the internal module,
 * parser, printer and verifier, and the builder, which checks counts before
 * appending ops through tsr_op_create (types are the verifier's job). */
#include <errno.h>
#include <stdio.h>

#include "ir/ir.h"

tsr_status_t tsr_ir_module_parse(tsr_string_view_t filename,
                                 tsr_string_view_t text,
                                 tsr_ir_module_t **out_module) {
  const char *name = filename.data ? filename.data : "<input>";
  size_t len = filename.data ? filename.size : strlen(name);
  char *fname = tsr_strndup(name, len);
  if (!fname) return TSR_OOM();
  tsr_status_t s = tsr_ir_parse(fname, text.data, text.size, out_module);
  tsr_free(fname);
  return s;
}

tsr_status_t tsr_ir_module_parse_file(const char *path,
                                      tsr_ir_module_t **out_module) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return TSR_STATUS(TSR_IO_ERROR, "%s: cannot open: %s", path, strerror(errno));
  tsr_strbuf_t sb;
  tsr_strbuf_initialize(&sb);
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) tsr_strbuf_append(&sb, buf, n);
  bool read_error = ferror(f);
  fclose(f);
  if (read_error) {
    tsr_strbuf_deinitialize(&sb);
    return TSR_STATUS(TSR_IO_ERROR, "%s: read error", path);
  }
  if (sb.failed) {
    tsr_strbuf_deinitialize(&sb);
    return TSR_OOM();
  }
  tsr_status_t s = tsr_ir_parse(path, sb.data ? sb.data : "", sb.size, out_module);
  tsr_strbuf_deinitialize(&sb);
  return s;
}

tsr_status_t tsr_ir_module_create(const char *filename,
                                  tsr_ir_module_t **out_module) {
  return tsr_module_create(filename, out_module);
}

void tsr_ir_module_destroy(tsr_ir_module_t *module) { tsr_module_destroy(module); }

tsr_status_t tsr_ir_module_verify(const tsr_ir_module_t *module) {
  return tsr_ir_verify(module);
}

/* The printed text, or NULL (and the buffer freed) if printing ran out of memory. */
static char *take_text(tsr_strbuf_t *sb) {
  if (!sb->failed) return tsr_strbuf_take(sb);
  tsr_strbuf_deinitialize(sb);
  return NULL;
}

char *tsr_ir_module_print(const tsr_ir_module_t *module) {
  tsr_strbuf_t sb;
  tsr_strbuf_initialize(&sb);
  tsr_ir_print_module(&sb, module);
  return take_text(&sb);
}

char *tsr_ir_kernel_print(const tsr_ir_kernel_t *kernel) {
  tsr_strbuf_t sb;
  tsr_strbuf_initialize(&sb);
  tsr_ir_print_kernel(&sb, kernel);
  return take_text(&sb);
}

void tsr_ir_string_free(void *text) { tsr_free(text); }

size_t tsr_ir_module_kernel_count(const tsr_ir_module_t *module) {
  return module->num_kernels;
}

tsr_ir_kernel_t *tsr_ir_module_kernel(const tsr_ir_module_t *module, size_t i) {
  return i < module->num_kernels ? module->kernels[i] : NULL;
}

tsr_ir_kernel_t *tsr_ir_module_find_kernel(const tsr_ir_module_t *module,
                                           tsr_string_view_t name) {
  return tsr_module_find_kernel((tsr_module_t *)module, name.data, name.size);
}

const char *tsr_ir_kernel_name(const tsr_ir_kernel_t *kernel) {
  return kernel->name;
}

size_t tsr_ir_kernel_operand_count(const tsr_ir_kernel_t *kernel) {
  return kernel->num_decls;
}

void tsr_ir_kernel_operand_info(const tsr_ir_kernel_t *kernel, size_t i,
                                tsr_ir_operand_info_t *out_info) {
  const tsr_decl_t *d = &kernel->decls[i];
  memset(out_info, 0, sizeof *out_info);
  out_info->name = d->ref->name;
  out_info->role = d->role;
  out_info->dtype = (tsr_dtype_t)d->array.dtype;
  out_info->rank = d->array.rank;
  for (uint32_t k = 0; k < d->array.rank; k++) out_info->dims[k] = d->array.dims[k];
  out_info->space = d->ref->type.kind == TSR_TYPE_REF
                        ? (tsr_ir_space_t)d->ref->type.space
                        : TSR_SPACE_SMEM;
  out_info->alias = d->alias;
}

/* ---- The op table ---- */

size_t tsr_ir_op_count(void) { return TSR_OP_COUNT; }

const char *tsr_ir_op_mnemonic(size_t opcode) {
  return opcode < TSR_OP_COUNT ? tsr_op_table[opcode].mnemonic : NULL;
}

const char *tsr_ir_op_synopsis(size_t opcode) {
  return opcode < TSR_OP_COUNT ? tsr_op_table[opcode].synopsis : NULL;
}

typedef struct bit_name {
  uint32_t bit;
  const char *name;
} bit_name_t;

/* The names of the bits of `bits` in `names` order, space-separated, after
 * `lead` (when not NULL). */
static const char *put_bit_names(uint32_t bits, const bit_name_t *names, size_t count,
                                 const char *lead, char *buf, size_t buf_size) {
  if (!buf_size) return buf;
  buf[0] = 0;
  size_t used = 0;
  for (size_t i = lead ? 0 : 1; i <= count; i++) {
    const char *name = i ? names[i - 1].name : lead;
    if (i && !(bits & names[i - 1].bit)) continue;
    int n = snprintf(buf + used, buf_size - used, "%s%s", used ? " " : "", name);
    if (n < 0 || (size_t)n >= buf_size - used) break;
    used += (size_t)n;
  }
  return buf;
}

const char *tsr_ir_op_flag_names(size_t opcode, char *buf, size_t buf_size) {
  static const bit_name_t names[] = {
      {TSR_F_TERMINATOR, "terminator"}, {TSR_F_CONTROL, "control"},
      {TSR_F_MAP_OK, "map"},            {TSR_F_FORWARD, "forward"},
      {TSR_F_RESERVED, "reserved"},     {TSR_F_FLT, "float"},
      {TSR_F_INT, "int"},               {TSR_F_BOOL, "bool"},
  };
  if (opcode >= TSR_OP_COUNT) return put_bit_names(0, names, 0, NULL, buf, buf_size);
  /* "pure" is derived from the effects (tsr_op_is_pure), listed first */
  return put_bit_names(tsr_op_table[opcode].flags, names, TSR_ARRAY_SIZE(names),
                       tsr_op_is_pure((tsr_opcode_t)opcode) ? "pure" : NULL, buf, buf_size);
}

const char *tsr_ir_op_effect_names(size_t opcode, char *buf, size_t buf_size) {
  static const bit_name_t names[] = {
      {TSR_E_VALUE, "value"},           {TSR_E_REF_READ, "ref-read"},
      {TSR_E_REF_WRITE, "ref-write"},   {TSR_E_INDEX, "index"},
      {TSR_E_SEM_SIGNAL, "sem-signal"}, {TSR_E_SEM_WAIT, "sem-wait"},
      {TSR_E_SEM_READ, "sem-read"},     {TSR_E_REMOTE, "remote"},
      {TSR_E_OUTPUT, "output"},
  };
  uint32_t effects = opcode < TSR_OP_COUNT ? tsr_op_table[opcode].effects : 0;
  return put_bit_names(effects, names, TSR_ARRAY_SIZE(names), NULL, buf, buf_size);
}

/* The SYNTAX, RULE and FAMILY columns' names, from the table itself. */
static const struct {
  const char *syntax, *rule, *family;
} op_column_names[TSR_OP_COUNT] = {
#define TSR_OP(E, m, syn, rule, fam, mino, maxo, nres, nreg, flags, text) {#syn, #rule, #fam},
#include "ir/ops.def"
#undef TSR_OP
};

bool tsr_ir_op_info(size_t opcode, tsr_ir_op_info_t *out_info) {
  if (opcode >= TSR_OP_COUNT) return false;
  const tsr_op_info_t *op = &tsr_op_table[opcode];
  *out_info = (tsr_ir_op_info_t){
      .mnemonic = op->mnemonic,
      .syntax = op_column_names[opcode].syntax,
      .rule = op_column_names[opcode].rule,
      .family = op_column_names[opcode].family,
      .min_operands = op->min_operands,
      .max_operands = op->max_operands,
      .num_results = op->num_results,
      .num_regions = op->num_regions,
      .synopsis = op->synopsis,
      .tpu_refusal = tsr_op_tpu_table[opcode].refusal,
  };
  return true;
}

/* ---- Builder ---- */

tsr_ir_type_t tsr_ir_type_scalar(tsr_dtype_t dtype) { return tsr_type_scalar(dtype); }
tsr_ir_type_t tsr_ir_type_vector(tsr_dtype_t dtype, uint32_t rank,
                                 const int64_t *dims) {
  return tsr_type_vector(dtype, rank, dims);
}
tsr_ir_type_t tsr_ir_type_ref(tsr_ir_space_t space, tsr_dtype_t dtype,
                              uint32_t rank, const int64_t *dims) {
  return tsr_type_ref(space, dtype, rank, dims);
}
tsr_ir_type_t tsr_ir_type_sem(tsr_ir_sem_kind_t kind, uint32_t rank,
                              const int64_t *dims) {
  return tsr_type_sem(kind, rank, dims);
}

tsr_status_t tsr_ir_kernel_create(tsr_ir_module_t *module, const char *name,
                                  tsr_ir_kernel_t **out_kernel) {
  if (!name || !*name)
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "a kernel needs a name");
  if (tsr_module_find_kernel(module, name, strlen(name)))
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "kernel @%s already exists", name);
  tsr_loc_t loc = {module->filename, 0, 0};
  return tsr_kernel_create(module, name, strlen(name), loc, out_kernel);
}

tsr_status_t tsr_ir_kernel_set_grid_bound(tsr_ir_kernel_t *kernel, uint32_t dim,
                                          uint32_t decl) {
  if (dim >= kernel->grid_rank)
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "grid dim %u of a grid of rank %u", dim,
                      kernel->grid_rank);
  if (decl >= kernel->num_decls || kernel->decls[decl].role != TSR_ROLE_PREFETCH)
    return TSR_STATUS(TSR_INVALID_ARGUMENT,
                      "grid dim %u: decl %u is not a prefetch operand of kernel @%s", dim, decl,
                      kernel->name);
  kernel->grid[dim] = TSR_GRID_DYNAMIC;
  kernel->grid_bound[dim] = decl + 1;
  return NULL;
}

tsr_status_t tsr_ir_kernel_set_element_dim(tsr_ir_kernel_t *kernel, uint32_t operand,
                                           uint32_t dim, int64_t pad_low, int64_t pad_high) {
  if (operand >= kernel->num_decls || !kernel->decls[operand].has_block)
    return TSR_STATUS(TSR_INVALID_ARGUMENT,
                      "operand %u of kernel @%s is not an operand with a block", operand,
                      kernel->name);
  tsr_decl_t *d = &kernel->decls[operand];
  if (dim >= d->array.rank || d->block[dim] == TSR_SQUEEZED)
    return TSR_STATUS(TSR_INVALID_ARGUMENT,
                      "operand %%%s: dim %u is not a block dim that an element dim can be",
                      d->ref->name, dim);
  if (pad_low < 0 || pad_high < 0)
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "operand %%%s: negative padding (%lld, %lld)",
                      d->ref->name, (long long)pad_low, (long long)pad_high);
  d->element[dim] = true;
  d->pad_low[dim] = pad_low;
  d->pad_high[dim] = pad_high;
  return NULL;
}

tsr_status_t tsr_ir_kernel_set_revisit(tsr_ir_kernel_t *kernel, uint32_t operand,
                                       tsr_ir_revisit_t mode) {
  if (operand >= kernel->num_decls || kernel->decls[operand].role != TSR_ROLE_OUT)
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "operand %u of kernel @%s is not an output",
                      operand, kernel->name);
  if (!tsr_ir_revisit_name(mode))
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "unknown revisit mode %d", (int)mode);
  /* the verifier says which outputs may have it (an hbm/any output has no
   * blocks), located at the operand */
  kernel->decls[operand].revisit = (uint8_t)mode;
  return NULL;
}

tsr_status_t tsr_ir_kernel_set_grid(tsr_ir_kernel_t *kernel, uint32_t rank,
                                    const int64_t *dims,
                                    const tsr_ir_dim_semantics_t *semantics) {
  if (rank > TSR_MAX_RANK)
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "grid rank %u exceeds %d", rank,
                      TSR_MAX_RANK);
  kernel->grid_rank = rank;
  for (uint32_t i = 0; i < rank; i++) {
    kernel->grid[i] = dims[i];
    kernel->grid_bound[i] = 0;
    kernel->semantics[i] = (uint8_t)(semantics ? semantics[i] : TSR_DIM_ARBITRARY);
  }
  return NULL;
}

tsr_ir_region_t *tsr_ir_kernel_body(tsr_ir_kernel_t *kernel) { return &kernel->body; }

tsr_status_t tsr_ir_kernel_add_operand(tsr_ir_kernel_t *kernel,
                                       const tsr_ir_operand_params_t *params,
                                       tsr_ir_value_t **out_ref,
                                       tsr_ir_region_t **out_index_map) {
  if (!params->name || !*params->name)
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "an operand needs a name");
  if (kernel->num_decls &&
      kernel->decls[kernel->num_decls - 1].role > params->role)
    return TSR_STATUS(TSR_INVALID_ARGUMENT,
                      "operand %%%s: operands come in the order prefetch, in, "
                      "out, scratch",
                      params->name);
  const tsr_type_t *array = &params->array;
  if (array->rank > TSR_MAX_RANK)
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "operand %%%s: rank %u exceeds %d",
                      params->name, array->rank, TSR_MAX_RANK);
  bool scratch = params->role == TSR_ROLE_SCRATCH;
  /* A semaphore input or output: the body sees the semaphores, the array
   * is their counts (i32 of their shape); no block (docs/ir.md). */
  bool sem = !scratch && array->kind == TSR_TYPE_SEM;
  tsr_type_t ref_type = *array;
  tsr_loc_t loc = {kernel->module->filename, 0, 0};
  int64_t block[TSR_MAX_RANK];
  if (!scratch && !sem) {
    /* The body sees the block (squeezed dims dropped) in `space`, or the whole
     * array when there is no block. */
    uint32_t rank = 0;
    int64_t dims[TSR_MAX_RANK];
    for (uint32_t i = 0; i < array->rank; i++) {
      block[i] = params->block ? params->block[i] : array->dims[i];
      if (block[i] != TSR_SQUEEZED) dims[rank++] = block[i];
    }
    ref_type = tsr_type_ref(params->role == TSR_ROLE_PREFETCH ? TSR_SPACE_SMEM
                                                              : params->space,
                            (tsr_dtype_t)array->dtype, rank, dims);
  }
  tsr_decl_t *d;
  TSR_RETURN_IF_ERROR(tsr_kernel_add_decl(kernel, params->role, params->name,
                                          strlen(params->name), &ref_type, loc,
                                          &d));
  if (sem) {
    d->array = array->rank ? tsr_type_vector(TSR_DTYPE_I32, array->rank, array->dims)
                           : tsr_type_scalar(TSR_DTYPE_I32);
    memcpy(d->block, array->dims, array->rank * sizeof *block);
  } else if (!scratch) {
    d->array = *array;
    memcpy(d->block, block, array->rank * sizeof *block);
    d->has_block = params->block != NULL;
  }
  d->alias = params->role == TSR_ROLE_OUT ? params->alias : -1;
  if (d->has_block) {
    TSR_RETURN_IF_ERROR(
        tsr_region_create(kernel->module, kernel->grid_rank, &d->index_map));
    for (uint32_t i = 0; i < kernel->grid_rank; i++) {
      char name[48];
      int n = snprintf(name, sizeof name, "%s.g%u", params->name, i);
      tsr_type_t i32 = tsr_type_scalar(TSR_DTYPE_I32);
      TSR_RETURN_IF_ERROR(tsr_value_create(kernel, &i32, name, (size_t)n,
                                           &d->index_map->args[i]));
      d->index_map->args[i]->owner = d->index_map;
    }
  }
  if (out_ref) *out_ref = d->ref;
  if (out_index_map) *out_index_map = d->index_map;
  return NULL;
}

tsr_status_t tsr_ir_build_op(tsr_ir_kernel_t *kernel, tsr_ir_region_t *region,
                             const tsr_ir_op_params_t *params,
                             tsr_ir_op_t **out_op) {
  if (!params->mnemonic)
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "an op needs a mnemonic");
  tsr_opcode_t opcode = tsr_op_lookup(params->mnemonic, strlen(params->mnemonic));
  if (opcode == TSR_OP_COUNT)
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "unknown op '%s'", params->mnemonic);
  const tsr_op_info_t *info = &tsr_op_table[opcode];
  if (params->num_operands < (uint32_t)info->min_operands ||
      (info->max_operands >= 0 &&
       params->num_operands > (uint32_t)info->max_operands))
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "'%s' takes %d..%d operands, got %u",
                      info->mnemonic, info->min_operands, info->max_operands,
                      params->num_operands);
  if (info->num_results >= 0 &&
      params->num_results != (uint32_t)info->num_results)
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "'%s' has %d results, got %u",
                      info->mnemonic, info->num_results, params->num_results);
  for (uint32_t i = 0; i < params->num_operands; i++)
    if (!params->operands[i])
      return TSR_STATUS(TSR_INVALID_ARGUMENT, "'%s': operand %u is NULL",
                        info->mnemonic, i);
  uint32_t num_regions = (uint32_t)info->num_regions;
  /* The op keeps the module's copy of the file name: the caller's string
   * may be freed as soon as this returns (a binding's temporary). */
  tsr_loc_t loc = params->loc;
  loc.file = loc.file ? tsr_module_intern_file(kernel->module, loc.file)
                      : kernel->module->filename;
  if (!loc.file) return TSR_OOM();
  tsr_op_t *op;
  TSR_RETURN_IF_ERROR(tsr_op_create(kernel, region, opcode, loc, params->operands,
                                    params->num_operands, params->result_types,
                                    params->result_names, params->num_results,
                                    num_regions, &op));
  op->flags = params->flags;
  tsr_module_t *m = kernel->module;
  TSR_RETURN_IF_ERROR(tsr_op_alloc_indices(m, op, params->num_indices));
  for (uint32_t i = 0; i < params->num_indices; i++) op->indices[i] = params->indices[i];
  TSR_RETURN_IF_ERROR(tsr_op_alloc_ints(m, op, params->num_ints));
  for (uint32_t i = 0; i < params->num_ints; i++) op->ints[i] = params->ints[i];
  op->literal = params->literal;
  if (params->text) {
    op->text = tsr_module_strdup(m, params->text, strlen(params->text));
    if (!op->text) return TSR_OOM();
  }
  /* Region arguments: region 0 (and region 1 of while) get the same types. */
  uint32_t arg_regions = opcode == TSR_OP_WHILE ? 2 : (opcode == TSR_OP_IF ? 0 : 1);
  for (uint32_t r = 0; r < arg_regions && r < op->num_regions; r++) {
    TSR_RETURN_IF_ERROR(
        tsr_region_init_args(m, &op->regions[r], params->num_region_args));
    for (uint32_t i = 0; i < params->num_region_args; i++) {
      /* while: both regions see the carried values under the same names
       * (they are distinct values, each visible only in its region). */
      const char *n = params->region_arg_names ? params->region_arg_names[i] : NULL;
      /* Unnamed, the body's take the condition's names too: the printer
       * declares a while's carried names once (`iter(%a = ...)`). */
      if (!n && r == 1) n = op->regions[0].args[i]->name;
      TSR_RETURN_IF_ERROR(tsr_value_create(kernel, &params->region_arg_types[i], n,
                                           n ? strlen(n) : 0,
                                           &op->regions[r].args[i]));
      op->regions[r].args[i]->owner = &op->regions[r];
    }
  }
  if (out_op) *out_op = op;
  return NULL;
}

tsr_ir_value_t *tsr_ir_op_result(const tsr_ir_op_t *op, uint32_t i) {
  return i < op->num_results ? op->results[i] : NULL;
}

tsr_ir_region_t *tsr_ir_op_region(const tsr_ir_op_t *op, uint32_t i) {
  return i < op->num_regions ? &op->regions[i] : NULL;
}

tsr_ir_value_t *tsr_ir_region_arg(const tsr_ir_region_t *region, uint32_t i) {
  return i < region->num_args ? region->args[i] : NULL;
}
