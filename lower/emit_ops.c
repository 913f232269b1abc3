/* Block ops of the MLIR text emitter that are not elementwise: reductions
 * (in the interpreter's summation order, so float sums match it bitwise),
 * arg-reductions, dot (a 6 x 16 register-blocked micro-kernel with f32 or
 * i32 accumulators), transpose, concatenate, roll and gather (layer 3,
 * emit_internal.h). */
#include <stdio.h>

#include "lower/emit_dispatch.h"
#include "lower/emit_internal.h"

/* ---- Small helpers ------------------------------------------------------------- */

/* "%r = scf.for %iv = lo to hi step s iter_args(%acc = init) -> (T) {" */
static ssa_t iter_open(emitter_t *em, dimv_t lo, dimv_t hi, int64_t step, ssa_t init,
                       const char *type, ssa_t *iv, ssa_t *acc) {
  ssa_t r = em_fresh(em);
  *iv = em_fresh(em);
  *acc = em_fresh(em);
  ssa_t l = em_dimv_ssa(em, lo), h = em_dimv_ssa(em, hi), s = em_cidx(em, step);
  em_open(em, "%s = scf.for %s = %s to %s step %s iter_args(%s = %s) -> (%s) {", r.s, iv->s,
          l.s, h.s, s.s, acc->s, init.s, type);
  return r;
}

static void iter_close(emitter_t *em, ssa_t value, const char *type) {
  em_line(em, "scf.yield %s : %s", value.s, type);
  em_close(em, "}");
}

static const tsr_value_t *result0(const tsr_op_t *op) { return op->results[0]; }

/* The operand as an expression, a materialized copy when it has leaves
 * that cannot be re-read at other positions. */
static expr_t *operand_expr(emitter_t *em, const tsr_value_t *v) {
  return ex_of_value(em, v, v->type.rank, v->type.dims);
}

static expr_t *mem_expr(emitter_t *em, view_t v, tsr_dtype_t dtype) {
  expr_t *e = ex_new(em, EX_MEM, dtype, v.rank, v.dims);
  if (e) e->mem = v;
  return e;
}

/* ---- 8 x 8 tile transposes ------------------------------------------------------
 * Transposing with scalar loads and stores costs about 10 instructions per
 * element; 8 row vectors, vector.transpose and 8 column vectors cost about
 * 1.5 (LLVM makes the element-wise lowering of the transpose ~60 shuffles).
 * The transposed B of a 128^3 dot took 23 us to pack element by element
 * (half the dot's time). */

typedef void (*tile_write_fn)(emitter_t *em, void *ctx, ssa_t row, ssa_t col0, const nest_t *n,
                              ssa_t vec);

/* Whether src [R, C] (read along C) can go through tile_transpose8 into
 * elements of `to`. */
static bool tile_transpose8_ok(const expr_t *src, tsr_dtype_t to) {
  return src->rank == 2 && src->dims[0] % 8 == 0 && src->dims[1] % 8 == 0 &&
         ex_vectorizable(src) && em_int_bits(to) == 32;
}

/* For every 8 x 8 tile of src [R, C]: write(row = c, col0 = r0, the 8
 * elements src[r0 .. r0+7, c] converted to `to`). */
static void tile_transpose8(emitter_t *em, const expr_t *src, tsr_dtype_t to,
                            tile_write_fn write, void *ctx) {
  const char *el = em_compute(to);
  tstr_t vt = em_vtype(el, 8);
  char mt[64];
  snprintf(mt, sizeof mt, "vector<8x8x%s>", el);
  ssa_t r0 = em_for_open(em, em_dimc(0), em_dimc(src->dims[0]), 8);
  ssa_t c0 = em_for_open(em, em_dimc(0), em_dimc(src->dims[1]), 8);
  nest_t n;
  memset(&n, 0, sizeof n);
  n.rank = 2;
  n.lanes = 8;
  ssa_t m = em_const(em, mt, em_is_float(to) ? "dense<0.0>" : "dense<0>");
  for (uint32_t i = 0; i < 8; i++) {
    ssa_t idx[2] = {em_iaddc(em, r0, i), c0};
    ssa_t v = ex_read(em, src, idx, &n);
    v = em_convert(em, v, src->dtype, to, 8);
    ssa_t m2 = em_fresh(em);
    em_line(em, "%s = vector.insert %s, %s[%u] : %s into %s", m2.s, v.s, m.s, i, vt.s, mt);
    m = m2;
  }
  ssa_t t = em_fresh(em);
  em_line(em, "%s = vector.transpose %s, [1, 0] : %s to %s", t.s, m.s, mt, mt);
  for (uint32_t i = 0; i < 8; i++) {
    ssa_t o = em_fresh(em);
    em_line(em, "%s = vector.extract %s[%u] : %s from %s", o.s, t.s, i, vt.s, mt);
    write(em, ctx, em_iaddc(em, c0, i), r0, &n, o);
  }
  em_close(em, "}");
  em_close(em, "}");
}

/* Merges the trailing `count` dims of e into one, or NULL when some leaf's
 * elements are not contiguous across them. */
static expr_t *ex_merge_tail(emitter_t *em, const expr_t *e, uint32_t count) {
  if (count <= 1) return (expr_t *)e;
  uint32_t keep = e->rank - count;
  int64_t dims[TSR_MAX_RANK], merged = 1;
  for (uint32_t d = 0; d < keep; d++) dims[d] = e->dims[d];
  for (uint32_t d = keep; d < e->rank; d++) merged *= e->dims[d];
  dims[keep] = merged;
  expr_t *m = ex_new(em, e->kind, e->dtype, keep + 1, dims);
  if (!m) return NULL;
  switch (e->kind) {
    case EX_SCALAR: m->scalar = e->scalar; return m;
    case EX_MEM: {
      const view_t *v = &e->mem;
      for (uint32_t d = keep; d + 1 < v->rank; d++)
        if (v->strides[d] != v->strides[d + 1] * v->dims[d + 1]) return NULL;
      int64_t strides[TSR_MAX_RANK];
      for (uint32_t d = 0; d < keep; d++) strides[d] = v->strides[d];
      strides[keep] = v->strides[v->rank - 1];
      m->mem = em_view_make(em, v->root, v->off, keep + 1, dims, strides,
                            v->key ? em_key(em, "%s{m%u}", v->key, count) : NULL);
      m->mutable_mem = e->mutable_mem;
      if (e->mask) {
        m->mask = ex_merge_tail(em, e->mask, count);
        if (!m->mask) return NULL;
      }
      return m;
    }
    case EX_OP:
      m->op = e->op;
      m->origin = e->origin;
      m->arg_dtype = e->arg_dtype;
      m->nargs = e->nargs;
      for (uint32_t i = 0; i < e->nargs; i++) {
        m->args[i] = ex_merge_tail(em, e->args[i], count);
        if (!m->args[i]) return NULL;
      }
      return m;
    default: return NULL;
  }
}

/* ---- Reductions ---------------------------------------------------------------------- */

typedef struct reducer {
  tsr_opcode_t op;
  tsr_dtype_t dtype;
  const char *elem; /* compute element type */
} reducer_t;

/* A reduction opcode without a lowering: an error naming the op (never a
 * result); a placeholder lets the op finish before emission stops. */
static ssa_t unknown_reduction(emitter_t *em, const reducer_t *rd) {
  char why[96];
  snprintf(why, sizeof why, "no lowering of the reduction '%s'", tsr_op_table[rd->op].mnemonic);
  em_unimplemented(em, em->op, why);
  return (ssa_t){"%unlowered"};
}

