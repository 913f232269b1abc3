/* The parser's symbol tables (one per kernel, one per general index map)
 * and region scopes, the uses and definitions of %names, and the growable
 * arrays an op line collects into. */
#include "ir/parse_internal.h"

/* ---- Symbols -------------------------------------------------------------- */

static symbol_t *lookup(parser_t *p, const char *name, size_t len) {
  symbol_t *s = NULL;
  HASH_FIND(hh, p->table, name, len, s);
  return s;
}

symbol_t *ps_lookup_tok(parser_t *p, const token_t *t) {
  return lookup(p, t->text + 1, t->len - 1);
}

/* Adds a symbol (in the scratch arena) to a table; NULL when out of memory. */
symbol_t *ps_table_add(parser_t *p, symbol_t **table, const char *name,
                       size_t len, uint32_t line, uint32_t col) {
  symbol_t *s = tsr_arena_alloc(&p->scratch, sizeof *s);
  if (!s) {
    ps_oom(p);
    return NULL;
  }
  s->name = name;
  s->len = len;
  s->line = line;
  s->col = col;
  HASH_ADD_KEYPTR(hh, *table, s->name, s->len, s);
  if (!s->hh.tbl) {
    ps_oom(p);
    return NULL;
  }
  return s;
}

/* Adds a symbol to the current table and scope. */
bool ps_define(parser_t *p, const char *name, size_t len, uint32_t line,
               uint32_t col, tsr_value_t *value, bool visible) {
  symbol_t *s = ps_table_add(p, &p->table, name, len, line, col);
  if (!s) return false;
  s->value = value;
  s->visible = visible;
  s->scope_next = p->scope->symbols;
  p->scope->symbols = s;
  return true;
}

bool ps_define_tok(parser_t *p, const token_t *t, tsr_value_t *value,
                   bool visible) {
  return ps_define(p, t->text + 1, t->len - 1, t->line, t->col, value, visible);
}

void ps_scope_open(parser_t *p, scope_t *s) {
  s->symbols = NULL;
  s->outer = p->scope;
  p->scope = s;
}

void ps_scope_close(parser_t *p) {
  for (symbol_t *s = p->scope->symbols; s; s = s->scope_next) s->visible = false;
  p->scope = p->scope->outer;
}

/* The kernel operand named by `t` in `table` (a kernel's table, where the
 * header defines the operands' refs), or NULL. */
const tsr_decl_t *ps_find_decl(parser_t *p, symbol_t *table, const token_t *t) {
  symbol_t *s = NULL;
  HASH_FIND(hh, table, t->text + 1, t->len - 1, s);
  return s && s->value && s->value->decl >= 0 ? &p->kernel->decls[s->value->decl]
                                              : NULL;
}

/* A name being defined must be new in the kernel (or map). */
bool ps_check_fresh(parser_t *p, const token_t *t) {
  symbol_t *s = ps_lookup_tok(p, t);
  if (!s) return true;
  return ps_error_at(p, t->line, t->col, "redefinition of %.*s (first defined at %u:%u)",
                     (int)t->len, t->text, s->line, s->col);
}

/* Parses a use of a value: it must be defined and visible here. */
bool ps_parse_use(parser_t *p, const char *what, tsr_value_t **out) {
  if (p->tok.kind != TOK_VALUE) return ps_expected(p, what);
  const token_t *t = &p->tok;
  symbol_t *s = ps_lookup_tok(p, t);
  if (!s && p->kernel_table && ps_find_decl(p, p->kernel_table, t))
    return ps_error_at(p, t->line, t->col,
                       "%.*s is not visible in an index map (maps see their "
                       "arguments and the prefetch refs)",
                       (int)t->len, t->text);
  if (!s)
    return ps_error_at(p, t->line, t->col, "use of undefined value %.*s",
                       (int)t->len, t->text);
  if (!s->visible)
    return ps_error_at(p, t->line, t->col,
                       "%.*s (defined at %u:%u) is not visible here", (int)t->len,
                       t->text, s->line, s->col);
  if (!s->value) return false; /* its definition failed: already reported */
  *out = s->value;
  ps_next(p);
  return true;
}

