/* The kernel IR in one header: types, values, ops, regions, kernels and
 * modules, the op table's enums, and the entry points of the parser, printer
 * and verifier. Library-internal (interp/ and lower/ read these structs);
 * the public face is include/tessera/ir.h. Not thread-safe: a module and
 * everything in it belongs to one thread at a time.
 *
 * Ownership: every object below lives in its module's arena and dies with
 * tsr_ir_module_destroy. Pointers between objects are borrowed. */
#ifndef TESSERA_IR_IR_H
#define TESSERA_IR_IR_H

#include "base/base_internal.h"
#include "tessera/ir.h"

/* ---- The op table --------------------------------------------------------- */

/* How an op is written (parser and printer formats; see docs/ir.md). */
typedef enum tsr_syntax {
  TSR_SYN_CONST,    /* %r = const LIT : T */
  TSR_SYN_INT_ATTR, /* %r = op N : T                (program_id, iota) */
  TSR_SYN_LOAD,     /* %r = load %ref[idx..] [mask %m] : T */
  TSR_SYN_STORE,    /* store %ref[idx..], %v [mask %m] */
  TSR_SYN_UNARY,    /* %r = op %a : T */
  TSR_SYN_BINARY,   /* %r = op %a, %b : T */
  TSR_SYN_OPERANDS, /* [%r =] op %a, %b, .. [: T] */
  TSR_SYN_PERM,     /* %r = transpose %a [p0, p1, ..] : T */
  TSR_SYN_SLICE,    /* %r = slice %a [idx..] : T   (static indices only) */
  TSR_SYN_AXIS,     /* %r = op %a, .. axis N : T */
  TSR_SYN_AXES,     /* %r = op %a axes [n, ..] : T */
  TSR_SYN_DOT,      /* %r = dot %a, %b [, %acc] [transpose_rhs] : T */
  TSR_SYN_FOR,
  TSR_SYN_WHILE,
  TSR_SYN_IF,
  TSR_SYN_SCOPED,
  TSR_SYN_YIELD,    /* yield %a, .. / condition %c */
  TSR_SYN_PRINT,    /* print "text", %a, .. */
  TSR_SYN_ASSERT,   /* assert %c, "text" */
  TSR_SYN_DMA,      /* dma_start/dma_wait %src[..] -> %dst[..], %sem[..] .. */
  TSR_SYN_SEM,      /* sem_* %sem[..], %n .. */
  TSR_SYN_VALUE_INT, /* %r = op %a, N : T           (multiple_of) */
} tsr_syntax_t;

/* The verifier's type rule for an op. */
typedef enum tsr_rule {
  TSR_RULE_CONST, TSR_RULE_GRID_QUERY, TSR_RULE_LOAD, TSR_RULE_STORE,
  TSR_RULE_ELEMWISE, TSR_RULE_COMPARE, TSR_RULE_SELECT, TSR_RULE_CONVERT,
  TSR_RULE_BITCAST, TSR_RULE_IOTA, TSR_RULE_BROADCAST, TSR_RULE_RESHAPE,
  TSR_RULE_TRANSPOSE, TSR_RULE_SLICE, TSR_RULE_CONCATENATE, TSR_RULE_ROLL,
  TSR_RULE_GATHER, TSR_RULE_SCATTER, TSR_RULE_REDUCE, TSR_RULE_ARG_REDUCE, TSR_RULE_DOT,
  TSR_RULE_FOR, TSR_RULE_WHILE, TSR_RULE_IF, TSR_RULE_SCOPED, TSR_RULE_YIELD,
  TSR_RULE_CONDITION, TSR_RULE_PRINT, TSR_RULE_ASSERT, TSR_RULE_DMA,
  TSR_RULE_SEMAPHORE, TSR_RULE_ID_QUERY, TSR_RULE_SORT, TSR_RULE_ARGSORT,
  TSR_RULE_MULTIPLE_OF,
  TSR_RULE_RESERVED, /* no type rule: the op is TSR_F_RESERVED */
} tsr_rule_t;