static ssa_t red_identity(emitter_t *em, const reducer_t *rd, uint32_t lanes) {
  tsr_dtype_t t = rd->dtype;
  const bool s = em_is_signed(t);
  const uint32_t bits = em_int_bits(t);
  if (em_is_float(t)) {
    switch (rd->op) {
      case TSR_OP_REDUCE_SUM: return em_cf32(em, lanes, 0.0f);
      case TSR_OP_REDUCE_PROD: return em_cf32(em, lanes, 1.0f);
      case TSR_OP_REDUCE_MAX: return em_cf32_bits(em, lanes, 0xff800000u);
      case TSR_OP_REDUCE_MIN: return em_cf32_bits(em, lanes, 0x7f800000u);
      default: return unknown_reduction(em, rd);
    }
  }
  switch (rd->op) {
    case TSR_OP_REDUCE_SUM:
    case TSR_OP_REDUCE_OR: return em_cint(em, rd->elem, lanes, 0);
    case TSR_OP_REDUCE_PROD: return em_cint(em, rd->elem, lanes, 1);
    case TSR_OP_REDUCE_AND: return em_cint(em, rd->elem, lanes, -1);
    case TSR_OP_REDUCE_MAX:
      return em_cint(em, rd->elem, lanes, s ? -(int64_t)(1ull << (bits - 1)) : 0);
    case TSR_OP_REDUCE_MIN:
      return em_cint(em, rd->elem, lanes, s ? (int64_t)((1ull << (bits - 1)) - 1) : -1);
    default: return unknown_reduction(em, rd);
  }
}

static ssa_t red_combine(emitter_t *em, const reducer_t *rd, ssa_t a, ssa_t b, uint32_t lanes) {
  tstr_t t = em_vtype(rd->elem, lanes);
  const bool f = em_is_float(rd->dtype), s = em_is_signed(rd->dtype);
  if (f && (rd->op == TSR_OP_REDUCE_MAX || rd->op == TSR_OP_REDUCE_MIN))
    return em_fmax(em, a, b, lanes, rd->op == TSR_OP_REDUCE_MAX);
  const char *name;
  switch (rd->op) {
    case TSR_OP_REDUCE_SUM: name = f ? "arith.addf" : "arith.addi"; break;
    case TSR_OP_REDUCE_PROD: name = f ? "arith.mulf" : "arith.muli"; break;
    case TSR_OP_REDUCE_MAX: name = s ? "arith.maxsi" : "arith.maxui"; break;
    case TSR_OP_REDUCE_MIN: name = s ? "arith.minsi" : "arith.minui"; break;
    case TSR_OP_REDUCE_AND: name = "arith.andi"; break;
    case TSR_OP_REDUCE_OR: name = "arith.ori"; break;
    default: return unknown_reduction(em, rd);
  }
  return em_op2(em, name, a, b, t.s);
}

typedef struct reduce_ctx {
  reducer_t rd;
  const expr_t *in;      /* squeezed input, rank n */
  bool red[TSR_MAX_RANK];
  uint32_t n;
  const view_t *dst;     /* squeezed output, or NULL for a scalar result */
  uint32_t tail;         /* case B: trailing reduced dims walked as lane runs */
  ssa_t result;          /* scalar result (dst == NULL) */
} reduce_ctx_t;

/* Input indices from the output position (kept dims) and reduced ivs. */
static void merge_idx(const reduce_ctx_t *c, const nest_t *out, const ssa_t *red_iv, ssa_t *idx) {
  uint32_t k = 0, r = 0;
  for (uint32_t d = 0; d < c->n; d++) idx[d] = c->red[d] ? red_iv[r++] : out->idx[k++];
}

/* Case A, the last dim kept: vectors along it, reduced dims walked in
 * row-major order around them, each output element summed sequentially. */
static void reduce_kept_body(emitter_t *em, const nest_t *n, void *p) {
  reduce_ctx_t *c = p;
  tstr_t t = em_vtype(c->rd.elem, n->lanes);
  ssa_t acc = red_identity(em, &c->rd, n->lanes);
  ssa_t red_iv[TSR_MAX_RANK], res[TSR_MAX_RANK];
  uint32_t nr = 0;
  for (uint32_t d = 0; d < c->n; d++) {
    if (!c->red[d]) continue;
    ssa_t a;
    res[nr] = iter_open(em, em_dimc(0), em_dimc(c->in->dims[d]), 1, acc, t.s, &red_iv[nr], &a);
    acc = a;
    nr++;
  }
  ssa_t idx[TSR_MAX_RANK];
  merge_idx(c, n, red_iv, idx);
  ssa_t v = ex_read(em, c->in, idx, n);
  acc = red_combine(em, &c->rd, acc, v, n->lanes);
  for (uint32_t i = nr; i-- > 0;) {
    iter_close(em, acc, t.s);
    acc = res[i];
  }
  acc = em_round(em, acc, c->rd.dtype, n->lanes);
  em_mem_write(em, c->dst, c->rd.dtype, n->idx, n, acc, NULL);
}

/* Lane reduction of the run along the last dim at idx (idx[n-1] ignored):
 * 16 lanes, lane j takes elements j, j+16, ..., then l[j] (+)= l[j+8],
 * l[j+4], l[j+2], l[j+1] (interp/blockops.c red_lane_*). */
static ssa_t lane_reduce(emitter_t *em, reduce_ctx_t *c, ssa_t *idx) {
  const uint32_t L = EM_LANES;
  tstr_t t = em_vtype(c->rd.elem, L);
  const int64_t len = c->in->dims[c->n - 1];
  const int64_t main = len / L * L, rem = len - main;
  ssa_t ident = red_identity(em, &c->rd, L);
  ssa_t lanes = ident;
  nest_t n;
  memset(&n, 0, sizeof n);
  n.rank = c->n;
  n.lanes = L;
  if (main > 0) {
    ssa_t iv, acc;
    ssa_t r = iter_open(em, em_dimc(0), em_dimc(main), L, ident, t.s, &iv, &acc);
    idx[c->n - 1] = iv;
    ssa_t v = ex_read(em, c->in, idx, &n);
    iter_close(em, red_combine(em, &c->rd, acc, v, L), t.s);
    lanes = r;
  }
  if (rem > 0) {
    idx[c->n - 1] = em_cidx(em, main);
    n.masked = true;
    n.tail = (uint32_t)rem;
    n.mask = em_fresh(em);
    em_line(em, "%s = vector.constant_mask [%lld] : vector<%uxi1>", n.mask.s, (long long)rem, L);
    ssa_t v = ex_read(em, c->in, idx, &n);
    v = em_select(em, n.mask, v, ident, c->rd.elem, L, true);
    lanes = red_combine(em, &c->rd, lanes, v, L);
  }
  for (uint32_t w = L / 2; w >= 1; w /= 2) {
    tstr_t from = em_vtype(c->rd.elem, 2 * w);
    if (w == 1) {
      ssa_t a = em_fresh(em), b = em_fresh(em);
      em_line(em, "%s = vector.extract %s[0] : %s from %s", a.s, lanes.s, c->rd.elem, from.s);
      em_line(em, "%s = vector.extract %s[1] : %s from %s", b.s, lanes.s, c->rd.elem, from.s);
      return red_combine(em, &c->rd, a, b, 0);
    }
    tstr_t to = em_vtype(c->rd.elem, w);
    ssa_t lo = em_fresh(em), hi = em_fresh(em);
    em_line(em, "%s = vector.extract_strided_slice %s {offsets = [0], sizes = [%u], strides = "
                "[1]} : %s to %s",
            lo.s, lanes.s, w, from.s, to.s);
    em_line(em, "%s = vector.extract_strided_slice %s {offsets = [%u], sizes = [%u], strides = "
                "[1]} : %s to %s",
            hi.s, lanes.s, w, w, from.s, to.s);
    lanes = red_combine(em, &c->rd, lo, hi, w);
  }
  return lanes;
}

/* Case B, the last dim reduced: one output element at a time; reduced dims
 * other than the last walked in row-major order, each contributing the lane
 * reduction of its run along the last dim. */
