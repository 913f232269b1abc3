/* The IR verifier: checks every rule of docs/ir.md "Verifier rules" (and the
 * type rule of every op in ir/ops.def) so that a verified module cannot crash
 * the interpreter. It trusts nothing in the module: counts are checked before
 * the arrays they size are read, so any module the builder can make yields
 * diagnostics, never a crash.
 *
 * This file is the driver: the module and kernel walk, the pre-pass that
 * finds every value's definition, regions and control flow, and each op's
 * arity and operands; ir/verify_internal.h says what the other parts do. */
#include "base/hashtable.h"

#include "ir/verify_internal.h"

/* ---- Pre-pass: where every value is defined --------------------------------------- */

static void collect_value(verifier_t *v, const tsr_value_t *value, zone_t zone,
                          uint32_t decl) {
  if (!value || value->id >= v->num_values) return;
  value_info_t *vi = &v->values[value->id];
  if (vi->value) return; /* another value with this id is foreign: info_of fails */
  vi->value = value;
  vi->zone = (uint8_t)zone;
  vi->decl = decl;
  vi->type_ok = vf_type_wellformed(&value->type, NULL);
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
/* ---- Regions and control flow -------------------------------------------------------- */

static void verify_region(verifier_t *v, const tsr_region_t *r, const region_ctx_t *ctx);

/* Expected type of yield operand #i in ctx. */
static bool yield_expect(verifier_t *v, const region_ctx_t *ctx, uint32_t i, tsr_type_t *out) {
  if (ctx->kind == REGION_MAP) {
    *out = tsr_type_scalar(TSR_DTYPE_I32);
    return true;
  }
  const tsr_value_t *r = ctx->owner->results[i];
  if (!vf_def_ok(v, r)) return false;
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
    if (vf_usable(v, c) && !(c->type.kind == TSR_TYPE_SCALAR && c->type.dtype == TSR_DTYPE_I1))
      vf_report(v, op->loc, "'condition' operand #1 (%%%s): expected i1, found %s", vname(c),
                TYPE_TEXT(&c->type));
    return;
  }
  const tsr_decl_t *map_decl =
      ctx->kind == REGION_MAP ? &v->kernel->decls[v->map_decl] : NULL;
  uint32_t want = ctx->kind == REGION_MAP ? ctx->map_rank : ctx->owner->num_results;
  if (op->num_operands != want) {
    if (map_decl)
      vf_kreport(v, op->loc,
                 "index map of %%%s yields %u values, expected %u (one per array dimension)",
                 vname(map_decl->ref), op->num_operands, want);
    else
      vf_report(v, op->loc, "'%s' gives %u values, expected %u (the results of '%s')", m,
                op->num_operands, want, mnemonic(ctx->owner));
    return;
  }
  for (uint32_t i = 0; i < want; i++) {
    const tsr_value_t *a = op->operands[i];
    tsr_type_t t;
    if (!vf_usable(v, a) || !yield_expect(v, ctx, i, &t) || tsr_type_equal(&a->type, &t))
      continue;
    if (map_decl)
      vf_kreport(v, op->loc, "index map of %%%s: '%s' operand #%u (%%%s): expected i32, found %s",
                 vname(map_decl->ref), m, i + 1, vname(a), TYPE_TEXT(&a->type));
    else
      vf_report(v, op->loc, "'%s' operand #%u (%%%s): expected %s (result #%u of '%s'), found %s",
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
    vf_report(v, op->loc, "'%s' %s has %u arguments, expected %u (%s)", m, rname, r->num_args,
              first + n, what);
    return;
  }
  for (uint32_t i = 0; r->args && i < n && i < op->num_results; i++) {
    const tsr_value_t *a = r->args[first + i], *res = op->results[i];
    if (!vf_def_ok(v, a) || !vf_def_ok(v, res) || tsr_type_equal(&a->type, &res->type)) continue;
    vf_report(v, op->loc,
              "'%s' %s argument #%u (%%%s): expected %s (the type of result #%u), found %s",
              m, rname, first + i + 1, vname(a), TYPE_TEXT(&res->type), i + 1,
              TYPE_TEXT(&a->type));
  }
}

/* Operands [first, first + n) are initial values of the op's results. */
static void check_inits(verifier_t *v, const tsr_op_t *op, uint32_t first, uint32_t n) {
  const char *m = mnemonic(op);
  if (op->num_results != n) {
    vf_report(v, op->loc, "'%s' has %u results but %u carried values", m, op->num_results, n);
    return;
  }
  for (uint32_t i = 0; i < n; i++) {
    const tsr_value_t *a = op->operands[first + i], *res = op->results[i];
    if (!vf_usable(v, a) || !vf_def_ok(v, res) || tsr_type_equal(&a->type, &res->type)) continue;
    vf_report(v, op->loc,
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
      for (uint32_t i = 0; typed && i < 3; i++) vf_expect_operand(v, op, i, &i32, what[i]);
      uint32_t n = op->num_operands - 3;
      check_inits(v, op, 3, n);
      char what_args[96];
      snprintf(what_args, sizeof what_args,
               "the induction variable and %u carried values", n);
      check_region_args(v, op, 0, "body", 1, n, what_args);
      const tsr_region_t *r = &op->regions[0];
      if (r->num_args && r->args && vf_def_ok(v, r->args[0]) && !is_i32_scalar(&r->args[0]->type))
        vf_report(v, op->loc, "'for' induction variable %%%s: expected i32, found %s",
                  vname(r->args[0]), TYPE_TEXT(&r->args[0]->type));
      break;
    }
    case TSR_OP_WHILE:
      check_inits(v, op, 0, op->num_operands);
      check_region_args(v, op, 0, "condition region", 0, op->num_results, "the carried values");
      check_region_args(v, op, 1, "body", 0, op->num_results, "the carried values");
      break;
    case TSR_OP_IF:
      if (typed) vf_expect_operand(v, op, 0, &i1, ", the condition");
      for (uint32_t i = 0; i < 2; i++)
        if (op->regions[i].num_args)
          vf_report(v, op->loc, "'if' %s region takes no arguments, found %u",
                    i ? "else" : "then", op->regions[i].num_args);
      if (!(op->flags & TSR_OPF_HAS_ELSE) && op->num_results)
        vf_report(v, op->loc, "'if' with results needs an else region");
      else if (!(op->flags & TSR_OPF_HAS_ELSE) && op->regions[1].first)
        vf_report(v, op->loc, "'if' has ops in its else region but no else flag");
      break;
    case TSR_OP_SCOPED: {
      const tsr_region_t *r = &op->regions[0];
      for (uint32_t i = 0; r->args && i < r->num_args; i++) {
        const tsr_value_t *a = r->args[i];
        if (!vf_def_ok(v, a)) continue;
        const tsr_type_t *t = &a->type;
        if (t->kind == TSR_TYPE_SEM) {
          /* Pallas run_scoped allows them; in tessera semaphores are kernel
           * scratch (docs/dma.md). */
          vf_report(v, op->loc,
                    "'scoped' argument #%u (%%%s): semaphores cannot be scoped (declare it as "
                    "kernel scratch: scratch %%%s: %s)",
                    i + 1, vname(a), vname(a), TYPE_TEXT(t));
        } else if (t->kind != TSR_TYPE_REF) {
          vf_report(v, op->loc,
                    "'scoped' argument #%u (%%%s): expected a vmem, smem, hbm or any ref, "
                    "found %s",
                    i + 1, vname(a), TYPE_TEXT(t));
        } else if (t->space == TSR_SPACE_HBM || t->space == TSR_SPACE_ANY) {
          /* A device-wide buffer (Pallas run_scoped of HBM or ANY inside a
           * core_map): one per device, shared by its cores; any rank, any
           * dtype, as HBM operands. */
        } else if (t->space == TSR_SPACE_VMEM && t->rank == 0) {
          vf_report(v, op->loc,
                    "'scoped' argument #%u (%%%s): a vmem buffer needs rank >= 1", i + 1,
                    vname(a));
        } else if (t->space == TSR_SPACE_SMEM && !smem_dtype_ok(t->dtype)) {
          vf_report(v, op->loc,
                    "'scoped' argument #%u (%%%s): smem holds " SMEM_DTYPES_TEXT ", "
                    "found %s",
                    i + 1, vname(a), TYPE_TEXT(t));
        }
      }
      break;
    }
    default:
      vf_report(v, op->loc, "'%s' is a control op the verifier does not know", mnemonic(op));
      break;
  }
}

/* for/while/if/scoped: checks, then the regions. */
static void verify_control(verifier_t *v, const tsr_op_t *op, bool typed, uint32_t depth) {
  if (depth + 1 > MAX_DEPTH) {
    vf_report(v, op->loc, "'%s' regions are nested more than %d deep", mnemonic(op), MAX_DEPTH);
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
    vf_report(v, op->loc, "'%s' takes %s operands, found %u", m, want, op->num_operands);
    ok = false;
  }
  if (info->num_results >= 0 && op->num_results != (uint32_t)info->num_results) {
    vf_report(v, op->loc, "'%s' has %d results, found %u", m, info->num_results, op->num_results);
    ok = false;
  }
  if (op->num_regions != (uint32_t)info->num_regions) {
    vf_report(v, op->loc, "'%s' has %d regions, found %u", m, info->num_regions, op->num_regions);
    ok = false;
  }
  if ((op->num_operands && !op->operands) || (op->num_results && !op->results) ||
      (op->num_regions && !op->regions) || (op->num_ints && !op->ints) ||
      (op->num_indices && !op->indices)) {
    vf_report(v, op->loc, "'%s' is malformed: a count is set but its array is missing", m);
    ok = false;
  }
  if ((info->syntax == TSR_SYN_INT_ATTR || info->syntax == TSR_SYN_AXIS ||
       info->syntax == TSR_SYN_VALUE_INT) && op->num_ints != 1 &&
      !(op->opcode == TSR_OP_ROLL && op->num_ints == 3)) {
    vf_report(v, op->loc, "'%s' needs 1 %s attribute, found %u", m,
              op->opcode == TSR_OP_IOTA         ? "dimension"
              : info->syntax == TSR_SYN_VALUE_INT ? "integer"
                                                  : "axis",
              op->num_ints);
    ok = false;
  }
  return ok;
}
/* Operands whose kind the op's rule checks: the views and semaphores of DMA
 * ops, the semaphore of semaphore ops. Elsewhere only the ref operand of
 * load and store may be a ref, and no operand may be a semaphore. */
static bool is_view_slot(const tsr_op_t *op, uint32_t i) {
  tsr_dma_view_t dma;
  tsr_sem_view_t sem;
  int32_t slot = (int32_t)i;
  if (tsr_opview_dma_decode(op, &dma) != TSR_OPVIEW_WRONG_OP)
    return slot == dma.src.base.slot || slot == dma.dst.base.slot ||
           slot == dma.sem.base.slot || slot == dma.send.base.slot;
  if (tsr_opview_sem_decode(op, &sem) != TSR_OPVIEW_WRONG_OP) return slot == sem.sem.base.slot;
  return false;
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
    vf_report(v, op->loc, "'%s' is reserved: it is parsed and printed but cannot run yet", m);
    typed = allowed = false;
  }
  if (ctx->kind == REGION_MAP && !(info->flags & TSR_F_MAP_OK)) {
    vf_kreport(v, op->loc,
               "index map of %%%s: '%s' is not allowed in an index map (only ops marked 'map' "
               "in the op table are)",
               vf_decl_name(v, (uint32_t)v->map_decl), m);
    typed = allowed = false;
  }
  for (uint32_t i = 0; op->operands && i < op->num_operands; i++) {
    if (!vf_check_use(v, op, i)) {
      typed = false;
      continue;
    }
    if (!allowed || is_view_slot(op, i)) continue;
    const tsr_type_t *t = &op->operands[i]->type;
    bool ref_slot = i == 0 && (info->effects & (TSR_E_REF_READ | TSR_E_REF_WRITE));
    if (t->kind == TSR_TYPE_REF && !ref_slot) {
      vf_report(v, op->loc,
                "'%s' operand #%u (%%%s): a ref can only be the ref operand of load, store or a "
                "DMA, found %s",
                m, i + 1, vname(op->operands[i]), TYPE_TEXT(t));
      typed = false;
    } else if (t->kind == TSR_TYPE_SEM) {
      vf_report(v, op->loc,
                "'%s' operand #%u (%%%s): a semaphore can only be the semaphore operand of a "
                "semaphore or DMA op, found %s",
                m, i + 1, vname(op->operands[i]), TYPE_TEXT(t));
      typed = false;
    }
  }
  for (uint32_t i = 0; op->results && i < op->num_results; i++) {
    const tsr_value_t *r = op->results[i];
    if (r && vf_def_fine(v, r) && is_value_type(&r->type)) continue;
    /* What a message calls the result: formatted only for a message (the
     * formatting was half the verifier's time on large kernels). */
    char what[192];
    snprintf(what, sizeof what, "'%s' result #%u (%%%s)", m, i + 1, vname(r));
    if (!r) {
      vf_report(v, op->loc, "'%s' result #%u is missing", m, i + 1);
      typed = false;
    } else if (!vf_check_def(v, op->loc, what, r)) {
      typed = false;
    } else if (!is_value_type(&r->type)) {
      vf_report(v, op->loc, "%s: results are scalars or blocks, found %s", what,
                TYPE_TEXT(&r->type));
      typed = false;
    }
  }
  if (typed) vf_apply_rule(v, op);
  *out_typed = typed;
  return shaped && allowed;
}

