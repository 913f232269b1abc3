/* Unit tests of the IR parser and printer (ir/parse.c, ir/print.c):
 * literals, index forms, op layouts, control-flow regions, names and scopes,
 * index maps, diagnostics and recovery, canonical printing, the builder
 * printing like the parser, allocation failure and hostile input. */
#include <dirent.h>
#include <math.h>

#include "base/base_internal.h"
#include "ir/ir.h"
#include "ir/opview.h"
#include "tests/harness.h"

/* ---- Helpers ---------------------------------------------------------------- */

static tsr_module_t *parse_ok(const char *text) {
  tsr_module_t *m = NULL;
  tsr_status_t s = tsr_ir_parse("t.tsr", text, strlen(text), &m);
  if (s) {
    TSR_FAIL_AT("parse failed:\n%s\n--- input\n%s", tsr_status_message(s), text);
    tsr_status_free(s);
    return NULL;
  }
  return m;
}

/* The parse diagnostics of `text` (malloc'd), or NULL if it parses. */
static char *parse_errors(const char *text) {
  tsr_module_t *m = (tsr_module_t *)0x1; /* must stay untouched on failure */
  tsr_status_t s = tsr_ir_parse("t.tsr", text, strlen(text), &m);
  if (!s) {
    tsr_module_destroy(m);
    return NULL;
  }
  if (m != (tsr_module_t *)0x1) TSR_FAIL_AT("out_module written on failure");
  if (tsr_status_code(s) != TSR_PARSE_ERROR)
    TSR_FAIL_AT("expected a parse error, got %s",
                tsr_status_code_name(tsr_status_code(s)));
  char *msg = strdup(tsr_status_message(s));
  tsr_status_free(s);
  return msg;
}

#define CHECK_ERRORS(text, expected)                                           \
  do {                                                                         \
    char *msg_ = parse_errors(text);                                           \
    TSR_CHECK_EQ_STR(msg_, expected);                                          \
    free(msg_);                                                                \
  } while (0)

static char *print_text(const tsr_module_t *m) {
  tsr_strbuf_t sb;
  tsr_strbuf_initialize(&sb);
  tsr_ir_print_module(&sb, m);
  char *t = tsr_strbuf_take(&sb);
  return t ? t : tsr_strndup("", 0);
}

/* Parses and prints `text`; checks the result is `expected` and that it
 * is a fixed point (parse -> print gives it again). */
static void check_prints_as(const char *text, const char *expected) {
  tsr_module_t *m = parse_ok(text);
  if (!m) return;
  char *once = print_text(m);
  TSR_CHECK_EQ_STR(once, expected);
  tsr_module_destroy(m);
  m = parse_ok(once);
  if (m) {
    char *twice = print_text(m);
    TSR_CHECK_EQ_STR(twice, once);
    tsr_free(twice);
    tsr_module_destroy(m);
  }
  tsr_free(once);
}

/* The n-th op of the kernel body (0-based). */
static tsr_op_t *body_op(tsr_module_t *m, uint32_t n) {
  tsr_op_t *op = m->kernels[0]->body.first;
  while (op && n--) op = op->next;
  return op;
}

/* A kernel text with a standard header around `body`. */
#define KERNEL(body)                                                           \
  "kernel @k\n"                                                                \
  "  grid(2) semantics(parallel)\n"                                            \
  "  prefetch %p: i32[4]\n"                                                    \
  "  in %x: f32[16, 128] vmem block[8, 128] map(%g) -> (%g, 0)\n"              \
  "  out %y: f32[16, 128] vmem block[8, 128] map(%g) -> (%g, 0)\n"             \
  "  scratch %sem: sem[2]\n"                                                   \
  "  scratch %dsem: dma_sem[2]\n"                                              \
  "  scratch %h: vmem f32[2, 8, 128]\n"                                        \
  "{\n" body "}\n"

/* ---- Literals --------------------------------------------------------------- */

static double const_f(tsr_module_t *m, uint32_t n) { return body_op(m, n)->literal.f; }
static int64_t const_i(tsr_module_t *m, uint32_t n) { return body_op(m, n)->literal.i; }

TSR_TEST(float_literals_round_to_dtype) {
  tsr_module_t *m = parse_ok(
      "kernel @k\n{\n"
      "  %a = const 0.1 : f32\n"
      "  %b = const 0.1 : bf16\n"
      "  %c = const 0.1 : f16\n"
      "  %d = const -2e-3 : f32\n"
      "  %e = const -inf : f32\n"
      "  %f = const nan : f16\n"
      "  %g = const 3 : f32\n"
      "  %h = const 0x10 : f32\n"
      "  %i = const -0.0 : f32\n"
      "  %j = const 1e-50 : f32\n"
      "}\n");
  if (!m) return;
  TSR_CHECK(const_f(m, 0) == (double)0.1f);
  TSR_CHECK(const_f(m, 1) == (double)tsr_bf16_to_f32(tsr_f32_to_bf16(0.1f)));
  TSR_CHECK(const_f(m, 1) != (double)0.1f);
  TSR_CHECK(const_f(m, 2) == (double)tsr_f16_to_f32(tsr_f32_to_f16(0.1f)));
  TSR_CHECK(const_f(m, 3) == (double)-2e-3f);
  TSR_CHECK(isinf(const_f(m, 4)) && const_f(m, 4) < 0);
  TSR_CHECK(isnan(const_f(m, 5)));
  TSR_CHECK(const_f(m, 6) == 3.0);
  TSR_CHECK(const_f(m, 7) == 16.0);
  TSR_CHECK(const_f(m, 8) == 0.0 && signbit(const_f(m, 8)));
  TSR_CHECK(const_f(m, 9) == 0.0); /* underflow is not an error */
  tsr_module_destroy(m);
}

TSR_TEST(integer_literals_and_ranges) {
  tsr_module_t *m = parse_ok(
      "kernel @k\n{\n"
      "  %a = const 0x7fffffff : i32\n"
      "  %b = const -2147483648 : i32\n"
      "  %c = const 4294967295 : u32\n"
      "  %d = const -0x80 : i8\n"
      "  %e = const 0xFF : u8\n"
      "  %f = const true : i1\n"
      "  %g = const false : i1[4]\n"
      "  %h = const -32768 : i16\n"
      "}\n");
  if (!m) return;
  TSR_CHECK_EQ_INT(const_i(m, 0), 2147483647);
  TSR_CHECK_EQ_INT(const_i(m, 1), -2147483648LL);
  TSR_CHECK_EQ_INT(const_i(m, 2), 4294967295LL);
  TSR_CHECK_EQ_INT(const_i(m, 3), -128);
  TSR_CHECK_EQ_INT(const_i(m, 4), 255);
  TSR_CHECK_EQ_INT(const_i(m, 5), 1);
  TSR_CHECK_EQ_INT(const_i(m, 6), 0);
  TSR_CHECK_EQ_INT(body_op(m, 6)->results[0]->type.kind, TSR_TYPE_VECTOR);
  TSR_CHECK_EQ_INT(const_i(m, 7), -32768);
  tsr_module_destroy(m);
  CHECK_ERRORS("kernel @k\n{\n  %a = const 2147483648 : i32\n}\n",
               "t.tsr:3:14: error: integer literal 2147483648 is out of range for "
               "i32 (-2147483648 to 2147483647)");
  CHECK_ERRORS("kernel @k\n{\n  %a = const -1 : u32\n}\n",
               "t.tsr:3:14: error: integer literal -1 is out of range for u32 (0 to "
               "4294967295)");
  CHECK_ERRORS("kernel @k\n{\n  %a = const 0x10000000000000000 : i32\n}\n",
               "t.tsr:3:14: error: integer literal 0x10000000000000000 is out of range "
               "for i32 (-2147483648 to 2147483647)");
  CHECK_ERRORS("kernel @k\n{\n  %a = const 3.4028236e38 : f32\n}\n",
               "t.tsr:3:14: error: float literal 3.4028236e38 is out of range for f32");
  CHECK_ERRORS("kernel @k\n{\n  %a = const inf : i32\n}\n",
               "t.tsr:3:14: error: expected an integer literal for i32, found 'inf'");
}

TSR_TEST(float_printing_is_shortest) {
  check_prints_as("kernel @k\n{\n"
                  "  %a = const 1 : f32\n"
                  "  %b = const 1.50000 : f32\n"
                  "  %c = const 100 : f32\n"
                  "  %d = const 0.1 : bf16\n"
                  "  %e = const 0.30000001 : f32\n"
                  "  %f = const 2e-3 : f16\n"
                  "  %g = const -0 : f32\n"
                  "  %h = const 16777217 : f32\n"
                  "  %i = const 65504 : f16\n"
                  "  %j = const 0x7f : i8\n"
                  "}\n",
                  "kernel @k\n{\n"
                  "  %a = const 1.0 : f32\n"
                  "  %b = const 1.5 : f32\n"
                  "  %c = const 1e+02 : f32\n"
                  "  %d = const 0.1 : bf16\n"
                  "  %e = const 0.3 : f32\n"
                  "  %f = const 0.002 : f16\n"
                  "  %g = const -0.0 : f32\n"
                  "  %h = const 16777216.0 : f32\n"
                  "  %i = const 6.55e+04 : f16\n"
                  "  %j = const 127 : i8\n"
                  "}\n");
}

/* ---- Views ------------------------------------------------------------------ */

static void check_index(const tsr_index_t *ix, int kind, int32_t operand,
                        int64_t start, int64_t stop, int64_t size, int64_t stride) {
  TSR_CHECK_EQ_INT(ix->kind, kind);
  TSR_CHECK_EQ_INT(ix->operand, operand);
  TSR_CHECK_EQ_INT(ix->start, start);
  TSR_CHECK_EQ_INT(ix->stop, stop);
  TSR_CHECK_EQ_INT(ix->size, size);
  TSR_CHECK_EQ_INT(ix->stride, stride);
}

