/* Splitting long kernel bodies into functions of bounded size, so that
 * compile time stays linear (docs/lowering.md, "Long kernels"). Runs on the parsed MLIR module
 * before the pass pipeline: runs of consecutive ops of a long block move into
 * private functions `tsr_part_N`, called where they were, with the values they
 * use from outside as arguments and the values used after them as results.
 * Parts equal once their scalar constants are arguments (the same ops,
 * operands, types and attributes: fingerprint_part) are
 * compiled once (the ~430 compare-exchange steps of a 6.9k-op bitonic sort
 * are a handful of distinct parts). Every MLIR call of the splitter is here;
 * compile.c calls tsr_lower_split_module. */
#include <stdint.h>
#include <stdio.h>

#include <mlir-c/BuiltinAttributes.h>
#include <mlir-c/BuiltinTypes.h>
#include <mlir-c/IR.h>

#include "lower/split.h"

/* ---- Small helpers ---------------------------------------------------------- */

static bool name_is(MlirOperation op, const char *s) {
  MlirStringRef name = mlirIdentifierStr(mlirOperationGetName(op));
  size_t n = strlen(s);
  return name.length == n && memcmp(name.data, s, n) == 0;
}

static uint64_t hash_bytes(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull; /* FNV-1a */
  return h;
}

/* A constant-like op: no operands, no regions, one result; these are hoisted
 * to the function's entry and never moved into a part. */
static bool is_constant(MlirOperation op) {
  return mlirOperationGetNumOperands(op) == 0 && mlirOperationGetNumRegions(op) == 0 &&
         mlirOperationGetNumResults(op) == 1 &&
         (name_is(op, "arith.constant") || name_is(op, "ub.poison") ||
          name_is(op, "llvm.mlir.constant") || name_is(op, "llvm.mlir.zero"));
}

typedef struct splitter splitter_t;

/* A constant that a part copies rather than takes as an argument: an index
 * (loop bounds, offsets: the code wants them known) or a vector. Scalar
 * integers and floats are arguments, so that parts differing only in them
 * (the k and j of a bitonic step) are one function. */
static bool clone_into_part(bool clone_scalars, MlirOperation op) {
  MlirType t = mlirValueGetType(mlirOperationGetResult(op, 0));
  return clone_scalars || mlirTypeIsAIndex(t) || mlirTypeIsAVector(t) ||
         !name_is(op, "arith.constant");
}

/* Stack allocations stay where they are, in any block: in a part, one would
 * die with its call (the frame of small buffers is one). */
static bool is_alloca(MlirOperation op) {
  return name_is(op, "memref.alloca") || name_is(op, "llvm.alloca");
}

/* Operand-less stack allocations of the function's entry, hoisted with the
 * constants. */
static bool is_entry_alloca(MlirOperation op) {
  return mlirOperationGetNumOperands(op) == 0 && is_alloca(op);
}

/* ---- An op -> position map (open addressing on the pointer) ------------------- */

typedef struct posmap {
  const void **keys;
  int32_t *vals;
  size_t cap; /* power of two */
} posmap_t;

static bool posmap_init(posmap_t *m, size_t n) {
  m->cap = 16;
  while (m->cap < 2 * n + 16) m->cap *= 2;
  m->keys = tsr_calloc(m->cap, sizeof *m->keys);
  m->vals = tsr_calloc(m->cap, sizeof *m->vals);
  return m->keys && m->vals;
}

static void posmap_free(posmap_t *m) {
  tsr_free(m->keys);
  tsr_free(m->vals);
}

static size_t slot_of(const posmap_t *m, const void *k) {
  uint64_t h = (uint64_t)(uintptr_t)k * 0x9E3779B97F4A7C15ull;
  return (size_t)(h >> 17) & (m->cap - 1);
}

static void posmap_put(posmap_t *m, const void *k, int32_t v) {
  size_t i = slot_of(m, k);
  while (m->keys[i] && m->keys[i] != k) i = (i + 1) & (m->cap - 1);
  m->keys[i] = k;
  m->vals[i] = v;
}

static int32_t posmap_get(const posmap_t *m, const void *k) {
  size_t i = slot_of(m, k);
  while (m->keys[i]) {
    if (m->keys[i] == k) return m->vals[i];
    i = (i + 1) & (m->cap - 1);
  }
  return -1;
}

/* ---- The splitter's state ------------------------------------------------------- */

typedef struct part_fn {
  MlirOperation func, call;
  uint64_t hash;
  uint64_t *fingerprint; /* fingerprint_part's words, for the equality test */
  size_t fingerprint_words;
} part_fn_t;

