/* The IR verifier: checks every rule of docs/ir.md "Verifier rules" (and the
 * type rule of every op in ir/ops.def) so that a verified module cannot crash
 * the interpreter. It trusts nothing in the module: counts are checked before
 * the arrays they size are read, so any module the builder can make yields
 * diagnostics, never a crash. */
#include <float.h>
#include <math.h>
#include <stdio.h>

#include "base/hashtable.h"

#include "ir/ir.h"

enum {
  DIAG_LIMIT = 50,
  MAX_DEPTH = 256, /* region nesting; the interpreter recurses per region */
};
/* Keeps the checks' large frames (message buffers) out of the recursion
 * verify_region -> verify_op -> verify_control -> verify_region. */
#if defined(__GNUC__)
#define NOINLINE __attribute__((noinline))
#else
#define NOINLINE
#endif
#define MAX_VALUE_ELEMENTS (INT64_C(1) << 31) /* per block value or VMEM/SMEM ref */
#define MAX_ARRAY_BYTES (INT64_C(1) << 40)    /* per HBM array */

/* ---- Verifier state --------------------------------------------------------- */

/* Where a value is defined. */
typedef enum zone {
  ZONE_KERNEL, /* a kernel operand's ref: the body sees all, maps only prefetch */
  ZONE_BODY,   /* the kernel body or a region nested in it */
  ZONE_MAP,    /* an index map (decl says whose) */
} zone_t;

/* Visibility while walking: a value becomes visible at its definition and
 * stops being visible when its region ends. */
typedef enum vis { VIS_UNREACHED, VIS_VISIBLE, VIS_ENDED } vis_t;

typedef struct value_info {
  const tsr_value_t *value; /* the value with this id; NULL: none defined */
  uint8_t zone;             /* zone_t */
  uint8_t vis;              /* vis_t */
  bool type_ok;             /* the type is well formed (safe to measure) */
  uint32_t decl;            /* ZONE_KERNEL: its decl; ZONE_MAP: the map's decl */
} value_info_t;

typedef struct verifier {
  tsr_diag_list_t diags;
  const tsr_kernel_t *kernel;
  value_info_t *values; /* by value id, num_values entries */
  uint32_t num_values;
  int32_t map_decl;     /* the decl whose index map is being walked, -1: body */
} verifier_t;

/* What ends a region and what it yields. */
typedef enum region_kind {
  REGION_BODY,  /* the kernel body: no terminator */
  REGION_MAP,   /* an index map: yield of one i32 per array dimension */
  REGION_YIELD, /* for/if/scoped/while body: yield of the owner's results */
  REGION_COND,  /* while condition: condition of an i1 */
} region_kind_t;

typedef struct region_ctx {
  region_kind_t kind;
  const tsr_op_t *owner; /* REGION_YIELD/COND: the control op */
  const char *name;      /* "body", "then region", ... */
  uint32_t map_rank;     /* REGION_MAP: values to yield */
  uint32_t depth;
} region_ctx_t;

/* ---- Text helpers ------------------------------------------------------------- */

/* A small fixed buffer for one formatted type or index, used inside a single
 * diagnostic: TYPE_TEXT(&t) expands to a temporary that lives for the
 * enclosing block. */
typedef struct tbuf {
  char s[224];
  size_t len;
} tbuf_t;

