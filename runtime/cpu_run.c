/* Running compiled kernels (docs/lowering.md, "Cores and devices"): one OS
 * thread per simulated core, and the runtime side of the compiled code's
 * callback (lower/lower_api.h): semaphores, core barriers, DMAs into another
 * core's memory, print and assert.
 *
 * Semaphores are counters in the run, one set of tsr_ir_semaphore_slots per
 * core, under one mutex: a signal adds and wakes the waiters, a wait blocks
 * on a condition variable until its semaphore holds enough. The mutex also
 * orders memory: what a core wrote before a signal (the copy of a DMA
 * included) is visible to the core that waited for it. A wait that can never
 * be satisfied is a deadlock, found the moment no core can move (every core
 * waits for a semaphore that does not hold enough, has finished or waits at
 * the end) and reported as the interpreter reports it; the run is then
 * abandoned: waits return at once, prints stop, and the outputs are not
 * to be trusted (the status is an error). */
#include <inttypes.h>
#include <stddef.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>

#include "base/hashtable.h"
#include "base/pool.h"
#include "base/sort.h"
#include "interp/blockops.h"
#include "interp/interp_runtime.h"
#include "ir/ir.h"
#include "ir/opview.h"
#include "lower/lower_api.h"
#include "runtime/runtime_internal.h"

/* ---- What the runtime keeps of the kernel ------------------------------------------------- */

/* A ref a load, store or DMA view indexes, for out-of-bounds reports. */
typedef struct site_ref {
  const char *name;
  const char *side; /* "source", "destination" (a DMA's), or NULL */
  uint32_t first, count; /* its indices in the op's */
  uint32_t rank;
  int64_t dims[TSR_MAX_RANK];
  tsr_dtype_t dtype;
  bool paddable; /* a ref outside SMEM of rank > 0: padded under `padded` */
} site_ref_t;

typedef struct site_info {
  tsr_loc_t loc; /* file copied */
  const char *what; /* instead of the op's mnemonic (the grid step's site) */
  tsr_opcode_t opcode;
  const char *text; /* print format, assert message */
  site_ref_t refs[2]; /* loads and stores: refs[0]; DMAs: source, destination */
  uint32_t num_refs;
  tsr_index_t *indices; /* the op's, copied (static starts, sizes, strides) */
  uint32_t num_indices;
  uint32_t num_operands;
  struct print_operand {
    tsr_dtype_t dtype;
    bool vector;
    uint64_t elements;
  } *operands; /* print */
} site_info_t;

/* A decl, for block-range reports: "in %x" at its line. */
typedef struct decl_info {
  tsr_loc_t loc;
  const char *what;
  uint32_t rank;
  int64_t array[TSR_MAX_RANK], block[TSR_MAX_RANK]; /* squeezed dims as 1 */
} decl_info_t;

typedef struct sem_info {
  const char *name;
  uint64_t first;
  uint32_t rank;
  int64_t dims[TSR_MAX_RANK];
} sem_info_t;

struct tsr_cpu_info {
  tsr_arena_t arena;
  const char *kernel_name;
  uint32_t grid_rank;
  int64_t grid[TSR_MAX_RANK];
  tsr_ir_core_split_t split; /* how the cores share the grid */
  /* per grid dim: 1 + the operand holding its run-time extent, or 0 */
  uint32_t grid_bound[TSR_MAX_RANK];
  uint8_t semantics[TSR_MAX_RANK];
  site_info_t *sites;
  uint32_t num_sites;
  sem_info_t *sems;
  uint32_t num_sems;
  decl_info_t *decls;
  uint32_t num_decls;
  uint64_t slots;
  /* per operand (non-scratch decl): its name, the input it aliases or -1 */
  const char **operand_names;
  int32_t *alias;
  bool *fill_at_start; /* an hbm/any output, a windowed one the grid cannot
                          cover, or a revisit-any one (its blocks are copied
                          in from it: they start uninitialized) */
  bool *revisit_any;   /* an output whose blocks may be revisited at any step */
  /* per operand: the grid dims its block index cannot change along
   * (tsr_ir_output_fixed_dims), and its decl (for its location) */
  uint32_t *fixed_dims;
  uint32_t *operand_decl;
  /* per operand: a semaphore operand's first slot (UINT64_MAX for others)
   * and count; its array holds the counts (docs/semantics.md) */
  uint64_t *sem_first, *sem_count;
  int32_t *decl_operand; /* per decl: its operand, or -1 (scratch) */
  bool *is_output;
  /* compiled with output blocks copied in (out_blocks_copied_in): every
   * fresh output starts holding JAX's uninitialized value */
  bool out_copy_in;
  /* per operand: how many blocks its array has along each dim (the
   * revisit check numbers them row-major; TSR_RT_VISIT) */
  int64_t (*blocks)[TSR_MAX_RANK];
  uint32_t *rank;
  uint32_t num_operands;
  /* the largest device-wide (hbm/any) scoped buffer, in bytes (the run's
   * stand-in for one that cannot be allocated) */
  uint64_t wide_max_bytes;
  /* a core's split points may go to several host threads
   * (tsr_ir_host_split_ok) */
  bool host_split;
  /* the sort and argsort ops' temporaries, kept for the next call (NULL:
   * allocated per call) */
  tsr_sort_scratch_t *sort_scratch;
  /* what a split point costs, learned from the runs (not part of what the
   * info is: runs of a const info update it) */
  tsr_split_cost_t split_cost;
  bool failed;
};

static const char *info_strdup(tsr_cpu_info_t *info, const char *s) {
  if (!s) return NULL;
  char *c = tsr_arena_strndup(&info->arena, s, strlen(s));
  if (!c) info->failed = true;
  return c;
}

static void note_ref(tsr_cpu_info_t *info, site_info_t *s, const tsr_opview_ref_t *r,
                     const char *side) {
  const tsr_value_t *v = r->base.value;
  if (!v) return;
  site_ref_t *sr = &s->refs[s->num_refs++];
  sr->name = info_strdup(info, v->name);
  sr->side = side;
  sr->first = r->first;
  sr->count = r->count;
  sr->rank = v->type.rank;
  memcpy(sr->dims, v->type.dims, sizeof sr->dims);
  sr->dtype = (tsr_dtype_t)v->type.dtype;
  sr->paddable = v->type.kind == TSR_TYPE_REF && v->type.space != TSR_SPACE_SMEM &&
                 v->type.rank > 0;
}

/* The refs and indices of ops the compiled code checks (TSR_RT_OUT_OF_BOUNDS). */
static void note_site_refs(tsr_cpu_info_t *info, const tsr_op_t *op, site_info_t *s) {
  tsr_access_view_t av;
  tsr_dma_view_t dv;
  if ((op->opcode == TSR_OP_DMA_START || op->opcode == TSR_OP_DMA_WAIT) &&
      tsr_opview_dma(op, &dv)) {
    note_ref(info, s, &dv.src, "source");
    note_ref(info, s, &dv.dst, "destination");
  } else if ((op->opcode == TSR_OP_LOAD || op->opcode == TSR_OP_STORE) &&
             tsr_opview_access(op, &av)) {
    note_ref(info, s, &av.ref, NULL);
  } else {
    return;
  }
  if (!op->num_indices) return;
  s->indices = tsr_arena_alloc(&info->arena, op->num_indices * sizeof *s->indices);
  if (!s->indices) {
    info->failed = true;
    return;
  }
  memcpy(s->indices, op->indices, op->num_indices * sizeof *s->indices);
  s->num_indices = op->num_indices;
}

static void note_site(void *ctx, const tsr_op_t *op, uint32_t position) {
  tsr_cpu_info_t *info = ctx;
  site_info_t *s = &info->sites[position];
  s->loc = op->loc;
  s->loc.file = info_strdup(info, op->loc.file);
  s->opcode = op->opcode;
  s->text = info_strdup(info, op->text);
  note_site_refs(info, op, s);
  tsr_scoped_view_t sv;
  for (uint32_t i = 0; tsr_opview_scoped(op, &sv) && i < sv.num_buffers; i++) {
    const tsr_type_t *t = &sv.buffers[i]->type;
    if (t->kind != TSR_TYPE_REF || (t->space != TSR_SPACE_HBM && t->space != TSR_SPACE_ANY))
      continue;
    uint64_t bytes = (uint64_t)tsr_type_element_count(t) * tsr_dtype_size((tsr_dtype_t)t->dtype);
    if (bytes > info->wide_max_bytes) info->wide_max_bytes = bytes;
  }
  if (op->opcode != TSR_OP_PRINT || !op->num_operands) return;
  s->operands = tsr_arena_alloc(&info->arena, op->num_operands * sizeof *s->operands);
  if (!s->operands) {
    info->failed = true;
    return;
  }
  s->num_operands = op->num_operands;
  for (uint32_t i = 0; i < op->num_operands; i++) {
    const tsr_type_t *t = &op->operands[i]->type;
    uint64_t n = 1;
    for (uint32_t d = 0; t->kind == TSR_TYPE_VECTOR && d < t->rank; d++) n *= (uint64_t)t->dims[d];
    s->operands[i] = (struct print_operand){(tsr_dtype_t)t->dtype, t->kind == TSR_TYPE_VECTOR, n};
  }
}

