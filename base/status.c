/* Status objects: a code, a message (one or more diagnostic lines), the C
 * file and line that made it, and the records of its located diagnostics;
 * the diagnostic lists they are made from. NULL means success. */
#include <stdio.h>
#include <stdlib.h>

#include "base/base_internal.h"

struct tsr_status {
  tsr_status_code_t code;
  const char *c_file;
  int c_line;
  char *message;
  tsr_status_records_t records; /* empty unless made from located diagnostics */
};

/* Statuses must be creatable even when allocation fails: fall back to a
 * static object that tsr_status_free recognises. */
static struct tsr_status oom_status = {TSR_OUT_OF_MEMORY, __FILE__, __LINE__,
                                       (char *)"out of memory", {0}};

static void records_deinitialize(tsr_status_records_t *records) {
  tsr_free(records->items);
  tsr_arena_deinitialize(&records->arena);
  memset(records, 0, sizeof *records);
}

static tsr_status_t status_vmake(tsr_status_code_t code, const char *c_file,
                                 int c_line, const char *fmt, va_list ap)
    TSR_PRINTF(4, 0);

static tsr_status_t status_vmake(tsr_status_code_t code, const char *c_file,
                                 int c_line, const char *fmt, va_list ap) {
  tsr_status_t s = malloc(sizeof *s);
  if (!s) return &oom_status;
  tsr_strbuf_t sb;
  tsr_strbuf_initialize(&sb);
  tsr_strbuf_vprintf(&sb, fmt, ap);
  if (sb.failed) {
    free(s);
    tsr_strbuf_deinitialize(&sb);
    return &oom_status;
  }
  s->code = code;
  s->c_file = c_file;
  s->c_line = c_line;
  s->message = tsr_strbuf_take(&sb);
  memset(&s->records, 0, sizeof s->records);
  tsr_arena_initialize(&s->records.arena);
  return s;
}

tsr_status_t tsr_status_make(tsr_status_code_t code, const char *c_file,
                             int c_line, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  tsr_status_t s = status_vmake(code, c_file, c_line, fmt, ap);
  va_end(ap);
  return s;
}

tsr_status_t tsr_status_oom_bytes(const char *c_file, int c_line, size_t bytes,
                                  const char *what_fmt, ...) {
  static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  char size[32] = "";
  double v = (double)bytes;
  for (size_t u = 0; u < TSR_ARRAY_SIZE(units) && v >= 1024; u++) {
    v /= 1024;
    snprintf(size, sizeof size, " (%.2f %s)", v, units[u]);
  }
  tsr_strbuf_t what;
  tsr_strbuf_initialize(&what);
  va_list ap;
  va_start(ap, what_fmt);
  tsr_strbuf_vprintf(&what, what_fmt, ap);
  va_end(ap);
  tsr_status_t s = what.failed ? &oom_status
                               : tsr_status_make(TSR_OUT_OF_MEMORY, c_file, c_line,
                                                 "cannot allocate %zu bytes%s for %s",
                                                 bytes, size, what.data);
  tsr_strbuf_deinitialize(&what);
  return s;
}

tsr_status_t tsr_status_annotate(tsr_status_t status, const char *fmt, ...) {
  if (!status || status == &oom_status) return status;
  tsr_strbuf_t sb;
  tsr_strbuf_initialize(&sb);
  va_list ap;
  va_start(ap, fmt);
  tsr_strbuf_vprintf(&sb, fmt, ap);
  va_end(ap);
  tsr_strbuf_puts(&sb, ": ");
  tsr_strbuf_puts(&sb, status->message);
  if (sb.failed) {
    tsr_strbuf_deinitialize(&sb);
    return status;
  }
  tsr_free(status->message);
  status->message = tsr_strbuf_take(&sb);
  return status;
}

tsr_status_code_t tsr_status_code(const tsr_status_t status) {
  return status ? status->code : TSR_OK;
}

