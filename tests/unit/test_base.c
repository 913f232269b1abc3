/* Unit tests for base/: statuses, arena, string buffer, 16-bit floats,
 * arrays, allocation failure, and where on-demand modules are looked for. */
#include <math.h>

#include "base/base_internal.h"
#include "base/expf.h"
#include "base/module.h"
#include "tests/harness.h"

TSR_TEST(status_ok_is_null) {
  TSR_CHECK_EQ_INT(tsr_status_code(NULL), TSR_OK);
  TSR_CHECK_EQ_STR(tsr_status_message(NULL), "");
}

TSR_TEST(status_message_and_annotate) {
  tsr_status_t s = TSR_STATUS(TSR_NOT_FOUND, "kernel @%s", "k");
  s = tsr_status_annotate(s, "loading %s", "f.tsr");
  TSR_CHECK_EQ_INT(tsr_status_code(s), TSR_NOT_FOUND);
  TSR_CHECK_EQ_STR(tsr_status_message(s), "loading f.tsr: kernel @k");
  tsr_status_free(s);
}

TSR_TEST(diag_list_limit) {
  tsr_diag_list_t d;
  tsr_diag_list_initialize(&d, 2);
  tsr_loc_t loc = {"a.tsr", 3, 5};
  for (int i = 0; i < 5; i++) tsr_diag_add(&d, loc, "bad %d", i);
  tsr_status_t s = tsr_diag_list_to_status(&d, TSR_VERIFY_ERROR);
  TSR_CHECK_EQ_STR(tsr_status_message(s),
                   "a.tsr:3:5: error: bad 0\na.tsr:3:5: error: bad 1\n"
                   "note: 3 more errors not shown");
  TSR_CHECK_EQ_INT(tsr_status_diagnostic_count(s), 3);
  tsr_status_free(s);
  tsr_diag_list_deinitialize(&d);
}

/* A copy keeps the text (annotated after the records were made) and every
 * record: what the runtime does with statuses of the lowering library. */
TSR_TEST(status_copy_keeps_records) {
  tsr_loc_t loc = {"k.tsr", 7, 3};
  tsr_status_t s = TSR_STATUS_AT_OP(TSR_UNIMPLEMENTED, loc, "exp", "no lowering for %s", "i32");
  s = tsr_status_annotate(s, "compiling @k");
  tsr_status_t c = tsr_status_copy(s);
  tsr_status_free(s);
  TSR_CHECK_EQ_INT(tsr_status_code(c), TSR_UNIMPLEMENTED);
  TSR_CHECK_EQ_STR(tsr_status_message(c), "compiling @k: k.tsr:7:3: error: no lowering for i32");
  TSR_CHECK_EQ_INT(tsr_status_record_count(c), 1);
  const tsr_status_record_t *r = tsr_status_record_get(c, 0);
  TSR_CHECK(r && r->located && r->loc.line == 7 && r->loc.col == 3);
  if (r) {
    TSR_CHECK_EQ_STR(r->loc.file, "k.tsr");
    TSR_CHECK_EQ_STR(r->op, "exp");
    TSR_CHECK_EQ_STR(r->message, "no lowering for i32");
  }
  tsr_status_free(c);
  tsr_status_t plain = TSR_STATUS(TSR_IO_ERROR, "cannot read x");
  c = tsr_status_copy(plain);
  TSR_CHECK_EQ_STR(tsr_status_message(c), "cannot read x");
  TSR_CHECK_EQ_INT(tsr_status_record_count(c), 0);
  tsr_status_free(c);
  tsr_status_free(plain);
  TSR_CHECK(tsr_status_copy(NULL) == NULL);
}

TSR_TEST(arena_alignment_and_zero) {
  tsr_arena_t a;
  tsr_arena_initialize(&a);
  for (int i = 1; i < 1000; i++) {
    unsigned char *p = tsr_arena_alloc(&a, (size_t)i * 7);
    TSR_CHECK(p != NULL);
    TSR_CHECK(((uintptr_t)p & 15) == 0);
    TSR_CHECK(p[0] == 0 && p[i * 7 - 1] == 0);
    memset(p, 0xab, (size_t)i * 7);
  }
  TSR_CHECK(tsr_arena_alloc_array(&a, SIZE_MAX / 2, 4) == NULL);
  tsr_arena_deinitialize(&a);
}

TSR_TEST(strbuf_reserve_then_append) {
  tsr_strbuf_t sb;
  tsr_strbuf_initialize(&sb);
  TSR_CHECK(tsr_strbuf_reserve(&sb, 100000));
  char *before = sb.data;
  TSR_CHECK(sb.capacity > 100000);
  char chunk[1000];
  memset(chunk, 'x', sizeof chunk);
  for (int i = 0; i < 100; i++) tsr_strbuf_append(&sb, chunk, sizeof chunk);
  TSR_CHECK(sb.data == before); /* no reallocation */
  TSR_CHECK(!sb.failed && sb.size == 100000 && sb.data[100000] == 0);
  TSR_CHECK(!tsr_strbuf_reserve(&sb, SIZE_MAX)); /* overflow fails */
  TSR_CHECK(sb.failed);
  tsr_strbuf_deinitialize(&sb);
}

