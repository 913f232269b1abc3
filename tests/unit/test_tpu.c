/* The Mosaic TPU emitter (tpu/, docs/tpu.md) through the public API:
 * the module's structure for the example kernels (signature order,
 * attributes, transform functions, key ops), located errors for what has
 * no TPU form and for each layout rule of `tessera check --target tpu`,
 * and the disk cache's hit. That the text parses and compiles with
 * jaxlib and libtpu is proved by the Python suite (docs/tpu.md). */
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "tests/harness.h"

static tsr_ir_module_t *parse_text(const char *name, const char *text) {
  tsr_ir_module_t *m = NULL;
  tsr_string_view_t fn = {name, strlen(name)}, tx = {text, strlen(text)};
  TSR_CHECK_OK(tsr_ir_module_parse(fn, tx, &m));
  return m;
}

static tsr_ir_module_t *parse_source(const char *rel) {
  char *text = tsr_test_read_source(rel, NULL);
  TSR_CHECK(text != NULL);
  if (!text) return NULL;
  tsr_ir_module_t *m = parse_text(rel, text);
  free(text);
  return m;
}

/* The emitted text of the kernel `name` (NULL: the first) of `rel`. */
static char *emit_source(const char *rel, const char *name, const char *chip) {
  tsr_ir_module_t *m = parse_source(rel);
  if (!m) return NULL;
  tsr_ir_kernel_t *k = name ? tsr_ir_module_find_kernel(m, (tsr_string_view_t){name, strlen(name)})
                            : tsr_ir_module_kernel(m, 0);
  char *text = NULL;
  TSR_CHECK(k != NULL);
  if (k) TSR_CHECK_OK(tsr_tpu_emit(NULL, k, chip, &text));
  tsr_ir_module_destroy(m);
  return text;
}

static int count(const char *text, const char *needle) {
  int n = 0;
  for (const char *p = text; (p = strstr(p, needle)); p += strlen(needle)) n++;
  return n;
}

#define CHECK_HAS(text, needle)                                                \
  do {                                                                         \
    if (!(text) || !strstr((text), (needle)))                                  \
      TSR_FAIL_AT("missing '%s' in:\n%s", (needle), (text) ? (text) : "(null)"); \
  } while (0)

TSR_TEST(add_module_shape) {
  char *t = emit_source("kernels/examples/add.tsr", NULL, NULL);
  if (!t) return;
  TSR_CHECK(strncmp(t, "module {\n", 9) == 0);
  /* grid index, then the three windowed operands as VMEM blocks */
  CHECK_HAS(t, "func.func @add(%$g0: i32, %a: memref<128x512xf32, #tpu.memory_space<vmem>>, "
               "%b: memref<128x512xf32, #tpu.memory_space<vmem>>, "
               "%c: memref<128x512xf32, #tpu.memory_space<vmem>>) attributes {");
  CHECK_HAS(t, "dimension_semantics = [#tpu.dimension_semantics<parallel>], "
               "iteration_bounds = array<i64: 8>, scalar_prefetch = 0 : i64, "
               "scratch_operands = 0 : i64, tpu.core_type = #tpu.core_type<tc>, window_params = "
               "[{transform_indices = @transform_0, window_bounds = array<i64: 128, 512>}, "
               "{transform_indices = @transform_1, window_bounds = array<i64: 128, 512>}, "
               "{transform_indices = @transform_2, window_bounds = array<i64: 128, 512>}]}");
  CHECK_HAS(t, "func.func @transform_0(%i: i32) -> (i32, i32) {");
  CHECK_HAS(t, "return %i, %");
  TSR_CHECK_EQ_INT(count(t, "func.func @transform_"), 3);
  TSR_CHECK_EQ_INT(count(t, "vector.load %"), 2);
  CHECK_HAS(t, "arith.addf");
  CHECK_HAS(t, "tpu.vector_store %c[");
  /* each op's lines start with its location */
  CHECK_HAS(t, "// kernels/examples/add.tsr:9:8: add");
  tsr_ir_string_free(t);
}

TSR_TEST(matmul_module_shape) {
  char *t = emit_source("kernels/examples/matmul.tsr", NULL, "v6e");
  if (!t) return;
  CHECK_HAS(t, "func.func @matmul(%$g0: i32, %$g1: i32, %$g2: i32, %a: ");
  /* scratch comes last, after the windowed operands */
  CHECK_HAS(t, "%c: memref<128x128xf32, #tpu.memory_space<vmem>>, "
               "%acc: memref<128x128xf32, #tpu.memory_space<vmem>>) attributes");
  CHECK_HAS(t, "dimension_semantics = [#tpu.dimension_semantics<parallel>, "
               "#tpu.dimension_semantics<parallel>, #tpu.dimension_semantics<arbitrary>]");
  CHECK_HAS(t, "iteration_bounds = array<i64: 2, 2, 4>");
  CHECK_HAS(t, "scratch_operands = 1 : i64");
  CHECK_HAS(t, "tpu.matmul %x, %y, %");
  CHECK_HAS(t, "dimension_numbers = #tpu.dot_dimension_numbers<[1], [0], [0], [1], [0, 0, 1, 1], "
               "[], []>, transpose_lhs_hint = false");
  TSR_CHECK_EQ_INT(count(t, "scf.if %"), 2);
  /* num_programs is folded to the grid size, as Pallas does */
  CHECK_HAS(t, "%nk = arith.constant 4 : i32");
  /* the index maps: (i, k), (k, j), (i, j) */
  CHECK_HAS(t, "func.func @transform_0(%i: i32, %j: i32, %k: i32) -> (i32, i32) {\n"
               "    return %i, %k : i32, i32");
  CHECK_HAS(t, "func.func @transform_1(%i: i32, %j: i32, %k: i32) -> (i32, i32) {\n"
               "    return %k, %j : i32, i32");
  tsr_ir_string_free(t);
}

TSR_TEST(prefetch_and_reductions) {
  char *t = emit_source("kernels/examples/gather_prefetch.tsr", NULL, NULL);
  if (t) {
    /* scalar prefetch: SMEM, right after the grid indices, and an argument
     * of every transform function */
    CHECK_HAS(t, "(%$g0: i32, %tbl: memref<8xi32, #tpu.memory_space<smem>>, %x: ");
    CHECK_HAS(t, "scalar_prefetch = 1 : i64");
    CHECK_HAS(t, "func.func @transform_0(%i: i32, %tbl: memref<8xi32, #tpu.memory_space<smem>>)");
    CHECK_HAS(t, "memref.load %tbl[");
    tsr_ir_string_free(t);
  }
  /* a rank-0 scalar prefetch: a rank-0 SMEM memref */
  tsr_ir_module_t *m = parse_text("p0.tsr",
      "kernel @p0\n"
      "  grid(4)\n"
      "  prefetch %n: i32\n"
      "  in %x: f32[32, 128] vmem block[8, 128] map(%i) -> (%i, 0)\n"
      "  out %y: f32[32, 128] vmem block[8, 128] map(%i) -> (%i, 0)\n"
      "{\n"
      "  %k = load %n[] : i32\n"
      "  %f = convert %k : f32\n"
      "  %v = load %x[:, :] : f32[8, 128]\n"
      "  %r = mul %v, %f : f32[8, 128]\n"
      "  store %y[:, :], %r\n"
      "}\n");
  if (m) {
    t = NULL;
    TSR_CHECK_OK(tsr_tpu_emit(NULL, tsr_ir_module_kernel(m, 0), NULL, &t));
    CHECK_HAS(t, "(%$g0: i32, %n: memref<i32, #tpu.memory_space<smem>>, %x: ");
    CHECK_HAS(t, "%k = memref.load %n[] : memref<i32, #tpu.memory_space<smem>>");
    CHECK_HAS(t, "%f = arith.sitofp %k : i32 to f32");
    tsr_ir_string_free(t);
    tsr_ir_module_destroy(m);
  }
  t = emit_source("kernels/examples/softmax.tsr", NULL, NULL);
  if (t) {
    CHECK_HAS(t, "vector.multi_reduction <maximumf>, %v, %");
    CHECK_HAS(t, "[1] : vector<8x256xf32> to vector<8xf32>");
    CHECK_HAS(t, "vector.multi_reduction <add>, %e");
    CHECK_HAS(t, "vector.shape_cast %m : vector<8xf32> to vector<8x1xf32>");
    CHECK_HAS(t, "vector.broadcast");
    CHECK_HAS(t, "math.exp %d : vector<8x256xf32>");
    CHECK_HAS(t, "arith.divf %e, %sb");
    tsr_ir_string_free(t);
  }
  t = emit_source("kernels/examples/int_hash.tsr", NULL, NULL);
  if (t) {
    CHECK_HAS(t, "arith.shrui");
    CHECK_HAS(t, "arith.remsi");
    CHECK_HAS(t, "arith.divsi");
    CHECK_HAS(t, "vector.multi_reduction <minsi>");
    CHECK_HAS(t, "arith.constant -1640531535 : i32");
    tsr_ir_string_free(t);
  }
  t = emit_source("kernels/examples/bf16_axpy.tsr", NULL, NULL);
  if (t) {
    CHECK_HAS(t, "arith.constant 0x3E9A : bf16"); /* 0.3 in bf16, exact bits */
    CHECK_HAS(t, "arith.extf %r : vector<16x256xbf16> to vector<16x256xf32>");
    tsr_ir_string_free(t);
  }
}

