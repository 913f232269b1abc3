/* Kernel headers: the grid line, the prefetch/in/out/scratch declarations
 * and their index maps (short and general form). */
#include "ir/parse_internal.h"

/* ---- Kernel headers ------------------------------------------------------------ */

/* "map(%i, ..) -> (%i, 0, ..)" or "map(%i, ..) { .. yield .. }" for the decl
 * at index `decl` (current token 'map'). */
static bool parse_map(parser_t *p, uint32_t decl) {
  const token_t kw = p->tok;
  ps_next(p);
  if (!ps_expect(p, TOK_LPAREN, "'(' after 'map'")) return false;
  token_t args[TSR_MAX_RANK];
  uint32_t nargs = 0;
  if (!accept(p, TOK_RPAREN)) {
    for (;;) {
      const token_t a = p->tok;
      if (!at(p, TOK_VALUE)) return ps_expected(p, "a grid index name (%name)");
      if (nargs == TSR_MAX_RANK)
        return ps_error_at(p, a.line, a.col, "an index map takes at most %d arguments",
                           TSR_MAX_RANK);
      for (uint32_t i = 0; i < nargs; i++)
        if (args[i].len == a.len && memcmp(args[i].text, a.text, a.len) == 0)
          return ps_error_at(p, a.line, a.col,
                             "redefinition of %.*s (first defined at %u:%u)",
                             (int)a.len, a.text, args[i].line, args[i].col);
      /* The map sees the prefetch refs, so its names cannot hide them. */
      const tsr_decl_t *d = ps_find_decl(p, p->table, &a);
      if (d && d->role == TSR_ROLE_PREFETCH)
        return ps_error_at(p, a.line, a.col,
                           "redefinition of %.*s (first defined at %u:%u)",
                           (int)a.len, a.text, d->loc.line, d->loc.col);
      args[nargs++] = a;
      ps_next(p);
      if (accept(p, TOK_COMMA)) continue;
      if (!ps_expect(p, TOK_RPAREN, "',' or ')' after a grid index name")) return false;
      break;
    }
  }
  tsr_type_t i32 = tsr_type_scalar(TSR_DTYPE_I32), arg_types[TSR_MAX_RANK];
  for (uint32_t i = 0; i < nargs; i++) arg_types[i] = i32;
  tsr_region_t *r;
  if (!ps_check(p, tsr_region_create(p->module, 0, &r)) ||
      !ps_make_region_args(p, r, nargs, args, arg_types, NULL))
    return false;
  p->kernel->decls[decl].index_map = r;

  if (accept(p, TOK_ARROW)) {
    /* Short form: each result is a grid index or an integer. */
    if (!ps_expect(p, TOK_LPAREN, "'(' after '->'")) return false;
    token_t items[TSR_MAX_RANK];
    tsr_value_t *results[TSR_MAX_RANK];
    int64_t consts[TSR_MAX_RANK];
    uint32_t n = 0;
    if (!accept(p, TOK_RPAREN)) {
      for (;;) {
        const token_t t = p->tok;
        if (n == TSR_MAX_RANK)
          return ps_error_at(p, t.line, t.col, "an index map yields at most %d values",
                             TSR_MAX_RANK);
        results[n] = NULL;
        if (t.kind == TOK_VALUE) {
          for (uint32_t i = 0; i < nargs; i++)
            if (args[i].len == t.len && memcmp(args[i].text, t.text, t.len) == 0)
              results[n] = r->args[i];
          if (!results[n])
            return ps_error_at(p, t.line, t.col,
                               "%.*s is not an argument of this map (the short "
                               "form yields grid indices or integers)",
                               (int)t.len, t.text);
          ps_next(p);
        } else {
          if (!ps_parse_int(p, "a grid index or an integer", &consts[n])) return false;
          if (consts[n] < INT32_MIN || consts[n] > INT32_MAX)
            return ps_error_at(p, t.line, t.col,
                               "block index %lld is out of range for i32",
                               (long long)consts[n]);
        }
        items[n++] = t;
        if (accept(p, TOK_COMMA)) continue;
        if (!ps_expect(p, TOK_RPAREN, "',' or ')' after a map result")) return false;
        break;
      }
    }
    for (uint32_t i = 0; i < n; i++) {
      if (results[i]) continue;
      tsr_loc_t loc = {p->file, items[i].line, items[i].col};
      tsr_op_t *op;
      if (!ps_check(p, tsr_op_create(p->kernel, r, TSR_OP_CONST, loc, NULL, 0, &i32,
                                     NULL, 1, 0, &op)))
        return false;
      op->literal.i = consts[i];
      results[i] = op->results[0];
    }
    tsr_loc_t loc = {p->file, kw.line, kw.col};
    tsr_op_t *yield;
    return ps_check(p, tsr_op_create(p->kernel, r, TSR_OP_YIELD, loc, results, n,
                                     NULL, NULL, 0, 0, &yield));
  }

  if (!at(p, TOK_LBRACE)) return ps_expected(p, "'->' or '{' after the map arguments");
  /* General form: its own names; it sees the prefetch refs and its args. */
  p->kernel_table = p->table;
  scope_t *kernel_scope = p->scope;
  scope_t scope;
  p->table = &p->tables[1];
  p->scope = NULL;
  ps_scope_open(p, &scope);
  bool ok = true;
  for (uint32_t i = 0; ok && i < p->kernel->num_decls; i++) {
    const tsr_decl_t *d = &p->kernel->decls[i];
    if (d->role == TSR_ROLE_PREFETCH)
      ok = ps_define(p, d->ref->name, strlen(d->ref->name), d->loc.line, d->loc.col,
                     d->ref, true);
  }
  for (uint32_t i = 0; ok && i < nargs; i++)
    ok = ps_define_tok(p, &args[i], r->args[i], true);
  if (ok) ok = ps_parse_block(p, r);
  ps_symtab_clear(p->table);
  p->table = p->kernel_table;
  p->kernel_table = NULL;
  p->scope = kernel_scope;
  return ok;
}

