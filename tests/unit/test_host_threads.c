/* Host threads (docs/semantics.md, "Host threads"): which kernels may give a
 * core's split points to several host threads (tsr_ir_host_split_ok), how
 * runtime/cpu_run.c shares them (contiguous parts, each point once, the
 * process's pool), and that a run that reports anything is run again on one
 * thread, so its first error is a serial run's, its progress never goes
 * back. The "compiled kernels" are C functions with the entry point's
 * signature (lower/lower_api.h) that walk their points as generated code
 * does. Then the interpreter's split (interp/run.c): the same outputs,
 * statistics and reports as one thread. In suite 'cache', so that it also
 * runs under ThreadSanitizer. */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include <fenv.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/pool.h"
#include "interp/interp_internal.h"
#include "ir/ir.h"
#include "lower/lower_api.h"
#include "runtime/runtime_internal.h"
#include "tests/harness.h"
#include "tests/unit/interp_fixture.h"

/* ---- Which kernels split --------------------------------------------------- */

static tsr_ir_module_t *parse(const char *text) {
  tsr_ir_module_t *m = NULL;
  tsr_status_t s = tsr_ir_module_parse(TSR_SV("t.tsr"), (tsr_string_view_t){text, strlen(text)}, &m);
  if (s) {
    printf("# %s\n", tsr_status_message(s));
    tsr_status_free(s);
    return NULL;
  }
  return m;
}

/* Whether the first kernel of `text` may split; *why copied into `why`. */
static bool split_ok(const char *text, char *why, size_t size) {
  tsr_ir_module_t *m = parse(text);
  if (!m) return false;
  const char *reason = NULL;
  bool ok = tsr_ir_host_split_ok(tsr_ir_module_kernel(m, 0), &reason);
  snprintf(why, size, "%s", reason ? reason : "");
  tsr_ir_module_destroy(m);
  return ok;
}

#define HEAD(grid, sem)                                                        \
  "kernel @k\n  grid(" grid ") semantics(" sem ")\n"                           \
  "  in %x: f32[64, 8] vmem block[8, 8] map(%i, %j) -> (%i, 0)\n"

TSR_TEST(matmul_like_kernels_split) {
  char why[128];
  TSR_CHECK(split_ok(HEAD("8, 4", "parallel, arbitrary")
                     "  out %y: f32[64, 8] vmem block[8, 8] map(%i, %j) -> (%i, 0)\n"
                     "{\n"
                     "  %j = program_id 1 : i32\n"
                     "  %z = const 0 : i32\n"
                     "  %first = eq %j, %z : i1\n"
                     "  if %first {\n"
                     "    %c = const 0.0 : f32[8, 8]\n"
                     "    store %y[:, :], %c\n"
                     "  }\n"
                     "  %v = load %x[:, :] : f32[8, 8]\n"
                     "  %w = load %y[:, :] : f32[8, 8]\n"
                     "  %s = add %v, %w : f32[8, 8]\n"
                     "  store %y[:, :], %s\n"
                     "}\n",
                     why, sizeof why));
}

/* A scratch ref set at the first step of each split point (pl.when(k == 0),
 * as flash attention's accumulators) splits; one read before it is written
 * at a point's first step (values carried from the previous point) does not. */