TSR_TEST(every_example_emits) {
  static const char *const files[] = {
      "kernels/examples/add.tsr",    "kernels/examples/bf16_axpy.tsr",
      "kernels/examples/gather_prefetch.tsr", "kernels/examples/int_hash.tsr",
      "kernels/examples/matmul.tsr", "kernels/examples/ragged.tsr",
      "kernels/examples/reduce.tsr", "kernels/examples/softmax.tsr",
  };
  static const char *const chips[] = {"v5e", "v6e", "v5p"};
  for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
    tsr_ir_module_t *m = parse_source(files[f]);
    if (!m) continue;
    for (size_t k = 0; k < tsr_ir_module_kernel_count(m); k++)
      for (size_t c = 0; c < 3; c++) {
        char *t = NULL;
        tsr_status_t s = tsr_tpu_emit(NULL, tsr_ir_module_kernel(m, k), chips[c], &t);
        if (s) TSR_FAIL_AT("%s on %s: %s", files[f], chips[c], tsr_status_message(s));
        tsr_status_free(s);
        if (t) CHECK_HAS(t, "tpu.core_type = #tpu.core_type<tc>");
        tsr_ir_string_free(t);
      }
    tsr_ir_module_destroy(m);
  }
}

TSR_TEST(dma_and_semaphores) {
  char *t = emit_source("tests/diagnostics/ok/scoped_sync_copy.tsr", NULL, NULL);
  if (t) {
    /* an `any` operand: whole array, empty window params */
    CHECK_HAS(t, "%x: memref<32x128xf32, #tpu.memory_space<any>>");
    CHECK_HAS(t, "window_params = [{}, {transform_indices = @transform_1");
    CHECK_HAS(t, "%sem: memref<!tpu.dma_semaphore, #tpu.memory_space<semaphore_mem>>");
    CHECK_HAS(t, "\"tpu.region\"() ({");
    CHECK_HAS(t, "%buf = memref.alloca() : memref<8x128xf32, #tpu.memory_space<vmem>>");
    CHECK_HAS(t, "tpu.memref_slice %x[%off, %");
    CHECK_HAS(t, "tpu.enqueue_dma source(%");
    CHECK_HAS(t, "target(%buf : memref<8x128xf32, #tpu.memory_space<vmem>>) "
                 "target_semaphore(%sem : ");
    CHECK_HAS(t, "tpu.wait_dma source(");
    CHECK_HAS(t, "tpu.yield %");
    CHECK_HAS(t, "}) : () -> (vector<8x128xf32>)");
    tsr_ir_string_free(t);
  }
  t = emit_source("tests/diagnostics/ok/remote_right_permute.tsr", NULL, NULL);
  if (t) {
    CHECK_HAS(t, "tpu.device_id : i32");
    CHECK_HAS(t, "source_semaphore(");
    CHECK_HAS(t, "device_id(%");
    /* the wait on the send semaphore is the sender's, as Pallas's wait_send */
    CHECK_HAS(t, "source_semaphore(%send : memref<!tpu.dma_semaphore, "
                 "#tpu.memory_space<semaphore_mem>>) {wait_target = false}");
    CHECK_HAS(t, "target_semaphore(%recv : memref<!tpu.dma_semaphore, "
                 "#tpu.memory_space<semaphore_mem>>) {wait_target = true}");
    tsr_ir_string_free(t);
  }
  static const char *const ok[] = {
      "barrier_ring_vmem_output", "core_barrier_exchange", "core_handshake",
      "core_reduction_handshake", "double_buffered_loop",  "double_buffered_pipeline",
      "dynamic_sem_array",        "one_wait_two_dmas",     "paged_gather_smem_table",
      "parallel_cores_manual_dma", "remote_right_permute", "ring_all_gather",
      "scoped_sync_copy",
  };
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    char rel[256];
    snprintf(rel, sizeof rel, "tests/diagnostics/ok/%s.tsr", ok[i]);
    for (int chip = 0; chip < 2; chip++) {
      char *u = emit_source(rel, NULL, chip ? "v5p" : "v5e");
      TSR_CHECK(u != NULL);
      tsr_ir_string_free(u);
    }
  }
  /* on a megacore chip, core_barrier signals the other core */
  t = emit_source("tests/diagnostics/ok/core_barrier_exchange.tsr", NULL, "v5p");
  if (t) {
    CHECK_HAS(t, "tpu.sem_signal %bar, %");
    CHECK_HAS(t, " core_id %");
    tsr_ir_string_free(t);
  }
}

/* The first diagnostic record of a status: its line, col and op. */
static void check_record(tsr_status_t s, tsr_status_code_t code, int line, const char *op,
                         const char *text) {
  if (tsr_status_code(s) != code)
    TSR_FAIL_AT("expected %s, got %s: %s", tsr_status_code_name(code),
                tsr_status_code_name(tsr_status_code(s)), tsr_status_message(s));
  tsr_diagnostic_list_t *list = NULL;
  TSR_CHECK_OK(tsr_diagnostic_list_create_from_status(s, &list));
  const tsr_diagnostic_t *d = list ? tsr_diagnostic_list_get(list, 0) : NULL;
  TSR_CHECK(d != NULL);
  if (d) {
    TSR_CHECK_EQ_INT(d->line, line);
    TSR_CHECK(d->col > 0);
    if (op) TSR_CHECK_EQ_STR(d->op.data, op);
    if (!strstr(d->message.data, text))
      TSR_FAIL_AT("message '%s' lacks '%s'", d->message.data, text);
  }
  tsr_diagnostic_list_destroy(list);
  tsr_status_free(s);
}

/* A DMA signalling a regular semaphore: Mosaic's enqueue_dma with a
 * !tpu.semaphore on v5p and v6 on (libtpu compiles it); on v5e, a located
 * refusal. */
TSR_TEST(dma_with_regular_semaphore_not_on_v5e) {
  const char *rel = "tests/diagnostics/ok/dma_regular_semaphore.tsr";
  char *t = emit_source(rel, "dma_regular_semaphore", "v5p");
  tsr_ir_string_free(t);
  t = emit_source(rel, "dma_regular_semaphore", "v6e");
  if (t) {
    TSR_CHECK_EQ_INT(count(t, "tpu.enqueue_dma"), 3);
    TSR_CHECK_EQ_INT(count(t, "target_semaphore(%$"), 3);
    TSR_CHECK_EQ_INT(count(t, "memref<!tpu.semaphore, #tpu.memory_space<semaphore_mem>>)\n"), 3);
    tsr_ir_string_free(t);
  }
  tsr_ir_module_t *m = parse_source(rel);
  if (!m) return;
  tsr_ir_kernel_t *k = tsr_ir_module_find_kernel(
      m, (tsr_string_view_t){"dma_regular_semaphore", strlen("dma_regular_semaphore")});
  TSR_CHECK(k != NULL);
  if (k) {
    t = NULL;
    tsr_status_t s = tsr_tpu_emit(NULL, k, "v5e", &t);
    TSR_CHECK(t == NULL);
    check_record(s, TSR_UNIMPLEMENTED, 15, "dma_start", "not supported on v5e");
  }
  tsr_ir_module_destroy(m);
}

/* A dynamic grid extent, as Pallas writes it for Mosaic: MLIR's dynamic
 * size in iteration_bounds (the call passes the extent as a leading
 * operand), num_programs of it tpu.iteration_bound, the prefetch operand
 * still the kernel's; on two cores, core_id from the extents; a dynamic
 * core_parallel dim is a located error (Mosaic shards it when compiling). */
TSR_TEST(dynamic_grid_extent_is_emitted) {
  tsr_ir_module_t *m = parse_text("dyn.tsr", "\n"
                                             "kernel @k\n"
                                             "  grid(%m, %n) semantics(parallel, arbitrary)\n"
                                             "  prefetch %m: i32\n"
                                             "  prefetch %n: i32\n"
                                             "  out %y: f32[64, 128] vmem block[8, 128] "
                                             "map(%i, %j) -> (%i, 0)\n"
                                             "{\n"
                                             "  %c = core_id : i32\n"
                                             "  %q = num_programs 1 : i32\n"
                                             "  %s = add %c, %q : i32\n"
                                             "  %f = convert %s : f32\n"
                                             "  %b = broadcast %f : f32[8, 128]\n"
                                             "  store %y[:, :], %b\n"
                                             "}\n"
                                             "kernel @cp\n"
                                             "  grid(%n) semantics(core_parallel)\n"
                                             "  prefetch %n: i32\n"
                                             "  out %y: f32[8, 128] vmem\n"
                                             "{\n"
                                             "}\n");
  if (!m) return;
  char *t = NULL;
  TSR_CHECK_OK(tsr_tpu_emit(NULL, tsr_ir_module_kernel(m, 0), "v5p", &t));
  if (t) {
    CHECK_HAS(t, "iteration_bounds = array<i64: -9223372036854775808, -9223372036854775808>");
    CHECK_HAS(t, "%m: memref<i32, #tpu.memory_space<smem>>, %n: memref<i32, "
                 "#tpu.memory_space<smem>>");
    CHECK_HAS(t, "scalar_prefetch = 2 : i64");
    CHECK_HAS(t, "tpu.iteration_bound 1 : i32");
    CHECK_HAS(t, "tpu.iteration_bound 0 : i32"); /* v5p: core_id splits dim 0 */
  }
  tsr_ir_string_free(t);
  t = NULL;
  tsr_status_t s = tsr_tpu_emit(NULL, tsr_ir_module_kernel(m, 1), "v5p", &t);
  TSR_CHECK(t == NULL);
  check_record(s, TSR_VERIFY_ERROR, 15, NULL, "core_parallel with a dynamic extent");
  tsr_ir_module_destroy(m);
}

