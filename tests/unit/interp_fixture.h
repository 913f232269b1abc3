/* A test fixture for interpreter tests: parse, verify and prepare an inline
 * kernel, make zeroed arrays for its operands (with a leading device
 * dimension when options.devices > 1), run, and check diagnostics. It
 * drives the interpreter directly (interp/interp_runtime.h), below the
 * executables. */
#ifndef TESSERA_TESTS_INTERP_FIXTURE_H
#define TESSERA_TESTS_INTERP_FIXTURE_H

#include "interp/interp_runtime.h"
#include "tests/harness.h"

typedef struct fixture {
  tsr_ir_module_t *module;
  tsr_interp_program_t *program;
  tsr_array_t arrays[16];
  tsr_array_t *ptrs[16];
  size_t count;
  tsr_interp_stats_t stats;
  tsr_interp_options_t options; /* what setup() prepared with */
  /* Where run() writes `print` output and warnings; NULL: stderr. Set
   * after setup(). */
  FILE *print_stream, *warning_stream;
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
  f->options = opts;
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
  tsr_interp_run_options_t ro;
  tsr_interp_run_options_of(&f->options, &ro);
  ro.print_stream = f->print_stream;
  ro.warning_stream = f->warning_stream;
  return tsr_interp_program_run_with(f->program, f->ptrs, f->count, &ro, &f->stats, NULL);
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

/* Expects `text` to run without error under `options` (may be NULL) but with
 * a warning that contains every needle, written to the warning stream; and
 * the same message as a kernel error under options.strict. Returns the
 * warnings' text (free it) for further checks, NULL on failure. */
static inline char *expect_kernel_warning(const char *text, const tsr_interp_options_t *options,
                                          const char *const *needles) {
  tsr_interp_options_t o;
  tsr_interp_options_initialize(&o);
  if (options) o = *options;
  FILE *stream = tmpfile();
  if (!stream) {
    TSR_FAIL_AT("tmpfile: cannot make a warning stream");
    return NULL;
  }
  o.strict = false;
  fixture_t f;
  char *warnings = NULL;
  tsr_status_t s = setup(&f, text, &o);
  f.warning_stream = stream;
  if (!s) s = run(&f);
  if (s) {
    TSR_FAIL_AT("expected a run with warnings, got %s: %s",
                tsr_status_code_name(tsr_status_code(s)), tsr_status_message(s));
    tsr_status_free(s);
  } else {
    long size = ftell(stream);
    warnings = calloc(1, size > 0 ? (size_t)size + 1 : 1);
    rewind(stream);
    if (warnings && size > 0 && fread(warnings, 1, (size_t)size, stream) != (size_t)size)
      TSR_FAIL_AT("cannot read the warning stream back");
    if (f.stats.warnings == 0) TSR_FAIL_AT("stats.warnings is 0");
    if (warnings && !strstr(warnings, ": warning: "))
      TSR_FAIL_AT("no ': warning: ' line in:\n%s", warnings);
    for (const char *const *n = needles; warnings && *n; n++)
      if (!strstr(warnings, *n)) TSR_FAIL_AT("warnings lack \"%s\":\n%s", *n, warnings);
  }
  teardown(&f);
  fclose(stream);
  o.strict = true;
  s = setup(&f, text, &o);
  if (!s) s = run(&f);
  if (tsr_status_code(s) == TSR_KERNEL_ERROR &&
      !strstr(tsr_status_message(s), "[a warning, an error with --strict]"))
    TSR_FAIL_AT("a strict error lacks the --strict note:\n%s", tsr_status_message(s));
  expect_kernel_error(s, needles);
  teardown(&f);
  return warnings;
}

#endif /* TESSERA_TESTS_INTERP_FIXTURE_H */
