/* Bounds on a run, shared by both backends (docs/semantics.md, "Bounded
 * runs"): a limit on steps (grid steps and loop iterations, counted over all
 * cores), a wall-clock timeout and a cancel flag. Callers take steps in
 * grants: tsr_bounds_grant hands out a number of steps to take before asking
 * again, reading the clock and the cancel flag only then; grants shrink as
 * the step limit nears, so a run of one core stops at exactly max_steps, and
 * adapt to the callers' speed, so the clock is read about every millisecond
 * whether steps take nanoseconds or seconds. Not thread-safe: the callers
 * serialize (the interpreter is one thread; the cpu runtime holds its
 * mutex). */
#ifndef TESSERA_INTERP_BOUNDS_H
#define TESSERA_INTERP_BOUNDS_H

#include <stddef.h>
#include <stdint.h>

#include "tessera/interp.h"

typedef enum tsr_bound {
  TSR_BOUND_NONE,
  TSR_BOUND_STEPS,  /* max_steps taken */
  TSR_BOUND_TIME,   /* timeout_seconds passed */
  TSR_BOUND_CANCEL, /* *cancel set */
} tsr_bound_t;

typedef struct tsr_bounds {
  uint64_t max_steps; /* 0: none */
  double timeout;     /* seconds; 0: none */
  const volatile int *cancel;
  double start;       /* monotonic seconds */
  uint64_t granted;   /* steps handed out */
  tsr_bound_t hit;    /* the bound that stopped the run */
} tsr_bounds_t;

/* One caller's grant size, adapted to how fast it takes steps. */
typedef struct tsr_step_meter {
  uint64_t chunk;
  double last; /* when it last asked */
} tsr_step_meter_t;

void tsr_bounds_start(tsr_bounds_t *b, const tsr_interp_options_t *options);
/* Steps the caller may take now, this one included (>= 1), or 0 when a
 * bound is reached (b->hit says which; every later call returns 0).
 * `sharers`: how many callers draw on max_steps at once. */
uint64_t tsr_bounds_grant(tsr_bounds_t *b, tsr_step_meter_t *m, uint32_t sharers);
/* The reason a run stopped, for its kernel error: "run stopped after 1000
 * steps (--max-steps 1000)", "run stopped: timeout of 2 s reached
 * (--timeout 2)", "run stopped: cancelled". */
void tsr_bounds_describe(const tsr_bounds_t *b, char *buf, size_t size);

#endif /* TESSERA_INTERP_BOUNDS_H */
