/* What the files of the binding API (tessera/api.h) share: the context
 * (runtime/context.c), output streams made from callbacks, and diagnostic
 * lists (runtime/diagnostic.c, made from a run's diagnostics sink,
 * interp/diag.h) for the executables (runtime/executable.c).
 * Layering: executable.c calls context.c and diagnostic.c; those two call
 * neither each other nor executable.c. Library-internal. */
#ifndef TESSERA_RUNTIME_API_INTERNAL_H
#define TESSERA_RUNTIME_API_INTERNAL_H

#include <stdio.h>

#include "interp/interp_runtime.h"
#include "runtime/runtime_internal.h"
#include "tessera/api.h"

/* One destination of text: a callback and its user pointer; a NULL
 * function is stderr. */
typedef struct tsr_output_target {
  tsr_output_fn fn;
  void *user;
} tsr_output_target_t;

/* The print (or warning, when `warning`) target of the first level whose
 * function is set; levels may be NULL. */
tsr_output_target_t tsr_output_pick(bool warning, const tsr_output_t *run,
                                     const tsr_output_t *executable,
                                     const tsr_output_t *context);
void tsr_output_target_write(const tsr_output_target_t *target, const char *text,
                             size_t size);

/* An unbuffered FILE * whose writes go to write(cookie, ...): how FILE *
 * options of the older API reach callbacks. NULL if it cannot be made. */
typedef void (*tsr_stream_write_fn)(void *cookie, const char *text, size_t size);
FILE *tsr_stream_open(tsr_stream_write_fn write, void *cookie);

/* A context is freed when its creator's tsr_context_destroy and every
 * executable made from it have let it go (each executable holds a
 * reference), in whichever order they come. */
struct tsr_context {
  _Atomic(uint32_t) references;    /* the creator's, one per executable */
  bool disk_cache, cache_shared, cache_optional, cache_environment;
  char *cache_dir, *cache_key_file, *lower_library; /* owned copies */
  uint64_t cache_max_bytes;
  tsr_output_t output;
  tsr_runtime_binding_t binding;   /* its caches (owned), allocator */
  tsr_output_target_t warning;     /* cache warnings */
  FILE *warning_stream;            /* the disk cache's warn_stream */
};

/* Takes and lets go of a reference to `context` (tsr_context_destroy lets go
 * of the creator's); the last one frees it. */
void tsr_context_retain(tsr_context_t *context);
void tsr_context_release(tsr_context_t *context);

/* ---- Diagnostic lists (runtime/diagnostic.c) ---- */

tsr_status_t tsr_diagnostic_list_create(tsr_diagnostic_list_t **out_list) TSR_MUST_USE;
/* Appends the records a run's sink kept: its errors, then its warnings
 * (notes included). */
tsr_status_t tsr_diagnostic_list_add_sink(tsr_diagnostic_list_t *list,
                                          const tsr_diag_sink_t *sink) TSR_MUST_USE;
/* Appends the diagnostics a status carries: one per record (location,
 * severity, op, message), or its whole message without location when it
 * has none; the kind from its code. For failures that are not a run's
 * kernel diagnostics (parse, verify, invalid arguments). NULL adds nothing. */
tsr_status_t tsr_diagnostic_list_add_status(tsr_diagnostic_list_t *list,
                                            const tsr_status_t status) TSR_MUST_USE;

#endif /* TESSERA_RUNTIME_API_INTERNAL_H */