TSR_TEST(scratch_splits_only_when_each_point_writes_it_first) {
  char why[128];
  TSR_CHECK(split_ok(HEAD("8, 4", "parallel, arbitrary")
                     "  out %y: f32[64, 8] vmem block[8, 8] map(%i, %j) -> (%i, 0)\n"
                     "  scratch %acc: vmem f32[8, 8]\n"
                     "{\n"
                     "  %j = program_id 1 : i32\n"
                     "  %z = const 0 : i32\n"
                     "  %first = eq %z, %j : i1\n"
                     "  if %first {\n"
                     "    %c = const 0.0 : f32[8, 8]\n"
                     "    store %acc[:, :], %c\n"
                     "  }\n"
                     "  %v = load %x[:, :] : f32[8, 8]\n"
                     "  %a = load %acc[:, :] : f32[8, 8]\n"
                     "  %s = add %v, %a : f32[8, 8]\n"
                     "  store %acc[:, :], %s\n"
                     "  store %y[:, :], %s\n"
                     "}\n",
                     why, sizeof why));
  /* JAX's m_scratch_ref[0] = ... of a scratch whose leading dim is 1 */
  TSR_CHECK(split_ok(HEAD("8, 4", "parallel, arbitrary")
                     "  out %y: f32[64, 8] vmem block[8, 8] map(%i, %j) -> (%i, 0)\n"
                     "  scratch %m: vmem f32[1, 8, 8]\n"
                     "{\n"
                     "  %j = program_id 1 : i32\n"
                     "  %z = const 0 : i32\n"
                     "  %t = const true : i1\n"
                     "  %e = eq %j, %z : i1\n"
                     "  %first = and %t, %e : i1\n"
                     "  if %first {\n"
                     "    %c = const 0.0 : f32[8, 8]\n"
                     "    store %m[0, :, :], %c\n"
                     "  }\n"
                     "  %a = load %m[0, :, :] : f32[8, 8]\n"
                     "  store %y[:, :], %a\n"
                     "}\n",
                     why, sizeof why));
  /* the JAX bridge's pl.when(k == 0): `if (convert(k == 0) <= 0) {} else
   * {init}` */
  TSR_CHECK(split_ok(HEAD("8, 4", "parallel, arbitrary")
                     "  out %y: f32[64, 8] vmem block[8, 8] map(%i, %j) -> (%i, 0)\n"
                     "  scratch %acc: vmem f32[8, 8]\n"
                     "{\n"
                     "  %j = program_id 1 : i32\n"
                     "  %z = const 0 : i32\n"
                     "  %e = eq %j, %z : i1\n"
                     "  %n = convert %e : i32\n"
                     "  %no = le %n, %z : i1\n"
                     "  if %no {\n"
                     "  } else {\n"
                     "    %c = const 0.0 : f32[8, 8]\n"
                     "    store %acc[:, :], %c\n"
                     "  }\n"
                     "  %a = load %acc[:, :] : f32[8, 8]\n"
                     "  store %y[:, :], %a\n"
                     "}\n",
                     why, sizeof why));
  /* the same with `ge`: the init runs only where k >= 1, not at a start */
  TSR_CHECK(!split_ok(HEAD("8, 4", "parallel, arbitrary")
                      "  out %y: f32[64, 8] vmem block[8, 8] map(%i, %j) -> (%i, 0)\n"
                      "  scratch %acc: vmem f32[8, 8]\n"
                      "{\n"
                      "  %j = program_id 1 : i32\n"
                      "  %z = const 0 : i32\n"
                      "  %e = eq %j, %z : i1\n"
                      "  %n = convert %e : i32\n"
                      "  %no = ge %n, %z : i1\n"
                      "  if %no {\n"
                      "  } else {\n"
                      "    %c = const 0.0 : f32[8, 8]\n"
                      "    store %acc[:, :], %c\n"
                      "  }\n"
                      "  %a = load %acc[:, :] : f32[8, 8]\n"
                      "  store %y[:, :], %a\n"
                      "}\n",
                      why, sizeof why));
  /* the condition names the split dim: not true at every point's start */
  TSR_CHECK(!split_ok(HEAD("8, 4", "parallel, arbitrary")
                      "  out %y: f32[64, 8] vmem block[8, 8] map(%i, %j) -> (%i, 0)\n"
                      "  scratch %acc: vmem f32[8, 8]\n"
                      "{\n"
                      "  %i = program_id 0 : i32\n"
                      "  %z = const 0 : i32\n"
                      "  %first = eq %i, %z : i1\n"
                      "  if %first {\n"
                      "    %c = const 0.0 : f32[8, 8]\n"
                      "    store %acc[:, :], %c\n"
                      "  }\n"
                      "  %a = load %acc[:, :] : f32[8, 8]\n"
                      "  store %y[:, :], %a\n"
                      "}\n",
                      why, sizeof why));
  TSR_CHECK(strstr(why, "scratch") != NULL);
  /* read first: carries the previous point's values */
  TSR_CHECK(!split_ok(HEAD("8", "parallel")
                      "  out %y: f32[64, 8] vmem block[8, 8] map(%i) -> (%i, 0)\n"
                      "  scratch %acc: vmem f32[8, 8]\n"
                      "{\n"
                      "  %a = load %acc[:, :] : f32[8, 8]\n"
                      "  %v = load %x[:, :] : f32[8, 8]\n"
                      "  %s = add %v, %a : f32[8, 8]\n"
                      "  store %acc[:, :], %s\n"
                      "  store %y[:, :], %s\n"
                      "}\n",
                      why, sizeof why));
  /* a partial store first is not all of it */
  TSR_CHECK(!split_ok(HEAD("8", "parallel")
                      "  out %y: f32[64, 8] vmem block[8, 8] map(%i) -> (%i, 0)\n"
                      "  scratch %acc: vmem f32[8, 8]\n"
                      "{\n"
                      "  %v = load %x[0:4, :] : f32[4, 8]\n"
                      "  store %acc[0:4, :], %v\n"
                      "  %a = load %acc[:, :] : f32[8, 8]\n"
                      "  store %y[:, :], %a\n"
                      "}\n",
                      why, sizeof why));
}

