/* Control flow: for and while as scf.while (each iteration a step of the
 * run), if as scf.if, scoped regions with their buffers; scalar carries as
 * SSA values, block carries in buffers written with parallel-copy semantics
 * at each yield (layer 4, emit_internal.h). Nested regions are emitted
 * through the driver's dispatch, em_emit_region. */
#include <stdio.h>

#include "ir/opview.h"
#include "lower/emit_dispatch.h"
#include "lower/emit_internal.h"
#include "lower/emit_runtime.h"

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
    tl_add(&names, "%s", em_scalar(em, v).s);
    tl_add(&types, "%s", em_compute((tsr_dtype_t)v->type.dtype));
  }
  if (names.count)
    em_line(em, "%s %s : %s", what, tl_text(&names), tl_text(&types));
  else
    em_line(em, "%s", what);
  tl_done(em, &names);
  tl_done(em, &types);
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
      em_set_mem(em, a, *carry[slot]);
    else
      em_set_scalar(em, a, scalar_names[k++]);
  }
}

static void bind_results(emitter_t *em, const tsr_op_t *op, view_t **carry,
                         const scalar_results_t *sr) {
  for (uint32_t i = 0; i < op->num_results; i++) {
    if (carry[i])
      em_set_mem(em, op->results[i], *carry[i]);
    else
      em_set_scalar(em, op->results[i], result_name(sr, sr->slot[i]));
  }
}

/* The initial values of a loop's carries (`inits`, from its typed view):
 * a carry kept in a buffer (carry[i]) is stored there; a scalar one gets a
 * before- and an after-region argument, bargs[k] and aargs[k] from `k` on,
 * added to the lists (types may be NULL). Returns the next k. */
static uint32_t add_carries(emitter_t *em, const tsr_op_t *op, tsr_value_t *const *init_values,
                            view_t **carry, ssa_t *bargs, ssa_t *aargs, uint32_t k,
                            text_list_t *inits, text_list_t *aparams, text_list_t *bnames,
                            text_list_t *types) {
  for (uint32_t i = 0; i < op->num_results; i++) {
    const tsr_value_t *init = init_values[i];
    if (carry[i]) {
      expr_t *e = ex_of_value(em, init, carry[i]->rank, carry[i]->dims);
      ex_store(em, e, carry[i], NULL);
      continue;
    }
    const char *t = em_compute((tsr_dtype_t)init->type.dtype);
    bargs[k] = em_fresh(em);
    aargs[k] = em_fresh(em);
    tl_add(inits, "%s = %s", bargs[k].s, em_scalar(em, init).s);
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
void em_op_for(emitter_t *em, const tsr_op_t *op) {
  tsr_for_view_t fv;
  if (!tsr_opview_for(op, &fv)) {
    em_unimplemented(em, op, NULL);
    return;
  }
  const tsr_region_t *r = fv.body;
  ssa_t lo = em_scalar(em, fv.lo), hi = em_scalar(em, fv.hi);
  ssa_t st = em_scalar(em, fv.step);
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
  uint32_t k = add_carries(em, op, fv.inits, carry, bargs, aargs, 1, &inits, &aparams, &bnames,
                           &types);
  ssa_t res = em_fresh(em);
  em_open(em, "%s:%u = scf.while (%s) : (%s) -> (%s) {", res.s, k, tl_text(&inits),
          tl_text(&types), tl_text(&types));
  ssa_t in = em_cmp(em, "cmpi", "slt", bargs[0], hi2, "i32");
  ssa_t go = em_op2(em, "arith.andi", in,
                    em_count_step(em, in, em_site_of(em, op), em_cint(em, "i64", 0, 0)), "i1");
  em_line(em, "scf.condition(%s) %s : %s", go.s, tl_text(&bnames), tl_text(&types));
  em->indent--;
  em_open(em, "} do {");
  em_line(em, "^bb0(%s):", tl_text(&aparams));
  em_set_scalar(em, fv.iv, aargs[0]);
  bind_args(em, r, 1, carry, aargs + 1);
  em_emit_region(em, r);
  const tsr_op_t *term = em_terminator(r);
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
    if (v->type.kind == TSR_TYPE_SCALAR) tl_add(&ys, "%s", em_scalar(em, v).s);
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
      em_set_mem(em, op->results[i], *carry[i]);
    } else {
      ssa_t name;
      snprintf(name.s, sizeof name.s, "%.30s#%u", res.s, sr.slot[i] + 1);
      em_set_scalar(em, op->results[i], name);
    }
  }
}

