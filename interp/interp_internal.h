/* What the interpreter's files share: the prepared program (instructions,
 * value and ref tables, the grid pipeline's per-operand plans), the state of
 * one run, and the functions its files call in each other. A program is
 * immutable once prepared. Private to interp/; runtime/ sees only
 * interp/interp_runtime.h.
 *
 * Layering: a file calls only the files below it (and base/, ir/), never
 * one above; blockops.c, bounds.c, print.c, trace.c and diag.c call no other
 * file of interp/.
 *   prepare.c   builds a program from a verified kernel
 *   frame.c     where each value's buffer sits in the run's frame
 *   budget.c    the chip's VMEM and SMEM against what a program keeps live
 *   bind.c      a prepared program bound to another kernel with its bytes
 *   run.c       entry point: setup, teardown, end-of-run checks, status
 *   sched.c     the scheduler of cores; deadlock detection
 *   grid.c      one core's walk through the grid; block copies in and out
 *   exec.c      the instruction loop (index maps included)
 *   dma.c       semaphores, DMAs, barriers
 *   view.c      views, loads, stores: bounds and uninitialized checks
 *   race.c      the race detector and its hooks
 *   trace.c, print.c, blockops.c, bounds.c
 *   diag.c      the diagnostics sink (interp/diag.h), shared with runtime/ */
#ifndef TESSERA_INTERP_INTERNAL_H
#define TESSERA_INTERP_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "base/pool.h"
#include "base/sort.h"
#include "interp/blockops.h"
#include "interp/interp_runtime.h"
#include "ir/ir.h"
#include "tessera/interp.h"

/* Instruction codes: what exec.c's loop dispatches on. prepare.c's family
 * handlers choose them (an op of ir/ops.def compiles to one or more of
 * these, or to none); several ops share one where exec does the same work
 * (all unary ops are XOP_UNARY, running the block loop prepare chose).
 * exec.c's switch must name every code (-Wswitch-enum as an error there). */
typedef enum xop {
  /* instructions of ops */
  XOP_PROGRAM_ID,         /* r = this step's index along plan->axis */
  XOP_NUM_PROGRAMS,       /* r = the grid's size along plan->axis */
  XOP_DEVICE_ID,
  XOP_CORE_ID,
  XOP_LOAD,               /* r = the view_plan's view of a ref */
  XOP_STORE,              /* the view of a ref = b */
  XOP_UNARY,              /* r = fn.unary(a) */
  XOP_BINARY,             /* r = fn.binary(a, b) (elementwise and compare) */
  XOP_SELECT,             /* r = a ? b : c */
  XOP_CONVERT,            /* r = a converted from dtype to rdtype */
  XOP_IOTA,
  XOP_STRIDED_COPY,       /* r = a through src_strides (broadcast, transpose) */
  XOP_SLICE,
  XOP_CONCATENATE,
  XOP_ROLL,
  XOP_GATHER,
  XOP_SCATTER,            /* r = a, then b's positions along plan->axis set to c */
  XOP_SORT,               /* r = a sorted along plan->axis (base/sort.h) */
  XOP_ARGSORT,            /* r = the order of plan->operands along plan->axis */
  XOP_REDUCE,             /* the reduction of opcode over plan->axes_mask */
  XOP_ARG_REDUCE,         /* argmax/argmin (opcode) along plan->axis */
  XOP_DOT,
  XOP_PRINT,
  XOP_ASSERT,
  XOP_MULTIPLE_OF,        /* r = a; a kernel error unless a is a multiple of
                             *(const int64_t *)plan */
  XOP_DMA_START,
  XOP_DMA_WAIT,
  XOP_SEM_SIGNAL,
  XOP_SEM_WAIT,
  XOP_SEM_READ,
  XOP_BARRIER_SIGNAL,     /* core_barrier, first half: signal every other core */
  XOP_BARRIER_WAIT,       /* core_barrier, second half: wait for cores - 1 */
  /* the interpreter's own */
  XOP_END,                /* leave exec() */
  XOP_JMP,                /* pc = target */
  XOP_JMP_IF_NOT,         /* if !a: pc = target */
  XOP_MOVE,               /* copy values (region arguments/results) */
  XOP_FOR_INIT,           /* r = a (lo); if !(a < b) pc = target; checks c > 0 */
  XOP_FOR_NEXT,           /* if r + c < b: r += c, pc = target */
  XOP_SCOPE_ENTER,        /* fresh (uninitialized) scoped buffers */
  XOP_SCOPE_EXIT,
  XOP_ALIAS,              /* vals[r] = vals[a] (reshape, bitcast) */
  XOP_STEP,               /* a loop iteration starts: one step (run bounds) */
  XOP_COUNT
} xop_t;
_Static_assert(TSR_OP_COUNT <= 256, "insn_t.opcode is one byte");

#define NO_VALUE UINT32_MAX

/* One index of a view at run time: static or from a value. */
typedef struct view_index {
  uint8_t kind;     /* tsr_index_kind_t */
  uint32_t value;   /* dynamic start value id, or NO_VALUE */
  uint32_t size_value; /* dynamic size value id (DMA views), or NO_VALUE */
  int64_t start, size, stride;
} view_index_t;