TSR_TEST(prints_outputs_fixed_along_the_split_and_input_writes_do_not_split) {
  char why[128];
  TSR_CHECK(!split_ok(HEAD("8", "parallel")
                      "  out %y: f32[64, 8] vmem block[8, 8] map(%i) -> (%i, 0)\n"
                      "{\n"
                      "  %v = load %x[:, :] : f32[8, 8]\n"
                      "  print \"{}\", %v\n"
                      "  store %y[:, :], %v\n"
                      "}\n",
                      why, sizeof why));
  TSR_CHECK(strstr(why, "prints") != NULL);
  TSR_CHECK(!split_ok(HEAD("8", "parallel")
                      "  out %y: f32[8, 8] vmem block[8, 8] map(%i) -> (0, 0)\n"
                      "{\n"
                      "  %v = load %x[:, :] : f32[8, 8]\n"
                      "  store %y[:, :], %v\n"
                      "}\n",
                      why, sizeof why));
  TSR_CHECK(strstr(why, "not a split grid index") != NULL); /* the same block at every point */
  /* two points per block (i / 2): parts could write one block at once */
  TSR_CHECK(!split_ok(HEAD("8", "parallel")
                      "  out %y: f32[32, 8] vmem block[8, 8] map(%i) {\n"
                      "    %two = const 2 : i32\n"
                      "    %h = div %i, %two : i32\n"
                      "    %z = const 0 : i32\n"
                      "    yield %h, %z\n"
                      "  }\n"
                      "{\n"
                      "  %v = load %x[:, :] : f32[8, 8]\n"
                      "  store %y[:, :], %v\n"
                      "}\n",
                      why, sizeof why));
  TSR_CHECK(strstr(why, "not a split grid index") != NULL);
  TSR_CHECK(!split_ok(HEAD("8", "parallel")
                      "  out %y: f32[64, 8] vmem block[8, 8] map(%i) -> (%i, 0)\n"
                      "{\n"
                      "  %v = load %x[:, :] : f32[8, 8]\n"
                      "  store %x[:, :], %v\n"
                      "  store %y[:, :], %v\n"
                      "}\n",
                      why, sizeof why));
  TSR_CHECK(strstr(why, "input") != NULL);
  /* no parallel dim: nothing to split */
  TSR_CHECK(!split_ok(HEAD("8", "arbitrary")
                      "  out %y: f32[64, 8] vmem block[8, 8] map(%i) -> (%i, 0)\n"
                      "{\n"
                      "  %v = load %x[:, :] : f32[8, 8]\n"
                      "  store %y[:, :], %v\n"
                      "}\n",
                      why, sizeof why));
}

/* ---- How the points are shared --------------------------------------------- */

static const char grid_tsr[] = HEAD("64, 4", "parallel, arbitrary")
    "  out %y: f32[64, 8] vmem block[8, 8] map(%i, %j) -> (%i, 0)\n"
    "{\n"
    "  %v = load %x[:, :] : f32[8, 8]\n"
    "  store %y[:, :], %v\n"
    "  %no = const false : i1\n"
    "  assert %no, \"bad point\"\n"
    "}\n";

enum { POINTS = 64, INNER = 4, MAX_CALLS = 64 };

static tsr_ir_module_t *grid_module;
static tsr_cpu_info_t *grid_info;
static uint32_t assert_site, num_sites;

typedef struct self {
  tsr_lower_rt_fn fn;
  void *ctx;
  int64_t plo, phi;
} self_t;

static self_t self_of(void **args) {
  self_t s;
  s.fn = (tsr_lower_rt_fn)(uintptr_t) * (int64_t *)args[0];
  s.ctx = (void *)(uintptr_t) * (int64_t *)args[1];
  s.plo = *(int64_t *)args[4];
  s.phi = *(int64_t *)args[5];
  return s;
}

static atomic_int visits[POINTS * INNER];
static atomic_int calls;
static int64_t call_lo[MAX_CALLS], call_hi[MAX_CALLS];
static int fail_at[2] = {-1, -1}; /* split points whose first step asserts */

/* Walks its points as generated code does: a grid step asks the runtime
 * (TSR_RT_STEP with the point) before its body, which asserts at fail_at. */
static void grid_entry(void **args) {
  self_t s = self_of(args);
  int c = atomic_fetch_add(&calls, 1);
  if (c < MAX_CALLS) {
    call_lo[c] = s.plo;
    call_hi[c] = s.phi;
  }
  int64_t budget = 0;
  for (int64_t p = s.plo; p < s.phi; p++)
    for (int64_t i = 0; i < INNER; i++) {
      int64_t lin = p * INNER + i;
      if (budget-- <= 0) {
        budget = s.fn(s.ctx, TSR_RT_STEP, num_sites, lin, 0, 0);
        if (budget < 0) return;
      }
      *(int64_t *)s.ctx = lin;
      atomic_fetch_add(&visits[lin], 1);
      if (i == 0 && (p == fail_at[0] || p == fail_at[1]))
        s.fn(s.ctx, TSR_RT_ASSERT, assert_site, 0, 0, 0);
    }
}

static void find_assert(void *ctx, const tsr_op_t *op, uint32_t position) {
  (void)ctx;
  if (op->opcode == TSR_OP_ASSERT) assert_site = position;
}

static void reset(void) {
  for (int i = 0; i < POINTS * INNER; i++) atomic_store(&visits[i], 0);
  atomic_store(&calls, 0);
}

static tsr_status_t run_grid(uint32_t threads, tsr_interp_options_t *o) {
  tsr_interp_options_t d;
  if (!o) {
    tsr_interp_options_initialize(&d);
    o = &d;
  }
  o->threads = threads;
  void *args[1] = {NULL};
  return tsr_cpu_run_with(grid_entry, grid_info, NULL, args, 0, o, NULL, NULL);
}

static bool each_point_once(void) {
  for (int i = 0; i < POINTS * INNER; i++)
    if (atomic_load(&visits[i]) != 1) return false;
  return true;
}