static void note_sem(void *ctx, const tsr_value_t *ref, uint64_t first) {
  tsr_cpu_info_t *info = ctx;
  if (ref->decl >= 0 && info->decl_operand && info->decl_operand[ref->decl] >= 0)
    info->sem_first[info->decl_operand[ref->decl]] = first;
  sem_info_t *s = &info->sems[info->num_sems++];
  s->name = info_strdup(info, ref->name);
  s->first = first;
  s->rank = ref->type.rank;
  memcpy(s->dims, ref->type.dims, sizeof s->dims);
}

static void count_sem(void *ctx, const tsr_value_t *ref, uint64_t first) {
  (void)ref;
  (void)first;
  (*(uint32_t *)ctx)++;
}

/* Whether some elements of windowed output `d` are certainly in no block
 * the grid visits: the grid has fewer steps than the array has blocks (or
 * the index map is all zeros over several blocks). Those elements are
 * filled with the uninitialized value before the run, as the interpreter
 * fills every element no step wrote; blocks give the rest theirs. An index
 * map that visits some blocks twice and others never, over as many steps as
 * blocks, is not seen here (docs/lowering.md, "Not checked"). */
static bool output_not_covered(const tsr_kernel_t *k, const tsr_decl_t *d) {
  uint64_t steps = 1, blocks = 1;
  for (uint32_t i = 0; i < k->grid_rank; i++) {
    if (k->grid_bound[i]) return true; /* a run-time extent: may cover anything */
    if (k->grid[i] <= 0) return false; /* no step runs: nothing to fill for */
    steps = steps > UINT64_MAX / (uint64_t)k->grid[i] ? UINT64_MAX : steps * (uint64_t)k->grid[i];
  }
  for (uint32_t i = 0; i < d->array.rank; i++) {
    if (d->element[i]) return true; /* element windows may leave gaps anywhere */
    int64_t b = d->block[i] == TSR_SQUEEZED ? 1 : d->block[i];
    if (b <= 0) return false;
    uint64_t n = (uint64_t)((d->array.dims[i] + b - 1) / b);
    blocks = n && blocks > UINT64_MAX / n ? UINT64_MAX : blocks * n;
  }
  return blocks > 1 && (!d->index_map || steps < blocks);
}

tsr_status_t tsr_cpu_info_create(const tsr_kernel_t *k, tsr_cpu_info_t **out) {
  tsr_cpu_info_t *info = tsr_calloc(1, sizeof *info);
  if (!info) return TSR_OOM();
  tsr_arena_initialize(&info->arena);
  info->sort_scratch = tsr_sort_scratch_create();
  info->kernel_name = info_strdup(info, k->name);
  info->grid_rank = k->grid_rank;
  memcpy(info->grid, k->grid, sizeof info->grid);
  memcpy(info->semantics, k->semantics, sizeof info->semantics);
  info->host_split = tsr_ir_host_split_ok(k, NULL);
  /* prefetch decls come first: decl index = operand index */
  for (uint32_t g = 0; g < k->grid_rank; g++) info->grid_bound[g] = k->grid_bound[g];
  if (!tsr_ir_kernel_has_dynamic_grid(k))
    info->split = tsr_ir_core_split(k->grid_rank, k->grid, k->semantics);
  info->alias = tsr_arena_alloc(&info->arena, (k->num_decls + 1) * sizeof *info->alias);
  info->operand_names =
      tsr_arena_alloc(&info->arena, (k->num_decls + 1) * sizeof *info->operand_names);
  int32_t *operand_of = tsr_arena_alloc(&info->arena, (k->num_decls + 1) * sizeof *operand_of);
  info->decl_operand = operand_of;
  info->fill_at_start =
      tsr_arena_alloc(&info->arena, (k->num_decls + 1) * sizeof *info->fill_at_start);
  info->is_output = tsr_arena_alloc(&info->arena, (k->num_decls + 1) * sizeof *info->is_output);
  info->revisit_any =
      tsr_arena_alloc(&info->arena, (k->num_decls + 1) * sizeof *info->revisit_any);
  info->blocks = tsr_arena_alloc(&info->arena, (k->num_decls + 1) * sizeof *info->blocks);
  info->fixed_dims =
      tsr_arena_alloc(&info->arena, (k->num_decls + 1) * sizeof *info->fixed_dims);
  info->operand_decl =
      tsr_arena_alloc(&info->arena, (k->num_decls + 1) * sizeof *info->operand_decl);
  if (!info->fixed_dims || !info->operand_decl) info->failed = true;
  info->rank = tsr_arena_alloc(&info->arena, (k->num_decls + 1) * sizeof *info->rank);
  info->sem_first = tsr_arena_alloc(&info->arena, (k->num_decls + 1) * sizeof *info->sem_first);
  info->sem_count = tsr_arena_alloc(&info->arena, (k->num_decls + 1) * sizeof *info->sem_count);
  if (!info->sem_first || !info->sem_count) info->failed = true;
  if (!info->alias || !info->operand_names || !operand_of || !info->fill_at_start ||
      !info->is_output || !info->revisit_any || !info->blocks || !info->rank)
    info->failed = true;
  info->decls = tsr_arena_alloc(&info->arena, (k->num_decls + 1) * sizeof *info->decls);
  if (!info->decls) info->failed = true;
  info->num_decls = info->failed ? 0 : k->num_decls;
  for (uint32_t i = 0; !info->failed && i < k->num_decls; i++) {
    const tsr_decl_t *d = &k->decls[i];
    decl_info_t *di = &info->decls[i];
    char what[160];
    snprintf(what, sizeof what, "%s %%%s",
             d->role == TSR_ROLE_SCRATCH ? "scratch"
             : d->role == TSR_ROLE_IN    ? "in"
             : d->role == TSR_ROLE_OUT   ? "out"
                                         : "prefetch",
             d->ref->name);
    di->what = info_strdup(info, what);
    di->loc = d->loc;
    di->loc.file = info_strdup(info, d->loc.file);
    di->rank = d->array.rank;
    for (uint32_t r = 0; r < d->array.rank; r++) {
      di->array[r] = d->array.dims[r];
      di->block[r] = d->block[r] == TSR_SQUEEZED ? 1 : d->block[r];
    }
    operand_of[i] = -1;
    if (d->role == TSR_ROLE_SCRATCH) continue;
    operand_of[i] = (int32_t)info->num_operands;
    info->is_output[info->num_operands] = d->role == TSR_ROLE_OUT;
    bool sem = d->ref->type.kind == TSR_TYPE_SEM;
    bool windowed = d->ref->type.space == TSR_SPACE_VMEM || d->ref->type.space == TSR_SPACE_SMEM;
    bool revisit_any = d->role == TSR_ROLE_OUT && d->revisit == TSR_REVISIT_ANY;
    info->revisit_any[info->num_operands] = revisit_any;
    info->fixed_dims[info->num_operands] = tsr_ir_output_fixed_dims(k, d);
    info->operand_decl[info->num_operands] = i;
    info->fill_at_start[info->num_operands] =
        !sem && d->role == TSR_ROLE_OUT && (!windowed || revisit_any || output_not_covered(k, d));
    info->sem_first[info->num_operands] = UINT64_MAX;
    info->sem_count[info->num_operands] = sem ? (uint64_t)tsr_type_element_count(&d->ref->type) : 0;
    info->operand_names[info->num_operands] = info_strdup(info, d->ref->name);
    info->rank[info->num_operands] = d->array.rank;
    for (uint32_t a = 0; a < d->array.rank; a++) {
      int64_t b = d->block[a] == TSR_SQUEEZED ? 1 : d->block[a];
      int64_t n = b > 0 ? (d->array.dims[a] + b - 1) / b : 1;
      info->blocks[info->num_operands][a] = n > 0 ? n : 1;
    }
    info->alias[info->num_operands++] =
        d->role == TSR_ROLE_OUT && d->alias >= 0 ? operand_of[d->alias] : -1;
  }
  info->num_sites = tsr_ir_walk_ops(k, NULL, NULL);
  info->sites = tsr_arena_alloc(&info->arena, (info->num_sites + 1) * sizeof *info->sites);
  uint32_t nsems = 0;
  tsr_ir_semaphore_slots(k, count_sem, &nsems);
  info->sems = tsr_arena_alloc(&info->arena, (nsems + 1) * sizeof *info->sems);
  if (info->sites && info->sems) {
    memset(info->sites, 0, (info->num_sites + 1) * sizeof *info->sites);
    tsr_ir_walk_ops(k, note_site, info);
    /* one past the ops: the grid step (TSR_RT_STEP), at the kernel */
    info->sites[info->num_sites].loc = k->loc;
    info->sites[info->num_sites].loc.file = info_strdup(info, k->loc.file);
    info->sites[info->num_sites].what = "the grid step";
    info->slots = tsr_ir_semaphore_slots(k, note_sem, info);
  }
  if (!info->sites || !info->sems || info->failed) {
    tsr_cpu_info_destroy(info);
    return TSR_OOM();
  }
  *out = info;
  return NULL;
}

const char *tsr_cpu_info_kernel_name(const tsr_cpu_info_t *info) { return info->kernel_name; }

const char *tsr_cpu_info_operand_name(const tsr_cpu_info_t *info, uint32_t i) {
  return i < info->num_operands ? info->operand_names[i] : "?";
}

