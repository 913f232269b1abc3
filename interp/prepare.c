/* Program preparation: turns a verified kernel into a flat instruction array
 * with jumps for control flow, a value table (each value's buffer in a
 * per-run frame, shared by values whose lives do not overlap), a ref table (blocks, scratch, scoped buffers) and one plan
 * per kernel operand for the grid pipeline. Everything the run needs is
 * copied into the program's arena, so the module can be destroyed.
 * Dispatch (compile_op): per family through family_table (size checked
 * against TSR_FAM_COUNT), then per op through the family's table expanded
 * from its rows of ir/ops.def, where its ops differ; the handlers choose
 * the instruction codes exec.c runs. A row without its entry does not
 * build; what an op lacks for one dtype (blockops.c) is TSR_UNIMPLEMENTED
 * naming the op, its location and the dtype. Store forwarding reads the op
 * table's effects. Where the values' buffers sit in the frame is frame.c's,
 * and the chip's memory budget budget.c's. */
#include <stdio.h>

#include "interp/interp_internal.h"
#include "ir/opview.h"

typedef struct prep {
  tsr_interp_program_t *p;
  const tsr_kernel_t *k;
  tsr_value_t **by_id; /* value id -> value */
  uint32_t *uses;      /* value id -> number of operand uses */
  uint32_t next_position; /* pre-order position (site_t) of the next op compiled */
  const tsr_op_t **scoped_ops; /* the scoped ops and their positions, */
  uint32_t *scoped_positions;  /* for the sites of their buffers */
  uint32_t num_scoped_ops;
  const char *op_what[TSR_OP_COUNT]; /* per opcode: its sites' text, or NULL */
} prep_t;

/* ---- Sites: ops are numbered by tsr_ir_walk_ops (ir/walk.c) ----------------
 * in pre-order, the index maps' ops first (in declaration order), then the
 * body's, terminators included. compile_region numbers the ops it visits
 * in the same order (regions in order, each op before its regions), so an
 * op's position is a counter there (a hash table from op to position was
 * 5% of preparing a 7k-op kernel); prepare() checks the count. */

/* The number of ops tsr_ir_walk_ops visits in a region. */
static uint32_t count_walked(const tsr_region_t *r) {
  uint32_t n = 0;
  for (const tsr_op_t *op = r->first; op; op = op->next) {
    n++;
    for (uint32_t i = 0; i < op->num_regions; i++) n += count_walked(&op->regions[i]);
  }
  return n;
}

static void note_scoped(void *ctx, const tsr_op_t *op, uint32_t position) {
  prep_t *ps = ctx;
  if (op->opcode != TSR_OP_SCOPED) return;
  ps->scoped_ops[ps->num_scoped_ops] = op;
  ps->scoped_positions[ps->num_scoped_ops++] = position;
}

/* The position of a scoped op (the site of its buffers). */
static uint32_t scoped_position(const prep_t *ps, const tsr_op_t *op) {
  for (uint32_t i = 0; i < ps->num_scoped_ops; i++)
    if (ps->scoped_ops[i] == op) return ps->scoped_positions[i];
  return UINT32_MAX;
}

static uint64_t align64(uint64_t x) { return (x + 63) & ~(uint64_t)63; }

static tsr_status_t emit(prep_t *ps, const insn_t *in, uint32_t *out_pc) {
  tsr_interp_program_t *p = ps->p;
  if (p->code_size == p->code_capacity) {
    uint32_t cap = p->code_capacity ? p->code_capacity * 2 : 64;
    insn_t *c = tsr_realloc(p->code, (size_t)cap * sizeof *c);
    if (!c) return TSR_OOM();
    p->code = c;
    p->code_capacity = cap;
  }
  if (out_pc) *out_pc = p->code_size;
  p->code[p->code_size++] = *in;
  return NULL;
}

/* A site whose `what` is already in the program's arena. */
static tsr_status_t add_site_owned(prep_t *ps, tsr_loc_t loc, const char *what,
                                   site_origin_t origin, uint32_t index, uint32_t sub,
                                   uint32_t *out_site) {
  tsr_interp_program_t *p = ps->p;
  if (p->num_sites == p->sites_capacity) {
    uint32_t cap = p->sites_capacity ? p->sites_capacity * 2 : 64;
    site_t *s = tsr_realloc(p->sites, (size_t)cap * sizeof *s);
    if (!s) return TSR_OOM();
    p->sites = s;
    p->sites_capacity = cap;
  }
  site_t *s = &p->sites[p->num_sites];
  s->loc.file = p->file;
  s->loc.line = loc.line;
  s->loc.col = loc.col;
  s->what = what;
  s->origin = (uint8_t)origin;
  s->index = index;
  s->sub = sub;
  *out_site = p->num_sites++;
  return NULL;
}

static tsr_status_t add_site(prep_t *ps, tsr_loc_t loc, const char *what,
                             site_origin_t origin, uint32_t index, uint32_t sub,
                             uint32_t *out_site) {
  const char *copy = tsr_arena_strndup(&ps->p->arena, what, strlen(what));
  if (!copy) return TSR_OOM();
  return add_site_owned(ps, loc, copy, origin, index, sub, out_site);
}

static void *plan_alloc(prep_t *ps, size_t size) {
  return tsr_arena_alloc(&ps->p->arena, size);
}

static uint32_t *ids_alloc(prep_t *ps, uint32_t count) {
  return tsr_arena_alloc_array(&ps->p->arena, count ? count : 1, sizeof(uint32_t));
}

/* ---- Value and ref discovery ---- */

static void count_uses(prep_t *ps, const tsr_region_t *r) {
  for (const tsr_op_t *op = r->first; op; op = op->next) {
    for (uint32_t i = 0; i < op->num_operands; i++)
      if (op->operands[i]->id < ps->k->num_values) ps->uses[op->operands[i]->id]++;
    for (uint32_t i = 0; i < op->num_regions; i++) count_uses(ps, &op->regions[i]);
  }
}

/* Store forwarding: `%v = OP ..` directly followed by `store %ref[..], %v`
 * (no mask), with %v used nowhere else, lets OP write into the ref and the
 * store skip its copy: one pass over the block fewer. It is one of the four
 * changes that together took the 64 MiB add from 12% to 77% of memcpy
 * (docs/benchmarks.md; their separate shares were not measured). Only ops
 * that compile to exactly one instruction of their own (not an alias or a
 * jump) writing a fresh result qualify: which ops may, and the shape of the
 * store, the op table says (tsr_op_forward_store). */
static bool forwards_to_store(const prep_t *ps, const tsr_op_t *op, const insn_t *in) {
  const tsr_op_t *st = tsr_op_forward_store(op);
  if (!st) return false;
  if (ps->uses[op->results[0]->id] != 1) return false;
  /* Not an op that reads the ref it would write (a load of an output block
   * stored back into it): a store covering a fresh output block skips the
   * block's fill (tsr_interp_exec's prepare_forward), which the load must
   * see. */
  int32_t read[2];
  uint32_t n = tsr_op_read_refs(op, read);
  uint32_t dst = ps->p->value_ref[st->operands[tsr_op_written_ref(st)]->id];
  for (uint32_t i = 0; i < n; i++)
    if (ps->p->value_ref[op->operands[read[i]]->id] == dst) return false;
  return in->code != XOP_ALIAS; /* an instruction of its own */
}

static void note_value(prep_t *ps, tsr_value_t *v) {
  if (v && v->id < ps->k->num_values) ps->by_id[v->id] = v;
}

static void walk_region_values(prep_t *ps, const tsr_region_t *r) {
  for (uint32_t i = 0; i < r->num_args; i++) note_value(ps, r->args[i]);
  for (const tsr_op_t *op = r->first; op; op = op->next) {
    for (uint32_t i = 0; i < op->num_results; i++) note_value(ps, op->results[i]);
    for (uint32_t i = 0; i < op->num_regions; i++)
      walk_region_values(ps, &op->regions[i]);
  }
}

