/* Host threads (docs/semantics.md, "Host threads"): how many a caller may
 * use, and one pool of them per linked copy of base/ (libtessera's runs,
 * the lowering library's parallel code generation), made lazily and kept. */
#ifndef TESSERA_BASE_POOL_H
#define TESSERA_BASE_POOL_H

#include <stdbool.h>
#include <stdint.h>

/* The thread count for the option value `requested`: itself when nonzero,
 * else $TESSERA_THREADS when set, else the cores sched_getaffinity allows
 * (taskset is honoured). */
uint32_t tsr_host_threads(uint32_t requested);

/* Whether a run's split points are worth several host threads, learned
 * from the kernel's runs before (docs/semantics.md, "Host threads"): waking
 * the pool's threads costs tens of microseconds, more than a small run
 * takes on one thread. A kernel keeps one of these (zeroed: nothing known),
 * updated by its runs from any thread. */
typedef struct tsr_split_cost {
  _Atomic(uint64_t) point_ns; /* wall time per split point on one thread; 0: unknown */
} tsr_split_cost_t;

/* Whether a run of `points` split points should use several threads: when
 * nothing is known yet (the first run), or when they are expected to take
 * at least $TESSERA_SPLIT_MIN_US microseconds on one thread (default 200;
 * 0: always). Results never depend on it: only the time does. */
bool tsr_split_pays(const tsr_split_cost_t *cost, uint64_t points);

/* Notes a run of `points` split points that took `elapsed_ns` on `threads`
 * threads (its time on one thread is taken as elapsed * threads). */
void tsr_split_learn(tsr_split_cost_t *cost, uint64_t elapsed_ns, uint64_t points,
                     uint32_t threads);

/* A monotonic clock in nanoseconds. */
uint64_t tsr_split_clock_ns(void);

/* fn(ctx, i) for i in [0, n): i = 0 on the caller's thread, the others on
 * the pool's, each in the caller's floating-point environment; returns when
 * all have returned. */
void tsr_pool_run(uint32_t n, void (*fn)(void *ctx, uint32_t index), void *ctx);

#endif /* TESSERA_BASE_POOL_H */
