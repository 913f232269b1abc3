/* Interpreter benchmarks, all measured in one run: (a) per-grid-step overhead
 * of a trivial kernel over 100 and 100,000 steps, (b) whole-process time of
 * `tessera run` on the 100-step kernel, (c) elementwise add and row sum over
 * 64 MiB f32 arrays in GB/s next to memcpy. Method: docs/benchmarks.md.
 *
 * Usage: bench_interp [--tessera PATH] [--quick]
 *        bench_interp --kernel FILE.tsr [--reps N]: one kernel's load,
 *        prepare, first and later runs, per op executed.
 * Kernel files are read from $TSR_SOURCE_ROOT/bench/kernels (default: the
 * source tree this was built from). */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "interp/interp_runtime.h"
#include "tessera/tessera.h"

#define BENCH_NAME "bench_interp"
#include "bench/bench_util.h"

extern char **environ;

#ifndef TSR_BENCH_SOURCE_ROOT
#define TSR_BENCH_SOURCE_ROOT "."
#endif

static void kernel_path(char *buf, size_t size, const char *file) {
  const char *root = getenv("TSR_SOURCE_ROOT");
  snprintf(buf, size, "%s/bench/kernels/%s", root ? root : TSR_BENCH_SOURCE_ROOT,
           file);
}

/* Prints a failed status and exits: a benchmark that cannot run has no
 * figure to report. */
#define MAX_OPERANDS 8 /* non-scratch operands of a bench kernel */

/* A loaded kernel with arrays bound to its non-scratch operands (random
 * inputs, zero outputs) and a prepared program. */
typedef struct bench_kernel {
  tsr_ir_module_t *module;
  tsr_ir_kernel_t *kernel;
  tsr_interp_program_t *program;
  size_t num_operands;
  tsr_array_t arrays[MAX_OPERANDS];
  tsr_array_t *ptrs[MAX_OPERANDS];
  uint64_t bytes_in, bytes_out; /* sizes of the input and output arrays */
} bench_kernel_t;

static void bench_kernel_open_path(const char *path, const char *name, bool check,
                                   bench_kernel_t *bk) {
  memset(bk, 0, sizeof *bk);
  die_on_error(tsr_runtime_load_file(path, &bk->module), path);
  die_on_error(tsr_runtime_select_kernel(bk->module, name, &bk->kernel), name);
  size_t count = tsr_ir_kernel_operand_count(bk->kernel);
  for (size_t i = 0; i < count; i++) {
    tsr_ir_operand_info_t info;
    tsr_ir_kernel_operand_info(bk->kernel, i, &info);
    if (info.role == TSR_ROLE_SCRATCH) continue;
    if (bk->num_operands == MAX_OPERANDS) die_on_error(TSR_STATUS(TSR_INTERNAL, "too many operands"), name);
    tsr_array_t *a = &bk->arrays[bk->num_operands];
    if (info.role == TSR_ROLE_OUT) {
      die_on_error(tsr_array_initialize(info.dtype, info.rank, info.dims, a), name);
      bk->bytes_out += tsr_array_byte_size(a);
    } else {
      die_on_error(tsr_runtime_random_array(&info, 1 + i, a), name);
      bk->bytes_in += tsr_array_byte_size(a);
    }
    bk->ptrs[bk->num_operands++] = a;
  }
  tsr_interp_options_t options;
  tsr_interp_options_initialize(&options);
  options.check = check;
  die_on_error(tsr_interp_program_prepare(bk->kernel, &options, &bk->program),
               name);
}

static void bench_kernel_open(const char *file, const char *name, bool check,
                              bench_kernel_t *bk) {
  char path[4096];
  kernel_path(path, sizeof path, file);
  bench_kernel_open_path(path, name, check, bk);
}

static void bench_kernel_close(bench_kernel_t *bk) {
  tsr_interp_program_destroy(bk->program);
  for (size_t i = 0; i < bk->num_operands; i++)
    tsr_array_deinitialize(&bk->arrays[i]);
  tsr_ir_module_destroy(bk->module);
}

typedef struct timing {
  double best, mean; /* seconds */
} timing_t;

/* Runs the prepared program `reps` times after one warm-up run. */
static timing_t time_runs(bench_kernel_t *bk, int reps,
                          tsr_interp_stats_t *out_stats) {
  die_on_error(tsr_interp_program_run(bk->program, bk->ptrs, bk->num_operands,
                                      out_stats),
               "warm-up run");
  timing_t t = {INFINITY, 0};
  for (int r = 0; r < reps; r++) {
    double t0 = now_seconds();
    die_on_error(
        tsr_interp_program_run(bk->program, bk->ptrs, bk->num_operands, NULL),
        "run");
    double dt = now_seconds() - t0;
    if (dt < t.best) t.best = dt;
    t.mean += dt / reps;
  }
  return t;
}

