/* tsr_kernels_reduce: reductions (sum, prod, max, min, argmax, argmin, mean,
 * var, logsumexp) over any set of axes, as one Pallas-style kernel.
 *
 * The input is cut into blocks (reduce_util.c: full dims or multiples of
 * (8, 128) on the last two, as large as the VMEM budget allows); the grid
 * walks the kept dims' blocks first (parallel) and the reduced dims'
 * blocks last (arbitrary), so every output block is finished by
 * consecutive steps. Each step reduces its block over the reduced axes in
 * 32 bits (f32 for floats, i32 for integers: reduce_util.h), with padded
 * elements of an edge block replaced by the op's identity, and combines the partial
 * into accumulators in scratch (VMEM of the kept block shape, or SMEM
 * scalars for a full reduction); the last step of an output block writes
 * it. docs/kernels.md, "Cumulative ops and reductions". */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "kernels/reduce_util.h"

/* What a reduction carries across the steps of an output block. */
enum { MAX_STATES = 2 };

typedef struct reduce_gen {
  kb_t *b;
  const tsr_kernels_reduce_params_t *p;
  tsr_kernels_op_t op;
  tsr_dtype_t acc;          /* accumulation dtype */
  ru_layout_t l;            /* of the input */
  bool reduced[TSR_MAX_RANK];
  int64_t red_axes[TSR_MAX_RANK]; /* reduced block axes */
  uint32_t num_red;
  tsr_ir_type_t block_t;    /* the input block, in acc */
  tsr_ir_type_t part_t;     /* the kept block dims (a scalar when none), in acc */
  tsr_ir_type_t keep_t;     /* the block with reduced dims of size 1, in acc */
  tsr_ir_value_t *mask;     /* valid elements of the block, or NULL */
  uint32_t num_states;
  tsr_ir_type_t state_t[MAX_STATES];
} reduce_gen_t;

static tsr_status_t check_params(const tsr_kernels_reduce_params_t *p) {
  if ((unsigned)p->op >= TSR_KERNELS_OP_COUNT)
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "reduce: op %d is not a tsr_kernels_op_t", (int)p->op);
  if (p->rank < 1 || p->rank > TSR_MAX_RANK)
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "reduce: rank %u is not in 1..%d", p->rank,
                      TSR_MAX_RANK);
  for (uint32_t d = 0; d < p->rank; d++)
    if (p->dims[d] < 1 || p->dims[d] > INT32_MAX)
      return TSR_STATUS(TSR_INVALID_ARGUMENT, "reduce: dims[%u] = %lld is not in 1..2^31-1", d,
                        (long long)p->dims[d]);
  if ((unsigned)p->dtype >= TSR_DTYPE_COUNT)
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "reduce: dtype %d is not a tsr_dtype_t", (int)p->dtype);
  if (p->axes_mask >> p->rank)
    return TSR_STATUS(TSR_INVALID_ARGUMENT,
                      "reduce: axes_mask 0x%x names an axis >= rank %u", p->axes_mask, p->rank);
  if (p->vmem_budget_bytes < 0)
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "reduce: vmem_budget_bytes %lld is negative",
                      (long long)p->vmem_budget_bytes);
  const char *name = tsr_kernels_op_name(p->op);
  tsr_dtype_class_t cls = tsr_dtype_class(p->dtype);
  bool floats_only = p->op == TSR_KERNELS_MEAN || p->op == TSR_KERNELS_VARIANCE ||
                     p->op == TSR_KERNELS_LOGSUMEXP;
  if (floats_only && cls != TSR_CLASS_FLOAT)
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "reduce: op '%s' takes floats, not dtype %s", name,
                      tsr_dtype_name(p->dtype));
  if (cls == TSR_CLASS_BOOL && (p->op == TSR_KERNELS_SUM || p->op == TSR_KERNELS_PROD))
    return TSR_STATUS(TSR_INVALID_ARGUMENT,
                      "reduce: op '%s' of dtype i1 is not defined (its result would not be "
                      "boolean); convert to an integer dtype first", name);
  if (p->op == TSR_KERNELS_ARGMAX || p->op == TSR_KERNELS_ARGMIN) {
    uint32_t mask = p->axes_mask ? p->axes_mask : (1u << p->rank) - 1;
    if (mask & (mask - 1))
      return TSR_STATUS(TSR_UNIMPLEMENTED,
                        "reduce: op '%s' over several axes (axes_mask 0x%x): give one axis, or "
                        "reshape the array to one dimension first", name, mask);
  }
  return NULL;
}

