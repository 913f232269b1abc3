/* The scheduler of a run's simulated cores: each core runs until it blocks
 * or finishes, round after round, in a fixed or a seeded order; when no core
 * can move, the run is a deadlock and every blocked core is reported. */
#include "interp/interp_internal.h"

/* Starts every core, then runs every core until it blocks or finishes. When
 * no core can move, each blocked core is reported and the run stops. Every
 * core's memory is set up (its first blocks included) before any core runs an
 * op, so a DMA into a device that has not run yet lands in memory that
 * device's start does not overwrite afterwards. */
void tsr_interp_run_all(shared_t *sh) {
  const tsr_interp_program_t *p = sh->p;
  uint32_t n = sh->devices * sh->cores;
  uint32_t order[TSR_INTERP_MAX_CORES];
  for (uint32_t i = 0; i < n; i++) order[i] = i;
  for (uint32_t i = 0; i < n && !sh->aborted; i++) tsr_grid_start_core(&sh->core[i]);
  for (;;) {
    if (p->options.schedule_seed) {
      for (uint32_t i = n - 1; i > 0; i--) {
        uint32_t k = (uint32_t)(tsr_interp_splitmix64(&sh->schedule_state) % (i + 1));
        uint32_t t = order[i];
        order[i] = order[k];
        order[k] = t;
      }
    }
    bool progress = false, all_done = true;
    for (uint32_t i = 0; i < n && !sh->aborted; i++) {
      run_t *core = &sh->core[order[i]];
      if (core->phase == CORE_DONE) continue;
      if (tsr_grid_run_core(core)) progress = true;
      if (core->phase != CORE_DONE) all_done = false;
    }
    if (all_done || sh->aborted) return;
    if (!progress) {
      for (uint32_t i = 0; i < n; i++) {
        run_t *core = &sh->core[i];
        if (core->phase == CORE_DONE) continue;
        tsr_sem_report_blocked(core);
      }
      sh->aborted = true;
      return;
    }
  }
}
