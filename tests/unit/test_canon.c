/* Canonical bytes of a kernel (ir/canon.c): equal under consistent renaming,
 * comments, layout, re-printing and the file name; different under every
 * single-token semantic mutation of the tree's correct kernels (the printed
 * text is the oracle); and hand-made pairs that differ in one detail. */
#include <ctype.h>
#include <dirent.h>
#include <math.h>
#include <sys/stat.h>

#include "base/base_internal.h"
#include "ir/ir.h"
#include "tests/harness.h"

/* Directories (relative to $TSR_SOURCE_ROOT) of kernels that parse and
 * verify; every .tsr in them is checked. */
static const char *const kernel_dirs[] = {"kernels/examples", "tests/diagnostics/ok",
                                          "tests/ir/ok"};

/* Failures reported in full per file; the rest are only counted. Ops tried
 * in place of each op (the runtime under ASan grows with it). */
enum { MAX_REPORTED = 12, MAX_OP_SWAPS = 6 };

/* ---- File lists ------------------------------------------------------------ */

typedef struct path_list {
  char **paths;
  size_t count;
} path_list_t;

static int compare_paths(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static const char *source_root(void) {
  const char *root = getenv("TSR_SOURCE_ROOT");
  return root && *root ? root : ".";
}

static void collect(const char *rel, path_list_t *out) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/%s", source_root(), rel);
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    size_t n = strlen(e->d_name);
    if (e->d_name[0] == '.' || n < 5 || strcmp(e->d_name + n - 4, ".tsr") != 0)
      continue;
    char child[4096], full[8192];
    snprintf(child, sizeof child, "%s/%s", rel, e->d_name);
    snprintf(full, sizeof full, "%s/%s", source_root(), child);
    struct stat st;
    if (stat(full, &st) != 0 || !S_ISREG(st.st_mode)) continue;
    out->paths = realloc(out->paths, (out->count + 1) * sizeof *out->paths);
    if (!out->paths) abort();
    out->paths[out->count] = strdup(child);
    if (!out->paths[out->count]) abort();
    out->count++;
  }
  closedir(d);
}

static void list_free(path_list_t *l) {
  for (size_t i = 0; i < l->count; i++) free(l->paths[i]);
  free(l->paths);
}

/* ---- What a module gives per kernel ----------------------------------------- */

typedef struct kernel_keys {
  char *name;
  char *printed; /* tsr_ir_kernel_print: canonical, names as written */
  void *bytes;   /* tsr_ir_kernel_canonical_bytes */
  size_t size;
  char *defs; /* names of the values the kernel defines, in a fixed walk order */
} kernel_keys_t;

typedef struct module_keys {
  size_t count;
  kernel_keys_t *kernels;
} module_keys_t;

static void put_region_defs(tsr_strbuf_t *sb, const tsr_region_t *r) {
  for (uint32_t i = 0; i < r->num_args; i++)
    tsr_strbuf_printf(sb, "%s,", r->args[i] ? r->args[i]->name : "?");
  for (const tsr_op_t *op = r->first; op; op = op->next) {
    for (uint32_t i = 0; i < op->num_results; i++)
      tsr_strbuf_printf(sb, "%s,", op->results[i]->name);
    for (uint32_t i = 0; i < op->num_regions; i++) {
      tsr_strbuf_puts(sb, "{");
      put_region_defs(sb, &op->regions[i]);
      tsr_strbuf_puts(sb, "}");
    }
  }
}

/* The defined names in a walk order that depends only on the kernel's
 * structure. Two kernels with the same defined names and the same canonical
 * bytes print the same, so when these agree, a printed difference must be a
 * difference of the canonical bytes. */
static char *defined_names(const tsr_kernel_t *k) {
  tsr_strbuf_t sb;
  tsr_strbuf_initialize(&sb);
  tsr_strbuf_puts(&sb, "defs:"); /* never empty: take() gives NULL for "" */
  for (uint32_t i = 0; i < k->num_decls; i++)
    tsr_strbuf_printf(&sb, "%s,", k->decls[i].ref->name);
  for (uint32_t i = 0; i < k->num_decls; i++) {
    tsr_strbuf_puts(&sb, "[");
    if (k->decls[i].index_map) put_region_defs(&sb, k->decls[i].index_map);
    tsr_strbuf_puts(&sb, "]");
  }
  put_region_defs(&sb, &k->body);
  char *s = tsr_strbuf_take(&sb);
  if (!s) abort();
  return s;
}

static void keys_free(module_keys_t *mk) {
  for (size_t i = 0; i < mk->count; i++) {
    free(mk->kernels[i].name);
    tsr_ir_string_free(mk->kernels[i].printed);
    tsr_ir_string_free(mk->kernels[i].bytes);
    tsr_free(mk->kernels[i].defs);
  }
  free(mk->kernels);
  mk->count = 0;
  mk->kernels = NULL;
}

typedef enum load_result { LOAD_PARSE_ERROR, LOAD_VERIFY_ERROR, LOAD_OK } load_result_t;

/* Parses and verifies `text`, then fills `out` (freed with keys_free). With
 * `report`, a parse or verify error is a test failure. */
static load_result_t load_keys(const char *filename, const char *text, size_t len,
                               bool report, module_keys_t *out) {
  out->count = 0;
  out->kernels = NULL;
  tsr_ir_module_t *m = NULL;
  tsr_status_t s = tsr_ir_module_parse((tsr_string_view_t){filename, strlen(filename)},
                                       (tsr_string_view_t){text, len}, &m);
  if (s) {
    if (report) TSR_FAIL_AT("%s does not parse:\n%s", filename, tsr_status_message(s));
    tsr_status_free(s);
    return LOAD_PARSE_ERROR;
  }
  s = tsr_ir_module_verify(m);
  if (s) {
    if (report) TSR_FAIL_AT("%s does not verify:\n%s", filename, tsr_status_message(s));
    tsr_status_free(s);
    tsr_ir_module_destroy(m);
    return LOAD_VERIFY_ERROR;
  }
  out->count = tsr_ir_module_kernel_count(m);
  out->kernels = calloc(out->count ? out->count : 1, sizeof *out->kernels);
  if (!out->kernels) abort();
  for (size_t i = 0; i < out->count; i++) {
    tsr_ir_kernel_t *k = tsr_ir_module_kernel(m, i);
    kernel_keys_t *kk = &out->kernels[i];
    kk->name = strdup(tsr_ir_kernel_name(k));
    kk->printed = tsr_ir_kernel_print(k);
    kk->defs = defined_names(k);
    s = tsr_ir_kernel_canonical_bytes(k, &kk->bytes, &kk->size);
    if (s || !kk->name || !kk->printed) {
      /* out of memory in a test: nothing sensible to compare */
      fprintf(stderr, "%s: %s\n", filename, s ? tsr_status_message(s) : "out of memory");
      abort();
    }
  }
  tsr_ir_module_destroy(m);
  return LOAD_OK;
}

static bool same_bytes(const kernel_keys_t *a, const kernel_keys_t *b) {
  return a->size == b->size && memcmp(a->bytes, b->bytes, a->size) == 0;
}

/* Index of the first differing byte, for messages. */
static size_t first_difference(const kernel_keys_t *a, const kernel_keys_t *b) {
  size_t n = TSR_MIN(a->size, b->size), i = 0;
  while (i < n && ((const uint8_t *)a->bytes)[i] == ((const uint8_t *)b->bytes)[i]) i++;
  return i;
}

/* ---- A lexer for mutating text ----------------------------------------------
 * Enough of docs/ir.md's lexical structure to find tokens outside comments
 * and strings; it never needs to agree with the parser on errors, because
 * every mutant goes through the real parser. */

typedef enum lex_kind {
  LX_INT,
  LX_FLOAT,
  LX_WORD,
  LX_VALUE,  /* %name */
  LX_KERNEL, /* @name */
  LX_STRING,
  LX_PUNCT,
} lex_kind_t;

typedef struct lexeme {
  lex_kind_t kind;
  size_t at, len;
  uint32_t line;  /* 0-based */
  bool in_block;  /* inside block[..] of a header line */
} lexeme_t;

typedef struct lexed {
  lexeme_t *tok;
  size_t count;
  size_t *line_start; /* num_lines + 1 entries; the last is the text length */
  uint32_t num_lines;
} lexed_t;

