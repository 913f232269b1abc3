/* Control flow and debugging for the TPU (tpu/emit_internal.h): scf.for,
 * scf.while, scf.if (through VMEM for block results), tpu.region for
 * scoped scratch, the terminators their parents read, and print and
 * assert, which Mosaic kernels drop. Region bodies are emitted through
 * emit_base.c's walk. */
#include <stdio.h>

#include "ir/opview.h"
#include "tpu/emit_internal.h"

/* ---- Control flow -------------------------------------------------------------- */

/* Some blocks cross region boundaries (the values a loop carries, the
 * results of if and scoped) in another form, restored inside and after:
 * i1 blocks as i32, compared with 0 (libtpu cannot carry an i1 block
 * through a loop: v6e "failed to legalize operation 'scf.yield'", v5e
 * aborts the process in its layout inference), and 1-D 8- and 16-bit
 * blocks as (1, n) ones (v5e aborts the process on a loop carrying a
 * 1-D u16 or bf16 block it adds to: "Check failed: arr.size() >=
 * layout_rank(implicit_dim)"). */
static bool crosses_as_i32(const tsr_type_t *t) {
  return t->kind == TSR_TYPE_VECTOR && is_bool(t->dtype);
}

static bool crosses_as_2d(const tsr_type_t *t) {
  return t->kind == TSR_TYPE_VECTOR && t->rank == 1 && !is_bool(t->dtype) &&
         bits_of(t->dtype) < 32;
}

/* The type a value has where it crosses a region boundary. */
static const char *crossing_type(char *buf, const tsr_type_t *t) {
  tsr_type_t ct = with_dtype(t, crosses_as_i32(t) ? TSR_DTYPE_I32 : t->dtype);
  if (crosses_as_2d(t)) ct.rank = tpu_at_least_2d(t, ct.dims);
  return tpu_type(buf, &ct);
}

/* The name of `v` as it crosses a region boundary, emitting the change. */
static const char *crossing_value(tpu_emitter_t *em, const tsr_value_t *v) {
  const tsr_type_t *t = &v->type;
  if (crosses_as_i32(t)) return tpu_bits_i32(em, tpu_name(em, v), t);
  if (crosses_as_2d(t)) {
    int64_t d2[2];
    tpu_at_least_2d(t, d2);
    return tpu_reshape_to(em, tpu_name(em, v), t->dtype, 1, t->dims, 2, d2);
  }
  return tpu_name(em, v);
}

/* `v`, which crossed a boundary in its crossing form under its current
 * name, in its own type. */
static void arrived(tpu_emitter_t *em, const tsr_value_t *v) {
  const tsr_type_t *t = &v->type;
  char crossed[64];
  snprintf(crossed, sizeof crossed, "%s", tpu_name(em, v));
  if (crosses_as_i32(t)) {
    char r[512];
    snprintf(r, sizeof r, "%%%s", v->name);
    tpu_bits_i1(em, r, crossed, t);
    tpu_set_name(em, v, r);
  } else if (crosses_as_2d(t)) {
    int64_t d2[2];
    tpu_at_least_2d(t, d2);
    tpu_set_name(em, v, tpu_reshape_to(em, crossed, t->dtype, 2, d2, 1, t->dims));
  }
}

/* Names the results of a control op: "%name" for one, "%$N#i" for several
 * (MLIR's multi-result form); returns the text before " = ", "" for none.
 * A result that crosses in another form gets a temporary name, restored
 * after the op by control_results_arrived. */
static void control_results(tpu_emitter_t *em, const tsr_op_t *op, char *lhs, size_t n) {
  lhs[0] = 0;
  if (op->num_results == 0) return;
  if (op->num_results == 1) {
    const tsr_type_t *rt = &op->results[0]->type;
    if (crosses_as_i32(rt) || crosses_as_2d(rt)) {
      const char *t = tpu_tmp(em);
      tpu_set_name(em, op->results[0], t);
      snprintf(lhs, n, "%s = ", t);
    } else {
      snprintf(lhs, n, "%s = ", tpu_result_name(em, op, 0));
    }
    return;
  }
  char base[32];
  snprintf(base, sizeof base, "%s", tpu_tmp(em));
  snprintf(lhs, n, "%s:%u = ", base, op->num_results);
  for (uint32_t i = 0; i < op->num_results; i++) {
    char r[48];
    snprintf(r, sizeof r, "%s#%u", base, i);
    tpu_set_name(em, op->results[i], r);
  }
}