static void reduce_lane_body(emitter_t *em, const nest_t *n, void *p) {
  reduce_ctx_t *c = p;
  const char *t = c->rd.elem;
  ssa_t acc = red_identity(em, &c->rd, 0);
  ssa_t red_iv[TSR_MAX_RANK], res[TSR_MAX_RANK];
  uint32_t nr = 0;
  for (uint32_t d = 0; d + 1 < c->n; d++) {
    if (!c->red[d]) continue;
    ssa_t a;
    res[nr] = iter_open(em, em_dimc(0), em_dimc(c->in->dims[d]), 1, acc, t, &red_iv[nr], &a);
    acc = a;
    nr++;
  }
  red_iv[nr] = em_cidx(em, 0); /* the last dim: set by lane_reduce */
  ssa_t idx[TSR_MAX_RANK];
  merge_idx(c, n, red_iv, idx);
  ssa_t v = lane_reduce(em, c, idx);
  acc = red_combine(em, &c->rd, acc, v, 0);
  for (uint32_t i = nr; i-- > 0;) {
    iter_close(em, acc, t);
    acc = res[i];
  }
  acc = em_round(em, acc, c->rd.dtype, 0);
  if (c->dst)
    em_mem_write(em, c->dst, c->rd.dtype, n->idx, n, acc, NULL);
  else
    c->result = acc;
}

void em_op_reduce(emitter_t *em, const tsr_op_t *op) {
  const tsr_value_t *a = op->operands[0], *r = result0(op);
  reduce_ctx_t c;
  memset(&c, 0, sizeof c);
  c.rd.op = op->opcode;
  c.rd.dtype = (tsr_dtype_t)a->type.dtype;
  c.rd.elem = em_compute(c.rd.dtype);
  uint32_t axes = 0;
  for (uint32_t i = 0; i < op->num_ints; i++) axes |= 1u << op->ints[i];
  expr_t *in = operand_expr(em, a);
  if (!in) return;
  bool inputs_mutable = ex_has_mutable(in);
  /* Drop unit dims (the interpreter does too: they change no order). */
  expr_t *sq = ex_squeeze(em, in);
  if (!sq) {
    view_t m = em_materialize(em, in);
    sq = ex_squeeze(em, mem_expr(em, m, c.rd.dtype));
    inputs_mutable = false;
  }
  if (!sq) return;
  c.n = 0;
  for (uint32_t d = 0; d < a->type.rank; d++)
    if (a->type.dims[d] != 1) c.red[c.n++] = (axes >> d) & 1u;
  /* Case B walks the trailing reduced dims as one run of the interpreter's
   * merged group: merge them (copying to a dense buffer if a leaf is not
   * contiguous across them). */
  uint32_t tail = 0;
  while (tail < c.n && c.red[c.n - 1 - tail]) tail++;
  if (tail > 1) {
    expr_t *m = ex_merge_tail(em, sq, tail);
    if (!m) {
      view_t buf = em_materialize(em, sq);
      m = ex_merge_tail(em, mem_expr(em, buf, c.rd.dtype), tail);
      inputs_mutable = false;
    }
    if (!m) return;
    sq = m;
    c.n -= tail - 1;
  }
  c.in = sq;
  /* Output: kept non-unit dims. */
  uint32_t kept = 0;
  dimv_t ext[TSR_MAX_RANK];
  for (uint32_t d = 0; d < c.n; d++)
    if (!c.red[d]) ext[kept++] = em_dimc(sq->dims[d]);
  view_t dst, dsq;
  if (r->type.kind == TSR_TYPE_SCALAR) {
    c.dst = NULL;
  } else {
    dst = em_result_dest(em, op, inputs_mutable);
    dsq = em_view_squeeze(em, &dst);
    c.dst = &dsq;
  }
  if (c.n == 0) { /* every dim is 1: identity (+) the element */
    nest_t n;
    memset(&n, 0, sizeof n);
    ssa_t v = ex_read(em, sq, NULL, &n);
    ssa_t acc = red_combine(em, &c.rd, red_identity(em, &c.rd, 0), v, 0);
    acc = em_round(em, acc, c.rd.dtype, 0);
    if (c.dst)
      em_mem_write(em, c.dst, c.rd.dtype, NULL, &n, acc, NULL);
    else
      em->vals[r->id] = (vinfo_t){.kind = VK_SCALAR, .scalar = acc};
    return;
  }
  if (!c.red[c.n - 1]) {
    uint32_t lanes = 0;
    if (ex_vectorizable(sq) && c.dst->strides[c.dst->rank - 1] == 1)
      lanes = em_pick_lanes(sq->dims[c.n - 1]);
    em_nest(em, kept, ext, lanes, reduce_kept_body, &c);
    return;
  }
  if (!ex_vectorizable(sq)) {
    /* Lane runs need vector reads: copy to a dense buffer first. */
    view_t buf = em_materialize(em, sq);
    c.in = mem_expr(em, buf, c.rd.dtype);
  }
  em_nest(em, kept, ext, 0, reduce_lane_body, &c);
  if (!c.dst) em->vals[r->id] = (vinfo_t){.kind = VK_SCALAR, .scalar = c.result};
}

/* ---- argmax / argmin ------------------------------------------------------------------- */

typedef struct arg_ctx {
  const tsr_op_t *op;
  const expr_t *in;
  uint32_t axis;
  const view_t *dst;
  ssa_t result;
} arg_ctx_t;

static void arg_body(emitter_t *em, const nest_t *n, void *p) {
  arg_ctx_t *c = p;
  const tsr_dtype_t dt = c->in->dtype;
  const char *el = em_compute(dt);
  const bool f = em_is_float(dt), s = em_is_signed(dt), mx = c->op->opcode == TSR_OP_ARGMAX;
  tstr_t vt = em_vtype(el, n->lanes), it = em_vtype("i32", n->lanes);
  ssa_t idx[TSR_MAX_RANK];
  uint32_t k = 0;
  for (uint32_t d = 0; d < c->in->rank; d++)
    idx[d] = d == c->axis ? em_cidx(em, 0) : n->idx[k++];
  ssa_t best = ex_read(em, c->in, idx, n);
  ssa_t bi = em_cint(em, "i32", n->lanes, 0);
  const int64_t len = c->in->dims[c->axis];
  if (len > 1) {
    ssa_t r = em_fresh(em), iv = em_fresh(em), b0 = em_fresh(em), i0 = em_fresh(em);
    em_open(em, "%s:2 = scf.for %s = %s to %s step %s iter_args(%s = %s, %s = %s) -> (%s, %s) {",
            r.s, iv.s, em_cidx(em, 1).s, em_cidx(em, len).s, em_cidx(em, 1).s, b0.s, best.s,
            i0.s, bi.s, vt.s, it.s);
    idx[c->axis] = iv;
    ssa_t v = ex_read(em, c->in, idx, n);
    ssa_t take;
    tstr_t bt = em_vtype("i1", n->lanes);
    if (f) {
      ssa_t best_ok = em_cmp(em, "cmpf", "ord", b0, b0, vt.s);
      ssa_t v_nan = em_cmp(em, "cmpf", "uno", v, v, vt.s);
      ssa_t better = em_cmp(em, "cmpf", mx ? "ogt" : "olt", v, b0, vt.s);
      take = em_op2(em, "arith.andi", best_ok, em_op2(em, "arith.ori", v_nan, better, bt.s), bt.s);
    } else {
      take = em_cmp(em, "cmpi", mx ? (s ? "sgt" : "ugt") : (s ? "slt" : "ult"), v, b0, vt.s);
    }
    ssa_t ki = em_bcast(em, em_cast(em, "arith.index_cast", iv, "index", "i32"), "i32", n->lanes);
    ssa_t nb = em_select(em, take, v, b0, el, n->lanes, true);
    ssa_t ni = em_select(em, take, ki, i0, "i32", n->lanes, true);
    em_line(em, "scf.yield %s, %s : %s, %s", nb.s, ni.s, vt.s, it.s);
    em_close(em, "}");
    snprintf(bi.s, sizeof bi.s, "%.30s#1", r.s);
  }
  if (c->dst)
    em_mem_write(em, c->dst, TSR_DTYPE_I32, n->idx, n, bi, NULL);
  else
    c->result = bi;
}

