/* tessera check: parses and verifies .tsr files, printing every
 * diagnostic. */
#include <stdlib.h>
#include <string.h>

#include "tools/cli.h"

const char cmd_check_help[] =
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

int cmd_check(int argc, char **argv) {
  enum { CHECK_HELP, CHECK_QUIET };
  static const cli_option_t options[] = {
      {"help", 'h', false, CHECK_HELP},
      {"quiet", 'q', false, CHECK_QUIET},
      {NULL, 0, false, 0},
  };
  const char **files = cli_calloc((size_t)argc, sizeof *files);
  size_t num_files = 0;
  bool quiet = false;
  cli_arg_iter_t it = {"check", argc, argv, 1, false};
  const char *value;
  int id;
  while ((id = cli_next_arg(&it, options, &value)) != CLI_ARG_END) {
    if (id == CLI_ARG_ERROR) {
      free(files);
      return EXIT_USAGE;
    }
    if (id == CHECK_HELP) {
      fputs(cmd_check_help, stdout);
      free(files);
      return EXIT_OK;
    }
    if (id == CHECK_QUIET) quiet = true;
    if (id == CLI_ARG_POSITIONAL) files[num_files++] = value;
  }
  if (!num_files) {
    free(files);
    return cli_usage_error("check", "no files given");
  }
  int rc = EXIT_OK;
  for (size_t i = 0; i < num_files; i++) {
    tsr_ir_module_t *module = NULL;
    tsr_status_t status = cli_load_module(files[i], true, &module);
    if (status) {
      int code = cli_exit_code(status);
      if (code > rc) rc = code;
      cli_report("check", status);
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
