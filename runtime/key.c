/* Cache keys of kernels (docs/cache.md, "Keys"). A key's material is a list
 * of named components, each written as name, NUL, 8-byte length, bytes:
 *
 *   kernel   the canonical bytes (ir/canon.c)
 *   target   the backend's name: "interp" or "cpu" (tsr_backend_name; the
 *            TPU emitter's keys say "tpu", tpu/api.c)
 *   options  interp: the options that change what a run does or reports
 *   compile  cpu: the compile options, as text
 *   tessera  the producer: version, canonical format, a fingerprint of the op
 *            table and the identity of the binary holding this code
 *   llvm     cpu: LLVM's version and libraries, the lowering library and the
 *            pass pipeline (runtime/target.c)
 *   cpu      cpu: the host CPU's identity and features (runtime/target.c)
 *
 * The key is XXH3-128 of the material; caches compare the whole material on
 * a hit. `tessera hash --explain` prints each component's own hash. */
#define _GNU_SOURCE /* dladdr */
#include <dlfcn.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "base/module.h"
#include "ir/ir.h"
#include "lower/lower_api.h"
#include "runtime/runtime_internal.h"
#include "runtime/target.h"

struct tsr_runtime_key {
  tsr_strbuf_t material;
  tsr_cache_key_t key;
  uint32_t num_components;
  struct {
    const char *name;
    size_t offset, size; /* of the component's bytes in material */
  } components[8];
};

static void add_component(tsr_runtime_key_t *k, const char *name, const void *bytes,
                          size_t size) {
  tsr_strbuf_t *sb = &k->material;
  tsr_strbuf_append(sb, name, strlen(name) + 1);
  uint8_t len[8];
  for (int i = 0; i < 8; i++) len[i] = (uint8_t)((uint64_t)size >> (8 * i));
  tsr_strbuf_append(sb, (const char *)len, 8);
  size_t offset = sb->size;
  tsr_strbuf_append(sb, bytes, size);
  if (k->num_components < TSR_ARRAY_SIZE(k->components)) {
    k->components[k->num_components].name = name;
    k->components[k->num_components].offset = offset;
    k->components[k->num_components].size = size;
    k->num_components++;
  }
}

/* ---- The producer ---------------------------------------------------------- */

static char producer_text[256];
static pthread_once_t producer_once = PTHREAD_ONCE_INIT;

/* The identity of the file holding this code (the shared library or the
 * executable it is linked into): device, inode, size and modification time,
 * as ccache's default compiler check does. A rebuilt tessera is a new
 * producer, so entries from an older build are never trusted. */
static void make_producer(void) {
  XXH3_state_t *st = XXH3_createState();
  uint64_t ops = 0;
  if (st) {
    XXH3_64bits_reset(st);
    for (size_t i = 0; i < TSR_OP_COUNT; i++) {
      XXH3_64bits_update(st, tsr_op_table[i].mnemonic, strlen(tsr_op_table[i].mnemonic) + 1);
      XXH3_64bits_update(st, &tsr_op_table[i].flags, sizeof tsr_op_table[i].flags);
      XXH3_64bits_update(st, &tsr_op_table[i].effects, sizeof tsr_op_table[i].effects);
      XXH3_64bits_update(st, &tsr_op_table[i].family, sizeof tsr_op_table[i].family);
    }
    ops = XXH3_64bits_digest(st);
    XXH3_freeState(st);
  }
  char build[128] = "unknown";
  char path[4096];
  struct stat sb;
  if (tsr_code_path(path, sizeof path) && stat(path, &sb) == 0)
    snprintf(build, sizeof build, "%" PRIx64 ":%" PRIx64 ":%" PRId64 ":%" PRId64 ".%09ld",
             (uint64_t)sb.st_dev, (uint64_t)sb.st_ino, (int64_t)sb.st_size,
             (int64_t)sb.st_mtim.tv_sec, (long)sb.st_mtim.tv_nsec);
  snprintf(producer_text, sizeof producer_text,
           "tessera %s canon %u ops %016" PRIx64 " build %s", TSR_VERSION_STRING,
           tsr_ir_canon_format_version(), ops, build);
}

const char *tsr_runtime_producer(void) {
  tsr_process_once(&producer_once, make_producer);
  return producer_text;
}

/* ---- Options ------------------------------------------------------------------ */

