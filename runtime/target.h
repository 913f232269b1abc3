/* The host and the compiled-code target, as both the cache key
 * (runtime/key.c) and the loader of compiled code (runtime/compiled.c) see
 * them: where tessera's code and its lowering library are, the host CPU, the
 * LLVM build and the lowering ABI; and the contexts' choice of lowering
 * library (runtime/context.c). Library-internal; runtime/target.c. */
#ifndef TESSERA_RUNTIME_TARGET_H
#define TESSERA_RUNTIME_TARGET_H

#include <stdbool.h>
#include <stddef.h>

#include "tessera/base.h"

struct tsr_lower_api;

/* Chooses the lowering library at `path` (NULL or "": the default) for the
 * process, if nothing was chosen yet: a context's choice
 * (runtime/context.c). TSR_INVALID_ARGUMENT when another library was chosen
 * before (the library is loaded once per process). */
tsr_status_t tsr_target_choose_lower_library(const char *path) TSR_MUST_USE;

/* Where the lowering library is: the one chosen by the first context, else
 * $TESSERA_LOWER_LIBRARY; else the build tree's library when the file
 * holding this code lives in the build tree; else the installed one.
 * Computed once per process. Only in builds with the compiled backend
 * (TSR_HAVE_LOWER). */
const char *tsr_target_lower_library_path(void);

/* The "llvm" component of compiled kernels' keys: LLVM's version, the
 * identity (device, inode, size, mtime) of libLLVM, libMLIR and the lowering
 * library, and the pass pipeline; computed once per process without loading
 * any of them. NULL when this build has no compiled backend. */
const char *tsr_target_llvm_component(void);
/* The host CPU as LLVM's host detection sees it (on x86, the vendor and
 * the cpuid leaves and XCR0 bits it reads): the "cpu" key component of code
 * compiled for every feature of the host. */
const char *tsr_target_cpu_component(void);

/* What the cpu backend generates code for (runtime/target.c says why). */
typedef struct tsr_target_code {
  const char *cpu;       /* the LLVM CPU, its features only ("x86-64-v3"); NULL:
                            the host, every feature LLVM detects */
  const char *component; /* the "cpu" component of compiled kernels' keys */
} tsr_target_code_t;

/* The code target, from $TESSERA_CPU_TARGET (read at each call): unset or
 * "auto" (x86-64-v3 where the CPU has it, else x86-64; elsewhere the host),
 * "native", or a level the CPU can run ("x86-64", "x86-64-v2",
 * "x86-64-v3"). TSR_INVALID_ARGUMENT for another value. Static strings. */
tsr_status_t tsr_target_code(tsr_target_code_t *out) TSR_MUST_USE;

/* Whether the lowering library at `path` speaks this tessera's lowering ABI
 * (ABI version and IR layout); if not, writes why into `why`. Only in builds
 * with the compiled backend. */
bool tsr_target_lower_abi_matches(const struct tsr_lower_api *api, const char *path, char *why,
                                  size_t why_size);

#endif /* TESSERA_RUNTIME_TARGET_H */