/* The static slice [start, stop) of `v` (dims `dims`) along `axis`. */
static tsr_ir_value_t *slice_axis(kb_t *b, tsr_ir_value_t *v, uint32_t rank, const int64_t *dims,
                                  uint32_t axis, int64_t start, int64_t stop) {
  tsr_ir_index_t idx[TSR_MAX_RANK];
  int64_t rdims[TSR_MAX_RANK];
  for (uint32_t d = 0; d < rank; d++) {
    idx[d] = d == axis ? kb_slice(start, stop) : kb_slice(0, dims[d]);
    rdims[d] = d == axis ? stop - start : dims[d];
  }
  tsr_ir_type_t t = kb_vec(v ? (tsr_dtype_t)v->type.dtype : TSR_DTYPE_F32, rank, rdims);
  tsr_ir_op_params_t p = {.mnemonic = "slice", .operands = &v, .num_operands = 1,
                          .result_types = &t, .num_results = 1, .indices = idx,
                          .num_indices = rank};
  return kb_op(b, &p, NULL);
}

/* The product over the reduced axes without reduce_prod, which Mosaic does
 * not have: along each reduced axis of the last two (lanes, sublanes) a
 * log-step prefix product (roll, select, mul) whose last element is the
 * product; along a leading axis, halves multiplied together (the odd
 * element kept apart and multiplied in at the end). Every reduced axis
 * ends with size 1, dropped by a reduce_max of one element (exact). */
static tsr_ir_value_t *product(reduce_gen_t *g, tsr_ir_value_t *v) {
  kb_t *b = g->b;
  uint32_t r = g->l.rank;
  int64_t dims[TSR_MAX_RANK];
  for (uint32_t d = 0; d < r; d++) dims[d] = g->l.blocks[d];
  for (uint32_t i = 0; i < g->num_red; i++) {
    uint32_t axis = (uint32_t)g->red_axes[i];
    int64_t n = dims[axis];
    if (n == 1) continue;
    tsr_ir_type_t t = kb_vec(g->acc, r, dims);
    if (axis + 2 >= r) {
      tsr_ir_value_t *pos = kb_iota(b, kb_vec(TSR_DTYPE_I32, r, dims), axis);
      tsr_ir_value_t *one = ru_identity(b, TSR_KERNELS_PROD, t);
      for (int64_t step = 1; step < n; step *= 2) {
        tsr_ir_value_t *rolled = kb_roll(b, v, kb_i32(b, step), axis);
        tsr_ir_value_t *take = kb_compare(b, "ge", pos, kb_i32(b, step));
        v = kb_binary(b, "mul", v, kb_select(b, take, rolled, one));
      }
      v = slice_axis(b, v, r, dims, axis, n - 1, n);
    } else {
      tsr_ir_value_t *extra = NULL;
      while (n > 1) {
        int64_t h = n / 2;
        if (n % 2) {
          tsr_ir_value_t *odd = slice_axis(b, v, r, dims, axis, n - 1, n);
          extra = extra ? kb_binary(b, "mul", extra, odd) : odd;
        }
        tsr_ir_value_t *lo = slice_axis(b, v, r, dims, axis, 0, h);
        tsr_ir_value_t *hi = slice_axis(b, v, r, dims, axis, h, 2 * h);
        dims[axis] = h;
        v = kb_binary(b, "mul", lo, hi);
        n = h;
      }
      if (extra) v = kb_binary(b, "mul", v, extra);
    }
    dims[axis] = 1;
  }
  return kb_reduce(b, "reduce_max", v, g->red_axes, g->num_red, g->part_t);
}

