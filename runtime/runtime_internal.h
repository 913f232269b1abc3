/* What the runtime's files share. Library-internal. */
#ifndef TESSERA_RUNTIME_INTERNAL_H
#define TESSERA_RUNTIME_INTERNAL_H

#include "base/base_internal.h"
#include "tessera/runtime.h"

/* "tessera VERSION canon N ops HASH build ID": the producer component of
 * every key (runtime/key.c). Computed once per process. */
const char *tsr_runtime_producer(void);

#endif /* TESSERA_RUNTIME_INTERNAL_H */
