/* Unit tests for the interpreter's semantics: the grid pipeline (copy counts,
 * resident output blocks, revisits, shuffling, aliases, ragged edges),
 * control flow, scoped buffers, masks, the checks and their diagnostics, and
 * concurrent runs of one program. Kernels are written inline. */
#define _GNU_SOURCE /* fopencookie, in tests/unit/write_counter.h */
#include "tests/unit/write_counter.h"

#include <math.h>
#include <pthread.h>

#include "tests/harness.h"

#include "tests/unit/interp_fixture.h"

static const char *copy_kernel =
    "kernel @k\n"
    "  grid(2, 2) semantics(parallel, arbitrary)\n"
    "  in %x: f32[16, 128] vmem block[8, 128] map(%i, %j) -> (%i, 0)\n"
    "  out %o: f32[16, 256] vmem block[8, 128] map(%i, %j) -> (%i, %j)\n"
    "{\n"
    "  %v = load %x[:, :] : f32[8, 128]\n"
    "  store %o[:, :], %v\n"
    "}\n";

TSR_TEST(inputs_copied_only_when_block_changes) {
  fixture_t f;
  TSR_CHECK_OK(setup(&f, copy_kernel, NULL));
  fill_iota_f32(&f.arrays[0]);
  TSR_CHECK_OK(run(&f));
  TSR_CHECK_EQ_INT(f.stats.grid_steps, 4);
  TSR_CHECK_EQ_INT(f.stats.blocks_copied_in, 2);
  TSR_CHECK_EQ_INT(f.stats.blocks_copied_out, 4);
  /* o[r, c] = x[r, c % 128] */
  int bad = 0;
  for (int r = 0; r < 16; r++)
    for (int c = 0; c < 256; c++)
      if (f32(&f, 1)[r * 256 + c] != (float)(r * 128 + c % 128)) bad++;
  TSR_CHECK_EQ_INT(bad, 0);
  teardown(&f);
}

TSR_TEST(resident_output_accumulates) {
  /* o[i] = sum over j of x[i, j-th block]: the output block stays resident
   * across the arbitrary axis and is copied out once per i. */
  const char *text =
      "kernel @k\n"
      "  grid(2, 3) semantics(parallel, arbitrary)\n"
      "  in %x: f32[16, 384] vmem block[8, 128] map(%i, %j) -> (%i, %j)\n"
      "  out %o: f32[16, 128] vmem block[8, 128] map(%i, %j) -> (%i, 0)\n"
      "{\n"
      "  %j = program_id 1 : i32\n"
      "  %zero = const 0 : i32\n"
      "  %first = eq %j, %zero : i1\n"
      "  if %first {\n"
      "    %z = const 0.0 : f32[8, 128]\n"
      "    store %o[:, :], %z\n"
      "  }\n"
      "  %v = load %x[:, :] : f32[8, 128]\n"
      "  %a = load %o[:, :] : f32[8, 128]\n"
      "  %s = add %a, %v : f32[8, 128]\n"
      "  store %o[:, :], %s\n"
      "}\n";
  fixture_t f;
  TSR_CHECK_OK(setup(&f, text, NULL));
  fill_iota_f32(&f.arrays[0]);
  TSR_CHECK_OK(run(&f));
  TSR_CHECK_EQ_INT(f.stats.blocks_copied_out, 2);
  int bad = 0;
  for (int r = 0; r < 16; r++)
    for (int c = 0; c < 128; c++) {
      float want = 0;
      for (int j = 0; j < 3; j++) want += (float)(r * 384 + j * 128 + c);
      if (f32(&f, 1)[r * 128 + c] != want) bad++;
    }
  TSR_CHECK_EQ_INT(bad, 0);
  teardown(&f);
}

/* Rank-0 arrays as inputs and outputs (a Pallas kernel may take and return
 * them): the whole array is the block at every step, in vmem or smem. */
TSR_TEST(rank0_inputs_and_outputs) {
  const char *text =
      "kernel @k\n"
      "  grid(3) semantics(arbitrary)\n"
      "  in %x: f32 vmem\n"
      "  in %n: i32 smem\n"
      "  in %a: f32[24, 128] vmem block[8, 128] map(%i) -> (%i, 0)\n"
      "  out %y: f32 smem\n"
      "  out %m: i32 vmem\n"
      "{\n"
      "  %i = program_id 0 : i32\n"
      "  %x0 = load %x[] : f32\n"
      "  %n0 = load %n[] : i32\n"
      "  %e = load %a[0, 5] : f32\n"
      "  %s = mul %x0, %e : f32\n"
      "  store %y[], %s\n"
      "  %t = mul %n0, %i : i32\n"
      "  store %m[], %t\n"
      "}\n";
  fixture_t f;
  TSR_CHECK_OK(setup(&f, text, NULL));
  TSR_CHECK_EQ_INT((int)f.arrays[0].rank, 0);
  TSR_CHECK_EQ_INT((int)f.arrays[4].rank, 0);
  f32(&f, 0)[0] = 1.5f;
  i32(&f, 1)[0] = -7;
  fill_iota_f32(&f.arrays[2]);
  TSR_CHECK_OK(run(&f));
  /* the last step (2) wins: its block starts at row 16 */
  TSR_CHECK(f32(&f, 3)[0] == 1.5f * (float)(16 * 128 + 5));
  TSR_CHECK_EQ_INT(i32(&f, 4)[0], -7 * 2);
  teardown(&f);
}

TSR_TEST(revisited_output_block_is_an_error) {
  const char *text =
      "kernel @k\n"
      "  grid(2, 2) semantics(arbitrary, arbitrary)\n"
      "  out %o: f32[16, 128] vmem block[8, 128] map(%i, %j) -> (%j, 0)\n"
      "{\n"
      "  %z = const 1.0 : f32[8, 128]\n"
      "  store %o[:, :], %z\n"
      "}\n";
  fixture_t f;
  TSR_CHECK_OK(setup(&f, text, NULL));
  const char *needles[] = {"test.tsr:3:7: error: kernel @k, grid point (1, 0)",
                           "out %o", "block [0, 0] is revisited at step 2",
                           "written in steps 0..0", NULL};
  expect_kernel_error(run(&f), needles);
  teardown(&f);
}

/* The visited output blocks live in a table indexed by block number, or in
 * a hash set when the array has more than 2^20 blocks: both say the same,
 * with the steps of the first visit (its last step recorded at copy-out). */
TSR_TEST(revisits_are_found_in_small_and_huge_arrays) {
  static const struct {
    const char *out; /* the output's declaration */
  } cases[] = {
      {"  out %o: f32[64] vmem block[8] map(%i, %j, %k) -> (%j)\n"},
      /* 2^21 blocks: the hash set */
      {"  out %o: f32[2097152] vmem block[1] map(%i, %j, %k) -> (%j)\n"},
  };
  for (size_t c = 0; c < TSR_ARRAY_SIZE(cases); c++) {
    char text[512];
    snprintf(text, sizeof text,
             "kernel @k\n"
             "  grid(2, 2, 2) semantics(arbitrary, arbitrary, arbitrary)\n"
             "%s"
             "{\n"
             "  %%z = const 1.0 : f32\n"
             "  store %%o[0], %%z\n"
             "}\n",
             cases[c].out);
    fixture_t f;
    TSR_CHECK_OK(setup(&f, text, NULL));
    /* block 0 at steps 0..1, block 1 at 2..3, block 0 again at step 4 */
    const char *needles[] = {"error: kernel @k, grid point (1, 0, 0)", "out %o",
                             "block [0] is revisited at step 4", "written in steps 0..1",
                             NULL};
    expect_kernel_error(run(&f), needles);
    teardown(&f);
  }
}

/* Element dims: the window at element offset o of the array padded by 2
 * before starts at array row o - 2; its rows outside the array hold the
 * pad value (NaN here), and an offset outside the padded array is an error
 * naming it. */
TSR_TEST(element_windows_and_their_padding) {
  const char *text =
      "kernel @k\n"
      "  grid(3) semantics(arbitrary)\n"
      "  in %x: f32[10, 128] vmem block[element(8, 2, 1), 128] map(%i) {\n"
      "    %five = const 5 : i32\n"
      "    %o = mul %i, %five : i32\n"
      "    %zero = const 0 : i32\n"
      "    yield %o, %zero\n"
      "  }\n"
      "  out %y: f32[3, 8, 128] vmem block[squeezed, 8, 128] map(%i) -> (%i, 0, 0)\n"
      "{\n"
      "  %v = load %x[:, :] : f32[8, 128]\n"
      "  store %y[:, :], %v\n"
      "}\n";
  fixture_t f;
  TSR_CHECK_OK(setup(&f, text, NULL));
  fill_iota_f32(&f.arrays[0]);
  TSR_CHECK_OK(run(&f));
  int bad = 0;
  for (int i = 0; i < 3; i++)
    for (int r = 0; r < 8; r++)
      for (int c = 0; c < 128; c++) {
        int row = 5 * i - 2 + r;
        float got = f32(&f, 1)[(i * 8 + r) * 128 + c];
        if (row < 0 || row >= 10 ? got == got : got != (float)(row * 128 + c)) bad++;
      }
  TSR_CHECK_EQ_INT(bad, 0);
  teardown(&f);
  /* offset 13 = 2 + 10 + 1: past the padded array */
  const char *oob =
      "kernel @k\n"
      "  grid(2) semantics(arbitrary)\n"
      "  in %x: f32[10, 128] vmem block[element(8, 2, 1), 128] map(%i) {\n"
      "    %c = const 13 : i32\n"
      "    %zero = const 0 : i32\n"
      "    yield %c, %zero\n"
      "  }\n"
      "  out %y: f32[8, 128] vmem block[8, 128] map(%i) -> (0, 0)\n"
      "{\n"
      "  %v = load %x[:, :] : f32[8, 128]\n"
      "  store %y[:, :], %v\n"
      "}\n";
  TSR_CHECK_OK(setup(&f, oob, NULL));
  const char *needles[] = {"in %x", "block index [13, 0]", "element offset, below [13, 1]",
                           NULL};
  expect_kernel_error(run(&f), needles);
  teardown(&f);
}

