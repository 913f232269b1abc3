/* The options of 'tessera run' and 'tessera hash': one table, since hash
 * takes the run options that change a kernel's key, and the parser that
 * fills a run request from them (tools/cli.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "tools/cli.h"

enum {
  RUN_HELP, RUN_KERNEL, RUN_IN, RUN_OUT, RUN_IN_DIR, RUN_OUT_DIR, RUN_RANDOM,
  RUN_UNINIT, RUN_SHUFFLE, RUN_CHIP, RUN_CHECK, RUN_NO_CHECK, RUN_MAX_ERRORS,
  RUN_QUIET, RUN_DEVICES, RUN_CORES, RUN_DMA_MODE, RUN_SCHEDULE_SEED, RUN_TRACE,
  RUN_DETECT_RACES, RUN_CACHE_STATS, RUN_EXPLAIN, RUN_TARGET, RUN_BACKEND,
  RUN_STRICT, RUN_TIMEOUT, RUN_MAX_STEPS, RUN_OOB_READS, RUN_BUFFER_BOUNDS,
  RUN_PARALLEL_ORDER, RUN_OUT_BLOCKS, RUN_TPU_COMPILE_CHECK, RUN_FORCE,
  RUN_PROGRESS_AFTER, RUN_THREADS,
};

static const cli_option_t run_options[] = {
    {"help", 'h', false, RUN_HELP},
    {"kernel", 'k', true, RUN_KERNEL},
    {"in", 0, true, RUN_IN},
    {"out", 0, true, RUN_OUT},
    {"in-dir", 0, true, RUN_IN_DIR},
    {"out-dir", 0, true, RUN_OUT_DIR},
    {"random-inputs", 0, true, RUN_RANDOM},
    {"uninit", 0, true, RUN_UNINIT},
    {"shuffle-parallel", 0, true, RUN_SHUFFLE},
    {"parallel-order", 0, true, RUN_PARALLEL_ORDER},
    {"chip", 0, true, RUN_CHIP},
    {"check", 0, false, RUN_CHECK},
    {"no-check", 0, false, RUN_NO_CHECK},
    {"max-errors", 0, true, RUN_MAX_ERRORS},
    {"quiet", 'q', false, RUN_QUIET},
    {"devices", 0, true, RUN_DEVICES},
    {"cores", 0, true, RUN_CORES},
    {"dma-mode", 0, true, RUN_DMA_MODE},
    {"schedule-seed", 0, true, RUN_SCHEDULE_SEED},
    {"trace", 0, true, RUN_TRACE},
    {"force", 0, false, RUN_FORCE},
    {"progress-after", 0, true, RUN_PROGRESS_AFTER},
    {"detect-races", 0, false, RUN_DETECT_RACES},
    {"oob-reads", 0, true, RUN_OOB_READS},
    {"buffer-bounds", 0, true, RUN_BUFFER_BOUNDS},
    {"out-blocks", 0, true, RUN_OUT_BLOCKS},
    {"cache-stats", 0, false, RUN_CACHE_STATS},
    {"explain", 0, false, RUN_EXPLAIN},
    {"target", 0, true, RUN_TARGET},
    {"backend", 0, true, RUN_BACKEND},
    {"strict", 0, false, RUN_STRICT},
    {"timeout", 0, true, RUN_TIMEOUT},
    {"max-steps", 0, true, RUN_MAX_STEPS},
    {"threads", 0, true, RUN_THREADS},
    {"tpu-compile-check", 0, false, RUN_TPU_COMPILE_CHECK},
    {NULL, 0, false, 0},
};

/* `run` and `hash` share the table above: hash takes the options that change
 * a kernel's key, plus its own; run takes all but hash's own. */
static bool option_of(const char *cmd, int id) {
  bool hash = strcmp(cmd, "hash") == 0;
  switch (id) {
    case RUN_HELP: case RUN_KERNEL: case RUN_UNINIT: case RUN_SHUFFLE: case RUN_CHIP:
    case RUN_PARALLEL_ORDER:
    case RUN_CHECK: case RUN_NO_CHECK: case RUN_MAX_ERRORS: case RUN_DEVICES:
    case RUN_CORES: case RUN_DMA_MODE: case RUN_SCHEDULE_SEED: case RUN_DETECT_RACES:
    case RUN_OOB_READS: case RUN_BUFFER_BOUNDS: case RUN_OUT_BLOCKS:
      return true;
    case RUN_TARGET: /* hash: the backend's key; run: tpu, the chip's checks */
      return true;
    case RUN_EXPLAIN:
      return hash;
    default:
      return !hash;
  }
}

static const char *option_name(int id) {
  for (const cli_option_t *o = run_options; o->name; o++)
    if (o->id == id) return o->name;
  return "?";
}