/* load/store/slice: a view of a ref (or of a value, for slice). */
typedef struct view_plan {
  uint32_t ref;    /* ref index (load/store), or NO_VALUE for slice */
  uint32_t rank;   /* of the ref/value viewed */
  int64_t dims[TSR_MAX_RANK]; /* of the ref/value viewed */
  int64_t strides[TSR_MAX_RANK]; /* its dense row-major strides */
  view_index_t idx[TSR_MAX_RANK];
  uint32_t mask;   /* mask value id or NO_VALUE */
  bool value_scalar; /* store: the stored value is a scalar (splat) */
} view_plan_t;

/* Generic shape payload for shape ops. */
typedef struct shape_plan {
  uint32_t rank;            /* of the result (or operand, see op) */
  int64_t dims[TSR_MAX_RANK];
  int64_t strides[TSR_MAX_RANK];     /* dense strides of dims */
  int64_t src_strides[TSR_MAX_RANK]; /* broadcast/transpose: src strides per result dim */
  uint32_t src_rank;
  int64_t src_dims[TSR_MAX_RANK];
  uint32_t axis;            /* roll/gather/argmax/concatenate/iota */
  uint32_t stride_axis;     /* roll with a stride: the axis whose index k adds
                               k * stride to the shift */
  int64_t stride;           /* roll: 0 without a stride */
  uint32_t axes_mask;       /* reductions */
  int64_t m, k, n;          /* dot */
  uint32_t *operands;       /* concatenate, argsort: value ids */
  tsr_dtype_t *dtypes;      /* argsort: each key's dtype */
  int64_t *axis_sizes;      /* concatenate: each operand's size along axis */
  uint32_t num_operands;
} shape_plan_t;

/* A single semaphore: ref, one point index per dim, and the optional amount,
 * device and core operands of semaphore ops. */
typedef struct sem_plan {
  uint32_t ref;
  uint32_t rank;
  int64_t dims[TSR_MAX_RANK];
  view_index_t idx[TSR_MAX_RANK];
  uint32_t amount, device, core; /* value ids or NO_VALUE */
} sem_plan_t;

typedef struct dma_plan {
  view_plan_t src, dst;
  sem_plan_t sem, send;
  bool has_send, add;
  uint32_t device; /* value id or NO_VALUE */
  int64_t bytes;   /* of the dst view (its bound, with a dynamic size) */
  bool dynamic_size; /* a view has a size the run reads (dma.c's dma_sizes) */
  bool signal_regular; /* completion adds 1 to a regular sem, not the bytes */
  int64_t signal;  /* what completion adds to sem: the bytes for a dma_sem,
                      1 for a regular sem (TPU v6+ DMAs signal one) */
} dma_plan_t;

typedef struct move_plan {
  uint32_t count;
  uint32_t *src;
  uint32_t *dst;
  uint32_t *tmp; /* for two-phase moves: distinct buffers, or NULL */
} move_plan_t;

typedef struct scope_plan {
  uint32_t count;
  uint32_t *refs;
} scope_plan_t;

typedef struct text_plan {
  const char *text;
  uint32_t count;
  uint32_t *values;
} text_plan_t;

typedef struct insn {
  uint16_t code;     /* XOP_*, chosen by prepare.c's family handlers */
  uint8_t dtype;     /* operand dtype */
  uint8_t rdtype;    /* result dtype */
  uint8_t bcast;     /* tsr_bcast_t, binary ops; select: bit0 cond, bit1 a, bit2 b scalar */
  uint8_t flags;     /* TSR_OPF_* subset */
  uint8_t forward;   /* the next insn stores this result: write it in place */
  uint8_t opcode;    /* tsr_opcode_t of the op it came from (reductions read it) */
  uint32_t site;     /* index in program->sites: where it came from */
  uint32_t r, a, b, c; /* value ids */
  uint32_t target;   /* jump target */
  int64_t n;         /* element count of the result (or operand for reductions) */
  union {
    tsr_unary_fn unary;
    tsr_binary_fn binary;
  } fn;
  void *plan;        /* view_plan_t, shape_plan_t, move_plan_t, ... */
} insn_t;

/* Where a site comes from, so that a program bound to another kernel with
 * the same canonical bytes (tsr_interp_program_bind) can find the same place
 * there: ops and scoped buffers by their pre-order position (index maps in
 * declaration order, then the body), declarations by index. */
typedef enum site_origin {
  SITE_OP,      /* index: op position */
  SITE_DECL,    /* index: declaration */
  SITE_SCOPED,  /* index: position of the scoped op, sub: its argument */
  SITE_KERNEL,  /* the kernel header */
} site_origin_t;

/* A source location of an op or a declaration, for diagnostics. */
typedef struct site {
  tsr_loc_t loc;
  const char *what; /* op mnemonic, or "in %x" / "out %y" for pipeline work */
  uint8_t origin;   /* site_origin_t */
  uint32_t index, sub;
} site_t;

typedef struct value_info {
  uint64_t offset; /* its buffer in the frame: shared with the values whose
                      lives do not overlap its own (frame.c);
                      an alias's is its root's */
  uint64_t bytes;
  uint8_t dtype;
  bool vector;
} value_info_t;

