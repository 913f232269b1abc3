/* The boundary between libtessera and the lowering library (docs/lowering.md).
 *
 * lower/ is the only place that includes mlir-c/ or llvm-c/. It is built as a
 * separate shared library, libtessera-lower.so, which the runtime opens with
 * dlopen only when a compiled backend is asked for, so that the interpreter
 * path never loads LLVM (loading the library, MLIR and LLVM linked in,
 * costs 5-6 ms; a cold compile's process peaks at ~76 MB; docs/lowering.md).
 * The library exports one symbol, tsr_lower_get_api, returning the table
 * below.
 *
 * Both sides are built from this tree: kernels cross the boundary as the IR
 * structs of ir/ir.h, statuses as tsr_status_t (malloc'd, freed by either
 * side with tsr_status_free). Library-internal: not installed. */
#ifndef TESSERA_LOWER_LOWER_API_H
#define TESSERA_LOWER_LOWER_API_H

#include "ir/ir.h"

#define TSR_LOWER_ABI_VERSION 9
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
 * symbol the shared object exports for it: the packed wrapper of the C
 * interface that lower/compile.c adds, `void fn(void **args)`, where args[i]
 * points to the i-th argument (for a memref, itself a pointer to its
 * descriptor; below). */
#define TSR_LOWER_KERNEL_FUNC "tsr_kernel"
#define TSR_LOWER_KERNEL_SYMBOL "_mlir__mlir_ciface_tsr_kernel"

/* Arguments of the compiled kernel, in order:
 *  - one per non-scratch operand of the kernel (prefetch, in, out, in
 *    declaration order), the whole array with a leading dimension of the
 *    run's device count (one slice per device, as the interpreter's
 *    --devices takes them; 1 for one device), as a strided memref
 *    descriptor of rank + 1:
 *      { T *allocated; T *aligned; int64_t offset; int64_t sizes[rank + 1];
 *        int64_t strides[rank + 1]; }
 *  - six scalars, one core's part of the run (docs/lowering.md, "Cores"):
 *      i64 rt_fn, rt_ctx   the runtime's callback (tsr_lower_rt_fn) and its
 *                          first argument, called for what needs more than
 *                          one core's memory: semaphores, barriers, remote
 *                          DMAs, print and assert;
 *      i32 device, core    this core's device and index in its device;
 *      index plo, phi      the split points [plo, phi) this core runs
 *                          (tsr_ir_core_split: the first `core_parallel`
 *                          grid dim, else the leading `parallel` dims,
 *                          flattened; contiguous chunks of ceil(P / cores);
 *                          P = 1 without such dims).
 * Scratch buffers are allocated by the compiled code, one set per call;
 * semaphores belong to the runtime, which numbers them by
 * tsr_ir_semaphore_slots. */

/* The runtime's callback: `call` is a tsr_lower_rt_call_t, a..d as listed
 * there ("slot|site" is slot + (site << 32); sites are tsr_ir_walk_ops
 * positions). The context starts with the int64_t words below. */
enum {
  TSR_RT_CTX_POINT,       /* set by the compiled code at every grid step: the
                             row-major number of its grid point */
  TSR_RT_CTX_BUDGET,      /* steps this core may take before calling
                             TSR_RT_STEP (the compiled code decrements it) */
  TSR_RT_CTX_UNINIT_ZERO, /* read at the start: 1 if new memory holds zero
                             (--uninit zero), 0 for NaN / integer max / true */
  TSR_RT_CTX_ORDER,       /* read at the start: the address of the run's
                             order of the leading `parallel` grid dims (i64s,
                             tsr_interp_parallel_order: for each such dim in
                             turn, the point step i along it runs); the
                             identity unless the run shuffles them */
  TSR_RT_CTX_WORDS
};
typedef int64_t (*tsr_lower_rt_fn)(void *ctx, int64_t call, int64_t a, int64_t b, int64_t c,
                                   int64_t d);
