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

#include <stdbool.h>
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
  double now;         /* when the last grant read the clock */
  /* Progress (tsr_interp_options_t's on_progress): due at progress_next
   * (read and advanced by the grants' caller, under its lock); `reported`
   * is the last `done` given, under whatever serializes the calls. */
  tsr_progress_fn progress;
  void *progress_user;
  double progress_interval, progress_next;
  uint64_t progress_total, reported;
} tsr_bounds_t;

/* One caller's grant size, adapted to how fast it takes steps. */
typedef struct tsr_step_meter {
  uint64_t chunk;
  double last; /* when it last asked */
} tsr_step_meter_t;

void tsr_bounds_start(tsr_bounds_t *b, const tsr_interp_options_t *options);
/* After a grant (>= 1 steps): whether a progress call is due now; if so,
 * the next one is due progress_interval later. False without a progress
 * callback: the runs without one pay one test per grant. */
static inline bool tsr_bounds_progress_due(tsr_bounds_t *b) {
  if (!b->progress || b->now < b->progress_next) return false;
  b->progress_next = b->now + b->progress_interval;
  return true;
}
/* Calls the progress callback with `done` of progress_total steps, unless
 * that would go back (a core that computed its count before another's
 * call reached here later). The caller serializes these calls. */
void tsr_bounds_report_progress(tsr_bounds_t *b, uint64_t done);
/* Steps the caller may take now, this one included (>= 1), or 0 when a
 * bound is reached (b->hit says which; every later call returns 0).
 * `sharers`: how many callers draw on max_steps at once. */
uint64_t tsr_bounds_grant(tsr_bounds_t *b, tsr_step_meter_t *m, uint32_t sharers);
/* The reason a run stopped, for its kernel error: "run stopped after 1000
 * steps (--max-steps 1000)", "run stopped: timeout of 2 s reached
 * (--timeout 2)", "run stopped: cancelled". */
void tsr_bounds_describe(const tsr_bounds_t *b, char *buf, size_t size);

#endif /* TESSERA_INTERP_BOUNDS_H */
