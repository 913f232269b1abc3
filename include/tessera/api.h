/* tessera's API: a context (configuration instead of environment
 * variables), one executable handle for every backend (the one way to run a
 * kernel), run results with structured diagnostics, output through
 * callbacks instead of FILE *, and the Mosaic TPU emitter. Made for
 * ctypes/cffi too: plain structs, enums, function pointers and opaque
 * handles only. Walkthrough with a complete example: docs/api.md. */
#ifndef TESSERA_API_H
#define TESSERA_API_H

#include "tessera/base.h"
#include "tessera/cache.h"
#include "tessera/interp.h"
#include "tessera/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- ABI version ------------------------------------------------------------ */

/* The version of the binary interface of the public headers (tessera/),
 * as a binding sees it. Bump it with any change that makes code built
 * against the old headers misread the library: a field of a struct added,
 * removed, retyped or moved (structs a binding mirrors, such as the option
 * structs, tsr_diagnostic_t or the kernel library's parameters, included);
 * an enum constant renumbered, or added to an enum a binding mirrors
 * (dtypes, backends, status codes, diagnostic kinds...); a function's
 * parameters or result changed, or a function removed. A new function or a
 * new struct alone needs no bump. python/tessera/_capi.py's ABI_VERSION
 * follows it (python/tests/test_pkg_layout.py compares the two, and the
 * package refuses to load a library whose tsr_abi_version() differs). */
#define TSR_ABI_VERSION 6

/* TSR_ABI_VERSION of the library's build: a binding compares it with the
 * version it was written for before it calls anything else. */
TSR_API uint32_t tsr_abi_version(void);

/* ---- Output ---------------------------------------------------------------- */

/* Receives text the library writes: `print` op output, warning lines, cache
 * warnings. `text` is borrowed for the call only and holds `size` bytes (not
 * NUL-terminated); a line may arrive in several calls. May be called from
 * any thread that runs the kernel (the cpu backend prints from one thread
 * per simulated core), so it must be thread-safe when cores > 1. */
typedef void (*tsr_output_fn)(void *user, const char *text, size_t size);

/* A tsr_output_fn that drops the text: pass it to silence a stream. */
TSR_API void tsr_output_discard(void *user, const char *text, size_t size);

/* Where a run's text goes. A NULL function means "not set here": the next
 * level decides (run options, then the executable's options, then the
 * context), and stderr when no level sets it. */
typedef struct tsr_output {
  tsr_output_fn print;   /* the kernel's `print` ops */
  tsr_output_fn warning; /* warning lines ("file:line:col: warning: ...");
                            they are in the run result as records too */
  void *user;            /* passed to both */
} tsr_output_t;

/* ---- Context ------------------------------------------------------------------ */

/* Configuration of the disk cache and defaults for runs, read by the library
 * instead of environment variables: a library function given a context
 * never calls getenv for configuration. Thread-safe: executables of one
 * context may be created and run from several threads at once. A context
 * has its own caches (prepared programs and loaded compiled kernels in
 * memory, the disk cache) and allocator: the context, its executables,
 * their runs and results are allocated through it. What stays
 * process-wide: the lowering library (LLVM cannot be unloaded). */
typedef struct tsr_context tsr_context_t;

typedef struct tsr_context_options {
  bool disk_cache;            /* use a disk cache for compiled kernels;
                                 default false */
  const char *cache_dir;      /* required with disk_cache (unless
                                 cache_environment) */
  const char *cache_key_file; /* likewise required: the key that
                                 authenticates entries, outside cache_dir
                                 (docs/cache.md, "Trust model") */
  uint64_t cache_max_bytes;   /* 0: 1 GiB */
  bool cache_shared;          /* a cache shared between users on purpose */
  bool cache_optional;        /* an unusable disk cache is one warning (on
                                 output.warning) and no disk cache, not an
                                 error of tsr_context_create */
  bool cache_environment;     /* what the fields above leave unset (NULL,
                                 0, false) comes from the environment as
                                 tsr_disk_cache_open reads it; only
                                 tsr_context_options_from_environment sets
                                 this */
  const char *lower_library;  /* libtessera-lower.so to load; NULL: the one
                                 beside libtessera or installed. Process-wide:
                                 the library is loaded once, and the first
                                 context created before that decides */
  tsr_output_t output;        /* default output of runs and cache warnings */
  tsr_allocator_t allocator;  /* tessera's memory for the context, its
                                 executables and runs (tessera/base.h);
                                 zero: malloc */
} tsr_context_options_t;

