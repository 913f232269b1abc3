/* Tests of the frame's slots (interp/prepare.c, assign_frame_slots): values
 * whose lives do not overlap share a buffer. Each kernel is run twice, as
 * prepared and with every value given a buffer of its own (the layout before
 * slots were shared), and the outputs must be identical bit for bit; the
 * hand-written kernels also check their results against values computed
 * here. The cases are those where a buffer could be reused too early: values
 * used inside loops, loop bounds, both branches of an if, results of region
 * ops, carried values, forwarded stores and aliases (reshape, bitcast); and
 * random kernels that nest them. */
#include <math.h>
#include <stdarg.h>

#include "interp/interp_internal.h"
#include "tests/harness.h"
#include "tests/unit/interp_fixture.h"

/* The layout without sharing: one buffer per value. */
static void give_every_value_its_own_buffer(tsr_interp_program_t *p) {
  uint64_t off = 0;
  for (uint32_t i = 0; i < p->num_values; i++) {
    p->values[i].offset = off;
    uint64_t b = p->values[i].bytes < 8 ? 8 : p->values[i].bytes;
    off += (b + 63) & ~(uint64_t)63;
  }
  p->frame_bytes = off;
}

static void fill_inputs(fixture_t *f, uint64_t seed) {
  for (size_t i = 0; i < f->count; i++) {
    tsr_array_t *a = &f->arrays[i];
    if (a->dtype != TSR_DTYPE_F32) continue;
    float *d = a->data;
    for (int64_t e = 0; e < tsr_array_element_count(a); e++) {
      seed = seed * 6364136223846793005ull + 1442695040888963407ull;
      d[e] = (float)((int)(seed >> 40) % 17 - 8) * 0.25f; /* small, exact */
    }
  }
}

/* Runs `text` with shared slots and without; checks the outputs are equal
 * bit for bit. Leaves the shared run's fixture in *out (teardown it) and the
 * two frames' sizes in the out parameters; on failure returns false, *out
 * torn down. */
static bool run_both(const char *text, uint64_t seed, fixture_t *out, uint64_t *shared_frame,
                     uint64_t *own_frame) {
  fixture_t own;
  tsr_status_t s = setup(out, text, NULL);
  tsr_status_t s_own = setup(&own, text, NULL);
  bool ok = !s && !s_own;
  if (ok) {
    give_every_value_its_own_buffer(own.program);
    if (shared_frame) *shared_frame = out->program->frame_bytes;
    if (own_frame) *own_frame = own.program->frame_bytes;
    fill_inputs(out, seed);
    fill_inputs(&own, seed);
    s = run(out);
    if (!s) s = run(&own);
    ok = !s;
  }
  if (s || s_own) TSR_FAIL_AT("%s\n%s", tsr_status_message(s ? s : s_own), text);
  tsr_status_free(s);
  tsr_status_free(s_own);
  for (size_t i = 0; ok && i < out->count; i++) {
    if (memcmp(out->arrays[i].data, own.arrays[i].data, tsr_array_byte_size(&out->arrays[i]))) {
      TSR_FAIL_AT("operand %zu differs between shared and own buffers:\n%s", i, text);
      ok = false;
    }
  }
  teardown(&own);
  if (!ok) teardown(out);
  return ok;
}

/* A chain of 64 ops keeps two blocks live at a time, not 64. */
TSR_TEST(straight_line_frame_holds_the_live_values_only) {
  char text[8192];
  size_t n = (size_t)snprintf(text, sizeof text,
                              "kernel @k\n"
                              "  in %%x: f32[8, 128] vmem\n"
                              "  out %%o: f32[8, 128] vmem\n"
                              "{\n"
                              "  %%v0 = load %%x[:, :] : f32[8, 128]\n");
  for (int i = 1; i <= 64; i++)
    n += (size_t)snprintf(text + n, sizeof text - n,
                          "  %%v%d = add %%v%d, %%v%d : f32[8, 128]\n", i, i - 1,
                          i == 1 ? 0 : i - 2);
  snprintf(text + n, sizeof text - n, "  store %%o[:, :], %%v64\n}\n");
  fixture_t f;
  uint64_t shared, own;
  if (!run_both(text, 1, &f, &shared, &own)) return;
  TSR_CHECK(shared <= 3 * 4096);
  TSR_CHECK(own >= 65 * 4096);
  /* v_i = v_(i-1) + v_(i-2), in f32 as the kernel computes it */
  float *x = f32(&f, 0), *o = f32(&f, 1);
  for (int e = 0; e < 1024; e += 97) {
    float prev = x[e], cur = x[e] + x[e];
    for (int i = 2; i <= 64; i++) {
      float next = cur + prev;
      prev = cur;
      cur = next;
    }
    TSR_CHECK(o[e] == cur);
  }
  teardown(&f);
}