/* ---- Growable arrays (per op line) --------------------------------------- */

bool ps_vec_push(parser_t *p, vec_t *v, const void *elem, size_t size) {
  if (v->count == v->capacity) {
    if (!v->data && p->num_spare && p->spare[p->num_spare - 1].bytes / size >= 8) {
      p->num_spare--;
      v->data = p->spare[p->num_spare].data;
      v->capacity = (uint32_t)TSR_MIN(p->spare[p->num_spare].bytes / size, UINT32_MAX / 2);
    } else {
      uint32_t cap = v->capacity ? v->capacity * 2 : 8;
      size_t bytes;
      if (cap < v->capacity || !tsr_mul_size(cap, size, &bytes)) return ps_oom(p);
      void *d = tsr_realloc(v->data, bytes);
      if (!d) return ps_oom(p);
      v->data = d;
      v->capacity = cap;
    }
  }
  memcpy((char *)v->data + (size_t)v->count * size, elem, size);
  v->count++;
  return true;
}

static void give_back(parser_t *p, vec_t *v, size_t size) {
  if (!v->data) return;
  if (p->num_spare < TSR_ARRAY_SIZE(p->spare)) {
    p->spare[p->num_spare].data = v->data;
    p->spare[p->num_spare].bytes = (size_t)v->capacity * size;
    p->num_spare++;
  } else {
    tsr_free(v->data);
  }
  v->data = NULL;
}

void ps_op_line_free(parser_t *p, op_line_t *l) {
  give_back(p, &l->names, sizeof(token_t));
  give_back(p, &l->operands, sizeof(tsr_value_t *));
  give_back(p, &l->dyn, sizeof(tsr_value_t *));
  give_back(p, &l->types, sizeof(tsr_type_t));
  give_back(p, &l->arg_names, sizeof(token_t));
  give_back(p, &l->arg_types, sizeof(tsr_type_t));
}

void ps_free_spares(parser_t *p) {
  for (uint32_t i = 0; i < p->num_spare; i++) tsr_free(p->spare[i].data);
  p->num_spare = 0;
}

bool ps_push_value(parser_t *p, vec_t *v, tsr_value_t *value) {
  return ps_vec_push(p, v, &value, sizeof value);
}

/* A region-argument or result name must be new in the kernel and within
 * its own line; claims it for the line. */
static const token_t *find_name(const vec_t *names, const token_t *t) {
  for (uint32_t i = 0; i < names->count; i++) {
    const token_t *o = &VEC_AT(*names, token_t, i);
    if (o->len == t->len && memcmp(o->text, t->text, t->len) == 0) return o;
  }
  return NULL;
}

/* The line's names so far are those in l->names and l->arg_names (a name is
 * added to one of them once checked here). */
static bool check_fresh_in_line(parser_t *p, op_line_t *l, const token_t *t) {
  const token_t *o = find_name(&l->names, t);
  if (!o) o = find_name(&l->arg_names, t);
  if (o)
    return ps_error_at(p, t->line, t->col, "redefinition of %.*s (first defined at %u:%u)",
                       (int)t->len, t->text, o->line, o->col);
  return ps_check_fresh(p, t);
}

/* A %name the line defines (a result or region argument; `what` for the
 * message), checked fresh and appended to `names` (token_t). */
bool ps_parse_new_name(parser_t *p, op_line_t *l, vec_t *names, const char *what) {
  const token_t name = p->tok;
  if (!at(p, TOK_VALUE)) return ps_expected(p, what);
  if (!check_fresh_in_line(p, l, &name)) return false;
  ps_next(p);
  return ps_vec_push(p, names, &name, sizeof name);
}
