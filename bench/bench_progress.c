/* What the progress callback (tsr_interp_options_t's on_progress) costs a
 * run: a kernel of many short grid steps (`grid(N)`, one 4 KiB block copied
 * in and out per step in the interpreter; a load and a store in compiled
 * code) run without a callback, with one at the default interval (0.25 s)
 * and with one at every bounds check (interval 0, the worst case), on each
 * backend; the runs alternate, best of `reps`. docs/benchmarks.md,
 * "Progress". Usage: bench_progress [STEPS_INTERP [STEPS_CPU [REPS]]]. */
#define BENCH_NAME "bench_progress"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"

static const char kernel_text[] =
    "kernel @steps\n"
    "  grid(%ld) semantics(arbitrary)\n"
    "  in %%x: f32[8, 128] vmem block[8, 128] map(%%i) -> (0, 0)\n"
    "  out %%y: f32[8, 128] vmem block[8, 128] map(%%i) -> (0, 0)\n"
    "{\n"
    "  %%v = load %%x[:, :] : f32[8, 128]\n"
    "  store %%y[:, :], %%v\n"
    "}\n";

static void count_call(void *user, uint64_t done, uint64_t total) {
  (void)done, (void)total;
  ++*(uint64_t *)user;
}

static void bench(tsr_context_t *ctx, tsr_backend_t backend, long steps, int reps) {
  char text[sizeof kernel_text + 32];
  snprintf(text, sizeof text, kernel_text, steps);
  tsr_ir_module_t *m = NULL;
  die_on_error(tsr_ir_module_parse((tsr_string_view_t){"steps.tsr", strlen("steps.tsr")},
                                   (tsr_string_view_t){text, strlen(text)}, &m),
               "parse");
  tsr_executable_options_t eo;
  tsr_executable_options_initialize(&eo);
  eo.backend = backend;
  tsr_executable_t *exe = NULL;
  tsr_status_t s = tsr_executable_create(ctx, tsr_ir_module_kernel(m, 0), &eo, &exe);
  if (s && backend == TSR_BACKEND_CPU) {
    printf("cpu: %s\n", tsr_status_message(s));
    tsr_status_free(s);
    tsr_ir_module_destroy(m);
    return;
  }
  die_on_error(s, "create");
  static float x[8 * 128], y[8 * 128];
  bench_fill(x, 8 * 128, 1);
  tsr_array_t arrays[2];
  tsr_array_t *ptrs[2] = {&arrays[0], &arrays[1]};
  for (int i = 0; i < 2; i++) {
    memset(&arrays[i], 0, sizeof arrays[i]);
    arrays[i].dtype = TSR_DTYPE_F32;
    arrays[i].rank = 2;
    arrays[i].dims[0] = 8;
    arrays[i].dims[1] = 128;
    arrays[i].data = i ? y : x;
  }
  const char *names[3] = {"no callback", "callback, interval 0.25 s", "callback, interval 0"};
  double best[3] = {1e30, 1e30, 1e30};
  uint64_t calls[3] = {0, 0, 0};
  for (int r = 0; r < reps; r++)
    for (int c = 0; c < 3; c++) {
      tsr_run_options_t ro;
      tsr_run_options_initialize(&ro);
      uint64_t n = 0;
      if (c) {
        ro.on_progress = count_call;
        ro.on_progress_user = &n;
        ro.progress_interval = c == 1 ? 0.25 : 0;
      }
      double t0 = now_seconds();
      die_on_error(tsr_executable_run(exe, ptrs, 2, &ro, NULL), "run");
      double t = now_seconds() - t0;
      if (t < best[c]) best[c] = t;
      calls[c] = n;
    }
  for (int c = 0; c < 3; c++)
    printf("%-6s %ld steps, %-26s %9.3f ms  %7.2f ns/step  %llu calls\n",
           tsr_backend_name(backend), steps, names[c], best[c] * 1e3, best[c] / (double)steps * 1e9,
           (unsigned long long)calls[c]);
  tsr_executable_destroy(exe);
  tsr_ir_module_destroy(m);
}

int main(int argc, char **argv) {
  long interp_steps = argc > 1 ? atol(argv[1]) : 1000000;
  long cpu_steps = argc > 2 ? atol(argv[2]) : 50000000;
  int reps = argc > 3 ? atoi(argv[3]) : 5;
  tsr_context_t *ctx = NULL;
  die_on_error(tsr_context_create(NULL, &ctx), "context");
  bench(ctx, TSR_BACKEND_INTERP, interp_steps, reps);
  bench(ctx, TSR_BACKEND_CPU, cpu_steps, reps);
  tsr_context_destroy(ctx);
  return 0;
}
