/* tessera run: runs one kernel in the interpreter or compiled for the CPU
 * on .npy or random inputs, and prints or writes its outputs. The options
 * are parsed in tools/run_options.c (shared with hash). */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#include "tools/cli.h"

const char cmd_run_help[] =
    "Usage: tessera run FILE.tsr [OPTIONS]\n"
    "\n"
    "Runs one kernel of FILE.tsr (or '-' for stdin) in the interpreter, which\n"
    "simulates HBM, VMEM and SMEM with the Pallas TPU grid rules and reports\n"
    "out-of-bounds accesses, uninitialized reads, revisited output blocks and\n"
    "VMEM over budget.\n"
    "\n"
    "Inputs (each 'prefetch' and 'in' operand, first rule that applies):\n"
    "  --in NAME=FILE.npy       read operand NAME from FILE.npy (repeatable)\n"
    "  --in-dir DIR             read operand NAME from DIR/NAME.npy if it exists\n"
    "  --random-inputs SEED     deterministic pseudo-random data for the rest:\n"
    "                           floats in [-1, 1), integers in [-100, 100]\n"
    "                           (unsigned [0, 200]), prefetch values in [0, 8)\n"
    "  Any input left without data is a usage error naming it. The .npy dtype\n"
    "  and shape must equal the operand's; bf16 operands read <V2 or <u2 files.\n"
    "\n"
    "Outputs (written only after a successful run):\n"
    "  --out NAME=FILE.npy      write output NAME to FILE.npy (repeatable)\n"
    "  --out-dir DIR            write every output to DIR/NAME.npy (DIR is\n"
    "                           created if missing)\n"
    "  Outputs are all or nothing: when one cannot be written, no file is\n"
    "  created or replaced. A symlink's target is replaced (the link stays);\n"
    "  a device or FIFO (/dev/stdout) is written directly.\n"
    "  Without --out or --out-dir each output is printed: dtype, shape, the\n"
    "  first elements and min/max/mean over finite values with a NaN count.\n"
    "  An output aliased to an input ('alias %x') starts as that input.\n"
    "\n"
    "Backend:\n"
    "  --backend interp|cpu     interp (default): the checking interpreter;\n"
    "                           cpu: the kernel compiled to native code through\n"
    "                           MLIR and LLVM (docs/lowering.md), kept in the\n"
    "                           disk cache, so a later run loads it without\n"
    "                           compiling. Same inputs, outputs and results;\n"
    "                           one thread per simulated core (--devices,\n"
    "                           --cores); checks bounds and revisited output\n"
    "                           blocks only: of the options below it uses\n"
    "                           --devices, --cores, --uninit, --out-blocks,\n"
    "                           --shuffle-parallel, --parallel-order,\n"
    "                           --oob-reads, --buffer-bounds (with --chip),\n"
    "                           --max-errors, --timeout, --max-steps\n"
    "                           and --threads, ignores the others and\n"
    "                           refuses --trace\n"
    "\n"
    "TPU (docs/tpu.md, \"Layout rules\"; docs/jax.md, \"Fails where the TPU\n"
    "fails\"):\n"
    "  --target tpu             before running, what the chip (--chip, default\n"
    "                           v5e) refuses is an error (exit status 1),\n"
    "                           located: Pallas's TPU block rules, more VMEM\n"
    "                           than the chip has, what has no Mosaic form\n"
    "                           (as `check --target tpu`)\n"
    "  --tpu-compile-check      with --target tpu: libtpu also compiles the\n"
    "                           kernel for the chip, without a TPU, and its\n"
    "                           refusal is an error; runs $TESSERA_PYTHON\n"
    "                           (default python3), which needs the tessera\n"
    "                           package, JAX and libtpu (pip install libtpu)\n"
    "\n"
    "Interpreter:\n"
    "  --kernel NAME            the kernel to run (needed if FILE has several)\n"
    "  --uninit nan|zero        fill of new memory: NaN / integer max / true\n"
    "                           (default), or zero\n"
    "  --out-blocks uninit|copied-in\n"
    "                           an output block starts uninitialized, as on a\n"
    "                           TPU (default), or copied in from the output\n"
    "                           array, as JAX's generic interpret=True does:\n"
    "                           an aliased input's values or earlier steps'\n"
    "                           writes; a fresh output and the padding of\n"
    "                           every block then hold JAX's uninitialized\n"
    "                           value (NaN, integer minimum, false)\n"
    "  --check, --no-check      track which bytes were written and report\n"
    "                           uninitialized reads and never-written outputs\n"
    "                           (default on; bounds and revisit checks are\n"
    "                           always on)\n"
    "  --shuffle-parallel SEED  visit parallel grid dimensions in a seeded\n"
    "                           random order, to catch order dependence\n"
    "  --parallel-order P,Q,..  visit them in this order: for each leading\n"
    "                           parallel grid dim in turn, a permutation of\n"
    "                           its points (replaces --shuffle-parallel)\n"
    "  --chip CHIP              VMEM budget of CHIP: v2 v3 v4 v5e v5p v6e\n"
    "                           v7x (v7, tpu7x) tpu8i (default v5e)\n"
    "  --max-errors N           diagnostics kept per run (default 20)\n"
    "  --strict                 warnings (what Pallas allows but looks wrong,\n"
    "                           docs/semantics.md) are errors: exit status 1\n"
    "  --timeout SECONDS        stop the run after SECONDS of wall time\n"
    "  --max-steps N            stop the run after N steps (grid steps and\n"
    "                           for/while iterations, over all cores)\n"
    "  --threads N              host threads beneath the simulated cores\n"
    "                           (default: the available cores, or\n"
    "                           $TESSERA_THREADS); results and diagnostics\n"
    "                           are the same with any N (docs/semantics.md,\n"
    "                           \"Host threads\")\n"
    "  A stopped run (also by Ctrl-C) is a kernel error naming the op, the\n"
    "  location and the grid point where it stopped.\n"
    "\n"
    "Cores, devices and DMAs (docs/dma.md):\n"
    "  --devices N              simulated devices (default 1); with N > 1 every\n"
    "                           operand has a leading dimension N: device d\n"
    "                           reads and writes slice d\n"
    "  --cores N                TensorCores per device (default 1); leading\n"
    "                           parallel grid dims are split across them;\n"
    "                           devices x cores is at most 256\n"
    "  --dma-mode eager|lazy    copy at dma_start, or as late as possible, at\n"
    "                           the wait that needs it (default lazy: exposes\n"
    "                           missing waits)\n"
    "  --schedule-seed N        run the cores in a seeded order (default 0:\n"
    "                           fixed order)\n"
    "  --detect-races           report data races: accesses of cores and DMAs\n"
    "                           not ordered by semaphores, DMA waits or barriers\n"
    "  --oob-reads error|uninit a read outside its ref is an error (default),\n"
    "                           or gives the uninitialized value (uninit); a\n"
    "                           write outside is always an error\n"
    "  --buffer-bounds logical|padded\n"
    "                           refs outside SMEM have their logical shape\n"
    "                           (default), or the TPU's tiled one (padded):\n"
    "                           the padding reads as uninitialized, writes to\n"
    "                           it are dropped\n"
    "  --trace FILE.json        write a Chrome/Perfetto trace of the simulated\n"
    "                           run (open in ui.perfetto.dev or chrome://tracing);\n"
    "                           an existing FILE is refused unless --force; a\n"
    "                           directory gets trace-YYYYMMDD-HHMMSS.json (UTC)\n"
    "  --force                  let --trace overwrite an existing file\n"
    "  --progress-after S       on a terminal, show a progress line on stderr\n"
    "                           (grid step/total, steps/s, ETA) once the run has\n"
    "                           taken S seconds (default 1; -q: never)\n"
    "  --cache-stats            print the cache counters on stderr (memory hits\n"
    "                           and misses; with --backend cpu disk ones too)\n"
    "  -q, --quiet              no summary line on stderr\n"
    "  -h, --help               show this help\n"
    "\n"
    "After a run a summary goes to stderr: kernel, grid steps, ops executed,\n"
    "blocks copied in/out, bytes copied, VMEM in use and wall time (with\n"
    "--backend cpu: where the code came from and the compile or load time).\n"
    "Kernels are verified once: the disk cache ($TESSERA_CACHE_DIR, else\n"
    "$XDG_CACHE_HOME/tessera, else ~/.cache/tessera; TESSERA_CACHE=off to\n"
    "disable) remembers kernels that verified (docs/cache.md).\n"
    "Exit status: 0 success (warnings, if any, are printed), 1 kernel errors\n"
    "(all diagnostics are printed; with --strict also warnings) or failed\n"
    "output writes, 2 usage errors, 130 interrupted (Ctrl-C).\n"
    "\n"
    "Examples:\n"
    "  tessera run kernels/examples/matmul.tsr --random-inputs 1\n"
    "  tessera run k.tsr --in a=a.npy --in b=b.npy --out c=c.npy\n"
    "  tessera run k.tsr --in-dir inputs/ --random-inputs 7 --out-dir results/\n"
    "  tessera run k.tsr --kernel add --uninit zero --shuffle-parallel 3\n"
    "  tessera run k.tsr --random-inputs 1 --backend cpu --cache-stats\n";

