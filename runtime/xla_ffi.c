/* Executables as XLA FFI custom calls on CPU (tessera/api.h, "Runs as XLA
 * custom calls on CPU"). A warm jitted call of a small kernel was mostly
 * the binding's per-call path (docs/benchmarks.md, "The cost of a call"):
 * XLA calling into Python, Python reading the call frame and calling back
 * into the library. Here one C handler serves every kernel, and the binding
 * hears of a call only when there is something to say: a failed run, a
 * print, a warning, or a binding it has taken back.
 *
 * The call frame's layout: runtime/xla_ffi.h. */
#define _GNU_SOURCE /* getrandom */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "runtime/api_internal.h"

#include "runtime/xla_ffi.h"

static void *ffi_error(const ffi_frame_t *frame, int code, const char *message) {
  ffi_error_args_t a = {sizeof a, NULL, message, code};
  return frame->api->error_create(&a);
}

/* ---- Bindings ------------------------------------------------------------ */

struct tsr_xla_binding {
  const tsr_executable_t *exe;
  size_t n, num_inputs;
  tsr_array_t *operands; /* dtype and shape; data set per call, on a copy */
  tsr_xla_call_fn call;
  tsr_xla_finish_fn finish;
  void *user;
  /* A direct run counts itself in `running`, then looks at `direct`;
   * retire clears `direct`, then waits for `running` to be zero: whatever
   * the interleaving, a run either sees the binding retired or is waited
   * for. */
  atomic_bool direct;
  atomic_int running;
  struct tsr_xla_binding *next; /* in `bindings` */
};

/* Every binding of the process: never freed (a compiled call may name one
 * as long as the process lives), and so never lost either. */
static pthread_mutex_t bindings_lock = PTHREAD_MUTEX_INITIALIZER;
static tsr_xla_binding_t *bindings;

static pthread_once_t process_once = PTHREAD_ONCE_INIT;
static uint64_t process_token;
static atomic_ullong direct_runs;

static void process_init(void) {
  uint64_t t = 0;
  if (getrandom(&t, sizeof t, GRND_NONBLOCK) != (ssize_t)sizeof t) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    t = ((uint64_t)ts.tv_sec * 1000000007u) ^ (uint64_t)ts.tv_nsec ^
        ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)&t;
  }
  /* Below 2^62: JAX turns a u64 attribute of 2^63 or more into an MLIR
   * attribute it cannot read back. */
  t &= (UINT64_C(1) << 62) - 1;
  process_token = t ? t : 1;
}

uint64_t tsr_xla_process(void) {
  tsr_process_once(&process_once, process_init);
  return process_token;
}

uint64_t tsr_xla_direct_runs(void) { return atomic_load(&direct_runs); }

tsr_status_t tsr_xla_bind(const tsr_executable_t *executable, const tsr_array_t *operands,
                          size_t num_operands, size_t num_inputs, bool direct,
                          tsr_xla_call_fn call, tsr_xla_finish_fn finish, void *user,
                          tsr_xla_binding_t **out_binding) {
  if (!out_binding)
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "tsr_xla_bind: out_binding is NULL");
  *out_binding = NULL;
  if (!executable || !call || !finish || (num_operands && !operands) ||
      num_inputs > num_operands)
    return TSR_STATUS(TSR_INVALID_ARGUMENT,
                      "tsr_xla_bind: needs an executable, both callbacks and %zu operands "
                      "of which %zu inputs",
                      num_operands, num_inputs);
  tsr_xla_binding_t *b = tsr_calloc(1, sizeof *b);
  tsr_array_t *ops = tsr_calloc(num_operands ? num_operands : 1, sizeof *ops);
  if (!b || !ops) {
    tsr_free(b);
    tsr_free(ops);
    return TSR_OOM();
  }
  for (size_t i = 0; i < num_operands; i++) {
    ops[i] = operands[i];
    ops[i].data = NULL;
  }
  b->exe = executable;
  b->n = num_operands;
  b->num_inputs = num_inputs;
  b->operands = ops;
  b->call = call;
  b->finish = finish;
  b->user = user;
  atomic_init(&b->direct, direct);
  atomic_init(&b->running, 0);
  pthread_mutex_lock(&bindings_lock);
  b->next = bindings;
  bindings = b;
  pthread_mutex_unlock(&bindings_lock);
  *out_binding = b;
  return NULL;
}