static tsr_status_t add_ref(prep_t *ps, const tsr_value_t *v, tsr_role_t role,
                            int32_t decl, uint32_t *out_ref) {
  tsr_interp_program_t *p = ps->p;
  ref_info_t *ri = &p->refs[p->num_refs];
  memset(ri, 0, sizeof *ri);
  ri->name = tsr_arena_strndup(&p->arena, v->name, strlen(v->name));
  if (!ri->name) return TSR_OOM();
  ri->role = role;
  ri->decl = decl;
  ri->is_sem = v->type.kind == TSR_TYPE_SEM;
  ri->space = ri->is_sem ? TSR_SPACE_SMEM : v->type.space;
  ri->dtype = ri->is_sem ? TSR_DTYPE_I32 : v->type.dtype;
  ri->rank = v->type.rank;
  for (uint32_t i = 0; i < ri->rank; i++) ri->dims[i] = v->type.dims[i];
  ri->operand = -1;
  ri->elements = (uint64_t)tsr_type_element_count(&v->type);
  if (decl < 0 && !ri->is_sem && (ri->space == TSR_SPACE_HBM || ri->space == TSR_SPACE_ANY)) {
    ri->device_wide = true;
    ri->wide = p->num_wide++;
  }
  char what[96];
  snprintf(what, sizeof what, "%s %%%s",
           decl < 0 ? "scoped" : role == TSR_ROLE_SCRATCH ? "scratch"
                             : role == TSR_ROLE_IN ? "in"
                             : role == TSR_ROLE_OUT ? "out" : "prefetch",
           v->name);
  if (decl >= 0) {
    TSR_RETURN_IF_ERROR(add_site(ps, ps->k->decls[decl].loc, what, SITE_DECL,
                                 (uint32_t)decl, 0, &ri->site));
  } else {
    /* a scoped buffer: an argument of its scoped op's region */
    const tsr_op_t *scope = v->owner->parent_op;
    uint32_t arg = 0;
    while (arg < v->owner->num_args && v->owner->args[arg] != v) arg++;
    TSR_RETURN_IF_ERROR(add_site(ps, scope->loc, what, SITE_SCOPED,
                                 scoped_position(ps, scope), arg, &ri->site));
  }
  p->value_ref[v->id] = p->num_refs;
  *out_ref = p->num_refs++;
  return NULL;
}

/* Marks the refs that some op writes (stores, masked stores, DMA and DMA
 * add destinations, on this core or another): a load of any other ref may
 * borrow its memory, and an input block that no op writes may be read in
 * place from HBM. Scoped buffers are refilled at scope entry, but no value
 * loaded from one outlives it (region results are copied). */
static void mark_written(prep_t *ps, const tsr_region_t *r) {
  for (const tsr_op_t *op = r->first; op; op = op->next) {
    int32_t slot = tsr_op_written_ref(op);
    if (slot >= 0) {
      uint32_t ref = ps->p->value_ref[op->operands[slot]->id];
      if (ref != NO_VALUE) ps->p->refs[ref].written = true;
    }
    for (uint32_t i = 0; i < op->num_regions; i++) mark_written(ps, &op->regions[i]);
  }
}

static uint32_t count_scoped_ops(const tsr_region_t *r) {
  uint32_t n = 0;
  for (const tsr_op_t *op = r->first; op; op = op->next) {
    if (op->opcode == TSR_OP_SCOPED) n++;
    for (uint32_t i = 0; i < op->num_regions; i++) n += count_scoped_ops(&op->regions[i]);
  }
  return n;
}

static uint32_t count_scoped(const tsr_region_t *r) {
  uint32_t n = 0;
  for (const tsr_op_t *op = r->first; op; op = op->next) {
    if (op->opcode == TSR_OP_SCOPED) n += op->regions[0].num_args;
    for (uint32_t i = 0; i < op->num_regions; i++) n += count_scoped(&op->regions[i]);
  }
  return n;
}

/* ---- Compilation ---- */

static tsr_status_t compile_region(prep_t *ps, const tsr_region_t *r,
                                   const tsr_op_t **out_term);

/* An op's site; its text ('add') is made once per opcode and shared. */
static tsr_status_t op_site(prep_t *ps, const tsr_op_t *op, uint32_t position,
                            uint32_t *site) {
  const char *what = ps->op_what[op->opcode];
  if (!what) {
    char text[48];
    tsr_diag_format_op(text, sizeof text, op->opcode);
    what = ps->op_what[op->opcode] = tsr_arena_strndup(&ps->p->arena, text, strlen(text));
    if (!what) return TSR_OOM();
  }
  return add_site_owned(ps, op->loc, what, SITE_OP, position, 0, site);
}

static tsr_status_t emit_moves(prep_t *ps, uint32_t site, uint32_t count,
                               tsr_value_t *const *src, tsr_value_t *const *dst,
                               tsr_value_t *const *tmp) {
  if (!count) return NULL;
  move_plan_t *mp = plan_alloc(ps, sizeof *mp);
  if (!mp) return TSR_OOM();
  mp->count = count;
  mp->src = ids_alloc(ps, count);
  mp->dst = ids_alloc(ps, count);
  if (!mp->src || !mp->dst) return TSR_OOM();
  if (tmp) {
    mp->tmp = ids_alloc(ps, count);
    if (!mp->tmp) return TSR_OOM();
  }
  for (uint32_t i = 0; i < count; i++) {
    mp->src[i] = src[i]->id;
    mp->dst[i] = dst[i]->id;
    if (tmp) mp->tmp[i] = tmp[i]->id;
  }
  insn_t in = {.code = XOP_MOVE, .site = site, .plan = mp};
  return emit(ps, &in, NULL);
}

/* A view of `viewed` from op->indices[first..first + rank) (load/store/slice
 * views start at 0; DMA views follow each other). */
static void fill_view_at(const tsr_op_t *op, view_plan_t *vp, const tsr_type_t *viewed,
                         uint32_t first) {
  vp->rank = viewed->rank;
  vp->mask = NO_VALUE;
  tsr_blockops_dense_strides(viewed->rank, viewed->dims, vp->strides);
  for (uint32_t d = 0; d < viewed->rank; d++) {
    vp->dims[d] = viewed->dims[d];
    const tsr_index_t *ix = &op->indices[first + d];
    view_index_t *v = &vp->idx[d];
    v->kind = ix->kind;
    v->value = ix->operand >= 0 ? op->operands[ix->operand]->id : NO_VALUE;
    v->size_value = ix->kind == TSR_INDEX_DSIZE ? op->operands[ix->stop]->id : NO_VALUE;
    v->start = ix->kind == TSR_INDEX_FULL ? 0 : ix->start;
    v->stride = ix->kind == TSR_INDEX_FULL || ix->stride < 1 ? 1 : ix->stride;
    v->size = tsr_index_extent(ix, viewed->dims[d]);
  }
}

/* The semaphore operand `operand` of op, indexed by op->indices[first..+n). */
/* The plan of a semaphore ref of `op` (a typed view's, ir/opview.h). */
static void fill_sem(prep_t *ps, const tsr_op_t *op, const tsr_opview_ref_t *r,
                     sem_plan_t *sp) {
  const tsr_value_t *sem = r->base.value;
  view_plan_t vp;
  memset(&vp, 0, sizeof vp);
  fill_view_at(op, &vp, &sem->type, r->first);
  sp->ref = ps->p->value_ref[sem->id];
  sp->rank = sem->type.rank < r->count ? sem->type.rank : r->count;
  memcpy(sp->dims, vp.dims, sizeof sp->dims);
  memcpy(sp->idx, vp.idx, sizeof sp->idx);
  sp->amount = sp->device = sp->core = NO_VALUE;
}

/* A compound op whose operands do not have its typed view's layout: the
 * verifier rejects those, so this is a bug in whoever built the program. */
static tsr_status_t malformed(const tsr_interp_program_t *p, const tsr_op_t *op) {
  return TSR_STATUS(TSR_INTERNAL, "%s:%u:%u: '%s' does not have its operand layout",
                    p->file, op->loc.line, op->loc.col, tsr_op_table[op->opcode].mnemonic);
}

