/* Running a prepared program: the Pallas TPU grid pipeline (block copy-in
 * when an input's block index changes, copy-out when an output's next index
 * differs or at the last step, revisit detection, padded edge blocks), the
 * instruction loop, views with bounds and uninitialized-read checks, and the
 * diagnostics of one run. Semantics: docs/semantics.md. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>

#include "base/hashtable.h"
#include "interp/interp_internal.h"

/* ---- Diagnostics ---- */

/* Records a kernel diagnostic at `site`, once per site and severity per run
 * (later ones are counted). An error stops the run when max_errors errors
 * have been kept; a warning is an error under options.strict. */
static void kernel_vreport(run_t *run, uint32_t site, bool warning, const char *fmt,
                           va_list ap) TSR_PRINTF(4, 0);

static void kernel_vreport(run_t *run, uint32_t site, bool warning, const char *fmt,
                           va_list ap) {
  const tsr_interp_program_t *p = run->p;
  bool strict_warning = warning && p->options.strict;
  if (strict_warning) warning = false;
  uint8_t bit = warning ? 2 : 1;
  if (run->sh->site_reported[site] & bit) {
    if (warning) run->sh->warnings_suppressed++;
    else run->sh->suppressed++;
    return;
  }
  run->sh->site_reported[site] |= bit;
  char point[160];
  tsr_interp_format_point(point, sizeof point, run->point, p->grid_rank);
  tsr_strbuf_t msg;
  tsr_strbuf_initialize(&msg);
  tsr_strbuf_printf(&msg, "kernel @%s, ", p->kernel_name);
  if (run->sh->devices > 1) tsr_strbuf_printf(&msg, "device %u, ", run->device);
  if (run->sh->cores > 1) tsr_strbuf_printf(&msg, "core %u, ", run->core);
  tsr_strbuf_printf(&msg, "grid point %s: %s: ", point, p->sites[site].what);
  tsr_strbuf_vprintf(&msg, fmt, ap);
  if (strict_warning) tsr_strbuf_puts(&msg, " [a warning, an error with --strict]");
  tsr_diag_list_t *list = warning ? &run->sh->warnings : &run->sh->diags;
  tsr_diag_add(list, p->sites[site].loc, "%s", msg.data ? msg.data : "?");
  tsr_strbuf_deinitialize(&msg);
  if (!warning && run->sh->diags.count >= p->options.max_errors) run->sh->aborted = true;
}

/* A warning, or an error when `error` is set. */
static void kernel_report(run_t *run, uint32_t site, bool error, const char *fmt, ...)
    TSR_PRINTF(4, 5);
static void kernel_report(run_t *run, uint32_t site, bool error, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  kernel_vreport(run, site, !error, fmt, ap);
  va_end(ap);
}

void tsr_interp_kernel_error(run_t *run, uint32_t site, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  kernel_vreport(run, site, false, fmt, ap);
  va_end(ap);
}

void tsr_interp_kernel_warning(run_t *run, uint32_t site, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  kernel_vreport(run, site, true, fmt, ap);
  va_end(ap);
}

static void format_dims(char *buf, size_t size, const int64_t *dims, uint32_t rank) {
  size_t used = (size_t)snprintf(buf, size, "[");
  for (uint32_t i = 0; i < rank && used < size; i++)
    used += (size_t)snprintf(buf + used, size - used, "%s%lld", i ? ", " : "",
                             (long long)dims[i]);
  if (used < size) snprintf(buf + used, size - used, "]");
}

/* ---- Trace ----------------------------------------------------------------
 * Chrome trace events (chrome://tracing, ui.perfetto.dev): one process per
 * device, one thread per core (grid steps, waits, barriers) and one per
 * core's DMA engine (copies with their bytes). Time is simulated: one tick
 * ("microsecond" in the viewer) per instruction executed by any core. Names
 * go into the JSON unescaped: kernel and ref names are [A-Za-z0-9_.]. */

static void trace_event(shared_t *sh, const char *name, uint32_t device, uint32_t tid,
                        uint64_t start, uint64_t end, const char *args_json) {
  if (!sh->tracing) return;
  tsr_strbuf_printf(&sh->trace,
                    "%s{\"name\":\"%s\",\"ph\":\"X\",\"ts\":%llu,\"dur\":%llu,"
                    "\"pid\":%u,\"tid\":%u%s%s}",
                    sh->trace.size ? ",\n" : "", name, (unsigned long long)start,
                    (unsigned long long)(end > start ? end - start : 1), device, tid,
                    args_json ? ",\"args\":" : "", args_json ? args_json : "");
}

static bool write_trace(shared_t *sh) {
  const tsr_interp_program_t *p = sh->p;
  if (sh->trace.failed) return false;
  FILE *f = fopen(p->options.trace_path, "w");
  if (!f) return false;
  fprintf(f, "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"kernel\":\"%s\","
             "\"time\":\"simulated: 1 unit = 1 instruction\"},\"traceEvents\":[\n",
          p->kernel_name);
  for (uint32_t d = 0; d < sh->devices; d++) {
    fprintf(f, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%u,"
               "\"args\":{\"name\":\"device %u\"}},\n", d, d);
    for (uint32_t c = 0; c < sh->cores; c++)
      fprintf(f, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%u,\"tid\":%u,"
                 "\"args\":{\"name\":\"core %u\"}},\n"
                 "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%u,\"tid\":%u,"
                 "\"args\":{\"name\":\"core %u DMA engine\"}},\n",
              d, c, c, d, 1000 + c, c);
  }
  fwrite(sh->trace.data ? sh->trace.data : "", 1, sh->trace.size, f);
  fprintf(f, "\n]}\n");
  return fclose(f) == 0;
}

/* ---- Small helpers ---- */

static inline int32_t read_i32(const run_t *run, uint32_t value) {
  int32_t v;
  memcpy(&v, run->vals[value], 4);
  return v;
}

static inline void *own(const run_t *run, uint32_t value) {
  return run->frame + run->p->values[value].offset;
}

static void fill_uninit(const run_t *run, tsr_dtype_t dtype, void *dst, uint64_t n) {
  unsigned char elem[8];
  tsr_blockops_uninit_value(dtype, run->p->options.uninit, elem);
  tsr_blockops_fill(tsr_dtype_size(dtype), dst, elem, n);
}

/* Where an instruction writes its result: the store target when forwarded
 * (see forwards_to_store in prepare.c), else the value's own buffer. */
static inline void *result_ptr(run_t *run, const insn_t *in) {
  void *p = run->forward;
  if (p) {
    run->forward = NULL;
    return p;
  }
  return own(run, in->r);
}

/* Writes a scalar i32 result. */
static inline void put_i32(run_t *run, const insn_t *in, int32_t v) {
  run->vals[in->r] = result_ptr(run, in);
  memcpy(run->vals[in->r], &v, 4);
}

/* Gives a lazily filled output block its uninitialized contents. */
static void materialize(run_t *run, uint32_t ref) {
  run_ref_t *rr = &run->refs[ref];
  if (!rr->pending_fill) return;
  const ref_info_t *ri = &run->p->refs[ref];
  fill_uninit(run, (tsr_dtype_t)ri->dtype, rr->data, ri->elements);
  rr->pending_fill = false;
}

/* Calls fn on each contiguous-inner row of a strided view. */
typedef struct view {
  uint8_t *base;    /* element (0, .., 0) */
  uint8_t *shadow;  /* shadow of element (0, .., 0), or NULL */
  uint32_t rank;
  int64_t dims[TSR_MAX_RANK];
  int64_t strides[TSR_MAX_RANK]; /* elements */
  int64_t origin[TSR_MAX_RANK];  /* for messages: start index in the ref */
  uint32_t ref_dim_of[TSR_MAX_RANK];
} view_t;

/* Returns the flat position (in view order) of the first 0 byte of the view's
 * shadow, or -1 when every element was written. */
static int64_t view_first_unwritten(const view_t *v) {
  int64_t idx[TSR_MAX_RANK] = {0};
  int64_t total = 1;
  for (uint32_t i = 0; i < v->rank; i++) total *= v->dims[i];
  if (v->rank == 0) return v->shadow[0] ? -1 : 0;
  int64_t inner = v->dims[v->rank - 1], istride = v->strides[v->rank - 1];
  for (int64_t row = 0; row * inner < total; row++) {
    int64_t off = 0;
    for (uint32_t i = 0; i + 1 < v->rank; i++) off += idx[i] * v->strides[i];
    const uint8_t *s = v->shadow + off;
    if (istride == 1) {
      const uint8_t *z = memchr(s, 0, (size_t)inner);
      if (z) return row * inner + (z - s);
    } else {
      for (int64_t j = 0; j < inner; j++)
        if (!s[j * istride]) return row * inner + j;
    }
    for (int32_t i = (int32_t)v->rank - 2; i >= 0; i--) {
      if (++idx[i] < v->dims[i]) break;
      idx[i] = 0;
    }
  }
  return -1;
}

static void unflatten(int64_t flat, uint32_t rank, const int64_t *dims, int64_t *idx) {
  for (int32_t i = (int32_t)rank - 1; i >= 0; i--) {
    idx[i] = dims[i] ? flat % dims[i] : 0;
    flat = dims[i] ? flat / dims[i] : 0;
  }
}

/* Formats the ref index of view element `flat`. */
static void view_index_text(const view_t *v, const int64_t *ref_origin, uint32_t ref_rank,
                            const int64_t *ref_step, int64_t flat, char *buf,
                            size_t size) {
  int64_t vidx[TSR_MAX_RANK];
  unflatten(flat, v->rank, v->dims, vidx);
  int64_t ridx[TSR_MAX_RANK];
  for (uint32_t d = 0; d < ref_rank; d++) ridx[d] = ref_origin[d];
  for (uint32_t i = 0; i < v->rank; i++) {
    uint32_t d = v->ref_dim_of[i];
    ridx[d] += vidx[i] * ref_step[d];
  }
  format_dims(buf, size, ridx, ref_rank);
}

/* Resolves the view of a load/store/slice/DMA (ref_name: the ref, NULL for a
 * slice of a value). On an out-of-bounds index reports (unless quiet) and
 * returns false. */
static bool resolve_view_q(run_t *run, const insn_t *in, const view_plan_t *vp,
                           const char *ref_name, uint8_t *data, uint8_t *shadow,
                           size_t elem_size, view_t *out, int64_t *origin,
                           int64_t *step, bool quiet) {
  const int64_t *strides = vp->strides;
  int64_t offset = 0;
  out->rank = 0;
  for (uint32_t d = 0; d < vp->rank; d++) {
    const view_index_t *ix = &vp->idx[d];
    int64_t start = ix->value != NO_VALUE ? read_i32(run, ix->value) : ix->start;
    int64_t last = start + (ix->size - 1) * ix->stride;
    if (start < 0 || last >= vp->dims[d] || ix->size < 1) {
      if (quiet) return false;
      char shape[96], what_name[96];
      format_dims(shape, sizeof shape, vp->dims, vp->rank);
      if (ref_name)
        snprintf(what_name, sizeof what_name, "%%%s", ref_name);
      else
        snprintf(what_name, sizeof what_name, "the value");
      if (ix->kind == TSR_INDEX_POINT)
        tsr_interp_kernel_error(run, in->site,
                     "index %lld out of bounds for dimension %u of %s (shape %s)",
                     (long long)start, d, what_name, shape);
      else
        tsr_interp_kernel_error(run, in->site,
                     "slice %lld:%lld:%lld out of bounds for dimension %u of %s "
                     "(shape %s)",
                     (long long)start, (long long)(last + 1), (long long)ix->stride,
                     d, what_name, shape);
      return false;
    }
    origin[d] = start;
    step[d] = ix->stride;
    offset += start * strides[d];
    if (ix->kind != TSR_INDEX_POINT) {
      out->dims[out->rank] = ix->size;
      out->strides[out->rank] = strides[d] * ix->stride;
      out->ref_dim_of[out->rank] = d;
      out->rank++;
    }
  }
  out->base = data + offset * (int64_t)elem_size;
  out->shadow = shadow ? shadow + offset : NULL;
  return true;
}

