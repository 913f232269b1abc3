/* tessera interpreter: what a run does and what it counted. The options of
 * a run (tsr_interp_options_t) are the `run` field of
 * tsr_executable_options_t (tessera/api.h), the one way to run a kernel on
 * every backend: the interpreter, which runs a verified kernel over
 * simulated TPU memories (HBM, VMEM, SMEM) with Pallas TPU grid semantics,
 * checking for out-of-bounds accesses, uninitialized reads, revisited
 * output blocks and VMEM over budget, reads them all; the cpu backend the
 * subset tsr_executable_options_t names. Semantics: docs/semantics.md. */
#ifndef TESSERA_INTERP_H
#define TESSERA_INTERP_H

#include "tessera/base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Simulated cores per run over all devices (devices x cores): more is
 * TSR_INVALID_ARGUMENT in both backends. */
#define TSR_INTERP_MAX_CORES 256

typedef enum tsr_uninit_mode {
  TSR_UNINIT_NAN,  /* NaN for floats, the maximum for integers, true for i1 */
  TSR_UNINIT_ZERO, /* zero */
} tsr_uninit_mode_t;

/* tsr_interp_options_t's on_grid_step: the step's device, its core within
 * the device, and its grid point (rank entries, borrowed for the call). */
typedef void (*tsr_grid_step_fn)(void *user, uint32_t device, uint32_t core, uint32_t rank,
                                 const int64_t *point);

/* tsr_interp_options_t's on_progress: `done` of the run's `total` grid
 * steps (over all devices and cores) have begun. To stop the run from the
 * callback, set the run's cancel flag: the run stops as it does when
 * another thread sets it. */
typedef void (*tsr_progress_fn)(void *user, uint64_t done, uint64_t total);

