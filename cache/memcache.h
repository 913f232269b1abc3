/* In-memory cache of built objects (prepared programs, loaded compiled
 * kernels), keyed by tsr_cache_key_t. Library-internal.
 *
 * Thread-safe: sharded by key hash, one mutex per shard, uthash tables.
 * Entries are reference-counted atomically: a holder's entry stays valid after
 * it is evicted or the cache is cleared, and is freed by the last release.
 * Single-flight: when several threads ask for the same missing key at once,
 * one builds and the others wait for its result; a failed build caches
 * nothing and every waiter gets (a copy of) the error.
 * Bounded by entries and bytes, evicting least-recently-used entries. */
#ifndef TESSERA_CACHE_MEMCACHE_H
#define TESSERA_CACHE_MEMCACHE_H

#include "base/base_internal.h"
#include "tessera/cache.h"

typedef struct tsr_memcache tsr_memcache_t;
typedef struct tsr_memcache_entry tsr_memcache_entry_t;

/* Each shard holds an equal part of max_entries and max_bytes and evicts its
 * own least-recently-used entries (memcache.c says why), so an entry larger
 * than max_bytes / shards is returned to its caller but not kept. The shard
 * count is lowered when a bound is smaller than it. */
typedef struct tsr_memcache_options {
  uint32_t shards;      /* rounded up to a power of two; default 16 */
  size_t max_entries;   /* default 1024; 0 = unbounded */
  size_t max_bytes;     /* default 256 MiB; 0 = unbounded */
} tsr_memcache_options_t;

void tsr_memcache_options_initialize(tsr_memcache_options_t *options);
tsr_status_t tsr_memcache_create(const tsr_memcache_options_t *options,
                                 tsr_memcache_t **out_cache) TSR_MUST_USE;
/* Every entry must have been released and no build be in progress. */
void tsr_memcache_destroy(tsr_memcache_t *cache);

/* Builds the value for a missing key: on success sets *out_value and
 * *out_bytes (its approximate memory size, for the byte bound). It runs
 * outside every cache lock and may use the cache, but not ask for its own
 * key (that call fails with TSR_INTERNAL). */
typedef tsr_status_t (*tsr_memcache_build_fn)(void *ctx, void **out_value,
                                              size_t *out_bytes);
/* Frees a value once its entry is evicted (or cleared) and released by every
 * holder. The function given by the call that built the entry is used; it
 * may be NULL. */
typedef void (*tsr_memcache_free_fn)(void *value);

/* Returns the entry for `key`, building it with build(ctx) if missing. The
 * key material is copied. On success *out_entry holds a reference the caller
 * releases; *out_built (may be NULL) says whether this call built it. */
tsr_status_t tsr_memcache_get_or_build(tsr_memcache_t *cache,
                                       const tsr_cache_key_t *key,
                                       tsr_memcache_build_fn build, void *ctx,
                                       tsr_memcache_free_fn free_value,
                                       tsr_memcache_entry_t **out_entry,
                                       bool *out_built) TSR_MUST_USE;
/* Lookup only: a new reference, or NULL on a miss (or while being built). */
tsr_memcache_entry_t *tsr_memcache_get(tsr_memcache_t *cache,
                                       const tsr_cache_key_t *key);
void *tsr_memcache_entry_value(const tsr_memcache_entry_t *entry);
/* Takes another reference. */
void tsr_memcache_entry_retain(tsr_memcache_entry_t *entry);
void tsr_memcache_entry_release(tsr_memcache_entry_t *entry);

/* Drops every entry not being built (held ones live on until released). */
void tsr_memcache_clear(tsr_memcache_t *cache);

/* hits: calls that found a built entry; misses: calls that did not (each
 * get_or_build miss either builds or waits for another caller's build);
 * builds: build calls, build_failures among them; waits: callers that waited
 * for another's build; evictions: entries dropped for the bounds (not by
 * clear); entries, bytes: what the cache holds now (builds in progress and
 * dropped entries still held by callers are not counted). */
typedef struct tsr_memcache_stats {
  uint64_t hits, misses, builds, build_failures, waits, evictions;
  uint64_t entries, bytes;
} tsr_memcache_stats_t;
void tsr_memcache_stats(tsr_memcache_t *cache, tsr_memcache_stats_t *out_stats);

#endif /* TESSERA_CACHE_MEMCACHE_H */
