/* The compiler of the lowering library (docs/lowering.md): MLIR text in the
 * upstream dialects -> the pass pipeline (TSR_LOWER_CPU_PIPELINE) -> the LLVM
 * dialect -> LLVM IR with a packed entry point -> LLVM's optimizations and a
 * position-independent object for the host CPU -> `cc -shared` -> the bytes
 * of a shared object the runtime keeps and loads. Every MLIR and LLVM call of
 * tessera is in this file but the splitting of long kernels (lower/split.c);
 * MLIR diagnostics are captured by a handler and become the text of tessera
 * statuses. */
#define _GNU_SOURCE /* mkdtemp, posix_spawn file actions */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <llvm-c/BitReader.h>
#include <llvm-c/BitWriter.h>
#include <llvm-c/Core.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>
#include <llvm/Config/llvm-config.h>
#include <mlir-c/BuiltinAttributes.h>
#include <mlir-c/Conversion.h>
#include <mlir-c/Diagnostics.h>
#include <mlir-c/Dialect/Arith.h>
#include <mlir-c/Dialect/MemRef.h>
#include <mlir-c/Dialect/Vector.h>
#include <mlir-c/IR.h>
#include <mlir-c/Pass.h>
#include <mlir-c/RegisterEverything.h>
#include <mlir-c/Target/LLVMIR.h>
#include <mlir-c/Transforms.h>

#include "base/pool.h"
#include "lower/lower_internal.h"
#include "lower/split.h"

extern char **environ;

#ifdef TSR_LOWER_NO_EMITTER
/* The MLIR text generator (lower/emit.c) is not in this build yet. */
tsr_status_t tsr_lower_emit_mlir(const tsr_kernel_t *kernel, uint32_t flags,
                                 tsr_strbuf_t *out) {
  (void)flags;
  (void)out;
  return TSR_STATUS(TSR_UNIMPLEMENTED,
                    "kernel @%s cannot be lowered: this lowering library was built "
                    "without its MLIR emitter (lower/emit.c)",
                    kernel->name);
}
#endif

/* ---- Process-wide registration ------------------------------------------------
 * Passes are registered once per process (those of the pipeline only,
 * global); the dialect registry is built once and copied into each context. */

static pthread_once_t registration_once = PTHREAD_ONCE_INIT;
static MlirDialectRegistry registry;
/* The host, as LLVM detects it (-mcpu=native in effect); never freed. */
static char *host_triple, *host_cpu, *host_features;
static bool have_native_target;

/* The passes of TSR_LOWER_CPU_PIPELINE, one by one: mlirRegisterAllPasses
 * builds an instance of each of MLIR's ~400 passes, 2.5-10 ms of a cold
 * compile, against ~0.1 ms for these. A pass added to the pipeline must be
 * added here (the pipeline then fails to parse, naming it: every compile
 * test fails). */
static void register_passes(void) {
  mlirRegisterArithArithExpandOpsPass();                   /* arith-expand */
  mlirRegisterVectorLowerVectorMultiReduction();           /* lower-vector-multi-reduction */
  mlirRegisterConversionConvertVectorToSCF();              /* convert-vector-to-scf */
  mlirRegisterConversionLowerAffinePass();                 /* lower-affine */
  mlirRegisterConversionSCFToControlFlowPass();            /* convert-scf-to-cf */
  mlirRegisterTransformsCanonicalizer();                   /* canonicalize */
  mlirRegisterTransformsCSE();                             /* cse */
  mlirRegisterConversionConvertMathToLLVMPass();           /* convert-math-to-llvm */
  mlirRegisterConversionConvertMathToLibmPass();           /* convert-math-to-libm */
  mlirRegisterConversionConvertVectorToLLVMPass();         /* convert-vector-to-llvm */
  mlirRegisterMemRefExpandStridedMetadataPass();           /* expand-strided-metadata */
  mlirRegisterConversionFinalizeMemRefToLLVMConversionPass(); /* finalize-memref-to-llvm */
  mlirRegisterConversionConvertFuncToLLVMPass();           /* convert-func-to-llvm */
  mlirRegisterConversionArithToLLVMConversionPass();       /* convert-arith-to-llvm */
  mlirRegisterConversionConvertIndexToLLVMPass();          /* convert-index-to-llvm */
  mlirRegisterConversionConvertControlFlowToLLVMPass();    /* convert-cf-to-llvm */
  mlirRegisterConversionUBToLLVMConversionPass();          /* convert-ub-to-llvm */
  mlirRegisterConversionReconcileUnrealizedCastsPass();    /* reconcile-unrealized-casts */
}

static void register_everything(void) {
  register_passes();
  registry = mlirDialectRegistryCreate();
  mlirRegisterAllDialects(registry);
  have_native_target = !LLVMInitializeNativeTarget() && !LLVMInitializeNativeAsmPrinter();
  host_triple = LLVMGetDefaultTargetTriple();
  host_cpu = LLVMGetHostCPUName();
  host_features = LLVMGetHostCPUFeatures();
}

/* ---- A compilation session: one context, its diagnostics ----------------------
 * One MlirContext per compile (threads compile in parallel without sharing
 * one): creating it costs about 0.5 ms once the process is warm, against
 * 30-60 ms for the compile. MLIR's own thread pool is off: a tessera process
 * may compile on several threads already. */

/* Phases of a compile, timed when $TESSERA_LOWER_TIMING is set (one line
 * per compile on stderr; docs/lowering.md). */
enum { PHASE_EMIT, PHASE_SETUP, PHASE_PARSE, PHASE_SPLIT, PHASE_PIPELINE, PHASE_TRANSLATE,
       PHASE_OPTIMIZE, PHASE_CODEGEN, PHASE_LINK, PHASE_COUNT };
static const char *const phase_names[PHASE_COUNT] = {
    "emit", "setup", "parse", "split", "pipeline", "translate", "optimize", "codegen", "link"};

typedef struct session {
  MlirContext context;
  /* The MLIR text being compiled and its name, to name the kernel op a
   * diagnostic's line was generated for. */
  const char *text, *source;
  size_t text_size;
  tsr_strbuf_t diagnostics; /* "LOC: error: MESSAGE" lines, notes indented */
  uint32_t errors;
  double phase_ms[PHASE_COUNT];
  double mark; /* when the current phase began */
  tsr_lower_split_stats_t split; /* what splitting the kernel did */
  const char *cpu; /* the LLVM CPU code is generated for; NULL: the host's */
  unsigned objects, threads; /* a long kernel's objects, and the threads making them */
} session_t;

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* Ends the current phase as `phase` and begins the next. */
static void phase_done(session_t *s, int phase) {
  double t = now_ms();
  s->phase_ms[phase] += t - s->mark;
  s->mark = t;
}