/* An op with no interpreter kernel for its operand dtype (blockops.c). */
static tsr_status_t not_implemented(const tsr_interp_program_t *p, const tsr_op_t *op,
                                    tsr_dtype_t dtype) {
  const char *m = tsr_op_table[op->opcode].mnemonic;
  return TSR_STATUS_AT_OP(TSR_UNIMPLEMENTED, ((tsr_loc_t){p->file, op->loc.line, op->loc.col}),
                          m, "op '%s' is not implemented in the interpreter for %s", m,
                          tsr_dtype_name(dtype));
}

/* ---- Dispatch: per family, then per op within it ----------------------------
 * compile_op fills what every instruction carries and calls the op's family
 * handler from family_table (indexed by the FAMILY column, size checked
 * against TSR_FAM_COUNT). A handler chooses the instruction code(s) exec.c
 * runs (XOP_*). Families whose ops differ look the op up in per_op_table,
 * expanded from those families' rows of ir/ops.def: a row added to such a
 * family without its PREP_<OP> entry does not build. The elementwise and
 * reduce families choose a block loop per op and dtype in blockops.c, and
 * an op it lacks for one dtype is TSR_UNIMPLEMENTED naming the op, its
 * location and the dtype. */

typedef tsr_status_t prep_fn(prep_t *ps, const tsr_op_t *op, insn_t *in);

/* An op's entry in per_op_table. */
typedef struct prep_entry {
  prep_fn *prep;
  uint16_t code; /* the instruction it compiles to (XOP_*), if one */
} prep_entry_t;

/* One instruction, with what compile_op filled in. */
static tsr_status_t prep_plain(prep_t *ps, const tsr_op_t *op, insn_t *in) {
  return emit(ps, in, NULL);
}

static tsr_status_t prep_const(prep_t *ps, const tsr_op_t *op, insn_t *in) {
  /* Filled once per run; no instruction. */
  tsr_interp_program_t *p = ps->p;
  uint32_t i = p->num_consts++;
  p->const_values[i] = op->results[0]->id;
  p->const_literals[i] = op->literal;
  return NULL;
}

/* A shape plan holding the result's dims (NULL: out of memory). */
static shape_plan_t *result_shape_plan(prep_t *ps, const tsr_op_t *op) {
  shape_plan_t *sp = plan_alloc(ps, sizeof *sp);
  if (!sp) return NULL;
  const tsr_type_t *t = &op->results[0]->type;
  sp->rank = t->rank;
  for (uint32_t i = 0; i < t->rank; i++) sp->dims[i] = t->dims[i];
  return sp;
}

/* An axis (program_id, num_programs, iota) and the result's dims. */
static tsr_status_t prep_axis(prep_t *ps, const tsr_op_t *op, insn_t *in) {
  shape_plan_t *sp = result_shape_plan(ps, op);
  if (!sp) return TSR_OOM();
  sp->axis = (uint32_t)op->ints[0];
  in->plan = sp;
  return emit(ps, in, NULL);
}

static tsr_status_t prep_access(prep_t *ps, const tsr_op_t *op, insn_t *in) {
  tsr_interp_program_t *p = ps->p;
  view_plan_t *vp = plan_alloc(ps, sizeof *vp);
  if (!vp) return TSR_OOM();
  tsr_access_view_t av;
  if (!tsr_opview_access(op, &av)) return malformed(p, op);
  const tsr_value_t *ref = av.ref.base.value;
  vp->ref = p->value_ref[ref->id];
  fill_view_at(op, vp, &ref->type, av.ref.first);
  if (av.mask.value) vp->mask = av.mask.value->id;
  in->dtype = ref->type.dtype;
  if (av.stored.value) {
    vp->value_scalar = av.stored.value->type.kind == TSR_TYPE_SCALAR;
    in->n = 1;
  }
  in->plan = vp;
  return emit(ps, in, NULL);
}

/* TSR_FAM_UNARY: the block loop for the operand dtype (blockops.c). */
static tsr_status_t prep_unary(prep_t *ps, const tsr_op_t *op, insn_t *in) {
  in->code = XOP_UNARY;
  in->fn.unary = tsr_blockops_unary(op->opcode, (tsr_dtype_t)in->dtype);
  if (!in->fn.unary) return not_implemented(ps->p, op, (tsr_dtype_t)in->dtype);
  return emit(ps, in, NULL);
}

/* TSR_FAM_BINARY, TSR_FAM_COMPARE: the same, with scalar broadcasting. */
static tsr_status_t prep_binary(prep_t *ps, const tsr_op_t *op, insn_t *in) {
  in->code = XOP_BINARY;
  in->fn.binary = tsr_blockops_binary(op->opcode, (tsr_dtype_t)in->dtype);
  if (!in->fn.binary) return not_implemented(ps->p, op, (tsr_dtype_t)in->dtype);
  bool as = op->operands[0]->type.kind == TSR_TYPE_SCALAR;
  bool bs = op->operands[1]->type.kind == TSR_TYPE_SCALAR;
  in->bcast = (uint8_t)(as && !bs ? TSR_BCAST_A_SCALAR
                        : bs && !as ? TSR_BCAST_B_SCALAR
                                    : TSR_BCAST_NONE);
  return emit(ps, in, NULL);
}

static tsr_status_t prep_select(prep_t *ps, const tsr_op_t *op, insn_t *in) {
  in->code = XOP_SELECT;
  in->dtype = op->operands[1]->type.dtype;
  in->bcast = (uint8_t)((op->operands[0]->type.kind == TSR_TYPE_SCALAR ? 1 : 0) |
                        (op->operands[1]->type.kind == TSR_TYPE_SCALAR ? 2 : 0) |
                        (op->operands[2]->type.kind == TSR_TYPE_SCALAR ? 4 : 0));
  return emit(ps, in, NULL);
}

static tsr_status_t prep_slice(prep_t *ps, const tsr_op_t *op, insn_t *in) {
  view_plan_t *vp = plan_alloc(ps, sizeof *vp);
  if (!vp) return TSR_OOM();
  tsr_slice_view_t sv;
  if (!tsr_opview_slice(op, &sv)) return malformed(ps->p, op);
  fill_view_at(op, vp, &sv.value.base.value->type, sv.value.first);
  vp->ref = NO_VALUE;
  in->plan = vp;
  return emit(ps, in, NULL);
}

/* broadcast, transpose: a copy of the operand through strides. */
static tsr_status_t prep_strided_copy(prep_t *ps, const tsr_op_t *op, insn_t *in) {
  shape_plan_t *sp = result_shape_plan(ps, op);
  if (!sp) return TSR_OOM();
  const tsr_type_t *rt = &op->results[0]->type;
  const tsr_type_t *at = &op->operands[0]->type;
  tsr_blockops_dense_strides(sp->rank, sp->dims, sp->strides);
  int64_t astr[TSR_MAX_RANK];
  tsr_blockops_dense_strides(at->rank, at->dims, astr);
  if (op->opcode == TSR_OP_TRANSPOSE) {
    for (uint32_t i = 0; i < rt->rank; i++)
      sp->src_strides[i] = astr[op->ints[i]];
  } else {
    /* numpy broadcasting: align from the right; size-1 dims repeat. */
    uint32_t off = rt->rank - (at->kind == TSR_TYPE_SCALAR ? 0 : at->rank);
    for (uint32_t i = 0; i < rt->rank; i++) {
      if (at->kind == TSR_TYPE_SCALAR || i < off) {
        sp->src_strides[i] = 0;
      } else {
        uint32_t j = i - off;
        sp->src_strides[i] = at->dims[j] == 1 ? 0 : astr[j];
      }
    }
  }
  in->plan = sp;
  return emit(ps, in, NULL);
}

static tsr_status_t prep_concatenate(prep_t *ps, const tsr_op_t *op, insn_t *in) {
  shape_plan_t *sp = result_shape_plan(ps, op);
  if (!sp) return TSR_OOM();
  tsr_blockops_dense_strides(sp->rank, sp->dims, sp->strides);
  sp->axis = (uint32_t)op->ints[0];
  sp->num_operands = op->num_operands;
  sp->operands = ids_alloc(ps, op->num_operands);
  sp->axis_sizes = tsr_arena_alloc_array(&ps->p->arena, op->num_operands, sizeof(int64_t));
  if (!sp->operands || !sp->axis_sizes) return TSR_OOM();
  for (uint32_t i = 0; i < op->num_operands; i++) {
    sp->operands[i] = op->operands[i]->id;
    sp->axis_sizes[i] = op->operands[i]->type.dims[sp->axis];
  }
  in->plan = sp;
  return emit(ps, in, NULL);
}