void tsr_xla_retire(tsr_xla_binding_t *binding) {
  if (!binding) return;
  atomic_store(&binding->direct, false);
  while (atomic_load(&binding->running) > 0) sched_yield();
}

/* ---- Ctrl-C ---------------------------------------------------------------- */

/* The interrupt thread's direct run in progress polls `interrupt_flag`;
 * `interrupt_running` says one is. A run on that thread clears the flag
 * before it starts, so an interrupt meant for an earlier run is dropped. */
static _Atomic(uint64_t) interrupt_thread;
static int interrupt_flag; /* read by the run as its cancel flag */
static atomic_bool interrupt_running;

void tsr_xla_set_interrupt_thread(uint64_t thread) { atomic_store(&interrupt_thread, thread); }

bool tsr_xla_interrupt(void) {
  if (!atomic_load(&interrupt_running)) return false;
  __atomic_store_n(&interrupt_flag, 1, __ATOMIC_RELAXED);
  return true;
}

/* ---- A run's text ---------------------------------------------------------- */

typedef struct {
  pthread_mutex_t lock; /* several simulated cores print from their threads */
  tsr_strbuf_t printed, warned;
} record_t;

static void record_text(record_t *r, tsr_strbuf_t *t, const char *s, size_t n) {
  pthread_mutex_lock(&r->lock);
  tsr_strbuf_append(t, s, n);
  pthread_mutex_unlock(&r->lock);
}

static void on_print(void *user, const char *text, size_t size) {
  record_t *r = user;
  record_text(r, &r->printed, text, size);
}

static void on_warning(void *user, const char *text, size_t size) {
  record_t *r = user;
  record_text(r, &r->warned, text, size);
}

/* The text recorded, or (out of memory) a line saying it was lost. */
static const char *text_of(const tsr_strbuf_t *t, size_t *size) {
  static const char lost[] = "[tessera: out of memory: this run's text was lost]\n";
  if (t->failed) {
    *size = sizeof lost - 1;
    return lost;
  }
  *size = t->size;
  return t->data ? t->data : "";
}

/* ---- The handler ------------------------------------------------------------ */

/* The u64 scalar attribute `name`, or false. */
static bool attr_u64(const ffi_attrs_t *attrs, const char *name, uint64_t *out) {
  size_t len = strlen(name);
  for (int64_t i = 0; i < attrs->size; i++) {
    const ffi_span_t *s = attrs->names[i];
    if (s->len != len || memcmp(s->ptr, name, len) != 0) continue;
    if (attrs->types[i] != FFI_ATTR_SCALAR) return false;
    const ffi_scalar_t *v = attrs->attrs[i];
    if (v->dtype != FFI_DTYPE_U64) return false;
    memcpy(out, v->value, sizeof *out);
    return true;
  }
  return false;
}

enum { STACK_OPERANDS = 16 };

/* What a callback's *out_error holds until it answers. */
static char unanswered;
#define UNANSWERED ((void *)&unanswered)

/* Bytes of an element of XLA's dtype `t`; sub-byte types take a byte, as
 * tessera stores them; 0 for the others (token, invalid, unknown). */
static size_t ffi_dtype_bytes(int t) {
  switch (t) {
  case 1: case 2: case 6: case 19: case 20: case 21: case 22: case 23: case 24: case 25:
  case 26: case 27: case 28: case 29: case 30: case 31: case 32: case 33:
    return 1; /* pred, s8, u8, the f8s, s4/u4, s2/u2, s1/u1, f4 */
  case 3: case 7: case 10: case 16:
    return 2; /* s16, u16, f16, bf16 */
  case 4: case 8: case 11:
    return 4; /* s32, u32, f32 */
  case 5: case 9: case 12: case 15:
    return 8; /* s64, u64, f64, c64 */
  case 18:
    return 16; /* c128 */
  default:
    return 0;
  }
}

