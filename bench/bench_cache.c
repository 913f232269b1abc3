/* Cache benchmarks, all measured in one run (docs/benchmarks.md, "Cache"):
 *  (1) key computation: XXH3-128 over canonical bytes (GB/s), the canonical
 *      serialization of a kernel, and a whole tsr_runtime_key_create;
 *  (2) in-memory hit latency (tsr_memcache_get + release), 1, 2 and 8 threads;
 *  (3) disk hit latency (tsr_disk_cache_get) for a small and a 10 MiB entry;
 *  (4) the interpreter's hit path: tsr_runtime_prepare on a cached kernel
 *      next to verify + prepare, for the example kernels;
 *  (5) whether a verifier's verdict is worth keeping on disk: the verifier
 *      (tsr_ir_verify_kernel) next to a disk hit of a small record under
 *      the kernel's own key (its real key material), for the examples.
 *
 * Usage: bench_cache [--quick]
 * Example kernels are read from $TSR_SOURCE_ROOT/kernels/examples. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cache/memcache.h"
#include "interp/interp_runtime.h"
#include "ir/ir.h"
#include "runtime/runtime_internal.h"
#include "tessera/tessera.h"

#define BENCH_NAME "bench_cache"
#include "bench/bench_util.h"

#ifndef TSR_BENCH_SOURCE_ROOT
#define TSR_BENCH_SOURCE_ROOT "."
#endif

static int quick;

/* ---- (1) keys ---- */

typedef struct hash_ctx {
  const uint8_t *bytes;
  size_t len;
  uint64_t sink;
} hash_ctx_t;

static void hash_once(void *p) {
  hash_ctx_t *c = p;
  tsr_cache_key_t k;
  tsr_cache_key_make(&k, c->bytes, c->len);
  c->sink += k.lo;
}

typedef struct kernel_ctx {
  tsr_ir_kernel_t *kernel;
  size_t bytes;
} kernel_ctx_t;

static void canon_once(void *p) {
  kernel_ctx_t *c = p;
  uint8_t *bytes = NULL;
  die_on_error(tsr_ir_canon_kernel(c->kernel, &bytes, &c->bytes), "canon");
  tsr_free(bytes);
}

static void key_once(void *p) {
  kernel_ctx_t *c = p;
  tsr_runtime_key_t *key = NULL;
  die_on_error(tsr_runtime_key_create(c->kernel, NULL, &key), "key");
  tsr_runtime_key_destroy(key);
}

static tsr_ir_module_t *load_example(const char *name) {
  char path[4096];
  const char *root = getenv("TSR_SOURCE_ROOT");
  snprintf(path, sizeof path, "%s/kernels/examples/%s.tsr",
           root ? root : TSR_BENCH_SOURCE_ROOT, name);
  tsr_ir_module_t *m = NULL;
  die_on_error(tsr_ir_module_parse_file(path, &m), path);
  return m;
}

static void bench_keys(void) {
  printf("== (1) key computation\n");
  size_t sizes[] = {1024, 64 * 1024, 1 << 20, 16 << 20};
  uint8_t *buf = malloc(16 << 20);
  for (size_t i = 0; i < (16u << 20); i++) buf[i] = (uint8_t)(i * 2654435761u >> 13);
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
    hash_ctx_t c = {buf, sizes[s], 0};
    long iters = (long)((quick ? 64e6 : 512e6) / (double)sizes[s]) + 1;
    double t = best_per_call(hash_once, &c, iters, 5);
    printf("XXH3-128 over %8zu bytes of key material: %7.2f GB/s (%.0f ns)\n", sizes[s],
           (double)sizes[s] / t * 1e-9, t * 1e9);
  }
  free(buf);
  const char *examples[] = {"add", "matmul", "softmax", "gather_prefetch"};
  for (size_t e = 0; e < sizeof examples / sizeof examples[0]; e++) {
    tsr_ir_module_t *m = load_example(examples[e]);
    kernel_ctx_t c = {tsr_ir_module_kernel(m, 0), 0};
    double tc = best_per_call(canon_once, &c, quick ? 2000 : 20000, 5);
    double tk = best_per_call(key_once, &c, quick ? 2000 : 20000, 5);
    printf("%-16s canonical bytes %5zu: serialize %6.2f us (%5.2f GB/s), whole key "
           "%6.2f us\n",
           examples[e], c.bytes, tc * 1e6, (double)c.bytes / tc * 1e-9, tk * 1e6);
    tsr_ir_module_destroy(m);
  }
}

/* ---- (2) memory hits ---- */

enum { MEM_KEYS = 50 };

typedef struct mem_bench {
  tsr_memcache_t *cache;
  tsr_cache_key_t keys[MEM_KEYS];
  uint8_t material[MEM_KEYS][1024];
  long iters;
  pthread_barrier_t barrier;
  double seconds[8];
} mem_bench_t;

