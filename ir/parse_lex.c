/* The parser's lexer (tokens of docs/ir.md, "Lexical structure"), the
 * token helpers the rest of the parser reads the input with, and its
 * diagnostics (one per failed line, at most MAX_DIAGNOSTICS). */
#include "ir/parse_internal.h"

static bool vreport(parser_t *p, uint32_t line, uint32_t col, const char *fmt, va_list ap)
    TSR_PRINTF(4, 0);

static bool vreport(parser_t *p, uint32_t line, uint32_t col, const char *fmt, va_list ap) {
  tsr_loc_t loc = {p->file, line, col};
  tsr_diag_vadd(&p->diags, loc, NULL, fmt, ap);
  return false;
}

bool ps_error_at(parser_t *p, uint32_t line, uint32_t col, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vreport(p, line, col, fmt, ap);
  va_end(ap);
  return false;
}

/* Lexer diagnostics, silent while the rest of a bad line is skipped. */
static bool lex_error(parser_t *p, uint32_t line, uint32_t col, const char *fmt,
                      ...) TSR_PRINTF(4, 5);

static bool lex_error(parser_t *p, uint32_t line, uint32_t col, const char *fmt,
                      ...) {
  if (p->skipping) return false;
  va_list ap;
  va_start(ap, fmt);
  vreport(p, line, col, fmt, ap);
  va_end(ap);
  return false;
}

bool ps_oom(parser_t *p) {
  if (!p->fatal) p->fatal = TSR_OOM();
  return false;
}

/* Takes a construction status: false (and fatal) on failure. */
bool ps_check(parser_t *p, tsr_status_t s) {
  if (!s) return true;
  if (!p->fatal)
    p->fatal = s;
  else
    tsr_status_free(s);
  return false;
}

/* Character classes by table (the lexer asks per character). */
enum { C_DIGIT = 1, C_HEX = 2, C_START = 4 };
#define DIGITS_(x) ['0' + (x)] = C_DIGIT | C_HEX
#define HEXL_(x) ['a' + (x)] = C_HEX | C_START, ['A' + (x)] = C_HEX | C_START
#define LETTER_(x) ['g' + (x)] = C_START, ['G' + (x)] = C_START
static const uint8_t char_class[256] = {
    DIGITS_(0), DIGITS_(1), DIGITS_(2), DIGITS_(3), DIGITS_(4),  DIGITS_(5),  DIGITS_(6),
    DIGITS_(7), DIGITS_(8), DIGITS_(9), HEXL_(0),   HEXL_(1),    HEXL_(2),    HEXL_(3),
    HEXL_(4),   HEXL_(5),   LETTER_(0), LETTER_(1), LETTER_(2),  LETTER_(3),  LETTER_(4),
    LETTER_(5), LETTER_(6), LETTER_(7), LETTER_(8), LETTER_(9),  LETTER_(10), LETTER_(11),
    LETTER_(12), LETTER_(13), LETTER_(14), LETTER_(15), LETTER_(16), LETTER_(17),
    LETTER_(18), LETTER_(19), ['_'] = C_START,
};
#undef DIGITS_
#undef HEXL_
#undef LETTER_

static inline bool is_digit(int c) { return (char_class[c & 0xff] & C_DIGIT) != 0; }
static inline bool is_hex(int c) { return (char_class[c & 0xff] & C_HEX) != 0; }
static inline bool is_ident_start(int c) { return (char_class[c & 0xff] & C_START) != 0; }
static inline bool is_ident_char(int c) {
  return (char_class[c & 0xff] & (C_START | C_DIGIT)) != 0;
}

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

