/* One function per op family of ir/ops.def, writing the ops Pallas's TPU
 * lowering writes for the same primitive (docs/tpu.md, "Conventions followed"):
 * arith/math for elementwise ops, vector.load / tpu.vector_store for VMEM,
 * memref.load/store for SMEM scalars, vector.multi_reduction, tpu.matmul,
 * tpu.iota, tpu.dynamic_rotate, scf for control flow, tpu.region for
 * scoped scratch, tpu.enqueue_dma / tpu.wait_dma with tpu.memref_slice,
 * tpu.sem_*. What has no form here is tpu_unimplemented, located. */
#include <inttypes.h>
#include <stdio.h>

#include "ir/opview.h"
#include "tpu/tpu_internal.h"

/* A string buffer's text, "" if it failed (the failure is reported after). */
#define SB(sb) ((sb).data ? (sb).data : "")

/* ---- Helpers ------------------------------------------------------------------------ */

/* Names result `i` of `op` "%<tessera name>" and returns it. */
static const char *result_name(tpu_emitter_t *em, const tsr_op_t *op, uint32_t i) {
  const tsr_value_t *r = op->results[i];
  char buf[512];
  snprintf(buf, sizeof buf, "%%%s", r->name);
  tpu_set_name(em, r, buf);
  return tpu_name(em, r);
}

/* Makes `v` (already named) another name for `alias` (no op emitted). */
static void alias_value(tpu_emitter_t *em, const tsr_value_t *v, const tsr_value_t *alias) {
  tpu_set_name(em, v, tpu_name(em, alias));
}

static bool is_float(tsr_dtype_t d) { return tsr_dtype_class(d) == TSR_CLASS_FLOAT; }
static bool is_uint(tsr_dtype_t d) { return tsr_dtype_class(d) == TSR_CLASS_UINT; }
static bool is_bool(tsr_dtype_t d) { return d == TSR_DTYPE_I1; }
static uint32_t bits_of(tsr_dtype_t d) { return d == TSR_DTYPE_I1 ? 1 : (uint32_t)tsr_dtype_size(d) * 8; }

/* The literal of `dtype` holding the number `value` (integers) or `fvalue`
 * (floats): floats as their exact bit pattern in hex. */
static void literal_text(char *buf, size_t n, tsr_dtype_t dtype, double fvalue, int64_t value) {
  if (is_float(dtype)) {
    float f = (float)fvalue;
    if (dtype == TSR_DTYPE_F32)
      snprintf(buf, n, "0x%08" PRIX32, tsr_f32_bits(f));
    else if (dtype == TSR_DTYPE_BF16)
      snprintf(buf, n, "0x%04X", (unsigned)tsr_f32_to_bf16(f));
    else
      snprintf(buf, n, "0x%04X", (unsigned)tsr_f32_to_f16(f));
  } else if (is_bool(dtype)) {
    snprintf(buf, n, "%s", value ? "true" : "false");
  } else {
    uint32_t b = bits_of(dtype);
    uint64_t u = (uint64_t)value & (b == 64 ? ~0ull : ((1ull << b) - 1));
    int64_t s = (u >> (b - 1)) & 1 ? (int64_t)(u | ~((1ull << b) - 1)) : (int64_t)u;
    snprintf(buf, n, "%" PRId64, s);
  }
}

/* `%t = arith.constant LIT : T` for a scalar or splat of `type`'s dtype
 * and shape; returns %t. */
static const char *constant(tpu_emitter_t *em, const tsr_type_t *type, double f, int64_t i) {
  char lit[64], ty[TPU_TYPE_MAX];
  literal_text(lit, sizeof lit, type->dtype, f, i);
  const char *t = tpu_tmp(em);
  if (type->kind == TSR_TYPE_VECTOR)
    tpu_line(em, "%s = arith.constant dense<%s> : %s", t, lit, tpu_type(ty, type));
  else if (type->dtype == TSR_DTYPE_I1) /* `true` is typed already */
    tpu_line(em, "%s = arith.constant %s", t, lit);
  else
    tpu_line(em, "%s = arith.constant %s : %s", t, lit, tpu_elem(type->dtype));
  return t;
}

static tsr_type_t with_dtype(const tsr_type_t *shape, tsr_dtype_t dtype) {
  tsr_type_t t = *shape;
  t.dtype = dtype;
  return t;
}

/* libtpu moves i1 blocks badly: a select, broadcast or concatenation of
 * them fails ("Invalid input layout" on the extension MLIR rewrites a
 * select of i1 into, "changeBitwidth when src bitwidth and dst bitwidth
 * differs too much", "Invalid vector register cast"). Such ops move the
 * bits as i32 (bits_i32), and the result is compared with 0 (bits_i1). */
static const char *bits_i32(tpu_emitter_t *em, const char *v, const tsr_type_t *t) {
  char a[TPU_TYPE_MAX], b[TPU_TYPE_MAX];
  tsr_type_t wt = with_dtype(t, TSR_DTYPE_I32);
  const char *r = tpu_tmp(em);
  tpu_line(em, "%s = arith.extui %s : %s to %s", r, v, tpu_type(a, t), tpu_type(b, &wt));
  return r;
}

static void bits_i1(tpu_emitter_t *em, const char *r, const char *v, const tsr_type_t *t) {
  char a[TPU_TYPE_MAX], vn[32];
  tsr_type_t wt = with_dtype(t, TSR_DTYPE_I32);
  snprintf(vn, sizeof vn, "%s", v);
  const char *z = constant(em, &wt, 0.0, 0);
  tpu_line(em, "%s = arith.cmpi ne, %s, %s : %s", r, vn, z, tpu_type(a, &wt));
}

static const char *index_const(tpu_emitter_t *em, int64_t v) {
  const char *t = tpu_tmp(em);
  tpu_line(em, "%s = arith.constant %lld : index", t, (long long)v);
  return t;
}

static const char *i32_const(tpu_emitter_t *em, int64_t v) {
  const char *t = tpu_tmp(em);
  tpu_line(em, "%s = arith.constant %lld : i32", t, (long long)v);
  return t;
}

/* `v` as a value of `target`'s shape: a scalar operand of a block op is
 * broadcast (vector.broadcast), as Pallas does. */
static const char *operand_as(tpu_emitter_t *em, const tsr_value_t *v, const tsr_type_t *target) {
  const char *name = tpu_name(em, v);
  if (v->type.kind != TSR_TYPE_SCALAR || target->kind != TSR_TYPE_VECTOR) return name;
  char a[TPU_TYPE_MAX], b[TPU_TYPE_MAX];
  tsr_type_t vt = with_dtype(target, v->type.dtype);
  const char *t = tpu_tmp(em);
  tpu_line(em, "%s = vector.broadcast %s : %s to %s", t, name, tpu_type(a, &v->type),
           tpu_type(b, &vt));
  return t;
}

/* A block of 8- or 16-bit elements whose rows are longer than one vreg row
 * and fewer than a vreg's 8 sublanes (1-D blocks included): libtpu cannot
 * select such blocks by a mask compared in 32 bits (an iota's, say: "Not
 * implemented: Sublane broadcast", v5e and v6e; (1, 2, 129), (1, 2, 256),
 * (1, 1, 256) and 1-D from 129 elements on fail, (1, 2, 128) and
 * (1, 8, 256) compile); in 32 bits it can. */
static bool narrow_short_rows(const tsr_type_t *t) {
  if (t->kind != TSR_TYPE_VECTOR || t->rank == 0 || is_bool(t->dtype) || bits_of(t->dtype) >= 32)
    return false;
  int64_t rows = t->rank >= 2 ? t->dims[t->rank - 2] : 1;
  return t->dims[t->rank - 1] > 128 && rows < 8;
}

/* The select of `c` (i1 scalar or of T's shape) between a and b of type T. */
static void emit_select(tpu_emitter_t *em, const char *r, const char *c, bool vector_cond,
                        const char *a, const char *b, const tsr_type_t *t) {
  char ty[TPU_TYPE_MAX], ct[TPU_TYPE_MAX];
  if (vector_cond && narrow_short_rows(t)) { /* in 32 bits, the same values */
    bool f = is_float(t->dtype);
    tsr_type_t wt = with_dtype(t, f ? TSR_DTYPE_F32 : TSR_DTYPE_I32);
    char wty[TPU_TYPE_MAX], rn[512], cn[512], wa[32], wb[32], w[32];
    snprintf(rn, sizeof rn, "%s", r);
    snprintf(cn, sizeof cn, "%s", c);
    tpu_type(ty, t);
    tpu_type(wty, &wt);
    snprintf(wa, sizeof wa, "%s", tpu_tmp(em));
    tpu_line(em, "%s = %s %s : %s to %s", wa, f ? "arith.extf" : "arith.extui", a, ty, wty);
    snprintf(wb, sizeof wb, "%s", tpu_tmp(em));
    tpu_line(em, "%s = %s %s : %s to %s", wb, f ? "arith.extf" : "arith.extui", b, ty, wty);
    snprintf(w, sizeof w, "%s", tpu_tmp(em));
    tsr_type_t cond = with_dtype(t, TSR_DTYPE_I1);
    tpu_line(em, "%s = arith.select %s, %s, %s : %s, %s", w, cn, wa, wb, tpu_type(ct, &cond),
             wty);
    tpu_line(em, "%s = %s %s : %s to %s", rn, f ? "arith.truncf" : "arith.trunci", w, wty, ty);
    return;
  }
  if (vector_cond) {
    tsr_type_t cond = with_dtype(t, TSR_DTYPE_I1);
    tpu_line(em, "%s = arith.select %s, %s, %s : %s, %s", r, c, a, b, tpu_type(ct, &cond),
             tpu_type(ty, t));
  } else {
    tpu_line(em, "%s = arith.select %s, %s, %s : %s", r, c, a, b, tpu_type(ty, t));
  }
}

/* The shape of the block a value has, rank 0 for a scalar. */
static uint32_t value_dims(const tsr_type_t *t, int64_t *dims) {
  if (t->kind != TSR_TYPE_VECTOR) return 0;
  memcpy(dims, t->dims, sizeof(int64_t) * t->rank);
  return t->rank;
}

/* Reshapes `name` of type `from` (a vector or scalar) to `to`, emitting
 * vector.shape_cast / vector.extract / vector.broadcast as needed. */
static const char *reshape_to(tpu_emitter_t *em, const char *name, tsr_dtype_t dtype,
                              uint32_t from_rank, const int64_t *from, uint32_t to_rank,
                              const int64_t *to) {
  char a[TPU_TYPE_MAX], b[TPU_TYPE_MAX];
  if (from_rank == to_rank && !memcmp(from, to, sizeof(int64_t) * from_rank)) return name;
  const char *t = tpu_tmp(em);
  if (from_rank == 0) {
    tpu_line(em, "%s = vector.broadcast %s : %s to %s", t, name, tpu_elem(dtype),
             tpu_vector(b, dtype, to_rank, to));
  } else if (to_rank == 0) {
    char idx[64] = "";
    size_t at = 0;
    for (uint32_t i = 0; i < from_rank && at < sizeof idx; i++)
      at += (size_t)snprintf(idx + at, sizeof idx - at, "%s0", i ? ", " : "");
    tpu_line(em, "%s = vector.extract %s[%s] : %s from %s", t, name, idx, tpu_elem(dtype),
             tpu_vector(a, dtype, from_rank, from));
  } else {
    tpu_line(em, "%s = vector.shape_cast %s : %s to %s", t, name,
             tpu_vector(a, dtype, from_rank, from), tpu_vector(b, dtype, to_rank, to));
  }
  return t;
}

/* ---- Constants and queries ----------------------------------------------------------- */

void tpu_op_const(tpu_emitter_t *em, const tsr_op_t *op) {
  const tsr_type_t *t = &op->results[0]->type;
  char lit[64], ty[TPU_TYPE_MAX];
  literal_text(lit, sizeof lit, t->dtype, op->literal.f, op->literal.i);
  const char *r = result_name(em, op, 0);
  if (t->kind == TSR_TYPE_VECTOR)
    tpu_line(em, "%s = arith.constant dense<%s> : %s", r, lit, tpu_type(ty, t));
  else if (t->dtype == TSR_DTYPE_I1)
    tpu_line(em, "%s = arith.constant %s", r, lit);
  else
    tpu_line(em, "%s = arith.constant %s : %s", r, lit, tpu_elem(t->dtype));
}

