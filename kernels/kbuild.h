/* The kernel library's conveniences over the builder API (tessera/ir.h).
 *
 * A generator builds a whole kernel through one kb_t. The first failure is
 * kept in kb->status and every later call does nothing and returns NULL, so
 * a generator writes its ops straight on and checks once, at the end
 * (kb_finish). Result types follow the operands: elementwise ops take the
 * type of their first operand, comparisons the same shape in i1. Ops carry
 * the location kb->loc ("tessera/kernels/<name>", line 0): diagnostics from
 * a generated kernel name the generator.
 *
 * Not thread-safe; one kb_t per kernel being built. */
#ifndef TESSERA_KERNELS_KBUILD_H
#define TESSERA_KERNELS_KBUILD_H

#include "ir/ir.h"
#include "tessera/kernels.h"

typedef struct kb {
  tsr_ir_module_t *module;
  tsr_ir_kernel_t *kernel;
  tsr_ir_region_t *region; /* where ops are appended */
  tsr_status_t status;     /* the first failure, or NULL */
  tsr_loc_t loc;
} kb_t;

/* Creates a module named "<name>.tsr" holding one kernel `name`. */
void kb_begin(kb_t *b, const char *name);
/* Verifies the module; on success hands it to *out_module, else frees it and
 * returns the first failure. */
tsr_status_t kb_finish(kb_t *b, tsr_ir_module_t **out_module);
/* Records a failure (the first one wins) and returns NULL. */
tsr_ir_value_t *kb_fail(kb_t *b, tsr_status_t status);
static inline bool kb_ok(const kb_t *b) { return b->status == NULL; }

/* ---- declarations ---- */
void kb_grid(kb_t *b, uint32_t rank, const int64_t *dims,
             const tsr_ir_dim_semantics_t *semantics);
/* An in/out/prefetch operand; with a `block`, *out_index_map is its index
 * map region (grid indices as arguments; end it with kb_yield). */
tsr_ir_value_t *kb_operand(kb_t *b, tsr_ir_role_t role, const char *name, tsr_dtype_t dtype,
                           uint32_t rank, const int64_t *dims, tsr_ir_space_t space,
                           const int64_t *block, tsr_ir_region_t **out_index_map);
tsr_ir_value_t *kb_scratch(kb_t *b, const char *name, tsr_ir_space_t space, tsr_dtype_t dtype,
                           uint32_t rank, const int64_t *dims);
tsr_ir_value_t *kb_scratch_sem(kb_t *b, const char *name, tsr_ir_sem_kind_t kind, uint32_t rank,
                               const int64_t *dims);

/* ---- types ---- */
static inline tsr_ir_type_t kb_type_of(const tsr_ir_value_t *v) { return v->type; }
tsr_ir_type_t kb_vec(tsr_dtype_t dtype, uint32_t rank, const int64_t *dims);
/* `like` with its dtype replaced (a scalar stays a scalar). */
tsr_ir_type_t kb_retype(tsr_ir_type_t like, tsr_dtype_t dtype);

/* ---- ops: the general form and typed shorthands ---- */
/* Appends `params` (its loc is set to b->loc) to the current region; the
 * op's first result (NULL for ops without results, and on failure). */
tsr_ir_value_t *kb_op(kb_t *b, const tsr_ir_op_params_t *params, tsr_ir_op_t **out_op);
tsr_ir_value_t *kb_const_f(kb_t *b, tsr_ir_type_t type, double value);
tsr_ir_value_t *kb_const_i(kb_t *b, tsr_ir_type_t type, int64_t value);
tsr_ir_value_t *kb_i32(kb_t *b, int64_t value); /* a scalar i32 constant */
tsr_ir_value_t *kb_unary(kb_t *b, const char *mnemonic, tsr_ir_value_t *a);
tsr_ir_value_t *kb_binary(kb_t *b, const char *mnemonic, tsr_ir_value_t *x, tsr_ir_value_t *y);
tsr_ir_value_t *kb_compare(kb_t *b, const char *mnemonic, tsr_ir_value_t *x, tsr_ir_value_t *y);
tsr_ir_value_t *kb_select(kb_t *b, tsr_ir_value_t *cond, tsr_ir_value_t *x, tsr_ir_value_t *y);
tsr_ir_value_t *kb_convert(kb_t *b, tsr_ir_value_t *a, tsr_dtype_t dtype);
tsr_ir_value_t *kb_bitcast(kb_t *b, tsr_ir_value_t *a, tsr_dtype_t dtype);
tsr_ir_value_t *kb_iota(kb_t *b, tsr_ir_type_t type, int64_t dim);
tsr_ir_value_t *kb_broadcast(kb_t *b, tsr_ir_value_t *a, tsr_ir_type_t type);
tsr_ir_value_t *kb_reshape(kb_t *b, tsr_ir_value_t *a, tsr_ir_type_t type);
/* roll by a scalar i32 shift along `axis` (r[i] = a[i - shift]). */
tsr_ir_value_t *kb_roll(kb_t *b, tsr_ir_value_t *a, tsr_ir_value_t *shift, int64_t axis);
tsr_ir_value_t *kb_gather(kb_t *b, tsr_ir_value_t *a, tsr_ir_value_t *index, int64_t axis);
/* sort, argsort (interpreter and cpu only: no Mosaic form) */
tsr_ir_value_t *kb_sort(kb_t *b, tsr_ir_value_t *a, int64_t axis);
tsr_ir_value_t *kb_argsort(kb_t *b, tsr_ir_value_t *const *keys, uint32_t n, int64_t axis);
/* reduce_<op> / argmax / argmin over `axes` into `result` type. */
tsr_ir_value_t *kb_reduce(kb_t *b, const char *mnemonic, tsr_ir_value_t *a, const int64_t *axes,
                          uint32_t num_axes, tsr_ir_type_t result);
