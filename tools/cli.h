/* What the files of the tessera CLI share: the commands for tools/tessera.c's
 * command table (one tools/cmd_*.c each), and the helpers they use
 * (tools/cli_util.c, cli_array.c, run_options.c). Built on the public API. */
#ifndef TESSERA_TOOLS_CLI_H
#define TESSERA_TOOLS_CLI_H

/* Layering: tessera.c (main, the command table) calls the commands; a
 * command (cmd_*.c) calls the helpers below and no other command; the
 * helpers (cli_util.c, cli_array.c, run_options.c) call no command. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tessera/tessera.h"

/* Exit statuses (docs/cli.md): 1 is a kernel error for the commands on
 * kernels, a failed operation for 'cache'. */
enum { EXIT_OK = 0, EXIT_KERNEL = 1, EXIT_FAILED = 1, EXIT_USAGE = 2, EXIT_INTERRUPTED = 130 };

/* ---- Commands ----------------------------------------------------------------
 * Each takes argv starting at its own name ("run") and returns the exit
 * status; each has a help text for --help and 'tessera help COMMAND'. */

int cmd_run(int argc, char **argv);     /* cmd_run.c */
int cmd_hash(int argc, char **argv);    /* cmd_hash.c */
int cmd_check(int argc, char **argv);   /* cmd_check.c */
int cmd_fmt(int argc, char **argv);     /* cmd_fmt.c */
int cmd_ops(int argc, char **argv);     /* cmd_ops.c */
int cmd_lower(int argc, char **argv);   /* cmd_lower.c */
int cmd_cache(int argc, char **argv);   /* cmd_cache.c: docs/cache.md, "Command line" */
int cmd_reduce(int argc, char **argv);  /* cmd_reduce.c: the library's reductions */
int cmd_cumsum(int argc, char **argv);  /* cmd_reduce.c: the library's scans */
int cmd_sort(int argc, char **argv);    /* cmd_sort.c: the library's sort */
int cmd_topk(int argc, char **argv);    /* cmd_sort.c: the library's top-k */
extern const char cmd_run_help[], cmd_hash_help[], cmd_check_help[], cmd_fmt_help[],
    cmd_ops_help[], cmd_lower_help[], cmd_cache_help[], cmd_reduce_help[], cmd_cumsum_help[],
    cmd_sort_help[], cmd_topk_help[];

/* ---- Helpers (cli_util.c) ------------------------------------------------------ */

/* malloc, calloc and strndup that end the process when memory runs out (the
 * tool's allocations are small and short-lived). */
void *cli_malloc(size_t n);
void *cli_calloc(size_t count, size_t n);
char *cli_strndup(const char *s, size_t n);

/* Prints "tessera CMD: MESSAGE" and "Try 'tessera CMD --help'." on stderr;
 * returns EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) TSR_PRINTF(2, 3);
/* Exit code for a status: I/O and lookup problems are the caller's (usage),
 * everything else is a kernel error. */
int cli_exit_code(tsr_status_t status);
/* Prints a status on stderr (located diagnostics as they are, others with
 * a "tessera CMD: <code>:" prefix) and frees it. */
void cli_report(const char *cmd, tsr_status_t status);
/* Parses a non-negative decimal (or 0x hex) integer. */
bool cli_parse_u64(const char *s, uint64_t *out);

/* Reads a whole file ('-' for stdin). NULL with errno set on failure. */
char *cli_read_file(const char *path, size_t *out_size);
/* Parses (and optionally verifies) a .tsr file; '-' reads stdin, named
 * "<stdin>" in diagnostics. */
tsr_status_t cli_load_module(const char *path, bool verify, tsr_ir_module_t **out_module);
bool cli_is_dir(const char *path);
bool cli_file_exists(const char *path);
/* mkdir -p; *out_created: the length of the shortest prefix of `path` this
 * call created (0: none). cli_remove_made_dirs undoes it (empty dirs only). */
bool cli_make_dirs(const char *path, size_t *out_created);
void cli_remove_made_dirs(const char *path, size_t created);
/* "DIR/NAMEEXT" (one '/' between), allocated with cli_malloc. */
char *cli_join_path(const char *dir, const char *name, const char *ext);

/* Option parsing: "--name value", "--name=value", "-x value", "-xvalue",
 * "--" ends the options; options and positional arguments may mix. */
typedef struct cli_option {
  const char *name; /* long name without "--"; NULL ends a table */
  char short_name;  /* 0 if none */
  bool takes_value;
  int id;
} cli_option_t;

enum { CLI_ARG_END = -1, CLI_ARG_POSITIONAL = -2, CLI_ARG_ERROR = -3 };

typedef struct cli_arg_iter {
  const char *cmd; /* for usage errors */
  int argc;
  char **argv;
  int next;
  bool positional_only;
} cli_arg_iter_t;

/* The next argument: an option's id (*out_value: its value, if it takes
 * one), CLI_ARG_POSITIONAL (*out_value: the argument), CLI_ARG_END, or
 * CLI_ARG_ERROR after printing a usage error. */
int cli_next_arg(cli_arg_iter_t *it, const cli_option_t *options, const char **out_value);

/* ---- Arrays (cli_array.c) ---------------------------------------------------- */

/* "f32[4, 8]" (or "f32" for rank 0). */
void cli_format_type(char *buf, size_t size, tsr_dtype_t dtype, uint32_t rank,
                     const int64_t *dims);
/* "(4, 8)" as numpy writes shapes. */
void cli_format_shape(char *buf, size_t size, uint32_t rank, const int64_t *dims);
/* "%NAME: TYPE", the elements as numpy shows them, then statistics. */
void cli_print_array(FILE *out, const char *name, const tsr_array_t *a);

/* ---- The options of run and hash (run_options.c) ------------------------------ */

typedef struct cli_binding {
  char *owned;      /* the allocation holding the name */
  const char *name; /* operand name without '%', inside `owned` */
  const char *path; /* borrowed from argv */
} cli_binding_t;

typedef struct cli_run_request {
  const char *file;
  const char *kernel;
  cli_binding_t *ins, *outs;
  size_t num_ins, num_outs;
  const char *in_dir, *out_dir;
  bool random_inputs;
  uint64_t random_seed;
  bool quiet;
  bool force;                 /* run: --trace may overwrite an existing file */
  double progress_after;      /* run: seconds before the progress line shows */
  char *trace_owned;          /* run: --trace DIR's file name inside DIR */
  bool cache_stats; /* run: print the cache counters */
  bool explain;     /* hash: each component's hash */
  bool tpu_target;  /* run --target tpu: what the chip (options.run.chip)
                       refuses is an error before the run */
  bool tpu_compile_check; /* run --tpu-compile-check: libtpu compiles it too */
  /* What the executable is made with (run), or whose key is printed
   * (hash): the backend from --backend (run) or --target (hash), the rest
   * from the run options. */
  tsr_executable_options_t options;
  int64_t *parallel_order; /* --parallel-order's entries (options.run points here) */
} cli_run_request_t;

/* Parses the arguments of `cmd` ("run" or "hash", which share one option
 * table). Returns EXIT_OK, EXIT_USAGE (after printing why) or -1 after
 * printing the help. *req is set up in every case: free it with
 * cli_run_request_deinitialize. */
int cli_parse_run_args(const char *cmd, int argc, char **argv, cli_run_request_t *req);
void cli_run_request_deinitialize(cli_run_request_t *req);

#endif /* TESSERA_TOOLS_CLI_H */
