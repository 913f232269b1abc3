/* Canonical bytes of a kernel (docs/cache.md, "Keys"): a binary serialization
 * of everything that decides what the kernel computes, and nothing else.
 *
 * Left out: the kernel's name, SSA value names, source locations, comments,
 * whitespace and the file name. Values are numbered in definition order
 * (declarations, then a pre-order walk of regions), so a consistent renaming
 * gives the same bytes. Everything else goes in: the grid and its semantics,
 * every declaration (role, types, space, block shape, index map, alias) and,
 * for every op, its opcode, instance flags, operands (by number), result
 * types, view indices, integer attributes, literal bits, text and regions.
 *
 * Fields are fixed-width little-endian. Counts precede every list and regions
 * are bracketed, so no two different kernels share an encoding. Opcodes are
 * op-table positions; the runtime puts a fingerprint of the op table in the
 * key so the numbering cannot drift under a cached entry. */
#include <stdlib.h>

#include "ir/ir.h"

enum { CANON_FORMAT_VERSION = 2 }; /* 2: indices by kind, no HAS_ELSE */
#define NO_VALUE UINT32_MAX

/* The bytes are written by hand into a doubling buffer: going through
 * tsr_strbuf_append per field made serialization 0.3 GB/s (bench_cache). */
typedef struct canon {
  uint8_t *data;
  size_t size, capacity;
  bool failed;
  uint32_t *number; /* value id -> canonical number, NO_VALUE until defined */
  uint32_t num_values;
  uint32_t next;
} canon_t;

static bool grow(canon_t *c, size_t n) {
  if (c->failed) return false;
  size_t want = c->capacity ? c->capacity : 1024;
  while (want - c->size < n) {
    if (want > SIZE_MAX / 2) {
      c->failed = true;
      return false;
    }
    want *= 2;
  }
  uint8_t *d = tsr_realloc(c->data, want);
  if (!d) {
    c->failed = true;
    return false;
  }
  c->data = d;
  c->capacity = want;
  return true;
}

static inline void put_bytes(canon_t *c, const void *p, size_t n) {
  if (TSR_UNLIKELY(c->capacity - c->size < n) && !grow(c, n)) return;
  memcpy(c->data + c->size, p, n);
  c->size += n;
}

static inline void put_u8(canon_t *c, uint8_t v) { put_bytes(c, &v, 1); }

static inline void put_u32(canon_t *c, uint32_t v) {
  uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16),
                  (uint8_t)(v >> 24)};
  put_bytes(c, b, 4);
}

static inline void put_u64(canon_t *c, uint64_t v) {
  uint8_t b[8];
  for (int i = 0; i < 8; i++) b[i] = (uint8_t)(v >> (8 * i));
  put_bytes(c, b, 8);
}

static inline void put_i64(canon_t *c, int64_t v) { put_u64(c, (uint64_t)v); }

static void put_type(canon_t *c, const tsr_type_t *t) {
  put_u8(c, t->kind);
  put_u8(c, t->dtype);
  put_u8(c, t->space);
  put_u8(c, t->rank);
  for (uint32_t i = 0; i < t->rank && i < TSR_MAX_RANK; i++) put_i64(c, t->dims[i]);
}

/* A value's definition: its type, and the next canonical number. */
static void define(canon_t *c, const tsr_value_t *v) {
  if (!v) {
    put_u8(c, 0);
    return;
  }
  put_u8(c, 1);
  put_type(c, &v->type);
  if (v->id < c->num_values) c->number[v->id] = c->next;
  c->next++;
}

/* A use: the canonical number (NO_VALUE for a missing or foreign value). */
static void use(canon_t *c, const tsr_value_t *v) {
  put_u32(c, v && v->id < c->num_values ? c->number[v->id] : NO_VALUE);
}

static void put_text(canon_t *c, const char *s) {
  if (!s) {
    put_u32(c, UINT32_MAX);
    return;
  }
  size_t n = strlen(s);
  put_u32(c, (uint32_t)n);
  put_bytes(c, s, n);
}

/* A view index: the fields its kind gives a meaning to (ir/parse.c lists
 * them), so that a kernel from the builder, which may leave the others
 * zero, has the bytes of the same kernel parsed. `:` is the whole dimension
 * whatever stop and size hold, a point has size 1, and a dynamic start
 * (operand >= 0) replaces the static one. Slices keep every field: the
 * verifier checks their size against start, stop and stride. */
static void put_index(canon_t *c, const tsr_index_t *x) {
  put_u8(c, x->kind);
  switch ((tsr_index_kind_t)x->kind) {
    case TSR_INDEX_FULL: return;
    case TSR_INDEX_POINT:
    case TSR_INDEX_DS:
      put_u32(c, (uint32_t)x->operand);
      if (x->operand < 0) put_i64(c, x->start);
      if (x->kind == TSR_INDEX_DS) {
        put_i64(c, x->size);
        put_i64(c, x->stride);
      }
      return;
    case TSR_INDEX_SLICE: break;
  }
  put_u32(c, (uint32_t)x->operand);
  put_i64(c, x->start);
  put_i64(c, x->stop);
  put_i64(c, x->size);
  put_i64(c, x->stride);
}

