/* The XLA FFI handler (runtime/xla_ffi.c), called with call frames made as
 * XLA makes them (runtime/xla_ffi.h): the metadata query and the stages
 * before execution do nothing; a direct run writes XLA's output buffers and
 * calls neither callback; a run that prints or fails reaches `finish` with
 * its text and status; a binding not direct, or retired, goes to `call`;
 * a call naming another process or missing its attributes is an error;
 * Ctrl-C's interrupt cancels the watched thread's run, and retire waits
 * for a direct run in progress. In suite 'cache', so that it also runs
 * under ThreadSanitizer. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/xla_ffi.h"
#include "tessera/api.h"
#include "tests/harness.h"

/* ---- XLA's side: errors, buffers, attributes, frames ----------------------- */

typedef struct {
  int code;
  char message[512];
} fake_error_t;

static void *fake_error_create(ffi_error_args_t *args) {
  fake_error_t *e = calloc(1, sizeof *e);
  if (!e) return NULL;
  e->code = args->errc;
  snprintf(e->message, sizeof e->message, "%s", args->message);
  return e;
}

static ffi_api_t fake_api = {sizeof fake_api, NULL, {0}, NULL, fake_error_create};

enum { LEN = 16 * 128 };

enum { GUARD = 64 }; /* floats after y, which no run may write */

typedef struct {
  float x[LEN], y[LEN + GUARD];
  int64_t dims[2];
  ffi_buffer_t bx, by;
  void *args[1], *rets[1];
  uint64_t binding, process;
  ffi_scalar_t scalars[2];
  ffi_span_t names[2];
  ffi_span_t *name_ptrs[2];
  int types[2];
  void *attrs[2];
  ffi_frame_t frame;
} call_t;

/* A call of `b` on x[i] = i, y = -1, with the attributes XLA passes. */
static void call_init(call_t *c, tsr_xla_binding_t *b, uint64_t process) {
  memset(c, 0, sizeof *c);
  for (int i = 0; i < LEN; i++) c->x[i] = (float)i;
  for (int i = 0; i < LEN + GUARD; i++) c->y[i] = -1.0f;
  c->dims[0] = 16;
  c->dims[1] = 128;
  c->bx = (ffi_buffer_t){sizeof c->bx, NULL, FFI_DTYPE_F32, c->x, 2, c->dims};
  c->by = (ffi_buffer_t){sizeof c->by, NULL, FFI_DTYPE_F32, c->y, 2, c->dims};
  c->args[0] = &c->bx;
  c->rets[0] = &c->by;
  c->binding = (uint64_t)(uintptr_t)b;
  c->process = process;
  const char *names[2] = {"tsr_binding", "tsr_process"};
  uint64_t *values[2] = {&c->binding, &c->process};
  for (int i = 0; i < 2; i++) {
    c->scalars[i] = (ffi_scalar_t){FFI_DTYPE_U64, values[i]};
    c->names[i] = (ffi_span_t){names[i], strlen(names[i])};
    c->name_ptrs[i] = &c->names[i];
    c->types[i] = FFI_ATTR_SCALAR;
    c->attrs[i] = &c->scalars[i];
  }
  ffi_frame_t *f = &c->frame;
  f->struct_size = sizeof *f;
  f->api = &fake_api;
  f->stage = FFI_STAGE_EXECUTE;
  f->args = (ffi_args_t){sizeof f->args, NULL, 1, NULL, c->args};
  f->rets = (ffi_args_t){sizeof f->rets, NULL, 1, NULL, c->rets};
  f->attrs = (ffi_attrs_t){sizeof f->attrs, NULL, 2, c->types, c->name_ptrs, c->attrs};
}

typedef void *(*handler_fn)(void *frame);

static fake_error_t *handle(call_t *c) {
  handler_fn h = (handler_fn)tsr_xla_handler();
  return h(&c->frame);
}

/* ---- The binding's side ------------------------------------------------------- */

typedef struct {
  atomic_int calls, finishes;
  void *last_frame;
  bool failed;
  char code[64];
  char message[256];
  char printed[256];
  size_t printed_size, warned_size;
  bool interrupted;
  bool drop;   /* a callback returns without answering (its exception dropped) */
  int drop_at; /* finish: the call that does (counting finishes) */
  bool answer_null; /* finish answers NULL even for a failed run */
} seen_t;