/* The emitted text of the first kernel of `text`. */
static char *emit_text(const char *text, const char *chip) {
  tsr_ir_module_t *m = parse_text("emit.tsr", text);
  if (!m) return NULL;
  char *t = NULL;
  TSR_CHECK_OK(tsr_tpu_emit(NULL, tsr_ir_module_kernel(m, 0), chip, &t));
  tsr_ir_module_destroy(m);
  return t;
}

/* The first diagnostic of emitting the first kernel of `text` is at `line`
 * (naming `op`) and says `what`. */
static void check_refused(const char *text, int line, const char *op, const char *what) {
  tsr_ir_module_t *m = parse_text("refuse.tsr", text);
  if (!m) return;
  char *t = NULL;
  tsr_status_t s = tsr_tpu_emit(NULL, tsr_ir_module_kernel(m, 0), NULL, &t);
  TSR_CHECK(t == NULL);
  check_record(s, TSR_UNIMPLEMENTED, line, op, what);
  tsr_ir_module_destroy(m);
}

/* The narrow dtypes as Mosaic takes them (python/tests/tpu proves each
 * with libtpu): packed element types; 8-bit float arithmetic and compares
 * in f32 (tessera's definition: computed in f32, rounded once); sub-byte
 * compares on the values extended to i32; an i4 dot on the MXU; located
 * refusals for sub-byte arithmetic, 2-bit dots and f8e4m3fn max/min. */
TSR_TEST(narrow_dtypes_emit_or_are_refused) {
  char *t = emit_text("kernel @k\n"
                      "  grid(2)\n"
                      "  in %a: f8e4m3fn[64, 128] vmem block[32, 128] map(%i) -> (%i, 0)\n"
                      "  in %b: i4[64, 128] vmem block[32, 128] map(%i) -> (%i, 0)\n"
                      "  out %o: f8e4m3fn[64, 128] vmem block[32, 128] map(%i) -> (%i, 0)\n"
                      "{\n"
                      "  %x = load %a[:, :] : f8e4m3fn[32, 128]\n"
                      "  %y = add %x, %x : f8e4m3fn[32, 128]\n"
                      "  %q = load %b[:, :] : i4[32, 128]\n"
                      "  %z = const 0 : i4[32, 128]\n"
                      "  %c = gt %q, %z : i1[32, 128]\n"
                      "  %h = const 1.5 : f8e4m3fn[32, 128]\n"
                      "  %r = select %c, %y, %h : f8e4m3fn[32, 128]\n"
                      "  store %o[:, :], %r\n"
                      "}\n",
                      "v6e");
  if (t) {
    CHECK_HAS(t, "%a: memref<32x128xf8E4M3FN, #tpu.memory_space<vmem>>");
    CHECK_HAS(t, "%b: memref<32x128xi4, #tpu.memory_space<vmem>>");
    CHECK_HAS(t, "arith.extf %x : vector<32x128xf8E4M3FN> to vector<32x128xf32>");
    CHECK_HAS(t, "arith.addf");
    CHECK_HAS(t, "arith.truncf");
    CHECK_HAS(t, "arith.extsi %q : vector<32x128xi4> to vector<32x128xi32>");
    CHECK_HAS(t, "arith.cmpi sgt");
    CHECK_HAS(t, "dense<0x3C> : vector<32x128xf8E4M3FN>"); /* 1.5 */
  }
  tsr_ir_string_free(t);
  t = emit_text("kernel @k\n"
                "  grid(1)\n"
                "  in %a: i4[128, 256] vmem\n"
                "  in %b: i4[256, 128] vmem\n"
                "  out %o: i32[128, 128] vmem\n"
                "{\n"
                "  %x = load %a[:, :] : i4[128, 256]\n"
                "  %y = load %b[:, :] : i4[256, 128]\n"
                "  %r = dot %x, %y : i32[128, 128]\n"
                "  store %o[:, :], %r\n"
                "}\n",
                "v5e");
  if (t) CHECK_HAS(t, "vector<128x256xi4>, vector<256x128xi4>, vector<128x128xi32>");
  tsr_ir_string_free(t);
  check_refused("kernel @k\n"
                "  grid(1)\n"
                "  in %a: u4[32, 128] vmem\n"
                "  out %o: u4[32, 128] vmem\n"
                "{\n"
                "  %x = load %a[:, :] : u4[32, 128]\n"
                "  %y = add %x, %x : u4[32, 128]\n"
                "  store %o[:, :], %y\n"
                "}\n",
                7, "add", "not u4; convert to i32 first");
  check_refused("kernel @k\n"
                "  grid(1)\n"
                "  in %a: i2[128, 128] vmem\n"
                "  out %o: i32[128, 128] vmem\n"
                "{\n"
                "  %x = load %a[:, :] : i2[128, 128]\n"
                "  %y = dot %x, %x : i32[128, 128]\n"
                "  store %o[:, :], %y\n"
                "}\n",
                7, "dot", "8- and 4-bit integers, not i2");
  check_refused("kernel @k\n"
                "  grid(1)\n"
                "  in %a: f8e4m3fn[32, 128] vmem\n"
                "  out %o: f8e4m3fn[32, 128] vmem\n"
                "{\n"
                "  %x = load %a[:, :] : f8e4m3fn[32, 128]\n"
                "  %y = max %x, %x : f8e4m3fn[32, 128]\n"
                "  store %o[:, :], %y\n"
                "}\n",
                7, "max", "f8e4m3fn");
}

TSR_TEST(unsupported_op_is_located) {
  tsr_ir_module_t *m = parse_source("tests/diagnostics/ok/dma_add_accumulate.tsr");
  if (!m) return;
  char *t = NULL;
  tsr_status_t s = tsr_tpu_emit(NULL, tsr_ir_module_kernel(m, 0), NULL, &t);
  TSR_CHECK(t == NULL);
  check_record(s, TSR_UNIMPLEMENTED, 14, "dma_start", "cannot be emitted for TPU");
  tsr_ir_module_destroy(m);

  /* a device-wide scoped buffer: Mosaic cannot allocate HBM in a kernel */
  m = parse_source("tests/diagnostics/ok/scoped_hbm_handoff.tsr");
  if (m) {
    s = tsr_tpu_emit(NULL, tsr_ir_module_kernel(m, 0), "v5p", &t);
    TSR_CHECK(t == NULL);
    check_record(s, TSR_UNIMPLEMENTED, 12, "scoped",
                 "%shared is a device-wide hbm buffer, which Mosaic cannot allocate");
    tsr_ir_module_destroy(m);
  }
  m = parse_source("tests/diagnostics/ok/disjoint_strided_dmas.tsr");
  if (m) {
    s = tsr_tpu_emit(NULL, tsr_ir_module_kernel(m, 0), NULL, &t);
    check_record(s, TSR_UNIMPLEMENTED, 9, "dma_start", "strided DMA views");
    tsr_ir_module_destroy(m);
  }
  /* dtypes TPUs cannot do: i8 vector arithmetic, f16 vectors */
  m = parse_text("dtypes.tsr", "kernel @k\n"
                               "  grid(1)\n"
                               "  in %x: i8[32, 128] vmem\n"
                               "  out %y: i8[32, 128] vmem\n"
                               "{\n"
                               "  %v = load %x[:, :] : i8[32, 128]\n"
                               "  %w = add %v, %v : i8[32, 128]\n"
                               "  store %y[:, :], %w\n"
                               "  %f = convert %v : f16[32, 128]\n"
                               "}\n");
  if (m) {
    s = tsr_tpu_emit(NULL, tsr_ir_module_kernel(m, 0), NULL, &t);
    check_record(s, TSR_UNIMPLEMENTED, 7, "add", "not i8");
    tsr_ir_module_destroy(m);
  }
  m = parse_text("f16v.tsr", "kernel @k\n"
                             "  grid(1)\n"
                             "  in %x: f32[8, 128] vmem\n"
                             "  out %y: f32[8, 128] vmem\n"
                             "{\n"
                             "  %v = load %x[:, :] : f32[8, 128]\n"
                             "  %h = convert %v : f16[8, 128]\n"
                             "  %w = convert %h : f32[8, 128]\n"
                             "  store %y[:, :], %w\n"
                             "}\n");
  if (m) {
    /* libtpu makes no f16 vector (tpu.pack_subelements fails): located,
     * and check --target tpu says so too */
    s = tsr_tpu_check(tsr_ir_module_kernel(m, 0), "v6e");
    check_record(s, TSR_UNIMPLEMENTED, 7, "convert", "no f16 vector values");
    tsr_ir_module_destroy(m);
  }
  m = parse_text("f16.tsr", "kernel @k\n"
                            "  grid(1)\n"
                            "  in %h: f16[16, 128] vmem\n"
                            "  out %y: f32[16, 128] vmem\n"
                            "{\n"
                            "  %f = load %h[:, :] : f16[16, 128]\n"
                            "  %g = convert %f : f32[16, 128]\n"
                            "  store %y[:, :], %g\n"
                            "}\n");
  if (m) {
    s = tsr_tpu_emit(NULL, tsr_ir_module_kernel(m, 0), NULL, &t);
    /* libtpu takes no f16 operand (checked); f16 data is refused there */
    check_record(s, TSR_VERIFY_ERROR, 3, NULL, "an f16 operand, which TPU kernels cannot take");
    tsr_ir_module_destroy(m);
  }
  /* sort and argsort: no TensorCore sort in Mosaic */
  for (int arg = 0; arg < 2; arg++) {
    m = parse_text("sort.tsr", arg ? "kernel @k\n"
                                     "  in %x: f32[8, 128] vmem\n"
                                     "  out %y: i32[8, 128] vmem\n"
                                     "{\n"
                                     "  %v = load %x[:, :] : f32[8, 128]\n"
                                     "  %s = argsort %v axis 1 : i32[8, 128]\n"
                                     "  store %y[:, :], %s\n"
                                     "}\n"
                                   : "kernel @k\n"
                                     "  in %x: f32[8, 128] vmem\n"
                                     "  out %y: f32[8, 128] vmem\n"
                                     "{\n"
                                     "  %v = load %x[:, :] : f32[8, 128]\n"
                                     "  %s = sort %v axis 1 : f32[8, 128]\n"
                                     "  store %y[:, :], %s\n"
                                     "}\n");
    if (m) {
      s = tsr_tpu_emit(NULL, tsr_ir_module_kernel(m, 0), NULL, &t);
      check_record(s, TSR_UNIMPLEMENTED, 6, arg ? "argsort" : "sort",
                   "no TensorCore lowering in Mosaic");
      tsr_ir_module_destroy(m);
    }
  }
}