/* After a control op: its results that left it in another form. */
static void control_results_arrived(tpu_emitter_t *em, const tsr_op_t *op) {
  for (uint32_t i = 0; i < op->num_results && TPU_OK(em); i++) arrived(em, op->results[i]);
}

static void type_list(tpu_emitter_t *em, tsr_strbuf_t *sb, tsr_value_t *const *vals, uint32_t n) {
  (void)em;
  char ty[TPU_TYPE_MAX];
  for (uint32_t i = 0; i < n; i++)
    tsr_strbuf_printf(sb, "%s%s", i ? ", " : "", crossing_type(ty, &vals[i]->type));
}

/* Names a region's arguments: their tessera names, or a temporary for an
 * block that crosses in another form (emit_body restores it). */
static void name_args(tpu_emitter_t *em, const tsr_region_t *r, uint32_t first) {
  for (uint32_t i = first; i < r->num_args; i++) {
    char buf[512];
    const tsr_type_t *t = &r->args[i]->type;
    if (crosses_as_i32(t) || crosses_as_2d(t))
      snprintf(buf, sizeof buf, "%s", tpu_tmp(em));
    else
      snprintf(buf, sizeof buf, "%%%s", r->args[i]->name);
    tpu_set_name(em, r->args[i], buf);
  }
}

/* An if with block results: MLIR's canonicalizer turns an scf.if whose
 * yields are defined outside it into an arith.select on the scalar
 * condition, and libtpu cannot lay out a select of blocks on a scalar
 * ("Null layout / non-vector operand in elementwise operation"). Mosaic
 * fixes such selects in its own canonicalization, but it folds again
 * after that (x % x of 16-bit data to 0, say), so an if whose branches
 * only become constants late is still turned into one, for any dtype.
 * Stores are never folded away: each block result goes through a VMEM
 * buffer of a tpu.region (as `scoped` buffers do), stored by the
 * branches and loaded after the if, which keeps only its scalar results.
 * The cost: a store and a load of each block. */
typedef struct tpu_if_frame {
  const tsr_op_t *op;
  uint32_t buffers;          /* result i (a block) is the buffer %$<buffers + i> */
  char zero[32];             /* the index 0 of the buffers' views */
  struct tpu_if_frame *outer;
} tpu_if_frame_t;

static const tpu_if_frame_t *if_frame_of(const tpu_emitter_t *em, const tsr_op_t *op) {
  for (const tpu_if_frame_t *f = em->ifs; f; f = f->outer)
    if (f->op == op) return f;
  return NULL;
}

static bool is_block(const tsr_value_t *v) { return v->type.kind == TSR_TYPE_VECTOR; }

/* The VMEM buffer holding a block result in its crossing form. */
static const char *if_buffer_type(char *buf, const tsr_value_t *v) {
  tsr_type_t t = with_dtype(&v->type, crosses_as_i32(&v->type) ? TSR_DTYPE_I32 : v->type.dtype);
  if (crosses_as_2d(&v->type)) t.rank = tpu_at_least_2d(&v->type, t.dims);
  t.kind = TSR_TYPE_REF;
  t.space = TSR_SPACE_VMEM;
  return tpu_type(buf, &t);
}

static const char *zero_indices(char *buf, size_t n, const char *zero, const tsr_value_t *v) {
  uint32_t rank = crosses_as_2d(&v->type) ? 2 : v->type.rank;
  size_t at = 0;
  buf[0] = 0;
  for (uint32_t d = 0; d < rank && at < n; d++)
    at += (size_t)snprintf(buf + at, n - at, "%s%s", d ? ", " : "", zero);
  return buf;
}

