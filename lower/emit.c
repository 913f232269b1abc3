/* tessera kernel -> MLIR text in upstream dialects (func, scf, arith, math,
 * vector, memref): the grid as scf.for loops, BlockSpec windows used in place
 * or through block buffers, scratch, control flow and memory ops. Block
 * math is in emit_expr.c (elementwise, fused) and emit_ops.c (reductions,
 * dot, shape ops); plumbing in emit_text.c. The generated code is described
 * in docs/lowering_codegen.md; its semantics are the interpreter's
 * (docs/semantics.md). */
#include <stdio.h>
#include <stdlib.h>

#include "ir/ir.h"
#include "lower/emit_internal.h"
#include "lower/lower_api.h"
#include "lower/lower_internal.h"

/* How the pipeline moves one in/out operand (see docs/lowering_codegen.md). */
typedef struct operand_state {
  const tsr_decl_t *decl;
  uint32_t root;        /* the HBM array: a function argument (or the aliased output's) */
  bool blocked;         /* vmem/smem with a window: block index per step */
  bool inplace;         /* the window of HBM is the ref; else a block buffer */
  bool maybe_padded;    /* some array dim is not a multiple of its block dim */
  bool fill_out;        /* an output block that starts holding the uninitialized
                           value when entered (not fully stored first) */
  bool tracked;         /* its previous block indices are kept (state) */
  view_t buf;           /* block buffer (not in place) */
  uint32_t state;       /* first slot of its block indices in the state memref */
  int64_t block[TSR_MAX_RANK];   /* squeezed dims as 1 */
  int64_t nblocks[TSR_MAX_RANK];
  int64_t astrides[TSR_MAX_RANK];
  uint32_t ref_rank;
  int64_t ref_dims[TSR_MAX_RANK];
  int64_t ref_strides[TSR_MAX_RANK]; /* array strides of the kept dims */
  ssa_t bi[TSR_MAX_RANK];  /* this step's block indices (index) */
} operand_state_t;

typedef struct kernel_state {
  operand_state_t *ops; /* per decl */
  ssa_t state;          /* memref<N x index> of previous block indices */
  uint32_t state_slots;
  ssa_t lin, first, last;
} kernel_state_t;

static void emit_region(emitter_t *em, const tsr_region_t *r);

/* ---- Analysis ------------------------------------------------------------------- */

