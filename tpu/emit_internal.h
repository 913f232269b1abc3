/* The Mosaic TPU emitter's files and what they share (docs/tpu.md).
 * Library-internal.
 *
 * Layering, top to bottom; a file calls only the files below it:
 *
 *   emit.c              the module (signature, attributes, transform
 *                       functions) and the dispatch tables (ir/dispatch.h)
 *   emit_elementwise.c  constants, queries, multiple_of, the elementwise
 *                       families (unary, binary, compare, select, convert)
 *   emit_memory.c       load, store, DMAs, semaphores
 *   emit_shape.c        shape ops, reductions, dot
 *   emit_control.c      for, while, if, scoped, terminators, print, assert
 *   emit_values.c       what several op files write: constants, i1 blocks
 *                       as i32, selects, compares, conversions, reshapes,
 *                       the core index
 *   emit_base.c         text, names, types, failures, and the walk over a
 *                       region's ops, the op table's TPU column
 *
 * The four op files do not call each other. The walk (tpu_emit_region,
 * which control flow uses for its bodies) reaches the op files only through
 * the dispatch table that emit.c installs in the emitter (families): the
 * one way down that goes back up. */
#ifndef TESSERA_TPU_EMIT_INTERNAL_H
#define TESSERA_TPU_EMIT_INTERNAL_H

#include "tpu/tpu_internal.h"

typedef struct tpu_emitter tpu_emitter_t;

/* What the dispatch tables hold: one op's emission. */
typedef void tpu_op_fn(tpu_emitter_t *em, const tsr_op_t *op);

struct tpu_emitter {
  const tsr_kernel_t *kernel;
  const tpu_chip_t *chip;
  tpu_op_fn *const *families; /* emit.c's family_table, by TSR_FAM_* */
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
};

#define TPU_OK(em) ((em)->error == NULL)

/* A string buffer's text, "" if it failed (the failure is reported after). */
#define SB(sb) ((sb).data ? (sb).data : "")

static inline bool is_float(tsr_dtype_t d) { return tsr_dtype_class(d) == TSR_CLASS_FLOAT; }
static inline bool is_uint(tsr_dtype_t d) { return tsr_dtype_class(d) == TSR_CLASS_UINT; }
static inline bool is_bool(tsr_dtype_t d) { return d == TSR_DTYPE_I1; }
/* The width of a value (i4 is 4 bits, although tessera's host arrays hold
 * one per byte): Mosaic's vectors and memrefs are packed. */
static inline uint32_t bits_of(tsr_dtype_t d) { return tsr_dtype_bits(d); }

/* `shape` with another dtype. */
static inline tsr_type_t with_dtype(const tsr_type_t *shape, tsr_dtype_t dtype) {
  tsr_type_t t = *shape;
  t.dtype = dtype;
  return t;
}

/* ---- emit_base.c ---- */

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

/* The MLIR spelling of `opcode` for operands of `dtype` from its row of
 * ir/ops_tpu.def (tsr_op_tpu_table); NULL where that class has none. */
const char *tpu_spelling(tsr_opcode_t opcode, tsr_dtype_t dtype);
/* The located error of an op that ir/ops_tpu.def refuses, with its reason:
 * reported by the walk before any dispatch, so also the per-op entry of
 * such ops (never reached). */
tpu_op_fn tpu_op_refused;

/* Emits the ops of a region (not its terminator: the parent reads it),
 * each through em->families. */
void tpu_emit_region(tpu_emitter_t *em, const tsr_region_t *region);
/* The region's terminator (yield/condition), NULL if it has none. */
const tsr_op_t *tpu_terminator(const tsr_region_t *region);

/* ---- emit_values.c ---- */

/* Names result `i` of `op` "%<tessera name>" and returns it. */
const char *tpu_result_name(tpu_emitter_t *em, const tsr_op_t *op, uint32_t i);
/* The literal of `dtype` holding `value` (integers) or `fvalue` (floats,
 * as their exact bit pattern in hex). */
