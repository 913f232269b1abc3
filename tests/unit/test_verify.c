/* Unit tests for the IR verifier on builder-made modules: a valid matmul and
 * control-flow kernel verify; mistakes the text syntax cannot express (use
 * before definition across regions, values from other kernels or index maps,
 * refs and semaphores as arithmetic operands, broken counts in the internal
 * structs, malformed types, deep nesting) give the documented diagnostics;
 * and a sweep over every op with odd operands and attributes never crashes. */
#include <math.h>

#include "ir/ir.h"
#include "tests/harness.h"

/* ---- Building helpers ------------------------------------------------------ */

static const int64_t d128x128[2] = {128, 128};

static tsr_ir_type_t scalar(tsr_dtype_t dt) { return tsr_ir_type_scalar(dt); }
static tsr_ir_type_t vec2(tsr_dtype_t dt, int64_t a, int64_t b) {
  int64_t dims[2] = {a, b};
  return tsr_ir_type_vector(dt, 2, dims);
}
static tsr_ir_index_t full(void) {
  return (tsr_ir_index_t){.kind = TSR_INDEX_FULL, .operand = -1, .stride = 1};
}
static tsr_ir_index_t point_operand(int32_t operand) {
  return (tsr_ir_index_t){.kind = TSR_INDEX_POINT, .operand = operand, .stride = 1};
}

/* Builds an op; fails the test (and returns NULL) if the builder refuses. */
static tsr_ir_op_t *build(tsr_ir_kernel_t *k, tsr_ir_region_t *r, tsr_ir_op_params_t p) {
  tsr_ir_op_t *op = NULL;
  TSR_CHECK_OK(tsr_ir_build_op(k, r, &p, &op));
  return op;
}

static tsr_ir_value_t *result(tsr_ir_op_t *op) { return op ? tsr_ir_op_result(op, 0) : NULL; }

static tsr_ir_value_t *const_i32(tsr_ir_kernel_t *k, tsr_ir_region_t *r, const char *name,
                                 int64_t x) {
  tsr_ir_type_t t = scalar(TSR_DTYPE_I32);
  const char *names[1] = {name};
  return result(build(k, r,
                      (tsr_ir_op_params_t){.mnemonic = "const",
                                           .result_types = &t,
                                           .result_names = names,
                                           .num_results = 1,
                                           .literal.i = x}));
}

static tsr_ir_value_t *const_of(tsr_ir_kernel_t *k, tsr_ir_region_t *r, const char *name,
                                tsr_ir_type_t t) {
  const char *names[1] = {name};
  return result(build(k, r,
                      (tsr_ir_op_params_t){.mnemonic = "const",
                                           .result_types = &t,
                                           .result_names = names,
                                           .num_results = 1}));
}

static tsr_ir_value_t *binary(tsr_ir_kernel_t *k, tsr_ir_region_t *r, const char *mnemonic,
                              const char *name, tsr_ir_value_t *a, tsr_ir_value_t *b,
                              tsr_ir_type_t t) {
  tsr_ir_value_t *ops[2] = {a, b};
  const char *names[1] = {name};
  return result(build(k, r,
                      (tsr_ir_op_params_t){.mnemonic = mnemonic,
                                           .operands = ops,
                                           .num_operands = 2,
                                           .result_types = &t,
                                           .result_names = names,
                                           .num_results = 1}));
}

/* load %ref[:, :] : f32[128, 128] */
static tsr_ir_value_t *load_full(tsr_ir_kernel_t *k, tsr_ir_region_t *r, const char *name,
                                 tsr_ir_value_t *ref) {
  tsr_ir_index_t idx[2] = {full(), full()};
  tsr_ir_type_t t = vec2(TSR_DTYPE_F32, 128, 128);
  const char *names[1] = {name};
  return result(build(k, r,
                      (tsr_ir_op_params_t){.mnemonic = "load",
                                           .operands = &ref,
                                           .num_operands = 1,
                                           .result_types = &t,
                                           .result_names = names,
                                           .num_results = 1,
                                           .indices = idx,
                                           .num_indices = 2}));
}

static void store_full(tsr_ir_kernel_t *k, tsr_ir_region_t *r, tsr_ir_value_t *ref,
                       tsr_ir_value_t *value) {
  tsr_ir_index_t idx[2] = {full(), full()};
  tsr_ir_value_t *ops[2] = {ref, value};
  build(k, r,
        (tsr_ir_op_params_t){.mnemonic = "store",
                             .operands = ops,
                             .num_operands = 2,
                             .indices = idx,
                             .num_indices = 2});
}

static tsr_ir_op_t *if_op(tsr_ir_kernel_t *k, tsr_ir_region_t *r, tsr_ir_value_t *cond) {
  return build(k, r,
               (tsr_ir_op_params_t){.mnemonic = "if", .operands = &cond, .num_operands = 1});
}

/* yield of `n` grid indices picked by `which` in an index map. */
static void map_yield(tsr_ir_kernel_t *k, tsr_ir_region_t *map, uint32_t a, uint32_t b) {
  tsr_ir_value_t *ops[2] = {tsr_ir_region_arg(map, a), tsr_ir_region_arg(map, b)};
  build(k, map, (tsr_ir_op_params_t){.mnemonic = "yield", .operands = ops, .num_operands = 2});
}

/* A kernel with the grid and operands of docs/ir.md's matmul: grid(4, 4, 8),
 * in %a, in %b, out %c (blocks 128x128), scratch %acc. Maps are built. */
typedef struct mm {
  tsr_ir_module_t *module;
  tsr_ir_kernel_t *k;
  tsr_ir_region_t *body;
  tsr_ir_value_t *a, *b, *c, *acc;
  tsr_ir_region_t *map_a;
} mm_t;

static mm_t mm_header(const char *kernel_name) {
  mm_t m;
  memset(&m, 0, sizeof m);
  TSR_CHECK_OK(tsr_ir_module_create("b.tsr", &m.module));
  TSR_CHECK_OK(tsr_ir_kernel_create(m.module, kernel_name, &m.k));
  int64_t grid[3] = {4, 4, 8};
  tsr_ir_dim_semantics_t sem[3] = {TSR_DIM_PARALLEL, TSR_DIM_PARALLEL, TSR_DIM_ARBITRARY};
  TSR_CHECK_OK(tsr_ir_kernel_set_grid(m.k, 3, grid, sem));
  int64_t da[2] = {512, 1024}, db[2] = {1024, 512}, dc[2] = {512, 512};
  tsr_ir_region_t *map_b, *map_c;
  TSR_CHECK_OK(tsr_ir_kernel_add_operand(
      m.k,
      &(tsr_ir_operand_params_t){TSR_ROLE_IN, "a", tsr_ir_type_vector(TSR_DTYPE_F32, 2, da),
                                 TSR_SPACE_VMEM, d128x128, -1},
      &m.a, &m.map_a));
  TSR_CHECK_OK(tsr_ir_kernel_add_operand(
      m.k,
      &(tsr_ir_operand_params_t){TSR_ROLE_IN, "b", tsr_ir_type_vector(TSR_DTYPE_F32, 2, db),
                                 TSR_SPACE_VMEM, d128x128, -1},
      &m.b, &map_b));
  TSR_CHECK_OK(tsr_ir_kernel_add_operand(
      m.k,
      &(tsr_ir_operand_params_t){TSR_ROLE_OUT, "c", tsr_ir_type_vector(TSR_DTYPE_F32, 2, dc),
                                 TSR_SPACE_VMEM, d128x128, -1},
      &m.c, &map_c));
  TSR_CHECK_OK(tsr_ir_kernel_add_operand(
      m.k,
      &(tsr_ir_operand_params_t){
          .role = TSR_ROLE_SCRATCH,
          .name = "acc",
          .array = tsr_ir_type_ref(TSR_SPACE_VMEM, TSR_DTYPE_F32, 2, d128x128)},
      &m.acc, NULL));
  map_yield(m.k, m.map_a, 0, 2);
  map_yield(m.k, map_b, 2, 1);
  map_yield(m.k, map_c, 0, 1);
  m.body = tsr_ir_kernel_body(m.k);
  return m;
}