/* How back ends implement an op (the FAMILY column): each back end
 * dispatches on the family, then on the op within it. */
typedef enum tsr_family {
  TSR_FAM_CONST,      /* a constant scalar or splat block */
  TSR_FAM_QUERY,      /* program_id, num_programs, device_id, core_id */
  TSR_FAM_MEMORY,     /* load and store through a ref view */
  TSR_FAM_UNARY,      /* elementwise, one operand */
  TSR_FAM_BINARY,     /* elementwise, two operands of one dtype */
  TSR_FAM_COMPARE,    /* elementwise, i1 result */
  TSR_FAM_SELECT,     /* elementwise cond ? a : b */
  TSR_FAM_CONVERT,    /* elementwise dtype changes: convert, bitcast */
  TSR_FAM_SHAPE,      /* moves elements: iota, broadcast, reshape, ... */
  TSR_FAM_REDUCE,     /* a combine over axes */
  TSR_FAM_ARG_REDUCE, /* the index of an extreme along an axis */
  TSR_FAM_DOT,        /* matmul */
  TSR_FAM_CONTROL,    /* regions and their terminators */
  TSR_FAM_DEBUG,      /* print, assert */
  TSR_FAM_DMA,        /* dma_start, dma_wait */
  TSR_FAM_SEMAPHORE,  /* signal, wait, read, barrier */
  TSR_FAM_HINT,       /* the operand's value, with a property back ends may
                         assume: multiple_of */
  TSR_FAM_COUNT
} tsr_family_t;

/* Op flags (the FLAGS column). */
enum {
  TSR_F_TERMINATOR = 1u << 3,  /* ends a region */
  TSR_F_CONTROL = 1u << 4,     /* holds regions */
  TSR_F_MAP_OK = 1u << 6,      /* allowed inside an index map */
  TSR_F_RESERVED = 1u << 10,   /* parsed and printed, not yet executable */
  TSR_F_FORWARD = 1u << 11,    /* its one block result may be computed
                                  straight into the view of an unmasked
                                  store that follows it (store forwarding,
                                  tsr_op_forward_store) */
  TSR_F_FLT = 1u << 16,        /* elementwise/reduce rules: floats accepted */
  TSR_F_INT = 1u << 17,        /* ... signed and unsigned integers accepted */
  TSR_F_BOOL = 1u << 18,       /* ... i1 accepted */
};

/* Op effects (TSR_E_*, in the FLAGS column, kept apart in
 * tsr_op_info_t.effects): what an op does through each operand role, the
 * roles being those of the typed views (ir/opview.h), and outside memory.
 * An op without effects and without regions or a terminator's job is pure
 * (tsr_op_is_pure). */
enum {
  TSR_E_VALUE = 1u << 20,      /* reads its value operands */
  TSR_E_REF_READ = 1u << 21,   /* reads memory through its source ref (load's
                                  ref, a DMA's source) */
  TSR_E_REF_WRITE = 1u << 22,  /* writes memory through its destination ref
                                  (store's ref, a DMA's destination; a DMA
                                  `add` also reads it) */
  TSR_E_INDEX = 1u << 23,      /* view operands: dynamic index starts, masks */
  TSR_E_SEM_SIGNAL = 1u << 24, /* adds to a semaphore (sem_signal; a DMA's
                                  semaphores when it is sent and lands) */
  TSR_E_SEM_WAIT = 1u << 25,   /* blocks until a semaphore holds an amount,
                                  then takes it: the op may block */
  TSR_E_SEM_READ = 1u << 26,   /* reads a semaphore's value */
  TSR_E_REMOTE = 1u << 27,     /* device/core operands: the effect may land on
                                  another device or core */
  TSR_E_OUTPUT = 1u << 28,     /* observable outside memory: print's text, an
                                  assert ending the kernel */
  TSR_E_ALL = 0x1ffu << 20,
};

typedef enum tsr_opcode {
#define TSR_OP(E, m, syn, rule, fam, mino, maxo, nres, nreg, flags, syn_text) TSR_OP_##E,
#include "ir/ops.def"
#undef TSR_OP
  TSR_OP_COUNT
} tsr_opcode_t;

