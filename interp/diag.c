/* The diagnostics sink of a kernel run (contract: interp/diag.h): once per
 * site and severity, the one formatter of a kernel diagnostic, the messages
 * both backends give; then the interpreter's way in (tsr_interp_kernel_*),
 * which takes the site and grid point from a core's run state. */
#include <stdarg.h>
#include <stdio.h>

#include "interp/interp_internal.h"

/* ---- The sink ---- */

tsr_status_t tsr_diag_sink_initialize(tsr_diag_sink_t *sink, const char *kernel_name,
                                      uint32_t num_sites, uint32_t devices, uint32_t cores,
                                      uint32_t max_errors, bool strict) {
  memset(sink, 0, sizeof *sink);
  sink->kernel_name = kernel_name;
  sink->devices = devices;
  sink->cores = cores;
  sink->max_errors = max_errors;
  sink->strict = strict;
  sink->num_sites = num_sites;
  tsr_diag_list_initialize(&sink->errors, max_errors);
  tsr_diag_list_initialize(&sink->warnings, max_errors);
  sink->warnings.severity = TSR_SEVERITY_WARNING;
  tsr_arena_initialize(&sink->arena);
  sink->site_reported = tsr_calloc(num_sites + 1, 1);
  if (!sink->site_reported) {
    tsr_diag_sink_deinitialize(sink);
    return TSR_OOM();
  }
  return NULL;
}

void tsr_diag_sink_deinitialize(tsr_diag_sink_t *sink) {
  tsr_free(sink->site_reported);
  sink->site_reported = NULL;
  tsr_diag_list_deinitialize(&sink->errors);
  tsr_diag_list_deinitialize(&sink->warnings);
  tsr_free(sink->error_entries.items);
  tsr_free(sink->warning_entries.items);
  sink->error_entries = sink->warning_entries = (tsr_diag_entries_t){0};
  tsr_arena_deinitialize(&sink->arena);
}

void tsr_diag_sink_move(tsr_diag_sink_t *from, tsr_diag_sink_t *to) {
  *to = *from;
  memset(from, 0, sizeof *from);
  tsr_arena_initialize(&from->arena);
}

/* ---- Records ---- */

/* A copy of s in the sink's arena ("" for NULL); NULL when out of memory. */
static const char *keep_string(tsr_diag_sink_t *sink, const char *s) {
  if (!s) return "";
  return tsr_arena_strndup(&sink->arena, s, strlen(s));
}

/* A new zeroed entry at the end of `list` with no location, or NULL (the
 * sink is marked failed). */
static tsr_diag_entry_t *new_entry(tsr_diag_sink_t *sink, tsr_diag_entries_t *list) {
  if (list->count == list->capacity) {
    size_t cap = list->capacity ? list->capacity * 2 : 8;
    tsr_diag_entry_t *items = tsr_realloc(list->items, cap * sizeof *items);
    if (!items) {
      sink->failed = true;
      return NULL;
    }
    list->items = items;
    list->capacity = cap;
  }
  tsr_diag_entry_t *e = &list->items[list->count++];
  memset(e, 0, sizeof *e);
  e->device = e->core = e->other_line = -1;
  e->what = e->buffer = e->other_what = e->message = e->text = "";
  return e;
}

/* The record of a line kept in a text list; `message` is the line after
 * "severity: ". */
