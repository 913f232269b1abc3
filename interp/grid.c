/* The grid pipeline of one core (Pallas TPU semantics, docs/semantics.md):
 * its walk through its share of the grid, index maps, block copy-in when an
 * input's block index changes, copy-out when an output's next index differs
 * or at the last step, revisit and two-core detection, padded edge blocks,
 * and the end-of-run check of never-written output elements. */
#include <stdio.h>

#include "base/hashtable.h"
#include "interp/interp_internal.h"

/* ---- Blocks ---- */

/* A visited output block: its steps and the core that wrote it. */
typedef struct visit_rec {
  uint64_t first_step, last_step;
  uint32_t core; /* the core that wrote it */
  bool seen;     /* in a dense table: the block was visited */
} visit_rec_t;

typedef struct visit {
  int64_t key[TSR_MAX_RANK];
  visit_rec_t rec;
  UT_hash_handle hh;
} visit_t;

/* The visited blocks of one output on one device (run->visited[j]): a
 * table indexed by the block's row-major number when the array has at most
 * VISIT_DENSE_MAX blocks (a lookup is an index, no allocation per block:
 * the revisit check costs a grid step next to nothing), else a hash set
 * keyed by the block index. Both give the same answers. */
#define VISIT_DENSE_MAX ((uint64_t)1 << 20)
typedef struct visits {
  visit_t *set;       /* hash set, when dense is NULL */
  visit_rec_t *dense; /* one record per block of the array, or NULL */
  int64_t counts[TSR_MAX_RANK]; /* blocks per dim (block_in_range's limits) */
} visits_t;

/* Operand j's visited set on this device, made at its first use; NULL when
 * out of memory (the revisit check is then skipped, as before). */
static visits_t *visits_of(run_t *run, uint32_t j) {
  visits_t *vs = run->visited[j];
  if (vs) return vs;
  const operand_plan_t *op = &run->p->operands[j];
  vs = tsr_calloc(1, sizeof *vs);
  if (!vs) return NULL;
  uint64_t total = 1;
  for (uint32_t d = 0; d < op->array_rank; d++) {
    vs->counts[d] = op->element[d] ? op->padded_dims[d]
                                   : (op->array_dims[d] + op->block[d] - 1) / op->block[d];
    if (vs->counts[d] <= 0 || total > VISIT_DENSE_MAX) total = VISIT_DENSE_MAX + 1;
    else total *= (uint64_t)vs->counts[d];
  }
  if (total <= VISIT_DENSE_MAX) vs->dense = tsr_calloc(total, sizeof *vs->dense);
  run->visited[j] = vs;
  return vs;
}

/* Block b's record in the dense table (b in range: block_in_range). */
static visit_rec_t *dense_rec(const visits_t *vs, const operand_plan_t *op, const int64_t *b) {
  uint64_t at = 0;
  for (uint32_t d = 0; d < op->array_rank; d++) at = at * (uint64_t)vs->counts[d] + (uint64_t)b[d];
  return &vs->dense[at];
}

/* The record of block b (in range: block_in_range), or NULL if it was not
 * visited yet. */
static visit_rec_t *visit_find(visits_t *vs, const operand_plan_t *op, const int64_t *b) {
  if (vs->dense) {
    visit_rec_t *r = dense_rec(vs, op, b);
    return r->seen ? r : NULL;
  }
  int64_t key[TSR_MAX_RANK] = {0};
  for (uint32_t d = 0; d < op->array_rank; d++) key[d] = b[d];
  visit_t *v;
  HASH_FIND(hh, vs->set, key, sizeof key, v);
  return v ? &v->rec : NULL;
}

