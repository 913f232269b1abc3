/* A minimal in-tree test harness speaking TAP, so meson (protocol: 'tap') and
 * scripts/run-tests count every case. Usage:
 *   TSR_TEST(name) { TSR_CHECK(cond); TSR_CHECK_EQ_INT(a, b); ... }
 *   int main(void) { TSR_RUN(name); ...; return tsr_test_done(); } */
#ifndef TESSERA_TESTS_HARNESS_H
#define TESSERA_TESTS_HARNESS_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessera/tessera.h"

static int tsr_test_count, tsr_test_failed_count, tsr_test_case_failed;

#define TSR_TEST(name) static void test_##name(void)

#define TSR_RUN(name)                                                          \
  do {                                                                         \
    tsr_test_case_failed = 0;                                                  \
    test_##name();                                                             \
    tsr_test_count++;                                                          \
    if (tsr_test_case_failed) tsr_test_failed_count++;                         \
    printf("%s %d - %s\n", tsr_test_case_failed ? "not ok" : "ok",             \
           tsr_test_count, #name);                                             \
    fflush(stdout);                                                            \
  } while (0)

/* A case sets this when it cannot run here (TSR_RUN_OR_SKIP reports a TAP
 * skip then). */
static const char *tsr_test_skip_reason __attribute__((unused));

/* TSR_RUN, with a TAP skip when the case set tsr_test_skip_reason. */
#define TSR_RUN_OR_SKIP(name)                                                  \
  do {                                                                         \
    tsr_test_skip_reason = NULL;                                               \
    tsr_test_case_failed = 0;                                                  \
    test_##name();                                                             \
    tsr_test_count++;                                                          \
    if (tsr_test_case_failed) tsr_test_failed_count++;                         \
    printf("%s %d - %s%s%s\n", tsr_test_case_failed ? "not ok" : "ok",         \
           tsr_test_count, #name, tsr_test_skip_reason ? " # SKIP " : "",      \
           tsr_test_skip_reason ? tsr_test_skip_reason : "");                  \
    fflush(stdout);                                                            \
  } while (0)

#define TSR_FAIL_AT(...)                                                       \
  do {                                                                         \
    printf("# %s:%d: ", __FILE__, __LINE__);                                   \
    printf(__VA_ARGS__);                                                       \
    printf("\n");                                                              \
    tsr_test_case_failed = 1;                                                  \
  } while (0)

#define TSR_CHECK(cond)                                                        \
  do {                                                                         \
    if (!(cond)) TSR_FAIL_AT("check failed: %s", #cond);                       \
  } while (0)

#define TSR_CHECK_EQ_INT(a, b)                                                 \
  do {                                                                         \
    long long tsr_a_ = (long long)(a), tsr_b_ = (long long)(b);                \
    if (tsr_a_ != tsr_b_)                                                      \
      TSR_FAIL_AT("%s == %s: %lld != %lld", #a, #b, tsr_a_, tsr_b_);           \
  } while (0)

#define TSR_CHECK_EQ_STR(a, b)                                                 \
  do {                                                                         \
    const char *tsr_a_ = (a), *tsr_b_ = (b);                                   \
    if (!tsr_a_ || !tsr_b_ || strcmp(tsr_a_, tsr_b_) != 0)                     \
      TSR_FAIL_AT("%s == %s:\n--- got\n%s\n--- expected\n%s", #a, #b,          \
                  tsr_a_ ? tsr_a_ : "(null)", tsr_b_ ? tsr_b_ : "(null)");     \
  } while (0)

/* Checks that a status is OK; prints and frees it otherwise. */
#define TSR_CHECK_OK(expr)                                                     \
  do {                                                                         \
    tsr_status_t tsr_s_ = (expr);                                              \
    if (tsr_s_) {                                                              \
      TSR_FAIL_AT("%s failed: %s", #expr, tsr_status_message(tsr_s_));         \
      tsr_status_free(tsr_s_);                                                 \
    }                                                                          \
  } while (0)

/* Checks that a status has `code`; frees it. */
#define TSR_CHECK_STATUS(expr, code)                                           \
  do {                                                                         \
    tsr_status_t tsr_s_ = (expr);                                              \
    if (tsr_status_code(tsr_s_) != (code))                                     \
      TSR_FAIL_AT("%s: expected %s, got %s: %s", #expr,                        \
                  tsr_status_code_name(code),                                  \
                  tsr_status_code_name(tsr_status_code(tsr_s_)),               \
                  tsr_status_message(tsr_s_));                                 \
    tsr_status_free(tsr_s_);                                                   \
  } while (0)

/* Checks that a status is an error with `code` whose message contains
 * `words` (what a refused parameter must name); frees it. */
#define TSR_CHECK_ERROR(expr, code, words)                                     \
  do {                                                                         \
    tsr_status_t tsr_s_ = (expr);                                              \
    const char *tsr_w_ = (words);                                              \
    if (!tsr_s_)                                                               \
      TSR_FAIL_AT("%s: expected %s, got success", #expr,                       \
                  tsr_status_code_name(code));                                 \
    else if (tsr_status_code(tsr_s_) != (code) ||                              \
             !strstr(tsr_status_message(tsr_s_), tsr_w_))                      \
      TSR_FAIL_AT("%s: expected %s naming '%s', got %s: %s", #expr,            \
                  tsr_status_code_name(code), tsr_w_,                          \
                  tsr_status_code_name(tsr_status_code(tsr_s_)),               \
                  tsr_status_message(tsr_s_));                                 \
    tsr_status_free(tsr_s_);                                                   \
  } while (0)

static inline int tsr_test_done(void) {
  printf("1..%d\n", tsr_test_count);
  return tsr_test_failed_count ? 1 : 0;
}

/* True when `s` (from making a cpu executable) says this build has no cpu
 * backend: built without MLIR, or the lowering library file is missing (the
 * TSan build makes only the cache suite's programs). Any other failure,
 * other TSR_UNIMPLEMENTED errors included, is the test's to report, so a
 * lowering regression cannot pass as a skip. */
static inline bool tsr_test_cpu_absent(const tsr_status_t s) {
  const char *m = tsr_status_message(s);
  return tsr_status_code(s) == TSR_UNIMPLEMENTED &&
         (strncmp(m, "no cpu backend in this build", 28) == 0 ||
          (strstr(m, "cannot load the lowering library") && strstr(m, "No such file")));
}

/* Runs the module's first kernel on `backend` in `ctx` with `ops`. */
static inline tsr_status_t tsr_test_run_module(tsr_context_t *ctx, tsr_ir_module_t *m,
                                               tsr_backend_t backend, tsr_array_t **ops,
                                               size_t n) {
  tsr_executable_options_t eo;
  tsr_executable_options_initialize(&eo);
  eo.backend = backend;
  tsr_executable_t *exe = NULL;
  tsr_status_t s = tsr_executable_create(ctx, tsr_ir_module_kernel(m, 0), &eo, &exe);
  if (!s) s = tsr_executable_run(exe, ops, n, NULL, NULL);
  tsr_executable_destroy(exe);
  return s;
}

/* Reads a whole file relative to $TSR_SOURCE_ROOT (or as given if absolute).
 * Returns malloc'd text or NULL. */
static inline char *tsr_test_read_source(const char *rel, size_t *out_len) {
  char path[4096];
  const char *root = getenv("TSR_SOURCE_ROOT");
  int len = rel[0] == '/' || !root ? snprintf(path, sizeof path, "%s", rel)
                                    : snprintf(path, sizeof path, "%s/%s", root, rel);
  if (len < 0 || (size_t)len >= sizeof path) return NULL;
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = malloc((size_t)n + 1);
  if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
    free(buf);
    buf = NULL;
  }
  fclose(f);
  if (buf) {
    buf[n] = 0;
    if (out_len) *out_len = (size_t)n;
  }
  return buf;
}

#endif /* TESSERA_TESTS_HARNESS_H */
