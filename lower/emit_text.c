/* The MLIR text emitter's plumbing: lines and SSA names, element and memref
 * types, deduplicated prologue constants, buffers and views, element access
 * with storage <-> compute conversion, and loop nests with vector tails.
 * Everything here writes to emitter_t::cur (layer 0 of lower/emit_internal.h:
 * calls nothing of the other emit*.c files). */
#include <stdio.h>
#include <stdlib.h>

#include "lower/emit_internal.h"

/* ---- Errors ------------------------------------------------------------------ */

void em_fail(emitter_t *em, tsr_status_t status) {
  if (!status) return;
  if (em->error) {
    tsr_status_free(status);
    return;
  }
  em->error = status;
}

void em_unimplemented(emitter_t *em, const tsr_op_t *op, const char *why) {
  if (em->error) return;
  const char *m = tsr_op_table[op->opcode].mnemonic;
  em->error = TSR_STATUS_AT_OP(TSR_UNIMPLEMENTED, op->loc, m,
                               "op '%s' cannot be lowered to the cpu target yet%s%s%s", m,
                               why ? " (" : "", why ? why : "", why ? ")" : "");
}

/* ---- Text --------------------------------------------------------------------- */

static void vline(emitter_t *em, const char *fmt, va_list ap) TSR_PRINTF(2, 0);
static void vline(emitter_t *em, const char *fmt, va_list ap) {
  for (int i = 0; i < em->indent; i++) tsr_strbuf_append(em->cur, "  ", 2);
  tsr_strbuf_vprintf(em->cur, fmt, ap);
  tsr_strbuf_append(em->cur, "\n", 1);
}

void em_line(emitter_t *em, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vline(em, fmt, ap);
  va_end(ap);
}

void em_open(emitter_t *em, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vline(em, fmt, ap);
  va_end(ap);
  em->indent++;
}

void em_close(emitter_t *em, const char *text) {
  em->indent--;
  em_line(em, "%s", text);
}

ssa_t em_fresh(emitter_t *em) {
  ssa_t r;
  snprintf(r.s, sizeof r.s, "%%t%u", em->next_name++);
  return r;
}

void *em_alloc(emitter_t *em, size_t size) {
  void *p = tsr_arena_alloc(&em->arena, size);
  if (!p) em_fail(em, TSR_OOM());
  return p;
}

const char *em_key(emitter_t *em, const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  /* A truncated key could equal another view's: no key then (the view is
   * never taken for another one). */
  if (n < 0 || (size_t)n >= sizeof buf) return NULL;
  char *s = tsr_arena_strndup(&em->arena, buf, (size_t)n);
  if (!s) em_fail(em, TSR_OOM());
  return s;
}

/* ---- Types --------------------------------------------------------------------- */

bool em_is_float(tsr_dtype_t dtype) { return tsr_dtype_class(dtype) == TSR_CLASS_FLOAT; }
bool em_is_signed(tsr_dtype_t dtype) { return tsr_dtype_class(dtype) == TSR_CLASS_SINT; }

uint32_t em_int_bits(tsr_dtype_t dtype) { return tsr_dtype_bits(dtype); }

const char *em_storage(tsr_dtype_t dtype) {
  switch (tsr_dtype_size(dtype)) {
    case 1: return "i8";
    case 2: return "i16";
    default: return dtype == TSR_DTYPE_F32 ? "f32" : "i32";
  }
}

const char *em_compute(tsr_dtype_t dtype) {
  if (em_is_float(dtype)) return "f32";
  /* i1, and the sub-byte integers: computed at their own width, so that
   * arithmetic wraps as theirs does; stored one per byte (extended). */
  switch (tsr_dtype_bits(dtype)) {
    case 1: return "i1";
    case 2: return "i2";
    case 4: return "i4";
    default: return em_storage(dtype);
  }
}

tstr_t em_vtype(const char *elem, uint32_t lanes) {
  tstr_t t;
  if (lanes)
    snprintf(t.s, sizeof t.s, "vector<%ux%s>", lanes, elem);
  else
    snprintf(t.s, sizeof t.s, "%s", elem);
  return t;
}

static void append_dims(char *buf, size_t size, uint32_t rank, const int64_t *dims) {
  size_t len = strlen(buf);
  for (uint32_t d = 0; d < rank; d++) {
    snprintf(buf + len, size - len, "%lldx", (long long)dims[d]);
    len += strlen(buf + len);
  }
}

/* Stands for a root that could not be added (out of memory). */
static const root_t oom_root = {.name = {"%oom"}, .dtype = TSR_DTYPE_I8};

static const root_t *root_of(const emitter_t *em, uint32_t root) {
  return root < em->num_roots ? &em->roots[root] : &oom_root;
}

tstr_t em_root_type(const emitter_t *em, uint32_t root) {
  const root_t *r = root_of(em, root);
  tstr_t t;
  snprintf(t.s, sizeof t.s, "memref<%s", r->stacked ? "?x" : "");
  append_dims(t.s, sizeof t.s, r->rank, r->dims);
  size_t len = strlen(t.s);
  snprintf(t.s + len, sizeof t.s - len, "%s>", em_storage(r->dtype));
  return t;
}

tstr_t em_view_type(const emitter_t *em, const view_t *v) {
  tstr_t t;
  snprintf(t.s, sizeof t.s, "memref<");
  append_dims(t.s, sizeof t.s, v->rank, v->dims);
  size_t len = strlen(t.s);
  snprintf(t.s + len, sizeof t.s - len, "%s, strided<[", em_storage(root_of(em, v->root)->dtype));
  for (uint32_t d = 0; d < v->rank; d++) {
    len = strlen(t.s);
    snprintf(t.s + len, sizeof t.s - len, "%s%lld", d ? ", " : "", (long long)v->strides[d]);
  }
  len = strlen(t.s);
  snprintf(t.s + len, sizeof t.s - len, "], offset: ?>>");
  return t;
}

/* ---- Prologue constants ---------------------------------------------------------- */

/* A value of the prologue, `%kN = OP TEXT : TYPE`, defined once per
 * (op, type, text). */
static uint64_t key_hash(const char *key) {
  uint64_t h = 1469598103934665603ull;
  for (const unsigned char *p = (const unsigned char *)key; *p; p++) h = (h ^ *p) * 1099511628211ull;
  return h;
}

/* The constants' hash index (open addressing over em->consts, slots hold
 * index + 1): a linear search made emission quadratic once every frame slot
 * had an offset constant of its own (30k ops: 0.49 s). Rebuilt at twice
 * the constants' capacity. */
static bool const_index_insert(emitter_t *em, uint32_t i) {
  if (2 * (em->num_consts + 1) > em->const_index_cap) {
    uint32_t cap = em->const_index_cap ? 2 * em->const_index_cap : 256;
    uint32_t *t = tsr_calloc(cap, sizeof *t);
    if (!t) return false;
    tsr_free(em->const_index);
    em->const_index = t;
    em->const_index_cap = cap;
    for (uint32_t j = 0; j < em->num_consts; j++) {
      uint32_t h = (uint32_t)key_hash(em->consts[j].key) & (cap - 1);
      while (t[h]) h = (h + 1) & (cap - 1);
      t[h] = j + 1;
    }
    if (i < em->num_consts) return true; /* i was among them */
  }
  uint32_t h = (uint32_t)key_hash(em->consts[i].key) & (em->const_index_cap - 1);
  while (em->const_index[h]) h = (h + 1) & (em->const_index_cap - 1);
  em->const_index[h] = i + 1;
  return true;
}

