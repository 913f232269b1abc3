/* Unit tests for cache/memcache.c: hits and misses, full-key comparison under
 * hash collisions, reference counting across eviction and clear, LRU by
 * entries and by bytes, failed builds, allocation failure, and single-flight
 * builds under 8 threads (also run under ThreadSanitizer by scripts/test.sh). */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <time.h>

#include "cache/memcache.h"
#include "tests/harness.h"

/* ---- Values and keys -------------------------------------------------- */

enum { VALUE_MAGIC = 0x7e55e7a, FREED_MAGIC = 0xdeadbeef };

/* A built value says which key it was built for. */
typedef struct value {
  uint32_t magic;
  int key_id;
} value_t;

static atomic_int value_frees;     /* free_value calls */
static atomic_int bad_value_frees; /* frees of a value not live (double free) */

static void free_value(void *v) {
  value_t *value = v;
  if (value->magic != VALUE_MAGIC) atomic_fetch_add(&bad_value_frees, 1);
  value->magic = FREED_MAGIC;
  atomic_fetch_add(&value_frees, 1);
  free(value);
}

static int entry_key_id(const tsr_memcache_entry_t *entry) {
  const value_t *v = tsr_memcache_entry_value(entry);
  return v && v->magic == VALUE_MAGIC ? v->key_id : -1;
}

/* What a build does: build `key_id` with `bytes`, or fail with `fail`. */
typedef struct build_ctx {
  int key_id;
  size_t bytes;
  tsr_status_code_t fail; /* TSR_OK: succeed */
  int calls;
} build_ctx_t;

static tsr_status_t build_value(void *ctx, void **out_value, size_t *out_bytes) {
  build_ctx_t *b = ctx;
  b->calls++;
  if (b->fail != TSR_OK)
    return TSR_STATUS(b->fail, "key %d does not build", b->key_id);
  value_t *v = malloc(sizeof *v);
  if (!v) return TSR_STATUS(TSR_OUT_OF_MEMORY, "test value");
  v->magic = VALUE_MAGIC;
  v->key_id = b->key_id;
  *out_value = v;
  *out_bytes = b->bytes;
  return NULL;
}

/* Key material of about 200 bytes naming key `id`. */
typedef struct test_key {
  char material[200];
  tsr_cache_key_t key;
} test_key_t;

static void make_key(test_key_t *k, int id) {
  memset(k->material, 'k', sizeof k->material);
  snprintf(k->material, sizeof k->material, "test key %d:", id);
  tsr_cache_key_make(&k->key, k->material, sizeof k->material);
}

static tsr_memcache_t *make_cache(uint32_t shards, size_t max_entries,
                                  size_t max_bytes) {
  tsr_memcache_options_t o;
  tsr_memcache_options_initialize(&o);
  o.shards = shards;
  o.max_entries = max_entries;
  o.max_bytes = max_bytes;
  tsr_memcache_t *cache = NULL;
  TSR_CHECK_OK(tsr_memcache_create(&o, &cache));
  return cache;
}

/* get_or_build of key `id` with `bytes`; returns the entry (NULL on error). */
static tsr_memcache_entry_t *build_key(tsr_memcache_t *cache, const test_key_t *k,
                                       int id, size_t bytes, bool *out_built) {
  build_ctx_t b = {id, bytes, TSR_OK, 0};
  tsr_memcache_entry_t *e = NULL;
  TSR_CHECK_OK(tsr_memcache_get_or_build(cache, &k->key, build_value, &b,
                                         free_value, &e, out_built));
  if (e) TSR_CHECK_EQ_INT(entry_key_id(e), id);
  return e;
}

/* Whether `k` is cached, as key `id` (a lookup: it counts as hit or miss and
 * makes the entry the most recently used). */
static bool cached_as(tsr_memcache_t *cache, const test_key_t *k, int id) {
  tsr_memcache_entry_t *e = tsr_memcache_get(cache, &k->key);
  if (!e) return false;
  TSR_CHECK_EQ_INT(entry_key_id(e), id);
  tsr_memcache_entry_release(e);
  return true;
}

static void reset_frees(void) {
  atomic_store(&value_frees, 0);
  atomic_store(&bad_value_frees, 0);
}

static tsr_memcache_stats_t stats_of(tsr_memcache_t *cache) {
  tsr_memcache_stats_t s;
  tsr_memcache_stats(cache, &s);
  return s;
}

static void sleep_us(long us) {
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
  nanosleep(&ts, NULL);
}

/* Polls `done(arg)` every 100 us for up to 10 s (a bound against hangs, not a
 * timing assertion): false if it never became true. */
static bool poll_until(bool (*done)(void *), void *arg) {
  for (int i = 0; i < 100000; i++) {
    if (done(arg)) return true;
    sleep_us(100);
  }
  return false;
}

/* ---- Single-threaded behaviour ------------------------------------------ */

