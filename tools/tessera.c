/* The tessera command-line tool: run kernels in the interpreter or compiled
 * for the CPU on .npy or random data, check and format .tsr files, print
 * their lowering to MLIR, list the ops of the IR. This file is the
 * dispatcher: the global help and version, and the command table; each
 * command lives in its tools/cmd_*.c. Built on the public API alone
 * (tessera/tessera.h) and libc. */
#include <stdio.h>
#include <string.h>

#include "tools/cli.h"

/* The global help, around the command list, which is printed from the
 * command table below so that every command is listed. */
static const char main_help_top[] =
    "tessera " TSR_VERSION_STRING
    ": TPU kernels in the Pallas model, interpreted and checked on a CPU\n"
    "\n"
    "Usage: tessera COMMAND [OPTIONS] [ARGS]\n"
    "\n"
    "Commands:\n";

static const char main_help_bottom[] =
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
    "  tessera sort keys.npy -o sorted.npy\n"
    "Reference: docs/cli.md; the kernel language: docs/ir.md.\n";

typedef struct command {
  const char *name;
  int (*run)(int argc, char **argv);
  const char *help;
  const char *summary; /* its line (or lines) in tessera --help */
} command_t;

static const command_t commands[] = {
    {"run", cmd_run, cmd_run_help,
     "run a kernel in the interpreter (or compiled: --backend cpu)\n"
     "          on .npy or random inputs"},
    {"check", cmd_check, cmd_check_help, "parse and verify .tsr files, printing every diagnostic"},
    {"fmt", cmd_fmt, cmd_fmt_help,
     "print .tsr files in canonical form, or rewrite them in place"},
    {"ops", cmd_ops, cmd_ops_help, "list the ops of the kernel IR (--markdown for docs/ir.md)"},
    {"hash", cmd_hash, cmd_hash_help, "print the cache key of each kernel (--explain: its parts)"},
    {"lower", cmd_lower, cmd_lower_help,
     "print a kernel lowered to MLIR for the CPU (--stage mlir|llvm)"},
    {"cache", cmd_cache, cmd_cache_help, "the disk cache: stats, clear, verify"},
    {"reduce", cmd_reduce, cmd_reduce_help,
     "reduce a .npy array over axes (sum, max, argmax, mean, ...)"},
    {"cumsum", cmd_cumsum, cmd_cumsum_help,
     "cumulative sum (or prod, max, min) of a .npy array along an axis"},
    {"sort", cmd_sort, cmd_sort_help,
     "sort .npy arrays along an axis (argsort, several keys, stable)"},
    {"topk", cmd_topk, cmd_topk_help,
     "the k largest (or smallest) elements of a .npy array and where"},
};

static void put_main_help(FILE *f) {
  fputs(main_help_top, f);
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    fprintf(f, "  %-7s %s\n", commands[i].name, commands[i].summary);
  fputs(main_help_bottom, f);
}

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
    put_main_help(stdout);
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

