/* tessera: TPU kernels in the Pallas model, interpreted and checked on a CPU.
 *
 * The public headers. tessera/api.h is the API a caller calls; two headers
 * sit beside it and the others are the layers below it (a header includes
 * only headers listed after it here, but runtime.h includes api.h):
 * - tessera/api.h: contexts, executables (tsr_executable_create and
 *   tsr_executable_run: the one way to run a kernel, on every backend),
 *   run results and diagnostics, the Mosaic TPU emitter, the ABI version.
 * - beside it, tessera/runtime.h: helpers on its types: loading .tsr
 *   files, picking a kernel, random inputs, an executable's cache key, the
 *   cpu backend's lowered text (what the command line uses); and
 *   tessera/kernels.h: the kernel library, generating modules to run.
 * - below it, tessera/interp.h: what a run does and counted
 *   (tsr_interp_options_t, the executable options' `run`;
 *   tsr_interp_stats_t); tessera/cache.h: the disk cache as a store;
 *   tessera/ir.h: kernels: parse, build, verify, print, inspect;
 *   tessera/base.h: statuses, arrays, dtypes, allocators.
 *
 * Conventions of the whole public API (the one ownership rule; function
 * comments name only exceptions):
 * - Fallible functions return tsr_status_t: NULL on success, else an owned
 *   status the caller frees with tsr_status_free. Out-parameters (out_*) are
 *   written only on success (exception: tsr_executable_run's result).
 * - Heap objects come from `create` (or `parse`, `open`) and the caller
 *   frees each with its `destroy` (`close` for the disk cache);
 *   initialize/deinitialize work on caller storage.
 * - Everything passed in is copied or only read during the call: strings
 *   (also the builder's names, texts and loc.file), arrays of parameters,
 *   options. Exceptions say so: tsr_cache_key_make borrows its bytes, a
 *   tsr_executable_t holds a reference to its tsr_context_t (either may be
 *   destroyed first), an executable run reads and writes the operands'
 *   data during the call.
 * - A `destroy` never frees an object under a call in progress on it where
 *   the object's header allows that call to overlap (tsr_executable_destroy
 *   during runs): the object goes when the call ends.
 * - What comes out is borrowed from the object that returned it and valid
 *   as long as that object ("get" functions, names, messages, diagnostic
 *   records), unless it comes through an out-parameter such as
 *   char **out_text or void **out_bytes: then the caller owns it and frees
 *   it with tsr_free_buffer (tsr_ir_string_free, tsr_runtime_text_free and
 *   tsr_disk_cache_free are older names of the same thing).
 * - Strings out of the library are NUL-terminated; strings into it are
 *   NUL-terminated `const char *` unless the parameter is a
 *   tsr_string_view_t (pointer + length).
 * - Objects are not thread-safe unless their header says so.
 * - Configuration: a function given a tsr_context_t reads no environment
 *   variable; the few without one that need configuration
 *   (tsr_disk_cache_open's defaults, the lowering library of
 *   tsr_runtime_lower_text, the code target of a cpu key) read the
 *   environment as tsr_context_create_from_environment does
 *   (tessera/api.h). */
#ifndef TESSERA_TESSERA_H
#define TESSERA_TESSERA_H

#include "tessera/api.h"
#include "tessera/base.h"
#include "tessera/cache.h"
#include "tessera/interp.h"
#include "tessera/ir.h"
#include "tessera/kernels.h"
#include "tessera/runtime.h"

#endif /* TESSERA_TESSERA_H */
