/* Highway's vqsort for C (base/vqsort.cc): ascending, in place, not stable.
 * False when the sorter's buffers could not be allocated. The module
 * libtessera-vqsort.so exports these; base/sort.c looks them up with dlsym
 * when a sort first runs. Not a public header. */
#ifndef TESSERA_BASE_VQSORT_H
#define TESSERA_BASE_VQSORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
bool tsr_vqsort_f32(float *keys, size_t n);
bool tsr_vqsort_i32(int32_t *keys, size_t n);
bool tsr_vqsort_u32(uint32_t *keys, size_t n);
bool tsr_vqsort_i16(int16_t *keys, size_t n);
bool tsr_vqsort_u16(uint16_t *keys, size_t n);
bool tsr_vqsort_u64(uint64_t *keys, size_t n);
#ifdef __cplusplus
}
#endif
#endif /* TESSERA_BASE_VQSORT_H */