typedef struct tsr_op_info {
  const char *mnemonic;
  tsr_syntax_t syntax;
  tsr_rule_t rule;
  tsr_family_t family;
  int16_t min_operands;
  int16_t max_operands; /* -1: variadic */
  int16_t num_results;  /* -1: declared by the op */
  int16_t num_regions;
  uint32_t flags;   /* TSR_F_* */
  uint32_t effects; /* TSR_E_* */
  const char *synopsis;
} tsr_op_info_t;

extern const tsr_op_info_t tsr_op_table[TSR_OP_COUNT];
/* The op table's TPU column (ir/ops_tpu.def): how the Mosaic TPU emitter
 * takes each op. Emitted ops have refusal NULL and their MLIR spelling per
 * element class (NULL where the class has no one-op form, and for ops
 * emitted by code of their own); refused ops have refusal, the reason of
 * their located error. */
enum { TSR_TPU_FLOAT, TSR_TPU_SINT, TSR_TPU_UINT, TSR_TPU_CLASSES }; /* i1: UINT */
typedef struct tsr_op_tpu {
  const char *spelling[TSR_TPU_CLASSES];
  const char *refusal;
} tsr_op_tpu_t;
extern const tsr_op_tpu_t tsr_op_tpu_table[TSR_OP_COUNT];
/* TSR_OP_COUNT if unknown. */
tsr_opcode_t tsr_op_lookup(const char *mnemonic, size_t len);
/* Whether op-table flags (TSR_F_FLT/INT/BOOL) accept elements of `dtype`'s
 * class: the elementwise and reduction type rule, for the verifier and the
 * interpreter's loop tables alike. */
bool tsr_op_flags_accept(uint32_t flags, tsr_dtype_t dtype);

typedef struct tsr_op tsr_op_t;

/* ---- Queries derived from the effects (ir/effects.c) ---------------------
 * The answers back ends need about an op, computed from the EFFECTS bits
 * and the op's typed view (ir/opview.h), never from lists of opcodes. */

/* Pure: no effect but reading its value and index operands, no regions,
 * not a terminator. A pure op whose results are unused may be removed, and
 * pure ops may be reordered freely. */
bool tsr_op_is_pure(tsr_opcode_t opcode);
/* May block: waits on a semaphore (TSR_E_SEM_WAIT: dma_wait, sem_wait,
 * core_barrier); a scheduler switches cores at these ops. */
bool tsr_op_may_block(tsr_opcode_t opcode);
/* The position in op->operands of the ref whose memory `op` writes, or -1:
 * the destination of the op's TSR_E_REF_WRITE role (store's ref, operand
 * 0; dma_start's destination, operand 1, which a DMA `add` also reads).
 * The one answer to "may this op change a ref" for the interpreter and the
 * back ends. */
int32_t tsr_op_written_ref(const tsr_op_t *op);
/* The positions in op->operands of the refs whose memory `op` reads (its
 * TSR_E_REF_READ role, and a DMA add's destination), written to
 * out_slots[0..n); returns n (at most 2). */
uint32_t tsr_op_read_refs(const tsr_op_t *op, int32_t out_slots[2]);
/* The store into which `op`'s result may be computed directly (store
 * forwarding), or NULL: `op` is TSR_F_FORWARD, unmasked, has one block
 * result, and the next op is an unmasked store of that result. Callers
 * still check that the store is the result's only use. */
const tsr_op_t *tsr_op_forward_store(const tsr_op_t *op);

/* ---- Types (the structs are public: tessera/ir.h) ---------------------------- */

typedef tsr_ir_type_t tsr_type_t;
typedef tsr_ir_type_kind_t tsr_type_kind_t;
typedef tsr_ir_space_t tsr_space_t;
typedef tsr_ir_sem_kind_t tsr_sem_kind_t;
typedef tsr_ir_index_t tsr_index_t;
typedef tsr_ir_index_kind_t tsr_index_kind_t;
typedef tsr_ir_role_t tsr_role_t;
typedef tsr_ir_dim_semantics_t tsr_dim_semantics_t;