TSR_TEST(index_forms) {
  tsr_module_t *m = parse_ok(KERNEL(
      "  %i = program_id 0 : i32\n"
      "  %a = load %x[:, 5] : f32[8]\n"
      "  %b = load %x[%i, 2:10] : f32[8]\n"
      "  %c = load %x[1:7:2, :64] : f32[3, 64]\n"
      "  %d = load %x[4:, ::32] : f32[4, 4]\n"
      "  %e = load %x[ds(%i, 4), ds(3, 8, 4)] : f32[4, 8]\n"
      "  %f = load %x[0:8:3, 120:] : f32[3, 8]\n"
      "  %v = load %h[1, :, :] : f32[8, 128]\n"
      "  %s = slice %v [0:4, 127] : f32[4]\n"));
  if (!m) return;
  tsr_op_t *a = body_op(m, 1), *b = body_op(m, 2), *c = body_op(m, 3),
           *d = body_op(m, 4), *e = body_op(m, 5), *f = body_op(m, 6),
           *s = body_op(m, 8);
  check_index(&a->indices[0], TSR_INDEX_FULL, -1, 0, 8, 8, 1);
  check_index(&a->indices[1], TSR_INDEX_POINT, -1, 5, 0, 1, 1);
  TSR_CHECK_EQ_INT(a->num_operands, 1);
  check_index(&b->indices[0], TSR_INDEX_POINT, 1, 0, 0, 1, 1);
  check_index(&b->indices[1], TSR_INDEX_SLICE, -1, 2, 10, 8, 1);
  TSR_CHECK(b->operands[1] == body_op(m, 0)->results[0]);
  check_index(&c->indices[0], TSR_INDEX_SLICE, -1, 1, 7, 3, 2);
  check_index(&c->indices[1], TSR_INDEX_SLICE, -1, 0, 64, 64, 1);
  check_index(&d->indices[0], TSR_INDEX_SLICE, -1, 4, 8, 4, 1);
  check_index(&d->indices[1], TSR_INDEX_SLICE, -1, 0, 128, 4, 32);
  check_index(&e->indices[0], TSR_INDEX_DS, 1, 0, 0, 4, 1);
  check_index(&e->indices[1], TSR_INDEX_DS, -1, 3, 0, 8, 4);
  check_index(&f->indices[0], TSR_INDEX_SLICE, -1, 0, 8, 3, 3);
  check_index(&f->indices[1], TSR_INDEX_SLICE, -1, 120, 128, 8, 1);
  TSR_CHECK_EQ_INT(s->num_operands, 1);
  check_index(&s->indices[1], TSR_INDEX_POINT, -1, 127, 0, 1, 1);
  tsr_module_destroy(m);
  /* Open ends are filled in, so the canonical form spells them out. */
  check_prints_as(KERNEL("  %d = load %x[4:, ::32] : f32[4, 4]\n"
                         "  %i = program_id 0 : i32\n"
                         "  %e = load %x[ds(%i, 4, 1), ds(3, 8, 4)] : f32[4, 8]\n"),
                  KERNEL("  %d = load %x[4:8, 0:128:32] : f32[4, 4]\n"
                         "  %i = program_id 0 : i32\n"
                         "  %e = load %x[ds(%i, 4), ds(3, 8, 4)] : f32[4, 8]\n"));
}

TSR_TEST(load_store_operand_layout) {
  tsr_module_t *m = parse_ok(KERNEL(
      "  %i = program_id 0 : i32\n"
      "  %j = const 3 : i32\n"
      "  %v = load %x[:, :] : f32[8, 128]\n"
      "  %z = const 0.0 : f32\n"
      "  %m = gt %v, %z : i1[8, 128]\n"
      "  %w = load %h[%i, :, ds(%j, 128)] mask %m : f32[8, 128]\n"
      "  store %h[%j, ds(%i, 8), :], %w mask %m\n"
      "  store %y[%i, %j], %z\n"));
  if (!m) return;
  tsr_value_t *i = body_op(m, 0)->results[0], *j = body_op(m, 1)->results[0],
              *mask = body_op(m, 4)->results[0], *w = body_op(m, 5)->results[0],
              *z = body_op(m, 3)->results[0];
  tsr_op_t *load = body_op(m, 5), *store = body_op(m, 6), *store2 = body_op(m, 7);
  TSR_CHECK_EQ_INT(load->num_operands, 4);
  TSR_CHECK(load->operands[0] == m->kernels[0]->decls[5].ref);
  TSR_CHECK(load->operands[1] == i && load->operands[2] == j);
  TSR_CHECK(load->operands[3] == mask);
  TSR_CHECK(load->flags & TSR_OPF_MASK);
  TSR_CHECK_EQ_INT(load->indices[0].operand, 1);
  TSR_CHECK_EQ_INT(load->indices[2].operand, 2);
  TSR_CHECK_EQ_INT(store->num_operands, 5);
  TSR_CHECK(store->operands[1] == w && store->operands[2] == j &&
            store->operands[3] == i && store->operands[4] == mask);
  TSR_CHECK_EQ_INT(store->indices[0].operand, 2);
  TSR_CHECK_EQ_INT(store->indices[1].operand, 3);
  TSR_CHECK(store->flags & TSR_OPF_MASK);
  TSR_CHECK(store2->operands[1] == z && store2->operands[2] == i);
  TSR_CHECK_EQ_INT(store2->indices[1].operand, 3);
  TSR_CHECK(!(store2->flags & TSR_OPF_MASK));
  tsr_module_destroy(m);
}

/* ---- Op syntaxes -------------------------------------------------------------- */

TSR_TEST(attribute_ops) {
  tsr_module_t *m = parse_ok(KERNEL(
      "  %a = load %x[:, :] : f32[8, 128]\n"
      "  %n = num_programs 0 : i32\n"
      "  %io = iota 1 : i32[8, 128]\n"
      "  %t = transpose %a [1, 0] : f32[128, 8]\n"
      "  %c = concatenate %a, %a, %a axis 1 : f32[8, 384]\n"
      "  %r = reduce_sum %a axes [0, 1] : f32\n"
      "  %am = argmax %a axis 0 : i32[128]\n"
      "  %d = dot %a, %a, %t transpose_rhs : f32[8, 8]\n"
      "  %e = dot %a, %t : f32[8, 8]\n"
      "  print \"a {} \\\"b\\\"\\t\\\\\\n\", %n, %n\n"
      "  assert %n, \"oops\"\n"));
  if (!m) return;
  TSR_CHECK_EQ_INT(body_op(m, 1)->ints[0], 0);
  TSR_CHECK_EQ_INT(body_op(m, 2)->ints[0], 1);
  tsr_op_t *t = body_op(m, 3), *c = body_op(m, 4), *r = body_op(m, 5),
           *d = body_op(m, 7), *e = body_op(m, 8), *pr = body_op(m, 9),
           *as = body_op(m, 10);
  TSR_CHECK_EQ_INT(t->num_ints, 2);
  TSR_CHECK(t->ints[0] == 1 && t->ints[1] == 0);
  TSR_CHECK_EQ_INT(c->num_operands, 3);
  TSR_CHECK_EQ_INT(c->num_ints, 1);
  TSR_CHECK_EQ_INT(c->ints[0], 1);
  TSR_CHECK_EQ_INT(r->num_ints, 2);
  TSR_CHECK_EQ_INT(r->results[0]->type.kind, TSR_TYPE_SCALAR);
  TSR_CHECK_EQ_INT(body_op(m, 6)->ints[0], 0);
  TSR_CHECK_EQ_INT(d->num_operands, 3);
  TSR_CHECK(d->flags & TSR_OPF_TRANSPOSE_RHS);
  TSR_CHECK_EQ_INT(e->num_operands, 2);
  TSR_CHECK(!(e->flags & TSR_OPF_TRANSPOSE_RHS));
  TSR_CHECK_EQ_STR(pr->text, "a {} \"b\"\t\\\n");
  TSR_CHECK_EQ_INT(pr->num_operands, 2);
  TSR_CHECK_EQ_INT(as->num_operands, 1);
  TSR_CHECK_EQ_STR(as->text, "oops");
  tsr_module_destroy(m);
}

/* ds(START, %n): a size the run reads. Its operand follows the index's
 * start (stop holds its position); size is the bound the dimension allows
 * by the stride (docs/ir.md, "Operand layouts"). */
TSR_TEST(dma_dynamic_size_layout) {
  tsr_module_t *m = parse_ok(KERNEL(
      "  %i = program_id 0 : i32\n"
      "  %n = const 3 : i32\n"
      "  dma_start %x[ds(%i, %n, 2), :] -> %h[1, ds(4, %n), :], %dsem[0]\n"
      "  dma_wait %x[ds(%i, %n, 2), :] -> %h[1, ds(4, %n), :], %dsem[0]\n"));
  if (!m) return;
  tsr_value_t *i = body_op(m, 0)->results[0], *n = body_op(m, 1)->results[0];
  tsr_op_t *ds = body_op(m, 2);
  TSR_CHECK_EQ_INT(ds->num_operands, 6); /* src dst sem i n (src) n (dst) */
  TSR_CHECK(ds->operands[3] == i && ds->operands[4] == n && ds->operands[5] == n);
  check_index(&ds->indices[0], TSR_INDEX_DSIZE, 3, 0, 4, 4, 2);
  check_index(&ds->indices[3], TSR_INDEX_DSIZE, -1, 4, 5, 8, 1);
  char *text = print_text(m);
  TSR_CHECK(strstr(text, "  dma_start %x[ds(%i, %n, 2), :] -> %h[1, ds(4, %n), :], %dsem[0]\n") !=
            NULL);
  tsr_free(text);
  tsr_module_destroy(m);
}

