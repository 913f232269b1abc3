/* Walks over a kernel shared by the interpreter, the lowering and the
 * runtime: the pre-order numbering of ops (diagnostic sites), the
 * numbering of a core's semaphores (semaphore slots), and how the grid is
 * split between cores. */
#include "ir/ir.h"

static uint32_t walk_region(const tsr_region_t *r, uint32_t n, tsr_ir_op_visit_fn visit,
                            void *ctx) {
  for (const tsr_op_t *op = r->first; op; op = op->next) {
    if (visit) visit(ctx, op, n);
    n++;
    for (uint32_t i = 0; i < op->num_regions; i++) n = walk_region(&op->regions[i], n, visit, ctx);
  }
  return n;
}

uint32_t tsr_ir_walk_ops(const tsr_kernel_t *k, tsr_ir_op_visit_fn visit, void *ctx) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < k->num_decls; i++)
    if (k->decls[i].index_map) n = walk_region(k->decls[i].index_map, n, visit, ctx);
  return walk_region(&k->body, n, visit, ctx);
}

static uint64_t sem_elements(const tsr_type_t *t) {
  uint64_t n = 1;
  for (uint32_t d = 0; d < t->rank; d++) n *= (uint64_t)t->dims[d];
  return n;
}

typedef struct slots {
  tsr_ir_sem_visit_fn visit;
  void *ctx;
  uint64_t next;
} slots_t;

static void scoped_sems(void *p, const tsr_op_t *op, uint32_t position) {
  (void)position;
  slots_t *s = p;
  if (op->opcode != TSR_OP_SCOPED || !op->num_regions) return;
  const tsr_region_t *r = &op->regions[0];
  for (uint32_t i = 0; i < r->num_args; i++) {
    if (r->args[i]->type.kind != TSR_TYPE_SEM) continue;
    if (s->visit) s->visit(s->ctx, r->args[i], s->next);
    s->next += sem_elements(&r->args[i]->type);
  }
}

/* Whether decl i is a semaphore output aliasing a semaphore input: it
 * names the input's semaphores, not semaphores of its own. */
static bool sem_decl_shared(const tsr_kernel_t *k, uint32_t i) {
  const tsr_decl_t *d = &k->decls[i];
  return d->role == TSR_ROLE_OUT && d->alias >= 0 && (uint32_t)d->alias < i &&
         k->decls[d->alias].ref && k->decls[d->alias].ref->type.kind == TSR_TYPE_SEM;
}

uint64_t tsr_ir_semaphore_slots(const tsr_kernel_t *k, tsr_ir_sem_visit_fn visit, void *ctx) {
  slots_t s = {visit, ctx, 0};
  for (uint32_t i = 0; i < k->num_decls; i++) {
    const tsr_value_t *ref = k->decls[i].ref;
    if (!ref || ref->type.kind != TSR_TYPE_SEM) continue;
    if (sem_decl_shared(k, i)) {
      /* the aliased input's slots: the first of them is the sum before it */
      uint64_t first = 0;
      for (uint32_t j = 0; j < (uint32_t)k->decls[i].alias; j++)
        if (k->decls[j].ref && k->decls[j].ref->type.kind == TSR_TYPE_SEM &&
            !sem_decl_shared(k, j))
          first += sem_elements(&k->decls[j].ref->type);
      if (visit) visit(ctx, ref, first);
      continue;
    }
    if (visit) visit(ctx, ref, s.next);
    s.next += sem_elements(&ref->type);
  }
  tsr_ir_walk_ops(k, scoped_sems, &s);
  return s.next;
}

