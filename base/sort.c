/* Sorting blocks along one axis in jax.lax.sort's order (base/sort.h). Lines
 * of up to SHORT_LINE elements are sorted by a merge sort of (key << 32 |
 * position) items, the keys below. Longer ones on Highway's vqsort
 * (base/vqsort.h), which is neither stable nor aware of that order. So:
 * - i32, u32, i16, u16 are sorted as they are: equal keys are equal bits,
 *   so stability cannot show; 8-bit types and i1 by counting;
 * - f32, bf16, f16: as unsigned keys whose integer order is the order
 *   wanted (the sign-magnitude flip; both zeros on +0.0's key, every NaN on
 *   the largest), then back to floats; the runs of zeros and of NaNs are
 *   rewritten from the input in input order. f32 lines of normal numbers
 *   only skip the keys: vqsort sorts them as floats (copy_f32_has_special
 *   says why not the others).
 * - argsort: 64-bit items (key << 32 | position) sorted as integers, which
 *   is stable since no two items are equal; several keys by sorting by the
 *   last first, each pass keyed by the position in the order so far. */
#include "base/sort.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base_config.h"
#include "base/module.h"

/* ---- Highway's vqsort, loaded on first use ----------------------------------------------- */

/* libtessera-vqsort.so ($TESSERA_VQSORT_LIBRARY, else beside this build or
 * installation): libhwy calibrates a timer when it is loaded, ~5 ms that
 * every tessera process paid when it was linked in. */
static struct vqsort_api {
  bool (*f32)(float *, size_t);
  bool (*i32)(int32_t *, size_t);
  bool (*u32)(uint32_t *, size_t);
  bool (*i16)(int16_t *, size_t);
  bool (*u16)(uint16_t *, size_t);
  bool (*u64)(uint64_t *, size_t);
  char error[4400];
} vq;
static pthread_once_t vq_once = PTHREAD_ONCE_INIT;

static void vq_load(void) {
  char path[4096];
  tsr_module_path(getenv("TESSERA_VQSORT_LIBRARY"), TSR_BASE_BUILD_ROOT, TSR_VQSORT_BUILD_PATH,
                  TSR_VQSORT_INSTALL_PATH, path, sizeof path);
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    snprintf(vq.error, sizeof vq.error,
             "cannot load Highway's sort (set TESSERA_VQSORT_LIBRARY to another): %s",
             dlerror());
    return;
  }
  struct vqsort_api a;
  *(void **)&a.f32 = dlsym(h, "tsr_vqsort_f32");
  *(void **)&a.i32 = dlsym(h, "tsr_vqsort_i32");
  *(void **)&a.u32 = dlsym(h, "tsr_vqsort_u32");
  *(void **)&a.i16 = dlsym(h, "tsr_vqsort_i16");
  *(void **)&a.u16 = dlsym(h, "tsr_vqsort_u16");
  *(void **)&a.u64 = dlsym(h, "tsr_vqsort_u64");
  if (!a.f32 || !a.i32 || !a.u32 || !a.i16 || !a.u16 || !a.u64) {
    snprintf(vq.error, sizeof vq.error, "%s lacks the tsr_vqsort_ functions", path);
    return;
  }
  a.error[0] = 0;
  vq = a;
}

/* NULL when vqsort is there, else TSR_UNIMPLEMENTED saying why. */
static tsr_status_t vq_ready(void) {
  tsr_process_once(&vq_once, vq_load);
  return vq.f32 ? NULL : TSR_STATUS(TSR_UNIMPLEMENTED, "sort: %s", vq.error);
}

/* ---- Keys --------------------------------------------------------------------------------- */

static uint32_t key_bits(tsr_dtype_t dtype) {
  switch (tsr_dtype_size(dtype)) {
    case 4: return 32;
    case 2: return 16;
    default: return 8;
  }
}

/* Branch-free (the signs of sorted data are a coin toss). */
static inline uint32_t key_f32(uint32_t b) {
  uint32_t mag = b & 0x7fffffffu, neg = (uint32_t)((int32_t)b >> 31);
  uint32_t k = b ^ (neg | 0x80000000u);
  k = mag > 0x7f800000u ? 0xffffffffu : k;
  return mag == 0 ? 0x80000000u : k;
}

static inline uint32_t f32_of_key(uint32_t k) {
  uint32_t pos = (uint32_t)((int32_t)k >> 31);
  return k ^ (~pos | 0x80000000u);
}

