/* tessera runtime: the driver above the IR, the interpreter and the cache. It
 * loads and verifies kernels, keys them, prepares them through the process's
 * cache, and makes input data. (Compiled backends plug in here later.) */
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
  TSR_TARGET_CPU,    /* native code (not in this build yet) */
  TSR_TARGET_TPU,    /* Mosaic modules (not in this build yet) */
} tsr_target_t;

TSR_API const char *tsr_runtime_target_name(tsr_target_t target);
TSR_API bool tsr_runtime_target_from_name(const char *name, tsr_target_t *out_target);

/* A kernel's cache key: its material (the kernel's canonical bytes, the
 * target, the options that change the result, the producer) and the XXH3-128
 * of it. Immutable once created. */
typedef struct tsr_runtime_key tsr_runtime_key_t;

/* `options` may be NULL (defaults). The kernel need not be verified.
 * TSR_UNIMPLEMENTED for targets this build cannot produce. */
TSR_API tsr_status_t tsr_runtime_key_create(const tsr_ir_kernel_t *kernel,
                                            tsr_target_t target,
                                            const tsr_interp_options_t *options,
                                            tsr_runtime_key_t **out_key) TSR_MUST_USE;
TSR_API void tsr_runtime_key_destroy(tsr_runtime_key_t *key);
/* The key as the caches take it (borrowed from `key`). */
TSR_API const tsr_cache_key_t *tsr_runtime_key_get(const tsr_runtime_key_t *key);

/* One named component of the key material, for `tessera hash --explain`. */
typedef struct tsr_runtime_key_component {
  const char *name;     /* "kernel", "target", "options", "tessera" */
  const uint8_t *bytes; /* borrowed from the key */
  size_t size;
  uint64_t hash_lo, hash_hi; /* XXH3-128 of the component alone */
  char description[256];     /* the bytes in words, e.g. "uninit=nan ..." */
} tsr_runtime_key_component_t;

TSR_API size_t tsr_runtime_key_component_count(const tsr_runtime_key_t *key);
TSR_API void tsr_runtime_key_component(const tsr_runtime_key_t *key, size_t i,
                                       tsr_runtime_key_component_t *out_component);

/* ---- Prepared programs through the cache -------------------------------- */

/* Prepares `kernel` for the interpreter through the process's cache. On a
 * memory hit, verification and preparation are skipped: the cached program is
 * bound to this kernel's names and locations (diagnostics point into this
 * kernel's file). On a miss the kernel is verified (unless the disk cache
 * records that a kernel with this key verified before) and prepared, once
 * even when several threads ask at the same time. The result is destroyed
 * with tsr_interp_program_destroy. Thread-safe.
 *
 * The disk cache (docs/cache.md) is used unless TESSERA_CACHE=off; if it
 * cannot be used (unwritable, disk full) the process goes on without it and
 * says so once on stderr. */
TSR_API tsr_status_t tsr_runtime_prepare(const tsr_ir_kernel_t *kernel,
                                         const tsr_interp_options_t *options,
                                         tsr_interp_program_t **out_program)
    TSR_MUST_USE;

typedef struct tsr_runtime_cache_stats {
  /* the in-memory cache of prepared programs */
  uint64_t memory_hits, memory_misses, memory_builds, memory_waits,
      memory_evictions, memory_entries, memory_bytes;
  /* the disk cache, as this process used it */
  bool disk_enabled;
  uint64_t disk_hits, disk_misses, disk_puts, disk_bad_entries, disk_errors;
  /* kernels whose verification was skipped thanks to a disk entry */
  uint64_t verifications_skipped;
} tsr_runtime_cache_stats_t;

TSR_API void tsr_runtime_cache_stats(tsr_runtime_cache_stats_t *out_stats);
/* Drops the in-memory cache's entries (programs in use live on). */
TSR_API void tsr_runtime_cache_clear(void);

#ifdef __cplusplus
}
#endif
#endif /* TESSERA_RUNTIME_H */