static const char *uninit_name(tsr_uninit_mode_t m) {
  return m == TSR_UNINIT_ZERO ? "zero" : "nan";
}

/* Every option but the run-time ones: the trace path, strict, the timeout,
 * max_steps, the cancel flag and progress (where a trace goes and when a run stops do
 * not change what the program is; bind supplies them), defaults filled in, so that an unset field and its default give the
 * same key. */
/* A tripwire for new options (on LP64 hosts): each new field of
 * tsr_interp_options_t is either semantic (add it to key_options below and
 * to encode_options) or run-time (copy it in tsr_interp_program_bind and
 * clear it in program_cache.c), then update the size here (HACKING.md,
 * "A run option"). */
_Static_assert(sizeof(void *) != 8 || sizeof(tsr_interp_options_t) == 160,
               "tsr_interp_options_t changed: is the new option part of the key?");

typedef struct key_options {
  tsr_uninit_mode_t uninit;
  bool check, shuffle_parallel, dma_eager, detect_races, oob_reads_uninit, padded,
      out_blocks_copied_in;
  uint64_t shuffle_seed, schedule_seed;
  uint32_t max_errors, devices, cores;
  const char *chip;
  /* parallel_order: its size and a 128-bit hash of its entries */
  uint64_t order_size, order_lo, order_hi;
} key_options_t;

static XXH128_hash_t order_hash(const tsr_interp_options_t *o) {
  if (!o->parallel_order || !o->parallel_order_size) return (XXH128_hash_t){0, 0};
  return XXH3_128bits(o->parallel_order, o->parallel_order_size * sizeof *o->parallel_order);
}

static key_options_t key_options(const tsr_interp_options_t *options) {
  tsr_interp_options_t o;
  if (options) {
    o = *options;
  } else {
    tsr_interp_options_initialize(&o);
  }
  return (key_options_t){
      .uninit = o.uninit,
      .check = o.check,
      .shuffle_parallel = o.shuffle_parallel,
      .dma_eager = o.dma_eager,
      .detect_races = o.detect_races,
      .oob_reads_uninit = o.oob_reads_uninit,
      .padded = o.padded,
      .out_blocks_copied_in = o.out_blocks_copied_in,
      .shuffle_seed = o.shuffle_parallel ? o.shuffle_seed : 0,
      .schedule_seed = o.schedule_seed,
      .max_errors = o.max_errors ? o.max_errors : 20,
      .devices = o.devices ? o.devices : 1,
      .cores = o.cores ? o.cores : 1,
      .chip = o.chip ? o.chip : "v5e",
      .order_size = o.parallel_order ? o.parallel_order_size : 0,
      .order_lo = order_hash(&o).low64,
      .order_hi = order_hash(&o).high64,
  };
}

/* The options component: fixed-width fields, then the chip name. (Binary:
 * formatting text took a fifth of a cached prepare; --explain decodes it.) */
static size_t encode_options(const key_options_t *o, uint8_t *buf, size_t size) {
  uint64_t fields[] = {(uint64_t)o->uninit, o->check, o->shuffle_parallel,
                       o->shuffle_seed, o->max_errors, o->devices, o->cores,
                       o->schedule_seed, o->dma_eager, o->detect_races,
                       (uint64_t)o->oob_reads_uninit | (uint64_t)o->padded << 1 |
                           (uint64_t)o->out_blocks_copied_in << 2,
                       o->order_size, o->order_lo, o->order_hi};
  size_t n = 0;
  for (size_t i = 0; i < TSR_ARRAY_SIZE(fields); i++)
    for (int b = 0; b < 8; b++) buf[n++] = (uint8_t)(fields[i] >> (8 * b));
  size_t chip = strlen(o->chip);
  if (chip > size - n) chip = size - n;
  memcpy(buf + n, o->chip, chip);
  return n + chip;
}

