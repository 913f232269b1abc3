/* Diagnostic records (tessera/api.h): lists of tsr_diagnostic_t, made from
 * the records a run's diagnostics sink kept (interp/diag.h), or from the
 * records a status carries (base/) for failures before a run (parse,
 * verify, create). */
#include <stdlib.h>

#include "runtime/api_internal.h"

struct tsr_diagnostic_list {
  tsr_arena_t arena; /* the records' strings */
  tsr_diagnostic_t *items;
  size_t count, capacity;
};

static const char *const kind_names[] = {
    [TSR_DIAG_OTHER] = "other",
    [TSR_DIAG_PARSE] = "parse",
    [TSR_DIAG_VERIFY] = "verify",
    [TSR_DIAG_OUT_OF_BOUNDS] = "out_of_bounds",
    [TSR_DIAG_UNINITIALIZED] = "uninitialized",
    [TSR_DIAG_OUTPUT_UNWRITTEN] = "output_unwritten",
    [TSR_DIAG_REVISIT] = "revisit",
    [TSR_DIAG_CORE_CONFLICT] = "core_conflict",
    [TSR_DIAG_RACE] = "race",
    [TSR_DIAG_DEADLOCK] = "deadlock",
    [TSR_DIAG_SEMAPHORE_LEFTOVER] = "semaphore_leftover",
    [TSR_DIAG_DMA_IN_FLIGHT] = "dma_in_flight",
    [TSR_DIAG_VMEM_BUDGET] = "vmem_budget",
    [TSR_DIAG_ASSERT] = "assert",
    [TSR_DIAG_RUN_STOPPED] = "run_stopped",
    [TSR_DIAG_DEVICE_RANGE] = "device_range",
    [TSR_DIAG_SHAPE_MISMATCH] = "shape_mismatch",
    [TSR_DIAG_INVALID_ARGUMENT] = "invalid_argument",
    [TSR_DIAG_UNIMPLEMENTED] = "unimplemented",
    [TSR_DIAG_IO] = "io",
    [TSR_DIAG_INTERNAL] = "internal",
    [TSR_DIAG_SEMAPHORE] = "semaphore",
    [TSR_DIAG_BAD_VALUE] = "bad_value",
    [TSR_DIAG_OUT_OF_MEMORY] = "out_of_memory",
    [TSR_DIAG_PARALLEL_REVISIT] = "parallel_revisit",
};
_Static_assert(TSR_ARRAY_SIZE(kind_names) == TSR_DIAG_KIND_COUNT,
               "a name for every diagnostic kind");

const char *tsr_diagnostic_kind_name(tsr_diagnostic_kind_t kind) {
  return (unsigned)kind < TSR_DIAG_KIND_COUNT ? kind_names[kind] : "?";
}

tsr_status_t tsr_diagnostic_list_create(tsr_diagnostic_list_t **out_list) {
  tsr_diagnostic_list_t *list = tsr_calloc(1, sizeof *list);
  if (!list) return TSR_OOM();
  tsr_arena_initialize(&list->arena);
  *out_list = list;
  return NULL;
}

void tsr_diagnostic_list_destroy(tsr_diagnostic_list_t *list) {
  if (!list) return;
  tsr_arena_deinitialize(&list->arena);
  tsr_free(list->items);
  tsr_free(list);
}

size_t tsr_diagnostic_list_count(const tsr_diagnostic_list_t *list) {
  return list ? list->count : 0;
}

const tsr_diagnostic_t *tsr_diagnostic_list_get(const tsr_diagnostic_list_t *list,
                                                size_t i) {
  return list && i < list->count ? &list->items[i] : NULL;
}

/* An arena copy of [p, p + n) as a NUL-terminated view. */
static bool keep(tsr_diagnostic_list_t *list, const char *p, size_t n,
                 tsr_string_view_t *out) {
  char *s = tsr_arena_strndup(&list->arena, p, n);
  if (!s) return false;
  *out = (tsr_string_view_t){s, n};
  return true;
}

static bool keep_string(tsr_diagnostic_list_t *list, const char *s, tsr_string_view_t *out) {
  return keep(list, s ? s : "", s ? strlen(s) : 0, out);
}

static tsr_diagnostic_t *append(tsr_diagnostic_list_t *list) {
  if (list->count == list->capacity) {
    size_t cap = list->capacity ? list->capacity * 2 : 8;
    tsr_diagnostic_t *items = tsr_realloc(list->items, cap * sizeof *items);
    if (!items) return NULL;
    list->items = items;
    list->capacity = cap;
  }
  tsr_diagnostic_t *d = &list->items[list->count++];
  memset(d, 0, sizeof *d);
  d->line = d->col = d->core = d->device = d->other_line = -1;
  return d;
}

