/* Running a prepared program: the entry point, which checks the caller's
 * arrays, sets up the shared state and every core's memories (HBM slices,
 * VMEM, shadows, semaphores, the grid's shuffles), hands the cores to the
 * scheduler and turns the diagnostics into the run's status.
 * Semantics: docs/semantics.md. */
#if defined(__linux__)
#define _DEFAULT_SOURCE /* madvise(MADV_HUGEPAGE) */
#include <sys/mman.h>
#endif
#include <stdio.h>

#include "base/pool.h"
#include "interp/interp_internal.h"

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
  tsr_diag_format_dims(want, sizeof want, want_dims + (lead ? 0 : 0), want_rank);
  if (!lead) tsr_diag_format_dims(want, sizeof want, op->array_dims, op->array_rank);
  if (a) tsr_diag_format_dims(got, sizeof got, a->dims, a->rank);
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

/* The value frame. When it held one buffer per value, a long straight-line
 * kernel had a large one (6,484 ops on (8,128) blocks: 22.5 MiB) and its
 * first run took a page fault per 4 KiB touched (7,671 faults, 22.7 ms of
 * system time in a 39.5 ms process). Frames of 2 MiB or more are 2 MiB-aligned
 * and advised as transparent huge pages where Linux offers them, which halved
 * that run (22.4 -> 10.6 ms; small blocks in docs/benchmarks.md); the advice only
 * changes how the kernel backs the memory. Values now share buffers when their
 * lives do not overlap (prepare.c), so such frames are rare (that kernel's is
 * 65 KiB now); large live blocks still make one. */
static uint8_t *frame_alloc(uint64_t bytes) {
  const uint64_t huge = (uint64_t)2 << 20;
  if (bytes < huge) return tsr_aligned_alloc(64, bytes + 64);
  uint8_t *frame = tsr_aligned_alloc(huge, bytes + 64);
#if defined(MADV_HUGEPAGE)
  if (frame) (void)madvise(frame, (bytes + 64) & ~(huge - 1), MADV_HUGEPAGE);
#endif
  return frame;
}

/* The program's spare run memory, or a new one. Contents are garbage. Every
 * core has one; the output shadows (hbm_shadow) are used from each device's
 * core 0 only, and allocated on demand. */
