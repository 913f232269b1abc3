/* The runtime's cache of prepared programs (tsr_runtime_prepare), in memory:
 * hits skip verification and preparation, a hit for a renamed and reformatted
 * kernel reports that kernel's own names and locations, options are part of
 * the key, failed verification caches nothing, and threads asking at once
 * build once. The disk side is tested through the CLI
 * (tests/cli/test_cache_run.sh): it needs separate processes. */
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "interp/interp_runtime.h"
#include "runtime/runtime_internal.h"
#include "tests/harness.h"

static tsr_ir_module_t *parse(const char *file, const char *text) {
  tsr_ir_module_t *m = NULL;
  tsr_status_t s = tsr_ir_module_parse((tsr_string_view_t){file, strlen(file)},
                                       (tsr_string_view_t){text, strlen(text)}, &m);
  if (s) {
    printf("# parse %s: %s\n", file, tsr_status_message(s));
    tsr_status_free(s);
    return NULL;
  }
  return m;
}

static tsr_runtime_cache_stats_t stats(void) {
  tsr_runtime_cache_stats_t c;
  tsr_runtime_cache_stats(&c);
  return c;
}

/* Runs `p` on arrays for `k`'s operands: inputs from a seed, outputs zero.
 * Returns output 0's first `n` floats in `out`. */
static tsr_status_t run_kernel(const tsr_interp_program_t *p, const tsr_ir_kernel_t *k,
                               float *out, size_t n) {
  tsr_array_t arrays[8];
  tsr_array_t *ptrs[8];
  size_t count = 0;
  tsr_status_t s = NULL;
  int64_t first_out = -1;
  for (size_t i = 0; i < tsr_ir_kernel_operand_count(k) && !s && count < 8; i++) {
    tsr_ir_operand_info_t info;
    tsr_ir_kernel_operand_info(k, i, &info);
    if (info.role == TSR_ROLE_SCRATCH) continue;
    if (info.role == TSR_ROLE_OUT) {
      if (first_out < 0) first_out = (int64_t)count;
      s = tsr_array_initialize(info.dtype, info.rank, info.dims, &arrays[count]);
    } else {
      s = tsr_runtime_random_array(&info, 7 + i, &arrays[count]);
    }
    if (!s) ptrs[count] = &arrays[count], count++;
  }
  if (!s) s = tsr_interp_program_run(p, ptrs, count, NULL);
  if (!s && out && first_out >= 0)
    memcpy(out, arrays[first_out].data, n * sizeof *out);
  for (size_t i = 0; i < count; i++) tsr_array_deinitialize(&arrays[i]);
  return s;
}

static const char add_text[] =
    "kernel @add\n"
    "  grid(4) semantics(parallel)\n"
    "  in %a: f32[32, 128] vmem block[8, 128] map(%i) -> (%i, 0)\n"
    "  in %b: f32[32, 128] vmem block[8, 128] map(%i) -> (%i, 0)\n"
    "  out %c: f32[32, 128] vmem block[8, 128] map(%i) -> (%i, 0)\n"
    "{\n"
    "  %x = load %a[:, :] : f32[8, 128]\n"
    "  %y = load %b[:, :] : f32[8, 128]\n"
    "  %z = add %x, %y : f32[8, 128]\n"
    "  store %c[:, :], %z\n"
    "}\n";

TSR_TEST(second_prepare_is_a_hit_with_the_same_result) {
  tsr_ir_module_t *m = parse("add.tsr", add_text);
  TSR_CHECK(m);
  if (!m) return;
  tsr_ir_kernel_t *k = tsr_ir_module_kernel(m, 0);
  tsr_runtime_cache_stats_t before = stats();
  tsr_interp_program_t *p1 = NULL, *p2 = NULL, *direct = NULL;
  TSR_CHECK_OK(tsr_runtime_prepare(k, NULL, &p1));
  tsr_runtime_cache_stats_t mid = stats();
  TSR_CHECK_OK(tsr_runtime_prepare(k, NULL, &p2));
  tsr_runtime_cache_stats_t after = stats();
  TSR_CHECK_EQ_INT(mid.memory_builds - before.memory_builds, 1);
  TSR_CHECK_EQ_INT(after.memory_builds - mid.memory_builds, 0);
  TSR_CHECK_EQ_INT(after.memory_hits - mid.memory_hits, 1);
  TSR_CHECK_OK(tsr_interp_program_prepare(k, NULL, &direct));
  float r1[256], r2[256], r3[256];
  TSR_CHECK_OK(run_kernel(p1, k, r1, 256));
  TSR_CHECK_OK(run_kernel(p2, k, r2, 256));
  TSR_CHECK_OK(run_kernel(direct, k, r3, 256));
  TSR_CHECK(memcmp(r1, r3, sizeof r1) == 0);
  TSR_CHECK(memcmp(r2, r3, sizeof r2) == 0);
  bool nonzero = false;
  for (int i = 0; i < 256; i++) nonzero |= r3[i] != 0.0f;
  TSR_CHECK(nonzero);
  /* The programs outlive a clear of the cache. */
  tsr_runtime_cache_clear();
  TSR_CHECK_OK(run_kernel(p1, k, r1, 256));
  TSR_CHECK(memcmp(r1, r3, sizeof r1) == 0);
  tsr_interp_program_destroy(p1);
  tsr_interp_program_destroy(p2);
  tsr_interp_program_destroy(direct);
  tsr_ir_module_destroy(m);
}

