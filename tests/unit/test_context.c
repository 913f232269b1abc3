/* Unit tests for what a context owns (tessera/api.h): its allocator, which
 * every allocation of its executables, runs and results goes through (and
 * whose failures are out-of-memory errors, never crashes), and its own
 * in-memory caches, which other contexts and the process do not share; and
 * its and its executables' lifetimes (destroyed during a run, or in either
 * order: never freed under a user).
 * Suite 'cache': it also runs under ASan and TSan (core threads of the cpu
 * backend allocate through the context's allocator). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "runtime/runtime_internal.h" /* the process's cache, which contexts leave alone */
#include "tests/harness.h"

static const char twice_tsr[] =
    "kernel @twice\n"
    "  grid(4) semantics(parallel)\n"
    "  in %x: f32[32, 128] vmem block[8, 128] map(%i) -> (%i, 0)\n"
    "  out %y: f32[32, 128] vmem block[8, 128] map(%i) -> (%i, 0)\n"
    "  scratch %t: vmem f32[8, 128]\n"
    "{\n"
    "  %v = load %x[:, :] : f32[8, 128]\n"
    "  store %t[:, :], %v\n"
    "  %u = load %t[:, :] : f32[8, 128]\n"
    "  %w = add %u, %v : f32[8, 128]\n"
    "  store %y[:, :], %w\n"
    "}\n";

/* An allocator that counts, and fails every allocation once `budget`
 * allocations were made (budget < 0: never). */
typedef struct counting {
  atomic_long allocations, releases, live_bytes, failures;
  atomic_long bad_alignment;
  long budget;
} counting_t;

static void *counting_allocate(void *user, size_t size, size_t alignment) {
  counting_t *c = user;
  if (alignment < 16 || (alignment & (alignment - 1))) atomic_fetch_add(&c->bad_alignment, 1);
  if (c->budget >= 0 && atomic_load(&c->allocations) >= c->budget) {
    atomic_fetch_add(&c->failures, 1);
    return NULL;
  }
  void *p = NULL;
  if (posix_memalign(&p, alignment, size ? size : 1) != 0) return NULL;
  atomic_fetch_add(&c->allocations, 1);
  atomic_fetch_add(&c->live_bytes, (long)size);
  return p;
}

static void counting_release(void *user, void *block, size_t size) {
  counting_t *c = user;
  atomic_fetch_add(&c->releases, 1);
  atomic_fetch_sub(&c->live_bytes, (long)size);
  free(block);
}

static void counting_initialize(counting_t *c, long budget) {
  memset(c, 0, sizeof *c);
  c->budget = budget;
}

static tsr_status_t context_with(counting_t *c, tsr_context_t **out) {
  tsr_context_options_t o;
  tsr_context_options_initialize(&o);
  o.allocator = (tsr_allocator_t){counting_allocate, counting_release, c};
  o.output.print = tsr_output_discard;
  o.output.warning = tsr_output_discard;
  return tsr_context_create(&o, out);
}

static tsr_ir_module_t *parse_twice(void) {
  tsr_ir_module_t *m = NULL;
  tsr_status_t s = tsr_ir_module_parse((tsr_string_view_t){"twice.tsr", 9},
                                       (tsr_string_view_t){twice_tsr, strlen(twice_tsr)}, &m);
  if (s) {
    printf("# parse: %s\n", tsr_status_message(s));
    tsr_status_free(s);
  }
  return m;
}

/* Creates an executable of @twice in `ctx`, runs it once on `cores` cores
 * and checks y = 2x when it ran. Returns the first failure's status (owned
 * by the caller). */