TSR_TEST(threads_share_the_points_in_contiguous_parts) {
  reset();
  TSR_CHECK_OK(run_grid(4, NULL));
  TSR_CHECK(each_point_once());
  TSR_CHECK_EQ_INT(atomic_load(&calls), 4);
  /* parts in any order of starting: together [0, 64), each 16 points */
  int64_t covered = 0;
  for (int c = 0; c < 4; c++) {
    TSR_CHECK_EQ_INT(call_hi[c] - call_lo[c], 16);
    TSR_CHECK_EQ_INT(call_lo[c] % 16, 0);
    covered += call_hi[c] - call_lo[c];
  }
  TSR_CHECK_EQ_INT(covered, POINTS);
  reset();
  TSR_CHECK_OK(run_grid(1, NULL));
  TSR_CHECK(each_point_once());
  TSR_CHECK_EQ_INT(atomic_load(&calls), 1);
  TSR_CHECK(call_lo[0] == 0 && call_hi[0] == POINTS);
  /* more threads than points: one per point */
  reset();
  TSR_CHECK_OK(run_grid(100, NULL));
  TSR_CHECK(each_point_once());
  TSR_CHECK_EQ_INT(atomic_load(&calls), POINTS);
}

TSR_TEST(simulated_cores_keep_one_thread_each) {
  tsr_interp_options_t o;
  tsr_interp_options_initialize(&o);
  o.cores = 2;
  reset();
  TSR_CHECK_OK(run_grid(8, &o));
  TSR_CHECK(each_point_once());
  TSR_CHECK_EQ_INT(atomic_load(&calls), 2);
}

/* The first error is the serial run's: a later part asserting first (in
 * time) is not what the run reports. */
TSR_TEST(a_run_that_reports_is_run_again_on_one_thread) {
  fail_at[0] = 50; /* part 3 of 4 */
  fail_at[1] = 5;  /* part 0: the first in grid order */
  reset();
  tsr_status_t s = run_grid(4, NULL);
  TSR_CHECK_EQ_INT(tsr_status_code(s), TSR_KERNEL_ERROR);
  TSR_CHECK(s && strstr(tsr_status_message(s), "grid point (5, 0)") != NULL);
  TSR_CHECK(s && strstr(tsr_status_message(s), "grid point (50, 0)") == NULL);
  /* four parts, then the whole grid once more on one thread */
  TSR_CHECK_EQ_INT(atomic_load(&calls), 5);
  char one[2048];
  snprintf(one, sizeof one, "%s", s ? tsr_status_message(s) : "");
  tsr_status_free(s);
  reset();
  s = run_grid(1, NULL);
  TSR_CHECK(s && strcmp(one, tsr_status_message(s)) == 0);
  TSR_CHECK_EQ_INT(atomic_load(&calls), 1);
  tsr_status_free(s);
  fail_at[0] = fail_at[1] = -1;
}

static uint64_t progress_seen[4096];
static atomic_int progress_calls;
static bool progress_back;

static void on_progress(void *user, uint64_t done, uint64_t total) {
  (void)user;
  (void)total;
  int n = atomic_fetch_add(&progress_calls, 1);
  if (n > 0 && n < 4096 && done < progress_seen[n - 1]) progress_back = true;
  if (n < 4096) progress_seen[n] = done;
}

TSR_TEST(progress_never_goes_back_when_a_run_is_run_again) {
  tsr_interp_options_t o;
  tsr_interp_options_initialize(&o);
  o.on_progress = on_progress;
  o.progress_interval = 0;
  fail_at[0] = 60;
  reset();
  atomic_store(&progress_calls, 0);
  progress_back = false;
  tsr_status_t s = run_grid(4, &o);
  TSR_CHECK_EQ_INT(tsr_status_code(s), TSR_KERNEL_ERROR);
  TSR_CHECK(atomic_load(&progress_calls) >= 1);
  TSR_CHECK(!progress_back);
  tsr_status_free(s);
  fail_at[0] = -1;
  /* a clean run ends with done == total */
  atomic_store(&progress_calls, 0);
  reset();
  TSR_CHECK_OK(run_grid(4, &o));
  int n = atomic_load(&progress_calls);
  TSR_CHECK(n >= 1 && n <= 4096 && progress_seen[n - 1] == POINTS * INNER);
}

/* Runs from several threads at once share the pool and all finish. */
static void *runner(void *p) {
  (void)p;
  for (int r = 0; r < 20; r++) {
    tsr_status_t s = run_grid(3, NULL);
    if (s) {
      tsr_status_free(s);
      return (void *)1;
    }
  }
  return NULL;
}

TSR_TEST(concurrent_runs_share_the_pool) {
  reset();
  pthread_t th[4];
  for (int i = 0; i < 4; i++) pthread_create(&th[i], NULL, runner, NULL);
  bool ok = true;
  for (int i = 0; i < 4; i++) {
    void *r;
    pthread_join(th[i], &r);
    ok = ok && r == NULL;
  }
  TSR_CHECK(ok);
  for (int i = 0; i < POINTS * INNER; i++) TSR_CHECK_EQ_INT(atomic_load(&visits[i]), 80);
}

TSR_TEST(the_default_is_the_cores_this_process_may_use) {
  TSR_CHECK_EQ_INT(tsr_host_threads(3), 3);
  unsetenv("TESSERA_THREADS");
  cpu_set_t set;
  CPU_ZERO(&set);
  TSR_CHECK(sched_getaffinity(0, sizeof set, &set) == 0);
  TSR_CHECK_EQ_INT(tsr_host_threads(0), CPU_COUNT(&set));
  setenv("TESSERA_THREADS", "5", 1);
  TSR_CHECK_EQ_INT(tsr_host_threads(0), 5);
  TSR_CHECK_EQ_INT(tsr_host_threads(2), 2); /* the option wins */
  setenv("TESSERA_THREADS", "junk", 1);
  TSR_CHECK_EQ_INT(tsr_host_threads(0), CPU_COUNT(&set));
  unsetenv("TESSERA_THREADS");
}

