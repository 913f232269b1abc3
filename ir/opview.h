/* Typed views of the compound ops: how DMA, semaphore, load/store/slice,
 * loop, if and scoped ops lay out their operands, indices, ints, flags and
 * regions (docs/ir.md, "Operand layouts of compound ops"), decoded in one
 * place. Parser, printer, verifier and back ends read ops through these.
 *
 * Each decoder takes an op and fills a plain struct of positions, value
 * pointers and counts into the op (borrowed: they live as long as the
 * module). `tsr_opview_X(op, &out)` returns false, leaving *out untouched,
 * unless the op is an X op with a consistent layout; back ends call it on
 * verified ops, where it always succeeds. `tsr_opview_X_decode` is the
 * lenient form for the printer and the verifier: it fills *out as far as
 * the op allows (positions clamped to what is present, absent values NULL)
 * and says what is inconsistent. */
#ifndef TESSERA_IR_OPVIEW_H
#define TESSERA_IR_OPVIEW_H

#include "ir/ir.h"

/* What a lenient decoder found. */
typedef enum tsr_opview_status {
  TSR_OPVIEW_OK,
  TSR_OPVIEW_WRONG_OP,   /* not an op of this view; *out untouched */
  TSR_OPVIEW_FLAGS,      /* DMA, semaphore ops: a flag that adds operands
                            (SEND, DEVICE, CORE, DMA_ADD) the op does not take */
  TSR_OPVIEW_OPERANDS,   /* fewer operands than the op and its flags need */
  TSR_OPVIEW_NO_COUNTS,  /* DMA: ints is not the 3 index counts */
  TSR_OPVIEW_COUNTS,     /* DMA: the index counts do not match the indices */
} tsr_opview_status_t;

/* One operand in a role: its position and value. */
typedef struct tsr_opview_operand {
  int32_t slot;       /* position in op->operands; -1: the op has none */
  tsr_value_t *value; /* op->operands[slot]; NULL if absent or out of range */
} tsr_opview_operand_t;

/* A ref, semaphore or (slice) value and the indices written after it. An
 * index's `operand` is the position in op->operands of its dynamic start
 * (tsr_opview_index_start), else -1. */
typedef struct tsr_opview_ref {
  tsr_opview_operand_t base;
  const tsr_index_t *indices; /* op->indices + first */
  uint32_t first, count;      /* indices [first, first + count) of op */
} tsr_opview_ref_t;

/* The dynamic start of index `ix` of `op`, NULL for a static one. */
tsr_value_t *tsr_opview_index_start(const tsr_op_t *op, const tsr_index_t *ix);

/* The TSR_OPF_* flags `opcode` takes (others make it malformed). */
uint32_t tsr_opview_allowed_flags(tsr_opcode_t opcode);

/* load and store: operands [ref, value (store), dynamic starts..., mask?];
 * one index per ref dimension. */
typedef struct tsr_access_view {
  tsr_opview_ref_t ref;         /* operand 0, every index */
  tsr_opview_operand_t stored;  /* store: operand 1; load: slot -1 */
  tsr_opview_operand_t mask;    /* the last operand with TSR_OPF_MASK */
  uint32_t first_dyn, end_dyn;  /* dynamic starts: operands [first, end) */
} tsr_access_view_t;
bool tsr_opview_access(const tsr_op_t *op, tsr_access_view_t *out);
tsr_opview_status_t tsr_opview_access_decode(const tsr_op_t *op, tsr_access_view_t *out);

/* slice: operand [value], static indices only. */
typedef struct tsr_slice_view {
  tsr_opview_ref_t value;
} tsr_slice_view_t;
bool tsr_opview_slice(const tsr_op_t *op, tsr_slice_view_t *out);

/* dma_start and dma_wait: operands [src, dst, sem, send sem?, dynamic
 * starts (src, dst, sem, send order)..., device?]; indices src, dst, sem,
 * send in that order; ints = the index counts of src, dst and sem (the
 * rest are the send semaphore's); flags TSR_OPF_SEND, _DEVICE, _DMA_ADD. */
typedef struct tsr_dma_view {
  tsr_opview_ref_t src, dst, sem;
  tsr_opview_ref_t send;        /* base.slot -1 without a send semaphore */
  tsr_opview_operand_t device;  /* slot -1: this device */
  tsr_opview_operand_t core;    /* always slot -1 once verified (a DMA takes
                                   no core; the printer shows a stray one) */
  bool add;                     /* accumulate into dst (reads it too) */
  uint32_t first_dyn, end_dyn;  /* dynamic starts: operands [first, end) */
} tsr_dma_view_t;
bool tsr_opview_dma(const tsr_op_t *op, tsr_dma_view_t *out);
tsr_opview_status_t tsr_opview_dma_decode(const tsr_op_t *op, tsr_dma_view_t *out);

