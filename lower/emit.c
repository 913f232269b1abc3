/* tessera kernel -> MLIR text in upstream dialects (func, scf, arith, math,
 * vector, memref): the emitter's driver. It counts the uses of values,
 * dispatches each op to its family's emitter (the one op dispatch of the
 * code generator), writes the function's signature and prologue, and
 * assembles the module (layer 5, emit_internal.h). The generated code is
 * described in docs/lowering_codegen.md; its semantics are the
 * interpreter's (docs/semantics.md). */
#include <stdio.h>

#include "ir/dispatch.h"
#include "ir/ir.h"
#include "lower/emit_dispatch.h"
#include "lower/emit_internal.h"
#include "lower/emit_runtime.h"
#include "lower/lower_api.h"
#include "lower/lower_internal.h"

/* ---- Analysis ------------------------------------------------------------------- */

static void count_uses(emitter_t *em, const tsr_region_t *r) {
  if (!r) return;
  for (const tsr_op_t *op = r->first; op; op = op->next) {
    for (uint32_t i = 0; i < op->num_operands; i++) {
      uint32_t id = op->operands[i]->id;
      em->uses[id]++;
      em->user[id] = op;
    }
    int32_t written = tsr_op_written_ref(op);
    if (written >= 0) em->stored[op->operands[written]->id] = true;
    for (uint32_t i = 0; i < op->num_regions; i++) count_uses(em, &op->regions[i]);
  }
}

/* The last users: for each value, the op of its home region (where it is
 * defined) that holds its last use, itself or in a nested region; frame
 * slots are released after it (em_hold). */
static const tsr_region_t *home_of(const tsr_value_t *v) {
  return v->def ? v->def->parent : v->owner;
}

static void note_uses(emitter_t *em, const tsr_region_t *home, const tsr_op_t *top,
                      const tsr_op_t *op) {
  bool term = tsr_op_table[op->opcode].flags & TSR_F_TERMINATOR;
  for (uint32_t i = 0; i < op->num_operands; i++) {
    const tsr_value_t *w = op->operands[i];
    if (home_of(w) == home) em->last_user[w->id] = top;
    /* A region's results may be its yielded values themselves (a scoped
     * region's are): what a terminator uses is never released. */
    if (term) em->escapes[w->id] = true;
  }
  for (uint32_t i = 0; i < op->num_regions; i++)
    for (const tsr_op_t *o = op->regions[i].first; o; o = o->next) note_uses(em, home, top, o);
}

static void find_last_users(emitter_t *em, const tsr_region_t *r) {
  if (!r) return;
  for (const tsr_op_t *op = r->first; op; op = op->next) {
    note_uses(em, r, op, op);
    for (uint32_t i = 0; i < op->num_regions; i++) find_last_users(em, &op->regions[i]);
  }
}

/* ---- Dispatch ------------------------------------------------------------------------------- */

/* The code generator's one op dispatch, the two levels of ir/dispatch.h:
 * family_table, then per_op_table for the families whose ops are lowered
 * by different functions (LOWER_<OP>: a row without its entry does not
 * build). The elementwise families share em_op_elementwise, whose per-op
 * code is the flt_/int_ labels of emit_expr.c (same rule); reduce's per-op
 * code is RED_ in emit_ops.c. What depends on the dtype and is not lowered
 * is TSR_UNIMPLEMENTED naming the op, its location and the cpu target
 * (em_unimplemented), never a silent default. */
typedef void lower_fn(emitter_t *em, const tsr_op_t *op);

/* Region terminators: read by the parent op. */
static void lower_terminator(emitter_t *em, const tsr_op_t *op) {}

