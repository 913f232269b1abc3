/* tsr_kernels_sort: sort along an axis with a bitonic network in VMEM
 * (tessera/kernels.h). The network, the keys and the block layout are
 * shared with top-k (sort_internal.h); docs/kernels.md, "Sort and top-k". */
#include <stdio.h>
#include <string.h>

#include "kernels/sort_internal.h"

/* Positions per block the layout aims at when it may choose (the non-axis
 * tiles grow until a block holds about this many): big enough that a
 * block's ops amortise their dispatch, small enough to stay in a CPU's L2. */
#define TARGET_POSITIONS ((int64_t)1 << 15)

bool sort_dtype_supported(tsr_dtype_t dtype) {
  switch (dtype) {
  case TSR_DTYPE_F32: case TSR_DTYPE_BF16: case TSR_DTYPE_F16: case TSR_DTYPE_I32:
  case TSR_DTYPE_U32: case TSR_DTYPE_I16: case TSR_DTYPE_U16: case TSR_DTYPE_I8:
  case TSR_DTYPE_U8:
    return true;
  default:
    return false;
  }
}

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* A tile of `dim` for a dimension whose block must be a multiple of
 * `quantum` or the whole dimension: at most `want` elements, at least one
 * quantum. */
static int64_t tile(int64_t dim, int64_t want, int64_t quantum) {
  if (dim <= want) return dim;
  int64_t t = want / quantum * quantum;
  return t < quantum ? quantum : t;
}

tsr_status_t sort_check_shape(uint32_t rank, const int64_t *dims, int32_t axis,
                              const char *entry) {
  if (rank < 1 || rank > TSR_MAX_RANK)
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "%s: rank must be 1..%d, got %u", entry,
                      TSR_MAX_RANK, rank);
  for (uint32_t d = 0; d < rank; d++)
    if (dims[d] < 1 || dims[d] > ((int64_t)1 << 31))
      return TSR_STATUS(TSR_INVALID_ARGUMENT, "%s: dims[%u] must be 1..2^31, got %lld",
                        entry, d, (long long)dims[d]);
  if (axis < -(int32_t)rank || axis >= (int32_t)rank)
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "%s: axis %d is out of range for rank %u", entry,
                      axis, rank);
  return NULL;
}

tsr_status_t sort_layout_plan(uint32_t rank, const int64_t *dims, int32_t axis,
                              int64_t bytes_per_position, int64_t budget, const char *entry,
                              sort_layout_t *out) {
  TSR_RETURN_IF_ERROR(sort_check_shape(rank, dims, axis, entry));
  if (budget < 0)
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "%s: vmem_budget_bytes must be >= 0, got %lld",
                      entry, (long long)budget);
  if (budget == 0) budget = SORT_DEFAULT_BUDGET;
  sort_layout_t l;
  memset(&l, 0, sizeof l);
  l.rank = rank;
  memcpy(l.dims, dims, rank * sizeof *dims);
  l.axis = (uint32_t)(axis < 0 ? axis + (int32_t)rank : axis);
  l.n = dims[l.axis];
  /* The axis's block: a power of two, and Pallas's TPU rules (the last dim
   * a multiple of 128 or the array's, the second-to-last of 8; rank 1: the
   * array, or a power of two of at least 128). */
  l.p = pow2_at_least(l.n);
  if (l.p != l.n) {
    if (l.axis == rank - 1 && l.p < 128) l.p = 128;
    if (rank >= 2 && l.axis == rank - 2 && l.p < 8) l.p = 8;
  }
  /* Non-axis tiles: grow to TARGET_POSITIONS, shrink to the budget. */
  int64_t want = TARGET_POSITIONS / l.p;
  if (want < 1) want = 1;
  for (;;) {
    for (uint32_t d = 0; d < rank; d++) l.block[d] = d == l.axis ? l.p : TSR_SQUEEZED;
    int64_t extent = 1;
    if (l.axis != rank - 1) {
      l.block[rank - 1] = tile(dims[rank - 1], want, 128);
      extent = l.block[rank - 1];
    }
    if (rank >= 2 && l.axis != rank - 2) {
      int64_t w = want / extent;
      l.block[rank - 2] = tile(dims[rank - 2], w < 1 ? 1 : w, 8);
      extent *= l.block[rank - 2];
    }
    int64_t bytes = extent * l.p * bytes_per_position;
    if (bytes <= budget) break;
    if (want == 1)
      return TSR_STATUS(TSR_UNIMPLEMENTED,
                        "%s: one block of the axis (%lld positions padded to %lld) needs about "
                        "%lld bytes of VMEM, more than vmem_budget_bytes (%lld); sorts that "
                        "merge blocks through HBM are not implemented yet",
                        entry, (long long)l.n, (long long)l.p, (long long)bytes,
                        (long long)budget);
    want /= 2;
  }
  /* The grid: one dimension per non-axis array dimension. */
  for (uint32_t d = 0; d < rank; d++) {
    if (d == l.axis) continue;
    int64_t bd = l.block[d] == TSR_SQUEEZED ? 1 : l.block[d];
    l.grid_dim_of[d] = l.grid_rank;
    l.grid[l.grid_rank++] = cdiv(dims[d], bd);
  }
  if (l.grid_rank == 0) l.grid[l.grid_rank++] = 1;
  /* What the body sees. */
  for (uint32_t d = 0; d < rank; d++) {
    if (l.block[d] == TSR_SQUEEZED) continue;
    if (d == l.axis) l.vis_axis = l.vis_rank;
    l.vis[l.vis_rank++] = l.block[d];
  }
  if (l.vis_rank == 1) {
    l.reshape_1d = true;
    l.vis_rank = 2;
    l.vis[0] = 1;
    l.vis[1] = l.p;
    l.vis_axis = 1;
  }
  *out = l;
  return NULL;
}

