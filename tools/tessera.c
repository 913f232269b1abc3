/* The tessera command-line tool: run kernels in the interpreter or compiled
 * for the CPU on .npy or random data, check and format .tsr files, print
 * their lowering to MLIR, list the ops of the IR.
 * Built on the public API alone (tessera/tessera.h) and libc. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tessera/tessera.h"
#include "tools/cli.h"

enum { EXIT_OK = 0, EXIT_KERNEL = 1, EXIT_USAGE = 2, EXIT_INTERRUPTED = 130 };

/* ---- Help texts ----------------------------------------------------------- */

static const char main_help[] =
    "tessera " TSR_VERSION_STRING
    ": TPU kernels in the Pallas model, interpreted and checked on a CPU\n"
    "\n"
    "Usage: tessera COMMAND [OPTIONS] [ARGS]\n"
    "\n"
    "Commands:\n"
    "  run     run a kernel in the interpreter (or compiled: --backend cpu)\n"
    "          on .npy or random inputs\n"
    "  check   parse and verify .tsr files, printing every diagnostic\n"
    "  fmt     print .tsr files in canonical form, or rewrite them in place\n"
    "  ops     list the ops of the kernel IR (--markdown for docs/ir.md)\n"
    "  hash    print the cache key of each kernel (--explain: its parts)\n"
    "  lower   print a kernel lowered to MLIR for the CPU (--stage mlir|llvm)\n"
    "  cache   the disk cache: stats, clear, verify\n"
    "  help    show the help of a command: tessera help run\n"
    "\n"
    "Options:\n"
    "  -h, --help   show this help\n"
    "  --version    print the version and exit\n"
    "\n"
    "Exit status: 0 success; 1 kernel errors (parse, verify or run-time\n"
    "diagnostics, failed writes); 2 usage errors (bad options, unreadable\n"
    "files, .npy data that does not match the kernel).\n"
    "\n"
    "Examples:\n"
    "  tessera run kernels/examples/matmul.tsr --random-inputs 1\n"
    "  tessera run kernels/examples/matmul.tsr --random-inputs 1 --backend cpu\n"
    "  tessera check kernels/examples/*.tsr\n"
    "  tessera fmt -i my_kernel.tsr\n"
    "Reference: docs/cli.md; the kernel language: docs/ir.md.\n";

static const char run_help[] =
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
    "                           --cores); no checks: of the options below it\n"
    "                           uses --devices, --cores, --uninit,\n"
    "                           --max-errors, --timeout and --max-steps,\n"
    "                           ignores the others and refuses --trace\n"
    "\n"
    "Interpreter:\n"
    "  --kernel NAME            the kernel to run (needed if FILE has several)\n"
    "  --uninit nan|zero        fill of new memory: NaN / integer max / true\n"
    "                           (default), or zero\n"
    "  --check, --no-check      track which bytes were written and report\n"
    "                           uninitialized reads and never-written outputs\n"
    "                           (default on; bounds and revisit checks are\n"
    "                           always on)\n"
    "  --shuffle-parallel SEED  visit parallel grid dimensions in a seeded\n"
    "                           random order, to catch order dependence\n"
    "  --chip CHIP              VMEM budget of CHIP: v2 v3 v4 v5e v5p v6e v7\n"
    "                           tpu8i (default v5e)\n"
    "  --max-errors N           diagnostics kept per run (default 20)\n"
    "  --strict                 warnings (what Pallas allows but looks wrong,\n"
    "                           docs/semantics.md) are errors: exit status 1\n"
    "  --timeout SECONDS        stop the run after SECONDS of wall time\n"
    "  --max-steps N            stop the run after N steps (grid steps and\n"
    "                           for/while iterations, over all cores)\n"
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
    "  --trace FILE.json        write a Chrome/Perfetto trace of the simulated\n"
    "                           run (open in ui.perfetto.dev or chrome://tracing)\n"
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

static const char check_help[] =
    "Usage: tessera check [OPTIONS] FILE.tsr...\n"
    "\n"
    "Parses and verifies each file ('-' for stdin) and prints every\n"
    "diagnostic as FILE:LINE:COL: error: MESSAGE on stderr. For a file\n"
    "without errors it prints 'FILE: ok (N kernels)' on stdout.\n"
    "\n"
    "Options:\n"
    "  -q, --quiet   print only diagnostics\n"
    "  -h, --help    show this help\n"
    "\n"
    "Exit status: 0 all files are valid, 1 some file has errors, 2 usage\n"
    "errors (including files that cannot be read).\n"
    "\n"
    "Example:\n"
    "  tessera check kernels/examples/*.tsr\n";

static const char fmt_help[] =
    "Usage: tessera fmt [OPTIONS] FILE.tsr...\n"
    "\n"
    "Parses each file ('-' for stdin) and prints it in canonical form (see\n"
    "docs/ir.md, 'Canonical printing') on stdout. Comments are not kept.\n"
    "\n"
    "Options:\n"
    "  -i, --in-place   rewrite each file that is not canonical (atomically:\n"
    "                   temporary file + rename); print nothing\n"
    "  --check          print nothing; list the files that are not canonical\n"
    "                   on stderr and exit 1 if there are any\n"
    "  -h, --help       show this help\n"
    "\n"
    "Exit status: 0 success (with --check: every file is canonical), 1 parse\n"
    "errors or non-canonical files under --check, 2 usage errors.\n"
    "\n"
    "Examples:\n"
    "  tessera fmt k.tsr > k.canonical.tsr\n"
    "  tessera fmt -i kernels/examples/*.tsr\n"
    "  tessera fmt --check kernels/examples/*.tsr\n";

static const char hash_help[] =
    "Usage: tessera hash FILE.tsr [OPTIONS]\n"
    "\n"
    "Prints the cache key of each kernel of FILE.tsr ('-' for stdin): 32 hex\n"
    "digits of XXH3-128 over the kernel's canonical bytes, the target, the\n"
    "options that change the result and the producer (tessera's version and\n"
    "build). Value names, the kernel's name, comments, whitespace and the file\n"
    "do not change the key; any op, attribute, shape, dtype, block spec or grid\n"
    "does. The kernel is parsed, not verified.\n"
    "\n"
    "Options:\n"
    "  -k, --kernel NAME   only this kernel\n"
    "  --explain           also print each component of the key with its own\n"
    "                      hash and size, to see why two keys differ\n"
    "  --target T          interp (default) or cpu (the key of --backend cpu:\n"
    "                      adds LLVM's version, the pipeline and the host CPU)\n"
    "  -h, --help          show this help\n"
    "The run options that change the key are accepted with their meaning in\n"
    "'tessera run': --uninit --shuffle-parallel --chip --check --no-check\n"
    "--max-errors --devices --cores --dma-mode --schedule-seed --detect-races\n"
    "\n"
    "Output: KEY  @KERNEL  FILE, one line per kernel.\n"
    "Exit status: 0 success; 1 parse errors; 2 usage errors.\n"
    "\n"
    "Example:\n"
    "  tessera hash kernels/examples/add.tsr --explain\n";

static const char ops_help[] =
    "Usage: tessera ops [--markdown]\n"
    "\n"
    "Lists every op of the kernel IR from the op table (ir/ops.def): its\n"
    "mnemonic, flags and synopsis.\n"
    "\n"
    "Options:\n"
    "  --markdown   print a markdown table: the generated block of docs/ir.md\n"
    "               (between the GENERATED OP TABLE markers)\n"
    "  -h, --help   show this help\n"
    "\n"
    "Flags: pure (no side effects), reads/writes (memory through a ref), map\n"
    "(allowed in index maps), control (holds regions), terminator, side-effect,\n"
    "dma, sync, barrier, reserved (parsed, not yet executable), and the element\n"
    "classes an elementwise op accepts (float, int, bool).\n"
    "\n"
    "Examples:\n"
    "  tessera ops\n"
    "  tessera ops --markdown\n";

