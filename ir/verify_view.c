/* The verifier's views (docs/ir.md, "Verifier rules"): the indices of load,
 * store and slice and the ref views and semaphores of DMA and semaphore
 * ops, with the type rules of those ops (ir/verify_internal.h). */
#include "ir/verify_internal.h"

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
    case TSR_INDEX_FULL: vf_bput(b, ":"); break;
    case TSR_INDEX_POINT: vf_bput(b, "%s", start); break;
    case TSR_INDEX_SLICE:
      vf_bput(b, "slice %lld:%lld", (long long)ix->start, (long long)ix->stop);
      if (ix->stride != 1) vf_bput(b, ":%lld", (long long)ix->stride);
      break;
    case TSR_INDEX_DS:
      vf_bput(b, "ds(%s, %lld", start, (long long)ix->size);
      if (ix->stride != 1) vf_bput(b, ", %lld", (long long)ix->stride);
      vf_bput(b, ")");
      break;
    case TSR_INDEX_DSIZE: {
      const tsr_value_t *n = ix->stop >= 0 && (uint64_t)ix->stop < op->num_operands
                                 ? op->operands[ix->stop]
                                 : NULL;
      vf_bput(b, "ds(%s, %%%s", start, vname(n));
      if (ix->stride != 1) vf_bput(b, ", %lld", (long long)ix->stride);
      vf_bput(b, ")");
      break;
    }
    default: vf_bput(b, "<index kind %u>", ix->kind); break;
  }
  return b->s;
}
#define INDEX_TEXT(op, ix) index_text(&(tbuf_t){.len = 0}, (op), (ix))

/* Whether index ix takes operand `pos`, as its start or as its size. */
static bool index_uses(const tsr_index_t *ix, int64_t pos) {
  return (ix->operand >= 0 && ix->operand == pos) ||
         (ix->kind == TSR_INDEX_DSIZE && ix->stop == pos);
}

/* Checks that operand `pos`, which index d of the view takes, is an index
 * operand in [first_dyn, end_dyn), used by no other index of the op before
 * it, and an i32 scalar. `what`: ", the size" for a size, "" for a start. */
static bool check_index_operand(verifier_t *v, const tsr_op_t *op, const char *base_name,
                                uint32_t first, uint32_t d, int64_t pos, const char *what,
                                uint32_t first_dyn, uint32_t end_dyn) {
  const char *m = mnemonic(op);
  if (pos < first_dyn || pos >= end_dyn) {
    vf_report(v, op->loc,
              "'%s' index %u of %%%s refers to operand #%lld, which is not an index "
              "operand",
              m, d, base_name, (long long)pos + 1);
    return false;
  }
  const tsr_index_t *ix = &op->indices[first + d];
  for (uint32_t e = 0; e <= first + d; e++) {
    const tsr_index_t *other = &op->indices[e];
    /* the index's own start, when this is its size, counts too */
    bool earlier = e < first + d || (ix->kind == TSR_INDEX_DSIZE && pos == ix->stop &&
                                      ix->operand == pos);
    if (!earlier || !index_uses(other, pos)) continue;
    if (e == first + d)
      vf_report(v, op->loc, "'%s' index %u of %%%s uses operand #%lld as start and size", m, d,
                base_name, (long long)pos + 1);
    else if (e >= first)
      vf_report(v, op->loc,
                "'%s' index %u of %%%s uses operand #%lld, already used by index %u", m, d,
                base_name, (long long)pos + 1, e - first);
    else
      vf_report(v, op->loc,
                "'%s' index %u of %%%s uses operand #%lld, already used by the index of "
                "another view",
                m, d, base_name, (long long)pos + 1);
    return false;
  }
  const tsr_value_t *s = op->operands[pos];
  if (vf_usable(v, s) && !is_i32_scalar(&s->type)) {
    vf_report(v, op->loc, "'%s' index %u of %%%s: operand #%lld (%%%s%s): expected i32, found %s",
              m, d, base_name, (long long)pos + 1, vname(s), what, TYPE_TEXT(&s->type));
    return false;
  }
  return true;
}