struct splitter {
  MlirContext ctx;
  MlirBlock module_body;
  tsr_lower_split_params_t params;
  tsr_lower_split_stats_t stats;
  part_fn_t *parts;
  uint32_t num_parts, parts_cap;
  bool failed; /* out of memory */
  bool clone_scalars; /* the second pass: scalar constants copied, not passed */
  /* The block being split and its ops' positions. */
  MlirBlock block;
  posmap_t pos;
  int32_t lo, hi; /* the chunk: positions [lo, hi] */
};

typedef struct vec {
  void *data;
  size_t n, cap, elem;
} vec_t;

static bool vec_push(vec_t *v, const void *x) {
  if (v->n == v->cap) {
    size_t cap = v->cap ? 2 * v->cap : 16;
    void *d = tsr_realloc(v->data, cap * v->elem);
    if (!d) return false;
    v->data = d;
    v->cap = cap;
  }
  memcpy((char *)v->data + v->n * v->elem, x, v->elem);
  v->n++;
  return true;
}

#define VEC_AT(v, T, i) (((T *)(v).data)[i])

/* The ancestor of op that is an op of the block being split, or null. */
static MlirOperation ancestor_in_block(const splitter_t *s, MlirOperation op) {
  while (!mlirOperationIsNull(op)) {
    MlirBlock b = mlirOperationGetBlock(op);
    if (mlirBlockIsNull(b)) break;
    if (mlirBlockEqual(b, s->block)) return op;
    op = mlirOperationGetParentOperation(op);
  }
  return (MlirOperation){NULL};
}

static bool op_in_chunk(const splitter_t *s, MlirOperation op) {
  MlirOperation a = ancestor_in_block(s, op);
  if (mlirOperationIsNull(a)) return false;
  int32_t p = posmap_get(&s->pos, a.ptr);
  return p >= s->lo && p <= s->hi;
}

/* Whether value v is defined inside the chunk. */
static bool value_in_chunk(const splitter_t *s, MlirValue v) {
  if (mlirValueIsAOpResult(v)) return op_in_chunk(s, mlirOpResultGetOwner(v));
  MlirBlock owner = mlirBlockArgumentGetOwner(v);
  if (mlirBlockEqual(owner, s->block)) return false;
  MlirOperation parent = mlirBlockGetParentOperation(owner);
  return !mlirOperationIsNull(parent) && op_in_chunk(s, parent);
}

/* Number of ops in op, itself included. */
static MlirWalkResult count_op(MlirOperation op, void *user) {
  (void)op;
  (*(size_t *)user)++;
  return MlirWalkResultAdvance;
}

static size_t op_size(MlirOperation op) {
  size_t n = 0;
  mlirOperationWalk(op, count_op, &n, MlirWalkPreOrder);
  return n;
}

/* ---- Inputs of a chunk ------------------------------------------------------------- */

typedef struct collect {
  splitter_t *s;
  vec_t inputs; /* MlirValue, first appearance order */
  posmap_t seen;
  bool failed;
} collect_t;

static MlirWalkResult collect_operands(MlirOperation op, void *user) {
  collect_t *c = user;
  for (intptr_t i = 0; i < mlirOperationGetNumOperands(op); i++) {
    MlirValue v = mlirOperationGetOperand(op, i);
    if (posmap_get(&c->seen, v.ptr) >= 0) continue;
    if (value_in_chunk(c->s, v)) continue;
    if (c->inputs.n * 2 + 16 > c->seen.cap) { /* grow the set */
      posmap_t bigger;
      if (!posmap_init(&bigger, c->inputs.n * 2 + 16)) {
        c->failed = true;
        return MlirWalkResultInterrupt;
      }
      for (size_t j = 0; j < c->inputs.n; j++)
        posmap_put(&bigger, VEC_AT(c->inputs, MlirValue, j).ptr, (int32_t)j);
      posmap_free(&c->seen);
      c->seen = bigger;
    }
    posmap_put(&c->seen, v.ptr, (int32_t)c->inputs.n);
    if (!vec_push(&c->inputs, &v)) {
      c->failed = true;
      return MlirWalkResultInterrupt;
    }
  }
  return MlirWalkResultAdvance;
}

/* Replaces v by `with` in the operands of the ops inside (inside = true) or
 * outside the chunk. */