static void report_timing(const session_t *s, const char *source) {
  const char *env = getenv("TESSERA_LOWER_TIMING");
  if (!env || !*env || strcmp(env, "0") == 0) return;
  char line[512];
  int n = snprintf(line, sizeof line, "tessera: lower %s:", source);
  double total = 0;
  for (int p = 0; p < PHASE_COUNT && n > 0 && (size_t)n < sizeof line; p++) {
    n += snprintf(line + n, sizeof line - (size_t)n, " %s %.2f ms%s", phase_names[p],
                  s->phase_ms[p], p + 1 < PHASE_COUNT ? "," : "");
    total += s->phase_ms[p];
  }
  fprintf(stderr, "%s; total %.2f ms", line, total);
  if (s->split.parts)
    fprintf(stderr, "; %u parts, %u of them merged", s->split.parts, s->split.merged);
  if (s->objects > 1) fprintf(stderr, "; %u objects on %u threads", s->objects, s->threads);
  fprintf(stderr, "\n");
}

static void append_string(MlirStringRef text, void *user) {
  tsr_strbuf_append(user, text.data, text.length);
}

/* "file:line:col" for a file location, else MLIR's own form ("loc(...)"). */
static void append_location(tsr_strbuf_t *sb, MlirLocation loc) {
  if (mlirLocationIsAFileLineColRange(loc)) {
    MlirStringRef file = mlirIdentifierStr(mlirLocationFileLineColRangeGetFilename(loc));
    tsr_strbuf_printf(sb, "%.*s:%d:%d", (int)file.length, file.data,
                      mlirLocationFileLineColRangeGetStartLine(loc),
                      mlirLocationFileLineColRangeGetStartColumn(loc));
  } else {
    mlirLocationPrint(loc, append_string, sb);
  }
}

static const char *severity_name(MlirDiagnosticSeverity severity) {
  switch (severity) {
    case MlirDiagnosticError: return "error";
    case MlirDiagnosticWarning: return "warning";
    case MlirDiagnosticNote: return "note";
    case MlirDiagnosticRemark: return "remark";
  }
  return "diagnostic";
}

/* The emitter starts the lines of each kernel op with a comment naming it
 * ("// k.tsr:12:3: add", lower/emit.c): for a diagnostic at line `line` of
 * the text, the nearest such comment above it, or NULL. */
static const char *origin_comment(const session_t *s, MlirLocation loc, int *out_len) {
  if (!s->text || !mlirLocationIsAFileLineColRange(loc)) return NULL;
  MlirStringRef file = mlirIdentifierStr(mlirLocationFileLineColRangeGetFilename(loc));
  if (file.length != strlen(s->source) || memcmp(file.data, s->source, file.length) != 0)
    return NULL;
  int line = mlirLocationFileLineColRangeGetStartLine(loc);
  const char *p = s->text, *end = s->text + s->text_size, *found = NULL;
  for (int l = 1; p < end && l <= line; l++) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    const char *eol = nl ? nl : end;
    const char *q = p;
    while (q < eol && *q == ' ') q++;
    if (eol - q > 3 && q[0] == '/' && q[1] == '/' && q[2] == ' ') {
      found = q + 3;
      *out_len = (int)(eol - found);
    }
    p = nl ? nl + 1 : end;
  }
  return found;
}

static void append_diagnostic(const session_t *s, tsr_strbuf_t *sb, MlirDiagnostic d,
                              const char *indent) {
  if (sb->size) tsr_strbuf_puts(sb, "\n");
  tsr_strbuf_puts(sb, indent);
  MlirLocation loc = mlirDiagnosticGetLocation(d);
  append_location(sb, loc);
  tsr_strbuf_printf(sb, ": %s: ", severity_name(mlirDiagnosticGetSeverity(d)));
  mlirDiagnosticPrint(d, append_string, sb);
  int len = 0;
  const char *origin = origin_comment(s, loc, &len);
  if (origin) tsr_strbuf_printf(sb, "\n%s  note: generated for %.*s", indent, len, origin);
  for (intptr_t i = 0; i < mlirDiagnosticGetNumNotes(d); i++)
    append_diagnostic(s, sb, mlirDiagnosticGetNote(d, i), "  ");
}

/* Keeps errors and warnings (remarks are dropped); claims every diagnostic,
 * so MLIR prints nothing on stderr itself. */
static MlirLogicalResult on_diagnostic(MlirDiagnostic d, void *user) {
  session_t *s = user;
  MlirDiagnosticSeverity severity = mlirDiagnosticGetSeverity(d);
  if (severity == MlirDiagnosticError || severity == MlirDiagnosticWarning) {
    append_diagnostic(s, &s->diagnostics, d, "");
    if (severity == MlirDiagnosticError) s->errors++;
  }
  return mlirLogicalResultSuccess();
}

static void session_begin(session_t *s) {
  memset(s, 0, sizeof *s);
  s->mark = now_ms();
  pthread_once(&registration_once, register_everything);
  tsr_strbuf_initialize(&s->diagnostics);
  s->context = mlirContextCreateWithRegistry(registry, /*threadingEnabled=*/false);
  mlirRegisterAllLLVMTranslations(s->context);
  mlirContextAttachDiagnosticHandler(s->context, on_diagnostic, s, NULL);
  phase_done(s, PHASE_SETUP);
}

static void session_end(session_t *s) {
  mlirContextDestroy(s->context);
  tsr_strbuf_deinitialize(&s->diagnostics);
}

/* A TSR_INTERNAL status: `what` failed, with the diagnostics collected. */
static tsr_status_t session_failure(session_t *s, const char *source, const char *what) {
  if (s->diagnostics.failed) return TSR_OOM();
  return TSR_STATUS(TSR_INTERNAL, "%s: %s%s%s", source, what,
                    s->diagnostics.size ? ":\n" : " (MLIR gave no diagnostic)",
                    s->diagnostics.size ? s->diagnostics.data : "");
}

/* ---- Parse, lower, check ------------------------------------------------------ */

/* The first op left outside the LLVM dialect after the pipeline: the
 * translation to LLVM IR would fail on it with a terse message. An
 * unrealized_conversion_cast is only named when nothing else is left: casts
 * remain around the op that was not converted, which is the one to name. */
typedef struct leftover {
  MlirOperation op, cast;
  bool found, found_cast;
} leftover_t;

static bool name_is(MlirStringRef name, const char *s) {
  size_t n = strlen(s);
  return name.length == n && memcmp(name.data, s, n) == 0;
}

static MlirWalkResult find_leftover(MlirOperation op, void *user) {
  leftover_t *l = user;
  MlirStringRef name = mlirIdentifierStr(mlirOperationGetName(op));
  if ((name.length > 5 && memcmp(name.data, "llvm.", 5) == 0) ||
      name_is(name, "builtin.module"))
    return MlirWalkResultAdvance;
  if (name_is(name, "builtin.unrealized_conversion_cast")) {
    if (!l->found_cast) l->cast = op;
    l->found_cast = true;
    return MlirWalkResultAdvance;
  }
  l->op = op;
  l->found = true;
  return MlirWalkResultInterrupt;
}

/* How long kernels are split (lower/split.h). $TESSERA_LOWER_SPLIT=N sets
 * the part size (0: no splitting), for tests that split small kernels; the
 * results are the same either way, only the compile time differs. Sizes in
 * MLIR ops, nested ones counted (docs/lowering.md, "Long kernels"). */