static bool is_name_char(char c) {
  return isalnum((unsigned char)c) || c == '_' || c == '.';
}

static void lex(const char *text, lexed_t *out) {
  size_t n = strlen(text), lines = 1;
  for (size_t i = 0; i < n; i++) lines += text[i] == '\n';
  out->tok = calloc(n + 1, sizeof *out->tok);
  out->line_start = calloc(lines + 2, sizeof *out->line_start);
  if (!out->tok || !out->line_start) abort();
  out->count = 0;
  out->num_lines = 1;
  uint32_t line = 0;
  size_t i = 0;
  while (i < n) {
    char c = text[i];
    if (c == '\n') {
      line++;
      out->line_start[out->num_lines++] = ++i;
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\r') {
      i++;
      continue;
    }
    if (c == '/' && text[i + 1] == '/') {
      while (i < n && text[i] != '\n') i++;
      continue;
    }
    lexeme_t t = {.kind = LX_PUNCT, .at = i, .line = line};
    if (c == '"') {
      t.kind = LX_STRING;
      i++;
      while (i < n && text[i] != '"' && text[i] != '\n')
        i += text[i] == '\\' && i + 1 < n ? 2 : 1;
      if (i < n && text[i] == '"') i++;
    } else if (c == '%' || c == '@') {
      t.kind = c == '%' ? LX_VALUE : LX_KERNEL;
      i++;
      while (is_name_char(text[i])) i++;
    } else if (isdigit((unsigned char)c) ||
               (c == '-' && isdigit((unsigned char)text[i + 1]))) {
      t.kind = LX_INT;
      if (c == '-') i++;
      if (text[i] == '0' && (text[i + 1] == 'x' || text[i + 1] == 'X')) {
        i += 2;
        while (isxdigit((unsigned char)text[i])) i++;
      } else {
        while (isdigit((unsigned char)text[i])) i++;
        if (text[i] == '.') {
          t.kind = LX_FLOAT;
          i++;
          while (isdigit((unsigned char)text[i])) i++;
        }
        if (text[i] == 'e' || text[i] == 'E') {
          t.kind = LX_FLOAT;
          i++;
          if (text[i] == '+' || text[i] == '-') i++;
          while (isdigit((unsigned char)text[i])) i++;
        }
      }
    } else if (c == '-' && strncmp(text + i + 1, "inf", 3) == 0 &&
               !is_name_char(text[i + 4])) {
      t.kind = LX_FLOAT;
      i += 4;
    } else if (isalpha((unsigned char)c) || c == '_') {
      t.kind = LX_WORD;
      while (is_name_char(text[i])) i++;
      if ((i - t.at == 3 && strncmp(text + t.at, "inf", 3) == 0) ||
          (i - t.at == 3 && strncmp(text + t.at, "nan", 3) == 0))
        t.kind = LX_FLOAT;
    } else if (c == '-' && text[i + 1] == '>') {
      i += 2;
    } else {
      i++;
    }
    t.len = i - t.at;
    out->tok[out->count++] = t;
  }
  out->line_start[out->num_lines] = n;
  /* block[..] entries may become `squeezed` */
  for (size_t j = 0; j + 1 < out->count; j++) {
    const lexeme_t *w = &out->tok[j];
    if (w->kind != LX_WORD || w->len != 5 || strncmp(text + w->at, "block", 5) != 0 ||
        text[out->tok[j + 1].at] != '[')
      continue;
    for (size_t k = j + 2; k < out->count && text[out->tok[k].at] != ']'; k++)
      out->tok[k].in_block = true;
  }
}

static void lexed_free(lexed_t *l) {
  free(l->tok);
  free(l->line_start);
}

static bool tok_is(const char *text, const lexeme_t *t, const char *s) {
  return t->len == strlen(s) && strncmp(text + t->at, s, t->len) == 0;
}

static bool same_token_text(const char *text, const lexeme_t *a, const lexeme_t *b) {
  return a->len == b->len && strncmp(text + a->at, text + b->at, a->len) == 0;
}

/* ---- Invariance ---------------------------------------------------------------- */

/* Compares every kernel's bytes of `variant` (parsed as `filename`) with the
 * original's; `what` names the variant in messages. */
static void check_invariant(const char *path, const module_keys_t *orig,
                            const char *what, const char *filename,
                            const char *variant) {
  module_keys_t mk;
  if (load_keys(filename, variant, strlen(variant), true, &mk) != LOAD_OK) {
    TSR_FAIL_AT("%s: the %s variant does not load:\n%s", path, what, variant);
    return;
  }
  if (mk.count != orig->count) {
    TSR_FAIL_AT("%s: %s: %zu kernels, expected %zu", path, what, mk.count, orig->count);
  } else {
    for (size_t i = 0; i < mk.count; i++)
      if (!same_bytes(&mk.kernels[i], &orig->kernels[i]))
        TSR_FAIL_AT("%s: @%s: canonical bytes change under %s (first difference at "
                    "byte %zu of %zu)",
                    path, orig->kernels[i].name, what,
                    first_difference(&mk.kernels[i], &orig->kernels[i]),
                    orig->kernels[i].size);
  }
  keys_free(&mk);
}

/* Every %name (scheme 0: %zz<n>; scheme 1: all digits, numbered backwards)
 * or every @name replaced consistently. All names of the kind are replaced
 * by distinct fresh ones, so none can collide. */
static char *rename_all(const char *text, const lexed_t *lx, lex_kind_t kind, int scheme) {
  size_t *first = calloc(lx->count + 1, sizeof *first); /* token -> name number */
  size_t *names = calloc(lx->count + 1, sizeof *names); /* name number -> token */
  if (!first || !names) abort();
  size_t num_names = 0;
  for (size_t j = 0; j < lx->count; j++) {
    if (lx->tok[j].kind != kind) continue;
    size_t n = 0;
    while (n < num_names && !same_token_text(text, &lx->tok[names[n]], &lx->tok[j])) n++;
    if (n == num_names) names[num_names++] = j;
    first[j] = n;
  }
  tsr_strbuf_t sb;
  tsr_strbuf_initialize(&sb);
  size_t pos = 0;
  for (size_t j = 0; j < lx->count; j++) {
    const lexeme_t *t = &lx->tok[j];
    if (t->kind != kind) continue;
    tsr_strbuf_append(&sb, text + pos, t->at - pos);
    if (kind == LX_KERNEL)
      tsr_strbuf_printf(&sb, "@renamed_kernel_%zu", first[j]);
    else if (scheme == 0)
      tsr_strbuf_printf(&sb, "%%zz%zu", first[j]);
    else
      tsr_strbuf_printf(&sb, "%%%zu", num_names - 1 - first[j]);
    pos = t->at + t->len;
  }
  tsr_strbuf_puts(&sb, text + pos);
  free(first);
  free(names);
  char *s = tsr_strbuf_take(&sb);
  if (!s) abort();
  return s;
}

/* Comments on their own lines and after every line, blank lines, tabs and
 * odd indentation; the tokens of each line unchanged. */
static char *add_comments(const char *text, const lexed_t *lx) {
  tsr_strbuf_t sb;
  tsr_strbuf_initialize(&sb);
  tsr_strbuf_puts(&sb, "// leading comment: kernel @fake { %x = const 1 : i32 }\n\n");
  for (uint32_t l = 0; l < lx->num_lines; l++) {
    const char *s = text + lx->line_start[l];
    size_t n = lx->line_start[l + 1] - lx->line_start[l];
    if (n && s[n - 1] == '\n') n--;
    while (n && (*s == ' ' || *s == '\t')) s++, n--;
    if (!n) continue;
    tsr_strbuf_printf(&sb, "\t// line %u \"quoted\" { } %%v @k\n\n", l);
    for (uint32_t i = 0; i < l % 4; i++) tsr_strbuf_puts(&sb, l % 2 ? "\t" : "   ");
    tsr_strbuf_append(&sb, s, n);
    tsr_strbuf_puts(&sb, "   // trailing comment, %x = add %y\n");
  }
  tsr_strbuf_puts(&sb, "\n// the end\n");
  char *out = tsr_strbuf_take(&sb);
  if (!out) abort();
  return out;
}