/* "grid(G0, ..) [semantics(S0, ..)]" (current token 'grid'). */
static bool parse_grid(parser_t *p) {
  tsr_kernel_t *k = p->kernel;
  ps_next(p);
  if (!ps_expect(p, TOK_LPAREN, "'(' after 'grid'")) return false;
  uint32_t rank = 0;
  if (!accept(p, TOK_RPAREN)) {
    for (;;) {
      if (rank == TSR_MAX_RANK)
        return ps_error_at(p, p->tok.line, p->tok.col,
                           "a grid has at most %d dimensions", TSR_MAX_RANK);
      p->grid_named[rank] = at(p, TOK_VALUE);
      if (p->grid_named[rank]) {
        /* A dynamic extent: a rank-0 i32 prefetch operand, declared below. */
        p->grid_names[rank] = p->tok;
        k->grid[rank] = TSR_GRID_DYNAMIC;
        ps_next(p);
      } else if (!ps_parse_int(p, "a grid dimension or a prefetch operand (%name)",
                               &k->grid[rank])) {
        return false;
      }
      k->semantics[rank++] = TSR_DIM_ARBITRARY;
      if (accept(p, TOK_COMMA)) continue;
      if (!ps_expect(p, TOK_RPAREN, "',' or ')' after a grid dimension")) return false;
      break;
    }
  }
  k->grid_rank = rank;
  const token_t sem_kw = p->tok;
  if (!accept_word(p, "semantics")) return ps_expect_line_end(p);
  if (!ps_expect(p, TOK_LPAREN, "'(' after 'semantics'")) return false;
  uint32_t n = 0;
  if (!accept(p, TOK_RPAREN)) {
    for (;;) {
      const token_t t = p->tok;
      tsr_ir_dim_semantics_t sem;
      if (t.kind != TOK_IDENT || !tsr_ir_dim_semantics_from_name(t.text, t.len, &sem))
        return ps_expected(p, "'parallel', 'arbitrary' or 'core_parallel'");
      if (n < TSR_MAX_RANK) k->semantics[n] = (uint8_t)sem;
      n++;
      ps_next(p);
      if (accept(p, TOK_COMMA)) continue;
      if (!ps_expect(p, TOK_RPAREN, "',' or ')' after a dimension semantics")) return false;
      break;
    }
  }
  if (n != rank)
    return ps_error_at(p, sem_kw.line, sem_kw.col,
                       "the grid has %u dimension%s but semantics lists %u", rank,
                       rank == 1 ? "" : "s", n);
  return ps_expect_line_end(p);
}

