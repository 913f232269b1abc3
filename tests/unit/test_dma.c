/* Unit tests for simulated cores and devices, semaphores, barriers and DMAs
 * (docs/dma.md): results in both DMA modes, the split of parallel grid dims
 * across cores, deadlock reports, and the end-of-kernel checks. */
#include "tests/unit/interp_fixture.h"

static tsr_interp_options_t opts(uint32_t devices, uint32_t cores, bool eager) {
  tsr_interp_options_t o;
  tsr_interp_options_initialize(&o);
  o.devices = devices;
  o.cores = cores;
  o.dma_eager = eager;
  return o;
}

static const char *local_copy =
    "kernel @copy\n"
    "  in %x: f32[64, 128] any\n"
    "  out %o: f32[64, 128] vmem\n"
    "  scratch %buf: vmem f32[64, 128]\n"
    "  scratch %s: dma_sem\n"
    "{\n"
    "  dma_start %x[:, :] -> %buf[:, :], %s\n"
    "  dma_wait %x[:, :] -> %buf[:, :], %s\n"
    "  %v = load %buf[:, :] : f32[64, 128]\n"
    "  store %o[:, :], %v\n"
    "}\n";

TSR_TEST(local_dma_copies_in_both_modes) {
  for (int eager = 0; eager < 2; eager++) {
    tsr_interp_options_t o = opts(1, 1, eager);
    fixture_t f;
    TSR_CHECK_OK(setup(&f, local_copy, &o));
    fill_iota_f32(&f.arrays[0]);
    TSR_CHECK_OK(run(&f));
    TSR_CHECK(memcmp(f.arrays[0].data, f.arrays[1].data, 64 * 128 * 4) == 0);
    teardown(&f);
  }
}

TSR_TEST(read_before_wait_and_missing_wait) {
  /* Without the wait: lazily the data has not arrived (an uninitialized read);
   * in both modes the DMA or its bytes are left over at the end. */
  char text[1024];
  snprintf(text, sizeof text, "%s", local_copy);
  char *w = strstr(text, "  dma_wait");
  memmove(w, strchr(w, '\n') + 1, strlen(strchr(w, '\n') + 1) + 1);
  tsr_interp_options_t o = opts(1, 1, false);
  o.strict = true; /* the uninitialized read is a warning, an error here */
  fixture_t f;
  TSR_CHECK_OK(setup(&f, text, &o));
  const char *lazy[] = {"'load': read of uninitialized memory: %buf[0, 0]",
                        "'dma_start': DMA of 32768 bytes to %buf is still in flight "
                        "at kernel end",
                        NULL};
  expect_kernel_error(run(&f), lazy);
  teardown(&f);
  o = opts(1, 1, true);
  TSR_CHECK_OK(setup(&f, text, &o));
  const char *eager[] = {"scratch %s: semaphore %s holds 32768 at kernel end",
                         NULL};
  expect_kernel_error(run(&f), eager);
  teardown(&f);
}

TSR_TEST(one_wait_covers_two_dmas) {
  const char *text =
      "kernel @two\n"
      "  in %x: f32[2, 8, 128] any\n"
      "  out %o: f32[2, 8, 128] vmem\n"
      "  scratch %s: dma_sem\n"
      "{\n"
      "  %zero = const 0 : i32\n"
      "  %one = const 1 : i32\n"
      "  dma_start %x[%zero, :, :] -> %o[%zero, :, :], %s\n"
      "  dma_start %x[%one, :, :] -> %o[%one, :, :], %s\n"
      "  dma_wait %x[:, :, :] -> %o[:, :, :], %s\n"
      "}\n";
  for (int eager = 0; eager < 2; eager++) {
    tsr_interp_options_t o = opts(1, 1, eager);
    fixture_t f;
    TSR_CHECK_OK(setup(&f, text, &o));
    fill_iota_f32(&f.arrays[0]);
    TSR_CHECK_OK(run(&f));
    TSR_CHECK(memcmp(f.arrays[0].data, f.arrays[1].data, 2 * 8 * 128 * 4) == 0);
    teardown(&f);
  }
}