static void keep_entry(tsr_diag_sink_t *sink, const tsr_diag_record_t *r,
                       const char *severity_word, const char *message) {
  const tsr_diag_where_t *w = r->where;
  tsr_diag_entry_t *e =
      new_entry(sink, r->severity == TSR_DIAG_WARNING ? &sink->warning_entries
                                                       : &sink->error_entries);
  if (!e) return;
  e->kind = r->kind;
  e->severity = r->severity;
  e->loc = w->loc;
  e->device = (int32_t)w->device;
  e->core = (int32_t)w->core;
  e->grid_rank = w->grid_rank;
  if (w->point) memcpy(e->point, w->point, w->grid_rank * sizeof *e->point);
  const tsr_diag_detail_t *d = w->detail;
  if (d) {
    e->index_rank = d->index_rank;
    memcpy(e->index_lo, d->index_lo, sizeof e->index_lo);
    memcpy(e->index_hi, d->index_hi, sizeof e->index_hi);
    if (d->other_what) e->other_line = (int32_t)d->other_line;
    e->other_grid_rank = d->other_point ? d->other_grid_rank : 0;
    if (d->other_point)
      memcpy(e->other_point, d->other_point, e->other_grid_rank * sizeof *e->other_point);
  }
  char *text = NULL;
  tsr_strbuf_t line;
  tsr_strbuf_initialize(&line);
  tsr_strbuf_printf(&line, "%s:%u:%u: %s: %s", w->loc.file ? w->loc.file : "<unknown>",
                    w->loc.line, w->loc.col, severity_word, message);
  if (!line.failed) text = tsr_strbuf_take(&line);
  tsr_strbuf_deinitialize(&line);
  e->loc.file = keep_string(sink, w->loc.file);
  e->what = keep_string(sink, w->what);
  e->buffer = keep_string(sink, d ? d->buffer : NULL);
  e->other_what = keep_string(sink, d ? d->other_what : NULL);
  e->message = keep_string(sink, message);
  e->text = keep_string(sink, text);
  tsr_free(text);
  if (!e->loc.file || !e->what || !e->buffer || !e->other_what || !e->message || !e->text) {
    sink->failed = true;
    sink->warning_entries.count -= r->severity == TSR_DIAG_WARNING;
    sink->error_entries.count -= r->severity != TSR_DIAG_WARNING;
  }
}

/* A note ("note: ...") as a record at the end of `list` and, unless `to`
 * is NULL, as a line at the end of the list `to`. */
static void add_note(tsr_diag_sink_t *sink, tsr_diag_list_t *to, tsr_diag_entries_t *list,
                     const char *fmt, ...) TSR_PRINTF(4, 5);
static void add_note(tsr_diag_sink_t *sink, tsr_diag_list_t *to, tsr_diag_entries_t *list,
                     const char *fmt, ...) {
  tsr_strbuf_t text;
  tsr_strbuf_initialize(&text);
  tsr_strbuf_puts(&text, "note: ");
  va_list ap;
  va_start(ap, fmt);
  tsr_strbuf_vprintf(&text, fmt, ap);
  va_end(ap);
  if (to && !text.failed) tsr_diag_note(to, "%s", text.data + strlen("note: "));
  tsr_diag_entry_t *e = text.failed ? NULL : new_entry(sink, list);
  if (e) {
    e->kind = TSR_DIAG_OTHER;
    e->severity = TSR_DIAG_NOTE;
    e->loc.file = "";
    e->message = keep_string(sink, text.data + strlen("note: "));
    e->text = keep_string(sink, text.data);
    if (!e->message || !e->text) {
      list->count--;
      sink->failed = true;
    }
  }
  if (text.failed) sink->failed = true;
  tsr_strbuf_deinitialize(&text);
}

/* The one formatter: "kernel @k, [device d, ][core c, ]grid point (..): what: text". */
static void format_record(const tsr_diag_sink_t *sink, const tsr_diag_record_t *r,
                          tsr_strbuf_t *line) {
  const tsr_diag_where_t *w = r->where;
  char point[160];
  tsr_diag_format_point(point, sizeof point, w->point, w->grid_rank);
  tsr_strbuf_printf(line, "kernel @%s, ", sink->kernel_name);
  if (sink->devices > 1) tsr_strbuf_printf(line, "device %u, ", w->device);
  if (sink->cores > 1) tsr_strbuf_printf(line, "core %u, ", w->core);
  tsr_strbuf_printf(line, "grid point %s: %s: %s", point, w->what, r->text);
}

