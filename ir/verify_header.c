/* The verifier's kernel header checks: the grid and its semantics, each
 * operand's role, order, array type, BlockSpec, memory space and alias, and
 * scratch buffers (ir/verify_internal.h). The driver walks index maps. */
#include "ir/verify_internal.h"

/* ---- Kernel headers ------------------------------------------------------------------ */
static const char *role_name(uint32_t role) {
  static const char *const names[] = {"prefetch", "input", "output", "scratch"};
  return role < TSR_ARRAY_SIZE(names) ? names[role] : "operand";
}

/* The verifier's rule on the order of the grid's semantics: once a dim is
 * arbitrary, every later dim is (Mosaic shards the leading parallel dims). */
static bool may_follow_arbitrary(uint32_t s) { return s == TSR_DIM_ARBITRARY; }

void tsr_ir_dim_semantics_order(uint32_t rank, tsr_ir_dim_semantics_t *semantics) {
  bool arbitrary = false;
  for (uint32_t i = 0; i < rank; i++) {
    if (arbitrary && !may_follow_arbitrary(semantics[i])) semantics[i] = TSR_DIM_ARBITRARY;
    arbitrary = arbitrary || semantics[i] == TSR_DIM_ARBITRARY;
  }
}

static const char *semantics_name(uint32_t s) {
  const char *name = tsr_ir_dim_semantics_name((tsr_ir_dim_semantics_t)s);
  return name ? name : "?";
}
void vf_verify_grid(verifier_t *v) {
  const tsr_kernel_t *k = v->kernel;
  if (k->grid_rank > TSR_MAX_RANK) {
    vf_kreport(v, k->loc, "grid rank %u exceeds %d", k->grid_rank, TSR_MAX_RANK);
    return;
  }
  int64_t steps = 1;
  bool overflow = false;
  int32_t first_arbitrary = -1, first_core_parallel = -1;
  for (uint32_t i = 0; i < k->grid_rank; i++) {
    int64_t g = k->grid[i];
    if (k->grid_bound[i]) {
      /* A dynamic extent: checked when a run reads it (>= 0; 0 runs no step). */
      const tsr_decl_t *d =
          k->grid_bound[i] <= k->num_decls ? &k->decls[k->grid_bound[i] - 1] : NULL;
      if (!d || d->role != TSR_ROLE_PREFETCH || d->array.kind != TSR_TYPE_SCALAR ||
          d->array.dtype != TSR_DTYPE_I32)
        vf_kreport(v, k->loc,
                   "grid dim %u: a dynamic extent is a rank-0 i32 prefetch operand", i);
    } else if (g < 1)
      vf_kreport(v, k->loc, "grid dim %u is %lld, expected >= 1", i, (long long)g);
    else if (g > INT32_MAX)
      vf_kreport(v, k->loc, "grid dim %u is %lld, more than 2^31 - 1 (program_id is i32)", i,
                 (long long)g);
    else if (!tsr_mul_i64(steps, g, &steps))
      overflow = true;
    uint32_t s = k->semantics[i];
    if (s > TSR_DIM_CORE_PARALLEL) {
      vf_kreport(v, k->loc, "grid dim %u has unknown semantics %u", i, s);
    } else if (s == TSR_DIM_CORE_PARALLEL && first_core_parallel >= 0) {
      /* Mosaic rejects it (tpu_custom_call.py: "A single Mosaic subkernel
       * cannot contain multiple core sharding dimensions"). */
      vf_kreport(v, k->loc,
                 "grid dims %d and %u are both core_parallel; a kernel shards its grid "
                 "over the cores along one dim at most (as Mosaic requires)",
                 first_core_parallel, i);
    } else if (s == TSR_DIM_ARBITRARY) {
      if (first_arbitrary < 0) first_arbitrary = (int32_t)i;
    } else if (first_arbitrary >= 0 && !may_follow_arbitrary(s)) {
      vf_kreport(v, k->loc,
                 "grid dim %u is %s but follows arbitrary dim %d; parallel dims must come "
                 "first (as in Pallas)",
                 i, semantics_name(s), first_arbitrary);
    }
    if (s == TSR_DIM_CORE_PARALLEL && first_core_parallel < 0) first_core_parallel = (int32_t)i;
  }
  if (overflow) vf_kreport(v, k->loc, "the grid has more than 2^63 steps");
}