/* ---- Records of a run (the sink's) ---------------------------------------------- */

static const char *const work_prefixes[] = {"in %", "out %", "prefetch %", "scratch %",
                                            "scoped %"};

/* The record of one sink entry. */
static tsr_status_t add_entry(tsr_diagnostic_list_t *list, const tsr_diag_sink_t *sink,
                              const tsr_diag_entry_t *e) {
  tsr_diagnostic_t *d = append(list);
  if (!d) return TSR_OOM();
  d->kind = e->kind;
  d->severity = e->severity == TSR_DIAG_WARNING ? TSR_SEVERITY_WARNING
                : e->severity == TSR_DIAG_NOTE  ? TSR_SEVERITY_NOTE
                                                : TSR_SEVERITY_ERROR;
  bool note = e->severity == TSR_DIAG_NOTE;
  if (!note) {
    d->line = (int32_t)e->loc.line;
    d->col = (int32_t)e->loc.col;
    /* as the text: a device or core is named when the run has several */
    d->device = sink->devices > 1 ? e->device : -1;
    d->core = sink->cores > 1 ? e->core : -1;
  }
  /* op: the mnemonic without its quotes, or the pipeline work ("out %y"),
   * whose operand is the buffer when the reporter named none */
  const char *op = e->what, *buffer = e->buffer;
  size_t op_len = strlen(op);
  if (op_len >= 2 && op[0] == '\'' && op[op_len - 1] == '\'') {
    op++;
    op_len -= 2;
  }
  for (size_t i = 0; i < TSR_ARRAY_SIZE(work_prefixes) && !*buffer; i++)
    if (strncmp(op, work_prefixes[i], strlen(work_prefixes[i])) == 0)
      buffer = op + strlen(work_prefixes[i]);
  d->index_rank = e->index_rank;
  memcpy(d->index_lo, e->index_lo, sizeof d->index_lo);
  memcpy(d->index_hi, e->index_hi, sizeof d->index_hi);
  d->grid_rank = note ? 0 : e->grid_rank;
  memcpy(d->grid_point, e->point, sizeof d->grid_point);
  d->other_line = e->other_line;
  d->other_grid_rank = e->other_grid_rank;
  memcpy(d->other_grid_point, e->other_point, sizeof d->other_grid_point);
  const char *other = e->other_what;
  size_t other_len = strlen(other);
  if (other_len >= 2 && other[0] == '\'' && other[other_len - 1] == '\'') {
    other++;
    other_len -= 2;
  }
  if (!keep_string(list, e->loc.file, &d->file) ||
      !keep_string(list, note ? "" : sink->kernel_name, &d->kernel) ||
      !keep(list, op, op_len, &d->op) || !keep_string(list, buffer, &d->buffer) ||
      !keep(list, other, other_len, &d->other_op) ||
      !keep_string(list, e->message, &d->message) || !keep_string(list, e->text, &d->text))
    return TSR_OOM();
  return NULL;
}

tsr_status_t tsr_diagnostic_list_add_sink(tsr_diagnostic_list_t *list,
                                          const tsr_diag_sink_t *sink) {
  if (sink->failed) return TSR_OOM();
  for (size_t i = 0; i < sink->error_entries.count; i++)
    TSR_RETURN_IF_ERROR(add_entry(list, sink, &sink->error_entries.items[i]));
  for (size_t i = 0; i < sink->warning_entries.count; i++)
    TSR_RETURN_IF_ERROR(add_entry(list, sink, &sink->warning_entries.items[i]));
  return NULL;
}

/* ---- Warnings before a run ------------------------------------------------------ */

tsr_status_t tsr_kernel_static_warnings(const tsr_ir_kernel_t *k,
                                        tsr_diagnostic_list_t **out_list) {
  *out_list = NULL;
  if (!k) return TSR_STATUS(TSR_INVALID_ARGUMENT, "no kernel");
  tsr_diag_sink_t sink;
  /* one site per declaration; at most one warning each */
  TSR_RETURN_IF_ERROR(tsr_diag_sink_initialize(&sink, k->name, k->num_decls, 1, 1,
                                               k->num_decls + 1, false));
  int64_t grid[TSR_MAX_RANK], first[TSR_MAX_RANK] = {0};
  for (uint32_t g = 0; g < k->grid_rank; g++) grid[g] = k->grid_bound[g] ? 2 : k->grid[g];
  for (uint32_t i = 0; i < k->num_decls; i++) {
    const tsr_decl_t *d = &k->decls[i];
    int32_t dim = tsr_ir_parallel_revisit_dim(k->grid_rank, grid, k->semantics,
                                              tsr_ir_output_fixed_dims(k, d));
    if (dim < 0) continue;
    char what[160];
    snprintf(what, sizeof what, "out %%%s", d->ref->name);
    tsr_loc_t loc = d->loc;
    if (!loc.file) loc.file = k->module && k->module->filename ? k->module->filename : "<input>";
    tsr_diag_where_t where = {i, loc, what, 0, 0, first, k->grid_rank, NULL};
    (void)tsr_diag_parallel_revisit(&sink, &where, (uint32_t)dim, k->semantics[dim],
                                    k->grid_bound[dim] ? -1 : grid[dim]);
  }
  tsr_diagnostic_list_t *list = NULL;
  tsr_status_t s = tsr_diagnostic_list_create(&list);
  if (!s) s = tsr_diagnostic_list_add_sink(list, &sink);
  tsr_diag_sink_deinitialize(&sink);
  if (s) {
    tsr_diagnostic_list_destroy(list);
    return s;
  }
  *out_list = list;
  return NULL;
}

