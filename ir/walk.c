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
