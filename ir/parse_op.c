/* Op lines: the results, the mnemonic and the body of each op per its
 * SYNTAX column, control-flow ops and their regions, and blocks of ops. */
#include "ir/parse_internal.h"

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
  return ps_error_at(p, l->mnemonic.line, l->mnemonic.col, "'%s' expects %s, found %u",
                     info->mnemonic, want, n);
}

/* Creates the op from the line (results named, attributes copied). */
static bool create_op(parser_t *p, tsr_region_t *region, op_line_t *l,
                      uint32_t num_regions) {
  uint32_t nres = l->names.count;
  const char **names = NULL;
  if (nres) {
    names = tsr_arena_alloc_array(&p->scratch, nres, sizeof *names);
    if (!names) return ps_oom(p);
    for (uint32_t i = 0; i < nres; i++) {
      const token_t *t = &VEC_AT(l->names, token_t, i);
      names[i] = tsr_arena_strndup(&p->scratch, t->text + 1, t->len - 1);
      if (!names[i]) return ps_oom(p);
    }
  }
  tsr_loc_t loc = {p->file, l->mnemonic.line, l->mnemonic.col};
  tsr_op_t *op;
  if (!ps_check(p, tsr_op_create(p->kernel, region, l->opcode, loc,
                                 (tsr_value_t *const *)l->operands.data,
                                 l->operands.count, (const tsr_type_t *)l->types.data,
                                 names, nres, num_regions, &op)))
    return false;
  op->flags = l->flags;
  op->literal = l->literal;
  op->text = l->text;
  if (!ps_check(p, tsr_op_alloc_indices(p->module, op, l->num_indices))) return false;
  for (uint32_t i = 0; i < l->num_indices; i++) op->indices[i] = l->indices[i];
  if (!ps_check(p, tsr_op_alloc_ints(p->module, op, l->num_ints))) return false;
  for (uint32_t i = 0; i < l->num_ints; i++) op->ints[i] = l->ints[i];
  l->op = op;
  return true;
}

/* Defines the op's results (visible or pending until its regions close). */
static bool define_results(parser_t *p, op_line_t *l, bool visible) {
  for (uint32_t i = 0; i < l->names.count; i++)
    if (!ps_define_tok(p, &VEC_AT(l->names, token_t, i), l->op->results[i], visible))
      return false;
  return true;
}

/* Creates region arguments named `names[i]`: the first of type `first_type`
 * when given (the induction variable of 'for'), the others of `types` in
 * order. */
bool ps_make_region_args(parser_t *p, tsr_region_t *r, uint32_t n,
                         const token_t *names, const tsr_type_t *types,
                         const tsr_type_t *first_type) {
  if (!ps_check(p, tsr_region_init_args(p->module, r, n))) return false;
  for (uint32_t i = 0; i < n; i++) {
    const tsr_type_t *t = i == 0 && first_type ? first_type
                                               : &types[first_type ? i - 1 : i];
    if (!ps_check(p, tsr_value_create(p->kernel, t, names[i].text + 1,
                                      names[i].len - 1, &r->args[i])))
      return false;
    r->args[i]->owner = r;
  }
  return true;
}

/* Parses "{" NEWLINE op lines "}" into `region` (current token '{'). The
 * caller has opened the region's scope. False only at the end of the file,
 * where the missing '}' is reported once. */