/* What Mosaic cannot reduce or compare directly is rewritten into what it
 * can (libtpu: "Unsupported reduction kind", "Unsupported comparison
 * direction: une", "failed to legalize operation 'arith.maxui'"), or is a
 * located error. */
/* Rank-0 inputs and outputs: in SMEM of a grid-free kernel a rank-0 memref
 * read and written with memref.load/store (as Pallas lowers a ()-shaped
 * SMEM block; libtpu compiles it); in VMEM Pallas's TPU lowering refuses
 * the block, and with a grid libtpu has no rank-0 window: both refused,
 * located at the operand. */
TSR_TEST(rank0_operands) {
  tsr_ir_module_t *m = parse_text("r0.tsr",
      "kernel @r0\n"
      "  in %n: f32 smem\n"
      "  in %x: f32[8, 128] vmem\n"
      "  out %y: f32[8, 128] vmem\n"
      "  out %s: f32 smem\n"
      "{\n"
      "  %k = load %n[] : f32\n"
      "  %v = load %x[:, :] : f32[8, 128]\n"
      "  %b = broadcast %k : f32[8, 128]\n"
      "  %r = mul %v, %b : f32[8, 128]\n"
      "  store %y[:, :], %r\n"
      "  %k2 = add %k, %k : f32\n"
      "  store %s[], %k2\n"
      "}\n");
  if (m) {
    char *t = NULL;
    TSR_CHECK_OK(tsr_tpu_emit(NULL, tsr_ir_module_kernel(m, 0), NULL, &t));
    CHECK_HAS(t, "%n: memref<f32, #tpu.memory_space<smem>>");
    CHECK_HAS(t, "%k = memref.load %n[] : memref<f32, #tpu.memory_space<smem>>");
    CHECK_HAS(t, "memref.store %k2, %s[] : memref<f32, #tpu.memory_space<smem>>");
    tsr_ir_string_free(t);
    tsr_ir_module_destroy(m);
  }
  /* with a grid the rank-0 operand has a rank-0 window, which libtpu does
   * not implement: check refuses it at its decl, and in VMEM too */
  m = parse_text("r0g.tsr",
      "kernel @r0g\n"
      "  grid(2)\n"
      "  in %n: f32 smem\n"
      "  in %v: f32 vmem\n"
      "  out %y: f32[16, 128] vmem block[8, 128] map(%i) -> (%i, 0)\n"
      "{\n"
      "  %k = load %n[] : f32\n"
      "  %b = broadcast %k : f32[8, 128]\n"
      "  store %y[:, :], %b\n"
      "}\n");
  if (m) {
    tsr_status_t s = tsr_tpu_check(tsr_ir_module_kernel(m, 0), NULL);
    TSR_CHECK(s != NULL);
    const char *msg = s ? tsr_status_message(s) : NULL;
    if (!msg) msg = "";
    if (!strstr(msg, "r0g.tsr:3:6: error: in '%n': a rank-0 array in a kernel with a grid"))
      TSR_FAIL_AT("missing the smem refusal in:\n%s", msg);
    if (!strstr(msg, "r0g.tsr:4:6: error: in '%v': a rank-0 array is an SMEM block on TPU"))
      TSR_FAIL_AT("missing the vmem refusal in:\n%s", msg);
    tsr_status_free(s);
    tsr_ir_module_destroy(m);
  }
  m = parse_text("r0v.tsr",
      "kernel @r0v\n"
      "  in %x: f32 vmem\n"
      "  out %y: f32 vmem\n"
      "{\n"
      "  %v = load %x[] : f32\n"
      "  store %y[], %v\n"
      "}\n");
  if (m) {
    char *t = NULL;
    tsr_status_t s = tsr_tpu_emit(NULL, tsr_ir_module_kernel(m, 0), NULL, &t);
    TSR_CHECK(t == NULL);
    check_record(s, TSR_VERIFY_ERROR, 2, NULL, "a rank-0 array is an SMEM block on TPU");
    tsr_ir_module_destroy(m);
  }
}

TSR_TEST(rewritten_for_mosaic) {
  tsr_ir_module_t *m = parse_text("rewrite.tsr",
      "kernel @k\n"
      "  grid(1)\n"
      "  in %x: f32[8, 128] vmem\n"
      "  in %q: u32[8, 128] vmem\n"
      "  out %y: u32[8, 128] vmem\n"
      "{\n"
      "  %v = load %x[:, :] : f32[8, 128]\n"
      "  %u = load %q[:, :] : u32[8, 128]\n"
      "  %ne = ne %v, %v : i1[8, 128]\n"
      "  %all = reduce_and %ne axes [1] : i1[8]\n"
      "  %mx = reduce_max %u axes [1] : u32[8]\n"
      "  %mn = min %u, %u : u32[8, 128]\n"
      "  store %y[:, :], %mn\n"
      "}\n");
  if (!m) return;
  char *t = NULL;
  TSR_CHECK_OK(tsr_tpu_emit(NULL, tsr_ir_module_kernel(m, 0), NULL, &t));
  if (t) {
    TSR_CHECK(!strstr(t, "une"));
    CHECK_HAS(t, "arith.cmpf oeq, %v, %v");
    CHECK_HAS(t, "vector.multi_reduction <minsi>");
    TSR_CHECK_EQ_INT(count(t, "vector.multi_reduction <maxsi>"), 1);
    TSR_CHECK(!strstr(t, "maxui") && !strstr(t, "minui"));
    CHECK_HAS(t, "arith.minsi");
    CHECK_HAS(t, "dense<-2147483648> : vector<8x128xi32>");
  }
  tsr_ir_string_free(t);
  tsr_ir_module_destroy(m);
  /* the MXU accumulates in 32 bits: a bf16 dot is an f32 one rounded;
   * i32 inputs have no MXU form */
  m = parse_text("dots.tsr", "kernel @k\n"
                             "  grid(1)\n"
                             "  in %a: bf16[16, 128] vmem\n"
                             "  in %n: i32[8, 128] vmem\n"
                             "  out %y: bf16[16, 128] vmem\n"
                             "{\n"
                             "  %x = load %a[:, :] : bf16[16, 128]\n"
                             "  %t = transpose %x [1, 0] : bf16[128, 16]\n"
                             "  %p = dot %x, %t : bf16[16, 16]\n"
                             "  %v = load %n[:, :] : i32[8, 128]\n"
                             "  %ok = convert %v : i1[8, 128]\n"
                             "}\n");
  if (m) {
    t = NULL;
    TSR_CHECK_OK(tsr_tpu_emit(NULL, tsr_ir_module_kernel(m, 0), NULL, &t));
    CHECK_HAS(t, ": vector<16x128xbf16>, vector<128x16xbf16>, vector<16x16xf32> -> vector<16x16xf32>");
    CHECK_HAS(t, "%p = arith.truncf %");
    TSR_CHECK(t && !strstr(t, "une"));
    tsr_ir_string_free(t);
    tsr_ir_module_destroy(m);
  }
  m = parse_text("idot.tsr", "kernel @k\n"
                             "  grid(1)\n"
                             "  in %a: i32[8, 128] vmem\n"
                             "  out %y: i32[8, 8] vmem\n"
                             "{\n"
                             "  %x = load %a[:, :] : i32[8, 128]\n"
                             "  %p = dot %x, %x transpose_rhs : i32[8, 8]\n"
                             "  store %y[:, :], %p\n"
                             "}\n");
  if (m) {
    t = NULL;
    check_record(tsr_tpu_emit(NULL, tsr_ir_module_kernel(m, 0), NULL, &t), TSR_UNIMPLEMENTED, 7,
                 "dot", "floats and 8- and 4-bit integers, not i32");
    tsr_ir_module_destroy(m);
  }
  m = parse_text("prod.tsr", "kernel @k\n"
                             "  grid(1)\n"
                             "  in %x: f32[8, 128] vmem\n"
                             "  out %y: f32[8, 128] vmem\n"
                             "{\n"
                             "  %v = load %x[:, :] : f32[8, 128]\n"
                             "  %p = reduce_prod %v axes [0, 1] : f32\n"
                             "  store %y[:, :], %p\n"
                             "}\n");
  if (m) {
    t = NULL;
    check_record(tsr_tpu_emit(NULL, tsr_ir_module_kernel(m, 0), NULL, &t), TSR_UNIMPLEMENTED, 7,
                 "reduce_prod", "no prod reduction of f32");
    tsr_ir_module_destroy(m);
  }
}

