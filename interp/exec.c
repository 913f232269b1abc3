/* The instruction loop: one core runs the prepared code from a pc until the
 * end of the body, a wait that cannot be satisfied yet, or a stop. Plain
 * unary and binary ops jump straight to their block loops; the others are
 * implemented here (loads, stores, moves, scopes, print: static, so that they
 * inline into the loop), in dma.c (semaphores, DMAs) or in blockops.c.
 * Dispatch: one switch over the instruction codes (XOP_*, interp_internal.h)
 * that prepare.c's family handlers chose, not over opcodes: the per-family
 * and per-op dispatch happened once, at preparation. Per instruction is the
 * loop's cheapest shape (one indirect jump per instruction; a family level
 * here would add a second one for the families with several instructions,
 * and control instructions belong to no family). Measured with callgrind on
 * bench/kernels/steps_100000.tsr: 204.0 M instructions with the former
 * switch over opcodes, 202.9 M with this one. Every code has its case
 * (-Wswitch-enum is an error in this function); the default is for
 * corrupt codes. */
#include <stdio.h>

#include "base/sort.h"
#include "interp/interp_internal.h"

typedef struct print_ctx {
  const run_t *run;
  const text_plan_t *tp;
} print_ctx_t;

static tsr_print_value_t print_operand(void *ctx, uint32_t i) {
  const print_ctx_t *pc = ctx;
  uint32_t id = pc->tp->values[i];
  const value_info_t *vi = &pc->run->p->values[id];
  size_t es = tsr_dtype_size((tsr_dtype_t)vi->dtype);
  return (tsr_print_value_t){(tsr_dtype_t)vi->dtype, pc->run->vals[id], vi->bytes / es,
                             vi->vector};
}

static void do_print(run_t *run, const insn_t *in) {
  print_ctx_t ctx = {run, in->plan};
  tsr_interp_print(run->sh->out, ctx.tp->text, ctx.tp->count, print_operand, &ctx);
}

/* ---- Loads, stores, slices ---- */

/* A load or store whose view reaches outside its ref (tsr_view_clip): the
 * lanes inside are read or written, those outside read as the
 * uninitialized value or are dropped; an error when the options do not
 * allow it (the load then gives the uninitialized value, the store
 * nothing). */
static void load_outside(run_t *run, const insn_t *in, const ref_access_t *a, void *dst) {
  tsr_interp_fill_uninit(run, (tsr_dtype_t)a->ri->dtype, dst, (uint64_t)in->n);
  view_clip_t c;
  if (!tsr_view_clip(run, in, in->plan, a->ri, a->rr->data, a->rr->shadow, false, &c) ||
      c.empty)
    return;
  if (c.in.shadow) {
    int64_t bad = tsr_view_first_unwritten(&c.in);
    if (bad >= 0)
      tsr_interp_kernel_warning(run, in->site, TSR_DIAG_UNINITIALIZED,
                                "read of uninitialized memory of %%%s: it holds the "
                                "uninitialized value",
                                a->ri->name);
  }
  int64_t dstr[TSR_MAX_RANK], off = 0;
  tsr_blockops_dense_strides(c.in.rank, c.full, dstr);
  for (uint32_t k = 0; k < c.in.rank; k++) off += c.lo[k] * dstr[k];
  tsr_blockops_copy(a->es, c.in.rank, c.in.dims, (uint8_t *)dst + off * (int64_t)a->es, dstr,
                    c.in.base, c.in.strides);
}

static void store_outside(run_t *run, const insn_t *in, const ref_access_t *a,
                          const uint8_t *src) {
  const view_plan_t *vp = in->plan;
  view_clip_t c;
  if (!tsr_view_clip(run, in, vp, a->ri, a->rr->data, a->rr->shadow, true, &c) || c.empty)
    return;
  int64_t sstr[TSR_MAX_RANK], off = 0;
  if (vp->value_scalar) {
    memset(sstr, 0, sizeof sstr);
  } else {
    tsr_blockops_dense_strides(c.in.rank, c.full, sstr);
    for (uint32_t k = 0; k < c.in.rank; k++) off += c.lo[k] * sstr[k];
  }
  tsr_blockops_copy(a->es, c.in.rank, c.in.dims, c.in.base, c.in.strides,
                    src + off * (int64_t)a->es, sstr);
  if (c.in.shadow) tsr_view_mark_written(c.in.rank, c.in.dims, c.in.shadow, c.in.strides);
}