/* Records the first visit of block b (not visited yet). */
static void visit_add(visits_t *vs, const operand_plan_t *op, const int64_t *b,
                      uint64_t step, uint32_t core) {
  visit_rec_t rec = {step, step, core, true};
  if (vs->dense) {
    *dense_rec(vs, op, b) = rec;
    return;
  }
  visit_t *v = tsr_calloc(1, sizeof *v);
  if (!v) return;
  for (uint32_t d = 0; d < op->array_rank; d++) v->key[d] = b[d];
  v->rec = rec;
  HASH_ADD(hh, vs->set, key, sizeof v->key, v);
}

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
    run->vals[op->map_args[a]] = tsr_interp_own(run, op->map_args[a]);
    memcpy(run->vals[op->map_args[a]], &v, 4);
  }
  uint32_t pc = op->map_pc;
  tsr_interp_exec(run, &pc);
  for (uint32_t d = 0; d < op->array_rank; d++)
    out[d] = tsr_interp_read_i32(run, op->map_results[d]);
}

/* A blocked dim's index counts blocks; an element dim's is the element
 * offset of the block in the padded array, which it must start inside. */
static bool block_in_range(const operand_plan_t *op, const int64_t *b) {
  for (uint32_t d = 0; d < op->array_rank; d++) {
    if (b[d] < 0) return false;
    if (op->element[d] ? b[d] >= op->padded_dims[d] : b[d] * op->block[d] >= op->array_dims[d])
      return false;
  }
  return true;
}

/* The window of block b in the array: start and extent per dim, and where
 * it starts in the block (`at`: nonzero where an element dim's low padding
 * comes first); true if the block has no padding and is one contiguous run
 * of HBM. An extent may be 0 (an element window wholly in the padding). */
