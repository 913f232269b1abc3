/* Unit tests for the binding API (tessera/api.h): the whole flow (context,
 * executable, run, result) on both backends, diagnostics as records, output
 * callbacks, contexts that ignore the environment, and a builder that keeps
 * no pointer to its caller's strings (run under ASan to catch one). */
#define _GNU_SOURCE /* setenv, mkdtemp */
#include <stdlib.h>
#include <sys/stat.h>
#include <pthread.h>
#include <unistd.h>

#include "tests/harness.h"



static const char scale_tsr[] =
    "kernel @scale\n"
    "  grid(2)\n"
    "  in %x: f32[16, 128] vmem block[8, 128] map(%i) -> (%i, 0)\n"
    "  out %y: f32[16, 128] vmem block[8, 128] map(%i) -> (%i, 0)\n"
    "{\n"
    "  %v = load %x[:, :] : f32[8, 128]\n"
    "  %w = add %v, %v : f32[8, 128]\n"
    "  store %y[:, :], %w\n"
    "  %g = program_id 0 : i32\n"
    "  print \"step {}\", %g\n"
    "}\n";

/* Text received by an output callback. */
typedef struct captured {
  char text[4096];
  size_t size;
  int calls;
} captured_t;

static void capture(void *user, const char *text, size_t size) {
  captured_t *c = user;
  size_t room = sizeof c->text - 1 - c->size;
  size_t n = size < room ? size : room;
  memcpy(c->text + c->size, text, n);
  c->size += n;
  c->text[c->size] = 0;
  c->calls++;
}

static tsr_ir_module_t *parse(const char *name, const char *text) {
  tsr_ir_module_t *m = NULL;
  tsr_status_t s = tsr_ir_module_parse((tsr_string_view_t){name, strlen(name)},
                                       (tsr_string_view_t){text, strlen(text)}, &m);
  if (s) {
    printf("# parse: %s\n", tsr_status_message(s));
    tsr_status_free(s);
  }
  return m;
}

static tsr_context_t *plain_context(void) {
  tsr_context_t *c = NULL;
  tsr_status_t s = tsr_context_create(NULL, &c);
  if (s) {
    printf("# context: %s\n", tsr_status_message(s));
    tsr_status_free(s);
  }
  return c;
}

/* Runs @scale on `backend` through the API: y = 2x, two print lines. */
static void run_scale(tsr_backend_t backend) {
  tsr_context_t *ctx = plain_context();
  tsr_ir_module_t *m = parse("scale.tsr", scale_tsr);
  if (!ctx || !m) {
    TSR_FAIL_AT("setup");
    goto done_early;
  }
  tsr_executable_options_t eo;
  tsr_executable_options_initialize(&eo);
  eo.backend = backend;
  tsr_executable_t *exe = NULL;
  tsr_status_t s = tsr_executable_create(ctx, tsr_ir_module_kernel(m, 0), &eo, &exe);
  if (s && backend == TSR_BACKEND_CPU && tsr_test_cpu_absent(s)) {
    tsr_test_skip_reason = "no cpu backend in this build";
    tsr_status_free(s);
    goto done_early;
  }
  TSR_CHECK_OK(s);
  if (!exe) goto done_early;
  /* The module goes before the run: the executable borrows nothing. */
  tsr_ir_module_destroy(m);
  m = NULL;
  TSR_CHECK_EQ_INT(tsr_executable_backend(exe), backend);
  int64_t dims[2] = {16, 128};
  tsr_array_t x, y;
  TSR_CHECK_OK(tsr_array_initialize(TSR_DTYPE_F32, 2, dims, &x));
  TSR_CHECK_OK(tsr_array_initialize(TSR_DTYPE_F32, 2, dims, &y));
  for (int i = 0; i < 16 * 128; i++) ((float *)x.data)[i] = (float)i;
  tsr_array_t *operands[] = {&x, &y};
  captured_t printed = {0};
  tsr_run_options_t ro;
  tsr_run_options_initialize(&ro);
  ro.output.print = capture;
  ro.output.user = &printed;
  tsr_run_result_t *result = NULL;
  TSR_CHECK_OK(tsr_executable_run(exe, operands, 2, &ro, &result));
  TSR_CHECK(result != NULL);
  if (result) {
    TSR_CHECK_EQ_INT(tsr_run_result_code(result), TSR_OK);
    TSR_CHECK_EQ_STR(tsr_run_result_message(result), "");
    TSR_CHECK_EQ_INT(tsr_diagnostic_list_count(tsr_run_result_diagnostics(result)), 0);
    tsr_interp_stats_t stats;
    tsr_run_result_stats(result, &stats);
    if (backend == TSR_BACKEND_INTERP) TSR_CHECK_EQ_INT(stats.grid_steps, 2);
  }
  tsr_run_result_destroy(result);
  bool doubled = true;
  for (int i = 0; i < 16 * 128; i++) doubled = doubled && ((float *)y.data)[i] == 2.0f * i;
  TSR_CHECK(doubled);
  TSR_CHECK(strstr(printed.text, "step 0") && strstr(printed.text, "step 1"));
  /* A second run reuses the executable; no result asked for. */
  printed.size = 0;
  printed.text[0] = 0;
  TSR_CHECK_OK(tsr_executable_run(exe, operands, 2, &ro, NULL));
  TSR_CHECK(strstr(printed.text, "step 1") != NULL);
  /* Operands that do not match: an error with a result that says so. */
  result = NULL;
  TSR_CHECK_STATUS(tsr_executable_run(exe, operands, 1, &ro, &result), TSR_INVALID_ARGUMENT);
  TSR_CHECK(result && tsr_run_result_code(result) == TSR_INVALID_ARGUMENT);
  tsr_run_result_destroy(result);
  tsr_array_deinitialize(&x);
  tsr_array_deinitialize(&y);
  tsr_executable_destroy(exe);
done_early:
  tsr_ir_module_destroy(m);
  tsr_context_destroy(ctx);
}

TSR_TEST(flow_interp) { run_scale(TSR_BACKEND_INTERP); }
TSR_TEST(flow_cpu) { run_scale(TSR_BACKEND_CPU); }

/* A build without the cpu backend (-Dmlir=disabled: scripts/test.sh's clang
 * build, or a wheel built so) says so when a cpu executable is asked for,
 * and how to get one: the packages to install, the option of pip install .,
 * the page that tells more. */
TSR_TEST(no_cpu_backend_says_how_to_get_it) {
  tsr_context_t *ctx = plain_context();
  tsr_ir_module_t *m = parse("scale.tsr", scale_tsr);
  if (!ctx || !m) {
    TSR_FAIL_AT("setup");
  } else {
    tsr_executable_options_t eo;
    tsr_executable_options_initialize(&eo);
    eo.backend = TSR_BACKEND_CPU;
    tsr_executable_t *exe = NULL;
    tsr_status_t s = tsr_executable_create(ctx, tsr_ir_module_kernel(m, 0), &eo, &exe);
    const char *msg = s ? tsr_status_message(s) : "";
    if (!s || strncmp(msg, "no cpu backend in this build", 28) != 0) {
      tsr_test_skip_reason = "this build has the cpu backend";
    } else {
      TSR_CHECK_EQ_INT(tsr_status_code(s), TSR_UNIMPLEMENTED);
      TSR_CHECK(strstr(msg, "llvm-22-dev libmlir-22-dev") != NULL);
      TSR_CHECK(strstr(msg, "pip install . -Csetup-args=-Dmlir=enabled") != NULL);
      TSR_CHECK(strstr(msg, "docs/install.md") != NULL);
      if (tsr_test_case_failed) printf("# message: %s\n", msg);
    }
    tsr_status_free(s);
    tsr_executable_destroy(exe);
  }
  tsr_ir_module_destroy(m);
  tsr_context_destroy(ctx);
}

/* Reads tests/diagnostics/<rel> and makes an executable of it. */
static tsr_executable_t *catalog_executable(tsr_context_t *ctx, const char *rel,
                                            const tsr_executable_options_t *eo) {
  char path[256];
  snprintf(path, sizeof path, "tests/diagnostics/%s", rel);
  size_t len = 0;
  char *text = tsr_test_read_source(path, &len);
  if (!text) return NULL;
  tsr_ir_module_t *m = parse(rel, text);
  free(text);
  tsr_executable_t *exe = NULL;
  if (m) TSR_CHECK_OK(tsr_executable_create(ctx, tsr_ir_module_kernel(m, 0), eo, &exe));
  tsr_ir_module_destroy(m);
  return exe;
}

/* Random inputs for every non-scratch operand of the kernel in `rel`. */
static size_t make_operands(const char *rel, tsr_array_t *arrays, size_t max) {
  char path[256];
  snprintf(path, sizeof path, "tests/diagnostics/%s", rel);
  size_t len = 0, n = 0;
  char *text = tsr_test_read_source(path, &len);
  tsr_ir_module_t *m = text ? parse(rel, text) : NULL;
  free(text);
  if (!m) return 0;
  tsr_ir_kernel_t *k = tsr_ir_module_kernel(m, 0);
  for (size_t i = 0; i < tsr_ir_kernel_operand_count(k) && n < max; i++) {
    tsr_ir_operand_info_t info;
    tsr_ir_kernel_operand_info(k, i, &info);
    if (info.role == TSR_ROLE_SCRATCH) continue;
    TSR_CHECK_OK(tsr_runtime_random_array(&info, 1, &arrays[n]));
    n++;
  }
  tsr_ir_module_destroy(m);
  return n;
}

static bool view_is(tsr_string_view_t v, const char *s) {
  return v.size == strlen(s) && memcmp(v.data, s, v.size) == 0 && v.data[v.size] == 0;
}

