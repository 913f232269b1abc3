/* The cpu backend in libtessera (docs/lowering.md): compiled kernels through
 * the process's caches, without a line of MLIR here.
 *
 *   memory  a tsr_memcache_t (the process's, or the bound context's) maps a
 *           key to a loaded kernel
 *           (dlopen handle + entry point + operand types);
 *   disk    the disk cache maps the key to the bytes of the kernel's shared
 *           object, authenticated with the cache's key (docs/cache.md,
 *           "Trust model") as they are read into memory; exactly those
 *           bytes go into a sealed memfd that dlopen loads: a warm process
 *           never loads LLVM, and nothing on disk is loaded unverified;
 *   miss    the lowering library (libtessera-lower.so, dlopen'd once, on
 *           first need) compiles the kernel; the object is loaded and put
 *           on disk.
 *
 * Keys (runtime/key.c) add to the kernel's canonical bytes the compile
 * options, the producer, an "llvm" component (LLVM's version, the identity
 * of libLLVM, libMLIR and the lowering library, the pass pipeline) and a
 * "cpu" component (the host CPU as LLVM's host detection sees it), all
 * computed without loading the library by runtime/target.c, which also
 * says where the library is and which lowering ABI it must speak. */
#define _GNU_SOURCE /* memfd_create, mkostemp */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cache/memcache.h"
#include "ir/ir.h"
#include "lower/lower_api.h"
#include "lower/lower_config.h"
#include "runtime/runtime_internal.h"
#include "runtime/target.h"

/* ---- The lowering library -------------------------------------------------------------- */

static struct {
  pthread_once_t once;
  const tsr_lower_api_t *api; /* NULL if it could not be loaded */
  char error[8192 + 512];     /* why not */
  atomic_bool loaded;
} lower = {.once = PTHREAD_ONCE_INIT};