TSR_TEST(dma_add_accumulates) {
  const char *text =
      "kernel @acc\n"
      "  in %x: f32[8, 128] any\n"
      "  out %o: f32[8, 128] vmem\n"
      "  scratch %s: dma_sem\n"
      "{\n"
      "  %z = const 1.0 : f32[8, 128]\n"
      "  store %o[:, :], %z\n"
      "  dma_start %x[:, :] -> %o[:, :], %s add\n"
      "  dma_wait %x[:, :] -> %o[:, :], %s\n"
      "}\n";
  fixture_t f;
  tsr_interp_options_t o = opts(1, 1, false);
  TSR_CHECK_OK(setup(&f, text, &o));
  fill_iota_f32(&f.arrays[0]);
  TSR_CHECK_OK(run(&f));
  TSR_CHECK(f32(&f, 1)[0] == 1.0f && f32(&f, 1)[1023] == 1024.0f);
  teardown(&f);
}

static const char *handshake =
    "kernel @handshake\n"
    "  grid(2) semantics(parallel)\n"
    "  out %o: i32[2, 128] vmem block[1, 128] map(%i) -> (%i, 0)\n"
    "  scratch %s: sem\n"
    "{\n"
    "  %c = core_id : i32\n"
    "  %zero = const 0 : i32\n"
    "  %one = const 1 : i32\n"
    "  %is0 = eq %c, %zero : i1\n"
    "  if %is0 {\n"
    "    sem_signal %s, %one core %one\n"
    "  } else {\n"
    "    sem_wait %s, %one\n"
    "  }\n"
    "  %v = broadcast %c : i32[1, 128]\n"
    "  store %o[:, :], %v\n"
    "}\n";

TSR_TEST(cores_split_parallel_dims_and_handshake) {
  for (uint64_t seed = 0; seed < 4; seed++) {
    tsr_interp_options_t o = opts(1, 2, false);
    o.schedule_seed = seed;
    fixture_t f;
    TSR_CHECK_OK(setup(&f, handshake, &o));
    TSR_CHECK_OK(run(&f));
    TSR_CHECK(i32(&f, 0)[0] == 0 && i32(&f, 0)[128] == 1); /* row i ran on core i */
    TSR_CHECK_EQ_INT(f.stats.grid_steps, 2);
    teardown(&f);
  }
}

TSR_TEST(deadlock_reports_every_blocked_core) {
  char text[2048];
  snprintf(text, sizeof text, "%s", handshake);
  char *sig = strstr(text, "sem_signal %s, %one core %one");
  memcpy(sig, "sem_wait %s, %one            ", 29);
  tsr_interp_options_t o = opts(1, 2, false);
  fixture_t f;
  TSR_CHECK_OK(setup(&f, text, &o));
  const char *needles[] = {
      "test.tsr:11:5: error: kernel @handshake, core 0, grid point (0): 'sem_wait': "
      "deadlock: every core is blocked; this one waits for %s to reach 1, "
      "it holds 0 and nothing in flight will signal it",
      "test.tsr:13:5: error: kernel @handshake, core 1, grid point (1): 'sem_wait': "
      "deadlock",
      NULL};
  expect_kernel_error(run(&f), needles);
  teardown(&f);
}