bool tsr_diag_vreport(tsr_diag_sink_t *sink, const tsr_diag_where_t *where,
                      tsr_diag_kind_t kind, tsr_diag_severity_t severity, const char *fmt,
                      va_list ap) {
  bool strict_warning = severity == TSR_DIAG_WARNING && sink->strict;
  if (strict_warning) severity = TSR_DIAG_ERROR;
  bool warning = severity == TSR_DIAG_WARNING;
  uint8_t bit = warning ? 2 : 1;
  if (sink->site_reported[where->site] & bit) {
    if (warning) sink->warnings_suppressed++;
    else sink->suppressed++;
    return false;
  }
  sink->site_reported[where->site] |= bit;
  tsr_strbuf_t text, line;
  tsr_strbuf_initialize(&text);
  tsr_strbuf_initialize(&line);
  tsr_strbuf_vprintf(&text, fmt, ap);
  if (strict_warning) tsr_strbuf_puts(&text, " [a warning, an error with --strict]");
  tsr_diag_record_t record = {kind, severity, where, text.data ? text.data : "?"};
  format_record(sink, &record, &line);
  tsr_diag_list_t *list = warning ? &sink->warnings : &sink->errors;
  tsr_diag_add(list, where->loc, "%s", line.data ? line.data : "?");
  if (!list->limit || list->count <= list->limit)
    keep_entry(sink, &record, tsr_diagnostic_severity_name(list->severity),
               line.data ? line.data : "?");
  tsr_strbuf_deinitialize(&line);
  tsr_strbuf_deinitialize(&text);
  return !warning && sink->errors.count >= sink->max_errors;
}

bool tsr_diag_report(tsr_diag_sink_t *sink, const tsr_diag_where_t *where,
                     tsr_diag_kind_t kind, tsr_diag_severity_t severity, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  bool stop = tsr_diag_vreport(sink, where, kind, severity, fmt, ap);
  va_end(ap);
  return stop;
}

void tsr_diag_reopen(tsr_diag_sink_t *sink, uint32_t site, tsr_diag_severity_t severity) {
  sink->site_reported[site] &= (uint8_t)~(severity == TSR_DIAG_WARNING ? 2u : 1u);
}

tsr_status_t tsr_diag_sink_status(tsr_diag_sink_t *sink) {
  tsr_diag_list_t *e = &sink->errors;
  if (!e->count) return NULL;
  if (sink->suppressed)
    add_note(sink, e, &sink->error_entries, "%llu more occurrence%s of these errors not shown",
             (unsigned long long)sink->suppressed, sink->suppressed == 1 ? "" : "s");
  /* the note tsr_diag_list_to_status adds */
  if (e->limit && e->count > e->limit)
    add_note(sink, NULL, &sink->error_entries, "%zu more %ss not shown", e->count - e->limit,
             tsr_diagnostic_severity_name(e->severity));
  return tsr_diag_list_to_status(e, TSR_KERNEL_ERROR);
}

uint64_t tsr_diag_sink_write_warnings(tsr_diag_sink_t *sink, FILE *f) {
  tsr_diag_list_t *w = &sink->warnings;
  if (!w->count) return 0;
  if (w->limit && w->count > w->limit)
    add_note(sink, w, &sink->warning_entries, "%zu more warnings not shown",
             w->count - w->limit);
  if (sink->warnings_suppressed)
    add_note(sink, w, &sink->warning_entries,
             "%llu more occurrence%s of these warnings not shown",
             (unsigned long long)sink->warnings_suppressed,
             sink->warnings_suppressed == 1 ? "" : "s");
  tsr_strbuf_puts(&w->text, "\n");
  if (!w->text.failed) {
    fwrite(w->text.data, 1, w->text.size, f);
    fflush(f);
  }
  return w->count;
}

/* ---- The messages both backends give ---- */

bool tsr_diag_device_range(tsr_diag_sink_t *sink, const tsr_diag_where_t *where,
                           int64_t device, int64_t core) {
  if (device < 0 || device >= sink->devices)
    return tsr_diag_report(sink, where, TSR_DIAG_DEVICE_RANGE, TSR_DIAG_ERROR,
                           "device %lld out of range: the run has %u device%s",
                           (long long)device, sink->devices, sink->devices == 1 ? "" : "s");
  return tsr_diag_report(sink, where, TSR_DIAG_DEVICE_RANGE, TSR_DIAG_ERROR,
                         "core %lld out of range: a device has %u core%s", (long long)core,
                         sink->cores, sink->cores == 1 ? "" : "s");
}