/* Set by SIGINT during a run; the run's cancel flag. */
static volatile int interrupted;

static void on_interrupt(int sig) {
  (void)sig;
  interrupted = 1;
}

/* The progress line: on a terminal's stderr, once a run has taken
 * --progress-after seconds, one line redrawn in place ('\r') at each
 * progress call: steps done / total, percent, steps per second and the
 * time left at that rate; erased when the run ends. The library makes the
 * calls one at a time, so the state needs no lock. */
typedef struct progress_line {
  double start, after;
  bool shown;
} progress_line_t;

static double seconds_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* "12.3k"-style counts for the line. */
static void short_count(char *buf, size_t size, double v) {
  if (v >= 1e9) snprintf(buf, size, "%.1fG", v / 1e9);
  else if (v >= 1e6) snprintf(buf, size, "%.1fM", v / 1e6);
  else if (v >= 1e4) snprintf(buf, size, "%.1fk", v / 1e3);
  else snprintf(buf, size, "%.0f", v);
}

static void draw_progress(void *user, uint64_t done, uint64_t total) {
  progress_line_t *p = user;
  double t = seconds_now() - p->start;
  if (t < p->after || done >= total) return;
  char rate[32], eta[32];
  double per_second = t > 0 ? (double)done / t : 0;
  short_count(rate, sizeof rate, per_second);
  if (per_second > 0) {
    double left = (double)(total - done) / per_second;
    if (left >= 3600) snprintf(eta, sizeof eta, "%dh%02dm", (int)(left / 3600), (int)(left / 60) % 60);
    else if (left >= 60) snprintf(eta, sizeof eta, "%dm%02ds", (int)(left / 60), (int)left % 60);
    else snprintf(eta, sizeof eta, "%.0fs", left);
  } else {
    snprintf(eta, sizeof eta, "?");
  }
  fprintf(stderr, "\r\033[Ktessera: grid step %" PRIu64 "/%" PRIu64 " (%.0f%%), %s steps/s, ETA %s",
          done, total, total ? 100.0 * (double)done / (double)total : 100.0, rate, eta);
  fflush(stderr);
  p->shown = true;
}