static const char *order_kernel =
    "kernel @k\n"
    "  grid(16) semantics(parallel)\n"
    "  out %o: i32[16] smem\n"
    "  scratch %n: smem i32[1]\n"
    "{\n"
    "  %i = program_id 0 : i32\n"
    "  %zero = const 0 : i32\n"
    "  %one = const 1 : i32\n"
    "  %c = load %n[%zero] : i32\n"
    "  store %o[%i], %c\n"
    "  %c1 = add %c, %one : i32\n"
    "  store %n[%zero], %c1\n"
    "}\n";

TSR_TEST(shuffled_parallel_order_is_seeded) {
  /* Records the step at which each grid point ran. */
  tsr_interp_options_t o;
  tsr_interp_options_initialize(&o);
  o.uninit = TSR_UNINIT_ZERO;
  o.check = false; /* the counter starts at the uninitialized value: zero */
  fixture_t f;
  TSR_CHECK_OK(setup(&f, order_kernel, &o));
  TSR_CHECK_OK(run(&f));
  int identity = 1;
  for (int i = 0; i < 16; i++) identity &= i32(&f, 0)[i] == i;
  TSR_CHECK(identity);
  teardown(&f);

  o.shuffle_parallel = true;
  o.shuffle_seed = 7;
  int32_t first[16];
  TSR_CHECK_OK(setup(&f, order_kernel, &o));
  TSR_CHECK_OK(run(&f));
  memcpy(first, f.arrays[0].data, sizeof first);
  int seen[16] = {0}, same = 1;
  for (int i = 0; i < 16; i++) {
    if (first[i] >= 0 && first[i] < 16) seen[first[i]]++;
    same &= first[i] == i;
  }
  for (int i = 0; i < 16; i++) TSR_CHECK_EQ_INT(seen[i], 1);
  TSR_CHECK(!same); /* 1 in 16! chance to be identity for a given seed */
  TSR_CHECK_OK(run(&f));
  TSR_CHECK(memcmp(first, f.arrays[0].data, sizeof first) == 0);
  teardown(&f);
}

TSR_TEST(aliased_output_starts_from_input) {
  const char *text =
      "kernel @k\n"
      "  grid(4) semantics(parallel)\n"
      "  in %x: f32[32, 128] vmem block[8, 128] map(%i) -> (%i, 0)\n"
      "  out %o: f32[32, 128] vmem block[8, 128] map(%i) -> (%i, 0) alias %x\n"
      "{\n"
      "  %v = load %x[:, :] : f32[8, 128]\n"
      "  %one = const 1.0 : f32\n"
      "  %w = add %v, %one : f32[8, 128]\n"
      "  store %o[:, :], %w\n"
      "}\n";
  fixture_t f;
  TSR_CHECK_OK(setup(&f, text, NULL));
  fill_iota_f32(&f.arrays[0]);
  TSR_CHECK_OK(run(&f));
  int bad = 0;
  for (int i = 0; i < 32 * 128; i++)
    if (f32(&f, 1)[i] != (float)i + 1.0f) bad++;
  TSR_CHECK_EQ_INT(bad, 0);
  teardown(&f);
}

TSR_TEST(ragged_edges_are_padded_and_not_written_back) {
  const char *text =
      "kernel @k\n"
      "  grid(3, 2) semantics(parallel, parallel)\n"
      "  in %x: f32[20, 200] vmem block[8, 128] map(%i, %j) -> (%i, %j)\n"
      "  out %o: f32[20, 200] vmem block[8, 128] map(%i, %j) -> (%i, %j)\n"
      "{\n"
      "  %v = load %x[:, :] : f32[8, 128]\n"
      "  %two = const 2.0 : f32\n"
      "  %w = mul %v, %two : f32[8, 128]\n"
      "  store %o[:, :], %w\n"
      "}\n";
  fixture_t f;
  TSR_CHECK_OK(setup(&f, text, NULL));
  fill_iota_f32(&f.arrays[0]);
  TSR_CHECK_OK(run(&f));
  int bad = 0;
  for (int i = 0; i < 20 * 200; i++)
    if (f32(&f, 1)[i] != 2.0f * (float)i) bad++;
  TSR_CHECK_EQ_INT(bad, 0);
  teardown(&f);
}

TSR_TEST(control_flow_loops_and_swaps) {
  /* for: fibonacci with swapped carried values; while: count to 10;
   * if with results. out[0] = fib(10) = 55, out[1] = 10, out[2] = 7. */
  const char *text =
      "kernel @k\n"
      "  out %o: i32[3] smem\n"
      "{\n"
      "  %zero = const 0 : i32\n"
      "  %one = const 1 : i32\n"
      "  %ten = const 10 : i32\n"
      "  %a, %b = for %i = %zero to %ten step %one iter(%x = %zero, %y = %one) : i32, i32 {\n"
      "    %s = add %x, %y : i32\n"
      "    yield %y, %s\n"
      "  }\n"
      "  store %o[%zero], %a\n"
      "  %n = while iter(%c = %zero) : i32 {\n"
      "    %more = lt %c, %ten : i1\n"
      "    condition %more\n"
      "  } do {\n"
      "    %c1 = add %c, %one : i32\n"
      "    yield %c1\n"
      "  }\n"
      "  store %o[%one], %n\n"
      "  %t = gt %n, %one : i1\n"
      "  %r = if %t : i32 {\n"
      "    %seven = const 7 : i32\n"
      "    yield %seven\n"
      "  } else {\n"
      "    yield %zero\n"
      "  }\n"
      "  %two = const 2 : i32\n"
      "  store %o[%two], %r\n"
      "}\n";
  fixture_t f;
  TSR_CHECK_OK(setup(&f, text, NULL));
  TSR_CHECK_OK(run(&f));
  TSR_CHECK_EQ_INT(i32(&f, 0)[0], 55);
  TSR_CHECK_EQ_INT(i32(&f, 0)[1], 10);
  TSR_CHECK_EQ_INT(i32(&f, 0)[2], 7);
  teardown(&f);
}

TSR_TEST(vector_loop_carried_swap) {
  /* Two carried blocks swapped each iteration (odd count: swapped at end). */
  const char *text =
      "kernel @k\n"
      "  out %o: f32[2, 8, 128] vmem\n"
      "{\n"
      "  %zero = const 0 : i32\n"
      "  %one = const 1 : i32\n"
      "  %three = const 3 : i32\n"
      "  %a0 = const 1.0 : f32[8, 128]\n"
      "  %b0 = const 2.0 : f32[8, 128]\n"
      "  %a, %b = for %i = %zero to %three step %one iter(%x = %a0, %y = %b0) : f32[8, 128], f32[8, 128] {\n"
      "    yield %y, %x\n"
      "  }\n"
      "  store %o[%zero, :, :], %a\n"
      "  store %o[%one, :, :], %b\n"
      "}\n";
  fixture_t f;
  TSR_CHECK_OK(setup(&f, text, NULL));
  TSR_CHECK_OK(run(&f));
  TSR_CHECK(f32(&f, 0)[0] == 2.0f && f32(&f, 0)[1023] == 2.0f);
  TSR_CHECK(f32(&f, 0)[1024] == 1.0f && f32(&f, 0)[2047] == 1.0f);
  teardown(&f);
}

TSR_TEST(uninitialized_scratch_read_is_reported) {
  const char *text =
      "kernel @k\n"
      "  out %o: f32[8, 128] vmem\n"
      "  scratch %s: vmem f32[8, 128]\n"
      "{\n"
      "  %h = const 1.0 : f32[4, 128]\n"
      "  store %s[0:4, :], %h\n"
      "  %v = load %s[:, :] : f32[8, 128]\n"
      "  store %o[:, :], %v\n"
      "}\n";
  /* A warning, not an error: reading garbage is legal on
   * a TPU, only a result computed from it is wrong; under either fill. */
  const char *needles[] = {"test.tsr:7:", "'load'", "read of uninitialized memory",
                           "%s[4, 0]", NULL};
  tsr_interp_options_t o;
  tsr_interp_options_initialize(&o);
  free(expect_kernel_warning(text, &o, needles));
  o.uninit = TSR_UNINIT_ZERO;
  free(expect_kernel_warning(text, &o, needles));
  /* Without checks the read is silent and yields the fill value. */
  fixture_t f;
  o.check = false;
  o.uninit = TSR_UNINIT_ZERO;
  TSR_CHECK_OK(setup(&f, text, &o));
  TSR_CHECK_OK(run(&f));
  TSR_CHECK(f32(&f, 0)[0] == 1.0f && f32(&f, 0)[4 * 128] == 0.0f);
  teardown(&f);
}

