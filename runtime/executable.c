/* Executables (tessera/api.h): one handle over the interpreter's prepared
 * program (runtime/program_cache.c) and the cpu backend's compiled kernel
 * (runtime/compiled.c), and run results carrying the records of the run's
 * diagnostics sink. Output reaches the caller's callbacks through FILE *
 * streams made per run; options that may change per run are passed per run
 * (tsr_interp_program_run_with). */
#include <stdatomic.h>
#include <stdlib.h>

#include "runtime/api_internal.h"

/* Lifetime: tsr_executable_destroy lets go of the creator's reference and
 * every run holds one while it runs, so an executable destroyed during a
 * run (from another thread, or from the run's own output callback) is
 * freed when the last run ends, never under one. The executable holds a
 * reference to its context, which so outlives it whatever the order of
 * their destroys. */
struct tsr_executable {
  /* Changed by runs of a `const tsr_executable_t *`: the count is not part
   * of what the executable is. */
  _Atomic(uint32_t) references;
  tsr_context_t *context;
  tsr_backend_t backend;
  /* What every run starts from (the per-run fields: bounds, strict, trace,
   * streams set per run); trace_path is owned. */
  tsr_interp_options_t run_options;
  tsr_output_t output;
  tsr_interp_program_t *program;   /* interp */
  tsr_compiled_kernel_t *compiled; /* cpu */
};

struct tsr_run_result {
  tsr_status_code_t code;
  char *message;
  tsr_diagnostic_list_t *diagnostics;
  tsr_interp_stats_t stats;
};

uint32_t tsr_abi_version(void) { return TSR_ABI_VERSION; }

void tsr_executable_options_initialize(tsr_executable_options_t *options) {
  memset(options, 0, sizeof *options);
  options->backend = TSR_BACKEND_INTERP;
  tsr_interp_options_initialize(&options->run);
  tsr_compile_options_t co;
  tsr_compile_options_initialize(&co);
  options->opt_level = co.opt_level;
}

void tsr_run_options_initialize(tsr_run_options_t *options) {
  memset(options, 0, sizeof *options);
  options->strict = -1;
  options->progress_interval = -1;
}

static tsr_status_t create_interp(tsr_executable_t *e, const tsr_ir_kernel_t *kernel) {
  /* Prepared without the per-run fields: each run passes its own. */
  tsr_interp_options_t io = e->run_options;
  io.trace_path = NULL;
  return tsr_runtime_prepare(kernel, &io, &e->program);
}

static tsr_status_t create_cpu(tsr_executable_t *e, const tsr_ir_kernel_t *kernel,
                               const tsr_executable_options_t *o) {
  tsr_compile_options_t co;
  tsr_compile_options_of(o, &co);
  /* The compile finds and puts the object in the context's caches (bound). */
  return tsr_runtime_compile(kernel, &co, &e->compiled);
}

/* The calls on an executable work for its context: they run with its
 * binding (its caches and allocator, runtime_internal.h). */

static tsr_status_t create(tsr_context_t *context, const tsr_ir_kernel_t *kernel,
                           const tsr_executable_options_t *options,
                           tsr_executable_t **out_executable) {
  tsr_executable_options_t defaults;
  if (!options) {
    tsr_executable_options_initialize(&defaults);
    options = &defaults;
  }
  tsr_executable_t *e = tsr_calloc(1, sizeof *e);
  if (!e) return TSR_OOM();
  atomic_init(&e->references, 1);
  tsr_context_retain(context);
  e->context = context;
  e->backend = options->backend;
  e->output = options->output;
  e->run_options = options->run;
  e->run_options.trace_path = NULL;
  if (options->run.trace_path) {
    e->run_options.trace_path =
        tsr_strndup(options->run.trace_path, strlen(options->run.trace_path));
    if (!e->run_options.trace_path) {
      tsr_executable_destroy(e);
      return TSR_OOM();
    }
  }
  /* parallel_order is owned too: the cpu backend reads it at each run. */
  e->run_options.parallel_order = NULL;
  if (options->run.parallel_order && options->run.parallel_order_size) {
    size_t bytes = options->run.parallel_order_size * sizeof(int64_t);
    int64_t *order = tsr_malloc(bytes);
    if (!order) {
      tsr_executable_destroy(e);
      return TSR_OOM();
    }
    memcpy(order, options->run.parallel_order, bytes);
    e->run_options.parallel_order = order;
  } else {
    e->run_options.parallel_order_size = 0;
  }
  /* A switch without default: a backend added to tsr_backend_t without its
   * case here is a -Wswitch warning (an error under --werror). */
  tsr_status_t s = NULL;
  bool known = false;
  switch (options->backend) {
    case TSR_BACKEND_INTERP:
      s = create_interp(e, kernel);
      known = true;
      break;
    case TSR_BACKEND_CPU:
      s = create_cpu(e, kernel, options);
      known = true;
      break;
  }
  if (!known) s = TSR_STATUS(TSR_INVALID_ARGUMENT, "unknown backend %d", (int)options->backend);
  e->run_options.chip = NULL; /* the caller's: the program has its own copy */
  if (s) {
    tsr_executable_destroy(e);
    return s;
  }
  *out_executable = e;
  return NULL;
}

