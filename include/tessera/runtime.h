/* tessera runtime: the driver above the IR, the interpreter and the cache. It
 * loads and verifies kernels, keys them, prepares them through the process's
 * cache, compiles them for the CPU (docs/lowering.md), and makes input
 * data. */
#ifndef TESSERA_RUNTIME_H
#define TESSERA_RUNTIME_H

#include "tessera/base.h"
#include "tessera/cache.h"
#include "tessera/interp.h"
#include "tessera/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Parses and verifies a .tsr file. Diagnostics (TSR_IO_ERROR,
 * TSR_PARSE_ERROR, TSR_VERIFY_ERROR) carry file:line:col. */
TSR_API tsr_status_t tsr_runtime_load_file(const char *path,
                                   tsr_ir_module_t **out_module) TSR_MUST_USE;

/* Picks the kernel named `name` (without '@'), or the only kernel when name is
 * NULL. TSR_NOT_FOUND lists the kernels there are; TSR_INVALID_ARGUMENT when
 * name is NULL and the module has several. */
TSR_API tsr_status_t tsr_runtime_select_kernel(const tsr_ir_module_t *module,
                                       const char *name,
                                       tsr_ir_kernel_t **out_kernel) TSR_MUST_USE;

/* A deterministic pseudo-random array for operand `info` from `seed`:
 * floats uniform in [-1, 1) (rounded to the dtype), signed integers in
 * [-100, 100], unsigned in [0, 200], i1 fair coin. Scalar-prefetch operands
 * get values in [0, 8) since they usually index blocks. */
TSR_API tsr_status_t tsr_runtime_random_array(const tsr_ir_operand_info_t *info,
                                      uint64_t seed,
                                      tsr_array_t *out_array) TSR_MUST_USE;

/* ---- Keys (docs/cache.md) ------------------------------------------------ */

typedef enum tsr_target {
  TSR_TARGET_INTERP, /* the interpreter: prepared programs */
  TSR_TARGET_CPU,    /* native code for the host CPU, through MLIR/LLVM */
  TSR_TARGET_TPU,    /* Mosaic modules (not in this build yet) */
} tsr_target_t;

TSR_API const char *tsr_runtime_target_name(tsr_target_t target);
TSR_API bool tsr_runtime_target_from_name(const char *name, tsr_target_t *out_target);

/* A kernel's cache key: its material (the kernel's canonical bytes, the
 * target, the options that change the result, the producer) and the XXH3-128
 * of it. Immutable once created. */
typedef struct tsr_runtime_key tsr_runtime_key_t;

/* `options` may be NULL (defaults). The kernel need not be verified.
 * TSR_UNIMPLEMENTED for targets this build cannot produce. For
 * TSR_TARGET_CPU the interpreter options are ignored and the key is the one
 * tsr_runtime_compile uses with default tsr_compile_options_t. */
TSR_API tsr_status_t tsr_runtime_key_create(const tsr_ir_kernel_t *kernel,
                                            tsr_target_t target,
                                            const tsr_interp_options_t *options,
                                            tsr_runtime_key_t **out_key) TSR_MUST_USE;
TSR_API void tsr_runtime_key_destroy(tsr_runtime_key_t *key);
/* The key as the caches take it (borrowed from `key`). */
TSR_API const tsr_cache_key_t *tsr_runtime_key_get(const tsr_runtime_key_t *key);

/* One named component of the key material, for `tessera hash --explain`. */
typedef struct tsr_runtime_key_component {
  const char *name;     /* "kernel", "target", "options", "tessera"; compiled
                           targets: "compile", "llvm", "cpu" for "options" */
  const uint8_t *bytes; /* borrowed from the key */
  size_t size;
  uint64_t hash_lo, hash_hi; /* XXH3-128 of the component alone */
  char description[256];     /* the bytes in words, e.g. "uninit=nan ..." */
} tsr_runtime_key_component_t;

TSR_API size_t tsr_runtime_key_component_count(const tsr_runtime_key_t *key);
TSR_API void tsr_runtime_key_component(const tsr_runtime_key_t *key, size_t i,
                                       tsr_runtime_key_component_t *out_component);

/* ---- Prepared programs through the cache -------------------------------- */

/* Prepares `kernel` for the interpreter through the process's in-memory
 * cache. On a hit, verification and preparation are skipped: the cached
 * program is bound to this kernel's names and locations (diagnostics point
 * into this kernel's file). On a miss the kernel is verified and prepared,
 * once even when several threads ask at the same time. The result is
 * destroyed with tsr_interp_program_destroy. Thread-safe. The interpreter
 * keeps nothing on disk (docs/cache.md says why). */
TSR_API tsr_status_t tsr_runtime_prepare(const tsr_ir_kernel_t *kernel,
                                         const tsr_interp_options_t *options,
                                         tsr_interp_program_t **out_program)
    TSR_MUST_USE;

/* The process's disk cache as this process used it (the cpu backend's
 * compiled objects). */
typedef struct tsr_runtime_disk_use {
  bool enabled; /* false: TESSERA_CACHE=off, the directory is unusable,
                   or nothing used it yet */
  uint64_t hits, misses, puts, bad_entries, errors;
} tsr_runtime_disk_use_t;

