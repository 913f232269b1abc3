/* What the files of the IR verifier share (ir/verify*.c): its state, the
 * text and diagnostic helpers, and the entry points of each part.
 * Library-internal. */
#ifndef TESSERA_IR_VERIFY_INTERNAL_H
#define TESSERA_IR_VERIFY_INTERNAL_H

/* Layering (a file calls only the files below it):
 *   verify.c         the driver: module and kernel walk, pre-pass, regions,
 *                    control flow, arity and operand checks of each op
 *   verify_header.c  the kernel header: grid, operands, BlockSpecs, aliases,
 *                    scratch (index maps are walked by the driver)
 *   verify_rules.c   the op type rules, one per TSR_RULE_*
 *   verify_view.c    views: indices of load, store, slice, DMA and semaphore
 *                    ops, and the rules of those ops
 *   verify_diag.c    diagnostics, type and index texts, well-formed types,
 *                    value visibility, expect_* checks shared by the rules
 * verify.c calls verify_header.c and verify_rules.c; verify_rules.c calls
 * verify_view.c; every file calls verify_diag.c, which calls no other. */

#include <stdio.h>

#include "ir/opview.h"

enum {
  DIAG_LIMIT = 50,
  MAX_DEPTH = 256, /* region nesting; the interpreter recurses per region */
};
/* Keeps the checks' large frames (message buffers) out of the recursion
 * verify_region -> verify_op -> verify_control -> verify_region. */
#if defined(__GNUC__)
#define NOINLINE __attribute__((noinline))
#else
#define NOINLINE
#endif
#define MAX_VALUE_ELEMENTS (INT64_C(1) << 31) /* per block value or VMEM/SMEM ref */
#define MAX_ARRAY_BYTES (INT64_C(1) << 40)    /* per HBM array */

/* ---- Verifier state --------------------------------------------------------- */

/* Where a value is defined. */
typedef enum zone {
  ZONE_KERNEL, /* a kernel operand's ref: the body sees all, maps only prefetch */
  ZONE_BODY,   /* the kernel body or a region nested in it */
  ZONE_MAP,    /* an index map (decl says whose) */
} zone_t;

/* Visibility while walking: a value becomes visible at its definition and
 * stops being visible when its region ends. */
typedef enum vis { VIS_UNREACHED, VIS_VISIBLE, VIS_ENDED } vis_t;

typedef struct value_info {
  const tsr_value_t *value; /* the value with this id; NULL: none defined */
  uint8_t zone;             /* zone_t */
  uint8_t vis;              /* vis_t */
  bool type_ok;             /* the type is well formed (safe to measure) */
  uint32_t decl;            /* ZONE_KERNEL: its decl; ZONE_MAP: the map's decl */
} value_info_t;

typedef struct verifier {
  tsr_diag_list_t diags;
  const tsr_kernel_t *kernel;
  value_info_t *values; /* by value id, num_values entries */
  uint32_t num_values;
  int32_t map_decl;     /* the decl whose index map is being walked, -1: body */
  const tsr_op_t *op;   /* the op being verified (its regions' ops while
                           they are), NULL: none; names the op of records */
} verifier_t;

/* What ends a region and what it yields. */
typedef enum region_kind {
  REGION_BODY,  /* the kernel body: no terminator */
  REGION_MAP,   /* an index map: yield of one i32 per array dimension */
  REGION_YIELD, /* for/if/scoped/while body: yield of the owner's results */
  REGION_COND,  /* while condition: condition of an i1 */
} region_kind_t;

typedef struct region_ctx {
  region_kind_t kind;
  const tsr_op_t *owner; /* REGION_YIELD/COND: the control op */
  const char *name;      /* "body", "then region", ... */
  uint32_t map_rank;     /* REGION_MAP: values to yield */
  uint32_t depth;
} region_ctx_t;

/* ---- Text helpers (verify_diag.c) ------------------------------------------------ */

