/* tessera fmt: prints .tsr files in canonical form, rewrites them in place
 * (-i) or lists those that are not canonical (--check). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cli.h"

const char cmd_fmt_help[] =
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

int cmd_fmt(int argc, char **argv) {
  enum { FMT_HELP, FMT_IN_PLACE, FMT_CHECK };
  static const cli_option_t options[] = {
      {"help", 'h', false, FMT_HELP},
      {"in-place", 'i', false, FMT_IN_PLACE},
      {"check", 0, false, FMT_CHECK},
      {NULL, 0, false, 0},
  };
  const char **files = cli_calloc((size_t)argc, sizeof *files);
  size_t num_files = 0;
  bool in_place = false, check = false;
  cli_arg_iter_t it = {"fmt", argc, argv, 1, false};
  const char *value;
  int id;
  while ((id = cli_next_arg(&it, options, &value)) != CLI_ARG_END) {
    switch (id) {
    case CLI_ARG_ERROR:
      free(files);
      return EXIT_USAGE;
    case FMT_HELP:
      fputs(cmd_fmt_help, stdout);
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
  if (!num_files) rc = cli_usage_error("fmt", "no files given");
  else if (in_place && check)
    rc = cli_usage_error("fmt", "--in-place and --check exclude each other");
  for (size_t i = 0; i < num_files && rc == EXIT_OK; i++)
    if (in_place && strcmp(files[i], "-") == 0)
      rc = cli_usage_error("fmt", "--in-place cannot rewrite stdin");
  for (size_t i = 0; i < num_files && rc != EXIT_USAGE; i++) {
    const char *path = files[i];
    bool from_stdin = strcmp(path, "-") == 0;
    size_t size = 0;
    char *text = cli_read_file(path, &size);
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
      if (cli_exit_code(status) > rc) rc = cli_exit_code(status);
      cli_report("fmt", status);
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