static const char *const role_names[] = {"prefetch", "in", "out", "scratch"};

/* "alias %x" after an output (current token 'alias'); `index` is the
 * output's decl. */
static bool parse_alias(parser_t *p, tsr_role_t role, uint32_t index) {
  const token_t alias_kw = p->tok;
  if (!accept_word(p, "alias")) return true;
  if (role != TSR_ROLE_OUT)
    return ps_error_at(p, alias_kw.line, alias_kw.col,
                       "'alias' is only allowed on 'out' operands");
  const token_t t = p->tok;
  if (!at(p, TOK_VALUE)) return ps_expected(p, "an input name (%name) after 'alias'");
  const tsr_decl_t *in = ps_find_decl(p, p->table, &t);
  if (!in || in->role != TSR_ROLE_IN)
    return ps_error_at(p, t.line, t.col, "alias %.*s: no earlier 'in' operand of that name",
                       (int)t.len, t.text);
  p->kernel->decls[index].alias = in->ref->decl;
  ps_next(p);
  return true;
}

/* A semaphore operand, "in %s: dma_sem[2]" or "out %t: sem alias %s"
 * (current token the type): the array is the semaphores' counts, i32 of the
 * semaphores' shape, passed from one kernel to the next (docs/ir.md). */
static bool parse_sem_operand(parser_t *p, tsr_role_t role, const token_t *name,
                              tsr_loc_t loc) {
  tsr_kernel_t *k = p->kernel;
  tsr_type_t t;
  if (!ps_parse_type(p, &t)) return false;
  uint32_t index = k->num_decls;
  tsr_decl_t *d;
  if (!ps_check(p, tsr_kernel_add_decl(k, role, name->text + 1, name->len - 1, &t, loc, &d)))
    return false;
  d->array = t.rank ? tsr_type_vector(TSR_DTYPE_I32, t.rank, t.dims)
                    : tsr_type_scalar(TSR_DTYPE_I32);
  for (uint32_t i = 0; i < t.rank && i < TSR_MAX_RANK; i++) d->block[i] = t.dims[i];
  if (!ps_define_tok(p, name, d->ref, true)) return false;
  const token_t t0 = p->tok;
  if (at(p, TOK_IDENT) && !at_word(p, "alias"))
    return ps_error_at(p, t0.line, t0.col,
                       "a semaphore operand has no memory space, block or index map, found "
                       "'%.*s'",
                       (int)TSR_MIN(t0.len, 40), t0.text);
  if (!parse_alias(p, role, index)) return false;
  return ps_expect_line_end(p);
}