/* Every token separated by spaces and tabs, CRLF line ends. */
static char *respace(const char *text, const lexed_t *lx) {
  tsr_strbuf_t sb;
  tsr_strbuf_initialize(&sb);
  uint32_t line = 0;
  for (size_t j = 0; j < lx->count; j++) {
    const lexeme_t *t = &lx->tok[j];
    for (; line < t->line; line++) tsr_strbuf_puts(&sb, "\r\n");
    tsr_strbuf_puts(&sb, j % 3 ? "  " : " \t ");
    tsr_strbuf_append(&sb, text + t->at, t->len);
  }
  tsr_strbuf_puts(&sb, "\r\n");
  char *out = tsr_strbuf_take(&sb);
  if (!out) abort();
  return out;
}

static void case_invariance(const char *path) {
  size_t len;
  char *text = tsr_test_read_source(path, &len);
  if (!text) {
    TSR_FAIL_AT("cannot read %s", path);
    return;
  }
  module_keys_t orig;
  if (load_keys(path, text, len, true, &orig) != LOAD_OK) {
    free(text);
    return;
  }
  lexed_t lx;
  lex(text, &lx);

  /* (a) printed canonically and parsed again */
  tsr_ir_module_t *m = NULL;
  TSR_CHECK_OK(tsr_ir_module_parse((tsr_string_view_t){path, strlen(path)},
                                   (tsr_string_view_t){text, len}, &m));
  char *printed = m ? tsr_ir_module_print(m) : NULL;
  tsr_ir_module_destroy(m);
  if (printed) check_invariant(path, &orig, "print -> parse", path, printed);

  /* (b) every SSA name replaced, twice with different schemes */
  bool has_values = false;
  for (size_t j = 0; j < lx.count; j++) has_values |= lx.tok[j].kind == LX_VALUE;
  for (int scheme = 0; scheme < 2; scheme++) {
    char *renamed = rename_all(text, &lx, LX_VALUE, scheme);
    check_invariant(path, &orig, scheme ? "renaming values to digits" : "renaming values",
                    path, renamed);
    /* the renaming took effect: the printed text changed */
    module_keys_t mk;
    if (has_values && load_keys(path, renamed, strlen(renamed), false, &mk) == LOAD_OK) {
      bool all_same = true;
      for (size_t i = 0; i < mk.count && i < orig.count; i++)
        all_same &= strcmp(mk.kernels[i].printed, orig.kernels[i].printed) == 0;
      if (all_same) TSR_FAIL_AT("%s: renaming values did not change the text", path);
      keys_free(&mk);
    }
    tsr_free(renamed);
  }

  /* (c) kernels renamed */
  char *renamed = rename_all(text, &lx, LX_KERNEL, 0);
  check_invariant(path, &orig, "renaming kernels", path, renamed);
  tsr_free(renamed);

  /* (d) comments, blank lines, indentation, spacing, CRLF */
  char *commented = add_comments(text, &lx);
  check_invariant(path, &orig, "comments and indentation", path, commented);
  tsr_free(commented);
  char *spaced = respace(text, &lx);
  check_invariant(path, &orig, "spacing and CRLF", path, spaced);
  tsr_free(spaced);

  /* (e) another file name */
  check_invariant(path, &orig, "another file name", "elsewhere/renamed_file.tsr", text);

  tsr_ir_string_free(printed);
  lexed_free(&lx);
  keys_free(&orig);
  free(text);
}

/* ---- Sensitivity: single-token mutations ------------------------------------------
 * Mutants keep every defined name (mutants that rename a definition are
 * skipped; deleted lines are not renamings), so the canonical printed text
 * decides: different text means a different kernel and must give different
 * bytes; the same text (1.0 -> 1.00, 16 -> 0x10) must give the same bytes.
 * Mutations: integers (+1, -1, x2, hex, `squeezed`, open slice ends),
 * floats (+1, x2, sign, nan, inf, 0.0, more digits), dtypes, memory spaces,
 * grid semantics, in/out, sem/dma_sem, true/false, op mnemonics, operand
 * uses, swaps of operands and block entries on a line, clauses removed
 * (mask, alias, device, core, send, semantics, transpose_rhs, add) or added
 * (transpose_rhs, add, alias), print texts, and lines deleted or doubled. */

typedef struct mutation_run {
  const char *path;
  const char *text;
  const lexed_t *lx;
  const module_keys_t *orig;
  /* The mutant has an op or header line less: the kernel differs even when
   * a definition went with it, and no renaming can explain that. */
  bool deleting;
  int tried, verified, semantic, noop, renames, failures;
} mutation_run_t;

typedef struct totals {
  int files, tried, verified, semantic, noop, renames, failures;
} totals_t;

static totals_t totals;

/* `what` describes the mutation (one line: newlines are shown as '|'). */
static void try_mutant(mutation_run_t *run, const char *mutant, char *what) {
  for (char *c = what; *c; c++)
    if (*c == '\n') *c = '|';
  run->tried++;
  module_keys_t mk;
  if (load_keys(run->path, mutant, strlen(mutant), false, &mk) != LOAD_OK) return;
  run->verified++;
  const module_keys_t *orig = run->orig;
  if (mk.count != orig->count) {
    run->renames++;
    keys_free(&mk);
    return;
  }
  bool renamed = false, differs = false;
  for (size_t i = 0; i < mk.count; i++) {
    const kernel_keys_t *a = &orig->kernels[i], *b = &mk.kernels[i];
    if (strcmp(a->name, b->name) != 0 ||
        (strcmp(a->defs, b->defs) != 0 && !run->deleting)) {
      renamed = true;
      continue;
    }
    bool text_differs = strcmp(a->printed, b->printed) != 0;
    differs |= text_differs;
    if (text_differs == !same_bytes(a, b)) continue;
    if (run->failures++ >= MAX_REPORTED) continue;
    if (text_differs)
      TSR_FAIL_AT("%s: @%s: %s: the kernel changed but its canonical bytes did not",
                  run->path, a->name, what);
    else
      TSR_FAIL_AT("%s: @%s: %s: the kernel prints the same but its canonical bytes "
                  "changed (first difference at byte %zu)",
                  run->path, a->name, what, first_difference(a, b));
  }
  if (renamed)
    run->renames++;
  else if (differs)
    run->semantic++;
  else
    run->noop++;
  keys_free(&mk);
}

/* Replaces text[at, at + len) by `repl`. */
static void try_replace(mutation_run_t *run, size_t at, size_t len, const char *repl,
                        uint32_t line) {
  size_t n = strlen(run->text), r = strlen(repl);
  char *mutant = malloc(n - len + r + 1);
  if (!mutant) abort();
  memcpy(mutant, run->text, at);
  memcpy(mutant + at, repl, r);
  memcpy(mutant + at + r, run->text + at + len, n - at - len + 1);
  char what[256];
  snprintf(what, sizeof what, "line %u: '%.*s' -> '%s'", line + 1,
           (int)TSR_MIN(len, 60), run->text + at, repl);
  try_mutant(run, mutant, what);
  free(mutant);
}

static void try_token(mutation_run_t *run, const lexeme_t *t, const char *repl) {
  if (t->len == strlen(repl) && strncmp(run->text + t->at, repl, t->len) == 0) return;
  try_replace(run, t->at, t->len, repl, t->line);
}

/* Swaps two tokens (a before b). */
static void try_swap(mutation_run_t *run, const lexeme_t *a, const lexeme_t *b) {
  size_t n = strlen(run->text);
  char *mutant = malloc(n + 1);
  if (!mutant) abort();
  size_t o = 0;
  memcpy(mutant, run->text, a->at);
  o = a->at;
  memcpy(mutant + o, run->text + b->at, b->len);
  o += b->len;
  memcpy(mutant + o, run->text + a->at + a->len, b->at - a->at - a->len);
  o += b->at - a->at - a->len;
  memcpy(mutant + o, run->text + a->at, a->len);
  o += a->len;
  memcpy(mutant + o, run->text + b->at + b->len, n - b->at - b->len + 1);
  char what[256];
  snprintf(what, sizeof what, "line %u: swap '%.*s' and '%.*s'", a->line + 1,
           (int)a->len, run->text + a->at, (int)b->len, run->text + b->at);
  try_mutant(run, mutant, what);
  free(mutant);
}

static const char *const space_words[] = {"vmem", "smem", "hbm", "any"};
static const char *const semantics_words[] = {"parallel", "arbitrary", "core_parallel"};

