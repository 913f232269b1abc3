/* What every benchmark program needs: a monotonic clock, the best of
 * repeated timings and an exit on error. Define BENCH_NAME (the program's
 * name, for messages) before including it. */
#ifndef TESSERA_BENCH_UTIL_H
#define TESSERA_BENCH_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "tessera/tessera.h"

static inline double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Prints "BENCH_NAME: what: CODE: message" and exits when status is set. */
static inline void die_on_error(tsr_status_t status, const char *what) {
  if (!status) return;
  fprintf(stderr, "%s: %s: %s: %s\n", BENCH_NAME, what,
          tsr_status_code_name(tsr_status_code(status)), tsr_status_message(status));
  tsr_status_free(status);
  exit(1);
}

/* Best of `reps` timings of `iters` calls of fn(ctx), in seconds per call. */
static inline double best_per_call(void (*fn)(void *), void *ctx, long iters, int reps) {
  double best = 1e30;
  for (int r = 0; r < reps; r++) {
    double t0 = now_seconds();
    for (long i = 0; i < iters; i++) fn(ctx);
    double t = (now_seconds() - t0) / (double)iters;
    if (t < best) best = t;
  }
  return best;
}

#endif /* TESSERA_BENCH_UTIL_H */