static tsr_status_t create_and_run(tsr_context_t *ctx, const tsr_ir_kernel_t *kernel,
                                   tsr_backend_t backend, uint32_t cores) {
  tsr_executable_options_t eo;
  tsr_executable_options_initialize(&eo);
  eo.backend = backend;
  eo.run.cores = cores;
  tsr_executable_t *exe = NULL;
  tsr_status_t s = tsr_executable_create(ctx, kernel, &eo, &exe);
  if (s) return s;
  int64_t dims[2] = {32, 128};
  tsr_array_t x, y;
  memset(&x, 0, sizeof x);
  memset(&y, 0, sizeof y);
  s = tsr_array_initialize(TSR_DTYPE_F32, 2, dims, &x);
  if (!s) s = tsr_array_initialize(TSR_DTYPE_F32, 2, dims, &y);
  tsr_run_result_t *result = NULL;
  if (!s) {
    for (int i = 0; i < 32 * 128; i++) ((float *)x.data)[i] = (float)i;
    tsr_array_t *operands[] = {&x, &y};
    s = tsr_executable_run(exe, operands, 2, NULL, &result);
  }
  if (!s) {
    bool doubled = true;
    for (int i = 0; i < 32 * 128; i++) doubled = doubled && ((float *)y.data)[i] == 2.0f * i;
    TSR_CHECK(doubled);
  }
  tsr_run_result_destroy(result);
  tsr_array_deinitialize(&x);
  tsr_array_deinitialize(&y);
  tsr_executable_destroy(exe);
  return s;
}

/* Everything the context, its executable and its run allocate goes
 * through the allocator, and all of it comes back. */
static void allocator_used_and_balanced(tsr_backend_t backend, uint32_t cores) {
  tsr_ir_module_t *m = parse_twice();
  if (!m) {
    TSR_FAIL_AT("parse");
    return;
  }
  counting_t c;
  counting_initialize(&c, -1);
  tsr_context_t *ctx = NULL;
  TSR_CHECK_OK(context_with(&c, &ctx));
  long after_context = atomic_load(&c.allocations);
  TSR_CHECK(after_context > 0); /* the context itself and its caches */
  if (ctx) TSR_CHECK_OK(create_and_run(ctx, tsr_ir_module_kernel(m, 0), backend, cores));
  /* the program (or loaded kernel) and the run's buffers */
  TSR_CHECK(atomic_load(&c.allocations) > after_context + 3);
  /* the prepared program stays in the context's cache until it goes */
  TSR_CHECK(atomic_load(&c.live_bytes) > 0);
  tsr_context_destroy(ctx);
  TSR_CHECK_EQ_INT(atomic_load(&c.live_bytes), 0);
  TSR_CHECK_EQ_INT(atomic_load(&c.releases), atomic_load(&c.allocations));
  TSR_CHECK_EQ_INT(atomic_load(&c.bad_alignment), 0);
  tsr_ir_module_destroy(m);
}

TSR_TEST(allocator_interp) { allocator_used_and_balanced(TSR_BACKEND_INTERP, 1); }
TSR_TEST(allocator_interp_two_cores) { allocator_used_and_balanced(TSR_BACKEND_INTERP, 2); }
TSR_TEST(allocator_cpu_two_cores) { allocator_used_and_balanced(TSR_BACKEND_CPU, 2); }

/* An allocator that runs dry at every possible point gives
 * TSR_OUT_OF_MEMORY (or success, once the budget suffices), never a crash,
 * and leaks nothing (ASan checks the process's side, the counters ours). */
TSR_TEST(allocator_failure_is_out_of_memory) {
  tsr_ir_module_t *m = parse_twice();
  if (!m) {
    TSR_FAIL_AT("parse");
    return;
  }
  long budget = 0, ooms = 0;
  for (; budget < 100000; budget++) {
    counting_t c;
    counting_initialize(&c, budget);
    tsr_context_t *ctx = NULL;
    tsr_status_t s = context_with(&c, &ctx);
    if (!s) s = create_and_run(ctx, tsr_ir_module_kernel(m, 0), TSR_BACKEND_INTERP, 2);
    tsr_status_code_t code = tsr_status_code(s);
    tsr_status_free(s);
    tsr_context_destroy(ctx);
    if (code != TSR_OK && code != TSR_OUT_OF_MEMORY) {
      TSR_FAIL_AT("budget %ld: %s, not out of memory", budget, tsr_status_code_name(code));
      break;
    }
    if (atomic_load(&c.live_bytes) != 0) {
      TSR_FAIL_AT("budget %ld: %ld bytes never released", budget, (long)atomic_load(&c.live_bytes));
      break;
    }
    if (code == TSR_OK) break;
    TSR_CHECK(atomic_load(&c.failures) > 0); /* the failure was the allocator's */
    ooms++;
  }
  printf("# %ld budgets ran out of memory before %ld allocations sufficed\n", ooms, budget);
  TSR_CHECK(ooms > 10 && budget < 100000);
  tsr_ir_module_destroy(m);
}