/* Replacements of a word from `set` by the others of the set. */
static bool try_word_set(mutation_run_t *run, const lexeme_t *t, const char *const *set,
                         size_t count) {
  bool member = false;
  for (size_t i = 0; i < count; i++) member |= tok_is(run->text, t, set[i]);
  if (!member) return false;
  for (size_t i = 0; i < count; i++) try_token(run, t, set[i]);
  return true;
}

/* Whether token j is in the result type of an op whose result has its
 * operands' shape (elementwise ops, comparisons, select, convert, bitcast):
 * another dimension there never verifies, so it is not worth a parse. */
static bool in_shape_following_type(const mutation_run_t *run, size_t j) {
  const lexed_t *lx = run->lx;
  size_t first = j;
  while (first > 0 && lx->tok[first - 1].line == lx->tok[j].line) first--;
  bool after_colon = false;
  tsr_opcode_t op = TSR_OP_COUNT;
  for (size_t k = first; k < j; k++) {
    const lexeme_t *t = &lx->tok[k];
    if (tok_is(run->text, t, "=") && k + 1 < j && lx->tok[k + 1].kind == LX_WORD)
      op = tsr_op_lookup(run->text + lx->tok[k + 1].at, lx->tok[k + 1].len);
    after_colon |= tok_is(run->text, t, ":");
  }
  if (!after_colon || op == TSR_OP_COUNT) return false;
  switch (tsr_op_table[op].rule) {
    case TSR_RULE_ELEMWISE:
    case TSR_RULE_COMPARE:
    case TSR_RULE_SELECT:
    case TSR_RULE_CONVERT:
    case TSR_RULE_BITCAST: return true;
    default: return false;
  }
}

static void mutate_int(mutation_run_t *run, size_t j) {
  const lexeme_t *t = &run->lx->tok[j];
  const char *s = run->text + t->at;
  bool neg = s[0] == '-';
  bool hex = s[neg] == '0' && (s[neg + 1] == 'x' || s[neg + 1] == 'X');
  long long v = strtoll(s, NULL, hex ? 16 : 10);
  char buf[64];
  long long alts[3] = {v + 1, v - 1, v * 2};
  for (int i = 0; i < 3 && !in_shape_following_type(run, j); i++) {
    if (i == 2 && (v == 0 || v == 1)) continue; /* same as a previous one */
    snprintf(buf, sizeof buf, "%lld", alts[i]);
    try_token(run, t, buf);
  }
  if (v >= 0 && j % 2 == 0) { /* the same number in hex (every other one): a no-op */
    snprintf(buf, sizeof buf, "0x%llx", v);
    try_token(run, t, buf);
  }
  if (t->in_block) try_token(run, t, "squeezed");
  /* open slice ends: "0:b" -> ":b" (a no-op) and "a:b" -> "a:" */
  const lexeme_t *prev = j ? &run->lx->tok[j - 1] : NULL;
  const lexeme_t *next = j + 1 < run->lx->count ? &run->lx->tok[j + 1] : NULL;
  if (prev && next && tok_is(run->text, next, ":") &&
      (tok_is(run->text, prev, "[") || tok_is(run->text, prev, ",")))
    try_token(run, t, "");
  if (prev && next && tok_is(run->text, prev, ":") &&
      (tok_is(run->text, next, "]") || tok_is(run->text, next, ",")))
    try_token(run, t, "");
}

static void put_double(char *buf, size_t size, double v) {
  snprintf(buf, size, "%.17g", v);
  if (!strpbrk(buf, ".eEn")) strncat(buf, ".0", size - strlen(buf) - 1);
}

static void mutate_float(mutation_run_t *run, const lexeme_t *t) {
  char tok[128], buf[160];
  snprintf(tok, sizeof tok, "%.*s", (int)TSR_MIN(t->len, 100), run->text + t->at);
  double v = strtod(tok, NULL);
  if (isfinite(v)) {
    put_double(buf, sizeof buf, v + 1);
    try_token(run, t, buf);
    if (v != 0) {
      put_double(buf, sizeof buf, v * 2);
      try_token(run, t, buf);
    }
    /* the same number written longer: a no-op */
    char *e = strpbrk(tok, "eE");
    size_t mantissa = e ? (size_t)(e - tok) : strlen(tok);
    bool dot = memchr(tok, '.', mantissa) != NULL;
    snprintf(buf, sizeof buf, "%.*s%s%s", (int)mantissa, tok, dot ? "0" : ".0",
             tok + mantissa);
    try_token(run, t, buf);
    /* more digits, which may or may not survive rounding to the dtype */
    snprintf(buf, sizeof buf, "%.*s%s%s", (int)mantissa, tok, dot ? "0000001" : ".0000001",
             tok + mantissa);
    try_token(run, t, buf);
  }
  if (!isnan(v)) {
    /* the sign, including 0.0 -> -0.0 */
    snprintf(buf, sizeof buf, "%s", tok[0] == '-' ? tok + 1 : "");
    if (tok[0] != '-') snprintf(buf, sizeof buf, "-%s", tok);
    try_token(run, t, buf);
  }
  try_token(run, t, "nan");
  try_token(run, t, "inf");
  if (v != 0 || isnan(v)) try_token(run, t, "0.0");
}

/* Removes " WORD %v[..]" (mask, alias, device, core, send) or " WORD" for a
 * trailing flag, or " semantics(..)". */
static void mutate_clause(mutation_run_t *run, size_t j) {
  const lexed_t *lx = run->lx;
  const lexeme_t *t = &lx->tok[j];
  size_t end = j + 1;
  if (tok_is(run->text, t, "semantics")) {
    while (end < lx->count && !tok_is(run->text, &lx->tok[end], ")")) end++;
    end++;
  } else if (end < lx->count && lx->tok[end].kind == LX_VALUE) {
    end++;
    if (end < lx->count && tok_is(run->text, &lx->tok[end], "[")) {
      while (end < lx->count && !tok_is(run->text, &lx->tok[end], "]")) end++;
      end++;
    }
  }
  if (end > lx->count) return;
  size_t from = t->at;
  while (from > 0 && run->text[from - 1] == ' ') from--;
  const lexeme_t *last = &lx->tok[end - 1];
  try_replace(run, from, last->at + last->len - from, "", t->line);
}

static void mutate_word(mutation_run_t *run, size_t j) {
  const lexeme_t *t = &run->lx->tok[j];
  const char *s = run->text + t->at;
  /* dtypes: those of the same width (bitcast, i32 <-> u32) and other floats
   * (convert, const); the rest rarely verifies, as the dtype recurs */
  for (int d = 0; d < TSR_DTYPE_COUNT; d++) {
    if (!tok_is(run->text, t, tsr_dtype_name((tsr_dtype_t)d))) continue;
    bool is_float = tsr_dtype_class((tsr_dtype_t)d) == TSR_CLASS_FLOAT;
    for (int e = 0; e < TSR_DTYPE_COUNT; e++)
      if (tsr_dtype_size((tsr_dtype_t)e) == tsr_dtype_size((tsr_dtype_t)d) ||
          (is_float && tsr_dtype_class((tsr_dtype_t)e) == TSR_CLASS_FLOAT))
        try_token(run, t, tsr_dtype_name((tsr_dtype_t)e));
    return;
  }
  if (try_word_set(run, t, space_words, TSR_ARRAY_SIZE(space_words))) return;
  if (try_word_set(run, t, semantics_words, TSR_ARRAY_SIZE(semantics_words))) return;
  static const char *const sems[] = {"sem", "dma_sem"}, *const bools[] = {"true", "false"};
  static const char *const roles[] = {"in", "out"};
  if (try_word_set(run, t, sems, 2)) return;
  if (try_word_set(run, t, bools, 2)) return;
  if (try_word_set(run, t, roles, 2)) return;
  if (tok_is(run->text, t, "squeezed")) {
    try_token(run, t, "1");
    try_token(run, t, "2");
    return;
  }
  static const char *const clauses[] = {"mask", "alias", "device", "core",
                                        "send", "semantics", "transpose_rhs"};
  for (size_t i = 0; i < TSR_ARRAY_SIZE(clauses); i++)
    if (tok_is(run->text, t, clauses[i])) mutate_clause(run, j);
  /* the `add` flag at the end of a dma_start */
  bool at_line_end = j + 1 == run->lx->count || run->lx->tok[j + 1].line != t->line;
  if (tok_is(run->text, t, "add") && at_line_end && j > 0 &&
      run->lx->tok[j - 1].kind != LX_WORD)
    mutate_clause(run, j);
  tsr_opcode_t op = tsr_op_lookup(s, t->len);
  if (op == TSR_OP_COUNT) return;
  /* ops written and typed alike (add <-> sub <-> max, exp <-> tanh, ...):
   * the next few in table order, cyclically, so that every op is both
   * replaced and a replacement while the test stays fast */
  int tried = 0;
  for (int i = 1; i < TSR_OP_COUNT && tried < MAX_OP_SWAPS; i++) {
    int other = (op + i) % TSR_OP_COUNT;
    if (tsr_op_table[other].syntax != tsr_op_table[op].syntax ||
        tsr_op_table[other].rule != tsr_op_table[op].rule)
      continue;
    try_token(run, t, tsr_op_table[other].mnemonic);
    tried++;
  }
}