/* A ref: a kernel operand's block/array, scratch, or a scoped buffer. */
typedef struct ref_info {
  const char *name;
  tsr_role_t role;     /* scoped buffers: TSR_ROLE_SCRATCH */
  int32_t decl;        /* decl index or -1 for scoped */
  uint8_t space;
  uint8_t dtype;
  uint32_t rank;
  int64_t dims[TSR_MAX_RANK];
  int64_t limit[TSR_MAX_RANK]; /* how far accesses may reach without an
                                  error: dims, or the padded shape under
                                  options.padded (tsr_interp_padded_dims) */
  uint64_t elements;
  uint64_t offset;     /* own buffer in run->vmem (blocks, scratch, scoped) */
  int32_t operand;     /* operand plan whose ref this is, or -1 */
  bool written;        /* some op writes it (tsr_op_written_ref) */
  bool shadowed;       /* checks on and not a read-only input */
  bool is_sem;
  bool has_buffer;     /* false for hbm/any operands: the ref is HBM */
  bool device_wide;    /* an hbm/any scoped buffer: one per device, shared by
                          its cores (wide_instance_t), not in run->vmem */
  uint32_t wide;       /* device_wide: its index among them */
  uint32_t site;       /* its declaration, for end-of-kernel reports */
} ref_info_t;

/* How the grid pipeline moves one operand. */
typedef struct operand_plan {
  uint32_t decl;
  uint32_t ref;        /* ref index of the body's view */
  tsr_role_t role;
  bool blocked;        /* vmem/smem windowed operand (has a block buffer) */
  bool hbm_direct;     /* hbm/any: the ref is the whole HBM array */
  bool sem;            /* a semaphore operand: the array holds its counts (i32),
                          read into core 0's semaphores at the start (inputs)
                          and written at the end (outputs): docs/semantics.md */
  uint32_t array_rank;
  int64_t array_dims[TSR_MAX_RANK];
  int64_t array_strides[TSR_MAX_RANK];
  int64_t block[TSR_MAX_RANK]; /* squeezed dims as 1 */
  /* element dims: the index is an element offset into the array padded by
   * pad_low before it (tsr_decl_t) */
  bool element[TSR_MAX_RANK];
  int64_t pad_low[TSR_MAX_RANK], padded_dims[TSR_MAX_RANK];
  bool any_element;
  uint64_t array_elements;
  /* index map: affine form (axis >= 0: grid index; else constant) or code */
  bool affine;
  int32_t map_axis[TSR_MAX_RANK];
  int64_t map_const[TSR_MAX_RANK];
  uint32_t map_pc;
  uint32_t map_args[TSR_MAX_RANK];
  uint32_t map_results[TSR_MAX_RANK];
  int32_t alias;       /* outputs: operand-plan index of the aliased input */
  bool aliased;        /* an input that some output aliases */
  bool revisit_any;    /* outputs: revisit any (blocks copied in when entered,
                          no revisit error) */
  uint32_t fixed_dims; /* outputs: the grid dims its block index cannot
                          change along (tsr_ir_output_fixed_dims) */
  uint32_t site;
} operand_plan_t;

/* Run memories a program keeps (one per host thread of a split run, up to
 * this many; a run beyond it allocates its own). */
#define TSR_INTERP_SPARES 16

/* Memory of a run that is worth keeping for the next run of the program
 * (fresh pages cost a page fault each: ~3,500 per run of a 64 MiB add). */
typedef struct run_memory {
  uint8_t *frame;
  uint8_t *vmem;
  uint8_t *vmem_shadow;
  uint8_t **hbm_shadow; /* per operand plan */
} run_memory_t;

struct tsr_interp_program {
  tsr_arena_t arena;
  tsr_interp_options_t options;
  const char *kernel_name;
  const char *file;
  uint32_t grid_rank;
  int64_t grid[TSR_MAX_RANK];
  uint8_t semantics[TSR_MAX_RANK];
  uint64_t total_steps;
  tsr_ir_core_split_t split; /* how the cores share the grid */
  /* Dynamic extents: 1 + the operand plan holding dim d's extent (a rank-0
   * i32 prefetch), 0 for a static dim (grid[d] is then its extent). */
  uint32_t grid_bound[TSR_MAX_RANK];
  tsr_loc_t loc; /* the kernel's, for errors about its grid */

  insn_t *code;
  uint32_t code_size, code_capacity;
  uint32_t body_pc;

  site_t *sites;
  uint32_t num_sites, sites_capacity;
  uint32_t grid_site;  /* "the grid step", where a bound stops a grid step */

  uint32_t num_values;
  value_info_t *values;
  uint64_t frame_bytes;
  /* consts: filled once per run */
  uint32_t num_consts;
  uint32_t *const_values;
  tsr_literal_t *const_literals;

  uint32_t num_refs;
  ref_info_t *refs;
  uint32_t *value_ref; /* value id -> ref index or NO_VALUE */
  uint64_t vmem_bytes;   /* own buffers (blocks, scratch, scoped) */
  uint32_t num_wide;     /* device-wide (hbm/any) scoped buffers */

  uint32_t num_operands; /* operand plans (all non-scratch decls): the arrays
                            the caller passes */
  operand_plan_t *operands;

  uint64_t vmem_budget, vmem_used, smem_used, smem_budget;
  /* Spare run_memory_t, taken and returned atomically by runs (a cache:
   * the program stays logically immutable and thread-safe). */
  _Atomic(run_memory_t *) spare[TSR_INTERP_SPARES];
  /* Its grid's split points may run on several host threads
   * (tsr_ir_host_split_ok; docs/semantics.md, "Host threads"). */
  bool host_split;
  /* what a split point costs, learned from the runs (updated by runs of a
   * const program) */
  tsr_split_cost_t split_cost;
  /* The sort and argsort ops' temporaries, kept for the next run (NULL:
   * allocated per call); thread-safe as `spare`. Every program owns its own. */
  tsr_sort_scratch_t *sort_scratch;