typedef enum tsr_lower_rt_call {
  TSR_RT_SIGNAL = 1, /* a = slot|site, b = amount, c = device, d = core (-1: this one) */
  TSR_RT_WAIT,       /* a = slot|site, b = amount: blocks until the value is >= amount,
                        then subtracts it */
  TSR_RT_READ,       /* a = slot: returns the value */
  TSR_RT_BARRIER,    /* a = slot|site: core_barrier */
  TSR_RT_PRINT,      /* a = site, b = address of one i64 per operand: the address of
                        its elements (dense, storage format) */
  TSR_RT_ASSERT,     /* a = site: the assertion failed */
  TSR_RT_REGISTER,   /* a = root, b = address: where this core's memory `root`
                        starts (remote DMAs address it) */
  TSR_RT_START,      /* every core has registered its memory (kernels with remote DMAs) */
  TSR_RT_END,        /* before this core frees its memory (kernels with remote DMAs) */
  TSR_RT_REMOTE_DMA, /* a = site, b = address of a tsr_lower_remote_dma_t laid out as i64s */
  TSR_RT_STEP,       /* a = site (the loop op's; the number of sites for a grid
                        step, then b = the number of the grid point it starts):
                        the core's budget ran out at a step. Returns the
                        budget left after this step (>= 0: go on), or -1: a
                        run bound is reached or the run is abandoned, and the
                        code leaves every loop */
  TSR_RT_SORT,       /* a = site, b = address of a sort laid out as i64s (below):
                        the sort and argsort ops (base/sort.h) */
  TSR_RT_OUT_OF_BOUNDS, /* a = site (a load, store or dma_start), b = the start
                        of op index c (its position in op->indices) that puts
                        the view outside its ref: the compiled code then
                        accesses the nearest view inside instead. A DMA view
                        of dynamic size passes c + 2^32 and d = its size
                        (a negative one is reported as such) */
  TSR_RT_BLOCK_RANGE, /* a = site (the index map's yield), b = the decl,
                        c = address of its block indices as i64s: the block
                        index is out of range (the compiled code then uses
                        the nearest block). d = 1: an input block under
                        TSR_LOWER_OOB_READS_UNINIT, a warning (the block then
                        holds the uninitialized value) */
  TSR_RT_VISIT,      /* a = an output's operand index (among the non-scratch
                        decls), b = the row-major number of the block (over
                        the array's blocks) this core's step c starts: the
                        runtime reports a block revisited after it was left
                        (or written by two cores), as the interpreter does */
  TSR_RT_OUTSIDE,    /* a = site (a load, store or dma_start), b = the position
                        of the view's first index in op->indices, c = 1 for a
                        write: the view reaches outside its ref's logical shape
                        where the run's bounds (TSR_LOWER_OOB_READS_UNINIT,
                        TSR_LOWER_PADDED) allow it: the interpreter's warning.
                        The elements outside read as the uninitialized value or
                        are not written */
  TSR_RT_WIDE_ENTER, /* a = arg|site (the scoped op's site; arg: the
                        device-wide buffer's position among its region's
                        arguments), b = its
                        tsr_dtype_t, c = its elements: this core enters the
                        buffer's scope. Returns the address of the instance
                        its device's cores share (the first to enter
                        allocates it, uninitialized; 64-byte aligned), or 0
                        when the run is abandoned (out of memory: reported) */
  TSR_RT_WIDE_EXIT,  /* a = arg|site: this core leaves the scope; the last
                        core of the device to leave it frees the instance */
} tsr_lower_rt_call_t;

/* A sort or argsort op, as i64s: dense blocks of the result's dims. */
enum {
  TSR_RSORT_ARGSORT, /* 1: argsort (dst is i32 positions), 0: sort (one key) */
  TSR_RSORT_RANK,
  TSR_RSORT_AXIS,
  TSR_RSORT_KEYS,    /* how many keys */
  TSR_RSORT_DST,     /* address of the result's first element */
  TSR_RSORT_DIMS     /* RANK dims, then per key its tsr_dtype_t and address */
};

