/* The host and the compiled-code target (runtime/target.h): where tessera's
 * code and the lowering library are (and which library a context chose),
 * the identity of the host CPU and of the LLVM build (key components of
 * compiled kernels), the lowering ABI a loaded library must speak, and the
 * defaults of compile options. Used by the keys (runtime/key.c), the
 * compiled backend (runtime/compiled.c) and contexts (runtime/context.c);
 * calls none of them. */
#define _GNU_SOURCE /* dladdr */
#include <dlfcn.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "base/module.h"
#include "lower/lower_api.h"
#include "lower/lower_config.h"
#include "runtime/runtime_internal.h"
#include "runtime/target.h"

void tsr_compile_options_initialize(tsr_compile_options_t *options) {
  memset(options, 0, sizeof *options);
  /* The emitter writes vector code already: on the tree's kernels O0 to O3
   * ran within noise of each other (O3: 10% faster on a 1024^3 matmul) and
   * O2 compiled in 50-200 ms (docs/lowering.md, "Figures"). */
  options->opt_level = 2;
}

void tsr_compile_options_of(const tsr_executable_options_t *o, tsr_compile_options_t *out) {
  tsr_compile_options_initialize(out);
  out->opt_level = o->opt_level;
  out->out_blocks_copied_in = o->run.out_blocks_copied_in;
  if (o->run.oob_reads_uninit) out->bounds |= TSR_LOWER_OOB_READS_UNINIT;
  if (o->run.padded) {
    out->bounds |= TSR_LOWER_PADDED;
    if (tsr_chip_doubles_tile_rows(o->run.chip)) out->bounds |= TSR_LOWER_DOUBLE_ROWS;
  }
}

/* ---- Which lowering library ------------------------------------------------------ */

/* The library is loaded once per process (LLVM cannot be unloaded), so its
 * path is process-wide: the first context decides, or the environment when
 * the library is looked for before any context exists. Kept here, beside
 * the code that finds the library, so that contexts (runtime/context.c)
 * call down into this file and this file calls no other runtime file. */
static struct {
  pthread_mutex_t mutex;
  bool chosen;
  char *path; /* NULL: the default */
} lower_choice = {.mutex = PTHREAD_MUTEX_INITIALIZER};

tsr_status_t tsr_target_choose_lower_library(const char *path) {
  tsr_status_t s = NULL;
  pthread_mutex_lock(&lower_choice.mutex);
  if (!lower_choice.chosen) {
    lower_choice.chosen = true;
    lower_choice.path = path && *path ? tsr_strndup(path, strlen(path)) : NULL;
    if (path && *path && !lower_choice.path) {
      lower_choice.chosen = false;
      s = TSR_OOM();
    }
  } else if (path && *path && (!lower_choice.path || strcmp(path, lower_choice.path) != 0)) {
    s = TSR_STATUS(TSR_INVALID_ARGUMENT,
                   "the context asks for the lowering library %s, but this process "
                   "already chose %s (it is loaded once per process)",
                   path, lower_choice.path ? lower_choice.path : "the default one");
  }
  pthread_mutex_unlock(&lower_choice.mutex);
  return s;
}

#if TSR_HAVE_LOWER
/* ---- File identities ------------------------------------------------------------ */

/* "dev:ino:size:mtime" of `path` (following links), or "missing". */
static void append_file_identity(tsr_strbuf_t *sb, const char *path) {
  struct stat st;
  if (stat(path, &st) != 0) {
    tsr_strbuf_puts(sb, "missing");
    return;
  }
  tsr_strbuf_printf(sb, "%" PRIx64 ":%" PRIx64 ":%" PRId64 ":%" PRId64 ".%09ld",
                    (uint64_t)st.st_dev, (uint64_t)st.st_ino, (int64_t)st.st_size,
                    (int64_t)st.st_mtim.tv_sec, (long)st.st_mtim.tv_nsec);
}

/* ---- Where the lowering library is ---------------------------------------------- */