/* A pool thread inherits the floating-point environment of the thread that
 * created it (XLA's calls run with flush-to-zero); a task must run in its
 * caller's instead. Threads made under downward rounding, then tasks from a
 * caller that rounds to nearest: every task's 1/3 is the caller's. */
enum { FENV_TASKS = 48 };
static float fenv_results[FENV_TASKS];

static void divide_task(void *ctx, uint32_t i) {
  (void)ctx;
  volatile float one = 1.0f, three = 3.0f;
  fenv_results[i] = one / three;
}

static void *spawn_under_downward(void *unused) {
  (void)unused;
  fesetround(FE_DOWNWARD);
  tsr_pool_run(FENV_TASKS, divide_task, NULL);
  return NULL;
}

TSR_TEST(tasks_run_in_their_callers_floating_point_environment) {
  pthread_t th;
  pthread_create(&th, NULL, spawn_under_downward, NULL);
  pthread_join(th, NULL);
  volatile float one = 1.0f, three = 3.0f;
  const float want = one / three;
  bool all_downward = true;
  for (int i = 0; i < FENV_TASKS; i++) all_downward = all_downward && fenv_results[i] != want;
  TSR_CHECK(all_downward); /* the downward caller's tasks rounded down */
  tsr_pool_run(FENV_TASKS, divide_task, NULL);
  int same = 0;
  for (int i = 0; i < FENV_TASKS; i++) same += fenv_results[i] == want;
  TSR_CHECK_EQ_INT(same, FENV_TASKS);
}


/* ---- The interpreter --------------------------------------------------------- */

/* An accumulation over the arbitrary dim in scratch (flash attention's
 * pattern), rounding at every step, so that any change of order or of the
 * scratch a point starts from changes the bits; ASSERT_AT adds asserts at
 * two split points. */
#define ACC_TSR(asserts)                                                        \
  "kernel @acc\n  grid(64, 4) semantics(parallel, arbitrary)\n"                \
  "  in %x: f32[512, 8] vmem block[8, 8] map(%i, %j) -> (%i, 0)\n"             \
  "  out %y: f32[512, 8] vmem block[8, 8] map(%i, %j) -> (%i, 0)\n"            \
  "  scratch %acc: vmem f32[8, 8]\n"                                           \
  "{\n"                                                                        \
  "  %i = program_id 0 : i32\n"                                                \
  "  %j = program_id 1 : i32\n"                                                \
  "  %z = const 0 : i32\n"                                                     \
  "  %first = eq %j, %z : i1\n"                                                \
  "  if %first {\n"                                                            \
  "    %c = const 0.5 : f32[8, 8]\n"                                           \
  "    store %acc[:, :], %c\n"                                                 \
  "  }\n"                                                                      \
  "  %v = load %x[:, :] : f32[8, 8]\n"                                         \
  "  %a = load %acc[:, :] : f32[8, 8]\n"                                       \
  "  %p = mul %v, %a : f32[8, 8]\n"                                            \
  "  %s = add %p, %v : f32[8, 8]\n"                                            \
  "  store %acc[:, :], %s\n"                                                   \
  "  store %y[:, :], %s\n"                                                     \
  asserts                                                                      \
  "}\n"
#define ASSERT_AT                                                              \
  "  %five = const 5 : i32\n"                                                  \
  "  %fifty = const 50 : i32\n"                                                \
  "  %n5 = ne %i, %five : i1\n"                                                \
  "  %n50 = ne %i, %fifty : i1\n"                                              \
  "  %ok = and %n5, %n50 : i1\n"                                               \
  "  assert %ok, \"bad point\"\n"

/* The run memories a program keeps: one per part of its last split run. */
static int spares(const tsr_interp_program_t *p) {
  int n = 0;
  for (int i = 0; i < TSR_INTERP_SPARES; i++) n += atomic_load(&p->spare[i]) != NULL;
  return n;
}

static void fill_x(fixture_t *f) {
  float *x = f32(f, 0);
  for (int64_t i = 0; i < tsr_array_element_count(&f->arrays[0]); i++)
    x[i] = (float)(i % 97) * 0.37f - 11.0f;
}

/* Runs `text` with `threads` (and checks as `check` says): its status, its
 * output y copied to `y` (512 x 8), its stats and the spares it left. */
static tsr_status_t run_interp(const char *text, uint32_t threads, bool check, float *y,
                               tsr_interp_stats_t *stats, int *kept) {
  tsr_interp_options_t o;
  tsr_interp_options_initialize(&o);
  o.threads = threads;
  o.check = check;
  fixture_t f;
  tsr_status_t s = setup(&f, text, &o);
  if (!s) {
    fill_x(&f);
    s = run(&f);
    memcpy(y, f32(&f, 1), 512 * 8 * sizeof(float));
    if (stats) *stats = f.stats;
    if (kept) *kept = spares(f.program);
  }
  teardown(&f);
  return s;
}

static float y_one[512 * 8], y_many[512 * 8];

