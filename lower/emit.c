/* tessera kernel -> MLIR text in upstream dialects (func, scf, arith, math,
 * vector, memref): the emitter's driver. It counts the uses of values,
 * dispatches each op to its family's emitter (the one op dispatch of the
 * code generator), writes the function's signature and prologue, and
 * assembles the module (layer 5, emit_internal.h). The generated code is
 * described in docs/lowering_codegen.md; its semantics are the
 * interpreter's (docs/semantics.md). */
#include <stdio.h>

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

/* ---- Dispatch ------------------------------------------------------------------------------- */

/* The code generator's one op dispatch: a case per rule of ir/ops.def (an
 * op family), each calling its family's entry point (emit_dispatch.h). No
 * silent default: a rule without a lowering is TSR_UNIMPLEMENTED naming the
 * op and its location. Inside a family, opcodes are told apart in one place
 * each, with the same loud default: em_elementwise_family and its float_op
 * and int_op (emit_expr.c), red_identity and red_combine (reductions) and
 * em_op_argreduce (emit_ops.c), em_op_semaphore and em_op_dma
 * (emit_runtime.c), em_op_grid_query and em_op_id_query (emit_values.c). */
static void emit_op(emitter_t *em, const tsr_op_t *op) {
  const tsr_op_info_t *info = &tsr_op_table[op->opcode];
  em->op = op;
  /* The lines of each op that makes code start with its location, so that
   * `tessera lower --stage mlir` reads alongside the kernel and an MLIR
   * diagnostic at a line of the generated text can name the op. */
  switch (info->rule) {
    case TSR_RULE_CONST:
    case TSR_RULE_GRID_QUERY:
    case TSR_RULE_ID_QUERY:
    case TSR_RULE_YIELD:
    case TSR_RULE_CONDITION: break;
    default:
      if (op->loc.file && !strpbrk(op->loc.file, "\r\n"))
        em_line(em, "// %s:%u:%u: %s", op->loc.file, op->loc.line, op->loc.col, info->mnemonic);
      break;
  }
  switch (info->rule) {
    case TSR_RULE_CONST: em_op_const(em, op); return;
    case TSR_RULE_GRID_QUERY: em_op_grid_query(em, op); return;
    case TSR_RULE_LOAD: em_op_load(em, op); return;
    case TSR_RULE_STORE: em_op_store(em, op); return;
    case TSR_RULE_ELEMWISE:
    case TSR_RULE_COMPARE:
    case TSR_RULE_SELECT:
    case TSR_RULE_CONVERT:
    case TSR_RULE_BITCAST: em_op_elementwise(em, op); return;
    case TSR_RULE_IOTA: em_op_iota(em, op); return;
    case TSR_RULE_BROADCAST: em_op_broadcast(em, op); return;
    case TSR_RULE_RESHAPE: em_op_reshape(em, op); return;
    case TSR_RULE_TRANSPOSE: em_op_transpose(em, op); return;
    case TSR_RULE_SLICE: em_op_slice(em, op); return;
    case TSR_RULE_CONCATENATE: em_op_concatenate(em, op); return;
    case TSR_RULE_ROLL: em_op_roll(em, op); return;
    case TSR_RULE_GATHER: em_op_gather(em, op); return;
    case TSR_RULE_REDUCE: em_op_reduce(em, op); return;
    case TSR_RULE_ARG_REDUCE: em_op_argreduce(em, op); return;
    case TSR_RULE_DOT: em_op_dot(em, op); return;
    case TSR_RULE_FOR: em_op_for(em, op); return;
    case TSR_RULE_WHILE: em_op_while(em, op); return;
    case TSR_RULE_IF: em_op_if(em, op); return;
    case TSR_RULE_SCOPED: em_op_scoped(em, op); return;
    case TSR_RULE_YIELD:
    case TSR_RULE_CONDITION: return; /* read by the parent op */
    case TSR_RULE_PRINT: em_op_print(em, op); return;
    case TSR_RULE_ASSERT: em_op_assert(em, op); return;
    case TSR_RULE_DMA: em_op_dma(em, op); return;
    case TSR_RULE_SEMAPHORE: em_op_semaphore(em, op); return;
    case TSR_RULE_ID_QUERY: em_op_id_query(em, op); return;
    case TSR_RULE_RESERVED: em_unimplemented(em, op, NULL); return;
  }
  em_unimplemented(em, op, NULL);
}

static void emit_region(emitter_t *em, const tsr_region_t *r) {
  for (const tsr_op_t *op = r->first; op && EM_OK(em); op = op->next) emit_op(em, op);
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

tsr_status_t tsr_lower_emit_mlir(const tsr_kernel_t *kernel, tsr_strbuf_t *out) {
  emitter_t em;
  memset(&em, 0, sizeof em);
  em.k = kernel;
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
  if (!em.vals || !em.uses || !em.user || !em.stored) {
    em_fail(&em, TSR_OOM());
  } else {
    count_uses(&em, &kernel->body);
    for (uint32_t i = 0; i < kernel->num_decls; i++) count_uses(&em, kernel->decls[i].index_map);
    if (em_number_sites(&em)) emit_kernel(&em, &header);
  }
  if (!em.error && (em.pro.failed || em.body.failed || em.epi.failed || header.failed))
    em_fail(&em, TSR_OOM());
  if (!em.error) {
    const tsr_strbuf_t *parts[] = {&header, &em.pro, &em.body, &em.epi};
    for (size_t i = 0; i < TSR_ARRAY_SIZE(parts); i++)
      if (parts[i]->size) tsr_strbuf_append(out, parts[i]->data, parts[i]->size);
    tsr_strbuf_puts(out, "    return\n  }\n");
    if (em.need_log1pf) tsr_strbuf_puts(out, "  func.func private @log1pf(f32) -> f32\n");
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
  tsr_free(em.sites);
  tsr_free(em.sem_slot);
  tsr_free(em.roots);
  tsr_free(em.consts);
  tsr_arena_deinitialize(&em.arena);
  return em.error;
}