TSR_TEST(scoped_buffers_start_uninitialized) {
  const char *text =
      "kernel @k\n"
      "  out %o: f32[8, 128] vmem\n"
      "{\n"
      "  %r = scoped(%t: vmem f32[8, 128]) : f32[8, 128] {\n"
      "    %v = load %t[:, :] : f32[8, 128]\n"
      "    yield %v\n"
      "  }\n"
      "  store %o[:, :], %r\n"
      "}\n";
  const char *needles[] = {"read of uninitialized memory: %t[0, 0]", NULL};
  free(expect_kernel_warning(text, NULL, needles));
}

TSR_TEST(never_written_output_is_reported) {
  const char *text =
      "kernel @k\n"
      "  grid(2) semantics(parallel)\n"
      "  out %o: f32[16, 128] vmem block[8, 128] map(%i) -> (%i, 0)\n"
      "{\n"
      "  %h = const 1.0 : f32[8, 64]\n"
      "  store %o[:, 0:64], %h\n"
      "}\n";
  /* A warning: Pallas leaves such elements as they were. */
  const char *needles[] = {"out %o", "1024 of 2048 output elements were never written",
                           "first at [0, 64]", NULL};
  free(expect_kernel_warning(text, NULL, needles));
}

TSR_TEST(dynamic_index_out_of_bounds) {
  const char *text =
      "kernel @k\n"
      "  grid(4) semantics(arbitrary)\n"
      "  out %o: f32[8, 128] vmem\n"
      "{\n"
      "  %i = program_id 0 : i32\n"
      "  %three = const 3 : i32\n"
      "  %s = mul %i, %three : i32\n"
      "  %v = const 1.0 : f32[4, 128]\n"
      "  store %o[ds(%s, 4), :], %v\n"
      "}\n";
  fixture_t f;
  TSR_CHECK_OK(setup(&f, text, NULL));
  const char *needles[] = {"grid point (2)", "'store'",
                           "slice 6:10:1 out of bounds for dimension 0 of %o "
                           "(shape [8, 128])",
                           NULL};
  expect_kernel_error(run(&f), needles);
  teardown(&f);
}

/* A dynamic grid extent: the prefetch operand's value when the run starts
 * sizes the grid (num_programs reads it too); zero runs no step; a negative
 * one is the kernel's located error. */
static const char *dynamic_grid_kernel =
    "kernel @k\n"
    "  grid(%n, 2) semantics(parallel, arbitrary)\n"
    "  prefetch %n: i32\n"
    "  in %x: f32[32, 256] vmem block[8, 128] map(%i, %j) -> (%i, %j)\n"
    "  out %o: f32[32, 256] vmem block[8, 128] map(%i, %j) -> (%i, %j)\n"
    "{\n"
    "  %v = load %x[:, :] : f32[8, 128]\n"
    "  %np = num_programs 0 : i32\n"
    "  %f = convert %np : f32\n"
    "  %b = broadcast %f : f32[8, 128]\n"
    "  %s = mul %v, %b : f32[8, 128]\n"
    "  store %o[:, :], %s\n"
    "}\n";

TSR_TEST(dynamic_grid_extent_is_read_at_run_start) {
  for (int32_t n = 0; n <= 4; n++) {
    fixture_t f;
    TSR_CHECK_OK(setup(&f, dynamic_grid_kernel, NULL));
    i32(&f, 0)[0] = n;
    fill_iota_f32(&f.arrays[1]);
    FILE *quiet = fopen("/dev/null", "w");
    f.warning_stream = quiet; /* rows the grid does not reach are never written */
    TSR_CHECK_OK(run(&f));
    if (quiet) fclose(quiet);
    TSR_CHECK_EQ_INT(f.stats.grid_steps, 2 * n);
    int bad = 0;
    for (int r = 0; r < 8 * n; r++)
      for (int c = 0; c < 256; c++)
        if (f32(&f, 2)[r * 256 + c] != (float)(r * 256 + c) * (float)n) bad++;
    TSR_CHECK_EQ_INT(bad, 0);
    teardown(&f);
  }
  fixture_t f;
  TSR_CHECK_OK(setup(&f, dynamic_grid_kernel, NULL));
  i32(&f, 0)[0] = -1;
  const char *needles[] = {"test.tsr:1:8", "grid dim 0's extent (%n) is -1", NULL};
  expect_kernel_error(run(&f), needles);
  teardown(&f);
}

/* Run-time extents whose product overflows the step count: the kernel's
 * error, before any step. */
TSR_TEST(dynamic_grid_overflow_is_an_error) {
  const char *text =
      "kernel @k\n"
      "  grid(%a, %b, %c)\n"
      "  prefetch %a: i32\n"
      "  prefetch %b: i32\n"
      "  prefetch %c: i32\n"
      "  out %o: f32[8, 128] vmem\n"
      "{\n"
      "}\n";
  fixture_t f;
  TSR_CHECK_OK(setup(&f, text, NULL));
  for (int i = 0; i < 3; i++) i32(&f, (size_t)i)[0] = INT32_MAX;
  const char *needles[] = {"test.tsr:1:8", "more than 2^63 steps", NULL};
  expect_kernel_error(run(&f), needles);
  TSR_CHECK_EQ_INT(f.stats.grid_steps, 0);
  teardown(&f);
}

TSR_TEST(dynamic_grid_round_trips_and_is_checked) {
  tsr_ir_module_t *m = NULL;
  TSR_CHECK_OK(tsr_ir_module_parse(TSR_SV("test.tsr"),
                                   (tsr_string_view_t){dynamic_grid_kernel,
                                                       strlen(dynamic_grid_kernel)},
                                   &m));
  TSR_CHECK_OK(tsr_ir_module_verify(m));
  tsr_ir_module_destroy(m);
  m = NULL;
  /* The extent is a rank-0 i32 prefetch operand. */
  const char *bad =
      "kernel @k\n"
      "  grid(%t)\n"
      "  prefetch %t: i32[2]\n"
      "  out %o: f32[8, 128] vmem\n"
      "{\n"
      "}\n";
  tsr_status_t s = tsr_ir_module_parse(TSR_SV("test.tsr"),
                                       (tsr_string_view_t){bad, strlen(bad)}, &m);
  if (!s) s = tsr_ir_module_verify(m);
  TSR_CHECK(s != NULL);
  if (s) TSR_CHECK(strstr(tsr_status_message(s), "rank-0 i32 prefetch operand") != NULL);
  tsr_status_free(s);
  tsr_ir_module_destroy(m);
  m = NULL;
  const char *unknown =
      "kernel @k\n"
      "  grid(%q)\n"
      "  out %o: f32[8, 128] vmem\n"
      "{\n"
      "}\n";
  s = tsr_ir_module_parse(TSR_SV("test.tsr"), (tsr_string_view_t){unknown, strlen(unknown)},
                          &m);
  TSR_CHECK(s != NULL);
  if (s) TSR_CHECK(strstr(tsr_status_message(s), "test.tsr:2:8") != NULL);
  tsr_status_free(s);
  tsr_ir_module_destroy(m);
}

TSR_TEST(index_map_out_of_range) {
  const char *text =
      "kernel @k\n"
      "  grid(3) semantics(parallel)\n"
      "  in %x: f32[16, 128] vmem block[8, 128] map(%i) -> (%i, 0)\n"
      "  out %o: f32[24, 128] vmem block[8, 128] map(%i) -> (%i, 0)\n"
      "{\n"
      "  %v = load %x[:, :] : f32[8, 128]\n"
      "  store %o[:, :], %v\n"
      "}\n";
  fixture_t f;
  TSR_CHECK_OK(setup(&f, text, NULL));
  const char *needles[] = {"test.tsr:3:", "grid point (2)", "in %x",
                           "block index [2, 0], out of range for array shape "
                           "[16, 128] with block [8, 128] (block counts [2, 1])",
                           NULL};
  expect_kernel_error(run(&f), needles);
  teardown(&f);
}

TSR_TEST(masked_load_and_store) {
  /* Keep the elements of x below 100, write zero elsewhere via the mask. */
  const char *text =
      "kernel @k\n"
      "  in %x: f32[8, 128] vmem\n"
      "  out %o: f32[8, 128] vmem\n"
      "{\n"
      "  %z = const 0.0 : f32[8, 128]\n"
      "  store %o[:, :], %z\n"
      "  %idx = iota 1 : i32[8, 128]\n"
      "  %lim = const 100 : i32\n"
      "  %m = lt %idx, %lim : i1[8, 128]\n"
      "  %v = load %x[:, :] mask %m : f32[8, 128]\n"
      "  store %o[:, :], %v mask %m\n"
      "}\n";
  fixture_t f;
  TSR_CHECK_OK(setup(&f, text, NULL));
  fill_iota_f32(&f.arrays[0]);
  TSR_CHECK_OK(run(&f));
  int bad = 0;
  for (int r = 0; r < 8; r++)
    for (int c = 0; c < 128; c++)
      if (f32(&f, 1)[r * 128 + c] != (c < 100 ? (float)(r * 128 + c) : 0.0f)) bad++;
  TSR_CHECK_EQ_INT(bad, 0);
  teardown(&f);
}