TSR_TEST(allocate_without_release_is_invalid) {
  tsr_context_options_t o;
  tsr_context_options_initialize(&o);
  counting_t c;
  counting_initialize(&c, -1);
  o.allocator.allocate = counting_allocate;
  o.allocator.user = &c;
  tsr_context_t *ctx = NULL;
  TSR_CHECK_STATUS(tsr_context_create(&o, &ctx), TSR_INVALID_ARGUMENT);
  TSR_CHECK(ctx == NULL);
  TSR_CHECK_EQ_INT(atomic_load(&c.allocations), 0);
}

/* Each context has its own cache of prepared programs: a second executable
 * of the kernel is a hit in the same context, a miss in another one, and
 * the process's cache sees neither. */
TSR_TEST(caches_are_the_contexts) {
  tsr_ir_module_t *m = parse_twice();
  tsr_context_t *a = NULL, *b = NULL;
  TSR_CHECK_OK(tsr_context_create(NULL, &a));
  TSR_CHECK_OK(tsr_context_create(NULL, &b));
  if (!m || !a || !b) {
    TSR_FAIL_AT("setup");
    goto done;
  }
  const tsr_ir_kernel_t *k = tsr_ir_module_kernel(m, 0);
  tsr_runtime_cache_stats_t process_before, process_after;
  tsr_runtime_cache_stats(&process_before);
  TSR_CHECK_OK(create_and_run(a, k, TSR_BACKEND_INTERP, 1));
  TSR_CHECK_OK(create_and_run(a, k, TSR_BACKEND_INTERP, 1));
  TSR_CHECK_OK(create_and_run(b, k, TSR_BACKEND_INTERP, 1));
  tsr_context_stats_t sa, sb;
  tsr_context_stats(a, &sa);
  tsr_context_stats(b, &sb);
  TSR_CHECK_EQ_INT(sa.programs.memory_misses, 1);
  TSR_CHECK_EQ_INT(sa.programs.memory_hits, 1);
  TSR_CHECK_EQ_INT(sa.programs.memory_entries, 1);
  TSR_CHECK_EQ_INT(sb.programs.memory_misses, 1);
  TSR_CHECK_EQ_INT(sb.programs.memory_hits, 0);
  tsr_runtime_cache_stats(&process_after);
  TSR_CHECK_EQ_INT(process_after.memory_misses, process_before.memory_misses);
  TSR_CHECK_EQ_INT(process_after.memory_hits, process_before.memory_hits);
done:
  tsr_context_destroy(a);
  tsr_context_destroy(b);
  tsr_ir_module_destroy(m);
}

/* The same for compiled kernels: each context loads its own. */
TSR_TEST(compiled_caches_are_the_contexts) {
  tsr_ir_module_t *m = parse_twice();
  tsr_context_t *a = NULL, *b = NULL;
  TSR_CHECK_OK(tsr_context_create(NULL, &a));
  TSR_CHECK_OK(tsr_context_create(NULL, &b));
  if (m && a && b) {
    const tsr_ir_kernel_t *k = tsr_ir_module_kernel(m, 0);
    TSR_CHECK_OK(create_and_run(a, k, TSR_BACKEND_CPU, 1));
    TSR_CHECK_OK(create_and_run(a, k, TSR_BACKEND_CPU, 1));
    tsr_context_stats_t sa, sb;
    tsr_context_stats(a, &sa);
    TSR_CHECK_EQ_INT(sa.compiled.memory_misses, 1);
    TSR_CHECK_EQ_INT(sa.compiled.memory_hits, 1);
    TSR_CHECK_EQ_INT(sa.compiled.compiles, 1);
    tsr_context_stats(b, &sb);
    TSR_CHECK_EQ_INT(sb.compiled.memory_misses + sb.compiled.memory_hits, 0);
  } else {
    TSR_FAIL_AT("setup");
  }
  tsr_context_destroy(a);
  tsr_context_destroy(b);
  tsr_ir_module_destroy(m);
}