TSR_TEST(options_defaults) {
  tsr_memcache_options_t o;
  tsr_memcache_options_initialize(&o);
  TSR_CHECK_EQ_INT(o.shards, 16);
  TSR_CHECK_EQ_INT(o.max_entries, 1024);
  TSR_CHECK_EQ_INT(o.max_bytes, (size_t)256 << 20);
  tsr_memcache_t *cache = NULL;
  TSR_CHECK_OK(tsr_memcache_create(NULL, &cache));
  TSR_CHECK(cache != NULL);
  tsr_memcache_destroy(cache);
  tsr_memcache_destroy(NULL);
}

TSR_TEST(hit_miss_build_counts) {
  reset_frees();
  tsr_memcache_t *cache = make_cache(16, 0, 0);
  test_key_t k;
  make_key(&k, 1);
  TSR_CHECK(tsr_memcache_get(cache, &k.key) == NULL);

  bool built = false;
  tsr_memcache_entry_t *e1 = build_key(cache, &k, 1, 64, &built);
  TSR_CHECK(built);
  tsr_memcache_entry_t *e2 = build_key(cache, &k, 1, 64, &built);
  TSR_CHECK(!built);
  TSR_CHECK(e1 == e2);
  tsr_memcache_entry_t *e3 = tsr_memcache_get(cache, &k.key);
  TSR_CHECK(e3 == e1);
  /* out_built may be NULL */
  build_ctx_t b = {1, 64, TSR_OK, 0};
  tsr_memcache_entry_t *e4 = NULL;
  TSR_CHECK_OK(tsr_memcache_get_or_build(cache, &k.key, build_value, &b,
                                         free_value, &e4, NULL));
  TSR_CHECK(e4 == e1);
  TSR_CHECK_EQ_INT(b.calls, 0);

  tsr_memcache_stats_t s = stats_of(cache);
  TSR_CHECK_EQ_INT(s.hits, 3);
  TSR_CHECK_EQ_INT(s.misses, 2);
  TSR_CHECK_EQ_INT(s.builds, 1);
  TSR_CHECK_EQ_INT(s.build_failures, 0);
  TSR_CHECK_EQ_INT(s.waits, 0);
  TSR_CHECK_EQ_INT(s.entries, 1);
  TSR_CHECK_EQ_INT(s.bytes, 64);
  tsr_memcache_entry_release(e1);
  tsr_memcache_entry_release(e2);
  tsr_memcache_entry_release(e3);
  tsr_memcache_entry_release(e4);
  TSR_CHECK_EQ_INT(atomic_load(&value_frees), 0);
  tsr_memcache_destroy(cache);
  TSR_CHECK_EQ_INT(atomic_load(&value_frees), 1);
  TSR_CHECK_EQ_INT(atomic_load(&bad_value_frees), 0);
}

/* Keys made by hand with one lo/hi hash but other material: a lookup must
 * compare the material, so none of them ever returns another's value. */
TSR_TEST(full_key_compare_on_hash_collision) {
  reset_frees();
  tsr_memcache_t *cache = make_cache(1, 3, 0);
  static const char *const material[] = {"alpha", "beta!", "alph", "", "gamma"};
  test_key_t k[5];
  for (int i = 0; i < 5; i++) {
    k[i].key.lo = 0x1234;
    k[i].key.hi = 0x5678;
    k[i].key.bytes = (const uint8_t *)material[i];
    k[i].key.len = strlen(material[i]);
  }
  k[3].key.bytes = NULL; /* empty material, no pointer */
  tsr_memcache_entry_t *e[4];
  for (int i = 0; i < 3; i++) {
    bool built = false;
    e[i] = build_key(cache, &k[i], i, 1, &built);
    TSR_CHECK(built);
  }
  for (int i = 0; i < 3; i++) TSR_CHECK(cached_as(cache, &k[i], i));
  TSR_CHECK(!cached_as(cache, &k[3], 3)); /* same hash, never stored */
  TSR_CHECK(!cached_as(cache, &k[4], 4));
  TSR_CHECK_EQ_INT(stats_of(cache).builds, 3);

  /* Removing colliding entries (LRU order now 2, 1, 0) keeps the others
   * findable: the empty key evicts key 0, "gamma" evicts key 1. */
  bool built = false;
  e[3] = build_key(cache, &k[3], 3, 1, &built);
  TSR_CHECK(built);
  TSR_CHECK(!cached_as(cache, &k[0], 0));
  TSR_CHECK(cached_as(cache, &k[1], 1)); /* now 1, 3, 2 */
  TSR_CHECK(cached_as(cache, &k[2], 2)); /* now 2, 1, 3 */
  TSR_CHECK(cached_as(cache, &k[3], 3)); /* now 3, 2, 1 */
  tsr_memcache_entry_release(build_key(cache, &k[4], 4, 1, &built));
  TSR_CHECK(built);
  TSR_CHECK(!cached_as(cache, &k[1], 1));
  TSR_CHECK(cached_as(cache, &k[2], 2));
  TSR_CHECK(cached_as(cache, &k[3], 3));
  TSR_CHECK(cached_as(cache, &k[4], 4));
  TSR_CHECK_EQ_INT(stats_of(cache).evictions, 2);
  /* held entries are still their own keys' */
  for (int i = 0; i < 4; i++) {
    TSR_CHECK_EQ_INT(entry_key_id(e[i]), i);
    tsr_memcache_entry_release(e[i]);
  }
  tsr_memcache_destroy(cache);
  TSR_CHECK_EQ_INT(atomic_load(&value_frees), 5);
  TSR_CHECK_EQ_INT(atomic_load(&bad_value_frees), 0);
}