static const char lower_help[] =
    "Usage: tessera lower FILE.tsr [OPTIONS]\n"
    "\n"
    "Prints one kernel of FILE.tsr ('-' for stdin) as the compiled cpu backend\n"
    "sees it (docs/lowering.md): MLIR in the upstream dialects (func, scf,\n"
    "arith, math, vector, memref) that tessera generates, or the same module\n"
    "after the pass pipeline, in the LLVM dialect. The kernel is verified\n"
    "first. Needs a tessera built with LLVM/MLIR 22 (meson -Dmlir=auto\n"
    "or enabled, docs/lowering.md).\n"
    "\n"
    "Options:\n"
    "  --target cpu         the target (cpu only, the default)\n"
    "  --stage mlir|llvm    mlir (default): the generated module; llvm: after\n"
    "                       the pass pipeline to the LLVM dialect\n"
    "  -k, --kernel NAME    the kernel (needed if FILE has several)\n"
    "  -h, --help           show this help\n"
    "\n"
    "Each kernel op's lines start with a comment naming its location.\n"
    "Errors carry MLIR's diagnostics, located in the generated module\n"
    "('@KERNEL.mlir:LINE:COL': lines of --stage mlir) with a note naming\n"
    "the kernel op the line was generated for.\n"
    "Exit status: 0 success; 1 parse, verify or lowering errors; 2 usage\n"
    "errors.\n"
    "\n"
    "Examples:\n"
    "  tessera lower kernels/examples/add.tsr\n"
    "  tessera lower kernels/examples/matmul.tsr --stage llvm\n";

/* ---- Small utilities ------------------------------------------------------- */

/* The tool's allocations are small and short-lived: running out of memory
 * ends the process. (The library's tsr_malloc family is internal.) */
static void *must_alloc(void *p, size_t count, size_t size) {
  if (!p) {
    fprintf(stderr, "tessera: out of memory: cannot allocate %zu x %zu bytes\n", count,
            size);
    exit(EXIT_KERNEL);
  }
  return p;
}

static void *xmalloc(size_t n) { return must_alloc(malloc(n ? n : 1), 1, n); }

static void *xcalloc(size_t count, size_t n) {
  return must_alloc(calloc(count ? count : 1, n ? n : 1), count, n);
}

static char *xstrndup(const char *s, size_t n) {
  return must_alloc(strndup(s, n), 1, n + 1);
}

/* Prints a usage error for command `cmd` and returns EXIT_USAGE. */
static int usage_error(const char *cmd, const char *fmt, ...) TSR_PRINTF(2, 3);
static int usage_error(const char *cmd, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "tessera %s: ", cmd);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\nTry 'tessera %s --help'.\n", cmd);
  va_end(ap);
  return EXIT_USAGE;
}

/* Exit code for a status: I/O and lookup problems are the caller's (usage),
 * everything else is a kernel error. */
static int exit_code_for(tsr_status_t status) {
  switch (tsr_status_code(status)) {
  case TSR_OK:
    return EXIT_OK;
  case TSR_INVALID_ARGUMENT:
  case TSR_IO_ERROR:
  case TSR_FORMAT_ERROR:
  case TSR_NOT_FOUND:
    return EXIT_USAGE;
  default:
    return EXIT_KERNEL;
  }
}

/* Prints a status on stderr. Diagnostics about a kernel already read
 * "file:line:col: error: ..." and are printed as they are; other messages get
 * a "tessera CMD: <code>:" prefix. Frees the status. */
static void report(const char *cmd, tsr_status_t status) {
  tsr_status_code_t code = tsr_status_code(status);
  const char *msg = tsr_status_message(status);
  const char *eol = strchr(msg, '\n');
  const char *tag = strstr(msg, ": error: ");
  bool located = tag && (!eol || tag < eol);
  const char *code_name = tsr_status_code_name(code);
  if (located || code == TSR_PARSE_ERROR || code == TSR_VERIFY_ERROR ||
      code == TSR_KERNEL_ERROR) {
    fprintf(stderr, "%s\n", msg);
  } else if (strncmp(msg, code_name, strlen(code_name)) == 0) {
    fprintf(stderr, "tessera %s: %s\n", cmd, msg); /* "out of memory" once */
  } else {
    fprintf(stderr, "tessera %s: %s: %s\n", cmd, tsr_status_code_name(code),
            msg);
  }
  tsr_status_free(status);
}

/* Parses a non-negative decimal (or 0x hex) integer. */
static bool parse_u64(const char *s, uint64_t *out) {
  if (!s || !*s || *s == '-' || *s == '+' || *s == ' ') return false;
  int base = (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) ? 16 : 10;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, base);
  if (errno || *end || end == s) return false;
  *out = (uint64_t)v;
  return true;
}

static char *read_stream(FILE *f, size_t *out_size) {
  size_t cap = 65536, size = 0;
  char *buf = xmalloc(cap);
  size_t n;
  while ((n = fread(buf + size, 1, cap - size, f)) > 0) {
    size += n;
    if (size == cap) {
      cap *= 2;
      buf = must_alloc(realloc(buf, cap), 1, cap);
    }
  }
  if (ferror(f)) {
    free(buf);
    return NULL;
  }
  *out_size = size;
  return buf;
}

/* Reads a whole file ('-' for stdin). NULL with errno set on failure. */
static char *read_file(const char *path, size_t *out_size) {
  if (strcmp(path, "-") == 0) return read_stream(stdin, out_size);
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *text = read_stream(f, out_size);
  int err = errno;
  fclose(f);
  errno = err;
  return text;
}

/* Parses (and optionally verifies) a .tsr file; '-' reads stdin, named
 * "<stdin>" in diagnostics. */
static tsr_status_t load_module(const char *path, bool verify,
                                tsr_ir_module_t **out_module) {
  if (strcmp(path, "-") != 0) {
    if (verify) return tsr_runtime_load_file(path, out_module);
    return tsr_ir_module_parse_file(path, out_module);
  }
  size_t size = 0;
  char *text = read_file(path, &size);
  if (!text)
    return TSR_STATUS(TSR_IO_ERROR, "<stdin>: read error: %s", strerror(errno));
  tsr_ir_module_t *module = NULL;
  tsr_status_t status = tsr_ir_module_parse(TSR_SV("<stdin>"),
                                            (tsr_string_view_t){text, size},
                                            &module);
  free(text);
  if (!status && verify) {
    status = tsr_ir_module_verify(module);
    if (status) tsr_ir_module_destroy(module);
  }
  if (!status) *out_module = module;
  return status;
}

static bool is_dir(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool file_exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

/* mkdir -p. *out_created is the length of the shortest prefix of `path`
 * that this call created (0 if it created nothing). */
static bool make_dirs(const char *path, size_t *out_created) {
  size_t len = strlen(path);
  char *p = xstrndup(path, len);
  *out_created = 0;
  for (size_t i = 1; i <= len; i++) {
    if (p[i] != '/' && p[i] != 0) continue;
    char saved = p[i];
    p[i] = 0;
    if (!is_dir(p)) {
      if (mkdir(p, 0777) == 0) {
        if (!*out_created) *out_created = i;
      } else if (errno != EEXIST) {
        free(p);
        return false;
      }
    }
    p[i] = saved;
  }
  free(p);
  return is_dir(path);
}

/* Undoes make_dirs: removes `path` and its parents down to the prefix of
 * length `created`, each only if it is empty. */
static void remove_made_dirs(const char *path, size_t created) {
  if (!created) return;
  char *p = xstrndup(path, strlen(path));
  for (;;) {
    (void)rmdir(p);
    char *slash = strrchr(p, '/');
    if (!slash || (size_t)(slash - p) < created) break;
    *slash = 0;
  }
  free(p);
}

static char *join_path(const char *dir, const char *name, const char *ext) {
  size_t len = strlen(dir) + strlen(name) + strlen(ext) + 2;
  char *p = xmalloc(len);
  size_t dl = strlen(dir);
  snprintf(p, len, "%s%s%s%s", dir, dl && dir[dl - 1] == '/' ? "" : "/", name,
           ext);
  return p;
}

/* ---- Option parsing ---------------------------------------------------------
 * A small parser: "--name value", "--name=value", "-x value", "-xvalue",
 * "--" ends the options; options and positional arguments may mix. */

typedef struct cli_option {
  const char *name; /* long name without "--" */
  char short_name;  /* 0 if none */
  bool takes_value;
  int id;
} cli_option_t;

enum { ARG_END = -1, ARG_POSITIONAL = -2, ARG_ERROR = -3 };

typedef struct arg_iter {
  const char *cmd;
  int argc;
  char **argv;
  int next;
  bool positional_only;
} arg_iter_t;

static int next_arg(arg_iter_t *it, const cli_option_t *options,
                    const char **out_value) {
  *out_value = NULL;
  if (it->next >= it->argc) return ARG_END;
  const char *arg = it->argv[it->next++];
  if (it->positional_only || arg[0] != '-' || arg[1] == 0) {
    *out_value = arg;
    return ARG_POSITIONAL;
  }
  if (strcmp(arg, "--") == 0) {
    it->positional_only = true;
    return next_arg(it, options, out_value);
  }
  const cli_option_t *opt = NULL;
  const char *inline_value = NULL;
  if (arg[1] == '-') {
    const char *name = arg + 2;
    const char *eq = strchr(name, '=');
    size_t len = eq ? (size_t)(eq - name) : strlen(name);
    for (const cli_option_t *o = options; o->name; o++)
      if (strlen(o->name) == len && strncmp(o->name, name, len) == 0) opt = o;
    if (!opt) {
      usage_error(it->cmd, "unknown option '--%.*s'", (int)len, name);
      return ARG_ERROR;
    }
    if (eq) {
      if (!opt->takes_value) {
        usage_error(it->cmd, "option '--%s' takes no value", opt->name);
        return ARG_ERROR;
      }
      inline_value = eq + 1;
    }
  } else {
    for (const cli_option_t *o = options; o->name; o++)
      if (o->short_name && o->short_name == arg[1]) opt = o;
    if (!opt) {
      usage_error(it->cmd, "unknown option '%s'", arg);
      return ARG_ERROR;
    }
    if (arg[2]) {
      if (!opt->takes_value) {
        usage_error(it->cmd, "unknown option '%s' (options are not combined)",
                    arg);
        return ARG_ERROR;
      }
      inline_value = arg + 2;
    }
  }
  if (opt->takes_value) {
    if (!inline_value) {
      if (it->next >= it->argc) {
        usage_error(it->cmd, "option '--%s' needs a value", opt->name);
        return ARG_ERROR;
      }
      inline_value = it->argv[it->next++];
    }
    *out_value = inline_value;
  }
  return opt->id;
}

/* ---- Array display ------------------------------------------------------------ */

static float half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  float mag;
  if (exp == 0x1f) mag = man ? NAN : INFINITY;
  else if (exp == 0) mag = ldexpf((float)man, -24);
  else mag = ldexpf((float)(man | 0x400u), (int)exp - 25);
  return sign ? -mag : mag;
}

