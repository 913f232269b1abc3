/* A test fixture for interpreter tests: parse, verify and prepare an inline
 * kernel, make zeroed arrays for its operands (with a leading device
 * dimension when options.devices > 1), run, and check diagnostics. */
#ifndef TESSERA_TESTS_INTERP_FIXTURE_H
#define TESSERA_TESTS_INTERP_FIXTURE_H

#include "tests/harness.h"

typedef struct fixture {
  tsr_ir_module_t *module;
  tsr_interp_program_t *program;
  tsr_array_t arrays[16];
  tsr_array_t *ptrs[16];
  size_t count;
  tsr_interp_stats_t stats;
} fixture_t;

/* Parses, verifies and prepares `text`; makes one array per operand (inputs
 * filled by `fill`, may be NULL for zeros). */
static inline tsr_status_t setup(fixture_t *f, const char *text,
                          const tsr_interp_options_t *options) {
  memset(f, 0, sizeof *f);
  tsr_status_t s = tsr_ir_module_parse(TSR_SV("test.tsr"),
                                       (tsr_string_view_t){text, strlen(text)},
                                       &f->module);
  if (s) return s;
  s = tsr_ir_module_verify(f->module);
  if (s) return s;
  tsr_ir_kernel_t *k = tsr_ir_module_kernel(f->module, 0);
  tsr_interp_options_t opts;
  tsr_interp_options_initialize(&opts);
  if (options) opts = *options;
  s = tsr_interp_program_prepare(k, &opts, &f->program);
  if (s) return s;
  for (size_t i = 0; i < tsr_ir_kernel_operand_count(k); i++) {
    tsr_ir_operand_info_t info;
    tsr_ir_kernel_operand_info(k, i, &info);
    if (info.role == TSR_ROLE_SCRATCH) continue;
    if (f->count == 16) return TSR_STATUS(TSR_INVALID_ARGUMENT, "fixture: too many operands");
    if (opts.devices > 1) { /* one slice per device */
      memmove(info.dims + 1, info.dims, info.rank * sizeof info.dims[0]);
      info.dims[0] = opts.devices;
      info.rank++;
    }
    s = tsr_array_initialize(info.dtype, info.rank, info.dims, &f->arrays[f->count]);
    if (s) return s;
    f->ptrs[f->count] = &f->arrays[f->count];
    f->count++;
  }
  return NULL;
}

static inline tsr_status_t run(fixture_t *f) {
  return tsr_interp_program_run(f->program, f->ptrs, f->count, &f->stats);
}

static inline void teardown(fixture_t *f) {
  for (size_t i = 0; i < f->count; i++) tsr_array_deinitialize(&f->arrays[i]);
  tsr_interp_program_destroy(f->program);
  tsr_ir_module_destroy(f->module);
}

static inline float *f32(fixture_t *f, size_t i) { return f->arrays[i].data; }
static inline int32_t *i32(fixture_t *f, size_t i) { return f->arrays[i].data; }

static inline void fill_iota_f32(tsr_array_t *a) {
  float *p = a->data;
  for (int64_t i = 0; i < tsr_array_element_count(a); i++) p[i] = (float)i;
}

/* Expects a kernel error whose message contains every needle. */
static inline void expect_kernel_error(tsr_status_t s, const char *const *needles) {
  if (tsr_status_code(s) != TSR_KERNEL_ERROR) {
    TSR_FAIL_AT("expected a kernel error, got %s: %s",
                tsr_status_code_name(tsr_status_code(s)), tsr_status_message(s));
  } else {
    for (const char *const *n = needles; *n; n++)
      if (!strstr(tsr_status_message(s), *n))
        TSR_FAIL_AT("message lacks \"%s\":\n%s", *n, tsr_status_message(s));
  }
  tsr_status_free(s);
}

#endif /* TESSERA_TESTS_INTERP_FIXTURE_H */