TSR_TEST(held_entry_survives_eviction_and_clear) {
  reset_frees();
  tsr_memcache_t *cache = make_cache(1, 1, 0);
  test_key_t a, b;
  make_key(&a, 10);
  make_key(&b, 11);
  tsr_memcache_entry_t *ea = build_key(cache, &a, 10, 8, NULL);
  tsr_memcache_entry_retain(ea); /* two references held */
  tsr_memcache_entry_t *eb = build_key(cache, &b, 11, 8, NULL); /* evicts a */
  TSR_CHECK_EQ_INT(stats_of(cache).evictions, 1);
  TSR_CHECK(!cached_as(cache, &a, 10));
  TSR_CHECK_EQ_INT(atomic_load(&value_frees), 0);
  TSR_CHECK_EQ_INT(entry_key_id(ea), 10);
  tsr_memcache_entry_release(ea);
  TSR_CHECK_EQ_INT(atomic_load(&value_frees), 0);
  TSR_CHECK_EQ_INT(entry_key_id(ea), 10);
  tsr_memcache_entry_release(ea);
  TSR_CHECK_EQ_INT(atomic_load(&value_frees), 1);

  tsr_memcache_clear(cache);
  tsr_memcache_stats_t s = stats_of(cache);
  TSR_CHECK_EQ_INT(s.entries, 0);
  TSR_CHECK_EQ_INT(s.bytes, 0);
  TSR_CHECK_EQ_INT(s.evictions, 1); /* a clear is not an eviction */
  TSR_CHECK(!cached_as(cache, &b, 11));
  TSR_CHECK_EQ_INT(atomic_load(&value_frees), 1);
  TSR_CHECK_EQ_INT(entry_key_id(eb), 11);
  tsr_memcache_entry_release(eb);
  TSR_CHECK_EQ_INT(atomic_load(&value_frees), 2);
  tsr_memcache_clear(cache); /* nothing left to drop */
  tsr_memcache_destroy(cache);
  TSR_CHECK_EQ_INT(atomic_load(&value_frees), 2);
  TSR_CHECK_EQ_INT(atomic_load(&bad_value_frees), 0);
}

TSR_TEST(lru_by_entries) {
  reset_frees();
  tsr_memcache_t *cache = make_cache(1, 3, 0);
  test_key_t k[5];
  for (int i = 0; i < 5; i++) make_key(&k[i], i);
  for (int i = 0; i < 3; i++)
    tsr_memcache_entry_release(build_key(cache, &k[i], i, 1, NULL));
  /* most recent first: 2 1 0; a hit on 0 gives 0 2 1 */
  TSR_CHECK(cached_as(cache, &k[0], 0));
  tsr_memcache_entry_release(build_key(cache, &k[3], 3, 1, NULL)); /* 3 0 2 */
  TSR_CHECK_EQ_INT(atomic_load(&value_frees), 1);
  TSR_CHECK(!cached_as(cache, &k[1], 1));
  TSR_CHECK(cached_as(cache, &k[2], 2)); /* 2 3 0 */
  tsr_memcache_entry_release(build_key(cache, &k[4], 4, 1, NULL)); /* 4 2 3 */
  TSR_CHECK(!cached_as(cache, &k[0], 0));
  TSR_CHECK(cached_as(cache, &k[2], 2));
  TSR_CHECK(cached_as(cache, &k[3], 3));
  TSR_CHECK(cached_as(cache, &k[4], 4));
  tsr_memcache_stats_t s = stats_of(cache);
  TSR_CHECK_EQ_INT(s.evictions, 2);
  TSR_CHECK_EQ_INT(s.entries, 3);
  TSR_CHECK_EQ_INT(atomic_load(&value_frees), 2);
  tsr_memcache_destroy(cache);
  TSR_CHECK_EQ_INT(atomic_load(&value_frees), 5);
}

TSR_TEST(lru_by_bytes) {
  reset_frees();
  tsr_memcache_t *cache = make_cache(1, 0, 100);
  test_key_t k[4];
  for (int i = 0; i < 4; i++) make_key(&k[i], i);
  tsr_memcache_entry_release(build_key(cache, &k[0], 0, 40, NULL));
  tsr_memcache_entry_release(build_key(cache, &k[1], 1, 40, NULL));
  TSR_CHECK(cached_as(cache, &k[0], 0)); /* 0 1 */
  tsr_memcache_entry_release(build_key(cache, &k[2], 2, 30, NULL));
  /* 110 bytes > 100: the LRU entry, 1, goes */
  TSR_CHECK_EQ_INT(stats_of(cache).bytes, 70);
  TSR_CHECK(!cached_as(cache, &k[1], 1));
  /* 2 0; 60 more bytes evict 0 (130 -> 90) and keep 2 */
  tsr_memcache_entry_release(build_key(cache, &k[3], 3, 60, NULL));
  tsr_memcache_stats_t s = stats_of(cache);
  TSR_CHECK_EQ_INT(s.bytes, 90);
  TSR_CHECK_EQ_INT(s.entries, 2);
  TSR_CHECK_EQ_INT(s.evictions, 2);
  TSR_CHECK(!cached_as(cache, &k[0], 0));
  TSR_CHECK(cached_as(cache, &k[2], 2));
  TSR_CHECK(cached_as(cache, &k[3], 3));
  tsr_memcache_destroy(cache);
  TSR_CHECK_EQ_INT(atomic_load(&value_frees), 4);
}