/* The whole docs/ir.md matmul body. */
static mm_t mm_full(void) {
  mm_t m = mm_header("matmul");
  tsr_ir_kernel_t *k = m.k;
  tsr_ir_region_t *body = m.body;
  tsr_ir_type_t i32 = scalar(TSR_DTYPE_I32), i1 = scalar(TSR_DTYPE_I1);
  tsr_ir_type_t f = vec2(TSR_DTYPE_F32, 128, 128);
  int64_t axis2 = 2;
  tsr_ir_value_t *kk = result(build(k, body,
                                    (tsr_ir_op_params_t){.mnemonic = "program_id",
                                                         .result_types = &i32,
                                                         .num_results = 1,
                                                         .ints = &axis2,
                                                         .num_ints = 1}));
  tsr_ir_value_t *first = binary(k, body, "eq", "first", kk, const_i32(k, body, "zero", 0), i1);
  tsr_ir_op_t *if1 = if_op(k, body, first);
  if (if1) {
    tsr_ir_region_t *then = tsr_ir_op_region(if1, 0);
    store_full(k, then, m.acc, const_of(k, then, "z", f));
  }
  tsr_ir_value_t *x = load_full(k, body, "x", m.a);
  tsr_ir_value_t *y = load_full(k, body, "y", m.b);
  tsr_ir_value_t *s = load_full(k, body, "s", m.acc);
  tsr_ir_value_t *dops[3] = {x, y, s};
  tsr_ir_value_t *p = result(build(k, body,
                                   (tsr_ir_op_params_t){.mnemonic = "dot",
                                                        .operands = dops,
                                                        .num_operands = 3,
                                                        .result_types = &f,
                                                        .num_results = 1}));
  store_full(k, body, m.acc, p);
  tsr_ir_value_t *last = binary(k, body, "eq", "last", kk, const_i32(k, body, "seven", 7), i1);
  tsr_ir_op_t *if2 = if_op(k, body, last);
  if (if2) {
    tsr_ir_region_t *then = tsr_ir_op_region(if2, 0);
    store_full(k, then, m.c, load_full(k, then, "r", m.acc));
  }
  return m;
}

/* Verifies and compares the whole message ("" = verifies). */
static void check_message(tsr_ir_module_t *module, const char *want) {
  tsr_status_t s = tsr_ir_module_verify(module);
  if (!*want) {
    TSR_CHECK_OK(s);
    return;
  }
  TSR_CHECK_EQ_INT(tsr_status_code(s), TSR_VERIFY_ERROR);
  TSR_CHECK_EQ_STR(tsr_status_message(s), want);
  tsr_status_free(s);
}

/* ---- Valid modules ------------------------------------------------------------ */

TSR_TEST(builder_matmul_verifies) {
  mm_t m = mm_full();
  check_message(m.module, "");
  tsr_ir_module_destroy(m.module);
}

/* Every order of the three semantics over a 3-dim grid: the order
 * tsr_ir_dim_semantics_order makes verifies, keeps what was already in order
 * and makes only dims after an arbitrary one arbitrary; the raw order
 * verifies exactly when it was already in order. */
TSR_TEST(dim_semantics_order_is_the_verifiers) {
  for (int code = 0; code < 27; code++) {
    tsr_ir_dim_semantics_t raw[3] = {code % 3, code / 3 % 3, code / 9};
    tsr_ir_dim_semantics_t ordered[3] = {raw[0], raw[1], raw[2]};
    tsr_ir_dim_semantics_order(3, ordered);
    bool in_order = true, arbitrary = false;
    for (int i = 0; i < 3; i++) {
      if (arbitrary && raw[i] != TSR_DIM_ARBITRARY) in_order = false;
      TSR_CHECK_EQ_INT(ordered[i], arbitrary ? TSR_DIM_ARBITRARY : raw[i]);
      arbitrary = arbitrary || raw[i] == TSR_DIM_ARBITRARY;
    }
    for (int pass = 0; pass < 2; pass++) {
      const tsr_ir_dim_semantics_t *sem = pass ? ordered : raw;
      int cores = (sem[0] == TSR_DIM_CORE_PARALLEL) + (sem[1] == TSR_DIM_CORE_PARALLEL) +
                  (sem[2] == TSR_DIM_CORE_PARALLEL);
      tsr_ir_module_t *module;
      tsr_ir_kernel_t *k;
      TSR_CHECK_OK(tsr_ir_module_create("s.tsr", &module));
      TSR_CHECK_OK(tsr_ir_kernel_create(module, "k", &k));
      int64_t grid[3] = {2, 2, 2};
      TSR_CHECK_OK(tsr_ir_kernel_set_grid(k, 3, grid, sem));
      tsr_status_t s = tsr_ir_module_verify(module);
      /* Two core_parallel dims are an error of their own, in any order. */
      bool want_ok = cores < 2 && (pass || in_order);
      if (want_ok != (s == NULL))
        TSR_FAIL_AT("semantics %d %d %d (%s): %s", raw[0], raw[1], raw[2],
                    pass ? "ordered" : "raw", s ? tsr_status_message(s) : "verifies");
      tsr_status_free(s);
      tsr_ir_module_destroy(module);
    }
  }
}

/* for with a carried value, while, scoped, select, reduce: all valid. */
TSR_TEST(builder_control_flow_verifies) {
  mm_t m = mm_header("k");
  tsr_ir_kernel_t *k = m.k;
  tsr_ir_region_t *body = m.body;
  tsr_ir_type_t i32 = scalar(TSR_DTYPE_I32), f = vec2(TSR_DTYPE_F32, 128, 128);
  tsr_ir_value_t *lo = const_i32(k, body, "lo", 0), *hi = const_i32(k, body, "hi", 4);
  tsr_ir_value_t *st = const_i32(k, body, "st", 1);
  tsr_ir_value_t *x0 = load_full(k, body, "x0", m.a);
  tsr_ir_value_t *fops[4] = {lo, hi, st, x0};
  tsr_ir_type_t fargs[2] = {i32, f};
  const char *fnames[2] = {"i", "x"};
  tsr_ir_op_t *loop = build(k, body,
                            (tsr_ir_op_params_t){.mnemonic = "for",
                                                 .operands = fops,
                                                 .num_operands = 4,
                                                 .result_types = &f,
                                                 .num_results = 1,
                                                 .region_arg_types = fargs,
                                                 .region_arg_names = fnames,
                                                 .num_region_args = 2});
  if (!loop) return;
  tsr_ir_region_t *lb = tsr_ir_op_region(loop, 0);
  tsr_ir_value_t *x = tsr_ir_region_arg(lb, 1);
  tsr_ir_value_t *x1 = binary(k, lb, "add", "x1", x, x, f);
  build(k, lb, (tsr_ir_op_params_t){.mnemonic = "yield", .operands = &x1, .num_operands = 1});
  tsr_ir_value_t *sum = tsr_ir_op_result(loop, 0);

  /* %n = while iter(%v = %lo) : i32 { %c = lt %v, %hi; condition %c } do { yield %v + 1 } */
  const char *wnames[1] = {"v"};
  tsr_ir_op_t *w = build(k, body,
                         (tsr_ir_op_params_t){.mnemonic = "while",
                                              .operands = &lo,
                                              .num_operands = 1,
                                              .result_types = &i32,
                                              .num_results = 1,
                                              .region_arg_types = &i32,
                                              .region_arg_names = wnames,
                                              .num_region_args = 1});
  if (!w) return;
  tsr_ir_region_t *wc = tsr_ir_op_region(w, 0), *wb = tsr_ir_op_region(w, 1);
  tsr_ir_value_t *c = binary(k, wc, "lt", "c", tsr_ir_region_arg(wc, 0), hi, scalar(TSR_DTYPE_I1));
  build(k, wc, (tsr_ir_op_params_t){.mnemonic = "condition", .operands = &c, .num_operands = 1});
  tsr_ir_value_t *v1 = binary(k, wb, "add", "v1", tsr_ir_region_arg(wb, 0), st, i32);
  build(k, wb, (tsr_ir_op_params_t){.mnemonic = "yield", .operands = &v1, .num_operands = 1});

  /* scoped(%buf: vmem f32[128, 128]) { store %buf, %sum; %t = load %buf; store %c, %t } */
  tsr_ir_type_t buf_t = tsr_ir_type_ref(TSR_SPACE_VMEM, TSR_DTYPE_F32, 2, d128x128);
  const char *snames[1] = {"buf"};
  tsr_ir_op_t *sc = build(k, body,
                          (tsr_ir_op_params_t){.mnemonic = "scoped",
                                               .region_arg_types = &buf_t,
                                               .region_arg_names = snames,
                                               .num_region_args = 1});
  if (!sc) return;
  tsr_ir_region_t *sb = tsr_ir_op_region(sc, 0);
  tsr_ir_value_t *buf = tsr_ir_region_arg(sb, 0);
  store_full(k, sb, buf, sum);
  store_full(k, sb, m.c, load_full(k, sb, "t", buf));

  /* %r = reduce_sum %sum axes [1] : f32[128]; select on a compare */
  int64_t axes = 1, dims1[1] = {128};
  tsr_ir_type_t r_t = tsr_ir_type_vector(TSR_DTYPE_F32, 1, dims1);
  tsr_ir_value_t *red = result(build(k, body,
                                     (tsr_ir_op_params_t){.mnemonic = "reduce_sum",
                                                          .operands = &sum,
                                                          .num_operands = 1,
                                                          .result_types = &r_t,
                                                          .num_results = 1,
                                                          .ints = &axes,
                                                          .num_ints = 1}));
  tsr_ir_value_t *pos = binary(k, body, "gt", "pos", red, red,
                               tsr_ir_type_vector(TSR_DTYPE_I1, 1, dims1));
  tsr_ir_value_t *sops[3] = {pos, red, red};
  build(k, body,
        (tsr_ir_op_params_t){.mnemonic = "select",
                             .operands = sops,
                             .num_operands = 3,
                             .result_types = &r_t,
                             .num_results = 1});
  check_message(m.module, "");
  tsr_ir_module_destroy(m.module);
}

