/* Unit tests for runtime/cpu_run.c, the threads and semaphores of compiled
 * kernels, without LLVM: the "compiled kernels" here are C functions with
 * the entry point's signature (lower/lower_api.h) that call the runtime as
 * generated code does. Rings of signals and waits over devices and cores with
 * data handed over between threads, barriers, remote DMAs into registered
 * memory, the parallel grid split, deadlocks (reported, never a hang), signals
 * to cores that do not exist, print and assert. In suite 'cache', so that it
 * also runs under ThreadSanitizer (scripts/test.sh). */
#define _GNU_SOURCE /* fopencookie, in tests/unit/write_counter.h */
#include "tests/unit/write_counter.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>

#include "ir/ir.h"
#include "lower/lower_api.h"
#include "runtime/runtime_internal.h"
#include "tests/harness.h"

/* Slots: %ready (0), %bar (1), %recv[2] (2, 3); sites found by opcode. */
static const char kernel_tsr[] =
    "kernel @k\n"
    "  grid(4) semantics(parallel)\n"
    "  in %x: f32[4, 8] any\n"
    "  out %y: f32[4, 8] any\n"
    "  scratch %ready: sem\n"
    "  scratch %bar: sem\n"
    "  scratch %recv: dma_sem[2]\n"
    "{\n"
    "  %one = const 1 : i32\n"
    "  sem_signal %ready, %one\n"
    "  sem_wait %ready, %one\n"
    "  core_barrier %bar\n"
    "  dma_start %x[:, :] -> %y[:, :], %recv[0] device %one\n"
    "  dma_wait %x[:, :] -> %y[:, :], %recv[0]\n"
    "  print \"core {} says {}\", %one, %one\n"
    "  %no = const false : i1\n"
    "  assert %no, \"never\"\n"
    "}\n";

enum { SLOT_READY = 0, SLOT_BAR = 1, SLOT_RECV = 2 };

static tsr_ir_module_t *module;
static tsr_ir_kernel_t *kernel;
static tsr_cpu_info_t *info;

typedef struct find_site {
  tsr_opcode_t opcode;
  int64_t site;
} find_site_t;

static void visit(void *ctx, const tsr_op_t *op, uint32_t position) {
  find_site_t *f = ctx;
  if (op->opcode == f->opcode && f->site < 0) f->site = position;
}

static int64_t site_of(tsr_opcode_t opcode) {
  find_site_t f = {opcode, -1};
  tsr_ir_walk_ops(kernel, visit, &f);
  return f.site;
}

/* ---- The entry point's view of its arguments ---------------------------- */

typedef struct self {
  tsr_lower_rt_fn fn;
  void *ctx;
  int32_t device, core;
  int64_t plo, phi;
} self_t;

static self_t self_of(void **args) { /* no memrefs in these kernels */
  self_t s;
  s.fn = (tsr_lower_rt_fn)(uintptr_t) * (int64_t *)args[0];
  s.ctx = (void *)(uintptr_t) * (int64_t *)args[1];
  s.device = *(int32_t *)args[2];
  s.core = *(int32_t *)args[3];
  s.plo = *(int64_t *)args[4];
  s.phi = *(int64_t *)args[5];
  return s;
}

static int64_t call(const self_t *s, tsr_lower_rt_call_t c, int64_t a, int64_t b, int64_t x,
                    int64_t y) {
  return s->fn(s->ctx, c, a, b, x, y);
}

static int64_t slot_site(int64_t slot, tsr_opcode_t opcode) {
  return slot + (site_of(opcode) << 32);
}

static tsr_status_t run(void (*entry)(void **), uint32_t devices, uint32_t cores,
                        FILE *print_stream) {
  tsr_interp_options_t o;
  tsr_interp_options_initialize(&o);
  o.devices = devices;
  o.cores = cores;
  void *args[1] = {NULL};
  return tsr_cpu_run_with(entry, info, NULL, args, 0, &o, print_stream, NULL);
}

/* ---- A ring: every core hands a value to the next one, many times ------- */

enum { RING_ROUNDS = 300, MAX_CORES = 8 };
static int64_t mailbox[MAX_CORES]; /* plain memory: ordered by the semaphores */
static atomic_int ring_errors;
static uint32_t ring_devices, ring_cores;