TSR_TEST(errors_are_collected_up_to_the_limit) {
  const char *text =
      "kernel @k\n"
      "  grid(2) semantics(arbitrary)\n"
      "  out %o: f32[8, 128] vmem\n"
      "  scratch %s: vmem f32[8, 128]\n"
      "{\n"
      "  %n = const 9 : i32\n"
      "  %a = load %s[ds(%n, 1), :] : f32[1, 128]\n"
      "  %b = load %s[ds(%n, 2), :] : f32[2, 128]\n"
      "  %c = load %s[ds(%n, 3), :] : f32[3, 128]\n"
      "  %z = const 0.0 : f32[8, 128]\n"
      "  store %o[:, :], %z\n"
      "}\n";
  fixture_t f;
  TSR_CHECK_OK(setup(&f, text, NULL));
  tsr_status_t s = run(&f);
  TSR_CHECK_EQ_INT(tsr_status_code(s), TSR_KERNEL_ERROR);
  /* three sites, each reported once; the second step's repeats are counted */
  TSR_CHECK_EQ_INT(tsr_status_diagnostic_count(s), 4);
  TSR_CHECK(strstr(tsr_status_message(s), "3 more occurrences") != NULL);
  tsr_status_free(s);
  teardown(&f);
  tsr_interp_options_t o;
  tsr_interp_options_initialize(&o);
  o.max_errors = 2;
  TSR_CHECK_OK(setup(&f, text, &o));
  s = run(&f);
  TSR_CHECK_EQ_INT(tsr_status_diagnostic_count(s), 2);
  TSR_CHECK_EQ_INT(f.stats.grid_steps, 1); /* stopped at the limit */
  tsr_status_free(s);
  teardown(&f);
}

TSR_TEST(vmem_budget_per_chip) {
  const char *text =
      "kernel @k\n"
      "  grid(2) semantics(parallel)\n"
      "  in %x: f32[4096, 1024] vmem block[2048, 1024] map(%i) -> (%i, 0)\n"
      "  out %o: f32[4096, 1024] vmem block[2048, 1024] map(%i) -> (%i, 0)\n"
      "{\n"
      "  %v = load %x[:, :] : f32[2048, 1024]\n"
      "  store %o[:, :], %v\n"
      "}\n";
  /* 2 operands x 2 buffers x 8 MiB = 32 MiB: fits v5e, not v4. */
  tsr_interp_options_t o;
  tsr_interp_options_initialize(&o);
  fixture_t f;
  TSR_CHECK_OK(setup(&f, text, &o));
  teardown(&f);
  o.chip = "v4";
  tsr_status_t s = setup(&f, text, &o);
  TSR_CHECK_EQ_INT(tsr_status_code(s), TSR_RESOURCE_EXHAUSTED);
  TSR_CHECK(strstr(tsr_status_message(s), "needs 32.0 MiB of VMEM but chip v4 has "
                                          "16.0 MiB") != NULL);
  TSR_CHECK(strstr(tsr_status_message(s), "in %x 2 x 8.0 MiB") != NULL);
  tsr_status_free(s);
  teardown(&f);
  /* i4 windows counted packed, as a TPU holds them: 2 x 2 x 4 MiB fits
   * v4's 16 MiB (one per byte, as the host arrays hold them, would not). */
  o.chip = "v4";
  TSR_CHECK_OK(setup(&f,
                     "kernel @k\n"
                     "  grid(2) semantics(parallel)\n"
                     "  in %x: i4[4096, 4096] vmem block[2048, 4096] map(%i) -> (%i, 0)\n"
                     "  out %o: i4[4096, 4096] vmem block[2048, 4096] map(%i) -> (%i, 0)\n"
                     "{\n"
                     "  %v = load %x[:, :] : i4[2048, 4096]\n"
                     "  store %o[:, :], %v\n"
                     "}\n",
                     &o));
  teardown(&f);
  /* Scalar-prefetch tables live in SMEM: 32 KiB is over v2's 16 KiB. */
  const char *prefetch =
      "kernel @k\n"
      "  prefetch %t: i32[8192]\n"
      "  out %o: f32[8, 128] vmem\n"
      "{\n"
      "  %z = const 0.0 : f32[8, 128]\n"
      "  store %o[:, :], %z\n"
      "}\n";
  o.chip = "v2";
  s = setup(&f, prefetch, &o);
  TSR_CHECK_EQ_INT(tsr_status_code(s), TSR_RESOURCE_EXHAUSTED);
  TSR_CHECK(strstr(tsr_status_message(s), "needs 32.0 KiB of SMEM but chip v2 has "
                                          "16.0 KiB") != NULL);
  tsr_status_free(s);
  teardown(&f);
  o.chip = "v5e";
  TSR_CHECK_OK(setup(&f, prefetch, &o));
  teardown(&f);
  o.chip = "v9000";
  s = setup(&f, text, &o);
  TSR_CHECK_EQ_INT(tsr_status_code(s), TSR_INVALID_ARGUMENT);
  tsr_status_free(s);
  teardown(&f);
}

TSR_TEST(assert_and_bad_loop_step) {
  const char *text =
      "kernel @k\n"
      "  out %o: i32[1] smem\n"
      "{\n"
      "  %zero = const 0 : i32\n"
      "  %no = ne %zero, %zero : i1\n"
      "  assert %no, \"zero is zero\"\n"
      "  for %i = %zero to %zero step %zero {\n"
      "  }\n"
      "  store %o[%zero], %zero\n"
      "}\n";
  fixture_t f;
  TSR_CHECK_OK(setup(&f, text, NULL));
  const char *needles[] = {"assertion failed: zero is zero",
                           "for loop step must be positive, got 0", NULL};
  expect_kernel_error(run(&f), needles);
  teardown(&f);
}

TSR_TEST(print_writes_one_call_per_line) {
  const char *text =
      "kernel @k\n"
      "  grid(3) semantics(arbitrary)\n"
      "  out %o: i32[1] smem\n"
      "{\n"
      "  %i = program_id 0 : i32\n"
      "  %v = iota 0 : i32[100]\n"
      "  print \"step {}: {} done\", %i, %v\n"
      "  %zero = const 0 : i32\n"
      "  store %o[%zero], %i\n"
      "}\n";
  write_counter_t wc;
  TSR_CHECK(write_counter_open(&wc));
  if (!wc.stream) return;
  fixture_t f;
  tsr_status_t s = setup(&f, text, NULL);
  f.print_stream = wc.stream;
  TSR_CHECK_OK(s);
  if (!s) TSR_CHECK_OK(run(&f));
  teardown(&f);
  write_counter_close(&wc);
  TSR_CHECK_EQ_INT(wc.writes, 3);
  TSR_CHECK_EQ_INT(wc.partial, 0);
  TSR_CHECK(wc.text && strstr(wc.text, "step 2: [0 1 2 "));
  TSR_CHECK(wc.text && strstr(wc.text, " 63 ...] done\n"));
  write_counter_free(&wc);
}

TSR_TEST(wrong_arrays_are_rejected) {
  fixture_t f;
  TSR_CHECK_OK(setup(&f, copy_kernel, NULL));
  tsr_array_t wrong;
  int64_t dims[2] = {16, 64};
  TSR_CHECK_OK(tsr_array_initialize(TSR_DTYPE_F32, 2, dims, &wrong));
  tsr_array_t *ptrs[2] = {&wrong, f.ptrs[1]};
  tsr_status_t s = tsr_interp_program_run(f.program, ptrs, 2, NULL);
  TSR_CHECK_EQ_INT(tsr_status_code(s), TSR_INVALID_ARGUMENT);
  TSR_CHECK(strstr(tsr_status_message(s), "operand %x: expected f32[16, 128], got "
                                          "f32[16, 64]") != NULL);
  tsr_status_free(s);
  TSR_CHECK_STATUS(tsr_interp_program_run(f.program, ptrs, 1, NULL),
                   TSR_INVALID_ARGUMENT);
  tsr_array_deinitialize(&wrong);
  teardown(&f);
}

typedef struct thread_arg {
  const tsr_interp_program_t *program;
  int ok;
} thread_arg_t;

static void *run_many(void *p) {
  thread_arg_t *t = p;
  int64_t dx[2] = {16, 128}, dout[2] = {16, 256};
  tsr_array_t x, o;
  if (tsr_array_initialize(TSR_DTYPE_F32, 2, dx, &x)) return NULL;
  if (tsr_array_initialize(TSR_DTYPE_F32, 2, dout, &o)) return NULL;
  fill_iota_f32(&x);
  tsr_array_t *ptrs[2] = {&x, &o};
  t->ok = 1;
  for (int rep = 0; rep < 50; rep++) {
    tsr_status_t s = tsr_interp_program_run(t->program, ptrs, 2, NULL);
    if (s) t->ok = 0;
    tsr_status_free(s);
    if (((float *)o.data)[255] != 127.0f) t->ok = 0;
  }
  tsr_array_deinitialize(&x);
  tsr_array_deinitialize(&o);
  return NULL;
}

TSR_TEST(concurrent_runs_of_one_program) {
  fixture_t f;
  TSR_CHECK_OK(setup(&f, copy_kernel, NULL));
  pthread_t th[4];
  thread_arg_t args[4];
  for (int i = 0; i < 4; i++) {
    args[i] = (thread_arg_t){f.program, 0};
    pthread_create(&th[i], NULL, run_many, &args[i]);
  }
  for (int i = 0; i < 4; i++) {
    pthread_join(th[i], NULL);
    TSR_CHECK(args[i].ok);
  }
  teardown(&f);
}