static void on_call(void *user, void *frame, void **out_error) {
  seen_t *s = user;
  s->last_frame = frame;
  atomic_fetch_add(&s->calls, 1);
  if (!s->drop) *out_error = NULL;
}

static void on_finish(void *user, void *frame, tsr_status_t status,
                       const tsr_run_result_t *result, const char *printed, size_t printed_size,
                       const char *warned, size_t warned_size, bool interrupted,
                       void **out_error) {
  (void)warned;
  seen_t *s = user;
  s->last_frame = frame;
  s->failed = status != NULL;
  snprintf(s->code, sizeof s->code, "%s",
           tsr_status_code_name(result ? tsr_run_result_code(result) : TSR_OK));
  snprintf(s->message, sizeof s->message, "%s", result ? tsr_run_result_message(result) : "");
  snprintf(s->printed, sizeof s->printed, "%.*s", (int)printed_size, printed);
  s->printed_size = printed_size;
  s->warned_size = warned_size;
  s->interrupted = interrupted;
  int n = atomic_fetch_add(&s->finishes, 1);
  if (s->drop && n == s->drop_at) return; /* no answer: an exception dropped at entry */
  ffi_error_args_t a = {sizeof a, NULL, interrupted ? "interrupted" : "from finish",
                        FFI_ERROR_INTERNAL};
  *out_error = status && !s->answer_null ? ((ffi_frame_t *)frame)->api->error_create(&a) : NULL;
}

typedef struct {
  tsr_context_t *ctx;
  tsr_executable_t *exe;
  tsr_xla_binding_t *binding;
  seen_t seen;
} bound_t;

static bool bind_text(bound_t *b, const char *text, bool direct) {
  memset(b, 0, sizeof *b);
  tsr_ir_module_t *m = NULL;
  tsr_status_t s =
      tsr_ir_module_parse(TSR_SV("k.tsr"), (tsr_string_view_t){text, strlen(text)}, &m);
  if (!s) s = tsr_context_create(NULL, &b->ctx);
  if (!s) s = tsr_executable_create(b->ctx, tsr_ir_module_kernel(m, 0), NULL, &b->exe);
  tsr_ir_module_destroy(m);
  tsr_array_t ops[2] = {{TSR_DTYPE_F32, 2, {16, 128}, NULL}, {TSR_DTYPE_F32, 2, {16, 128}, NULL}};
  if (!s)
    s = tsr_xla_bind(b->exe, ops, 2, 1, direct, on_call, on_finish, &b->seen, &b->binding);
  if (s) {
    TSR_FAIL_AT("setup: %s", tsr_status_message(s));
    tsr_status_free(s);
    return false;
  }
  return true;
}

static void unbind(bound_t *b) {
  tsr_xla_retire(b->binding);
  tsr_executable_destroy(b->exe);
  tsr_context_destroy(b->ctx);
}

#define KERNEL_HEAD                                                                     \
  "kernel @k\n"                                                                         \
  "  grid(2)\n"                                                                         \
  "  in %x: f32[16, 128] vmem block[8, 128] map(%i) -> (%i, 0)\n"                       \
  "  out %y: f32[16, 128] vmem block[8, 128] map(%i) -> (%i, 0)\n"                      \
  "{\n"                                                                                 \
  "  %v = load %x[:, :] : f32[8, 128]\n"                                                \
  "  %w = add %v, %v : f32[8, 128]\n"                                                   \
  "  store %y[:, :], %w\n"

static const char twice_tsr[] = KERNEL_HEAD "}\n";

static const char prints_tsr[] = KERNEL_HEAD
    "  %g = program_id 0 : i32\n"
    "  print \"step {}\", %g\n"
    "}\n";

static const char oob_tsr[] = KERNEL_HEAD
    "  %g = program_id 0 : i32\n"
    "  %e = const 15 : i32\n"
    "  %k = add %g, %e : i32\n"
    "  %row = load %x[%k, :] : f32[128]\n"
    "}\n";

static const char endless_tsr[] = KERNEL_HEAD
    "  %zero = const 0 : i32\n"
    "  %one = const 1 : i32\n"
    "  %n = while iter(%c = %zero) : i32 {\n"
    "    %more = ge %c, %zero : i1\n"
    "    condition %more\n"
    "  } do {\n"
    "    %c1 = add %c, %one : i32\n"
    "    %c2 = sub %c1, %one : i32\n"
    "    yield %c2\n"
    "  }\n"
    "}\n";