bool tsr_cpu_info_operand_is_output(const tsr_cpu_info_t *info, uint32_t i) {
  return i < info->num_operands && info->is_output[i];
}

void tsr_cpu_info_set_out_copy_in(tsr_cpu_info_t *info, bool copy_in) {
  info->out_copy_in = copy_in;
}

void tsr_cpu_info_destroy(tsr_cpu_info_t *info) {
  if (!info) return;
  tsr_sort_scratch_destroy(info->sort_scratch);
  tsr_arena_deinitialize(&info->arena);
  tsr_free(info);
}

/* ---- A run --------------------------------------------------------------------------------- */

typedef enum core_state {
  CORE_RUNNING,
  CORE_WAITING, /* for a semaphore: wait_slot to reach wait_need */
  CORE_AT_START,
  CORE_AT_END,
  CORE_DONE,
} core_state_t;

typedef struct crun crun_t;

/* A live instance of a device-wide scoped buffer (TSR_RT_WIDE_ENTER): the
 * k-th entry of every core of a device into the scope of argument `arg` of
 * the scoped op at `site` shares the k-th instance, as in the interpreter
 * (interp/dma.c); freed when all the device's cores have left it. */
typedef struct cwide {
  struct cwide *next;
  uint32_t device, site, arg, entry;
  uint32_t exits;
  void *data;
} cwide_t;

/* A core's entries into one device-wide buffer's scope. */
typedef struct cwide_at {
  uint32_t site, arg, entries;
  cwide_t *cur; /* the instance it is inside, or NULL */
} cwide_at_t;

typedef struct ccore {
  /* first: the context words of the compiled code (lower_api.h) */
  int64_t lin;         /* TSR_RT_CTX_POINT */
  int64_t budget;      /* TSR_RT_CTX_BUDGET */
  int64_t uninit_zero; /* TSR_RT_CTX_UNINIT_ZERO */
  int64_t order;       /* TSR_RT_CTX_ORDER: the address of run->order */
  crun_t *run;
  uint32_t device, index;
  /* the six scalars of the kernel function */
  int64_t fn, ctx;
  int32_t device_arg, core_arg;
  int64_t plo, phi;
  void **args;
  /* memory registered for remote DMAs (written before TSR_RT_START) */
  void **roots;
  uint32_t num_roots, roots_capacity;
  /* under run->mu */
  tsr_step_meter_t meter;
  uint64_t begun; /* grid steps begun as of its last TSR_RT_STEP (progress) */
  core_state_t state;
  uint64_t wait_slot;
  int64_t wait_need;
  uint32_t wait_site;
  /* this core's own: a progress call is due with `progress_at` (set under
   * run->mu by take_steps, made after it lets go of the lock) */
  bool progress_due;
  uint64_t progress_at;
  pthread_t thread;
  /* under run->mu: its device-wide buffers' entries */
  cwide_at_t *wide_at;
  uint32_t num_wide_at, wide_at_capacity;
} ccore_t;

/* An output block a core started (TSR_RT_VISIT), per device. */
typedef struct visit {
  int64_t key[3]; /* device, operand, block number */
  uint32_t core;
  int64_t first_step;
  UT_hash_handle hh;
} visit_t;

struct crun {
  const tsr_cpu_info_t *info;
  int64_t grid[TSR_MAX_RANK]; /* the run's: info's, dynamic extents read */
  tsr_ir_core_split_t split;
  int64_t *order; /* the leading parallel dims' order (TSR_RT_CTX_ORDER) */
  /* called at each grid step (tsr_interp_options_t) */
  tsr_grid_step_fn on_grid_step;
  void *on_grid_step_user;
  void (*entry)(void **);
  tsr_runtime_binding_t *binding; /* the caller's, for the core threads */
  uint32_t devices, cores, n;
  uint32_t max_errors;
  bool padded;      /* options.padded: refs have the tiled shape */
  bool double_rows; /* of the options' chip (tsr_chip_doubles_tile_rows) */
  FILE *out;
  ccore_t *core;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  /* under mu */
  tsr_bounds_t bounds; /* run bounds (interp/bounds.h) */
  int64_t *sems; /* n x info->slots */
  uint32_t at_start;
  bool aborted;
  tsr_diag_sink_t diag;
  visit_t *visited;
  cwide_t *wide;        /* live device-wide instances */
  void *wide_fallback;  /* info->wide_max_bytes: handed out when an instance
                           cannot be allocated (the run is then abandoned) */
  tsr_uninit_mode_t uninit;
  /* Progress (tsr_interp_options_t's on_progress): the cores' `begun`
   * summed (under mu); the inverse of `order` and the number of leading
   * parallel dims it covers, to find a core's step from its grid point.
   * The calls are made outside mu, one at a time under progress_mu. */
  uint64_t done;
  int64_t *unorder;
  uint32_t npar;
  pthread_mutex_t progress_mu;
};

_Static_assert(offsetof(ccore_t, lin) == TSR_RT_CTX_POINT * sizeof(int64_t) &&
                   offsetof(ccore_t, budget) == TSR_RT_CTX_BUDGET * sizeof(int64_t) &&
                   offsetof(ccore_t, uninit_zero) == TSR_RT_CTX_UNINIT_ZERO * sizeof(int64_t) &&
                   offsetof(ccore_t, order) == TSR_RT_CTX_ORDER * sizeof(int64_t),
               "ccore_t starts with the context words of lower_api.h");

static int64_t *sem_at(crun_t *r, uint32_t core, uint64_t slot) {
  return &r->sems[(uint64_t)core * r->info->slots + slot];
}

/* "%name" or "%name[i, j]" for a slot. */
static void sem_text(const tsr_cpu_info_t *info, uint64_t slot, char *buf, size_t size) {
  const sem_info_t *s = NULL;
  for (uint32_t i = 0; i < info->num_sems; i++)
    if (info->sems[i].first <= slot) s = &info->sems[i];
  if (!s) {
    snprintf(buf, size, "semaphore %" PRIu64, slot);
    return;
  }
  tsr_diag_format_element(buf, size, s->name, s->rank, s->dims, (int64_t)(slot - s->first));
}

/* Where a diagnostic of core c at `site` happens: its grid point. */
typedef struct core_where {
  tsr_diag_where_t where;
  int64_t point[TSR_MAX_RANK];
  char what[48];
} core_where_t;

static const tsr_diag_where_t *where_of(const ccore_t *c, uint32_t site, core_where_t *w) {
  const tsr_cpu_info_t *info = c->run->info;
  const site_info_t *s = &info->sites[site];
  tsr_interp_unflatten(c->lin, info->grid_rank, c->run->grid, w->point);
  if (!s->what) tsr_diag_format_op(w->what, sizeof w->what, s->opcode);
  w->where = (tsr_diag_where_t){site,     s->loc,   s->what ? s->what : w->what,
                                c->device, c->index, w->point, info->grid_rank, NULL};
  return &w->where;
}

/* After a report: max_errors errors stop the run; under mu. */
static void stop_if(crun_t *r, bool stop) {
  if (!stop) return;
  r->aborted = true;
  pthread_cond_broadcast(&r->cv);
}

/* A kernel error at `site`; under mu. */
static void kernel_error(ccore_t *c, uint32_t site, tsr_diag_kind_t kind, const char *fmt, ...)
    TSR_PRINTF(4, 5);
static void kernel_error(ccore_t *c, uint32_t site, tsr_diag_kind_t kind, const char *fmt, ...) {
  core_where_t w;
  va_list ap;
  va_start(ap, fmt);
  bool stop = tsr_diag_vreport(&c->run->diag, where_of(c, site, &w), kind, TSR_DIAG_ERROR, fmt, ap);
  va_end(ap);
  stop_if(c->run, stop);
}

/* The core a device/core pair names (-1: this core's), or NULL after an
 * error; under mu. */
static ccore_t *target_core(ccore_t *c, uint32_t site, int64_t device, int64_t core) {
  crun_t *r = c->run;
  if (device < 0) device = c->device;
  if (core < 0) core = c->index;
  if (device >= r->devices || core >= r->cores) {
    core_where_t w;
    stop_if(r, tsr_diag_device_range(&r->diag, where_of(c, site, &w), device, core));
    return NULL;
  }
  return &r->core[device * r->cores + core];
}

static bool satisfied(crun_t *r, const ccore_t *c) {
  return *sem_at(r, (uint32_t)(c - r->core), c->wait_slot) >= c->wait_need;
}

/* Under mu, after a core stopped moving: if no core can move any more,
 * reports every core waiting for a semaphore and abandons the run. */
static void check_deadlock(crun_t *r) {
  if (r->aborted) return;
  bool waiting = false;
  for (uint32_t i = 0; i < r->n; i++) {
    const ccore_t *c = &r->core[i];
    if (c->state == CORE_RUNNING || c->state == CORE_AT_START) return;
    if (c->state == CORE_WAITING) {
      if (satisfied(r, c)) return;
      waiting = true;
    }
  }
  if (!waiting) return; /* everyone is at the end: they go on */
  for (uint32_t i = 0; i < r->n; i++) {
    ccore_t *c = &r->core[i];
    if (c->state != CORE_WAITING) continue;
    char name[160];
    sem_text(r->info, c->wait_slot, name, sizeof name);
    core_where_t w;
    stop_if(r, tsr_diag_deadlock(&r->diag, where_of(c, c->wait_site, &w), name, c->wait_need,
                                 r->info->sites[c->wait_site].opcode == TSR_OP_DMA_WAIT,
                                 *sem_at(r, i, c->wait_slot)));
  }
  r->aborted = true;
  pthread_cond_broadcast(&r->cv);
}