/* Whether value token j names a new value: a result (before the `=` of a
 * line that starts with a value), an operand or region argument (`%x:`,
 * `%i =`), or an index map argument. Changing one only renames or breaks
 * the kernel, so the value mutations leave them alone. */
static bool is_definition(const mutation_run_t *run, size_t j) {
  const lexed_t *lx = run->lx;
  const lexeme_t *t = &lx->tok[j];
  if (j + 1 < lx->count && tok_is(run->text, &lx->tok[j + 1], "=")) return true;
  static const char *const roles[] = {"prefetch", "in", "out", "scratch"};
  for (size_t i = 0; j > 0 && i < TSR_ARRAY_SIZE(roles); i++)
    if (tok_is(run->text, &lx->tok[j - 1], roles[i])) return true;
  size_t first = j;
  while (first > 0 && lx->tok[first - 1].line == t->line) first--;
  bool results = lx->tok[first].kind == LX_VALUE;
  for (size_t k = first; k < j; k++) {
    if (tok_is(run->text, &lx->tok[k], "=")) results = false;
    /* inside map(..) or scoped(..) */
    if ((tok_is(run->text, &lx->tok[k], "map") || tok_is(run->text, &lx->tok[k], "scoped")) &&
        k + 1 < j && tok_is(run->text, &lx->tok[k + 1], "(")) {
      bool closed = false;
      for (size_t q = k + 2; q < j; q++) closed |= tok_is(run->text, &lx->tok[q], ")");
      if (!closed) return true;
    }
  }
  return results;
}

/* A use of a value replaced by another name seen nearby (the same line and
 * the one before it). */
static void mutate_value(mutation_run_t *run, size_t j) {
  const lexed_t *lx = run->lx;
  const lexeme_t *t = &lx->tok[j];
  if (is_definition(run, j)) return;
  size_t from = j;
  while (from > 0 && lx->tok[from - 1].line + 1 >= t->line) from--;
  for (size_t k = from; k < lx->count && lx->tok[k].line <= t->line; k++) {
    const lexeme_t *o = &lx->tok[k];
    if (o->kind != LX_VALUE || same_token_text(run->text, o, t)) continue;
    bool seen = false; /* each name once */
    for (size_t q = from; q < k; q++)
      seen |= lx->tok[q].kind == LX_VALUE && same_token_text(run->text, &lx->tok[q], o);
    if (seen) continue;
    char name[128];
    snprintf(name, sizeof name, "%.*s", (int)TSR_MIN(o->len, 100), run->text + o->at);
    try_token(run, t, name);
  }
}

static void mutate_line(mutation_run_t *run, uint32_t l) {
  const lexed_t *lx = run->lx;
  size_t at = lx->line_start[l], len = lx->line_start[l + 1] - at;
  if (len <= 1) return;
  run->deleting = true;
  try_replace(run, at, len, "", l); /* delete */
  run->deleting = false;
  char *twice = malloc(2 * len + 1);
  if (!twice) abort();
  memcpy(twice, run->text + at, len);
  memcpy(twice + len, run->text + at, len);
  twice[2 * len] = 0;
  if (twice[len - 1] == '\n') try_replace(run, at, len, twice, l); /* duplicate */
  free(twice);

  /* Swaps of two value tokens (or block entries) on the line; flags added. */
  size_t first = 0;
  while (first < lx->count && lx->tok[first].line < l) first++;
  size_t last = first;
  while (last < lx->count && lx->tok[last].line == l) last++;
  bool has_dot = false, has_transpose = false, is_dma_start = false, has_add = false;
  bool is_out = false, has_alias = false;
  size_t colon = 0;
  for (size_t a = first; a < last; a++) {
    const lexeme_t *ta = &lx->tok[a];
    has_dot |= tok_is(run->text, ta, "dot");
    has_transpose |= tok_is(run->text, ta, "transpose_rhs");
    is_dma_start |= a == first && tok_is(run->text, ta, "dma_start");
    has_add |= a + 1 == last && tok_is(run->text, ta, "add");
    is_out |= a == first && tok_is(run->text, ta, "out");
    has_alias |= tok_is(run->text, ta, "alias");
    if (tok_is(run->text, ta, ":")) colon = a;
    /* block[8, squeezed] -> block[squeezed, 8]: the same ref type */
    for (size_t b = a + 1; ta->in_block && ta->kind != LX_PUNCT && b < last; b++)
      if (lx->tok[b].in_block && lx->tok[b].kind != LX_PUNCT &&
          !same_token_text(run->text, ta, &lx->tok[b]))
        try_swap(run, ta, &lx->tok[b]);
    if (ta->kind != LX_VALUE || is_definition(run, a)) continue;
    for (size_t b = a + 1; b < last; b++)
      if (lx->tok[b].kind == LX_VALUE && !is_definition(run, b) &&
          !same_token_text(run->text, ta, &lx->tok[b]))
        try_swap(run, ta, &lx->tok[b]);
  }
  size_t end = at + len - (run->text[at + len - 1] == '\n');
  if (has_dot && !has_transpose && colon)
    try_replace(run, lx->tok[colon].at, 0, "transpose_rhs ", l);
  if (is_dma_start && !has_add) try_replace(run, end, 0, " add", l);
  if (is_out && !has_alias) {
    /* alias each input in turn */
    for (size_t a = 0; a + 1 < lx->count; a++) {
      if (!tok_is(run->text, &lx->tok[a], "in") || lx->tok[a + 1].kind != LX_VALUE ||
          lx->tok[a].line >= l)
        continue;
      char clause[160];
      snprintf(clause, sizeof clause, " alias %.*s", (int)TSR_MIN(lx->tok[a + 1].len, 100),
               run->text + lx->tok[a + 1].at);
      try_replace(run, end, 0, clause, l);
    }
  }
}

static void case_mutations(const char *path) {
  size_t len;
  char *text = tsr_test_read_source(path, &len);
  if (!text) {
    TSR_FAIL_AT("cannot read %s", path);
    return;
  }
  module_keys_t orig;
  if (load_keys(path, text, len, true, &orig) != LOAD_OK) {
    free(text);
    return;
  }
  lexed_t lx;
  lex(text, &lx);
  mutation_run_t run = {.path = path, .text = text, .lx = &lx, .orig = &orig};
  for (size_t j = 0; j < lx.count; j++) {
    switch (lx.tok[j].kind) {
      case LX_INT: mutate_int(&run, j); break;
      case LX_FLOAT: mutate_float(&run, &lx.tok[j]); break;
      case LX_WORD: mutate_word(&run, j); break;
      case LX_VALUE: mutate_value(&run, j); break;
      case LX_STRING: /* one more character in a print text or message */
        try_replace(&run, lx.tok[j].at + lx.tok[j].len - 1, 0, "!", lx.tok[j].line);
        break;
      case LX_KERNEL:
      case LX_PUNCT: break;
    }
  }
  for (uint32_t l = 0; l + 1 < lx.num_lines; l++) mutate_line(&run, l);

  if (run.failures > MAX_REPORTED)
    TSR_FAIL_AT("%s: %d more failures not shown", path, run.failures - MAX_REPORTED);
  /* every file yields kernels that differ */
  if (run.semantic == 0) TSR_FAIL_AT("%s: no mutant changed a kernel", path);
  printf("# %s: %d mutants, %d verified: %d changed the kernel, %d no-ops, "
         "%d skipped (a definition renamed or a kernel lost)\n",
         path, run.tried, run.verified, run.semantic, run.noop, run.renames);
  totals.files++;
  totals.tried += run.tried;
  totals.verified += run.verified;
  totals.semantic += run.semantic;
  totals.noop += run.noop;
  totals.renames += run.renames;
  totals.failures += run.failures;
  lexed_free(&lx);
  keys_free(&orig);
  free(text);
}