static bool guard_intact(const call_t *c) {
  for (int i = LEN; i < LEN + GUARD; i++)
    if (c->y[i] != -1.0f) return false;
  return true;
}

static bool twice_of_x(const call_t *c) {
  for (int i = 0; i < LEN; i++)
    if (c->y[i] != 2.0f * (float)i) return false;
  return true;
}

/* ---- Tests -------------------------------------------------------------------------- */

TSR_TEST(metadata_and_early_stages_do_not_run) {
  bound_t b;
  if (!bind_text(&b, twice_tsr, true)) return;
  static call_t c;
  call_init(&c, b.binding, tsr_xla_process());
  ffi_metadata_t meta = {sizeof meta, {sizeof meta.api_version, NULL, -1, -1}, 7};
  ffi_metadata_ext_t ext = {{sizeof ext, FFI_EXTENSION_METADATA, NULL}, &meta};
  c.frame.ext = &ext.base;
  uint64_t runs = tsr_xla_direct_runs();
  TSR_CHECK(handle(&c) == NULL);
  TSR_CHECK_EQ_INT(meta.api_version.major, FFI_API_MAJOR);
  TSR_CHECK_EQ_INT(meta.api_version.minor, FFI_API_MINOR);
  TSR_CHECK_EQ_INT(meta.traits, 0);
  c.frame.ext = NULL;
  c.frame.stage = 0; /* instantiate */
  TSR_CHECK(handle(&c) == NULL);
  TSR_CHECK(tsr_xla_direct_runs() == runs);
  TSR_CHECK(c.y[0] == -1.0f && c.y[LEN - 1] == -1.0f);
  TSR_CHECK_EQ_INT(atomic_load(&b.seen.calls) + atomic_load(&b.seen.finishes), 0);
  unbind(&b);
}

TSR_TEST(a_direct_run_writes_xlas_buffers_without_a_callback) {
  bound_t b;
  if (!bind_text(&b, twice_tsr, true)) return;
  static call_t c;
  call_init(&c, b.binding, tsr_xla_process());
  uint64_t runs = tsr_xla_direct_runs();
  TSR_CHECK(handle(&c) == NULL);
  TSR_CHECK(twice_of_x(&c) && guard_intact(&c));
  TSR_CHECK(tsr_xla_direct_runs() == runs + 1);
  TSR_CHECK_EQ_INT(atomic_load(&b.seen.calls) + atomic_load(&b.seen.finishes), 0);
  unbind(&b);
}

TSR_TEST(prints_and_errors_reach_finish_after_the_run) {
  bound_t b;
  if (!bind_text(&b, prints_tsr, true)) return;
  static call_t c;
  call_init(&c, b.binding, tsr_xla_process());
  TSR_CHECK(handle(&c) == NULL);
  TSR_CHECK(twice_of_x(&c));
  TSR_CHECK_EQ_INT(atomic_load(&b.seen.finishes), 1);
  TSR_CHECK(!b.seen.failed);
  TSR_CHECK(b.seen.last_frame == &c.frame);
  TSR_CHECK_EQ_STR(b.seen.printed, "step 0\nstep 1\n");
  TSR_CHECK(b.seen.printed_size == strlen("step 0\nstep 1\n"));
  unbind(&b);

  if (!bind_text(&b, oob_tsr, true)) return;
  call_init(&c, b.binding, tsr_xla_process());
  fake_error_t *e = handle(&c); /* what finish returns */
  TSR_CHECK(e && strcmp(e->message, "from finish") == 0);
  free(e);
  TSR_CHECK_EQ_INT(atomic_load(&b.seen.finishes), 1);
  TSR_CHECK(b.seen.failed && !b.seen.interrupted);
  TSR_CHECK_EQ_STR(b.seen.code, "kernel error");
  TSR_CHECK(strstr(b.seen.message, "out of bounds") != NULL);
  TSR_CHECK_EQ_INT(atomic_load(&b.seen.calls), 0);
  /* a finish that does not answer (interrupted on its way in) is called
   * once more, told it was interrupted */
  b.seen.drop = true;
  b.seen.drop_at = 1;
  e = handle(&c);
  TSR_CHECK_EQ_INT(atomic_load(&b.seen.finishes), 3);
  TSR_CHECK(e && strcmp(e->message, "interrupted") == 0 && b.seen.interrupted);
  free(e);
  /* a failed run is never a success: answered NULL, the handler reports
   * the status itself */
  b.seen.drop = false;
  b.seen.answer_null = true;
  e = handle(&c);
  TSR_CHECK(e && e->code == FFI_ERROR_INTERNAL && strstr(e->message, "out of bounds"));
  free(e);
  unbind(&b);
}

