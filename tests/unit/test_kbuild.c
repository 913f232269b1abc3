/* kernels/kbuild.h, the kernel library's conveniences over the builder:
 * a kernel built with them verifies and runs, and a failure anywhere in a
 * generator comes out of kb_finish once, with nothing leaked. */
#include "harness.h"
#include "kernels/kbuild.h"

static const int64_t dims[2] = {8, 128};

/* y = roll(x, 1, axis 1) + 3 * x through a loop, then y[0, :] = -1 where the
 * first row of x is negative (an if on program_id, a compare and a select). */
static tsr_status_t build_smoke(tsr_ir_module_t **out_module) {
  kb_t b;
  kb_begin(&b, "kb_smoke");
  kb_grid(&b, 1, (int64_t[]){1}, NULL);
  tsr_ir_value_t *x = kb_operand(&b, TSR_ROLE_IN, "x", TSR_DTYPE_F32, 2, dims, TSR_SPACE_VMEM,
                                 NULL, NULL);
  tsr_ir_value_t *y = kb_operand(&b, TSR_ROLE_OUT, "y", TSR_DTYPE_F32, 2, dims, TSR_SPACE_VMEM,
                                 NULL, NULL);
  tsr_ir_value_t *v = kb_load_all(&b, x);
  tsr_ir_value_t *acc = kb_roll(&b, v, kb_i32(&b, 1), 1);
  kb_for_t loop = kb_begin_for(&b, kb_i32(&b, 0), kb_i32(&b, 3), &acc, 1);
  tsr_ir_value_t *next = kb_binary(&b, "add", kb_for_carried(&loop, 0), v);
  kb_end_for(&b, &loop, &next, 1);
  kb_store_all(&b, y, kb_for_result(&loop, 0));
  kb_for_t branch = kb_begin_if(&b, kb_compare(&b, "eq", kb_program_id(&b, 0), kb_i32(&b, 0)));
  tsr_ir_type_t row_t = kb_vec(TSR_DTYPE_F32, 1, (int64_t[]){128});
  tsr_ir_index_t row0[2] = {kb_point(0), kb_full()};
  tsr_ir_value_t *row = kb_load(&b, x, row0, 2, NULL, 0, row_t);
  tsr_ir_value_t *neg = kb_compare(&b, "lt", row, kb_const_f(&b, row_t, 0.0));
  tsr_ir_value_t *old = kb_load(&b, y, row0, 2, NULL, 0, row_t);
  kb_store(&b, y, row0, 2, NULL, 0, kb_select(&b, neg, kb_const_f(&b, row_t, -1.0), old));
  kb_end_if(&b, &branch);
  return kb_finish(&b, out_module);
}

TSR_TEST(built_kernel_verifies_and_runs) {
  tsr_ir_module_t *m = NULL;
  TSR_CHECK_OK(build_smoke(&m));
  if (!m) return;
  tsr_context_t *ctx = NULL;
  TSR_CHECK_OK(tsr_context_create(NULL, &ctx));
  tsr_executable_t *exe = NULL;
  if (ctx) TSR_CHECK_OK(tsr_executable_create(ctx, tsr_ir_module_kernel(m, 0), NULL, &exe));
  if (exe) {
    tsr_array_t a, r;
    TSR_CHECK_OK(tsr_array_initialize(TSR_DTYPE_F32, 2, dims, &a));
    TSR_CHECK_OK(tsr_array_initialize(TSR_DTYPE_F32, 2, dims, &r));
    float *in = a.data, *out = r.data;
    for (int i = 0; i < 8 * 128; i++) in[i] = (float)((i * 37) % 101) - 20.0f;
    tsr_array_t *operands[] = {&a, &r};
    TSR_CHECK_OK(tsr_executable_run(exe, operands, 2, NULL, NULL));
    int bad = 0;
    for (int i = 0; i < 8; i++)
      for (int j = 0; j < 128; j++) {
        float want = in[i * 128 + (j + 127) % 128] + 3.0f * in[i * 128 + j];
        if (i == 0 && in[j] < 0) want = -1.0f;
        bad += out[i * 128 + j] != want;
      }
    TSR_CHECK_EQ_INT(bad, 0);
    tsr_array_deinitialize(&a);
    tsr_array_deinitialize(&r);
  }
  tsr_executable_destroy(exe);
  tsr_context_destroy(ctx);
  tsr_ir_module_destroy(m);
}

/* A type error in the middle: later calls do nothing, kb_finish reports the
 * verifier's message once and frees the module (ASan checks the leak). */
TSR_TEST(failure_is_reported_once_at_finish) {
  kb_t b;
  kb_begin(&b, "kb_bad");
  kb_grid(&b, 1, (int64_t[]){1}, NULL);
  tsr_ir_value_t *x = kb_operand(&b, TSR_ROLE_IN, "x", TSR_DTYPE_F32, 2, dims, TSR_SPACE_VMEM,
                                 NULL, NULL);
  tsr_ir_value_t *v = kb_load_all(&b, x);
  kb_binary(&b, "add", v, kb_i32(&b, 1)); /* f32 block + i32 scalar */
  tsr_ir_value_t *bogus = kb_unary(&b, "no_such_op", v);
  TSR_CHECK(bogus == NULL && !kb_ok(&b));
  TSR_CHECK(kb_unary(&b, "neg", v) == NULL); /* after a failure: nothing */
  tsr_ir_module_t *m = NULL;
  tsr_status_t s = kb_finish(&b, &m);
  TSR_CHECK(s != NULL && m == NULL);
  if (s) {
    TSR_CHECK(strstr(tsr_status_message(s), "no_such_op") != NULL);
    tsr_status_free(s);
  }
}

TSR_TEST(op_names_round_trip) {
  for (int op = 0; op < TSR_KERNELS_OP_COUNT; op++) {
    tsr_kernels_op_t back = TSR_KERNELS_OP_COUNT;
    TSR_CHECK(tsr_kernels_op_from_name(tsr_kernels_op_name((tsr_kernels_op_t)op), &back));
    TSR_CHECK_EQ_INT((int)back, op);
  }
  tsr_kernels_op_t unused;
  TSR_CHECK(!tsr_kernels_op_from_name("median", &unused));
  TSR_CHECK(tsr_kernels_op_name(TSR_KERNELS_OP_COUNT) == NULL);
}

int main(void) {
  TSR_RUN(built_kernel_verifies_and_runs);
  TSR_RUN(failure_is_reported_once_at_finish);
  TSR_RUN(op_names_round_trip);
  return tsr_test_done();
}
