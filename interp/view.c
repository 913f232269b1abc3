/* Views of refs at run time: resolving a load's, store's, slice's or DMA's
 * view with its bounds check, the uninitialized-read check through the
 * shadow bytes and its report, masked accesses whose window reaches outside
 * the ref, and the written marks of stores and DMAs. The instructions that
 * use them are in exec.c. Semantics: docs/semantics.md, "Memory". */
#include <stdio.h>

#include "interp/interp_internal.h"

/* ---- Views ---- */

void tsr_interp_fill_uninit(const run_t *run, tsr_dtype_t dtype, void *dst, uint64_t n) {
  unsigned char elem[8];
  tsr_blockops_uninit_value(dtype, run->p->options.uninit, elem);
  tsr_blockops_fill(tsr_dtype_size(dtype), dst, elem, n);
}

void tsr_interp_fill_jax_uninit(const run_t *run, tsr_dtype_t dtype, void *dst, uint64_t n) {
  unsigned char elem[8];
  tsr_blockops_jax_uninit_value(dtype, run->p->options.uninit, elem);
  tsr_blockops_fill(tsr_dtype_size(dtype), dst, elem, n);
}

/* Returns the flat position (in view order) of the first 0 byte of the view's
 * shadow, or -1 when every element was written. */
int64_t tsr_view_first_unwritten(const view_t *v) {
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

/* The ref index of element `flat` of view v. */
static void view_ref_index(const view_t *v, const int64_t *ref_origin, uint32_t ref_rank,
                           const int64_t *ref_step, int64_t flat, int64_t *ridx) {
  int64_t vidx[TSR_MAX_RANK];
  tsr_interp_unflatten(flat, v->rank, v->dims, vidx);
  for (uint32_t d = 0; d < ref_rank; d++) ridx[d] = ref_origin[d];
  for (uint32_t i = 0; i < v->rank; i++) {
    uint32_t d = v->ref_dim_of[i];
    ridx[d] += vidx[i] * ref_step[d];
  }
}

/* The start of index d of a view plan at run time. */
static int64_t index_start(const run_t *run, const view_index_t *ix) {
  return ix->value != NO_VALUE ? tsr_interp_read_i32(run, ix->value) : ix->start;
}

/* "%name" or "%name (the DMA's source)". */
static void view_what(const run_t *run, const char *ref_name, char *buf, size_t size) {
  if (run->view_side)
    snprintf(buf, size, "%%%s (the DMA's %s)", ref_name, run->view_side);
  else
    snprintf(buf, size, "%%%s", ref_name);
}

/* Reports index d of the view out of bounds (of `limit` when it is not the
 * ref's shape: the padded one). */
static void report_out_of_bounds(run_t *run, const insn_t *in, const view_plan_t *vp,
                                 const char *ref_name, uint32_t d, const int64_t *limit) {
  const view_index_t *ix = &vp->idx[d];
  /* the record: the whole index range asked for */
  tsr_diag_detail_t detail = {.buffer = ref_name, .index_rank = vp->rank};
  for (uint32_t k = 0; k < vp->rank; k++) {
    const view_index_t *x = &vp->idx[k];
    int64_t lo = index_start(run, x);
    detail.index_lo[k] = lo;
    detail.index_hi[k] = lo + (x->size - 1) * x->stride + 1;
  }
  char text[400];
  if (ref_name) {
    tsr_diag_format_out_of_bounds(text, sizeof text, ref_name, run->view_side, vp->rank,
                                  vp->dims, limit, d, ix->kind == TSR_INDEX_POINT,
                                  index_start(run, ix), ix->size, ix->stride);
  } else { /* a value's slice (verified: not reached) */
    char shape[96];
    tsr_diag_format_dims(shape, sizeof shape, vp->dims, vp->rank);
    snprintf(text, sizeof text, "slice out of bounds for dimension %u of the value (shape %s)",
             d, shape);
  }
  tsr_interp_kernel_report_detail(run, in->site, &detail, TSR_DIAG_OUT_OF_BOUNDS,
                                  TSR_DIAG_ERROR, "%s", text);
}

bool tsr_view_resolve(run_t *run, const insn_t *in, const view_plan_t *vp,
                      const char *ref_name, uint8_t *data, uint8_t *shadow, size_t elem_size,
                      view_t *out, int64_t *origin, int64_t *step, bool quiet) {
  const int64_t *strides = vp->strides;
  int64_t offset = 0;
  out->rank = 0;
  for (uint32_t d = 0; d < vp->rank; d++) {
    const view_index_t *ix = &vp->idx[d];
    int64_t start = index_start(run, ix);
    int64_t last = start + (ix->size - 1) * ix->stride;
    /* A DMA view of dynamic size (its size already read into the plan,
     * tsr_dma_sizes) may be empty: its start then lies in [0, dim]. */
    bool empty_ok = ix->kind == TSR_INDEX_DSIZE && ix->size == 0 && start <= vp->dims[d];
    if (start < 0 || (!empty_ok && (last >= vp->dims[d] || ix->size < 1))) {
      if (!quiet) report_out_of_bounds(run, in, vp, ref_name, d, NULL);
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

/* ---- Accesses reaching outside their ref ---- */

void tsr_interp_padded_dims(const char *chip, tsr_dtype_t dtype, uint32_t rank,
                            const int64_t *dims, int64_t *out) {
  tsr_padded_dims(tsr_chip_doubles_tile_rows(chip), dtype, rank, dims, out);
}

bool tsr_view_clip(run_t *run, const insn_t *in, const view_plan_t *vp, const ref_info_t *ri,
                   uint8_t *data, uint8_t *shadow, bool write, view_clip_t *c) {
  /* A read may reach anywhere with oob_reads_uninit; else an access may
   * reach as far as the ref's limit (its padding). */
  const bool anywhere = !write && run->p->options.oob_reads_uninit;
  size_t es = tsr_dtype_size((tsr_dtype_t)ri->dtype);
  int64_t offset = 0;
  c->empty = false;
  c->in.rank = 0;
  for (uint32_t d = 0; d < vp->rank; d++) {
    const view_index_t *ix = &vp->idx[d];
    int64_t start = index_start(run, ix), size = ix->size, st = ix->stride;
    int64_t last = start + (size - 1) * st;
    if (size < 1 || (!anywhere && (start < 0 || last >= ri->limit[d]))) {
      report_out_of_bounds(run, in, vp, ri->name, d, ri->limit);
      return false;
    }
    /* lanes [lo, hi) of this index are inside the ref */
    int64_t lo = start >= 0 ? 0 : (-start + st - 1) / st;
    int64_t hi = last < vp->dims[d] ? size
                 : vp->dims[d] - 1 - start < 0 ? 0
                                               : (vp->dims[d] - 1 - start) / st + 1;
    if (hi > size) hi = size;
    if (hi <= lo) c->empty = true;
    offset += (start + lo * st) * vp->strides[d];
    if (ix->kind != TSR_INDEX_POINT) {
      uint32_t k = c->in.rank++;
      c->lo[k] = lo;
      c->full[k] = size;
      c->in.dims[k] = hi > lo ? hi - lo : 0;
      c->in.strides[k] = vp->strides[d] * st;
      c->in.ref_dim_of[k] = d;
    }
  }
  c->in.base = c->empty ? data : data + offset * (int64_t)es;
  c->in.shadow = shadow && !c->empty ? shadow + offset : NULL;
  char what[96], shape[96], limit[96];
  view_what(run, ri->name, what, sizeof what);
  tsr_diag_format_dims(shape, sizeof shape, vp->dims, vp->rank);
  tsr_diag_format_dims(limit, sizeof limit, ri->limit, vp->rank);
  /* A warning: the run's options make it legal, as JAX's interpret mode
   * takes it; on a TPU it reads or writes whatever memory lies there. */
  if (write)
    tsr_interp_kernel_warning(run, in->site, TSR_DIAG_OUT_OF_BOUNDS,
                              "write reaches outside %s (shape %s) into its padding (to %s): "
                              "the elements outside are dropped",
                              what, shape, limit);
  else
    tsr_interp_kernel_warning(run, in->site, TSR_DIAG_OUT_OF_BOUNDS,
                              "read reaches outside %s (shape %s): the elements outside give "
                              "the uninitialized value",
                              what, shape);
  return true;
}

/* The unwritten element ridx of ri (ri->rank indices). */
static void report_unwritten_at(run_t *run, const insn_t *in, const ref_info_t *ri,
                                const int64_t *ridx) {
  char at[128], shape[96];
  tsr_diag_format_dims(at, sizeof at, ridx, ri->rank);
  tsr_diag_format_dims(shape, sizeof shape, ri->dims, ri->rank);
  tsr_diag_detail_t detail = tsr_diag_detail_element(ri->name, ri->rank, ridx);
  /* A warning: a TPU reads whatever the memory holds, and the read is a bug
   * only if that value reaches a result (docs/semantics.md, "Memory"). */
  tsr_interp_kernel_report_detail(run, in->site, &detail, TSR_DIAG_UNINITIALIZED,
                                  TSR_DIAG_WARNING,
                                  "read of uninitialized memory: %%%s%s (shape %s) was never "
                                  "written%s; it holds the uninitialized value",
                                  ri->name, at, shape,
                                  ri->role != TSR_ROLE_OUT ? ""
                                  : run->p->options.out_blocks_copied_in
                                      ? " in this output block nor in its array before"
                                      : " in this output block");
}

void tsr_view_report_unwritten(run_t *run, const insn_t *in, const ref_info_t *ri,
                               const view_t *v, const int64_t *origin, const int64_t *step,
                               int64_t flat) {
  int64_t ridx[TSR_MAX_RANK];
  view_ref_index(v, origin, ri->rank, step, flat, ridx);
  report_unwritten_at(run, in, ri, ridx);
}

/* ---- Loads and stores: checks ---- */

/* Resolves the view of a load/store, quietly: a view outside the ref is
 * for tsr_view_masked_outside (masked) or tsr_view_clip to judge. */
bool tsr_view_access(run_t *run, const insn_t *in, ref_access_t *a) {
  const view_plan_t *vp = in->plan;
  a->ref = vp->ref;
  a->ri = &run->p->refs[vp->ref];
  a->rr = &run->refs[vp->ref];
  a->es = tsr_dtype_size((tsr_dtype_t)a->ri->dtype);
  return tsr_view_resolve(run, in, vp, a->ri->name, a->rr->data, a->rr->shadow, a->es,
                        &a->v, a->origin, a->step, true);
}

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
    w->origin[d] = ix->value != NO_VALUE ? tsr_interp_read_i32(run, ix->value) : ix->start;
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

/* Whether ref index ridx is within `limit` (the padded shape). */
static bool lane_within(const view_plan_t *vp, const int64_t *limit, const int64_t *ridx) {
  for (uint32_t d = 0; d < vp->rank; d++)
    if (ridx[d] < 0 || ridx[d] >= limit[d]) return false;
  return true;
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
void tsr_view_masked_outside(run_t *run, const insn_t *in, const ref_access_t *a, bool store,
                             uint8_t *value) {
  const view_plan_t *vp = in->plan;
  const uint8_t *mask = run->vals[vp->mask];
  const ref_info_t *ri = a->ri;
  lane_window_t w;
  lane_window(run, vp, &w);
  int64_t vidx[TSR_MAX_RANK] = {0}, ridx[TSR_MAX_RANK];
  for (int64_t i = 0; i < w.count; i++, lane_next(&w, vidx)) {
    if (!mask[i] || lane_index(vp, &w, vidx, ridx)) continue;
    /* outside the ref: legal into its padding, and for reads anywhere with
     * oob_reads_uninit (the lane is then skipped below) */
    if ((!store && run->p->options.oob_reads_uninit) || lane_within(vp, ri->limit, ridx))
      continue;
    char at[128], shape[96];
    tsr_diag_format_dims(at, sizeof at, ridx, vp->rank);
    tsr_diag_format_dims(shape, sizeof shape, vp->dims, vp->rank);
    tsr_diag_detail_t detail = tsr_diag_detail_element(ri->name, vp->rank, ridx);
    tsr_interp_kernel_report_detail(run, in->site, &detail, TSR_DIAG_OUT_OF_BOUNDS,
                                    TSR_DIAG_ERROR,
                                    "element %s of %%%s (shape %s) is out of bounds and its "
                                    "mask lane is on",
                                    at, ri->name, shape);
    if (!store) tsr_interp_fill_uninit(run, (tsr_dtype_t)ri->dtype, value, (uint64_t)in->n);
    return;
  }
  tsr_race_ref_access(run, in->site, vp, w.origin, w.step, store);
  if (store) tsr_interp_materialize(run, vp->ref);
  unsigned char uninit[8];
  tsr_blockops_uninit_value((tsr_dtype_t)ri->dtype, run->p->options.uninit, uninit);
  memset(vidx, 0, sizeof vidx);
  for (int64_t i = 0; i < w.count; i++, lane_next(&w, vidx)) {
    uint8_t *lane = value + (store && vp->value_scalar ? 0 : i * (int64_t)a->es);
    if (!mask[i]) {
      if (!store) memcpy(lane, uninit, a->es);
      continue;
    }
    if (!lane_index(vp, &w, vidx, ridx)) { /* tolerated above: dropped or uninitialized */
      if (!store) memcpy(lane, uninit, a->es);
      continue;
    }
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
    if (shadow && !*shadow) report_unwritten_at(run, in, ri, ridx);
  }
}

void tsr_view_mark_written(uint32_t rank, const int64_t *dims, uint8_t *shadow,
                           const int64_t *strides) {
  static const uint8_t one_byte = 1;
  int64_t zero[TSR_MAX_RANK] = {0};
  tsr_blockops_copy(1, rank, dims, shadow, strides, &one_byte, zero);
}

/* Gives the never-written elements of a DMA source view the uninitialized
 * value: an HBM output is not filled before a checked run
 * (tsr_grid_check_outputs fills what stays unwritten at the end), so a DMA
 * reading it early must not copy the caller's stale data. */
void tsr_view_fill_unwritten(const run_t *run, tsr_dtype_t dtype, const view_t *v) {
  size_t es = tsr_dtype_size(dtype);
  view_walk_t w = {{0}};
  for (int64_t i = 0, n = tsr_view_count(v); i < n; i++, tsr_view_walk_next(v, &w)) {
    int64_t off = tsr_view_walk_offset(v, &w);
    if (!v->shadow[off]) tsr_interp_fill_uninit(run, dtype, v->base + off * (int64_t)es, 1);
  }
}