tsr_ir_value_t *sort_operand(kb_t *b, const sort_layout_t *l, tsr_ir_role_t role,
                             const char *name, tsr_dtype_t dtype, int64_t axis_size) {
  int64_t dims[TSR_MAX_RANK], block[TSR_MAX_RANK];
  memcpy(dims, l->dims, sizeof dims);
  memcpy(block, l->block, sizeof block);
  if (axis_size > 0) dims[l->axis] = block[l->axis] = axis_size;
  tsr_ir_region_t *map = NULL;
  tsr_ir_value_t *ref =
      kb_operand(b, role, name, dtype, l->rank, dims, TSR_SPACE_VMEM, block, &map);
  if (!ref || !map) return ref;
  tsr_ir_region_t *body = b->region;
  b->region = map;
  tsr_ir_value_t *yields[TSR_MAX_RANK];
  tsr_ir_value_t *zero = kb_i32(b, 0);
  for (uint32_t d = 0; d < l->rank; d++)
    yields[d] = d == l->axis ? zero : tsr_ir_region_arg(map, l->grid_dim_of[d]);
  kb_yield(b, yields, l->rank);
  b->region = body;
  return ref;
}

static tsr_ir_type_t vis_type(const sort_layout_t *l, tsr_dtype_t dtype) {
  return kb_vec(dtype, l->vis_rank, l->vis);
}

tsr_ir_value_t *sort_load(kb_t *b, const sort_layout_t *l, tsr_ir_value_t *ref) {
  tsr_ir_value_t *v = kb_load_all(b, ref);
  if (l->reshape_1d && ref) v = kb_reshape(b, v, vis_type(l, (tsr_dtype_t)ref->type.dtype));
  return v;
}

void sort_store(kb_t *b, const sort_layout_t *l, tsr_ir_value_t *ref, tsr_ir_value_t *value) {
  if (l->reshape_1d && ref) value = kb_reshape(b, value, kb_vec((tsr_dtype_t)ref->type.dtype, 1,
                                                                 &ref->type.dims[0]));
  kb_store_all(b, ref, value);
}

/* ---- keys ---- */

static tsr_ir_value_t *splat_i32(kb_t *b, tsr_ir_value_t *like, int64_t value) {
  return kb_const_i(b, kb_retype(like ? like->type : tsr_ir_type_scalar(TSR_DTYPE_I32),
                                 TSR_DTYPE_I32), value);
}

/* bits ^ ((bits >> 31) & low): flips the magnitude bits of negatives, so a
 * signed comparison is the sign-magnitude order (its own inverse). */