/* Names of the operands of `roles` for messages: "%a, %b". */
static void list_operands(char *buf, size_t size,
                          const tsr_ir_operand_info_t *infos, size_t n,
                          bool inputs) {
  size_t used = 0;
  buf[0] = 0;
  for (size_t i = 0; i < n; i++) {
    bool is_input = infos[i].role == TSR_ROLE_IN || infos[i].role == TSR_ROLE_PREFETCH;
    bool is_output = infos[i].role == TSR_ROLE_OUT;
    if (!(inputs ? is_input : is_output)) continue;
    int w = snprintf(buf + used, size - used, "%s%%%s", used ? ", " : "",
                     infos[i].name);
    if (w < 0 || (size_t)w >= size - used) break;
    used += (size_t)w;
  }
  if (!used) snprintf(buf, size, "(none)");
}

static int64_t find_operand(const tsr_ir_operand_info_t *infos, size_t n,
                            const char *name) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(infos[i].name, name) == 0) return (int64_t)i;
  return -1;
}

/* Checks that each --in/--out names an operand of the right kind. */
static int check_bindings(const char *kernel_name, const cli_binding_t *b, size_t nb,
                          const tsr_ir_operand_info_t *infos, size_t n,
                          bool inputs) {
  char names[1024];
  for (size_t i = 0; i < nb; i++) {
    int64_t k = find_operand(infos, n, b[i].name);
    tsr_ir_role_t role = k >= 0 ? infos[k].role : TSR_ROLE_SCRATCH;
    bool ok = inputs ? (role == TSR_ROLE_IN || role == TSR_ROLE_PREFETCH)
                     : role == TSR_ROLE_OUT;
    if (ok) continue;
    list_operands(names, sizeof names, infos, n, inputs);
    if (k < 0)
      return cli_usage_error("run", "--%s %%%s: kernel @%s has no operand %%%s; its %s: %s",
                             inputs ? "in" : "out", b[i].name, kernel_name,
                             b[i].name, inputs ? "inputs are" : "outputs are", names);
    return cli_usage_error("run", "--%s %%%s: %%%s is not an %s of kernel @%s; its %s: %s",
                           inputs ? "in" : "out", b[i].name, b[i].name,
                           inputs ? "input" : "output", kernel_name,
                           inputs ? "inputs are" : "outputs are", names);
  }
  return EXIT_OK;
}