void tpu_op_program_id(tpu_emitter_t *em, const tsr_op_t *op) {
  char buf[32];
  snprintf(buf, sizeof buf, "%%$g%lld", (long long)op->ints[0]);
  tpu_set_name(em, op->results[0], buf);
}

void tpu_op_num_programs(tpu_emitter_t *em, const tsr_op_t *op) {
  /* Pallas folds num_programs of a static grid to a constant. */
  tpu_line(em, "%s = arith.constant %lld : i32", result_name(em, op, 0),
           (long long)em->kernel->grid[op->ints[0]]);
}

void tpu_op_device_id(tpu_emitter_t *em, const tsr_op_t *op) {
  tpu_line(em, "%s = tpu.device_id : i32", result_name(em, op, 0));
}

/* This core's index as tessera defines it (ir/ir.h, tsr_ir_core_split):
 * the split grid dims (the core_parallel one, else the leading parallel
 * ones) flattened, divided by ceil(points / cores). Mosaic has no core id
 * op on TensorCores (tpu.core_id is for SparseCores): on one core it is 0. */
static const char *core_index(tpu_emitter_t *em) {
  const tsr_kernel_t *k = em->kernel;
  uint32_t cores = em->chip->cores;
  tsr_ir_core_split_t split = tsr_ir_core_split(k->grid_rank, k->grid, k->semantics);
  if (cores <= 1 || split.first == split.end) return i32_const(em, 0);
  const char *flat = NULL;
  char flat_buf[32];
  for (uint32_t g = split.first; g < split.end; g++) {
    char gname[32];
    snprintf(gname, sizeof gname, "%%$g%u", g);
    if (!flat) {
      snprintf(flat_buf, sizeof flat_buf, "%s", gname);
    } else {
      const char *dim = i32_const(em, k->grid[g]);
      const char *m = tpu_tmp(em);
      tpu_line(em, "%s = arith.muli %s, %s : i32", m, flat_buf, dim);
      const char *a = tpu_tmp(em);
      tpu_line(em, "%s = arith.addi %s, %s : i32", a, m, gname);
      snprintf(flat_buf, sizeof flat_buf, "%s", a);
    }
    flat = flat_buf;
  }
  uint64_t chunk = (split.points + cores - 1) / cores;
  const char *c = i32_const(em, (int64_t)chunk);
  const char *r = tpu_tmp(em);
  tpu_line(em, "%s = arith.divsi %s, %s : i32", r, flat_buf, c);
  return r;
}

void tpu_op_core_id(tpu_emitter_t *em, const tsr_op_t *op) {
  tpu_set_name(em, op->results[0], core_index(em));
}

/* multiple_of: Mosaic's tpu.assume_multiple (what pl.multiple_of lowers
 * to), which proves the alignment of the dynamic offsets computed from it. */
void tpu_op_multiple_of(tpu_emitter_t *em, const tsr_op_t *op) {
  const char *a = tpu_name(em, op->operands[0]);
  tpu_line(em, "%s = tpu.assume_multiple %s, %lld : i32", result_name(em, op, 0), a,
           (long long)op->ints[0]);
}

