/* What lower/emit*.c share: the emitter state, values as the generated code
 * sees them (scalars, memory views, lazy elementwise expressions), and the
 * text, loop-nest, expression and memory helpers. Private to the MLIR text
 * emitter (docs/lowering_codegen.md describes the generated code).
 *
 * Layers: a file calls its own functions and those of lower layers only,
 * never a function of a higher layer or of another file of its layer.
 *   0 emit_text.c     SSA names, text, types, constants, plain ops, roots and
 *                     views, element access, loop nests       (this header)
 *   1 emit_expr.c     elementwise semantics, conversions, lazy expressions,
 *                     values                                  (this header)
 *   2 emit_memory.c   views of refs, masks, load/store, store forwarding,
 *                     fills                                   (this header)
 *   3 emit_runtime.c  runtime calls: sites, steps, semaphores, DMAs, print,
 *                     assert, memory registration             (emit_runtime.h)
 *     emit_values.c   elementwise, constant, iota, broadcast, reshape, slice,
 *                     queries
 *     emit_ops.c      reductions, dot, transpose, concatenate, roll, gather
 *   4 emit_control.c  for, while, if, scoped (calls emit_runtime.c)
 *     emit_grid.c     operands, windows and the grid loop (calls emit_runtime.c)
 *   5 emit.c          the driver: use counts, the op dispatch, the function,
 *                     tsr_lower_emit_mlir
 * The op families' entry points (layers 2-4) are declared in emit_dispatch.h
 * and called by the driver's dispatch only. Layer 4 emits nested regions
 * (loop bodies, index maps, the kernel body) with em_emit_region, which
 * calls the driver's dispatch through emitter_t::emit_region, a function
 * pointer the driver sets: the one call upwards, by callback. */
#ifndef TESSERA_LOWER_EMIT_INTERNAL_H
#define TESSERA_LOWER_EMIT_INTERNAL_H

#include <stdarg.h>

#include "base/base_internal.h"
#include "ir/ir.h"

/* Lanes of the vector loops: the innermost dimension is walked 16 elements
 * at a time. Reductions depend on it: the interpreter's lane reduction
 * (interp/blockops.c) uses 16 lanes, and using the same lanes and the same
 * combining tree makes float sums bitwise equal to the interpreter's. */
#define EM_LANES 16
/* Buffers of at most this many bytes are slots of one allocation, the
 * frame, instead of allocations of their own (em_buffer): the generated
 * function then holds one pointer for them all rather than one per buffer
 * live from its prologue to its end (docs/benchmarks.md: the register allocator's
 * time grew with their number), and a split part takes the frame and the
 * slots' offsets as arguments (lower/split.c). */
#define EM_FRAME_MAX_BUFFER (1 << 20)
/* A frame of at most this many bytes is on the stack: freed and allocated
 * again by every call, a malloc'ed frame of some hundreds of KiB is
 * mmap'ed and page-faulted each time (the 450-op sort before slots were
 * reused, 569 KiB: median 72 -> 134 us a call). 256 KiB, not more: a kernel
 * may run on a thread with a smaller stack than the main thread's 8 MiB (a
 * host callback's, an embedder's); with slots reused the library's sorts
 * need 24 KiB. */
#define EM_FRAME_STACK_MAX (256 << 10)
/* Nodes remembered per position of a fused store (ex_read). */
#define EM_MEMO 32
/* Elementwise results of one shape computed in one loop nest (em_group_add). */
#define EM_GROUP 16
/* Rows of the dot micro-kernel (6 x 16 f32 accumulators: 12 AVX2 registers). */
#define EM_DOT_ROWS 6

typedef struct emitter emitter_t;

/* An SSA name of the generated text ("%t12", "%ci4", ...). */
typedef struct ssa {
  char s[48];
} ssa_t;

/* A type as text ("f32", "vector<16xi32>", "memref<8x128xf32, ...>"). */
typedef struct tstr {
  char s[320]; /* the longest: a rank-6 strided memref type, ~230 */
} tstr_t;

/* A root: memory that views point into, a function argument or a buffer
 * allocated in the prologue; always of identity layout. */