typedef struct tsr_interp_options {
  tsr_uninit_mode_t uninit;  /* fill of new memory; default NAN */
  bool check;                /* shadow memory: report uninitialized reads and
                                never-written outputs; default true. Bounds
                                and revisit checks are always on. */
  bool shuffle_parallel;     /* permute parallel grid dims; default false */
  uint64_t shuffle_seed;
  const char *chip;          /* VMEM budget: "v2" "v3" "v4" "v5e" "v5p" "v6e"
                                "v7x" ("v7", "tpu7x") "tpu8i"; default "v5e" (128 MiB) */
  uint32_t max_errors;       /* diagnostics kept per run; default 20 */
  uint32_t devices;          /* simulated devices; default 1. With more than
                                one, every operand array has a leading
                                dimension of this size (one slice per device) */
  uint32_t cores;            /* TensorCores per device; default 1. A run
                                has at most TSR_INTERP_MAX_CORES cores over
                                all devices (devices x cores) */
  uint64_t schedule_seed;    /* 0: fixed core order; else a seeded order */
  bool dma_eager;            /* DMAs copy at start (default: lazily, at the
                                wait that needs them) */
  bool detect_races;         /* happens-before race detection (docs/dma.md) */
  /* Accesses outside a ref (docs/semantics.md, "Out-of-bounds accesses"),
   * as JAX's TPU interpret mode's InterpretParams ask for them: */
  bool oob_reads_uninit;     /* a read outside its ref is no error: the
                                elements outside give the uninitialized
                                value (out_of_bounds_reads="uninitialized");
                                default false: an error. Writes outside are
                                errors either way */
  bool padded;               /* refs outside SMEM have the TPU's tiled shape
                                (buffer_bounds="padded"): accesses into the
                                padding are in bounds, reads of it give the
                                uninitialized value and writes to it are
                                dropped; default false: the logical shape */
  /* Output blocks, as JAX's generic interpreter (pallas_call's
   * interpret=True) runs them, rather than a TPU and JAX's TPU interpret
   * mode (docs/semantics.md, "Output blocks copied in"): */
  bool out_blocks_copied_in; /* a step entering an output block copies it in
                                from the output array (an aliased input's
                                values, or what earlier steps wrote; a
                                fresh output starts holding JAX's
                                uninitialized value, the integer minimum
                                where tessera's is the maximum), and the
                                padding of every block past its array's
                                end holds JAX's uninitialized value;
                                default false: an output block starts
                                uninitialized */
  /* An explicit order of the leading parallel grid dims, instead of
   * shuffle_parallel's seeded one (JAX's interpret mode draws its order
   * with jax.random, which the JAX bridge passes here): for each leading
   * `parallel` dim in turn, grid[d] entries, a permutation of
   * 0..grid[d]-1; step i along dim d runs point parallel_order[offset + i].
   * NULL: none. Copied. A run whose leading parallel extents do not add up
   * to parallel_order_size, or whose entries are no permutation, fails
   * with TSR_INVALID_ARGUMENT (both backends). */
  const int64_t *parallel_order;
  uint32_t parallel_order_size;
  /* The fields above change what a run computes or reports: they are part
   * of a kernel's cache key (runtime/key.c). Those below change only where
   * a run's trace goes and when it stops, and tsr_run_options_t may set
   * them per run. */
  const char *trace_path;    /* if set, a Chrome/Perfetto trace of the run is
                                written there (also after kernel errors) */
  /* Severities (docs/semantics.md): errors are kernels that are wrong on a
   * TPU and fail the run; warnings are what Pallas allows but looks
   * suspicious: they are reported (tsr_output_t's warning function, and
   * the run result's records) and the run succeeds. */
  bool strict;               /* warnings are errors; default false */
  /* Bounds on a run; 0 means none. Reaching one ends the run with a kernel
   * error naming the op, location and grid point where it stopped. */
  double timeout_seconds;    /* wall-clock limit */
  uint64_t max_steps;        /* limit on steps: a step is a grid step or one
                                iteration of a for or while loop, counted over
                                all cores and devices alike in every backend */
  const volatile int *cancel; /* when another thread or a signal handler sets
                                 *cancel to non-zero, the run stops soon after
                                 (checked with the timeout); may be NULL */
  /* Called at the start of every grid step, before its body runs, with the
   * step's device, core and grid point; NULL: not called. Both backends;
   * the cpu backend calls it from the thread of each simulated core, so it
   * must be thread-safe when cores > 1. */
  tsr_grid_step_fn on_grid_step;
  void *on_grid_step_user;
  /* Progress of a long run (docs/semantics.md, "Progress"); NULL: not
   * called, and the run does no work for it. Called at most once per
   * progress_interval seconds while the grid runs, when the run checks its
   * bounds (about every millisecond of each core's work), then once after
   * the grid: done == total when every step ran. Calls never overlap and
   * `done` never decreases; calls may come from any of the run's threads.
   * The interpreter counts every grid step; the cpu backend's compiled
   * code reports only when it asks the runtime for more steps, so its
   * `done` is each core's step as of its last request, summed. */
  tsr_progress_fn on_progress;
  void *on_progress_user;
  double progress_interval;  /* seconds between calls; default 0.25; 0:
                                at every bounds check */
  /* Host threads a run may use beneath its simulated cores (docs/semantics.md,
   * "Host threads"); 0 (default): the available cores (sched_getaffinity,
   * so taskset is honoured), or $TESSERA_THREADS when set; 1: one thread.
   * Results and diagnostics are the same with any value. */
  uint32_t threads;
} tsr_interp_options_t;

/* Fills in the defaults above. */
TSR_API void tsr_interp_options_initialize(tsr_interp_options_t *options);
/* VMEM bytes per core of a chip; false if the chip is unknown. */
TSR_API bool tsr_interp_chip_vmem_bytes(const char *chip, uint64_t *out_bytes);

/* What a run counted (tsr_run_result_stats; the cpu backend leaves them
 * zero). */
typedef struct tsr_interp_stats {
  uint64_t grid_steps;
  uint64_t ops_executed;
  uint64_t blocks_copied_in;
  uint64_t blocks_copied_out;
  uint64_t bytes_copied;
  uint64_t vmem_bytes;   /* VMEM in use: double-buffered blocks + scratch */
  uint64_t warnings;     /* warnings reported (not errors under strict) */
} tsr_interp_stats_t;

#ifdef __cplusplus
}
#endif
#endif /* TESSERA_INTERP_H */