static void ring_entry(void **args) {
  self_t s = self_of(args);
  const uint32_t n = ring_devices * ring_cores;
  const uint32_t me = (uint32_t)s.device * ring_cores + (uint32_t)s.core;
  const uint32_t next = (me + 1) % n, prev = (me + n - 1) % n;
  for (int64_t r = 0; r < RING_ROUNDS; r++) {
    /* Core 0 starts each round; everyone else passes it on. */
    if (me != 0) {
      call(&s, TSR_RT_WAIT, slot_site(SLOT_READY, TSR_OP_SEM_WAIT), 1, -1, -1);
      if (mailbox[prev] != r * 1000 + prev) atomic_fetch_add(&ring_errors, 1);
    }
    mailbox[me] = r * 1000 + me;
    call(&s, TSR_RT_SIGNAL, slot_site(SLOT_READY, TSR_OP_SEM_SIGNAL), 1, next / ring_cores,
         next % ring_cores);
    if (me == 0) {
      call(&s, TSR_RT_WAIT, slot_site(SLOT_READY, TSR_OP_SEM_WAIT), 1, -1, -1);
      if (mailbox[prev] != r * 1000 + prev) atomic_fetch_add(&ring_errors, 1);
    }
  }
  if (call(&s, TSR_RT_READ, SLOT_READY, 0, 0, 0) != 0) atomic_fetch_add(&ring_errors, 1);
}

TSR_TEST(ring_of_signals_hands_data_over) {
  const uint32_t shapes[][2] = {{1, 2}, {2, 2}, {4, 1}, {1, 8}};
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    ring_devices = shapes[i][0];
    ring_cores = shapes[i][1];
    atomic_store(&ring_errors, 0);
    TSR_CHECK_OK(run(ring_entry, ring_devices, ring_cores, NULL));
    TSR_CHECK_EQ_INT(atomic_load(&ring_errors), 0);
  }
}

/* ---- Barriers: nobody passes one before every core of its device arrives */

enum { BARRIER_ROUNDS = 200 };
static atomic_int arrived[4][BARRIER_ROUNDS]; /* per device and round */
static atomic_int barrier_errors;
static uint32_t barrier_cores;

static void barrier_entry(void **args) {
  self_t s = self_of(args);
  for (int r = 0; r < BARRIER_ROUNDS; r++) {
    atomic_fetch_add(&arrived[s.device][r], 1);
    call(&s, TSR_RT_BARRIER, slot_site(SLOT_BAR, TSR_OP_CORE_BARRIER), 0, 0, 0);
    if (atomic_load(&arrived[s.device][r]) != (int)barrier_cores)
      atomic_fetch_add(&barrier_errors, 1);
  }
}

TSR_TEST(core_barrier_meets_the_cores_of_a_device) {
  memset(arrived, 0, sizeof arrived);
  atomic_store(&barrier_errors, 0);
  barrier_cores = 3;
  TSR_CHECK_OK(run(barrier_entry, 2, 3, NULL));
  TSR_CHECK_EQ_INT(atomic_load(&barrier_errors), 0);
}

/* ---- Remote DMAs into memory another device registered ------------------ */

static float buffers[4][2][8]; /* per device: source and destination */
static atomic_int dma_errors;

static void remote_entry(void **args) {
  self_t s = self_of(args);
  const int64_t d = s.device, right = (d + 1) % 4;
  for (int i = 0; i < 8; i++) buffers[d][0][i] = (float)(d * 100 + i);
  call(&s, TSR_RT_REGISTER, 0, (int64_t)(uintptr_t)buffers[d], 0, 0);
  call(&s, TSR_RT_START, 0, 0, 0, 0);
  /* 8 elements of source row 0 -> row 1 of the right neighbour, stride 1 */
  int64_t desc[TSR_RDMA_DIMS + 3] = {0};
  desc[TSR_RDMA_DEVICE] = right;
  desc[TSR_RDMA_ROOT] = 0;
  desc[TSR_RDMA_OFFSET] = 8;
  desc[TSR_RDMA_SRC] = (int64_t)(uintptr_t)buffers[d][0];
  desc[TSR_RDMA_RANK] = 1;
  desc[TSR_RDMA_DTYPE] = TSR_DTYPE_F32;
  desc[TSR_RDMA_ADD] = 0;
  desc[TSR_RDMA_SEM] = SLOT_RECV;
  desc[TSR_RDMA_SEND] = SLOT_RECV + 1;
  desc[TSR_RDMA_DIMS] = 8;
  desc[TSR_RDMA_DIMS + 1] = 1;
  desc[TSR_RDMA_DIMS + 2] = 1;
  call(&s, TSR_RT_REMOTE_DMA, site_of(TSR_OP_DMA_START), (int64_t)(uintptr_t)desc, 0, 0);
  call(&s, TSR_RT_WAIT, slot_site(SLOT_RECV + 1, TSR_OP_DMA_WAIT), 32, -1, -1); /* sent */
  call(&s, TSR_RT_WAIT, slot_site(SLOT_RECV, TSR_OP_DMA_WAIT), 32, -1, -1);     /* arrived */
  const int64_t left = (d + 3) % 4;
  for (int i = 0; i < 8; i++)
    if (buffers[d][1][i] != (float)(left * 100 + i)) atomic_fetch_add(&dma_errors, 1);
  call(&s, TSR_RT_END, 0, 0, 0, 0);
}