/* The same kernel twice: the second renamed, commented, reformatted, in
 * another file. Its run must be a hit and its diagnostic must name its own
 * file, line, kernel and operand. */
TSR_TEST(hit_for_a_renamed_kernel_reports_its_own_names_and_lines) {
  static const char first[] =
      "kernel @first\n"
      "  grid(4) semantics(arbitrary)\n"
      "  out %o: f32[8, 128] vmem\n"
      "{\n"
      "  %i = program_id 0 : i32\n"
      "  %three = const 3 : i32\n"
      "  %s = mul %i, %three : i32\n"
      "  %v = const 1.0 : f32[4, 128]\n"
      "  store %o[ds(%s, 4), :], %v\n"
      "}\n";
  static const char second[] =
      "// the same kernel, renamed\n"
      "\n"
      "kernel @second\n"
      "  grid(4) semantics(arbitrary)\n"
      "\n"
      "  out %result: f32[8, 128] vmem\n"
      "{\n"
      "  %pid = program_id 0 : i32   // which step\n"
      "  %k = const 3 : i32\n"
      "\n"
      "  %start = mul %pid, %k : i32\n"
      "  %ones = const 1.0 : f32[4, 128]\n"
      "    store %result[ds(%start, 4), :], %ones\n"
      "}\n";
  tsr_ir_module_t *m1 = parse("first.tsr", first), *m2 = parse("second.tsr", second);
  TSR_CHECK(m1 && m2);
  if (!m1 || !m2) {
    tsr_ir_module_destroy(m1);
    tsr_ir_module_destroy(m2);
    return;
  }
  tsr_ir_kernel_t *k1 = tsr_ir_module_kernel(m1, 0), *k2 = tsr_ir_module_kernel(m2, 0);
  tsr_interp_program_t *p1 = NULL, *p2 = NULL;
  TSR_CHECK_OK(tsr_runtime_prepare(k1, NULL, &p1));
  tsr_runtime_cache_stats_t mid = stats();
  TSR_CHECK_OK(tsr_runtime_prepare(k2, NULL, &p2));
  tsr_runtime_cache_stats_t after = stats();
  TSR_CHECK_EQ_INT(after.memory_builds - mid.memory_builds, 0);
  TSR_CHECK_EQ_INT(after.memory_hits - mid.memory_hits, 1);
  if (!p1 || !p2) goto out;
  tsr_status_t s1 = run_kernel(p1, k1, NULL, 0);
  tsr_status_t s2 = run_kernel(p2, k2, NULL, 0);
  TSR_CHECK_EQ_INT(tsr_status_code(s1), TSR_KERNEL_ERROR);
  TSR_CHECK_EQ_INT(tsr_status_code(s2), TSR_KERNEL_ERROR);
  const char *msg1 = tsr_status_message(s1), *msg2 = tsr_status_message(s2);
  TSR_CHECK(strstr(msg1, "first.tsr:9:") && strstr(msg1, "@first") && strstr(msg1, "%o "));
  TSR_CHECK(strstr(msg2, "second.tsr:13:") && strstr(msg2, "@second") &&
            strstr(msg2, "%result"));
  TSR_CHECK(!strstr(msg2, "first.tsr") && !strstr(msg2, "@first") && !strstr(msg2, "%o "));
  tsr_status_free(s1);
  tsr_status_free(s2);
out:
  tsr_interp_program_destroy(p1);
  tsr_interp_program_destroy(p2);
  tsr_ir_module_destroy(m1);
  tsr_ir_module_destroy(m2);
}

