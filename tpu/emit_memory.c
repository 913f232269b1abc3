/* Memory for the TPU (tpu/emit_internal.h): load and store (vector.load /
 * tpu.vector_store for VMEM, memref.load/store for SMEM scalars), DMAs
 * (tpu.enqueue_dma / tpu.wait_dma over tpu.memref_slice views) and
 * semaphores (tpu.sem_*, the core barrier). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/opview.h"
#include "tpu/emit_internal.h"

/* ---- Memory -------------------------------------------------------------------- */

/* The shape of a view with its point indices kept as 1 (view_dims) and
 * dropped (out_dims); false if a strided index makes it a strided access. */
static bool view_shape(const tsr_index_t *ix, uint32_t n, const tsr_type_t *ref,
                       int64_t *view_dims, int64_t *kept, uint32_t *num_kept) {
  uint32_t k = 0;
  for (uint32_t i = 0; i < n; i++) {
    int64_t size;
    switch (ix[i].kind) {
    case TSR_INDEX_FULL: size = ref->dims[i]; break;
    case TSR_INDEX_POINT: size = 1; break;
    default:
      if (ix[i].stride != 1) return false;
      size = ix[i].size;
    }
    view_dims[i] = size;
    if (ix[i].kind != TSR_INDEX_POINT) kept[k++] = size;
  }
  *num_kept = k;
  return true;
}

/* The start of each index as an `index` (vector.load, memref.load) or i32
 * (tpu.memref_slice) value, comma-separated into buf. */
static void starts_text(tpu_emitter_t *em, const tsr_op_t *op, const tsr_index_t *ix, uint32_t n,
                        bool as_i32, char *buf, size_t size) {
  size_t at = 0;
  buf[0] = 0;
  for (uint32_t i = 0; i < n; i++) {
    const char *s;
    tsr_value_t *dyn = tsr_opview_index_start(op, &ix[i]);
    if (dyn) {
      s = tpu_name(em, dyn);
      if (!as_i32) {
        const char *t = tpu_tmp(em);
        tpu_line(em, "%s = arith.index_cast %s : i32 to index", t, s);
        s = t;
      }
    } else {
      s = as_i32 ? tpu_i32_const(em, ix[i].start) : tpu_index_const(em, ix[i].start);
    }
    if (at < size) at += (size_t)snprintf(buf + at, size - at, "%s%s", i ? ", " : "", s);
  }
  if (at >= size) tpu_fail(em, TSR_STATUS(TSR_INTERNAL, "tpu emitter: index list too long"));
}

/* The element type of memory of `dtype`: i1 is stored as i32. */
static tsr_dtype_t memory_dtype(tsr_dtype_t dtype) {
  return dtype == TSR_DTYPE_I1 ? TSR_DTYPE_I32 : dtype;
}

/* "{strides = array<i32: s0, s1>}" of a view, and whether any is not 1. */
static bool view_strides(const tsr_index_t *ix, uint32_t n, char *buf, size_t size) {
  size_t at = (size_t)snprintf(buf, size, "{strides = array<i32");
  bool strided = false;
  for (uint32_t i = 0; i < n && at < size; i++) {
    int64_t st = ix[i].kind == TSR_INDEX_SLICE || ix[i].kind == TSR_INDEX_DS ? ix[i].stride : 1;
    strided |= st != 1;
    at += (size_t)snprintf(buf + at, size - at, "%s %lld", i ? "," : ":", (long long)st);
  }
  if (at < size) snprintf(buf + at, size - at, ">}");
  return strided;
}

