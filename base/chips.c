/* The TPU chips tessera knows: one table for the interpreter's memory
 * budgets (interp/prepare.c) and the Mosaic emitter (tpu/). */
#include <string.h>

#include "base/base_internal.h"

/* vmem/smem: per core (tpu_info). scoped_vmem: what libtpu 0.0.50 gives a
 * kernel whose call sets no vmem_limit_bytes, measured by compiling copy
 * kernels of growing windows (docs/tpu.md, "VMEM"): v5e 16 MiB, v6e and v7x
 * 32 MiB; v2, v3, v4 and v5p are not measured and take 16 MiB (tpu8i's
 * is not used: the emitter does not target it). cores: the
 * TensorCores of one device that Mosaic splits a core_parallel grid
 * dimension over, as libtpu reports them for a one-chip topology
 * ("Core-parallel dimension 0 has iteration bound: 2, which is greater than
 * the number of active cores: 1" on every chip but v5p). mosaic: the TPU
 * emitter targets it (tpu8i has no libtpu topology to prove modules on). */
static const tsr_chip_t chips[] = {
    {"v2", "", 16ll << 20, 16ll << 10, 16ll << 20, 1, true},
    {"v3", "", 16ll << 20, 16ll << 10, 16ll << 20, 1, true},
    {"v4", "", 16ll << 20, 1ll << 20, 16ll << 20, 1, true},
    {"v5e", "", 128ll << 20, 1ll << 20, 16ll << 20, 1, true},
    {"v5p", "", 64ll << 20, 1ll << 20, 16ll << 20, 2, true},
    {"v6e", "", 128ll << 20, 1ll << 20, 32ll << 20, 1, true},
    {"v7x", "v7 tpu7x", 64ll << 20, 1ll << 20, 32ll << 20, 1, true},
    {"tpu8i", "", 192ll << 20, 1ll << 20, 32ll << 20, 1, false},
};

static bool has_alias(const char *aliases, const char *name) {
  size_t n = strlen(name);
  for (const char *p = aliases; *p;) {
    size_t len = strcspn(p, " ");
    if (len == n && memcmp(p, name, n) == 0) return true;
    p += len;
    p += *p == ' ';
  }
  return false;
}

const tsr_chip_t *tsr_chip_find(const char *name) {
  if (!name) return NULL;
  for (size_t i = 0; i < TSR_ARRAY_SIZE(chips); i++)
    if (!strcmp(chips[i].name, name) || has_alias(chips[i].aliases, name)) return &chips[i];
  return NULL;
}

const char *tsr_chip_names(bool mosaic_only) {
  return mosaic_only ? "v2, v3, v4, v5e, v5p, v6e, v7x (v7, tpu7x)"
                     : "v2, v3, v4, v5e, v5p, v6e, v7x (v7, tpu7x), tpu8i";
}

bool tsr_chip_doubles_tile_rows(const char *chip) {
  const char *c = chip ? chip : "v5e";
  return strcmp(c, "v2") == 0 || strcmp(c, "v3") == 0;
}

void tsr_padded_dims(bool double_rows, tsr_dtype_t dtype, uint32_t rank, const int64_t *dims,
                     int64_t *out) {
  for (uint32_t d = 0; d < rank; d++) out[d] = dims[d];
  if (rank == 0) return;
  int64_t gens = double_rows ? 2 : 1;
  /* elements per 32-bit word: 4-bit types pack 8 */
  int64_t packing = tsr_dtype_bits(dtype) == 4 ? 8 : 4 / (int64_t)tsr_dtype_size(dtype);
  if (packing < 1) packing = 1;
  int64_t tile[TSR_MAX_RANK];
  for (uint32_t d = 0; d < rank; d++) tile[d] = 1;
  if (rank == 1) {
    tile[0] = gens * packing * 128;
  } else {
    int64_t rows = gens * packing, want = TSR_MIN(dims[rank - 2], (int64_t)8);
    while (rows < want) rows *= 2;
    tile[rank - 2] = rows;
    tile[rank - 1] = 128;
  }
  for (uint32_t d = 0; d < rank; d++)
    out[d] = dims[d] <= 0 ? dims[d] : (dims[d] + tile[d] - 1) / tile[d] * tile[d];
}