TSR_TEST(remote_dma_copies_into_the_neighbour_and_signals_both) {
  atomic_store(&dma_errors, 0);
  memset(buffers, 0, sizeof buffers);
  TSR_CHECK_OK(run(remote_entry, 4, 1, NULL));
  TSR_CHECK_EQ_INT(atomic_load(&dma_errors), 0);
}

static void remote_bad_device_entry(void **args) {
  self_t s = self_of(args);
  call(&s, TSR_RT_REGISTER, 0, (int64_t)(uintptr_t)buffers[s.device], 0, 0);
  call(&s, TSR_RT_START, 0, 0, 0, 0);
  int64_t desc[TSR_RDMA_DIMS + 3] = {0};
  desc[TSR_RDMA_DEVICE] = 7;
  desc[TSR_RDMA_RANK] = 1;
  desc[TSR_RDMA_DTYPE] = TSR_DTYPE_F32;
  desc[TSR_RDMA_SEND] = -1;
  desc[TSR_RDMA_DIMS] = 8;
  call(&s, TSR_RT_REMOTE_DMA, site_of(TSR_OP_DMA_START), (int64_t)(uintptr_t)desc, 0, 0);
  call(&s, TSR_RT_END, 0, 0, 0, 0);
}

TSR_TEST(remote_dma_to_a_device_that_does_not_exist_is_a_kernel_error) {
  tsr_status_t s = run(remote_bad_device_entry, 2, 1, NULL);
  TSR_CHECK_EQ_INT(tsr_status_code(s), TSR_KERNEL_ERROR);
  const char *m = s ? tsr_status_message(s) : "";
  TSR_CHECK(strstr(m, "test.tsr:13:3: error: kernel @k, device ")); /* the first to fail */
  TSR_CHECK(strstr(m, ", grid point (0): 'dma_start': device 7 out of range: the run has 2 "
                      "devices"));
  tsr_status_free(s);
}

/* ---- The grid split -------------------------------------------------------- */

static int64_t ranges[MAX_CORES][2];

static void range_entry(void **args) {
  self_t s = self_of(args);
  ranges[s.core][0] = s.plo;
  ranges[s.core][1] = s.phi;
}

TSR_TEST(parallel_points_are_split_as_the_interpreter_splits_them) {
  TSR_CHECK_OK(run(range_entry, 1, 3, NULL)); /* grid(4): chunks of 2 */
  TSR_CHECK(ranges[0][0] == 0 && ranges[0][1] == 2);
  TSR_CHECK(ranges[1][0] == 2 && ranges[1][1] == 4);
  TSR_CHECK(ranges[2][0] == 4 && ranges[2][1] == 4);
  TSR_CHECK_OK(run(range_entry, 1, 1, NULL));
  TSR_CHECK(ranges[0][0] == 0 && ranges[0][1] == 4);
}

/* ---- Deadlocks: reported with every waiting core, never a hang ---------- */

static void wait_forever_entry(void **args) {
  self_t s = self_of(args);
  *(int64_t *)s.ctx = s.core; /* the grid point, as generated code stores it */
  if (s.core == 0) return;    /* one core finishes, the others wait */
  call(&s, TSR_RT_WAIT, slot_site(SLOT_READY, TSR_OP_SEM_WAIT), 2, -1, -1);
  call(&s, TSR_RT_WAIT, slot_site(SLOT_READY, TSR_OP_SEM_WAIT), 2, -1, -1); /* returns at once */
}