static double element(const tsr_array_t *a, int64_t i) {
  switch (a->dtype) {
  case TSR_DTYPE_F32: return ((const float *)a->data)[i];
  case TSR_DTYPE_BF16: {
    uint32_t bits = (uint32_t)((const uint16_t *)a->data)[i] << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
  }
  case TSR_DTYPE_F16: return half_to_float(((const uint16_t *)a->data)[i]);
  case TSR_DTYPE_I32: return ((const int32_t *)a->data)[i];
  case TSR_DTYPE_U32: return ((const uint32_t *)a->data)[i];
  case TSR_DTYPE_I16: return ((const int16_t *)a->data)[i];
  case TSR_DTYPE_U16: return ((const uint16_t *)a->data)[i];
  case TSR_DTYPE_I8: return ((const int8_t *)a->data)[i];
  case TSR_DTYPE_U8: return ((const uint8_t *)a->data)[i];
  case TSR_DTYPE_I1: return ((const uint8_t *)a->data)[i] != 0;
  default: return 0;
  }
}

/* "f32[4, 8]" (or "f32" for rank 0). */
static void format_type(char *buf, size_t size, tsr_dtype_t dtype,
                        uint32_t rank, const int64_t *dims) {
  int n = snprintf(buf, size, "%s", tsr_dtype_name(dtype));
  for (uint32_t i = 0; i < rank && n > 0 && (size_t)n < size; i++)
    n += snprintf(buf + n, size - (size_t)n, "%s%" PRId64 "%s", i ? ", " : "[",
                  dims[i], i + 1 == rank ? "]" : "");
}

/* "(4, 8)" as numpy writes shapes. */
static void format_shape(char *buf, size_t size, uint32_t rank,
                         const int64_t *dims) {
  int n = snprintf(buf, size, "(");
  for (uint32_t i = 0; i < rank && (size_t)n < size; i++)
    n += snprintf(buf + n, size - (size_t)n, "%s%" PRId64, i ? ", " : "",
                  dims[i]);
  if ((size_t)n < size)
    snprintf(buf + n, size - (size_t)n, "%s)", rank == 1 ? "," : "");
}

/* numpy-style display of an array, summarised like numpy (edge items with
 * "...") when it has more than SUMMARY_THRESHOLD elements; leading dimensions
 * beyond the last two then show only their first entry. */
enum { SUMMARY_THRESHOLD = 64, EDGE_ITEMS = 3 };

typedef struct printer {
  const tsr_array_t *array;
  FILE *out;
  bool summarize;
  bool is_float, is_bool;
  int64_t strides[TSR_MAX_RANK];
  /* measured over the shown elements */
  double max_abs, min_abs_nonzero;
  bool any_finite;
  bool scientific;
  int int_width, frac_width, width; /* fixed: parts around '.'; total */
  int indent;                       /* columns before the first '[' */
} printer_t;

typedef enum { PASS_RANGE, PASS_WIDTH, PASS_PRINT } print_pass_t;

/* Formats a float as the printer shows it; *out_int_len receives the length
 * of the part before the '.' (the whole length outside fixed mode). */
static int format_float(const printer_t *p, double v, char *buf, size_t size,
                        int *out_int_len) {
  int n;
  if (isnan(v)) n = snprintf(buf, size, "nan");
  else if (isinf(v)) n = snprintf(buf, size, v < 0 ? "-inf" : "inf");
  else if (p->scientific) n = snprintf(buf, size, "%.4e", v);
  else {
    n = snprintf(buf, size, "%.4f", v);
    while (n > 0 && buf[n - 1] == '0') buf[--n] = 0; /* "1.5000" -> "1.5" */
  }
  const char *dot = strchr(buf, '.');
  *out_int_len = (!isfinite(v) || p->scientific || !dot) ? n : (int)(dot - buf);
  return n;
}

static void visit_element(printer_t *p, print_pass_t pass, int64_t offset) {
  double v = element(p->array, offset);
  char buf[64];
  if (!p->is_float) {
    if (p->is_bool) snprintf(buf, sizeof buf, "%s", v != 0 ? "True" : "False");
    else snprintf(buf, sizeof buf, "%.0f", v);
    int n = (int)strlen(buf);
    if (pass == PASS_WIDTH && n > p->width) p->width = n;
    if (pass == PASS_PRINT) fprintf(p->out, "%*s", p->width, buf);
    return;
  }
  if (pass == PASS_RANGE) {
    if (isfinite(v)) {
      double a = fabs(v);
      p->any_finite = true;
      if (a > p->max_abs) p->max_abs = a;
      if (a != 0 && (p->min_abs_nonzero == 0 || a < p->min_abs_nonzero))
        p->min_abs_nonzero = a;
    }
    return;
  }
  int int_len;
  int n = format_float(p, v, buf, sizeof buf, &int_len);
  if (pass == PASS_WIDTH) {
    if (!isfinite(v) || p->scientific) {
      if (n > p->width) p->width = n;
    } else {
      if (int_len > p->int_width) p->int_width = int_len;
      if (n - int_len > p->frac_width) p->frac_width = n - int_len;
    }
    return;
  }
  int total = p->int_width + p->frac_width;
  if (p->width > total) total = p->width;
  if (!isfinite(v) || p->scientific) {
    fprintf(p->out, "%*s", total, buf);
  } else { /* align on the '.', pad the fraction on the right, as numpy */
    int lead = total - p->frac_width - int_len;
    fprintf(p->out, "%*s%s%*s", lead, "", buf, p->frac_width - (n - int_len), "");
  }
}

/* Between two entries of dimension `dim`: a space in the last dimension,
 * else one newline per remaining dimension and an indent, as numpy does. */
static void separator(printer_t *p, uint32_t dim) {
  if (dim + 1 == p->array->rank) {
    fputc(' ', p->out);
    return;
  }
  for (uint32_t l = dim + 1; l < p->array->rank; l++) fputc('\n', p->out);
  fprintf(p->out, "%*s", p->indent + (int)dim + 1, "");
}

