/* The process's disk cache: one handle for the compiled backends (the cpu
 * backend's shared objects), opened on first use unless
 * TESSERA_CACHE=off. A handle that cannot be opened is reported once; after
 * a failed read or write (the handle has already warned of its first disk
 * error) the process stops using the disk. Never an error for a run.
 * A thread may use a context's caches and allocator instead (tsr_runtime_bind). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

#include "runtime/runtime_internal.h"

static struct {
  pthread_once_t once;
  tsr_disk_cache_t *handle; /* NULL when off or unusable */
  atomic_bool off;          /* set after the first failure */
} g = {.once = PTHREAD_ONCE_INIT};

static void open_disk(void) {
  if (tsr_disk_cache_disabled_by_env()) {
    atomic_store(&g.off, true);
    return;
  }
  tsr_disk_cache_options_t options;
  tsr_disk_cache_options_initialize(&options);
  tsr_status_t s = tsr_disk_cache_open(&options, &g.handle);
  if (s) {
    g.handle = NULL;
    atomic_store(&g.off, true);
    fprintf(stderr, "tessera: cache: cannot open the disk cache, going on without "
                    "it: %s\n", tsr_status_message(s));
    tsr_status_free(s);
  }
}

/* The context this thread works for now, if any. */
static _Thread_local tsr_runtime_binding_t *bound;

tsr_runtime_binding_t *tsr_runtime_bind(tsr_runtime_binding_t *binding) {
  tsr_runtime_binding_t *previous = bound;
  bound = binding;
  tsr_allocator_bind(binding ? &binding->allocator : NULL);
  return previous;
}

tsr_runtime_binding_t *tsr_runtime_bound(void) { return bound; }

tsr_disk_cache_t *tsr_runtime_disk(void) {
  if (bound) return atomic_load(&bound->off) ? NULL : bound->handle;
  tsr_process_once(&g.once, open_disk);
  return atomic_load(&g.off) ? NULL : g.handle;
}

void tsr_runtime_disk_use(tsr_runtime_disk_use_t *out) {
  /* Does not open the cache: asking for counters is not a use of it. */
  tsr_runtime_disk_use_of(g.handle, g.handle && !atomic_load(&g.off), out);
}

void tsr_runtime_disk_use_of(tsr_disk_cache_t *handle, bool enabled,
                             tsr_runtime_disk_use_t *out) {
  memset(out, 0, sizeof *out);
  out->enabled = enabled;
  if (!handle) return;
  tsr_disk_cache_stats_t d;
  tsr_disk_cache_stats(handle, &d);
  out->hits = d.hits;
  out->misses = d.misses;
  out->puts = d.puts;
  out->bad_entries = d.bad_entries;
  out->errors = d.errors;
}

void tsr_runtime_disk_failed(tsr_status_t status) {
  atomic_store(bound ? &bound->off : &g.off, true);
  tsr_status_free(status);
}