/* ---- Hand-made pairs ---------------------------------------------------------------- */

/* Parses and verifies `text` (a test failure if it does not). */
static bool text_keys(const char *text, module_keys_t *out) {
  return load_keys("inline.tsr", text, strlen(text), true, out) == LOAD_OK;
}

static void check_pair(const char *a, const char *b, bool equal, const char *what) {
  module_keys_t ka, kb;
  if (!text_keys(a, &ka)) return;
  if (text_keys(b, &kb)) {
    if (ka.count < 1 || kb.count < 1)
      TSR_FAIL_AT("%s: no kernel", what);
    else if (same_bytes(&ka.kernels[0], &kb.kernels[0]) != equal)
      TSR_FAIL_AT("%s: canonical bytes are %s, expected %s", what,
                  equal ? "different" : "equal", equal ? "equal" : "different");
    keys_free(&kb);
  }
  keys_free(&ka);
}

#define MAP_KERNEL(result)                                                    \
  "kernel @k\n"                                                               \
  "  grid(2, 2) semantics(parallel, parallel)\n"                              \
  "  in %x: f32[16, 16] vmem block[8, 8] map(%i, %j) -> " result "\n"         \
  "  out %y: f32[16, 16] vmem block[8, 8] map(%i, %j) -> (%i, %j)\n"          \
  "{\n"                                                                       \
  "  %v = load %x[:, :] : f32[8, 8]\n"                                        \
  "  store %y[:, :], %v\n"                                                    \
  "}\n"

TSR_TEST(index_map_changes_bytes) {
  check_pair(MAP_KERNEL("(%i, %j)"), MAP_KERNEL("(%j, %i)"), false, "map (i, j) vs (j, i)");
  check_pair(MAP_KERNEL("(%i, 0)"), MAP_KERNEL("(%i, 1)"), false, "map (i, 0) vs (i, 1)");
  check_pair(MAP_KERNEL("(%i, %j)"), MAP_KERNEL("(%i, %j)"), true, "the same map");
  /* general form: one op differs */
  const char *general =
      "kernel @k\n"
      "  grid(2) semantics(parallel)\n"
      "  in %x: f32[16, 8] vmem block[8, 8] map(%i) {\n"
      "    %one = const 1 : i32\n"
      "    %r = OP %one, %i : i32\n"
      "    %z = const 0 : i32\n"
      "    yield %r, %z\n"
      "  }\n"
      "  out %y: f32[16, 8] vmem block[8, 8] map(%i) -> (%i, 0)\n"
      "{\n"
      "  %v = load %x[:, :] : f32[8, 8]\n"
      "  store %y[:, :], %v\n"
      "}\n";
  char a[1024], b[1024];
  const char *at = strstr(general, "OP");
  snprintf(a, sizeof a, "%.*ssub%s", (int)(at - general), general, at + 2);
  snprintf(b, sizeof b, "%.*sadd%s", (int)(at - general), general, at + 2);
  check_pair(a, b, false, "map region: sub vs add");
}

#define ALIAS_KERNEL(alias)                                                   \
  "kernel @k\n"                                                               \
  "  in %x: f32[8, 128] vmem\n"                                               \
  "  out %y: f32[8, 128] vmem" alias "\n"                                     \
  "{\n"                                                                       \
  "  %v = load %x[:, :] : f32[8, 128]\n"                                      \
  "  store %y[:, :], %v\n"                                                    \
  "}\n"

TSR_TEST(alias_changes_bytes) {
  check_pair(ALIAS_KERNEL(""), ALIAS_KERNEL(" alias %x"), false, "alias vs none");
}

#define REVISIT_KERNEL(revisit)                                               \
  "kernel @k\n"                                                               \
  "  grid(2, 2)\n"                                                            \
  "  out %y: f32[8, 256] vmem block[8, 128] map(%i, %j) -> (0, %j)" revisit "\n" \
  "{\n"                                                                       \
  "  %c = const 1.0 : f32\n"                                                 \
  "  store %y[:, :], %c\n"                                                   \
  "}\n"

/* The revisit mode changes what a run does (blocks copied in, no revisit
 * error); `revisit immediate` is the default, written or not. */
TSR_TEST(revisit_mode_changes_bytes) {
  check_pair(REVISIT_KERNEL(""), REVISIT_KERNEL(" revisit any"), false, "revisit any vs none");
  check_pair(REVISIT_KERNEL(""), REVISIT_KERNEL(" revisit immediate"), true,
             "revisit immediate vs none");
}

#define DECL_KERNEL(role, block)                                              \
  "kernel @k\n"                                                               \
  "  " role " %x: f32[8, 8] vmem block[" block "]\n"                           \
  "  out %y: f32[8] vmem\n"                                                   \
  "{\n"                                                                       \
  "  %v = load %x[:] : f32[8]\n"                                              \
  "  store %y[:], %v\n"                                                       \
  "}\n"

/* Declarations that give the body the same ref type: the role and where the
 * squeezed dimension is still tell them apart. */
TSR_TEST(declarations_change_bytes) {
  check_pair(DECL_KERNEL("in", "squeezed, 8"), DECL_KERNEL("in", "8, squeezed"), false,
             "block[squeezed, 8] vs block[8, squeezed]");
  check_pair(DECL_KERNEL("in", "squeezed, 8"), DECL_KERNEL("out", "squeezed, 8"), false,
             "in vs out");
}

#define SEMANTICS_KERNEL(sem)                                                 \
  "kernel @k\n"                                                               \
  "  grid(2) semantics(" sem ")\n"                                            \
  "  out %y: i32[2, 128] vmem block[1, 128] map(%i) -> (%i, 0)\n"             \
  "{\n"                                                                       \
  "  %i = program_id 0 : i32\n"                                               \
  "  store %y[0, :], %i\n"                                                    \
  "}\n"

TSR_TEST(grid_semantics_change_bytes) {
  check_pair(SEMANTICS_KERNEL("parallel"), SEMANTICS_KERNEL("arbitrary"), false,
             "parallel vs arbitrary");
  check_pair(SEMANTICS_KERNEL("parallel"), SEMANTICS_KERNEL("core_parallel"), false,
             "parallel vs core_parallel");
  check_pair(SEMANTICS_KERNEL("arbitrary"), SEMANTICS_KERNEL("core_parallel"), false,
             "arbitrary vs core_parallel");
  /* omitted semantics are all arbitrary */
  const char *omitted = SEMANTICS_KERNEL("arbitrary");
  char buf[1024];
  const char *at = strstr(omitted, " semantics(arbitrary)");
  snprintf(buf, sizeof buf, "%.*s%s", (int)(at - omitted), omitted,
           at + strlen(" semantics(arbitrary)"));
  check_pair(omitted, buf, true, "semantics(arbitrary) vs omitted");
}

#define CONST_KERNEL(lit, type)                                               \
  "kernel @k\n"                                                               \
  "  out %y: " type "[8, 128] vmem\n"                                         \
  "{\n"                                                                       \
  "  %c = const " lit " : " type "\n"                                         \
  "  store %y[:, :], %c\n"                                                    \
  "}\n"

TSR_TEST(negative_zero_changes_bytes) {
  check_pair(CONST_KERNEL("0.0", "f32"), CONST_KERNEL("-0.0", "f32"), false, "f32 0.0 vs -0.0");
  check_pair(CONST_KERNEL("0.0", "bf16"), CONST_KERNEL("-0.0", "bf16"), false,
             "bf16 0.0 vs -0.0");
  check_pair(CONST_KERNEL("0.0", "f32"), CONST_KERNEL("0.00", "f32"), true, "0.0 vs 0.00");
  check_pair(CONST_KERNEL("0", "i32"), CONST_KERNEL("-0", "i32"), true, "i32 0 vs -0");
  /* the same bits in a different dtype is a different kernel */
  check_pair(CONST_KERNEL("1", "i32"), CONST_KERNEL("1", "u32"), false, "i32 vs u32 1");
}

