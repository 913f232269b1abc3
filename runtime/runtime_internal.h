/* What the runtime's files share. Library-internal.
 *
 * Layering (a file calls only the files below it, never back):
 *   runtime.c, program_cache.c   loading kernels; the interpreter's programs
 *   compiled.c                   the cpu backend: compile, load, run
 *   cpu_run.c                    running compiled code on simulated cores
 *   guard.c                      guard bytes around a compiled run's arrays
 *   key.c                        cache keys; backend names
 *   disk.c                       the process's disk cache; bindings
 *   target.c (runtime/target.h)  the host and the compiled-code target
 * program_cache.c and compiled.c make keys (key.c); key.c and compiled.c
 * read the target (target.c), which calls no other runtime file. */
#ifndef TESSERA_RUNTIME_INTERNAL_H
#define TESSERA_RUNTIME_INTERNAL_H

#include <stdio.h>

#include "base/base_internal.h"
#include "cache/memcache.h"
#include "tessera/runtime.h"

/* The entry points below the executables (runtime/executable.c): programs
 * and compiled kernels through the caches of the context bound to the
 * thread (tsr_runtime_bind), else the process's. Tests and benchmarks call
 * them directly; everyone else runs kernels through tessera/api.h. */

/* ---- Prepared programs through the cache (runtime/program_cache.c) ---- */

/* interp/interp_runtime.h */
typedef struct tsr_interp_program tsr_interp_program_t;

/* Prepares `kernel` for the interpreter through the in-memory cache. On a
 * hit, verification and preparation are skipped: the cached program is
 * bound to this kernel's names and locations (diagnostics point into this
 * kernel's file) and to the run-time fields of `options` (may be NULL). On
 * a miss the kernel is verified and prepared, once even when several
 * threads ask at the same time. The result is destroyed with
 * tsr_interp_program_destroy. Thread-safe. The interpreter keeps nothing on
 * disk (docs/cache.md says why). */
tsr_status_t tsr_runtime_prepare(const tsr_ir_kernel_t *kernel,
                                 const tsr_interp_options_t *options,
                                 tsr_interp_program_t **out_program) TSR_MUST_USE;
/* The process's cache of prepared programs: its counters, and dropping its
 * entries (programs in use live on). */
void tsr_runtime_cache_stats(tsr_runtime_cache_stats_t *out_stats);
void tsr_runtime_cache_clear(void);

/* ---- Compiled kernels: the cpu backend (runtime/compiled.c) ---- */

/* Options that change the code compiled for a kernel (part of its key). */
typedef struct tsr_compile_options {
  int opt_level;   /* LLVM optimization level, 0 to 3; default 2 */
  uint32_t bounds; /* TSR_LOWER_OOB_READS_UNINIT.. (lower/lower_api.h): how
                      far accesses may reach; default 0, the logical shape */
  /* tsr_interp_options_t's out_blocks_copied_in: output blocks copied in
   * from the array when a step enters them (TSR_LOWER_OUT_COPY_IN), block
   * padding JAX's uninitialized value; default false. Other code, so part
   * of the key; the default's code is the same as without the option. */
  bool out_blocks_copied_in;
} tsr_compile_options_t;

/* runtime/target.c */
void tsr_compile_options_initialize(tsr_compile_options_t *options);
/* The compile options of a cpu executable made with `o`: its opt_level and
 * the run options that change the compiled code (oob_reads_uninit, padded
 * and, when padded, the chip's tiling). */
void tsr_compile_options_of(const tsr_executable_options_t *o, tsr_compile_options_t *out);

/* A kernel compiled to native code for the host CPU and loaded in this
 * process. Immutable; runs may be concurrent. */
typedef struct tsr_compiled_kernel tsr_compiled_kernel_t;

/* Compiles `kernel` for the host CPU through the caches: a kernel with the
 * same key (tsr_runtime_compiled_key_create) is found in memory, else its
 * shared object is loaded from the disk cache without running MLIR or
 * loading LLVM, else the lowering library compiles it, once even when
 * several threads ask at the same time, and the object goes to the disk
 * cache. The kernel is verified before it is compiled. `options` may be
 * NULL (defaults). The result does not borrow from `kernel`. Thread-safe.
 * Errors as tsr_runtime_lower_text's (tessera/runtime.h). */
tsr_status_t tsr_runtime_compile(const tsr_ir_kernel_t *kernel,
                                 const tsr_compile_options_t *options,
                                 tsr_compiled_kernel_t **out_kernel) TSR_MUST_USE;
void tsr_compiled_kernel_destroy(tsr_compiled_kernel_t *kernel);

/* Runs the compiled kernel, its `print` output to stderr. `operands` as for
 * tsr_interp_program_run: one array per non-scratch operand in declaration
 * order with the declared dtype and shape, with a leading dimension of
 * options->devices when that is more than 1 (TSR_INVALID_ARGUMENT
 * otherwise, naming the operand). Outputs are overwritten; an aliased
 * output is first set to a copy of its input, as the interpreter does.
 * `options` may be NULL; tsr_executable_options_t says which fields a
 * compiled run uses (one thread per simulated core; parallel grid
 * dimensions split as the interpreter splits them). The compiled code does
 * no checks (bounds, uninitialized reads, races), but assertions,
 * deadlocks and signals to cores that do not exist are TSR_KERNEL_ERROR
 * with the interpreter's messages. Thread-safe. */