void em_op_argreduce(emitter_t *em, const tsr_op_t *op) {
  if (op->opcode != TSR_OP_ARGMAX && op->opcode != TSR_OP_ARGMIN) {
    em_unimplemented(em, op, NULL);
    return;
  }
  const tsr_value_t *a = op->operands[0], *r = result0(op);
  arg_ctx_t c = {.op = op, .axis = (uint32_t)op->ints[0]};
  c.in = operand_expr(em, a);
  if (!c.in) return;
  view_t dst;
  dimv_t ext[TSR_MAX_RANK];
  for (uint32_t d = 0; d < r->type.rank; d++) ext[d] = em_dimc(r->type.dims[d]);
  uint32_t lanes = 0;
  if (r->type.kind == TSR_TYPE_SCALAR) {
    c.dst = NULL;
  } else {
    dst = em_result_dest(em, op, ex_has_mutable(c.in));
    c.dst = &dst;
    if (c.axis + 1 < a->type.rank && ex_vectorizable(c.in) && dst.strides[dst.rank - 1] == 1)
      lanes = em_pick_lanes(dst.dims[dst.rank - 1]);
  }
  em_nest(em, r->type.kind == TSR_TYPE_SCALAR ? 0 : r->type.rank, ext, lanes, arg_body, &c);
  if (!c.dst) em->vals[r->id] = (vinfo_t){.kind = VK_SCALAR, .scalar = c.result};
}

/* ---- dot ----------------------------------------------------------------------------------
 * C[M,N] = A[M,K] B[K,N] (+ acc): B is packed once per dot into panels of
 * `lanes` columns, Bp[N / lanes][K][lanes] (the tail panel zero-padded), so
 * that the k loop reads one contiguous vector per step; B rows of a block
 * are often 4 KiB apart and would all fall in one L1 set. The column panel
 * loop is outside the row-tile loop so that a panel stays in L1 while every
 * row tile uses it. A tile is EM_DOT_ROWS rows x lanes columns accumulated
 * in registers over k (12 AVX2 registers for f32). Measured on the 1024^3
 * f32 matmul of bench/kernels/lowered.tsr (128-blocks, 2-core EPYC, best
 * of 5): unpacked, panels inside tiles 46.7 ms; packed, panels outside
 * (this) in docs/lowering_codegen.md. */

typedef struct dot_ctx {
  view_t a;              /* [M,K] in the accumulator dtype (padded rows) */
  view_t b;              /* lanes ? packed [N/lanes, K, lanes] : [K,N] */
  const expr_t *acc;     /* [M,N] in the result dtype, or NULL */
  const view_t *dst;
  tsr_dtype_t acc_dtype, out_dtype;
  int64_t k;
  ssa_t i0;              /* first row of the tile */
  ssa_t panel;           /* packed panel index of the tile's columns */
  uint32_t rows;
  int64_t m;
  /* Packing one panel at a time (B [K,N] read along N): the source, its
   * column count, and whether the tiles prefetch the next panel's lines. */
  const expr_t *bsrc;
  int64_t ncols;
  bool prefetch_next;
} dot_ctx_t;

/* A software prefetch of B's v[i, j] (rank 2, in bounds) into L2, not L1
 * (locality 2). The lines prefetched are B's rows, often a multiple of
 * 4 KiB apart: into L1 they would all go to one set and evict the lines of
 * A and of the packed panel that share it. */
static void em_prefetch2(emitter_t *em, const view_t *v, ssa_t i, ssa_t j) {
  em_mem_prefetch(em, v, (ssa_t[2]){i, j}, 2);
}

/* One tile: rows x lanes outputs at (i0, j), accumulated over k in registers. */
static void dot_tile(emitter_t *em, const nest_t *n, dot_ctx_t *c) {
  const char *el = em_compute(c->acc_dtype);
  const bool f = em_is_float(c->acc_dtype);
  tstr_t vt = em_vtype(el, n->lanes);
  ssa_t row[EM_DOT_ROWS], init[EM_DOT_ROWS];
  for (uint32_t r = 0; r < c->rows; r++) {
    row[r] = em_iaddc(em, c->i0, r);
    ssa_t idx[2] = {row[r], n->idx[0]};
    if (c->acc) {
      ssa_t v = ex_read(em, c->acc, idx, n);
      init[r] = em_convert(em, v, c->out_dtype, c->acc_dtype, n->lanes);
    } else {
      init[r] = f ? em_cf32(em, n->lanes, 0.0f) : em_cint(em, el, n->lanes, 0);
    }
  }
  ssa_t res = em_fresh(em), kv = em_fresh(em), args[EM_DOT_ROWS];
  char iters[1024] = "", types[512] = "";
  size_t li = 0, lt = 0;
  for (uint32_t r = 0; r < c->rows; r++) {
    args[r] = em_fresh(em);
    snprintf(iters + li, sizeof iters - li, "%s%s = %s", r ? ", " : "", args[r].s, init[r].s);
    li += strlen(iters + li);
    snprintf(types + lt, sizeof types - lt, "%s%s", r ? ", " : "", vt.s);
    lt += strlen(types + lt);
  }
  em_open(em, "%s:%u = scf.for %s = %s to %s step %s iter_args(%s) -> (%s) {", res.s, c->rows,
          kv.s, em_cidx(em, 0).s, em_cidx(em, c->k).s, em_cidx(em, 1).s, iters, types);
  if (c->prefetch_next) {
    /* the next panel's line of this k row (the last panel: its own) */
    ssa_t j1 = em_op2(em, "arith.minui", em_iaddc(em, n->idx[0], n->lanes),
                      em_cidx(em, c->ncols - 1), "index");
    em_prefetch2(em, &c->bsrc->mem, kv, j1);
  }
  ssa_t bv;
  nest_t sn = *n;
  sn.masked = false;
  if (n->lanes) {
    ssa_t bidx[3] = {c->panel, kv, em_cidx(em, 0)};
    bv = em_mem_read(em, &c->b, c->acc_dtype, bidx, &sn, NULL, NULL);
  } else {
    ssa_t bidx[2] = {kv, n->idx[0]};
    bv = em_mem_read(em, &c->b, c->acc_dtype, bidx, &sn, NULL, NULL);
  }
  sn.lanes = 0;
  ssa_t next[EM_DOT_ROWS];
  for (uint32_t r = 0; r < c->rows; r++) {
    ssa_t aidx[2] = {row[r], kv};
    ssa_t av = em_mem_read(em, &c->a, c->acc_dtype, aidx, &sn, NULL, NULL);
    av = em_bcast(em, av, el, n->lanes);
    if (f) {
      /* The fused multiply-add, rounded once, written out (math.fma, not a
       * contraction LLVM may or may not make): an FMA instruction at
       * x86-64-v3, libm's exact fmaf at the baseline, so the sums are the
       * same on every host and equal the interpreter's (same k order). */
      next[r] = em_fresh(em);
      em_line(em, "%s = math.fma %s, %s, %s : %s", next[r].s, av.s, bv.s, args[r].s, vt.s);
    } else {
      ssa_t prod = em_op2(em, "arith.muli", av, bv, vt.s);
      next[r] = em_op2(em, "arith.addi", args[r], prod, vt.s);
    }
  }
  char ys[1024] = "";
  size_t ly = 0;
  for (uint32_t r = 0; r < c->rows; r++) {
    snprintf(ys + ly, sizeof ys - ly, "%s%s", r ? ", " : "", next[r].s);
    ly += strlen(ys + ly);
  }
  em_line(em, "scf.yield %s : %s", ys, types);
  em_close(em, "}");
  for (uint32_t r = 0; r < c->rows; r++) {
    ssa_t v;
    if (c->rows == 1)
      v = res;
    else
      snprintf(v.s, sizeof v.s, "%.30s#%u", res.s, r);
    v = em_convert(em, v, c->acc_dtype, c->out_dtype, n->lanes);
    ssa_t idx[2] = {row[r], n->idx[0]};
    em_mem_write(em, c->dst, c->out_dtype, idx, n, v, NULL);
  }
}