static void load(run_t *run, const insn_t *in) {
  const view_plan_t *vp = in->plan;
  ref_access_t a;
  bool forwarded = run->forward != NULL;
  void *dst = tsr_interp_result_ptr(run, in);
  run->vals[in->r] = dst;
  tsr_interp_materialize(run, vp->ref);
  if (!tsr_view_access(run, in, &a)) {
    if (vp->mask != NO_VALUE)
      tsr_view_masked_outside(run, in, &a, false, dst);
    else
      load_outside(run, in, &a, dst);
    return;
  }
  const view_t *v = &a.v;
  tsr_race_ref_access(run, in->site, vp, a.origin, a.step, false);
  if (vp->mask != NO_VALUE) {
    /* Masked: read only where the mask is set (and check only those). */
    const uint8_t *mask = run->vals[vp->mask];
    unsigned char uninit[8];
    tsr_blockops_uninit_value((tsr_dtype_t)a.ri->dtype, run->p->options.uninit, uninit);
    view_walk_t w = {{0}};
    bool reported = false;
    for (int64_t i = 0; i < in->n; i++, tsr_view_walk_next(v, &w)) {
      int64_t off = tsr_view_walk_offset(v, &w);
      uint8_t *out = (uint8_t *)dst + i * (int64_t)a.es;
      if (mask[i]) {
        memcpy(out, v->base + off * (int64_t)a.es, a.es);
        if (v->shadow && !v->shadow[off] && !reported) {
          tsr_view_report_unwritten(run, in, a.ri, v, a.origin, a.step, i);
          reported = true;
        }
      } else {
        memcpy(out, uninit, a.es);
      }
    }
    return;
  }
  if (v->shadow) {
    int64_t bad = tsr_view_first_unwritten(v);
    if (bad >= 0) tsr_view_report_unwritten(run, in, a.ri, v, a.origin, a.step, bad);
  }
  if (!a.ri->written && !forwarded && tsr_view_is_dense(v)) {
    /* The ref never changes during a step: the value can borrow its memory
     * and a full copy of the view is saved. */
    run->vals[in->r] = v->base;
    return;
  }
  int64_t dstr[TSR_MAX_RANK];
  tsr_blockops_dense_strides(v->rank, v->dims, dstr);
  tsr_blockops_copy(a.es, v->rank, v->dims, dst, dstr, v->base, v->strides);
}

static void store(run_t *run, const insn_t *in) {
  const view_plan_t *vp = in->plan;
  ref_access_t a;
  if (!tsr_view_access(run, in, &a)) {
    tsr_interp_materialize(run, vp->ref);
    if (vp->mask != NO_VALUE)
      tsr_view_masked_outside(run, in, &a, true, run->vals[in->b]);
    else
      store_outside(run, in, &a, run->vals[in->b]);
    return;
  }
  const view_t *v = &a.v;
  tsr_race_ref_access(run, in->site, vp, a.origin, a.step, true);
  const uint8_t *src = run->vals[in->b];
  if (a.rr->pending_fill) {
    /* A first store that covers the whole block makes the fill moot. */
    if (vp->mask != NO_VALUE || !tsr_view_is_dense(v) || v->base != a.rr->data ||
        tsr_view_count(v) != (int64_t)a.ri->elements)
      tsr_interp_materialize(run, vp->ref);
    else
      a.rr->pending_fill = false;
  }
  if (vp->mask != NO_VALUE) {
    const uint8_t *mask = run->vals[vp->mask];
    int64_t count = tsr_view_count(v);
    view_walk_t w = {{0}};
    for (int64_t i = 0; i < count; i++, tsr_view_walk_next(v, &w)) {
      if (!mask[i]) continue;
      int64_t off = tsr_view_walk_offset(v, &w);
      memcpy(v->base + off * (int64_t)a.es,
             src + (vp->value_scalar ? 0 : i * (int64_t)a.es), a.es);
      if (v->shadow) v->shadow[off] = 1;
    }
    return;
  }
  int64_t sstr[TSR_MAX_RANK];
  if (vp->value_scalar) {
    memset(sstr, 0, sizeof sstr);
  } else {
    tsr_blockops_dense_strides(v->rank, v->dims, sstr);
  }
  if (src != v->base) /* else the value was computed in place (forwarded) */
    tsr_blockops_copy(a.es, v->rank, v->dims, v->base, v->strides, src, sstr);
  if (v->shadow) tsr_view_mark_written(v->rank, v->dims, v->shadow, v->strides);
}

