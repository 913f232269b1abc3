/* Diagnostic records (tessera/api.h): lists of tsr_diagnostic_t and, as a
 * STOP-GAP, the records read back from diagnostic text (status messages and
 * warning lines), until the interpreter's diagnostics module hands its
 * records over directly; see parse_line. */
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

/* ---- Reading records back from text (STOP-GAP) ------------------------------------
 * The interpreter and the CPU runtime report diagnostics as text lines
 *   FILE:LINE:COL: SEVERITY: kernel @K[, device D][, core C], grid point (..): 'op': TEXT
 * (docs/semantics.md). Until their diagnostics module hands records to the
 * runtime, the fields are read back from those lines and the kind is
 * guessed from the status code (parse, verify, ...) or from the wording of
 * the message. Only what the text says is filled in. */

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
  bool negative = q < c->end && *q == '-';
  if (negative) q++;
  if (q >= c->end || *q < '0' || *q > '9') return false;
  int64_t v = 0;
  while (q < c->end && *q >= '0' && *q <= '9' && v < INT64_MAX / 16) v = v * 10 + (*q++ - '0');
  *out = negative ? -v : v;
  c->p = q;
  return true;
}

static bool is_name_char(char ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
         ch == '_' || ch == '.' || ch == '$';
}

/* "(a, b, ..)" into point[]; false (cursor unchanged) if it is not one. */
static bool eat_point(cursor_t *c, uint32_t *out_rank, int64_t *point) {
  cursor_t t = *c;
  if (!eat(&t, "(")) return false;
  uint32_t rank = 0;
  int64_t v;
  while (!eat(&t, ")")) {
    if (rank == TSR_MAX_RANK || !eat_int(&t, &v)) return false;
    point[rank++] = v;
    if (!eat(&t, ", ") && !(t.p < t.end && *t.p == ')')) return false;
  }
  *c = t;
  *out_rank = rank;
  return true;
}

/* "[a, b:c, d:e:s]" into [lo, hi) per dimension. */
static void eat_range(cursor_t *c, tsr_diagnostic_t *d) {
  cursor_t t = *c;
  if (!eat(&t, "[")) return;
  uint32_t rank = 0;
  while (!eat(&t, "]")) {
    int64_t lo, hi, stride;
    if (rank == TSR_MAX_RANK || !eat_int(&t, &lo)) return;
    hi = lo + 1;
    if (eat(&t, ":") && !eat_int(&t, &hi)) return;
    if (eat(&t, ":") && !eat_int(&t, &stride)) return;
    d->index_lo[rank] = lo;
    d->index_hi[rank] = hi;
    rank++;
    if (!eat(&t, ", ") && !(t.p < t.end && *t.p == ']')) return;
  }
  d->index_rank = rank;
  *c = t;
}

static const char *find(const char *p, const char *end, const char *needle) {
  size_t n = strlen(needle);
  for (; p + n <= end; p++)
    if (memcmp(p, needle, n) == 0) return p;
  return NULL;
}

