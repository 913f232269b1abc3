/* tessera kernel IR: parse, print, verify and build kernels.
 * The language is specified in docs/ir.md. A module and all its kernels,
 * values and ops belong to one thread at a time (not thread-safe); everything
 * reachable from a module is owned by it and freed by tsr_ir_module_destroy. */
#ifndef TESSERA_IR_H
#define TESSERA_IR_H

#include "tessera/base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tsr_module tsr_ir_module_t;
typedef struct tsr_kernel tsr_ir_kernel_t;
typedef struct tsr_value tsr_ir_value_t;
typedef struct tsr_op tsr_ir_op_t;
typedef struct tsr_region tsr_ir_region_t;

/* ---- Types -------------------------------------------------------------- */

typedef enum tsr_ir_type_kind {
  TSR_TYPE_SCALAR, /* one element of dtype */
  TSR_TYPE_VECTOR, /* a block value: dtype[dims], rank >= 1 */
  TSR_TYPE_REF,    /* a memory ref: space dtype[dims], rank >= 0 */
  TSR_TYPE_SEM,    /* a semaphore or an array of them: dims, rank >= 0 */
} tsr_ir_type_kind_t;

typedef enum tsr_ir_space {
  TSR_SPACE_ANY,  /* HBM with no windowing: DMA only */
  TSR_SPACE_HBM,  /* HBM: DMA only */
  TSR_SPACE_VMEM, /* vector memory: blocks and scratch */
  TSR_SPACE_SMEM, /* scalar memory: prefetch and scalar scratch */
  TSR_SPACE_COUNT
} tsr_ir_space_t;

typedef enum tsr_ir_sem_kind { TSR_SEM_REGULAR, TSR_SEM_DMA } tsr_ir_sem_kind_t;

/* A type, by value. For TSR_TYPE_SEM, `dtype` holds a tsr_ir_sem_kind_t. */
typedef struct tsr_ir_type {
  uint8_t kind;  /* tsr_ir_type_kind_t */
  uint8_t dtype; /* tsr_dtype_t, or tsr_ir_sem_kind_t for semaphores */
  uint8_t space; /* tsr_ir_space_t, refs only */
  uint8_t rank;
  int64_t dims[TSR_MAX_RANK];
} tsr_ir_type_t;

/* ---- Views: one index per dimension of a ref --------------------------- */

typedef enum tsr_ir_index_kind {
  TSR_INDEX_FULL,  /* ":"            the whole dimension */
  TSR_INDEX_POINT, /* "5" or "%i"    one element; the dimension is dropped */
  TSR_INDEX_SLICE, /* "a:b" "a:b:s"  static range with stride */
  TSR_INDEX_DS,    /* "ds(%s, n)" "ds(%s, n, st)"  dynamic start, static size */
  TSR_INDEX_DSIZE, /* "ds(%s, %n)" "ds(4, %n, st)" dynamic size (DMA views only) */
} tsr_ir_index_kind_t;

typedef struct tsr_ir_index {
  uint8_t kind;    /* tsr_ir_index_kind_t */
  int32_t operand; /* op operand holding the dynamic start (POINT/DS), or -1 */
  int64_t start;   /* static start, when operand < 0 */
  int64_t stop;    /* SLICE: exclusive end as written; DSIZE: the op operand
                      holding the size (an i32 the run reads) */
  int64_t size;    /* DS: element count; SLICE: derived count; DSIZE: the
                      most elements the dimension holds from 0 by stride */
  int64_t stride;  /* SLICE/DS/DSIZE: >= 1 */
} tsr_ir_index_t;

/* The value of `const`: floats of any float dtype as double (rounded to the
 * dtype), integers and i1 as int64. */
typedef union tsr_ir_literal {
  double f;
  int64_t i;
} tsr_ir_literal_t;

/* Per-op instance flags. */
enum {
  TSR_OPF_MASK = 1u << 0,          /* load/store: the last operand is a mask */
  TSR_OPF_TRANSPOSE_RHS = 1u << 1, /* dot: rhs is [N, K] */
  TSR_OPF_HAS_ELSE = 1u << 2,      /* if: an else region was written */
  TSR_OPF_DMA_ADD = 1u << 3,       /* dma_start: accumulate into dst */
  TSR_OPF_DEVICE = 1u << 4,        /* dma/sem: a device operand is present */
  TSR_OPF_CORE = 1u << 5,          /* sem_signal: a core operand is present */
  TSR_OPF_SEND = 1u << 6,          /* dma_start: a send semaphore is present */
};

/* ---- Kernel declarations ------------------------------------------------ */