/* An entry larger than the byte bound goes to its caller but is not kept,
 * and does not push out what is cached. */
TSR_TEST(oversize_entry_not_kept) {
  reset_frees();
  tsr_memcache_t *cache = make_cache(1, 0, 100);
  test_key_t small, big;
  make_key(&small, 1);
  make_key(&big, 2);
  tsr_memcache_entry_release(build_key(cache, &small, 1, 50, NULL));
  bool built = false;
  tsr_memcache_entry_t *e = build_key(cache, &big, 2, 101, &built);
  TSR_CHECK(built);
  TSR_CHECK_EQ_INT(entry_key_id(e), 2);
  tsr_memcache_stats_t s = stats_of(cache);
  TSR_CHECK_EQ_INT(s.entries, 1);
  TSR_CHECK_EQ_INT(s.bytes, 50);
  TSR_CHECK_EQ_INT(s.evictions, 0);
  TSR_CHECK(!cached_as(cache, &big, 2));
  TSR_CHECK(cached_as(cache, &small, 1));
  TSR_CHECK_EQ_INT(atomic_load(&value_frees), 0);
  tsr_memcache_entry_release(e);
  TSR_CHECK_EQ_INT(atomic_load(&value_frees), 1);
  /* exactly max_bytes is kept */
  tsr_memcache_entry_release(build_key(cache, &big, 2, 100, &built));
  TSR_CHECK(built);
  TSR_CHECK(cached_as(cache, &big, 2));
  TSR_CHECK(!cached_as(cache, &small, 1));
  tsr_memcache_destroy(cache);
  TSR_CHECK_EQ_INT(atomic_load(&value_frees), 3);
}

/* With several shards the bounds hold for the whole cache. */
TSR_TEST(sharded_bounds_hold) {
  reset_frees();
  test_key_t k;
  /* 8 shards of 2 entries */
  tsr_memcache_t *cache = make_cache(8, 16, 0);
  for (int i = 0; i < 100; i++) {
    make_key(&k, i);
    tsr_memcache_entry_release(build_key(cache, &k, i, 1, NULL));
  }
  tsr_memcache_stats_t s = stats_of(cache);
  TSR_CHECK(s.entries <= 16);
  TSR_CHECK(s.entries >= 1);
  TSR_CHECK_EQ_INT(s.evictions, 100 - s.entries);
  TSR_CHECK_EQ_INT(atomic_load(&value_frees), s.evictions);
  tsr_memcache_destroy(cache);
  TSR_CHECK_EQ_INT(atomic_load(&value_frees), 100);

  /* more shards asked for than entries allowed: still at most 3 */
  cache = make_cache(16, 3, 0);
  for (int i = 0; i < 100; i++) {
    make_key(&k, i);
    tsr_memcache_entry_release(build_key(cache, &k, i, 1, NULL));
  }
  s = stats_of(cache);
  TSR_CHECK(s.entries <= 3 && s.entries >= 1);
  tsr_memcache_destroy(cache);

  /* bytes: 4 shards sharing 1000 */
  cache = make_cache(4, 0, 1000);
  for (int i = 0; i < 300; i++) {
    make_key(&k, i);
    tsr_memcache_entry_release(build_key(cache, &k, i, 10, NULL));
  }
  s = stats_of(cache);
  TSR_CHECK(s.bytes <= 1000);
  TSR_CHECK_EQ_INT(s.bytes, 10 * s.entries);
  tsr_memcache_destroy(cache);
  TSR_CHECK_EQ_INT(atomic_load(&bad_value_frees), 0);
}