/* The kind the wording of a kernel diagnostic says. */
static tsr_diagnostic_kind_t kind_from_message(const char *p, const char *end) {
  static const struct {
    const char *words;
    tsr_diagnostic_kind_t kind;
  } rules[] = {
      {"data race", TSR_DIAG_RACE},
      {"deadlock", TSR_DIAG_DEADLOCK},
      {"out of range: the run has", TSR_DIAG_DEVICE_RANGE},
      {"out of range: a device has", TSR_DIAG_DEVICE_RANGE},
      {"out of bounds", TSR_DIAG_OUT_OF_BOUNDS},
      {"out of range", TSR_DIAG_OUT_OF_BOUNDS},
      {"uninitialized memory", TSR_DIAG_UNINITIALIZED},
      {"output elements were never written", TSR_DIAG_OUTPUT_UNWRITTEN},
      {"output elements was never written", TSR_DIAG_OUTPUT_UNWRITTEN},
      {"is revisited", TSR_DIAG_REVISIT},
      {"is written by core", TSR_DIAG_CORE_CONFLICT},
      {"still in flight", TSR_DIAG_DMA_IN_FLIGHT},
      {"while a DMA", TSR_DIAG_DMA_IN_FLIGHT},
      {"at kernel end", TSR_DIAG_SEMAPHORE_LEFTOVER},
      {"of VMEM but chip", TSR_DIAG_VMEM_BUDGET},
      {"assertion failed", TSR_DIAG_ASSERT},
      {"run stopped", TSR_DIAG_RUN_STOPPED},
      {"views differ", TSR_DIAG_SHAPE_MISMATCH},
  };
  for (size_t i = 0; i < TSR_ARRAY_SIZE(rules); i++)
    if (find(p, end, rules[i].words)) return rules[i].kind;
  return TSR_DIAG_OTHER;
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

/* An arena copy of [p, p + n) as a NUL-terminated view. */
static bool keep(tsr_diagnostic_list_t *list, const char *p, size_t n,
                 tsr_string_view_t *out) {
  char *s = tsr_arena_strndup(&list->arena, p, n);
  if (!s) return false;
  *out = (tsr_string_view_t){s, n};
  return true;
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
  tsr_diagnostic_t d;
  memset(&d, 0, sizeof d);
  d.line = d.col = d.core = d.device = d.other_line = -1;
  d.severity = TSR_SEVERITY_ERROR;
  cursor_t c = {line, line + size};
  const char *file = NULL;
  size_t file_len = 0;
  parse_location(&c, &d, &file, &file_len);
  const char *message = c.p;
  const char *kernel = NULL, *op = NULL, *buffer = NULL;
  size_t kernel_len = 0, op_len = 0, buffer_len = 0;
  /* kernel @K[, device D][, core C][, grid point (..)]: */
  if (eat(&c, "kernel @")) {
    kernel = c.p;
    while (c.p < c.end && is_name_char(*c.p)) c.p++;
    kernel_len = (size_t)(c.p - kernel);
    int64_t v;
    for (;;) {
      if (eat(&c, ", device ") && eat_int(&c, &v)) {
        d.device = (int32_t)v;
      } else if (eat(&c, ", core ") && eat_int(&c, &v)) {
        d.core = (int32_t)v;
      } else if (eat(&c, ", grid point ") && eat_point(&c, &d.grid_rank, d.grid_point)) {
      } else {
        break;
      }
    }
    eat(&c, ": ");
  }
  /* 'op': or the pipeline's "out %y:" */
  if (eat(&c, "'")) {
    op = c.p;
    while (c.p < c.end && *c.p != '\'') c.p++;
    op_len = (size_t)(c.p - op);
    eat(&c, "'");
  } else {
    static const char *const works[] = {"in %", "out %", "prefetch %", "scratch %",
                                        "scoped %"};
    for (size_t i = 0; i < TSR_ARRAY_SIZE(works); i++) {
      cursor_t t = c;
      if (!eat(&t, works[i])) continue;
      while (t.p < t.end && is_name_char(*t.p)) t.p++;
      if (t.p < t.end && *t.p == ':') {
        op = c.p;
        op_len = (size_t)(t.p - c.p);
      }
      break;
    }
  }
  /* the first buffer named, and its index range */
  const char *pct = find(c.p, c.end, "%");
  if (pct) {
    cursor_t t = {pct + 1, c.end};
    while (t.p < t.end && is_name_char(*t.p)) t.p++;
    buffer = pct + 1;
    buffer_len = (size_t)(t.p - buffer);
    eat_range(&t, &d);
  }
  d.kind = code == TSR_KERNEL_ERROR || code == TSR_OK ? kind_from_message(message, c.end)
                                                      : kind_from_code(code);
  if (d.severity == TSR_SEVERITY_NOTE) d.kind = TSR_DIAG_OTHER;
  /* a race's second access: "... and read by 'load' (line 12) at grid point (0)" */
  const char *other_op = NULL;
  size_t other_len = 0;
  const char *second = d.kind == TSR_DIAG_RACE ? find(c.p, c.end, " and ") : NULL;
  const char *by = second ? find(second, c.end, " by '") : NULL;
  if (by) {
    cursor_t t = {by + 5, c.end};
    other_op = t.p;
    while (t.p < t.end && *t.p != '\'') t.p++;
    other_len = (size_t)(t.p - other_op);
    int64_t v;
    if (eat(&t, "' (line ") && eat_int(&t, &v)) d.other_line = (int32_t)v;
    eat(&t, ")");
    if (eat(&t, " at grid point ")) eat_point(&t, &d.other_grid_rank, d.other_grid_point);
  }
  if (!keep(list, file ? file : "", file_len, &d.file) ||
      !keep(list, kernel ? kernel : "", kernel_len, &d.kernel) ||
      !keep(list, op ? op : "", op_len, &d.op) ||
      !keep(list, buffer ? buffer : "", buffer_len, &d.buffer) ||
      !keep(list, other_op ? other_op : "", other_len, &d.other_op) ||
      !keep(list, message, (size_t)(line + size - message), &d.message) ||
      !keep(list, line, size, &d.text))
    return TSR_OOM();
  if (list->count == list->capacity) {
    size_t cap = list->capacity ? list->capacity * 2 : 8;
    tsr_diagnostic_t *items = tsr_realloc(list->items, cap * sizeof *items);
    if (!items) return TSR_OOM();
    list->items = items;
    list->capacity = cap;
  }
  list->items[list->count++] = d;
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
