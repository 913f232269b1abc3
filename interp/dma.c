/* Semaphores and the DMA engine: signal, wait (a blocked core resumes at
 * its wait), reads; DMAs started with their views resolved, in flight in
 * start order (lazy mode) or copied at once (eager), completed by the waits
 * that need them; core barriers; the checks on scoped buffers released under
 * a DMA, on deadlocks and at kernel end. Semantics: docs/dma.md. */
#include <stdio.h>

#include "interp/interp_internal.h"

/* ---- Semaphores ---- */

/* The core a device/core pair names (NULL and an error if out of range). */
static run_t *target_core(run_t *run, const insn_t *in, uint32_t device_value,
                          uint32_t core_value) {
  shared_t *sh = run->sh;
  int64_t d = device_value != NO_VALUE ? (int64_t)tsr_interp_read_i32(run, device_value)
                                       : (int64_t)run->device;
  int64_t c = core_value != NO_VALUE ? (int64_t)tsr_interp_read_i32(run, core_value)
                                     : (int64_t)run->core;
  if (d < 0 || d >= sh->devices || c < 0 || c >= sh->cores) {
    tsr_diag_where_t where = tsr_interp_where(run, in->site);
    if (tsr_diag_device_range(&sh->diag, &where, d, c)) sh->aborted = true;
    return NULL;
  }
  return &sh->core[d * sh->cores + c];
}

static int64_t sem_offset(run_t *run, const insn_t *in, const sem_plan_t *sp) {
  int64_t off = 0;
  for (uint32_t d = 0; d < sp->rank; d++) {
    int64_t i = sp->idx[d].value != NO_VALUE ? tsr_interp_read_i32(run, sp->idx[d].value)
                                             : sp->idx[d].start;
    if (i < 0 || i >= sp->dims[d]) {
      tsr_interp_kernel_error(run, in->site, TSR_DIAG_OUT_OF_BOUNDS,
                              "semaphore index %lld out of bounds for dimension %u of "
                              "%%%s (size %lld)",
                              (long long)i, d, run->p->refs[sp->ref].name,
                              (long long)sp->dims[d]);
      return -1;
    }
    off = off * sp->dims[d] + i;
  }
  return off;
}

/* The semaphore a plan names on `core` (NULL after reporting an error). */
static int32_t *sem_on(run_t *run, run_t *core, const insn_t *in, const sem_plan_t *sp) {
  int64_t off = sem_offset(run, in, sp);
  return off < 0 || !core ? NULL : &core->sems[sp->ref][off];
}

int32_t *tsr_sem_addr(run_t *run, const insn_t *in, const sem_plan_t *sp) {
  return sem_on(run, target_core(run, in, sp->device, sp->core), in, sp);
}

static void sem_add(run_t *run, uint32_t site, int32_t *sem, int64_t n) {
  int64_t v = (int64_t)*sem + n;
  if (v > INT32_MAX) {
    tsr_interp_kernel_error(run, site, TSR_DIAG_SEMAPHORE, "semaphore overflow: %d + %lld", *sem,
                            (long long)n);
    return;
  }
  *sem = (int32_t)v;
}

/* "%name[i, j]" (or "%name" for a single semaphore) at flat offset off. */
static void sem_text(const tsr_interp_program_t *p, const sem_plan_t *sp, int64_t off,
                     char *buf, size_t size) {
  const ref_info_t *ri = &p->refs[sp->ref];
  tsr_diag_format_element(buf, size, ri->name, ri->rank, ri->dims, off);
}

void tsr_sem_signal(run_t *run, const insn_t *in) {
  const sem_plan_t *sp = in->plan;
  int32_t n = tsr_interp_read_i32(run, sp->amount);
  if (n < 0) {
    tsr_interp_kernel_error(run, in->site, TSR_DIAG_SEMAPHORE,
                            "semaphore signal by a negative amount (%d)", n);
    return;
  }
  int32_t *sem = tsr_sem_addr(run, in, sp);
  if (!sem) return;
  tsr_race_release(run, sem);
  sem_add(run, in->site, sem, n);
}