static tsr_ir_value_t *flip_negatives(kb_t *b, tsr_ir_value_t *bits, int64_t low) {
  tsr_ir_value_t *sign = kb_binary(b, "shra", bits, splat_i32(b, bits, 31));
  return kb_binary(b, "xor", bits, kb_binary(b, "and", sign, splat_i32(b, bits, low)));
}

/* Floats to i32 bits (16-bit floats sign-extended). */
static tsr_ir_value_t *float_bits(kb_t *b, tsr_ir_value_t *v, tsr_dtype_t dtype) {
  if (dtype == TSR_DTYPE_F32) return kb_bitcast(b, v, TSR_DTYPE_I32);
  return kb_convert(b, kb_bitcast(b, v, TSR_DTYPE_I16), TSR_DTYPE_I32);
}

static tsr_ir_value_t *bits_to_float(kb_t *b, tsr_ir_value_t *bits, tsr_dtype_t dtype) {
  if (dtype == TSR_DTYPE_F32) return kb_bitcast(b, bits, TSR_DTYPE_F32);
  return kb_bitcast(b, kb_convert(b, bits, TSR_DTYPE_I16), dtype);
}

/* The number of negative NaN bit patterns of a float dtype. */
static int64_t negative_nans(tsr_dtype_t dtype) {
  return dtype == TSR_DTYPE_F32 ? 0x7fffff : dtype == TSR_DTYPE_BF16 ? 0x7f : 0x3ff;
}

tsr_ir_value_t *sort_key(kb_t *b, tsr_ir_value_t *v, tsr_dtype_t dtype, sort_order_t order,
                         bool canonical, bool descending) {
  tsr_ir_value_t *key = NULL;
  switch (dtype) {
  case TSR_DTYPE_F32: case TSR_DTYPE_BF16: case TSR_DTYPE_F16: {
    if (canonical) { /* one key for every NaN and for both zeros */
      tsr_ir_type_t t = v ? v->type : tsr_ir_type_scalar(dtype);
      tsr_ir_value_t *nan = kb_compare(b, "ne", v, v);
      tsr_ir_value_t *zero = kb_compare(b, "eq", v, kb_const_f(b, t, 0.0));
      v = kb_select(b, zero, kb_const_f(b, t, 0.0), v);
      v = kb_select(b, nan, kb_const_f(b, t, __builtin_nan("")), v);
    }
    bool wide = dtype == TSR_DTYPE_F32;
    tsr_ir_value_t *t = flip_negatives(b, float_bits(b, v, dtype), wide ? 0x7fffffff : 0x7fff);
    if (order == SORT_ORDER_TOTAL) {
      key = t;
    } else if (wide) { /* rotate the negative NaNs (the lowest keys) above +NaN */
      key = kb_binary(b, "sub", t, splat_i32(b, t, negative_nans(dtype)));
    } else {
      tsr_ir_value_t *neg_nan =
          kb_compare(b, "lt", t, splat_i32(b, t, -32768 + negative_nans(dtype)));
      key = kb_select(b, neg_nan, kb_binary(b, "add", t, splat_i32(b, t, 65536)), t);
    }
    break;
  }
  case TSR_DTYPE_I32:
    key = v;
    break;
  case TSR_DTYPE_U32: {
    tsr_ir_value_t *bits = kb_bitcast(b, v, TSR_DTYPE_I32);
    key = kb_binary(b, "xor", bits, splat_i32(b, bits, INT32_MIN));
    break;
  }
  default: /* i16, u16, i8, u8: their values fit */
    key = kb_convert(b, v, TSR_DTYPE_I32);
    break;
  }
  if (descending) key = kb_unary(b, "not", key);
  return key;
}

tsr_ir_value_t *sort_from_key(kb_t *b, tsr_ir_value_t *key, tsr_dtype_t dtype,
                              sort_order_t order, bool descending) {
  if (descending) key = kb_unary(b, "not", key);
  switch (dtype) {
  case TSR_DTYPE_F32: case TSR_DTYPE_BF16: case TSR_DTYPE_F16: {
    bool wide = dtype == TSR_DTYPE_F32;
    tsr_ir_value_t *t = key;
    if (order == SORT_ORDER_LAX) {
      if (wide) {
        t = kb_binary(b, "add", key, splat_i32(b, key, negative_nans(dtype)));
      } else {
        tsr_ir_value_t *high = kb_compare(b, "gt", key, splat_i32(b, key, 32767));
        t = kb_select(b, high, kb_binary(b, "sub", key, splat_i32(b, key, 65536)), key);
      }
    }
    return bits_to_float(b, flip_negatives(b, t, wide ? 0x7fffffff : 0x7fff), dtype);
  }
  case TSR_DTYPE_I32:
    return key;
  case TSR_DTYPE_U32:
    return kb_bitcast(b, kb_binary(b, "xor", key, splat_i32(b, key, INT32_MIN)),
                      TSR_DTYPE_U32);
  default:
    return kb_convert(b, key, dtype);
  }
}

