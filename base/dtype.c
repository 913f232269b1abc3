/* Element-type tables generated from tessera/dtypes.def, the 16-bit float
 * conversions and host arrays. */
#include <stdio.h>

#include "base/base_internal.h"

static const struct {
  const char *name;
  size_t size;
  uint32_t bits;
  tsr_dtype_class_t cls;
} dtype_info[] = {
#define TSR_DTYPE(E, n, st, ct, bytes, bits, cls) {#n, bytes, bits, TSR_CLASS_##cls},
#include "tessera/dtypes.def"
#undef TSR_DTYPE
};
_Static_assert(TSR_ARRAY_SIZE(dtype_info) == TSR_DTYPE_COUNT,
               "one entry per dtype");

const char *tsr_dtype_name(tsr_dtype_t dtype) {
  return (unsigned)dtype < TSR_DTYPE_COUNT ? dtype_info[dtype].name : "?";
}
size_t tsr_dtype_size(tsr_dtype_t dtype) { return dtype_info[dtype].size; }
uint32_t tsr_dtype_bits(tsr_dtype_t dtype) { return dtype_info[dtype].bits; }
tsr_dtype_class_t tsr_dtype_class(tsr_dtype_t dtype) {
  return dtype_info[dtype].cls;
}

bool tsr_dtype_from_name(const char *name, size_t len, tsr_dtype_t *out_dtype) {
  for (int i = 0; i < TSR_DTYPE_COUNT; i++) {
    if (strlen(dtype_info[i].name) == len &&
        memcmp(dtype_info[i].name, name, len) == 0) {
      *out_dtype = (tsr_dtype_t)i;
      return true;
    }
  }
  return false;
}

/* ---- Arrays ---- */

int64_t tsr_array_element_count(const tsr_array_t *array) {
  return tsr_dims_count(array->rank, array->dims);
}

size_t tsr_array_byte_size(const tsr_array_t *array) {
  return (size_t)tsr_array_element_count(array) * tsr_dtype_size(array->dtype);
}

/* "f32[4, 8]" (or "f32" for rank 0), for messages. */
static void format_array_type(char *buf, size_t size, tsr_dtype_t dtype, uint32_t rank,
                              const int64_t *dims) {
  int n = snprintf(buf, size, "%s", tsr_dtype_name(dtype));
  for (uint32_t i = 0; i < rank && n > 0 && (size_t)n < size; i++)
    n += snprintf(buf + n, size - (size_t)n, "%s%lld%s", i ? ", " : "[",
                  (long long)dims[i], i + 1 == rank ? "]" : "");
}

tsr_status_t tsr_array_shape_bytes(tsr_dtype_t dtype, uint32_t rank,
                                   const int64_t *dims, size_t *out_bytes) {
  if ((unsigned)dtype >= TSR_DTYPE_COUNT)
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "bad dtype %d", (int)dtype);
  if (rank > TSR_MAX_RANK)
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "rank %u exceeds the maximum %d",
                      rank, TSR_MAX_RANK);
  size_t bytes = tsr_dtype_size(dtype);
  for (uint32_t i = 0; i < rank; i++) {
    if (dims[i] < 0)
      return TSR_STATUS(TSR_INVALID_ARGUMENT, "negative dimension %lld",
                        (long long)dims[i]);
    if (!tsr_mul_size(bytes, (size_t)dims[i], &bytes)) {
      char type[160];
      format_array_type(type, sizeof type, dtype, rank, dims);
      return TSR_STATUS(TSR_OUT_OF_MEMORY,
                        "an array of %s is too large: its size in bytes overflows", type);
    }
  }
  *out_bytes = bytes;
  return NULL;
}

tsr_status_t tsr_array_initialize(tsr_dtype_t dtype, uint32_t rank,
                                  const int64_t *dims, tsr_array_t *out_array) {
  size_t bytes;
  TSR_RETURN_IF_ERROR(tsr_array_shape_bytes(dtype, rank, dims, &bytes));
  void *data = tsr_aligned_alloc(64, bytes);
  if (!data) {
    char type[160];
    format_array_type(type, sizeof type, dtype, rank, dims);
    return TSR_OOM_BYTES(bytes, "an array of %s", type);
  }
  memset(data, 0, bytes);
  memset(out_array, 0, sizeof *out_array);
  out_array->dtype = dtype;
  out_array->rank = rank;
  for (uint32_t i = 0; i < rank; i++) out_array->dims[i] = dims[i];
  out_array->data = data;
  return NULL;
}

void tsr_array_deinitialize(tsr_array_t *array) {
  if (!array) return;
  tsr_free(array->data);
  array->data = NULL;
}