void tpu_literal(char *buf, size_t n, tsr_dtype_t dtype, double fvalue, int64_t value);
/* `%t = arith.constant LIT : T` of `type`'s dtype and shape; returns %t. */
const char *tpu_constant(tpu_emitter_t *em, const tsr_type_t *type, double f, int64_t i);
/* An i1 block's bits as i32 (returned), and back: r = (v != 0). */
const char *tpu_bits_i32(tpu_emitter_t *em, const char *v, const tsr_type_t *t);
void tpu_bits_i1(tpu_emitter_t *em, const char *r, const char *v, const tsr_type_t *t);
/* A constant `index` or `i32`. */
const char *tpu_index_const(tpu_emitter_t *em, int64_t v);
const char *tpu_i32_const(tpu_emitter_t *em, int64_t v);
/* Grid dim g's extent as an i32: a constant, or Mosaic's
 * tpu.iteration_bound for a dynamic extent. */
const char *tpu_grid_extent(tpu_emitter_t *em, uint32_t g);
/* r = c ? a : b, of type t; c an i1 scalar, or of t's shape (vector_cond). */
void tpu_select(tpu_emitter_t *em, const char *r, const char *c, bool vector_cond,
                const char *a, const char *b, const tsr_type_t *t);
/* The shape of the block a value has, rank 0 for a scalar. */
uint32_t tpu_value_dims(const tsr_type_t *t, int64_t *dims);
/* `name` (a vector or scalar of `from`'s shape) reshaped to `to`. */
const char *tpu_reshape_to(tpu_emitter_t *em, const char *name, tsr_dtype_t dtype,
                           uint32_t from_rank, const int64_t *from, uint32_t to_rank,
                           const int64_t *to);
/* The shape an op without a 1-D form in Mosaic takes: (1, n) for a 1-D
 * type (returns 2), else the type's shape. */
uint32_t tpu_at_least_2d(const tsr_type_t *t, int64_t *dims);
/* r = (a OPC b) for the comparison opcode `opc` on operands of type t;
 * false (nothing written) when ir/ops_tpu.def gives no predicate for the
 * operands' class and none is composed here. */
bool tpu_compare(tpu_emitter_t *em, const char *r, tsr_opcode_t opc, const char *a,
                 const char *b, const tsr_type_t *operand_type) TSR_MUST_USE;
/* r = convert(a) from `from` to `to` (tessera's `convert`); names op's
 * result after `a` when the bits do not change. */
void tpu_convert(tpu_emitter_t *em, const tsr_op_t *op, const char *r, const char *a,
                 const tsr_type_t *from, const tsr_type_t *to);
/* This core's index within its device, as an i32 value. */
const char *tpu_core_index(tpu_emitter_t *em);

/* ---- The op files: one entry per op or family, called by emit.c's tables ---- */

tpu_op_fn tpu_op_const, tpu_op_program_id, tpu_op_num_programs, tpu_op_device_id,
    tpu_op_core_id, tpu_op_multiple_of, tpu_op_elementwise; /* emit_elementwise.c */
tpu_op_fn tpu_op_load, tpu_op_store, tpu_op_dma, tpu_op_sem_signal, tpu_op_sem_wait,
    tpu_op_sem_read, tpu_op_core_barrier; /* emit_memory.c */
tpu_op_fn tpu_op_iota, tpu_op_broadcast, tpu_op_reshape, tpu_op_transpose, tpu_op_slice,
    tpu_op_concatenate, tpu_op_roll, tpu_op_gather, tpu_op_reduce,
    tpu_op_argreduce, tpu_op_dot; /* emit_shape.c */
tpu_op_fn tpu_op_for, tpu_op_while, tpu_op_if, tpu_op_scoped, tpu_op_terminator,
    tpu_op_print, tpu_op_assert; /* emit_control.c */

#endif /* TESSERA_TPU_EMIT_INTERNAL_H */