/* Bp[0, k, 0 ..] = convert(B[k, j0 ..]) for every k (zero past N): the
 * panel of columns j0 .. j0 + lanes - 1, packed just before its tiles use
 * it. Its source lines were prefetched by the previous panel's tiles. */
static void dot_pack_panel(emitter_t *em, const nest_t *n, dot_ctx_t *c) {
  ssa_t k = em_for_open(em, em_dimc(0), em_dimc(c->k), 1);
  nest_t pn = *n;
  pn.rank = 2;
  pn.idx[0] = k;
  pn.idx[1] = n->idx[0];
  ssa_t v = ex_read(em, c->bsrc, pn.idx, &pn);
  v = em_convert(em, v, c->bsrc->dtype, c->acc_dtype, n->lanes);
  if (n->masked) /* the tail panel: zeros in the padding */
    v = em_select(em, n->mask, v,
                  em_is_float(c->acc_dtype) ? em_cf32(em, n->lanes, 0.0f)
                                            : em_cint(em, em_compute(c->acc_dtype), n->lanes, 0),
                  em_compute(c->acc_dtype), n->lanes, true);
  ssa_t zero = em_cidx(em, 0);
  ssa_t pidx[3] = {zero, k, zero};
  nest_t wn = pn;
  wn.masked = false; /* the padding is written too */
  wn.rank = 3;
  em_mem_write(em, &c->b, c->acc_dtype, pidx, &wn, v, NULL);
  em_close(em, "}");
}

/* How the rows of a panel split into tiles: `main` rows in tiles of
 * EM_DOT_ROWS, then up to two tail tiles. A tile of r rows keeps 2r
 * accumulator registers (f32, 16 lanes) in flight; the FMA unit needs about
 * 8 independent chains (latency 4 x 2 pipes) to stay busy, so a 2-row tile
 * (4 chains) runs at half speed: 128 rows as 21 x 6 + 2 spent 9% of the
 * 1024^3 matmul in that 2-row tile. A remainder of 2 is taken as 4 + 4 (one
 * 6-row tile less) and a remainder of 1 as 4 + 3. The tiling changes no
 * result: every element is its own chain over k, in k order. */
static int64_t dot_row_split(int64_t m, uint32_t tails[2]) {
  int64_t rem = m % EM_DOT_ROWS, main = m - rem;
  tails[0] = tails[1] = 0;
  if (rem == 2 && main >= EM_DOT_ROWS) {
    main -= EM_DOT_ROWS;
    tails[0] = tails[1] = 4;
  } else if (rem == 1 && main >= EM_DOT_ROWS) {
    main -= EM_DOT_ROWS;
    tails[0] = 4;
    tails[1] = 3;
  } else {
    tails[0] = (uint32_t)rem;
  }
  return main;
}

/* One column panel: every row tile. */
static void dot_panel(emitter_t *em, const nest_t *n, void *p) {
  dot_ctx_t *c = p;
  if (c->bsrc) {
    dot_pack_panel(em, n, c);
    c->panel = em_cidx(em, 0);
  } else if (n->lanes) {
    c->panel = em_op2(em, "arith.divui", n->idx[0], em_cidx(em, n->lanes), "index");
  }
  uint32_t tails[2];
  const int64_t main = dot_row_split(c->m, tails);
  if (main > 0) {
    c->rows = EM_DOT_ROWS;
    if (main == EM_DOT_ROWS) {
      c->i0 = em_cidx(em, 0);
      dot_tile(em, n, c);
    } else {
      c->i0 = em_for_open(em, em_dimc(0), em_dimc(main), EM_DOT_ROWS);
      dot_tile(em, n, c);
      em_close(em, "}");
    }
  }
  int64_t row = main;
  for (int t = 0; t < 2 && tails[t]; t++) {
    c->rows = tails[t];
    c->i0 = em_cidx(em, row);
    dot_tile(em, n, c);
    row += tails[t];
  }
}

typedef struct tcopy_ctx {
  const expr_t *src;
  const view_t *dst;
  tsr_dtype_t to;
  bool transpose;
  uint32_t lanes; /* packing: panel width */
} tcopy_ctx_t;

/* dst[i, j] = convert(src[i, j] or src[j, i]) */
static void tcopy_body(emitter_t *em, const nest_t *n, void *p) {
  tcopy_ctx_t *c = p;
  ssa_t idx[2] = {n->idx[0], n->idx[1]};
  if (c->transpose) {
    idx[0] = n->idx[1];
    idx[1] = n->idx[0];
  }
  ssa_t v = ex_read(em, c->src, idx, n);
  v = em_convert(em, v, c->src->dtype, c->to, n->lanes);
  em_mem_write(em, c->dst, c->to, n->idx, n, v, NULL);
}

/* How many rows ahead the packing of B prefetches its source. */
enum { DOT_PACK_AHEAD = 8 };

/* Bp[j / L, k, j % L] = convert(B[k, j] or B[j, k]), zero past N. */
static void pack_body(emitter_t *em, const nest_t *n, void *p) {
  tcopy_ctx_t *c = p;
  ssa_t k = n->idx[0], j = n->idx[1];
  if (!c->transpose && n->lanes && c->src->kind == EX_MEM && !c->src->mask &&
      c->src->rank == 2 && c->src->dims[0] > DOT_PACK_AHEAD) {
    /* The B block of a grid step is usually new (from L3 or memory), rows
     * a multiple of 4 KiB apart: a read DOT_PACK_AHEAD rows ahead keeps
     * several lines in flight (the packing of a 128^3 step's B took 13% of
     * the 1024^3 matmul, waiting on those lines one row at a time).
     * Clamped to the last row: no address outside the block. */
    ssa_t ahead = em_op2(em, "arith.minui", em_iaddc(em, k, DOT_PACK_AHEAD),
                         em_cidx(em, c->src->dims[0] - 1), "index");
    em_prefetch2(em, &c->src->mem, ahead, j);
  }
  ssa_t idx[2] = {k, j};
  if (c->transpose) {
    idx[0] = j;
    idx[1] = k;
  }
  ssa_t v = ex_read(em, c->src, idx, n);
  v = em_convert(em, v, c->src->dtype, c->to, n->lanes);
  if (n->masked) /* the tail panel: zeros in the padding */
    v = em_select(em, n->mask, v,
                  em_is_float(c->to) ? em_cf32(em, n->lanes, 0.0f)
                                     : em_cint(em, em_compute(c->to), n->lanes, 0),
                  em_compute(c->to), n->lanes, true);
  ssa_t L = em_cidx(em, c->lanes);
  ssa_t panel = em_op2(em, "arith.divui", j, L, "index");
  ssa_t lane = em_op2(em, "arith.remui", j, L, "index");
  ssa_t pidx[3] = {panel, k, lane};
  nest_t wn = *n;
  wn.masked = false; /* the padding is written too */
  em_mem_write(em, c->dst, c->to, pidx, &wn, v, NULL);
}

/* v as a [rows, cols] view of dtype `to` with unit inner stride (converted
 * and/or transposed into a new buffer unless it already is one). */
static view_t dot_operand(emitter_t *em, const tsr_value_t *v, tsr_dtype_t to, bool transpose) {
  vinfo_t *vi = &em->vals[v->id];
  tsr_dtype_t from = (tsr_dtype_t)v->type.dtype;
  bool same = from == to || (em_int_bits(from) == 32 && em_int_bits(to) == 32 &&
                             !em_is_float(from) && !em_is_float(to));
  if (vi->kind == VK_MEM && same && !transpose && vi->mem.strides[1] == 1) return vi->mem;
  expr_t *src = operand_expr(em, v);
  int64_t dims[2] = {v->type.dims[transpose ? 1 : 0], v->type.dims[transpose ? 0 : 1]};
  view_t buf = em_buffer(em, to, 2, dims);
  tcopy_ctx_t c = {.src = src, .dst = &buf, .to = to, .transpose = transpose};
  dimv_t ext[2] = {em_dimc(dims[0]), em_dimc(dims[1])};
  uint32_t lanes = !transpose && ex_vectorizable(src) ? em_pick_lanes(dims[1]) : 0;
  em_nest(em, 2, ext, lanes, tcopy_body, &c);
  return buf;
}