typedef enum tsr_ir_role {
  TSR_ROLE_PREFETCH, /* scalar prefetch: SMEM, readable by index maps */
  TSR_ROLE_IN,
  TSR_ROLE_OUT,
  TSR_ROLE_SCRATCH,
} tsr_ir_role_t;

typedef enum tsr_ir_dim_semantics {
  TSR_DIM_ARBITRARY,
  TSR_DIM_PARALLEL,
  TSR_DIM_CORE_PARALLEL,
} tsr_ir_dim_semantics_t;

/* "arbitrary", "parallel", "core_parallel" (as kernels, Pallas and Mosaic
 * spell them); NULL for a value out of range. */
TSR_API const char *tsr_ir_dim_semantics_name(tsr_ir_dim_semantics_t semantics);
/* The semantics of a name of tsr_ir_dim_semantics_name; false if unknown. */
TSR_API bool tsr_ir_dim_semantics_from_name(const char *name, size_t len,
                                            tsr_ir_dim_semantics_t *out_semantics);
/* Rewrites the semantics of a grid of `rank` dims into the order the
 * verifier accepts: a parallel or core_parallel dim after an arbitrary one
 * becomes arbitrary. Pallas takes any order, and running a parallel dim in
 * order is always correct, so a translator from Pallas calls this rather
 * than knowing the verifier's rule. */
TSR_API void tsr_ir_dim_semantics_order(uint32_t rank, tsr_ir_dim_semantics_t *semantics);

#define TSR_SQUEEZED ((int64_t)-1) /* a squeezed block dimension */
/* A grid dim whose extent is a run-time value (tsr_ir_kernel_set_grid_bound). */
#define TSR_GRID_DYNAMIC ((int64_t)-1)

/* What a caller needs to know about one kernel operand (prefetch/in/out/
 * scratch) to bind data to it. Strings are borrowed from the module. */
typedef struct tsr_ir_operand_info {
  const char *name; /* without '%' */
  tsr_ir_role_t role;
  tsr_dtype_t dtype;
  uint32_t rank;    /* of the whole array */
  int64_t dims[TSR_MAX_RANK];
  tsr_ir_space_t space; /* where the kernel sees it */
  int32_t alias;    /* outputs: operand index of the aliased input, else -1 */
} tsr_ir_operand_info_t;

/* ---- Modules ------------------------------------------------------------ */

/* Parses .tsr text; `filename` names it in diagnostics. Does not verify.
 * TSR_PARSE_ERROR carries every diagnostic (file:line:col: error: ...). */
TSR_API tsr_status_t tsr_ir_module_parse(tsr_string_view_t filename,
                                 tsr_string_view_t text,
                                 tsr_ir_module_t **out_module) TSR_MUST_USE;
/* Reads and parses a file (TSR_IO_ERROR if it cannot be read). */
TSR_API tsr_status_t tsr_ir_module_parse_file(const char *path,
                                      tsr_ir_module_t **out_module) TSR_MUST_USE;
/* An empty module for the builder; `filename` appears in diagnostics. */
TSR_API tsr_status_t tsr_ir_module_create(const char *filename,
                                  tsr_ir_module_t **out_module) TSR_MUST_USE;
TSR_API void tsr_ir_module_destroy(tsr_ir_module_t *module);
/* TSR_VERIFY_ERROR with every diagnostic found. */
TSR_API tsr_status_t tsr_ir_module_verify(const tsr_ir_module_t *module) TSR_MUST_USE;
/* Canonical text (caller frees with tsr_ir_string_free). NULL on OOM. */
TSR_API char *tsr_ir_module_print(const tsr_ir_module_t *module);
/* The kernel's canonical bytes, the content its cache key is computed from
 * (docs/cache.md): they ignore value and kernel names, comments, whitespace
 * and the file, and change with any op, attribute, shape, dtype, block spec
 * or grid. Free *out_bytes with tsr_ir_string_free. */
TSR_API tsr_status_t tsr_ir_kernel_canonical_bytes(const tsr_ir_kernel_t *kernel,
                                                   void **out_bytes,
                                                   size_t *out_size) TSR_MUST_USE;
TSR_API char *tsr_ir_kernel_print(const tsr_ir_kernel_t *kernel);
TSR_API void tsr_ir_string_free(void *text);

TSR_API size_t tsr_ir_module_kernel_count(const tsr_ir_module_t *module);
TSR_API tsr_ir_kernel_t *tsr_ir_module_kernel(const tsr_ir_module_t *module, size_t i);
/* NULL if there is no kernel of that name (without '@'). */
TSR_API tsr_ir_kernel_t *tsr_ir_module_find_kernel(const tsr_ir_module_t *module,
                                           tsr_string_view_t name);

