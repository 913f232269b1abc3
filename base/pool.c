/* Host threads (docs/semantics.md, "Host threads"): how many a caller may
 * use, and one pool of them, made lazily and kept, so that a run split over
 * host threads (or a long kernel's code generation) starts no thread of its
 * own after the first.
 *
 * tsr_pool_run hands tasks 1..n-1 of a batch to the pool and runs task 0 on
 * the caller's thread; while it waits it runs its own batch's tasks that no
 * pool thread has taken yet, so a batch finishes even when every pool
 * thread is busy with other runs' batches (no deadlock, however many runs
 * share the pool). A fork()ed child starts with an empty pool. */
#define _GNU_SOURCE
#include <fenv.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/base_internal.h"
#include "base/pool.h"

/* Threads the pool keeps at most; a run asking for more shares them. */
#define POOL_MAX 256

typedef struct pool_task {
  struct pool_task *next;
  struct pool_batch *batch;
  uint32_t index;
} pool_task_t;

typedef struct pool_batch {
  void (*fn)(void *ctx, uint32_t index);
  void *ctx;
  /* the caller's floating-point environment (rounding, flush-to-zero):
   * a pool thread keeps the one of the thread that created it, which may
   * be any earlier caller's (XLA sets flush-to-zero around its calls) */
  fenv_t env;
  uint32_t left; /* tasks not finished, under pool.mu */
  pthread_cond_t done;
} pool_batch_t;

static struct {
  pthread_mutex_t mu;
  pthread_cond_t work;
  pool_task_t *head, *tail; /* tasks not taken */
  uint32_t threads, idle;
} pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, NULL, 0, 0};

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

/* In a fork()ed child only the forking thread lives: forget the others. */
static void pool_after_fork(void) {
  pthread_mutex_init(&pool.mu, NULL);
  pthread_cond_init(&pool.work, NULL);
  pool.head = pool.tail = NULL;
  pool.threads = pool.idle = 0;
}

static void register_atfork(void) { pthread_atfork(NULL, NULL, pool_after_fork); }

/* Under pool.mu: runs `t`, unlocking around it, and counts it finished. */
static void run_task(pool_task_t *t) {
  pool_batch_t *b = t->batch;
  pthread_mutex_unlock(&pool.mu);
  fenv_t own;
  fegetenv(&own);
  fesetenv(&b->env);
  b->fn(b->ctx, t->index);
  fesetenv(&own);
  pthread_mutex_lock(&pool.mu);
  if (--b->left == 0) pthread_cond_broadcast(&b->done);
}

/* Under pool.mu: takes the first task (of `batch` when not NULL). */
static pool_task_t *take(const pool_batch_t *batch) {
  pool_task_t **at = &pool.head, *prev = NULL;
  for (pool_task_t *t = pool.head; t; prev = t, t = t->next) {
    if (batch && t->batch != batch) {
      at = &t->next;
      continue;
    }
    *at = t->next;
    if (pool.tail == t) pool.tail = prev;
    return t;
  }
  return NULL;
}

static void *pool_main(void *unused) {
  (void)unused;
  pthread_mutex_lock(&pool.mu);
  for (;;) {
    pool_task_t *t = take(NULL);
    if (!t) {
      pool.idle++;
      pthread_cond_wait(&pool.work, &pool.mu);
      pool.idle--;
      continue;
    }
    run_task(t);
  }
  return NULL;
}

void tsr_pool_run(uint32_t n, void (*fn)(void *ctx, uint32_t index), void *ctx) {
  if (n <= 1) {
    if (n == 1) fn(ctx, 0);
    return;
  }
  pthread_once(&atfork_once, register_atfork);
  pool_task_t *tasks = tsr_calloc(n, sizeof *tasks);
  pool_batch_t batch = {.fn = fn, .ctx = ctx, .left = n, .done = PTHREAD_COND_INITIALIZER};
  fegetenv(&batch.env);
  if (!tasks) { /* no memory: the caller's thread runs them all */
    for (uint32_t i = 0; i < n; i++) fn(ctx, i);
    return;
  }
  pthread_mutex_lock(&pool.mu);
  for (uint32_t i = 1; i < n; i++) {
    tasks[i] = (pool_task_t){NULL, &batch, i};
    if (pool.tail) pool.tail->next = &tasks[i];
    else pool.head = &tasks[i];
    pool.tail = &tasks[i];
  }
  /* Threads for the tasks no idle thread takes, up to POOL_MAX; one that
   * cannot start leaves its tasks to the others and to this thread. */
  uint32_t want = n - 1;
  while (pool.threads < want && pool.threads < POOL_MAX) {
    pthread_t th;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&th, &attr, pool_main, NULL);
    pthread_attr_destroy(&attr);
    if (rc != 0) break;
    pool.threads++;
  }
  pthread_cond_broadcast(&pool.work);
  tasks[0] = (pool_task_t){NULL, &batch, 0};
  run_task(&tasks[0]);
  while (batch.left) {
    pool_task_t *t = take(&batch);
    if (t) run_task(t);
    else pthread_cond_wait(&batch.done, &pool.mu);
  }
  pthread_mutex_unlock(&pool.mu);
  pthread_cond_destroy(&batch.done);
  tsr_free(tasks);
}