/* A branch's yield: its blocks stored, its scalars yielded. */
static void if_yield(tpu_emitter_t *em, const tpu_if_frame_t *f, const tsr_op_t *yield) {
  tsr_strbuf_t vals, types;
  tsr_strbuf_initialize(&vals);
  tsr_strbuf_initialize(&types);
  char ty[TPU_TYPE_MAX], mt[TPU_TYPE_MAX], idx[256];
  for (uint32_t i = 0; i < yield->num_operands; i++) {
    const tsr_value_t *v = yield->operands[i];
    char val[512];
    snprintf(val, sizeof val, "%s", crossing_value(em, v));
    if (is_block(v)) {
      tpu_line(em, "tpu.vector_store %%$%u[%s], %s {strides = array<i32>} : %s, %s,",
               f->buffers + i, zero_indices(idx, sizeof idx, f->zero, v), val,
               if_buffer_type(mt, v), crossing_type(ty, &v->type));
      continue;
    }
    tsr_strbuf_printf(&vals, "%s%s", vals.size ? ", " : "", val);
    tsr_strbuf_printf(&types, "%s%s", types.size ? ", " : "", crossing_type(ty, &v->type));
  }
  if (vals.size) tpu_line(em, "scf.yield %s : %s", SB(vals), SB(types));
  if (vals.failed || types.failed) tpu_fail(em, TSR_OOM());
  tsr_strbuf_deinitialize(&vals);
  tsr_strbuf_deinitialize(&types);
}

/* The terminator of a region, read by its parent op. */
void tpu_op_terminator(tpu_emitter_t *em, const tsr_op_t *op) {
  const tsr_op_t *parent = op->parent ? op->parent->parent_op : NULL;
  tsr_strbuf_t vals, types;
  tsr_strbuf_initialize(&vals);
  tsr_strbuf_initialize(&types);
  uint32_t first = op->opcode == TSR_OP_CONDITION ? 1 : 0;
  for (uint32_t i = first; i < op->num_operands; i++)
    tsr_strbuf_printf(&vals, "%s%s", i > first ? ", " : "",
                      parent ? crossing_value(em, op->operands[i]) : tpu_name(em, op->operands[i]));
  type_list(em, &types, op->operands + first, op->num_operands - first);
  const char *v = vals.data ? vals.data : "", *t = types.data ? types.data : "";
  bool any = op->num_operands > first;
  if (!parent) { /* an index map: its transform function returns */
    if (em->in_transform) tpu_line(em, "return %s : %s", v, t);
  } else if (op->opcode == TSR_OP_CONDITION) {
    /* scf.condition forwards the carried values (the condition region's
     * arguments) to the body, and gives them as the results at the end. */
    tsr_strbuf_t fw, ft;
    tsr_strbuf_initialize(&fw);
    tsr_strbuf_initialize(&ft);
    const tsr_region_t *r = op->parent;
    for (uint32_t i = 0; i < r->num_args; i++)
      tsr_strbuf_printf(&fw, "%s%s", i ? ", " : "", crossing_value(em, r->args[i]));
    type_list(em, &ft, r->args, r->num_args);
    if (r->num_args)
      tpu_line(em, "scf.condition(%s) %s : %s", tpu_name(em, op->operands[0]), SB(fw), SB(ft));
    else
      tpu_line(em, "scf.condition(%s)", tpu_name(em, op->operands[0]));
    if (fw.failed || ft.failed) tpu_fail(em, TSR_OOM());
    tsr_strbuf_deinitialize(&fw);
    tsr_strbuf_deinitialize(&ft);
  } else if (parent->opcode == TSR_OP_SCOPED) {
    tpu_line(em, any ? "tpu.yield %s : %s" : "tpu.yield", v, t);
  } else if (parent->opcode == TSR_OP_IF && if_frame_of(em, parent)) {
    if_yield(em, if_frame_of(em, parent), op);
  } else if (any || parent->opcode == TSR_OP_WHILE) {
    tpu_line(em, any ? "scf.yield %s : %s" : "scf.yield", v, t);
  }
  if (vals.failed || types.failed) tpu_fail(em, TSR_OOM());
  tsr_strbuf_deinitialize(&vals);
  tsr_strbuf_deinitialize(&types);
}

static void emit_body(tpu_emitter_t *em, const tsr_region_t *r, bool need_terminator,
                      const char *terminator) {
  em->indent++;
  for (uint32_t i = 0; i < r->num_args && TPU_OK(em); i++) arrived(em, r->args[i]);
  tpu_emit_region(em, r);
  const tsr_op_t *t = tpu_terminator(r);
  if (TPU_OK(em)) {
    if (t) tpu_op_terminator(em, t);
    else if (need_terminator) tpu_line(em, "%s", terminator);
  }
  em->indent--;
}

