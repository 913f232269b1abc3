/* tessera runtime: the driver above the IR and the interpreter. It loads and
 * verifies kernels, makes input data, and runs kernels on a backend. (The
 * content-hashed cache and compiled backends plug in here in later issues.) */
#ifndef TESSERA_RUNTIME_H
#define TESSERA_RUNTIME_H

#include "tessera/base.h"
#include "tessera/interp.h"
#include "tessera/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Parses and verifies a .tsr file. Diagnostics (TSR_IO_ERROR,
 * TSR_PARSE_ERROR, TSR_VERIFY_ERROR) carry file:line:col. */
TSR_API tsr_status_t tsr_runtime_load_file(const char *path,
                                   tsr_ir_module_t **out_module) TSR_MUST_USE;

/* Picks the kernel named `name` (without '@'), or the only kernel when name is
 * NULL. TSR_NOT_FOUND lists the kernels there are; TSR_INVALID_ARGUMENT when
 * name is NULL and the module has several. */
TSR_API tsr_status_t tsr_runtime_select_kernel(const tsr_ir_module_t *module,
                                       const char *name,
                                       tsr_ir_kernel_t **out_kernel) TSR_MUST_USE;

/* A deterministic pseudo-random array for operand `info` from `seed`:
 * floats uniform in [-1, 1) (rounded to the dtype), signed integers in
 * [-100, 100], unsigned in [0, 200], i1 fair coin. Scalar-prefetch operands
 * get values in [0, 8) since they usually index blocks. */
TSR_API tsr_status_t tsr_runtime_random_array(const tsr_ir_operand_info_t *info,
                                      uint64_t seed,
                                      tsr_array_t *out_array) TSR_MUST_USE;

#ifdef __cplusplus
}
#endif
#endif /* TESSERA_RUNTIME_H */
