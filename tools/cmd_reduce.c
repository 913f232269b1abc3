/* tessera reduce and tessera cumsum: the kernel library's reductions and
 * cumulative ops (tessera/kernels.h) on a .npy array, written as .npy or
 * printed. Each generates the kernel for the array's shape and dtype and
 * runs it in the interpreter or compiled (--backend). */
#include <stdlib.h>
#include <string.h>

#include "tools/cli.h"

const char cmd_reduce_help[] =
    "Usage: tessera reduce IN.npy [-o OUT.npy] [--op OP] [--axes A,B,..] [--keepdims]\n"
    "                      [--backend interp|cpu] [--vmem-budget BYTES]\n"
    "\n"
    "Reduces IN.npy over the given axes with the kernel library's reduction\n"
    "(docs/kernels.md), as numpy/jax.numpy functions of the same name.\n"
    "\n"
    "  --op OP              sum (default), prod, max, min, argmax, argmin,\n"
    "                       mean, var (population, ddof 0), logsumexp\n"
    "  --axes A,B,..        axes to reduce, negative counting from the end\n"
    "                       (default: all). argmax/argmin take one axis; without\n"
    "                       --axes they work on the flattened array, as numpy\n"
    "  --keepdims           keep reduced axes as dimensions of size 1\n"
    "  -o, --output FILE    write the result as .npy (default: print it)\n"
    "  --backend B          interp (default): the checking interpreter; cpu:\n"
    "                       compiled to native code (docs/lowering.md)\n"
    "  --vmem-budget BYTES  VMEM the kernel's blocks may use (default 16 MiB);\n"
    "                       smaller budgets give smaller blocks, more grid steps\n"
    "  --print-kernel       print the generated kernel (.tsr) instead of running\n"
    "                       it (for tessera check/lower --target tpu, run, ...)\n"
    "\n"
    "The result has IN's dtype (argmax/argmin: int32); integer sums and products\n"
    "wrap in that dtype, bf16/f16 accumulate in f32. mean, var and logsumexp\n"
    "take floats; sum and prod do not take bool. bf16 arrays are .npy '<V2'.\n"
    "\n"
    "Examples:\n"
    "  tessera reduce x.npy -o s.npy --op sum --axes 0,1\n"
    "  tessera reduce x.npy --op argmax --axes -1 --backend cpu\n";

const char cmd_cumsum_help[] =
    "Usage: tessera cumsum IN.npy [-o OUT.npy] [--axis N] [--reverse]\n"
    "                      [--op sum|prod|max|min] [--backend interp|cpu]\n"
    "                      [--vmem-budget BYTES]\n"
    "\n"
    "The inclusive cumulative sum (or product, max, min: --op) of IN.npy along\n"
    "an axis, with the kernel library's log-step scan (docs/kernels.md), as\n"
    "jax.lax.cumsum/cumprod/cummax/cummin. Same shape and dtype as IN.\n"
    "\n"
    "  --axis N             the axis, negative counting from the end (default -1)\n"
    "  --reverse            scan from the end\n"
    "  --op OP              sum (default), prod, max, min\n"
    "  -o, --output FILE    write the result as .npy (default: print it)\n"
    "  --backend B          interp (default) or cpu\n"
    "  --vmem-budget BYTES  VMEM the kernel's blocks may use (default 16 MiB)\n"
    "  --print-kernel       print the generated kernel (.tsr) instead of running it\n"
    "\n"
    "Integers wrap in IN's dtype; bf16/f16 sums and products accumulate in f32.\n"
    "\n"
    "Examples:\n"
    "  tessera cumsum x.npy -o c.npy --axis 0\n"
    "  tessera cumsum x.npy --op max --reverse\n";

enum { OPT_OUTPUT = 1, OPT_OP, OPT_AXES, OPT_AXIS, OPT_KEEPDIMS, OPT_REVERSE, OPT_BACKEND,
       OPT_BUDGET, OPT_PRINT_KERNEL, OPT_HELP };

typedef struct request {
  const char *cmd;
  const char *input, *output;
  tsr_kernels_op_t op;
  const char *axes; /* reduce: the --axes text; cumsum: --axis */
  bool keepdims, reverse;
  bool print_kernel;
  tsr_backend_t backend;
  int64_t budget;
} request_t;