static bool block_window(const operand_plan_t *op, const int64_t *b, int64_t *start,
                         int64_t *extent, int64_t *at) {
  bool padded = false;
  for (uint32_t d = 0; d < op->array_rank; d++) {
    int64_t s = op->element[d] ? b[d] - op->pad_low[d] : b[d] * op->block[d];
    int64_t lo = TSR_MAX(s, 0), hi = TSR_MIN(s + op->block[d], op->array_dims[d]);
    start[d] = lo;
    at[d] = lo - s;
    extent[d] = TSR_MAX(hi - lo, 0);
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

static bool window_empty(const operand_plan_t *op, const int64_t *extent) {
  for (uint32_t d = 0; d < op->array_rank; d++)
    if (extent[d] == 0) return true;
  return false;
}

static int64_t window_offset(const operand_plan_t *op, const int64_t *start) {
  int64_t off = 0;
  for (uint32_t d = 0; d < op->array_rank; d++) off += start[d] * op->array_strides[d];
  return off;
}

/* An error; a warning for an input block under oob_reads_uninit, whose
 * elements then read as the uninitialized value (copy_in). */
static void report_block_range(run_t *run, uint32_t j, const int64_t *b, bool read_uninit) {
  const operand_plan_t *op = &run->p->operands[j];
  if (op->any_element) {
    /* element dims: offsets into the padded array */
    char bi[96], shape[96], padded[96];
    int64_t counts[TSR_MAX_RANK];
    for (uint32_t d = 0; d < op->array_rank; d++)
      counts[d] = op->element[d] ? op->padded_dims[d]
                                 : (op->array_dims[d] + op->block[d] - 1) / op->block[d];
    tsr_diag_format_dims(bi, sizeof bi, b, op->array_rank);
    tsr_diag_format_dims(shape, sizeof shape, op->array_dims, op->array_rank);
    tsr_diag_format_dims(padded, sizeof padded, counts, op->array_rank);
    tsr_interp_kernel_error(run, op->site, TSR_DIAG_OUT_OF_BOUNDS,
                 "index map gives block index %s, out of range for array shape %s "
                 "(an element dim's index is an element offset, below %s)",
                 bi, shape, padded);
    return;
  }
  char text[400];
  tsr_diag_format_block_range(text, sizeof text, op->array_rank, b, op->array_dims, op->block);
  if (read_uninit)
    tsr_interp_kernel_warning(run, op->site, TSR_DIAG_OUT_OF_BOUNDS,
                              "%s: the block reads as the uninitialized value", text);
  else
    tsr_interp_kernel_error(run, op->site, TSR_DIAG_OUT_OF_BOUNDS, "%s", text);
}

/* The padding of an element window (pl.Element), and under
 * out_blocks_copied_in that of every block: JAX pads the array with its own
 * uninitialized value (tsr_interp_fill_jax_uninit). */
static void fill_pad(run_t *run, const operand_plan_t *op, tsr_dtype_t dt, uint8_t *buf,
                     uint64_t n) {
  if (op->any_element || run->p->options.out_blocks_copied_in)
    tsr_interp_fill_jax_uninit(run, dt, buf, n);
  else
    tsr_interp_fill_uninit(run, dt, buf, n);
}

/* Copies the window (start, extent, at: block_window) of operand j's block
 * from HBM into `buf`, the block's dense copy, and with `shadow` the
 * array's written-element map into the block's; the padding (`padded`)
 * first gets fill_pad's value, and is unwritten. */
static void window_in(run_t *run, uint32_t j, uint8_t *buf, uint8_t *shadow,
                      const int64_t *start, const int64_t *extent, const int64_t *at,
                      bool padded) {
  const operand_plan_t *op = &run->p->operands[j];
  const ref_info_t *ri = &run->p->refs[op->ref];
  size_t es = tsr_dtype_size((tsr_dtype_t)ri->dtype);
  int64_t bstr[TSR_MAX_RANK];
  tsr_blockops_dense_strides(op->array_rank, op->block, bstr);
  if (padded) {
    fill_pad(run, op, (tsr_dtype_t)ri->dtype, buf, ri->elements);
    if (shadow) memset(shadow, 0, ri->elements);
  }
  int64_t into = 0, off = window_offset(op, start);
  for (uint32_t d = 0; d < op->array_rank; d++) into += at[d] * bstr[d];
  tsr_blockops_copy(es, op->array_rank, extent, buf + into * (int64_t)es, bstr,
                    run->hbm[j] + off * (int64_t)es, op->array_strides);
  if (shadow)
    tsr_blockops_copy(1, op->array_rank, extent, shadow + into, bstr, run->hbm_shadow[j] + off,
                      op->array_strides);
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
    tsr_interp_fill_uninit(run, (tsr_dtype_t)ri->dtype, own_buf, ri->elements);
    return;
  }
  int64_t start[TSR_MAX_RANK], extent[TSR_MAX_RANK], at[TSR_MAX_RANK];
  bool direct = block_window(op, b, start, extent, at);
  if (window_empty(op, extent)) { /* all padding */
    rr->data = own_buf;
    fill_pad(run, op, (tsr_dtype_t)ri->dtype, own_buf, ri->elements);
    return;
  }
  tsr_race_window(run, j, start, extent, false);
  uint8_t *src = run->hbm[j] + window_offset(op, start) * (int64_t)es;
  if (direct && !op->aliased && !ri->written) {
    /* zero-copy: the block is a contiguous window of HBM that nothing
     * writes. A block the kernel writes is the core's own copy, as in
     * Pallas: a later fetch reads HBM again, and each core has its own. */
    rr->data = src;
    return;
  }
  rr->data = own_buf;
  bool padded = false;
  for (uint32_t d = 0; d < op->array_rank; d++)
    if (extent[d] < op->block[d]) padded = true;
  window_in(run, j, own_buf, NULL, start, extent, at, padded);
}

/* out_blocks_copied_in: the output block starts as the array's window (its
 * values and which of them were written), its padding JAX's uninitialized
 * value. A block written in place already is that window. */
static void out_copy_in(run_t *run, uint32_t j) {
  const tsr_interp_program_t *p = run->p;
  const operand_plan_t *op = &p->operands[j];
  const ref_info_t *ri = &p->refs[op->ref];
  run_ref_t *rr = &run->refs[op->ref];
  uint8_t *own_buf = run->vmem + ri->offset;
  rr->pending_fill = false;
  if (rr->data != own_buf) return; /* in place */
  int64_t start[TSR_MAX_RANK], extent[TSR_MAX_RANK], at[TSR_MAX_RANK];
  bool padded = false;
  if (run->block_valid[j]) {
    block_window(op, &run->cur_block[j * TSR_MAX_RANK], start, extent, at);
    for (uint32_t d = 0; d < op->array_rank; d++)
      if (extent[d] < op->block[d]) padded = true;
  }
  if (rr->shadow && !run->hbm_shadow[j]) memset(rr->shadow, 1, ri->elements);
  uint8_t *shadow = run->hbm_shadow[j] ? rr->shadow : NULL;
  if (!run->block_valid[j] || window_empty(op, extent)) { /* none of the array */
    tsr_interp_fill_jax_uninit(run, (tsr_dtype_t)ri->dtype, own_buf, ri->elements);
    if (shadow) memset(shadow, 0, ri->elements);
    return;
  }
  run->sh->stats.blocks_copied_in++;
  run->sh->stats.bytes_copied += ri->elements * tsr_dtype_size((tsr_dtype_t)ri->dtype);
  tsr_race_window(run, j, start, extent, false);
  window_in(run, j, own_buf, shadow, start, extent, at, padded);
}

/* An output block of revisit mode any, entered: it holds the output array's
 * window as it is now (Mosaic copies the block in from HBM, docs/semantics.md
 * "Blocks and the pipeline"): the uninitialized value where no step has
 * written yet, the copies out of earlier visits elsewhere. The shadow of
 * written elements comes along, so reads of never-written elements are still
 * reported; the padding of an edge block holds the uninitialized value. */
static void restore_out_block(run_t *run, uint32_t j) {
  const tsr_interp_program_t *p = run->p;
  const operand_plan_t *op = &p->operands[j];
  const ref_info_t *ri = &p->refs[op->ref];
  run_ref_t *rr = &run->refs[op->ref];
  const int64_t *b = &run->cur_block[j * TSR_MAX_RANK];
  size_t es = tsr_dtype_size((tsr_dtype_t)ri->dtype);
  uint8_t *own_buf = run->vmem + ri->offset;
  rr->pending_fill = false;
  run->sh->stats.blocks_copied_in++;
  run->sh->stats.bytes_copied += ri->elements * es;
  int64_t start[TSR_MAX_RANK], extent[TSR_MAX_RANK], at[TSR_MAX_RANK];
  block_window(op, b, start, extent, at);
  bool empty = window_empty(op, extent);
  if (!empty) tsr_race_window(run, j, start, extent, false);
  if (rr->data != own_buf) return; /* in place: the array's window itself */
  /* the padding of an edge block holds no data: reading it is legitimate,
   * as an input's (its values must not matter), so it counts as written */
  tsr_interp_fill_uninit(run, (tsr_dtype_t)ri->dtype, own_buf, ri->elements);
  if (rr->shadow) memset(rr->shadow, 1, ri->elements);
  if (empty) return; /* all padding */
  int64_t bstr[TSR_MAX_RANK];
  tsr_blockops_dense_strides(op->array_rank, op->block, bstr);
  int64_t off = window_offset(op, start), into = 0;
  for (uint32_t d = 0; d < op->array_rank; d++) into += at[d] * bstr[d];
  tsr_blockops_copy(es, op->array_rank, extent, own_buf + into * (int64_t)es, bstr,
                    run->hbm[j] + off * (int64_t)es, op->array_strides);
  if (rr->shadow && run->hbm_shadow[j])
    tsr_blockops_copy(1, op->array_rank, extent, rr->shadow + into, bstr,
                      run->hbm_shadow[j] + off, op->array_strides);
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
    visits_t *vs = op->alias < 0 ? visits_of(run, j) : NULL;
    if (vs) {
      visit_rec_t *v = visit_find(vs, op, b);
      /* As a warning, two cores writing the block of an output written
       * along a split dim is what the run's parallel_revisit warning has
       * said already (tsr_grid_check_parallel_revisits): not said again. */
      if (v && v->core != run->core) {
        /* Both copies out reach HBM, in an order the TPU does not define: a
         * race, an error when races are looked for (--detect-races). */
        bool said = run->sh->race == NULL &&
                    tsr_ir_parallel_revisit_dim(p->grid_rank, run->sh->grid, p->semantics,
                                                op->fixed_dims) >= 0;
        if (!said) {
          char bi[96];
          tsr_diag_format_dims(bi, sizeof bi, b, op->array_rank);
          tsr_interp_kernel_report(
              run, op->site, TSR_DIAG_CORE_CONFLICT,
              run->sh->race != NULL ? TSR_DIAG_ERROR : TSR_DIAG_WARNING,
              "output block %s is written by core %u at step %llu and by core "
              "%u in steps %llu..%llu: the cores of a device must write "
              "disjoint output blocks (the last copy out wins)",
              bi, run->core, (unsigned long long)run->step, v->core,
              (unsigned long long)v->first_step, (unsigned long long)v->last_step);
        }
      } else if (v && !op->revisit_any) {
        char bi[96];
        tsr_diag_format_dims(bi, sizeof bi, b, op->array_rank);
        tsr_interp_kernel_error(run, op->site, TSR_DIAG_REVISIT,
                     "output block %s is revisited at step %llu; it was written in "
                     "steps %llu..%llu and already copied out (writes to an output "
                     "block must happen in consecutive grid steps)",
                     bi, (unsigned long long)run->step,
                     (unsigned long long)v->first_step,
                     (unsigned long long)v->last_step);
      } else if (!v) {
        visit_add(vs, op, b, run->step, run->core);
      }
    }
    int64_t start[TSR_MAX_RANK], extent[TSR_MAX_RANK], at[TSR_MAX_RANK];
    if (block_window(op, b, start, extent, at) && op->alias < 0) {
      int64_t off = window_offset(op, start);
      rr->data = run->hbm[j] + off * (int64_t)es;
      if (ri->shadowed) rr->shadow = run->hbm_shadow[j] + off;
    }
    if (op->revisit_any) {
      restore_out_block(run, j);
      return;
    }
  }
  if (p->options.out_blocks_copied_in) {
    out_copy_in(run, j);
    return;
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
  tsr_interp_materialize(run, op->ref);
  if (!run->block_valid[j]) return;
  run->sh->stats.blocks_copied_out++;
  run->sh->stats.bytes_copied += ri->elements * es;
  if (op->alias < 0 && run->visited[j]) {
    visit_rec_t *v = visit_find(run->visited[j], op, b);
    if (v) v->last_step = run->step;
  }
  uint8_t *own_buf = run->vmem + ri->offset;
  int64_t start[TSR_MAX_RANK], extent[TSR_MAX_RANK], at[TSR_MAX_RANK];
  block_window(op, b, start, extent, at);
  if (window_empty(op, extent)) return; /* all padding: nothing reaches HBM */
  tsr_race_window(run, j, start, extent, true);
  if (rr->data != own_buf) return; /* written in place */
  int64_t bstr[TSR_MAX_RANK];
  tsr_blockops_dense_strides(op->array_rank, op->block, bstr);
  int64_t off = window_offset(op, start), from = 0;
  for (uint32_t d = 0; d < op->array_rank; d++) from += at[d] * bstr[d];
  tsr_blockops_copy(es, op->array_rank, extent, run->hbm[j] + off * (int64_t)es,
                    op->array_strides, own_buf + from * (int64_t)es, bstr);
  if (ri->shadowed && rr->shadow)
    tsr_blockops_copy(1, op->array_rank, extent, run->hbm_shadow[j] + off,
                      op->array_strides, rr->shadow + from, bstr);
}

/* ---- Before the first step ---- */

void tsr_grid_check_parallel_revisits(shared_t *sh) {
  const tsr_interp_program_t *p = sh->p;
  int64_t first[TSR_MAX_RANK] = {0}; /* a step that writes the block */
  for (uint32_t j = 0; j < p->num_operands && !sh->aborted; j++) {
    const operand_plan_t *op = &p->operands[j];
    int32_t dim = tsr_ir_parallel_revisit_dim(p->grid_rank, sh->grid, p->semantics,
                                              op->fixed_dims);
    if (dim < 0) continue;
    const site_t *s = &p->sites[op->site];
    tsr_diag_where_t where = {op->site, s->loc, s->what, 0, 0, first, p->grid_rank, NULL};
    if (tsr_diag_parallel_revisit(&sh->diag, &where, (uint32_t)dim, p->semantics[dim],
                                  sh->grid[dim]))
      sh->aborted = true;
  }
}

/* ---- The end of the run ---- */

void tsr_grid_copy_out_landed(shared_t *sh) {
  const tsr_interp_program_t *p = sh->p;
  if (!sh->landed) return;
  for (uint32_t c = 0; c < sh->devices * sh->cores; c++)
    for (uint32_t j = 0; j < p->num_operands; j++)
      if (sh->landed[(size_t)c * p->num_operands + j]) copy_out(&sh->core[c], j);
}

void tsr_grid_check_outputs(run_t *run) {
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
    /* out_blocks_copied_in: they hold JAX's value since the start */
    const bool fill = !p->options.out_blocks_copied_in;
    for (uint64_t i = first; i < op->array_elements; i++) {
      if (s[i]) continue;
      missing++;
      if (fill) tsr_interp_fill_uninit(run, (tsr_dtype_t)ri->dtype, run->hbm[j] + i * es, 1);
    }
    if (missing) {
      int64_t idx[TSR_MAX_RANK];
      char at[96];
      tsr_interp_unflatten((int64_t)first, op->array_rank, op->array_dims, idx);
      tsr_diag_format_dims(at, sizeof at, idx, op->array_rank);
      tsr_interp_kernel_warning(run, op->site, TSR_DIAG_OUTPUT_UNWRITTEN,
                   "%llu of %llu output elements were never written (first at %s); "
                   "they hold the uninitialized value",
                   (unsigned long long)missing,
                   (unsigned long long)op->array_elements, at);
    }
  }
}