/* Under mu: blocks until the semaphore holds `need`, then subtracts it. */
static void wait_locked(ccore_t *c, uint64_t slot, int64_t need, uint32_t site) {
  crun_t *r = c->run;
  int64_t *v = sem_at(r, (uint32_t)(c - r->core), slot);
  c->state = CORE_WAITING;
  c->wait_slot = slot;
  c->wait_need = need;
  c->wait_site = site;
  while (!r->aborted && *v < need) {
    check_deadlock(r);
    if (r->aborted) break;
    pthread_cond_wait(&r->cv, &r->mu);
  }
  if (!r->aborted) *v -= need;
  c->state = CORE_RUNNING;
}

static void signal_locked(ccore_t *c, ccore_t *t, uint64_t slot, int64_t amount) {
  crun_t *r = c->run;
  *sem_at(r, (uint32_t)(t - r->core), slot) += amount;
  pthread_cond_broadcast(&r->cv);
}

/* Under mu: TSR_RT_START, until every core has registered its memory. */
static void meet_at_start(ccore_t *c) {
  crun_t *r = c->run;
  c->state = CORE_AT_START;
  r->at_start++;
  pthread_cond_broadcast(&r->cv);
  while (r->at_start < r->n && !r->aborted) pthread_cond_wait(&r->cv, &r->mu);
  c->state = CORE_RUNNING;
}

/* Under mu: TSR_RT_END, until every core has reached its end (or the run is
 * abandoned: a core waits forever). */
static void meet_at_end(ccore_t *c) {
  crun_t *r = c->run;
  c->state = CORE_AT_END;
  pthread_cond_broadcast(&r->cv);
  for (;;) {
    uint32_t there = 0;
    for (uint32_t i = 0; i < r->n; i++)
      there += r->core[i].state == CORE_AT_END || r->core[i].state == CORE_DONE;
    if (there == r->n) break;
    check_deadlock(r);
    if (r->aborted) break;
    pthread_cond_wait(&r->cv, &r->mu);
  }
}

static void remote_dma(ccore_t *c, uint32_t site, const int64_t *desc) {
  crun_t *r = c->run;
  uint32_t rank = (uint32_t)desc[TSR_RDMA_RANK];
  tsr_dtype_t dtype = (tsr_dtype_t)desc[TSR_RDMA_DTYPE];
  const int64_t *dims = desc + TSR_RDMA_DIMS;
  pthread_mutex_lock(&r->mu);
  ccore_t *t = target_core(c, site, desc[TSR_RDMA_DEVICE], -1);
  uint64_t root = (uint64_t)desc[TSR_RDMA_ROOT];
  pthread_mutex_unlock(&r->mu);
  if (!t) return;
  /* The target registered its memory before TSR_RT_START and keeps it until
   * TSR_RT_END: reading its table needs no lock. */
  if (root >= t->num_roots || !t->roots[root]) {
    pthread_mutex_lock(&r->mu);
    kernel_error(c, site, TSR_DIAG_INTERNAL,
                 "internal error: the destination memory of the DMA is unknown");
    pthread_mutex_unlock(&r->mu);
    return;
  }
  size_t es = tsr_dtype_size(dtype);
  uint8_t *dst = (uint8_t *)t->roots[root] + desc[TSR_RDMA_OFFSET] * (int64_t)es;
  const void *src = (const void *)(uintptr_t)desc[TSR_RDMA_SRC];
  bool ok = true;
  if (desc[TSR_RDMA_ADD])
    ok = tsr_blockops_add_into(dtype, rank, dims, dst, dims + 2 * rank, src, dims + rank);
  else
    tsr_blockops_copy(es, rank, dims, dst, dims + 2 * rank, src, dims + rank);
  int64_t bytes = (int64_t)es;
  for (uint32_t d = 0; d < rank; d++) bytes *= dims[d];
  pthread_mutex_lock(&r->mu);
  if (!ok)
    kernel_error(c, site, TSR_DIAG_OUT_OF_MEMORY,
                 "out of memory adding a DMA into its destination");
  signal_locked(c, t, (uint64_t)desc[TSR_RDMA_SEM], bytes);
  if (desc[TSR_RDMA_SEND] >= 0) signal_locked(c, c, (uint64_t)desc[TSR_RDMA_SEND], bytes);
  pthread_mutex_unlock(&r->mu);
}

typedef struct print_ctx {
  const site_info_t *site;
  const int64_t *addrs;
} print_ctx_t;

static tsr_print_value_t print_operand(void *ctx, uint32_t i) {
  const print_ctx_t *pc = ctx;
  const struct print_operand *o = &pc->site->operands[i];
  return (tsr_print_value_t){o->dtype, (const void *)(uintptr_t)pc->addrs[i], o->elements,
                             o->vector};
}

static void print(ccore_t *c, uint32_t site, const int64_t *addrs) {
  crun_t *r = c->run;
  print_ctx_t ctx = {&r->info->sites[site], addrs};
  tsr_interp_print(r->out, ctx.site->text ? ctx.site->text : "", ctx.site->num_operands,
                   print_operand, &ctx);
}

/* How many of its grid steps core c has begun when it runs the grid point
 * numbered `lin`: the inverse of the compiled code's walk (lower/emit_grid.c,
 * core_grid_point), which runs its step s at the point made of s's outer,
 * split and inner coordinates, the leading parallel ones through the run's
 * order. 0 for a point not in the core's share. */
static uint64_t core_steps_begun(const crun_t *r, const ccore_t *c, int64_t lin) {
  const uint32_t rank = r->info->grid_rank;
  int64_t v[TSR_MAX_RANK];
  for (uint32_t g = 0; g < rank; g++)
    if (r->grid[g] <= 0) return 0;
  tsr_interp_unflatten(lin, rank, r->grid, v);
  if (r->unorder)
    for (uint64_t g = 0, off = 0; g < r->npar; off += (uint64_t)r->grid[g], g++)
      v[g] = r->unorder[off + (uint64_t)v[g]];
  uint64_t o = 0, p = 0, i = 0, inner = 1;
  for (uint32_t g = 0; g < r->split.first; g++) o = o * (uint64_t)r->grid[g] + (uint64_t)v[g];
  for (uint32_t g = r->split.first; g < r->split.end; g++)
    p = p * (uint64_t)r->grid[g] + (uint64_t)v[g];
  for (uint32_t g = r->split.end; g < rank; g++) {
    i = i * (uint64_t)r->grid[g] + (uint64_t)v[g];
    inner *= (uint64_t)r->grid[g];
  }
  if (p < (uint64_t)c->plo || p >= (uint64_t)c->phi) return 0;
  uint64_t mine = (uint64_t)(c->phi - c->plo) * inner;
  return o * mine + (p - (uint64_t)c->plo) * inner + i + 1;
}

/* Under mu, after a grant: this core's count of grid steps begun, and
 * whether a progress call is due (made by runtime_call, outside mu). */
static void note_progress(ccore_t *c, uint32_t site, int64_t point) {
  crun_t *r = c->run;
  uint64_t begun = core_steps_begun(r, c, site == r->info->num_sites ? point : c->lin);
  if (begun > c->begun) {
    r->done += begun - c->begun;
    c->begun = begun;
  }
  if (tsr_bounds_progress_due(&r->bounds)) {
    c->progress_due = true;
    c->progress_at = r->done;
  }
}

/* Under mu: TSR_RT_STEP. A new grant of steps for this core (the budget
 * left after this step), or -1 when a run bound is reached (reported here,
 * and every core stops: waits return at once, loops end at their next
 * step) or the run was abandoned. */
static int64_t take_steps(ccore_t *c, uint32_t site, int64_t point) {
  crun_t *r = c->run;
  if (r->aborted) return -1;
  if (site == r->info->num_sites) c->lin = point; /* a grid step: the point it starts */
  uint64_t g = tsr_bounds_grant(&r->bounds, &c->meter, r->n);
  if (g && r->bounds.progress) note_progress(c, site, point);
  /* With a grid-step callback every step comes here (runtime_call calls it). */
  if (g && r->on_grid_step) return 0;
  if (g) return (int64_t)TSR_MIN(g - 1, (uint64_t)INT64_MAX);
  core_where_t w;
  tsr_diag_reopen(&r->diag, site, TSR_DIAG_ERROR);
  tsr_diag_run_stopped(&r->diag, where_of(c, site, &w), &r->bounds);
  r->aborted = true;
  pthread_cond_broadcast(&r->cv);
  return -1;
}

/* Under mu: TSR_RT_VISIT. Core c starts block `block` of output `operand`
 * at its step `step`: a block this core started before (and so left, its
 * copy out done) is revisited, an error unless the output's revisit mode is
 * any; one another core of the device started is written by two cores, a
 * warning; both as the interpreter reports them (interp/grid.c). */