/* A DMA into another core's memory (`dma_start .. device %d`), as i64s:
 * the copy (or add) and both semaphore signals are done by the runtime. */
enum {
  TSR_RDMA_DEVICE,   /* destination device (same core index) */
  TSR_RDMA_ROOT,     /* destination memory, as registered */
  TSR_RDMA_OFFSET,   /* destination view's offset from it, in elements */
  TSR_RDMA_SRC,      /* address of the source view's first element */
  TSR_RDMA_RANK,
  TSR_RDMA_DTYPE,    /* tsr_dtype_t */
  TSR_RDMA_ADD,      /* 1: dst += src */
  TSR_RDMA_SEM,      /* destination core's DMA semaphore slot */
  TSR_RDMA_SEND,     /* this core's send semaphore slot, or -1 */
  TSR_RDMA_DIMS,     /* rank dims, then rank source strides, then rank
                        destination strides (elements) */
};

/* Flags of emit and compile: code that differs from the default's, so part
 * of the compiled kernel's cache key; 0 is the default code. */
enum {
  /* How far the compiled code lets accesses reach outside their refs: the
   * run options oob_reads_uninit and padded (docs/semantics.md,
   * "Out-of-bounds accesses"), which change the code that checks
   * (docs/lowering.md, "Checks"). */
  TSR_LOWER_OOB_READS_UNINIT = 1u << 0, /* a read reaching outside its ref gives
                                           the uninitialized value there: a warning */
  TSR_LOWER_PADDED = 1u << 1,           /* refs outside SMEM have the TPU's tiled
                                           shape (tsr_padded_dims) */
  TSR_LOWER_DOUBLE_ROWS = 1u << 2,      /* with PADDED: the chip tiles twice the
                                           rows (tsr_chip_doubles_tile_rows) */
  /* out_blocks_copied_in (tessera/interp.h): a step entering an output
   * block that is read before it is wholly stored copies the block in from
   * the array, and the padding of blocks holds JAX's uninitialized value */
  TSR_LOWER_OUT_COPY_IN = 1u << 3,
};

typedef struct tsr_lower_api {
  uint32_t abi_version;     /* TSR_LOWER_ABI_VERSION */
  const char *llvm_version; /* e.g. "22.1.8" (LLVM_VERSION_STRING) */
  const char *pipeline;     /* the pass pipeline, as text: part of cache keys */

  /* The kernel as MLIR text at `stage`: "mlir" (the upstream dialects tessera
   * emits: func, scf, arith, math, vector, memref) or "llvm" (after the
   * pipeline, in the LLVM dialect). *out_text is freed with free_text.
   * TSR_UNIMPLEMENTED names the first op that cannot be lowered and its IR
   * location; MLIR diagnostics become TSR_INTERNAL statuses with their text. */
  tsr_status_t (*emit)(const tsr_kernel_t *kernel, const char *stage, uint32_t flags,
                       char **out_text);

  /* Compiles the kernel to a position-independent shared object (the bytes
   * of a .so file) exporting TSR_LOWER_KERNEL_SYMBOL. opt_level 0..3.
   * `cpu`: the LLVM CPU to generate code for, with that CPU's features and
   * no others ("x86-64-v3"; the runtime's choice, runtime/target.h), or NULL
   * for the host as LLVM detects it (every feature it has).
   * `flags`: TSR_LOWER_* below (0: the default code).
   * *out_bytes is freed with free_text. */
  tsr_status_t (*compile)(const tsr_kernel_t *kernel, int opt_level, uint32_t flags,
                          const char *cpu, void **out_bytes, size_t *out_size);

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
                               const char *cpu, void **out_bytes, size_t *out_size);
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