tsr_ir_value_t *sort_to_payload(kb_t *b, tsr_ir_value_t *v, tsr_dtype_t dtype) {
  switch (dtype) {
  case TSR_DTYPE_F32: case TSR_DTYPE_BF16: case TSR_DTYPE_F16:
    return float_bits(b, v, dtype);
  case TSR_DTYPE_I32:
    return v;
  case TSR_DTYPE_U32:
    return kb_bitcast(b, v, TSR_DTYPE_I32);
  default:
    return kb_convert(b, v, TSR_DTYPE_I32);
  }
}

tsr_ir_value_t *sort_from_payload(kb_t *b, tsr_ir_value_t *v, tsr_dtype_t dtype) {
  switch (dtype) {
  case TSR_DTYPE_F32: case TSR_DTYPE_BF16: case TSR_DTYPE_F16:
    return bits_to_float(b, v, dtype);
  case TSR_DTYPE_I32:
    return v;
  case TSR_DTYPE_U32:
    return kb_bitcast(b, v, TSR_DTYPE_U32);
  default:
    return kb_convert(b, v, dtype);
  }
}

tsr_ir_value_t *sort_positions(kb_t *b, const sort_layout_t *l) {
  return kb_iota(b, vis_type(l, TSR_DTYPE_I32), l->vis_axis);
}

tsr_ir_value_t *sort_pad_key(kb_t *b, const sort_layout_t *l, tsr_ir_value_t *positions,
                             tsr_ir_value_t *key) {
  if (l->p == l->n) return key;
  tsr_ir_value_t *pad = kb_compare(b, "ge", positions, kb_i32(b, l->n));
  return kb_select(b, pad, splat_i32(b, key, INT32_MAX), key);
}

/* ---- the network ---- */

/* a < b lexicographically over the first nk arrays. */
tsr_ir_value_t *sort_lex_less(kb_t *b, tsr_ir_value_t *const *a, tsr_ir_value_t *const *c,
                              uint32_t nk) {
  tsr_ir_value_t *r = kb_compare(b, "lt", a[nk - 1], c[nk - 1]);
  for (uint32_t k = nk - 1; k-- > 0;) {
    tsr_ir_value_t *tie = kb_binary(b, "and", kb_compare(b, "eq", a[k], c[k]), r);
    r = kb_binary(b, "or", kb_compare(b, "lt", a[k], c[k]), tie);
  }
  return r;
}

/* The bitonic network: for k = 2, 4, .., p (level lk = log2 k), for
 * j = k/2, .., 1: position i and its partner i ^ j exchange so that the
 * lower one holds the smaller when bit k of i is clear (an ascending run)
 * and the larger when it is set. The partner's value is a roll by -j or +j
 * chosen by bit j of i: two rolls and a select per array, all with
 * dynamic shifts, so one loop body serves every stage. */
void sort_network(kb_t *b, const sort_layout_t *l, tsr_ir_value_t **arrays, uint32_t m,
                  uint32_t nk) {
  sort_network_levels(b, l, arrays, m, nk, 1);
}

void sort_network_levels(kb_t *b, const sort_layout_t *l, tsr_ir_value_t **arrays, uint32_t m,
                         uint32_t nk, int64_t first_level) {
  sort_network_range(b, l, arrays, m, nk, first_level, 0, 0, true);
}