TSR_TEST(module_can_be_destroyed_after_prepare) {
  fixture_t f;
  TSR_CHECK_OK(setup(&f, copy_kernel, NULL));
  tsr_ir_module_destroy(f.module);
  f.module = NULL;
  fill_iota_f32(&f.arrays[0]);
  TSR_CHECK_OK(run(&f));
  TSR_CHECK(f32(&f, 1)[129] == 1.0f);
  teardown(&f);
}

/* Regression: refs of hbm/any operands have no VMEM buffer, but the run used
 * to fill one past the end of the VMEM arena (found by fuzz_tsr). */
TSR_TEST(hbm_operand_has_no_block_buffer) {
  const char *text =
      "kernel @k\n"
      "  in %x: f32[8, 128] vmem\n"
      "  out %o: f32[8, 128] any\n"
      "{\n"
      "  %a = load %x[:, :] : f32[8, 128]\n"
      "}\n";
  const char *needles[] = {"out %o: 1024 of 1024 output elements were never written",
                           NULL};
  free(expect_kernel_warning(text, NULL, needles));
}

/* A result written in place into a store's target (store forwarding) must
 * leave the rest of a lazily filled output block uninitialized. */
TSR_TEST(forwarded_partial_store_keeps_the_rest_uninitialized) {
  const char *text =
      "kernel @k\n"
      "  in %x: f32[8, 128] vmem\n"
      "  out %o: f32[8, 128] vmem\n"
      "{\n"
      "  %v = load %x[0:4, :] : f32[4, 128]\n"
      "  %two = const 2.0 : f32\n"
      "  %w = mul %v, %two : f32[4, 128]\n"
      "  store %o[4:8, :], %w\n"
      "  %r = load %o[0:1, :] : f32[1, 128]\n"
      "}\n";
  tsr_interp_options_t o;
  tsr_interp_options_initialize(&o);
  fixture_t f;
  FILE *warnings = tmpfile();
  TSR_CHECK_OK(setup(&f, text, &o));
  f.warning_stream = warnings;
  fill_iota_f32(&f.arrays[0]);
  TSR_CHECK_OK(run(&f));
  TSR_CHECK_EQ_INT(f.stats.warnings, 2);
  TSR_CHECK(isnan(f32(&f, 1)[0]) && f32(&f, 1)[1023] == 2.0f * 511);
  teardown(&f);
  const char *needles[] = {"test.tsr:9:", "read of uninitialized memory: %o[0, 0]",
                           "512 of 1024 output elements were never written", NULL};
  o.strict = true;
  TSR_CHECK_OK(setup(&f, text, &o));
  fill_iota_f32(&f.arrays[0]);
  expect_kernel_error(run(&f), needles);
  teardown(&f);
  if (warnings) fclose(warnings);
  o.strict = false;
  o.check = false;
  TSR_CHECK_OK(setup(&f, text, &o));
  fill_iota_f32(&f.arrays[0]);
  TSR_CHECK_OK(run(&f));
  TSR_CHECK(isnan(f32(&f, 1)[0]) && isnan(f32(&f, 1)[511]));
  TSR_CHECK(f32(&f, 1)[512] == 0.0f && f32(&f, 1)[1023] == 2.0f * 511);
  teardown(&f);
}

/* A load of a fresh output block stored back into it (what a Pallas
 * `o_ref[...] = o_ref[...]` becomes) reads the uninitialized value: the
 * store covering the whole block once made the load skip the block's fill,
 * and it read whatever the output array held. With and without checks. */
TSR_TEST(output_block_loaded_and_stored_back_holds_the_uninitialized_value) {
  const char *text =
      "kernel @k\n"
      "  grid(2) semantics(arbitrary)\n"
      "  out %o: i32[32, 128] vmem block[16, 128] map(%i) -> (%i, 0)\n"
      "{\n"
      "  %v = load %o[:, :] : i32[16, 128]\n"
      "  store %o[:, :], %v\n"
      "}\n";
  for (int check = 0; check < 2; check++) {
    tsr_interp_options_t o;
    tsr_interp_options_initialize(&o);
    o.check = check;
    FILE *warnings = tmpfile();
    fixture_t f;
    TSR_CHECK_OK(setup(&f, text, &o));
    f.warning_stream = warnings;
    int32_t *out = f.arrays[0].data;
    for (int i = 0; i < 32 * 128; i++) out[i] = 0x5a5a5a5a; /* not the fill */
    TSR_CHECK_OK(run(&f));
    int bad = 0;
    for (int i = 0; i < 32 * 128 && !bad; i++)
      if (out[i] != INT32_MAX) {
        TSR_FAIL_AT("check=%d: element %d is %d, not INT32_MAX", check, i, out[i]);
        bad = 1;
      }
    teardown(&f);
    if (warnings) fclose(warnings);
  }
}

/* The store after a forwarded op reports its own out-of-bounds error once. */
TSR_TEST(forwarded_store_out_of_bounds_reported_once) {
  const char *text =
      "kernel @k\n"
      "  out %o: f32[8, 128] vmem\n"
      "{\n"
      "  %z = const 0.0 : f32[8, 128]\n"
      "  store %o[:, :], %z\n"
      "  %six = const 6 : i32\n"
      "  %v = const 1.0 : f32[4, 128]\n"
      "  %w = neg %v : f32[4, 128]\n"
      "  store %o[ds(%six, 4), :], %w\n"
      "}\n";
  fixture_t f;
  TSR_CHECK_OK(setup(&f, text, NULL));
  tsr_status_t s = run(&f);
  TSR_CHECK_EQ_INT(tsr_status_diagnostic_count(s), 1);
  TSR_CHECK(strstr(tsr_status_message(s), "test.tsr:9:3: error:") != NULL);
  TSR_CHECK(strstr(tsr_status_message(s), "more occurrence") == NULL);
  tsr_status_free(s);
  teardown(&f);
}

/* Runs reuse the program's memory: nothing from one run may leak into the
 * next (scratch, shadows, never-written outputs). */
TSR_TEST(reused_run_memory_starts_fresh) {
  const char *text =
      "kernel @k\n"
      "  grid(2) semantics(arbitrary)\n"
      "  in %x: f32[16, 128] vmem block[8, 128] map(%i) -> (%i, 0)\n"
      "  out %o: f32[16, 128] vmem block[8, 128] map(%i) -> (%i, 0)\n"
      "  scratch %s: vmem f32[8, 128]\n"
      "{\n"
      "  %v = load %x[0:4, :] : f32[4, 128]\n"
      "  store %s[0:4, :], %v\n"
      "  %w = load %s[0:4, :] : f32[4, 128]\n"
      "  store %o[0:4, :], %w\n"
      "}\n";
  fixture_t f;
  tsr_interp_options_t o;
  tsr_interp_options_initialize(&o);
  o.strict = true; /* the never-written elements as an error, to read it */
  TSR_CHECK_OK(setup(&f, text, &o));
  fill_iota_f32(&f.arrays[0]);
  for (int rep = 0; rep < 3; rep++) {
    memset(f.arrays[1].data, 0, 16 * 128 * 4);
    const char *needles[] = {"1024 of 2048 output elements were never written "
                             "(first at [4, 0])",
                             NULL};
    expect_kernel_error(run(&f), needles);
    TSR_CHECK(f32(&f, 1)[3 * 128] == 3.0f * 128);
    TSR_CHECK(isnan(f32(&f, 1)[4 * 128]));
  }
  teardown(&f);
}

/* The interpreter's wiring of the shape ops (plans, strides, offsets) against
 * plain C: x is f32[4, 8] with x[i][j] = 8i + j. */
