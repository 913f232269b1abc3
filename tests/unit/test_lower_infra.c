/* The cpu backend's plumbing (docs/lowering.md): the lowering library loads
 * and compiles hand-written MLIR and kernels into shared objects that load
 * and run; MLIR failures become statuses; kernels go through the memory and
 * disk caches; a second process loads the cached object without LLVM; a
 * damaged or unloadable cached object is compiled again. Registered only in
 * builds with MLIR. The second processes are this program again, run with
 * "--child MODE" (their checks decide their exit status). */
#define _GNU_SOURCE /* mkdtemp, setenv */
#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "ir/ir.h"
#include "lower/lower_api.h"
#include "lower/lower_config.h"
#include "runtime/runtime_internal.h"

static char cache_dir[4096];

/* c = a * b + b over 64 x 32 f32, in 16-row blocks. */
static const char axpb_tsr[] =
    "kernel @axpb\n"
    "  grid(4) semantics(parallel)\n"
    "  in %x: f32[64, 32] vmem block[16, 32] map(%i) -> (%i, 0)\n"
    "  in %y: f32[64, 32] vmem block[16, 32] map(%i) -> (%i, 0)\n"
    "  out %z: f32[64, 32] vmem block[16, 32] map(%i) -> (%i, 0)\n"
    "{\n"
    "  %a = load %x[:, :] : f32[16, 32]\n"
    "  %b = load %y[:, :] : f32[16, 32]\n"
    "  %c = mul %a, %b : f32[16, 32]\n"
    "  %d = add %c, %b : f32[16, 32]\n"
    "  store %z[:, :], %d\n"
    "}\n";

/* The same kernel with other names: the same key. */
static const char renamed_tsr[] =
    "kernel @other\n"
    "  grid(4) semantics(parallel)\n"
    "  in %p: f32[64, 32] vmem block[16, 32] map(%j) -> (%j, 0)\n"
    "  in %q: f32[64, 32] vmem block[16, 32] map(%j) -> (%j, 0)\n"
    "  out %r: f32[64, 32] vmem block[16, 32] map(%j) -> (%j, 0)\n"
    "{\n"
    "  %u = load %p[:, :] : f32[16, 32]\n"
    "  %v = load %q[:, :] : f32[16, 32]\n"
    "  %w = mul %u, %v : f32[16, 32]\n"
    "  %s = add %w, %v : f32[16, 32]\n"
    "  store %r[:, :], %s\n"
    "}\n";

/* Integer sums of 128 x 16 i32 blocks, for the threads. */
static const char isum_tsr[] =
    "kernel @isum\n"
    "  grid(2) semantics(parallel)\n"
    "  in %x: i32[256, 16] vmem block[128, 16] map(%i) -> (%i, 0)\n"
    "  out %z: i32[256, 16] vmem block[128, 16] map(%i) -> (%i, 0)\n"
    "{\n"
    "  %a = load %x[:, :] : i32[128, 16]\n"
    "  %b = add %a, %a : i32[128, 16]\n"
    "  store %z[:, :], %b\n"
    "}\n";

/* A barrier between cores: not lowered (multi-core kernels; yet). */
/* Hand-written MLIR: c = tanh(exp(a + b)) over 4 x 8 (libm calls). */
static const char tanh_mlir[] =
    "module {\n"
    "  func.func @tsr_kernel(%a: memref<4x8xf32>, %b: memref<4x8xf32>, %c: memref<4x8xf32>)\n"
    "      attributes {llvm.emit_c_interface} {\n"
    "    %c0 = arith.constant 0 : index\n"
    "    %c1 = arith.constant 1 : index\n"
    "    %c4 = arith.constant 4 : index\n"
    "    %f0 = arith.constant 0.0 : f32\n"
    "    scf.for %i = %c0 to %c4 step %c1 {\n"
    "      %x = vector.transfer_read %a[%i, %c0], %f0 {in_bounds = [true]} : memref<4x8xf32>, vector<8xf32>\n"
    "      %y = vector.transfer_read %b[%i, %c0], %f0 {in_bounds = [true]} : memref<4x8xf32>, vector<8xf32>\n"
    "      %z = arith.addf %x, %y : vector<8xf32>\n"
    "      %e = math.exp %z : vector<8xf32>\n"
    "      %t = math.tanh %e : vector<8xf32>\n"
    "      vector.transfer_write %t, %c[%i, %c0] {in_bounds = [true]} : vector<8xf32>, memref<4x8xf32>\n"
    "    }\n"
    "    return\n"
    "  }\n"
    "}\n";