TSR_TEST(dma_and_semaphore_layout) {
  tsr_module_t *m = parse_ok(KERNEL(
      "  %i = program_id 0 : i32\n"
      "  %one = const 1 : i32\n"
      "  dma_start %x[ds(%i, 4), :] -> %h[%one, 0:4, :], %dsem[%i] device %one add\n"
      "  dma_wait %h -> %h, %dsem[0]\n"
      "  sem_signal %sem[%i], %one device %i core %one\n"
      "  sem_wait %sem[1], %one\n"
      "  %v = sem_read %sem[%i] : i32\n"
      "  core_barrier %sem[0]\n"
      "  %d = device_id : i32\n"
      "  dma_start %x[%i, :] -> %h[0, %one, :], %dsem[%one] send %dsem[%i] device %d\n"));
  if (!m) return;
  tsr_value_t *i = body_op(m, 0)->results[0], *one = body_op(m, 1)->results[0];
  tsr_op_t *ds = body_op(m, 2), *dw = body_op(m, 3), *sg = body_op(m, 4),
           *sw = body_op(m, 5), *sr = body_op(m, 6), *cb = body_op(m, 7),
           *di = body_op(m, 8), *dsend = body_op(m, 9);
  tsr_value_t *d = di->results[0];
  TSR_CHECK_EQ_INT(ds->num_operands, 7); /* src dst sem i one i one */
  TSR_CHECK(ds->operands[3] == i && ds->operands[4] == one &&
            ds->operands[5] == i && ds->operands[6] == one);
  TSR_CHECK_EQ_INT(ds->num_indices, 6);
  TSR_CHECK_EQ_INT(ds->num_ints, 3);
  TSR_CHECK(ds->ints[0] == 2 && ds->ints[1] == 3 && ds->ints[2] == 1);
  TSR_CHECK_EQ_INT(ds->indices[0].operand, 3);
  TSR_CHECK_EQ_INT(ds->indices[2].operand, 4);
  TSR_CHECK_EQ_INT(ds->indices[5].operand, 5);
  TSR_CHECK_EQ_INT(ds->flags, TSR_OPF_DMA_ADD | TSR_OPF_DEVICE);
  TSR_CHECK_EQ_INT(dw->num_operands, 3);
  TSR_CHECK(dw->num_ints == 3 && dw->ints[0] == 0 && dw->ints[1] == 0 && dw->ints[2] == 1 &&
            dw->num_indices == 1);
  /* send: [src, dst, sem, ssem, i (src), one (dst), one (sem), i (ssem), d] */
  TSR_CHECK_EQ_INT(dsend->flags, TSR_OPF_SEND | TSR_OPF_DEVICE);
  TSR_CHECK_EQ_INT(dsend->num_operands, 9);
  TSR_CHECK(dsend->operands[2] == m->kernels[0]->decls[4].ref &&
            dsend->operands[3] == m->kernels[0]->decls[4].ref);
  TSR_CHECK(dsend->operands[4] == i && dsend->operands[5] == one &&
            dsend->operands[6] == one && dsend->operands[7] == i && dsend->operands[8] == d);
  TSR_CHECK_EQ_INT(dsend->num_indices, 7);
  TSR_CHECK(dsend->num_ints == 3 && dsend->ints[0] == 2 && dsend->ints[1] == 3 &&
            dsend->ints[2] == 1);
  TSR_CHECK_EQ_INT(dsend->indices[0].operand, 4);
  TSR_CHECK_EQ_INT(dsend->indices[3].operand, 5);
  TSR_CHECK_EQ_INT(dsend->indices[5].operand, 6);
  TSR_CHECK_EQ_INT(dsend->indices[6].operand, 7);
  TSR_CHECK_EQ_INT(sg->num_operands, 5); /* sem one i(idx) i(device) one(core) */
  TSR_CHECK(sg->operands[1] == one && sg->operands[2] == i);
  TSR_CHECK_EQ_INT(sg->indices[0].operand, 2);
  TSR_CHECK_EQ_INT(sg->flags, TSR_OPF_DEVICE | TSR_OPF_CORE);
  TSR_CHECK_EQ_INT(sw->num_operands, 2);
  TSR_CHECK_EQ_INT(sr->num_operands, 2);
  TSR_CHECK_EQ_INT(sr->indices[0].operand, 1);
  TSR_CHECK_EQ_INT(cb->num_operands, 1);
  TSR_CHECK_EQ_INT(di->num_operands, 0);
  char *text = print_text(m);
  TSR_CHECK(strstr(text, "  dma_wait %h -> %h, %dsem[0]\n") != NULL);
  TSR_CHECK(strstr(text, "%dsem[%i] device %one add\n") != NULL);
  TSR_CHECK(strstr(text, "  sem_signal %sem[%i], %one device %i core %one\n") != NULL);
  TSR_CHECK(strstr(text, "  dma_start %x[%i, :] -> %h[0, %one, :], %dsem[%one] send %dsem[%i] "
                         "device %d\n") != NULL);
  tsr_free(text);
  tsr_module_destroy(m);
}

/* ---- Control flow ------------------------------------------------------------ */

TSR_TEST(control_flow_regions) {
  tsr_module_t *m = parse_ok(KERNEL(
      "  %z = const 0 : i32\n"
      "  %one = const 1 : i32\n"
      "  %f = const 1.0 : f32\n"
      "  %r, %s = for %i = %z to %one step %one iter(%a = %f, %b = %z) : f32, i32 {\n"
      "    yield %a, %i\n"
      "  }\n"
      "  %w = while iter(%v = %z) : i32 {\n"
      "    %c = lt %v, %one : i1\n"
      "    condition %c\n"
      "  } do {\n"
      "    %v2 = add %v, %one : i32\n"
      "    yield %v2\n"
      "  }\n"
      "  %t = const true : i1\n"
      "  %q = if %t : f32 {\n"
      "    yield %r\n"
      "  } else {\n"
      "    yield %f\n"
      "  }\n"
      "  if %t {\n"
      "  }\n"
      "  %u = scoped(%buf: vmem f32[8], %n: smem i32) : f32 {\n"
      "    yield %q\n"
      "  }\n"));
  if (!m) return;
  tsr_op_t *fo = body_op(m, 3), *wh = body_op(m, 4), *iff = body_op(m, 6),
           *if2 = body_op(m, 7), *sc = body_op(m, 8);
  /* for: operands [lo, hi, step, inits], args [iv, carried]. */
  TSR_CHECK_EQ_INT(fo->num_operands, 5);
  TSR_CHECK_EQ_INT(fo->num_results, 2);
  TSR_CHECK_EQ_INT(fo->num_regions, 1);
  tsr_region_t *body = &fo->regions[0];
  TSR_CHECK_EQ_INT(body->num_args, 3);
  TSR_CHECK_EQ_STR(body->args[0]->name, "i");
  TSR_CHECK_EQ_INT(body->args[0]->type.dtype, TSR_DTYPE_I32);
  TSR_CHECK_EQ_INT(body->args[1]->type.dtype, TSR_DTYPE_F32);
  TSR_CHECK(body->args[1]->owner == body && body->args[1]->def == NULL);
  TSR_CHECK(body->parent_op == fo);
  TSR_CHECK(body->first->operands[1] == body->args[0]);
  /* while: both regions get distinct args with the same names. */
  TSR_CHECK_EQ_INT(wh->num_regions, 2);
  tsr_region_t *cond = &wh->regions[0], *loop = &wh->regions[1];
  TSR_CHECK(cond->num_args == 1 && loop->num_args == 1);
  TSR_CHECK(cond->args[0] != loop->args[0]);
  TSR_CHECK_EQ_STR(cond->args[0]->name, "v");
  TSR_CHECK_EQ_STR(loop->args[0]->name, "v");
  TSR_CHECK(cond->first->operands[0] == cond->args[0]);
  TSR_CHECK(loop->first->operands[0] == loop->args[0]);
  TSR_CHECK_EQ_INT(cond->last->opcode, TSR_OP_CONDITION);
  /* if: two regions, HAS_ELSE only when written. */
  TSR_CHECK(iff->num_regions == 2 && (iff->flags & TSR_OPF_HAS_ELSE));
  TSR_CHECK(iff->regions[0].num_args == 0 && iff->regions[1].num_args == 0);
  TSR_CHECK(if2->num_regions == 2 && !(if2->flags & TSR_OPF_HAS_ELSE));
  TSR_CHECK(if2->regions[0].first == NULL && if2->regions[1].first == NULL);
  /* scoped: args of the declared types. */
  TSR_CHECK_EQ_INT(sc->regions[0].num_args, 2);
  TSR_CHECK_EQ_INT(sc->regions[0].args[0]->type.kind, TSR_TYPE_REF);
  TSR_CHECK_EQ_INT(sc->regions[0].args[1]->type.space, TSR_SPACE_SMEM);
  TSR_CHECK_EQ_INT(sc->regions[0].args[1]->type.rank, 0);
  tsr_module_destroy(m);
}

TSR_TEST(empty_yield_and_else_are_omitted) {
  check_prints_as(KERNEL("  %t = const true : i1\n"
                         "  if %t {\n"
                         "    yield\n"
                         "  } else {\n"
                         "  }\n"
                         "  if %t {\n"
                         "  } else {\n"
                         "    yield\n"
                         "  }\n"
                         "  yield\n"),
                  KERNEL("  %t = const true : i1\n"
                         "  if %t {\n"
                         "  }\n"
                         "  if %t {\n"
                         "  }\n"));
}

/* ---- Names and scopes ---------------------------------------------------------- */

TSR_TEST(names_and_scopes) {
  /* Map names are local: they may repeat across maps and in the body. */
  tsr_module_t *m = parse_ok(
      "kernel @k\n"
      "  grid(2) semantics(parallel)\n"
      "  prefetch %p: i32[2]\n"
      "  in %x: f32[16, 128] vmem block[8, 128] map(%i) {\n"
      "    %t = load %p[%i] : i32\n"
      "    yield %t, %i\n"
      "  }\n"
      "  out %y: f32[16, 128] vmem block[8, 128] map(%i) {\n"
      "    %t = load %p[%i] : i32\n"
      "    yield %t, %i\n"
      "  }\n"
      "{\n"
      "  %i = program_id 0 : i32\n"
      "  %t = load %p[%i] : i32\n"
      "  %0 = const 1 : i32\n"
      "  %a.b_c = add %0, %t : i32\n"
      "}\n");
  if (m) {
    tsr_kernel_t *k = m->kernels[0];
    TSR_CHECK(k->decls[1].index_map->first->operands[0] == k->decls[0].ref);
    TSR_CHECK_EQ_STR(body_op(m, 3)->results[0]->name, "a.b_c");
    TSR_CHECK_EQ_STR(body_op(m, 2)->results[0]->name, "0");
    tsr_module_destroy(m);
  }
  /* No shadowing, also across regions, and operand names are kernel-wide. */
  CHECK_ERRORS(KERNEL("  %x = const 1 : i32\n"),
               "t.tsr:10:3: error: redefinition of %x (first defined at 4:6)");
  CHECK_ERRORS(KERNEL("  %t = const true : i1\n"
                      "  %r = if %t : i32 {\n"
                      "    %r2 = const 1 : i32\n"
                      "    yield %r\n"
                      "  } else {\n"
                      "    %r = const 2 : i32\n"
                      "    yield %r\n"
                      "  }\n"),
               "t.tsr:13:11: error: %r (defined at 11:3) is not visible here\n"
               "t.tsr:15:5: error: redefinition of %r (first defined at 11:3)\n"
               "t.tsr:16:11: error: %r (defined at 11:3) is not visible here");
  /* Region args are visible only inside their region. */
  CHECK_ERRORS(KERNEL("  %z = const 0 : i32\n"
                      "  for %i = %z to %z step %z {\n"
                      "  }\n"
                      "  %w = add %i, %i : i32\n"),
               "t.tsr:13:12: error: %i (defined at 11:7) is not visible here");
  /* Ops see values defined before them only. */
  CHECK_ERRORS(KERNEL("  %a = add %b, %b : i32\n"
                      "  %b = const 0 : i32\n"),
               "t.tsr:10:12: error: use of undefined value %b");
  /* Index maps see their args and the prefetch refs only. */
  CHECK_ERRORS("kernel @k\n"
               "  grid(2) semantics(parallel)\n"
               "  in %x: f32[16, 128] vmem block[8, 128] map(%i) -> (%i, 0)\n"
               "  out %y: f32[16, 128] vmem block[8, 128] map(%i) {\n"
               "    %t = load %x[%i, 0] : i32\n"
               "    yield %t, %i\n"
               "  }\n"
               "{\n"
               "}\n",
               "t.tsr:5:15: error: %x is not visible in an index map (maps see their "
               "arguments and the prefetch refs)");
  /* The `while` exception: the do region reuses the iter names. */
  CHECK_ERRORS(KERNEL("  %z = const 0 : i32\n"
                      "  %w = while iter(%v = %z) : i32 {\n"
                      "    %c = const false : i1\n"
                      "    condition %c\n"
                      "  } do {\n"
                      "    %c = const true : i1\n"
                      "    yield %v\n"
                      "  }\n"),
               "t.tsr:15:5: error: redefinition of %c (first defined at 12:5)");
}