void sort_network_range(kb_t *b, const sort_layout_t *l, tsr_ir_value_t **arrays, uint32_t m,
                        uint32_t nk, int64_t first_level, int64_t last_level, int64_t dir_bit,
                        bool tiles) {
  if (l->p <= 1 || !kb_ok(b)) return;
  if (tiles && l->vis_axis + 1 == l->vis_rank && sort_tile_fits(l->p, l->vis_rank - 1)) {
    /* rows on the lanes: as (128, p/128) tiles, no roll along the lanes */
    sort_tile_t t;
    sort_tile_init(b, &t, l->vis_rank - 1, l->vis, l->p);
    for (uint32_t a = 0; a < m; a++) arrays[a] = sort_tile_from_line(b, &t, arrays[a]);
    sort_tile_range(b, &t, arrays, m, nk, first_level, last_level, dir_bit);
    for (uint32_t a = 0; a < m; a++)
      arrays[a] = sort_tile_to_line(b, &t, arrays[a], vis_type(l, TSR_DTYPE_I32));
    return;
  }
  if (m > SORT_MAX_ARRAYS) {
    kb_fail(b, TSR_STATUS(TSR_UNIMPLEMENTED, "sort: %u arrays in the network (at most %d)", m,
                          SORT_MAX_ARRAYS));
    return;
  }
  int64_t levels = 0;
  while (((int64_t)1 << levels) < l->p) levels++;
  tsr_ir_value_t *pos = sort_positions(b, l);
  tsr_ir_value_t *one = kb_i32(b, 1), *zero = kb_i32(b, 0);
  int64_t ax = l->vis_axis;
  /* A single key: min and max instead of compares. */
  bool minmax = nk == 1;

  if (last_level <= 0 || last_level > levels) last_level = levels;
  kb_for_t outer = kb_begin_for(b, kb_i32(b, first_level), kb_i32(b, last_level + 1), arrays, m);
  tsr_ir_value_t *lk = kb_for_iv(&outer);
  tsr_ir_value_t *cur[SORT_MAX_ARRAYS];
  for (uint32_t a = 0; a < m; a++) cur[a] = kb_for_carried(&outer, a);
  tsr_ir_value_t *k = dir_bit > 0 ? kb_i32(b, dir_bit) : kb_binary(b, "shl", one, lk);
  tsr_ir_value_t *asc = kb_compare(b, "eq", kb_binary(b, "and", pos, k), zero);
  tsr_ir_value_t *desc = minmax ? NULL : kb_unary(b, "not", asc);
  tsr_ir_value_t *lk_minus_1 = kb_binary(b, "sub", lk, one);

  kb_for_t inner = kb_begin_for(b, zero, lk, cur, m);
  tsr_ir_value_t *t = kb_for_iv(&inner);
  tsr_ir_value_t *x[SORT_MAX_ARRAYS] = {0}, *partner[SORT_MAX_ARRAYS] = {0};
  tsr_ir_value_t *next[SORT_MAX_ARRAYS] = {0};
  for (uint32_t a = 0; a < m; a++) x[a] = kb_for_carried(&inner, a);
  tsr_ir_value_t *j = kb_binary(b, "shl", one, kb_binary(b, "sub", lk_minus_1, t));
  tsr_ir_value_t *up = kb_binary(b, "sub", kb_i32(b, l->p), j);
  tsr_ir_value_t *lower = kb_compare(b, "eq", kb_binary(b, "and", pos, j), zero);
  /* i1 logic, no select of i1 blocks: Mosaic cannot lay those out
   * ("Invalid input layout" on the arith.extsi it makes of them). */
  tsr_ir_value_t *want_max = kb_binary(b, "xor", lower, asc);
  for (uint32_t a = 0; a < m; a++) {
    tsr_ir_value_t *above = kb_roll(b, x[a], up, ax); /* x[i + j] */
    tsr_ir_value_t *below = kb_roll(b, x[a], j, ax);  /* x[i - j] */
    partner[a] = kb_select(b, lower, above, below);
  }
  if (minmax) { /* one key: min/max, and the others follow where it changed */
    tsr_ir_value_t *lo = kb_binary(b, "min", x[0], partner[0]);
    tsr_ir_value_t *hi = kb_binary(b, "max", x[0], partner[0]);
    next[0] = kb_select(b, want_max, hi, lo);
    tsr_ir_value_t *take = m > 1 ? kb_compare(b, "ne", next[0], x[0]) : NULL;
    for (uint32_t a = 1; a < m; a++) next[a] = kb_select(b, take, partner[a], x[a]);
  } else {
    tsr_ir_value_t *partner_less = sort_lex_less(b, partner, x, nk);
    tsr_ir_value_t *self_less = sort_lex_less(b, x, partner, nk);
    tsr_ir_value_t *want_min = kb_binary(b, "xor", lower, desc);
    tsr_ir_value_t *take = kb_binary(b, "or", kb_binary(b, "and", want_min, partner_less),
                                     kb_binary(b, "and", want_max, self_less));
    for (uint32_t a = 0; a < m; a++) next[a] = kb_select(b, take, partner[a], x[a]);
  }
  kb_end_for(b, &inner, next, m);
  tsr_ir_value_t *after[SORT_MAX_ARRAYS];
  for (uint32_t a = 0; a < m; a++) after[a] = kb_for_result(&inner, a);
  kb_end_for(b, &outer, after, m);
  for (uint32_t a = 0; a < m; a++) arrays[a] = kb_for_result(&outer, a);
}