static void verify_op(verifier_t *v, const tsr_op_t *op, const region_ctx_t *ctx) {
  if (op->opcode >= TSR_OP_COUNT) {
    vf_report(v, op->loc, "unknown opcode %u", (unsigned)op->opcode);
  } else {
    const tsr_op_t *outer = v->op; /* the op whose region holds this one */
    v->op = op;
    bool typed;
    bool walkable = check_op(v, op, ctx, &typed);
    if (walkable && (tsr_op_table[op->opcode].flags & TSR_F_CONTROL))
      verify_control(v, op, typed, ctx->depth);
    v->op = outer;
  }
  for (uint32_t i = 0; op->results && i < op->num_results; i++)
    vf_set_vis(v, op->results[i], VIS_VISIBLE);
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
    if (a && vf_def_fine(v, a)) {
      vf_set_vis(v, a, VIS_VISIBLE);
      continue;
    }
    char what[192];
    if (ctx->kind == REGION_MAP)
      snprintf(what, sizeof what, "kernel @%s: index map of %%%s: argument #%u (%%%s)",
               v->kernel->name, vf_decl_name(v, (uint32_t)v->map_decl), i + 1, vname(a));
    else if (owner)
      snprintf(what, sizeof what, "'%s' %s argument #%u (%%%s)", owner, ctx->name, i + 1,
               vname(a));
    else
      snprintf(what, sizeof what, "kernel @%s: body argument #%u (%%%s)", v->kernel->name,
               i + 1, vname(a));
    if (!a) {
      vf_report(v, loc, "%s is missing", what);
      continue;
    }
    vf_check_def(v, loc, what, a);
    vf_set_vis(v, a, VIS_VISIBLE);
  }
}