static void visit_block(ccore_t *c, int64_t operand, int64_t block, int64_t step) {
  crun_t *r = c->run;
  const tsr_cpu_info_t *info = r->info;
  if (r->aborted || operand < 0 || (uint64_t)operand >= info->num_operands) return;
  int64_t key[3] = {c->device, operand, block};
  visit_t *v;
  HASH_FIND(hh, r->visited, key, sizeof key, v);
  if (!v) {
    v = tsr_calloc(1, sizeof *v);
    if (!v) return; /* not checked: the run goes on */
    memcpy(v->key, key, sizeof key);
    v->core = c->index;
    v->first_step = step;
    HASH_ADD(hh, r->visited, key, sizeof v->key, v);
    return;
  }
  if (v->core == c->index && info->revisit_any[operand]) return; /* restored, allowed */
  /* two cores writing the block of an output written along a split dim:
   * the run's parallel_revisit warning has said so (report_parallel_revisits) */
  if (v->core != c->index &&
      tsr_ir_parallel_revisit_dim(info->grid_rank, r->grid, info->semantics,
                                  info->fixed_dims[operand]) >= 0)
    return;
  int64_t bi[TSR_MAX_RANK];
  const uint32_t rank = info->rank[operand];
  int64_t rest = block;
  for (uint32_t d = rank; d-- > 0;) {
    bi[d] = rest % info->blocks[operand][d];
    rest /= info->blocks[operand][d];
  }
  char text[96], what[48];
  tsr_diag_format_dims(text, sizeof text, bi, rank);
  snprintf(what, sizeof what, "out %%%s", info->operand_names[operand]);
  core_where_t w;
  (void)where_of(c, info->num_sites, &w);
  w.where.what = what;
  const tsr_diag_where_t *at = &w.where;
  bool stop;
  if (v->core != c->index)
    stop = tsr_diag_report(&r->diag, at, TSR_DIAG_CORE_CONFLICT, TSR_DIAG_WARNING,
                           "output block %s is written by core %u at step %" PRId64
                           " and by core %u from step %" PRId64 ": the cores of a device "
                           "must write disjoint output blocks (the last copy out wins)",
                           text, c->index, step, v->core, v->first_step);
  else
    stop = tsr_diag_report(&r->diag, at, TSR_DIAG_REVISIT, TSR_DIAG_ERROR,
                           "output block %s is revisited at step %" PRId64 "; it was first "
                           "written at step %" PRId64 " and already copied out (writes to an "
                           "output block must happen in consecutive grid steps)",
                           text, step, v->first_step);
  stop_if(r, stop);
}

/* Before any core runs: the parallel_revisit warning of every output whose
 * block index cannot change along a grid dim a TPU may split between
 * TensorCores, at its declaration, as the interpreter gives it
 * (tsr_grid_check_parallel_revisits). The site is the grid step's, which
 * tsr_diag_parallel_revisit leaves open for the next warning. */
static void report_parallel_revisits(crun_t *r) {
  const tsr_cpu_info_t *info = r->info;
  int64_t first[TSR_MAX_RANK] = {0};
  for (uint32_t j = 0; j < info->num_operands && !r->aborted; j++) {
    int32_t dim = tsr_ir_parallel_revisit_dim(info->grid_rank, r->grid, info->semantics,
                                              info->fixed_dims[j]);
    if (dim < 0) continue;
    const decl_info_t *di = &info->decls[info->operand_decl[j]];
    tsr_diag_where_t where = {info->num_sites, di->loc, di->what, 0, 0,
                              first,           info->grid_rank, NULL};
    stop_if(r, tsr_diag_parallel_revisit(&r->diag, &where, (uint32_t)dim,
                                         info->semantics[dim], r->grid[dim]));
  }
}

/* TSR_RT_SORT: the sort or argsort op `d` describes (lower_api.h). */
static void sort_call(ccore_t *c, uint32_t site, const int64_t *d) {
  const uint32_t rank = (uint32_t)d[TSR_RSORT_RANK], keys = (uint32_t)d[TSR_RSORT_KEYS];
  const int64_t *dims = d + TSR_RSORT_DIMS, *key = dims + rank;
  tsr_dtype_t dtypes[TSR_SORT_MAX_KEYS];
  const void *src[TSR_SORT_MAX_KEYS];
  for (uint32_t k = 0; k < keys && k < TSR_SORT_MAX_KEYS; k++) {
    dtypes[k] = (tsr_dtype_t)key[2 * k];
    src[k] = (const void *)(uintptr_t)key[2 * k + 1];
  }
  void *dst = (void *)(uintptr_t)d[TSR_RSORT_DST];
  const uint32_t axis = (uint32_t)d[TSR_RSORT_AXIS];
  tsr_status_t st = tsr_sort_op(c->run->info->sort_scratch, d[TSR_RSORT_ARGSORT] != 0,
                                     TSR_MIN(keys, (uint32_t)TSR_SORT_MAX_KEYS), dtypes, src,
                                     dst, rank, dims, axis);
  if (!st) return;
  pthread_mutex_lock(&c->run->mu);
  kernel_error(c, site,
               tsr_status_code(st) == TSR_OUT_OF_MEMORY ? TSR_DIAG_OUT_OF_MEMORY
                                                        : TSR_DIAG_UNIMPLEMENTED,
               "%s", tsr_status_message(st));
  pthread_mutex_unlock(&c->run->mu);
  tsr_status_free(st);
}

/* How far the run lets accesses of sr reach: its padded shape (into out). */
static const int64_t *ref_limit(const crun_t *r, const site_ref_t *sr, int64_t *out) {
  if (!r->padded || !sr->paddable) return sr->dims;
  tsr_padded_dims(r->double_rows, sr->dtype, sr->rank, sr->dims, out);
  return out;
}

/* The ref of site s whose indices hold position pos, or NULL. */
static const site_ref_t *site_ref_at(const site_info_t *s, int64_t pos) {
  const site_ref_t *sr = NULL;
  for (uint32_t i = 0; i < s->num_refs; i++)
    if (pos >= s->refs[i].first && pos < (int64_t)(s->refs[i].first + s->refs[i].count))
      sr = &s->refs[i];
  return sr;
}

/* TSR_RT_OUTSIDE: the view of the op at `site` whose indices start at
 * `first` reaches outside its ref where the run's options allow it: the
 * interpreter's warning (interp/view.c, tsr_view_clip); under mu. */
static void outside_warning(ccore_t *c, uint32_t site, int64_t first, bool write) {
  const site_ref_t *sr = site_ref_at(&c->run->info->sites[site], first);
  if (!sr) return;
  char what[96], shape[96], limit[96];
  int64_t lim[TSR_MAX_RANK];
  if (sr->side)
    snprintf(what, sizeof what, "%%%s (the DMA's %s)", sr->name, sr->side);
  else
    snprintf(what, sizeof what, "%%%s", sr->name);
  tsr_diag_format_dims(shape, sizeof shape, sr->dims, sr->rank);
  tsr_diag_format_dims(limit, sizeof limit, ref_limit(c->run, sr, lim), sr->rank);
  core_where_t w;
  const tsr_diag_where_t *at = where_of(c, site, &w);
  bool stop;
  if (write)
    stop = tsr_diag_report(&c->run->diag, at, TSR_DIAG_OUT_OF_BOUNDS, TSR_DIAG_WARNING,
                           "write reaches outside %s (shape %s) into its padding (to %s): "
                           "the elements outside are dropped",
                           what, shape, limit);
  else
    stop = tsr_diag_report(&c->run->diag, at, TSR_DIAG_OUT_OF_BOUNDS, TSR_DIAG_WARNING,
                           "read reaches outside %s (shape %s): the elements outside give "
                           "the uninitialized value",
                           what, shape);
  stop_if(c->run, stop);
}

/* Index `pos` of the op at `site` starts at `start`, outside its ref; under
 * mu. The interpreter's report (interp/view.c, interp/dma.c), with the
 * same record. A DMA view of dynamic size passes pos + 2^32 and its size. */
static void out_of_bounds(ccore_t *c, uint32_t site, int64_t start, int64_t pos_arg,
                          int64_t size) {
  const site_info_t *s = &c->run->info->sites[site];
  const bool sized = pos_arg >> 32 != 0;
  const int64_t pos = pos_arg & 0xffffffff;
  const site_ref_t *sr = site_ref_at(s, pos);
  if (!sr || pos >= s->num_indices) {
    kernel_error(c, site, TSR_DIAG_OUT_OF_BOUNDS, "index %lld out of bounds", (long long)start);
    return;
  }
  const uint32_t d = (uint32_t)(pos - sr->first);
  const tsr_index_t *ix = &s->indices[pos];
  if (sized && size < 0) {
    kernel_error(c, site, TSR_DIAG_BAD_VALUE, "DMA %s view of %%%s: dimension %u has the "
                 "negative size %lld", sr->side ? sr->side : "", sr->name, d, (long long)size);
    return;
  }
  tsr_diag_detail_t detail = {.buffer = sr->name, .index_rank = sr->rank};
  for (uint32_t k = 0; k < sr->rank && k < sr->count; k++) {
    const tsr_index_t *x = &s->indices[sr->first + k];
    int64_t n = sized && k == d ? size : tsr_index_extent(x, sr->dims[k]);
    int64_t st = x->kind == TSR_INDEX_FULL || x->stride < 1 ? 1 : x->stride;
    int64_t lo = k == d ? start : x->kind == TSR_INDEX_FULL ? 0 : x->start;
    detail.index_lo[k] = lo;
    /* another dynamic start is not known here: its static part */
    detail.index_hi[k] = lo + (n - 1) * st + 1;
  }
  int64_t count = sized ? size : tsr_index_extent(ix, sr->dims[d]);
  int64_t stride = ix->kind == TSR_INDEX_FULL || ix->stride < 1 ? 1 : ix->stride;
  char text[400];
  int64_t lim[TSR_MAX_RANK];
  tsr_diag_format_out_of_bounds(text, sizeof text, sr->name, sr->side, sr->rank, sr->dims,
                                sized ? NULL : ref_limit(c->run, sr, lim), d,
                                ix->kind == TSR_INDEX_POINT, start, count, stride);
  core_where_t w;
  tsr_diag_where_t where = *where_of(c, site, &w);
  where.detail = &detail;
  stop_if(c->run, tsr_diag_report(&c->run->diag, &where, TSR_DIAG_OUT_OF_BOUNDS,
                                  TSR_DIAG_ERROR, "%s", text));
}

