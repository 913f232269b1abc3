/* Messages about resources: out of memory says what and how many bytes
 * (arrays, the interpreter's memories), the core limit of a run, and kernel
 * lists that stay short in a file of many kernels. */
#include "base/base_internal.h"
#include "tests/unit/interp_fixture.h"

TSR_TEST(oom_bytes_says_how_much_and_what) {
  tsr_status_t s = TSR_OOM_BYTES((size_t)1 << 40, "the data of %s", "x.npy");
  TSR_CHECK_EQ_INT(tsr_status_code(s), TSR_OUT_OF_MEMORY);
  TSR_CHECK_EQ_STR(tsr_status_message(s),
                   "cannot allocate 1099511627776 bytes (1.00 TiB) for the data of x.npy");
  tsr_status_free(s);
  s = TSR_OOM_BYTES(100, "a small thing");
  TSR_CHECK_EQ_STR(tsr_status_message(s), "cannot allocate 100 bytes for a small thing");
  tsr_status_free(s);
}

TSR_TEST(array_oom_names_the_array) {
  int64_t dims[2] = {8, 128};
  tsr_array_t a;
  tsr_alloc_fail_after(0);
  tsr_status_t s = tsr_array_initialize(TSR_DTYPE_F32, 2, dims, &a);
  tsr_alloc_fail_after(-1);
  TSR_CHECK_EQ_INT(tsr_status_code(s), TSR_OUT_OF_MEMORY);
  TSR_CHECK_EQ_STR(tsr_status_message(s),
                   "cannot allocate 4096 bytes (4.00 KiB) for an array of f32[8, 128]");
  tsr_status_free(s);
  int64_t huge[3] = {INT64_C(1) << 30, INT64_C(1) << 30, INT64_C(1) << 30};
  s = tsr_array_initialize(TSR_DTYPE_F32, 3, huge, &a);
  TSR_CHECK_EQ_INT(tsr_status_code(s), TSR_OUT_OF_MEMORY);
  TSR_CHECK(strstr(tsr_status_message(s), "an array of f32[1073741824, 1073741824, "
                                          "1073741824] is too large") != NULL);
  tsr_status_free(s);
}

static const char scale_kernel[] =
    "kernel @scale\n"
    "  grid(2) semantics(parallel)\n"
    "  in %x: f32[16, 128] vmem block[8, 128] map(%i) -> (%i, 0)\n"
    "  out %y: f32[16, 128] vmem block[8, 128] map(%i) -> (%i, 0)\n"
    "{\n"
    "  %v = load %x[:, :] : f32[8, 128]\n"
    "  store %y[:, :], %v\n"
    "}\n";

/* Fails the k-th allocation of a run for k = 0, 1, ... until a run
 * succeeds: the failures of the big allocations (VMEM, the map of written
 * output elements) say what and how many bytes. */
TSR_TEST(interpreter_oom_says_which_memory) {
  fixture_t f;
  TSR_CHECK_OK(setup(&f, scale_kernel, NULL));
  bool vmem = false, output_map = false, succeeded = false;
  for (long k = 0; k < 200 && !succeeded; k++) {
    tsr_alloc_fail_after(k);
    tsr_status_t s = run(&f);
    tsr_alloc_fail_after(-1);
    if (!s) {
      succeeded = true;
      break;
    }
    TSR_CHECK_EQ_INT(tsr_status_code(s), TSR_OUT_OF_MEMORY);
    const char *msg = tsr_status_message(s);
    if (strstr(msg, "for the VMEM, its shadow and values of core 0 of device 0") &&
        strstr(msg, "cannot allocate "))
      vmem = true;
    if (strstr(msg, "cannot allocate 2049 bytes (2.00 KiB) for the written-element map of "
                    "output %y"))
      output_map = true;
    tsr_status_free(s);
  }
  TSR_CHECK(succeeded);
  TSR_CHECK(vmem);
  TSR_CHECK(output_map);
  teardown(&f);
}

TSR_TEST(core_limit_is_an_invalid_argument_in_the_api) {
  tsr_interp_options_t options;
  tsr_interp_options_initialize(&options);
  options.devices = 16;
  options.cores = TSR_INTERP_MAX_CORES / 16 + 1;
  fixture_t f;
  TSR_CHECK_OK(setup(&f, scale_kernel, &options));
  TSR_CHECK_STATUS(run(&f), TSR_INVALID_ARGUMENT);
  teardown(&f);
}

/* A module of `n` kernels @k0 ... */
static tsr_ir_module_t *many_kernels(size_t n) {
  tsr_strbuf_t text;
  tsr_strbuf_initialize(&text);
  for (size_t i = 0; i < n; i++)
    tsr_strbuf_printf(&text, "kernel @k%zu\n  in %%x: f32[8] smem\n  out %%y: f32[8] smem\n{\n}\n",
                      i);
  tsr_ir_module_t *module = NULL;
  tsr_status_t s = tsr_ir_module_parse(TSR_SV("many.tsr"),
                                       (tsr_string_view_t){text.data, text.size}, &module);
  tsr_strbuf_deinitialize(&text);
  if (s) {
    TSR_FAIL_AT("parse: %s", tsr_status_message(s));
    tsr_status_free(s);
    return NULL;
  }
  return module;
}

TSR_TEST(kernel_lists_stay_short) {
  tsr_ir_module_t *module = many_kernels(1000);
  if (!module) return;
  tsr_ir_kernel_t *kernel = NULL;
  tsr_status_t s = tsr_runtime_select_kernel(module, NULL, &kernel);
  TSR_CHECK_EQ_INT(tsr_status_code(s), TSR_INVALID_ARGUMENT);
  TSR_CHECK_EQ_STR(tsr_status_message(s),
                   "the module has 1000 kernels (@k0, @k1, @k2, @k3, @k4, @k5, @k6, @k7 "
                   "and 992 more): name the one to run");
  tsr_status_free(s);
  s = tsr_runtime_select_kernel(module, "nope", &kernel);
  TSR_CHECK_EQ_INT(tsr_status_code(s), TSR_NOT_FOUND);
  TSR_CHECK_EQ_STR(tsr_status_message(s),
                   "no kernel named @nope; the module has 1000 kernels: @k0, @k1, @k2, @k3, "
                   "@k4, @k5, @k6, @k7 and 992 more");
  tsr_status_free(s);
  tsr_ir_module_destroy(module);
  module = many_kernels(2);
  if (!module) return;
  s = tsr_runtime_select_kernel(module, "nope", &kernel);
  TSR_CHECK_EQ_STR(tsr_status_message(s),
                   "no kernel named @nope; the module has 2 kernels: @k0, @k1");
  tsr_status_free(s);
  tsr_ir_module_destroy(module);
}

int main(void) {
  TSR_RUN(oom_bytes_says_how_much_and_what);
  TSR_RUN(array_oom_names_the_array);
  TSR_RUN(interpreter_oom_says_which_memory);
  TSR_RUN(core_limit_is_an_invalid_argument_in_the_api);
  TSR_RUN(kernel_lists_stay_short);
  return tsr_test_done();
}