void ps_next(parser_t *p) {
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





const char *ps_describe(const token_t *t, char *buf, size_t size) {
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
bool ps_expected(parser_t *p, const char *what) {
  if (p->tok.kind == TOK_ERROR) return false;
  char buf[64];
  return ps_error_at(p, p->tok.line, p->tok.col, "expected %s, found %s", what,
                     ps_describe(&p->tok, buf, sizeof buf));
}

bool ps_expect(parser_t *p, tok_kind_t kind, const char *what) {
  if (p->tok.kind != kind) return ps_expected(p, what);
  ps_next(p);
  return true;
}

bool ps_expect_word(parser_t *p, const char *word, const char *what) {
  if (!tok_is(&p->tok, word)) return ps_expected(p, what);
  ps_next(p);
  return true;
}

bool ps_expect_line_end(parser_t *p) {
  return at_line_end(p) || ps_expected(p, "end of line");
}

/* Skips the rest of a line after an error. A region opened on the skipped
 * part is skipped as a whole (to its closing brace); an unmatched '}' is
 * left for the enclosing region. */
void ps_skip_line(parser_t *p) {
  long depth = 0;
  p->skipping = true;
  for (;;) {
    tok_kind_t kind = p->tok.kind;
    if (kind == TOK_EOF || (kind == TOK_RBRACE && depth == 0)) break;
    if (kind == TOK_NEWLINE && depth == 0) {
      p->skipping = false;
      ps_next(p);
      return;
    }
    if (kind == TOK_LBRACE) depth++;
    if (kind == TOK_RBRACE) depth--;
    ps_next(p);
  }
  p->skipping = false;
}

/* Value of an INT token: decimal or hex with an optional '-'; false if it
 * does not fit in 64 bits. */
bool ps_int_value(const token_t *t, int64_t *out) {
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
    /* the division only near the top (an int per dim made it a third of
     * the cost of reading a type) */
    if (v >= (UINT64_MAX - 15) / 16 && v > (UINT64_MAX - d) / base) return false;
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

bool ps_parse_int(parser_t *p, const char *what, int64_t *out) {
  if (p->tok.kind != TOK_INT) return ps_expected(p, what);
  if (!ps_int_value(&p->tok, out))
    return ps_error_at(p, p->tok.line, p->tok.col,
                       "integer literal '%.*s' does not fit in 64 bits",
                       (int)TSR_MIN(p->tok.len, 40), p->tok.text);
  ps_next(p);
  return true;
}

/* ---- Mnemonics and dtype names ----------------------------------------------
 * Open-addressed tables built once per process from the op table and the
 * dtype list; they answer as tsr_op_lookup and tsr_dtype_from_name do. */

enum { NAME_SLOTS = 512 }; /* a power of two, over twice the ops and dtypes */
_Static_assert(TSR_OP_COUNT + TSR_DTYPE_COUNT < NAME_SLOTS / 2, "NAME_SLOTS too small");

typedef struct name_slot {
  const char *name; /* NULL: empty */
  uint8_t len;
  uint8_t is_dtype;
  uint16_t code;    /* opcode or dtype */
} name_slot_t;

static name_slot_t name_slots[NAME_SLOTS];
static pthread_once_t names_once = PTHREAD_ONCE_INIT;

static uint32_t name_hash(const char *text, size_t len, bool is_dtype) {
  return (tsr_fnv1a32(text, len) + (is_dtype ? 0x9e3779b9u : 0)) & (NAME_SLOTS - 1);
}

static void name_insert(const char *name, bool is_dtype, uint16_t code) {
  size_t len = strlen(name);
  uint32_t h = name_hash(name, len, is_dtype);
  while (name_slots[h].name) h = (h + 1) & (NAME_SLOTS - 1);
  name_slots[h] = (name_slot_t){name, (uint8_t)len, is_dtype, code};
}

static void names_init(void) {
  for (int i = TSR_OP_COUNT - 1; i >= 0; i--) {
    const char *m = tsr_op_table[i].mnemonic;
    if (m && strlen(m) < 256) name_insert(m, false, (uint16_t)i);
  }
  for (int i = TSR_DTYPE_COUNT - 1; i >= 0; i--) {
    const char *d = tsr_dtype_name((tsr_dtype_t)i);
    if (d && strlen(d) < 256) name_insert(d, true, (uint16_t)i);
  }
}

static const name_slot_t *name_find(const char *text, size_t len, bool is_dtype) {
  tsr_process_once(&names_once, names_init);
  if (len >= 256) return NULL;
  const name_slot_t *found = NULL;
  for (uint32_t h = name_hash(text, len, is_dtype); name_slots[h].name;
       h = (h + 1) & (NAME_SLOTS - 1)) {
    const name_slot_t *s = &name_slots[h];
    /* the lowest code, as the linear scans answer (were a name listed twice) */
    if (s->is_dtype == is_dtype && s->len == len && memcmp(s->name, text, len) == 0 &&
        (!found || s->code < found->code))
      found = s;
  }
  return found;
}

tsr_opcode_t ps_op_lookup(const char *text, size_t len) {
  const name_slot_t *s = name_find(text, len, false);
  return s ? (tsr_opcode_t)s->code : TSR_OP_COUNT;
}

bool ps_dtype_lookup(const char *text, size_t len, tsr_dtype_t *out) {
  const name_slot_t *s = name_find(text, len, true);
  if (!s) return false;
  *out = (tsr_dtype_t)s->code;
  return true;
}