/* ---- Visibility ----------------------------------------------------------------- */

/* A value defined inside an `if` is not visible after it. */
TSR_TEST(value_from_inner_region_not_visible_after_it) {
  mm_t m = mm_header("k");
  tsr_ir_value_t *t = const_of(m.k, m.body, "t", scalar(TSR_DTYPE_I1));
  tsr_ir_op_t *iff = if_op(m.k, m.body, t);
  if (!iff) return;
  tsr_ir_value_t *inner = const_i32(m.k, tsr_ir_op_region(iff, 0), "inner", 1);
  binary(m.k, m.body, "add", "sum", inner, inner, scalar(TSR_DTYPE_I32));
  check_message(m.module,
                "b.tsr:0:0: error: 'add' operand #1 (%inner) is not visible here: it is "
                "defined in a region that does not enclose this use\n"
                "b.tsr:0:0: error: 'add' operand #2 (%inner) is not visible here: it is "
                "defined in a region that does not enclose this use");
  tsr_ir_module_destroy(m.module);
}

/* An op appended to an earlier region may use a value defined later. */
TSR_TEST(use_before_definition_across_regions) {
  mm_t m = mm_header("k");
  tsr_ir_value_t *t = const_of(m.k, m.body, "t", scalar(TSR_DTYPE_I1));
  tsr_ir_op_t *iff = if_op(m.k, m.body, t);
  if (!iff) return;
  tsr_ir_value_t *later = const_i32(m.k, m.body, "later", 3);
  binary(m.k, tsr_ir_op_region(iff, 0), "mul", "early", later, later, scalar(TSR_DTYPE_I32));
  check_message(m.module,
                "b.tsr:0:0: error: 'mul' operand #1 (%later) is used before its definition\n"
                "b.tsr:0:0: error: 'mul' operand #2 (%later) is used before its definition");
  tsr_ir_module_destroy(m.module);
}

TSR_TEST(index_map_values_and_body_values_do_not_mix) {
  mm_t m = mm_header("k");
  /* the body uses the map's argument; the map of %a uses a body value. */
  tsr_ir_value_t *g0 = tsr_ir_region_arg(m.map_a, 0);
  binary(m.k, m.body, "add", "s", g0, g0, scalar(TSR_DTYPE_I32));
  /* a second kernel whose index map yields a value of its body */
  int64_t d1[1] = {16};
  tsr_ir_region_t *map_x;
  tsr_ir_kernel_t *k2;
  TSR_CHECK_OK(tsr_ir_kernel_create(m.module, "k2", &k2));
  int64_t g[1] = {2};
  TSR_CHECK_OK(tsr_ir_kernel_set_grid(k2, 1, g, NULL));
  int64_t blk[1] = {8};
  tsr_ir_value_t *xref;
  TSR_CHECK_OK(tsr_ir_kernel_add_operand(
      k2,
      &(tsr_ir_operand_params_t){TSR_ROLE_IN, "x", tsr_ir_type_vector(TSR_DTYPE_F32, 1, d1),
                                 TSR_SPACE_VMEM, blk, -1},
      &xref, &map_x));
  tsr_ir_value_t *body_val = const_i32(k2, tsr_ir_kernel_body(k2), "bv", 0);
  build(k2, map_x, (tsr_ir_op_params_t){.mnemonic = "yield", .operands = &body_val, .num_operands = 1});
  check_message(m.module,
                "b.tsr:0:0: error: 'add' operand #1 (%a.g0) is defined in the index map of %a "
                "and not visible in the kernel body\n"
                "b.tsr:0:0: error: 'add' operand #2 (%a.g0) is defined in the index map of %a "
                "and not visible in the kernel body\n"
                "b.tsr:0:0: error: 'yield' operand #1 (%bv) is defined in the kernel body and "
                "not visible in the index map of %x");
  tsr_ir_module_destroy(m.module);
}

/* Index maps may load only from prefetch refs. */
TSR_TEST(index_map_loads_only_from_prefetch) {
  tsr_ir_module_t *module;
  tsr_ir_kernel_t *k;
  TSR_CHECK_OK(tsr_ir_module_create("b.tsr", &module));
  TSR_CHECK_OK(tsr_ir_kernel_create(module, "k", &k));
  int64_t g[1] = {4}, d16[1] = {16}, blk[1] = {4};
  TSR_CHECK_OK(tsr_ir_kernel_set_grid(k, 1, g, NULL));
  tsr_ir_value_t *tbl, *x;
  tsr_ir_region_t *map;
  TSR_CHECK_OK(tsr_ir_kernel_add_operand(
      k,
      &(tsr_ir_operand_params_t){TSR_ROLE_PREFETCH, "tbl", tsr_ir_type_vector(TSR_DTYPE_I32, 1, d16),
                                 TSR_SPACE_SMEM, NULL, -1},
      &tbl, NULL));
  TSR_CHECK_OK(tsr_ir_kernel_add_operand(
      k,
      &(tsr_ir_operand_params_t){TSR_ROLE_IN, "x", tsr_ir_type_vector(TSR_DTYPE_I32, 1, d16),
                                 TSR_SPACE_SMEM, blk, -1},
      &x, &map));
  tsr_ir_type_t i32 = scalar(TSR_DTYPE_I32);
  tsr_ir_value_t *ops[2] = {tbl, tsr_ir_region_arg(map, 0)};
  tsr_ir_index_t pt = point_operand(1);
  tsr_ir_value_t *t = result(build(k, map,
                                   (tsr_ir_op_params_t){.mnemonic = "load",
                                                        .operands = ops,
                                                        .num_operands = 2,
                                                        .result_types = &i32,
                                                        .num_results = 1,
                                                        .indices = &pt,
                                                        .num_indices = 1}));
  ops[0] = x;
  tsr_ir_value_t *u = result(build(k, map,
                                   (tsr_ir_op_params_t){.mnemonic = "load",
                                                        .operands = ops,
                                                        .num_operands = 2,
                                                        .result_types = &i32,
                                                        .num_results = 1,
                                                        .indices = &pt,
                                                        .num_indices = 1}));
  tsr_ir_value_t *s = binary(k, map, "add", "s", t, u, i32);
  build(k, map, (tsr_ir_op_params_t){.mnemonic = "yield", .operands = &s, .num_operands = 1});
  check_message(module,
                "b.tsr:0:0: error: 'load' operand #1 (%x) is not visible in the index map of "
                "%x: index maps can only use their arguments and prefetch refs");
  tsr_ir_module_destroy(module);
}

