/* tessera: TPU kernels in the Pallas model, interpreted and checked on a CPU.
 *
 * Conventions of the whole public API:
 * - Fallible functions return tsr_status_t: NULL on success, else an owned
 *   status the caller frees with tsr_status_free. Out-parameters (out_*) are
 *   written only on success.
 * - create/destroy pair heap objects the caller owns; initialize/deinitialize
 *   work on caller storage; `get`/borrowed pointers stay valid as long as
 *   their owner; strings passed in are copied unless a comment says otherwise.
 * - Objects are not thread-safe unless their header says so. */
#ifndef TESSERA_TESSERA_H
#define TESSERA_TESSERA_H

#include "tessera/api.h"
#include "tessera/base.h"
#include "tessera/cache.h"
#include "tessera/interp.h"
#include "tessera/ir.h"
#include "tessera/runtime.h"

#endif /* TESSERA_TESSERA_H */