static tsr_lower_split_params_t split_params(void) {
  tsr_lower_split_params_t p = {
      .min_kernel_ops = 2000, .max_part_ops = 100, .min_part_ops = 12, .merge = true,
      .max_calls = 200};
  const char *env = getenv("TESSERA_LOWER_SPLIT");
  if (env && *env) {
    long n = strtol(env, NULL, 10);
    if (n <= 0) {
      p.min_kernel_ops = SIZE_MAX;
    } else {
      p.max_part_ops = (size_t)n;
      p.min_part_ops = (size_t)n / 8 + 1;
      p.min_kernel_ops = 0;
    }
  }
  return p;
}

/* Parses `text` (named `source` in diagnostics: generated MLIR has no file
 * of its own, and `tessera lower --stage mlir` prints the same lines) into
 * a module, runs the pipeline and checks that only LLVM dialect ops remain.
 * On success the caller owns *out_module. */
static tsr_status_t parse_and_lower(session_t *s, const char *source, const char *text,
                                    size_t size, bool run_pipeline,
                                    MlirModule *out_module) {
  s->text = text;
  s->text_size = size;
  s->source = source;
  MlirOperation parsed = mlirOperationCreateParse(
      s->context, mlirStringRefCreate(text, size), mlirStringRefCreateFromCString(source));
  if (mlirOperationIsNull(parsed))
    return session_failure(s, source, "the generated MLIR does not parse");
  phase_done(s, PHASE_PARSE);
  MlirModule module = mlirModuleFromOperation(parsed);
  if (mlirModuleIsNull(module)) {
    mlirOperationDestroy(parsed);
    return TSR_STATUS(TSR_INTERNAL, "%s: the generated MLIR is not a builtin.module",
                      source);
  }
  if (!run_pipeline) {
    *out_module = module;
    return NULL;
  }
  tsr_lower_split_params_t split = split_params();
  if (!tsr_lower_split_module(s->context, module, TSR_LOWER_KERNEL_FUNC, &split, &s->split)) {
    mlirModuleDestroy(module);
    return TSR_OOM();
  }
  phase_done(s, PHASE_SPLIT);
  MlirPassManager pm = mlirPassManagerCreate(s->context);
  /* The parser verified the module; the pass manager would verify it again
   * after each of the ~20 passes (2-3 ms of a small kernel's cold compile).
   * It is verified once, after the last pass, instead. */
  mlirPassManagerEnableVerifier(pm, false);
  tsr_strbuf_t pipeline_errors;
  tsr_strbuf_initialize(&pipeline_errors);
  tsr_status_t status = NULL;
  if (mlirLogicalResultIsFailure(mlirParsePassPipeline(
          mlirPassManagerGetAsOpPassManager(pm),
          mlirStringRefCreateFromCString(TSR_LOWER_CPU_PIPELINE), append_string,
          &pipeline_errors))) {
    status = TSR_STATUS(TSR_INTERNAL, "the pass pipeline does not parse: %s",
                        pipeline_errors.data ? pipeline_errors.data : "");
  } else if (mlirLogicalResultIsFailure(
                 mlirPassManagerRunOnOp(pm, mlirModuleGetOperation(module)))) {
    status = session_failure(s, source, "the pass pipeline to the LLVM dialect failed");
  } else if (!mlirOperationVerify(mlirModuleGetOperation(module))) {
    status = session_failure(s, source, "the pass pipeline made a module that does not verify");
  } else {
    leftover_t l = {{NULL}, {NULL}, false, false};
    mlirOperationWalk(mlirModuleGetOperation(module), find_leftover, &l, MlirWalkPreOrder);
    if (!l.found && l.found_cast) {
      l.op = l.cast;
      l.found = true;
    }
    if (l.found) {
      tsr_strbuf_t where;
      tsr_strbuf_initialize(&where);
      append_location(&where, mlirOperationGetLocation(l.op));
      MlirStringRef name = mlirIdentifierStr(mlirOperationGetName(l.op));
      status = TSR_STATUS(TSR_INTERNAL,
                          "%s: error: op '%.*s' is left after the pass pipeline: no "
                          "pass lowers it to the LLVM dialect",
                          where.data ? where.data : source, (int)name.length, name.data);
      tsr_strbuf_deinitialize(&where);
    }
  }
  tsr_strbuf_deinitialize(&pipeline_errors);
  mlirPassManagerDestroy(pm);
  phase_done(s, PHASE_PIPELINE);
  if (status) {
    mlirModuleDestroy(module);
    return status;
  }
  *out_module = module;
  return NULL;
}

/* ---- Temporary files and the linker --------------------------------------------- */

/* At most this many objects per kernel (compile_module: a long kernel's
 * functions are compiled as up to this many objects, in parallel). */
#define MAX_OBJECTS 16

typedef struct workdir {
  char dir[4096];
  char object[4200], shared[4200], log[4200];
  char objects[MAX_OBJECTS][4200]; /* kernel.o, kernel1.o, ...: those linked */
  unsigned num_objects;
} workdir_t;

static tsr_status_t workdir_create(workdir_t *w) {
  const char *tmp = getenv("TMPDIR");
  if (!tmp || !*tmp) tmp = "/tmp";
  int n = snprintf(w->dir, sizeof w->dir, "%s/tessera-lower-XXXXXX", tmp);
  if (n < 0 || (size_t)n >= sizeof w->dir)
    return TSR_STATUS(TSR_IO_ERROR, "TMPDIR is too long: %s", tmp);
  if (!mkdtemp(w->dir))
    return TSR_STATUS(TSR_IO_ERROR, "cannot create a temporary directory in %s: %s", tmp,
                      strerror(errno));
  snprintf(w->object, sizeof w->object, "%s/kernel.o", w->dir);
  snprintf(w->shared, sizeof w->shared, "%s/kernel.so", w->dir);
  snprintf(w->log, sizeof w->log, "%s/link.log", w->dir);
  for (unsigned i = 0; i < MAX_OBJECTS; i++) {
    if (i == 0)
      snprintf(w->objects[i], sizeof w->objects[i], "%s", w->object);
    else
      snprintf(w->objects[i], sizeof w->objects[i], "%s/kernel%u.o", w->dir, i);
  }
  w->num_objects = 1;
  return NULL;
}

static void workdir_remove(workdir_t *w) {
  for (unsigned i = 1; i < w->num_objects; i++) unlink(w->objects[i]);
  unlink(w->object);
  unlink(w->shared);
  unlink(w->log);
  rmdir(w->dir);
}

/* Reads a whole file into a buffer freed with tsr_free. */
static tsr_status_t read_whole(const char *path, void **out_bytes, size_t *out_size) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return TSR_STATUS(TSR_IO_ERROR, "cannot open %s: %s", path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size < 0) {
    int err = errno;
    close(fd);
    return TSR_STATUS(TSR_IO_ERROR, "cannot stat %s: %s", path, strerror(err));
  }
  size_t size = (size_t)st.st_size;
  char *bytes = tsr_malloc(size);
  if (!bytes) {
    close(fd);
    return TSR_OOM();
  }
  size_t done = 0;
  while (done < size) {
    ssize_t r = read(fd, bytes + done, size - done);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      int err = r < 0 ? errno : EIO;
      close(fd);
      tsr_free(bytes);
      return TSR_STATUS(TSR_IO_ERROR, "cannot read %s: %s", path, strerror(err));
    }
    done += (size_t)r;
  }
  close(fd);
  *out_bytes = bytes;
  *out_size = size;
  return NULL;
}