static void slice(run_t *run, const insn_t *in) {
  const view_plan_t *vp = in->plan;
  size_t es = tsr_dtype_size((tsr_dtype_t)in->rdtype);
  view_t v;
  int64_t origin[TSR_MAX_RANK], step[TSR_MAX_RANK];
  void *dst = tsr_interp_result_ptr(run, in);
  run->vals[in->r] = dst;
  if (!tsr_view_resolve(run, in, vp, NULL, run->vals[in->a], NULL, es, &v, origin, step,
                        false))
    return; /* static slices are verified: unreachable */
  int64_t dstr[TSR_MAX_RANK];
  tsr_blockops_dense_strides(v.rank, v.dims, dstr);
  tsr_blockops_copy(es, v.rank, v.dims, dst, dstr, v.base, v.strides);
}

/* Store forwarding: when the store after this instruction targets a dense,
 * in-bounds view, the instruction writes its result there directly. */
static void prepare_forward(run_t *run, const insn_t *store) {
  const view_plan_t *vp = store->plan;
  run_ref_t *rr = &run->refs[vp->ref];
  const ref_info_t *ri = &run->p->refs[vp->ref];
  view_t v;
  int64_t origin[TSR_MAX_RANK], step[TSR_MAX_RANK];
  if (!tsr_view_resolve(run, store, vp, NULL, rr->data, rr->shadow,
                        tsr_dtype_size((tsr_dtype_t)ri->dtype), &v, origin, step, true) ||
      !tsr_view_is_dense(&v))
    return; /* the store will copy (and report any error) */
  if (rr->pending_fill) {
    if (v.base == rr->data && tsr_view_count(&v) == (int64_t)ri->elements)
      rr->pending_fill = false; /* the whole block is about to be written */
    else
      tsr_interp_materialize(run, vp->ref);
  }
  run->forward = v.base;
}

/* ---- Moves and scopes ---- */

static void do_move(run_t *run, const insn_t *in) {
  const move_plan_t *mp = in->plan;
  const value_info_t *vals = run->p->values;
  /* Two-phase through temporaries when a source lives in one of the
   * destinations' buffers (swapped loop-carried values). */
  bool hazard = false;
  if (mp->tmp && mp->count > 1) {
    for (uint32_t i = 0; i < mp->count && !hazard; i++) {
      const uint8_t *s = run->vals[mp->src[i]];
      for (uint32_t j = 0; j < mp->count; j++) {
        const uint8_t *d = tsr_interp_own(run, mp->dst[j]);
        if (j != i && s >= d && s < d + (vals[mp->dst[j]].bytes ? vals[mp->dst[j]].bytes : 1)) {
          hazard = true;
          break;
        }
      }
    }
  }
  if (hazard) {
    for (uint32_t i = 0; i < mp->count; i++) {
      memmove(tsr_interp_own(run, mp->tmp[i]), run->vals[mp->src[i]], vals[mp->tmp[i]].bytes);
      run->vals[mp->tmp[i]] = tsr_interp_own(run, mp->tmp[i]);
    }
    for (uint32_t i = 0; i < mp->count; i++) {
      memcpy(tsr_interp_own(run, mp->dst[i]), tsr_interp_own(run, mp->tmp[i]),
             vals[mp->dst[i]].bytes);
      run->vals[mp->dst[i]] = tsr_interp_own(run, mp->dst[i]);
    }
    return;
  }
  for (uint32_t i = 0; i < mp->count; i++) {
    void *d = tsr_interp_own(run, mp->dst[i]);
    if (d != run->vals[mp->src[i]]) memmove(d, run->vals[mp->src[i]], vals[mp->dst[i]].bytes);
    run->vals[mp->dst[i]] = d;
  }
}

static void scope_enter(run_t *run, const insn_t *in) {
  const scope_plan_t *sp = in->plan;
  for (uint32_t i = 0; i < sp->count; i++) {
    const ref_info_t *ri = &run->p->refs[sp->refs[i]];
    run_ref_t *rr = &run->refs[sp->refs[i]];
    if (ri->device_wide) {
      tsr_dma_wide_enter(run, in, sp->refs[i]);
      continue;
    }
    tsr_interp_fill_uninit(run, (tsr_dtype_t)ri->dtype, rr->data, ri->elements);
    if (rr->shadow) memset(rr->shadow, 0, ri->elements);
  }
}

