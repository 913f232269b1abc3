/* Parser of the kernel IR text format (docs/ir.md): a hand-written lexer and
 * a recursive-descent parser that builds modules through the construction
 * functions of ir/ir.h, so parsed and built modules have the same shape.
 * This file is its driver (modules and kernels); the lexer, symbols,
 * values, op lines and kernel headers are the other ir/parse_*.c files, in
 * the layering of ir/parse_internal.h.
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
#include "ir/parse_internal.h"

static void parse_kernel(parser_t *p) {
  const token_t kw = p->tok;
  ps_next(p);
  token_t name = p->tok;
  bool ok = true;
  if (name.kind == TOK_KERNEL) {
    symbol_t *o = NULL;
    HASH_FIND(hh, p->kernel_names, name.text + 1, name.len - 1, o);
    if (o) {
      ok = ps_error_at(p, name.line, name.col,
                       "redefinition of kernel %.*s (first defined at %u:%u)",
                       (int)name.len, name.text, o->line, o->col);
    } else if (!ps_table_add(p, &p->kernel_names, name.text + 1, name.len - 1,
                             name.line, name.col)) {
      return;
    }
    ps_next(p);
    if (ok) ok = ps_expect_line_end(p);
  } else {
    ok = ps_expected(p, "a kernel name (@name) after 'kernel'");
    name = kw;
    name.text = "@";
    name.len = 1;
  }
  if (!ok) ps_skip_line(p);
  tsr_loc_t loc = {p->file, name.line, name.col};
  tsr_kernel_t *k;
  if (!ps_check(p, tsr_kernel_create(p->module, name.text + 1, name.len - 1, loc, &k)))
    return;
  p->kernel = k;
  p->table = &p->tables[0];
  scope_t scope;
  p->scope = NULL;
  ps_scope_open(p, &scope);
  if (ps_parse_header(p)) {
    p->depth = 0;
    if (ps_parse_block(p, &k->body) && !ps_expect_line_end(p)) ps_skip_line(p);
  }
  ps_scope_close(p);
  ps_symtab_clear(p->table);
  p->kernel = NULL;
}

static void parse_module(parser_t *p) {
  ps_next(p);
  for (;;) {
    while (at(p, TOK_NEWLINE)) ps_next(p);
    if (p->fatal || at(p, TOK_EOF)) return;
    if (at_word(p, "kernel")) {
      parse_kernel(p);
    } else {
      ps_expected(p, "'kernel'");
      ps_skip_line(p);
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
  ps_free_spares(&p);
  ps_symtab_clear(&p.tables[0]);
  ps_symtab_clear(&p.tables[1]);
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