static void TSR_PRINTF(2, 3) bput(tbuf_t *b, const char *fmt, ...) {
  if (b->len >= sizeof b->s - 1) return;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(b->s + b->len, sizeof b->s - b->len, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  b->len += (size_t)n;
  if (b->len > sizeof b->s - 1) b->len = sizeof b->s - 1;
}

/* "[8, 128]"; with `squeezed`, TSR_SQUEEZED entries print as "squeezed". */
static void put_dims(tbuf_t *b, const int64_t *dims, uint32_t rank, bool squeezed) {
  bput(b, "[");
  for (uint32_t i = 0; i < rank && b->len < sizeof b->s - 1; i++) {
    if (squeezed && dims[i] == TSR_SQUEEZED)
      bput(b, "%ssqueezed", i ? ", " : "");
    else
      bput(b, "%s%lld", i ? ", " : "", (long long)dims[i]);
  }
  bput(b, "]");
}

/* The type as docs/ir.md writes it (tsr_type_print's format), safe on any
 * bytes: unknown kinds, dtypes and ranks print as such. */
static const char *type_text(tbuf_t *b, const tsr_type_t *t) {
  uint32_t rank = t->rank > TSR_MAX_RANK ? TSR_MAX_RANK : t->rank;
  switch (t->kind) {
    case TSR_TYPE_SCALAR:
      bput(b, "%s", tsr_dtype_name((tsr_dtype_t)t->dtype));
      break;
    case TSR_TYPE_VECTOR:
      bput(b, "%s", tsr_dtype_name((tsr_dtype_t)t->dtype));
      put_dims(b, t->dims, rank, false);
      break;
    case TSR_TYPE_REF:
      bput(b, "%s %s", tsr_space_name((tsr_space_t)t->space),
           tsr_dtype_name((tsr_dtype_t)t->dtype));
      if (rank) put_dims(b, t->dims, rank, false);
      break;
    case TSR_TYPE_SEM:
      bput(b, "%s", t->dtype == TSR_SEM_DMA ? "dma_sem" : "sem");
      if (rank) put_dims(b, t->dims, rank, false);
      break;
    default:
      bput(b, "<type kind %u>", t->kind);
      break;
  }
  return b->s;
}
#define TYPE_TEXT(t) type_text(&(tbuf_t){.len = 0}, (t))

static const char *dims_text(tbuf_t *b, const int64_t *dims, uint32_t rank) {
  put_dims(b, dims, rank > TSR_MAX_RANK ? TSR_MAX_RANK : rank, true);
  return b->s;
}
#define DIMS_TEXT(d, r) dims_text(&(tbuf_t){.len = 0}, (d), (r))

static const char *vname(const tsr_value_t *value) {
  return value && value->name ? value->name : "?";
}

static const char *role_name(uint32_t role) {
  static const char *const names[] = {"prefetch", "input", "output", "scratch"};
  return role < TSR_ARRAY_SIZE(names) ? names[role] : "operand";
}

static const char *semantics_name(uint32_t s) {
  static const char *const names[] = {"arbitrary", "parallel", "core_parallel"};
  return s < TSR_ARRAY_SIZE(names) ? names[s] : "?";
}

/* "a float", "an integer or i1", ...: the element classes in FLAGS. */
static const char *class_text(uint32_t flags) {
  switch (flags & (TSR_F_FLT | TSR_F_INT | TSR_F_BOOL)) {
    case TSR_F_FLT: return "a float";
    case TSR_F_INT: return "an integer";
    case TSR_F_BOOL: return "an i1";
    case TSR_F_FLT | TSR_F_INT: return "a float or integer";
    case TSR_F_INT | TSR_F_BOOL: return "an integer or i1";
    case TSR_F_FLT | TSR_F_BOOL: return "a float or i1";
    default: return "any";
  }
}

/* ---- Diagnostics -------------------------------------------------------------- */

static void TSR_PRINTF(3, 4) report(verifier_t *v, tsr_loc_t loc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  tsr_diag_vadd(&v->diags, loc, fmt, ap);
  va_end(ap);
}

/* report() with a "kernel @name: " prefix, for header-level rules. */
static void TSR_PRINTF(3, 4) kreport(verifier_t *v, tsr_loc_t loc, const char *fmt, ...) {
  tsr_strbuf_t sb;
  tsr_strbuf_initialize(&sb);
  va_list ap;
  va_start(ap, fmt);
  tsr_strbuf_vprintf(&sb, fmt, ap);
  va_end(ap);
  report(v, loc, "kernel @%s: %s", v->kernel->name ? v->kernel->name : "?",
         sb.data ? sb.data : "");
  if (sb.failed) v->diags.text.failed = true; /* surfaces as out of memory */
  tsr_strbuf_deinitialize(&sb);
}

static const char *mnemonic(const tsr_op_t *op) {
  return op->opcode < TSR_OP_COUNT ? tsr_op_table[op->opcode].mnemonic : "?";
}

/* ---- Types -------------------------------------------------------------------- */

static bool is_value_type(const tsr_type_t *t) {
  return t->kind == TSR_TYPE_SCALAR || t->kind == TSR_TYPE_VECTOR;
}

static bool is_i32_scalar(const tsr_type_t *t) {
  return t->kind == TSR_TYPE_SCALAR && t->dtype == TSR_DTYPE_I32;
}

static bool is_32bit(uint32_t dtype) {
  return dtype == TSR_DTYPE_I32 || dtype == TSR_DTYPE_U32 || dtype == TSR_DTYPE_F32;
}

static tsr_dtype_class_t dclass(uint32_t dtype) {
  return tsr_dtype_class((tsr_dtype_t)dtype);
}

/* Element count of the dims, or -1 if it overflows int64. */
static int64_t count_elements(const int64_t *dims, uint32_t rank) {
  int64_t n = 1;
  for (uint32_t i = 0; i < rank; i++)
    if (!tsr_mul_i64(n, dims[i], &n)) return -1;
  return n;
}

static tsr_type_t same_shape(const tsr_type_t *shape, uint32_t dtype) {
  return shape && shape->kind == TSR_TYPE_VECTOR
             ? tsr_type_vector((tsr_dtype_t)dtype, shape->rank, shape->dims)
             : tsr_type_scalar((tsr_dtype_t)dtype);
}

/* Whether `t` is well formed: a known kind, dtype and space, rank <= 6,
 * dims >= 1, and a size the interpreter can hold (2^31 elements per block
 * value or VMEM/SMEM ref, 2^40 bytes per HBM ref). If not and `why` is
 * given, says why. */
static bool type_wellformed(const tsr_type_t *t, tbuf_t *why) {
  tbuf_t scratch = {.len = 0};
  if (!why) why = &scratch;
  if (t->kind > TSR_TYPE_SEM) {
    bput(why, "invalid type: unknown type kind %u", t->kind);
    return false;
  }
  if (t->rank > TSR_MAX_RANK) {
    bput(why, "invalid type: rank %u exceeds %d", t->rank, TSR_MAX_RANK);
    return false;
  }
  if (t->kind == TSR_TYPE_SEM ? t->dtype > TSR_SEM_DMA : t->dtype >= TSR_DTYPE_COUNT) {
    bput(why, "invalid type: unknown %s %u",
         t->kind == TSR_TYPE_SEM ? "semaphore kind" : "dtype", t->dtype);
    return false;
  }
  if (t->kind == TSR_TYPE_REF && t->space >= TSR_SPACE_COUNT) {
    bput(why, "invalid type: unknown memory space %u", t->space);
    return false;
  }
  if (t->kind == TSR_TYPE_SCALAR && t->rank != 0) {
    bput(why, "invalid type: a scalar has rank 0, found rank %u", t->rank);
    return false;
  }
  if (t->kind == TSR_TYPE_VECTOR && t->rank == 0) {
    bput(why, "invalid type: a block %s[] needs rank >= 1 (a scalar is written %s)",
         tsr_dtype_name((tsr_dtype_t)t->dtype), tsr_dtype_name((tsr_dtype_t)t->dtype));
    return false;
  }
  for (uint32_t i = 0; i < t->rank; i++) {
    if (t->dims[i] < 1) {
      bput(why, "invalid type %s: dimension %u is %lld, expected >= 1", TYPE_TEXT(t),
           i, (long long)t->dims[i]);
      return false;
    }
  }
  int64_t n = count_elements(t->dims, t->rank);
  if (t->kind == TSR_TYPE_REF &&
      (t->space == TSR_SPACE_HBM || t->space == TSR_SPACE_ANY)) {
    int64_t bytes;
    if (n < 0 || !tsr_mul_i64(n, (int64_t)tsr_dtype_size((tsr_dtype_t)t->dtype), &bytes) ||
        bytes > MAX_ARRAY_BYTES) {
      bput(why, "%s is more than 2^40 bytes", TYPE_TEXT(t));
      return false;
    }
  } else if (n < 0 || n > MAX_VALUE_ELEMENTS) {
    if (n < 0)
      bput(why, "%s has more than 2^63 elements, more than 2^31 per %s", TYPE_TEXT(t),
           t->kind == TSR_TYPE_REF ? "ref" : "value");
    else
      bput(why, "%s has %lld elements, more than 2^31 per %s", TYPE_TEXT(t),
           (long long)n, t->kind == TSR_TYPE_REF ? "ref" : "value");
    return false;
  }
  return true;
}

/* ---- Values and visibility ------------------------------------------------------ */

/* The info of a value of this kernel; NULL for foreign or missing values. */
static value_info_t *info_of(verifier_t *v, const tsr_value_t *value) {
  if (!value || value->id >= v->num_values) return NULL;
  value_info_t *vi = &v->values[value->id];
  return vi->value == value ? vi : NULL;
}

/* Whether `vi` may be used where the walk currently is. */
static bool is_visible(const verifier_t *v, const value_info_t *vi) {
  if (vi->zone == ZONE_KERNEL)
    return v->map_decl < 0 || v->kernel->decls[vi->decl].role == TSR_ROLE_PREFETCH;
  return vi->vis == VIS_VISIBLE;
}

/* A value whose type rules can run: this kernel's, visible, well typed. */
static bool usable(verifier_t *v, const tsr_value_t *value) {
  value_info_t *vi = info_of(v, value);
  return vi && is_visible(v, vi) && vi->type_ok;
}

/* A definition (result or region argument) whose type can be inspected. */
static bool def_ok(verifier_t *v, const tsr_value_t *value) {
  value_info_t *vi = info_of(v, value);
  return vi && vi->type_ok;
}

static const char *decl_name(const verifier_t *v, uint32_t decl) {
  return decl < v->kernel->num_decls ? vname(v->kernel->decls[decl].ref) : "?";
}

/* Checks operand `i` of `op`: present, of this kernel, visible. Returns
 * whether its type may be inspected. */
static bool check_use(verifier_t *v, const tsr_op_t *op, uint32_t i) {
  const char *m = mnemonic(op);
  const tsr_value_t *value = op->operands[i];
  if (!value) {
    report(v, op->loc, "'%s' operand #%u is missing", m, i + 1);
    return false;
  }
  value_info_t *vi = info_of(v, value);
  if (!vi) {
    report(v, op->loc,
           "'%s' operand #%u (%%%s) does not belong to kernel @%s (was it built "
           "in another kernel?)",
           m, i + 1, vname(value), v->kernel->name);
    return false;
  }
  if (is_visible(v, vi)) return vi->type_ok;
  bool in_map = v->map_decl >= 0;
  if (vi->zone == ZONE_KERNEL) {
    report(v, op->loc,
           "'%s' operand #%u (%%%s) is not visible in the index map of %%%s: index "
           "maps can only use their arguments and prefetch refs",
           m, i + 1, vname(value), decl_name(v, (uint32_t)v->map_decl));
  } else if (vi->zone == ZONE_BODY && in_map) {
    report(v, op->loc,
           "'%s' operand #%u (%%%s) is defined in the kernel body and not visible "
           "in the index map of %%%s",
           m, i + 1, vname(value), decl_name(v, (uint32_t)v->map_decl));
  } else if (vi->zone == ZONE_MAP && !in_map) {
    report(v, op->loc,
           "'%s' operand #%u (%%%s) is defined in the index map of %%%s and not "
           "visible in the kernel body",
           m, i + 1, vname(value), decl_name(v, vi->decl));
  } else if (vi->zone == ZONE_MAP && vi->decl != (uint32_t)v->map_decl) {
    report(v, op->loc,
           "'%s' operand #%u (%%%s) is defined in the index map of %%%s and not "
           "visible in the index map of %%%s",
           m, i + 1, vname(value), decl_name(v, vi->decl),
           decl_name(v, (uint32_t)v->map_decl));
  } else if (vi->vis == VIS_UNREACHED) {
    report(v, op->loc, "'%s' operand #%u (%%%s) is used before its definition", m,
           i + 1, vname(value));
  } else {
    report(v, op->loc,
           "'%s' operand #%u (%%%s) is not visible here: it is defined in a region "
           "that does not enclose this use",
           m, i + 1, vname(value));
  }
  return false;
}

/* Checks a definition (`what` names it in messages): of this kernel, defined
 * once, well typed. Returns whether its type may be inspected. */
static bool check_def(verifier_t *v, tsr_loc_t loc, const char *what,
                      const tsr_value_t *value) {
  value_info_t *vi = info_of(v, value);
  if (!vi) {
    report(v, loc, "%s does not belong to kernel @%s (was it built in another kernel?)",
           what, v->kernel->name);
    return false;
  }
  if (vi->vis != VIS_UNREACHED) {
    report(v, loc, "%s is defined twice", what);
    return false;
  }
  tbuf_t why = {.len = 0};
  if (!type_wellformed(&value->type, &why)) {
    report(v, loc, "%s: %s", what, why.s);
    return false;
  }
  return true;
}

static void set_vis(verifier_t *v, const tsr_value_t *value, vis_t vis) {
  value_info_t *vi = info_of(v, value);
  if (vi && vi->zone != ZONE_KERNEL) vi->vis = (uint8_t)vis;
}

/* ---- Pre-pass: where every value is defined --------------------------------------- */

static void collect_value(verifier_t *v, const tsr_value_t *value, zone_t zone,
                          uint32_t decl) {
  if (!value || value->id >= v->num_values) return;
  value_info_t *vi = &v->values[value->id];
  if (vi->value) return; /* another value with this id is foreign: info_of fails */
  vi->value = value;
  vi->zone = (uint8_t)zone;
  vi->decl = decl;
  vi->type_ok = type_wellformed(&value->type, NULL);
}

/* Regions of `op` that exist in memory: the op table sizes the array. */
static uint32_t walkable_regions(const tsr_op_t *op) {
  if (op->opcode >= TSR_OP_COUNT || !op->regions) return 0;
  uint32_t n = (uint32_t)tsr_op_table[op->opcode].num_regions;
  return op->num_regions < n ? op->num_regions : n;
}

static void collect_region(verifier_t *v, const tsr_region_t *r, zone_t zone,
                           uint32_t decl, uint32_t depth) {
  if (depth > MAX_DEPTH) return;
  for (uint32_t i = 0; r->args && i < r->num_args; i++)
    collect_value(v, r->args[i], zone, decl);
  for (const tsr_op_t *op = r->first; op; op = op->next) {
    for (uint32_t i = 0; op->results && i < op->num_results; i++)
      collect_value(v, op->results[i], zone, decl);
    uint32_t nr = walkable_regions(op);
    for (uint32_t i = 0; i < nr; i++)
      collect_region(v, &op->regions[i], zone, decl, depth + 1);
  }
}

/* ---- Views: indices of load, store and slice ------------------------------------- */

/* "5", "%i", ":", "0:8", "0:8:2", "ds(%i, 8)", "ds(4, 8, 2)". */
static const char *index_text(tbuf_t *b, const tsr_op_t *op, const tsr_index_t *ix) {
  char start[160];
  if (ix->operand >= 0) {
    const tsr_value_t *s = (uint32_t)ix->operand < op->num_operands
                               ? op->operands[ix->operand]
                               : NULL;
    snprintf(start, sizeof start, "%%%s", vname(s));
  } else {
    snprintf(start, sizeof start, "%lld", (long long)ix->start);
  }
  switch (ix->kind) {
    case TSR_INDEX_FULL: bput(b, ":"); break;
    case TSR_INDEX_POINT: bput(b, "%s", start); break;
    case TSR_INDEX_SLICE:
      bput(b, "slice %lld:%lld", (long long)ix->start, (long long)ix->stop);
      if (ix->stride != 1) bput(b, ":%lld", (long long)ix->stride);
      break;
    case TSR_INDEX_DS:
      bput(b, "ds(%s, %lld", start, (long long)ix->size);
      if (ix->stride != 1) bput(b, ", %lld", (long long)ix->stride);
      bput(b, ")");
      break;
    default: bput(b, "<index kind %u>", ix->kind); break;
  }
  return b->s;
}
#define INDEX_TEXT(op, ix) index_text(&(tbuf_t){.len = 0}, (op), (ix))

/* Checks the indices [first, first + count) of `op` as a view of `base` (a
 * ref, block or semaphore array of rank `count`, named `base_name`; messages
 * number the indices within the view): dynamic starts are operands
 * [first_dyn, end_dyn) holding i32 scalars, each used by one index of the
 * op; static parts lie within the dims. Writes the view type (dims kept by
 * non-point indices; a scalar if none). Returns false after reporting. */
static bool check_view(verifier_t *v, const tsr_op_t *op, const char *base_name,
                       const tsr_type_t *base, uint32_t first, uint32_t count,
                       uint32_t first_dyn, uint32_t end_dyn, bool allow_dynamic,
                       tsr_type_t *out_view) {
  const char *m = mnemonic(op);
  bool ok = true;
  int64_t view_dims[TSR_MAX_RANK];
  uint32_t view_rank = 0;
  for (uint32_t d = 0; d < count; d++) {
    const tsr_index_t *ix = &op->indices[first + d];
    int64_t dim = base->dims[d];
    bool dynamic = ix->operand >= 0;
    if (ix->kind > TSR_INDEX_DS) {
      report(v, op->loc, "'%s' index %u of %%%s: unknown index kind %u", m, d,
             base_name, ix->kind);
      ok = false;
      continue;
    }
    if (dynamic && (ix->kind == TSR_INDEX_FULL || ix->kind == TSR_INDEX_SLICE)) {
      report(v, op->loc, "'%s' index %u of %%%s: '%s' takes no operand, found operand #%d",
             m, d, base_name, ix->kind == TSR_INDEX_FULL ? ":" : "a:b", ix->operand + 1);
      ok = false;
      continue;
    }
    if (dynamic) {
      uint32_t pos = (uint32_t)ix->operand;
      if (!allow_dynamic) {
        report(v, op->loc,
               "'%s' index %u of %%%s: dynamic indices are not allowed (slice takes "
               "static indices; load from a ref for dynamic ones)",
               m, d, base_name);
        ok = false;
        continue;
      }
      if (pos < first_dyn || pos >= end_dyn) {
        report(v, op->loc,
               "'%s' index %u of %%%s refers to operand #%u, which is not an index "
               "operand",
               m, d, base_name, pos + 1);
        ok = false;
        continue;
      }
      bool dup = false;
      for (uint32_t e = 0; e < first + d && !dup; e++) {
        if (op->indices[e].operand != ix->operand) continue;
        if (e >= first)
          report(v, op->loc,
                 "'%s' index %u of %%%s uses operand #%u, already used by index %u", m,
                 d, base_name, pos + 1, e - first);
        else
          report(v, op->loc,
                 "'%s' index %u of %%%s uses operand #%u, already used by the index of "
                 "another view",
                 m, d, base_name, pos + 1);
        dup = true;
      }
      if (dup) {
        ok = false;
        continue;
      }
      const tsr_value_t *s = op->operands[pos];
      if (usable(v, s) && !is_i32_scalar(&s->type)) {
        report(v, op->loc, "'%s' index %u of %%%s: operand #%u (%%%s): expected i32, found %s",
               m, d, base_name, pos + 1, vname(s), TYPE_TEXT(&s->type));
        ok = false;
      }
    }
    switch (ix->kind) {
      case TSR_INDEX_FULL:
        view_dims[view_rank++] = dim;
        break;
      case TSR_INDEX_POINT:
        if (!dynamic && (ix->start < 0 || ix->start >= dim)) {
          report(v, op->loc, "'%s' index %u of %%%s: %lld is out of range for dimension %lld",
                 m, d, base_name, (long long)ix->start, (long long)dim);
          ok = false;
        }
        break;
      case TSR_INDEX_SLICE: {
        const char *text = INDEX_TEXT(op, ix);
        if (ix->stride < 1) {
          report(v, op->loc, "'%s' index %u of %%%s: %s has stride %lld, expected >= 1", m,
                 d, base_name, text, (long long)ix->stride);
          ok = false;
        } else if (ix->start < 0) {
          report(v, op->loc, "'%s' index %u of %%%s: %s starts before 0", m, d, base_name,
                 text);
          ok = false;
        } else if (ix->stop > dim) {
          report(v, op->loc, "'%s' index %u of %%%s: %s exceeds dimension %lld", m, d,
                 base_name, text, (long long)dim);
          ok = false;
        } else if (ix->start >= ix->stop) {
          report(v, op->loc, "'%s' index %u of %%%s: %s is empty", m, d, base_name, text);
          ok = false;
        } else {
          int64_t size = (ix->stop - ix->start + ix->stride - 1) / ix->stride;
          if (ix->size != size) {
            report(v, op->loc, "'%s' index %u of %%%s: %s has size %lld, expected %lld", m,
                   d, base_name, text, (long long)ix->size, (long long)size);
            ok = false;
          }
          view_dims[view_rank++] = size;
        }
        break;
      }
      case TSR_INDEX_DS: {
        const char *text = INDEX_TEXT(op, ix);
        int64_t extent;
        if (ix->size < 1 || ix->stride < 1) {
          report(v, op->loc, "'%s' index %u of %%%s: %s has %s %lld, expected >= 1", m, d,
                 base_name, text, ix->size < 1 ? "size" : "stride",
                 (long long)(ix->size < 1 ? ix->size : ix->stride));
          ok = false;
          break;
        }
        if (ix->size > dim) {
          report(v, op->loc, "'%s' index %u of %%%s: %s is larger than dimension %lld", m, d,
                 base_name, text, (long long)dim);
          ok = false;
          break;
        }
        if (!tsr_mul_i64(ix->size - 1, ix->stride, &extent) || extent >= dim) {
          report(v, op->loc,
                 "'%s' index %u of %%%s: %s spans more elements than dimension %lld", m, d,
                 base_name, text, (long long)dim);
          ok = false;
          break;
        }
        extent += 1; /* elements from the first to the last one touched */
        if (!dynamic && ix->start < 0) {
          report(v, op->loc, "'%s' index %u of %%%s: %s starts before 0", m, d, base_name,
                 text);
          ok = false;
        } else if (!dynamic && ix->start > dim - extent) {
          report(v, op->loc, "'%s' index %u of %%%s: %s exceeds dimension %lld", m, d,
                 base_name, text, (long long)dim);
          ok = false;
        }
        view_dims[view_rank++] = ix->size;
        break;
      }
      default:
        break;
    }
  }
  *out_view = view_rank ? tsr_type_vector((tsr_dtype_t)base->dtype, view_rank, view_dims)
                        : tsr_type_scalar((tsr_dtype_t)base->dtype);
  return ok;
}

/* Every operand in [first_dyn, end_dyn) is the start of some index of `op`
 * (check_view has checked that none is used twice). */
static bool check_index_operands_used(verifier_t *v, const tsr_op_t *op, uint32_t first_dyn,
                                      uint32_t end_dyn) {
  bool ok = true;
  for (uint32_t pos = first_dyn; pos < end_dyn; pos++) {
    bool used = false;
    for (uint32_t d = 0; d < op->num_indices && !used; d++)
      used = op->indices[d].operand >= 0 && (uint32_t)op->indices[d].operand == pos;
    if (!used) {
      report(v, op->loc, "'%s' operand #%u (%%%s) is not used by any index", mnemonic(op),
             pos + 1, vname(op->operands[pos]));
      ok = false;
    }
  }
  return ok;
}

/* All indices of `op` as one view of `base` (load, store, slice). */
static bool check_indices(verifier_t *v, const tsr_op_t *op, const char *base_name,
                          const tsr_type_t *base, uint32_t first_dyn,
                          uint32_t end_dyn, bool allow_dynamic, tsr_type_t *out_view) {
  if (!check_view(v, op, base_name, base, 0, op->num_indices, first_dyn, end_dyn,
                  allow_dynamic, out_view))
    return false;
  return !allow_dynamic || check_index_operands_used(v, op, first_dyn, end_dyn);
}

/* ---- Per-op type rules -------------------------------------------------------------
 * Each runs only when the arity matches the op table, every operand is
 * visible and well typed, refs/semaphores appear only where allowed, and
 * every result is a well-typed scalar or block. */

/* result #i must have type `want`; `note` explains where `want` comes from. */
static bool expect_result(verifier_t *v, const tsr_op_t *op, uint32_t i,
                          const tsr_type_t *want, const char *note) {
  const tsr_value_t *r = op->results[i];
  if (tsr_type_equal(&r->type, want)) return true;
  report(v, op->loc, "'%s' result #%u (%%%s): expected %s%s, found %s", mnemonic(op), i + 1,
         vname(r), TYPE_TEXT(want), note, TYPE_TEXT(&r->type));
  return false;
}

static bool expect_operand(verifier_t *v, const tsr_op_t *op, uint32_t i,
                           const tsr_type_t *want, const char *note) {
  const tsr_value_t *a = op->operands[i];
  if (tsr_type_equal(&a->type, want)) return true;
  report(v, op->loc, "'%s' operand #%u (%%%s%s): expected %s, found %s", mnemonic(op),
         i + 1, vname(a), note, TYPE_TEXT(want), TYPE_TEXT(&a->type));
  return false;
}

/* operand #i must be a block (vector). */
static bool expect_block(verifier_t *v, const tsr_op_t *op, uint32_t i) {
  const tsr_value_t *a = op->operands[i];
  if (a->type.kind == TSR_TYPE_VECTOR) return true;
  report(v, op->loc, "'%s' operand #%u (%%%s): expected a block, found %s", mnemonic(op),
         i + 1, vname(a), TYPE_TEXT(&a->type));
  return false;
}

static bool expect_class(verifier_t *v, const tsr_op_t *op, uint32_t i, uint32_t flags) {
  const tsr_value_t *a = op->operands[i];
  if (tsr_op_flags_accept(flags, (tsr_dtype_t)a->type.dtype)) return true;
  report(v, op->loc, "'%s' operand #%u (%%%s): expected %s type, found %s", mnemonic(op),
         i + 1, vname(a), class_text(flags), TYPE_TEXT(&a->type));
  return false;
}

/* The axis attribute (ints[0]) of a rank-`rank` operand is in range. */
static bool expect_axis(verifier_t *v, const tsr_op_t *op, uint32_t rank, int64_t *out_axis) {
  int64_t axis = op->ints[0];
  if (axis >= 0 && axis < (int64_t)rank) {
    *out_axis = axis;
    return true;
  }
  report(v, op->loc, "'%s' axis %lld is out of range for rank %u", mnemonic(op),
         (long long)axis, rank);
  return false;
}

/* Operands [first, first + n) mixed elementwise: every block has the shape
 * of the first block, scalars broadcast, and operand first+i has dtype
 * dtypes[i]. *out_shape: the first block operand's type, NULL if none. */
static bool elementwise_operands(verifier_t *v, const tsr_op_t *op, uint32_t first,
                                 uint32_t n, const uint8_t *dtypes,
                                 const tsr_type_t **out_shape) {
  const tsr_type_t *shape = NULL;
  for (uint32_t i = first; i < first + n && !shape; i++)
    if (op->operands[i]->type.kind == TSR_TYPE_VECTOR) shape = &op->operands[i]->type;
  bool ok = true;
  for (uint32_t i = first; i < first + n; i++) {
    const tsr_type_t *t = &op->operands[i]->type;
    tsr_type_t want = same_shape(t->kind == TSR_TYPE_VECTOR ? shape : NULL,
                                 dtypes[i - first]);
    ok &= expect_operand(v, op, i, &want, "");
  }
  *out_shape = shape;
  return ok;
}

static void rule_elementwise(verifier_t *v, const tsr_op_t *op, uint32_t flags,
                             bool compare) {
  if (!expect_class(v, op, 0, flags)) return;
  uint8_t dtypes[2] = {op->operands[0]->type.dtype, op->operands[0]->type.dtype};
  const tsr_type_t *shape;
  if (!elementwise_operands(v, op, 0, op->num_operands, dtypes, &shape)) return;
  tsr_type_t want = same_shape(shape, compare ? TSR_DTYPE_I1 : dtypes[0]);
  expect_result(v, op, 0, &want, "");
}

static void rule_select(verifier_t *v, const tsr_op_t *op) {
  uint8_t dtypes[3] = {TSR_DTYPE_I1, op->operands[1]->type.dtype,
                       op->operands[1]->type.dtype};
  const tsr_type_t *shape;
  if (!elementwise_operands(v, op, 0, 3, dtypes, &shape)) return;
  tsr_type_t want = same_shape(shape, dtypes[1]);
  expect_result(v, op, 0, &want, "");
}

/* convert and bitcast: the result has the operand's shape. */
static void rule_cast(verifier_t *v, const tsr_op_t *op, bool bitcast) {
  const tsr_type_t *a = &op->operands[0]->type, *r = &op->results[0]->type;
  const char *m = mnemonic(op);
  tsr_type_t want = same_shape(a, r->dtype);
  if (!tsr_type_equal(r, &want)) {
    report(v, op->loc, "'%s' result #1 (%%%s): expected the shape of operand #1 (%s), found %s",
           m, vname(op->results[0]), TYPE_TEXT(a), TYPE_TEXT(r));
    return;
  }
  if (!bitcast) return;
  if (a->dtype == TSR_DTYPE_I1 || r->dtype == TSR_DTYPE_I1) {
    report(v, op->loc, "'%s' cannot reinterpret i1 (found %s to %s; use convert)", m,
           TYPE_TEXT(a), TYPE_TEXT(r));
    return;
  }
  size_t as = tsr_dtype_size((tsr_dtype_t)a->dtype), rs = tsr_dtype_size((tsr_dtype_t)r->dtype);
  if (as != rs)
    report(v, op->loc,
           "'%s' result #1 (%%%s): expected a %zu-byte dtype (as operand #1, %s), found %s",
           m, vname(op->results[0]), as, TYPE_TEXT(a), TYPE_TEXT(r));
}

static void rule_iota(verifier_t *v, const tsr_op_t *op) {
  const tsr_type_t *r = &op->results[0]->type;
  if (r->kind != TSR_TYPE_VECTOR || r->dtype == TSR_DTYPE_I1) {
    report(v, op->loc,
           "'iota' result #1 (%%%s): expected a block of an integer or float dtype, found %s",
           vname(op->results[0]), TYPE_TEXT(r));
    return;
  }
  int64_t dim = op->ints[0];
  if (dim < 0 || dim >= r->rank)
    report(v, op->loc, "'iota' dimension %lld is out of range for %s (rank %u)",
           (long long)dim, TYPE_TEXT(r), r->rank);
}

static void rule_broadcast(verifier_t *v, const tsr_op_t *op) {
  const tsr_type_t *a = &op->operands[0]->type, *r = &op->results[0]->type;
  const char *res = vname(op->results[0]);
  if (r->dtype != a->dtype) {
    report(v, op->loc, "'broadcast' result #1 (%%%s): expected dtype %s (as operand #1), found %s",
           res, tsr_dtype_name((tsr_dtype_t)a->dtype), TYPE_TEXT(r));
    return;
  }
  if (a->kind == TSR_TYPE_SCALAR) return; /* a scalar broadcasts to anything */
  if (r->rank < a->rank) {
    report(v, op->loc,
           "'broadcast' result #1 (%%%s): cannot broadcast operand #1 (%s) to %s: rank %u "
           "is smaller than %u",
           res, TYPE_TEXT(a), TYPE_TEXT(r), r->rank, a->rank);
    return;
  }
  uint32_t lead = r->rank - a->rank;
  for (uint32_t i = 0; i < a->rank; i++) {
    int64_t ad = a->dims[i], rd = r->dims[lead + i];
    if (ad != 1 && ad != rd) {
      report(v, op->loc,
             "'broadcast' result #1 (%%%s): cannot broadcast operand #1 (%s) to %s: dim %u "
             "is %lld, expected 1 or %lld",
             res, TYPE_TEXT(a), TYPE_TEXT(r), i, (long long)ad, (long long)rd);
      return;
    }
  }
}

static void rule_reshape(verifier_t *v, const tsr_op_t *op) {
  const tsr_type_t *a = &op->operands[0]->type, *r = &op->results[0]->type;
  int64_t na = count_elements(a->dims, a->rank), nr = count_elements(r->dims, r->rank);
  if (r->dtype != a->dtype || na != nr)
    report(v, op->loc,
           "'reshape' result #1 (%%%s): expected %lld elements of %s (as operand #1, %s), "
           "found %s",
           vname(op->results[0]), (long long)na, tsr_dtype_name((tsr_dtype_t)a->dtype),
           TYPE_TEXT(a), TYPE_TEXT(r));
}

static void rule_transpose(verifier_t *v, const tsr_op_t *op) {
  if (!expect_block(v, op, 0)) return;
  const tsr_type_t *a = &op->operands[0]->type;
  if (op->num_ints != a->rank) {
    report(v, op->loc, "'transpose' permutation has %u entries, expected %u (the rank of %s)",
           op->num_ints, a->rank, TYPE_TEXT(a));
    return;
  }
  bool seen[TSR_MAX_RANK] = {false};
  int64_t dims[TSR_MAX_RANK];
  for (uint32_t i = 0; i < a->rank; i++) {
    int64_t p = op->ints[i];
    if (p < 0 || p >= a->rank || seen[p]) {
      tbuf_t b = {.len = 0};
      put_dims(&b, op->ints, op->num_ints, false);
      report(v, op->loc, "'transpose' %s is not a permutation of 0..%u", b.s, a->rank - 1);
      return;
    }
    seen[p] = true;
    dims[i] = a->dims[p];
  }
  tsr_type_t want = tsr_type_vector((tsr_dtype_t)a->dtype, a->rank, dims);
  expect_result(v, op, 0, &want, "");
}

static void rule_slice(verifier_t *v, const tsr_op_t *op) {
  if (!expect_block(v, op, 0)) return;
  const tsr_value_t *a = op->operands[0];
  if (op->num_indices != a->type.rank) {
    report(v, op->loc, "'slice' of %%%s: expected %u indices (one per dimension of %s), found %u",
           vname(a), a->type.rank, TYPE_TEXT(&a->type), op->num_indices);
    return;
  }
  tsr_type_t view;
  if (!check_indices(v, op, vname(a), &a->type, 1, 1, false, &view)) return;
  char note[192];
  snprintf(note, sizeof note, " (the view of %%%s)", vname(a));
  expect_result(v, op, 0, &view, note);
}

static void rule_concatenate(verifier_t *v, const tsr_op_t *op) {
  for (uint32_t i = 0; i < op->num_operands; i++)
    if (!expect_block(v, op, i)) return;
  const tsr_type_t *first = &op->operands[0]->type;
  int64_t axis;
  if (!expect_axis(v, op, first->rank, &axis)) return;
  int64_t dims[TSR_MAX_RANK];
  memcpy(dims, first->dims, sizeof dims);
  for (uint32_t i = 1; i < op->num_operands; i++) {
    const tsr_type_t *t = &op->operands[i]->type;
    if (t->dtype != first->dtype || t->rank != first->rank) {
      report(v, op->loc,
             "'concatenate' operand #%u (%%%s): expected dtype %s and rank %u (as operand "
             "#1, %s), found %s",
             i + 1, vname(op->operands[i]), tsr_dtype_name((tsr_dtype_t)first->dtype),
             first->rank, TYPE_TEXT(first), TYPE_TEXT(t));
      return;
    }
    for (uint32_t d = 0; d < t->rank; d++) {
      if ((int64_t)d != axis && t->dims[d] != first->dims[d]) {
        report(v, op->loc,
               "'concatenate' operand #%u (%%%s): dim %u is %lld, expected %lld (as operand "
               "#1; only axis %lld may differ)",
               i + 1, vname(op->operands[i]), d, (long long)t->dims[d],
               (long long)first->dims[d], (long long)axis);
        return;
      }
    }
    /* Each dim is <= 2^31, so the sum needs more than 2^32 operands to
     * overflow; the result's own size check then catches it. */
    if (__builtin_add_overflow(dims[axis], t->dims[axis], &dims[axis])) dims[axis] = INT64_MAX;
  }
  tsr_type_t want = tsr_type_vector((tsr_dtype_t)first->dtype, first->rank, dims);
  expect_result(v, op, 0, &want, "");
}

static void rule_roll(verifier_t *v, const tsr_op_t *op) {
  if (!expect_block(v, op, 0)) return;
  const tsr_type_t *a = &op->operands[0]->type;
  int64_t axis;
  if (!expect_axis(v, op, a->rank, &axis)) return;
  tsr_type_t i32 = tsr_type_scalar(TSR_DTYPE_I32);
  if (!expect_operand(v, op, 1, &i32, ", the shift")) return;
  expect_result(v, op, 0, a, " (the type of operand #1)");
}

static void rule_gather(verifier_t *v, const tsr_op_t *op) {
  if (!expect_block(v, op, 0)) return;
  const tsr_type_t *a = &op->operands[0]->type, *idx = &op->operands[1]->type;
  int64_t axis;
  if (!expect_axis(v, op, a->rank, &axis)) return;
  if (idx->kind != TSR_TYPE_VECTOR || idx->dtype != TSR_DTYPE_I32 || idx->rank != a->rank) {
    report(v, op->loc,
           "'gather' operand #2 (%%%s, the indices): expected an i32 block of rank %u, found %s",
           vname(op->operands[1]), a->rank, TYPE_TEXT(idx));
    return;
  }
  for (uint32_t d = 0; d < a->rank; d++) {
    if ((int64_t)d != axis && idx->dims[d] != a->dims[d]) {
      report(v, op->loc,
             "'gather' operand #2 (%%%s, the indices): dim %u is %lld, expected %lld (as "
             "operand #1; only axis %lld may differ)",
             vname(op->operands[1]), d, (long long)idx->dims[d], (long long)a->dims[d],
             (long long)axis);
      return;
    }
  }
  tsr_type_t want = same_shape(idx, a->dtype);
  expect_result(v, op, 0, &want, " (operand #1's dtype, the indices' shape)");
}

/* The operand's type without the dims flagged in `drop` (a scalar if none
 * are left), with dtype `dtype`. */
static tsr_type_t drop_dims(const tsr_type_t *a, const bool *drop, uint32_t dtype) {
  int64_t dims[TSR_MAX_RANK];
  uint32_t rank = 0;
  for (uint32_t d = 0; d < a->rank; d++)
    if (!drop[d]) dims[rank++] = a->dims[d];
  return rank ? tsr_type_vector((tsr_dtype_t)dtype, rank, dims)
              : tsr_type_scalar((tsr_dtype_t)dtype);
}

static void rule_reduce(verifier_t *v, const tsr_op_t *op, uint32_t flags) {
  if (!expect_block(v, op, 0) || !expect_class(v, op, 0, flags)) return;
  const tsr_type_t *a = &op->operands[0]->type;
  if (op->num_ints == 0) {
    report(v, op->loc, "'%s' needs at least one axis", mnemonic(op));
    return;
  }
  bool drop[TSR_MAX_RANK] = {false};
  bool ok = op->num_ints <= a->rank;
  for (uint32_t i = 0; ok && i < op->num_ints; i++) {
    int64_t axis = op->ints[i];
    ok = axis >= 0 && axis < a->rank && (i == 0 || axis > op->ints[i - 1]);
    if (ok) drop[axis] = true;
  }
  if (!ok) {
    tbuf_t b = {.len = 0};
    put_dims(&b, op->ints, op->num_ints, false); /* bput truncates long lists */
    report(v, op->loc, "'%s' axes %s must be sorted, unique and within 0..%u (the rank of %s)",
           mnemonic(op), b.s, a->rank - 1, TYPE_TEXT(a));
    return;
  }
  tsr_type_t want = drop_dims(a, drop, a->dtype);
  expect_result(v, op, 0, &want, "");
}

static void rule_arg_reduce(verifier_t *v, const tsr_op_t *op, uint32_t flags) {
  if (!expect_block(v, op, 0) || !expect_class(v, op, 0, flags)) return;
  const tsr_type_t *a = &op->operands[0]->type;
  int64_t axis;
  if (!expect_axis(v, op, a->rank, &axis)) return;
  bool drop[TSR_MAX_RANK] = {false};
  drop[axis] = true;
  tsr_type_t want = drop_dims(a, drop, TSR_DTYPE_I32);
  expect_result(v, op, 0, &want, "");
}

static void rule_dot(verifier_t *v, const tsr_op_t *op) {
  const tsr_type_t *a = &op->operands[0]->type, *b = &op->operands[1]->type;
  for (uint32_t i = 0; i < 2; i++) {
    const tsr_type_t *t = &op->operands[i]->type;
    if (t->kind != TSR_TYPE_VECTOR || t->rank != 2) {
      report(v, op->loc, "'dot' operand #%u (%%%s): expected a rank-2 block, found %s", i + 1,
             vname(op->operands[i]), TYPE_TEXT(t));
      return;
    }
  }
  if (!expect_class(v, op, 0, TSR_F_FLT | TSR_F_INT)) return;
  if (b->dtype != a->dtype) {
    report(v, op->loc, "'dot' operand #2 (%%%s): expected dtype %s (as operand #1), found %s",
           vname(op->operands[1]), tsr_dtype_name((tsr_dtype_t)a->dtype), TYPE_TEXT(b));
    return;
  }
  bool trans = op->flags & TSR_OPF_TRANSPOSE_RHS;
  uint32_t kdim = trans ? 1 : 0;
  if (b->dims[kdim] != a->dims[1]) {
    report(v, op->loc,
           "'dot' operand #2 (%%%s): contracting dim %u is %lld, expected %lld (dim 1 of "
           "operand #1, %s)%s",
           vname(op->operands[1]), kdim, (long long)b->dims[kdim], (long long)a->dims[1],
           TYPE_TEXT(a), trans ? " with transpose_rhs" : "");
    return;
  }
  const tsr_type_t *r = &op->results[0]->type;
  int64_t mn[2] = {a->dims[0], b->dims[1 - kdim]};
  bool is_float = dclass(a->dtype) == TSR_CLASS_FLOAT;
  if (r->kind != TSR_TYPE_VECTOR || r->rank != 2 || r->dims[0] != mn[0] ||
      r->dims[1] != mn[1]) {
    report(v, op->loc, "'dot' result #1 (%%%s): expected shape %s, found %s",
           vname(op->results[0]), DIMS_TEXT(mn, 2), TYPE_TEXT(r));
    return;
  }
  if (is_float ? dclass(r->dtype) != TSR_CLASS_FLOAT : r->dtype != TSR_DTYPE_I32) {
    report(v, op->loc, "'dot' result #1 (%%%s): expected %s for %s operands, found %s",
           vname(op->results[0]), is_float ? "a float dtype" : "i32",
           is_float ? "float" : "integer", TYPE_TEXT(r));
    return;
  }
  if (op->num_operands == 3) expect_operand(v, op, 2, r, ", the accumulator");
}

static void rule_grid_query(verifier_t *v, const tsr_op_t *op) {
  int64_t axis = op->ints[0];
  if (axis < 0 || axis >= v->kernel->grid_rank) {
    report(v, op->loc, "'%s' axis %lld is out of range: the grid has rank %u", mnemonic(op),
           (long long)axis, v->kernel->grid_rank);
    return;
  }
  tsr_type_t i32 = tsr_type_scalar(TSR_DTYPE_I32);
  expect_result(v, op, 0, &i32, "");
}

static void rule_const(verifier_t *v, const tsr_op_t *op) {
  const tsr_type_t *r = &op->results[0]->type;
  const char *dt = tsr_dtype_name((tsr_dtype_t)r->dtype);
  if (dclass(r->dtype) == TSR_CLASS_FLOAT) {
    double x = op->literal.f, max = r->dtype == TSR_DTYPE_F16    ? 65504.0
                                    : r->dtype == TSR_DTYPE_BF16 ? 0x1.fep127
                                                                 : (double)FLT_MAX;
    if (isfinite(x) && fabs(x) > max)
      report(v, op->loc, "'const' literal %g does not fit in %s (largest finite value %g)", x,
             dt, max);
    return;
  }
  int64_t lo, hi;
  switch ((tsr_dtype_t)r->dtype) {
    case TSR_DTYPE_I32: lo = INT32_MIN; hi = INT32_MAX; break;
    case TSR_DTYPE_U32: lo = 0; hi = UINT32_MAX; break;
    case TSR_DTYPE_I16: lo = INT16_MIN; hi = INT16_MAX; break;
    case TSR_DTYPE_U16: lo = 0; hi = UINT16_MAX; break;
    case TSR_DTYPE_I8: lo = INT8_MIN; hi = INT8_MAX; break;
    case TSR_DTYPE_U8: lo = 0; hi = UINT8_MAX; break;
    default: lo = 0; hi = 1; break; /* i1 */
  }
  int64_t x = op->literal.i;
  if (x < lo || x > hi)
    report(v, op->loc, "'const' literal %lld does not fit in %s (%lld..%lld)", (long long)x,
           dt, (long long)lo, (long long)hi);
}

/* load and store. Operands: load [ref, index operands.., mask?]; store
 * [ref, value, index operands.., mask?]. */
static void rule_memory(verifier_t *v, const tsr_op_t *op, bool is_load) {
  const char *m = mnemonic(op), *dir = is_load ? "from" : "to";
  const tsr_value_t *ref = op->operands[0];
  const tsr_type_t *rt = &ref->type;
  if (rt->kind != TSR_TYPE_REF) {
    report(v, op->loc, "'%s' operand #1 (%%%s): expected a ref, found %s", m, vname(ref),
           TYPE_TEXT(rt));
    return;
  }
  if (rt->space == TSR_SPACE_HBM || rt->space == TSR_SPACE_ANY) {
    report(v, op->loc, "'%s' %s %%%s: %s refs cannot be %s directly, only DMA'd (use dma_start)",
           m, dir, vname(ref), tsr_space_name((tsr_space_t)rt->space),
           is_load ? "loaded" : "stored to");
    return;
  }
  bool smem = rt->space == TSR_SPACE_SMEM;
  bool ok = true;
  if (smem && !is_32bit(rt->dtype)) {
    report(v, op->loc, "'%s' %s %%%s: smem refs hold 32-bit elements (i32, u32, f32), found %s",
           m, dir, vname(ref), TYPE_TEXT(rt));
    ok = false;
  }
  uint32_t has_mask = (op->flags & TSR_OPF_MASK) ? 1 : 0;
  uint32_t first_dyn = is_load ? 1 : 2;
  if (op->num_operands < first_dyn + has_mask) {
    report(v, op->loc, "'%s' has the mask flag but no mask operand", m);
    return;
  }
  uint32_t end_dyn = op->num_operands - has_mask;
  if (op->num_indices != rt->rank) {
    report(v, op->loc, "'%s' %s %%%s: expected %u indices (one per dimension of %s), found %u",
           m, dir, vname(ref), rt->rank, TYPE_TEXT(rt), op->num_indices);
    return;
  }
  tsr_type_t view;
  if (!check_indices(v, op, vname(ref), rt, first_dyn, end_dyn, true, &view)) return;
  if (smem) {
    for (uint32_t d = 0; d < op->num_indices; d++) {
      if (op->indices[d].kind != TSR_INDEX_POINT) {
        report(v, op->loc,
               "'%s' %s %%%s: smem refs are %s one element at a time, but index %u is %s", m,
               dir, vname(ref), is_load ? "read" : "written", d,
               INDEX_TEXT(op, &op->indices[d]));
        return;
      }
    }
    if (has_mask) {
      report(v, op->loc, "'%s' %s %%%s: masks are not allowed on smem refs", m, dir, vname(ref));
      return;
    }
  }
  if (!ok) return;
  char note[192];
  snprintf(note, sizeof note, " (the view of %%%s)", vname(ref));
  if (is_load) {
    expect_result(v, op, 0, &view, note);
  } else {
    const tsr_value_t *value = op->operands[1];
    tsr_type_t scalar = tsr_type_scalar((tsr_dtype_t)rt->dtype);
    if (!tsr_type_equal(&value->type, &view) && !tsr_type_equal(&value->type, &scalar)) {
      if (view.kind == TSR_TYPE_SCALAR)
        report(v, op->loc, "'store' operand #2 (%%%s): expected %s%s, found %s", vname(value),
               TYPE_TEXT(&view), note, TYPE_TEXT(&value->type));
      else
        report(v, op->loc, "'store' operand #2 (%%%s): expected %s%s or %s, found %s",
               vname(value), TYPE_TEXT(&view), note, TYPE_TEXT(&scalar),
               TYPE_TEXT(&value->type));
    }
  }
  if (has_mask) {
    uint32_t mi = op->num_operands - 1;
    const tsr_value_t *mask = op->operands[mi];
    if (view.kind != TSR_TYPE_VECTOR) {
      report(v, op->loc,
             "'%s' operand #%u (%%%s, the mask): a mask needs a block view, but the view of "
             "%%%s is the scalar %s",
             m, mi + 1, vname(mask), vname(ref), TYPE_TEXT(&view));
      return;
    }
    tsr_type_t want = same_shape(&view, TSR_DTYPE_I1);
    expect_operand(v, op, mi, &want, ", the mask");
  }
}

/* ---- DMA and semaphore ops (docs/dma.md) ------------------------------------------ */

/* One ref view or semaphore operand of a DMA or semaphore op. */
typedef struct view_part {
  const char *what; /* "source", "destination", "semaphore", "send semaphore" */
  uint32_t operand; /* position in op->operands */
  uint32_t first;   /* its indices: [first, first + count) of op->indices */
  uint32_t count;
} view_part_t;

/* Flags that add operands or change an op's meaning; `allowed` are those
 * the op takes. */
static bool check_view_op_flags(verifier_t *v, const tsr_op_t *op, uint32_t allowed) {
  static const struct {
    uint32_t bit;
    const char *text;
  } optional[] = {
      {TSR_OPF_SEND, "'send' semaphore"},
      {TSR_OPF_DEVICE, "'device' operand"},
      {TSR_OPF_CORE, "'core' operand"},
      {TSR_OPF_DMA_ADD, "'add'"},
  };
  bool ok = true;
  for (size_t i = 0; i < TSR_ARRAY_SIZE(optional); i++) {
    if ((op->flags & optional[i].bit) && !(allowed & optional[i].bit)) {
      report(v, op->loc, "'%s' takes no %s", mnemonic(op), optional[i].text);
      ok = false;
    }
  }
  return ok;
}

/* The source or destination of a DMA: a ref in any space, with one index
 * per dimension (the forms of load; none for a rank-0 ref). Writes the
 * view's type. */
static bool check_dma_view(verifier_t *v, const tsr_op_t *op, const view_part_t *part,
                           uint32_t first_dyn, uint32_t end_dyn, tsr_type_t *out_view) {
  const char *m = mnemonic(op);
  const tsr_value_t *ref = op->operands[part->operand];
  const tsr_type_t *rt = &ref->type;
  if (rt->kind != TSR_TYPE_REF) {
    report(v, op->loc, "'%s' operand #%u (%%%s, the %s): expected a ref, found %s", m,
           part->operand + 1, vname(ref), part->what, TYPE_TEXT(rt));
    return false;
  }
  if (rt->space == TSR_SPACE_SMEM && !is_32bit(rt->dtype)) {
    report(v, op->loc, "'%s' %s %%%s: smem refs hold 32-bit elements (i32, u32, f32), found %s",
           m, part->what, vname(ref), TYPE_TEXT(rt));
    return false;
  }
  if (part->count != rt->rank) {
    if (rt->rank == 0)
      report(v, op->loc, "'%s' %s %%%s: %s has rank 0 and takes no indices, found %u", m,
             part->what, vname(ref), TYPE_TEXT(rt), part->count);
    else
      report(v, op->loc,
             "'%s' %s %%%s: expected %u ind%s (one per dimension of %s; ':' for a whole "
             "dimension), found %u",
             m, part->what, vname(ref), rt->rank, rt->rank == 1 ? "ex" : "ices", TYPE_TEXT(rt),
             part->count);
    return false;
  }
  return check_view(v, op, vname(ref), rt, part->first, part->count, first_dyn, end_dyn, true,
                    out_view);
}

/* A semaphore operand naming one semaphore: of `kind` (or of either kind if
 * `either`), with one point index per dimension (none for rank 0). */
static bool check_semaphore(verifier_t *v, const tsr_op_t *op, const view_part_t *part,
                            tsr_sem_kind_t kind, bool either, uint32_t first_dyn,
                            uint32_t end_dyn) {
  const char *m = mnemonic(op);
  const tsr_value_t *sem = op->operands[part->operand];
  const tsr_type_t *t = &sem->type;
  if (t->kind != TSR_TYPE_SEM || (!either && t->dtype != kind)) {
    const char *want = either                  ? "a semaphore (sem or dma_sem)"
                       : kind == TSR_SEM_DMA ? "a DMA semaphore (dma_sem)"
                                               : "a regular semaphore (sem)";
    report(v, op->loc, "'%s' operand #%u (%%%s, the %s): expected %s, found %s", m,
           part->operand + 1, vname(sem), part->what, want, TYPE_TEXT(t));
    return false;
  }
  if (part->count != t->rank) {
    if (t->rank == 0)
      report(v, op->loc, "'%s' %s %%%s: %s is one semaphore and takes no indices, found %u", m,
             part->what, vname(sem), TYPE_TEXT(t), part->count);
    else
      report(v, op->loc,
             "'%s' %s %%%s: expected %u point ind%s (one per dimension of %s) naming one "
             "semaphore, found %u",
             m, part->what, vname(sem), t->rank, t->rank == 1 ? "ex" : "ices", TYPE_TEXT(t),
             part->count);
    return false;
  }
  for (uint32_t d = 0; d < part->count; d++) {
    const tsr_index_t *ix = &op->indices[part->first + d];
    if (ix->kind != TSR_INDEX_POINT) {
      report(v, op->loc,
             "'%s' %s %%%s: index %u is %s, expected a point index (an integer or an i32 "
             "value) naming one semaphore",
             m, part->what, vname(sem), d, INDEX_TEXT(op, ix));
      return false;
    }
  }
  tsr_type_t view;
  return check_view(v, op, vname(sem), t, part->first, part->count, first_dyn, end_dyn, true,
                    &view);
}

/* dma_start and dma_wait. Operands [src, dst, sem, ssem?, index starts..,
 * device?]; ints = the index counts of src, dst and sem; the rest of the
 * indices are the send semaphore's (layout: ir/parse.c). */
static void rule_dma(verifier_t *v, const tsr_op_t *op) {
  const char *m = mnemonic(op);
  bool start = op->opcode == TSR_OP_DMA_START;
  if (!check_view_op_flags(v, op, start ? TSR_OPF_SEND | TSR_OPF_DEVICE | TSR_OPF_DMA_ADD : 0))
    return;
  uint32_t send = (op->flags & TSR_OPF_SEND) ? 1 : 0;
  uint32_t device = (op->flags & TSR_OPF_DEVICE) ? 1 : 0;
  uint32_t first_dyn = 3 + send;
  if (op->num_operands < first_dyn + device) {
    report(v, op->loc, "'%s' with%s%s takes at least %u operands, found %u", m,
           send ? " a send semaphore" : "", device ? (send ? " and a device" : " a device") : "",
           first_dyn + device, op->num_operands);
    return;
  }
  if (op->num_ints != 3) {
    report(v, op->loc,
           "'%s' needs 3 index counts (of the source, destination and semaphore), found %u", m,
           op->num_ints);
    return;
  }
  int64_t used = 0;
  bool counts_ok = true;
  for (uint32_t i = 0; i < 3; i++) {
    counts_ok &= op->ints[i] >= 0 && op->ints[i] <= TSR_MAX_RANK;
    if (counts_ok) used += op->ints[i];
  }
  if (!counts_ok || used > op->num_indices || (!send && used != op->num_indices)) {
    report(v, op->loc,
           "'%s' index counts %lld, %lld, %lld (source, destination, semaphore) do not match "
           "its %u indices",
           m, (long long)op->ints[0], (long long)op->ints[1], (long long)op->ints[2],
           op->num_indices);
    return;
  }
  uint32_t n0 = (uint32_t)op->ints[0], n1 = (uint32_t)op->ints[1], n2 = (uint32_t)op->ints[2];
  const view_part_t parts[4] = {
      {"source", 0, 0, n0},
      {"destination", 1, n0, n1},
      {"semaphore", 2, n0 + n1, n2},
      {"send semaphore", 3, n0 + n1 + n2, op->num_indices - (uint32_t)used},
  };
  uint32_t end_dyn = op->num_operands - device;
  tsr_type_t src_view, dst_view;
  bool src_ok = check_dma_view(v, op, &parts[0], first_dyn, end_dyn, &src_view);
  bool dst_ok = check_dma_view(v, op, &parts[1], first_dyn, end_dyn, &dst_view);
  bool ok = src_ok && dst_ok;
  ok &= check_semaphore(v, op, &parts[2], TSR_SEM_DMA, false, first_dyn, end_dyn);
  if (send) ok &= check_semaphore(v, op, &parts[3], TSR_SEM_DMA, false, first_dyn, end_dyn);
  if (src_ok && dst_ok) {
    const tsr_value_t *src = op->operands[0], *dst = op->operands[1];
    if (!tsr_type_equal(&src_view, &dst_view)) {
      report(v, op->loc,
             "'%s' source and destination views differ: %%%s gives %s, %%%s gives %s (a DMA "
             "copies between views of the same shape and dtype)",
             m, vname(src), TYPE_TEXT(&src_view), vname(dst), TYPE_TEXT(&dst_view));
      ok = false;
    } else if ((op->flags & TSR_OPF_DMA_ADD) && dclass(src_view.dtype) == TSR_CLASS_BOOL) {
      report(v, op->loc,
             "'%s' add: %%%s and %%%s hold i1, which has no addition (add takes float or "
             "integer views)",
             m, vname(src), vname(dst));
      ok = false;
    }
  }
  if (ok) check_index_operands_used(v, op, first_dyn, end_dyn);
  tsr_type_t i32 = tsr_type_scalar(TSR_DTYPE_I32);
  if (device) expect_operand(v, op, end_dyn, &i32, ", the device");
}

/* sem_signal, sem_wait, sem_read and core_barrier. Operands [sem, amount
 * (sem_signal, sem_wait), index starts.., device?, core?]; every index is
 * the semaphore's. */
static void rule_semaphore(verifier_t *v, const tsr_op_t *op) {
  bool signal = op->opcode == TSR_OP_SEM_SIGNAL;
  bool amount = signal || op->opcode == TSR_OP_SEM_WAIT;
  if (!check_view_op_flags(v, op, signal ? TSR_OPF_DEVICE | TSR_OPF_CORE : 0)) return;
  uint32_t device = (op->flags & TSR_OPF_DEVICE) ? 1 : 0;
  uint32_t core = (op->flags & TSR_OPF_CORE) ? 1 : 0;
  uint32_t first_dyn = amount ? 2 : 1;
  if (op->num_operands < first_dyn + device + core) {
    report(v, op->loc, "'%s' with%s%s takes at least %u operands, found %u", mnemonic(op),
           device ? " a device" : "", core ? (device ? " and a core" : " a core") : "",
           first_dyn + device + core, op->num_operands);
    return;
  }
  uint32_t end_dyn = op->num_operands - device - core;
  const view_part_t part = {"semaphore", 0, 0, op->num_indices};
  bool either = op->opcode == TSR_OP_SEM_READ;
  if (check_semaphore(v, op, &part, TSR_SEM_REGULAR, either, first_dyn, end_dyn))
    check_index_operands_used(v, op, first_dyn, end_dyn);
  tsr_type_t i32 = tsr_type_scalar(TSR_DTYPE_I32);
  if (amount) expect_operand(v, op, 1, &i32, ", the amount");
  if (device) expect_operand(v, op, end_dyn, &i32, ", the device");
  if (core) expect_operand(v, op, end_dyn + device, &i32, ", the core");
  if (op->opcode == TSR_OP_SEM_READ) expect_result(v, op, 0, &i32, "");
}

static void rule_print(verifier_t *v, const tsr_op_t *op) {
  uint32_t holes = 0;
  for (const char *p = op->text; p && *p; p++)
    if (p[0] == '{' && p[1] == '}') holes++, p++;
  if (holes != op->num_operands)
    report(v, op->loc, "'print' format has %u {} placeholders but %u operands", holes,
           op->num_operands);
}

/* ---- Regions and control flow -------------------------------------------------------- */

static void verify_region(verifier_t *v, const tsr_region_t *r, const region_ctx_t *ctx);

/* Expected type of yield operand #i in ctx. */
static bool yield_expect(verifier_t *v, const region_ctx_t *ctx, uint32_t i, tsr_type_t *out) {
  if (ctx->kind == REGION_MAP) {
    *out = tsr_type_scalar(TSR_DTYPE_I32);
    return true;
  }
  const tsr_value_t *r = ctx->owner->results[i];
  if (!def_ok(v, r)) return false;
  *out = r->type;
  return true;
}

/* The region's terminator `op` gives what ctx expects. */
static NOINLINE void check_terminator_operands(verifier_t *v, const tsr_op_t *op,
                                      const region_ctx_t *ctx) {
  const char *m = mnemonic(op);
  if (ctx->kind == REGION_COND) {
    if (op->num_operands != 1) return; /* reported by check_arity */
    const tsr_value_t *c = op->operands[0];
    if (usable(v, c) && !(c->type.kind == TSR_TYPE_SCALAR && c->type.dtype == TSR_DTYPE_I1))
      report(v, op->loc, "'condition' operand #1 (%%%s): expected i1, found %s", vname(c),
             TYPE_TEXT(&c->type));
    return;
  }
  const tsr_decl_t *map_decl =
      ctx->kind == REGION_MAP ? &v->kernel->decls[v->map_decl] : NULL;
  uint32_t want = ctx->kind == REGION_MAP ? ctx->map_rank : ctx->owner->num_results;
  if (op->num_operands != want) {
    if (map_decl)
      kreport(v, op->loc,
              "index map of %%%s yields %u values, expected %u (one per array dimension)",
              vname(map_decl->ref), op->num_operands, want);
    else
      report(v, op->loc, "'%s' gives %u values, expected %u (the results of '%s')", m,
             op->num_operands, want, mnemonic(ctx->owner));
    return;
  }
  for (uint32_t i = 0; i < want; i++) {
    const tsr_value_t *a = op->operands[i];
    tsr_type_t t;
    if (!usable(v, a) || !yield_expect(v, ctx, i, &t) || tsr_type_equal(&a->type, &t))
      continue;
    if (map_decl)
      kreport(v, op->loc, "index map of %%%s: '%s' operand #%u (%%%s): expected i32, found %s",
              vname(map_decl->ref), m, i + 1, vname(a), TYPE_TEXT(&a->type));
    else
      report(v, op->loc, "'%s' operand #%u (%%%s): expected %s (result #%u of '%s'), found %s",
             m, i + 1, vname(a), TYPE_TEXT(&t), i + 1, mnemonic(ctx->owner),
             TYPE_TEXT(&a->type));
  }
}

/* Region r of control op `op` has `n` arguments whose types must be
 * `types[i]` (NULL entries: not checked); `what` describes them. */
static void check_region_args(verifier_t *v, const tsr_op_t *op, uint32_t ri,
                              const char *rname, uint32_t first, uint32_t n,
                              const char *what) {
  const tsr_region_t *r = &op->regions[ri];
  const char *m = mnemonic(op);
  if (r->num_args != first + n) {
    report(v, op->loc, "'%s' %s has %u arguments, expected %u (%s)", m, rname, r->num_args,
           first + n, what);
    return;
  }
  for (uint32_t i = 0; r->args && i < n && i < op->num_results; i++) {
    const tsr_value_t *a = r->args[first + i], *res = op->results[i];
    if (!def_ok(v, a) || !def_ok(v, res) || tsr_type_equal(&a->type, &res->type)) continue;
    report(v, op->loc, "'%s' %s argument #%u (%%%s): expected %s (the type of result #%u), found %s",
           m, rname, first + i + 1, vname(a), TYPE_TEXT(&res->type), i + 1,
           TYPE_TEXT(&a->type));
  }
}

/* Operands [first, first + n) are initial values of the op's results. */
static void check_inits(verifier_t *v, const tsr_op_t *op, uint32_t first, uint32_t n) {
  const char *m = mnemonic(op);
  if (op->num_results != n) {
    report(v, op->loc, "'%s' has %u results but %u carried values", m, op->num_results, n);
    return;
  }
  for (uint32_t i = 0; i < n; i++) {
    const tsr_value_t *a = op->operands[first + i], *res = op->results[i];
    if (!usable(v, a) || !def_ok(v, res) || tsr_type_equal(&a->type, &res->type)) continue;
    report(v, op->loc,
           "'%s' operand #%u (%%%s, initial value #%u): expected %s (the type of result #%u), "
           "found %s",
           m, first + i + 1, vname(a), i + 1, TYPE_TEXT(&res->type), i + 1,
           TYPE_TEXT(&a->type));
  }
}

static void walk(verifier_t *v, const tsr_op_t *op, uint32_t ri, region_kind_t kind,
                 const char *name, uint32_t depth) {
  region_ctx_t ctx = {kind, op, name, 0, depth + 1};
  verify_region(v, &op->regions[ri], &ctx);
}

/* for/while/if/scoped: carried types, region arguments and the if/else
 * structure; the bounds and condition types only when `typed`. */
static NOINLINE void check_control(verifier_t *v, const tsr_op_t *op, bool typed) {
  tsr_type_t i32 = tsr_type_scalar(TSR_DTYPE_I32), i1 = tsr_type_scalar(TSR_DTYPE_I1);
  switch (op->opcode) {
    case TSR_OP_FOR: {
      static const char *const what[3] = {", the lower bound", ", the upper bound",
                                          ", the step"};
      for (uint32_t i = 0; typed && i < 3; i++) expect_operand(v, op, i, &i32, what[i]);
      uint32_t n = op->num_operands - 3;
      check_inits(v, op, 3, n);
      char what_args[96];
      snprintf(what_args, sizeof what_args,
               "the induction variable and %u carried values", n);
      check_region_args(v, op, 0, "body", 1, n, what_args);
      const tsr_region_t *r = &op->regions[0];
      if (r->num_args && r->args && def_ok(v, r->args[0]) && !is_i32_scalar(&r->args[0]->type))
        report(v, op->loc, "'for' induction variable %%%s: expected i32, found %s",
               vname(r->args[0]), TYPE_TEXT(&r->args[0]->type));
      break;
    }
    case TSR_OP_WHILE:
      check_inits(v, op, 0, op->num_operands);
      check_region_args(v, op, 0, "condition region", 0, op->num_results, "the carried values");
      check_region_args(v, op, 1, "body", 0, op->num_results, "the carried values");
      break;
    case TSR_OP_IF:
      if (typed) expect_operand(v, op, 0, &i1, ", the condition");
      for (uint32_t i = 0; i < 2; i++)
        if (op->regions[i].num_args)
          report(v, op->loc, "'if' %s region takes no arguments, found %u",
                 i ? "else" : "then", op->regions[i].num_args);
      if (!(op->flags & TSR_OPF_HAS_ELSE) && op->num_results)
        report(v, op->loc, "'if' with results needs an else region");
      else if (!(op->flags & TSR_OPF_HAS_ELSE) && op->regions[1].first)
        report(v, op->loc, "'if' has ops in its else region but no else flag");
      break;
    case TSR_OP_SCOPED: {
      const tsr_region_t *r = &op->regions[0];
      for (uint32_t i = 0; r->args && i < r->num_args; i++) {
        const tsr_value_t *a = r->args[i];
        if (!def_ok(v, a)) continue;
        const tsr_type_t *t = &a->type;
        if (t->kind == TSR_TYPE_SEM) {
          /* Pallas run_scoped allows them; in tessera semaphores are kernel
           * scratch (docs/dma.md). */
          report(v, op->loc,
                 "'scoped' argument #%u (%%%s): semaphores cannot be scoped (declare it as "
                 "kernel scratch: scratch %%%s: %s)",
                 i + 1, vname(a), vname(a), TYPE_TEXT(t));
        } else if (t->kind != TSR_TYPE_REF) {
          report(v, op->loc,
                 "'scoped' argument #%u (%%%s): expected a vmem or smem ref, found %s", i + 1,
                 vname(a), TYPE_TEXT(t));
        } else if (t->space != TSR_SPACE_VMEM && t->space != TSR_SPACE_SMEM) {
          report(v, op->loc,
                 "'scoped' argument #%u (%%%s): %s buffers cannot be scoped (scoped buffers "
                 "live in vmem or smem)",
                 i + 1, vname(a), tsr_space_name((tsr_space_t)t->space));
        } else if (t->space == TSR_SPACE_VMEM && t->rank == 0) {
          report(v, op->loc, "'scoped' argument #%u (%%%s): a vmem buffer needs rank >= 1", i + 1,
                 vname(a));
        } else if (t->space == TSR_SPACE_SMEM && !is_32bit(t->dtype)) {
          report(v, op->loc,
                 "'scoped' argument #%u (%%%s): smem holds 32-bit elements (i32, u32, f32), "
                 "found %s",
                 i + 1, vname(a), TYPE_TEXT(t));
        }
      }
      break;
    }
    default:
      report(v, op->loc, "'%s' is a control op the verifier does not know", mnemonic(op));
      break;
  }
}

/* for/while/if/scoped: checks, then the regions. */
static void verify_control(verifier_t *v, const tsr_op_t *op, bool typed, uint32_t depth) {
  if (depth + 1 > MAX_DEPTH) {
    report(v, op->loc, "'%s' regions are nested more than %d deep", mnemonic(op), MAX_DEPTH);
    return;
  }
  check_control(v, op, typed);
  switch (op->opcode) {
    case TSR_OP_FOR:
    case TSR_OP_SCOPED:
      walk(v, op, 0, REGION_YIELD, "body", depth);
      break;
    case TSR_OP_WHILE:
      walk(v, op, 0, REGION_COND, "condition region", depth);
      walk(v, op, 1, REGION_YIELD, "body", depth);
      break;
    case TSR_OP_IF:
      walk(v, op, 0, REGION_YIELD, "then region", depth);
      if (op->flags & TSR_OPF_HAS_ELSE) walk(v, op, 1, REGION_YIELD, "else region", depth);
      break;
    default: break; /* check_control reported it */
  }
}

/* Counts from the op table and attribute counts, before anything is read. */
static NOINLINE bool check_arity(verifier_t *v, const tsr_op_t *op) {
  const tsr_op_info_t *info = &tsr_op_table[op->opcode];
  const char *m = info->mnemonic;
  bool ok = true;
  if (op->num_operands < (uint32_t)info->min_operands ||
      (info->max_operands >= 0 && op->num_operands > (uint32_t)info->max_operands)) {
    char want[48];
    if (info->max_operands < 0)
      snprintf(want, sizeof want, "at least %d", info->min_operands);
    else if (info->max_operands == info->min_operands)
      snprintf(want, sizeof want, "%d", info->min_operands);
    else
      snprintf(want, sizeof want, "%d to %d", info->min_operands, info->max_operands);
    report(v, op->loc, "'%s' takes %s operands, found %u", m, want, op->num_operands);
    ok = false;
  }
  if (info->num_results >= 0 && op->num_results != (uint32_t)info->num_results) {
    report(v, op->loc, "'%s' has %d results, found %u", m, info->num_results, op->num_results);
    ok = false;
  }
  if (op->num_regions != (uint32_t)info->num_regions) {
    report(v, op->loc, "'%s' has %d regions, found %u", m, info->num_regions, op->num_regions);
    ok = false;
  }
  if ((op->num_operands && !op->operands) || (op->num_results && !op->results) ||
      (op->num_regions && !op->regions) || (op->num_ints && !op->ints) ||
      (op->num_indices && !op->indices)) {
    report(v, op->loc, "'%s' is malformed: a count is set but its array is missing", m);
    ok = false;
  }
  if ((info->syntax == TSR_SYN_INT_ATTR || info->syntax == TSR_SYN_AXIS) && op->num_ints != 1) {
    report(v, op->loc, "'%s' needs 1 %s attribute, found %u", m,
           op->opcode == TSR_OP_IOTA ? "dimension" : "axis", op->num_ints);
    ok = false;
  }
  return ok;
}

/* Runs the op's type rule (everything it reads has been checked). */
static NOINLINE void apply_rule(verifier_t *v, const tsr_op_t *op) {
  const tsr_op_info_t *info = &tsr_op_table[op->opcode];
  switch (info->rule) {
    case TSR_RULE_CONST: rule_const(v, op); break;
    case TSR_RULE_GRID_QUERY: rule_grid_query(v, op); break;
    case TSR_RULE_LOAD: rule_memory(v, op, true); break;
    case TSR_RULE_STORE: rule_memory(v, op, false); break;
    case TSR_RULE_ELEMWISE: rule_elementwise(v, op, info->flags, false); break;
    case TSR_RULE_COMPARE: rule_elementwise(v, op, info->flags, true); break;
    case TSR_RULE_SELECT: rule_select(v, op); break;
    case TSR_RULE_CONVERT: rule_cast(v, op, false); break;
    case TSR_RULE_BITCAST: rule_cast(v, op, true); break;
    case TSR_RULE_IOTA: rule_iota(v, op); break;
    case TSR_RULE_BROADCAST: rule_broadcast(v, op); break;
    case TSR_RULE_RESHAPE: rule_reshape(v, op); break;
    case TSR_RULE_TRANSPOSE: rule_transpose(v, op); break;
    case TSR_RULE_SLICE: rule_slice(v, op); break;
    case TSR_RULE_CONCATENATE: rule_concatenate(v, op); break;
    case TSR_RULE_ROLL: rule_roll(v, op); break;
    case TSR_RULE_GATHER: rule_gather(v, op); break;
    case TSR_RULE_REDUCE: rule_reduce(v, op, info->flags); break;
    case TSR_RULE_ARG_REDUCE: rule_arg_reduce(v, op, info->flags); break;
    case TSR_RULE_DOT: rule_dot(v, op); break;
    case TSR_RULE_PRINT: rule_print(v, op); break;
    case TSR_RULE_ASSERT: {
      tsr_type_t i1 = tsr_type_scalar(TSR_DTYPE_I1);
      expect_operand(v, op, 0, &i1, "");
      break;
    }
    case TSR_RULE_DMA: rule_dma(v, op); break;
    case TSR_RULE_SEMAPHORE: rule_semaphore(v, op); break;
    case TSR_RULE_ID_QUERY: {
      tsr_type_t i32 = tsr_type_scalar(TSR_DTYPE_I32);
      expect_result(v, op, 0, &i32, "");
      break;
    }
    /* Control ops: verify_control; terminators: verify_region; reserved
     * ops (TSR_F_RESERVED) never get here. */
    case TSR_RULE_FOR: case TSR_RULE_WHILE: case TSR_RULE_IF: case TSR_RULE_SCOPED:
    case TSR_RULE_YIELD: case TSR_RULE_CONDITION: case TSR_RULE_RESERVED:
      break;
  }
}

/* Operands whose kind the op's rule checks: the views and semaphores of DMA
 * ops, the semaphore of semaphore ops. Elsewhere only the ref operand of
 * load and store may be a ref, and no operand may be a semaphore. */
static bool is_view_slot(const tsr_op_t *op, uint32_t i) {
  switch (tsr_op_table[op->opcode].syntax) {
    case TSR_SYN_DMA: return i < ((op->flags & TSR_OPF_SEND) ? 4u : 3u);
    case TSR_SYN_SEM: return i == 0;
    default: return false;
  }
}

/* Everything about `op` but its regions: arity, reserved and map-only ops,
 * operand visibility and kinds, result definitions, the type rule. Sets
 * *out_typed when the op's types could be checked. Returns whether the op's
 * arrays and regions match the op table (so its regions may be walked). */
static NOINLINE bool check_op(verifier_t *v, const tsr_op_t *op, const region_ctx_t *ctx,
                              bool *out_typed) {
  const tsr_op_info_t *info = &tsr_op_table[op->opcode];
  const char *m = info->mnemonic;
  bool shaped = check_arity(v, op); /* arrays may be read as counted */
  bool typed = shaped;              /* type rules may run */
  bool allowed = true;
  *out_typed = false;
  if (info->flags & TSR_F_RESERVED) {
    report(v, op->loc, "'%s' is reserved: it is parsed and printed but cannot run yet", m);
    typed = allowed = false;
  }
  if (ctx->kind == REGION_MAP && !(info->flags & TSR_F_MAP_OK)) {
    kreport(v, op->loc,
            "index map of %%%s: '%s' is not allowed in an index map (only ops marked 'map' "
            "in the op table are)",
            decl_name(v, (uint32_t)v->map_decl), m);
    typed = allowed = false;
  }
  for (uint32_t i = 0; op->operands && i < op->num_operands; i++) {
    if (!check_use(v, op, i)) {
      typed = false;
      continue;
    }
    if (!allowed || is_view_slot(op, i)) continue;
    const tsr_type_t *t = &op->operands[i]->type;
    bool ref_slot = i == 0 && (info->flags & (TSR_F_READS | TSR_F_WRITES));
    if (t->kind == TSR_TYPE_REF && !ref_slot) {
      report(v, op->loc,
             "'%s' operand #%u (%%%s): a ref can only be the ref operand of load, store or a "
             "DMA, found %s",
             m, i + 1, vname(op->operands[i]), TYPE_TEXT(t));
      typed = false;
    } else if (t->kind == TSR_TYPE_SEM) {
      report(v, op->loc,
             "'%s' operand #%u (%%%s): a semaphore can only be the semaphore operand of a "
             "semaphore or DMA op, found %s",
             m, i + 1, vname(op->operands[i]), TYPE_TEXT(t));
      typed = false;
    }
  }
  for (uint32_t i = 0; op->results && i < op->num_results; i++) {
    const tsr_value_t *r = op->results[i];
    char what[192];
    snprintf(what, sizeof what, "'%s' result #%u (%%%s)", m, i + 1, vname(r));
    if (!r) {
      report(v, op->loc, "'%s' result #%u is missing", m, i + 1);
      typed = false;
    } else if (!check_def(v, op->loc, what, r)) {
      typed = false;
    } else if (!is_value_type(&r->type)) {
      report(v, op->loc, "%s: results are scalars or blocks, found %s", what,
             TYPE_TEXT(&r->type));
      typed = false;
    }
  }
  if (typed) apply_rule(v, op);
  *out_typed = typed;
  return shaped && allowed;
}

static void verify_op(verifier_t *v, const tsr_op_t *op, const region_ctx_t *ctx) {
  if (op->opcode >= TSR_OP_COUNT) {
    report(v, op->loc, "unknown opcode %u", (unsigned)op->opcode);
    for (uint32_t i = 0; op->results && i < op->num_results; i++)
      set_vis(v, op->results[i], VIS_VISIBLE);
    return;
  }
  bool typed;
  bool walkable = check_op(v, op, ctx, &typed);
  if (walkable && (tsr_op_table[op->opcode].flags & TSR_F_CONTROL))
    verify_control(v, op, typed, ctx->depth);
  for (uint32_t i = 0; op->results && i < op->num_results; i++)
    set_vis(v, op->results[i], VIS_VISIBLE);
}

static const char *terminator_rule(const tsr_op_t *op, const region_ctx_t *ctx) {
  bool is_cond = op->opcode == TSR_OP_CONDITION;
  switch (ctx->kind) {
    case REGION_BODY:
      return is_cond ? "can only end the condition region of a 'while'"
                     : "cannot end a kernel body";
    case REGION_COND:
      return is_cond ? NULL : "cannot end the condition region of 'while' (use 'condition')";
    case REGION_MAP:
    case REGION_YIELD:
      return is_cond ? "can only end the condition region of a 'while'" : NULL;
  }
  return NULL;
}

/* Defines the region's arguments (ctx says whose they are). */
static NOINLINE void begin_region(verifier_t *v, const tsr_region_t *r,
                                  const region_ctx_t *ctx) {
  const char *owner = ctx->owner ? mnemonic(ctx->owner) : NULL;
  tsr_loc_t loc = ctx->owner ? ctx->owner->loc : v->kernel->loc;
  if (ctx->kind == REGION_MAP) loc = v->kernel->decls[v->map_decl].loc;
  for (uint32_t i = 0; i < r->num_args; i++) {
    const tsr_value_t *a = r->args ? r->args[i] : NULL;
    char what[192];
    if (ctx->kind == REGION_MAP)
      snprintf(what, sizeof what, "kernel @%s: index map of %%%s: argument #%u (%%%s)",
               v->kernel->name, decl_name(v, (uint32_t)v->map_decl), i + 1, vname(a));
    else if (owner)
      snprintf(what, sizeof what, "'%s' %s argument #%u (%%%s)", owner, ctx->name, i + 1,
               vname(a));
    else
      snprintf(what, sizeof what, "kernel @%s: body argument #%u (%%%s)", v->kernel->name,
               i + 1, vname(a));
    if (!a) {
      report(v, loc, "%s is missing", what);
      continue;
    }
    check_def(v, loc, what, a);
    set_vis(v, a, VIS_VISIBLE);
  }
}

/* A terminator `op` in a region of kind ctx: the right kind, last, and
 * giving what the region owes. Returns whether the region's terminator has
 * been dealt with (so a missing one need not be reported too). */
static NOINLINE bool check_terminator(verifier_t *v, const tsr_op_t *op,
                                      const region_ctx_t *ctx) {
  const char *bad = terminator_rule(op, ctx);
  if (bad) {
    report(v, op->loc, "'%s' %s", mnemonic(op), bad);
    return !op->next; /* a wrong terminator still ends the region */
  }
  if (op->next) {
    report(v, op->loc, "'%s' must be the last op of its region", mnemonic(op));
    return true;
  }
  if (op->num_operands && !op->operands) return true; /* reported by check_arity */
  check_terminator_operands(v, op, ctx);
  return true;
}

/* Reports a missing terminator, then ends the scope of the region's values. */
static NOINLINE void end_region(verifier_t *v, const tsr_region_t *r, const region_ctx_t *ctx,
                                bool terminated) {
  const char *owner = ctx->owner ? mnemonic(ctx->owner) : NULL;
  if (!terminated) {
    if (ctx->kind == REGION_COND)
      report(v, ctx->owner->loc, "'%s' %s must end with 'condition'", owner, ctx->name);
    else if (ctx->kind == REGION_YIELD && ctx->owner->num_results)
      report(v, ctx->owner->loc, "'%s' %s must end with 'yield' of %u values (the results of '%s')",
             owner, ctx->name, ctx->owner->num_results, owner);
    else if (ctx->kind == REGION_MAP)
      kreport(v, v->kernel->decls[v->map_decl].loc,
              "index map of %%%s must end with 'yield' of one i32 block index per array "
              "dimension",
              decl_name(v, (uint32_t)v->map_decl));
  }
  for (uint32_t i = 0; r->args && i < r->num_args; i++) set_vis(v, r->args[i], VIS_ENDED);
  for (const tsr_op_t *op = r->first; op; op = op->next)
    for (uint32_t i = 0; op->results && i < op->num_results; i++)
      set_vis(v, op->results[i], VIS_ENDED);
}

static void verify_region(verifier_t *v, const tsr_region_t *r, const region_ctx_t *ctx) {
  begin_region(v, r, ctx);
  bool terminated = false;
  for (const tsr_op_t *op = r->first; op; op = op->next) {
    verify_op(v, op, ctx);
    if (op->opcode >= TSR_OP_COUNT) continue;
    uint32_t flags = tsr_op_table[op->opcode].flags;
    if (!(flags & TSR_F_TERMINATOR)) continue;
    if (ctx->kind == REGION_MAP && !(flags & TSR_F_MAP_OK)) continue; /* reported */
    terminated |= check_terminator(v, op, ctx);
  }
  end_region(v, r, ctx, terminated);
}

/* ---- Kernel headers ------------------------------------------------------------------ */

static void verify_grid(verifier_t *v) {
  const tsr_kernel_t *k = v->kernel;
  if (k->grid_rank > TSR_MAX_RANK) {
    kreport(v, k->loc, "grid rank %u exceeds %d", k->grid_rank, TSR_MAX_RANK);
    return;
  }
  int64_t steps = 1;
  bool overflow = false;
  int32_t first_arbitrary = -1;
  for (uint32_t i = 0; i < k->grid_rank; i++) {
    int64_t g = k->grid[i];
    if (g < 1)
      kreport(v, k->loc, "grid dim %u is %lld, expected >= 1", i, (long long)g);
    else if (g > INT32_MAX)
      kreport(v, k->loc, "grid dim %u is %lld, more than 2^31 - 1 (program_id is i32)", i,
              (long long)g);
    else if (!tsr_mul_i64(steps, g, &steps))
      overflow = true;
    uint32_t s = k->semantics[i];
    if (s > TSR_DIM_CORE_PARALLEL) {
      kreport(v, k->loc, "grid dim %u has unknown semantics %u", i, s);
    } else if (s == TSR_DIM_ARBITRARY) {
      if (first_arbitrary < 0) first_arbitrary = (int32_t)i;
    } else if (first_arbitrary >= 0) {
      kreport(v, k->loc,
              "grid dim %u is %s but follows arbitrary dim %d; parallel dims must come "
              "first (as in Pallas)",
              i, semantics_name(s), first_arbitrary);
    }
  }
  if (overflow) kreport(v, k->loc, "the grid has more than 2^63 steps");
}

/* The whole array of a prefetch/in/out decl: a block type (or a scalar
 * for prefetch), dims >= 1, at most 2^40 bytes. */
static bool verify_array(verifier_t *v, const tsr_decl_t *d, const char *role,
                         const char *name) {
  const tsr_type_t *t = &d->array;
  bool scalar_ok = d->role == TSR_ROLE_PREFETCH;
  if (t->kind != TSR_TYPE_VECTOR && !(scalar_ok && t->kind == TSR_TYPE_SCALAR)) {
    kreport(v, d->loc, "%s %%%s: expected an array type DTYPE[DIMS]%s, found %s", role, name,
            scalar_ok ? " or a scalar dtype" : "", TYPE_TEXT(t));
    return false;
  }
  if (t->rank > TSR_MAX_RANK || t->dtype >= TSR_DTYPE_COUNT ||
      (t->kind == TSR_TYPE_SCALAR) != (t->rank == 0)) {
    kreport(v, d->loc, "%s %%%s: invalid array type %s (rank %u)", role, name, TYPE_TEXT(t),
            t->rank);
    return false;
  }
  for (uint32_t i = 0; i < t->rank; i++) {
    if (t->dims[i] < 1) {
      kreport(v, d->loc, "%s %%%s: dimension %u of %s is %lld, expected >= 1", role, name, i,
              TYPE_TEXT(t), (long long)t->dims[i]);
      return false;
    }
  }
  int64_t bytes, n = count_elements(t->dims, t->rank);
  if (n < 0 || !tsr_mul_i64(n, (int64_t)tsr_dtype_size((tsr_dtype_t)t->dtype), &bytes) ||
      bytes > MAX_ARRAY_BYTES) {
    kreport(v, d->loc, "%s %%%s: %s is more than 2^40 bytes", role, name, TYPE_TEXT(t));
    return false;
  }
  return true;
}

static void verify_scratch(verifier_t *v, const tsr_decl_t *d, const char *name) {
  const tsr_type_t *t = &d->ref->type;
  tbuf_t why = {.len = 0};
  if (!type_wellformed(t, &why)) {
    kreport(v, d->loc, "scratch %%%s: %s", name, why.s);
    return;
  }
  if (t->kind == TSR_TYPE_SEM) {
    /* fine: semaphores are scratch */
  } else if (t->kind != TSR_TYPE_REF) {
    kreport(v, d->loc, "scratch %%%s: expected a vmem or smem ref or a semaphore, found %s", name,
            TYPE_TEXT(t));
  } else if (t->space != TSR_SPACE_VMEM && t->space != TSR_SPACE_SMEM) {
    kreport(v, d->loc, "scratch %%%s: %s scratch is not allowed (scratch lives in vmem or smem)",
            name, tsr_space_name((tsr_space_t)t->space));
  } else if (t->space == TSR_SPACE_VMEM && t->rank == 0) {
    kreport(v, d->loc, "scratch %%%s: vmem scratch needs rank >= 1", name);
  } else if (t->space == TSR_SPACE_SMEM && !is_32bit(t->dtype)) {
    kreport(v, d->loc, "scratch %%%s: smem holds 32-bit elements (i32, u32, f32), found %s", name,
            TYPE_TEXT(t));
  }
  if (d->has_block || d->index_map)
    kreport(v, d->loc, "scratch %%%s cannot have a block or index map", name);
}

static void verify_index_map(verifier_t *v, uint32_t di) {
  const tsr_kernel_t *k = v->kernel;
  const tsr_decl_t *d = &k->decls[di];
  const tsr_region_t *map = d->index_map;
  if (map->num_args != k->grid_rank)
    kreport(v, d->loc, "index map of %%%s takes %u arguments, expected %u (one per grid dimension)",
            vname(d->ref), map->num_args, k->grid_rank);
  for (uint32_t i = 0; map->args && i < map->num_args; i++) {
    const tsr_value_t *a = map->args[i];
    if (def_ok(v, a) && !is_i32_scalar(&a->type))
      kreport(v, d->loc, "index map of %%%s: argument #%u (%%%s): expected i32, found %s",
              vname(d->ref), i + 1, vname(a), TYPE_TEXT(&a->type));
  }
  v->map_decl = (int32_t)di;
  region_ctx_t ctx = {REGION_MAP, NULL, "index map", d->array.rank, 0};
  verify_region(v, map, &ctx);
  v->map_decl = -1;
}

static void verify_decl(verifier_t *v, uint32_t di, int32_t *aliased_by) {
  const tsr_kernel_t *k = v->kernel;
  const tsr_decl_t *d = &k->decls[di];
  if (d->role > TSR_ROLE_SCRATCH) {
    kreport(v, d->loc, "operand #%u has unknown role %u", di + 1, (unsigned)d->role);
    return;
  }
  const char *role = role_name(d->role);
  if (!d->ref) {
    kreport(v, d->loc, "%s #%u has no ref", role, di + 1);
    return;
  }
  const char *name = vname(d->ref);
  if (di > 0 && k->decls[di - 1].role > d->role)
    kreport(v, d->loc,
            "%s %%%s comes after %s %%%s; operands come in the order prefetch, in, out, "
            "scratch",
            role, name, role_name(k->decls[di - 1].role), vname(k->decls[di - 1].ref));
  if (d->alias != -1 && d->role != TSR_ROLE_OUT)
    kreport(v, d->loc, "%s %%%s: only outputs can alias an input", role, name);
  if (d->role == TSR_ROLE_SCRATCH) {
    verify_scratch(v, d, name);
    return;
  }
  if (!verify_array(v, d, role, name)) return;
  const tsr_type_t *at = &d->array;
  const tsr_type_t *rt = &d->ref->type;
  if (d->role == TSR_ROLE_PREFETCH) {
    if (!is_32bit(at->dtype))
      kreport(v, d->loc, "prefetch %%%s: scalar prefetch holds i32, u32 or f32, found %s", name,
              TYPE_TEXT(at));
    if (d->has_block || d->index_map)
      kreport(v, d->loc, "prefetch %%%s cannot have a block or index map", name);
  }
  if (rt->kind != TSR_TYPE_REF || rt->space >= TSR_SPACE_COUNT) {
    kreport(v, d->loc, "%s %%%s: the body sees %s, expected a ref", role, name, TYPE_TEXT(rt));
    return;
  }
  tsr_space_t space = (tsr_space_t)rt->space;
  bool windowed = space == TSR_SPACE_VMEM || space == TSR_SPACE_SMEM;
  if (!windowed && (d->has_block || d->index_map)) {
    kreport(v, d->loc,
            "%s %%%s: %s operands are not windowed and cannot have a block or index map "
            "(the kernel sees the whole array and DMAs it)",
            role, name, tsr_space_name(space));
    return;
  }
  if (d->index_map && !d->has_block) {
    kreport(v, d->loc, "%s %%%s: an index map needs a block", role, name);
    return;
  }
  /* Block entries, and the ref the body sees: the block without squeezed
   * dims, in the decl's space. */
  bool block_ok = true;
  int64_t dims[TSR_MAX_RANK];
  uint32_t rank = 0;
  for (uint32_t i = 0; i < at->rank; i++) {
    int64_t b = d->block[i];
    if (b == TSR_SQUEEZED) continue;
    /* A block may be larger than its array (Pallas pads it like an edge
     * block: docs/semantics.md, "Ragged edges"). */
    if (b < 1) {
      kreport(v, d->loc, "%s %%%s: block%s dim %u must be squeezed or at least 1, found %lld",
              role, name, DIMS_TEXT(d->block, at->rank), i, (long long)b);
      block_ok = false;
    }
    dims[rank++] = b;
  }
  if (!block_ok) return;
  tsr_type_t want = tsr_type_ref(space, (tsr_dtype_t)at->dtype, rank, dims);
  if (d->role == TSR_ROLE_PREFETCH) want.space = TSR_SPACE_SMEM;
  if (!tsr_type_equal(rt, &want)) {
    kreport(v, d->loc, "%s %%%s: the body sees %s, expected %s (the block without squeezed dims)",
            role, name, TYPE_TEXT(rt), TYPE_TEXT(&want));
    return;
  }
  tbuf_t why = {.len = 0};
  if (!type_wellformed(rt, &why)) {
    kreport(v, d->loc, "%s %%%s: block %s", role, name, why.s);
    return;
  }
  if (space == TSR_SPACE_SMEM && d->role != TSR_ROLE_PREFETCH && !is_32bit(at->dtype))
    kreport(v, d->loc, "%s %%%s: smem holds 32-bit elements (i32, u32, f32), found %s", role, name,
            TYPE_TEXT(at));
  if (d->role == TSR_ROLE_OUT && d->alias != -1) {
    int32_t a = d->alias;
    if (a < 0 || (uint32_t)a >= k->num_decls) {
      kreport(v, d->loc, "output %%%s aliases operand #%d, which does not exist", name, a + 1);
    } else if (k->decls[a].role != TSR_ROLE_IN) {
      kreport(v, d->loc, "output %%%s aliases %s %%%s, which is not an input", name,
              role_name(k->decls[a].role), vname(k->decls[a].ref));
    } else if (!tsr_type_equal(&k->decls[a].array, at)) {
      kreport(v, d->loc, "output %%%s (%s) aliases input %%%s of a different type (%s)", name,
              TYPE_TEXT(at), vname(k->decls[a].ref), TYPE_TEXT(&k->decls[a].array));
    } else if (aliased_by[a] >= 0) {
      kreport(v, d->loc, "input %%%s is aliased by more than one output (%%%s and %%%s)",
              vname(k->decls[a].ref), vname(k->decls[aliased_by[a]].ref), name);
    } else {
      aliased_by[a] = (int32_t)di;
    }
  }
  if (d->index_map) verify_index_map(v, di);
}

static tsr_status_t verify_kernel(verifier_t *v, const tsr_kernel_t *k) {
  v->kernel = k;
  v->map_decl = -1;
  v->num_values = k->num_values;
  v->values = tsr_calloc(k->num_values ? k->num_values : 1, sizeof *v->values);
  int32_t *aliased_by = tsr_malloc((k->num_decls ? k->num_decls : 1) * sizeof *aliased_by);
  if (!v->values || !aliased_by) {
    tsr_free(v->values);
    tsr_free(aliased_by);
    return TSR_OOM();
  }
  for (uint32_t i = 0; i < k->num_decls; i++) {
    aliased_by[i] = -1;
    collect_value(v, k->decls[i].ref, ZONE_KERNEL, i);
  }
  for (uint32_t i = 0; i < k->num_decls; i++)
    if (k->decls[i].index_map) collect_region(v, k->decls[i].index_map, ZONE_MAP, i, 0);
  collect_region(v, &k->body, ZONE_BODY, 0, 0);

  verify_grid(v);
  if (k->body.num_args)
    kreport(v, k->loc, "the body takes no arguments, found %u", k->body.num_args);
  for (uint32_t i = 0; i < k->num_decls; i++) verify_decl(v, i, aliased_by);
  region_ctx_t ctx = {REGION_BODY, NULL, "body", 0, 0};
  verify_region(v, &k->body, &ctx);

  tsr_free(aliased_by);
  tsr_free(v->values);
  v->values = NULL;
  return NULL;
}

typedef struct kernel_name {
  const char *name;
  UT_hash_handle hh;
} kernel_name_t;

static void free_names(kernel_name_t *names) {
  kernel_name_t *n, *tmp;
  HASH_ITER(hh, names, n, tmp) {
    HASH_DEL(names, n);
    tsr_free(n);
  }
}

tsr_status_t tsr_ir_verify(const tsr_module_t *module) {
  if (!module) return TSR_STATUS(TSR_INVALID_ARGUMENT, "tsr_ir_verify: no module");
  verifier_t v;
  memset(&v, 0, sizeof v);
  tsr_diag_list_initialize(&v.diags, DIAG_LIMIT);
  kernel_name_t *names = NULL; /* duplicate kernel names, without a quadratic scan */
  for (uint32_t i = 0; i < module->num_kernels; i++) {
    const tsr_kernel_t *k = module->kernels[i];
    if (!k) continue;
    if (k->name) {
      kernel_name_t *seen;
      HASH_FIND_STR(names, k->name, seen);
      if (seen) {
        report(&v, k->loc, "kernel @%s is defined twice", k->name);
      } else if ((seen = tsr_calloc(1, sizeof *seen))) {
        seen->name = k->name;
        HASH_ADD_KEYPTR(hh, names, seen->name, strlen(seen->name), seen);
      }
    }
    tsr_status_t s = verify_kernel(&v, k);
    if (s) {
      free_names(names);
      tsr_diag_list_deinitialize(&v.diags);
      return s;
    }
  }
  free_names(names);
  tsr_status_t s = tsr_diag_list_to_status(&v.diags, TSR_VERIFY_ERROR);
  tsr_diag_list_deinitialize(&v.diags);
  return s;
}

tsr_status_t tsr_ir_verify_kernel(const tsr_kernel_t *kernel) {
  if (!kernel)
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "tsr_ir_verify_kernel: no kernel");
  verifier_t v;
  memset(&v, 0, sizeof v);
  tsr_diag_list_initialize(&v.diags, DIAG_LIMIT);
  tsr_status_t s = verify_kernel(&v, kernel);
  if (!s) s = tsr_diag_list_to_status(&v.diags, TSR_VERIFY_ERROR);
  tsr_diag_list_deinitialize(&v.diags);
  return s;
}