tsr_status_t tsr_compiled_kernel_run(const tsr_compiled_kernel_t *kernel,
                                     tsr_array_t *const *operands, size_t num_operands,
                                     const tsr_interp_options_t *options) TSR_MUST_USE;

/* The process's compiled-kernel caches' counters. */
void tsr_runtime_compiled_stats(tsr_runtime_compiled_stats_t *out_stats);

/* ---- Keys (runtime/key.c) ---- */

/* "tessera VERSION canon N ops HASH build ID": the producer component of
 * every key (runtime/key.c). Computed once per process. */
const char *tsr_runtime_producer(void);

/* The key of `kernel` prepared for the interpreter with `options` (NULL:
 * defaults): its semantic fields only. */
tsr_status_t tsr_runtime_interp_key_create(const tsr_ir_kernel_t *kernel,
                                           const tsr_interp_options_t *options,
                                           tsr_runtime_key_t **out_key) TSR_MUST_USE;
/* The key of `kernel` compiled for the host CPU with `options` (NULL:
 * defaults). TSR_UNIMPLEMENTED without a compiled backend. */
tsr_status_t tsr_runtime_compiled_key_create(const tsr_ir_kernel_t *kernel,
                                             const tsr_compile_options_t *options,
                                             tsr_runtime_key_t **out_key) TSR_MUST_USE;

/* ---- Compiled kernels (runtime/compiled.c) ---- */

/* Loads the bytes of a shared object made by the lowering library (from a
 * memfd, else a temporary file) and finds its kernel entry point. Tests
 * use it directly. *out_handle is released with tsr_runtime_object_unload. */
typedef struct tsr_runtime_object tsr_runtime_object_t;
tsr_status_t tsr_runtime_object_load(const void *bytes, size_t size,
                                     tsr_runtime_object_t **out_object) TSR_MUST_USE;
void tsr_runtime_object_unload(tsr_runtime_object_t *object);
/* The packed entry point: void fn(void **args), lower/lower_api.h. */
void (*tsr_runtime_object_entry(const tsr_runtime_object_t *object))(void **);

/* ---- Running compiled kernels (runtime/cpu_run.c) ---- */

/* What a run needs from the kernel for its messages (names, locations,
 * print formats, semaphores); copied, borrows nothing. */
typedef struct tsr_cpu_info tsr_cpu_info_t;
tsr_status_t tsr_cpu_info_create(const tsr_ir_kernel_t *kernel,
                                 tsr_cpu_info_t **out_info) TSR_MUST_USE;
void tsr_cpu_info_destroy(tsr_cpu_info_t *info);
const char *tsr_cpu_info_kernel_name(const tsr_cpu_info_t *info);
/* The i-th non-scratch operand's name. */
const char *tsr_cpu_info_operand_name(const tsr_cpu_info_t *info, uint32_t i);
/* Runs the kernel's entry point on options->devices x options->cores
 * threads (one call in this thread for one core), `print` output to
 * `print_stream` (tsr_cpu_run_with; NULL: stderr). args: the packed
 * arguments of the memrefs (lower_api.h), made from `operands`; each core
 * gets its own copy with its six scalars after them. Aliased outputs are
 * first set to their inputs. Kernel errors (assertions, deadlocks, signals
 * to cores that do not exist) are TSR_KERNEL_ERROR as in the interpreter;
 * with out_diag, the run's sink is moved there (tsr_diag_sink_move). */
tsr_status_t tsr_cpu_run(void (*entry)(void **), const tsr_cpu_info_t *info,
                         tsr_array_t *const *operands, void **args, uint32_t num_memrefs,
                         const tsr_interp_options_t *options) TSR_MUST_USE;
struct tsr_diag_sink;
tsr_status_t tsr_cpu_run_with(void (*entry)(void **), const tsr_cpu_info_t *info,
                              tsr_array_t *const *operands, void **args, uint32_t num_memrefs,
                              const tsr_interp_options_t *options, FILE *print_stream,
                              struct tsr_diag_sink *out_diag) TSR_MUST_USE;
/* Whether the i-th non-scratch operand is an output. */
bool tsr_cpu_info_operand_is_output(const tsr_cpu_info_t *info, uint32_t i);
/* The code was compiled with output blocks copied in
 * (tsr_compile_options_t): runs fill every fresh output with JAX's
 * uninitialized value first. Default false. */
void tsr_cpu_info_set_out_copy_in(tsr_cpu_info_t *info, bool copy_in);

/* ---- Guard bytes around a compiled run's arrays (runtime/guard.c) ---- */

/* Whether $TESSERA_GUARD is set (and neither empty nor "0"): compiled runs
 * then go through a guard set (docs/lowering.md, "Guard bytes"). Read at
 * each call. */
