/* The op dispatch skeleton of the two MLIR emitters, lower/emit.c (cpu) and
 * tpu/emit.c (Mosaic TPU): header-only (macros, no code), so that it pulls
 * nothing into the library that includes it (lower/ links MLIR, tpu/ does
 * not). docs/architecture.md, "Back-end dispatch".
 *
 * Each emitter dispatches an op in two levels read from ir/ops.def:
 *
 *  1. family_table, indexed by the op's FAMILY column (TSR_FAM_*), names one
 *     function per family, positionally, in the order of tsr_family_t; its
 *     size is checked against TSR_FAM_COUNT (TSR_DISPATCH_CHECK_FAMILIES),
 *     so a family added without its entry does not build.
 *  2. The families whose ops are emitted by different functions (below:
 *     queries, memory, shapes, control flow, debugging, semaphores, hints)
 *     have the per-op entry of their family_table slot look the op up in
 *     per_op_table, one X-macro expansion of ir/ops.def that keeps those
 *     families' rows:
 *
 *       #define TSR_DISPATCH_PREFIX LOWER_        (entries are LOWER_<OP>)
 *       static lower_fn *const per_op_table[TSR_OP_COUNT] = {
 *       #define TSR_OP TSR_DISPATCH_PER_OP
 *       #include "ir/ops.def"
 *       #undef TSR_OP
 *       };
 *
 *     A row of such a family without its <PREFIX><OP> entry is an undeclared
 *     identifier: it does not build. A family without its line below does
 *     not build either (TSR_DISPATCH_FAMILY_<FAMILY> undeclared).
 *
 * The other families' ops share their family's function, whose per-op part
 * each emitter enforces in its own way (lower/emit_expr.c's flt_/int_<OP>
 * labels, lower/emit_ops.c's RED_ entries; the TPU's row of every op in
 * ir/ops_tpu.def). interp/prepare.c prepares the CONVERT and DMA families
 * per op as well, so it keeps its own list of the same shape. */
#ifndef TESSERA_IR_DISPATCH_H
#define TESSERA_IR_DISPATCH_H

#include "ir/ir.h"

#define TSR_DISPATCH_CAT_(a, b) a##b
#define TSR_DISPATCH_CAT(a, b) TSR_DISPATCH_CAT_(a, b)

/* One row of ir/ops.def in the per-op table: its family's line decides. */
#define TSR_DISPATCH_PER_OP(E, m, syn, rule, fam, ...) TSR_DISPATCH_FAMILY_##fam(E)
#define TSR_DISPATCH_ENTRY(E) [TSR_OP_##E] = TSR_DISPATCH_CAT(TSR_DISPATCH_PREFIX, E),
#define TSR_DISPATCH_NONE(E)

/* Which families dispatch per op (ENTRY) and which through one function
 * (NONE), in the order of tsr_family_t. */
#define TSR_DISPATCH_FAMILY_CONST TSR_DISPATCH_NONE
#define TSR_DISPATCH_FAMILY_QUERY TSR_DISPATCH_ENTRY
#define TSR_DISPATCH_FAMILY_MEMORY TSR_DISPATCH_ENTRY
#define TSR_DISPATCH_FAMILY_UNARY TSR_DISPATCH_NONE
#define TSR_DISPATCH_FAMILY_BINARY TSR_DISPATCH_NONE
#define TSR_DISPATCH_FAMILY_COMPARE TSR_DISPATCH_NONE
#define TSR_DISPATCH_FAMILY_SELECT TSR_DISPATCH_NONE
#define TSR_DISPATCH_FAMILY_CONVERT TSR_DISPATCH_NONE
#define TSR_DISPATCH_FAMILY_SHAPE TSR_DISPATCH_ENTRY
#define TSR_DISPATCH_FAMILY_REDUCE TSR_DISPATCH_NONE
#define TSR_DISPATCH_FAMILY_ARG_REDUCE TSR_DISPATCH_NONE
#define TSR_DISPATCH_FAMILY_DOT TSR_DISPATCH_NONE
#define TSR_DISPATCH_FAMILY_CONTROL TSR_DISPATCH_ENTRY
#define TSR_DISPATCH_FAMILY_DEBUG TSR_DISPATCH_ENTRY
#define TSR_DISPATCH_FAMILY_DMA TSR_DISPATCH_NONE
#define TSR_DISPATCH_FAMILY_SEMAPHORE TSR_DISPATCH_ENTRY
#define TSR_DISPATCH_FAMILY_HINT TSR_DISPATCH_ENTRY

/* The size check of a family_table. */
#define TSR_DISPATCH_CHECK_FAMILIES(table)                   \
  _Static_assert(TSR_ARRAY_SIZE(table) == TSR_FAM_COUNT,     \
                 #table ": one entry per TSR_FAM_ family, in the order of tsr_family_t")

#endif /* TESSERA_IR_DISPATCH_H */
