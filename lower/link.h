/* The in-process linker of the lowering library (docs/lowering.md, "From
 * object to shared object"): the relocatable object LLVM emits for a kernel
 * -> the bytes of a shared object, without running `cc`. Library-internal. */
#ifndef TESSERA_LOWER_LINK_H
#define TESSERA_LOWER_LINK_H

#include "base/base_internal.h"

/* Links the x86-64 ELF relocatable `object` into a shared object exporting
 * its global definitions, as `cc -shared -nostartfiles -nostdlib ...
 * -Wl,--as-needed -l:libm.so.6` would for what LLVM emits: sections placed
 * in three segments (read-only, code, writable), calls to undefined functions
 * through stubs and a GOT bound eagerly at load time, DT_NEEDED libm.so.6
 * when the object calls into libm, .eh_frame with its .eh_frame_hdr.
 *
 * Objects it does not handle (another machine, a relocation or section kind
 * not listed in link.c, a symbol neither libc nor libm defines, such as a
 * libgcc helper) are not an error: *out_bytes stays NULL and `why` (of
 * `why_size` bytes) says why, and the caller links with `cc`. On success
 * *out_bytes is freed with tsr_free. A status only for out of memory. */
tsr_status_t tsr_lower_link_shared(const void *object, size_t size, void **out_bytes,
                                   size_t *out_size, char *why, size_t why_size) TSR_MUST_USE;

#endif /* TESSERA_LOWER_LINK_H */