TSR_TEST(options_that_change_the_result_change_the_key) {
  tsr_ir_module_t *m = parse("add.tsr", add_text);
  if (!m) return;
  tsr_ir_kernel_t *k = tsr_ir_module_kernel(m, 0);
  tsr_interp_options_t o;
  tsr_interp_options_initialize(&o);
  tsr_interp_program_t *p = NULL;
  TSR_CHECK_OK(tsr_runtime_prepare(k, &o, &p));
  tsr_interp_program_destroy(p);
  tsr_runtime_cache_stats_t before = stats();
  o.uninit = TSR_UNINIT_ZERO;
  TSR_CHECK_OK(tsr_runtime_prepare(k, &o, &p));
  tsr_interp_program_destroy(p);
  o.uninit = TSR_UNINIT_NAN;
  o.detect_races = true;
  TSR_CHECK_OK(tsr_runtime_prepare(k, &o, &p));
  tsr_interp_program_destroy(p);
  /* Strictness and when a run stops are not part of the key. */
  o.detect_races = false;
  o.strict = true;
  o.max_steps = 1000;
  TSR_CHECK_OK(tsr_runtime_prepare(k, &o, &p));
  tsr_interp_program_destroy(p);
  tsr_runtime_cache_stats_t after = stats();
  TSR_CHECK_EQ_INT(after.memory_builds - before.memory_builds, 2);
  TSR_CHECK_EQ_INT(after.memory_hits - before.memory_hits, 1);
  tsr_ir_module_destroy(m);
}

/* One cached program bound to two callers: the run-time options (here
 * strictness) are each caller's. */
TSR_TEST(run_time_options_are_each_callers) {
  static const char text[] =
      "kernel @p\n"
      "  out %o: f32[16, 128] vmem\n"
      "{\n"
      "  %v = const 2.0 : f32[8, 128]\n"
      "  store %o[0:8, :], %v\n"
      "}\n";
  tsr_ir_module_t *m = parse("p.tsr", text);
  if (!m) return;
  tsr_ir_kernel_t *k = tsr_ir_module_kernel(m, 0);
  tsr_interp_options_t o;
  tsr_interp_options_initialize(&o);
  tsr_interp_program_t *lenient = NULL, *strict = NULL;
  tsr_runtime_cache_stats_t before = stats();
  TSR_CHECK_OK(tsr_runtime_prepare(k, &o, &lenient));
  o.strict = true;
  TSR_CHECK_OK(tsr_runtime_prepare(k, &o, &strict));
  tsr_runtime_cache_stats_t after = stats();
  TSR_CHECK_EQ_INT(after.memory_builds - before.memory_builds, 1);
  TSR_CHECK_EQ_INT(after.memory_hits - before.memory_hits, 1);
  /* Half the output is never written: a warning (on stderr), an error
   * under strict. */
  if (lenient) TSR_CHECK_OK(run_kernel(lenient, k, NULL, 0));
  if (strict) TSR_CHECK_STATUS(run_kernel(strict, k, NULL, 0), TSR_KERNEL_ERROR);
  tsr_interp_program_destroy(lenient);
  tsr_interp_program_destroy(strict);
  tsr_ir_module_destroy(m);
}

/* The C API's cancel flag, set by another thread while the interpreter
 * runs an infinite loop: the run stops with the report (suite 'cache': it
 * runs under ThreadSanitizer). */
static volatile int stop_flag;

static void *set_stop_flag(void *p) {
  (void)p;
  struct timespec ts = {0, 20 * 1000 * 1000};
  nanosleep(&ts, NULL); /* the run has started, or it stops at its first step */
  __atomic_store_n(&stop_flag, 1, __ATOMIC_RELAXED);
  return NULL;
}

TSR_TEST(cancel_flag_set_by_another_thread_stops_the_run) {
  static const char text[] =
      "kernel @spin\n"
      "  out %o: f32[8, 128] vmem\n"
      "{\n"
      "  %v = const 2.0 : f32[8, 128]\n"
      "  store %o[:, :], %v\n"
      "  %go = const true : i1\n"
      "  while {\n"
      "    condition %go\n"
      "  } do {\n"
      "    yield\n"
      "  }\n"
      "}\n";
  tsr_ir_module_t *m = parse("spin.tsr", text);
  if (!m) return;
  tsr_ir_kernel_t *k = tsr_ir_module_kernel(m, 0);
  tsr_interp_options_t o;
  tsr_interp_options_initialize(&o);
  o.cancel = &stop_flag;
  stop_flag = 0;
  tsr_interp_program_t *p = NULL;
  TSR_CHECK_OK(tsr_runtime_prepare(k, &o, &p));
  pthread_t t;
  TSR_CHECK(pthread_create(&t, NULL, set_stop_flag, NULL) == 0);
  tsr_status_t s = run_kernel(p, k, NULL, 0);
  pthread_join(t, NULL);
  TSR_CHECK_EQ_INT(tsr_status_code(s), TSR_KERNEL_ERROR);
  TSR_CHECK(s && strstr(tsr_status_message(s), "spin.tsr:7:3: error: kernel @spin, grid point "
                                               "(): 'while': run stopped: cancelled"));
  tsr_status_free(s);
  tsr_interp_program_destroy(p);
  tsr_ir_module_destroy(m);
}