typedef struct root {
  ssa_t name;
  tsr_dtype_t dtype;
  uint32_t rank;
  int64_t dims[TSR_MAX_RANK];
  bool stacked;  /* an operand: the memref has a leading dimension of the
                    run's devices, and this core's slice starts at `base` */
  ssa_t base;    /* index: element offset of this device's slice (stacked) */
  uint32_t slot; /* its frame slot + 1, or 0 (not in the frame) */
} root_t;

/* A slot of the frame of small buffers (em_buffer). A value's own buffer
 * (em_value_buffer) is released once every value holding a view of it or an
 * expression reading it has had its last use (em_hold, em_release_after),
 * and its slot serves a later buffer of the same size. */
typedef struct frame_slot {
  int64_t off, bytes;
  const tsr_region_t *region; /* where its holders are defined (the first's) */
  uint32_t refs;              /* holders not yet past their last use */
  bool releasable;            /* a value's own buffer */
  bool pinned;                /* held from two regions, or past any op: kept */
} frame_slot_t;

/* A holder's claim on a slot until `after` has been emitted. */
typedef struct slot_ref {
  const tsr_op_t *after;
  uint32_t slot;
} slot_ref_t;

/* A view: `rank` dims with static element strides at a dynamic element
 * offset into a root, and its memref value in the text (a
 * memref.reinterpret_cast of the root, typed
 * memref<dims x T, strided<[strides], offset: ?>>). `key` names the memory
 * symbolically: two views with the same key, dims and strides are the same
 * elements at the same time (load and store of one ref with equal indices). */
typedef struct view {
  uint32_t root;
  ssa_t off;  /* index */
  ssa_t name; /* the memref */
  uint32_t rank;
  int64_t dims[TSR_MAX_RANK];
  int64_t strides[TSR_MAX_RANK];
  const char *key;
} view_t;

/* A lazy elementwise expression: a tree of ops over leaves, evaluated one
 * vector at a time inside the loop nest of whoever consumes it (fusion). All
 * nodes have the shape of the value they compute. */
typedef enum ex_kind {
  EX_MEM,    /* elements of a view of the node's shape [mask: masked load] */
  EX_BCAST,  /* numpy broadcast of a view (src dims) to the node's dims */
  EX_SCALAR, /* one compute-typed scalar SSA value, splat */
  EX_IOTA,   /* index along `axis` */
  EX_OP,     /* elementwise op over args */
} ex_kind_t;

typedef struct expr expr_t;
struct expr {
  ex_kind_t kind;
  tsr_dtype_t dtype; /* of the node's elements */
  uint32_t rank;
  int64_t dims[TSR_MAX_RANK];
  view_t mem;        /* EX_MEM, EX_BCAST (the source view) */
  expr_t *mask;      /* EX_MEM: masked-off elements hold the uninit value */
  bool mutable_mem;  /* EX_MEM of a ref that the kernel stores to */
  ssa_t scalar;      /* EX_SCALAR */
  uint32_t axis;     /* EX_IOTA */
  tsr_opcode_t op;   /* EX_OP */
  const tsr_op_t *origin; /* EX_OP: the IR op it computes (errors name it), or NULL */
  tsr_dtype_t arg_dtype; /* EX_OP: dtype of args[1] (args[0] for unary) */
  uint32_t nargs;
  expr_t *args[3];
};

typedef enum vkind {
  VK_NONE,
  VK_SCALAR, /* compute-typed SSA value */
  VK_MEM,    /* a view holding the block (immutable while the value lives) */
  VK_LAZY,   /* an expression not yet computed */
  VK_REF,    /* a ref: view of its current memory */
} vkind_t;

typedef struct vinfo {
  vkind_t kind;
  ssa_t scalar;
  view_t mem;
  expr_t *expr;
  bool mutable_ref;  /* VK_REF: some store writes it */
} vinfo_t;

/* One index of a loop nest: a static value or an SSA index. */
typedef struct dimv {
  bool dynamic;
  int64_t c;
  ssa_t s;
} dimv_t;