/* bf16 and f16: `inf` is the magnitude bits of infinity. */
static inline uint32_t key_half(uint32_t b, uint32_t inf) {
  uint32_t mag = b & 0x7fffu;
  if (mag > inf) return 0xffffu;
  if (mag == 0) return 0x8000u;
  return (b & 0x8000u) ? (~b & 0xffffu) : b | 0x8000u;
}

/* The key of element `i` of `src`, of type `dtype`. */
static inline uint32_t key_at(tsr_dtype_t dtype, const void *src, int64_t i) {
  switch (dtype) {
    case TSR_DTYPE_F32: return key_f32(((const uint32_t *)src)[i]);
    case TSR_DTYPE_BF16: return key_half(((const uint16_t *)src)[i], 0x7f80u);
    case TSR_DTYPE_F16: return key_half(((const uint16_t *)src)[i], 0x7c00u);
    case TSR_DTYPE_I32: return ((const uint32_t *)src)[i] ^ 0x80000000u;
    case TSR_DTYPE_U32: return ((const uint32_t *)src)[i];
    case TSR_DTYPE_I16: return ((const uint16_t *)src)[i] ^ 0x8000u;
    case TSR_DTYPE_U16: return ((const uint16_t *)src)[i];
    case TSR_DTYPE_I8: return ((const uint8_t *)src)[i] ^ 0x80u;
    default: return ((const uint8_t *)src)[i];
  }
}

/* The element bits of a key (for the floats: of a key that is neither a
 * zero's nor a NaN's; those are put back from the input). */
static inline uint32_t bits_of_key(tsr_dtype_t dtype, uint32_t k) {
  switch (dtype) {
    case TSR_DTYPE_F32: return f32_of_key(k);
    case TSR_DTYPE_BF16:
    case TSR_DTYPE_F16: return (k & 0x8000u) ? k & 0x7fffu : ~k & 0xffffu;
    case TSR_DTYPE_I32: return k ^ 0x80000000u;
    case TSR_DTYPE_I16: return k ^ 0x8000u;
    case TSR_DTYPE_I8: return k ^ 0x80u;
    default: return k;
  }
}

static inline void store_bits(size_t size, void *dst, int64_t i, uint32_t b) {
  switch (size) {
    case 4: ((uint32_t *)dst)[i] = b; break;
    case 2: ((uint16_t *)dst)[i] = (uint16_t)b; break;
    default: ((uint8_t *)dst)[i] = (uint8_t)b; break;
  }
}

static inline uint32_t load_bits(size_t size, const void *src, int64_t i) {
  switch (size) {
    case 4: return ((const uint32_t *)src)[i];
    case 2: return ((const uint16_t *)src)[i];
    default: return ((const uint8_t *)src)[i];
  }
}

/* ---- One line -------------------------------------------------------------------------------- */

/* A block as lines along `axis`: `outer` x `inner` lines of `n` elements
 * `inner` apart. */
typedef struct lines {
  int64_t outer, n, inner;
} lines_t;

static lines_t lines_of(uint32_t rank, const int64_t *dims, uint32_t axis) {
  lines_t l = {1, dims[axis], 1};
  for (uint32_t d = 0; d < axis; d++) l.outer *= dims[d];
  for (uint32_t d = axis + 1; d < rank; d++) l.inner *= dims[d];
  return l;
}

/* Overwrites the runs [zero_at, ..) and [nan_at, ..) of `work` (dense) with
 * the zeros and the NaNs of the line of `src`, in input order. */
static void put_back_classes(tsr_dtype_t dtype, void *work, const void *src, int64_t off,
                             int64_t stride, int64_t n, int64_t zero_at, int64_t nan_at) {
  const size_t size = tsr_dtype_size(dtype);
  const uint32_t bits = key_bits(dtype);
  const uint32_t zero_key = 1u << (bits - 1), nan_key = (uint32_t)((1ull << bits) - 1);
  for (int64_t i = 0; i < n; i++) {
    uint32_t k = key_at(dtype, src, off + i * stride);
    if (k == zero_key) store_bits(size, work, zero_at++, load_bits(size, src, off + i * stride));
    else if (k == nan_key) store_bits(size, work, nan_at++, load_bits(size, src, off + i * stride));
  }
}