/* How many elements an index takes along a dimension of `dim` elements:
 * all of it (FULL), one (POINT: the dimension is dropped), or its size
 * (SLICE, DS). The one rule every view, load, store and slice uses. */
static inline int64_t tsr_index_extent(const tsr_index_t *ix, int64_t dim) {
  return ix->kind == TSR_INDEX_FULL ? dim : ix->kind == TSR_INDEX_POINT ? 1 : ix->size;
}

tsr_type_t tsr_type_scalar(tsr_dtype_t dtype);
tsr_type_t tsr_type_vector(tsr_dtype_t dtype, uint32_t rank, const int64_t *dims);
tsr_type_t tsr_type_ref(tsr_space_t space, tsr_dtype_t dtype, uint32_t rank,
                        const int64_t *dims);
tsr_type_t tsr_type_sem(tsr_sem_kind_t kind, uint32_t rank, const int64_t *dims);
bool tsr_type_equal(const tsr_type_t *a, const tsr_type_t *b);
int64_t tsr_type_element_count(const tsr_type_t *t); /* 1 for scalars */
/* Appends the type's text: "f32", "f32[8, 128]", "vmem f32[8, 128]", "dma_sem[2]". */
void tsr_type_print(tsr_strbuf_t *sb, const tsr_type_t *t);
/* Rounds a float literal to the value set of a float dtype (f32 overflow
 * gives infinities), as the parser stores and the printer checks it. */
double tsr_literal_round(double v, tsr_dtype_t dtype);
const char *tsr_space_name(tsr_space_t space);
bool tsr_space_from_name(const char *name, size_t len, tsr_space_t *out);

/* ---- Values, ops, regions ----------------------------------------------------- */

typedef struct tsr_region tsr_region_t;
typedef struct tsr_kernel tsr_kernel_t;
typedef struct tsr_module tsr_module_t;
typedef struct tsr_value tsr_value_t;

/* An SSA value: an op result, a region argument, or a kernel-level ref. */
struct tsr_value {
  tsr_type_t type;
  const char *name;      /* without '%'; unique within its kernel */
  uint32_t id;           /* dense index within the kernel: 0..num_values-1 */
  tsr_op_t *def;         /* defining op, NULL for arguments and kernel refs */
  tsr_region_t *owner;   /* for region arguments: their region */
  int32_t decl;          /* for kernel refs: index in kernel->decls, else -1 */
};

typedef tsr_ir_literal_t tsr_literal_t;

struct tsr_op {
  tsr_opcode_t opcode;
  uint32_t flags; /* TSR_OPF_* */
  tsr_loc_t loc;
  uint32_t num_operands, num_results, num_regions;
  tsr_value_t **operands;
  tsr_value_t **results;
  tsr_region_t *regions; /* array of num_regions */
  /* Attributes; which are used depends on the op (docs/ir.md):
   *   indices   load/store/slice: one per ref dimension; DMA: src then dst
   *   ints      axis (1), axes, perm, iota/program_id dimension (1),
   *             DMA: ints[0] = number of src indices
   *   literal   const
   *   text      print format, assert message */
  uint32_t num_indices, num_ints;
  tsr_index_t *indices;
  int64_t *ints;
  tsr_literal_t literal;
  const char *text;
  tsr_op_t *next;         /* next op in the region */
  tsr_region_t *parent;   /* region holding this op */
};

/* A list of ops with arguments. For: args = [iv, carried..]; while: both
 * regions get the carried values; scoped: args are the new refs; index maps:
 * args are the grid indices. */
struct tsr_region {
  uint32_t num_args;
  tsr_value_t **args;
  tsr_op_t *first, *last;
  tsr_op_t *parent_op; /* NULL for a kernel body or an index map */
};

/* ---- Kernels and modules ---------------------------------------------------- */