  uint32_t num_walked_ops; /* ops in the pre-order walk (site_t) */
  /* A bound program (tsr_interp_program_bind) shares `base`'s code and plans
   * and owns only its arena (names, refs), sites and run memory; destroying
   * it calls release(release_ctx). NULL for a prepared program. */
  const tsr_interp_program_t *base;
  void (*release)(void *ctx);
  void *release_ctx;
};

/* One run's state. */
typedef struct run_ref {
  uint8_t *data;
  uint8_t *shadow;   /* 1 byte per element: written? NULL when unchecked */
  bool pending_fill; /* an output block not yet filled with the uninitialized
                        value: filled on first partial access, skipped when
                        the first access is a store of the whole block */
} run_ref_t;

typedef struct shared shared_t;

/* A live instance of a device-wide scoped buffer (an hbm/any `scoped`
 * argument; docs/semantics.md, "Device-wide scoped buffers"): the k-th entry
 * of every core of the device into the scope shares the k-th instance. The
 * first core to enter it allocates it (uninitialized, as fresh HBM); it is
 * released when every core of the device has left it, or at the run's end
 * for cores that never enter. */
typedef struct wide_instance {
  struct wide_instance *next;
  uint32_t entry;  /* which entry of each core into the scope; UINT32_MAX
                      once released with a DMA still in flight into it (kept
                      until the run ends, so that the DMA lands in memory) */
  uint32_t exits;  /* cores of the device that have left it */
  uint64_t serial; /* the race detector's key for it: unique in the run */
  uint8_t *data, *shadow;
} wide_instance_t;

/* Race detection (race.c): vector clocks with one component per core and a
 * sorted set of the DMAs whose completion has been observed. */
typedef struct vclock {
  uint32_t n;     /* cores */
  uint32_t *c;
  uint32_t *dma;  /* observed DMA ids, sorted */
  uint32_t ndma, cap;
} vclock_t;

typedef struct race_ap { /* start, start + stride, .. (count elements) */
  int64_t start, count, stride;
} race_ap_t;

typedef struct race_state race_state_t;

/* Where a core is in its walk through the grid (sched.c, grid.c). */
typedef enum core_phase { CORE_START, CORE_STEP, CORE_BODY, CORE_DONE } core_phase_t;

/* The state of one simulated core during a run. */
typedef struct run {
  const tsr_interp_program_t *p;
  shared_t *sh;
  uint32_t device, core; /* this core's device and index within it */
  uint8_t *frame;
  void **vals;
  uint8_t *vmem;        /* own buffers of refs */
  uint8_t *vmem_shadow; /* shadow for the same, element granularity */
  run_ref_t *refs;
  int32_t **sems;       /* per ref: semaphore values (semaphore refs only) */
  uint8_t **hbm;        /* per operand plan: this device's HBM array data */
  uint8_t **hbm_shadow; /* per operand plan: outputs only (checked runs) */
  run_memory_t *memory; /* owns frame, vmem, vmem_shadow (and hbm_shadow) */
  uint8_t *forward;     /* where the next result goes (store forwarding), or NULL */
  int64_t *cur_block;   /* per operand plan x rank: block index this step */
  int64_t *prev_block;  /* per operand plan x rank: the previous step's */
  bool *block_valid;    /* per operand plan: cur_block in range */
  void **visited;       /* per operand plan: uthash set of visited out blocks */
  int64_t point[TSR_MAX_RANK];
  int64_t loop[TSR_MAX_RANK];
  int64_t **perm;       /* per grid dim: shuffle permutation or NULL (shared) */
  uint64_t step;        /* linear grid step being run (row-major in the grid) */
  uint64_t share_lo, share_hi; /* this core's split points (tsr_ir_core_share) */
  uint64_t core_step, core_steps; /* this core's step being run, and its count */
  uint8_t phase;        /* core_phase_t */
  uint32_t pc;          /* resume point in the body when blocked */
  uint32_t blocked_pc;  /* the waiting instruction, for deadlock reports */
  vclock_t vc;          /* race detection: this core's clock */
  uint32_t *wide_entries;       /* per device-wide buffer: entries so far */
  wide_instance_t **wide_cur;   /* per device-wide buffer: the instance this
                                   core is inside, or NULL */
  uint64_t step_tick;   /* trace: when the current step began */
  uint64_t wait_tick;   /* trace: when the current wait blocked, or 0 */
  const char *view_side; /* "source" / "destination" while a DMA resolves a
                            view: its out-of-bounds message says which side
                            (a read or a write) left its ref; else NULL */
} run_t;