/* ---- Helpers ------------------------------------------------------------------ */

static tsr_ir_kernel_t *parse_kernel(const char *text, tsr_ir_module_t **out_module) {
  tsr_status_t s = tsr_ir_module_parse(TSR_SV("test.tsr"),
                                       (tsr_string_view_t){text, strlen(text)}, out_module);
  if (s) {
    printf("# parse: %s\n", tsr_status_message(s));
    tsr_status_free(s);
    return NULL;
  }
  return tsr_ir_module_kernel(*out_module, 0);
}

/* Arrays for axpb: x[i] = i / 100, y[i] = 1 - i / 1000, z zero. */
typedef struct axpb_data {
  tsr_array_t arrays[3];
  tsr_array_t *ptrs[3];
} axpb_data_t;

static bool axpb_setup(axpb_data_t *d) {
  int64_t dims[2] = {64, 32};
  for (int i = 0; i < 3; i++) {
    tsr_status_t s = tsr_array_initialize(TSR_DTYPE_F32, 2, dims, &d->arrays[i]);
    if (s) {
      tsr_status_free(s);
      return false;
    }
    d->ptrs[i] = &d->arrays[i];
  }
  float *x = d->arrays[0].data, *y = d->arrays[1].data;
  for (int i = 0; i < 64 * 32; i++) {
    x[i] = (float)i / 100.0f;
    y[i] = 1.0f - (float)i / 1000.0f;
  }
  return true;
}

static void axpb_teardown(axpb_data_t *d) {
  for (int i = 0; i < 3; i++) tsr_array_deinitialize(&d->arrays[i]);
}

/* Counts outputs differing from x * y + y by more than a rounding (the
 * compiled code may contract the two ops into one fma). */
static int axpb_errors(const axpb_data_t *d) {
  const float *x = d->arrays[0].data, *y = d->arrays[1].data, *z = d->arrays[2].data;
  int errors = 0;
  for (int i = 0; i < 64 * 32; i++) {
    float want = x[i] * y[i] + y[i];
    if (fabsf(z[i] - want) > 1e-6f * fmaxf(1.0f, fabsf(want))) errors++;
  }
  return errors;
}

static bool maps_mention(const char *needle) {
  FILE *f = fopen("/proc/self/maps", "r");
  if (!f) return false;
  char line[4096];
  bool found = false;
  while (!found && fgets(line, sizeof line, f)) found = strstr(line, needle) != NULL;
  fclose(f);
  return found;
}

/* Runs this program with "--child MODE"; true if it exits 0. */
static bool run_child(const char *mode) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    execl("/proc/self/exe", "test_lower_infra", "--child", mode, (char *)NULL);
    _exit(127);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) < 0) return false;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* The disk cache file of `k`'s cpu key: <dir>/<format>/<bucket>/<rest>.tsc,
 * where bucket and rest are the key's 32 hex digits (docs/cache.md). */
