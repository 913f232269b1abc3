/* The Mosaic TPU module of a kernel, as Pallas lays it out (docs/tpu.md,
 * pallas-tpu conventions): the kernel func.func (grid indices, scalar
 * prefetch, windowed operands, scratch) with its attributes, one
 * func.func @transform_i per windowed operand, and the op dispatch: the
 * tables, read from ir/ops.def, through which emit_base.c's walk emits
 * every op (the top of the layers of tpu/emit_internal.h). */
#include <stdio.h>
#include <stdlib.h>

#include "ir/dispatch.h"
#include "tpu/emit_internal.h"

/* ---- Dispatch ------------------------------------------------------------------ */

/* The emitter's one op dispatch, the two levels of ir/dispatch.h, as in
 * lower/emit.c: family_table, then per_op_table for the families whose ops
 * are emitted by different functions (TPU_<OP>: a row without its entry
 * does not build). Every op also has its row of ir/ops_tpu.def (an op
 * without one does not build): the MLIR spellings its family's function
 * reads, or its refusal, reported by the walk before any dispatch. Within a
 * family, an op or dtype without a TPU form is a located TSR_UNIMPLEMENTED
 * naming the op (tpu_unimplemented), never a silent default. */
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
#define TPU_SCATTER tpu_op_refused /* refused by ir/ops_tpu.def */
#define TPU_SORT tpu_op_refused /* refused by ir/ops_tpu.def */
#define TPU_ARGSORT tpu_op_refused
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

#define TSR_DISPATCH_PREFIX TPU_
static tpu_op_fn *const per_op_table[TSR_OP_COUNT] = {
#define TSR_OP TSR_DISPATCH_PER_OP
#include "ir/ops.def"
#undef TSR_OP
};

/* The entry of the families with a per-op table. */
static void emit_per_op(tpu_emitter_t *em, const tsr_op_t *op) {
  per_op_table[op->opcode](em, op);
}

/* Positional, in the order of tsr_family_t (ir/dispatch.h). */
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
TSR_DISPATCH_CHECK_FAMILIES(family_table);

/* ---- The module ---------------------------------------------------------------- */

static bool windowed(const tsr_decl_t *d) {
  return (d->role == TSR_ROLE_IN || d->role == TSR_ROLE_OUT);
}

static bool unwindowed_space(const tsr_decl_t *d) {
  return d->ref->type.space == TSR_SPACE_ANY || d->ref->type.space == TSR_SPACE_HBM;
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
  tpu_line(em, "func.func @%s%u(%s) -> (%s) {", transform_prefix(k), number,
           sig.data ? sig.data : "", res.data ? res.data : "");
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
    for (uint32_t i = 0; i < d->array.rank; i++)
      tsr_strbuf_printf(&ret, "%s%s", i ? ", " : "", zero);
    if (d->array.rank == 0) /* a rank-0 array: no block indices */
      tpu_line(em, "return");
    else
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
                      tsr_ir_dim_semantics_name((tsr_ir_dim_semantics_t)k->semantics[g]));
  tsr_strbuf_puts(&attrs, "]");
  if (k->grid_rank) {
    tsr_strbuf_puts(&attrs, ", iteration_bounds = array<i64");
    /* A dynamic extent is MLIR's dynamic size (INT64_MIN), as Pallas
     * writes it: Mosaic then takes the extent from the call's leading
     * scalar operands, one per dynamic dim in grid order (tpu_call passes
     * them; the kernel function itself does not take them). */
    for (uint32_t g = 0; g < k->grid_rank; g++)
      tsr_strbuf_printf(&attrs, "%s %lld", g ? "," : ":",
                        k->grid_bound[g] ? (long long)INT64_MIN : (long long)k->grid[g]);
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
        /* Pallas single-buffers trivially windowed VMEM operands, and an
         * output of revisit mode any is pl.Buffered(1, revisit=ANY), the
         * only buffering Mosaic takes it with: Mosaic then copies a block
         * in again when the grid comes back to it (a trivial VMEM window,
         * which never leaves its block, gets no revisit mode, as Pallas
         * lowers it). */
        bool trivial_vmem = d->ref->type.space == TSR_SPACE_VMEM && tpu_decl_trivial_window(d);
        bool revisit_any = d->role == TSR_ROLE_OUT && d->revisit == TSR_REVISIT_ANY;
        if (revisit_any || trivial_vmem)
          tsr_strbuf_puts(&attrs, "pipeline_mode = #tpu.pipeline_mode<synchronous>, ");
        if (revisit_any && !trivial_vmem)
          tsr_strbuf_puts(&attrs, "revisit_mode = #tpu.revisit_mode<any>, ");
        tsr_strbuf_printf(&attrs, "transform_indices = @%s%u, window_bounds = array<i64",
                          transform_prefix(k), w);
        for (uint32_t j = 0; j < d->array.rank; j++)
          tsr_strbuf_printf(&attrs, "%s %lld", j ? "," : ":", (long long)wb[j]);
        tsr_strbuf_puts(&attrs, ">");
        bool element = false;
        for (uint32_t j = 0; j < d->array.rank; j++) element |= d->element[j];
        if (element) {
          /* pl.Element: the transform yields element offsets into the
           * array padded as the window kind says (squeezed dims: 0, 0) */
          for (int side = 0; side < 2; side++) {
            tsr_strbuf_puts(&attrs, side ? "], [" : ", window_kind = #tpu.element_window<[");
            for (uint32_t j = 0; j < d->array.rank; j++)
              tsr_strbuf_printf(&attrs, "%s%lld", j ? ", " : "",
                                (long long)(side ? d->pad_high[j] : d->pad_low[j]));
          }
          tsr_strbuf_puts(&attrs, "]>");
        }
        tsr_strbuf_puts(&attrs, "}");
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
  tpu_emitter_t em = {
      .kernel = kernel, .chip = chip, .families = family_table, .out = &out};
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