TSR_TEST(strbuf_printf_grows) {
  tsr_strbuf_t sb;
  tsr_strbuf_initialize(&sb);
  for (int i = 0; i < 1000; i++) tsr_strbuf_printf(&sb, "%d,", i);
  TSR_CHECK(!sb.failed);
  TSR_CHECK(strncmp(sb.data, "0,1,2,", 6) == 0);
  TSR_CHECK(sb.size == strlen(sb.data));
  char *t = tsr_strbuf_take(&sb);
  TSR_CHECK(sb.data == NULL);
  tsr_free(t);
}

TSR_TEST(bf16_round_to_nearest_even) {
  TSR_CHECK_EQ_INT(tsr_f32_to_bf16(1.0f), 0x3f80);
  /* 1 + 2^-8 is exactly halfway between bf16 1.0 and 1.0078125: ties to even. */
  TSR_CHECK_EQ_INT(tsr_f32_to_bf16(1.00390625f), 0x3f80);
  /* 1 + 3*2^-8 is halfway between 1.0078125 (odd) and 1.015625: rounds up. */
  TSR_CHECK_EQ_INT(tsr_f32_to_bf16(1.01171875f), 0x3f82);
  TSR_CHECK(isnan(tsr_bf16_to_f32(tsr_f32_to_bf16(NAN))));
  TSR_CHECK_EQ_INT(tsr_f32_to_bf16(INFINITY), 0x7f80);
  TSR_CHECK(tsr_bf16_to_f32(0xc040) == -3.0f);
}

TSR_TEST(f16_conversions) {
  TSR_CHECK_EQ_INT(tsr_f32_to_f16(1.0f), 0x3c00);
  TSR_CHECK_EQ_INT(tsr_f32_to_f16(65504.0f), 0x7bff);
  TSR_CHECK_EQ_INT(tsr_f32_to_f16(65520.0f), 0x7c00); /* rounds to inf */
  TSR_CHECK_EQ_INT(tsr_f32_to_f16(5.960464477539063e-08f), 0x0001);
  TSR_CHECK_EQ_INT(tsr_f32_to_f16(-0.0f), 0x8000);
  TSR_CHECK(tsr_f16_to_f32(0x0001) == 5.960464477539063e-08f);
  TSR_CHECK(tsr_f16_to_f32(0x3555) == 0.333251953125f);
  TSR_CHECK(isnan(tsr_f16_to_f32(0x7e00)));
  /* Every f16 survives a round trip through f32. */
  int bad = 0;
  for (uint32_t h = 0; h < 0x10000; h++) {
    float f = tsr_f16_to_f32((uint16_t)h);
    if (isnan(f)) continue;
    if (tsr_f32_to_f16(f) != h) bad++;
  }
  TSR_CHECK_EQ_INT(bad, 0);
}

TSR_TEST(array_overflow_is_an_error) {
  tsr_array_t a;
  int64_t dims[2] = {INT64_MAX / 2, 4};
  TSR_CHECK_STATUS(tsr_array_initialize(TSR_DTYPE_F32, 2, dims, &a),
                   TSR_OUT_OF_MEMORY);
  int64_t ok_dims[2] = {3, 5};
  TSR_CHECK_OK(tsr_array_initialize(TSR_DTYPE_BF16, 2, ok_dims, &a));
  TSR_CHECK_EQ_INT(tsr_array_byte_size(&a), 30);
  tsr_array_deinitialize(&a);
}

TSR_TEST(alloc_failure_injection) {
  tsr_alloc_fail_after(0);
  TSR_CHECK(tsr_malloc(16) == NULL);
  void *p = tsr_malloc(16);
  TSR_CHECK(p != NULL);
  tsr_free(p);
  tsr_alloc_fail_after(-1);
}

TSR_TEST(dtype_table) {
  tsr_dtype_t d;
  TSR_CHECK(tsr_dtype_from_name("bf16", 4, &d) && d == TSR_DTYPE_BF16);
  TSR_CHECK(!tsr_dtype_from_name("f64", 3, &d));
  TSR_CHECK_EQ_INT(tsr_dtype_size(TSR_DTYPE_I1), 1);
  TSR_CHECK_EQ_INT(tsr_dtype_class(TSR_DTYPE_U16), TSR_CLASS_UINT);
}

/* Where an on-demand module is looked for (base/module.h): the setting,
 * else the build tree's path when this code is in the build tree, else the
 * module's file beside this code when it is there (an installed Python
 * package keeps them side by side), else the installed path. This test
 * program is the code: "beside" it is its own directory. */
