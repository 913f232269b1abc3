/* Canonical printer of the kernel IR (docs/ir.md, "Canonical printing"):
 * two-space indentation, the short index-map form whenever it applies,
 * shortest round-tripping float literals. Printing, parsing (ir/parse.c) and
 * printing again gives the same text. The printer never fails on a module the
 * builder accepted: missing pieces print as '?'. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "ir/opview.h"

static void put_indent(tsr_strbuf_t *sb, int depth) {
  for (int i = 0; i < depth; i++) tsr_strbuf_puts(sb, "  ");
}

static void put_value(tsr_strbuf_t *sb, const tsr_value_t *v) {
  tsr_strbuf_puts(sb, "%");
  tsr_strbuf_puts(sb, v && v->name ? v->name : "?");
}

static void put_operand(tsr_strbuf_t *sb, const tsr_op_t *op, int64_t i) {
  put_value(sb, i >= 0 && i < op->num_operands ? op->operands[i] : NULL);
}

/* ", "-separated operands [first, last). */
static void put_operands(tsr_strbuf_t *sb, const tsr_op_t *op, uint32_t first,
                         uint32_t last) {
  for (uint32_t i = first; i < last && i < op->num_operands; i++) {
    if (i > first) tsr_strbuf_puts(sb, ", ");
    put_value(sb, op->operands[i]);
  }
}

static void put_types(tsr_strbuf_t *sb, const tsr_op_t *op) {
  for (uint32_t i = 0; i < op->num_results; i++) {
    tsr_strbuf_puts(sb, i ? ", " : " : ");
    tsr_type_print(sb, &op->results[i]->type);
  }
}

static void put_string(tsr_strbuf_t *sb, const char *s) {
  tsr_strbuf_puts(sb, "\"");
  for (; s && *s; s++) {
    switch (*s) {
      case '"': tsr_strbuf_puts(sb, "\\\""); break;
      case '\\': tsr_strbuf_puts(sb, "\\\\"); break;
      case '\n': tsr_strbuf_puts(sb, "\\n"); break;
      case '\t': tsr_strbuf_puts(sb, "\\t"); break;
      default: tsr_strbuf_append(sb, s, 1); break;
    }
  }
  tsr_strbuf_puts(sb, "\"");
}


static bool same_double(double a, double b) {
  return a == b && signbit(a) == signbit(b);
}

/* The shortest "%.Ng" (N = 1..17) that reads back to the same dtype value;
 * ".0" appended when it would otherwise read as an integer. */
static void put_float(tsr_strbuf_t *sb, double v, tsr_dtype_t dtype) {
  v = tsr_literal_round(v, dtype);
  if (isnan(v)) {
    tsr_strbuf_puts(sb, "nan");
    return;
  }
  if (isinf(v)) {
    tsr_strbuf_puts(sb, v > 0 ? "inf" : "-inf");
    return;
  }
  char buf[64];
  for (int n = 1; n <= 17; n++) {
    snprintf(buf, sizeof buf, "%.*g", n, v);
    if (same_double(tsr_literal_round(strtod(buf, NULL), dtype), v)) break;
  }
  tsr_strbuf_puts(sb, buf);
  if (!strpbrk(buf, ".e")) tsr_strbuf_puts(sb, ".0");
}

static void put_literal(tsr_strbuf_t *sb, const tsr_op_t *op) {
  const tsr_type_t *t = op->num_results ? &op->results[0]->type : NULL;
  if (!t || t->kind == TSR_TYPE_SEM || t->dtype >= TSR_DTYPE_COUNT) {
    tsr_strbuf_printf(sb, "%lld", (long long)op->literal.i);
    return;
  }
  tsr_dtype_t dtype = (tsr_dtype_t)t->dtype;
  switch (tsr_dtype_class(dtype)) {
    case TSR_CLASS_FLOAT: put_float(sb, op->literal.f, dtype); break;
    case TSR_CLASS_BOOL: tsr_strbuf_puts(sb, op->literal.i ? "true" : "false"); break;
    default: tsr_strbuf_printf(sb, "%lld", (long long)op->literal.i); break;
  }
}