/* %c is read in every iteration: the body's temporaries must not take its
 * buffer after its use in the first one. */
TSR_TEST(value_used_inside_a_loop_lives_to_the_loop_end) {
  const char *text =
      "kernel @k\n"
      "  in %x: f32[8, 128] vmem\n"
      "  out %o: f32[8, 128] vmem\n"
      "{\n"
      "  %zero = const 0 : i32\n"
      "  %one = const 1 : i32\n"
      "  %four = const 4 : i32\n"
      "  %x0 = load %x[:, :] : f32[8, 128]\n"
      "  %c = mul %x0, %x0 : f32[8, 128]\n"
      "  %r = for %i = %zero to %four step %one iter(%a = %x0) : f32[8, 128] {\n"
      "    %t1 = add %a, %c : f32[8, 128]\n"
      "    %t2 = add %t1, %t1 : f32[8, 128]\n"
      "    %t3 = sub %t2, %t1 : f32[8, 128]\n"
      "    yield %t3\n"
      "  }\n"
      "  store %o[:, :], %r\n"
      "}\n";
  fixture_t f;
  if (!run_both(text, 2, &f, NULL, NULL)) return;
  float *x = f32(&f, 0), *o = f32(&f, 1);
  for (int e = 0; e < 1024; e++)
    if (o[e] != x[e] + 4 * x[e] * x[e]) {
      TSR_FAIL_AT("o[%d] = %g, want %g", e, o[e], x[e] + 4 * x[e] * x[e]);
      break;
    }
  teardown(&f);
}

/* A bound computed before the loop is read by every iteration's test, so
 * the body's scalar temporaries must not take its buffer. */
TSR_TEST(loop_bound_and_step_live_to_the_loop_end) {
  const char *text =
      "kernel @k\n"
      "  out %o: i32[2] smem\n"
      "{\n"
      "  %zero = const 0 : i32\n"
      "  %one = const 1 : i32\n"
      "  %two = const 2 : i32\n"
      "  %three = const 3 : i32\n"
      "  %hi = mul %three, %three : i32\n"
      "  %step = sub %three, %two : i32\n"
      "  %n, %s = for %i = %zero to %hi step %step iter(%c = %zero, %acc = %zero) : i32, i32 {\n"
      "    %t1 = add %i, %i : i32\n"
      "    %t2 = add %t1, %three : i32\n"
      "    %t3 = mul %t2, %t2 : i32\n"
      "    %c1 = add %c, %one : i32\n"
      "    %a1 = add %acc, %t3 : i32\n"
      "    yield %c1, %a1\n"
      "  }\n"
      "  store %o[%zero], %n\n"
      "  store %o[%one], %s\n"
      "}\n";
  fixture_t f;
  if (!run_both(text, 3, &f, NULL, NULL)) return;
  int32_t want = 0;
  for (int i = 0; i < 9; i++) want += (2 * i + 3) * (2 * i + 3);
  TSR_CHECK_EQ_INT(i32(&f, 0)[0], 9);
  TSR_CHECK_EQ_INT(i32(&f, 0)[1], want);
  teardown(&f);
}

/* Both branches of an if (grid step 0 takes one, step 1 the other); the
 * if's result must keep its buffer until its last use after the if, past a
 * temporary defined in between. */