/* Defaults: no disk cache, output to stderr. Reads no environment. */
TSR_API void tsr_context_options_initialize(tsr_context_options_t *options);

/* The options the environment gives, as the CLI uses them: no disk cache under TESSERA_CACHE=off (also 0, false, no);
 * cache_environment set, so that the disk cache reads TESSERA_CACHE_DIR
 * (else $XDG_CACHE_HOME/tessera, else ~/.cache/tessera),
 * TESSERA_CACHE_KEY_FILE (else $XDG_CONFIG_HOME/tessera/cache.key, else
 * ~/.config/tessera/cache.key), TESSERA_CACHE_MAX_SIZE and
 * TESSERA_CACHE_SHARED for the fields left unset (docs/cache.md);
 * cache_optional; lower_library from TESSERA_LOWER_LIBRARY (pointing into
 * the environment: valid until it changes). Override fields, then
 * tsr_context_create. */
TSR_API void tsr_context_options_from_environment(tsr_context_options_t *options);

/* Makes a context; copies `options` (NULL: tsr_context_options_initialize)
 * and every string in it, and opens the disk cache if asked. TSR_IO_ERROR
 * when the disk cache cannot be used (unless cache_optional);
 * TSR_INVALID_ARGUMENT when disk_cache lacks cache_dir or cache_key_file,
 * when the allocator has `allocate` without `release`, or when
 * lower_library names another library than the one this process already
 * chose. */
TSR_API tsr_status_t tsr_context_create(const tsr_context_options_t *options,
                                        tsr_context_t **out_context) TSR_MUST_USE;
/* tsr_context_options_from_environment + tsr_context_create. */
TSR_API tsr_status_t tsr_context_create_from_environment(tsr_context_t **out_context)
    TSR_MUST_USE;
/* Lets go of the context. Its executables need not be destroyed first:
 * each holds a reference to the context, which is freed (its caches, disk
 * cache handle and memory) when the last of them is destroyed, or now when
 * none is left. The handle must not be used after this call (also not to
 * make executables), except through the executables that hold it. */
TSR_API void tsr_context_destroy(tsr_context_t *context);
/* The context's disk cache (borrowed), NULL when it has none: for its
 * directory, key file and statistics (tessera/cache.h). */
TSR_API tsr_disk_cache_t *tsr_context_disk_cache(const tsr_context_t *context);

/* The counters of a disk cache as a context used it (the cpu backend's
 * compiled objects). */
typedef struct tsr_runtime_disk_use {
  bool enabled; /* false: no disk cache, or a failed read or write stopped
                   its use */
  uint64_t hits, misses, puts, bad_entries, errors;
} tsr_runtime_disk_use_t;

/* The counters of the context's disk cache; `enabled` is false when it has
 * none, or after a failed read or write stopped its use (the counters are
 * still those of the cache). */
TSR_API void tsr_context_disk_use(const tsr_context_t *context,
                                  tsr_runtime_disk_use_t *out_use);

typedef struct tsr_runtime_cache_stats {
  /* the in-memory cache of prepared programs */
  uint64_t memory_hits, memory_misses, memory_builds, memory_waits,
      memory_evictions, memory_entries, memory_bytes;
} tsr_runtime_cache_stats_t;

typedef struct tsr_runtime_compiled_stats {
  /* the in-memory cache of loaded compiled kernels */
  uint64_t memory_hits, memory_misses, memory_entries;
  tsr_runtime_disk_use_t disk; /* shared objects are among its entries */
  uint64_t compiles;      /* kernels the lowering library compiled */
  uint64_t load_failures; /* cached objects that did not load (compiled again) */
  bool lower_library_loaded; /* this process opened libtessera-lower.so
                                (and with it MLIR and LLVM) */
} tsr_runtime_compiled_stats_t;

/* The counters of the context's caches: prepared programs (interpreter)
 * and compiled kernels (memory, disk, compiles). */