static void visit(printer_t *p, print_pass_t pass, uint32_t dim, int64_t offset) {
  const tsr_array_t *a = p->array;
  if (dim == a->rank) {
    visit_element(p, pass, offset);
    return;
  }
  int64_t n = a->dims[dim];
  bool leading = a->rank - dim > 2;
  int64_t head = n, tail = 0;
  if (p->summarize) {
    if (leading && n > 1) {
      head = 1;
    } else if (!leading && n > 2 * EDGE_ITEMS) {
      head = EDGE_ITEMS;
      tail = EDGE_ITEMS;
    }
  }
  bool ellipsis = head + tail < n;
  if (pass == PASS_PRINT) fputc('[', p->out);
  for (int64_t k = 0; k < n; k++) {
    if (pass == PASS_PRINT && k > 0) separator(p, dim);
    if (ellipsis && k == head) {
      if (pass == PASS_PRINT) fputs("...", p->out);
      if (tail == 0) break;
      k = n - tail - 1; /* the loop continues at the first tail entry */
      continue;
    }
    visit(p, pass, dim + 1, offset + k * p->strides[dim]);
  }
  if (pass == PASS_PRINT) fputc(']', p->out);
}

static void print_array(FILE *out, const char *name, const tsr_array_t *a) {
  char type[128];
  format_type(type, sizeof type, a->dtype, a->rank, a->dims);
  fprintf(out, "%%%s: %s\n", name, type);
  int64_t count = tsr_array_element_count(a);
  printer_t p;
  memset(&p, 0, sizeof p);
  p.array = a;
  p.out = out;
  p.summarize = count > SUMMARY_THRESHOLD;
  p.is_float = tsr_dtype_class(a->dtype) == TSR_CLASS_FLOAT;
  p.is_bool = a->dtype == TSR_DTYPE_I1;
  int64_t stride = 1;
  for (uint32_t d = a->rank; d-- > 0;) {
    p.strides[d] = stride;
    stride *= a->dims[d];
  }
  if (count == 0) {
    fputs("  (no elements)\n", out);
    return;
  }
  visit(&p, PASS_RANGE, 0, 0);
  p.scientific = p.any_finite &&
                 (p.max_abs >= 1e8 ||
                  (p.min_abs_nonzero != 0 && p.min_abs_nonzero < 1e-4));
  visit(&p, PASS_WIDTH, 0, 0);
  p.indent = 2;
  fputs("  ", out);
  visit(&p, PASS_PRINT, 0, 0);
  fputc('\n', out);
  /* Statistics over every element. */
  double lo = INFINITY, hi = -INFINITY, sum = 0;
  int64_t finite = 0, nans = 0, infs = 0;
  for (int64_t i = 0; i < count; i++) {
    double v = element(a, i);
    if (isnan(v)) {
      nans++;
      continue;
    }
    if (isinf(v)) {
      infs++;
      continue;
    }
    finite++;
    sum += v;
    if (v < lo) lo = v;
    if (v > hi) hi = v;
  }
  if (!p.is_float) {
    fprintf(out, "  min %.10g, max %.10g, mean %.6g\n", lo, hi,
            sum / (double)finite);
  } else if (finite) {
    fprintf(out, "  finite values: min %.6g, max %.6g, mean %.6g; %" PRId64
            " NaN", lo, hi, sum / (double)finite, nans);
    if (infs) fprintf(out, ", %" PRId64 " inf", infs);
    fputc('\n', out);
  } else {
    fprintf(out, "  no finite values; %" PRId64 " NaN, %" PRId64 " inf\n",
            nans, infs);
  }
}

void tsr_cli_format_bytes(char *buf, size_t size, uint64_t bytes) {
  if (bytes < 1024) snprintf(buf, size, "%" PRIu64 " B", bytes);
  else if (bytes < (uint64_t)1 << 20) snprintf(buf, size, "%.1f KiB", bytes / 1024.0);
  else if (bytes < (uint64_t)1 << 30)
    snprintf(buf, size, "%.1f MiB", bytes / (1024.0 * 1024.0));
  else snprintf(buf, size, "%.2f GiB", bytes / (1024.0 * 1024.0 * 1024.0));
}

/* ---- tessera run ------------------------------------------------------------ */

typedef struct binding {
  char *owned;      /* the allocation holding the name */
  const char *name; /* operand name without '%', inside `owned` */
  const char *path; /* borrowed from argv */
} binding_t;

enum {
  RUN_HELP, RUN_KERNEL, RUN_IN, RUN_OUT, RUN_IN_DIR, RUN_OUT_DIR, RUN_RANDOM,
  RUN_UNINIT, RUN_SHUFFLE, RUN_CHIP, RUN_CHECK, RUN_NO_CHECK, RUN_MAX_ERRORS,
  RUN_QUIET, RUN_DEVICES, RUN_CORES, RUN_DMA_MODE, RUN_SCHEDULE_SEED, RUN_TRACE,
  RUN_DETECT_RACES, RUN_CACHE_STATS, RUN_EXPLAIN, RUN_TARGET, RUN_BACKEND,
  RUN_STRICT, RUN_TIMEOUT, RUN_MAX_STEPS,
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
    {"detect-races", 0, false, RUN_DETECT_RACES},
    {"cache-stats", 0, false, RUN_CACHE_STATS},
    {"explain", 0, false, RUN_EXPLAIN},
    {"target", 0, true, RUN_TARGET},
    {"backend", 0, true, RUN_BACKEND},
    {"strict", 0, false, RUN_STRICT},
    {"timeout", 0, true, RUN_TIMEOUT},
    {"max-steps", 0, true, RUN_MAX_STEPS},
    {NULL, 0, false, 0},
};

/* `run` and `hash` share the table above: hash takes the options that change
 * a kernel's key, plus its own; run takes all but hash's own. */
