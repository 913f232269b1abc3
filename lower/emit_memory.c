/* Memory through refs: the view of a ref that an op's indices select
 * (dynamic starts clamped, or kept and masked for masked accesses), load and
 * store with their masks, store forwarding of block results, and filling new
 * memory with the uninitialized value (layer 2, emit_internal.h). */
#include <stdio.h>

#include "ir/opview.h"
#include "lower/emit_dispatch.h"
#include "lower/emit_internal.h"
#include "lower/emit_runtime.h"
#include "lower/lower_api.h"

/* ---- Refs and views ---------------------------------------------------------------- */

/* i32 value clamped to [0, hi] as an index. */
ssa_t em_clamp_index(emitter_t *em, ssa_t v, int64_t hi) {
  if (hi < 0) hi = 0;
  ssa_t a = em_op2(em, "arith.maxsi", v, em_cint(em, "i32", 0, 0), "i32");
  a = em_op2(em, "arith.minsi", a, em_cint(em, "i32", 0, hi), "i32");
  return em_idx_of_i32(em, a);
}

/* The view of op's indices [first, first + rank) into ref `rv`. With every
 * index a point, sets *all_points and the element's indices in points[]
 * instead (no view). Dynamic slice starts are clamped into the ref, unless
 * `range` is given: then they are kept and recorded there. With `soft` (on)
 * and `limit`, checked starts follow soft_bounds_t: an error only past
 * `limit` (NULL: never, a read under oob_reads_uninit), lanes outside the
 * logical shape masked off and reported by TSR_RT_OUTSIDE. */