static void put_index(tsr_strbuf_t *sb, const tsr_op_t *op, const tsr_index_t *ix) {
  switch ((tsr_index_kind_t)ix->kind) {
    case TSR_INDEX_FULL: tsr_strbuf_puts(sb, ":"); break;
    case TSR_INDEX_POINT:
      if (ix->operand >= 0)
        put_operand(sb, op, ix->operand);
      else
        tsr_strbuf_printf(sb, "%lld", (long long)ix->start);
      break;
    case TSR_INDEX_SLICE:
      tsr_strbuf_printf(sb, "%lld:%lld", (long long)ix->start, (long long)ix->stop);
      if (ix->stride != 1) tsr_strbuf_printf(sb, ":%lld", (long long)ix->stride);
      break;
    case TSR_INDEX_DS:
      tsr_strbuf_puts(sb, "ds(");
      if (ix->operand >= 0)
        put_operand(sb, op, ix->operand);
      else
        tsr_strbuf_printf(sb, "%lld", (long long)ix->start);
      tsr_strbuf_printf(sb, ", %lld", (long long)ix->size);
      if (ix->stride != 1) tsr_strbuf_printf(sb, ", %lld", (long long)ix->stride);
      tsr_strbuf_puts(sb, ")");
      break;
    case TSR_INDEX_DSIZE:
      tsr_strbuf_puts(sb, "ds(");
      if (ix->operand >= 0)
        put_operand(sb, op, ix->operand);
      else
        tsr_strbuf_printf(sb, "%lld", (long long)ix->start);
      tsr_strbuf_puts(sb, ", ");
      put_operand(sb, op, (int32_t)ix->stop);
      if (ix->stride != 1) tsr_strbuf_printf(sb, ", %lld", (long long)ix->stride);
      tsr_strbuf_puts(sb, ")");
      break;
    default: tsr_strbuf_puts(sb, "?"); break;
  }
}

/* Indices [first, first + count) in brackets; `optional`: nothing when empty. */
static void put_indices(tsr_strbuf_t *sb, const tsr_op_t *op, uint32_t first,
                        uint32_t count, bool optional) {
  if (optional && count == 0) return;
  tsr_strbuf_puts(sb, "[");
  for (uint32_t i = 0; i < count && first + i < op->num_indices; i++) {
    if (i) tsr_strbuf_puts(sb, ", ");
    put_index(sb, op, &op->indices[first + i]);
  }
  tsr_strbuf_puts(sb, "]");
}

static void put_ints(tsr_strbuf_t *sb, const tsr_op_t *op) {
  tsr_strbuf_puts(sb, "[");
  for (uint32_t i = 0; i < op->num_ints; i++)
    tsr_strbuf_printf(sb, "%s%lld", i ? ", " : "", (long long)op->ints[i]);
  tsr_strbuf_puts(sb, "]");
}

static int64_t int_attr(const tsr_op_t *op, uint32_t i) {
  return i < op->num_ints ? op->ints[i] : 0;
}

/* An empty yield at the end of a region is not printed. */
static bool is_omitted_yield(const tsr_op_t *op) {
  return op->opcode == TSR_OP_YIELD && op->num_operands == 0 && !op->next;
}

static bool region_is_empty(const tsr_region_t *r) {
  return !r->first || is_omitted_yield(r->first);
}

static void put_op(tsr_strbuf_t *sb, const tsr_op_t *op, int depth);

/* " {\n" ops "}" at `depth` (the closing brace is indented, no newline). */
static void put_block(tsr_strbuf_t *sb, const tsr_region_t *r, int depth) {
  tsr_strbuf_puts(sb, " {\n");
  for (const tsr_op_t *op = r->first; op; op = op->next)
    if (!is_omitted_yield(op)) put_op(sb, op, depth + 1);
  put_indent(sb, depth);
  tsr_strbuf_puts(sb, "}");
}

static const tsr_region_t *op_region(const tsr_op_t *op, uint32_t i) {
  return i < op->num_regions ? &op->regions[i] : NULL;
}

static const tsr_value_t *region_arg(const tsr_region_t *r, uint32_t i) {
  return r && i < r->num_args ? r->args[i] : NULL;
}

/* A ref view of a DMA or semaphore op: "%ref[idx, ..]" (no brackets when
 * it has no indices). */
