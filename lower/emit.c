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

/* The code generator's one op dispatch: lower_table, indexed by opcode and
 * expanded from ir/ops.def, names each op's lowering entry LOWER_<OP>
 * (defined below, grouped by the op's FAMILY column). A row added to
 * ops.def without its LOWER_ macro is a build error (an undeclared
 * identifier), and the table's size is checked against TSR_OP_COUNT.
 * Inside a family, ops are told apart per op the same way where the
 * lowering differs per op (FLT_/INT_ in emit_expr.c); what depends on the
 * dtype and is not lowered is TSR_UNIMPLEMENTED naming the op, its location
 * and the cpu target (em_unimplemented), never a silent default. */
typedef void lower_fn(emitter_t *em, const tsr_op_t *op);

/* Region terminators: read by the parent op. */
static void lower_terminator(emitter_t *em, const tsr_op_t *op) {}

/* TSR_FAM_CONST, TSR_FAM_QUERY */
#define LOWER_CONST em_op_const
#define LOWER_PROGRAM_ID em_op_program_id
#define LOWER_NUM_PROGRAMS em_op_num_programs
#define LOWER_DEVICE_ID em_op_device_id
#define LOWER_CORE_ID em_op_core_id
/* TSR_FAM_MEMORY */
#define LOWER_LOAD em_op_load
#define LOWER_STORE em_op_store
/* TSR_FAM_UNARY, BINARY, COMPARE, SELECT, CONVERT: one elementwise entry;
 * the op's own code is its FLT_ and INT_ macros (emit_expr.c). */
#define LOWER_NEG em_op_elementwise
#define LOWER_ABS em_op_elementwise
#define LOWER_SIGN em_op_elementwise
#define LOWER_EXP em_op_elementwise
#define LOWER_EXP2 em_op_elementwise
#define LOWER_LOG em_op_elementwise
#define LOWER_LOG1P em_op_elementwise
#define LOWER_SQRT em_op_elementwise
#define LOWER_RSQRT em_op_elementwise
#define LOWER_TANH em_op_elementwise
#define LOWER_LOGISTIC em_op_elementwise
#define LOWER_SIN em_op_elementwise
#define LOWER_COS em_op_elementwise
#define LOWER_FLOOR em_op_elementwise
#define LOWER_CEIL em_op_elementwise
#define LOWER_ROUND em_op_elementwise
#define LOWER_NOT em_op_elementwise
#define LOWER_CLZ em_op_elementwise
#define LOWER_POPCOUNT em_op_elementwise
#define LOWER_ADD em_op_elementwise
#define LOWER_SUB em_op_elementwise
#define LOWER_MUL em_op_elementwise
#define LOWER_DIV em_op_elementwise
#define LOWER_REM em_op_elementwise
#define LOWER_MAX em_op_elementwise
#define LOWER_MIN em_op_elementwise
#define LOWER_POW em_op_elementwise
#define LOWER_AND em_op_elementwise
#define LOWER_OR em_op_elementwise
#define LOWER_XOR em_op_elementwise
#define LOWER_SHL em_op_elementwise
#define LOWER_SHRL em_op_elementwise
#define LOWER_SHRA em_op_elementwise
#define LOWER_EQ em_op_elementwise
#define LOWER_NE em_op_elementwise
#define LOWER_LT em_op_elementwise
#define LOWER_LE em_op_elementwise
#define LOWER_GT em_op_elementwise
#define LOWER_GE em_op_elementwise
#define LOWER_SELECT em_op_elementwise
#define LOWER_CONVERT em_op_elementwise
#define LOWER_BITCAST em_op_elementwise
/* TSR_FAM_SHAPE */
#define LOWER_IOTA em_op_iota
#define LOWER_BROADCAST em_op_broadcast
#define LOWER_RESHAPE em_op_reshape
#define LOWER_TRANSPOSE em_op_transpose
#define LOWER_SLICE em_op_slice
#define LOWER_CONCATENATE em_op_concatenate
#define LOWER_ROLL em_op_roll
#define LOWER_GATHER em_op_gather
/* TSR_FAM_REDUCE (per op: RED_ in emit_ops.c), TSR_FAM_ARG_REDUCE, TSR_FAM_DOT */
#define LOWER_REDUCE_SUM em_op_reduce
#define LOWER_REDUCE_MAX em_op_reduce
#define LOWER_REDUCE_MIN em_op_reduce
#define LOWER_REDUCE_PROD em_op_reduce
#define LOWER_REDUCE_AND em_op_reduce
#define LOWER_REDUCE_OR em_op_reduce
#define LOWER_ARGMAX em_op_argreduce
#define LOWER_ARGMIN em_op_argreduce
#define LOWER_DOT em_op_dot
/* TSR_FAM_CONTROL */
#define LOWER_FOR em_op_for
#define LOWER_WHILE em_op_while
#define LOWER_IF em_op_if
#define LOWER_SCOPED em_op_scoped
#define LOWER_YIELD lower_terminator
#define LOWER_CONDITION lower_terminator
/* TSR_FAM_DEBUG */
#define LOWER_PRINT em_op_print
#define LOWER_ASSERT em_op_assert
/* TSR_FAM_DMA, TSR_FAM_SEMAPHORE */
#define LOWER_DMA_START em_op_dma
#define LOWER_DMA_WAIT em_op_dma
#define LOWER_SEM_SIGNAL em_op_sem_signal
#define LOWER_SEM_WAIT em_op_sem_wait
#define LOWER_SEM_READ em_op_sem_read
#define LOWER_CORE_BARRIER em_op_core_barrier

static lower_fn *const lower_table[] = {
#define TSR_OP(E, m, syn, rule, fam, mino, maxo, nres, nreg, flags, text) LOWER_##E,
#include "ir/ops.def"
#undef TSR_OP
};
_Static_assert(TSR_ARRAY_SIZE(lower_table) == TSR_OP_COUNT,
               "lower_table: one LOWER_ entry per row of ir/ops.def");

/* Ops that make no code of their own (constants, queries, terminators) get
 * no location line. */
static bool makes_code(const tsr_op_info_t *info) {
  return info->family != TSR_FAM_CONST && info->family != TSR_FAM_QUERY &&
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
  lower_table[op->opcode](em, op);
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
