/* The Mosaic TPU emitter (docs/tpu.md): what tpu/'s files share.
 * Library-internal. Text only: tpu/ links no MLIR, so libtessera and the
 * interpreter gain no dependency.
 *
 * Layering: api.c (tsr_tpu_emit: verify, check, cache) calls check.c (the
 * layout rules Pallas checks at lowering, the chip table) and emit.c (the
 * module: signature, attributes, transform functions, dispatch), which
 * calls emit_ops.c (one function per op family). */
#ifndef TESSERA_TPU_TPU_INTERNAL_H
#define TESSERA_TPU_TPU_INTERNAL_H

#include "base/base_internal.h"
#include "ir/ir.h"

/* Bumped whenever the emitted text changes for the same kernel: part of
 * the cache key (tpu/api.c). */
#define TSR_TPU_EMITTER_VERSION 5

/* ---- Chips ---- */

/* The chips are base/chips.c's (tsr_chip_t); the emitter takes those
 * marked `mosaic`. */
typedef tsr_chip_t tpu_chip_t;

/* VMEM libtpu keeps for itself on every chip measured: "Used 128.00M of
 * 127.94M vmem" (v6e), "64.00M of 63.94M" (v7x). */
#define TPU_VMEM_RESERVED (64ll << 10)

/* Pallas's TPU lowering rules for `kernel`'s block specs (docs/tpu.md,
 * "Layout rules"): every broken rule is one located diagnostic; NULL or
 * TSR_VERIFY_ERROR. The kernel must have verified. */
tsr_status_t tpu_check_kernel(const tsr_kernel_t *kernel, const tpu_chip_t *chip)
    TSR_MUST_USE;
/* The VMEM the kernel keeps live on a TPU, as Mosaic lays it out: each
 * windowed operand double-buffered, scratch, scoped buffers and the
 * buffers that carry the block results of ifs (emit_ops.c), every
 * buffer padded to whole (8 x packing, 128) tiles; an upper bound (scoped
 * buffers all counted live at once). */
int64_t tpu_vmem_need(const tsr_kernel_t *kernel);
/* Whether operand `decl` has a trivial window: block = array and an index
 * map yielding constant zeros (or none). */
bool tpu_decl_trivial_window(const tsr_decl_t *decl);

/* ---- The emitter (emit.c, emit_ops.c) ---- */

/* Emits the Mosaic module of a verified, checked kernel; *out_text freed
 * with tsr_free. TSR_UNIMPLEMENTED (located, naming the op) for what has
 * no TPU form yet. */
tsr_status_t tpu_emit_kernel(const tsr_kernel_t *kernel, const tpu_chip_t *chip,
                             char **out_text) TSR_MUST_USE;

typedef struct tpu_emitter {
  const tsr_kernel_t *kernel;
  const tpu_chip_t *chip;
  tsr_strbuf_t *out;
  int indent;
  char **names;          /* per value id: its SSA name ("%x"), owned */
  uint32_t num_names;
  uint32_t next_tmp;     /* temporaries are %$N: '$' is no tessera name */
  char ring[16][32];     /* short names handed out by tmp() */
  uint32_t ring_next;
  bool in_transform;     /* emitting an index map: yield is func.return */
  struct tpu_if_frame *ifs; /* the ifs being emitted whose blocks go through VMEM */
  tsr_status_t error;    /* first failure; emission stops */
} tpu_emitter_t;

#define TPU_OK(em) ((em)->error == NULL)

/* Text. */
void tpu_line(tpu_emitter_t *em, const char *fmt, ...) TSR_PRINTF(2, 3);
/* A fresh temporary name (valid for the next 16 calls). */
const char *tpu_tmp(tpu_emitter_t *em);
/* The name of a value; "%?" (and an internal error) if it has none. */
const char *tpu_name(tpu_emitter_t *em, const tsr_value_t *v);
/* Gives a value its name (copied). */
void tpu_set_name(tpu_emitter_t *em, const tsr_value_t *v, const char *name);
/* The MLIR spelling of an element type ("f32", "i32"; unsigned are
 * signless), of a value's type (scalar or vector<..>), of a ref or
 * semaphore memref. buf of at least TPU_TYPE_MAX bytes. */
enum { TPU_TYPE_MAX = 256 };
const char *tpu_elem(tsr_dtype_t dtype);
const char *tpu_type(char *buf, const tsr_type_t *t);
/* vector<DIMSxE> of `rank` dims (rank 0: the scalar element). */
const char *tpu_vector(char *buf, tsr_dtype_t dtype, uint32_t rank, const int64_t *dims);
const char *tpu_memref(char *buf, const tsr_type_t *ref_or_sem, uint32_t rank,
                       const int64_t *dims);

/* Failures. */
void tpu_fail(tpu_emitter_t *em, tsr_status_t status);
/* TSR_UNIMPLEMENTED at the op: "op 'X' cannot be emitted for TPU: WHY". */
void tpu_unimplemented(tpu_emitter_t *em, const tsr_op_t *op, const char *fmt, ...)
    TSR_PRINTF(3, 4);

/* Emits the ops of a region (not its terminator: the parent reads it). */
void tpu_emit_region(tpu_emitter_t *em, const tsr_region_t *region);
/* The region's terminator (yield/condition), NULL if it has none. */
const tsr_op_t *tpu_terminator(const tsr_region_t *region);

/* One entry per op family (emit_ops.c), dispatched by emit.c. */
typedef void tpu_op_fn(tpu_emitter_t *em, const tsr_op_t *op);
tpu_op_fn tpu_op_const, tpu_op_program_id, tpu_op_num_programs, tpu_op_device_id,
    tpu_op_core_id, tpu_op_load, tpu_op_store, tpu_op_elementwise, tpu_op_iota,
    tpu_op_broadcast, tpu_op_reshape, tpu_op_transpose, tpu_op_slice, tpu_op_concatenate,
    tpu_op_roll, tpu_op_gather, tpu_op_reduce, tpu_op_argreduce, tpu_op_dot, tpu_op_for,
    tpu_op_while, tpu_op_if, tpu_op_scoped, tpu_op_terminator, tpu_op_print, tpu_op_assert,
    tpu_op_dma, tpu_op_sem_signal, tpu_op_sem_wait, tpu_op_sem_read, tpu_op_core_barrier,
    tpu_op_sort, tpu_op_multiple_of;

#endif /* TESSERA_TPU_TPU_INTERNAL_H */
