/* Type constructors, equality and printing; the names of the grid's
 * dimension semantics. */
#include <math.h>

#include "ir/ir.h"

static tsr_type_t make(uint8_t kind, uint8_t dtype, uint8_t space, uint32_t rank,
                       const int64_t *dims) {
  tsr_type_t t;
  memset(&t, 0, sizeof t);
  t.kind = kind;
  t.dtype = dtype;
  t.space = space;
  t.rank = (uint8_t)(rank > TSR_MAX_RANK ? TSR_MAX_RANK : rank);
  for (uint32_t i = 0; i < t.rank; i++) t.dims[i] = dims[i];
  return t;
}

tsr_type_t tsr_type_scalar(tsr_dtype_t dtype) {
  return make(TSR_TYPE_SCALAR, (uint8_t)dtype, 0, 0, NULL);
}
tsr_type_t tsr_type_vector(tsr_dtype_t dtype, uint32_t rank, const int64_t *dims) {
  return make(TSR_TYPE_VECTOR, (uint8_t)dtype, 0, rank, dims);
}
tsr_type_t tsr_type_ref(tsr_space_t space, tsr_dtype_t dtype, uint32_t rank,
                        const int64_t *dims) {
  return make(TSR_TYPE_REF, (uint8_t)dtype, (uint8_t)space, rank, dims);
}
tsr_type_t tsr_type_sem(tsr_sem_kind_t kind, uint32_t rank, const int64_t *dims) {
  return make(TSR_TYPE_SEM, (uint8_t)kind, 0, rank, dims);
}

bool tsr_type_equal(const tsr_type_t *a, const tsr_type_t *b) {
  if (a->kind != b->kind || a->dtype != b->dtype || a->rank != b->rank)
    return false;
  if (a->kind == TSR_TYPE_REF && a->space != b->space) return false;
  for (uint32_t i = 0; i < a->rank; i++)
    if (a->dims[i] != b->dims[i]) return false;
  return true;
}

int64_t tsr_type_element_count(const tsr_type_t *t) { return tsr_dims_count(t->rank, t->dims); }

static const char *const space_names[TSR_SPACE_COUNT] = {"any", "hbm", "vmem",
                                                         "smem"};

const char *tsr_space_name(tsr_space_t space) {
  return (unsigned)space < TSR_SPACE_COUNT ? space_names[space] : "?";
}

bool tsr_space_from_name(const char *name, size_t len, tsr_space_t *out) {
  for (int i = 0; i < TSR_SPACE_COUNT; i++) {
    if (strlen(space_names[i]) == len && memcmp(space_names[i], name, len) == 0) {
      *out = (tsr_space_t)i;
      return true;
    }
  }
  return false;
}

static void print_dims(tsr_strbuf_t *sb, const tsr_type_t *t) {
  tsr_strbuf_puts(sb, "[");
  for (uint32_t i = 0; i < t->rank; i++)
    tsr_strbuf_printf(sb, "%s%lld", i ? ", " : "", (long long)t->dims[i]);
  tsr_strbuf_puts(sb, "]");
}

void tsr_type_print(tsr_strbuf_t *sb, const tsr_type_t *t) {
  switch ((tsr_type_kind_t)t->kind) {
    case TSR_TYPE_SCALAR:
      tsr_strbuf_puts(sb, tsr_dtype_name((tsr_dtype_t)t->dtype));
      break;
    case TSR_TYPE_VECTOR:
      tsr_strbuf_puts(sb, tsr_dtype_name((tsr_dtype_t)t->dtype));
      print_dims(sb, t);
      break;
    case TSR_TYPE_REF:
      tsr_strbuf_printf(sb, "%s %s", tsr_space_name((tsr_space_t)t->space),
                        tsr_dtype_name((tsr_dtype_t)t->dtype));
      if (t->rank) print_dims(sb, t);
      break;
    case TSR_TYPE_SEM:
      tsr_strbuf_puts(sb, t->dtype == TSR_SEM_DMA ? "dma_sem" : "sem");
      if (t->rank) print_dims(sb, t);
      break;
  }
}

double tsr_literal_round(double v, tsr_dtype_t dtype) {
  if (isnan(v) || isinf(v)) return v;
  /* 2^128 - 2^103: the smallest magnitude that rounds to infinity in f32;
   * checked before the cast, which would be undefined. */
  if (fabs(v) >= 0x1.ffffffp127) return v > 0 ? INFINITY : -INFINITY;
  float f = (float)v;
  switch (dtype) {
    case TSR_DTYPE_BF16: return (double)tsr_bf16_to_f32(tsr_f32_to_bf16(f));
    case TSR_DTYPE_F16: return (double)tsr_f16_to_f32(tsr_f32_to_f16(f));
    case TSR_DTYPE_F8E4M3FN: return (double)tsr_f8e4m3fn_to_f32(tsr_f32_to_f8e4m3fn(f));
    case TSR_DTYPE_F8E5M2: return (double)tsr_f8e5m2_to_f32(tsr_f32_to_f8e5m2(f));
    default: return (double)f;
  }
}

static const char *const dim_semantics_names[] = {
    [TSR_DIM_ARBITRARY] = "arbitrary",
    [TSR_DIM_PARALLEL] = "parallel",
    [TSR_DIM_CORE_PARALLEL] = "core_parallel",
};

const char *tsr_ir_dim_semantics_name(tsr_ir_dim_semantics_t semantics) {
  return (size_t)semantics < TSR_ARRAY_SIZE(dim_semantics_names)
             ? dim_semantics_names[semantics] : NULL;
}

bool tsr_ir_dim_semantics_from_name(const char *name, size_t len,
                                    tsr_ir_dim_semantics_t *out_semantics) {
  for (size_t i = 0; i < TSR_ARRAY_SIZE(dim_semantics_names); i++)
    if (strlen(dim_semantics_names[i]) == len && memcmp(dim_semantics_names[i], name, len) == 0) {
      *out_semantics = (tsr_ir_dim_semantics_t)i;
      return true;
    }
  return false;
}

const char *tsr_ir_revisit_name(tsr_ir_revisit_t mode) {
  switch (mode) {
    case TSR_REVISIT_IMMEDIATE: return "immediate";
    case TSR_REVISIT_ANY: return "any";
  }
  return NULL;
}