static bool replace_uses(splitter_t *s, MlirValue v, MlirValue with, bool inside) {
  vec_t uses = {.elem = sizeof(MlirOpOperand)};
  for (MlirOpOperand u = mlirValueGetFirstUse(v); !mlirOpOperandIsNull(u);
       u = mlirOpOperandGetNextUse(u))
    if (op_in_chunk(s, mlirOpOperandGetOwner(u)) == inside && !vec_push(&uses, &u)) {
      tsr_free(uses.data);
      return false;
    }
  for (size_t i = 0; i < uses.n; i++) {
    MlirOpOperand u = VEC_AT(uses, MlirOpOperand, i);
    mlirOperationSetOperand(mlirOpOperandGetOwner(u),
                            (intptr_t)mlirOpOperandGetOperandNumber(u), with);
  }
  tsr_free(uses.data);
  return true;
}

static MlirNamedAttribute named(MlirContext ctx, const char *name, MlirAttribute a) {
  return mlirNamedAttributeGet(mlirIdentifierGet(ctx, mlirStringRefCreateFromCString(name)), a);
}

/* ---- Outlining one chunk -------------------------------------------------------------- */

/* Ops a part recomputes from its own arguments rather than taking their
 * result as one: constants of index and vector types, and views (a frame
 * slot, a reinterpret_cast), so that a part takes the frame and scalar
 * offsets, not one memref per buffer. All are pure and cheap. */
static bool is_cloned(const splitter_t *s, MlirOperation op) {
  if (is_constant(op)) return clone_into_part(s->clone_scalars, op);
  return name_is(op, "arith.index_cast") || name_is(op, "memref.view") ||
         name_is(op, "memref.reinterpret_cast");
}

/* The inputs' values inside the part being made: block arguments (whose
 * outside values are the call's operands) and clones. */
typedef struct inside {
  splitter_t *s;
  MlirBlock body;
  MlirLocation loc;
  posmap_t map;   /* outside value -> index in `vals` */
  vec_t vals;     /* MlirValue inside */
  vec_t args;     /* MlirValue outside: the call's operands */
  bool failed;
} inside_t;

/* A scalar constant passed as an argument (clone_into_part). */
static bool is_passed_constant(const splitter_t *s, MlirValue v) {
  return mlirValueIsAOpResult(v) && is_constant(mlirOpResultGetOwner(v)) &&
         !clone_into_part(s->clone_scalars, mlirOpResultGetOwner(v));
}

/* A new argument of the part for v. */
static MlirValue new_argument(inside_t *in, MlirValue v) {
  if (!vec_push(&in->args, &v)) in->failed = true;
  return mlirBlockAddArgument(in->body, mlirValueGetType(v), in->loc);
}

static MlirValue inside_value(inside_t *in, MlirValue v) {
  /* Each use of a scalar constant is an argument of its own: the emitter
   * shares one SSA value between equal constants, and parts whose
   * constants coincide differently (k = j = 4 in one step, k = 8, j = 4 in
   * the next) would otherwise differ in their arguments. */
  if (is_passed_constant(in->s, v)) return new_argument(in, v);
  int32_t i = posmap_get(&in->map, v.ptr);
  if (i >= 0) return VEC_AT(in->vals, MlirValue, i);
  MlirValue w;
  if (mlirValueIsAOpResult(v) && is_cloned(in->s, mlirOpResultGetOwner(v))) {
    MlirOperation def = mlirOpResultGetOwner(v);
    MlirOperation copy = mlirOperationClone(def);
    for (intptr_t k = 0; k < mlirOperationGetNumOperands(def) && !in->failed; k++)
      mlirOperationSetOperand(copy, k, inside_value(in, mlirOperationGetOperand(def, k)));
    mlirBlockAppendOwnedOperation(in->body, copy);
    w = mlirOperationGetResult(copy, mlirOpResultGetResultNumber(v));
  } else {
    w = new_argument(in, v);
  }
  if (in->vals.n * 2 + 16 > in->map.cap) {
    posmap_t bigger;
    if (!posmap_init(&bigger, in->vals.n * 2 + 16)) {
      in->failed = true;
      return w;
    }
    for (size_t j = 0; j < in->map.cap; j++)
      if (in->map.keys[j]) posmap_put(&bigger, in->map.keys[j], in->map.vals[j]);
    posmap_free(&in->map);
    in->map = bigger;
  }
  posmap_put(&in->map, v.ptr, (int32_t)in->vals.n);
  if (!vec_push(&in->vals, &w)) in->failed = true;
  return w;
}