TSR_API const char *tsr_ir_kernel_name(const tsr_ir_kernel_t *kernel);
TSR_API size_t tsr_ir_kernel_operand_count(const tsr_ir_kernel_t *kernel);
TSR_API void tsr_ir_kernel_operand_info(const tsr_ir_kernel_t *kernel, size_t i,
                                tsr_ir_operand_info_t *out_info);

/* ---- The op table ------------------------------------------------------- */

TSR_API size_t tsr_ir_op_count(void);
TSR_API const char *tsr_ir_op_mnemonic(size_t opcode);
TSR_API const char *tsr_ir_op_synopsis(size_t opcode);
/* Space-separated names of the op's flags ("pure map forward float ..."):
 * "pure" (derived from its effects), then the FLAGS column's bits. */
TSR_API const char *tsr_ir_op_flag_names(size_t opcode, char *buf, size_t buf_size);
/* Space-separated names of the op's effects, what it does through each
 * operand role ("value ref-read index ..."; docs/ir.md, "Effects"). */
TSR_API const char *tsr_ir_op_effect_names(size_t opcode, char *buf, size_t buf_size);

/* One row of the op table (ir/ops.def), as `tessera ops --json` prints it.
 * The strings are static. */
typedef struct tsr_ir_op_info {
  const char *mnemonic;
  const char *syntax;   /* the SYNTAX column as ops.def writes it: "UNARY" */
  const char *rule;     /* the verifier's type rule (RULE column): "ELEMWISE" */
  const char *family;   /* how back ends implement it (FAMILY column): "UNARY" */
  int32_t min_operands;
  int32_t max_operands; /* -1: variadic */
  int32_t num_results;  /* -1: as many as the op declares */
  int32_t num_regions;
  const char *synopsis;
  const char *tpu_refusal; /* NULL: the Mosaic TPU emitter (tsr_tpu_emit) has
                              the op; else why it never emits it, the reason
                              of its located error (ir/ops_tpu.def) */
} tsr_ir_op_info_t;
/* Fills *out_info for `opcode`; false (and *out_info untouched) if
 * opcode >= tsr_ir_op_count(). */
TSR_API bool tsr_ir_op_info(size_t opcode, tsr_ir_op_info_t *out_info);

/* ---- Builder --------------------------------------------------------------
 * Builds the same modules the parser does: the parser itself is written on
 * these calls. Ops are appended at the end of `region` (the kernel body, an
 * index map, or a region of a control-flow op). */

TSR_API tsr_status_t tsr_ir_kernel_create(tsr_ir_module_t *module, const char *name,
                                  tsr_ir_kernel_t **out_kernel) TSR_MUST_USE;
/* Grid of `rank` dims; `semantics` may be NULL (all arbitrary). */
TSR_API tsr_status_t tsr_ir_kernel_set_grid(tsr_ir_kernel_t *kernel, uint32_t rank,
                                    const int64_t *dims,
                                    const tsr_ir_dim_semantics_t *semantics)
    TSR_MUST_USE;
/* Makes grid dim `dim` dynamic: its extent is the value, when a run starts,
 * of the kernel's decl number `decl` (a rank-0 i32 prefetch operand, added
 * before this call). Pallas's dynamic grid bounds (docs/ir.md, "Kernels"). */
TSR_API tsr_status_t tsr_ir_kernel_set_grid_bound(tsr_ir_kernel_t *kernel, uint32_t dim,
                                                  uint32_t decl) TSR_MUST_USE;

/* One kernel operand. For in/out/prefetch, `array` is the whole array (a
 * VECTOR type, or SCALAR for a rank-0 prefetch) and `space` where the kernel
 * sees it; `block` (rank = array rank, TSR_SQUEEZED allowed) may be NULL for
 * "no block" (whole array, or no windowing in hbm/any). For scratch, `array`
 * is the REF or SEM type and the other fields are ignored. */
typedef struct tsr_ir_operand_params {
  tsr_ir_role_t role;
  const char *name; /* without '%' */
  tsr_ir_type_t array;
  tsr_ir_space_t space;
  const int64_t *block;
  int32_t alias; /* outputs: operand index of the aliased input, or -1 */
} tsr_ir_operand_params_t;

/* How an output's blocks may be revisited (Pallas pl.RevisitMode, given on
 * an output's BlockSpec as pipeline_mode=pl.Buffered(1, revisit=...)). */
typedef enum tsr_ir_revisit {
  /* The default: the steps that write one output block are consecutive; a
   * block entered again after the grid left it is an error (kind revisit). */
  TSR_REVISIT_IMMEDIATE = 0,
  /* A block may be entered again at any later step: its contents are
   * copied in from the output array whenever a step enters it
   * (docs/semantics.md, "Blocks and the pipeline"). */
  TSR_REVISIT_ANY = 1,
} tsr_ir_revisit_t;