/* The lowering library to load instead of the default: the first context's
 * choice, else $TESSERA_LOWER_LIBRARY when no context was made before the
 * library was looked for. NULL for the default. */
static const char *lower_library_setting(void) {
  pthread_mutex_lock(&lower_choice.mutex);
  if (!lower_choice.chosen) {
    const char *env = getenv("TESSERA_LOWER_LIBRARY");
    lower_choice.chosen = true;
    lower_choice.path = env && *env ? tsr_strndup(env, strlen(env)) : NULL;
  }
  const char *path = lower_choice.path;
  pthread_mutex_unlock(&lower_choice.mutex);
  return path;
}

static char lower_path[4096];
static pthread_once_t lower_path_once = PTHREAD_ONCE_INIT;

/* lower_library_setting (a context's choice or $TESSERA_LOWER_LIBRARY);
 * else the build tree's library when the file holding this code (the
 * tessera executable or libtessera) lives in the build tree; else the
 * installed one. */
static void find_lower_path(void) {
  tsr_module_path(lower_library_setting(), TSR_BUILD_ROOT, TSR_LOWER_BUILD_PATH,
                  TSR_LOWER_INSTALL_PATH, lower_path, sizeof lower_path);
}

const char *tsr_target_lower_library_path(void) {
  tsr_process_once(&lower_path_once, find_lower_path);
  return lower_path;
}
#endif /* TSR_HAVE_LOWER */

/* ---- Key components ----------------------------------------------------------------- */

static char *llvm_component, *cpu_component;
static pthread_once_t components_once = PTHREAD_ONCE_INIT;

#if defined(__x86_64__) || defined(__i386__)
/* LLVM's host detection (sys::getHostCPUName, getHostCPUFeatures) reads the
 * vendor, family/model/stepping and the feature leaves below, and XCR0 for
 * what the OS saves (AVX, AVX-512, AMX state). The same bits give the same
 * CPU name and features, hence the same code. Leaf 1's EBX is left out: it
 * holds the APIC id of the core the thread runs on. */
static void append_cpu(tsr_strbuf_t *sb) {
  unsigned max = 0, a = 0, b = 0, c = 0, d = 0;
  __cpuid(0, max, b, c, d);
  char vendor[13];
  memcpy(vendor, &b, 4);
  memcpy(vendor + 4, &d, 4);
  memcpy(vendor + 8, &c, 4);
  vendor[12] = 0;
  tsr_strbuf_printf(sb, "x86 %s", vendor);
  __cpuid(1, a, b, c, d);
  tsr_strbuf_printf(sb, " 1:%08x:%08x:%08x", a, c, d);
  bool osxsave = (c >> 27) & 1;
  if (max >= 7) {
    unsigned subleaves;
    __cpuid_count(7, 0, subleaves, b, c, d);
    tsr_strbuf_printf(sb, " 7.0:%08x:%08x:%08x", b, c, d);
    if (subleaves >= 1) {
      __cpuid_count(7, 1, a, b, c, d);
      tsr_strbuf_printf(sb, " 7.1:%08x:%08x:%08x", a, b, d);
    }
  }
  if (max >= 0xd) {
    __cpuid_count(0xd, 1, a, b, c, d);
    tsr_strbuf_printf(sb, " d.1:%08x", a);
  }
  if (max >= 0x14) {
    __cpuid_count(0x14, 0, a, b, c, d);
    tsr_strbuf_printf(sb, " 14:%08x", b);
  }
  if (max >= 0x19) {
    __cpuid(0x19, a, b, c, d);
    tsr_strbuf_printf(sb, " 19:%08x", b);
  }
  if (max >= 0x24) {
    __cpuid_count(0x24, 0, a, b, c, d);
    tsr_strbuf_printf(sb, " 24:%08x", b);
  }
  unsigned ext = 0;
  __cpuid(0x80000000, ext, b, c, d);
  if (ext >= 0x80000001) {
    __cpuid(0x80000001, a, b, c, d);
    tsr_strbuf_printf(sb, " e1:%08x:%08x", c, d);
  }
  if (ext >= 0x80000008) {
    __cpuid(0x80000008, a, b, c, d);
    tsr_strbuf_printf(sb, " e8:%08x", b);
  }
  if (osxsave) {
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    tsr_strbuf_printf(sb, " xcr0:%08x%08x", hi, lo);
  }
}
#else
/* Elsewhere: the machine, the kernel's hardware capability bits and (on
 * Arm) the main ID register of cpu0. */