static void describe_options(const uint8_t *bytes, size_t size, char *out,
                             size_t out_size) {
  uint64_t f[14] = {0};
  for (size_t i = 0; i < 14 && (i + 1) * 8 <= size; i++)
    for (int b = 0; b < 8; b++) f[i] |= (uint64_t)bytes[i * 8 + b] << (8 * b);
  int chip = size > 112 ? (int)(size - 112) : 0;
  /* The chip last, in what is left (the numbers' widths vary). */
  int n = snprintf(out, out_size,
                   "uninit=%s check=%d shuffle_parallel=%d shuffle_seed=%" PRIu64
                   " max_errors=%" PRIu64 " devices=%" PRIu64 " cores=%" PRIu64
                   " schedule_seed=%" PRIu64 " dma=%s detect_races=%d oob_reads=%s"
                   " buffer_bounds=%s out_blocks=%s parallel_order=%" PRIu64
                   " entries (hash %016" PRIx64 "%016" PRIx64 ") ",
                   uninit_name((tsr_uninit_mode_t)f[0]), (int)f[1], (int)f[2], f[3], f[4],
                   f[5], f[6], f[7], f[8] ? "eager" : "lazy", (int)f[9],
                   f[10] & 1 ? "uninit" : "error", f[10] & 2 ? "padded" : "logical",
                   f[10] & 4 ? "copied-in" : "uninit", f[11], f[13], f[12]);
  if (n >= 0 && (size_t)n < out_size)
    snprintf(out + n, out_size - (size_t)n, "chip=%.*s", chip, (const char *)bytes + 112);
}

/* ---- Keys ------------------------------------------------------------------------ */

const char *tsr_backend_name(tsr_backend_t backend) {
  switch (backend) {
    case TSR_BACKEND_INTERP: return "interp";
    case TSR_BACKEND_CPU: return "cpu";
  }
  return "?";
}

/* Every backend tsr_backend_name names (it names the values of the enum,
 * which count from 0). */
bool tsr_backend_from_name(const char *name, tsr_backend_t *out_backend) {
  for (int b = 0; strcmp(tsr_backend_name((tsr_backend_t)b), "?") != 0; b++) {
    if (name && strcmp(name, tsr_backend_name((tsr_backend_t)b)) == 0) {
      *out_backend = (tsr_backend_t)b;
      return true;
    }
  }
  return false;
}

/* A key with the kernel and target components, to which the caller adds
 * the target's own. */
static tsr_status_t key_begin(const tsr_ir_kernel_t *kernel, tsr_backend_t backend,
                              tsr_runtime_key_t **out_key) {
  tsr_runtime_key_t *k = tsr_calloc(1, sizeof *k);
  if (!k) return TSR_OOM();
  tsr_strbuf_initialize(&k->material);
  uint8_t *canon = NULL;
  size_t canon_size = 0;
  tsr_status_t s = tsr_ir_canon_kernel(kernel, &canon, &canon_size);
  if (!s) {
    /* the components after the kernel's are a few hundred bytes: one
     * allocation instead of doubling through the kernel's bytes */
    (void)tsr_strbuf_reserve(&k->material, canon_size + 1024);
    add_component(k, "kernel", canon, canon_size);
    const char *name = tsr_backend_name(backend);
    add_component(k, "target", name, strlen(name));
  }
  tsr_free(canon);
  if (s) {
    tsr_runtime_key_destroy(k);
    return s;
  }
  *out_key = k;
  return NULL;
}

static tsr_status_t key_finish(tsr_runtime_key_t *k, tsr_runtime_key_t **out_key) {
  if (k->material.failed) {
    tsr_runtime_key_destroy(k);
    return TSR_OOM();
  }
  tsr_cache_key_make(&k->key, k->material.data, k->material.size);
  *out_key = k;
  return NULL;
}