/* Replaces each operand of op that is an input by its value inside. */
static MlirWalkResult rename_operands(MlirOperation op, void *user) {
  inside_t *in = user;
  for (intptr_t k = 0; k < mlirOperationGetNumOperands(op); k++) {
    MlirValue v = mlirOperationGetOperand(op, k);
    if (is_passed_constant(in->s, v)) {
      mlirOperationSetOperand(op, k, new_argument(in, v));
      continue;
    }
    int32_t i = posmap_get(&in->map, v.ptr);
    if (i >= 0) mlirOperationSetOperand(op, k, VEC_AT(in->vals, MlirValue, i));
  }
  return MlirWalkResultAdvance;
}

/* Moves ops [lo, hi] of the block into a new function and calls it there. */
static void outline_chunk(splitter_t *s, MlirOperation *ops) {
  MlirContext ctx = s->ctx;
  MlirLocation loc = mlirOperationGetLocation(ops[s->lo]);
  collect_t c = {.s = s, .inputs = {.elem = sizeof(MlirValue)}};
  inside_t in = {.s = s, .loc = loc, .vals = {.elem = sizeof(MlirValue)},
                 .args = {.elem = sizeof(MlirValue)}};
  vec_t outputs = {.elem = sizeof(MlirValue)};
  MlirType *in_types = NULL, *out_types = NULL;
  in.body = mlirBlockCreate(0, NULL, NULL);
  bool ok = posmap_init(&c.seen, 64) && posmap_init(&in.map, 64);
  for (int32_t i = s->lo; ok && i <= s->hi && !c.failed; i++)
    mlirOperationWalk(ops[i], collect_operands, &c, MlirWalkPreOrder);
  ok = ok && !c.failed;
  /* Inside: arguments and clones for the inputs. */
  for (size_t i = 0; ok && i < c.inputs.n; i++) {
    MlirValue v = VEC_AT(c.inputs, MlirValue, i);
    if (!is_passed_constant(s, v)) inside_value(&in, v); /* those: per use, below */
    ok = !in.failed;
  }
  /* The chunk's operands, not the inputs' uses: a constant or the frame has
   * uses all over the kernel, and visiting them for each part made the
   * split quadratic. */
  for (int32_t i = s->lo; ok && i <= s->hi; i++)
    mlirOperationWalk(ops[i], rename_operands, &in, MlirWalkPreOrder);
  for (int32_t i = s->lo; ok && i <= s->hi; i++) {
    for (intptr_t r = 0; ok && r < mlirOperationGetNumResults(ops[i]); r++) {
      MlirValue v = mlirOperationGetResult(ops[i], r);
      for (MlirOpOperand u = mlirValueGetFirstUse(v); !mlirOpOperandIsNull(u);
           u = mlirOpOperandGetNextUse(u)) {
        if (!op_in_chunk(s, mlirOpOperandGetOwner(u))) {
          ok = vec_push(&outputs, &v);
          break;
        }
      }
    }
  }
  in_types = tsr_malloc((in.args.n + 1) * sizeof *in_types);
  out_types = tsr_malloc((outputs.n + 1) * sizeof *out_types);
  if (!ok || !in_types || !out_types) {
    s->failed = true;
    goto done;
  }
  for (size_t i = 0; i < in.args.n; i++)
    in_types[i] = mlirValueGetType(VEC_AT(in.args, MlirValue, i));
  for (size_t i = 0; i < outputs.n; i++)
    out_types[i] = mlirValueGetType(VEC_AT(outputs, MlirValue, i));

  char name[48];
  snprintf(name, sizeof name, "tsr_part_%u", s->num_parts);
  /* The call, in the chunk's place. */
  MlirOperationState cs = mlirOperationStateGet(mlirStringRefCreateFromCString("func.call"), loc);
  mlirOperationStateAddOperands(&cs, (intptr_t)in.args.n, (MlirValue *)in.args.data);
  mlirOperationStateAddResults(&cs, (intptr_t)outputs.n, out_types);
  MlirNamedAttribute callee =
      named(ctx, "callee", mlirFlatSymbolRefAttrGet(ctx, mlirStringRefCreateFromCString(name)));
  mlirOperationStateAddAttributes(&cs, 1, &callee);
  MlirOperation call = mlirOperationCreate(&cs);
  mlirBlockInsertOwnedOperationBefore(s->block, ops[s->lo], call);
  /* Outside: the call's results for the outputs. */
  for (size_t i = 0; ok && i < outputs.n; i++)
    ok = replace_uses(s, VEC_AT(outputs, MlirValue, i), mlirOperationGetResult(call, (intptr_t)i),
                      false);
  if (!ok) {
    s->failed = true;
    goto done;
  }
  for (int32_t i = s->lo; i <= s->hi; i++) {
    mlirOperationRemoveFromParent(ops[i]);
    mlirBlockAppendOwnedOperation(in.body, ops[i]);
  }
  MlirOperationState rs =
      mlirOperationStateGet(mlirStringRefCreateFromCString("func.return"), loc);
  mlirOperationStateAddOperands(&rs, (intptr_t)outputs.n, (MlirValue *)outputs.data);
  mlirBlockAppendOwnedOperation(in.body, mlirOperationCreate(&rs));
  /* The function. */
  MlirRegion region = mlirRegionCreate();
  mlirRegionAppendOwnedBlock(region, in.body);
  in.body = (MlirBlock){NULL};
  MlirType fn_type = mlirFunctionTypeGet(ctx, (intptr_t)in.args.n, in_types,
                                         (intptr_t)outputs.n, out_types);
  MlirNamedAttribute fattrs[] = {
      named(ctx, "sym_name", mlirStringAttrGet(ctx, mlirStringRefCreateFromCString(name))),
      named(ctx, "function_type", mlirTypeAttrGet(fn_type)),
      named(ctx, "sym_visibility",
            mlirStringAttrGet(ctx, mlirStringRefCreateFromCString("private"))),
  };
  MlirOperationState fs = mlirOperationStateGet(mlirStringRefCreateFromCString("func.func"), loc);
  mlirOperationStateAddAttributes(&fs, 3, fattrs);
  mlirOperationStateAddOwnedRegions(&fs, 1, &region);
  MlirOperation func = mlirOperationCreate(&fs);
  mlirBlockAppendOwnedOperation(s->module_body, func);

  part_fn_t p = {.func = func, .call = call};
  if (s->num_parts == s->parts_cap) {
    uint32_t cap = s->parts_cap ? 2 * s->parts_cap : 64;
    part_fn_t *bigger = tsr_realloc(s->parts, cap * sizeof *bigger);
    if (!bigger) {
      s->failed = true;
      goto done;
    }
    s->parts = bigger;
    s->parts_cap = cap;
  }
  s->parts[s->num_parts++] = p;
  s->stats.parts++;
done:
  if (!mlirBlockIsNull(in.body)) mlirBlockDestroy(in.body);
  tsr_free(in_types);
  tsr_free(out_types);
  tsr_free(outputs.data);
  tsr_free(c.inputs.data);
  tsr_free(in.vals.data);
  tsr_free(in.args.data);
  posmap_free(&c.seen);
  posmap_free(&in.map);
}