static ssa_t prologue_def(emitter_t *em, const char *type, const char *literal, const char *op) {
  char key[512];
  snprintf(key, sizeof key, "%s|%s|%s", op, type, literal);
  if (em->const_index_cap) {
    uint32_t h = (uint32_t)key_hash(key) & (em->const_index_cap - 1);
    for (; em->const_index[h]; h = (h + 1) & (em->const_index_cap - 1)) {
      uint32_t i = em->const_index[h] - 1;
      if (strcmp(em->consts[i].key, key) == 0) return em->consts[i].name;
    }
  }
  ssa_t name;
  snprintf(name.s, sizeof name.s, "%%k%u", em->num_consts);
  if (em->num_consts == em->consts_capacity) {
    uint32_t cap = em->consts_capacity ? 2 * em->consts_capacity : 64;
    prolog_const_t *c = tsr_realloc(em->consts, (size_t)cap * sizeof *c);
    if (!c) {
      em_fail(em, TSR_OOM());
      return name;
    }
    em->consts = c;
    em->consts_capacity = cap;
  }
  char *k = tsr_arena_strndup(&em->arena, key, strlen(key));
  if (!k) {
    em_fail(em, TSR_OOM());
    return name;
  }
  em->consts[em->num_consts].key = k;
  em->consts[em->num_consts].name = name;
  if (!const_index_insert(em, em->num_consts)) {
    em_fail(em, TSR_OOM());
    return name;
  }
  em->num_consts++;
  if (strcmp(type, "i1") == 0 && strcmp(op, "arith.constant") == 0) /* true/false are typed */
    tsr_strbuf_printf(&em->pro, "    %s = arith.constant %s\n", name.s, literal);
  else
    tsr_strbuf_printf(&em->pro, "    %s = %s %s : %s\n", name.s, op, literal, type);
  return name;
}

static ssa_t prologue_const(emitter_t *em, const char *type, const char *literal) {
  return prologue_def(em, type, literal, "arith.constant");
}

ssa_t em_const(emitter_t *em, const char *type, const char *literal) {
  return prologue_const(em, type, literal);
}

ssa_t em_cidx(emitter_t *em, int64_t v) {
  char lit[32];
  snprintf(lit, sizeof lit, "%lld", (long long)v);
  return prologue_const(em, "index", lit);
}

/* v as the signed value of its low `bits` bits. */
static int64_t sext(int64_t v, uint32_t bits) {
  if (bits >= 64) return v;
  uint64_t m = (1ull << bits) - 1, u = (uint64_t)v & m, sign = 1ull << (bits - 1);
  return (int64_t)((u ^ sign) - sign);
}

ssa_t em_cint(emitter_t *em, const char *elem, uint32_t lanes, int64_t v) {
  if (strcmp(elem, "i1") == 0) return em_cbool(em, lanes, v & 1);
  /* "i8".."i64": the literal as the signed value of its bits */
  if (elem[0] == 'i' && elem[1] >= '0' && elem[1] <= '9')
    v = sext(v, (uint32_t)strtoul(elem + 1, NULL, 10));
  char lit[48];
  if (lanes)
    snprintf(lit, sizeof lit, "dense<%lld>", (long long)v);
  else
    snprintf(lit, sizeof lit, "%lld", (long long)v);
  return prologue_const(em, em_vtype(elem, lanes).s, lit);
}

ssa_t em_cf32_bits(emitter_t *em, uint32_t lanes, uint32_t bits) {
  char lit[48];
  if (lanes)
    snprintf(lit, sizeof lit, "dense<0x%08X>", bits);
  else
    snprintf(lit, sizeof lit, "0x%08X", bits);
  return prologue_const(em, em_vtype("f32", lanes).s, lit);
}

ssa_t em_cf32(emitter_t *em, uint32_t lanes, float v) {
  return em_cf32_bits(em, lanes, tsr_f32_bits(v));
}

ssa_t em_cbool(emitter_t *em, uint32_t lanes, bool v) {
  char lit[24];
  snprintf(lit, sizeof lit, lanes ? "dense<%s>" : "%s", v ? "true" : "false");
  return prologue_const(em, em_vtype("i1", lanes).s, lit);
}

ssa_t em_literal(emitter_t *em, tsr_dtype_t dtype, tsr_literal_t lit, uint32_t lanes) {
  switch (tsr_dtype_class(dtype)) {
    case TSR_CLASS_FLOAT: {
      /* The parser rounded the literal to the dtype: exact in f32. */
      float f = (float)lit.f;
      if (dtype != TSR_DTYPE_F32 && f != f) f = tsr_bits_f32(0x7fc00000u);
      return em_cf32(em, lanes, f);
    }
    case TSR_CLASS_BOOL: return em_cbool(em, lanes, lit.i != 0);
    default: return em_cint(em, em_compute(dtype), lanes, lit.i);
  }
}

/* The --uninit nan value of dtype. */
static ssa_t uninit_nan(emitter_t *em, tsr_dtype_t dtype, uint32_t lanes) {
  switch (tsr_dtype_class(dtype)) {
    case TSR_CLASS_FLOAT: return em_cf32_bits(em, lanes, 0x7fc00000u);
    case TSR_CLASS_BOOL: return em_cbool(em, lanes, true);
    case TSR_CLASS_SINT: {
      uint32_t bits = em_int_bits(dtype);
      return em_cint(em, em_compute(dtype), lanes, (int64_t)((1ull << (bits - 1)) - 1));
    }
    case TSR_CLASS_UINT: return em_cint(em, em_compute(dtype), lanes, -1);
  }
  return em_cint(em, "i32", lanes, 0);
}

/* The run's uninitialized value: a prologue select between the two modes'
 * values on the context's flag (one select per type, deduplicated with the
 * constants). */
ssa_t em_uninit(emitter_t *em, tsr_dtype_t dtype, uint32_t lanes) {
  ssa_t nan = uninit_nan(em, dtype, lanes);
  ssa_t zero = tsr_dtype_class(dtype) == TSR_CLASS_FLOAT ? em_cf32(em, lanes, 0.0f)
                                                          : em_cint(em, em_compute(dtype), lanes, 0);
  if (!em->uninit_zero.s[0]) return nan; /* no run context (not a kernel's code) */
  tstr_t t = em_vtype(em_compute(dtype), lanes);
  char key[160];
  snprintf(key, sizeof key, "%s, %s, %s", em->uninit_zero.s, zero.s, nan.s);
  return prologue_def(em, t.s, key, "arith.select");
}

/* The padding of an element window (pl.Element): JAX pads an array for one
 * with its own uninitialized value, which for integers is the minimum (0
 * unsigned, false for i1) where tessera's --uninit nan value is the
 * maximum; floats get the run's uninitialized value, as do all dtypes with
 * --uninit zero. */