TSR_TEST(failed_build_caches_nothing) {
  reset_frees();
  tsr_memcache_t *cache = make_cache(4, 0, 0);
  test_key_t k;
  make_key(&k, 7);
  build_ctx_t b = {7, 8, TSR_VERIFY_ERROR, 0};
  tsr_memcache_entry_t *e = NULL;
  bool built = true;
  tsr_status_t st = tsr_memcache_get_or_build(cache, &k.key, build_value, &b,
                                              free_value, &e, &built);
  TSR_CHECK_EQ_INT(tsr_status_code(st), TSR_VERIFY_ERROR);
  TSR_CHECK_EQ_STR(tsr_status_message(st), "key 7 does not build");
  tsr_status_free(st);
  TSR_CHECK(e == NULL); /* out-parameters untouched on failure */
  TSR_CHECK(built);
  TSR_CHECK(!cached_as(cache, &k, 7));
  tsr_memcache_stats_t s = stats_of(cache);
  TSR_CHECK_EQ_INT(s.builds, 1);
  TSR_CHECK_EQ_INT(s.build_failures, 1);
  TSR_CHECK_EQ_INT(s.entries, 0);

  /* the next call builds again */
  b.fail = TSR_OK;
  TSR_CHECK_OK(tsr_memcache_get_or_build(cache, &k.key, build_value, &b,
                                         free_value, &e, &built));
  TSR_CHECK(built);
  TSR_CHECK_EQ_INT(b.calls, 2);
  TSR_CHECK_EQ_INT(entry_key_id(e), 7);
  tsr_memcache_entry_release(e);
  TSR_CHECK_EQ_INT(stats_of(cache).builds, 2);
  TSR_CHECK(cached_as(cache, &k, 7));
  tsr_memcache_destroy(cache);
  TSR_CHECK_EQ_INT(atomic_load(&value_frees), 1);
}

/* A build that asks for its own key gets an error instead of a deadlock. */
typedef struct recursive_ctx {
  tsr_memcache_t *cache;
  const tsr_cache_key_t *key;
  tsr_status_code_t inner_code;
} recursive_ctx_t;

static tsr_status_t build_recursive(void *ctx, void **out_value,
                                    size_t *out_bytes) {
  recursive_ctx_t *r = ctx;
  tsr_memcache_entry_t *e = NULL;
  tsr_status_t s = tsr_memcache_get_or_build(r->cache, r->key, build_recursive,
                                             r, free_value, &e, NULL);
  r->inner_code = tsr_status_code(s);
  if (!s) tsr_memcache_entry_release(e);
  return s ? s : TSR_STATUS(TSR_INTERNAL, "the inner call succeeded");
}

TSR_TEST(recursive_build_is_an_error) {
  tsr_memcache_t *cache = make_cache(4, 0, 0);
  test_key_t k;
  make_key(&k, 3);
  recursive_ctx_t r = {cache, &k.key, TSR_OK};
  tsr_memcache_entry_t *e = NULL;
  tsr_status_t s = tsr_memcache_get_or_build(cache, &k.key, build_recursive,
                                             &r, free_value, &e, NULL);
  TSR_CHECK_EQ_INT(r.inner_code, TSR_INTERNAL);
  TSR_CHECK_EQ_INT(tsr_status_code(s), TSR_INTERNAL);
  TSR_CHECK(strstr(tsr_status_message(s), "its own key") != NULL);
  tsr_status_free(s);
  TSR_CHECK_EQ_INT(stats_of(cache).entries, 0);
  tsr_memcache_destroy(cache);
}

/* Every allocation of create and of a miss can fail: the failure is
 * TSR_OUT_OF_MEMORY, nothing is built or cached, and the next call works. */
TSR_TEST(allocation_failures) {
  reset_frees();
  int create_failures = 0;
  tsr_memcache_t *cache = NULL;
  for (long n = 0; n < 10 && !cache; n++) {
    tsr_memcache_options_t o;
    tsr_memcache_options_initialize(&o);
    tsr_alloc_fail_after(n);
    tsr_status_t s = tsr_memcache_create(&o, &cache);
    tsr_alloc_fail_after(-1);
    if (s) {
      create_failures++;
      TSR_CHECK_EQ_INT(tsr_status_code(s), TSR_OUT_OF_MEMORY);
      tsr_status_free(s);
      cache = NULL;
    }
  }
  TSR_CHECK(cache != NULL);
  TSR_CHECK_EQ_INT(create_failures, 2); /* the cache, its shards */

  test_key_t k;
  make_key(&k, 5);
  int miss_failures = 0;
  tsr_memcache_entry_t *e = NULL;
  /* a miss allocates the entry, then uthash its table and its buckets */
  for (long n = 0; n < 10 && !e; n++) {
    build_ctx_t b = {5, 8, TSR_OK, 0};
    tsr_alloc_fail_after(n);
    tsr_status_t s = tsr_memcache_get_or_build(cache, &k.key, build_value, &b,
                                               free_value, &e, NULL);
    tsr_alloc_fail_after(-1);
    if (s) {
      miss_failures++;
      TSR_CHECK_EQ_INT(tsr_status_code(s), TSR_OUT_OF_MEMORY);
      TSR_CHECK_EQ_INT(b.calls, 0);
      TSR_CHECK(e == NULL);
      TSR_CHECK_EQ_INT(stats_of(cache).entries, 0);
      tsr_status_free(s);
    } else {
      TSR_CHECK_EQ_INT(b.calls, 1);
    }
  }
  TSR_CHECK_EQ_INT(miss_failures, 3);
  TSR_CHECK(e != NULL);
  TSR_CHECK_EQ_INT(entry_key_id(e), 5);
  tsr_memcache_entry_release(e);
  TSR_CHECK(cached_as(cache, &k, 5));
  tsr_memcache_destroy(cache);
  TSR_CHECK_EQ_INT(atomic_load(&value_frees), 1);
}