bool ps_parse_block(parser_t *p, tsr_region_t *region) {
  const token_t open = p->tok;
  ps_next(p);
  if (!at_line_end(p)) {
    ps_expected(p, "end of line after '{'");
    ps_skip_line(p);
  }
  p->depth++;
  for (;;) {
    while (at(p, TOK_NEWLINE)) ps_next(p);
    if (p->fatal) break;
    if (accept(p, TOK_RBRACE)) {
      p->depth--;
      return true;
    }
    if (at(p, TOK_EOF)) {
      if (!p->eof_reported)
        ps_error_at(p, p->tok.line, p->tok.col,
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
  ps_scope_open(p, &scope);
  bool ok = true;
  for (uint32_t i = 0; ok && i < r->num_args; i++) {
    symbol_t *s = rebind ? ps_lookup_tok(p, &names[i]) : NULL;
    if (s) {
      s->value = r->args[i];
      s->visible = true;
      s->scope_next = scope.symbols;
      scope.symbols = s;
    } else {
      ok = ps_define_tok(p, &names[i], r->args[i], true);
    }
  }
  if (ok) ok = ps_parse_block(p, r);
  ps_scope_close(p);
  return ok;
}

/* iter(%x = %init, ..): names to l->arg_names, inits to l->operands. */
static bool parse_iter(parser_t *p, op_line_t *l) {
  if (!ps_expect(p, TOK_LPAREN, "'(' after 'iter'")) return false;
  for (;;) {
    if (!ps_parse_new_name(p, l, &l->arg_names, "a loop-carried value name (%name)"))
      return false;
    if (!ps_expect(p, TOK_EQUAL, "'=' and an initial value")) return false;
    tsr_value_t *v;
    if (!ps_parse_use(p, "an initial value", &v)) return false;
    if (!ps_push_value(p, &l->operands, v)) return false;
    if (accept(p, TOK_COMMA)) continue;
    return ps_expect(p, TOK_RPAREN, "',' or ')' in iter(..)");
  }
}

/* The common end of a control-flow header: result types, '{', nesting. */
static bool control_header_end(parser_t *p, op_line_t *l, uint32_t carried) {
  if (!ps_parse_result_types(p, l)) return false;
  const char *m = tsr_op_table[l->opcode].mnemonic;
  if (carried != UINT32_MAX && carried != l->names.count)
    return ps_error_at(p, l->mnemonic.line, l->mnemonic.col,
                       "'%s' carries %u value%s in iter(..) but has %u result%s", m,
                       carried, carried == 1 ? "" : "s", l->names.count,
                       l->names.count == 1 ? "" : "s");
  if (!at(p, TOK_LBRACE)) return ps_expected(p, "'{' to open the region");
  if (p->depth >= MAX_NESTING)
    return ps_error_at(p, p->tok.line, p->tok.col,
                       "regions nested more than %d deep", MAX_NESTING);
  return check_arity(p, l);
}

static bool parse_for(parser_t *p, tsr_region_t *region, op_line_t *l) {
  if (!ps_parse_new_name(p, l, &l->arg_names, "the induction variable (%name)"))
    return false;
  if (!ps_expect(p, TOK_EQUAL, "'=' after the induction variable")) return false;
  tsr_value_t *v;
  if (!ps_parse_use(p, "a lower bound", &v) || !ps_push_value(p, &l->operands, v))
    return false;
  if (!ps_expect_word(p, "to", "'to'")) return false;
  if (!ps_parse_use(p, "an upper bound", &v) || !ps_push_value(p, &l->operands, v))
    return false;
  if (!ps_expect_word(p, "step", "'step'")) return false;
  if (!ps_parse_use(p, "a step", &v) || !ps_push_value(p, &l->operands, v)) return false;
  if (accept_word(p, "iter") && !parse_iter(p, l)) return false;
  if (!control_header_end(p, l, l->arg_names.count - 1)) return false;
  if (!create_op(p, region, l, 1)) return false;
  tsr_type_t i32 = tsr_type_scalar(TSR_DTYPE_I32);
  tsr_region_t *body = &l->op->regions[0];
  if (!ps_make_region_args(p, body, l->arg_names.count,
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
    if (!ps_make_region_args(p, &l->op->regions[r], l->arg_names.count, names,
                             (const tsr_type_t *)l->types.data, NULL))
      return false;
  if (!define_results(p, l, false)) return false;
  if (!parse_op_region(p, &l->op->regions[0], names, false)) return false;
  if (!ps_expect_word(p, "do", "'do' after the condition region")) return false;
  if (!at(p, TOK_LBRACE)) return ps_expected(p, "'{' after 'do'");
  return parse_op_region(p, &l->op->regions[1], names, true);
}

static bool parse_if(parser_t *p, tsr_region_t *region, op_line_t *l) {
  tsr_value_t *c;
  if (!ps_parse_use(p, "a condition", &c) || !ps_push_value(p, &l->operands, c))
    return false;
  if (!control_header_end(p, l, UINT32_MAX)) return false;
  if (!create_op(p, region, l, 2)) return false;
  if (!define_results(p, l, false)) return false;
  if (!parse_op_region(p, &l->op->regions[0], NULL, false)) return false;
  if (!accept_word(p, "else")) return true;
  l->op->flags |= TSR_OPF_HAS_ELSE;
  if (!at(p, TOK_LBRACE)) return ps_expected(p, "'{' after 'else'");
  return parse_op_region(p, &l->op->regions[1], NULL, false);
}

static bool parse_scoped(parser_t *p, tsr_region_t *region, op_line_t *l) {
  if (!ps_expect(p, TOK_LPAREN, "'(' after 'scoped'")) return false;
  if (!accept(p, TOK_RPAREN)) {
    for (;;) {
      if (!ps_parse_new_name(p, l, &l->arg_names, "a scoped ref name (%name)"))
        return false;
      if (!ps_expect(p, TOK_COLON, "':' and a type")) return false;
      tsr_type_t t;
      if (!ps_parse_type(p, &t) || !ps_vec_push(p, &l->arg_types, &t, sizeof t))
        return false;
      if (accept(p, TOK_COMMA)) continue;
      if (accept(p, TOK_RPAREN)) break;
      return ps_expected(p, "',' or ')' in scoped(..)");
    }
  }
  if (!control_header_end(p, l, UINT32_MAX)) return false;
  if (!create_op(p, region, l, 1)) return false;
  tsr_region_t *body = &l->op->regions[0];
  if (!ps_make_region_args(p, body, l->arg_names.count,
                           (const token_t *)l->arg_names.data,
                           (const tsr_type_t *)l->arg_types.data, NULL))
    return false;
  if (!define_results(p, l, false)) return false;
  return parse_op_region(p, body, (const token_t *)l->arg_names.data, false);
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
        if (!tok_is(&lit, "inf")) return ps_expected(p, "a number or 'inf' after '-'");
      } else if (!(at(p, TOK_INT) || at(p, TOK_FLOAT) || at(p, TOK_IDENT))) {
        return ps_expected(p, "a literal");
      }
      ps_next(p);
      if (!ps_parse_result_types(p, l)) return false;
      return ps_convert_literal(p, &lit, neg, &VEC_AT(l->types, tsr_type_t, 0),
                                &l->literal);
    }
    case TSR_SYN_INT_ATTR:
      if (!ps_parse_int(p, l->opcode == TSR_OP_IOTA ? "a dimension" : "an axis",
                        &l->ints[0]))
        return false;
      l->num_ints = 1;
      return ps_parse_result_types(p, l);
    case TSR_SYN_LOAD:
    case TSR_SYN_STORE: {
      const token_t ref_tok = p->tok;
      tsr_opview_parts_t parts = {0};
      if (!ps_parse_use(p, "a ref", &parts.ref[0])) return false;
      if (!at(p, TOK_LBRACKET)) return ps_expected(p, "'[' and indices after the ref");
      if (!ps_parse_indices(p, &ref_tok, &parts.ref[0]->type, false, m, l)) return false;
      if (info->syntax == TSR_SYN_STORE) {
        if (!ps_expect(p, TOK_COMMA, "',' and the value to store")) return false;
        if (!ps_parse_use(p, "the value to store", &parts.ref[1])) return false;
      }
      if (accept_word(p, "mask") && !ps_parse_use(p, "a mask", &parts.mask)) return false;
      return ps_lay_out(p, l, &parts) && ps_parse_result_types(p, l);
    }
    case TSR_SYN_UNARY:
    case TSR_SYN_BINARY:
    case TSR_SYN_OPERANDS:
    case TSR_SYN_YIELD:
      return ps_parse_value_list(p, l) && ps_parse_result_types(p, l);
    case TSR_SYN_PERM:
    case TSR_SYN_SLICE: {
      const token_t val = p->tok;
      if (!ps_parse_use(p, "a value", &v) || !ps_push_value(p, &l->operands, v))
        return false;
      if (info->syntax == TSR_SYN_PERM) {
        if (!ps_parse_int_list(p, "'[' and the permutation", l)) return false;
      } else {
        if (!at(p, TOK_LBRACKET)) return ps_expected(p, "'[' and indices");
        if (!ps_parse_indices(p, &val, &v->type, true, m, l)) return false;
      }
      return ps_parse_result_types(p, l);
    }
    case TSR_SYN_AXIS:
      if (!ps_parse_use(p, "a value", &v) || !ps_push_value(p, &l->operands, v))
        return false;
      if (accept(p, TOK_COMMA) && !ps_parse_value_list(p, l)) return false;
      if (!ps_expect_word(p, "axis", "',' or 'axis'")) return false;
      if (!ps_parse_int(p, "an axis", &l->ints[0])) return false;
      l->num_ints = 1;
      /* roll's optional stride: each slice along stride_axis rolled by
       * shift + its index * stride (pltpu.roll's stride, stride_axis). */
      if (info->rule == TSR_RULE_ROLL && accept_word(p, "stride")) {
        if (!ps_parse_int(p, "a stride", &l->ints[1])) return false;
        if (!ps_expect_word(p, "stride_axis", "'stride_axis'")) return false;
        if (!ps_parse_int(p, "a stride axis", &l->ints[2])) return false;
        l->num_ints = 3;
      }
      return ps_parse_result_types(p, l);
    case TSR_SYN_VALUE_INT:
      if (!ps_parse_use(p, "a value", &v) || !ps_push_value(p, &l->operands, v))
        return false;
      if (!ps_expect(p, TOK_COMMA, "',' and an integer")) return false;
      if (!ps_parse_int(p, "an integer", &l->ints[0])) return false;
      l->num_ints = 1;
      return ps_parse_result_types(p, l);
    case TSR_SYN_AXES:
      if (!ps_parse_use(p, "a value", &v) || !ps_push_value(p, &l->operands, v))
        return false;
      if (!ps_expect_word(p, "axes", "'axes'")) return false;
      return ps_parse_int_list(p, "'[' and the axes", l) && ps_parse_result_types(p, l);
    case TSR_SYN_DOT:
      if (!ps_parse_value_list(p, l)) return false;
      if (accept_word(p, "transpose_rhs")) l->flags |= TSR_OPF_TRANSPOSE_RHS;
      return ps_parse_result_types(p, l);
    case TSR_SYN_PRINT:
      if (!at(p, TOK_STRING)) return ps_expected(p, "a format string");
      if (!ps_decode_string(p, &p->tok, &l->text)) return false;
      ps_next(p);
      if (accept(p, TOK_COMMA) && !ps_parse_value_list(p, l)) return false;
      if (l->operands.count == 0 && at(p, TOK_COMMA)) return ps_expected(p, "a value");
      return true;
    case TSR_SYN_ASSERT:
      if (!ps_parse_use(p, "a condition", &v) || !ps_push_value(p, &l->operands, v))
        return false;
      if (!ps_expect(p, TOK_COMMA, "',' and a message")) return false;
      if (!at(p, TOK_STRING)) return ps_expected(p, "a message string");
      if (!ps_decode_string(p, &p->tok, &l->text)) return false;
      ps_next(p);
      return true;
    case TSR_SYN_DMA: {
      tsr_opview_parts_t parts = {0};
      if (!ps_parse_ref_view(p, "a source ref", m, l, &parts.ref[0])) return false;
      parts.count[0] = l->num_indices;
      if (!ps_expect(p, TOK_ARROW, "'->' after the source")) return false;
      if (!ps_parse_ref_view(p, "a destination ref", m, l, &parts.ref[1])) return false;
      parts.count[1] = l->num_indices - parts.count[0];
      if (!ps_expect(p, TOK_COMMA, "',' and a semaphore")) return false;
      if (!ps_parse_ref_view(p, "a semaphore", m, l, &parts.ref[2])) return false;
      parts.count[2] = l->num_indices - parts.count[0] - parts.count[1];
      if (accept_word(p, "send") && !ps_parse_ref_view(p, "a send semaphore", m, l, &parts.ref[3]))
        return false;
      if (!ps_parse_device_core(p, &parts, false)) return false;
      parts.add = accept_word(p, "add");
      return ps_lay_out(p, l, &parts) && ps_parse_result_types(p, l);
    }
    case TSR_SYN_SEM: {
      tsr_opview_parts_t parts = {0};
      if (!ps_parse_ref_view(p, "a semaphore", m, l, &parts.ref[0])) return false;
      if (l->opcode == TSR_OP_SEM_SIGNAL || l->opcode == TSR_OP_SEM_WAIT) {
        if (!ps_expect(p, TOK_COMMA, "',' and an amount")) return false;
        if (!ps_parse_use(p, "an amount", &parts.ref[1])) return false;
      }
      if (!ps_parse_device_core(p, &parts, true)) return false;
      return ps_lay_out(p, l, &parts) && ps_parse_result_types(p, l);
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
      if (!ps_parse_new_name(p, l, &l->names, "a result name (%name)")) return false;
      if (accept(p, TOK_COMMA)) continue;
      if (!ps_expect(p, TOK_EQUAL, "',' or '=' after a result name")) return false;
      break;
    }
  }
  if (!at(p, TOK_IDENT)) return ps_expected(p, "an op");
  l->mnemonic = p->tok;
  l->opcode = ps_op_lookup(p->tok.text, p->tok.len);
  if (l->opcode == TSR_OP_COUNT)
    return ps_error_at(p, p->tok.line, p->tok.col, "unknown op '%.*s'",
                       (int)TSR_MIN(p->tok.len, 40), p->tok.text);
  const tsr_op_info_t *info = &tsr_op_table[l->opcode];
  int nres = info->num_results;
  uint32_t nnames = l->names.count;
  if (nres >= 0 && nnames != (uint32_t)nres) {
    if (nres == 0)
      return ps_error_at(p, l->mnemonic.line, l->mnemonic.col, "'%s' has no results",
                         info->mnemonic);
    if (nnames == 0)
      return ps_error_at(p, l->mnemonic.line, l->mnemonic.col,
                         "'%s' has a result: write %%name = %s ...", info->mnemonic,
                         info->mnemonic);
    return ps_error_at(p, l->mnemonic.line, l->mnemonic.col,
                       "'%s' has %d result%s, found %u names", info->mnemonic, nres,
                       nres == 1 ? "" : "s", nnames);
  }
  ps_next(p);
  switch (info->syntax) {
    case TSR_SYN_FOR: if (!parse_for(p, region, l)) return false; break;
    case TSR_SYN_WHILE: if (!parse_while(p, region, l)) return false; break;
    case TSR_SYN_IF: if (!parse_if(p, region, l)) return false; break;
    case TSR_SYN_SCOPED: if (!parse_scoped(p, region, l)) return false; break;
    default:
      if (!parse_op_body(p, l) || !ps_expect_line_end(p) || !check_arity(p, l))
        return false;
      if (!create_op(p, region, l, 0)) return false;
      return define_results(p, l, true);
  }
  /* Control flow: the results become visible after the regions. */
  for (uint32_t i = 0; i < l->names.count; i++) {
    symbol_t *s = ps_lookup_tok(p, &VEC_AT(l->names, token_t, i));
    if (s) s->visible = true;
  }
  return ps_expect_line_end(p);
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
      symbol_t *s = ps_lookup_tok(p, t);
      if (s && l.op && s->value == l.op->results[i])
        s->visible = true;
      else if (!s && !ps_define_tok(p, t, NULL, true))
        break;
    }
    ps_skip_line(p);
  }
  ps_op_line_free(p, &l);
}