/* sort and argsort: the block's dims, the axis, and (argsort) the keys. */
static tsr_status_t prep_sort(prep_t *ps, const tsr_op_t *op, insn_t *in) {
  shape_plan_t *sp = result_shape_plan(ps, op);
  if (!sp) return TSR_OOM();
  sp->axis = (uint32_t)op->ints[0];
  sp->num_operands = op->num_operands;
  sp->operands = ids_alloc(ps, op->num_operands);
  sp->dtypes = tsr_arena_alloc_array(&ps->p->arena, op->num_operands, sizeof *sp->dtypes);
  if (!sp->operands || !sp->dtypes) return TSR_OOM();
  for (uint32_t i = 0; i < op->num_operands; i++) {
    sp->operands[i] = op->operands[i]->id;
    sp->dtypes[i] = (tsr_dtype_t)op->operands[i]->type.dtype;
  }
  in->plan = sp;
  return emit(ps, in, NULL);
}

/* roll, gather and the reductions: operand and result dims, and the axis
 * or (reductions over AXES) the mask of axes. */
static tsr_status_t prep_along_axes(prep_t *ps, const tsr_op_t *op, insn_t *in) {
  shape_plan_t *sp = result_shape_plan(ps, op);
  if (!sp) return TSR_OOM();
  const tsr_type_t *at = &op->operands[0]->type;
  sp->src_rank = at->rank;
  for (uint32_t i = 0; i < at->rank; i++) sp->src_dims[i] = at->dims[i];
  if (tsr_op_table[op->opcode].syntax == TSR_SYN_AXES) {
    for (uint32_t i = 0; i < op->num_ints; i++) sp->axes_mask |= 1u << op->ints[i];
  } else {
    sp->axis = (uint32_t)op->ints[0];
    if (op->opcode == TSR_OP_ROLL && op->num_ints == 3) {
      sp->stride = op->ints[1];
      sp->stride_axis = (uint32_t)op->ints[2];
    }
  }
  in->plan = sp;
  return emit(ps, in, NULL);
}

/* scatter: the indices' dims (the loop), the operand's (the result's), the axis. */
static tsr_status_t prep_scatter(prep_t *ps, const tsr_op_t *op, insn_t *in) {
  shape_plan_t *sp = plan_alloc(ps, sizeof *sp);
  if (!sp) return TSR_OOM();
  const tsr_type_t *it = &op->operands[1]->type, *at = &op->operands[0]->type;
  sp->rank = it->rank;
  for (uint32_t i = 0; i < it->rank; i++) sp->dims[i] = it->dims[i];
  sp->src_rank = at->rank;
  for (uint32_t i = 0; i < at->rank; i++) sp->src_dims[i] = at->dims[i];
  sp->axis = (uint32_t)op->ints[0];
  in->plan = sp;
  return emit(ps, in, NULL);
}

/* TSR_FAM_REDUCE, TSR_FAM_ARG_REDUCE: the kernel for the op and dtype. */
static tsr_status_t prep_reduce(prep_t *ps, const tsr_op_t *op, insn_t *in) {
  in->code = tsr_op_table[op->opcode].family == TSR_FAM_REDUCE ? XOP_REDUCE : XOP_ARG_REDUCE;
  if (!tsr_blockops_reduce_supported(op->opcode, (tsr_dtype_t)in->dtype))
    return not_implemented(ps->p, op, (tsr_dtype_t)in->dtype);
  return prep_along_axes(ps, op, in);
}

static tsr_status_t prep_dot(prep_t *ps, const tsr_op_t *op, insn_t *in) {
  shape_plan_t *sp = plan_alloc(ps, sizeof *sp);
  if (!sp) return TSR_OOM();
  const tsr_type_t *at = &op->operands[0]->type;
  const tsr_type_t *bt = &op->operands[1]->type;
  sp->m = at->dims[0];
  sp->k = at->dims[1];
  sp->n = (op->flags & TSR_OPF_TRANSPOSE_RHS) ? bt->dims[0] : bt->dims[1];
  in->code = XOP_DOT;
  in->plan = sp;
  return emit(ps, in, NULL);
}

/* print, assert: the text and the values it shows. */
/* multiple_of: the multiple, for the check exec.c makes. */
static tsr_status_t prep_multiple_of(prep_t *ps, const tsr_op_t *op, insn_t *in) {
  int64_t *multiple = plan_alloc(ps, sizeof *multiple);
  if (!multiple) return TSR_OOM();
  *multiple = op->ints[0];
  in->plan = multiple;
  return emit(ps, in, NULL);
}

static tsr_status_t prep_text(prep_t *ps, const tsr_op_t *op, insn_t *in) {
  text_plan_t *tp = plan_alloc(ps, sizeof *tp);
  if (!tp) return TSR_OOM();
  const char *t = op->text ? op->text : "";
  tp->text = tsr_arena_strndup(&ps->p->arena, t, strlen(t));
  tp->count = op->num_operands;
  tp->values = ids_alloc(ps, op->num_operands);
  if (!tp->text || !tp->values) return TSR_OOM();
  for (uint32_t i = 0; i < op->num_operands; i++) tp->values[i] = op->operands[i]->id;
  in->plan = tp;
  return emit(ps, in, NULL);
}

static tsr_status_t prep_if(prep_t *ps, const tsr_op_t *op, insn_t *in) {
  /* JMP_IF_NOT c -> else; then; moves; JMP end; else: ...; moves; end: */
  tsr_interp_program_t *p = ps->p;
  uint32_t site = in->site;
  tsr_if_view_t iv;
  if (!tsr_opview_if(op, &iv)) return malformed(p, op);
  const tsr_op_t *term;
  uint32_t jf, jend;
  insn_t j = {.code = XOP_JMP_IF_NOT, .site = site, .a = iv.cond->id};
  TSR_RETURN_IF_ERROR(emit(ps, &j, &jf));
  TSR_RETURN_IF_ERROR(compile_region(ps, iv.then_region, &term));
  if (term && op->num_results)
    TSR_RETURN_IF_ERROR(emit_moves(ps, site, op->num_results, term->operands,
                                   op->results, NULL));
  insn_t jmp = {.code = XOP_JMP, .site = site};
  TSR_RETURN_IF_ERROR(emit(ps, &jmp, &jend));
  p->code[jf].target = p->code_size;
  TSR_RETURN_IF_ERROR(compile_region(ps, iv.else_region, &term));
  if (term && op->num_results)
    TSR_RETURN_IF_ERROR(emit_moves(ps, site, op->num_results, term->operands,
                                   op->results, NULL));
  p->code[jend].target = p->code_size;
  return NULL;
}

static tsr_status_t prep_for(prep_t *ps, const tsr_op_t *op, insn_t *in) {
  tsr_interp_program_t *p = ps->p;
  uint32_t site = in->site;
  tsr_for_view_t fv;
  if (!tsr_opview_for(op, &fv)) return malformed(p, op);
  const tsr_region_t *body = fv.body;
  uint32_t carried = op->num_results;
  TSR_RETURN_IF_ERROR(emit_moves(ps, site, carried, fv.inits, fv.carried, NULL));
  insn_t init = {.code = XOP_FOR_INIT, .site = site, .r = fv.iv->id, .a = fv.lo->id,
                 .b = fv.hi->id, .c = fv.step->id};
  uint32_t pc_init;
  TSR_RETURN_IF_ERROR(emit(ps, &init, &pc_init));
  uint32_t body_pc = p->code_size;
  insn_t step = {.code = XOP_STEP, .site = site}; /* each iteration */
  TSR_RETURN_IF_ERROR(emit(ps, &step, NULL));
  const tsr_op_t *term;
  TSR_RETURN_IF_ERROR(compile_region(ps, body, &term));
  if (term && carried)
    TSR_RETURN_IF_ERROR(emit_moves(ps, site, carried, term->operands, fv.carried,
                                   op->results));
  insn_t next = init;
  next.code = XOP_FOR_NEXT;
  next.target = body_pc;
  TSR_RETURN_IF_ERROR(emit(ps, &next, NULL));
  p->code[pc_init].target = p->code_size;
  return emit_moves(ps, site, carried, fv.carried, op->results, NULL);
}