/* The partial of this block's reduced axes: a value of part_t. */
static tsr_ir_value_t *reduce_block(reduce_gen_t *g, const char *mnemonic, tsr_ir_value_t *v) {
  if (strcmp(mnemonic, "reduce_prod") == 0) return product(g, v);
  return kb_reduce(g->b, mnemonic, v, g->red_axes, g->num_red, g->part_t);
}

/* A partial (part_t) broadcast back over the block (block_t). */
static tsr_ir_value_t *spread(reduce_gen_t *g, tsr_ir_value_t *part) {
  if (g->part_t.kind == TSR_TYPE_SCALAR) return kb_broadcast(g->b, part, g->block_t);
  return kb_broadcast(g->b, kb_reshape(g->b, part, g->keep_t), g->block_t);
}

static tsr_ir_value_t *fconst(reduce_gen_t *g, tsr_ir_type_t t, double v) {
  return kb_const_f(g->b, kb_retype(t, TSR_DTYPE_F32), v);
}

static tsr_ir_value_t *is_finite(reduce_gen_t *g, tsr_ir_value_t *v) {
  return kb_compare(g->b, "lt", kb_unary(g->b, "abs", v), fconst(g, kb_type_of(v), INFINITY));
}

/* logsumexp's shift: the max where finite, else 0 (jax.nn.logsumexp). */
static tsr_ir_value_t *lse_shift(reduce_gen_t *g, tsr_ir_value_t *m) {
  return kb_select(g->b, is_finite(g, m), m, fconst(g, kb_type_of(m), 0.0));
}

/* s * exp(shift(m_old) - shift(m_new)), and 0 when m_old is -inf (s is 0). */
static tsr_ir_value_t *lse_rescale(reduce_gen_t *g, tsr_ir_value_t *s, tsr_ir_value_t *m_old,
                                   tsr_ir_value_t *m_new) {
  kb_t *b = g->b;
  tsr_ir_type_t t = kb_type_of(s);
  tsr_ir_value_t *f =
      kb_unary(b, "exp", kb_binary(b, "sub", lse_shift(g, m_old), lse_shift(g, m_new)));
  tsr_ir_value_t *empty = kb_compare(b, "eq", m_old, fconst(g, t, -INFINITY));
  return kb_select(b, empty, fconst(g, t, 0.0), kb_binary(b, "mul", s, f));
}

/* The block's partial states (what the accumulators combine), from the
 * block `a` in acc with padding already set to the op's identity where it
 * matters. `count` is the number of valid elements reduced into each
 * output element by this block (f32 scalar; var only). */
static void partials(reduce_gen_t *g, tsr_ir_value_t *a, tsr_ir_value_t *count,
                     tsr_ir_value_t **out) {
  kb_t *b = g->b;
  switch (g->op) {
  case TSR_KERNELS_ARGMAX:
  case TSR_KERNELS_ARGMIN: {
    uint32_t axis = (uint32_t)g->red_axes[0];
    /* The first index holding the extreme, or the first NaN: the lowest
     * index where x equals the max (min) or is NaN (then the max is NaN).
     * Not `argmax`: Mosaic's tpu.reduce_index takes f32/bf16 only, and its
     * NaN rule is the TPU's (docs/tpu.md). */
    out[0] = reduce_block(g, ru_reduce_name(g->op), a);
    tsr_ir_type_t it = kb_retype(g->block_t, TSR_DTYPE_I32);
    tsr_ir_value_t *hit = kb_compare(b, "eq", a, spread(g, out[0]));
    if (ru_is_float(g->acc)) hit = kb_binary(b, "or", hit, kb_compare(b, "ne", a, a));
    tsr_ir_value_t *where = kb_select(b, hit, kb_iota(b, it, axis), kb_const_i(b, it, INT32_MAX));
    tsr_ir_value_t *local = kb_reduce(b, "reduce_min", where, &g->red_axes[0], 1,
                                      kb_retype(g->part_t, TSR_DTYPE_I32));
    tsr_ir_value_t *start = kb_binary(b, "mul", ru_block_index(b, &g->l, axis),
                                      kb_i32(b, g->l.blocks[axis]));
    out[1] = kb_binary(b, "add", local, g->part_t.kind == TSR_TYPE_SCALAR
                                            ? start
                                            : kb_broadcast(b, start, kb_type_of(local)));
    return;
  }
  case TSR_KERNELS_VARIANCE: {
    tsr_ir_value_t *mean = kb_binary(b, "div", reduce_block(g, "reduce_sum", a),
                                     g->part_t.kind == TSR_TYPE_SCALAR
                                         ? count
                                         : kb_broadcast(b, count, g->part_t));
    tsr_ir_value_t *d = kb_binary(b, "sub", a, spread(g, mean));
    tsr_ir_value_t *d2 = kb_binary(b, "mul", d, d);
    if (g->mask) d2 = kb_select(b, g->mask, d2, fconst(g, g->block_t, 0.0));
    out[0] = mean;
    out[1] = reduce_block(g, "reduce_sum", d2);
    return;
  }
  case TSR_KERNELS_LOGSUMEXP: {
    tsr_ir_value_t *m = reduce_block(g, "reduce_max", a);
    tsr_ir_value_t *e = kb_unary(b, "exp", kb_binary(b, "sub", a, spread(g, lse_shift(g, m))));
    out[0] = m;
    out[1] = reduce_block(g, "reduce_sum", e);
    return;
  }
  case TSR_KERNELS_MEAN:
    out[0] = reduce_block(g, "reduce_sum", a);
    return;
  default:
    out[0] = reduce_block(g, ru_reduce_name(g->op), a);
    return;
  }
}