/* The per-op entries of the families that have a per-op table. */
#define LOWER_PROGRAM_ID em_op_program_id   /* TSR_FAM_QUERY */
#define LOWER_NUM_PROGRAMS em_op_num_programs
#define LOWER_DEVICE_ID em_op_device_id
#define LOWER_CORE_ID em_op_core_id
#define LOWER_LOAD em_op_load               /* TSR_FAM_MEMORY */
#define LOWER_STORE em_op_store
#define LOWER_IOTA em_op_iota               /* TSR_FAM_SHAPE */
#define LOWER_BROADCAST em_op_broadcast
#define LOWER_RESHAPE em_op_reshape
#define LOWER_TRANSPOSE em_op_transpose
#define LOWER_SLICE em_op_slice
#define LOWER_CONCATENATE em_op_concatenate
#define LOWER_ROLL em_op_roll
#define LOWER_GATHER em_op_gather
#define LOWER_SCATTER em_op_scatter
#define LOWER_SORT em_op_sort
#define LOWER_ARGSORT em_op_sort
#define LOWER_FOR em_op_for                 /* TSR_FAM_CONTROL */
#define LOWER_WHILE em_op_while
#define LOWER_IF em_op_if
#define LOWER_SCOPED em_op_scoped
#define LOWER_YIELD lower_terminator
#define LOWER_CONDITION lower_terminator
#define LOWER_PRINT em_op_print             /* TSR_FAM_DEBUG */
#define LOWER_ASSERT em_op_assert
#define LOWER_MULTIPLE_OF em_op_multiple_of /* TSR_FAM_HINT */
#define LOWER_SEM_SIGNAL em_op_sem_signal   /* TSR_FAM_SEMAPHORE */
#define LOWER_SEM_WAIT em_op_sem_wait
#define LOWER_SEM_READ em_op_sem_read
#define LOWER_CORE_BARRIER em_op_core_barrier

#define TSR_DISPATCH_PREFIX LOWER_
static lower_fn *const per_op_table[TSR_OP_COUNT] = {
#define TSR_OP TSR_DISPATCH_PER_OP
#include "ir/ops.def"
#undef TSR_OP
};

/* The entry of the families with a per-op table. */
static void lower_per_op(emitter_t *em, const tsr_op_t *op) {
  per_op_table[op->opcode](em, op);
}

/* Positional, in the order of tsr_family_t (ir/dispatch.h). */
static lower_fn *const family_table[] = {
    em_op_const,         /* CONST */
    lower_per_op,        /* QUERY */
    lower_per_op,        /* MEMORY */
    em_op_elementwise,   /* UNARY */
    em_op_elementwise,   /* BINARY */
    em_op_elementwise,   /* COMPARE */
    em_op_elementwise,   /* SELECT */
    em_op_elementwise,   /* CONVERT */
    lower_per_op,        /* SHAPE */
    em_op_reduce,        /* REDUCE */
    em_op_argreduce,     /* ARG_REDUCE */
    em_op_dot,           /* DOT */
    lower_per_op,        /* CONTROL */
    lower_per_op,        /* DEBUG */
    em_op_dma,           /* DMA */
    lower_per_op,        /* SEMAPHORE */
    lower_per_op,        /* HINT */
};
TSR_DISPATCH_CHECK_FAMILIES(family_table);

/* Ops that make no code of their own (constants, queries, hints, terminators) get
 * no location line. */
static bool makes_code(const tsr_op_info_t *info) {
  return info->family != TSR_FAM_CONST && info->family != TSR_FAM_QUERY &&
         info->family != TSR_FAM_HINT &&
         !(info->flags & TSR_F_TERMINATOR);
}

static void emit_op(emitter_t *em, const tsr_op_t *op) {
  const tsr_op_info_t *info = &tsr_op_table[op->opcode];
  em->op = op;
  /* The lines of each op that makes code start with its location, so that
   * `tessera lower --stage mlir` reads alongside the kernel and an MLIR
   * diagnostic at a line of the generated text can name the op. */
  if (makes_code(info) && op->loc.file && !strpbrk(op->loc.file, "\r\n"))
    em_line(em, "// %s:%u:%u: %s", op->loc.file, op->loc.line, op->loc.col, info->mnemonic);
  family_table[info->family](em, op);
}

/* Families whose ops may join or pass the pending group of elementwise
 * results (em_group_add): they emit no loop nest of their own. Any other op
 * may read or write what the group writes, so the group is emitted first. */
static bool passes_group(const tsr_op_info_t *info) {
  switch (info->family) {
    case TSR_FAM_UNARY:
    case TSR_FAM_BINARY:
    case TSR_FAM_COMPARE:
    case TSR_FAM_SELECT:
    case TSR_FAM_CONVERT:
    case TSR_FAM_CONST: return true;
    default: return false;
  }
}

static void emit_region(emitter_t *em, const tsr_region_t *r) {
  for (const tsr_op_t *op = r->first; op && EM_OK(em); op = op->next) {
    if (!passes_group(&tsr_op_table[op->opcode])) em_group_flush(em);
    emit_op(em, op);
    em_release_after(em, op);
  }
  em_group_flush(em);
}

/* ---- The function ----------------------------------------------------------------------------- */

/* The signature and prologue (the runtime's pointers, the --uninit mode,
 * the step budget, this device's slice offsets), then the grid. */