/* ---- Threads ---------------------------------------------------------- */

enum { THREADS = 8 };

/* 8 threads ask for one key at once; the build waits until the other 7 are
 * waiting for it (no sleep decides it), then succeeds or fails. */
typedef struct flight {
  tsr_memcache_t *cache;
  test_key_t key;
  tsr_status_code_t fail;
  pthread_barrier_t start;
  atomic_int builds;
  atomic_bool saw_all_waiters;
} flight_t;

typedef struct flight_result {
  flight_t *flight;
  tsr_status_t status;
  tsr_memcache_entry_t *entry;
  bool built;
} flight_result_t;

static bool all_others_wait(void *arg) {
  flight_t *f = arg;
  return stats_of(f->cache).waits >= THREADS - 1;
}

static tsr_status_t build_in_flight(void *ctx, void **out_value,
                                    size_t *out_bytes) {
  flight_t *f = ctx;
  atomic_fetch_add(&f->builds, 1);
  atomic_store(&f->saw_all_waiters, poll_until(all_others_wait, f));
  build_ctx_t b = {42, 16, f->fail, 0};
  return build_value(&b, out_value, out_bytes);
}

static void *flight_thread(void *arg) {
  flight_result_t *r = arg;
  flight_t *f = r->flight;
  pthread_barrier_wait(&f->start);
  r->status = tsr_memcache_get_or_build(f->cache, &f->key.key, build_in_flight,
                                        f, free_value, &r->entry, &r->built);
  return NULL;
}

static void run_flight(flight_t *f, flight_result_t results[THREADS]) {
  pthread_t threads[THREADS];
  pthread_barrier_init(&f->start, NULL, THREADS);
  for (int i = 0; i < THREADS; i++) {
    results[i] = (flight_result_t){f, NULL, NULL, false};
    pthread_create(&threads[i], NULL, flight_thread, &results[i]);
  }
  for (int i = 0; i < THREADS; i++) pthread_join(threads[i], NULL);
  pthread_barrier_destroy(&f->start);
}

TSR_TEST(single_flight_one_build_for_simultaneous_callers) {
  reset_frees();
  flight_t f = {.cache = make_cache(16, 0, 0), .fail = TSR_OK};
  make_key(&f.key, 42);
  flight_result_t r[THREADS];
  run_flight(&f, r);
  TSR_CHECK_EQ_INT(atomic_load(&f.builds), 1);
  TSR_CHECK(atomic_load(&f.saw_all_waiters));
  int built = 0;
  for (int i = 0; i < THREADS; i++) {
    TSR_CHECK(r[i].status == NULL);
    TSR_CHECK(r[i].entry == r[0].entry);
    if (r[i].entry) TSR_CHECK_EQ_INT(entry_key_id(r[i].entry), 42);
    built += r[i].built;
  }
  TSR_CHECK_EQ_INT(built, 1);
  tsr_memcache_stats_t s = stats_of(f.cache);
  TSR_CHECK_EQ_INT(s.builds, 1);
  TSR_CHECK_EQ_INT(s.waits, THREADS - 1);
  TSR_CHECK_EQ_INT(s.misses, THREADS);
  TSR_CHECK_EQ_INT(s.hits, 0);
  TSR_CHECK_EQ_INT(s.entries, 1);
  for (int i = 0; i < THREADS; i++) tsr_memcache_entry_release(r[i].entry);
  TSR_CHECK_EQ_INT(atomic_load(&value_frees), 0);
  tsr_memcache_destroy(f.cache);
  TSR_CHECK_EQ_INT(atomic_load(&value_frees), 1);
}

TSR_TEST(failed_build_error_reaches_every_waiter) {
  reset_frees();
  flight_t f = {.cache = make_cache(16, 0, 0), .fail = TSR_VERIFY_ERROR};
  make_key(&f.key, 42);
  flight_result_t r[THREADS];
  run_flight(&f, r);
  TSR_CHECK_EQ_INT(atomic_load(&f.builds), 1);
  TSR_CHECK(atomic_load(&f.saw_all_waiters));
  for (int i = 0; i < THREADS; i++) {
    TSR_CHECK(r[i].entry == NULL);
    TSR_CHECK_EQ_INT(tsr_status_code(r[i].status), TSR_VERIFY_ERROR);
    TSR_CHECK_EQ_STR(tsr_status_message(r[i].status), "key 42 does not build");
    for (int j = 0; j < i; j++) TSR_CHECK(r[i].status != r[j].status);
  }
  for (int i = 0; i < THREADS; i++) tsr_status_free(r[i].status);
  tsr_memcache_stats_t s = stats_of(f.cache);
  TSR_CHECK_EQ_INT(s.builds, 1);
  TSR_CHECK_EQ_INT(s.build_failures, 1);
  TSR_CHECK_EQ_INT(s.waits, THREADS - 1);
  TSR_CHECK_EQ_INT(s.entries, 0);
  /* nothing was cached: the next call builds */
  bool built = false;
  tsr_memcache_entry_release(build_key(f.cache, &f.key, 42, 16, &built));
  TSR_CHECK(built);
  TSR_CHECK_EQ_INT(stats_of(f.cache).builds, 2);
  tsr_memcache_destroy(f.cache);
  TSR_CHECK_EQ_INT(atomic_load(&value_frees), 1);
}

