/* The verifier's shared helpers (ir/verify_internal.h): type and dims
 * texts, diagnostics, well-formed types, the visibility of values, and the
 * expect_* checks the type rules share. Calls no other verifier file. */
#include <stdarg.h>

#include "ir/verify_internal.h"

/* ---- Text helpers ------------------------------------------------------------- */

void TSR_PRINTF(2, 3) vf_bput(tbuf_t *b, const char *fmt, ...) {
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
void vf_put_dims(tbuf_t *b, const int64_t *dims, uint32_t rank, bool squeezed) {
  vf_bput(b, "[");
  for (uint32_t i = 0; i < rank && b->len < sizeof b->s - 1; i++) {
    if (squeezed && dims[i] == TSR_SQUEEZED)
      vf_bput(b, "%ssqueezed", i ? ", " : "");
    else
      vf_bput(b, "%s%lld", i ? ", " : "", (long long)dims[i]);
  }
  vf_bput(b, "]");
}

/* The type as docs/ir.md writes it (tsr_type_print's format), safe on any
 * bytes: unknown kinds, dtypes and ranks print as such. */
const char *vf_type_text(tbuf_t *b, const tsr_type_t *t) {
  uint32_t rank = t->rank > TSR_MAX_RANK ? TSR_MAX_RANK : t->rank;
  switch (t->kind) {
    case TSR_TYPE_SCALAR:
      vf_bput(b, "%s", tsr_dtype_name((tsr_dtype_t)t->dtype));
      break;
    case TSR_TYPE_VECTOR:
      vf_bput(b, "%s", tsr_dtype_name((tsr_dtype_t)t->dtype));
      vf_put_dims(b, t->dims, rank, false);
      break;
    case TSR_TYPE_REF:
      vf_bput(b, "%s %s", tsr_space_name((tsr_space_t)t->space),
              tsr_dtype_name((tsr_dtype_t)t->dtype));
      if (rank) vf_put_dims(b, t->dims, rank, false);
      break;
    case TSR_TYPE_SEM:
      vf_bput(b, "%s", t->dtype == TSR_SEM_DMA ? "dma_sem" : "sem");
      if (rank) vf_put_dims(b, t->dims, rank, false);
      break;
    default:
      vf_bput(b, "<type kind %u>", t->kind);
      break;
  }
  return b->s;
}
const char *vf_dims_text(tbuf_t *b, const int64_t *dims, uint32_t rank) {
  vf_put_dims(b, dims, rank > TSR_MAX_RANK ? TSR_MAX_RANK : rank, true);
  return b->s;
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

void TSR_PRINTF(3, 4) vf_report(verifier_t *v, tsr_loc_t loc, const char *fmt, ...) {
  /* the record names the op being verified when the diagnostic is at its
   * location (not at a declaration or kernel it points to) */
  const tsr_op_t *op = v->op;
  bool at_op = op && op->opcode < TSR_OP_COUNT && op->loc.file == loc.file &&
               op->loc.line == loc.line && op->loc.col == loc.col;
  va_list ap;
  va_start(ap, fmt);
  tsr_diag_vadd(&v->diags, loc, at_op ? tsr_op_table[op->opcode].mnemonic : NULL, fmt, ap);
  va_end(ap);
}

/* vf_report() with a "kernel @name: " prefix, for header-level rules. */
void TSR_PRINTF(3, 4) vf_kreport(verifier_t *v, tsr_loc_t loc, const char *fmt, ...) {
  tsr_strbuf_t sb;
  tsr_strbuf_initialize(&sb);
  va_list ap;
  va_start(ap, fmt);
  tsr_strbuf_vprintf(&sb, fmt, ap);
  va_end(ap);
  vf_report(v, loc, "kernel @%s: %s", v->kernel->name ? v->kernel->name : "?",
            sb.data ? sb.data : "");
  if (sb.failed) v->diags.text.failed = true; /* surfaces as out of memory */
  tsr_strbuf_deinitialize(&sb);
}
/* Whether `t` is well formed: a known kind, dtype and space, rank <= 6,
 * dims >= 1, and a size the interpreter can hold (2^31 elements per block
 * value or VMEM/SMEM ref, 2^40 bytes per HBM ref). If not and `why` is
 * given, says why. */
bool vf_type_wellformed(const tsr_type_t *t, tbuf_t *why) {
  tbuf_t scratch; /* not zeroed: 232 bytes per call on every definition */
  scratch.len = 0;
  scratch.s[0] = 0;
  if (!why) why = &scratch;
  if (t->kind > TSR_TYPE_SEM) {
    vf_bput(why, "invalid type: unknown type kind %u", t->kind);
    return false;
  }
  if (t->rank > TSR_MAX_RANK) {
    vf_bput(why, "invalid type: rank %u exceeds %d", t->rank, TSR_MAX_RANK);
    return false;
  }
  if (t->kind == TSR_TYPE_SEM ? t->dtype > TSR_SEM_DMA : t->dtype >= TSR_DTYPE_COUNT) {
    vf_bput(why, "invalid type: unknown %s %u",
            t->kind == TSR_TYPE_SEM ? "semaphore kind" : "dtype", t->dtype);
    return false;
  }
  if (t->kind == TSR_TYPE_REF && t->space >= TSR_SPACE_COUNT) {
    vf_bput(why, "invalid type: unknown memory space %u", t->space);
    return false;
  }
  if (t->kind == TSR_TYPE_SCALAR && t->rank != 0) {
    vf_bput(why, "invalid type: a scalar has rank 0, found rank %u", t->rank);
    return false;
  }
  if (t->kind == TSR_TYPE_VECTOR && t->rank == 0) {
    vf_bput(why, "invalid type: a block %s[] needs rank >= 1 (a scalar is written %s)",
            tsr_dtype_name((tsr_dtype_t)t->dtype), tsr_dtype_name((tsr_dtype_t)t->dtype));
    return false;
  }
  for (uint32_t i = 0; i < t->rank; i++) {
    if (t->dims[i] < 1) {
      vf_bput(why, "invalid type %s: dimension %u is %lld, expected >= 1", TYPE_TEXT(t),
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
      vf_bput(why, "%s is more than 2^40 bytes", TYPE_TEXT(t));
      return false;
    }
  } else if (n < 0 || n > MAX_VALUE_ELEMENTS) {
    if (n < 0)
      vf_bput(why, "%s has more than 2^63 elements, more than 2^31 per %s", TYPE_TEXT(t),
              t->kind == TSR_TYPE_REF ? "ref" : "value");
    else
      vf_bput(why, "%s has %lld elements, more than 2^31 per %s", TYPE_TEXT(t),
              (long long)n, t->kind == TSR_TYPE_REF ? "ref" : "value");
    return false;
  }
  return true;
}
/* ---- Values and visibility ------------------------------------------------------ */

/* The info of a value of this kernel; NULL for foreign or missing values. */
value_info_t *vf_info_of(verifier_t *v, const tsr_value_t *value) {
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
bool vf_usable(verifier_t *v, const tsr_value_t *value) {
  value_info_t *vi = vf_info_of(v, value);
  return vi && is_visible(v, vi) && vi->type_ok;
}

/* A definition (result or region argument) whose type can be inspected. */
bool vf_def_ok(verifier_t *v, const tsr_value_t *value) {
  value_info_t *vi = vf_info_of(v, value);
  return vi && vi->type_ok;
}

const char *vf_decl_name(const verifier_t *v, uint32_t decl) {
  return decl < v->kernel->num_decls ? vname(v->kernel->decls[decl].ref) : "?";
}

/* Checks operand `i` of `op`: present, of this kernel, visible. Returns
 * whether its type may be inspected. */
bool vf_check_use(verifier_t *v, const tsr_op_t *op, uint32_t i) {
  const char *m = mnemonic(op);
  const tsr_value_t *value = op->operands[i];
  if (!value) {
    vf_report(v, op->loc, "'%s' operand #%u is missing", m, i + 1);
    return false;
  }
  value_info_t *vi = vf_info_of(v, value);
  if (!vi) {
    vf_report(v, op->loc,
              "'%s' operand #%u (%%%s) does not belong to kernel @%s (was it built "
              "in another kernel?)",
              m, i + 1, vname(value), v->kernel->name);
    return false;
  }
  if (is_visible(v, vi)) return vi->type_ok;
  bool in_map = v->map_decl >= 0;
  if (vi->zone == ZONE_KERNEL) {
    vf_report(v, op->loc,
              "'%s' operand #%u (%%%s) is not visible in the index map of %%%s: index "
              "maps can only use their arguments and prefetch refs",
              m, i + 1, vname(value), vf_decl_name(v, (uint32_t)v->map_decl));
  } else if (vi->zone == ZONE_BODY && in_map) {
    vf_report(v, op->loc,
              "'%s' operand #%u (%%%s) is defined in the kernel body and not visible "
              "in the index map of %%%s",
              m, i + 1, vname(value), vf_decl_name(v, (uint32_t)v->map_decl));
  } else if (vi->zone == ZONE_MAP && !in_map) {
    vf_report(v, op->loc,
              "'%s' operand #%u (%%%s) is defined in the index map of %%%s and not "
              "visible in the kernel body",
              m, i + 1, vname(value), vf_decl_name(v, vi->decl));
  } else if (vi->zone == ZONE_MAP && vi->decl != (uint32_t)v->map_decl) {
    vf_report(v, op->loc,
              "'%s' operand #%u (%%%s) is defined in the index map of %%%s and not "
              "visible in the index map of %%%s",
              m, i + 1, vname(value), vf_decl_name(v, vi->decl),
              vf_decl_name(v, (uint32_t)v->map_decl));
  } else if (vi->vis == VIS_UNREACHED) {
    vf_report(v, op->loc, "'%s' operand #%u (%%%s) is used before its definition", m,
              i + 1, vname(value));
  } else {
    vf_report(v, op->loc,
              "'%s' operand #%u (%%%s) is not visible here: it is defined in a region "
              "that does not enclose this use",
              m, i + 1, vname(value));
  }
  return false;
}

/* Checks a definition (`what` names it in messages): of this kernel, defined
 * once, well typed. Returns whether its type may be inspected. */
bool vf_check_def(verifier_t *v, tsr_loc_t loc, const char *what,
                  const tsr_value_t *value) {
  value_info_t *vi = vf_info_of(v, value);
  if (!vi) {
    vf_report(v, loc, "%s does not belong to kernel @%s (was it built in another kernel?)",
              what, v->kernel->name);
    return false;
  }
  if (vi->vis != VIS_UNREACHED) {
    vf_report(v, loc, "%s is defined twice", what);
    return false;
  }
  tbuf_t why = {.len = 0};
  if (!vf_type_wellformed(&value->type, &why)) {
    vf_report(v, loc, "%s: %s", what, why.s);
    return false;
  }
  return true;
}

bool vf_def_fine(verifier_t *v, const tsr_value_t *value) {
  value_info_t *vi = vf_info_of(v, value);
  return vi && vi->vis == VIS_UNREACHED && vf_type_wellformed(&value->type, NULL);
}

void vf_set_vis(verifier_t *v, const tsr_value_t *value, vis_t vis) {
  value_info_t *vi = vf_info_of(v, value);
  if (vi && vi->zone != ZONE_KERNEL) vi->vis = (uint8_t)vis;
}
/* result #i must have type `want`; `note` explains where `want` comes from. */
bool vf_expect_result(verifier_t *v, const tsr_op_t *op, uint32_t i,
                      const tsr_type_t *want, const char *note) {
  const tsr_value_t *r = op->results[i];
  if (tsr_type_equal(&r->type, want)) return true;
  vf_report(v, op->loc, "'%s' result #%u (%%%s): expected %s%s, found %s", mnemonic(op), i + 1,
            vname(r), TYPE_TEXT(want), note, TYPE_TEXT(&r->type));
  return false;
}

bool vf_expect_operand(verifier_t *v, const tsr_op_t *op, uint32_t i,
                       const tsr_type_t *want, const char *note) {
  const tsr_value_t *a = op->operands[i];
  if (tsr_type_equal(&a->type, want)) return true;
  vf_report(v, op->loc, "'%s' operand #%u (%%%s%s): expected %s, found %s", mnemonic(op),
            i + 1, vname(a), note, TYPE_TEXT(want), TYPE_TEXT(&a->type));
  return false;
}

/* operand #i must be a block (vector). */
bool vf_expect_block(verifier_t *v, const tsr_op_t *op, uint32_t i) {
  const tsr_value_t *a = op->operands[i];
  if (a->type.kind == TSR_TYPE_VECTOR) return true;
  vf_report(v, op->loc, "'%s' operand #%u (%%%s): expected a block, found %s", mnemonic(op),
            i + 1, vname(a), TYPE_TEXT(&a->type));
  return false;
}

bool vf_expect_class(verifier_t *v, const tsr_op_t *op, uint32_t i, uint32_t flags) {
  const tsr_value_t *a = op->operands[i];
  if (tsr_op_flags_accept(flags, (tsr_dtype_t)a->type.dtype)) return true;
  vf_report(v, op->loc, "'%s' operand #%u (%%%s): expected %s type, found %s", mnemonic(op),
            i + 1, vname(a), class_text(flags), TYPE_TEXT(&a->type));
  return false;
}

/* The axis attribute (ints[0]) of a rank-`rank` operand is in range. */
bool vf_expect_axis(verifier_t *v, const tsr_op_t *op, uint32_t rank, int64_t *out_axis) {
  int64_t axis = op->ints[0];
  if (axis >= 0 && axis < (int64_t)rank) {
    *out_axis = axis;
    return true;
  }
  vf_report(v, op->loc, "'%s' axis %lld is out of range for rank %u", mnemonic(op),
            (long long)axis, rank);
  return false;
}
