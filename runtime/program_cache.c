/* Prepared programs through the process's caches (docs/cache.md).
 *
 * Memory: one process-wide tsr_memcache_t maps a kernel's key to its prepared
 * program; callers get the program bound to their own kernel
 * (tsr_interp_program_bind), which holds a reference to the cache entry.
 *
 * Disk: the interpreter's programs hold code pointers and are cheaper to
 * prepare again than to serialize, so what it persists is the verifier's
 * verdict: an entry under the key says that a kernel with exactly this
 * material verified with this producer, and a later process skips the
 * verifier. (Compiled backends store their objects under their own keys.)
 * Disk trouble is never an error for the run: the process goes on without
 * the disk cache and says so once. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

#include "cache/memcache.h"
#include "interp/interp_internal.h"
#include "runtime/runtime_internal.h"

/* The payload of an interpreter entry. */
static const char verified_record[] = "tessera interp: verified\n";

static struct {
  pthread_once_t once;
  tsr_memcache_t *memory; /* NULL if it could not be created */
  atomic_uint_fast64_t verifications_skipped;
} g = {.once = PTHREAD_ONCE_INIT};

static void initialize(void) {
  tsr_memcache_options_t mo;
  tsr_memcache_options_initialize(&mo);
  tsr_status_t s = tsr_memcache_create(&mo, &g.memory);
  if (s) {
    g.memory = NULL;
    tsr_status_free(s);
  }
}

typedef struct build {
  const tsr_ir_kernel_t *kernel;
  const tsr_interp_options_t *options;
  const tsr_cache_key_t *key;
} build_t;

/* Verifies (unless the disk says it verified before) and prepares. */
static tsr_status_t build_program(void *ctx, void **out_value, size_t *out_bytes) {
  build_t *b = ctx;
  tsr_disk_cache_t *d = tsr_runtime_disk();
  bool verified = false;
  if (d) {
    void *payload = NULL;
    size_t size = 0;
    tsr_status_t s = tsr_disk_cache_get(d, b->key, &payload, &size);
    if (!s) {
      verified = size == sizeof verified_record - 1 &&
                 memcmp(payload, verified_record, size) == 0;
      tsr_disk_cache_free(payload);
    } else if (tsr_status_code(s) == TSR_NOT_FOUND) {
      tsr_status_free(s);
    } else {
      tsr_runtime_disk_failed(s);
      d = NULL;
    }
  }
  if (verified) {
    atomic_fetch_add(&g.verifications_skipped, 1);
  } else {
    TSR_RETURN_IF_ERROR(tsr_ir_verify_kernel(b->kernel));
  }
  /* The cached program keeps no stream, trace path or cancel flag: bind
   * supplies them with the caller's other run-time options. */
  tsr_interp_options_t o;
  if (b->options) {
    o = *b->options;
  } else {
    tsr_interp_options_initialize(&o);
  }
  o.print_stream = NULL;
  o.warning_stream = NULL;
  o.trace_path = NULL;
  o.cancel = NULL;
  tsr_interp_program_t *p = NULL;
  TSR_RETURN_IF_ERROR(tsr_interp_program_prepare(b->kernel, &o, &p));
  if (d && !verified) {
    tsr_status_t s = tsr_disk_cache_put(d, b->key, verified_record,
                                        sizeof verified_record - 1);
    if (s) tsr_runtime_disk_failed(s);
  }
  *out_value = p;
  *out_bytes = sizeof *p + p->arena.total + (size_t)p->code_capacity * sizeof *p->code +
               (size_t)p->sites_capacity * sizeof *p->sites;
  return NULL;
}

static void free_program(void *value) { tsr_interp_program_destroy(value); }

static void release_entry(void *entry) { tsr_memcache_entry_release(entry); }

tsr_status_t tsr_runtime_prepare(const tsr_ir_kernel_t *kernel,
                                 const tsr_interp_options_t *options,
                                 tsr_interp_program_t **out_program) {
  if (!kernel || !out_program)
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "tsr_runtime_prepare: NULL argument");
  pthread_once(&g.once, initialize);
  if (!g.memory) return TSR_OOM();
  tsr_runtime_key_t *key = NULL;
  TSR_RETURN_IF_ERROR(tsr_runtime_key_create(kernel, TSR_TARGET_INTERP, options, &key));
  build_t b = {kernel, options, tsr_runtime_key_get(key)};
  tsr_memcache_entry_t *entry = NULL;
  tsr_status_t s = tsr_memcache_get_or_build(g.memory, b.key, build_program, &b,
                                             free_program, &entry, NULL);
  tsr_runtime_key_destroy(key);
  if (s) return s;
  s = tsr_interp_program_bind(tsr_memcache_entry_value(entry), kernel, options,
                              release_entry, entry, out_program);
  if (s) tsr_memcache_entry_release(entry);
  return s;
}

void tsr_runtime_cache_stats(tsr_runtime_cache_stats_t *out) {
  memset(out, 0, sizeof *out);
  pthread_once(&g.once, initialize);
  if (g.memory) {
    tsr_memcache_stats_t m;
    tsr_memcache_stats(g.memory, &m);
    out->memory_hits = m.hits;
    out->memory_misses = m.misses;
    out->memory_builds = m.builds;
    out->memory_waits = m.waits;
    out->memory_evictions = m.evictions;
    out->memory_entries = m.entries;
    out->memory_bytes = m.bytes;
  }
  tsr_runtime_disk_use(&out->disk);
  out->verifications_skipped = atomic_load(&g.verifications_skipped);
}

void tsr_runtime_cache_clear(void) {
  pthread_once(&g.once, initialize);
  if (g.memory) tsr_memcache_clear(g.memory);
}