/* The whole array of a prefetch/in/out decl: a block type or a scalar
 * dtype (a rank-0 array, as a Pallas kernel may take and return), dims >= 1,
 * at most 2^40 bytes. */
static bool verify_array(verifier_t *v, const tsr_decl_t *d, const char *role,
                         const char *name) {
  const tsr_type_t *t = &d->array;
  if (t->kind != TSR_TYPE_VECTOR && t->kind != TSR_TYPE_SCALAR) {
    vf_kreport(v, d->loc, "%s %%%s: expected an array type DTYPE[DIMS] or a scalar dtype, found %s",
               role, name, TYPE_TEXT(t));
    return false;
  }
  if (t->rank > TSR_MAX_RANK || t->dtype >= TSR_DTYPE_COUNT ||
      (t->kind == TSR_TYPE_SCALAR) != (t->rank == 0)) {
    vf_kreport(v, d->loc, "%s %%%s: invalid array type %s (rank %u)", role, name, TYPE_TEXT(t),
               t->rank);
    return false;
  }
  for (uint32_t i = 0; i < t->rank; i++) {
    if (t->dims[i] < 1) {
      vf_kreport(v, d->loc, "%s %%%s: dimension %u of %s is %lld, expected >= 1", role, name, i,
                 TYPE_TEXT(t), (long long)t->dims[i]);
      return false;
    }
  }
  int64_t bytes, n = count_elements(t->dims, t->rank);
  if (n < 0 || !tsr_mul_i64(n, (int64_t)tsr_dtype_size((tsr_dtype_t)t->dtype), &bytes) ||
      bytes > MAX_ARRAY_BYTES) {
    vf_kreport(v, d->loc, "%s %%%s: %s is more than 2^40 bytes", role, name, TYPE_TEXT(t));
    return false;
  }
  return true;
}

static void verify_scratch(verifier_t *v, const tsr_decl_t *d, const char *name) {
  const tsr_type_t *t = &d->ref->type;
  tbuf_t why = {.len = 0};
  if (!vf_type_wellformed(t, &why)) {
    vf_kreport(v, d->loc, "scratch %%%s: %s", name, why.s);
    return;
  }
  if (t->kind == TSR_TYPE_SEM) {
    /* fine: semaphores are scratch */
  } else if (t->kind != TSR_TYPE_REF) {
    vf_kreport(v, d->loc,
               "scratch %%%s: expected a vmem or smem ref or a semaphore, found %s", name,
               TYPE_TEXT(t));
  } else if (t->space != TSR_SPACE_VMEM && t->space != TSR_SPACE_SMEM) {
    vf_kreport(v, d->loc, "scratch %%%s: %s scratch is not allowed (scratch lives in vmem or smem)",
               name, tsr_space_name((tsr_space_t)t->space));
  } else if (t->space == TSR_SPACE_VMEM && t->rank == 0) {
    vf_kreport(v, d->loc, "scratch %%%s: vmem scratch needs rank >= 1", name);
  } else if (t->space == TSR_SPACE_SMEM && !smem_dtype_ok(t->dtype)) {
    vf_kreport(v, d->loc,
               "scratch %%%s: smem holds " SMEM_DTYPES_TEXT ", found %s", name,
               TYPE_TEXT(t));
  }
  if (d->has_block || d->index_map)
    vf_kreport(v, d->loc, "scratch %%%s cannot have a block or index map", name);
}
/* A semaphore operand (in or out): its counts are an i32 array of the
 * semaphores' shape; no block or index map; an output aliases a semaphore
 * input of the same type (docs/ir.md, "Kernels"). */