/* ---- Records of a status ------------------------------------------------------------
 * Parse and verify errors, and the other located errors made before a run,
 * reach the caller as a status that carries one record per diagnostic line
 * (base/base_internal.h): location, severity, op and message; the kind
 * comes from the status code. A status without records (a message that
 * names no location) is one record without location. Runs do not come here:
 * their records are the sink's. */

static tsr_diagnostic_kind_t kind_from_code(tsr_status_code_t code) {
  switch (code) {
  case TSR_PARSE_ERROR: return TSR_DIAG_PARSE;
  case TSR_VERIFY_ERROR: return TSR_DIAG_VERIFY;
  case TSR_INVALID_ARGUMENT:
  case TSR_FORMAT_ERROR:
  case TSR_NOT_FOUND: return TSR_DIAG_INVALID_ARGUMENT;
  case TSR_UNIMPLEMENTED: return TSR_DIAG_UNIMPLEMENTED;
  case TSR_IO_ERROR: return TSR_DIAG_IO;
  case TSR_INTERNAL: return TSR_DIAG_INTERNAL;
  case TSR_RESOURCE_EXHAUSTED: return TSR_DIAG_VMEM_BUDGET;
  default: return TSR_DIAG_OTHER;
  }
}

/* One record of a status of `code`: from `rec`, or (NULL) the whole
 * `message` without location. */
static tsr_status_t add_status_record(tsr_diagnostic_list_t *list, tsr_status_code_t code,
                                      const tsr_status_record_t *rec, const char *message) {
  tsr_diagnostic_t *d = append(list);
  if (!d) return TSR_OOM();
  d->severity = rec ? rec->severity : TSR_SEVERITY_ERROR;
  d->kind = d->severity == TSR_SEVERITY_NOTE ? TSR_DIAG_OTHER : kind_from_code(code);
  if (rec && rec->located) {
    d->line = (int32_t)rec->loc.line;
    d->col = (int32_t)rec->loc.col;
  }
  if (!keep_string(list, rec ? rec->loc.file : NULL, &d->file) ||
      !keep(list, "", 0, &d->kernel) || !keep_string(list, rec ? rec->op : NULL, &d->op) ||
      !keep(list, "", 0, &d->buffer) || !keep(list, "", 0, &d->other_op) ||
      !keep_string(list, rec ? rec->message : message, &d->message) ||
      !keep_string(list, rec ? rec->text : message, &d->text))
    return TSR_OOM();
  return NULL;
}

tsr_status_t tsr_diagnostic_list_add_status(tsr_diagnostic_list_t *list,
                                            const tsr_status_t status) {
  if (!status) return NULL;
  tsr_status_code_t code = tsr_status_code(status);
  size_t n = tsr_status_record_count(status);
  if (!n) return add_status_record(list, code, NULL, tsr_status_message(status));
  for (size_t i = 0; i < n; i++)
    TSR_RETURN_IF_ERROR(add_status_record(list, code, tsr_status_record_get(status, i), NULL));
  return NULL;
}

tsr_status_t tsr_diagnostic_list_create_from_status(const tsr_status_t status,
                                                    tsr_diagnostic_list_t **out_list) {
  if (!out_list)
    return TSR_STATUS(TSR_INVALID_ARGUMENT,
                      "tsr_diagnostic_list_create_from_status: NULL argument");
  tsr_diagnostic_list_t *list = NULL;
  TSR_RETURN_IF_ERROR(tsr_diagnostic_list_create(&list));
  tsr_status_t s = tsr_diagnostic_list_add_status(list, status);
  if (s) {
    tsr_diagnostic_list_destroy(list);
    return s;
  }
  *out_list = list;
  return NULL;
}