static void load_lower(void) {
#if TSR_HAVE_LOWER
  const char *path = tsr_target_lower_library_path();
  /* RTLD_LOCAL: MLIR's and LLVM's symbols stay out of the process's global
   * scope (and out of the compiled kernels' symbol resolution). RTLD_LAZY:
   * function relocations are bound when first called, not all at load
   * (10-15 ms with libMLIR.so; little since MLIR and LLVM are linked into
   * the library; docs/lowering.md, "The dlopen boundary"). The time it
   * takes is printed with the compile's phases under TESSERA_LOWER_TIMING. */
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  void *handle = dlopen(path, RTLD_LAZY | RTLD_LOCAL);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  const char *timing = getenv("TESSERA_LOWER_TIMING");
  if (timing && *timing && strcmp(timing, "0") != 0)
    fprintf(stderr, "tessera: load %s: %.2f ms\n", path,
            (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-6);
  if (!handle) {
    snprintf(lower.error, sizeof lower.error,
             "cannot load the lowering library (set TESSERA_LOWER_LIBRARY to "
             "another): %s",
             dlerror());
    return;
  }
  atomic_store(&lower.loaded, true);
  tsr_lower_get_api_fn get = (tsr_lower_get_api_fn)dlsym(handle, TSR_LOWER_ENTRY_SYMBOL);
  const tsr_lower_api_t *api = get ? get() : NULL;
  if (!api) {
    snprintf(lower.error, sizeof lower.error,
             "%s is not a tessera lowering library (no %s)", path, TSR_LOWER_ENTRY_SYMBOL);
  } else if (!tsr_target_lower_abi_matches(api, path, lower.error, sizeof lower.error)) {
    /* lower.error says why */
  } else {
    lower.api = api;
  }
  /* Never closed: LLVM does not support being unloaded. */
#else
  snprintf(lower.error, sizeof lower.error,
           "no cpu backend in this build: tessera was built without MLIR/LLVM 22 "
           "(meson -Dmlir=disabled, or LLVM 22 was not found). To get it, install LLVM "
           "and MLIR 22 (Debian: llvm-22-dev libmlir-22-dev) and rebuild, or reinstall "
           "the Python package with pip install . -Csetup-args=-Dmlir=enabled "
           "(docs/install.md); the interpreter (the interp backend) needs neither");
#endif
}

tsr_status_t tsr_runtime_lower_api(const tsr_lower_api_t **out_api) {
  tsr_process_once(&lower.once, load_lower);
  if (!lower.api) return TSR_STATUS(TSR_UNIMPLEMENTED, "%s", lower.error);
  *out_api = lower.api;
  return NULL;
}

/* A status from the library, as this library's own, records included: the
 * library frees its original (it may be its static out-of-memory status). */
static tsr_status_t adopt_status(const tsr_lower_api_t *api, tsr_status_t status) {
  if (!status) return NULL;
  tsr_status_t copy = tsr_status_copy(status);
  api->free_status(status);
  return copy;
}

/* ---- Loading shared objects -------------------------------------------------------------- */

struct tsr_runtime_object {
  void *handle;
  void (*entry)(void **args);
  int fd; /* the memfd the object was loaded from, or -1 */
};

/* The object goes into a memfd opened with dlopen("/proc/self/fd/N"),
 * sealed first so that nothing (not even another process of the user,
 * through /proc) can change the bytes between writing and loading. The
 * memfd stays open while the object is loaded: glibc recognises an object
 * already loaded by its path, and a closed descriptor's number (hence the
 * path) would be reused by the next kernel. Without memfd or /proc, a
 * private temporary file, unlinked once loaded. */
tsr_status_t tsr_runtime_object_load(const void *bytes, size_t size,
                                     tsr_runtime_object_t **out_object) {
  tsr_runtime_object_t *o = tsr_calloc(1, sizeof *o);
  if (!o) return TSR_OOM();
  o->fd = -1;
  char path[4200];
  bool temporary = false;
  int fd = memfd_create("tessera-kernel", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd >= 0) {
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    if (access(path, F_OK) != 0) {
      close(fd);
      fd = -1;
    }
  }
  if (fd < 0) {
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !*tmp) tmp = "/tmp";
    snprintf(path, sizeof path, "%s/tessera-kernel-XXXXXX", tmp);
    fd = mkostemp(path, O_CLOEXEC);
    if (fd < 0) {
      tsr_free(o);
      return TSR_STATUS(TSR_IO_ERROR, "cannot create a file to load a compiled kernel "
                                      "from (memfd_create and %s failed): %s",
                        path, strerror(errno));
    }
    temporary = true;
  }
  tsr_status_t status = NULL;
  if (!tsr_write_all(fd, bytes, size)) {
    status = TSR_STATUS(TSR_IO_ERROR, "cannot write a compiled kernel to %s: %s", path,
                        strerror(errno));
  } else if (!temporary &&
             fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0) {
    status = TSR_STATUS(TSR_IO_ERROR, "cannot seal the memfd of a compiled kernel: %s",
                        strerror(errno));
  } else {
    o->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!o->handle) {
      status = TSR_STATUS(TSR_INTERNAL, "the compiled kernel does not load: %s", dlerror());
    } else {
      o->entry = (void (*)(void **))dlsym(o->handle, TSR_LOWER_KERNEL_SYMBOL);
      if (!o->entry)
        status = TSR_STATUS(TSR_INTERNAL, "the compiled kernel has no %s",
                            TSR_LOWER_KERNEL_SYMBOL);
    }
  }
  if (temporary) {
    unlink(path);
    close(fd);
  } else {
    o->fd = fd;
  }
  if (status) {
    tsr_runtime_object_unload(o);
    return status;
  }
  *out_object = o;
  return NULL;
}

void tsr_runtime_object_unload(tsr_runtime_object_t *object) {
  if (!object) return;
  if (object->handle) dlclose(object->handle);
  if (object->fd >= 0) close(object->fd);
  tsr_free(object);
}