static const char *find_binding(const cli_binding_t *b, size_t nb, const char *name) {
  for (size_t i = 0; i < nb; i++)
    if (strcmp(b[i].name, name) == 0) return b[i].path;
  return NULL;
}

/* Reads operand `info` from `path`, checking dtype and shape. */
static int load_input(const char *path, const tsr_ir_operand_info_t *info,
                      tsr_array_t *out) {
  tsr_status_t status = tsr_npy_read(path, (int)info->dtype, out);
  if (status) {
    int code = cli_exit_code(status);
    fprintf(stderr, "tessera run: input %%%s: %s\n", info->name,
            tsr_status_message(status));
    tsr_status_free(status);
    return code;
  }
  bool same = out->rank == info->rank;
  for (uint32_t i = 0; same && i < info->rank; i++)
    same = out->dims[i] == info->dims[i];
  if (!same) {
    char found[160], expected[160], type[160];
    cli_format_shape(found, sizeof found, out->rank, out->dims);
    cli_format_shape(expected, sizeof expected, info->rank, info->dims);
    cli_format_type(type, sizeof type, info->dtype, info->rank, info->dims);
    fprintf(stderr,
            "tessera run: input %%%s: %s: shape %s does not match the "
            "operand's %s: expected %s\n",
            info->name, path, found, type, expected);
    tsr_array_deinitialize(out);
    return EXIT_USAGE;
  }
  return EXIT_OK;
}

/* The parent directory of `path` must exist for the output to be written. */
static int check_output_path(const char *name, const char *path) {
  const char *slash = strrchr(path, '/');
  if (!slash) return EXIT_OK;
  char *dir = cli_strndup(path, slash == path ? 1 : (size_t)(slash - path));
  bool ok = cli_is_dir(dir);
  if (!ok)
    cli_usage_error("run", "--out %%%s=%s: directory %s does not exist", name, path,
                    dir);
  free(dir);
  return ok ? EXIT_OK : EXIT_USAGE;
}


