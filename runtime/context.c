/* Contexts (tessera/api.h): the configuration the library reads instead of
 * environment variables (disk cache, lowering library, default output), and
 * output callbacks behind FILE * streams for the parts that write to one. */
#define _GNU_SOURCE /* fopencookie */
#include <stdatomic.h>
#include <stdlib.h>

#include "runtime/api_internal.h"
#include "runtime/target.h"

/* ---- Output ------------------------------------------------------------------ */

void tsr_output_discard(void *user, const char *text, size_t size) {
  (void)user;
  (void)text;
  (void)size;
}

tsr_output_target_t tsr_output_pick(bool warning, const tsr_output_t *run,
                                     const tsr_output_t *executable,
                                     const tsr_output_t *context) {
  const tsr_output_t *levels[] = {run, executable, context};
  for (size_t i = 0; i < TSR_ARRAY_SIZE(levels); i++) {
    if (!levels[i]) continue;
    tsr_output_fn fn = warning ? levels[i]->warning : levels[i]->print;
    if (fn) return (tsr_output_target_t){fn, levels[i]->user};
  }
  return (tsr_output_target_t){NULL, NULL};
}

void tsr_output_target_write(const tsr_output_target_t *target, const char *text,
                             size_t size) {
  if (target->fn) {
    target->fn(target->user, text, size);
  } else {
    fwrite(text, 1, size, stderr);
  }
}

typedef struct stream_cookie {
  tsr_stream_write_fn write;
  void *cookie;
} stream_cookie_t;

static ssize_t cookie_write(void *cookie, const char *text, size_t size) {
  stream_cookie_t *c = cookie;
  c->write(c->cookie, text, size);
  return (ssize_t)size;
}

static int cookie_close(void *cookie) {
  tsr_free(cookie);
  return 0;
}

FILE *tsr_stream_open(tsr_stream_write_fn write, void *cookie) {
  stream_cookie_t *c = tsr_malloc(sizeof *c);
  if (!c) return NULL;
  c->write = write;
  c->cookie = cookie;
  FILE *f = fopencookie(c, "w", (cookie_io_functions_t){.write = cookie_write,
                                                        .close = cookie_close});
  if (!f) {
    tsr_free(c);
    return NULL;
  }
  /* Unbuffered: each fprintf reaches the callback at once, in the thread
   * that wrote it (glibc formats a call into one write). */
  setvbuf(f, NULL, _IONBF, 0);
  return f;
}

void tsr_free_buffer(void *buffer) { tsr_free(buffer); }

/* ---- Options --------------------------------------------------------------------- */

void tsr_context_options_initialize(tsr_context_options_t *options) {
  memset(options, 0, sizeof *options);
}

void tsr_context_options_from_environment(tsr_context_options_t *options) {
  tsr_context_options_initialize(options);
  options->disk_cache = !tsr_disk_cache_disabled_by_env();
  options->cache_environment = true;
  options->cache_optional = true;
  const char *lower_library = getenv("TESSERA_LOWER_LIBRARY");
  options->lower_library = lower_library && *lower_library ? lower_library : NULL;
}

/* ---- Contexts -------------------------------------------------------------------- */

static void write_warning(void *cookie, const char *text, size_t size) {
  const tsr_context_t *context = cookie;
  tsr_output_target_write(&context->warning, text, size);
}

/* An owned copy of `s` (NULL stays NULL); false on OOM. */
static bool copy_string(const char *s, char **out) {
  *out = s ? tsr_strndup(s, strlen(s)) : NULL;
  return !s || *out;
}

/* Opens the disk cache as the options say; an optional one that does not
 * open is a warning. */
static tsr_status_t open_disk(tsr_context_t *c) {
  if (!c->disk_cache) return NULL;
  if (!c->cache_environment && (!c->cache_dir || !c->cache_key_file))
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "a context's disk cache needs cache_dir and "
                                            "cache_key_file");
  tsr_disk_cache_options_t o;
  tsr_disk_cache_options_initialize(&o);
  o.dir = c->cache_dir;
  o.key_file = c->cache_key_file;
  o.max_bytes = c->cache_max_bytes;
  o.shared = c->cache_shared;
  o.no_environment = !c->cache_environment;
  o.warn_stream = c->warning_stream;
  tsr_status_t s = tsr_disk_cache_open(&o, &c->binding.handle);
  if (!s) return NULL;
  c->binding.handle = NULL;
  if (!c->cache_optional) return s;
  fprintf(c->warning_stream,
          "tessera: cache: cannot open the disk cache, going on without it: %s\n",
          tsr_status_message(s));
  tsr_status_free(s);
  return NULL;
}