TSR_TEST(a_binding_not_direct_or_retired_goes_to_call) {
  bound_t b;
  if (!bind_text(&b, twice_tsr, false)) return;
  static call_t c;
  call_init(&c, b.binding, tsr_xla_process());
  uint64_t runs = tsr_xla_direct_runs();
  TSR_CHECK(handle(&c) == NULL);
  TSR_CHECK_EQ_INT(atomic_load(&b.seen.calls), 1);
  TSR_CHECK(b.seen.last_frame == &c.frame);
  TSR_CHECK(c.y[0] == -1.0f); /* `call` ran nothing */
  b.seen.drop = true; /* a call interrupted on its way in: no run, no success */
  fake_error_t *e = handle(&c);
  TSR_CHECK(e && e->code == FFI_ERROR_CANCELLED && strstr(e->message, "interrupted"));
  free(e);
  unbind(&b);

  if (!bind_text(&b, twice_tsr, true)) return;
  call_init(&c, b.binding, tsr_xla_process());
  tsr_xla_retire(b.binding);
  TSR_CHECK(handle(&c) == NULL);
  TSR_CHECK_EQ_INT(atomic_load(&b.seen.calls), 1);
  TSR_CHECK(c.y[0] == -1.0f);
  TSR_CHECK(tsr_xla_direct_runs() == runs);
  unbind(&b);
}

TSR_TEST(calls_naming_another_process_or_without_attributes_are_errors) {
  bound_t b;
  if (!bind_text(&b, twice_tsr, true)) return;
  TSR_CHECK(tsr_xla_process() != 0 && tsr_xla_process() < (UINT64_C(1) << 62));
  TSR_CHECK(tsr_xla_process() == tsr_xla_process());
  static call_t c;
  call_init(&c, b.binding, tsr_xla_process() ^ 1);
  fake_error_t *e = handle(&c);
  TSR_CHECK(e && e->code == FFI_ERROR_INVALID_ARGUMENT && strstr(e->message, "another process"));
  free(e);
  call_init(&c, b.binding, tsr_xla_process());
  c.frame.attrs.size = 1; /* tsr_process missing */
  e = handle(&c);
  TSR_CHECK(e && strstr(e->message, "tsr_binding and tsr_process"));
  free(e);
  call_init(&c, b.binding, tsr_xla_process());
  c.frame.rets.size = 0;
  e = handle(&c);
  TSR_CHECK(e && strstr(e->message, "1 operands and 0 results") &&
            strstr(e->message, "1 inputs and gives 1 outputs"));
  free(e);
  TSR_CHECK(c.y[0] == -1.0f);
  TSR_CHECK_EQ_INT(atomic_load(&b.seen.calls) + atomic_load(&b.seen.finishes), 0);
  unbind(&b);
}

/* XLA's buffers are checked against the kernel's arrays before a run: a
 * result buffer of half the rows (here y's first 8 rows, the guard floats
 * after them never written) or of a narrower dtype is refused, nothing
 * written; the buffer of the right shape is written up to its end. */