/* ---- The instruction loop ---- */

/* take_step when the grant is used up: a new grant, or the run stops. */
/* A gather's or scatter's index `bad` (flat, in the indices' shape) out of
 * its axis: a located kernel error, and the result uninitialized. */
static void take_index_error(run_t *run, const insn_t *in, int64_t bad, const char *op) {
  const shape_plan_t *sp = in->plan;
  int64_t idx[TSR_MAX_RANK];
  char at[96];
  tsr_interp_unflatten(bad, sp->rank, sp->dims, idx);
  tsr_diag_format_dims(at, sizeof at, idx, sp->rank);
  tsr_interp_kernel_error(run, in->site, TSR_DIAG_OUT_OF_BOUNDS,
                          "%s index %d at %s is out of range [0, %lld) along axis %u", op,
                          ((const int32_t *)run->vals[in->b])[bad], at,
                          (long long)sp->src_dims[sp->axis], sp->axis);
  tsr_interp_fill_uninit(run, (tsr_dtype_t)in->rdtype, run->vals[in->r], (uint64_t)in->n);
}

/* A part of a split run: its steps come from the run's bounds, shared with
 * the other parts; progress counts every part's grid steps. A part that
 * reported something, or that a bound stops, stops the others without a
 * report of its own: the run is run again on one thread, which reports. */
static bool group_take_step(shared_t *sh) {
  split_group_t *g = sh->group;
  if (sh->diag.errors.count || sh->diag.warnings.count || sh->diag.failed)
    atomic_store(&g->stop, true);
  if (atomic_load(&g->stop)) {
    sh->aborted = true;
    return false;
  }
  uint64_t add = sh->stats.grid_steps - sh->group_steps;
  sh->group_steps += add;
  uint64_t done = atomic_fetch_add(&g->steps, add) + add;
  pthread_mutex_lock(&g->mu);
  uint64_t n = tsr_bounds_grant(g->bounds, &sh->meter, g->parts);
  if (n && tsr_bounds_progress_due(g->bounds)) tsr_bounds_report_progress(g->bounds, done);
  pthread_mutex_unlock(&g->mu);
  if (n) {
    sh->budget = n - 1;
    return true;
  }
  atomic_store(&g->stop, true);
  sh->aborted = true;
  return false;
}

bool tsr_interp_take_step_slow(run_t *run, uint32_t site) {
  shared_t *sh = run->sh;
  if (sh->group) return group_take_step(sh);
  uint64_t g = tsr_bounds_grant(&sh->bounds, &sh->meter, 1);
  if (g) {
    sh->budget = g - 1;
    if (tsr_bounds_progress_due(&sh->bounds))
      tsr_bounds_report_progress(&sh->bounds, sh->stats.grid_steps);
    return true;
  }
  tsr_diag_where_t where = tsr_interp_where(run, site);
  tsr_diag_run_stopped(&sh->diag, &where, &sh->bounds);
  sh->aborted = true;
  return false;
}

/* Every instruction code has its case: a code added to xop_t without one
 * does not build (the default only catches corrupt codes). */