/* Decl `decl`'s index map (ending at `site`) gives block index bi, out of
 * range; under mu. Reported at the operand, as the interpreter does. */
static void block_range(ccore_t *c, uint32_t site, int64_t decl, const int64_t *bi,
                        bool read_uninit) {
  const tsr_cpu_info_t *info = c->run->info;
  if (decl < 0 || decl >= info->num_decls) return;
  const decl_info_t *di = &info->decls[decl];
  char text[400];
  tsr_diag_format_block_range(text, sizeof text, di->rank, bi, di->array, di->block);
  core_where_t w;
  tsr_diag_where_t where = *where_of(c, site, &w);
  where.loc = di->loc;
  where.what = di->what;
  if (read_uninit) /* an input under oob_reads_uninit (interp/grid.c) */
    stop_if(c->run, tsr_diag_report(&c->run->diag, &where, TSR_DIAG_OUT_OF_BOUNDS,
                                    TSR_DIAG_WARNING,
                                    "%s: the block reads as the uninitialized value", text));
  else
    stop_if(c->run, tsr_diag_report(&c->run->diag, &where, TSR_DIAG_OUT_OF_BOUNDS,
                                     TSR_DIAG_ERROR, "%s", text));
}

/* TSR_RT_WIDE_ENTER under r->mu: the address of this core's instance. */
static int64_t wide_enter(ccore_t *c, uint32_t site, uint32_t arg, int64_t dtype,
                          int64_t elements) {
  crun_t *r = c->run;
  cwide_at_t *at = NULL;
  for (uint32_t i = 0; i < c->num_wide_at && !at; i++)
    if (c->wide_at[i].site == site && c->wide_at[i].arg == arg) at = &c->wide_at[i];
  if (!at) {
    if (c->num_wide_at == c->wide_at_capacity) {
      uint32_t cap = c->wide_at_capacity ? 2 * c->wide_at_capacity : 4;
      cwide_at_t *w = tsr_realloc(c->wide_at, cap * sizeof *w);
      if (!w) goto oom;
      c->wide_at = w;
      c->wide_at_capacity = cap;
    }
    at = &c->wide_at[c->num_wide_at++];
    *at = (cwide_at_t){.site = site, .arg = arg};
  }
  uint32_t entry = at->entries++;
  cwide_t *w = r->wide;
  while (w && !(w->device == c->device && w->site == site && w->arg == arg && w->entry == entry))
    w = w->next;
  if (!w) {
    /* the first core of the device here: a fresh, uninitialized buffer */
    if (dtype < 0 || dtype >= TSR_DTYPE_COUNT || elements < 0) goto oom;
    size_t es = tsr_dtype_size((tsr_dtype_t)dtype);
    size_t bytes = (size_t)elements * es;
    w = tsr_calloc(1, sizeof *w);
    if (w) w->data = tsr_aligned_alloc(64, bytes ? (bytes + 63) / 64 * 64 : 64);
    if (!w || !w->data) {
      tsr_free(w);
      goto oom;
    }
    unsigned char elem[8];
    tsr_blockops_uninit_value((tsr_dtype_t)dtype, r->uninit, elem);
    tsr_blockops_fill(es, w->data, elem, (size_t)elements);
    *w = (cwide_t){.next = r->wide, .device = c->device, .site = site, .arg = arg,
                   .entry = entry, .data = w->data};
    r->wide = w;
  }
  at->cur = w;
  return (int64_t)(uintptr_t)w->data;
oom:;
  core_where_t where;
  stop_if(r, tsr_diag_report(&r->diag, where_of(c, site, &where), TSR_DIAG_OUT_OF_MEMORY,
                             TSR_DIAG_ERROR, "out of memory allocating a device-wide buffer"));
  r->aborted = true;
  return (int64_t)(uintptr_t)r->wide_fallback;
}

/* TSR_RT_WIDE_EXIT under r->mu. */
static void wide_exit(ccore_t *c, uint32_t site, uint32_t arg) {
  crun_t *r = c->run;
  for (uint32_t i = 0; i < c->num_wide_at; i++) {
    cwide_at_t *at = &c->wide_at[i];
    if (at->site != site || at->arg != arg) continue;
    cwide_t *w = at->cur;
    at->cur = NULL;
    if (!w || ++w->exits < r->cores) return;
    cwide_t **p = &r->wide;
    while (*p != w) p = &(*p)->next;
    *p = w->next;
    tsr_free(w->data);
    tsr_free(w);
    return;
  }
}

static int64_t runtime_call(void *ctx, int64_t call, int64_t a, int64_t b, int64_t c,
                            int64_t d) {
  ccore_t *me = ctx;
  crun_t *r = me->run;
  /* a is slot|site, or the site alone (print, assert, remote DMA); a site
   * out of range (not from tessera's code generator) becomes site 0. */
  const uint64_t slot = (uint64_t)a & 0xffffffffu;
  const bool site_only = call == TSR_RT_PRINT || call == TSR_RT_ASSERT ||
                         call == TSR_RT_REMOTE_DMA || call == TSR_RT_STEP ||
                         call == TSR_RT_SORT || call == TSR_RT_OUT_OF_BOUNDS ||
                         call == TSR_RT_BLOCK_RANGE || call == TSR_RT_OUTSIDE;
  uint64_t site64 = site_only ? (uint64_t)a : (uint64_t)a >> 32;
  const uint32_t site = site64 < r->info->num_sites ||
                                (call == TSR_RT_STEP && site64 == r->info->num_sites)
                            ? (uint32_t)site64
                            : 0;
  int64_t result = 0;
  if (call == TSR_RT_REGISTER) { /* this core's own table, before TSR_RT_START */
    if ((uint64_t)a >= me->roots_capacity) {
      uint32_t cap = (uint32_t)a + 16;
      void **roots = tsr_realloc(me->roots, cap * sizeof *roots);
      if (!roots) return 0; /* a remote DMA into it then reports the error */
      memset(roots + me->roots_capacity, 0, (cap - me->roots_capacity) * sizeof *roots);
      me->roots = roots;
      me->roots_capacity = cap;
    }
    me->roots[a] = (void *)(uintptr_t)b;
    if ((uint32_t)a >= me->num_roots) me->num_roots = (uint32_t)a + 1;
    return 0;
  }
  if (call == TSR_RT_REMOTE_DMA) {
    remote_dma(me, site, (const int64_t *)(uintptr_t)b);
    return 0;
  }
  if (call == TSR_RT_SORT) {
    sort_call(me, site, (const int64_t *)(uintptr_t)b);
    return 0;
  }
  pthread_mutex_lock(&r->mu);
  switch (call) {
    case TSR_RT_SIGNAL: {
      ccore_t *t = target_core(me, site, c, d);
      if (t) signal_locked(me, t, slot, b);
      break;
    }
    case TSR_RT_WAIT: wait_locked(me, slot, b, site); break;
    case TSR_RT_READ: result = *sem_at(r, (uint32_t)(me - r->core), slot); break;
    case TSR_RT_BARRIER:
      for (uint32_t i = 0; i < r->cores; i++)
        if (i != me->index) signal_locked(me, &r->core[me->device * r->cores + i], slot, 1);
      wait_locked(me, slot, (int64_t)r->cores - 1, site);
      break;
    case TSR_RT_PRINT:
      if (!r->aborted) print(me, site, (const int64_t *)(uintptr_t)b);
      break;
    case TSR_RT_ASSERT: {
      const char *text = r->info->sites[site].text;
      core_where_t w;
      stop_if(r, tsr_diag_assert_failed(&r->diag, where_of(me, site, &w), text ? text : ""));
      break;
    }
    case TSR_RT_OUT_OF_BOUNDS: out_of_bounds(me, site, b, c, d); break;
    case TSR_RT_BLOCK_RANGE:
      block_range(me, site, b, (const int64_t *)(uintptr_t)c, d != 0);
      break;
    case TSR_RT_OUTSIDE: outside_warning(me, site, b, c != 0); break;
    case TSR_RT_STEP: result = take_steps(me, site, b); break;
    case TSR_RT_VISIT: visit_block(me, a, b, c); break;
    case TSR_RT_START: meet_at_start(me); break;
    case TSR_RT_END: meet_at_end(me); break;
    case TSR_RT_WIDE_ENTER: result = wide_enter(me, site, (uint32_t)slot, b, c); break;
    case TSR_RT_WIDE_EXIT: wide_exit(me, site, (uint32_t)slot); break;
    default: break;
  }
  pthread_mutex_unlock(&r->mu);
  /* The progress callback, outside the run's lock, one call at a time. */
  if (me->progress_due) {
    me->progress_due = false;
    pthread_mutex_lock(&r->progress_mu);
    tsr_bounds_report_progress(&r->bounds, me->progress_at);
    pthread_mutex_unlock(&r->progress_mu);
  }
  /* The grid-step callback, outside the lock (it may take its own). */
  if (call == TSR_RT_STEP && site == r->info->num_sites && result >= 0 && r->on_grid_step) {
    int64_t point[TSR_MAX_RANK];
    uint64_t lin = (uint64_t)b;
    for (uint32_t g = r->info->grid_rank; g-- > 0;) {
      uint64_t n = r->grid[g] > 0 ? (uint64_t)r->grid[g] : 1;
      point[g] = (int64_t)(lin % n);
      lin /= n;
    }
    r->on_grid_step(r->on_grid_step_user, me->device, me->index, r->info->grid_rank, point);
  }
  return result;
}

