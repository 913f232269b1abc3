/* Status objects: a code, a message (one or more diagnostic lines) and the C
 * file and line that made it. NULL means success. */
#include <stdio.h>
#include <stdlib.h>

#include "base/base_internal.h"

struct tsr_status {
  tsr_status_code_t code;
  const char *c_file;
  int c_line;
  char *message;
};

/* Statuses must be creatable even when allocation fails: fall back to a
 * static object that tsr_status_free recognises. */
static struct tsr_status oom_status = {TSR_OUT_OF_MEMORY, __FILE__, __LINE__,
                                       (char *)"out of memory"};

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
  free(status->message);
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
  free(status->message);
  free(status);
}

/* ---- Diagnostic lists ---- */

void tsr_diag_list_initialize(tsr_diag_list_t *list, size_t limit) {
  tsr_strbuf_initialize(&list->text);
  list->count = 0;
  list->limit = limit;
  list->severity = "error";
}

void tsr_diag_list_deinitialize(tsr_diag_list_t *list) {
  tsr_strbuf_deinitialize(&list->text);
  list->count = 0;
}

void tsr_diag_vadd(tsr_diag_list_t *list, tsr_loc_t loc, const char *fmt,
                   va_list ap) {
  list->count++;
  if (list->limit && list->count > list->limit) return;
  if (list->text.size) tsr_strbuf_puts(&list->text, "\n");
  tsr_strbuf_printf(&list->text, "%s:%u:%u: %s: ",
                    loc.file ? loc.file : "<unknown>", loc.line, loc.col,
                    list->severity);
  tsr_strbuf_vprintf(&list->text, fmt, ap);
}

void tsr_diag_add(tsr_diag_list_t *list, tsr_loc_t loc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  tsr_diag_vadd(list, loc, fmt, ap);
  va_end(ap);
}

tsr_status_t tsr_diag_list_to_status(tsr_diag_list_t *list,
                                     tsr_status_code_t code) {
  if (list->count == 0) return NULL;
  if (list->limit && list->count > list->limit)
    tsr_strbuf_printf(&list->text, "\nnote: %zu more %ss not shown",
                      list->count - list->limit, list->severity);
  if (list->text.failed) return TSR_OOM();
  return TSR_STATUS(code, "%s", list->text.data);
}