ssa_t em_element_pad(emitter_t *em, tsr_dtype_t dtype, uint32_t lanes) {
  tsr_dtype_class_t cl = tsr_dtype_class(dtype);
  if (cl == TSR_CLASS_FLOAT) return em_uninit(em, dtype, lanes);
  if (cl == TSR_CLASS_BOOL) return em_cbool(em, lanes, false);
  ssa_t zero = em_cint(em, em_compute(dtype), lanes, 0);
  if (cl == TSR_CLASS_UINT) return zero;
  uint32_t bits = em_int_bits(dtype);
  ssa_t low = em_cint(em, em_compute(dtype), lanes, -(int64_t)(1ull << (bits - 1)));
  if (!em->uninit_zero.s[0]) return low;
  tstr_t t = em_vtype(em_compute(dtype), lanes);
  char key[160];
  snprintf(key, sizeof key, "%s, %s, %s", em->uninit_zero.s, zero.s, low.s);
  return prologue_def(em, t.s, key, "arith.select");
}

/* ---- Plain ops ---------------------------------------------------------------------- */

ssa_t em_op1(emitter_t *em, const char *name, ssa_t a, const char *type) {
  ssa_t r = em_fresh(em);
  em_line(em, "%s = %s %s : %s", r.s, name, a.s, type);
  return r;
}

ssa_t em_op2(emitter_t *em, const char *name, ssa_t a, ssa_t b, const char *type) {
  ssa_t r = em_fresh(em);
  em_line(em, "%s = %s %s, %s : %s", r.s, name, a.s, b.s, type);
  return r;
}

ssa_t em_cmp(emitter_t *em, const char *kind, const char *pred, ssa_t a, ssa_t b,
             const char *type) {
  ssa_t r = em_fresh(em);
  em_line(em, "%s = arith.%s %s, %s, %s : %s", r.s, kind, pred, a.s, b.s, type);
  return r;
}

ssa_t em_select(emitter_t *em, ssa_t c, ssa_t a, ssa_t b, const char *elem,
                uint32_t lanes, bool cond_vector) {
  ssa_t r = em_fresh(em);
  tstr_t t = em_vtype(elem, lanes);
  if (cond_vector && lanes)
    em_line(em, "%s = arith.select %s, %s, %s : vector<%uxi1>, %s", r.s, c.s, a.s, b.s,
            lanes, t.s);
  else
    em_line(em, "%s = arith.select %s, %s, %s : %s", r.s, c.s, a.s, b.s, t.s);
  return r;
}

ssa_t em_cast(emitter_t *em, const char *name, ssa_t a, const char *from,
              const char *to) {
  ssa_t r = em_fresh(em);
  em_line(em, "%s = %s %s : %s to %s", r.s, name, a.s, from, to);
  return r;
}

ssa_t em_bcast(emitter_t *em, ssa_t s, const char *elem, uint32_t lanes) {
  if (!lanes) return s;
  ssa_t r = em_fresh(em);
  em_line(em, "%s = vector.broadcast %s : %s to vector<%ux%s>", r.s, s.s, elem, lanes, elem);
  return r;
}

ssa_t em_iadd(emitter_t *em, ssa_t a, ssa_t b) { return em_op2(em, "arith.addi", a, b, "index"); }
ssa_t em_imul(emitter_t *em, ssa_t a, ssa_t b) { return em_op2(em, "arith.muli", a, b, "index"); }
ssa_t em_iaddc(emitter_t *em, ssa_t a, int64_t c) {
  return c == 0 ? a : em_iadd(em, a, em_cidx(em, c));
}
ssa_t em_imulc(emitter_t *em, ssa_t a, int64_t c) {
  if (c == 0) return em_cidx(em, 0);
  return c == 1 ? a : em_imul(em, a, em_cidx(em, c));
}
ssa_t em_idx_of_i32(emitter_t *em, ssa_t v) {
  return em_cast(em, "arith.index_cast", v, "i32", "index");
}

dimv_t em_dimc(int64_t c) { return (dimv_t){.dynamic = false, .c = c}; }
dimv_t em_dims(ssa_t s) { return (dimv_t){.dynamic = true, .s = s}; }
ssa_t em_dimv_ssa(emitter_t *em, dimv_t d) { return d.dynamic ? d.s : em_cidx(em, d.c); }

/* ---- Roots, buffers, views ------------------------------------------------------------ */

uint32_t em_add_root(emitter_t *em, ssa_t name, tsr_dtype_t dtype, uint32_t rank,
                     const int64_t *dims) {
  if (em->num_roots == em->roots_capacity) {
    uint32_t cap = em->roots_capacity ? 2 * em->roots_capacity : 32;
    root_t *r = tsr_realloc(em->roots, (size_t)cap * sizeof *r);
    if (!r) {
      em_fail(em, TSR_OOM());
      return UINT32_MAX;
    }
    em->roots = r;
    em->roots_capacity = cap;
  }
  root_t *r = &em->roots[em->num_roots];
  memset(r, 0, sizeof *r);
  r->name = name;
  r->dtype = dtype;
  r->rank = rank;
  for (uint32_t d = 0; d < rank; d++) r->dims[d] = dims[d];
  return em->num_roots++;
}

ssa_t em_root_base(emitter_t *em, uint32_t root) {
  const root_t *r = root_of(em, root);
  return r->stacked ? r->base : em_cidx(em, 0);
}

ssa_t em_root_address(emitter_t *em, uint32_t root, ssa_t off) {
  const root_t *r = root_of(em, root);
  tstr_t rt = em_root_type(em, root);
  ssa_t p = em_fresh(em);
  em_line(em, "%s = memref.extract_aligned_pointer_as_index %s : %s -> index", p.s, r->name.s,
          rt.s);
  ssa_t a = em_iadd(em, p, em_imulc(em, off, (int64_t)tsr_dtype_size(r->dtype)));
  return em_cast(em, "arith.index_cast", a, "index", "i64");
}

void em_dense_strides(uint32_t rank, const int64_t *dims, int64_t *strides) {
  int64_t s = 1;
  for (uint32_t d = rank; d-- > 0;) {
    strides[d] = s;
    s *= dims[d];
  }
}

bool em_view_is_dense(const view_t *v) {
  int64_t s = 1;
  for (uint32_t d = v->rank; d-- > 0;) {
    if (v->dims[d] != 1 && v->strides[d] != s) return false;
    s *= v->dims[d];
  }
  return true;
}

bool em_view_same(const view_t *a, const view_t *b) {
  if (a->root != b->root || a->rank != b->rank) return false;
  if (strcmp(a->off.s, b->off.s) != 0 && (!a->key || !b->key || strcmp(a->key, b->key) != 0))
    return false;
  for (uint32_t d = 0; d < a->rank; d++)
    if (a->dims[d] != b->dims[d] || (a->dims[d] != 1 && a->strides[d] != b->strides[d]))
      return false;
  return true;
}

void em_view_materialize(emitter_t *em, view_t *v) {
  v->name = em_fresh(em);
  tstr_t rt = em_root_type(em, v->root), vt = em_view_type(em, v);
  char sizes[256] = "", strides[256] = "";
  size_t a = 0, b = 0;
  for (uint32_t d = 0; d < v->rank; d++) {
    snprintf(sizes + a, sizeof sizes - a, "%s%lld", d ? ", " : "", (long long)v->dims[d]);
    a += strlen(sizes + a);
    snprintf(strides + b, sizeof strides - b, "%s%lld", d ? ", " : "",
             (long long)v->strides[d]);
    b += strlen(strides + b);
  }
  em_line(em, "%s = memref.reinterpret_cast %s to offset: [%s], sizes: [%s], strides: [%s] "
              ": %s to %s",
          v->name.s, root_of(em, v->root)->name.s, v->off.s, sizes, strides, rt.s, vt.s);
}

