/* The bitonic network on a line of p positions laid out as a column-major
 * (128, p/128) tile (sort_internal.h, sort_tile_t): every exchange is a
 * roll along the tile's rows, or along the rows of the transposed tile,
 * never along the lanes (docs/kernels.md, "Sort and top-k"). */
#include <string.h>

#include "kernels/sort_internal.h"

enum { TILE_ROWS = 128 };

tsr_ir_value_t *sort_tile_transpose(kb_t *b, tsr_ir_value_t *v) {
  if (!v) return NULL;
  uint32_t r = v->type.rank;
  int64_t dims[TSR_MAX_RANK], perm[TSR_MAX_RANK];
  for (uint32_t d = 0; d < r; d++) {
    perm[d] = d;
    dims[d] = v->type.dims[d];
  }
  perm[r - 2] = r - 1;
  perm[r - 1] = r - 2;
  dims[r - 2] = v->type.dims[r - 1];
  dims[r - 1] = v->type.dims[r - 2];
  tsr_ir_type_t t = kb_vec((tsr_dtype_t)v->type.dtype, r, dims);
  tsr_ir_op_params_t p = {.mnemonic = "transpose", .operands = &v, .num_operands = 1,
                          .result_types = &t, .num_results = 1, .ints = perm, .num_ints = r};
  return kb_op(b, &p, NULL);
}

/* From 16 lanes (p >= 2048) on: below, the tile's few lanes cost a TPU
 * more than the lane rolls they save a CPU (libtpu pads each tile row to
 * 128 lanes: a (64, 128, 2) tile ran v5e out of scoped VMEM where the
 * (64, 256) block compiles), and a CPU's vectors are 8-16 lanes. */
bool sort_tile_fits(int64_t p, uint32_t lead_rank) {
  return p >= 16 * TILE_ROWS && lead_rank + 2 <= TSR_MAX_RANK;
}

void sort_tile_init(kb_t *b, sort_tile_t *t, uint32_t lead_rank, const int64_t *lead,
                    int64_t p) {
  memset(t, 0, sizeof *t);
  t->p = p;
  t->rows = p < TILE_ROWS ? p : TILE_ROWS;
  t->lanes = p / t->rows;
  t->log_r = log2_of(t->rows);
  t->rank = lead_rank + 2;
  for (uint32_t d = 0; d < lead_rank; d++) t->dims[d] = lead[d];
  t->dims[lead_rank] = t->rows;
  t->dims[lead_rank + 1] = t->lanes;
  int64_t tdims[TSR_MAX_RANK];
  memcpy(tdims, t->dims, sizeof tdims);
  tdims[lead_rank] = t->lanes;
  tdims[lead_rank + 1] = t->rows;
  tsr_ir_type_t rl = kb_vec(TSR_DTYPE_I32, t->rank, t->dims);
  tsr_ir_type_t lr = kb_vec(TSR_DTYPE_I32, t->rank, tdims);
  uint32_t ax = lead_rank;
  t->row_iota = kb_iota(b, rl, ax);
  t->pos = kb_binary(b, "add", t->row_iota,
                     kb_binary(b, "mul", kb_iota(b, rl, ax + 1), kb_const_i(b, rl, t->rows)));
  t->pos_t = kb_binary(b, "add", kb_iota(b, lr, ax + 1),
                       kb_binary(b, "mul", kb_iota(b, lr, ax), kb_const_i(b, lr, t->rows)));
}

tsr_ir_value_t *sort_tile_from_line(kb_t *b, const sort_tile_t *t, tsr_ir_value_t *v) {
  if (!v) return NULL;
  int64_t dims[TSR_MAX_RANK];
  memcpy(dims, t->dims, sizeof dims);
  dims[t->rank - 2] = t->lanes;
  dims[t->rank - 1] = t->rows;
  return sort_tile_transpose(b, kb_reshape(b, v, kb_vec((tsr_dtype_t)v->type.dtype, t->rank,
                                                        dims)));
}

tsr_ir_value_t *sort_tile_to_line(kb_t *b, const sort_tile_t *t, tsr_ir_value_t *v,
                                  tsr_ir_type_t line) {
  if (!v) return NULL;
  return kb_reshape(b, sort_tile_transpose(b, v), kb_retype(line, (tsr_dtype_t)v->type.dtype));
}

/* One compare-exchange stage at distance j (in positions), a roll by
 * `shift` along the rows axis `ax` of x (whose positions are `pos`). */
