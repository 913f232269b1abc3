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

/* The pass pipeline from the upstream dialects to the LLVM dialect (in
 * mlirParsePassPipeline's syntax; docs/lowering.md says why each pass is
 * there). A macro, not only the `pipeline` field below, so that the runtime
 * can put it into cache keys without loading the library (and LLVM). */
#define TSR_LOWER_CPU_PIPELINE                                                 \
  "builtin.module("                                                            \
  "func.func(arith-expand{include-bf16=true},lower-vector-multi-reduction,"    \
  "convert-vector-to-scf),"                                                    \
  "lower-affine,convert-scf-to-cf,canonicalize,cse,"                           \
  "func.func(convert-math-to-llvm),convert-math-to-libm,"                      \
  "convert-vector-to-llvm,expand-strided-metadata,lower-affine,"               \
  "finalize-memref-to-llvm,convert-func-to-llvm,convert-arith-to-llvm,"        \
  "convert-index-to-llvm,convert-cf-to-llvm,convert-ub-to-llvm,"               \
  "reconcile-unrealized-casts)"

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

  /* ---- Added with the implementation (compile.c) ---- */

  /* Frees a status made by the library. Statuses are malloc'd and the
   * runtime may free them itself, except the library's static
   * out-of-memory status, which only this function recognises: the runtime
   * copies a status and frees the original here. */
  void (*free_status)(tsr_status_t status);

  /* tsr_lower_ir_layout() as the library was compiled: the IR structs cross
   * the boundary, so both sides must agree on them. */
  uint64_t ir_layout;

  /* Tests only: compile() from MLIR text in the upstream dialects instead of
   * a kernel (the same pipeline, object and link steps). */
  tsr_status_t (*compile_text)(const char *mlir_text, size_t size, int opt_level,
                               void **out_bytes, size_t *out_size);
} tsr_lower_api_t;

/* A fingerprint of the IR structs' layout and of the op and dtype tables'
 * sizes, as seen by the code including this header. */
static inline uint64_t tsr_lower_ir_layout(void) {
  const uint64_t parts[] = {sizeof(tsr_kernel_t), sizeof(tsr_decl_t),
                            sizeof(tsr_op_t),     sizeof(tsr_region_t),
                            sizeof(tsr_value_t),  sizeof(tsr_type_t),
                            sizeof(tsr_index_t),  sizeof(tsr_literal_t),
                            TSR_OP_COUNT,         TSR_DTYPE_COUNT,
                            TSR_MAX_RANK};
  uint64_t h = 1469598103934665603u; /* FNV-1a over the parts */
  for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
    h ^= parts[i];
    h *= 1099511628211u;
  }
  return h;
}

typedef const tsr_lower_api_t *(*tsr_lower_get_api_fn)(void);

#endif /* TESSERA_LOWER_LOWER_API_H */
