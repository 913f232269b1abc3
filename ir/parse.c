/* Parser of the kernel IR text format (docs/ir.md): a hand-written lexer and
 * a recursive-descent parser that builds modules through the construction
 * functions of ir/ir.h, so parsed and built modules have the same shape.
 *
 * Conventions the verifier and the interpreter rely on (the public builder
 * must follow them too):
 *
 * Locations: an op's loc is the line:col of its mnemonic, also for ops with
 * results; a kernel's loc is its @name, a decl's its %name. Ops created by
 * the short index-map form get the loc of their integer (const) or of the
 * `map` keyword (yield).
 *
 * Operand layouts: docs/ir.md, "Operand layouts of compound ops"; memory,
 * DMA and semaphore ops are laid out by tsr_opview_layout (ir/opview.h),
 * the encoder that matches the views' decoders.
 *
 * Errors: each op or header line that fails records one diagnostic and the
 * parser skips to the end of the line (skipping whole regions opened on
 * it); results of a failed line are "poisoned" so later uses do not cascade.
 * Recursion is bounded by MAX_NESTING, so no input can exhaust the stack. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "ir/opview.h"

/* uthash allocates through the checked allocator so that allocation failure
 * can be injected; failures are reported by clearing the entry's hh.tbl. */
#define HASH_NONFATAL_OOM 1
#define uthash_malloc(sz) tsr_malloc(sz)
#define uthash_free(ptr, sz) tsr_free(ptr)
#include "base/hashtable.h"

enum {
  MAX_DIAGNOSTICS = 20,
  MAX_NESTING = 200, /* regions inside regions */
  MAX_LITERAL = 128, /* longest numeric literal accepted */
};

/* ---- Lexer ------------------------------------------------------------ */

typedef enum tok_kind {
  TOK_EOF,
  TOK_NEWLINE,
  TOK_IDENT,  /* keywords, op names, dtypes, inf/nan/true/false */
  TOK_VALUE,  /* %name */
  TOK_KERNEL, /* @name */
  TOK_INT,    /* -12, 0x7f */
  TOK_FLOAT,  /* 1.5, -2e-3 */
  TOK_STRING, /* "..." with escapes still in */
  TOK_LPAREN,
  TOK_RPAREN,
  TOK_LBRACKET,
  TOK_RBRACKET,
  TOK_LBRACE,
  TOK_RBRACE,
  TOK_COMMA,
  TOK_COLON,
  TOK_EQUAL,
  TOK_ARROW,
  TOK_MINUS, /* only in "-inf" */
  TOK_ERROR, /* already reported by the lexer */
} tok_kind_t;

typedef struct token {
  tok_kind_t kind;
  const char *text; /* into the source; names include their sigil */
  size_t len;
  uint32_t line, col;
} token_t;

/* ---- Symbols ------------------------------------------------------------
 * One uthash table per kernel (names are unique per kernel) and one per
 * general index map (map names are local). A scope lists the symbols its
 * region defined, so closing the region hides them. */

typedef struct symbol {
  const char *name; /* without '%'; borrowed from the source or the module */
  size_t len;
  tsr_value_t *value; /* NULL: its definition had an error (uses stay quiet) */
  uint32_t line, col; /* where it was defined */
  bool visible;       /* false once its region closed or while its op is open */
  struct symbol *scope_next;
  UT_hash_handle hh;
} symbol_t;

typedef struct scope {
  symbol_t *symbols;
  struct scope *outer;
} scope_t;

typedef struct parser {
  const char *file; /* the module's copy of the filename */
  const char *pos, *end, *line_start;
  uint32_t line;
  token_t tok; /* the current (lookahead) token */
  tsr_module_t *module;
  tsr_kernel_t *kernel;
  symbol_t *table;
  scope_t *scope;
  symbol_t *kernel_names; /* value NULL; for duplicate @names */
  uint32_t depth;       /* open regions */
  tsr_arena_t scratch;  /* symbols and temporary strings; freed at the end */
  tsr_diag_list_t diags;
  tsr_status_t fatal;   /* out of memory: stop everything */
  bool eof_reported;
  bool skipping;        /* skipping after an error: lexer errors are noise */
  symbol_t *kernel_table; /* in a general index map (which has its own table):
                             the kernel's; NULL elsewhere */
} parser_t;

static bool error_at(parser_t *p, uint32_t line, uint32_t col, const char *fmt,
                     ...) TSR_PRINTF(4, 5);

static bool error_at(parser_t *p, uint32_t line, uint32_t col, const char *fmt,
                     ...) {
  tsr_loc_t loc = {p->file, line, col};
  va_list ap;
  va_start(ap, fmt);
  tsr_diag_vadd(&p->diags, loc, fmt, ap);
  va_end(ap);
  return false;
}

/* Lexer diagnostics, silent while the rest of a bad line is skipped. */
static bool lex_error(parser_t *p, uint32_t line, uint32_t col, const char *fmt,
                      ...) TSR_PRINTF(4, 5);

static bool lex_error(parser_t *p, uint32_t line, uint32_t col, const char *fmt,
                      ...) {
  if (p->skipping) return false;
  tsr_loc_t loc = {p->file, line, col};
  va_list ap;
  va_start(ap, fmt);
  tsr_diag_vadd(&p->diags, loc, fmt, ap);
  va_end(ap);
  return false;
}

static bool oom(parser_t *p) {
  if (!p->fatal) p->fatal = TSR_OOM();
  return false;
}

/* Takes a construction status: false (and fatal) on failure. */
static bool check(parser_t *p, tsr_status_t s) {
  if (!s) return true;
  if (!p->fatal)
    p->fatal = s;
  else
    tsr_status_free(s);
  return false;
}

