/* The boundary between libtessera and the lowering library (docs/lowering.md).
 *
 * lower/ is the only place that includes mlir-c/ or llvm-c/. It is built as a
 * separate shared library, libtessera-lower.so, which the runtime opens with
 * dlopen only when a compiled backend is asked for, so that the interpreter
 * path never loads LLVM (loading libMLIR + libLLVM costs about 18 ms and 80 MB
 * per process). The library exports one symbol, tsr_lower_get_api, returning
 * the table below.
 *
 * Both sides are built from this tree: kernels cross the boundary as the IR
 * structs of ir/ir.h, statuses as tsr_status_t (malloc'd, freed by either
 * side with tsr_status_free). Library-internal: not installed. */
#ifndef TESSERA_LOWER_LOWER_API_H
#define TESSERA_LOWER_LOWER_API_H

#include "ir/ir.h"

#define TSR_LOWER_ABI_VERSION 1
#define TSR_LOWER_ENTRY_SYMBOL "tsr_lower_get_api"

/* The name of the compiled kernel's function in the MLIR module, and the
 * symbol the shared object exports for it: the ExecutionEngine's packed
 * wrapper of the C interface, `void fn(void **args)`, where args[i] points to
 * the i-th argument, itself a pointer to a memref descriptor (below). */
#define TSR_LOWER_KERNEL_FUNC "tsr_kernel"
#define TSR_LOWER_KERNEL_SYMBOL "_mlir__mlir_ciface_tsr_kernel"

/* Arguments of the compiled kernel, in order: one per non-scratch operand of
 * the kernel (prefetch, in, out, in declaration order), each the whole array
 * as a strided memref descriptor of its rank:
 *   { T *allocated; T *aligned; int64_t offset; int64_t sizes[rank];
 *     int64_t strides[rank]; }
 * (rank 0: the first three fields only). Scratch buffers are allocated by the
 * compiled code. */

typedef struct tsr_lower_api {
  uint32_t abi_version;     /* TSR_LOWER_ABI_VERSION */
  const char *llvm_version; /* e.g. "22.1.8" (LLVM_VERSION_STRING) */
  const char *pipeline;     /* the pass pipeline, as text: part of cache keys */

  /* The kernel as MLIR text at `stage`: "mlir" (the upstream dialects tessera
   * emits: func, scf, arith, math, vector, memref) or "llvm" (after the
   * pipeline, in the LLVM dialect). *out_text is freed with free_text.
   * TSR_UNIMPLEMENTED names the first op that cannot be lowered and its IR
   * location; MLIR diagnostics become TSR_INTERNAL statuses with their text. */
  tsr_status_t (*emit)(const tsr_kernel_t *kernel, const char *stage,
                       char **out_text);

  /* Compiles the kernel to a position-independent shared object (the bytes
   * of a .so file) exporting TSR_LOWER_KERNEL_SYMBOL. opt_level 0..3.
   * *out_bytes is freed with free_text. */
  tsr_status_t (*compile)(const tsr_kernel_t *kernel, int opt_level,
                          void **out_bytes, size_t *out_size);

  void (*free_text)(void *p);
} tsr_lower_api_t;

typedef const tsr_lower_api_t *(*tsr_lower_get_api_fn)(void);

#endif /* TESSERA_LOWER_LOWER_API_H */
