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
 * tsr_strbuf_append per field made serialization 0.3 GB/s, and updating the
 * buffer's size field after every field 1.2 GB/s (a store-to-load chain).
 * Each op, type and index therefore reserves its worst case once and writes
 * through a local cursor (wr_*), committing the size at the end. */
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

/* Room for n more bytes: the cursor, or NULL after an allocation failure. */
static inline uint8_t *reserve(canon_t *c, size_t n) {
  if (TSR_UNLIKELY(c->capacity - c->size < n) && !grow(c, n)) return NULL;
  return c->data + c->size;
}

static inline void commit(canon_t *c, const uint8_t *w) {
  c->size = (size_t)(w - c->data);
}

static inline uint8_t *wr_u8(uint8_t *w, uint8_t v) {
  *w = v;
  return w + 1;
}

static inline uint8_t *wr_u32(uint8_t *w, uint32_t v) {
  for (int i = 0; i < 4; i++) w[i] = (uint8_t)(v >> (8 * i));
  return w + 4;
}

static inline uint8_t *wr_u64(uint8_t *w, uint64_t v) {
  for (int i = 0; i < 8; i++) w[i] = (uint8_t)(v >> (8 * i));
  return w + 8;
}

static inline uint8_t *wr_i64(uint8_t *w, int64_t v) { return wr_u64(w, (uint64_t)v); }

static void put_bytes(canon_t *c, const void *p, size_t n) {
  uint8_t *w = reserve(c, n);
  if (!w) return;
  memcpy(w, p, n);
  commit(c, w + n);
}

static void put_u8(canon_t *c, uint8_t v) {
  uint8_t *w = reserve(c, 1);
  if (w) commit(c, wr_u8(w, v));
}

static void put_u32(canon_t *c, uint32_t v) {
  uint8_t *w = reserve(c, 4);
  if (w) commit(c, wr_u32(w, v));
}

static void put_i64(canon_t *c, int64_t v) {
  uint8_t *w = reserve(c, 8);
  if (w) commit(c, wr_i64(w, v));
}

enum { TYPE_MAX = 4 + 8 * TSR_MAX_RANK, DEFINE_MAX = 1 + TYPE_MAX, INDEX_MAX = 1 + 4 + 4 * 8 };

static inline uint8_t *wr_type(uint8_t *w, const tsr_type_t *t) {
  w = wr_u8(w, t->kind);
  w = wr_u8(w, t->dtype);
  w = wr_u8(w, t->space);
  w = wr_u8(w, t->rank);
  for (uint32_t i = 0; i < t->rank && i < TSR_MAX_RANK; i++) w = wr_i64(w, t->dims[i]);
  return w;
}

static void put_type(canon_t *c, const tsr_type_t *t) {
  uint8_t *w = reserve(c, TYPE_MAX);
  if (w) commit(c, wr_type(w, t));
}

/* A value's definition: its type, and the next canonical number. */
static inline uint8_t *wr_define(canon_t *c, uint8_t *w, const tsr_value_t *v) {
  if (!v) return wr_u8(w, 0);
  w = wr_u8(w, 1);
  w = wr_type(w, &v->type);
  if (v->id < c->num_values) c->number[v->id] = c->next;
  c->next++;
  return w;
}

static void define(canon_t *c, const tsr_value_t *v) {
  uint8_t *w = reserve(c, DEFINE_MAX);
  if (w) commit(c, wr_define(c, w, v));
}

/* A use: the canonical number (NO_VALUE for a missing or foreign value). */
static inline uint8_t *wr_use(const canon_t *c, uint8_t *w, const tsr_value_t *v) {
  return wr_u32(w, v && v->id < c->num_values ? c->number[v->id] : NO_VALUE);
}

/* A view index: the fields its kind gives a meaning to (ir/parse.c lists
 * them), so that a kernel from the builder, which may leave the others
 * zero, has the bytes of the same kernel parsed. `:` is the whole dimension
 * whatever stop and size hold, a point has size 1, and a dynamic start
 * (operand >= 0) replaces the static one. Slices keep every field: the
 * verifier checks their size against start, stop and stride. */
