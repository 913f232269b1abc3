/* What every benchmark program needs: a monotonic clock, the best of
 * repeated timings and an exit on error. Define BENCH_NAME (the program's
 * name, for messages) before including it. */
#ifndef TESSERA_BENCH_UTIL_H
#define TESSERA_BENCH_UTIL_H

#include <stdint.h>
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

/* n bytes aligned to 64 (a cache line); exits when out of memory. */
static inline void *bench_alloc(size_t n) {
  void *p = aligned_alloc(64, (n + 63) / 64 * 64);
  if (!p) {
    perror(BENCH_NAME ": aligned_alloc");
    exit(1);
  }
  return p;
}

/* n pseudo-random floats in [-1, 1) from `seed` (xorshift32): the same
 * data in every run and every benchmark. */
static inline void bench_fill(float *p, size_t n, unsigned seed) {
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; i++) {
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    p[i] = (float)(x >> 8) / (float)(1 << 24) * 2.0f - 1.0f;
  }
}

#endif /* TESSERA_BENCH_UTIL_H */