/* A race (error) and an uninitialized read (warning), as fields. */
TSR_TEST(kernel_error_records) {
  tsr_context_t *ctx = plain_context();
  const char *rel = "bugs/read_dst_before_wait.tsr";
  tsr_executable_options_t eo;
  tsr_executable_options_initialize(&eo);
  eo.run.detect_races = true;
  captured_t warned = {0};
  eo.output.warning = capture; /* the executable's default */
  eo.output.user = &warned;
  tsr_executable_t *exe = ctx ? catalog_executable(ctx, rel, &eo) : NULL;
  tsr_array_t arrays[8];
  size_t n = make_operands(rel, arrays, 8);
  TSR_CHECK(exe && n > 0);
  if (!exe || !n) goto done;
  tsr_array_t *operands[8];
  for (size_t i = 0; i < n; i++) operands[i] = &arrays[i];
  tsr_run_result_t *result = NULL;
  TSR_CHECK_STATUS(tsr_executable_run(exe, operands, n, NULL, &result), TSR_KERNEL_ERROR);
  TSR_CHECK(result != NULL);
  if (!result) goto done;
  TSR_CHECK_EQ_INT(tsr_run_result_code(result), TSR_KERNEL_ERROR);
  const tsr_diagnostic_list_t *list = tsr_run_result_diagnostics(result);
  const tsr_diagnostic_t *race = NULL, *uninit = NULL;
  for (size_t i = 0; i < tsr_diagnostic_list_count(list); i++) {
    const tsr_diagnostic_t *d = tsr_diagnostic_list_get(list, i);
    printf("# %s %s: %s\n", tsr_diagnostic_severity_name(d->severity),
           tsr_diagnostic_kind_name(d->kind), d->text.data);
    if (d->kind == TSR_DIAG_RACE) race = d;
    if (d->kind == TSR_DIAG_UNINITIALIZED) uninit = d;
  }
  TSR_CHECK(tsr_diagnostic_list_get(list, tsr_diagnostic_list_count(list)) == NULL);
  TSR_CHECK(race && uninit);
  if (race) {
    TSR_CHECK_EQ_INT(race->severity, TSR_SEVERITY_ERROR);
    TSR_CHECK(view_is(race->file, rel));
    TSR_CHECK_EQ_INT(race->line, 11);
    TSR_CHECK_EQ_INT(race->col, 3);
    TSR_CHECK(view_is(race->kernel, "read_dst_before_wait"));
    TSR_CHECK(view_is(race->op, "dma_start"));
    TSR_CHECK(view_is(race->buffer, "buf"));
    TSR_CHECK_EQ_INT(race->index_rank, 2);
    TSR_CHECK_EQ_INT(race->index_lo[0], 0);
    TSR_CHECK_EQ_INT(race->index_hi[0], 8);
    TSR_CHECK_EQ_INT(race->index_hi[1], 128);
    TSR_CHECK_EQ_INT(race->grid_rank, 1);
    TSR_CHECK_EQ_INT(race->grid_point[0], 0);
    TSR_CHECK_EQ_INT(race->core, -1);
    TSR_CHECK(view_is(race->other_op, "load"));
    TSR_CHECK_EQ_INT(race->other_line, 12);
    TSR_CHECK_EQ_INT(race->other_grid_rank, 1);
    TSR_CHECK(strstr(race->message.data, "data race on %buf") == race->message.data ||
              strstr(race->message.data, "data race on %buf") != NULL);
    TSR_CHECK(strstr(tsr_run_result_message(result), race->text.data) != NULL);
  }
  if (uninit) {
    TSR_CHECK_EQ_INT(uninit->severity, TSR_SEVERITY_WARNING);
    TSR_CHECK_EQ_INT(uninit->line, 12);
    TSR_CHECK_EQ_INT(uninit->col, 8);
    TSR_CHECK(view_is(uninit->op, "load"));
    TSR_CHECK(view_is(uninit->buffer, "buf"));
    TSR_CHECK_EQ_INT(uninit->index_rank, 2);
  }
  /* The warning went to the executable's warning callback too. */
  TSR_CHECK(strstr(warned.text, "warning: kernel @read_dst_before_wait") != NULL);
  tsr_run_result_destroy(result);
  /* tsr_output_discard silences the warning text; the records stay. */
  warned.size = 0;
  warned.text[0] = 0;
  tsr_run_options_t ro;
  tsr_run_options_initialize(&ro);
  ro.output.warning = tsr_output_discard;
  result = NULL;
  TSR_CHECK_STATUS(tsr_executable_run(exe, operands, n, &ro, &result), TSR_KERNEL_ERROR);
  TSR_CHECK_EQ_INT(warned.size, 0);
  TSR_CHECK(result && tsr_diagnostic_list_count(tsr_run_result_diagnostics(result)) >= 2);
  tsr_run_result_destroy(result);
done:
  for (size_t i = 0; i < n; i++) tsr_array_deinitialize(&arrays[i]);
  tsr_executable_destroy(exe);
  tsr_context_destroy(ctx);
}

/* ---- Records field by field, on each backend that reports them ---- */

static const char oob_tsr[] =
    "kernel @oob\n"
    "  grid(2)\n"
    "  in %x: f32[16, 128] vmem block[8, 128] map(%i) -> (%i, 0)\n"
    "  out %y: f32[16, 128] vmem block[8, 128] map(%i) -> (%i, 0)\n"
    "{\n"
    "  %g = program_id 0 : i32\n"
    "  %e = const 7 : i32\n"
    "  %k = add %g, %e : i32\n"
    "  %row = load %x[%k, :] : f32[128]\n"
    "  %v = load %x[:, :] : f32[8, 128]\n"
    "  store %y[:, :], %v\n"
    "}\n";

/* One run of a kernel (catalog file `rel`, or `text` named `rel`) on
 * `backend` with `eo` and `ro`: the result, or NULL with tsr_test_skip_reason set
 * when the build has no cpu backend. */
typedef struct one_run {
  tsr_context_t *ctx;
  tsr_executable_t *exe;
  tsr_array_t arrays[8];
  tsr_array_t *operands[8];
  size_t n;
  tsr_run_result_t *result;
  tsr_status_code_t code;
} one_run_t;

static void one_run_start(one_run_t *r, const char *rel, const char *text,
                          const tsr_executable_options_t *eo) {
  memset(r, 0, sizeof *r);
  r->ctx = plain_context();
  char *owned = NULL;
  if (!text) {
    char path[256];
    size_t len = 0;
    snprintf(path, sizeof path, "tests/diagnostics/%s", rel);
    text = owned = tsr_test_read_source(path, &len);
  }
  tsr_ir_module_t *m = text ? parse(rel, text) : NULL;
  free(owned);
  if (!r->ctx || !m) {
    TSR_FAIL_AT("setup");
    tsr_ir_module_destroy(m);
    return;
  }
  tsr_ir_kernel_t *k = tsr_ir_module_kernel(m, 0);
  tsr_status_t s = tsr_executable_create(r->ctx, k, eo, &r->exe);
  if (s && eo->backend == TSR_BACKEND_CPU && tsr_test_cpu_absent(s))
    tsr_test_skip_reason = "no cpu backend in this build";
  else
    TSR_CHECK_OK(s);
  tsr_status_free(s);
  s = NULL;
  for (size_t i = 0; r->exe && i < tsr_ir_kernel_operand_count(k) && r->n < 8; i++) {
    tsr_ir_operand_info_t info;
    tsr_ir_kernel_operand_info(k, i, &info);
    if (info.role == TSR_ROLE_SCRATCH) continue;
    if (eo->run.devices > 1) { /* a leading dimension of devices */
      memmove(info.dims + 1, info.dims, info.rank * sizeof info.dims[0]);
      info.dims[0] = eo->run.devices;
      info.rank++;
    }
    TSR_CHECK_OK(tsr_runtime_random_array(&info, 1, &r->arrays[r->n]));
    r->operands[r->n] = &r->arrays[r->n];
    r->n++;
  }
  tsr_ir_module_destroy(m);
}

/* Runs it again with `ro`; prints the records. */
static const tsr_diagnostic_list_t *one_run_go(one_run_t *r, const tsr_run_options_t *ro) {
  tsr_run_result_destroy(r->result);
  r->result = NULL;
  if (!r->exe) return NULL;
  tsr_status_t s = tsr_executable_run(r->exe, r->operands, r->n, ro, &r->result);
  r->code = tsr_status_code(s);
  tsr_status_free(s);
  TSR_CHECK(r->result != NULL);
  const tsr_diagnostic_list_t *list = r->result ? tsr_run_result_diagnostics(r->result) : NULL;
  for (size_t i = 0; i < tsr_diagnostic_list_count(list); i++)
    printf("# %s\n", tsr_diagnostic_list_get(list, i)->text.data);
  return list;
}

static void one_run_end(one_run_t *r) {
  tsr_run_result_destroy(r->result);
  for (size_t i = 0; i < r->n; i++) tsr_array_deinitialize(&r->arrays[i]);
  tsr_executable_destroy(r->exe);
  tsr_context_destroy(r->ctx);
}

/* The first record of `kind`, or NULL. */
static const tsr_diagnostic_t *find_kind(const tsr_diagnostic_list_t *list,
                                         tsr_diagnostic_kind_t kind) {
  for (size_t i = 0; i < tsr_diagnostic_list_count(list); i++)
    if (tsr_diagnostic_list_get(list, i)->kind == kind) return tsr_diagnostic_list_get(list, i);
  return NULL;
}

/* The interpreter's bounds check: index 8 of %x at grid point (1). */
TSR_TEST(out_of_bounds_record) {
  tsr_executable_options_t eo;
  tsr_executable_options_initialize(&eo);
  one_run_t r;
  one_run_start(&r, "oob.tsr", oob_tsr, &eo);
  const tsr_diagnostic_list_t *list = one_run_go(&r, NULL);
  TSR_CHECK_EQ_INT(r.code, TSR_KERNEL_ERROR);
  const tsr_diagnostic_t *d = find_kind(list, TSR_DIAG_OUT_OF_BOUNDS);
  TSR_CHECK(d != NULL);
  if (d) {
    TSR_CHECK_EQ_INT(d->severity, TSR_SEVERITY_ERROR);
    TSR_CHECK(view_is(d->file, "oob.tsr"));
    TSR_CHECK_EQ_INT(d->line, 9);
    TSR_CHECK_EQ_INT(d->col, 10);
    TSR_CHECK(view_is(d->kernel, "oob"));
    TSR_CHECK(view_is(d->op, "load"));
    TSR_CHECK(view_is(d->buffer, "x"));
    TSR_CHECK_EQ_INT(d->index_rank, 2);
    TSR_CHECK_EQ_INT(d->index_lo[0], 8);
    TSR_CHECK_EQ_INT(d->index_hi[0], 9);
    TSR_CHECK_EQ_INT(d->index_lo[1], 0);
    TSR_CHECK_EQ_INT(d->index_hi[1], 128);
    TSR_CHECK_EQ_INT(d->grid_rank, 1);
    TSR_CHECK_EQ_INT(d->grid_point[0], 1);
    TSR_CHECK_EQ_INT(d->core, -1); /* one core, one device: not named */
    TSR_CHECK_EQ_INT(d->device, -1);
    TSR_CHECK_EQ_INT(d->other_line, -1);
    TSR_CHECK(view_is(d->other_op, ""));
    TSR_CHECK(view_is(d->message, "kernel @oob, grid point (1): 'load': index 8 out of bounds "
                                  "for dimension 0 of %x (shape [8, 128])"));
    TSR_CHECK(strstr(tsr_run_result_message(r.result), d->text.data) != NULL);
  }
  one_run_end(&r);
}

/* A deadlock: the blocked core, on both backends. */
static void deadlock_record(tsr_backend_t backend) {
  tsr_executable_options_t eo;
  tsr_executable_options_initialize(&eo);
  eo.backend = backend;
  eo.run.cores = 2;
  one_run_t r;
  one_run_start(&r, "bugs/deadlock_never_signalled.tsr", NULL, &eo);
  const tsr_diagnostic_list_t *list = one_run_go(&r, NULL);
  if (r.exe) TSR_CHECK_EQ_INT(r.code, TSR_KERNEL_ERROR);
  const tsr_diagnostic_t *d = find_kind(list, TSR_DIAG_DEADLOCK);
  TSR_CHECK(d != NULL || tsr_test_skip_reason);
  if (d) {
    TSR_CHECK_EQ_INT(d->severity, TSR_SEVERITY_ERROR);
    TSR_CHECK_EQ_INT(d->line, 21);
    TSR_CHECK_EQ_INT(d->col, 5);
    TSR_CHECK(view_is(d->kernel, "deadlock_never_signalled"));
    TSR_CHECK(view_is(d->op, "sem_wait"));
    TSR_CHECK_EQ_INT(d->core, 1);
    TSR_CHECK_EQ_INT(d->device, -1);
    TSR_CHECK_EQ_INT(d->grid_rank, 1);
    TSR_CHECK_EQ_INT(d->grid_point[0], 1);
    TSR_CHECK(strstr(d->message.data, "deadlock: every core is blocked") != NULL);
  }
  one_run_end(&r);
}