TSR_TEST(value_of_another_kernel) {
  mm_t m = mm_header("k");
  tsr_ir_kernel_t *other;
  TSR_CHECK_OK(tsr_ir_kernel_create(m.module, "other", &other));
  /* enough values in `other` that the foreign id is in range of k too */
  tsr_ir_value_t *foreign = NULL;
  for (int i = 0; i < 3; i++) foreign = const_i32(other, tsr_ir_kernel_body(other), NULL, i);
  binary(m.k, m.body, "add", "s", foreign, foreign, scalar(TSR_DTYPE_I32));
  tsr_status_t s = tsr_ir_module_verify(m.module);
  TSR_CHECK(strstr(tsr_status_message(s),
                   "'add' operand #1 (%v2) does not belong to kernel @k") != NULL);
  tsr_status_free(s);
  tsr_ir_module_destroy(m.module);
}

/* ---- Refs and semaphores as operands ------------------------------------------- */

TSR_TEST(ref_as_arithmetic_operand) {
  mm_t m = mm_header("k");
  binary(m.k, m.body, "add", "s", m.acc, m.acc, vec2(TSR_DTYPE_F32, 128, 128));
  build(m.k, m.body, (tsr_ir_op_params_t){.mnemonic = "print", .text = "{}",
                                          .operands = &m.a, .num_operands = 1});
  check_message(m.module,
                "b.tsr:0:0: error: 'add' operand #1 (%acc): a ref can only be the ref operand "
                "of load, store or a DMA, found vmem f32[128, 128]\n"
                "b.tsr:0:0: error: 'add' operand #2 (%acc): a ref can only be the ref operand "
                "of load, store or a DMA, found vmem f32[128, 128]\n"
                "b.tsr:0:0: error: 'print' operand #1 (%a): a ref can only be the ref operand "
                "of load, store or a DMA, found vmem f32[128, 128]");
  tsr_ir_module_destroy(m.module);
}

TSR_TEST(semaphore_outside_semaphore_ops) {
  mm_t m = mm_header("k");
  int64_t two = 2;
  tsr_ir_value_t *sem;
  TSR_CHECK_OK(tsr_ir_kernel_add_operand(
      m.k,
      &(tsr_ir_operand_params_t){.role = TSR_ROLE_SCRATCH,
                                 .name = "sem",
                                 .array = tsr_ir_type_sem(TSR_SEM_DMA, 1, &two)},
      &sem, NULL));
  tsr_ir_index_t pt = {.kind = TSR_INDEX_POINT, .operand = -1, .start = 0};
  tsr_ir_type_t i32 = scalar(TSR_DTYPE_I32);
  build(m.k, m.body,
        (tsr_ir_op_params_t){.mnemonic = "load",
                             .operands = &sem,
                             .num_operands = 1,
                             .result_types = &i32,
                             .num_results = 1,
                             .indices = &pt,
                             .num_indices = 1});
  build(m.k, m.body, (tsr_ir_op_params_t){.mnemonic = "yield", .operands = &sem, .num_operands = 1});
  check_message(m.module,
                "b.tsr:0:0: error: 'load' operand #1 (%sem): a semaphore can only be the "
                "semaphore operand of a semaphore or DMA op, found dma_sem[2]\n"
                "b.tsr:0:0: error: 'yield' operand #1 (%sem): a semaphore can only be the "
                "semaphore operand of a semaphore or DMA op, found dma_sem[2]\n"
                "b.tsr:0:0: error: 'yield' cannot end a kernel body");
  tsr_ir_module_destroy(m.module);
}

/* ---- DMA and semaphore ops ----------------------------------------------------- */

/* Adds `scratch %dsem: dma_sem[2]` to m. */
static tsr_ir_value_t *add_dma_sem(mm_t *m) {
  int64_t two = 2;
  tsr_ir_value_t *dsem = NULL;
  TSR_CHECK_OK(tsr_ir_kernel_add_operand(
      m->k,
      &(tsr_ir_operand_params_t){.role = TSR_ROLE_SCRATCH,
                                 .name = "dsem",
                                 .array = tsr_ir_type_sem(TSR_SEM_DMA, 1, &two)},
      &dsem, NULL));
  return dsem;
}

/* The parser's operand layout (ir/parse.c), built by hand, verifies and
 * prints as the text form. */
TSR_TEST(dma_with_send_built_like_the_parser) {
  mm_t m = mm_header("k");
  tsr_ir_value_t *dsem = add_dma_sem(&m);
  tsr_ir_value_t *i = const_i32(m.k, m.body, "i", 1), *d = const_i32(m.k, m.body, "d", 0);
  /* dma_start %a[:, :] -> %acc[:, :], %dsem[%i] send %dsem[0] device %d */
  tsr_ir_value_t *ops[6] = {m.a, m.acc, dsem, dsem, i, d};
  tsr_ir_index_t idx[6] = {full(), full(), full(), full(), point_operand(4),
                           {.kind = TSR_INDEX_POINT, .operand = -1, .start = 0, .size = 1,
                            .stride = 1}};
  int64_t counts[3] = {2, 2, 1};
  build(m.k, m.body,
        (tsr_ir_op_params_t){.mnemonic = "dma_start", .operands = ops, .num_operands = 6,
                             .indices = idx, .num_indices = 6, .ints = counts, .num_ints = 3,
                             .flags = TSR_OPF_SEND | TSR_OPF_DEVICE});
  check_message(m.module, "");
  char *text = tsr_ir_module_print(m.module);
  TSR_CHECK(text && strstr(text, "  dma_start %a[:, :] -> %acc[:, :], %dsem[%i] send %dsem[0] "
                                 "device %d\n") != NULL);
  tsr_ir_string_free(text);
  tsr_ir_module_destroy(m.module);
}

/* Index counts, flags and operand positions the text cannot get wrong. */
TSR_TEST(dma_counts_in_internal_structs) {
  mm_t m = mm_header("k");
  tsr_ir_value_t *dsem = add_dma_sem(&m);
  tsr_ir_value_t *i = const_i32(m.k, m.body, "i", 1);
  tsr_ir_value_t *ops[5] = {m.a, m.acc, dsem, i, i};
  tsr_ir_index_t idx[5] = {full(), full(), full(), full(), point_operand(3)};
  int64_t ok_counts[3] = {2, 2, 1}, two_counts[2] = {2, 2}, bad_counts[3] = {2, 2, 2},
          negative[3] = {3, 2, -1};
  struct {
    const char *mnemonic;
    uint32_t num_operands, num_indices, num_ints, flags;
    const int64_t *ints;
    const tsr_ir_index_t *indices;
  } cases[] = {
      {"dma_start", 4, 5, 2, 0, two_counts, idx},
      {"dma_start", 4, 5, 3, 0, bad_counts, idx},
      {"dma_start", 4, 5, 3, 0, negative, idx},
      {"dma_start", 3, 4, 3, TSR_OPF_SEND, ok_counts, idx},
      {"dma_wait", 4, 5, 3, TSR_OPF_SEND | TSR_OPF_DMA_ADD, ok_counts, idx},
      {"dma_start", 4, 5, 3, TSR_OPF_CORE, ok_counts, idx},
  };
  for (size_t c = 0; c < TSR_ARRAY_SIZE(cases); c++)
    build(m.k, m.body,
          (tsr_ir_op_params_t){.mnemonic = cases[c].mnemonic,
                               .operands = ops,
                               .num_operands = cases[c].num_operands,
                               .indices = cases[c].indices,
                               .num_indices = cases[c].num_indices,
                               .ints = cases[c].ints,
                               .num_ints = cases[c].num_ints,
                               .flags = cases[c].flags});
  /* one index operand used by the source and by the semaphore */
  tsr_ir_index_t shared[5] = {point_operand(3), full(), full(), full(), point_operand(3)};
  int64_t shared_counts[3] = {2, 2, 1};
  build(m.k, m.body,
        (tsr_ir_op_params_t){.mnemonic = "dma_start", .operands = ops, .num_operands = 4,
                             .indices = shared, .num_indices = 5, .ints = shared_counts,
                             .num_ints = 3});
  /* sem ops: a core flag without its operand, a device on sem_wait */
  build(m.k, m.body,
        (tsr_ir_op_params_t){.mnemonic = "sem_signal", .operands = ops + 2, .num_operands = 2,
                             .indices = idx + 4, .num_indices = 1, .flags = TSR_OPF_CORE});
  build(m.k, m.body,
        (tsr_ir_op_params_t){.mnemonic = "sem_wait", .operands = ops + 2, .num_operands = 3,
                             .flags = TSR_OPF_DEVICE});
  check_message(
      m.module,
      "b.tsr:0:0: error: 'dma_start' needs 3 index counts (of the source, destination and "
      "semaphore), found 2\n"
      "b.tsr:0:0: error: 'dma_start' index counts 2, 2, 2 (source, destination, semaphore) do "
      "not match its 5 indices\n"
      "b.tsr:0:0: error: 'dma_start' index counts 3, 2, -1 (source, destination, semaphore) do "
      "not match its 5 indices\n"
      "b.tsr:0:0: error: 'dma_start' with a send semaphore takes at least 4 operands, found 3\n"
      "b.tsr:0:0: error: 'dma_wait' takes no 'send' semaphore\n"
      "b.tsr:0:0: error: 'dma_wait' takes no 'add'\n"
      "b.tsr:0:0: error: 'dma_start' takes no 'core' operand\n"
      "b.tsr:0:0: error: 'dma_start' index 0 of %dsem uses operand #4, already used by the "
      "index of another view\n"
      "b.tsr:0:0: error: 'dma_start' source and destination views differ: %a gives f32[128], "
      "%acc gives f32[128, 128] (a DMA copies between views of the same shape and dtype)\n"
      "b.tsr:0:0: error: 'sem_signal' with a core takes at least 3 operands, found 2\n"
      "b.tsr:0:0: error: 'sem_wait' takes no 'device' operand");
  tsr_ir_module_destroy(m.module);
}