/* ---- Lifetimes: destroys during a run, and in either order ---------------- */

static const char twice_printing_tsr[] =
    "kernel @twice\n"
    "  grid(4) semantics(parallel)\n"
    "  in %x: f32[32, 128] vmem block[8, 128] map(%i) -> (%i, 0)\n"
    "  out %y: f32[32, 128] vmem block[8, 128] map(%i) -> (%i, 0)\n"
    "{\n"
    "  %i = program_id 0 : i32\n"
    "  print \"step {}\", %i\n"
    "  %v = load %x[:, :] : f32[8, 128]\n"
    "  %w = add %v, %v : f32[8, 128]\n"
    "  store %y[:, :], %w\n"
    "}\n";

/* A run held inside its first `print`: the callback says it is there and
 * waits to be let go; with `destroy_inside`, the callback itself destroys
 * the executable and the context instead. */
typedef struct held_run {
  pthread_mutex_t mutex;
  pthread_cond_t changed;
  bool inside, released, destroy_inside;
  tsr_executable_t *exe;
  tsr_context_t *ctx;
  counting_t *counts;
  long releases_before, releases_after; /* around the destroys, under the run */
  tsr_status_t status;
  bool doubled;
} held_run_t;

static void hold_on_print(void *user, const char *text, size_t size) {
  (void)text;
  (void)size;
  held_run_t *h = user;
  pthread_mutex_lock(&h->mutex);
  bool first = !h->inside;
  h->inside = true;
  pthread_cond_broadcast(&h->changed);
  if (first && h->destroy_inside) {
    h->releases_before = atomic_load(&h->counts->releases);
    tsr_executable_destroy(h->exe);
    tsr_context_destroy(h->ctx);
    h->releases_after = atomic_load(&h->counts->releases);
  }
  while (!h->released && !h->destroy_inside) pthread_cond_wait(&h->changed, &h->mutex);
  pthread_mutex_unlock(&h->mutex);
}

static void *run_held(void *arg) {
  held_run_t *h = arg;
  int64_t dims[2] = {32, 128};
  tsr_array_t x, y;
  memset(&x, 0, sizeof x);
  memset(&y, 0, sizeof y);
  tsr_status_t s = tsr_array_initialize(TSR_DTYPE_F32, 2, dims, &x);
  if (!s) s = tsr_array_initialize(TSR_DTYPE_F32, 2, dims, &y);
  if (!s) {
    for (int i = 0; i < 32 * 128; i++) ((float *)x.data)[i] = (float)i;
    tsr_array_t *operands[] = {&x, &y};
    tsr_run_options_t ro;
    tsr_run_options_initialize(&ro);
    ro.output.print = hold_on_print;
    ro.output.user = h;
    tsr_run_result_t *result = NULL;
    s = tsr_executable_run(h->exe, operands, 2, &ro, &result);
    tsr_run_result_destroy(result);
  }
  h->doubled = !s;
  for (int i = 0; !s && i < 32 * 128; i++)
    h->doubled = h->doubled && ((float *)y.data)[i] == 2.0f * (float)i;
  tsr_array_deinitialize(&x);
  tsr_array_deinitialize(&y);
  h->status = s;
  return NULL;
}

/* tsr_executable_destroy and tsr_context_destroy while a run of the
 * executable is in progress, from another thread or from the run's own
 * output callback: nothing of the context or the executable is released
 * under the run (the count of releases does not move), the run ends with
 * the right result, and once it has ended everything is released. */