TSR_TEST(shape_ops_match_references) {
  const char *text =
      "kernel @k\n"
      "  in %x: f32[4, 8] vmem\n"
      "  out %cat: f32[4, 11] vmem\n"
      "  out %tr: f32[8, 4] vmem\n"
      "  out %bc: f32[2, 4, 8] vmem\n"
      "  out %ro: f32[4, 8] vmem\n"
      "  out %ga: f32[4, 8] vmem\n"
      "  out %sl: f32[2, 4] vmem\n"
      "  out %rs: f32[4] vmem\n"
      "  out %am: i32[8] vmem\n"
      "{\n"
      "  %v = load %x[:, :] : f32[4, 8]\n"
      "  %head = slice %v [:, 0:3] : f32[4, 3]\n"
      "  %c = concatenate %v, %head axis 1 : f32[4, 11]\n"
      "  store %cat[:, :], %c\n"
      "  %t = transpose %v [1, 0] : f32[8, 4]\n"
      "  store %tr[:, :], %t\n"
      "  %b = broadcast %v : f32[2, 4, 8]\n"
      "  store %bc[:, :, :], %b\n"
      "  %three = const 3 : i32\n"
      "  %r = roll %v, %three axis 1 : f32[4, 8]\n"
      "  store %ro[:, :], %r\n"
      "  %io = iota 1 : i32[4, 8]\n"
      "  %seven = const 7 : i32\n"
      "  %rev = sub %seven, %io : i32[4, 8]\n"
      "  %g = gather %v, %rev axis 1 : f32[4, 8]\n"
      "  store %ga[:, :], %g\n"
      "  %s = slice %v [1:4:2, 0:8:2] : f32[2, 4]\n"
      "  store %sl[:, :], %s\n"
      "  %sum = reduce_sum %v axes [1] : f32[4]\n"
      "  store %rs[:], %sum\n"
      "  %neg = neg %v : f32[4, 8]\n"
      "  %a = argmax %neg axis 0 : i32[8]\n"
      "  store %am[:], %a\n"
      "}\n";
  fixture_t f;
  TSR_CHECK_OK(setup(&f, text, NULL));
  fill_iota_f32(&f.arrays[0]);
  TSR_CHECK_OK(run(&f));
#define X(i, j) ((float)(8 * (i) + (j)))
  int bad = 0;
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 11; j++) bad += f32(&f, 1)[i * 11 + j] != X(i, j < 8 ? j : j - 8);
  for (int i = 0; i < 8; i++)
    for (int j = 0; j < 4; j++) bad += f32(&f, 2)[i * 4 + j] != X(j, i);
  for (int k = 0; k < 2; k++)
    for (int i = 0; i < 32; i++) bad += f32(&f, 3)[k * 32 + i] != (float)i;
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 8; j++) {
      bad += f32(&f, 4)[i * 8 + j] != X(i, (j + 5) % 8); /* (j - 3) mod 8 */
      bad += f32(&f, 5)[i * 8 + j] != X(i, 7 - j);
    }
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 4; j++) bad += f32(&f, 6)[i * 4 + j] != X(1 + 2 * i, 2 * j);
  for (int i = 0; i < 4; i++) bad += f32(&f, 7)[i] != (float)(64 * i + 28);
  for (int j = 0; j < 8; j++) bad += i32(&f, 8)[j] != 0; /* max of -x is row 0 */
#undef X
  TSR_CHECK_EQ_INT(bad, 0);
  teardown(&f);
}

/* ---- Out-of-bounds accesses under oob_reads_uninit and padded
 * (docs/semantics.md, "Out-of-bounds accesses") ---- */

/* Rows [4, 12) of an 8-row input, loaded and through a DMA: rows 4..7 are
 * the input's, the rest the uninitialized value. */
static const char *oob_read_kernel =
    "kernel @k\n"
    "  in %x: f32[8, 128] vmem\n"
    "  out %o: f32[8, 128] vmem\n"
    "  out %d: f32[8, 128] vmem\n"
    "  scratch %sem: dma_sem\n"
    "{\n"
    "  %four = const 4 : i32\n"
    "  %v = load %x[ds(%four, 8), :] : f32[8, 128]\n"
    "  store %o[:, :], %v\n"
    "  dma_start %x[ds(%four, 8), :] -> %d[:, :], %sem\n"
    "  dma_wait %x[ds(%four, 8), :] -> %d[:, :], %sem\n"
    "}\n";

TSR_TEST(oob_reads_uninit_reads_the_uninitialized_value_outside) {
  tsr_interp_options_t o;
  tsr_interp_options_initialize(&o);
  fixture_t f;
  /* by default an error, naming the load */
  TSR_CHECK_OK(setup(&f, oob_read_kernel, &o));
  const char *errors[] = {"'load': slice 4:12:1 out of bounds for dimension 0 of %x", NULL};
  expect_kernel_error(run(&f), errors);
  teardown(&f);
  o.oob_reads_uninit = true;
  for (int zero = 0; zero < 2; zero++) {
    o.uninit = zero ? TSR_UNINIT_ZERO : TSR_UNINIT_NAN;
    TSR_CHECK_OK(setup(&f, oob_read_kernel, &o));
    fill_iota_f32(&f.arrays[0]);
    TSR_CHECK_OK(run(&f));
    int bad = 0;
    for (size_t out = 1; out <= 2; out++)
      for (int r = 0; r < 8; r++)
        for (int c = 0; c < 128; c++) {
          float got = f32(&f, out)[r * 128 + c];
          if (r < 4 ? got != (float)((r + 4) * 128 + c) : zero ? got != 0.0f : !isnan(got))
            bad++;
        }
    TSR_CHECK_EQ_INT(bad, 0);
    TSR_CHECK(f.stats.warnings >= 1);
    teardown(&f);
  }
  const char *warned[] = {"'load': read reaches outside %x (shape [8, 128])", NULL};
  free(expect_kernel_warning(oob_read_kernel, &o, warned));
}

TSR_TEST(oob_reads_uninit_leaves_writes_outside_errors) {
  const char *text =
      "kernel @k\n"
      "  out %o: f32[8, 128] vmem\n"
      "{\n"
      "  %four = const 4 : i32\n"
      "  %v = const 1.0 : f32[8, 128]\n"
      "  store %o[ds(%four, 8), :], %v\n"
      "}\n";
  tsr_interp_options_t o;
  tsr_interp_options_initialize(&o);
  o.oob_reads_uninit = true;
  o.padded = true; /* rows 8..11 are beyond (8, 128), which needs no padding */
  fixture_t f;
  TSR_CHECK_OK(setup(&f, text, &o));
  const char *needles[] = {"'store': slice 4:12:1 out of bounds for dimension 0 of %o", NULL};
  expect_kernel_error(run(&f), needles);
  teardown(&f);
}

/* A (10, 128) f32 scratch buffer is (16, 128) on a TPU: rows [4, 12) are
 * written (rows 10, 11 into the padding: dropped) and read back (the padding
 * reads as the uninitialized value, not as what was written there). */
static const char *padded_kernel =
    "kernel @k\n"
    "  in %x: f32[8, 128] vmem\n"
    "  out %o: f32[8, 128] vmem\n"
    "  scratch %s: vmem f32[10, 128]\n"
    "{\n"
    "  %four = const 4 : i32\n"
    "  %v = load %x[:, :] : f32[8, 128]\n"
    "  store %s[ds(%four, 8), :], %v\n"
    "  %w = load %s[ds(%four, 8), :] : f32[8, 128]\n"
    "  store %o[:, :], %w\n"
    "}\n";

TSR_TEST(padded_buffers_drop_writes_to_their_padding) {
  tsr_interp_options_t o;
  tsr_interp_options_initialize(&o);
  fixture_t f;
  TSR_CHECK_OK(setup(&f, padded_kernel, &o));
  const char *errors[] = {"'store': slice 4:12:1 out of bounds for dimension 0 of %s "
                          "(shape [10, 128])",
                          NULL};
  expect_kernel_error(run(&f), errors);
  teardown(&f);
  o.padded = true;
  TSR_CHECK_OK(setup(&f, padded_kernel, &o));
  fill_iota_f32(&f.arrays[0]);
  TSR_CHECK_OK(run(&f));
  int bad = 0;
  for (int r = 0; r < 8; r++)
    for (int c = 0; c < 128; c++) {
      float got = f32(&f, 1)[r * 128 + c];
      if (r < 6 ? got != (float)(r * 128 + c) : !isnan(got)) bad++;
    }
  TSR_CHECK_EQ_INT(bad, 0);
  teardown(&f);
  const char *warned[] = {"'store': write reaches outside %s (shape [10, 128]) into its "
                          "padding (to [16, 128])",
                          NULL};
  free(expect_kernel_warning(padded_kernel, &o, warned));
}

TSR_TEST(padded_buffers_check_beyond_the_padding_and_never_pad_smem) {
  const char *beyond =
      "kernel @k\n"
      "  out %o: f32[8, 128] vmem\n"
      "  scratch %s: vmem f32[10, 128]\n"
      "{\n"
      "  %nine = const 9 : i32\n"
      "  %v = const 1.0 : f32[8, 128]\n"
      "  store %s[ds(%nine, 8), :], %v\n"
      "  store %o[:, :], %v\n"
      "}\n";
  const char *smem =
      "kernel @k\n"
      "  out %o: f32[8, 128] vmem\n"
      "  scratch %s: smem f32[10, 128]\n"
      "{\n"
      "  %ten = const 10 : i32\n"
      "  %zero = const 0 : i32\n"
      "  %v = const 1.0 : f32\n"
      "  store %s[%ten, %zero], %v\n"
      "  %w = const 1.0 : f32[8, 128]\n"
      "  store %o[:, :], %w\n"
      "}\n";
  tsr_interp_options_t o;
  tsr_interp_options_initialize(&o);
  o.padded = true;
  fixture_t f;
  TSR_CHECK_OK(setup(&f, beyond, &o));
  const char *n1[] = {"'store': slice 9:17:1 out of bounds for dimension 0 of %s "
                      "(shape [10, 128], padded to [16, 128])",
                      NULL};
  expect_kernel_error(run(&f), n1);
  teardown(&f);
  TSR_CHECK_OK(setup(&f, smem, &o));
  const char *n2[] = {"'store': index 10 out of bounds for dimension 0 of %s (shape [10, 128])",
                      NULL};
  expect_kernel_error(run(&f), n2);
  teardown(&f);
}