view_t em_view_make(emitter_t *em, uint32_t root, ssa_t off, uint32_t rank,
                    const int64_t *dims, const int64_t *strides, const char *key) {
  view_t v;
  memset(&v, 0, sizeof v);
  v.root = root;
  v.off = off;
  v.rank = rank;
  for (uint32_t d = 0; d < rank; d++) {
    v.dims[d] = dims[d];
    v.strides[d] = strides[d];
  }
  v.key = key;
  em_view_materialize(em, &v);
  return v;
}

/* A frame slot of `bytes`: a released one of that size, else a new one at
 * the frame's end. UINT32_MAX when memory runs out. */
static uint32_t frame_slot(emitter_t *em, int64_t bytes, bool releasable) {
  if (releasable) {
    for (uint32_t i = em->num_free; i-- > 0;) {
      uint32_t k = em->free_slots[i];
      if (em->slots[k].bytes != bytes) continue;
      em->free_slots[i] = em->free_slots[--em->num_free];
      em->slots[k].region = NULL;
      em->slots[k].refs = 0;
      em->slots[k].pinned = false;
      return k;
    }
  }
  if (em->num_slots == em->slots_cap) {
    uint32_t cap = em->slots_cap ? 2 * em->slots_cap : 64;
    frame_slot_t *s = tsr_realloc(em->slots, (size_t)cap * sizeof *s);
    if (!s) return UINT32_MAX;
    em->slots = s;
    em->slots_cap = cap;
  }
  int64_t off = (em->frame_bytes + 63) / 64 * 64;
  em->frame_bytes = off + bytes;
  em->slots[em->num_slots] = (frame_slot_t){.off = off, .bytes = bytes, .releasable = releasable};
  return em->num_slots++;
}

static view_t buffer(emitter_t *em, tsr_dtype_t dtype, uint32_t rank, const int64_t *dims,
                     bool releasable);

view_t em_buffer(emitter_t *em, tsr_dtype_t dtype, uint32_t rank, const int64_t *dims) {
  return buffer(em, dtype, rank, dims, false);
}

view_t em_value_buffer(emitter_t *em, tsr_dtype_t dtype, uint32_t rank, const int64_t *dims) {
  return buffer(em, dtype, rank, dims, true);
}

static view_t buffer(emitter_t *em, tsr_dtype_t dtype, uint32_t rank, const int64_t *dims,
                     bool releasable) {
  ssa_t name;
  snprintf(name.s, sizeof name.s, "%%b%u", em->num_roots);
  uint32_t root = em_add_root(em, name, dtype, rank, dims);
  tstr_t rt = em_root_type(em, root);
  int64_t bytes = tsr_dtype_size(dtype);
  for (uint32_t d = 0; d < rank; d++) bytes *= dims[d];
  if (rank > 0 && bytes <= EM_FRAME_MAX_BUFFER) {
    /* A slot of the frame (tsr_lower_emit_mlir allocates it): one pointer
     * for all buffers, and their offsets are i64 constants, which the
     * splitter passes to parts as arguments (lower/split.c), so that parts
     * differing only in which buffers they use are one function. */
    uint32_t slot = frame_slot(em, bytes, releasable);
    if (slot == UINT32_MAX || root >= em->num_roots) {
      em_fail(em, TSR_OOM());
      slot = 0;
    } else {
      em->roots[root].slot = slot + 1;
    }
    ssa_t c = em_cint(em, "i64", 0, em->num_slots ? em->slots[slot].off : 0);
    ssa_t oi = em_fresh(em);
    tsr_strbuf_printf(&em->pro, "    %s = arith.index_cast %s : i64 to index\n", oi.s, c.s);
    tsr_strbuf_printf(&em->pro, "    %s = memref.view %%tsr_frame[%s][] : memref<?xi8> to %s\n",
                      name.s, oi.s, rt.s);
  } else {
    tsr_strbuf_printf(&em->pro, "    %s = memref.alloc() {alignment = 64 : i64} : %s\n",
                      name.s, rt.s);
    tsr_strbuf_printf(&em->epi, "    memref.dealloc %s : %s\n", name.s, rt.s);
  }
  int64_t strides[TSR_MAX_RANK];
  em_dense_strides(rank, dims, strides);
  tsr_strbuf_t *saved = em->cur;
  int saved_indent = em->indent;
  em->cur = &em->pro;
  em->indent = 2;
  view_t v = em_view_make(em, root, em_cidx(em, 0), rank, dims, strides,
                          em_key(em, "B%u", root));
  em->cur = saved;
  em->indent = saved_indent;
  return v;
}

view_t em_view_squeeze(emitter_t *em, const view_t *v) {
  int64_t dims[TSR_MAX_RANK], strides[TSR_MAX_RANK];
  uint32_t r = 0;
  for (uint32_t d = 0; d < v->rank; d++) {
    if (v->dims[d] == 1) continue;
    dims[r] = v->dims[d];
    strides[r] = v->strides[d];
    r++;
  }
  if (r == v->rank) return *v;
  return em_view_make(em, v->root, v->off, r, dims, strides,
                      v->key ? em_key(em, "%s{sq}", v->key) : NULL);
}

/* ---- Storage <-> compute ------------------------------------------------------------------ */

/* f16 bits (zero-extended in i32) to f32, as interp/blockops.c f16_to_f32_vec. */
static ssa_t f16_bits_to_f32(emitter_t *em, ssa_t h, uint32_t lanes) {
  tstr_t it = em_vtype("i32", lanes), ft = em_vtype("f32", lanes);
  ssa_t sign = em_op2(em, "arith.andi", h, em_cint(em, "i32", lanes, 0x8000), it.s);
  sign = em_op2(em, "arith.shli", sign, em_cint(em, "i32", lanes, 16), it.s);
  ssa_t e = em_op2(em, "arith.andi", h, em_cint(em, "i32", lanes, 0x7fff), it.s);
  ssa_t e13 = em_op2(em, "arith.shli", e, em_cint(em, "i32", lanes, 13), it.s);
  ssa_t fin = em_cast(em, "arith.bitcast", e13, it.s, ft.s);
  fin = em_op2(em, "arith.mulf", fin, em_cf32_bits(em, lanes, 0x77800000u) /* 2^112 */, ft.s);
  ssa_t finb = em_cast(em, "arith.bitcast", fin, ft.s, it.s);
  ssa_t mant = em_op2(em, "arith.andi", e, em_cint(em, "i32", lanes, 0x3ff), it.s);
  ssa_t nz = em_cmp(em, "cmpi", "ne", mant, em_cint(em, "i32", lanes, 0), it.s);
  ssa_t q = em_select(em, nz, em_cint(em, "i32", lanes, 1 << 22), em_cint(em, "i32", lanes, 0),
                      "i32", lanes, true);
  ssa_t special = em_op2(em, "arith.ori", e13, em_cint(em, "i32", lanes, 0x7f800000), it.s);
  special = em_op2(em, "arith.ori", special, q, it.s);
  ssa_t is_special = em_cmp(em, "cmpi", "uge", e, em_cint(em, "i32", lanes, 0x7c00), it.s);
  ssa_t bits = em_select(em, is_special, special, finb, "i32", lanes, true);
  bits = em_op2(em, "arith.ori", bits, sign, it.s);
  return em_cast(em, "arith.bitcast", bits, it.s, ft.s);
}

