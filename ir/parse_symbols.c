/* The parser's symbol tables (one per kernel, one per general index map)
 * and region scopes, the uses and definitions of %names, and the growable
 * arrays an op line collects into. */
#include "ir/parse_internal.h"

/* ---- Symbols -------------------------------------------------------------- */

/* FNV-1a, then murmur3's final mix: the slot is the hash's low bits, which
 * FNV-1a alone mixes poorly (bit i depends only on bits 0..i of the bytes). */
static uint32_t symbol_hash(const char *name, size_t len) {
  uint32_t h = tsr_fnv1a32(name, len);
  h ^= h >> 16;
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  h *= 0xc2b2ae35u;
  h ^= h >> 16;
  return h;
}

/* The slot holding `name`, or the empty slot where it would go. */
static symslot_t *symtab_slot(const symtab_t *t, const char *name, size_t len,
                              uint32_t hash) {
  for (uint32_t i = hash & t->mask;; i = (i + 1) & t->mask) {
    symslot_t *s = &t->slots[i];
    if (!s->symbol) return s;
    if (s->hash == hash && s->len == len && memcmp(s->symbol->name, name, len) == 0)
      return s;
  }
}

static symbol_t *symtab_find(const symtab_t *t, const char *name, size_t len) {
  if (!t || !t->slots || len > UINT32_MAX) return NULL;
  return symtab_slot(t, name, len, symbol_hash(name, len))->symbol;
}

/* Makes room for one more symbol (at most half the slots full). */
static bool symtab_reserve(symtab_t *t) {
  uint32_t cap = t->slots ? t->mask + 1 : 0;
  if (t->count + 1 <= cap / 2) return true;
  if (cap > UINT32_MAX / 4) return false;
  uint32_t new_cap = cap ? cap * 2 : 64;
  symslot_t *slots = tsr_calloc(new_cap, sizeof *slots);
  if (!slots) return false;
  symtab_t grown = {slots, new_cap - 1, t->count};
  for (uint32_t i = 0; i < cap; i++)
    if (t->slots[i].symbol)
      *symtab_slot(&grown, t->slots[i].symbol->name, t->slots[i].len,
                   t->slots[i].hash) = t->slots[i];
  tsr_free(t->slots);
  *t = grown;
  return true;
}

void ps_symtab_clear(symtab_t *table) {
  tsr_free(table->slots);
  memset(table, 0, sizeof *table);
}

static symbol_t *lookup(parser_t *p, const char *name, size_t len) {
  return symtab_find(p->table, name, len);
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

/* Adds a symbol to the current table and scope. A name already there (no
 * caller defines one twice: each checks first) would be replaced, as the
 * newest symbol of a name was the one found before. */
bool ps_define(parser_t *p, const char *name, size_t len, uint32_t line,
               uint32_t col, tsr_value_t *value, bool visible) {
  symtab_t *t = p->table;
  symbol_t *s = len <= UINT32_MAX && symtab_reserve(t)
                    ? tsr_arena_alloc(&p->scratch, sizeof *s) : NULL;
  if (!s) return ps_oom(p);
  s->name = name;
  s->len = len;
  s->line = line;
  s->col = col;
  uint32_t hash = symbol_hash(name, len);
  symslot_t *slot = symtab_slot(t, name, len, hash);
  if (!slot->symbol) t->count++;
  *slot = (symslot_t){hash, (uint32_t)len, s};
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
const tsr_decl_t *ps_find_decl(parser_t *p, const symtab_t *table, const token_t *t) {
  symbol_t *s = symtab_find(table, t->text + 1, t->len - 1);
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