/* A DMA in flight (lazy mode), with its views resolved at dma_start. */
typedef struct dma_record {
  uint32_t site;
  uint32_t device, core;      /* issuing core */
  uint32_t rank;
  int64_t dims[TSR_MAX_RANK];
  uint8_t *src, *dst;         /* first elements */
  uint8_t *src_shadow, *dst_shadow;
  int64_t src_strides[TSR_MAX_RANK], dst_strides[TSR_MAX_RANK];
  uint8_t dtype;
  bool add;
  bool dst_hbm;               /* the destination is an hbm/any operand's array,
                                 or (dst_block) the one block of a vmem/smem
                                 output: a DMA that may land after the
                                 kernel's end */
  int32_t dst_block;          /* that output's operand plan, else -1 */
  uint32_t dst_core;          /* the destination's core (device-major index) */
  bool skipped;               /* a view was out of bounds: no copy, but the
                                 semaphores are signalled */
  /* A view reaching outside its ref where the options let it (tsr_view_clip):
   * dims/src/dst above are then the part both views have inside their refs,
   * and `fill` the destination's part inside its ref, which takes the
   * uninitialized value first where the source has none. */
  bool fill;
  uint32_t fill_rank;
  int64_t fill_dims[TSR_MAX_RANK], fill_strides[TSR_MAX_RANK];
  uint8_t *fill_dst;
  int64_t bytes;
  int64_t signal;             /* added to sem on completion (dma_plan_t) */
  int32_t *sem, *send;        /* destination and (optional) send semaphores */
  uint64_t start_tick;        /* trace */
  const char *dst_name;
  /* race detection: the DMA's clock and id, and what it reads and writes */
  vclock_t vc;
  uint32_t id;
  uint64_t src_key, dst_key;
  uint32_t src_rank, dst_rank;
  race_ap_t src_ap[TSR_MAX_RANK], dst_ap[TSR_MAX_RANK];
  const char *src_name;
} dma_record_t;

/* The parts of a split run (run.c; docs/semantics.md, "Host threads"):
 * each part is a shared_t of one core over a contiguous part of the split
 * points, on its own host thread. They draw their steps from the run's
 * bounds and report its progress under `mu`; `stop` tells the others when
 * one part cannot finish as a serial run would (it reported something or a
 * bound stopped it), since the run is then run again on one thread. */
typedef struct split_group {
  pthread_mutex_t mu;
  tsr_bounds_t *bounds;   /* the run's */
  uint32_t parts;
  _Atomic uint64_t steps; /* grid steps the parts have counted so far */
  atomic_bool stop;
} split_group_t;

/* What all cores of a run share. */
struct shared {
  const tsr_interp_program_t *p;
  /* The run's grid: the program's, with dynamic extents read from their
   * prefetch operands when the run starts (run.c). */
  int64_t grid[TSR_MAX_RANK];
  uint64_t total_steps;
  tsr_ir_core_split_t split; /* how the cores share the grid */
  uint32_t devices, cores;  /* cores per device */
  run_t *core;              /* devices x cores, device-major */
  uint8_t **hbm;            /* devices x operand plans */
  uint8_t **hbm_shadow;     /* devices x operand plans */
  void **visited;           /* devices x operand plans */
  int64_t **perm;           /* per grid dim */
  tsr_diag_sink_t diag;     /* errors and warnings */
  bool aborted;
  tsr_interp_stats_t stats;
  FILE *out;
  uint64_t schedule_state;  /* splitmix64 state for --schedule-seed */
  uint64_t tick;            /* simulated time: instructions executed so far */
  tsr_strbuf_t trace;       /* Chrome trace events, when tracing */
  race_state_t *race;       /* when detecting races */
  uint32_t next_dma_id;
  wide_instance_t **wide;   /* devices x p->num_wide: live instances */
  uint64_t next_wide_serial;
  bool tracing;
  const char *trace_path;   /* this run's (tsr_interp_run_options_t) */
  dma_record_t *dmas;       /* in flight, in start order */
  uint32_t num_dmas, dmas_capacity;
  /* cores x operand plans: an output block a DMA landed in at the kernel's
   * end (tsr_dma_check_end), to be copied out again; NULL when none did */
  uint8_t *landed;
  /* Run bounds (interp/bounds.h): steps left of the current grant. */
  tsr_bounds_t bounds;
  tsr_step_meter_t meter;
  uint64_t budget;
  split_group_t *group;     /* a part of a split run, else NULL */
  uint64_t group_steps;     /* of stats.grid_steps, those added to group->steps */
};


/* A resolved view of a ref (or of a value, for slice): strided elements. */
typedef struct view {
  uint8_t *base;    /* element (0, .., 0) */
  uint8_t *shadow;  /* shadow of element (0, .., 0), or NULL */
  uint32_t rank;
  int64_t dims[TSR_MAX_RANK];
  int64_t strides[TSR_MAX_RANK]; /* elements */
  uint32_t ref_dim_of[TSR_MAX_RANK];
} view_t;

/* The part of a view inside its ref's logical shape, for an access that
 * reaches outside it where the run's options let it (docs/semantics.md,
 * "Out-of-bounds accesses"): `in` is that part (a view of the same rank,
 * empty when count 0), starting at lane `lo` of the whole view. */
typedef struct view_clip {
  view_t in;
  int64_t lo[TSR_MAX_RANK];
  int64_t full[TSR_MAX_RANK]; /* the whole view's dims */
  bool empty;
} view_clip_t;

/* ---- Small helpers of the hot path (inline: every instruction uses them) ---- */

static inline int32_t tsr_interp_read_i32(const run_t *run, uint32_t value) {
  int32_t v;
  memcpy(&v, run->vals[value], 4);
  return v;
}