static void *core_main(void *p) {
  ccore_t *c = p;
  crun_t *r = c->run;
  tsr_runtime_bind(r->binding); /* allocate as the caller's thread does */
  r->entry(c->args);
  pthread_mutex_lock(&r->mu);
  c->state = CORE_DONE;
  check_deadlock(r);
  pthread_cond_broadcast(&r->cv);
  pthread_mutex_unlock(&r->mu);
  return NULL;
}

/* The run's grid: dynamic extents are their prefetch operands' values now
 * (every device's the same), as the interpreter reads them (interp/run.c);
 * a negative one is the kernel's error, at the kernel. */
static tsr_status_t read_grid(const tsr_cpu_info_t *info, tsr_array_t *const *operands,
                              const tsr_interp_options_t *options, crun_t *r) {
  memcpy(r->grid, info->grid, sizeof r->grid);
  r->split = info->split;
  bool dynamic = false;
  uint32_t devices = options->devices ? options->devices : 1;
  const tsr_loc_t loc = info->sites[info->num_sites].loc;
  for (uint32_t d = 0; d < info->grid_rank; d++) {
    if (!info->grid_bound[d]) continue;
    uint32_t j = info->grid_bound[d] - 1;
    const tsr_array_t *a = operands[j];
    if (!a || !a->data || a->dtype != TSR_DTYPE_I32 || tsr_array_element_count(a) < devices)
      return TSR_STATUS(TSR_INVALID_ARGUMENT,
                        "kernel @%s: operand %u (grid dim %u's extent) is not an i32 scalar",
                        info->kernel_name, j, d);
    int32_t first = ((const int32_t *)a->data)[0];
    for (uint32_t dev = 1; dev < devices; dev++)
      if (((const int32_t *)a->data)[dev] != first)
        return TSR_STATUS_AT(TSR_UNIMPLEMENTED, loc,
                             "kernel @%s: grid dim %u's extent differs between devices (%d on "
                             "device 0, %d on device %u); not implemented",
                             info->kernel_name, d, first, ((const int32_t *)a->data)[dev], dev);
    if (first < 0)
      return TSR_STATUS_AT(TSR_KERNEL_ERROR, loc,
                           "kernel @%s: grid dim %u's extent (%%%s) is %d; a grid extent must "
                           "be >= 0",
                           info->kernel_name, d, info->operand_names[j], first);
    r->grid[d] = first;
    dynamic = true;
  }
  int64_t steps = 1;
  for (uint32_t d = 0; d < info->grid_rank; d++)
    if (!tsr_mul_i64(steps, r->grid[d], &steps))
      return TSR_STATUS_AT(TSR_KERNEL_ERROR, loc,
                           "kernel @%s: the grid's dynamic extents make more than 2^63 steps",
                           info->kernel_name);
  if (dynamic) r->split = tsr_ir_core_split(info->grid_rank, r->grid, info->semantics);
  return NULL;
}

tsr_status_t tsr_cpu_run(void (*entry)(void **), const tsr_cpu_info_t *info,
                         tsr_array_t *const *operands, void **args, uint32_t num_memrefs,
                         const tsr_interp_options_t *options) {
  return tsr_cpu_run_with(entry, info, operands, args, num_memrefs, options, NULL, NULL);
}

/* A host thread's share of the run: worker `i` (base/pool.c). */
static void worker_main(void *ctx, uint32_t i) {
  crun_t *r = ctx;
  tsr_runtime_binding_t *saved = tsr_runtime_bound();
  core_main(&r->core[i]);
  tsr_runtime_bind(saved);
}

/* How many host threads run the one core's split points (docs/semantics.md,
 * "Host threads"): 1 unless the kernel allows a split (info->host_split),
 * the run has one core on one device, no device-wide scoped buffers and no
 * grid-step callback (called in step order), and has two points or more;
 * then the option's count, at most one per point. */
static uint32_t workers_for(const crun_t *r, const tsr_interp_options_t *options, bool *asked) {
  const tsr_cpu_info_t *info = r->info;
  uint32_t devices = options->devices ? options->devices : 1;
  uint32_t cores = options->cores ? options->cores : 1;
  if (!info->host_split || devices * cores != 1 || info->wide_max_bytes || r->on_grid_step)
    return 1;
  uint64_t points = r->split.points;
  for (uint32_t g = r->split.first; g < r->split.end; g++)
    if (r->grid[g] <= 0) return 1;
  if (points < 2) return 1;
  uint32_t t = tsr_host_threads(options->threads);
  if (t < 2) return 1;
  *asked = true;
  if (!tsr_split_pays((tsr_split_cost_t *)&info->split_cost)) return 1;
  return points < t ? (uint32_t)points : t;
}

/* One run over `workers` host threads (1: the simulated cores' own, one
 * thread per core). With several, a run that reports anything (an error, a
 * warning, a stop) is abandoned: *redo is set, nothing is handed to
 * out_diag, and the caller runs it again on one thread, which then reports
 * what it reports in its order; `resume` carries the first run's start time
 * (the timeout) and its last progress (which never goes back). */
