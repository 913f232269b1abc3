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
 * from the kernel's runs (docs/semantics.md, "Host threads"): waking the
 * pool's threads costs tens of microseconds, more than a small run takes
 * on one thread, and how much more is the host's business. A kernel keeps
 * one of these (zeroed: nothing known), updated by its runs from any
 * thread. */
typedef struct tsr_split_cost {
  _Atomic(uint64_t) split_ns;  /* wall time per split point, split */
  _Atomic(uint64_t) serial_ns; /* the same on one thread */
  _Atomic(uint32_t) split_samples, serial_samples; /* runs measured */
  _Atomic(uint32_t) runs;      /* decisions taken once both are known */
} tsr_split_cost_t;

/* Whether a run of the kernel should use several threads. Its first runs
 * measure both ways, twice each, alternating (the first of each is often
 * a cold run: pages, caches); from then on a run does what was faster per
 * point, and one run in 32 (in 8 when the two are within 1.5x) does the
 * other, to follow a change (another load, another grid).
 * $TESSERA_SPLIT=always: every run that may split does (the tests comparing
 * thread counts). Only runs that ask are to be timed for it. Results never
 * depend on it: only the time does. */
bool tsr_split_pays(tsr_split_cost_t *cost);

/* Notes a run of `points` split points that took `elapsed_ns` on `threads`
 * threads (1: not split). */
void tsr_split_learn(tsr_split_cost_t *cost, uint64_t elapsed_ns, uint64_t points,
                     uint32_t threads);

/* A monotonic clock in nanoseconds. */
uint64_t tsr_split_clock_ns(void);

/* fn(ctx, i) for i in [0, n): i = 0 on the caller's thread, the others on
 * the pool's, each in the caller's floating-point environment; returns when
 * all have returned. */
void tsr_pool_run(uint32_t n, void (*fn)(void *ctx, uint32_t index), void *ctx);

#endif /* TESSERA_BASE_POOL_H */