const char *tsr_status_message(const tsr_status_t status) {
  return status ? status->message : "";
}

size_t tsr_status_diagnostic_count(const tsr_status_t status) {
  if (!status) return 0;
  size_t n = 1;
  for (const char *p = status->message; *p; p++)
    if (*p == '\n' && p[1]) n++;
  return n;
}

size_t tsr_status_record_count(const tsr_status_t status) {
  return status ? status->records.count : 0;
}

const tsr_status_record_t *tsr_status_record_get(const tsr_status_t status, size_t i) {
  return status && i < status->records.count ? &status->records.items[i] : NULL;
}

const char *tsr_diagnostic_severity_name(tsr_diagnostic_severity_t severity) {
  switch (severity) {
  case TSR_SEVERITY_ERROR: return "error";
  case TSR_SEVERITY_WARNING: return "warning";
  case TSR_SEVERITY_NOTE: return "note";
  }
  return "?";
}

const char *tsr_status_code_name(tsr_status_code_t code) {
  static const char *const names[] = {
      "ok",          "invalid argument", "parse error",
      "verify error", "kernel error",    "I/O error",
      "format error", "not found",       "out of memory",
      "resource exhausted", "unimplemented", "internal error"};
  _Static_assert(TSR_ARRAY_SIZE(names) == TSR_STATUS_CODE_COUNT,
                 "one name per status code");
  return (unsigned)code < TSR_STATUS_CODE_COUNT ? names[code] : "unknown";
}

void tsr_status_free(tsr_status_t status) {
  if (!status || status == &oom_status) return;
  tsr_free(status->message);
  records_deinitialize(&status->records);
  free(status);
}

/* ---- Diagnostic lists ---- */

void tsr_diag_list_initialize(tsr_diag_list_t *list, size_t limit) {
  tsr_strbuf_initialize(&list->text);
  memset(&list->records, 0, sizeof list->records);
  tsr_arena_initialize(&list->records.arena);
  list->count = 0;
  list->limit = limit;
  list->severity = TSR_SEVERITY_ERROR;
}

void tsr_diag_list_deinitialize(tsr_diag_list_t *list) {
  tsr_strbuf_deinitialize(&list->text);
  records_deinitialize(&list->records);
  list->count = 0;
}

/* Records the line the text got from offset `start` on; its message
 * starts at `message`. */
static void keep_line(tsr_diag_list_t *list, tsr_diagnostic_severity_t severity,
                      const tsr_loc_t *loc, const char *op, size_t start, size_t message) {
  tsr_status_records_t *r = &list->records;
  if (list->text.failed) return;
  if (r->count == r->capacity) {
    size_t cap = r->capacity ? r->capacity * 2 : 8;
    tsr_status_record_t *items = tsr_realloc(r->items, cap * sizeof *items);
    if (!items) {
      list->text.failed = true;
      return;
    }
    r->items = items;
    r->capacity = cap;
  }
  tsr_status_record_t *rec = &r->items[r->count];
  memset(rec, 0, sizeof *rec);
  rec->severity = severity;
  char *text = tsr_arena_strndup(&r->arena, list->text.data + start, list->text.size - start);
  rec->op = tsr_arena_strndup(&r->arena, op ? op : "", op ? strlen(op) : 0);
  if (loc) {
    rec->located = true;
    rec->loc = *loc;
    if (loc->file) rec->loc.file = tsr_arena_strndup(&r->arena, loc->file, strlen(loc->file));
  }
  if (!text || !rec->op || (loc && loc->file && !rec->loc.file)) {
    list->text.failed = true;
    return;
  }
  rec->text = text;
  rec->message = text + (message - start);
  r->count++;
}

