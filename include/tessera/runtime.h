/* tessera runtime: what the command line and tests use beside the
 * executable API (tessera/api.h), on its types: loading and verifying
 * kernel files, picking a kernel by name, deterministic input data, the
 * cache key of an executable, and a kernel's text at a stage of the cpu
 * backend's lowering (docs/lowering.md). Running a kernel is
 * tsr_executable_create and tsr_executable_run. */
#ifndef TESSERA_RUNTIME_H
#define TESSERA_RUNTIME_H

#include "tessera/api.h"
#include "tessera/base.h"
#include "tessera/cache.h"
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

/* A kernel's cache key: its material (the kernel's canonical bytes, the
 * backend, the options that change the result, the producer) and the
 * XXH3-128 of it. Immutable once created. */
typedef struct tsr_runtime_key tsr_runtime_key_t;

/* The key under which tsr_executable_create keeps `kernel` made with
 * `options` (NULL: defaults) in its caches: for the interpreter, the fields
 * of options->run that change what a run computes or reports; for the cpu
 * backend, opt_level (the code also depends on LLVM and the host CPU, which
 * the key names, and on nothing in options->run). The kernel need not be
 * verified. TSR_UNIMPLEMENTED for a backend this build cannot produce. */
TSR_API tsr_status_t tsr_runtime_key_create(const tsr_ir_kernel_t *kernel,
                                            const tsr_executable_options_t *options,
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

/* ---- The cpu backend's lowering (docs/lowering.md) ------------------------ */

/* The kernel's text at a stage of the lowering for `backend`
 * (TSR_BACKEND_CPU; the interpreter lowers nothing: TSR_UNIMPLEMENTED):
 * "mlir" (the upstream dialects tessera generates) or "llvm" (after the
 * pass pipeline, in the LLVM dialect). Verifies the kernel first. Loads the
 * lowering library (libtessera-lower.so, opened on first need;
 * $TESSERA_LOWER_LIBRARY names another). *out_text is freed with
 * tsr_runtime_text_free. TSR_UNIMPLEMENTED: this build has no MLIR
 * (-Dmlir=disabled), the lowering library cannot be loaded (the message
 * says where it was looked for and why), or the kernel uses something the
 * cpu backend cannot lower yet (the message names the op and its location);
 * TSR_VERIFY_ERROR for an invalid kernel; TSR_INTERNAL when MLIR or LLVM
 * fails (with their diagnostics). The Mosaic TPU module is tsr_tpu_emit's
 * (tessera/api.h). */
TSR_API tsr_status_t tsr_runtime_lower_text(const tsr_ir_kernel_t *kernel,
                                            tsr_backend_t backend, const char *stage,
                                            char **out_text) TSR_MUST_USE;
TSR_API void tsr_runtime_text_free(char *text);

#ifdef __cplusplus
}
#endif
#endif /* TESSERA_RUNTIME_H */
