/* Golden tests of the IR text format, one TAP case per file:
 *   ok       each tests/ir/ok/NAME.tsr parses, verifies and prints back byte
 *            for byte;
 *   error    each tests/ir/errors/NAME.tsr fails to parse (or to verify) with exactly
 *            the diagnostics of the sibling .expected file;
 *   canon    every other .tsr under kernels/ and tests/ is canonical (up to
 *            comments and blank lines) and
 *            survives parse -> print -> parse -> print unchanged.
 * Paths are given to the parser relative to $TSR_SOURCE_ROOT, so expected
 * diagnostics do not depend on the checkout's location. */
#include <dirent.h>
#include <sys/stat.h>

#include "base/base_internal.h"
#include "ir/ir.h"
#include "tests/harness.h"

/* Fixtures of other tests that are not canonical on purpose. */
static const struct {
  const char *path;
  bool parses; /* false: a parse error on purpose (not checked here) */
} not_canonical[] = {
    {"tests/cli/noncanonical.tsr", true}, /* `tessera fmt` input */
    {"tests/cli/parse_error.tsr", false}, /* CLI diagnostics test */
};

/* ---- File lists ---------------------------------------------------------- */

typedef struct path_list {
  char **paths;
  size_t count, capacity;
} path_list_t;

static void list_add(path_list_t *l, const char *path) {
  if (l->count == l->capacity) {
    l->capacity = l->capacity ? l->capacity * 2 : 64;
    l->paths = realloc(l->paths, l->capacity * sizeof *l->paths);
    if (!l->paths) abort();
  }
  l->paths[l->count] = strdup(path);
  if (!l->paths[l->count]) abort();
  l->count++;
}

static void list_free(path_list_t *l) {
  for (size_t i = 0; i < l->count; i++) free(l->paths[i]);
  free(l->paths);
}

static int compare_paths(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

static const char *source_root(void) {
  const char *root = getenv("TSR_SOURCE_ROOT");
  return root && *root ? root : ".";
}

/* Appends every .tsr file under `rel` (relative to the source root),
 * recursively; with `recurse` false only the directory itself. */
static void collect(const char *rel, bool recurse, path_list_t *out) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/%s", source_root(), rel);
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    char child[4096], full[8192];
    snprintf(child, sizeof child, "%s/%s", rel, e->d_name);
    snprintf(full, sizeof full, "%s/%s", source_root(), child);
    struct stat st;
    if (stat(full, &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      if (recurse) collect(child, true, out);
    } else if (S_ISREG(st.st_mode) && ends_with(child, ".tsr")) {
      list_add(out, child);
    }
  }
  closedir(d);
}

static void sort_list(path_list_t *l) {
  if (l->count) qsort(l->paths, l->count, sizeof *l->paths, compare_paths);
}

/* ---- Helpers --------------------------------------------------------------- */

/* Runs one case under `name` (the harness's TSR_RUN with a dynamic name). */
static void run_case(const char *kind, const char *path,
                     void (*fn)(const char *path)) {
  tsr_test_case_failed = 0;
  fn(path);
  tsr_test_count++;
  if (tsr_test_case_failed) tsr_test_failed_count++;
  printf("%s %d - %s %s\n", tsr_test_case_failed ? "not ok" : "ok", tsr_test_count,
         kind, path);
  fflush(stdout);
}

/* Parses `text` named `path`; NULL module on failure (status returned). */
static tsr_status_t parse(const char *path, const char *text, size_t len,
                          tsr_module_t **out) {
  *out = NULL;
  return tsr_ir_parse(path, text, len, out);
}

/* The module's canonical text (malloc'd). */
static char *print_module(const tsr_module_t *m) {
  tsr_strbuf_t sb;
  tsr_strbuf_initialize(&sb);
  tsr_ir_print_module(&sb, m);
  if (sb.failed) {
    tsr_strbuf_deinitialize(&sb);
    return NULL;
  }
  /* a malloc'd copy: the test frees it with free() */
  char *text = strdup(sb.data ? sb.data : "");
  tsr_strbuf_deinitialize(&sb);
  return text;
}

/* Parse -> print: the printed text, or NULL (reported) on a parse error. */
static char *parse_print(const char *path, const char *text, size_t len) {
  tsr_module_t *m;
  tsr_status_t s = parse(path, text, len, &m);
  if (s) {
    TSR_FAIL_AT("%s does not parse:\n%s", path, tsr_status_message(s));
    tsr_status_free(s);
    return NULL;
  }
  char *out = print_module(m);
  tsr_module_destroy(m);
  if (!out) TSR_FAIL_AT("%s: printing ran out of memory", path);
  return out;
}

/* Reports the first line where `got` and `want` differ. */
static void check_same_text(const char *what, const char *got, const char *want) {
  if (strcmp(got, want) == 0) return;
  size_t line = 1, i = 0;
  while (got[i] && got[i] == want[i]) {
    if (got[i] == '\n') line++;
    i++;
  }
  size_t start = i;
  while (start > 0 && got[start - 1] != '\n') start--;
  const char *ge = strchr(got + start, '\n'), *we = strchr(want + start, '\n');
  int gl = ge ? (int)(ge - got - start) : (int)strlen(got + start);
  int wl = we ? (int)(we - want - start) : (int)strlen(want + start);
  TSR_FAIL_AT("%s: first difference at line %zu:\n  got:      %.*s\n  expected: %.*s",
              what, line, gl, got + start, wl, want + start);
}