/* ---- Index maps ------------------------------------------------------------------ */

TSR_TEST(short_and_general_maps) {
  tsr_module_t *m = parse_ok(
      "kernel @k\n"
      "  grid(2, 3) semantics(parallel, arbitrary)\n"
      "  in %x: f32[4, 16, 128] vmem block[squeezed, 8, 128] map(%i, %j) -> (%j, 7, %i)\n"
      "{\n"
      "}\n");
  if (m) {
    tsr_decl_t *d = &m->kernels[0]->decls[0];
    tsr_region_t *r = d->index_map;
    TSR_CHECK(d->has_block);
    TSR_CHECK_EQ_INT(d->block[0], TSR_SQUEEZED);
    TSR_CHECK_EQ_INT(d->ref->type.rank, 2);
    TSR_CHECK_EQ_INT(d->ref->type.dims[0], 8);
    TSR_CHECK_EQ_INT(d->array.kind, TSR_TYPE_VECTOR);
    TSR_CHECK_EQ_INT(d->array.dims[0], 4);
    TSR_CHECK_EQ_INT(r->num_args, 2);
    TSR_CHECK(r->parent_op == NULL);
    /* One const per integer result, then the yield. */
    tsr_op_t *c = r->first, *y = c->next;
    TSR_CHECK_EQ_INT(c->opcode, TSR_OP_CONST);
    TSR_CHECK_EQ_INT(c->literal.i, 7);
    TSR_CHECK_EQ_INT(y->opcode, TSR_OP_YIELD);
    TSR_CHECK(y->operands[0] == r->args[1] && y->operands[1] == c->results[0] &&
              y->operands[2] == r->args[0]);
    tsr_module_destroy(m);
  }
  /* A general map that fits the short form prints in it. */
  check_prints_as("kernel @k\n"
                  "  grid(2) semantics(parallel)\n"
                  "  in %x: f32[16, 128] vmem block[8, 128] map(%i) {\n"
                  "    %zero = const 0 : i32\n"
                  "    yield %i, %zero\n"
                  "  }\n"
                  "{\n"
                  "}\n",
                  "kernel @k\n"
                  "  grid(2) semantics(parallel)\n"
                  "  in %x: f32[16, 128] vmem block[8, 128] map(%i) -> (%i, 0)\n"
                  "{\n"
                  "}\n");
  /* One that computes stays general. */
  const char *general = "kernel @k\n"
                        "  grid(2) semantics(parallel)\n"
                        "  in %x: f32[16, 128] vmem block[8, 128] map(%i) {\n"
                        "    %one = const 1 : i32\n"
                        "    %r = sub %one, %i : i32\n"
                        "    yield %r, %one\n"
                        "  } \n"
                        "  out %y: f32[16, 128] vmem block[8, 128] map(%i) -> (%i, -1) alias %x\n"
                        "{\n"
                        "}\n";
  check_prints_as(general,
                  "kernel @k\n"
                  "  grid(2) semantics(parallel)\n"
                  "  in %x: f32[16, 128] vmem block[8, 128] map(%i) {\n"
                  "    %one = const 1 : i32\n"
                  "    %r = sub %one, %i : i32\n"
                  "    yield %r, %one\n"
                  "  }\n"
                  "  out %y: f32[16, 128] vmem block[8, 128] map(%i) -> (%i, -1) alias %x\n"
                  "{\n"
                  "}\n");
}

TSR_TEST(header_forms) {
  tsr_module_t *m = parse_ok("kernel @k\n"
                             "  prefetch %n: i32\n"
                             "  prefetch %t: f32[3, 4]\n"
                             "  in %a: f32[8, 128] vmem\n"
                             "  in %h: bf16[64, 64] hbm\n"
                             "  out %o: f32[8, 128] smem alias %a\n"
                             "  scratch %s: smem i32\n"
                             "  scratch %d: dma_sem[2, 2]\n"
                             "{\n"
                             "}\n");
  if (!m) return;
  tsr_kernel_t *k = m->kernels[0];
  TSR_CHECK_EQ_INT(k->grid_rank, 0);
  TSR_CHECK_EQ_INT(k->num_decls, 7);
  TSR_CHECK_EQ_INT(k->decls[0].array.kind, TSR_TYPE_SCALAR);
  TSR_CHECK_EQ_INT(k->decls[0].ref->type.kind, TSR_TYPE_REF);
  TSR_CHECK_EQ_INT(k->decls[0].ref->type.space, TSR_SPACE_SMEM);
  TSR_CHECK_EQ_INT(k->decls[0].ref->type.rank, 0);
  TSR_CHECK_EQ_INT(k->decls[1].ref->type.space, TSR_SPACE_SMEM);
  TSR_CHECK_EQ_INT(k->decls[1].ref->type.rank, 2);
  TSR_CHECK(!k->decls[2].has_block && k->decls[2].index_map == NULL);
  TSR_CHECK_EQ_INT(k->decls[2].block[1], 128);
  TSR_CHECK_EQ_INT(k->decls[3].ref->type.space, TSR_SPACE_HBM);
  TSR_CHECK_EQ_INT(k->decls[3].ref->type.dtype, TSR_DTYPE_BF16);
  TSR_CHECK_EQ_INT(k->decls[4].alias, 2);
  TSR_CHECK_EQ_INT(k->decls[4].role, TSR_ROLE_OUT);
  TSR_CHECK_EQ_INT(k->decls[3].alias, -1);
  TSR_CHECK_EQ_INT(k->decls[5].ref->type.kind, TSR_TYPE_REF);
  TSR_CHECK_EQ_INT(k->decls[6].ref->type.kind, TSR_TYPE_SEM);
  TSR_CHECK_EQ_INT(k->decls[6].ref->type.dtype, TSR_SEM_DMA);
  TSR_CHECK(tsr_type_equal(&k->decls[6].array, &k->decls[6].ref->type));
  for (uint32_t i = 0; i < k->num_decls; i++)
    TSR_CHECK_EQ_INT(k->decls[i].ref->decl, (int)i);
  tsr_module_destroy(m);
  /* Grid and semantics; the printer always spells out the semantics. */
  check_prints_as("kernel @g\n  grid(2, 3)\n{\n}\n\n\n// trailing comment\n",
                  "kernel @g\n  grid(2, 3) semantics(arbitrary, arbitrary)\n{\n}\n");
  check_prints_as("kernel @g\n  grid()\n{\n}\nkernel @h\n{\n}\n",
                  "kernel @g\n{\n}\n\nkernel @h\n{\n}\n");
  check_prints_as("", "");
}

/* ---- Locations ---------------------------------------------------------------- */

TSR_TEST(locations) {
  tsr_module_t *m = parse_ok("\n"
               "kernel   @k\n"
               "  in %x: i32[8] vmem\n"
               "{\n"
               "  %c = const 0 : i32\n"
               "    %a, %b = for %i = %c to %c step %c iter(%p = %c, %q = %c) : i32, i32 {\n"
               "      yield %p, %q\n"
               "    }\n"
               "  store %x[0],   %a\n"
               "}\n");
  if (!m) return;
  tsr_kernel_t *k = m->kernels[0];
  TSR_CHECK(k->loc.line == 2 && k->loc.col == 10);
  TSR_CHECK_EQ_STR(k->loc.file, "t.tsr");
  TSR_CHECK(k->decls[0].loc.line == 3 && k->decls[0].loc.col == 6);
  tsr_op_t *c = body_op(m, 0), *f = body_op(m, 1), *st = body_op(m, 2);
  TSR_CHECK(c->loc.line == 5 && c->loc.col == 8);   /* the mnemonic */
  TSR_CHECK(f->loc.line == 6 && f->loc.col == 14);  /* also with several results */
  TSR_CHECK(f->regions[0].first->loc.line == 7 && f->regions[0].first->loc.col == 7);
  TSR_CHECK(st->loc.line == 9 && st->loc.col == 3);
  tsr_module_destroy(m);
}

/* ---- Diagnostics ----------------------------------------------------------------- */