TSR_TEST(deadlock_record_interp) { deadlock_record(TSR_BACKEND_INTERP); }
TSR_TEST(deadlock_record_cpu) { deadlock_record(TSR_BACKEND_CPU); }

/* An output block revisited after it was left: an error in both backends
 * (the cpu backend keeps the blocks each output started, TSR_RT_VISIT). */
static void revisit_record(tsr_backend_t backend) {
  tsr_executable_options_t eo;
  tsr_executable_options_initialize(&eo);
  eo.backend = backend;
  one_run_t r;
  one_run_start(&r, "bugs/revisited_output_block.tsr", NULL, &eo);
  const tsr_diagnostic_list_t *list = one_run_go(&r, NULL);
  if (r.exe) TSR_CHECK_EQ_INT(r.code, TSR_KERNEL_ERROR);
  const tsr_diagnostic_t *d = find_kind(list, TSR_DIAG_REVISIT);
  TSR_CHECK(d != NULL || tsr_test_skip_reason);
  if (d) {
    TSR_CHECK_EQ_INT(d->severity, TSR_SEVERITY_ERROR);
    TSR_CHECK(view_is(d->op, "out %s"));
    TSR_CHECK_EQ_INT(d->grid_rank, 2); /* step 2 of grid (4, 2) */
    TSR_CHECK_EQ_INT(d->grid_point[0], 1);
    TSR_CHECK_EQ_INT(d->grid_point[1], 0);
    TSR_CHECK(strstr(d->message.data, "output block [0, 0] is revisited at step 2") != NULL);
  }
  one_run_end(&r);

}

TSR_TEST(revisit_record_interp) { revisit_record(TSR_BACKEND_INTERP); }
TSR_TEST(revisit_record_cpu) { revisit_record(TSR_BACKEND_CPU); }

/* The classic megacore bug, a reduction along a parallel grid dim
 * (warnings/reduction_along_parallel.tsr): one warning, at the output's
 * declaration, in both backends; with the reduction dim arbitrary, or an
 * index map that follows the parallel dim, no diagnostic at all. */
static const char reduction_arbitrary_tsr[] =
    "kernel @reduction_arbitrary\n"
    "  grid(2, 4) semantics(parallel, arbitrary)\n"
    "  in %x: f32[2, 32, 128] vmem block[squeezed, 8, 128] map(%i, %k) -> (%i, %k, 0)\n"
    "  out %s: f32[16, 128] vmem block[8, 128] map(%i, %k) {\n"
    "    %zero = const 0 : i32\n"
    "    %b = add %i, %zero : i32\n"
    "    yield %b, %zero\n"
    "  }\n"
    "  out %t: f32[2, 8, 128] vmem block[squeezed, 8, 128] map(%i, %k) -> (%i, 0, 0)\n"
    "{\n"
    "  %k = program_id 1 : i32\n"
    "  %v = load %x[:, :] : f32[8, 128]\n"
    "  %zero = const 0 : i32\n"
    "  %first = eq %k, %zero : i1\n"
    "  if %first {\n"
    "    store %s[:, :], %v\n"
    "  } else {\n"
    "    %prev = load %s[:, :] : f32[8, 128]\n"
    "    %next = add %prev, %v : f32[8, 128]\n"
    "    store %s[:, :], %next\n"
    "  }\n"
    "  store %t[:, :], %v\n"
    "}\n";

static void parallel_revisit_record(tsr_backend_t backend) {
  tsr_executable_options_t eo;
  tsr_executable_options_initialize(&eo);
  eo.backend = backend;
  eo.output.warning = tsr_output_discard;
  one_run_t r;
  one_run_start(&r, "warnings/reduction_along_parallel.tsr", NULL, &eo);
  const tsr_diagnostic_list_t *list = one_run_go(&r, NULL);
  if (r.exe) TSR_CHECK_EQ_INT(r.code, TSR_OK);
  const tsr_diagnostic_t *d = find_kind(list, TSR_DIAG_PARALLEL_REVISIT);
  TSR_CHECK(d != NULL || tsr_test_skip_reason);
  if (d) {
    TSR_CHECK_EQ_INT(tsr_diagnostic_list_count(list), 1);
    TSR_CHECK_EQ_INT(d->severity, TSR_SEVERITY_WARNING);
    TSR_CHECK_EQ_INT(d->line, 4); /* the output's declaration: its index map */
    TSR_CHECK_EQ_INT(d->col, 7);
    TSR_CHECK(view_is(d->op, "out %s"));
    TSR_CHECK(strstr(d->message.data, "every step along grid dimension 0 (parallel, 4 steps) "
                                      "writes this same output block") != NULL);
    TSR_CHECK(strstr(d->message.data, "mark it \"arbitrary\"") != NULL);
    TSR_CHECK(strcmp(tsr_diagnostic_kind_name(d->kind), "parallel_revisit") == 0);
  }
  one_run_end(&r);
  /* the same reduction along an arbitrary dim (its output's map computed
   * from the parallel index), and a second output rewritten at every step
   * along the arbitrary dim, one block per parallel index: clean */
  one_run_start(&r, "reduction_arbitrary.tsr", reduction_arbitrary_tsr, &eo);
  list = one_run_go(&r, NULL);
  if (r.exe) {
    TSR_CHECK_EQ_INT(r.code, TSR_OK);
    TSR_CHECK_EQ_INT(tsr_diagnostic_list_count(list), 0);
  }
  one_run_end(&r);
}

TSR_TEST(parallel_revisit_record_interp) { parallel_revisit_record(TSR_BACKEND_INTERP); }
TSR_TEST(parallel_revisit_record_cpu) { parallel_revisit_record(TSR_BACKEND_CPU); }

/* ---- The order of the parallel steps: parallel_order, on_grid_step ------- */

/* Each step stores how many steps ran before it at its grid point. */
static const char order_tsr[] =
    "kernel @order\n"
    "  grid(4, 3) semantics(parallel, arbitrary)\n"
    "  out %o: i32[4, 3] smem\n"
    "  scratch %n: smem i32[1]\n"
    "{\n"
    "  %i = program_id 0 : i32\n"
    "  %j = program_id 1 : i32\n"
    "  %zero = const 0 : i32\n"
    "  %one = const 1 : i32\n"
    "  %c = load %n[%zero] : i32\n"
    "  store %o[%i, %j], %c\n"
    "  %c1 = add %c, %one : i32\n"
    "  store %n[%zero], %c1\n"
    "}\n";

/* The grid points on_grid_step saw, per core, in order. */
typedef struct steps_seen {
  pthread_mutex_t mu; /* the cpu backend calls from one thread per core */
  int64_t point[2][16][2];
  int count[2];
  int bad;
} steps_seen_t;

static void note_step(void *user, uint32_t device, uint32_t core, uint32_t rank,
                      const int64_t *point) {
  steps_seen_t *s = user;
  pthread_mutex_lock(&s->mu);
  if (device != 0 || core > 1 || rank != 2 || s->count[core] >= 16) {
    s->bad++;
  } else {
    s->point[core][s->count[core]][0] = point[0];
    s->point[core][s->count[core]][1] = point[1];
    s->count[core]++;
  }
  pthread_mutex_unlock(&s->mu);
}

static void parallel_order(tsr_backend_t backend) {
  static const int64_t order[4] = {2, 0, 3, 1};
  steps_seen_t seen = {.mu = PTHREAD_MUTEX_INITIALIZER};
  tsr_executable_options_t eo;
  tsr_executable_options_initialize(&eo);
  eo.backend = backend;
  eo.run.uninit = TSR_UNINIT_ZERO;
  eo.run.check = false; /* the counter starts at the uninitialized value: zero */
  eo.run.parallel_order = order;
  eo.run.parallel_order_size = 4;
  eo.run.on_grid_step = note_step;
  eo.run.on_grid_step_user = &seen;
  one_run_t r;
  one_run_start(&r, "order.tsr", order_tsr, &eo);
  one_run_go(&r, NULL);
  if (r.exe) {
    TSR_CHECK_EQ_INT(r.code, TSR_OK);
    /* Point (order[k], j) ran as step 3k + j, and was seen in that order. */
    const int32_t *o = r.arrays[0].data;
    TSR_CHECK_EQ_INT(seen.count[0], 12);
    TSR_CHECK_EQ_INT(seen.bad, 0);
    for (int k = 0; k < 4; k++)
      for (int j = 0; j < 3; j++) {
        TSR_CHECK_EQ_INT(o[order[k] * 3 + j], 3 * k + j);
        TSR_CHECK_EQ_INT(seen.point[0][3 * k + j][0], order[k]);
        TSR_CHECK_EQ_INT(seen.point[0][3 * k + j][1], j);
      }
  }
  one_run_end(&r);

  /* Two cores: core c runs the points order[2c], order[2c + 1], in order
   * (tsr_ir_core_share's chunks of the permuted points). */
  memset(seen.count, 0, sizeof seen.count);
  eo.run.cores = 2;
  eo.output.warning = tsr_output_discard; /* both cores write the one SMEM output */
  one_run_start(&r, "order.tsr", order_tsr, &eo);
  one_run_go(&r, NULL);
  if (r.exe) {
    TSR_CHECK_EQ_INT(r.code, TSR_OK);
    TSR_CHECK_EQ_INT(seen.bad, 0);
    for (int c = 0; c < 2; c++) {
      TSR_CHECK_EQ_INT(seen.count[c], 6);
      for (int k = 0; k < 2; k++)
        for (int j = 0; j < 3; j++) {
          TSR_CHECK_EQ_INT(seen.point[c][3 * k + j][0], order[2 * c + k]);
          TSR_CHECK_EQ_INT(seen.point[c][3 * k + j][1], j);
        }
    }
  }
  one_run_end(&r);

  /* An order that is no permutation, or of another size, is refused when
   * the run starts. */
  static const int64_t twice[4] = {0, 0, 3, 1};
  eo.run.cores = 1;
  eo.run.on_grid_step = NULL;
  eo.run.parallel_order = twice;
  one_run_start(&r, "order.tsr", order_tsr, &eo);
  one_run_go(&r, NULL);
  if (r.exe) TSR_CHECK_EQ_INT(r.code, TSR_INVALID_ARGUMENT);
  one_run_end(&r);
  eo.run.parallel_order = order;
  eo.run.parallel_order_size = 3;
  one_run_start(&r, "order.tsr", order_tsr, &eo);
  one_run_go(&r, NULL);
  if (r.exe) TSR_CHECK_EQ_INT(r.code, TSR_INVALID_ARGUMENT);
  one_run_end(&r);
}

TSR_TEST(parallel_order_interp) { parallel_order(TSR_BACKEND_INTERP); }
TSR_TEST(parallel_order_cpu) { parallel_order(TSR_BACKEND_CPU); }

/* ---- Progress: on_progress --------------------------------------------- */

/* What on_progress was called with, in order. */
typedef struct progress_seen {
  pthread_mutex_t mu;
  int inside;          /* calls in progress: never more than one */
  uint64_t done[4096], total;
  int count, bad;
  volatile int *cancel_at_first; /* set: the first call cancels the run */
} progress_seen_t;

