/* tessera lower: prints a kernel lowered to MLIR for the CPU, as generated
 * (--stage mlir) or after the pass pipeline (--stage llvm), or as a Mosaic
 * TPU module (--target tpu, docs/tpu.md). */
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
    "  --target cpu|tpu     the target (default cpu)\n"
    "  --chip CHIP          tpu: the chip, one of v2 v3 v4 v5e v5p v6e v7x\n"
    "                       tpu7x (default v5e)\n"
    "  --stage mlir|llvm    cpu: mlir (default): the generated module; llvm:\n"
    "                       after the pass pipeline to the LLVM dialect\n"
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
    "With --target tpu it prints the kernel as a Mosaic TPU MLIR module laid\n"
    "out as Pallas's TPU lowering lays it out (docs/tpu.md): text made by\n"
    "libtessera itself, no LLVM/MLIR needed. The kernel is verified and\n"
    "checked against Pallas's TPU layout rules first (as 'tessera check\n"
    "--target tpu'); an op with no TPU form yet is an error naming it.\n"
    "\n"
    "Examples:\n"
    "  tessera lower kernels/examples/add.tsr\n"
    "  tessera lower kernels/examples/matmul.tsr --stage llvm\n"
    "  tessera lower --target tpu --chip v6e kernels/examples/matmul.tsr\n";

int cmd_lower(int argc, char **argv) {
  enum { LOWER_HELP, LOWER_TARGET, LOWER_STAGE, LOWER_KERNEL, LOWER_CHIP };
  static const cli_option_t options[] = {
      {"help", 'h', false, LOWER_HELP},
      {"target", 0, true, LOWER_TARGET},
      {"chip", 0, true, LOWER_CHIP},
      {"stage", 0, true, LOWER_STAGE},
      {"kernel", 'k', true, LOWER_KERNEL},
      {NULL, 0, false, 0},
  };
  const char *file = NULL, *kernel_name = NULL, *stage = "mlir", *chip = NULL;
  bool tpu = false, stage_given = false;
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
      if (strcmp(value, "cpu") != 0 && strcmp(value, "tpu") != 0)
        return cli_usage_error("lower", "--target expects cpu or tpu, got '%s'", value);
      tpu = strcmp(value, "tpu") == 0;
      break;
    case LOWER_CHIP:
      chip = value;
      break;
    case LOWER_STAGE:
      if (strcmp(value, "mlir") != 0 && strcmp(value, "llvm") != 0)
        return cli_usage_error("lower", "--stage expects mlir or llvm, got '%s'", value);
      stage = value;
      stage_given = true;
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
  if (tpu && stage_given)
    return cli_usage_error("lower", "--stage applies to --target cpu only");
  if (!tpu && chip) return cli_usage_error("lower", "--chip applies to --target tpu only");
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
  if (tpu) {
    tsr_context_t *context = NULL;
    status = tsr_context_create_from_environment(&context);
    if (!status) status = tsr_tpu_emit(context, kernel, chip, &text);
    tsr_context_destroy(context);
  } else {
    status = tsr_runtime_lower_text(kernel, TSR_BACKEND_CPU, stage, &text);
  }
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