TSR_TEST(two_cores_writing_one_output_block) {
  /* The block index depends on the parallel index (i / 2) but is the same
   * for both steps: no parallel_revisit warning before the run (which only
   * knows the map's dependences), the core conflict when it runs. */
  const char *text =
      "kernel @k\n"
      "  grid(2) semantics(parallel)\n"
      "  out %o: f32[8, 128] vmem block[8, 128] map(%i) {\n"
      "    %two = const 2 : i32\n"
      "    %h = div %i, %two : i32\n"
      "    %zero = const 0 : i32\n"
      "    yield %h, %zero\n"
      "  }\n"
      "{\n"
      "  %z = const 1.0 : f32[8, 128]\n"
      "  store %o[:, :], %z\n"
      "}\n";
  /* A warning; with --detect-races a race, an error. */
  tsr_interp_options_t o = opts(1, 2, false);
  const char *needles[] = {"out %o: output block [0, 0] is written by core 1 at step 1 "
                           "and by core 0 in steps 0..0",
                           NULL};
  free(expect_kernel_warning(text, &o, needles));
  o.detect_races = true;
  fixture_t f;
  TSR_CHECK_OK(setup(&f, text, &o));
  expect_kernel_error(run(&f), needles);
  teardown(&f);
  /* On one core the same kernel is a plain (consecutive) revisit: fine. */
  o = opts(1, 1, false);
  TSR_CHECK_OK(setup(&f, text, &o));
  TSR_CHECK_OK(run(&f));
  teardown(&f);
}

/* An output whose index map ignores the parallel index: the run's
 * parallel_revisit warning says it, once, and the two cores' conflict is
 * not said again as a warning; with --detect-races it is still the race
 * (an error) besides the warning. On one core the warning alone. */
TSR_TEST(two_cores_one_block_along_a_parallel_dim) {
  const char *text =
      "kernel @k\n"
      "  grid(2) semantics(parallel)\n"
      "  out %o: f32[8, 128] vmem block[8, 128] map(%i) -> (0, 0)\n"
      "{\n"
      "  %z = const 1.0 : f32[8, 128]\n"
      "  store %o[:, :], %z\n"
      "}\n";
  const char *warn[] = {"test.tsr:3:7: ", "kernel @k, core 0, grid point (0): out %o: "
                        "every step along grid dimension 0 (parallel, 2 steps) writes this "
                        "same output block",
                        NULL};
  tsr_interp_options_t o = opts(1, 2, false);
  char *w = expect_kernel_warning(text, &o, warn);
  if (w) {
    TSR_CHECK(strstr(w, "is written by core") == NULL);
    const char *first = strstr(w, "every step along");
    TSR_CHECK(first && !strstr(first + 1, "every step along")); /* once */
  }
  free(w);
  o.detect_races = true;
  fixture_t f;
  const char *race[] = {"out %o: output block [0, 0] is written by core 1 at step 1", NULL};
  TSR_CHECK_OK(setup(&f, text, &o));
  expect_kernel_error(run(&f), race);
  teardown(&f);
  o = opts(1, 1, false);
  const char *one[] = {"test.tsr:3:7: ", "kernel @k, grid point (0): out %o: every step "
                       "along grid dimension 0 (parallel, 2 steps)",
                       NULL};
  free(expect_kernel_warning(text, &o, one));
}

/* A core_parallel dim is split across the cores (one
 * index per core when its size is the core count; a spare core idles), and
 * it is that dim, not a leading parallel one, that is split. */
TSR_TEST(core_parallel_dims_are_split_across_cores) {
  const char *text =
      "kernel @k\n"
      "  grid(3, 4) semantics(parallel, core_parallel)\n"
      "  out %who: i32[3, 4] smem block[1, 1] map(%i, %j) -> (%i, %j)\n"
      "{\n"
      "  %c = core_id : i32\n"
      "  store %who[0, 0], %c\n"
      "}\n";
  static const uint32_t cores[] = {1, 2, 4, 5};
  for (size_t n = 0; n < sizeof cores / sizeof cores[0]; n++) {
    tsr_interp_options_t o = opts(1, cores[n], false);
    fixture_t f;
    TSR_CHECK_OK(setup(&f, text, &o));
    TSR_CHECK_OK(run(&f));
    /* ceil(4 / cores) consecutive indices of dim 1 per core */
    uint32_t per = (4 + cores[n] - 1) / cores[n];
    for (int i = 0; i < 3; i++)
      for (int j = 0; j < 4; j++)
        if (i32(&f, 0)[i * 4 + j] != (int32_t)(j / per))
          TSR_FAIL_AT("%u cores: who[%d, %d] = %d, expected core %u", cores[n], i, j,
                      i32(&f, 0)[i * 4 + j], j / per);
    teardown(&f);
  }
}