/* Links the object into a shared object with the C compiler driver:
 * `cc -shared -nostartfiles -nostdlib k.o --as-needed -l:libm.so.6 -lgcc`.
 * libgcc for helpers LLVM may call (such as f16 conversions on CPUs without
 * F16C), libm when the code calls it. No start files (the object has no
 * constructors) and no libc: what the object takes from libc (memcpy,
 * malloc) is resolved when it is loaded, in any process, and a symbol that
 * nothing defines fails that dlopen, right after the compile. Measured: 11
 * ms, against 30 ms with libc and --no-undefined (docs/lowering.md). The
 * driver's messages go to a log file that becomes the status text. */
static tsr_status_t link_shared(const workdir_t *w) {
  char *argv[MAX_OBJECTS + 16];
  int argc = 0;
  char *head[] = {"cc", "-shared", "-nostartfiles", "-nostdlib", "-o", (char *)w->shared};
  for (size_t i = 0; i < sizeof head / sizeof *head; i++) argv[argc++] = head[i];
  for (unsigned i = 0; i < w->num_objects; i++) argv[argc++] = (char *)w->objects[i];
  argv[argc++] = "-Wl,--as-needed";
  argv[argc++] = "-l:libm.so.6";
  argv[argc++] = "-lgcc";
  argv[argc] = NULL;
  posix_spawn_file_actions_t actions;
  if (posix_spawn_file_actions_init(&actions) != 0) return TSR_OOM();
  posix_spawn_file_actions_addopen(&actions, 1, w->log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid;
  int err = posix_spawnp(&pid, argv[0], &actions, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  if (err)
    return TSR_STATUS(TSR_IO_ERROR,
                      "cannot run the C compiler driver 'cc' to link the kernel's object "
                      "(Debian package build-essential): %s",
                      strerror(err));
  int wstatus = 0;
  while (waitpid(pid, &wstatus, 0) < 0) {
    if (errno != EINTR)
      return TSR_STATUS(TSR_INTERNAL, "waitpid for cc: %s", strerror(errno));
  }
  if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) return NULL;
  void *log = NULL;
  size_t log_size = 0;
  tsr_status_t s = read_whole(w->log, &log, &log_size);
  tsr_status_free(s);
  while (log && log_size && ((char *)log)[log_size - 1] == '\n') log_size--;
  s = TSR_STATUS(TSR_INTERNAL, "linking the kernel's object into a shared object failed "
                               "(cc -shared ... %s, exit status %d)%s%.*s",
                 w->object, WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1,
                 log_size ? ":\n" : "", (int)log_size, log ? (char *)log : "");
  free(log);
  return s;
}

/* ---- Compiling ------------------------------------------------------------------- */

/* Adds TSR_LOWER_KERNEL_SYMBOL, `void fn(void **args)`, calling the kernel
 * function's C interface (_mlir_ciface_tsr_kernel) with *args[i] as its i-th
 * argument, for any number and types of arguments (memref descriptors come
 * as pointers, scalars by value); a result, if there is one, is stored to
 * *args[n]. The same function as the one MLIR's ExecutionEngine generates. */
static tsr_status_t add_packed_entry(LLVMModuleRef m, const char *source) {
  LLVMValueRef callee = LLVMGetNamedFunction(m, "_mlir_ciface_" TSR_LOWER_KERNEL_FUNC);
  if (!callee || LLVMIsDeclaration(callee))
    return TSR_STATUS(TSR_INTERNAL,
                      "%s: the module defines no _mlir_ciface_%s (func @%s needs the "
                      "llvm.emit_c_interface attribute)",
                      source, TSR_LOWER_KERNEL_FUNC, TSR_LOWER_KERNEL_FUNC);
  LLVMContextRef ctx = LLVMGetModuleContext(m);
  LLVMTypeRef callee_type = LLVMGlobalGetValueType(callee);
  unsigned n = LLVMCountParamTypes(callee_type);
  LLVMTypeRef *types = malloc((n ? n : 1) * sizeof *types);
  LLVMValueRef *values = malloc((n ? n : 1) * sizeof *values);
  if (!types || !values) {
    free(types);
    free(values);
    return TSR_OOM();
  }
  LLVMGetParamTypes(callee_type, types);
  LLVMTypeRef ptr = LLVMPointerTypeInContext(ctx, 0);
  LLVMTypeRef i64 = LLVMInt64TypeInContext(ctx);
  LLVMValueRef entry = LLVMAddFunction(
      m, TSR_LOWER_KERNEL_SYMBOL, LLVMFunctionType(LLVMVoidTypeInContext(ctx), &ptr, 1, 0));
  LLVMBuilderRef b = LLVMCreateBuilderInContext(ctx);
  LLVMPositionBuilderAtEnd(b, LLVMAppendBasicBlockInContext(ctx, entry, "entry"));
  LLVMValueRef args = LLVMGetParam(entry, 0);
  for (unsigned i = 0; i < n; i++) { /* values[i] = *(T_i *)args[i] */
    LLVMValueRef index = LLVMConstInt(i64, i, 0);
    LLVMValueRef slot = LLVMBuildInBoundsGEP2(b, ptr, args, &index, 1, "");
    values[i] = LLVMBuildLoad2(b, types[i], LLVMBuildLoad2(b, ptr, slot, ""), "");
  }
  LLVMValueRef result = LLVMBuildCall2(b, callee_type, callee, values, n, "");
  if (LLVMGetTypeKind(LLVMGetReturnType(callee_type)) != LLVMVoidTypeKind) {
    LLVMValueRef index = LLVMConstInt(i64, n, 0);
    LLVMValueRef slot = LLVMBuildInBoundsGEP2(b, ptr, args, &index, 1, "");
    LLVMBuildStore(b, result, LLVMBuildLoad2(b, ptr, slot, ""));
  }
  LLVMBuildRetVoid(b);
  LLVMDisposeBuilder(b);
  free(types);
  free(values);
  return NULL;
}

static bool value_named(LLVMValueRef v, const char *name) {
  size_t length = 0;
  const char *s = LLVMGetValueName2(v, &length);
  return length == strlen(name) && memcmp(s, name, length) == 0;
}

/* Only the packed entry point stays exported: every other function the
 * module defines becomes internal, and the kernel function itself noinline.
 * Exported, the kernel's body was optimized and compiled once as tsr_kernel
 * and again wherever the inliner copied it (into the C interface and its
 * packed wrapper): `add` compiled two to three copies. Inlined through two
 * levels instead, LLVM re-simplified the body after each inlining:
 * int_hash's -O2 took 50 ms instead of 25. Internal and noinline, the body
 * is optimized and compiled once, behind one call per kernel run. */
static void keep_one_body(LLVMModuleRef m) {
  LLVMContextRef ctx = LLVMGetModuleContext(m);
  for (LLVMValueRef f = LLVMGetFirstFunction(m); f; f = LLVMGetNextFunction(f)) {
    if (LLVMIsDeclaration(f) || value_named(f, TSR_LOWER_KERNEL_SYMBOL)) continue;
    LLVMSetLinkage(f, LLVMInternalLinkage);
    size_t length = 0;
    const char *name = LLVMGetValueName2(f, &length);
    bool part = length > 9 && memcmp(name, "tsr_part_", 9) == 0;
    if (part || value_named(f, TSR_LOWER_KERNEL_FUNC)) {
      unsigned noinline = LLVMGetEnumAttributeKindForName("noinline", strlen("noinline"));
      LLVMAddAttributeAtIndex(f, LLVMAttributeFunctionIndex,
                              LLVMCreateEnumAttribute(ctx, noinline, 0));
    }
  }
}

/* LLVM's own errors (codegen), collected instead of LLVM's default handler,
 * which prints them and exits the process. */
static void on_llvm_diagnostic(LLVMDiagnosticInfoRef info, void *user) {
  if (LLVMGetDiagInfoSeverity(info) != LLVMDSError) return;
  session_t *s = user;
  char *text = LLVMGetDiagInfoDescription(info);
  if (s->diagnostics.size) tsr_strbuf_puts(&s->diagnostics, "\n");
  tsr_strbuf_printf(&s->diagnostics, "error: %s", text ? text : "");
  LLVMDisposeMessage(text);
  s->errors++;
}

/* A target machine at `opt_level` for `cpu` with its features and no
 * others (NULL: the host CPU with every feature LLVM detects),
 * position-independent code (the object goes into a shared object). The
 * triple is the host's: the object runs in this process. */
static tsr_status_t create_target_machine(int opt_level, const char *cpu,
                                          LLVMTargetMachineRef *out_tm) {
  if (!have_native_target)
    return TSR_STATUS(TSR_INTERNAL, "this LLVM has no code generator for the host (%s)",
                      host_triple);
  LLVMTargetRef target = NULL;
  char *error = NULL;
  if (LLVMGetTargetFromTriple(host_triple, &target, &error)) {
    tsr_status_t status =
        TSR_STATUS(TSR_INTERNAL, "LLVM has no target for %s: %s", host_triple, error);
    LLVMDisposeMessage(error);
    return status;
  }
  static const LLVMCodeGenOptLevel levels[] = {LLVMCodeGenLevelNone, LLVMCodeGenLevelLess,
                                               LLVMCodeGenLevelDefault,
                                               LLVMCodeGenLevelAggressive};
  LLVMTargetMachineRef tm = LLVMCreateTargetMachine(
      target, host_triple, cpu ? cpu : host_cpu, cpu ? "" : host_features, levels[opt_level],
      LLVMRelocPIC, LLVMCodeModelDefault);
  if (!tm)
    return TSR_STATUS(TSR_INTERNAL, "LLVM cannot create a target machine for %s",
                      cpu ? cpu : host_cpu);
  *out_tm = tm;
  return NULL;
}

/* LLVM's default<O`opt_level`> pipeline without loop unrolling: the code is
 * vectorized and its micro-kernels unrolled by the emitter already, and
 * LLVM's unrolling of it only multiplied the code to compile (docs/lowering.md:
 * ragged's optimization + codegen 77 -> 35 ms, same run-time throughput). */
static tsr_status_t optimize(LLVMModuleRef m, LLVMTargetMachineRef tm, int opt_level,
                             const char *source) {
  char passes[32];
  snprintf(passes, sizeof passes, "default<O%d>", opt_level);
  LLVMPassBuilderOptionsRef options = LLVMCreatePassBuilderOptions();
  LLVMPassBuilderOptionsSetLoopUnrolling(options, 0);
  LLVMErrorRef error = LLVMRunPasses(m, passes, tm, options);
  LLVMDisposePassBuilderOptions(options);
  if (!error) return NULL;
  char *message = LLVMGetErrorMessage(error);
  tsr_status_t status =
      TSR_STATUS(TSR_INTERNAL, "%s: LLVM's %s pipeline failed: %s", source, passes, message);
  LLVMDisposeErrorMessage(message);
  return status;
}

/* ---- A long kernel as several objects, compiled on the host's cores -----------
 * The module is translated and optimized whole (the interprocedural passes
 * see every call of a split kernel's parts: internal parts lose their dead
 * and constant arguments, which made the calls cheap to compile; cut before
 * the optimization, code generation took 3-4x longer). Then, when its
 * functions hold more than 2 * OBJECT_INSTS instructions, code generation,
 * the most expensive step left, is done in parallel: the optimized module
 * is written as bitcode, and each of several objects reads it back in an
 * LLVM context of its own, keeps the bodies of its own functions (the others
 * become declarations or go), and is compiled on a thread of its own; the
 * objects are linked together. Functions another object calls become
 * external and hidden (the link resolves them, the shared object does not
 * export them). The cut depends on the module alone (the functions' sizes),
 * never on the number of threads: the objects, and the shared object, are
 * the same bytes whatever the thread count. A small module, one with a
 * mutable global, or one with an unnamed function stays one object: the code
 * of small kernels is what it was. */

/* Instructions of optimized LLVM IR per object, about. Below it an object's
 * fixed cost (a target machine, a bitcode read, one more file to link: a few
 * ms) would show. */
#define OBJECT_INSTS 400


/* Host threads for compiling a kernel's objects: $TESSERA_LOWER_THREADS
 * (tests), else what a run would use (tsr_host_threads: $TESSERA_THREADS,
 * else the cores this process may run on). */
static unsigned compile_threads(void) {
  const char *env = getenv("TESSERA_LOWER_THREADS");
  if (env && *env) {
    long n = strtol(env, NULL, 10);
    if (n >= 1) return n > MAX_OBJECTS ? MAX_OBJECTS : (unsigned)n;
  }
  return tsr_host_threads(0);
}

static size_t count_instructions(LLVMValueRef f) {
  size_t n = 0;
  for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(f); bb; bb = LLVMGetNextBasicBlock(bb))
    for (LLVMValueRef i = LLVMGetFirstInstruction(bb); i; i = LLVMGetNextInstruction(i)) n++;
  return n;
}

