/* tessera's kernel library: sort, top-k, cumulative ops and reductions.
 *
 * The IR has no shape parameters, so each entry point *generates* a kernel
 * for one shape, dtype and set of options, on the builder API
 * (tessera/ir.h), and returns it in a new module the caller owns and frees
 * with tsr_ir_module_destroy. The module holds one verified kernel whose
 * operands are the inputs then the outputs, in the order each entry point
 * documents; it is prepared, cached and run like any kernel
 * (tsr_executable_prepare in tessera/api.h), by the interpreter or the cpu
 * backend, and emitted for a TPU with tsr_tpu_emit. Generating is
 * deterministic: the same parameters give the same kernel, hence the same
 * cache key. Semantics and algorithms: docs/kernels.md.
 *
 * Every generator fails with TSR_INVALID_ARGUMENT (a message naming the
 * parameter) for parameters it cannot honour, and TSR_UNIMPLEMENTED for a
 * valid combination the library does not cover yet. */
#ifndef TESSERA_KERNELS_H
#define TESSERA_KERNELS_H

#include "tessera/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TSR_KERNELS_MAX_OPERANDS 8

/* ---- sort ----------------------------------------------------------------
 * Sorts `num_operands` arrays of one shape along `axis`, ordered by the
 * first `num_keys` of them compared lexicographically, as jax.lax.sort
 * (checked against it): floats -inf < ... < +inf < NaN, where -0.0 and
 * +0.0 are equal and so are all NaNs, of either sign (NaNs last ascending,
 * first descending); `stable` keeps equal keys in their input order, also
 * descending (as jax.numpy.argsort(stable=True, descending=True)); without
 * it equal keys come in any order. Operands: in x0..x{n-1}, out
 * y0..y{n-1}, then, with `return_indices`, out `indices` (i32: each
 * element's position along the axis in the input; argsort). Rows longer
 * than a block (the last axis only) are merged through HBM; a stable sort
 * of those needs `return_indices` (TSR_UNIMPLEMENTED otherwise), unless
 * every operand is a key of an integer dtype (then equal keys are equal
 * bits and stability cannot be seen). dtypes:
 * f32, bf16, f16, i32, u32, i16, u16, i8, u8. */
/* Where a kernel is meant to run. TSR_KERNELS_FOR_TPU (the default): a
 * kernel Mosaic compiles for a TPU, which tessera's interpreter and cpu
 * backend run as well: sorts are networks. TSR_KERNELS_FOR_HOST: the
 * interpreter and the cpu backend only, as fast as they go: sorts use the
 * `sort` and `argsort` ops (Highway's vqsort), which have no TensorCore
 * lowering; `vmem_budget_bytes` does not apply (the whole array is one
 * block). */
typedef enum tsr_kernels_target {
  TSR_KERNELS_FOR_TPU,
  TSR_KERNELS_FOR_HOST,
} tsr_kernels_target_t;

typedef struct tsr_kernels_sort_params {
  uint32_t rank;
  int64_t dims[TSR_MAX_RANK];
  uint32_t num_operands;                       /* 1..TSR_KERNELS_MAX_OPERANDS */
  tsr_dtype_t dtypes[TSR_KERNELS_MAX_OPERANDS]; /* one per operand */
  uint32_t num_keys;       /* 1..num_operands */
  int32_t axis;            /* negative counts from the end; default -1 */
  bool descending;
  bool stable;
  bool return_indices;
  int64_t vmem_budget_bytes; /* VMEM the kernel may use; 0: the default, 16 MiB */
  tsr_kernels_target_t target; /* default TSR_KERNELS_FOR_TPU */
} tsr_kernels_sort_params_t;

/* Defaults: rank 0 (set it), one operand, one key, axis -1, ascending,
 * not stable, no indices, default budget. */
TSR_API void tsr_kernels_sort_params_initialize(tsr_kernels_sort_params_t *params);
TSR_API tsr_status_t tsr_kernels_sort(const tsr_kernels_sort_params_t *params,
                                      tsr_ir_module_t **out_module) TSR_MUST_USE;

/* ---- top-k ---------------------------------------------------------------
 * The k largest (or smallest) elements along `axis` and their positions,
 * as jax.lax.top_k (checked against it): sorted, ties by lower index
 * first, in the IEEE total order of the bits (-NaN < -inf < ... < -0.0 <
 * +0.0 < ... < +inf < +NaN, NaN payloads ordered). Operands: in x, out
 * values (dtype, axis of size k), out indices (i32, same shape). */