TSR_TEST(module_path_order) {
  char code[4096], out[4096], beside[4096 + 64];
  TSR_CHECK(tsr_code_path(code, sizeof code));
  const char *slash = strrchr(code, '/');
  TSR_CHECK(slash != NULL);
  if (!slash) return;
  tsr_module_path("/chosen/libx.so", code, "/build/libx.so", "/inst/libx.so", out, sizeof out);
  TSR_CHECK_EQ_STR(out, "/chosen/libx.so");
  /* the build root: this program's directory */
  char root[4096];
  snprintf(root, sizeof root, "%.*s", (int)(slash - code), code);
  tsr_module_path(NULL, root, "/build/libx.so", "/inst/libx.so", out, sizeof out);
  TSR_CHECK_EQ_STR(out, "/build/libx.so");
  tsr_module_path("", root, "/build/libx.so", "/inst/libx.so", out, sizeof out);
  TSR_CHECK_EQ_STR(out, "/build/libx.so");
  /* elsewhere: a file of the installed name beside this program (its own
   * name stands in for a module) is taken; a missing one is not */
  char installed[4096 + 64];
  snprintf(installed, sizeof installed, "/no/such/prefix/%s", slash + 1);
  snprintf(beside, sizeof beside, "%s", code);
  tsr_module_path(NULL, "/no/such/build/root", "/build/x", installed, out, sizeof out);
  TSR_CHECK_EQ_STR(out, beside);
  tsr_module_path(NULL, "/no/such/build/root", "/build/x",
                  "/no/such/prefix/libtessera-no-such-module.so", out, sizeof out);
  TSR_CHECK_EQ_STR(out, "/no/such/prefix/libtessera-no-such-module.so");
}

/* exp's two ways (the FMA instruction, libm's fma) give the same bits: on
 * the special cases' edges and a strided sweep of all f32 bit patterns; and
 * the values known exactly. Where the CPU has no FMA only the second runs,
 * and tsr_expf is it. */
TSR_TEST(expf_is_the_same_with_and_without_fma) {
  const uint32_t edges[] = {TSR_EXPF_OVERFLOW, TSR_EXPF_MAY_UNDERFLOW, TSR_EXPF_UNDERFLOW,
                            0x4202422fu, 0xc27c65d9u, 0x00000000u, 0x80000000u, 0x3f800000u};
  uint64_t differ = 0, checked = 0;
  const int hw = tsr_expf_hw_available();
  for (size_t e = 0; e < sizeof edges / sizeof *edges; e++)
    for (int64_t d = -64; d <= 64; d++) {
      float x = tsr_bits_f32((uint32_t)((int64_t)edges[e] + d));
      uint32_t soft = tsr_f32_bits(tsr_expf_soft(x));
      differ += tsr_f32_bits(tsr_expf(x)) != (hw ? tsr_f32_bits(tsr_expf_hw(x)) : soft);
      differ += hw && tsr_f32_bits(tsr_expf_hw(x)) != soft;
      checked++;
    }
  for (uint64_t u = 12345; u < ((uint64_t)1 << 32); u += 4093) {
    float x = tsr_bits_f32((uint32_t)u);
    uint32_t soft = tsr_f32_bits(tsr_expf_soft(x));
    if (hw) differ += tsr_f32_bits(tsr_expf_hw(x)) != soft;
    checked++;
  }
  TSR_CHECK(checked > 1000000);
  TSR_CHECK_EQ_INT(differ, 0);
  TSR_CHECK_EQ_INT(tsr_f32_bits(tsr_expf(0.0f)), 0x3f800000u);
  TSR_CHECK_EQ_INT(tsr_f32_bits(tsr_expf(1.0f)), 0x402df854u); /* e, correctly rounded */
  TSR_CHECK_EQ_INT(tsr_f32_bits(tsr_expf(INFINITY)), 0x7f800000u);
  TSR_CHECK_EQ_INT(tsr_f32_bits(tsr_expf(-INFINITY)), 0u);
  TSR_CHECK_EQ_INT(tsr_f32_bits(tsr_expf(tsr_bits_f32(TSR_EXPF_OVERFLOW + 1))), 0x7f800000u);
  TSR_CHECK_EQ_INT(tsr_f32_bits(tsr_expf(-104.0f)), 0u);
  TSR_CHECK(tsr_f32_bits(tsr_expf(-103.0f)) != 0u && tsr_f32_bits(tsr_expf(-103.0f)) < 0x00800000u);
  TSR_CHECK_EQ_INT(tsr_f32_bits(tsr_expf(tsr_bits_f32(0x7f800001u))), 0x7fc00001u); /* quieted */
  TSR_CHECK_EQ_INT(tsr_f32_bits(tsr_expf(tsr_bits_f32(0xff812345u))), 0xffc12345u);
}

int main(void) {
  TSR_RUN(status_ok_is_null);
  TSR_RUN(status_message_and_annotate);
  TSR_RUN(diag_list_limit);
  TSR_RUN(status_copy_keeps_records);
  TSR_RUN(arena_alignment_and_zero);
  TSR_RUN(strbuf_reserve_then_append);
  TSR_RUN(strbuf_printf_grows);
  TSR_RUN(bf16_round_to_nearest_even);
  TSR_RUN(f16_conversions);
  TSR_RUN(array_overflow_is_an_error);
  TSR_RUN(alloc_failure_injection);
  TSR_RUN(dtype_table);
  TSR_RUN(module_path_order);
  TSR_RUN(expf_is_the_same_with_and_without_fma);
  return tsr_test_done();
}