typedef struct mem_thread {
  mem_bench_t *b;
  int id;
} mem_thread_t;

static tsr_status_t build_value(void *ctx, void **out_value, size_t *out_bytes) {
  *out_value = malloc(64);
  *out_bytes = 64;
  return *out_value ? NULL : TSR_STATUS(TSR_OUT_OF_MEMORY, "out of memory");
}

static void *mem_worker(void *p) {
  mem_thread_t *t = p;
  mem_bench_t *b = t->b;
  pthread_barrier_wait(&b->barrier);
  double t0 = now_seconds();
  unsigned x = (unsigned)t->id * 7919u + 1;
  for (long i = 0; i < b->iters; i++) {
    x = x * 1103515245u + 12345u;
    tsr_memcache_entry_t *e = tsr_memcache_get(b->cache, &b->keys[(x >> 16) % MEM_KEYS]);
    if (!e) abort();
    tsr_memcache_entry_release(e);
  }
  b->seconds[t->id] = now_seconds() - t0;
  return NULL;
}

static void bench_memory(void) {
  printf("\n== (2) in-memory hit latency (1 KiB keys, 50 entries)\n");
  mem_bench_t *b = calloc(1, sizeof *b);
  tsr_memcache_options_t o;
  tsr_memcache_options_initialize(&o);
  die_on_error(tsr_memcache_create(&o, &b->cache), "memcache");
  for (int k = 0; k < MEM_KEYS; k++) {
    for (int i = 0; i < 1024; i++) b->material[k][i] = (uint8_t)(k * 31 + i);
    tsr_cache_key_make(&b->keys[k], b->material[k], sizeof b->material[k]);
    tsr_memcache_entry_t *e = NULL;
    die_on_error(tsr_memcache_get_or_build(b->cache, &b->keys[k], build_value, NULL, free,
                                           &e, NULL),
                 "build");
    tsr_memcache_entry_release(e);
  }
  b->iters = quick ? 200000 : 2000000;
  int counts[] = {1, 2, 8};
  for (size_t c = 0; c < 3; c++) {
    int n = counts[c];
    double best = 1e30;
    for (int rep = 0; rep < 3; rep++) {
      pthread_barrier_init(&b->barrier, NULL, (unsigned)n);
      pthread_t th[8];
      mem_thread_t args[8];
      for (int i = 0; i < n; i++) {
        args[i] = (mem_thread_t){b, i};
        pthread_create(&th[i], NULL, mem_worker, &args[i]);
      }
      double worst = 0;
      for (int i = 0; i < n; i++) {
        pthread_join(th[i], NULL);
        if (b->seconds[i] > worst) worst = b->seconds[i];
      }
      pthread_barrier_destroy(&b->barrier);
      if (worst < best) best = worst;
    }
    printf("%d thread%s: %6.1f ns per hit per thread (%5.1f M hits/s in all)\n", n,
           n == 1 ? " " : "s", best / (double)b->iters * 1e9,
           (double)b->iters * n / best * 1e-6);
  }
  tsr_memcache_destroy(b->cache);
  free(b);
}

/* ---- (3) disk hits ---- */

typedef struct disk_ctx {
  tsr_disk_cache_t *cache;
  tsr_cache_key_t key;
  size_t expect;
} disk_ctx_t;

static void disk_get_once(void *p) {
  disk_ctx_t *c = p;
  void *payload = NULL;
  size_t size = 0;
  die_on_error(tsr_disk_cache_get(c->cache, &c->key, &payload, &size), "disk get");
  if (size != c->expect) abort();
  tsr_disk_cache_free(payload);
}

/* A disk cache in a new directory made from the mkdtemp template `dir`. */
static tsr_disk_cache_t *open_temp_cache(char *dir) {
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    exit(1);
  }
  tsr_disk_cache_options_t o;
  tsr_disk_cache_options_initialize(&o);
  o.dir = dir;
  tsr_disk_cache_t *cache = NULL;
  die_on_error(tsr_disk_cache_open(&o, &cache), "disk open");
  return cache;
}

static void close_temp_cache(tsr_disk_cache_t *cache, const char *dir) {
  uint64_t removed = 0;
  die_on_error(tsr_disk_cache_clear(cache, &removed), "clear");
  tsr_disk_cache_close(cache);
  rmdir(dir);
}