/* ---- Broken structures ---------------------------------------------------------- */

TSR_TEST(wrong_counts_in_internal_structs) {
  mm_t m = mm_header("k");
  tsr_ir_value_t *one = const_i32(m.k, m.body, "one", 1);
  tsr_ir_value_t *t = const_of(m.k, m.body, "t", scalar(TSR_DTYPE_I1));
  tsr_ir_op_t *iff = if_op(m.k, m.body, t);
  tsr_ir_value_t *s = binary(m.k, m.body, "add", "s", one, one, scalar(TSR_DTYPE_I32));
  int64_t axis = 0;
  tsr_ir_type_t i32 = scalar(TSR_DTYPE_I32);
  tsr_ir_op_t *pid = build(m.k, m.body,
                           (tsr_ir_op_params_t){.mnemonic = "program_id",
                                                .result_types = &i32,
                                                .num_results = 1,
                                                .ints = &axis,
                                                .num_ints = 1});
  if (!iff || !s || !pid) return;
  iff->num_regions = 1;       /* an if has two regions */
  s->def->num_operands = 1;   /* add takes two */
  pid->num_ints = 0;          /* program_id needs its axis */
  check_message(m.module,
                "b.tsr:0:0: error: 'if' has 2 regions, found 1\n"
                "b.tsr:0:0: error: 'add' takes 2 operands, found 1\n"
                "b.tsr:0:0: error: 'program_id' needs 1 axis attribute, found 0");
  tsr_ir_module_destroy(m.module);
}

TSR_TEST(unknown_opcode_and_missing_values) {
  mm_t m = mm_header("k");
  tsr_ir_value_t *one = const_i32(m.k, m.body, "one", 1);
  tsr_ir_value_t *s = binary(m.k, m.body, "add", "s", one, one, scalar(TSR_DTYPE_I32));
  tsr_ir_value_t *u = binary(m.k, m.body, "sub", "u", one, one, scalar(TSR_DTYPE_I32));
  tsr_ir_value_t *w = binary(m.k, m.body, "mul", "w", one, one, scalar(TSR_DTYPE_I32));
  if (!s || !u || !w) return;
  s->def->opcode = (tsr_opcode_t)9999;
  u->def->operands[1] = NULL;
  w->def->results[0] = s; /* %s defined again (by a second op) */
  check_message(m.module,
                "b.tsr:0:0: error: unknown opcode 9999\n"
                "b.tsr:0:0: error: 'sub' operand #2 is missing\n"
                "b.tsr:0:0: error: 'mul' result #1 (%s) is defined twice");
  tsr_ir_module_destroy(m.module);
}

TSR_TEST(malformed_result_types) {
  mm_t m = mm_header("k");
  tsr_ir_type_t bad_rank = scalar(TSR_DTYPE_F32);
  bad_rank.kind = TSR_TYPE_VECTOR;
  bad_rank.rank = 9;
  tsr_ir_type_t bad_dtype = scalar(TSR_DTYPE_F32);
  bad_dtype.dtype = 200;
  tsr_ir_type_t bad_kind = scalar(TSR_DTYPE_F32);
  bad_kind.kind = 17;
  int64_t zero_dim[2] = {8, 0}, huge[2] = {65536, 65536};
  const_of(m.k, m.body, "r1", bad_rank);
  const_of(m.k, m.body, "r2", bad_dtype);
  const_of(m.k, m.body, "r3", bad_kind);
  const_of(m.k, m.body, "r4", tsr_ir_type_vector(TSR_DTYPE_F32, 2, zero_dim));
  const_of(m.k, m.body, "r5", tsr_ir_type_vector(TSR_DTYPE_F32, 2, huge));
  const_of(m.k, m.body, "r6", tsr_ir_type_ref(TSR_SPACE_VMEM, TSR_DTYPE_F32, 2, d128x128));
  const_of(m.k, m.body, "r7", tsr_ir_type_vector(TSR_DTYPE_F32, 0, NULL));
  check_message(m.module,
                "b.tsr:0:0: error: 'const' result #1 (%r1): invalid type: rank 9 exceeds 6\n"
                "b.tsr:0:0: error: 'const' result #1 (%r2): invalid type: unknown dtype 200\n"
                "b.tsr:0:0: error: 'const' result #1 (%r3): invalid type: unknown type kind 17\n"
                "b.tsr:0:0: error: 'const' result #1 (%r4): invalid type f32[8, 0]: dimension 1 "
                "is 0, expected >= 1\n"
                "b.tsr:0:0: error: 'const' result #1 (%r5): f32[65536, 65536] has 4294967296 "
                "elements, more than 2^31 per value\n"
                "b.tsr:0:0: error: 'const' result #1 (%r6): results are scalars or blocks, found "
                "vmem f32[128, 128]\n"
                "b.tsr:0:0: error: 'const' result #1 (%r7): invalid type: a block f32[] needs "
                "rank >= 1 (a scalar is written f32)");
  tsr_ir_module_destroy(m.module);
}

/* The parser range-checks literals too; the builder does not. */
TSR_TEST(const_literal_must_fit_its_dtype) {
  mm_t m = mm_header("k");
  struct {
    tsr_dtype_t dtype;
    tsr_ir_literal_t literal;
  } cases[] = {
      {TSR_DTYPE_I8, {.i = 300}},         {TSR_DTYPE_F16, {.f = 70000.0}},
      {TSR_DTYPE_I1, {.i = 2}},           {TSR_DTYPE_U32, {.i = -1}},
      {TSR_DTYPE_F32, {.f = 1e300}},      {TSR_DTYPE_I32, {.i = INT32_MIN}}, /* fits */
      {TSR_DTYPE_BF16, {.f = -INFINITY}}, /* fits */
  };
  for (size_t i = 0; i < TSR_ARRAY_SIZE(cases); i++) {
    tsr_ir_type_t t = scalar(cases[i].dtype);
    build(m.k, m.body,
          (tsr_ir_op_params_t){.mnemonic = "const",
                               .result_types = &t,
                               .num_results = 1,
                               .literal = cases[i].literal});
  }
  check_message(m.module,
                "b.tsr:0:0: error: 'const' literal 300 does not fit in i8 (-128..127)\n"
                "b.tsr:0:0: error: 'const' literal 70000 does not fit in f16 (largest finite "
                "value 65504)\n"
                "b.tsr:0:0: error: 'const' literal 2 does not fit in i1 (0..1)\n"
                "b.tsr:0:0: error: 'const' literal -1 does not fit in u32 (0..4294967295)\n"
                "b.tsr:0:0: error: 'const' literal 1e+300 does not fit in f32 (largest finite "
                "value 3.40282e+38)");
  tsr_ir_module_destroy(m.module);
}