void tsr_sem_barrier_signal(run_t *run, const insn_t *in) {
  const sem_plan_t *sp = in->plan;
  for (uint32_t c = 0; c < run->sh->cores; c++) {
    if (c == run->core) continue;
    int32_t *sem = sem_on(run, &run->sh->core[run->device * run->sh->cores + c], in, sp);
    if (!sem) continue;
    tsr_race_release(run, sem);
    sem_add(run, in->site, sem, 1);
  }
}

/* ---- DMAs ---- */

static void dma_copy(shared_t *sh, dma_record_t *r) {
  if (r->skipped) return;
  size_t es = tsr_dtype_size((tsr_dtype_t)r->dtype);
  if (sh->race && !r->fill) {
    run_t *issuer = &sh->core[r->device * sh->cores + r->core];
    char what[96];
    snprintf(what, sizeof what, "%%%s", r->src_name);
    tsr_race_access(issuer, &r->vc, r->id, r->site, r->src_key, what, false, r->src_rank,
                    r->src_ap);
    snprintf(what, sizeof what, "%%%s", r->dst_name);
    tsr_race_access(issuer, &r->vc, r->id, r->site, r->dst_key, what, true, r->dst_rank,
                    r->dst_ap);
  }
  if (r->fill && !r->add) {
    unsigned char elem[8];
    int64_t zero[TSR_MAX_RANK] = {0};
    tsr_blockops_uninit_value((tsr_dtype_t)r->dtype, sh->p->options.uninit, elem);
    tsr_blockops_copy(es, r->fill_rank, r->fill_dims, r->fill_dst, r->fill_strides, elem, zero);
  }
  if (!r->add) {
    tsr_blockops_copy(es, r->rank, r->dims, r->dst, r->dst_strides, r->src,
                      r->src_strides);
  } else {
    (void)tsr_blockops_add_into((tsr_dtype_t)r->dtype, r->rank, r->dims, r->dst,
                                r->dst_strides, r->src, r->src_strides);
  }
  if (r->dst_shadow) tsr_view_mark_written(r->rank, r->dims, r->dst_shadow, r->dst_strides);
  sh->stats.bytes_copied += (uint64_t)r->bytes;
}

/* A DMA's copy happens: it reads and writes, then signals its semaphores
 * (publishing its clock to them when detecting races). */
static void dma_finish(shared_t *sh, dma_record_t *r) {
  run_t *issuer = &sh->core[r->device * sh->cores + r->core];
  dma_copy(sh, r);
  tsr_trace_dma(sh, r);
  int32_t *sems[2] = {r->send, r->sem};
  for (int i = 0; i < 2; i++) {
    if (!sems[i]) continue;
    if (sh->race) {
      vclock_t *sc = tsr_race_sem_clock(sh, sems[i]);
      if (sc) tsr_vc_join(sc, &r->vc);
    }
    sem_add(issuer, r->site, sems[i], i == 1 ? r->signal : r->bytes);
  }
  tsr_vc_free(&r->vc);
}

/* Completes queued DMA i and removes it from the queue. */
static void dma_complete(shared_t *sh, uint32_t i) {
  dma_record_t r = sh->dmas[i];
  memmove(&sh->dmas[i], &sh->dmas[i + 1], (sh->num_dmas - i - 1) * sizeof r);
  sh->num_dmas--;
  dma_finish(sh, &r);
}

/* Resolves a DMA view of `ref` on `core`; materializes lazily filled blocks.
 * A view reaching outside its ref where the options let it is clipped
 * (*clipped set, c filled; docs/semantics.md, "Out-of-bounds accesses"). */