static view_t ref_view_ranged(emitter_t *em, const tsr_op_t *op, const view_t *rv,
                              uint32_t first, bool *all_points, ssa_t *points,
                              window_range_t *range, soft_bounds_t *soft, const int64_t *limit,
                              bool write) {
  view_t v;
  memset(&v, 0, sizeof v);
  int64_t static_off = 0;
  ssa_t off = rv->off;
  char key[480];
  size_t klen = (size_t)snprintf(key, sizeof key, "%s[", rv->key ? rv->key : "?");
  bool pts = true;
  /* Dynamic starts of loads, stores and DMA views are checked when they
   * run, as the interpreter checks them (semaphore indices and a dma_wait's
   * views, which only size the wait, are not). */
  const bool checked = op->opcode == TSR_OP_LOAD || op->opcode == TSR_OP_STORE ||
                       (op->opcode == TSR_OP_DMA_START && op->num_ints >= 2 &&
                        first < (uint64_t)op->ints[0] + (uint64_t)op->ints[1]);
  const bool soft_on = soft && soft->on && checked;
  ssa_t hard, outside; /* i1s of a soft access: an error, a lane outside */
  memset(&hard, 0, sizeof hard);
  if (soft_on) hard = em_cbool(em, 0, false);
  outside = hard;
  bool any_outside = false;
  for (uint32_t d = 0; first + d < op->num_indices && d < rv->rank; d++) {
    const tsr_index_t *ix = &op->indices[first + d];
    int64_t dim = rv->dims[d], st = rv->strides[d];
    bool dyn = ix->operand >= 0;
    ssa_t start;
    if (klen >= sizeof key - 48) {
      klen = sizeof key; /* too long to name: the view gets no key */
    } else {
      if (dyn)
        klen += (size_t)snprintf(key + klen, sizeof key - klen, "%u:v%u:%lld:%lld,", ix->kind,
                                 op->operands[ix->operand]->id, (long long)ix->size,
                                 (long long)ix->stride);
      else
        klen += (size_t)snprintf(key + klen, sizeof key - klen, "%u:%lld:%lld:%lld,", ix->kind,
                                 (long long)ix->start, (long long)ix->size,
                                 (long long)ix->stride);
    }
    switch (ix->kind) {
      case TSR_INDEX_FULL:
        v.dims[v.rank] = dim;
        v.strides[v.rank] = st;
        v.rank++;
        pts = false;
        if (points) points[d] = em_cidx(em, 0);
        break;
      case TSR_INDEX_POINT:
        if (dyn && soft_on) {
          ssa_t s32 = em_scalar(em, op->operands[ix->operand]);
          if (limit)
            hard = em_op2(em, "arith.ori", hard,
                          em_check_index_within(em, op, first + d, s32, limit[d] - 1), "i1");
          ssa_t in = em_cmp(em, "cmpi", "ult", s32, em_cint(em, "i32", 0, dim), "i32");
          soft->inside = soft->has_inside ? em_op2(em, "arith.andi", soft->inside, in, "i1") : in;
          soft->has_inside = true;
          outside = em_op2(em, "arith.ori", outside,
                           em_op2(em, "arith.xori", in, em_cbool(em, 0, true), "i1"), "i1");
          any_outside = true;
          start = em_clamp_index(em, s32, dim - 1);
          if (points) points[d] = start;
          off = em_iadd(em, off, em_imulc(em, start, st));
        } else if (dyn) {
          ssa_t s32 = em_scalar(em, op->operands[ix->operand]);
          start = checked ? em_checked_index(em, op, first + d, s32, dim - 1)
                          : em_clamp_index(em, s32, dim - 1);
          if (points) points[d] = start;
          off = em_iadd(em, off, em_imulc(em, start, st));
        } else {
          if (points) points[d] = em_cidx(em, ix->start);
          static_off += ix->start * st;
        }
        break;
      case TSR_INDEX_SLICE:
      case TSR_INDEX_DS: {
        const int64_t step = ix->stride;
        if (dyn && !range && soft_on) {
          int64_t extent = (ix->size - 1) * step + 1;
          ssa_t s32 = em_scalar(em, op->operands[ix->operand]);
          if (limit)
            hard = em_op2(em, "arith.ori", hard,
                          em_check_index_within(em, op, first + d, s32, limit[d] - extent),
                          "i1");
          ssa_t out = em_cmp(em, "cmpi", "ugt", s32,
                             em_cint(em, "i32", 0, dim - extent < 0 ? 0 : dim - extent), "i32");
          if (dim - extent < 0) out = em_cbool(em, 0, true);
          outside = em_op2(em, "arith.ori", outside, out, "i1");
          any_outside = true;
          window_range_t *wr = &soft->range;
          uint32_t k = wr->count++;
          wr->vdim[k] = v.rank;
          wr->start[k] = s32;
          wr->step[k] = step;
          wr->dim[k] = dim;
          off = em_iadd(em, off, em_imulc(em, em_idx_of_i32(em, s32), st));
        } else if (dyn && range) {
          ssa_t s32 = em_scalar(em, op->operands[ix->operand]);
          uint32_t k = range->count++;
          range->vdim[k] = v.rank;
          range->start[k] = s32;
          range->step[k] = step;
          range->dim[k] = dim;
          off = em_iadd(em, off, em_imulc(em, em_idx_of_i32(em, s32), st));
        } else if (dyn) {
          int64_t extent = (ix->size - 1) * step + 1;
          ssa_t s32 = em_scalar(em, op->operands[ix->operand]);
          start = checked ? em_checked_index(em, op, first + d, s32, dim - extent)
                          : em_clamp_index(em, s32, dim - extent);
          off = em_iadd(em, off, em_imulc(em, start, st));
        } else {
          static_off += ix->start * st;
        }
        v.dims[v.rank] = ix->size;
        v.strides[v.rank] = st * step;
        v.rank++;
        pts = false;
        break;
      }
      case TSR_INDEX_DSIZE:
        /* A DMA view of dynamic size (em_op_dma reads the size): its start,
         * clamped into the dimension, and the bound as its static dim. */
        if (dyn)
          start = em_clamp_index(em, em_scalar(em, op->operands[ix->operand]), dim - 1);
        else
          start = em_cidx(em, ix->start < dim ? ix->start : dim - 1);
        off = em_iadd(em, off, em_imulc(em, start, st));
        v.dims[v.rank] = ix->size;
        v.strides[v.rank] = st * ix->stride;
        v.rank++;
        pts = false;
        klen = sizeof key; /* its size is not part of the name: no key */
        break;
      default: em_unimplemented(em, op, "an index of unknown kind"); break;
    }
  }
  if (any_outside) /* the interpreter's warning, unless an error was reported */
    em_warn_outside(em, op, first, write,
                    em_op2(em, "arith.andi", outside,
                           em_op2(em, "arith.xori", hard, em_cbool(em, 0, true), "i1"), "i1"));
  *all_points = pts;
  if (pts) return v;
  v.root = rv->root;
  v.off = em_iaddc(em, off, static_off);
  v.key = klen < sizeof key - 1 ? em_key(em, "%s]", key) : NULL;
  em_view_materialize(em, &v);
  return v;
}