static void note_progress(void *user, uint64_t done, uint64_t total) {
  progress_seen_t *s = user;
  if (__atomic_fetch_add(&s->inside, 1, __ATOMIC_ACQ_REL) != 0) s->bad++;
  pthread_mutex_lock(&s->mu);
  if (s->count && (total != s->total || done < s->done[s->count - 1])) s->bad++;
  if (done > total) s->bad++;
  s->total = total;
  if (s->count < 4096) s->done[s->count++] = done;
  pthread_mutex_unlock(&s->mu);
  if (s->cancel_at_first) *s->cancel_at_first = 1;
  __atomic_fetch_sub(&s->inside, 1, __ATOMIC_ACQ_REL);
}

static void noop_step(void *user, uint32_t device, uint32_t core, uint32_t rank,
                      const int64_t *point) {
  (void)user, (void)device, (void)core, (void)rank, (void)point;
}

/* A longer run: grid (16, 64), a loop of 8 in each step. */
static const char progress_tsr[] =
    "kernel @progress\n"
    "  grid(16, 64) semantics(parallel, arbitrary)\n"
    "  out %o: i32[1] smem\n"
    "{\n"
    "  %zero = const 0 : i32\n"
    "  %eight = const 8 : i32\n"
    "  %one = const 1 : i32\n"
    "  for %k = %zero to %eight step %one {\n"
    "    store %o[%zero], %k\n"
    "  }\n"
    "}\n";

static void progress(tsr_backend_t backend) {
  progress_seen_t seen;
  memset(&seen, 0, sizeof seen);
  pthread_mutex_init(&seen.mu, NULL);
  tsr_executable_options_t eo;
  tsr_executable_options_initialize(&eo);
  eo.backend = backend;
  eo.run.uninit = TSR_UNINIT_ZERO;
  eo.run.check = false;
  eo.output.warning = tsr_output_discard; /* two cores write the one SMEM output */
  one_run_t r;
  /* The executable's default interval is 0.25 s: this run takes less, so
   * the one call is the last one, with every step done. */
  eo.run.on_progress = note_progress;
  eo.run.on_progress_user = &seen;
  one_run_start(&r, "progress.tsr", progress_tsr, &eo);
  one_run_go(&r, NULL);
  if (r.exe) {
    TSR_CHECK_EQ_INT(r.code, TSR_OK);
    TSR_CHECK_EQ_INT(seen.count, 1);
    TSR_CHECK_EQ_INT((int64_t)seen.done[0], 1024);
    TSR_CHECK_EQ_INT((int64_t)seen.total, 1024);
  }
  /* Per run, every bounds check (interval 0), on 2 devices x 2 cores:
   * called, never overlapping, never going back, the last with every step
   * of every device and core. */
  one_run_end(&r);
  eo.run.on_progress = NULL;
  eo.run.devices = 2;
  eo.run.cores = 2;
  one_run_start(&r, "progress.tsr", progress_tsr, &eo);
  tsr_run_options_t ro;
  tsr_run_options_initialize(&ro);
  ro.on_progress = note_progress;
  ro.on_progress_user = &seen;
  ro.progress_interval = 0;
  seen.count = 0;
  one_run_go(&r, &ro);
  if (r.exe) {
    TSR_CHECK_EQ_INT(r.code, TSR_OK);
    TSR_CHECK_EQ_INT(seen.bad, 0);
    TSR_CHECK(seen.count >= 2);
    TSR_CHECK_EQ_INT((int64_t)seen.total, 2 * 1024);
    TSR_CHECK_EQ_INT((int64_t)seen.done[seen.count - 1], 2 * 1024);
  }
  /* Without a progress callback in the run options, none is called. */
  seen.count = 0;
  one_run_go(&r, NULL);
  if (r.exe) TSR_CHECK_EQ_INT(seen.count, 0);
  one_run_end(&r);

  /* The interpreter counts the steps begun exactly: a call at each bounds
   * check. A grid-step callback makes the cpu backend ask at every step:
   * then each of its calls counts exactly the steps begun too, through the
   * permuted order on two cores (the inverse of the compiled walk). One
   * core of one device: done goes 1, 2, ..., 12 in the cpu backend (then
   * the last call, 12 again). */
  static const int64_t order[4] = {2, 0, 3, 1};
  const bool cpu = backend == TSR_BACKEND_CPU;
  eo.run.devices = 1;
  eo.run.cores = 1;
  eo.run.parallel_order = order;
  eo.run.parallel_order_size = 4;
  eo.run.on_grid_step = cpu ? noop_step : NULL;
  eo.run.on_progress = note_progress;
  eo.run.progress_interval = 0;
  seen.count = 0;
  one_run_start(&r, "order.tsr", order_tsr, &eo);
  one_run_go(&r, NULL);
  if (r.exe) {
    TSR_CHECK_EQ_INT(r.code, TSR_OK);
    TSR_CHECK_EQ_INT(seen.bad, 0);
    TSR_CHECK(seen.count >= 1);
    if (cpu) {
      TSR_CHECK_EQ_INT(seen.count, 13);
      for (int i = 0; i < 12 && i < seen.count; i++)
        TSR_CHECK_EQ_INT((int64_t)seen.done[i], i + 1);
    }
    if (seen.count >= 1) TSR_CHECK_EQ_INT((int64_t)seen.done[seen.count - 1], 12);
  }
  one_run_end(&r);
  /* Two cores: each core's last step counts all of its 6, before the last
   * call: some call before it already saw 12. */
  if (cpu) {
    eo.run.cores = 2;
    seen.count = 0;
    one_run_start(&r, "order.tsr", order_tsr, &eo);
    one_run_go(&r, NULL);
    if (r.exe) {
      TSR_CHECK_EQ_INT(r.code, TSR_OK);
      TSR_CHECK_EQ_INT(seen.bad, 0);
      TSR_CHECK(seen.count >= 2);
      if (seen.count >= 2) TSR_CHECK_EQ_INT((int64_t)seen.done[seen.count - 2], 12);
    }
    one_run_end(&r);
  }

  /* The callback cancels the run through the run's cancel flag: the run
   * stops as when another thread sets it, and the last call says how far
   * it got. */
  volatile int cancel = 0;
  eo.run.cores = 1;
  eo.run.on_grid_step = noop_step; /* the cpu backend asks at every step */
  eo.run.cancel = &cancel;
  seen.count = 0;
  seen.cancel_at_first = &cancel;
  one_run_start(&r, "order.tsr", order_tsr, &eo);
  one_run_go(&r, NULL);
  if (r.exe) {
    TSR_CHECK_EQ_INT(r.code, TSR_KERNEL_ERROR);
    TSR_CHECK(seen.count >= 2);
    if (seen.count >= 1) TSR_CHECK(seen.done[seen.count - 1] < 12);
  }
  one_run_end(&r);
  pthread_mutex_destroy(&seen.mu);
}

TSR_TEST(progress_interp) { progress(TSR_BACKEND_INTERP); }
TSR_TEST(progress_cpu) { progress(TSR_BACKEND_CPU); }

/* shuffle_parallel: one seed gives one order in both backends. */
TSR_TEST(shuffle_parallel_same_order_in_both_backends) {
  int32_t got[2][12];
  for (int b = 0; b < 2; b++) {
    tsr_executable_options_t eo;
    tsr_executable_options_initialize(&eo);
    eo.backend = b ? TSR_BACKEND_CPU : TSR_BACKEND_INTERP;
    eo.run.uninit = TSR_UNINIT_ZERO;
    eo.run.check = false;
    eo.run.shuffle_parallel = true;
    eo.run.shuffle_seed = 11;
    one_run_t r;
    one_run_start(&r, "order.tsr", order_tsr, &eo);
    one_run_go(&r, NULL);
    if (r.exe) {
      TSR_CHECK_EQ_INT(r.code, TSR_OK);
      memcpy(got[b], r.arrays[0].data, sizeof got[b]);
    } else {
      memcpy(got[b], got[0], sizeof got[b]); /* no cpu backend: nothing to compare */
    }
    one_run_end(&r);
  }
  TSR_CHECK(memcmp(got[0], got[1], sizeof got[0]) == 0);
  /* a permutation of whole rows (the arbitrary dim in order), not the identity */
  bool identity = true, rows = true;
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 3; j++) {
      identity = identity && got[0][i * 3 + j] == i * 3 + j;
      rows = rows && got[0][i * 3 + j] == got[0][i * 3] + j && got[0][i * 3] % 3 == 0;
    }
  TSR_CHECK(rows);
  TSR_CHECK(!identity); /* seed 11 permutes 4 points (checked: 1 in 24 would not) */
}

/* A race between two cores: where it was seen, and the second access. */
TSR_TEST(race_record_second_access) {
  tsr_executable_options_t eo;
  tsr_executable_options_initialize(&eo);
  eo.run.cores = 2;
  eo.run.detect_races = true;
  one_run_t r;
  one_run_start(&r, "bugs/core_reduction_no_barrier.tsr", NULL, &eo);
  const tsr_diagnostic_list_t *list = one_run_go(&r, NULL);
  TSR_CHECK_EQ_INT(r.code, TSR_KERNEL_ERROR);
  const tsr_diagnostic_t *d = find_kind(list, TSR_DIAG_RACE);
  TSR_CHECK(d != NULL);
  if (d) {
    TSR_CHECK_EQ_INT(d->line, 9);
    TSR_CHECK(view_is(d->op, "dma_start"));
    TSR_CHECK(view_is(d->buffer, "acc"));
    TSR_CHECK_EQ_INT(d->index_rank, 2);
    TSR_CHECK_EQ_INT(d->index_lo[0], 0);
    TSR_CHECK_EQ_INT(d->index_hi[0], 8);
    TSR_CHECK_EQ_INT(d->index_lo[1], 0);
    TSR_CHECK_EQ_INT(d->index_hi[1], 128);
    TSR_CHECK_EQ_INT(d->core, 1);
    TSR_CHECK_EQ_INT(d->grid_rank, 1);
    TSR_CHECK_EQ_INT(d->grid_point[0], 1);
    TSR_CHECK(view_is(d->other_op, "dma_start"));
    TSR_CHECK_EQ_INT(d->other_line, 15);
    TSR_CHECK_EQ_INT(d->other_grid_rank, 1);
    TSR_CHECK_EQ_INT(d->other_grid_point[0], 0);
  }
  one_run_end(&r);
}

/* max_steps set for one run only: the run stops with a record; the next
 * run, without it, succeeds. */