/* Whether XLA's buffer holds exactly the bytes of `want` (what the run
 * reads or writes there): its element count and element size. */
static bool buffer_fits(const ffi_buffer_t *buf, const tsr_array_t *want) {
  size_t es = ffi_dtype_bytes(buf->dtype);
  if (!es || es != tsr_dtype_size(want->dtype) || buf->rank < 0 ||
      (buf->rank > 0 && !buf->dims))
    return false;
  size_t have = 1, need = 1;
  for (int64_t d = 0; d < buf->rank; d++)
    if (buf->dims[d] < 0 || !tsr_mul_size(have, (size_t)buf->dims[d], &have)) return false;
  for (uint32_t d = 0; d < want->rank; d++)
    if (!tsr_mul_size(need, (size_t)want->dims[d], &need)) return false;
  return have == need;
}

/* Runs `b` directly on the frame's buffers: NULL, or the error to report. */
static void *run_direct(tsr_xla_binding_t *b, ffi_frame_t *frame) {
  size_t n = b->n, nin = b->num_inputs;
  tsr_array_t stack_arrays[STACK_OPERANDS];
  tsr_array_t *stack_ptrs[STACK_OPERANDS];
  tsr_array_t *arrays = stack_arrays;
  tsr_array_t **ptrs = stack_ptrs;
  if (n > STACK_OPERANDS) {
    arrays = tsr_calloc(n, sizeof *arrays);
    ptrs = tsr_calloc(n, sizeof *ptrs);
    if (!arrays || !ptrs) {
      tsr_free(arrays);
      tsr_free(ptrs);
      atomic_fetch_sub(&b->running, 1);
      return ffi_error(frame, FFI_ERROR_INTERNAL, "tessera: out of memory");
    }
  }
  for (size_t i = 0; i < n; i++) {
    arrays[i] = b->operands[i];
    const ffi_buffer_t *buf = i < nin ? frame->args.args[i] : frame->rets.args[i - nin];
    arrays[i].data = buf->data;
    ptrs[i] = &arrays[i];
  }
  record_t rec = {.lock = PTHREAD_MUTEX_INITIALIZER};
  tsr_strbuf_initialize(&rec.printed);
  tsr_strbuf_initialize(&rec.warned);
  tsr_run_options_t ro;
  tsr_run_options_initialize(&ro);
  ro.output.print = on_print;
  ro.output.warning = on_warning;
  ro.output.user = &rec;
  int own_flag = 0;
  uint64_t it = atomic_load(&interrupt_thread);
  bool watched = it && (uint64_t)pthread_self() == it;
  if (watched) {
    __atomic_store_n(&interrupt_flag, 0, __ATOMIC_RELAXED);
    atomic_store(&interrupt_running, true);
    ro.cancel = &interrupt_flag;
  } else {
    ro.cancel = &own_flag;
  }
  atomic_fetch_add(&direct_runs, 1);
  tsr_run_result_t *result = NULL;
  tsr_status_t status = tsr_executable_run(b->exe, ptrs, n, &ro, &result);
  bool interrupted = watched && __atomic_load_n(&interrupt_flag, __ATOMIC_RELAXED);
  if (watched) atomic_store(&interrupt_running, false);
  /* The executable is no longer used: retire may go on (before `finish`,
   * which may need what retire's caller holds). */
  atomic_fetch_sub(&b->running, 1);
  if (arrays != stack_arrays) {
    tsr_free(arrays);
    tsr_free(ptrs);
  }
  void *error = NULL;
  if (status || rec.printed.size || rec.warned.size || rec.printed.failed || rec.warned.failed) {
    size_t np, nw;
    const char *p = text_of(&rec.printed, &np);
    const char *w = text_of(&rec.warned, &nw);
    error = UNANSWERED;
    b->finish(b->user, frame, status, result, p, np, w, nw, interrupted, &error);
    if (error == UNANSWERED) { /* interrupted on its way in: say so, once more */
      error = NULL;
      b->finish(b->user, frame, status, result, p, np, w, nw, true, &error);
      if (error == UNANSWERED) error = NULL;
    }
    /* A failed run is never reported as a success. */
    if (!error && status) {
      const char *m = tsr_status_message(status);
      error = ffi_error(frame, interrupted ? FFI_ERROR_CANCELLED : FFI_ERROR_INTERNAL,
                        m && *m ? m : "tessera: the kernel's run failed");
    }
  }
  tsr_status_free(status);
  tsr_run_result_destroy(result);
  tsr_strbuf_deinitialize(&rec.printed);
  tsr_strbuf_deinitialize(&rec.warned);
  pthread_mutex_destroy(&rec.lock);
  return error;
}