/* Parses "A,B,.." into a mask of axes of a rank-`rank` array. */
static bool parse_axes(const char *cmd, const char *text, uint32_t rank, uint32_t *out_mask,
                       uint32_t *out_count) {
  uint32_t mask = 0, count = 0;
  const char *s = text;
  while (*s) {
    char *end = NULL;
    long a = strtol(s, &end, 10);
    if (end == s || (*end && *end != ',')) {
      cli_usage_error(cmd, "--axes %s: expected integers separated by commas", text);
      return false;
    }
    if (a < -(long)rank || a >= (long)rank) {
      cli_usage_error(cmd, "--axes %s: axis %ld is out of range for an array of rank %u", text,
                      a, rank);
      return false;
    }
    uint32_t axis = (uint32_t)(a < 0 ? a + (long)rank : a);
    if (mask & (1u << axis)) {
      cli_usage_error(cmd, "--axes %s: axis %u is repeated", text, axis);
      return false;
    }
    mask |= 1u << axis;
    count++;
    s = *end ? end + 1 : end;
  }
  if (!count) {
    cli_usage_error(cmd, "--axes: no axis given");
    return false;
  }
  *out_mask = mask;
  *out_count = count;
  return true;
}

static int parse_args(int argc, char **argv, bool cumsum, request_t *req) {
  static const cli_option_t options[] = {
      {"output", 'o', true, OPT_OUTPUT},   {"op", 0, true, OPT_OP},
      {"axes", 0, true, OPT_AXES},         {"axis", 0, true, OPT_AXIS},
      {"keepdims", 0, false, OPT_KEEPDIMS}, {"reverse", 0, false, OPT_REVERSE},
      {"backend", 0, true, OPT_BACKEND},   {"vmem-budget", 0, true, OPT_BUDGET},
      {"print-kernel", 0, false, OPT_PRINT_KERNEL},
      {"help", 'h', false, OPT_HELP},      {NULL, 0, false, 0}};
  cli_arg_iter_t it = {req->cmd, argc, argv, 1, false};
  const char *value = NULL;
  for (;;) {
    int id = cli_next_arg(&it, options, &value);
    if (id == CLI_ARG_END) break;
    if (id == CLI_ARG_ERROR) return EXIT_USAGE;
    switch (id) {
    case CLI_ARG_POSITIONAL:
      if (req->input) return cli_usage_error(req->cmd, "one input file only (got %s)", value);
      req->input = value;
      break;
    case OPT_OUTPUT: req->output = value; break;
    case OPT_OP:
      if (!tsr_kernels_op_from_name(value, &req->op))
        return cli_usage_error(req->cmd, "--op %s: unknown op (%s)", value,
                               cumsum ? "sum, prod, max, min"
                                      : "sum, prod, max, min, argmax, argmin, mean, var, "
                                        "logsumexp");
      if (cumsum && req->op > TSR_KERNELS_MIN)
        return cli_usage_error(req->cmd, "--op %s: cumulative ops are sum, prod, max, min",
                               value);
      break;
    case OPT_AXES:
      if (cumsum) return cli_usage_error(req->cmd, "--axes: use --axis N (one axis)");
      req->axes = value;
      break;
    case OPT_AXIS:
      if (!cumsum) return cli_usage_error(req->cmd, "--axis: use --axes A,B,..");
      req->axes = value;
      break;
    case OPT_KEEPDIMS:
      if (cumsum) return cli_usage_error(req->cmd, "--keepdims: only for 'tessera reduce'");
      req->keepdims = true;
      break;
    case OPT_REVERSE:
      if (!cumsum) return cli_usage_error(req->cmd, "--reverse: only for 'tessera cumsum'");
      req->reverse = true;
      break;
    case OPT_BACKEND:
      if (strcmp(value, "interp") == 0) req->backend = TSR_BACKEND_INTERP;
      else if (strcmp(value, "cpu") == 0) req->backend = TSR_BACKEND_CPU;
      else return cli_usage_error(req->cmd, "--backend %s: expected interp or cpu", value);
      break;
    case OPT_BUDGET: {
      uint64_t v = 0;
      if (!cli_parse_u64(value, &v) || v > INT64_MAX)
        return cli_usage_error(req->cmd, "--vmem-budget %s: expected a byte count", value);
      req->budget = (int64_t)v;
      break;
    }
    case OPT_PRINT_KERNEL: req->print_kernel = true; break;
    case OPT_HELP:
      fputs(cumsum ? cmd_cumsum_help : cmd_reduce_help, stdout);
      return -1;
    default: return cli_usage_error(req->cmd, "internal: option %d", id);
    }
  }
  if (!req->input) return cli_usage_error(req->cmd, "no input file (IN.npy)");
  return EXIT_OK;
}