/* A [M,K] copied into rows of K + 16 elements: the rows of a tile then
 * fall in different L1 sets (rows of a block are often a multiple of 4 KiB
 * apart), and the copy converts A to the accumulator dtype. */
static view_t dot_pack_a(emitter_t *em, const tsr_value_t *v, tsr_dtype_t to) {
  expr_t *src = operand_expr(em, v);
  const int64_t m = v->type.dims[0], k = v->type.dims[1];
  int64_t dims[2] = {m, k + EM_LANES};
  view_t buf = em_buffer(em, to, 2, dims);
  if (!src) return buf;
  int64_t vd[2] = {m, k}, vs[2] = {k + EM_LANES, 1};
  view_t a = em_view_make(em, buf.root, buf.off, 2, vd, vs, NULL);
  expr_t *e = src;
  if (src->dtype != to) {
    e = ex_new(em, EX_OP, to, 2, vd);
    if (!e) return a;
    e->op = TSR_OP_CONVERT;
    e->arg_dtype = src->dtype;
    e->nargs = 1;
    e->args[0] = src;
  }
  ex_store(em, e, &a, NULL);
  return a;
}

/* Bp[j0 / L, k, j0 % L ..] = 8 elements of column k of B^T from row j0. */
static void pack_tile_write(emitter_t *em, void *p, ssa_t row, ssa_t col0, const nest_t *n,
                            ssa_t vec) {
  tcopy_ctx_t *c = p;
  ssa_t L = em_cidx(em, c->lanes);
  ssa_t idx[3] = {em_op2(em, "arith.divui", col0, L, "index"), row,
                  em_op2(em, "arith.remui", col0, L, "index")};
  em_mem_write(em, c->dst, c->to, idx, n, vec, NULL);
}

/* B ([K,N], or [N,K] with transpose) packed into [ceil(N / lanes), K, lanes]. */
static view_t dot_pack(emitter_t *em, const tsr_value_t *v, tsr_dtype_t to, bool transpose,
                       uint32_t lanes) {
  expr_t *src = operand_expr(em, v);
  const int64_t k = v->type.dims[transpose ? 1 : 0], n = v->type.dims[transpose ? 0 : 1];
  int64_t dims[3] = {(n + lanes - 1) / lanes, k, lanes};
  view_t buf = em_buffer(em, to, 3, dims);
  if (!src) return buf;
  tcopy_ctx_t c = {.src = src, .dst = &buf, .to = to, .transpose = transpose, .lanes = lanes};
  if (transpose && lanes % 8 == 0 && tile_transpose8_ok(src, to)) {
    /* rows of B^T are B's columns: tiles of 8 x 8 (row = k, col0 = j0) */
    tile_transpose8(em, src, to, pack_tile_write, &c);
    return buf;
  }
  dimv_t ext[2] = {em_dimc(k), em_dimc(dims[0] * lanes)};
  /* rows of B are read along n: vectors unless transposed */
  uint32_t vl = !transpose && ex_vectorizable(src) ? lanes : 0;
  if (vl)
    em_nest(em, 2, ext, vl, pack_body, &c);
  else {
    ext[1] = em_dimc(n);
    em_nest(em, 2, ext, 0, pack_body, &c);
    if (dims[0] * lanes > n) { /* zero the padding of the tail panel */
      expr_t *z = ex_new(em, EX_SCALAR, to, 2, (int64_t[]){k, dims[0] * lanes - n});
      if (!z) return buf;
      z->scalar = em_is_float(to) ? em_cf32(em, 0, 0.0f) : em_cint(em, em_compute(to), 0, 0);
      int64_t tail = n % lanes;
      int64_t pd[2] = {k, lanes - tail}, ps[2] = {lanes, 1};
      view_t pad = em_view_make(em, buf.root,
                                em_cidx(em, (dims[0] - 1) * k * lanes + tail), 2, pd, ps,
                                NULL);
      ex_store(em, z, &pad, NULL);
    }
  }
  return buf;
}

void em_op_dot(emitter_t *em, const tsr_op_t *op) {
  const tsr_value_t *a = op->operands[0], *b = op->operands[1], *r = result0(op);
  const tsr_dtype_t in = (tsr_dtype_t)a->type.dtype;
  const tsr_dtype_class_t cls = tsr_dtype_class(in);
  dot_ctx_t c;
  memset(&c, 0, sizeof c);
  c.acc_dtype = cls == TSR_CLASS_FLOAT ? TSR_DTYPE_F32
                : cls == TSR_CLASS_SINT ? TSR_DTYPE_I32
                                        : TSR_DTYPE_U32;
  c.out_dtype = (tsr_dtype_t)r->type.dtype;
  const bool tr = (op->flags & TSR_OPF_TRANSPOSE_RHS) != 0;
  const int64_t nn = r->type.dims[1];
  c.m = r->type.dims[0];
  c.k = a->type.dims[1];
  if (op->num_operands > 2) c.acc = operand_expr(em, op->operands[2]);
  uint32_t lanes = em_pick_lanes(nn);
  expr_t *bsrc = lanes && !tr ? operand_expr(em, b) : NULL;
  if (bsrc && !ex_vectorizable(bsrc)) bsrc = NULL;
  const bool prefetch = bsrc && bsrc->kind == EX_MEM && !bsrc->mask && bsrc->rank == 2;
  if (prefetch) {
    /* the first panel's source lines, in flight while A is copied */
    ssa_t k = em_for_open(em, em_dimc(0), em_dimc(c.k), 1);
    em_prefetch2(em, &bsrc->mem, k, em_cidx(em, 0));
    em_close(em, "}");
  }
  c.a = dot_pack_a(em, a, c.acc_dtype);
  /* The accumulator may be a load of the ref the result is stored into
   * (`%s = load %c; %p = dot %x, %y, %s; store %c, %p`): each tile reads its
   * elements before it writes them, so that is done in place; any other
   * overlap goes through a copy first. Saves a block copy per step of the
   * 1024^3 matmul (docs/lowering_codegen.md). */
  view_t dst = em_result_dest(em, op, false);
  if (c.acc && !ex_inplace_safe(em, c.acc, &dst)) {
    view_t t = em_materialize(em, c.acc);
    c.acc = mem_expr(em, t, c.out_dtype);
  }
  c.dst = &dst;
  const bool vector_tiles = lanes && dst.strides[1] == 1 && !(c.acc && !ex_vectorizable(c.acc));
  if (vector_tiles && bsrc && !ex_reads_root(bsrc, dst.root)) {
    /* B [K,N] read along N: packed one panel at a time into one [K, lanes]
     * buffer that stays in L1, each panel's source lines prefetched while
     * the previous panel is multiplied (the B block of a grid step is
     * usually new, from L3 or memory; packed all at once, the packing
     * waited on those lines). B must not be the memory the tiles write:
     * later panels are read after earlier ones are stored. */
    c.bsrc = bsrc;
    c.ncols = nn;
    c.prefetch_next = prefetch;
    c.b = em_buffer(em, c.acc_dtype, 3, (int64_t[]){1, c.k, lanes});
  } else if (vector_tiles) {
    c.b = dot_pack(em, b, c.acc_dtype, tr, lanes);
  } else {
    /* scalar tiles: B unpacked */
    c.b = dot_operand(em, b, c.acc_dtype, tr);
    lanes = 0;
  }
  dimv_t ext[1] = {em_dimc(nn)};
  em_nest(em, 1, ext, lanes, dot_panel, &c);
}