/* A prefetch/in/out/scratch line (current token the keyword). */
static bool parse_decl(parser_t *p, tsr_role_t role, int *last_role) {
  tsr_kernel_t *k = p->kernel;
  const token_t kw = p->tok;
  ps_next(p);
  if ((int)role < *last_role)
    return ps_error_at(p, kw.line, kw.col,
                       "'%s' after '%s': header lines come in the order prefetch, "
                       "in, out, scratch",
                       role_names[role], role_names[*last_role]);
  *last_role = (int)role;
  const token_t name = p->tok;
  if (!at(p, TOK_VALUE)) return ps_expected(p, "an operand name (%name)");
  if (!ps_check_fresh(p, &name)) return false;
  ps_next(p);
  if (!ps_expect(p, TOK_COLON, "':' after the operand name")) return false;
  tsr_loc_t loc = {p->file, name.line, name.col};
  tsr_decl_t *d;

  if (role == TSR_ROLE_SCRATCH) {
    const token_t tt = p->tok;
    tsr_type_t t;
    if (!ps_parse_type(p, &t)) return false;
    if (t.kind != TSR_TYPE_REF && t.kind != TSR_TYPE_SEM)
      return ps_error_at(p, tt.line, tt.col,
                         "scratch needs a memory type (vmem f32[8, 128], smem i32) "
                         "or a semaphore type (sem, dma_sem[2]), found '%.*s'",
                         (int)TSR_MIN(tt.len, 40), tt.text);
    if (!ps_expect_line_end(p)) return false;
    if (!ps_check(p, tsr_kernel_add_decl(k, role, name.text + 1, name.len - 1, &t,
                                         loc, &d)))
      return false;
    return ps_define_tok(p, &name, d->ref, true);
  }

  if (at_word(p, "sem") || at_word(p, "dma_sem")) {
    if (role == TSR_ROLE_PREFETCH)
      return ps_error_at(p, p->tok.line, p->tok.col,
                         "a semaphore operand is an 'in' or 'out' operand, never prefetch");
    return parse_sem_operand(p, role, &name, loc);
  }
  tsr_type_t array;
  if (!ps_parse_value_type(p, "an element type (f32, i32, ..)", &array)) return false;
  tsr_space_t space = TSR_SPACE_SMEM;
  if (role != TSR_ROLE_PREFETCH) {
    if (!at(p, TOK_IDENT) || !tsr_space_from_name(p->tok.text, p->tok.len, &space))
      return ps_expected(p, "a memory space (vmem, smem, hbm or any)");
    ps_next(p);
  }
  bool has_block = false;
  int64_t block[TSR_MAX_RANK];
  bool element[TSR_MAX_RANK] = {false};
  int64_t pad[TSR_MAX_RANK][2] = {{0}};
  const token_t block_kw = p->tok;
  if (role != TSR_ROLE_PREFETCH && accept_word(p, "block")) {
    has_block = true;
    if (!ps_expect(p, TOK_LBRACKET, "'[' after 'block'")) return false;
    uint32_t n = 0;
    for (;;) {
      const token_t t = p->tok;
      if (n == TSR_MAX_RANK)
        return ps_error_at(p, t.line, t.col, "more than %d block dimensions",
                           TSR_MAX_RANK);
      if (accept_word(p, "squeezed")) {
        block[n++] = TSR_SQUEEZED;
      } else if (accept_word(p, "element")) {
        /* element(SIZE) or element(SIZE, LOW, HIGH): pl.Element */
        if (!ps_expect(p, TOK_LPAREN, "'(' after 'element'")) return false;
        const token_t st = p->tok;
        if (!ps_parse_int(p, "an element dim's size", &block[n])) return false;
        if (block[n] < 1)
          return ps_error_at(p, st.line, st.col, "element dim size must be >= 1, found %lld",
                             (long long)block[n]);
        if (accept(p, TOK_COMMA)) {
          for (int s = 0; s < 2; s++) {
            const token_t pt = p->tok;
            if (s && !ps_expect(p, TOK_COMMA, "',' between an element dim's paddings"))
              return false;
            if (!ps_parse_int(p, "an element dim's padding", &pad[n][s])) return false;
            if (pad[n][s] < 0)
              return ps_error_at(p, pt.line, pt.col, "element dim padding must be >= 0, "
                                 "found %lld", (long long)pad[n][s]);
          }
        }
        if (!ps_expect(p, TOK_RPAREN, "')' after an element dim")) return false;
        element[n++] = true;
      } else {
        if (!ps_parse_int(p, "a block dimension or 'squeezed'", &block[n])) return false;
        if (block[n] < 1)
          return ps_error_at(p, t.line, t.col,
                             "block dimension must be >= 1 or 'squeezed', found %lld",
                             (long long)block[n]);
        n++;
      }
      if (accept(p, TOK_COMMA)) continue;
      if (!ps_expect(p, TOK_RBRACKET, "',' or ']' after a block dimension")) return false;
      break;
    }
    if (n != array.rank)
      return ps_error_at(p, block_kw.line, block_kw.col,
                         "block has %u entr%s but the array has rank %u", n,
                         n == 1 ? "y" : "ies", array.rank);
  }
  if (!has_block && at_word(p, "map"))
    return ps_error_at(p, p->tok.line, p->tok.col, "'map' needs a block[..] before it");

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
  if (!ps_check(p, tsr_kernel_add_decl(k, role, name.text + 1, name.len - 1, &ref,
                                       loc, &d)))
    return false;
  d->array = array;
  for (uint32_t i = 0; i < array.rank; i++) {
    d->block[i] = has_block ? block[i] : array.dims[i];
    d->element[i] = element[i];
    d->pad_low[i] = pad[i][0];
    d->pad_high[i] = pad[i][1];
  }
  d->has_block = has_block;
  if (!ps_define_tok(p, &name, d->ref, true)) return false;
  if (has_block && at_word(p, "map") && !parse_map(p, index)) return false;

  if (!parse_alias(p, role, index)) return false;
  const token_t revisit_kw = p->tok;
  if (accept_word(p, "revisit")) {
    /* revisit any | revisit immediate (the default, never printed) */
    if (role != TSR_ROLE_OUT)
      return ps_error_at(p, revisit_kw.line, revisit_kw.col,
                         "'revisit' is only allowed on 'out' operands");
    if (accept_word(p, "any"))
      k->decls[index].revisit = TSR_REVISIT_ANY;
    else if (accept_word(p, "immediate"))
      k->decls[index].revisit = TSR_REVISIT_IMMEDIATE;
    else
      return ps_expected(p, "a revisit mode ('any' or 'immediate') after 'revisit'");
  }
  return ps_expect_line_end(p);
}