TSR_TEST(error_messages) {
  CHECK_ERRORS(KERNEL("  %a = load %x[0 foo] : f32[128]\n"),
               "t.tsr:10:18: error: expected ',' or ']' after index, found 'foo'");
  CHECK_ERRORS(KERNEL("  %a = ad %x, %x : f32\n"), "t.tsr:10:8: error: unknown op 'ad'");
  CHECK_ERRORS(KERNEL("  %a = add %q, %q : f32\n"),
               "t.tsr:10:12: error: use of undefined value %q");
  CHECK_ERRORS(KERNEL("  %a = load %x[:, :] : f32[8, 128]\n"
                      "  %b = add %a, %a, %a : f32[8, 128]\n"),
               "t.tsr:11:8: error: 'add' expects 2 operands, found 3");
  CHECK_ERRORS(KERNEL("  %a = dot %h : f32[8, 128]\n"),
               "t.tsr:10:8: error: 'dot' expects 2 to 3 operands, found 1");
  CHECK_ERRORS(KERNEL("  %a = concatenate axis 0 : f32[8, 128]\n"),
               "t.tsr:10:20: error: expected a value, found 'axis'");
  CHECK_ERRORS(KERNEL("  yield %x\n  %a = const 1 : i32\n  condition %a, %a\n"),
               "t.tsr:12:3: error: 'condition' expects 1 operand, found 2");
  CHECK_ERRORS(KERNEL("  %a = exp %x\n"),
               "t.tsr:10:14: error: expected ':' and the result type, found end of line");
  CHECK_ERRORS(KERNEL("  %a = const 1 : i32\n  %a = const 2 : i32\n"),
               "t.tsr:11:3: error: redefinition of %a (first defined at 10:3)");
  CHECK_ERRORS(KERNEL("  %a, %a = const 2 : i32\n"),
               "t.tsr:10:7: error: redefinition of %a (first defined at 10:3)");
  CHECK_ERRORS("kernel @k\n{\n  print \"a\\qb\"\n}\n",
               "t.tsr:3:11: error: unknown escape '\\q' in string (use \\\", \\\\, \\n or \\t)");
  CHECK_ERRORS(KERNEL("  dma_start %x[:, :] -> %h[0, :, :], %dsem[0] send\n"),
               "t.tsr:10:51: error: expected a send semaphore, found end of line");
  CHECK_ERRORS(KERNEL("  dma_start %x[:, :] -> %h[0, :, :], %dsem[0] send %dsem[1, 0 foo\n"),
               "t.tsr:10:63: error: expected ',' or ']' after index, found 'foo'");
  CHECK_ERRORS("kernel @k\n{\n  %a = const 1 : i32\n", /* a missing brace */
               "t.tsr:4:1: error: expected '}' to close the region opened at 2:1, found "
               "end of file");
}

TSR_TEST(header_errors) {
  CHECK_ERRORS("kernel @k\n  out %y: f32[8] vmem\n  in %x: f32[8] vmem\n{\n}\n",
               "t.tsr:3:3: error: 'in' after 'out': header lines come in the order "
               "prefetch, in, out, scratch");
  CHECK_ERRORS("kernel @k\n  in %x: f32[8] vmem\n  out %y: f32[8] vmem alias %q\n{\n}\n",
               "t.tsr:3:29: error: alias %q: no earlier 'in' operand of that name");
  CHECK_ERRORS("kernel @k\n  grid(2, 2) semantics(parallel)\n{\n}\n",
               "t.tsr:2:14: error: the grid has 2 dimensions but semantics lists 1");
  CHECK_ERRORS("kernel @k\n  in %x: f32[8, 8] vmem block[8]\n{\n}\n",
               "t.tsr:2:25: error: block has 1 entry but the array has rank 2");
  CHECK_ERRORS("kernel @k\n  scratch %s: f32[8]\n{\n}\n",
               "t.tsr:2:15: error: scratch needs a memory type (vmem f32[8, 128], smem "
               "i32) or a semaphore type (sem, dma_sem[2]), found 'f32'");
  CHECK_ERRORS("kernel @k\n  grid(2) semantics(parallel)\n"
               "  in %x: f32[8] vmem block[4] map(%i) -> (%j)\n{\n}\n",
               "t.tsr:3:43: error: %j is not an argument of this map (the short form "
               "yields grid indices or integers)");
  CHECK_ERRORS("kernel @a\n{\n}\nkernel @a\n{\n}\n",
               "t.tsr:4:8: error: redefinition of kernel @a (first defined at 1:8)");
}

TSR_TEST(multiple_errors_are_collected) {
  const char *text = KERNEL("  %a = ad %x\n"             /* unknown op */
                            "  %b = add %a, %a : f32\n"  /* quiet: %a is poisoned */
                            "  %c = const 1.5 : i32\n"   /* bad literal */
                            "  %t = const true : i1\n"
                            "  %r = if %t : i32 junk {\n" /* bad header: body skipped */
                            "    %zz = bogus\n"
                            "  } else {\n"
                            "    %zz2 = bogus\n"
                            "  }\n"
                            "  %s = add %r, %r : i32\n" /* quiet */
                            "  %d = load %x[:, :] : f32[8, 128] }\n" /* closes the body */
                            "  %e = const 0 : i32\n"); /* then a stray line and '}' */
  char *msg = parse_errors(text);
  TSR_CHECK_EQ_STR(msg,
                   "t.tsr:10:8: error: unknown op 'ad'\n"
                   "t.tsr:12:14: error: expected an integer literal for i32, found '1.5'\n"
                   "t.tsr:14:20: error: expected '{' to open the region, found 'junk'\n"
                   "t.tsr:20:36: error: expected end of line, found '}'\n"
                   "t.tsr:21:3: error: expected 'kernel', found '%e'");
  free(msg);
  /* Diagnostics are capped at 20, with a note. */
  tsr_strbuf_t sb;
  tsr_strbuf_initialize(&sb);
  tsr_strbuf_puts(&sb, "kernel @k\n{\n");
  for (int i = 0; i < 30; i++) tsr_strbuf_printf(&sb, "  %%v%d = nope\n", i);
  tsr_strbuf_puts(&sb, "}\n");
  tsr_module_t *m = NULL;
  tsr_status_t s = tsr_ir_parse("t.tsr", sb.data, sb.size, &m);
  TSR_CHECK_EQ_INT(tsr_status_code(s), TSR_PARSE_ERROR);
  TSR_CHECK_EQ_INT(tsr_status_diagnostic_count(s), 21);
  TSR_CHECK(strstr(tsr_status_message(s), "note: 10 more errors not shown") != NULL);
  tsr_status_free(s);
  tsr_strbuf_deinitialize(&sb);
}

/* The symbol table grows past its first 64 slots many times over: every
 * name is still found (each value is used once more at the end, oldest
 * first), redefinitions and undefined uses are still caught, with the
 * first definition's place, and a second kernel starts with no names. */
TSR_TEST(many_names_grow_the_symbol_table) {
  enum { N = 3000 };
  tsr_strbuf_t sb;
  tsr_strbuf_initialize(&sb);
  tsr_strbuf_puts(&sb, "kernel @k\n  out %y: i32[1] smem\n{\n");
  for (int i = 0; i < N; i++) tsr_strbuf_printf(&sb, "  %%c_%d = const %d : i32\n", i, i);
  tsr_strbuf_puts(&sb, "  %s_0 = add %c_0, %c_1 : i32\n");
  for (int i = 2; i < N; i++)
    tsr_strbuf_printf(&sb, "  %%s_%d = add %%s_%d, %%c_%d : i32\n", i - 1, i - 2, i);
  tsr_strbuf_printf(&sb, "  %%zero = const 0 : i32\n  store %%y[%%zero], %%s_%d\n}\n", N - 2);
  /* the same names again in a second kernel: a fresh table */
  tsr_strbuf_puts(&sb, "kernel @k2\n  out %y: i32[1] smem\n{\n");
  for (int i = 0; i < 200; i++) tsr_strbuf_printf(&sb, "  %%c_%d = const %d : i32\n", i, i);
  tsr_strbuf_puts(&sb, "  %zero = const 0 : i32\n  store %y[%zero], %c_199\n}\n");
  tsr_module_t *m = parse_ok(sb.data);
  if (m) {
    TSR_CHECK_EQ_INT(m->num_kernels, 2);
    tsr_kernel_t *k = m->kernels[0];
    /* the last add reads the one before it and the last const */
    const tsr_op_t *last = k->body.first;
    const tsr_op_t *prev = NULL;
    for (int i = 0; i < 2 * N - 2; i++) {
      prev = last;
      last = last->next;
    }
    TSR_CHECK_EQ_STR(last->results[0]->name, "s_2998");
    TSR_CHECK(last->operands[0] == prev->results[0]);
    TSR_CHECK_EQ_STR(last->operands[1]->name, "c_2999");
    tsr_module_destroy(m);
  }
  /* a redefinition and an undefined use after the table has grown */
  sb.size = 0;
  tsr_strbuf_puts(&sb, "kernel @k\n  out %y: i32[1] smem\n{\n");
  for (int i = 0; i < N; i++) tsr_strbuf_printf(&sb, "  %%c_%d = const %d : i32\n", i, i);
  tsr_strbuf_puts(&sb, "  %c_17 = const 1 : i32\n  %d = add %c_2999, %c_3000 : i32\n}\n");
  tsr_module_t *bad = NULL;
  tsr_status_t st = tsr_ir_parse("t.tsr", sb.data, sb.size, &bad);
  TSR_CHECK_EQ_INT(tsr_status_code(st), TSR_PARSE_ERROR);
  TSR_CHECK_EQ_STR(tsr_status_message(st),
                   "t.tsr:3004:3: error: redefinition of %c_17 (first defined at 21:3)\n"
                   "t.tsr:3005:21: error: use of undefined value %c_3000");
  tsr_status_free(st);
  tsr_strbuf_deinitialize(&sb);
}

/* ---- The builder prints like the parser ------------------------------------------ */

/* Block types spelled like one read before are taken from the parser's
 * recent types (ir/parse_value.c): a type whose text extends or differs
 * from a recent one after its prefix, other spacing, more types than the
 * cache holds, and the same error twice (once read, once after a recent
 * type) must read as without it. */