static void run_stopped_record(tsr_backend_t backend) {
  tsr_executable_options_t eo;
  tsr_executable_options_initialize(&eo);
  eo.backend = backend;
  eo.output.print = tsr_output_discard;
  one_run_t r;
  one_run_start(&r, "scale.tsr", scale_tsr, &eo);
  tsr_run_options_t ro;
  tsr_run_options_initialize(&ro);
  ro.max_steps = 1;
  const tsr_diagnostic_list_t *list = one_run_go(&r, &ro);
  if (r.exe) TSR_CHECK_EQ_INT(r.code, TSR_KERNEL_ERROR);
  const tsr_diagnostic_t *d = find_kind(list, TSR_DIAG_RUN_STOPPED);
  TSR_CHECK(d != NULL || tsr_test_skip_reason);
  if (d) {
    TSR_CHECK_EQ_INT(d->severity, TSR_SEVERITY_ERROR);
    TSR_CHECK(view_is(d->kernel, "scale"));
    TSR_CHECK(view_is(d->file, "scale.tsr"));
    TSR_CHECK_EQ_INT(d->grid_rank, 1);
    TSR_CHECK_EQ_INT(d->grid_point[0], 1);
    TSR_CHECK(strstr(d->message.data, "run stopped") != NULL);
  }
  list = one_run_go(&r, NULL);
  if (r.exe) TSR_CHECK_EQ_INT(r.code, TSR_OK);
  TSR_CHECK_EQ_INT(tsr_diagnostic_list_count(list), 0);
  one_run_end(&r);
}

TSR_TEST(run_stopped_record_interp) { run_stopped_record(TSR_BACKEND_INTERP); }
TSR_TEST(run_stopped_record_cpu) { run_stopped_record(TSR_BACKEND_CPU); }

/* A warning with its note, then the same run strict (per run): an error. */
TSR_TEST(warning_record) {
  tsr_executable_options_t eo;
  tsr_executable_options_initialize(&eo);
  eo.output.warning = tsr_output_discard;
  one_run_t r;
  one_run_start(&r, "warnings/read_fresh_output_block.tsr", NULL, &eo);
  const tsr_diagnostic_list_t *list = one_run_go(&r, NULL);
  TSR_CHECK_EQ_INT(r.code, TSR_OK);
  TSR_CHECK_EQ_INT(tsr_diagnostic_list_count(list), 2);
  const tsr_diagnostic_t *d = tsr_diagnostic_list_get(list, 0);
  if (d) {
    TSR_CHECK_EQ_INT(d->kind, TSR_DIAG_UNINITIALIZED);
    TSR_CHECK_EQ_INT(d->severity, TSR_SEVERITY_WARNING);
    TSR_CHECK_EQ_INT(d->line, 7);
    TSR_CHECK_EQ_INT(d->col, 10);
    TSR_CHECK(view_is(d->op, "load"));
    TSR_CHECK(view_is(d->buffer, "y"));
    TSR_CHECK_EQ_INT(d->index_rank, 2);
    TSR_CHECK_EQ_INT(d->index_lo[0], 0);
    TSR_CHECK_EQ_INT(d->index_hi[0], 1);
    TSR_CHECK_EQ_INT(d->index_lo[1], 0);
    TSR_CHECK_EQ_INT(d->index_hi[1], 1);
    TSR_CHECK_EQ_INT(d->grid_rank, 1);
    TSR_CHECK_EQ_INT(d->grid_point[0], 0);
  }
  const tsr_diagnostic_t *note = tsr_diagnostic_list_get(list, 1);
  if (note) {
    TSR_CHECK_EQ_INT(note->kind, TSR_DIAG_OTHER);
    TSR_CHECK_EQ_INT(note->severity, TSR_SEVERITY_NOTE);
    TSR_CHECK(view_is(note->text, "note: 1 more occurrence of these warnings not shown"));
    TSR_CHECK(view_is(note->message, "1 more occurrence of these warnings not shown"));
    TSR_CHECK_EQ_INT(note->line, -1);
  }
  tsr_run_options_t ro;
  tsr_run_options_initialize(&ro);
  ro.strict = 1;
  list = one_run_go(&r, &ro);
  TSR_CHECK_EQ_INT(r.code, TSR_KERNEL_ERROR);
  d = tsr_diagnostic_list_get(list, 0);
  TSR_CHECK(d && d->kind == TSR_DIAG_UNINITIALIZED && d->severity == TSR_SEVERITY_ERROR);
  one_run_end(&r);
}

/* ---- oob_reads_uninit and padded on both backends (docs/semantics.md,
 * "Out-of-bounds accesses"): the cpu backend's compiled code gives the
 * interpreter's outputs bit for bit and its out-of-bounds records word for
 * word ---- */

/* Reads of rows [4, 12) of an 8-row input: a load, a DMA's source and an
 * adding DMA (whose lanes outside the source leave the destination); a
 * scalar read of an SMEM table past its end. */
static const char bounds_read_tsr[] =
    "kernel @reads\n"
    "  in %x: f32[8, 128] vmem\n"
    "  in %t: i32[5] smem\n"
    "  out %o: f32[8, 128] vmem\n"
    "  out %d: f32[8, 128] vmem\n"
    "  out %a: f32[8, 128] vmem\n"
    "  out %s: i32[2] smem\n"
    "  scratch %sem: dma_sem\n"
    "{\n"
    "  %four = const 4 : i32\n"
    "  %six = const 6 : i32\n"
    "  %one = const 1 : i32\n"
    "  %v = load %x[ds(%four, 8), :] : f32[8, 128]\n"
    "  store %o[:, :], %v\n"
    "  dma_start %x[ds(%four, 8), :] -> %d[:, :], %sem\n"
    "  dma_wait %x[ds(%four, 8), :] -> %d[:, :], %sem\n"
    "  %w = load %x[:, :] : f32[8, 128]\n"
    "  store %a[:, :], %w\n"
    "  dma_start %x[ds(%four, 8), :] -> %a[:, :], %sem add\n"
    "  dma_wait %x[ds(%four, 8), :] -> %a[:, :], %sem\n"
    "  %e = load %t[%six] : i32\n"
    "  %f = load %t[%one] : i32\n"
    "  %zero = const 0 : i32\n"
    "  store %s[%zero], %e\n"
    "  store %s[%one], %f\n"
    "}\n";

/* A (10, 128) f32 scratch buffer is (16, 128) padded, a (3, 100) bf16 one
 * (4, 128): stores and a DMA into the padding are dropped, loads of it give
 * the uninitialized value (rows [1, 4) and columns [28, 128) of the bf16
 * one); a point load of padding row 12. */
static const char bounds_padded_tsr[] =
    "kernel @padded\n"
    "  in %x: f32[8, 128] vmem\n"
    "  in %h: bf16[3, 100] vmem\n"
    "  out %o: f32[8, 128] vmem\n"
    "  out %p: f32[8, 128] vmem\n"
    "  out %r: f32[128] vmem\n"
    "  out %q: bf16[3, 100] vmem\n"
    "  scratch %s: vmem f32[10, 128]\n"
    "  scratch %u: vmem f32[10, 128]\n"
    "  scratch %b: vmem bf16[3, 100]\n"
    "  scratch %sem: dma_sem\n"
    "{\n"
    "  %zero = const 0 : i32\n"
    "  %four = const 4 : i32\n"
    "  %twelve = const 12 : i32\n"
    "  %v = load %x[:, :] : f32[8, 128]\n"
    "  store %s[ds(%four, 8), :], %v\n"
    "  %w = load %s[ds(%four, 8), :] : f32[8, 128]\n"
    "  store %o[:, :], %w\n"
    "  dma_start %x[:, :] -> %u[ds(%four, 8), :], %sem\n"
    "  dma_wait %x[:, :] -> %u[ds(%four, 8), :], %sem\n"
    "  %y = load %u[ds(%four, 8), :] : f32[8, 128]\n"
    "  store %p[:, :], %y\n"
    "  %z = load %u[%twelve, :] : f32[128]\n"
    "  store %r[:], %z\n"
    "  %g = load %h[:, :] : bf16[3, 100]\n"
    "  store %b[:, :], %g\n"
    "  %one = const 1 : i32\n"
    "  %k = const 28 : i32\n"
    "  %c = load %b[ds(%one, 3), ds(%k, 100)] : bf16[3, 100]\n"
    "  store %q[:, :], %c\n"
    "}\n";

/* Beyond the padding (rows 9..16 of (10, 128), padded to 16): an error. */
static const char bounds_beyond_tsr[] =
    "kernel @beyond\n"
    "  out %o: f32[8, 128] vmem\n"
    "  scratch %s: vmem f32[10, 128]\n"
    "{\n"
    "  %nine = const 9 : i32\n"
    "  %v = const 1.0 : f32[8, 128]\n"
    "  store %s[ds(%nine, 8), :], %v\n"
    "  store %o[:, :], %v\n"
    "}\n";

/* An input block whose index map gives blocks 1, 5, 1, 5: out of range at
 * odd steps, where the nearest block is the one of the step before. */
static const char bounds_block_tsr[] =
    "kernel @blocks\n"
    "  grid(4) semantics(arbitrary)\n"
    "  in %x: f32[16, 128] vmem block[8, 128] map(%i) {\n"
    "    %two = const 2 : i32\n"
    "    %m = rem %i, %two : i32\n"
    "    %four = const 4 : i32\n"
    "    %k = mul %m, %four : i32\n"
    "    %one = const 1 : i32\n"
    "    %b = add %k, %one : i32\n"
    "    %zero = const 0 : i32\n"
    "    yield %b, %zero\n"
    "  }\n"
    "  out %o: f32[32, 128] vmem block[8, 128] map(%i) -> (%i, 0)\n"
    "{\n"
    "  %v = load %x[:, :] : f32[8, 128]\n"
    "  store %o[:, :], %v\n"
    "}\n";

/* The out_of_bounds records of `list`, as text, one a line. */
static void oob_records(const tsr_diagnostic_list_t *list, char *out, size_t size) {
  size_t n = 0;
  out[0] = 0;
  for (size_t i = 0; i < tsr_diagnostic_list_count(list); i++) {
    const tsr_diagnostic_t *d = tsr_diagnostic_list_get(list, i);
    if (d->kind != TSR_DIAG_OUT_OF_BOUNDS) continue;
    int w = snprintf(out + n, size - n, "%d %s\n", (int)d->severity, d->text.data);
    if (w > 0) n += (size_t)w < size - n ? (size_t)w : size - n - 1;
  }
}

/* Runs `text` with `eo` on both backends: the same status, outputs and
 * out-of-bounds records; returns how many such records (-1: skipped). */
static int bounds_same_on_both(const char *name, const char *text, tsr_executable_options_t eo,
                               tsr_status_code_t want) {
  one_run_t r[2];
  char records[2][4096];
  for (int b = 0; b < 2; b++) {
    eo.backend = b ? TSR_BACKEND_CPU : TSR_BACKEND_INTERP;
    eo.output.warning = tsr_output_discard;
    one_run_start(&r[b], name, text, &eo);
    if (!r[b].exe) {
      if (b) one_run_end(&r[0]);
      one_run_end(&r[b]);
      return -1;
    }
    oob_records(one_run_go(&r[b], NULL), records[b], sizeof records[b]);
  }
  TSR_CHECK_EQ_INT(r[0].code, want);
  TSR_CHECK_EQ_INT(r[1].code, want);
  TSR_CHECK_EQ_STR(records[1], records[0]);
  int count = 0;
  for (const char *c = records[0]; *c; c++) count += *c == '\n';
  for (size_t i = 0; want == TSR_OK && i < r[0].n && i < r[1].n; i++) {
    size_t bytes = (size_t)tsr_array_element_count(&r[0].arrays[i]) *
                   tsr_dtype_size(r[0].arrays[i].dtype);
    if (memcmp(r[0].arrays[i].data, r[1].arrays[i].data, bytes) != 0) {
      printf("# %s: operand %zu differs between the backends\n", name, i);
      TSR_FAIL_AT("outputs");
    }
  }
  one_run_end(&r[0]);
  one_run_end(&r[1]);
  return count;
}