void tpu_op_load(tpu_emitter_t *em, const tsr_op_t *op) {
  tsr_access_view_t v;
  if (!tsr_opview_access(op, &v)) {
    tpu_unimplemented(em, op, "malformed load");
    return;
  }
  const tsr_type_t *ref = &v.ref.base.value->type;
  const tsr_type_t *rt = &op->results[0]->type;
  char idx[1024], a[TPU_TYPE_MAX], b[TPU_TYPE_MAX], strides[256];
  if (ref->space == TSR_SPACE_SMEM) {
    /* SMEM holds scalars: memref.load (the verifier allows nothing else).
     * An i1 is an i32 word there, as Pallas keeps bools: compared with 0. */
    starts_text(em, op, v.ref.indices, v.ref.count, false, idx, sizeof idx);
    if (ref->dtype == TSR_DTYPE_I1) {
      const char *w = tpu_tmp(em), *zero = tpu_tmp(em);
      tpu_line(em, "%s = memref.load %s[%s] : %s", w, tpu_name(em, v.ref.base.value), idx,
               tpu_type(a, ref));
      tpu_line(em, "%s = arith.constant 0 : i32", zero);
      tpu_line(em, "%s = arith.cmpi ne, %s, %s : i32", tpu_result_name(em, op, 0), w, zero);
      return;
    }
    tpu_line(em, "%s = memref.load %s[%s] : %s", tpu_result_name(em, op, 0),
             tpu_name(em, v.ref.base.value), idx, tpu_type(a, ref));
    return;
  }
  if (ref->rank == 0) {
    tpu_unimplemented(em, op, "a rank-0 VMEM ref has no vector load");
    return;
  }
  if (ref->dtype == TSR_DTYPE_F16) {
    tpu_unimplemented(em, op, "TPUs have no f16 vector loads (libtpu: \"Invalid vector type "
                              "for load\"); keep f16 data in HBM or use bf16/f32");
    return;
  }
  /* A mask only says which elements need not be read: masked-off ones are
   * uninitialized (docs/ir.md), and reading them from VMEM is harmless, so
   * a masked load is a plain load. */
  int64_t view[TSR_MAX_RANK], rd[TSR_MAX_RANK];
  for (uint32_t i = 0; i < v.ref.count; i++) {
    const tsr_index_t *ix = &v.ref.indices[i];
    view[i] = tsr_index_extent(ix, ref->dims[i]);
  }
  bool strided = view_strides(v.ref.indices, v.ref.count, strides, sizeof strides);
  starts_text(em, op, v.ref.indices, v.ref.count, false, idx, sizeof idx);
  uint32_t rr = tpu_value_dims(rt, rd);
  tsr_dtype_t md = memory_dtype(ref->dtype);
  /* Points load a block with 1s there, then drop them (vector.shape_cast);
   * i1 memory is i32, compared with 0. */
  bool direct = md == rt->dtype && rr == ref->rank && !memcmp(rd, view, sizeof(int64_t) * rr);
  const char *vec = direct ? tpu_result_name(em, op, 0) : tpu_tmp(em);
  if (strided)
    tpu_line(em, "%s = tpu.strided_load %s[%s] %s : %s, %s", vec, tpu_name(em, v.ref.base.value),
             idx, strides, tpu_type(a, ref), tpu_vector(b, md, ref->rank, view));
  else
    tpu_line(em, "%s = vector.load %s[%s] : %s, %s", vec, tpu_name(em, v.ref.base.value), idx,
             tpu_type(a, ref), tpu_vector(b, md, ref->rank, view));
  if (direct) return;
  const char *r = tpu_reshape_to(em, vec, md, ref->rank, view, rr, rd);
  if (md != rt->dtype) {
    tsr_type_t it = with_dtype(rt, md);
    const char *z = tpu_constant(em, &it, 0.0, 0);
    tpu_line(em, "%s = arith.cmpi ne, %s, %s : %s", tpu_result_name(em, op, 0), r, z,
             tpu_type(a, &it));
    return;
  }
  tpu_set_name(em, op->results[0], r);
}