static inline uint8_t *wr_index(uint8_t *w, const tsr_index_t *x) {
  w = wr_u8(w, x->kind);
  switch ((tsr_index_kind_t)x->kind) {
    case TSR_INDEX_FULL: return w;
    case TSR_INDEX_POINT:
    case TSR_INDEX_DS:
      w = wr_u32(w, (uint32_t)x->operand);
      if (x->operand < 0) w = wr_i64(w, x->start);
      if (x->kind == TSR_INDEX_DS) {
        w = wr_i64(w, x->size);
        w = wr_i64(w, x->stride);
      }
      return w;
    case TSR_INDEX_DSIZE:
      w = wr_u32(w, (uint32_t)x->operand);
      if (x->operand < 0) w = wr_i64(w, x->start);
      w = wr_u32(w, (uint32_t)x->stop);
      w = wr_i64(w, x->size);
      return wr_i64(w, x->stride);
    case TSR_INDEX_SLICE: break;
  }
  w = wr_u32(w, (uint32_t)x->operand);
  w = wr_i64(w, x->start);
  w = wr_i64(w, x->stop);
  w = wr_i64(w, x->size);
  return wr_i64(w, x->stride);
}

static void put_region(canon_t *c, const tsr_region_t *r);

static void put_op(canon_t *c, const tsr_op_t *op) {
  size_t text = op->text ? strlen(op->text) : 0;
  size_t bound = 1 + 4 * 4 + 4 * (size_t)op->num_operands +
                 INDEX_MAX * (size_t)op->num_indices + 4 + 8 * (size_t)op->num_ints + 8 +
                 4 + text + 4;
  uint8_t *w = reserve(c, bound);
  if (!w) return;
  w = wr_u8(w, 'o');
  w = wr_u32(w, (uint32_t)op->opcode);
  /* TSR_OPF_HAS_ELSE only says that `else` was written: the else region is
   * encoded, and an empty one means what none means (the printer drops it). */
  w = wr_u32(w, op->flags & ~(uint32_t)TSR_OPF_HAS_ELSE);
  w = wr_u32(w, op->num_operands);
  for (uint32_t i = 0; i < op->num_operands; i++) w = wr_use(c, w, op->operands[i]);
  w = wr_u32(w, op->num_indices);
  for (uint32_t i = 0; i < op->num_indices; i++) w = wr_index(w, &op->indices[i]);
  w = wr_u32(w, op->num_ints);
  for (uint32_t i = 0; i < op->num_ints; i++) w = wr_i64(w, op->ints[i]);
  uint64_t literal_bits;
  memcpy(&literal_bits, &op->literal, sizeof literal_bits);
  w = wr_u64(w, literal_bits);
  if (op->text) {
    w = wr_u32(w, (uint32_t)text);
    memcpy(w, op->text, text);
    w += text;
  } else {
    w = wr_u32(w, UINT32_MAX);
  }
  /* Regions before results: region values are defined (numbered) first,
   * matching the order in which the op's results become visible. */
  w = wr_u32(w, op->num_regions);
  commit(c, w);
  for (uint32_t i = 0; i < op->num_regions; i++) put_region(c, &op->regions[i]);
  w = reserve(c, 4 + DEFINE_MAX * (size_t)op->num_results);
  if (!w) return;
  w = wr_u32(w, op->num_results);
  for (uint32_t i = 0; i < op->num_results; i++) w = wr_define(c, w, op->results[i]);
  commit(c, w);
}

static void put_region(canon_t *c, const tsr_region_t *r) {
  put_u8(c, '{');
  if (!r) {
    put_u8(c, '}');
    return;
  }
  put_u32(c, r->num_args);
  for (uint32_t i = 0; i < r->num_args; i++) define(c, r->args ? r->args[i] : NULL);
  for (const tsr_op_t *op = r->first; op; op = op->next) put_op(c, op);
  put_u8(c, '}');
}

static void put_kernel(canon_t *c, const tsr_kernel_t *k) {
  put_bytes(c, "tsrcanon", 8);
  put_u32(c, CANON_FORMAT_VERSION);
  put_u32(c, k->grid_rank);
  for (uint32_t i = 0; i < k->grid_rank && i < TSR_MAX_RANK; i++) {
    put_i64(c, k->grid[i]);
    if (k->grid_bound[i]) put_u32(c, k->grid_bound[i]); /* static grids: bytes unchanged */
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
    for (uint32_t j = 0; j < d->array.rank && j < TSR_MAX_RANK; j++) {
      if (d->element[j]) {
        /* below -1 (squeezed): no block dim has these bytes, and blocked
         * dims keep theirs */
        put_i64(c, -2 - d->block[j]);
        put_i64(c, d->pad_low[j]);
        put_i64(c, d->pad_high[j]);
      } else {
        put_i64(c, d->block[j]);
      }
    }
    put_u32(c, (uint32_t)d->alias);
    put_u8(c, d->revisit);
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