/* sem_signal, sem_wait, sem_read, core_barrier: operands [sem, amount
 * (sem_signal, sem_wait), dynamic starts..., device?, core?]; every index
 * is the semaphore's; flags TSR_OPF_DEVICE, _CORE (sem_signal only). */
typedef struct tsr_sem_view {
  tsr_opview_ref_t sem;
  tsr_opview_operand_t amount;  /* slot -1 for sem_read and core_barrier */
  tsr_opview_operand_t device, core; /* slot -1: this device / core */
  uint32_t first_dyn, end_dyn;
} tsr_sem_view_t;
bool tsr_opview_sem(const tsr_op_t *op, tsr_sem_view_t *out);
tsr_opview_status_t tsr_opview_sem_decode(const tsr_op_t *op, tsr_sem_view_t *out);

/* for: operands [lo, hi, step, inits...]; region 0 (the body) has args
 * [iv: i32, carried...] of the result types. */
typedef struct tsr_for_view {
  tsr_value_t *lo, *hi, *step;  /* NULL if absent */
  tsr_value_t *const *inits;    /* operands 3.. */
  uint32_t num_inits;
  tsr_region_t *body;           /* NULL if absent */
  tsr_value_t *iv;              /* body arg 0, NULL if absent */
  tsr_value_t *const *carried;  /* body args 1.. */
  uint32_t num_carried;
} tsr_for_view_t;
bool tsr_opview_for(const tsr_op_t *op, tsr_for_view_t *out);

/* while: operands [inits...]; region 0 (condition) and region 1 (body)
 * both take args of the result types. */
typedef struct tsr_while_view {
  tsr_value_t *const *inits;
  uint32_t num_inits;
  tsr_region_t *cond, *body;    /* NULL if absent */
} tsr_while_view_t;
bool tsr_opview_while(const tsr_op_t *op, tsr_while_view_t *out);

/* if: operand [cond]; regions then and else (always two; TSR_OPF_HAS_ELSE
 * when `else` was written), no args. */
typedef struct tsr_if_view {
  tsr_value_t *cond;
  tsr_region_t *then_region, *else_region; /* NULL if absent */
  bool has_else;
} tsr_if_view_t;
bool tsr_opview_if(const tsr_op_t *op, tsr_if_view_t *out);

/* scoped: no operands; region 0's args are the scoped buffers. */
typedef struct tsr_scoped_view {
  tsr_region_t *body;           /* NULL if absent */
  tsr_value_t *const *buffers;
  uint32_t num_buffers;
} tsr_scoped_view_t;
bool tsr_opview_scoped(const tsr_op_t *op, tsr_scoped_view_t *out);

/* ---- Building (the parser and the builder's one encoder) ------------------
 * The parts of a load, store, DMA or semaphore op as written;
 * tsr_opview_layout writes its operands in layout order (at most
 * TSR_OPVIEW_MAX_OPERANDS), rebasing each index's `operand` from a
 * position in `starts` to its position in the operands, and its ints and
 * flags. */
enum { TSR_OPVIEW_MAX_OPERANDS = 7 + 4 * TSR_MAX_RANK }; /* 4 refs, device, core, mask */

typedef struct tsr_opview_parts {
  tsr_value_t *ref[4];          /* DMA: src, dst, sem, send sem (or NULL);
                                   load/store: ref, stored value (or NULL);
                                   semaphore ops: sem, amount (or NULL) */
  uint32_t count[3];            /* DMA: the indices of src, dst and sem */
  uint32_t num_indices;
  tsr_index_t *indices;         /* all indices; `operand` indexes `starts` */
  tsr_value_t *const *starts;   /* the dynamic starts in index order */
  uint32_t num_starts;
  tsr_value_t *device, *core;   /* NULL when not written */
  tsr_value_t *mask;            /* load/store: NULL when not written */
  bool add;                     /* DMA `add` */
} tsr_opview_parts_t;
/* One rule for all of them: the present ref[] in order, then the dynamic
 * starts, then device, core and mask when present. Returns the operand
 * count; ORs TSR_OPF_SEND/DEVICE/CORE/MASK/DMA_ADD into *out_flags and,
 * for DMA, writes the 3 index counts to out_ints (*out_num_ints = 3, else
 * 0). For load, store and semaphore ops ref[] holds ref, stored value or
 * amount, and count[] is unused. */
uint32_t tsr_opview_layout(tsr_opcode_t opcode, tsr_opview_parts_t *parts,
                           tsr_value_t **out_operands, int64_t *out_ints,
                           uint32_t *out_num_ints, uint32_t *out_flags);

#endif /* TESSERA_IR_OPVIEW_H */