void tpu_op_store(tpu_emitter_t *em, const tsr_op_t *op) {
  tsr_access_view_t v;
  if (!tsr_opview_access(op, &v)) {
    tpu_unimplemented(em, op, "malformed store");
    return;
  }
  const tsr_type_t *ref = &v.ref.base.value->type;
  const tsr_value_t *val = v.stored.value;
  char idx[1024], a[TPU_TYPE_MAX], b[TPU_TYPE_MAX], c[TPU_TYPE_MAX], strides[256];
  if (ref->space == TSR_SPACE_SMEM) {
    starts_text(em, op, v.ref.indices, v.ref.count, false, idx, sizeof idx);
    const char *stored = tpu_name(em, val);
    if (ref->dtype == TSR_DTYPE_I1) { /* an i32 word in SMEM, as Pallas keeps bools */
      const char *w = tpu_tmp(em);
      tpu_line(em, "%s = arith.extui %s : i1 to i32", w, stored);
      stored = w;
    }
    tpu_line(em, "memref.store %s, %s[%s] : %s", stored,
             tpu_name(em, v.ref.base.value), idx, tpu_type(a, ref));
    return;
  }
  if (ref->rank == 0) {
    tpu_unimplemented(em, op, "a rank-0 VMEM ref has no vector store");
    return;
  }
  if (ref->dtype == TSR_DTYPE_F16) {
    tpu_unimplemented(em, op, "TPUs have no f16 vector stores; keep f16 data in HBM or use "
                              "bf16/f32");
    return;
  }
  int64_t view[TSR_MAX_RANK];
  for (uint32_t i = 0; i < v.ref.count; i++) {
    const tsr_index_t *ix = &v.ref.indices[i];
    view[i] = tsr_index_extent(ix, ref->dims[i]);
  }
  bool strided = view_strides(v.ref.indices, v.ref.count, strides, sizeof strides);
  if (strided && v.mask.slot >= 0) {
    tpu_unimplemented(em, op, "masked strided stores have no Mosaic form");
    return;
  }
  starts_text(em, op, v.ref.indices, v.ref.count, false, idx, sizeof idx);
  int64_t vd[TSR_MAX_RANK];
  uint32_t vr = tpu_value_dims(&val->type, vd);
  const char *s = tpu_reshape_to(em, tpu_name(em, val), ref->dtype, vr, vd, ref->rank, view);
  tsr_dtype_t md = memory_dtype(ref->dtype);
  if (md != ref->dtype) { /* i1 stored as i32 */
    tsr_type_t from = with_dtype(&val->type, TSR_DTYPE_I1), to;
    from.kind = TSR_TYPE_VECTOR;
    from.rank = ref->rank;
    memcpy(from.dims, view, sizeof(int64_t) * ref->rank);
    to = with_dtype(&from, md);
    const char *e = tpu_tmp(em);
    tpu_line(em, "%s = arith.extui %s : %s to %s", e, s, tpu_type(a, &from), tpu_type(b, &to));
    s = e;
  }
  tpu_vector(b, md, ref->rank, view);
  if (strided) {
    tpu_line(em, "tpu.strided_store %s[%s], %s %s : %s, %s", tpu_name(em, v.ref.base.value), idx,
             s, strides, tpu_type(a, ref), b);
    return;
  }
  if (v.mask.slot >= 0) {
    const tsr_value_t *mv = v.mask.value;
    int64_t md_dims[TSR_MAX_RANK];
    uint32_t mr = tpu_value_dims(&mv->type, md_dims);
    const char *m =
        tpu_reshape_to(em, tpu_name(em, mv), TSR_DTYPE_I1, mr, md_dims, ref->rank, view);
    if (bits_of(md) != 32) {
      /* Mosaic masks 32-bit stores only ("Not implemented: masked store
       * with non-32-bit element type"): read the view, select the stored
       * elements in, write it whole. The same bytes end up in VMEM; only a
       * DMA writing the masked-off elements meanwhile would tell, and that
       * races with the store in tessera's model too. */
      char mn[512], old[32], sel[32];
      snprintf(mn, sizeof mn, "%s", m);
      snprintf(old, sizeof old, "%s", tpu_tmp(em));
      tpu_line(em, "%s = vector.load %s[%s] : %s, %s", old, tpu_name(em, v.ref.base.value), idx,
               tpu_type(a, ref), b);
      snprintf(sel, sizeof sel, "%s", tpu_tmp(em));
      tsr_type_t vt = {.kind = TSR_TYPE_VECTOR, .dtype = md, .rank = ref->rank};
      memcpy(vt.dims, view, sizeof(int64_t) * ref->rank);
      tpu_select(em, sel, mn, true, s, old, &vt);
      tpu_line(em, "tpu.vector_store %s[%s], %s {strides = array<i32>} : %s, %s,",
               tpu_name(em, v.ref.base.value), idx, sel, tpu_type(a, ref), b);
      return;
    }
    tpu_line(em, "tpu.vector_store %s[%s], %s masked %s {strides = array<i32>} : %s, %s, %s",
             tpu_name(em, v.ref.base.value), idx, s, m, tpu_type(a, ref), b,
             tpu_vector(c, TSR_DTYPE_I1, ref->rank, view));
    return;
  }
  tpu_line(em, "tpu.vector_store %s[%s], %s {strides = array<i32>} : %s, %s,",
           tpu_name(em, v.ref.base.value), idx, s, tpu_type(a, ref), b);
}

/* ---- DMAs and semaphores ------------------------------------------------------- */

/* A memref for a view of a ref or semaphore: the ref itself when every
 * index is ':', else tpu.memref_slice (i32 starts) then tpu.memref_squeeze
 * for the point indices. Writes its type to ty; returns its name or NULL
 * (unimplemented: strided). */