/* The function of the module that uses v, or NULL (a use in a constant). */
static LLVMValueRef user_function(LLVMUseRef use) {
  LLVMValueRef user = LLVMGetUser(use);
  if (!LLVMIsAInstruction(user)) return NULL;
  return LLVMGetBasicBlockParent(LLVMGetInstructionParent(user));
}

/* How many objects the optimized module `m` becomes, and which object
 * defines each of its functions (out_object[i] for the i-th function of the
 * module, in order; its declarations too, unused): the functions, largest
 * first, each into the object holding the fewest instructions (the first
 * such on a tie). Functions called from another object become external and
 * hidden in `m`. $TESSERA_LOWER_OBJECTS=N asks for N objects (tests: small
 * kernels cut into objects). Returns 1 (out_object unset) when the module
 * stays whole. */
static unsigned plan_objects(LLVMModuleRef m, unsigned **out_object, size_t *out_n) {
  *out_object = NULL;
  *out_n = 0;
  for (LLVMValueRef g = LLVMGetFirstGlobal(m); g; g = LLVMGetNextGlobal(g))
    if (!LLVMIsDeclaration(g) && !LLVMIsGlobalConstant(g)) return 1;
  size_t n = 0, defined = 0, total = 0;
  for (LLVMValueRef f = LLVMGetFirstFunction(m); f; f = LLVMGetNextFunction(f)) {
    size_t length = 0;
    LLVMGetValueName2(f, &length);
    if (length == 0) return 1;
    n++;
  }
  unsigned k = 0;
  size_t *size = tsr_calloc(n ? n : 1, sizeof *size);
  unsigned *object = tsr_calloc(n ? n : 1, sizeof *object);
  bool *placed = tsr_calloc(n ? n : 1, sizeof *placed);
  LLVMValueRef *fn = tsr_calloc(n ? n : 1, sizeof *fn);
  if (!size || !object || !placed || !fn) goto whole;
  size_t i = 0;
  for (LLVMValueRef f = LLVMGetFirstFunction(m); f; f = LLVMGetNextFunction(f), i++) {
    fn[i] = f;
    placed[i] = LLVMIsDeclaration(f);
    if (placed[i]) continue;
    size[i] = count_instructions(f);
    total += size[i];
    defined++;
  }
  k = (unsigned)(total / OBJECT_INSTS);
  const char *env = getenv("TESSERA_LOWER_OBJECTS");
  bool forced = env && *env;
  if (forced) k = (unsigned)strtoul(env, NULL, 10);
  if (k > MAX_OBJECTS) k = MAX_OBJECTS;
  if (k > defined) k = (unsigned)defined;
  if (k < 2 || (!forced && total < 2 * OBJECT_INSTS)) goto whole;
  size_t load[MAX_OBJECTS] = {0};
  for (;;) {
    size_t best = n;
    for (i = 0; i < n; i++)
      if (!placed[i] && (best == n || size[i] > size[best])) best = i;
    if (best == n) break;
    unsigned to = 0;
    for (unsigned o = 1; o < k; o++)
      if (load[o] < load[to]) to = o;
    object[best] = to;
    load[to] += size[best] + 1;
    placed[best] = true;
  }
  /* Objects left empty (a forced count larger than the functions allow)
   * are dropped. */
  unsigned map[MAX_OBJECTS], used = 0;
  for (unsigned o = 0; o < k; o++) map[o] = load[o] ? used++ : 0;
  for (i = 0; i < n; i++) object[i] = map[object[i]];
  if (used < 2) goto whole;
  /* Called from another object: external, hidden. Function order is kept
   * by the bitcode, so objects find their functions by index. */
  for (i = 0; i < n; i++) {
    if (LLVMIsDeclaration(fn[i])) continue;
    bool elsewhere = false;
    for (LLVMUseRef u = LLVMGetFirstUse(fn[i]); u && !elsewhere; u = LLVMGetNextUse(u)) {
      LLVMValueRef g = user_function(u);
      if (!g) {
        elsewhere = true; /* a constant's use: kept visible */
        break;
      }
      for (size_t j = 0; j < n; j++)
        if (fn[j] == g) {
          elsewhere = object[j] != object[i];
          break;
        }
    }
    if (elsewhere && LLVMGetLinkage(fn[i]) != LLVMExternalLinkage) {
      LLVMSetLinkage(fn[i], LLVMExternalLinkage);
      LLVMSetVisibility(fn[i], LLVMHiddenVisibility);
    }
  }
  tsr_free(size);
  tsr_free(placed);
  tsr_free(fn);
  *out_object = object;
  *out_n = n;
  return used;
whole:
  tsr_free(size);
  tsr_free(object);
  tsr_free(placed);
  tsr_free(fn);
  return 1;
}

