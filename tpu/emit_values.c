/* What several op files of the TPU emitter write (tpu/emit_internal.h):
 * result names, literals and constants, i1 blocks moved as i32, selects,
 * compares, conversions, reshapes between block shapes, and the core
 * index. */
#include <inttypes.h>
#include <stdio.h>

#include "tpu/emit_internal.h"

/* Names result `i` of `op` "%<tessera name>" and returns it. */
const char *tpu_result_name(tpu_emitter_t *em, const tsr_op_t *op, uint32_t i) {
  const tsr_value_t *r = op->results[i];
  char buf[512];
  snprintf(buf, sizeof buf, "%%%s", r->name);
  tpu_set_name(em, r, buf);
  return tpu_name(em, r);
}

/* The literal of `dtype` holding the number `value` (integers) or `fvalue`
 * (floats): floats as their exact bit pattern in hex. */
void tpu_literal(char *buf, size_t n, tsr_dtype_t dtype, double fvalue, int64_t value) {
  if (is_float(dtype)) {
    float f = (float)fvalue;
    if (dtype == TSR_DTYPE_F32)
      snprintf(buf, n, "0x%08" PRIX32, tsr_f32_bits(f));
    else if (dtype == TSR_DTYPE_BF16)
      snprintf(buf, n, "0x%04X", (unsigned)tsr_f32_to_bf16(f));
    else if (dtype == TSR_DTYPE_F8E4M3FN)
      snprintf(buf, n, "0x%02X", (unsigned)tsr_f32_to_f8e4m3fn(f));
    else if (dtype == TSR_DTYPE_F8E5M2)
      snprintf(buf, n, "0x%02X", (unsigned)tsr_f32_to_f8e5m2(f));
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
const char *tpu_constant(tpu_emitter_t *em, const tsr_type_t *type, double f, int64_t i) {
  char lit[64], ty[TPU_TYPE_MAX];
  tpu_literal(lit, sizeof lit, type->dtype, f, i);
  const char *t = tpu_tmp(em);
  if (type->kind == TSR_TYPE_VECTOR)
    tpu_line(em, "%s = arith.constant dense<%s> : %s", t, lit, tpu_type(ty, type));
  else if (type->dtype == TSR_DTYPE_I1) /* `true` is typed already */
    tpu_line(em, "%s = arith.constant %s", t, lit);
  else
    tpu_line(em, "%s = arith.constant %s : %s", t, lit, tpu_elem(type->dtype));
  return t;
}

/* libtpu moves i1 blocks badly: a select, broadcast or concatenation of
 * them fails ("Invalid input layout" on the extension MLIR rewrites a
 * select of i1 into, "changeBitwidth when src bitwidth and dst bitwidth
 * differs too much", "Invalid vector register cast"). Such ops move the
 * bits as i32 (tpu_bits_i32), and the result is compared with 0 (tpu_bits_i1). */
const char *tpu_bits_i32(tpu_emitter_t *em, const char *v, const tsr_type_t *t) {
  char a[TPU_TYPE_MAX], b[TPU_TYPE_MAX];
  tsr_type_t wt = with_dtype(t, TSR_DTYPE_I32);
  const char *r = tpu_tmp(em);
  tpu_line(em, "%s = arith.extui %s : %s to %s", r, v, tpu_type(a, t), tpu_type(b, &wt));
  return r;
}

void tpu_bits_i1(tpu_emitter_t *em, const char *r, const char *v, const tsr_type_t *t) {
  char a[TPU_TYPE_MAX], vn[32];
  tsr_type_t wt = with_dtype(t, TSR_DTYPE_I32);
  snprintf(vn, sizeof vn, "%s", v);
  const char *z = tpu_constant(em, &wt, 0.0, 0);
  tpu_line(em, "%s = arith.cmpi ne, %s, %s : %s", r, vn, z, tpu_type(a, &wt));
}

const char *tpu_index_const(tpu_emitter_t *em, int64_t v) {
  const char *t = tpu_tmp(em);
  tpu_line(em, "%s = arith.constant %lld : index", t, (long long)v);
  return t;
}

const char *tpu_i32_const(tpu_emitter_t *em, int64_t v) {
  const char *t = tpu_tmp(em);
  tpu_line(em, "%s = arith.constant %lld : i32", t, (long long)v);
  return t;
}

const char *tpu_grid_extent(tpu_emitter_t *em, uint32_t g) {
  if (!em->kernel->grid_bound[g]) return tpu_i32_const(em, em->kernel->grid[g]);
  const char *t = tpu_tmp(em);
  tpu_line(em, "%s = tpu.iteration_bound %u : i32", t, g);
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
void tpu_select(tpu_emitter_t *em, const char *r, const char *c, bool vector_cond,
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
uint32_t tpu_value_dims(const tsr_type_t *t, int64_t *dims) {
  if (t->kind != TSR_TYPE_VECTOR) return 0;
  memcpy(dims, t->dims, sizeof(int64_t) * t->rank);
  return t->rank;
}

/* Reshapes `name` of type `from` (a vector or scalar) to `to`, emitting
 * vector.shape_cast / vector.extract / vector.broadcast as needed. */
const char *tpu_reshape_to(tpu_emitter_t *em, const char *name, tsr_dtype_t dtype,
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

/* Mosaic has no 1-D form of some ops (tpu.iota: "iota rank below 2D
 * unsupported"; tpu.dynamic_rotate: "Unsupported 1D shape";
 * tpu.reduce_index: no scalar result): they take a (1, n) block, as
 * Pallas's reduce_index lowering does. Writes (1, n) to dims for a 1-D
 * type and returns 2, else copies the shape. */
uint32_t tpu_at_least_2d(const tsr_type_t *t, int64_t *dims) {
  if (t->rank == 1) {
    dims[0] = 1;
    dims[1] = t->dims[0];
    return 2;
  }
  return tpu_value_dims(t, dims);
}

bool tpu_compare(tpu_emitter_t *em, const char *r, tsr_opcode_t opc, const char *a,
                 const char *b, const tsr_type_t *operand_type) {
  char ty[TPU_TYPE_MAX];
  bool f = is_float(operand_type->dtype);
  if (opc == TSR_OP_NE && f) {
    /* libtpu has no `une` ("Unsupported comparison direction"): not oeq,
     * which is true for NaN as tessera's ne. */
    const char *eq = tpu_tmp(em);
    tpu_line(em, "%s = arith.cmpf %s, %s, %s : %s", eq,
             tpu_spelling(TSR_OP_EQ, operand_type->dtype), a, b, tpu_type(ty, operand_type));
    tsr_type_t bt = with_dtype(operand_type, TSR_DTYPE_I1);
    const char *ones = tpu_constant(em, &bt, 0.0, 1);
    tpu_line(em, "%s = arith.xori %s, %s : %s", r, eq, ones, tpu_type(ty, &bt));
    return true;
  }
  const char *predicate = tpu_spelling(opc, operand_type->dtype);
  if (!predicate) return false;
  tpu_line(em, "%s = %s %s, %s, %s : %s", r, f ? "arith.cmpf" : "arith.cmpi", predicate, a, b,
           tpu_type(ty, operand_type));
  return true;
}

/* convert: value conversion between any two dtypes (docs/ir.md). */
void tpu_convert(tpu_emitter_t *em, const tsr_op_t *op, const char *r, const char *a,
                 const tsr_type_t *from, const tsr_type_t *to) {
  char x[TPU_TYPE_MAX], y[TPU_TYPE_MAX];
  tsr_dtype_t fd = from->dtype, td = to->dtype;
  const char *ft = tpu_type(x, from), *tt = tpu_type(y, to);
  if (!strcmp(tpu_elem(fd), tpu_elem(td))) { /* i32 <-> u32: the same bits */
    tpu_set_name(em, op->results[0], a);
    return;
  }
  if (is_bool(td)) {
    /* x != 0, as Pallas lowers it: the TPU treats an f32 subnormal as zero
     * here, which gives tessera's float -> i1 (docs/semantics.md,
     * "Numerics") with no code of its own. */
    const char *z = tpu_constant(em, from, 0.0, 0);
    char zn[32];
    snprintf(zn, sizeof zn, "%s", z);
    if (!tpu_compare(em, r, TSR_OP_NE, a, zn, from))
      tpu_unimplemented(em, op, "no TPU form for %s", tsr_dtype_name(fd));
    return;
  }
  if (is_bool(fd) && !is_float(td) && bits_of(td) < 32) {
    /* MLIR folds extui i1 -> i32 -> trunci into one extension i1 -> i8,
     * which libtpu refuses ("Invalid input layout"): select 1 or 0. */
    char c1[32];
    snprintf(c1, sizeof c1, "%s", tpu_constant(em, to, 0.0, 1));
    const char *c0 = tpu_constant(em, to, 0.0, 0);
    tpu_select(em, r, a, from->kind == TSR_TYPE_VECTOR, c1, c0, to);
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

/* This core's index as tessera defines it (ir/ir.h, tsr_ir_core_split):
 * the split grid dims (the core_parallel one, else the leading parallel
 * ones) flattened, divided by ceil(points / cores). Mosaic has no core id
 * op on TensorCores (tpu.core_id is for SparseCores): on one core it is 0. */
const char *tpu_core_index(tpu_emitter_t *em) {
  const tsr_kernel_t *k = em->kernel;
  uint32_t cores = em->chip->cores;
  tsr_ir_core_split_t split = tsr_ir_core_split(k->grid_rank, k->grid, k->semantics);
  if (cores <= 1 || split.first == split.end) return tpu_i32_const(em, 0);
  const char *flat = NULL;
  char flat_buf[32];
  for (uint32_t g = split.first; g < split.end; g++) {
    char gname[32];
    snprintf(gname, sizeof gname, "%%$g%u", g);
    if (!flat) {
      snprintf(flat_buf, sizeof flat_buf, "%s", gname);
    } else {
      const char *dim = tpu_grid_extent(em, g);
      const char *m = tpu_tmp(em);
      tpu_line(em, "%s = arith.muli %s, %s : i32", m, flat_buf, dim);
      const char *a = tpu_tmp(em);
      tpu_line(em, "%s = arith.addi %s, %s : i32", a, m, gname);
      snprintf(flat_buf, sizeof flat_buf, "%s", a);
    }
    flat = flat_buf;
  }
  bool dynamic = false;
  for (uint32_t g = split.first; g < split.end; g++) dynamic |= k->grid_bound[g] != 0;
  char chunk[32];
  if (!dynamic) {
    snprintf(chunk, sizeof chunk, "%s",
             tpu_i32_const(em, (int64_t)((split.points + cores - 1) / cores)));
  } else { /* ceil(points / cores) of the extents the call gives */
    char points[32];
    snprintf(points, sizeof points, "%s", tpu_grid_extent(em, split.first));
    for (uint32_t g = split.first + 1; g < split.end; g++) {
      char e[32];
      snprintf(e, sizeof e, "%s", tpu_grid_extent(em, g));
      const char *m = tpu_tmp(em);
      tpu_line(em, "%s = arith.muli %s, %s : i32", m, points, e);
      snprintf(points, sizeof points, "%s", m);
    }
    char up[32];
    snprintf(up, sizeof up, "%s", tpu_i32_const(em, (int64_t)cores - 1));
    const char *sum = tpu_tmp(em);
    tpu_line(em, "%s = arith.addi %s, %s : i32", sum, points, up);
    char sum_buf[32];
    snprintf(sum_buf, sizeof sum_buf, "%s", sum);
    char n[32];
    snprintf(n, sizeof n, "%s", tpu_i32_const(em, (int64_t)cores));
    snprintf(chunk, sizeof chunk, "%s", tpu_tmp(em));
    tpu_line(em, "%s = arith.divsi %s, %s : i32", chunk, sum_buf, n);
  }
  const char *r = tpu_tmp(em);
  tpu_line(em, "%s = arith.divsi %s, %s : i32", r, flat_buf, chunk);
  return r;
}