typedef struct tsr_context_stats {
  tsr_runtime_cache_stats_t programs;
  tsr_runtime_compiled_stats_t compiled;
} tsr_context_stats_t;
TSR_API void tsr_context_stats(const tsr_context_t *context, tsr_context_stats_t *out_stats);

/* ---- Diagnostics ------------------------------------------------------------- */

/* What a diagnostic reports: a closed set (new kinds are appended). */
typedef enum tsr_diagnostic_kind {
  TSR_DIAG_OTHER,              /* none of those below (also notes) */
  TSR_DIAG_PARSE,              /* the text does not follow the grammar */
  TSR_DIAG_VERIFY,             /* a type, shape or space rule is broken */
  TSR_DIAG_OUT_OF_BOUNDS,      /* an index, slice or block index outside its
                                  array */
  TSR_DIAG_UNINITIALIZED,      /* a read of memory never written */
  TSR_DIAG_OUTPUT_UNWRITTEN,   /* output elements never written */
  TSR_DIAG_REVISIT,            /* an output block revisited after copy-out */
  TSR_DIAG_CORE_CONFLICT,      /* one output block written by two cores */
  TSR_DIAG_RACE,               /* a data race (second access: other_*) */
  TSR_DIAG_DEADLOCK,           /* every core blocked */
  TSR_DIAG_SEMAPHORE_LEFTOVER, /* a semaphore not zero at kernel end */
  TSR_DIAG_DMA_IN_FLIGHT,      /* a DMA never waited for, or a buffer
                                  released under one */
  TSR_DIAG_VMEM_BUDGET,        /* VMEM over the chip's budget */
  TSR_DIAG_ASSERT,             /* an `assert` op failed */
  TSR_DIAG_RUN_STOPPED,        /* timeout, step limit or cancel */
  TSR_DIAG_DEVICE_RANGE,       /* a device or core id that does not exist */
  TSR_DIAG_SHAPE_MISMATCH,     /* views or operands of different shapes */
  TSR_DIAG_INVALID_ARGUMENT,   /* the caller passed something malformed */
  TSR_DIAG_UNIMPLEMENTED,      /* valid, but not supported by this backend */
  TSR_DIAG_IO,                 /* a file could not be read or written */
  TSR_DIAG_INTERNAL,           /* a bug in tessera */
  TSR_DIAG_SEMAPHORE,          /* a semaphore overflow, or a negative signal
                                  or wait amount */
  TSR_DIAG_BAD_VALUE,          /* an operand value an op cannot take (a loop
                                  step of 0) */
  TSR_DIAG_OUT_OF_MEMORY,      /* the run could not allocate what an op needs */
  TSR_DIAG_PARALLEL_REVISIT,   /* an output block written along a grid dim a
                                  TPU may split between TensorCores */
  TSR_DIAG_KIND_COUNT
} tsr_diagnostic_kind_t;

/* tsr_diagnostic_severity_t and tsr_diagnostic_severity_name are in
 * tessera/base.h: a status's records have a severity too. */

/* One diagnostic: a run's records come from the run's diagnostics as they
 * are reported (every field the reporter knows), a status's from the records
 * it was made with (location, severity, op, message;
 * tsr_diagnostic_list_create_from_status).
 * Strings are pointer + length and also NUL-terminated;
 * an absent string is {"", 0}. Numbers are -1 (or rank 0) when unknown.
 * Fields may be appended in later versions, never reordered. */
typedef struct tsr_diagnostic {
  tsr_diagnostic_kind_t kind;
  tsr_diagnostic_severity_t severity;
  tsr_string_view_t file;    /* the .tsr file (or the builder's loc.file) */
  int32_t line, col;         /* 1-based */
  tsr_string_view_t kernel;  /* without '@' */
  tsr_string_view_t op;      /* mnemonic ("dma_start"), or the pipeline
                                work ("out %y") for block copies, or "the
                                grid step" (a run stopped between steps) */
  tsr_string_view_t buffer;  /* the ref or operand named, without '%' */
  uint32_t index_rank;       /* the index range on `buffer`: */
  int64_t index_lo[TSR_MAX_RANK]; /* first index per dimension */
  int64_t index_hi[TSR_MAX_RANK]; /* one past the last */
  uint32_t grid_rank;        /* rank of grid_point; 0: none or unknown */
  int64_t grid_point[TSR_MAX_RANK];
  int32_t core, device;      /* the simulated core and device; -1 when
                                the run has one (the text names neither) */
  /* races: the second access */
  tsr_string_view_t other_op;
  int32_t other_line;
  uint32_t other_grid_rank;
  int64_t other_grid_point[TSR_MAX_RANK];
  tsr_string_view_t message; /* the text after "severity: " */
  tsr_string_view_t text;    /* the whole line, as printed */
} tsr_diagnostic_t;