/* The grid dims named by a prefetch operand: now that the operands are
 * declared, their decls (the verifier checks they are rank-0 i32). */
static void resolve_grid_names(parser_t *p) {
  tsr_kernel_t *k = p->kernel;
  for (uint32_t i = 0; i < k->grid_rank; i++) {
    if (!p->grid_named[i]) continue;
    const token_t *t = &p->grid_names[i];
    const tsr_decl_t *d = ps_find_decl(p, p->table, t);
    if (!d || d->role != TSR_ROLE_PREFETCH) {
      (void)ps_error_at(p, t->line, t->col,
                  "grid dim %u: %.*s is not a prefetch operand of this kernel (a dynamic "
                  "grid extent is a rank-0 i32 prefetch operand)",
                  i, (int)t->len, t->text);
      continue;
    }
    k->grid_bound[i] = (uint32_t)(d - k->decls) + 1;
  }
}

/* The header lines of a kernel up to its body's '{'. False if there is no
 * body (end of file or the next kernel). */
bool ps_parse_header(parser_t *p) {
  int last_role = -1;
  bool seen_grid = false;
  for (;;) {
    while (at(p, TOK_NEWLINE)) ps_next(p);
    if (p->fatal) return false;
    if (at(p, TOK_LBRACE)) {
      if (seen_grid) resolve_grid_names(p);
      return true;
    }
    const token_t t = p->tok;
    bool ok;
    if (tok_is(&t, "grid")) {
      if (seen_grid)
        ok = ps_error_at(p, t.line, t.col, "a kernel has one 'grid' line");
      else if (last_role >= 0)
        ok = ps_error_at(p, t.line, t.col, "'grid' must come before the operands");
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
      return ps_expected(p, "'{' to open the kernel body");
    } else {
      ok = ps_expected(p, "'grid', 'prefetch', 'in', 'out', 'scratch' or '{'");
    }
    if (ok) {
      accept(p, TOK_NEWLINE);
    } else {
      ps_skip_line(p);
      accept(p, TOK_RBRACE); /* a stray '}' in the header */
    }
  }
}