bool tsr_diag_deadlock(tsr_diag_sink_t *sink, const tsr_diag_where_t *where, const char *sem,
                       int64_t need, bool bytes, int64_t have) {
  tsr_diag_reopen(sink, where->site, TSR_DIAG_ERROR);
  return tsr_diag_report(sink, where, TSR_DIAG_DEADLOCK, TSR_DIAG_ERROR,
                         "deadlock: every core is blocked; this one waits for %s to reach "
                         "%lld%s, it holds %lld and nothing in flight will signal it",
                         sem, (long long)need, bytes ? " bytes" : "", (long long)have);
}

bool tsr_diag_assert_failed(tsr_diag_sink_t *sink, const tsr_diag_where_t *where,
                            const char *text) {
  return tsr_diag_report(sink, where, TSR_DIAG_ASSERT, TSR_DIAG_ERROR, "assertion failed: %s",
                         text);
}

bool tsr_diag_run_stopped(tsr_diag_sink_t *sink, const tsr_diag_where_t *where,
                          const tsr_bounds_t *bounds) {
  char why[160];
  tsr_bounds_describe(bounds, why, sizeof why);
  return tsr_diag_report(sink, where, TSR_DIAG_RUN_STOPPED, TSR_DIAG_ERROR, "%s", why);
}

bool tsr_diag_parallel_revisit(tsr_diag_sink_t *sink, const tsr_diag_where_t *where,
                               uint32_t dim, uint8_t semantics, int64_t steps) {
  const bool core = semantics == TSR_DIM_CORE_PARALLEL;
  char count[48] = "its steps"; /* a dynamic extent, before a run */
  if (steps >= 0) snprintf(count, sizeof count, "%lld steps", (long long)steps);
  bool stop = tsr_diag_report(
      sink, where, TSR_DIAG_PARALLEL_REVISIT, TSR_DIAG_WARNING,
      "every step along grid dimension %u (%s, %s) writes this same output block "
      "(its index map does not depend on the dimension). %s each core writes its own copy "
      "of the block and the last copy out wins, so the result differs from one core's. If "
      "dimension %u is a reduction, mark it \"arbitrary\"; else make the index map depend "
      "on it",
      dim, core ? "core_parallel" : "parallel", count,
      core ? "A TPU runs each index of a core_parallel dimension on its own TensorCore:"
           : "On a TPU whose device has two TensorCores (megacore), a parallel dimension "
             "may be split between them:",
      dim);
  /* the site's next warning (or error, under strict) is reported too */
  tsr_diag_reopen(sink, where->site, sink->strict ? TSR_DIAG_ERROR : TSR_DIAG_WARNING);
  return stop;
}

/* ---- Indices and their text ---- */

static void format_tuple(char *buf, size_t size, const int64_t *v, uint32_t rank,
                         const char *open, const char *close) {
  size_t used = (size_t)snprintf(buf, size, "%s", open);
  for (uint32_t i = 0; i < rank && used < size; i++)
    used += (size_t)snprintf(buf + used, size - used, "%s%lld", i ? ", " : "",
                             (long long)v[i]);
  if (used < size) snprintf(buf + used, size - used, "%s", close);
}

void tsr_diag_format_dims(char *buf, size_t size, const int64_t *dims, uint32_t rank) {
  format_tuple(buf, size, dims, rank, "[", "]");
}

void tsr_diag_format_point(char *buf, size_t size, const int64_t *point, uint32_t rank) {
  format_tuple(buf, size, point, rank, "(", ")");
}