/* Ops beyond the examples, in the spelling of Pallas's own modules. */
TSR_TEST(more_ops) {
  tsr_ir_module_t *m = parse_text("more.tsr",
      "kernel @k\n"
      "  grid(1)\n"
      "  in %x: f32[16, 128] vmem\n"
      "  in %i: i32[8, 128] vmem\n"
      "  in %b: i1[8, 128] vmem\n"
      "  out %y: f32[16, 128] vmem\n"
      "  out %z: i32[8, 128] vmem\n"
      "{\n"
      "  %v = load %x[0:16:2, :] : f32[8, 128]\n"
      "  %j = load %i[:, :] : i32[8, 128]\n"
      "  %g = gather %v, %j axis 1 : f32[8, 128]\n"
      "  %a = argmax %g axis 1 : i32[8]\n"
      "  %a2 = reshape %a : i32[8, 1]\n"
      "  %ab = broadcast %a2 : i32[8, 128]\n"
      "  store %z[:, :], %ab\n"
      "  %m = load %b[:, :] : i1[8, 128]\n"
      "  store %y[0:8, :], %g mask %m\n"
      "  store %y[1:16:2, :], %v\n"
      "  %one = const 1 : i32\n"
      "  %r0 = roll %v, %one axis 1 : f32[8, 128]\n"
      "  %r = roll %r0, %one axis 1 stride 3 stride_axis 0 : f32[8, 128]\n"
      "  %na = nextafter %r, %v : f32[8, 128]\n"
      "  %t = transpose %na [1, 0] : f32[128, 8]\n"
      "  %io = iota 0 : f32[8, 128]\n"
      "  %eight = const 8 : i32\n"
      "  %off = mul %one, %eight : i32\n"
      "  %at = multiple_of %off, 8 : i32\n"
      "  %w = load %x[ds(%at, 8), :] : f32[8, 128]\n"
      "  store %y[8:16, :], %w\n"
      "}\n");
  if (!m) return;
  char *t = NULL;
  TSR_CHECK_OK(tsr_tpu_emit(NULL, tsr_ir_module_kernel(m, 0), "v6e", &t));
  if (t) {
    CHECK_HAS(t, "tpu.strided_load %x[");
    CHECK_HAS(t, "{strides = array<i32: 2, 1>} : memref<16x128xf32, #tpu.memory_space<vmem>>, "
                 "vector<8x128xf32>");
    CHECK_HAS(t, "tpu.strided_store %y[");
    CHECK_HAS(t, "tpu.dynamic_gather %v[");
    CHECK_HAS(t, "tpu.reduce_index %g {axis = 1 : i32, kind = #tpu.reduction_kind<arg_max>} : "
                 "vector<8x128xf32> -> vector<8xi32>");
    /* i1 memory is i32, as Pallas stores bool arrays */
    CHECK_HAS(t, "%b: memref<8x128xi32, #tpu.memory_space<vmem>>");
    CHECK_HAS(t, "arith.cmpi ne, %");
    CHECK_HAS(t, " masked %m {strides = array<i32>}");
    CHECK_HAS(t, "\"tpu.dynamic_rotate\"(%v, %");
    /* pltpu.roll's stride, as Pallas lowers it */
    CHECK_HAS(t, "\"tpu.dynamic_rotate\"(%r0, %");
    CHECK_HAS(t, "<{dimension = 1 : si32, stride = 3 : si32, stride_dimension = 0 : si32}>");
    /* nextafter: integer steps on the f32 bits, as Pallas lowers it */
    CHECK_HAS(t, "arith.bitcast %r : vector<8x128xf32> to vector<8x128xi32>");
    CHECK_HAS(t, "%na = arith.bitcast %");
    CHECK_HAS(t, "vector.transpose %na, [1, 0] : vector<8x128xf32> to vector<128x8xf32>");
    CHECK_HAS(t, "tpu.iota {dimensions = array<i32: 0>} : vector<8x128xi32>");
    CHECK_HAS(t, "arith.sitofp");
    /* pl.multiple_of's op, what proves the dynamic offset aligned */
    CHECK_HAS(t, "%at = tpu.assume_multiple %off, 8 : i32");
  }
  tsr_ir_string_free(t);
  tsr_ir_module_destroy(m);
}

/* An if with block results: MLIR turns an scf.if whose yields are (or
 * fold to) values defined outside it into an arith.select on its scalar
 * condition, which libtpu cannot lay out ("Null layout / non-vector
 * operand in elementwise operation"), and Mosaic folds late enough that
 * its own fix of such selects comes too soon (x % x of u16 data). The
 * blocks go through VMEM buffers of a tpu.region instead; scalars stay
 * results of the scf.if. */
TSR_TEST(if_blocks_go_through_vmem) {
  tsr_ir_module_t *m = parse_text("if.tsr",
      "kernel @k\n"
      "  grid(2)\n"
      "  in %x: u16[16, 128] vmem\n"
      "  out %y: u16[16, 128] vmem\n"
      "  out %z: i32[16, 128] vmem\n"
      "{\n"
      "  %a = load %x[:, :] : u16[16, 128]\n"
      "  %r = rem %a, %a : u16[16, 128]\n"
      "  %p = program_id 0 : i32\n"
      "  %c0 = const 0 : i32\n"
      "  %b = eq %p, %c0 : i1\n"
      "  %v, %n, %m = if %b : u16[16, 128], i32, i1[16, 128] {\n"
      "    %w = not %r : u16[16, 128]\n"
      "    %t = lt %w, %r : i1[16, 128]\n"
      "    yield %w, %p, %t\n"
      "  } else {\n"
      "    %f = ge %r, %a : i1[16, 128]\n"
      "    yield %r, %c0, %f\n"
      "  }\n"
      "  store %y[:, :], %v\n"
      "  %nb = broadcast %n : i32[16, 128]\n"
      "  %mi = convert %m : i32[16, 128]\n"
      "  %s = add %nb, %mi : i32[16, 128]\n"
      "  store %z[:, :], %s\n"
      "}\n");
  if (!m) return;
  char *t = NULL;
  TSR_CHECK_OK(tsr_tpu_emit(NULL, tsr_ir_module_kernel(m, 0), NULL, &t));
  if (t) {
    TSR_CHECK(!strstr(t, "scf.if %b -> (vector<")); /* no scf.if yields a block */
    CHECK_HAS(t, "\"tpu.region\"() ({");
    TSR_CHECK_EQ_INT(count(t, "memref.alloca() : memref<16x128xi16, #tpu.memory_space<vmem>>"), 1);
    /* the i1 block in its crossing form, i32 */
    TSR_CHECK_EQ_INT(count(t, "memref.alloca() : memref<16x128xi32, #tpu.memory_space<vmem>>"), 1);
    CHECK_HAS(t, "= scf.if %b -> (i32) {");
    /* each branch stores both blocks */
    TSR_CHECK_EQ_INT(count(t, "{strides = array<i32>} : memref<16x128xi16, "
                              "#tpu.memory_space<vmem>>, vector<16x128xi16>,"), 2 + 1);
    TSR_CHECK_EQ_INT(count(t, "{strides = array<i32>} : memref<16x128xi32, "
                              "#tpu.memory_space<vmem>>, vector<16x128xi32>,"), 2 + 1);
    CHECK_HAS(t, "}) : () -> (vector<16x128xi16>, i32, vector<16x128xi32>)");
  }
  tsr_ir_string_free(t);
  /* the buffers count in the kernel's VMEM: a 16x128 u16 one and an i32 one */
  tsr_tpu_vmem_t vmem = {0};
  TSR_CHECK_OK(tsr_tpu_vmem(tsr_ir_module_kernel(m, 0), "v5e", &vmem));
  TSR_CHECK_EQ_INT(vmem.need_bytes, 2 * 2 * 16 * 128 * 2 + 2 * 16 * 128 * 4 + 16 * 128 * 2 + 16 * 128 * 4);
  tsr_ir_module_destroy(m);
}

/* 1-D blocks longer than 128: libtpu cannot select 16-bit data by a
 * mask from a 1-D iota compared in 32 bits ("Sublane broadcast"), nor
 * (v6e) slice a bf16 compare's mask from lane 128 on ("Input offsets
 * outside of the first tile"): the select is in 32 bits, the i1 slice in
 * i32. */