TSR_TEST(bounds_options_cpu_matches_interp) {
  tsr_executable_options_t eo;
  for (int zero = 0; zero < 2; zero++) {
    tsr_executable_options_initialize(&eo);
    eo.run.uninit = zero ? TSR_UNINIT_ZERO : TSR_UNINIT_NAN;
    /* by default both report the first read outside */
    int n = bounds_same_on_both("reads.tsr", bounds_read_tsr, eo, TSR_KERNEL_ERROR);
    if (n < 0) return; /* no cpu backend */
    TSR_CHECK(n >= 1);
    eo.run.oob_reads_uninit = true;
    /* a warning per site: the load, the two DMAs, the SMEM load */
    TSR_CHECK_EQ_INT(bounds_same_on_both("reads.tsr", bounds_read_tsr, eo, TSR_OK), 4);
    TSR_CHECK_EQ_INT(bounds_same_on_both("blocks.tsr", bounds_block_tsr, eo, TSR_OK), 1);
    /* writes stay checked against the logical shape */
    TSR_CHECK(bounds_same_on_both("padded.tsr", bounds_padded_tsr, eo, TSR_KERNEL_ERROR) >= 1);
    eo.run.padded = true;
    TSR_CHECK_EQ_INT(bounds_same_on_both("padded.tsr", bounds_padded_tsr, eo, TSR_OK), 6);
    TSR_CHECK_EQ_INT(bounds_same_on_both("beyond.tsr", bounds_beyond_tsr, eo, TSR_KERNEL_ERROR),
                     1);
    eo.run.oob_reads_uninit = false;
    TSR_CHECK_EQ_INT(bounds_same_on_both("padded.tsr", bounds_padded_tsr, eo, TSR_OK), 6);
    /* v3 tiles twice the rows: the bf16 buffer is (4, 128) still, and
     * (10, 128) f32 is (16, 128) */
    eo.run.chip = "v3";
    TSR_CHECK_EQ_INT(bounds_same_on_both("padded.tsr", bounds_padded_tsr, eo, TSR_OK), 6);
  }
}

/* The records of `s` (consumed), NULL when they cannot be made. */
static tsr_diagnostic_list_t *records_of(tsr_status_t s) {
  tsr_diagnostic_list_t *list = NULL;
  tsr_status_t e = tsr_diagnostic_list_create_from_status(s, &list);
  if (e) {
    printf("# records: %s\n", tsr_status_message(e));
    tsr_status_free(e);
  }
  tsr_status_free(s);
  return list;
}

/* Whether record i of `list` is an error of `kind` at file:line:col about
 * `op` ("" none) saying `message`; prints what it is when not. */
static bool record_is(const tsr_diagnostic_list_t *list, size_t i, tsr_diagnostic_kind_t kind,
                      const char *file, int line, int col, const char *op,
                      const char *message) {
  const tsr_diagnostic_t *d = tsr_diagnostic_list_get(list, i);
  if (!d) {
    printf("# no record %zu\n", i);
    return false;
  }
  bool ok = d->kind == kind && d->severity == TSR_SEVERITY_ERROR && view_is(d->file, file) &&
            d->line == line && d->col == col && view_is(d->op, op) &&
            view_is(d->message, message);
  if (!ok)
    printf("# record %zu: kind %s, %s, file '%s', %d:%d, op '%s', message '%s'\n", i,
           tsr_diagnostic_kind_name(d->kind), tsr_diagnostic_severity_name(d->severity),
           d->file.data, d->line, d->col, d->op.data, d->message.data);
  return ok;
}

/* Three verify errors, one per op, at lines 7, 8 and 9. */
static const char three_bad_ops_tsr[] =
    "kernel @k\n"
    "  grid(1)\n"
    "  out %y: f32[8, 128] vmem\n"
    "{\n"
    "  %a = const 1 : i32\n"
    "  %b = const 2.0 : f32\n"
    "  %c = add %a, %b : i32\n"
    "  %d = mul %a, %b : f32\n"
    "  %e = exp %a : i32\n"
    "}\n";

/* The verify errors of `text` parsed as file `name`. */
static tsr_status_t verify_text(const char *name, const char *text) {
  tsr_ir_module_t *m = parse(name, text);
  tsr_status_t s = m ? tsr_ir_module_verify(m) : TSR_STATUS(TSR_INTERNAL, "no module");
  tsr_ir_module_destroy(m);
  return s;
}

/* A verify error found by tsr_executable_create is a record with its
 * location. */
TSR_TEST(parse_and_verify_records) {
  tsr_ir_module_t *m = parse("ill.tsr", three_bad_ops_tsr);
  tsr_context_t *ctx = plain_context();
  tsr_executable_t *exe = NULL;
  tsr_status_t s =
      m && ctx ? tsr_executable_create(ctx, tsr_ir_module_kernel(m, 0), NULL, &exe) : NULL;
  TSR_CHECK_EQ_INT(tsr_status_code(s), TSR_VERIFY_ERROR);
  TSR_CHECK(exe == NULL);
  tsr_diagnostic_list_t *list = records_of(s);
  TSR_CHECK_EQ_INT(tsr_diagnostic_list_count(list), 3);
  TSR_CHECK(record_is(list, 0, TSR_DIAG_VERIFY, "ill.tsr", 7, 8, "add",
                      "'add' operand #2 (%b): expected i32, found f32"));
  tsr_diagnostic_list_destroy(list);
  /* No status, no records. */
  list = NULL;
  TSR_CHECK_OK(tsr_diagnostic_list_create_from_status(NULL, &list));
  TSR_CHECK_EQ_INT(tsr_diagnostic_list_count(list), 0);
  tsr_diagnostic_list_destroy(list);
  tsr_ir_module_destroy(m);
  tsr_context_destroy(ctx);
}

/* A parse error's record, field by field (no op: the parser names none). */
TSR_TEST(parse_error_record_fields) {
  const char *bad = "kernel @k\n  grid(1)\n{\n  %a = bogus_op %b : f32\n}\n";
  tsr_ir_module_t *m = NULL;
  tsr_status_t s = tsr_ir_module_parse(TSR_SV("bad.tsr"), (tsr_string_view_t){bad, strlen(bad)},
                                       &m);
  TSR_CHECK_EQ_INT(tsr_status_code(s), TSR_PARSE_ERROR);
  tsr_diagnostic_list_t *list = records_of(s);
  TSR_CHECK_EQ_INT(tsr_diagnostic_list_count(list), 1);
  TSR_CHECK(record_is(list, 0, TSR_DIAG_PARSE, "bad.tsr", 4, 8, "", "unknown op 'bogus_op'"));
  const tsr_diagnostic_t *d = tsr_diagnostic_list_get(list, 0);
  TSR_CHECK(d && view_is(d->text, "bad.tsr:4:8: error: unknown op 'bogus_op'"));
  tsr_diagnostic_list_destroy(list);
  tsr_ir_module_destroy(m);
}

/* Several verify errors: one record each, in the order of the text, each
 * naming the op the verifier was checking. */
TSR_TEST(verify_records_in_order_with_op) {
  tsr_status_t s = verify_text("ill.tsr", three_bad_ops_tsr);
  TSR_CHECK_EQ_INT(tsr_status_code(s), TSR_VERIFY_ERROR);
  TSR_CHECK_EQ_INT(tsr_status_diagnostic_count(s), 3);
  tsr_diagnostic_list_t *list = records_of(s);
  TSR_CHECK_EQ_INT(tsr_diagnostic_list_count(list), 3);
  TSR_CHECK(record_is(list, 0, TSR_DIAG_VERIFY, "ill.tsr", 7, 8, "add",
                      "'add' operand #2 (%b): expected i32, found f32"));
  TSR_CHECK(record_is(list, 1, TSR_DIAG_VERIFY, "ill.tsr", 8, 8, "mul",
                      "'mul' operand #2 (%b): expected i32, found f32"));
  TSR_CHECK(record_is(list, 2, TSR_DIAG_VERIFY, "ill.tsr", 9, 8, "exp",
                      "'exp' operand #1 (%a): expected a float type, found i32"));
  tsr_diagnostic_list_destroy(list);
  /* A header error is about no op. */
  s = verify_text("hdr.tsr", "kernel @k\n  grid(0)\n{\n}\n");
  list = records_of(s);
  const tsr_diagnostic_t *d = tsr_diagnostic_list_get(list, 0);
  TSR_CHECK(d && d->kind == TSR_DIAG_VERIFY && view_is(d->op, "") && d->line == 1 &&
            view_is(d->message, "kernel @k: grid dim 0 is 0, expected >= 1"));
  tsr_diagnostic_list_destroy(list);
}

/* Records come from the source, not from the text: a file name holding
 * ": error: " and digits is the record's file whole (reading the text back
 * took "a.tsr" line 12 col 34 from it), and context prepended to the text
 * by tsr_status_annotate does not leak into the file either. */
TSR_TEST(record_file_name_that_looks_like_a_location) {
  const char *name = "a.tsr:12:34: error: b.tsr";
  tsr_status_t s = verify_text(name, three_bad_ops_tsr);
  TSR_CHECK(s && strncmp(tsr_status_message(s), name, strlen(name)) == 0);
  tsr_diagnostic_list_t *list = records_of(s);
  TSR_CHECK_EQ_INT(tsr_diagnostic_list_count(list), 3);
  TSR_CHECK(record_is(list, 0, TSR_DIAG_VERIFY, name, 7, 8, "add",
                      "'add' operand #2 (%b): expected i32, found f32"));
  tsr_diagnostic_list_destroy(list);

  s = tsr_status_annotate(verify_text("ill.tsr", three_bad_ops_tsr), "loading %s", "ill.tsr");
  TSR_CHECK(s && strncmp(tsr_status_message(s), "loading ill.tsr: ill.tsr:7:8: error: ", 37) == 0);
  list = records_of(s);
  TSR_CHECK_EQ_INT(tsr_diagnostic_list_count(list), 3);
  TSR_CHECK(record_is(list, 0, TSR_DIAG_VERIFY, "ill.tsr", 7, 8, "add",
                      "'add' operand #2 (%b): expected i32, found f32"));
  const tsr_diagnostic_t *d = tsr_diagnostic_list_get(list, 0);
  TSR_CHECK(d && view_is(d->text, "ill.tsr:7:8: error: 'add' operand #2 (%b): expected i32, "
                                  "found f32"));
  tsr_diagnostic_list_destroy(list);
}

/* A status made without located diagnostics is one record without location
 * whose message is the whole message, even when its text looks located. */
TSR_TEST(status_without_records_is_one_unlocated_record) {
  const char *text = "f.tsr:1:2: error: made by a caller";
  tsr_diagnostic_list_t *list = records_of(TSR_STATUS(TSR_INVALID_ARGUMENT, "%s", text));
  TSR_CHECK_EQ_INT(tsr_diagnostic_list_count(list), 1);
  TSR_CHECK(record_is(list, 0, TSR_DIAG_INVALID_ARGUMENT, "", -1, -1, "", text));
  tsr_diagnostic_list_destroy(list);
}

/* Past the verifier's limit of 50, the note saying how many were left out
 * is a record of its own: one record per line of the text. */