tsr_ir_value_t *kb_program_id(kb_t *b, int64_t axis);

/* ---- memory ---- */
/* Whole-ref views: every dimension ":". */
tsr_ir_value_t *kb_load_all(kb_t *b, tsr_ir_value_t *ref);
void kb_store_all(kb_t *b, tsr_ir_value_t *ref, tsr_ir_value_t *value);
/* General views: `indices` (one per ref dim; POINT/DS starts in `starts`,
 * referenced by tsr_ir_index_t.operand as 0, 1, ...), result type given. */
tsr_ir_value_t *kb_load(kb_t *b, tsr_ir_value_t *ref, const tsr_ir_index_t *indices,
                        uint32_t num_indices, tsr_ir_value_t *const *starts,
                        uint32_t num_starts, tsr_ir_type_t result);
void kb_store(kb_t *b, tsr_ir_value_t *ref, const tsr_ir_index_t *indices, uint32_t num_indices,
              tsr_ir_value_t *const *starts, uint32_t num_starts, tsr_ir_value_t *value);
static inline tsr_ir_index_t kb_full(void) {
  return (tsr_ir_index_t){TSR_INDEX_FULL, -1, 0, 0, 0, 1};
}
static inline tsr_ir_index_t kb_point(int64_t at) {
  return (tsr_ir_index_t){TSR_INDEX_POINT, -1, at, 0, 0, 1};
}
static inline tsr_ir_index_t kb_slice(int64_t start, int64_t stop) {
  return (tsr_ir_index_t){TSR_INDEX_SLICE, -1, start, stop, stop - start, 1};
}
/* ds(starts[operand], size) */
static inline tsr_ir_index_t kb_ds(int32_t operand, int64_t size) {
  return (tsr_ir_index_t){TSR_INDEX_DS, operand, 0, 0, size, 1};
}

/* ---- regions ---- */
/* `yield` of `n` values at the end of the current region. */
void kb_yield(kb_t *b, tsr_ir_value_t *const *values, uint32_t n);
/* Builds `for %i = lo to hi step 1` carrying `n` values; makes its body
 * the current region and returns the previous one, to give back to
 * kb_end_for after the body's ops (kb_end_for appends the yield of `n`
 * carried values). Body arguments: kb_for_iv / kb_for_carried. */
typedef struct kb_for {
  tsr_ir_op_t *op;
  tsr_ir_region_t *outer;
} kb_for_t;
kb_for_t kb_begin_for(kb_t *b, tsr_ir_value_t *lo, tsr_ir_value_t *hi,
                      tsr_ir_value_t *const *init, uint32_t n);
tsr_ir_value_t *kb_for_iv(const kb_for_t *loop);
tsr_ir_value_t *kb_for_carried(const kb_for_t *loop, uint32_t i);
/* Ends the body with `yield next[0..n)` and returns to the outer region;
 * the loop's result i is kb_for_result(loop, i). */
void kb_end_for(kb_t *b, kb_for_t *loop, tsr_ir_value_t *const *next, uint32_t n);
tsr_ir_value_t *kb_for_result(const kb_for_t *loop, uint32_t i);

/* `if %c` without results and without else: the body becomes current;
 * kb_end_if yields nothing and returns to the outer region. */
kb_for_t kb_begin_if(kb_t *b, tsr_ir_value_t *cond);
void kb_end_if(kb_t *b, kb_for_t *branch);

/* ---- DMAs ---- */
/* `dma_start` (or `dma_wait`, by `mnemonic`) of the view src[src_idx] to
 * dst[dst_idx] on the DMA semaphore `sem` (rank 0: no index). Dynamic
 * starts of both views are in `starts`, referenced by the indices'
 * `operand` as 0, 1, ... */
void kb_dma(kb_t *b, const char *mnemonic, tsr_ir_value_t *src, const tsr_ir_index_t *src_idx,
            uint32_t n_src, tsr_ir_value_t *dst, const tsr_ir_index_t *dst_idx, uint32_t n_dst,
            tsr_ir_value_t *sem, tsr_ir_value_t *const *starts, uint32_t num_starts);

/* ---- hints ---- */
/* `multiple_of %a, multiple`: a (a scalar i32 or u32), promised to be a
 * multiple of `multiple` (Pallas's pl.multiple_of): Mosaic then proves
 * the alignment of DMA and load offsets computed from it; the interpreter
 * reports a kernel error where the promise is broken. */
tsr_ir_value_t *kb_multiple_of(kb_t *b, tsr_ir_value_t *a, int64_t multiple);

#endif /* TESSERA_KERNELS_KBUILD_H */