TSR_TEST(long_1d_blocks) {
  tsr_ir_module_t *m = parse_text("long1d.tsr",
      "kernel @k\n"
      "  in %x: u16[256] vmem\n"
      "  in %h: bf16[256] vmem\n"
      "  out %y: u16[256] vmem\n"
      "  out %z: i32[128] vmem\n"
      "{\n"
      "  %a = load %x[:] : u16[256]\n"
      "  %i = iota 0 : i32[256]\n"
      "  %c5 = const 5 : i32\n"
      "  %m = lt %i, %c5 : i1[256]\n"
      "  store %y[:], %a mask %m\n"
      "  %d = load %h[:] : bf16[256]\n"
      "  %e = eq %d, %d : i1[256]\n"
      "  %s = slice %e [128:256] : i1[128]\n"
      "  %v = convert %s : i32[128]\n"
      "  store %z[:], %v\n"
      "}\n");
  if (!m) return;
  char *t = NULL;
  TSR_CHECK_OK(tsr_tpu_emit(NULL, tsr_ir_module_kernel(m, 0), "v6e", &t));
  if (t) {
    CHECK_HAS(t, "arith.extui %a : vector<256xi16> to vector<256xi32>");
    CHECK_HAS(t, " : vector<256xi1>, vector<256xi32>");
    TSR_CHECK(!strstr(t, " : vector<256xi1>, vector<256xi16>"));
    CHECK_HAS(t, "arith.trunci %");
    CHECK_HAS(t, "<{offsets = [128], sizes = [128], strides = [1]}> : (vector<256xi32>) -> "
                 "vector<128xi32>");
  }
  tsr_ir_string_free(t);
  tsr_ir_module_destroy(m);
  /* Rows longer than a vreg row and fewer than 8 of them: the same (libtpu
   * refuses (1, 2, 129) u16 selected in 16 bits), and 8 rows stay narrow. */
  m = parse_text("shortrows.tsr",
      "kernel @k\n"
      "  in %x: u16[1, 2, 129] vmem\n"
      "  in %w: u16[1, 8, 256] vmem\n"
      "  out %y: u16[1, 2, 129] vmem\n"
      "  out %z: u16[1, 8, 256] vmem\n"
      "{\n"
      "  %a = load %x[:, :, :] : u16[1, 2, 129]\n"
      "  %i = iota 2 : i32[1, 2, 129]\n"
      "  %c5 = const 5 : i32\n"
      "  %m = lt %i, %c5 : i1[1, 2, 129]\n"
      "  %s = select %m, %a, %a : u16[1, 2, 129]\n"
      "  store %y[:, :, :], %s\n"
      "  %b = load %w[:, :, :] : u16[1, 8, 256]\n"
      "  %j = iota 2 : i32[1, 8, 256]\n"
      "  %n = lt %j, %c5 : i1[1, 8, 256]\n"
      "  %r = select %n, %b, %b : u16[1, 8, 256]\n"
      "  store %z[:, :, :], %r\n"
      "}\n");
  if (!m) return;
  t = NULL;
  TSR_CHECK_OK(tsr_tpu_emit(NULL, tsr_ir_module_kernel(m, 0), "v5e", &t));
  if (t) {
    CHECK_HAS(t, " : vector<1x2x129xi1>, vector<1x2x129xi32>");
    TSR_CHECK(!strstr(t, " : vector<1x2x129xi1>, vector<1x2x129xi16>"));
    CHECK_HAS(t, " : vector<1x8x256xi1>, vector<1x8x256xi16>");
  }
  tsr_ir_string_free(t);
  tsr_ir_module_destroy(m);
}

/* One kernel with one operand declaration per case. */
static void layout_case(const char *decl, const char *chip, int expect_error, const char *text) {
  char src[1024];
  snprintf(src, sizeof src,
           "kernel @k\n"
           "  grid(4)\n"
           "  %s\n"
           "{\n"
           "}\n",
           decl);
  tsr_ir_module_t *m = parse_text("layout.tsr", src);
  if (!m) return;
  tsr_ir_kernel_t *k = tsr_ir_module_kernel(m, 0);
  tsr_status_t s = tsr_tpu_check(k, chip);
  if (expect_error) {
    check_record(s, TSR_VERIFY_ERROR, 3, NULL, text);
    char *t = NULL;
    s = tsr_tpu_emit(NULL, k, chip, &t); /* emission checks the same rules */
    TSR_CHECK(t == NULL);
    check_record(s, TSR_VERIFY_ERROR, 3, NULL, text);
  } else {
    if (s) TSR_FAIL_AT("'%s' rejected: %s", decl, tsr_status_message(s));
    tsr_status_free(s);
  }
  tsr_ir_module_destroy(m);
}

TSR_TEST(layout_rules) {
  /* the last block dim: a multiple of 128 or the array's */
  layout_case("in %x: f32[64, 512] vmem block[16, 100] map(%i) -> (%i, 0)", NULL, 1,
              "last block dim must be a multiple of 128");
  /* the second-to-last: a multiple of 8 or the array's */
  layout_case("in %x: f32[64, 512] vmem block[12, 128] map(%i) -> (%i, 0)", NULL, 1,
              "second-to-last block dim must be a multiple of 8");
  /* a squeezed second-to-last dim counts as 1 (Pallas rejects it too) */
  layout_case("out %y: f32[64, 512] vmem block[squeezed, 512] map(%i) -> (%i, 0)", "v6e", 1,
              "second-to-last");
  /* squeezed to a 1-D block of a rank-2 array, whole otherwise: libtpu
   * refuses the operand's layout (as Pallas's module of it) */
  layout_case("in %x: i32[4, 1, 48] vmem block[squeezed, squeezed, 48] map(%i) -> (%i, 0, 0)",
              NULL, 1, "leaves a 1-D block");
  layout_case("out %y: f32[8, 1] vmem block[8, squeezed] map(%i) -> (0, 0)", "v6e", 1,
              "does not match Mosaic layout");
  /* 1-D: the array, a multiple of 1024, or a power of two >= 128 * packing */
  layout_case("in %x: f32[4096] vmem block[640] map(%i) -> (%i)", NULL, 1, "1-D block of 640");
  layout_case("in %x: bf16[4096] vmem block[128] map(%i) -> (%i)", NULL, 1, "at least 256");
  /* a kernel without a grid takes whole arrays only */
  tsr_ir_module_t *m = parse_text("gridless.tsr", "kernel @k\n"
                                                  "  in %x: f32[64, 128] vmem block[8, 128]\n"
                                                  "{\n"
                                                  "}\n");
  if (m) {
    check_record(tsr_tpu_check(tsr_ir_module_kernel(m, 0), NULL), TSR_VERIFY_ERROR, 2, NULL,
                 "without a grid");
    tsr_ir_module_destroy(m);
  }
  /* libtpu's chip-dependent rule: one core_parallel index per TensorCore */
  m = parse_text("cores.tsr", "kernel @k\n"
                              "  grid(2, 4) semantics(core_parallel, arbitrary)\n"
                              "  in %x: f32[64, 128] vmem block[8, 128] map(%c, %i) -> (%c, 0)\n"
                              "{\n"
                              "}\n");
  if (m) {
    check_record(tsr_tpu_check(tsr_ir_module_kernel(m, 0), "v5e"), TSR_VERIFY_ERROR, 1, NULL,
                 "core_parallel with 2 indices, but v5e has 1 TensorCore");
    TSR_CHECK_OK(tsr_tpu_check(tsr_ir_module_kernel(m, 0), "v5p"));
    tsr_ir_module_destroy(m);
  }
  /* accepted: what Pallas accepts */
  layout_case("in %x: f32[64, 512] vmem block[8, 128] map(%i) -> (%i, 0)", NULL, 0, NULL);
  layout_case("in %x: f32[60, 300] vmem block[60, 300] map(%i) -> (0, 0)", NULL, 0, NULL);
  layout_case("in %x: f32[4, 8, 128] vmem block[squeezed, 8, 128] map(%i) -> (%i, 0, 0)", NULL,
              0, NULL);
  layout_case("in %x: f32[4096] vmem block[128] map(%i) -> (%i)", NULL, 0, NULL);
  layout_case("in %x: bf16[4096] vmem block[256] map(%i) -> (%i)", NULL, 0, NULL);
  layout_case("in %x: f32[4096] vmem block[2048] map(%i) -> (%i)", NULL, 0, NULL);
  layout_case("in %x: f32[100, 100] any", NULL, 0, NULL);
  layout_case("in %x: i32[3, 5] smem", NULL, 0, NULL); /* SMEM, trivial window */
}

/* Revisit mode any: the window Pallas lowers pl.Buffered(1,
 * revisit=pl.RevisitMode.ANY) to, synchronous with revisit_mode any (the
 * libtpu proof compiles tests/diagnostics/ok/revisited_output_block_any.tsr);
 * a trivial VMEM window is single-buffered without a revisit mode, as Pallas
 * lowers it; other outputs keep their plain windows. */
TSR_TEST(revisit_any_windows) {
  tsr_ir_module_t *m = parse_text("revisit.tsr",
                                  "kernel @k\n"
                                  "  grid(2, 3)\n"
                                  "  in %x: f32[16, 384] vmem block[8, 128] map(%i, %j) -> (%i, %j)\n"
                                  "  out %acc: f32[8, 384] vmem block[8, 128] map(%i, %j) -> (0, %j) "
                                  "revisit any\n"
                                  "  out %whole: f32[8, 128] vmem block[8, 128] map(%i, %j) -> (0, 0) "
                                  "revisit any\n"
                                  "  out %plain: f32[16, 384] vmem block[8, 128] map(%i, %j) -> (%i, %j)\n"
                                  "{\n"
                                  "  %v = load %x[:, :] : f32[8, 128]\n"
                                  "  store %acc[:, :], %v\n"
                                  "  store %whole[:, :], %v\n"
                                  "  store %plain[:, :], %v\n"
                                  "}\n");
  if (m) {
    char *t = NULL;
    TSR_CHECK_OK(tsr_tpu_emit(NULL, tsr_ir_module_kernel(m, 0), NULL, &t));
    CHECK_HAS(t, "{pipeline_mode = #tpu.pipeline_mode<synchronous>, revisit_mode = "
                 "#tpu.revisit_mode<any>, transform_indices = @transform_1, window_bounds = "
                 "array<i64: 8, 128>}");
    CHECK_HAS(t, "{pipeline_mode = #tpu.pipeline_mode<synchronous>, transform_indices = "
                 "@transform_2, window_bounds = array<i64: 8, 128>}");
    CHECK_HAS(t, "{transform_indices = @transform_3, window_bounds = array<i64: 8, 128>}");
    TSR_CHECK(count(t ? t : "", "revisit_mode =") == 1);
    tsr_ir_string_free(t);
    tsr_ir_module_destroy(m);
  }
}

