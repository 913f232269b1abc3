/* Diagnostic records (tessera/api.h): lists of tsr_diagnostic_t, made from
 * the records a run's diagnostics sink kept (interp/diag.h), or read from the
 * text of a status for failures before a run (parse, verify, create). */
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
};
_Static_assert(TSR_ARRAY_SIZE(kind_names) == TSR_DIAG_KIND_COUNT,
               "a name for every diagnostic kind");

const char *tsr_diagnostic_kind_name(tsr_diagnostic_kind_t kind) {
  return (unsigned)kind < TSR_DIAG_KIND_COUNT ? kind_names[kind] : "?";
}

const char *tsr_diagnostic_severity_name(tsr_diagnostic_severity_t severity) {
  switch (severity) {
  case TSR_SEVERITY_ERROR: return "error";
  case TSR_SEVERITY_WARNING: return "warning";
  case TSR_SEVERITY_NOTE: return "note";
  }
  return "?";
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

/* ---- Records read from the text of a status ---------------------------------------
 * Parse and verify errors reach the caller as a status whose message holds
 * "FILE:LINE:COL: SEVERITY: MESSAGE" lines (ir/ collects them as text in a
 * tsr_diag_list_t, base/), so their records are read back from those lines:
 * the location, the severity and the message; the kind comes from the
 * status code. Runs do not come here: their records are the sink's. */

typedef struct cursor {
  const char *p, *end;
} cursor_t;

static bool eat(cursor_t *c, const char *word) {
  size_t n = strlen(word);
  if ((size_t)(c->end - c->p) < n || memcmp(c->p, word, n) != 0) return false;
  c->p += n;
  return true;
}

static bool eat_int(cursor_t *c, int64_t *out) {
  const char *q = c->p;
  if (q >= c->end || *q < '0' || *q > '9') return false;
  int64_t v = 0;
  while (q < c->end && *q >= '0' && *q <= '9' && v < INT64_MAX / 16) v = v * 10 + (*q++ - '0');
  *out = v;
  c->p = q;
  return true;
}

static const char *find(const char *p, const char *end, const char *needle) {
  size_t n = strlen(needle);
  for (; p + n <= end; p++)
    if (memcmp(p, needle, n) == 0) return p;
  return NULL;
}

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


/* "FILE:LINE:COL: SEVERITY: " at the start of the line: sets the location
 * and severity, leaves the cursor on the message. */
static void parse_location(cursor_t *c, tsr_diagnostic_t *d, const char **file,
                           size_t *file_len) {
  static const struct {
    const char *word;
    tsr_diagnostic_severity_t severity;
  } severities[] = {{"error: ", TSR_SEVERITY_ERROR},
                    {"warning: ", TSR_SEVERITY_WARNING},
                    {"note: ", TSR_SEVERITY_NOTE}};
  for (size_t i = 0; i < TSR_ARRAY_SIZE(severities); i++) {
    if (eat(c, severities[i].word)) { /* no location */
      d->severity = severities[i].severity;
      return;
    }
    char tag[16];
    snprintf(tag, sizeof tag, ": %s", severities[i].word);
    const char *at = find(c->p, c->end, tag);
    if (!at) continue;
    /* FILE:LINE:COL before the tag, the numbers read from the right */
    const char *q = at;
    int64_t nums[2] = {-1, -1};
    size_t got = 0;
    while (got < 2) {
      const char *digits = q;
      while (digits > c->p && digits[-1] >= '0' && digits[-1] <= '9') digits--;
      if (digits == q || digits == c->p || digits[-1] != ':') break;
      cursor_t n = {digits, q};
      eat_int(&n, &nums[got++]);
      q = digits - 1;
    }
    if (got != 2) continue;
    *file = c->p;
    *file_len = (size_t)(q - c->p);
    d->line = (int32_t)nums[1];
    d->col = (int32_t)nums[0];
    d->severity = severities[i].severity;
    c->p = at + strlen(tag);
    return;
  }
}

/* One line into one record. */
static tsr_status_t parse_line(tsr_diagnostic_list_t *list, tsr_status_code_t code,
                               const char *line, size_t size) {
  tsr_diagnostic_t *d = append(list);
  if (!d) return TSR_OOM();
  d->severity = TSR_SEVERITY_ERROR;
  cursor_t c = {line, line + size};
  const char *file = NULL;
  size_t file_len = 0;
  parse_location(&c, d, &file, &file_len);
  d->kind = d->severity == TSR_SEVERITY_NOTE ? TSR_DIAG_OTHER : kind_from_code(code);
  if (!keep(list, file ? file : "", file_len, &d->file) || !keep(list, "", 0, &d->kernel) ||
      !keep(list, "", 0, &d->op) || !keep(list, "", 0, &d->buffer) ||
      !keep(list, "", 0, &d->other_op) ||
      !keep(list, c.p, (size_t)(line + size - c.p), &d->message) ||
      !keep(list, line, size, &d->text))
    return TSR_OOM();
  return NULL;
}

tsr_status_t tsr_diagnostic_list_add_text(tsr_diagnostic_list_t *list,
                                          tsr_status_code_t code, const char *text,
                                          size_t size) {
  const char *p = text, *end = text + size;
  while (p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    const char *line_end = nl ? nl : end;
    if (line_end > p) TSR_RETURN_IF_ERROR(parse_line(list, code, p, (size_t)(line_end - p)));
    p = nl ? nl + 1 : end;
  }
  return NULL;
}

tsr_status_t tsr_diagnostic_list_create_from_status(const tsr_status_t status,
                                                    tsr_diagnostic_list_t **out_list) {
  if (!out_list)
    return TSR_STATUS(TSR_INVALID_ARGUMENT,
                      "tsr_diagnostic_list_create_from_status: NULL argument");
  tsr_diagnostic_list_t *list = NULL;
  TSR_RETURN_IF_ERROR(tsr_diagnostic_list_create(&list));
  const char *message = tsr_status_message(status);
  tsr_status_t s =
      tsr_diagnostic_list_add_text(list, tsr_status_code(status), message, strlen(message));
  if (s) {
    tsr_diagnostic_list_destroy(list);
    return s;
  }
  *out_list = list;
  return NULL;
}