tsr_status_t tsr_executable_create(tsr_context_t *context, const tsr_ir_kernel_t *kernel,
                                   const tsr_executable_options_t *options,
                                   tsr_executable_t **out_executable) {
  if (!context || !kernel || !out_executable)
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "tsr_executable_create: NULL argument");
  tsr_runtime_binding_t *previous = tsr_runtime_bind(&context->binding);
  tsr_status_t s = create(context, kernel, options, out_executable);
  tsr_runtime_bind(previous);
  return s;
}

/* Frees the executable (with its context's binding: the program goes back
 * to the context's caches), then lets go of its context, which may free it
 * too. */
static void executable_free(tsr_executable_t *executable) {
  tsr_context_t *context = executable->context;
  tsr_runtime_binding_t *previous = tsr_runtime_bind(&context->binding);
  tsr_interp_program_destroy(executable->program);
  tsr_compiled_kernel_destroy(executable->compiled);
  tsr_free((char *)executable->run_options.trace_path);
  tsr_free((int64_t *)executable->run_options.parallel_order);
  tsr_free(executable);
  tsr_runtime_bind(previous);
  tsr_context_release(context);
}

static void executable_release(const tsr_executable_t *executable) {
  tsr_executable_t *e = (tsr_executable_t *)executable;
  if (atomic_fetch_sub_explicit(&e->references, 1, memory_order_acq_rel) == 1)
    executable_free(e);
}

void tsr_executable_destroy(tsr_executable_t *executable) {
  if (executable) executable_release(executable);
}

tsr_backend_t tsr_executable_backend(const tsr_executable_t *executable) {
  return executable->backend;
}

/* ---- Runs ------------------------------------------------------------------------ */

static void write_target(void *cookie, const char *text, size_t size) {
  tsr_output_target_write(cookie, text, size);
}

/* The options of one run: the executable's, with what `ro` (may be NULL)
 * changes. */
static void run_options_for(const tsr_executable_t *e, const tsr_run_options_t *ro,
                            tsr_interp_options_t *o) {
  *o = e->run_options;
  if (!ro) return;
  if (ro->strict >= 0) o->strict = ro->strict != 0;
  if (ro->timeout_seconds > 0) o->timeout_seconds = ro->timeout_seconds;
  if (ro->max_steps) o->max_steps = ro->max_steps;
  if (ro->cancel) o->cancel = ro->cancel;
  if (ro->trace_path) o->trace_path = ro->trace_path;
  if (ro->on_progress) {
    o->on_progress = ro->on_progress;
    o->on_progress_user = ro->on_progress_user;
  }
  if (ro->progress_interval >= 0) o->progress_interval = ro->progress_interval;
}

/* The result of a run that ended with `status` (borrowed), with the
 * records of its sink. */