TSR_TEST(core_barrier_orders_two_cores) {
  /* Two barriers in a row, in every schedule: each consumes exactly the
   * other core's signal, so the semaphore is back to 0 afterwards. */
  const char *text =
      "kernel @b\n"
      "  grid(2) semantics(parallel)\n"
      "  out %o: i32[2, 128] vmem block[1, 128] map(%i) -> (%i, 0)\n"
      "  scratch %s: sem\n"
      "{\n"
      "  core_barrier %s\n"
      "  core_barrier %s\n"
      "  %r = sem_read %s : i32\n"
      "  %v = broadcast %r : i32[1, 128]\n"
      "  store %o[:, :], %v\n"
      "}\n";
  for (uint64_t seed = 0; seed < 3; seed++) {
    tsr_interp_options_t o = opts(1, 2, false);
    o.schedule_seed = seed;
    fixture_t f;
    TSR_CHECK_OK(setup(&f, text, &o));
    TSR_CHECK_OK(run(&f));
    TSR_CHECK(i32(&f, 0)[0] == 0 && i32(&f, 0)[128] == 0);
    teardown(&f);
  }
}

TSR_TEST(ring_all_gather_over_four_devices) {
  /* Each device puts its row into slot d of its output, then passes rows
   * around the ring: step k sends slot (d - k) mod 4 to the right neighbour. */
  const char *text =
      "kernel @allgather\n"
      "  in %x: f32[1, 128] vmem\n"
      "  out %o: f32[4, 128] any\n"
      "  scratch %recv: dma_sem\n"
      "  scratch %send: dma_sem\n"
      "  scratch %local: dma_sem\n"
      "{\n"
      "  %d = device_id : i32\n"
      "  %zero = const 0 : i32\n"
      "  %one = const 1 : i32\n"
      "  %three = const 3 : i32\n"
      "  %four = const 4 : i32\n"
      "  dma_start %x[%zero, :] -> %o[%d, :], %local\n"
      "  dma_wait %x[%zero, :] -> %o[%d, :], %local\n"
      "  %d1 = add %d, %one : i32\n"
      "  %right = rem %d1, %four : i32\n"
      "  for %k = %zero to %three step %one {\n"
      "    %dk = sub %d, %k : i32\n"
      "    %dk4 = add %dk, %four : i32\n"
      "    %slot = rem %dk4, %four : i32\n"
      "    dma_start %o[%slot, :] -> %o[%slot, :], %recv send %send device %right\n"
      "    dma_wait %o[%slot, :] -> %o[%slot, :], %send\n"
      "    dma_wait %o[%slot, :] -> %o[%slot, :], %recv\n"
      "  }\n"
      "}\n";
  for (int eager = 0; eager < 2; eager++) {
    tsr_interp_options_t o = opts(4, 1, eager);
    fixture_t f;
    TSR_CHECK_OK(setup(&f, text, &o));
    float *x = f32(&f, 0);
    for (int d = 0; d < 4; d++)
      for (int c = 0; c < 128; c++) x[d * 128 + c] = (float)(d * 1000 + c);
    TSR_CHECK_OK(run(&f));
    int bad = 0;
    for (int d = 0; d < 4; d++)
      for (int s = 0; s < 4; s++)
        for (int c = 0; c < 128; c++)
          if (f32(&f, 1)[(d * 4 + s) * 128 + c] != (float)(s * 1000 + c)) bad++;
    TSR_CHECK_EQ_INT(bad, 0);
    teardown(&f);
  }
}