static void verify_sem_operand(verifier_t *v, const tsr_decl_t *d, const char *role,
                               const char *name, int32_t *aliased_by, uint32_t di) {
  const tsr_kernel_t *k = v->kernel;
  const tsr_type_t *t = &d->ref->type;
  tbuf_t why = {.len = 0};
  if (!vf_type_wellformed(t, &why)) {
    vf_kreport(v, d->loc, "%s %%%s: %s", role, name, why.s);
    return;
  }
  if (d->role == TSR_ROLE_PREFETCH) {
    vf_kreport(v, d->loc, "prefetch %%%s: a semaphore is an input or output, never prefetch",
               name);
    return;
  }
  tsr_type_t want = t->rank ? tsr_type_vector(TSR_DTYPE_I32, t->rank, t->dims)
                            : tsr_type_scalar(TSR_DTYPE_I32);
  if (!tsr_type_equal(&d->array, &want))
    vf_kreport(v, d->loc, "%s %%%s: the counts of %s are %s, found %s", role, name,
               TYPE_TEXT(t), TYPE_TEXT(&want), TYPE_TEXT(&d->array));
  if (d->has_block || d->index_map)
    vf_kreport(v, d->loc, "%s %%%s: a semaphore operand cannot have a block or index map",
               role, name);
  if (d->role != TSR_ROLE_OUT || d->alias == -1) return;
  int32_t a = d->alias;
  if (a < 0 || (uint32_t)a >= k->num_decls) {
    vf_kreport(v, d->loc, "output %%%s aliases operand #%d, which does not exist", name, a + 1);
  } else if (k->decls[a].role != TSR_ROLE_IN || !k->decls[a].ref ||
             !tsr_type_equal(&k->decls[a].ref->type, t)) {
    vf_kreport(v, d->loc, "output %%%s (%s) aliases %%%s, which is not a %s input", name,
               TYPE_TEXT(t), vname(k->decls[a].ref), TYPE_TEXT(t));
  } else if (aliased_by[a] >= 0) {
    vf_kreport(v, d->loc, "input %%%s is aliased by more than one output (%%%s and %%%s)",
               vname(k->decls[a].ref), vname(k->decls[aliased_by[a]].ref), name);
  } else {
    aliased_by[a] = (int32_t)di;
  }
}