tsr_ir_core_split_t tsr_ir_core_split(uint32_t grid_rank, const int64_t *grid,
                                      const uint8_t *semantics) {
  tsr_ir_core_split_t s = {0, 0, 1};
  for (uint32_t d = 0; d < grid_rank; d++) {
    if (semantics[d] != TSR_DIM_CORE_PARALLEL) continue;
    s.first = d;
    s.end = d + 1;
    s.points = (uint64_t)grid[d];
    return s;
  }
  while (s.end < grid_rank && semantics[s.end] == TSR_DIM_PARALLEL)
    s.points *= (uint64_t)grid[s.end++];
  return s;
}

bool tsr_ir_parallel_order_check(uint32_t grid_rank, const int64_t *grid,
                                 const uint8_t *semantics, const int64_t *order,
                                 uint64_t size, const char **why) {
  uint64_t need = 0;
  for (uint32_t d = 0; d < grid_rank && semantics[d] == TSR_DIM_PARALLEL; d++)
    need += (uint64_t)(grid[d] > 0 ? grid[d] : 0);
  if (size != need) {
    *why = "its size is not the sum of the leading parallel grid extents";
    return false;
  }
  uint64_t offset = 0;
  for (uint32_t d = 0; d < grid_rank && semantics[d] == TSR_DIM_PARALLEL; d++) {
    int64_t n = grid[d] > 0 ? grid[d] : 0;
    /* Each entry in [0, n), and none twice: n entries in [0, n) without a
     * repeat are a permutation. A repeat is found by marking. */
    uint8_t *seen = tsr_calloc((size_t)n + 1, 1);
    if (!seen) {
      *why = "out of memory checking it";
      return false;
    }
    bool ok = true;
    for (int64_t i = 0; i < n && ok; i++) {
      int64_t v = order[offset + (uint64_t)i];
      ok = v >= 0 && v < n && !seen[v];
      if (ok) seen[v] = 1;
    }
    tsr_free(seen);
    if (!ok) {
      *why = "its entries for a dim are not a permutation of that dim's points";
      return false;
    }
    offset += (uint64_t)n;
  }
  return true;
}

void tsr_ir_core_share(const tsr_ir_core_split_t *split, uint32_t cores, uint32_t core,
                       uint64_t *lo, uint64_t *hi) {
  uint64_t per = (split->points + cores - 1) / cores;
  *lo = TSR_MIN((uint64_t)core * per, split->points);
  *hi = TSR_MIN(*lo + per, split->points);
}

/* Whether the body may write through a ref that reaches a prefetch table
 * (a prefetch decl's ref, or a ref some op derives, which could view one):
 * the index maps reading a table then see values that change between
 * steps. */
static bool writes_prefetch_region(const tsr_kernel_t *k, const tsr_region_t *r) {
  for (const tsr_op_t *op = r->first; op; op = op->next) {
    int32_t w = tsr_op_written_ref(op);
    if (w >= 0 && (uint32_t)w < op->num_operands) {
      const tsr_value_t *v = op->operands[w];
      if (v->def) return true;
      if (v->decl >= 0 && k->decls[v->decl].role == TSR_ROLE_PREFETCH) return true;
    }
    for (uint32_t i = 0; i < op->num_regions; i++)
      if (writes_prefetch_region(k, &op->regions[i])) return true;
  }
  return false;
}