TSR_TEST(out_of_range_device_and_dma_bounds) {
  const char *text =
      "kernel @k\n"
      "  in %x: f32[8, 128] any\n"
      "  out %o: f32[8, 128] vmem\n"
      "  scratch %s: dma_sem\n"
      "{\n"
      "  %five = const 5 : i32\n"
      "  dma_start %x[ds(%five, 4), :] -> %o[0:4, :], %s\n"
      "  %z = const 0.0 : f32[8, 128]\n"
      "  store %o[:, :], %z\n"
      "}\n";
  tsr_interp_options_t o = opts(1, 1, false);
  fixture_t f;
  TSR_CHECK_OK(setup(&f, text, &o));
  /* the message names the side of the copy that left its ref (a read) */
  const char *needles[] = {"'dma_start': slice 5:9:1 out of bounds for dimension 0 of "
                           "%x (the DMA's source) (shape [8, 128])",
                           NULL};
  expect_kernel_error(run(&f), needles);
  teardown(&f);
  const char *remote =
      "kernel @k\n"
      "  out %o: f32[8, 128] vmem\n"
      "  scratch %s: sem\n"
      "{\n"
      "  %seven = const 7 : i32\n"
      "  sem_signal %s, %seven device %seven\n"
      "  %z = const 0.0 : f32[8, 128]\n"
      "  store %o[:, :], %z\n"
      "}\n";
  o = opts(2, 1, false);
  TSR_CHECK_OK(setup(&f, remote, &o));
  const char *needles2[] = {"device 0, grid point (): 'sem_signal': device 7 out of "
                            "range: the run has 2 devices",
                            NULL};
  expect_kernel_error(run(&f), needles2);
  teardown(&f);
}

/* A DMA whose destination view leaves its ref says so (a write, where the
 * source side says "source": a read); the copy is skipped, nothing of the
 * destination's neighbours changes, and its wait goes on. */
TSR_TEST(dma_out_of_bounds_names_the_destination) {
  const char *text =
      "kernel @k\n"
      "  in %x: f32[8, 128] any\n"
      "  out %o: f32[8, 128] vmem\n"
      "  scratch %t: vmem f32[8, 128]\n"
      "  scratch %s: dma_sem\n"
      "{\n"
      "  %six = const 6 : i32\n"
      "  dma_start %x[0:4, :] -> %t[ds(%six, 4), :], %s\n"
      "  dma_wait %x[0:4, :] -> %t[0:4, :], %s\n"
      "  %z = const 0.0 : f32[8, 128]\n"
      "  store %o[:, :], %z\n"
      "}\n";
  for (int eager = 0; eager < 2; eager++) {
    tsr_interp_options_t o = opts(1, 1, eager != 0);
    fixture_t f;
    TSR_CHECK_OK(setup(&f, text, &o));
    const char *needles[] = {"'dma_start': slice 6:10:1 out of bounds for dimension 0 of "
                             "%t (the DMA's destination) (shape [8, 128])",
                             NULL};
    expect_kernel_error(run(&f), needles);
    teardown(&f);
  }
}

int main(void) {
  TSR_RUN(local_dma_copies_in_both_modes);
  TSR_RUN(dma_out_of_bounds_names_the_destination);
  TSR_RUN(read_before_wait_and_missing_wait);
  TSR_RUN(one_wait_covers_two_dmas);
  TSR_RUN(dma_add_accumulates);
  TSR_RUN(cores_split_parallel_dims_and_handshake);
  TSR_RUN(deadlock_reports_every_blocked_core);
  TSR_RUN(two_cores_writing_one_output_block);
  TSR_RUN(two_cores_one_block_along_a_parallel_dim);
  TSR_RUN(core_parallel_dims_are_split_across_cores);
  TSR_RUN(core_barrier_orders_two_cores);
  TSR_RUN(ring_all_gather_over_four_devices);
  TSR_RUN(out_of_range_device_and_dma_bounds);
  return tsr_test_done();
}
