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

enum { SPLIT_MIN_US_DEFAULT = 200 };

/* $TESSERA_SPLIT_MIN_US, read at each call (tests change it). */
static uint64_t split_min_ns(void) {
  const char *env = getenv("TESSERA_SPLIT_MIN_US");
  if (env && *env) {
    char *end = NULL;
    unsigned long long v = strtoull(env, &end, 10);
    if (end && !*end) return v > UINT64_MAX / 1000 ? UINT64_MAX : (uint64_t)v * 1000;
  }
  return (uint64_t)SPLIT_MIN_US_DEFAULT * 1000;
}

bool tsr_split_pays(const tsr_split_cost_t *cost, uint64_t points) {
  uint64_t min = split_min_ns();
  if (min == 0) return true;
  uint64_t per = atomic_load_explicit(&cost->point_ns, memory_order_relaxed);
  if (per == 0) return true;
  return points >= (min + per - 1) / per;
}

void tsr_split_learn(tsr_split_cost_t *cost, uint64_t elapsed_ns, uint64_t points,
                     uint32_t threads) {
  if (!points) return;
  uint64_t per = elapsed_ns / points * (threads ? threads : 1);
  atomic_store_explicit(&cost->point_ns, per ? per : 1, memory_order_relaxed);
}

uint64_t tsr_split_clock_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}