/* Sets the revisit mode of operand number `operand` (an out operand seen in
 * vmem or smem, added before this call); "immediate" and "any" are the
 * names tsr_ir_revisit_name gives and the text format writes. */
TSR_API tsr_status_t tsr_ir_kernel_set_revisit(tsr_ir_kernel_t *kernel, uint32_t operand,
                                               tsr_ir_revisit_t mode) TSR_MUST_USE;
/* "immediate", "any"; NULL for a value out of range. */
TSR_API const char *tsr_ir_revisit_name(tsr_ir_revisit_t mode);

/* Makes dim `dim` of the block of operand number `operand` (an in or out
 * with a block, added before this call) an element dim (Pallas
 * pl.Element(size, (pad_low, pad_high))): its index map result is the
 * element offset of the block in the array padded by pad_low elements
 * before and pad_high after it (docs/ir.md, "Kernels"). */
TSR_API tsr_status_t tsr_ir_kernel_set_element_dim(tsr_ir_kernel_t *kernel, uint32_t operand,
                                                   uint32_t dim, int64_t pad_low,
                                                   int64_t pad_high) TSR_MUST_USE;

/* Adds the operand (operands must come in the order prefetch, in, out,
 * scratch). With a block, out_index_map receives the index-map region: its
 * arguments are the grid indices (i32); build ops in it ending with `yield`
 * of one i32 block index per array dimension. out_ref receives the value the
 * body uses. Either out pointer may be NULL. */
TSR_API tsr_status_t tsr_ir_kernel_add_operand(tsr_ir_kernel_t *kernel,
                                       const tsr_ir_operand_params_t *params,
                                       tsr_ir_value_t **out_ref,
                                       tsr_ir_region_t **out_index_map)
    TSR_MUST_USE;
TSR_API tsr_ir_region_t *tsr_ir_kernel_body(tsr_ir_kernel_t *kernel);

/* Everything an op can carry; unused fields stay zero. See docs/ir.md for
 * which op uses which attribute. Region arguments of control-flow ops (for:
 * iv then carried values; while: carried values in both regions; scoped: the
 * new refs, whose types are given in region_arg_types) are created from
 * `region_arg_types` / `region_arg_names` for region 0 (and region 1 for
 * while); `if` regions have no arguments. */
typedef struct tsr_ir_op_params {
  const char *mnemonic;
  tsr_loc_t loc; /* {0} for none */
  tsr_ir_value_t *const *operands;
  uint32_t num_operands;
  const tsr_ir_type_t *result_types;
  const char *const *result_names; /* NULL or one name (or NULL) per result */
  uint32_t num_results;
  const tsr_ir_index_t *indices;
  uint32_t num_indices;
  const int64_t *ints;
  uint32_t num_ints;
  tsr_ir_literal_t literal;
  const char *text;
  uint32_t flags; /* TSR_OPF_* */
  const tsr_ir_type_t *region_arg_types;
  const char *const *region_arg_names;
  uint32_t num_region_args;
} tsr_ir_op_params_t;

/* Appends an op to `region`; TSR_INVALID_ARGUMENT for an unknown mnemonic or
 * a wrong operand/result/region count (types are checked by the verifier). */
TSR_API tsr_status_t tsr_ir_build_op(tsr_ir_kernel_t *kernel, tsr_ir_region_t *region,
                             const tsr_ir_op_params_t *params,
                             tsr_ir_op_t **out_op) TSR_MUST_USE;
TSR_API tsr_ir_value_t *tsr_ir_op_result(const tsr_ir_op_t *op, uint32_t i);
TSR_API tsr_ir_region_t *tsr_ir_op_region(const tsr_ir_op_t *op, uint32_t i);
TSR_API tsr_ir_value_t *tsr_ir_region_arg(const tsr_ir_region_t *region, uint32_t i);

/* Type constructors. */
TSR_API tsr_ir_type_t tsr_ir_type_scalar(tsr_dtype_t dtype);
TSR_API tsr_ir_type_t tsr_ir_type_vector(tsr_dtype_t dtype, uint32_t rank,
                                 const int64_t *dims);
TSR_API tsr_ir_type_t tsr_ir_type_ref(tsr_ir_space_t space, tsr_dtype_t dtype,
                              uint32_t rank, const int64_t *dims);
TSR_API tsr_ir_type_t tsr_ir_type_sem(tsr_ir_sem_kind_t kind, uint32_t rank,
                              const int64_t *dims);

#ifdef __cplusplus
}
#endif
#endif /* TESSERA_IR_H */
