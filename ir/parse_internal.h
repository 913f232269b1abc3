/* What the files of the parser share (ir/parse*.c): the token, symbol,
 * parser and op-line structs, and the functions one file offers the next.
 * Layering, each file calling only those before it:
 *   parse_lex.c      lexer, token helpers, diagnostics
 *   parse_symbols.c  symbol tables and scopes, value uses, op-line arrays
 *   parse_value.c    types, literals, views (indices) and the layout of
 *                    memory, DMA and semaphore ops (tsr_opview_layout)
 *   parse_op.c       op lines, bodies and regions
 *   parse_header.c   kernel headers: grid, declarations, index maps
 *   parse.c          the driver: modules and kernels (tsr_ir_parse)
 * Library-internal; nothing here is used outside ir/parse*.c. */
#ifndef TESSERA_IR_PARSE_INTERNAL_H
#define TESSERA_IR_PARSE_INTERNAL_H

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
 * One table per kernel (names are unique per kernel) and one per general
 * index map (map names are local). A scope lists the symbols its region
 * defined, so closing the region hides them. */

typedef struct symbol {
  const char *name; /* without '%'; borrowed from the source or the module */
  size_t len;
  tsr_value_t *value; /* NULL: its definition had an error (uses stay quiet) */
  uint32_t line, col; /* where it was defined */
  bool visible;       /* false once its region closed or while its op is open */
  struct symbol *scope_next;
  UT_hash_handle hh;
} symbol_t;

/* An open-addressing table of the symbols, with each name's hash and length
 * beside its pointer: a lookup that finds nothing (every definition checks
 * its name is new) reads one run of slots instead of chasing a uthash
 * chain of older symbols, a cache miss per entry; the lookups were a tenth
 * of a `tessera run` of a 6,500-op kernel. */
typedef struct symslot {
  uint32_t hash, len;
  struct symbol *symbol; /* NULL: empty */
} symslot_t;

typedef struct symtab {
  symslot_t *slots;
  uint32_t mask;  /* capacity - 1 (a power of two); slots NULL when empty */
  uint32_t count;
} symtab_t;

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
  symtab_t *table;     /* the current one of `tables` */
  symtab_t tables[2];  /* the kernel's, a general index map's */
  scope_t *scope;
  symbol_t *kernel_names; /* value NULL; for duplicate @names */
  uint32_t depth;       /* open regions */
  tsr_arena_t scratch;  /* symbols and temporary strings; freed at the end */
  tsr_diag_list_t diags;
  tsr_status_t fatal;   /* out of memory: stop everything */
  bool eof_reported;
  bool skipping;        /* skipping after an error: lexer errors are noise */
  symtab_t *kernel_table; /* in a general index map (which has its own table):
                             the kernel's; NULL elsewhere */
  /* Buffers of finished op lines' arrays, reused by the next lines (a
   * malloc and free per array and line was a tenth of the parse). */
  struct { void *data; size_t bytes; } spare[16];
  uint32_t num_spare;
  /* The last block types read (ps_parse_value_type): their text in the
   * source (ending in ']', on one line) and the type, for the next ones
   * spelled the same (reading "f32[8, 128]" on every line was a quarter of
   * the parse of a 7k-line kernel). Replaced round robin. */
  struct {
    const char *text;
    size_t len;
    tsr_type_t type;
  } recent_types[4];
  uint32_t next_recent_type;
  /* The current kernel's grid dims written as a prefetch operand's name (a
   * dynamic extent): resolved at the header's end, after the operands. */
  token_t grid_names[TSR_MAX_RANK];
  bool grid_named[TSR_MAX_RANK];
} parser_t;

typedef struct vec {
  void *data;
  uint32_t count, capacity;
} vec_t;

#define VEC_AT(v, T, i) (((T *)(v).data)[i])

/* What one op line collects before the op is created. */
typedef struct op_line {
  vec_t names;     /* token_t: result names */
  vec_t operands;  /* tsr_value_t *: in final order (docs/ir.md layouts) */
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
} op_line_t;

/* ---- parse_lex.c ---------------------------------------------------------- */

/* Records a diagnostic at line:col; returns false (to fail the line). */
bool ps_error_at(parser_t *p, uint32_t line, uint32_t col, const char *fmt, ...)
    TSR_PRINTF(4, 5);
bool ps_oom(parser_t *p);
bool ps_check(parser_t *p, tsr_status_t s);
void ps_next(parser_t *p);
const char *ps_describe(const token_t *t, char *buf, size_t size);
bool ps_expected(parser_t *p, const char *what);
bool ps_expect(parser_t *p, tok_kind_t kind, const char *what);
bool ps_expect_word(parser_t *p, const char *word, const char *what);
bool ps_expect_line_end(parser_t *p);
void ps_skip_line(parser_t *p);
bool ps_int_value(const token_t *t, int64_t *out);
bool ps_parse_int(parser_t *p, const char *what, int64_t *out);