static bool dma_view(run_t *run, run_t *core, const insn_t *in, const view_plan_t *vp,
                     view_t *v, int64_t *origin, int64_t *step, bool write, view_clip_t *c,
                     bool *clipped) {
  const ref_info_t *ri = &run->p->refs[vp->ref];
  tsr_interp_materialize(core, vp->ref);
  *clipped = false;
  if (ri->device_wide && !core->refs[vp->ref].data) {
    /* another device's buffer while that device's core is outside its
     * scope: there is no instance to address */
    tsr_interp_kernel_error(run, in->site, TSR_DIAG_OUT_OF_BOUNDS,
                            "DMA %s the device-wide buffer %%%s of device %u, whose core %u "
                            "is not inside its scope",
                            write ? "into" : "out of", ri->name, core->device, core->core);
    return false;
  }
  /* dynamic indices are this core's values: resolve with run, on core's memory */
  if (tsr_view_resolve(run, in, vp, ri->name, core->refs[vp->ref].data,
                       core->refs[vp->ref].shadow, tsr_dtype_size((tsr_dtype_t)ri->dtype), v,
                       origin, step, true))
    return true;
  *clipped = true;
  return tsr_view_clip(run, in, vp, ri, core->refs[vp->ref].data, core->refs[vp->ref].shadow,
                       write, c);
}

/* A clipped view as a whole view's part (lanes [0, full) of every dim). */
static void unclipped(const view_t *v, view_clip_t *c) {
  c->in = *v;
  c->empty = false;
  for (uint32_t k = 0; k < v->rank; k++) {
    c->lo[k] = 0;
    c->full[k] = v->dims[k];
  }
}

/* The part of clipped view c from lane lo[k], dims[k] lanes on. */
static uint8_t *clip_at(const view_clip_t *c, const int64_t *lo, size_t es) {
  int64_t off = 0;
  for (uint32_t k = 0; k < c->in.rank; k++) off += (lo[k] - c->lo[k]) * c->in.strides[k];
  return c->in.base + off * (int64_t)es;
}

/* A DMA view with the dynamic sizes of this run (docs/dma.md, "Dynamic
 * sizes"): a copy of the plan's view whose sizes are the values read. A
 * negative size is reported (false). */
static bool dma_sizes(run_t *run, const insn_t *in, const view_plan_t *vp, const char *side,
                      view_plan_t *out) {
  *out = *vp;
  for (uint32_t d = 0; d < out->rank; d++) {
    view_index_t *ix = &out->idx[d];
    if (ix->size_value == NO_VALUE) continue;
    int64_t n = tsr_interp_read_i32(run, ix->size_value);
    if (n < 0) {
      tsr_interp_kernel_error(run, in->site, TSR_DIAG_BAD_VALUE,
                              "DMA %s view of %%%s: dimension %u has the negative size %lld",
                              side, run->p->refs[vp->ref].name, d, (long long)n);
      return false;
    }
    ix->size = n;
  }
  return true;
}

/* The bytes of a view whose sizes are known. */
static int64_t view_bytes(const run_t *run, const view_plan_t *vp) {
  int64_t count = 1;
  for (uint32_t d = 0; d < vp->rank; d++)
    if (vp->idx[d].kind != TSR_INDEX_POINT) count *= vp->idx[d].size;
  return count * (int64_t)tsr_dtype_size((tsr_dtype_t)run->p->refs[vp->ref].dtype);
}

/* Whether a DMA's source and destination views, their sizes read, have one
 * shape; reports the two shapes when not. */
static bool dma_shapes_agree(run_t *run, const insn_t *in, const view_plan_t *src,
                             const view_plan_t *dst) {
  int64_t a[TSR_MAX_RANK], b[TSR_MAX_RANK];
  uint32_t na = 0, nb = 0;
  for (uint32_t d = 0; d < src->rank; d++)
    if (src->idx[d].kind != TSR_INDEX_POINT) a[na++] = src->idx[d].size;
  for (uint32_t d = 0; d < dst->rank; d++)
    if (dst->idx[d].kind != TSR_INDEX_POINT) b[nb++] = dst->idx[d].size;
  bool same = na == nb;
  for (uint32_t i = 0; same && i < na; i++) same = a[i] == b[i];
  if (same) return true;
  char sa[96], sb[96];
  tsr_diag_format_dims(sa, sizeof sa, a, na);
  tsr_diag_format_dims(sb, sizeof sb, b, nb);
  tsr_interp_kernel_error(run, in->site, TSR_DIAG_SHAPE_MISMATCH,
                          "DMA source and destination views differ: %%%s gives %s, %%%s gives "
                          "%s (with the sizes this run read)",
                          run->p->refs[src->ref].name, sa, run->p->refs[dst->ref].name, sb);
  return false;
}