/* The position a loop-nest body is emitted for. */
typedef struct nest {
  uint32_t rank;
  ssa_t idx[TSR_MAX_RANK]; /* index values */
  uint32_t lanes;          /* 0: scalar; else vectors of `lanes` along the last dim */
  bool masked;             /* vector tail: only `mask` lanes are valid */
  ssa_t mask;              /* vector<lanes x i1> */
  uint32_t tail;           /* masked by a constant mask: its leading valid lanes; else 0 */
} nest_t;

typedef void (*nest_body_fn)(emitter_t *em, const nest_t *n, void *ctx);

typedef struct prolog_const {
  char *key; /* "type|literal" */
  ssa_t name;
} prolog_const_t;

struct emitter {
  const tsr_kernel_t *k;
  const tsr_op_t *op;  /* the IR op being emitted: errors name it */
  tsr_arena_t arena;
  tsr_strbuf_t pro;   /* prologue: constants and allocations */
  tsr_strbuf_t body;  /* the function body after the prologue */
  tsr_strbuf_t epi;   /* deallocations */
  tsr_strbuf_t *cur;  /* where em_line writes */
  int indent;
  uint32_t next_name;
  tsr_status_t error; /* first failure; emission stops at it */
  vinfo_t *vals;      /* per value id */
  uint32_t *uses;     /* per value id */
  const tsr_op_t **user; /* per value id: the only user, when uses == 1 */
  bool *stored;       /* per value id (refs): some store writes it */
  bool need_log1pf;   /* declare func.func private @log1pf */
  bool need_expf_table; /* define the global @tsr_expf_table (em_expf_table) */
  root_t *roots;
  uint32_t num_roots, roots_capacity;
  prolog_const_t *consts;
  uint32_t num_consts, consts_capacity;
  uint32_t *const_index;     /* hash index of consts (emit_text.c) */
  uint32_t const_index_cap;  /* a power of two, or 0 */
  uint32_t num_keys;  /* for fresh view keys */
  int64_t frame_bytes; /* size of the frame of small buffers (em_buffer) */
  frame_slot_t *slots;
  uint32_t num_slots, slots_cap;
  uint32_t *free_slots; /* released slots, for reuse */
  uint32_t num_free, free_cap;
  uint32_t *held_slots; /* released while a group is pending: reused after it */
  uint32_t num_held, held_cap;
  slot_ref_t *slot_refs;
  uint32_t num_slot_refs, slot_refs_cap;
  const tsr_op_t **last_user; /* per value id: the op of its home region that
                                 holds its last use (emit.c), or NULL */
  bool *escapes;              /* per value id: a terminator uses it */
  /* Nodes already read at the current position of a fused store (ex_read). */
  bool memo_on;
  uint32_t memo_count;
  struct em_memo {
    const expr_t *e;
    ssa_t value;
  } memo[EM_MEMO];
  /* Memory read at the current position, by view: a leaf read by several
   * nodes or group members is loaded once; a group member's result is
   * forwarded to later members that read its buffer (group_body). */
  uint32_t loads_count;
  struct em_load {
    view_t view;
    tsr_dtype_t dtype;
    ssa_t value;
  } loads[EM_MEMO];
  /* Elementwise results of one shape waiting to be computed in one loop
   * nest, in op order (em_group_add, em_group_flush). */
  struct em_group {
    uint32_t n;
    uint32_t lanes;
    const expr_t *e[EM_GROUP];
    view_t dst[EM_GROUP];
  } group;
  const tsr_region_t *region; /* the IR region being emitted */
  /* Returned by ex_new when memory runs out (em->error is then set): a
   * splat that no traversal recurses into, so that the op being emitted can
   * finish harmlessly before emission stops. */
  expr_t oom_expr;
  ssa_t grid_iv[TSR_MAX_RANK];   /* index */
  /* The grid's extents: constants, or for a dynamic dim (grid_bound) its
   * prefetch operand's value read before the grid loop (em_emit_grid). */
  dimv_t grid_ext[TSR_MAX_RANK];
  ssa_t grid_i32[TSR_MAX_RANK];  /* i32 */
  ssa_t lin;                     /* index: row-major number of the grid point */
  /* The runtime (lower_api.h): its callback and context as !llvm.ptr, this
   * core's device and core (i32). */
  ssa_t rt_fn, rt_ctx, device, core;
  ssa_t uninit_zero;        /* i1: the run's uninit mode is zero (lower_api.h) */
  ssa_t budget_p;           /* !llvm.ptr: this core's step budget (lower_api.h) */
  ssa_t order_p;            /* !llvm.ptr: the run's parallel order (TSR_RT_CTX_ORDER) */
  struct em_site *sites;    /* (op, tsr_ir_walk_ops position), sorted by op */
  uint32_t num_sites;
  int64_t *sem_slot;        /* per value id: first semaphore slot, or -1 */
  bool remote_dmas;         /* some dma_start has `device` */
  bool out_copy_in;         /* TSR_LOWER_OUT_COPY_IN: output blocks copied in */
  uint32_t bounds;          /* TSR_LOWER_OOB_READS_UNINIT, _PADDED, _DOUBLE_ROWS
                               (lower_api.h): 0 is the logical shape */
  /* The driver's dispatch of a region's ops (emit.c), set by
   * tsr_lower_emit_mlir: how layer 4 emits regions (em_emit_region). */
  void (*emit_region)(emitter_t *em, const tsr_region_t *r);
};