/* ---- (a) per-step overhead ----------------------------------------------- */

static void bench_step_overhead(bool quick) {
  static const struct {
    const char *file, *name;
    int reps;
  } kernels[] = {
      {"steps_100.tsr", "steps_100", 200},
      {"steps_100000.tsr", "steps_100000", 10},
  };
  printf("\n(a) per-grid-step overhead: [8, 128] f32 block, body = load + "
         "store, unchanged block index (copied in once)\n");
  printf("%-14s %8s %7s %6s %14s %14s\n", "kernel", "steps", "checks", "runs",
         "best us/step", "mean us/step");
  for (size_t k = 0; k < sizeof kernels / sizeof kernels[0]; k++)
    for (int check = 1; check >= 0; check--) {
      bench_kernel_t bk;
      bench_kernel_open(kernels[k].file, kernels[k].name, check, &bk);
      tsr_interp_stats_t stats;
      int reps = quick ? 3 : kernels[k].reps;
      timing_t t = time_runs(&bk, reps, &stats);
      double steps = (double)stats.grid_steps;
      printf("%-14s %8llu %7s %6d %14.3f %14.3f\n", kernels[k].name,
             (unsigned long long)stats.grid_steps, check ? "on" : "off", reps,
             t.best / steps * 1e6, t.mean / steps * 1e6);
      bench_kernel_close(&bk);
    }
}

/* ---- (b) whole-process time ---------------------------------------------- */

/* Spawns argv with stdout/stderr to /dev/null; returns its wall time, or a
 * negative value if it could not run or exited non-zero. */
static double time_process(char *const argv[]) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  double t0 = now_seconds();
  pid_t pid;
  int rc = posix_spawn(&pid, argv[0], &actions, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return -1;
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  double dt = now_seconds() - t0;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? dt : -1;
}

static void report_process(const char *label, char *const argv[], int reps) {
  if (time_process(argv) < 0) { /* warm-up, and a check that it works */
    printf("%-44s failed to run (exit status non-zero)\n", label);
    return;
  }
  double best = INFINITY, mean = 0;
  for (int r = 0; r < reps; r++) {
    double dt = time_process(argv);
    if (dt < 0) {
      printf("%-44s failed on run %d\n", label, r);
      return;
    }
    if (dt < best) best = dt;
    mean += dt / reps;
  }
  printf("%-44s %6d %10.3f %10.3f\n", label, reps, mean * 1e3, best * 1e3);
}

/* Load (parse + verify), prepare, run and free the 100-step kernel inside
 * this process: the part of `tessera run` that is tessera's own work. */
static void report_in_process(int reps) {
  char path[4096];
  kernel_path(path, sizeof path, "steps_100.tsr");
  double best = INFINITY, mean = 0;
  for (int r = 0; r <= reps; r++) { /* r == 0: warm-up */
    double t0 = now_seconds();
    bench_kernel_t bk;
    bench_kernel_open("steps_100.tsr", "steps_100", true, &bk);
    die_on_error(tsr_interp_program_run(bk.program, bk.ptrs, bk.num_operands,
                                        NULL),
                 path);
    bench_kernel_close(&bk);
    double dt = now_seconds() - t0;
    if (r == 0) continue;
    if (dt < best) best = dt;
    mean += dt / reps;
  }
  printf("%-44s %6d %10.3f %10.3f\n",
         "in-process load+prepare+run steps_100.tsr", reps, mean * 1e3,
         best * 1e3);
}

static void bench_process(const char *tessera, bool quick) {
  printf("\n(b) whole process (posix_spawn + wait, output to /dev/null)\n");
  printf("%-44s %6s %10s %10s\n", "command", "runs", "mean ms", "min ms");
  int reps = quick ? 5 : 200;
  report_in_process(reps);
  char *true_argv[] = {"/bin/true", NULL};
  report_process("/bin/true (process floor)", true_argv, reps);
  if (!tessera) {
    printf("tessera run: skipped (no --tessera PATH)\n");
    return;
  }
  char path[4096];
  kernel_path(path, sizeof path, "steps_100.tsr");
  char *run_argv[] = {(char *)tessera, "run", path, "--random-inputs", "1",
                      NULL};
  report_process("tessera run steps_100.tsr --random-inputs 1", run_argv,
                 reps);
}

/* ---- (c) bandwidth --------------------------------------------------------- */

static double gbps(uint64_t bytes, double seconds) {
  return (double)bytes / seconds * 1e-9;
}

static double bench_memcpy(size_t size, int reps) {
  char *src = malloc(size), *dst = malloc(size);
  if (!src || !dst) die_on_error(TSR_STATUS(TSR_OUT_OF_MEMORY, "memcpy buffers"), "memcpy");
  memset(src, 1, size);
  memset(dst, 2, size);
  memcpy(dst, src, size); /* warm-up */
  double best = INFINITY;
  for (int r = 0; r < reps; r++) {
    src[r] = (char)r; /* keep every copy observable */
    double t0 = now_seconds();
    memcpy(dst, src, size);
    double dt = now_seconds() - t0;
    if (dt < best) best = dt;
  }
  volatile char sink = dst[reps - 1];
  (void)sink;
  free(src);
  free(dst);
  return best;
}