/* Splits "NAME=FILE" (NAME may start with '%'). */
static bool parse_binding(const char *arg, cli_binding_t *out) {
  const char *eq = strchr(arg, '=');
  if (!eq || eq == arg || !eq[1]) return false;
  char *name = cli_strndup(arg, (size_t)(eq - arg));
  out->owned = name;
  out->name = name[0] == '%' ? name + 1 : name;
  out->path = eq + 1;
  if (*out->name) return true;
  free(name);
  return false;
}

static void free_bindings(cli_binding_t *b, size_t n) {
  for (size_t i = 0; i < n; i++) free(b[i].owned);
  free(b);
}

/* --trace PATH never overwrites silently: an existing regular file (or a
 * link to one) is a usage error unless --force (a pipe, FIFO or device
 * such as /dev/stdout is written into, not replaced); an existing directory gets a new file named by the
 * time (UTC), trace-YYYYMMDD-HHMMSS.json, or -2, -3... after it when that
 * name is taken. */
static int trace_target(const char *cmd, cli_run_request_t *req) {
  const char *path = req->options.run.trace_path;
  struct stat st;
  if (stat(path, &st) != 0) return EXIT_OK; /* a new file (the run reports a bad path) */
  if (!S_ISDIR(st.st_mode)) {
    if (req->force || !S_ISREG(st.st_mode)) return EXIT_OK;
    return cli_usage_error(cmd, "--trace %s: the file exists; give --force to overwrite it, "
                           "or a directory to get a new file in it", path);
  }
  char stamp[32];
  time_t now = time(NULL);
  struct tm tm;
  gmtime_r(&now, &tm);
  strftime(stamp, sizeof stamp, "trace-%Y%m%d-%H%M%S", &tm);
  size_t size = strlen(path) + sizeof stamp + 32;
  char *name = cli_calloc(size, 1);
  const char *sep = path[0] && path[strlen(path) - 1] == '/' ? "" : "/";
  for (unsigned k = 1; k < 1000; k++) {
    if (k == 1) snprintf(name, size, "%s%s%s.json", path, sep, stamp);
    else snprintf(name, size, "%s%s%s-%u.json", path, sep, stamp, k);
    if (stat(name, &st) != 0) {
      free(req->trace_owned);
      req->trace_owned = name;
      req->options.run.trace_path = name;
      return EXIT_OK;
    }
  }
  free(name);
  return cli_usage_error(cmd, "--trace %s: no free file name in the directory", path);
}

