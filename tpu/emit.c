/* The Mosaic TPU module of a kernel, as Pallas lays it out (docs/tpu.md,
 * pallas-tpu conventions): the kernel func.func (grid indices, scalar
 * prefetch, windowed operands, scratch) with its attributes, one
 * func.func @transform_i per windowed operand, and the one op dispatch by
 * family read from ir/ops.def. Also the text plumbing of tpu/. */
#include <stdio.h>
#include <stdlib.h>

#include "tpu/tpu_internal.h"

/* ---- Text and names ------------------------------------------------------------ */

void tpu_line(tpu_emitter_t *em, const char *fmt, ...) {
  for (int i = 0; i < em->indent; i++) tsr_strbuf_append(em->out, "  ", 2);
  va_list ap;
  va_start(ap, fmt);
  tsr_strbuf_vprintf(em->out, fmt, ap);
  va_end(ap);
  tsr_strbuf_append(em->out, "\n", 1);
}

const char *tpu_tmp(tpu_emitter_t *em) {
  char *slot = em->ring[em->ring_next++ % TSR_ARRAY_SIZE(em->ring)];
  snprintf(slot, sizeof em->ring[0], "%%$%u", em->next_tmp++);
  return slot;
}

void tpu_fail(tpu_emitter_t *em, tsr_status_t status) {
  if (!status) return;
  if (em->error) {
    tsr_status_free(status);
    return;
  }
  em->error = status;
}

void tpu_unimplemented(tpu_emitter_t *em, const tsr_op_t *op, const char *fmt, ...) {
  if (em->error) return;
  char why[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof why, fmt, ap);
  va_end(ap);
  const char *m = tsr_op_table[op->opcode].mnemonic;
  em->error = TSR_STATUS_AT_OP(TSR_UNIMPLEMENTED, op->loc, m,
                               "op '%s' cannot be emitted for TPU (%s): %s", m,
                               em->chip->name, why);
}

const char *tpu_name(tpu_emitter_t *em, const tsr_value_t *v) {
  if (v && v->id < em->num_names && em->names[v->id]) return em->names[v->id];
  tpu_fail(em, TSR_STATUS(TSR_INTERNAL, "tpu emitter: value '%%%s' has no name",
                          v && v->name ? v->name : "?"));
  return "%?";
}

void tpu_set_name(tpu_emitter_t *em, const tsr_value_t *v, const char *name) {
  if (v->id >= em->num_names) {
    tpu_fail(em, TSR_STATUS(TSR_INTERNAL, "tpu emitter: value id out of range"));
    return;
  }
  char *copy = tsr_strndup(name, strlen(name));
  if (!copy) {
    tpu_fail(em, TSR_OOM());
    return;
  }
  tsr_free(em->names[v->id]);
  em->names[v->id] = copy;
}

/* ---- Types ------------------------------------------------------------------------ */

const char *tpu_elem(tsr_dtype_t dtype) {
  switch (dtype) {
  case TSR_DTYPE_F32: return "f32";
  case TSR_DTYPE_BF16: return "bf16";
  case TSR_DTYPE_F16: return "f16";
  case TSR_DTYPE_I32: case TSR_DTYPE_U32: return "i32";
  case TSR_DTYPE_I16: case TSR_DTYPE_U16: return "i16";
  case TSR_DTYPE_I8: case TSR_DTYPE_U8: return "i8";
  case TSR_DTYPE_I1: return "i1";
  default: return "?";
  }
}

static size_t put_dims(char *buf, size_t at, uint32_t rank, const int64_t *dims) {
  for (uint32_t i = 0; i < rank && at < TPU_TYPE_MAX; i++)
    at += (size_t)snprintf(buf + at, TPU_TYPE_MAX - at, "%lldx", (long long)dims[i]);
  return at < TPU_TYPE_MAX ? at : TPU_TYPE_MAX - 1;
}

