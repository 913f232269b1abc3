/* What goes inside an op line: types, literals, strings, views (indices)
 * and value lists, and the layout of memory, DMA and semaphore ops through
 * the one encoder of ir/opview.h. */
#include "ir/parse_internal.h"

/* ---- Types ----------------------------------------------------------------- */

/* "[d0, d1, ..]" (current token '['): 1..TSR_MAX_RANK dims, each >= 1.
 * *out_end: just after the ']'. */
static bool parse_dims(parser_t *p, uint32_t *out_rank, int64_t *dims, const char **out_end) {
  ps_next(p);
  uint32_t n = 0;
  for (;;) {
    token_t t = p->tok;
    int64_t d;
    if (!ps_parse_int(p, "a dimension", &d)) return false;
    if (d < 1)
      return ps_error_at(p, t.line, t.col, "dimension must be >= 1, found %lld",
                         (long long)d);
    if (n == TSR_MAX_RANK)
      return ps_error_at(p, t.line, t.col, "more than %d dimensions", TSR_MAX_RANK);
    dims[n++] = d;
    if (accept(p, TOK_COMMA)) continue;
    *out_end = p->tok.text + 1;
    if (accept(p, TOK_RBRACKET)) break;
    return ps_expected(p, "',' or ']' after a dimension");
  }
  *out_rank = n;
  return true;
}

static bool dtype_of(const token_t *t, tsr_dtype_t *out) {
  return t->kind == TOK_IDENT && ps_dtype_lookup(t->text, t->len, out);
}

/* DTYPE or DTYPE[dims]: a scalar or block type. */
bool ps_parse_value_type(parser_t *p, const char *what, tsr_type_t *out) {
  const token_t first = p->tok;
  /* The same bytes as a block type read before are the same tokens up to
   * its ']' (which ends a token whatever follows), and that type was read
   * without error: take it, and lex on from after the ']'. */
  const size_t left = (size_t)(p->end - first.text);
  for (uint32_t i = 0; first.kind == TOK_IDENT && i < TSR_ARRAY_SIZE(p->recent_types); i++) {
    size_t n = p->recent_types[i].len;
    if (n && left >= n && memcmp(first.text, p->recent_types[i].text, n) == 0) {
      *out = p->recent_types[i].type;
      p->pos = first.text + n;
      ps_next(p);
      return true;
    }
  }
  tsr_dtype_t dtype;
  if (!dtype_of(&p->tok, &dtype)) return ps_expected(p, what);
  ps_next(p);
  if (!at(p, TOK_LBRACKET)) {
    *out = tsr_type_scalar(dtype);
    return true;
  }
  uint32_t rank;
  int64_t dims[TSR_MAX_RANK];
  const char *end = NULL;
  if (!parse_dims(p, &rank, dims, &end)) return false;
  *out = tsr_type_vector(dtype, rank, dims);
  uint32_t slot = p->next_recent_type++ % TSR_ARRAY_SIZE(p->recent_types);
  p->recent_types[slot].text = first.text;
  p->recent_types[slot].len = (size_t)(end - first.text);
  p->recent_types[slot].type = *out;
  return true;
}

/* Any type: f32, f32[8, 128], vmem f32[8, 128], smem i32, sem[4], dma_sem. */
bool ps_parse_type(parser_t *p, tsr_type_t *out) {
  const token_t t = p->tok;
  if (t.kind != TOK_IDENT) return ps_expected(p, "a type");
  uint32_t rank = 0;
  int64_t dims[TSR_MAX_RANK];
  tsr_space_t space;
  tsr_dtype_t dtype;
  /* Most types are value types: their dtype names are no space or
   * semaphore names, so looking them up first changes nothing else. */
  if (dtype_of(&t, &dtype)) return ps_parse_value_type(p, "a type", out);
  if (tsr_space_from_name(t.text, t.len, &space)) {
    ps_next(p);
    if (!dtype_of(&p->tok, &dtype))
      return ps_expected(p, "an element type after the memory space");
    ps_next(p);
    const char *end;
    if (at(p, TOK_LBRACKET) && !parse_dims(p, &rank, dims, &end)) return false;
    *out = tsr_type_ref(space, dtype, rank, dims);
    return true;
  }
  if (tok_is(&t, "sem") || tok_is(&t, "dma_sem")) {
    ps_next(p);
    const char *end;
    if (at(p, TOK_LBRACKET) && !parse_dims(p, &rank, dims, &end)) return false;
    *out = tsr_type_sem(tok_is(&t, "sem") ? TSR_SEM_REGULAR : TSR_SEM_DMA, rank,
                        dims);
    return true;
  }
  return ps_error_at(p, t.line, t.col, "unknown type '%.*s'", (int)TSR_MIN(t.len, 40),
                     t.text);
}