void em_op_while(emitter_t *em, const tsr_op_t *op) {
  tsr_while_view_t wv;
  if (!tsr_opview_while(op, &wv)) {
    em_unimplemented(em, op, NULL);
    return;
  }
  const tsr_region_t *before = wv.cond, *after = wv.body;
  view_t **carry = carry_buffers(em, op);
  scalar_results_t sr;
  if (!carry || !collect_scalars(em, op, &sr)) return;
  ssa_t *bargs = em_alloc(em, (sr.count + 1) * sizeof *bargs);
  ssa_t *aargs = em_alloc(em, (sr.count + 1) * sizeof *aargs);
  if (!bargs || !aargs) return;
  text_list_t inits = {0}, aparams = {0}, bnames = {0};
  (void)add_carries(em, op, wv.inits, carry, bargs, aargs, 0, &inits, &aparams, &bnames, NULL);
  char prefix[64];
  result_prefix(&sr, prefix, sizeof prefix);
  if (sr.count)
    em_open(em, "%sscf.while (%s) : (%s) -> (%s) {", prefix, tl_text(&inits), sr.types,
            sr.types);
  else
    em_open(em, "scf.while : () -> () {");
  tl_done(em, &inits);
  bind_args(em, before, 0, carry, bargs);
  em_emit_region(em, before);
  const tsr_op_t *cond = em_terminator(before);
  if (!cond || cond->opcode != TSR_OP_CONDITION) {
    em_unimplemented(em, op, "while without condition");
    tl_done(em, &aparams);
    tl_done(em, &bnames);
    return;
  }
  ssa_t c = em_scalar(em, cond->operands[0]);
  c = em_op2(em, "arith.andi", c,
             em_count_step(em, c, em_site_of(em, op), em_cint(em, "i64", 0, 0)), "i1");
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
  em_emit_region(em, after);
  const tsr_op_t *term = em_terminator(after);
  if (term) copy_yields(em, term, carry);
  yield_scalars(em, term, "scf.yield");
  em_close(em, "}");
  bind_results(em, op, carry, &sr);
}

void em_op_if(emitter_t *em, const tsr_op_t *op) {
  tsr_if_view_t iv;
  if (!tsr_opview_if(op, &iv)) {
    em_unimplemented(em, op, NULL);
    return;
  }
  ssa_t c = em_scalar(em, iv.cond);
  view_t **dest = carry_buffers(em, op);
  scalar_results_t sr;
  if (!dest || !collect_scalars(em, op, &sr)) return;
  char prefix[64];
  result_prefix(&sr, prefix, sizeof prefix);
  if (sr.count)
    em_open(em, "%sscf.if %s -> (%s) {", prefix, c.s, sr.types);
  else
    em_open(em, "scf.if %s {", c.s);
  const tsr_region_t *branches[2] = {iv.then_region, iv.else_region};
  for (uint32_t b = 0; b < 2; b++) {
    const tsr_region_t *r = branches[b];
    if (b == 1) {
      if (!iv.has_else && op->num_results == 0 && !r->first) break;
      em->indent--;
      em_open(em, "} else {");
    }
    em_emit_region(em, r);
    const tsr_op_t *term = em_terminator(r);
    if (term) copy_yields(em, term, dest);
    if (sr.count) yield_scalars(em, term, "scf.yield");
  }
  em_close(em, "}");
  bind_results(em, op, dest, &sr);
}

void em_op_scoped(emitter_t *em, const tsr_op_t *op) {
  tsr_scoped_view_t sv;
  if (!tsr_opview_scoped(op, &sv)) {
    em_unimplemented(em, op, NULL);
    return;
  }
  const tsr_region_t *r = sv.body;
  for (uint32_t i = 0; i < sv.num_buffers; i++) {
    const tsr_value_t *a = sv.buffers[i];
    if (a->type.kind == TSR_TYPE_SEM) {
      em_sem_ref_init(em, a);
      continue;
    }
    if (a->type.space == TSR_SPACE_HBM || a->type.space == TSR_SPACE_ANY) {
      /* device-wide: the runtime's instance, shared by the device's cores.
       * The runtime copies remote DMAs and those of dynamic size into
       * memory every core registers once, before any runs (lower_api.h),
       * which an instance made at scope entry is not. */
      if (em->remote_dmas) {
        em_unimplemented(em, op,
                         "an hbm/any scoped buffer in a kernel with remote DMAs or DMAs of "
                         "dynamic size");
        return;
      }
      vinfo_t *vi = em_vi(em, a);
      vi->kind = VK_REF;
      uint32_t root = em_wide_enter(em, op, i, a);
      int64_t strides[TSR_MAX_RANK];
      em_dense_strides(a->type.rank, a->type.dims, strides);
      vi->mem = em_view_make(em, root, em_cidx(em, 0), a->type.rank, a->type.dims, strides,
                             em_key(em, "R%u", a->id));
      vi->mutable_ref = em->stored[a->id];
      continue;
    }
    vinfo_t *vi = em_vi(em, a);
    vi->kind = VK_REF;
    vi->mem = em_buffer(em, (tsr_dtype_t)a->type.dtype, a->type.rank, a->type.dims);
    vi->mem.key = em_key(em, "R%u", a->id);
    vi->mutable_ref = em->stored[a->id];
    /* fresh at every entry, as in the interpreter, unless fully stored first */
    if (!em_first_touch_stores_all(r, a)) em_fill_view(em, &vi->mem, (tsr_dtype_t)a->type.dtype);
  }
  em_emit_region(em, r);
  for (uint32_t i = 0; i < sv.num_buffers; i++) {
    const tsr_value_t *a = sv.buffers[i];
    if (a->type.kind == TSR_TYPE_REF &&
        (a->type.space == TSR_SPACE_HBM || a->type.space == TSR_SPACE_ANY))
      em_wide_exit(em, op, i);
  }
  const tsr_op_t *term = em_terminator(r);
  for (uint32_t i = 0; term && i < op->num_results && i < term->num_operands; i++) {
    const tsr_value_t *v = term->operands[i];
    vinfo_t *vi = em_vi(em, v);
    if (vi->kind == VK_LAZY) {
      em_set_mem(em, op->results[i], em_materialize_value(em, vi->expr));
    } else {
      em->vals[op->results[i]->id] = *vi;
    }
  }
}