TSR_TEST(buffers_of_another_size_are_refused_before_the_run) {
  bound_t b;
  if (!bind_text(&b, twice_tsr, true)) return;
  static call_t c;
  call_init(&c, b.binding, tsr_xla_process());
  static int64_t half[2] = {8, 128};
  c.by.dims = half;
  float *guard_at = c.y + 8 * 128;
  for (int i = 0; i < 8 * 128; i++) guard_at[i] = 7.0f;
  uint64_t runs = tsr_xla_direct_runs();
  fake_error_t *e = handle(&c);
  TSR_CHECK(e && e->code == FFI_ERROR_INVALID_ARGUMENT && strstr(e->message, "result 0") &&
            strstr(e->message, "output array of f32"));
  free(e);
  TSR_CHECK(c.y[0] == -1.0f && guard_at[0] == 7.0f && guard_at[8 * 128 - 1] == 7.0f);
  TSR_CHECK(tsr_xla_direct_runs() == runs);
  call_init(&c, b.binding, tsr_xla_process());
  c.bx.dtype = FFI_DTYPE_BF16;
  e = handle(&c);
  TSR_CHECK(e && strstr(e->message, "operand 0") && strstr(e->message, "input array"));
  free(e);
  c.bx.dtype = FFI_DTYPE_F32;
  c.bx.rank = 1; /* the same element count in another rank: the same bytes */
  static int64_t flat[1] = {LEN};
  c.bx.dims = flat;
  TSR_CHECK(handle(&c) == NULL);
  TSR_CHECK(twice_of_x(&c) && guard_intact(&c));
  TSR_CHECK_EQ_INT(atomic_load(&b.seen.calls) + atomic_load(&b.seen.finishes), 0);
  unbind(&b);
}

/* ---- Ctrl-C, and retire during a run ---------------------------------------------- */

typedef struct {
  bound_t *b;
  call_t *c;
  atomic_bool done;
} runner_t;

static void *run_watched(void *arg) {
  runner_t *r = arg;
  tsr_xla_set_interrupt_thread((uint64_t)pthread_self());
  free(handle(r->c)); /* finish's error */
  atomic_store(&r->done, true);
  return NULL;
}

typedef struct {
  tsr_xla_binding_t *binding;
  atomic_bool done;
} retirer_t;

static void *retire_it(void *arg) {
  retirer_t *r = arg;
  tsr_xla_retire(r->binding);
  atomic_store(&r->done, true);
  return NULL;
}

static void sleep_ms(int ms) {
  struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

TSR_TEST(interrupt_cancels_the_watched_threads_run_and_retire_waits_for_it) {
  bound_t b;
  if (!bind_text(&b, endless_tsr, true)) return;
  TSR_CHECK(!tsr_xla_interrupt()); /* no run in progress */
  static call_t c;
  call_init(&c, b.binding, tsr_xla_process());
  runner_t r = {&b, &c, false};
  uint64_t runs = tsr_xla_direct_runs();
  pthread_t t;
  if (pthread_create(&t, NULL, run_watched, &r) != 0) {
    TSR_FAIL_AT("thread");
    return;
  }
  while (tsr_xla_direct_runs() == runs) sleep_ms(1); /* the run has begun */
  retirer_t ret = {b.binding, false};
  pthread_t rt;
  if (pthread_create(&rt, NULL, retire_it, &ret) != 0) {
    TSR_FAIL_AT("thread");
    return;
  }
  sleep_ms(50);
  TSR_CHECK(!atomic_load(&ret.done)); /* the run goes on: retire waits */
  TSR_CHECK(!atomic_load(&r.done));
  TSR_CHECK(tsr_xla_interrupt());
  pthread_join(t, NULL);
  pthread_join(rt, NULL);
  TSR_CHECK(atomic_load(&ret.done));
  TSR_CHECK_EQ_INT(atomic_load(&b.seen.finishes), 1);
  TSR_CHECK(b.seen.failed && b.seen.interrupted);
  TSR_CHECK(strstr(b.seen.message, "cancelled") != NULL);
  TSR_CHECK(!tsr_xla_interrupt()); /* over */
  tsr_xla_set_interrupt_thread(0);
  tsr_executable_destroy(b.exe);
  tsr_context_destroy(b.ctx);
}

int main(void) {
  TSR_RUN(metadata_and_early_stages_do_not_run);
  TSR_RUN(a_direct_run_writes_xlas_buffers_without_a_callback);
  TSR_RUN(prints_and_errors_reach_finish_after_the_run);
  TSR_RUN(a_binding_not_direct_or_retired_goes_to_call);
  TSR_RUN(calls_naming_another_process_or_without_attributes_are_errors);
  TSR_RUN(buffers_of_another_size_are_refused_before_the_run);
  TSR_RUN(interrupt_cancels_the_watched_threads_run_and_retire_waits_for_it);
  return tsr_test_done();
}