static const char *view_memref(tpu_emitter_t *em, const tsr_op_t *op, const tsr_opview_ref_t *r,
                               char *ty) {
  const tsr_type_t *t = &r->base.value->type;
  const char *name = tpu_name(em, r->base.value);
  bool full = true;
  for (uint32_t i = 0; i < r->count; i++) full &= r->indices[i].kind == TSR_INDEX_FULL;
  if (full) {
    tpu_type(ty, t);
    return name;
  }
  int64_t view[TSR_MAX_RANK], kept[TSR_MAX_RANK];
  uint32_t nk;
  if (!view_shape(r->indices, r->count, t, view, kept, &nk)) {
    tpu_unimplemented(em, op, "strided DMA views are not emitted yet");
    return NULL;
  }
  char idx[1024], from[TPU_TYPE_MAX];
  starts_text(em, op, r->indices, r->count, true, idx, sizeof idx);
  const char *s = tpu_tmp(em);
  tpu_memref(ty, t, t->rank, view);
  tpu_line(em, "%s = tpu.memref_slice %s[%s] : %s -> %s", s, name, idx, tpu_type(from, t), ty);
  if (nk == t->rank) return s;
  const char *q = tpu_tmp(em);
  char sq[TPU_TYPE_MAX];
  tpu_memref(sq, t, nk, kept);
  tpu_line(em, "%s = tpu.memref_squeeze %s : %s -> %s", q, s, ty, sq);
  memcpy(ty, sq, TPU_TYPE_MAX);
  return q;
}

typedef struct send_search {
  const tsr_value_t *sem;
  bool found;
} send_search_t;

static void find_send(void *ctx, const tsr_op_t *op, uint32_t position) {
  send_search_t *s = ctx;
  tsr_dma_view_t v;
  if (op->opcode == TSR_OP_DMA_START && tsr_opview_dma(op, &v) && v.send.base.slot >= 0 &&
      v.send.base.value == s->sem)
    s->found = true;
}

/* Whether `sem` is the `send` semaphore of some dma_start of the kernel. */
static bool is_send_semaphore(const tsr_kernel_t *kernel, const tsr_value_t *sem) {
  send_search_t s = {sem, false};
  tsr_ir_walk_ops(kernel, find_send, &s);
  return s.found;
}

void tpu_op_dma(tpu_emitter_t *em, const tsr_op_t *op) {
  tsr_dma_view_t v;
  if (!tsr_opview_dma(op, &v)) {
    tpu_unimplemented(em, op, "malformed DMA");
    return;
  }
  if (v.add) {
    tpu_unimplemented(em, op, "DMA 'add' has no Mosaic form");
    return;
  }
  /* tpu.memref_slice takes static sizes, and Pallas does not lower a
   * pl.ds of traced size in a DMA either (its own test is skipped, "doesn't
   * work yet"). */
  for (uint32_t i = 0; i < op->num_indices; i++) {
    if (op->indices[i].kind == TSR_INDEX_DSIZE) {
      tpu_unimplemented(em, op,
                        "a DMA view of dynamic size (ds(.., %%n)) has no Mosaic form: "
                        "tpu.memref_slice takes static sizes");
      return;
    }
  }
  /* A DMA signalling a regular semaphore: libtpu compiles it for v5p, v6e
   * and v7x and refuses it for v4 and v5e ("Regular semaphores in
   * EnqueueDMA are not supported on this target"; Pallas's own test of it
   * asks for v6+). The chip's generation is its name's number. */
  if (op->opcode == TSR_OP_DMA_START && v.sem.base.value->type.dtype == TSR_SEM_REGULAR &&
      atoi(em->chip->name + 1) < 6 && strcmp(em->chip->name, "v5p") != 0) {
    tpu_unimplemented(em, op,
                      "a DMA signalling a regular semaphore is not supported on %s (libtpu: "
                      "\"Regular semaphores in EnqueueDMA are not supported on this target\"; "
                      "v5p and v6 on have them)",
                      em->chip->name);
    return;
  }
  char st[TPU_TYPE_MAX], dt[TPU_TYPE_MAX], mt[TPU_TYPE_MAX], ssty[TPU_TYPE_MAX];
  const char *src = view_memref(em, op, &v.src, st);
  const char *dst = src ? view_memref(em, op, &v.dst, dt) : NULL;
  const char *sem = dst ? view_memref(em, op, &v.sem, mt) : NULL;
  if (!sem) return;
  if (op->opcode == TSR_OP_DMA_WAIT) {
    /* As the captured Pallas modules: a wait on the semaphore some
     * dma_start signals when its source has been read (`send`) is the
     * sender's wait (wait_target = false, the semaphore as the source's);
     * any other wait is for the destination's bytes. */
    if (is_send_semaphore(em->kernel, v.sem.base.value))
      tpu_line(em,
               "tpu.wait_dma source(%s : %s) target(%s : %s) source_semaphore(%s : %s) "
               "{wait_target = false}",
               src, st, dst, dt, sem, mt);
    else
      tpu_line(em,
               "tpu.wait_dma source(%s : %s) target(%s : %s) target_semaphore(%s : %s) "
               "{wait_target = true}",
               src, st, dst, dt, sem, mt);
    return;
  }
  char sendpart[640] = "", devpart[128] = "";
  if (v.send.base.slot >= 0) {
    const char *ss = view_memref(em, op, &v.send, ssty);
    if (!ss) return;
    snprintf(sendpart, sizeof sendpart, " source_semaphore(%s : %s)", ss, ssty);
  }
  if (v.device.slot >= 0)
    snprintf(devpart, sizeof devpart, " device_id(%s)", tpu_name(em, v.device.value));
  tpu_line(em, "tpu.enqueue_dma source(%s : %s) target(%s : %s)%s target_semaphore(%s : %s)%s", src,
           st, dst, dt, sendpart, sem, mt, devpart);
}