static void bench_bandwidth(bool quick) {
  const size_t size = (size_t)64 << 20;
  int reps = quick ? 2 : 10;
  printf("\n(c) bandwidth on [4096, 4096] f32 (64 MiB) arrays, blocks [512, "
         "4096], grid (8); GB/s = (bytes read + bytes written) / best time, "
         "1 GB = 1e9 B\n");
  double t_memcpy = bench_memcpy(size, reps);
  double memcpy_gbps = gbps(2 * (uint64_t)size, t_memcpy);
  printf("%-28s %7s %6s %10s %10s %12s\n", "kernel", "checks", "runs",
         "best ms", "GB/s", "% of memcpy");
  printf("%-28s %7s %6d %10.2f %10.2f %12s\n", "memcpy 64 MiB", "-", reps,
         t_memcpy * 1e3, memcpy_gbps, "100.0");
  static const char *const names[] = {"add_64mib", "rowsum_64mib"};
  for (size_t k = 0; k < 2; k++)
    for (int check = 1; check >= 0; check--) {
      bench_kernel_t bk;
      bench_kernel_open("stream.tsr", names[k], check, &bk);
      timing_t t = time_runs(&bk, reps, NULL);
      double rate = gbps(bk.bytes_in + bk.bytes_out, t.best);
      printf("%-28s %7s %6d %10.2f %10.2f %12.1f\n", names[k],
             check ? "on" : "off", reps, t.best * 1e3, rate,
             100.0 * rate / memcpy_gbps);
      bench_kernel_close(&bk);
    }
}

/* ---- --kernel FILE: one kernel's phases, per op -------------------------- */

/* Load (parse + verify), prepare, the first run (fresh run memory, as in a
 * `tessera run` process) and the best and mean of `reps` later runs, each
 * also per op executed (docs/benchmarks.md, "Small blocks in the interpreter"). */
static void bench_one_kernel(const char *path, int reps) {
  double t0 = now_seconds();
  bench_kernel_t bk;
  memset(&bk, 0, sizeof bk);
  die_on_error(tsr_runtime_load_file(path, &bk.module), path);
  double t_load = now_seconds() - t0;
  tsr_ir_module_destroy(bk.module);
  t0 = now_seconds();
  bench_kernel_open_path(path, NULL, true, &bk);
  double t_open = now_seconds() - t0; /* load + arrays + prepare */
  tsr_interp_stats_t stats;
  t0 = now_seconds();
  die_on_error(tsr_interp_program_run(bk.program, bk.ptrs, bk.num_operands, &stats), "run");
  double t_first = now_seconds() - t0;
  timing_t t = time_runs(&bk, reps, &stats);
  double ops = (double)stats.ops_executed;
  printf("kernel %s: %llu ops executed, %llu grid steps\n", path,
         (unsigned long long)stats.ops_executed, (unsigned long long)stats.grid_steps);
  printf("  load (parse + verify)        %10.3f ms\n", t_load * 1e3);
  printf("  load + inputs + prepare      %10.3f ms\n", t_open * 1e3);
  printf("  first run                    %10.3f ms  %8.3f us/op\n", t_first * 1e3,
         t_first / ops * 1e6);
  printf("  later runs, best of %-6d   %10.3f ms  %8.3f us/op\n", reps, t.best * 1e3,
         t.best / ops * 1e6);
  printf("  later runs, mean             %10.3f ms  %8.3f us/op\n", t.mean * 1e3,
         t.mean / ops * 1e6);
  bench_kernel_close(&bk);
}

int main(int argc, char **argv) {
  const char *tessera = NULL, *kernel = NULL;
  bool quick = false;
  int reps = 20;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--tessera") == 0 && i + 1 < argc) {
      tessera = argv[++i];
    } else if (strcmp(argv[i], "--kernel") == 0 && i + 1 < argc) {
      kernel = argv[++i];
    } else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
      reps = atoi(argv[++i]);
      if (reps < 1) reps = 1;
    } else if (strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else {
      fprintf(stderr, "usage: %s [--tessera PATH] [--quick]\n"
                      "       %s --kernel FILE.tsr [--reps N]\n", argv[0], argv[0]);
      return 2;
    }
  }
  if (kernel) {
    bench_one_kernel(kernel, reps);
    return 0;
  }
  printf("tessera %s interpreter benchmarks (times: best of N runs after one "
         "warm-up)\n", TSR_VERSION_STRING);
  bench_step_overhead(quick);
  bench_process(tessera, quick);
  bench_bandwidth(quick);
  return 0;
}