/* f32 to f16 bits (in i32), as interp/blockops.c f32_to_f16_vec. */
static ssa_t f32_to_f16_bits(emitter_t *em, ssa_t f, uint32_t lanes) {
  tstr_t it = em_vtype("i32", lanes), ft = em_vtype("f32", lanes);
#define C(v) em_cint(em, "i32", lanes, (int64_t)(v))
  ssa_t u = em_cast(em, "arith.bitcast", f, ft.s, it.s);
  ssa_t sign = em_op2(em, "arith.shrui", u, C(16), it.s);
  sign = em_op2(em, "arith.andi", sign, C(0x8000), it.s);
  ssa_t a = em_op2(em, "arith.andi", u, C(0x7fffffff), it.s);
  ssa_t nan_h = em_op2(em, "arith.shrui", a, C(13), it.s);
  nan_h = em_op2(em, "arith.andi", nan_h, C(0x3ff), it.s);
  nan_h = em_op2(em, "arith.ori", nan_h, C(0x7e00), it.s);
  ssa_t r = em_op2(em, "arith.subi", a, C(0x38000000), it.s);
  ssa_t lsb = em_op2(em, "arith.shrui", r, C(13), it.s);
  lsb = em_op2(em, "arith.andi", lsb, C(1), it.s);
  ssa_t normal = em_op2(em, "arith.addi", r, C(0x0fff), it.s);
  normal = em_op2(em, "arith.addi", normal, lsb, it.s);
  normal = em_op2(em, "arith.shrui", normal, C(13), it.s);
  ssa_t af = em_cast(em, "arith.bitcast", a, it.s, ft.s);
  ssa_t sub = em_op2(em, "arith.addf", af, em_cf32(em, lanes, 0.5f), ft.s);
  sub = em_cast(em, "arith.bitcast", sub, ft.s, it.s);
  sub = em_op2(em, "arith.subi", sub, C(0x3f000000), it.s);
  ssa_t c1 = em_cmp(em, "cmpi", "uge", a, C(0x38800000), it.s);
  ssa_t h = em_select(em, c1, normal, sub, "i32", lanes, true);
  ssa_t c2 = em_cmp(em, "cmpi", "uge", a, C(0x477ff000), it.s);
  h = em_select(em, c2, C(0x7c00), h, "i32", lanes, true);
  ssa_t c3 = em_cmp(em, "cmpi", "ugt", a, C(0x7f800000), it.s);
  h = em_select(em, c3, nan_h, h, "i32", lanes, true);
#undef C
  return em_op2(em, "arith.ori", sign, h, it.s);
}

/* 8-bit float bits (zero-extended in i32) to f32, as tsr_f8_to_f32
 * (base/base_internal.h). */
static ssa_t f8_bits_to_f32(emitter_t *em, tsr_dtype_t dtype, ssa_t h, uint32_t lanes) {
  tstr_t it = em_vtype("i32", lanes), ft = em_vtype("f32", lanes);
  const bool e4m3 = dtype == TSR_DTYPE_F8E4M3FN;
  const uint32_t mbits = e4m3 ? 3 : 2, bias = e4m3 ? 7 : 15;
#define C(v) em_cint(em, "i32", lanes, (int64_t)(v))
  ssa_t sign = em_op2(em, "arith.andi", h, C(0x80), it.s);
  sign = em_op2(em, "arith.shli", sign, C(24), it.s);
  ssa_t e = em_op2(em, "arith.andi", h, C(0x7f), it.s);
  ssa_t sh = em_op2(em, "arith.shli", e, C(23 - mbits), it.s);
  ssa_t fin = em_cast(em, "arith.bitcast", sh, it.s, ft.s);
  fin = em_op2(em, "arith.mulf", fin, em_cf32_bits(em, lanes, (254u - bias) << 23), ft.s);
  ssa_t bits = em_cast(em, "arith.bitcast", fin, ft.s, it.s);
  if (e4m3) {
    ssa_t is_nan = em_cmp(em, "cmpi", "eq", e, C(0x7f), it.s);
    bits = em_select(em, is_nan, C(0x7fc00000), bits, "i32", lanes, true);
  } else {
    ssa_t mant = em_op2(em, "arith.andi", e, C(3), it.s);
    ssa_t nz = em_cmp(em, "cmpi", "ne", mant, C(0), it.s);
    ssa_t q = em_select(em, nz, C(1 << 22), C(0), "i32", lanes, true);
    ssa_t special = em_op2(em, "arith.shli", mant, C(21), it.s);
    special = em_op2(em, "arith.ori", special, C(0x7f800000), it.s);
    special = em_op2(em, "arith.ori", special, q, it.s);
    ssa_t is_special = em_cmp(em, "cmpi", "uge", e, C(0x7c), it.s);
    bits = em_select(em, is_special, special, bits, "i32", lanes, true);
  }
#undef C
  bits = em_op2(em, "arith.ori", bits, sign, it.s);
  return em_cast(em, "arith.bitcast", bits, it.s, ft.s);
}

/* f32 to 8-bit float bits (in i32), as tsr_f32_to_f8 (base/base_internal.h):
 * nearest even, subnormals kept, overflow to NaN (e4m3fn) or inf (e5m2). */
static ssa_t f32_to_f8_bits(emitter_t *em, tsr_dtype_t dtype, ssa_t f, uint32_t lanes) {
  tstr_t it = em_vtype("i32", lanes), ft = em_vtype("f32", lanes);
  const bool e4m3 = dtype == TSR_DTYPE_F8E4M3FN;
  const uint32_t mbits = e4m3 ? 3 : 2, bias = e4m3 ? 7 : 15, shift = 23 - mbits;
  const uint32_t overflow_bits = e4m3 ? 0x43e80001u : 0x47700000u;
  const uint32_t overflow_h = e4m3 ? 0x7fu : 0x7cu, nan_h = e4m3 ? 0x7fu : 0x7eu;
#define C(v) em_cint(em, "i32", lanes, (int64_t)(v))
  ssa_t u = em_cast(em, "arith.bitcast", f, ft.s, it.s);
  ssa_t sign = em_op2(em, "arith.shrui", u, C(24), it.s);
  sign = em_op2(em, "arith.andi", sign, C(0x80), it.s);
  ssa_t a = em_op2(em, "arith.andi", u, C(0x7fffffff), it.s);
  ssa_t r = em_op2(em, "arith.subi", a, C((127u - bias) << 23), it.s);
  ssa_t lsb = em_op2(em, "arith.shrui", r, C(shift), it.s);
  lsb = em_op2(em, "arith.andi", lsb, C(1), it.s);
  ssa_t normal = em_op2(em, "arith.addi", r, C((1u << (shift - 1)) - 1u), it.s);
  normal = em_op2(em, "arith.addi", normal, lsb, it.s);
  normal = em_op2(em, "arith.shrui", normal, C(shift), it.s);
  const uint32_t magic = (128u - bias + shift) << 23;
  ssa_t af = em_cast(em, "arith.bitcast", a, it.s, ft.s);
  ssa_t sub = em_op2(em, "arith.addf", af, em_cf32_bits(em, lanes, magic), ft.s);
  sub = em_cast(em, "arith.bitcast", sub, ft.s, it.s);
  sub = em_op2(em, "arith.subi", sub, C(magic), it.s);
  ssa_t c1 = em_cmp(em, "cmpi", "uge", a, C((128u - bias) << 23), it.s);
  ssa_t h = em_select(em, c1, normal, sub, "i32", lanes, true);
  ssa_t c2 = em_cmp(em, "cmpi", "uge", a, C(overflow_bits), it.s);
  h = em_select(em, c2, C(overflow_h), h, "i32", lanes, true);
  ssa_t c3 = em_cmp(em, "cmpi", "ugt", a, C(0x7f800000), it.s);
  h = em_select(em, c3, C(nan_h), h, "i32", lanes, true);
#undef C
  return em_op2(em, "arith.ori", sign, h, it.s);
}