/* One `prefetch`, `in`, `out` or `scratch` line of a kernel header. */
typedef struct tsr_decl {
  tsr_role_t role;
  tsr_loc_t loc;
  tsr_value_t *ref;  /* what the body sees: a REF (or SEM) typed value */
  tsr_type_t array;  /* in/out/prefetch: the whole HBM array, as a VECTOR type
                        (scalar prefetch of rank 0 is a SCALAR type);
                        scratch: same as ref->type */
  bool has_block;    /* "block[..]" was written */
  int64_t block[TSR_MAX_RANK]; /* block dims, TSR_SQUEEZED for squeezed ones;
                                  without a block: the array dims */
  /* Element dims (Pallas pl.Element): the index map yields the dim's element
   * offset into the array padded by pad_low elements before it and pad_high
   * after it, not a block index; the block's elements outside the array are
   * padding. Only with a block; never squeezed. */
  bool element[TSR_MAX_RANK];
  int64_t pad_low[TSR_MAX_RANK], pad_high[TSR_MAX_RANK];
  tsr_region_t *index_map; /* args: grid indices (i32), yields one i32 block
                              index per array dim; NULL: all zeros */
  int32_t alias;     /* outputs: decl index of the aliased input, else -1 */
  uint8_t revisit;   /* outputs: a tsr_ir_revisit_t (TSR_REVISIT_ANY: blocks
                        are copied in when a step enters them, and may be
                        entered again at any step); else 0 */
} tsr_decl_t;

struct tsr_kernel {
  const char *name; /* without '@' */
  tsr_loc_t loc;
  tsr_module_t *module;
  uint32_t grid_rank;
  int64_t grid[TSR_MAX_RANK]; /* TSR_GRID_DYNAMIC where grid_bound names the
                                 extent */
  /* A dynamic grid extent (a traced value in JAX): 1 + the decl index of the
   * rank-0 i32 prefetch operand whose value, read when a run starts, is the
   * extent; 0 for a static one. */
  uint32_t grid_bound[TSR_MAX_RANK];
  uint8_t semantics[TSR_MAX_RANK]; /* tsr_dim_semantics_t */
  uint32_t num_decls;
  tsr_decl_t *decls;  /* declaration order: prefetch, in, out, scratch */
  uint32_t decls_capacity;
  tsr_region_t body;
  uint32_t num_values; /* values created so far: ids are 0..num_values-1 */
};

struct tsr_module {
  tsr_arena_t arena;
  const char *filename; /* for diagnostics; "<builder>" when built in C */
  uint32_t num_kernels;
  uint32_t capacity;
  tsr_kernel_t **kernels;
  struct tsr_file_name *file_names; /* copies of the builder's loc.file
                                       strings (tsr_module_intern_file) */
};

/* ---- Construction (used by the parser and the public builder) ----------------
 * All return NULL-status on success and TSR_OUT_OF_MEMORY on arena failure.
 * Names are copied into the arena; NULL name = generated ("v<id>"). */
tsr_status_t tsr_module_create(const char *filename, tsr_module_t **out_module)
    TSR_MUST_USE;
/* The module's own copy of the file name `file` (NUL-terminated), made
 * once per distinct name: the builder's locations then borrow nothing from
 * the caller. NULL on OOM. */
const char *tsr_module_intern_file(tsr_module_t *module, const char *file);
void tsr_module_destroy(tsr_module_t *module);
tsr_status_t tsr_kernel_create(tsr_module_t *module, const char *name,
                               size_t name_len, tsr_loc_t loc,
                               tsr_kernel_t **out_kernel) TSR_MUST_USE;
tsr_kernel_t *tsr_module_find_kernel(tsr_module_t *module, const char *name,
                                     size_t len);
tsr_status_t tsr_value_create(tsr_kernel_t *kernel, const tsr_type_t *type,
                              const char *name, size_t name_len,
                              tsr_value_t **out_value) TSR_MUST_USE;
/* Appends a decl; its ref value is created from `ref_type` and `name`. */
tsr_status_t tsr_kernel_add_decl(tsr_kernel_t *kernel, tsr_role_t role,
                                 const char *name, size_t name_len,
                                 const tsr_type_t *ref_type, tsr_loc_t loc,
                                 tsr_decl_t **out_decl) TSR_MUST_USE;