/* pl.Element: every dim an element (or squeezed) dim is Mosaic's element
 * window, its paddings in window_kind; mixed with blocked dims, a located
 * refusal (Pallas's own rule). */
TSR_TEST(element_windows) {
  tsr_ir_module_t *m = parse_text("element.tsr",
                                  "kernel @k\n"
                                  "  grid(4)\n"
                                  "  in %x: f32[4, 64, 128] vmem block[squeezed, element(16, 2, 6), "
                                  "element(128)] map(%i) -> (%i, %i, 0)\n"
                                  "  out %y: f32[64, 128] vmem block[8, 128] map(%i) -> (%i, 0)\n"
                                  "{\n"
                                  "  %v = load %x[0:8, :] : f32[8, 128]\n"
                                  "  store %y[:, :], %v\n"
                                  "}\n");
  if (m) {
    char *t = NULL;
    TSR_CHECK_OK(tsr_tpu_emit(NULL, tsr_ir_module_kernel(m, 0), NULL, &t));
    CHECK_HAS(t, "window_bounds = array<i64: 1, 16, 128>, window_kind = "
                 "#tpu.element_window<[0, 2, 0], [0, 6, 0]>}");
    /* the blocked output keeps its plain window */
    CHECK_HAS(t, "window_bounds = array<i64: 8, 128>}");
    TSR_CHECK(count(t ? t : "", "element_window") == 1);
    tsr_ir_string_free(t);
    tsr_ir_module_destroy(m);
  }
  layout_case("in %x: f32[64, 128] vmem block[element(16), 128] map(%i) -> (%i, 0)", NULL, 1,
              "element block dims mixed with blocked ones");
  layout_case("in %x: f32[64, 128] vmem block[element(16, 0, 8), element(128)] map(%i) -> (%i, 0)",
              NULL, 0, NULL);
}

/* A kernel named like a transform function keeps the module's symbols
 * unique. */
TSR_TEST(kernel_named_transform) {
  char *src = tsr_test_read_source("kernels/examples/add.tsr", NULL);
  if (!src) return;
  char *at = strstr(src, "@add");
  TSR_CHECK(at != NULL);
  char text[2048];
  if (at) snprintf(text, sizeof text, "%.*s@transform_1%s", (int)(at - src), src, at + 4);
  free(src);
  tsr_ir_module_t *m = at ? parse_text("t1.tsr", text) : NULL;
  if (!m) return;
  char *t = NULL;
  TSR_CHECK_OK(tsr_tpu_emit(NULL, tsr_ir_module_kernel(m, 0), NULL, &t));
  if (t) {
    TSR_CHECK_EQ_INT(count(t, "func.func @transform_1("), 1);
    CHECK_HAS(t, "func.func @window_transform_1(");
    CHECK_HAS(t, "transform_indices = @window_transform_0");
  }
  tsr_ir_string_free(t);
  tsr_ir_module_destroy(m);
}

TSR_TEST(chips) {
  tsr_ir_module_t *m = parse_source("kernels/examples/add.tsr");
  if (!m) return;
  char *t = (char *)"untouched";
  TSR_CHECK_STATUS(tsr_tpu_emit(NULL, tsr_ir_module_kernel(m, 0), "v9", &t),
                   TSR_INVALID_ARGUMENT);
  TSR_CHECK(strcmp(t, "untouched") == 0);
  TSR_CHECK_STATUS(tsr_tpu_check(NULL, "v9"), TSR_INVALID_ARGUMENT);
  TSR_CHECK_OK(tsr_tpu_check(NULL, "v6e"));
  TSR_CHECK_OK(tsr_tpu_check(tsr_ir_module_kernel(m, 0), NULL));
  /* One chip table for the interpreter and the emitter: v7x is also v7
   * and tpu7x to both; tpu8i is the interpreter's only. */
  tsr_tpu_vmem_t v7x = {0}, alias = {0};
  uint64_t interp_v7x = 0, interp_alias = 0;
  TSR_CHECK_OK(tsr_tpu_vmem(tsr_ir_module_kernel(m, 0), "v7x", &v7x));
  TSR_CHECK(tsr_interp_chip_vmem_bytes("v7x", &interp_v7x));
  TSR_CHECK_EQ_INT((int64_t)interp_v7x, 64ll << 20);
  for (int i = 0; i < 2; i++) {
    const char *name = i ? "tpu7x" : "v7";
    TSR_CHECK_OK(tsr_tpu_vmem(tsr_ir_module_kernel(m, 0), name, &alias));
    TSR_CHECK_EQ_INT(alias.capacity_bytes, v7x.capacity_bytes);
    TSR_CHECK(tsr_interp_chip_vmem_bytes(name, &interp_alias));
    TSR_CHECK_EQ_INT((int64_t)interp_alias, (int64_t)interp_v7x);
  }
  TSR_CHECK(tsr_interp_chip_vmem_bytes("tpu8i", &interp_alias));
  TSR_CHECK_STATUS(tsr_tpu_check(NULL, "tpu8i"), TSR_INVALID_ARGUMENT);
  tsr_ir_module_destroy(m);
}

/* tsr_tpu_vmem: windows twice, scratch and scoped buffers once, each padded
 * to (8 x packing, 128) tiles; tsr_tpu_check refuses more than the chip has. */
TSR_TEST(vmem_need_and_capacity) {
  tsr_ir_module_t *m = parse_text("vmem.tsr",
      "kernel @vmem\n"
      "  grid(2)\n"
      "  in %x: bf16[16, 100] vmem block[8, 100] map(%i) -> (%i, 0)\n"
      "  in %w: f32[4, 8, 256] vmem block[squeezed, 8, 256] map(%i) -> (%i, 0, 0)\n"
      "  out %y: bf16[16, 100] vmem block[8, 100] map(%i) -> (%i, 0)\n"
      "  scratch %s: vmem f32[3, 5]\n"
      "{\n"
      "  %v = load %x[:, :] : bf16[8, 100]\n"
      "  %m = scoped(%buf: vmem i8[40, 200]) : bf16[8, 100] {\n"
      "    yield %v\n"
      "  }\n"
      "  store %y[:, :], %m\n"
      "}\n");
  if (!m) return;
  tsr_tpu_vmem_t v = {0};
  TSR_CHECK_OK(tsr_tpu_vmem(tsr_ir_module_kernel(m, 0), "v6e", &v));
  /* Mosaic's memory tiles: x and y: 2 x bf16 (8, 128) (8 rows are a
   * whole tile of bf16 under 16 rows); w: 2 x f32 (8, 256); s: f32
   * (4, 128) (3 rows take a 4-row tile); buf: i8 (64, 256) (40 rows: from
   * 32 on, whole (32, 128) tiles). */
  int64_t want = 2 * 2 * (8 * 128 * 2) + 2 * (8 * 256 * 4) + 4 * 128 * 4 + 64 * 256;
  TSR_CHECK_EQ_INT(v.need_bytes, want);
  TSR_CHECK_EQ_INT(v.default_limit_bytes, 32ll << 20);
  TSR_CHECK(v.capacity_bytes < (128ll << 20) && v.capacity_bytes > (127ll << 20));
  TSR_CHECK_STATUS(tsr_tpu_vmem(tsr_ir_module_kernel(m, 0), "v9", &v), TSR_INVALID_ARGUMENT);
  tsr_ir_module_destroy(m);

  /* 32 MiB of windows: over v4's 16 MiB (an error at the kernel), within
   * v5e's 128 MiB (the call raises vmem_limit_bytes). */
  m = parse_text("big.tsr",
      "kernel @big\n"
      "  grid(2)\n"
      "  in %x: f32[2048, 2048] vmem block[1024, 2048] map(%i) -> (%i, 0)\n"
      "  out %y: f32[2048, 2048] vmem block[1024, 2048] map(%i) -> (%i, 0)\n"
      "{\n"
      "  %v = load %x[:, :] : f32[1024, 2048]\n"
      "  store %y[:, :], %v\n"
      "}\n");
  if (!m) return;
  const tsr_ir_kernel_t *k = tsr_ir_module_kernel(m, 0);
  TSR_CHECK_OK(tsr_tpu_check(k, "v5e"));
  tsr_status_t s = tsr_tpu_check(k, "v4");
  check_record(s, TSR_VERIFY_ERROR, 1, NULL, "needs 32.0 MiB of VMEM");
  tsr_ir_module_destroy(m);
}

/* The narrow dtypes are packed in VMEM, as on a TPU: an (8, 128) i4 block
 * is 512 bytes (not the 1024 of tessera's one-per-byte host array), f8 one
 * byte each, i2 four to a byte in a tile of 16 rows (its packing); and
 * Pallas's rule for 1-D blocks counts their bits (a power of two of at
 * least 128 x 32 / 4 = 1024 i4 elements). */