void tsr_grid_free_visits(run_t *run) {
  for (uint32_t j = 0; j < run->p->num_operands; j++) {
    visits_t *vs = run->visited[j];
    if (!vs) continue;
    visit_t *set = vs->set, *v, *tmp;
    HASH_ITER(hh, set, v, tmp) {
      HASH_DEL(set, v);
      tsr_free(v);
    }
    tsr_free(vs->dense);
    tsr_free(vs);
    run->visited[j] = NULL;
  }
}

bool tsr_grid_visits_dense(run_t *run) {
  for (uint32_t j = 0; j < run->p->num_operands; j++) {
    const operand_plan_t *op = &run->p->operands[j];
    if (op->role != TSR_ROLE_OUT || !op->blocked || op->alias >= 0) continue;
    const visits_t *vs = visits_of(run, j);
    if (!vs || !vs->dense) return false;
  }
  return true;
}

/* ---- One core's walk through its share of the grid ---- */



/* Writes `flat` row-major into loop[first..end). */
static void unflatten_dims(const shared_t *sh, uint64_t flat, uint32_t first,
                           uint32_t end, int64_t *loop) {
  for (uint32_t d = end; d-- > first;) {
    loop[d] = (int64_t)(flat % (uint64_t)sh->grid[d]);
    flat /= (uint64_t)sh->grid[d];
  }
}