bool tsr_guard_enabled(void);
/* Copies of `operands` (operands sharing data share one copy), each between
 * guard bytes: out_arrays[i] is operands[i] with its data replaced by its
 * copy's. is_output[i]: copied back by tsr_guard_set_finish. */
typedef struct tsr_guard_set tsr_guard_set_t;
tsr_status_t tsr_guard_set_create(tsr_array_t *const *operands, uint32_t num,
                                  const bool *is_output, tsr_array_t *out_arrays,
                                  tsr_guard_set_t **out_set) TSR_MUST_USE;
/* Checks every guard (and that the copies of arrays no output shares are
 * unchanged), copies the outputs back and destroys the set: TSR_INTERNAL
 * naming each operand (names[i]) written outside, with the bytes
 * overwritten. */
tsr_status_t tsr_guard_set_finish(tsr_guard_set_t *set, const char *kernel,
                                  const char *const *names) TSR_MUST_USE;
void tsr_guard_set_destroy(tsr_guard_set_t *set);
/* "f16[2, 129]" */
void tsr_guard_format_type(char *buf, size_t size, const tsr_array_t *array);

/* tsr_compiled_kernel_run with `print` output to `print_stream` (NULL:
 * stderr), moving the run's diagnostics sink (its records) to *out_diag
 * when not NULL (interp/diag.h: tsr_diag_sink_move); the caller
 * deinitializes it while `kernel` lives. */
tsr_status_t tsr_compiled_kernel_run_with(const tsr_compiled_kernel_t *kernel,
                                          tsr_array_t *const *operands, size_t num_operands,
                                          const tsr_interp_options_t *options,
                                          FILE *print_stream,
                                          struct tsr_diag_sink *out_diag) TSR_MUST_USE;

/* The lowering library's API table, loading it on first use (thread-safe);
 * TSR_UNIMPLEMENTED says why it cannot be loaded. Tests use it directly. */
struct tsr_lower_api;
tsr_status_t tsr_runtime_lower_api(const struct tsr_lower_api **out_api) TSR_MUST_USE;

/* The process's disk cache (runtime/disk.c), shared by every backend:
 * NULL when TESSERA_CACHE=off, when it cannot be opened (said once on
 * stderr) or after a failed read or write. */
tsr_disk_cache_t *tsr_runtime_disk(void);
/* Its counters, also after a failure (zero, and not enabled, if it was
 * never opened: this does not open it). */
void tsr_runtime_disk_use(tsr_runtime_disk_use_t *out);
/* The counters of `handle` (may be NULL), with `enabled` as given. */
void tsr_runtime_disk_use_of(tsr_disk_cache_t *handle, bool enabled,
                             tsr_runtime_disk_use_t *out);
/* A get or put failed for a reason other than a miss: the handle has warned
 * of its first disk error; the process stops using the disk. Frees status. */
void tsr_runtime_disk_failed(tsr_status_t status);

/* What a context (runtime/context.c) lends the thread that works for it:
 * its disk cache, its in-memory caches and its allocator. While bound to a
 * thread (tsr_runtime_bind), tsr_runtime_disk, tsr_runtime_disk_failed, the
 * program cache and the compiled kernel cache use the context's instead of
 * the process's, and tessera allocates through its allocator. */
typedef struct tsr_runtime_binding {
  tsr_disk_cache_t *handle;  /* NULL: no disk cache */
  _Atomic(bool) off;         /* set after the first disk failure */
  tsr_memcache_t *programs;  /* prepared programs (program_cache.c) */
  tsr_memcache_t *kernels;   /* loaded compiled kernels (compiled.c) */
  _Atomic(uint64_t) compiles, load_failures; /* counted for this binding */
  tsr_allocator_t allocator; /* `allocate` NULL: malloc */
} tsr_runtime_binding_t;
/* Binds `binding` (NULL: the process's caches and malloc) to this thread;
 * returns the binding it replaces, for tsr_runtime_bind to restore. */
tsr_runtime_binding_t *tsr_runtime_bind(tsr_runtime_binding_t *binding);

/* The binding of this thread, NULL for the process's. */
tsr_runtime_binding_t *tsr_runtime_bound(void);

/* New, empty in-memory caches as the process's are configured: of prepared
 * programs (program_cache.c) and of loaded compiled kernels (compiled.c). */
tsr_status_t tsr_runtime_programs_create(tsr_memcache_t **out_cache) TSR_MUST_USE;
tsr_status_t tsr_runtime_kernels_create(tsr_memcache_t **out_cache) TSR_MUST_USE;
/* The counters of a program cache, and of a compiled kernel cache with the
 * binding's counters (NULL binding: the process's). */
void tsr_runtime_programs_stats(tsr_memcache_t *programs, tsr_runtime_cache_stats_t *out);
void tsr_runtime_kernels_stats(const tsr_runtime_binding_t *binding,
                               tsr_runtime_compiled_stats_t *out);

#endif /* TESSERA_RUNTIME_INTERNAL_H */