TSR_TEST(padded_dims_follow_the_tpu_tiling) {
  struct {
    const char *chip;
    tsr_dtype_t dtype;
    uint32_t rank;
    int64_t dims[2], want[2];
  } cases[] = {
      {"v5e", TSR_DTYPE_F32, 2, {10, 128}, {16, 128}},
      {"v6e", TSR_DTYPE_F32, 2, {10, 150}, {16, 256}},
      {"v5e", TSR_DTYPE_BF16, 2, {10, 128}, {16, 128}},
      {"v5e", TSR_DTYPE_F32, 2, {2, 128}, {2, 128}},
      {"v5e", TSR_DTYPE_F32, 2, {3, 1}, {4, 128}},
      {"v5e", TSR_DTYPE_I8, 2, {2, 128}, {4, 128}},
      {"v5e", TSR_DTYPE_I4, 2, {3, 128}, {8, 128}},
      {"v5e", TSR_DTYPE_F32, 1, {5, 0}, {128, 0}},
      {"v5e", TSR_DTYPE_BF16, 1, {300, 0}, {512, 0}},
      {"v3", TSR_DTYPE_F32, 2, {2, 128}, {2, 128}},
      {"v3", TSR_DTYPE_F32, 2, {1, 128}, {2, 128}},
      {"v3", TSR_DTYPE_I4, 2, {3, 128}, {16, 128}},
      {"v2", TSR_DTYPE_F32, 1, {5, 0}, {256, 0}},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    int64_t got[2] = {0, 0};
    tsr_interp_padded_dims(cases[i].chip, cases[i].dtype, cases[i].rank, cases[i].dims, got);
    for (uint32_t d = 0; d < cases[i].rank; d++) TSR_CHECK_EQ_INT(got[d], cases[i].want[d]);
  }
}

/* An input block whose block index is out of range reads as the
 * uninitialized value under oob_reads_uninit (an output block's stays an
 * error). */
TSR_TEST(oob_reads_uninit_input_block_out_of_range) {
  const char *text =
      "kernel @k\n"
      "  grid(2) semantics(arbitrary)\n"
      "  in %x: f32[16, 128] vmem block[8, 128] map(%i) {\n"
      "    %one = const 1 : i32\n"
      "    %n = add %i, %one : i32\n"
      "    %zero = const 0 : i32\n"
      "    yield %n, %zero\n"
      "  }\n"
      "  out %o: f32[16, 128] vmem block[8, 128] map(%i) -> (%i, 0)\n"
      "{\n"
      "  %v = load %x[:, :] : f32[8, 128]\n"
      "  store %o[:, :], %v\n"
      "}\n";
  tsr_interp_options_t o;
  tsr_interp_options_initialize(&o);
  fixture_t f;
  TSR_CHECK_OK(setup(&f, text, &o));
  const char *errors[] = {"in %x: index map gives block index [2, 0], out of range", NULL};
  expect_kernel_error(run(&f), errors);
  teardown(&f);
  o.oob_reads_uninit = true;
  TSR_CHECK_OK(setup(&f, text, &o));
  fill_iota_f32(&f.arrays[0]);
  TSR_CHECK_OK(run(&f));
  int bad = 0;
  for (int r = 0; r < 16; r++)
    for (int c = 0; c < 128; c++) {
      float got = f32(&f, 1)[r * 128 + c];
      if (r < 8 ? got != (float)((r + 8) * 128 + c) : !isnan(got)) bad++;
    }
  TSR_CHECK_EQ_INT(bad, 0);
  teardown(&f);
}

/* ---- Output blocks copied in (out_blocks_copied_in; docs/semantics.md,
 * "Output blocks copied in") ---- */

/* Accumulates into an output aliased to an input without initializing it:
 * copied in, each output block starts as the input's block; by default it
 * starts uninitialized (NaN), with a warning at the first read. */
static const char *accumulate_kernel =
    "kernel @k\n"
    "  grid(2, 3) semantics(parallel, arbitrary)\n"
    "  in %acc: f32[16, 128] vmem block[8, 128] map(%i, %j) -> (%i, 0)\n"
    "  in %x: f32[16, 384] vmem block[8, 128] map(%i, %j) -> (%i, %j)\n"
    "  out %o: f32[16, 128] vmem block[8, 128] map(%i, %j) -> (%i, 0) alias %acc\n"
    "{\n"
    "  %v = load %x[:, :] : f32[8, 128]\n"
    "  %a = load %o[:, :] : f32[8, 128]\n"
    "  %s = add %a, %v : f32[8, 128]\n"
    "  store %o[:, :], %s\n"
    "}\n";

TSR_TEST(out_blocks_copied_in_start_from_the_aliased_input) {
  tsr_interp_options_t o;
  tsr_interp_options_initialize(&o);
  const char *warned[] = {"'load': read of uninitialized memory: %o[0, 0] (shape [8, 128]) was "
                          "never written in this output block; it holds the uninitialized value",
                          NULL};
  free(expect_kernel_warning(accumulate_kernel, &o, warned));
  fixture_t f;
  TSR_CHECK_OK(setup(&f, accumulate_kernel, &o));
  fill_iota_f32(&f.arrays[0]);
  fill_iota_f32(&f.arrays[1]);
  TSR_CHECK_OK(run(&f));
  TSR_CHECK(isnan(f32(&f, 2)[0]));
  teardown(&f);
  o.out_blocks_copied_in = true;
  for (int check = 0; check < 2; check++) {
    o.check = check;
    TSR_CHECK_OK(setup(&f, accumulate_kernel, &o));
    fill_iota_f32(&f.arrays[0]);
    fill_iota_f32(&f.arrays[1]);
    TSR_CHECK_OK(run(&f));
    int bad = 0;
    for (int r = 0; r < 16; r++)
      for (int c = 0; c < 128; c++) {
        float want = (float)(r * 128 + c);
        for (int j = 0; j < 3; j++) want += (float)(r * 384 + j * 128 + c);
        if (f32(&f, 2)[r * 128 + c] != want) bad++;
      }
    TSR_CHECK_EQ_INT(bad, 0);
    TSR_CHECK_EQ_INT(f.stats.warnings, 0); /* the block's values are defined */
    /* each output block once (it stays resident over j), besides the inputs' */
    TSR_CHECK_EQ_INT(f.stats.blocks_copied_in, 2 + 6 + 2);
    TSR_CHECK_EQ_INT(f.stats.blocks_copied_out, 2);
    teardown(&f);
  }
}

/* A fresh i32 output read before it is written, and an input block past its
 * array's end: copied in, both hold JAX's uninitialized value, the integer
 * minimum (tessera's is the maximum); with --uninit zero, zero. A fresh
 * output's never-written element is still an uninitialized read. */
static const char *fresh_int_kernel =
    "kernel @k\n"
    "  grid(2) semantics(arbitrary)\n"
    "  in %x: i32[3] vmem block[6] map(%i) -> (0)\n"
    "  out %y: i32[6] vmem block[6] map(%i) -> (0)\n"
    "  out %z: i32[12] vmem block[8] map(%i) -> (%i)\n"
    "{\n"
    "  %v = load %x[:] : i32[6]\n"
    "  store %y[:], %v\n"
    "  %w = load %z[:] : i32[8]\n"
    "  %one = const 1 : i32\n"
    "  %u = add %w, %one : i32[8]\n"
    "  %h = slice %u [0:4] : i32[4]\n"
    "  store %z[0:4], %h\n"
    "}\n";

TSR_TEST(out_blocks_copied_in_fill_fresh_outputs_and_padding_as_jax) {
  tsr_interp_options_t o;
  tsr_interp_options_initialize(&o);
  fixture_t f;
  for (int mode = 0; mode < 3; mode++) { /* default; copied in; copied in, zero */
    o.out_blocks_copied_in = mode > 0;
    o.uninit = mode == 2 ? TSR_UNINIT_ZERO : TSR_UNINIT_NAN;
    TSR_CHECK_OK(setup(&f, fresh_int_kernel, &o));
    for (int i = 0; i < 3; i++) i32(&f, 0)[i] = 42;
    TSR_CHECK_OK(run(&f));
    const int32_t pad = mode == 0 ? INT32_MAX : mode == 1 ? INT32_MIN : 0;
    int bad = 0;
    for (int i = 0; i < 6; i++) bad += i32(&f, 1)[i] != (i < 3 ? 42 : pad);
    /* z: elements 0..3 of each block written once (pad + 1, wrapping from
     * the maximum), the rest never */
    for (int i = 0; i < 12; i++) {
      int32_t want = i % 8 < 4 ? (int32_t)((uint32_t)pad + 1u) : pad;
      bad += i32(&f, 2)[i] != want;
    }
    TSR_CHECK_EQ_INT(bad, 0);
    teardown(&f);
  }
  o.uninit = TSR_UNINIT_NAN;
  const char *warned[] = {"'load': read of uninitialized memory: %z[0] (shape [8]) was never "
                          "written in this output block nor in its array before",
                          "out %z: 4 of 12 output elements were never written (first at [4])",
                          NULL};
  free(expect_kernel_warning(fresh_int_kernel, &o, warned));
}

/* Runs `text` (interpreter, one core) and returns its warnings' text
 * (free it), or NULL when the run fails. */
static char *run_warnings(const char *text) {
  FILE *stream = tmpfile();
  if (!stream) return NULL;
  fixture_t f;
  char *w = NULL;
  tsr_status_t s = setup(&f, text, NULL);
  f.warning_stream = stream;
  if (!s) s = run(&f);
  if (s) {
    TSR_FAIL_AT("run failed: %s", tsr_status_message(s));
    tsr_status_free(s);
  } else {
    long size = ftell(stream);
    w = calloc(1, size > 0 ? (size_t)size + 1 : 1);
    rewind(stream);
    if (w && size > 0 && fread(w, 1, (size_t)size, stream) != (size_t)size)
      TSR_FAIL_AT("cannot read the warnings back");
  }
  teardown(&f);
  fclose(stream);
  return w;
}