/* Row-major counter -> grid point (with shuffled parallel dims). */
static void loop_to_point(run_t *run, const int64_t *loop, int64_t *point) {
  for (uint32_t d = 0; d < run->p->grid_rank; d++)
    point[d] = run->perm[d] ? run->perm[d][loop[d]] : loop[d];
}

/* Sets run->loop to this core's step `k`: the dims before the
 * split dims, then this core's split points, then the dims after them, each
 * row-major (tsr_ir_core_split). */
static void core_step_to_loop(run_t *run, uint64_t k) {
  const tsr_interp_program_t *p = run->p;
  uint32_t first = run->sh->split.first, end = run->sh->split.end;
  uint64_t inner = 1;
  for (uint32_t d = end; d < p->grid_rank; d++) inner *= (uint64_t)run->sh->grid[d];
  uint64_t chunk = (run->share_hi - run->share_lo) * inner;
  unflatten_dims(run->sh, k / chunk, 0, first, run->loop);
  unflatten_dims(run->sh, run->share_lo + k % chunk / inner, first, end, run->loop);
  unflatten_dims(run->sh, k % inner, end, p->grid_rank, run->loop);
}

/* Moves run->loop to this core's next step (core_step_to_loop of the next
 * k, without its divisions): the dims after the split count fastest, then
 * the split points, then the dims before the split. */