/* Makes f a declaration (its body is another object's). */
static void drop_body(LLVMValueRef f) {
  for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(f); bb; bb = LLVMGetNextBasicBlock(bb))
    for (LLVMValueRef i = LLVMGetFirstInstruction(bb); i; i = LLVMGetNextInstruction(i))
      if (LLVMGetTypeKind(LLVMTypeOf(i)) != LLVMVoidTypeKind)
        LLVMReplaceAllUsesWith(i, LLVMGetPoison(LLVMTypeOf(i)));
  for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(f); bb; bb = LLVMGetNextBasicBlock(bb))
    for (LLVMValueRef i; (i = LLVMGetLastInstruction(bb));) LLVMInstructionEraseFromParent(i);
  for (LLVMBasicBlockRef bb; (bb = LLVMGetFirstBasicBlock(f));) LLVMDeleteBasicBlock(bb);
  LLVMSetLinkage(f, LLVMExternalLinkage);
  LLVMSetVisibility(f, LLVMHiddenVisibility);
}
typedef struct object_job {
  unsigned index;
  const char *bitcode; /* the optimized module, shared by the jobs */
  size_t bitcode_size;
  const unsigned *function_object; /* plan_objects */
  size_t num_functions;
  LLVMContextRef ctx;
  LLVMModuleRef module;
  const char *cpu, *source;
  int opt_level;
  tsr_strbuf_t diagnostics;
  uint32_t errors;
  tsr_status_t status;
  LLVMMemoryBufferRef object;
  double optimize_ms, codegen_ms;
} object_job_t;

static void on_job_diagnostic(LLVMDiagnosticInfoRef info, void *user) {
  if (LLVMGetDiagInfoSeverity(info) != LLVMDSError) return;
  object_job_t *j = user;
  char *text = LLVMGetDiagInfoDescription(info);
  if (j->diagnostics.size) tsr_strbuf_puts(&j->diagnostics, "\n");
  tsr_strbuf_printf(&j->diagnostics, "error: %s", text ? text : "");
  LLVMDisposeMessage(text);
  j->errors++;
}

/* One object's module: the bitcode read back, the other objects' bodies
 * dropped, what is then unused deleted (any thread: the context is the
 * job's own). */