static void put_ref_view(tsr_strbuf_t *sb, const tsr_op_t *op, const tsr_opview_ref_t *r) {
  put_operand(sb, op, r->base.slot);
  put_indices(sb, op, r->first, r->count, true);
}

/* The device and core operands, and the DMA `add` flag. */
static void put_device_core(tsr_strbuf_t *sb, const tsr_op_t *op,
                            const tsr_opview_operand_t *device,
                            const tsr_opview_operand_t *core) {
  if (device->slot >= 0) {
    tsr_strbuf_puts(sb, " device ");
    put_operand(sb, op, device->slot);
  }
  if (core->slot >= 0) {
    tsr_strbuf_puts(sb, " core ");
    put_operand(sb, op, core->slot);
  }
  if (op->flags & TSR_OPF_DMA_ADD) tsr_strbuf_puts(sb, " add");
}

/* The DMA and semaphore ops, through their lenient views (ir/opview.h),
 * so any built op prints. */
static void put_dma_sem(tsr_strbuf_t *sb, const tsr_op_t *op) {
  tsr_dma_view_t dma;
  tsr_sem_view_t sem;
  tsr_strbuf_puts(sb, " ");
  if (tsr_opview_dma_decode(op, &dma) != TSR_OPVIEW_WRONG_OP) {
    put_ref_view(sb, op, &dma.src);
    tsr_strbuf_puts(sb, " -> ");
    put_ref_view(sb, op, &dma.dst);
    tsr_strbuf_puts(sb, ", ");
    put_ref_view(sb, op, &dma.sem);
    if (dma.send.base.slot >= 0) {
      tsr_strbuf_puts(sb, " send ");
      put_ref_view(sb, op, &dma.send);
    }
    put_device_core(sb, op, &dma.device, &dma.core);
  } else if (tsr_opview_sem_decode(op, &sem) != TSR_OPVIEW_WRONG_OP) {
    put_ref_view(sb, op, &sem.sem);
    if (sem.amount.slot >= 0) {
      tsr_strbuf_puts(sb, ", ");
      put_operand(sb, op, sem.amount.slot);
    }
    put_device_core(sb, op, &sem.device, &sem.core);
  }
}

static void put_control(tsr_strbuf_t *sb, const tsr_op_t *op, int depth) {
  const tsr_region_t *r0 = op_region(op, 0), *r1 = op_region(op, 1);
  tsr_for_view_t fv;
  tsr_while_view_t wv;
  tsr_if_view_t iv;
  tsr_scoped_view_t sv;
  if (tsr_opview_for(op, &fv)) {
    tsr_strbuf_puts(sb, " ");
    put_value(sb, fv.iv);
    tsr_strbuf_puts(sb, " = ");
    put_value(sb, fv.lo);
    tsr_strbuf_puts(sb, " to ");
    put_value(sb, fv.hi);
    tsr_strbuf_puts(sb, " step ");
    put_value(sb, fv.step);
    for (uint32_t i = 0; i < fv.num_inits; i++) {
      tsr_strbuf_puts(sb, i ? ", " : " iter(");
      put_value(sb, i < fv.num_carried ? fv.carried[i] : NULL);
      tsr_strbuf_puts(sb, " = ");
      put_value(sb, fv.inits[i]);
    }
    if (fv.num_inits) tsr_strbuf_puts(sb, ")");
  } else if (tsr_opview_while(op, &wv)) {
    for (uint32_t i = 0; i < wv.num_inits; i++) {
      tsr_strbuf_puts(sb, i ? ", " : " iter(");
      put_value(sb, region_arg(wv.cond, i));
      tsr_strbuf_puts(sb, " = ");
      put_value(sb, wv.inits[i]);
    }
    if (wv.num_inits) tsr_strbuf_puts(sb, ")");
  } else if (tsr_opview_if(op, &iv)) {
    tsr_strbuf_puts(sb, " ");
    put_value(sb, iv.cond);
  } else if (tsr_opview_scoped(op, &sv)) {
    tsr_strbuf_puts(sb, "(");
    for (uint32_t i = 0; i < sv.num_buffers; i++) {
      if (i) tsr_strbuf_puts(sb, ", ");
      put_value(sb, sv.buffers[i]);
      tsr_strbuf_puts(sb, ": ");
      if (sv.buffers[i]) tsr_type_print(sb, &sv.buffers[i]->type);
    }
    tsr_strbuf_puts(sb, ")");
  }
  put_types(sb, op);
  if (!r0) {
    tsr_strbuf_puts(sb, " {\n");
    put_indent(sb, depth);
    tsr_strbuf_puts(sb, "}\n");
    return;
  }
  put_block(sb, r0, depth);
  if (op->opcode == TSR_OP_WHILE && r1) {
    tsr_strbuf_puts(sb, " do");
    put_block(sb, r1, depth);
  } else if (op->opcode == TSR_OP_IF && r1 && !region_is_empty(r1)) {
    tsr_strbuf_puts(sb, " else");
    put_block(sb, r1, depth);
  }
  tsr_strbuf_puts(sb, "\n");
}