TSR_TEST(verify_records_past_the_limit) {
  static char text[8192];
  size_t size = (size_t)snprintf(text, sizeof text, "kernel @k\n  grid(1)\n{\n"
                                                    "  %%a = const 1 : i32\n");
  for (int i = 0; i < 52; i++)
    size += (size_t)snprintf(text + size, sizeof text - size, "  %%v%d = exp %%a : i32\n", i);
  snprintf(text + size, sizeof text - size, "}\n");
  tsr_status_t s = verify_text("many.tsr", text);
  TSR_CHECK_EQ_INT(tsr_status_code(s), TSR_VERIFY_ERROR);
  size_t lines = tsr_status_diagnostic_count(s);
  TSR_CHECK_EQ_INT(lines, 51);
  tsr_diagnostic_list_t *list = records_of(s);
  TSR_CHECK_EQ_INT(tsr_diagnostic_list_count(list), lines);
  TSR_CHECK(record_is(list, 49, TSR_DIAG_VERIFY, "many.tsr", 54, 10, "exp",
                      "'exp' operand #1 (%a): expected a float type, found i32"));
  const tsr_diagnostic_t *last = tsr_diagnostic_list_get(list, 50);
  TSR_CHECK(last && last->severity == TSR_SEVERITY_NOTE && last->kind == TSR_DIAG_OTHER &&
            last->line == -1 && view_is(last->message, "2 more errors not shown") &&
            view_is(last->text, "note: 2 more errors not shown"));
  tsr_diagnostic_list_destroy(list);
}

/* A located error of the interpreter's preparation (VMEM over the chip's
 * budget) is a record at the kernel's location. */
TSR_TEST(vmem_budget_record) {
  tsr_ir_module_t *m = parse("big.tsr", "kernel @k\n  grid(1)\n  out %y: f32[65536, 4096] vmem\n"
                                        "{\n}\n");
  tsr_context_t *ctx = plain_context();
  tsr_executable_t *exe = NULL;
  tsr_status_t s =
      m && ctx ? tsr_executable_create(ctx, tsr_ir_module_kernel(m, 0), NULL, &exe) : NULL;
  TSR_CHECK_EQ_INT(tsr_status_code(s), TSR_RESOURCE_EXHAUSTED);
  tsr_diagnostic_list_t *list = records_of(s);
  TSR_CHECK_EQ_INT(tsr_diagnostic_list_count(list), 1);
  const tsr_diagnostic_t *d = tsr_diagnostic_list_get(list, 0);
  TSR_CHECK(d && d->kind == TSR_DIAG_VMEM_BUDGET && view_is(d->file, "big.tsr") &&
            d->line == 1 && d->col == 8 && strncmp(d->message.data, "kernel @k needs ", 16) == 0);
  tsr_diagnostic_list_destroy(list);
  tsr_executable_destroy(exe);
  tsr_context_destroy(ctx);
  tsr_ir_module_destroy(m);
}

static char temp_root[256];

static void make_temp_root(void) {
  const char *build = getenv("TSR_BUILD_ROOT");
  snprintf(temp_root, sizeof temp_root, "%s/test-api-XXXXXX", build ? build : "/tmp");
  if (!mkdtemp(temp_root)) snprintf(temp_root, sizeof temp_root, "/tmp");
}

/* Given a context, the library reads no environment: bogus variables change
 * nothing. */
TSR_TEST(context_ignores_environment) {
  setenv("TESSERA_CACHE", "on", 1);
  setenv("TESSERA_CACHE_DIR", "/nonexistent/bogus-cache", 1);
  setenv("TESSERA_CACHE_KEY_FILE", "/nonexistent/bogus.key", 1);
  setenv("TESSERA_CACHE_MAX_SIZE", "not-a-size", 1);
  setenv("TESSERA_CACHE_SHARED", "1", 1);
  char dir[512], key[512];
  snprintf(dir, sizeof dir, "%s/cache", temp_root);
  snprintf(key, sizeof key, "%s/cache.key", temp_root);
  captured_t warned = {0};
  tsr_context_options_t co;
  tsr_context_options_initialize(&co);
  co.disk_cache = true;
  co.cache_dir = dir;
  co.cache_key_file = key;
  co.output.warning = capture;
  co.output.user = &warned;
  tsr_context_t *ctx = NULL;
  TSR_CHECK_OK(tsr_context_create(&co, &ctx));
  tsr_disk_cache_t *disk = tsr_context_disk_cache(ctx);
  TSR_CHECK(disk != NULL);
  if (disk) {
    TSR_CHECK_EQ_STR(tsr_disk_cache_dir(disk), dir);
    TSR_CHECK_EQ_STR(tsr_disk_cache_key_file(disk), key);
    tsr_disk_cache_stats_t st;
    tsr_disk_cache_stats(disk, &st);
    TSR_CHECK_EQ_INT(st.max_bytes, UINT64_C(1) << 30); /* not the bogus size */
    struct stat sb;
    TSR_CHECK(stat(dir, &sb) == 0 && (sb.st_mode & 077) == 0); /* not shared */
  }
  TSR_CHECK_EQ_INT(warned.size, 0); /* no complaint about TESSERA_CACHE_MAX_SIZE */
  /* A compile goes to this context's disk cache (a kernel no other case
   * compiled, so the process's memory cache does not answer first). */
  const char *unique =
      "kernel @unique_to_context\n"
      "  grid(1)\n"
      "  out %y: f32[8, 128] vmem block[8, 128] map(%i) -> (0, 0)\n"
      "{\n"
      "  %v = const 3.25 : f32\n"
      "  %b = broadcast %v : f32[8, 128]\n"
      "  store %y[:, :], %b\n"
      "}\n";
  tsr_ir_module_t *m = parse("unique.tsr", unique);
  tsr_executable_options_t eo;
  tsr_executable_options_initialize(&eo);
  eo.backend = TSR_BACKEND_CPU;
  tsr_executable_t *exe = NULL;
  tsr_status_t s = m && ctx ? tsr_executable_create(ctx, tsr_ir_module_kernel(m, 0), &eo, &exe)
                            : NULL;
  if (tsr_status_code(s) == TSR_UNIMPLEMENTED) {
    printf("# no cpu backend: the disk cache's use is not checked\n");
  } else {
    TSR_CHECK_OK(s);
    s = NULL;
    tsr_disk_cache_stats_t st;
    if (disk) TSR_CHECK_OK(tsr_disk_cache_scan(disk, &st));
    if (disk) TSR_CHECK_EQ_INT(st.entries, 1);
  }
  tsr_status_free(s);
  tsr_executable_destroy(exe);
  tsr_ir_module_destroy(m);
  tsr_context_destroy(ctx);
  /* A disk cache without a key file is refused, not looked up. */
  co.cache_key_file = NULL;
  ctx = NULL;
  TSR_CHECK_STATUS(tsr_context_create(&co, &ctx), TSR_INVALID_ARGUMENT);
  TSR_CHECK(ctx == NULL);
  /* The default context has no disk cache. */
  ctx = plain_context();
  TSR_CHECK(ctx && tsr_context_disk_cache(ctx) == NULL);
  tsr_context_destroy(ctx);
  /* From the environment: its variables are what count. */
  char env_dir[512];
  snprintf(env_dir, sizeof env_dir, "%s/env-cache", temp_root);
  setenv("TESSERA_CACHE_DIR", env_dir, 1);
  setenv("TESSERA_CACHE_KEY_FILE", key, 1);
  setenv("TESSERA_CACHE_SHARED", "0", 1);
  unsetenv("TESSERA_CACHE_MAX_SIZE");
  ctx = NULL;
  TSR_CHECK_OK(tsr_context_create_from_environment(&ctx));
  disk = ctx ? tsr_context_disk_cache(ctx) : NULL;
  TSR_CHECK(disk && strcmp(tsr_disk_cache_dir(disk), env_dir) == 0);
  tsr_context_destroy(ctx);
  setenv("TESSERA_CACHE", "off", 1);
  ctx = NULL;
  TSR_CHECK_OK(tsr_context_create_from_environment(&ctx));
  TSR_CHECK(ctx && tsr_context_disk_cache(ctx) == NULL);
  tsr_context_destroy(ctx);
}

/* A heap copy of `s` that the test scribbles over and frees after use. */
static char *heap_copy(const char *s) {
  char *d = malloc(strlen(s) + 1);
  if (d) strcpy(d, s);
  return d;
}

static void scrub(char *s) {
  if (!s) return;
  memset(s, 'Z', strlen(s));
  free(s);
}

/* A dynamic grid extent through the builder: a grid dim named by a rank-0
 * i32 prefetch operand, printed as its name; anything else is refused. */
TSR_TEST(builder_dynamic_grid_extent) {
  tsr_ir_module_t *m = NULL;
  TSR_CHECK_OK(tsr_ir_module_create("built.tsr", &m));
  tsr_ir_kernel_t *k = NULL;
  if (m) TSR_CHECK_OK(tsr_ir_kernel_create(m, "dyn", &k));
  if (!k) goto done;
  TSR_CHECK_OK(tsr_ir_kernel_set_grid(k, 2, (int64_t[]){3, 1}, NULL));
  tsr_ir_operand_params_t p = {TSR_ROLE_PREFETCH, "n", tsr_ir_type_scalar(TSR_DTYPE_I32),
                               TSR_SPACE_SMEM, NULL, -1};
  TSR_CHECK_OK(tsr_ir_kernel_add_operand(k, &p, NULL, NULL));
  int64_t dims[2] = {8, 128};
  p = (tsr_ir_operand_params_t){TSR_ROLE_OUT, "y", tsr_ir_type_vector(TSR_DTYPE_F32, 2, dims),
                                TSR_SPACE_VMEM, NULL, -1};
  TSR_CHECK_OK(tsr_ir_kernel_add_operand(k, &p, NULL, NULL));
  tsr_status_t s = tsr_ir_kernel_set_grid_bound(k, 2, 0); /* no such dim */
  TSR_CHECK(tsr_status_code(s) == TSR_INVALID_ARGUMENT);
  tsr_status_free(s);
  s = tsr_ir_kernel_set_grid_bound(k, 1, 1); /* an output */
  TSR_CHECK(tsr_status_code(s) == TSR_INVALID_ARGUMENT);
  tsr_status_free(s);
  TSR_CHECK_OK(tsr_ir_kernel_set_grid_bound(k, 1, 0));
  TSR_CHECK_OK(tsr_ir_module_verify(m));
  char *printed = tsr_ir_module_print(m);
  TSR_CHECK(printed && strstr(printed, "grid(3, %n)"));
  tsr_free_buffer(printed);
done:
  tsr_ir_module_destroy(m);
}