int64_t tsr_dma_wait_bytes(run_t *run, const insn_t *in) {
  const dma_plan_t *dp = in->plan;
  view_plan_t dst;
  if (!dma_sizes(run, in, &dp->dst, "destination", &dst)) return 0;
  return view_bytes(run, &dst);
}

void tsr_dma_start(run_t *run, const insn_t *in) {
  const dma_plan_t *dp = in->plan;
  /* Views with dynamic sizes are read now; the rest of the DMA sees them
   * as static views. */
  view_plan_t src_sized, dst_sized;
  const view_plan_t *src_vp = &dp->src, *dst_vp = &dp->dst;
  int64_t bytes = dp->bytes;
  bool sizes_bad = false;
  if (dp->dynamic_size) {
    bool src_ok = dma_sizes(run, in, &dp->src, "source", &src_sized);
    bool dst_ok = dma_sizes(run, in, &dp->dst, "destination", &dst_sized);
    sizes_bad = !src_ok || !dst_ok || !dma_shapes_agree(run, in, &src_sized, &dst_sized);
    src_vp = &src_sized;
    dst_vp = &dst_sized;
    /* a rejected DMA still signals what its destination view counts, so
     * that its wait (of the same view) goes on: one diagnostic, no
     * deadlock after it */
    bytes = dst_ok ? view_bytes(run, dst_vp) : 0;
  }
  shared_t *sh = run->sh;
  run_t *dst_core = target_core(run, in, dp->device, NO_VALUE);
  if (!dst_core) return;
  view_t sv, dv;
  int64_t so[TSR_MAX_RANK], ss[TSR_MAX_RANK], dso[TSR_MAX_RANK], dss[TSR_MAX_RANK];
  /* An out-of-bounds view is reported and the copy skipped, but the DMA
   * still signals its semaphores: its wait then goes on, and the one root
   * cause gives one diagnostic, not a follow-on deadlock. */
  view_clip_t sc, dc;
  bool sclip, dclip;
  run->view_side = "source";
  bool skipped = sizes_bad || !dma_view(run, run, in, src_vp, &sv, so, ss, false, &sc, &sclip);
  run->view_side = "destination";
  skipped = skipped || !dma_view(run, dst_core, in, dst_vp, &dv, dso, dss, true, &dc, &dclip);
  run->view_side = NULL;
  const bool clipped = !skipped && (sclip || dclip);
  if (clipped) {
    if (!sclip) unclipped(&sv, &sc);
    if (!dclip) unclipped(&dv, &dc);
  }
  if (!skipped && !clipped && sv.shadow) {
    int64_t bad = tsr_view_first_unwritten(&sv);
    if (bad >= 0) {
      tsr_view_fill_unwritten(run, (tsr_dtype_t)run->p->refs[dp->src.ref].dtype, &sv);
      tsr_interp_kernel_warning(run, in->site, TSR_DIAG_UNINITIALIZED,
                                "DMA reads uninitialized memory of %%%s: it copies the "
                                "uninitialized value",
                                run->p->refs[dp->src.ref].name);
    }
  }
  int32_t *sem = sem_on(run, dst_core, in, &dp->sem);
  int32_t *send = dp->has_send ? sem_on(run, run, in, &dp->send) : NULL;
  if (!sem || (dp->has_send && !send)) return;
  dma_record_t r;
  memset(&r, 0, sizeof r);
  r.site = in->site;
  r.device = run->device;
  r.core = run->core;
  r.skipped = skipped;
  if (clipped) {
    /* the lanes both views have inside their refs are copied; the
     * destination's others inside its ref take the uninitialized value */
    size_t es = tsr_dtype_size((tsr_dtype_t)in->dtype);
    int64_t lo[TSR_MAX_RANK];
    bool empty = sc.empty || dc.empty;
    r.rank = dc.in.rank;
    for (uint32_t k = 0; k < dc.in.rank; k++) {
      lo[k] = TSR_MAX(sc.lo[k], dc.lo[k]);
      int64_t hi = TSR_MIN(sc.lo[k] + sc.in.dims[k], dc.lo[k] + dc.in.dims[k]);
      r.dims[k] = hi > lo[k] ? hi - lo[k] : 0;
      if (hi <= lo[k]) empty = true;
      r.src_strides[k] = sc.in.strides[k];
      r.dst_strides[k] = dc.in.strides[k];
    }
    if (empty) { /* nothing to copy (the clipped bases are the refs' own) */
      r.rank = 1;
      r.dims[0] = 0;
      r.src = sc.in.base;
      r.dst = dc.in.base;
    } else {
      r.src = clip_at(&sc, lo, es);
      r.dst = clip_at(&dc, lo, es);
    }
    r.src_shadow = NULL;
    r.dst_shadow = NULL;
    r.fill = true; /* also marks the record clipped: no race tracking */
    r.fill_rank = 1;
    r.fill_dst = dc.in.base;
    if (!dc.empty) {
      r.fill_rank = dc.in.rank;
      for (uint32_t k = 0; k < dc.in.rank; k++) {
        r.fill_dims[k] = dc.in.dims[k];
        r.fill_strides[k] = dc.in.strides[k];
      }
      if (dc.in.shadow) tsr_view_mark_written(dc.in.rank, dc.in.dims, dc.in.shadow,
                                              dc.in.strides);
    }
  } else if (!skipped) {
    r.rank = dv.rank;
    for (uint32_t d = 0; d < dv.rank; d++) {
      r.dims[d] = dv.dims[d];
      r.dst_strides[d] = dv.strides[d];
      r.src_strides[d] = sv.strides[d];
    }
    r.src = sv.base;
    r.dst = dv.base;
    r.src_shadow = sv.shadow;
    r.dst_shadow = dv.shadow;
  }
  r.dtype = in->dtype;
  r.add = dp->add;
  {
    /* Where it may land after the kernel: an hbm/any operand, or an output
     * whose one block is the whole array (a VMEM output of a kernel
     * without a grid: Pallas's out_shape=pltpu.VMEM(..)), copied out again
     * when it lands. */
    const ref_info_t *dri = &run->p->refs[dp->dst.ref];
    const operand_plan_t *dop = dri->operand >= 0 ? &run->p->operands[dri->operand] : NULL;
    r.dst_hbm = dop && dop->hbm_direct;
    r.dst_block = dop && dop->blocked && dop->role == TSR_ROLE_OUT && !dop->any_element &&
                          dri->elements == dop->array_elements
                      ? dri->operand
                      : -1;
    r.dst_core = tsr_interp_core_index(dst_core);
  }
  r.bytes = bytes;
  r.signal = dp->signal_regular ? 1 : bytes;
  r.sem = sem;
  r.send = send;
  r.dst_name = run->p->refs[dp->dst.ref].name;
  r.src_name = run->p->refs[dp->src.ref].name;
  r.start_tick = sh->tick;
  if (sh->race) {
    r.id = sh->next_dma_id++;
    tsr_vc_copy(&r.vc, &run->vc);
    tsr_vc_add_dma(&r.vc, r.id);
    run->vc.c[tsr_interp_core_index(run)]++;
    if (!skipped && !clipped) { /* a clipped DMA is not tracked */
      r.src_key = tsr_race_object_key(run, dp->src.ref);
      r.dst_key = tsr_race_object_key(dst_core, dp->dst.ref);
      r.src_rank = tsr_race_view_aps(src_vp, so, ss, r.src_ap);
      r.dst_rank = tsr_race_view_aps(dst_vp, dso, dss, r.dst_ap);
    }
  }
  /* An empty DMA (a dynamic size of 0) has nothing to land: a wait for its
   * 0 bytes would pass it, leaving it queued. */
  if (run->p->options.dma_eager || (dp->dynamic_size && bytes == 0)) {
    dma_finish(sh, &r);
    return;
  }
  if (sh->num_dmas == sh->dmas_capacity) {
    uint32_t cap = sh->dmas_capacity ? sh->dmas_capacity * 2 : 16;
    dma_record_t *q = tsr_realloc(sh->dmas, cap * sizeof *q);
    if (!q) {
      tsr_interp_kernel_error(run, in->site, TSR_DIAG_OUT_OF_MEMORY,
                              "out of memory queueing a DMA");
      tsr_vc_free(&r.vc);
      return;
    }
    sh->dmas = q;
    sh->dmas_capacity = cap;
  }
  sh->dmas[sh->num_dmas++] = r;
}