TSR_TEST(deadlock_is_reported_for_every_waiting_core) {
  tsr_status_t s = run(wait_forever_entry, 1, 3, NULL);
  TSR_CHECK_EQ_INT(tsr_status_code(s), TSR_KERNEL_ERROR);
  const char *m = s ? tsr_status_message(s) : "";
  TSR_CHECK(strstr(m, "test.tsr:11:3: error: kernel @k, core 1, grid point (1): 'sem_wait': "
                      "deadlock: every core is blocked; this one waits for %ready to reach 2, "
                      "it holds 0 and nothing in flight will signal it"));
  TSR_CHECK(strstr(m, "core 2, grid point (2): 'sem_wait': deadlock"));
  TSR_CHECK(!strstr(m, "core 0,"));
  tsr_status_free(s);
}

static void signal_too_far_entry(void **args) {
  self_t s = self_of(args);
  call(&s, TSR_RT_SIGNAL, slot_site(SLOT_READY, TSR_OP_SEM_SIGNAL), 1, -1, 5);
}

TSR_TEST(signal_to_a_core_that_does_not_exist_is_a_kernel_error) {
  tsr_status_t s = run(signal_too_far_entry, 1, 2, NULL);
  TSR_CHECK_EQ_INT(tsr_status_code(s), TSR_KERNEL_ERROR);
  TSR_CHECK(s && strstr(tsr_status_message(s),
                        "'sem_signal': core 5 out of range: a device has 2 cores"));
  tsr_status_free(s);
}

/* ---- print and assert ----------------------------------------------------- */

static void print_entry(void **args) {
  self_t s = self_of(args);
  int32_t core = s.core, value = 40 + s.core;
  int64_t addrs[2] = {(int64_t)(uintptr_t)&core, (int64_t)(uintptr_t)&value};
  for (int i = 0; i < 50; i++)
    call(&s, TSR_RT_PRINT, site_of(TSR_OP_PRINT), (int64_t)(uintptr_t)addrs, 0, 0);
  call(&s, TSR_RT_ASSERT, site_of(TSR_OP_ASSERT), 0, 0, 0);
}

TSR_TEST(print_lines_stay_whole_and_assert_reports_once_per_site) {
  write_counter_t wc;
  FILE *f = write_counter_open(&wc);
  TSR_CHECK(f);
  if (!f) return;
  tsr_status_t s = run(print_entry, 1, 4, f);
  write_counter_close(&wc);
  /* one write call per printed line, whole */
  TSR_CHECK_EQ_INT(wc.writes, 4 * 50);
  TSR_CHECK_EQ_INT(wc.partial, 0);
  int lines[4] = {0}, bad = 0;
  for (char *line = wc.text; line && *line;) {
    char *end = strchr(line, '\n');
    if (!end) break;
    int c = -1, v = -1;
    if (sscanf(line, "core %d says %d", &c, &v) == 2 && c >= 0 && c < 4 && v == 40 + c &&
        end - line == (ptrdiff_t)strlen("core 0 says 40"))
      lines[c]++;
    else
      bad++;
    line = end + 1;
  }
  TSR_CHECK_EQ_INT(bad, 0);
  for (int c = 0; c < 4; c++) TSR_CHECK_EQ_INT(lines[c], 50);
  TSR_CHECK_EQ_INT(tsr_status_code(s), TSR_KERNEL_ERROR);
  const char *m = s ? tsr_status_message(s) : "";
  TSR_CHECK(strstr(m, "'assert': assertion failed: never"));
  TSR_CHECK(strstr(m, "3 more occurrences of these errors not shown"));
  tsr_status_free(s);
  write_counter_free(&wc);
}

/* ---- Run bounds: cancel from another thread, max_steps ----------------- */

/* A stand-in for compiled code: core 0 waits for a signal that never comes
 * (blocked in the runtime), the others loop forever, counting each
 * iteration as generated code does (the context's budget, TSR_RT_STEP when
 * it runs out) and leaving when the runtime says stop. */
static atomic_long spin_steps;