bool vf_verify_decl(verifier_t *v, uint32_t di, int32_t *aliased_by) {
  const tsr_kernel_t *k = v->kernel;
  const tsr_decl_t *d = &k->decls[di];
  if (d->role > TSR_ROLE_SCRATCH) {
    vf_kreport(v, d->loc, "operand #%u has unknown role %u", di + 1, (unsigned)d->role);
    return false;
  }
  const char *role = role_name(d->role);
  if (!d->ref) {
    vf_kreport(v, d->loc, "%s #%u has no ref", role, di + 1);
    return false;
  }
  const char *name = vname(d->ref);
  if (di > 0 && k->decls[di - 1].role > d->role)
    vf_kreport(v, d->loc,
               "%s %%%s comes after %s %%%s; operands come in the order prefetch, in, out, "
               "scratch",
               role, name, role_name(k->decls[di - 1].role), vname(k->decls[di - 1].ref));
  if (d->alias != -1 && d->role != TSR_ROLE_OUT)
    vf_kreport(v, d->loc, "%s %%%s: only outputs can alias an input", role, name);
  if (d->revisit != TSR_REVISIT_IMMEDIATE && d->role != TSR_ROLE_OUT)
    vf_kreport(v, d->loc,
               "%s %%%s: only outputs have a revisit mode (an input block is read from its "
               "array whenever it is entered)",
               role, name);
  else if (!tsr_ir_revisit_name((tsr_ir_revisit_t)d->revisit))
    vf_kreport(v, d->loc, "output %%%s has unknown revisit mode %u", name,
               (unsigned)d->revisit);
  if (d->role == TSR_ROLE_SCRATCH) {
    verify_scratch(v, d, name);
    return false;
  }
  if (d->ref->type.kind == TSR_TYPE_SEM) {
    verify_sem_operand(v, d, role, name, aliased_by, di);
    return false;
  }
  if (!verify_array(v, d, role, name)) return false;
  const tsr_type_t *at = &d->array;
  const tsr_type_t *rt = &d->ref->type;
  if (d->role == TSR_ROLE_PREFETCH) {
    if (!smem_dtype_ok(at->dtype))
      vf_kreport(v, d->loc, "prefetch %%%s: scalar prefetch holds " SMEM_DTYPES_TEXT ", found %s", name,
                 TYPE_TEXT(at));
    if (d->has_block || d->index_map)
      vf_kreport(v, d->loc, "prefetch %%%s cannot have a block or index map", name);
  }
  if (rt->kind != TSR_TYPE_REF || rt->space >= TSR_SPACE_COUNT) {
    vf_kreport(v, d->loc, "%s %%%s: the body sees %s, expected a ref", role, name, TYPE_TEXT(rt));
    return false;
  }
  tsr_space_t space = (tsr_space_t)rt->space;
  bool windowed = space == TSR_SPACE_VMEM || space == TSR_SPACE_SMEM;
  if (!windowed && d->revisit == TSR_REVISIT_ANY)
    vf_kreport(v, d->loc,
               "output %%%s: 'revisit any' needs blocks, but %s outputs are not windowed (the "
               "kernel sees the whole array and DMAs it)",
               name, tsr_space_name(space));
  if (!windowed && (d->has_block || d->index_map)) {
    vf_kreport(v, d->loc,
               "%s %%%s: %s operands are not windowed and cannot have a block or index map "
               "(the kernel sees the whole array and DMAs it)",
               role, name, tsr_space_name(space));
    return false;
  }
  if (d->index_map && !d->has_block) {
    vf_kreport(v, d->loc, "%s %%%s: an index map needs a block", role, name);
    return false;
  }
  /* Block entries, and the ref the body sees: the block without squeezed
   * dims, in the decl's space. */
  bool block_ok = true;
  int64_t dims[TSR_MAX_RANK];
  uint32_t rank = 0;
  for (uint32_t i = 0; i < at->rank; i++) {
    int64_t b = d->block[i];
    if (d->element[i] && (!d->has_block || b == TSR_SQUEEZED || d->pad_low[i] < 0 ||
                          d->pad_high[i] < 0)) {
      vf_kreport(v, d->loc,
                 "%s %%%s: dim %u is an element dim, which needs a block entry of size >= 1 "
                 "and paddings >= 0",
                 role, name, i);
      block_ok = false;
    }
    if (b == TSR_SQUEEZED) continue;
    /* A block may be larger than its array (Pallas pads it like an edge
     * block: docs/semantics.md, "Ragged edges"). */
    if (b < 1) {
      vf_kreport(v, d->loc, "%s %%%s: block%s dim %u must be squeezed or at least 1, found %lld",
                 role, name, DIMS_TEXT(d->block, at->rank), i, (long long)b);
      block_ok = false;
    }
    dims[rank++] = b;
  }
  if (!block_ok) return false;
  tsr_type_t want = tsr_type_ref(space, (tsr_dtype_t)at->dtype, rank, dims);
  if (d->role == TSR_ROLE_PREFETCH) want.space = TSR_SPACE_SMEM;
  if (!tsr_type_equal(rt, &want)) {
    vf_kreport(v, d->loc,
               "%s %%%s: the body sees %s, expected %s (the block without squeezed dims)",
               role, name, TYPE_TEXT(rt), TYPE_TEXT(&want));
    return false;
  }
  tbuf_t why = {.len = 0};
  if (!vf_type_wellformed(rt, &why)) {
    vf_kreport(v, d->loc, "%s %%%s: block %s", role, name, why.s);
    return false;
  }
  if (space == TSR_SPACE_SMEM && d->role != TSR_ROLE_PREFETCH && !smem_dtype_ok(at->dtype))
    vf_kreport(v, d->loc,
               "%s %%%s: smem holds " SMEM_DTYPES_TEXT ", found %s", role, name,
               TYPE_TEXT(at));
  if (d->role == TSR_ROLE_OUT && d->alias != -1) {
    int32_t a = d->alias;
    if (a < 0 || (uint32_t)a >= k->num_decls) {
      vf_kreport(v, d->loc, "output %%%s aliases operand #%d, which does not exist", name, a + 1);
    } else if (k->decls[a].role != TSR_ROLE_IN) {
      vf_kreport(v, d->loc, "output %%%s aliases %s %%%s, which is not an input", name,
                 role_name(k->decls[a].role), vname(k->decls[a].ref));
    } else if (k->decls[a].ref && k->decls[a].ref->type.kind == TSR_TYPE_SEM) {
      vf_kreport(v, d->loc, "output %%%s aliases %%%s, a semaphore input", name,
                 vname(k->decls[a].ref));
    } else if (!tsr_type_equal(&k->decls[a].array, at)) {
      vf_kreport(v, d->loc, "output %%%s (%s) aliases input %%%s of a different type (%s)", name,
                 TYPE_TEXT(at), vname(k->decls[a].ref), TYPE_TEXT(&k->decls[a].array));
    } else if (aliased_by[a] >= 0) {
      vf_kreport(v, d->loc, "input %%%s is aliased by more than one output (%%%s and %%%s)",
                 vname(k->decls[a].ref), vname(k->decls[aliased_by[a]].ref), name);
    } else {
      aliased_by[a] = (int32_t)di;
    }
  }
  return d->index_map != NULL;
}