/* A small fixed buffer for one formatted type or index, used inside a single
 * diagnostic: TYPE_TEXT(&t) expands to a temporary that lives for the
 * enclosing block. */
typedef struct tbuf {
  char s[224];
  size_t len;
} tbuf_t;

void TSR_PRINTF(2, 3) vf_bput(tbuf_t *b, const char *fmt, ...);
/* "[8, 128]"; with `squeezed`, TSR_SQUEEZED entries print as "squeezed". */
void vf_put_dims(tbuf_t *b, const int64_t *dims, uint32_t rank, bool squeezed);
/* The type as docs/ir.md writes it (tsr_type_print's format), safe on any
 * bytes: unknown kinds, dtypes and ranks print as such. */
const char *vf_type_text(tbuf_t *b, const tsr_type_t *t);
#define TYPE_TEXT(t) vf_type_text(&(tbuf_t){.len = 0}, (t))
/* "[8, 128]", TSR_SQUEEZED entries as "squeezed". */
const char *vf_dims_text(tbuf_t *b, const int64_t *dims, uint32_t rank);
#define DIMS_TEXT(d, r) vf_dims_text(&(tbuf_t){.len = 0}, (d), (r))

static inline const char *vname(const tsr_value_t *value) {
  return value && value->name ? value->name : "?";
}

static inline const char *mnemonic(const tsr_op_t *op) {
  return op->opcode < TSR_OP_COUNT ? tsr_op_table[op->opcode].mnemonic : "?";
}

/* ---- Diagnostics (verify_diag.c) ------------------------------------------------- */

void TSR_PRINTF(3, 4) vf_report(verifier_t *v, tsr_loc_t loc, const char *fmt, ...);
/* vf_report() with a "kernel @name: " prefix, for header-level rules. */
void TSR_PRINTF(3, 4) vf_kreport(verifier_t *v, tsr_loc_t loc, const char *fmt, ...);

/* ---- Types ---------------------------------------------------------------------- */

static inline bool is_value_type(const tsr_type_t *t) {
  return t->kind == TSR_TYPE_SCALAR || t->kind == TSR_TYPE_VECTOR;
}

static inline bool is_i32_scalar(const tsr_type_t *t) {
  return t->kind == TSR_TYPE_SCALAR && t->dtype == TSR_DTYPE_I32;
}

/* What smem may hold. A TPU's smem is 32-bit words, but Pallas keeps
 * narrower scalars there (bf16, i16 and i8 scalar prefetch, loaded and
 * stored one scalar at a time) and i1 as an i32 word each; the sub-byte
 * dtypes have no scalar form on a TPU. */
static inline bool smem_dtype_ok(uint32_t dtype) {
  return dtype == TSR_DTYPE_I1 || tsr_dtype_bits((tsr_dtype_t)dtype) >= 8;
}
#define SMEM_DTYPES_TEXT "8-, 16- or 32-bit elements or i1"

static inline tsr_dtype_class_t dclass(uint32_t dtype) {
  return tsr_dtype_class((tsr_dtype_t)dtype);
}

/* Element count of the dims, or -1 if it overflows int64. */
static inline int64_t count_elements(const int64_t *dims, uint32_t rank) {
  int64_t n = 1;
  for (uint32_t i = 0; i < rank; i++)
    if (!tsr_mul_i64(n, dims[i], &n)) return -1;
  return n;
}

static inline tsr_type_t same_shape(const tsr_type_t *shape, uint32_t dtype) {
  return shape && shape->kind == TSR_TYPE_VECTOR
             ? tsr_type_vector((tsr_dtype_t)dtype, shape->rank, shape->dims)
             : tsr_type_scalar((tsr_dtype_t)dtype);
}

/* Whether `t` is well formed: a known kind, dtype and space, rank <= 6,
 * dims >= 1, and a size the interpreter can hold (2^31 elements per block
 * value or VMEM/SMEM ref, 2^40 bytes per HBM ref). If not and `why` is
 * given, says why. (verify_diag.c) */