TSR_TEST(if_branches_and_results_keep_their_buffers) {
  const char *text =
      "kernel @k\n"
      "  grid(2) semantics(arbitrary)\n"
      "  in %x: f32[16, 128] vmem block[8, 128] map(%i) -> (%i, 0)\n"
      "  out %o: f32[16, 128] vmem block[8, 128] map(%i) -> (%i, 0)\n"
      "{\n"
      "  %zero = const 0 : i32\n"
      "  %p = program_id 0 : i32\n"
      "  %first = eq %p, %zero : i1\n"
      "  %a = load %x[:, :] : f32[8, 128]\n"
      "  %b = mul %a, %a : f32[8, 128]\n"
      "  %r = if %first : f32[8, 128] {\n"
      "    %t1 = add %a, %a : f32[8, 128]\n"
      "    %t2 = add %t1, %t1 : f32[8, 128]\n"
      "    %t3 = add %t2, %t1 : f32[8, 128]\n"
      "    yield %t3\n"
      "  } else {\n"
      "    %u1 = add %b, %a : f32[8, 128]\n"
      "    %u2 = sub %u1, %a : f32[8, 128]\n"
      "    %u3 = add %u2, %u2 : f32[8, 128]\n"
      "    yield %u3\n"
      "  }\n"
      "  %q = sub %b, %a : f32[8, 128]\n"
      "  %q2 = add %q, %q : f32[8, 128]\n"
      "  %s = add %r, %q2 : f32[8, 128]\n"
      "  store %o[:, :], %s\n"
      "}\n";
  fixture_t f;
  if (!run_both(text, 4, &f, NULL, NULL)) return;
  float *x = f32(&f, 0), *o = f32(&f, 1);
  for (int e = 0; e < 2048; e++) {
    float a = x[e], b = a * a;
    float want = (e < 1024 ? 6 * a : 2 * b) + 2 * (b - a);
    if (o[e] != want) {
      TSR_FAIL_AT("o[%d] = %g, want %g", e, o[e], want);
      break;
    }
  }
  teardown(&f);
}

/* Three carried values rotated each iteration: the moves go through the
 * loop's results as temporaries, so the results keep their buffers through
 * the loop even when unused afterwards (two of them here), and the body's
 * temporaries yielded last must not sit in them. */
TSR_TEST(carried_values_and_unused_results) {
  const char *text =
      "kernel @k\n"
      "  in %x: f32[8, 128] vmem\n"
      "  out %o: f32[8, 128] vmem\n"
      "{\n"
      "  %zero = const 0 : i32\n"
      "  %one = const 1 : i32\n"
      "  %four = const 4 : i32\n"
      "  %a = load %x[:, :] : f32[8, 128]\n"
      "  %b = add %a, %a : f32[8, 128]\n"
      "  %c = mul %a, %a : f32[8, 128]\n"
      "  %r0, %r1, %r2 = for %i = %zero to %four step %one iter(%u = %a, %v = %b, %w = %c) : "
      "f32[8, 128], f32[8, 128], f32[8, 128] {\n"
      "    %ta = add %u, %w : f32[8, 128]\n"
      "    %tb = sub %ta, %v : f32[8, 128]\n"
      "    yield %v, %ta, %tb\n"
      "  }\n"
      "  %z1 = mul %b, %b : f32[8, 128]\n"
      "  %z2 = sub %z1, %z1 : f32[8, 128]\n"
      "  %s = add %r0, %z2 : f32[8, 128]\n"
      "  store %o[:, :], %s\n"
      "}\n";
  fixture_t f;
  if (!run_both(text, 5, &f, NULL, NULL)) return;
  float *x = f32(&f, 0), *o = f32(&f, 1);
  for (int e = 0; e < 1024; e++) {
    float u = x[e], v = 2 * x[e], w = x[e] * x[e];
    for (int i = 0; i < 4; i++) {
      float ta = u + w, tb = ta - v;
      u = v, v = ta, w = tb;
    }
    if (o[e] != u) {
      TSR_FAIL_AT("o[%d] = %g, want %g", e, o[e], u);
      break;
    }
  }
  teardown(&f);
}

/* A forwarded op writes into the store's target, not its buffer; the value
 * loaded back and the values around it keep theirs. */