void (*tsr_runtime_object_entry(const tsr_runtime_object_t *object))(void **) {
  return object->entry;
}

/* ---- The caches ------------------------------------------------------------------------------ */

/* What the memory cache holds for a key: the loaded object and the operand
 * types its entry point expects (the same for every kernel with the key:
 * they are in the canonical bytes). */
typedef struct operand_type {
  tsr_dtype_t dtype;
  uint32_t rank;
  int64_t dims[TSR_MAX_RANK];
} operand_type_t;

typedef struct loaded {
  tsr_runtime_object_t *object;
  uint32_t num_operands;
  operand_type_t operands[];
} loaded_t;

static struct {
  pthread_once_t once;
  tsr_memcache_t *memory; /* NULL if it could not be created */
  _Atomic(uint64_t) compiles, load_failures;
} g = {.once = PTHREAD_ONCE_INIT};

tsr_status_t tsr_runtime_kernels_create(tsr_memcache_t **out_cache) {
  tsr_memcache_options_t mo;
  tsr_memcache_options_initialize(&mo);
  /* Each loaded kernel holds a descriptor (its memfd): stay well below the
   * usual limit of 1024 open files. */
  mo.max_entries = 256;
  return tsr_memcache_create(&mo, out_cache);
}

static void initialize(void) {
  tsr_status_t s = tsr_runtime_kernels_create(&g.memory);
  if (s) {
    g.memory = NULL;
    tsr_status_free(s);
  }
}

/* The cache of the context bound to this thread, else the process's. */
static tsr_memcache_t *kernels(void) {
  tsr_runtime_binding_t *b = tsr_runtime_bound();
  if (b && b->kernels) return b->kernels;
  tsr_process_once(&g.once, initialize);
  return g.memory;
}

/* Counts a compile (or a load failure) for the process and for the context
 * bound to the thread. */
static void count_compile(bool load_failure) {
  tsr_runtime_binding_t *b = tsr_runtime_bound();
  atomic_fetch_add(load_failure ? &g.load_failures : &g.compiles, 1);
  if (b) atomic_fetch_add(load_failure ? &b->load_failures : &b->compiles, 1);
}

static void free_loaded(void *value) {
  loaded_t *l = value;
  if (!l) return;
  tsr_runtime_object_unload(l->object);
  tsr_free(l);
}

typedef struct build {
  const tsr_kernel_t *kernel;
  int opt_level;
  uint32_t flags; /* TSR_LOWER_* (lower/lower_api.h) */
  const tsr_cache_key_t *key;
} build_t;

/* The operand types of `kernel`'s entry point: its non-scratch operands. */
static loaded_t *loaded_create(const tsr_kernel_t *kernel) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < kernel->num_decls; i++)
    if (kernel->decls[i].role != TSR_ROLE_SCRATCH) n++;
  loaded_t *l = tsr_calloc(1, sizeof *l + (size_t)n * sizeof l->operands[0]);
  if (!l) return NULL;
  for (uint32_t i = 0; i < kernel->num_decls; i++) {
    const tsr_decl_t *d = &kernel->decls[i];
    if (d->role == TSR_ROLE_SCRATCH) continue;
    operand_type_t *t = &l->operands[l->num_operands++];
    t->dtype = (tsr_dtype_t)d->array.dtype;
    t->rank = d->array.kind == TSR_TYPE_SCALAR ? 0 : d->array.rank;
    memcpy(t->dims, d->array.dims, sizeof t->dims);
  }
  return l;
}

/* Compiles with the lowering library and loads the result; *out_bytes
 * (freed with api->free_text) is what goes to the disk cache. */