TSR_TEST(recent_block_types_read_as_the_first) {
  check_prints_as("kernel @k\n"
                  "  in %x: f32[8, 128] vmem\n"
                  "{\n"
                  "  %a = load %x[:, :] : f32[8, 128]\n"
                  "  %b = reshape %a : f32[8,128, 1]\n"
                  "  %c = reshape %b : f32[ 8, 128 ]\n"
                  "  %d = reshape %c : f32[1024]\n"
                  "  %e = reshape %d : f32[8, 128]\n"
                  "  %f = reshape %e : f32[4, 256]\n"
                  "  %g = reshape %f : f32[2, 512]\n"
                  "  %h = reshape %g : f32[1, 1024]\n"
                  "  %i = reshape %h : f32[8, 128] // a comment after\n"
                  "  %j = bitcast %i : i32[8, 128]\n"
                  "  %k = reshape %j : i32[8, 128, 1]\n"
                  "  %l = reshape %k : i32[8, 128]\n"
                  "}\n",
                  "kernel @k\n"
                  "  in %x: f32[8, 128] vmem\n"
                  "{\n"
                  "  %a = load %x[:, :] : f32[8, 128]\n"
                  "  %b = reshape %a : f32[8, 128, 1]\n"
                  "  %c = reshape %b : f32[8, 128]\n"
                  "  %d = reshape %c : f32[1024]\n"
                  "  %e = reshape %d : f32[8, 128]\n"
                  "  %f = reshape %e : f32[4, 256]\n"
                  "  %g = reshape %f : f32[2, 512]\n"
                  "  %h = reshape %g : f32[1, 1024]\n"
                  "  %i = reshape %h : f32[8, 128]\n"
                  "  %j = bitcast %i : i32[8, 128]\n"
                  "  %k = reshape %j : i32[8, 128, 1]\n"
                  "  %l = reshape %k : i32[8, 128]\n"
                  "}\n");
  char *errors = parse_errors("kernel @k\n"
                              "  in %x: f32[8, 128] vmem\n"
                              "{\n"
                              "  %a = load %x[:, :] : f32[8, 128]x\n"
                              "  %b = load %x[:, :] : f32[8, 128]x\n"
                              "  %c = load %x[:, :] : f32[8, 128]]\n"
                              "}\n");
  TSR_CHECK(errors != NULL);
  if (errors) {
    TSR_CHECK(strstr(errors, "t.tsr:4:35:") != NULL);
    TSR_CHECK(strstr(errors, "t.tsr:5:35:") != NULL);
    TSR_CHECK(strstr(errors, "t.tsr:6:35:") != NULL);
    /* the same message for the line read and the lines after it */
    const char *l4 = strstr(errors, "t.tsr:4:35:"), *l5 = strstr(errors, "t.tsr:5:35:");
    if (l4 && l5) {
      const char *e4 = strchr(l4, '\n'), *e5 = strchr(l5, '\n');
      size_t n4 = e4 ? (size_t)(e4 - l4) : strlen(l4), n5 = e5 ? (size_t)(e5 - l5) : strlen(l5);
      TSR_CHECK(n4 == n5 && memcmp(l4 + 11, l5 + 11, n4 - 11) == 0);
    }
    free(errors);
  }
}

static const char matmul_text[] =
    "kernel @matmul\n"
    "  grid(4, 4, 8) semantics(parallel, parallel, arbitrary)\n"
    "  in %a: f32[512, 1024] vmem block[128, 128] map(%i, %j, %k) -> (%i, %k)\n"
    "  in %b: f32[1024, 512] vmem block[128, 128] map(%i, %j, %k) -> (%k, %j)\n"
    "  out %c: f32[512, 512] vmem block[128, 128] map(%i, %j, %k) -> (%i, %j)\n"
    "  scratch %acc: vmem f32[128, 128]\n"
    "{\n"
    "  %k = program_id 2 : i32\n"
    "  %zero = const 0 : i32\n"
    "  %first = eq %k, %zero : i1\n"
    "  if %first {\n"
    "    %z = const 0.0 : f32[128, 128]\n"
    "    store %acc[:, :], %z\n"
    "  }\n"
    "  %x = load %a[:, :] : f32[128, 128]\n"
    "  %y = load %b[:, :] : f32[128, 128]\n"
    "  %s = load %acc[:, :] : f32[128, 128]\n"
    "  %p = dot %x, %y, %s : f32[128, 128]\n"
    "  store %acc[:, :], %p\n"
    "  %seven = const 7 : i32\n"
    "  %last = eq %k, %seven : i1\n"
    "  if %last {\n"
    "    %r = load %acc[:, :] : f32[128, 128]\n"
    "    store %c[:, :], %r\n"
    "  }\n"
    "}\n";

/* Builds one op through the public builder; returns its first result. */
static tsr_ir_value_t *build(tsr_ir_kernel_t *k, tsr_ir_region_t *r, const char *mn,
                             tsr_ir_value_t *const *operands, uint32_t n,
                             const tsr_ir_type_t *type, const char *name,
                             const tsr_ir_op_params_t *extra, tsr_ir_op_t **out_op) {
  tsr_ir_op_params_t p = extra ? *extra : (tsr_ir_op_params_t){0};
  p.mnemonic = mn;
  p.operands = operands;
  p.num_operands = n;
  p.result_types = type;
  p.result_names = name ? &name : NULL;
  p.num_results = type ? 1 : 0;
  tsr_ir_op_t *op = NULL;
  TSR_CHECK_OK(tsr_ir_build_op(k, r, &p, &op));
  if (out_op) *out_op = op;
  return op ? tsr_ir_op_result(op, 0) : NULL;
}

static void build_short_map(tsr_ir_kernel_t *k, tsr_ir_region_t *map, int r0, int r1) {
  /* Map args are named by the builder; rename them as in the text. */
  static const char *const names[] = {"i", "j", "k"};
  for (uint32_t i = 0; i < 3; i++) map->args[i]->name = names[i];
  tsr_ir_value_t *yielded[2] = {map->args[r0], map->args[r1]};
  build(k, map, "yield", yielded, 2, NULL, NULL, NULL, NULL);
}

TSR_TEST(builder_matmul_prints_like_the_text) {
  tsr_ir_module_t *m;
  TSR_CHECK_OK(tsr_ir_module_create("<builder>", &m));
  tsr_ir_kernel_t *k;
  TSR_CHECK_OK(tsr_ir_kernel_create(m, "matmul", &k));
  int64_t grid[3] = {4, 4, 8};
  tsr_ir_dim_semantics_t sem[3] = {TSR_DIM_PARALLEL, TSR_DIM_PARALLEL,
                                   TSR_DIM_ARBITRARY};
  TSR_CHECK_OK(tsr_ir_kernel_set_grid(k, 3, grid, sem));
  int64_t block[2] = {128, 128}, da[2] = {512, 1024}, db[2] = {1024, 512},
          dc[2] = {512, 512};
  tsr_ir_value_t *a, *b, *c, *acc;
  tsr_ir_region_t *map;
  tsr_ir_operand_params_t op = {TSR_ROLE_IN, "a", tsr_ir_type_vector(TSR_DTYPE_F32, 2, da),
                                TSR_SPACE_VMEM, block, -1};
  TSR_CHECK_OK(tsr_ir_kernel_add_operand(k, &op, &a, &map));
  build_short_map(k, map, 0, 2);
  op.name = "b";
  op.array = tsr_ir_type_vector(TSR_DTYPE_F32, 2, db);
  TSR_CHECK_OK(tsr_ir_kernel_add_operand(k, &op, &b, &map));
  build_short_map(k, map, 2, 1);
  op.role = TSR_ROLE_OUT;
  op.name = "c";
  op.array = tsr_ir_type_vector(TSR_DTYPE_F32, 2, dc);
  TSR_CHECK_OK(tsr_ir_kernel_add_operand(k, &op, &c, &map));
  build_short_map(k, map, 0, 1);
  tsr_ir_operand_params_t scratch = {TSR_ROLE_SCRATCH, "acc",
                                     tsr_ir_type_ref(TSR_SPACE_VMEM, TSR_DTYPE_F32, 2, block),
                                     TSR_SPACE_VMEM, NULL, -1};
  TSR_CHECK_OK(tsr_ir_kernel_add_operand(k, &scratch, &acc, NULL));

  tsr_ir_region_t *body = tsr_ir_kernel_body(k);
  tsr_ir_type_t i32 = tsr_ir_type_scalar(TSR_DTYPE_I32), i1 = tsr_ir_type_scalar(TSR_DTYPE_I1);
  tsr_ir_type_t blk = tsr_ir_type_vector(TSR_DTYPE_F32, 2, block);
  tsr_ir_index_t full[2] = {{.kind = TSR_INDEX_FULL, .operand = -1, .stride = 1},
                            {.kind = TSR_INDEX_FULL, .operand = -1, .stride = 1}};
  tsr_ir_op_params_t ints = {0}, view = {0}, lit = {0};
  int64_t two = 2;
  ints.ints = &two;
  ints.num_ints = 1;
  view.indices = full;
  view.num_indices = 2;
  tsr_ir_value_t *kv = build(k, body, "program_id", NULL, 0, &i32, "k", &ints, NULL);
  tsr_ir_value_t *zero = build(k, body, "const", NULL, 0, &i32, "zero", NULL, NULL);
  tsr_ir_value_t *args[3] = {kv, zero};
  tsr_ir_value_t *first = build(k, body, "eq", args, 2, &i1, "first", NULL, NULL);
  tsr_ir_op_t *iff;
  build(k, body, "if", &first, 1, NULL, NULL, NULL, &iff);
  lit.literal.f = 0.0;
  tsr_ir_value_t *z = build(k, tsr_ir_op_region(iff, 0), "const", NULL, 0, &blk, "z",
                            &lit, NULL);
  tsr_ir_value_t *st[2] = {acc, z};
  build(k, tsr_ir_op_region(iff, 0), "store", st, 2, NULL, NULL, &view, NULL);
  tsr_ir_value_t *x = build(k, body, "load", &a, 1, &blk, "x", &view, NULL);
  tsr_ir_value_t *y = build(k, body, "load", &b, 1, &blk, "y", &view, NULL);
  tsr_ir_value_t *s = build(k, body, "load", &acc, 1, &blk, "s", &view, NULL);
  tsr_ir_value_t *dargs[3] = {x, y, s};
  tsr_ir_value_t *pv = build(k, body, "dot", dargs, 3, &blk, "p", NULL, NULL);
  tsr_ir_value_t *st2[2] = {acc, pv};
  build(k, body, "store", st2, 2, NULL, NULL, &view, NULL);
  lit.literal.i = 7;
  tsr_ir_value_t *seven = build(k, body, "const", NULL, 0, &i32, "seven", &lit, NULL);
  tsr_ir_value_t *eargs[2] = {kv, seven};
  tsr_ir_value_t *last = build(k, body, "eq", eargs, 2, &i1, "last", NULL, NULL);
  build(k, body, "if", &last, 1, NULL, NULL, NULL, &iff);
  tsr_ir_value_t *r = build(k, tsr_ir_op_region(iff, 0), "load", &acc, 1, &blk, "r",
                            &view, NULL);
  tsr_ir_value_t *st3[2] = {c, r};
  build(k, tsr_ir_op_region(iff, 0), "store", st3, 2, NULL, NULL, &view, NULL);

  char *built = tsr_ir_module_print(m);
  TSR_CHECK_EQ_STR(built, matmul_text);
  TSR_CHECK_OK(tsr_ir_module_verify(m));
  tsr_ir_string_free(built);
  tsr_ir_module_destroy(m);

  /* The public parse entry point gives the same module text. */
  tsr_ir_module_t *parsed;
  TSR_CHECK_OK(tsr_ir_module_parse(TSR_SV("matmul.tsr"),
                                   (tsr_string_view_t){matmul_text, strlen(matmul_text)},
                                   &parsed));
  char *again = tsr_ir_module_print(parsed);
  TSR_CHECK_EQ_STR(again, matmul_text);
  tsr_ir_string_free(again);
  tsr_ir_module_destroy(parsed);
}