void tsr_diag_format_out_of_bounds(char *buf, size_t size, const char *ref, const char *side,
                                   uint32_t rank, const int64_t *shape, const int64_t *limit,
                                   uint32_t dim, bool point, int64_t start, int64_t count,
                                   int64_t stride) {
  char dims[96], padded[112] = "", what[128];
  tsr_diag_format_dims(dims, sizeof dims, shape, rank);
  if (limit && memcmp(limit, shape, rank * sizeof *limit) != 0) {
    char l[96];
    tsr_diag_format_dims(l, sizeof l, limit, rank);
    snprintf(padded, sizeof padded, ", padded to %s", l);
  }
  if (side)
    snprintf(what, sizeof what, "%%%s (the DMA's %s)", ref, side);
  else
    snprintf(what, sizeof what, "%%%s", ref);
  if (point)
    snprintf(buf, size, "index %lld out of bounds for dimension %u of %s (shape %s%s)",
             (long long)start, dim, what, dims, padded);
  else
    snprintf(buf, size, "slice %lld:%lld:%lld out of bounds for dimension %u of %s (shape %s%s)",
             (long long)start, (long long)(start + (count - 1) * stride + 1), (long long)stride,
             dim, what, dims, padded);
}

void tsr_diag_format_block_range(char *buf, size_t size, uint32_t rank, const int64_t *bi,
                                 const int64_t *array, const int64_t *block) {
  char b[96], shape[96], blk[96], nb[96];
  int64_t counts[TSR_MAX_RANK];
  for (uint32_t d = 0; d < rank; d++)
    counts[d] = block[d] > 0 ? (array[d] + block[d] - 1) / block[d] : 0;
  tsr_diag_format_dims(b, sizeof b, bi, rank);
  tsr_diag_format_dims(shape, sizeof shape, array, rank);
  tsr_diag_format_dims(blk, sizeof blk, block, rank);
  tsr_diag_format_dims(nb, sizeof nb, counts, rank);
  snprintf(buf, size,
           "index map gives block index %s, out of range for array shape %s with block %s "
           "(block counts %s)",
           b, shape, blk, nb);
}

void tsr_diag_format_element(char *buf, size_t size, const char *name, uint32_t rank,
                             const int64_t *dims, int64_t flat) {
  if (!rank || flat < 0) {
    snprintf(buf, size, "%%%s", name);
    return;
  }
  int64_t idx[TSR_MAX_RANK];
  tsr_interp_unflatten(flat, rank, dims, idx);
  char at[96];
  tsr_diag_format_dims(at, sizeof at, idx, rank);
  snprintf(buf, size, "%%%s%s", name, at);
}

void tsr_diag_format_op(char *buf, size_t size, tsr_opcode_t opcode) {
  snprintf(buf, size, "'%s'", tsr_op_table[opcode].mnemonic);
}

/* ---- The interpreter's way in ---- */

tsr_diag_where_t tsr_interp_where(const run_t *run, uint32_t site) {
  const site_t *s = &run->p->sites[site];
  return (tsr_diag_where_t){site,      s->loc,     s->what,           run->device,
                            run->core, run->point, run->p->grid_rank, NULL};
}

static void kernel_vreport(run_t *run, uint32_t site, const tsr_diag_detail_t *detail,
                           tsr_diag_kind_t kind, tsr_diag_severity_t severity,
                           const char *fmt, va_list ap) TSR_PRINTF(6, 0);
static void kernel_vreport(run_t *run, uint32_t site, const tsr_diag_detail_t *detail,
                           tsr_diag_kind_t kind, tsr_diag_severity_t severity,
                           const char *fmt, va_list ap) {
  tsr_diag_where_t where = tsr_interp_where(run, site);
  where.detail = detail;
  if (tsr_diag_vreport(&run->sh->diag, &where, kind, severity, fmt, ap))
    run->sh->aborted = true;
}

void tsr_interp_kernel_report(run_t *run, uint32_t site, tsr_diag_kind_t kind,
                              tsr_diag_severity_t severity, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  kernel_vreport(run, site, NULL, kind, severity, fmt, ap);
  va_end(ap);
}

void tsr_interp_kernel_report_detail(run_t *run, uint32_t site, const tsr_diag_detail_t *detail,
                                     tsr_diag_kind_t kind, tsr_diag_severity_t severity,
                                     const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  kernel_vreport(run, site, detail, kind, severity, fmt, ap);
  va_end(ap);
}