uint32_t tsr_ir_output_fixed_dims(const tsr_kernel_t *k, const tsr_decl_t *d) {
  if (!k->grid_rank || k->grid_rank > 32) return 0;
  const uint32_t all = k->grid_rank == 32 ? UINT32_MAX : (1u << k->grid_rank) - 1;
  if (d->role != TSR_ROLE_OUT || !d->ref || d->ref->type.kind == TSR_TYPE_SEM ||
      (d->ref->type.space != TSR_SPACE_VMEM && d->ref->type.space != TSR_SPACE_SMEM))
    return 0;
  const tsr_region_t *map = d->index_map;
  if (!map) return all;
  /* per value: the grid indices it depends on */
  uint32_t *dep = tsr_calloc((size_t)k->num_values + 1, sizeof *dep);
  if (!dep) return 0; /* unknown: nothing is reported */
  const bool tables_change = writes_prefetch_region(k, &k->body);
  for (uint32_t a = 0; a < map->num_args && a < 32; a++)
    if (map->args[a]->id < k->num_values) dep[map->args[a]->id] = 1u << a;
  uint32_t used = 0;
  for (const tsr_op_t *op = map->first; op; op = op->next) {
    uint32_t m = op->num_regions ? all : 0;
    for (uint32_t i = 0; i < op->num_operands; i++) {
      const tsr_value_t *v = op->operands[i];
      if (v->id < k->num_values) m |= dep[v->id];
      if (v->type.kind == TSR_TYPE_REF && tables_change) m = all;
    }
    if (op->opcode == TSR_OP_YIELD) used |= m;
    for (uint32_t i = 0; i < op->num_results; i++)
      if (op->results[i]->id < k->num_values) dep[op->results[i]->id] = m;
  }
  tsr_free(dep);
  return all & ~used;
}

int32_t tsr_ir_parallel_revisit_dim(uint32_t grid_rank, const int64_t *grid,
                                    const uint8_t *semantics, uint32_t fixed) {
  for (uint32_t g = 0; g < grid_rank && g < 32; g++)
    if ((fixed >> g & 1) && grid[g] > 1 &&
        (semantics[g] == TSR_DIM_PARALLEL || semantics[g] == TSR_DIM_CORE_PARALLEL))
      return (int32_t)g;
  return -1;
}

/* ---- Host threads (docs/semantics.md, "Host threads") -------------------- */

static bool region_uses_value(const tsr_region_t *r, const tsr_value_t *v) {
  for (const tsr_op_t *op = r->first; op; op = op->next) {
    for (uint32_t i = 0; i < op->num_operands; i++)
      if (op->operands[i] == v) return true;
    for (uint32_t i = 0; i < op->num_regions; i++)
      if (region_uses_value(&op->regions[i], v)) return true;
  }
  return false;
}

/* The value of integer or i1 scalar `v` at a step whose grid indices along
 * the dims from `inner_first` on are all 0, when that fixes it: constants,
 * those dims' program_id (0), and converts, comparisons, and/or and selects
 * of known values (how the JAX bridge writes pl.when(k == 0)). */
static bool value_at_point_start(const tsr_value_t *v, uint32_t inner_first, int depth,
                                 int64_t *out) {
  const tsr_op_t *op = v ? v->def : NULL;
  if (!op || depth > 16 || v->type.kind != TSR_TYPE_SCALAR) return false;
  const tsr_dtype_class_t cls = tsr_dtype_class((tsr_dtype_t)v->type.dtype);
  if (cls == TSR_CLASS_FLOAT) return false;
  int64_t a = 0, b = 0;
  switch (op->opcode) {
    case TSR_OP_CONST: *out = op->literal.i; return true;
    case TSR_OP_PROGRAM_ID:
      if (op->num_ints != 1 || op->ints[0] < (int64_t)inner_first) return false;
      *out = 0;
      return true;
    case TSR_OP_CONVERT:
      if (op->num_operands != 1 || op->operands[0]->type.kind != TSR_TYPE_SCALAR ||
          tsr_dtype_class((tsr_dtype_t)op->operands[0]->type.dtype) == TSR_CLASS_FLOAT ||
          !value_at_point_start(op->operands[0], inner_first, depth + 1, &a))
        return false;
      /* 0 and 1 are themselves in every integer dtype and i1 */
      if (a != 0 && a != 1) return false;
      *out = a;
      return true;
    case TSR_OP_SELECT:
      if (op->num_operands != 3 || !value_at_point_start(op->operands[0], inner_first, depth + 1, &a))
        return false;
      return value_at_point_start(op->operands[a ? 1 : 2], inner_first, depth + 1, out);
    case TSR_OP_AND:
    case TSR_OP_OR:
    case TSR_OP_EQ:
    case TSR_OP_NE:
    case TSR_OP_LT:
    case TSR_OP_LE:
    case TSR_OP_GT:
    case TSR_OP_GE:
      if (op->num_operands != 2 ||
          tsr_dtype_class((tsr_dtype_t)op->operands[0]->type.dtype) == TSR_CLASS_FLOAT)
        return false;
      if (!value_at_point_start(op->operands[0], inner_first, depth + 1, &a) ||
          !value_at_point_start(op->operands[1], inner_first, depth + 1, &b))
        return false;
      break;
    default: return false;
  }
  /* Signed comparisons of values known exactly; an unsigned dtype's are
   * not compared (its order differs from int64's for large values). */
  if (op->opcode >= TSR_OP_LT && op->opcode <= TSR_OP_GE &&
      tsr_dtype_class((tsr_dtype_t)op->operands[0]->type.dtype) == TSR_CLASS_UINT)
    return false;
  switch (op->opcode) {
    case TSR_OP_AND: *out = a & b; break;
    case TSR_OP_OR: *out = a | b; break;
    case TSR_OP_EQ: *out = a == b; break;
    case TSR_OP_NE: *out = a != b; break;
    case TSR_OP_LT: *out = a < b; break;
    case TSR_OP_LE: *out = a <= b; break;
    case TSR_OP_GT: *out = a > b; break;
    case TSR_OP_GE: *out = a >= b; break;
    default: return false;
  }
  return true;
}