/* A terminator `op` in a region of kind ctx: the right kind, last, and
 * giving what the region owes. Returns whether the region's terminator has
 * been dealt with (so a missing one need not be reported too). */
static NOINLINE bool check_terminator(verifier_t *v, const tsr_op_t *op,
                                      const region_ctx_t *ctx) {
  const char *bad = terminator_rule(op, ctx);
  if (bad) {
    vf_report(v, op->loc, "'%s' %s", mnemonic(op), bad);
    return !op->next; /* a wrong terminator still ends the region */
  }
  if (op->next) {
    vf_report(v, op->loc, "'%s' must be the last op of its region", mnemonic(op));
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
      vf_report(v, ctx->owner->loc, "'%s' %s must end with 'condition'", owner, ctx->name);
    else if (ctx->kind == REGION_YIELD && ctx->owner->num_results)
      vf_report(v, ctx->owner->loc,
                "'%s' %s must end with 'yield' of %u values (the results of '%s')",
                owner, ctx->name, ctx->owner->num_results, owner);
    else if (ctx->kind == REGION_MAP)
      vf_kreport(v, v->kernel->decls[v->map_decl].loc,
                 "index map of %%%s must end with 'yield' of one i32 block index per array "
                 "dimension",
                 vf_decl_name(v, (uint32_t)v->map_decl));
  }
  for (uint32_t i = 0; r->args && i < r->num_args; i++) vf_set_vis(v, r->args[i], VIS_ENDED);
  for (const tsr_op_t *op = r->first; op; op = op->next)
    for (uint32_t i = 0; op->results && i < op->num_results; i++)
      vf_set_vis(v, op->results[i], VIS_ENDED);
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
    const tsr_op_t *owner = v->op;
    v->op = op; /* its diagnostics are the terminator's */
    terminated |= check_terminator(v, op, ctx);
    v->op = owner;
  }
  end_region(v, r, ctx, terminated);
}
static void verify_index_map(verifier_t *v, uint32_t di) {
  const tsr_kernel_t *k = v->kernel;
  const tsr_decl_t *d = &k->decls[di];
  const tsr_region_t *map = d->index_map;
  if (map->num_args != k->grid_rank)
    vf_kreport(v, d->loc,
               "index map of %%%s takes %u arguments, expected %u (one per grid dimension)",
               vname(d->ref), map->num_args, k->grid_rank);
  for (uint32_t i = 0; map->args && i < map->num_args; i++) {
    const tsr_value_t *a = map->args[i];
    if (vf_def_ok(v, a) && !is_i32_scalar(&a->type))
      vf_kreport(v, d->loc, "index map of %%%s: argument #%u (%%%s): expected i32, found %s",
                 vname(d->ref), i + 1, vname(a), TYPE_TEXT(&a->type));
  }
  v->map_decl = (int32_t)di;
  region_ctx_t ctx = {REGION_MAP, NULL, "index map", d->array.rank, 0};
  verify_region(v, map, &ctx);
  v->map_decl = -1;
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

  vf_verify_grid(v);
  if (k->body.num_args)
    vf_kreport(v, k->loc, "the body takes no arguments, found %u", k->body.num_args);
  for (uint32_t i = 0; i < k->num_decls; i++)
    if (vf_verify_decl(v, i, aliased_by)) verify_index_map(v, i);
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
        vf_report(&v, k->loc, "kernel @%s is defined twice", k->name);
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