/* The accumulators' first values: the partial of an empty block. */
static void initial(reduce_gen_t *g, tsr_ir_value_t **out) {
  kb_t *b = g->b;
  switch (g->op) {
  case TSR_KERNELS_ARGMAX:
  case TSR_KERNELS_ARGMIN:
    out[0] = ru_identity(b, g->op, g->state_t[0]);
    out[1] = kb_const_i(b, g->state_t[1], 0);
    return;
  case TSR_KERNELS_VARIANCE:
    out[0] = fconst(g, g->state_t[0], 0.0);
    out[1] = fconst(g, g->state_t[1], 0.0);
    return;
  case TSR_KERNELS_LOGSUMEXP:
    out[0] = fconst(g, g->state_t[0], -INFINITY);
    out[1] = fconst(g, g->state_t[1], 0.0);
    return;
  case TSR_KERNELS_MEAN:
    out[0] = fconst(g, g->state_t[0], 0.0);
    return;
  default:
    out[0] = ru_identity(b, g->op, g->state_t[0]);
    return;
  }
}

/* Accumulators `acc` combined with a later block's partials `part`.
 * `n_acc`, `n_part`: element counts (f32 scalars; var only). */
static void combine(reduce_gen_t *g, tsr_ir_value_t **acc, tsr_ir_value_t **part,
                    tsr_ir_value_t *n_acc, tsr_ir_value_t *n_part, tsr_ir_value_t **out) {
  kb_t *b = g->b;
  switch (g->op) {
  case TSR_KERNELS_ARGMAX:
  case TSR_KERNELS_ARGMIN: {
    /* The later block wins only when strictly better (first occurrence);
     * a NaN beats every number, the first NaN stays. */
    tsr_ir_value_t *better =
        kb_compare(b, g->op == TSR_KERNELS_ARGMAX ? "gt" : "lt", part[0], acc[0]);
    if (ru_is_float(g->acc)) {
      tsr_ir_value_t *nan_new = kb_binary(b, "and", kb_compare(b, "ne", part[0], part[0]),
                                          kb_compare(b, "eq", acc[0], acc[0]));
      better = kb_binary(b, "or", better, nan_new);
    }
    out[0] = kb_select(b, better, part[0], acc[0]);
    out[1] = kb_select(b, better, part[1], acc[1]);
    return;
  }
  case TSR_KERNELS_VARIANCE: {
    /* Chan et al.: merging (n_a, mean_a, M2_a) and (n_b, mean_b, M2_b). */
    tsr_ir_value_t *n = kb_binary(b, "add", n_acc, n_part);
    tsr_ir_value_t *wb = kb_binary(b, "div", n_part, n);            /* n_b / n */
    tsr_ir_value_t *wab = kb_binary(b, "mul", n_acc, wb);          /* n_a n_b / n */
    bool scalar = g->part_t.kind == TSR_TYPE_SCALAR;
    tsr_ir_value_t *wb_v = scalar ? wb : kb_broadcast(b, wb, g->part_t);
    tsr_ir_value_t *wab_v = scalar ? wab : kb_broadcast(b, wab, g->part_t);
    tsr_ir_value_t *delta = kb_binary(b, "sub", part[0], acc[0]);
    out[0] = kb_binary(b, "add", acc[0], kb_binary(b, "mul", delta, wb_v));
    tsr_ir_value_t *cross = kb_binary(b, "mul", kb_binary(b, "mul", delta, delta), wab_v);
    out[1] = kb_binary(b, "add", kb_binary(b, "add", acc[1], part[1]), cross);
    return;
  }
  case TSR_KERNELS_LOGSUMEXP: {
    tsr_ir_value_t *m = kb_binary(b, "max", acc[0], part[0]);
    out[0] = m;
    out[1] = kb_binary(b, "add", lse_rescale(g, acc[1], acc[0], m),
                       lse_rescale(g, part[1], part[0], m));
    return;
  }
  case TSR_KERNELS_MEAN:
    out[0] = kb_binary(b, "add", acc[0], part[0]);
    return;
  default:
    out[0] = kb_binary(b, ru_binary_name(g->op), acc[0], part[0]);
    return;
  }
}