TSR_TEST(the_interpreter_splits_with_the_same_bits_and_stats) {
  for (int check = 0; check < 2; check++) {
    tsr_interp_stats_t one, many;
    int kept_one = 0, kept_many = 0;
    TSR_CHECK_OK(run_interp(ACC_TSR(""), 1, check, y_one, &one, &kept_one));
    TSR_CHECK_OK(run_interp(ACC_TSR(""), 4, check, y_many, &many, &kept_many));
    TSR_CHECK(memcmp(y_one, y_many, sizeof y_one) == 0);
    TSR_CHECK(y_one[0] != 0.0f && y_one[511 * 8 + 7] != 0.0f); /* every block written */
    TSR_CHECK_EQ_INT(kept_one, 1);
    TSR_CHECK_EQ_INT(kept_many, 4); /* four parts, each with its memory */
    TSR_CHECK_EQ_INT(many.grid_steps, 256);
    TSR_CHECK_EQ_INT(many.grid_steps, one.grid_steps);
    TSR_CHECK_EQ_INT(many.ops_executed, one.ops_executed);
    TSR_CHECK_EQ_INT(many.blocks_copied_in, one.blocks_copied_in);
    TSR_CHECK_EQ_INT(many.blocks_copied_out, one.blocks_copied_out);
    TSR_CHECK_EQ_INT(many.bytes_copied, one.bytes_copied);
  }
  /* a kernel that may not split (it prints) keeps to one thread */
  const char *printing = "kernel @p\n  grid(64) semantics(parallel)\n"
                         "  in %x: f32[512, 8] vmem block[8, 8] map(%i) -> (%i, 0)\n"
                         "  out %y: f32[512, 8] vmem block[8, 8] map(%i) -> (%i, 0)\n"
                         "{\n"
                         "  %v = load %x[:, :] : f32[8, 8]\n"
                         "  store %y[:, :], %v\n"
                         "  %i = program_id 0 : i32\n"
                         "  %z = const 70 : i32\n"
                         "  %never = eq %i, %z : i1\n"
                         "  if %never {\n"
                         "    print \"never\"\n"
                         "  }\n"
                         "}\n";
  int kept = 0;
  TSR_CHECK_OK(run_interp(printing, 4, true, y_many, NULL, &kept));
  TSR_CHECK_EQ_INT(kept, 1);
  TSR_CHECK(y_many[511 * 8 + 7] == (float)((511 * 8 + 7) % 97) * 0.37f - 11.0f);
}

/* The end-of-run report of never-written output elements names where the
 * run ended, the grid's last point, as on one thread. */
TSR_TEST(an_interpreter_split_reports_at_its_end_as_one_thread) {
  const char *half = "kernel @h\n  grid(64) semantics(parallel)\n"
                     "  in %x: f32[512, 8] vmem block[8, 8] map(%i) -> (%i, 0)\n"
                     "  out %y: f32[512, 8] vmem block[8, 8] map(%i) -> (%i, 0)\n"
                     "{\n"
                     "  %v = load %x[0:4, :] : f32[4, 8]\n"
                     "  store %y[0:4, :], %v\n"
                     "}\n";
  char text[2][1024];
  for (int t = 0; t < 2; t++) {
    tsr_interp_options_t o;
    tsr_interp_options_initialize(&o);
    o.threads = t ? 4 : 1;
    FILE *stream = tmpfile();
    fixture_t f;
    TSR_CHECK_OK(setup(&f, half, &o));
    f.warning_stream = stream;
    fill_x(&f);
    TSR_CHECK_OK(run(&f));
    TSR_CHECK_EQ_INT(f.stats.warnings, 1);
    rewind(stream);
    size_t n = stream ? fread(text[t], 1, sizeof text[t] - 1, stream) : 0;
    text[t][n] = 0;
    if (stream) fclose(stream);
    teardown(&f);
  }
  TSR_CHECK(strstr(text[0], "grid point (63)") != NULL);
  TSR_CHECK(strcmp(text[0], text[1]) == 0);
}

/* A later part asserting first (in time) is not what the run reports: the
 * run is run again on one thread, whose first error is at point (5, 0). */
TSR_TEST(an_interpreter_run_that_reports_is_run_again_on_one_thread) {
  tsr_status_t one = run_interp(ACC_TSR(ASSERT_AT), 1, true, y_one, NULL, NULL);
  tsr_status_t many = run_interp(ACC_TSR(ASSERT_AT), 4, true, y_many, NULL, NULL);
  TSR_CHECK_EQ_INT(tsr_status_code(many), TSR_KERNEL_ERROR);
  TSR_CHECK(many && strstr(tsr_status_message(many), "grid point (5, 0)") != NULL);
  TSR_CHECK(one && many && strcmp(tsr_status_message(one), tsr_status_message(many)) == 0);
  tsr_status_free(one);
  tsr_status_free(many);
}