/* Whether, at a step that starts a split point (every grid index after the
 * split dims 0), the first op of region `r` that touches `ref` stores all of
 * it, unmasked, before anything reads it: the store itself, or an `if`
 * whose condition is then true (true_at_point_start) whose `then` region
 * does so. */
static bool written_first_at_point_start(const tsr_region_t *r, const tsr_value_t *ref,
                                         uint32_t inner_first, int depth) {
  for (const tsr_op_t *op = r->first; op; op = op->next) {
    bool touches = false;
    for (uint32_t i = 0; i < op->num_operands && !touches; i++) touches = op->operands[i] == ref;
    for (uint32_t i = 0; i < op->num_regions && !touches; i++)
      touches = region_uses_value(&op->regions[i], ref);
    if (!touches) continue;
    if (op->opcode == TSR_OP_IF && op->num_regions >= 1 && op->num_operands >= 1 && depth < 16) {
      for (uint32_t i = 0; i < op->num_operands; i++)
        if (op->operands[i] == ref) return false;
      int64_t c = 0;
      if (!value_at_point_start(op->operands[0], inner_first, 0, &c)) return false;
      const uint32_t branch = c ? 0 : 1; /* the region that runs then */
      return branch < op->num_regions &&
             written_first_at_point_start(&op->regions[branch], ref, inner_first, depth + 1);
    }
    if (op->opcode != TSR_OP_STORE || op->operands[0] != ref || (op->flags & TSR_OPF_MASK))
      return false;
    for (uint32_t i = 1; i < op->num_operands; i++)
      if (op->operands[i] == ref) return false;
    for (uint32_t d = 0; d < op->num_indices; d++) {
      const tsr_index_t *ix = &op->indices[d];
      bool whole = ix->kind == TSR_INDEX_FULL ||
                   (ix->kind == TSR_INDEX_SLICE && ix->operand < 0 && ix->start == 0 &&
                    ix->stride == 1 && d < ref->type.rank && ix->size == ref->type.dims[d]) ||
                   /* element 0 of a dim of one (JAX's scratch_ref[0] of a block of 1) */
                   (ix->kind == TSR_INDEX_POINT && ix->operand < 0 && ix->start == 0 &&
                    d < ref->type.rank && ref->type.dims[d] == 1);
      if (!whole) return false;
    }
    return op->num_indices == ref->type.rank;
  }
  return false; /* never touched: the fill it starts with is all it holds */
}

