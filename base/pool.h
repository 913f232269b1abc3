/* Host threads (docs/semantics.md, "Host threads"): how many a caller may
 * use, and one pool of them per linked copy of base/ (libtessera's runs,
 * the lowering library's parallel code generation), made lazily and kept. */
#ifndef TESSERA_BASE_POOL_H
#define TESSERA_BASE_POOL_H

#include <stdint.h>

/* The thread count for the option value `requested`: itself when nonzero,
 * else $TESSERA_THREADS when set, else the cores sched_getaffinity allows
 * (taskset is honoured). */
uint32_t tsr_host_threads(uint32_t requested);

/* fn(ctx, i) for i in [0, n): i = 0 on the caller's thread, the others on
 * the pool's, each in the caller's floating-point environment; returns when
 * all have returned. */
void tsr_pool_run(uint32_t n, void (*fn)(void *ctx, uint32_t index), void *ctx);

#endif /* TESSERA_BASE_POOL_H */