/* ---- Errors ---------------------------------------------------------------- */
/* Records TSR_UNIMPLEMENTED "file:line:col: error: op 'NAME' cannot be
 * lowered to the cpu target yet (why)" unless an error is recorded. */
void em_unimplemented(emitter_t *em, const tsr_op_t *op, const char *why);
void em_fail(emitter_t *em, tsr_status_t status);
#define EM_OK(em) ((em)->error == NULL)

/* ---- Text ------------------------------------------------------------------ */
void em_line(emitter_t *em, const char *fmt, ...) TSR_PRINTF(2, 3);
void em_open(emitter_t *em, const char *fmt, ...) TSR_PRINTF(2, 3);  /* line + indent */
void em_close(emitter_t *em, const char *text); /* dedent + line */
ssa_t em_fresh(emitter_t *em);
/* A view key (arena copy); NULL when it does not fit (then no key). */
const char *em_key(emitter_t *em, const char *fmt, ...) TSR_PRINTF(2, 3);
void *em_alloc(emitter_t *em, size_t size);

/* Element types: storage in memory (bf16/f16 as i16, i1 as i8) and compute
 * in registers (floats as f32, i1 as i1). */
const char *em_storage(tsr_dtype_t dtype);
const char *em_compute(tsr_dtype_t dtype);
tstr_t em_vtype(const char *elem, uint32_t lanes); /* lanes 0: elem itself */
tstr_t em_view_type(const emitter_t *em, const view_t *v);
tstr_t em_root_type(const emitter_t *em, uint32_t root);
uint32_t em_int_bits(tsr_dtype_t dtype);
bool em_is_float(tsr_dtype_t dtype);
bool em_is_signed(tsr_dtype_t dtype);

/* Prologue constants (deduplicated): any type and literal text. */
ssa_t em_const(emitter_t *em, const char *type, const char *literal);
/* Integer types, scalar or vector. */
ssa_t em_cidx(emitter_t *em, int64_t v);
ssa_t em_cint(emitter_t *em, const char *elem, uint32_t lanes, int64_t v);
ssa_t em_cf32(emitter_t *em, uint32_t lanes, float v);
ssa_t em_cf32_bits(emitter_t *em, uint32_t lanes, uint32_t bits);
ssa_t em_cbool(emitter_t *em, uint32_t lanes, bool v);
/* A compute-typed constant of `dtype` from the IR literal (vector if lanes). */
ssa_t em_literal(emitter_t *em, tsr_dtype_t dtype, tsr_literal_t lit, uint32_t lanes);
/* The uninitialized value of `dtype` (NaN, integer max, true), compute-typed. */
ssa_t em_uninit(emitter_t *em, tsr_dtype_t dtype, uint32_t lanes);
/* What an element window's padding holds (pl.Element; docs/semantics.md). */
ssa_t em_element_pad(emitter_t *em, tsr_dtype_t dtype, uint32_t lanes);