uint32_t tsr_host_threads(uint32_t requested) {
  if (requested) return requested;
  const char *env = getenv("TESSERA_THREADS");
  if (env && *env) {
    char *end = NULL;
    unsigned long v = strtoul(env, &end, 10);
    if (end && !*end && v >= 1) return v > 4096 ? 4096 : (uint32_t)v;
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    int c = CPU_COUNT(&set);
    if (c >= 1) return (uint32_t)c;
  }
  long c = sysconf(_SC_NPROCESSORS_ONLN);
  return c >= 1 ? (uint32_t)c : 1;
}

/* ---- Whether a split pays --------------------------------------------------- */

/* One run in 32 tries the slower way; one in 8 when the two are within
 * 1.5x of each other, where a passing load (another process, XLA's own
 * threads still spinning after its work) turns the choice most often. */
enum { SPLIT_PROBE_EVERY = 32, SPLIT_PROBE_CLOSE = 8, SPLIT_WARM_SAMPLES = 2 };

bool tsr_split_pays(tsr_split_cost_t *cost) {
  const char *env = getenv("TESSERA_SPLIT"); /* read at each call: tests set it */
  if (env && strcmp(env, "always") == 0) return true;
  uint32_t nsplit = atomic_load_explicit(&cost->split_samples, memory_order_relaxed);
  uint32_t nserial = atomic_load_explicit(&cost->serial_samples, memory_order_relaxed);
  if (nsplit < SPLIT_WARM_SAMPLES || nserial < SPLIT_WARM_SAMPLES) return nsplit <= nserial;
  uint64_t split = atomic_load_explicit(&cost->split_ns, memory_order_relaxed);
  uint64_t serial = atomic_load_explicit(&cost->serial_ns, memory_order_relaxed);
  bool faster = split < serial;
  uint64_t lo = faster ? split : serial, hi = faster ? serial : split;
  uint32_t every = hi < lo + lo / 2 ? SPLIT_PROBE_CLOSE : SPLIT_PROBE_EVERY;
  uint32_t n = atomic_fetch_add_explicit(&cost->runs, 1, memory_order_relaxed);
  return n % every == every - 1 ? !faster : faster;
}

void tsr_split_learn(tsr_split_cost_t *cost, uint64_t elapsed_ns, uint64_t points,
                     uint32_t threads) {
  if (!points) return;
  bool split = threads > 1;
  _Atomic(uint64_t) *slot = split ? &cost->split_ns : &cost->serial_ns;
  _Atomic(uint32_t) *count = split ? &cost->split_samples : &cost->serial_samples;
  uint64_t sample = elapsed_ns / points;
  if (!sample) sample = 1;
  /* The warm-up's samples replace (the first is often cold). After them
   * the estimate is what the way can do: a faster sample lowers it at
   * once, a slower one raises it by an eighth at most. A split's time is
   * two-valued on a busy host (the pool's thread woken late leaves its
   * part to the caller), and its fast runs are what it can do; a lasting
   * slowdown still shows within a few samples. */
  uint32_t n = atomic_fetch_add_explicit(count, 1, memory_order_relaxed);
  uint64_t old = atomic_load_explicit(slot, memory_order_relaxed);
  uint64_t cap = old + old / 8;
  uint64_t value = n < SPLIT_WARM_SAMPLES || sample < cap ? sample : cap;
  atomic_store_explicit(slot, value ? value : 1, memory_order_relaxed);
}

uint64_t tsr_split_clock_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}