/* Dynamic index operands: in range, used once, every one used. */
TSR_TEST(index_operand_positions) {
  mm_t m = mm_header("k");
  tsr_ir_value_t *i = const_i32(m.k, m.body, "i", 0), *j = const_i32(m.k, m.body, "j", 1);
  tsr_ir_type_t f32 = scalar(TSR_DTYPE_F32);
  tsr_ir_value_t *ops[3] = {m.acc, i, j};
  tsr_ir_index_t twice[2] = {point_operand(1), point_operand(1)};
  tsr_ir_index_t beyond[2] = {point_operand(1), point_operand(7)};
  tsr_ir_index_t self[2] = {point_operand(0), point_operand(2)};
  const tsr_ir_index_t *cases[3] = {twice, beyond, self};
  for (int c = 0; c < 3; c++)
    build(m.k, m.body,
          (tsr_ir_op_params_t){.mnemonic = "load",
                               .operands = ops,
                               .num_operands = 3,
                               .result_types = &f32,
                               .num_results = 1,
                               .indices = cases[c],
                               .num_indices = 2});
  check_message(m.module,
                "b.tsr:0:0: error: 'load' index 1 of %acc uses operand #2, already used by "
                "index 0\n"
                "b.tsr:0:0: error: 'load' index 1 of %acc refers to operand #8, which is not "
                "an index operand\n"
                "b.tsr:0:0: error: 'load' index 0 of %acc refers to operand #1, which is not "
                "an index operand");
  tsr_ir_module_destroy(m.module);
}

TSR_TEST(slice_size_must_match_bounds) {
  mm_t m = mm_header("k");
  tsr_ir_index_t idx[2] = {{.kind = TSR_INDEX_SLICE, .operand = -1, .start = 0, .stop = 8,
                            .size = 3, .stride = 2},
                           full()};
  tsr_ir_type_t t = vec2(TSR_DTYPE_F32, 3, 128);
  build(m.k, m.body,
        (tsr_ir_op_params_t){.mnemonic = "load",
                             .operands = &m.acc,
                             .num_operands = 1,
                             .result_types = &t,
                             .num_results = 1,
                             .indices = idx,
                             .num_indices = 2});
  check_message(m.module,
                "b.tsr:0:0: error: 'load' index 0 of %acc: slice 0:8:2 has size 3, expected 4");
  tsr_ir_module_destroy(m.module);
}

TSR_TEST(grid_set_after_operands) {
  tsr_ir_module_t *module;
  tsr_ir_kernel_t *k;
  TSR_CHECK_OK(tsr_ir_module_create("b.tsr", &module));
  TSR_CHECK_OK(tsr_ir_kernel_create(module, "k", &k));
  int64_t d16[1] = {16}, blk[1] = {8};
  tsr_ir_region_t *map;
  TSR_CHECK_OK(tsr_ir_kernel_add_operand(
      k,
      &(tsr_ir_operand_params_t){TSR_ROLE_IN, "x", tsr_ir_type_vector(TSR_DTYPE_F32, 1, d16),
                                 TSR_SPACE_VMEM, blk, -1},
      NULL, &map));
  tsr_ir_value_t *z = const_i32(k, map, "z", 0);
  build(k, map, (tsr_ir_op_params_t){.mnemonic = "yield", .operands = &z, .num_operands = 1});
  int64_t g[2] = {2, 3};
  TSR_CHECK_OK(tsr_ir_kernel_set_grid(k, 2, g, NULL));
  check_message(module,
                "b.tsr:0:0: error: kernel @k: index map of %x takes 0 arguments, expected 2 "
                "(one per grid dimension)");
  tsr_ir_module_destroy(module);
}

TSR_TEST(aliases) {
  tsr_ir_module_t *module;
  tsr_ir_kernel_t *k;
  TSR_CHECK_OK(tsr_ir_module_create("b.tsr", &module));
  TSR_CHECK_OK(tsr_ir_kernel_create(module, "k", &k));
  int64_t d16[1] = {16}, d8[1] = {8};
  tsr_ir_type_t a16 = tsr_ir_type_vector(TSR_DTYPE_F32, 1, d16);
  tsr_ir_type_t a8 = tsr_ir_type_vector(TSR_DTYPE_F32, 1, d8);
  struct {
    tsr_ir_role_t role;
    const char *name;
    tsr_ir_type_t t;
    int32_t alias;
  } ops[] = {
      {TSR_ROLE_PREFETCH, "p", tsr_ir_type_vector(TSR_DTYPE_I32, 1, d8), -1},
      {TSR_ROLE_IN, "x", a16, -1},
      {TSR_ROLE_IN, "y", a16, -1},
      {TSR_ROLE_OUT, "o1", a16, 1},
      {TSR_ROLE_OUT, "o2", a16, 1},  /* %x again */
      {TSR_ROLE_OUT, "o3", a8, 2},   /* different shape */
      {TSR_ROLE_OUT, "o4", a16, 0},  /* a prefetch */
      {TSR_ROLE_OUT, "o5", a16, 42}, /* nothing */
  };
  for (size_t i = 0; i < TSR_ARRAY_SIZE(ops); i++)
    TSR_CHECK_OK(tsr_ir_kernel_add_operand(
        k,
        &(tsr_ir_operand_params_t){ops[i].role, ops[i].name, ops[i].t,
                                   ops[i].role == TSR_ROLE_PREFETCH ? TSR_SPACE_SMEM
                                                                    : TSR_SPACE_VMEM,
                                   NULL, ops[i].alias},
        NULL, NULL));
  check_message(module,
                "b.tsr:0:0: error: kernel @k: input %x is aliased by more than one output "
                "(%o1 and %o2)\n"
                "b.tsr:0:0: error: kernel @k: output %o3 (f32[8]) aliases input %y of a "
                "different type (f32[16])\n"
                "b.tsr:0:0: error: kernel @k: output %o4 aliases prefetch %p, which is not an "
                "input\n"
                "b.tsr:0:0: error: kernel @k: output %o5 aliases operand #43, which does not "
                "exist");
  tsr_ir_module_destroy(module);
}

/* A yield that is not last (reported once, not also as missing); a region
 * of an op with results that has none. */
TSR_TEST(terminator_placement) {
  mm_t m = mm_header("k");
  tsr_ir_type_t i32 = scalar(TSR_DTYPE_I32);
  tsr_ir_value_t *lo = const_i32(m.k, m.body, "lo", 0);
  tsr_ir_value_t *fops[4] = {lo, lo, lo, lo};
  tsr_ir_type_t fargs[2] = {i32, i32};
  const char *fnames[2] = {"i", "x"};
  tsr_ir_op_t *loop = build(m.k, m.body,
                            (tsr_ir_op_params_t){.mnemonic = "for",
                                                 .operands = fops,
                                                 .num_operands = 4,
                                                 .result_types = &i32,
                                                 .num_results = 1,
                                                 .region_arg_types = fargs,
                                                 .region_arg_names = fnames,
                                                 .num_region_args = 2});
  tsr_ir_value_t *t = const_of(m.k, m.body, "t", scalar(TSR_DTYPE_I1));
  tsr_ir_op_t *iff = build(m.k, m.body,
                           (tsr_ir_op_params_t){.mnemonic = "if",
                                                .operands = &t,
                                                .num_operands = 1,
                                                .result_types = &i32,
                                                .num_results = 1,
                                                .flags = TSR_OPF_HAS_ELSE});
  if (!loop || !iff) return;
  tsr_ir_region_t *lb = tsr_ir_op_region(loop, 0);
  tsr_ir_value_t *x = tsr_ir_region_arg(lb, 1);
  build(m.k, lb, (tsr_ir_op_params_t){.mnemonic = "yield", .operands = &x, .num_operands = 1});
  const_i32(m.k, lb, "after", 1);
  tsr_ir_region_t *then = tsr_ir_op_region(iff, 0);
  build(m.k, then, (tsr_ir_op_params_t){.mnemonic = "yield", .operands = &lo, .num_operands = 1});
  check_message(m.module,
                "b.tsr:0:0: error: 'yield' must be the last op of its region\n"
                "b.tsr:0:0: error: 'if' else region must end with 'yield' of 1 values (the "
                "results of 'if')");
  tsr_ir_module_destroy(m.module);
}