/* A wait (sem_wait, dma_wait, a barrier's second half). In lazy mode,
 * queued DMAs that signal this semaphore complete first (the most recently
 * started first) until enough bytes have arrived. */
bool tsr_sem_try_wait(run_t *run, const insn_t *in, const sem_plan_t *sp, int32_t need) {
  int32_t *sem = sem_on(run, run, in, sp);
  if (!sem) return true;
  if (need < 0) {
    tsr_interp_kernel_error(run, in->site, TSR_DIAG_SEMAPHORE,
                            "semaphore wait for a negative amount (%d)", need);
    return true;
  }
  shared_t *sh = run->sh;
  for (uint32_t i = sh->num_dmas; *sem < need && i-- > 0;)
    if (sh->dmas[i].sem == sem || sh->dmas[i].send == sem) dma_complete(sh, i);
  if (*sem < need) {
    run->blocked_pc = (uint32_t)(in - run->p->code);
    if (!run->wait_tick) run->wait_tick = sh->tick ? sh->tick : 1;
    return false;
  }
  *sem -= need;
  tsr_race_acquire(run, sem);
  if (sh->tracing) {
    char name[200];
    sem_text(run->p, sp, sem - run->sems[sp->ref], name + 5, sizeof name - 5);
    memcpy(name, "wait ", 5);
    tsr_trace_event(sh, name, run->device, run->core,
                    run->wait_tick ? run->wait_tick : sh->tick, sh->tick, NULL);
  }
  run->wait_tick = 0;
  return true;
}