/* tsr_memcache_get does not wait for a build in progress. */
typedef struct slow_build {
  tsr_memcache_t *cache;
  test_key_t key;
  atomic_bool may_finish;
  tsr_status_t status;
  tsr_memcache_entry_t *entry;
} slow_build_t;

static bool may_finish(void *arg) {
  return atomic_load(&((slow_build_t *)arg)->may_finish);
}

static tsr_status_t build_slowly(void *ctx, void **out_value, size_t *out_bytes) {
  poll_until(may_finish, ctx);
  build_ctx_t b = {9, 8, TSR_OK, 0};
  return build_value(&b, out_value, out_bytes);
}

static void *slow_build_thread(void *arg) {
  slow_build_t *sb = arg;
  sb->status = tsr_memcache_get_or_build(sb->cache, &sb->key.key, build_slowly,
                                         sb, free_value, &sb->entry, NULL);
  return NULL;
}

static bool build_started(void *arg) {
  return stats_of(((slow_build_t *)arg)->cache).builds == 1;
}

TSR_TEST(get_does_not_wait_for_a_build) {
  reset_frees();
  slow_build_t sb = {.cache = make_cache(4, 0, 0)};
  make_key(&sb.key, 9);
  pthread_t thread;
  pthread_create(&thread, NULL, slow_build_thread, &sb);
  TSR_CHECK(poll_until(build_started, &sb));
  /* had get waited, the build (waiting for may_finish) would have run out
   * its 10 s and get would return the entry */
  tsr_memcache_entry_t *e = tsr_memcache_get(sb.cache, &sb.key.key);
  TSR_CHECK(e == NULL);
  tsr_memcache_entry_release(e);
  atomic_store(&sb.may_finish, true);
  pthread_join(thread, NULL);
  TSR_CHECK(sb.status == NULL);
  TSR_CHECK(sb.entry != NULL);
  TSR_CHECK(cached_as(sb.cache, &sb.key, 9));
  tsr_memcache_entry_release(sb.entry);
  tsr_memcache_stats_t s = stats_of(sb.cache);
  TSR_CHECK_EQ_INT(s.waits, 0);
  TSR_CHECK_EQ_INT(s.misses, 2);
  tsr_memcache_destroy(sb.cache);
  TSR_CHECK_EQ_INT(atomic_load(&value_frees), 1);
}

/* The stress test: 8 threads x 1,000 lookups over 50 keys, with a bound of
 * 20 entries, clears from the threads, lookups without build, entries held
 * across other threads' evictions, and failing keys. Every value and error
 * must be its own key's, no key may have two builds in flight at once, and
 * the counters must add up. */
enum {
  STRESS_KEYS = 50,
  STRESS_LOOKUPS = 1000,
  STRESS_MAX_ENTRIES = 20,
  STRESS_BUILD_US = 100, /* a build sleeps this long, so builds overlap */
};

typedef struct stress {
  tsr_memcache_t *cache;
  test_key_t keys[STRESS_KEYS];
  atomic_int in_flight[STRESS_KEYS]; /* builders of each key right now */
  atomic_int overlapping_builds;     /* a build began while one was running */
  atomic_int builds, failed_builds;
  pthread_barrier_t start;
} stress_t;

static bool stress_key_fails(int id) { return id % 10 == 9; }

typedef struct stress_build {
  stress_t *stress;
  int key_id;
} stress_build_t;

static tsr_status_t build_stress(void *ctx, void **out_value,
                                 size_t *out_bytes) {
  stress_build_t *sb = ctx;
  stress_t *st = sb->stress;
  if (atomic_fetch_add(&st->in_flight[sb->key_id], 1) != 0)
    atomic_fetch_add(&st->overlapping_builds, 1);
  atomic_fetch_add(&st->builds, 1);
  sleep_us(STRESS_BUILD_US);
  build_ctx_t b = {sb->key_id, 100, TSR_OK, 0};
  if (stress_key_fails(sb->key_id)) {
    b.fail = TSR_KERNEL_ERROR;
    atomic_fetch_add(&st->failed_builds, 1);
  }
  atomic_fetch_sub(&st->in_flight[sb->key_id], 1);
  return build_value(&b, out_value, out_bytes);
}

typedef struct stress_thread {
  stress_t *stress;
  unsigned seed;
  int calls, built, get_misses;
  int wrong_values, wrong_errors, unexpected_errors;
} stress_thread_t;