void tpu_op_for(tpu_emitter_t *em, const tsr_op_t *op) {
  tsr_for_view_t v;
  if (!tsr_opview_for(op, &v)) {
    tpu_unimplemented(em, op, "malformed for");
    return;
  }
  char lhs[64];
  name_args(em, v.body, 0);
  tsr_strbuf_t iter, types;
  tsr_strbuf_initialize(&iter);
  tsr_strbuf_initialize(&types);
  for (uint32_t i = 0; i < v.num_carried; i++)
    tsr_strbuf_printf(&iter, "%s%s = %s", i ? ", " : "", tpu_name(em, v.carried[i]),
                      crossing_value(em, v.inits[i]));
  type_list(em, &types, v.carried, v.num_carried);
  /* libtpu's range analysis fails on a loop from a negative constant
   * ("RET_CHECK failure (.../range_simplifier.cc:696) range.IsValid()"):
   * such a loop counts from 0 to hi - lo, its variable being j + lo (the
   * same values, unless hi - lo overflows i32: 2^31 iterations). */
  const tsr_op_t *lo_def = v.lo->def;
  bool shifted = lo_def && lo_def->opcode == TSR_OP_CONST && lo_def->literal.i < 0;
  char iv[512], lo[512], hi[512];
  snprintf(iv, sizeof iv, "%s", tpu_name(em, v.iv));
  snprintf(lo, sizeof lo, "%s", tpu_name(em, v.lo));
  snprintf(hi, sizeof hi, "%s", tpu_name(em, v.hi));
  if (shifted) {
    const char *n = tpu_tmp(em);
    tpu_line(em, "%s = arith.subi %s, %s : i32", n, hi, lo);
    snprintf(hi, sizeof hi, "%s", n);
    snprintf(lo, sizeof lo, "%s", tpu_i32_const(em, 0));
    snprintf(iv, sizeof iv, "%s", tpu_tmp(em));
  }
  control_results(em, op, lhs, sizeof lhs);
  if (v.num_carried)
    tpu_line(em, "%sscf.for %s = %s to %s step %s iter_args(%s) -> (%s) : i32 {", lhs, iv, lo, hi,
             tpu_name(em, v.step), SB(iter), SB(types));
  else
    tpu_line(em, "scf.for %s = %s to %s step %s : i32 {", iv, lo, hi, tpu_name(em, v.step));
  if (iter.failed || types.failed) tpu_fail(em, TSR_OOM());
  tsr_strbuf_deinitialize(&iter);
  tsr_strbuf_deinitialize(&types);
  if (shifted) {
    em->indent++;
    tpu_line(em, "%s = arith.addi %s, %s : i32", tpu_name(em, v.iv), iv, tpu_name(em, v.lo));
    em->indent--;
  }
  emit_body(em, v.body, false, "");
  tpu_line(em, "}");
  control_results_arrived(em, op);
}

void tpu_op_while(tpu_emitter_t *em, const tsr_op_t *op) {
  tsr_while_view_t v;
  if (!tsr_opview_while(op, &v)) {
    tpu_unimplemented(em, op, "malformed while");
    return;
  }
  char lhs[64];
  name_args(em, v.cond, 0);
  tsr_strbuf_t init, types;
  tsr_strbuf_initialize(&init);
  tsr_strbuf_initialize(&types);
  for (uint32_t i = 0; i < v.num_inits; i++)
    tsr_strbuf_printf(&init, "%s%s = %s", i ? ", " : "", tpu_name(em, v.cond->args[i]),
                      crossing_value(em, v.inits[i]));
  type_list(em, &types, v.cond->args, v.cond->num_args);
  control_results(em, op, lhs, sizeof lhs);
  const char *ts = types.data ? types.data : "";
  tpu_line(em, "%sscf.while (%s) : (%s) -> (%s) {", lhs, init.data ? init.data : "", ts, ts);
  emit_body(em, v.cond, false, "");
  /* The body's block arguments: the same names in a sibling region. */
  name_args(em, v.body, 0);
  tsr_strbuf_t args;
  tsr_strbuf_initialize(&args);
  char ty[TPU_TYPE_MAX];
  for (uint32_t i = 0; i < v.body->num_args; i++)
    tsr_strbuf_printf(&args, "%s%s: %s", i ? ", " : "", tpu_name(em, v.body->args[i]),
                      crossing_type(ty, &v.body->args[i]->type));
  tpu_line(em, "} do {");
  tpu_line(em, "^bb0(%s):", args.data ? args.data : "");
  emit_body(em, v.body, true, "scf.yield");
  tpu_line(em, "}");
  control_results_arrived(em, op);
  if (init.failed || types.failed || args.failed) tpu_fail(em, TSR_OOM());
  tsr_strbuf_deinitialize(&init);
  tsr_strbuf_deinitialize(&types);
  tsr_strbuf_deinitialize(&args);
}