/* ---- tsr_kernels_sort ---- */

static tsr_status_t check_params(const tsr_kernels_sort_params_t *p) {
  if (p->num_operands < 1 || p->num_operands > TSR_KERNELS_MAX_OPERANDS)
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "sort: num_operands must be 1..%d, got %u",
                      TSR_KERNELS_MAX_OPERANDS, p->num_operands);
  if (p->num_keys < 1 || p->num_keys > p->num_operands)
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "sort: num_keys must be 1..num_operands (%u), got %u",
                      p->num_operands, p->num_keys);
  if (p->target != TSR_KERNELS_FOR_TPU && p->target != TSR_KERNELS_FOR_HOST)
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "sort: target must be TSR_KERNELS_FOR_TPU or "
                      "TSR_KERNELS_FOR_HOST, got %d", (int)p->target);
  for (uint32_t i = 0; i < p->num_operands; i++) {
    if ((unsigned)p->dtypes[i] >= TSR_DTYPE_COUNT)
      return TSR_STATUS(TSR_INVALID_ARGUMENT, "sort: dtypes[%u] is not a dtype (%d)", i,
                        (int)p->dtypes[i]);
    if (!sort_dtype_supported(p->dtypes[i]))
      return TSR_STATUS(TSR_UNIMPLEMENTED, "sort: dtypes[%u] is %s; the library sorts f32, bf16, "
                        "f16, i32, u32, i16, u16, i8 and u8", i, tsr_dtype_name(p->dtypes[i]));
  }
  return NULL;
}