/* The result (part_t, in the output's dtype) from the final states. */
static tsr_ir_value_t *finish(reduce_gen_t *g, tsr_ir_value_t **st, tsr_ir_value_t *n_total) {
  kb_t *b = g->b;
  tsr_ir_value_t *r;
  switch (g->op) {
  case TSR_KERNELS_ARGMAX:
  case TSR_KERNELS_ARGMIN:
    return st[1];
  case TSR_KERNELS_VARIANCE:
  case TSR_KERNELS_MEAN: {
    tsr_ir_value_t *src = g->op == TSR_KERNELS_MEAN ? st[0] : st[1];
    tsr_ir_value_t *n = g->part_t.kind == TSR_TYPE_SCALAR ? n_total
                                                         : kb_broadcast(b, n_total, g->part_t);
    r = kb_binary(b, "div", src, n);
    break;
  }
  case TSR_KERNELS_LOGSUMEXP:
    r = kb_binary(b, "add", kb_unary(b, "log", st[1]), lse_shift(g, st[0]));
    break;
  default:
    r = st[0];
    break;
  }
  return ru_from_acc(b, r, g->p->dtype, g->op);
}

/* The result (part_t) into the output block (of rank orank). */
static void store_result(reduce_gen_t *g, tsr_ir_value_t *y, tsr_ir_value_t *result,
                         uint32_t orank, const int32_t *osrc, uint32_t krank,
                         tsr_dtype_t out_dtype) {
  kb_t *b = g->b;
  if (orank == 1 && osrc[0] < 0 && krank == 0 && y && y->type.space == TSR_SPACE_SMEM) {
    kb_store(b, y, (tsr_ir_index_t[]){kb_point(0)}, 1, NULL, 0, result);
    return;
  }
  int64_t odims[TSR_MAX_RANK];
  for (uint32_t i = 0; i < orank; i++) odims[i] = osrc[i] < 0 ? 1 : g->l.blocks[osrc[i]];
  tsr_ir_type_t ot = kb_vec(out_dtype, orank, odims);
  if (krank == 0)
    result = kb_broadcast(b, result, ot);
  else if (krank != orank)
    result = kb_reshape(b, result, ot);
  kb_store_all(b, y, result);
}

static tsr_ir_value_t *f32_of(kb_t *b, int64_t v) {
  return kb_const_f(b, tsr_ir_type_scalar(TSR_DTYPE_F32), (double)v);
}