/* Which outputs the parallel_revisit warning names (docs/semantics.md,
 * "Outputs along a parallel dimension"): those whose block index cannot
 * change along a parallel or core_parallel dim of more than one step,
 * whatever the map's form; never an output the map makes follow the dim,
 * one along a dim of one step, or one that is not written block by block. */
TSR_TEST(parallel_revisit_names_outputs_written_along_a_split_dim) {
  static const struct {
    const char *what, *text, *want; /* want NULL: no parallel_revisit warning */
  } cases[] = {
      {"a rank-0 smem output every parallel step writes",
       "kernel @k\n"
       "  grid(2) semantics(parallel)\n"
       "  out %s: f32 smem\n"
       "{\n"
       "  %one = const 1.0 : f32\n"
       "  store %s[], %one\n"
       "}\n",
       "test.tsr:3:7: warning: kernel @k, grid point (0): out %s: every step along grid "
       "dimension 0 (parallel, 2 steps)"},
      {"a core_parallel dim: each index on its own TensorCore",
       "kernel @k\n"
       "  grid(2) semantics(core_parallel)\n"
       "  out %o: f32[8, 128] vmem block[8, 128] map(%c) -> (0, 0)\n"
       "{\n"
       "  %z = const 1.0 : f32[8, 128]\n"
       "  store %o[:, :], %z\n"
       "}\n",
       "out %o: every step along grid dimension 0 (core_parallel, 2 steps) writes this same "
       "output block (its index map does not depend on the dimension). A TPU runs each index "
       "of a core_parallel dimension on its own TensorCore"},
      {"a prefetch-table map that reads the table by the arbitrary index only",
       "kernel @k\n"
       "  grid(2, 2) semantics(parallel, arbitrary)\n"
       "  prefetch %tbl: i32[2]\n"
       "  out %o: f32[16, 128] vmem block[8, 128] map(%i, %j) {\n"
       "    %t = load %tbl[%j] : i32\n"
       "    %zero = const 0 : i32\n"
       "    yield %t, %zero\n"
       "  }\n"
       "{\n"
       "  %z = const 1.0 : f32[8, 128]\n"
       "  store %o[:, :], %z\n"
       "}\n",
       "out %o: every step along grid dimension 0 (parallel, 2 steps)"},
      {"the second of two parallel dims, an aliased output",
       "kernel @k\n"
       "  grid(2, 2) semantics(parallel, parallel)\n"
       "  in %x: f32[16, 128] vmem block[8, 128] map(%i, %j) -> (%i, 0)\n"
       "  out %o: f32[16, 128] vmem block[8, 128] map(%i, %j) -> (%i, 0) alias %x\n"
       "{\n"
       "  %v = load %x[:, :] : f32[8, 128]\n"
       "  store %o[:, :], %v\n"
       "}\n",
       "out %o: every step along grid dimension 1 (parallel, 2 steps)"},
      {"a revisit-any output",
       "kernel @k\n"
       "  grid(2, 2) semantics(parallel, arbitrary)\n"
       "  out %o: f32[8, 256] vmem block[8, 128] map(%i, %j) -> (0, %j) revisit any\n"
       "{\n"
       "  %z = const 1.0 : f32[8, 128]\n"
       "  store %o[:, :], %z\n"
       "}\n",
       "out %o: every step along grid dimension 0 (parallel, 2 steps)"},
      {"a prefetch-table map that reads the table by the parallel index",
       "kernel @k\n"
       "  grid(2, 2) semantics(parallel, arbitrary)\n"
       "  prefetch %tbl: i32[2]\n"
       "  out %o: f32[16, 128] vmem block[8, 128] map(%i, %j) {\n"
       "    %t = load %tbl[%i] : i32\n"
       "    %zero = const 0 : i32\n"
       "    yield %t, %zero\n"
       "  }\n"
       "{\n"
       "  %z = const 1.0 : f32[8, 128]\n"
       "  store %o[:, :], %z\n"
       "}\n",
       NULL},
      {"the accumulator along an arbitrary dim",
       "kernel @k\n"
       "  grid(2, 3) semantics(parallel, arbitrary)\n"
       "  in %x: f32[16, 384] vmem block[8, 128] map(%i, %j) -> (%i, %j)\n"
       "  out %o: f32[16, 128] vmem block[8, 128] map(%i, %j) -> (%i, 0)\n"
       "{\n"
       "  %v = load %x[:, :] : f32[8, 128]\n"
       "  store %o[:, :], %v\n"
       "}\n",
       NULL},
      {"a parallel dim of one step",
       "kernel @k\n"
       "  grid(1, 3) semantics(parallel, arbitrary)\n"
       "  out %o: f32[8, 128] vmem block[8, 128] map(%i, %j) -> (0, 0)\n"
       "{\n"
       "  %z = const 1.0 : f32[8, 128]\n"
       "  store %o[:, :], %z\n"
       "}\n",
       NULL},
      {"an hbm output the kernel writes by DMA, its own rows per step",
       "kernel @k\n"
       "  grid(2) semantics(parallel)\n"
       "  in %x: f32[16, 128] hbm\n"
       "  out %y: f32[16, 128] hbm\n"
       "  scratch %sem: dma_sem\n"
       "{\n"
       "  %i = program_id 0 : i32\n"
       "  %eight = const 8 : i32\n"
       "  %off = mul %i, %eight : i32\n"
       "  dma_start %x[ds(%off, 8), :] -> %y[ds(%off, 8), :], %sem\n"
       "  dma_wait %x[ds(%off, 8), :] -> %y[ds(%off, 8), :], %sem\n"
       "}\n",
       NULL},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    char *w = run_warnings(cases[c].text);
    if (!w) {
      TSR_FAIL_AT("%s: no warnings read", cases[c].what);
      continue;
    }
    if (cases[c].want && !strstr(w, cases[c].want))
      TSR_FAIL_AT("%s: warnings lack \"%s\":\n%s", cases[c].what, cases[c].want, w);
    if (!cases[c].want && strstr(w, "every step along"))
      TSR_FAIL_AT("%s: an unexpected parallel_revisit warning:\n%s", cases[c].what, w);
    free(w);
  }
}

int main(void) {
  TSR_RUN(inputs_copied_only_when_block_changes);
  TSR_RUN(resident_output_accumulates);
  TSR_RUN(revisited_output_block_is_an_error);
  TSR_RUN(revisits_are_found_in_small_and_huge_arrays);
  TSR_RUN(element_windows_and_their_padding);
  TSR_RUN(rank0_inputs_and_outputs);
  TSR_RUN(shuffled_parallel_order_is_seeded);
  TSR_RUN(aliased_output_starts_from_input);
  TSR_RUN(ragged_edges_are_padded_and_not_written_back);
  TSR_RUN(control_flow_loops_and_swaps);
  TSR_RUN(vector_loop_carried_swap);
  TSR_RUN(uninitialized_scratch_read_is_reported);
  TSR_RUN(scoped_buffers_start_uninitialized);
  TSR_RUN(never_written_output_is_reported);
  TSR_RUN(dynamic_index_out_of_bounds);
  TSR_RUN(dynamic_grid_extent_is_read_at_run_start);
  TSR_RUN(dynamic_grid_overflow_is_an_error);
  TSR_RUN(dynamic_grid_round_trips_and_is_checked);
  TSR_RUN(index_map_out_of_range);
  TSR_RUN(masked_load_and_store);
  TSR_RUN(errors_are_collected_up_to_the_limit);
  TSR_RUN(vmem_budget_per_chip);
  TSR_RUN(assert_and_bad_loop_step);
  TSR_RUN(print_writes_one_call_per_line);
  TSR_RUN(wrong_arrays_are_rejected);
  TSR_RUN(concurrent_runs_of_one_program);
  TSR_RUN(module_can_be_destroyed_after_prepare);
  TSR_RUN(hbm_operand_has_no_block_buffer);
  TSR_RUN(shape_ops_match_references);
  TSR_RUN(forwarded_partial_store_keeps_the_rest_uninitialized);
  TSR_RUN(output_block_loaded_and_stored_back_holds_the_uninitialized_value);
  TSR_RUN(forwarded_store_out_of_bounds_reported_once);
  TSR_RUN(reused_run_memory_starts_fresh);
  TSR_RUN(oob_reads_uninit_reads_the_uninitialized_value_outside);
  TSR_RUN(oob_reads_uninit_leaves_writes_outside_errors);
  TSR_RUN(padded_buffers_drop_writes_to_their_padding);
  TSR_RUN(padded_buffers_check_beyond_the_padding_and_never_pad_smem);
  TSR_RUN(padded_dims_follow_the_tpu_tiling);
  TSR_RUN(oob_reads_uninit_input_block_out_of_range);
  TSR_RUN(out_blocks_copied_in_start_from_the_aliased_input);
  TSR_RUN(out_blocks_copied_in_fill_fresh_outputs_and_padding_as_jax);
  TSR_RUN(parallel_revisit_names_outputs_written_along_a_split_dim);
  return tsr_test_done();
}