/* ---- The three kinds of cases ---------------------------------------------- */

static void case_ok(const char *path) {
  size_t len;
  char *text = tsr_test_read_source(path, &len);
  if (!text) {
    TSR_FAIL_AT("cannot read %s", path);
    return;
  }
  tsr_module_t *m;
  tsr_status_t s = parse(path, text, len, &m);
  if (s) {
    TSR_FAIL_AT("%s does not parse:\n%s", path, tsr_status_message(s));
    tsr_status_free(s);
    free(text);
    return;
  }
  s = tsr_ir_verify(m);
  if (s) {
    TSR_FAIL_AT("%s does not verify:\n%s", path, tsr_status_message(s));
    tsr_status_free(s);
  }
  char *printed = print_module(m);
  if (printed) check_same_text(path, printed, text);
  free(printed);
  tsr_module_destroy(m);
  free(text);
}

static void case_error(const char *path) {
  size_t len;
  char *text = tsr_test_read_source(path, &len);
  char expected_path[1024];
  snprintf(expected_path, sizeof expected_path, "%.*s.expected",
           (int)(strlen(path) - strlen(".tsr")), path);
  char *expected = tsr_test_read_source(expected_path, NULL);
  if (!text || !expected) {
    TSR_FAIL_AT("cannot read %s", text ? expected_path : path);
    free(text);
    free(expected);
    return;
  }
  size_t n = strlen(expected);
  while (n && (expected[n - 1] == '\n' || expected[n - 1] == '\r')) expected[--n] = 0;
  tsr_module_t *m;
  tsr_status_t s = parse(path, text, len, &m);
  if (!s) {
    s = tsr_ir_verify(m);
    tsr_module_destroy(m);
  }
  if (!s) {
    TSR_FAIL_AT("%s parses and verifies, but should fail with:\n%s", path, expected);
  } else {
    check_same_text(path, tsr_status_message(s), expected);
    tsr_status_free(s);
  }
  free(text);
  free(expected);
}

/* The lines of `text` without comments, trailing spaces and blank lines
 * (malloc'd): a file in the tree is canonical if it is the printer's text up
 * to comments and blank lines, so kernels may carry explanations. */
static char *without_comments(const char *text) {
  size_t n = strlen(text);
  char *out = malloc(n + 1), *w = out;
  if (!out) return NULL;
  const char *line = text;
  while (*line) {
    const char *end = strchr(line, '\n');
    if (!end) end = line + strlen(line);
    const char *cut = end;
    bool in_string = false;
    for (const char *c = line; c < end; c++) {
      if (*c == '"' && (c == line || c[-1] != '\\')) in_string = !in_string;
      if (!in_string && c[0] == '/' && c + 1 < end && c[1] == '/') {
        cut = c;
        break;
      }
    }
    while (cut > line && (cut[-1] == ' ' || cut[-1] == '\t' || cut[-1] == '\r')) cut--;
    if (cut > line) {
      memcpy(w, line, (size_t)(cut - line));
      w += cut - line;
      *w++ = '\n';
    }
    line = *end ? end + 1 : end;
  }
  *w = '\0';
  return out;
}

static void case_canonical(const char *path) {
  bool must_be_canonical = true;
  for (size_t i = 0; i < TSR_ARRAY_SIZE(not_canonical); i++) {
    if (strcmp(path, not_canonical[i].path) != 0) continue;
    if (!not_canonical[i].parses) {
      printf("# %s: a parse error on purpose, not checked\n", path);
      return;
    }
    must_be_canonical = false;
  }
  size_t len;
  char *text = tsr_test_read_source(path, &len);
  if (!text) {
    TSR_FAIL_AT("cannot read %s", path);
    return;
  }
  char *once = parse_print(path, text, len);
  char *twice = once ? parse_print(path, once, strlen(once)) : NULL;
  if (once && twice) check_same_text("print -> parse -> print", twice, once);
  if (once && must_be_canonical) {
    char *source = without_comments(text), *printed = without_comments(once);
    if (source && printed) check_same_text(path, printed, source);
    free(source);
    free(printed);
  }
  free(twice);
  free(once);
  free(text);
}

int main(void) {
  path_list_t ok = {0}, errors = {0}, all = {0};
  collect("tests/ir/ok", false, &ok);
  collect("tests/ir/errors", false, &errors);
  collect("kernels", true, &all);
  collect("tests", true, &all);
  sort_list(&ok);
  sort_list(&errors);
  sort_list(&all);
  /* A test that finds nothing would pass vacuously. */
  if (ok.count == 0 || errors.count == 0 || all.count == 0)
    printf("not ok 1 - no golden files found under %s\n1..1\n", source_root());
  if (ok.count == 0 || errors.count == 0 || all.count == 0) return 1;

  for (size_t i = 0; i < ok.count; i++) run_case("ok", ok.paths[i], case_ok);
  for (size_t i = 0; i < errors.count; i++)
    run_case("error", errors.paths[i], case_error);
  for (size_t i = 0; i < all.count; i++) {
    if (strncmp(all.paths[i], "tests/ir/errors/", 16) == 0) continue;
    run_case("canonical", all.paths[i], case_canonical);
  }
  list_free(&ok);
  list_free(&errors);
  list_free(&all);
  return tsr_test_done();
}