static void put_region(canon_t *c, const tsr_region_t *r);

static void put_op(canon_t *c, const tsr_op_t *op) {
  put_u32(c, (uint32_t)op->opcode);
  /* TSR_OPF_HAS_ELSE only says that `else` was written: the else region is
   * encoded, and an empty one means what none means (the printer drops it). */
  put_u32(c, op->flags & ~(uint32_t)TSR_OPF_HAS_ELSE);
  put_u32(c, op->num_operands);
  for (uint32_t i = 0; i < op->num_operands; i++) use(c, op->operands[i]);
  put_u32(c, op->num_indices);
  for (uint32_t i = 0; i < op->num_indices; i++) put_index(c, &op->indices[i]);
  put_u32(c, op->num_ints);
  for (uint32_t i = 0; i < op->num_ints; i++) put_i64(c, op->ints[i]);
  uint64_t literal_bits;
  memcpy(&literal_bits, &op->literal, sizeof literal_bits);
  put_u64(c, literal_bits);
  put_text(c, op->text);
  /* Regions before results: region values are defined (numbered) first,
   * matching the order in which the op's results become visible. */
  put_u32(c, op->num_regions);
  for (uint32_t i = 0; i < op->num_regions; i++) put_region(c, &op->regions[i]);
  put_u32(c, op->num_results);
  for (uint32_t i = 0; i < op->num_results; i++) define(c, op->results[i]);
}

static void put_region(canon_t *c, const tsr_region_t *r) {
  put_u8(c, '{');
  if (!r) {
    put_u8(c, '}');
    return;
  }
  put_u32(c, r->num_args);
  for (uint32_t i = 0; i < r->num_args; i++) define(c, r->args ? r->args[i] : NULL);
  for (const tsr_op_t *op = r->first; op; op = op->next) {
    put_u8(c, 'o');
    put_op(c, op);
  }
  put_u8(c, '}');
}

static void put_kernel(canon_t *c, const tsr_kernel_t *k) {
  put_bytes(c, "tsrcanon", 8);
  put_u32(c, CANON_FORMAT_VERSION);
  put_u32(c, k->grid_rank);
  for (uint32_t i = 0; i < k->grid_rank && i < TSR_MAX_RANK; i++) {
    put_i64(c, k->grid[i]);
    put_u8(c, k->semantics[i]);
  }
  /* Every declaration's ref first: index maps and bodies may use any. */
  put_u32(c, k->num_decls);
  for (uint32_t i = 0; i < k->num_decls; i++) {
    const tsr_decl_t *d = &k->decls[i];
    put_u8(c, (uint8_t)d->role);
    define(c, d->ref);
    put_type(c, &d->array);
    put_u8(c, d->has_block);
    for (uint32_t j = 0; j < d->array.rank && j < TSR_MAX_RANK; j++)
      put_i64(c, d->block[j]);
    put_u32(c, (uint32_t)d->alias);
  }
  for (uint32_t i = 0; i < k->num_decls; i++) {
    put_u8(c, k->decls[i].index_map ? 1 : 0);
    if (k->decls[i].index_map) put_region(c, k->decls[i].index_map);
  }
  put_region(c, &k->body);
}

tsr_status_t tsr_ir_canon_kernel(const tsr_kernel_t *kernel, uint8_t **out_bytes,
                                 size_t *out_size) {
  canon_t c = {.num_values = kernel->num_values};
  if (c.num_values) {
    c.number = tsr_malloc(sizeof *c.number * c.num_values);
    if (!c.number) return TSR_OOM();
    memset(c.number, 0xff, sizeof *c.number * c.num_values);
  }
  put_kernel(&c, kernel);
  tsr_free(c.number);
  if (c.failed) {
    tsr_free(c.data);
    return TSR_OOM();
  }
  *out_bytes = c.data;
  *out_size = c.size;
  return NULL;
}

uint32_t tsr_ir_canon_format_version(void) { return CANON_FORMAT_VERSION; }

tsr_status_t tsr_ir_kernel_canonical_bytes(const tsr_ir_kernel_t *kernel,
                                           void **out_bytes, size_t *out_size) {
  if (!kernel || !out_bytes || !out_size)
    return TSR_STATUS(TSR_INVALID_ARGUMENT,
                      "tsr_ir_kernel_canonical_bytes: NULL argument");
  uint8_t *bytes = NULL;
  size_t size = 0;
  TSR_RETURN_IF_ERROR(tsr_ir_canon_kernel(kernel, &bytes, &size));
  *out_bytes = bytes;
  *out_size = size;
  return NULL;
}