void tsr_diag_vadd(tsr_diag_list_t *list, tsr_loc_t loc, const char *op, const char *fmt,
                   va_list ap) {
  list->count++;
  if (list->limit && list->count > list->limit) return;
  if (list->text.size) tsr_strbuf_puts(&list->text, "\n");
  size_t start = list->text.size;
  tsr_strbuf_printf(&list->text, "%s:%u:%u: %s: ",
                    loc.file ? loc.file : "<unknown>", loc.line, loc.col,
                    tsr_diagnostic_severity_name(list->severity));
  size_t message = list->text.size;
  tsr_strbuf_vprintf(&list->text, fmt, ap);
  keep_line(list, list->severity, &loc, op, start, message);
}

void tsr_diag_add(tsr_diag_list_t *list, tsr_loc_t loc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  tsr_diag_vadd(list, loc, NULL, fmt, ap);
  va_end(ap);
}

void tsr_diag_note(tsr_diag_list_t *list, const char *fmt, ...) {
  if (list->text.size) tsr_strbuf_puts(&list->text, "\n");
  size_t start = list->text.size;
  tsr_strbuf_puts(&list->text, "note: ");
  size_t message = list->text.size;
  va_list ap;
  va_start(ap, fmt);
  tsr_strbuf_vprintf(&list->text, fmt, ap);
  va_end(ap);
  keep_line(list, TSR_SEVERITY_NOTE, NULL, NULL, start, message);
}

/* The status of a list with at least one line: its text, and its records,
 * which move to the status. */
static tsr_status_t list_status(tsr_diag_list_t *list, tsr_status_code_t code,
                                const char *c_file, int c_line) {
  if (list->text.failed) return TSR_OOM();
  tsr_status_t s = tsr_status_make(code, c_file, c_line, "%s", list->text.data);
  if (s == &oom_status) return s;
  records_deinitialize(&s->records);
  s->records = list->records;
  memset(&list->records, 0, sizeof list->records);
  tsr_arena_initialize(&list->records.arena);
  return s;
}

tsr_status_t tsr_status_make_at(tsr_status_code_t code, const char *c_file, int c_line,
                                tsr_loc_t loc, const char *op, const char *fmt, ...) {
  tsr_diag_list_t list;
  tsr_diag_list_initialize(&list, 0);
  va_list ap;
  va_start(ap, fmt);
  tsr_diag_vadd(&list, loc, op, fmt, ap);
  va_end(ap);
  tsr_status_t s = list_status(&list, code, c_file, c_line);
  tsr_diag_list_deinitialize(&list);
  return s;
}

tsr_status_t tsr_diag_list_to_status(tsr_diag_list_t *list,
                                     tsr_status_code_t code) {
  if (list->count == 0) return NULL;
  if (list->limit && list->count > list->limit)
    tsr_diag_note(list, "%zu more %ss not shown", list->count - list->limit,
                  tsr_diagnostic_severity_name(list->severity));
  return list_status(list, code, __FILE__, __LINE__);
}

tsr_status_t tsr_status_copy(const tsr_status_t status) {
  if (!status || status == &oom_status) return status;
  tsr_status_t s;
  if (!status->records.count) {
    s = tsr_status_make(status->code, status->c_file, status->c_line, "%s", status->message);
  } else {
    tsr_diag_list_t list;
    tsr_diag_list_initialize(&list, 0);
    for (size_t i = 0; i < status->records.count; i++) {
      const tsr_status_record_t *rec = &status->records.items[i];
      if (list.text.size) tsr_strbuf_puts(&list.text, "\n");
      size_t start = list.text.size;
      tsr_strbuf_puts(&list.text, rec->text);
      keep_line(&list, rec->severity, rec->located ? &rec->loc : NULL, rec->op, start,
                start + (size_t)(rec->message - rec->text));
    }
    s = list_status(&list, status->code, status->c_file, status->c_line);
    tsr_diag_list_deinitialize(&list);
    /* the text may have been annotated since the records were made */
    char *message = s != &oom_status ? tsr_strndup(status->message, strlen(status->message))
                                     : NULL;
    if (!message) {
      tsr_status_free(s);
      return TSR_OOM();
    }
    tsr_free(s->message);
    s->message = message;
  }
  return s;
}