/* ---- Deadlocks, scopes and the kernel's end ---- */

void tsr_sem_report_blocked(run_t *run) {
  const insn_t *in = &run->p->code[run->blocked_pc];
  const sem_plan_t *sp = in->code == XOP_DMA_WAIT ? &((const dma_plan_t *)in->plan)->sem
                                                     : in->plan;
  const dma_plan_t *wait_dp = in->code == XOP_DMA_WAIT ? in->plan : NULL;
  int64_t need = wait_dp ? (wait_dp->dynamic_size ? tsr_dma_wait_bytes(run, in) : wait_dp->bytes)
                 : in->code == XOP_BARRIER_WAIT ? (int64_t)run->sh->cores - 1
                                                : tsr_interp_read_i32(run, sp->amount);
  int64_t off = sem_offset(run, in, sp);
  int32_t have = off >= 0 ? run->sems[sp->ref][off] : 0;
  char name[160];
  sem_text(run->p, sp, off, name, sizeof name);
  tsr_diag_where_t where = tsr_interp_where(run, in->site);
  if (tsr_diag_deadlock(&run->sh->diag, &where, name, need, in->code == XOP_DMA_WAIT, have))
    run->sh->aborted = true;
}

/* Reports a DMA in flight into or out of [lo, hi), released by the scope
 * `in` leaves; true if there is one. */
static bool released_in_flight(run_t *run, const insn_t *in, const ref_info_t *ri,
                               const uint8_t *lo, const uint8_t *hi) {
  shared_t *sh = run->sh;
  for (uint32_t k = 0; k < sh->num_dmas; k++) {
    const dma_record_t *r = &sh->dmas[k];
    bool dst = r->dst >= lo && r->dst < hi, src = r->src >= lo && r->src < hi;
    if (!dst && !src) continue;
    tsr_interp_kernel_error(run, in->site, TSR_DIAG_DMA_IN_FLIGHT,
                 "scoped buffer %%%s is released while a DMA %s it is in flight "
                 "(started at line %u): wait for the DMA inside the scope",
                 ri->name, dst ? "into" : "out of", run->p->sites[r->site].loc.line);
    return true;
  }
  return false;
}