TSR_API const char *tsr_diagnostic_kind_name(tsr_diagnostic_kind_t kind);

/* An immutable list of diagnostics. */
typedef struct tsr_diagnostic_list tsr_diagnostic_list_t;

TSR_API size_t tsr_diagnostic_list_count(const tsr_diagnostic_list_t *list);
/* Borrowed, valid as long as the list; NULL past the end. */
TSR_API const tsr_diagnostic_t *tsr_diagnostic_list_get(const tsr_diagnostic_list_t *list,
                                                        size_t i);
/* The diagnostics a status carries (a failed parse, verify or create), one
 * per line of its message, made where each was reported (the text is never
 * parsed): location, severity, op when known, message and text; the kind
 * from the status code (a run's status gives kind other: a run's records
 * are its result's). A status made without located diagnostics gives one
 * record without location whose message is the whole message. A NULL
 * status gives an empty list. */
TSR_API tsr_status_t tsr_diagnostic_list_create_from_status(const tsr_status_t status,
                                                            tsr_diagnostic_list_t **out_list)
    TSR_MUST_USE;
TSR_API void tsr_diagnostic_list_destroy(tsr_diagnostic_list_t *list);
/* The warnings `kernel` earns before any run, as records (possibly none)
 * whose text is what a run would print: the parallel_revisit warning of
 * each output whose block index cannot change along a grid dim a TPU may
 * split between TensorCores (docs/semantics.md, "Outputs along a parallel
 * dimension"; a dynamic extent counts as more than one step). What `tessera
 * check` prints besides the verifier's errors. The kernel must verify. */
TSR_API tsr_status_t tsr_kernel_static_warnings(const tsr_ir_kernel_t *kernel,
                                                tsr_diagnostic_list_t **out_list)
    TSR_MUST_USE;

/* ---- Executables -------------------------------------------------------------- */

/* Where an executable runs a kernel: the one list of backends (the cache
 * key's "target" component is its name, tsr_backend_name). */
typedef enum tsr_backend {
  TSR_BACKEND_INTERP, /* the interpreter: every check (docs/semantics.md) */
  TSR_BACKEND_CPU,    /* native code through MLIR/LLVM (docs/lowering.md):
                         no bounds, uninitialized or race checks */
} tsr_backend_t;

/* "interp", "cpu"; "?" for another value. */
TSR_API const char *tsr_backend_name(tsr_backend_t backend);
TSR_API bool tsr_backend_from_name(const char *name, tsr_backend_t *out_backend);

/* What an executable is made with. */
typedef struct tsr_executable_options {
  tsr_backend_t backend;    /* default TSR_BACKEND_INTERP */
  tsr_interp_options_t run; /* what its runs do (tessera/interp.h), with
                               tsr_interp_options_initialize's defaults.
                               The interpreter reads every field; the cpu
                               backend devices, cores, uninit, max_errors,
                               strict, the bounds (timeout_seconds,
                               max_steps, cancel), the order of parallel
                               steps (shuffle_parallel, shuffle_seed,
                               parallel_order), on_grid_step,
                               on_progress (at the granularity of its
                               requests for steps), threads,
                               out_blocks_copied_in, oob_reads_uninit and
                               padded (with chip's tiling; these three are
                               compiled into its code, so part of its key); it checks the bounds of dynamic
                               indices and block indices and revisited
                               output blocks, ignores the other checks and
                               trace_path. The run-time fields are the
                               defaults of the runs, which tsr_run_options_t
                               may change. */
  int opt_level;            /* cpu: LLVM optimization level 0-3; default 2 */
  tsr_output_t output;      /* default output of runs; NULL functions:
                               the context's */
} tsr_executable_options_t;

