/* Block operations of the interpreter: tight per-dtype loops over whole
 * blocks, generated from the dtype list and the op table. Scalars are blocks
 * of one element, so every op has one code path. Nothing here checks
 * bounds or types: the verifier and the interpreter have done that.
 *
 * Layout: a block is dense, row-major, elements in their storage type
 * (tessera/dtypes.def): bf16/f16 are raw 16-bit patterns, i1 is one byte 0/1.
 * Arithmetic on bf16/f16 is done in f32 and rounded to nearest-even. */
#ifndef TESSERA_INTERP_BLOCKOPS_H
#define TESSERA_INTERP_BLOCKOPS_H

#include "ir/ir.h"
#include "tessera/interp.h"

/* Which operand of a binary op is a scalar broadcast over the other. */
typedef enum tsr_bcast {
  TSR_BCAST_NONE,     /* both have n elements (or both are scalars, n = 1) */
  TSR_BCAST_A_SCALAR, /* a has one element */
  TSR_BCAST_B_SCALAR, /* b has one element */
} tsr_bcast_t;

typedef void (*tsr_unary_fn)(void *dst, const void *a, size_t n);
typedef void (*tsr_binary_fn)(void *dst, const void *a, const void *b, size_t n,
                              tsr_bcast_t bcast);

/* The loop for an elementwise op on `dtype` (the operands' dtype), or NULL if
 * the op does not apply to that dtype. Unary: ops with TSR_SYN_UNARY.
 * Binary: TSR_SYN_BINARY ops; comparisons write i1 (bytes 0/1).
 * Integer semantics follow XLA: wrapping arithmetic, x/0 = -1 (all ones),
 * x%0 = x, INT_MIN/-1 = INT_MIN, INT_MIN%-1 = 0, shifts by >= the bit width
 * give 0 (shl, shrl) or the sign fill (shra); shift amounts are taken as
 * unsigned. Float max/min propagate NaN. round is half-to-even. sign(NaN) =
 * NaN. abs(INT_MIN) = INT_MIN. */
tsr_unary_fn tsr_blockops_unary(tsr_opcode_t op, tsr_dtype_t dtype);
tsr_binary_fn tsr_blockops_binary(tsr_opcode_t op, tsr_dtype_t dtype);
/* The baseline build of the loop (wide false) or its AVX2 build (wide
 * true: NULL where there is none: other targets, a CPU without AVX2, the
 * dtypes it is not built for). tsr_blockops_binary answers the wide one
 * where there is one. For tests that compare the two. */
tsr_binary_fn tsr_blockops_binary_variant(tsr_opcode_t op, tsr_dtype_t dtype, bool wide);
/* Whether the AVX2 builds exist and this CPU runs them. */
bool tsr_blockops_wide_available(void);

/* dst[i] = cond[i] ? a[i] : b[i]; any of cond/a/b may be a scalar (flag).
 * Runs the AVX2 build of the loop when the CPU has it. */
void tsr_blockops_select(size_t elem_size, void *dst, const uint8_t *cond,
                         bool cond_scalar, const void *a, bool a_scalar,
                         const void *b, bool b_scalar, size_t n);
/* The same with the build chosen: wide asks for the AVX2 one, which is
 * used where it exists and runs (tsr_blockops_wide_available; element
 * sizes 1, 2 and 4). For tests. */
void tsr_blockops_select_variant(bool wide, size_t elem_size, void *dst, const uint8_t *cond,
                                 bool cond_scalar, const void *a, bool a_scalar,
                                 const void *b, bool b_scalar, size_t n);

/* Value conversion. float->int truncates toward zero and saturates, NaN -> 0;
 * int->float and float->narrower float round to nearest-even; x -> i1 is
 * x != 0; i1 -> x is 0 or 1. */
void tsr_blockops_convert(tsr_dtype_t dst_dtype, void *dst, tsr_dtype_t src_dtype,
                          const void *src, size_t n);

/* Writes one element of `dtype` holding the uninitialized value: NaN (quiet,
 * positive) for floats, the maximum for integers, 1 for i1; or zero. */
void tsr_blockops_uninit_value(tsr_dtype_t dtype, tsr_uninit_mode_t mode,
                               void *out_elem);
/* JAX's own uninitialized value (primitives.uninitialized_value, what its
 * interpreters fill memory with): for integers the minimum (0 unsigned,
 * false for i1) where tessera's `nan` mode gives the maximum; floats as
 * tsr_blockops_uninit_value, and zero in `zero` mode. */
void tsr_blockops_jax_uninit_value(tsr_dtype_t dtype, tsr_uninit_mode_t mode,
                                   void *out_elem);
/* Fills n elements of elem_size bytes with *elem. */
void tsr_blockops_fill(size_t elem_size, void *dst, const void *elem, size_t n);
/* Stores a literal (tsr_literal_t as the IR holds it) as one element. */
void tsr_blockops_literal(tsr_dtype_t dtype, tsr_literal_t lit, void *out_elem);

/* dst[idx] = idx[dim] for every index of the dims-shaped block. */
void tsr_blockops_iota(tsr_dtype_t dtype, void *dst, uint32_t rank,
                       const int64_t *dims, uint32_t dim);