void tsr_dma_wide_enter(run_t *run, const insn_t *in, uint32_t ref) {
  shared_t *sh = run->sh;
  const ref_info_t *ri = &run->p->refs[ref];
  uint32_t entry = run->wide_entries[ri->wide]++;
  wide_instance_t **list = &sh->wide[(size_t)run->device * run->p->num_wide + ri->wide];
  wide_instance_t *w = *list;
  while (w && w->entry != entry) w = w->next;
  if (!w) {
    /* The first core of the device here: a fresh buffer, uninitialized as
     * HBM is (and never written, for the checks on reads). */
    size_t bytes = ri->elements * tsr_dtype_size((tsr_dtype_t)ri->dtype);
    w = tsr_calloc(1, sizeof *w);
    if (w) w->data = tsr_malloc(bytes ? bytes : 1);
    if (w && ri->shadowed) w->shadow = tsr_calloc(ri->elements ? ri->elements : 1, 1);
    if (!w || !w->data || (ri->shadowed && !w->shadow)) {
      if (w) tsr_free(w->data);
      tsr_free(w);
      tsr_interp_kernel_error(run, in->site, TSR_DIAG_OUT_OF_MEMORY,
                              "out of memory allocating the device-wide buffer %%%s "
                              "(%zu bytes)", ri->name, bytes);
      sh->aborted = true;
      return;
    }
    tsr_interp_fill_uninit(run, (tsr_dtype_t)ri->dtype, w->data, ri->elements);
    w->entry = entry;
    w->serial = ++sh->next_wide_serial;
    w->next = *list;
    *list = w;
  }
  run->wide_cur[ri->wide] = w;
  run->refs[ref].data = w->data;
  run->refs[ref].shadow = w->shadow;
}

/* A core leaves a device-wide buffer's scope: the last core of the device
 * to leave it releases it. */
static void wide_exit(run_t *run, const insn_t *in, uint32_t ref) {
  shared_t *sh = run->sh;
  const ref_info_t *ri = &run->p->refs[ref];
  wide_instance_t *w = run->wide_cur[ri->wide];
  run->wide_cur[ri->wide] = NULL;
  run->refs[ref].data = NULL;
  run->refs[ref].shadow = NULL;
  if (!w || ++w->exits < sh->cores) return;
  const uint8_t *lo = w->data;
  if (released_in_flight(run, in, ri, lo,
                         lo + ri->elements * tsr_dtype_size((tsr_dtype_t)ri->dtype))) {
    w->entry = UINT32_MAX; /* the DMA still lands in it: kept to the end */
    return;
  }
  wide_instance_t **at = &sh->wide[(size_t)run->device * run->p->num_wide + ri->wide];
  while (*at != w) at = &(*at)->next;
  *at = w->next;
  tsr_free(w->data);
  tsr_free(w->shadow);
  tsr_free(w);
}

void tsr_dma_wide_free_all(shared_t *sh) {
  if (!sh->wide) return;
  for (size_t i = 0; i < (size_t)sh->devices * sh->p->num_wide; i++) {
    wide_instance_t *w = sh->wide[i];
    while (w) {
      wide_instance_t *next = w->next;
      tsr_free(w->data);
      tsr_free(w->shadow);
      tsr_free(w);
      w = next;
    }
  }
  tsr_free(sh->wide);
  sh->wide = NULL;
}

/* Leaving a scope releases its buffers (the memory would be reused); a
 * device-wide one when the device's last core leaves it. */
void tsr_dma_scope_exit(run_t *run, const insn_t *in) {
  const scope_plan_t *sp = in->plan;
  for (uint32_t i = 0; i < sp->count; i++) {
    const ref_info_t *ri = &run->p->refs[sp->refs[i]];
    if (ri->device_wide) {
      wide_exit(run, in, sp->refs[i]);
      continue;
    }
    const uint8_t *lo = run->refs[sp->refs[i]].data;
    (void)released_in_flight(run, in, ri, lo,
                             lo + ri->elements * tsr_dtype_size((tsr_dtype_t)ri->dtype));
  }
}

/* Whether `sem` is one of a semaphore output's (on any core): its count
 * leaves the kernel for the next one. */