const char *tpu_vector(char *buf, tsr_dtype_t dtype, uint32_t rank, const int64_t *dims) {
  if (rank == 0) {
    snprintf(buf, TPU_TYPE_MAX, "%s", tpu_elem(dtype));
    return buf;
  }
  size_t at = (size_t)snprintf(buf, TPU_TYPE_MAX, "vector<");
  at = put_dims(buf, at, rank, dims);
  snprintf(buf + at, TPU_TYPE_MAX - at, "%s>", tpu_elem(dtype));
  return buf;
}

static const char *space_attr(tsr_space_t space) {
  switch (space) {
  case TSR_SPACE_ANY: return "any";
  case TSR_SPACE_HBM: return "hbm";
  case TSR_SPACE_VMEM: return "vmem";
  case TSR_SPACE_SMEM: return "smem";
  default: return "?";
  }
}

const char *tpu_memref(char *buf, const tsr_type_t *t, uint32_t rank, const int64_t *dims) {
  size_t at = (size_t)snprintf(buf, TPU_TYPE_MAX, "memref<");
  at = put_dims(buf, at, rank, dims);
  if (t->kind == TSR_TYPE_SEM)
    snprintf(buf + at, TPU_TYPE_MAX - at,
             "!tpu.%s, #tpu.memory_space<semaphore_mem>>",
             t->dtype == TSR_SEM_DMA ? "dma_semaphore" : "semaphore");
  else
    /* i1 memory is i32, as Pallas stores bool arrays (BOOL_MEMREF_TYPE). */
    snprintf(buf + at, TPU_TYPE_MAX - at, "%s, #tpu.memory_space<%s>>",
             t->dtype == TSR_DTYPE_I1 ? "i32" : tpu_elem(t->dtype),
             space_attr(t->space));
  return buf;
}

const char *tpu_type(char *buf, const tsr_type_t *t) {
  switch (t->kind) {
  case TSR_TYPE_SCALAR: return tpu_vector(buf, t->dtype, 0, NULL);
  case TSR_TYPE_VECTOR: return tpu_vector(buf, t->dtype, t->rank, t->dims);
  default: return tpu_memref(buf, t, t->rank, t->dims);
  }
}

/* ---- Dispatch ------------------------------------------------------------------------ */

/* The emitter's one op dispatch, in two levels read from ir/ops.def, as in
 * interp/prepare.c and lower/emit.c: family_table, indexed by the op's
 * FAMILY column (size checked against TSR_FAM_COUNT), names one function
 * per family; the families whose ops are emitted by different functions
 * look the op up in per_op_table, expanded from their rows of ir/ops.def:
 * a row added to such a family without its TPU_<OP> entry does not build
 * (an undeclared identifier). Within a family, an op or dtype without a
 * TPU form is a located TSR_UNIMPLEMENTED naming the op (tpu_unimplemented),
 * never a silent default. */
#define TPU_PROGRAM_ID tpu_op_program_id /* TSR_FAM_QUERY */
#define TPU_NUM_PROGRAMS tpu_op_num_programs
#define TPU_DEVICE_ID tpu_op_device_id
#define TPU_CORE_ID tpu_op_core_id
#define TPU_LOAD tpu_op_load /* TSR_FAM_MEMORY */
#define TPU_STORE tpu_op_store
#define TPU_IOTA tpu_op_iota /* TSR_FAM_SHAPE */
#define TPU_BROADCAST tpu_op_broadcast
#define TPU_RESHAPE tpu_op_reshape
#define TPU_TRANSPOSE tpu_op_transpose
#define TPU_SLICE tpu_op_slice
#define TPU_CONCATENATE tpu_op_concatenate
#define TPU_ROLL tpu_op_roll
#define TPU_GATHER tpu_op_gather
#define TPU_SORT tpu_op_sort
#define TPU_ARGSORT tpu_op_sort
#define TPU_FOR tpu_op_for /* TSR_FAM_CONTROL */
#define TPU_WHILE tpu_op_while
#define TPU_IF tpu_op_if
#define TPU_SCOPED tpu_op_scoped
#define TPU_YIELD tpu_op_terminator
#define TPU_CONDITION tpu_op_terminator
#define TPU_PRINT tpu_op_print /* TSR_FAM_DEBUG */
#define TPU_ASSERT tpu_op_assert
#define TPU_MULTIPLE_OF tpu_op_multiple_of /* TSR_FAM_HINT */
#define TPU_SEM_SIGNAL tpu_op_sem_signal /* TSR_FAM_SEMAPHORE */
#define TPU_SEM_WAIT tpu_op_sem_wait
#define TPU_SEM_READ tpu_op_sem_read
#define TPU_CORE_BARRIER tpu_op_core_barrier