/* Backend interp, tsr_interp_options_initialize's run options, opt_level
 * 2, no output set. */
TSR_API void tsr_executable_options_initialize(tsr_executable_options_t *options);

/* A kernel made ready to run on one backend. Immutable; runs may be
 * concurrent (thread-safe). Borrows nothing from the kernel or the options
 * (the module may be destroyed right after); holds a reference to
 * `context`, which so lives until the executable is freed (the two may be
 * destroyed in either order). */
typedef struct tsr_executable tsr_executable_t;

/* Verifies and prepares (interp) or compiles (cpu) `kernel` through the
 * context's caches (in memory, and its disk cache for compiled code) under
 * the key tsr_runtime_key_create gives (tessera/runtime.h). `options` may
 * be NULL (defaults). Errors: TSR_VERIFY_ERROR, TSR_RESOURCE_EXHAUSTED
 * (VMEM budget), TSR_UNIMPLEMENTED (no cpu backend in this build, or an op
 * it cannot lower), TSR_INVALID_ARGUMENT;
 * tsr_diagnostic_list_create_from_status gives their records. */
TSR_API tsr_status_t tsr_executable_create(tsr_context_t *context,
                                           const tsr_ir_kernel_t *kernel,
                                           const tsr_executable_options_t *options,
                                           tsr_executable_t **out_executable)
    TSR_MUST_USE;
/* Lets go of the executable. Runs in progress (on other threads, or the
 * run whose output callback calls this) are not disturbed: the executable
 * is freed when the last of them returns, or now when none is running. A
 * run must not start after this call: the caller orders its own calls
 * (a run begun before it, by the caller's synchronization, is one in
 * progress). */
TSR_API void tsr_executable_destroy(tsr_executable_t *executable);
TSR_API tsr_backend_t tsr_executable_backend(const tsr_executable_t *executable);

/* Per-run options: each field left at its default (tsr_run_options_initialize)
 * keeps what the executable was made with. */
typedef struct tsr_run_options {
  tsr_output_t output;        /* NULL functions: the executable's */
  int strict;                 /* -1 (default): the executable's; 0 or 1 */
  double timeout_seconds;     /* 0: the executable's */
  uint64_t max_steps;         /* 0: the executable's */
  const volatile int *cancel; /* NULL: the executable's */
  const char *trace_path;     /* interpreter: a Chrome trace of this run;
                                 NULL: the executable's */
  tsr_progress_fn on_progress; /* NULL: the executable's */
  void *on_progress_user;
  double progress_interval;   /* < 0 (default): the executable's */
} tsr_run_options_t;

TSR_API void tsr_run_options_initialize(tsr_run_options_t *options);

/* What a run did. */
typedef struct tsr_run_result tsr_run_result_t;

/* Runs the executable. `operands`: one array per non-scratch operand in
 * declaration order, with the declared dtype and shape (and a leading
 * dimension of `devices` when there are several); outputs are overwritten.
 * Only the arrays' data is read and written, so an array may point at
 * memory the caller owns (a numpy buffer): do not deinitialize it then.
 * `run_options` may be NULL.
 *
 * Returns the run's status: NULL when the kernel ran without error, else
 * TSR_KERNEL_ERROR (the kernel misbehaved), TSR_INVALID_ARGUMENT (operands
 * do not match), TSR_OUT_OF_MEMORY... Unlike other out-parameters,
 * *out_result (if out_result is not NULL) is written on failure too: it
 * holds the diagnostics, errors and warnings, as records. Thread-safe. */
TSR_API tsr_status_t tsr_executable_run(const tsr_executable_t *executable,
                                        tsr_array_t *const *operands, size_t num_operands,
                                        const tsr_run_options_t *run_options,
                                        tsr_run_result_t **out_result) TSR_MUST_USE;

TSR_API void tsr_run_result_destroy(tsr_run_result_t *result);
/* TSR_OK when the run succeeded (warnings allowed). */
TSR_API tsr_status_code_t tsr_run_result_code(const tsr_run_result_t *result);
/* The status message ("" on success); borrowed from the result. */
TSR_API const char *tsr_run_result_message(const tsr_run_result_t *result);
/* Errors then warnings of the run (borrowed from the result). */
TSR_API const tsr_diagnostic_list_t *tsr_run_result_diagnostics(const tsr_run_result_t *result);
/* Counters of the run (interpreter; the cpu backend leaves them zero). */
TSR_API void tsr_run_result_stats(const tsr_run_result_t *result,
                                  tsr_interp_stats_t *out_stats);