/* The ops a host split never runs: what orders cores or devices
 * (semaphores, DMAs, barriers) and what writes where the run's order shows
 * (print). And the writes through refs that outlive a step other than
 * outputs' blocks and scratch. */
static const char *unsplittable_op(const tsr_kernel_t *k, const tsr_region_t *r) {
  for (const tsr_op_t *op = r->first; op; op = op->next) {
    switch (op->opcode) {
      case TSR_OP_PRINT: return "it prints";
      case TSR_OP_DMA_START:
      case TSR_OP_DMA_WAIT: return "it makes DMAs";
      case TSR_OP_SEM_SIGNAL:
      case TSR_OP_SEM_WAIT:
      case TSR_OP_SEM_READ:
      case TSR_OP_CORE_BARRIER: return "it uses semaphores";
      default: break;
    }
    int32_t w = tsr_op_written_ref(op);
    if (w >= 0 && (uint32_t)w < op->num_operands) {
      const tsr_value_t *v = op->operands[w];
      if (v->def) return "it writes through a derived ref";
      if (v->decl >= 0 && (k->decls[v->decl].role == TSR_ROLE_IN ||
                           k->decls[v->decl].role == TSR_ROLE_PREFETCH))
        return "it writes an input";
    }
    for (uint32_t i = 0; i < op->num_regions; i++) {
      const char *why = unsplittable_op(k, &op->regions[i]);
      if (why) return why;
    }
  }
  return NULL;
}

/* Whether output decl `d`'s index map yields grid index `g` itself as one
 * of its block indices: points that differ along g then have different
 * blocks. */
static bool map_yields_grid_index(const tsr_decl_t *d, uint32_t g) {
  const tsr_region_t *m = d->index_map;
  if (!m || g >= m->num_args || !m->last || m->last->opcode != TSR_OP_YIELD) return false;
  for (uint32_t i = 0; i < m->last->num_operands; i++)
    if (m->last->operands[i] == m->args[g]) return true;
  return false;
}

bool tsr_ir_host_split_ok(const tsr_kernel_t *k, const char **why) {
  const char *reason = NULL;
  int64_t shape[TSR_MAX_RANK];
  for (uint32_t g = 0; g < k->grid_rank; g++) shape[g] = k->grid_bound[g] ? 2 : k->grid[g];
  const tsr_ir_core_split_t split = tsr_ir_core_split(k->grid_rank, shape, k->semantics);
  if (split.first == split.end) reason = "no grid dim is split";
  for (uint32_t i = 0; !reason && i < k->num_decls; i++) {
    const tsr_decl_t *d = &k->decls[i];
    const tsr_type_t *t = &d->ref->type;
    if (t->kind == TSR_TYPE_SEM) {
      reason = "it has semaphores";
    } else if (d->role == TSR_ROLE_OUT) {
      if (d->alias >= 0) reason = "an output aliases an input";
      else if (d->revisit == TSR_REVISIT_ANY) reason = "an output's blocks may be revisited";
      else if (t->space != TSR_SPACE_VMEM && t->space != TSR_SPACE_SMEM)
        reason = "an output is not copied out block by block";
      /* Two parts must never write one block: an output block a part
       * enters in place (no revisit check runs for it) would be written by
       * both at once. So each split dim is a block index of its own (which
       * also rules out an output revisited along a split dim). */
      for (uint32_t g = split.first; !reason && g < split.end; g++)
        if (shape[g] != 1 && !map_yields_grid_index(d, g))
          reason = "an output's block index is not a split grid index itself";
    } else if (d->role == TSR_ROLE_SCRATCH) {
      if (!written_first_at_point_start(&k->body, d->ref, split.end, 0))
        reason = "a scratch ref may carry values from one split point to the next";
    }
  }
  if (!reason) reason = unsplittable_op(k, &k->body);
  if (why) *why = reason;
  return reason == NULL;
}