static bool resolve_view(run_t *run, const insn_t *in, const view_plan_t *vp,
                         const char *ref_name, uint8_t *data, uint8_t *shadow,
                         size_t elem_size, view_t *out, int64_t *origin,
                         int64_t *step) {
  return resolve_view_q(run, in, vp, ref_name, data, shadow, elem_size, out,
                        origin, step, false);
}

static int64_t view_count(const view_t *v) {
  int64_t n = 1;
  for (uint32_t i = 0; i < v->rank; i++) n *= v->dims[i];
  return n;
}

static bool view_is_dense(const view_t *v) {
  int64_t expect = 1;
  for (int32_t i = (int32_t)v->rank - 1; i >= 0; i--) {
    if (v->dims[i] != 1 && v->strides[i] != expect) return false;
    expect *= v->dims[i];
  }
  return true;
}

static void report_unwritten_at(run_t *run, const insn_t *in, const ref_info_t *ri,
                                const char *at) {
  char shape[96];
  format_dims(shape, sizeof shape, ri->dims, ri->rank);
  /* A warning: a TPU reads whatever the memory holds, and the read is a bug
   * only if that value reaches a result (docs/semantics.md, "Memory"). */
  tsr_interp_kernel_warning(run, in->site,
                            "read of uninitialized memory: %%%s%s (shape %s) was never "
                            "written%s; it holds the uninitialized value",
                            ri->name, at, shape,
                            ri->role == TSR_ROLE_OUT ? " in this output block" : "");
}

static void report_unwritten(run_t *run, const insn_t *in, const ref_info_t *ri,
                             const view_t *v, const int64_t *origin,
                             const int64_t *step, int64_t flat) {
  char at[128];
  view_index_text(v, origin, ri->rank, step, flat, at, sizeof at);
  report_unwritten_at(run, in, ri, at);
}

/* ---- Race detection hooks ---- */

static uint32_t core_index(const run_t *run) {
  return run->device * run->sh->cores + run->core;
}

/* The memory object a ref of `core` names: its own buffer, or for hbm/any
 * operands the device's HBM array (aliased outputs share their input's). */
static uint64_t hbm_key(const run_t *run, uint32_t j) {
  const operand_plan_t *op = &run->p->operands[j];
  uint32_t k = op->alias >= 0 ? (uint32_t)op->alias : j;
  return (2ull << 60) | ((uint64_t)run->device << 32) | k;
}

static uint64_t object_key(const run_t *core, uint32_t ref) {
  int32_t j = core->p->refs[ref].operand;
  if (j >= 0 && core->p->operands[j].hbm_direct) return hbm_key(core, (uint32_t)j);
  return (1ull << 60) | ((uint64_t)core_index(core) << 32) | ref;
}

/* The per-dimension progressions of a resolved view (origin/step per ref dim). */
static uint32_t view_aps(const view_plan_t *vp, const int64_t *origin, const int64_t *step,
                         race_ap_t *ap) {
  for (uint32_t d = 0; d < vp->rank; d++) {
    ap[d].start = origin[d];
    ap[d].count = vp->idx[d].kind == TSR_INDEX_POINT ? 1 : vp->idx[d].size;
    ap[d].stride = step[d] > 0 ? step[d] : 1;
  }
  return vp->rank;
}

/* Records a load or store of `vp` with the race detector. */
static void race_ref_record(run_t *run, uint32_t site, const view_plan_t *vp,
                            const int64_t *origin, const int64_t *step, bool write) {
  race_ap_t ap[TSR_MAX_RANK];
  uint32_t rank = view_aps(vp, origin, step, ap);
  char what[96];
  snprintf(what, sizeof what, "%%%s", run->p->refs[vp->ref].name);
  tsr_race_access(run, &run->vc, -1, site, object_key(run, vp->ref), what, write, rank, ap);
}

/* A load's or store's access, when detecting races (inline: every load and
 * store asks). */
static inline void race_ref_access(run_t *run, uint32_t site, const view_plan_t *vp,
                                   const int64_t *origin, const int64_t *step, bool write) {
  if (TSR_UNLIKELY(run->sh->race != NULL)) race_ref_record(run, site, vp, origin, step, write);
}

/* A release: what this core did so far is published through `sem`. */
static void race_release(run_t *run, const int32_t *sem) {
  if (!run->sh->race) return;
  vclock_t *sc = tsr_race_sem_clock(run->sh, sem);
  if (sc) tsr_vc_join(sc, &run->vc);
  run->vc.c[core_index(run)]++;
}

static void race_acquire(run_t *run, const int32_t *sem) {
  if (!run->sh->race) return;
  vclock_t *sc = tsr_race_sem_clock(run->sh, sem);
  if (sc) tsr_vc_join(&run->vc, sc);
}

/* ---- Loads and stores ---- */

/* A load's or store's ref and resolved view. */
typedef struct ref_access {
  uint32_t ref;
  const ref_info_t *ri;
  run_ref_t *rr;
  size_t es;
  view_t v;
  int64_t origin[TSR_MAX_RANK], step[TSR_MAX_RANK];
} ref_access_t;

/* Resolves the view of a load/store; reports an out-of-bounds index, except
 * for a masked access (see masked_outside). */
static bool access_ref(run_t *run, const insn_t *in, ref_access_t *a) {
  const view_plan_t *vp = in->plan;
  a->ref = vp->ref;
  a->ri = &run->p->refs[vp->ref];
  a->rr = &run->refs[vp->ref];
  a->es = tsr_dtype_size((tsr_dtype_t)a->ri->dtype);
  return resolve_view_q(run, in, vp, a->ri->name, a->rr->data, a->rr->shadow, a->es,
                        &a->v, a->origin, a->step, vp->mask != NO_VALUE);
}

/* Element offsets (in the ref) of a view, in row-major view order. */
typedef struct view_walk {
  int64_t idx[TSR_MAX_RANK];
} view_walk_t;

/* The lanes of a masked view whose window reaches outside its ref. */
typedef struct lane_window {
  uint32_t rank;                    /* of the view */
  int64_t dims[TSR_MAX_RANK];       /* of the view */
  uint32_t ref_dim_of[TSR_MAX_RANK];
  int64_t origin[TSR_MAX_RANK], step[TSR_MAX_RANK]; /* per ref dim */
  int64_t count;                    /* lanes */
} lane_window_t;

static void lane_window(const run_t *run, const view_plan_t *vp, lane_window_t *w) {
  w->rank = 0;
  w->count = 1;
  for (uint32_t d = 0; d < vp->rank; d++) {
    const view_index_t *ix = &vp->idx[d];
    w->origin[d] = ix->value != NO_VALUE ? read_i32(run, ix->value) : ix->start;
    w->step[d] = ix->stride;
    if (ix->kind == TSR_INDEX_POINT) continue;
    w->dims[w->rank] = ix->size;
    w->ref_dim_of[w->rank++] = d;
    w->count *= ix->size;
  }
}

/* The ref index of lane `vidx`; false when it is outside the ref. */
static bool lane_index(const view_plan_t *vp, const lane_window_t *w, const int64_t *vidx,
                       int64_t *ridx) {
  for (uint32_t d = 0; d < vp->rank; d++) ridx[d] = w->origin[d];
  for (uint32_t i = 0; i < w->rank; i++)
    ridx[w->ref_dim_of[i]] += vidx[i] * w->step[w->ref_dim_of[i]];
  bool inside = true;
  for (uint32_t d = 0; d < vp->rank; d++)
    if (ridx[d] < 0 || ridx[d] >= vp->dims[d]) inside = false;
  return inside;
}

static void lane_next(const lane_window_t *w, int64_t *vidx) {
  for (int32_t i = (int32_t)w->rank - 1; i >= 0; i--) {
    if (++vidx[i] < w->dims[i]) break;
    vidx[i] = 0;
  }
}

/* A masked load or store whose window reaches outside its ref. Pallas masks
 * the edges of a ref this way: only the lanes the mask turns on are
 * accessed, and only they must be in bounds. The first lane that is on and
 * out of bounds is an error, and the access is then skipped (a load yields
 * the uninitialized value). `value`: what a store writes, the load's result. */
static void masked_outside(run_t *run, const insn_t *in, const ref_access_t *a, bool store,
                           uint8_t *value) {
  const view_plan_t *vp = in->plan;
  const uint8_t *mask = run->vals[vp->mask];
  const ref_info_t *ri = a->ri;
  lane_window_t w;
  lane_window(run, vp, &w);
  int64_t vidx[TSR_MAX_RANK] = {0}, ridx[TSR_MAX_RANK];
  for (int64_t i = 0; i < w.count; i++, lane_next(&w, vidx)) {
    if (!mask[i] || lane_index(vp, &w, vidx, ridx)) continue;
    char at[128], shape[96];
    format_dims(at, sizeof at, ridx, vp->rank);
    format_dims(shape, sizeof shape, vp->dims, vp->rank);
    tsr_interp_kernel_error(run, in->site,
                            "element %s of %%%s (shape %s) is out of bounds and its mask "
                            "lane is on",
                            at, ri->name, shape);
    if (!store) fill_uninit(run, (tsr_dtype_t)ri->dtype, value, (uint64_t)in->n);
    return;
  }
  race_ref_access(run, in->site, vp, w.origin, w.step, store);
  if (store) materialize(run, vp->ref);
  unsigned char uninit[8];
  tsr_blockops_uninit_value((tsr_dtype_t)ri->dtype, run->p->options.uninit, uninit);
  memset(vidx, 0, sizeof vidx);
  for (int64_t i = 0; i < w.count; i++, lane_next(&w, vidx)) {
    uint8_t *lane = value + (store && vp->value_scalar ? 0 : i * (int64_t)a->es);
    if (!mask[i]) {
      if (!store) memcpy(lane, uninit, a->es);
      continue;
    }
    lane_index(vp, &w, vidx, ridx);
    int64_t off = 0;
    for (uint32_t d = 0; d < vp->rank; d++) off += ridx[d] * vp->strides[d];
    uint8_t *elem = a->rr->data + off * (int64_t)a->es;
    uint8_t *shadow = a->rr->shadow ? a->rr->shadow + off : NULL;
    if (store) {
      memcpy(elem, lane, a->es);
      if (shadow) *shadow = 1;
      continue;
    }
    memcpy(lane, elem, a->es);
    if (shadow && !*shadow) {
      char at[128];
      format_dims(at, sizeof at, ridx, vp->rank);
      report_unwritten_at(run, in, ri, at);
    }
  }
}

static int64_t walk_offset(const view_t *v, const view_walk_t *w) {
  int64_t off = 0;
  for (uint32_t d = 0; d < v->rank; d++) off += w->idx[d] * v->strides[d];
  return off;
}

static void walk_next(const view_t *v, view_walk_t *w) {
  for (int32_t d = (int32_t)v->rank - 1; d >= 0; d--) {
    if (++w->idx[d] < v->dims[d]) break;
    w->idx[d] = 0;
  }
}

static void do_load(run_t *run, const insn_t *in) {
  const view_plan_t *vp = in->plan;
  ref_access_t a;
  bool forwarded = run->forward != NULL;
  void *dst = result_ptr(run, in);
  run->vals[in->r] = dst;
  materialize(run, vp->ref);
  if (!access_ref(run, in, &a)) {
    if (vp->mask != NO_VALUE)
      masked_outside(run, in, &a, false, dst);
    else
      fill_uninit(run, (tsr_dtype_t)a.ri->dtype, dst, (uint64_t)in->n);
    return;
  }
  const view_t *v = &a.v;
  race_ref_access(run, in->site, vp, a.origin, a.step, false);
  if (vp->mask != NO_VALUE) {
    /* Masked: read only where the mask is set (and check only those). */
    const uint8_t *mask = run->vals[vp->mask];
    unsigned char uninit[8];
    tsr_blockops_uninit_value((tsr_dtype_t)a.ri->dtype, run->p->options.uninit, uninit);
    view_walk_t w = {{0}};
    bool reported = false;
    for (int64_t i = 0; i < in->n; i++, walk_next(v, &w)) {
      int64_t off = walk_offset(v, &w);
      uint8_t *out = (uint8_t *)dst + i * (int64_t)a.es;
      if (mask[i]) {
        memcpy(out, v->base + off * (int64_t)a.es, a.es);
        if (v->shadow && !v->shadow[off] && !reported) {
          report_unwritten(run, in, a.ri, v, a.origin, a.step, i);
          reported = true;
        }
      } else {
        memcpy(out, uninit, a.es);
      }
    }
    return;
  }
  if (v->shadow) {
    int64_t bad = view_first_unwritten(v);
    if (bad >= 0) report_unwritten(run, in, a.ri, v, a.origin, a.step, bad);
  }
  if (!a.ri->written && !forwarded && view_is_dense(v)) {
    /* The ref never changes during a step: the value can borrow its memory
     * and a full copy of the view is saved. */
    run->vals[in->r] = v->base;
    return;
  }
  int64_t dstr[TSR_MAX_RANK];
  tsr_blockops_dense_strides(v->rank, v->dims, dstr);
  tsr_blockops_copy(a.es, v->rank, v->dims, dst, dstr, v->base, v->strides);
}