/* The general strided copy that loads, stores, slices, broadcasts (stride
 * 0), transposes (permuted strides) and concatenations are made of:
 *   for every index i of `dims`: dst[sum i_k*dst_strides_k] = src[sum i_k*src_strides_k]
 * Strides are in elements and may be 0 (src) or negative. Contiguous inner
 * runs are copied with memcpy; adjacent dims that are contiguous in both are
 * merged first. rank 0 copies one element. */
void tsr_blockops_copy(size_t elem_size, uint32_t rank, const int64_t *dims,
                       void *dst, const int64_t *dst_strides, const void *src,
                       const int64_t *src_strides);

/* dst += src elementwise with the dtype's add (a DMA's add mode), through
 * dense temporaries; false when they cannot be allocated (dst unchanged). */
bool tsr_blockops_add_into(tsr_dtype_t dtype, uint32_t rank, const int64_t *dims, void *dst,
                           const int64_t *dst_strides, const void *src,
                           const int64_t *src_strides);

/* Row-major strides (in elements) of a dense block. */
void tsr_blockops_dense_strides(uint32_t rank, const int64_t *dims,
                                int64_t *out_strides);

/* Reduction of src (rank, dims) over the axes set in axes_mask (bit k = axis
 * k) into dst, whose shape is dims without those axes (a scalar if all).
 * op: REDUCE_SUM/MAX/MIN/PROD/AND/OR. Float sums and products accumulate in
 * f32 (bf16/f16 rounded once at the end); integers wrap. */
void tsr_blockops_reduce(tsr_opcode_t op, tsr_dtype_t dtype, void *dst,
                         const void *src, uint32_t rank, const int64_t *dims,
                         uint32_t axes_mask);

/* argmax/argmin along `axis` into int32 dst (shape: dims without axis). The
 * first extreme index wins; NaN counts as the extreme (first NaN wins). */
/* Whether a REDUCE or ARG_REDUCE family op has a kernel for `dtype` (false
 * for other ops): what prepare.c checks before tsr_blockops_reduce and
 * tsr_blockops_argreduce, which assume it. */
bool tsr_blockops_reduce_supported(tsr_opcode_t op, tsr_dtype_t dtype);
void tsr_blockops_argreduce(tsr_opcode_t op, tsr_dtype_t dtype, int32_t *dst,
                            const void *src, uint32_t rank, const int64_t *dims,
                            uint32_t axis);

/* dst[M,N] = a[M,K] @ b[K,N] (+ acc[M,N] when acc != NULL), b given as [N,K]
 * when transpose_rhs. a and b have in_dtype; dst and acc have out_dtype.
 * Float products and sums are computed in f32 (k ascending), then rounded to
 * out_dtype; integer inputs accumulate in int32 (wrapping) then convert. */
void tsr_blockops_dot(tsr_dtype_t out_dtype, void *dst, tsr_dtype_t in_dtype,
                      const void *a, const void *b, const void *acc, int64_t m,
                      int64_t k, int64_t n, bool transpose_rhs);
/* The same with the build of the f32 loop chosen: wide asks for the
 * AVX2+FMA one, used where it exists and runs, else the baseline one
 * (libm's fmaf). For tests that compare the two. */
void tsr_blockops_dot_variant(bool wide, tsr_dtype_t out_dtype, void *dst, tsr_dtype_t in_dtype,
                              const void *a, const void *b, const void *acc, int64_t m,
                              int64_t k, int64_t n, bool transpose_rhs);

/* dst = roll of src by `shift` along axis: dst[.., i, ..] = src[.., (i - shift)
 * mod dims[axis], ..] (jnp.roll); any shift, negative included. */
/* The strided roll (pltpu.roll's stride, stride_axis): the slice at index k
 * along stride_axis is rolled along axis by shift + k * stride. */
void tsr_blockops_roll_strided(size_t elem_size, void *dst, const void *src,
                               uint32_t rank, const int64_t *dims, uint32_t axis,
                               int64_t shift, int64_t stride, uint32_t stride_axis);
void tsr_blockops_roll(size_t elem_size, void *dst, const void *src,
                       uint32_t rank, const int64_t *dims, uint32_t axis,
                       int64_t shift);

/* take_along_axis: dst[.., i, ..] = src[.., idx[.., i, ..], ..] along axis;
 * idx (int32) and dst have shape dims; src has shape dims except along axis,
 * where its size is src_axis_size. Returns -1 if every index is in
 * [0, src_axis_size), else the flat position in idx of the first bad one
 * (dst is then unspecified). */
int64_t tsr_blockops_gather(size_t elem_size, void *dst, const void *src,
                            const int32_t *idx, uint32_t rank,
                            const int64_t *dims, uint32_t axis,
                            int64_t src_axis_size);

/* put_along_axis, gather's inverse: dst[.., idx[.., i, ..], ..] = upd[.., i, ..]
 * along axis, in idx's row-major order (of a repeated index the last write
 * wins); idx and upd have shape dims; dst (which holds the operand) has
 * shape dims except along axis, where its size is dst_axis_size. Returns -1
 * if every index is in [0, dst_axis_size), else the flat position in idx of
 * the first bad one (the writes before it are done). */
int64_t tsr_blockops_scatter(size_t elem_size, void *dst, const void *upd,
                             const int32_t *idx, uint32_t rank,
                             const int64_t *dims, uint32_t axis,
                             int64_t dst_axis_size);

#endif /* TESSERA_INTERP_BLOCKOPS_H */