typedef struct tsr_kernels_topk_params {
  uint32_t rank;
  int64_t dims[TSR_MAX_RANK];
  tsr_dtype_t dtype;
  int64_t k;               /* 1..dims[axis] */
  int32_t axis;            /* default -1 */
  bool smallest;           /* the k smallest instead */
  int64_t vmem_budget_bytes;
} tsr_kernels_topk_params_t;

TSR_API void tsr_kernels_topk_params_initialize(tsr_kernels_topk_params_t *params);
TSR_API tsr_status_t tsr_kernels_topk(const tsr_kernels_topk_params_t *params,
                                      tsr_ir_module_t **out_module) TSR_MUST_USE;

/* ---- cumulative ops and reductions --------------------------------------- */

typedef enum tsr_kernels_op {
  TSR_KERNELS_SUM,
  TSR_KERNELS_PROD,
  TSR_KERNELS_MAX,
  TSR_KERNELS_MIN,
  TSR_KERNELS_ARGMAX,    /* reductions only; one axis; i32 result */
  TSR_KERNELS_ARGMIN,
  TSR_KERNELS_MEAN,      /* reductions only; floats */
  TSR_KERNELS_VARIANCE,  /* reductions only; floats; population (ddof 0) */
  TSR_KERNELS_LOGSUMEXP, /* reductions only; floats */
  TSR_KERNELS_OP_COUNT
} tsr_kernels_op_t;

/* "sum", "prod", "max", "min", "argmax", "argmin", "mean", "var",
 * "logsumexp"; NULL out of range. */
TSR_API const char *tsr_kernels_op_name(tsr_kernels_op_t op);
TSR_API bool tsr_kernels_op_from_name(const char *name, tsr_kernels_op_t *out_op);

/* Inclusive scan along `axis` (jax.lax.cumsum and friends); `reverse`
 * scans from the end. Sums and products of bf16/f16 accumulate in f32.
 * Operands: in x, out y (same shape and dtype). */
typedef struct tsr_kernels_cumulative_params {
  tsr_kernels_op_t op;     /* SUM, PROD, MAX or MIN */
  uint32_t rank;
  int64_t dims[TSR_MAX_RANK];
  tsr_dtype_t dtype;
  int32_t axis;            /* default -1 */
  bool reverse;
  int64_t vmem_budget_bytes;
} tsr_kernels_cumulative_params_t;

TSR_API void tsr_kernels_cumulative_params_initialize(
    tsr_kernels_cumulative_params_t *params);
TSR_API tsr_status_t tsr_kernels_cumulative(const tsr_kernels_cumulative_params_t *params,
                                            tsr_ir_module_t **out_module) TSR_MUST_USE;

/* Reduction over the axes in `axes_mask` (bit d: axis d; 0: all axes), as
 * numpy/jax.numpy with the same name; bf16/f16 accumulate in f32 and the
 * result has the input dtype (argmax/argmin: i32, one axis, the first
 * occurrence, or the first NaN if there is one, as jax.numpy). Operands:
 * in x, out y (the reduced shape; with keepdims the reduced axes stay as
 * size 1; a reduction of every axis without
 * keepdims gives shape (1,), in SMEM for 32-bit results, since kernel
 * operands have rank >= 1). Sums and products of integers wrap in the
 * input dtype (numpy with dtype=x.dtype; jax.numpy.sum promotes i8/i16 to
 * i32 instead: convert first to get that). */
typedef struct tsr_kernels_reduce_params {
  tsr_kernels_op_t op;
  uint32_t rank;
  int64_t dims[TSR_MAX_RANK];
  tsr_dtype_t dtype;
  uint32_t axes_mask;
  bool keepdims;
  int64_t vmem_budget_bytes;
} tsr_kernels_reduce_params_t;

TSR_API void tsr_kernels_reduce_params_initialize(tsr_kernels_reduce_params_t *params);
TSR_API tsr_status_t tsr_kernels_reduce(const tsr_kernels_reduce_params_t *params,
                                        tsr_ir_module_t **out_module) TSR_MUST_USE;

#ifdef __cplusplus
}
#endif
#endif /* TESSERA_KERNELS_H */