view_t em_ref_view_at(emitter_t *em, const tsr_op_t *op, const view_t *rv, uint32_t first,
                      bool *all_points, ssa_t *points) {
  return ref_view_ranged(em, op, rv, first, all_points, points, NULL, NULL, NULL, false);
}

/* Whether the run's bounds let op's access of `ref` reach outside it, and
 * how far (*limit, or no limit: *unlimited). */
static bool soft_access(const emitter_t *em, const tsr_value_t *ref, bool write, int64_t *limit,
                        bool *unlimited) {
  *unlimited = false;
  if (!em->bounds || !ref || ref->type.kind != TSR_TYPE_REF || ref->type.rank == 0) return false;
  const uint32_t rank = ref->type.rank;
  memcpy(limit, ref->type.dims, rank * sizeof *limit);
  bool padded = false;
  if ((em->bounds & TSR_LOWER_PADDED) && ref->type.space != TSR_SPACE_SMEM) {
    tsr_padded_dims((em->bounds & TSR_LOWER_DOUBLE_ROWS) != 0, (tsr_dtype_t)ref->type.dtype,
                    rank, ref->type.dims, limit);
    padded = memcmp(limit, ref->type.dims, rank * sizeof *limit) != 0;
  }
  if (!write && (em->bounds & TSR_LOWER_OOB_READS_UNINIT)) {
    *unlimited = true;
    return true;
  }
  return padded;
}

view_t em_ref_view_soft(emitter_t *em, const tsr_op_t *op, const view_t *rv,
                        const tsr_value_t *ref, uint32_t first, bool write, bool *all_points,
                        ssa_t *points, soft_bounds_t *soft) {
  memset(soft, 0, sizeof *soft);
  int64_t limit[TSR_MAX_RANK];
  bool unlimited;
  soft->on = soft_access(em, ref, write, limit, &unlimited);
  return ref_view_ranged(em, op, rv, first, all_points, points, NULL, soft,
                         unlimited ? NULL : limit, write);
}

static view_t ref_view(emitter_t *em, const tsr_op_t *op, const view_t *rv, bool *all_points,
                       ssa_t *points) {
  return em_ref_view_at(em, op, rv, 0, all_points, points);
}

/* An i32 or i1 expression node `a OP b` made for op (errors name it). */
static expr_t *ex_binary(emitter_t *em, const tsr_op_t *op, tsr_opcode_t code, tsr_dtype_t dtype,
                         expr_t *a, expr_t *b, uint32_t rank, const int64_t *dims) {
  expr_t *e = ex_new(em, EX_OP, dtype, rank, dims);
  e->op = code;
  e->origin = op;
  e->arg_dtype = (tsr_dtype_t)a->dtype;
  e->nargs = 2;
  e->args[0] = a;
  e->args[1] = b;
  return e;
}

static expr_t *ex_splat(emitter_t *em, tsr_dtype_t dtype, ssa_t s, uint32_t rank,
                        const int64_t *dims) {
  expr_t *e = ex_new(em, EX_SCALAR, dtype, rank, dims);
  e->scalar = s;
  return e;
}

/* `mask` (NULL: none) and, for each dynamic slice of a masked access, that
 * its element lies inside the ref: 0 <= start + i * step < dim. Masked-off
 * lanes past the ends are never touched; masked-on ones there are an
 * out-of-bounds error in the interpreter and are dropped here. */