static void destroy_during_a_run(tsr_backend_t backend, bool from_the_callback) {
  tsr_ir_module_t *m = NULL;
  TSR_CHECK_OK(tsr_ir_module_parse(
      (tsr_string_view_t){"twice.tsr", 9},
      (tsr_string_view_t){twice_printing_tsr, strlen(twice_printing_tsr)}, &m));
  counting_t c;
  counting_initialize(&c, -1);
  held_run_t h;
  memset(&h, 0, sizeof h);
  pthread_mutex_init(&h.mutex, NULL);
  pthread_cond_init(&h.changed, NULL);
  h.counts = &c;
  h.destroy_inside = from_the_callback;
  TSR_CHECK_OK(context_with(&c, &h.ctx));
  tsr_executable_options_t eo;
  tsr_executable_options_initialize(&eo);
  eo.backend = backend;
  if (m && h.ctx) TSR_CHECK_OK(tsr_executable_create(h.ctx, tsr_ir_module_kernel(m, 0), &eo, &h.exe));
  tsr_ir_module_destroy(m);
  if (!h.exe) {
    tsr_context_destroy(h.ctx);
    return;
  }
  pthread_t runner;
  TSR_CHECK(pthread_create(&runner, NULL, run_held, &h) == 0);
  if (!from_the_callback) {
    pthread_mutex_lock(&h.mutex);
    while (!h.inside) pthread_cond_wait(&h.changed, &h.mutex);
    pthread_mutex_unlock(&h.mutex);
    h.releases_before = atomic_load(&c.releases);
    tsr_executable_destroy(h.exe);
    tsr_context_destroy(h.ctx);
    h.releases_after = atomic_load(&c.releases);
    pthread_mutex_lock(&h.mutex);
    h.released = true;
    pthread_cond_broadcast(&h.changed);
    pthread_mutex_unlock(&h.mutex);
  }
  pthread_join(runner, NULL);
  TSR_CHECK(h.inside);
  TSR_CHECK_EQ_INT(h.releases_after, h.releases_before);
  TSR_CHECK_OK(h.status);
  TSR_CHECK(h.doubled);
  TSR_CHECK_EQ_INT(atomic_load(&c.live_bytes), 0);
  TSR_CHECK_EQ_INT(atomic_load(&c.releases), atomic_load(&c.allocations));
  pthread_cond_destroy(&h.changed);
  pthread_mutex_destroy(&h.mutex);
}

TSR_TEST(destroy_during_an_interp_run_from_another_thread) {
  destroy_during_a_run(TSR_BACKEND_INTERP, false);
}
TSR_TEST(destroy_during_an_interp_run_from_its_callback) {
  destroy_during_a_run(TSR_BACKEND_INTERP, true);
}
TSR_TEST(destroy_during_a_cpu_run_from_another_thread) {
  destroy_during_a_run(TSR_BACKEND_CPU, false);
}
TSR_TEST(destroy_during_a_cpu_run_from_its_callback) {
  destroy_during_a_run(TSR_BACKEND_CPU, true);
}

/* The context destroyed before its executable: nothing is released until
 * the executable goes, and the executable still runs meanwhile. */
TSR_TEST(context_destroyed_before_its_executable) {
  tsr_ir_module_t *m = parse_twice();
  counting_t c;
  counting_initialize(&c, -1);
  tsr_context_t *ctx = NULL;
  TSR_CHECK_OK(context_with(&c, &ctx));
  tsr_executable_t *exe = NULL;
  if (m && ctx) TSR_CHECK_OK(tsr_executable_create(ctx, tsr_ir_module_kernel(m, 0), NULL, &exe));
  tsr_ir_module_destroy(m);
  long releases = atomic_load(&c.releases);
  tsr_context_destroy(ctx);
  TSR_CHECK_EQ_INT(atomic_load(&c.releases), releases);
  if (exe) {
    int64_t dims[2] = {32, 128};
    tsr_array_t x, y;
    TSR_CHECK_OK(tsr_array_initialize(TSR_DTYPE_F32, 2, dims, &x));
    TSR_CHECK_OK(tsr_array_initialize(TSR_DTYPE_F32, 2, dims, &y));
    for (int i = 0; i < 32 * 128; i++) ((float *)x.data)[i] = (float)i;
    tsr_array_t *operands[] = {&x, &y};
    tsr_run_result_t *result = NULL;
    TSR_CHECK_OK(tsr_executable_run(exe, operands, 2, NULL, &result));
    TSR_CHECK(((float *)y.data)[5] == 10.0f);
    tsr_run_result_destroy(result);
    tsr_array_deinitialize(&x);
    tsr_array_deinitialize(&y);
  }
  tsr_executable_destroy(exe);
  TSR_CHECK_EQ_INT(atomic_load(&c.live_bytes), 0);
  TSR_CHECK_EQ_INT(atomic_load(&c.releases), atomic_load(&c.allocations));
}