static void spin_entry(void **args) {
  self_t s = self_of(args);
  if (s.core == 0) {
    call(&s, TSR_RT_WAIT, slot_site(SLOT_READY, TSR_OP_SEM_WAIT), 1, -1, -1);
    return;
  }
  int64_t *budget = (int64_t *)s.ctx + TSR_RT_CTX_BUDGET;
  const int64_t grid_site = tsr_ir_walk_ops(kernel, NULL, NULL);
  for (;;) {
    int64_t b = *budget - 1;
    if (b < 0) b = call(&s, TSR_RT_STEP, grid_site, 0, 0, 0); /* at grid point 0 */
    *budget = b;
    if (b < 0) return;
    atomic_fetch_add(&spin_steps, 1);
  }
}

static volatile int cancel_flag;

static void *cancel_later(void *p) {
  (void)p;
  while (atomic_load(&spin_steps) < 100000) sched_yield();
  __atomic_store_n(&cancel_flag, 1, __ATOMIC_RELAXED);
  return NULL;
}

TSR_TEST(cancel_from_another_thread_stops_every_core) {
  tsr_interp_options_t o;
  tsr_interp_options_initialize(&o);
  o.cores = 3;
  o.cancel = &cancel_flag;
  cancel_flag = 0;
  atomic_store(&spin_steps, 0);
  pthread_t t;
  TSR_CHECK(pthread_create(&t, NULL, cancel_later, NULL) == 0);
  void *args[1] = {NULL};
  tsr_status_t s = tsr_cpu_run(spin_entry, info, NULL, args, 0, &o);
  pthread_join(t, NULL);
  TSR_CHECK_EQ_INT(tsr_status_code(s), TSR_KERNEL_ERROR);
  /* core 1 or 2, whichever asked for steps first after the flag was set */
  TSR_CHECK(s && strstr(tsr_status_message(s), "test.tsr:1:8: error: kernel @k, core "));
  TSR_CHECK(s && strstr(tsr_status_message(s), ", grid point (0): the grid step: run stopped: "
                                               "cancelled"));
  TSR_CHECK(atomic_load(&spin_steps) >= 100000);
  tsr_status_free(s);
}

TSR_TEST(max_steps_stops_every_core_at_the_limit) {
  tsr_interp_options_t o;
  tsr_interp_options_initialize(&o);
  o.cores = 3;
  o.max_steps = 5000;
  atomic_store(&spin_steps, 0);
  void *args[1] = {NULL};
  tsr_status_t s = tsr_cpu_run(spin_entry, info, NULL, args, 0, &o);
  TSR_CHECK_EQ_INT(tsr_status_code(s), TSR_KERNEL_ERROR);
  TSR_CHECK(s && strstr(tsr_status_message(s), "run stopped after 5000 steps (--max-steps 5000)"));
  /* two spinning cores share the budget: never more steps than granted */
  TSR_CHECK(atomic_load(&spin_steps) <= 5000);
  tsr_status_free(s);
}

int main(void) {
  tsr_status_t s = tsr_ir_module_parse(TSR_SV("test.tsr"),
                                       (tsr_string_view_t){kernel_tsr, strlen(kernel_tsr)},
                                       &module);
  if (!s) {
    kernel = tsr_ir_module_kernel(module, 0);
    s = tsr_cpu_info_create(kernel, &info);
  }
  if (s) {
    printf("Bail out! %s\n", tsr_status_message(s));
    return 1;
  }
  TSR_RUN(ring_of_signals_hands_data_over);
  TSR_RUN(core_barrier_meets_the_cores_of_a_device);
  TSR_RUN(remote_dma_copies_into_the_neighbour_and_signals_both);
  TSR_RUN(remote_dma_to_a_device_that_does_not_exist_is_a_kernel_error);
  TSR_RUN(parallel_points_are_split_as_the_interpreter_splits_them);
  TSR_RUN(deadlock_is_reported_for_every_waiting_core);
  TSR_RUN(signal_to_a_core_that_does_not_exist_is_a_kernel_error);
  TSR_RUN(print_lines_stay_whole_and_assert_reports_once_per_site);
  TSR_RUN(cancel_from_another_thread_stops_every_core);
  TSR_RUN(max_steps_stops_every_core_at_the_limit);
  tsr_cpu_info_destroy(info);
  tsr_ir_module_destroy(module);
  return tsr_test_done();
}