static tsr_status_t run_once(void (*entry)(void **), const tsr_cpu_info_t *info,
                             tsr_array_t *const *operands, void **args, uint32_t num_memrefs,
                             const tsr_interp_options_t *options, FILE *print_stream,
                             tsr_diag_sink_t *out_diag, uint32_t workers, tsr_bounds_t *resume,
                             bool *redo) {
  crun_t r;
  memset(&r, 0, sizeof r);
  r.info = info;
  TSR_RETURN_IF_ERROR(read_grid(info, operands, options, &r));
  uint64_t order_size = 0;
  TSR_RETURN_IF_ERROR(tsr_interp_parallel_order(options, info->kernel_name, info->grid_rank,
                                                r.grid, info->semantics, &r.order,
                                                &order_size));
  r.on_grid_step = options->on_grid_step;
  r.on_grid_step_user = options->on_grid_step_user;
  r.entry = entry;
  r.binding = tsr_runtime_bound();
  r.devices = options->devices ? options->devices : 1;
  r.cores = options->cores ? options->cores : 1;
  r.n = r.devices * r.cores;
  bool asked = false; /* whether splitting was weighed: then the run is timed for it */
  if (workers == 0) workers = workers_for(&r, options, &asked);
  if (workers > 1) r.n = workers; /* one device, one core: the workers share it */
  r.max_errors = options->max_errors ? options->max_errors : 20;
  r.padded = options->padded;
  r.double_rows = tsr_chip_doubles_tile_rows(options->chip);
  r.out = print_stream ? print_stream : stderr;
  r.core = tsr_calloc(r.n, sizeof *r.core);
  r.sems = tsr_calloc((size_t)r.n * (info->slots ? info->slots : 1), sizeof *r.sems);
  r.uninit = options->uninit;
  r.wide_fallback =
      info->wide_max_bytes ? tsr_aligned_alloc(64, (info->wide_max_bytes + 63) / 64 * 64) : NULL;
  const uint32_t nargs = num_memrefs + 6;
  void **all_args = tsr_calloc((size_t)r.n * nargs, sizeof *all_args);
  tsr_status_t status = tsr_diag_sink_initialize(&r.diag, info->kernel_name, info->num_sites,
                                                 r.devices, r.cores, r.max_errors, options->strict);
  if (status || !r.core || !r.sems || !all_args || (info->wide_max_bytes && !r.wide_fallback)) {
    tsr_diag_sink_deinitialize(&r.diag);
    tsr_free(r.wide_fallback);
    tsr_free(r.core);
    tsr_free(r.sems);
    tsr_free(r.order);
    tsr_free(all_args);
    tsr_status_free(status);
    return TSR_OOM();
  }
  pthread_mutex_init(&r.mu, NULL);
  pthread_cond_init(&r.cv, NULL);
  pthread_mutex_init(&r.progress_mu, NULL);
  tsr_bounds_start(&r.bounds, options);
  if (resume && resume->start > 0) {
    r.bounds.start = resume->start;
    r.bounds.progress_next = resume->progress_next;
    r.bounds.reported = resume->reported;
  }
  if (r.bounds.progress) {
    uint64_t total = r.devices;
    for (uint32_t g = 0; g < info->grid_rank; g++) total *= (uint64_t)r.grid[g];
    r.bounds.progress_total = total;
    while (r.npar < info->grid_rank && info->semantics[r.npar] == TSR_DIM_PARALLEL) r.npar++;
    if (r.order && order_size) {
      r.unorder = tsr_calloc(order_size, sizeof *r.unorder);
      if (r.unorder) {
        for (uint64_t g = 0, off = 0; g < r.npar; off += (uint64_t)r.grid[g], g++)
          for (int64_t k = 0; k < r.grid[g]; k++) r.unorder[off + (uint64_t)r.order[off + k]] = k;
      } else {
        r.bounds.progress = NULL; /* no memory: no progress, the run goes on */
      }
    }
  }
  for (uint32_t i = 0; i < r.n; i++) {
    ccore_t *c = &r.core[i];
    c->run = &r;
    c->device = workers > 1 ? 0 : i / r.cores;
    c->index = workers > 1 ? 0 : i % r.cores;
    c->uninit_zero = options->uninit == TSR_UNINIT_ZERO;
    c->order = (int64_t)(uintptr_t)r.order;
    c->fn = (int64_t)(uintptr_t)runtime_call;
    c->ctx = (int64_t)(uintptr_t)c;
    c->device_arg = (int32_t)c->device;
    c->core_arg = (int32_t)c->index;
    uint64_t lo, hi;
    tsr_ir_core_share(&r.split, r.cores, c->index, &lo, &hi);
    if (workers > 1) { /* worker i: the i-th contiguous part of the core's points */
      uint64_t part = hi - lo, wlo = lo + part * i / workers, whi = lo + part * (i + 1) / workers;
      lo = wlo;
      hi = whi;
    }
    c->plo = (int64_t)lo;
    c->phi = (int64_t)hi;
    c->args = all_args + (size_t)i * nargs;
    memcpy(c->args, args, num_memrefs * sizeof *args);
    void **s = c->args + num_memrefs;
    s[0] = &c->fn;
    s[1] = &c->ctx;
    s[2] = &c->device_arg;
    s[3] = &c->core_arg;
    s[4] = &c->plo;
    s[5] = &c->phi;
  }
  /* An aliased output starts as a copy of its input, before any core runs;
   * an unwindowed (hbm/any) output, which only DMAs write, holds the
   * uninitialized value, and so does a windowed one whose blocks the grid
   * cannot all visit (output_not_covered; the others get it block by
   * block). */
  for (uint32_t i = 0; i < num_memrefs && i < info->num_operands; i++) {
    int32_t a = info->alias[i];
    if (a >= 0 && operands[i]->data != operands[a]->data)
      memcpy(operands[i]->data, operands[a]->data, tsr_array_byte_size(operands[a]));
    if (a < 0 && info->out_copy_in && info->is_output[i] && !info->sem_count[i]) {
      /* blocks are copied in from the array (out_blocks_copied_in) */
      unsigned char elem[8];
      tsr_blockops_jax_uninit_value(operands[i]->dtype, options->uninit, elem);
      size_t es = tsr_dtype_size(operands[i]->dtype);
      tsr_blockops_fill(es, operands[i]->data, elem, tsr_array_byte_size(operands[i]) / es);
    } else if (a < 0 && info->fill_at_start[i]) {
      unsigned char elem[8];
      tsr_blockops_uninit_value(operands[i]->dtype, options->uninit, elem);
      size_t es = tsr_dtype_size(operands[i]->dtype);
      tsr_blockops_fill(es, operands[i]->data, elem, tsr_array_byte_size(operands[i]) / es);
    }
  }
  /* A semaphore input's counts start on each device's core 0 (a semaphore
   * output aliasing it names the same slots); docs/semantics.md. A count
   * below 0 is refused, as the interpreter refuses it. */
  for (uint32_t i = 0; !status && i < num_memrefs && i < info->num_operands; i++) {
    if (info->sem_first[i] == UINT64_MAX || info->is_output[i]) continue;
    const int32_t *counts = operands[i]->data;
    for (uint64_t e = 0; !status && e < (uint64_t)r.devices * info->sem_count[i]; e++)
      if (counts[e] < 0)
        status = TSR_STATUS(TSR_INVALID_ARGUMENT,
                            "kernel @%s operand %%%s: a semaphore's count is %d (element "
                            "%llu); a semaphore input holds counts >= 0 (a previous kernel's "
                            "output)",
                            info->kernel_name, info->operand_names[i], counts[e],
                            (unsigned long long)e);
    for (uint32_t d = 0; !status && d < r.devices; d++)
      for (uint64_t e = 0; e < info->sem_count[i]; e++)
        *sem_at(&r, d * r.cores, info->sem_first[i] + e) = counts[d * info->sem_count[i] + e];
  }
  if (!status) report_parallel_revisits(&r);
  uint64_t started_ns = tsr_split_clock_ns();
  if (status) {
    /* refused before any core ran */
  } else if (r.n == 1) {
    core_main(&r.core[0]);
  } else if (workers > 1) {
    tsr_pool_run(r.n, worker_main, &r);
  } else {
    uint32_t started = 0;
    for (; started < r.n; started++)
      if (pthread_create(&r.core[started].thread, NULL, core_main, &r.core[started]) != 0) break;
    if (started < r.n) {
      status = TSR_STATUS(TSR_RESOURCE_EXHAUSTED, "cannot start a thread for each of %u cores",
                          r.n);
      pthread_mutex_lock(&r.mu);
      for (uint32_t i = started; i < r.n; i++) r.core[i].state = CORE_DONE;
      r.aborted = true;
      pthread_cond_broadcast(&r.cv);
      pthread_mutex_unlock(&r.mu);
    }
    for (uint32_t i = 0; i < started; i++) pthread_join(r.core[i].thread, NULL);
  }
  /* A run that weighed splitting teaches the next whether it pays. */
  if (asked && !status && !r.aborted)
    tsr_split_learn((tsr_split_cost_t *)&info->split_cost, tsr_split_clock_ns() - started_ns,
                    r.split.points, workers > 1 ? workers : 1);
  /* Several workers: a run that reported anything is run again, on one
   * thread, so that what it reports, and in which order, is a serial run's. */
  if (workers > 1 && !status &&
      (r.aborted || r.diag.errors.count || r.diag.warnings.count || r.diag.failed)) {
    *redo = true;
    if (resume) *resume = r.bounds;
    out_diag = NULL;
  }
  /* The last progress call: every step ran unless the run was abandoned. */
  if (!*redo && !status && r.bounds.progress)
    tsr_bounds_report_progress(&r.bounds, r.aborted ? r.done : r.bounds.progress_total);
  if (!status && !*redo) status = tsr_diag_sink_status(&r.diag);
  /* A semaphore output's array: its counts at the end, summed over each
   * device's cores (DMAs were copied when they started). */
  for (uint32_t i = 0; !status && i < num_memrefs && i < info->num_operands; i++) {
    if (info->sem_first[i] == UINT64_MAX || !info->is_output[i]) continue;
    int32_t *counts = operands[i]->data;
    for (uint32_t d = 0; d < r.devices; d++)
      for (uint64_t e = 0; e < info->sem_count[i]; e++) {
        int64_t sum = 0;
        for (uint32_t c = 0; c < r.cores; c++)
          sum += *sem_at(&r, d * r.cores + c, info->sem_first[i] + e);
        counts[d * info->sem_count[i] + e] = sum > INT32_MAX ? INT32_MAX : (int32_t)sum;
      }
  }
  if (out_diag) tsr_diag_sink_move(&r.diag, out_diag);
  tsr_diag_sink_deinitialize(&r.diag);
  pthread_cond_destroy(&r.cv);
  pthread_mutex_destroy(&r.mu);
  pthread_mutex_destroy(&r.progress_mu);
  tsr_free(r.unorder);
  for (uint32_t i = 0; i < r.n; i++) {
    tsr_free(r.core[i].roots);
    tsr_free(r.core[i].wide_at);
  }
  while (r.wide) { /* instances some core of their device never entered */
    cwide_t *next = r.wide->next;
    tsr_free(r.wide->data);
    tsr_free(r.wide);
    r.wide = next;
  }
  tsr_free(r.wide_fallback);
  visit_t *v, *tmp;
  HASH_ITER(hh, r.visited, v, tmp) {
    HASH_DEL(r.visited, v);
    tsr_free(v);
  }
  tsr_free(r.core);
  tsr_free(r.sems);
  tsr_free(r.order);
  tsr_free(all_args);
  return status;
}

tsr_status_t tsr_cpu_run_with(void (*entry)(void **), const tsr_cpu_info_t *info,
                              tsr_array_t *const *operands, void **args, uint32_t num_memrefs,
                              const tsr_interp_options_t *options, FILE *print_stream,
                              tsr_diag_sink_t *out_diag) {
  tsr_interp_options_t defaults;
  if (!options) {
    tsr_interp_options_initialize(&defaults);
    options = &defaults;
  }
  bool redo = false;
  tsr_bounds_t resume;
  memset(&resume, 0, sizeof resume);
  tsr_status_t s = run_once(entry, info, operands, args, num_memrefs, options, print_stream,
                            out_diag, 0, &resume, &redo);
  if (!redo) return s;
  tsr_status_free(s);
  redo = false;
  return run_once(entry, info, operands, args, num_memrefs, options, print_stream, out_diag, 1,
                  &resume, &redo);
}