static tsr_status_t compile_and_load(const build_t *b, tsr_runtime_object_t **out_object,
                                     const tsr_lower_api_t **out_api, void **out_bytes,
                                     size_t *out_size) {
  TSR_RETURN_IF_ERROR(tsr_ir_verify_kernel(b->kernel));
  const tsr_lower_api_t *api = NULL;
  TSR_RETURN_IF_ERROR(tsr_runtime_lower_api(&api));
  void *bytes = NULL;
  size_t size = 0;
  count_compile(false);
  tsr_target_code_t code;
  TSR_RETURN_IF_ERROR(tsr_target_code(&code));
  TSR_RETURN_IF_ERROR(
      adopt_status(api, api->compile(b->kernel, b->opt_level, b->flags, code.cpu, &bytes, &size)));
  tsr_status_t s = tsr_runtime_object_load(bytes, size, out_object);
  if (s) {
    api->free_text(bytes);
    return s;
  }
  *out_api = api;
  *out_bytes = bytes;
  *out_size = size;
  return NULL;
}

static tsr_status_t build_loaded(void *ctx, void **out_value, size_t *out_bytes) {
  build_t *b = ctx;
  loaded_t *l = loaded_create(b->kernel);
  if (!l) return TSR_OOM();
  size_t object_size = 0;
  tsr_disk_cache_t *d = tsr_runtime_disk();
  if (d) {
    void *payload = NULL;
    size_t size = 0;
    tsr_status_t s = tsr_disk_cache_get(d, b->key, &payload, &size);
    if (!s) {
      s = tsr_runtime_object_load(payload, size, &l->object);
      tsr_disk_cache_free(payload);
      object_size = size;
      if (s) {
        /* A well-formed entry whose object does not load (say, a libc
         * without a symbol it needs): compile again, replacing it. */
        count_compile(true);
        tsr_status_free(s);
        l->object = NULL;
      }
    } else if (tsr_status_code(s) == TSR_NOT_FOUND) {
      tsr_status_free(s);
    } else {
      tsr_runtime_disk_failed(s);
      d = NULL;
    }
  }
  if (!l->object) {
    const tsr_lower_api_t *api = NULL;
    void *bytes = NULL;
    tsr_status_t s = compile_and_load(b, &l->object, &api, &bytes, &object_size);
    if (s) {
      free_loaded(l);
      return s;
    }
    if (d) {
      s = tsr_disk_cache_put(d, b->key, bytes, object_size);
      if (s) tsr_runtime_disk_failed(s);
    }
    api->free_text(bytes);
  }
  *out_value = l;
  *out_bytes = sizeof *l + l->num_operands * sizeof l->operands[0] + object_size;
  return NULL;
}

static void release_entry(void *entry) { tsr_memcache_entry_release(entry); }

/* ---- Compiled kernels ----------------------------------------------------------------------- */

struct tsr_compiled_kernel {
  tsr_memcache_entry_t *entry; /* holds `loaded` */
  const loaded_t *loaded;
  /* The caller's names, locations, print formats... for messages (the
   * cached object may have been compiled for a kernel with other names). */
  tsr_cpu_info_t *info;
};