/* 300 nested ifs: the verifier stops descending at its limit. */
TSR_TEST(deep_nesting_is_limited) {
  mm_t m = mm_header("k");
  tsr_ir_value_t *t = const_of(m.k, m.body, "t", scalar(TSR_DTYPE_I1));
  tsr_ir_region_t *r = m.body;
  for (int i = 0; i < 300 && r; i++) {
    tsr_ir_op_t *iff = if_op(m.k, r, t);
    r = iff ? tsr_ir_op_region(iff, 0) : NULL;
  }
  tsr_status_t s = tsr_ir_module_verify(m.module);
  TSR_CHECK_EQ_STR(tsr_status_message(s),
                   "b.tsr:0:0: error: 'if' regions are nested more than 256 deep");
  tsr_status_free(s);
  tsr_ir_module_destroy(m.module);
}

TSR_TEST(null_module) {
  TSR_CHECK_STATUS(tsr_ir_module_verify(NULL), TSR_INVALID_ARGUMENT);
}

/* ---- Robustness sweep ------------------------------------------------------------
 * Every op, built with each operand count from its minimum (capped), each
 * mix of operand kinds, and odd attributes: the verifier must not crash (run
 * under ASan/UBSan) and must reject or accept with a status. */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint32_t rng(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (uint32_t)rng_state;
}

TSR_TEST(every_op_with_odd_operands_does_not_crash) {
  int verified = 0, rejected = 0;
  for (size_t opc = 0; opc < tsr_ir_op_count(); opc++) {
    const tsr_op_info_t *info = &tsr_op_table[opc];
    for (int trial = 0; trial < 24; trial++) {
      mm_t m = mm_header("k");
      int64_t sem_dims[1] = {2};
      tsr_ir_value_t *sem;
      TSR_CHECK_OK(tsr_ir_kernel_add_operand(
          m.k,
          &(tsr_ir_operand_params_t){.role = TSR_ROLE_SCRATCH,
                                     .name = "sem",
                                     .array = tsr_ir_type_sem(TSR_SEM_REGULAR, 1, sem_dims)},
          &sem, NULL));
      tsr_ir_value_t *dsem = add_dma_sem(&m);
      int64_t d8[1] = {8};
      tsr_ir_value_t *pool[7] = {
          const_i32(m.k, m.body, "i", 1),
          const_of(m.k, m.body, "f", vec2(TSR_DTYPE_F32, 128, 128)),
          const_of(m.k, m.body, "b", tsr_ir_type_vector(TSR_DTYPE_I1, 1, d8)),
          const_of(m.k, m.body, "c", scalar(TSR_DTYPE_I1)),
          m.acc,
          sem,
          dsem};
      uint32_t n = (uint32_t)info->min_operands + (uint32_t)(trial % 3);
      if (info->max_operands >= 0 && n > (uint32_t)info->max_operands)
        n = (uint32_t)info->max_operands;
      tsr_ir_value_t *ops[8];
      for (uint32_t i = 0; i < n && i < 8; i++) ops[i] = pool[rng() % 7];
      uint32_t nres = info->num_results >= 0 ? (uint32_t)info->num_results : (uint32_t)(trial % 2);
      tsr_ir_type_t rtypes[2] = {trial % 4 ? vec2(TSR_DTYPE_F32, 128, 128) : scalar(TSR_DTYPE_I32),
                                 scalar(TSR_DTYPE_I1)};
      tsr_ir_index_t idx[3];
      for (int i = 0; i < 3; i++)
        idx[i] = (tsr_ir_index_t){.kind = (uint8_t)(rng() % 5),
                                  .operand = (int32_t)(rng() % 5) - 2,
                                  .start = (int64_t)(rng() % 300) - 20,
                                  .stop = (int64_t)(rng() % 300),
                                  .size = (int64_t)(rng() % 200) - 2,
                                  .stride = (int64_t)(rng() % 4) - 1};
      int64_t ints[3] = {(int64_t)(rng() % 5) - 1, (int64_t)(rng() % 5) - 1,
                         trial % 3 ? (int64_t)(rng() % 5) - 1 : INT64_MIN};
      tsr_ir_type_t arg_types[3] = {scalar(TSR_DTYPE_I32), vec2(TSR_DTYPE_F32, 128, 128),
                                    tsr_ir_type_ref(TSR_SPACE_HBM, TSR_DTYPE_F32, 2, d128x128)};
      tsr_ir_op_t *op = NULL;
      tsr_ir_op_params_t p = {.mnemonic = info->mnemonic,
                              .operands = ops,
                              .num_operands = n > 8 ? 8 : n,
                              .result_types = rtypes,
                              .num_results = nres,
                              .indices = idx,
                              .num_indices = (uint32_t)(trial % 4),
                              .ints = ints,
                              .num_ints = (uint32_t)(rng() % 4),
                              .text = trial % 2 ? "{} {}" : NULL,
                              .flags = rng() % 128, /* every TSR_OPF_* bit */
                              .region_arg_types = arg_types,
                              .num_region_args = (uint32_t)(rng() % 4)};
      tsr_status_t bs = tsr_ir_build_op(m.k, m.body, &p, &op);
      if (bs) {
        tsr_status_free(bs);
      } else if (op && op->num_regions && trial % 3 == 0) {
        /* something inside the first region, using the outer values */
        tsr_ir_value_t *two[2] = {pool[0], pool[0]};
        tsr_ir_op_params_t yp = {.mnemonic = "yield", .operands = two,
                                 .num_operands = (uint32_t)(trial % 3)};
        tsr_status_free(tsr_ir_build_op(m.k, &op->regions[0], &yp, NULL));
      }
      tsr_status_t s = tsr_ir_module_verify(m.module);
      if (s) {
        TSR_CHECK_EQ_INT(tsr_status_code(s), TSR_VERIFY_ERROR);
        TSR_CHECK(strstr(tsr_status_message(s), "b.tsr:0:0: error: ") == tsr_status_message(s));
        rejected++;
      } else {
        verified++;
      }
      tsr_status_free(s);
      tsr_ir_module_destroy(m.module);
    }
  }
  printf("# sweep: %d verified, %d rejected\n", verified, rejected);
  TSR_CHECK(rejected > 0 && verified > 0);
}

/* ---- Effects and the queries derived from them (ir/effects.c) ----------------- */

