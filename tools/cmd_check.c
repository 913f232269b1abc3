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
    "without errors it prints 'FILE: ok (N kernels)' on stdout. The\n"
    "warnings a kernel earns before any run (an output written along a\n"
    "parallel grid dim, docs/semantics.md) are printed as FILE:LINE:COL:\n"
    "warning: MESSAGE; they do not change the exit status.\n"
    "\n"
    "Options:\n"
    "  --target tpu   also check the rules Pallas's TPU lowering enforces on\n"
    "                 block shapes (docs/tpu.md, \"Layout rules\"): the last\n"
    "                 two block dims divisible by 8 and 128 or equal to the\n"
    "                 array's, 1-D blocks, no windowing without a grid;\n"
    "                 and that every op has a Mosaic form (what `lower\n"
    "                 --target tpu` would refuse, located)\n"
    "  --chip CHIP    with --target tpu: v2 v3 v4 v5e v5p v6e v7x tpu7x\n"
    "                 (default v5e)\n"
    "  -q, --quiet    print only diagnostics\n"
    "  -h, --help     show this help\n"
    "\n"
    "Exit status: 0 all files are valid, 1 some file has errors, 2 usage\n"
    "errors (including files that cannot be read).\n"
    "\n"
    "Example:\n"
    "  tessera check kernels/examples/*.tsr\n"
    "  tessera check --target tpu --chip v6e kernels/examples/*.tsr\n";

int cmd_check(int argc, char **argv) {
  enum { CHECK_HELP, CHECK_QUIET, CHECK_TARGET, CHECK_CHIP };
  static const cli_option_t options[] = {
      {"help", 'h', false, CHECK_HELP},
      {"quiet", 'q', false, CHECK_QUIET},
      {"target", 0, true, CHECK_TARGET},
      {"chip", 0, true, CHECK_CHIP},
      {NULL, 0, false, 0},
  };
  const char **files = cli_calloc((size_t)argc, sizeof *files);
  size_t num_files = 0;
  bool quiet = false, tpu = false;
  const char *chip = NULL;
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
    if (id == CHECK_TARGET) {
      if (strcmp(value, "tpu") != 0) {
        free(files);
        return cli_usage_error("check", "--target expects tpu, got '%s'", value);
      }
      tpu = true;
    }
    if (id == CHECK_CHIP) chip = value;
    if (id == CLI_ARG_POSITIONAL) files[num_files++] = value;
  }
  if (!num_files) {
    free(files);
    return cli_usage_error("check", "no files given");
  }
  if (chip && !tpu) {
    free(files);
    return cli_usage_error("check", "--chip applies to --target tpu only");
  }
  if (tpu) { /* an unknown chip is a usage error, before any file */
    tsr_status_t s = tsr_tpu_check(NULL, chip);
    if (s) {
      int rc = cli_usage_error("check", "%s", tsr_status_message(s));
      tsr_status_free(s);
      free(files);
      return rc;
    }
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
    bool bad = false;
    for (size_t k = 0; tpu && k < kernels; k++) {
      status = tsr_tpu_check(tsr_ir_module_kernel(module, k), chip);
      if (status) {
        bad = true;
        int code = cli_exit_code(status);
        if (code > rc) rc = code;
        cli_report("check", status);
      }
    }
    /* warnings before a run: printed, the exit status unchanged */
    for (size_t k = 0; k < kernels; k++) {
      tsr_diagnostic_list_t *warnings = NULL;
      status = tsr_kernel_static_warnings(tsr_ir_module_kernel(module, k), &warnings);
      if (status) {
        bad = true;
        int code = cli_exit_code(status);
        if (code > rc) rc = code;
        cli_report("check", status);
        continue;
      }
      for (size_t w = 0; w < tsr_diagnostic_list_count(warnings); w++)
        fprintf(stderr, "%s\n", tsr_diagnostic_list_get(warnings, w)->text.data);
      tsr_diagnostic_list_destroy(warnings);
    }
    if (!quiet && !bad)
      printf("%s: ok (%zu kernel%s)\n",
             strcmp(files[i], "-") == 0 ? "<stdin>" : files[i], kernels,
             kernels == 1 ? "" : "s");
    tsr_ir_module_destroy(module);
  }
  free(files);
  return rc;
}