static void put_op(tsr_strbuf_t *sb, const tsr_op_t *op, int depth) {
  put_indent(sb, depth);
  for (uint32_t i = 0; i < op->num_results; i++) {
    if (i) tsr_strbuf_puts(sb, ", ");
    put_value(sb, op->results[i]);
  }
  if (op->num_results) tsr_strbuf_puts(sb, " = ");
  if ((unsigned)op->opcode >= TSR_OP_COUNT) {
    tsr_strbuf_puts(sb, "?\n");
    return;
  }
  const tsr_op_info_t *info = &tsr_op_table[op->opcode];
  tsr_strbuf_puts(sb, info->mnemonic);
  switch (info->syntax) {
    case TSR_SYN_CONST:
      tsr_strbuf_puts(sb, " ");
      put_literal(sb, op);
      break;
    case TSR_SYN_INT_ATTR:
      tsr_strbuf_printf(sb, " %lld", (long long)int_attr(op, 0));
      break;
    case TSR_SYN_LOAD:
    case TSR_SYN_STORE: {
      tsr_access_view_t access;
      (void)tsr_opview_access_decode(op, &access); /* lenient: any op prints */
      tsr_strbuf_puts(sb, " ");
      put_operand(sb, op, access.ref.base.slot);
      put_indices(sb, op, access.ref.first, access.ref.count, false);
      if (access.stored.slot >= 0) {
        tsr_strbuf_puts(sb, ", ");
        put_operand(sb, op, access.stored.slot);
      }
      if (access.mask.slot >= 0) {
        tsr_strbuf_puts(sb, " mask ");
        put_operand(sb, op, access.mask.slot);
      }
      break;
    }
    case TSR_SYN_UNARY:
    case TSR_SYN_BINARY:
    case TSR_SYN_OPERANDS:
    case TSR_SYN_YIELD:
    case TSR_SYN_DOT:
      if (op->num_operands) tsr_strbuf_puts(sb, " ");
      put_operands(sb, op, 0, op->num_operands);
      if (op->flags & TSR_OPF_TRANSPOSE_RHS) tsr_strbuf_puts(sb, " transpose_rhs");
      break;
    case TSR_SYN_PERM:
      tsr_strbuf_puts(sb, " ");
      put_operand(sb, op, 0);
      tsr_strbuf_puts(sb, " ");
      put_ints(sb, op);
      break;
    case TSR_SYN_SLICE:
      tsr_strbuf_puts(sb, " ");
      put_operand(sb, op, 0);
      tsr_strbuf_puts(sb, " ");
      put_indices(sb, op, 0, op->num_indices, false);
      break;
    case TSR_SYN_AXIS:
      tsr_strbuf_puts(sb, " ");
      put_operands(sb, op, 0, op->num_operands);
      tsr_strbuf_printf(sb, " axis %lld", (long long)int_attr(op, 0));
      if (op->opcode == TSR_OP_ROLL && op->num_ints == 3)
        tsr_strbuf_printf(sb, " stride %lld stride_axis %lld", (long long)int_attr(op, 1),
                          (long long)int_attr(op, 2));
      break;
    case TSR_SYN_VALUE_INT:
      tsr_strbuf_puts(sb, " ");
      put_operands(sb, op, 0, op->num_operands);
      tsr_strbuf_printf(sb, ", %lld", (long long)int_attr(op, 0));
      break;
    case TSR_SYN_AXES:
      tsr_strbuf_puts(sb, " ");
      put_operand(sb, op, 0);
      tsr_strbuf_puts(sb, " axes ");
      put_ints(sb, op);
      break;
    case TSR_SYN_PRINT:
      tsr_strbuf_puts(sb, " ");
      put_string(sb, op->text);
      if (op->num_operands) tsr_strbuf_puts(sb, ", ");
      put_operands(sb, op, 0, op->num_operands);
      break;
    case TSR_SYN_ASSERT:
      tsr_strbuf_puts(sb, " ");
      put_operand(sb, op, 0);
      tsr_strbuf_puts(sb, ", ");
      put_string(sb, op->text);
      break;
    case TSR_SYN_DMA:
    case TSR_SYN_SEM:
      put_dma_sem(sb, op);
      break;
    case TSR_SYN_FOR:
    case TSR_SYN_WHILE:
    case TSR_SYN_IF:
    case TSR_SYN_SCOPED:
      put_control(sb, op, depth);
      return;
  }
  put_types(sb, op);
  tsr_strbuf_puts(sb, "\n");
}