TSR_TEST(forwarded_stores_and_values_around_them) {
  const char *text =
      "kernel @k\n"
      "  in %x: f32[8, 128] vmem\n"
      "  out %o: f32[8, 128] vmem\n"
      "  out %p: f32[8, 128] vmem\n"
      "{\n"
      "  %a = load %x[:, :] : f32[8, 128]\n"
      "  %b = add %a, %a : f32[8, 128]\n"
      "  store %o[:, :], %b\n"
      "  %c = mul %a, %a : f32[8, 128]\n"
      "  %d = load %o[:, :] : f32[8, 128]\n"
      "  %e = add %d, %c : f32[8, 128]\n"
      "  %g = neg %e : f32[8, 128]\n"
      "  store %o[:, :], %g\n"
      "  %h = sub %c, %d : f32[8, 128]\n"
      "  store %p[:, :], %h\n"
      "}\n";
  fixture_t f;
  if (!run_both(text, 6, &f, NULL, NULL)) return;
  TSR_CHECK(f.program->code[1].forward == 1); /* %b is forwarded */
  float *x = f32(&f, 0), *o = f32(&f, 1), *p = f32(&f, 2);
  for (int e = 0; e < 1024; e++) {
    float a = x[e];
    if (o[e] != -(2 * a + a * a) || p[e] != a * a - 2 * a) {
      TSR_FAIL_AT("o[%d] = %g, p[%d] = %g", e, o[e], e, p[e]);
      break;
    }
  }
  teardown(&f);
}

/* reshape and bitcast results read their operand's buffer: the operand's
 * buffer lives as long as they do, through chains, and into a loop. */
TSR_TEST(aliases_keep_their_root_buffer_alive) {
  const char *text =
      "kernel @k\n"
      "  in %x: f32[8, 128] vmem\n"
      "  out %o: f32[1024] vmem\n"
      "  out %p: i32[8, 128] vmem\n"
      "  out %q: f32[8, 128] vmem\n"
      "{\n"
      "  %zero = const 0 : i32\n"
      "  %one = const 1 : i32\n"
      "  %three = const 3 : i32\n"
      "  %a = load %x[:, :] : f32[8, 128]\n"
      "  %b = add %a, %a : f32[8, 128]\n"
      "  %r = reshape %b : f32[128, 8]\n"
      "  %r2 = reshape %r : f32[1024]\n"
      "  %t1 = mul %a, %a : f32[8, 128]\n"
      "  %t2 = add %t1, %a : f32[8, 128]\n"
      "  %bc = bitcast %t2 : i32[8, 128]\n"
      "  %t3 = sub %t1, %a : f32[8, 128]\n"
      "  %t4 = add %t3, %t3 : f32[8, 128]\n"
      "  %m = reshape %t4 : f32[1024]\n"
      "  %l = for %i = %zero to %three step %one iter(%acc = %a) : f32[8, 128] {\n"
      "    %mm = reshape %m : f32[8, 128]\n"
      "    %s1 = add %acc, %mm : f32[8, 128]\n"
      "    %s2 = add %s1, %s1 : f32[8, 128]\n"
      "    %s3 = sub %s2, %s1 : f32[8, 128]\n"
      "    yield %s3\n"
      "  }\n"
      "  store %o[:], %r2\n"
      "  store %p[:, :], %bc\n"
      "  store %q[:, :], %l\n"
      "}\n";
  fixture_t f;
  if (!run_both(text, 7, &f, NULL, NULL)) return;
  float *x = f32(&f, 0), *o = f32(&f, 1), *q = f32(&f, 3);
  int32_t *p = i32(&f, 2);
  for (int e = 0; e < 1024; e++) {
    float a = x[e], t2 = a * a + a, l = a + 3 * (2 * (a * a - a));
    int32_t bits;
    memcpy(&bits, &t2, 4);
    if (o[e] != 2 * a || p[e] != bits || q[e] != l) {
      TSR_FAIL_AT("o[%d] = %g, p = %d, q = %g; want %g, %d, %g", e, o[e], p[e], q[e], 2 * a,
                  bits, l);
      break;
    }
  }
  teardown(&f);
}

/* A value defined in a loop's body and read in a nested loop lives to the
 * nested loop's end; a while's condition reads a value from outside. */