ssa_t em_round(emitter_t *em, ssa_t x, tsr_dtype_t dtype, uint32_t lanes) {
  tstr_t it = em_vtype("i32", lanes), ft = em_vtype("f32", lanes);
  if (dtype == TSR_DTYPE_BF16) {
    /* tsr_f32_to_bf16, kept in f32: round to nearest even, NaN quietened. */
    ssa_t u = em_cast(em, "arith.bitcast", x, ft.s, it.s);
    ssa_t a = em_op2(em, "arith.andi", u, em_cint(em, "i32", lanes, 0x7fffffff), it.s);
    ssa_t isnan = em_cmp(em, "cmpi", "ugt", a, em_cint(em, "i32", lanes, 0x7f800000), it.s);
    ssa_t lsb = em_op2(em, "arith.shrui", u, em_cint(em, "i32", lanes, 16), it.s);
    lsb = em_op2(em, "arith.andi", lsb, em_cint(em, "i32", lanes, 1), it.s);
    ssa_t r = em_op2(em, "arith.addi", u, em_cint(em, "i32", lanes, 0x7fff), it.s);
    r = em_op2(em, "arith.addi", r, lsb, it.s);
    ssa_t hi = em_cint(em, "i32", lanes, (int64_t)0xffff0000u);
    r = em_op2(em, "arith.andi", r, hi, it.s);
    ssa_t q = em_op2(em, "arith.andi", u, hi, it.s);
    q = em_op2(em, "arith.ori", q, em_cint(em, "i32", lanes, 0x00400000), it.s);
    r = em_select(em, isnan, q, r, "i32", lanes, true);
    return em_cast(em, "arith.bitcast", r, it.s, ft.s);
  }
  if (dtype == TSR_DTYPE_F16) {
    ssa_t h = f32_to_f16_bits(em, x, lanes);
    return f16_bits_to_f32(em, h, lanes);
  }
  if (dtype == TSR_DTYPE_F8E4M3FN || dtype == TSR_DTYPE_F8E5M2)
    return f8_bits_to_f32(em, dtype, f32_to_f8_bits(em, dtype, x, lanes), lanes);
  return x;
}

ssa_t em_to_compute(emitter_t *em, tsr_dtype_t dtype, ssa_t raw, uint32_t lanes) {
  tstr_t it = em_vtype("i32", lanes), st = em_vtype(em_storage(dtype), lanes);
  switch (dtype) {
    case TSR_DTYPE_BF16: {
      ssa_t w = em_cast(em, "arith.extui", raw, st.s, it.s);
      w = em_op2(em, "arith.shli", w, em_cint(em, "i32", lanes, 16), it.s);
      return em_cast(em, "arith.bitcast", w, it.s, em_vtype("f32", lanes).s);
    }
    case TSR_DTYPE_F16: {
      ssa_t w = em_cast(em, "arith.extui", raw, st.s, it.s);
      return f16_bits_to_f32(em, w, lanes);
    }
    case TSR_DTYPE_F8E4M3FN:
    case TSR_DTYPE_F8E5M2: {
      ssa_t w = em_cast(em, "arith.extui", raw, st.s, it.s);
      return f8_bits_to_f32(em, dtype, w, lanes);
    }
    case TSR_DTYPE_I1:
      return em_cmp(em, "cmpi", "ne", raw, em_cint(em, "i8", lanes, 0), st.s);
    case TSR_DTYPE_I4:
    case TSR_DTYPE_U4:
    case TSR_DTYPE_I2:
    case TSR_DTYPE_U2: /* stored extended in a byte: its low bits */
      return em_cast(em, "arith.trunci", raw, st.s, em_vtype(em_compute(dtype), lanes).s);
    default: return raw;
  }
}

ssa_t em_to_storage(emitter_t *em, tsr_dtype_t dtype, ssa_t value, uint32_t lanes) {
  tstr_t it = em_vtype("i32", lanes), st = em_vtype(em_storage(dtype), lanes);
  tstr_t ft = em_vtype("f32", lanes);
  switch (dtype) {
    case TSR_DTYPE_BF16: {
      /* Values of bf16 dtype are always rounded already: keep the top half. */
      ssa_t u = em_cast(em, "arith.bitcast", value, ft.s, it.s);
      u = em_op2(em, "arith.shrui", u, em_cint(em, "i32", lanes, 16), it.s);
      return em_cast(em, "arith.trunci", u, it.s, st.s);
    }
    case TSR_DTYPE_F16: {
      ssa_t h = f32_to_f16_bits(em, value, lanes);
      return em_cast(em, "arith.trunci", h, it.s, st.s);
    }
    case TSR_DTYPE_F8E4M3FN:
    case TSR_DTYPE_F8E5M2: {
      ssa_t h = f32_to_f8_bits(em, dtype, value, lanes);
      return em_cast(em, "arith.trunci", h, it.s, st.s);
    }
    case TSR_DTYPE_I1:
      return em_cast(em, "arith.extui", value, em_vtype("i1", lanes).s, st.s);
    case TSR_DTYPE_I4:
    case TSR_DTYPE_I2: /* the low bits, zeros above: ml_dtypes' layout */
    case TSR_DTYPE_U4:
    case TSR_DTYPE_U2:
      return em_cast(em, "arith.extui", value, em_vtype(em_compute(dtype), lanes).s, st.s);
    default: return value;
  }
}

/* ---- Element access ------------------------------------------------------------------------ */

static void idx_list(char *buf, size_t size, uint32_t rank, const ssa_t *idx) {
  size_t len = 0;
  buf[0] = 0;
  for (uint32_t d = 0; d < rank; d++) {
    snprintf(buf + len, size - len, "%s%s", d ? ", " : "", idx[d].s);
    len += strlen(buf + len);
  }
}

/* The effective vector mask of an access: the nest's tail mask and-ed with
 * an extra one. Returns false if there is none. */