static void *stress_run(void *arg) {
  stress_thread_t *t = arg;
  stress_t *st = t->stress;
  tsr_memcache_entry_t *held = NULL;
  int held_id = -1;
  pthread_barrier_wait(&st->start);
  for (int i = 0; i < STRESS_LOOKUPS; i++) {
    int id = rand_r(&t->seed) % STRESS_KEYS;
    int action = rand_r(&t->seed) % 100;
    const tsr_cache_key_t *key = &st->keys[id].key;
    if (action < 2) {
      tsr_memcache_clear(st->cache);
      continue;
    }
    t->calls++;
    tsr_memcache_entry_t *e = NULL;
    if (action < 12) {
      e = tsr_memcache_get(st->cache, key);
      if (!e) t->get_misses++;
    } else {
      stress_build_t sb = {st, id};
      bool built = false;
      tsr_status_t s = tsr_memcache_get_or_build(st->cache, key, build_stress,
                                                 &sb, free_value, &e, &built);
      if (s) {
        char expected[64];
        snprintf(expected, sizeof expected, "key %d does not build", id);
        if (!stress_key_fails(id)) t->unexpected_errors++;
        else if (tsr_status_code(s) != TSR_KERNEL_ERROR ||
                 strcmp(tsr_status_message(s), expected) != 0)
          t->wrong_errors++;
        tsr_status_free(s);
        continue;
      }
      t->built += built;
    }
    if (!e) continue;
    if (entry_key_id(e) != id || stress_key_fails(id)) t->wrong_values++;
    if (!held && action % 4 == 0) { /* keep it across some lookups */
      held = e;
      held_id = id;
      continue;
    }
    tsr_memcache_entry_release(e);
    if (held && action % 8 == 1) {
      if (entry_key_id(held) != held_id) t->wrong_values++;
      tsr_memcache_entry_release(held);
      held = NULL;
    }
  }
  if (held) {
    if (entry_key_id(held) != held_id) t->wrong_values++;
    tsr_memcache_entry_release(held);
  }
  return NULL;
}

TSR_TEST(concurrent_stress) {
  reset_frees();
  static stress_t st; /* zero: the atomics start at 0 */
  st.cache = make_cache(4, STRESS_MAX_ENTRIES, 0);
  for (int i = 0; i < STRESS_KEYS; i++) make_key(&st.keys[i], i);
  pthread_barrier_init(&st.start, NULL, THREADS);
  pthread_t threads[THREADS];
  stress_thread_t t[THREADS];
  for (int i = 0; i < THREADS; i++) {
    t[i] = (stress_thread_t){.stress = &st, .seed = 1234u + (unsigned)i};
    pthread_create(&threads[i], NULL, stress_run, &t[i]);
  }
  for (int i = 0; i < THREADS; i++) pthread_join(threads[i], NULL);
  pthread_barrier_destroy(&st.start);

  int calls = 0, built = 0, get_misses = 0;
  for (int i = 0; i < THREADS; i++) {
    calls += t[i].calls;
    built += t[i].built;
    get_misses += t[i].get_misses;
    TSR_CHECK_EQ_INT(t[i].wrong_values, 0);
    TSR_CHECK_EQ_INT(t[i].wrong_errors, 0);
    TSR_CHECK_EQ_INT(t[i].unexpected_errors, 0);
  }
  TSR_CHECK_EQ_INT(atomic_load(&st.overlapping_builds), 0);
  tsr_memcache_stats_t s = stats_of(st.cache);
  printf("# %d calls: %" PRIu64 " hits, %" PRIu64 " misses, %" PRIu64
         " builds (%" PRIu64 " failed), %" PRIu64 " waits, %" PRIu64
         " evictions\n",
         calls, s.hits, s.misses, s.builds, s.build_failures, s.waits,
         s.evictions);
  TSR_CHECK_EQ_INT(s.builds, atomic_load(&st.builds));
  TSR_CHECK_EQ_INT(s.build_failures, atomic_load(&st.failed_builds));
  TSR_CHECK_EQ_INT(built, s.builds - s.build_failures);
  TSR_CHECK_EQ_INT(s.hits + s.misses, calls);
  TSR_CHECK_EQ_INT(s.misses, s.builds + s.waits + (uint64_t)get_misses);
  TSR_CHECK(s.entries <= STRESS_MAX_ENTRIES);
  TSR_CHECK_EQ_INT(s.bytes, 100 * s.entries);
  tsr_memcache_destroy(st.cache);
  /* every value built was freed exactly once */
  TSR_CHECK_EQ_INT(atomic_load(&value_frees), s.builds - s.build_failures);
  TSR_CHECK_EQ_INT(atomic_load(&bad_value_frees), 0);
}

int main(void) {
  TSR_RUN(options_defaults);
  TSR_RUN(hit_miss_build_counts);
  TSR_RUN(full_key_compare_on_hash_collision);
  TSR_RUN(held_entry_survives_eviction_and_clear);
  TSR_RUN(lru_by_entries);
  TSR_RUN(lru_by_bytes);
  TSR_RUN(oversize_entry_not_kept);
  TSR_RUN(sharded_bounds_hold);
  TSR_RUN(failed_build_caches_nothing);
  TSR_RUN(recursive_build_is_an_error);
  TSR_RUN(allocation_failures);
  TSR_RUN(single_flight_one_build_for_simultaneous_callers);
  TSR_RUN(failed_build_error_reaches_every_waiter);
  TSR_RUN(get_does_not_wait_for_a_build);
  TSR_RUN(concurrent_stress);
  return tsr_test_done();
}
