/* Bounds on a run (interp/bounds.h): step grants, the timeout and the
 * cancel flag, for the interpreter and the cpu runtime alike. */
#include "interp/bounds.h"

#include <stdio.h>
#include <time.h>

/* Grants start at one step and double while the caller comes back within a
 * millisecond, up to this; they halve when it takes over 10 ms. */
#define MAX_CHUNK (1u << 20)

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void tsr_bounds_start(tsr_bounds_t *b, const tsr_interp_options_t *options) {
  b->max_steps = options->max_steps;
  b->timeout = options->timeout_seconds > 0 ? options->timeout_seconds : 0;
  b->cancel = options->cancel;
  b->start = now_seconds();
  b->granted = 0;
  b->hit = TSR_BOUND_NONE;
  b->now = b->start;
  b->progress = options->on_progress;
  b->progress_user = options->on_progress_user;
  b->progress_interval = options->progress_interval > 0 ? options->progress_interval : 0;
  b->progress_next = b->start + b->progress_interval;
  b->progress_total = 0; /* the caller sets it once it knows the grid */
  b->reported = 0;
}

void tsr_bounds_report_progress(tsr_bounds_t *b, uint64_t done) {
  if (!b->progress) return;
  if (done > b->progress_total) done = b->progress_total;
  if (done < b->reported) return;
  b->reported = done;
  b->progress(b->progress_user, done, b->progress_total);
}

uint64_t tsr_bounds_grant(tsr_bounds_t *b, tsr_step_meter_t *m, uint32_t sharers) {
  if (b->hit != TSR_BOUND_NONE) return 0;
  if (b->cancel && __atomic_load_n(b->cancel, __ATOMIC_RELAXED)) {
    b->hit = TSR_BOUND_CANCEL;
    return 0;
  }
  double now = now_seconds();
  if (b->timeout > 0 && now - b->start >= b->timeout) {
    b->hit = TSR_BOUND_TIME;
    return 0;
  }
  if (m->chunk == 0)
    m->chunk = 1;
  else if (now - m->last < 1e-3 && m->chunk < MAX_CHUNK)
    m->chunk *= 2;
  else if (now - m->last > 1e-2 && m->chunk > 1)
    m->chunk /= 2;
  m->last = now;
  b->now = now;
  uint64_t g = m->chunk;
  if (b->max_steps) {
    uint64_t left = b->max_steps - b->granted;
    if (left == 0) {
      b->hit = TSR_BOUND_STEPS;
      return 0;
    }
    uint64_t share = left / (sharers ? sharers : 1);
    if (share == 0) share = 1;
    if (g > share) g = share;
  }
  b->granted += g;
  return g;
}

void tsr_bounds_describe(const tsr_bounds_t *b, char *buf, size_t size) {
  switch (b->hit) {
    case TSR_BOUND_STEPS:
      snprintf(buf, size, "run stopped after %llu step%s (--max-steps %llu)",
               (unsigned long long)b->max_steps, b->max_steps == 1 ? "" : "s",
               (unsigned long long)b->max_steps);
      return;
    case TSR_BOUND_TIME:
      snprintf(buf, size, "run stopped: timeout of %g s reached (--timeout %g)", b->timeout,
               b->timeout);
      return;
    case TSR_BOUND_CANCEL: snprintf(buf, size, "run stopped: cancelled"); return;
    case TSR_BOUND_NONE: break;
  }
  snprintf(buf, size, "run stopped");
}