TSR_TEST(nested_loops_and_while_conditions) {
  const char *text =
      "kernel @k\n"
      "  in %x: f32[8, 128] vmem\n"
      "  out %o: f32[8, 128] vmem\n"
      "  out %n: i32[1] smem\n"
      "{\n"
      "  %zero = const 0 : i32\n"
      "  %one = const 1 : i32\n"
      "  %two = const 2 : i32\n"
      "  %three = const 3 : i32\n"
      "  %ob = const 1.0 : f32[8, 128]\n"
      "  %a = load %x[:, :] : f32[8, 128]\n"
      "  %r = for %i = %zero to %three step %one iter(%acc = %a) : f32[8, 128] {\n"
      "    %d = add %acc, %ob : f32[8, 128]\n"
      "    %in = for %j = %zero to %two step %one iter(%q = %acc) : f32[8, 128] {\n"
      "      %e = add %q, %d : f32[8, 128]\n"
      "      %f = add %e, %e : f32[8, 128]\n"
      "      %g = sub %f, %e : f32[8, 128]\n"
      "      yield %g\n"
      "    }\n"
      "    yield %in\n"
      "  }\n"
      "  %lim = add %three, %two : i32\n"
      "  %c, %v = while iter(%k = %zero, %w = %r) : i32, f32[8, 128] {\n"
      "    %more = lt %k, %lim : i1\n"
      "    condition %more\n"
      "  } do {\n"
      "    %k1 = add %k, %one : i32\n"
      "    %k2 = mul %k1, %k1 : i32\n"
      "    %k3 = sub %k2, %k2 : i32\n"
      "    %k4 = add %k1, %k3 : i32\n"
      "    %w1 = add %w, %a : f32[8, 128]\n"
      "    yield %k4, %w1\n"
      "  }\n"
      "  store %o[:, :], %v\n"
      "  store %n[%zero], %c\n"
      "}\n";
  fixture_t f;
  if (!run_both(text, 8, &f, NULL, NULL)) return;
  TSR_CHECK_EQ_INT(i32(&f, 2)[0], 5);
  float *x = f32(&f, 0), *o = f32(&f, 1);
  for (int e = 0; e < 1024; e++) {
    float acc = x[e];
    for (int i = 0; i < 3; i++) {
      float d = acc + 1, q = acc;
      for (int j = 0; j < 2; j++) {
        float ee = q + d, ff = ee + ee;
        q = ff - ee;
      }
      acc = q;
    }
    for (int k = 0; k < 5; k++) acc += x[e];
    if (o[e] != acc) {
      TSR_FAIL_AT("o[%d] = %g, want %g", e, o[e], acc);
      break;
    }
  }
  teardown(&f);
}

/* Preparation numbers an op's site by a counter in compile order, which
 * must be the pre-order position tsr_ir_walk_ops gives it (program binding
 * finds the same op in another kernel by it): index maps (compiled after
 * the body, numbered first), nested regions, terminators, scoped ops. */
typedef struct walked {
  uint32_t line[64], col[64];
  uint32_t count;
} walked_t;

static void note_walked(void *ctx, const tsr_op_t *op, uint32_t position) {
  walked_t *w = ctx;
  if (position < 64) {
    w->line[position] = op->loc.line;
    w->col[position] = op->loc.col;
  }
  w->count++;
}