static tsr_status_t prep_while(prep_t *ps, const tsr_op_t *op, insn_t *in) {
  tsr_interp_program_t *p = ps->p;
  uint32_t site = in->site;
  tsr_while_view_t wv;
  if (!tsr_opview_while(op, &wv)) return malformed(p, op);
  const tsr_region_t *cond = wv.cond, *body = wv.body;
  uint32_t carried = op->num_results;
  TSR_RETURN_IF_ERROR(emit_moves(ps, site, carried, wv.inits, cond->args, NULL));
  uint32_t cond_pc = p->code_size;
  const tsr_op_t *cterm, *bterm;
  TSR_RETURN_IF_ERROR(compile_region(ps, cond, &cterm));
  if (!cterm) return TSR_STATUS(TSR_INTERNAL, "while without condition");
  uint32_t jf;
  insn_t j = {.code = XOP_JMP_IF_NOT, .site = site, .a = cterm->operands[0]->id};
  TSR_RETURN_IF_ERROR(emit(ps, &j, &jf));
  insn_t step = {.code = XOP_STEP, .site = site}; /* each iteration */
  TSR_RETURN_IF_ERROR(emit(ps, &step, NULL));
  TSR_RETURN_IF_ERROR(emit_moves(ps, site, carried, cond->args, body->args, NULL));
  TSR_RETURN_IF_ERROR(compile_region(ps, body, &bterm));
  if (bterm && carried)
    TSR_RETURN_IF_ERROR(emit_moves(ps, site, carried, bterm->operands,
                                   cond->args, op->results));
  insn_t jmp = {.code = XOP_JMP, .site = site, .target = cond_pc};
  TSR_RETURN_IF_ERROR(emit(ps, &jmp, NULL));
  p->code[jf].target = p->code_size;
  return emit_moves(ps, site, carried, cond->args, op->results, NULL);
}

static tsr_status_t prep_scoped(prep_t *ps, const tsr_op_t *op, insn_t *in) {
  tsr_interp_program_t *p = ps->p;
  uint32_t site = in->site;
  tsr_scoped_view_t sv;
  if (!tsr_opview_scoped(op, &sv)) return malformed(p, op);
  const tsr_region_t *body = sv.body;
  scope_plan_t *sp = plan_alloc(ps, sizeof *sp);
  if (!sp) return TSR_OOM();
  sp->count = sv.num_buffers;
  sp->refs = ids_alloc(ps, sv.num_buffers);
  if (!sp->refs) return TSR_OOM();
  for (uint32_t i = 0; i < sv.num_buffers; i++)
    sp->refs[i] = p->value_ref[sv.buffers[i]->id];
  insn_t enter = {.code = XOP_SCOPE_ENTER, .site = site, .plan = sp};
  TSR_RETURN_IF_ERROR(emit(ps, &enter, NULL));
  const tsr_op_t *term;
  TSR_RETURN_IF_ERROR(compile_region(ps, body, &term));
  if (term && op->num_results)
    TSR_RETURN_IF_ERROR(emit_moves(ps, site, op->num_results, term->operands,
                                   op->results, NULL));
  insn_t exit_in = {.code = XOP_SCOPE_EXIT, .site = site, .plan = sp};
  return emit(ps, &exit_in, NULL);
}

/* yield, condition: read by the parent op (compile_region). */
static tsr_status_t prep_terminator(prep_t *ps, const tsr_op_t *op, insn_t *in) {
  return TSR_STATUS(TSR_INTERNAL, "%s:%u:%u: '%s' outside its parent op", ps->p->file,
                    op->loc.line, op->loc.col, tsr_op_table[op->opcode].mnemonic);
}

/* The semaphore ops; a barrier is two instructions (signal, then wait). */
static tsr_status_t prep_sem_op(prep_t *ps, const tsr_op_t *op, insn_t *in) {
  sem_plan_t *sp = plan_alloc(ps, sizeof *sp);
  if (!sp) return TSR_OOM();
  tsr_sem_view_t sv;
  if (!tsr_opview_sem(op, &sv)) return malformed(ps->p, op);
  fill_sem(ps, op, &sv.sem, sp);
  if (sv.amount.value) sp->amount = sv.amount.value->id;
  if (sv.core.value) sp->core = sv.core.value->id;
  if (sv.device.value) sp->device = sv.device.value->id;
  in->plan = sp;
  if (in->code == XOP_BARRIER_WAIT) {
    insn_t signal = *in;
    signal.code = XOP_BARRIER_SIGNAL;
    TSR_RETURN_IF_ERROR(emit(ps, &signal, NULL));
  }
  return emit(ps, in, NULL);
}

static tsr_status_t prep_dma_op(prep_t *ps, const tsr_op_t *op, insn_t *in) {
  tsr_interp_program_t *p = ps->p;
  dma_plan_t *dp = plan_alloc(ps, sizeof *dp);
  if (!dp) return TSR_OOM();
  tsr_dma_view_t dv;
  if (!tsr_opview_dma(op, &dv)) return malformed(p, op);
  const tsr_value_t *src = dv.src.base.value, *dst = dv.dst.base.value;
  fill_view_at(op, &dp->src, &src->type, dv.src.first);
  fill_view_at(op, &dp->dst, &dst->type, dv.dst.first);
  dp->src.ref = p->value_ref[src->id];
  dp->dst.ref = p->value_ref[dst->id];
  fill_sem(ps, op, &dv.sem, &dp->sem);
  dp->has_send = dv.send.base.value != NULL;
  if (dp->has_send) fill_sem(ps, op, &dv.send, &dp->send);
  dp->add = dv.add;
  dp->device = dv.device.value ? dv.device.value->id : NO_VALUE;
  int64_t count = 1;
  for (uint32_t d = 0; d < dp->dst.rank; d++)
    if (dp->dst.idx[d].kind != TSR_INDEX_POINT) count *= dp->dst.idx[d].size;
  for (uint32_t d = 0; d < dp->src.rank; d++)
    dp->dynamic_size |= dp->src.idx[d].size_value != NO_VALUE;
  for (uint32_t d = 0; d < dp->dst.rank; d++)
    dp->dynamic_size |= dp->dst.idx[d].size_value != NO_VALUE;
  dp->bytes = count * (int64_t)tsr_dtype_size((tsr_dtype_t)dst->type.dtype);
  dp->signal_regular = dv.sem.base.value->type.dtype == TSR_SEM_REGULAR;
  dp->signal = dp->signal_regular ? 1 : dp->bytes;
  in->dtype = dst->type.dtype;
  in->plan = dp;
  return emit(ps, in, NULL);
}

