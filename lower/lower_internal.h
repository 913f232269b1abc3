/* What the files of the lowering library (libtessera-lower.so) share:
 * the MLIR text generator (emit.c) and the compiler around it (compile.c).
 * Library-internal, and like everything in lower/ never included by
 * libtessera itself (docs/lowering.md). */
#ifndef TESSERA_LOWER_LOWER_INTERNAL_H
#define TESSERA_LOWER_LOWER_INTERNAL_H

#include "base/base_internal.h"
#include "ir/ir.h"
#include "lower/lower_api.h"

/* Appends `kernel` to `out` as an MLIR module in text form, in upstream
 * dialects only (builtin, func, scf, arith, math, vector, memref), holding a
 * function named TSR_LOWER_KERNEL_FUNC with `attributes
 * {llvm.emit_c_interface}` and the argument convention of lower/lower_api.h
 * (one memref per non-scratch operand, in declaration order). compile.c
 * parses this text with mlirModuleCreateParse; `tessera lower --stage mlir`
 * prints it as it is.
 *
 * The kernel is expected to be verified. TSR_UNIMPLEMENTED names the first op
 * (or kernel feature) that cannot be lowered and its IR location
 * ("file:line:col: error: ..."); `out` may then hold a partial text, which
 * the caller discards. TSR_OUT_OF_MEMORY when `out` failed. Thread-safe for
 * distinct buffers (no global state). `bounds`: lower_api.h's
 * TSR_LOWER_OOB_READS_UNINIT.. flags. */
tsr_status_t tsr_lower_emit_mlir(const tsr_kernel_t *kernel, uint32_t bounds, tsr_strbuf_t *out)
    TSR_MUST_USE;

#endif /* TESSERA_LOWER_LOWER_INTERNAL_H */