TSR_TEST(interpreter_progress_counts_every_part_and_never_goes_back) {
  for (int failing = 0; failing < 2; failing++) {
    tsr_interp_options_t o;
    tsr_interp_options_initialize(&o);
    o.threads = 4;
    o.on_progress = on_progress;
    o.progress_interval = 0;
    fixture_t f;
    atomic_store(&progress_calls, 0);
    progress_back = false;
    tsr_status_t s = setup(&f, failing ? ACC_TSR(ASSERT_AT) : ACC_TSR(""), &o);
    if (!s) {
      fill_x(&f);
      s = run(&f);
    }
    int n = atomic_load(&progress_calls);
    TSR_CHECK(n >= 1 && !progress_back);
    if (failing) {
      TSR_CHECK_EQ_INT(tsr_status_code(s), TSR_KERNEL_ERROR);
      tsr_status_free(s);
    } else {
      TSR_CHECK_OK(s);
      TSR_CHECK(n <= 4096 && progress_seen[n - 1] == 256); /* done == total at the end */
    }
    teardown(&f);
  }
}

/* One program run from several threads at once, each split: the parts of
 * all runs share the pool and the program's spare memories. */
typedef struct interp_runner {
  const tsr_interp_program_t *program;
  bool ok;
} interp_runner_t;

static void *interp_runner(void *arg) {
  interp_runner_t *r = arg;
  int64_t dims[2] = {512, 8};
  tsr_array_t x, y;
  r->ok = false;
  if (tsr_array_initialize(TSR_DTYPE_F32, 2, dims, &x)) return NULL;
  if (tsr_array_initialize(TSR_DTYPE_F32, 2, dims, &y)) return NULL;
  float *xs = x.data;
  for (int64_t i = 0; i < 512 * 8; i++) xs[i] = (float)(i % 97) * 0.37f - 11.0f;
  tsr_array_t *ops[2] = {&x, &y};
  bool ok = true;
  for (int k = 0; k < 10 && ok; k++) {
    tsr_status_t s = tsr_interp_program_run(r->program, ops, 2, NULL);
    ok = s == NULL && memcmp(y.data, y_one, sizeof y_one) == 0;
    tsr_status_free(s);
  }
  tsr_array_deinitialize(&x);
  tsr_array_deinitialize(&y);
  r->ok = ok;
  return NULL;
}

TSR_TEST(concurrent_interpreter_runs_of_one_program) {
  TSR_CHECK_OK(run_interp(ACC_TSR(""), 1, true, y_one, NULL, NULL));
  tsr_interp_options_t o;
  tsr_interp_options_initialize(&o);
  o.threads = 3;
  fixture_t f;
  TSR_CHECK_OK(setup(&f, ACC_TSR(""), &o));
  interp_runner_t r[3];
  pthread_t th[3];
  for (int i = 0; i < 3; i++) {
    r[i] = (interp_runner_t){f.program, false};
    pthread_create(&th[i], NULL, interp_runner, &r[i]);
  }
  for (int i = 0; i < 3; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < 3; i++) TSR_CHECK(r[i].ok);
  TSR_CHECK(spares(f.program) >= 3 && spares(f.program) <= 9);
  teardown(&f);
}

/* ---- Whether a split pays ------------------------------------------------------ */

TSR_TEST(a_kernel_measures_both_ways_then_takes_the_faster) {
  unsetenv("TESSERA_SPLIT");
  tsr_split_cost_t c = {0};
  /* warm-up: split, one thread, split, one thread; the later sample of
   * each replaces the first */
  TSR_CHECK(tsr_split_pays(&c));
  tsr_split_learn(&c, 90000, 10, 2);
  TSR_CHECK(!tsr_split_pays(&c));
  tsr_split_learn(&c, 600, 10, 1);
  TSR_CHECK(tsr_split_pays(&c));
  tsr_split_learn(&c, 1000, 10, 2); /* 100 ns a point, split */
  TSR_CHECK(!tsr_split_pays(&c));
  tsr_split_learn(&c, 500, 10, 1); /* 50 ns on one thread */
  TSR_CHECK(atomic_load(&c.split_ns) == 100 && atomic_load(&c.serial_ns) == 50);
  int split = 0, i = 0;
  for (; i < 31; i++) split += tsr_split_pays(&c);
  TSR_CHECK_EQ_INT(split, 0);    /* one thread is faster */
  TSR_CHECK(tsr_split_pays(&c)); /* but one run in 32 tries the other */
  TSR_CHECK(!tsr_split_pays(&c));
  /* a slower run raises an estimate by an eighth at most, a faster one
   * lowers it at once; within 1.5x of each other (80 split, 87 on one
   * thread after five slow runs), the other is tried one run in 8 */
  tsr_split_learn(&c, 9000, 10, 2);
  TSR_CHECK(atomic_load(&c.split_ns) == 112);
  tsr_split_learn(&c, 800, 10, 2);
  TSR_CHECK(atomic_load(&c.split_ns) == 80);
  for (i = 0; i < 5; i++) tsr_split_learn(&c, 100000, 10, 1);
  /* 50 -> 56 -> 63 -> 70 -> 78 -> 87 */
  TSR_CHECK(atomic_load(&c.serial_ns) == 87);
  atomic_store(&c.runs, 0);
  for (split = 0, i = 0; i < 16; i++) split += tsr_split_pays(&c);
  TSR_CHECK_EQ_INT(split, 14);
  split = 0;
  tsr_split_cost_t fresh = {0};
  tsr_split_learn(&fresh, 0, 10, 1); /* too fast to see: still a sample */
  TSR_CHECK(atomic_load(&fresh.serial_ns) == 1);
  setenv("TESSERA_SPLIT", "always", 1);
  TSR_CHECK(tsr_split_pays(&c));
  tsr_split_learn(&c, 0, 10, 1);
  for (i = 0; i < 40; i++) split += !tsr_split_pays(&c);
  TSR_CHECK_EQ_INT(split, 0);
}