/* Plain ops: "%r = NAME %a, %b : TYPE". */
ssa_t em_op1(emitter_t *em, const char *name, ssa_t a, const char *type);
ssa_t em_op2(emitter_t *em, const char *name, ssa_t a, ssa_t b, const char *type);
ssa_t em_cmp(emitter_t *em, const char *kind, const char *pred, ssa_t a, ssa_t b,
             const char *type); /* kind: "cmpi"/"cmpf" */
ssa_t em_select(emitter_t *em, ssa_t c, ssa_t a, ssa_t b, const char *elem,
                uint32_t lanes, bool cond_vector);
ssa_t em_cast(emitter_t *em, const char *name, ssa_t a, const char *from,
              const char *to);
ssa_t em_bcast(emitter_t *em, ssa_t s, const char *elem, uint32_t lanes);
/* index arithmetic */
ssa_t em_iadd(emitter_t *em, ssa_t a, ssa_t b);
ssa_t em_imul(emitter_t *em, ssa_t a, ssa_t b);
ssa_t em_iaddc(emitter_t *em, ssa_t a, int64_t c);
ssa_t em_imulc(emitter_t *em, ssa_t a, int64_t c);
ssa_t em_idx_of_i32(emitter_t *em, ssa_t v);
ssa_t em_dimv_ssa(emitter_t *em, dimv_t d);
dimv_t em_dimc(int64_t c);
dimv_t em_dims(ssa_t s);

/* ---- Memory ------------------------------------------------------------------ */
uint32_t em_add_root(emitter_t *em, ssa_t name, tsr_dtype_t dtype, uint32_t rank,
                     const int64_t *dims);
/* Index: the element offset of this core's memory in `root` (0 unless
 * stacked). */
ssa_t em_root_base(emitter_t *em, uint32_t root);
/* i64: the address of element `off` (index) of root. */
ssa_t em_root_address(emitter_t *em, uint32_t root, ssa_t off);
/* A new dense buffer and its view: a slot of the frame (EM_FRAME_MAX_BUFFER
 * bytes or less), else memref.alloc in the prologue and dealloc at the end. */
view_t em_buffer(emitter_t *em, tsr_dtype_t dtype, uint32_t rank, const int64_t *dims);
/* A value's own dense buffer: as em_buffer, but its frame slot is released
 * after the last use of the values that hold it (em_hold), and reused. */
view_t em_value_buffer(emitter_t *em, tsr_dtype_t dtype, uint32_t rank, const int64_t *dims);
/* v holds `root` (a view of it, or an expression reading it) until its last
 * use; nothing for roots that are not releasable frame slots. */
void em_hold(emitter_t *em, const tsr_value_t *v, uint32_t root);
/* v holds the roots of every memory leaf of e. */
void em_hold_expr(emitter_t *em, const tsr_value_t *v, const expr_t *e);
/* Called by the driver after each op: releases the claims that end there. */
void em_release_after(emitter_t *em, const tsr_op_t *op);
/* Makes the slots released while a group was pending reusable (em_group_flush). */
void em_release_held(emitter_t *em);
/* Emits the memref of `v` (reinterpret_cast of its root) at this point. */
void em_view_materialize(emitter_t *em, view_t *v);
/* A view from a root-relative offset, dims and strides (emitted here). */
view_t em_view_make(emitter_t *em, uint32_t root, ssa_t off, uint32_t rank,
                    const int64_t *dims, const int64_t *strides, const char *key);
void em_dense_strides(uint32_t rank, const int64_t *dims, int64_t *strides);
bool em_view_is_dense(const view_t *v);
/* The view without its unit dims (same memory). */
view_t em_view_squeeze(emitter_t *em, const view_t *v);
bool em_view_same(const view_t *a, const view_t *b);

/* Element access at a nest position (vector when n->lanes, masked when
 * n->masked), converting storage <-> compute. */
/* A prefetch (a read) of element idx of v: a hint, no access; idx must
 * still be inside v's memref. locality 3 keeps the line in every cache
 * level (prefetcht0 on x86), 2 in L2 and below (prefetcht1). */