/* A value's buffer in the frame (see value_info_t.offset). */
static inline void *tsr_interp_own(const run_t *run, uint32_t value) {
  return run->frame + run->p->values[value].offset;
}

/* Where an instruction writes its result: the store target when forwarded
 * (see forwards_to_store in prepare.c), else the value's own buffer. */
static inline void *tsr_interp_result_ptr(run_t *run, const insn_t *in) {
  void *p = run->forward;
  if (p) {
    run->forward = NULL;
    return p;
  }
  return tsr_interp_own(run, in->r);
}

/* Writes a scalar i32 result. */
static inline void tsr_interp_put_i32(run_t *run, const insn_t *in, int32_t v) {
  run->vals[in->r] = tsr_interp_result_ptr(run, in);
  memcpy(run->vals[in->r], &v, 4);
}

/* A core's index among all cores of the run (device-major). */
static inline uint32_t tsr_interp_core_index(const run_t *run) {
  return run->device * run->sh->cores + run->core;
}

static inline uint64_t tsr_interp_splitmix64(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* ---- diag.c: the interpreter's way into the diagnostics sink ---- */

/* Where a diagnostic of `run` at `site` happens (its current grid point). */
tsr_diag_where_t tsr_interp_where(const run_t *run, uint32_t site);
/* Records a diagnostic at a site (once per site and severity per run); the
 * run stops when max_errors errors have been kept. A warning is legal in
 * Pallas but suspicious: an error under options.strict. */
void tsr_interp_kernel_report(run_t *run, uint32_t site, tsr_diag_kind_t kind,
                              tsr_diag_severity_t severity, const char *fmt, ...)
    TSR_PRINTF(5, 6);
/* The same with what the reporter knows beyond the site (buffer, index
 * range, a race's second access), for the run's records. */
void tsr_interp_kernel_report_detail(run_t *run, uint32_t site, const tsr_diag_detail_t *detail,
                                     tsr_diag_kind_t kind, tsr_diag_severity_t severity,
                                     const char *fmt, ...) TSR_PRINTF(6, 7);
#define tsr_interp_kernel_error(run, site, kind, ...) \
  tsr_interp_kernel_report(run, site, kind, TSR_DIAG_ERROR, __VA_ARGS__)
#define tsr_interp_kernel_warning(run, site, kind, ...) \
  tsr_interp_kernel_report(run, site, kind, TSR_DIAG_WARNING, __VA_ARGS__)

/* ---- run.c ---- */

/* Frees the run memories a program keeps (tsr_interp_program_destroy). */
void tsr_interp_free_spares(tsr_interp_program_t *p);

/* ---- frame.c ---- */

/* Fills p->values (dtype, bytes, offset) and p->frame_bytes for kernel k,
 * whose values by_id holds by id. A value's buffer is reused once its last
 * use has run (buffers of one size in last-in first-out order);
 * alias_ops[opcode] says the op's result reads its first operand's buffer
 * (XOP_ALIAS), so that buffer lives as long as the alias. */
tsr_status_t tsr_interp_assign_frame_slots(tsr_interp_program_t *p, const tsr_kernel_t *k,
                                           tsr_value_t *const *by_id,
                                           const bool *alias_ops) TSR_MUST_USE;

/* ---- budget.c ---- */

/* Sets p's VMEM and SMEM budgets from p->options.chip and what it uses
 * (windowed operands double-buffered, scratch and scoped buffers all live
 * at once: an upper bound). TSR_RESOURCE_EXHAUSTED at kernel_loc, with what
 * takes the memory, when over; TSR_INVALID_ARGUMENT for an unknown chip. */
tsr_status_t tsr_interp_check_budget(tsr_interp_program_t *p, tsr_loc_t kernel_loc) TSR_MUST_USE;

/* ---- trace.c ---- */

void tsr_trace_event(shared_t *sh, const char *name, uint32_t device, uint32_t tid,
                     uint64_t start, uint64_t end, const char *args_json);
void tsr_trace_dma(shared_t *sh, const dma_record_t *r);
/* Writes the trace to sh->trace_path as run outputs are written
 * (tsr_file_write): TSR_IO_ERROR naming the path and why on failure. */
tsr_status_t tsr_trace_write(shared_t *sh) TSR_MUST_USE;

/* ---- race.c: the detector ---- */

race_state_t *tsr_race_create(void);
void tsr_race_destroy(race_state_t *rs);
void tsr_race_access(run_t *run, vclock_t *vc, int64_t dma_id, uint32_t site,
                     uint64_t key, const char *what, bool write, uint32_t rank,
                     const race_ap_t *ap);
vclock_t *tsr_race_sem_clock(shared_t *sh, const int32_t *sem);
void tsr_vc_initialize(vclock_t *v, uint32_t n);
void tsr_vc_free(vclock_t *v);
void tsr_vc_join(vclock_t *dst, const vclock_t *src);
void tsr_vc_copy(vclock_t *dst, const vclock_t *src);
void tsr_vc_add_dma(vclock_t *v, uint32_t id);

/* ---- race.c: the hooks the run calls (no-ops unless detecting races) ---- */

/* The memory object a ref of `core` names (a race detector key). */
uint64_t tsr_race_object_key(const run_t *core, uint32_t ref);
/* The per-dimension progressions of a resolved view (origin/step per ref dim). */
uint32_t tsr_race_view_aps(const view_plan_t *vp, const int64_t *origin, const int64_t *step,
                           race_ap_t *ap);
void tsr_race_ref_record(run_t *run, uint32_t site, const view_plan_t *vp,
                         const int64_t *origin, const int64_t *step, bool write);
/* A load's or store's access, when detecting races (inline: every load and
 * store asks). */
static inline void tsr_race_ref_access(run_t *run, uint32_t site, const view_plan_t *vp,
                                       const int64_t *origin, const int64_t *step,
                                       bool write) {
  if (TSR_UNLIKELY(run->sh->race != NULL))
    tsr_race_ref_record(run, site, vp, origin, step, write);
}
/* A release: what this core did so far is published through `sem`. */
void tsr_race_release(run_t *run, const int32_t *sem);
void tsr_race_acquire(run_t *run, const int32_t *sem);
/* The pipeline's block copies read and write operand j's HBM for the core. */
void tsr_race_window(run_t *run, uint32_t j, const int64_t *start, const int64_t *extent,
                     bool write);

/* ---- view.c ---- */

void tsr_interp_fill_uninit(const run_t *run, tsr_dtype_t dtype, void *dst, uint64_t n);
/* JAX's own uninitialized value, where JAX's interpreters fill memory
 * (pl.Element padding; under out_blocks_copied_in, fresh outputs and block
 * padding): for integers the minimum (0 unsigned, false for i1) where
 * tessera's --uninit nan value is the maximum; floats get the run's
 * uninitialized value, as do all dtypes with --uninit zero. */
void tsr_interp_fill_jax_uninit(const run_t *run, tsr_dtype_t dtype, void *dst, uint64_t n);
/* Gives a lazily filled output block its uninitialized contents. */
static inline void tsr_interp_materialize(run_t *run, uint32_t ref) {
  run_ref_t *rr = &run->refs[ref];
  if (!rr->pending_fill) return;
  const ref_info_t *ri = &run->p->refs[ref];
  tsr_interp_fill_uninit(run, (tsr_dtype_t)ri->dtype, rr->data, ri->elements);
  rr->pending_fill = false;
}
/* Resolves the view of a load/store/slice/DMA (ref_name: the ref, NULL for a
 * slice of a value). On an out-of-bounds index reports (unless quiet) and
 * returns false. */
bool tsr_view_resolve(run_t *run, const insn_t *in, const view_plan_t *vp,
                      const char *ref_name, uint8_t *data, uint8_t *shadow, size_t elem_size,
                      view_t *out, int64_t *origin, int64_t *step, bool quiet);
/* The flat position (in view order) of the first never-written element of
 * the view (by its shadow), or -1. */
int64_t tsr_view_first_unwritten(const view_t *v);
/* Gives the never-written elements of a view the uninitialized value. */
void tsr_view_fill_unwritten(const run_t *run, tsr_dtype_t dtype, const view_t *v);
/* Marks the elements of a strided shadow written. */
void tsr_view_mark_written(uint32_t rank, const int64_t *dims, uint8_t *shadow,
                           const int64_t *strides);
/* A load's or store's ref and resolved view. */
typedef struct ref_access {
  uint32_t ref;
  const ref_info_t *ri;
  run_ref_t *rr;
  size_t es;
  view_t v;
  int64_t origin[TSR_MAX_RANK], step[TSR_MAX_RANK];
} ref_access_t;
/* Resolves the view of a load/store, quietly: a view outside the ref is
 * for tsr_view_masked_outside (masked) or tsr_view_clip to judge. */
bool tsr_view_access(run_t *run, const insn_t *in, ref_access_t *a);
/* For an access whose view failed tsr_view_resolve's check: whether the run
 * lets it reach where it does (reads with oob_reads_uninit, accesses into
 * the padding under padded); if so fills *c and warns, else reports the
 * error. `ri`/`data`/`shadow` of the ref, `write` for stores and DMA
 * destinations. */
bool tsr_view_clip(run_t *run, const insn_t *in, const view_plan_t *vp, const ref_info_t *ri,
                   uint8_t *data, uint8_t *shadow, bool write, view_clip_t *c);
/* A masked load or store whose window reaches outside its ref. Pallas masks
 * the edges of a ref this way: only the lanes the mask turns on are
 * accessed, and only they must be in bounds. `value`: what a store writes,
 * the load's result. */
void tsr_view_masked_outside(run_t *run, const insn_t *in, const ref_access_t *a, bool store,
                             uint8_t *value);
/* Reports the read of never-written view element `flat`. */
void tsr_view_report_unwritten(run_t *run, const insn_t *in, const ref_info_t *ri,
                               const view_t *v, const int64_t *origin, const int64_t *step,
                               int64_t flat);

static inline int64_t tsr_view_count(const view_t *v) {
  int64_t n = 1;
  for (uint32_t i = 0; i < v->rank; i++) n *= v->dims[i];
  return n;
}

static inline bool tsr_view_is_dense(const view_t *v) {
  int64_t expect = 1;
  for (int32_t i = (int32_t)v->rank - 1; i >= 0; i--) {
    if (v->dims[i] != 1 && v->strides[i] != expect) return false;
    expect *= v->dims[i];
  }
  return true;
}

/* Element offsets (in the ref) of a view, in row-major view order. */
typedef struct view_walk {
  int64_t idx[TSR_MAX_RANK];
} view_walk_t;

static inline int64_t tsr_view_walk_offset(const view_t *v, const view_walk_t *w) {
  int64_t off = 0;
  for (uint32_t d = 0; d < v->rank; d++) off += w->idx[d] * v->strides[d];
  return off;
}

static inline void tsr_view_walk_next(const view_t *v, view_walk_t *w) {
  for (int32_t d = (int32_t)v->rank - 1; d >= 0; d--) {
    if (++w->idx[d] < v->dims[d]) break;
    w->idx[d] = 0;
  }
}

/* ---- dma.c ---- */

void tsr_sem_signal(run_t *run, const insn_t *in);
/* The semaphore a sem_read names (NULL after reporting an error). */
int32_t *tsr_sem_addr(run_t *run, const insn_t *in, const sem_plan_t *sp);
/* Waits until this core's semaphore holds `need`, then subtracts it; false
 * when the core must block. */
bool tsr_sem_try_wait(run_t *run, const insn_t *in, const sem_plan_t *sp, int32_t need);
void tsr_sem_barrier_signal(run_t *run, const insn_t *in);
void tsr_dma_start(run_t *run, const insn_t *in);
/* The bytes a dma_wait waits for: those of its destination view, whose
 * dynamic sizes it reads (a negative one is reported and counts 0). */
int64_t tsr_dma_wait_bytes(run_t *run, const insn_t *in);
/* Leaving a scope: a DMA in flight into or out of its buffers is an error. */
void tsr_dma_scope_exit(run_t *run, const insn_t *in);
/* A core enters the scope of device-wide buffer `ref`: the instance of its
 * entry, allocated by the first core of the device to get there (an
 * out-of-memory stops the run with an error at the scope). */
void tsr_dma_wide_enter(run_t *run, const insn_t *in, uint32_t ref);
/* Frees the device-wide buffers still live when the run ends. */
void tsr_dma_wide_free_all(shared_t *sh);
/* Reports a core that can no longer move (part of a deadlock). */
void tsr_sem_report_blocked(run_t *run);
/* End of the kernel: DMAs never waited for and semaphores left non-zero.
 * A DMA into an hbm/any operand that signals a semaphore output lands now
 * (it would go on after the kernel on a TPU, for the next kernel's wait),
 * and semaphore outputs (and the inputs they alias) may hold counts. */
void tsr_dma_check_end(shared_t *sh);
/* Writes each semaphore output's counts (summed over a device's cores)
 * into its array. */
void tsr_dma_sem_outputs(shared_t *sh);

/* Whether ref i is a semaphore output aliasing a semaphore input: it
 * shares the input's semaphores (one allocation, owned by the input). */
static inline bool tsr_interp_sem_shared(const tsr_interp_program_t *p, uint32_t i) {
  const ref_info_t *ri = &p->refs[i];
  if (!ri->is_sem || ri->operand < 0) return false;
  const operand_plan_t *op = &p->operands[ri->operand];
  return op->role == TSR_ROLE_OUT && op->alias >= 0;
}

/* ---- exec.c ---- */

/* Runs instructions from *pc_io until the end of the code (true) or a wait
 * that cannot be satisfied yet (false; *pc_io is the waiting instruction). */
bool tsr_interp_exec(run_t *run, uint32_t *pc_io);
bool tsr_interp_take_step_slow(run_t *run, uint32_t site);
/* Counts one step (a grid step or a loop iteration) at `site`. When a run
 * bound is reached (interp/bounds.h), reports it there as a kernel error,
 * abandons the run and returns false. The clock and the cancel flag are
 * read only when a grant of steps runs out. */
static inline bool tsr_interp_take_step(run_t *run, uint32_t site) {
  shared_t *sh = run->sh;
  if (TSR_LIKELY(sh->budget > 0)) {
    sh->budget--;
    return true;
  }
  return tsr_interp_take_step_slow(run, site);
}

/* ---- grid.c ---- */

/* A core's start: its first grid point's block indices, and its first
 * step's blocks (inputs copied in, outputs started). */
void tsr_grid_start_core(run_t *run);
/* Runs a core until it finishes or blocks. Returns true if it made progress. */
bool tsr_grid_run_core(run_t *run);
/* End of the run: never-written output elements (checked runs). */
void tsr_grid_check_outputs(run_t *run);
/* Before the first step: the parallel_revisit warning of every output whose
 * block index cannot change along a grid dim a TPU may split between
 * TensorCores (tsr_ir_parallel_revisit_dim, with the run's extents). */
void tsr_grid_check_parallel_revisits(shared_t *sh);
/* Copies out again the output blocks DMAs landed in at the kernel's end
 * (shared_t.landed). */
void tsr_grid_copy_out_landed(shared_t *sh);
/* Frees a device's sets of visited output blocks (its core 0's). */
void tsr_grid_free_visits(run_t *run);
/* Makes the visited-block table of each output `run`'s revisit check uses,
 * before a split run's parts share them: true when every one is a dense
 * table (the parts then write distinct records; a hash set is not shared). */
bool tsr_grid_visits_dense(run_t *run);

/* ---- sched.c ---- */

/* Runs every core to its end, or until a deadlock or a stop. */
void tsr_interp_run_all(shared_t *sh);

#endif /* TESSERA_INTERP_INTERNAL_H */