/* The per-op entries of the families that have a per-op table. */
#define PREP_PROGRAM_ID {prep_axis, XOP_PROGRAM_ID}      /* TSR_FAM_QUERY */
#define PREP_NUM_PROGRAMS {prep_axis, XOP_NUM_PROGRAMS}
#define PREP_DEVICE_ID {prep_plain, XOP_DEVICE_ID}
#define PREP_CORE_ID {prep_plain, XOP_CORE_ID}
#define PREP_LOAD {prep_access, XOP_LOAD}                /* TSR_FAM_MEMORY */
#define PREP_STORE {prep_access, XOP_STORE}
#define PREP_CONVERT {prep_plain, XOP_CONVERT}           /* TSR_FAM_CONVERT */
#define PREP_BITCAST {prep_plain, XOP_ALIAS}
#define PREP_IOTA {prep_axis, XOP_IOTA}                  /* TSR_FAM_SHAPE */
#define PREP_BROADCAST {prep_strided_copy, XOP_STRIDED_COPY}
#define PREP_RESHAPE {prep_plain, XOP_ALIAS}
#define PREP_TRANSPOSE {prep_strided_copy, XOP_STRIDED_COPY}
#define PREP_SLICE {prep_slice, XOP_SLICE}
#define PREP_CONCATENATE {prep_concatenate, XOP_CONCATENATE}
#define PREP_ROLL {prep_along_axes, XOP_ROLL}
#define PREP_GATHER {prep_along_axes, XOP_GATHER}
#define PREP_SCATTER {prep_scatter, XOP_SCATTER}
#define PREP_SORT {prep_sort, XOP_SORT}
#define PREP_ARGSORT {prep_sort, XOP_ARGSORT}
#define PREP_FOR {prep_for, 0}                           /* TSR_FAM_CONTROL */
#define PREP_WHILE {prep_while, 0}
#define PREP_IF {prep_if, 0}
#define PREP_SCOPED {prep_scoped, 0}
#define PREP_YIELD {prep_terminator, 0}
#define PREP_CONDITION {prep_terminator, 0}
#define PREP_PRINT {prep_text, XOP_PRINT}                /* TSR_FAM_DEBUG */
#define PREP_ASSERT {prep_text, XOP_ASSERT}
#define PREP_MULTIPLE_OF {prep_multiple_of, XOP_MULTIPLE_OF} /* TSR_FAM_HINT */
#define PREP_DMA_START {prep_dma_op, XOP_DMA_START}         /* TSR_FAM_DMA */
#define PREP_DMA_WAIT {prep_dma_op, XOP_DMA_WAIT}
#define PREP_SEM_SIGNAL {prep_sem_op, XOP_SEM_SIGNAL}       /* TSR_FAM_SEMAPHORE */
#define PREP_SEM_WAIT {prep_sem_op, XOP_SEM_WAIT}
#define PREP_SEM_READ {prep_sem_op, XOP_SEM_READ}
#define PREP_CORE_BARRIER {prep_sem_op, XOP_BARRIER_WAIT}

/* The per-op table of those families: one X-macro expansion of ir/ops.def
 * in which PER_OP_<FAMILY> keeps the rows of the families listed here (a row
 * of a family with no line here does not build either). */
#define PER_OP_ENTRY(E) [TSR_OP_##E] = PREP_##E,
#define PER_OP_NONE(E)
#define PER_OP_CONST PER_OP_NONE
#define PER_OP_QUERY PER_OP_ENTRY
#define PER_OP_MEMORY PER_OP_ENTRY
#define PER_OP_UNARY PER_OP_NONE /* prep_unary: blockops.c's table */
#define PER_OP_BINARY PER_OP_NONE
#define PER_OP_COMPARE PER_OP_NONE
#define PER_OP_SELECT PER_OP_NONE
#define PER_OP_CONVERT PER_OP_ENTRY
#define PER_OP_SHAPE PER_OP_ENTRY
#define PER_OP_REDUCE PER_OP_NONE /* prep_reduce: blockops.c's table */
#define PER_OP_ARG_REDUCE PER_OP_NONE
#define PER_OP_DOT PER_OP_NONE
#define PER_OP_CONTROL PER_OP_ENTRY
#define PER_OP_DEBUG PER_OP_ENTRY
#define PER_OP_DMA PER_OP_ENTRY
#define PER_OP_SEMAPHORE PER_OP_ENTRY
#define PER_OP_HINT PER_OP_ENTRY
static const prep_entry_t per_op_table[TSR_OP_COUNT] = {
#define TSR_OP(E, m, syn, rule, fam, mino, maxo, nres, nreg, flags, text) PER_OP_##fam(E)
#include "ir/ops.def"
#undef TSR_OP
};

/* The handler of the families with a per-op table. */
static tsr_status_t prep_per_op(prep_t *ps, const tsr_op_t *op, insn_t *in) {
  const prep_entry_t *e = &per_op_table[op->opcode];
  in->code = e->code;
  return e->prep(ps, op, in);
}

/* Positional, in the order of tsr_family_t (ir/ir.h): a family added
 * without its entry makes the table one short, which the assert rejects. */
static prep_fn *const family_table[] = {
    prep_const,     /* CONST */
    prep_per_op,    /* QUERY */
    prep_per_op,    /* MEMORY */
    prep_unary,     /* UNARY */
    prep_binary,    /* BINARY */
    prep_binary,    /* COMPARE */
    prep_select,    /* SELECT */
    prep_per_op,    /* CONVERT */
    prep_per_op,    /* SHAPE */
    prep_reduce,    /* REDUCE */
    prep_reduce,    /* ARG_REDUCE */
    prep_dot,       /* DOT */
    prep_per_op,    /* CONTROL */
    prep_per_op,    /* DEBUG */
    prep_per_op,    /* DMA */
    prep_per_op,    /* SEMAPHORE */
    prep_per_op,    /* HINT */
};
_Static_assert(TSR_ARRAY_SIZE(family_table) == TSR_FAM_COUNT,
               "family_table: one prepare handler per TSR_FAM_ family");

static tsr_status_t compile_op(prep_t *ps, const tsr_op_t *op, uint32_t position) {
  uint32_t site;
  TSR_RETURN_IF_ERROR(op_site(ps, op, position, &site));
  insn_t in = {.site = site, .opcode = (uint8_t)op->opcode, .r = NO_VALUE,
               .a = NO_VALUE, .b = NO_VALUE, .c = NO_VALUE};
  in.flags = (uint8_t)op->flags;
  if (op->num_results) {
    in.r = op->results[0]->id;
    in.rdtype = op->results[0]->type.dtype;
    in.n = tsr_type_element_count(&op->results[0]->type);
  }
  if (op->num_operands > 0) {
    in.a = op->operands[0]->id;
    in.dtype = op->operands[0]->type.dtype;
  }
  if (op->num_operands > 1) in.b = op->operands[1]->id;
  if (op->num_operands > 2) in.c = op->operands[2]->id;
  return family_table[tsr_op_table[op->opcode].family](ps, op, &in);
}

/* Compiles the ops of a region except its terminator, which is returned. */
static tsr_status_t compile_region(prep_t *ps, const tsr_region_t *r,
                                   const tsr_op_t **out_term) {
  *out_term = NULL;
  for (const tsr_op_t *op = r->first; op; op = op->next) {
    uint32_t position = ps->next_position++;
    if (tsr_op_table[op->opcode].flags & TSR_F_TERMINATOR) {
      *out_term = op;
      continue;
    }
    uint32_t before = ps->p->code_size;
    TSR_RETURN_IF_ERROR(compile_op(ps, op, position));
    if (ps->p->code_size == before + 1 && forwards_to_store(ps, op, &ps->p->code[before]))
      ps->p->code[before].forward = 1;
  }
  return NULL;
}

static uint32_t count_region_ops(const tsr_region_t *r) {
  uint32_t n = 0;
  for (const tsr_op_t *op = r->first; op; op = op->next) {
    if (op->num_regions) n++;
    for (uint32_t i = 0; i < op->num_regions; i++) n += count_region_ops(&op->regions[i]);
  }
  return n;
}

static uint32_t count_consts(const tsr_region_t *r) {
  uint32_t n = 0;
  for (const tsr_op_t *op = r->first; op; op = op->next) {
    if (op->opcode == TSR_OP_CONST) n++;
    for (uint32_t i = 0; i < op->num_regions; i++) n += count_consts(&op->regions[i]);
  }
  return n;
}

/* ---- Index maps ---- */