static void advance_loop(run_t *run) {
  const tsr_interp_program_t *p = run->p;
  uint32_t first = run->sh->split.first, end = run->sh->split.end;
  for (uint32_t d = p->grid_rank; d-- > end;) {
    if (++run->loop[d] < run->sh->grid[d]) return;
    run->loop[d] = 0;
  }
  uint64_t point = 0;
  for (uint32_t d = first; d < end; d++)
    point = point * (uint64_t)run->sh->grid[d] + (uint64_t)run->loop[d];
  if (++point < run->share_hi) {
    unflatten_dims(run->sh, point, first, end, run->loop);
    return;
  }
  unflatten_dims(run->sh, run->share_lo, first, end, run->loop);
  for (uint32_t d = first; d-- > 0;) {
    if (++run->loop[d] < run->sh->grid[d]) return;
    run->loop[d] = 0;
  }
}

/* The linear grid step of run->loop (row-major), for messages. */
static uint64_t loop_step(const run_t *run) {
  uint64_t step = 0;
  for (uint32_t d = 0; d < run->p->grid_rank; d++)
    step = step * (uint64_t)run->sh->grid[d] + (uint64_t)run->loop[d];
  return step;
}

/* Copies in changed inputs and starts changed outputs for run->step. */
static void begin_step(run_t *run) {
  const tsr_interp_program_t *p = run->p;
  run->sh->stats.grid_steps++;
  run->step_tick = run->sh->tick;
  if (p->options.on_grid_step)
    p->options.on_grid_step(p->options.on_grid_step_user, run->device, run->core, p->grid_rank,
                            run->point);
  for (uint32_t j = 0; j < p->num_operands; j++) {
    const operand_plan_t *op = &p->operands[j];
    if (!op->blocked) continue;
    int64_t *cur = &run->cur_block[j * TSR_MAX_RANK];
    int64_t *prev = &run->prev_block[j * TSR_MAX_RANK];
    if (run->core_step > 0 && memcmp(cur, prev, op->array_rank * sizeof *cur) == 0)
      continue;
    run->block_valid[j] = block_in_range(op, cur);
    if (!run->block_valid[j]) report_block_range(run, j, cur, op->role == TSR_ROLE_IN &&
                                                            p->options.oob_reads_uninit);
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
    tsr_diag_format_point(name + 5, sizeof name - 5, run->point, p->grid_rank);
    tsr_trace_event(run->sh, name, run->device, run->core, run->step_tick, run->sh->tick,
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
void tsr_grid_start_core(run_t *run) {
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
  if (!tsr_interp_take_step(run, p->grid_site)) return; /* the first grid step counts */
  begin_step(run);
  run->pc = p->body_pc;
  run->phase = CORE_BODY;
}

bool tsr_grid_run_core(run_t *run) {
  const tsr_interp_program_t *p = run->p;
  bool progress = false;
  while (!run->sh->aborted) {
    switch (run->phase) {
      case CORE_START:
        tsr_grid_start_core(run);
        progress = true;
        break;
      case CORE_STEP:
        if (run->core_step >= run->core_steps) {
          run->phase = CORE_DONE;
          return true;
        }
        if (!tsr_interp_take_step(run, p->grid_site)) return true;
        begin_step(run);
        run->pc = p->body_pc;
        run->phase = CORE_BODY;
        progress = true;
        break;
      case CORE_BODY: {
        /* A core that blocks where it blocked before has still moved if it
         * ran more than that one wait (a loop's next iteration blocks at the
         * same instruction): every instruction run is a tick. */
        uint32_t before = run->pc;
        uint64_t tick = run->sh->tick;
        bool finished = tsr_interp_exec(run, &run->pc);
        if (!finished) return progress || run->pc != before || run->sh->tick - tick > 1;
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