#define PER_OP_ENTRY(E) [TSR_OP_##E] = TPU_##E,
#define PER_OP_NONE(E)
#define PER_OP_CONST PER_OP_NONE
#define PER_OP_QUERY PER_OP_ENTRY
#define PER_OP_MEMORY PER_OP_ENTRY
#define PER_OP_UNARY PER_OP_NONE /* tpu_op_elementwise: emit_ops.c's tables */
#define PER_OP_BINARY PER_OP_NONE
#define PER_OP_COMPARE PER_OP_NONE
#define PER_OP_SELECT PER_OP_NONE
#define PER_OP_CONVERT PER_OP_NONE
#define PER_OP_SHAPE PER_OP_ENTRY
#define PER_OP_REDUCE PER_OP_NONE
#define PER_OP_ARG_REDUCE PER_OP_NONE
#define PER_OP_DOT PER_OP_NONE
#define PER_OP_CONTROL PER_OP_ENTRY
#define PER_OP_DEBUG PER_OP_ENTRY
#define PER_OP_DMA PER_OP_NONE
#define PER_OP_SEMAPHORE PER_OP_ENTRY
#define PER_OP_HINT PER_OP_ENTRY
static tpu_op_fn *const per_op_table[TSR_OP_COUNT] = {
#define TSR_OP(E, m, syn, rule, fam, mino, maxo, nres, nreg, flags, text) PER_OP_##fam(E)
#include "ir/ops.def"
#undef TSR_OP
};

/* The entry of the families with a per-op table (every row has one: a
 * missing TPU_<OP> does not build). */
static void emit_per_op(tpu_emitter_t *em, const tsr_op_t *op) {
  per_op_table[op->opcode](em, op);
}

/* Positional, in the order of tsr_family_t (ir/ir.h). */
static tpu_op_fn *const family_table[] = {
    tpu_op_const,       /* CONST */
    emit_per_op,        /* QUERY */
    emit_per_op,        /* MEMORY */
    tpu_op_elementwise, /* UNARY */
    tpu_op_elementwise, /* BINARY */
    tpu_op_elementwise, /* COMPARE */
    tpu_op_elementwise, /* SELECT */
    tpu_op_elementwise, /* CONVERT */
    emit_per_op,        /* SHAPE */
    tpu_op_reduce,      /* REDUCE */
    tpu_op_argreduce,   /* ARG_REDUCE */
    tpu_op_dot,         /* DOT */
    emit_per_op,        /* CONTROL */
    emit_per_op,        /* DEBUG */
    tpu_op_dma,         /* DMA */
    emit_per_op,        /* SEMAPHORE */
    emit_per_op,        /* HINT */
};
_Static_assert(TSR_ARRAY_SIZE(family_table) == TSR_FAM_COUNT,
               "family_table: one TPU entry per TSR_FAM_ family");