/* ---- Memory --------------------------------------------------------------------------- */

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
      s = as_i32 ? i32_const(em, ix[i].start) : index_const(em, ix[i].start);
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
    /* SMEM holds scalars: memref.load (the verifier allows nothing else). */
    starts_text(em, op, v.ref.indices, v.ref.count, false, idx, sizeof idx);
    tpu_line(em, "%s = memref.load %s[%s] : %s", result_name(em, op, 0),
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
    view[i] = ix->kind == TSR_INDEX_FULL ? ref->dims[i] : ix->kind == TSR_INDEX_POINT ? 1 : ix->size;
  }
  bool strided = view_strides(v.ref.indices, v.ref.count, strides, sizeof strides);
  starts_text(em, op, v.ref.indices, v.ref.count, false, idx, sizeof idx);
  uint32_t rr = value_dims(rt, rd);
  tsr_dtype_t md = memory_dtype(ref->dtype);
  /* Points load a block with 1s there, then drop them (vector.shape_cast);
   * i1 memory is i32, compared with 0. */
  bool direct = md == rt->dtype && rr == ref->rank && !memcmp(rd, view, sizeof(int64_t) * rr);
  const char *vec = direct ? result_name(em, op, 0) : tpu_tmp(em);
  if (strided)
    tpu_line(em, "%s = tpu.strided_load %s[%s] %s : %s, %s", vec, tpu_name(em, v.ref.base.value),
             idx, strides, tpu_type(a, ref), tpu_vector(b, md, ref->rank, view));
  else
    tpu_line(em, "%s = vector.load %s[%s] : %s, %s", vec, tpu_name(em, v.ref.base.value), idx,
             tpu_type(a, ref), tpu_vector(b, md, ref->rank, view));
  if (direct) return;
  const char *r = reshape_to(em, vec, md, ref->rank, view, rr, rd);
  if (md != rt->dtype) {
    tsr_type_t it = with_dtype(rt, md);
    const char *z = constant(em, &it, 0.0, 0);
    tpu_line(em, "%s = arith.cmpi ne, %s, %s : %s", result_name(em, op, 0), r, z, tpu_type(a, &it));
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
    tpu_line(em, "memref.store %s, %s[%s] : %s", tpu_name(em, val),
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
    view[i] = ix->kind == TSR_INDEX_FULL ? ref->dims[i] : ix->kind == TSR_INDEX_POINT ? 1 : ix->size;
  }
  bool strided = view_strides(v.ref.indices, v.ref.count, strides, sizeof strides);
  if (strided && v.mask.slot >= 0) {
    tpu_unimplemented(em, op, "masked strided stores have no Mosaic form");
    return;
  }
  starts_text(em, op, v.ref.indices, v.ref.count, false, idx, sizeof idx);
  int64_t vd[TSR_MAX_RANK];
  uint32_t vr = value_dims(&val->type, vd);
  const char *s = reshape_to(em, tpu_name(em, val), ref->dtype, vr, vd, ref->rank, view);
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
    uint32_t mr = value_dims(&mv->type, md_dims);
    const char *m = reshape_to(em, tpu_name(em, mv), TSR_DTYPE_I1, mr, md_dims, ref->rank, view);
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
      emit_select(em, sel, mn, true, s, old, &vt);
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

/* ---- Elementwise ---------------------------------------------------------------------- */

/* The arith/math op of a one-op unary or binary tessera op for a dtype
 * class, NULL when it takes several ops or has none. */
static const char *simple_op(tsr_opcode_t opc, tsr_dtype_t d) {
  bool f = is_float(d), u = is_uint(d);
  switch (opc) {
  case TSR_OP_ABS: return f ? "math.absf" : "math.absi";
  case TSR_OP_EXP: return "math.exp";
  case TSR_OP_EXP2: return "math.exp2";
  case TSR_OP_LOG: return "math.log";
  case TSR_OP_LOG1P: return "math.log1p";
  case TSR_OP_SQRT: return "math.sqrt";
  case TSR_OP_RSQRT: return "math.rsqrt";
  case TSR_OP_TANH: return "math.tanh";
  case TSR_OP_SIN: return "math.sin";
  case TSR_OP_COS: return "math.cos";
  case TSR_OP_FLOOR: return "math.floor";
  case TSR_OP_CEIL: return "math.ceil";
  case TSR_OP_ROUND: return "math.roundeven";
  case TSR_OP_CLZ: return "math.ctlz";
  case TSR_OP_POPCOUNT: return "math.ctpop";
  case TSR_OP_NEG: return f ? "arith.negf" : NULL;
  case TSR_OP_ADD: return f ? "arith.addf" : "arith.addi";
  case TSR_OP_SUB: return f ? "arith.subf" : "arith.subi";
  case TSR_OP_MUL: return f ? "arith.mulf" : "arith.muli";
  case TSR_OP_DIV: return f ? "arith.divf" : u ? "arith.divui" : "arith.divsi";
  case TSR_OP_REM: return f ? "arith.remf" : u ? "arith.remui" : "arith.remsi";
  case TSR_OP_MAX: return f ? "arith.maximumf" : u ? NULL : "arith.maxsi";
  case TSR_OP_MIN: return f ? "arith.minimumf" : u ? NULL : "arith.minsi";
  case TSR_OP_POW: return "math.powf";
  case TSR_OP_AND: return "arith.andi";
  case TSR_OP_OR: return "arith.ori";
  case TSR_OP_XOR: return "arith.xori";
  case TSR_OP_SHL: return "arith.shli";
  case TSR_OP_SHRL: return "arith.shrui";
  case TSR_OP_SHRA: return "arith.shrsi";
  default: return NULL;
  }
}

static const char *cmp_predicate(tsr_opcode_t opc, tsr_dtype_t d) {
  bool f = is_float(d), s = tsr_dtype_class(d) == TSR_CLASS_SINT;
  switch (opc) {
  case TSR_OP_EQ: return f ? "oeq" : "eq";
  case TSR_OP_NE: return f ? "une" : "ne";
  case TSR_OP_LT: return f ? "olt" : s ? "slt" : "ult";
  case TSR_OP_LE: return f ? "ole" : s ? "sle" : "ule";
  case TSR_OP_GT: return f ? "ogt" : s ? "sgt" : "ugt";
  case TSR_OP_GE: return f ? "oge" : s ? "sge" : "uge";
  default: return NULL;
  }
}

static void emit_compare(tpu_emitter_t *em, const char *r, tsr_opcode_t opc, const char *a,
                         const char *b, const tsr_type_t *operand_type) {
  char ty[TPU_TYPE_MAX];
  if (opc == TSR_OP_NE && is_float(operand_type->dtype)) {
    /* libtpu has no `une` ("Unsupported comparison direction"): not oeq,
     * which is true for NaN as tessera's ne. */
    const char *eq = tpu_tmp(em);
    tpu_line(em, "%s = arith.cmpf oeq, %s, %s : %s", eq, a, b, tpu_type(ty, operand_type));
    tsr_type_t bt = with_dtype(operand_type, TSR_DTYPE_I1);
    const char *ones = constant(em, &bt, 0.0, 1);
    tpu_line(em, "%s = arith.xori %s, %s : %s", r, eq, ones, tpu_type(ty, &bt));
    return;
  }
  tpu_line(em, "%s = %s %s, %s, %s : %s", r, is_float(operand_type->dtype) ? "arith.cmpf" : "arith.cmpi",
           cmp_predicate(opc, operand_type->dtype), a, b, tpu_type(ty, operand_type));
}

/* convert: value conversion between any two dtypes (docs/ir.md). */
static void emit_convert(tpu_emitter_t *em, const tsr_op_t *op, const char *r, const char *a,
                         const tsr_type_t *from, const tsr_type_t *to) {
  char x[TPU_TYPE_MAX], y[TPU_TYPE_MAX];
  tsr_dtype_t fd = from->dtype, td = to->dtype;
  const char *ft = tpu_type(x, from), *tt = tpu_type(y, to);
  if (!strcmp(tpu_elem(fd), tpu_elem(td))) { /* i32 <-> u32: the same bits */
    tpu_set_name(em, op->results[0], a);
    return;
  }
  if (is_bool(td)) { /* x != 0 */
    const char *z = constant(em, from, 0.0, 0);
    char zn[32];
    snprintf(zn, sizeof zn, "%s", z);
    emit_compare(em, r, TSR_OP_NE, a, zn, from);
    return;
  }
  if (is_bool(fd) && !is_float(td) && bits_of(td) < 32) {
    /* MLIR folds extui i1 -> i32 -> trunci into one extension i1 -> i8,
     * which libtpu refuses ("Invalid input layout"): select 1 or 0. */
    char c1[32];
    snprintf(c1, sizeof c1, "%s", constant(em, to, 0.0, 1));
    const char *c0 = constant(em, to, 0.0, 0);
    emit_select(em, r, a, from->kind == TSR_TYPE_VECTOR, c1, c0, to);
    return;
  }
  const char *opname = NULL;
  if (is_float(fd) && is_float(td))
    opname = bits_of(td) > bits_of(fd) ? "arith.extf" : "arith.truncf";
  else if (is_float(fd))
    opname = is_uint(td) ? "arith.fptoui" : "arith.fptosi";
  else if (is_float(td))
    opname = is_uint(fd) || is_bool(fd) ? "arith.uitofp" : "arith.sitofp";
  else if (bits_of(td) > bits_of(fd))
    opname = is_uint(fd) || is_bool(fd) ? "arith.extui" : "arith.extsi";
  else
    opname = "arith.trunci";
  if (is_float(fd) && is_float(td) && bits_of(td) == bits_of(fd)) { /* bf16 <-> f16 */
    tsr_type_t mid = with_dtype(from, TSR_DTYPE_F32);
    char m[TPU_TYPE_MAX];
    const char *t = tpu_tmp(em);
    tpu_line(em, "%s = arith.extf %s : %s to %s", t, a, ft, tpu_type(m, &mid));
    tpu_line(em, "%s = arith.truncf %s : %s to %s", r, t, m, tt);
    return;
  }
  tpu_line(em, "%s = %s %s : %s to %s", r, opname, a, ft, tt);
}

/* A 16-bit op libtpu does not legalize on every block shape, computed in
 * 32 bits and narrowed, which gives the same bits: bf16 `rem`
 * ("failed to legalize arith.remf"; the remainder of two bf16 values is
 * exact in bf16), and i16/u16 `rem`, `div` (arith.remsi fails on 3-D
 * blocks), `max`, `min` ("failed to legalize operation 'arith.maxsi'" on
 * an (8, 4, 24) i16 block; libtpu has no arith.maxui at all), `clz` and
 * `popcount` ("failed to legalize math.ctlz/ctpop"), extended by sign or
 * zero as the dtype's class says. */
static void widened_16(tpu_emitter_t *em, const tsr_op_t *op, const char *a, const char *b,
                       const tsr_type_t *rt) {
  tsr_dtype_t d = rt->dtype;
  bool f = is_float(d), u = is_uint(d);
  tsr_type_t wt = with_dtype(rt, f ? TSR_DTYPE_F32 : TSR_DTYPE_I32);
  char nt[TPU_TYPE_MAX], wty[TPU_TYPE_MAX], wa[32], wb[32] = "", w[32];
  tpu_type(nt, rt);
  tpu_type(wty, &wt);
  const char *ext = f ? "arith.extf" : u || op->opcode == TSR_OP_CLZ ||
                                       op->opcode == TSR_OP_POPCOUNT ? "arith.extui" : "arith.extsi";
  snprintf(wa, sizeof wa, "%s", tpu_tmp(em));
  tpu_line(em, "%s = %s %s : %s to %s", wa, ext, a, nt, wty);
  if (b) {
    snprintf(wb, sizeof wb, "%s", tpu_tmp(em));
    tpu_line(em, "%s = %s %s : %s to %s", wb, ext, b, nt, wty);
  }
  snprintf(w, sizeof w, "%s", tpu_tmp(em));
  const char *name = simple_op(op->opcode, d);
  if (op->opcode == TSR_OP_MAX || op->opcode == TSR_OP_MIN) {
    /* MLIR narrows trunci(maxsi(ext a, ext b)) back to an i16 maxsi: the
     * extremum is taken without one. With d = a - b (exact in i32),
     * p = d & ~(d >> 31) is max(d, 0): max = b + p, min = a - p. */
    char dd[32], sg[32], ns[32], pp[32];
    snprintf(dd, sizeof dd, "%s", tpu_tmp(em));
    tpu_line(em, "%s = arith.subi %s, %s : %s", dd, wa, wb, wty);
    char c31[32], ones[32];
    snprintf(c31, sizeof c31, "%s", constant(em, &wt, 0.0, 31));
    snprintf(ones, sizeof ones, "%s", constant(em, &wt, 0.0, -1));
    snprintf(sg, sizeof sg, "%s", tpu_tmp(em));
    tpu_line(em, "%s = arith.shrsi %s, %s : %s", sg, dd, c31, wty);
    snprintf(ns, sizeof ns, "%s", tpu_tmp(em));
    tpu_line(em, "%s = arith.xori %s, %s : %s", ns, sg, ones, wty);
    snprintf(pp, sizeof pp, "%s", tpu_tmp(em));
    tpu_line(em, "%s = arith.andi %s, %s : %s", pp, dd, ns, wty);
    if (op->opcode == TSR_OP_MAX)
      tpu_line(em, "%s = arith.addi %s, %s : %s", w, wb, pp, wty);
    else
      tpu_line(em, "%s = arith.subi %s, %s : %s", w, wa, pp, wty);
  } else if (b)
    tpu_line(em, "%s = %s %s, %s : %s", w, name, wa, wb, wty);
  else
    tpu_line(em, "%s = %s %s : %s", w, name, wa, wty);
  if (op->opcode == TSR_OP_CLZ) { /* 16 more leading zeros in 32 bits */
    char sixteen[32];
    snprintf(sixteen, sizeof sixteen, "%s", constant(em, &wt, 0.0, 16));
    const char *t = tpu_tmp(em);
    tpu_line(em, "%s = arith.subi %s, %s : %s", t, w, sixteen, wty);
    snprintf(w, sizeof w, "%s", t);
  }
  tpu_line(em, "%s = %s %s : %s to %s", result_name(em, op, 0), f ? "arith.truncf" : "arith.trunci",
           w, wty, nt);
}

void tpu_op_elementwise(tpu_emitter_t *em, const tsr_op_t *op) {
  const tsr_type_t *rt = &op->results[0]->type;
  const tsr_op_info_t *info = &tsr_op_table[op->opcode];
  char ty[TPU_TYPE_MAX];
  switch (info->family) {
  case TSR_FAM_SELECT: {
    const tsr_value_t *c = op->operands[0];
    const char *cn = tpu_name(em, c);
    const char *a = operand_as(em, op->operands[1], rt);
    const char *b = operand_as(em, op->operands[2], rt);
    if (is_bool(rt->dtype) && rt->kind == TSR_TYPE_VECTOR) { /* see bits_i32 */
      char wa[32], wb[32], w[32];
      tsr_type_t wt = with_dtype(rt, TSR_DTYPE_I32);
      snprintf(wb, sizeof wb, "%s", b);
      snprintf(wa, sizeof wa, "%s", bits_i32(em, a, rt));
      snprintf(wb, sizeof wb, "%s", bits_i32(em, wb, rt));
      snprintf(w, sizeof w, "%s", tpu_tmp(em));
      emit_select(em, w, cn, c->type.kind == TSR_TYPE_VECTOR, wa, wb, &wt);
      bits_i1(em, result_name(em, op, 0), w, rt);
      return;
    }
    emit_select(em, result_name(em, op, 0), cn, c->type.kind == TSR_TYPE_VECTOR, a, b, rt);
    return;
  }
  case TSR_FAM_COMPARE: {
    const tsr_value_t *x = op->operands[0], *y = op->operands[1];
    tsr_type_t ot = with_dtype(rt, x->type.dtype);
    if (!cmp_predicate(op->opcode, ot.dtype)) break;
    const char *a = operand_as(em, x, &ot), *b = operand_as(em, y, &ot);
    if (is_bool(ot.dtype) && ot.kind == TSR_TYPE_VECTOR) {
      /* MLIR rewrites a compare of i1 blocks into an extension of i1 that
       * libtpu refuses ("Invalid input layout"): compare the bits as i32. */
      tsr_type_t wt = with_dtype(&ot, TSR_DTYPE_I32);
      char wa[32], wb[32], bt[TPU_TYPE_MAX], wty[TPU_TYPE_MAX];
      tpu_type(bt, &ot);
      tpu_type(wty, &wt);
      snprintf(wa, sizeof wa, "%s", tpu_tmp(em));
      tpu_line(em, "%s = arith.extui %s : %s to %s", wa, a, bt, wty);
      snprintf(wb, sizeof wb, "%s", tpu_tmp(em));
      tpu_line(em, "%s = arith.extui %s : %s to %s", wb, b, bt, wty);
      emit_compare(em, result_name(em, op, 0), op->opcode, wa, wb, &wt);
      return;
    }
    emit_compare(em, result_name(em, op, 0), op->opcode, a, b, &ot);
    return;
  }
  case TSR_FAM_CONVERT: {
    const tsr_value_t *x = op->operands[0];
    const char *a = tpu_name(em, x);
    const char *r = result_name(em, op, 0);
    if (op->opcode == TSR_OP_CONVERT) {
      emit_convert(em, op, r, a, &x->type, rt);
      return;
    }
    if (op->opcode == TSR_OP_BITCAST) {
      char ft[TPU_TYPE_MAX];
      if (!strcmp(tpu_type(ft, &x->type), tpu_type(ty, rt))) {
        tpu_set_name(em, op->results[0], a);
        return;
      }
      tpu_line(em, "%s = arith.bitcast %s : %s to %s", r, a, ft, ty);
      return;
    }
    break;
  }
  case TSR_FAM_UNARY: case TSR_FAM_BINARY: {
    tsr_dtype_t d = rt->dtype;
    if (rt->kind == TSR_TYPE_VECTOR && (d == TSR_DTYPE_I8 || d == TSR_DTYPE_U8)) {
      /* libtpu: "Only vector<i16> and vector<i32> are supported". */
      tpu_unimplemented(em, op, "TPU vector arithmetic takes 16- and 32-bit integers, not %s; "
                                "convert to i32 first", tsr_dtype_name(d));
      return;
    }
    const char *a = operand_as(em, op->operands[0], rt);
    const char *b = op->num_operands > 1 ? operand_as(em, op->operands[1], rt) : NULL;
    const char *name = simple_op(op->opcode, d);
    bool f = is_float(d);
    if (op->opcode == TSR_OP_NOT) { /* xor with all ones */
      const char *ones = constant(em, rt, 0.0, -1);
      tpu_line(em, "%s = arith.xori %s, %s : %s", result_name(em, op, 0), a, ones, tpu_type(ty, rt));
      return;
    }
    if (op->opcode == TSR_OP_NEG && !f) { /* 0 - a */
      const char *z = constant(em, rt, 0.0, 0);
      tpu_line(em, "%s = arith.subi %s, %s : %s", result_name(em, op, 0), z, a, tpu_type(ty, rt));
      return;
    }
    if (op->opcode == TSR_OP_LOGISTIC) { /* 1 / (1 + exp(-a)), as jax.nn.sigmoid */
      const char *n = tpu_tmp(em);
      tpu_line(em, "%s = arith.negf %s : %s", n, a, tpu_type(ty, rt));
      const char *e = tpu_tmp(em);
      tpu_line(em, "%s = math.exp %s : %s", e, n, ty);
      const char *one = constant(em, rt, 1.0, 1);
      const char *s = tpu_tmp(em);
      tpu_line(em, "%s = arith.addf %s, %s : %s", s, one, e, ty);
      tpu_line(em, "%s = arith.divf %s, %s : %s", result_name(em, op, 0), one, s, ty);
      return;
    }
    if (op->opcode == TSR_OP_SIGN) { /* a > 0 ? 1 : a < 0 ? -1 : a (keeps 0 and NaN) */
      const char *z = constant(em, rt, 0.0, 0);
      const char *one = constant(em, rt, 1.0, 1);
      const char *mone = constant(em, rt, -1.0, -1);
      const char *gt = tpu_tmp(em);
      emit_compare(em, gt, TSR_OP_GT, a, z, rt);
      const char *lt = tpu_tmp(em);
      emit_compare(em, lt, TSR_OP_LT, a, z, rt);
      const char *m = tpu_tmp(em);
      emit_select(em, m, lt, rt->kind == TSR_TYPE_VECTOR, mone, a, rt);
      emit_select(em, result_name(em, op, 0), gt, rt->kind == TSR_TYPE_VECTOR, one, m, rt);
      return;
    }
    if ((op->opcode == TSR_OP_MAX || op->opcode == TSR_OP_MIN) && is_uint(d) &&
        d == TSR_DTYPE_U32) {
      /* libtpu cannot legalize arith.maxui/minui (and MLIR folds a
       * compare-and-select into them): flip the sign bit around the
       * signed op, which orders the flipped values as unsigned ones. */
      const char *sign = constant(em, rt, 0.0, -2147483647ll - 1);
      char fa[32], fb[32], m[32];
      snprintf(fa, sizeof fa, "%s", tpu_tmp(em));
      tpu_line(em, "%s = arith.xori %s, %s : %s", fa, a, sign, tpu_type(ty, rt));
      snprintf(fb, sizeof fb, "%s", tpu_tmp(em));
      tpu_line(em, "%s = arith.xori %s, %s : %s", fb, b, sign, ty);
      snprintf(m, sizeof m, "%s", tpu_tmp(em));
      tpu_line(em, "%s = %s %s, %s : %s", m, op->opcode == TSR_OP_MAX ? "arith.maxsi" : "arith.minsi",
               fa, fb, ty);
      tpu_line(em, "%s = arith.xori %s, %s : %s", result_name(em, op, 0), m, sign, ty);
      return;
    }
    if (rt->kind == TSR_TYPE_VECTOR && bits_of(d) == 16 &&
        ((f && op->opcode == TSR_OP_REM) ||
         (!f && (op->opcode == TSR_OP_REM || op->opcode == TSR_OP_DIV ||
                 op->opcode == TSR_OP_MAX || op->opcode == TSR_OP_MIN ||
                 op->opcode == TSR_OP_CLZ || op->opcode == TSR_OP_POPCOUNT)))) {
      widened_16(em, op, a, b, rt);
      return;
    }
    if (!name) break;
    if (!f && (op->opcode == TSR_OP_POW || !strncmp(name, "math.", 5)) &&
        op->opcode != TSR_OP_ABS && op->opcode != TSR_OP_CLZ && op->opcode != TSR_OP_POPCOUNT)
      break;
    if (b)
      tpu_line(em, "%s = %s %s, %s : %s", result_name(em, op, 0), name, a, b, tpu_type(ty, rt));
    else
      tpu_line(em, "%s = %s %s : %s", result_name(em, op, 0), name, a, tpu_type(ty, rt));
    return;
  }
  default:
    break;
  }
  tpu_unimplemented(em, op, "no TPU form for %s", tsr_dtype_name(rt->dtype));
}

/* ---- Shapes ------------------------------------------------------------------------------ */

/* Mosaic has no 1-D form of some ops (tpu.iota: "iota rank below 2D
 * unsupported"; tpu.dynamic_rotate: "Unsupported 1D shape";
 * tpu.reduce_index: no scalar result): they take a (1, n) block, as
 * Pallas's reduce_index lowering does. Writes (1, n) to dims for a 1-D
 * type and returns 2, else copies the shape. */
static uint32_t at_least_2d(const tsr_type_t *t, int64_t *dims) {
  if (t->rank == 1) {
    dims[0] = 1;
    dims[1] = t->dims[0];
    return 2;
  }
  return value_dims(t, dims);
}

void tpu_op_iota(tpu_emitter_t *em, const tsr_op_t *op) {
  const tsr_type_t *rt = &op->results[0]->type;
  tsr_type_t it = with_dtype(rt, TSR_DTYPE_I32);
  char ty[TPU_TYPE_MAX];
  if (rt->rank == 1) {
    int64_t d2[2];
    at_least_2d(rt, d2);
    const char *t2 = tpu_tmp(em);
    tpu_line(em, "%s = tpu.iota {dimensions = array<i32: 1>} : %s", t2,
             tpu_vector(ty, TSR_DTYPE_I32, 2, d2));
    const char *flat = reshape_to(em, t2, TSR_DTYPE_I32, 2, d2, 1, rt->dims);
    if (rt->dtype == TSR_DTYPE_I32 || rt->dtype == TSR_DTYPE_U32) {
      tpu_set_name(em, op->results[0], flat);
      return;
    }
    char fn[32];
    snprintf(fn, sizeof fn, "%s", flat);
    emit_convert(em, op, result_name(em, op, 0), fn, &it, rt);
    return;
  }
  if (rt->dtype == TSR_DTYPE_I32 || rt->dtype == TSR_DTYPE_U32) {
    tpu_line(em, "%s = tpu.iota {dimensions = array<i32: %lld>} : %s", result_name(em, op, 0),
             (long long)op->ints[0], tpu_type(ty, rt));
    return;
  }
  const char *t = tpu_tmp(em);
  tpu_line(em, "%s = tpu.iota {dimensions = array<i32: %lld>} : %s", t, (long long)op->ints[0],
           tpu_type(ty, &it));
  emit_convert(em, op, result_name(em, op, 0), t, &it, rt);
}

void tpu_op_broadcast(tpu_emitter_t *em, const tsr_op_t *op) {
  const tsr_value_t *x = op->operands[0];
  const tsr_type_t *rt = &op->results[0]->type;
  char a[TPU_TYPE_MAX], b[TPU_TYPE_MAX];
  if (tsr_type_equal(&x->type, rt)) {
    alias_value(em, op->results[0], x);
    return;
  }
  if (is_bool(rt->dtype)) { /* see bits_i32 */
    tsr_type_t xt = with_dtype(&x->type, TSR_DTYPE_I32), wt = with_dtype(rt, TSR_DTYPE_I32);
    char xi[32], w[32];
    if (x->type.kind == TSR_TYPE_VECTOR) {
      snprintf(xi, sizeof xi, "%s", bits_i32(em, tpu_name(em, x), &x->type));
    } else {
      snprintf(xi, sizeof xi, "%s", tpu_tmp(em));
      tpu_line(em, "%s = arith.extui %s : i1 to i32", xi, tpu_name(em, x));
    }
    snprintf(w, sizeof w, "%s", tpu_tmp(em));
    tpu_line(em, "%s = vector.broadcast %s : %s to %s", w, xi, tpu_type(a, &xt), tpu_type(b, &wt));
    bits_i1(em, result_name(em, op, 0), w, rt);
    return;
  }
  tpu_line(em, "%s = vector.broadcast %s : %s to %s", result_name(em, op, 0), tpu_name(em, x),
           tpu_type(a, &x->type), tpu_type(b, rt));
}

void tpu_op_reshape(tpu_emitter_t *em, const tsr_op_t *op) {
  const tsr_value_t *x = op->operands[0];
  const tsr_type_t *rt = &op->results[0]->type;
  int64_t fd[TSR_MAX_RANK], td[TSR_MAX_RANK];
  uint32_t fr = value_dims(&x->type, fd), tr = value_dims(rt, td);
  const char *r = reshape_to(em, tpu_name(em, x), rt->dtype, fr, fd, tr, td);
  tpu_set_name(em, op->results[0], r);
}

void tpu_op_transpose(tpu_emitter_t *em, const tsr_op_t *op) {
  const tsr_value_t *x = op->operands[0];
  char a[TPU_TYPE_MAX], b[TPU_TYPE_MAX], perm[128] = "";
  size_t at = 0;
  for (uint32_t i = 0; i < op->num_ints && at < sizeof perm; i++)
    at += (size_t)snprintf(perm + at, sizeof perm - at, "%s%lld", i ? ", " : "",
                           (long long)op->ints[i]);
  if (is_bool(x->type.dtype)) {
    /* libtpu cannot relayout i1 blocks ("changeBitwidth when src bitwidth
     * and dst bitwidth differs too much"): transpose them as i32. */
    const tsr_type_t *rt = &op->results[0]->type;
    tsr_type_t xi = with_dtype(&x->type, TSR_DTYPE_I32), ri = with_dtype(rt, TSR_DTYPE_I32);
    char bits[32], tr[32];
    snprintf(bits, sizeof bits, "%s", tpu_tmp(em));
    tpu_line(em, "%s = arith.extui %s : %s to %s", bits, tpu_name(em, x), tpu_type(a, &x->type),
             tpu_type(b, &xi));
    snprintf(tr, sizeof tr, "%s", tpu_tmp(em));
    tpu_line(em, "%s = vector.transpose %s, [%s] : %s to %s", tr, bits, perm, b,
             tpu_type(a, &ri));
    const char *z = constant(em, &ri, 0.0, 0);
    tpu_line(em, "%s = arith.cmpi ne, %s, %s : %s", result_name(em, op, 0), tr, z, a);
    return;
  }
  tpu_line(em, "%s = vector.transpose %s, [%s] : %s to %s", result_name(em, op, 0),
           tpu_name(em, x), perm, tpu_type(a, &x->type), tpu_type(b, &op->results[0]->type));
}

void tpu_op_slice(tpu_emitter_t *em, const tsr_op_t *op) {
  const tsr_value_t *x = op->operands[0];
  const tsr_type_t *xt = &x->type;
  char offs[256] = "", sizes[256] = "", strides[256] = "", a[TPU_TYPE_MAX], b[TPU_TYPE_MAX];
  int64_t view[TSR_MAX_RANK];
  size_t ao = 0, as = 0, at = 0;
  for (uint32_t i = 0; i < op->num_indices; i++) {
    const tsr_index_t *ix = &op->indices[i];
    int64_t start = ix->kind == TSR_INDEX_FULL ? 0 : ix->start;
    int64_t size = ix->kind == TSR_INDEX_FULL ? xt->dims[i] : ix->kind == TSR_INDEX_POINT ? 1 : ix->size;
    int64_t stride = ix->kind == TSR_INDEX_SLICE || ix->kind == TSR_INDEX_DS ? ix->stride : 1;
    if (stride != 1) {
      tpu_unimplemented(em, op, "strided slices are not emitted yet");
      return;
    }
    view[i] = size;
    ao += (size_t)snprintf(offs + ao, sizeof offs - ao, "%s%lld", i ? ", " : "", (long long)start);
    as += (size_t)snprintf(sizes + as, sizeof sizes - as, "%s%lld", i ? ", " : "", (long long)size);
    at += (size_t)snprintf(strides + at, sizeof strides - at, "%s1", i ? ", " : "");
  }
  /* i1 as i32 (see bits_i32): v6e cannot slice a 1-D mask of a bf16
   * compare from lane 128 on ("Input offsets outside of the first tile") */
  bool bits = is_bool(xt->dtype);
  tsr_type_t wt = with_dtype(xt, TSR_DTYPE_I32);
  const char *src = bits ? bits_i32(em, tpu_name(em, x), xt) : tpu_name(em, x);
  const char *t = tpu_tmp(em);
  tpu_line(em,
           "%s = \"vector.extract_strided_slice\"(%s) <{offsets = [%s], sizes = [%s], strides = "
           "[%s]}> : (%s) -> %s",
           t, src, offs, sizes, strides, tpu_type(a, bits ? &wt : xt),
           tpu_vector(b, bits ? TSR_DTYPE_I32 : xt->dtype, xt->rank, view));
  int64_t rd[TSR_MAX_RANK];
  uint32_t rr = value_dims(&op->results[0]->type, rd);
  if (bits) {
    char wn[32], r[512];
    snprintf(wn, sizeof wn, "%s", reshape_to(em, t, TSR_DTYPE_I32, xt->rank, view, rr, rd));
    tsr_type_t rt = op->results[0]->type;
    if (rt.kind == TSR_TYPE_VECTOR) {
      snprintf(r, sizeof r, "%s", result_name(em, op, 0));
      bits_i1(em, r, wn, &rt);
    } else { /* a point slice: the element */
      snprintf(r, sizeof r, "%s", result_name(em, op, 0));
      const char *z = i32_const(em, 0);
      tpu_line(em, "%s = arith.cmpi ne, %s, %s : i32", r, wn, z);
    }
    return;
  }
  tpu_set_name(em, op->results[0], reshape_to(em, t, xt->dtype, xt->rank, view, rr, rd));
}

void tpu_op_concatenate(tpu_emitter_t *em, const tsr_op_t *op) {
  tsr_strbuf_t args, types;
  tsr_strbuf_initialize(&args);
  tsr_strbuf_initialize(&types);
  char ty[TPU_TYPE_MAX];
  const tsr_type_t *rt = &op->results[0]->type;
  bool bits = is_bool(rt->dtype); /* see bits_i32 */
  for (uint32_t i = 0; i < op->num_operands; i++) {
    const tsr_type_t *t = &op->operands[i]->type;
    tsr_type_t wt = with_dtype(t, TSR_DTYPE_I32);
    tsr_strbuf_printf(&args, "%s%s", i ? ", " : "",
                      bits ? bits_i32(em, tpu_name(em, op->operands[i]), t)
                           : tpu_name(em, op->operands[i]));
    tsr_strbuf_printf(&types, "%s%s", i ? ", " : "", tpu_type(ty, bits ? &wt : t));
  }
  tsr_type_t wr = with_dtype(rt, TSR_DTYPE_I32);
  const char *w = bits ? tpu_tmp(em) : result_name(em, op, 0);
  if (args.failed || types.failed) tpu_fail(em, TSR_OOM());
  else
    tpu_line(em, "%s = \"tpu.concatenate\"(%s) <{dimension = %lld : i32}> : (%s) -> %s", w,
             SB(args), (long long)op->ints[0], SB(types), tpu_type(ty, bits ? &wr : rt));
  if (bits && TPU_OK(em)) bits_i1(em, result_name(em, op, 0), w, rt);
  tsr_strbuf_deinitialize(&args);
  tsr_strbuf_deinitialize(&types);
}

void tpu_op_roll(tpu_emitter_t *em, const tsr_op_t *op) {
  const tsr_value_t *x = op->operands[0], *shift = op->operands[1];
  int64_t axis = op->ints[0], n = x->type.dims[axis];
  char ty[TPU_TYPE_MAX];
  /* tessera's shift may be negative or exceed n; tpu.dynamic_rotate is
   * jnp.roll for 0 <= shift < n: ((shift % n) + n) % n. */
  const char *cn = i32_const(em, n);
  const char *m1 = tpu_tmp(em);
  tpu_line(em, "%s = arith.remsi %s, %s : i32", m1, tpu_name(em, shift), cn);
  const char *p = tpu_tmp(em);
  tpu_line(em, "%s = arith.addi %s, %s : i32", p, m1, cn);
  const char *amt = tpu_tmp(em);
  tpu_line(em, "%s = arith.remsi %s, %s : i32", amt, p, cn);
  char amt_name[32], src[512];
  snprintf(amt_name, sizeof amt_name, "%s", amt);
  /* i1 blocks are rotated as i32 (libtpu: "changeBitwidth when src
   * bitwidth and dst bitwidth differs too much"; see bits_i32). */
  bool bits = is_bool(x->type.dtype);
  tsr_type_t xt = with_dtype(&x->type, bits ? TSR_DTYPE_I32 : x->type.dtype);
  snprintf(src, sizeof src, "%s",
           bits ? bits_i32(em, tpu_name(em, x), &x->type) : tpu_name(em, x));
  char rotated[512];
  if (x->type.rank == 1) { /* rotated as a (1, n) block (at_least_2d) */
    char flat[32];
    int64_t d2[2];
    at_least_2d(&x->type, d2);
    const char *s2 = reshape_to(em, src, xt.dtype, 1, xt.dims, 2, d2);
    char s2n[512];
    snprintf(s2n, sizeof s2n, "%s", s2);
    tpu_vector(ty, xt.dtype, 2, d2);
    snprintf(flat, sizeof flat, "%s", tpu_tmp(em));
    tpu_line(em, "%s = \"tpu.dynamic_rotate\"(%s, %s) <{dimension = 1 : si32}> : (%s, i32) -> %s",
             flat, s2n, amt_name, ty, ty);
    snprintf(rotated, sizeof rotated, "%s", reshape_to(em, flat, xt.dtype, 2, d2, 1, xt.dims));
  } else {
    snprintf(rotated, sizeof rotated, "%s", bits ? tpu_tmp(em) : result_name(em, op, 0));
    tpu_type(ty, &xt);
    tpu_line(em,
             "%s = \"tpu.dynamic_rotate\"(%s, %s) <{dimension = %lld : si32}> : (%s, i32) -> %s",
             rotated, src, amt_name, (long long)axis, ty, ty);
    if (!bits) return;
  }
  if (bits)
    bits_i1(em, result_name(em, op, 0), rotated, &x->type);
  else
    tpu_set_name(em, op->results[0], rotated);
}

/* sort, argsort: Mosaic sorts only on SparseCore (tpu.sort); a TensorCore
 * kernel sorts with a network (the library's tsr_kernels_sort). */
void tpu_op_sort(tpu_emitter_t *em, const tsr_op_t *op) {
  tpu_unimplemented(em, op,
                    "'%s' has no TensorCore lowering in Mosaic (tpu.sort is SparseCore-only); "
                    "sort with a network, as tsr_kernels_sort's kernels do",
                    tsr_op_table[op->opcode].mnemonic);
}

void tpu_op_gather(tpu_emitter_t *em, const tsr_op_t *op) {
  const tsr_value_t *x = op->operands[0], *idx = op->operands[1];
  int64_t axis = op->ints[0];
  char a[TPU_TYPE_MAX], b[TPU_TYPE_MAX], c[TPU_TYPE_MAX];
  if (idx->type.dtype != TSR_DTYPE_I32) {
    tpu_unimplemented(em, op, "gather indices must be i32 on TPU");
    return;
  }
  if (axis + 2 < (int64_t)x->type.rank) {
    tpu_unimplemented(em, op, "Mosaic gathers along the last two dims only (libtpu: "
                              "\"DynamicGatherOp only implemented for last two dimensions\"), "
                              "not dim %lld of a rank-%u block", (long long)axis, x->type.rank);
    return;
  }
  /* Mosaic gathers within one vreg along the gathered dim (libtpu: "Not
   * implemented: Multiple source vregs along gather dimension"): at most
   * 128 lanes along the last dim, 8 sublanes of 32 bits (the data is
   * gathered as 32 bits) along the one before. */
  int64_t along = x->type.dims[axis], most = axis + 1 == (int64_t)x->type.rank ? 128 : 8;
  if (along > most) {
    tpu_unimplemented(em, op, "Mosaic gathers within one vreg (libtpu: \"Multiple source vregs "
                              "along gather dimension\"): dim %lld has %lld elements, more than "
                              "%lld", (long long)axis, (long long)along, (long long)most);
    return;
  }
  /* A 1-D gather is a (1, n) one (at_least_2d; libtpu: "Invalid input
   * layout" for 1-D). */
  bool flat = x->type.rank == 1;
  tsr_type_t xt = x->type, it = idx->type;
  char xs[512], is[512];
  snprintf(xs, sizeof xs, "%s", tpu_name(em, x));
  snprintf(is, sizeof is, "%s", tpu_name(em, idx));
  if (flat) {
    xt.rank = it.rank = at_least_2d(&x->type, xt.dims);
    memcpy(it.dims, xt.dims, sizeof xt.dims);
    snprintf(xs, sizeof xs, "%s", reshape_to(em, xs, xt.dtype, 1, x->type.dims, 2, xt.dims));
    snprintf(is, sizeof is, "%s", reshape_to(em, is, it.dtype, 1, idx->type.dims, 2, it.dims));
    axis = 1;
  }
  tpu_type(a, &xt);
  tpu_type(b, &it);
  /* As Pallas's take_along_axis: negative indices count from the end. */
  char z[32], n[32], neg[32], up[32], fixed[32];
  snprintf(z, sizeof z, "%s", constant(em, &it, 0.0, 0));
  snprintf(n, sizeof n, "%s", constant(em, &it, 0.0, xt.dims[axis]));
  snprintf(neg, sizeof neg, "%s", tpu_tmp(em));
  tpu_line(em, "%s = arith.cmpi slt, %s, %s : %s", neg, is, z, b);
  snprintf(up, sizeof up, "%s", tpu_tmp(em));
  tpu_line(em, "%s = arith.addi %s, %s : %s", up, is, n, b);
  snprintf(fixed, sizeof fixed, "%s", tpu_tmp(em));
  tsr_type_t ct = with_dtype(&it, TSR_DTYPE_I1);
  tpu_line(em, "%s = arith.select %s, %s, %s : %s, %s", fixed, neg, up, is, tpu_type(c, &ct), b);
  tsr_dtype_t d = xt.dtype;
  char g[512];
  snprintf(g, sizeof g, "%s", flat ? tpu_tmp(em) : result_name(em, op, 0));
  if (bits_of(d) == 32) {
    tpu_line(em, "%s = tpu.dynamic_gather %s[%s] in [%lld] : %s, %s -> %s", g, xs, fixed,
             (long long)axis, a, b, a);
  } else {
    /* The data must have the indices' width ("Gather indices and result
     * have different bitwidths"; i1: "Only 8-, 16- or 32-bit gathers"): it
     * is gathered widened to 32 bits and narrowed back, the same values. */
    char wide[32], wg[32], wt_s[TPU_TYPE_MAX];
    tsr_type_t wt = with_dtype(&xt, is_float(d) ? TSR_DTYPE_F32 : TSR_DTYPE_I32);
    tpu_type(wt_s, &wt);
    if (is_bool(d)) {
      snprintf(wide, sizeof wide, "%s", bits_i32(em, xs, &xt));
    } else {
      snprintf(wide, sizeof wide, "%s", tpu_tmp(em));
      tpu_line(em, "%s = %s %s : %s to %s", wide,
               is_float(d) ? "arith.extf" : is_uint(d) ? "arith.extui" : "arith.extsi", xs, a,
               wt_s);
    }
    snprintf(wg, sizeof wg, "%s", tpu_tmp(em));
    tpu_line(em, "%s = tpu.dynamic_gather %s[%s] in [%lld] : %s, %s -> %s", wg, wide, fixed,
             (long long)axis, wt_s, b, wt_s);
    if (is_bool(d))
      bits_i1(em, g, wg, &xt);
    else
      tpu_line(em, "%s = %s %s : %s to %s", g, is_float(d) ? "arith.truncf" : "arith.trunci", wg,
               wt_s, a);
  }
  if (flat) tpu_set_name(em, op->results[0], reshape_to(em, g, d, 2, xt.dims, 1, x->type.dims));
}

/* ---- Reductions and dot ------------------------------------------------------------------ */

/* vector.multi_reduction of `x` (named xs, of x's shape with dtype xd)
 * over op's axes into `r` of rt's shape with dtype xd. */
static void multi_reduction(tpu_emitter_t *em, const tsr_op_t *op, const char *r, const char *kind,
                            const char *xs, tsr_dtype_t xd, double fi, int64_t ii) {
  const tsr_value_t *x = op->operands[0];
  tsr_type_t xt = with_dtype(&x->type, xd), rt = with_dtype(&op->results[0]->type, xd);
  const char *acc = constant(em, &rt, fi, ii);
  char dims[128] = "", a[TPU_TYPE_MAX], b[TPU_TYPE_MAX];
  size_t at = 0;
  for (uint32_t i = 0; i < op->num_ints && at < sizeof dims; i++)
    at += (size_t)snprintf(dims + at, sizeof dims - at, "%s%lld", i ? ", " : "",
                           (long long)op->ints[i]);
  tpu_line(em, "%s = vector.multi_reduction <%s>, %s, %s [%s] : %s to %s", r, kind, xs, acc, dims,
           tpu_type(a, &xt), tpu_type(b, &rt));
}

/* Mosaic reduces with add, max and min only, and integers only as signed
 * 32-bit (libtpu: "Only sum, maxsi and minsi ... i32 reductions
 * supported"; "Unsupported reduction kind"). i1 and/or become min/max of
 * the bits as i32; u32 max/min flip the sign bit around a signed one. */
void tpu_op_reduce(tpu_emitter_t *em, const tsr_op_t *op) {
  const tsr_value_t *x = op->operands[0];
  const tsr_type_t *rt = &op->results[0]->type;
  tsr_dtype_t d = x->type.dtype;
  bool f = is_float(d);
  const int64_t imin = -2147483647ll - 1, imax = 2147483647ll;
  char a[TPU_TYPE_MAX], b[TPU_TYPE_MAX];
  if (is_bool(d) && (op->opcode == TSR_OP_REDUCE_AND || op->opcode == TSR_OP_REDUCE_OR)) {
    bool is_and = op->opcode == TSR_OP_REDUCE_AND;
    tsr_type_t xi = with_dtype(&x->type, TSR_DTYPE_I32), ri = with_dtype(rt, TSR_DTYPE_I32);
    const char *bits = tpu_tmp(em);
    tpu_line(em, "%s = arith.extui %s : %s to %s", bits, tpu_name(em, x), tpu_type(a, &x->type),
             tpu_type(b, &xi));
    const char *red = tpu_tmp(em);
    char redname[32];
    snprintf(redname, sizeof redname, "%s", red);
    multi_reduction(em, op, redname, is_and ? "minsi" : "maxsi", bits, TSR_DTYPE_I32, 0,
                    is_and ? imax : imin);
    const char *z = constant(em, &ri, 0.0, 0);
    tpu_line(em, "%s = arith.cmpi ne, %s, %s : %s", result_name(em, op, 0), redname, z,
             tpu_type(a, &ri));
    return;
  }
  bool i32 = d == TSR_DTYPE_I32, u32 = d == TSR_DTYPE_U32;
  if (f && bits_of(d) == 16 &&
      (op->opcode == TSR_OP_REDUCE_SUM || op->opcode == TSR_OP_REDUCE_MAX ||
       op->opcode == TSR_OP_REDUCE_MIN)) {
    /* bf16 is reduced extended to f32 and rounded once, as tessera
     * defines reductions (docs/semantics.md); to a scalar, libtpu takes
     * no other ("Only 32-bit scalar vector.extracts supported"). */
    bool max = op->opcode == TSR_OP_REDUCE_MAX, sum = op->opcode == TSR_OP_REDUCE_SUM;
    tsr_type_t xw = with_dtype(&x->type, TSR_DTYPE_F32);
    char wide[32], red[32];
    snprintf(wide, sizeof wide, "%s", tpu_tmp(em));
    tpu_line(em, "%s = arith.extf %s : %s to %s", wide, tpu_name(em, x), tpu_type(a, &x->type),
             tpu_type(b, &xw));
    snprintf(red, sizeof red, "%s", tpu_tmp(em));
    multi_reduction(em, op, red, sum ? "add" : max ? "maximumf" : "minimumf", wide,
                    TSR_DTYPE_F32, sum ? 0.0 : max ? -__builtin_inf() : __builtin_inf(), 0);
    tsr_type_t rw = with_dtype(rt, TSR_DTYPE_F32);
    tpu_line(em, "%s = arith.truncf %s : %s to %s", result_name(em, op, 0), red,
             tpu_type(a, &rw), tpu_type(b, rt));
    return;
  }
  switch (op->opcode) {
  case TSR_OP_REDUCE_SUM:
    if (f || i32 || u32) { /* a sum's bits do not depend on signedness */
      multi_reduction(em, op, result_name(em, op, 0), "add", tpu_name(em, x), d, 0, 0);
      return;
    }
    break;
  case TSR_OP_REDUCE_MAX: case TSR_OP_REDUCE_MIN: {
    bool max = op->opcode == TSR_OP_REDUCE_MAX;
    if (f || i32) {
      multi_reduction(em, op, result_name(em, op, 0),
                      f ? (max ? "maximumf" : "minimumf") : (max ? "maxsi" : "minsi"),
                      tpu_name(em, x), d, max ? -__builtin_inf() : __builtin_inf(),
                      max ? imin : imax);
      return;
    }
    if (u32) {
      const char *sx = constant(em, &x->type, 0.0, imin);
      const char *flipped = tpu_tmp(em);
      char fl[32];
      snprintf(fl, sizeof fl, "%s", flipped);
      tpu_line(em, "%s = arith.xori %s, %s : %s", fl, tpu_name(em, x), sx, tpu_type(a, &x->type));
      const char *red = tpu_tmp(em);
      char rn[32];
      snprintf(rn, sizeof rn, "%s", red);
      multi_reduction(em, op, rn, max ? "maxsi" : "minsi", fl, d, 0, max ? imin : imax);
      const char *sr = constant(em, rt, 0.0, imin);
      tpu_line(em, "%s = arith.xori %s, %s : %s", result_name(em, op, 0), rn, sr, tpu_type(a, rt));
      return;
    }
    break;
  }
  default:
    break;
  }
  tpu_unimplemented(em, op,
                    "Mosaic reduces f32/bf16 and i32 with add, max and min only (and i1 "
                    "with and/or); no %s reduction of %s",
                    tsr_op_table[op->opcode].mnemonic + 7, tsr_dtype_name(d));
}

/* argmax/argmin. Floats: tpu.reduce_index, of f32 (bf16 is extended
 * first, exactly: v5e has no bf16 index reduction, libtpu aborts with
 * "Operation not supported: kVectorMaxIndexReduceBf16", and a bf16 one
 * would give i16). Integers, which tpu.reduce_index does not take ("Only
 * f32 and bf16 input is supported"): the extreme value by
 * vector.multi_reduction over the values widened to i32 (u32 with the sign
 * bit flipped), then the least index holding it: the first, as tessera
 * defines it. A 1-D operand is reduced as a (1, n) block. */
void tpu_op_argreduce(tpu_emitter_t *em, const tsr_op_t *op) {
  const tsr_value_t *x = op->operands[0];
  bool max = op->opcode == TSR_OP_ARGMAX;
  if ((!max && op->opcode != TSR_OP_ARGMIN) || x->type.kind != TSR_TYPE_VECTOR) {
    tpu_unimplemented(em, op, "no TPU index reduction for this operand");
    return;
  }
  tsr_dtype_t d = x->type.dtype;
  int64_t dims[TSR_MAX_RANK], kept[TSR_MAX_RANK], ones[TSR_MAX_RANK];
  uint32_t rank = at_least_2d(&x->type, dims);
  int64_t axis = op->ints[0] + (x->type.rank == 1 ? 1 : 0);
  uint32_t nk = 0;
  for (uint32_t i = 0; i < rank; i++) {
    if ((int64_t)i != axis) kept[nk++] = dims[i];
    ones[i] = (int64_t)i == axis ? 1 : dims[i];
  }
  char a[TPU_TYPE_MAX], b[TPU_TYPE_MAX], c[TPU_TYPE_MAX], xs[512], idx[32];
  snprintf(xs, sizeof xs, "%s",
           reshape_to(em, tpu_name(em, x), d, x->type.rank, x->type.dims, rank, dims));
  tpu_vector(b, TSR_DTYPE_I32, nk, kept);
  if (is_float(d)) {
    tpu_vector(a, TSR_DTYPE_F32, rank, dims);
    if (d != TSR_DTYPE_F32) {
      const char *e = tpu_tmp(em);
      tpu_line(em, "%s = arith.extf %s : %s to %s", e, xs, tpu_vector(c, d, rank, dims), a);
      snprintf(xs, sizeof xs, "%s", e);
    }
    snprintf(idx, sizeof idx, "%s", tpu_tmp(em));
    tpu_line(em, "%s = tpu.reduce_index %s {axis = %lld : i32, kind = #tpu.reduction_kind<%s>} : "
                 "%s -> %s",
             idx, xs, (long long)axis, max ? "arg_max" : "arg_min", a, b);
  } else {
    const int64_t imin = -2147483647ll - 1, imax = 2147483647ll;
    tsr_type_t wt = {.kind = TSR_TYPE_VECTOR, .dtype = TSR_DTYPE_I32, .rank = rank};
    memcpy(wt.dims, dims, sizeof(int64_t) * rank);
    tpu_vector(a, TSR_DTYPE_I32, rank, dims);
    if (bits_of(d) < 32) {
      const char *e = tpu_tmp(em);
      tpu_line(em, "%s = %s %s : %s to %s", e, is_uint(d) ? "arith.extui" : "arith.extsi", xs,
               tpu_vector(c, d, rank, dims), a);
      snprintf(xs, sizeof xs, "%s", e);
    } else if (is_uint(d)) { /* orders u32 as signed i32 */
      char sign[32];
      snprintf(sign, sizeof sign, "%s", constant(em, &wt, 0.0, imin));
      const char *e = tpu_tmp(em);
      tpu_line(em, "%s = arith.xori %s, %s : %s", e, xs, sign, a);
      snprintf(xs, sizeof xs, "%s", e);
    }
    char acc[32], ext[32], eq[32], io[32], big[32], sel[32];
    snprintf(acc, sizeof acc, "%s", tpu_tmp(em));
    tpu_line(em, "%s = arith.constant dense<%lld> : %s", acc, (long long)(max ? imin : imax), b);
    snprintf(ext, sizeof ext, "%s", tpu_tmp(em));
    tpu_line(em, "%s = vector.multi_reduction <%s>, %s, %s [%lld] : %s to %s", ext,
             max ? "maxsi" : "minsi", xs, acc, (long long)axis, a, b);
    const char *k1 = reshape_to(em, ext, TSR_DTYPE_I32, nk, kept, rank, ones);
    const char *bc = tpu_tmp(em);
    tpu_line(em, "%s = vector.broadcast %s : %s to %s", bc, k1,
             tpu_vector(c, TSR_DTYPE_I32, rank, ones), a);
    snprintf(eq, sizeof eq, "%s", tpu_tmp(em));
    tpu_line(em, "%s = arith.cmpi eq, %s, %s : %s", eq, xs, bc, a);
    snprintf(io, sizeof io, "%s", tpu_tmp(em));
    tpu_line(em, "%s = tpu.iota {dimensions = array<i32: %lld>} : %s", io, (long long)axis, a);
    snprintf(big, sizeof big, "%s", constant(em, &wt, 0.0, imax));
    snprintf(sel, sizeof sel, "%s", tpu_tmp(em));
    tpu_line(em, "%s = arith.select %s, %s, %s : %s, %s", sel, eq, io, big,
             tpu_vector(c, TSR_DTYPE_I1, rank, dims), a);
    snprintf(acc, sizeof acc, "%s", tpu_tmp(em));
    tpu_line(em, "%s = arith.constant dense<%lld> : %s", acc, (long long)imax, b);
    snprintf(idx, sizeof idx, "%s", tpu_tmp(em));
    tpu_line(em, "%s = vector.multi_reduction <minsi>, %s, %s [%lld] : %s to %s", idx, sel, acc,
             (long long)axis, a, b);
  }
  int64_t rd[TSR_MAX_RANK];
  uint32_t rr = value_dims(&op->results[0]->type, rd);
  tpu_set_name(em, op->results[0], reshape_to(em, idx, TSR_DTYPE_I32, nk, kept, rr, rd));
}

void tpu_op_dot(tpu_emitter_t *em, const tsr_op_t *op) {
  const tsr_value_t *x = op->operands[0], *y = op->operands[1];
  const tsr_value_t *acc = op->num_operands > 2 ? op->operands[2] : NULL;
  const tsr_type_t *rt = &op->results[0]->type;
  if (x->type.rank != 2 || y->type.rank != 2) {
    tpu_unimplemented(em, op, "only 2-D dots are emitted");
    return;
  }
  tsr_dtype_t in = x->type.dtype;
  if (!is_float(in) && bits_of(in) != 8) {
    /* libtpu: "Bad lhs/rhs type: 'vector<..xi32>'" */
    tpu_unimplemented(em, op, "the MXU multiplies floats and 8-bit integers, not %s",
                      tsr_dtype_name(in));
    return;
  }
  if (!is_float(rt->dtype) && bits_of(rt->dtype) != 32) {
    tpu_unimplemented(em, op, "an integer dot accumulates in 32 bits on TPU, not %s",
                      tsr_dtype_name(rt->dtype));
    return;
  }
  bool trans = (op->flags & TSR_OPF_TRANSPOSE_RHS) != 0;
  char a[TPU_TYPE_MAX], b[TPU_TYPE_MAX], c[TPU_TYPE_MAX], d[TPU_TYPE_MAX];
  /* The MXU accumulates in 32 bits ("Expected matmul acc to be 32-bit"):
   * a 16-bit float result is the f32 product rounded once, as Pallas's
   * preferred_element_type. As Pallas: a zero accumulator, then the add
   * of the tessera accumulator in the result dtype. */
  bool narrow = is_float(rt->dtype) && bits_of(rt->dtype) == 16;
  tsr_type_t mt = narrow ? with_dtype(rt, TSR_DTYPE_F32) : *rt;
  const char *zero = constant(em, &mt, 0.0, 0);
  char p[32];
  snprintf(p, sizeof p, "%s", (acc || narrow) ? tpu_tmp(em) : result_name(em, op, 0));
  tpu_line(em,
           "%s = tpu.matmul %s, %s, %s {dimension_numbers = #tpu.dot_dimension_numbers<[1], "
           "[%d], [0], [%d], [0, 0, 1, %d], [], []>, transpose_lhs_hint = false} : %s, %s, %s -> %s",
           p, tpu_name(em, x), tpu_name(em, y), zero, trans ? 1 : 0, trans ? 0 : 1, trans ? 0 : 1,
           tpu_type(a, &x->type), tpu_type(b, &y->type), tpu_type(c, &mt), c);
  tpu_type(d, rt);
  if (narrow) {
    const char *r = acc ? tpu_tmp(em) : result_name(em, op, 0);
    tpu_line(em, "%s = arith.truncf %s : %s to %s", r, p, c, d);
    snprintf(p, sizeof p, "%s", r);
  }
  if (acc)
    tpu_line(em, "%s = %s %s, %s : %s", result_name(em, op, 0),
             is_float(rt->dtype) ? "arith.addf" : "arith.addi", tpu_name(em, acc), p, d);
}

/* ---- Control flow --------------------------------------------------------------------------- */

/* Some blocks cross region boundaries (the values a loop carries, the
 * results of if and scoped) in another form, restored inside and after:
 * i1 blocks as i32, compared with 0 (libtpu cannot carry an i1 block
 * through a loop: v6e "failed to legalize operation 'scf.yield'", v5e
 * aborts the process in its layout inference), and 1-D 8- and 16-bit
 * blocks as (1, n) ones (v5e aborts the process on a loop carrying a
 * 1-D u16 or bf16 block it adds to: "Check failed: arr.size() >=
 * layout_rank(implicit_dim)"). */
static bool crosses_as_i32(const tsr_type_t *t) {
  return t->kind == TSR_TYPE_VECTOR && is_bool(t->dtype);
}

static bool crosses_as_2d(const tsr_type_t *t) {
  return t->kind == TSR_TYPE_VECTOR && t->rank == 1 && !is_bool(t->dtype) &&
         bits_of(t->dtype) < 32;
}

/* The type a value has where it crosses a region boundary. */
static const char *crossing_type(char *buf, const tsr_type_t *t) {
  tsr_type_t ct = with_dtype(t, crosses_as_i32(t) ? TSR_DTYPE_I32 : t->dtype);
  if (crosses_as_2d(t)) ct.rank = at_least_2d(t, ct.dims);
  return tpu_type(buf, &ct);
}

/* The name of `v` as it crosses a region boundary, emitting the change. */
static const char *crossing_value(tpu_emitter_t *em, const tsr_value_t *v) {
  const tsr_type_t *t = &v->type;
  if (crosses_as_i32(t)) return bits_i32(em, tpu_name(em, v), t);
  if (crosses_as_2d(t)) {
    int64_t d2[2];
    at_least_2d(t, d2);
    return reshape_to(em, tpu_name(em, v), t->dtype, 1, t->dims, 2, d2);
  }
  return tpu_name(em, v);
}

/* `v`, which crossed a boundary in its crossing form under its current
 * name, in its own type. */
static void arrived(tpu_emitter_t *em, const tsr_value_t *v) {
  const tsr_type_t *t = &v->type;
  char crossed[64];
  snprintf(crossed, sizeof crossed, "%s", tpu_name(em, v));
  if (crosses_as_i32(t)) {
    char r[512];
    snprintf(r, sizeof r, "%%%s", v->name);
    bits_i1(em, r, crossed, t);
    tpu_set_name(em, v, r);
  } else if (crosses_as_2d(t)) {
    int64_t d2[2];
    at_least_2d(t, d2);
    tpu_set_name(em, v, reshape_to(em, crossed, t->dtype, 2, d2, 1, t->dims));
  }
}

/* Names the results of a control op: "%name" for one, "%$N#i" for several
 * (MLIR's multi-result form); returns the text before " = ", "" for none.
 * A result that crosses in another form gets a temporary name, restored
 * after the op by control_results_arrived. */
static void control_results(tpu_emitter_t *em, const tsr_op_t *op, char *lhs, size_t n) {
  lhs[0] = 0;
  if (op->num_results == 0) return;
  if (op->num_results == 1) {
    const tsr_type_t *rt = &op->results[0]->type;
    if (crosses_as_i32(rt) || crosses_as_2d(rt)) {
      const char *t = tpu_tmp(em);
      tpu_set_name(em, op->results[0], t);
      snprintf(lhs, n, "%s = ", t);
    } else {
      snprintf(lhs, n, "%s = ", result_name(em, op, 0));
    }
    return;
  }
  char base[32];
  snprintf(base, sizeof base, "%s", tpu_tmp(em));
  snprintf(lhs, n, "%s:%u = ", base, op->num_results);
  for (uint32_t i = 0; i < op->num_results; i++) {
    char r[48];
    snprintf(r, sizeof r, "%s#%u", base, i);
    tpu_set_name(em, op->results[i], r);
  }
}

/* After a control op: its results that left it in another form. */
static void control_results_arrived(tpu_emitter_t *em, const tsr_op_t *op) {
  for (uint32_t i = 0; i < op->num_results && TPU_OK(em); i++) arrived(em, op->results[i]);
}

static void type_list(tpu_emitter_t *em, tsr_strbuf_t *sb, tsr_value_t *const *vals, uint32_t n) {
  (void)em;
  char ty[TPU_TYPE_MAX];
  for (uint32_t i = 0; i < n; i++)
    tsr_strbuf_printf(sb, "%s%s", i ? ", " : "", crossing_type(ty, &vals[i]->type));
}

/* Names a region's arguments: their tessera names, or a temporary for an
 * block that crosses in another form (emit_body restores it). */
static void name_args(tpu_emitter_t *em, const tsr_region_t *r, uint32_t first) {
  for (uint32_t i = first; i < r->num_args; i++) {
    char buf[512];
    const tsr_type_t *t = &r->args[i]->type;
    if (crosses_as_i32(t) || crosses_as_2d(t))
      snprintf(buf, sizeof buf, "%s", tpu_tmp(em));
    else
      snprintf(buf, sizeof buf, "%%%s", r->args[i]->name);
    tpu_set_name(em, r->args[i], buf);
  }
}

/* An if with block results: MLIR's canonicalizer turns an scf.if whose
 * yields are defined outside it into an arith.select on the scalar
 * condition, and libtpu cannot lay out a select of blocks on a scalar
 * ("Null layout / non-vector operand in elementwise operation"). Mosaic
 * fixes such selects in its own canonicalization, but it folds again
 * after that (x % x of 16-bit data to 0, say), so an if whose branches
 * only become constants late is still turned into one, for any dtype.
 * Stores are never folded away: each block result goes through a VMEM
 * buffer of a tpu.region (as `scoped` buffers do), stored by the
 * branches and loaded after the if, which keeps only its scalar results.
 * The cost: a store and a load of each block. */
typedef struct tpu_if_frame {
  const tsr_op_t *op;
  uint32_t buffers;          /* result i (a block) is the buffer %$<buffers + i> */
  char zero[32];             /* the index 0 of the buffers' views */
  struct tpu_if_frame *outer;
} tpu_if_frame_t;

static const tpu_if_frame_t *if_frame_of(const tpu_emitter_t *em, const tsr_op_t *op) {
  for (const tpu_if_frame_t *f = em->ifs; f; f = f->outer)
    if (f->op == op) return f;
  return NULL;
}

static bool is_block(const tsr_value_t *v) { return v->type.kind == TSR_TYPE_VECTOR; }

/* The VMEM buffer holding a block result in its crossing form. */
static const char *if_buffer_type(char *buf, const tsr_value_t *v) {
  tsr_type_t t = with_dtype(&v->type, crosses_as_i32(&v->type) ? TSR_DTYPE_I32 : v->type.dtype);
  if (crosses_as_2d(&v->type)) t.rank = at_least_2d(&v->type, t.dims);
  t.kind = TSR_TYPE_REF;
  t.space = TSR_SPACE_VMEM;
  return tpu_type(buf, &t);
}

static const char *zero_indices(char *buf, size_t n, const char *zero, const tsr_value_t *v) {
  uint32_t rank = crosses_as_2d(&v->type) ? 2 : v->type.rank;
  size_t at = 0;
  buf[0] = 0;
  for (uint32_t d = 0; d < rank && at < n; d++)
    at += (size_t)snprintf(buf + at, n - at, "%s%s", d ? ", " : "", zero);
  return buf;
}

/* A branch's yield: its blocks stored, its scalars yielded. */
static void if_yield(tpu_emitter_t *em, const tpu_if_frame_t *f, const tsr_op_t *yield) {
  tsr_strbuf_t vals, types;
  tsr_strbuf_initialize(&vals);
  tsr_strbuf_initialize(&types);
  char ty[TPU_TYPE_MAX], mt[TPU_TYPE_MAX], idx[256];
  for (uint32_t i = 0; i < yield->num_operands; i++) {
    const tsr_value_t *v = yield->operands[i];
    char val[512];
    snprintf(val, sizeof val, "%s", crossing_value(em, v));
    if (is_block(v)) {
      tpu_line(em, "tpu.vector_store %%$%u[%s], %s {strides = array<i32>} : %s, %s,",
               f->buffers + i, zero_indices(idx, sizeof idx, f->zero, v), val,
               if_buffer_type(mt, v), crossing_type(ty, &v->type));
      continue;
    }
    tsr_strbuf_printf(&vals, "%s%s", vals.size ? ", " : "", val);
    tsr_strbuf_printf(&types, "%s%s", types.size ? ", " : "", crossing_type(ty, &v->type));
  }
  if (vals.size) tpu_line(em, "scf.yield %s : %s", SB(vals), SB(types));
  if (vals.failed || types.failed) tpu_fail(em, TSR_OOM());
  tsr_strbuf_deinitialize(&vals);
  tsr_strbuf_deinitialize(&types);
}

/* The terminator of a region, read by its parent op. */
void tpu_op_terminator(tpu_emitter_t *em, const tsr_op_t *op) {
  const tsr_op_t *parent = op->parent ? op->parent->parent_op : NULL;
  tsr_strbuf_t vals, types;
  tsr_strbuf_initialize(&vals);
  tsr_strbuf_initialize(&types);
  uint32_t first = op->opcode == TSR_OP_CONDITION ? 1 : 0;
  for (uint32_t i = first; i < op->num_operands; i++)
    tsr_strbuf_printf(&vals, "%s%s", i > first ? ", " : "",
                      parent ? crossing_value(em, op->operands[i]) : tpu_name(em, op->operands[i]));
  type_list(em, &types, op->operands + first, op->num_operands - first);
  const char *v = vals.data ? vals.data : "", *t = types.data ? types.data : "";
  bool any = op->num_operands > first;
  if (!parent) { /* an index map: its transform function returns */
    if (em->in_transform) tpu_line(em, "return %s : %s", v, t);
  } else if (op->opcode == TSR_OP_CONDITION) {
    /* scf.condition forwards the carried values (the condition region's
     * arguments) to the body, and gives them as the results at the end. */
    tsr_strbuf_t fw, ft;
    tsr_strbuf_initialize(&fw);
    tsr_strbuf_initialize(&ft);
    const tsr_region_t *r = op->parent;
    for (uint32_t i = 0; i < r->num_args; i++)
      tsr_strbuf_printf(&fw, "%s%s", i ? ", " : "", crossing_value(em, r->args[i]));
    type_list(em, &ft, r->args, r->num_args);
    if (r->num_args)
      tpu_line(em, "scf.condition(%s) %s : %s", tpu_name(em, op->operands[0]), SB(fw), SB(ft));
    else
      tpu_line(em, "scf.condition(%s)", tpu_name(em, op->operands[0]));
    if (fw.failed || ft.failed) tpu_fail(em, TSR_OOM());
    tsr_strbuf_deinitialize(&fw);
    tsr_strbuf_deinitialize(&ft);
  } else if (parent->opcode == TSR_OP_SCOPED) {
    tpu_line(em, any ? "tpu.yield %s : %s" : "tpu.yield", v, t);
  } else if (parent->opcode == TSR_OP_IF && if_frame_of(em, parent)) {
    if_yield(em, if_frame_of(em, parent), op);
  } else if (any || parent->opcode == TSR_OP_WHILE) {
    tpu_line(em, any ? "scf.yield %s : %s" : "scf.yield", v, t);
  }
  if (vals.failed || types.failed) tpu_fail(em, TSR_OOM());
  tsr_strbuf_deinitialize(&vals);
  tsr_strbuf_deinitialize(&types);
}

static void emit_body(tpu_emitter_t *em, const tsr_region_t *r, bool need_terminator,
                      const char *terminator) {
  em->indent++;
  for (uint32_t i = 0; i < r->num_args && TPU_OK(em); i++) arrived(em, r->args[i]);
  tpu_emit_region(em, r);
  const tsr_op_t *t = tpu_terminator(r);
  if (TPU_OK(em)) {
    if (t) tpu_op_terminator(em, t);
    else if (need_terminator) tpu_line(em, "%s", terminator);
  }
  em->indent--;
}

void tpu_op_for(tpu_emitter_t *em, const tsr_op_t *op) {
  tsr_for_view_t v;
  if (!tsr_opview_for(op, &v)) {
    tpu_unimplemented(em, op, "malformed for");
    return;
  }
  char lhs[64];
  name_args(em, v.body, 0);
  tsr_strbuf_t iter, types;
  tsr_strbuf_initialize(&iter);
  tsr_strbuf_initialize(&types);
  for (uint32_t i = 0; i < v.num_carried; i++)
    tsr_strbuf_printf(&iter, "%s%s = %s", i ? ", " : "", tpu_name(em, v.carried[i]),
                      crossing_value(em, v.inits[i]));
  type_list(em, &types, v.carried, v.num_carried);
  /* libtpu's range analysis fails on a loop from a negative constant
   * ("RET_CHECK failure (.../range_simplifier.cc:696) range.IsValid()"):
   * such a loop counts from 0 to hi - lo, its variable being j + lo (the
   * same values, unless hi - lo overflows i32: 2^31 iterations). */
  const tsr_op_t *lo_def = v.lo->def;
  bool shifted = lo_def && lo_def->opcode == TSR_OP_CONST && lo_def->literal.i < 0;
  char iv[512], lo[512], hi[512];
  snprintf(iv, sizeof iv, "%s", tpu_name(em, v.iv));
  snprintf(lo, sizeof lo, "%s", tpu_name(em, v.lo));
  snprintf(hi, sizeof hi, "%s", tpu_name(em, v.hi));
  if (shifted) {
    const char *n = tpu_tmp(em);
    tpu_line(em, "%s = arith.subi %s, %s : i32", n, hi, lo);
    snprintf(hi, sizeof hi, "%s", n);
    snprintf(lo, sizeof lo, "%s", i32_const(em, 0));
    snprintf(iv, sizeof iv, "%s", tpu_tmp(em));
  }
  control_results(em, op, lhs, sizeof lhs);
  if (v.num_carried)
    tpu_line(em, "%sscf.for %s = %s to %s step %s iter_args(%s) -> (%s) : i32 {", lhs, iv, lo, hi,
             tpu_name(em, v.step), SB(iter), SB(types));
  else
    tpu_line(em, "scf.for %s = %s to %s step %s : i32 {", iv, lo, hi, tpu_name(em, v.step));
  if (iter.failed || types.failed) tpu_fail(em, TSR_OOM());
  tsr_strbuf_deinitialize(&iter);
  tsr_strbuf_deinitialize(&types);
  if (shifted) {
    em->indent++;
    tpu_line(em, "%s = arith.addi %s, %s : i32", tpu_name(em, v.iv), iv, tpu_name(em, v.lo));
    em->indent--;
  }
  emit_body(em, v.body, false, "");
  tpu_line(em, "}");
  control_results_arrived(em, op);
}

void tpu_op_while(tpu_emitter_t *em, const tsr_op_t *op) {
  tsr_while_view_t v;
  if (!tsr_opview_while(op, &v)) {
    tpu_unimplemented(em, op, "malformed while");
    return;
  }
  char lhs[64];
  name_args(em, v.cond, 0);
  tsr_strbuf_t init, types;
  tsr_strbuf_initialize(&init);
  tsr_strbuf_initialize(&types);
  for (uint32_t i = 0; i < v.num_inits; i++)
    tsr_strbuf_printf(&init, "%s%s = %s", i ? ", " : "", tpu_name(em, v.cond->args[i]),
                      crossing_value(em, v.inits[i]));
  type_list(em, &types, v.cond->args, v.cond->num_args);
  control_results(em, op, lhs, sizeof lhs);
  const char *ts = types.data ? types.data : "";
  tpu_line(em, "%sscf.while (%s) : (%s) -> (%s) {", lhs, init.data ? init.data : "", ts, ts);
  emit_body(em, v.cond, false, "");
  /* The body's block arguments: the same names in a sibling region. */
  name_args(em, v.body, 0);
  tsr_strbuf_t args;
  tsr_strbuf_initialize(&args);
  char ty[TPU_TYPE_MAX];
  for (uint32_t i = 0; i < v.body->num_args; i++)
    tsr_strbuf_printf(&args, "%s%s: %s", i ? ", " : "", tpu_name(em, v.body->args[i]),
                      crossing_type(ty, &v.body->args[i]->type));
  tpu_line(em, "} do {");
  tpu_line(em, "^bb0(%s):", args.data ? args.data : "");
  emit_body(em, v.body, true, "scf.yield");
  tpu_line(em, "}");
  control_results_arrived(em, op);
  if (init.failed || types.failed || args.failed) tpu_fail(em, TSR_OOM());
  tsr_strbuf_deinitialize(&init);
  tsr_strbuf_deinitialize(&types);
  tsr_strbuf_deinitialize(&args);
}

/* An if with block results (see tpu_if_frame_t):
 *   %r:n = "tpu.region"() ({
 *     %$b = memref.alloca() : memref<..>          one per block result
 *     %$s:k = scf.if %c -> (scalars) { ... tpu.vector_store %$b ... scf.yield }
 *     %$l = vector.load %$b[..]
 *     tpu.yield (the results in order)
 *   }) : () -> (..) */
static void emit_if_through_vmem(tpu_emitter_t *em, const tsr_op_t *op, const tsr_if_view_t *v) {
  tpu_if_frame_t frame = {.op = op, .outer = em->ifs};
  char lhs[64], ty[TPU_TYPE_MAX], mt[TPU_TYPE_MAX], idx[256];
  control_results(em, op, lhs, sizeof lhs);
  tsr_strbuf_t types, scalar_types, results;
  tsr_strbuf_initialize(&types);
  tsr_strbuf_initialize(&scalar_types);
  tsr_strbuf_initialize(&results);
  type_list(em, &types, op->results, op->num_results);
  tpu_line(em, "%s\"tpu.region\"() ({", lhs);
  em->indent++;
  frame.buffers = em->next_tmp;
  em->next_tmp += op->num_results;
  uint32_t num_scalars = 0;
  for (uint32_t i = 0; i < op->num_results; i++) {
    if (is_block(op->results[i]))
      tpu_line(em, "%%$%u = memref.alloca() : %s", frame.buffers + i,
               if_buffer_type(mt, op->results[i]));
    else
      tsr_strbuf_printf(&scalar_types, "%s%s", num_scalars++ ? ", " : "",
                        crossing_type(ty, &op->results[i]->type));
  }
  snprintf(frame.zero, sizeof frame.zero, "%s", index_const(em, 0));
  char scalars[32] = "";
  if (num_scalars) {
    snprintf(scalars, sizeof scalars, "%s", tpu_tmp(em));
    if (num_scalars == 1)
      tpu_line(em, "%s = scf.if %s -> (%s) {", scalars, tpu_name(em, v->cond), SB(scalar_types));
    else
      tpu_line(em, "%s:%u = scf.if %s -> (%s) {", scalars, num_scalars, tpu_name(em, v->cond),
               SB(scalar_types));
  } else {
    tpu_line(em, "scf.if %s {", tpu_name(em, v->cond));
  }
  em->ifs = &frame;
  emit_body(em, v->then_region, false, "");
  tpu_line(em, "} else {");
  emit_body(em, v->else_region, false, "");
  em->ifs = frame.outer;
  tpu_line(em, "}");
  for (uint32_t i = 0, s = 0; i < op->num_results; i++) {
    const tsr_value_t *r = op->results[i];
    if (is_block(r)) {
      const char *l = tpu_tmp(em);
      tpu_line(em, "%s = vector.load %%$%u[%s] : %s, %s", l, frame.buffers + i,
               zero_indices(idx, sizeof idx, frame.zero, r), if_buffer_type(mt, r),
               crossing_type(ty, &r->type));
      tsr_strbuf_printf(&results, "%s%s", i ? ", " : "", l);
    } else if (num_scalars == 1) {
      tsr_strbuf_printf(&results, "%s%s", i ? ", " : "", scalars);
    } else {
      tsr_strbuf_printf(&results, "%s%s#%u", i ? ", " : "", scalars, s++);
    }
  }
  tpu_line(em, "tpu.yield %s : %s", SB(results), SB(types));
  em->indent--;
  tpu_line(em, "}) : () -> (%s)", SB(types));
  control_results_arrived(em, op);
  if (types.failed || scalar_types.failed || results.failed) tpu_fail(em, TSR_OOM());
  tsr_strbuf_deinitialize(&types);
  tsr_strbuf_deinitialize(&scalar_types);
  tsr_strbuf_deinitialize(&results);
}

void tpu_op_if(tpu_emitter_t *em, const tsr_op_t *op) {
  tsr_if_view_t v;
  if (!tsr_opview_if(op, &v)) {
    tpu_unimplemented(em, op, "malformed if");
    return;
  }
  for (uint32_t i = 0; i < op->num_results; i++)
    if (is_block(op->results[i])) {
      emit_if_through_vmem(em, op, &v);
      return;
    }
  char lhs[64];
  control_results(em, op, lhs, sizeof lhs);
  tsr_strbuf_t types;
  tsr_strbuf_initialize(&types);
  type_list(em, &types, op->results, op->num_results);
  if (op->num_results)
    tpu_line(em, "%sscf.if %s -> (%s) {", lhs, tpu_name(em, v.cond), SB(types));
  else
    tpu_line(em, "scf.if %s {", tpu_name(em, v.cond));
  emit_body(em, v.then_region, false, "");
  bool has_else = op->num_results || (v.else_region && v.else_region->first);
  if (has_else) {
    tpu_line(em, "} else {");
    emit_body(em, v.else_region, false, "");
  }
  tpu_line(em, "}");
  control_results_arrived(em, op);
  if (types.failed) tpu_fail(em, TSR_OOM());
  tsr_strbuf_deinitialize(&types);
}

void tpu_op_scoped(tpu_emitter_t *em, const tsr_op_t *op) {
  tsr_scoped_view_t v;
  if (!tsr_opview_scoped(op, &v)) {
    tpu_unimplemented(em, op, "malformed scoped");
    return;
  }
  for (uint32_t i = 0; i < v.num_buffers; i++)
    if (v.buffers[i]->type.kind != TSR_TYPE_REF) {
      tpu_unimplemented(em, op, "scoped semaphores are not emitted yet");
      return;
    }
  char lhs[64];
  control_results(em, op, lhs, sizeof lhs);
  tsr_strbuf_t types;
  tsr_strbuf_initialize(&types);
  type_list(em, &types, op->results, op->num_results);
  tpu_line(em, "%s\"tpu.region\"() ({", lhs);
  em->indent++;
  name_args(em, v.body, 0);
  char ty[TPU_TYPE_MAX];
  for (uint32_t i = 0; i < v.num_buffers; i++)
    tpu_line(em, "%s = memref.alloca() : %s", tpu_name(em, v.buffers[i]),
             tpu_type(ty, &v.buffers[i]->type));
  em->indent--;
  emit_body(em, v.body, true, "tpu.yield");
  tpu_line(em, "}) : () -> (%s)", types.data ? types.data : "");
  control_results_arrived(em, op);
  if (types.failed) tpu_fail(em, TSR_OOM());
  tsr_strbuf_deinitialize(&types);
}

/* ---- Debugging ------------------------------------------------------------------------------ */

/* Pallas drops debug prints on TPU unless asked (docs/tpu.md): so does
 * tessera, leaving a comment. */
void tpu_op_print(tpu_emitter_t *em, const tsr_op_t *op) {
  tpu_line(em, "// print dropped on TPU");
}

void tpu_op_assert(tpu_emitter_t *em, const tsr_op_t *op) {
  tpu_line(em, "// assert dropped on TPU (no runtime checks in Mosaic kernels)");
}

/* ---- DMAs and semaphores ------------------------------------------------------------------------ */

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
  if (v.device.slot >= 0) snprintf(devpart, sizeof devpart, " device_id(%s)", tpu_name(em, v.device.value));
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
    at += (size_t)snprintf(extra + at, sizeof extra - at, " device_id %s", tpu_name(em, v.device.value));
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
  tpu_line(em, "%s = tpu.sem_read %s : %s -> i32", result_name(em, op, 0), s, ty);
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
  const char *one = i32_const(em, 1);
  char me[32];
  snprintf(me, sizeof me, "%s", core_index(em));
  for (uint32_t c = 0; c < cores; c++) {
    const char *cid = i32_const(em, c);
    const char *ne = tpu_tmp(em);
    tpu_line(em, "%s = arith.cmpi ne, %s, %s : i32", ne, me, cid);
    tpu_line(em, "scf.if %s {", ne);
    tpu_line(em, "  tpu.sem_signal %s, %s core_id %s : %s", s, one, cid, ty);
    tpu_line(em, "}");
  }
  const char *n = i32_const(em, cores - 1);
  tpu_line(em, "tpu.sem_wait %s, %s : %s", s, n, ty);
}