#define PRINT_KERNEL(text)                                                    \
  "kernel @k\n"                                                               \
  "{\n"                                                                       \
  "  %i = const 1 : i32\n"                                                    \
  "  print " text ", %i\n"                                                    \
  "}\n"

TSR_TEST(print_text_changes_bytes) {
  check_pair(PRINT_KERNEL("\"a {}\""), PRINT_KERNEL("\"b {}\""), false, "print a vs b");
  check_pair(PRINT_KERNEL("\"a {}\""), PRINT_KERNEL("\"a {} \""), false,
             "print trailing space");
  check_pair(PRINT_KERNEL("\"tab\\t{}\""), PRINT_KERNEL("\"tab\t{}\""), true,
             "\\t escape vs a tab");
}

TSR_TEST(kernel_names_do_not_matter) {
  const char *text =
      "kernel @first\n"
      "  in %x: f32[8, 128] vmem\n"
      "  out %y: f32[8, 128] vmem\n"
      "{\n"
      "  %v = load %x[:, :] : f32[8, 128]\n"
      "  %w = exp %v : f32[8, 128]\n"
      "  store %y[:, :], %w\n"
      "}\n"
      "\n"
      "kernel @second\n"
      "  in %a: f32[8, 128] vmem\n"
      "  out %b: f32[8, 128] vmem\n"
      "{\n"
      "  %p = load %a[:, :] : f32[8, 128]\n"
      "  %q = exp %p : f32[8, 128]\n"
      "  store %b[:, :], %q\n"
      "}\n"
      "\n"
      "kernel @third\n"
      "  in %a: f32[8, 128] vmem\n"
      "  out %b: f32[8, 128] vmem\n"
      "{\n"
      "  %p = load %a[:, :] : f32[8, 128]\n"
      "  %q = log %p : f32[8, 128]\n"
      "  store %b[:, :], %q\n"
      "}\n";
  module_keys_t mk;
  if (!text_keys(text, &mk)) return;
  TSR_CHECK_EQ_INT(mk.count, 3);
  if (mk.count == 3) {
    TSR_CHECK(same_bytes(&mk.kernels[0], &mk.kernels[1]));
    TSR_CHECK(!same_bytes(&mk.kernels[1], &mk.kernels[2]));
  }
  keys_free(&mk);
}

/* Operands of a commutative op swapped, and two values used in the other
 * order: different kernels although every name is defined the same. */
TSR_TEST(operand_order_changes_bytes) {
  const char *a =
      "kernel @k\n"
      "  out %y: f32[8, 128] vmem\n"
      "{\n"
      "  %p = const 1.0 : f32[8, 128]\n"
      "  %q = const 2.0 : f32[8, 128]\n"
      "  %r = sub %p, %q : f32[8, 128]\n"
      "  store %y[:, :], %r\n"
      "}\n";
  const char *b =
      "kernel @k\n"
      "  out %y: f32[8, 128] vmem\n"
      "{\n"
      "  %p = const 1.0 : f32[8, 128]\n"
      "  %q = const 2.0 : f32[8, 128]\n"
      "  %r = sub %q, %p : f32[8, 128]\n"
      "  store %y[:, :], %r\n"
      "}\n";
  check_pair(a, b, false, "sub p, q vs sub q, p");
}

/* Two spellings that print the same must give the same bytes. */
static void check_same_spelling(const char *a, const char *b, const char *what) {
  module_keys_t ka, kb;
  if (!text_keys(a, &ka)) return;
  if (text_keys(b, &kb)) {
    if (ka.count < 1 || kb.count < 1) {
      TSR_FAIL_AT("%s: no kernel", what);
    } else {
      if (strcmp(ka.kernels[0].printed, kb.kernels[0].printed) != 0)
        TSR_FAIL_AT("%s: the spellings print differently:\n%s\n%s", what,
                    ka.kernels[0].printed, kb.kernels[0].printed);
      if (!same_bytes(&ka.kernels[0], &kb.kernels[0]))
        TSR_FAIL_AT("%s: canonical bytes differ at byte %zu", what,
                    first_difference(&ka.kernels[0], &kb.kernels[0]));
    }
    keys_free(&kb);
  }
  keys_free(&ka);
}

#define IF_KERNEL(tail)                                                       \
  "kernel @k\n"                                                               \
  "  out %y: f32[8, 128] vmem\n"                                              \
  "{\n"                                                                       \
  "  %c = const true : i1\n"                                                  \
  "  if %c {\n"                                                               \
  "    %z = const 0.0 : f32[8, 128]\n"                                        \
  "    store %y[:, :], %z\n"                                                  \
  tail                                                                        \
  "}\n"

#define FOR_KERNEL(tail)                                                      \
  "kernel @k\n"                                                               \
  "  out %y: i32[8, 128] vmem\n"                                              \
  "{\n"                                                                       \
  "  %z = const 0 : i32\n"                                                    \
  "  %n = const 4 : i32\n"                                                    \
  "  %one = const 1 : i32\n"                                                  \
  "  for %i = %z to %n step %one {\n"                                         \
  "    store %y[%i, :], %i\n"                                                 \
  tail                                                                        \
  "}\n"

#define SPELLED_MAP_KERNEL(map)                                               \
  "kernel @k\n"                                                               \
  "  grid(2) semantics(parallel)\n"                                           \
  "  in %x: f32[16, 8] vmem block[8, 8] map(%i) " map "\n"                    \
  "  out %y: f32[16, 8] vmem block[8, 8] map(%i) -> (%i, 0)\n"                \
  "{\n"                                                                       \
  "  %v = load %x[:, :] : f32[8, 8]\n"                                        \
  "  store %y[:, :], %v\n"                                                    \
  "}\n"

/* An empty else is layout: the printer leaves it out, so re-printing and
 * parsing must keep the bytes. */
TSR_TEST(empty_else_does_not_matter) {
  check_same_spelling(IF_KERNEL("  } else {\n  }\n"), IF_KERNEL("  }\n"), "empty else");
}

/* Kernels whose ops differ keep different bytes even where they print the
 * same: a final yield without operands (the printer leaves it out) and an
 * index map in the general form that prints in the short form. Equal bytes
 * must mean the same ops in the same order, because a prepared program is
 * bound to another kernel with the same bytes by op position
 * (tsr_interp_program_bind). Such spellings cost a cache miss, not a wrong
 * hit. */
static void check_same_print_other_ops(const char *a, const char *b, const char *what) {
  module_keys_t ka, kb;
  if (!text_keys(a, &ka)) return;
  if (text_keys(b, &kb)) {
    if (ka.count < 1 || kb.count < 1) {
      TSR_FAIL_AT("%s: no kernel", what);
    } else {
      if (strcmp(ka.kernels[0].printed, kb.kernels[0].printed) != 0)
        TSR_FAIL_AT("%s: the spellings print differently:\n%s\n%s", what,
                    ka.kernels[0].printed, kb.kernels[0].printed);
      if (same_bytes(&ka.kernels[0], &kb.kernels[0]))
        TSR_FAIL_AT("%s: kernels with different ops have the same bytes", what);
    }
    keys_free(&kb);
  }
  keys_free(&ka);
}

TSR_TEST(different_ops_that_print_the_same) {
  check_same_print_other_ops(FOR_KERNEL("    yield\n  }\n"), FOR_KERNEL("  }\n"),
                             "final yield");
  check_same_print_other_ops(
      SPELLED_MAP_KERNEL("{\n    %a = const 1 : i32\n    %b = const 0 : i32\n"
                         "    yield %b, %a\n  }"),
      SPELLED_MAP_KERNEL("-> (0, 1)"), "general map, constants in another order");
  check_same_print_other_ops(
      SPELLED_MAP_KERNEL("{\n    %z = const 0 : i32\n    yield %z, %z\n  }"),
      SPELLED_MAP_KERNEL("-> (0, 0)"), "general map, one constant used twice");
  /* the general form with the short form's ops is the same kernel */
  check_same_spelling(SPELLED_MAP_KERNEL("{\n    %z = const 0 : i32\n    yield %i, %z\n  }"),
                      SPELLED_MAP_KERNEL("-> (%i, 0)"), "general map, short form's ops");
  check_pair(SPELLED_MAP_KERNEL("{\n    %z = const 0 : i32\n    %j = add %i, %z : i32\n"
                                "    yield %j, %z\n  }"),
             SPELLED_MAP_KERNEL("-> (%i, 0)"), false, "general map with an add");
}