static void append_cpu(tsr_strbuf_t *sb) {
  struct utsname u;
  tsr_strbuf_puts(sb, uname(&u) == 0 ? u.machine : "unknown");
  tsr_strbuf_printf(sb, " hwcap:%lx:%lx", getauxval(AT_HWCAP), getauxval(AT_HWCAP2));
  FILE *f = fopen("/sys/devices/system/cpu/cpu0/regs/identification/midr_el1", "r");
  if (f) {
    char midr[64] = "";
    if (fgets(midr, sizeof midr, f)) {
      midr[strcspn(midr, "\n")] = 0;
      tsr_strbuf_printf(sb, " midr:%s", midr);
    }
    fclose(f);
  }
}
#endif

static void make_components(void) {
  tsr_strbuf_t sb;
  tsr_strbuf_initialize(&sb);
  append_cpu(&sb);
  cpu_component = sb.failed ? NULL : tsr_strbuf_take(&sb);
  tsr_strbuf_deinitialize(&sb);
#if TSR_HAVE_LOWER
  tsr_strbuf_initialize(&sb);
  tsr_strbuf_printf(&sb, "LLVM %s", TSR_LLVM_VERSION);
  const char *libs = TSR_LLVM_LIBRARIES;
  while (*libs) {
    size_t n = strcspn(libs, ":");
    char path[4096];
    snprintf(path, sizeof path, "%.*s", (int)n, libs);
    const char *base = strrchr(path, '/');
    tsr_strbuf_printf(&sb, " %s ", base ? base + 1 : path);
    append_file_identity(&sb, path);
    libs += n + (libs[n] == ':');
  }
  tsr_strbuf_puts(&sb, " lower ");
  append_file_identity(&sb, tsr_target_lower_library_path());
  tsr_strbuf_puts(&sb, " pipeline " TSR_LOWER_CPU_PIPELINE);
  llvm_component = sb.failed ? NULL : tsr_strbuf_take(&sb);
  tsr_strbuf_deinitialize(&sb);
#endif
}

const char *tsr_target_llvm_component(void) {
  tsr_process_once(&components_once, make_components);
  return llvm_component;
}

/* The code target. Generated code is only as host-independent as the
 * instructions it may use: a result that differs between two CPUs cannot be
 * tested on one CI machine. So on x86-64 the cpu backend compiles for one
 * of two fixed feature sets, never for the host's own list: x86-64-v3 (AVX2,
 * FMA, F16C, BMI1/2, LZCNT, MOVBE) where the CPU has all of it, else the
 * x86-64 baseline (SSE2). The suite runs its kernels at both levels on one
 * machine and compares them bit for bit (tests/lower/test_cpu_targets.sh);
 * AVX-512 is not used, as no CI machine here can run it (docs/lowering.md,
 * "Target features"). $TESSERA_CPU_TARGET chooses a level by name, or
 * "native": every feature of the host, keyed by the host's whole identity,
 * results not covered by that test. */
static const char *const x86_levels[] = {"x86-64", "x86-64-v2", "x86-64-v3"};

/* Whether this CPU (and its OS, for the AVX state) runs code of an x86-64
 * level: the feature bits of the psABI's level definitions, read with
 * cpuid (compilers' __builtin_cpu_supports knows the level names only in
 * newer versions). */