/* An if with block results (see tpu_if_frame_t):
 *   %r:n = "tpu.region"() ({
 *     %$b = memref.alloca() : memref<..>          one per block result
 *     %$s:k = scf.if %c -> (scalars) { ... tpu.vector_store %$b ... scf.yield }
 *     %$l = vector.load %$b[..]
 *     tpu.yield (the results in order)
 *   }) : () -> (..) */
static void emit_if_through_vmem(tpu_emitter_t *em, const tsr_op_t *op, const tsr_if_view_t *v) {
  tpu_if_frame_t frame = {.op = op, .outer = em->ifs};
  char lhs[64], ty[TPU_TYPE_MAX], mt[TPU_TYPE_MAX], idx[256];
  control_results(em, op, lhs, sizeof lhs);
  tsr_strbuf_t types, scalar_types, results;
  tsr_strbuf_initialize(&types);
  tsr_strbuf_initialize(&scalar_types);
  tsr_strbuf_initialize(&results);
  type_list(em, &types, op->results, op->num_results);
  tpu_line(em, "%s\"tpu.region\"() ({", lhs);
  em->indent++;
  frame.buffers = em->next_tmp;
  em->next_tmp += op->num_results;
  uint32_t num_scalars = 0;
  for (uint32_t i = 0; i < op->num_results; i++) {
    if (is_block(op->results[i]))
      tpu_line(em, "%%$%u = memref.alloca() : %s", frame.buffers + i,
               if_buffer_type(mt, op->results[i]));
    else
      tsr_strbuf_printf(&scalar_types, "%s%s", num_scalars++ ? ", " : "",
                        crossing_type(ty, &op->results[i]->type));
  }
  snprintf(frame.zero, sizeof frame.zero, "%s", tpu_index_const(em, 0));
  char scalars[32] = "";
  if (num_scalars) {
    snprintf(scalars, sizeof scalars, "%s", tpu_tmp(em));
    if (num_scalars == 1)
      tpu_line(em, "%s = scf.if %s -> (%s) {", scalars, tpu_name(em, v->cond), SB(scalar_types));
    else
      tpu_line(em, "%s:%u = scf.if %s -> (%s) {", scalars, num_scalars, tpu_name(em, v->cond),
               SB(scalar_types));
  } else {
    tpu_line(em, "scf.if %s {", tpu_name(em, v->cond));
  }
  em->ifs = &frame;
  emit_body(em, v->then_region, false, "");
  tpu_line(em, "} else {");
  emit_body(em, v->else_region, false, "");
  em->ifs = frame.outer;
  tpu_line(em, "}");
  for (uint32_t i = 0, s = 0; i < op->num_results; i++) {
    const tsr_value_t *r = op->results[i];
    if (is_block(r)) {
      const char *l = tpu_tmp(em);
      tpu_line(em, "%s = vector.load %%$%u[%s] : %s, %s", l, frame.buffers + i,
               zero_indices(idx, sizeof idx, frame.zero, r), if_buffer_type(mt, r),
               crossing_type(ty, &r->type));
      tsr_strbuf_printf(&results, "%s%s", i ? ", " : "", l);
    } else if (num_scalars == 1) {
      tsr_strbuf_printf(&results, "%s%s", i ? ", " : "", scalars);
    } else {
      tsr_strbuf_printf(&results, "%s%s#%u", i ? ", " : "", scalars, s++);
    }
  }
  tpu_line(em, "tpu.yield %s : %s", SB(results), SB(types));
  em->indent--;
  tpu_line(em, "}) : () -> (%s)", SB(types));
  control_results_arrived(em, op);
  if (types.failed || scalar_types.failed || results.failed) tpu_fail(em, TSR_OOM());
  tsr_strbuf_deinitialize(&types);
  tsr_strbuf_deinitialize(&scalar_types);
  tsr_strbuf_deinitialize(&results);
}