static tsr_status_t object_module(object_job_t *j) {
  LLVMMemoryBufferRef buffer = LLVMCreateMemoryBufferWithMemoryRange(
      j->bitcode, j->bitcode_size, "tessera-object", 0);
  if (!buffer) return TSR_OOM();
  LLVMModuleRef m = NULL;
  bool failed = LLVMParseBitcodeInContext2(j->ctx, buffer, &m);
  LLVMDisposeMemoryBuffer(buffer);
  if (failed || !m)
    return TSR_STATUS(TSR_INTERNAL, "%s: reading back the optimized module's bitcode failed%s%s",
                      j->source, j->diagnostics.size ? ":\n" : "",
                      j->diagnostics.size ? j->diagnostics.data : "");
  j->module = m;
  size_t i = 0;
  for (LLVMValueRef f = LLVMGetFirstFunction(m); f; f = LLVMGetNextFunction(f), i++)
    if (i < j->num_functions && !LLVMIsDeclaration(f) && j->function_object[i] != j->index)
      drop_body(f);
  /* Declarations nothing calls any more, and unused local globals. */
  for (LLVMValueRef f = LLVMGetFirstFunction(m), next; f; f = next) {
    next = LLVMGetNextFunction(f);
    if (LLVMIsDeclaration(f) && !LLVMGetFirstUse(f)) LLVMDeleteFunction(f);
  }
  for (LLVMValueRef g = LLVMGetFirstGlobal(m), next; g; g = next) {
    next = LLVMGetNextGlobal(g);
    LLVMLinkage l = LLVMGetLinkage(g);
    if (!LLVMGetFirstUse(g) && (l == LLVMInternalLinkage || l == LLVMPrivateLinkage))
      LLVMDeleteGlobal(g);
  }
  return NULL;
}
/* Makes one object (any thread). */
static void run_object_job(object_job_t *j) {
  double t0 = now_ms();
  j->ctx = LLVMContextCreate();
  LLVMContextSetDiagnosticHandler(j->ctx, on_job_diagnostic, j);
  j->status = object_module(j);
  if (j->status) return;
  LLVMTargetMachineRef tm = NULL;
  j->status = create_target_machine(j->opt_level, j->cpu, &tm);
  if (j->status) return;
  double t1 = now_ms();
  j->optimize_ms = t1 - t0;
  char *error = NULL;
  LLVMMemoryBufferRef object = NULL;
  bool failed =
      LLVMTargetMachineEmitToMemoryBuffer(tm, j->module, LLVMObjectFile, &error, &object);
  if (failed || j->errors) {
    if (error && *error) {
      if (j->diagnostics.size) tsr_strbuf_puts(&j->diagnostics, "\n");
      tsr_strbuf_printf(&j->diagnostics, "error: %s", error);
    }
    j->status = TSR_STATUS(TSR_INTERNAL, "%s: LLVM could not compile the module to an object%s%s",
                           j->source, j->diagnostics.size ? ":\n" : "",
                           j->diagnostics.size ? j->diagnostics.data : "");
    if (object) LLVMDisposeMemoryBuffer(object);
  } else {
    j->object = object;
  }
  LLVMDisposeMessage(error);
  j->codegen_ms = now_ms() - t1;
  LLVMDisposeTargetMachine(tm);
}

typedef struct job_queue {
  object_job_t *jobs;
  unsigned n;
  atomic_uint next;
} job_queue_t;

/* A pool task: takes the next job until none is left. */
static void object_worker(void *arg, uint32_t index) {
  (void)index;
  job_queue_t *q = arg;
  for (unsigned i; (i = atomic_fetch_add(&q->next, 1)) < q->n;) run_object_job(&q->jobs[i]);
}

/* Runs the jobs on up to `threads` threads of the pool, this one included. */
static void run_object_jobs(object_job_t *jobs, unsigned n, unsigned threads) {
  job_queue_t q = {.jobs = jobs, .n = n};
  atomic_init(&q.next, 0);
  tsr_pool_run(threads < n ? threads : n, object_worker, &q);
}

static void free_object_jobs(object_job_t *jobs, unsigned k) {
  for (unsigned o = 0; o < k; o++) {
    object_job_t *j = &jobs[o];
    if (j->object) LLVMDisposeMemoryBuffer(j->object);
    if (j->module) LLVMDisposeModule(j->module);
    if (j->ctx) LLVMContextDispose(j->ctx);
    tsr_status_free(j->status);
    tsr_strbuf_deinitialize(&j->diagnostics);
  }
}

static tsr_status_t write_object(const char *path, LLVMMemoryBufferRef object) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  bool ok = fd >= 0 && tsr_write_all(fd, LLVMGetBufferStart(object), LLVMGetBufferSize(object));
  tsr_status_t status =
      ok ? NULL : TSR_STATUS(TSR_IO_ERROR, "cannot write %s: %s", path, strerror(errno));
  if (fd >= 0) close(fd);
  return status;
}

/* The module (in the LLVM dialect) -> LLVM IR with its packed entry point ->
 * optimized -> one object in memory (*out_object), or, for a long kernel,
 * several (jobs[0..*out_k), see above), each in a context of its own. */
static tsr_status_t compile_to_objects(session_t *s, const char *source, MlirModule module,
                                       int opt_level, LLVMMemoryBufferRef *out_object,
                                       object_job_t *jobs, unsigned *out_k) {
  *out_k = 1;
  LLVMTargetMachineRef tm = NULL;
  TSR_RETURN_IF_ERROR(create_target_machine(opt_level, s->cpu, &tm));
  LLVMContextRef ctx = LLVMContextCreate();
  LLVMContextSetDiagnosticHandler(ctx, on_llvm_diagnostic, s);
  tsr_status_t status = NULL;
  LLVMModuleRef m = mlirTranslateModuleToLLVMIR(mlirModuleGetOperation(module), ctx);
  if (!m) status = session_failure(s, source, "the translation to LLVM IR failed");
  if (!status) status = add_packed_entry(m, source);
  if (!status) {
    keep_one_body(m);
    LLVMSetTarget(m, host_triple);
    LLVMTargetDataRef layout = LLVMCreateTargetDataLayout(tm);
    LLVMSetModuleDataLayout(m, layout);
    LLVMDisposeTargetData(layout);
    phase_done(s, PHASE_TRANSLATE);
    status = optimize(m, tm, opt_level, source);
    phase_done(s, PHASE_OPTIMIZE);
  }
  unsigned *function_object = NULL;
  size_t num_functions = 0;
  unsigned k = status ? 1 : plan_objects(m, &function_object, &num_functions);
  if (!status && k > 1) {
    LLVMMemoryBufferRef bitcode = LLVMWriteBitcodeToMemoryBuffer(m);
    if (!bitcode) status = TSR_OOM();
    for (unsigned o = 0; o < k && !status; o++) {
      object_job_t *j = &jobs[o];
      j->index = o;
      j->bitcode = LLVMGetBufferStart(bitcode);
      j->bitcode_size = LLVMGetBufferSize(bitcode);
      j->function_object = function_object;
      j->num_functions = num_functions;
      j->cpu = s->cpu;
      j->source = source;
      j->opt_level = opt_level;
    }
    if (!status) {
      unsigned threads = compile_threads();
      s->threads = threads < k ? threads : k;
      s->objects = k;
      *out_k = k;
      run_object_jobs(jobs, k, threads);
      double opt = 0, gen = 0; /* reading back the bitcode, code generation */
      for (unsigned o = 0; o < k; o++) {
        opt += jobs[o].optimize_ms;
        gen += jobs[o].codegen_ms;
      }
      double wall = now_ms() - s->mark;
      s->phase_ms[PHASE_OPTIMIZE] += opt + gen > 0 ? wall * opt / (opt + gen) : 0;
      s->mark += opt + gen > 0 ? wall * opt / (opt + gen) : 0;
      for (unsigned o = 0; o < k && !status; o++)
        if (jobs[o].status) {
          status = jobs[o].status;
          jobs[o].status = NULL;
        }
    }
    if (bitcode) LLVMDisposeMemoryBuffer(bitcode);
    phase_done(s, PHASE_CODEGEN);
  } else if (!status) {
    char *error = NULL;
    LLVMMemoryBufferRef object = NULL;
    bool failed = LLVMTargetMachineEmitToMemoryBuffer(tm, m, LLVMObjectFile, &error, &object);
    if (failed || s->errors) {
      if (error && *error) {
        if (s->diagnostics.size) tsr_strbuf_puts(&s->diagnostics, "\n");
        tsr_strbuf_printf(&s->diagnostics, "error: %s", error);
      }
      status = session_failure(s, source, "LLVM could not compile the module to an object");
      if (object) LLVMDisposeMemoryBuffer(object);
    } else {
      *out_object = object;
    }
    LLVMDisposeMessage(error);
    phase_done(s, PHASE_CODEGEN);
  }
  tsr_free(function_object);
  if (m) LLVMDisposeModule(m);
  LLVMContextDispose(ctx);
  LLVMDisposeTargetMachine(tm);
  return status;
}