tsr_status_t tsr_runtime_compile(const tsr_ir_kernel_t *kernel,
                                 const tsr_compile_options_t *options,
                                 tsr_compiled_kernel_t **out_kernel) {
  if (!kernel || !out_kernel)
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "tsr_runtime_compile: NULL argument");
  tsr_compile_options_t o;
  if (options) {
    o = *options;
  } else {
    tsr_compile_options_initialize(&o);
  }
  if (o.opt_level < 0 || o.opt_level > 3)
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "opt_level %d: expected 0 to 3", o.opt_level);
  tsr_runtime_key_t *key = NULL;
  TSR_RETURN_IF_ERROR(tsr_runtime_compiled_key_create(kernel, &o, &key));
  tsr_memcache_t *memory = kernels();
  if (!memory) {
    tsr_runtime_key_destroy(key);
    return TSR_OOM();
  }
  build_t b = {kernel, o.opt_level,
               o.bounds | (o.out_blocks_copied_in ? (uint32_t)TSR_LOWER_OUT_COPY_IN : 0u),
               tsr_runtime_key_get(key)};
  tsr_memcache_entry_t *entry = NULL;
  tsr_status_t s = tsr_memcache_get_or_build(memory, b.key, build_loaded, &b,
                                             free_loaded, &entry, NULL);
  tsr_runtime_key_destroy(key);
  if (s) return s;
  tsr_compiled_kernel_t *ck = tsr_calloc(1, sizeof *ck);
  if (!ck) {
    tsr_memcache_entry_release(entry);
    return TSR_OOM();
  }
  ck->entry = entry;
  ck->loaded = tsr_memcache_entry_value(entry);
  s = tsr_cpu_info_create(kernel, &ck->info);
  if (s) {
    tsr_compiled_kernel_destroy(ck);
    return s;
  }
  tsr_cpu_info_set_out_copy_in(ck->info, o.out_blocks_copied_in);
  *out_kernel = ck;
  return NULL;
}

void tsr_compiled_kernel_destroy(tsr_compiled_kernel_t *kernel) {
  if (!kernel) return;
  release_entry(kernel->entry);
  tsr_cpu_info_destroy(kernel->info);
  tsr_free(kernel);
}

/* "f32[1024, 512]" */
static void format_type(char *buf, size_t size, tsr_dtype_t dtype, uint32_t rank,
                        const int64_t *dims) {
  int n = snprintf(buf, size, "%s", tsr_dtype_name(dtype));
  for (uint32_t i = 0; i < rank && n > 0 && (size_t)n < size; i++)
    n += snprintf(buf + n, size - (size_t)n, "%s%" PRId64 "%s", i ? ", " : "[", dims[i],
                  i + 1 == rank ? "]" : "");
}

/* A strided memref descriptor (lower/lower_api.h): allocated and aligned
 * pointers, offset, sizes[rank], strides[rank]. */
typedef struct descriptor {
  void *allocated, *aligned;
  int64_t offset;
  int64_t sizes_and_strides[2 * (TSR_MAX_RANK + 1)];
} descriptor_t;

tsr_status_t tsr_compiled_kernel_run(const tsr_compiled_kernel_t *kernel,
                                     tsr_array_t *const *operands, size_t num_operands,
                                     const tsr_interp_options_t *options) {
  return tsr_compiled_kernel_run_with(kernel, operands, num_operands, options, NULL, NULL);
}