/* w[i] = s[i * stride] for i < n, and whether some element is a NaN, an
 * infinity, a zero or a subnormal: the elements vqsort's float sort may
 * misplace (Highway 1.0.3 sorted +inf as the largest finite float, and put
 * zeros before tiny negatives now and then: tests/unit/test_sort.c saw it
 * in about 3% of runs, its pivots being random). For a magnitude m, m +
 * 0x00800000 carries into bit 31 when m is 0x7f800000 or more (inf, NaN),
 * and m - 0x00800000 borrows into it when m is below 0x00800000 (zero,
 * subnormal). One pass, which with stride 1 goes in chunks whose fixed trip
 * count lets -O2's cost model vectorize it. */
static bool copy_f32_has_special(uint32_t *restrict w, const uint32_t *restrict s,
                                 int64_t stride, int64_t n) {
  uint32_t any = 0;
  int64_t at = 0;
  if (stride == 1)
    for (; at + 64 <= n; at += 64) {
      uint32_t c = 0;
      for (int k = 0; k < 64; k++) {
        uint32_t b = s[at + k], m = b & 0x7fffffffu;
        w[at + k] = b;
        c |= (m + 0x00800000u) | (m - 0x00800000u);
      }
      any |= c;
    }
  for (; at < n; at++) {
    uint32_t b = s[at * stride], m = b & 0x7fffffffu;
    w[at] = b;
    any |= (m + 0x00800000u) | (m - 0x00800000u);
  }
  return any >> 31;
}