static const uint8_t one_byte = 1;

static void do_store(run_t *run, const insn_t *in) {
  const view_plan_t *vp = in->plan;
  ref_access_t a;
  if (!access_ref(run, in, &a)) {
    if (vp->mask != NO_VALUE)
      masked_outside(run, in, &a, true, run->vals[in->b]);
    else
      materialize(run, vp->ref);
    return;
  }
  const view_t *v = &a.v;
  race_ref_access(run, in->site, vp, a.origin, a.step, true);
  const uint8_t *src = run->vals[in->b];
  if (a.rr->pending_fill) {
    /* A first store that covers the whole block makes the fill moot. */
    if (vp->mask != NO_VALUE || !view_is_dense(v) || v->base != a.rr->data ||
        view_count(v) != (int64_t)a.ri->elements)
      materialize(run, vp->ref);
    else
      a.rr->pending_fill = false;
  }
  if (vp->mask != NO_VALUE) {
    const uint8_t *mask = run->vals[vp->mask];
    int64_t count = view_count(v);
    view_walk_t w = {{0}};
    for (int64_t i = 0; i < count; i++, walk_next(v, &w)) {
      if (!mask[i]) continue;
      int64_t off = walk_offset(v, &w);
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
  if (v->shadow) {
    int64_t zero[TSR_MAX_RANK] = {0};
    tsr_blockops_copy(1, v->rank, v->dims, v->shadow, v->strides, &one_byte, zero);
  }
}

static void do_slice(run_t *run, const insn_t *in) {
  const view_plan_t *vp = in->plan;
  size_t es = tsr_dtype_size((tsr_dtype_t)in->rdtype);
  view_t v;
  int64_t origin[TSR_MAX_RANK], step[TSR_MAX_RANK];
  void *dst = result_ptr(run, in);
  run->vals[in->r] = dst;
  if (!resolve_view(run, in, vp, NULL, run->vals[in->a], NULL, es, &v, origin,
                    step))
    return; /* static slices are verified: unreachable */
  int64_t dstr[TSR_MAX_RANK];
  tsr_blockops_dense_strides(v.rank, v.dims, dstr);
  tsr_blockops_copy(es, v.rank, v.dims, dst, dstr, v.base, v.strides);
}

/* ---- Printing ---- */

static void print_element(tsr_strbuf_t *sb, tsr_dtype_t dt, const void *p) {
  switch (dt) {
    case TSR_DTYPE_F32: { float x; memcpy(&x, p, 4); tsr_strbuf_printf(sb, "%g", (double)x); break; }
    case TSR_DTYPE_BF16: { uint16_t h; memcpy(&h, p, 2); tsr_strbuf_printf(sb, "%g", (double)tsr_bf16_to_f32(h)); break; }
    case TSR_DTYPE_F16: { uint16_t h; memcpy(&h, p, 2); tsr_strbuf_printf(sb, "%g", (double)tsr_f16_to_f32(h)); break; }
    case TSR_DTYPE_I32: { int32_t x; memcpy(&x, p, 4); tsr_strbuf_printf(sb, "%" PRId32, x); break; }
    case TSR_DTYPE_U32: { uint32_t x; memcpy(&x, p, 4); tsr_strbuf_printf(sb, "%" PRIu32, x); break; }
    case TSR_DTYPE_I16: { int16_t x; memcpy(&x, p, 2); tsr_strbuf_printf(sb, "%d", x); break; }
    case TSR_DTYPE_U16: { uint16_t x; memcpy(&x, p, 2); tsr_strbuf_printf(sb, "%u", x); break; }
    case TSR_DTYPE_I8: { int8_t x; memcpy(&x, p, 1); tsr_strbuf_printf(sb, "%d", x); break; }
    case TSR_DTYPE_U8: { uint8_t x; memcpy(&x, p, 1); tsr_strbuf_printf(sb, "%u", x); break; }
    case TSR_DTYPE_I1: tsr_strbuf_puts(sb, *(const uint8_t *)p ? "true" : "false"); break;
    default: tsr_strbuf_puts(sb, "?"); break;
  }
}

static void print_value(tsr_strbuf_t *sb, const tsr_print_value_t *v) {
  size_t es = tsr_dtype_size(v->dtype);
  if (v->vector) tsr_strbuf_puts(sb, "[");
  for (uint64_t i = 0; i < v->n && i < 64; i++) {
    if (i) tsr_strbuf_puts(sb, ", ");
    print_element(sb, v->dtype, (const uint8_t *)v->data + i * es);
  }
  if (v->vector) tsr_strbuf_puts(sb, v->n > 64 ? ", ...]" : "]");
}

void tsr_interp_print(FILE *f, const char *text, uint32_t count,
                      tsr_print_value_t (*value)(void *ctx, uint32_t i), void *ctx) {
  tsr_strbuf_t line;
  tsr_strbuf_initialize(&line);
  uint32_t next = 0;
  const char *s = text, *literal = text;
  for (; *s; s++) {
    if (s[0] != '{' || s[1] != '}' || next >= count) continue;
    tsr_strbuf_append(&line, literal, (size_t)(s - literal));
    tsr_print_value_t v = value(ctx, next++);
    print_value(&line, &v);
    literal = ++s + 1;
  }
  tsr_strbuf_append(&line, literal, (size_t)(s - literal));
  tsr_strbuf_puts(&line, "\n");
  if (!line.failed) fwrite(line.data, 1, line.size, f);
  tsr_strbuf_deinitialize(&line);
}

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

/* ---- Moves ---- */

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
        const uint8_t *d = own(run, mp->dst[j]);
        if (j != i && s >= d && s < d + (vals[mp->dst[j]].bytes ? vals[mp->dst[j]].bytes : 1)) {
          hazard = true;
          break;
        }
      }
    }
  }
  if (hazard) {
    for (uint32_t i = 0; i < mp->count; i++) {
      memmove(own(run, mp->tmp[i]), run->vals[mp->src[i]], vals[mp->tmp[i]].bytes);
      run->vals[mp->tmp[i]] = own(run, mp->tmp[i]);
    }
    for (uint32_t i = 0; i < mp->count; i++) {
      memcpy(own(run, mp->dst[i]), own(run, mp->tmp[i]), vals[mp->dst[i]].bytes);
      run->vals[mp->dst[i]] = own(run, mp->dst[i]);
    }
    return;
  }
  for (uint32_t i = 0; i < mp->count; i++) {
    void *d = own(run, mp->dst[i]);
    if (d != run->vals[mp->src[i]]) memmove(d, run->vals[mp->src[i]], vals[mp->dst[i]].bytes);
    run->vals[mp->dst[i]] = d;
  }
}

static void scope_enter(run_t *run, const insn_t *in) {
  const scope_plan_t *sp = in->plan;
  for (uint32_t i = 0; i < sp->count; i++) {
    const ref_info_t *ri = &run->p->refs[sp->refs[i]];
    run_ref_t *rr = &run->refs[sp->refs[i]];
    fill_uninit(run, (tsr_dtype_t)ri->dtype, rr->data, ri->elements);
    if (rr->shadow) memset(rr->shadow, 0, ri->elements);
  }
}

/* Store forwarding: when the store after this instruction targets a dense,
 * in-bounds view, the instruction writes its result there directly. */
static void prepare_forward(run_t *run, const insn_t *store) {
  const view_plan_t *vp = store->plan;
  run_ref_t *rr = &run->refs[vp->ref];
  const ref_info_t *ri = &run->p->refs[vp->ref];
  view_t v;
  int64_t origin[TSR_MAX_RANK], step[TSR_MAX_RANK];
  if (!resolve_view_q(run, store, vp, NULL, rr->data, rr->shadow,
                      tsr_dtype_size((tsr_dtype_t)ri->dtype), &v, origin, step, true) ||
      !view_is_dense(&v))
    return; /* the store will copy (and report any error) */
  if (rr->pending_fill) {
    if (v.base == rr->data && view_count(&v) == (int64_t)ri->elements)
      rr->pending_fill = false; /* the whole block is about to be written */
    else
      materialize(run, vp->ref);
  }
  run->forward = v.base;
}

/* ---- Semaphores and DMAs ---- */

/* The core a device/core pair names (NULL and an error if out of range). */
static run_t *target_core(run_t *run, const insn_t *in, uint32_t device_value,
                          uint32_t core_value) {
  shared_t *sh = run->sh;
  int64_t d = device_value != NO_VALUE ? (int64_t)read_i32(run, device_value)
                                       : (int64_t)run->device;
  int64_t c = core_value != NO_VALUE ? (int64_t)read_i32(run, core_value)
                                     : (int64_t)run->core;
  if (d < 0 || d >= sh->devices) {
    tsr_interp_kernel_error(run, in->site, "device %lld out of range: the run has %u device%s",
                 (long long)d, sh->devices, sh->devices == 1 ? "" : "s");
    return NULL;
  }
  if (c < 0 || c >= sh->cores) {
    tsr_interp_kernel_error(run, in->site, "core %lld out of range: a device has %u core%s",
                 (long long)c, sh->cores, sh->cores == 1 ? "" : "s");
    return NULL;
  }
  return &sh->core[d * sh->cores + c];
}

