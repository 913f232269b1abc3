/* Unit tests for runtime/guard.c, the guard bytes around the arrays of a
 * compiled run (TESSERA_GUARD): writes a stand-in for compiled code makes
 * through the guarded copies, past an end (the 32-bit store of a 16-bit
 * tail element that LLVM 22 made on AVX-512 hosts), before a start, into an
 * input; every one named with its bytes; clean runs pass and copy their
 * outputs back. Needs no LLVM. */
#include <stdlib.h>

#include "runtime/runtime_internal.h"
#include "tests/harness.h"

typedef struct arrays {
  tsr_array_t a[3];
  tsr_array_t *p[3];
  bool is_output[3];
  const char *names[3];
} arrays_t;

/* %x: f16[129] in, %k: i8[3, 5] in, %y: f16[129] out; x[i] = i, y zero. */
static bool make_arrays(arrays_t *t) {
  int64_t d129[1] = {129}, d35[2] = {3, 5};
  if (tsr_array_initialize(TSR_DTYPE_F16, 1, d129, &t->a[0]) ||
      tsr_array_initialize(TSR_DTYPE_I8, 2, d35, &t->a[1]) ||
      tsr_array_initialize(TSR_DTYPE_F16, 1, d129, &t->a[2]))
    return false;
  for (int i = 0; i < 129; i++) ((uint16_t *)t->a[0].data)[i] = (uint16_t)i;
  static const char *const names[3] = {"x", "k", "y"};
  for (int i = 0; i < 3; i++) {
    t->p[i] = &t->a[i];
    t->is_output[i] = i == 2;
    t->names[i] = names[i];
  }
  return true;
}

static void free_arrays(arrays_t *t) {
  for (int i = 0; i < 3; i++) tsr_array_deinitialize(&t->a[i]);
}

/* The arrays and their guarded copies: false (a failure recorded) if they
 * cannot be made. */
static bool guard_arrays(arrays_t *t, tsr_array_t copies[3], tsr_guard_set_t **set) {
  *set = NULL;
  if (!make_arrays(t)) {
    TSR_FAIL_AT("cannot make the test's arrays");
    return false;
  }
  TSR_CHECK_OK(tsr_guard_set_create(t->p, 3, t->is_output, copies, set));
  return *set != NULL;
}

TSR_TEST(clean_run_passes_and_copies_outputs_back) {
  arrays_t t;
  tsr_array_t copies[3];
  tsr_guard_set_t *set;
  if (!guard_arrays(&t, copies, &set)) return;
  TSR_CHECK(copies[2].data != t.a[2].data);
  TSR_CHECK(((uintptr_t)copies[0].data & 63) == 0); /* aligned as callers' arrays */
  for (int i = 0; i < 129; i++) /* y = x + 1, every element and nothing else */
    ((uint16_t *)copies[2].data)[i] = (uint16_t)(((uint16_t *)copies[0].data)[i] + 1);
  TSR_CHECK(((uint16_t *)t.a[2].data)[128] == 0); /* the caller's array is untouched... */
  TSR_CHECK_OK(tsr_guard_set_finish(set, "k", t.names));
  TSR_CHECK(((uint16_t *)t.a[2].data)[128] == 129); /* ...until the end of the run */
  TSR_CHECK(((uint16_t *)t.a[2].data)[0] == 1);
  free_arrays(&t);
}

TSR_TEST(word_store_of_the_last_f16_element_names_the_two_bytes_past_the_end) {
  arrays_t t;
  tsr_array_t copies[3];
  tsr_guard_set_t *set;
  if (!guard_arrays(&t, copies, &set)) return;
  uint32_t word = 0x12345678u; /* element 128 stored as 32 bits: bytes 256..259 */
  memcpy((uint8_t *)copies[2].data + 256, &word, 4);
  TSR_CHECK_ERROR(tsr_guard_set_finish(set, "copy", t.names), TSR_INTERNAL,
                  "compiled kernel @copy wrote outside its arrays (TESSERA_GUARD): operand %y "
                  "(f16[129]): 2 bytes past its end overwritten (offsets 258..259 of an array "
                  "of 258 bytes)");
  free_arrays(&t);
}

TSR_TEST(every_operand_written_outside_is_named) {
  arrays_t t;
  tsr_array_t copies[3];
  tsr_guard_set_t *set;
  if (!guard_arrays(&t, copies, &set)) return;
  ((uint8_t *)copies[1].data)[-3] ^= 0xff; /* before %k */
  ((uint8_t *)copies[1].data)[15 + 40] ^= 0xff; /* far past it */
  ((uint16_t *)copies[0].data)[7] = 0; /* into input %x */
  tsr_status_t s = tsr_guard_set_finish(set, "k", t.names);
  TSR_CHECK(s && tsr_status_code(s) == TSR_INTERNAL);
  const char *m = s ? tsr_status_message(s) : "";
  TSR_CHECK(strstr(m, "operand %x (f16[129]): its data changed (it is no output)"));
  TSR_CHECK(strstr(m, "operand %k (i8[3, 5]): 1 byte before its start overwritten (offsets "
                      "-3..-3), 1 byte past its end overwritten (offsets 55..55 of an array "
                      "of 15 bytes)"));
  TSR_CHECK(!strstr(m, "%y"));
  if (tsr_test_case_failed) printf("# %s\n", m);
  tsr_status_free(s);
  free_arrays(&t);
}

TSR_TEST(operands_sharing_data_share_one_copy) {
  arrays_t t;
  TSR_CHECK(make_arrays(&t));
  t.p[2] = &t.a[0]; /* %y aliases %x in place */
  tsr_array_t copies[3];
  tsr_guard_set_t *set = NULL;
  TSR_CHECK_OK(tsr_guard_set_create(t.p, 3, t.is_output, copies, &set));
  if (!set) return;
  TSR_CHECK(copies[0].data == copies[2].data);
  ((uint16_t *)copies[2].data)[5] = 500;
  TSR_CHECK_OK(tsr_guard_set_finish(set, "k", t.names)); /* written through the output */
  TSR_CHECK(((uint16_t *)t.a[0].data)[5] == 500);
  free_arrays(&t);
}

TSR_TEST(enabled_by_the_environment) {
  unsetenv("TESSERA_GUARD");
  TSR_CHECK(!tsr_guard_enabled());
  setenv("TESSERA_GUARD", "0", 1);
  TSR_CHECK(!tsr_guard_enabled());
  setenv("TESSERA_GUARD", "1", 1);
  TSR_CHECK(tsr_guard_enabled());
}

int main(void) {
  TSR_RUN(clean_run_passes_and_copies_outputs_back);
  TSR_RUN(word_store_of_the_last_f16_element_names_the_two_bytes_past_the_end);
  TSR_RUN(every_operand_written_outside_is_named);
  TSR_RUN(operands_sharing_data_share_one_copy);
  TSR_RUN(enabled_by_the_environment);
  return tsr_test_done();
}