static void emit_op(tpu_emitter_t *em, const tsr_op_t *op) {
  const tsr_op_info_t *info = &tsr_op_table[op->opcode];
  if (info->flags & TSR_F_TERMINATOR) return; /* read by the parent op */
  if (op->loc.file && !strpbrk(op->loc.file, "\r\n") && info->family != TSR_FAM_CONST)
    tpu_line(em, "// %s:%u:%u: %s", op->loc.file, op->loc.line, op->loc.col, info->mnemonic);
  /* libtpu makes no f16 vectors: every truncf/sitofp to one fails to
   * legalize ("tpu.pack_subelements" to f16, v5e and v6e alike), so an op
   * with an f16 block result cannot be emitted. Loads and stores say why
   * in their own words. */
  if (op->opcode != TSR_OP_LOAD)
    for (uint32_t i = 0; i < op->num_results; i++) {
      const tsr_type_t *t = &op->results[i]->type;
      if (t->kind == TSR_TYPE_VECTOR && t->dtype == TSR_DTYPE_F16) {
        tpu_unimplemented(em, op, "TPUs have no f16 vector values (libtpu cannot pack f16 "
                                  "vectors: \"failed to legalize tpu.pack_subelements\"); "
                                  "compute in bf16 or f32");
        return;
      }
    }
  family_table[info->family](em, op);
}

void tpu_emit_region(tpu_emitter_t *em, const tsr_region_t *region) {
  for (const tsr_op_t *op = region->first; op && TPU_OK(em); op = op->next) emit_op(em, op);
}

const tsr_op_t *tpu_terminator(const tsr_region_t *region) {
  const tsr_op_t *last = region->last;
  return last && (tsr_op_table[last->opcode].flags & TSR_F_TERMINATOR) ? last : NULL;
}

/* ---- The module --------------------------------------------------------------------- */

static bool windowed(const tsr_decl_t *d) {
  return (d->role == TSR_ROLE_IN || d->role == TSR_ROLE_OUT);
}

static bool unwindowed_space(const tsr_decl_t *d) {
  return d->ref->type.space == TSR_SPACE_ANY || d->ref->type.space == TSR_SPACE_HBM;
}

static const char *semantics_name(uint8_t s) {
  switch (s) {
  case TSR_DIM_PARALLEL: return "parallel";
  case TSR_DIM_CORE_PARALLEL: return "core_parallel";
  default: return "arbitrary";
  }
}

/* The block dims of a windowed operand, squeezed ones as 1 (window_bounds). */
static void window_bounds(const tsr_decl_t *d, int64_t *out) {
  for (uint32_t i = 0; i < d->array.rank; i++)
    out[i] = d->block[i] == TSR_SQUEEZED ? 1 : d->block[i];
}

/* The transform functions are @transform_N as in Pallas, unless the
 * kernel itself is named so (then @window_transform_N): the symbols of a
 * module are unique. */
static const char *transform_prefix(const tsr_kernel_t *k) {
  return strncmp(k->name, "transform_", 10) == 0 ? "window_transform_" : "transform_";
}

/* One func.func @transform_N per windowed operand: the index map with the
 * grid indices and the scalar-prefetch refs as arguments, returning one
 * i32 block index per array dimension. */