static void emit_kernel(emitter_t *em, tsr_strbuf_t *header) {
  const tsr_kernel_t *k = em->k;
  uint32_t *roots = em_alloc(em, (k->num_decls + 1) * sizeof *roots); /* per decl */
  if (!roots) return;

  /* Arguments: one per non-scratch operand, the whole array with a leading
   * dimension of devices, then this core's part of the run (lower_api.h). */
  tsr_strbuf_printf(header, "module {\n  func.func @%s(", TSR_LOWER_KERNEL_FUNC);
  uint32_t nargs = 0;
  for (uint32_t i = 0; i < k->num_decls; i++) {
    const tsr_decl_t *d = &k->decls[i];
    if (d->role == TSR_ROLE_SCRATCH) continue;
    ssa_t name;
    snprintf(name.s, sizeof name.s, "%%a%u", nargs);
    roots[i] = em_add_root(em, name, (tsr_dtype_t)d->array.dtype, d->array.rank, d->array.dims);
    if (roots[i] < em->num_roots) em->roots[roots[i]].stacked = true;
    tstr_t t = em_root_type(em, roots[i]);
    tsr_strbuf_printf(header, "%s%s: %s", nargs ? ", " : "", name.s, t.s);
    nargs++;
  }
  tsr_strbuf_printf(header, "%s%%rt_fn: i64, %%rt_ctx: i64, %%device: i32, %%core: i32, "
                            "%%plo: index, %%phi: index) attributes {llvm.emit_c_interface} {\n",
                    nargs ? ", " : "");
  em->cur = &em->pro;
  em->indent = 2;
  snprintf(em->rt_fn.s, sizeof em->rt_fn.s, "%%rt_fnp");
  snprintf(em->rt_ctx.s, sizeof em->rt_ctx.s, "%%rt_ctxp");
  em_line(em, "%s = llvm.inttoptr %%rt_fn : i64 to !llvm.ptr", em->rt_fn.s);
  em_line(em, "%s = llvm.inttoptr %%rt_ctx : i64 to !llvm.ptr", em->rt_ctx.s);
  /* The run's --uninit mode, from the context (lower_api.h): one object
   * serves both modes. */
  ssa_t uz_p = em_fresh(em), uz = em_fresh(em);
  em_line(em, "%s = llvm.getelementptr %s[%d] : (!llvm.ptr) -> !llvm.ptr, i64", uz_p.s,
          em->rt_ctx.s, TSR_RT_CTX_UNINIT_ZERO);
  em_line(em, "%s = llvm.load %s : !llvm.ptr -> i64", uz.s, uz_p.s);
  em->uninit_zero = em_cmp(em, "cmpi", "ne", uz, em_cint(em, "i64", 0, 0), "i64");
  ssa_t ord_p = em_fresh(em), ord = em_fresh(em);
  em_line(em, "%s = llvm.getelementptr %s[%d] : (!llvm.ptr) -> !llvm.ptr, i64", ord_p.s,
          em->rt_ctx.s, TSR_RT_CTX_ORDER);
  em_line(em, "%s = llvm.load %s : !llvm.ptr -> i64", ord.s, ord_p.s);
  em->order_p = em_fresh(em);
  em_line(em, "%s = llvm.inttoptr %s : i64 to !llvm.ptr", em->order_p.s, ord.s);
  snprintf(em->budget_p.s, sizeof em->budget_p.s, "%%rt_budget");
  em_line(em, "%s = llvm.getelementptr %s[%d] : (!llvm.ptr) -> !llvm.ptr, i64", em->budget_p.s,
          em->rt_ctx.s, TSR_RT_CTX_BUDGET);
  snprintf(em->device.s, sizeof em->device.s, "%%device");
  snprintf(em->core.s, sizeof em->core.s, "%%core");
  ssa_t devx = em_cast(em, "arith.index_cast", em->device, "i32", "index");
  for (uint32_t r = 0; r < em->num_roots; r++) {
    int64_t slice = 1;
    for (uint32_t a = 0; a < em->roots[r].rank; a++) slice *= em->roots[r].dims[a];
    em->roots[r].base = em_imulc(em, devx, slice);
  }
  em->cur = &em->body;
  em_emit_grid(em, roots);
}