/* Creates a region (in the arena) with `num_args` argument slots (NULL). */
tsr_status_t tsr_region_create(tsr_module_t *module, uint32_t num_args,
                               tsr_region_t **out_region) TSR_MUST_USE;
tsr_status_t tsr_region_init_args(tsr_module_t *module, tsr_region_t *region,
                                  uint32_t num_args) TSR_MUST_USE;
/* Creates an op with operand/result/region arrays sized as given (results get
 * fresh values of `result_types` named from `result_names`, which may be NULL)
 * and appends it to `region`. Attributes are set by the caller afterwards;
 * tsr_op_alloc_indices/ints size those arrays. */
tsr_status_t tsr_op_create(tsr_kernel_t *kernel, tsr_region_t *region,
                           tsr_opcode_t opcode, tsr_loc_t loc,
                           tsr_value_t *const *operands, uint32_t num_operands,
                           const tsr_type_t *result_types,
                           const char *const *result_names, uint32_t num_results,
                           uint32_t num_regions, tsr_op_t **out_op) TSR_MUST_USE;
tsr_status_t tsr_op_alloc_indices(tsr_module_t *module, tsr_op_t *op,
                                  uint32_t count) TSR_MUST_USE;
tsr_status_t tsr_op_alloc_ints(tsr_module_t *module, tsr_op_t *op,
                               uint32_t count) TSR_MUST_USE;
const char *tsr_module_strdup(tsr_module_t *module, const char *s, size_t n);

/* ---- Text ---------------------------------------------------------------------
 * tsr_ir_parse: parses `text` (named `filename` in diagnostics) into a new
 * module. On failure returns TSR_PARSE_ERROR with every diagnostic found
 * (file:line:col: error: ...), and *out_module is untouched. It does not run
 * the verifier. */
tsr_status_t tsr_ir_parse(const char *filename, const char *text, size_t len,
                          tsr_module_t **out_module) TSR_MUST_USE;
/* Appends the canonical text of the module / kernel. */
void tsr_ir_print_module(tsr_strbuf_t *sb, const tsr_module_t *module);
void tsr_ir_print_kernel(tsr_strbuf_t *sb, const tsr_kernel_t *kernel);
/* Checks every rule of docs/ir.md; TSR_VERIFY_ERROR with all diagnostics. A
 * module that verifies cannot crash the interpreter. */
tsr_status_t tsr_ir_verify(const tsr_module_t *module) TSR_MUST_USE;
/* The same rules for one kernel (all but the module's duplicate names). */
tsr_status_t tsr_ir_verify_kernel(const tsr_kernel_t *kernel) TSR_MUST_USE;

/* The pre-order walk that numbers a kernel's ops (diagnostic sites): index
 * maps in declaration order, then the body; an op before its regions.
 * visit (may be NULL) sees each op with its position; returns the count. */
typedef void (*tsr_ir_op_visit_fn)(void *ctx, const tsr_op_t *op, uint32_t position);
uint32_t tsr_ir_walk_ops(const tsr_kernel_t *kernel, tsr_ir_op_visit_fn visit, void *ctx);

/* Semaphore slots: every semaphore one core holds, numbered from 0 — the
 * semaphore declarations (inputs, outputs, scratch) in order, a semaphore
 * output aliasing a semaphore input visited with the input's slots (it
 * names the same semaphores), then the semaphore
 * arguments of `scoped` ops in pre-order, each row-major. visit (may be NULL)
 * sees each semaphore ref with its first slot; returns the number of slots. */
typedef void (*tsr_ir_sem_visit_fn)(void *ctx, const tsr_value_t *ref, uint64_t first_slot);
uint64_t tsr_ir_semaphore_slots(const tsr_kernel_t *kernel, tsr_ir_sem_visit_fn visit,
                                void *ctx);