static bool option_of(const char *cmd, int id) {
  bool hash = strcmp(cmd, "hash") == 0;
  switch (id) {
    case RUN_HELP: case RUN_KERNEL: case RUN_UNINIT: case RUN_SHUFFLE: case RUN_CHIP:
    case RUN_CHECK: case RUN_NO_CHECK: case RUN_MAX_ERRORS: case RUN_DEVICES:
    case RUN_CORES: case RUN_DMA_MODE: case RUN_SCHEDULE_SEED: case RUN_DETECT_RACES:
      return true;
    case RUN_EXPLAIN: case RUN_TARGET:
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


typedef struct run_request {
  const char *file;
  const char *kernel;
  binding_t *ins, *outs;
  size_t num_ins, num_outs;
  const char *in_dir, *out_dir;
  bool random_inputs;
  uint64_t random_seed;
  bool quiet;
  bool cache_stats; /* run: print the cache counters */
  bool explain;     /* hash: each component's hash */
  tsr_target_t target;  /* hash: --target; run: --backend */
  tsr_interp_options_t options;
} run_request_t;

/* Splits "NAME=FILE" (NAME may start with '%'). */
static bool parse_binding(const char *arg, binding_t *out) {
  const char *eq = strchr(arg, '=');
  if (!eq || eq == arg || !eq[1]) return false;
  char *name = xstrndup(arg, (size_t)(eq - arg));
  out->owned = name;
  out->name = name[0] == '%' ? name + 1 : name;
  out->path = eq + 1;
  if (*out->name) return true;
  free(name);
  return false;
}

static void free_bindings(binding_t *b, size_t n) {
  for (size_t i = 0; i < n; i++) free(b[i].owned);
  free(b);
}

/* Options of `run`, and of `hash` (option_of says which of them). */
/* Set by SIGINT during a run; the run's cancel flag. */
static volatile int interrupted;

static void on_interrupt(int sig) {
  (void)sig;
  interrupted = 1;
}

static int parse_run_args(const char *cmd, int argc, char **argv,
                          run_request_t *req) {
  memset(req, 0, sizeof *req);
  tsr_interp_options_initialize(&req->options);
  req->ins = xcalloc((size_t)argc, sizeof *req->ins);
  req->outs = xcalloc((size_t)argc, sizeof *req->outs);
  arg_iter_t it = {cmd, argc, argv, 1, false};
  const char *value;
  int id;
  while ((id = next_arg(&it, run_options, &value)) != ARG_END) {
    uint64_t n;
    if (id >= 0 && !option_of(cmd, id))
      return usage_error(cmd, "'--%s' is not an option of '%s'", option_name(id), cmd);
    switch (id) {
    case ARG_ERROR:
      return EXIT_USAGE;
    case ARG_POSITIONAL:
      if (req->file)
        return usage_error(cmd, "one kernel file expected, got '%s' and '%s'",
                           req->file, value);
      req->file = value;
      break;
    case RUN_HELP:
      fputs(strcmp(cmd, "hash") == 0 ? hash_help : run_help, stdout);
      return -1;
    case RUN_KERNEL:
      req->kernel = value[0] == '@' ? value + 1 : value;
      break;
    case RUN_IN:
    case RUN_OUT: {
      binding_t b;
      if (!parse_binding(value, &b))
        return usage_error(cmd, "--%s expects NAME=FILE.npy, got '%s'",
                           id == RUN_IN ? "in" : "out", value);
      binding_t *list = id == RUN_IN ? req->ins : req->outs;
      size_t *count = id == RUN_IN ? &req->num_ins : &req->num_outs;
      list[(*count)++] = b;
      for (size_t i = 0; i + 1 < *count; i++) {
        if (strcmp(list[i].name, b.name) == 0)
          return usage_error(cmd, "--%s %%%s is given twice",
                             id == RUN_IN ? "in" : "out", b.name);
        if (id == RUN_OUT && strcmp(list[i].path, b.path) == 0)
          return usage_error(cmd, "--out %%%s and %%%s both write %s",
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
      if (!parse_u64(value, &n))
        return usage_error(cmd,
                           "--random-inputs expects a non-negative integer "
                           "seed, got '%s'",
                           value);
      req->random_inputs = true;
      req->random_seed = n;
      break;
    case RUN_UNINIT:
      if (strcmp(value, "nan") == 0) req->options.uninit = TSR_UNINIT_NAN;
      else if (strcmp(value, "zero") == 0) req->options.uninit = TSR_UNINIT_ZERO;
      else
        return usage_error(cmd, "--uninit expects 'nan' or 'zero', got '%s'",
                           value);
      break;
    case RUN_SHUFFLE:
      if (!parse_u64(value, &n))
        return usage_error(cmd,
                           "--shuffle-parallel expects a non-negative integer "
                           "seed, got '%s'",
                           value);
      req->options.shuffle_parallel = true;
      req->options.shuffle_seed = n;
      break;
    case RUN_CHIP: {
      uint64_t bytes;
      if (!tsr_interp_chip_vmem_bytes(value, &bytes))
        return usage_error(cmd,
                           "unknown chip '%s' (known: v2 v3 v4 v5e v5p v6e v7 "
                           "tpu8i)",
                           value);
      req->options.chip = value;
      break;
    }
    case RUN_CHECK:
      req->options.check = true;
      break;
    case RUN_NO_CHECK:
      req->options.check = false;
      break;
    case RUN_MAX_ERRORS:
      if (!parse_u64(value, &n) || n == 0 || n > UINT32_MAX)
        return usage_error(cmd,
                           "--max-errors expects a positive integer, got '%s'",
                           value);
      req->options.max_errors = (uint32_t)n;
      break;
    case RUN_QUIET:
      req->quiet = true;
      break;
    case RUN_DEVICES:
    case RUN_CORES:
      if (!parse_u64(value, &n) || n == 0 || n > 64)
        return usage_error(cmd, "--%s expects an integer from 1 to 64, got '%s'",
                           id == RUN_DEVICES ? "devices" : "cores", value);
      if (id == RUN_DEVICES)
        req->options.devices = (uint32_t)n;
      else
        req->options.cores = (uint32_t)n;
      break;
    case RUN_DMA_MODE:
      if (strcmp(value, "eager") == 0) req->options.dma_eager = true;
      else if (strcmp(value, "lazy") == 0) req->options.dma_eager = false;
      else
        return usage_error(cmd, "--dma-mode expects 'eager' or 'lazy', got '%s'",
                           value);
      break;
    case RUN_SCHEDULE_SEED:
      if (!parse_u64(value, &n))
        return usage_error(cmd,
                           "--schedule-seed expects a non-negative integer, got '%s'",
                           value);
      req->options.schedule_seed = n;
      break;
    case RUN_TRACE:
      req->options.trace_path = value;
      break;
    case RUN_DETECT_RACES:
      req->options.detect_races = true;
      break;
    case RUN_CACHE_STATS:
      req->cache_stats = true;
      break;
    case RUN_EXPLAIN:
      req->explain = true;
      break;
    case RUN_TARGET:
      if (!tsr_runtime_target_from_name(value, &req->target))
        return usage_error(cmd, "--target expects interp, cpu or tpu, got '%s'",
                           value);
      break;
    case RUN_BACKEND:
      if (strcmp(value, "interp") == 0) req->target = TSR_TARGET_INTERP;
      else if (strcmp(value, "cpu") == 0) req->target = TSR_TARGET_CPU;
      else
        return usage_error(cmd, "--backend expects interp or cpu, got '%s'", value);
      break;
    case RUN_STRICT:
      req->options.strict = true;
      break;
    case RUN_TIMEOUT: {
      char *end = NULL;
      errno = 0;
      double t = strtod(value, &end);
      if (errno || end == value || *end || !(t > 0) || t > 1e9)
        return usage_error(cmd, "--timeout expects a positive number of seconds, got '%s'",
                           value);
      req->options.timeout_seconds = t;
      break;
    }
    case RUN_MAX_STEPS:
      if (!parse_u64(value, &n) || n == 0)
        return usage_error(cmd, "--max-steps expects a positive integer, got '%s'", value);
      req->options.max_steps = n;
      break;
    default:
      return usage_error(cmd, "internal error: option %d", id);
    }
  }
  uint32_t devices = req->options.devices ? req->options.devices : 1;
  uint32_t cores = req->options.cores ? req->options.cores : 1;
  if ((uint64_t)devices * cores > TSR_INTERP_MAX_CORES)
    return usage_error(cmd,
                       "--devices %u x --cores %u is %" PRIu64 " simulated cores; a run "
                       "has at most %d",
                       devices, cores, (uint64_t)devices * cores, TSR_INTERP_MAX_CORES);
  if (!req->file) return usage_error(cmd, "missing the kernel file (FILE.tsr)");
  if (strcmp(cmd, "run") == 0 && req->target == TSR_TARGET_CPU) {
    if (req->options.trace_path)
      return usage_error(cmd, "--trace needs the interpreter: the cpu backend "
                         "runs native code, which it cannot trace");
  }
  return EXIT_OK;
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
static int check_bindings(const char *kernel_name, const binding_t *b, size_t nb,
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
      return usage_error("run", "--%s %%%s: kernel @%s has no operand %%%s; its %s: %s",
                         inputs ? "in" : "out", b[i].name, kernel_name,
                         b[i].name, inputs ? "inputs are" : "outputs are", names);
    return usage_error("run", "--%s %%%s: %%%s is not an %s of kernel @%s; its %s: %s",
                       inputs ? "in" : "out", b[i].name, b[i].name,
                       inputs ? "input" : "output", kernel_name,
                       inputs ? "inputs are" : "outputs are", names);
  }
  return EXIT_OK;
}

static const char *find_binding(const binding_t *b, size_t nb, const char *name) {
  for (size_t i = 0; i < nb; i++)
    if (strcmp(b[i].name, name) == 0) return b[i].path;
  return NULL;
}

/* Reads operand `info` from `path`, checking dtype and shape. */
static int load_input(const char *path, const tsr_ir_operand_info_t *info,
                      tsr_array_t *out) {
  tsr_status_t status = tsr_npy_read(path, (int)info->dtype, out);
  if (status) {
    int code = exit_code_for(status);
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
    format_shape(found, sizeof found, out->rank, out->dims);
    format_shape(expected, sizeof expected, info->rank, info->dims);
    format_type(type, sizeof type, info->dtype, info->rank, info->dims);
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
  char *dir = xstrndup(path, slash == path ? 1 : (size_t)(slash - path));
  bool ok = is_dir(dir);
  if (!ok)
    usage_error("run", "--out %%%s=%s: directory %s does not exist", name, path,
                dir);
  free(dir);
  return ok ? EXIT_OK : EXIT_USAGE;
}

static double seconds_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
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

/* --cache-stats: the process's cache counters, on stderr. */
static void print_cache_stats(void) {
  tsr_runtime_cache_stats_t c;
  tsr_runtime_cache_stats(&c);
  fprintf(stderr,
          "tessera: cache stats: memory %" PRIu64 " hit%s, %" PRIu64 " miss%s, %" PRIu64
          " build%s; ",
          c.memory_hits, c.memory_hits == 1 ? "" : "s", c.memory_misses,
          c.memory_misses == 1 ? "" : "es", c.memory_builds, c.memory_builds == 1 ? "" : "s");
  fputs("disk not used by the interpreter\n", stderr);
}

/* --cache-stats with --backend cpu. */
static void print_compiled_cache_stats(void) {
  tsr_runtime_compiled_stats_t c;
  tsr_runtime_compiled_stats(&c);
  fprintf(stderr, "tessera: cache stats (cpu): memory %" PRIu64 " hit%s, %" PRIu64 " miss%s; ",
          c.memory_hits, c.memory_hits == 1 ? "" : "s", c.memory_misses,
          c.memory_misses == 1 ? "" : "es");
  print_disk_use(&c.disk);
  fprintf(stderr, "; %" PRIu64 " compile%s, %" PRIu64 " load failure%s; lowering library %s\n",
          c.compiles, c.compiles == 1 ? "" : "s", c.load_failures,
          c.load_failures == 1 ? "" : "s", c.lower_library_loaded ? "loaded" : "not loaded");
}

static int execute_run(run_request_t *req) {
  int rc = EXIT_OK;
  tsr_ir_module_t *module = NULL;
  tsr_interp_program_t *program = NULL;
  tsr_compiled_kernel_t *compiled = NULL;
  const char *origin = NULL; /* cpu: where the code came from */
  tsr_ir_operand_info_t *infos = NULL;
  tsr_array_t *arrays = NULL;
  tsr_array_t **ptrs = NULL;
  size_t n = 0;

  /* Parsed only: tsr_runtime_prepare (and the cpu backend's compile)
   * verifies the kernel unless this process prepared it already. */
  tsr_status_t status = load_module(req->file, false, &module);
  if (status) {
    rc = exit_code_for(status);
    report("run", status);
    return rc;
  }
  tsr_ir_kernel_t *kernel = NULL;
  status = tsr_runtime_select_kernel(module, req->kernel, &kernel);
  if (status) {
    rc = usage_error("run", "%s: %s%s", req->file, tsr_status_message(status),
                     req->kernel ? "" : " (use --kernel NAME)");
    tsr_status_free(status);
    goto done;
  }
  const char *kname = tsr_ir_kernel_name(kernel);
  /* Set before preparing: the interpreter's program takes its run-time
   * options from the preparation. */
  req->options.cancel = &interrupted;
  double prepare_start = seconds_now();
  if (req->target == TSR_TARGET_CPU) {
    tsr_runtime_compiled_stats_t before, after;
    tsr_runtime_compiled_stats(&before);
    status = tsr_runtime_compile(kernel, NULL, &compiled);
    tsr_runtime_compiled_stats(&after);
    origin = after.compiles > before.compiles   ? "compiled"
             : after.disk.hits > before.disk.hits ? "loaded from the disk cache"
                                                  : "found in memory";
  } else {
    status = tsr_runtime_prepare(kernel, &req->options, &program);
  }
  double prepare_seconds = seconds_now() - prepare_start;
  if (status) {
    rc = exit_code_for(status);
    report("run", status);
    goto done;
  }

  /* The operands the interpreter takes: everything but scratch, in order. */
  size_t total = tsr_ir_kernel_operand_count(kernel);
  infos = xcalloc(total, sizeof *infos);
  for (size_t i = 0; i < total; i++) {
    tsr_ir_operand_info_t info;
    tsr_ir_kernel_operand_info(kernel, i, &info);
    if (info.role == TSR_ROLE_SCRATCH) continue;
    if (req->options.devices > 1) {
      /* One slice per device: a leading dimension of size devices. */
      if (info.rank + 1 > TSR_MAX_RANK) {
        rc = usage_error("run", "operand %%%s has rank %u: with --devices it would "
                         "need rank %u, more than %d", info.name, info.rank,
                         info.rank + 1, TSR_MAX_RANK);
        goto done;
      }
      memmove(info.dims + 1, info.dims, info.rank * sizeof info.dims[0]);
      info.dims[0] = req->options.devices;
      info.rank++;
    }
    infos[n++] = info;
  }
  if ((rc = check_bindings(kname, req->ins, req->num_ins, infos, n, true)) ||
      (rc = check_bindings(kname, req->outs, req->num_outs, infos, n, false)))
    goto done;
  for (size_t i = 0; i < req->num_outs; i++)
    if ((rc = check_output_path(req->outs[i].name, req->outs[i].path))) goto done;
  if (req->out_dir && file_exists(req->out_dir) && !is_dir(req->out_dir)) {
    rc = usage_error("run", "--out-dir %s: not a directory", req->out_dir);
    goto done;
  }
  if (req->in_dir && !is_dir(req->in_dir)) {
    rc = usage_error("run", "--in-dir %s: no such directory", req->in_dir);
    goto done;
  }

  /* Inputs: --in, else DIR/NAME.npy, else random, else an error. An array
   * holds data (non-NULL, even with no elements) once it is set up. */
  arrays = xcalloc(n, sizeof *arrays);
  ptrs = xcalloc(n, sizeof *ptrs);
  char missing[1024] = "";
  size_t num_missing = 0;
  for (size_t i = 0; i < n; i++) {
    const tsr_ir_operand_info_t *info = &infos[i];
    ptrs[i] = &arrays[i];
    if (info->role == TSR_ROLE_OUT) continue;
    const char *path = find_binding(req->ins, req->num_ins, info->name);
    char *dir_path = NULL;
    if (!path && req->in_dir) {
      dir_path = join_path(req->in_dir, info->name, ".npy");
      if (file_exists(dir_path)) path = dir_path;
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
        report("run", status);
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
    rc = usage_error("run",
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
      report("run", status);
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
  if (compiled)
    status = tsr_compiled_kernel_run(compiled, ptrs, n, &req->options);
  else
    status = tsr_interp_program_run(program, ptrs, n, &stats);
  sigaction(SIGINT, &old_int, NULL);
  double run_seconds = seconds_now() - start;
  double elapsed = run_seconds + prepare_seconds;
  if (req->cache_stats) {
    if (compiled) print_compiled_cache_stats();
    else print_cache_stats();
  }
  if (status) {
    rc = interrupted ? EXIT_INTERRUPTED : EXIT_KERNEL;
    report("run", status);
    goto done;
  }

  /* Outputs: printed, or written all or nothing (tsr_npy_write_all); an
   * --out-dir this run created is removed again when they fail. */
  if (req->num_outs == 0 && !req->out_dir) {
    for (size_t i = 0; i < n; i++)
      if (infos[i].role == TSR_ROLE_OUT) print_array(stdout, infos[i].name, &arrays[i]);
  } else {
    size_t created = 0;
    if (req->out_dir && !make_dirs(req->out_dir, &created)) {
      fprintf(stderr, "tessera run: cannot create the output directory %s: %s\n",
              req->out_dir, strerror(errno));
      remove_made_dirs(req->out_dir, created);
      rc = EXIT_KERNEL;
      goto done;
    }
    const char **paths = xcalloc(n, sizeof *paths);
    char **owned = xcalloc(n, sizeof *owned);
    const tsr_array_t **outs = xcalloc(n, sizeof *outs);
    size_t count = 0;
    for (size_t i = 0; i < n; i++) {
      if (infos[i].role != TSR_ROLE_OUT) continue;
      const char *path = find_binding(req->outs, req->num_outs, infos[i].name);
      if (!path && req->out_dir)
        path = owned[i] = join_path(req->out_dir, infos[i].name, ".npy");
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
      remove_made_dirs(req->out_dir, created);
      rc = EXIT_KERNEL;
      goto done;
    }
  }
  fflush(stdout);
  if (!req->quiet && compiled) {
    fprintf(stderr, "tessera: @%s: cpu code %s in %.3f ms, run in %.3f ms\n", kname,
            origin, prepare_seconds * 1e3, run_seconds * 1e3);
  } else if (!req->quiet) {
    char copied[32], vmem[32];
    tsr_cli_format_bytes(copied, sizeof copied, stats.bytes_copied);
    tsr_cli_format_bytes(vmem, sizeof vmem, stats.vmem_bytes);
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

done:
  if (arrays)
    for (size_t i = 0; i < n; i++) tsr_array_deinitialize(&arrays[i]);
  free(arrays);
  free(ptrs);
  free(infos);
  tsr_interp_program_destroy(program);
  tsr_compiled_kernel_destroy(compiled);
  tsr_ir_module_destroy(module);
  return rc;
}

static int cmd_run(int argc, char **argv) {
  run_request_t req;
  int rc = parse_run_args("run", argc, argv, &req);
  if (rc == EXIT_OK) rc = execute_run(&req);
  if (rc < 0) rc = EXIT_OK; /* --help */
  free_bindings(req.ins, req.num_ins);
  free_bindings(req.outs, req.num_outs);
  return rc;
}

/* ---- tessera hash --------------------------------------------------------- */

static void print_hex128(uint64_t hi, uint64_t lo) {
  printf("%016" PRIx64 "%016" PRIx64, hi, lo);
}

static int cmd_hash(int argc, char **argv) {
  run_request_t req;
  int rc = parse_run_args("hash", argc, argv, &req);
  free_bindings(req.ins, req.num_ins);
  free_bindings(req.outs, req.num_outs);
  if (rc < 0) return EXIT_OK; /* --help */
  if (rc) return rc;
  tsr_ir_module_t *module = NULL;
  tsr_status_t status = load_module(req.file, false, &module);
  if (status) {
    rc = exit_code_for(status);
    report("hash", status);
    return rc;
  }
  size_t count = tsr_ir_module_kernel_count(module);
  tsr_ir_kernel_t *only = NULL;
  if (req.kernel) {
    status = tsr_runtime_select_kernel(module, req.kernel, &only);
    if (status) {
      rc = usage_error("hash", "%s: %s", req.file, tsr_status_message(status));
      tsr_status_free(status);
      tsr_ir_module_destroy(module);
      return rc;
    }
  }
  for (size_t i = 0; i < count && rc == EXIT_OK; i++) {
    tsr_ir_kernel_t *kernel = tsr_ir_module_kernel(module, i);
    if (only && kernel != only) continue;
    tsr_runtime_key_t *key = NULL;
    status = tsr_runtime_key_create(kernel, req.target, &req.options, &key);
    if (status) {
      rc = tsr_status_code(status) == TSR_UNIMPLEMENTED ? EXIT_USAGE
                                                        : exit_code_for(status);
      report("hash", status);
      break;
    }
    const tsr_cache_key_t *k = tsr_runtime_key_get(key);
    print_hex128(k->hi, k->lo);
    printf("  @%s  %s\n", tsr_ir_kernel_name(kernel), req.file);
    if (req.explain) {
      size_t n = tsr_runtime_key_component_count(key);
      for (size_t c = 0; c < n; c++) {
        tsr_runtime_key_component_t comp;
        tsr_runtime_key_component(key, c, &comp);
        printf("  %-8s ", comp.name);
        print_hex128(comp.hash_hi, comp.hash_lo);
        printf("  %6zu bytes  %s\n", comp.size, comp.description);
      }
    }
    tsr_runtime_key_destroy(key);
  }
  tsr_ir_module_destroy(module);
  if (fflush(stdout) != 0 && rc == EXIT_OK) rc = EXIT_KERNEL;
  return rc;
}

/* ---- tessera lower -------------------------------------------------------- */

static int cmd_lower(int argc, char **argv) {
  enum { LOWER_HELP, LOWER_TARGET, LOWER_STAGE, LOWER_KERNEL };
  static const cli_option_t options[] = {
      {"help", 'h', false, LOWER_HELP},
      {"target", 0, true, LOWER_TARGET},
      {"stage", 0, true, LOWER_STAGE},
      {"kernel", 'k', true, LOWER_KERNEL},
      {NULL, 0, false, 0},
  };
  const char *file = NULL, *kernel_name = NULL, *stage = "mlir";
  arg_iter_t it = {"lower", argc, argv, 1, false};
  const char *value;
  int id;
  while ((id = next_arg(&it, options, &value)) != ARG_END) {
    switch (id) {
    case ARG_ERROR:
      return EXIT_USAGE;
    case LOWER_HELP:
      fputs(lower_help, stdout);
      return EXIT_OK;
    case LOWER_TARGET:
      if (strcmp(value, "cpu") != 0)
        return usage_error("lower", "--target expects cpu, got '%s'", value);
      break;
    case LOWER_STAGE:
      if (strcmp(value, "mlir") != 0 && strcmp(value, "llvm") != 0)
        return usage_error("lower", "--stage expects mlir or llvm, got '%s'", value);
      stage = value;
      break;
    case LOWER_KERNEL:
      kernel_name = value[0] == '@' ? value + 1 : value;
      break;
    default:
      if (file)
        return usage_error("lower", "one kernel file expected, got '%s' and '%s'", file,
                           value);
      file = value;
    }
  }
  if (!file) return usage_error("lower", "missing the kernel file (FILE.tsr)");
  tsr_ir_module_t *module = NULL;
  tsr_status_t status = load_module(file, false, &module);
  if (status) {
    int rc = exit_code_for(status);
    report("lower", status);
    return rc;
  }
  tsr_ir_kernel_t *kernel = NULL;
  status = tsr_runtime_select_kernel(module, kernel_name, &kernel);
  if (status) {
    int rc = usage_error("lower", "%s: %s%s", file, tsr_status_message(status),
                         kernel_name ? "" : " (use --kernel NAME)");
    tsr_status_free(status);
    tsr_ir_module_destroy(module);
    return rc;
  }
  char *text = NULL;
  status = tsr_runtime_lower_text(kernel, TSR_TARGET_CPU, stage, &text);
  int rc = EXIT_OK;
  if (status) {
    rc = exit_code_for(status);
    report("lower", status);
  } else {
    fputs(text, stdout);
    tsr_runtime_text_free(text);
    if (fflush(stdout) != 0) rc = EXIT_KERNEL;
  }
  tsr_ir_module_destroy(module);
  return rc;
}

/* ---- tessera check -------------------------------------------------------- */

static int cmd_check(int argc, char **argv) {
  enum { CHECK_HELP, CHECK_QUIET };
  static const cli_option_t options[] = {
      {"help", 'h', false, CHECK_HELP},
      {"quiet", 'q', false, CHECK_QUIET},
      {NULL, 0, false, 0},
  };
  const char **files = xcalloc((size_t)argc, sizeof *files);
  size_t num_files = 0;
  bool quiet = false;
  arg_iter_t it = {"check", argc, argv, 1, false};
  const char *value;
  int id;
  while ((id = next_arg(&it, options, &value)) != ARG_END) {
    if (id == ARG_ERROR) {
      free(files);
      return EXIT_USAGE;
    }
    if (id == CHECK_HELP) {
      fputs(check_help, stdout);
      free(files);
      return EXIT_OK;
    }
    if (id == CHECK_QUIET) quiet = true;
    if (id == ARG_POSITIONAL) files[num_files++] = value;
  }
  if (!num_files) {
    free(files);
    return usage_error("check", "no files given");
  }
  int rc = EXIT_OK;
  for (size_t i = 0; i < num_files; i++) {
    tsr_ir_module_t *module = NULL;
    tsr_status_t status = load_module(files[i], true, &module);
    if (status) {
      int code = exit_code_for(status);
      if (code > rc) rc = code;
      report("check", status);
      continue;
    }
    size_t kernels = tsr_ir_module_kernel_count(module);
    if (!quiet)
      printf("%s: ok (%zu kernel%s)\n",
             strcmp(files[i], "-") == 0 ? "<stdin>" : files[i], kernels,
             kernels == 1 ? "" : "s");
    tsr_ir_module_destroy(module);
  }
  free(files);
  return rc;
}

/* ---- tessera fmt ---------------------------------------------------------- */

static int cmd_fmt(int argc, char **argv) {
  enum { FMT_HELP, FMT_IN_PLACE, FMT_CHECK };
  static const cli_option_t options[] = {
      {"help", 'h', false, FMT_HELP},
      {"in-place", 'i', false, FMT_IN_PLACE},
      {"check", 0, false, FMT_CHECK},
      {NULL, 0, false, 0},
  };
  const char **files = xcalloc((size_t)argc, sizeof *files);
  size_t num_files = 0;
  bool in_place = false, check = false;
  arg_iter_t it = {"fmt", argc, argv, 1, false};
  const char *value;
  int id;
  while ((id = next_arg(&it, options, &value)) != ARG_END) {
    switch (id) {
    case ARG_ERROR:
      free(files);
      return EXIT_USAGE;
    case FMT_HELP:
      fputs(fmt_help, stdout);
      free(files);
      return EXIT_OK;
    case FMT_IN_PLACE:
      in_place = true;
      break;
    case FMT_CHECK:
      check = true;
      break;
    default:
      files[num_files++] = value;
    }
  }
  int rc = EXIT_OK;
  if (!num_files) rc = usage_error("fmt", "no files given");
  else if (in_place && check)
    rc = usage_error("fmt", "--in-place and --check exclude each other");
  for (size_t i = 0; i < num_files && rc == EXIT_OK; i++)
    if (in_place && strcmp(files[i], "-") == 0)
      rc = usage_error("fmt", "--in-place cannot rewrite stdin");
  for (size_t i = 0; i < num_files && rc != EXIT_USAGE; i++) {
    const char *path = files[i];
    bool from_stdin = strcmp(path, "-") == 0;
    size_t size = 0;
    char *text = read_file(path, &size);
    if (!text) {
      fprintf(stderr, "tessera fmt: %s: cannot read: %s\n", path, strerror(errno));
      rc = EXIT_USAGE;
      break;
    }
    tsr_ir_module_t *module = NULL;
    const char *name = from_stdin ? "<stdin>" : path;
    tsr_status_t status =
        tsr_ir_module_parse((tsr_string_view_t){name, strlen(name)},
                            (tsr_string_view_t){text, size}, &module);
    if (status) {
      free(text);
      if (exit_code_for(status) > rc) rc = exit_code_for(status);
      report("fmt", status);
      continue;
    }
    char *canonical = tsr_ir_module_print(module);
    tsr_ir_module_destroy(module);
    if (!canonical) {
      free(text);
      fputs("tessera fmt: out of memory\n", stderr);
      rc = EXIT_KERNEL;
      break;
    }
    size_t clen = strlen(canonical);
    bool same = clen == size && memcmp(canonical, text, size) == 0;
    if (check) {
      if (!same) {
        fprintf(stderr, "%s: not in canonical form (fix with: tessera fmt -i %s)\n",
                name, path);
        rc = EXIT_KERNEL;
      }
    } else if (in_place) {
      status = same ? NULL : tsr_file_write(path, canonical, clen);
      if (status) {
        fprintf(stderr, "tessera fmt: %s\n", tsr_status_message(status));
        tsr_status_free(status);
        rc = EXIT_KERNEL;
      }
    } else {
      fwrite(canonical, 1, clen, stdout);
    }
    tsr_ir_string_free(canonical);
    free(text);
  }
  free(files);
  if (fflush(stdout) != 0) {
    fprintf(stderr, "tessera fmt: cannot write to stdout: %s\n", strerror(errno));
    rc = EXIT_KERNEL;
  }
  return rc;
}

/* ---- tessera ops ----------------------------------------------------------- */

/* Splits a synopsis "SYNTAX  -- meaning" into its two halves. */
static void split_synopsis(const char *synopsis, const char **syntax_end,
                           const char **meaning) {
  const char *sep = strstr(synopsis, "  -- ");
  if (sep) {
    *syntax_end = sep;
    *meaning = sep + 5;
  } else {
    *syntax_end = synopsis + strlen(synopsis);
    *meaning = "";
  }
}

/* Writes n bytes of text for a markdown table cell, '|' escaped. */
static void put_cell(const char *s, size_t n) {
  for (const char *end = s + n; s < end; s++) {
    if (*s == '|') fputc('\\', stdout);
    fputc(*s, stdout);
  }
}

static int cmd_ops(int argc, char **argv) {
  enum { OPS_HELP, OPS_MARKDOWN };
  static const cli_option_t options[] = {
      {"help", 'h', false, OPS_HELP},
      {"markdown", 0, false, OPS_MARKDOWN},
      {NULL, 0, false, 0},
  };
  bool markdown = false;
  arg_iter_t it = {"ops", argc, argv, 1, false};
  const char *value;
  int id;
  while ((id = next_arg(&it, options, &value)) != ARG_END) {
    if (id == ARG_ERROR) return EXIT_USAGE;
    if (id == OPS_HELP) {
      fputs(ops_help, stdout);
      return EXIT_OK;
    }
    if (id == OPS_MARKDOWN) markdown = true;
    if (id == ARG_POSITIONAL)
      return usage_error("ops", "unexpected argument '%s'", value);
  }
  size_t count = tsr_ir_op_count();
  char flags[256];
  if (markdown) {
    puts("| op | syntax | flags | meaning |");
    puts("|---|---|---|---|");
    for (size_t op = 0; op < count; op++) {
      const char *syntax_end, *meaning;
      const char *synopsis = tsr_ir_op_synopsis(op);
      split_synopsis(synopsis, &syntax_end, &meaning);
      fputs("| `", stdout);
      put_cell(tsr_ir_op_mnemonic(op), strlen(tsr_ir_op_mnemonic(op)));
      fputs("` | `", stdout);
      put_cell(synopsis, (size_t)(syntax_end - synopsis));
      fputs("` | ", stdout);
      tsr_ir_op_flag_names(op, flags, sizeof flags);
      put_cell(flags, strlen(flags));
      fputs(" | ", stdout);
      put_cell(meaning, strlen(meaning));
      fputs(" |\n", stdout);
    }
  } else {
    int mw = 2, fw = 5;
    for (size_t op = 0; op < count; op++) {
      int m = (int)strlen(tsr_ir_op_mnemonic(op));
      int f = (int)strlen(tsr_ir_op_flag_names(op, flags, sizeof flags));
      if (m > mw) mw = m;
      if (f > fw) fw = f;
    }
    printf("%-*s  %-*s  %s\n", mw, "op", fw, "flags", "synopsis");
    for (size_t op = 0; op < count; op++)
      printf("%-*s  %-*s  %s\n", mw, tsr_ir_op_mnemonic(op), fw,
             tsr_ir_op_flag_names(op, flags, sizeof flags),
             tsr_ir_op_synopsis(op));
  }
  return fflush(stdout) == 0 ? EXIT_OK : EXIT_KERNEL;
}

/* ---- main -------------------------------------------------------------------- */

typedef struct command {
  const char *name;
  int (*run)(int argc, char **argv);
  const char *help;
} command_t;

static const command_t commands[] = {
    {"run", cmd_run, run_help},
    {"check", cmd_check, check_help},
    {"fmt", cmd_fmt, fmt_help},
    {"ops", cmd_ops, ops_help},
    {"hash", cmd_hash, hash_help},
    {"lower", cmd_lower, lower_help},
    {"cache", tsr_cli_cache, tsr_cli_cache_help},
};

static const command_t *find_command(const char *name) {
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    if (strcmp(commands[i].name, name) == 0) return &commands[i];
  return NULL;
}

/* "run, check, ..., help" from the command table. */
static void put_command_names(FILE *f) {
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    fprintf(f, "%s, ", commands[i].name);
  fputs("help", f);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fputs("Usage: tessera COMMAND [OPTIONS] [ARGS]  (", stderr);
    put_command_names(stderr);
    fputs(")\nTry 'tessera --help'.\n", stderr);
    return EXIT_USAGE;
  }
  const char *cmd = argv[1];
  if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
    printf("tessera %s\n", TSR_VERSION_STRING);
    return EXIT_OK;
  }
  if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 ||
      strcmp(cmd, "help") == 0) {
    if (strcmp(cmd, "help") == 0 && argc > 2) {
      const command_t *c = find_command(argv[2]);
      if (!c) {
        fprintf(stderr, "tessera help: unknown command '%s' (commands: ", argv[2]);
        put_command_names(stderr);
        fputs(")\n", stderr);
        return EXIT_USAGE;
      }
      fputs(c->help, stdout);
      return EXIT_OK;
    }
    fputs(main_help, stdout);
    return EXIT_OK;
  }
  const command_t *c = find_command(cmd);
  if (!c) {
    fprintf(stderr, "tessera: unknown command '%s' (commands: ", cmd);
    put_command_names(stderr);
    fputs(")\nTry 'tessera --help'.\n", stderr);
    return EXIT_USAGE;
  }
  return c->run(argc - 1, argv + 1);
}