/* ---- Choosing the chunks ------------------------------------------------------------- */

static void split_block(splitter_t *s, MlirBlock block);

static void split_regions(splitter_t *s, MlirOperation op) {
  for (intptr_t r = 0; r < mlirOperationGetNumRegions(op) && !s->failed; r++)
    for (MlirBlock b = mlirRegionGetFirstBlock(mlirOperationGetRegion(op, r));
         !mlirBlockIsNull(b) && !s->failed; b = mlirBlockGetNextInRegion(b))
      split_block(s, b);
}

/* A cut may come after op i when the names of the ops ending at i hash to
 * 0 mod 4: a choice made by the content alone, so that a sequence repeated
 * in the body is cut at the same places each time and gives equal parts. */
static bool cut_candidate(MlirOperation *ops, int32_t i) {
  uint64_t h = 1469598103934665603ull;
  for (int32_t j = i - 3; j <= i; j++) {
    if (j < 0) continue;
    MlirStringRef n = mlirIdentifierStr(mlirOperationGetName(ops[j]));
    h = hash_bytes(h, n.data, n.length);
    intptr_t nr = mlirOperationGetNumRegions(ops[j]);
    h = hash_bytes(h, &nr, sizeof nr);
  }
  return (h >> 29) % 4 == 0;
}

/* Ops of the function's entry block that stay there: allocations and
 * deallocations (a part's stack allocation would die with its call; moving
 * them gains nothing), and the views a part recomputes (is_cloned). */
static bool is_pinned_at_entry(const splitter_t *s, MlirOperation op) {
  return is_entry_alloca(op) || name_is(op, "memref.alloc") || name_is(op, "memref.dealloc") ||
         is_cloned(s, op);
}