/* How the grid is shared by the cores of a device (docs/semantics.md, "The
 * grid"), the same in every back end: the grid dims [first, end) flattened
 * ("split points") are cut into chunks of ceil(points / cores) consecutive
 * points; core c runs chunk c, each point with every point of the other
 * dims, in row-major order. The split dims are the `core_parallel` dim (the
 * verifier allows one) if the kernel has one (Mosaic runs one index of it
 * per core), else the
 * leading `parallel` dims (JAX's interpret mode); with neither, first ==
 * end, points is 1 and core 0 runs the whole grid. */
typedef struct tsr_ir_core_split {
  uint32_t first, end;
  uint64_t points; /* product of the grid dims [first, end) */
} tsr_ir_core_split_t;
/* Whether a grid dim's extent is a run-time value (grid_bound). */
static inline bool tsr_ir_kernel_has_dynamic_grid(const tsr_kernel_t *k) {
  for (uint32_t i = 0; i < k->grid_rank; i++)
    if (k->grid_bound[i]) return true;
  return false;
}
tsr_ir_core_split_t tsr_ir_core_split(uint32_t grid_rank, const int64_t *grid,
                                      const uint8_t *semantics);
/* The leading `parallel` grid dims (the dims shuffle_parallel and
 * parallel_order permute: tessera/interp.h) in the order a run takes them:
 * the number of entries a parallel_order over `grid` has, or false (with
 * *why set) when `order` (size entries) is no permutation of each such
 * dim's extent in turn. */
bool tsr_ir_parallel_order_check(uint32_t grid_rank, const int64_t *grid,
                                 const uint8_t *semantics, const int64_t *order,
                                 uint64_t size, const char **why);
/* The grid dims along which output decl `d`'s block index cannot change:
 * bit g set when no result of its index map depends on grid index g (a map
 * absent, or constant, depends on none). Only outputs the pipeline copies
 * out block by block (vmem or smem, not semaphores) have such dims; every
 * other decl gives 0. The dependence is followed through the map's ops (a
 * result depends on what its operands depend on; an op with regions, or a
 * load from a prefetch table the body may write, on every grid index), so
 * a bit set is certain: every step along that dim writes the same block. */
uint32_t tsr_ir_output_fixed_dims(const tsr_kernel_t *kernel, const tsr_decl_t *d);
/* The first grid dim in `fixed` (tsr_ir_output_fixed_dims) that a TPU may
 * split between TensorCores (semantics parallel or core_parallel) and that
 * has more than one step in `grid` (the run's extents), or -1: the output
 * is then written by several cores on a chip whose device has two
 * TensorCores (docs/semantics.md, "Outputs along a parallel dimension"). */
int32_t tsr_ir_parallel_revisit_dim(uint32_t grid_rank, const int64_t *grid,
                                    const uint8_t *semantics, uint32_t fixed);
/* Whether a run may give the split points of one core (tsr_ir_core_split)
 * to several host threads, each a contiguous run of them, and get the
 * outputs a run on one thread gets (docs/semantics.md, "Host threads"):
 * no semaphores, DMAs or prints; no aliased, revisit-any or unwindowed
 * outputs, each yielding every split grid index as one of its block
 * indices (so parts write disjoint blocks); no writes to inputs; and each
 * scratch ref stored whole, before any read, at each step that starts a
 * split point. Otherwise false, with *why (may be NULL) saying why. */
bool tsr_ir_host_split_ok(const tsr_kernel_t *kernel, const char **why);
/* Core `core` of `cores`: its split points [*lo, *hi) (empty when lo == hi). */
void tsr_ir_core_share(const tsr_ir_core_split_t *split, uint32_t cores, uint32_t core,
                       uint64_t *lo, uint64_t *hi);

/* The canonical bytes of `kernel` (ir/canon.c, docs/cache.md), independent
 * of value and kernel names, locations, comments and layout, dependent on
 * every semantic detail; *out_bytes is freed with tsr_free. */
tsr_status_t tsr_ir_canon_kernel(const tsr_kernel_t *kernel, uint8_t **out_bytes,
                                 size_t *out_size) TSR_MUST_USE;
/* Version of that encoding; part of every cache key. */
uint32_t tsr_ir_canon_format_version(void);

#endif /* TESSERA_IR_IR_H */