void em_mem_prefetch(emitter_t *em, const view_t *v, const ssa_t *idx, int locality);
ssa_t em_mem_read(emitter_t *em, const view_t *v, tsr_dtype_t dtype, const ssa_t *idx,
                  const nest_t *n, ssa_t *extra_mask, ssa_t *passthru);
void em_mem_write(emitter_t *em, const view_t *v, tsr_dtype_t dtype, const ssa_t *idx,
                  const nest_t *n, ssa_t value, ssa_t *extra_mask);
/* Stores the lanes of `raw` (storage type `storage`, n->lanes lanes) that
 * `mask` enables at idx, the lanes along v's last dim. A constant tail mask
 * is passed as tail > 0 (its leading valid lanes). Elements narrower than 32
 * bits are stored one by one, never with vector.maskedstore (emit_text.c
 * says why). */
void em_masked_store(emitter_t *em, const view_t *v, const char *storage, const ssa_t *idx,
                     uint32_t lanes, ssa_t raw, ssa_t mask, uint32_t tail);
ssa_t em_to_compute(emitter_t *em, tsr_dtype_t dtype, ssa_t raw, uint32_t lanes);
ssa_t em_to_storage(emitter_t *em, tsr_dtype_t dtype, ssa_t value, uint32_t lanes);

/* ---- Loop nests --------------------------------------------------------------- */
/* Lanes for an innermost dimension of `inner` elements (0: scalar loop). */
uint32_t em_pick_lanes(int64_t inner);
/* Loops over `rank` dims of extents `ext` (row-major), the last one `lanes`
 * at a time with a masked tail; body(em, nest, ctx) once per position (twice
 * in the text when there is a tail). rank 0: body once, scalar. */
void em_nest(emitter_t *em, uint32_t rank, const dimv_t *ext, uint32_t lanes,
             nest_body_fn body, void *ctx);
/* scf.for over index [0, n) step s: returns the IV; em_close(em, "}") ends it. */
ssa_t em_for_open(emitter_t *em, dimv_t lo, dimv_t hi, int64_t step);

/* ---- Expressions ----------------------------------------------------------------- */
/* Never NULL (see emitter_t::oom_expr). */
expr_t *ex_new(emitter_t *em, ex_kind_t kind, tsr_dtype_t dtype, uint32_t rank,
               const int64_t *dims);
/* The value as an expression of shape (rank, dims) (scalars splat). */
expr_t *ex_of_value(emitter_t *em, const tsr_value_t *v, uint32_t rank,
                    const int64_t *dims);
/* Evaluates e at position n (with its own indices idx, of e's rank). */
ssa_t ex_read(emitter_t *em, const expr_t *e, const ssa_t *idx, const nest_t *n);
/* Whether every memory leaf can be read with vectors along the last dim. */
bool ex_vectorizable(const expr_t *e);
bool ex_has_mutable(const expr_t *e);
/* Whether writing e into `dst` one position at a time is safe: every leaf
 * reading dst's root reads exactly dst's elements. */
bool ex_inplace_safe(const emitter_t *em, const expr_t *e, const view_t *dst);
/* Whether some leaf of e reads memory of `root`. */
bool ex_reads_root(const expr_t *e, uint32_t root);
/* Writes e into dst (same shape) [under mask] with one fused loop nest. */
void ex_store(emitter_t *em, const expr_t *e, const view_t *dst, const expr_t *mask);
/* e without unit dims, or NULL if some leaf cannot drop them in place. */
expr_t *ex_squeeze(emitter_t *em, const expr_t *e);
/* The view holding value v (materializing lazy values into a new buffer). */
view_t em_value_view(emitter_t *em, const tsr_value_t *v);
/* Stores an expression into a new dense buffer. */
view_t em_materialize(emitter_t *em, const expr_t *e);
/* e computed into a value's own new buffer, as em_materialize_value, but in
 * the loop nest of the pending group of such results of its shape: the
 * results of consecutive elementwise ops (a compare-exchange's mask and
 * selects) are one nest (docs/lowering_codegen.md, "Values, buffers and
 * fusion"). The driver flushes the group before any other op. */
view_t em_group_add(emitter_t *em, const expr_t *e);
/* Emits the pending group's loop nest, if any. */
void em_group_flush(emitter_t *em);