static bool x86_level_supported(const char *level) {
#if defined(__x86_64__)
  if (strcmp(level, "x86-64") == 0) return true;
  unsigned max = 0, a, b, c1 = 0, d, c7 = 0, b7 = 0, ce = 0;
  __cpuid(0, max, b, c1, d);
  __cpuid(1, a, b, c1, d);
  if (max >= 7) __cpuid_count(7, 0, a, b7, c7, d);
  unsigned ext = 0;
  __cpuid(0x80000000, ext, b, c7, d);
  if (ext >= 0x80000001) __cpuid(0x80000001, a, b, ce, d);
#define BIT(r, n) (((r) >> (n)) & 1u)
  bool v2 = BIT(c1, 0) && BIT(c1, 9) && BIT(c1, 13) && BIT(c1, 19) && BIT(c1, 20) &&
            BIT(c1, 23) && BIT(ce, 0); /* SSE3 SSSE3 CX16 SSE4.1 SSE4.2 POPCNT LAHF */
  if (strcmp(level, "x86-64-v2") == 0) return v2;
  bool os_avx = false;
  if (BIT(c1, 27)) { /* OSXSAVE: XCR0 says whether the OS saves the SSE and AVX state */
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    os_avx = (lo & 6u) == 6u;
  }
  bool v3 = v2 && os_avx && BIT(c1, 28) && BIT(c1, 12) && BIT(c1, 29) && BIT(c1, 22) &&
            BIT(b7, 5) && BIT(b7, 3) && BIT(b7, 8) && BIT(ce, 5);
  /* AVX FMA F16C MOVBE AVX2 BMI1 BMI2 LZCNT */
#undef BIT
  return strcmp(level, "x86-64-v3") == 0 && v3;
#else
  (void)level;
  return false;
#endif
}

tsr_status_t tsr_target_code(tsr_target_code_t *out) {
  const char *setting = getenv("TESSERA_CPU_TARGET");
  if (!setting || !*setting || strcmp(setting, "auto") == 0) {
#if defined(__x86_64__)
    out->cpu = x86_level_supported("x86-64-v3") ? "x86-64-v3" : "x86-64";
    out->component = out->cpu;
#else
    out->cpu = NULL;
    out->component = tsr_target_cpu_component();
#endif
    return NULL;
  }
  if (strcmp(setting, "native") == 0) {
    out->cpu = NULL;
    tsr_process_once(&components_once, make_components);
    out->component = cpu_component ? cpu_component : "unknown";
    return NULL;
  }
  for (size_t i = 0; i < sizeof x86_levels / sizeof x86_levels[0]; i++) {
    if (strcmp(setting, x86_levels[i]) != 0) continue;
    if (!x86_level_supported(setting))
      return TSR_STATUS(TSR_INVALID_ARGUMENT,
                        "TESSERA_CPU_TARGET=%s: this CPU cannot run code for %s", setting,
                        setting);
    out->cpu = out->component = x86_levels[i];
    return NULL;
  }
  return TSR_STATUS(TSR_INVALID_ARGUMENT,
                    "TESSERA_CPU_TARGET=%s: expected auto, native, x86-64, x86-64-v2 or "
                    "x86-64-v3",
                    setting);
}

const char *tsr_target_cpu_component(void) {
  tsr_process_once(&components_once, make_components);
  return cpu_component ? cpu_component : "unknown";
}

/* ---- The lowering ABI ----------------------------------------------------------------- */

#if TSR_HAVE_LOWER
bool tsr_target_lower_abi_matches(const tsr_lower_api_t *api, const char *path, char *why,
                                  size_t why_size) {
  if (api->abi_version == TSR_LOWER_ABI_VERSION && api->ir_layout == tsr_lower_ir_layout())
    return true;
  snprintf(why, why_size,
           "%s was built from another version of tessera (lowering ABI %u, IR "
           "layout %016" PRIx64 "; this tessera: ABI %d, IR layout %016" PRIx64
           "): rebuild it or set TESSERA_LOWER_LIBRARY",
           path, api->abi_version, api->ir_layout, TSR_LOWER_ABI_VERSION,
           tsr_lower_ir_layout());
  return false;
}
#endif /* TSR_HAVE_LOWER */