/* "disk on, 1 hit, 0 misses, 0 puts, 0 bad entries" */
static void print_disk_use(const tsr_runtime_disk_use_t *d) {
  fprintf(stderr,
          "disk %s, %" PRIu64 " hit%s, %" PRIu64 " miss%s, %" PRIu64 " put%s, %" PRIu64
          " bad entr%s",
          d->enabled ? "on" : "off", d->hits, d->hits == 1 ? "" : "s", d->misses,
          d->misses == 1 ? "" : "es", d->puts, d->puts == 1 ? "" : "s", d->bad_entries,
          d->bad_entries == 1 ? "y" : "ies");
}

/* --cache-stats: the context's cache counters, on stderr. */
static void print_cache_stats(const tsr_context_t *ctx) {
  tsr_context_stats_t stats;
  tsr_context_stats(ctx, &stats);
  const tsr_runtime_cache_stats_t c = stats.programs;
  fprintf(stderr,
          "tessera: cache stats: memory %" PRIu64 " hit%s, %" PRIu64 " miss%s, %" PRIu64
          " build%s; ",
          c.memory_hits, c.memory_hits == 1 ? "" : "s", c.memory_misses,
          c.memory_misses == 1 ? "" : "es", c.memory_builds, c.memory_builds == 1 ? "" : "s");
  fputs("disk not used by the interpreter\n", stderr);
}

/* --cache-stats with --backend cpu: the disk counters are the context's. */
static void print_compiled_cache_stats(const tsr_context_t *ctx) {
  tsr_context_stats_t stats;
  tsr_context_stats(ctx, &stats);
  const tsr_runtime_compiled_stats_t c = stats.compiled;
  const tsr_runtime_disk_use_t disk = c.disk;
  fprintf(stderr, "tessera: cache stats (cpu): memory %" PRIu64 " hit%s, %" PRIu64 " miss%s; ",
          c.memory_hits, c.memory_hits == 1 ? "" : "s", c.memory_misses,
          c.memory_misses == 1 ? "" : "es");
  print_disk_use(&disk);
  fprintf(stderr, "; %" PRIu64 " compile%s, %" PRIu64 " load failure%s; lowering library %s\n",
          c.compiles, c.compiles == 1 ? "" : "s", c.load_failures,
          c.load_failures == 1 ? "" : "s", c.lower_library_loaded ? "loaded" : "not loaded");
}

/* The context the environment configures; the interpreter uses no disk
 * cache, so an interpreter run does not open one. */
static tsr_status_t make_context(tsr_backend_t backend, tsr_context_t **out) {
  tsr_context_options_t co;
  tsr_context_options_from_environment(&co);
  co.disk_cache = co.disk_cache && backend == TSR_BACKEND_CPU;
  return tsr_context_create(&co, out);
}

/* libtpu's compile of the kernel for the chip, deviceless: the tessera
 * package's Python (python -m tessera.jax._tpu_target), since libtpu is
 * reached through JAX. EXIT_OK when it compiles; EXIT_KERNEL when libtpu
 * refuses it (the helper printed the located refusal); EXIT_USAGE when it
 * could not be checked (no Python, package or libtpu: the helper or this
 * says which). */
static int tpu_compile_check(const char *file, const char *kernel, const char *chip) {
  const char *python = getenv("TESSERA_PYTHON");
  if (!python || !*python) python = "python3";
  char *argv[] = {(char *)python, "-m", "tessera.jax._tpu_target", (char *)file,
                  (char *)kernel, (char *)(chip ? chip : "v5e"), NULL};
  fflush(stdout);
  fflush(stderr);
  pid_t pid;
  int err = posix_spawnp(&pid, python, NULL, NULL, argv, environ);
  if (err) {
    fprintf(stderr, "tessera run: --tpu-compile-check: cannot run %s (%s): set "
            "TESSERA_PYTHON to a Python with the tessera package, JAX and libtpu\n",
            python, strerror(err));
    return EXIT_USAGE;
  }
  int wstatus = 0;
  while (waitpid(pid, &wstatus, 0) < 0)
    if (errno != EINTR) return EXIT_USAGE;
  int code = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1;
  if (code == 0) return EXIT_OK;
  if (code == 1) return EXIT_KERNEL;
  fprintf(stderr, "tessera run: --tpu-compile-check: the check did not run (%s exited with "
          "status %d)\n", python, code);
  return EXIT_USAGE;
}