/* The builder copies every string: the caller frees its own right away. */
TSR_TEST(builder_copies_strings) {
  char *filename = heap_copy("built.tsr"), *kname = heap_copy("built"), *xname = heap_copy("x");
  char *yname = heap_copy("y"), *opfile = heap_copy("python_source.py"), *vname = heap_copy("v");
  char *text = heap_copy("hello {}");
  tsr_ir_module_t *m = NULL;
  TSR_CHECK_OK(tsr_ir_module_create(filename, &m));
  tsr_ir_kernel_t *k = NULL;
  if (m) TSR_CHECK_OK(tsr_ir_kernel_create(m, kname, &k));
  if (!k) goto done;
  TSR_CHECK_OK(tsr_ir_kernel_set_grid(k, 1, (int64_t[]){1}, NULL));
  int64_t dims[2] = {8, 128};
  tsr_ir_operand_params_t p = {TSR_ROLE_IN, xname, tsr_ir_type_vector(TSR_DTYPE_F32, 2, dims),
                               TSR_SPACE_VMEM, NULL, -1};
  tsr_ir_value_t *x = NULL, *y = NULL;
  TSR_CHECK_OK(tsr_ir_kernel_add_operand(k, &p, &x, NULL));
  p.role = TSR_ROLE_OUT;
  p.name = yname;
  TSR_CHECK_OK(tsr_ir_kernel_add_operand(k, &p, &y, NULL));
  if (!x || !y) goto done;
  tsr_ir_region_t *body = tsr_ir_kernel_body(k);
  tsr_ir_index_t full[2] = {{TSR_INDEX_FULL, -1, 0, 0, 0, 1}, {TSR_INDEX_FULL, -1, 0, 0, 0, 1}};
  tsr_ir_type_t vt = tsr_ir_type_vector(TSR_DTYPE_F32, 2, dims);
  const char *names[] = {vname};
  tsr_ir_op_params_t load = {.mnemonic = "load", .loc = {opfile, 41, 5}, .operands = &x,
                             .num_operands = 1, .result_types = &vt, .result_names = names,
                             .num_results = 1, .indices = full, .num_indices = 2};
  tsr_ir_op_t *op = NULL;
  TSR_CHECK_OK(tsr_ir_build_op(k, body, &load, &op));
  if (!op) goto done;
  tsr_ir_value_t *v = tsr_ir_op_result(op, 0);
  tsr_ir_value_t *store_operands[] = {y, v};
  tsr_ir_op_params_t store = {.mnemonic = "store", .loc = {opfile, 42, 5},
                              .operands = store_operands, .num_operands = 2,
                              .indices = full, .num_indices = 2};
  TSR_CHECK_OK(tsr_ir_build_op(k, body, &store, NULL));
  tsr_ir_value_t *gid = NULL;
  tsr_ir_type_t i32 = tsr_ir_type_scalar(TSR_DTYPE_I32);
  tsr_ir_op_params_t pid = {.mnemonic = "program_id", .loc = {opfile, 43, 5},
                            .result_types = &i32, .num_results = 1,
                            .ints = (int64_t[]){0}, .num_ints = 1};
  TSR_CHECK_OK(tsr_ir_build_op(k, body, &pid, &op));
  gid = op ? tsr_ir_op_result(op, 0) : NULL;
  tsr_ir_op_params_t print = {.mnemonic = "print", .loc = {opfile, 44, 5}, .operands = &gid,
                              .num_operands = 1, .text = text};
  if (gid) TSR_CHECK_OK(tsr_ir_build_op(k, body, &print, NULL));
  /* Every string the caller gave goes away now. */
  scrub(filename), scrub(kname), scrub(xname), scrub(yname), scrub(opfile), scrub(vname),
      scrub(text);
  filename = kname = xname = yname = opfile = vname = text = NULL;
  TSR_CHECK_OK(tsr_ir_module_verify(m));
  char *printed = tsr_ir_module_print(m);
  TSR_CHECK(printed && strstr(printed, "kernel @built") && strstr(printed, "%v = load %x") &&
            strstr(printed, "\"hello {}\""));
  tsr_free_buffer(printed);
  /* A run names the op's own file: a kernel error there must say
   * python_source.py:41:5. Out-of-date inputs (no data) give one. */
  tsr_context_t *ctx = plain_context();
  tsr_executable_t *exe = NULL;
  if (ctx) TSR_CHECK_OK(tsr_executable_create(ctx, k, NULL, &exe));
  tsr_ir_module_destroy(m);
  m = NULL;
  if (exe) {
    tsr_array_t a, b;
    TSR_CHECK_OK(tsr_array_initialize(TSR_DTYPE_F32, 2, dims, &a));
    TSR_CHECK_OK(tsr_array_initialize(TSR_DTYPE_F32, 2, dims, &b));
    tsr_array_t *operands[] = {&a, &b};
    captured_t printed_text = {0};
    tsr_run_options_t ro;
    tsr_run_options_initialize(&ro);
    ro.output.print = capture;
    ro.output.user = &printed_text;
    TSR_CHECK_OK(tsr_executable_run(exe, operands, 2, &ro, NULL));
    TSR_CHECK(strstr(printed_text.text, "hello 0") != NULL);
    tsr_array_deinitialize(&a);
    tsr_array_deinitialize(&b);
  }
  tsr_executable_destroy(exe);
  tsr_context_destroy(ctx);
done:
  tsr_ir_module_destroy(m);
  free(filename), free(kname), free(xname), free(yname), free(opfile), free(vname), free(text);
}

/* Locations of built ops name the caller's file, copied. */
TSR_TEST(builder_location_file_copied) {
  char *opfile = heap_copy("copied_file.py");
  tsr_ir_module_t *m = NULL;
  TSR_CHECK_OK(tsr_ir_module_create("mod.tsr", &m));
  tsr_ir_kernel_t *k = NULL;
  if (m) TSR_CHECK_OK(tsr_ir_kernel_create(m, "k", &k));
  if (!k) goto done;
  TSR_CHECK_OK(tsr_ir_kernel_set_grid(k, 1, (int64_t[]){1}, NULL));
  tsr_ir_type_t i32 = tsr_ir_type_scalar(TSR_DTYPE_I32);
  tsr_ir_type_t f32 = tsr_ir_type_scalar(TSR_DTYPE_F32);
  tsr_ir_op_params_t c = {.mnemonic = "const", .loc = {opfile, 7, 3}, .result_types = &i32,
                          .num_results = 1};
  tsr_ir_op_t *op = NULL;
  TSR_CHECK_OK(tsr_ir_build_op(k, tsr_ir_kernel_body(k), &c, &op));
  tsr_ir_value_t *a = op ? tsr_ir_op_result(op, 0) : NULL;
  c.result_types = &f32;
  c.loc.line = 8;
  TSR_CHECK_OK(tsr_ir_build_op(k, tsr_ir_kernel_body(k), &c, &op));
  tsr_ir_value_t *b = op ? tsr_ir_op_result(op, 0) : NULL;
  tsr_ir_value_t *ab[] = {a, b};
  tsr_ir_op_params_t add = {.mnemonic = "add", .loc = {opfile, 9, 3}, .operands = ab,
                            .num_operands = 2, .result_types = &i32, .num_results = 1};
  if (a && b) TSR_CHECK_OK(tsr_ir_build_op(k, tsr_ir_kernel_body(k), &add, NULL));
  scrub(opfile);
  opfile = NULL;
  tsr_status_t s = tsr_ir_module_verify(m);
  TSR_CHECK_EQ_INT(tsr_status_code(s), TSR_VERIFY_ERROR);
  tsr_diagnostic_list_t *list = NULL;
  TSR_CHECK_OK(tsr_diagnostic_list_create_from_status(s, &list));
  const tsr_diagnostic_t *d = tsr_diagnostic_list_get(list, 0);
  TSR_CHECK(d && view_is(d->file, "copied_file.py") && d->line == 9 && d->col == 3);
  tsr_diagnostic_list_destroy(list);
  tsr_status_free(s);
done:
  tsr_ir_module_destroy(m);
  free(opfile);
}

TSR_TEST(names) {
  TSR_CHECK_EQ_STR(tsr_diagnostic_kind_name(TSR_DIAG_RACE), "race");
  TSR_CHECK_EQ_STR(tsr_diagnostic_kind_name(TSR_DIAG_OUT_OF_BOUNDS), "out_of_bounds");
  TSR_CHECK_EQ_STR(tsr_diagnostic_severity_name(TSR_SEVERITY_WARNING), "warning");
  /* Every kind has its own name (the names table is by designated index: a
   * kind added without one would leave a hole the size check cannot see). */
  for (int k = 0; k < TSR_DIAG_KIND_COUNT; k++) {
    const char *name = tsr_diagnostic_kind_name((tsr_diagnostic_kind_t)k);
    if (!name || !*name || strcmp(name, "?") == 0) TSR_FAIL_AT("diagnostic kind %d has no name", k);
    for (int j = 0; name && j < k; j++)
      if (strcmp(name, tsr_diagnostic_kind_name((tsr_diagnostic_kind_t)j)) == 0)
        TSR_FAIL_AT("diagnostic kinds %d and %d are both named %s", j, k, name);
  }
  tsr_backend_t b;
  TSR_CHECK(tsr_backend_from_name("cpu", &b) && b == TSR_BACKEND_CPU);
  TSR_CHECK(!tsr_backend_from_name("tpu", &b));
  TSR_CHECK_EQ_STR(tsr_backend_name(TSR_BACKEND_INTERP), "interp");
}

int main(void) {
  make_temp_root();
  TSR_RUN_OR_SKIP(flow_interp);
  TSR_RUN_OR_SKIP(flow_cpu);
  TSR_RUN_OR_SKIP(no_cpu_backend_says_how_to_get_it);
  TSR_RUN_OR_SKIP(kernel_error_records);
  TSR_RUN_OR_SKIP(out_of_bounds_record);
  TSR_RUN_OR_SKIP(deadlock_record_interp);
  TSR_RUN_OR_SKIP(deadlock_record_cpu);
  TSR_RUN_OR_SKIP(revisit_record_interp);
  TSR_RUN_OR_SKIP(revisit_record_cpu);
  TSR_RUN_OR_SKIP(parallel_revisit_record_interp);
  TSR_RUN_OR_SKIP(parallel_revisit_record_cpu);
  TSR_RUN_OR_SKIP(parallel_order_interp);
  TSR_RUN_OR_SKIP(parallel_order_cpu);
  TSR_RUN_OR_SKIP(progress_interp);
  TSR_RUN_OR_SKIP(progress_cpu);
  TSR_RUN_OR_SKIP(shuffle_parallel_same_order_in_both_backends);
  TSR_RUN_OR_SKIP(race_record_second_access);
  TSR_RUN_OR_SKIP(run_stopped_record_interp);
  TSR_RUN_OR_SKIP(run_stopped_record_cpu);
  TSR_RUN_OR_SKIP(warning_record);
  TSR_RUN_OR_SKIP(bounds_options_cpu_matches_interp);
  TSR_RUN_OR_SKIP(parse_and_verify_records);
  TSR_RUN_OR_SKIP(parse_error_record_fields);
  TSR_RUN_OR_SKIP(verify_records_in_order_with_op);
  TSR_RUN_OR_SKIP(record_file_name_that_looks_like_a_location);
  TSR_RUN_OR_SKIP(status_without_records_is_one_unlocated_record);
  TSR_RUN_OR_SKIP(verify_records_past_the_limit);
  TSR_RUN_OR_SKIP(vmem_budget_record);
  TSR_RUN_OR_SKIP(builder_dynamic_grid_extent);
  TSR_RUN_OR_SKIP(builder_copies_strings);
  TSR_RUN_OR_SKIP(builder_location_file_copied);
  TSR_RUN_OR_SKIP(names);
  /* Last: it changes the environment. */
  TSR_RUN_OR_SKIP(context_ignores_environment);
  return tsr_test_done();
}