/* Reads IN.npy: whatever dtype it holds, '<V2' as bf16. */
static tsr_status_t read_input(const char *path, tsr_array_t *out) {
  tsr_status_t s = tsr_npy_read(path, -1, out);
  if (!s) return NULL;
  tsr_status_t bf16 = tsr_npy_read(path, TSR_DTYPE_BF16, out);
  if (!bf16) {
    tsr_status_free(s);
    return NULL;
  }
  tsr_status_free(bf16);
  return s;
}

/* Generates, prepares and runs `module`'s kernel on `in`, into `out`
 * (allocated here with the kernel's output shape). */
static int run_kernel(const request_t *req, tsr_ir_module_t *module, tsr_array_t *in,
                      tsr_array_t *out) {
  tsr_ir_kernel_t *kernel = tsr_ir_module_kernel(module, 0);
  tsr_ir_operand_info_t info;
  tsr_ir_kernel_operand_info(kernel, 1, &info);
  tsr_status_t s = tsr_array_initialize(info.dtype, info.rank, info.dims, out);
  tsr_context_t *ctx = NULL;
  tsr_executable_t *exe = NULL;
  tsr_run_result_t *result = NULL;
  if (!s) {
    tsr_context_options_t co;
    tsr_context_options_from_environment(&co);
    co.disk_cache = co.disk_cache && req->backend == TSR_BACKEND_CPU;
    s = tsr_context_create(&co, &ctx);
  }
  if (!s) {
    tsr_executable_options_t eo;
    tsr_executable_options_initialize(&eo);
    eo.backend = req->backend;
    s = tsr_executable_create(ctx, kernel, &eo, &exe);
  }
  if (!s) {
    tsr_array_t *operands[] = {in, out};
    s = tsr_executable_run(exe, operands, 2, NULL, &result);
  }
  tsr_run_result_destroy(result);
  tsr_executable_destroy(exe);
  tsr_context_destroy(ctx);
  if (s) {
    cli_report(req->cmd, s);
    return EXIT_KERNEL;
  }
  return EXIT_OK;
}

static int finish(const request_t *req, tsr_array_t *out) {
  if (!req->output) {
    cli_print_array(stdout, "y", out);
    return EXIT_OK;
  }
  tsr_status_t s = tsr_npy_write(req->output, out);
  if (s) {
    fprintf(stderr, "tessera %s: %s: %s\n", req->cmd, req->output, tsr_status_message(s));
    tsr_status_free(s);
    return EXIT_FAILED;
  }
  return EXIT_OK;
}

/* --print-kernel: the module's text on stdout. */
static int print_kernel(const char *cmd, const tsr_ir_module_t *module) {
  char *text = tsr_ir_module_print(module);
  if (!text) {
    fprintf(stderr, "tessera %s: out of memory printing the kernel\n", cmd);
    return EXIT_FAILED;
  }
  fputs(text, stdout);
  tsr_ir_string_free(text);
  return EXIT_OK;
}

static int generator_error(const char *cmd, tsr_status_t s) {
  /* Parameters the library refuses are the user's: a usage error. */
  int rc = tsr_status_code(s) == TSR_INVALID_ARGUMENT ? EXIT_USAGE : EXIT_KERNEL;
  fprintf(stderr, "tessera %s: %s\n", cmd, tsr_status_message(s));
  tsr_status_free(s);
  return rc;
}