TSR_TEST(op_sites_are_walk_positions) {
  const char *text =
      "kernel @k\n"
      "  grid(2, 2) semantics(arbitrary, arbitrary)\n"
      "  in %x: f32[16, 128] vmem block[8, 128] map(%i, %j) {\n"
      "    %z = const 0 : i32\n"
      "    %s = add %i, %z : i32\n"
      "    yield %s, %z\n"
      "  }\n"
      "  in %y: f32[16, 128] vmem block[8, 128] map(%i, %j) {\n"
      "    %z0 = const 0 : i32\n"
      "    %t = mul %i, %j : i32\n"
      "    %u = sub %t, %t : i32\n"
      "    %v = add %u, %i : i32\n"
      "    yield %v, %z0\n"
      "  }\n"
      "  out %o: f32[16, 128] vmem block[8, 128] map(%i, %j) -> (%i, 0)\n"
      "{\n"
      "  %zero = const 0 : i32\n"
      "  %one = const 1 : i32\n"
      "  %two = const 2 : i32\n"
      "  %a = load %x[:, :] : f32[8, 128]\n"
      "  %r = for %k = %zero to %two step %one iter(%c = %a) : f32[8, 128] {\n"
      "    %w = while iter(%n = %zero) : i32 {\n"
      "      %more = lt %n, %one : i1\n"
      "      condition %more\n"
      "    } do {\n"
      "      %n1 = add %n, %one : i32\n"
      "      yield %n1\n"
      "    }\n"
      "    %d = add %c, %c : f32[8, 128]\n"
      "    yield %d\n"
      "  }\n"
      "  %first = eq %k0, %zero : i1\n"
      "  %q = scoped(%buf: vmem f32[8, 128]) : f32[8, 128] {\n"
      "    store %buf[:, :], %r\n"
      "    %l = load %buf[:, :] : f32[8, 128]\n"
      "    yield %l\n"
      "  }\n"
      "  %b = load %y[:, :] : f32[8, 128]\n"
      "  %e = add %q, %b : f32[8, 128]\n"
      "  store %o[:, :], %e\n"
      "}\n";
  /* %k0: the grid index, from program_id */
  char fixed[4096];
  const char *at = strstr(text, "  %first");
  size_t head = (size_t)(at - text);
  snprintf(fixed, sizeof fixed, "%.*s  %%k0 = program_id 0 : i32\n%s", (int)head, text, at);
  fixture_t f;
  tsr_status_t s = setup(&f, fixed, NULL);
  if (s) {
    TSR_FAIL_AT("%s", tsr_status_message(s));
    tsr_status_free(s);
    teardown(&f);
    return;
  }
  walked_t w = {{0}, {0}, 0};
  tsr_ir_walk_ops(tsr_ir_module_kernel(f.module, 0), note_walked, &w);
  const tsr_interp_program_t *p = f.program;
  uint32_t op_sites = 0, scoped_sites = 0;
  for (uint32_t i = 0; i < p->num_sites; i++) {
    const site_t *site = &p->sites[i];
    if (site->origin != SITE_OP && site->origin != SITE_SCOPED) continue;
    if (site->index >= w.count || site->index >= 64) {
      TSR_FAIL_AT("site %u: position %u of %u", i, site->index, w.count);
      continue;
    }
    if (site->loc.line != w.line[site->index] || site->loc.col != w.col[site->index])
      TSR_FAIL_AT("site %u (%s): at %u:%u, the op at position %u is at %u:%u", i, site->what,
                  site->loc.line, site->loc.col, site->index, w.line[site->index],
                  w.col[site->index]);
    if (site->origin == SITE_OP) op_sites++;
    else scoped_sites++;
  }
  TSR_CHECK(op_sites >= 20);
  TSR_CHECK_EQ_INT(scoped_sites, 1);
  TSR_CHECK_OK(run(&f));
  teardown(&f);
}

/* ---- Random kernels: loops, ifs, whiles and aliases nested at random ---- */

typedef struct gen {
  char text[1 << 16];
  size_t len;
  uint64_t rng;
  int next;            /* next value number */
  int pool[512];       /* visible f32[8, 128] values (numbers) */
  int npool;
  int ops;             /* ops left to emit */
} gen_t;

static uint32_t gen_rand(gen_t *g, uint32_t n) {
  g->rng = g->rng * 6364136223846793005ull + 1442695040888963407ull;
  return (uint32_t)(g->rng >> 33) % n;
}

static void gen_put(gen_t *g, int depth, const char *fmt, ...) TSR_PRINTF(3, 4);
static void gen_put(gen_t *g, int depth, const char *fmt, ...) {
  for (int i = 0; i < depth + 1 && g->len + 2 < sizeof g->text; i++) {
    g->text[g->len++] = ' ';
    g->text[g->len++] = ' ';
  }
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(g->text + g->len, sizeof g->text - g->len, fmt, ap);
  va_end(ap);
  if (n > 0) g->len += (size_t)n;
  if (g->len >= sizeof g->text) g->len = sizeof g->text - 1;
}

/* A visible value, mostly a recent one (short lives), sometimes any. */
static int gen_pick(gen_t *g) {
  if (gen_rand(g, 3) == 0) return g->pool[gen_rand(g, (uint32_t)g->npool)];
  uint32_t back = gen_rand(g, g->npool < 4 ? (uint32_t)g->npool : 4);
  return g->pool[g->npool - 1 - (int)back];
}

static int gen_new(gen_t *g) {
  int v = g->next++;
  if (g->npool < 512) g->pool[g->npool++] = v;
  return v;
}

#define T "f32[8, 128]"

static void gen_block(gen_t *g, int depth);