static void count_uses(emitter_t *em, const tsr_region_t *r) {
  if (!r) return;
  for (const tsr_op_t *op = r->first; op; op = op->next) {
    for (uint32_t i = 0; i < op->num_operands; i++) {
      uint32_t id = op->operands[i]->id;
      em->uses[id]++;
      em->user[id] = op;
    }
    int32_t written = tsr_op_written_ref(op);
    if (written >= 0) em->stored[op->operands[written]->id] = true;
    for (uint32_t i = 0; i < op->num_regions; i++) count_uses(em, &op->regions[i]);
  }
}

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
static bool first_touch_stores_all(const tsr_region_t *body, const tsr_value_t *ref) {
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

/* ---- Values ---------------------------------------------------------------------- */

static vinfo_t *vi_of(emitter_t *em, const tsr_value_t *v) { return &em->vals[v->id]; }

static ssa_t scalar_of(emitter_t *em, const tsr_value_t *v) {
  vinfo_t *vi = vi_of(em, v);
  if (vi->kind != VK_SCALAR) {
    em_fail(em, TSR_STATUS(TSR_INTERNAL, "emit: %%%s is not a scalar here", v->name));
    return (ssa_t){"%undef"};
  }
  return vi->scalar;
}

static void set_scalar(emitter_t *em, const tsr_value_t *v, ssa_t s) {
  vinfo_t *vi = vi_of(em, v);
  vi->kind = VK_SCALAR;
  vi->scalar = s;
}

static void set_mem(emitter_t *em, const tsr_value_t *v, view_t m) {
  vinfo_t *vi = vi_of(em, v);
  vi->kind = VK_MEM;
  vi->mem = m;
}

static void set_lazy(emitter_t *em, const tsr_value_t *v, expr_t *e) {
  vinfo_t *vi = vi_of(em, v);
  vi->kind = VK_LAZY;
  vi->expr = e;
}

/* Whether `u` can evaluate its operand `v` element by element inside its own
 * loops (each element read once, at u's position). */
static bool fuses(const tsr_op_t *u, const tsr_value_t *v) {
  switch (tsr_op_table[u->opcode].rule) {
    case TSR_RULE_ELEMWISE:
    case TSR_RULE_COMPARE:
    case TSR_RULE_SELECT:
    case TSR_RULE_CONVERT:
    case TSR_RULE_BITCAST: return u->results[0]->type.kind == TSR_TYPE_VECTOR;
    case TSR_RULE_STORE: return u->operands[0] != v;
    case TSR_RULE_REDUCE:
    case TSR_RULE_TRANSPOSE:
    case TSR_RULE_CONCATENATE: return true;
    case TSR_RULE_FOR:
      for (uint32_t i = 3; i < u->num_operands; i++)
        if (u->operands[i] == v) return true;
      return false;
    case TSR_RULE_WHILE: return true;
    case TSR_RULE_DOT: /* the accumulator: each element read once, at its tile's start */
      return u->num_operands > 2 && u->operands[2] == v && u->operands[0] != v &&
             u->operands[1] != v;
    case TSR_RULE_YIELD: {
      const tsr_op_t *p = u->parent ? u->parent->parent_op : NULL;
      return p && (p->opcode == TSR_OP_FOR || p->opcode == TSR_OP_WHILE || p->opcode == TSR_OP_IF);
    }
    default: return false;
  }
}

/* Whether the block result of `op`, computed by `e`, stays an expression
 * that its only user evaluates (fusion). */
static bool lazy_ok(emitter_t *em, const tsr_op_t *op, const expr_t *e) {
  const tsr_value_t *r = op->results[0];
  if (em->uses[r->id] != 1) return false;
  const tsr_op_t *u = em->user[r->id];
  if (!u || u->parent != op->parent || !fuses(u, r)) return false;
  /* Elements of refs that the kernel writes must be read before any write:
   * the user must come right after. */
  if (ex_has_mutable(e) && u != op->next) return false;
  return true;
}

/* ---- Refs and views ---------------------------------------------------------------- */

/* i32 value clamped to [0, hi] as an index. */
static ssa_t clamp_index(emitter_t *em, ssa_t v, int64_t hi) {
  if (hi < 0) hi = 0;
  ssa_t a = em_op2(em, "arith.maxsi", v, em_cint(em, "i32", 0, 0), "i32");
  a = em_op2(em, "arith.minsi", a, em_cint(em, "i32", 0, hi), "i32");
  return em_idx_of_i32(em, a);
}

/* The dynamic slice starts of a masked access, which are not clamped: the
 * window may reach past the ref's ends (Pallas allows it when the lanes
 * outside are masked off), and range_mask() keeps its accesses inside. */
typedef struct window_range {
  uint32_t count;
  uint32_t vdim[TSR_MAX_RANK]; /* the view dim */
  ssa_t start[TSR_MAX_RANK];   /* i32: its first element in the ref's dim */
  int64_t step[TSR_MAX_RANK];
  int64_t dim[TSR_MAX_RANK];   /* the ref's dim */
} window_range_t;

/* The view of op's indices [first, first + rank) into ref `rv`. With every
 * index a point, sets *all_points and the element's indices in points[]
 * instead (no view). Dynamic slice starts are clamped into the ref, unless
 * `range` is given: then they are kept and recorded there. */
static view_t ref_view_ranged(emitter_t *em, const tsr_op_t *op, const view_t *rv,
                              uint32_t first, bool *all_points, ssa_t *points,
                              window_range_t *range) {
  view_t v;
  memset(&v, 0, sizeof v);
  int64_t static_off = 0;
  ssa_t off = rv->off;
  char key[480];
  size_t klen = (size_t)snprintf(key, sizeof key, "%s[", rv->key ? rv->key : "?");
  bool pts = true;
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
        if (dyn) {
          start = clamp_index(em, scalar_of(em, op->operands[ix->operand]), dim - 1);
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
        if (dyn && range) {
          ssa_t s32 = scalar_of(em, op->operands[ix->operand]);
          uint32_t k = range->count++;
          range->vdim[k] = v.rank;
          range->start[k] = s32;
          range->step[k] = step;
          range->dim[k] = dim;
          off = em_iadd(em, off, em_imulc(em, em_idx_of_i32(em, s32), st));
        } else if (dyn) {
          int64_t extent = (ix->size - 1) * step + 1;
          start = clamp_index(em, scalar_of(em, op->operands[ix->operand]), dim - extent);
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
      default: em_unimplemented(em, op, "an index of unknown kind"); break;
    }
  }
  *all_points = pts;
  if (pts) return v;
  v.root = rv->root;
  v.off = em_iaddc(em, off, static_off);
  v.key = klen < sizeof key - 1 ? em_key(em, "%s]", key) : NULL;
  em_view_materialize(em, &v);
  return v;
}

static view_t ref_view_at(emitter_t *em, const tsr_op_t *op, const view_t *rv, uint32_t first,
                          bool *all_points, ssa_t *points) {
  return ref_view_ranged(em, op, rv, first, all_points, points, NULL);
}

static view_t ref_view(emitter_t *em, const tsr_op_t *op, const view_t *rv, bool *all_points,
                       ssa_t *points) {
  return ref_view_at(em, op, rv, 0, all_points, points);
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

/* The store that follows `op` and writes its block result, if the result
 * can be computed directly into the stored view (store forwarding). */
view_t em_result_dest(emitter_t *em, const tsr_op_t *op, bool inputs_mutable) {
  const tsr_value_t *r = op->results[0];
  const tsr_op_t *s = op->next;
  if (!inputs_mutable && em->uses[r->id] == 1 && s && s->opcode == TSR_OP_STORE &&
      !(s->flags & TSR_OPF_MASK) && s->operands[1] == r &&
      vi_of(em, s->operands[0])->kind == VK_REF) {
    bool pts;
    view_t v = ref_view(em, s, &vi_of(em, s->operands[0])->mem, &pts, NULL);
    if (!pts && v.rank == r->type.rank) {
      set_mem(em, r, v);
      return v;
    }
  }
  view_t b = em_buffer(em, (tsr_dtype_t)r->type.dtype, r->type.rank, r->type.dims);
  set_mem(em, r, b);
  return b;
}

/* ---- Memory ops ---------------------------------------------------------------------- */

static expr_t *mask_expr(emitter_t *em, const tsr_op_t *op, uint32_t rank, const int64_t *dims) {
  if (!(op->flags & TSR_OPF_MASK)) return NULL;
  return ex_of_value(em, op->operands[op->num_operands - 1], rank, dims);
}

static void op_load(emitter_t *em, const tsr_op_t *op) {
  const tsr_value_t *ref = op->operands[0], *r = op->results[0];
  vinfo_t *rvi = vi_of(em, ref);
  tsr_dtype_t dtype = (tsr_dtype_t)r->type.dtype;
  bool pts;
  ssa_t points[TSR_MAX_RANK];
  window_range_t range = {0};
  const bool masked = (op->flags & TSR_OPF_MASK) != 0;
  view_t v = ref_view_ranged(em, op, &rvi->mem, 0, &pts, points, masked ? &range : NULL);
  if (pts) {
    nest_t n;
    memset(&n, 0, sizeof n);
    ssa_t s;
    if (masked) {
      ssa_t m = scalar_of(em, op->operands[op->num_operands - 1]);
      ssa_t pt = em_uninit(em, dtype, 0);
      s = em_mem_read(em, &rvi->mem, dtype, points, &n, &m, &pt);
    } else {
      s = em_mem_read(em, &rvi->mem, dtype, points, &n, NULL, NULL);
    }
    set_scalar(em, r, s);
    return;
  }
  expr_t *mask = mask_expr(em, op, r->type.rank, r->type.dims);
  if (mask) mask = range_mask(em, op, &range, mask, r->type.rank, r->type.dims);
  if (!mask && !rvi->mutable_ref) { /* borrowed: nothing writes this ref */
    set_mem(em, r, v);
    return;
  }
  expr_t *e = ex_new(em, EX_MEM, dtype, r->type.rank, r->type.dims);
  if (!e) return;
  e->mem = v;
  e->mask = mask;
  e->mutable_mem = rvi->mutable_ref;
  if (lazy_ok(em, op, e))
    set_lazy(em, r, e);
  else
    set_mem(em, r, em_materialize(em, e));
}

static void op_store(emitter_t *em, const tsr_op_t *op) {
  const tsr_value_t *ref = op->operands[0], *val = op->operands[1];
  vinfo_t *rvi = vi_of(em, ref);
  const tsr_dtype_t dtype = (tsr_dtype_t)ref->type.dtype;
  bool pts;
  ssa_t points[TSR_MAX_RANK];
  window_range_t range = {0};
  const bool masked = (op->flags & TSR_OPF_MASK) != 0;
  view_t v = ref_view_ranged(em, op, &rvi->mem, 0, &pts, points, masked ? &range : NULL);
  if (pts) {
    nest_t n;
    memset(&n, 0, sizeof n);
    ssa_t s = scalar_of(em, val);
    if (op->flags & TSR_OPF_MASK) {
      ssa_t m = scalar_of(em, op->operands[op->num_operands - 1]);
      em_mem_write(em, &rvi->mem, dtype, points, &n, s, &m);
    } else {
      em_mem_write(em, &rvi->mem, dtype, points, &n, s, NULL);
    }
    return;
  }
  vinfo_t *vvi = vi_of(em, val);
  if (vvi->kind == VK_MEM && em_view_same(&vvi->mem, &v) && !(op->flags & TSR_OPF_MASK))
    return; /* computed in place (store forwarding) */
  expr_t *e = ex_of_value(em, val, v.rank, v.dims);
  if (!e) return;
  expr_t *mask = mask_expr(em, op, v.rank, v.dims);
  if (mask) mask = range_mask(em, op, &range, mask, v.rank, v.dims);
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

/* ---- Elementwise and shape ops ---------------------------------------------------------- */

static void op_elementwise(emitter_t *em, const tsr_op_t *op) {
  const tsr_value_t *r = op->results[0];
  const tsr_rule_t rule = tsr_op_table[op->opcode].rule;
  const tsr_value_t *val = op->operands[rule == TSR_RULE_SELECT ? 1 : 0];
  const tsr_dtype_t arg_dtype = (tsr_dtype_t)val->type.dtype, dtype = (tsr_dtype_t)r->type.dtype;
  if (r->type.kind == TSR_TYPE_SCALAR) {
    ssa_t a[3];
    for (uint32_t i = 0; i < op->num_operands && i < 3; i++) a[i] = scalar_of(em, op->operands[i]);
    ssa_t s;
    switch (rule) {
      case TSR_RULE_SELECT: s = em_select(em, a[0], a[1], a[2], em_compute(dtype), 0, false); break;
      case TSR_RULE_CONVERT: s = em_convert(em, a[0], arg_dtype, dtype, 0); break;
      case TSR_RULE_BITCAST: s = em_bitcast(em, a[0], arg_dtype, dtype, 0); break;
      case TSR_RULE_ELEMWISE:
      case TSR_RULE_COMPARE: s = em_elementwise(em, op->opcode, arg_dtype, a, 0); break;
      default:
        em_unimplemented(em, op, "not an elementwise op");
        return;
    }
    set_scalar(em, r, s);
    return;
  }
  expr_t *e = ex_new(em, EX_OP, dtype, r->type.rank, r->type.dims);
  if (!e) return;
  e->op = op->opcode;
  e->origin = op;
  e->arg_dtype = arg_dtype;
  e->nargs = op->num_operands;
  for (uint32_t i = 0; i < op->num_operands && i < 3; i++) {
    e->args[i] = ex_of_value(em, op->operands[i], r->type.rank, r->type.dims);
    if (!e->args[i]) return;
  }
  if (lazy_ok(em, op, e))
    set_lazy(em, r, e);
  else
    set_mem(em, r, em_materialize(em, e));
}

static void op_const(emitter_t *em, const tsr_op_t *op) {
  const tsr_value_t *r = op->results[0];
  tsr_dtype_t dtype = (tsr_dtype_t)r->type.dtype;
  ssa_t c = em_literal(em, dtype, op->literal, 0);
  if (r->type.kind == TSR_TYPE_SCALAR) {
    set_scalar(em, r, c);
    return;
  }
  expr_t *e = ex_new(em, EX_SCALAR, dtype, r->type.rank, r->type.dims);
  if (!e) return;
  e->scalar = c;
  set_lazy(em, r, e);
}

static void op_iota(emitter_t *em, const tsr_op_t *op) {
  const tsr_value_t *r = op->results[0];
  expr_t *e = ex_new(em, EX_IOTA, (tsr_dtype_t)r->type.dtype, r->type.rank, r->type.dims);
  if (!e) return;
  e->axis = (uint32_t)op->ints[0];
  set_lazy(em, r, e);
}

/* The value's splat scalar, if it is one (a scalar, or a lazy splat). */
static bool splat_of(emitter_t *em, const tsr_value_t *v, ssa_t *out) {
  vinfo_t *vi = vi_of(em, v);
  if (vi->kind == VK_SCALAR) {
    *out = vi->scalar;
    return true;
  }
  if (vi->kind == VK_LAZY && vi->expr->kind == EX_SCALAR) {
    *out = vi->expr->scalar;
    return true;
  }
  return false;
}

static void set_splat(emitter_t *em, const tsr_value_t *r, ssa_t s) {
  if (r->type.kind == TSR_TYPE_SCALAR) { /* e.g. a point slice of a splat */
    set_scalar(em, r, s);
    return;
  }
  expr_t *e = ex_new(em, EX_SCALAR, (tsr_dtype_t)r->type.dtype, r->type.rank, r->type.dims);
  if (!e) return;
  e->scalar = s;
  set_lazy(em, r, e);
}

static void op_broadcast(emitter_t *em, const tsr_op_t *op) {
  const tsr_value_t *a = op->operands[0], *r = op->results[0];
  ssa_t s;
  if (splat_of(em, a, &s)) {
    set_splat(em, r, s);
    return;
  }
  view_t v = em_value_view(em, a);
  if (tsr_type_equal(&a->type, &r->type)) {
    set_mem(em, r, v);
    return;
  }
  expr_t *e = ex_new(em, EX_BCAST, (tsr_dtype_t)r->type.dtype, r->type.rank, r->type.dims);
  if (!e) return;
  e->mem = v;
  set_lazy(em, r, e);
}

/* A dense view of v's elements (copying when v's view is strided). */
static view_t dense_view_of(emitter_t *em, const tsr_value_t *a) {
  view_t v = em_value_view(em, a);
  if (em_view_is_dense(&v)) return v;
  expr_t *e = ex_new(em, EX_MEM, (tsr_dtype_t)a->type.dtype, a->type.rank, a->type.dims);
  if (!e) return v;
  e->mem = v;
  return em_materialize(em, e);
}

static void op_reshape(emitter_t *em, const tsr_op_t *op) {
  const tsr_value_t *a = op->operands[0], *r = op->results[0];
  ssa_t s;
  if (splat_of(em, a, &s)) {
    set_splat(em, r, s);
    return;
  }
  view_t v = dense_view_of(em, a);
  int64_t strides[TSR_MAX_RANK];
  em_dense_strides(r->type.rank, r->type.dims, strides);
  set_mem(em, r, em_view_make(em, v.root, v.off, r->type.rank, r->type.dims, strides,
                              em_key(em, "%s{rs%u}", v.key ? v.key : "?", r->id)));
}

static void op_slice(emitter_t *em, const tsr_op_t *op) {
  const tsr_value_t *a = op->operands[0], *r = op->results[0];
  ssa_t s;
  if (splat_of(em, a, &s)) {
    set_splat(em, r, s);
    return;
  }
  view_t v = em_value_view(em, a);
  int64_t off = 0, dims[TSR_MAX_RANK], strides[TSR_MAX_RANK];
  uint32_t rank = 0;
  for (uint32_t d = 0; d < op->num_indices && d < v.rank; d++) {
    const tsr_index_t *ix = &op->indices[d];
    switch (ix->kind) {
      case TSR_INDEX_FULL:
        dims[rank] = v.dims[d];
        strides[rank++] = v.strides[d];
        break;
      case TSR_INDEX_POINT: off += ix->start * v.strides[d]; break;
      case TSR_INDEX_SLICE:
      case TSR_INDEX_DS:
        off += ix->start * v.strides[d];
        dims[rank] = ix->size;
        strides[rank++] = v.strides[d] * ix->stride;
        break;
      default: em_unimplemented(em, op, "an index of unknown kind"); return;
    }
  }
  if (rank == 0) { /* every index a point: a scalar */
    view_t e = em_view_make(em, v.root, em_iaddc(em, v.off, off), 0, dims, strides, NULL);
    nest_t n;
    memset(&n, 0, sizeof n);
    set_scalar(em, r, em_mem_read(em, &e, (tsr_dtype_t)r->type.dtype, NULL, &n, NULL, NULL));
    return;
  }
  set_mem(em, r, em_view_make(em, v.root, em_iaddc(em, v.off, off), rank, dims, strides,
                              em_key(em, "%s{sl%u}", v.key ? v.key : "?", r->id)));
}

/* ---- Control flow --------------------------------------------------------------------------- */

/* Writes the block operands of a terminator into their destinations with
 * parallel-copy semantics: every source is read before any destination is
 * written when some source reads a destination. dests[i] NULL: scalar. */
static void copy_yields(emitter_t *em, const tsr_op_t *term, view_t *const *dests) {
  uint32_t n = term->num_operands, blocks = 0;
  for (uint32_t i = 0; i < n; i++) blocks += dests[i] != NULL;
  if (!blocks) return;
  expr_t **src = em_alloc(em, (n + 1) * sizeof *src);
  if (!src) return;
  for (uint32_t i = 0; i < n; i++) {
    if (!dests[i]) continue;
    const tsr_value_t *v = term->operands[i];
    src[i] = ex_of_value(em, v, dests[i]->rank, dests[i]->dims);
    if (!src[i]) return;
  }
  /* Does any source read another destination, or its own at other
   * elements than it writes? */
  bool conflict = false;
  for (uint32_t i = 0; i < n && !conflict; i++) {
    if (!dests[i]) continue;
    for (uint32_t j = 0; j < n && !conflict; j++) {
      if (!dests[j]) continue;
      conflict = i == j ? !ex_inplace_safe(em, src[i], dests[j])
                        : ex_reads_root(src[i], dests[j]->root);
    }
  }
  if (conflict) {
    for (uint32_t i = 0; i < n; i++) {
      if (!dests[i]) continue;
      if (src[i]->kind == EX_MEM && em_view_same(&src[i]->mem, dests[i])) continue;
      view_t t = em_materialize(em, src[i]);
      src[i] = ex_new(em, EX_MEM, src[i]->dtype, t.rank, t.dims);
      if (!src[i]) return;
      src[i]->mem = t;
    }
  }
  for (uint32_t i = 0; i < n; i++) {
    if (!dests[i]) continue;
    if (src[i]->kind == EX_MEM && em_view_same(&src[i]->mem, dests[i])) continue;
    ex_store(em, src[i], dests[i], NULL);
  }
}

/* A comma-separated list being built ("%a = %b, %c = %d"). */
typedef struct text_list {
  tsr_strbuf_t sb;
  uint32_t count;
} text_list_t;

static void tl_add(text_list_t *l, const char *fmt, ...) TSR_PRINTF(2, 3);
static void tl_add(text_list_t *l, const char *fmt, ...) {
  if (l->count++) tsr_strbuf_append(&l->sb, ", ", 2);
  va_list ap;
  va_start(ap, fmt);
  tsr_strbuf_vprintf(&l->sb, fmt, ap);
  va_end(ap);
}

static const char *tl_text(const text_list_t *l) { return l->sb.data ? l->sb.data : ""; }

static void tl_done(emitter_t *em, text_list_t *l) {
  if (l->sb.failed) em_fail(em, TSR_OOM());
  tsr_strbuf_deinitialize(&l->sb);
}

/* The scalar results of a control op: "%t:2" / "%t" names and their "T, T"
 * type list (blocks go through buffers instead). */
typedef struct scalar_results {
  uint32_t count;
  ssa_t base;
  const char *types;
  uint32_t *slot; /* result index -> position among the scalar results */
} scalar_results_t;

static bool collect_scalars(emitter_t *em, const tsr_op_t *op, scalar_results_t *sr) {
  memset(sr, 0, sizeof *sr);
  sr->slot = em_alloc(em, (op->num_results + 1) * sizeof *sr->slot);
  if (!sr->slot) return false;
  text_list_t types = {0};
  for (uint32_t i = 0; i < op->num_results; i++) {
    const tsr_type_t *t = &op->results[i]->type;
    if (t->kind != TSR_TYPE_SCALAR) continue;
    sr->slot[i] = sr->count++;
    tl_add(&types, "%s", em_compute((tsr_dtype_t)t->dtype));
  }
  sr->types = tsr_arena_strndup(&em->arena, tl_text(&types), types.sb.size);
  if (!sr->types) em_fail(em, TSR_OOM());
  tl_done(em, &types);
  sr->base = em_fresh(em);
  return EM_OK(em);
}

static ssa_t result_name(const scalar_results_t *sr, uint32_t k) {
  ssa_t r;
  if (sr->count == 1)
    r = sr->base;
  else
    snprintf(r.s, sizeof r.s, "%.30s#%u", sr->base.s, k);
  return r;
}

static void result_prefix(const scalar_results_t *sr, char *buf, size_t size) {
  if (sr->count == 0)
    buf[0] = 0;
  else if (sr->count == 1)
    snprintf(buf, size, "%s = ", sr->base.s);
  else
    snprintf(buf, size, "%s:%u = ", sr->base.s, sr->count);
}

/* "scf.yield a, b : T, T" of the scalar operands of a terminator. */
static void yield_scalars(emitter_t *em, const tsr_op_t *term, const char *what) {
  text_list_t names = {0}, types = {0};
  for (uint32_t i = 0; term && i < term->num_operands; i++) {
    const tsr_value_t *v = term->operands[i];
    if (v->type.kind != TSR_TYPE_SCALAR) continue;
    tl_add(&names, "%s", scalar_of(em, v).s);
    tl_add(&types, "%s", em_compute((tsr_dtype_t)v->type.dtype));
  }
  if (names.count)
    em_line(em, "%s %s : %s", what, tl_text(&names), tl_text(&types));
  else
    em_line(em, "%s", what);
  tl_done(em, &names);
  tl_done(em, &types);
}

static const tsr_op_t *terminator(const tsr_region_t *r) {
  const tsr_op_t *t = r->last;
  return t && (tsr_op_table[t->opcode].flags & TSR_F_TERMINATOR) ? t : NULL;
}

static void emit_in_region(emitter_t *em, const tsr_region_t *r) {
  const tsr_region_t *saved = em->region;
  em->region = r;
  emit_region(em, r);
  em->region = saved;
}

/* Block carries of a loop: one buffer per block result. */
static view_t **carry_buffers(emitter_t *em, const tsr_op_t *op) {
  view_t **c = em_alloc(em, (op->num_results + 1) * sizeof *c);
  if (!c) return NULL;
  for (uint32_t i = 0; i < op->num_results; i++) {
    const tsr_type_t *t = &op->results[i]->type;
    if (t->kind == TSR_TYPE_SCALAR) continue;
    c[i] = em_alloc(em, sizeof *c[i]);
    if (!c[i]) return NULL;
    *c[i] = em_buffer(em, (tsr_dtype_t)t->dtype, t->rank, t->dims);
  }
  return c;
}

static void bind_args(emitter_t *em, const tsr_region_t *r, uint32_t first, view_t **carry,
                      const ssa_t *scalar_names) {
  uint32_t k = 0;
  for (uint32_t i = first; i < r->num_args; i++) {
    const tsr_value_t *a = r->args[i];
    uint32_t slot = i - first;
    if (carry[slot])
      set_mem(em, a, *carry[slot]);
    else
      set_scalar(em, a, scalar_names[k++]);
  }
}

static void bind_results(emitter_t *em, const tsr_op_t *op, view_t **carry,
                         const scalar_results_t *sr) {
  for (uint32_t i = 0; i < op->num_results; i++) {
    if (carry[i])
      set_mem(em, op->results[i], *carry[i]);
    else
      set_scalar(em, op->results[i], result_name(sr, sr->slot[i]));
  }
}

static int64_t site_of(const emitter_t *em, const tsr_op_t *op);
static ssa_t count_step(emitter_t *em, ssa_t take, int64_t site, ssa_t point);

/* The initial values of a loop's carries, op's operands from `first` on:
 * a carry kept in a buffer (carry[i]) is stored there; a scalar one gets a
 * before- and an after-region argument, bargs[k] and aargs[k] from `k` on,
 * added to the lists (types may be NULL). Returns the next k. */
static uint32_t add_carries(emitter_t *em, const tsr_op_t *op, uint32_t first, view_t **carry,
                            ssa_t *bargs, ssa_t *aargs, uint32_t k, text_list_t *inits,
                            text_list_t *aparams, text_list_t *bnames, text_list_t *types) {
  for (uint32_t i = 0; i < op->num_results; i++) {
    const tsr_value_t *init = op->operands[first + i];
    if (carry[i]) {
      expr_t *e = ex_of_value(em, init, carry[i]->rank, carry[i]->dims);
      ex_store(em, e, carry[i], NULL);
      continue;
    }
    const char *t = em_compute((tsr_dtype_t)init->type.dtype);
    bargs[k] = em_fresh(em);
    aargs[k] = em_fresh(em);
    tl_add(inits, "%s = %s", bargs[k].s, scalar_of(em, init).s);
    tl_add(aparams, "%s: %s", aargs[k].s, t);
    tl_add(bnames, "%s", bargs[k].s);
    if (types) tl_add(types, "%s", t);
    k++;
  }
  return k;
}

/* scf.while over i32 [lo, hi) by step (a step <= 0 runs no iteration: the
 * interpreter reports it), the induction variable and the scalar carries
 * its arguments, each iteration a step of the run. The next value is
 * computed without overflow, as in the interpreter. */
static void op_for(emitter_t *em, const tsr_op_t *op) {
  const tsr_region_t *r = &op->regions[0];
  ssa_t lo = scalar_of(em, op->operands[0]), hi = scalar_of(em, op->operands[1]);
  ssa_t st = scalar_of(em, op->operands[2]);
  ssa_t pos = em_cmp(em, "cmpi", "sgt", st, em_cint(em, "i32", 0, 0), "i32");
  ssa_t hi2 = em_select(em, pos, hi, lo, "i32", 0, false);
  view_t **carry = carry_buffers(em, op);
  scalar_results_t sr;
  if (!carry || !collect_scalars(em, op, &sr)) return;
  ssa_t *bargs = em_alloc(em, (sr.count + 2) * sizeof *bargs);
  ssa_t *aargs = em_alloc(em, (sr.count + 2) * sizeof *aargs);
  if (!bargs || !aargs) return;
  text_list_t inits = {0}, aparams = {0}, bnames = {0}, types = {0};
  bargs[0] = em_fresh(em);
  aargs[0] = em_fresh(em);
  tl_add(&inits, "%s = %s", bargs[0].s, lo.s);
  tl_add(&aparams, "%s: i32", aargs[0].s);
  tl_add(&bnames, "%s", bargs[0].s);
  tl_add(&types, "i32");
  uint32_t k = add_carries(em, op, 3, carry, bargs, aargs, 1, &inits, &aparams, &bnames,
                           &types);
  ssa_t res = em_fresh(em);
  em_open(em, "%s:%u = scf.while (%s) : (%s) -> (%s) {", res.s, k, tl_text(&inits),
          tl_text(&types), tl_text(&types));
  ssa_t in = em_cmp(em, "cmpi", "slt", bargs[0], hi2, "i32");
  ssa_t go = em_op2(em, "arith.andi", in, count_step(em, in, site_of(em, op), em_cint(em, "i64", 0, 0)), "i1");
  em_line(em, "scf.condition(%s) %s : %s", go.s, tl_text(&bnames), tl_text(&types));
  em->indent--;
  em_open(em, "} do {");
  em_line(em, "^bb0(%s):", tl_text(&aparams));
  set_scalar(em, r->args[0], aargs[0]);
  bind_args(em, r, 1, carry, aargs + 1);
  emit_in_region(em, r);
  const tsr_op_t *term = terminator(r);
  if (term) copy_yields(em, term, carry);
  /* next = i + step if it stays below hi (computed in i64), else hi */
  ssa_t n64 = em_op2(em, "arith.addi", em_cast(em, "arith.extsi", aargs[0], "i32", "i64"),
                     em_cast(em, "arith.extsi", st, "i32", "i64"), "i64");
  ssa_t below = em_cmp(em, "cmpi", "slt", n64, em_cast(em, "arith.extsi", hi2, "i32", "i64"),
                       "i64");
  ssa_t next = em_select(em, below, em_cast(em, "arith.trunci", n64, "i64", "i32"), hi2, "i32", 0,
                         false);
  text_list_t ys = {0};
  tl_add(&ys, "%s", next.s);
  for (uint32_t i = 0; term && i < term->num_operands; i++) {
    const tsr_value_t *v = term->operands[i];
    if (v->type.kind == TSR_TYPE_SCALAR) tl_add(&ys, "%s", scalar_of(em, v).s);
  }
  em_line(em, "scf.yield %s : %s", tl_text(&ys), tl_text(&types));
  em_close(em, "}");
  tl_done(em, &ys);
  tl_done(em, &inits);
  tl_done(em, &aparams);
  tl_done(em, &bnames);
  tl_done(em, &types);
  for (uint32_t i = 0; i < op->num_results; i++) {
    if (carry[i]) {
      set_mem(em, op->results[i], *carry[i]);
    } else {
      ssa_t name;
      snprintf(name.s, sizeof name.s, "%.30s#%u", res.s, sr.slot[i] + 1);
      set_scalar(em, op->results[i], name);
    }
  }
}

static void op_while(emitter_t *em, const tsr_op_t *op) {
  const tsr_region_t *before = &op->regions[0], *after = &op->regions[1];
  view_t **carry = carry_buffers(em, op);
  scalar_results_t sr;
  if (!carry || !collect_scalars(em, op, &sr)) return;
  ssa_t *bargs = em_alloc(em, (sr.count + 1) * sizeof *bargs);
  ssa_t *aargs = em_alloc(em, (sr.count + 1) * sizeof *aargs);
  if (!bargs || !aargs) return;
  text_list_t inits = {0}, aparams = {0}, bnames = {0};
  (void)add_carries(em, op, 0, carry, bargs, aargs, 0, &inits, &aparams, &bnames, NULL);
  char prefix[64];
  result_prefix(&sr, prefix, sizeof prefix);
  if (sr.count)
    em_open(em, "%sscf.while (%s) : (%s) -> (%s) {", prefix, tl_text(&inits), sr.types,
            sr.types);
  else
    em_open(em, "scf.while : () -> () {");
  tl_done(em, &inits);
  bind_args(em, before, 0, carry, bargs);
  emit_in_region(em, before);
  const tsr_op_t *cond = terminator(before);
  if (!cond || cond->opcode != TSR_OP_CONDITION) {
    em_unimplemented(em, op, "while without condition");
    tl_done(em, &aparams);
    tl_done(em, &bnames);
    return;
  }
  ssa_t c = scalar_of(em, cond->operands[0]);
  c = em_op2(em, "arith.andi", c, count_step(em, c, site_of(em, op), em_cint(em, "i64", 0, 0)), "i1");
  if (sr.count)
    em_line(em, "scf.condition(%s) %s : %s", c.s, tl_text(&bnames), sr.types);
  else
    em_line(em, "scf.condition(%s)", c.s);
  em->indent--;
  em_open(em, "} do {");
  if (sr.count) em_line(em, "^bb0(%s):", tl_text(&aparams));
  tl_done(em, &aparams);
  tl_done(em, &bnames);
  bind_args(em, after, 0, carry, aargs);
  emit_in_region(em, after);
  const tsr_op_t *term = terminator(after);
  if (term) copy_yields(em, term, carry);
  yield_scalars(em, term, "scf.yield");
  em_close(em, "}");
  bind_results(em, op, carry, &sr);
}

static void op_if(emitter_t *em, const tsr_op_t *op) {
  ssa_t c = scalar_of(em, op->operands[0]);
  view_t **dest = carry_buffers(em, op);
  scalar_results_t sr;
  if (!dest || !collect_scalars(em, op, &sr)) return;
  char prefix[64];
  result_prefix(&sr, prefix, sizeof prefix);
  if (sr.count)
    em_open(em, "%sscf.if %s -> (%s) {", prefix, c.s, sr.types);
  else
    em_open(em, "scf.if %s {", c.s);
  for (uint32_t b = 0; b < op->num_regions; b++) {
    const tsr_region_t *r = &op->regions[b];
    if (b == 1) {
      if (!(op->flags & TSR_OPF_HAS_ELSE) && op->num_results == 0 && !r->first) break;
      em->indent--;
      em_open(em, "} else {");
    }
    emit_in_region(em, r);
    const tsr_op_t *term = terminator(r);
    if (term) copy_yields(em, term, dest);
    if (sr.count) yield_scalars(em, term, "scf.yield");
  }
  em_close(em, "}");
  bind_results(em, op, dest, &sr);
}

static void sem_ref_init(emitter_t *em, const tsr_value_t *ref);
static void fill_view(emitter_t *em, const view_t *v, tsr_dtype_t dtype);

static void op_scoped(emitter_t *em, const tsr_op_t *op) {
  const tsr_region_t *r = &op->regions[0];
  for (uint32_t i = 0; i < r->num_args; i++) {
    const tsr_value_t *a = r->args[i];
    if (a->type.kind == TSR_TYPE_SEM) {
      sem_ref_init(em, a);
      continue;
    }
    vinfo_t *vi = vi_of(em, a);
    vi->kind = VK_REF;
    vi->mem = em_buffer(em, (tsr_dtype_t)a->type.dtype, a->type.rank, a->type.dims);
    vi->mem.key = em_key(em, "R%u", a->id);
    vi->mutable_ref = em->stored[a->id];
    /* fresh at every entry, as in the interpreter, unless fully stored first */
    if (!first_touch_stores_all(r, a)) fill_view(em, &vi->mem, (tsr_dtype_t)a->type.dtype);
  }
  emit_in_region(em, r);
  const tsr_op_t *term = terminator(r);
  for (uint32_t i = 0; term && i < op->num_results && i < term->num_operands; i++) {
    const tsr_value_t *v = term->operands[i];
    vinfo_t *vi = vi_of(em, v);
    if (vi->kind == VK_LAZY) {
      set_mem(em, op->results[i], em_materialize(em, vi->expr));
    } else {
      em->vals[op->results[i]->id] = *vi;
    }
  }
}

/* ---- The runtime: semaphores, DMAs between cores, print and assert ------------------------------
 * Semaphores belong to the runtime (lower_api.h): a sem ref's vinfo is a
 * view that is never materialized, whose offset is its first slot, so that
 * the offset of an element is its slot. Local DMAs copy inline at dma_start
 * (the interpreter's --dma-mode eager); the copy is complete before the
 * runtime signals the semaphore, and a core that waited for it sees it. */

struct em_site {
  const tsr_op_t *op;
  uint32_t position;
};

static int compare_sites(const void *a, const void *b) {
  uintptr_t x = (uintptr_t)((const struct em_site *)a)->op;
  uintptr_t y = (uintptr_t)((const struct em_site *)b)->op;
  return x < y ? -1 : x > y;
}

/* The op's position in tsr_ir_walk_ops order (its diagnostic site). */
static int64_t site_of(const emitter_t *em, const tsr_op_t *op) {
  struct em_site key = {op, 0};
  const struct em_site *s =
      bsearch(&key, em->sites, em->num_sites, sizeof *em->sites, compare_sites);
  return s ? s->position : 0;
}

static ssa_t i64_of_index(emitter_t *em, ssa_t v) {
  return em_cast(em, "arith.index_cast", v, "index", "i64");
}

static ssa_t i64_of_i32(emitter_t *em, ssa_t v) { return em_cast(em, "arith.extsi", v, "i32", "i64"); }

/* rt_fn(rt_ctx, call, a, b, c, d) -> i64 */
static ssa_t rt_call(emitter_t *em, tsr_lower_rt_call_t call, ssa_t a, ssa_t b, ssa_t c,
                     ssa_t d) {
  ssa_t r = em_fresh(em);
  em_line(em,
          "%s = llvm.call %s(%s, %s, %s, %s, %s, %s) : !llvm.ptr, "
          "(!llvm.ptr, i64, i64, i64, i64, i64) -> i64",
          r.s, em->rt_fn.s, em->rt_ctx.s, em_cint(em, "i64", 0, call).s, a.s, b.s, c.s, d.s);
  return r;
}

static ssa_t c64(emitter_t *em, int64_t v) { return em_cint(em, "i64", 0, v); }

/* A step of the run (a grid step, or a loop iteration when `take`, an i1,
 * holds): takes one from this core's budget in the context and calls the
 * runtime (TSR_RT_STEP) when it runs out, which grants more or stops the
 * run. `point`: for a grid step, the i64 number of the grid point it
 * starts (not yet stored in the context), else 0. Returns an i1: go on. */
static ssa_t count_step(emitter_t *em, ssa_t take, int64_t site, ssa_t point) {
  ssa_t b = em_fresh(em);
  em_line(em, "%s = llvm.load %s : !llvm.ptr -> i64", b.s, em->budget_p.s);
  ssa_t dec = em_cast(em, "arith.extui", take, "i1", "i64");
  ssa_t b1 = em_op2(em, "arith.subi", b, dec, "i64");
  ssa_t out = em_cmp(em, "cmpi", "slt", b1, c64(em, 0), "i64");
  ssa_t b2 = em_fresh(em);
  em_open(em, "%s = scf.if %s -> (i64) {", b2.s, out.s);
  ssa_t g = rt_call(em, TSR_RT_STEP, c64(em, site), point, c64(em, 0), c64(em, 0));
  em_line(em, "scf.yield %s : i64", g.s);
  em->indent--;
  em_open(em, "} else {");
  em_line(em, "scf.yield %s : i64", b1.s);
  em_close(em, "}");
  em_line(em, "llvm.store %s, %s : i64, !llvm.ptr", b2.s, em->budget_p.s);
  return em_cmp(em, "cmpi", "sge", b2, c64(em, 0), "i64");
}

/* The address (index) of a memref<n x i64> made by memref.alloca. */
static ssa_t alloca_address(emitter_t *em, ssa_t m, uint32_t n) {
  ssa_t p = em_fresh(em);
  em_line(em, "%s = memref.extract_aligned_pointer_as_index %s : memref<%uxi64> -> index", p.s,
          m.s, n);
  return p;
}

/* The element offset (index) of op's all-point indices [first, ..) into the
 * view `rv`; for a semaphore ref, its slot. */
static ssa_t point_offset(emitter_t *em, const tsr_op_t *op, const view_t *rv, uint32_t first) {
  bool pts;
  ssa_t points[TSR_MAX_RANK];
  (void)ref_view_at(em, op, rv, first, &pts, points);
  if (!pts) {
    em_unimplemented(em, op, "a semaphore indexed by a slice");
    return em_cidx(em, 0);
  }
  ssa_t off = rv->off;
  for (uint32_t d = 0; d < rv->rank; d++) off = em_iadd(em, off, em_imulc(em, points[d], rv->strides[d]));
  return off;
}

/* i64 slot|site of the semaphore element op names at indices [first, ..). */
static ssa_t sem_arg(emitter_t *em, const tsr_op_t *op, const tsr_value_t *sem, uint32_t first) {
  ssa_t slot = i64_of_index(em, point_offset(em, op, &vi_of(em, sem)->mem, first));
  return em_op2(em, "arith.addi", slot, c64(em, site_of(em, op) << 32), "i64");
}

/* The semaphore refs of the kernel and its scoped ops (tsr_ir_semaphore_slots). */
static void sem_ref_init(emitter_t *em, const tsr_value_t *ref) {
  vinfo_t *vi = vi_of(em, ref);
  const tsr_type_t *t = &ref->type;
  memset(&vi->mem, 0, sizeof vi->mem);
  vi->kind = VK_REF;
  vi->mutable_ref = true;
  vi->mem.root = UINT32_MAX;
  vi->mem.rank = t->rank;
  for (uint32_t d = 0; d < t->rank; d++) vi->mem.dims[d] = t->dims[d];
  em_dense_strides(t->rank, t->dims, vi->mem.strides);
  vi->mem.off = em_cidx(em, em->sem_slot[ref->id]);
}

/* The address (i64) of the first element of op's view [first, ..) of ref
 * `v`, its dims and element strides; *rel: its offset from the root's base. */
static ssa_t view_address(emitter_t *em, const tsr_op_t *op, const tsr_value_t *v, uint32_t first,
                          view_t *out, ssa_t *rel) {
  vinfo_t *vi = vi_of(em, v);
  bool pts;
  ssa_t points[TSR_MAX_RANK];
  view_t w = ref_view_at(em, op, &vi->mem, first, &pts, points);
  if (pts) {
    ssa_t off = vi->mem.off;
    for (uint32_t d = 0; d < vi->mem.rank; d++)
      off = em_iadd(em, off, em_imulc(em, points[d], vi->mem.strides[d]));
    memset(&w, 0, sizeof w);
    w.root = vi->mem.root;
    w.off = off;
  }
  *out = w;
  *rel = em_op2(em, "arith.subi", w.off, em_root_base(em, w.root), "index");
  return em_root_address(em, w.root, w.off);
}

/* dma_start .. device %d: the runtime copies into the other core's memory
 * and signals both semaphores. */
static void remote_dma(emitter_t *em, const tsr_op_t *op, uint32_t nsrc, uint32_t ndst,
                       uint32_t nsem) {
  const tsr_value_t *dst = op->operands[1];
  view_t sv, dv;
  ssa_t srel, drel;
  ssa_t src_addr = view_address(em, op, op->operands[0], 0, &sv, &srel);
  (void)view_address(em, op, dst, nsrc, &dv, &drel);
  if (dv.root == UINT32_MAX || sv.root == UINT32_MAX) return;
  uint32_t rank = dv.rank;
  uint32_t n = TSR_RDMA_DIMS + 3 * rank;
  ssa_t desc = em_fresh(em);
  tsr_strbuf_printf(&em->pro, "    %s = memref.alloca() : memref<%uxi64>\n", desc.s, n);
  ssa_t f[TSR_RDMA_DIMS + 3 * TSR_MAX_RANK];
  f[TSR_RDMA_DEVICE] = i64_of_i32(em, scalar_of(em, op->operands[op->num_operands - 1]));
  f[TSR_RDMA_ROOT] = c64(em, dv.root);
  f[TSR_RDMA_OFFSET] = i64_of_index(em, drel);
  f[TSR_RDMA_SRC] = src_addr;
  f[TSR_RDMA_RANK] = c64(em, rank);
  f[TSR_RDMA_DTYPE] = c64(em, dst->type.dtype);
  f[TSR_RDMA_ADD] = c64(em, (op->flags & TSR_OPF_DMA_ADD) != 0);
  f[TSR_RDMA_SEM] = i64_of_index(em, point_offset(em, op, &vi_of(em, op->operands[2])->mem,
                                                  nsrc + ndst));
  f[TSR_RDMA_SEND] = (op->flags & TSR_OPF_SEND)
                         ? i64_of_index(em, point_offset(em, op, &vi_of(em, op->operands[3])->mem,
                                                         nsrc + ndst + nsem))
                         : c64(em, -1);
  for (uint32_t d = 0; d < rank; d++) {
    f[TSR_RDMA_DIMS + d] = c64(em, dv.dims[d]);
    f[TSR_RDMA_DIMS + rank + d] = c64(em, sv.strides[d]);
    f[TSR_RDMA_DIMS + 2 * rank + d] = c64(em, dv.strides[d]);
  }
  for (uint32_t i = 0; i < n; i++)
    em_line(em, "memref.store %s, %s[%s] : memref<%uxi64>", f[i].s, desc.s, em_cidx(em, i).s, n);
  ssa_t addr = em_cast(em, "arith.index_cast", alloca_address(em, desc, n), "index", "i64");
  (void)rt_call(em, TSR_RT_REMOTE_DMA, c64(em, site_of(em, op)), addr, c64(em, 0), c64(em, 0));
}

static void op_dma(emitter_t *em, const tsr_op_t *op) {
  const tsr_value_t *src = op->operands[0], *dst = op->operands[1], *sem = op->operands[2];
  const uint32_t nsrc = (uint32_t)op->ints[0], ndst = (uint32_t)op->ints[1];
  const uint32_t nsem = (uint32_t)op->ints[2];
  const tsr_dtype_t dtype = (tsr_dtype_t)dst->type.dtype;
  vinfo_t *sv = vi_of(em, src), *dv = vi_of(em, dst);
  bool dpts, spts;
  ssa_t dpoints[TSR_MAX_RANK], spoints[TSR_MAX_RANK];
  if (op->opcode == TSR_OP_DMA_START && (op->flags & TSR_OPF_DEVICE)) {
    remote_dma(em, op, nsrc, ndst, nsem);
    return;
  }
  view_t dvw = ref_view_at(em, op, &dv->mem, nsrc, &dpts, dpoints);
  int64_t elems = 1;
  for (uint32_t d = 0; !dpts && d < dvw.rank; d++) elems *= dvw.dims[d];
  ssa_t bytes = c64(em, elems * (int64_t)tsr_dtype_size(dtype));
  ssa_t none = c64(em, -1);
  if (op->opcode == TSR_OP_DMA_WAIT) {
    (void)rt_call(em, TSR_RT_WAIT, sem_arg(em, op, sem, nsrc + ndst), bytes, none, none);
    return;
  }
  const bool add = (op->flags & TSR_OPF_DMA_ADD) != 0;
  view_t svw = ref_view_at(em, op, &sv->mem, 0, &spts, spoints);
  if (dpts) {
    nest_t n;
    memset(&n, 0, sizeof n);
    ssa_t v = em_mem_read(em, &sv->mem, dtype, spoints, &n, NULL, NULL);
    if (add) {
      ssa_t args[2] = {em_mem_read(em, &dv->mem, dtype, dpoints, &n, NULL, NULL), v};
      v = em_elementwise(em, TSR_OP_ADD, dtype, args, 0);
    }
    em_mem_write(em, &dv->mem, dtype, dpoints, &n, v, NULL);
  } else {
    expr_t *e = ex_new(em, EX_MEM, dtype, dvw.rank, dvw.dims);
    if (!e) return;
    e->mem = svw;
    if (add) {
      expr_t *d = ex_new(em, EX_MEM, dtype, dvw.rank, dvw.dims), *s2 = e;
      e = ex_new(em, EX_OP, dtype, dvw.rank, dvw.dims);
      if (!d || !e) return;
      d->mem = dvw;
      e->op = TSR_OP_ADD;
      e->arg_dtype = dtype;
      e->nargs = 2;
      e->args[0] = d;
      e->args[1] = s2;
    }
    if (!ex_inplace_safe(em, e, &dvw)) {
      view_t t = em_materialize(em, e);
      e = ex_new(em, EX_MEM, dtype, dvw.rank, dvw.dims);
      if (!e) return;
      e->mem = t;
    }
    ex_store(em, e, &dvw, NULL);
  }
  (void)rt_call(em, TSR_RT_SIGNAL, sem_arg(em, op, sem, nsrc + ndst), bytes, none, none);
  if (op->flags & TSR_OPF_SEND)
    (void)rt_call(em, TSR_RT_SIGNAL, sem_arg(em, op, op->operands[3], nsrc + ndst + nsem), bytes,
                  none, none);
}

static void op_semaphore(emitter_t *em, const tsr_op_t *op) {
  const tsr_value_t *sem = op->operands[0];
  ssa_t none = c64(em, -1);
  switch (op->opcode) {
    case TSR_OP_SEM_SIGNAL: {
      uint32_t tail = op->num_operands;
      ssa_t core = none, device = none;
      if (op->flags & TSR_OPF_CORE) core = i64_of_i32(em, scalar_of(em, op->operands[--tail]));
      if (op->flags & TSR_OPF_DEVICE) device = i64_of_i32(em, scalar_of(em, op->operands[--tail]));
      (void)rt_call(em, TSR_RT_SIGNAL, sem_arg(em, op, sem, 0),
                    i64_of_i32(em, scalar_of(em, op->operands[1])), device, core);
      return;
    }
    case TSR_OP_SEM_WAIT:
      (void)rt_call(em, TSR_RT_WAIT, sem_arg(em, op, sem, 0),
                    i64_of_i32(em, scalar_of(em, op->operands[1])), none, none);
      return;
    case TSR_OP_CORE_BARRIER:
      (void)rt_call(em, TSR_RT_BARRIER, sem_arg(em, op, sem, 0), none, none, none);
      return;
    case TSR_OP_SEM_READ: {
      ssa_t v = rt_call(em, TSR_RT_READ, sem_arg(em, op, sem, 0), none, none, none);
      set_scalar(em, op->results[0], em_cast(em, "arith.trunci", v, "i64", "i32"));
      return;
    }
    default: em_unimplemented(em, op, NULL); return;
  }
}

/* print: each operand's elements in a dense buffer (scalars: a rank-0 one),
 * their addresses in an array the runtime formats from. */
static void op_print(emitter_t *em, const tsr_op_t *op) {
  uint32_t n = op->num_operands ? op->num_operands : 1;
  ssa_t addrs = em_fresh(em);
  tsr_strbuf_printf(&em->pro, "    %s = memref.alloca() : memref<%uxi64>\n", addrs.s, n);
  for (uint32_t i = 0; i < op->num_operands; i++) {
    const tsr_value_t *v = op->operands[i];
    tsr_dtype_t dtype = (tsr_dtype_t)v->type.dtype;
    view_t w;
    if (v->type.kind == TSR_TYPE_SCALAR) {
      w = em_buffer(em, dtype, 0, NULL);
      nest_t nn;
      memset(&nn, 0, sizeof nn);
      ssa_t none[1];
      em_mem_write(em, &w, dtype, none, &nn, scalar_of(em, v), NULL);
    } else {
      w = dense_view_of(em, v);
    }
    em_line(em, "memref.store %s, %s[%s] : memref<%uxi64>", em_root_address(em, w.root, w.off).s,
            addrs.s, em_cidx(em, i).s, n);
  }
  ssa_t a = em_cast(em, "arith.index_cast", alloca_address(em, addrs, n), "index", "i64");
  (void)rt_call(em, TSR_RT_PRINT, c64(em, site_of(em, op)), a, c64(em, 0), c64(em, 0));
}

static void op_assert(emitter_t *em, const tsr_op_t *op) {
  ssa_t c = scalar_of(em, op->operands[0]);
  ssa_t failed = em_op2(em, "arith.xori", c, em_cbool(em, 0, true), "i1");
  em_open(em, "scf.if %s {", failed.s);
  (void)rt_call(em, TSR_RT_ASSERT, c64(em, site_of(em, op)), c64(em, 0), c64(em, 0), c64(em, 0));
  em_close(em, "}");
}

/* ---- Dispatch ------------------------------------------------------------------------------- */

static void emit_op(emitter_t *em, const tsr_op_t *op) {
  const tsr_op_info_t *info = &tsr_op_table[op->opcode];
  em->op = op;
  /* The lines of each op that makes code start with its location, so that
   * `tessera lower --stage mlir` reads alongside the kernel and an MLIR
   * diagnostic at a line of the generated text can name the op. */
  switch (info->rule) {
    case TSR_RULE_CONST:
    case TSR_RULE_GRID_QUERY:
    case TSR_RULE_ID_QUERY:
    case TSR_RULE_YIELD:
    case TSR_RULE_CONDITION: break;
    default:
      if (op->loc.file && !strpbrk(op->loc.file, "\r\n"))
        em_line(em, "// %s:%u:%u: %s", op->loc.file, op->loc.line, op->loc.col, info->mnemonic);
      break;
  }
  switch (info->rule) {
    case TSR_RULE_CONST: op_const(em, op); return;
    case TSR_RULE_GRID_QUERY: {
      uint32_t axis = (uint32_t)op->ints[0];
      if (op->opcode == TSR_OP_PROGRAM_ID)
        set_scalar(em, op->results[0], em->grid_i32[axis]);
      else
        set_scalar(em, op->results[0], em_cint(em, "i32", 0, em->k->grid[axis]));
      return;
    }
    case TSR_RULE_LOAD: op_load(em, op); return;
    case TSR_RULE_STORE: op_store(em, op); return;
    case TSR_RULE_ELEMWISE:
    case TSR_RULE_COMPARE:
    case TSR_RULE_SELECT:
    case TSR_RULE_CONVERT:
    case TSR_RULE_BITCAST: op_elementwise(em, op); return;
    case TSR_RULE_IOTA: op_iota(em, op); return;
    case TSR_RULE_BROADCAST: op_broadcast(em, op); return;
    case TSR_RULE_RESHAPE: op_reshape(em, op); return;
    case TSR_RULE_TRANSPOSE: em_op_transpose(em, op); return;
    case TSR_RULE_SLICE: op_slice(em, op); return;
    case TSR_RULE_CONCATENATE: em_op_concatenate(em, op); return;
    case TSR_RULE_ROLL: em_op_roll(em, op); return;
    case TSR_RULE_GATHER: em_op_gather(em, op); return;
    case TSR_RULE_REDUCE: em_op_reduce(em, op); return;
    case TSR_RULE_ARG_REDUCE: em_op_argreduce(em, op); return;
    case TSR_RULE_DOT: em_op_dot(em, op); return;
    case TSR_RULE_FOR: op_for(em, op); return;
    case TSR_RULE_WHILE: op_while(em, op); return;
    case TSR_RULE_IF: op_if(em, op); return;
    case TSR_RULE_SCOPED: op_scoped(em, op); return;
    case TSR_RULE_YIELD:
    case TSR_RULE_CONDITION: return; /* read by the parent op */
    case TSR_RULE_PRINT: op_print(em, op); return;
    case TSR_RULE_ASSERT: op_assert(em, op); return;
    case TSR_RULE_DMA: op_dma(em, op); return;
    case TSR_RULE_SEMAPHORE: op_semaphore(em, op); return;
    case TSR_RULE_ID_QUERY:
      set_scalar(em, op->results[0], op->opcode == TSR_OP_DEVICE_ID ? em->device : em->core);
      return;
    case TSR_RULE_RESERVED: em_unimplemented(em, op, NULL); return;
  }
  em_unimplemented(em, op, NULL);
}

static void emit_region(emitter_t *em, const tsr_region_t *r) {
  for (const tsr_op_t *op = r->first; op && EM_OK(em); op = op->next) emit_op(em, op);
}

/* ---- The grid pipeline ---------------------------------------------------------------------- */

/* Block indices of operand `os` at the grid point `pt` (i32 values),
 * clamped into the array (an out-of-range block index is a kernel error in
 * the interpreter; here it reads or writes the nearest block instead of
 * memory outside the array). */
static void eval_map(emitter_t *em, operand_state_t *os, const ssa_t *pt, ssa_t *out) {
  const tsr_decl_t *d = os->decl;
  uint32_t rank = d->array.rank;
  if (!d->index_map) {
    for (uint32_t i = 0; i < rank; i++) out[i] = em_cidx(em, 0);
    return;
  }
  const tsr_region_t *m = d->index_map;
  for (uint32_t i = 0; i < m->num_args; i++) set_scalar(em, m->args[i], pt[i]);
  emit_in_region(em, m);
  const tsr_op_t *y = terminator(m);
  for (uint32_t i = 0; i < rank; i++) {
    if (!y || i >= y->num_operands) {
      out[i] = em_cidx(em, 0);
      continue;
    }
    out[i] = clamp_index(em, scalar_of(em, y->operands[i]), os->nblocks[i] - 1);
  }
}

/* Offset of the window of block indices bi in the array. */
static ssa_t window_offset(emitter_t *em, const operand_state_t *os, const ssa_t *bi) {
  ssa_t off = em_root_base(em, os->root);
  for (uint32_t i = 0; i < os->decl->array.rank; i++)
    off = em_iadd(em, off, em_imulc(em, bi[i], os->block[i] * os->astrides[i]));
  return off;
}

/* The valid extent of the window along each kept dim (min(block, dim - start)). */
static void window_extent(emitter_t *em, const operand_state_t *os, const ssa_t *bi,
                          dimv_t *ext) {
  uint32_t k = 0;
  const tsr_decl_t *d = os->decl;
  for (uint32_t i = 0; i < d->array.rank; i++) {
    if (d->block[i] == TSR_SQUEEZED) continue;
    if (d->array.dims[i] % os->block[i] == 0) {
      ext[k++] = em_dimc(os->block[i]);
      continue;
    }
    ssa_t start = em_imulc(em, bi[i], os->block[i]);
    ssa_t left = em_op2(em, "arith.subi", em_cidx(em, d->array.dims[i]), start, "index");
    ext[k++] = em_dims(em_op2(em, "arith.minsi", left, em_cidx(em, os->block[i]), "index"));
  }
}

typedef struct copy_ctx {
  const view_t *dst, *src;
  tsr_dtype_t dtype;
} copy_ctx_t;

static void copy_body(emitter_t *em, const nest_t *n, void *p) {
  copy_ctx_t *c = p;
  /* storage to storage: no conversion */
  char il[512] = "";
  size_t len = 0;
  for (uint32_t d = 0; d < n->rank; d++) {
    snprintf(il + len, sizeof il - len, "%s%s", d ? ", " : "", n->idx[d].s);
    len += strlen(il + len);
  }
  tstr_t st = em_view_type(em, c->src), dt = em_view_type(em, c->dst);
  const char *el = em_storage(c->dtype);
  ssa_t v = em_fresh(em);
  if (!n->lanes) {
    em_line(em, "%s = memref.load %s[%s] : %s", v.s, c->src->name.s, il, st.s);
    em_line(em, "memref.store %s, %s[%s] : %s", v.s, c->dst->name.s, il, dt.s);
    return;
  }
  tstr_t vt = em_vtype(el, n->lanes);
  if (n->masked) {
    ssa_t z = strcmp(el, "f32") == 0 ? em_cf32(em, n->lanes, 0.0f) : em_cint(em, el, n->lanes, 0);
    em_line(em, "%s = vector.maskedload %s[%s], %s, %s : %s, vector<%uxi1>, %s into %s", v.s,
            c->src->name.s, il, n->mask.s, z.s, st.s, n->lanes, vt.s, vt.s);
    em_line(em, "vector.maskedstore %s[%s], %s, %s : %s, vector<%uxi1>, %s", c->dst->name.s,
            il, n->mask.s, v.s, dt.s, n->lanes, vt.s);
  } else {
    em_line(em, "%s = vector.load %s[%s] : %s, %s", v.s, c->src->name.s, il, st.s, vt.s);
    em_line(em, "vector.store %s, %s[%s] : %s, %s", v.s, c->dst->name.s, il, dt.s, vt.s);
  }
}

/* Copies ext (per dim, possibly dynamic) elements from src to dst. */
static void copy_views(emitter_t *em, const view_t *dst, const view_t *src, tsr_dtype_t dtype,
                       const dimv_t *ext) {
  copy_ctx_t c = {.dst = dst, .src = src, .dtype = dtype};
  uint32_t rank = dst->rank, lanes = 0;
  bool unit = rank > 0 && dst->strides[rank - 1] == 1 && src->strides[rank - 1] == 1;
  if (unit) lanes = em_pick_lanes(dst->dims[rank - 1]);
  em_nest(em, rank, ext, lanes, copy_body, &c);
}

static void fill_view(emitter_t *em, const view_t *v, tsr_dtype_t dtype) {
  expr_t *e = ex_new(em, EX_SCALAR, dtype, v->rank, v->dims);
  if (!e) return;
  e->scalar = em_uninit(em, dtype, 0);
  ex_store(em, e, v, NULL);
}

/* The HBM window of operand os at block indices bi, as a view. */
static view_t window_view(emitter_t *em, const operand_state_t *os, const ssa_t *bi,
                          const char *key) {
  return em_view_make(em, os->root, window_offset(em, os, bi), os->ref_rank, os->ref_dims,
                      os->ref_strides, key);
}

static void step_begin(emitter_t *em, kernel_state_t *ks, operand_state_t *os) {
  const tsr_decl_t *d = os->decl;
  vinfo_t *vi = vi_of(em, d->ref);
  eval_map(em, os, em->grid_i32, os->bi);
  if (os->inplace) {
    vi->kind = VK_REF;
    vi->mem = window_view(em, os, os->bi, em_key(em, "R%u", d->ref->id));
    vi->mutable_ref = em->stored[d->ref->id];
  }
  if (!os->tracked) return;
  uint32_t rank = d->array.rank;
  ssa_t changed = ks->first;
  for (uint32_t i = 0; i < rank; i++) {
    ssa_t prev = em_fresh(em);
    em_line(em, "%s = memref.load %s[%s] : memref<%uxindex>", prev.s, ks->state.s,
            em_cidx(em, os->state + i).s, ks->state_slots);
    ssa_t ne = em_cmp(em, "cmpi", "ne", prev, os->bi[i], "index");
    changed = em_op2(em, "arith.ori", changed, ne, "i1");
  }
  em_open(em, "scf.if %s {", changed.s);
  if (d->role == TSR_ROLE_IN) {
    dimv_t ext[TSR_MAX_RANK];
    window_extent(em, os, os->bi, ext);
    if (os->maybe_padded) {
      ssa_t pad = em_cbool(em, 0, false);
      for (uint32_t k = 0; k < os->ref_rank; k++) {
        if (!ext[k].dynamic) continue;
        ssa_t lt = em_cmp(em, "cmpi", "slt", ext[k].s, em_cidx(em, os->ref_dims[k]), "index");
        pad = em_op2(em, "arith.ori", pad, lt, "i1");
      }
      em_open(em, "scf.if %s {", pad.s);
      fill_view(em, &os->buf, (tsr_dtype_t)d->array.dtype);
      em_close(em, "}");
    }
    view_t src = window_view(em, os, os->bi, NULL);
    copy_views(em, &os->buf, &src, (tsr_dtype_t)d->array.dtype, ext);
  }
  if (os->fill_out) fill_view(em, &vi->mem, (tsr_dtype_t)d->array.dtype);
  for (uint32_t i = 0; i < rank; i++)
    em_line(em, "memref.store %s, %s[%s] : memref<%uxindex>", os->bi[i].s, ks->state.s,
            em_cidx(em, os->state + i).s, ks->state_slots);
  em_close(em, "}");
}

static void step_end(emitter_t *em, kernel_state_t *ks, operand_state_t *os) {
  const tsr_decl_t *d = os->decl;
  const tsr_kernel_t *k = em->k;
  uint32_t rank = d->array.rank;
  /* The next step's grid point (wrapping after the last: unused then). */
  ssa_t next[TSR_MAX_RANK];
  int64_t total = 1;
  for (uint32_t g = 0; g < k->grid_rank; g++) total *= k->grid[g];
  ssa_t lin1 = em_iaddc(em, ks->lin, 1);
  lin1 = em_op2(em, "arith.remui", lin1, em_cidx(em, total), "index");
  int64_t stride = 1;
  for (uint32_t g = k->grid_rank; g-- > 0;) {
    ssa_t q = em_op2(em, "arith.divui", lin1, em_cidx(em, stride), "index");
    q = em_op2(em, "arith.remui", q, em_cidx(em, k->grid[g]), "index");
    next[g] = em_cast(em, "arith.index_cast", q, "index", "i32");
    stride *= k->grid[g];
  }
  ssa_t nbi[TSR_MAX_RANK];
  eval_map(em, os, next, nbi);
  ssa_t leave = ks->last;
  for (uint32_t i = 0; i < rank; i++) {
    ssa_t ne = em_cmp(em, "cmpi", "ne", nbi[i], os->bi[i], "index");
    leave = em_op2(em, "arith.ori", leave, ne, "i1");
  }
  em_open(em, "scf.if %s {", leave.s);
  dimv_t ext[TSR_MAX_RANK];
  window_extent(em, os, os->bi, ext);
  view_t dst = window_view(em, os, os->bi, NULL);
  copy_views(em, &dst, &os->buf, (tsr_dtype_t)d->array.dtype, ext);
  em_close(em, "}");
}

/* Kernels with remote DMAs: every core tells the runtime where its memory
 * is (in the prologue), then, once its first step's blocks are set up, waits
 * until all have (TSR_RT_START, meet_at_start); at the end it waits for all
 * before freeing it (TSR_RT_END), so no DMA from another core can write into
 * memory that is not there yet, not yet initialised, or gone. */

/* TSR_RT_START when `cond` (i1) holds: wait until every core is there. */
static void meet_at_start(emitter_t *em, ssa_t cond) {
  em_open(em, "scf.if %s {", cond.s);
  (void)rt_call(em, TSR_RT_START, c64(em, 0), c64(em, 0), c64(em, 0), c64(em, 0));
  em_close(em, "}");
}

static void register_memory(emitter_t *em) {
  tsr_strbuf_t *saved = em->cur;
  int saved_indent = em->indent;
  em->cur = &em->pro;
  em->indent = 2;
  ssa_t zero = c64(em, 0);
  uint32_t roots = em->num_roots;
  for (uint32_t r = 0; r < roots; r++)
    (void)rt_call(em, TSR_RT_REGISTER, c64(em, r),
                  em_root_address(em, r, em_root_base(em, r)), zero, zero);
  tsr_strbuf_t end;
  tsr_strbuf_initialize(&end);
  em->cur = &end;
  (void)rt_call(em, TSR_RT_END, zero, zero, zero, zero);
  if (em->epi.size) tsr_strbuf_append(&end, em->epi.data, em->epi.size);
  if (end.failed) em_fail(em, TSR_OOM());
  tsr_strbuf_deinitialize(&em->epi);
  em->epi = end;
  em->cur = saved;
  em->indent = saved_indent;
}

/* Writes into iv[first..end) the row-major coordinates of `v` over the grid
 * dims [first, end). */
static void grid_coords(emitter_t *em, ssa_t v, uint32_t first, uint32_t end, ssa_t *iv) {
  int64_t stride = 1;
  for (uint32_t g = end; g-- > first;) {
    ssa_t q = stride == 1 ? v : em_op2(em, "arith.divui", v, em_cidx(em, stride), "index");
    iv[g] = g > first ? em_op2(em, "arith.remui", q, em_cidx(em, em->k->grid[g]), "index") : q;
    stride *= em->k->grid[g];
  }
}

/* The grid point of this core's step number `c` (index), as its row-major
 * number over the whole grid; with `iv`, also its coordinates. A core's step
 * c is (o, p, i): o over the dims before the split, p in [plo, phi) over the
 * split dims, i over the dims after them; `mine` is (phi - plo) x inner. */
static ssa_t core_grid_point(emitter_t *em, const tsr_ir_core_split_t *split, ssa_t c,
                             ssa_t mine, ssa_t *iv) {
  const tsr_kernel_t *k = em->k;
  int64_t outer = 1, inner = 1;
  for (uint32_t g = 0; g < split->first; g++) outer *= k->grid[g];
  for (uint32_t g = split->end; g < k->grid_rank; g++) inner *= k->grid[g];
  /* a core without points runs no step, but the loop's test still asks */
  ssa_t d = outer > 1 ? em_op2(em, "arith.maxui", mine, em_cidx(em, 1), "index") : mine;
  ssa_t o = outer > 1 ? em_op2(em, "arith.divui", c, d, "index") : em_cidx(em, 0);
  ssa_t r = outer > 1 ? em_op2(em, "arith.remui", c, d, "index") : c;
  ssa_t q = inner > 1 ? em_op2(em, "arith.divui", r, em_cidx(em, inner), "index") : r;
  ssa_t p = em_op2(em, "arith.addi", (ssa_t){"%plo"}, q, "index");
  ssa_t i = inner > 1 ? em_op2(em, "arith.remui", r, em_cidx(em, inner), "index")
                      : em_cidx(em, 0);
  if (iv) {
    grid_coords(em, o, 0, split->first, iv);
    grid_coords(em, p, split->first, split->end, iv);
    grid_coords(em, i, split->end, k->grid_rank, iv);
  }
  ssa_t op = em_iadd(em, em_imulc(em, o, (int64_t)split->points), p);
  return em_iadd(em, em_imulc(em, op, inner), i);
}

static void emit_kernel(emitter_t *em, tsr_strbuf_t *header) {
  const tsr_kernel_t *k = em->k;
  kernel_state_t ks;
  memset(&ks, 0, sizeof ks);
  ks.ops = em_alloc(em, (k->num_decls + 1) * sizeof *ks.ops);
  if (!ks.ops) return;

  /* Arguments: one per non-scratch operand, the whole array with a leading
   * dimension of devices, then this core's part of the run (lower_api.h). */
  tsr_strbuf_printf(header, "module {\n  func.func @%s(", TSR_LOWER_KERNEL_FUNC);
  uint32_t nargs = 0;
  for (uint32_t i = 0; i < k->num_decls; i++) {
    const tsr_decl_t *d = &k->decls[i];
    operand_state_t *os = &ks.ops[i];
    os->decl = d;
    if (d->role == TSR_ROLE_SCRATCH) continue;
    ssa_t name;
    snprintf(name.s, sizeof name.s, "%%a%u", nargs);
    os->root = em_add_root(em, name, (tsr_dtype_t)d->array.dtype, d->array.rank, d->array.dims);
    if (os->root < em->num_roots) em->roots[os->root].stacked = true;
    tstr_t t = em_root_type(em, os->root);
    tsr_strbuf_printf(header, "%s%s: %s", nargs ? ", " : "", name.s, t.s);
    nargs++;
  }
  tsr_strbuf_printf(header, "%s%%rt_fn: i64, %%rt_ctx: i64, %%device: i32, %%core: i32, "
                            "%%plo: index, %%phi: index) attributes {llvm.emit_c_interface} {\n",
                    nargs ? ", " : "");
  em->cur = &em->pro;
  em->indent = 2;
  snprintf(em->rt_fn.s, sizeof em->rt_fn.s, "%%rt_fnp");
  snprintf(em->rt_ctx.s, sizeof em->rt_ctx.s, "%%rt_ctxp");
  em_line(em, "%s = llvm.inttoptr %%rt_fn : i64 to !llvm.ptr", em->rt_fn.s);
  em_line(em, "%s = llvm.inttoptr %%rt_ctx : i64 to !llvm.ptr", em->rt_ctx.s);
  /* The run's --uninit mode, from the context (lower_api.h): one object
   * serves both modes. */
  ssa_t uz_p = em_fresh(em), uz = em_fresh(em);
  em_line(em, "%s = llvm.getelementptr %s[%d] : (!llvm.ptr) -> !llvm.ptr, i64", uz_p.s,
          em->rt_ctx.s, TSR_RT_CTX_UNINIT_ZERO);
  em_line(em, "%s = llvm.load %s : !llvm.ptr -> i64", uz.s, uz_p.s);
  em->uninit_zero = em_cmp(em, "cmpi", "ne", uz, em_cint(em, "i64", 0, 0), "i64");
  snprintf(em->budget_p.s, sizeof em->budget_p.s, "%%rt_budget");
  em_line(em, "%s = llvm.getelementptr %s[%d] : (!llvm.ptr) -> !llvm.ptr, i64", em->budget_p.s,
          em->rt_ctx.s, TSR_RT_CTX_BUDGET);
  snprintf(em->device.s, sizeof em->device.s, "%%device");
  snprintf(em->core.s, sizeof em->core.s, "%%core");
  ssa_t devx = em_cast(em, "arith.index_cast", em->device, "i32", "index");
  for (uint32_t r = 0; r < em->num_roots; r++) {
    int64_t slice = 1;
    for (uint32_t a = 0; a < em->roots[r].rank; a++) slice *= em->roots[r].dims[a];
    em->roots[r].base = em_imulc(em, devx, slice);
  }
  em->cur = &em->body;

  /* Aliases: the output starts as a copy of the input (the runtime copies
   * it before any core starts, as the interpreter does) and is the input's
   * HBM array from then on. */
  for (uint32_t i = 0; i < k->num_decls; i++) {
    const tsr_decl_t *d = &k->decls[i];
    if (d->role == TSR_ROLE_OUT && d->alias >= 0) ks.ops[d->alias].root = ks.ops[i].root;
  }

  /* Refs that are not windows: prefetch (SMEM copy when written), hbm/any
   * arrays, scratch. Windows: in place or through a block buffer. */
  for (uint32_t i = 0; i < k->num_decls && EM_OK(em); i++) {
    const tsr_decl_t *d = &k->decls[i];
    operand_state_t *os = &ks.ops[i];
    vinfo_t *vi = vi_of(em, d->ref);
    const tsr_type_t *rt = &d->ref->type;
    if (rt->kind == TSR_TYPE_SEM) { /* the runtime's */
      sem_ref_init(em, d->ref);
      continue;
    }
    vi->kind = VK_REF;
    vi->mutable_ref = em->stored[d->ref->id];
    const char *key = em_key(em, "R%u", d->ref->id);
    if (d->role == TSR_ROLE_SCRATCH) { /* starts holding the uninitialized value */
      vi->mem = em_buffer(em, (tsr_dtype_t)rt->dtype, rt->rank, rt->dims);
      vi->mem.key = key;
      fill_view(em, &vi->mem, (tsr_dtype_t)rt->dtype);
      continue;
    }
    bool windowed = d->role != TSR_ROLE_PREFETCH &&
                    (rt->space == TSR_SPACE_VMEM || rt->space == TSR_SPACE_SMEM);
    if (!windowed) {
      int64_t strides[TSR_MAX_RANK];
      em_dense_strides(d->array.rank, d->array.dims, strides);
      view_t whole = em_view_make(em, os->root, em_root_base(em, os->root), d->array.rank,
                                  d->array.dims, strides, key);
      if (d->role == TSR_ROLE_PREFETCH && vi->mutable_ref) {
        vi->mem = em_buffer(em, (tsr_dtype_t)d->array.dtype, d->array.rank, d->array.dims);
        dimv_t ext[TSR_MAX_RANK];
        for (uint32_t a = 0; a < d->array.rank; a++) ext[a] = em_dimc(d->array.dims[a]);
        copy_views(em, &vi->mem, &whole, (tsr_dtype_t)d->array.dtype, ext);
        vi->mem.key = key;
      } else {
        vi->mem = whole;
      }
      continue;
    }
    os->blocked = true;
    em_dense_strides(d->array.rank, d->array.dims, os->astrides);
    os->ref_rank = 0;
    for (uint32_t a = 0; a < d->array.rank; a++) {
      bool sq = d->block[a] == TSR_SQUEEZED;
      os->block[a] = sq ? 1 : d->block[a];
      os->nblocks[a] = (d->array.dims[a] + os->block[a] - 1) / os->block[a];
      if (d->array.dims[a] % os->block[a] != 0) os->maybe_padded = true;
      if (sq) continue;
      os->ref_dims[os->ref_rank] = os->block[a];
      os->ref_strides[os->ref_rank] = os->astrides[a];
      os->ref_rank++;
    }
    bool aliased = d->alias >= 0;
    for (uint32_t j = 0; j < k->num_decls; j++)
      if (k->decls[j].role == TSR_ROLE_OUT && k->decls[j].alias == (int32_t)i) aliased = true;
    os->inplace = !os->maybe_padded && !aliased &&
                  !(d->role == TSR_ROLE_IN && vi->mutable_ref);
    os->fill_out = d->role == TSR_ROLE_OUT && !first_touch_stores_all(&k->body, d->ref);
    os->tracked = !os->inplace || os->fill_out;
    if (!os->inplace) {
      os->buf = em_buffer(em, (tsr_dtype_t)d->array.dtype, os->ref_rank, os->ref_dims);
      os->buf.key = key;
      vi->mem = os->buf;
    }
    if (os->tracked) {
      os->state = ks.state_slots;
      ks.state_slots += d->array.rank;
    }
  }
  if (ks.state_slots) {
    ks.state = em_fresh(em);
    tsr_strbuf_printf(&em->pro, "    %s = memref.alloca() : memref<%uxindex>\n", ks.state.s,
                      ks.state_slots);
  }

  /* The grid: row-major, the last axis fastest. This core runs the split
   * points [plo, phi) (tsr_ir_core_split: the grid dims [first, end)
   * flattened), each with every point of the other dims, as one loop over
   * its own step number c in [0, outer x (phi - plo) x inner); each grid
   * step is a step of the run (count_step). */
  const tsr_ir_core_split_t split = tsr_ir_core_split(k->grid_rank, k->grid, k->semantics);
  int64_t outer = 1, inner = 1;
  for (uint32_t g = 0; g < split.first; g++) outer *= k->grid[g];
  for (uint32_t g = split.end; g < k->grid_rank; g++) inner *= k->grid[g];
  const ssa_t plo = {"%plo"};
  ssa_t mine = em_imulc(em, em_op2(em, "arith.subi", (ssa_t){"%phi"}, plo, "index"), inner);
  ssa_t steps = em_imulc(em, mine, outer);
  ssa_t lb = em_fresh(em), la = em_fresh(em);
  em_open(em, "scf.while (%s = %s) : (index) -> (index) {", lb.s, em_cidx(em, 0).s);
  ssa_t in = em_cmp(em, "cmpi", "slt", lb, steps, "index");
  ssa_t go = em_op2(em, "arith.andi", in,
                    count_step(em, in, em->num_sites,
                               i64_of_index(em, core_grid_point(em, &split, lb, mine, NULL))),
                    "i1");
  em_line(em, "scf.condition(%s) %s : index", go.s, lb.s);
  em->indent--;
  em_open(em, "} do {");
  em_line(em, "^bb0(%s: index):", la.s);
  ks.lin = core_grid_point(em, &split, la, mine, em->grid_iv);
  for (uint32_t g = 0; g < k->grid_rank; g++)
    em->grid_i32[g] = em_cast(em, "arith.index_cast", em->grid_iv[g], "index", "i32");
  em->lin = ks.lin;
  /* The runtime's context starts with this core's grid point (its messages
   * name it). */
  em_line(em, "llvm.store %s, %s : i64, !llvm.ptr", i64_of_index(em, ks.lin).s, em->rt_ctx.s);
  /* This core's first and last steps. */
  ks.first = em_cmp(em, "cmpi", "eq", la, em_cidx(em, 0), "index");
  ks.last = em_cmp(em, "cmpi", "eq", la, em_iaddc(em, steps, -1), "index");

  em_line(em, "// the grid step: block indices and copies in");
  for (uint32_t i = 0; i < k->num_decls && EM_OK(em); i++)
    if (ks.ops[i].blocked) step_begin(em, &ks, &ks.ops[i]);
  /* Cores that DMA into other devices meet once every core's memory is
   * registered and holds its first step's blocks: a DMA that lands early is
   * not overwritten by its destination's start (a core without steps meets
   * after the loop). */
  if (em->remote_dmas) meet_at_start(em, ks.first);
  em->region = &k->body;
  emit_region(em, &k->body);
  em_line(em, "// the grid step: copies out");
  for (uint32_t i = 0; i < k->num_decls && EM_OK(em); i++)
    if (ks.ops[i].blocked && !ks.ops[i].inplace && ks.ops[i].decl->role == TSR_ROLE_OUT)
      step_end(em, &ks, &ks.ops[i]);
  em_line(em, "scf.yield %s : index", em_iaddc(em, la, 1).s);
  em_close(em, "}");
  if (em->remote_dmas) {
    meet_at_start(em, em_cmp(em, "cmpi", "eq", steps, em_cidx(em, 0), "index"));
    register_memory(em);
  }
}

static void note_site(void *ctx, const tsr_op_t *op, uint32_t position) {
  emitter_t *em = ctx;
  em->sites[position] = (struct em_site){op, position};
  if (op->opcode == TSR_OP_DMA_START && (op->flags & TSR_OPF_DEVICE)) em->remote_dmas = true;
}

static void note_sem(void *ctx, const tsr_value_t *ref, uint64_t first) {
  emitter_t *em = ctx;
  em->sem_slot[ref->id] = (int64_t)first;
}

/* Sites (tsr_ir_walk_ops) and semaphore slots (tsr_ir_semaphore_slots), as
 * the runtime numbers them. */
static bool number_sites(emitter_t *em) {
  const tsr_kernel_t *k = em->k;
  em->num_sites = tsr_ir_walk_ops(k, NULL, NULL);
  em->sites = tsr_calloc(em->num_sites + 1, sizeof *em->sites);
  em->sem_slot = tsr_calloc(k->num_values + 1, sizeof *em->sem_slot);
  if (!em->sites || !em->sem_slot) {
    em_fail(em, TSR_OOM());
    return false;
  }
  tsr_ir_walk_ops(k, note_site, em);
  qsort(em->sites, em->num_sites, sizeof *em->sites, compare_sites);
  tsr_ir_semaphore_slots(k, note_sem, em);
  return true;
}

tsr_status_t tsr_lower_emit_mlir(const tsr_kernel_t *kernel, tsr_strbuf_t *out) {
  emitter_t em;
  memset(&em, 0, sizeof em);
  em.k = kernel;
  tsr_arena_initialize(&em.arena);
  tsr_strbuf_initialize(&em.pro);
  tsr_strbuf_initialize(&em.body);
  tsr_strbuf_initialize(&em.epi);
  tsr_strbuf_t header;
  tsr_strbuf_initialize(&header);
  em.cur = &em.body;
  em.indent = 2;
  uint32_t n = kernel->num_values + 1;
  em.vals = tsr_calloc(n, sizeof *em.vals);
  em.uses = tsr_calloc(n, sizeof *em.uses);
  em.user = tsr_calloc(n, sizeof *em.user);
  em.stored = tsr_calloc(n, sizeof *em.stored);
  if (!em.vals || !em.uses || !em.user || !em.stored) {
    em_fail(&em, TSR_OOM());
  } else {
    count_uses(&em, &kernel->body);
    for (uint32_t i = 0; i < kernel->num_decls; i++) count_uses(&em, kernel->decls[i].index_map);
    if (number_sites(&em)) emit_kernel(&em, &header);
  }
  if (!em.error && (em.pro.failed || em.body.failed || em.epi.failed || header.failed))
    em_fail(&em, TSR_OOM());
  if (!em.error) {
    const tsr_strbuf_t *parts[] = {&header, &em.pro, &em.body, &em.epi};
    for (size_t i = 0; i < TSR_ARRAY_SIZE(parts); i++)
      if (parts[i]->size) tsr_strbuf_append(out, parts[i]->data, parts[i]->size);
    tsr_strbuf_puts(out, "    return\n  }\n");
    if (em.need_log1pf) tsr_strbuf_puts(out, "  func.func private @log1pf(f32) -> f32\n");
    tsr_strbuf_puts(out, "}\n");
    if (out->failed) em_fail(&em, TSR_OOM());
  }
  tsr_strbuf_deinitialize(&header);
  tsr_strbuf_deinitialize(&em.pro);
  tsr_strbuf_deinitialize(&em.body);
  tsr_strbuf_deinitialize(&em.epi);
  tsr_free(em.vals);
  tsr_free(em.uses);
  tsr_free(em.user);
  tsr_free(em.stored);
  tsr_free(em.sites);
  tsr_free(em.sem_slot);
  tsr_free(em.roots);
  tsr_free(em.consts);
  tsr_arena_deinitialize(&em.arena);
  return em.error;
}