/* Why the cpu backend cannot run here (tsr_test_cpu_absent), or NULL when
 * it can: a failure of another kind runs the cpu cases, which report it. */
static const char *cpu_missing(void) {
  static char reason[512];
  tsr_ir_module_t *m = parse_twice();
  tsr_context_t *ctx = NULL;
  tsr_status_t s = tsr_context_create(NULL, &ctx);
  if (!s && m) s = create_and_run(ctx, tsr_ir_module_kernel(m, 0), TSR_BACKEND_CPU, 1);
  const char *why = NULL;
  if (tsr_test_cpu_absent(s)) {
    snprintf(reason, sizeof reason, "%s", tsr_status_message(s));
    why = reason;
  }
  tsr_status_free(s);
  tsr_context_destroy(ctx);
  tsr_ir_module_destroy(m);
  return why;
}

/* The lowering library is loaded once per process: a context that names
 * another one than the process chose is refused, not silently ignored. */
TSR_TEST(other_lowering_library_is_refused) {
  tsr_context_t *first = NULL, *other = NULL;
  TSR_CHECK_OK(tsr_context_create(NULL, &first)); /* the process has chosen */
  tsr_context_options_t o;
  tsr_context_options_initialize(&o);
  o.lower_library = "/nonexistent/other/libtessera-lower.so";
  tsr_status_t s = tsr_context_create(&o, &other);
  TSR_CHECK_EQ_INT(tsr_status_code(s), TSR_INVALID_ARGUMENT);
  TSR_CHECK(strstr(tsr_status_message(s), "loaded once per process") != NULL);
  TSR_CHECK(other == NULL);
  tsr_status_free(s);
  tsr_context_destroy(other);
  tsr_context_destroy(first);
}

int main(void) {
  TSR_RUN(allocator_interp);
  TSR_RUN(allocator_interp_two_cores);
  const char *no_cpu = cpu_missing();
  if (!no_cpu) {
    TSR_RUN(allocator_cpu_two_cores);
    TSR_RUN(compiled_caches_are_the_contexts);
    TSR_RUN(destroy_during_a_cpu_run_from_another_thread);
    TSR_RUN(destroy_during_a_cpu_run_from_its_callback);
  } else {
    printf("ok %d - allocator_cpu_two_cores # SKIP %s\n", ++tsr_test_count, no_cpu);
    printf("ok %d - compiled_caches_are_the_contexts # SKIP %s\n", ++tsr_test_count, no_cpu);
    printf("ok %d - destroy_during_a_cpu_run_from_another_thread # SKIP %s\n", ++tsr_test_count,
           no_cpu);
    printf("ok %d - destroy_during_a_cpu_run_from_its_callback # SKIP %s\n", ++tsr_test_count,
           no_cpu);
  }
  TSR_RUN(destroy_during_an_interp_run_from_another_thread);
  TSR_RUN(destroy_during_an_interp_run_from_its_callback);
  TSR_RUN(context_destroyed_before_its_executable);
  TSR_RUN(allocator_failure_is_out_of_memory);
  TSR_RUN(allocate_without_release_is_invalid);
  TSR_RUN(caches_are_the_contexts);
  TSR_RUN(other_lowering_library_is_refused);
  return tsr_test_done();
}
