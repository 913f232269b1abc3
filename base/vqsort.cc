// The C side's door to Highway's vqsort (Debian libhwy-dev), the vectorized
// sort base/sort.c builds on: ascending, in place, not stable (sort.c makes
// every use stable). Built as the module libtessera-vqsort.so, which
// base/sort.c loads when a sort first runs. One hwy::Sorter per thread keeps
// its buffers. False when the sorter could not be made (out of memory).
#include <hwy/contrib/sort/vqsort.h>

#include <cstddef>
#include <cstdint>
#include <new>

#include "base/vqsort.h"

namespace {

template <typename T>
bool sort_ascending(T *keys, size_t n) {
  try {
    thread_local hwy::Sorter sorter;
    sorter(keys, n, hwy::SortAscending());
    return true;
  } catch (const std::bad_alloc &) {
    return false;
  }
}

}  // namespace

extern "C" bool tsr_vqsort_f32(float *keys, size_t n) { return sort_ascending(keys, n); }
extern "C" bool tsr_vqsort_i32(int32_t *keys, size_t n) { return sort_ascending(keys, n); }
extern "C" bool tsr_vqsort_u32(uint32_t *keys, size_t n) { return sort_ascending(keys, n); }
extern "C" bool tsr_vqsort_i16(int16_t *keys, size_t n) { return sort_ascending(keys, n); }
extern "C" bool tsr_vqsort_u16(uint16_t *keys, size_t n) { return sort_ascending(keys, n); }
extern "C" bool tsr_vqsort_u64(uint64_t *keys, size_t n) { return sort_ascending(keys, n); }