/* The builder and the parser make the same kernel: the same bytes. */
TSR_TEST(builder_matches_parser) {
  const char *text =
      "kernel @k\n"
      "  in %x: f32[8, 128] vmem\n"
      "  out %y: f32[8, 128] vmem\n"
      "{\n"
      "  %v = load %x[:, :] : f32[8, 128]\n"
      "  %w = load %x[0:4, ds(0, 128)] : f32[4, 128]\n"
      "  %e = exp %v : f32[8, 128]\n"
      "  store %y[:, :], %e\n"
      "  store %y[4:8, :], %w\n"
      "}\n";
  tsr_ir_module_t *m;
  TSR_CHECK_OK(tsr_ir_module_create("<builder>", &m));
  tsr_ir_kernel_t *k = NULL;
  TSR_CHECK_OK(tsr_ir_kernel_create(m, "k", &k));
  if (!k) {
    tsr_ir_module_destroy(m);
    return;
  }
  int64_t dims[2] = {8, 128}, half[2] = {4, 128};
  tsr_ir_value_t *x = NULL, *y = NULL;
  tsr_ir_operand_params_t in = {TSR_ROLE_IN, "x", tsr_ir_type_vector(TSR_DTYPE_F32, 2, dims),
                                TSR_SPACE_VMEM, NULL, -1};
  TSR_CHECK_OK(tsr_ir_kernel_add_operand(k, &in, &x, NULL));
  tsr_ir_operand_params_t out = in;
  out.role = TSR_ROLE_OUT;
  out.name = "y";
  TSR_CHECK_OK(tsr_ir_kernel_add_operand(k, &out, &y, NULL));
  tsr_ir_region_t *body = tsr_ir_kernel_body(k);
  tsr_ir_type_t blk = tsr_ir_type_vector(TSR_DTYPE_F32, 2, dims);
  tsr_ir_type_t halfblk = tsr_ir_type_vector(TSR_DTYPE_F32, 2, half);
  /* indices filled in only as far as the docs require */
  tsr_ir_index_t full[2] = {{.kind = TSR_INDEX_FULL, .operand = -1, .stride = 1},
                            {.kind = TSR_INDEX_FULL, .operand = -1, .stride = 1}};
  tsr_ir_index_t top[2] = {
      {.kind = TSR_INDEX_SLICE, .operand = -1, .start = 0, .stop = 4, .size = 4, .stride = 1},
      {.kind = TSR_INDEX_DS, .operand = -1, .start = 0, .size = 128, .stride = 1}};
  tsr_ir_index_t bottom[2] = {
      {.kind = TSR_INDEX_SLICE, .operand = -1, .start = 4, .stop = 8, .size = 4, .stride = 1},
      {.kind = TSR_INDEX_FULL, .operand = -1, .stride = 1}};
  tsr_ir_op_t *op = NULL;
  const char *vname = "v", *wname = "w", *ename = "e";
  tsr_ir_op_params_t p = {.mnemonic = "load", .operands = &x, .num_operands = 1,
                          .result_types = &blk, .result_names = &vname, .num_results = 1,
                          .indices = full, .num_indices = 2};
  TSR_CHECK_OK(tsr_ir_build_op(k, body, &p, &op));
  tsr_ir_value_t *v = op ? tsr_ir_op_result(op, 0) : NULL;
  p.result_types = &halfblk;
  p.result_names = &wname;
  p.indices = top;
  TSR_CHECK_OK(tsr_ir_build_op(k, body, &p, &op));
  tsr_ir_value_t *w = op ? tsr_ir_op_result(op, 0) : NULL;
  p = (tsr_ir_op_params_t){.mnemonic = "exp", .operands = &v, .num_operands = 1,
                           .result_types = &blk, .result_names = &ename, .num_results = 1};
  TSR_CHECK_OK(tsr_ir_build_op(k, body, &p, &op));
  tsr_ir_value_t *e = op ? tsr_ir_op_result(op, 0) : NULL;
  tsr_ir_value_t *st1[2] = {y, e}, *st2[2] = {y, w};
  p = (tsr_ir_op_params_t){.mnemonic = "store", .operands = st1, .num_operands = 2,
                           .indices = full, .num_indices = 2};
  TSR_CHECK_OK(tsr_ir_build_op(k, body, &p, &op));
  p.operands = st2;
  p.indices = bottom;
  TSR_CHECK_OK(tsr_ir_build_op(k, body, &p, &op));
  TSR_CHECK_OK(tsr_ir_module_verify(m));

  char *built_text = tsr_ir_module_print(m);
  TSR_CHECK_EQ_STR(built_text, text);
  tsr_ir_string_free(built_text);
  void *built = NULL;
  size_t built_size = 0;
  TSR_CHECK_OK(tsr_ir_kernel_canonical_bytes(k, &built, &built_size));
  module_keys_t parsed;
  if (built && text_keys(text, &parsed)) {
    kernel_keys_t b = {.bytes = built, .size = built_size};
    if (!same_bytes(&b, &parsed.kernels[0]))
      TSR_FAIL_AT("built and parsed kernels differ at byte %zu of %zu",
                  first_difference(&b, &parsed.kernels[0]), built_size);
    keys_free(&parsed);
  }
  tsr_ir_string_free(built);
  tsr_ir_module_destroy(m);
}

TSR_TEST(null_arguments) {
  void *bytes = NULL;
  size_t size = 0;
  TSR_CHECK_STATUS(tsr_ir_kernel_canonical_bytes(NULL, &bytes, &size),
                   TSR_INVALID_ARGUMENT);
  TSR_CHECK(bytes == NULL);
}

/* ---- Driver ------------------------------------------------------------------------- */

static void run_case(const char *kind, const char *path, void (*fn)(const char *path)) {
  tsr_test_case_failed = 0;
  fn(path);
  tsr_test_count++;
  if (tsr_test_case_failed) tsr_test_failed_count++;
  printf("%s %d - %s %s\n", tsr_test_case_failed ? "not ok" : "ok", tsr_test_count,
         kind, path);
  fflush(stdout);
}

int main(void) {
  path_list_t files = {0};
  for (size_t i = 0; i < TSR_ARRAY_SIZE(kernel_dirs); i++) collect(kernel_dirs[i], &files);
  if (files.count)
    qsort(files.paths, files.count, sizeof *files.paths, compare_paths);

  TSR_RUN(index_map_changes_bytes);
  TSR_RUN(alias_changes_bytes);
  TSR_RUN(revisit_mode_changes_bytes);
  TSR_RUN(declarations_change_bytes);
  TSR_RUN(grid_semantics_change_bytes);
  TSR_RUN(negative_zero_changes_bytes);
  TSR_RUN(print_text_changes_bytes);
  TSR_RUN(kernel_names_do_not_matter);
  TSR_RUN(operand_order_changes_bytes);
  TSR_RUN(empty_else_does_not_matter);
  TSR_RUN(different_ops_that_print_the_same);
  TSR_RUN(builder_matches_parser);
  TSR_RUN(null_arguments);
  for (size_t i = 0; i < files.count; i++)
    run_case("invariance", files.paths[i], case_invariance);
  for (size_t i = 0; i < files.count; i++)
    run_case("mutations", files.paths[i], case_mutations);

  /* The mutation test must have checked something: at least 20 files and,
   * over all of them, many verified mutants of both kinds. */
  tsr_test_case_failed = 0;
  printf("# total: %d files, %d mutants, %d verified: %d changed a kernel, %d no-ops, "
         "%d skipped, %d failures\n",
         totals.files, totals.tried, totals.verified, totals.semantic, totals.noop,
         totals.renames, totals.failures);
  TSR_CHECK(totals.files >= 20);
  TSR_CHECK(totals.semantic >= 2000);
  TSR_CHECK(totals.noop >= 100);
  tsr_test_count++;
  if (tsr_test_case_failed) tsr_test_failed_count++;
  printf("%s %d - enough verified mutants\n", tsr_test_case_failed ? "not ok" : "ok",
         tsr_test_count);
  list_free(&files);
  return tsr_test_done();
}