/* ---- Canonical printing of non-canonical input --------------------------------- */

TSR_TEST(canonicalizes_layout) {
  check_prints_as("// a comment\n"
                  "kernel @k   // trailing\n"
                  "\n"
                  "  in %x :f32[8,128] vmem\n"
                  "{\n"
                  "\n"
                  "      %a=load %x[ : ,0:128:1 ]:f32[8,128]   // load\r\n"
                  "  %b = reshape %a : f32[1024]\n"
                  "}\n"
                  "\n",
                  "kernel @k\n"
                  "  in %x: f32[8, 128] vmem\n"
                  "{\n"
                  "  %a = load %x[:, 0:128] : f32[8, 128]\n"
                  "  %b = reshape %a : f32[1024]\n"
                  "}\n");
}

/* ---- Allocation failure and hostile input ------------------------------------------- */

static const char alloc_text[] =
    "kernel @k\n"
    "  grid(2) semantics(parallel)\n"
    "  prefetch %p: i32[2]\n"
    "  in %x: f32[16, 128] vmem block[8, 128] map(%i) {\n"
    "    %t = load %p[%i] : i32\n"
    "    yield %t, %i\n"
    "  }\n"
    "  out %y: f32[16, 128] vmem block[8, 128] map(%i) -> (%i, 0)\n"
    "  scratch %s: vmem f32[8, 128]\n"
    "{\n"
    "  %z = const 0 : i32\n"
    "  %n = const 4 : i32\n"
    "  %v = load %x[:, :] : f32[8, 128]\n"
    "  %r, %c = for %k = %z to %n step %n iter(%a = %v, %q = %z) : f32[8, 128], i32 {\n"
    "    %w = while iter(%u = %q) : i32 {\n"
    "      %go = lt %u, %n : i1\n"
    "      condition %go\n"
    "    } do {\n"
    "      yield %u\n"
    "    }\n"
    "    print \"x {}\", %w\n"
    "    yield %a, %w\n"
    "  }\n"
    "  store %y[ds(%c, 8), :], %r\n"
    "}\n"
    "\n"
    "kernel @bad\n"
    "{\n"
    "  %e = nope\n"
    "}\n";

TSR_TEST(allocation_failure) {
  /* Every allocation of the parse fails in turn: OOM (or, for the bad
   * kernel's diagnostics, the parse error) and never a crash or a leak. */
  size_t len = strlen(alloc_text);
  int n;
  bool finished = false;
  for (n = 0; n < 100000 && !finished; n++) {
    tsr_module_t *m = NULL;
    tsr_alloc_fail_after(n);
    tsr_status_t s = tsr_ir_parse("t.tsr", alloc_text, len, &m);
    tsr_alloc_fail_after(-1);
    tsr_status_code_t code = tsr_status_code(s);
    if (code != TSR_OUT_OF_MEMORY && code != TSR_PARSE_ERROR)
      TSR_FAIL_AT("n=%d: unexpected %s", n, tsr_status_code_name(code));
    if (code == TSR_OUT_OF_MEMORY && m) TSR_FAIL_AT("n=%d: module written", n);
    if (code == TSR_PARSE_ERROR) {
      TSR_CHECK_EQ_STR(tsr_status_message(s), "t.tsr:29:8: error: unknown op 'nope'");
      finished = true;
    }
    tsr_status_free(s);
  }
  TSR_CHECK(finished);
  TSR_CHECK(n > 20);
  /* The same for a text that parses, and for printing it. */
  size_t good = strstr(alloc_text, "\nkernel @bad") - alloc_text + 1;
  finished = false;
  for (n = 0; n < 100000 && !finished; n++) {
    tsr_module_t *m = NULL;
    tsr_alloc_fail_after(n);
    tsr_status_t s = tsr_ir_parse("t.tsr", alloc_text, good, &m);
    tsr_alloc_fail_after(-1);
    if (s) {
      TSR_CHECK_EQ_INT(tsr_status_code(s), TSR_OUT_OF_MEMORY);
      tsr_status_free(s);
      continue;
    }
    finished = true;
    for (int k = 0; k < 40; k++) {
      tsr_alloc_fail_after(k);
      char *text = tsr_ir_module_print(m);
      tsr_alloc_fail_after(-1);
      if (text) TSR_CHECK(strncmp(text, alloc_text, good - 1) == 0);
      tsr_ir_string_free(text);
    }
    tsr_module_destroy(m);
  }
  TSR_CHECK(finished);
}

/* Parses arbitrary bytes: only OK or a parse error are acceptable. */
static void parse_any(const char *text, size_t len) {
  tsr_module_t *m = NULL;
  tsr_status_t s = tsr_ir_parse("t.tsr", text, len, &m);
  if (!s) {
    char *out = print_text(m);
    tsr_free(out);
    tsr_module_destroy(m);
    return;
  }
  if (tsr_status_code(s) != TSR_PARSE_ERROR)
    TSR_FAIL_AT("unexpected %s: %s", tsr_status_code_name(tsr_status_code(s)),
                tsr_status_message(s));
  tsr_status_free(s);
}

TSR_TEST(hostile_input) {
  /* Every prefix of a real module, and single-byte corruptions of it. */
  size_t len = strlen(alloc_text);
  for (size_t i = 0; i <= len; i++) parse_any(alloc_text, i);
  char *copy = malloc(len);
  static const char bytes[] = {'\0', '{', '}', '%', '\n', ':', '[', '"', '-', 'x', '\xff'};
  for (size_t i = 0; i < len; i += 3) {
    memcpy(copy, alloc_text, len);
    copy[i] = bytes[i % sizeof bytes];
    parse_any(copy, len);
  }
  free(copy);
  /* Deep nesting is a diagnostic, not a stack overflow. */
  tsr_strbuf_t sb;
  tsr_strbuf_initialize(&sb);
  tsr_strbuf_puts(&sb, "kernel @k\n{\n  %t = const true : i1\n");
  for (int i = 0; i < 5000; i++) tsr_strbuf_puts(&sb, "if %t {\n");
  for (int i = 0; i < 5000; i++) tsr_strbuf_puts(&sb, "}\n");
  tsr_strbuf_puts(&sb, "}\n");
  char *msg = parse_errors(sb.data);
  TSR_CHECK(msg && strstr(msg, "regions nested more than 200 deep") != NULL);
  free(msg);
  tsr_strbuf_deinitialize(&sb);
  /* Huge numbers, long names, ranks and lists. */
  CHECK_ERRORS("kernel @k\n  grid(99999999999999999999)\n{\n}\n",
               "t.tsr:2:8: error: integer literal '99999999999999999999' does not fit "
               "in 64 bits");
  CHECK_ERRORS("kernel @k\n  in %x: f32[1, 1, 1, 1, 1, 1, 1] vmem\n{\n}\n",
               "t.tsr:2:32: error: more than 6 dimensions");
  CHECK_ERRORS("kernel @k\n  in %x: f32[8] vmem\n{\n"
               "  %a = load %x[9223372036854775807:-9223372036854775807] : f32\n}\n",
               "t.tsr:4:16: error: slice bounds overflow");
  CHECK_ERRORS("kernel @k\n{\n  %a = const 1." "0000000000000000000000000000000000000000"
               "0000000000000000000000000000000000000000000000000000000000000000000000000"
               "000000000000000000000000000000 : f32\n}\n",
               "t.tsr:3:14: error: numeric literal too long");
  parse_any("\0\0\0", 3);
  parse_any("kernel", 6);
  parse_any("kernel @k\n{\n  %a = const \"", 24);
  parse_any(NULL, 0);
}

/* ---- Typed views (ir/opview.h) on the golden kernels ------------------------ */

/* How many ops of each opcode the view round trip saw. */
typedef struct view_counts {
  uint32_t seen[TSR_OP_COUNT];
} view_counts_t;

/* Re-encodes a memory, DMA or semaphore op from its decoded view through
 * tsr_opview_layout and checks that the operands, indices, ints and flags
 * come out as the parser built them. */
static void check_view_encodes_back(const tsr_op_t *op, tsr_opview_parts_t *parts,
                                    uint32_t first_dyn, uint32_t end_dyn) {
  tsr_index_t indices[4 * TSR_MAX_RANK];
  tsr_value_t *operands[TSR_OPVIEW_MAX_OPERANDS];
  int64_t ints[3];
  uint32_t num_ints = 0, flags = 0;
  TSR_CHECK(op->num_indices <= 4 * TSR_MAX_RANK);
  for (uint32_t i = 0; i < op->num_indices && i < 4 * TSR_MAX_RANK; i++) {
    indices[i] = op->indices[i];
    if (indices[i].operand >= 0) indices[i].operand -= (int32_t)first_dyn;
  }
  parts->indices = indices;
  parts->num_indices = op->num_indices;
  parts->starts = op->operands + first_dyn;
  parts->num_starts = end_dyn - first_dyn;
  uint32_t n = tsr_opview_layout(op->opcode, parts, operands, ints, &num_ints, &flags);
  TSR_CHECK_EQ_INT(n, op->num_operands);
  for (uint32_t i = 0; i < n && i < op->num_operands; i++) TSR_CHECK(operands[i] == op->operands[i]);
  for (uint32_t i = 0; i < op->num_indices; i++)
    TSR_CHECK_EQ_INT(indices[i].operand, op->indices[i].operand);
  TSR_CHECK_EQ_INT(num_ints, op->num_ints);
  for (uint32_t i = 0; i < num_ints && i < op->num_ints; i++) TSR_CHECK_EQ_INT(ints[i], op->ints[i]);
  uint32_t layout_flags =
      TSR_OPF_SEND | TSR_OPF_DEVICE | TSR_OPF_CORE | TSR_OPF_MASK | TSR_OPF_DMA_ADD;
  TSR_CHECK_EQ_INT(flags, op->flags & layout_flags);
}