/* Options of `run`, and of `hash` (option_of says which of them). */
int cli_parse_run_args(const char *cmd, int argc, char **argv,
                       cli_run_request_t *req) {
  memset(req, 0, sizeof *req);
  tsr_executable_options_initialize(&req->options);
  req->progress_after = 1.0;
  req->ins = cli_calloc((size_t)argc, sizeof *req->ins);
  req->outs = cli_calloc((size_t)argc, sizeof *req->outs);
  cli_arg_iter_t it = {cmd, argc, argv, 1, false};
  const char *value;
  int id;
  while ((id = cli_next_arg(&it, run_options, &value)) != CLI_ARG_END) {
    uint64_t n;
    if (id >= 0 && !option_of(cmd, id))
      return cli_usage_error(cmd, "'--%s' is not an option of '%s'", option_name(id), cmd);
    switch (id) {
    case CLI_ARG_ERROR:
      return EXIT_USAGE;
    case CLI_ARG_POSITIONAL:
      if (req->file)
        return cli_usage_error(cmd, "one kernel file expected, got '%s' and '%s'",
                               req->file, value);
      req->file = value;
      break;
    case RUN_HELP:
      fputs(strcmp(cmd, "hash") == 0 ? cmd_hash_help : cmd_run_help, stdout);
      return -1;
    case RUN_KERNEL:
      req->kernel = value[0] == '@' ? value + 1 : value;
      break;
    case RUN_IN:
    case RUN_OUT: {
      cli_binding_t b;
      if (!parse_binding(value, &b))
        return cli_usage_error(cmd, "--%s expects NAME=FILE.npy, got '%s'",
                               id == RUN_IN ? "in" : "out", value);
      cli_binding_t *list = id == RUN_IN ? req->ins : req->outs;
      size_t *count = id == RUN_IN ? &req->num_ins : &req->num_outs;
      list[(*count)++] = b;
      for (size_t i = 0; i + 1 < *count; i++) {
        if (strcmp(list[i].name, b.name) == 0)
          return cli_usage_error(cmd, "--%s %%%s is given twice",
                                 id == RUN_IN ? "in" : "out", b.name);
        if (id == RUN_OUT && strcmp(list[i].path, b.path) == 0)
          return cli_usage_error(cmd, "--out %%%s and %%%s both write %s",
                                 list[i].name, b.name, b.path);
      }
      break;
    }
    case RUN_IN_DIR:
      req->in_dir = value;
      break;
    case RUN_OUT_DIR:
      req->out_dir = value;
      break;
    case RUN_RANDOM:
      if (!cli_parse_u64(value, &n))
        return cli_usage_error(cmd,
                               "--random-inputs expects a non-negative integer "
                               "seed, got '%s'",
                               value);
      req->random_inputs = true;
      req->random_seed = n;
      break;
    case RUN_UNINIT:
      if (strcmp(value, "nan") == 0) req->options.run.uninit = TSR_UNINIT_NAN;
      else if (strcmp(value, "zero") == 0) req->options.run.uninit = TSR_UNINIT_ZERO;
      else
        return cli_usage_error(cmd, "--uninit expects 'nan' or 'zero', got '%s'",
                               value);
      break;
    case RUN_SHUFFLE:
      if (!cli_parse_u64(value, &n))
        return cli_usage_error(cmd,
                               "--shuffle-parallel expects a non-negative integer "
                               "seed, got '%s'",
                               value);
      req->options.run.shuffle_parallel = true;
      req->options.run.shuffle_seed = n;
      break;
    case RUN_PARALLEL_ORDER: {
      /* P,Q,...: comma-separated non-negative integers (the run checks
       * that they fit the grid) */
      size_t count = 1;
      for (const char *c = value; *c; c++) count += *c == ',';
      int64_t *order = realloc(req->parallel_order, count * sizeof *order);
      if (!order) return cli_usage_error(cmd, "--parallel-order: out of memory");
      req->parallel_order = order;
      const char *at = value;
      for (size_t i = 0; i < count; i++) {
        const char *end = strchr(at, ',');
        size_t len = end ? (size_t)(end - at) : strlen(at);
        char item[32] = "";
        uint64_t v = 0;
        if (len > 0 && len < sizeof item) memcpy(item, at, len);
        if (len == 0 || len >= sizeof item || !cli_parse_u64(item, &v) || v > (uint64_t)INT64_MAX)
          return cli_usage_error(cmd,
                                 "--parallel-order expects comma-separated non-negative "
                                 "integers, got '%s'",
                                 value);
        order[i] = (int64_t)v;
        at = end ? end + 1 : at + len;
      }
      req->options.run.parallel_order = order;
      req->options.run.parallel_order_size = (uint32_t)count;
      break;
    }
    case RUN_CHIP: {
      uint64_t bytes;
      if (!tsr_interp_chip_vmem_bytes(value, &bytes))
        return cli_usage_error(cmd,
                               "unknown chip '%s' (known: v2 v3 v4 v5e v5p v6e v7x "
                               "(v7, tpu7x) tpu8i)",
                               value);
      req->options.run.chip = value;
      break;
    }
    case RUN_CHECK:
      req->options.run.check = true;
      break;
    case RUN_NO_CHECK:
      req->options.run.check = false;
      break;
    case RUN_MAX_ERRORS:
      if (!cli_parse_u64(value, &n) || n == 0 || n > UINT32_MAX)
        return cli_usage_error(cmd,
                               "--max-errors expects a positive integer, got '%s'",
                               value);
      req->options.run.max_errors = (uint32_t)n;
      break;
    case RUN_QUIET:
      req->quiet = true;
      break;
    case RUN_DEVICES:
    case RUN_CORES:
      if (!cli_parse_u64(value, &n) || n == 0 || n > 64)
        return cli_usage_error(cmd, "--%s expects an integer from 1 to 64, got '%s'",
                               id == RUN_DEVICES ? "devices" : "cores", value);
      if (id == RUN_DEVICES)
        req->options.run.devices = (uint32_t)n;
      else
        req->options.run.cores = (uint32_t)n;
      break;
    case RUN_DMA_MODE:
      if (strcmp(value, "eager") == 0) req->options.run.dma_eager = true;
      else if (strcmp(value, "lazy") == 0) req->options.run.dma_eager = false;
      else
        return cli_usage_error(cmd, "--dma-mode expects 'eager' or 'lazy', got '%s'",
                               value);
      break;
    case RUN_SCHEDULE_SEED:
      if (!cli_parse_u64(value, &n))
        return cli_usage_error(cmd,
                               "--schedule-seed expects a non-negative integer, got '%s'",
                               value);
      req->options.run.schedule_seed = n;
      break;
    case RUN_TRACE:
      req->options.run.trace_path = value;
      break;
    case RUN_FORCE:
      req->force = true;
      break;
    case RUN_PROGRESS_AFTER: {
      char *end = NULL;
      errno = 0;
      double t = strtod(value, &end);
      if (errno || end == value || *end || !(t >= 0) || t > 1e9)
        return cli_usage_error(cmd, "--progress-after expects a number of seconds >= 0, got '%s'",
                               value);
      req->progress_after = t;
      break;
    }
    case RUN_DETECT_RACES:
      req->options.run.detect_races = true;
      break;
    case RUN_OOB_READS:
      if (strcmp(value, "error") == 0) req->options.run.oob_reads_uninit = false;
      else if (strcmp(value, "uninit") == 0) req->options.run.oob_reads_uninit = true;
      else
        return cli_usage_error(cmd, "--oob-reads expects 'error' or 'uninit', got '%s'",
                               value);
      break;
    case RUN_BUFFER_BOUNDS:
      if (strcmp(value, "logical") == 0) req->options.run.padded = false;
      else if (strcmp(value, "padded") == 0) req->options.run.padded = true;
      else
        return cli_usage_error(cmd,
                               "--buffer-bounds expects 'logical' or 'padded', got '%s'",
                               value);
      break;
    case RUN_OUT_BLOCKS:
      if (strcmp(value, "uninit") == 0) req->options.run.out_blocks_copied_in = false;
      else if (strcmp(value, "copied-in") == 0) req->options.run.out_blocks_copied_in = true;
      else
        return cli_usage_error(cmd,
                               "--out-blocks expects 'uninit' or 'copied-in', got '%s'",
                               value);
      break;
    case RUN_CACHE_STATS:
      req->cache_stats = true;
      break;
    case RUN_EXPLAIN:
      req->explain = true;
      break;
    case RUN_TARGET:
    case RUN_BACKEND:
      if (id == RUN_TARGET && strcmp(cmd, "run") == 0) { /* hash's is the backend */
        if (strcmp(value, "tpu") != 0)
          return cli_usage_error(cmd, "--target expects tpu, got '%s' (--backend picks "
                                 "interp or cpu)", value);
        req->tpu_target = true;
        break;
      }
      if (!tsr_backend_from_name(value, &req->options.backend))
        return cli_usage_error(cmd, "--%s expects interp or cpu, got '%s'",
                               option_name(id), value);
      break;
    case RUN_STRICT:
      req->options.run.strict = true;
      break;
    case RUN_TIMEOUT: {
      char *end = NULL;
      errno = 0;
      double t = strtod(value, &end);
      if (errno || end == value || *end || !(t > 0) || t > 1e9)
        return cli_usage_error(cmd, "--timeout expects a positive number of seconds, got '%s'",
                               value);
      req->options.run.timeout_seconds = t;
      break;
    }
    case RUN_TPU_COMPILE_CHECK:
      req->tpu_compile_check = true;
      break;
    case RUN_MAX_STEPS:
      if (!cli_parse_u64(value, &n) || n == 0)
        return cli_usage_error(cmd, "--max-steps expects a positive integer, got '%s'", value);
      req->options.run.max_steps = n;
      break;
    case RUN_THREADS:
      if (!cli_parse_u64(value, &n) || n == 0 || n > 4096)
        return cli_usage_error(cmd, "--threads expects an integer from 1 to 4096, got '%s'",
                               value);
      req->options.run.threads = (uint32_t)n;
      break;
    default:
      return cli_usage_error(cmd, "internal error: option %d", id);
    }
  }
  uint32_t devices = req->options.run.devices ? req->options.run.devices : 1;
  uint32_t cores = req->options.run.cores ? req->options.run.cores : 1;
  if ((uint64_t)devices * cores > TSR_INTERP_MAX_CORES)
    return cli_usage_error(cmd,
                           "--devices %u x --cores %u is %" PRIu64 " simulated cores; a run "
                           "has at most %d",
                           devices, cores, (uint64_t)devices * cores, TSR_INTERP_MAX_CORES);
  if (!req->file) return cli_usage_error(cmd, "missing the kernel file (FILE.tsr)");
  if (req->tpu_compile_check && !req->tpu_target)
    return cli_usage_error(cmd, "--tpu-compile-check applies to --target tpu only");
  if (req->tpu_compile_check && strcmp(req->file, "-") == 0)
    return cli_usage_error(cmd, "--tpu-compile-check needs a kernel file, not stdin");
  if (strcmp(cmd, "run") == 0 && req->options.backend == TSR_BACKEND_CPU) {
    if (req->options.run.trace_path)
      return cli_usage_error(cmd, "--trace needs the interpreter: the cpu backend "
                             "runs native code, which it cannot trace");
  }
  if (strcmp(cmd, "run") == 0 && req->options.run.trace_path) return trace_target(cmd, req);
  return EXIT_OK;
}


void cli_run_request_deinitialize(cli_run_request_t *req) {
  free_bindings(req->ins, req->num_ins);
  free_bindings(req->outs, req->num_outs);
  free(req->parallel_order);
  req->parallel_order = NULL;
  free(req->trace_owned);
  req->trace_owned = NULL;
}