/* ---- Kernel headers ---- */

static bool is_i32_scalar(const tsr_type_t *t) {
  return t->kind == TSR_TYPE_SCALAR && t->dtype == TSR_DTYPE_I32;
}

/* The short form applies when the map is i32 consts and a yield of its
 * arguments and those consts. */
static bool map_is_short(const tsr_region_t *r) {
  const tsr_op_t *op = r->first;
  for (; op && op->opcode == TSR_OP_CONST; op = op->next)
    if (op->num_results != 1 || !is_i32_scalar(&op->results[0]->type) ||
        op->num_regions)
      return false;
  if (!op || op->opcode != TSR_OP_YIELD || op->next) return false;
  for (uint32_t i = 0; i < op->num_operands; i++) {
    const tsr_value_t *v = op->operands[i];
    if (!v) return false;
    bool is_arg = !v->def && v->owner == r;
    bool is_const = v->def && v->def->parent == r && v->def->opcode == TSR_OP_CONST;
    if (!is_arg && !is_const) return false;
  }
  return true;
}

static void put_map(tsr_strbuf_t *sb, const tsr_region_t *r) {
  tsr_strbuf_puts(sb, " map(");
  for (uint32_t i = 0; i < r->num_args; i++) {
    if (i) tsr_strbuf_puts(sb, ", ");
    put_value(sb, r->args[i]);
  }
  tsr_strbuf_puts(sb, ")");
  if (!map_is_short(r)) {
    put_block(sb, r, 1);
    return;
  }
  const tsr_op_t *yield = r->last;
  tsr_strbuf_puts(sb, " -> (");
  for (uint32_t i = 0; i < yield->num_operands; i++) {
    const tsr_value_t *v = yield->operands[i];
    if (i) tsr_strbuf_puts(sb, ", ");
    if (v->def)
      tsr_strbuf_printf(sb, "%lld", (long long)v->def->literal.i);
    else
      put_value(sb, v);
  }
  tsr_strbuf_puts(sb, ")");
}

static const char *role_name(tsr_role_t role) {
  switch (role) {
    case TSR_ROLE_PREFETCH: return "prefetch";
    case TSR_ROLE_IN: return "in";
    case TSR_ROLE_OUT: return "out";
    case TSR_ROLE_SCRATCH: return "scratch";
  }
  return "?";
}

static const char *semantics_name(uint8_t s) {
  const char *name = tsr_ir_dim_semantics_name((tsr_ir_dim_semantics_t)s);
  return name ? name : "arbitrary";
}