static bool access_mask(emitter_t *em, const nest_t *n, ssa_t *extra, ssa_t *out) {
  if (n->masked && extra) {
    *out = em_op2(em, "arith.andi", n->mask, *extra, em_vtype("i1", n->lanes).s);
    return true;
  }
  if (n->masked) {
    *out = n->mask;
    return true;
  }
  if (extra) {
    *out = *extra;
    return true;
  }
  return false;
}

void em_mem_prefetch(emitter_t *em, const view_t *v, const ssa_t *idx, int locality) {
  char il[512];
  idx_list(il, sizeof il, v->rank, idx);
  tstr_t vt = em_view_type(em, v);
  em_line(em, "memref.prefetch %s[%s], read, locality<%d>, data : %s", v->name.s, il, locality,
          vt.s);
}

ssa_t em_mem_read(emitter_t *em, const view_t *v, tsr_dtype_t dtype, const ssa_t *idx,
                  const nest_t *n, ssa_t *extra_mask, ssa_t *passthru) {
  char il[512];
  idx_list(il, sizeof il, v->rank, idx);
  tstr_t vt = em_view_type(em, v);
  const char *st = em_storage(dtype), *ct = em_compute(dtype);
  uint32_t lanes = n->lanes;
  if (!lanes) {
    if (!extra_mask) {
      ssa_t raw = em_fresh(em);
      em_line(em, "%s = memref.load %s[%s] : %s", raw.s, v->name.s, il, vt.s);
      return em_to_compute(em, dtype, raw, 0);
    }
    ssa_t pt = passthru ? *passthru : em_uninit(em, dtype, 0);
    ssa_t r = em_fresh(em);
    em_open(em, "%s = scf.if %s -> (%s) {", r.s, extra_mask->s, ct);
    ssa_t raw = em_fresh(em);
    em_line(em, "%s = memref.load %s[%s] : %s", raw.s, v->name.s, il, vt.s);
    ssa_t c = em_to_compute(em, dtype, raw, 0);
    em_line(em, "scf.yield %s : %s", c.s, ct);
    em->indent--;
    em_open(em, "} else {");
    em_line(em, "scf.yield %s : %s", pt.s, ct);
    em_close(em, "}");
    return r;
  }
  tstr_t vst = em_vtype(st, lanes);
  ssa_t mask;
  ssa_t raw = em_fresh(em);
  if (access_mask(em, n, extra_mask, &mask)) {
    ssa_t pt;
    if (passthru)
      pt = em_to_storage(em, dtype, *passthru, lanes);
    else
      pt = strcmp(st, "f32") == 0 ? em_cf32(em, lanes, 0.0f) : em_cint(em, st, lanes, 0);
    em_line(em, "%s = vector.maskedload %s[%s], %s, %s : %s, vector<%uxi1>, %s into %s",
            raw.s, v->name.s, il, mask.s, pt.s, vt.s, lanes, vst.s, vst.s);
  } else {
    em_line(em, "%s = vector.load %s[%s] : %s, %s", raw.s, v->name.s, il, vt.s, vst.s);
  }
  return em_to_compute(em, dtype, raw, lanes);
}

void em_mem_write(emitter_t *em, const view_t *v, tsr_dtype_t dtype, const ssa_t *idx,
                  const nest_t *n, ssa_t value, ssa_t *extra_mask) {
  char il[512];
  idx_list(il, sizeof il, v->rank, idx);
  tstr_t vt = em_view_type(em, v);
  uint32_t lanes = n->lanes;
  ssa_t raw = em_to_storage(em, dtype, value, lanes);
  if (!lanes) {
    if (extra_mask) em_open(em, "scf.if %s {", extra_mask->s);
    em_line(em, "memref.store %s, %s[%s] : %s", raw.s, v->name.s, il, vt.s);
    if (extra_mask) em_close(em, "}");
    return;
  }
  tstr_t vst = em_vtype(em_storage(dtype), lanes);
  ssa_t mask;
  if (access_mask(em, n, extra_mask, &mask))
    em_masked_store(em, v, em_storage(dtype), idx, lanes, raw, mask,
                    extra_mask ? 0 : n->tail);
  else
    em_line(em, "vector.store %s, %s[%s] : %s, %s", raw.s, v->name.s, il, vt.s, vst.s);
}

/* Why narrow elements are stored one by one: LLVM 22's x86 back end, on
 * AVX-512 hosts, turns a vector of 8- or 16-bit elements truncated from 32
 * bits and stored under a constant mask with one valid lane into a scalar
 * store of the untruncated 32-bit lane (a truncating masked store reduced to
 * a plain one): 2 or 3 bytes past the element, past the end of the buffer
 * for a tail of one element. Every value of a narrow dtype is computed in 32
 * bits and truncated on its way to memory (em_to_storage), and a mask that
 * is not constant here may become one after LLVM's optimizations, so no
 * masked vector store of a narrow element is emitted at all. Without
 * AVX-512 LLVM stores such vectors lane by lane anyway (AVX2 has masked
 * stores of 32- and 64-bit elements only), so only AVX-512 hosts give up
 * speed: on tails and masked stores of narrow dtypes. */
void em_masked_store(emitter_t *em, const view_t *v, const char *storage, const ssa_t *idx,
                     uint32_t lanes, ssa_t raw, ssa_t mask, uint32_t tail) {
  char il[512];
  idx_list(il, sizeof il, v->rank, idx);
  tstr_t vt = em_view_type(em, v), vst = em_vtype(storage, lanes);
  if (strcmp(storage, "i8") != 0 && strcmp(storage, "i16") != 0) {
    em_line(em, "vector.maskedstore %s[%s], %s, %s : %s, vector<%uxi1>, %s", v->name.s, il,
            mask.s, raw.s, vt.s, lanes, vst.s);
    return;
  }
  const uint32_t k = v->rank - 1;
  ssa_t at[TSR_MAX_RANK];
  memcpy(at, idx, v->rank * sizeof *at);
  if (tail) { /* a constant mask of `tail` leading lanes: those, unconditionally */
    for (uint32_t l = 0; l < tail && l < lanes; l++) {
      ssa_t e = em_fresh(em);
      em_line(em, "%s = vector.extract %s[%u] : %s from %s", e.s, raw.s, l, storage, vst.s);
      at[k] = em_iaddc(em, idx[k], l);
      idx_list(il, sizeof il, v->rank, at);
      em_line(em, "memref.store %s, %s[%s] : %s", e.s, v->name.s, il, vt.s);
    }
    return;
  }
  ssa_t l = em_for_open(em, em_dimc(0), em_dimc(lanes), 1);
  ssa_t on = em_fresh(em);
  em_line(em, "%s = vector.extract %s[%s] : i1 from vector<%uxi1>", on.s, mask.s, l.s, lanes);
  em_open(em, "scf.if %s {", on.s);
  ssa_t e = em_fresh(em);
  em_line(em, "%s = vector.extract %s[%s] : %s from %s", e.s, raw.s, l.s, storage, vst.s);
  at[k] = em_iadd(em, idx[k], l);
  idx_list(il, sizeof il, v->rank, at);
  em_line(em, "memref.store %s, %s[%s] : %s", e.s, v->name.s, il, vt.s);
  em_close(em, "}");
  em_close(em, "}");
}