static void gen_op(gen_t *g, int depth) {
  static const char *const binops[] = {"add", "sub", "max", "min"};
  uint32_t kind = gen_rand(g, depth < 2 ? 12 : 9);
  g->ops--;
  if (kind <= 2) {
    int a = gen_pick(g), b = gen_pick(g);
    gen_put(g, depth, "%%v%d = %s %%v%d, %%v%d : " T "\n", gen_new(g), binops[gen_rand(g, 4)],
            a, b);
  } else if (kind == 3) {
    int a = gen_pick(g);
    gen_put(g, depth, "%%v%d = mul %%v%d, %%half : " T "\n", gen_new(g), a);
  } else if (kind == 4) {
    int a = gen_pick(g);
    gen_put(g, depth, "%%v%d = neg %%v%d : " T "\n", gen_new(g), a);
  } else if (kind == 5) {
    int a = gen_pick(g), b = gen_pick(g), c = gen_pick(g), d = gen_pick(g);
    int m = g->next++;
    gen_put(g, depth, "%%m%d = lt %%v%d, %%v%d : i1[8, 128]\n", m, a, b);
    gen_put(g, depth, "%%v%d = select %%m%d, %%v%d, %%v%d : " T "\n", gen_new(g), m, c, d);
  } else if (kind == 6) {
    /* reshape away and back, with another op in between */
    int a = gen_pick(g), r = g->next++;
    gen_put(g, depth, "%%r%d = reshape %%v%d : f32[1024]\n", r, a);
    gen_op(g, depth);
    gen_put(g, depth, "%%v%d = reshape %%r%d : " T "\n", gen_new(g), r);
  } else if (kind == 7) {
    int a = gen_pick(g), r = g->next++;
    gen_put(g, depth, "%%b%d = bitcast %%v%d : i32[8, 128]\n", r, a);
    gen_op(g, depth);
    gen_put(g, depth, "%%v%d = bitcast %%b%d : " T "\n", gen_new(g), r);
  } else if (kind == 8) {
    int a = gen_pick(g);
    gen_put(g, depth, "%%v%d = roll %%v%d, %%sh axis 1 : " T "\n", gen_new(g), a);
  } else if (kind == 9) { /* for */
    int i0 = gen_pick(g), i1 = gen_pick(g);
    int r0 = g->next++, r1 = g->next++, iv = g->next++;
    int saved = g->npool;
    int c0 = gen_new(g), c1 = gen_new(g);
    gen_put(g, depth,
            "%%v%d, %%v%d = for %%i%d = %%zero to %%three step %%one iter(%%v%d = %%v%d, "
            "%%v%d = %%v%d) : " T ", " T " {\n",
            r0, r1, iv, c0, i0, c1, i1);
    gen_block(g, depth + 1);
    int y0 = gen_pick(g), y1 = gen_pick(g);
    gen_put(g, depth + 1, "yield %%v%d, %%v%d\n", y0, y1);
    gen_put(g, depth, "}\n");
    g->npool = saved;
    if (g->npool < 511) g->pool[g->npool++] = r0;
    if (gen_rand(g, 2) && g->npool < 511) g->pool[g->npool++] = r1; /* else unused */
  } else if (kind == 10) { /* if on the grid step */
    int r = g->next++;
    int saved = g->npool;
    gen_put(g, depth, "%%v%d = if %%first : " T " {\n", r);
    gen_block(g, depth + 1);
    gen_put(g, depth + 1, "yield %%v%d\n", gen_pick(g));
    g->npool = saved;
    gen_put(g, depth, "} else {\n");
    gen_block(g, depth + 1);
    gen_put(g, depth + 1, "yield %%v%d\n", gen_pick(g));
    gen_put(g, depth, "}\n");
    g->npool = saved;
    if (g->npool < 512) g->pool[g->npool++] = r;
  } else { /* while: a counter and a block, both regions' arguments named alike */
    int init = gen_pick(g);
    int rc = g->next++, rv = g->next++, k = g->next++, more = g->next++, k1 = g->next++;
    int saved = g->npool;
    int w = gen_new(g);
    gen_put(g, depth, "%%c%d, %%v%d = while iter(%%c%d = %%zero, %%v%d = %%v%d) : i32, " T " {\n",
            rc, rv, k, w, init);
    gen_put(g, depth + 1, "%%m%d = lt %%c%d, %%two : i1\n", more, k);
    gen_put(g, depth + 1, "condition %%m%d\n", more);
    gen_put(g, depth, "} do {\n");
    gen_put(g, depth + 1, "%%c%d = add %%c%d, %%one : i32\n", k1, k);
    gen_block(g, depth + 1);
    gen_put(g, depth + 1, "yield %%c%d, %%v%d\n", k1, gen_pick(g));
    gen_put(g, depth, "}\n");
    g->npool = saved;
    if (g->npool < 512) g->pool[g->npool++] = rv;
  }
}