static void put_decl(tsr_strbuf_t *sb, const tsr_kernel_t *k, const tsr_decl_t *d) {
  tsr_strbuf_printf(sb, "  %s ", role_name(d->role));
  put_value(sb, d->ref);
  tsr_strbuf_puts(sb, ": ");
  if (d->role == TSR_ROLE_SCRATCH) {
    tsr_type_print(sb, &d->ref->type);
    tsr_strbuf_puts(sb, "\n");
    return;
  }
  if (d->ref && d->ref->type.kind == TSR_TYPE_SEM) {
    /* a semaphore operand: its type, no space or block (docs/ir.md) */
    tsr_type_print(sb, &d->ref->type);
    if (d->role == TSR_ROLE_OUT && d->alias >= 0 && (uint32_t)d->alias < k->num_decls) {
      tsr_strbuf_puts(sb, " alias ");
      put_value(sb, k->decls[d->alias].ref);
    }
    tsr_strbuf_puts(sb, "\n");
    return;
  }
  tsr_type_print(sb, &d->array);
  if (d->role != TSR_ROLE_PREFETCH)
    tsr_strbuf_printf(sb, " %s", tsr_space_name((tsr_space_t)d->ref->type.space));
  if (d->has_block) {
    tsr_strbuf_puts(sb, " block[");
    for (uint32_t i = 0; i < d->array.rank; i++) {
      if (i) tsr_strbuf_puts(sb, ", ");
      if (d->block[i] == TSR_SQUEEZED)
        tsr_strbuf_puts(sb, "squeezed");
      else if (d->element[i] && (d->pad_low[i] || d->pad_high[i]))
        tsr_strbuf_printf(sb, "element(%lld, %lld, %lld)", (long long)d->block[i],
                          (long long)d->pad_low[i], (long long)d->pad_high[i]);
      else if (d->element[i])
        tsr_strbuf_printf(sb, "element(%lld)", (long long)d->block[i]);
      else
        tsr_strbuf_printf(sb, "%lld", (long long)d->block[i]);
    }
    tsr_strbuf_puts(sb, "]");
    if (d->index_map) put_map(sb, d->index_map);
  }
  if (d->role == TSR_ROLE_OUT && d->alias >= 0 && (uint32_t)d->alias < k->num_decls) {
    tsr_strbuf_puts(sb, " alias ");
    put_value(sb, k->decls[d->alias].ref);
  }
  if (d->revisit != TSR_REVISIT_IMMEDIATE) {
    const char *mode = tsr_ir_revisit_name((tsr_ir_revisit_t)d->revisit);
    tsr_strbuf_printf(sb, " revisit %s", mode ? mode : "?");
  }
  tsr_strbuf_puts(sb, "\n");
}

void tsr_ir_print_kernel(tsr_strbuf_t *sb, const tsr_kernel_t *kernel) {
  tsr_strbuf_printf(sb, "kernel @%s\n", kernel->name ? kernel->name : "?");
  if (kernel->grid_rank) {
    tsr_strbuf_puts(sb, "  grid(");
    for (uint32_t i = 0; i < kernel->grid_rank; i++)
      if (kernel->grid_bound[i] && kernel->grid_bound[i] <= kernel->num_decls) {
        if (i) tsr_strbuf_puts(sb, ", ");
        put_value(sb, kernel->decls[kernel->grid_bound[i] - 1].ref);
      } else {
        tsr_strbuf_printf(sb, "%s%lld", i ? ", " : "", (long long)kernel->grid[i]);
      }
    tsr_strbuf_puts(sb, ") semantics(");
    for (uint32_t i = 0; i < kernel->grid_rank; i++)
      tsr_strbuf_printf(sb, "%s%s", i ? ", " : "",
                        semantics_name(kernel->semantics[i]));
    tsr_strbuf_puts(sb, ")\n");
  }
  for (uint32_t i = 0; i < kernel->num_decls; i++)
    put_decl(sb, kernel, &kernel->decls[i]);
  tsr_strbuf_puts(sb, "{\n");
  for (const tsr_op_t *op = kernel->body.first; op; op = op->next)
    if (!is_omitted_yield(op)) put_op(sb, op, 1);
  tsr_strbuf_puts(sb, "}\n");
}

void tsr_ir_print_module(tsr_strbuf_t *sb, const tsr_module_t *module) {
  for (uint32_t i = 0; i < module->num_kernels; i++) {
    if (i) tsr_strbuf_puts(sb, "\n");
    tsr_ir_print_kernel(sb, module->kernels[i]);
  }
}