static expr_t *range_mask(emitter_t *em, const tsr_op_t *op, const window_range_t *wr,
                          expr_t *mask, uint32_t rank, const int64_t *dims) {
  const tsr_dtype_t I32 = TSR_DTYPE_I32, I1 = TSR_DTYPE_I1;
  for (uint32_t k = 0; k < wr->count; k++) {
    expr_t *i = ex_new(em, EX_IOTA, I32, rank, dims);
    i->axis = wr->vdim[k];
    expr_t *pos = ex_binary(em, op, TSR_OP_MUL, I32, i,
                            ex_splat(em, I32, em_cint(em, "i32", 0, wr->step[k]), rank, dims),
                            rank, dims);
    pos = ex_binary(em, op, TSR_OP_ADD, I32, pos, ex_splat(em, I32, wr->start[k], rank, dims),
                    rank, dims);
    expr_t *lo = ex_binary(em, op, TSR_OP_GE, I1, pos,
                           ex_splat(em, I32, em_cint(em, "i32", 0, 0), rank, dims), rank, dims);
    expr_t *hi = ex_binary(em, op, TSR_OP_LT, I1, pos,
                           ex_splat(em, I32, em_cint(em, "i32", 0, wr->dim[k]), rank, dims),
                           rank, dims);
    expr_t *in = ex_binary(em, op, TSR_OP_AND, I1, lo, hi, rank, dims);
    mask = mask ? ex_binary(em, op, TSR_OP_AND, I1, mask, in, rank, dims) : in;
  }
  return mask;
}

expr_t *em_soft_mask(emitter_t *em, const tsr_op_t *op, const soft_bounds_t *soft, expr_t *mask,
                     uint32_t rank, const int64_t *dims) {
  if (!soft->on) return mask;
  mask = range_mask(em, op, &soft->range, mask, rank, dims);
  if (soft->has_inside) {
    expr_t *in = ex_splat(em, TSR_DTYPE_I1, soft->inside, rank, dims);
    mask = mask ? ex_binary(em, op, TSR_OP_AND, TSR_DTYPE_I1, mask, in, rank, dims) : in;
  }
  return mask;
}

expr_t *em_and_mask(emitter_t *em, const tsr_op_t *op, expr_t *a, expr_t *b) {
  return ex_binary(em, op, TSR_OP_AND, TSR_DTYPE_I1, a, b, a->rank, a->dims);
}

bool em_soft_point(emitter_t *em, const soft_bounds_t *soft, ssa_t *mask) {
  (void)em;
  if (!soft->on || !soft->has_inside) return false;
  *mask = soft->inside;
  return true;
}

/* The store that follows `op` and writes its block result, if the result
 * can be computed directly into the stored view (store forwarding). */
/* The view of the unmasked store that directly follows `op` and is the only
 * use of its result, if there is one (and it is not a point). */
static bool store_after(emitter_t *em, const tsr_op_t *op, view_t *out) {
  const tsr_value_t *r = op->results[0];
  const tsr_op_t *s = op->next;
  if (em->uses[r->id] == 1 && s && s->opcode == TSR_OP_STORE && !(s->flags & TSR_OPF_MASK) &&
      s->operands[1] == r && em_vi(em, s->operands[0])->kind == VK_REF) {
    int64_t limit[TSR_MAX_RANK];
    bool unlimited;
    /* a store the run's bounds let reach outside writes only some lanes */
    if (soft_access(em, s->operands[0], true, limit, &unlimited)) return false;
    bool pts;
    *out = ref_view(em, s, &em_vi(em, s->operands[0])->mem, &pts, NULL);
    return !pts && out->rank == r->type.rank;
  }
  return false;
}

/* The result's own buffer (no store forwarding). */
static view_t own_dest(emitter_t *em, const tsr_value_t *r) {
  view_t b = em_value_buffer(em, (tsr_dtype_t)r->type.dtype, r->type.rank, r->type.dims);
  em_set_mem(em, r, b);
  return b;
}

view_t em_result_dest(emitter_t *em, const tsr_op_t *op, bool inputs_mutable) {
  view_t v;
  if (!inputs_mutable && store_after(em, op, &v)) {
    em_set_mem(em, op->results[0], v);
    return v;
  }
  return own_dest(em, op->results[0]);
}

view_t em_result_dest_call(emitter_t *em, const tsr_op_t *op, const view_t *srcs, uint32_t n) {
  view_t v;
  if (!store_after(em, op, &v) || !em_view_is_dense(&v)) return own_dest(em, op->results[0]);
  for (uint32_t i = 0; i < n; i++)
    if (srcs[i].root == v.root) return own_dest(em, op->results[0]);
  em_set_mem(em, op->results[0], v);
  return v;
}