static run_memory_t *run_memory_take(const tsr_interp_program_t *p) {
  tsr_interp_program_t *mp = (tsr_interp_program_t *)p;
  for (uint32_t i = 0; i < TSR_INTERP_SPARES; i++) {
    if (!atomic_load_explicit(&mp->spare[i], memory_order_relaxed)) continue;
    run_memory_t *m = atomic_exchange(&mp->spare[i], NULL);
    if (m) return m;
  }
  run_memory_t *m = tsr_calloc(1, sizeof *m);
  if (!m) return NULL;
  m->frame = frame_alloc(p->frame_bytes);
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

void tsr_interp_free_spares(tsr_interp_program_t *p) {
  for (uint32_t i = 0; i < TSR_INTERP_SPARES; i++)
    run_memory_free(atomic_exchange(&p->spare[i], NULL), p->num_operands);
}

static void core_free(run_t *run) {
  const tsr_interp_program_t *p = run->p;
  if (run->visited && run->core == 0) tsr_grid_free_visits(run);
  if (run->memory) {
    /* Keep the memory for the next run, in a free slot if there is one. */
    tsr_interp_program_t *mp = (tsr_interp_program_t *)p;
    for (uint32_t i = 0; i < TSR_INTERP_SPARES && run->memory; i++) {
      run_memory_t *expected = NULL;
      if (atomic_compare_exchange_strong(&mp->spare[i], &expected, run->memory))
        run->memory = NULL;
    }
    run_memory_free(run->memory, p->num_operands);
    run->memory = NULL;
  }
  if (run->sems)
    for (uint32_t i = 0; i < p->num_refs; i++)
      if (!tsr_interp_sem_shared(p, i)) tsr_free(run->sems[i]);
  tsr_free(run->sems);
  tsr_vc_free(&run->vc);
  tsr_free(run->cur_block);
  tsr_free(run->prev_block);
  tsr_free(run->block_valid);
  tsr_free(run->refs);
  tsr_free(run->vals);
  tsr_free(run->wide_entries);
  tsr_free(run->wide_cur);
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
  tsr_dma_wide_free_all(sh);
  tsr_free(sh->landed);
  tsr_race_destroy(sh->race);
  tsr_strbuf_deinitialize(&sh->trace);
  tsr_diag_sink_deinitialize(&sh->diag);
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
  run->wide_entries = tsr_calloc(p->num_wide + 1, sizeof *run->wide_entries);
  run->wide_cur = tsr_calloc(p->num_wide + 1, sizeof *run->wide_cur);
  if (!run->vals || !run->refs || !run->sems || !run->cur_block || !run->prev_block ||
      !run->block_valid || !run->wide_entries || !run->wide_cur)
    return TSR_OOM();
  run->hbm = sh->hbm + (size_t)device * nops;
  run->hbm_shadow = sh->hbm_shadow + (size_t)device * nops;
  run->visited = sh->visited + (size_t)device * nops;
  run->perm = sh->perm;
  /* Values start at their own buffers; consts are filled once. */
  for (uint32_t i = 0; i < p->num_values; i++) run->vals[i] = tsr_interp_own(run, i);
  for (uint32_t i = 0; i < p->num_consts; i++) {
    uint32_t id = p->const_values[i];
    const value_info_t *vi = &p->values[id];
    size_t es = tsr_dtype_size((tsr_dtype_t)vi->dtype);
    unsigned char elem[8];
    tsr_blockops_literal((tsr_dtype_t)vi->dtype, p->const_literals[i], elem);
    tsr_blockops_fill(es, tsr_interp_own(run, id), elem, vi->bytes / es);
  }
  /* Refs: own buffers. Scratch starts uninitialized with a clear shadow;
   * block buffers are set up by the pipeline, scoped ones at scope entry;
   * semaphores start at 0. */
  for (uint32_t i = 0; i < p->num_refs; i++) {
    const ref_info_t *ri = &p->refs[i];
    if (ri->is_sem) {
      const operand_plan_t *op = ri->operand >= 0 ? &p->operands[ri->operand] : NULL;
      if (tsr_interp_sem_shared(p, i)) {
        /* an output aliasing a semaphore input: the same semaphores */
        run->sems[i] = run->sems[p->operands[op->alias].ref];
        continue;
      }
      run->sems[i] = tsr_calloc(ri->elements ? ri->elements : 1, sizeof(int32_t));
      if (!run->sems[i]) return TSR_OOM();
      /* A semaphore input's counts start on core 0 (docs/semantics.md,
       * "Semaphores between kernels"). */
      if (op && op->role == TSR_ROLE_IN && core == 0)
        memcpy(run->sems[i], run->hbm[ri->operand], ri->elements * sizeof(int32_t));
      continue;
    }
    if (!ri->has_buffer) continue; /* hbm/any: set from the arrays below */
    run->refs[i].data = run->vmem + ri->offset;
    run->refs[i].shadow = ri->shadowed ? run->vmem_shadow + ri->offset : NULL;
    if (ri->role != TSR_ROLE_SCRATCH) continue;
    tsr_interp_fill_uninit(run, (tsr_dtype_t)ri->dtype, run->refs[i].data, ri->elements);
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
  tsr_ir_core_share(&sh->split, sh->cores, core, &run->share_lo, &run->share_hi);
  run->core_steps = sh->split.points
                        ? sh->total_steps / sh->split.points * (run->share_hi - run->share_lo)
                        : 0;
  if (sh->race) {
    tsr_vc_initialize(&run->vc, sh->devices * sh->cores);
    if (!run->vc.c) return TSR_OOM();
  }
  run->phase = CORE_START;
  return NULL;
}

/* The run's grid: dynamic extents are their prefetch operands' values now
 * (every device's the same: one grid per pallas_call). A negative extent is
 * the kernel's error; zero runs no step. */
static tsr_status_t read_grid(shared_t *sh, tsr_array_t *const *operands) {
  const tsr_interp_program_t *p = sh->p;
  sh->total_steps = 1;
  for (uint32_t d = 0; d < p->grid_rank; d++) {
    sh->grid[d] = p->grid[d];
    if (p->grid_bound[d]) {
      uint32_t j = p->grid_bound[d] - 1;
      const tsr_array_t *a = operands[j];
      if (!a || !a->data || a->dtype != TSR_DTYPE_I32)
        return TSR_STATUS(TSR_INVALID_ARGUMENT,
                          "kernel @%s: operand %u (grid dim %u's extent) is not an i32 array",
                          p->kernel_name, j, d);
      int32_t first = ((const int32_t *)a->data)[0];
      const tsr_loc_t loc = {p->file, p->loc.line, p->loc.col};
      for (uint32_t dev = 1; dev < sh->devices; dev++)
        if (((const int32_t *)a->data)[dev] != first)
          return TSR_STATUS_AT(TSR_UNIMPLEMENTED, loc,
                               "kernel @%s: grid dim %u's extent differs between devices "
                               "(%d on device 0, %d on device %u); not implemented",
                               p->kernel_name, d, first,
                            ((const int32_t *)a->data)[dev], dev);
      if (first < 0)
        return TSR_STATUS_AT(TSR_KERNEL_ERROR, loc,
                             "kernel @%s: grid dim %u's extent (%%%s) is %d; a grid extent "
                             "must be >= 0",
                             p->kernel_name, d,
                          p->refs[p->operands[j].ref].name, first);
      sh->grid[d] = first;
    }
    sh->total_steps *= (uint64_t)sh->grid[d];
  }
  int64_t steps = 1;
  for (uint32_t d = 0; d < p->grid_rank; d++)
    if (!tsr_mul_i64(steps, sh->grid[d], &steps)) {
      const tsr_loc_t loc = {p->file, p->loc.line, p->loc.col};
      return TSR_STATUS_AT(TSR_KERNEL_ERROR, loc,
                           "kernel @%s: the grid's dynamic extents make more than 2^63 steps",
                           p->kernel_name);
    }
  sh->split = tsr_ir_core_split(p->grid_rank, sh->grid, p->semantics);
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
  sh->wide = tsr_calloc((size_t)D * p->num_wide + 1, sizeof *sh->wide);
  if (!sh->core || !sh->hbm || !sh->hbm_shadow || !sh->visited || !sh->perm || !sh->wide)
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
  TSR_RETURN_IF_ERROR(read_grid(sh, operands));
  /* A semaphore input's counts: a semaphore never holds less than 0. */
  for (uint32_t j = 0; j < nops; j++) {
    const operand_plan_t *op = &p->operands[j];
    if (!op->sem || op->role != TSR_ROLE_IN) continue;
    const int32_t *counts = operands[j]->data;
    for (uint64_t e = 0; e < (uint64_t)D * op->array_elements; e++)
      if (counts[e] < 0)
        return TSR_STATUS(TSR_INVALID_ARGUMENT,
                          "kernel @%s operand %%%s: a semaphore's count is %d (element %llu); "
                          "a semaphore input holds counts >= 0 (a previous kernel's output)",
                          p->kernel_name, p->refs[op->ref].name, counts[e],
                          (unsigned long long)e);
  }
  for (uint32_t d = 0; d < D; d++)
    for (uint32_t c = 0; c < sh->cores; c++) TSR_RETURN_IF_ERROR(core_setup(sh, d, c));
  /* Output shadows live in each device's core-0 run memory. */
  for (uint32_t d = 0; d < D && p->options.check; d++) {
    run_memory_t *m = sh->core[d * sh->cores].memory;
    for (uint32_t j = 0; j < nops; j++) {
      const operand_plan_t *op = &p->operands[j];
      if (op->role != TSR_ROLE_OUT || op->sem) continue;
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
      } else if (p->options.out_blocks_copied_in && !op->sem) {
        /* Blocks are copied in from the array: it starts holding JAX's
         * uninitialized value, as in JAX's generic interpreter. */
        tsr_interp_fill_jax_uninit(&sh->core[d * sh->cores], (tsr_dtype_t)ri->dtype, hbm[j],
                                   op->array_elements);
      } else if ((!p->options.check || op->revisit_any) && !op->sem) {
        /* With checks on, never-written elements are found through the shadow
         * and filled at the end (tsr_grid_check_outputs): no pass here; but
         * the blocks of a revisit-any output are copied in from the array,
         * whose elements must then hold the uninitialized value. */
        tsr_interp_fill_uninit(&sh->core[d * sh->cores], (tsr_dtype_t)ri->dtype, hbm[j],
                    op->array_elements);
      }
      if (shadow[j]) memset(shadow[j], op->alias >= 0 ? 1 : 0, op->array_elements);
    }
  }
  /* Shuffled parallel dims: one permutation per dim (tsr_interp_parallel_order). */
  if (p->options.shuffle_parallel || p->options.parallel_order) {
    int64_t *order = NULL;
    uint64_t size = 0;
    TSR_RETURN_IF_ERROR(tsr_interp_parallel_order(&p->options, p->kernel_name, p->grid_rank,
                                                  sh->grid, p->semantics, &order, &size));
    uint64_t offset = 0;
    tsr_status_t s = NULL;
    for (uint32_t d = 0; d < p->grid_rank && p->semantics[d] == TSR_DIM_PARALLEL && !s; d++) {
      sh->perm[d] = tsr_malloc((size_t)sh->grid[d] * sizeof(int64_t) + 1);
      if (!sh->perm[d]) {
        s = TSR_OOM();
        break;
      }
      memcpy(sh->perm[d], order + offset, (size_t)sh->grid[d] * sizeof(int64_t));
      offset += (uint64_t)sh->grid[d];
    }
    tsr_free(order);
    if (s) return s;
  }
  sh->schedule_state = p->options.schedule_seed;
  return NULL;
}

tsr_status_t tsr_interp_parallel_order(const tsr_interp_options_t *options,
                                       const char *kernel_name, uint32_t grid_rank,
                                       const int64_t *grid, const uint8_t *semantics,
                                       int64_t **out_order, uint64_t *out_size) {
  uint64_t size = 0;
  for (uint32_t d = 0; d < grid_rank && semantics[d] == TSR_DIM_PARALLEL; d++)
    size += (uint64_t)(grid[d] > 0 ? grid[d] : 0);
  /* One entry more, zero: compiled code may read one past a dim of no
   * points (lower/emit_grid.c) without using it. */
  int64_t *order = tsr_calloc((size_t)size + 1, sizeof *order);
  if (!order) return TSR_OOM();
  if (options->parallel_order) {
    const char *why = "";
    if (!tsr_ir_parallel_order_check(grid_rank, grid, semantics, options->parallel_order,
                                     options->parallel_order_size, &why)) {
      tsr_free(order);
      return TSR_STATUS(TSR_INVALID_ARGUMENT, "kernel @%s: parallel_order (%u entries): %s",
                        kernel_name, options->parallel_order_size, why);
    }
    memcpy(order, options->parallel_order, (size_t)size * sizeof *order);
  } else {
    /* Identity, or a Fisher-Yates shuffle of each dim from the seed (one
     * generator over the dims in turn). */
    uint64_t state = options->shuffle_seed, offset = 0;
    for (uint32_t d = 0; d < grid_rank && semantics[d] == TSR_DIM_PARALLEL; d++) {
      int64_t n = grid[d] > 0 ? grid[d] : 0, *perm = order + offset;
      for (int64_t i = 0; i < n; i++) perm[i] = i;
      for (int64_t i = n - 1; i > 0 && options->shuffle_parallel; i--) {
        int64_t k = (int64_t)(tsr_interp_splitmix64(&state) % (uint64_t)(i + 1));
        int64_t t = perm[i];
        perm[i] = perm[k];
        perm[k] = t;
      }
      offset += (uint64_t)n;
    }
  }
  *out_order = order;
  *out_size = size;
  return NULL;
}

void tsr_interp_run_options_of(const tsr_interp_options_t *options,
                               tsr_interp_run_options_t *out) {
  *out = (tsr_interp_run_options_t){
      .strict = options->strict,
      .timeout_seconds = options->timeout_seconds,
      .max_steps = options->max_steps,
      .cancel = options->cancel,
      .trace_path = options->trace_path,
      .on_progress = options->on_progress,
      .on_progress_user = options->on_progress_user,
      .progress_interval = options->progress_interval,
  };
}

tsr_status_t tsr_interp_program_run(const tsr_interp_program_t *program,
                                    tsr_array_t *const *operands,
                                    size_t num_operands,
                                    tsr_interp_stats_t *out_stats) {
  tsr_interp_run_options_t ro;
  tsr_interp_run_options_of(&program->options, &ro);
  return tsr_interp_program_run_with(program, operands, num_operands, &ro, out_stats, NULL);
}

/* How many host threads run the split points of this run (docs/semantics.md,
 * "Host threads"): 1 unless the kernel allows a split (p->host_split), the
 * run has one core on one device, no race detection, trace, grid-step
 * callback or device-wide scoped buffers, has reported nothing before its
 * first step (the parallel-revisit warning), and two split points or more,
 * and its outputs' visited tables are dense; then the option's count, at
 * most one per point. */
static uint32_t split_parts(shared_t *sh, bool *asked) {
  const tsr_interp_program_t *p = sh->p;
  if (!p->host_split || sh->devices * sh->cores != 1 || sh->race || sh->tracing ||
      p->options.on_grid_step || p->num_wide || sh->aborted || sh->diag.errors.count ||
      sh->diag.warnings.count || sh->diag.failed)
    return 1;
  for (uint32_t g = sh->split.first; g < sh->split.end; g++)
    if (sh->grid[g] <= 0) return 1;
  uint64_t points = sh->split.points;
  uint32_t t = tsr_host_threads(p->options.threads);
  if (points < 2 || t < 2 || !tsr_grid_visits_dense(&sh->core[0])) return 1;
  *asked = true;
  if (!tsr_split_pays((tsr_split_cost_t *)&p->split_cost)) return 1;
  return points < t ? (uint32_t)points : t;
}

static void part_main(void *ctx, uint32_t i) {
  shared_t *parts = ctx;
  tsr_interp_run_all(&parts[i]);
}

static void add_stats(tsr_interp_stats_t *to, const tsr_interp_stats_t *from) {
  to->grid_steps += from->grid_steps;
  to->ops_executed += from->ops_executed;
  to->blocks_copied_in += from->blocks_copied_in;
  to->blocks_copied_out += from->blocks_copied_out;
  to->bytes_copied += from->bytes_copied;
}

/* Runs the one core's split points as n parts, each a contiguous part of
 * them in grid order with its own memories, values and diagnostics, on the
 * host's pool; part 0 is the run's own core. The parts share the arrays
 * (they write disjoint output blocks: tsr_ir_host_split_ok) and the
 * visited tables (dense: disjoint records). Returns false when a part
 * reported anything or was stopped: the caller then runs the whole run
 * again on one thread. When a part cannot be set up (no memory), the run
 * runs on one thread here instead. */
static bool run_split(shared_t *sh, uint32_t n) {
  const tsr_interp_program_t *p = sh->p;
  shared_t *parts = tsr_calloc(n, sizeof *parts);
  run_t *cores = tsr_calloc(n, sizeof *cores);
  split_group_t g = {.bounds = &sh->bounds, .parts = n};
  pthread_mutex_init(&g.mu, NULL);
  atomic_init(&g.steps, 0);
  atomic_init(&g.stop, false);
  run_t *own = &sh->core[0];
  const uint64_t lo = own->share_lo, hi = own->share_hi;
  const uint64_t per_point = sh->total_steps / sh->split.points;
  uint32_t made = 0; /* parts whose diagnostics (and core, past part 0) are set up */
  bool ok = parts && cores;
  for (; ok && made < n; made++) {
    shared_t *q = &parts[made];
    *q = *sh; /* the run's grid, split, arrays and tables */
    q->core = made == 0 ? own : &cores[made];
    q->aborted = false;
    memset(&q->stats, 0, sizeof q->stats);
    q->tick = 0;
    memset(&q->meter, 0, sizeof q->meter);
    q->budget = 0;
    q->group = &g;
    q->group_steps = 0;
    tsr_strbuf_initialize(&q->trace);
    tsr_status_t s = tsr_diag_sink_initialize(&q->diag, p->kernel_name, p->num_sites, 1, 1,
                                              sh->diag.max_errors, sh->diag.strict);
    if (!s && made > 0) {
      s = core_setup(q, 0, 0);
      if (s) tsr_diag_sink_deinitialize(&q->diag);
    }
    if (s) {
      tsr_status_free(s);
      if (made > 0) { /* what core_setup made of it, but not the run's tables */
        cores[made].visited = NULL;
        core_free(&cores[made]);
      }
      ok = false;
      break;
    }
    run_t *run = q->core;
    run->sh = q;
    run->share_lo = lo + (hi - lo) * made / n;
    run->share_hi = lo + (hi - lo) * (made + 1) / n;
    run->core_steps = per_point * (run->share_hi - run->share_lo);
  }
  if (ok) tsr_pool_run(n, part_main, parts);
  bool clean = true;
  for (uint32_t i = 0; i < made; i++) {
    shared_t *q = &parts[i];
    clean = clean && !q->aborted && !q->diag.errors.count && !q->diag.warnings.count &&
            !q->diag.failed;
    add_stats(&sh->stats, &q->stats);
    sh->tick += q->tick;
    tsr_diag_sink_deinitialize(&q->diag);
  }
  if (ok && made > 1) {
    /* The run ends where the last part ended, as a serial run does there:
     * the end-of-run reports name that point. */
    const run_t *last = &cores[made - 1];
    memcpy(own->point, last->point, sizeof own->point);
    memcpy(own->loop, last->loop, sizeof own->loop);
    own->step = last->step;
  }
  own->sh = sh;
  own->share_lo = lo;
  own->share_hi = hi;
  for (uint32_t i = 1; i < made; i++) {
    cores[i].visited = NULL; /* the run's, freed with its own core */
    core_free(&cores[i]);
  }
  pthread_mutex_destroy(&g.mu);
  tsr_free(parts);
  tsr_free(cores);
  if (!ok) tsr_interp_run_all(sh); /* as it was before any part ran */
  return !ok || clean;
}

/* One run. With may_split, the run may go to several host threads
 * (run_split); when they cannot finish as a serial run would, *redo is set
 * and nothing is reported, written or counted: the caller runs it again
 * without may_split, passing the first run's bounds in `resume` (its start
 * for the timeout, its last progress, which never goes back). */
static tsr_status_t run_once(const tsr_interp_program_t *p, tsr_array_t *const *operands,
                             const tsr_interp_run_options_t *ro, bool may_split,
                             tsr_bounds_t *resume, bool *redo, tsr_interp_stats_t *out_stats,
                             tsr_diag_sink_t *out_diag) {
  shared_t sh;
  memset(&sh, 0, sizeof sh);
  sh.p = p;
  sh.devices = p->options.devices ? p->options.devices : 1;
  sh.cores = p->options.cores ? p->options.cores : 1;
  sh.out = ro->print_stream ? ro->print_stream : stderr;
  sh.tracing = ro->trace_path != NULL;
  sh.trace_path = ro->trace_path;
  if (p->options.detect_races) {
    sh.race = tsr_race_create();
    if (!sh.race) return TSR_OOM();
  }
  tsr_strbuf_initialize(&sh.trace);
  tsr_interp_options_t bounds = p->options;
  bounds.timeout_seconds = ro->timeout_seconds;
  bounds.max_steps = ro->max_steps;
  bounds.cancel = ro->cancel;
  bounds.on_progress = ro->on_progress;
  bounds.on_progress_user = ro->on_progress_user;
  bounds.progress_interval = ro->progress_interval;
  tsr_bounds_start(&sh.bounds, &bounds);
  if (resume->start > 0) {
    sh.bounds.start = resume->start;
    sh.bounds.progress_next = resume->progress_next;
    sh.bounds.reported = resume->reported;
  }
  tsr_status_t s = tsr_diag_sink_initialize(&sh.diag, p->kernel_name, p->num_sites, sh.devices,
                                            sh.cores, p->options.max_errors, ro->strict);
  if (!s) s = run_setup(&sh, operands);
  if (!s) tsr_grid_check_parallel_revisits(&sh);
  if (!s) {
    /* every device runs the whole grid */
    sh.bounds.progress_total = sh.total_steps * sh.devices;
    bool asked = false; /* whether splitting was weighed: then the run is timed for it */
    uint32_t parts = may_split ? split_parts(&sh, &asked) : 1;
    uint64_t started_ns = tsr_split_clock_ns();
    if (parts > 1 && !run_split(&sh, parts)) {
      *redo = true;
      *resume = sh.bounds;
      shared_free(&sh);
      return NULL;
    }
    if (parts == 1) tsr_interp_run_all(&sh);
    /* a run that weighed splitting teaches the next whether it pays */
    if (asked && !sh.aborted)
      tsr_split_learn((tsr_split_cost_t *)&p->split_cost, tsr_split_clock_ns() - started_ns,
                      sh.split.points, parts);
    tsr_bounds_report_progress(&sh.bounds, sh.stats.grid_steps);
  }
  tsr_status_t trace = s || !sh.tracing ? NULL : tsr_trace_write(&sh);
  if (!s && !sh.aborted) tsr_dma_check_end(&sh);
  if (!s && !sh.aborted) tsr_grid_copy_out_landed(&sh);
  if (!s && !sh.aborted) tsr_dma_sem_outputs(&sh);
  if (!s && !sh.aborted && p->options.check)
    for (uint32_t d = 0; d < sh.devices; d++) tsr_grid_check_outputs(&sh.core[d * sh.cores]);
  if (!s) s = tsr_diag_sink_status(&sh.diag);
  sh.stats.warnings = tsr_diag_sink_write_warnings(
      &sh.diag, ro->warning_stream ? ro->warning_stream : stderr);
  if (!s && trace) {
    /* The file's message starts with the path, which ours names first. */
    const char *why = tsr_status_message(trace);
    size_t n = strlen(ro->trace_path);
    if (strncmp(why, ro->trace_path, n) == 0 && strncmp(why + n, ": ", 2) == 0) why += n + 2;
    s = TSR_STATUS(tsr_status_code(trace), "cannot write the trace to %s: %s", ro->trace_path,
                   why);
  }
  tsr_status_free(trace);
  sh.stats.vmem_bytes = p->vmem_used;
  if (out_stats) *out_stats = sh.stats;
  if (out_diag) tsr_diag_sink_move(&sh.diag, out_diag);
  shared_free(&sh);
  return s;
}

tsr_status_t tsr_interp_program_run_with(const tsr_interp_program_t *program,
                                         tsr_array_t *const *operands, size_t num_operands,
                                         const tsr_interp_run_options_t *ro,
                                         tsr_interp_stats_t *out_stats,
                                         tsr_diag_sink_t *out_diag) {
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
  tsr_bounds_t resume;
  memset(&resume, 0, sizeof resume);
  bool redo = false;
  tsr_status_t s = run_once(p, operands, ro, true, &resume, &redo, out_stats, out_diag);
  if (!redo) return s;
  return run_once(p, operands, ro, false, &resume, &redo, out_stats, out_diag);
}