/* Elementwise semantics on compute values (scalars or vectors). */
ssa_t em_elementwise(emitter_t *em, tsr_opcode_t op, tsr_dtype_t dtype,
                     const ssa_t *args, uint32_t lanes);
ssa_t em_convert(emitter_t *em, ssa_t x, tsr_dtype_t from, tsr_dtype_t to,
                 uint32_t lanes);
ssa_t em_bitcast(emitter_t *em, ssa_t x, tsr_dtype_t from, tsr_dtype_t to,
                 uint32_t lanes);
/* libm's `name` (f32 -> f32) on each lane (scalar calls, exact as the
 * interpreter's). */
ssa_t em_libm_call(emitter_t *em, const char *name, ssa_t x, uint32_t lanes);
/* the constant table of exp's expansion, a module-level memref.global */
void em_expf_table(tsr_strbuf_t *out);
/* Float max (is_max) or min exactly as the interpreter's (NaN of a first). */
ssa_t em_fmax(emitter_t *em, ssa_t a, ssa_t b, uint32_t lanes, bool is_max);
/* Rounds an f32 compute value to the value set of a float dtype. */
ssa_t em_round(emitter_t *em, ssa_t x, tsr_dtype_t dtype, uint32_t lanes);

/* The elementwise op families on compute values (scalars, or vectors of
 * `lanes`): elementwise and compare (em_elementwise), select, convert and
 * bitcast; the one dispatch of these families, for fused expressions and
 * scalar ops alike. a: the operands; dtype: the result's; arg_dtype: the
 * value operand's (a[1] of a select, else a[0]). Returns false, emitting
 * nothing, for an op of another family. */
bool em_elementwise_family(emitter_t *em, tsr_opcode_t op, tsr_dtype_t dtype,
                           tsr_dtype_t arg_dtype, const ssa_t *a, uint32_t lanes, ssa_t *out);

/* ---- Values (emit_expr.c) ---------------------------------------------------------- */
static inline vinfo_t *em_vi(emitter_t *em, const tsr_value_t *v) { return &em->vals[v->id]; }
/* The scalar SSA value of v (an internal error if v is not a scalar here). */
ssa_t em_scalar(emitter_t *em, const tsr_value_t *v);
static inline void em_set_scalar(emitter_t *em, const tsr_value_t *v, ssa_t s) {
  vinfo_t *vi = em_vi(em, v);
  vi->kind = VK_SCALAR;
  vi->scalar = s;
}
static inline void em_set_mem(emitter_t *em, const tsr_value_t *v, view_t m) {
  vinfo_t *vi = em_vi(em, v);
  vi->kind = VK_MEM;
  vi->mem = m;
  em_hold(em, v, m.root);
}
static inline void em_set_lazy(emitter_t *em, const tsr_value_t *v, expr_t *e) {
  vinfo_t *vi = em_vi(em, v);
  vi->kind = VK_LAZY;
  vi->expr = e;
  em_hold_expr(em, v, e);
}
/* e computed into a value's own buffer (em_value_buffer). */
view_t em_materialize_value(emitter_t *em, const expr_t *e);
/* A dense view of v's elements (copying when v's view is strided). */
view_t em_dense_view_of(emitter_t *em, const tsr_value_t *v);
/* Whether the block result of `op`, computed by `e`, stays an expression
 * that its only user evaluates (fusion). */
bool em_lazy_ok(emitter_t *em, const tsr_op_t *op, const expr_t *e);

/* ---- Memory through refs (emit_memory.c) -------------------------------------------- */
/* The dynamic slice starts of a masked access, which are not clamped: the
 * window may reach past the ref's ends (Pallas allows it when the lanes
 * outside are masked off), and range_mask() keeps its accesses inside. */
typedef struct window_range {
  uint32_t count;
  uint32_t vdim[TSR_MAX_RANK]; /* the view dim */
  ssa_t start[TSR_MAX_RANK];   /* i32: its first element in the ref's dim */
  int64_t step[TSR_MAX_RANK];
  int64_t dim[TSR_MAX_RANK];   /* the ref's dim */
} window_range_t;