bool vf_type_wellformed(const tsr_type_t *t, tbuf_t *why);

/* ---- Values and visibility (verify_diag.c) ---------------------------------------- */

/* The info of a value of this kernel; NULL for foreign or missing values. */
value_info_t *vf_info_of(verifier_t *v, const tsr_value_t *value);
/* A value whose type rules can run: this kernel's, visible, well typed. */
bool vf_usable(verifier_t *v, const tsr_value_t *value);
/* A definition (result or region argument) whose type can be inspected. */
bool vf_def_ok(verifier_t *v, const tsr_value_t *value);
const char *vf_decl_name(const verifier_t *v, uint32_t decl);
/* Checks operand `i` of `op`: present, of this kernel, visible. Returns
 * whether its type may be inspected. */
bool vf_check_use(verifier_t *v, const tsr_op_t *op, uint32_t i);
/* Checks a definition (`what` names it in messages): of this kernel, defined
 * once, well typed. Returns whether its type may be inspected. */
bool vf_check_def(verifier_t *v, tsr_loc_t loc, const char *what, const tsr_value_t *value);
/* Whether vf_check_def would accept `value` (without reporting anything): the
 * callers format their `what` only when it would not. */
bool vf_def_fine(verifier_t *v, const tsr_value_t *value);
void vf_set_vis(verifier_t *v, const tsr_value_t *value, vis_t vis);

/* ---- Checks the rules share (verify_diag.c) ---------------------------------------- */

/* result #i must have type `want`; `note` explains where `want` comes from. */
bool vf_expect_result(verifier_t *v, const tsr_op_t *op, uint32_t i, const tsr_type_t *want,
                      const char *note);
bool vf_expect_operand(verifier_t *v, const tsr_op_t *op, uint32_t i, const tsr_type_t *want,
                       const char *note);
/* operand #i must be a block (vector). */
bool vf_expect_block(verifier_t *v, const tsr_op_t *op, uint32_t i);
/* operand #i's element class is one the op-table flags accept. */
bool vf_expect_class(verifier_t *v, const tsr_op_t *op, uint32_t i, uint32_t flags);
/* The axis attribute (ints[0]) of a rank-`rank` operand is in range. */
bool vf_expect_axis(verifier_t *v, const tsr_op_t *op, uint32_t rank, int64_t *out_axis);

/* ---- Views (verify_view.c) ------------------------------------------------------ */

/* All indices of `op` as one view of `base` (load, store, slice): dynamic
 * starts are operands [first_dyn, end_dyn) (each used once, if
 * allow_dynamic); writes the view's type. Returns false after reporting. */
bool vf_check_indices(verifier_t *v, const tsr_op_t *op, const char *base_name,
                      const tsr_type_t *base, uint32_t first_dyn, uint32_t end_dyn,
                      bool allow_dynamic, tsr_type_t *out_view);
/* The type rules of load and store, of dma_start and dma_wait, and of the
 * semaphore ops. */
void vf_rule_memory(verifier_t *v, const tsr_op_t *op, bool is_load);
void vf_rule_dma(verifier_t *v, const tsr_op_t *op);
void vf_rule_semaphore(verifier_t *v, const tsr_op_t *op);

/* ---- Op rules (verify_rules.c) --------------------------------------------------- */

/* Runs the op's type rule (everything it reads has been checked). */
void vf_apply_rule(verifier_t *v, const tsr_op_t *op);

/* ---- Kernel header (verify_header.c) --------------------------------------------- */

void vf_verify_grid(verifier_t *v);
/* Operand `di`'s declaration: role, order, type, block, alias (aliased_by:
 * per decl, the output aliasing it so far, -1: none). Returns whether its
 * index map (if any) may be walked. */
bool vf_verify_decl(verifier_t *v, uint32_t di, int32_t *aliased_by);

#endif /* TESSERA_IR_VERIFY_INTERNAL_H */