static void stage(kb_t *b, tsr_ir_value_t **x, uint32_t m, uint32_t nk, uint32_t ax,
                  tsr_ir_value_t *pos, tsr_ir_value_t *asc, tsr_ir_value_t *j,
                  tsr_ir_value_t *shift, int64_t len) {
  tsr_ir_value_t *zero = kb_i32(b, 0);
  tsr_ir_value_t *up = kb_binary(b, "sub", kb_i32(b, len), shift);
  tsr_ir_value_t *lower = kb_compare(b, "eq", kb_binary(b, "and", pos, j), zero);
  tsr_ir_value_t *want_max = kb_binary(b, "xor", lower, asc);
  tsr_ir_value_t *partner[SORT_MAX_ARRAYS + 2] = {0};
  for (uint32_t a = 0; a < m; a++)
    partner[a] = kb_select(b, lower, kb_roll(b, x[a], up, ax), kb_roll(b, x[a], shift, ax));
  if (nk == 1) { /* one key: min/max, and the others follow where it changed */
    tsr_ir_value_t *key = kb_select(b, want_max, kb_binary(b, "max", x[0], partner[0]),
                                    kb_binary(b, "min", x[0], partner[0]));
    if (m > 1) {
      tsr_ir_value_t *take = kb_compare(b, "ne", key, x[0]);
      for (uint32_t a = 1; a < m; a++) x[a] = kb_select(b, take, partner[a], x[a]);
    }
    x[0] = key;
    return;
  }
  tsr_ir_value_t *want_min = kb_unary(b, "not", want_max);
  tsr_ir_value_t *take =
      kb_binary(b, "or", kb_binary(b, "and", want_min, sort_lex_less(b, partner, x, nk)),
                kb_binary(b, "and", want_max, sort_lex_less(b, x, partner, nk)));
  for (uint32_t a = 0; a < m; a++) x[a] = kb_select(b, take, partner[a], x[a]);
}

void sort_tile_levels(kb_t *b, const sort_tile_t *t, tsr_ir_value_t **arrays, uint32_t m,
                      uint32_t nk, int64_t first_level) {
  sort_tile_range(b, t, arrays, m, nk, first_level, 0, 0);
}

void sort_tile_range(kb_t *b, const sort_tile_t *t, tsr_ir_value_t **arrays, uint32_t m,
                     uint32_t nk, int64_t first_level, int64_t last_level, int64_t dir_bit) {
  if (!kb_ok(b) || t->p <= 1) return;
  if (m > SORT_MAX_ARRAYS + 2) {
    kb_fail(b, TSR_STATUS(TSR_UNIMPLEMENTED, "sort: %u arrays in the network", m));
    return;
  }
  uint32_t ax = t->rank - 2;
  int log_p = log2_of(t->p);
  tsr_ir_value_t *one = kb_i32(b, 1), *zero = kb_i32(b, 0), *log_r = kb_i32(b, t->log_r);
  if (last_level <= 0 || last_level > log_p) last_level = log_p;
  kb_for_t level = kb_begin_for(b, kb_i32(b, first_level), kb_i32(b, last_level + 1), arrays, m);
  tsr_ir_value_t *lk = kb_for_iv(&level);
  tsr_ir_value_t *x[SORT_MAX_ARRAYS + 2] = {0};
  for (uint32_t a = 0; a < m; a++) x[a] = kb_for_carried(&level, a);
  tsr_ir_value_t *k = dir_bit > 0 ? kb_i32(b, dir_bit) : kb_binary(b, "shl", one, lk);
  tsr_ir_value_t *asc = kb_compare(b, "eq", kb_binary(b, "and", t->pos, k), zero);
  tsr_ir_value_t *asc_t = kb_compare(b, "eq", kb_binary(b, "and", t->pos_t, k), zero);
  tsr_ir_value_t *big = kb_binary(b, "max", kb_binary(b, "sub", lk, log_r), zero);
  tsr_ir_value_t *lk1 = kb_binary(b, "sub", lk, one);
  /* distances j >= R: rows of the transposed arrays, by j / R */
  if (t->lanes > 1) {
    for (uint32_t a = 0; a < m; a++) x[a] = sort_tile_transpose(b, x[a]);
    kb_for_t loop = kb_begin_for(b, zero, big, x, m);
    tsr_ir_value_t *it = kb_for_iv(&loop), *y[SORT_MAX_ARRAYS + 2] = {0};
    for (uint32_t a = 0; a < m; a++) y[a] = kb_for_carried(&loop, a);
    tsr_ir_value_t *jlog = kb_binary(b, "sub", lk1, it);
    stage(b, y, m, nk, ax, t->pos_t, asc_t, kb_binary(b, "shl", one, jlog),
          kb_binary(b, "shl", one, kb_binary(b, "sub", jlog, log_r)), t->lanes);
    kb_end_for(b, &loop, y, m);
    for (uint32_t a = 0; a < m; a++) x[a] = sort_tile_transpose(b, kb_for_result(&loop, a));
  }
  /* distances j < R: rows, by j */
  if (t->rows > 1) {
    kb_for_t loop = kb_begin_for(b, big, lk, x, m);
    tsr_ir_value_t *it = kb_for_iv(&loop), *y[SORT_MAX_ARRAYS + 2] = {0};
    for (uint32_t a = 0; a < m; a++) y[a] = kb_for_carried(&loop, a);
    tsr_ir_value_t *j = kb_binary(b, "shl", one, kb_binary(b, "sub", lk1, it));
    stage(b, y, m, nk, ax, t->pos, asc, j, j, t->rows);
    kb_end_for(b, &loop, y, m);
    for (uint32_t a = 0; a < m; a++) x[a] = kb_for_result(&loop, a);
  }
  kb_end_for(b, &level, x, m);
  for (uint32_t a = 0; a < m; a++) arrays[a] = kb_for_result(&level, a);
}