tsr_status_t tsr_compiled_kernel_run_with(const tsr_compiled_kernel_t *kernel,
                                          tsr_array_t *const *operands, size_t num_operands,
                                          const tsr_interp_options_t *options,
                                          FILE *print_stream,
                                          struct tsr_diag_sink *out_diag) {
  if (!kernel) return TSR_STATUS(TSR_INVALID_ARGUMENT, "tsr_compiled_kernel_run: NULL kernel");
  const loaded_t *l = kernel->loaded;
  const uint32_t devices = options && options->devices ? options->devices : 1;
  const uint32_t cores = options && options->cores ? options->cores : 1;
  if ((uint64_t)devices * cores > TSR_INTERP_MAX_CORES)
    return TSR_STATUS(TSR_INVALID_ARGUMENT,
                      "at most %d simulated cores (devices x cores) per run", TSR_INTERP_MAX_CORES);
  if (num_operands != l->num_operands || (num_operands && !operands))
    return TSR_STATUS(TSR_INVALID_ARGUMENT,
                      "kernel @%s takes %u arrays (prefetch, in and out operands), got %zu",
                      tsr_cpu_info_kernel_name(kernel->info), l->num_operands, num_operands);
  /* With several devices every array has a leading dimension of them. */
  const uint32_t lead = devices > 1 ? 1 : 0;
  for (uint32_t i = 0; i < l->num_operands; i++) {
    const operand_type_t *t = &l->operands[i];
    const tsr_array_t *a = operands[i];
    bool ok = a && a->data && a->dtype == t->dtype && a->rank == t->rank + lead &&
              (!lead || a->dims[0] == devices);
    for (uint32_t d = 0; ok && d < t->rank; d++) ok = a->dims[lead + d] == t->dims[d];
    if (ok) continue;
    char want[160], got[160] = "no array";
    int64_t dims[TSR_MAX_RANK + 1] = {devices};
    memcpy(dims + lead, t->dims, t->rank * sizeof *dims);
    format_type(want, sizeof want, t->dtype, t->rank + lead, dims);
    if (a) format_type(got, sizeof got, a->dtype, a->rank, a->dims);
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "kernel @%s operand %%%s: expected %s, got %s%s",
                      tsr_cpu_info_kernel_name(kernel->info),
                      tsr_cpu_info_operand_name(kernel->info, i), want, got,
                      a && !a->data ? " without data" : "");
  }
  /* With TESSERA_GUARD, the code runs on guarded copies of the arrays. */
  tsr_guard_set_t *guard = NULL;
  tsr_array_t guarded_small[8], *guarded = guarded_small;
  tsr_array_t *guarded_ptrs_small[8], **guarded_ptrs = guarded_ptrs_small;
  if (tsr_guard_enabled()) {
    bool out_small[8], *is_output = out_small;
    if (l->num_operands > 8) {
      guarded = tsr_malloc(l->num_operands * sizeof *guarded);
      guarded_ptrs = tsr_malloc(l->num_operands * sizeof *guarded_ptrs);
      is_output = tsr_malloc(l->num_operands * sizeof *is_output);
    }
    tsr_status_t s = !guarded || !guarded_ptrs || !is_output ? TSR_OOM() : NULL;
    for (uint32_t i = 0; !s && i < l->num_operands; i++) {
      is_output[i] = tsr_cpu_info_operand_is_output(kernel->info, i);
      guarded_ptrs[i] = &guarded[i];
    }
    if (!s) s = tsr_guard_set_create(operands, l->num_operands, is_output, guarded, &guard);
    if (is_output != out_small) tsr_free(is_output);
    if (s) {
      if (guarded != guarded_small) tsr_free(guarded);
      if (guarded_ptrs != guarded_ptrs_small) tsr_free(guarded_ptrs);
      return s;
    }
    operands = guarded_ptrs;
  }
  descriptor_t small[8];
  descriptor_t *descs = small;
  void *small_args[2 * 8];
  void **args = small_args;
  if (l->num_operands > 8) {
    descs = tsr_malloc(l->num_operands * sizeof *descs);
    args = tsr_malloc(2 * l->num_operands * sizeof *args);
    if (!descs || !args) {
      tsr_free(descs);
      tsr_free(args);
      tsr_guard_set_destroy(guard);
      if (guarded != guarded_small) tsr_free(guarded);
      if (guarded_ptrs != guarded_ptrs_small) tsr_free(guarded_ptrs);
      return TSR_OOM();
    }
  }
  /* args[i] points to the i-th argument, itself a pointer to the i-th
   * descriptor (the packed wrapper of the C interface). The sizes follow
   * the offset, then the strides, with no gap for the rank. The memref has
   * the leading dimension of devices also with one device. */
  void **desc_ptrs = args + l->num_operands;
  for (uint32_t i = 0; i < l->num_operands; i++) {
    const operand_type_t *t = &l->operands[i];
    descriptor_t *d = &descs[i];
    const uint32_t rank = t->rank + 1;
    d->allocated = d->aligned = operands[i]->data;
    d->offset = 0;
    int64_t stride = 1;
    for (uint32_t k = rank; k-- > 0;) {
      d->sizes_and_strides[k] = k ? t->dims[k - 1] : devices;
      d->sizes_and_strides[rank + k] = stride;
      stride *= d->sizes_and_strides[k];
    }
    desc_ptrs[i] = d;
    args[i] = &desc_ptrs[i];
  }
  tsr_status_t s = tsr_cpu_run_with(tsr_runtime_object_entry(l->object), kernel->info, operands,
                                    args, l->num_operands, options, print_stream, out_diag);
  if (descs != small) {
    tsr_free(descs);
    tsr_free(args);
  }
  if (guard) {
    const char *names_small[8], **names = names_small;
    if (l->num_operands > 8) names = tsr_malloc(l->num_operands * sizeof *names);
    if (!names) {
      tsr_guard_set_destroy(guard);
      tsr_status_free(s);
      s = TSR_OOM();
    } else {
      for (uint32_t i = 0; i < l->num_operands; i++)
        names[i] = tsr_cpu_info_operand_name(kernel->info, i);
      tsr_status_t overrun =
          tsr_guard_set_finish(guard, tsr_cpu_info_kernel_name(kernel->info), names);
      if (overrun) { /* the overrun first: whatever else went wrong may follow from it */
        tsr_status_free(s);
        s = overrun;
      }
      if (names != names_small) tsr_free(names);
    }
  }
  if (guarded != guarded_small) tsr_free(guarded);
  if (guarded_ptrs != guarded_ptrs_small) tsr_free(guarded_ptrs);
  return s;
}