static void split_block(splitter_t *s, MlirBlock block) {
  MlirOperation parent = mlirBlockGetParentOperation(block);
  bool entry = !mlirOperationIsNull(parent) && name_is(parent, "func.func");
  vec_t ops = {.elem = sizeof(MlirOperation)}, sizes = {.elem = sizeof(size_t)};
  MlirOperation term = mlirBlockGetTerminator(block);
  size_t total = 0;
  for (MlirOperation op = mlirBlockGetFirstOperation(block); !mlirOperationIsNull(op);
       op = mlirOperationGetNextInBlock(op)) {
    if (!mlirOperationIsNull(term) && mlirOperationEqual(op, term)) break;
    size_t n = op_size(op);
    if (!vec_push(&ops, &op) || !vec_push(&sizes, &n)) {
      s->failed = true;
      goto done;
    }
    total += n;
  }
  if (total <= s->params.max_part_ops) goto done;
  MlirOperation *o = ops.data;
  size_t *sz = sizes.data;
  /* Split nested blocks first: they are outside this block's position map. */
  for (size_t i = 0; i < ops.n && !s->failed; i++)
    if (sz[i] > s->params.max_part_ops && mlirOperationGetNumRegions(o[i]) > 0) {
      split_regions(s, o[i]);
      sz[i] = op_size(o[i]);
    }
  if (s->failed) goto done;
  MlirBlock saved_block = s->block;
  posmap_t saved_pos = s->pos;
  s->block = block;
  if (!posmap_init(&s->pos, ops.n)) {
    s->failed = true;
    s->pos = saved_pos;
    s->block = saved_block;
    goto done;
  }
  for (size_t i = 0; i < ops.n; i++) posmap_put(&s->pos, o[i].ptr, (int32_t)i);
  int32_t start = -1;
  size_t chunk = 0;
  for (int32_t i = 0; i <= (int32_t)ops.n && !s->failed; i++) {
    bool end = i == (int32_t)ops.n;
    bool pinned = !end && (is_constant(o[i]) || is_alloca(o[i]) ||
                           sz[i] > s->params.max_part_ops ||
                           (entry && is_pinned_at_entry(s, o[i])));
    if (start >= 0 && (end || pinned || chunk + sz[i] > s->params.max_part_ops)) {
      if (chunk >= s->params.min_part_ops) {
        s->lo = start;
        s->hi = i - 1;
        outline_chunk(s, o);
      }
      start = -1;
      chunk = 0;
    }
    if (end || pinned) continue;
    if (start < 0) start = i;
    chunk += sz[i];
    if (chunk >= s->params.min_part_ops && cut_candidate(o, i)) {
      s->lo = start;
      s->hi = i;
      outline_chunk(s, o);
      start = -1;
      chunk = 0;
    }
  }
  posmap_free(&s->pos);
  s->pos = saved_pos;
  s->block = saved_block;
done:
  tsr_free(ops.data);
  tsr_free(sizes.data);
}

/* ---- Hoisting constants and entry allocations ---------------------------------------- */

typedef struct hoist {
  vec_t ops;
  bool failed;
} hoist_t;

static MlirWalkResult collect_constants(MlirOperation op, void *user) {
  hoist_t *h = user;
  if (is_constant(op) && !vec_push(&h->ops, &op)) {
    h->failed = true;
    return MlirWalkResultInterrupt;
  }
  return MlirWalkResultAdvance;
}

/* Moves every constant of the function, and its operand-less entry
 * allocations, before the entry block's first other op: they are then
 * before any chunk and never in one. */
static bool hoist_constants(MlirOperation func) {
  MlirBlock entry = mlirRegionGetFirstBlock(mlirOperationGetRegion(func, 0));
  if (mlirBlockIsNull(entry)) return true;
  hoist_t h = {.ops = {.elem = sizeof(MlirOperation)}};
  for (MlirOperation op = mlirBlockGetFirstOperation(entry); !mlirOperationIsNull(op);
       op = mlirOperationGetNextInBlock(op))
    if (is_entry_alloca(op) && !vec_push(&h.ops, &op)) h.failed = true;
  mlirOperationWalk(func, collect_constants, &h, MlirWalkPreOrder);
  if (h.failed) {
    tsr_free(h.ops.data);
    return false;
  }
  MlirOperation anchor = mlirBlockGetFirstOperation(entry);
  for (size_t i = 0; i < h.ops.n; i++) {
    MlirOperation op = VEC_AT(h.ops, MlirOperation, i);
    if (!mlirOperationEqual(op, anchor)) mlirOperationMoveBefore(op, anchor);
  }
  tsr_free(h.ops.data);
  return true;
}

/* ---- Merging equal parts -------------------------------------------------------------- */