static tsr_status_t compile_module(session_t *s, const char *source, MlirModule module,
                                   int opt_level, void **out_bytes, size_t *out_size) {
  object_job_t jobs[MAX_OBJECTS];
  memset(jobs, 0, sizeof jobs);
  for (unsigned o = 0; o < MAX_OBJECTS; o++) tsr_strbuf_initialize(&jobs[o].diagnostics);
  LLVMMemoryBufferRef object = NULL;
  unsigned k = 1;
  tsr_status_t status = compile_to_objects(s, source, module, opt_level, &object, jobs, &k);
  workdir_t w;
  if (!status) status = workdir_create(&w);
  if (!status) {
    w.num_objects = k;
    for (unsigned o = 0; o < k && !status; o++)
      status = write_object(w.objects[o], k == 1 ? object : jobs[o].object);
    if (!status) status = link_shared(&w);
    if (!status) status = read_whole(w.shared, out_bytes, out_size);
    workdir_remove(&w);
  }
  if (object) LLVMDisposeMemoryBuffer(object);
  free_object_jobs(jobs, MAX_OBJECTS);
  phase_done(s, PHASE_LINK);
  return status;
}
static tsr_status_t check_opt_level(int opt_level) {
  if (opt_level < 0 || opt_level > 3)
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "optimization level %d: expected 0 to 3",
                      opt_level);
  return NULL;
}

/* `emit_ms`: how long generating the text took, for the timing line. */
static tsr_status_t compile_text(const char *text, size_t size, const char *source,
                                 int opt_level, const char *cpu, double emit_ms,
                                 void **out_bytes, size_t *out_size) {
  TSR_RETURN_IF_ERROR(check_opt_level(opt_level));
  session_t s;
  session_begin(&s);
  s.cpu = cpu;
  s.phase_ms[PHASE_EMIT] = emit_ms;
  MlirModule module;
  tsr_status_t status = parse_and_lower(&s, source, text, size, true, &module);
  if (!status) {
    status = compile_module(&s, source, module, opt_level, out_bytes, out_size);
    mlirModuleDestroy(module);
  }
  if (!status) report_timing(&s, source);
  session_end(&s);
  return status;
}

/* "@add.mlir": the name of a kernel's generated MLIR in diagnostics. */
static void source_name(const tsr_kernel_t *kernel, char *buf, size_t size) {
  snprintf(buf, size, "@%s.mlir", kernel->name ? kernel->name : "kernel");
}

static tsr_status_t emit_text(const tsr_kernel_t *kernel, uint32_t flags, tsr_strbuf_t *out) {
  tsr_status_t status = tsr_lower_emit_mlir(kernel, flags, out);
  if (!status && out->failed) status = TSR_OOM();
  return status;
}

/* ---- The API table ------------------------------------------------------------------ */

static tsr_status_t api_emit(const tsr_kernel_t *kernel, const char *stage, uint32_t flags,
                             char **out_text) {
  if (!kernel || !stage || !out_text)
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "tsr_lower emit: NULL argument");
  bool llvm = strcmp(stage, "llvm") == 0;
  if (!llvm && strcmp(stage, "mlir") != 0)
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "unknown stage '%s' (expected mlir or llvm)",
                      stage);
  tsr_strbuf_t text;
  tsr_strbuf_initialize(&text);
  tsr_status_t status = emit_text(kernel, flags, &text);
  if (!status && llvm) {
    char source[256];
    source_name(kernel, source, sizeof source);
    session_t s;
    session_begin(&s);
    MlirModule module;
    status = parse_and_lower(&s, source, text.data, text.size, true, &module);
    if (!status) {
      text.size = 0;
      mlirOperationPrint(mlirModuleGetOperation(module), append_string, &text);
      tsr_strbuf_puts(&text, "\n");
      if (text.failed) status = TSR_OOM();
      mlirModuleDestroy(module);
    }
    session_end(&s);
  }
  if (status) {
    tsr_strbuf_deinitialize(&text);
    return status;
  }
  *out_text = tsr_strbuf_take(&text);
  return *out_text ? NULL : TSR_OOM();
}

static tsr_status_t api_compile(const tsr_kernel_t *kernel, int opt_level, uint32_t flags,
                                const char *cpu, void **out_bytes, size_t *out_size) {
  if (!kernel || !out_bytes || !out_size)
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "tsr_lower compile: NULL argument");
  TSR_RETURN_IF_ERROR(check_opt_level(opt_level));
  tsr_strbuf_t text;
  tsr_strbuf_initialize(&text);
  double start = now_ms();
  tsr_status_t status = emit_text(kernel, flags, &text);
  double emit_ms = now_ms() - start;
  if (!status) {
    char source[256];
    source_name(kernel, source, sizeof source);
    status = compile_text(text.data, text.size, source, opt_level, cpu, emit_ms, out_bytes,
                          out_size);
  }
  tsr_strbuf_deinitialize(&text);
  return status;
}

static tsr_status_t api_compile_text(const char *text, size_t size, int opt_level,
                                     const char *cpu, void **out_bytes, size_t *out_size) {
  if (!text || !out_bytes || !out_size)
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "tsr_lower compile_text: NULL argument");
  return compile_text(text, size, "<mlir text>", opt_level, cpu, 0, out_bytes, out_size);
}

static void api_free_text(void *p) { tsr_free(p); }

static void api_free_status(tsr_status_t status) { tsr_status_free(status); }

static tsr_lower_api_t api;
static pthread_once_t api_once = PTHREAD_ONCE_INIT;

static void fill_api(void) {
  api = (tsr_lower_api_t){
      .abi_version = TSR_LOWER_ABI_VERSION,
      .llvm_version = LLVM_VERSION_STRING,
      .pipeline = TSR_LOWER_CPU_PIPELINE,
      .emit = api_emit,
      .compile = api_compile,
      .free_text = api_free_text,
      .free_status = api_free_status,
      .ir_layout = tsr_lower_ir_layout(),
      .compile_text = api_compile_text,
  };
}

/* The library's one exported symbol (lower/exports.map). */
__attribute__((visibility("default"))) const tsr_lower_api_t *tsr_lower_get_api(void);

const tsr_lower_api_t *tsr_lower_get_api(void) {
  pthread_once(&api_once, fill_api);
  return &api;
}