/* The context's own caches in memory, made with its allocator (bound). */
static tsr_status_t create_caches(tsr_context_t *c) {
  TSR_RETURN_IF_ERROR(tsr_runtime_programs_create(&c->binding.programs));
  return tsr_runtime_kernels_create(&c->binding.kernels);
}

static tsr_status_t create(const tsr_context_options_t *options, tsr_context_t **out_context) {
  tsr_context_t *c = tsr_calloc(1, sizeof *c);
  if (!c) return TSR_OOM();
  atomic_init(&c->references, 1);
  c->disk_cache = options->disk_cache;
  c->cache_shared = options->cache_shared;
  c->cache_optional = options->cache_optional;
  c->cache_environment = options->cache_environment;
  c->cache_max_bytes = options->cache_max_bytes;
  c->output = options->output;
  c->warning = tsr_output_pick(true, NULL, NULL, &c->output);
  c->binding.allocator = options->allocator;
  atomic_init(&c->binding.off, false);
  atomic_init(&c->binding.compiles, 0);
  atomic_init(&c->binding.load_failures, 0);
  tsr_status_t s = NULL;
  if (!copy_string(options->cache_dir, &c->cache_dir) ||
      !copy_string(options->cache_key_file, &c->cache_key_file) ||
      !copy_string(options->lower_library, &c->lower_library) ||
      !(c->warning_stream = tsr_stream_open(write_warning, c)))
    s = TSR_OOM();
  if (!s) s = create_caches(c);
  if (!s) s = tsr_target_choose_lower_library(c->lower_library);
  if (!s) s = open_disk(c);
  if (s) {
    tsr_context_destroy(c);
    return s;
  }
  *out_context = c;
  return NULL;
}

tsr_status_t tsr_context_create(const tsr_context_options_t *options,
                                tsr_context_t **out_context) {
  if (!out_context)
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "tsr_context_create: NULL argument");
  tsr_context_options_t defaults;
  if (!options) {
    tsr_context_options_initialize(&defaults);
    options = &defaults;
  }
  if (options->allocator.allocate && !options->allocator.release)
    return TSR_STATUS(TSR_INVALID_ARGUMENT,
                      "tsr_context_create: the allocator has `allocate` but no `release`");
  /* The context itself and all it holds come from its allocator. */
  tsr_runtime_binding_t binding = {.allocator = options->allocator};
  tsr_runtime_binding_t *previous = tsr_runtime_bind(&binding);
  tsr_status_t s = create(options, out_context);
  tsr_runtime_bind(previous);
  return s;
}

tsr_status_t tsr_context_create_from_environment(tsr_context_t **out_context) {
  tsr_context_options_t options;
  tsr_context_options_from_environment(&options);
  return tsr_context_create(&options, out_context);
}

/* Frees the context and all it holds, with its own binding (its allocator
 * and caches) and the caller's put back. */
static void context_free(tsr_context_t *context) {
  tsr_runtime_binding_t *previous = tsr_runtime_bind(&context->binding);
  tsr_memcache_destroy(context->binding.programs);
  tsr_memcache_destroy(context->binding.kernels);
  tsr_disk_cache_close(context->binding.handle);
  if (context->warning_stream) fclose(context->warning_stream);
  tsr_free(context->cache_dir);
  tsr_free(context->cache_key_file);
  tsr_free(context->lower_library);
  tsr_free(context);
  tsr_runtime_bind(previous);
}

void tsr_context_retain(tsr_context_t *context) {
  atomic_fetch_add_explicit(&context->references, 1, memory_order_relaxed);
}

void tsr_context_release(tsr_context_t *context) {
  if (context &&
      atomic_fetch_sub_explicit(&context->references, 1, memory_order_acq_rel) == 1)
    context_free(context);
}

void tsr_context_destroy(tsr_context_t *context) { tsr_context_release(context); }

tsr_disk_cache_t *tsr_context_disk_cache(const tsr_context_t *context) {
  return context ? context->binding.handle : NULL;
}

void tsr_context_disk_use(const tsr_context_t *context, tsr_runtime_disk_use_t *out) {
  tsr_disk_cache_t *handle = context ? context->binding.handle : NULL;
  tsr_runtime_disk_use_of(handle, handle && !atomic_load(&context->binding.off), out);
}

void tsr_context_stats(const tsr_context_t *context, tsr_context_stats_t *out) {
  memset(out, 0, sizeof *out);
  if (!context) return;
  tsr_runtime_programs_stats(context->binding.programs, &out->programs);
  tsr_runtime_kernels_stats(&context->binding, &out->compiled);
}