/* ---- Memory ops ---------------------------------------------------------------------- */

/* What a load or store addresses: the view of its indices into its ref
 * (its typed view, ir/opview.h) or, with every index a point, the element's
 * indices. Masked: dynamic slice starts are kept and recorded in `range`
 * (range_mask). */
typedef struct access {
  tsr_access_view_t op;
  vinfo_t *ref;
  bool masked;
  bool all_points;
  ssa_t points[TSR_MAX_RANK];
  window_range_t range;
  soft_bounds_t soft;
  view_t view;
  nest_t at; /* the scalar position of an all-points access */
} access_t;

/* false after reporting an op without the layout of its view */
static bool access_init(emitter_t *em, const tsr_op_t *op, access_t *a) {
  memset(a, 0, sizeof *a);
  if (!tsr_opview_access(op, &a->op)) {
    em_unimplemented(em, op, NULL);
    return false;
  }
  a->ref = em_vi(em, a->op.ref.base.value);
  a->masked = a->op.mask.value != NULL;
  const tsr_value_t *ref = a->op.ref.base.value;
  const bool write = op->opcode == TSR_OP_STORE;
  int64_t limit[TSR_MAX_RANK];
  bool unlimited;
  a->soft.on = soft_access(em, ref, write, limit, &unlimited);
  a->view = ref_view_ranged(em, op, &a->ref->mem, a->op.ref.first, &a->all_points, a->points,
                            a->masked ? &a->range : NULL, &a->soft, unlimited ? NULL : limit,
                            write);
  return true;
}

static expr_t *mask_expr(emitter_t *em, const access_t *a, uint32_t rank, const int64_t *dims) {
  return a->masked ? ex_of_value(em, a->op.mask.value, rank, dims) : NULL;
}

void em_op_load(emitter_t *em, const tsr_op_t *op) {
  const tsr_value_t *r = op->results[0];
  tsr_dtype_t dtype = (tsr_dtype_t)r->type.dtype;
  access_t a;
  if (!access_init(em, op, &a)) return;
  if (a.all_points) {
    ssa_t s, in;
    const bool soft = em_soft_point(em, &a.soft, &in);
    if (a.masked || soft) {
      ssa_t m = a.masked ? em_scalar(em, a.op.mask.value) : in;
      if (a.masked && soft) m = em_op2(em, "arith.andi", m, in, "i1");
      ssa_t pt = em_uninit(em, dtype, 0);
      s = em_mem_read(em, &a.ref->mem, dtype, a.points, &a.at, &m, &pt);
    } else {
      s = em_mem_read(em, &a.ref->mem, dtype, a.points, &a.at, NULL, NULL);
    }
    em_set_scalar(em, r, s);
    return;
  }
  expr_t *mask = mask_expr(em, &a, r->type.rank, r->type.dims);
  if (mask) mask = range_mask(em, op, &a.range, mask, r->type.rank, r->type.dims);
  mask = em_soft_mask(em, op, &a.soft, mask, r->type.rank, r->type.dims);
  if (!mask && !a.ref->mutable_ref) { /* borrowed: nothing writes this ref */
    em_set_mem(em, r, a.view);
    return;
  }
  expr_t *e = ex_new(em, EX_MEM, dtype, r->type.rank, r->type.dims);
  if (!e) return;
  e->mem = a.view;
  e->mask = mask;
  e->mutable_mem = a.ref->mutable_ref;
  if (em_lazy_ok(em, op, e))
    em_set_lazy(em, r, e);
  else
    em_set_mem(em, r, em_materialize_value(em, e));
}