TSR_TEST(vmem_of_packed_narrow_dtypes) {
  static const struct {
    const char *dtype;
    int64_t rows, bytes; /* one buffer of a (rows, 128) block */
  } cases[] = {
      {"i4", 8, 8 * 128 / 2},   {"u4", 64, 64 * 128 / 2}, {"i4", 72, 128 * 128 / 2},
      {"i2", 8, 16 * 128 / 4},  {"u2", 16, 16 * 128 / 4}, {"f8e4m3fn", 8, 8 * 128},
      {"f8e5m2", 40, 64 * 128}, {"i8", 8, 8 * 128},        {"i4", 3, 8 * 128 / 2},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char text[512];
    snprintf(text, sizeof text,
             "kernel @k\n"
             "  grid(2)\n"
             "  in %%x: %s[%lld, 256] vmem block[%lld, 128] map(%%i) -> (0, %%i)\n"
             "  out %%y: f32[8, 128] vmem\n"
             "{\n"
             "}\n",
             cases[i].dtype, (long long)cases[i].rows, (long long)cases[i].rows);
    tsr_ir_module_t *m = parse_text("narrow.tsr", text);
    if (!m) return;
    tsr_tpu_vmem_t v = {0};
    TSR_CHECK_OK(tsr_tpu_vmem(tsr_ir_module_kernel(m, 0), "v5e", &v));
    /* x double-buffered, y single (a trivial window) but counted twice */
    int64_t want = 2 * cases[i].bytes + 2 * 8 * 128 * 4;
    if (v.need_bytes != want)
      TSR_FAIL_AT("%s (%lld, 128): need %lld bytes, want %lld", cases[i].dtype,
                  (long long)cases[i].rows, (long long)v.need_bytes, (long long)want);
    tsr_ir_module_destroy(m);
  }
  /* 1-D blocks: 512 i4 elements are under one packed row (1024), 512 u8
   * elements are one (512 = 128 x 32 / 8). */
  tsr_ir_module_t *m = parse_text("narrow1d.tsr",
                                  "kernel @k\n"
                                  "  grid(8)\n"
                                  "  in %x: i4[4096] vmem block[512] map(%i) -> (%i)\n"
                                  "  in %z: u8[4096] vmem block[512] map(%i) -> (%i)\n"
                                  "  in %w: i4[4096] vmem block[1024] map(%i) -> (%i)\n"
                                  "  out %y: f32[8, 128] vmem\n"
                                  "{\n"
                                  "}\n");
  if (!m) return;
  tsr_status_t s = tsr_tpu_check(tsr_ir_module_kernel(m, 0), "v5e");
  tsr_diagnostic_list_t *list = NULL;
  TSR_CHECK_OK(tsr_diagnostic_list_create_from_status(s, &list));
  TSR_CHECK_EQ_INT(list ? tsr_diagnostic_list_count(list) : 0, 1); /* not %z's, nor %w's */
  tsr_diagnostic_list_destroy(list);
  check_record(s, TSR_VERIFY_ERROR, 3, NULL, "at least 1024 (128 x 32 / 4 bits)");
  tsr_ir_module_destroy(m);
}

static char temp_root[256];

TSR_TEST(cache_hit) {
  const char *build = getenv("TSR_BUILD_ROOT");
  snprintf(temp_root, sizeof temp_root, "%s/test-tpu-XXXXXX", build ? build : "/tmp");
  TSR_CHECK(mkdtemp(temp_root) != NULL);
  char dir[512], key[512];
  snprintf(dir, sizeof dir, "%s/cache", temp_root);
  snprintf(key, sizeof key, "%s/cache.key", temp_root);
  tsr_context_options_t co;
  tsr_context_options_initialize(&co);
  co.disk_cache = true;
  co.cache_dir = dir;
  co.cache_key_file = key;
  tsr_context_t *ctx = NULL;
  TSR_CHECK_OK(tsr_context_create(&co, &ctx));
  tsr_ir_module_t *m = parse_source("kernels/examples/matmul.tsr");
  if (!ctx || !m) {
    tsr_context_destroy(ctx);
    tsr_ir_module_destroy(m);
    return;
  }
  tsr_ir_kernel_t *k = tsr_ir_module_kernel(m, 0);
  tsr_disk_cache_t *disk = tsr_context_disk_cache(ctx);
  TSR_CHECK(disk != NULL);
  char *first = NULL, *second = NULL, *other = NULL, *uncached = NULL;
  tsr_disk_cache_stats_t st;
  TSR_CHECK_OK(tsr_tpu_emit(ctx, k, "v5e", &first));
  tsr_disk_cache_stats(disk, &st);
  TSR_CHECK_EQ_INT(st.misses, 1);
  TSR_CHECK_EQ_INT(st.puts, 1);
  TSR_CHECK_EQ_INT(st.hits, 0);
  TSR_CHECK_OK(tsr_tpu_emit(ctx, k, "v5e", &second));
  tsr_disk_cache_stats(disk, &st);
  TSR_CHECK_EQ_INT(st.hits, 1);
  TSR_CHECK_EQ_INT(st.puts, 1);
  TSR_CHECK(first && second && strcmp(first, second) == 0);
  /* another chip is another key */
  TSR_CHECK_OK(tsr_tpu_emit(ctx, k, "v6e", &other));
  tsr_disk_cache_stats(disk, &st);
  TSR_CHECK_EQ_INT(st.misses, 2);
  TSR_CHECK_EQ_INT(st.puts, 2);
  /* without a context: the same text, no cache */
  TSR_CHECK_OK(tsr_tpu_emit(NULL, k, "v5e", &uncached));
  TSR_CHECK(first && uncached && strcmp(first, uncached) == 0);
  tsr_disk_cache_stats(disk, &st);
  TSR_CHECK_EQ_INT(st.hits + st.misses, 3);
  tsr_ir_string_free(first);
  tsr_ir_string_free(second);
  tsr_ir_string_free(other);
  tsr_ir_string_free(uncached);
  tsr_ir_module_destroy(m);
  tsr_context_destroy(ctx);
}

/* An allocator that fails every allocation past a budget. */
typedef struct budget {
  atomic_long allocations, live_bytes;
  long limit; /* < 0: no limit */
} budget_t;

static void *budget_allocate(void *user, size_t size, size_t alignment) {
  budget_t *b = user;
  if (b->limit >= 0 && atomic_load(&b->allocations) >= b->limit) return NULL;
  void *p = NULL;
  if (posix_memalign(&p, alignment, size ? size : 1) != 0) return NULL;
  atomic_fetch_add(&b->allocations, 1);
  atomic_fetch_add(&b->live_bytes, (long)size);
  return p;
}

static void budget_release(void *user, void *block, size_t size) {
  budget_t *b = user;
  atomic_fetch_sub(&b->live_bytes, (long)size);
  free(block);
}

/* Every allocation of an emission failing in turn: an out-of-memory status
 * (never a crash, a partial text or another error), and nothing left
 * allocated. */
TSR_TEST(out_of_memory_is_clean) {
  static const char *const files[] = {"kernels/examples/matmul.tsr",
                                      "tests/diagnostics/ok/scoped_sync_copy.tsr",
                                      "tests/diagnostics/ok/double_buffered_loop.tsr"};
  for (size_t f = 0; f < 3; f++) {
    tsr_ir_module_t *m = parse_source(files[f]);
    budget_t b = {0};
    b.limit = -1;
    tsr_context_options_t co;
    tsr_context_options_initialize(&co);
    co.allocator.allocate = budget_allocate;
    co.allocator.release = budget_release;
    co.allocator.user = &b;
    tsr_context_t *ctx = NULL;
    TSR_CHECK_OK(tsr_context_create(&co, &ctx));
    if (!m || !ctx) {
      tsr_context_destroy(ctx);
      tsr_ir_module_destroy(m);
      continue;
    }
    long base_live = atomic_load(&b.live_bytes);
    bool done = false;
    long failures = 0;
    for (long n = 0; n < 5000 && !done; n++) {
      b.limit = atomic_load(&b.allocations) + n;
      char *t = NULL;
      tsr_status_t s = tsr_tpu_emit(ctx, tsr_ir_module_kernel(m, 0), NULL, &t);
      b.limit = -1;
      if (!s) {
        done = true;
        TSR_CHECK(t != NULL);
      } else {
        TSR_CHECK(t == NULL);
        failures++;
        if (tsr_status_code(s) != TSR_OUT_OF_MEMORY)
          TSR_FAIL_AT("%s, budget %ld: %s", files[f], n, tsr_status_message(s));
      }
      tsr_status_free(s);
      tsr_ir_string_free(t);
      TSR_CHECK_EQ_INT(atomic_load(&b.live_bytes), base_live);
    }
    TSR_CHECK(done);
    TSR_CHECK(failures > 10); /* the emission allocates through the context */
    tsr_context_destroy(ctx);
    tsr_ir_module_destroy(m);
  }
}

int main(void) {
  TSR_RUN(add_module_shape);
  TSR_RUN(matmul_module_shape);
  TSR_RUN(prefetch_and_reductions);
  TSR_RUN(rank0_operands);
  TSR_RUN(every_example_emits);
  TSR_RUN(dma_and_semaphores);
  TSR_RUN(dynamic_grid_extent_is_emitted);
  TSR_RUN(unsupported_op_is_located);
  TSR_RUN(dma_with_regular_semaphore_not_on_v5e);
  TSR_RUN(more_ops);
  TSR_RUN(rewritten_for_mosaic);
  TSR_RUN(if_blocks_go_through_vmem);
  TSR_RUN(long_1d_blocks);
  TSR_RUN(layout_rules);
  TSR_RUN(element_windows);
  TSR_RUN(revisit_any_windows);
  TSR_RUN(kernel_named_transform);
  TSR_RUN(chips);
  TSR_RUN(vmem_need_and_capacity);
  TSR_RUN(vmem_of_packed_narrow_dtypes);
  TSR_RUN(narrow_dtypes_emit_or_are_refused);
  TSR_RUN(cache_hit);
  TSR_RUN(out_of_memory_is_clean);
  return tsr_test_done();
}