static int64_t sem_offset(run_t *run, const insn_t *in, const sem_plan_t *sp) {
  int64_t off = 0;
  for (uint32_t d = 0; d < sp->rank; d++) {
    int64_t i = sp->idx[d].value != NO_VALUE ? read_i32(run, sp->idx[d].value)
                                             : sp->idx[d].start;
    if (i < 0 || i >= sp->dims[d]) {
      tsr_interp_kernel_error(run, in->site, "semaphore index %lld out of bounds for dimension %u "
                   "of %%%s (size %lld)", (long long)i, d, run->p->refs[sp->ref].name,
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

static int32_t *sem_addr(run_t *run, const insn_t *in, const sem_plan_t *sp) {
  return sem_on(run, target_core(run, in, sp->device, sp->core), in, sp);
}

static void sem_add(run_t *run, uint32_t site, int32_t *sem, int64_t n) {
  int64_t v = (int64_t)*sem + n;
  if (v > INT32_MAX) {
    tsr_interp_kernel_error(run, site, "semaphore overflow: %d + %lld", *sem, (long long)n);
    return;
  }
  *sem = (int32_t)v;
}

static void sem_signal(run_t *run, const insn_t *in) {
  const sem_plan_t *sp = in->plan;
  int32_t n = read_i32(run, sp->amount);
  if (n < 0) {
    tsr_interp_kernel_error(run, in->site, "semaphore signal by a negative amount (%d)", n);
    return;
  }
  int32_t *sem = sem_addr(run, in, sp);
  if (!sem) return;
  race_release(run, sem);
  sem_add(run, in->site, sem, n);
}

static void barrier_signal(run_t *run, const insn_t *in) {
  const sem_plan_t *sp = in->plan;
  for (uint32_t c = 0; c < run->sh->cores; c++) {
    if (c == run->core) continue;
    int32_t *sem = sem_on(run, &run->sh->core[run->device * run->sh->cores + c], in, sp);
    if (!sem) continue;
    race_release(run, sem);
    sem_add(run, in->site, sem, 1);
  }
}

static void dma_complete(shared_t *sh, uint32_t i);
static void sem_text(const tsr_interp_program_t *p, const sem_plan_t *sp, int64_t off,
                     char *buf, size_t size);

static void trace_dma(shared_t *sh, const dma_record_t *r) {
  if (!sh->tracing) return;
  char name[160], args[64];
  snprintf(name, sizeof name, "DMA -> %%%s", r->dst_name);
  snprintf(args, sizeof args, "{\"bytes\":%lld}", (long long)r->bytes);
  trace_event(sh, name, r->device, 1000 + r->core, r->start_tick, sh->tick, args);
}

/* Waits until this core's semaphore holds `need`, then subtracts it. In lazy
 * mode, queued DMAs that signal this semaphore complete first (the most
 * recently started first) until enough bytes have arrived. */
static bool sem_try_wait(run_t *run, const insn_t *in, const sem_plan_t *sp, int32_t need) {
  int32_t *sem = sem_on(run, run, in, sp);
  if (!sem) return true;
  if (need < 0) {
    tsr_interp_kernel_error(run, in->site, "semaphore wait for a negative amount (%d)", need);
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
  race_acquire(run, sem);
  if (sh->tracing) {
    char name[200];
    sem_text(run->p, sp, sem - run->sems[sp->ref], name + 5, sizeof name - 5);
    memcpy(name, "wait ", 5);
    trace_event(sh, name, run->device, run->core, run->wait_tick ? run->wait_tick : sh->tick,
                sh->tick, NULL);
  }
  run->wait_tick = 0;
  return true;
}

static void dma_copy(shared_t *sh, dma_record_t *r) {
  if (r->skipped) return;
  size_t es = tsr_dtype_size((tsr_dtype_t)r->dtype);
  if (sh->race) {
    run_t *issuer = &sh->core[r->device * sh->cores + r->core];
    char what[96];
    snprintf(what, sizeof what, "%%%s", r->src_name);
    tsr_race_access(issuer, &r->vc, r->id, r->site, r->src_key, what, false, r->src_rank,
                    r->src_ap);
    snprintf(what, sizeof what, "%%%s", r->dst_name);
    tsr_race_access(issuer, &r->vc, r->id, r->site, r->dst_key, what, true, r->dst_rank,
                    r->dst_ap);
  }
  if (!r->add) {
    tsr_blockops_copy(es, r->rank, r->dims, r->dst, r->dst_strides, r->src,
                      r->src_strides);
  } else {
    (void)tsr_blockops_add_into((tsr_dtype_t)r->dtype, r->rank, r->dims, r->dst,
                                r->dst_strides, r->src, r->src_strides);
  }
  if (r->dst_shadow) {
    int64_t zero[TSR_MAX_RANK] = {0};
    tsr_blockops_copy(1, r->rank, r->dims, r->dst_shadow, r->dst_strides, &one_byte, zero);
  }
  sh->stats.bytes_copied += (uint64_t)r->bytes;
}

/* A DMA's copy happens: it reads and writes, then signals its semaphores
 * (publishing its clock to them when detecting races). */
static void dma_finish(shared_t *sh, dma_record_t *r) {
  run_t *issuer = &sh->core[r->device * sh->cores + r->core];
  dma_copy(sh, r);
  trace_dma(sh, r);
  int32_t *sems[2] = {r->send, r->sem};
  for (int i = 0; i < 2; i++) {
    if (!sems[i]) continue;
    if (sh->race) {
      vclock_t *sc = tsr_race_sem_clock(sh, sems[i]);
      if (sc) tsr_vc_join(sc, &r->vc);
    }
    sem_add(issuer, r->site, sems[i], r->bytes);
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

/* Resolves a DMA view of `ref` on `core`; materializes lazily filled blocks. */
static bool dma_view(run_t *run, run_t *core, const insn_t *in, const view_plan_t *vp,
                     view_t *v, int64_t *origin, int64_t *step) {
  const ref_info_t *ri = &run->p->refs[vp->ref];
  materialize(core, vp->ref);
  /* dynamic indices are this core's values: resolve with run, on core's memory */
  return resolve_view(run, in, vp, ri->name, core->refs[vp->ref].data,
                      core->refs[vp->ref].shadow, tsr_dtype_size((tsr_dtype_t)ri->dtype),
                      v, origin, step);
}

/* Gives the never-written elements of a DMA source view the uninitialized
 * value: an HBM output is not filled before a checked run (check_outputs
 * fills what stays unwritten at the end), so a DMA reading it early must not
 * copy the caller's stale data. */
static void fill_unwritten(const run_t *run, tsr_dtype_t dtype, const view_t *v) {
  size_t es = tsr_dtype_size(dtype);
  view_walk_t w = {{0}};
  for (int64_t i = 0, n = view_count(v); i < n; i++, walk_next(v, &w)) {
    int64_t off = walk_offset(v, &w);
    if (!v->shadow[off]) fill_uninit(run, dtype, v->base + off * (int64_t)es, 1);
  }
}

static void dma_start(run_t *run, const insn_t *in) {
  const dma_plan_t *dp = in->plan;
  shared_t *sh = run->sh;
  run_t *dst_core = target_core(run, in, dp->device, NO_VALUE);
  if (!dst_core) return;
  view_t sv, dv;
  int64_t so[TSR_MAX_RANK], ss[TSR_MAX_RANK], dso[TSR_MAX_RANK], dss[TSR_MAX_RANK];
  /* An out-of-bounds view is reported and the copy skipped, but the DMA
   * still signals its semaphores: its wait then goes on, and the one root
   * cause gives one diagnostic, not a follow-on deadlock. */
  bool skipped = !dma_view(run, run, in, &dp->src, &sv, so, ss) ||
                 !dma_view(run, dst_core, in, &dp->dst, &dv, dso, dss);
  if (!skipped && sv.shadow) {
    int64_t bad = view_first_unwritten(&sv);
    if (bad >= 0) {
      fill_unwritten(run, (tsr_dtype_t)run->p->refs[dp->src.ref].dtype, &sv);
      tsr_interp_kernel_warning(run, in->site,
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
  if (!skipped) {
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
  r.bytes = dp->bytes;
  r.sem = sem;
  r.send = send;
  r.dst_name = run->p->refs[dp->dst.ref].name;
  r.src_name = run->p->refs[dp->src.ref].name;
  r.start_tick = sh->tick;
  if (sh->race) {
    r.id = sh->next_dma_id++;
    tsr_vc_copy(&r.vc, &run->vc);
    tsr_vc_add_dma(&r.vc, r.id);
    run->vc.c[core_index(run)]++;
    if (!skipped) {
      r.src_key = object_key(run, dp->src.ref);
      r.dst_key = object_key(dst_core, dp->dst.ref);
      r.src_rank = view_aps(&dp->src, so, ss, r.src_ap);
      r.dst_rank = view_aps(&dp->dst, dso, dss, r.dst_ap);
    }
  }
  if (run->p->options.dma_eager) {
    dma_finish(sh, &r);
    return;
  }
  if (sh->num_dmas == sh->dmas_capacity) {
    uint32_t cap = sh->dmas_capacity ? sh->dmas_capacity * 2 : 16;
    dma_record_t *q = tsr_realloc(sh->dmas, cap * sizeof *q);
    if (!q) {
      tsr_interp_kernel_error(run, in->site, "out of memory queueing a DMA");
      tsr_vc_free(&r.vc);
      return;
    }
    sh->dmas = q;
    sh->dmas_capacity = cap;
  }
  sh->dmas[sh->num_dmas++] = r;
}

/* "%name[i, j]" (or "%name" for a single semaphore) at flat offset off. */
static void sem_text(const tsr_interp_program_t *p, const sem_plan_t *sp, int64_t off,
                     char *buf, size_t size) {
  const ref_info_t *ri = &p->refs[sp->ref];
  if (!ri->rank || off < 0) {
    snprintf(buf, size, "%%%s", ri->name);
    return;
  }
  int64_t idx[TSR_MAX_RANK];
  unflatten(off, ri->rank, ri->dims, idx);
  char at[96];
  format_dims(at, sizeof at, idx, ri->rank);
  snprintf(buf, size, "%%%s%s", ri->name, at);
}

/* Reports a core that can no longer move (part of a deadlock). */
static void report_blocked(run_t *run) {
  const insn_t *in = &run->p->code[run->blocked_pc];
  const sem_plan_t *sp = in->code == TSR_OP_DMA_WAIT ? &((const dma_plan_t *)in->plan)->sem
                                                     : in->plan;
  int64_t need = in->code == TSR_OP_DMA_WAIT ? ((const dma_plan_t *)in->plan)->bytes
                 : in->code == XOP_BARRIER_WAIT ? (int64_t)run->sh->cores - 1
                                                : read_i32(run, sp->amount);
  int64_t off = sem_offset(run, in, sp);
  int32_t have = off >= 0 ? run->sems[sp->ref][off] : 0;
  char name[160];
  sem_text(run->p, sp, off, name, sizeof name);
  run->sh->site_reported[in->site] &= (uint8_t)~1u; /* every blocked core is reported */
  tsr_interp_kernel_error(run, in->site,
               "deadlock: every core is blocked; this one waits for %s to reach %lld%s, "
               "it holds %d and nothing in flight will signal it",
               name, (long long)need, in->code == TSR_OP_DMA_WAIT ? " bytes" : "", have);
}

/* Leaving a scope releases its buffers: a DMA still in flight into or out of
 * one of them is an error (the memory would be reused). */
static void scope_exit(run_t *run, const insn_t *in) {
  const scope_plan_t *sp = in->plan;
  shared_t *sh = run->sh;
  for (uint32_t i = 0; i < sp->count; i++) {
    const ref_info_t *ri = &run->p->refs[sp->refs[i]];
    const uint8_t *lo = run->refs[sp->refs[i]].data;
    const uint8_t *hi = lo + ri->elements * tsr_dtype_size((tsr_dtype_t)ri->dtype);
    for (uint32_t k = 0; k < sh->num_dmas; k++) {
      const dma_record_t *r = &sh->dmas[k];
      bool dst = r->dst >= lo && r->dst < hi, src = r->src >= lo && r->src < hi;
      if (!dst && !src) continue;
      tsr_interp_kernel_error(run, in->site,
                   "scoped buffer %%%s is released while a DMA %s it is in flight "
                   "(started at line %u): wait for the DMA inside the scope",
                   ri->name, dst ? "into" : "out of", run->p->sites[r->site].loc.line);
      break;
    }
  }
}

/* ---- The instruction loop ---- */

/* Counts one step (a grid step or a loop iteration) at `site`. When a run
 * bound is reached (interp/bounds.h), reports it there as a kernel error,
 * abandons the run and returns false. The clock and the cancel flag are
 * read only when a grant of steps runs out. */
static bool take_step_slow(run_t *run, uint32_t site);

static inline bool take_step(run_t *run, uint32_t site) {
  shared_t *sh = run->sh;
  if (TSR_LIKELY(sh->budget > 0)) {
    sh->budget--;
    return true;
  }
  return take_step_slow(run, site);
}

/* take_step when the grant is used up: a new grant, or the run stops. */
static bool take_step_slow(run_t *run, uint32_t site) {
  shared_t *sh = run->sh;
  uint64_t g = tsr_bounds_grant(&sh->bounds, &sh->meter, 1);
  if (g) {
    sh->budget = g - 1;
    return true;
  }
  char why[160];
  tsr_bounds_describe(&sh->bounds, why, sizeof why);
  tsr_interp_kernel_error(run, site, "%s", why);
  sh->aborted = true;
  return false;
}

/* Runs instructions from *pc_io until the end of the code (true) or a wait
 * that cannot be satisfied yet (false; *pc_io is the waiting instruction). */
static bool exec(run_t *run, uint32_t *pc_io) {
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
    switch (in->code) {
#define TSR_OP(E, m, syn, rule, mino, maxo, nres, nreg, flags, text) \
  case TSR_OP_##E:                                                    \
    if (TSR_SYN_##syn == TSR_SYN_UNARY) goto unary;                   \
    if (TSR_SYN_##syn == TSR_SYN_BINARY) goto binary;                 \
    break;
#include "ir/ops.def"
#undef TSR_OP
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
        int32_t lo = read_i32(run, in->a), hi = read_i32(run, in->b),
                st = read_i32(run, in->c);
        if (st <= 0) {
          tsr_interp_kernel_error(run, in->site, "for loop step must be positive, got %d", st);
          pc = in->target;
          if (run->sh->aborted) goto out;
          continue;
        }
        vals[in->r] = result_ptr(run, in);
        memcpy(vals[in->r], &lo, 4);
        if (!(lo < hi)) pc = in->target;
        continue;
      }
      case XOP_FOR_NEXT: {
        int64_t next = (int64_t)read_i32(run, in->r) + read_i32(run, in->c);
        if (next < read_i32(run, in->b)) {
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
        scope_exit(run, in);
        continue;
      case XOP_ALIAS:
        vals[in->r] = vals[in->a];
        continue;
      case XOP_BARRIER_SIGNAL:
        barrier_signal(run, in);
        continue;
      case XOP_BARRIER_WAIT:
        if (!sem_try_wait(run, in, in->plan, (int32_t)run->sh->cores - 1)) goto blocked;
        continue;
      case XOP_STEP:
        if (!take_step(run, in->site)) goto out;
        continue;
      default:
        tsr_interp_kernel_error(run, in->site, "internal error: bad instruction %u", in->code);
        goto out;
    }

    /* Ops that are not plain unary/binary. */
    switch ((tsr_opcode_t)in->code) {
      case TSR_OP_LOAD:
        do_load(run, in);
        break;
      case TSR_OP_STORE:
        do_store(run, in);
        break;
      case TSR_OP_SLICE:
        do_slice(run, in);
        break;
      case TSR_OP_PROGRAM_ID:
        put_i32(run, in, (int32_t)run->point[((const shape_plan_t *)in->plan)->axis]);
        break;
      case TSR_OP_NUM_PROGRAMS:
        put_i32(run, in, (int32_t)p->grid[((const shape_plan_t *)in->plan)->axis]);
        break;
      case TSR_OP_IOTA: {
        const shape_plan_t *sp = in->plan;
        vals[in->r] = result_ptr(run, in);
        tsr_blockops_iota((tsr_dtype_t)in->rdtype, vals[in->r], sp->rank, sp->dims,
                          sp->axis);
        break;
      }
      case TSR_OP_SELECT:
        vals[in->r] = result_ptr(run, in);
        tsr_blockops_select(tsr_dtype_size((tsr_dtype_t)in->rdtype), vals[in->r],
                            vals[in->a], in->bcast & 1, vals[in->b], in->bcast & 2,
                            vals[in->c], in->bcast & 4, (size_t)in->n);
        break;
      case TSR_OP_CONVERT:
        vals[in->r] = result_ptr(run, in);
        tsr_blockops_convert((tsr_dtype_t)in->rdtype, vals[in->r],
                             (tsr_dtype_t)in->dtype, vals[in->a], (size_t)in->n);
        break;
      case TSR_OP_BROADCAST:
      case TSR_OP_TRANSPOSE: {
        const shape_plan_t *sp = in->plan;
        vals[in->r] = result_ptr(run, in);
        tsr_blockops_copy(tsr_dtype_size((tsr_dtype_t)in->rdtype), sp->rank, sp->dims,
                          vals[in->r], sp->strides, vals[in->a], sp->src_strides);
        break;
      }
      case TSR_OP_CONCATENATE: {
        const shape_plan_t *sp = in->plan;
        size_t es = tsr_dtype_size((tsr_dtype_t)in->rdtype);
        vals[in->r] = result_ptr(run, in);
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
        break;
      }
      case TSR_OP_ROLL: {
        const shape_plan_t *sp = in->plan;
        vals[in->r] = result_ptr(run, in);
        tsr_blockops_roll(tsr_dtype_size((tsr_dtype_t)in->rdtype), vals[in->r],
                          vals[in->a], sp->src_rank, sp->src_dims, sp->axis,
                          read_i32(run, in->b));
        break;
      }
      case TSR_OP_GATHER: {
        const shape_plan_t *sp = in->plan;
        vals[in->r] = result_ptr(run, in);
        int64_t bad = tsr_blockops_gather(tsr_dtype_size((tsr_dtype_t)in->rdtype),
                                          vals[in->r], vals[in->a], vals[in->b],
                                          sp->rank, sp->dims, sp->axis,
                                          sp->src_dims[sp->axis]);
        if (bad >= 0) {
          int64_t idx[TSR_MAX_RANK];
          char at[96];
          unflatten(bad, sp->rank, sp->dims, idx);
          format_dims(at, sizeof at, idx, sp->rank);
          tsr_interp_kernel_error(run, in->site,
                       "gather index %d at %s is out of range [0, %lld) along axis %u",
                       ((const int32_t *)vals[in->b])[bad], at,
                       (long long)sp->src_dims[sp->axis], sp->axis);
          fill_uninit(run, (tsr_dtype_t)in->rdtype, vals[in->r], (uint64_t)in->n);
        }
        break;
      }
      case TSR_OP_REDUCE_SUM:
      case TSR_OP_REDUCE_MAX:
      case TSR_OP_REDUCE_MIN:
      case TSR_OP_REDUCE_PROD:
      case TSR_OP_REDUCE_AND:
      case TSR_OP_REDUCE_OR: {
        const shape_plan_t *sp = in->plan;
        vals[in->r] = result_ptr(run, in);
        tsr_blockops_reduce((tsr_opcode_t)in->code, (tsr_dtype_t)in->dtype, vals[in->r],
                            vals[in->a], sp->src_rank, sp->src_dims, sp->axes_mask);
        break;
      }
      case TSR_OP_ARGMAX:
      case TSR_OP_ARGMIN: {
        const shape_plan_t *sp = in->plan;
        vals[in->r] = result_ptr(run, in);
        tsr_blockops_argreduce((tsr_opcode_t)in->code, (tsr_dtype_t)in->dtype,
                               vals[in->r], vals[in->a], sp->src_rank, sp->src_dims,
                               sp->axis);
        break;
      }
      case TSR_OP_DOT: {
        const shape_plan_t *sp = in->plan;
        vals[in->r] = result_ptr(run, in);
        tsr_blockops_dot((tsr_dtype_t)in->rdtype, vals[in->r], (tsr_dtype_t)in->dtype,
                         vals[in->a], vals[in->b],
                         in->c != NO_VALUE ? vals[in->c] : NULL, sp->m, sp->k, sp->n,
                         (in->flags & TSR_OPF_TRANSPOSE_RHS) != 0);
        break;
      }
      case TSR_OP_PRINT:
        do_print(run, in);
        break;
      case TSR_OP_DEVICE_ID:
      case TSR_OP_CORE_ID:
        put_i32(run, in, (int32_t)(in->code == TSR_OP_DEVICE_ID ? run->device : run->core));
        break;
      case TSR_OP_SEM_SIGNAL:
        sem_signal(run, in);
        break;
      case TSR_OP_SEM_WAIT:
        if (!sem_try_wait(run, in, in->plan, read_i32(run, ((const sem_plan_t *)in->plan)->amount)))
          goto blocked;
        break;
      case TSR_OP_SEM_READ: {
        int32_t *sem = sem_addr(run, in, in->plan);
        put_i32(run, in, sem ? *sem : 0);
        break;
      }
      case TSR_OP_DMA_START:
        dma_start(run, in);
        break;
      case TSR_OP_DMA_WAIT: {
        const dma_plan_t *dp = in->plan;
        if (!sem_try_wait(run, in, &dp->sem, (int32_t)dp->bytes)) goto blocked;
        break;
      }
      case TSR_OP_ASSERT:
        if (!*(const uint8_t *)vals[in->a]) {
          const text_plan_t *tp = in->plan;
          tsr_interp_kernel_error(run, in->site, "assertion failed: %s", tp->text);
        }
        break;
      default:
        tsr_interp_kernel_error(run, in->site, "op '%s' is not implemented in the interpreter",
                                tsr_op_table[in->code].mnemonic);
        break;
    }
    if (TSR_UNLIKELY(run->sh->aborted)) goto out;
    continue;

  unary:
    vals[in->r] = result_ptr(run, in);
    in->fn.unary(vals[in->r], vals[in->a], (size_t)in->n);
    continue;
  binary:
    vals[in->r] = result_ptr(run, in);
    in->fn.binary(vals[in->r], vals[in->a], vals[in->b], (size_t)in->n,
                  (tsr_bcast_t)in->bcast);
    continue;
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

/* ---- The grid pipeline ---- */

typedef struct visit {
  int64_t key[TSR_MAX_RANK];
  uint64_t first_step, last_step;
  uint32_t core; /* the core that wrote it */
  UT_hash_handle hh;
} visit_t;

/* Computes the block indices of operand j at grid point `point`. */
static void eval_index_map(run_t *run, uint32_t j, const int64_t *point, int64_t *out) {
  const operand_plan_t *op = &run->p->operands[j];
  if (op->affine) {
    for (uint32_t d = 0; d < op->array_rank; d++)
      out[d] = op->map_axis[d] >= 0 ? point[op->map_axis[d]] : op->map_const[d];
    return;
  }
  for (uint32_t a = 0; a < run->p->grid_rank; a++) {
    int32_t v = (int32_t)point[a];
    run->vals[op->map_args[a]] = own(run, op->map_args[a]);
    memcpy(run->vals[op->map_args[a]], &v, 4);
  }
  uint32_t pc = op->map_pc;
  exec(run, &pc);
  for (uint32_t d = 0; d < op->array_rank; d++) out[d] = read_i32(run, op->map_results[d]);
}

static bool block_in_range(const operand_plan_t *op, const int64_t *b) {
  for (uint32_t d = 0; d < op->array_rank; d++) {
    if (b[d] < 0 || b[d] * op->block[d] >= op->array_dims[d]) return false;
  }
  return true;
}

/* The window of block b in the array: start and extent per dim; true if the
 * block has no padding and is one contiguous run of HBM. */
static bool block_window(const operand_plan_t *op, const int64_t *b, int64_t *start,
                         int64_t *extent) {
  bool padded = false;
  for (uint32_t d = 0; d < op->array_rank; d++) {
    start[d] = b[d] * op->block[d];
    extent[d] = TSR_MIN(op->block[d], op->array_dims[d] - start[d]);
    if (extent[d] < op->block[d]) padded = true;
  }
  if (padded) return false;
  /* Contiguous: leading dims of block 1, then one partial dim, then full. */
  uint32_t d = 0;
  while (d < op->array_rank && op->block[d] == 1) d++;
  for (uint32_t e = d + 1; e < op->array_rank; e++)
    if (op->block[e] != op->array_dims[e]) return false;
  return true;
}

static int64_t window_offset(const operand_plan_t *op, const int64_t *start) {
  int64_t off = 0;
  for (uint32_t d = 0; d < op->array_rank; d++) off += start[d] * op->array_strides[d];
  return off;
}

static void report_block_range(run_t *run, uint32_t j, const int64_t *b) {
  const operand_plan_t *op = &run->p->operands[j];
  char bi[96], shape[96], block[96], nb[96];
  int64_t counts[TSR_MAX_RANK];
  for (uint32_t d = 0; d < op->array_rank; d++)
    counts[d] = (op->array_dims[d] + op->block[d] - 1) / op->block[d];
  format_dims(bi, sizeof bi, b, op->array_rank);
  format_dims(shape, sizeof shape, op->array_dims, op->array_rank);
  format_dims(block, sizeof block, op->block, op->array_rank);
  format_dims(nb, sizeof nb, counts, op->array_rank);
  tsr_interp_kernel_error(run, op->site,
               "index map gives block index %s, out of range for array shape %s "
               "with block %s (block counts %s)",
               bi, shape, block, nb);
}

/* The pipeline's block copies read and write HBM on behalf of the core. */
static void race_window(run_t *run, uint32_t j, const int64_t *start,
                        const int64_t *extent, bool write) {
  if (!run->sh->race) return;
  const operand_plan_t *op = &run->p->operands[j];
  race_ap_t ap[TSR_MAX_RANK];
  for (uint32_t d = 0; d < op->array_rank; d++) {
    ap[d].start = start[d];
    ap[d].count = extent[d];
    ap[d].stride = 1;
  }
  char what[96];
  snprintf(what, sizeof what, "%%%s (HBM)", run->p->refs[op->ref].name);
  tsr_race_access(run, &run->vc, -1, op->site, hbm_key(run, j), what, write,
                  op->array_rank, ap);
}

static void copy_in(run_t *run, uint32_t j) {
  const tsr_interp_program_t *p = run->p;
  const operand_plan_t *op = &p->operands[j];
  const ref_info_t *ri = &p->refs[op->ref];
  run_ref_t *rr = &run->refs[op->ref];
  const int64_t *b = &run->cur_block[j * TSR_MAX_RANK];
  size_t es = tsr_dtype_size((tsr_dtype_t)ri->dtype);
  uint8_t *own_buf = run->vmem + ri->offset;
  run->sh->stats.blocks_copied_in++;
  run->sh->stats.bytes_copied += ri->elements * es;
  if (!run->block_valid[j]) {
    rr->data = own_buf;
    fill_uninit(run, (tsr_dtype_t)ri->dtype, own_buf, ri->elements);
    return;
  }
  int64_t start[TSR_MAX_RANK], extent[TSR_MAX_RANK];
  bool direct = block_window(op, b, start, extent);
  race_window(run, j, start, extent, false);
  uint8_t *src = run->hbm[j] + window_offset(op, start) * (int64_t)es;
  if (direct && !op->aliased && !ri->written) {
    /* zero-copy: the block is a contiguous window of HBM that nothing
     * writes. A block the kernel writes is the core's own copy, as in
     * Pallas: a later fetch reads HBM again, and each core has its own. */
    rr->data = src;
    return;
  }
  rr->data = own_buf;
  int64_t bstr[TSR_MAX_RANK];
  tsr_blockops_dense_strides(op->array_rank, op->block, bstr);
  bool padded = false;
  for (uint32_t d = 0; d < op->array_rank; d++)
    if (extent[d] < op->block[d]) padded = true;
  if (padded) fill_uninit(run, (tsr_dtype_t)ri->dtype, own_buf, ri->elements);
  tsr_blockops_copy(es, op->array_rank, extent, own_buf, bstr, src, op->array_strides);
}

static void begin_out_block(run_t *run, uint32_t j) {
  const tsr_interp_program_t *p = run->p;
  const operand_plan_t *op = &p->operands[j];
  const ref_info_t *ri = &p->refs[op->ref];
  run_ref_t *rr = &run->refs[op->ref];
  const int64_t *b = &run->cur_block[j * TSR_MAX_RANK];
  size_t es = tsr_dtype_size((tsr_dtype_t)ri->dtype);
  uint8_t *own_buf = run->vmem + ri->offset;
  uint8_t *own_shadow = run->vmem_shadow ? run->vmem_shadow + ri->offset : NULL;
  rr->data = own_buf;
  rr->shadow = ri->shadowed ? own_shadow : NULL;
  if (run->block_valid[j]) {
    /* Revisit check (aliased outputs are exempt, as in Pallas). */
    if (op->alias < 0) {
      visit_t *set = run->visited[j], *v;
      int64_t key[TSR_MAX_RANK] = {0};
      for (uint32_t d = 0; d < op->array_rank; d++) key[d] = b[d];
      HASH_FIND(hh, set, key, sizeof key, v);
      if (v && v->core != run->core) {
        /* Both copies out reach HBM, in an order the TPU does not define: a
         * race, an error when races are looked for (--detect-races). */
        char bi[96];
        format_dims(bi, sizeof bi, b, op->array_rank);
        kernel_report(
            run, op->site, run->sh->race != NULL,
            "output block %s is written by core %u at step %llu and by core "
            "%u in steps %llu..%llu: the cores of a device must write "
            "disjoint output blocks (the last copy out wins)",
            bi, run->core, (unsigned long long)run->step, v->core,
            (unsigned long long)v->first_step, (unsigned long long)v->last_step);
      } else if (v) {
        char bi[96];
        format_dims(bi, sizeof bi, b, op->array_rank);
        tsr_interp_kernel_error(run, op->site,
                     "output block %s is revisited at step %llu; it was written in "
                     "steps %llu..%llu and already copied out (writes to an output "
                     "block must happen in consecutive grid steps)",
                     bi, (unsigned long long)run->step,
                     (unsigned long long)v->first_step,
                     (unsigned long long)v->last_step);
      } else {
        v = tsr_calloc(1, sizeof *v);
        if (v) {
          memcpy(v->key, key, sizeof key);
          v->first_step = v->last_step = run->step;
          v->core = run->core;
          HASH_ADD(hh, set, key, sizeof v->key, v);
          run->visited[j] = set;
        }
      }
    }
    int64_t start[TSR_MAX_RANK], extent[TSR_MAX_RANK];
    if (block_window(op, b, start, extent) && op->alias < 0) {
      int64_t off = window_offset(op, start);
      rr->data = run->hbm[j] + off * (int64_t)es;
      if (ri->shadowed) rr->shadow = run->hbm_shadow[j] + off;
    }
  }
  /* Output blocks start uninitialized: they are not copied in. The fill is
   * lazy: a first store of the whole block makes it unnecessary (one write
   * pass fewer; part of the 12% -> 77% add speed-up, docs/benchmarks.md). */
  rr->pending_fill = true;
  if (rr->shadow) memset(rr->shadow, 0, ri->elements);
}

static void copy_out(run_t *run, uint32_t j) {
  const tsr_interp_program_t *p = run->p;
  const operand_plan_t *op = &p->operands[j];
  const ref_info_t *ri = &p->refs[op->ref];
  run_ref_t *rr = &run->refs[op->ref];
  const int64_t *b = &run->cur_block[j * TSR_MAX_RANK];
  size_t es = tsr_dtype_size((tsr_dtype_t)ri->dtype);
  materialize(run, op->ref);
  if (!run->block_valid[j]) return;
  run->sh->stats.blocks_copied_out++;
  run->sh->stats.bytes_copied += ri->elements * es;
  if (op->alias < 0) {
    visit_t *v;
    int64_t key[TSR_MAX_RANK] = {0};
    for (uint32_t d = 0; d < op->array_rank; d++) key[d] = b[d];
    HASH_FIND(hh, (visit_t *)run->visited[j], key, sizeof key, v);
    if (v) v->last_step = run->step;
  }
  uint8_t *own_buf = run->vmem + ri->offset;
  int64_t start[TSR_MAX_RANK], extent[TSR_MAX_RANK];
  block_window(op, b, start, extent);
  race_window(run, j, start, extent, true);
  if (rr->data != own_buf) return; /* written in place */
  int64_t bstr[TSR_MAX_RANK];
  tsr_blockops_dense_strides(op->array_rank, op->block, bstr);
  int64_t off = window_offset(op, start);
  tsr_blockops_copy(es, op->array_rank, extent, run->hbm[j] + off * (int64_t)es,
                    op->array_strides, own_buf, bstr);
  if (ri->shadowed && rr->shadow)
    tsr_blockops_copy(1, op->array_rank, extent, run->hbm_shadow[j] + off,
                      op->array_strides, rr->shadow, bstr);
}

/* Row-major counter -> grid point (with shuffled parallel dims). */
static void loop_to_point(run_t *run, const int64_t *loop, int64_t *point) {
  for (uint32_t d = 0; d < run->p->grid_rank; d++)
    point[d] = run->perm[d] ? run->perm[d][loop[d]] : loop[d];
}

static uint64_t splitmix64(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static void check_outputs(run_t *run) {
  const tsr_interp_program_t *p = run->p;
  for (uint32_t j = 0; j < p->num_operands; j++) {
    const operand_plan_t *op = &p->operands[j];
    if (op->role != TSR_ROLE_OUT || !run->hbm_shadow[j]) continue;
    const uint8_t *s = run->hbm_shadow[j];
    const uint8_t *z = memchr(s, 0, op->array_elements);
    if (!z) continue; /* the common case: one fast scan */
    uint64_t first = (uint64_t)(z - s), missing = 0;
    const ref_info_t *ri = &p->refs[op->ref];
    size_t es = tsr_dtype_size((tsr_dtype_t)ri->dtype);
    for (uint64_t i = first; i < op->array_elements; i++) {
      if (s[i]) continue;
      missing++;
      fill_uninit(run, (tsr_dtype_t)ri->dtype, run->hbm[j] + i * es, 1);
    }
    if (missing) {
      int64_t idx[TSR_MAX_RANK];
      char at[96];
      unflatten((int64_t)first, op->array_rank, op->array_dims, idx);
      format_dims(at, sizeof at, idx, op->array_rank);
      tsr_interp_kernel_warning(run, op->site,
                   "%llu of %llu output elements were never written (first at %s); "
                   "they hold the uninitialized value",
                   (unsigned long long)missing,
                   (unsigned long long)op->array_elements, at);
    }
  }
}

/* ---- One core's walk through its share of the grid ---- */

enum { CORE_START, CORE_STEP, CORE_BODY, CORE_DONE };

/* Writes `flat` row-major into loop[first..end). */
static void unflatten_dims(const tsr_interp_program_t *p, uint64_t flat, uint32_t first,
                           uint32_t end, int64_t *loop) {
  for (uint32_t d = end; d-- > first;) {
    loop[d] = (int64_t)(flat % (uint64_t)p->grid[d]);
    flat /= (uint64_t)p->grid[d];
  }
}

/* Sets run->loop to this core's step `k`: the dims before the
 * split dims, then this core's split points, then the dims after them, each
 * row-major (tsr_ir_core_split). */
static void core_step_to_loop(run_t *run, uint64_t k) {
  const tsr_interp_program_t *p = run->p;
  uint32_t first = p->split.first, end = p->split.end;
  uint64_t inner = 1;
  for (uint32_t d = end; d < p->grid_rank; d++) inner *= (uint64_t)p->grid[d];
  uint64_t chunk = (run->share_hi - run->share_lo) * inner;
  unflatten_dims(p, k / chunk, 0, first, run->loop);
  unflatten_dims(p, run->share_lo + k % chunk / inner, first, end, run->loop);
  unflatten_dims(p, k % inner, end, p->grid_rank, run->loop);
}

/* Moves run->loop to this core's next step (core_step_to_loop of the next
 * k, without its divisions): the dims after the split count fastest, then
 * the split points, then the dims before the split. */
static void advance_loop(run_t *run) {
  const tsr_interp_program_t *p = run->p;
  uint32_t first = p->split.first, end = p->split.end;
  for (uint32_t d = p->grid_rank; d-- > end;) {
    if (++run->loop[d] < p->grid[d]) return;
    run->loop[d] = 0;
  }
  uint64_t point = 0;
  for (uint32_t d = first; d < end; d++)
    point = point * (uint64_t)p->grid[d] + (uint64_t)run->loop[d];
  if (++point < run->share_hi) {
    unflatten_dims(p, point, first, end, run->loop);
    return;
  }
  unflatten_dims(p, run->share_lo, first, end, run->loop);
  for (uint32_t d = first; d-- > 0;) {
    if (++run->loop[d] < p->grid[d]) return;
    run->loop[d] = 0;
  }
}

/* The linear grid step of run->loop (row-major), for messages. */
static uint64_t loop_step(const run_t *run) {
  uint64_t step = 0;
  for (uint32_t d = 0; d < run->p->grid_rank; d++)
    step = step * (uint64_t)run->p->grid[d] + (uint64_t)run->loop[d];
  return step;
}

/* Copies in changed inputs and starts changed outputs for run->step. */
static void begin_step(run_t *run) {
  const tsr_interp_program_t *p = run->p;
  run->sh->stats.grid_steps++;
  run->step_tick = run->sh->tick;
  for (uint32_t j = 0; j < p->num_operands; j++) {
    const operand_plan_t *op = &p->operands[j];
    if (!op->blocked) continue;
    int64_t *cur = &run->cur_block[j * TSR_MAX_RANK];
    int64_t *prev = &run->prev_block[j * TSR_MAX_RANK];
    if (run->core_step > 0 && memcmp(cur, prev, op->array_rank * sizeof *cur) == 0)
      continue;
    run->block_valid[j] = block_in_range(op, cur);
    if (!run->block_valid[j]) report_block_range(run, j, cur);
    if (op->role == TSR_ROLE_IN)
      copy_in(run, j);
    else if (op->role == TSR_ROLE_OUT)
      begin_out_block(run, j);
  }
}

/* After the body: the next step's index maps decide which outputs are copied
 * out now; moves to the next step. */
static void end_step(run_t *run) {
  const tsr_interp_program_t *p = run->p;
  bool last = run->core_step + 1 == run->core_steps;
  if (run->sh->tracing) {
    char name[200];
    snprintf(name, sizeof name, "step ");
    tsr_interp_format_point(name + 5, sizeof name - 5, run->point, p->grid_rank);
    trace_event(run->sh, name, run->device, run->core, run->step_tick, run->sh->tick,
                NULL);
  }
  if (!last) {
    advance_loop(run);
    loop_to_point(run, run->loop, run->point);
  }
  for (uint32_t j = 0; j < p->num_operands; j++) {
    const operand_plan_t *op = &p->operands[j];
    if (!op->blocked) continue;
    int64_t *cur = &run->cur_block[j * TSR_MAX_RANK];
    int64_t *prev = &run->prev_block[j * TSR_MAX_RANK];
    memcpy(prev, cur, TSR_MAX_RANK * sizeof *cur);
    if (!last) eval_index_map(run, j, run->point, cur);
    bool leaving = last || memcmp(cur, prev, op->array_rank * sizeof *cur) != 0;
    if (op->role == TSR_ROLE_OUT && leaving) {
      /* copy_out works on the block being left: temporarily current. */
      int64_t next[TSR_MAX_RANK];
      memcpy(next, cur, sizeof next);
      memcpy(cur, prev, sizeof next);
      copy_out(run, j);
      memcpy(cur, next, sizeof next);
    }
  }
  run->core_step++;
  run->step = loop_step(run);
}

/* A core's start: its first grid point's block indices, and its first
 * step's blocks (inputs copied in, outputs started). */
static void start_core(run_t *run) {
  const tsr_interp_program_t *p = run->p;
  run->core_step = 0;
  run->phase = CORE_STEP;
  if (!run->core_steps) return;
  core_step_to_loop(run, 0);
  run->step = loop_step(run);
  loop_to_point(run, run->loop, run->point);
  for (uint32_t j = 0; j < p->num_operands; j++)
    if (p->operands[j].blocked)
      eval_index_map(run, j, run->point, &run->cur_block[j * TSR_MAX_RANK]);
  if (!take_step(run, p->grid_site)) return; /* the first grid step counts */
  begin_step(run);
  run->pc = p->body_pc;
  run->phase = CORE_BODY;
}

/* Runs a core until it finishes or blocks. Returns true if it made progress. */
static bool run_core(run_t *run) {
  const tsr_interp_program_t *p = run->p;
  bool progress = false;
  while (!run->sh->aborted) {
    switch (run->phase) {
      case CORE_START:
        start_core(run);
        progress = true;
        break;
      case CORE_STEP:
        if (run->core_step >= run->core_steps) {
          run->phase = CORE_DONE;
          return true;
        }
        if (!take_step(run, p->grid_site)) return true;
        begin_step(run);
        run->pc = p->body_pc;
        run->phase = CORE_BODY;
        progress = true;
        break;
      case CORE_BODY: {
        uint32_t before = run->pc;
        bool finished = exec(run, &run->pc);
        if (!finished) return progress || run->pc != before;
        progress = true;
        end_step(run);
        run->phase = CORE_STEP;
        break;
      }
      case CORE_DONE:
        return progress;
    }
  }
  return progress;
}

static uint64_t splitmix64(uint64_t *state);

/* The scheduler: starts every core, then runs every core until it blocks or
 * finishes, round after round, in a fixed order or a seeded one. When no core
 * can move, it is a deadlock: each blocked core is reported, and the run
 * stops. Every core's memory is set up (its first blocks included) before
 * any core runs an op, so a DMA into a device that has not run yet lands in
 * memory that device's start does not overwrite afterwards. */
static void run_all(shared_t *sh) {
  const tsr_interp_program_t *p = sh->p;
  uint32_t n = sh->devices * sh->cores;
  uint32_t order[TSR_INTERP_MAX_CORES];
  for (uint32_t i = 0; i < n; i++) order[i] = i;
  for (uint32_t i = 0; i < n && !sh->aborted; i++) start_core(&sh->core[i]);
  for (;;) {
    if (p->options.schedule_seed) {
      for (uint32_t i = n - 1; i > 0; i--) {
        uint32_t k = (uint32_t)(splitmix64(&sh->schedule_state) % (i + 1));
        uint32_t t = order[i];
        order[i] = order[k];
        order[k] = t;
      }
    }
    bool progress = false, all_done = true;
    for (uint32_t i = 0; i < n && !sh->aborted; i++) {
      run_t *core = &sh->core[order[i]];
      if (core->phase == CORE_DONE) continue;
      if (run_core(core)) progress = true;
      if (core->phase != CORE_DONE) all_done = false;
    }
    if (all_done || sh->aborted) return;
    if (!progress) {
      for (uint32_t i = 0; i < n; i++) {
        run_t *core = &sh->core[i];
        if (core->phase == CORE_DONE) continue;
        report_blocked(core);
      }
      sh->aborted = true;
      return;
    }
  }
}

/* ---- Entry point ---- */

static tsr_status_t check_operand(const tsr_interp_program_t *p, uint32_t j,
                                  uint32_t devices, const tsr_array_t *a) {
  const operand_plan_t *op = &p->operands[j];
  const ref_info_t *ri = &p->refs[op->ref];
  /* With several devices, arrays carry a leading device dimension. */
  uint32_t lead = devices > 1 ? 1 : 0;
  int64_t want_dims[TSR_MAX_RANK + 1];
  want_dims[0] = devices;
  for (uint32_t d = 0; d < op->array_rank; d++) want_dims[lead + d] = op->array_dims[d];
  uint32_t want_rank = op->array_rank + lead;
  bool ok = a && a->data && a->dtype == (tsr_dtype_t)ri->dtype && a->rank == want_rank;
  for (uint32_t d = 0; ok && d < want_rank; d++) ok = a->dims[d] == want_dims[d];
  if (ok) return NULL;
  char want[112], got[96];
  format_dims(want, sizeof want, want_dims + (lead ? 0 : 0), want_rank);
  if (!lead) format_dims(want, sizeof want, op->array_dims, op->array_rank);
  if (a) format_dims(got, sizeof got, a->dims, a->rank);
  return TSR_STATUS(TSR_INVALID_ARGUMENT,
                    "kernel @%s operand %%%s: expected %s%s, got %s%s", p->kernel_name,
                    ri->name, tsr_dtype_name((tsr_dtype_t)ri->dtype), want,
                    a ? tsr_dtype_name(a->dtype) : "no array", a ? got : "");
}

static void run_memory_free(run_memory_t *m, uint32_t num_operands) {
  if (!m) return;
  if (m->hbm_shadow)
    for (uint32_t j = 0; j < num_operands; j++) tsr_free(m->hbm_shadow[j]);
  tsr_free(m->hbm_shadow);
  tsr_free(m->frame);
  tsr_free(m->vmem);
  tsr_free(m->vmem_shadow);
  tsr_free(m);
}

/* The program's spare run memory, or a new one. Contents are garbage. Every
 * core has one; the output shadows (hbm_shadow) are used from each device's
 * core 0 only, and allocated on demand. */
static run_memory_t *run_memory_take(const tsr_interp_program_t *p) {
  run_memory_t *m = atomic_exchange(&((tsr_interp_program_t *)p)->spare, NULL);
  if (m) return m;
  m = tsr_calloc(1, sizeof *m);
  if (!m) return NULL;
  m->frame = tsr_aligned_alloc(64, p->frame_bytes + 64);
  m->vmem = tsr_aligned_alloc(64, p->vmem_bytes + 64);
  m->hbm_shadow = tsr_calloc(p->num_operands + 1, sizeof *m->hbm_shadow);
  bool ok = m->frame && m->vmem && m->hbm_shadow;
  if (ok && p->options.check) {
    m->vmem_shadow = tsr_aligned_alloc(64, p->vmem_bytes + 64);
    ok = m->vmem_shadow != NULL;
  }
  if (!ok) {
    run_memory_free(m, p->num_operands);
    return NULL;
  }
  return m;
}

static void core_free(run_t *run) {
  const tsr_interp_program_t *p = run->p;
  if (run->visited && run->core == 0) {
    for (uint32_t j = 0; j < p->num_operands; j++) {
      visit_t *set = run->visited[j], *v, *tmp;
      HASH_ITER(hh, set, v, tmp) {
        HASH_DEL(set, v);
        tsr_free(v);
      }
    }
  }
  if (run->memory) {
    /* Keep the memory for the next run unless another run already did. */
    run_memory_t *expected = NULL;
    tsr_interp_program_t *mp = (tsr_interp_program_t *)p;
    if (!atomic_compare_exchange_strong(&mp->spare, &expected, run->memory))
      run_memory_free(run->memory, p->num_operands);
  }
  if (run->sems)
    for (uint32_t i = 0; i < p->num_refs; i++) tsr_free(run->sems[i]);
  tsr_free(run->sems);
  tsr_vc_free(&run->vc);
  tsr_free(run->cur_block);
  tsr_free(run->prev_block);
  tsr_free(run->block_valid);
  tsr_free(run->refs);
  tsr_free(run->vals);
}

static void shared_free(shared_t *sh) {
  const tsr_interp_program_t *p = sh->p;
  if (sh->core)
    for (uint32_t i = 0; i < sh->devices * sh->cores; i++)
      if (sh->core[i].p) core_free(&sh->core[i]);
  if (sh->perm)
    for (uint32_t d = 0; d < p->grid_rank; d++) tsr_free(sh->perm[d]);
  tsr_free(sh->perm);
  tsr_free(sh->core);
  tsr_free(sh->hbm);
  tsr_free(sh->hbm_shadow);
  tsr_free(sh->visited);
  for (uint32_t i = 0; i < sh->num_dmas; i++) tsr_vc_free(&sh->dmas[i].vc);
  tsr_free(sh->dmas);
  tsr_race_destroy(sh->race);
  tsr_free(sh->site_reported);
  tsr_strbuf_deinitialize(&sh->trace);
  tsr_diag_list_deinitialize(&sh->diags);
  tsr_diag_list_deinitialize(&sh->warnings);
}

/* One core's memories, values, refs and share of the grid. */
static tsr_status_t core_setup(shared_t *sh, uint32_t device, uint32_t core) {
  const tsr_interp_program_t *p = sh->p;
  uint32_t nops = p->num_operands;
  run_t *run = &sh->core[device * sh->cores + core];
  run->p = p;
  run->sh = sh;
  run->device = device;
  run->core = core;
  run->memory = run_memory_take(p);
  if (!run->memory)
    return TSR_OOM_BYTES(p->frame_bytes + (p->options.check ? 2 : 1) * p->vmem_bytes + 192,
                         "the VMEM%s and values of core %u of device %u",
                         p->options.check ? ", its shadow" : "", core, device);
  run->frame = run->memory->frame;
  run->vmem = run->memory->vmem;
  run->vmem_shadow = run->memory->vmem_shadow;
  run->vals = tsr_calloc(p->num_values + 1, sizeof *run->vals);
  run->refs = tsr_calloc(p->num_refs + 1, sizeof *run->refs);
  run->sems = tsr_calloc(p->num_refs + 1, sizeof *run->sems);
  run->cur_block = tsr_calloc((size_t)(nops + 1) * TSR_MAX_RANK, sizeof(int64_t));
  run->prev_block = tsr_calloc((size_t)(nops + 1) * TSR_MAX_RANK, sizeof(int64_t));
  run->block_valid = tsr_calloc(nops + 1, sizeof *run->block_valid);
  if (!run->vals || !run->refs || !run->sems || !run->cur_block || !run->prev_block ||
      !run->block_valid)
    return TSR_OOM();
  run->hbm = sh->hbm + (size_t)device * nops;
  run->hbm_shadow = sh->hbm_shadow + (size_t)device * nops;
  run->visited = sh->visited + (size_t)device * nops;
  run->perm = sh->perm;
  /* Values start at their own buffers; consts are filled once. */
  for (uint32_t i = 0; i < p->num_values; i++) run->vals[i] = own(run, i);
  for (uint32_t i = 0; i < p->num_consts; i++) {
    uint32_t id = p->const_values[i];
    const value_info_t *vi = &p->values[id];
    size_t es = tsr_dtype_size((tsr_dtype_t)vi->dtype);
    unsigned char elem[8];
    tsr_blockops_literal((tsr_dtype_t)vi->dtype, p->const_literals[i], elem);
    tsr_blockops_fill(es, own(run, id), elem, vi->bytes / es);
  }
  /* Refs: own buffers. Scratch starts uninitialized with a clear shadow;
   * block buffers are set up by the pipeline, scoped ones at scope entry;
   * semaphores start at 0. */
  for (uint32_t i = 0; i < p->num_refs; i++) {
    const ref_info_t *ri = &p->refs[i];
    if (ri->is_sem) {
      run->sems[i] = tsr_calloc(ri->elements ? ri->elements : 1, sizeof(int32_t));
      if (!run->sems[i]) return TSR_OOM();
      continue;
    }
    if (!ri->has_buffer) continue; /* hbm/any: set from the arrays below */
    run->refs[i].data = run->vmem + ri->offset;
    run->refs[i].shadow = ri->shadowed ? run->vmem_shadow + ri->offset : NULL;
    if (ri->role != TSR_ROLE_SCRATCH) continue;
    fill_uninit(run, (tsr_dtype_t)ri->dtype, run->refs[i].data, ri->elements);
    if (run->refs[i].shadow) memset(run->refs[i].shadow, 0, ri->elements);
  }
  for (uint32_t j = 0; j < nops; j++) {
    const operand_plan_t *op = &p->operands[j];
    const ref_info_t *ri = &p->refs[op->ref];
    if (op->role == TSR_ROLE_PREFETCH)
      memcpy(run->refs[op->ref].data, run->hbm[j],
             op->array_elements * tsr_dtype_size((tsr_dtype_t)ri->dtype));
  }
  /* This core's share of the grid (tsr_ir_core_split). */
  tsr_ir_core_share(&p->split, sh->cores, core, &run->share_lo, &run->share_hi);
  run->core_steps = p->split.points
                        ? p->total_steps / p->split.points * (run->share_hi - run->share_lo)
                        : 0;
  if (sh->race) {
    tsr_vc_initialize(&run->vc, sh->devices * sh->cores);
    if (!run->vc.c) return TSR_OOM();
  }
  run->phase = CORE_START;
  return NULL;
}

static tsr_status_t run_setup(shared_t *sh, tsr_array_t *const *operands) {
  const tsr_interp_program_t *p = sh->p;
  uint32_t nops = p->num_operands, D = sh->devices;
  sh->core = tsr_calloc((size_t)D * sh->cores, sizeof *sh->core);
  sh->hbm = tsr_calloc((size_t)D * nops + 1, sizeof *sh->hbm);
  sh->hbm_shadow = tsr_calloc((size_t)D * nops + 1, sizeof *sh->hbm_shadow);
  sh->visited = tsr_calloc((size_t)D * nops + 1, sizeof *sh->visited);
  sh->perm = tsr_calloc(p->grid_rank + 1, sizeof *sh->perm);
  sh->site_reported = tsr_calloc(p->num_sites + 1, 1);
  if (!sh->core || !sh->hbm || !sh->hbm_shadow || !sh->visited || !sh->perm ||
      !sh->site_reported)
    return TSR_OOM();
  /* HBM: inputs are the caller's arrays (one slice per device); outputs are
   * written in place; the output shadows come from core 0's run memory. */
  for (uint32_t j = 0; j < nops; j++) {
    TSR_RETURN_IF_ERROR(check_operand(p, j, D, operands[j]));
    const operand_plan_t *op = &p->operands[j];
    size_t slice = op->array_elements * tsr_dtype_size((tsr_dtype_t)p->refs[op->ref].dtype);
    for (uint32_t d = 0; d < D; d++)
      sh->hbm[d * nops + j] = (uint8_t *)operands[j]->data + d * slice;
  }
  for (uint32_t d = 0; d < D; d++)
    for (uint32_t c = 0; c < sh->cores; c++) TSR_RETURN_IF_ERROR(core_setup(sh, d, c));
  /* Output shadows live in each device's core-0 run memory. */
  for (uint32_t d = 0; d < D && p->options.check; d++) {
    run_memory_t *m = sh->core[d * sh->cores].memory;
    for (uint32_t j = 0; j < nops; j++) {
      const operand_plan_t *op = &p->operands[j];
      if (op->role != TSR_ROLE_OUT) continue;
      if (!m->hbm_shadow[j]) m->hbm_shadow[j] = tsr_malloc(op->array_elements + 1);
      if (!m->hbm_shadow[j])
        return TSR_OOM_BYTES(op->array_elements + 1, "the written-element map of output %%%s",
                             p->refs[op->ref].name);
      sh->hbm_shadow[d * nops + j] = m->hbm_shadow[j];
    }
  }
  /* Unwindowed (hbm/any) operands: the ref is the device's HBM array. */
  for (uint32_t c = 0; c < D * sh->cores; c++) {
    run_t *run = &sh->core[c];
    for (uint32_t j = 0; j < nops; j++) {
      const operand_plan_t *op = &p->operands[j];
      if (!op->hbm_direct) continue;
      run->refs[op->ref].data = run->hbm[j];
      run->refs[op->ref].shadow = op->role == TSR_ROLE_OUT ? run->hbm_shadow[j] : NULL;
    }
  }
  for (uint32_t d = 0; d < D; d++) {
    uint8_t **hbm = sh->hbm + (size_t)d * nops, **shadow = sh->hbm_shadow + (size_t)d * nops;
    for (uint32_t j = 0; j < nops; j++) {
      const operand_plan_t *op = &p->operands[j];
      if (op->role != TSR_ROLE_OUT) continue;
      const ref_info_t *ri = &p->refs[op->ref];
      size_t bytes = op->array_elements * tsr_dtype_size((tsr_dtype_t)ri->dtype);
      if (op->alias >= 0) {
        memcpy(hbm[j], hbm[op->alias], bytes);
        hbm[op->alias] = hbm[j]; /* shared HBM buffer */
      } else if (!p->options.check) {
        /* With checks on, never-written elements are found through the
         * shadow and filled at the end (check_outputs): no pass here. */
        fill_uninit(&sh->core[d * sh->cores], (tsr_dtype_t)ri->dtype, hbm[j],
                    op->array_elements);
      }
      if (shadow[j]) memset(shadow[j], op->alias >= 0 ? 1 : 0, op->array_elements);
    }
  }
  /* Shuffled parallel dims: one permutation per dim, from the seed. */
  if (p->options.shuffle_parallel) {
    uint64_t state = p->options.shuffle_seed;
    for (uint32_t d = 0; d < p->grid_rank; d++) {
      if (p->semantics[d] != TSR_DIM_PARALLEL) break;
      sh->perm[d] = tsr_malloc((size_t)p->grid[d] * sizeof(int64_t));
      if (!sh->perm[d]) return TSR_OOM();
      for (int64_t i = 0; i < p->grid[d]; i++) sh->perm[d][i] = i;
      for (int64_t i = p->grid[d] - 1; i > 0; i--) {
        int64_t k = (int64_t)(splitmix64(&state) % (uint64_t)(i + 1));
        int64_t t = sh->perm[d][i];
        sh->perm[d][i] = sh->perm[d][k];
        sh->perm[d][k] = t;
      }
    }
  }
  sh->schedule_state = p->options.schedule_seed;
  return NULL;
}

/* Warnings go to the warning stream when the run ends, as one write so that
 * concurrent runs do not interleave their lines. */
static void write_warnings(shared_t *sh) {
  tsr_diag_list_t *w = &sh->warnings;
  if (w->limit && w->count > w->limit)
    tsr_strbuf_printf(&w->text, "\nnote: %zu more warnings not shown",
                      w->count - w->limit);
  if (sh->warnings_suppressed)
    tsr_strbuf_printf(&w->text, "\nnote: %llu more occurrence%s of these warnings not shown",
                      (unsigned long long)sh->warnings_suppressed,
                      sh->warnings_suppressed == 1 ? "" : "s");
  tsr_strbuf_puts(&w->text, "\n");
  if (w->text.failed) return;
  FILE *f = sh->p->options.warning_stream ? sh->p->options.warning_stream : stderr;
  fwrite(w->text.data, 1, w->text.size, f);
  fflush(f);
}

/* End of the kernel: DMAs never waited for and semaphores left non-zero. */
static void check_end(shared_t *sh) {
  const tsr_interp_program_t *p = sh->p;
  for (uint32_t i = 0; i < sh->num_dmas; i++) {
    const dma_record_t *r = &sh->dmas[i];
    run_t *run = &sh->core[r->device * sh->cores + r->core];
    tsr_interp_kernel_error(run, r->site,
                 "DMA of %lld bytes to %%%s is still in flight at kernel end: it was "
                 "never waited for", (long long)r->bytes, r->dst_name);
  }
  for (uint32_t c = 0; c < sh->devices * sh->cores; c++) {
    run_t *run = &sh->core[c];
    for (uint32_t i = 0; i < p->num_refs; i++) {
      const ref_info_t *ri = &p->refs[i];
      if (!ri->is_sem) continue;
      for (uint64_t k = 0; k < ri->elements; k++) {
        if (!run->sems[i][k]) continue;
        sem_plan_t sp = {.ref = i};
        char name[160];
        sem_text(p, &sp, (int64_t)k, name, sizeof name);
        tsr_interp_kernel_error(run, ri->site,
                     "semaphore %s holds %d at kernel end: a signal or DMA was never "
                     "waited for", name, run->sems[i][k]);
        break;
      }
    }
  }
}

tsr_status_t tsr_interp_program_run(const tsr_interp_program_t *program,
                                    tsr_array_t *const *operands,
                                    size_t num_operands,
                                    tsr_interp_stats_t *out_stats) {
  const tsr_interp_program_t *p = program;
  if (num_operands != p->num_operands)
    return TSR_STATUS(TSR_INVALID_ARGUMENT,
                      "kernel @%s takes %u arrays (prefetch, in and out operands), "
                      "got %zu",
                      p->kernel_name, p->num_operands, num_operands);
  if ((uint64_t)(p->options.devices ? p->options.devices : 1) *
          (p->options.cores ? p->options.cores : 1) > TSR_INTERP_MAX_CORES)
    return TSR_STATUS(TSR_INVALID_ARGUMENT,
                      "at most %d simulated cores (devices x cores) per run", TSR_INTERP_MAX_CORES);
  shared_t sh;
  memset(&sh, 0, sizeof sh);
  sh.p = p;
  sh.devices = p->options.devices ? p->options.devices : 1;
  sh.cores = p->options.cores ? p->options.cores : 1;
  sh.out = p->options.print_stream ? p->options.print_stream : stderr;
  tsr_diag_list_initialize(&sh.diags, p->options.max_errors);
  tsr_diag_list_initialize(&sh.warnings, p->options.max_errors);
  sh.warnings.severity = "warning";
  sh.tracing = p->options.trace_path != NULL;
  if (p->options.detect_races) {
    sh.race = tsr_race_create();
    if (!sh.race) return TSR_OOM();
  }
  tsr_strbuf_initialize(&sh.trace);
  tsr_bounds_start(&sh.bounds, &p->options);
  tsr_status_t s = run_setup(&sh, operands);
  if (!s) run_all(&sh);
  bool trace_ok = s || !sh.tracing || write_trace(&sh);
  if (!s && !sh.aborted) check_end(&sh);
  if (!s && !sh.aborted && p->options.check)
    for (uint32_t d = 0; d < sh.devices; d++) check_outputs(&sh.core[d * sh.cores]);
  if (!s && sh.diags.count) {
    if (sh.suppressed)
      tsr_strbuf_printf(&sh.diags.text,
                        "\nnote: %llu more occurrence%s of these errors not shown",
                        (unsigned long long)sh.suppressed, sh.suppressed == 1 ? "" : "s");
    s = tsr_diag_list_to_status(&sh.diags, TSR_KERNEL_ERROR);
  }
  sh.stats.warnings = sh.warnings.count;
  if (sh.warnings.count) write_warnings(&sh);
  if (!s && !trace_ok)
    s = TSR_STATUS(TSR_IO_ERROR, "cannot write the trace to %s", p->options.trace_path);
  sh.stats.vmem_bytes = p->vmem_used;
  if (out_stats) *out_stats = sh.stats;
  shared_free(&sh);
  return s;
}