int cmd_reduce(int argc, char **argv) {
  request_t req = {.cmd = "reduce", .op = TSR_KERNELS_SUM, .backend = TSR_BACKEND_INTERP};
  int rc = parse_args(argc, argv, false, &req);
  if (rc) return rc < 0 ? EXIT_OK : rc;
  tsr_array_t in = {0}, out = {0};
  tsr_status_t s = read_input(req.input, &in);
  if (s) {
    fprintf(stderr, "tessera reduce: %s\n", tsr_status_message(s));
    tsr_status_free(s);
    return EXIT_USAGE;
  }
  tsr_ir_module_t *module = NULL;
  uint32_t rank = in.rank;
  tsr_kernels_reduce_params_t p;
  tsr_kernels_reduce_params_initialize(&p);
  p.op = req.op;
  p.dtype = in.dtype;
  p.keepdims = req.keepdims;
  p.vmem_budget_bytes = req.budget;
  bool arg = req.op == TSR_KERNELS_ARGMAX || req.op == TSR_KERNELS_ARGMIN;
  uint32_t count = 0;
  if (req.axes && !parse_axes("reduce", req.axes, rank, &p.axes_mask, &count)) {
    rc = EXIT_USAGE;
    goto done;
  }
  if (tsr_array_element_count(&in) == 0) {
    rc = cli_usage_error("reduce", "%s: the array is empty", req.input);
    goto done;
  }
  if (arg && count > 1) {
    rc = cli_usage_error("reduce", "--op %s takes one axis, got --axes %s",
                         tsr_kernels_op_name(req.op), req.axes);
    goto done;
  }
  /* numpy: argmax without an axis works on the flattened array; a 0-d
   * array reduces as one element. */
  int64_t n = tsr_array_element_count(&in);
  bool flatten = (arg && !req.axes && rank != 1) || rank == 0;
  if (flatten) {
    in.rank = 1;
    in.dims[0] = n;
  }
  p.rank = in.rank;
  memcpy(p.dims, in.dims, sizeof p.dims);
  if (flatten) p.axes_mask = 0;
  s = tsr_kernels_reduce(&p, &module);
  if (s) {
    rc = generator_error("reduce", s);
    goto done;
  }
  if (req.print_kernel) {
    rc = print_kernel("reduce", module);
    goto done;
  }
  rc = run_kernel(&req, module, &in, &out);
  bool one = req.keepdims ? flatten : (p.axes_mask == 0 || p.axes_mask == (1u << p.rank) - 1);
  if (!rc && one) {
    /* A reduction to one number: all ones with keepdims, a 0-d array
     * without (the kernel gives shape (1,)). */
    out.rank = req.keepdims ? rank : 0;
    for (uint32_t d = 0; d < out.rank; d++) out.dims[d] = 1;
  }
  if (!rc) rc = finish(&req, &out);
done:
  tsr_ir_module_destroy(module);
  tsr_array_deinitialize(&in);
  tsr_array_deinitialize(&out);
  return rc;
}

int cmd_cumsum(int argc, char **argv) {
  request_t req = {.cmd = "cumsum", .op = TSR_KERNELS_SUM, .backend = TSR_BACKEND_INTERP};
  int rc = parse_args(argc, argv, true, &req);
  if (rc) return rc < 0 ? EXIT_OK : rc;
  tsr_array_t in = {0}, out = {0};
  tsr_status_t s = read_input(req.input, &in);
  if (s) {
    fprintf(stderr, "tessera cumsum: %s\n", tsr_status_message(s));
    tsr_status_free(s);
    return EXIT_USAGE;
  }
  tsr_ir_module_t *module = NULL;
  tsr_kernels_cumulative_params_t p;
  tsr_kernels_cumulative_params_initialize(&p);
  p.op = req.op;
  p.dtype = in.dtype;
  p.reverse = req.reverse;
  p.vmem_budget_bytes = req.budget;
  uint32_t rank = in.rank;
  if (rank == 0) {
    rc = cli_usage_error("cumsum", "%s: a 0-d array has no axis to scan", req.input);
    goto done;
  }
  if (req.axes) {
    char *end = NULL;
    long a = strtol(req.axes, &end, 10);
    if (end == req.axes || *end) {
      rc = cli_usage_error("cumsum", "--axis %s: expected an integer", req.axes);
      goto done;
    }
    if (a < -(long)rank || a >= (long)rank) {
      rc = cli_usage_error("cumsum", "--axis %ld is out of range for an array of rank %u", a,
                           rank);
      goto done;
    }
    p.axis = (int32_t)a;
  }
  if (tsr_array_element_count(&in) == 0) {
    rc = cli_usage_error("cumsum", "%s: the array is empty", req.input);
    goto done;
  }
  p.rank = rank;
  memcpy(p.dims, in.dims, sizeof p.dims);
  s = tsr_kernels_cumulative(&p, &module);
  if (s) {
    rc = generator_error("cumsum", s);
    goto done;
  }
  rc = req.print_kernel ? print_kernel("cumsum", module) : run_kernel(&req, module, &in, &out);
  if (!rc && !req.print_kernel) rc = finish(&req, &out);
done:
  tsr_ir_module_destroy(module);
  tsr_array_deinitialize(&in);
  tsr_array_deinitialize(&out);
  return rc;
}