tsr_status_t tsr_kernels_reduce(const tsr_kernels_reduce_params_t *p,
                                tsr_ir_module_t **out_module) {
  if (!p || !out_module)
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "reduce: params and out_module must not be NULL");
  tsr_status_t s = check_params(p);
  if (s) return s;

  reduce_gen_t g = {0};
  g.p = p;
  g.op = p->op;
  g.acc = ru_acc_dtype(p->dtype);
  uint32_t r = p->rank;
  uint32_t mask = p->axes_mask ? p->axes_mask : (1u << r) - 1;
  for (uint32_t d = 0; d < r; d++) g.reduced[d] = (mask >> d) & 1u;
  bool arg = g.op == TSR_KERNELS_ARGMAX || g.op == TSR_KERNELS_ARGMIN;
  tsr_dtype_t out_dtype = arg ? TSR_DTYPE_I32 : p->dtype;

  /* The output: kept dims in order, reduced ones as 1 with keepdims. */
  uint32_t orank = 0;
  int64_t odims[TSR_MAX_RANK];
  int32_t osrc[TSR_MAX_RANK];
  for (uint32_t d = 0; d < r; d++) {
    if (!g.reduced[d]) {
      odims[orank] = p->dims[d];
      osrc[orank++] = (int32_t)d;
    } else if (p->keepdims) {
      odims[orank] = 1;
      osrc[orank++] = -1;
    }
  }

  /* A reduction to one number without keepdims gives shape (1,): kernel
   * operands have rank >= 1. */
  if (orank == 0) {
    odims[0] = 1;
    osrc[0] = -1;
    orank = 1;
  }

  /* Block granules: Pallas's rules for the input and the output. */
  int64_t granule[TSR_MAX_RANK];
  for (uint32_t d = 0; d < r; d++) granule[d] = 1;
  if (r == 1) {
    granule[0] = 1024;
  } else {
    granule[r - 1] = 128;
    granule[r - 2] = 8;
  }
  if (orank == 1 && osrc[0] >= 0 && granule[osrc[0]] < 1024) granule[osrc[0]] = 1024;
  if (orank >= 2) {
    if (osrc[orank - 1] >= 0 && granule[osrc[orank - 1]] < 128) granule[osrc[orank - 1]] = 128;
    if (osrc[orank - 2] >= 0 && granule[osrc[orank - 2]] < 8) granule[osrc[orank - 2]] = 8;
  }
  g.l.rank = r;
  for (uint32_t d = 0; d < r; d++) g.l.dims[d] = p->dims[d];
  /* When the last dim is kept, the cpu backend sums each output vector
   * over the block's reduced rows, output vector by output vector: rows
   * far apart in memory are as many strided streams, and the accumulator
   * (the kept part of the block) is read and written once per step. A
   * (128, 4096) f32 block reduced over its rows ran at 8 GB/s, an (8, 4096)
   * one at 24-28 GB/s (docs/benchmarks.md, "The library's scans and
   * reductions"). So the kept part of a block is held to 16 Ki elements
   * (64 KiB in f32) and the reduced rows to 8 when a row is 8 KiB or more,
   * else to 256 KiB of rows; the VMEM budget bounds the whole block. */
  int64_t per_element = 2 * (int64_t)tsr_dtype_size(p->dtype) + 24;
  int64_t limit = ru_block_limit(p->vmem_budget_bytes, per_element);
  int64_t cap_dims[TSR_MAX_RANK];
  for (uint32_t d = 0; d < r; d++) cap_dims[d] = p->dims[d];
  if (r >= 2 && !g.reduced[r - 1]) {
    int64_t least = 1; /* the reduced dims at their smallest block */
    for (uint32_t d = 0; d < r; d++)
      if (g.reduced[d]) {
        cap_dims[d] = p->dims[d] < granule[d] ? p->dims[d] : granule[d];
        least *= cap_dims[d];
      }
    int64_t kept_limit = (int64_t)16384 * least;
    ru_choose_blocks(r, cap_dims, granule, kept_limit < limit ? kept_limit : limit, g.l.blocks);
    int64_t inner = 4;
    for (uint32_t d = 0; d < r; d++)
      if (!g.reduced[d]) cap_dims[d] = g.l.blocks[d];
    for (uint32_t d = r; d-- > 0 && !g.reduced[d];) inner *= g.l.blocks[d];
    int64_t rows = inner >= 8192 ? 8 : 262144 / inner;
    for (uint32_t d = r; d-- > 0;) {
      if (!g.reduced[d]) continue;
      int64_t cap = p->dims[d] <= rows ? p->dims[d] : rows / granule[d] * granule[d];
      if (cap < granule[d]) cap = p->dims[d] < granule[d] ? p->dims[d] : granule[d];
      cap_dims[d] = cap;
      rows = rows / cap > 1 ? rows / cap : 1;
    }
  }
  ru_choose_blocks(r, cap_dims, granule, limit, g.l.blocks);
  uint32_t order[TSR_MAX_RANK], n = 0, kept = 0;
  for (uint32_t d = 0; d < r; d++)
    if (!g.reduced[d]) order[n++] = d;
  kept = n;
  for (uint32_t d = 0; d < r; d++)
    if (g.reduced[d]) order[n++] = d;
  ru_layout_grid(&g.l, order, n, kept);

  int64_t kdims[TSR_MAX_RANK], keepdims_block[TSR_MAX_RANK];
  uint32_t krank = 0;
  int64_t total = 1; /* elements reduced into each output element */
  for (uint32_t d = 0; d < r; d++) {
    keepdims_block[d] = g.reduced[d] ? 1 : g.l.blocks[d];
    if (g.reduced[d]) {
      g.red_axes[g.num_red++] = d;
      total *= p->dims[d];
    } else {
      kdims[krank++] = g.l.blocks[d];
    }
  }
  g.block_t = kb_vec(g.acc, r, g.l.blocks);
  g.part_t = kb_vec(g.acc, krank, kdims);
  g.keep_t = kb_vec(g.acc, r, keepdims_block);
  g.num_states = (arg || g.op == TSR_KERNELS_VARIANCE || g.op == TSR_KERNELS_LOGSUMEXP) ? 2 : 1;
  g.state_t[0] = g.part_t;
  g.state_t[1] = arg ? kb_retype(g.part_t, TSR_DTYPE_I32) : g.part_t;

  kb_t b;
  char name[64];
  snprintf(name, sizeof name, "reduce_%s", tsr_kernels_op_name(g.op));
  kb_begin(&b, name);
  g.b = &b;
  kb_grid(&b, g.l.grid_rank, g.l.grid, g.l.semantics);
  int32_t isrc[TSR_MAX_RANK];
  for (uint32_t d = 0; d < r; d++) isrc[d] = (int32_t)d;
  tsr_ir_value_t *x = ru_operand(&b, &g.l, TSR_ROLE_IN, "x", p->dtype, r, p->dims, isrc,
                                 TSR_SPACE_VMEM);
  /* A one-element result lives in SMEM when SMEM can hold its dtype (32
   * bits), as a Pallas kernel would write a scalar. */
  tsr_ir_space_t ospace = orank == 1 && osrc[0] < 0 && tsr_dtype_size(out_dtype) == 4
                              ? TSR_SPACE_SMEM
                              : TSR_SPACE_VMEM;
  tsr_ir_value_t *y =
      ru_operand(&b, &g.l, TSR_ROLE_OUT, "y", out_dtype, orank, odims, osrc, ospace);

  /* Reduced dims walked by the grid: the accumulators live in scratch. */
  bool multi = false;
  for (uint32_t d = 0; d < r; d++) multi |= g.reduced[d] && g.l.axis_of[d] >= 0;
  tsr_ir_value_t *st_ref[MAX_STATES] = {0}, *count_ref = NULL;
  if (multi) {
    static const char *const st_names[MAX_STATES] = {"acc", "acc2"};
    for (uint32_t i = 0; i < g.num_states; i++) {
      tsr_ir_type_t t = g.state_t[i];
      st_ref[i] = t.kind == TSR_TYPE_SCALAR
                      ? kb_scratch(&b, st_names[i], TSR_SPACE_SMEM, (tsr_dtype_t)t.dtype, 0, NULL)
                      : kb_scratch(&b, st_names[i], TSR_SPACE_VMEM, (tsr_dtype_t)t.dtype, krank,
                                   kdims);
    }
    if (g.op == TSR_KERNELS_VARIANCE)
      count_ref = kb_scratch(&b, "count", TSR_SPACE_SMEM, TSR_DTYPE_F32, 0, NULL);
  }

  /* The block in acc, padding set to the identity. */
  g.mask = ru_valid_mask(&b, &g.l);
  tsr_ir_value_t *a = ru_load_block(&b, &g.l, x, g.mask);
  a = ru_to_acc(&b, a, p->dtype, g.op);
  if (g.mask) {
    tsr_kernels_op_t pad_op = g.op;
    if (g.op == TSR_KERNELS_MEAN || g.op == TSR_KERNELS_VARIANCE) pad_op = TSR_KERNELS_SUM;
    if (g.op == TSR_KERNELS_LOGSUMEXP) pad_op = TSR_KERNELS_MAX;
    a = kb_select(&b, g.mask, a, ru_identity(&b, pad_op, g.block_t));
  }
  /* Elements of this block per output element (var). */
  tsr_ir_value_t *n_block = NULL;
  if (g.op == TSR_KERNELS_VARIANCE) {
    tsr_ir_value_t *cnt = kb_i32(&b, 1);
    for (uint32_t i = 0; i < g.num_red; i++)
      cnt = kb_binary(&b, "mul", cnt, ru_valid_extent(&b, &g.l, (uint32_t)g.red_axes[i]));
    n_block = kb_convert(&b, cnt, TSR_DTYPE_F32);
  }
  tsr_ir_value_t *part[MAX_STATES] = {0};
  partials(&g, a, n_block, part);

  tsr_ir_value_t *result;
  kb_for_t when_last = {0};
  if (!multi) {
    result = finish(&g, part, f32_of(&b, total));
  } else {
    tsr_ir_value_t *first = NULL, *last = NULL;
    for (uint32_t d = 0; d < r; d++) {
      if (!g.reduced[d] || g.l.axis_of[d] < 0) continue;
      tsr_ir_value_t *pid = kb_program_id(&b, g.l.axis_of[d]);
      tsr_ir_value_t *f = kb_compare(&b, "eq", pid, kb_i32(&b, 0));
      tsr_ir_value_t *e = kb_compare(&b, "eq", pid, kb_i32(&b, g.l.counts[d] - 1));
      first = first ? kb_binary(&b, "and", first, f) : f;
      last = last ? kb_binary(&b, "and", last, e) : e;
    }
    kb_for_t when = kb_begin_if(&b, first);
    tsr_ir_value_t *init[MAX_STATES] = {0};
    initial(&g, init);
    for (uint32_t i = 0; i < g.num_states; i++) kb_store_all(&b, st_ref[i], init[i]);
    if (count_ref) kb_store_all(&b, count_ref, f32_of(&b, 0));
    kb_end_if(&b, &when);

    tsr_ir_value_t *acc[MAX_STATES] = {0}, *next[MAX_STATES] = {0};
    for (uint32_t i = 0; i < g.num_states; i++) acc[i] = kb_load_all(&b, st_ref[i]);
    tsr_ir_value_t *n_acc = count_ref ? kb_load_all(&b, count_ref) : NULL;
    combine(&g, acc, part, n_acc, n_block, next);
    for (uint32_t i = 0; i < g.num_states; i++) kb_store_all(&b, st_ref[i], next[i]);
    if (count_ref) kb_store_all(&b, count_ref, kb_binary(&b, "add", n_acc, n_block));

    when_last = kb_begin_if(&b, last);
    tsr_ir_value_t *fin[MAX_STATES] = {0};
    for (uint32_t i = 0; i < g.num_states; i++) fin[i] = kb_load_all(&b, st_ref[i]);
    result = finish(&g, fin, f32_of(&b, total));
  }
  store_result(&g, y, result, orank, osrc, krank, out_dtype);

  if (multi) kb_end_if(&b, &when_last);
  return kb_finish(&b, out_module);
}