static const char *sem_of(tpu_emitter_t *em, const tsr_op_t *op, tsr_sem_view_t *v, char *ty) {
  if (!tsr_opview_sem(op, v)) {
    tpu_unimplemented(em, op, "malformed semaphore op");
    return NULL;
  }
  return view_memref(em, op, &v->sem, ty);
}

void tpu_op_sem_signal(tpu_emitter_t *em, const tsr_op_t *op) {
  tsr_sem_view_t v;
  char ty[TPU_TYPE_MAX], extra[256] = "";
  const char *s = sem_of(em, op, &v, ty);
  if (!s) return;
  size_t at = 0;
  if (v.device.slot >= 0)
    at += (size_t)snprintf(extra + at, sizeof extra - at, " device_id %s",
                           tpu_name(em, v.device.value));
  if (v.core.slot >= 0)
    snprintf(extra + at, sizeof extra - at, " core_id %s", tpu_name(em, v.core.value));
  tpu_line(em, "tpu.sem_signal %s, %s%s : %s", s, tpu_name(em, v.amount.value), extra, ty);
}

void tpu_op_sem_wait(tpu_emitter_t *em, const tsr_op_t *op) {
  tsr_sem_view_t v;
  char ty[TPU_TYPE_MAX];
  const char *s = sem_of(em, op, &v, ty);
  if (!s) return;
  tpu_line(em, "tpu.sem_wait %s, %s : %s", s, tpu_name(em, v.amount.value), ty);
}

void tpu_op_sem_read(tpu_emitter_t *em, const tsr_op_t *op) {
  tsr_sem_view_t v;
  char ty[TPU_TYPE_MAX];
  const char *s = sem_of(em, op, &v, ty);
  if (!s) return;
  tpu_line(em, "%s = tpu.sem_read %s : %s -> i32", tpu_result_name(em, op, 0), s, ty);
}

void tpu_op_core_barrier(tpu_emitter_t *em, const tsr_op_t *op) {
  tsr_sem_view_t v;
  char ty[TPU_TYPE_MAX];
  const char *s = sem_of(em, op, &v, ty);
  if (!s) return;
  uint32_t cores = em->chip->cores;
  if (cores <= 1) {
    tpu_line(em, "// core_barrier: one TensorCore on %s, nothing to wait for", em->chip->name);
    return;
  }
  /* Every core signals each other core's semaphore once, then waits for
   * cores - 1 signals: what pltpu's core barrier does with a regular
   * semaphore. */
  const char *one = tpu_i32_const(em, 1);
  char me[32];
  snprintf(me, sizeof me, "%s", tpu_core_index(em));
  for (uint32_t c = 0; c < cores; c++) {
    const char *cid = tpu_i32_const(em, c);
    const char *ne = tpu_tmp(em);
    tpu_line(em, "%s = arith.cmpi ne, %s, %s : i32", ne, me, cid);
    tpu_line(em, "scf.if %s {", ne);
    tpu_line(em, "  tpu.sem_signal %s, %s core_id %s : %s", s, one, cid, ty);
    tpu_line(em, "}");
  }
  const char *n = tpu_i32_const(em, cores - 1);
  tpu_line(em, "tpu.sem_wait %s, %s : %s", s, n, ty);
}