/* ---- Runs as XLA custom calls on CPU ------------------------------------------- */

/* One XLA FFI handler (XLA's FFI C API 0.x, what jax.ffi.ffi_call calls on
 * CPU) for every bound executable: the custom call's u64 attributes
 * `tsr_binding` (the binding's address) and `tsr_process`
 * (tsr_xla_process()) name the binding; its operands are the inputs and its
 * results the outputs, in the executable's order. A run that succeeds
 * without text makes no call into the binding's language: the handler
 * points the operands at XLA's buffers and runs. Anything else goes to the
 * binding's callbacks, which answer by setting *out_error (to the
 * XLA_FFI_Error * to report, or NULL):
 *   - `call(user, frame, out_error)` makes the whole call when the binding
 *     is not direct or is retired;
 *   - `finish(user, frame, status, result, printed, printed_size, warned,
 *     warned_size, interrupted, out_error)` comes after a direct run that
 *     failed, printed or warned, with the run's status (NULL: ok) and
 *     result (both freed after the call), the text of the kernel's prints
 *     and of its warnings (NUL-terminated, borrowed for the call), and
 *     whether tsr_xla_interrupt stopped it. For a failed run it must answer
 *     an error; after a NULL the handler reports the status itself.
 * A callback that returns without answering (a binding's language may
 * drop an exception raised as the callback is entered: a pending signal)
 * is taken as interrupted: `finish` is called once more, with
 * `interrupted` set; an unanswered `call` (no run made) is reported as
 * CANCELLED. A `tsr_process` of another process (a compiled call out of a
 * persistent compilation cache) is reported as an error, never followed. */
typedef void (*tsr_xla_call_fn)(void *user, void *call_frame, void **out_error);
typedef void (*tsr_xla_finish_fn)(void *user, void *call_frame, tsr_status_t status,
                                  const tsr_run_result_t *result, const char *printed,
                                  size_t printed_size, const char *warned, size_t warned_size,
                                  bool interrupted, void **out_error);
typedef struct tsr_xla_binding tsr_xla_binding_t;

/* The handler (an XLA_FFI_Handler *) to register under one target name. */
TSR_API void *tsr_xla_handler(void);
/* This process's value of the `tsr_process` attribute (random per process). */
TSR_API uint64_t tsr_xla_process(void);
/* Binds `executable`, which must outlive the binding's direct runs (retire
 * the binding before destroying it). `operands` gives each operand's dtype
 * and shape (data is ignored); the first num_inputs are the inputs.
 * `direct`: calls may run without `call`. A binding is never freed: XLA
 * may keep a compiled call for the life of the process. */
TSR_API tsr_status_t tsr_xla_bind(const tsr_executable_t *executable,
                                  const tsr_array_t *operands, size_t num_operands,
                                  size_t num_inputs, bool direct, tsr_xla_call_fn call,
                                  tsr_xla_finish_fn finish, void *user,
                                  tsr_xla_binding_t **out_binding) TSR_MUST_USE;
/* From now on every call of the binding goes to `call`; returns once no
 * direct run of it is in progress. */
TSR_API void tsr_xla_retire(tsr_xla_binding_t *binding);
/* The thread whose direct runs tsr_xla_interrupt cancels (pthread_self()'s
 * value; 0: none). */
TSR_API void tsr_xla_set_interrupt_thread(uint64_t thread);
/* Cancels the direct run in progress on that thread, if there is one
 * (from any thread: a signal watcher); returns whether there was. */
TSR_API bool tsr_xla_interrupt(void);
/* How many direct runs this process has started. */
TSR_API uint64_t tsr_xla_direct_runs(void);

/* ---- TPU (Mosaic) --------------------------------------------------------------- */

