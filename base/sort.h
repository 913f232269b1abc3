/* Sorting blocks along one axis in jax.lax.sort's order: the `sort` and
 * `argsort` ops of the interpreter and the cpu backend share these.
 *
 * The order: integers by value (i1 as 0 < 1); floats by value with -0.0 ==
 * +0.0 and every NaN, of either sign, after +inf and equal to the others.
 * Every sort is stable: equal keys keep their input order, so -0.0 and +0.0,
 * and NaNs with different payloads, come out in the order they went in.
 *
 * Lines of up to 2048 elements are sorted by a merge sort here; longer ones
 * by Highway's vqsort, loaded on first use (base/sort.c says how its
 * unstable sort is made stable and given this order). Blocks are dense, row-major;
 * `axis` is the one sorted along. Not a public header. */
#ifndef TESSERA_BASE_SORT_H
#define TESSERA_BASE_SORT_H

#include "base/base_internal.h"

/* The most keys an argsort takes (ir/ops.def's row says the same). */
#define TSR_SORT_MAX_KEYS 16

/* Scratch space kept across sorts: a few buffers that a sort takes and gives
 * back, so that the long lines' temporaries (an argsort of n elements uses
 * 8n bytes of items, 16n with several keys) are not fresh pages, a page
 * fault each 4 KiB, on every call. Thread-safe: sorts running at once take
 * different buffers. Its owner (a compiled executable, an interpreter
 * program) frees it, and the buffers, with itself. NULL from create when out
 * of memory; every function below takes a NULL scratch as "allocate per
 * call". */
typedef struct tsr_sort_scratch tsr_sort_scratch_t;
tsr_sort_scratch_t *tsr_sort_scratch_create(void);
void tsr_sort_scratch_destroy(tsr_sort_scratch_t *scratch);
/* Bytes the scratch holds now (idle buffers): for tests. */
size_t tsr_sort_scratch_bytes(tsr_sort_scratch_t *scratch);

/* dst = src sorted along `axis`, its temporaries from `scratch` (NULL:
 * allocated per call). dst and src must not overlap. NULL, or
 * TSR_OUT_OF_MEMORY for the scratch space, or TSR_UNIMPLEMENTED when a long
 * line needs Highway's sort and its module does not load. */
tsr_status_t tsr_sort_block(tsr_sort_scratch_t *scratch, tsr_dtype_t dtype, void *dst,
                            const void *src, uint32_t rank, const int64_t *dims, uint32_t axis);

/* dst[.., i, ..] = the stable permutation that sorts each line along `axis`
 * lexicographically by keys[0], then keys[1], ... (all of shape `dims`):
 * the position in the line of the i-th smallest element. dst must not
 * overlap a key. Statuses as tsr_sort_block's, and TSR_INVALID_ARGUMENT
 * for lines longer than INT32_MAX. */
tsr_status_t tsr_argsort_block(tsr_sort_scratch_t *scratch, uint32_t num_keys,
                               const tsr_dtype_t *dtypes, const void *const *keys, int32_t *dst,
                               uint32_t rank, const int64_t *dims, uint32_t axis);

/* The sort op (argsort false: keys[0], of dtypes[0], sorted into dst) or the
 * argsort op (the order of the num_keys keys, i32, into dst), as both
 * backends run them. */
tsr_status_t tsr_sort_op(tsr_sort_scratch_t *scratch, bool argsort, uint32_t num_keys,
                         const tsr_dtype_t *dtypes, const void *const *keys, void *dst,
                         uint32_t rank, const int64_t *dims, uint32_t axis);

#endif /* TESSERA_BASE_SORT_H */