void em_op_store(emitter_t *em, const tsr_op_t *op) {
  access_t a;
  if (!access_init(em, op, &a)) return;
  const tsr_value_t *val = a.op.stored.value;
  const tsr_dtype_t dtype = (tsr_dtype_t)a.op.ref.base.value->type.dtype;
  const view_t v = a.view;
  if (a.all_points) {
    ssa_t s = em_scalar(em, val), in;
    const bool soft = em_soft_point(em, &a.soft, &in);
    if (a.masked || soft) {
      ssa_t m = a.masked ? em_scalar(em, a.op.mask.value) : in;
      if (a.masked && soft) m = em_op2(em, "arith.andi", m, in, "i1");
      em_mem_write(em, &a.ref->mem, dtype, a.points, &a.at, s, &m);
    } else {
      em_mem_write(em, &a.ref->mem, dtype, a.points, &a.at, s, NULL);
    }
    return;
  }
  vinfo_t *vvi = em_vi(em, val);
  if (vvi->kind == VK_MEM && em_view_same(&vvi->mem, &v) && !a.masked && !a.soft.on)
    return; /* computed in place (store forwarding) */
  expr_t *e = ex_of_value(em, val, v.rank, v.dims);
  if (!e) return;
  expr_t *mask = mask_expr(em, &a, v.rank, v.dims);
  if (mask) mask = range_mask(em, op, &a.range, mask, v.rank, v.dims);
  mask = em_soft_mask(em, op, &a.soft, mask, v.rank, v.dims);
  if (!ex_inplace_safe(em, e, &v) || (mask && !ex_inplace_safe(em, mask, &v))) {
    view_t tmp = em_materialize(em, e);
    e = ex_new(em, EX_MEM, dtype, v.rank, v.dims);
    if (!e) return;
    e->mem = tmp;
    if (mask) {
      view_t mt = em_materialize(em, mask);
      mask = ex_new(em, EX_MEM, TSR_DTYPE_I1, v.rank, v.dims);
      if (!mask) return;
      mask->mem = mt;
    }
  }
  ex_store(em, e, &v, mask);
}

/* ---- Fills --------------------------------------------------------------------------- */

/* Whether some op of r (or of its regions) has `v` as an operand. */
static bool region_uses(const tsr_region_t *r, const tsr_value_t *v) {
  for (const tsr_op_t *op = r ? r->first : NULL; op; op = op->next) {
    for (uint32_t i = 0; i < op->num_operands; i++)
      if (op->operands[i] == v) return true;
    for (uint32_t i = 0; i < op->num_regions; i++)
      if (region_uses(&op->regions[i], v)) return true;
  }
  return false;
}

/* Whether the first op of the body that touches `ref` is a store of the
 * whole ref, unmasked and outside control flow: then a new output block is
 * overwritten before anything can read it, and its fill with the
 * uninitialized value can be skipped (the interpreter's lazy fill). */
bool em_first_touch_stores_all(const tsr_region_t *body, const tsr_value_t *ref) {
  for (const tsr_op_t *op = body->first; op; op = op->next) {
    bool touches = false;
    for (uint32_t i = 0; i < op->num_operands && !touches; i++) touches = op->operands[i] == ref;
    for (uint32_t i = 0; i < op->num_regions && !touches; i++)
      touches = region_uses(&op->regions[i], ref);
    if (!touches) continue;
    if (op->opcode != TSR_OP_STORE || op->operands[0] != ref || (op->flags & TSR_OPF_MASK))
      return false;
    for (uint32_t d = 0; d < op->num_indices; d++) {
      const tsr_index_t *ix = &op->indices[d];
      bool whole = ix->kind == TSR_INDEX_FULL ||
                   (ix->kind == TSR_INDEX_SLICE && ix->operand < 0 && ix->start == 0 &&
                    ix->stride == 1 && d < ref->type.rank && ix->size == ref->type.dims[d]);
      if (!whole) return false;
    }
    return true;
  }
  return false;
}

/* Fills v with the uninitialized value of dtype (the run's --uninit mode). */
void em_fill_view(emitter_t *em, const view_t *v, tsr_dtype_t dtype) {
  expr_t *e = ex_new(em, EX_SCALAR, dtype, v->rank, v->dims);
  if (!e) return;
  e->scalar = em_uninit(em, dtype, 0);
  ex_store(em, e, v, NULL);
}

void em_fill_view_element_pad(emitter_t *em, const view_t *v, tsr_dtype_t dtype) {
  expr_t *e = ex_new(em, EX_SCALAR, dtype, v->rank, v->dims);
  if (!e) return;
  e->scalar = em_element_pad(em, dtype, 0);
  ex_store(em, e, v, NULL);
}