static bool find_entry_in(const char *dir, const char *hex, const char *bucket, char *out,
                          size_t size) {
  DIR *d = opendir(dir);
  if (!d) return false;
  bool found = false;
  struct dirent *e;
  while (!found && (e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    struct stat st;
    if (stat(path, &st) != 0) continue;
    size_t n = strlen(e->d_name);
    if (S_ISDIR(st.st_mode)) {
      found = find_entry_in(path, hex, e->d_name, out, size);
    } else if (bucket && n > 4 && strcmp(e->d_name + n - 4, ".tsc") == 0) {
      char joined[600];
      snprintf(joined, sizeof joined, "%s%.*s", bucket, (int)(n - 4), e->d_name);
      if (strcmp(joined, hex) == 0) {
        snprintf(out, size, "%s", path);
        found = true;
      }
    }
  }
  closedir(d);
  return found;
}

static bool find_entry(const tsr_ir_kernel_t *k, char *out, size_t size) {
  tsr_runtime_key_t *key = NULL;
  tsr_status_t s = tsr_runtime_compiled_key_create(k, NULL, &key);
  if (s) {
    tsr_status_free(s);
    return false;
  }
  char hex[33];
  tsr_cache_key_hex(tsr_runtime_key_get(key), hex);
  tsr_runtime_key_destroy(key);
  return find_entry_in(cache_dir, hex, NULL, out, size);
}

/* ---- The library ---------------------------------------------------------------- */

TSR_TEST(library_loads) {
  const tsr_lower_api_t *api = NULL;
  TSR_CHECK_OK(tsr_runtime_lower_api(&api));
  if (!api) return;
  TSR_CHECK_EQ_INT(api->abi_version, TSR_LOWER_ABI_VERSION);
  TSR_CHECK_EQ_STR(api->llvm_version, TSR_LLVM_VERSION);
  TSR_CHECK_EQ_STR(api->pipeline, TSR_LOWER_CPU_PIPELINE);
  TSR_CHECK(api->ir_layout == tsr_lower_ir_layout());
  tsr_runtime_compiled_stats_t st;
  tsr_runtime_compiled_stats(&st);
  TSR_CHECK(st.lower_library_loaded);
  /* LLVM and MLIR are in the process: linked into the lowering library
   * (-Dlower_static=true, the default) or as libLLVM.so. */
  TSR_CHECK(maps_mention("libtessera-lower"));
}

TSR_TEST(mlir_text_compiles_loads_and_runs) {
  const tsr_lower_api_t *api = NULL;
  TSR_CHECK_OK(tsr_runtime_lower_api(&api));
  if (!api) return;
  void *bytes = NULL;
  size_t size = 0;
  tsr_status_t s = api->compile_text(tanh_mlir, sizeof tanh_mlir - 1, 2, NULL, &bytes, &size);
  TSR_CHECK(!s);
  if (s) {
    printf("# %s\n", tsr_status_message(s));
    api->free_status(s);
    return;
  }
  TSR_CHECK(size > 4 && memcmp(bytes, "\177ELF", 4) == 0);
  tsr_runtime_object_t *object = NULL;
  TSR_CHECK_OK(tsr_runtime_object_load(bytes, size, &object));
  api->free_text(bytes);
  if (!object) return;
  float a[32], b[32], c[32];
  for (int i = 0; i < 32; i++) {
    a[i] = (float)i * 0.01f;
    b[i] = 0.25f;
    c[i] = -1;
  }
  struct {
    float *allocated, *aligned;
    int64_t offset, sizes[2], strides[2];
  } da = {a, a, 0, {4, 8}, {8, 1}}, db = {b, b, 0, {4, 8}, {8, 1}}, dc = {c, c, 0, {4, 8}, {8, 1}};
  void *pa = &da, *pb = &db, *pc = &dc;
  void *args[3] = {&pa, &pb, &pc};
  tsr_runtime_object_entry(object)(args);
  double worst = 0;
  for (int i = 0; i < 32; i++) {
    double err = fabs(tanh(exp((double)a[i] + b[i])) - c[i]);
    if (err > worst) worst = err;
  }
  TSR_CHECK(worst < 1e-6);
  tsr_runtime_object_unload(object);
}

TSR_TEST(mlir_diagnostics_become_statuses) {
  const tsr_lower_api_t *api = NULL;
  TSR_CHECK_OK(tsr_runtime_lower_api(&api));
  if (!api) return;
  static const char bad[] =
      "module {\n"
      "  func.func @tsr_kernel(%a: memref<4xf32>) {\n"
      "    // k.tsr:7:3: add\n"
      "    %x = arith.addf %a, %a : f32\n"
      "    return\n"
      "  }\n"
      "}\n";
  void *bytes = NULL;
  size_t size = 0;
  tsr_status_t s = api->compile_text(bad, sizeof bad - 1, 2, NULL, &bytes, &size);
  TSR_CHECK_EQ_INT(tsr_status_code(s), TSR_INTERNAL);
  /* located in the text, with MLIR's message, and the kernel op the line
   * was generated for (the emitter's comment above it) */
  TSR_CHECK(strstr(tsr_status_message(s), "<mlir text>:4:") != NULL);
  TSR_CHECK(strstr(tsr_status_message(s), "error: use of value '%a' expects different type") != NULL);
  TSR_CHECK(strstr(tsr_status_message(s), "\n  note: generated for k.tsr:7:3: add") != NULL);
  if (s) api->free_status(s);

  /* an op the pipeline does not lower is named, not left to a terse
   * translation failure */
  static const char linalg[] =
      "module {\n"
      "  func.func @tsr_kernel(%a: memref<4xf32>) attributes {llvm.emit_c_interface} {\n"
      "    %f = arith.constant 1.0 : f32\n"
      "    linalg.fill ins(%f : f32) outs(%a : memref<4xf32>)\n"
      "    return\n"
      "  }\n"
      "}\n";
  s = api->compile_text(linalg, sizeof linalg - 1, 2, NULL, &bytes, &size);
  TSR_CHECK_EQ_INT(tsr_status_code(s), TSR_INTERNAL);
  TSR_CHECK(strstr(tsr_status_message(s),
                   "<mlir text>:4:5: error: op 'linalg.fill' is left after the pass pipeline") !=
            NULL);
  if (s) {
    printf("# %s\n", tsr_status_message(s));
    api->free_status(s);
  }
  TSR_CHECK_STATUS(api->compile_text(tanh_mlir, sizeof tanh_mlir - 1, 7, NULL, &bytes, &size),
                   TSR_INVALID_ARGUMENT);
}

/* ---- Kernels through the caches ---------------------------------------------- */

TSR_TEST(kernel_compiles_runs_and_hits_memory) {
  tsr_ir_module_t *m = NULL;
  tsr_ir_kernel_t *k = parse_kernel(axpb_tsr, &m);
  TSR_CHECK(k);
  if (!k) return;
  tsr_runtime_compiled_stats_t before, after;
  tsr_runtime_compiled_stats(&before);
  tsr_compiled_kernel_t *ck = NULL;
  TSR_CHECK_OK(tsr_runtime_compile(k, NULL, &ck));
  tsr_runtime_compiled_stats(&after);
  TSR_CHECK_EQ_INT(after.compiles - before.compiles, 1);
  TSR_CHECK_EQ_INT(after.disk.puts - before.disk.puts, 1);
  axpb_data_t d;
  TSR_CHECK(axpb_setup(&d));
  if (ck) {
    TSR_CHECK_OK(tsr_compiled_kernel_run(ck, d.ptrs, 3, NULL));
    TSR_CHECK_EQ_INT(axpb_errors(&d), 0);
  }
  /* again: from memory */
  tsr_compiled_kernel_t *again = NULL;
  TSR_CHECK_OK(tsr_runtime_compile(k, NULL, &again));
  tsr_runtime_compiled_stats(&before);
  TSR_CHECK_EQ_INT(before.compiles, after.compiles);
  TSR_CHECK_EQ_INT(before.memory_hits - after.memory_hits, 1);
  /* wrong operands are refused, naming them */
  if (again) {
    TSR_CHECK_STATUS(tsr_compiled_kernel_run(again, d.ptrs, 2, NULL), TSR_INVALID_ARGUMENT);
    tsr_array_t *swapped[3] = {d.ptrs[0], d.ptrs[1], NULL};
    tsr_status_t s = tsr_compiled_kernel_run(again, swapped, 3, NULL);
    TSR_CHECK_EQ_INT(tsr_status_code(s), TSR_INVALID_ARGUMENT);
    TSR_CHECK(strstr(tsr_status_message(s), "kernel @axpb operand %z: expected f32[64, 32]"));
    tsr_status_free(s);
  }
  tsr_compiled_kernel_destroy(again);
  tsr_compiled_kernel_destroy(ck);
  axpb_teardown(&d);
  tsr_ir_module_destroy(m);
}

TSR_TEST(renamed_kernel_shares_the_entry) {
  tsr_ir_module_t *m = NULL;
  tsr_ir_kernel_t *k = parse_kernel(renamed_tsr, &m);
  if (!k) {
    TSR_CHECK(k);
    return;
  }
  tsr_runtime_compiled_stats_t before, after;
  tsr_runtime_compiled_stats(&before);
  tsr_compiled_kernel_t *ck = NULL;
  TSR_CHECK_OK(tsr_runtime_compile(k, NULL, &ck));
  tsr_runtime_compiled_stats(&after);
  TSR_CHECK_EQ_INT(after.compiles, before.compiles);
  TSR_CHECK_EQ_INT(after.memory_hits - before.memory_hits, 1);
  if (ck) {
    axpb_data_t d;
    TSR_CHECK(axpb_setup(&d));
    d.arrays[2].dims[0] = 63;
    tsr_status_t s = tsr_compiled_kernel_run(ck, d.ptrs, 3, NULL);
    /* this kernel's names in messages */
    TSR_CHECK(strstr(tsr_status_message(s),
                     "kernel @other operand %r: expected f32[64, 32], got f32[63, 32]"));
    tsr_status_free(s);
    axpb_teardown(&d);
  }
  tsr_compiled_kernel_destroy(ck);
  tsr_ir_module_destroy(m);
}

typedef struct thread_arg {
  const tsr_ir_kernel_t *kernel;
  tsr_status_t status;
  int errors;
} thread_arg_t;

static void *compile_and_run(void *p) {
  thread_arg_t *t = p;
  tsr_compiled_kernel_t *ck = NULL;
  t->status = tsr_runtime_compile(t->kernel, NULL, &ck);
  if (t->status) return NULL;
  int64_t dims[2] = {256, 16};
  tsr_array_t x, z;
  if (tsr_array_initialize(TSR_DTYPE_I32, 2, dims, &x) ||
      tsr_array_initialize(TSR_DTYPE_I32, 2, dims, &z)) {
    t->errors = -1;
    return NULL;
  }
  int32_t *xi = x.data, *zi = z.data;
  for (int i = 0; i < 256 * 16; i++) xi[i] = i * 7 - 1000;
  tsr_array_t *ptrs[2] = {&x, &z};
  t->status = tsr_compiled_kernel_run(ck, ptrs, 2, NULL);
  for (int i = 0; i < 256 * 16; i++) t->errors += zi[i] != 2 * xi[i];
  tsr_array_deinitialize(&x);
  tsr_array_deinitialize(&z);
  tsr_compiled_kernel_destroy(ck);
  return NULL;
}

TSR_TEST(threads_compile_once) {
  tsr_ir_module_t *m = NULL;
  tsr_ir_kernel_t *k = parse_kernel(isum_tsr, &m);
  if (!k) {
    TSR_CHECK(k);
    return;
  }
  tsr_runtime_compiled_stats_t before, after;
  tsr_runtime_compiled_stats(&before);
  enum { THREADS = 4 };
  pthread_t threads[THREADS];
  thread_arg_t args[THREADS];
  for (int i = 0; i < THREADS; i++) {
    args[i] = (thread_arg_t){k, NULL, 0};
    TSR_CHECK(pthread_create(&threads[i], NULL, compile_and_run, &args[i]) == 0);
  }
  for (int i = 0; i < THREADS; i++) {
    pthread_join(threads[i], NULL);
    TSR_CHECK_OK(args[i].status);
    TSR_CHECK_EQ_INT(args[i].errors, 0);
  }
  tsr_runtime_compiled_stats(&after);
  TSR_CHECK_EQ_INT(after.compiles - before.compiles, 1);
  tsr_ir_module_destroy(m);
}

/* Kernels of different shapes compiled at the same time, each in its own
 * MLIR context: three compiles, right results. */
typedef struct shaped_arg {
  int rows;
  tsr_status_t status;
  int errors;
  tsr_ir_module_t *module;
} shaped_arg_t;

static void *compile_shaped(void *p) {
  shaped_arg_t *a = p;
  char text[1024];
  snprintf(text, sizeof text,
           "kernel @twice\n"
           "  grid(2) semantics(parallel)\n"
           "  in %%x: i32[%d, 16] vmem block[%d, 16] map(%%i) -> (%%i, 0)\n"
           "  out %%z: i32[%d, 16] vmem block[%d, 16] map(%%i) -> (%%i, 0)\n"
           "{\n"
           "  %%a = load %%x[:, :] : i32[%d, 16]\n"
           "  %%b = add %%a, %%a : i32[%d, 16]\n"
           "  store %%z[:, :], %%b\n"
           "}\n",
           2 * a->rows, a->rows, 2 * a->rows, a->rows, a->rows, a->rows);
  a->status = tsr_ir_module_parse(TSR_SV("shaped.tsr"), (tsr_string_view_t){text, strlen(text)},
                                  &a->module);
  if (a->status) return NULL;
  tsr_compiled_kernel_t *ck = NULL;
  a->status = tsr_runtime_compile(tsr_ir_module_kernel(a->module, 0), NULL, &ck);
  if (a->status) return NULL;
  int64_t dims[2] = {2 * a->rows, 16};
  tsr_array_t x, z;
  if (tsr_array_initialize(TSR_DTYPE_I32, 2, dims, &x) ||
      tsr_array_initialize(TSR_DTYPE_I32, 2, dims, &z)) {
    a->errors = -1;
    tsr_compiled_kernel_destroy(ck);
    return NULL;
  }
  int32_t *xi = x.data, *zi = z.data;
  for (int i = 0; i < 2 * a->rows * 16; i++) xi[i] = i - 77;
  tsr_array_t *ptrs[2] = {&x, &z};
  a->status = tsr_compiled_kernel_run(ck, ptrs, 2, NULL);
  for (int i = 0; i < 2 * a->rows * 16; i++) a->errors += zi[i] != 2 * xi[i];
  tsr_array_deinitialize(&x);
  tsr_array_deinitialize(&z);
  tsr_compiled_kernel_destroy(ck);
  return NULL;
}

TSR_TEST(threads_compile_different_kernels) {
  tsr_runtime_compiled_stats_t before, after;
  tsr_runtime_compiled_stats(&before);
  enum { THREADS = 3 };
  pthread_t threads[THREADS];
  shaped_arg_t args[THREADS];
  for (int i = 0; i < THREADS; i++) {
    args[i] = (shaped_arg_t){8 * (i + 1), NULL, 0, NULL};
    TSR_CHECK(pthread_create(&threads[i], NULL, compile_shaped, &args[i]) == 0);
  }
  for (int i = 0; i < THREADS; i++) {
    pthread_join(threads[i], NULL);
    TSR_CHECK_OK(args[i].status);
    TSR_CHECK_EQ_INT(args[i].errors, 0);
    tsr_ir_module_destroy(args[i].module);
  }
  tsr_runtime_compiled_stats(&after);
  TSR_CHECK_EQ_INT(after.compiles - before.compiles, THREADS);
}

/* Every op of a verified kernel lowers; what the code generator cannot
 * handle (here a semaphore indexed by a slice, which the verifier rejects)
 * is TSR_UNIMPLEMENTED naming the op and its location. */
static const char slice_sem_tsr[] =
    "kernel @slice_sem\n"
    "  scratch %s: sem[2]\n"
    "{\n"
    "  %one = const 1 : i32\n"
    "  sem_signal %s[:], %one\n"
    "}\n";

TSR_TEST(unlowerable_op_is_named) {
  tsr_ir_module_t *m = NULL;
  tsr_ir_kernel_t *k = parse_kernel(slice_sem_tsr, &m);
  const tsr_lower_api_t *api = NULL;
  TSR_CHECK_OK(tsr_runtime_lower_api(&api));
  if (!k || !api) {
    TSR_CHECK(k);
    tsr_ir_module_destroy(m);
    return;
  }
  char *text = NULL;
  tsr_status_t s = api->emit(k, "mlir", 0, &text);
  TSR_CHECK_EQ_INT(tsr_status_code(s), TSR_UNIMPLEMENTED);
  TSR_CHECK(s && strstr(tsr_status_message(s), "test.tsr:5:3: error: op 'sem_signal' cannot be lowered"));
  TSR_CHECK(!text);
  if (s) api->free_status(s);
  tsr_ir_module_destroy(m);
}

/* An elementwise op with no lowering for its element type (the verifier
 * rejects these; the library's emit takes unverified kernels) is an error
 * naming the op and its location, never a result: the emitter used to
 * return the first operand for an opcode it did not know. Three shapes:
 * a scalar, a block fused into the store that consumes it (the error names
 * the op, not the store) and a block computed into a buffer. */
static const char *const unlowered_tsr[][2] = {
    {"kernel @scalar_exp\n"
     "  out %o: i32[8] smem\n"
     "{\n"
     "  %a = const 3 : i32\n"
     "  %e = exp %a : i32\n"
     "  store %o[0], %e\n"
     "}\n",
     "test.tsr:5:8: error: op 'exp' cannot be lowered to the cpu target yet ('exp' has no "
     "lowering for integers)"},
    {"kernel @fused_and\n"
     "  in %x: f32[8, 128] vmem\n"
     "  out %o: f32[8, 128] vmem\n"
     "{\n"
     "  %a = load %x[:, :] : f32[8, 128]\n"
     "  %b = and %a, %a : f32[8, 128]\n"
     "  store %o[:, :], %b\n"
     "}\n",
     "test.tsr:6:8: error: op 'and' cannot be lowered to the cpu target yet ('and' has no "
     "lowering for floats)"},
    {"kernel @buffered_clz\n"
     "  in %x: f32[8, 128] vmem\n"
     "  out %o: f32[8, 128] vmem\n"
     "{\n"
     "  %a = load %x[:, :] : f32[8, 128]\n"
     "  %b = clz %a : f32[8, 128]\n"
     "  %c = add %b, %b : f32[8, 128]\n"
     "  %d = mul %b, %c : f32[8, 128]\n"
     "  store %o[:, :], %d\n"
     "}\n",
     "test.tsr:6:8: error: op 'clz' cannot be lowered to the cpu target yet ('clz' has no "
     "lowering for floats)"},
};

TSR_TEST(elementwise_op_without_lowering_is_an_error) {
  const tsr_lower_api_t *api = NULL;
  TSR_CHECK_OK(tsr_runtime_lower_api(&api));
  if (!api) return;
  for (size_t i = 0; i < TSR_ARRAY_SIZE(unlowered_tsr); i++) {
    tsr_ir_module_t *m = NULL;
    tsr_ir_kernel_t *k = parse_kernel(unlowered_tsr[i][0], &m);
    TSR_CHECK(k);
    if (!k) {
      tsr_ir_module_destroy(m);
      continue;
    }
    char *text = NULL;
    tsr_status_t s = api->emit(k, "mlir", 0, &text);
    TSR_CHECK_EQ_INT(tsr_status_code(s), TSR_UNIMPLEMENTED);
    if (s && !strstr(tsr_status_message(s), unlowered_tsr[i][1]))
      printf("# got: %s\n", tsr_status_message(s));
    TSR_CHECK(s && strstr(tsr_status_message(s), unlowered_tsr[i][1]));
    TSR_CHECK(!text);
    if (s) api->free_status(s);
    if (text) api->free_text(text);
    tsr_ir_module_destroy(m);
  }
}

TSR_TEST(lower_text_stages) {
  tsr_ir_module_t *m = NULL;
  tsr_ir_kernel_t *k = parse_kernel(axpb_tsr, &m);
  if (!k) {
    TSR_CHECK(k);
    return;
  }
  char *text = NULL;
  TSR_CHECK_OK(tsr_runtime_lower_text(k, TSR_BACKEND_CPU, "mlir", &text));
  TSR_CHECK(text && strstr(text, "func.func @" TSR_LOWER_KERNEL_FUNC "("));
  TSR_CHECK(text && strstr(text, "llvm.emit_c_interface"));
  tsr_runtime_text_free(text);
  text = NULL;
  TSR_CHECK_OK(tsr_runtime_lower_text(k, TSR_BACKEND_CPU, "llvm", &text));
  TSR_CHECK(text && strstr(text, "llvm.func @_mlir_ciface_" TSR_LOWER_KERNEL_FUNC "("));
  TSR_CHECK(text && !strstr(text, "vector.") && !strstr(text, "scf.") && !strstr(text, "memref."));
  tsr_runtime_text_free(text);
  TSR_CHECK_STATUS(tsr_runtime_lower_text(k, TSR_BACKEND_CPU, "asm", &text),
                   TSR_INVALID_ARGUMENT);
  TSR_CHECK_STATUS(tsr_runtime_lower_text(k, TSR_BACKEND_INTERP, "mlir", &text),
                   TSR_UNIMPLEMENTED);
  tsr_ir_module_destroy(m);
}

/* ---- Other processes ------------------------------------------------------------ */

/* A second process: the kernel from the disk cache, LLVM never loaded. */
TSR_TEST(second_process_loads_from_disk_without_llvm) {
  TSR_CHECK(run_child("warm"));
}

/* A damaged entry (checksum) is a miss: compiled again and replaced. */
TSR_TEST(damaged_entry_is_compiled_again) {
  tsr_ir_module_t *m = NULL;
  tsr_ir_kernel_t *k = parse_kernel(axpb_tsr, &m);
  char path[4096] = "";
  TSR_CHECK(k && find_entry(k, path, sizeof path));
  tsr_ir_module_destroy(m);
  int fd = open(path, O_RDWR);
  struct stat st;
  TSR_CHECK(fd >= 0 && fstat(fd, &st) == 0 && st.st_size > 64);
  if (fd < 0) return;
  off_t at = st.st_size - 16;
  unsigned char byte = 0;
  TSR_CHECK(pread(fd, &byte, 1, at) == 1);
  byte ^= 0x5a;
  TSR_CHECK(pwrite(fd, &byte, 1, at) == 1);
  close(fd);
  TSR_CHECK(run_child("damaged"));
  TSR_CHECK(run_child("warm"));
}

/* A well-formed entry whose bytes are no shared object: a load failure,
 * compiled again and replaced. */
TSR_TEST(unloadable_entry_is_compiled_again) {
  tsr_ir_module_t *m = NULL;
  tsr_ir_kernel_t *k = parse_kernel(axpb_tsr, &m);
  if (!k) {
    TSR_CHECK(k);
    return;
  }
  tsr_runtime_key_t *key = NULL;
  TSR_CHECK_OK(tsr_runtime_compiled_key_create(k, NULL, &key));
  tsr_disk_cache_options_t o;
  tsr_disk_cache_options_initialize(&o);
  tsr_disk_cache_t *disk = NULL;
  TSR_CHECK_OK(tsr_disk_cache_open(&o, &disk));
  if (key && disk) {
    static const char junk[] = "not a shared object";
    TSR_CHECK_OK(tsr_disk_cache_put(disk, tsr_runtime_key_get(key), junk, sizeof junk));
  }
  tsr_disk_cache_close(disk);
  tsr_runtime_key_destroy(key);
  tsr_ir_module_destroy(m);
  TSR_CHECK(run_child("unloadable"));
  TSR_CHECK(run_child("warm"));
}

/* The child's checks: compile axpb through the caches, run it, compare the
 * stats with what MODE expects. Exit status 0 if all hold. */
static int child(const char *mode) {
  int failures = 0;
#define EXPECT(cond)                                                           \
  do {                                                                         \
    if (!(cond)) {                                                             \
      printf("#   child %s: check failed: %s\n", mode, #cond);                 \
      failures++;                                                              \
    }                                                                          \
  } while (0)
  tsr_ir_module_t *m = NULL;
  tsr_ir_kernel_t *k = parse_kernel(axpb_tsr, &m);
  if (!k) return 1;
  tsr_compiled_kernel_t *ck = NULL;
  tsr_status_t s = tsr_runtime_compile(k, NULL, &ck);
  if (s) {
    printf("#   child %s: %s\n", mode, tsr_status_message(s));
    tsr_status_free(s);
    return 1;
  }
  axpb_data_t d;
  EXPECT(axpb_setup(&d));
  s = tsr_compiled_kernel_run(ck, d.ptrs, 3, NULL);
  EXPECT(s == NULL);
  tsr_status_free(s);
  EXPECT(axpb_errors(&d) == 0);
  axpb_teardown(&d);
  tsr_compiled_kernel_destroy(ck);
  tsr_ir_module_destroy(m);
  tsr_runtime_compiled_stats_t st;
  tsr_runtime_compiled_stats(&st);
  if (strcmp(mode, "warm") == 0) {
    EXPECT(st.disk.hits == 1);
    EXPECT(st.compiles == 0);
    EXPECT(!st.lower_library_loaded);
    EXPECT(!maps_mention("libLLVM"));
    EXPECT(!maps_mention("libMLIR"));
    EXPECT(!maps_mention("libtessera-lower"));
  } else if (strcmp(mode, "damaged") == 0) {
    EXPECT(st.disk.bad_entries == 1);
    EXPECT(st.compiles == 1);
    EXPECT(st.disk.puts == 1);
  } else if (strcmp(mode, "unloadable") == 0) {
    EXPECT(st.disk.hits == 1);
    EXPECT(st.load_failures == 1);
    EXPECT(st.compiles == 1);
    EXPECT(st.disk.puts == 1);
  } else {
    EXPECT(!"known mode");
  }
  fflush(stdout);
  return failures ? 1 : 0;
#undef EXPECT
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "--child") == 0) return child(argv[2]);
  /* A cache of this run's own, inherited by the children. */
  const char *tmp = getenv("TMPDIR");
  snprintf(cache_dir, sizeof cache_dir, "%s/tessera-lower-test-XXXXXX",
           tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(cache_dir)) {
    perror("mkdtemp");
    return 1;
  }
  setenv("TESSERA_CACHE_DIR", cache_dir, 1);
  unsetenv("TESSERA_CACHE");
  TSR_RUN(library_loads);
  TSR_RUN(mlir_text_compiles_loads_and_runs);
  TSR_RUN(mlir_diagnostics_become_statuses);
  TSR_RUN(kernel_compiles_runs_and_hits_memory);
  TSR_RUN(renamed_kernel_shares_the_entry);
  TSR_RUN(threads_compile_once);
  TSR_RUN(threads_compile_different_kernels);
  TSR_RUN(unlowerable_op_is_named);
  TSR_RUN(elementwise_op_without_lowering_is_an_error);
  TSR_RUN(lower_text_stages);
  TSR_RUN(second_process_loads_from_disk_without_llvm);
  TSR_RUN(damaged_entry_is_compiled_again);
  TSR_RUN(unloadable_entry_is_compiled_again);
  char command[4200];
  snprintf(command, sizeof command, "rm -rf '%s'", cache_dir);
  if (system(command) != 0) printf("# could not remove %s\n", cache_dir);
  return tsr_test_done();
}