static bool sem_leaves(const shared_t *sh, const int32_t *sem) {
  const tsr_interp_program_t *p = sh->p;
  for (uint32_t j = 0; sem && j < p->num_operands; j++) {
    const operand_plan_t *op = &p->operands[j];
    if (!op->sem || op->role != TSR_ROLE_OUT) continue;
    uint64_t n = p->refs[op->ref].elements;
    for (uint32_t c = 0; c < sh->devices * sh->cores; c++) {
      const int32_t *lo = sh->core[c].sems[op->ref];
      if (lo && sem >= lo && sem < lo + n) return true;
    }
  }
  return false;
}

/* Whether ref i's semaphores leave the kernel: a semaphore output, or an
 * input that one aliases (the same semaphores). */
static bool ref_leaves(const tsr_interp_program_t *p, uint32_t i) {
  const ref_info_t *ri = &p->refs[i];
  if (ri->operand < 0) return false;
  const operand_plan_t *op = &p->operands[ri->operand];
  return op->sem && (op->role == TSR_ROLE_OUT || op->aliased);
}

void tsr_dma_sem_outputs(shared_t *sh) {
  const tsr_interp_program_t *p = sh->p;
  for (uint32_t d = 0; d < sh->devices; d++) {
    for (uint32_t j = 0; j < p->num_operands; j++) {
      const operand_plan_t *op = &p->operands[j];
      if (!op->sem || op->role != TSR_ROLE_OUT) continue;
      int32_t *out = (int32_t *)sh->hbm[(size_t)d * p->num_operands + j];
      for (uint64_t k = 0; k < p->refs[op->ref].elements; k++) {
        int64_t sum = 0;
        for (uint32_t c = 0; c < sh->cores; c++)
          sum += sh->core[d * sh->cores + c].sems[op->ref][k];
        out[k] = sum > INT32_MAX ? INT32_MAX : (int32_t)sum;
      }
    }
  }
}

void tsr_dma_check_end(shared_t *sh) {
  const tsr_interp_program_t *p = sh->p;
  /* DMAs into HBM that signal a semaphore leaving the kernel land now, in
   * the order they started: the next kernel waits for them. */
  for (uint32_t i = 0; i < sh->num_dmas;) {
    const dma_record_t *r = &sh->dmas[i];
    if ((r->dst_hbm || r->dst_block >= 0) && (sem_leaves(sh, r->sem) || sem_leaves(sh, r->send))) {
      if (r->dst_block >= 0) {
        if (!sh->landed)
          sh->landed = tsr_calloc((size_t)sh->devices * sh->cores * p->num_operands + 1, 1);
        if (!sh->landed) {
          i++; /* reported below as still in flight */
          continue;
        }
        sh->landed[(size_t)r->dst_core * p->num_operands + (uint32_t)r->dst_block] = 1;
      }
      dma_complete(sh, i);
    } else {
      i++;
    }
  }
  for (uint32_t i = 0; i < sh->num_dmas; i++) {
    const dma_record_t *r = &sh->dmas[i];
    run_t *run = &sh->core[r->device * sh->cores + r->core];
    tsr_interp_kernel_error(run, r->site, TSR_DIAG_DMA_IN_FLIGHT,
                 "DMA of %lld bytes to %%%s is still in flight at kernel end: it was "
                 "never waited for", (long long)r->bytes, r->dst_name);
  }
  for (uint32_t c = 0; c < sh->devices * sh->cores; c++) {
    run_t *run = &sh->core[c];
    for (uint32_t i = 0; i < p->num_refs; i++) {
      const ref_info_t *ri = &p->refs[i];
      if (!ri->is_sem || ref_leaves(p, i)) continue;
      for (uint64_t k = 0; k < ri->elements; k++) {
        if (!run->sems[i][k]) continue;
        sem_plan_t sp = {.ref = i};
        char name[160];
        sem_text(p, &sp, (int64_t)k, name, sizeof name);
        tsr_interp_kernel_error(run, ri->site, TSR_DIAG_SEMAPHORE_LEFTOVER,
                     "semaphore %s holds %d at kernel end: a signal or DMA was never "
                     "waited for", name, run->sems[i][k]);
        break;
      }
    }
  }
}