/* A kernel's first run splits and its second does not (each measured);
 * with TESSERA_SPLIT=always every run splits. */
TSR_TEST(a_kernels_first_runs_measure_both_ways) {
  tsr_cpu_info_t *info = NULL;
  TSR_CHECK_OK(tsr_cpu_info_create(tsr_ir_module_kernel(grid_module, 0), &info));
  if (!info) return;
  tsr_cpu_info_t *saved = grid_info;
  grid_info = info;
  unsetenv("TESSERA_SPLIT");
  reset();
  TSR_CHECK_OK(run_grid(4, NULL));
  TSR_CHECK_EQ_INT(atomic_load(&calls), 4);
  reset();
  TSR_CHECK_OK(run_grid(4, NULL));
  TSR_CHECK(each_point_once());
  TSR_CHECK_EQ_INT(atomic_load(&calls), 1);
  setenv("TESSERA_SPLIT", "always", 1);
  reset();
  TSR_CHECK_OK(run_grid(4, NULL));
  TSR_CHECK_EQ_INT(atomic_load(&calls), 4);
  grid_info = saved;
  tsr_cpu_info_destroy(info);

  /* the interpreter: one run memory per part of a split run */
  unsetenv("TESSERA_SPLIT");
  tsr_interp_options_t o;
  tsr_interp_options_initialize(&o);
  o.threads = 4;
  fixture_t f;
  tsr_status_t s = setup(&f, ACC_TSR(""), &o);
  TSR_CHECK_OK(s);
  if (!s) {
    fill_x(&f);
    TSR_CHECK_OK(run(&f));
    TSR_CHECK_EQ_INT(spares(f.program), 4);
    TSR_CHECK(atomic_load(&f.program->split_cost.split_ns) > 0);
    tsr_interp_free_spares(f.program);
    TSR_CHECK_OK(run(&f));
    TSR_CHECK_EQ_INT(spares(f.program), 1);
    TSR_CHECK(atomic_load(&f.program->split_cost.serial_ns) > 0);
    setenv("TESSERA_SPLIT", "always", 1);
    tsr_interp_free_spares(f.program);
    TSR_CHECK_OK(run(&f));
    TSR_CHECK_EQ_INT(spares(f.program), 4);
  }
  teardown(&f);
  /* a run that cannot split (one thread) weighs nothing and teaches nothing */
  unsetenv("TESSERA_SPLIT");
  o.threads = 1;
  s = setup(&f, ACC_TSR(""), &o);
  TSR_CHECK_OK(s);
  if (!s) {
    fill_x(&f);
    TSR_CHECK_OK(run(&f));
    TSR_CHECK_OK(run(&f));
    TSR_CHECK_EQ_INT(atomic_load(&f.program->split_cost.serial_samples), 0);
    TSR_CHECK_EQ_INT(atomic_load(&f.program->split_cost.split_samples), 0);
  }
  teardown(&f);
  setenv("TESSERA_SPLIT", "always", 1);
}

int main(void) {
  /* Every run that may split does, however small (the tests of the
   * learned choice set their own). */
  setenv("TESSERA_SPLIT", "always", 1);
  grid_module = parse(grid_tsr);
  tsr_status_t s = grid_module ? NULL : TSR_STATUS(TSR_INVALID_ARGUMENT, "grid kernel");
  if (!s) {
    tsr_ir_kernel_t *k = tsr_ir_module_kernel(grid_module, 0);
    num_sites = tsr_ir_walk_ops(k, find_assert, NULL);
    s = tsr_cpu_info_create(k, &grid_info);
  }
  if (s) {
    printf("Bail out! %s\n", tsr_status_message(s));
    return 1;
  }
  TSR_RUN(matmul_like_kernels_split);
  TSR_RUN(tasks_run_in_their_callers_floating_point_environment);
  TSR_RUN(scratch_splits_only_when_each_point_writes_it_first);
  TSR_RUN(prints_outputs_fixed_along_the_split_and_input_writes_do_not_split);
  TSR_RUN(threads_share_the_points_in_contiguous_parts);
  TSR_RUN(simulated_cores_keep_one_thread_each);
  TSR_RUN(a_run_that_reports_is_run_again_on_one_thread);
  TSR_RUN(progress_never_goes_back_when_a_run_is_run_again);
  TSR_RUN(concurrent_runs_share_the_pool);
  TSR_RUN(the_default_is_the_cores_this_process_may_use);
  TSR_RUN(the_interpreter_splits_with_the_same_bits_and_stats);
  TSR_RUN(an_interpreter_split_reports_at_its_end_as_one_thread);
  TSR_RUN(an_interpreter_run_that_reports_is_run_again_on_one_thread);
  TSR_RUN(interpreter_progress_counts_every_part_and_never_goes_back);
  TSR_RUN(concurrent_interpreter_runs_of_one_program);
  TSR_RUN(a_kernel_measures_both_ways_then_takes_the_faster);
  TSR_RUN(a_kernels_first_runs_measure_both_ways);
  tsr_cpu_info_destroy(grid_info);
  tsr_ir_module_destroy(grid_module);
  return tsr_test_done();
}