/* Over every row of the op table: the derived flags agree with the roles. */
TSR_TEST(derived_queries_follow_the_effects_of_every_op) {
  uint32_t memory = TSR_E_REF_READ | TSR_E_REF_WRITE;
  uint32_t sems = TSR_E_SEM_SIGNAL | TSR_E_SEM_WAIT | TSR_E_SEM_READ;
  uint32_t pure_count = 0;
  for (int i = 0; i < TSR_OP_COUNT; i++) {
    tsr_opcode_t op = (tsr_opcode_t)i;
    const tsr_op_info_t *info = &tsr_op_table[i];
    const char *m = info->mnemonic;
    TSR_CHECK((info->flags & TSR_E_ALL) == 0);
    TSR_CHECK((info->effects & ~(uint32_t)TSR_E_ALL) == 0);
    if (tsr_op_is_pure(op)) {
      pure_count++;
      if (info->effects & (memory | sems | TSR_E_REMOTE | TSR_E_OUTPUT))
        TSR_FAIL_AT("'%s' is pure but has memory, semaphore or outside effects", m);
      if (info->num_regions || (info->flags & (TSR_F_CONTROL | TSR_F_TERMINATOR)))
        TSR_FAIL_AT("'%s' is pure but holds regions or ends one", m);
    }
    if (tsr_op_may_block(op) != ((info->effects & TSR_E_SEM_WAIT) != 0))
      TSR_FAIL_AT("'%s': may-block disagrees with sem-wait", m);
    /* semaphore roles and remote operands only on DMA and semaphore ops */
    if ((info->effects & (sems | TSR_E_REMOTE)) && info->family != TSR_FAM_DMA &&
        info->family != TSR_FAM_SEMAPHORE)
      TSR_FAIL_AT("'%s' has semaphore roles outside the DMA and semaphore families", m);
    /* memory roles only where the view has a ref: memory and DMA ops */
    if ((info->effects & memory) && info->syntax != TSR_SYN_LOAD &&
        info->syntax != TSR_SYN_STORE && info->syntax != TSR_SYN_DMA)
      TSR_FAIL_AT("'%s' reads or writes a ref but has no ref view", m);
    if ((info->effects & TSR_E_REF_WRITE) && info->num_results != 0)
      TSR_FAIL_AT("'%s' writes a ref and has results", m);
    /* store forwarding computes one fresh block: pure ops or a load */
    if (info->flags & TSR_F_FORWARD) {
      if (info->num_results != 1) TSR_FAIL_AT("'%s' forwards but has not one result", m);
      if (!tsr_op_is_pure(op) && (info->effects & ~(uint32_t)(TSR_E_REF_READ | TSR_E_INDEX)))
        TSR_FAIL_AT("'%s' forwards but has effects beyond reading a ref", m);
    }
  }
  TSR_CHECK(pure_count > 0);
  TSR_CHECK(tsr_op_is_pure(TSR_OP_ADD) && tsr_op_is_pure(TSR_OP_CONST));
  TSR_CHECK(!tsr_op_is_pure(TSR_OP_LOAD) && !tsr_op_is_pure(TSR_OP_SEM_READ));
  TSR_CHECK(!tsr_op_is_pure(TSR_OP_PRINT) && !tsr_op_is_pure(TSR_OP_YIELD));
  TSR_CHECK(tsr_op_may_block(TSR_OP_DMA_WAIT) && tsr_op_may_block(TSR_OP_SEM_WAIT) &&
            tsr_op_may_block(TSR_OP_CORE_BARRIER));
  TSR_CHECK(!tsr_op_may_block(TSR_OP_DMA_START) && !tsr_op_may_block(TSR_OP_SEM_SIGNAL));
}

typedef struct written_check {
  uint32_t writes, reads;
} written_check_t;

/* On each op: a written ref exactly for ops with a ref-write role, and it
 * and the read refs are REF operands. */
static void check_written(void *ctx, const tsr_op_t *op, uint32_t position) {
  written_check_t *c = ctx;
  const tsr_op_info_t *info = &tsr_op_table[op->opcode];
  int32_t w = tsr_op_written_ref(op);
  if ((w >= 0) != ((info->effects & TSR_E_REF_WRITE) != 0))
    TSR_FAIL_AT("op #%u '%s': written ref %d disagrees with its ref-write role", position,
                info->mnemonic, w);
  if (w >= 0) {
    c->writes++;
    TSR_CHECK(w < (int32_t)op->num_operands && op->operands[w]->type.kind == TSR_TYPE_REF);
  }
  int32_t r[2];
  uint32_t n = tsr_op_read_refs(op, r);
  if ((n > 0) != ((info->effects & TSR_E_REF_READ) != 0))
    TSR_FAIL_AT("op #%u '%s': %u read refs disagree with its ref-read role", position,
                info->mnemonic, n);
  for (uint32_t i = 0; i < n; i++) {
    c->reads++;
    TSR_CHECK(r[i] >= 0 && r[i] < (int32_t)op->num_operands &&
              op->operands[r[i]]->type.kind == TSR_TYPE_REF);
  }
  /* a DMA add reads its destination too */
  if (op->opcode == TSR_OP_DMA_START) {
    TSR_CHECK_EQ_INT(n, (op->flags & TSR_OPF_DMA_ADD) ? 2 : 1);
    TSR_CHECK_EQ_INT(w, 1);
    TSR_CHECK_EQ_INT(r[0], 0);
    if (n == 2) TSR_CHECK_EQ_INT(r[1], 1);
  }
}

TSR_TEST(written_and_read_refs_and_store_forwarding) {
  static const char text[] =
      "kernel @k\n"
      "  in %x: f32[8, 128] hbm\n"
      "  scratch %v: vmem f32[8, 128]\n"
      "  scratch %w: vmem f32[8, 128]\n"
      "  scratch %s: smem i32[4]\n"
      "  scratch %d: dma_sem\n"
      "{\n"
      "  dma_start %x[:, :] -> %v[:, :], %d\n"
      "  dma_wait %x[:, :] -> %v[:, :], %d\n"
      "  dma_start %v[:, :] -> %w[:, :], %d add\n"
      "  dma_wait %v[:, :] -> %w[:, :], %d\n"
      "  %a = load %v[:, :] : f32[8, 128]\n"
      "  %b = exp %a : f32[8, 128]\n"
      "  store %w[:, :], %b\n"
      "  %m = iota 1 : i32[8, 128]\n"
      "  %z = const 0 : i32\n"
      "  %c = lt %m, %z : i1[8, 128]\n"
      "  %e = neg %a : f32[8, 128]\n"
      "  store %w[:, :], %e mask %c\n"
      "  %f = reshape %a : f32[8, 128]\n"
      "  store %v[:, :], %f\n"
      "  %i = load %s[0] : i32\n"
      "  store %s[1], %i\n"
      "}\n";
  tsr_module_t *m = NULL;
  TSR_CHECK_OK(tsr_ir_parse("t.tsr", text, sizeof text - 1, &m));
  if (!m) return;
  TSR_CHECK_OK(tsr_ir_verify(m));
  written_check_t c = {0, 0};
  tsr_ir_walk_ops(m->kernels[0], check_written, &c);
  TSR_CHECK_EQ_INT(c.writes, 6); /* two DMAs, four stores */
  TSR_CHECK_EQ_INT(c.reads, 5);  /* two DMA sources, one add destination, two loads */
  const tsr_op_t *op = m->kernels[0]->body.first;
  for (int i = 0; i < 4; i++) op = op->next;
  const tsr_op_t *load = op, *exp = op->next, *store = exp->next;
  TSR_CHECK(tsr_op_forward_store(load) == NULL); /* the next op is no store */
  TSR_CHECK(tsr_op_forward_store(exp) == store);
  const tsr_op_t *neg = store->next->next->next->next;
  TSR_CHECK_EQ_INT(neg->opcode, TSR_OP_NEG);
  TSR_CHECK(tsr_op_forward_store(neg) == NULL);  /* a masked store */
  const tsr_op_t *reshape = neg->next->next;
  TSR_CHECK_EQ_INT(reshape->opcode, TSR_OP_RESHAPE);
  TSR_CHECK(tsr_op_forward_store(reshape) == NULL); /* not TSR_F_FORWARD */
  const tsr_op_t *scalar_load = reshape->next->next;
  TSR_CHECK(tsr_op_forward_store(scalar_load) == NULL); /* a scalar result */
  tsr_module_destroy(m);
}

int main(void) {
  TSR_RUN(builder_matmul_verifies);
  TSR_RUN(builder_control_flow_verifies);
  TSR_RUN(value_from_inner_region_not_visible_after_it);
  TSR_RUN(use_before_definition_across_regions);
  TSR_RUN(index_map_values_and_body_values_do_not_mix);
  TSR_RUN(index_map_loads_only_from_prefetch);
  TSR_RUN(value_of_another_kernel);
  TSR_RUN(ref_as_arithmetic_operand);
  TSR_RUN(semaphore_outside_semaphore_ops);
  TSR_RUN(dma_with_send_built_like_the_parser);
  TSR_RUN(dma_counts_in_internal_structs);
  TSR_RUN(wrong_counts_in_internal_structs);
  TSR_RUN(unknown_opcode_and_missing_values);
  TSR_RUN(malformed_result_types);
  TSR_RUN(const_literal_must_fit_its_dtype);
  TSR_RUN(index_operand_positions);
  TSR_RUN(slice_size_must_match_bounds);
  TSR_RUN(grid_set_after_operands);
  TSR_RUN(aliases);
  TSR_RUN(terminator_placement);
  TSR_RUN(deep_nesting_is_limited);
  TSR_RUN(null_module);
  TSR_RUN(every_op_with_odd_operands_does_not_crash);
  TSR_RUN(derived_queries_follow_the_effects_of_every_op);
  TSR_RUN(written_and_read_refs_and_store_forwarding);
  TSR_RUN(dim_semantics_order_is_the_verifiers);
  return tsr_test_done();
}
