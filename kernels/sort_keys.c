/* The order the sorting network computes in (sort_internal.h): the i32 key
 * of each dtype, and back; payloads carried through the network as i32
 * bits; the key of padding positions; the lexicographic order over several
 * keys. The bottom of the sort's files: it calls the builder only
 * (docs/kernels.md, "Sort and top-k"). */
#include "kernels/sort_internal.h"

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

tsr_ir_value_t *sort_pad_key(kb_t *b, const sort_layout_t *l, tsr_ir_value_t *positions,
                             tsr_ir_value_t *key) {
  if (l->p == l->n) return key;
  tsr_ir_value_t *pad = kb_compare(b, "ge", positions, kb_i32(b, l->n));
  return kb_select(b, pad, splat_i32(b, key, INT32_MAX), key);
}

/* ---- the order ---- */

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