static void bench_disk(void) {
  printf("\n== (3) disk hit latency (page cache warm)\n");
  char dir[] = "/tmp/tessera-bench-cache-XXXXXX";
  tsr_disk_cache_t *cache = open_temp_cache(dir);
  uint8_t material[1500];
  for (size_t i = 0; i < sizeof material; i++) material[i] = (uint8_t)i;
  size_t sizes[] = {25, 10u << 20};
  const char *names[] = {"small (25 B, as the interpreter stores)", "10 MiB (random)"};
  for (int s = 0; s < 2; s++) {
    material[0] = (uint8_t)s;
    disk_ctx_t c = {cache, {0}, sizes[s]};
    tsr_cache_key_make(&c.key, material, sizeof material);
    uint8_t *payload = malloc(sizes[s]);
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < sizes[s]; i++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      payload[i] = (uint8_t)x;
    }
    die_on_error(tsr_disk_cache_put(cache, &c.key, payload, sizes[s]), "disk put");
    double t = best_per_call(disk_get_once, &c, s == 0 ? (quick ? 2000 : 20000) : (quick ? 5 : 30), 5);
    printf("%-40s %9.1f us per hit\n", names[s], t * 1e6);
    free(payload);
  }
  close_temp_cache(cache, dir);
}

/* ---- (4) the interpreter's hit path ---- */

static void prepare_hit_once(void *p) {
  kernel_ctx_t *c = p;
  tsr_interp_program_t *program = NULL;
  die_on_error(tsr_runtime_prepare(c->kernel, NULL, &program), "runtime prepare");
  tsr_interp_program_destroy(program);
}

static void verify_prepare_once(void *p) {
  kernel_ctx_t *c = p;
  tsr_interp_program_t *program = NULL;
  die_on_error(tsr_ir_verify_kernel(c->kernel), "verify");
  die_on_error(tsr_interp_program_prepare(c->kernel, NULL, &program), "prepare");
  tsr_interp_program_destroy(program);
}

static void bench_prepare(void) {
  printf("\n== (4) interpreter: cached prepare vs verify + prepare (per call)\n");
  const char *examples[] = {"add", "matmul", "softmax", "gather_prefetch", "ragged"};
  for (size_t e = 0; e < sizeof examples / sizeof examples[0]; e++) {
    tsr_ir_module_t *m = load_example(examples[e]);
    kernel_ctx_t c = {tsr_ir_module_kernel(m, 0), 0};
    long iters = quick ? 2000 : 20000;
    prepare_hit_once(&c); /* the miss */
    double hit = best_per_call(prepare_hit_once, &c, iters, 5);
    double cold = best_per_call(verify_prepare_once, &c, iters, 5);
    printf("%-16s hit %6.2f us   verify + prepare %7.2f us   (%.1fx)\n", examples[e],
           hit * 1e6, cold * 1e6, cold / hit);
    tsr_ir_module_destroy(m);
  }
}

/* ---- (5) verifying against a disk lookup ---- */

static void verify_once(void *p) {
  kernel_ctx_t *c = p;
  die_on_error(tsr_ir_verify_kernel(c->kernel), "verify");
}

static void bench_verdict(void) {
  printf("\n== (5) verify vs a disk hit of a 25-byte record under the kernel's key\n");
  char dir[] = "/tmp/tessera-bench-cache-XXXXXX";
  tsr_disk_cache_t *cache = open_temp_cache(dir);
  static const char record[] = "tessera interp: verified\n";
  const char *examples[] = {"add", "matmul", "softmax", "gather_prefetch", "ragged"};
  for (size_t e = 0; e < sizeof examples / sizeof examples[0]; e++) {
    tsr_ir_module_t *m = load_example(examples[e]);
    kernel_ctx_t k = {tsr_ir_module_kernel(m, 0), 0};
    tsr_runtime_key_t *key = NULL;
    die_on_error(tsr_runtime_key_create(k.kernel, NULL, &key), "key");
    disk_ctx_t c = {cache, *tsr_runtime_key_get(key), sizeof record - 1};
    die_on_error(tsr_disk_cache_put(cache, &c.key, record, sizeof record - 1), "disk put");
    long iters = quick ? 2000 : 20000;
    double get = best_per_call(disk_get_once, &c, iters, 5);
    double verify = best_per_call(verify_once, &k, iters, 5);
    printf("%-16s key material %5zu B: disk hit %6.2f us   verify %6.2f us\n", examples[e],
           c.key.len, get * 1e6, verify * 1e6);
    tsr_runtime_key_destroy(key);
    tsr_ir_module_destroy(m);
  }
  close_temp_cache(cache, dir);
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--quick") == 0) {
      quick = 1;
    } else {
      fprintf(stderr, "usage: bench_cache [--quick]\n");
      return 2;
    }
  }
  setenv("TESSERA_CACHE", "off", 1); /* (4) measures the memory path */
  bench_keys();
  bench_memory();
  if (!getenv("BENCH_NO_DISK")) bench_disk();
  bench_prepare();
  if (!getenv("BENCH_NO_DISK")) bench_verdict();
  return 0;
}
