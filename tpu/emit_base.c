/* What every file of the TPU emitter uses (the bottom of the layers of
 * tpu/emit_internal.h): the text and its names, the MLIR spelling of types,
 * failures, the lookups of the op table's TPU column (ir/ops_tpu.def), and
 * the walk over a region's ops, each dispatched through the family table
 * emit.c installs. */
#include <stdio.h>
#include <stdlib.h>

#include "tpu/emit_internal.h"

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

/* ---- Types --------------------------------------------------------------------- */

const char *tpu_elem(tsr_dtype_t dtype) {
  switch (dtype) {
  case TSR_DTYPE_F32: return "f32";
  case TSR_DTYPE_BF16: return "bf16";
  case TSR_DTYPE_F16: return "f16";
  case TSR_DTYPE_I32: case TSR_DTYPE_U32: return "i32";
  case TSR_DTYPE_I16: case TSR_DTYPE_U16: return "i16";
  case TSR_DTYPE_I8: case TSR_DTYPE_U8: return "i8";
  case TSR_DTYPE_I1: return "i1";
  /* Mosaic packs these in VMEM (8 i4 / 16 i2 per 32-bit word of a vreg) */
  case TSR_DTYPE_I4: case TSR_DTYPE_U4: return "i4";
  case TSR_DTYPE_I2: case TSR_DTYPE_U2: return "i2";
  case TSR_DTYPE_F8E4M3FN: return "f8E4M3FN";
  case TSR_DTYPE_F8E5M2: return "f8E5M2";
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

/* ---- The op table's TPU column ------------------------------------------------- */

const char *tpu_spelling(tsr_opcode_t opcode, tsr_dtype_t dtype) {
  int c = is_float(dtype) ? TSR_TPU_FLOAT
          : tsr_dtype_class(dtype) == TSR_CLASS_SINT ? TSR_TPU_SINT : TSR_TPU_UINT;
  return tsr_op_tpu_table[opcode].spelling[c];
}

void tpu_op_refused(tpu_emitter_t *em, const tsr_op_t *op) {
  tpu_unimplemented(em, op, "%s", tsr_op_tpu_table[op->opcode].refusal);
}

/* ---- The walk ------------------------------------------------------------------ */

/* One op: its location comment, then its emission through the dispatch
 * table (emit.c), unless ir/ops_tpu.def refuses it. */
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
  if (tsr_op_tpu_table[op->opcode].refusal) {
    tpu_op_refused(em, op);
    return;
  }
  em->families[info->family](em, op);
}

void tpu_emit_region(tpu_emitter_t *em, const tsr_region_t *region) {
  for (const tsr_op_t *op = region->first; op && TPU_OK(em); op = op->next) emit_op(em, op);
}

const tsr_op_t *tpu_terminator(const tsr_region_t *region) {
  const tsr_op_t *last = region->last;
  return last && (tsr_op_table[last->opcode].flags & TSR_F_TERMINATOR) ? last : NULL;
}
