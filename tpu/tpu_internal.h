/* The Mosaic TPU emitter (docs/tpu.md): what api.c needs of tpu/'s other
 * files. Library-internal. Text only: tpu/ links no MLIR, so libtessera and
 * the interpreter gain no dependency.
 *
 * Layering: api.c (tsr_tpu_emit: verify, check, cache) calls check.c (the
 * layout rules Pallas checks at lowering, the chip table) and emit.c (the
 * module: signature, attributes, transform functions, the op dispatch),
 * whose files and their order are in tpu/emit_internal.h. */
#ifndef TESSERA_TPU_TPU_INTERNAL_H
#define TESSERA_TPU_TPU_INTERNAL_H

#include "base/base_internal.h"
#include "ir/ir.h"

/* Bumped whenever the emitted text changes for the same kernel: part of
 * the cache key (tpu/api.c). */
#define TSR_TPU_EMITTER_VERSION 6

/* ---- Chips ---- */

/* The chips are base/chips.c's (tsr_chip_t); the emitter takes those
 * marked `mosaic`. */
typedef tsr_chip_t tpu_chip_t;

/* VMEM libtpu keeps for itself on every chip measured: "Used 128.00M of
 * 127.94M vmem" (v6e), "64.00M of 63.94M" (v7x). */
#define TPU_VMEM_RESERVED (64ll << 10)

/* Pallas's TPU lowering rules for `kernel`'s block specs (docs/tpu.md,
 * "Layout rules"): every broken rule is one located diagnostic; NULL or
 * TSR_VERIFY_ERROR. The kernel must have verified. */
tsr_status_t tpu_check_kernel(const tsr_kernel_t *kernel, const tpu_chip_t *chip)
    TSR_MUST_USE;
/* The VMEM the kernel keeps live on `chip`, as Mosaic lays it out: each
 * windowed operand double-buffered, scratch, scoped buffers and the
 * buffers that carry the block results of ifs (emit_control.c), every
 * buffer packed (4-bit types two to a byte) and padded to whole memory
 * tiles (check.c, tile_rows); an upper bound (scoped buffers all counted
 * live at once). */
int64_t tpu_vmem_need(const tsr_kernel_t *kernel, const tpu_chip_t *chip);
/* Whether operand `decl` has a trivial window: block = array and an index
 * map yielding constant zeros (or none). */
bool tpu_decl_trivial_window(const tsr_decl_t *decl);

/* ---- The emitter (emit.c over the files of emit_internal.h) ---- */

/* Emits the Mosaic module of a verified, checked kernel; *out_text freed
 * with tsr_free. TSR_UNIMPLEMENTED (located, naming the op) for what has
 * no TPU form yet. */
tsr_status_t tpu_emit_kernel(const tsr_kernel_t *kernel, const tpu_chip_t *chip,
                             char **out_text) TSR_MUST_USE;

#endif /* TESSERA_TPU_TPU_INTERNAL_H */