static void emit_transform(tpu_emitter_t *em, const tsr_decl_t *d, uint32_t number) {
  const tsr_kernel_t *k = em->kernel;
  char ty[TPU_TYPE_MAX];
  tsr_strbuf_t sig;
  tsr_strbuf_initialize(&sig);
  const tsr_region_t *map = d->index_map;
  for (uint32_t g = 0; g < k->grid_rank; g++) {
    char name[32];
    if (map && g < map->num_args) {
      char *n = tsr_malloc(strlen(map->args[g]->name) + 2);
      if (!n) { tpu_fail(em, TSR_OOM()); break; }
      n[0] = '%';
      strcpy(n + 1, map->args[g]->name);
      tsr_free(em->names[map->args[g]->id]);
      em->names[map->args[g]->id] = n;
      tsr_strbuf_printf(&sig, "%s%s: i32", g ? ", " : "", n);
    } else {
      snprintf(name, sizeof name, "%%$g%u", g);
      tsr_strbuf_printf(&sig, "%s%s: i32", g ? ", " : "", name);
    }
  }
  uint32_t nargs = k->grid_rank;
  for (uint32_t i = 0; i < k->num_decls; i++) {
    const tsr_decl_t *p = &k->decls[i];
    if (p->role != TSR_ROLE_PREFETCH) continue;
    tsr_strbuf_printf(&sig, "%s%s: %s", nargs++ ? ", " : "", tpu_name(em, p->ref),
                      tpu_type(ty, &p->ref->type));
  }
  tsr_strbuf_t res;
  tsr_strbuf_initialize(&res);
  for (uint32_t i = 0; i < d->array.rank; i++) tsr_strbuf_printf(&res, "%si32", i ? ", " : "");
  tpu_line(em, "func.func @%s%u(%s) -> (%s) {", transform_prefix(k), number, sig.data ? sig.data : "",
           res.data ? res.data : "");
  em->indent++;
  em->in_transform = true;
  if (map) {
    tpu_emit_region(em, map);
    const tsr_op_t *y = tpu_terminator(map);
    if (y && TPU_OK(em)) tpu_op_terminator(em, y);
  } else {
    const char *zero = tpu_tmp(em);
    tpu_line(em, "%s = arith.constant 0 : i32", zero);
    tsr_strbuf_t ret;
    tsr_strbuf_initialize(&ret);
    for (uint32_t i = 0; i < d->array.rank; i++) tsr_strbuf_printf(&ret, "%s%s", i ? ", " : "", zero);
    tpu_line(em, "return %s : %s", ret.data ? ret.data : "", res.data ? res.data : "");
    tsr_strbuf_deinitialize(&ret);
  }
  em->in_transform = false;
  em->indent--;
  tpu_line(em, "}");
  if (sig.failed || res.failed) tpu_fail(em, TSR_OOM());
  tsr_strbuf_deinitialize(&sig);
  tsr_strbuf_deinitialize(&res);
}

