/* Prepared programs through an in-memory cache (docs/cache.md): a
 * tsr_memcache_t (the process's, or that of the context bound to the
 * thread: each context has its own) maps a kernel's key to its prepared
 * program; callers get the program bound to their own kernel
 * (tsr_interp_program_bind), which holds a reference to the cache entry.
 *
 * Nothing goes to disk: a program holds code pointers and is cheaper to
 * prepare again than to serialize, and the verifier costs less than looking
 * a verdict up on disk would (docs/benchmarks.md, "Cache"), so every
 * process verifies every kernel it prepares. */
#include <pthread.h>
#include <stdio.h>

#include "cache/memcache.h"
#include "interp/interp_runtime.h"
#include "runtime/runtime_internal.h"

static struct {
  pthread_once_t once;
  tsr_memcache_t *memory; /* NULL if it could not be created */
} g = {.once = PTHREAD_ONCE_INIT};

tsr_status_t tsr_runtime_programs_create(tsr_memcache_t **out_cache) {
  tsr_memcache_options_t mo;
  tsr_memcache_options_initialize(&mo);
  return tsr_memcache_create(&mo, out_cache);
}

static void initialize(void) {
  tsr_status_t s = tsr_runtime_programs_create(&g.memory);
  if (s) {
    g.memory = NULL;
    tsr_status_free(s);
  }
}

/* The cache of the context bound to this thread, else the process's. */
static tsr_memcache_t *programs(void) {
  tsr_runtime_binding_t *b = tsr_runtime_bound();
  if (b && b->programs) return b->programs;
  tsr_process_once(&g.once, initialize);
  return g.memory;
}

typedef struct build {
  const tsr_ir_kernel_t *kernel;
  const tsr_interp_options_t *options;
  const tsr_cache_key_t *key;
} build_t;

/* Verifies and prepares. */
static tsr_status_t build_program(void *ctx, void **out_value, size_t *out_bytes) {
  build_t *b = ctx;
  TSR_RETURN_IF_ERROR(tsr_ir_verify_kernel(b->kernel));
  /* The cached program keeps no trace path or cancel flag: bind supplies
   * them with the caller's other run-time options. */
  tsr_interp_options_t o;
  if (b->options) {
    o = *b->options;
  } else {
    tsr_interp_options_initialize(&o);
  }
  o.trace_path = NULL;
  o.cancel = NULL;
  o.on_grid_step = NULL;
  o.on_grid_step_user = NULL;
  o.on_progress = NULL;
  o.on_progress_user = NULL;
  o.threads = 0;
  tsr_interp_program_t *p = NULL;
  TSR_RETURN_IF_ERROR(tsr_interp_program_prepare(b->kernel, &o, &p));
  *out_value = p;
  *out_bytes = tsr_interp_program_footprint(p);
  return NULL;
}

static void free_program(void *value) { tsr_interp_program_destroy(value); }

static void release_entry(void *entry) { tsr_memcache_entry_release(entry); }

tsr_status_t tsr_runtime_prepare(const tsr_ir_kernel_t *kernel,
                                 const tsr_interp_options_t *options,
                                 tsr_interp_program_t **out_program) {
  if (!kernel || !out_program)
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "tsr_runtime_prepare: NULL argument");
  tsr_memcache_t *memory = programs();
  if (!memory) return TSR_OOM();
  tsr_runtime_key_t *key = NULL;
  TSR_RETURN_IF_ERROR(tsr_runtime_interp_key_create(kernel, options, &key));
  build_t b = {kernel, options, tsr_runtime_key_get(key)};
  tsr_memcache_entry_t *entry = NULL;
  tsr_status_t s = tsr_memcache_get_or_build(memory, b.key, build_program, &b,
                                             free_program, &entry, NULL);
  tsr_runtime_key_destroy(key);
  if (s) return s;
  s = tsr_interp_program_bind(tsr_memcache_entry_value(entry), kernel, options,
                              release_entry, entry, out_program);
  if (s) tsr_memcache_entry_release(entry);
  return s;
}

void tsr_runtime_programs_stats(tsr_memcache_t *memory, tsr_runtime_cache_stats_t *out) {
  memset(out, 0, sizeof *out);
  if (!memory) return;
  tsr_memcache_stats_t m;
  tsr_memcache_stats(memory, &m);
  out->memory_hits = m.hits;
  out->memory_misses = m.misses;
  out->memory_builds = m.builds;
  out->memory_waits = m.waits;
  out->memory_evictions = m.evictions;
  out->memory_entries = m.entries;
  out->memory_bytes = m.bytes;
}

void tsr_runtime_cache_stats(tsr_runtime_cache_stats_t *out) {
  tsr_process_once(&g.once, initialize);
  tsr_runtime_programs_stats(g.memory, out);
}

void tsr_runtime_cache_clear(void) {
  tsr_process_once(&g.once, initialize);
  if (g.memory) tsr_memcache_clear(g.memory);
}