static bool is_digit(int c) { return c >= '0' && c <= '9'; }
static bool is_hex(int c) {
  return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
static bool is_ident_start(int c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
static bool is_ident_char(int c) { return is_ident_start(c) || is_digit(c); }

/* Characters that can start a token (or separate them). */
static bool starts_token(const char *s, const char *end) {
  int c = (unsigned char)*s;
  if (is_ident_char(c) || strchr(" \t\r\n()[]{},:=-%@\"", c)) return c != 0;
  return c == '/' && s + 1 < end && s[1] == '/';
}

/* Scans a number starting at s (which may be '-'); sets *is_float. Returns
 * the end, or NULL if ident characters follow (e.g. "12ab", "0x"). */
static const char *scan_number(const char *s, const char *end, bool *is_float) {
  *is_float = false;
  if (*s == '-') s++;
  if (end - s >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    s += 2;
    const char *digits = s;
    while (s < end && is_hex((unsigned char)*s)) s++;
    if (s == digits) return NULL;
  } else {
    while (s < end && is_digit((unsigned char)*s)) s++;
    if (s < end && *s == '.') {
      *is_float = true;
      s++;
      while (s < end && is_digit((unsigned char)*s)) s++;
    }
    if (s < end && (*s == 'e' || *s == 'E')) {
      const char *e = s + 1;
      if (e < end && (*e == '+' || *e == '-')) e++;
      if (e < end && is_digit((unsigned char)*e)) {
        *is_float = true;
        s = e;
        while (s < end && is_digit((unsigned char)*s)) s++;
      }
    }
  }
  if (s < end && (is_ident_char((unsigned char)*s) || *s == '.')) return NULL;
  return s;
}

/* Scans a %name/@name after the sigil: [A-Za-z_][A-Za-z0-9_.]* or digits.
 * Returns the end, or NULL if malformed. */
static const char *scan_name(const char *s, const char *end) {
  if (s < end && is_ident_start((unsigned char)*s)) {
    while (s < end && (is_ident_char((unsigned char)*s) || *s == '.')) s++;
    return s;
  }
  if (s < end && is_digit((unsigned char)*s)) {
    while (s < end && is_digit((unsigned char)*s)) s++;
    if (s < end && (is_ident_char((unsigned char)*s) || *s == '.')) return NULL;
    return s;
  }
  return NULL;
}

/* Formats byte c for a message: 'x' (an escape '\x' when `escape`), or
 * '\xNN' for unprintable bytes. */
static const char *char_text(int c, bool escape, char *buf, size_t size) {
  if (c >= 0x20 && c < 0x7f)
    snprintf(buf, size, "'%s%c'", escape ? "\\" : "", c);
  else
    snprintf(buf, size, "'\\x%02x'", c & 0xff);
  return buf;
}

/* Scans a string body after the opening quote; reports bad escapes, control
 * characters and a missing closing quote. Returns the end (after the quote,
 * or at the newline/end when unterminated) and whether it is well formed. */
static const char *scan_string(parser_t *p, const char *s, uint32_t col0,
                               bool *ok) {
  const char *end = p->end;
  *ok = true;
  while (s < end && *s != '"') {
    uint32_t col = (uint32_t)(s - p->line_start) + 1;
    char buf[16];
    if (*s == '\n') break;
    if (*s == '\\') {
      if (s + 1 >= end || s[1] == '\n') {
        s++;
        break;
      }
      if (!strchr("\"\\nt", s[1]) || s[1] == 0) {
        lex_error(p, p->line, col,
                 "unknown escape %s in string (use \\\", \\\\, \\n or \\t)",
                 char_text((unsigned char)s[1], true, buf, sizeof buf));
        *ok = false;
      }
      s += 2;
      continue;
    }
    if ((unsigned char)*s < 0x20 && *s != '\t') {
      lex_error(p, p->line, col, "control character %s in string",
               char_text((unsigned char)*s, false, buf, sizeof buf));
      *ok = false;
    }
    s++;
  }
  if (s >= end || *s != '"') {
    lex_error(p, p->line, col0, "unterminated string");
    *ok = false;
    return s;
  }
  return s + 1;
}

/* Lexes a number at s (digits or '-' digit) into *t; returns its end. */
static const char *lex_number(parser_t *p, const char *s, token_t *t) {
  bool is_float;
  const char *e = scan_number(s, p->end, &is_float);
  if (!e) {
    e = s + 1;
    while (e < p->end && (is_ident_char((unsigned char)*e) || *e == '.')) e++;
    lex_error(p, t->line, t->col, "invalid number '%.*s'", (int)TSR_MIN(e - s, 40), s);
    return e;
  }
  t->kind = is_float ? TOK_FLOAT : TOK_INT;
  return e;
}

static void next(parser_t *p) {
  const char *s = p->pos, *end = p->end;
  if (p->fatal) s = end; /* out of memory: wind down */
  for (;;) {
    while (s < end && (*s == ' ' || *s == '\t' || *s == '\r')) s++;
    if (end - s >= 2 && s[0] == '/' && s[1] == '/') {
      while (s < end && *s != '\n') s++;
      continue;
    }
    break;
  }
  token_t t;
  t.text = s;
  t.line = p->line;
  t.col = (uint32_t)(s - p->line_start) + 1;
  t.kind = TOK_ERROR;
  if (s >= end) {
    t.kind = TOK_EOF;
    t.len = 0;
    p->tok = t;
    p->pos = s;
    return;
  }
  int c = (unsigned char)*s;
  char buf[16];
  switch (c) {
    case '\n':
      t.kind = TOK_NEWLINE;
      s++;
      p->line++;
      p->line_start = s;
      break;
    case '(': t.kind = TOK_LPAREN; s++; break;
    case ')': t.kind = TOK_RPAREN; s++; break;
    case '[': t.kind = TOK_LBRACKET; s++; break;
    case ']': t.kind = TOK_RBRACKET; s++; break;
    case '{': t.kind = TOK_LBRACE; s++; break;
    case '}': t.kind = TOK_RBRACE; s++; break;
    case ',': t.kind = TOK_COMMA; s++; break;
    case ':': t.kind = TOK_COLON; s++; break;
    case '=': t.kind = TOK_EQUAL; s++; break;
    case '%':
    case '@': {
      const char *e = scan_name(s + 1, end);
      if (!e) {
        e = s + 1;
        while (e < end && (is_ident_char((unsigned char)*e) || *e == '.')) e++;
        lex_error(p, t.line, t.col,
                 "invalid name '%.*s' (names are letters, digits, '_' and '.', "
                 "starting with a letter or '_', or all digits)",
                 (int)TSR_MIN(e - s, 40), s);
        s = e;
        break;
      }
      t.kind = c == '%' ? TOK_VALUE : TOK_KERNEL;
      s = e;
      break;
    }
    case '"': {
      bool ok;
      s = scan_string(p, s + 1, t.col, &ok);
      if (ok) t.kind = TOK_STRING;
      break;
    }
    case '-':
      if (s + 1 < end && s[1] == '>') {
        t.kind = TOK_ARROW;
        s += 2;
        break;
      }
      if (!(s + 1 < end && is_digit((unsigned char)s[1]))) {
        t.kind = TOK_MINUS;
        s++;
        break;
      }
      s = lex_number(p, s, &t);
      break;
    default:
      if (is_digit(c)) {
        s = lex_number(p, s, &t);
      } else if (is_ident_start(c)) {
        while (s < end && is_ident_char((unsigned char)*s)) s++;
        t.kind = TOK_IDENT;
      } else {
        /* One diagnostic for a run of stray characters. */
        lex_error(p, t.line, t.col, "unexpected character %s",
                 char_text(c, false, buf, sizeof buf));
        s++;
        while (s < end && !starts_token(s, end)) s++;
      }
      break;
  }
  t.len = (size_t)(s - t.text);
  p->tok = t;
  p->pos = s;
}

/* ---- Token helpers ------------------------------------------------------ */

static bool tok_is(const token_t *t, const char *word) {
  size_t n = strlen(word);
  return t->kind == TOK_IDENT && t->len == n && memcmp(t->text, word, n) == 0;
}

static bool at(parser_t *p, tok_kind_t kind) { return p->tok.kind == kind; }
static bool at_word(parser_t *p, const char *word) { return tok_is(&p->tok, word); }
static bool at_line_end(parser_t *p) {
  return p->tok.kind == TOK_NEWLINE || p->tok.kind == TOK_EOF;
}

static bool accept(parser_t *p, tok_kind_t kind) {
  if (p->tok.kind != kind) return false;
  next(p);
  return true;
}

static bool accept_word(parser_t *p, const char *word) {
  if (!tok_is(&p->tok, word)) return false;
  next(p);
  return true;
}

static const char *describe(const token_t *t, char *buf, size_t size) {
  if (t->kind == TOK_EOF) return "end of file";
  if (t->kind == TOK_NEWLINE) return "end of line";
  if (t->len > 40)
    snprintf(buf, size, "'%.37s...'", t->text);
  else
    snprintf(buf, size, "'%.*s'", (int)t->len, t->text);
  return buf;
}

/* "expected WHAT, found TOKEN" at the current token (quiet after a lexer
 * error, which is already reported). Always false. */
static bool expected(parser_t *p, const char *what) {
  if (p->tok.kind == TOK_ERROR) return false;
  char buf[64];
  return error_at(p, p->tok.line, p->tok.col, "expected %s, found %s", what,
                  describe(&p->tok, buf, sizeof buf));
}

static bool expect(parser_t *p, tok_kind_t kind, const char *what) {
  if (p->tok.kind != kind) return expected(p, what);
  next(p);
  return true;
}

static bool expect_word(parser_t *p, const char *word, const char *what) {
  if (!tok_is(&p->tok, word)) return expected(p, what);
  next(p);
  return true;
}

static bool expect_line_end(parser_t *p) {
  return at_line_end(p) || expected(p, "end of line");
}

/* Skips the rest of a line after an error. A region opened on the skipped
 * part is skipped as a whole (to its closing brace); an unmatched '}' is
 * left for the enclosing region. */
static void skip_line(parser_t *p) {
  long depth = 0;
  p->skipping = true;
  for (;;) {
    tok_kind_t kind = p->tok.kind;
    if (kind == TOK_EOF || (kind == TOK_RBRACE && depth == 0)) break;
    if (kind == TOK_NEWLINE && depth == 0) {
      p->skipping = false;
      next(p);
      return;
    }
    if (kind == TOK_LBRACE) depth++;
    if (kind == TOK_RBRACE) depth--;
    next(p);
  }
  p->skipping = false;
}

/* Value of an INT token: decimal or hex with an optional '-'; false if it
 * does not fit in 64 bits. */
static bool int_value(const token_t *t, int64_t *out) {
  const char *s = t->text, *e = t->text + t->len;
  bool neg = s < e && *s == '-';
  if (neg) s++;
  uint64_t base = 10, v = 0;
  if (e - s > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    base = 16;
    s += 2;
  }
  for (; s < e; s++) {
    int c = (unsigned char)*s;
    uint64_t d = is_digit(c) ? (uint64_t)(c - '0')
                             : (uint64_t)((c | 0x20) - 'a' + 10);
    if (v > (UINT64_MAX - d) / base) return false;
    v = v * base + d;
  }
  if (neg) {
    if (v > (uint64_t)INT64_MAX + 1) return false;
    *out = v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v;
  } else {
    if (v > (uint64_t)INT64_MAX) return false;
    *out = (int64_t)v;
  }
  return true;
}

static bool parse_int(parser_t *p, const char *what, int64_t *out) {
  if (p->tok.kind != TOK_INT) return expected(p, what);
  if (!int_value(&p->tok, out))
    return error_at(p, p->tok.line, p->tok.col,
                    "integer literal '%.*s' does not fit in 64 bits",
                    (int)TSR_MIN(p->tok.len, 40), p->tok.text);
  next(p);
  return true;
}

/* ---- Symbols -------------------------------------------------------------- */

static symbol_t *lookup(parser_t *p, const char *name, size_t len) {
  symbol_t *s = NULL;
  HASH_FIND(hh, p->table, name, len, s);
  return s;
}

static symbol_t *lookup_tok(parser_t *p, const token_t *t) {
  return lookup(p, t->text + 1, t->len - 1);
}

/* Adds a symbol (in the scratch arena) to a table; NULL when out of memory. */
static symbol_t *table_add(parser_t *p, symbol_t **table, const char *name,
                           size_t len, uint32_t line, uint32_t col) {
  symbol_t *s = tsr_arena_alloc(&p->scratch, sizeof *s);
  if (!s) {
    oom(p);
    return NULL;
  }
  s->name = name;
  s->len = len;
  s->line = line;
  s->col = col;
  HASH_ADD_KEYPTR(hh, *table, s->name, s->len, s);
  if (!s->hh.tbl) {
    oom(p);
    return NULL;
  }
  return s;
}

/* Adds a symbol to the current table and scope. */
static bool define(parser_t *p, const char *name, size_t len, uint32_t line,
                   uint32_t col, tsr_value_t *value, bool visible) {
  symbol_t *s = table_add(p, &p->table, name, len, line, col);
  if (!s) return false;
  s->value = value;
  s->visible = visible;
  s->scope_next = p->scope->symbols;
  p->scope->symbols = s;
  return true;
}

static bool define_tok(parser_t *p, const token_t *t, tsr_value_t *value,
                       bool visible) {
  return define(p, t->text + 1, t->len - 1, t->line, t->col, value, visible);
}

static void scope_open(parser_t *p, scope_t *s) {
  s->symbols = NULL;
  s->outer = p->scope;
  p->scope = s;
}

static void scope_close(parser_t *p) {
  for (symbol_t *s = p->scope->symbols; s; s = s->scope_next) s->visible = false;
  p->scope = p->scope->outer;
}

/* The kernel operand named by `t` in `table` (a kernel's table, where the
 * header defines the operands' refs), or NULL. */
static const tsr_decl_t *find_decl(parser_t *p, symbol_t *table, const token_t *t) {
  symbol_t *s = NULL;
  HASH_FIND(hh, table, t->text + 1, t->len - 1, s);
  return s && s->value && s->value->decl >= 0 ? &p->kernel->decls[s->value->decl]
                                              : NULL;
}

/* A name being defined must be new in the kernel (or map). */
static bool check_fresh(parser_t *p, const token_t *t) {
  symbol_t *s = lookup_tok(p, t);
  if (!s) return true;
  return error_at(p, t->line, t->col, "redefinition of %.*s (first defined at %u:%u)",
                  (int)t->len, t->text, s->line, s->col);
}

/* Parses a use of a value: it must be defined and visible here. */
static bool parse_use(parser_t *p, const char *what, tsr_value_t **out) {
  if (p->tok.kind != TOK_VALUE) return expected(p, what);
  const token_t *t = &p->tok;
  symbol_t *s = lookup_tok(p, t);
  if (!s && p->kernel_table && find_decl(p, p->kernel_table, t))
    return error_at(p, t->line, t->col,
                    "%.*s is not visible in an index map (maps see their "
                    "arguments and the prefetch refs)",
                    (int)t->len, t->text);
  if (!s)
    return error_at(p, t->line, t->col, "use of undefined value %.*s",
                    (int)t->len, t->text);
  if (!s->visible)
    return error_at(p, t->line, t->col,
                    "%.*s (defined at %u:%u) is not visible here", (int)t->len,
                    t->text, s->line, s->col);
  if (!s->value) return false; /* its definition failed: already reported */
  *out = s->value;
  next(p);
  return true;
}

/* ---- Growable arrays (per op line) --------------------------------------- */

typedef struct vec {
  void *data;
  uint32_t count, capacity;
} vec_t;

static bool vec_push(parser_t *p, vec_t *v, const void *elem, size_t size) {
  if (v->count == v->capacity) {
    uint32_t cap = v->capacity ? v->capacity * 2 : 8;
    size_t bytes;
    if (cap < v->capacity || !tsr_mul_size(cap, size, &bytes)) return oom(p);
    void *d = tsr_realloc(v->data, bytes);
    if (!d) return oom(p);
    v->data = d;
    v->capacity = cap;
  }
  memcpy((char *)v->data + (size_t)v->count * size, elem, size);
  v->count++;
  return true;
}

#define VEC_AT(v, T, i) (((T *)(v).data)[i])

/* What one op line collects before the op is created. */
typedef struct op_line {
  vec_t names;     /* token_t: result names */
  vec_t operands;  /* tsr_value_t *: in final order (see the header) */
  vec_t dyn;       /* tsr_value_t *: dynamic index starts, in order */
  vec_t types;     /* tsr_type_t: result types */
  vec_t arg_names; /* token_t: region args (iv, iter names, scoped names) */
  vec_t arg_types; /* tsr_type_t: scoped arg types */
  tsr_index_t indices[4 * TSR_MAX_RANK]; /* up to 4 views (dma_start) */
  uint32_t num_indices;
  int64_t ints[TSR_MAX_RANK];
  uint32_t num_ints;
  uint32_t flags;
  tsr_literal_t literal;
  const char *text;
  token_t mnemonic;
  tsr_opcode_t opcode;
  tsr_op_t *op;     /* once created */
  symbol_t *names_seen; /* result and region-arg names of this line */
} op_line_t;

static void op_line_free(op_line_t *l) {
  tsr_free(l->names.data);
  tsr_free(l->operands.data);
  tsr_free(l->dyn.data);
  tsr_free(l->types.data);
  tsr_free(l->arg_names.data);
  tsr_free(l->arg_types.data);
  HASH_CLEAR(hh, l->names_seen);
}

static bool push_value(parser_t *p, vec_t *v, tsr_value_t *value) {
  return vec_push(p, v, &value, sizeof value);
}

/* A region-argument or result name must be new in the kernel and within
 * its own line; claims it for the line. */
static bool check_fresh_in_line(parser_t *p, op_line_t *l, const token_t *t) {
  symbol_t *o = NULL;
  HASH_FIND(hh, l->names_seen, t->text + 1, t->len - 1, o);
  if (o)
    return error_at(p, t->line, t->col, "redefinition of %.*s (first defined at %u:%u)",
                    (int)t->len, t->text, o->line, o->col);
  return check_fresh(p, t) &&
         table_add(p, &l->names_seen, t->text + 1, t->len - 1, t->line, t->col);
}

/* A %name the line defines (a result or region argument; `what` for the
 * message), checked fresh and appended to `names` (token_t). */
static bool parse_new_name(parser_t *p, op_line_t *l, vec_t *names, const char *what) {
  const token_t name = p->tok;
  if (!at(p, TOK_VALUE)) return expected(p, what);
  if (!check_fresh_in_line(p, l, &name)) return false;
  next(p);
  return vec_push(p, names, &name, sizeof name);
}

/* ---- Types ----------------------------------------------------------------- */

/* "[d0, d1, ..]" (current token '['): 1..TSR_MAX_RANK dims, each >= 1. */
static bool parse_dims(parser_t *p, uint32_t *out_rank, int64_t *dims) {
  next(p);
  uint32_t n = 0;
  for (;;) {
    token_t t = p->tok;
    int64_t d;
    if (!parse_int(p, "a dimension", &d)) return false;
    if (d < 1)
      return error_at(p, t.line, t.col, "dimension must be >= 1, found %lld",
                      (long long)d);
    if (n == TSR_MAX_RANK)
      return error_at(p, t.line, t.col, "more than %d dimensions", TSR_MAX_RANK);
    dims[n++] = d;
    if (accept(p, TOK_COMMA)) continue;
    if (accept(p, TOK_RBRACKET)) break;
    return expected(p, "',' or ']' after a dimension");
  }
  *out_rank = n;
  return true;
}

static bool dtype_of(const token_t *t, tsr_dtype_t *out) {
  return t->kind == TOK_IDENT && tsr_dtype_from_name(t->text, t->len, out);
}

/* DTYPE or DTYPE[dims]: a scalar or block type. */
static bool parse_value_type(parser_t *p, const char *what, tsr_type_t *out) {
  tsr_dtype_t dtype;
  if (!dtype_of(&p->tok, &dtype)) return expected(p, what);
  next(p);
  if (!at(p, TOK_LBRACKET)) {
    *out = tsr_type_scalar(dtype);
    return true;
  }
  uint32_t rank;
  int64_t dims[TSR_MAX_RANK];
  if (!parse_dims(p, &rank, dims)) return false;
  *out = tsr_type_vector(dtype, rank, dims);
  return true;
}

/* Any type: f32, f32[8, 128], vmem f32[8, 128], smem i32, sem[4], dma_sem. */
static bool parse_type(parser_t *p, tsr_type_t *out) {
  const token_t t = p->tok;
  if (t.kind != TOK_IDENT) return expected(p, "a type");
  uint32_t rank = 0;
  int64_t dims[TSR_MAX_RANK];
  tsr_space_t space;
  if (tsr_space_from_name(t.text, t.len, &space)) {
    next(p);
    tsr_dtype_t dtype;
    if (!dtype_of(&p->tok, &dtype))
      return expected(p, "an element type after the memory space");
    next(p);
    if (at(p, TOK_LBRACKET) && !parse_dims(p, &rank, dims)) return false;
    *out = tsr_type_ref(space, dtype, rank, dims);
    return true;
  }
  if (tok_is(&t, "sem") || tok_is(&t, "dma_sem")) {
    next(p);
    if (at(p, TOK_LBRACKET) && !parse_dims(p, &rank, dims)) return false;
    *out = tsr_type_sem(tok_is(&t, "sem") ? TSR_SEM_REGULAR : TSR_SEM_DMA, rank,
                        dims);
    return true;
  }
  tsr_dtype_t dtype;
  if (!dtype_of(&t, &dtype))
    return error_at(p, t.line, t.col, "unknown type '%.*s'",
                    (int)TSR_MIN(t.len, 40), t.text);
  return parse_value_type(p, "a type", out);
}

/* ": T, T, .." for an op with results (exactly one type per result name). */
static bool parse_result_types(parser_t *p, op_line_t *l) {
  uint32_t n = l->names.count;
  const token_t colon = p->tok;
  if (n == 0) {
    if (colon.kind != TOK_COLON) return true;
    return error_at(p, colon.line, colon.col, "'%s' has no results, found ':'",
                    tsr_op_table[l->opcode].mnemonic);
  }
  if (!expect(p, TOK_COLON, "':' and the result type")) return false;
  for (;;) {
    tsr_type_t t;
    if (!parse_type(p, &t)) return false;
    if (!vec_push(p, &l->types, &t, sizeof t)) return false;
    if (!accept(p, TOK_COMMA)) break;
  }
  if (l->types.count != n)
    return error_at(p, colon.line, colon.col,
                    "expected %u result type%s, found %u", n, n == 1 ? "" : "s",
                    l->types.count);
  return true;
}

/* ---- Literals ---------------------------------------------------------------- */


/* Converts the literal token `t` (neg: it was "-inf") for dtype. */
static bool convert_literal(parser_t *p, const token_t *t, bool neg,
                            const tsr_type_t *type, tsr_literal_t *out) {
  char buf[64];
  if (type->kind == TSR_TYPE_REF || type->kind == TSR_TYPE_SEM)
    return error_at(p, t->line, t->col,
                    "'const' needs a scalar or block type, found '%s'",
                    type->kind == TSR_TYPE_SEM ? "sem" : "ref");
  tsr_dtype_t dtype = (tsr_dtype_t)type->dtype;
  const char *dname = tsr_dtype_name(dtype);
  switch (tsr_dtype_class(dtype)) {
    case TSR_CLASS_FLOAT: {
      double v;
      if (tok_is(t, "inf")) {
        v = neg ? -INFINITY : INFINITY;
      } else if (tok_is(t, "nan")) {
        v = NAN;
      } else if (t->kind == TOK_INT || t->kind == TOK_FLOAT) {
        /* strtod reads every numeric token, hex integers included. */
        char text[MAX_LITERAL + 1];
        if (t->len > MAX_LITERAL)
          return error_at(p, t->line, t->col, "numeric literal too long");
        memcpy(text, t->text, t->len);
        text[t->len] = 0;
        v = strtod(text, NULL);
      } else {
        return error_at(p, t->line, t->col, "expected a float literal for %s, found %s",
                        dname, describe(t, buf, sizeof buf));
      }
      double r = tsr_literal_round(v, dtype);
      if (isinf(r) && !isinf(v))
        return error_at(p, t->line, t->col,
                        "float literal %.*s is out of range for %s",
                        (int)TSR_MIN(t->len, 40), t->text, dname);
      out->f = r;
      return true;
    }
    case TSR_CLASS_BOOL:
      if (tok_is(t, "true") || tok_is(t, "false")) {
        out->i = tok_is(t, "true");
        return true;
      }
      return error_at(p, t->line, t->col, "expected 'true' or 'false' for i1, found %s",
                      describe(t, buf, sizeof buf));
    case TSR_CLASS_SINT:
    case TSR_CLASS_UINT: {
      if (t->kind != TOK_INT || neg)
        return error_at(p, t->line, t->col,
                        "expected an integer literal for %s, found %s", dname,
                        describe(t, buf, sizeof buf));
      int64_t v;
      bool fits = int_value(t, &v);
      int bits = (int)tsr_dtype_size(dtype) * 8;
      int64_t lo, hi;
      if (tsr_dtype_class(dtype) == TSR_CLASS_SINT) {
        lo = -((int64_t)1 << (bits - 1));
        hi = ((int64_t)1 << (bits - 1)) - 1;
      } else {
        lo = 0;
        hi = (int64_t)(((uint64_t)1 << bits) - 1);
      }
      if (!fits || v < lo || v > hi)
        return error_at(p, t->line, t->col,
                        "integer literal %.*s is out of range for %s (%lld to %lld)",
                        (int)TSR_MIN(t->len, 40), t->text, dname, (long long)lo,
                        (long long)hi);
      out->i = v;
      return true;
    }
  }
  return false;
}

/* Decodes the escapes of a STRING token into a module string. */
static bool decode_string(parser_t *p, const token_t *t, const char **out) {
  char *s = tsr_arena_alloc(&p->module->arena, t->len);
  if (!s) return oom(p);
  size_t n = 0;
  for (size_t i = 1; i + 1 < t->len; i++) {
    char c = t->text[i];
    if (c == '\\') {
      c = t->text[++i];
      c = c == 'n' ? '\n' : c == 't' ? '\t' : c;
    }
    s[n++] = c;
  }
  s[n] = 0;
  *out = s;
  return true;
}

/* ---- Indices ---------------------------------------------------------------- */

/* One index of a view (see the header for the fields). `type` is the
 * ref's/value's type, used to fill open slice ends. */
static bool parse_index(parser_t *p, const token_t *ref, const tsr_type_t *type,
                        uint32_t dim, bool static_only, const char *opname,
                        op_line_t *l, tsr_index_t *ix) {
  const token_t t = p->tok;
  memset(ix, 0, sizeof *ix);
  ix->operand = -1;
  ix->stride = 1;
  if (t.kind == TOK_VALUE || tok_is(&t, "ds")) {
    if (static_only)
      return error_at(p, t.line, t.col, "'%s' takes static indices only, found '%.*s'",
                      opname, (int)TSR_MIN(t.len, 40), t.text);
  }
  if (t.kind == TOK_VALUE) {
    tsr_value_t *v;
    if (!parse_use(p, "an index", &v)) return false;
    ix->kind = TSR_INDEX_POINT;
    ix->operand = (int32_t)l->dyn.count;
    ix->size = 1;
    return push_value(p, &l->dyn, v);
  }
  if (tok_is(&t, "ds")) {
    next(p);
    if (!expect(p, TOK_LPAREN, "'(' after 'ds'")) return false;
    ix->kind = TSR_INDEX_DS;
    if (at(p, TOK_VALUE)) {
      tsr_value_t *v;
      if (!parse_use(p, "a start", &v)) return false;
      ix->operand = (int32_t)l->dyn.count;
      if (!push_value(p, &l->dyn, v)) return false;
    } else if (!parse_int(p, "a start (%value or integer) in ds(..)", &ix->start)) {
      return false;
    }
    if (!expect(p, TOK_COMMA, "',' and a size in ds(..)")) return false;
    if (!parse_int(p, "a size in ds(..)", &ix->size)) return false;
    if (accept(p, TOK_COMMA)) {
      const token_t st = p->tok;
      if (!parse_int(p, "a stride in ds(..)", &ix->stride)) return false;
      if (ix->stride < 1)
        return error_at(p, st.line, st.col, "stride must be >= 1, found %lld",
                        (long long)ix->stride);
    }
    return expect(p, TOK_RPAREN, "',' or ')' in ds(..)");
  }
  /* Static: INT, ':', or a range [a]:[b][:s]. */
  bool has_start = false, has_stop = false, has_stride = false;
  if (t.kind == TOK_INT) {
    if (!parse_int(p, "an index", &ix->start)) return false;
    has_start = true;
    if (!at(p, TOK_COLON)) {
      ix->kind = TSR_INDEX_POINT;
      ix->size = 1;
      return true;
    }
  }
  if (!accept(p, TOK_COLON))
    return expected(p, "an index (':', an integer, a %value or ds(..))");
  if (at(p, TOK_INT)) {
    if (!parse_int(p, "a slice end", &ix->stop)) return false;
    has_stop = true;
  }
  if (accept(p, TOK_COLON)) {
    const token_t st = p->tok;
    if (!parse_int(p, "a stride after ':'", &ix->stride)) return false;
    if (ix->stride < 1)
      return error_at(p, st.line, st.col, "stride must be >= 1, found %lld",
                      (long long)ix->stride);
    has_stride = true;
  }
  bool known = type && dim < type->rank;
  if (!has_start && !has_stop && !has_stride) {
    ix->kind = TSR_INDEX_FULL;
    ix->stop = ix->size = known ? type->dims[dim] : 0;
    return true;
  }
  ix->kind = TSR_INDEX_SLICE;
  if (!has_stop) {
    if (!known)
      return error_at(p, t.line, t.col,
                      "an open-ended slice needs the size of dimension %u, but "
                      "%.*s has rank %u",
                      dim, (int)ref->len, ref->text, type ? type->rank : 0);
    ix->stop = type->dims[dim];
  }
  int64_t span;
  if (__builtin_sub_overflow(ix->stop, ix->start, &span))
    return error_at(p, t.line, t.col, "slice bounds overflow");
  ix->size = span <= 0 ? 0 : span / ix->stride + (span % ix->stride != 0);
  return true;
}

/* "[idx, ..]" (current token '['); at most TSR_MAX_RANK indices, appended to
 * l->indices. Dynamic starts go to l->dyn, their `operand` is the position
 * there (callers rebase it). */
static bool parse_indices(parser_t *p, const token_t *ref, const tsr_type_t *type,
                          bool static_only, const char *opname, op_line_t *l) {
  next(p);
  if (accept(p, TOK_RBRACKET)) return true;
  for (uint32_t dim = 0;; dim++) {
    if (dim == TSR_MAX_RANK)
      return error_at(p, p->tok.line, p->tok.col, "more than %d indices",
                      TSR_MAX_RANK);
    tsr_index_t ix;
    if (!parse_index(p, ref, type, dim, static_only, opname, l, &ix)) return false;
    l->indices[l->num_indices++] = ix;
    if (accept(p, TOK_COMMA)) continue;
    if (accept(p, TOK_RBRACKET)) return true;
    return expected(p, "',' or ']' after index");
  }
}

/* "%ref[idx, ..]" with optional brackets (DMA and semaphore ops). */
static bool parse_ref_view(parser_t *p, const char *what, const char *opname,
                           op_line_t *l, tsr_value_t **out) {
  const token_t ref = p->tok;
  if (!parse_use(p, what, out)) return false;
  if (!at(p, TOK_LBRACKET)) return true;
  return parse_indices(p, &ref, &(*out)->type, false, opname, l);
}

/* "[n, ..]": up to TSR_MAX_RANK integers into l->ints. */
static bool parse_int_list(parser_t *p, const char *what, op_line_t *l) {
  if (!expect(p, TOK_LBRACKET, what)) return false;
  if (accept(p, TOK_RBRACKET)) return true;
  for (;;) {
    if (l->num_ints == TSR_MAX_RANK)
      return error_at(p, p->tok.line, p->tok.col, "more than %d entries",
                      TSR_MAX_RANK);
    if (!parse_int(p, "an integer", &l->ints[l->num_ints])) return false;
    l->num_ints++;
    if (accept(p, TOK_COMMA)) continue;
    if (accept(p, TOK_RBRACKET)) return true;
    return expected(p, "',' or ']' after an integer");
  }
}

/* %a, %b, .. (possibly empty) appended to l->operands. */
static bool parse_value_list(parser_t *p, op_line_t *l) {
  if (!at(p, TOK_VALUE)) return true;
  for (;;) {
    tsr_value_t *v;
    if (!parse_use(p, "a value (%name)", &v)) return false;
    if (!push_value(p, &l->operands, v)) return false;
    if (!accept(p, TOK_COMMA)) return true;
  }
}

/* ---- Ops ------------------------------------------------------------------------ */

static void parse_op_line(parser_t *p, tsr_region_t *region);

/* Checks the operand count against the op table. */
static bool check_arity(parser_t *p, const op_line_t *l) {
  const tsr_op_info_t *info = &tsr_op_table[l->opcode];
  uint32_t n = l->operands.count;
  int32_t lo = info->min_operands, hi = info->max_operands;
  if (n >= (uint32_t)lo && (hi < 0 || n <= (uint32_t)hi)) return true;
  char want[48];
  if (hi < 0)
    snprintf(want, sizeof want, "at least %d operand%s", lo, lo == 1 ? "" : "s");
  else if (lo == hi)
    snprintf(want, sizeof want, "%d operand%s", lo, lo == 1 ? "" : "s");
  else
    snprintf(want, sizeof want, "%d to %d operands", lo, hi);
  return error_at(p, l->mnemonic.line, l->mnemonic.col, "'%s' expects %s, found %u",
                  info->mnemonic, want, n);
}

/* Creates the op from the line (results named, attributes copied). */
static bool create_op(parser_t *p, tsr_region_t *region, op_line_t *l,
                      uint32_t num_regions) {
  uint32_t nres = l->names.count;
  const char **names = NULL;
  if (nres) {
    names = tsr_arena_alloc_array(&p->scratch, nres, sizeof *names);
    if (!names) return oom(p);
    for (uint32_t i = 0; i < nres; i++) {
      const token_t *t = &VEC_AT(l->names, token_t, i);
      names[i] = tsr_arena_strndup(&p->scratch, t->text + 1, t->len - 1);
      if (!names[i]) return oom(p);
    }
  }
  tsr_loc_t loc = {p->file, l->mnemonic.line, l->mnemonic.col};
  tsr_op_t *op;
  if (!check(p, tsr_op_create(p->kernel, region, l->opcode, loc,
                              (tsr_value_t *const *)l->operands.data,
                              l->operands.count, (const tsr_type_t *)l->types.data,
                              names, nres, num_regions, &op)))
    return false;
  op->flags = l->flags;
  op->literal = l->literal;
  op->text = l->text;
  if (!check(p, tsr_op_alloc_indices(p->module, op, l->num_indices))) return false;
  for (uint32_t i = 0; i < l->num_indices; i++) op->indices[i] = l->indices[i];
  if (!check(p, tsr_op_alloc_ints(p->module, op, l->num_ints))) return false;
  for (uint32_t i = 0; i < l->num_ints; i++) op->ints[i] = l->ints[i];
  l->op = op;
  return true;
}

/* Defines the op's results (visible or pending until its regions close). */
static bool define_results(parser_t *p, op_line_t *l, bool visible) {
  for (uint32_t i = 0; i < l->names.count; i++)
    if (!define_tok(p, &VEC_AT(l->names, token_t, i), l->op->results[i], visible))
      return false;
  return true;
}

/* Creates region arguments named `names[i]`: the first of type `first_type`
 * when given (the induction variable of 'for'), the others of `types` in
 * order. */
static bool make_region_args(parser_t *p, tsr_region_t *r, uint32_t n,
                             const token_t *names, const tsr_type_t *types,
                             const tsr_type_t *first_type) {
  if (!check(p, tsr_region_init_args(p->module, r, n))) return false;
  for (uint32_t i = 0; i < n; i++) {
    const tsr_type_t *t = i == 0 && first_type ? first_type
                                               : &types[first_type ? i - 1 : i];
    if (!check(p, tsr_value_create(p->kernel, t, names[i].text + 1,
                                   names[i].len - 1, &r->args[i])))
      return false;
    r->args[i]->owner = r;
  }
  return true;
}

/* Parses "{" NEWLINE op lines "}" into `region` (current token '{'). The
 * caller has opened the region's scope. False only at the end of the file,
 * where the missing '}' is reported once. */
static bool parse_block(parser_t *p, tsr_region_t *region) {
  const token_t open = p->tok;
  next(p);
  if (!at_line_end(p)) {
    expected(p, "end of line after '{'");
    skip_line(p);
  }
  p->depth++;
  for (;;) {
    while (at(p, TOK_NEWLINE)) next(p);
    if (p->fatal) break;
    if (accept(p, TOK_RBRACE)) {
      p->depth--;
      return true;
    }
    if (at(p, TOK_EOF)) {
      if (!p->eof_reported)
        error_at(p, p->tok.line, p->tok.col,
                 "expected '}' to close the region opened at %u:%u, found end "
                 "of file",
                 open.line, open.col);
      p->eof_reported = true;
      break;
    }
    parse_op_line(p, region);
  }
  p->depth--;
  return false;
}

/* A region of a control-flow op: opens a scope, defines its args under
 * `names`, parses the block. For the second region of `while`, the names
 * were already used by the first region's args; they are rebound. */
static bool parse_op_region(parser_t *p, tsr_region_t *r, const token_t *names,
                            bool rebind) {
  scope_t scope;
  scope_open(p, &scope);
  bool ok = true;
  for (uint32_t i = 0; ok && i < r->num_args; i++) {
    symbol_t *s = rebind ? lookup_tok(p, &names[i]) : NULL;
    if (s) {
      s->value = r->args[i];
      s->visible = true;
      s->scope_next = scope.symbols;
      scope.symbols = s;
    } else {
      ok = define_tok(p, &names[i], r->args[i], true);
    }
  }
  if (ok) ok = parse_block(p, r);
  scope_close(p);
  return ok;
}

/* iter(%x = %init, ..): names to l->arg_names, inits to l->operands. */
static bool parse_iter(parser_t *p, op_line_t *l) {
  if (!expect(p, TOK_LPAREN, "'(' after 'iter'")) return false;
  for (;;) {
    if (!parse_new_name(p, l, &l->arg_names, "a loop-carried value name (%name)"))
      return false;
    if (!expect(p, TOK_EQUAL, "'=' and an initial value")) return false;
    tsr_value_t *v;
    if (!parse_use(p, "an initial value", &v)) return false;
    if (!push_value(p, &l->operands, v)) return false;
    if (accept(p, TOK_COMMA)) continue;
    return expect(p, TOK_RPAREN, "',' or ')' in iter(..)");
  }
}

/* The common end of a control-flow header: result types, '{', nesting. */
static bool control_header_end(parser_t *p, op_line_t *l, uint32_t carried) {
  if (!parse_result_types(p, l)) return false;
  const char *m = tsr_op_table[l->opcode].mnemonic;
  if (carried != UINT32_MAX && carried != l->names.count)
    return error_at(p, l->mnemonic.line, l->mnemonic.col,
                    "'%s' carries %u value%s in iter(..) but has %u result%s", m,
                    carried, carried == 1 ? "" : "s", l->names.count,
                    l->names.count == 1 ? "" : "s");
  if (!at(p, TOK_LBRACE)) return expected(p, "'{' to open the region");
  if (p->depth >= MAX_NESTING)
    return error_at(p, p->tok.line, p->tok.col,
                    "regions nested more than %d deep", MAX_NESTING);
  return check_arity(p, l);
}

static bool parse_for(parser_t *p, tsr_region_t *region, op_line_t *l) {
  if (!parse_new_name(p, l, &l->arg_names, "the induction variable (%name)"))
    return false;
  if (!expect(p, TOK_EQUAL, "'=' after the induction variable")) return false;
  tsr_value_t *v;
  if (!parse_use(p, "a lower bound", &v) || !push_value(p, &l->operands, v))
    return false;
  if (!expect_word(p, "to", "'to'")) return false;
  if (!parse_use(p, "an upper bound", &v) || !push_value(p, &l->operands, v))
    return false;
  if (!expect_word(p, "step", "'step'")) return false;
  if (!parse_use(p, "a step", &v) || !push_value(p, &l->operands, v)) return false;
  if (accept_word(p, "iter") && !parse_iter(p, l)) return false;
  if (!control_header_end(p, l, l->arg_names.count - 1)) return false;
  if (!create_op(p, region, l, 1)) return false;
  tsr_type_t i32 = tsr_type_scalar(TSR_DTYPE_I32);
  tsr_region_t *body = &l->op->regions[0];
  if (!make_region_args(p, body, l->arg_names.count,
                        (const token_t *)l->arg_names.data,
                        (const tsr_type_t *)l->types.data, &i32))
    return false;
  if (!define_results(p, l, false)) return false;
  return parse_op_region(p, body, (const token_t *)l->arg_names.data, false);
}

static bool parse_while(parser_t *p, tsr_region_t *region, op_line_t *l) {
  if (accept_word(p, "iter") && !parse_iter(p, l)) return false;
  if (!control_header_end(p, l, l->arg_names.count)) return false;
  if (!create_op(p, region, l, 2)) return false;
  const token_t *names = (const token_t *)l->arg_names.data;
  for (int r = 0; r < 2; r++)
    if (!make_region_args(p, &l->op->regions[r], l->arg_names.count, names,
                          (const tsr_type_t *)l->types.data, NULL))
      return false;
  if (!define_results(p, l, false)) return false;
  if (!parse_op_region(p, &l->op->regions[0], names, false)) return false;
  if (!expect_word(p, "do", "'do' after the condition region")) return false;
  if (!at(p, TOK_LBRACE)) return expected(p, "'{' after 'do'");
  return parse_op_region(p, &l->op->regions[1], names, true);
}

static bool parse_if(parser_t *p, tsr_region_t *region, op_line_t *l) {
  tsr_value_t *c;
  if (!parse_use(p, "a condition", &c) || !push_value(p, &l->operands, c))
    return false;
  if (!control_header_end(p, l, UINT32_MAX)) return false;
  if (!create_op(p, region, l, 2)) return false;
  if (!define_results(p, l, false)) return false;
  if (!parse_op_region(p, &l->op->regions[0], NULL, false)) return false;
  if (!accept_word(p, "else")) return true;
  l->op->flags |= TSR_OPF_HAS_ELSE;
  if (!at(p, TOK_LBRACE)) return expected(p, "'{' after 'else'");
  return parse_op_region(p, &l->op->regions[1], NULL, false);
}

static bool parse_scoped(parser_t *p, tsr_region_t *region, op_line_t *l) {
  if (!expect(p, TOK_LPAREN, "'(' after 'scoped'")) return false;
  if (!accept(p, TOK_RPAREN)) {
    for (;;) {
      if (!parse_new_name(p, l, &l->arg_names, "a scoped ref name (%name)"))
        return false;
      if (!expect(p, TOK_COLON, "':' and a type")) return false;
      tsr_type_t t;
      if (!parse_type(p, &t) || !vec_push(p, &l->arg_types, &t, sizeof t))
        return false;
      if (accept(p, TOK_COMMA)) continue;
      if (accept(p, TOK_RPAREN)) break;
      return expected(p, "',' or ')' in scoped(..)");
    }
  }
  if (!control_header_end(p, l, UINT32_MAX)) return false;
  if (!create_op(p, region, l, 1)) return false;
  tsr_region_t *body = &l->op->regions[0];
  if (!make_region_args(p, body, l->arg_names.count,
                        (const token_t *)l->arg_names.data,
                        (const tsr_type_t *)l->arg_types.data, NULL))
    return false;
  if (!define_results(p, l, false)) return false;
  return parse_op_region(p, body, (const token_t *)l->arg_names.data, false);
}

/* Optional "device %d" / "core %c" suffixes of DMA and semaphore ops. */
static bool parse_device_core(parser_t *p, tsr_opview_parts_t *parts, bool allow_core) {
  if (accept_word(p, "device") && !parse_use(p, "a device id", &parts->device)) return false;
  if (allow_core && accept_word(p, "core") && !parse_use(p, "a core index", &parts->core))
    return false;
  return true;
}

/* The operands, ints and flags of a memory, DMA or semaphore op from its
 * parts and the line's indices and dynamic starts, through the one encoder
 * of those layouts (tsr_opview_layout). */
static bool lay_out(parser_t *p, op_line_t *l, tsr_opview_parts_t *parts) {
  tsr_value_t *operands[TSR_OPVIEW_MAX_OPERANDS];
  parts->indices = l->indices;
  parts->num_indices = l->num_indices;
  parts->starts = (tsr_value_t *const *)l->dyn.data;
  parts->num_starts = l->dyn.count;
  uint32_t n = tsr_opview_layout(l->opcode, parts, operands, l->ints, &l->num_ints, &l->flags);
  for (uint32_t i = 0; i < n; i++)
    if (!push_value(p, &l->operands, operands[i])) return false;
  return true;
}

/* The body of a non-control op after its mnemonic, up to the result types. */
static bool parse_op_body(parser_t *p, op_line_t *l) {
  const tsr_op_info_t *info = &tsr_op_table[l->opcode];
  const char *m = info->mnemonic;
  tsr_value_t *v;
  switch (info->syntax) {
    case TSR_SYN_CONST: {
      token_t lit = p->tok;
      bool neg = false;
      if (accept(p, TOK_MINUS)) {
        neg = true;
        lit = p->tok;
        if (!tok_is(&lit, "inf")) return expected(p, "a number or 'inf' after '-'");
      } else if (!(at(p, TOK_INT) || at(p, TOK_FLOAT) || at(p, TOK_IDENT))) {
        return expected(p, "a literal");
      }
      next(p);
      if (!parse_result_types(p, l)) return false;
      return convert_literal(p, &lit, neg, &VEC_AT(l->types, tsr_type_t, 0),
                             &l->literal);
    }
    case TSR_SYN_INT_ATTR:
      if (!parse_int(p, l->opcode == TSR_OP_IOTA ? "a dimension" : "an axis",
                     &l->ints[0]))
        return false;
      l->num_ints = 1;
      return parse_result_types(p, l);
    case TSR_SYN_LOAD:
    case TSR_SYN_STORE: {
      const token_t ref_tok = p->tok;
      tsr_opview_parts_t parts = {0};
      if (!parse_use(p, "a ref", &parts.ref[0])) return false;
      if (!at(p, TOK_LBRACKET)) return expected(p, "'[' and indices after the ref");
      if (!parse_indices(p, &ref_tok, &parts.ref[0]->type, false, m, l)) return false;
      if (info->syntax == TSR_SYN_STORE) {
        if (!expect(p, TOK_COMMA, "',' and the value to store")) return false;
        if (!parse_use(p, "the value to store", &parts.ref[1])) return false;
      }
      if (accept_word(p, "mask") && !parse_use(p, "a mask", &parts.mask)) return false;
      return lay_out(p, l, &parts) && parse_result_types(p, l);
    }
    case TSR_SYN_UNARY:
    case TSR_SYN_BINARY:
    case TSR_SYN_OPERANDS:
    case TSR_SYN_YIELD:
      return parse_value_list(p, l) && parse_result_types(p, l);
    case TSR_SYN_PERM:
    case TSR_SYN_SLICE: {
      const token_t val = p->tok;
      if (!parse_use(p, "a value", &v) || !push_value(p, &l->operands, v))
        return false;
      if (info->syntax == TSR_SYN_PERM) {
        if (!parse_int_list(p, "'[' and the permutation", l)) return false;
      } else {
        if (!at(p, TOK_LBRACKET)) return expected(p, "'[' and indices");
        if (!parse_indices(p, &val, &v->type, true, m, l)) return false;
      }
      return parse_result_types(p, l);
    }
    case TSR_SYN_AXIS:
      if (!parse_use(p, "a value", &v) || !push_value(p, &l->operands, v))
        return false;
      if (accept(p, TOK_COMMA) && !parse_value_list(p, l)) return false;
      if (!expect_word(p, "axis", "',' or 'axis'")) return false;
      if (!parse_int(p, "an axis", &l->ints[0])) return false;
      l->num_ints = 1;
      return parse_result_types(p, l);
    case TSR_SYN_AXES:
      if (!parse_use(p, "a value", &v) || !push_value(p, &l->operands, v))
        return false;
      if (!expect_word(p, "axes", "'axes'")) return false;
      return parse_int_list(p, "'[' and the axes", l) && parse_result_types(p, l);
    case TSR_SYN_DOT:
      if (!parse_value_list(p, l)) return false;
      if (accept_word(p, "transpose_rhs")) l->flags |= TSR_OPF_TRANSPOSE_RHS;
      return parse_result_types(p, l);
    case TSR_SYN_PRINT:
      if (!at(p, TOK_STRING)) return expected(p, "a format string");
      if (!decode_string(p, &p->tok, &l->text)) return false;
      next(p);
      if (accept(p, TOK_COMMA) && !parse_value_list(p, l)) return false;
      if (l->operands.count == 0 && at(p, TOK_COMMA)) return expected(p, "a value");
      return true;
    case TSR_SYN_ASSERT:
      if (!parse_use(p, "a condition", &v) || !push_value(p, &l->operands, v))
        return false;
      if (!expect(p, TOK_COMMA, "',' and a message")) return false;
      if (!at(p, TOK_STRING)) return expected(p, "a message string");
      if (!decode_string(p, &p->tok, &l->text)) return false;
      next(p);
      return true;
    case TSR_SYN_DMA: {
      tsr_opview_parts_t parts = {0};
      if (!parse_ref_view(p, "a source ref", m, l, &parts.ref[0])) return false;
      parts.count[0] = l->num_indices;
      if (!expect(p, TOK_ARROW, "'->' after the source")) return false;
      if (!parse_ref_view(p, "a destination ref", m, l, &parts.ref[1])) return false;
      parts.count[1] = l->num_indices - parts.count[0];
      if (!expect(p, TOK_COMMA, "',' and a semaphore")) return false;
      if (!parse_ref_view(p, "a semaphore", m, l, &parts.ref[2])) return false;
      parts.count[2] = l->num_indices - parts.count[0] - parts.count[1];
      if (accept_word(p, "send") && !parse_ref_view(p, "a send semaphore", m, l, &parts.ref[3]))
        return false;
      if (!parse_device_core(p, &parts, false)) return false;
      parts.add = accept_word(p, "add");
      return lay_out(p, l, &parts) && parse_result_types(p, l);
    }
    case TSR_SYN_SEM: {
      tsr_opview_parts_t parts = {0};
      if (!parse_ref_view(p, "a semaphore", m, l, &parts.ref[0])) return false;
      if (l->opcode == TSR_OP_SEM_SIGNAL || l->opcode == TSR_OP_SEM_WAIT) {
        if (!expect(p, TOK_COMMA, "',' and an amount")) return false;
        if (!parse_use(p, "an amount", &parts.ref[1])) return false;
      }
      if (!parse_device_core(p, &parts, true)) return false;
      return lay_out(p, l, &parts) && parse_result_types(p, l);
    }
    case TSR_SYN_FOR:
    case TSR_SYN_WHILE:
    case TSR_SYN_IF:
    case TSR_SYN_SCOPED:
      break;
  }
  return false;
}

/* One op line: "[%r, .. =] mnemonic ...". Does not consume the newline. */
static bool parse_op(parser_t *p, tsr_region_t *region, op_line_t *l) {
  if (at(p, TOK_VALUE)) {
    for (;;) {
      if (!parse_new_name(p, l, &l->names, "a result name (%name)")) return false;
      if (accept(p, TOK_COMMA)) continue;
      if (!expect(p, TOK_EQUAL, "',' or '=' after a result name")) return false;
      break;
    }
  }
  if (!at(p, TOK_IDENT)) return expected(p, "an op");
  l->mnemonic = p->tok;
  l->opcode = tsr_op_lookup(p->tok.text, p->tok.len);
  if (l->opcode == TSR_OP_COUNT)
    return error_at(p, p->tok.line, p->tok.col, "unknown op '%.*s'",
                    (int)TSR_MIN(p->tok.len, 40), p->tok.text);
  const tsr_op_info_t *info = &tsr_op_table[l->opcode];
  int nres = info->num_results;
  uint32_t nnames = l->names.count;
  if (nres >= 0 && nnames != (uint32_t)nres) {
    if (nres == 0)
      return error_at(p, l->mnemonic.line, l->mnemonic.col, "'%s' has no results",
                      info->mnemonic);
    if (nnames == 0)
      return error_at(p, l->mnemonic.line, l->mnemonic.col,
                      "'%s' has a result: write %%name = %s ...", info->mnemonic,
                      info->mnemonic);
    return error_at(p, l->mnemonic.line, l->mnemonic.col,
                    "'%s' has %d result%s, found %u names", info->mnemonic, nres,
                    nres == 1 ? "" : "s", nnames);
  }
  next(p);
  switch (info->syntax) {
    case TSR_SYN_FOR: if (!parse_for(p, region, l)) return false; break;
    case TSR_SYN_WHILE: if (!parse_while(p, region, l)) return false; break;
    case TSR_SYN_IF: if (!parse_if(p, region, l)) return false; break;
    case TSR_SYN_SCOPED: if (!parse_scoped(p, region, l)) return false; break;
    default:
      if (!parse_op_body(p, l) || !expect_line_end(p) || !check_arity(p, l))
        return false;
      if (!create_op(p, region, l, 0)) return false;
      return define_results(p, l, true);
  }
  /* Control flow: the results become visible after the regions. */
  for (uint32_t i = 0; i < l->names.count; i++) {
    symbol_t *s = lookup_tok(p, &VEC_AT(l->names, token_t, i));
    if (s) s->visible = true;
  }
  return expect_line_end(p);
}

static void parse_op_line(parser_t *p, tsr_region_t *region) {
  op_line_t l;
  memset(&l, 0, sizeof l);
  if (parse_op(p, region, &l)) {
    accept(p, TOK_NEWLINE);
  } else if (!p->fatal) {
    /* Later uses of the results stay quiet; created results become visible. */
    for (uint32_t i = 0; i < l.names.count; i++) {
      const token_t *t = &VEC_AT(l.names, token_t, i);
      symbol_t *s = lookup_tok(p, t);
      if (s && l.op && s->value == l.op->results[i])
        s->visible = true;
      else if (!s && !define_tok(p, t, NULL, true))
        break;
    }
    skip_line(p);
  }
  op_line_free(&l);
}

/* ---- Kernel headers ------------------------------------------------------------ */

/* "map(%i, ..) -> (%i, 0, ..)" or "map(%i, ..) { .. yield .. }" for the decl
 * at index `decl` (current token 'map'). */
static bool parse_map(parser_t *p, uint32_t decl) {
  const token_t kw = p->tok;
  next(p);
  if (!expect(p, TOK_LPAREN, "'(' after 'map'")) return false;
  token_t args[TSR_MAX_RANK];
  uint32_t nargs = 0;
  if (!accept(p, TOK_RPAREN)) {
    for (;;) {
      const token_t a = p->tok;
      if (!at(p, TOK_VALUE)) return expected(p, "a grid index name (%name)");
      if (nargs == TSR_MAX_RANK)
        return error_at(p, a.line, a.col, "an index map takes at most %d arguments",
                        TSR_MAX_RANK);
      for (uint32_t i = 0; i < nargs; i++)
        if (args[i].len == a.len && memcmp(args[i].text, a.text, a.len) == 0)
          return error_at(p, a.line, a.col,
                          "redefinition of %.*s (first defined at %u:%u)",
                          (int)a.len, a.text, args[i].line, args[i].col);
      /* The map sees the prefetch refs, so its names cannot hide them. */
      const tsr_decl_t *d = find_decl(p, p->table, &a);
      if (d && d->role == TSR_ROLE_PREFETCH)
        return error_at(p, a.line, a.col,
                        "redefinition of %.*s (first defined at %u:%u)",
                        (int)a.len, a.text, d->loc.line, d->loc.col);
      args[nargs++] = a;
      next(p);
      if (accept(p, TOK_COMMA)) continue;
      if (!expect(p, TOK_RPAREN, "',' or ')' after a grid index name")) return false;
      break;
    }
  }
  tsr_type_t i32 = tsr_type_scalar(TSR_DTYPE_I32), arg_types[TSR_MAX_RANK];
  for (uint32_t i = 0; i < nargs; i++) arg_types[i] = i32;
  tsr_region_t *r;
  if (!check(p, tsr_region_create(p->module, 0, &r)) ||
      !make_region_args(p, r, nargs, args, arg_types, NULL))
    return false;
  p->kernel->decls[decl].index_map = r;

  if (accept(p, TOK_ARROW)) {
    /* Short form: each result is a grid index or an integer. */
    if (!expect(p, TOK_LPAREN, "'(' after '->'")) return false;
    token_t items[TSR_MAX_RANK];
    tsr_value_t *results[TSR_MAX_RANK];
    int64_t consts[TSR_MAX_RANK];
    uint32_t n = 0;
    if (!accept(p, TOK_RPAREN)) {
      for (;;) {
        const token_t t = p->tok;
        if (n == TSR_MAX_RANK)
          return error_at(p, t.line, t.col, "an index map yields at most %d values",
                          TSR_MAX_RANK);
        results[n] = NULL;
        if (t.kind == TOK_VALUE) {
          for (uint32_t i = 0; i < nargs; i++)
            if (args[i].len == t.len && memcmp(args[i].text, t.text, t.len) == 0)
              results[n] = r->args[i];
          if (!results[n])
            return error_at(p, t.line, t.col,
                            "%.*s is not an argument of this map (the short "
                            "form yields grid indices or integers)",
                            (int)t.len, t.text);
          next(p);
        } else {
          if (!parse_int(p, "a grid index or an integer", &consts[n])) return false;
          if (consts[n] < INT32_MIN || consts[n] > INT32_MAX)
            return error_at(p, t.line, t.col,
                            "block index %lld is out of range for i32",
                            (long long)consts[n]);
        }
        items[n++] = t;
        if (accept(p, TOK_COMMA)) continue;
        if (!expect(p, TOK_RPAREN, "',' or ')' after a map result")) return false;
        break;
      }
    }
    for (uint32_t i = 0; i < n; i++) {
      if (results[i]) continue;
      tsr_loc_t loc = {p->file, items[i].line, items[i].col};
      tsr_op_t *op;
      if (!check(p, tsr_op_create(p->kernel, r, TSR_OP_CONST, loc, NULL, 0, &i32,
                                  NULL, 1, 0, &op)))
        return false;
      op->literal.i = consts[i];
      results[i] = op->results[0];
    }
    tsr_loc_t loc = {p->file, kw.line, kw.col};
    tsr_op_t *yield;
    return check(p, tsr_op_create(p->kernel, r, TSR_OP_YIELD, loc, results, n,
                                  NULL, NULL, 0, 0, &yield));
  }

  if (!at(p, TOK_LBRACE)) return expected(p, "'->' or '{' after the map arguments");
  /* General form: its own names; it sees the prefetch refs and its args. */
  p->kernel_table = p->table;
  scope_t *kernel_scope = p->scope;
  scope_t scope;
  p->table = NULL;
  p->scope = NULL;
  scope_open(p, &scope);
  bool ok = true;
  for (uint32_t i = 0; ok && i < p->kernel->num_decls; i++) {
    const tsr_decl_t *d = &p->kernel->decls[i];
    if (d->role == TSR_ROLE_PREFETCH)
      ok = define(p, d->ref->name, strlen(d->ref->name), d->loc.line, d->loc.col,
                  d->ref, true);
  }
  for (uint32_t i = 0; ok && i < nargs; i++)
    ok = define_tok(p, &args[i], r->args[i], true);
  if (ok) ok = parse_block(p, r);
  HASH_CLEAR(hh, p->table);
  p->table = p->kernel_table;
  p->kernel_table = NULL;
  p->scope = kernel_scope;
  return ok;
}

/* "grid(G0, ..) [semantics(S0, ..)]" (current token 'grid'). */
static bool parse_grid(parser_t *p) {
  tsr_kernel_t *k = p->kernel;
  next(p);
  if (!expect(p, TOK_LPAREN, "'(' after 'grid'")) return false;
  uint32_t rank = 0;
  if (!accept(p, TOK_RPAREN)) {
    for (;;) {
      if (rank == TSR_MAX_RANK)
        return error_at(p, p->tok.line, p->tok.col,
                        "a grid has at most %d dimensions", TSR_MAX_RANK);
      if (!parse_int(p, "a grid dimension", &k->grid[rank])) return false;
      k->semantics[rank++] = TSR_DIM_ARBITRARY;
      if (accept(p, TOK_COMMA)) continue;
      if (!expect(p, TOK_RPAREN, "',' or ')' after a grid dimension")) return false;
      break;
    }
  }
  k->grid_rank = rank;
  const token_t sem_kw = p->tok;
  if (!accept_word(p, "semantics")) return expect_line_end(p);
  if (!expect(p, TOK_LPAREN, "'(' after 'semantics'")) return false;
  uint32_t n = 0;
  if (!accept(p, TOK_RPAREN)) {
    for (;;) {
      const token_t t = p->tok;
      uint8_t sem;
      if (tok_is(&t, "parallel"))
        sem = TSR_DIM_PARALLEL;
      else if (tok_is(&t, "arbitrary"))
        sem = TSR_DIM_ARBITRARY;
      else if (tok_is(&t, "core_parallel"))
        sem = TSR_DIM_CORE_PARALLEL;
      else
        return expected(p, "'parallel', 'arbitrary' or 'core_parallel'");
      if (n < TSR_MAX_RANK) k->semantics[n] = sem;
      n++;
      next(p);
      if (accept(p, TOK_COMMA)) continue;
      if (!expect(p, TOK_RPAREN, "',' or ')' after a dimension semantics")) return false;
      break;
    }
  }
  if (n != rank)
    return error_at(p, sem_kw.line, sem_kw.col,
                    "the grid has %u dimension%s but semantics lists %u", rank,
                    rank == 1 ? "" : "s", n);
  return expect_line_end(p);
}

static const char *const role_names[] = {"prefetch", "in", "out", "scratch"};

/* A prefetch/in/out/scratch line (current token the keyword). */
static bool parse_decl(parser_t *p, tsr_role_t role, int *last_role) {
  tsr_kernel_t *k = p->kernel;
  const token_t kw = p->tok;
  next(p);
  if ((int)role < *last_role)
    return error_at(p, kw.line, kw.col,
                    "'%s' after '%s': header lines come in the order prefetch, "
                    "in, out, scratch",
                    role_names[role], role_names[*last_role]);
  *last_role = (int)role;
  const token_t name = p->tok;
  if (!at(p, TOK_VALUE)) return expected(p, "an operand name (%name)");
  if (!check_fresh(p, &name)) return false;
  next(p);
  if (!expect(p, TOK_COLON, "':' after the operand name")) return false;
  tsr_loc_t loc = {p->file, name.line, name.col};
  tsr_decl_t *d;

  if (role == TSR_ROLE_SCRATCH) {
    const token_t tt = p->tok;
    tsr_type_t t;
    if (!parse_type(p, &t)) return false;
    if (t.kind != TSR_TYPE_REF && t.kind != TSR_TYPE_SEM)
      return error_at(p, tt.line, tt.col,
                      "scratch needs a memory type (vmem f32[8, 128], smem i32) "
                      "or a semaphore type (sem, dma_sem[2]), found '%.*s'",
                      (int)TSR_MIN(tt.len, 40), tt.text);
    if (!expect_line_end(p)) return false;
    if (!check(p, tsr_kernel_add_decl(k, role, name.text + 1, name.len - 1, &t,
                                      loc, &d)))
      return false;
    return define_tok(p, &name, d->ref, true);
  }

  tsr_type_t array;
  if (!parse_value_type(p, "an element type (f32, i32, ..)", &array)) return false;
  tsr_space_t space = TSR_SPACE_SMEM;
  if (role != TSR_ROLE_PREFETCH) {
    if (!at(p, TOK_IDENT) || !tsr_space_from_name(p->tok.text, p->tok.len, &space))
      return expected(p, "a memory space (vmem, smem, hbm or any)");
    next(p);
  }
  bool has_block = false;
  int64_t block[TSR_MAX_RANK];
  const token_t block_kw = p->tok;
  if (role != TSR_ROLE_PREFETCH && accept_word(p, "block")) {
    has_block = true;
    if (!expect(p, TOK_LBRACKET, "'[' after 'block'")) return false;
    uint32_t n = 0;
    for (;;) {
      const token_t t = p->tok;
      if (n == TSR_MAX_RANK)
        return error_at(p, t.line, t.col, "more than %d block dimensions",
                        TSR_MAX_RANK);
      if (accept_word(p, "squeezed")) {
        block[n++] = TSR_SQUEEZED;
      } else {
        if (!parse_int(p, "a block dimension or 'squeezed'", &block[n])) return false;
        if (block[n] < 1)
          return error_at(p, t.line, t.col,
                          "block dimension must be >= 1 or 'squeezed', found %lld",
                          (long long)block[n]);
        n++;
      }
      if (accept(p, TOK_COMMA)) continue;
      if (!expect(p, TOK_RBRACKET, "',' or ']' after a block dimension")) return false;
      break;
    }
    if (n != array.rank)
      return error_at(p, block_kw.line, block_kw.col,
                      "block has %u entr%s but the array has rank %u", n,
                      n == 1 ? "y" : "ies", array.rank);
  }
  if (!has_block && at_word(p, "map"))
    return error_at(p, p->tok.line, p->tok.col, "'map' needs a block[..] before it");

  /* The body sees the block (squeezed dims dropped) in `space`, or the
   * whole array without a block: as tsr_ir_kernel_add_operand. */
  uint32_t rank = 0;
  int64_t dims[TSR_MAX_RANK];
  for (uint32_t i = 0; i < array.rank; i++) {
    int64_t b = has_block ? block[i] : array.dims[i];
    if (b != TSR_SQUEEZED) dims[rank++] = b;
  }
  tsr_type_t ref = tsr_type_ref(space, (tsr_dtype_t)array.dtype, rank, dims);
  uint32_t index = k->num_decls;
  if (!check(p, tsr_kernel_add_decl(k, role, name.text + 1, name.len - 1, &ref,
                                    loc, &d)))
    return false;
  d->array = array;
  for (uint32_t i = 0; i < array.rank; i++)
    d->block[i] = has_block ? block[i] : array.dims[i];
  d->has_block = has_block;
  if (!define_tok(p, &name, d->ref, true)) return false;
  if (has_block && at_word(p, "map") && !parse_map(p, index)) return false;

  const token_t alias_kw = p->tok;
  if (accept_word(p, "alias")) {
    if (role != TSR_ROLE_OUT)
      return error_at(p, alias_kw.line, alias_kw.col,
                      "'alias' is only allowed on 'out' operands");
    const token_t t = p->tok;
    if (!at(p, TOK_VALUE)) return expected(p, "an input name (%name) after 'alias'");
    const tsr_decl_t *in = find_decl(p, p->table, &t);
    if (!in || in->role != TSR_ROLE_IN)
      return error_at(p, t.line, t.col, "alias %.*s: no earlier 'in' operand of that name",
                      (int)t.len, t.text);
    k->decls[index].alias = in->ref->decl;
    next(p);
  }
  return expect_line_end(p);
}

/* The header lines of a kernel up to its body's '{'. False if there is no
 * body (end of file or the next kernel). */
static bool parse_header(parser_t *p) {
  int last_role = -1;
  bool seen_grid = false;
  for (;;) {
    while (at(p, TOK_NEWLINE)) next(p);
    if (p->fatal) return false;
    if (at(p, TOK_LBRACE)) return true;
    const token_t t = p->tok;
    bool ok;
    if (tok_is(&t, "grid")) {
      if (seen_grid)
        ok = error_at(p, t.line, t.col, "a kernel has one 'grid' line");
      else if (last_role >= 0)
        ok = error_at(p, t.line, t.col, "'grid' must come before the operands");
      else
        ok = parse_grid(p);
      seen_grid = true;
    } else if (tok_is(&t, "prefetch")) {
      ok = parse_decl(p, TSR_ROLE_PREFETCH, &last_role);
    } else if (tok_is(&t, "in")) {
      ok = parse_decl(p, TSR_ROLE_IN, &last_role);
    } else if (tok_is(&t, "out")) {
      ok = parse_decl(p, TSR_ROLE_OUT, &last_role);
    } else if (tok_is(&t, "scratch")) {
      ok = parse_decl(p, TSR_ROLE_SCRATCH, &last_role);
    } else if (at(p, TOK_EOF) || tok_is(&t, "kernel")) {
      return expected(p, "'{' to open the kernel body");
    } else {
      ok = expected(p, "'grid', 'prefetch', 'in', 'out', 'scratch' or '{'");
    }
    if (ok) {
      accept(p, TOK_NEWLINE);
    } else {
      skip_line(p);
      accept(p, TOK_RBRACE); /* a stray '}' in the header */
    }
  }
}

static void parse_kernel(parser_t *p) {
  const token_t kw = p->tok;
  next(p);
  token_t name = p->tok;
  bool ok = true;
  if (name.kind == TOK_KERNEL) {
    symbol_t *o = NULL;
    HASH_FIND(hh, p->kernel_names, name.text + 1, name.len - 1, o);
    if (o) {
      ok = error_at(p, name.line, name.col,
                    "redefinition of kernel %.*s (first defined at %u:%u)",
                    (int)name.len, name.text, o->line, o->col);
    } else if (!table_add(p, &p->kernel_names, name.text + 1, name.len - 1,
                          name.line, name.col)) {
      return;
    }
    next(p);
    if (ok) ok = expect_line_end(p);
  } else {
    ok = expected(p, "a kernel name (@name) after 'kernel'");
    name = kw;
    name.text = "@";
    name.len = 1;
  }
  if (!ok) skip_line(p);
  tsr_loc_t loc = {p->file, name.line, name.col};
  tsr_kernel_t *k;
  if (!check(p, tsr_kernel_create(p->module, name.text + 1, name.len - 1, loc, &k)))
    return;
  p->kernel = k;
  p->table = NULL;
  scope_t scope;
  p->scope = NULL;
  scope_open(p, &scope);
  if (parse_header(p)) {
    p->depth = 0;
    if (parse_block(p, &k->body) && !expect_line_end(p)) skip_line(p);
  }
  scope_close(p);
  HASH_CLEAR(hh, p->table);
  p->kernel = NULL;
}

static void parse_module(parser_t *p) {
  next(p);
  for (;;) {
    while (at(p, TOK_NEWLINE)) next(p);
    if (p->fatal || at(p, TOK_EOF)) return;
    if (at_word(p, "kernel")) {
      parse_kernel(p);
    } else {
      expected(p, "'kernel'");
      skip_line(p);
      accept(p, TOK_RBRACE);
    }
  }
}

tsr_status_t tsr_ir_parse(const char *filename, const char *text, size_t len,
                          tsr_module_t **out_module) {
  tsr_module_t *m;
  TSR_RETURN_IF_ERROR(tsr_module_create(filename ? filename : "<input>", &m));
  parser_t p;
  memset(&p, 0, sizeof p);
  p.file = m->filename;
  p.pos = text ? text : "";
  p.end = p.pos + (text ? len : 0);
  p.line_start = p.pos;
  p.line = 1;
  p.module = m;
  tsr_arena_initialize(&p.scratch);
  tsr_diag_list_initialize(&p.diags, MAX_DIAGNOSTICS);
  parse_module(&p);
  HASH_CLEAR(hh, p.table);
  HASH_CLEAR(hh, p.kernel_names);
  tsr_arena_deinitialize(&p.scratch);
  tsr_status_t s = p.fatal;
  if (!s) s = tsr_diag_list_to_status(&p.diags, TSR_PARSE_ERROR);
  tsr_diag_list_deinitialize(&p.diags);
  if (s) {
    tsr_module_destroy(m);
    return s;
  }
  *out_module = m;
  return NULL;
}