#pragma GCC diagnostic push
#pragma GCC diagnostic error "-Wswitch-enum"
bool tsr_interp_exec(run_t *run, uint32_t *pc_io) {
  uint32_t pc = *pc_io;
  const tsr_interp_program_t *p = run->p;
  const insn_t *code = p->code;
  void **vals = run->vals;
  uint64_t ops = 0;
  for (;;) {
    const insn_t *in = &code[pc++];
    ops++;
    run->sh->tick++;
    if (in->forward) prepare_forward(run, in + 1);
    switch ((xop_t)in->code) {
      case XOP_END:
        run->sh->stats.ops_executed += ops - 1;
        *pc_io = pc;
        return true;
      case XOP_JMP:
        pc = in->target;
        continue;
      case XOP_JMP_IF_NOT:
        if (!*(const uint8_t *)vals[in->a]) pc = in->target;
        continue;
      case XOP_MOVE:
        do_move(run, in);
        continue;
      case XOP_FOR_INIT: {
        int32_t lo = tsr_interp_read_i32(run, in->a), hi = tsr_interp_read_i32(run, in->b),
                st = tsr_interp_read_i32(run, in->c);
        if (st <= 0) {
          tsr_interp_kernel_error(run, in->site, TSR_DIAG_BAD_VALUE,
                                  "for loop step must be positive, got %d", st);
          pc = in->target;
          if (run->sh->aborted) goto out;
          continue;
        }
        vals[in->r] = tsr_interp_result_ptr(run, in);
        memcpy(vals[in->r], &lo, 4);
        if (!(lo < hi)) pc = in->target;
        continue;
      }
      case XOP_FOR_NEXT: {
        int64_t next = (int64_t)tsr_interp_read_i32(run, in->r) + tsr_interp_read_i32(run, in->c);
        if (next < tsr_interp_read_i32(run, in->b)) {
          int32_t n32 = (int32_t)next;
          memcpy(vals[in->r], &n32, 4);
          pc = in->target;
        }
        continue;
      }
      case XOP_SCOPE_ENTER:
        scope_enter(run, in);
        continue;
      case XOP_SCOPE_EXIT:
        tsr_dma_scope_exit(run, in);
        continue;
      case XOP_ALIAS:
        vals[in->r] = vals[in->a];
        continue;
      case XOP_BARRIER_SIGNAL:
        tsr_sem_barrier_signal(run, in);
        continue;
      case XOP_BARRIER_WAIT:
        if (!tsr_sem_try_wait(run, in, in->plan, (int32_t)run->sh->cores - 1)) goto blocked;
        continue;
      case XOP_STEP:
        if (!tsr_interp_take_step(run, in->site)) goto out;
        continue;

      /* The instructions of ops, in the order of the XOP_ enum; the
       * elementwise ones (the most frequent) are last, after op_done. */
      case XOP_LOAD:
        load(run, in);
        goto op_done;
      case XOP_STORE:
        store(run, in);
        goto op_done;
      case XOP_SLICE:
        slice(run, in);
        goto op_done;
      case XOP_PROGRAM_ID:
        tsr_interp_put_i32(run, in, (int32_t)run->point[((const shape_plan_t *)in->plan)->axis]);
        goto op_done;
      case XOP_NUM_PROGRAMS:
        tsr_interp_put_i32(run, in, (int32_t)run->sh->grid[((const shape_plan_t *)in->plan)->axis]);
        goto op_done;
      case XOP_IOTA: {
        const shape_plan_t *sp = in->plan;
        vals[in->r] = tsr_interp_result_ptr(run, in);
        tsr_blockops_iota((tsr_dtype_t)in->rdtype, vals[in->r], sp->rank, sp->dims,
                          sp->axis);
        goto op_done;
      }
      case XOP_SELECT:
        vals[in->r] = tsr_interp_result_ptr(run, in);
        tsr_blockops_select(tsr_dtype_size((tsr_dtype_t)in->rdtype), vals[in->r],
                            vals[in->a], in->bcast & 1, vals[in->b], in->bcast & 2,
                            vals[in->c], in->bcast & 4, (size_t)in->n);
        goto op_done;
      case XOP_CONVERT:
        vals[in->r] = tsr_interp_result_ptr(run, in);
        tsr_blockops_convert((tsr_dtype_t)in->rdtype, vals[in->r],
                             (tsr_dtype_t)in->dtype, vals[in->a], (size_t)in->n);
        goto op_done;
      case XOP_STRIDED_COPY: {
        const shape_plan_t *sp = in->plan;
        vals[in->r] = tsr_interp_result_ptr(run, in);
        tsr_blockops_copy(tsr_dtype_size((tsr_dtype_t)in->rdtype), sp->rank, sp->dims,
                          vals[in->r], sp->strides, vals[in->a], sp->src_strides);
        goto op_done;
      }
      case XOP_CONCATENATE: {
        const shape_plan_t *sp = in->plan;
        size_t es = tsr_dtype_size((tsr_dtype_t)in->rdtype);
        vals[in->r] = tsr_interp_result_ptr(run, in);
        int64_t offset = 0, dims[TSR_MAX_RANK], sstr[TSR_MAX_RANK];
        memcpy(dims, sp->dims, sizeof dims);
        for (uint32_t i = 0; i < sp->num_operands; i++) {
          dims[sp->axis] = sp->axis_sizes[i];
          tsr_blockops_dense_strides(sp->rank, dims, sstr);
          tsr_blockops_copy(es, sp->rank, dims,
                            (uint8_t *)vals[in->r] +
                                offset * sp->strides[sp->axis] * (int64_t)es,
                            sp->strides, vals[sp->operands[i]], sstr);
          offset += sp->axis_sizes[i];
        }
        goto op_done;
      }
      case XOP_ROLL: {
        const shape_plan_t *sp = in->plan;
        vals[in->r] = tsr_interp_result_ptr(run, in);
        if (sp->stride)
          tsr_blockops_roll_strided(tsr_dtype_size((tsr_dtype_t)in->rdtype), vals[in->r],
                                    vals[in->a], sp->src_rank, sp->src_dims, sp->axis,
                                    tsr_interp_read_i32(run, in->b), sp->stride,
                                    sp->stride_axis);
        else
          tsr_blockops_roll(tsr_dtype_size((tsr_dtype_t)in->rdtype), vals[in->r],
                            vals[in->a], sp->src_rank, sp->src_dims, sp->axis,
                            tsr_interp_read_i32(run, in->b));
        goto op_done;
      }
      case XOP_GATHER: {
        const shape_plan_t *sp = in->plan;
        vals[in->r] = tsr_interp_result_ptr(run, in);
        int64_t bad = tsr_blockops_gather(tsr_dtype_size((tsr_dtype_t)in->rdtype),
                                          vals[in->r], vals[in->a], vals[in->b],
                                          sp->rank, sp->dims, sp->axis,
                                          sp->src_dims[sp->axis]);
        if (bad >= 0) take_index_error(run, in, bad, "gather");
        goto op_done;
      }
      case XOP_SCATTER: {
        const shape_plan_t *sp = in->plan;
        size_t es = tsr_dtype_size((tsr_dtype_t)in->rdtype);
        vals[in->r] = tsr_interp_result_ptr(run, in);
        memmove(vals[in->r], vals[in->a], (size_t)in->n * es);
        int64_t bad = tsr_blockops_scatter(es, vals[in->r], vals[in->c], vals[in->b], sp->rank,
                                           sp->dims, sp->axis, sp->src_dims[sp->axis]);
        if (bad >= 0) take_index_error(run, in, bad, "scatter");
        goto op_done;
      }
      case XOP_SORT:
      case XOP_ARGSORT: {
        const shape_plan_t *sp = in->plan;
        vals[in->r] = tsr_interp_result_ptr(run, in);
        const void *keys[TSR_SORT_MAX_KEYS];
        uint32_t nk = TSR_MIN(sp->num_operands, (uint32_t)TSR_SORT_MAX_KEYS);
        for (uint32_t i = 0; i < nk; i++) keys[i] = vals[sp->operands[i]];
        tsr_status_t st = tsr_sort_op(run->p->sort_scratch, in->code == XOP_ARGSORT, nk,
                                           sp->dtypes, keys, vals[in->r], sp->rank, sp->dims,
                                           sp->axis);
        if (st) {
          tsr_interp_kernel_error(run, in->site,
                                  tsr_status_code(st) == TSR_OUT_OF_MEMORY
                                      ? TSR_DIAG_OUT_OF_MEMORY
                                      : TSR_DIAG_UNIMPLEMENTED,
                                  "%s", tsr_status_message(st));
          tsr_status_free(st);
          tsr_interp_fill_uninit(run, (tsr_dtype_t)in->rdtype, vals[in->r], (uint64_t)in->n);
        }
        goto op_done;
      }
      case XOP_REDUCE: {
        const shape_plan_t *sp = in->plan;
        vals[in->r] = tsr_interp_result_ptr(run, in);
        tsr_blockops_reduce((tsr_opcode_t)in->opcode, (tsr_dtype_t)in->dtype, vals[in->r],
                            vals[in->a], sp->src_rank, sp->src_dims, sp->axes_mask);
        goto op_done;
      }
      case XOP_ARG_REDUCE: {
        const shape_plan_t *sp = in->plan;
        vals[in->r] = tsr_interp_result_ptr(run, in);
        tsr_blockops_argreduce((tsr_opcode_t)in->opcode, (tsr_dtype_t)in->dtype,
                               vals[in->r], vals[in->a], sp->src_rank, sp->src_dims,
                               sp->axis);
        goto op_done;
      }
      case XOP_DOT: {
        const shape_plan_t *sp = in->plan;
        vals[in->r] = tsr_interp_result_ptr(run, in);
        tsr_blockops_dot((tsr_dtype_t)in->rdtype, vals[in->r], (tsr_dtype_t)in->dtype,
                         vals[in->a], vals[in->b],
                         in->c != NO_VALUE ? vals[in->c] : NULL, sp->m, sp->k, sp->n,
                         (in->flags & TSR_OPF_TRANSPOSE_RHS) != 0);
        goto op_done;
      }
      case XOP_PRINT:
        do_print(run, in);
        goto op_done;
      case XOP_DEVICE_ID:
        tsr_interp_put_i32(run, in, (int32_t)run->device);
        goto op_done;
      case XOP_CORE_ID:
        tsr_interp_put_i32(run, in, (int32_t)run->core);
        goto op_done;
      case XOP_SEM_SIGNAL:
        tsr_sem_signal(run, in);
        goto op_done;
      case XOP_SEM_WAIT:
        if (!tsr_sem_try_wait(run, in, in->plan,
                              tsr_interp_read_i32(run, ((const sem_plan_t *)in->plan)->amount)))
          goto blocked;
        goto op_done;
      case XOP_SEM_READ: {
        int32_t *sem = tsr_sem_addr(run, in, in->plan);
        tsr_interp_put_i32(run, in, sem ? *sem : 0);
        goto op_done;
      }
      case XOP_DMA_START:
        tsr_dma_start(run, in);
        goto op_done;
      case XOP_DMA_WAIT: {
        const dma_plan_t *dp = in->plan;
        int64_t bytes = dp->dynamic_size ? tsr_dma_wait_bytes(run, in) : dp->bytes;
        if (!tsr_sem_try_wait(run, in, &dp->sem, (int32_t)bytes)) goto blocked;
        goto op_done;
      }
      case XOP_ASSERT:
        if (!*(const uint8_t *)vals[in->a]) {
          const text_plan_t *tp = in->plan;
          tsr_diag_where_t where = tsr_interp_where(run, in->site);
          if (tsr_diag_assert_failed(&run->sh->diag, &where, tp->text)) run->sh->aborted = true;
        }
        goto op_done;
      case XOP_MULTIPLE_OF: {
        /* Mosaic assumes the value is a multiple (tpu.assume_multiple): one
         * that is not makes a wrong kernel on a TPU (e.g. a misaligned DMA),
         * so the interpreter checks the promise. */
        int64_t multiple = *(const int64_t *)in->plan;
        int32_t raw = tsr_interp_read_i32(run, in->a);
        int64_t value = in->dtype == TSR_DTYPE_U32 ? (int64_t)(uint32_t)raw : (int64_t)raw;
        if (value % multiple != 0)
          tsr_interp_kernel_error(run, in->site, TSR_DIAG_BAD_VALUE,
                                  "%lld is not a multiple of %lld: the kernel promises it is "
                                  "(pl.multiple_of), and a TPU assumes it",
                                  (long long)value, (long long)multiple);
        tsr_interp_put_i32(run, in, raw);
        goto op_done;
      }
    op_done:
        if (TSR_UNLIKELY(run->sh->aborted)) goto out;
        continue;

      /* TSR_FAM_UNARY: the kernel for the op and dtype, chosen by prepare.c */
      case XOP_UNARY:
        vals[in->r] = tsr_interp_result_ptr(run, in);
        in->fn.unary(vals[in->r], vals[in->a], (size_t)in->n);
        continue;
      /* TSR_FAM_BINARY, TSR_FAM_COMPARE */
      case XOP_BINARY:
        vals[in->r] = tsr_interp_result_ptr(run, in);
        in->fn.binary(vals[in->r], vals[in->a], vals[in->b], (size_t)in->n,
                      (tsr_bcast_t)in->bcast);
        continue;
      case XOP_COUNT:
      default:
        tsr_interp_kernel_error(run, in->site, TSR_DIAG_INTERNAL,
                                "internal error: bad instruction %u", in->code);
        goto out;
    }
  }
out:
  run->sh->stats.ops_executed += ops;
  *pc_io = pc;
  return true;
blocked:
  run->sh->stats.ops_executed += ops - 1;
  *pc_io = pc - 1;
  return false;
}
#pragma GCC diagnostic pop