/* ---- transpose, concatenate, roll, gather ------------------------------------------------------ */

typedef struct perm_ctx {
  const expr_t *src;
  const view_t *dst;
  const int64_t *perm;
} perm_ctx_t;

static void perm_body(emitter_t *em, const nest_t *n, void *p) {
  perm_ctx_t *c = p;
  ssa_t idx[TSR_MAX_RANK];
  for (uint32_t d = 0; d < n->rank; d++) idx[c->perm[d]] = n->idx[d];
  ssa_t v = ex_read(em, c->src, idx, n);
  em_mem_write(em, c->dst, c->src->dtype, n->idx, n, v, NULL);
}

typedef struct tile_dst {
  const view_t *view;
  tsr_dtype_t dtype;
} tile_dst_t;

/* dst[row, col0 ..] = 8 elements */
static void transpose_tile_write(emitter_t *em, void *p, ssa_t row, ssa_t col0, const nest_t *n,
                                 ssa_t vec) {
  const tile_dst_t *d = p;
  ssa_t idx[2] = {row, col0};
  em_mem_write(em, d->view, d->dtype, idx, n, vec, NULL);
}

void em_op_transpose(emitter_t *em, const tsr_op_t *op) {
  const tsr_value_t *a = op->operands[0], *r = result0(op);
  expr_t *src = operand_expr(em, a);
  if (!src) return;
  view_t dst = em_result_dest(em, op, ex_has_mutable(src));
  if (!ex_inplace_safe(em, src, &dst)) src = mem_expr(em, em_materialize(em, src), src->dtype);
  uint32_t rank = r->type.rank, lanes = 0;
  if (rank == 2 && op->ints[0] == 1 && dst.strides[1] == 1 &&
      tile_transpose8_ok(src, src->dtype)) {
    tile_dst_t td = {.view = &dst, .dtype = src->dtype};
    tile_transpose8(em, src, src->dtype, transpose_tile_write, &td);
    return;
  }
  perm_ctx_t c = {.src = src, .dst = &dst, .perm = op->ints};
  dimv_t ext[TSR_MAX_RANK];
  for (uint32_t d = 0; d < rank; d++) ext[d] = em_dimc(r->type.dims[d]);
  if (op->ints[rank - 1] == (int64_t)rank - 1 && ex_vectorizable(src) &&
      dst.strides[rank - 1] == 1)
    lanes = em_pick_lanes(r->type.dims[rank - 1]);
  em_nest(em, rank, ext, lanes, perm_body, &c);
}

void em_op_concatenate(emitter_t *em, const tsr_op_t *op) {
  const tsr_value_t *r = result0(op);
  const uint32_t axis = (uint32_t)op->ints[0];
  bool mut = false;
  expr_t **src = em_alloc(em, (op->num_operands + 1) * sizeof *src);
  if (!src) return;
  for (uint32_t i = 0; i < op->num_operands; i++) {
    src[i] = operand_expr(em, op->operands[i]);
    if (!src[i]) return;
    mut |= ex_has_mutable(src[i]);
  }
  view_t dst = em_result_dest(em, op, mut);
  int64_t off = 0;
  for (uint32_t i = 0; i < op->num_operands; i++) {
    const tsr_value_t *v = op->operands[i];
    expr_t *e = src[i];
    if (!ex_inplace_safe(em, e, &dst)) e = mem_expr(em, em_materialize(em, e), e->dtype);
    int64_t dims[TSR_MAX_RANK];
    for (uint32_t d = 0; d < r->type.rank; d++) dims[d] = dst.dims[d];
    dims[axis] = v->type.dims[axis];
    view_t part = em_view_make(em, dst.root, em_iaddc(em, dst.off, off * dst.strides[axis]),
                               dst.rank, dims, dst.strides, NULL);
    ex_store(em, e, &part, NULL);
    off += v->type.dims[axis];
  }
}

typedef struct roll_ctx {
  const view_t *src, *dst;
  tsr_dtype_t dtype;
  uint32_t axis;
  int64_t len;
  ssa_t shift; /* in [0, len), index */
  int64_t stride; /* the stride mod len: slice k along stride_axis is rolled
                     by shift + k * stride; 0 without one */
  uint32_t stride_axis;
} roll_ctx_t;

static void roll_body(emitter_t *em, const nest_t *n, void *p) {
  roll_ctx_t *c = p;
  ssa_t idx[TSR_MAX_RANK];
  for (uint32_t d = 0; d < n->rank; d++) idx[d] = n->idx[d];
  ssa_t shift = c->shift;
  if (c->stride) /* (shift + k * stride) mod len: both terms below len */
    shift = em_op2(em, "arith.remui",
                   em_iadd(em, shift, em_imulc(em, n->idx[c->stride_axis], c->stride)),
                   em_cidx(em, c->len), "index");
  /* src index (i - shift) mod len */
  ssa_t j = em_op2(em, "arith.subi", n->idx[c->axis], shift, "index");
  ssa_t neg = em_cmp(em, "cmpi", "slt", j, em_cidx(em, 0), "index");
  ssa_t jw = em_iaddc(em, j, c->len);
  idx[c->axis] = em_select(em, neg, jw, j, "index", 0, false);
  ssa_t v = em_mem_read(em, c->src, c->dtype, idx, n, NULL, NULL);
  em_mem_write(em, c->dst, c->dtype, n->idx, n, v, NULL);
}

typedef struct roll_copy_ctx {
  const view_t *src, *halves;
  tsr_dtype_t dtype;
} roll_copy_ctx_t;

static void roll_copy_body(emitter_t *em, const nest_t *n, void *p) {
  roll_copy_ctx_t *c = p;
  ssa_t v = em_mem_read(em, c->src, c->dtype, n->idx, n, NULL, NULL);
  em_mem_write(em, &c->halves[0], c->dtype, n->idx, n, v, NULL);
  em_mem_write(em, &c->halves[1], c->dtype, n->idx, n, v, NULL);
}

/* A roll along the last axis with vectors: the rows are copied twice, side
 * by side, into a buffer of rows of 2 x len, and the result is the view of
 * the `len` elements starting at len - shift in each doubled row, which its
 * users read with (unaligned) vector loads. Two vector copies instead of a
 * scalar nest with a wrap-around per element (the 450-op bitonic sort's 56
 * rolls of (8,128) f32: docs/benchmarks.md, "After the fix"). shift: index in
 * [0, len). The buffer is the value's own, written here only. */
static view_t roll_last_doubled(emitter_t *em, const view_t *src, tsr_dtype_t dtype,
                                int64_t len, ssa_t shift) {
  uint32_t rank = src->rank;
  int64_t dims[TSR_MAX_RANK];
  for (uint32_t d = 0; d < rank; d++) dims[d] = src->dims[d];
  dims[rank - 1] = 2 * len;
  view_t dbl = em_value_buffer(em, dtype, rank, dims);
  view_t halves[2];
  for (int half = 0; half < 2; half++)
    halves[half] = em_view_make(em, dbl.root, em_iaddc(em, dbl.off, half * len), rank,
                                src->dims, dbl.strides, NULL);
  roll_copy_ctx_t c = {.src = src, .halves = halves, .dtype = dtype};
  dimv_t ext[TSR_MAX_RANK];
  for (uint32_t d = 0; d < rank; d++) ext[d] = em_dimc(src->dims[d]);
  em_nest(em, rank, ext, em_pick_lanes(len), roll_copy_body, &c);
  ssa_t start = em_op2(em, "arith.subi", em_cidx(em, len), shift, "index");
  return em_view_make(em, dbl.root, em_iadd(em, dbl.off, start), rank, src->dims, dbl.strides,
                      em_key(em, "R%u", dbl.root));
}