void tpu_op_if(tpu_emitter_t *em, const tsr_op_t *op) {
  tsr_if_view_t v;
  if (!tsr_opview_if(op, &v)) {
    tpu_unimplemented(em, op, "malformed if");
    return;
  }
  for (uint32_t i = 0; i < op->num_results; i++)
    if (is_block(op->results[i])) {
      emit_if_through_vmem(em, op, &v);
      return;
    }
  char lhs[64];
  control_results(em, op, lhs, sizeof lhs);
  tsr_strbuf_t types;
  tsr_strbuf_initialize(&types);
  type_list(em, &types, op->results, op->num_results);
  if (op->num_results)
    tpu_line(em, "%sscf.if %s -> (%s) {", lhs, tpu_name(em, v.cond), SB(types));
  else
    tpu_line(em, "scf.if %s {", tpu_name(em, v.cond));
  emit_body(em, v.then_region, false, "");
  bool has_else = op->num_results || (v.else_region && v.else_region->first);
  if (has_else) {
    tpu_line(em, "} else {");
    emit_body(em, v.else_region, false, "");
  }
  tpu_line(em, "}");
  control_results_arrived(em, op);
  if (types.failed) tpu_fail(em, TSR_OOM());
  tsr_strbuf_deinitialize(&types);
}

void tpu_op_scoped(tpu_emitter_t *em, const tsr_op_t *op) {
  tsr_scoped_view_t v;
  if (!tsr_opview_scoped(op, &v)) {
    tpu_unimplemented(em, op, "malformed scoped");
    return;
  }
  for (uint32_t i = 0; i < v.num_buffers; i++) {
    const tsr_type_t *t = &v.buffers[i]->type;
    if (t->kind != TSR_TYPE_REF) {
      tpu_unimplemented(em, op, "scoped semaphores are not emitted yet");
      return;
    }
    if (t->space == TSR_SPACE_HBM || t->space == TSR_SPACE_ANY) {
      /* Pallas lowers run_scoped of HBM/ANY to this memref.alloca too, and
       * Mosaic refuses it, so no Pallas kernel with one runs on a TPU. */
      tpu_unimplemented(em, op,
                        "%%%s is a device-wide %s buffer, which Mosaic cannot allocate in a "
                        "kernel (libtpu: \"Cannot allocate ref in non-VMEM/SMEM memory space "
                        "using memref.alloca\")",
                        v.buffers[i]->name, tsr_space_name((tsr_space_t)t->space));
      return;
    }
  }
  char lhs[64];
  control_results(em, op, lhs, sizeof lhs);
  tsr_strbuf_t types;
  tsr_strbuf_initialize(&types);
  type_list(em, &types, op->results, op->num_results);
  tpu_line(em, "%s\"tpu.region\"() ({", lhs);
  em->indent++;
  name_args(em, v.body, 0);
  char ty[TPU_TYPE_MAX];
  for (uint32_t i = 0; i < v.num_buffers; i++)
    tpu_line(em, "%s = memref.alloca() : %s", tpu_name(em, v.buffers[i]),
             tpu_type(ty, &v.buffers[i]->type));
  em->indent--;
  emit_body(em, v.body, true, "tpu.yield");
  tpu_line(em, "}) : () -> (%s)", types.data ? types.data : "");
  control_results_arrived(em, op);
  if (types.failed) tpu_fail(em, TSR_OOM());
  tsr_strbuf_deinitialize(&types);
}

/* ---- Debugging ----------------------------------------------------------------- */

/* Pallas drops debug prints on TPU unless asked (docs/tpu.md): so does
 * tessera, leaving a comment. */
void tpu_op_print(tpu_emitter_t *em, const tsr_op_t *op) {
  tpu_line(em, "// print dropped on TPU");
}

void tpu_op_assert(tpu_emitter_t *em, const tsr_op_t *op) {
  tpu_line(em, "// assert dropped on TPU (no runtime checks in Mosaic kernels)");
}