tsr_status_t tsr_runtime_compiled_key_create(const tsr_ir_kernel_t *kernel,
                                             const tsr_compile_options_t *options,
                                             tsr_runtime_key_t **out_key) {
  const char *llvm = tsr_target_llvm_component();
  if (!llvm)
    return TSR_STATUS(TSR_UNIMPLEMENTED,
                      "no cpu backend in this build: tessera was built without "
                      "MLIR/LLVM 22 (meson -Dmlir=disabled, or LLVM 22 was not found). "
                      "To get it, install LLVM and MLIR 22 (Debian: llvm-22-dev "
                      "libmlir-22-dev) and rebuild, or reinstall the Python package with "
                      "pip install . -Csetup-args=-Dmlir=enabled (docs/install.md); the "
                      "interpreter (the interp backend) needs neither");
  tsr_target_code_t code;
  TSR_RETURN_IF_ERROR(tsr_target_code(&code));
  tsr_compile_options_t o;
  if (options) {
    o = *options;
  } else {
    tsr_compile_options_initialize(&o);
  }
  tsr_runtime_key_t *k = NULL;
  TSR_RETURN_IF_ERROR(key_begin(kernel, TSR_BACKEND_CPU, &k));
  char text[128];
  /* each option only when set: the default key's text stays as it was */
  int n = snprintf(text, sizeof text, "opt_level=%d", o.opt_level);
  if (o.bounds)
    n += snprintf(text + n, sizeof text - (size_t)n, " oob_reads=%s buffer_bounds=%s%s",
                  o.bounds & TSR_LOWER_OOB_READS_UNINIT ? "uninit" : "error",
                  o.bounds & TSR_LOWER_PADDED ? "padded" : "logical",
                  o.bounds & TSR_LOWER_DOUBLE_ROWS ? " rows=2x" : "");
  if (o.out_blocks_copied_in)
    n += snprintf(text + n, sizeof text - (size_t)n, " out_blocks=copied-in");
  add_component(k, "compile", text, (size_t)n);
  const char *producer = tsr_runtime_producer();
  add_component(k, "tessera", producer, strlen(producer));
  add_component(k, "llvm", llvm, strlen(llvm));
  add_component(k, "cpu", code.component, strlen(code.component));
  return key_finish(k, out_key);
}

tsr_status_t tsr_runtime_interp_key_create(const tsr_ir_kernel_t *kernel,
                                           const tsr_interp_options_t *options,
                                           tsr_runtime_key_t **out_key) {
  tsr_runtime_key_t *k = NULL;
  TSR_RETURN_IF_ERROR(key_begin(kernel, TSR_BACKEND_INTERP, &k));
  key_options_t o = key_options(options);
  uint8_t buf[160];
  add_component(k, "options", buf, encode_options(&o, buf, sizeof buf));
  const char *producer = tsr_runtime_producer();
  add_component(k, "tessera", producer, strlen(producer));
  return key_finish(k, out_key);
}

tsr_status_t tsr_runtime_key_create(const tsr_ir_kernel_t *kernel,
                                    const tsr_executable_options_t *options,
                                    tsr_runtime_key_t **out_key) {
  if (!kernel || !out_key)
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "tsr_runtime_key_create: NULL argument");
  if (!options) return tsr_runtime_interp_key_create(kernel, NULL, out_key);
  switch (options->backend) {
    case TSR_BACKEND_INTERP:
      return tsr_runtime_interp_key_create(kernel, &options->run, out_key);
    case TSR_BACKEND_CPU: {
      tsr_compile_options_t co;
      tsr_compile_options_of(options, &co);
      return tsr_runtime_compiled_key_create(kernel, &co, out_key);
    }
  }
  return TSR_STATUS(TSR_INVALID_ARGUMENT, "unknown backend %d", (int)options->backend);
}

void tsr_runtime_key_destroy(tsr_runtime_key_t *key) {
  if (!key) return;
  tsr_strbuf_deinitialize(&key->material);
  tsr_free(key);
}

const tsr_cache_key_t *tsr_runtime_key_get(const tsr_runtime_key_t *key) {
  return &key->key;
}

size_t tsr_runtime_key_component_count(const tsr_runtime_key_t *key) {
  return key->num_components;
}

void tsr_runtime_key_component(const tsr_runtime_key_t *key, size_t i,
                               tsr_runtime_key_component_t *out) {
  memset(out, 0, sizeof *out);
  if (i >= key->num_components) return;
  const uint8_t *bytes = (const uint8_t *)key->material.data + key->components[i].offset;
  out->name = key->components[i].name;
  out->bytes = bytes;
  out->size = key->components[i].size;
  XXH128_hash_t h = XXH3_128bits(bytes, out->size);
  out->hash_lo = h.low64;
  out->hash_hi = h.high64;
  if (strcmp(out->name, "kernel") == 0)
    snprintf(out->description, sizeof out->description,
             "canonical bytes of the kernel (binary)");
  else if (strcmp(out->name, "options") == 0)
    describe_options(bytes, out->size, out->description, sizeof out->description);
  else
    snprintf(out->description, sizeof out->description, "%.*s",
             (int)(out->size < sizeof out->description ? out->size
                                                       : sizeof out->description - 1),
             (const char *)bytes);
}