/* The opcode of a mnemonic (TSR_OP_COUNT if none), and the dtype of a
 * dtype name: tsr_op_lookup and tsr_dtype_from_name through a table built
 * once per process (their linear scans with strlen were a tenth of the
 * parse of a 7k-line kernel). */
tsr_opcode_t ps_op_lookup(const char *text, size_t len);
bool ps_dtype_lookup(const char *text, size_t len, tsr_dtype_t *out);

/* Token tests and optional tokens (inline: called per token). */
static inline bool tok_is(const token_t *t, const char *word) {
  size_t n = strlen(word);
  return t->kind == TOK_IDENT && t->len == n && memcmp(t->text, word, n) == 0;
}

static inline bool at(parser_t *p, tok_kind_t kind) { return p->tok.kind == kind; }

static inline bool at_word(parser_t *p, const char *word) { return tok_is(&p->tok, word); }

static inline bool at_line_end(parser_t *p) {
  return p->tok.kind == TOK_NEWLINE || p->tok.kind == TOK_EOF;
}

static inline bool accept(parser_t *p, tok_kind_t kind) {
  if (p->tok.kind != kind) return false;
  ps_next(p);
  return true;
}

static inline bool accept_word(parser_t *p, const char *word) {
  if (!tok_is(&p->tok, word)) return false;
  ps_next(p);
  return true;
}

/* ---- parse_symbols.c ---------------------------------------------------- */

symbol_t *ps_lookup_tok(parser_t *p, const token_t *t);
symbol_t *ps_table_add(parser_t *p, symbol_t **table, const char *name,
                       size_t len, uint32_t line, uint32_t col);
bool ps_define(parser_t *p, const char *name, size_t len, uint32_t line,
               uint32_t col, tsr_value_t *value, bool visible);
bool ps_define_tok(parser_t *p, const token_t *t, tsr_value_t *value,
                   bool visible);
void ps_scope_open(parser_t *p, scope_t *s);
void ps_scope_close(parser_t *p);
const tsr_decl_t *ps_find_decl(parser_t *p, const symtab_t *table, const token_t *t);
/* Empties a table (its symbols live in the scratch arena). */
void ps_symtab_clear(symtab_t *table);
bool ps_check_fresh(parser_t *p, const token_t *t);
bool ps_parse_use(parser_t *p, const char *what, tsr_value_t **out);
bool ps_vec_push(parser_t *p, vec_t *v, const void *elem, size_t size);
/* Gives the line's arrays back to the parser (for the next lines). */
void ps_op_line_free(parser_t *p, op_line_t *l);
/* Frees the parser's spare arrays. */
void ps_free_spares(parser_t *p);
bool ps_push_value(parser_t *p, vec_t *v, tsr_value_t *value);
bool ps_parse_new_name(parser_t *p, op_line_t *l, vec_t *names, const char *what);

/* ---- parse_value.c ------------------------------------------------------ */

bool ps_parse_value_type(parser_t *p, const char *what, tsr_type_t *out);
bool ps_parse_type(parser_t *p, tsr_type_t *out);
bool ps_parse_result_types(parser_t *p, op_line_t *l);
bool ps_convert_literal(parser_t *p, const token_t *t, bool neg,
                        const tsr_type_t *type, tsr_literal_t *out);
bool ps_decode_string(parser_t *p, const token_t *t, const char **out);
bool ps_parse_indices(parser_t *p, const token_t *ref, const tsr_type_t *type,
                      bool static_only, const char *opname, op_line_t *l);
bool ps_parse_ref_view(parser_t *p, const char *what, const char *opname,
                       op_line_t *l, tsr_value_t **out);
bool ps_parse_int_list(parser_t *p, const char *what, op_line_t *l);
bool ps_parse_value_list(parser_t *p, op_line_t *l);
bool ps_parse_device_core(parser_t *p, tsr_opview_parts_t *parts, bool allow_core);
bool ps_lay_out(parser_t *p, op_line_t *l, tsr_opview_parts_t *parts);

/* ---- parse_op.c ---------------------------------------------------------- */

bool ps_make_region_args(parser_t *p, tsr_region_t *r, uint32_t n,
                         const token_t *names, const tsr_type_t *types,
                         const tsr_type_t *first_type);
bool ps_parse_block(parser_t *p, tsr_region_t *region);

/* ---- parse_header.c ------------------------------------------------------ */

bool ps_parse_header(parser_t *p);

#endif /* TESSERA_IR_PARSE_INTERNAL_H */