static void check_op_view(void *ctx, const tsr_op_t *op, uint32_t position) {
  view_counts_t *counts = ctx;
  counts->seen[op->opcode]++;
  tsr_opview_parts_t parts = {0};
  tsr_access_view_t access;
  tsr_dma_view_t dma;
  tsr_sem_view_t sem;
  tsr_for_view_t fv;
  tsr_while_view_t wv;
  tsr_if_view_t iv;
  tsr_scoped_view_t sv;
  switch (tsr_op_table[op->opcode].syntax) {
    case TSR_SYN_LOAD:
    case TSR_SYN_STORE:
      if (!tsr_opview_access(op, &access)) break;
      TSR_CHECK_EQ_INT(access.ref.count, access.ref.base.value->type.rank);
      parts.ref[0] = access.ref.base.value;
      parts.ref[1] = access.stored.value;
      parts.mask = access.mask.value;
      check_view_encodes_back(op, &parts, access.first_dyn, access.end_dyn);
      return;
    case TSR_SYN_DMA:
      if (!tsr_opview_dma(op, &dma)) break;
      TSR_CHECK(dma.core.slot < 0);
      parts.ref[0] = dma.src.base.value;
      parts.ref[1] = dma.dst.base.value;
      parts.ref[2] = dma.sem.base.value;
      parts.ref[3] = dma.send.base.value;
      parts.count[0] = dma.src.count;
      parts.count[1] = dma.dst.count;
      parts.count[2] = dma.sem.count;
      parts.device = dma.device.value;
      parts.add = dma.add;
      TSR_CHECK_EQ_INT(dma.src.count + dma.dst.count + dma.sem.count + dma.send.count,
                       op->num_indices);
      check_view_encodes_back(op, &parts, dma.first_dyn, dma.end_dyn);
      return;
    case TSR_SYN_SEM:
      if (!tsr_opview_sem(op, &sem)) break;
      TSR_CHECK_EQ_INT(sem.sem.count, sem.sem.base.value->type.rank);
      parts.ref[0] = sem.sem.base.value;
      parts.ref[1] = sem.amount.value;
      parts.device = sem.device.value;
      parts.core = sem.core.value;
      check_view_encodes_back(op, &parts, sem.first_dyn, sem.end_dyn);
      return;
    case TSR_SYN_SLICE: {
      tsr_slice_view_t slice;
      if (!tsr_opview_slice(op, &slice)) break;
      TSR_CHECK_EQ_INT(slice.value.count, slice.value.base.value->type.rank);
      for (uint32_t i = 0; i < slice.value.count; i++)
        TSR_CHECK(tsr_opview_index_start(op, &slice.value.indices[i]) == NULL);
      return;
    }
    case TSR_SYN_FOR:
      if (!tsr_opview_for(op, &fv)) break;
      TSR_CHECK(fv.lo && fv.hi && fv.step && fv.body && fv.iv);
      TSR_CHECK_EQ_INT(fv.num_inits, op->num_results);
      TSR_CHECK_EQ_INT(fv.num_carried, op->num_results);
      return;
    case TSR_SYN_WHILE:
      if (!tsr_opview_while(op, &wv)) break;
      TSR_CHECK(wv.cond && wv.body);
      TSR_CHECK_EQ_INT(wv.num_inits, op->num_results);
      TSR_CHECK_EQ_INT(wv.cond->num_args, wv.num_inits);
      TSR_CHECK_EQ_INT(wv.body->num_args, wv.num_inits);
      return;
    case TSR_SYN_IF:
      if (!tsr_opview_if(op, &iv)) break;
      TSR_CHECK(iv.cond && iv.then_region && iv.else_region);
      return;
    case TSR_SYN_SCOPED:
      if (!tsr_opview_scoped(op, &sv)) break;
      TSR_CHECK(sv.body != NULL);
      for (uint32_t i = 0; i < sv.num_buffers; i++) TSR_CHECK(sv.buffers[i] != NULL);
      return;
    default:
      return;
  }
  TSR_FAIL_AT("op #%u '%s' at %u:%u: its view does not decode", position,
              tsr_op_table[op->opcode].mnemonic, op->loc.line, op->loc.col);
}

/* Every op of every golden kernel decodes through its view, and the
 * memory, DMA and semaphore ones encode back to the same op; the golden
 * test checks that the printer, which prints through the views, still
 * writes the expected text. Every compound op is seen at least once. */
TSR_TEST(views_round_trip_on_golden_kernels) {
  const char *root = getenv("TSR_SOURCE_ROOT");
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/tests/ir/ok", root && *root ? root : ".");
  DIR *d = opendir(dir);
  TSR_CHECK(d != NULL);
  if (!d) return;
  view_counts_t counts = {{0}};
  struct dirent *e;
  uint32_t files = 0;
  while ((e = readdir(d)) != NULL) {
    size_t n = strlen(e->d_name);
    if (n < 4 || strcmp(e->d_name + n - 4, ".tsr") != 0) continue;
    char path[8192];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    tsr_ir_module_t *m = NULL;
    TSR_CHECK_OK(tsr_ir_module_parse_file(path, &m));
    if (!m) continue;
    files++;
    for (uint32_t k = 0; k < m->num_kernels; k++)
      tsr_ir_walk_ops(m->kernels[k], check_op_view, &counts);
    tsr_ir_module_destroy(m);
  }
  closedir(d);
  TSR_CHECK(files > 0);
  static const tsr_opcode_t compound[] = {
      TSR_OP_LOAD,     TSR_OP_STORE,      TSR_OP_SLICE,    TSR_OP_DMA_START,
      TSR_OP_DMA_WAIT, TSR_OP_SEM_SIGNAL, TSR_OP_SEM_WAIT, TSR_OP_SEM_READ,
      TSR_OP_CORE_BARRIER, TSR_OP_FOR,    TSR_OP_WHILE,    TSR_OP_IF,
      TSR_OP_SCOPED,
  };
  for (size_t i = 0; i < sizeof compound / sizeof compound[0]; i++)
    if (!counts.seen[compound[i]])
      TSR_FAIL_AT("no golden kernel uses '%s'", tsr_op_table[compound[i]].mnemonic);
}

/* The lenient decoders describe what is wrong with a malformed op and
 * still give the printer positions to print. */
TSR_TEST(lenient_views_of_malformed_ops) {
  tsr_module_t *m = parse_ok(
      "kernel @k\n"
      "  scratch %s: sem\n"
      "  scratch %d: dma_sem\n"
      "  scratch %v: vmem f32[8]\n"
      "{\n"
      "  %n = const 1 : i32\n"
      "  sem_signal %s, %n\n"
      "  dma_start %v[:] -> %v[:], %d\n"
      "}\n");
  if (!m) return;
  tsr_op_t *sig = m->kernels[0]->body.first->next, *dma = sig->next;
  tsr_sem_view_t sv;
  tsr_dma_view_t dv;
  TSR_CHECK_EQ_INT(tsr_opview_sem_decode(sig, &sv), TSR_OPVIEW_OK);
  TSR_CHECK(!tsr_opview_dma(sig, &dv));
  TSR_CHECK_EQ_INT(tsr_opview_dma_decode(sig, &dv), TSR_OPVIEW_WRONG_OP);
  sig->flags |= TSR_OPF_DEVICE; /* a device flag without a device operand */
  TSR_CHECK_EQ_INT(tsr_opview_sem_decode(sig, &sv), TSR_OPVIEW_OPERANDS);
  TSR_CHECK(!tsr_opview_sem(sig, &sv));
  TSR_CHECK_EQ_INT(sv.device.slot, 1);
  TSR_CHECK(sv.device.value == sig->operands[1]);
  sig->flags = TSR_OPF_CORE | TSR_OPF_DEVICE;
  TSR_CHECK_EQ_INT(tsr_opview_sem_decode(sig, &sv), TSR_OPVIEW_OPERANDS);
  TSR_CHECK_EQ_INT(tsr_opview_dma_decode(dma, &dv), TSR_OPVIEW_OK);
  dma->ints[2] = 3; /* more indices than there are */
  TSR_CHECK_EQ_INT(tsr_opview_dma_decode(dma, &dv), TSR_OPVIEW_COUNTS);
  TSR_CHECK_EQ_INT(dv.sem.count, 0); /* clamped */
  dma->num_ints = 2;
  TSR_CHECK_EQ_INT(tsr_opview_dma_decode(dma, &dv), TSR_OPVIEW_NO_COUNTS);
  dma->num_ints = 3;
  dma->ints[2] = 0;
  dma->flags |= TSR_OPF_CORE; /* a DMA takes no core */
  TSR_CHECK_EQ_INT(tsr_opview_dma_decode(dma, &dv), TSR_OPVIEW_FLAGS);
  tsr_module_destroy(m);
}

int main(void) {
  TSR_RUN(float_literals_round_to_dtype);
  TSR_RUN(integer_literals_and_ranges);
  TSR_RUN(float_printing_is_shortest);
  TSR_RUN(index_forms);
  TSR_RUN(load_store_operand_layout);
  TSR_RUN(attribute_ops);
  TSR_RUN(dma_dynamic_size_layout);
  TSR_RUN(dma_and_semaphore_layout);
  TSR_RUN(control_flow_regions);
  TSR_RUN(empty_yield_and_else_are_omitted);
  TSR_RUN(names_and_scopes);
  TSR_RUN(short_and_general_maps);
  TSR_RUN(header_forms);
  TSR_RUN(locations);
  TSR_RUN(error_messages);
  TSR_RUN(header_errors);
  TSR_RUN(multiple_errors_are_collected);
  TSR_RUN(many_names_grow_the_symbol_table);
  TSR_RUN(recent_block_types_read_as_the_first);
  TSR_RUN(builder_matmul_prints_like_the_text);
  TSR_RUN(canonicalizes_layout);
  TSR_RUN(allocation_failure);
  TSR_RUN(hostile_input);
  TSR_RUN(views_round_trip_on_golden_kernels);
  TSR_RUN(lenient_views_of_malformed_ops);
  return tsr_test_done();
}
