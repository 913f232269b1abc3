/* What the runtime (runtime/) uses of the interpreter, and nothing more:
 * preparing and running programs, the bounds of a run, the diagnostics
 * sink and the `print` formatter shared by both backends, binding a cached
 * program to a kernel, and running it with per-run options. Callers outside
 * the library go through executables (tessera/api.h); the tests and
 * benchmarks use this header directly. The rest of the interpreter's
 * internals (interp/interp_internal.h) stay private to interp/. */
#ifndef TESSERA_INTERP_RUNTIME_H
#define TESSERA_INTERP_RUNTIME_H

#include <stdio.h>

#include "interp/bounds.h"
#include "interp/diag.h"
#include "ir/ir.h"
#include "tessera/interp.h"

/* The shape a TPU allocates a buffer of `dims` (rank 0: none) and `dtype`
 * in on `chip`, as JAX's TPU interpret mode pads buffers under
 * buffer_bounds="padded" (docs/semantics.md, "Out-of-bounds accesses"):
 * the last dimension rounded up to 128 lanes, the second-minor to the
 * sublane tile (the elements per 32 bits, doubled while below
 * min(dimension, 8); twice as many on v2 and v3); a rank-1 buffer to 128
 * x the elements per 32 bits (x 2 on v2, v3). */
void tsr_interp_padded_dims(const char *chip, tsr_dtype_t dtype, uint32_t rank,
                            const int64_t *dims, int64_t *out);

/* A kernel prepared for the interpreter. Prepare once, run many: a program
 * is immutable after preparation and may be run by several threads at once
 * (each run has its own memories). */
typedef struct tsr_interp_program tsr_interp_program_t;

/* Prepares `kernel` (which must belong to a verified module) for running:
 * resolves values to slots, compiles index maps, lays out buffers and checks
 * the VMEM budget (TSR_RESOURCE_EXHAUSTED). The program copies what it needs:
 * the module may be destroyed afterwards. `options` may be NULL (defaults). */
tsr_status_t tsr_interp_program_prepare(const tsr_ir_kernel_t *kernel,
                                        const tsr_interp_options_t *options,
                                        tsr_interp_program_t **out_program) TSR_MUST_USE;
void tsr_interp_program_destroy(tsr_interp_program_t *program);

/* The order of a run's leading `parallel` grid dims over `grid` (the run's
 * extents): for each such dim in turn, the point step i along it runs.
 * options->parallel_order when set (TSR_INVALID_ARGUMENT naming
 * `kernel_name` when it does not fit the grid), else shuffle_parallel's
 * permutations drawn from shuffle_seed, else the identity. Both backends
 * take their order from here, so one seed gives one order in each.
 * *out_order (tsr_free) has *out_size entries. */
tsr_status_t tsr_interp_parallel_order(const tsr_interp_options_t *options,
                                       const char *kernel_name, uint32_t grid_rank,
                                       const int64_t *grid, const uint8_t *semantics,
                                       int64_t **out_order, uint64_t *out_size) TSR_MUST_USE;

/* Runs the program with the run-time options it was prepared (or bound)
 * with, its text to stderr. `operands` holds one array per non-scratch
 * operand, in declaration order (prefetch, in, out), with the declared
 * dtype and shape (TSR_INVALID_ARGUMENT otherwise). Inputs are read;
 * outputs are overwritten with the kernel's results (an aliased output
 * starts as a copy of its input). Kernel errors give TSR_KERNEL_ERROR
 * carrying every diagnostic (up to max_errors); outputs are then
 * unspecified. `out_stats` may be NULL. Thread-safe for concurrent runs of
 * one program. */
tsr_status_t tsr_interp_program_run(const tsr_interp_program_t *program,
                                    tsr_array_t *const *operands, size_t num_operands,
                                    tsr_interp_stats_t *out_stats) TSR_MUST_USE;

/* Makes a program that runs `prepared`'s code for `kernel`, which must have
 * the same canonical bytes as the kernel it was prepared from, with the
 * semantic options of `prepared` and the run-time ones (trace path, strict,
 * bounds) of `options` (may be NULL). Its diagnostics name `kernel`'s file, kernel,
 * values and locations. `prepared` must outlive the result; `release` (may be
 * NULL) is called with `release_ctx` when the result is destroyed.
 * TSR_INTERNAL if the kernel's shape does not match. */
tsr_status_t tsr_interp_program_bind(const tsr_interp_program_t *prepared,
                                     const tsr_ir_kernel_t *kernel,
                                     const tsr_interp_options_t *options,
                                     void (*release)(void *ctx), void *release_ctx,
                                     tsr_interp_program_t **out_program)
    TSR_MUST_USE;

/* What a run may set apart from the program it runs: its bounds, its
 * strictness, its trace and where its text goes. The runtime passes them
 * per run (tessera/api.h's executables); tsr_interp_program_run takes them
 * from the program's options, with no streams (stderr). */
typedef struct tsr_interp_run_options {
  FILE *print_stream;         /* NULL: stderr */
  FILE *warning_stream;       /* NULL: stderr */
  bool strict;
  double timeout_seconds;     /* 0: none */
  uint64_t max_steps;         /* 0: none */
  const volatile int *cancel; /* NULL: none */
  const char *trace_path;     /* NULL: no trace */
  tsr_progress_fn on_progress; /* NULL: none (tsr_interp_options_t) */
  void *on_progress_user;
  double progress_interval;
} tsr_interp_run_options_t;

/* The run options `options` give, with no streams (stderr). */
void tsr_interp_run_options_of(const tsr_interp_options_t *options,
                               tsr_interp_run_options_t *out);

/* tsr_interp_program_run with `run_options` instead of the program's. When
 * `out_diag` is not NULL, the run's diagnostics sink is moved there (its
 * records: errors, then warnings) instead of being freed; the caller
 * deinitializes it, and uses it while `program` lives. */
tsr_status_t tsr_interp_program_run_with(const tsr_interp_program_t *program,
                                         tsr_array_t *const *operands, size_t num_operands,
                                         const tsr_interp_run_options_t *run_options,
                                         tsr_interp_stats_t *out_stats,
                                         tsr_diag_sink_t *out_diag) TSR_MUST_USE;

/* The bytes a prepared program holds (what a cache entry of it costs). */
size_t tsr_interp_program_footprint(const tsr_interp_program_t *program);

/* A value `print` shows: n elements of dtype at data (storage format). */
typedef struct tsr_print_value {
  tsr_dtype_t dtype;
  const void *data;
  uint64_t n;
  bool vector; /* shown as "[a, b, ...]" (at most 64 elements) */
} tsr_print_value_t;
/* Writes one `print`: `text` with each "{}" replaced by the next of `count`
 * values (value(ctx, i) gives value i), then a newline. The line is
 * formatted first and written with one fwrite, so the stream gets one write
 * per line and the lines of concurrent cores stay whole. Used by the
 * interpreter and the CPU backend's runtime. */
void tsr_interp_print(FILE *f, const char *text, uint32_t count,
                      tsr_print_value_t (*value)(void *ctx, uint32_t i), void *ctx);

#endif /* TESSERA_INTERP_RUNTIME_H */
