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