/* The first i < n with w[i] >= k (w ascending), else n. */
static int64_t lower_bound_u32(const uint32_t *w, int64_t n, uint32_t k) {
  int64_t lo = 0, hi = n;
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    if (w[mid] < k) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/* Sorts the line of `src` at `off` into `work` (n dense elements). */
static bool sort_line(tsr_dtype_t dtype, void *work, const void *src, int64_t off, int64_t stride,
                      int64_t n) {
  const size_t size = tsr_dtype_size(dtype);
  switch (dtype) {
    case TSR_DTYPE_F32: {
      uint32_t *w = work;
      const uint32_t *s = (const uint32_t *)src + off;
      if (!copy_f32_has_special(w, s, stride, n)) /* normal numbers: lax.sort's order */
        return vq.f32((float *)work, (size_t)n);
      for (int64_t i = 0; i < n; i++) w[i] = key_f32(w[i]);
      if (!vq.u32(w, (size_t)n)) return false;
      /* both zeros have the key 0x80000000, every NaN 0xffffffff (+inf's
       * is 0xff800000) */
      const int64_t zero_at = lower_bound_u32(w, n, 0x80000000u);
      const int64_t nan_at = lower_bound_u32(w, n, 0xffffffffu);
      const bool zeros = zero_at < n && w[zero_at] == 0x80000000u;
      for (int64_t i = 0; i < n; i++) w[i] = f32_of_key(w[i]);
      if (zeros || nan_at < n) put_back_classes(dtype, work, src, off, stride, n, zero_at, nan_at);
      return true;
    }
    case TSR_DTYPE_BF16:
    case TSR_DTYPE_F16: {
      uint16_t *w = work;
      int64_t below_zero = 0, zeros = 0, nans = 0;
      for (int64_t i = 0; i < n; i++) {
        uint32_t k = key_at(dtype, src, off + i * stride);
        w[i] = (uint16_t)k;
        below_zero += k < 0x8000u;
        zeros += k == 0x8000u;
        nans += k == 0xffffu;
      }
      if (!vq.u16(w, (size_t)n)) return false;
      for (int64_t i = 0; i < n; i++) w[i] = (uint16_t)bits_of_key(dtype, w[i]);
      if (zeros || nans) put_back_classes(dtype, work, src, off, stride, n, below_zero, n - nans);
      return true;
    }
    case TSR_DTYPE_I32:
    case TSR_DTYPE_U32:
    case TSR_DTYPE_I16:
    case TSR_DTYPE_U16:
      for (int64_t i = 0; i < n; i++) store_bits(size, work, i, load_bits(size, src, off + i * stride));
      switch (dtype) {
        case TSR_DTYPE_I32: return vq.i32(work, (size_t)n);
        case TSR_DTYPE_U32: return vq.u32(work, (size_t)n);
        case TSR_DTYPE_I16: return vq.i16(work, (size_t)n);
        default: return vq.u16(work, (size_t)n);
      }
    default: { /* i8, u8, i1: by counting */
      int64_t count[256] = {0};
      for (int64_t i = 0; i < n; i++) count[key_at(dtype, src, off + i * stride)]++;
      int64_t at = 0;
      for (uint32_t k = 0; k < 256; k++)
        for (int64_t c = 0; c < count[k]; c++) store_bits(size, work, at++, bits_of_key(dtype, k));
      return true;
    }
  }
}

/* ---- Scratch kept across sorts ------------------------------------------------------------ */

/* At most this many idle buffers: one per sort running at once is enough
 * to reuse (sorts of one executable usually run on one or two threads). */
enum { SCRATCH_KEEP = 4 };

typedef struct buf {
  void *p;
  size_t bytes;
} buf_t;

struct tsr_sort_scratch {
  pthread_mutex_t mu;
  uint32_t n;
  buf_t idle[SCRATCH_KEEP];
};

tsr_sort_scratch_t *tsr_sort_scratch_create(void) {
  tsr_sort_scratch_t *s = tsr_malloc(sizeof *s);
  if (!s) return NULL;
  memset(s, 0, sizeof *s);
  if (pthread_mutex_init(&s->mu, NULL) != 0) {
    tsr_free(s);
    return NULL;
  }
  return s;
}

void tsr_sort_scratch_destroy(tsr_sort_scratch_t *s) {
  if (!s) return;
  for (uint32_t i = 0; i < s->n; i++) tsr_free(s->idle[i].p);
  pthread_mutex_destroy(&s->mu);
  tsr_free(s);
}

size_t tsr_sort_scratch_bytes(tsr_sort_scratch_t *s) {
  if (!s) return 0;
  pthread_mutex_lock(&s->mu);
  size_t total = 0;
  for (uint32_t i = 0; i < s->n; i++) total += s->idle[i].bytes;
  pthread_mutex_unlock(&s->mu);
  return total;
}

/* A buffer of at least `bytes` (p NULL when out of memory): the smallest
 * idle one that is large enough, else a new one (and the largest idle one,
 * too small, is freed: the sizes kept follow the sorts run). */
static buf_t scratch_take(tsr_sort_scratch_t *s, size_t bytes) {
  buf_t b = {NULL, 0}, drop = {NULL, 0};
  if (s) {
    pthread_mutex_lock(&s->mu);
    uint32_t best = UINT32_MAX, largest = UINT32_MAX;
    for (uint32_t i = 0; i < s->n; i++) {
      if (s->idle[i].bytes >= bytes && (best == UINT32_MAX || s->idle[i].bytes < s->idle[best].bytes))
        best = i;
      if (largest == UINT32_MAX || s->idle[i].bytes > s->idle[largest].bytes) largest = i;
    }
    uint32_t at = best != UINT32_MAX ? best : largest;
    if (at != UINT32_MAX) {
      if (best != UINT32_MAX) b = s->idle[at];
      else drop = s->idle[at];
      s->idle[at] = s->idle[--s->n];
    }
    pthread_mutex_unlock(&s->mu);
  }
  tsr_free(drop.p);
  if (!b.p) {
    b.p = tsr_malloc(bytes ? bytes : 1);
    b.bytes = b.p ? bytes : 0;
  }
  return b;
}

/* Gives b back to s (kept unless SCRATCH_KEEP larger ones are), or frees it. */
static void scratch_give(tsr_sort_scratch_t *s, buf_t b) {
  if (!b.p) return;
  if (s) {
    pthread_mutex_lock(&s->mu);
    if (s->n < SCRATCH_KEEP) {
      s->idle[s->n++] = b;
      b.p = NULL;
    } else {
      uint32_t smallest = 0;
      for (uint32_t i = 1; i < s->n; i++)
        if (s->idle[i].bytes < s->idle[smallest].bytes) smallest = i;
      if (s->idle[smallest].bytes < b.bytes) {
        buf_t t = s->idle[smallest];
        s->idle[smallest] = b;
        b = t;
      }
    }
    pthread_mutex_unlock(&s->mu);
  }
  tsr_free(b.p);
}

/* ---- Blocks ---------------------------------------------------------------------------------- */

/* Lines of at most this many elements are sorted here, by a merge sort of
 * (key << 32 | position) items, so that small sorts never load Highway
 * (whose load costs more than they do). */
enum { SHORT_LINE = 2048 };

/* Sorts `n` distinct items ascending, through `tmp` (n more): insertion
 * into runs of 16, then merges. Returns where the result is, a or tmp. */
static uint64_t *merge_sort_items(uint64_t *a, uint64_t *tmp, int64_t n) {
  for (int64_t r = 0; r < n; r += 16) {
    int64_t end = r + 16 < n ? r + 16 : n;
    for (int64_t i = r + 1; i < end; i++) {
      uint64_t x = a[i];
      int64_t j = i;
      for (; j > r && a[j - 1] > x; j--) a[j] = a[j - 1];
      a[j] = x;
    }
  }
  for (int64_t w = 16; w < n; w *= 2) {
    for (int64_t lo = 0; lo < n; lo += 2 * w) {
      int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
      int64_t i = lo, j = mid, k = lo;
      while (i < mid && j < hi) tmp[k++] = a[i] <= a[j] ? a[i++] : a[j++];
      while (i < mid) tmp[k++] = a[i++];
      while (j < hi) tmp[k++] = a[j++];
    }
    uint64_t *t = a;
    a = tmp;
    tmp = t;
  }
  return a;
}

/* items[i] = key of the line's element at (p ? p[i] : i), << 32 | i */
static void fill_items(tsr_dtype_t dtype, uint64_t *items, const void *src, int64_t off,
                       int64_t stride, int64_t n, const uint32_t *p);

/* A short line: its elements in the order of their sorted items. */
static tsr_status_t sort_short_lines(tsr_sort_scratch_t *scratch, tsr_dtype_t dtype, void *dst,
                                     const void *src, const lines_t *l) {
  const size_t size = tsr_dtype_size(dtype);
  buf_t ib = scratch_take(scratch, 2 * (size_t)l->n * sizeof(uint64_t));
  uint64_t *items = ib.p;
  if (!items) return TSR_OOM();
  for (int64_t o = 0; o < l->outer; o++) {
    for (int64_t j = 0; j < l->inner; j++) {
      const int64_t off = o * l->n * l->inner + j, stride = l->inner;
      fill_items(dtype, items, src, off, stride, l->n, NULL);
      const uint64_t *s = merge_sort_items(items, items + l->n, l->n);
      for (int64_t i = 0; i < l->n; i++)
        store_bits(size, dst, off + i * stride,
                   load_bits(size, src, off + (int64_t)(uint32_t)s[i] * stride));
    }
  }
  scratch_give(scratch, ib);
  return NULL;
}

tsr_status_t tsr_sort_block(tsr_sort_scratch_t *scratch, tsr_dtype_t dtype, void *dst,
                            const void *src, uint32_t rank, const int64_t *dims, uint32_t axis) {
  if (tsr_dims_count(rank, dims) == 0) return NULL;
  const lines_t l = lines_of(rank, dims, axis);
  if (l.n <= SHORT_LINE) return sort_short_lines(scratch, dtype, dst, src, &l);
  TSR_RETURN_IF_ERROR(vq_ready());
  const size_t size = tsr_dtype_size(dtype);
  /* a line along the last axis is sorted where it goes; others through a
   * dense copy */
  buf_t wb = {NULL, 0};
  if (l.inner != 1) wb = scratch_take(scratch, (size_t)l.n * size);
  void *work = wb.p;
  if (l.inner != 1 && !work)
    return TSR_OOM_BYTES((uint64_t)l.n * size, "sorting a line of %lld elements", (long long)l.n);
  bool ok = true;
  for (int64_t o = 0; o < l.outer && ok; o++) {
    for (int64_t j = 0; j < l.inner && ok; j++) {
      const int64_t off = o * l.n * l.inner + j;
      void *w = work ? work : (char *)dst + (size_t)off * size;
      ok = sort_line(dtype, w, src, off, l.inner, l.n);
      if (work)
        for (int64_t i = 0; i < l.n; i++)
          store_bits(size, dst, off + i * l.inner, load_bits(size, work, i));
    }
  }
  scratch_give(scratch, wb);
  return ok ? NULL : TSR_OOM();
}

static void fill_items(tsr_dtype_t dtype, uint64_t *items, const void *src, int64_t off,
                       int64_t stride, int64_t n, const uint32_t *p) {
#define FILL(KEY)                                                                                 \
  do {                                                                                            \
    if (!p && stride == 1)                                                                        \
      for (int64_t i = 0; i < n; i++) {                                                           \
        int64_t at_ = off + i;                                                                    \
        items[i] = (uint64_t)(KEY) << 32 | (uint64_t)i;                                           \
      }                                                                                           \
    else                                                                                          \
      for (int64_t i = 0; i < n; i++) {                                                           \
        int64_t at_ = off + (p ? (int64_t)p[i] : i) * stride;                                     \
        items[i] = (uint64_t)(KEY) << 32 | (uint64_t)i;                                           \
      }                                                                                           \
  } while (0)
  switch (dtype) {
    case TSR_DTYPE_F32: FILL(key_f32(((const uint32_t *)src)[at_])); break;
    case TSR_DTYPE_I32: FILL(((const uint32_t *)src)[at_] ^ 0x80000000u); break;
    case TSR_DTYPE_U32: FILL(((const uint32_t *)src)[at_]); break;
    default: FILL(key_at(dtype, src, at_)); break;
  }
#undef FILL
}

tsr_status_t tsr_argsort_block(tsr_sort_scratch_t *scratch, uint32_t num_keys,
                               const tsr_dtype_t *dtypes, const void *const *keys, int32_t *dst,
                               uint32_t rank, const int64_t *dims, uint32_t axis) {
  if (tsr_dims_count(rank, dims) == 0) return NULL;
  const lines_t l = lines_of(rank, dims, axis);
  const bool short_line = l.n <= SHORT_LINE;
  if (!short_line) TSR_RETURN_IF_ERROR(vq_ready());
  if (l.n > INT32_MAX)
    return TSR_STATUS(TSR_INVALID_ARGUMENT,
                      "argsort of lines of %lld elements: the positions do not fit in i32",
                      (long long)l.n);
  buf_t ib = scratch_take(scratch, (short_line ? 2 : 1) * (size_t)l.n * sizeof(uint64_t));
  buf_t pb = {NULL, 0};
  if (num_keys > 1) pb = scratch_take(scratch, 2 * (size_t)l.n * sizeof(uint32_t));
  uint64_t *items = ib.p;
  uint32_t *perm = pb.p;
  if (!items || (num_keys > 1 && !perm)) {
    scratch_give(scratch, ib);
    scratch_give(scratch, pb);
    return TSR_OOM_BYTES((uint64_t)l.n * 16, "sorting a line of %lld elements", (long long)l.n);
  }
  bool ok = true;
  for (int64_t o = 0; o < l.outer && ok; o++) {
    for (int64_t j = 0; j < l.inner && ok; j++) {
      const int64_t off = o * l.n * l.inner + j, stride = l.inner;
      /* perm's two halves; a one-key argsort has no perm (no offset from a
         null pointer: that is undefined even when never dereferenced) */
      uint32_t *p = perm, *next = perm ? perm + l.n : NULL;
      for (uint32_t q = num_keys; q-- > 0 && ok;) {
        const bool first = q + 1 == num_keys;
        fill_items(dtypes[q], items, keys[q], off, stride, l.n, first ? NULL : p);
        if (short_line) {
          const uint64_t *s = merge_sort_items(items, items + l.n, l.n);
          if (s != items) memcpy(items, s, (size_t)l.n * sizeof *items);
        } else {
          ok = vq.u64(items, (size_t)l.n);
        }
        if (q == 0) break;
        for (int64_t i = 0; i < l.n; i++) {
          uint32_t at = (uint32_t)items[i];
          next[i] = first ? at : p[at];
        }
        uint32_t *t = p;
        p = next;
        next = t;
      }
      if (num_keys == 1 && stride == 1) /* dense: a loop -O2 vectorizes */
        for (int64_t i = 0; i < l.n; i++) dst[off + i] = (int32_t)(uint32_t)items[i];
      else if (num_keys == 1)
        for (int64_t i = 0; i < l.n; i++) dst[off + i * stride] = (int32_t)(uint32_t)items[i];
      else
        for (int64_t i = 0; i < l.n; i++) dst[off + i * stride] = (int32_t)p[(uint32_t)items[i]];
    }
  }
  scratch_give(scratch, ib);
  scratch_give(scratch, pb);
  return ok ? NULL : TSR_OOM();
}

tsr_status_t tsr_sort_op(tsr_sort_scratch_t *scratch, bool argsort, uint32_t num_keys,
                         const tsr_dtype_t *dtypes, const void *const *keys, void *dst,
                         uint32_t rank, const int64_t *dims, uint32_t axis) {
  return argsort ? tsr_argsort_block(scratch, num_keys, dtypes, keys, dst, rank, dims, axis)
                 : tsr_sort_block(scratch, dtypes[0], dst, keys[0], rank, dims, axis);
}