/* Checks the indices [first, first + count) of `op` as a view of `base` (a
 * ref, block or semaphore array of rank `count`, named `base_name`; messages
 * number the indices within the view): dynamic starts are operands
 * [first_dyn, end_dyn) holding i32 scalars, each used by one index of the
 * op; static parts lie within the dims. Writes the view type (dims kept by
 * non-point indices; a scalar if none). Returns false after reporting. */
static bool check_view(verifier_t *v, const tsr_op_t *op, const char *base_name,
                       const tsr_type_t *base, uint32_t first, uint32_t count,
                       uint32_t first_dyn, uint32_t end_dyn, bool allow_dynamic,
                       bool dma_view, tsr_type_t *out_view) {
  const char *m = mnemonic(op);
  bool ok = true;
  int64_t view_dims[TSR_MAX_RANK];
  uint32_t view_rank = 0;
  for (uint32_t d = 0; d < count; d++) {
    const tsr_index_t *ix = &op->indices[first + d];
    int64_t dim = base->dims[d];
    bool dynamic = ix->operand >= 0;
    if (ix->kind > TSR_INDEX_DSIZE) {
      vf_report(v, op->loc, "'%s' index %u of %%%s: unknown index kind %u", m, d,
                base_name, ix->kind);
      ok = false;
      continue;
    }
    if (dynamic && (ix->kind == TSR_INDEX_FULL || ix->kind == TSR_INDEX_SLICE)) {
      vf_report(v, op->loc, "'%s' index %u of %%%s: '%s' takes no operand, found operand #%d",
                m, d, base_name, ix->kind == TSR_INDEX_FULL ? ":" : "a:b", ix->operand + 1);
      ok = false;
      continue;
    }
    if (dynamic) {
      uint32_t pos = (uint32_t)ix->operand;
      if (!allow_dynamic) {
        vf_report(v, op->loc,
                  "'%s' index %u of %%%s: dynamic indices are not allowed (slice takes "
                  "static indices; load from a ref for dynamic ones)",
                  m, d, base_name);
        ok = false;
        continue;
      }
      if (!check_index_operand(v, op, base_name, first, d, pos, "", first_dyn,
                               end_dyn)) {
        ok = false;
        continue;
      }
    }
    switch (ix->kind) {
      case TSR_INDEX_FULL:
        view_dims[view_rank++] = dim;
        break;
      case TSR_INDEX_POINT:
        if (!dynamic && (ix->start < 0 || ix->start >= dim)) {
          vf_report(v, op->loc, "'%s' index %u of %%%s: %lld is out of range for dimension %lld",
                    m, d, base_name, (long long)ix->start, (long long)dim);
          ok = false;
        }
        break;
      case TSR_INDEX_SLICE: {
        const char *text = INDEX_TEXT(op, ix);
        if (ix->stride < 1) {
          vf_report(v, op->loc, "'%s' index %u of %%%s: %s has stride %lld, expected >= 1", m,
                    d, base_name, text, (long long)ix->stride);
          ok = false;
        } else if (ix->start < 0) {
          vf_report(v, op->loc, "'%s' index %u of %%%s: %s starts before 0", m, d, base_name,
                    text);
          ok = false;
        } else if (ix->stop > dim) {
          vf_report(v, op->loc, "'%s' index %u of %%%s: %s exceeds dimension %lld", m, d,
                    base_name, text, (long long)dim);
          ok = false;
        } else if (ix->start >= ix->stop) {
          vf_report(v, op->loc, "'%s' index %u of %%%s: %s is empty", m, d, base_name, text);
          ok = false;
        } else {
          int64_t size = (ix->stop - ix->start + ix->stride - 1) / ix->stride;
          if (ix->size != size) {
            vf_report(v, op->loc, "'%s' index %u of %%%s: %s has size %lld, expected %lld", m,
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
          vf_report(v, op->loc, "'%s' index %u of %%%s: %s has %s %lld, expected >= 1", m, d,
                    base_name, text, ix->size < 1 ? "size" : "stride",
                    (long long)(ix->size < 1 ? ix->size : ix->stride));
          ok = false;
          break;
        }
        if (ix->size > dim) {
          vf_report(v, op->loc, "'%s' index %u of %%%s: %s is larger than dimension %lld", m, d,
                    base_name, text, (long long)dim);
          ok = false;
          break;
        }
        if (!tsr_mul_i64(ix->size - 1, ix->stride, &extent) || extent >= dim) {
          vf_report(v, op->loc,
                    "'%s' index %u of %%%s: %s spans more elements than dimension %lld", m, d,
                    base_name, text, (long long)dim);
          ok = false;
          break;
        }
        extent += 1; /* elements from the first to the last one touched */
        if (!dynamic && ix->start < 0) {
          vf_report(v, op->loc, "'%s' index %u of %%%s: %s starts before 0", m, d, base_name,
                    text);
          ok = false;
        } else if (!dynamic && ix->start > dim - extent) {
          vf_report(v, op->loc, "'%s' index %u of %%%s: %s exceeds dimension %lld", m, d,
                    base_name, text, (long long)dim);
          ok = false;
        }
        view_dims[view_rank++] = ix->size;
        break;
      }
      case TSR_INDEX_DSIZE: {
        /* A size the run reads: only a DMA moves a view whose shape is not
         * static; the run checks it against the dimension (docs/dma.md). */
        const char *text = INDEX_TEXT(op, ix);
        if (!dma_view || !allow_dynamic) {
          vf_report(v, op->loc,
                    "'%s' index %u of %%%s: %s has a dynamic size, which only a DMA's source "
                    "or destination view may have (a loaded or stored value has a static "
                    "shape)",
                    m, d, base_name, text);
          ok = false;
          break;
        }
        if (ix->stride < 1) {
          vf_report(v, op->loc, "'%s' index %u of %%%s: %s has stride %lld, expected >= 1", m,
                    d, base_name, text, (long long)ix->stride);
          ok = false;
          break;
        }
        if (ix->size != (dim - 1) / ix->stride + 1) {
          vf_report(v, op->loc,
                    "'%s' index %u of %%%s: %s has the bound %lld, expected %lld (every "
                    "element of dimension %lld by stride %lld)",
                    m, d, base_name, text, (long long)ix->size,
                    (long long)((dim - 1) / ix->stride + 1), (long long)dim,
                    (long long)ix->stride);
          ok = false;
          break;
        }
        if (!dynamic && (ix->start < 0 || ix->start > dim)) {
          vf_report(v, op->loc, "'%s' index %u of %%%s: %s starts outside dimension %lld", m,
                    d, base_name, text, (long long)dim);
          ok = false;
          break;
        }
        if (!check_index_operand(v, op, base_name, first, d, ix->stop, ", the size", first_dyn,
                                 end_dyn)) {
          ok = false;
          break;
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
      used = index_uses(&op->indices[d], pos);
    if (!used) {
      vf_report(v, op->loc, "'%s' operand #%u (%%%s) is not used by any index", mnemonic(op),
                pos + 1, vname(op->operands[pos]));
      ok = false;
    }
  }
  return ok;
}

/* All indices of `op` as one view of `base` (load, store, slice). */
bool vf_check_indices(verifier_t *v, const tsr_op_t *op, const char *base_name,
                      const tsr_type_t *base, uint32_t first_dyn,
                      uint32_t end_dyn, bool allow_dynamic, tsr_type_t *out_view) {
  if (!check_view(v, op, base_name, base, 0, op->num_indices, first_dyn, end_dyn,
                  allow_dynamic, false, out_view))
    return false;
  return !allow_dynamic || check_index_operands_used(v, op, first_dyn, end_dyn);
}
/* load and store. Operands: load [ref, index operands.., mask?]; store
 * [ref, value, index operands.., mask?]. */
void vf_rule_memory(verifier_t *v, const tsr_op_t *op, bool is_load) {
  const char *m = mnemonic(op), *dir = is_load ? "from" : "to";
  const tsr_value_t *ref = op->operands[0];
  const tsr_type_t *rt = &ref->type;
  if (rt->kind != TSR_TYPE_REF) {
    vf_report(v, op->loc, "'%s' operand #1 (%%%s): expected a ref, found %s", m, vname(ref),
              TYPE_TEXT(rt));
    return;
  }
  if (rt->space == TSR_SPACE_HBM || rt->space == TSR_SPACE_ANY) {
    vf_report(v, op->loc, "'%s' %s %%%s: %s refs cannot be %s directly, only DMA'd (use dma_start)",
              m, dir, vname(ref), tsr_space_name((tsr_space_t)rt->space),
              is_load ? "loaded" : "stored to");
    return;
  }
  bool smem = rt->space == TSR_SPACE_SMEM;
  bool ok = true;
  if (smem && !smem_dtype_ok(rt->dtype)) {
    vf_report(v, op->loc, "'%s' %s %%%s: smem refs hold " SMEM_DTYPES_TEXT ", found %s",
              m, dir, vname(ref), TYPE_TEXT(rt));
    ok = false;
  }
  tsr_access_view_t access;
  if (tsr_opview_access_decode(op, &access) == TSR_OPVIEW_OPERANDS) {
    vf_report(v, op->loc, "'%s' has the mask flag but no mask operand", m);
    return;
  }
  bool has_mask = access.mask.slot >= 0;
  uint32_t first_dyn = access.first_dyn, end_dyn = access.end_dyn;
  if (op->num_indices != rt->rank) {
    vf_report(v, op->loc, "'%s' %s %%%s: expected %u indices (one per dimension of %s), found %u",
              m, dir, vname(ref), rt->rank, TYPE_TEXT(rt), op->num_indices);
    return;
  }
  tsr_type_t view;
  if (!vf_check_indices(v, op, vname(ref), rt, first_dyn, end_dyn, true, &view)) return;
  if (smem) {
    for (uint32_t d = 0; d < op->num_indices; d++) {
      if (op->indices[d].kind != TSR_INDEX_POINT) {
        vf_report(v, op->loc,
                  "'%s' %s %%%s: smem refs are %s one element at a time, but index %u is %s", m,
                  dir, vname(ref), is_load ? "read" : "written", d,
                  INDEX_TEXT(op, &op->indices[d]));
        return;
      }
    }
    if (has_mask) {
      vf_report(v, op->loc, "'%s' %s %%%s: masks are not allowed on smem refs", m, dir, vname(ref));
      return;
    }
  }
  if (!ok) return;
  char note[192];
  snprintf(note, sizeof note, " (the view of %%%s)", vname(ref));
  if (is_load) {
    vf_expect_result(v, op, 0, &view, note);
  } else {
    const tsr_value_t *value = access.stored.value;
    tsr_type_t scalar = tsr_type_scalar((tsr_dtype_t)rt->dtype);
    if (!tsr_type_equal(&value->type, &view) && !tsr_type_equal(&value->type, &scalar)) {
      if (view.kind == TSR_TYPE_SCALAR)
        vf_report(v, op->loc, "'store' operand #2 (%%%s): expected %s%s, found %s", vname(value),
                  TYPE_TEXT(&view), note, TYPE_TEXT(&value->type));
      else
        vf_report(v, op->loc, "'store' operand #2 (%%%s): expected %s%s or %s, found %s",
                  vname(value), TYPE_TEXT(&view), note, TYPE_TEXT(&scalar),
                  TYPE_TEXT(&value->type));
    }
  }
  if (has_mask) {
    uint32_t mi = (uint32_t)access.mask.slot;
    const tsr_value_t *mask = access.mask.value;
    if (view.kind != TSR_TYPE_VECTOR) {
      vf_report(v, op->loc,
                "'%s' operand #%u (%%%s, the mask): a mask needs a block view, but the view of "
                "%%%s is the scalar %s",
                m, mi + 1, vname(mask), vname(ref), TYPE_TEXT(&view));
      return;
    }
    tsr_type_t want = same_shape(&view, TSR_DTYPE_I1);
    vf_expect_operand(v, op, mi, &want, ", the mask");
  }
}
/* ---- DMA and semaphore ops (docs/dma.md) ------------------------------------------ */

/* One ref view or semaphore operand of a DMA or semaphore op: its view
 * (ir/opview.h) and what diagnostics call it. */
typedef struct view_part {
  const char *what; /* "source", "destination", "semaphore", "send semaphore" */
  tsr_opview_ref_t view;
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
      vf_report(v, op->loc, "'%s' takes no %s", mnemonic(op), optional[i].text);
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
  const tsr_value_t *ref = part->view.base.value;
  const tsr_type_t *rt = &ref->type;
  if (rt->kind != TSR_TYPE_REF) {
    vf_report(v, op->loc, "'%s' operand #%u (%%%s, the %s): expected a ref, found %s", m,
              part->view.base.slot + 1, vname(ref), part->what, TYPE_TEXT(rt));
    return false;
  }
  if (rt->space == TSR_SPACE_SMEM && !smem_dtype_ok(rt->dtype)) {
    vf_report(v, op->loc, "'%s' %s %%%s: smem refs hold " SMEM_DTYPES_TEXT ", found %s",
              m, part->what, vname(ref), TYPE_TEXT(rt));
    return false;
  }
  if (part->view.count != rt->rank) {
    if (rt->rank == 0)
      vf_report(v, op->loc, "'%s' %s %%%s: %s has rank 0 and takes no indices, found %u", m,
                part->what, vname(ref), TYPE_TEXT(rt), part->view.count);
    else
      vf_report(v, op->loc,
                "'%s' %s %%%s: expected %u ind%s (one per dimension of %s; ':' for a whole "
                "dimension), found %u",
                m, part->what, vname(ref), rt->rank, rt->rank == 1 ? "ex" : "ices", TYPE_TEXT(rt),
                part->view.count);
    return false;
  }
  return check_view(v, op, vname(ref), rt, part->view.first, part->view.count, first_dyn, end_dyn, true,
                    true, out_view);
}

/* A semaphore operand naming one semaphore: of `kind` (or of either kind if
 * `either`), with one point index per dimension (none for rank 0). */
static bool check_semaphore(verifier_t *v, const tsr_op_t *op, const view_part_t *part,
                            tsr_sem_kind_t kind, bool either, uint32_t first_dyn,
                            uint32_t end_dyn) {
  const char *m = mnemonic(op);
  const tsr_value_t *sem = part->view.base.value;
  const tsr_type_t *t = &sem->type;
  if (t->kind != TSR_TYPE_SEM || (!either && t->dtype != kind)) {
    const char *want = either                  ? "a semaphore (sem or dma_sem)"
                       : kind == TSR_SEM_DMA ? "a DMA semaphore (dma_sem)"
                                               : "a regular semaphore (sem)";
    vf_report(v, op->loc, "'%s' operand #%u (%%%s, the %s): expected %s, found %s", m,
              part->view.base.slot + 1, vname(sem), part->what, want, TYPE_TEXT(t));
    return false;
  }
  if (part->view.count != t->rank) {
    if (t->rank == 0)
      vf_report(v, op->loc, "'%s' %s %%%s: %s is one semaphore and takes no indices, found %u", m,
                part->what, vname(sem), TYPE_TEXT(t), part->view.count);
    else
      vf_report(v, op->loc,
                "'%s' %s %%%s: expected %u point ind%s (one per dimension of %s) naming one "
                "semaphore, found %u",
                m, part->what, vname(sem), t->rank, t->rank == 1 ? "ex" : "ices", TYPE_TEXT(t),
                part->view.count);
    return false;
  }
  for (uint32_t d = 0; d < part->view.count; d++) {
    const tsr_index_t *ix = &op->indices[part->view.first + d];
    if (ix->kind != TSR_INDEX_POINT) {
      vf_report(v, op->loc,
                "'%s' %s %%%s: index %u is %s, expected a point index (an integer or an i32 "
                "value) naming one semaphore",
                m, part->what, vname(sem), d, INDEX_TEXT(op, ix));
      return false;
    }
  }
  tsr_type_t view;
  return check_view(v, op, vname(sem), t, part->view.first, part->view.count, first_dyn, end_dyn, true,
                    false, &view);
}

/* Marks the dimensions of a DMA view (of `count` indices from `first`)
 * whose size the run reads. */
static void dynamic_view_dims(const tsr_op_t *op, uint32_t first, uint32_t count, bool *out) {
  uint32_t k = 0;
  for (uint32_t d = 0; d < count; d++) {
    const tsr_index_t *ix = &op->indices[first + d];
    if (ix->kind != TSR_INDEX_POINT) out[k++] = ix->kind == TSR_INDEX_DSIZE;
  }
}

/* A DMA's source and destination views have one dtype and shape; a
 * dimension of dynamic size on either side is compared when the run knows
 * it (the run's check: docs/dma.md). */
static bool dma_views_agree(const tsr_op_t *op, const tsr_dma_view_t *dma, const tsr_type_t *a,
                            const tsr_type_t *b) {
  if (tsr_type_equal(a, b)) return true;
  if (a->dtype != b->dtype || a->rank != b->rank) return false;
  bool dyn_a[TSR_MAX_RANK] = {false}, dyn_b[TSR_MAX_RANK] = {false};
  dynamic_view_dims(op, dma->src.first, dma->src.count, dyn_a);
  dynamic_view_dims(op, dma->dst.first, dma->dst.count, dyn_b);
  for (uint32_t d = 0; d < a->rank; d++)
    if (!dyn_a[d] && !dyn_b[d] && a->dims[d] != b->dims[d]) return false;
  return true;
}

/* dma_start and dma_wait. Operands [src, dst, sem, ssem?, index starts..,
 * device?]; ints = the index counts of src, dst and sem; the rest of the
 * indices are the send semaphore's (layout: ir/parse.c). */
void vf_rule_dma(verifier_t *v, const tsr_op_t *op) {
  const char *m = mnemonic(op);
  if (!check_view_op_flags(v, op, tsr_opview_allowed_flags(op->opcode))) return;
  tsr_dma_view_t dma;
  tsr_opview_status_t status = tsr_opview_dma_decode(op, &dma);
  uint32_t send = dma.send.base.slot >= 0 ? 1 : 0;
  uint32_t device = dma.device.slot >= 0 ? 1 : 0;
  uint32_t first_dyn = dma.first_dyn, end_dyn = dma.end_dyn;
  if (status == TSR_OPVIEW_OPERANDS) {
    vf_report(v, op->loc, "'%s' with%s%s takes at least %u operands, found %u", m,
              send ? " a send semaphore" : "", device ? (send ? " and a device" : " a device") : "",
              first_dyn + device, op->num_operands);
    return;
  }
  if (status == TSR_OPVIEW_NO_COUNTS) {
    vf_report(v, op->loc,
              "'%s' needs 3 index counts (of the source, destination and semaphore), found %u", m,
              op->num_ints);
    return;
  }
  if (status == TSR_OPVIEW_COUNTS) {
    vf_report(v, op->loc,
              "'%s' index counts %lld, %lld, %lld (source, destination, semaphore) do not match "
              "its %u indices",
              m, (long long)op->ints[0], (long long)op->ints[1], (long long)op->ints[2],
              op->num_indices);
    return;
  }
  const view_part_t parts[4] = {
      {"source", dma.src},
      {"destination", dma.dst},
      {"semaphore", dma.sem},
      {"send semaphore", dma.send},
  };
  tsr_type_t src_view, dst_view;
  bool src_ok = check_dma_view(v, op, &parts[0], first_dyn, end_dyn, &src_view);
  bool dst_ok = check_dma_view(v, op, &parts[1], first_dyn, end_dyn, &dst_view);
  bool ok = src_ok && dst_ok;
  /* A DMA may signal a regular semaphore on completion (by 1: Pallas on
   * TPU v6+, waited for with sem_wait); dma_wait counts a DMA semaphore's
   * bytes, so it takes a dma_sem only. */
  ok &= check_semaphore(v, op, &parts[2], TSR_SEM_DMA, op->opcode == TSR_OP_DMA_START, first_dyn,
                        end_dyn);
  if (send) ok &= check_semaphore(v, op, &parts[3], TSR_SEM_DMA, false, first_dyn, end_dyn);
  if (src_ok && dst_ok) {
    const tsr_value_t *src = dma.src.base.value, *dst = dma.dst.base.value;
    if (!dma_views_agree(op, &dma, &src_view, &dst_view)) {
      vf_report(v, op->loc,
                "'%s' source and destination views differ: %%%s gives %s, %%%s gives %s (a DMA "
                "copies between views of the same shape and dtype)",
                m, vname(src), TYPE_TEXT(&src_view), vname(dst), TYPE_TEXT(&dst_view));
      ok = false;
    } else if (dma.add && dclass(src_view.dtype) == TSR_CLASS_BOOL) {
      vf_report(v, op->loc,
                "'%s' add: %%%s and %%%s hold i1, which has no addition (add takes float or "
                "integer views)",
                m, vname(src), vname(dst));
      ok = false;
    }
  }
  if (ok) check_index_operands_used(v, op, first_dyn, end_dyn);
  tsr_type_t i32 = tsr_type_scalar(TSR_DTYPE_I32);
  if (device) vf_expect_operand(v, op, (uint32_t)dma.device.slot, &i32, ", the device");
}

/* sem_signal, sem_wait, sem_read and core_barrier. Operands [sem, amount
 * (sem_signal, sem_wait), index starts.., device?, core?]; every index is
 * the semaphore's. */
void vf_rule_semaphore(verifier_t *v, const tsr_op_t *op) {
  if (!check_view_op_flags(v, op, tsr_opview_allowed_flags(op->opcode))) return;
  tsr_sem_view_t sv;
  tsr_opview_status_t status = tsr_opview_sem_decode(op, &sv);
  uint32_t device = sv.device.slot >= 0 ? 1 : 0;
  uint32_t core = sv.core.slot >= 0 ? 1 : 0;
  if (status == TSR_OPVIEW_OPERANDS) {
    vf_report(v, op->loc, "'%s' with%s%s takes at least %u operands, found %u", mnemonic(op),
              device ? " a device" : "", core ? (device ? " and a core" : " a core") : "",
              sv.first_dyn + device + core, op->num_operands);
    return;
  }
  uint32_t first_dyn = sv.first_dyn, end_dyn = sv.end_dyn;
  const view_part_t part = {"semaphore", sv.sem};
  bool either = op->opcode == TSR_OP_SEM_READ;
  if (check_semaphore(v, op, &part, TSR_SEM_REGULAR, either, first_dyn, end_dyn))
    check_index_operands_used(v, op, first_dyn, end_dyn);
  tsr_type_t i32 = tsr_type_scalar(TSR_DTYPE_I32);
  if (sv.amount.slot >= 0) vf_expect_operand(v, op, (uint32_t)sv.amount.slot, &i32, ", the amount");
  if (device) vf_expect_operand(v, op, (uint32_t)sv.device.slot, &i32, ", the device");
  if (core) vf_expect_operand(v, op, (uint32_t)sv.core.slot, &i32, ", the core");
  if (op->opcode == TSR_OP_SEM_READ) vf_expect_result(v, op, 0, &i32, "");
}