/* ": T, T, .." for an op with results (exactly one type per result name). */
bool ps_parse_result_types(parser_t *p, op_line_t *l) {
  uint32_t n = l->names.count;
  const token_t colon = p->tok;
  if (n == 0) {
    if (colon.kind != TOK_COLON) return true;
    return ps_error_at(p, colon.line, colon.col, "'%s' has no results, found ':'",
                       tsr_op_table[l->opcode].mnemonic);
  }
  if (!ps_expect(p, TOK_COLON, "':' and the result type")) return false;
  for (;;) {
    tsr_type_t t;
    if (!ps_parse_type(p, &t)) return false;
    if (!ps_vec_push(p, &l->types, &t, sizeof t)) return false;
    if (!accept(p, TOK_COMMA)) break;
  }
  if (l->types.count != n)
    return ps_error_at(p, colon.line, colon.col,
                       "expected %u result type%s, found %u", n, n == 1 ? "" : "s",
                       l->types.count);
  return true;
}

/* ---- Literals ---------------------------------------------------------------- */


/* Converts the literal token `t` (neg: it was "-inf") for dtype. */
bool ps_convert_literal(parser_t *p, const token_t *t, bool neg,
                        const tsr_type_t *type, tsr_literal_t *out) {
  char buf[64];
  if (type->kind == TSR_TYPE_REF || type->kind == TSR_TYPE_SEM)
    return ps_error_at(p, t->line, t->col,
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
          return ps_error_at(p, t->line, t->col, "numeric literal too long");
        memcpy(text, t->text, t->len);
        text[t->len] = 0;
        v = strtod(text, NULL);
      } else {
        return ps_error_at(p, t->line, t->col, "expected a float literal for %s, found %s",
                           dname, ps_describe(t, buf, sizeof buf));
      }
      double r = tsr_literal_round(v, dtype);
      /* f8e4m3fn has no infinity: what overflows it is NaN */
      if ((isinf(r) && !isinf(v)) || (isnan(r) && !isnan(v)))
        return ps_error_at(p, t->line, t->col,
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
      return ps_error_at(p, t->line, t->col, "expected 'true' or 'false' for i1, found %s",
                         ps_describe(t, buf, sizeof buf));
    case TSR_CLASS_SINT:
    case TSR_CLASS_UINT: {
      if (t->kind != TOK_INT || neg)
        return ps_error_at(p, t->line, t->col,
                           "expected an integer literal for %s, found %s", dname,
                           ps_describe(t, buf, sizeof buf));
      int64_t v;
      bool fits = ps_int_value(t, &v);
      int bits = (int)tsr_dtype_bits(dtype);
      int64_t lo, hi;
      if (tsr_dtype_class(dtype) == TSR_CLASS_SINT) {
        lo = -((int64_t)1 << (bits - 1));
        hi = ((int64_t)1 << (bits - 1)) - 1;
      } else {
        lo = 0;
        hi = (int64_t)(((uint64_t)1 << bits) - 1);
      }
      if (!fits || v < lo || v > hi)
        return ps_error_at(p, t->line, t->col,
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
bool ps_decode_string(parser_t *p, const token_t *t, const char **out) {
  char *s = tsr_arena_alloc(&p->module->arena, t->len);
  if (!s) return ps_oom(p);
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
      return ps_error_at(p, t.line, t.col, "'%s' takes static indices only, found '%.*s'",
                         opname, (int)TSR_MIN(t.len, 40), t.text);
  }
  if (t.kind == TOK_VALUE) {
    tsr_value_t *v;
    if (!ps_parse_use(p, "an index", &v)) return false;
    ix->kind = TSR_INDEX_POINT;
    ix->operand = (int32_t)l->dyn.count;
    ix->size = 1;
    return ps_push_value(p, &l->dyn, v);
  }
  if (tok_is(&t, "ds")) {
    ps_next(p);
    if (!ps_expect(p, TOK_LPAREN, "'(' after 'ds'")) return false;
    ix->kind = TSR_INDEX_DS;
    if (at(p, TOK_VALUE)) {
      tsr_value_t *v;
      if (!ps_parse_use(p, "a start", &v)) return false;
      ix->operand = (int32_t)l->dyn.count;
      if (!ps_push_value(p, &l->dyn, v)) return false;
    } else if (!ps_parse_int(p, "a start (%value or integer) in ds(..)", &ix->start)) {
      return false;
    }
    if (!ps_expect(p, TOK_COMMA, "',' and a size in ds(..)")) return false;
    bool dynamic_size = at(p, TOK_VALUE);
    if (dynamic_size) {
      /* A size the run reads (DMA views only; the verifier says where). */
      tsr_value_t *v;
      if (!ps_parse_use(p, "a size", &v)) return false;
      ix->kind = TSR_INDEX_DSIZE;
      ix->stop = (int64_t)l->dyn.count;
      if (!ps_push_value(p, &l->dyn, v)) return false;
    } else if (!ps_parse_int(p, "a size (%value or integer) in ds(..)", &ix->size)) {
      return false;
    }
    if (accept(p, TOK_COMMA)) {
      const token_t st = p->tok;
      if (!ps_parse_int(p, "a stride in ds(..)", &ix->stride)) return false;
      if (ix->stride < 1)
        return ps_error_at(p, st.line, st.col, "stride must be >= 1, found %lld",
                           (long long)ix->stride);
    }
    if (dynamic_size) /* the bound: every element of the dimension by stride */
      ix->size = type && dim < type->rank ? (type->dims[dim] - 1) / ix->stride + 1 : 0;
    return ps_expect(p, TOK_RPAREN, "',' or ')' in ds(..)");
  }
  /* Static: INT, ':', or a range [a]:[b][:s]. */
  bool has_start = false, has_stop = false, has_stride = false;
  if (t.kind == TOK_INT) {
    if (!ps_parse_int(p, "an index", &ix->start)) return false;
    has_start = true;
    if (!at(p, TOK_COLON)) {
      ix->kind = TSR_INDEX_POINT;
      ix->size = 1;
      return true;
    }
  }
  if (!accept(p, TOK_COLON))
    return ps_expected(p, "an index (':', an integer, a %value or ds(..))");
  if (at(p, TOK_INT)) {
    if (!ps_parse_int(p, "a slice end", &ix->stop)) return false;
    has_stop = true;
  }
  if (accept(p, TOK_COLON)) {
    const token_t st = p->tok;
    if (!ps_parse_int(p, "a stride after ':'", &ix->stride)) return false;
    if (ix->stride < 1)
      return ps_error_at(p, st.line, st.col, "stride must be >= 1, found %lld",
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
      return ps_error_at(p, t.line, t.col,
                         "an open-ended slice needs the size of dimension %u, but "
                         "%.*s has rank %u",
                         dim, (int)ref->len, ref->text, type ? type->rank : 0);
    ix->stop = type->dims[dim];
  }
  int64_t span;
  if (__builtin_sub_overflow(ix->stop, ix->start, &span))
    return ps_error_at(p, t.line, t.col, "slice bounds overflow");
  ix->size = span <= 0 ? 0 : span / ix->stride + (span % ix->stride != 0);
  return true;
}

/* "[idx, ..]" (current token '['); at most TSR_MAX_RANK indices, appended to
 * l->indices. Dynamic starts go to l->dyn, their `operand` is the position
 * there (callers rebase it). */
bool ps_parse_indices(parser_t *p, const token_t *ref, const tsr_type_t *type,
                      bool static_only, const char *opname, op_line_t *l) {
  ps_next(p);
  if (accept(p, TOK_RBRACKET)) return true;
  for (uint32_t dim = 0;; dim++) {
    if (dim == TSR_MAX_RANK)
      return ps_error_at(p, p->tok.line, p->tok.col, "more than %d indices",
                         TSR_MAX_RANK);
    tsr_index_t ix;
    if (!parse_index(p, ref, type, dim, static_only, opname, l, &ix)) return false;
    l->indices[l->num_indices++] = ix;
    if (accept(p, TOK_COMMA)) continue;
    if (accept(p, TOK_RBRACKET)) return true;
    return ps_expected(p, "',' or ']' after index");
  }
}

/* "%ref[idx, ..]" with optional brackets (DMA and semaphore ops). */
bool ps_parse_ref_view(parser_t *p, const char *what, const char *opname,
                       op_line_t *l, tsr_value_t **out) {
  const token_t ref = p->tok;
  if (!ps_parse_use(p, what, out)) return false;
  if (!at(p, TOK_LBRACKET)) return true;
  return ps_parse_indices(p, &ref, &(*out)->type, false, opname, l);
}

/* "[n, ..]": up to TSR_MAX_RANK integers into l->ints. */
bool ps_parse_int_list(parser_t *p, const char *what, op_line_t *l) {
  if (!ps_expect(p, TOK_LBRACKET, what)) return false;
  if (accept(p, TOK_RBRACKET)) return true;
  for (;;) {
    if (l->num_ints == TSR_MAX_RANK)
      return ps_error_at(p, p->tok.line, p->tok.col, "more than %d entries",
                         TSR_MAX_RANK);
    if (!ps_parse_int(p, "an integer", &l->ints[l->num_ints])) return false;
    l->num_ints++;
    if (accept(p, TOK_COMMA)) continue;
    if (accept(p, TOK_RBRACKET)) return true;
    return ps_expected(p, "',' or ']' after an integer");
  }
}

/* %a, %b, .. (possibly empty) appended to l->operands. */
bool ps_parse_value_list(parser_t *p, op_line_t *l) {
  if (!at(p, TOK_VALUE)) return true;
  for (;;) {
    tsr_value_t *v;
    if (!ps_parse_use(p, "a value (%name)", &v)) return false;
    if (!ps_push_value(p, &l->operands, v)) return false;
    if (!accept(p, TOK_COMMA)) return true;
  }
}


/* ---- Building memory, DMA and semaphore ops ------------------------------------ */

/* Optional "device %d" / "core %c" suffixes of DMA and semaphore ops. */
bool ps_parse_device_core(parser_t *p, tsr_opview_parts_t *parts, bool allow_core) {
  if (accept_word(p, "device") && !ps_parse_use(p, "a device id", &parts->device)) return false;
  if (allow_core && accept_word(p, "core") && !ps_parse_use(p, "a core index", &parts->core))
    return false;
  return true;
}

/* The operands, ints and flags of a memory, DMA or semaphore op from its
 * parts and the line's indices and dynamic starts, through the one encoder
 * of those layouts (tsr_opview_layout). */
bool ps_lay_out(parser_t *p, op_line_t *l, tsr_opview_parts_t *parts) {
  tsr_value_t *operands[TSR_OPVIEW_MAX_OPERANDS];
  parts->indices = l->indices;
  parts->num_indices = l->num_indices;
  parts->starts = (tsr_value_t *const *)l->dyn.data;
  parts->num_starts = l->dyn.count;
  uint32_t n = tsr_opview_layout(l->opcode, parts, operands, l->ints, &l->num_ints, &l->flags);
  for (uint32_t i = 0; i < n; i++)
    if (!ps_push_value(p, &l->operands, operands[i])) return false;
  return true;
}