/* ---- Text of the stages --------------------------------------------------------------------- */

tsr_status_t tsr_runtime_lower_text(const tsr_ir_kernel_t *kernel, tsr_backend_t backend,
                                    const char *stage, char **out_text) {
  if (!kernel || !stage || !out_text)
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "tsr_runtime_lower_text: NULL argument");
  if (backend != TSR_BACKEND_CPU)
    return TSR_STATUS(TSR_UNIMPLEMENTED, "no lowering to the %s target in this build",
                      tsr_backend_name(backend));
  if (strcmp(stage, "mlir") != 0 && strcmp(stage, "llvm") != 0)
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "unknown stage '%s' (expected mlir or llvm)",
                      stage);
  const tsr_lower_api_t *api = NULL;
  TSR_RETURN_IF_ERROR(tsr_runtime_lower_api(&api));
  TSR_RETURN_IF_ERROR(tsr_ir_verify_kernel(kernel));
  char *text = NULL;
  TSR_RETURN_IF_ERROR(adopt_status(api, api->emit(kernel, stage, 0, &text)));
  *out_text = tsr_strndup(text, strlen(text));
  api->free_text(text);
  return *out_text ? NULL : TSR_OOM();
}

void tsr_runtime_text_free(char *text) { tsr_free(text); }

void tsr_runtime_kernels_stats(const tsr_runtime_binding_t *b, tsr_runtime_compiled_stats_t *out) {
  memset(out, 0, sizeof *out);
  tsr_memcache_t *memory = b ? b->kernels : NULL;
  if (!b) {
    tsr_process_once(&g.once, initialize);
    memory = g.memory;
  }
  if (memory) {
    tsr_memcache_stats_t m;
    tsr_memcache_stats(memory, &m);
    out->memory_hits = m.hits;
    out->memory_misses = m.misses;
    out->memory_entries = m.entries;
  }
  if (b) {
    tsr_runtime_disk_use_of(b->handle, b->handle && !atomic_load(&b->off), &out->disk);
  } else {
    tsr_runtime_disk_use(&out->disk);
  }
  out->compiles = atomic_load(b ? &b->compiles : &g.compiles);
  out->load_failures = atomic_load(b ? &b->load_failures : &g.load_failures);
  out->lower_library_loaded = atomic_load(&lower.loaded);
}

void tsr_runtime_compiled_stats(tsr_runtime_compiled_stats_t *out) {
  tsr_runtime_kernels_stats(NULL, out);
}
