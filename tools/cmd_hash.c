/* tessera hash: prints the cache key of each kernel of a file, and with
 * --explain its components (the run options that change it are parsed in
 * tools/run_options.c). */
#include <inttypes.h>

#include "tools/cli.h"

const char cmd_hash_help[] =
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
    "'tessera run': --uninit --shuffle-parallel --parallel-order --chip --check\n"
    "--no-check\n"
    "--max-errors --devices --cores --dma-mode --schedule-seed --detect-races\n"
    "--oob-reads --buffer-bounds --out-blocks\n"
    "\n"
    "Output: KEY  @KERNEL  FILE, one line per kernel.\n"
    "Exit status: 0 success; 1 parse errors; 2 usage errors.\n"
    "\n"
    "Example:\n"
    "  tessera hash kernels/examples/add.tsr --explain\n";

static void print_hex128(uint64_t hi, uint64_t lo) {
  printf("%016" PRIx64 "%016" PRIx64, hi, lo);
}

int cmd_hash(int argc, char **argv) {
  cli_run_request_t req;
  int rc = cli_parse_run_args("hash", argc, argv, &req);
  cli_run_request_deinitialize(&req);
  if (rc < 0) return EXIT_OK; /* --help */
  if (rc) return rc;
  tsr_ir_module_t *module = NULL;
  tsr_status_t status = cli_load_module(req.file, false, &module);
  if (status) {
    rc = cli_exit_code(status);
    cli_report("hash", status);
    return rc;
  }
  size_t count = tsr_ir_module_kernel_count(module);
  tsr_ir_kernel_t *only = NULL;
  if (req.kernel) {
    status = tsr_runtime_select_kernel(module, req.kernel, &only);
    if (status) {
      rc = cli_usage_error("hash", "%s: %s", req.file, tsr_status_message(status));
      tsr_status_free(status);
      tsr_ir_module_destroy(module);
      return rc;
    }
  }
  for (size_t i = 0; i < count && rc == EXIT_OK; i++) {
    tsr_ir_kernel_t *kernel = tsr_ir_module_kernel(module, i);
    if (only && kernel != only) continue;
    tsr_runtime_key_t *key = NULL;
    status = tsr_runtime_key_create(kernel, &req.options, &key);
    if (status) {
      rc = tsr_status_code(status) == TSR_UNIMPLEMENTED ? EXIT_USAGE
                                                        : cli_exit_code(status);
      cli_report("hash", status);
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