void em_op_roll(emitter_t *em, const tsr_op_t *op) {
  const tsr_value_t *a = op->operands[0], *r = result0(op);
  roll_ctx_t c;
  memset(&c, 0, sizeof c);
  view_t src = em_value_view(em, a);
  c.src = &src;
  c.dtype = (tsr_dtype_t)a->type.dtype;
  c.axis = (uint32_t)op->ints[0];
  c.len = a->type.dims[c.axis];
  vinfo_t *sv = &em->vals[op->operands[1]->id];
  ssa_t s = sv->scalar;
  ssa_t len = em_cint(em, "i32", 0, c.len);
  ssa_t m = em_op2(em, "arith.remsi", s, len, "i32");
  ssa_t neg = em_cmp(em, "cmpi", "slt", m, em_cint(em, "i32", 0, 0), "i32");
  ssa_t mw = em_op2(em, "arith.addi", m, len, "i32");
  m = em_select(em, neg, mw, m, "i32", 0, false);
  c.shift = em_idx_of_i32(em, m);
  if (op->num_ints == 3) {
    c.stride = c.len ? op->ints[1] % c.len : 0;
    c.stride_axis = (uint32_t)op->ints[2];
  }
  uint32_t rank = r->type.rank, lanes = 0;
  if (!c.stride && c.axis + 1 == rank && c.len >= 2 * EM_LANES && src.strides[rank - 1] == 1) {
    em_set_mem(em, r, roll_last_doubled(em, &src, c.dtype, c.len, c.shift));
    return;
  }
  view_t dst = em_result_dest(em, op, false);
  c.dst = &dst;
  dimv_t ext[TSR_MAX_RANK];
  for (uint32_t d = 0; d < rank; d++) ext[d] = em_dimc(r->type.dims[d]);
  /* Vectors along the last axis need one shift for all their lanes. */
  if (c.axis + 1 < rank && src.strides[rank - 1] == 1 && dst.strides[rank - 1] == 1 &&
      !(c.stride && c.stride_axis + 1 == rank))
    lanes = em_pick_lanes(r->type.dims[rank - 1]);
  em_nest(em, rank, ext, lanes, roll_body, &c);
}

typedef struct gather_ctx {
  const view_t *src, *dst;
  const expr_t *idx;
  tsr_dtype_t dtype;
  uint32_t axis;
  int64_t src_len;
  int64_t line; /* the result's extent along its last dim */
} gather_ctx_t;

/* The nest's position with its `axis` coordinate replaced by the index
 * `idx` holds there, clamped into [0, len): an out-of-range index is a
 * kernel error in the interpreter; here it only stays inside the array. */
static void take_position_at(emitter_t *em, const nest_t *n, const ssa_t *at, const expr_t *idx,
                             uint32_t axis, int64_t len, ssa_t out[TSR_MAX_RANK]) {
  ssa_t i = ex_read(em, idx, at, n);
  i = em_op2(em, "arith.maxsi", i, em_cint(em, "i32", 0, 0), "i32");
  i = em_op2(em, "arith.minsi", i, em_cint(em, "i32", 0, len - 1), "i32");
  for (uint32_t d = 0; d < n->rank; d++) out[d] = at[d];
  out[axis] = em_idx_of_i32(em, i);
}

static void take_position(emitter_t *em, const nest_t *n, const expr_t *idx, uint32_t axis,
                          int64_t len, ssa_t out[TSR_MAX_RANK]) {
  take_position_at(em, n, n->idx, idx, axis, len, out);
}

/* Gathers along the last axis of lines this long prefetch the source of the
 * element GATHER_AHEAD positions on (its index clamped into the line, as
 * the read's): a gather by a permutation of a long line (the library's
 * sort: payloads in the order of an argsort) misses the caches on every
 * element, and the prefetches keep more misses in flight than the loop
 * alone (interp/blockops.c does the same). A hint: results unchanged. */
enum { GATHER_PREFETCH_LINE = 4096, GATHER_AHEAD = 32 };

static void gather_body(emitter_t *em, const nest_t *n, void *p) {
  gather_ctx_t *c = p;
  ssa_t sidx[TSR_MAX_RANK];
  const uint32_t last = n->rank ? n->rank - 1 : 0;
  if (n->rank && !n->lanes && c->axis == last && c->src_len >= GATHER_PREFETCH_LINE &&
      c->line >= GATHER_PREFETCH_LINE) {
    ssa_t at[TSR_MAX_RANK], pidx[TSR_MAX_RANK];
    for (uint32_t d = 0; d < n->rank; d++) at[d] = n->idx[d];
    ssa_t ahead = em_op2(em, "arith.addi", n->idx[last], em_cidx(em, GATHER_AHEAD), "index");
    at[last] = em_op2(em, "arith.minui", ahead, em_cidx(em, c->line - 1), "index");
    take_position_at(em, n, at, c->idx, c->axis, c->src_len, pidx);
    em_mem_prefetch(em, c->src, pidx, 3);
  }
  take_position(em, n, c->idx, c->axis, c->src_len, sidx);
  ssa_t v = em_mem_read(em, c->src, c->dtype, sidx, n, NULL, NULL);
  em_mem_write(em, c->dst, c->dtype, n->idx, n, v, NULL);
}

void em_op_gather(emitter_t *em, const tsr_op_t *op) {
  const tsr_value_t *a = op->operands[0], *r = result0(op);
  gather_ctx_t c;
  memset(&c, 0, sizeof c);
  view_t src = em_value_view(em, a);
  c.src = &src;
  c.dtype = (tsr_dtype_t)a->type.dtype;
  c.axis = (uint32_t)op->ints[0];
  c.src_len = a->type.dims[c.axis];
  c.line = r->type.rank ? r->type.dims[r->type.rank - 1] : 1;
  c.idx = operand_expr(em, op->operands[1]);
  if (!c.idx) return;
  view_t dst = em_result_dest(em, op, ex_has_mutable(c.idx));
  c.dst = &dst;
  dimv_t ext[TSR_MAX_RANK];
  for (uint32_t d = 0; d < r->type.rank; d++) ext[d] = em_dimc(r->type.dims[d]);
  em_nest(em, r->type.rank, ext, 0, gather_body, &c);
}

/* scatter: the operand copied into the result, then each update written at
 * its index along the axis, in the indices' row-major order (a scalar loop
 * nest: of a repeated index the last write wins, as in the interpreter). */
typedef struct scatter_ctx {
  const view_t *dst;
  const expr_t *idx, *upd;
  tsr_dtype_t dtype;
  uint32_t axis;
  int64_t dst_len;
} scatter_ctx_t;

static void scatter_body(emitter_t *em, const nest_t *n, void *p) {
  scatter_ctx_t *c = p;
  ssa_t didx[TSR_MAX_RANK];
  take_position(em, n, c->idx, c->axis, c->dst_len, didx);
  ssa_t v = ex_read(em, c->upd, n->idx, n);
  em_mem_write(em, c->dst, c->dtype, didx, n, v, NULL);
}

void em_op_scatter(emitter_t *em, const tsr_op_t *op) {
  const tsr_value_t *a = op->operands[0], *idx = op->operands[1];
  scatter_ctx_t c;
  memset(&c, 0, sizeof c);
  expr_t *ae = operand_expr(em, a);
  c.idx = operand_expr(em, idx);
  c.upd = operand_expr(em, op->operands[2]);
  if (!ae || !c.idx || !c.upd) return;
  c.dtype = (tsr_dtype_t)a->type.dtype;
  c.axis = (uint32_t)op->ints[0];
  c.dst_len = a->type.dims[c.axis];
  /* its own buffer: the updates are written after the copy, so no operand
   * may read what the copy wrote */
  view_t dst = em_result_dest(em, op, true);
  c.dst = &dst;
  ex_store(em, ae, &dst, NULL);
  dimv_t ext[TSR_MAX_RANK];
  for (uint32_t d = 0; d < idx->type.rank; d++) ext[d] = em_dimc(idx->type.dims[d]);
  em_nest(em, idx->type.rank, ext, 0, scatter_body, &c);
}