static int execute_run(cli_run_request_t *req) {
  int rc = EXIT_OK;
  tsr_ir_module_t *module = NULL;
  tsr_context_t *ctx = NULL;
  tsr_executable_t *exe = NULL;
  tsr_run_result_t *result = NULL;
  const char *origin = NULL; /* cpu: where the code came from */
  tsr_ir_operand_info_t *infos = NULL;
  tsr_array_t *arrays = NULL;
  tsr_array_t **ptrs = NULL;
  size_t n = 0;

  /* Parsed only: tsr_executable_create verifies the kernel unless the
   * context's cache has it already. */
  tsr_status_t status = cli_load_module(req->file, false, &module);
  if (status) {
    rc = cli_exit_code(status);
    cli_report("run", status);
    return rc;
  }
  tsr_ir_kernel_t *kernel = NULL;
  status = tsr_runtime_select_kernel(module, req->kernel, &kernel);
  if (status) {
    rc = cli_usage_error("run", "%s: %s%s", req->file, tsr_status_message(status),
                         req->kernel ? "" : " (use --kernel NAME)");
    tsr_status_free(status);
    goto done;
  }
  const char *kname = tsr_ir_kernel_name(kernel);
  const tsr_executable_options_t *eo = &req->options;
  if (req->tpu_target) {
    status = tsr_tpu_check(kernel, eo->run.chip);
    if (status) {
      rc = cli_exit_code(status);
      cli_report("run", status);
      goto done;
    }
    if (req->tpu_compile_check && (rc = tpu_compile_check(req->file, kname, eo->run.chip)))
      goto done;
  }
  status = make_context(eo->backend, &ctx);
  double prepare_start = seconds_now();
  tsr_context_stats_t before, after;
  tsr_context_stats(ctx, &before);
  if (!status) status = tsr_executable_create(ctx, kernel, eo, &exe);
  tsr_context_stats(ctx, &after);
  origin = after.compiled.compiles > before.compiled.compiles     ? "compiled"
           : after.compiled.disk.hits > before.compiled.disk.hits ? "loaded from the disk cache"
                                                                  : "found in memory";
  double prepare_seconds = seconds_now() - prepare_start;
  if (status) {
    rc = cli_exit_code(status);
    cli_report("run", status);
    goto done;
  }

  /* The operands the interpreter takes: everything but scratch, in order. */
  size_t total = tsr_ir_kernel_operand_count(kernel);
  infos = cli_calloc(total, sizeof *infos);
  for (size_t i = 0; i < total; i++) {
    tsr_ir_operand_info_t info;
    tsr_ir_kernel_operand_info(kernel, i, &info);
    if (info.role == TSR_ROLE_SCRATCH) continue;
    if (req->options.run.devices > 1) {
      /* One slice per device: a leading dimension of size devices. */
      if (info.rank + 1 > TSR_MAX_RANK) {
        rc = cli_usage_error("run", "operand %%%s has rank %u: with --devices it would "
                             "need rank %u, more than %d", info.name, info.rank,
                             info.rank + 1, TSR_MAX_RANK);
        goto done;
      }
      memmove(info.dims + 1, info.dims, info.rank * sizeof info.dims[0]);
      info.dims[0] = req->options.run.devices;
      info.rank++;
    }
    infos[n++] = info;
  }
  if ((rc = check_bindings(kname, req->ins, req->num_ins, infos, n, true)) ||
      (rc = check_bindings(kname, req->outs, req->num_outs, infos, n, false)))
    goto done;
  for (size_t i = 0; i < req->num_outs; i++)
    if ((rc = check_output_path(req->outs[i].name, req->outs[i].path))) goto done;
  if (req->out_dir && cli_file_exists(req->out_dir) && !cli_is_dir(req->out_dir)) {
    rc = cli_usage_error("run", "--out-dir %s: not a directory", req->out_dir);
    goto done;
  }
  if (req->in_dir && !cli_is_dir(req->in_dir)) {
    rc = cli_usage_error("run", "--in-dir %s: no such directory", req->in_dir);
    goto done;
  }

  /* Inputs: --in, else DIR/NAME.npy, else random, else an error. An array
   * holds data (non-NULL, even with no elements) once it is set up. */
  arrays = cli_calloc(n, sizeof *arrays);
  ptrs = cli_calloc(n, sizeof *ptrs);
  char missing[1024] = "";
  size_t num_missing = 0;
  for (size_t i = 0; i < n; i++) {
    const tsr_ir_operand_info_t *info = &infos[i];
    ptrs[i] = &arrays[i];
    if (info->role == TSR_ROLE_OUT) continue;
    const char *path = find_binding(req->ins, req->num_ins, info->name);
    char *dir_path = NULL;
    if (!path && req->in_dir) {
      dir_path = cli_join_path(req->in_dir, info->name, ".npy");
      if (cli_file_exists(dir_path)) path = dir_path;
    }
    if (path) {
      rc = load_input(path, info, &arrays[i]);
      free(dir_path);
      if (rc) goto done;
      continue;
    }
    free(dir_path);
    if (req->random_inputs) {
      status = tsr_status_annotate(
          tsr_runtime_random_array(info, req->random_seed, &arrays[i]), "input %%%s",
          info->name);
      if (status) {
        rc = EXIT_KERNEL;
        cli_report("run", status);
        goto done;
      }
      continue;
    }
    size_t used = strlen(missing);
    snprintf(missing + used, sizeof missing - used, "%s%%%s",
             num_missing ? ", " : "", info->name);
    num_missing++;
  }
  if (num_missing) {
    rc = cli_usage_error("run",
                         "no data for input%s %s of kernel @%s: give --in "
                         "NAME=FILE.npy, --in-dir DIR or --random-inputs SEED",
                         num_missing > 1 ? "s" : "", missing, kname);
    goto done;
  }
  /* Outputs start zeroed, or as a copy of their aliased input. */
  for (size_t i = 0; i < n; i++) {
    const tsr_ir_operand_info_t *info = &infos[i];
    if (info->role != TSR_ROLE_OUT) continue;
    status = tsr_status_annotate(
        tsr_array_initialize(info->dtype, info->rank, info->dims, &arrays[i]), "output %%%s",
        info->name);
    if (status) {
      rc = EXIT_KERNEL;
      cli_report("run", status);
      goto done;
    }
    if (info->alias >= 0 && (size_t)info->alias < n && arrays[info->alias].data)
      memcpy(arrays[i].data, arrays[info->alias].data,
             tsr_array_byte_size(&arrays[i]));
  }

  double start = seconds_now();
  tsr_interp_stats_t stats;
  memset(&stats, 0, sizeof stats);
  /* Ctrl-C ends the run through its cancel flag: the kernel stops with a
   * report of where it was, and the process exits with 130. */
  struct sigaction on_int = {.sa_handler = on_interrupt}, old_int;
  sigemptyset(&on_int.sa_mask);
  sigaction(SIGINT, &on_int, &old_int);
  tsr_run_options_t ro;
  tsr_run_options_initialize(&ro);
  ro.cancel = &interrupted;
  progress_line_t line = {seconds_now(), req->progress_after, false};
  if (!req->quiet && isatty(STDERR_FILENO)) {
    ro.on_progress = draw_progress;
    ro.on_progress_user = &line;
    ro.progress_interval = 0.1;
  }
  status = tsr_executable_run(exe, ptrs, n, &ro, &result);
  if (line.shown) {
    fputs("\r\033[K", stderr);
    fflush(stderr);
  }
  if (result) tsr_run_result_stats(result, &stats);
  sigaction(SIGINT, &old_int, NULL);
  double run_seconds = seconds_now() - start;
  double elapsed = run_seconds + prepare_seconds;
  bool cpu = eo->backend == TSR_BACKEND_CPU;
  if (req->cache_stats) {
    if (cpu) print_compiled_cache_stats(ctx);
    else print_cache_stats(ctx);
  }
  if (status) {
    rc = interrupted ? EXIT_INTERRUPTED : EXIT_KERNEL;
    cli_report("run", status);
    goto done;
  }

  /* Outputs: printed, or written all or nothing (tsr_npy_write_all); an
   * --out-dir this run created is removed again when they fail. */
  if (req->num_outs == 0 && !req->out_dir) {
    for (size_t i = 0; i < n; i++)
      if (infos[i].role == TSR_ROLE_OUT) cli_print_array(stdout, infos[i].name, &arrays[i]);
  } else {
    size_t created = 0;
    if (req->out_dir && !cli_make_dirs(req->out_dir, &created)) {
      fprintf(stderr, "tessera run: cannot create the output directory %s: %s\n",
              req->out_dir, strerror(errno));
      cli_remove_made_dirs(req->out_dir, created);
      rc = EXIT_KERNEL;
      goto done;
    }
    const char **paths = cli_calloc(n, sizeof *paths);
    char **owned = cli_calloc(n, sizeof *owned);
    const tsr_array_t **outs = cli_calloc(n, sizeof *outs);
    size_t count = 0;
    for (size_t i = 0; i < n; i++) {
      if (infos[i].role != TSR_ROLE_OUT) continue;
      const char *path = find_binding(req->outs, req->num_outs, infos[i].name);
      if (!path && req->out_dir)
        path = owned[i] = cli_join_path(req->out_dir, infos[i].name, ".npy");
      if (!path) continue;
      paths[count] = path;
      outs[count++] = &arrays[i];
    }
    status = tsr_npy_write_all(paths, outs, count);
    for (size_t i = 0; i < n; i++) free(owned[i]);
    free(owned);
    free(paths);
    free(outs);
    if (status) {
      fprintf(stderr, "tessera run: writing the outputs: %s\n", tsr_status_message(status));
      tsr_status_free(status);
      cli_remove_made_dirs(req->out_dir, created);
      rc = EXIT_KERNEL;
      goto done;
    }
  }
  fflush(stdout);
  if (!req->quiet && cpu) {
    fprintf(stderr, "tessera: @%s: cpu code %s in %.3f ms, run in %.3f ms\n", kname,
            origin, prepare_seconds * 1e3, run_seconds * 1e3);
  } else if (!req->quiet) {
    char copied[32], vmem[32];
    tsr_format_bytes(copied, sizeof copied, stats.bytes_copied);
    tsr_format_bytes(vmem, sizeof vmem, stats.vmem_bytes);
#define PLURAL(n) ((n) == 1 ? "" : "s")
    fprintf(stderr,
            "tessera: @%s: %" PRIu64 " grid step%s, %" PRIu64 " op%s, %" PRIu64
            " block%s in, %" PRIu64 " block%s out, %s copied, %s VMEM in use, "
            "%.3f ms\n",
            kname, stats.grid_steps, PLURAL(stats.grid_steps),
            stats.ops_executed, PLURAL(stats.ops_executed),
            stats.blocks_copied_in, PLURAL(stats.blocks_copied_in),
            stats.blocks_copied_out, PLURAL(stats.blocks_copied_out), copied,
            vmem, elapsed * 1e3);
#undef PLURAL
  }
  if (!req->quiet && req->trace_owned)
    fprintf(stderr, "tessera: @%s: trace written to %s\n", kname, req->trace_owned);

done:
  if (arrays)
    for (size_t i = 0; i < n; i++) tsr_array_deinitialize(&arrays[i]);
  free(arrays);
  free(ptrs);
  free(infos);
  tsr_run_result_destroy(result);
  tsr_executable_destroy(exe);
  tsr_context_destroy(ctx);
  tsr_ir_module_destroy(module);
  return rc;
}

int cmd_run(int argc, char **argv) {
  cli_run_request_t req;
  int rc = cli_parse_run_args("run", argc, argv, &req);
  if (rc == EXIT_OK) rc = execute_run(&req);
  if (rc < 0) rc = EXIT_OK; /* --help */
  cli_run_request_deinitialize(&req);
  return rc;
}