static tsr_status_t make_result(const tsr_status_t status, const tsr_diag_sink_t *sink,
                                const tsr_interp_stats_t *stats,
                                tsr_run_result_t **out_result) {
  tsr_run_result_t *r = tsr_calloc(1, sizeof *r);
  if (!r) return TSR_OOM();
  r->code = tsr_status_code(status);
  r->stats = *stats;
  const char *message = tsr_status_message(status);
  r->message = tsr_strndup(message, strlen(message));
  tsr_status_t s = r->message ? tsr_diagnostic_list_create(&r->diagnostics) : TSR_OOM();
  /* A failure other than the kernel's diagnostics (operands that do not
   * match, a trace that cannot be written...) is one record of its own. */
  if (!s && status && r->code != TSR_KERNEL_ERROR)
    s = tsr_diagnostic_list_add_status(r->diagnostics, status);
  if (!s) s = tsr_diagnostic_list_add_sink(r->diagnostics, sink);
  if (s) {
    tsr_run_result_destroy(r);
    return s;
  }
  *out_result = r;
  return NULL;
}

static tsr_status_t execute(const tsr_executable_t *e, tsr_array_t *const *operands,
                           size_t num_operands, const tsr_run_options_t *run_options,
                           tsr_run_result_t **out_result) {
  const tsr_output_t *run = run_options ? &run_options->output : NULL;
  tsr_output_target_t print = tsr_output_pick(false, run, &e->output, &e->context->output);
  tsr_output_target_t warning = tsr_output_pick(true, run, &e->output, &e->context->output);
  tsr_interp_options_t o;
  run_options_for(e, run_options, &o);
  /* Streams per run: the cpu backend prints from one thread per core. */
  FILE *print_stream = tsr_stream_open(write_target, &print);
  FILE *warning_stream = tsr_stream_open(write_target, &warning);
  tsr_interp_stats_t stats;
  memset(&stats, 0, sizeof stats);
  tsr_diag_sink_t sink;
  memset(&sink, 0, sizeof sink);
  tsr_status_t s;
  if (!print_stream || !warning_stream) {
    s = TSR_OOM();
  } else if (e->program) {
    tsr_interp_run_options_t ro;
    tsr_interp_run_options_of(&o, &ro);
    ro.print_stream = print_stream;
    ro.warning_stream = warning_stream;
    s = tsr_interp_program_run_with(e->program, operands, num_operands, &ro, &stats, &sink);
  } else {
    s = tsr_compiled_kernel_run_with(e->compiled, operands, num_operands, &o, print_stream,
                                     &sink);
    /* its warnings (an access outside a ref where the options allow it, a
     * block written by two cores) as the interpreter writes them */
    stats.warnings = tsr_diag_sink_write_warnings(&sink, warning_stream);
  }
  if (print_stream) fclose(print_stream);
  if (warning_stream) fclose(warning_stream);
  if (out_result) {
    *out_result = NULL;
    tsr_status_t r = make_result(s, &sink, &stats, out_result);
    if (r) {
      tsr_status_free(s);
      s = r;
    }
  }
  tsr_diag_sink_deinitialize(&sink);
  return s;
}

tsr_status_t tsr_executable_run(const tsr_executable_t *executable,
                                tsr_array_t *const *operands, size_t num_operands,
                                const tsr_run_options_t *run_options,
                                tsr_run_result_t **out_result) {
  if (!executable)
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "tsr_executable_run: NULL executable");
  atomic_fetch_add_explicit(&((tsr_executable_t *)executable)->references, 1,
                            memory_order_relaxed);
  tsr_runtime_binding_t *previous = tsr_runtime_bind(&executable->context->binding);
  tsr_status_t s = execute(executable, operands, num_operands, run_options, out_result);
  tsr_runtime_bind(previous);
  executable_release(executable);
  return s;
}

void tsr_run_result_destroy(tsr_run_result_t *result) {
  if (!result) return;
  tsr_free(result->message);
  tsr_diagnostic_list_destroy(result->diagnostics);
  tsr_free(result);
}

tsr_status_code_t tsr_run_result_code(const tsr_run_result_t *result) {
  return result->code;
}

const char *tsr_run_result_message(const tsr_run_result_t *result) {
  return result->message;
}

const tsr_diagnostic_list_t *tsr_run_result_diagnostics(const tsr_run_result_t *result) {
  return result->diagnostics;
}

void tsr_run_result_stats(const tsr_run_result_t *result, tsr_interp_stats_t *out_stats) {
  *out_stats = result->stats;
}