static void emit_module(tpu_emitter_t *em) {
  const tsr_kernel_t *k = em->kernel;
  char ty[TPU_TYPE_MAX];
  /* Names of the kernel's arguments: its refs keep their .tsr names. */
  for (uint32_t i = 0; i < k->num_decls; i++) {
    char *n = tsr_malloc(strlen(k->decls[i].ref->name) + 2);
    if (!n) { tpu_fail(em, TSR_OOM()); return; }
    n[0] = '%';
    strcpy(n + 1, k->decls[i].ref->name);
    em->names[k->decls[i].ref->id] = n;
  }
  tsr_strbuf_t sig, attrs;
  tsr_strbuf_initialize(&sig);
  tsr_strbuf_initialize(&attrs);
  uint32_t nargs = 0, num_prefetch = 0, num_scratch = 0;
  for (uint32_t g = 0; g < k->grid_rank; g++)
    tsr_strbuf_printf(&sig, "%s%%$g%u: i32", nargs++ ? ", " : "", g);
  for (uint32_t i = 0; i < k->num_decls; i++) {
    const tsr_decl_t *d = &k->decls[i];
    num_prefetch += d->role == TSR_ROLE_PREFETCH;
    num_scratch += d->role == TSR_ROLE_SCRATCH;
    const tsr_type_t *t = &d->ref->type;
    tsr_strbuf_printf(&sig, "%s%s: %s", nargs++ ? ", " : "", em->names[d->ref->id],
                      tpu_type(ty, t));
  }
  /* Attributes, in the order MLIR prints them (alphabetical). */
  tsr_strbuf_puts(&attrs, "dimension_semantics = [");
  for (uint32_t g = 0; g < k->grid_rank; g++)
    tsr_strbuf_printf(&attrs, "%s#tpu.dimension_semantics<%s>", g ? ", " : "",
                      semantics_name(k->semantics[g]));
  tsr_strbuf_puts(&attrs, "]");
  if (k->grid_rank) {
    tsr_strbuf_puts(&attrs, ", iteration_bounds = array<i64");
    for (uint32_t g = 0; g < k->grid_rank; g++)
      tsr_strbuf_printf(&attrs, "%s %lld", g ? "," : ":", (long long)k->grid[g]);
    tsr_strbuf_puts(&attrs, ">");
  }
  tsr_strbuf_printf(&attrs, ", scalar_prefetch = %u : i64, scratch_operands = %u : i64",
                    num_prefetch, num_scratch);
  tsr_strbuf_puts(&attrs, ", tpu.core_type = #tpu.core_type<tc>");
  if (k->grid_rank) {
    tsr_strbuf_puts(&attrs, ", window_params = [");
    uint32_t w = 0;
    for (uint32_t i = 0; i < k->num_decls; i++) {
      const tsr_decl_t *d = &k->decls[i];
      if (!windowed(d)) continue;
      if (w) tsr_strbuf_puts(&attrs, ", ");
      if (unwindowed_space(d)) {
        tsr_strbuf_puts(&attrs, "{}");
      } else {
        int64_t wb[TSR_MAX_RANK];
        window_bounds(d, wb);
        tsr_strbuf_puts(&attrs, "{");
        /* Pallas single-buffers trivially windowed VMEM operands. */
        if (d->ref->type.space == TSR_SPACE_VMEM && tpu_decl_trivial_window(d))
          tsr_strbuf_puts(&attrs, "pipeline_mode = #tpu.pipeline_mode<synchronous>, ");
        tsr_strbuf_printf(&attrs, "transform_indices = @%s%u, window_bounds = array<i64",
                          transform_prefix(k), w);
        for (uint32_t j = 0; j < d->array.rank; j++)
          tsr_strbuf_printf(&attrs, "%s %lld", j ? "," : ":", (long long)wb[j]);
        tsr_strbuf_puts(&attrs, ">}");
      }
      w++;
    }
    tsr_strbuf_puts(&attrs, "]");
  }
  if (sig.failed || attrs.failed) tpu_fail(em, TSR_OOM());
  if (TPU_OK(em)) {
    tpu_line(em, "module {");
    em->indent++;
    tpu_line(em, "func.func @%s(%s) attributes {%s} {", k->name, sig.data ? sig.data : "",
             attrs.data ? attrs.data : "");
    em->indent++;
    tpu_emit_region(em, &k->body);
    tpu_line(em, "return");
    em->indent--;
    tpu_line(em, "}");
    uint32_t w = 0;
    for (uint32_t i = 0; i < k->num_decls && TPU_OK(em) && k->grid_rank; i++) {
      const tsr_decl_t *d = &k->decls[i];
      if (!windowed(d)) continue;
      if (!unwindowed_space(d)) emit_transform(em, d, w);
      w++;
    }
    em->indent--;
    tpu_line(em, "}");
  }
  tsr_strbuf_deinitialize(&sig);
  tsr_strbuf_deinitialize(&attrs);
}

tsr_status_t tpu_emit_kernel(const tsr_kernel_t *kernel, const tpu_chip_t *chip,
                             char **out_text) {
  tsr_strbuf_t out;
  tsr_strbuf_initialize(&out);
  tpu_emitter_t em = {.kernel = kernel, .chip = chip, .out = &out};
  em.num_names = kernel->num_values;
  em.names = tsr_calloc(em.num_names ? em.num_names : 1, sizeof *em.names);
  if (!em.names) return TSR_OOM();
  emit_module(&em);
  for (uint32_t i = 0; i < em.num_names; i++) tsr_free(em.names[i]);
  tsr_free(em.names);
  if (!em.error && out.failed) em.error = TSR_OOM();
  if (em.error) {
    tsr_strbuf_deinitialize(&out);
    return em.error;
  }
  *out_text = tsr_strbuf_take(&out);
  return *out_text ? NULL : TSR_OOM();
}