tsr_status_t tsr_lower_emit_mlir(const tsr_kernel_t *kernel, uint32_t flags,
                                 tsr_strbuf_t *out) {
  emitter_t em;
  memset(&em, 0, sizeof em);
  em.k = kernel;
  em.out_copy_in = (flags & TSR_LOWER_OUT_COPY_IN) != 0;
  em.bounds = flags & (TSR_LOWER_OOB_READS_UNINIT | TSR_LOWER_PADDED | TSR_LOWER_DOUBLE_ROWS);
  em.emit_region = emit_region;
  tsr_arena_initialize(&em.arena);
  tsr_strbuf_initialize(&em.pro);
  tsr_strbuf_initialize(&em.body);
  tsr_strbuf_initialize(&em.epi);
  tsr_strbuf_t header;
  tsr_strbuf_initialize(&header);
  em.cur = &em.body;
  em.indent = 2;
  uint32_t n = kernel->num_values + 1;
  em.vals = tsr_calloc(n, sizeof *em.vals);
  em.uses = tsr_calloc(n, sizeof *em.uses);
  em.user = tsr_calloc(n, sizeof *em.user);
  em.stored = tsr_calloc(n, sizeof *em.stored);
  em.last_user = tsr_calloc(n, sizeof *em.last_user);
  em.escapes = tsr_calloc(n, sizeof *em.escapes);
  if (!em.vals || !em.uses || !em.user || !em.stored || !em.last_user || !em.escapes) {
    em_fail(&em, TSR_OOM());
  } else {
    count_uses(&em, &kernel->body);
    find_last_users(&em, &kernel->body);
    for (uint32_t i = 0; i < kernel->num_decls; i++) count_uses(&em, kernel->decls[i].index_map);
    if (em_number_sites(&em)) emit_kernel(&em, &header);
  }
  if (!em.error && (em.pro.failed || em.body.failed || em.epi.failed || header.failed))
    em_fail(&em, TSR_OOM());
  if (!em.error) {
    /* The frame of small buffers (em_buffer), allocated before the
     * prologue's views into it and freed last. */
    tsr_strbuf_t frame, frame_end;
    tsr_strbuf_initialize(&frame);
    tsr_strbuf_initialize(&frame_end);
    if (em.frame_bytes > 0 && em.frame_bytes <= EM_FRAME_STACK_MAX) {
      tsr_strbuf_printf(&frame,
                        "    %%tsr_frame_size = arith.constant %lld : index\n"
                        "    %%tsr_frame = memref.alloca(%%tsr_frame_size) {alignment = 64 : i64} "
                        ": memref<?xi8>\n",
                        (long long)em.frame_bytes);
    } else if (em.frame_bytes > 0) {
      tsr_strbuf_printf(&frame,
                        "    %%tsr_frame_size = arith.constant %lld : index\n"
                        "    %%tsr_frame = memref.alloc(%%tsr_frame_size) {alignment = 64 : i64} "
                        ": memref<?xi8>\n",
                        (long long)em.frame_bytes);
      tsr_strbuf_puts(&frame_end, "    memref.dealloc %tsr_frame : memref<?xi8>\n");
    }
    const tsr_strbuf_t *parts[] = {&header, &frame, &em.pro, &em.body, &em.epi, &frame_end};
    for (size_t i = 0; i < TSR_ARRAY_SIZE(parts); i++)
      if (parts[i]->size) tsr_strbuf_append(out, parts[i]->data, parts[i]->size);
    if (frame.failed || frame_end.failed) em_fail(&em, TSR_OOM());
    tsr_strbuf_deinitialize(&frame);
    tsr_strbuf_deinitialize(&frame_end);
    tsr_strbuf_puts(out, "    return\n  }\n");
    if (em.need_log1pf) tsr_strbuf_puts(out, "  func.func private @log1pf(f32) -> f32\n");
    if (em.need_expf_table) em_expf_table(out);
    tsr_strbuf_puts(out, "}\n");
    if (out->failed) em_fail(&em, TSR_OOM());
  }
  tsr_strbuf_deinitialize(&header);
  tsr_strbuf_deinitialize(&em.pro);
  tsr_strbuf_deinitialize(&em.body);
  tsr_strbuf_deinitialize(&em.epi);
  tsr_free(em.vals);
  tsr_free(em.uses);
  tsr_free(em.user);
  tsr_free(em.stored);
  tsr_free(em.last_user);
  tsr_free(em.escapes);
  tsr_free(em.slots);
  tsr_free(em.free_slots);
  tsr_free(em.held_slots);
  tsr_free(em.slot_refs);
  tsr_free(em.sites);
  tsr_free(em.sem_slot);
  tsr_free(em.roots);
  tsr_free(em.consts);
  tsr_free(em.const_index);
  tsr_arena_deinitialize(&em.arena);
  return em.error;
}