/* A part's fingerprint: its ops in order, each as its name, its operands
 * (numbered by definition within the part: block arguments and results),
 * its result types, its attributes (name and value; the function's own
 * sym_name left out), its successors and its regions' blocks and their
 * argument types. Types, attributes and names are uniqued by the context,
 * so two parts have equal fingerprints exactly when they are the same
 * function up to their names and the names of their values: when they
 * print alike (as they were compared before, at ~3x the cost: printing the
 * ~10k ops of 600 parts was most of the split of a 10k-op kernel). */
typedef struct fingerprint {
  vec_t words; /* uint64_t */
  posmap_t ids; /* value or block -> its number */
  int32_t next_id;
  bool failed;
} fingerprint_t;

static void fp_word(fingerprint_t *f, uint64_t w) {
  if (!vec_push(&f->words, &w)) f->failed = true;
}

static void fp_define(fingerprint_t *f, const void *key) {
  if ((size_t)f->next_id * 2 + 16 > f->ids.cap) {
    posmap_t bigger;
    if (!posmap_init(&bigger, (size_t)f->next_id * 2 + 16)) {
      f->failed = true;
      return;
    }
    for (size_t j = 0; j < f->ids.cap; j++)
      if (f->ids.keys[j]) posmap_put(&bigger, f->ids.keys[j], f->ids.vals[j]);
    posmap_free(&f->ids);
    f->ids = bigger;
  }
  posmap_put(&f->ids, key, f->next_id++);
}

static void fp_op(fingerprint_t *f, MlirOperation op, bool top);

static void fp_region(fingerprint_t *f, MlirRegion region) {
  uint64_t blocks = 0;
  for (MlirBlock b = mlirRegionGetFirstBlock(region); !mlirBlockIsNull(b);
       b = mlirBlockGetNextInRegion(b)) {
    fp_define(f, b.ptr); /* before the ops: branches name later blocks */
    blocks++;
  }
  fp_word(f, blocks);
  for (MlirBlock b = mlirRegionGetFirstBlock(region); !mlirBlockIsNull(b) && !f->failed;
       b = mlirBlockGetNextInRegion(b)) {
    intptr_t nargs = mlirBlockGetNumArguments(b);
    fp_word(f, (uint64_t)nargs);
    for (intptr_t i = 0; i < nargs; i++) {
      MlirValue a = mlirBlockGetArgument(b, i);
      fp_word(f, (uint64_t)(uintptr_t)mlirValueGetType(a).ptr);
      fp_define(f, a.ptr);
    }
    uint64_t ops = 0;
    for (MlirOperation op = mlirBlockGetFirstOperation(b); !mlirOperationIsNull(op);
         op = mlirOperationGetNextInBlock(op))
      ops++;
    fp_word(f, ops);
    for (MlirOperation op = mlirBlockGetFirstOperation(b); !mlirOperationIsNull(op) && !f->failed;
         op = mlirOperationGetNextInBlock(op))
      fp_op(f, op, false);
  }
}

/* A value or block used by an op: its number within the part; one defined
 * outside it (a part is isolated: not expected) is itself, which equals
 * only itself. */
static void fp_use(fingerprint_t *f, const void *key) {
  int32_t id = posmap_get(&f->ids, key);
  fp_word(f, id >= 0 ? (uint64_t)id : (uint64_t)(uintptr_t)key | 1ull << 63);
}

static void fp_op(fingerprint_t *f, MlirOperation op, bool top) {
  fp_word(f, (uint64_t)(uintptr_t)mlirOperationGetName(op).ptr);
  intptr_t n = mlirOperationGetNumOperands(op);
  fp_word(f, (uint64_t)n);
  for (intptr_t i = 0; i < n; i++) fp_use(f, mlirOperationGetOperand(op, i).ptr);
  n = mlirOperationGetNumResults(op);
  fp_word(f, (uint64_t)n);
  for (intptr_t i = 0; i < n; i++) {
    MlirValue r = mlirOperationGetResult(op, i);
    fp_word(f, (uint64_t)(uintptr_t)mlirValueGetType(r).ptr);
    fp_define(f, r.ptr);
  }
  n = mlirOperationGetNumAttributes(op);
  fp_word(f, (uint64_t)n);
  for (intptr_t i = 0; i < n; i++) {
    MlirNamedAttribute a = mlirOperationGetAttribute(op, i);
    MlirStringRef name = mlirIdentifierStr(a.name);
    if (top && name.length == 8 && memcmp(name.data, "sym_name", 8) == 0) continue;
    fp_word(f, (uint64_t)(uintptr_t)a.name.ptr);
    fp_word(f, (uint64_t)(uintptr_t)a.attribute.ptr);
  }
  n = mlirOperationGetNumSuccessors(op);
  fp_word(f, (uint64_t)n);
  for (intptr_t i = 0; i < n; i++) fp_use(f, mlirOperationGetSuccessor(op, i).ptr);
  n = mlirOperationGetNumRegions(op);
  fp_word(f, (uint64_t)n);
  for (intptr_t i = 0; i < n && !f->failed; i++) fp_region(f, mlirOperationGetRegion(op, i));
}

