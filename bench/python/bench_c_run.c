/* The floor a binding is measured against: a warm tsr_executable_run of a
 * tiny kernel called from C, with the result destroyed after each run (as
 * the Python package does). Usage: bench_c_run KERNEL.tsr ITERATIONS BACKEND
 * [with-output]; prints "ns_per_run N". Built and run by bench_binding.py. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tessera/tessera.h>

static void discard(void *user, const char *text, size_t size) {
  (void)user, (void)text, (void)size;
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int fail(tsr_status_t s) {
  fprintf(stderr, "bench_c_run: %s\n", tsr_status_message(s));
  tsr_status_free(s);
  return 1;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: bench_c_run KERNEL.tsr ITERATIONS interp|cpu [with-output]\n");
    return 2;
  }
  long iterations = atol(argv[2]);
  bool with_output = argc > 4 && strcmp(argv[4], "with-output") == 0;
  tsr_ir_module_t *m = NULL;
  tsr_status_t s = tsr_ir_module_parse_file(argv[1], &m);
  if (s) return fail(s);
  tsr_context_t *ctx = NULL;
  if ((s = tsr_context_create(NULL, &ctx))) return fail(s);
  tsr_executable_options_t eo;
  tsr_executable_options_initialize(&eo);
  if (!tsr_backend_from_name(argv[3], &eo.backend)) return 2;
  tsr_executable_t *exe = NULL;
  const tsr_ir_kernel_t *k = tsr_ir_module_kernel(m, 0);
  if ((s = tsr_executable_create(ctx, k, &eo, &exe))) return fail(s);
  size_t n = 0;
  tsr_array_t arrays[8];
  tsr_array_t *ops[8];
  for (size_t i = 0; i < tsr_ir_kernel_operand_count(k) && n < 8; i++) {
    tsr_ir_operand_info_t info;
    tsr_ir_kernel_operand_info(k, i, &info);
    if (info.role == TSR_ROLE_SCRATCH) continue;
    if ((s = tsr_array_initialize(info.dtype, info.rank, info.dims, &arrays[n]))) return fail(s);
    ops[n] = &arrays[n];
    n++;
  }
  tsr_run_options_t ro;
  tsr_run_options_initialize(&ro);
  volatile int cancel = 0;
  if (with_output) { /* what the Python package sets on every run */
    ro.output.print = discard;
    ro.output.warning = discard;
    ro.cancel = &cancel;
  }
  double best = 1e30;
  for (int rep = 0; rep < 15; rep++) {
    double t0 = now();
    for (long i = 0; i < iterations; i++) {
      tsr_run_result_t *result = NULL;
      s = tsr_executable_run(exe, ops, n, &ro, &result);
      tsr_run_result_destroy(result);
      if (s) return fail(s);
    }
    double per = (now() - t0) / (double)iterations;
    if (per < best) best = per;
  }
  printf("ns_per_run %.0f\n", best * 1e9);
  for (size_t i = 0; i < n; i++) tsr_array_deinitialize(&arrays[i]);
  tsr_executable_destroy(exe);
  tsr_context_destroy(ctx);
  tsr_ir_module_destroy(m);
  return 0;
}