static void *handler(void *frame_p) {
  ffi_frame_t *frame = frame_p;
  for (ffi_ext_t *e = frame->ext; e; e = e->next) {
    if (e->type == FFI_EXTENSION_METADATA) {
      ffi_metadata_t *m = ((ffi_metadata_ext_t *)e)->metadata;
      m->api_version.major = FFI_API_MAJOR;
      m->api_version.minor = FFI_API_MINOR;
      m->traits = 0;
      return NULL;
    }
  }
  if (frame->stage != FFI_STAGE_EXECUTE) return NULL;
  uint64_t address = 0, process = 0;
  if (!attr_u64(&frame->attrs, "tsr_binding", &address) ||
      !attr_u64(&frame->attrs, "tsr_process", &process))
    return ffi_error(frame, FFI_ERROR_INVALID_ARGUMENT,
                     "tessera: a custom call without its u64 attributes tsr_binding and "
                     "tsr_process");
  if (process != tsr_xla_process())
    return ffi_error(frame, FFI_ERROR_INVALID_ARGUMENT,
                     "tessera: this compiled call names a kernel of another process (a "
                     "persistent compilation cache?); trace and compile it in this one");
  tsr_xla_binding_t *b = (tsr_xla_binding_t *)(uintptr_t)address;
  if ((size_t)frame->args.size != b->num_inputs ||
      (size_t)frame->rets.size != b->n - b->num_inputs) {
    char message[160];
    snprintf(message, sizeof message,
             "tessera: the custom call has %lld operands and %lld results; the kernel takes "
             "%zu inputs and gives %zu outputs",
             (long long)frame->args.size, (long long)frame->rets.size, b->num_inputs,
             b->n - b->num_inputs);
    return ffi_error(frame, FFI_ERROR_INVALID_ARGUMENT, message);
  }
  /* A run reads and writes these buffers as the kernel's arrays: one of
   * another size is refused before anything touches it. */
  for (size_t i = 0; i < b->n; i++) {
    const ffi_buffer_t *buf =
        i < b->num_inputs ? frame->args.args[i] : frame->rets.args[i - b->num_inputs];
    if (!buf || !buffer_fits(buf, &b->operands[i])) {
      char message[200];
      snprintf(message, sizeof message,
               "tessera: the custom call's %s %zu is not the kernel's %s array of %s (its "
               "element count or element size differs)",
               i < b->num_inputs ? "operand" : "result",
               i < b->num_inputs ? i : i - b->num_inputs,
               i < b->num_inputs ? "input" : "output", tsr_dtype_name(b->operands[i].dtype));
      return ffi_error(frame, FFI_ERROR_INVALID_ARGUMENT, message);
    }
  }
  atomic_fetch_add(&b->running, 1);
  if (!atomic_load(&b->direct)) {
    atomic_fetch_sub(&b->running, 1);
    void *error = UNANSWERED;
    b->call(b->user, frame, &error);
    if (error == UNANSWERED)
      error = ffi_error(frame, FFI_ERROR_CANCELLED,
                        "tessera: the kernel's call was interrupted before it ran");
    return error;
  }
  return run_direct(b, frame);
}

void *tsr_xla_handler(void) { return (void *)handler; }
