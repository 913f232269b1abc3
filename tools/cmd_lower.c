/* tessera lower: prints a kernel lowered to MLIR for the CPU, as generated
 * (--stage mlir) or after the pass pipeline (--stage llvm). */
#include <string.h>

#include "tools/cli.h"

const char cmd_lower_help[] =
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

int cmd_lower(int argc, char **argv) {
  enum { LOWER_HELP, LOWER_TARGET, LOWER_STAGE, LOWER_KERNEL };
  static const cli_option_t options[] = {
      {"help", 'h', false, LOWER_HELP},
      {"target", 0, true, LOWER_TARGET},
      {"stage", 0, true, LOWER_STAGE},
      {"kernel", 'k', true, LOWER_KERNEL},
      {NULL, 0, false, 0},
  };
  const char *file = NULL, *kernel_name = NULL, *stage = "mlir";
  cli_arg_iter_t it = {"lower", argc, argv, 1, false};
  const char *value;
  int id;
  while ((id = cli_next_arg(&it, options, &value)) != CLI_ARG_END) {
    switch (id) {
    case CLI_ARG_ERROR:
      return EXIT_USAGE;
    case LOWER_HELP:
      fputs(cmd_lower_help, stdout);
      return EXIT_OK;
    case LOWER_TARGET:
      if (strcmp(value, "cpu") != 0)
        return cli_usage_error("lower", "--target expects cpu, got '%s'", value);
      break;
    case LOWER_STAGE:
      if (strcmp(value, "mlir") != 0 && strcmp(value, "llvm") != 0)
        return cli_usage_error("lower", "--stage expects mlir or llvm, got '%s'", value);
      stage = value;
      break;
    case LOWER_KERNEL:
      kernel_name = value[0] == '@' ? value + 1 : value;
      break;
    default:
      if (file)
        return cli_usage_error("lower", "one kernel file expected, got '%s' and '%s'", file,
                               value);
      file = value;
    }
  }
  if (!file) return cli_usage_error("lower", "missing the kernel file (FILE.tsr)");
  tsr_ir_module_t *module = NULL;
  tsr_status_t status = cli_load_module(file, false, &module);
  if (status) {
    int rc = cli_exit_code(status);
    cli_report("lower", status);
    return rc;
  }
  tsr_ir_kernel_t *kernel = NULL;
  status = tsr_runtime_select_kernel(module, kernel_name, &kernel);
  if (status) {
    int rc = cli_usage_error("lower", "%s: %s%s", file, tsr_status_message(status),
                             kernel_name ? "" : " (use --kernel NAME)");
    tsr_status_free(status);
    tsr_ir_module_destroy(module);
    return rc;
  }
  char *text = NULL;
  status = tsr_runtime_lower_text(kernel, TSR_TARGET_CPU, stage, &text);
  int rc = EXIT_OK;
  if (status) {
    rc = cli_exit_code(status);
    cli_report("lower", status);
  } else {
    fputs(text, stdout);
    tsr_runtime_text_free(text);
    if (fflush(stdout) != 0) rc = EXIT_KERNEL;
  }
  tsr_ir_module_destroy(module);
  return rc;
}