static tsr_status_t plan_index_map(prep_t *ps, const tsr_decl_t *d,
                                   operand_plan_t *op) {
  const tsr_region_t *map = d->index_map;
  op->affine = true;
  for (uint32_t i = 0; i < op->array_rank; i++) {
    op->map_axis[i] = -1;
    op->map_const[i] = 0;
  }
  if (!map) return NULL;
  /* Affine when the map is only i32 consts and a yield of args/consts. */
  const tsr_op_t *yield = NULL;
  for (const tsr_op_t *o = map->first; o; o = o->next) {
    if (o->opcode == TSR_OP_YIELD) {
      yield = o;
    } else if (o->opcode != TSR_OP_CONST) {
      op->affine = false;
    }
  }
  if (!yield) return TSR_STATUS(TSR_INTERNAL, "index map without yield");
  if (op->affine) {
    for (uint32_t i = 0; i < yield->num_operands && i < op->array_rank; i++) {
      const tsr_value_t *v = yield->operands[i];
      if (v->def && v->def->opcode == TSR_OP_CONST) {
        op->map_const[i] = v->def->literal.i;
      } else {
        int32_t axis = -1;
        for (uint32_t a = 0; a < map->num_args; a++)
          if (map->args[a] == v) axis = (int32_t)a;
        if (axis < 0) {
          op->affine = false;
          break;
        }
        op->map_axis[i] = axis;
      }
    }
  }
  if (op->affine) return NULL;
  for (uint32_t a = 0; a < map->num_args; a++) op->map_args[a] = map->args[a]->id;
  for (uint32_t i = 0; i < op->array_rank; i++) op->map_results[i] = yield->operands[i]->id;
  op->map_pc = ps->p->code_size;
  ps->next_position = 0; /* the walk numbers the index maps first */
  for (uint32_t i = 0; i < op->decl; i++)
    if (ps->k->decls[i].index_map) ps->next_position += count_walked(ps->k->decls[i].index_map);
  const tsr_op_t *term;
  TSR_RETURN_IF_ERROR(compile_region(ps, map, &term));
  insn_t end = {.code = XOP_END, .site = op->site};
  return emit(ps, &end, NULL);
}

void tsr_interp_options_initialize(tsr_interp_options_t *options) {
  memset(options, 0, sizeof *options);
  options->uninit = TSR_UNINIT_NAN;
  options->check = true;
  options->chip = "v5e";
  options->max_errors = 20;
  options->progress_interval = 0.25;
}

/* ---- Entry point ---- */

static tsr_status_t prepare(prep_t *ps) {
  tsr_interp_program_t *p = ps->p;
  const tsr_kernel_t *k = ps->k;
  tsr_arena_t *A = &p->arena;
  p->kernel_name = tsr_arena_strndup(A, k->name, strlen(k->name));
  const char *file = k->module->filename ? k->module->filename : "<input>";
  p->file = tsr_arena_strndup(A, file, strlen(file));
  if (!p->kernel_name || !p->file) return TSR_OOM();
  p->grid_rank = k->grid_rank;
  p->total_steps = 1;
  for (uint32_t i = 0; i < k->grid_rank; i++) {
    p->grid[i] = k->grid[i];
    p->grid_bound[i] = k->grid_bound[i]; /* prefetch decls are the first operand plans */
    p->semantics[i] = k->semantics[i];
    if (!k->grid_bound[i]) p->total_steps *= (uint64_t)k->grid[i];
  }
  p->loc = k->loc;
  /* The run's split (run.c), which reads the dynamic extents. */
  if (!tsr_ir_kernel_has_dynamic_grid(k))
    p->split = tsr_ir_core_split(k->grid_rank, k->grid, k->semantics);
  p->host_split = tsr_ir_host_split_ok(k, NULL);

  /* Op positions, for sites. */
  p->num_walked_ops = tsr_ir_walk_ops(k, NULL, NULL);
  uint32_t nscoped = count_scoped_ops(&k->body);
  ps->scoped_ops = tsr_calloc(nscoped + 1, sizeof *ps->scoped_ops);
  ps->scoped_positions = tsr_calloc(nscoped + 1, sizeof *ps->scoped_positions);
  if (!ps->scoped_ops || !ps->scoped_positions) return TSR_OOM();
  if (nscoped) tsr_ir_walk_ops(k, note_scoped, ps);
  /* The code and the sites at about their final sizes: grown by doubling,
   * their copies were a third of the page faults of preparing a 7k-op
   * kernel. An instruction per op, up to 7 more per op with regions (the
   * moves, jumps and steps of loops), an end per index map; a site per op
   * and 2 per declaration. Growth still handles any excess. */
  uint64_t insns = (uint64_t)p->num_walked_ops + 7ull * count_region_ops(&k->body) +
                   k->num_decls + 2;
  for (uint32_t i = 0; i < k->num_decls; i++)
    if (k->decls[i].index_map) insns += 7ull * count_region_ops(k->decls[i].index_map);
  if (insns < UINT32_MAX / 2) {
    p->code = tsr_malloc((size_t)insns * sizeof *p->code);
    if (!p->code) return TSR_OOM();
    p->code_capacity = (uint32_t)insns;
  }
  uint64_t sites = (uint64_t)p->num_walked_ops + 2ull * k->num_decls + 4;
  if (sites < UINT32_MAX / 2) {
    p->sites = tsr_malloc((size_t)sites * sizeof *p->sites);
    if (!p->sites) return TSR_OOM();
    p->sites_capacity = (uint32_t)sites;
  }

  /* Values. */
  p->num_values = k->num_values;
  ps->by_id = tsr_calloc(k->num_values ? k->num_values : 1, sizeof *ps->by_id);
  ps->uses = tsr_calloc(k->num_values ? k->num_values : 1, sizeof *ps->uses);
  if (!ps->uses) return TSR_OOM();
  count_uses(ps, &k->body);
  p->values = tsr_arena_alloc_array(A, k->num_values + 1, sizeof *p->values);
  p->value_ref = tsr_arena_alloc_array(A, k->num_values + 1, sizeof *p->value_ref);
  if (!ps->by_id || !p->values || !p->value_ref) return TSR_OOM();
  for (uint32_t i = 0; i < k->num_values; i++) p->value_ref[i] = NO_VALUE;
  for (uint32_t i = 0; i < k->num_decls; i++) {
    note_value(ps, k->decls[i].ref);
    if (k->decls[i].index_map) walk_region_values(ps, k->decls[i].index_map);
  }
  walk_region_values(ps, &k->body);
  bool alias_ops[TSR_OP_COUNT]; /* reshape, bitcast: XOP_ALIAS reads the operand's buffer */
  for (int op = 0; op < TSR_OP_COUNT; op++)
    alias_ops[op] = family_table[tsr_op_table[op].family] == prep_per_op &&
                    per_op_table[op].code == XOP_ALIAS;
  TSR_RETURN_IF_ERROR(tsr_interp_assign_frame_slots(p, k, ps->by_id, alias_ops));

  /* Refs: decls, then scoped buffers. */
  uint32_t max_refs = k->num_decls + count_scoped(&k->body);
  p->refs = tsr_arena_alloc_array(A, max_refs + 1, sizeof *p->refs);
  if (!p->refs) return TSR_OOM();
  for (uint32_t i = 0; i < k->num_decls; i++) {
    uint32_t ref;
    TSR_RETURN_IF_ERROR(add_ref(ps, k->decls[i].ref, k->decls[i].role, (int32_t)i, &ref));
  }
  for (uint32_t i = 0; i < k->num_values; i++) {
    const tsr_value_t *v = ps->by_id[i];
    if (v && v->type.kind == TSR_TYPE_REF && v->owner && v->owner->parent_op &&
        v->owner->parent_op->opcode == TSR_OP_SCOPED) {
      uint32_t ref;
      TSR_RETURN_IF_ERROR(add_ref(ps, v, TSR_ROLE_SCRATCH, -1, &ref));
    }
  }
  mark_written(ps, &k->body);

  /* Operand plans. */
  uint32_t n_ops = 0;
  for (uint32_t i = 0; i < k->num_decls; i++)
    if (k->decls[i].role != TSR_ROLE_SCRATCH) n_ops++;
  p->num_operands = n_ops;
  p->operands = tsr_arena_alloc_array(A, n_ops + 1, sizeof *p->operands);
  if (!p->operands) return TSR_OOM();
  for (uint32_t i = 0, j = 0; i < k->num_decls; i++) {
    const tsr_decl_t *d = &k->decls[i];
    if (d->role == TSR_ROLE_SCRATCH) continue;
    operand_plan_t *op = &p->operands[j++];
    op->decl = i;
    op->ref = p->value_ref[d->ref->id];
    op->role = d->role;
    op->alias = -1;
    op->revisit_any = d->role == TSR_ROLE_OUT && d->revisit == TSR_REVISIT_ANY;
    op->fixed_dims = tsr_ir_output_fixed_dims(k, d);
    op->array_rank = d->array.rank;
    for (uint32_t a = 0; a < d->array.rank; a++) {
      op->array_dims[a] = d->array.dims[a];
      op->block[a] = d->block[a] == TSR_SQUEEZED ? 1 : d->block[a];
      op->element[a] = d->element[a];
      op->pad_low[a] = d->pad_low[a];
      op->padded_dims[a] = d->pad_low[a] + d->array.dims[a] + d->pad_high[a];
      op->any_element |= d->element[a];
    }
    tsr_blockops_dense_strides(op->array_rank, op->array_dims, op->array_strides);
    op->array_elements = (uint64_t)tsr_type_element_count(&d->array);
    uint8_t space = d->ref->type.space;
    op->sem = d->ref->type.kind == TSR_TYPE_SEM;
    op->hbm_direct = d->role != TSR_ROLE_PREFETCH && !op->sem &&
                     (space == TSR_SPACE_HBM || space == TSR_SPACE_ANY);
    op->blocked = d->role != TSR_ROLE_PREFETCH && !op->hbm_direct && !op->sem;
    char what[96];
    snprintf(what, sizeof what, "%s %%%s",
             d->role == TSR_ROLE_IN ? "in" : d->role == TSR_ROLE_OUT ? "out" : "prefetch",
             d->ref->name);
    TSR_RETURN_IF_ERROR(add_site(ps, d->loc, what, SITE_DECL, i, 0, &op->site));
    p->refs[op->ref].operand = (int32_t)(j - 1);
  }
  /* Aliases: decl index -> operand plan index. */
  for (uint32_t j = 0; j < n_ops; j++) {
    const tsr_decl_t *d = &k->decls[p->operands[j].decl];
    if (d->role != TSR_ROLE_OUT || d->alias < 0) continue;
    for (uint32_t m = 0; m < n_ops; m++) {
      if (p->operands[m].decl == (uint32_t)d->alias) {
        p->operands[j].alias = (int32_t)m;
        p->operands[m].aliased = true;
      }
    }
  }
  /* Shadows: everything but read-only inputs and prefetch tables. */
  for (uint32_t i = 0; i < p->num_refs; i++) {
    ref_info_t *r = &p->refs[i];
    /* How far accesses reach: the logical shape, or the tiled one a TPU
     * allocates (SMEM and semaphores are never padded). */
    memcpy(r->limit, r->dims, sizeof r->limit);
    if (p->options.padded && !r->is_sem && r->space != TSR_SPACE_SMEM)
      tsr_interp_padded_dims(p->options.chip, (tsr_dtype_t)r->dtype, r->rank, r->dims,
                             r->limit);
    r->shadowed = p->options.check && !r->is_sem &&
                  !(r->role == TSR_ROLE_IN || r->role == TSR_ROLE_PREFETCH);
  }
  /* Own buffers of refs (blocks, scratch, scoped) in the run's VMEM arena. */
  uint64_t voff = 0;
  for (uint32_t i = 0; i < p->num_refs; i++) {
    ref_info_t *r = &p->refs[i];
    r->offset = voff;
    uint64_t bytes = r->elements * tsr_dtype_size((tsr_dtype_t)r->dtype);
    r->has_buffer = !r->device_wide && !r->is_sem &&
                    (r->operand < 0 || !p->operands[r->operand].hbm_direct);
    if (r->has_buffer) voff = align64(voff + (bytes ? bytes : 1));
  }
  p->vmem_bytes = voff;

  TSR_RETURN_IF_ERROR(tsr_interp_check_budget(p, (tsr_loc_t){p->file, k->loc.line, k->loc.col}));

  /* Code: consts are collected, body first, then non-affine index maps. */
  uint32_t nconst = count_consts(&k->body);
  for (uint32_t i = 0; i < k->num_decls; i++)
    if (k->decls[i].index_map) nconst += count_consts(k->decls[i].index_map);
  p->const_values = tsr_arena_alloc_array(A, nconst + 1, sizeof *p->const_values);
  p->const_literals = tsr_arena_alloc_array(A, nconst + 1, sizeof *p->const_literals);
  if (!p->const_values || !p->const_literals) return TSR_OOM();
  p->body_pc = 0;
  ps->next_position = p->num_walked_ops - count_walked(&k->body);
  const tsr_op_t *term;
  TSR_RETURN_IF_ERROR(compile_region(ps, &k->body, &term));
  if (ps->next_position != p->num_walked_ops)
    return TSR_STATUS(TSR_INTERNAL, "prepare: %u ops compiled in the walk's order, %u walked",
                      ps->next_position, p->num_walked_ops);
  uint32_t end_site;
  TSR_RETURN_IF_ERROR(add_site(ps, k->loc, "kernel", SITE_KERNEL, 0, 0, &end_site));
  TSR_RETURN_IF_ERROR(add_site(ps, k->loc, "the grid step", SITE_KERNEL, 0, 0, &p->grid_site));
  insn_t end = {.code = XOP_END, .site = end_site};
  TSR_RETURN_IF_ERROR(emit(ps, &end, NULL));
  for (uint32_t j = 0; j < n_ops; j++) {
    operand_plan_t *op = &p->operands[j];
    if (!op->blocked) continue;
    TSR_RETURN_IF_ERROR(plan_index_map(ps, &k->decls[op->decl], op));
  }
  return NULL;
}