/* Emits `kernel` as a Mosaic TPU MLIR module in text form, laid out as
 * Pallas's TPU lowering lays it out (docs/tpu.md): one func.func for the
 * kernel (grid indices, scalar-prefetch refs in SMEM, windowed operands,
 * scratch and semaphores) with dimension_semantics, iteration_bounds,
 * scalar_prefetch, scratch_operands, tpu.core_type and window_params,
 * and one func.func @transform_i per windowed operand. Pre-serialization
 * form (tpu.* op names, no stable_mosaic version): what
 * jax._src.tpu_custom_call.as_tpu_kernel takes. Text only: no MLIR is
 * linked or run.
 *
 * `chip`: NULL is "v5e"; one of v2, v3, v4, v5e, v5p, v6e, v7x, tpu7x
 * (TSR_INVALID_ARGUMENT otherwise). `context` may be NULL (no cache); with
 * a disk cache, the text is cached under the canonical kernel bytes, the
 * target "tpu", the chip, the emitter's version and the tessera build
 * (docs/cache.md), and a hit returns the stored text. *out_text is freed
 * with tsr_ir_string_free.
 *
 * The kernel is verified (TSR_VERIFY_ERROR), then checked against the
 * block-shape rules Pallas's TPU lowering enforces (TSR_VERIFY_ERROR, as
 * tsr_tpu_check); an op, dtype or shape with no TPU form yet is
 * TSR_UNIMPLEMENTED. Each failure carries located diagnostic records
 * (file:line:col, op) naming what and why:
 * tsr_diagnostic_list_create_from_status. Thread-safe for distinct
 * kernels (a module belongs to one thread at a time). */
TSR_API tsr_status_t tsr_tpu_emit(tsr_context_t *context, const tsr_ir_kernel_t *kernel,
                                  const char *chip, char **out_text) TSR_MUST_USE;

/* Verifies `kernel` and checks it against Pallas's TPU layout rules for
 * `chip` (NULL: "v5e"; docs/tpu.md, "Layout rules"): the last two block
 * dims divisible by 8 and 128 or equal to the array's, 1-D blocks, no
 * windowing without a grid, no more VMEM than the chip has (see
 * tsr_tpu_vmem), no f16 operands (libtpu's rule). NULL when they hold;
 * TSR_VERIFY_ERROR with one located diagnostic per broken rule;
 * TSR_INVALID_ARGUMENT for an unknown chip (a NULL kernel checks only the
 * chip name). Then the module is emitted and dropped: what tsr_tpu_emit
 * cannot emit is its located TSR_UNIMPLEMENTED here too, so a kernel
 * passes exactly when tsr_tpu_emit gives a module. What Pallas accepts
 * passes. */
TSR_API tsr_status_t tsr_tpu_check(const tsr_ir_kernel_t *kernel, const char *chip)
    TSR_MUST_USE;

/* The VMEM `kernel` keeps live on `chip` (NULL: "v5e"), as Mosaic lays it
 * out: windowed operands double-buffered, scratch and scoped buffers, each
 * packed (two i4 to a byte) and padded to whole memory tiles (an upper
 * bound); the scoped VMEM libtpu
 * gives a kernel whose call sets no vmem_limit_bytes; and the chip's VMEM
 * per core. A kernel needing more than the default needs a
 * vmem_limit_bytes of at least `need_bytes` (tessera.jax.tpu_call sets
 * it); more than `capacity_bytes` does not compile (tsr_tpu_check).
 * docs/tpu.md, "VMEM". */
typedef struct tsr_tpu_vmem {
  int64_t need_bytes;
  int64_t default_limit_bytes;
  int64_t capacity_bytes;
} tsr_tpu_vmem_t;
TSR_API tsr_status_t tsr_tpu_vmem(const tsr_ir_kernel_t *kernel, const char *chip,
                                  tsr_tpu_vmem_t *out_vmem) TSR_MUST_USE;

/* ---- Memory -------------------------------------------------------------------- */

/* Frees a buffer or string the library handed out through an out-parameter
 * (char **out_text, void **out_bytes, ...); NULL is fine. The older
 * tsr_ir_string_free, tsr_runtime_text_free and tsr_disk_cache_free are
 * the same function under other names. */
TSR_API void tsr_free_buffer(void *buffer);

#ifdef __cplusplus
}
#endif
#endif /* TESSERA_API_H */