/* An access the run's bounds (em->bounds, lower_api.h) let reach outside
 * its ref's logical shape: a read under TSR_LOWER_OOB_READS_UNINIT, or any
 * access of a ref that TSR_LOWER_PADDED pads. Its dynamic slice starts are
 * kept (range) and its dynamic points clamped, an error only outside the
 * limit (the padded shape; none for such a read); the lanes outside the
 * logical shape are masked off (em_soft_mask): they read as the
 * uninitialized value, writes to them are dropped. */
typedef struct soft_bounds {
  bool on;
  window_range_t range;
  bool has_inside;
  ssa_t inside; /* i1: every dynamic point index is inside the ref */
} soft_bounds_t;

/* An i32 value clamped to [0, hi], as an index. */
ssa_t em_clamp_index(emitter_t *em, ssa_t v, int64_t hi);
/* The view of op's indices [first, first + rank) into ref view `rv`,
 * dynamic starts clamped into it. With every index a point, sets
 * *all_points and the element's indices in points[] instead (no view). */
view_t em_ref_view_at(emitter_t *em, const tsr_op_t *op, const view_t *rv, uint32_t first,
                      bool *all_points, ssa_t *points);
/* The same for ref value `ref`, read or written (`write`) by op: when the
 * run's bounds let the access reach outside it, sets soft->on and keeps
 * what em_soft_mask needs (soft_bounds_t); else as em_ref_view_at. */
view_t em_ref_view_soft(emitter_t *em, const tsr_op_t *op, const view_t *rv,
                        const tsr_value_t *ref, uint32_t first, bool write, bool *all_points,
                        ssa_t *points, soft_bounds_t *soft);
/* The lanes of a soft access (rank, dims: its view's) inside the ref's
 * logical shape, and'ed with `mask` (may be NULL; NULL returned when every
 * lane is inside). */
expr_t *em_soft_mask(emitter_t *em, const tsr_op_t *op, const soft_bounds_t *soft, expr_t *mask,
                     uint32_t rank, const int64_t *dims);
/* a AND b, two i1 expressions of one shape. */
expr_t *em_and_mask(emitter_t *em, const tsr_op_t *op, expr_t *a, expr_t *b);
/* The i1 of an all-points soft access: its element is inside (NULL: it is). */
bool em_soft_point(emitter_t *em, const soft_bounds_t *soft, ssa_t *mask);
/* Where op's block result goes: a dense buffer, or the view of the store
 * that follows it (store forwarding). Sets the result's vinfo. */
view_t em_result_dest(emitter_t *em, const tsr_op_t *op, bool inputs_mutable);
/* The same for an op whose runtime call reads the dense views srcs[0..n)
 * while it writes a dense result (sort, argsort): the store's view only when
 * it is dense and shares no root with a source. */
view_t em_result_dest_call(emitter_t *em, const tsr_op_t *op, const view_t *srcs, uint32_t n);
/* Whether the first op of `body` that touches `ref` stores all of it,
 * unmasked and outside control flow (then its fill can be skipped). */
bool em_first_touch_stores_all(const tsr_region_t *body, const tsr_value_t *ref);
/* Fills v with the uninitialized value of dtype. */
void em_fill_view(emitter_t *em, const view_t *v, tsr_dtype_t dtype);
void em_fill_view_element_pad(emitter_t *em, const view_t *v, tsr_dtype_t dtype);

/* ---- Regions -------------------------------------------------------------------------- */
/* r's terminator (yield, condition), or NULL. */
static inline const tsr_op_t *em_terminator(const tsr_region_t *r) {
  const tsr_op_t *t = r->last;
  return t && (tsr_op_table[t->opcode].flags & TSR_F_TERMINATOR) ? t : NULL;
}
/* Emits r's ops through the driver's dispatch (emitter_t::emit_region),
 * with em->region set to r meanwhile. */
static inline void em_emit_region(emitter_t *em, const tsr_region_t *r) {
  const tsr_region_t *saved = em->region;
  em->region = r;
  em->emit_region(em, r);
  em->region = saved;
}

#endif /* TESSERA_LOWER_EMIT_INTERNAL_H */