TSR_TEST(failed_verification_caches_nothing) {
  static const char text[] =
      "kernel @bad\n"
      "  out %o: f32[8, 128] vmem\n"
      "{\n"
      "  %v = const 1.0 : f32[8, 64]\n"
      "  store %o[:, :], %v\n"
      "}\n";
  tsr_ir_module_t *m = parse("bad.tsr", text);
  if (!m) return;
  tsr_ir_kernel_t *k = tsr_ir_module_kernel(m, 0);
  tsr_runtime_cache_stats_t before = stats();
  for (int round = 0; round < 2; round++) {
    tsr_interp_program_t *p = NULL;
    tsr_status_t s = tsr_runtime_prepare(k, NULL, &p);
    TSR_CHECK_EQ_INT(tsr_status_code(s), TSR_VERIFY_ERROR);
    TSR_CHECK(s && strstr(tsr_status_message(s), "bad.tsr:5:"));
    TSR_CHECK(!p);
    tsr_status_free(s);
  }
  tsr_runtime_cache_stats_t after = stats();
  TSR_CHECK_EQ_INT(after.memory_entries, before.memory_entries);
  TSR_CHECK_EQ_INT(after.memory_hits, before.memory_hits);
  tsr_ir_module_destroy(m);
}

/* ---- Threads ---- */

enum { THREADS = 8 };

typedef struct thread_arg {
  pthread_barrier_t *barrier;
  tsr_ir_kernel_t *kernel;
  tsr_status_t status;
  float result[256];
} thread_arg_t;

static void *prepare_and_run(void *p) {
  thread_arg_t *a = p;
  pthread_barrier_wait(a->barrier);
  tsr_interp_program_t *program = NULL;
  a->status = tsr_runtime_prepare(a->kernel, NULL, &program);
  if (!a->status) a->status = run_kernel(program, a->kernel, a->result, 256);
  tsr_interp_program_destroy(program);
  return NULL;
}

TSR_TEST(threads_asking_at_once_build_once) {
  /* A kernel no other test uses (grid 2), so the key is new. */
  static const char text[] =
      "kernel @mul\n"
      "  grid(2) semantics(parallel)\n"
      "  in %a: f32[16, 128] vmem block[8, 128] map(%i) -> (%i, 0)\n"
      "  out %c: f32[16, 128] vmem block[8, 128] map(%i) -> (%i, 0)\n"
      "{\n"
      "  %x = load %a[:, :] : f32[8, 128]\n"
      "  %z = mul %x, %x : f32[8, 128]\n"
      "  store %c[:, :], %z\n"
      "}\n";
  tsr_ir_module_t *modules[THREADS];
  thread_arg_t args[THREADS];
  pthread_t threads[THREADS];
  pthread_barrier_t barrier;
  pthread_barrier_init(&barrier, NULL, THREADS);
  tsr_runtime_cache_stats_t before = stats();
  for (int i = 0; i < THREADS; i++) { /* one module per thread: not shared */
    modules[i] = parse("mul.tsr", text);
    args[i] = (thread_arg_t){.barrier = &barrier, .kernel = tsr_ir_module_kernel(modules[i], 0)};
  }
  for (int i = 0; i < THREADS; i++)
    TSR_CHECK(pthread_create(&threads[i], NULL, prepare_and_run, &args[i]) == 0);
  for (int i = 0; i < THREADS; i++) pthread_join(threads[i], NULL);
  tsr_runtime_cache_stats_t after = stats();
  TSR_CHECK_EQ_INT(after.memory_builds - before.memory_builds, 1);
  for (int i = 0; i < THREADS; i++) {
    TSR_CHECK_OK(args[i].status);
    TSR_CHECK(memcmp(args[i].result, args[0].result, sizeof args[0].result) == 0);
    tsr_ir_module_destroy(modules[i]);
  }
  pthread_barrier_destroy(&barrier);
}

int main(void) {
  /* In-memory behaviour only; the disk cache is tested across processes. */
  setenv("TESSERA_CACHE", "off", 1);
  TSR_RUN(second_prepare_is_a_hit_with_the_same_result);
  TSR_RUN(hit_for_a_renamed_kernel_reports_its_own_names_and_lines);
  TSR_RUN(options_that_change_the_result_change_the_key);
  TSR_RUN(run_time_options_are_each_callers);
  TSR_RUN(cancel_flag_set_by_another_thread_stops_the_run);
  TSR_RUN(failed_verification_caches_nothing);
  TSR_RUN(threads_asking_at_once_build_once);
  return tsr_test_done();
}