/* The fingerprint of part function `func`, in *out (freed with tsr_free);
 * false when memory ran out. */
static bool fingerprint_part(MlirOperation func, uint64_t **out, size_t *out_n) {
  fingerprint_t f = {.words = {.elem = sizeof(uint64_t)}};
  if (!posmap_init(&f.ids, 64)) {
    posmap_free(&f.ids);
    return false;
  }
  fp_op(&f, func, true);
  posmap_free(&f.ids);
  if (f.failed) {
    tsr_free(f.words.data);
    return false;
  }
  *out = f.words.data;
  *out_n = f.words.n;
  return true;
}

static bool merge_equal_parts(splitter_t *s) {
  for (uint32_t i = 0; i < s->num_parts; i++) {
    part_fn_t *p = &s->parts[i];
    if (!fingerprint_part(p->func, &p->fingerprint, &p->fingerprint_words)) return false;
    p->hash = hash_bytes(1469598103934665603ull, p->fingerprint,
                         p->fingerprint_words * sizeof *p->fingerprint);
    for (uint32_t j = 0; j < i; j++) {
      part_fn_t *q = &s->parts[j];
      if (mlirOperationIsNull(q->func) || q->hash != p->hash ||
          q->fingerprint_words != p->fingerprint_words ||
          memcmp(q->fingerprint, p->fingerprint, p->fingerprint_words * sizeof *p->fingerprint) != 0)
        continue;
      MlirAttribute target = mlirFlatSymbolRefAttrGet(
          s->ctx, mlirStringAttrGetValue(mlirOperationGetAttributeByName(
                      q->func, mlirStringRefCreateFromCString("sym_name"))));
      mlirOperationSetAttributeByName(p->call, mlirStringRefCreateFromCString("callee"), target);
      mlirOperationDestroy(p->func);
      p->func = (MlirOperation){NULL};
      tsr_free(p->fingerprint);
      p->fingerprint = NULL;
      s->stats.merged++;
      break;
    }
  }
  return true;
}

/* ---- Entry ----------------------------------------------------------------------------- */

bool tsr_lower_split_module(MlirContext ctx, MlirModule module, const char *func_name,
                            const tsr_lower_split_params_t *params,
                            tsr_lower_split_stats_t *out_stats) {
  splitter_t s;
  memset(&s, 0, sizeof s);
  s.ctx = ctx;
  s.module_body = mlirModuleGetBody(module);
  s.params = *params;
  MlirOperation func = {NULL};
  for (MlirOperation op = mlirBlockGetFirstOperation(s.module_body); !mlirOperationIsNull(op);
       op = mlirOperationGetNextInBlock(op)) {
    MlirAttribute n = mlirOperationGetAttributeByName(op, mlirStringRefCreateFromCString("sym_name"));
    if (name_is(op, "func.func") && !mlirAttributeIsNull(n)) {
      MlirStringRef v = mlirStringAttrGetValue(n);
      if (v.length == strlen(func_name) && memcmp(v.data, func_name, v.length) == 0) func = op;
    }
  }
  bool ok = true;
  if (!mlirOperationIsNull(func) && op_size(func) > params->min_kernel_ops) {
    ok = hoist_constants(func);
    if (ok) {
      split_regions(&s, func);
      ok = !s.failed;
    }
    if (ok && params->merge) ok = merge_equal_parts(&s);
    /* Second pass: what is left of a long block is mostly calls of parts;
     * one basic block of thousands of calls, each with its arguments,
     * made instruction selection super-linear (30k ops: codegen 1.46 s
     * for 1870 calls against 0.25 s for 623), so runs of calls become
     * parts too, their scalar constants copied in (they are not merged). */
    if (ok && params->max_calls > 0) {
      s.clone_scalars = true;
      s.params.max_part_ops = params->max_calls;
      s.params.min_part_ops = params->max_calls / 4 + 1;
      split_regions(&s, func);
      ok = !s.failed;
    }
  }
  for (uint32_t i = 0; i < s.num_parts; i++) tsr_free(s.parts[i].fingerprint);
  tsr_free(s.parts);
  if (out_stats) *out_stats = s.stats;
  return ok;
}