typedef struct tsr_runtime_cache_stats {
  /* the in-memory cache of prepared programs */
  uint64_t memory_hits, memory_misses, memory_builds, memory_waits,
      memory_evictions, memory_entries, memory_bytes;
} tsr_runtime_cache_stats_t;

TSR_API void tsr_runtime_cache_stats(tsr_runtime_cache_stats_t *out_stats);
/* Drops the in-memory cache's entries (programs in use live on). */
TSR_API void tsr_runtime_cache_clear(void);

/* ---- Compiled kernels: the cpu backend (docs/lowering.md) ---------------- */

/* Options that change the code compiled for a kernel (part of its key). */
typedef struct tsr_compile_options {
  int opt_level; /* LLVM optimization level, 0 to 3; default 2 */
} tsr_compile_options_t;

TSR_API void tsr_compile_options_initialize(tsr_compile_options_t *options);

/* A kernel compiled to native code for the host CPU and loaded in this
 * process. Immutable; runs may be concurrent. */
typedef struct tsr_compiled_kernel tsr_compiled_kernel_t;

/* Compiles `kernel` for the host CPU through the process's caches: a kernel
 * with the same key (tsr_runtime_key_create with TSR_TARGET_CPU) is found
 * in memory, else its shared object is loaded from the disk cache without
 * running MLIR or loading LLVM, else the lowering library
 * (libtessera-lower.so, opened on first need) compiles it, once even when
 * several threads ask at the same time, and the object goes to the disk
 * cache. The kernel is verified before it is compiled. `options` may be
 * NULL (defaults). The result is destroyed with tsr_compiled_kernel_destroy
 * and does not borrow from `kernel`. Thread-safe.
 *
 * TSR_UNIMPLEMENTED: this build has no MLIR (-Dmlir=disabled), the lowering
 * library cannot be loaded (the message says where it was looked for and
 * why), or the kernel uses something the cpu backend cannot lower yet (the
 * message names the op and its location, "... cannot be lowered ...").
 * TSR_VERIFY_ERROR for an invalid kernel; TSR_INTERNAL when MLIR or LLVM
 * fails (with their diagnostics). $TESSERA_LOWER_LIBRARY names another
 * lowering library. */
TSR_API tsr_status_t tsr_runtime_compile(const tsr_ir_kernel_t *kernel,
                                         const tsr_compile_options_t *options,
                                         tsr_compiled_kernel_t **out_kernel)
    TSR_MUST_USE;
TSR_API void tsr_compiled_kernel_destroy(tsr_compiled_kernel_t *kernel);

/* Runs the compiled kernel. `operands` as for tsr_interp_program_run: one
 * array per non-scratch operand in declaration order with the declared
 * dtype and shape, with a leading dimension of options->devices when that
 * is more than 1 (TSR_INVALID_ARGUMENT otherwise, naming the operand).
 * Outputs are overwritten; an aliased output is first set to a copy of its
 * input, as the interpreter does. `options` may be NULL;
 * of the interpreter's options a compiled run uses `devices` and `cores`
 * (one thread per simulated core; parallel grid dimensions split as the
 * interpreter splits them), `print_stream` and `max_errors`. The compiled
 * code does no checks (bounds, uninitialized reads, races): run a kernel in
 * the interpreter to find its bugs; but assertions, deadlocks and signals
 * to cores that do not exist are TSR_KERNEL_ERROR with the interpreter's
 * messages. Thread-safe. */
TSR_API tsr_status_t tsr_compiled_kernel_run(const tsr_compiled_kernel_t *kernel,
                                             tsr_array_t *const *operands,
                                             size_t num_operands,
                                             const tsr_interp_options_t *options) TSR_MUST_USE;

/* The kernel's text at a stage of the lowering to `target` (TSR_TARGET_CPU):
 * "mlir" (the upstream dialects tessera generates) or "llvm" (after the
 * pass pipeline, in the LLVM dialect). Verifies the kernel first. Loads the
 * lowering library. *out_text is freed with tsr_runtime_text_free. Errors
 * as tsr_runtime_compile. */
TSR_API tsr_status_t tsr_runtime_lower_text(const tsr_ir_kernel_t *kernel,
                                            tsr_target_t target, const char *stage,
                                            char **out_text) TSR_MUST_USE;
TSR_API void tsr_runtime_text_free(char *text);

typedef struct tsr_runtime_compiled_stats {
  /* the in-memory cache of loaded compiled kernels */
  uint64_t memory_hits, memory_misses, memory_entries;
  tsr_runtime_disk_use_t disk; /* shared objects are among its entries */
  uint64_t compiles;      /* kernels the lowering library compiled */
  uint64_t load_failures; /* cached objects that did not load (compiled again) */
  bool lower_library_loaded; /* this process opened libtessera-lower.so
                                (and with it MLIR and LLVM) */
} tsr_runtime_compiled_stats_t;

TSR_API void tsr_runtime_compiled_stats(tsr_runtime_compiled_stats_t *out_stats);

#ifdef __cplusplus
}
#endif
#endif /* TESSERA_RUNTIME_H */