/* ---- Loop nests ------------------------------------------------------------------------------ */

uint32_t em_pick_lanes(int64_t inner) {
  if (inner >= EM_LANES) return EM_LANES;
  if (inner >= 3) {
    uint32_t l = 4;
    while ((int64_t)l < inner) l *= 2;
    return l;
  }
  return 0;
}

ssa_t em_for_open(emitter_t *em, dimv_t lo, dimv_t hi, int64_t step) {
  ssa_t iv = em_fresh(em);
  ssa_t l = em_dimv_ssa(em, lo), h = em_dimv_ssa(em, hi), s = em_cidx(em, step);
  em_open(em, "scf.for %s = %s to %s step %s {", iv.s, l.s, h.s, s.s);
  return iv;
}

void em_nest(emitter_t *em, uint32_t rank, const dimv_t *ext, uint32_t lanes,
             nest_body_fn body, void *ctx) {
  if (!EM_OK(em)) return;
  nest_t n;
  memset(&n, 0, sizeof n);
  n.rank = rank;
  if (rank == 0) {
    body(em, &n, ctx);
    return;
  }
  int opened = 0;
  for (uint32_t d = 0; d + 1 < rank; d++) {
    if (!ext[d].dynamic && ext[d].c == 1) {
      n.idx[d] = em_cidx(em, 0);
    } else {
      n.idx[d] = em_for_open(em, em_dimc(0), ext[d], 1);
      opened++;
    }
  }
  dimv_t last = ext[rank - 1];
  uint32_t k = rank - 1;
  if (!lanes) {
    if (!last.dynamic && last.c == 1) {
      n.idx[k] = em_cidx(em, 0);
      body(em, &n, ctx);
    } else {
      n.idx[k] = em_for_open(em, em_dimc(0), last, 1);
      body(em, &n, ctx);
      em_close(em, "}");
    }
  } else if (!last.dynamic) {
    int64_t main = last.c / lanes * lanes, rem = last.c - main;
    n.lanes = lanes;
    if (main == lanes) {
      n.idx[k] = em_cidx(em, 0);
      body(em, &n, ctx);
    } else if (main > 0) {
      n.idx[k] = em_for_open(em, em_dimc(0), em_dimc(main), lanes);
      body(em, &n, ctx);
      em_close(em, "}");
    }
    if (rem > 0) {
      n.idx[k] = em_cidx(em, main);
      n.masked = true;
      n.tail = (uint32_t)rem;
      n.mask = em_fresh(em);
      em_line(em, "%s = vector.constant_mask [%lld] : vector<%uxi1>", n.mask.s, (long long)rem,
              lanes);
      body(em, &n, ctx);
    }
  } else {
    n.lanes = lanes;
    ssa_t l = em_cidx(em, lanes);
    ssa_t q = em_op2(em, "arith.divui", last.s, l, "index");
    ssa_t main = em_imul(em, q, l);
    n.idx[k] = em_for_open(em, em_dimc(0), em_dims(main), lanes);
    body(em, &n, ctx);
    em_close(em, "}");
    ssa_t rem = em_op2(em, "arith.subi", last.s, main, "index");
    ssa_t any = em_cmp(em, "cmpi", "ugt", rem, em_cidx(em, 0), "index");
    em_open(em, "scf.if %s {", any.s);
    n.idx[k] = main;
    n.masked = true;
    n.mask = em_fresh(em);
    em_line(em, "%s = vector.create_mask %s : vector<%uxi1>", n.mask.s, rem.s, lanes);
    body(em, &n, ctx);
    em_close(em, "}");
  }
  while (opened-- > 0) em_close(em, "}");
}

/* ---- Frame slots' lifetimes -------------------------------------------------- */

static bool push_ref(emitter_t *em, slot_ref_t r) {
  if (em->num_slot_refs == em->slot_refs_cap) {
    uint32_t cap = em->slot_refs_cap ? 2 * em->slot_refs_cap : 64;
    slot_ref_t *p = tsr_realloc(em->slot_refs, (size_t)cap * sizeof *p);
    if (!p) return false;
    em->slot_refs = p;
    em->slot_refs_cap = cap;
  }
  em->slot_refs[em->num_slot_refs++] = r;
  return true;
}

void em_hold(emitter_t *em, const tsr_value_t *v, uint32_t root) {
  if (root >= em->num_roots || !em->roots[root].slot || !em->last_user) return;
  uint32_t k = em->roots[root].slot - 1;
  frame_slot_t *s = &em->slots[k];
  if (!s->releasable || s->pinned) return;
  const tsr_region_t *home = v->def ? v->def->parent : v->owner;
  const tsr_op_t *after = em->last_user[v->id];
  if (!after && v->def) after = v->def; /* no use: dead after its definition */
  if (!s->region) s->region = home;
  /* A holder of another region (a loop's result holding its carry, ...) or
   * without an op to release it after: the slot is kept for good. */
  if (!home || home != s->region || !after || em->escapes[v->id]) {
    s->pinned = true;
    return;
  }
  if (!push_ref(em, (slot_ref_t){after, k})) {
    em_fail(em, TSR_OOM());
    return;
  }
  s->refs++;
}

static void hold_leaves(emitter_t *em, const tsr_value_t *v, const expr_t *e) {
  if (!e) return;
  if (e->kind == EX_MEM || e->kind == EX_BCAST) em_hold(em, v, e->mem.root);
  if (e->kind == EX_MEM) hold_leaves(em, v, e->mask);
  for (uint32_t i = 0; i < e->nargs; i++) hold_leaves(em, v, e->args[i]);
}

void em_hold_expr(emitter_t *em, const tsr_value_t *v, const expr_t *e) {
  hold_leaves(em, v, e);
}

static bool push_slot(emitter_t *em, uint32_t **a, uint32_t *n, uint32_t *cap, uint32_t slot) {
  if (*n == *cap) {
    uint32_t c = *cap ? 2 * *cap : 64;
    uint32_t *f = tsr_realloc(*a, (size_t)c * sizeof *f);
    if (!f) {
      em_fail(em, TSR_OOM());
      return false;
    }
    *a = f;
    *cap = c;
  }
  (*a)[(*n)++] = slot;
  return true;
}

void em_release_after(emitter_t *em, const tsr_op_t *op) {
  for (uint32_t i = 0; i < em->num_slot_refs;) {
    slot_ref_t r = em->slot_refs[i];
    if (r.after != op) {
      i++;
      continue;
    }
    em->slot_refs[i] = em->slot_refs[--em->num_slot_refs];
    frame_slot_t *s = &em->slots[r.slot];
    if (--s->refs > 0 || s->pinned) continue;
    /* While a group is pending its members are not computed yet: a slot
     * read by one of them must not be written by a later one's buffer. */
    bool ok = em->group.n
                  ? push_slot(em, &em->held_slots, &em->num_held, &em->held_cap, r.slot)
                  : push_slot(em, &em->free_slots, &em->num_free, &em->free_cap, r.slot);
    if (!ok) return;
  }
}

void em_release_held(emitter_t *em) {
  for (uint32_t i = 0; i < em->num_held; i++)
    if (!push_slot(em, &em->free_slots, &em->num_free, &em->free_cap, em->held_slots[i])) return;
  em->num_held = 0;
}