static void gen_block(gen_t *g, int depth) {
  int n = 1 + (int)gen_rand(g, 6);
  for (int i = 0; i < n && g->ops > 0; i++) gen_op(g, depth);
}

#undef T

static void gen_kernel(gen_t *g, uint64_t seed) {
  memset(g, 0, sizeof *g);
  g->rng = seed * 0x9e3779b97f4a7c15ull + 1;
  g->ops = 40 + (int)gen_rand(g, 60);
  g->len = (size_t)snprintf(g->text, sizeof g->text,
                            "kernel @k\n"
                            "  grid(2) semantics(arbitrary)\n"
                            "  in %%x: f32[16, 128] vmem block[8, 128] map(%%i) -> (%%i, 0)\n"
                            "  out %%o: f32[16, 128] vmem block[8, 128] map(%%i) -> (%%i, 0)\n"
                            "  out %%o2: f32[16, 128] vmem block[8, 128] map(%%i) -> (%%i, 0)\n"
                            "{\n");
  gen_put(g, 0, "%%zero = const 0 : i32\n");
  gen_put(g, 0, "%%one = const 1 : i32\n");
  gen_put(g, 0, "%%two = const 2 : i32\n");
  gen_put(g, 0, "%%three = const 3 : i32\n");
  gen_put(g, 0, "%%sh = const 5 : i32\n");
  gen_put(g, 0, "%%half = const 0.5 : f32\n");
  gen_put(g, 0, "%%p = program_id 0 : i32\n");
  gen_put(g, 0, "%%first = eq %%p, %%zero : i1\n");
  gen_put(g, 0, "%%v%d = load %%x[:, :] : f32[8, 128]\n", gen_new(g));
  gen_put(g, 0, "%%v%d = neg %%v0 : f32[8, 128]\n", gen_new(g));
  while (g->ops > 0) gen_op(g, 0);
  int last = g->pool[g->npool - 1], other = gen_pick(g);
  gen_put(g, 0, "store %%o[:, :], %%v%d\n", last);
  gen_put(g, 0, "store %%o2[:, :], %%v%d\n", other);
  gen_put(g, -1, "}\n");
}

/* 300 random kernels: identical outputs with shared and own buffers, and
 * sharing makes the frames smaller in all. */
TSR_TEST(random_kernels_match_one_buffer_per_value) {
  static gen_t g;
  uint64_t shared_total = 0, own_total = 0;
  int smaller = 0, kernels = 300;
  for (uint64_t seed = 1; seed <= (uint64_t)kernels; seed++) {
    gen_kernel(&g, seed);
    fixture_t f;
    uint64_t shared, own;
    if (!run_both(g.text, seed, &f, &shared, &own)) return;
    teardown(&f);
    shared_total += shared;
    own_total += own;
    smaller += shared < own;
  }
  TSR_CHECK_EQ_INT(smaller, kernels);
  TSR_CHECK(shared_total * 4 < own_total);
}

int main(void) {
  TSR_RUN(straight_line_frame_holds_the_live_values_only);
  TSR_RUN(value_used_inside_a_loop_lives_to_the_loop_end);
  TSR_RUN(loop_bound_and_step_live_to_the_loop_end);
  TSR_RUN(if_branches_and_results_keep_their_buffers);
  TSR_RUN(carried_values_and_unused_results);
  TSR_RUN(forwarded_stores_and_values_around_them);
  TSR_RUN(aliases_keep_their_root_buffer_alive);
  TSR_RUN(nested_loops_and_while_conditions);
  TSR_RUN(op_sites_are_walk_positions);
  TSR_RUN(random_kernels_match_one_buffer_per_value);
  return tsr_test_done();
}