tsr_status_t tsr_kernels_sort(const tsr_kernels_sort_params_t *params,
                              tsr_ir_module_t **out_module) {
  if (!params || !out_module)
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "sort: params and out_module must not be NULL");
  tsr_status_t s = check_params(params);
  if (s) return s;
  if (params->target == TSR_KERNELS_FOR_HOST) return sort_host_generate(params, out_module);
  int64_t merge_block = 0;
  if (sort_merge_wanted(params, &merge_block))
    return sort_merge_generate(params, merge_block, out_module);
  const uint32_t n_ops = params->num_operands, nk_user = params->num_keys;
  /* Arrays of the network: keys first (the user's, then maybe the index),
   * then payloads. A float key is canonical (-0.0 == +0.0, one NaN) when
   * equality decides something: a later key or stability; its operand's
   * values then travel as a payload too. */
  bool canonical[TSR_KERNELS_MAX_OPERANDS] = {0};
  uint32_t m = 0, nk = 0, payloads = 0;
  for (uint32_t i = 0; i < nk_user; i++) {
    tsr_dtype_t dt = params->dtypes[i];
    bool is_float = dt == TSR_DTYPE_F32 || dt == TSR_DTYPE_BF16 || dt == TSR_DTYPE_F16;
    canonical[i] = is_float && (params->stable || i + 1 < nk_user);
    if (canonical[i]) payloads++;
  }
  payloads += n_ops - nk_user;
  int64_t dims_bytes = 0;
  for (uint32_t i = 0; i < n_ops; i++) dims_bytes += (int64_t)tsr_dtype_size(params->dtypes[i]);
  /* The layout first (it knows whether the axis is padded). */
  sort_layout_t l;
  uint32_t m_max = nk_user + payloads + 1;
  int64_t per_position = 2 * (2 * dims_bytes + (params->return_indices ? 4 : 0)) + 4 * 3 * m_max;
  s = sort_layout_plan(params->rank, params->dims, params->axis, per_position,
                       params->vmem_budget_bytes, "sort", &l);
  if (s && tsr_status_code(s) == TSR_UNIMPLEMENTED &&
      sort_merge_wanted_forced(params, &merge_block)) { /* over the budget: merge */
    tsr_status_free(s);
    return sort_merge_generate(params, merge_block, out_module);
  }
  if (s) return s;
  bool padded = l.p != l.n;
  bool index_key = params->stable || (padded && (payloads > 0 || params->return_indices));
  bool index_array = index_key || params->return_indices;

  kb_t b;
  kb_begin(&b, "sort");
  tsr_ir_dim_semantics_t sem[TSR_MAX_RANK];
  for (uint32_t d = 0; d < l.grid_rank; d++) sem[d] = TSR_DIM_PARALLEL;
  kb_grid(&b, l.grid_rank, l.grid, sem);
  tsr_ir_value_t *in[TSR_KERNELS_MAX_OPERANDS], *out[TSR_KERNELS_MAX_OPERANDS], *idx_out = NULL;
  char name[16];
  for (uint32_t i = 0; i < n_ops; i++) {
    snprintf(name, sizeof name, "x%u", i);
    in[i] = sort_operand(&b, &l, TSR_ROLE_IN, name, params->dtypes[i], 0);
  }
  for (uint32_t i = 0; i < n_ops; i++) {
    snprintf(name, sizeof name, "y%u", i);
    out[i] = sort_operand(&b, &l, TSR_ROLE_OUT, name, params->dtypes[i], 0);
  }
  if (params->return_indices)
    idx_out = sort_operand(&b, &l, TSR_ROLE_OUT, "indices", TSR_DTYPE_I32, 0);

  tsr_ir_value_t *arrays[SORT_MAX_ARRAYS + 2];
  int32_t value_from[TSR_KERNELS_MAX_OPERANDS]; /* operand -> array holding its value */
  bool from_key[TSR_KERNELS_MAX_OPERANDS];
  tsr_ir_value_t *loaded[TSR_KERNELS_MAX_OPERANDS];
  tsr_ir_value_t *pos = sort_positions(&b, &l);
  for (uint32_t i = 0; i < n_ops; i++) loaded[i] = sort_load(&b, &l, in[i]);
  for (uint32_t i = 0; i < nk_user; i++) {
    tsr_ir_value_t *key = sort_key(&b, loaded[i], params->dtypes[i], SORT_ORDER_LAX,
                                   canonical[i], params->descending);
    arrays[m++] = sort_pad_key(&b, &l, pos, key);
    value_from[i] = canonical[i] ? -1 : (int32_t)(m - 1);
    from_key[i] = !canonical[i];
  }
  int32_t index_at = -1;
  if (index_key) {
    index_at = (int32_t)m;
    arrays[m++] = pos;
  }
  nk = m;
  for (uint32_t i = 0; i < n_ops; i++) {
    if (i < nk_user && !canonical[i]) continue;
    value_from[i] = (int32_t)m;
    from_key[i] = false;
    arrays[m++] = sort_to_payload(&b, loaded[i], params->dtypes[i]);
  }
  if (index_array && index_at < 0) {
    index_at = (int32_t)m;
    arrays[m++] = pos;
  }
  if (m > SORT_MAX_ARRAYS) {
    tsr_ir_module_t *dead = NULL;
    tsr_status_free(kb_finish(&b, &dead));
    tsr_ir_module_destroy(dead);
    return TSR_STATUS(TSR_UNIMPLEMENTED,
                      "sort: %u operands with these options need %u arrays in the network, "
                      "more than the %d it carries", n_ops, m, SORT_MAX_ARRAYS);
  }
  sort_network(&b, &l, arrays, m, nk);
  for (uint32_t i = 0; i < n_ops; i++) {
    tsr_ir_value_t *a = arrays[value_from[i]];
    tsr_ir_value_t *v = from_key[i] ? sort_from_key(&b, a, params->dtypes[i], SORT_ORDER_LAX,
                                                    params->descending)
                                    : sort_from_payload(&b, a, params->dtypes[i]);
    sort_store(&b, &l, out[i], v);
  }
  if (idx_out) sort_store(&b, &l, idx_out, arrays[index_at]);
  return kb_finish(&b, out_module);
}