tsr_status_t tsr_interp_program_prepare(const tsr_ir_kernel_t *kernel,
                                        const tsr_interp_options_t *options,
                                        tsr_interp_program_t **out_program) {
  tsr_interp_program_t *p = tsr_calloc(1, sizeof *p);
  if (!p) return TSR_OOM();
  tsr_arena_initialize(&p->arena);
  for (uint32_t i = 0; i < TSR_INTERP_SPARES; i++) atomic_init(&p->spare[i], NULL);
  p->sort_scratch = tsr_sort_scratch_create();
  if (options) {
    p->options = *options;
  } else {
    tsr_interp_options_initialize(&p->options);
  }
  if (!p->options.max_errors) p->options.max_errors = 20;
  if (!p->options.chip) p->options.chip = "v5e";
  prep_t ps = {.p = p, .k = kernel};
  tsr_status_t s = prepare(&ps);
  tsr_free(ps.by_id);
  tsr_free(ps.uses);
  tsr_free(ps.scoped_ops);
  tsr_free(ps.scoped_positions);
  if (s) {
    tsr_interp_program_destroy(p);
    return s;
  }
  /* options.chip may point at caller memory: keep our own copy. */
  p->options.chip = tsr_arena_strndup(&p->arena, p->options.chip,
                                      strlen(p->options.chip));
  if (p->options.trace_path)
    p->options.trace_path = tsr_arena_strndup(&p->arena, p->options.trace_path,
                                              strlen(p->options.trace_path));
  if (!p->options.chip || (options && options->trace_path && !p->options.trace_path)) {
    tsr_interp_program_destroy(p);
    return TSR_OOM();
  }
  /* So may parallel_order. */
  if (p->options.parallel_order && p->options.parallel_order_size) {
    size_t bytes = p->options.parallel_order_size * sizeof(int64_t);
    int64_t *order = tsr_arena_alloc(&p->arena, bytes);
    if (!order) {
      tsr_interp_program_destroy(p);
      return TSR_OOM();
    }
    memcpy(order, p->options.parallel_order, bytes);
    p->options.parallel_order = order;
  } else {
    p->options.parallel_order = NULL;
    p->options.parallel_order_size = 0;
  }
  *out_program = p;
  return NULL;
}

size_t tsr_interp_program_footprint(const tsr_interp_program_t *p) {
  return sizeof *p + p->arena.total + (size_t)p->code_capacity * sizeof *p->code +
         (size_t)p->sites_capacity * sizeof *p->sites;
}

void tsr_interp_program_destroy(tsr_interp_program_t *program) {
  if (!program) return;
  tsr_interp_free_spares(program);
  tsr_sort_scratch_destroy(program->sort_scratch);
  if (!program->base) tsr_free(program->code); /* bound programs share it */
  tsr_free(program->sites);
  tsr_arena_deinitialize(&program->arena);
  void (*release)(void *) = program->release;
  void *release_ctx = program->release_ctx;
  tsr_free(program);
  if (release) release(release_ctx);
}
