/* The typed views of compound ops (ir/opview.h): one decoder per layout,
 * lenient for the printer and the verifier, strict for back ends, and the
 * one encoder the parser builds DMA, semaphore and memory ops with. */
#include "ir/opview.h"

static tsr_opview_operand_t operand_at(const tsr_op_t *op, int64_t slot) {
  tsr_opview_operand_t o = {-1, NULL};
  if (slot < 0) return o;
  o.slot = (int32_t)slot;
  if (op->operands && slot < op->num_operands) o.value = op->operands[slot];
  return o;
}

static tsr_opview_ref_t ref_at(const tsr_op_t *op, int64_t slot, uint32_t first,
                               uint32_t count) {
  tsr_opview_ref_t r;
  r.base = operand_at(op, slot);
  r.first = first;
  r.count = count;
  r.indices = op->indices ? op->indices + first : NULL;
  return r;
}

tsr_value_t *tsr_opview_index_start(const tsr_op_t *op, const tsr_index_t *ix) {
  if (ix->operand < 0 || !op->operands || (uint32_t)ix->operand >= op->num_operands)
    return NULL;
  return op->operands[ix->operand];
}

uint32_t tsr_opview_allowed_flags(tsr_opcode_t opcode) {
  switch (opcode) {
    case TSR_OP_LOAD:
    case TSR_OP_STORE: return TSR_OPF_MASK;
    case TSR_OP_DOT: return TSR_OPF_TRANSPOSE_RHS;
    case TSR_OP_IF: return TSR_OPF_HAS_ELSE;
    case TSR_OP_DMA_START: return TSR_OPF_SEND | TSR_OPF_DEVICE | TSR_OPF_DMA_ADD;
    case TSR_OP_SEM_SIGNAL: return TSR_OPF_DEVICE | TSR_OPF_CORE;
    default: return 0;
  }
}

static bool has_syntax(const tsr_op_t *op, tsr_syntax_t syntax) {
  return (unsigned)op->opcode < TSR_OP_COUNT && tsr_op_table[op->opcode].syntax == syntax;
}

/* ---- load, store, slice -------------------------------------------------------- */

tsr_opview_status_t tsr_opview_access_decode(const tsr_op_t *op, tsr_access_view_t *out) {
  bool load = has_syntax(op, TSR_SYN_LOAD);
  if (!load && !has_syntax(op, TSR_SYN_STORE)) return TSR_OPVIEW_WRONG_OP;
  uint32_t has_mask = (op->flags & TSR_OPF_MASK) ? 1 : 0;
  out->first_dyn = load ? 1 : 2;
  out->ref = ref_at(op, 0, 0, op->num_indices);
  out->stored = operand_at(op, load ? -1 : 1);
  out->mask = operand_at(op, has_mask && op->num_operands ? (int64_t)op->num_operands - 1 : -1);
  if (op->num_operands < out->first_dyn + has_mask) {
    out->end_dyn = out->first_dyn;
    return TSR_OPVIEW_OPERANDS;
  }
  out->end_dyn = op->num_operands - has_mask;
  return TSR_OPVIEW_OK;
}

bool tsr_opview_access(const tsr_op_t *op, tsr_access_view_t *out) {
  tsr_access_view_t v;
  if (tsr_opview_access_decode(op, &v) != TSR_OPVIEW_OK) return false;
  *out = v;
  return true;
}

bool tsr_opview_slice(const tsr_op_t *op, tsr_slice_view_t *out) {
  if (!has_syntax(op, TSR_SYN_SLICE) || op->num_operands != 1) return false;
  out->value = ref_at(op, 0, 0, op->num_indices);
  return true;
}

/* Flags that add operands to DMA and semaphore ops or change their meaning,
 * set on an op that does not take them. */
static bool stray_flags(const tsr_op_t *op) {
  uint32_t optional = TSR_OPF_SEND | TSR_OPF_DEVICE | TSR_OPF_CORE | TSR_OPF_DMA_ADD;
  return (op->flags & optional & ~tsr_opview_allowed_flags(op->opcode)) != 0;
}

/* The device and core operands, which follow the dynamic index starts
 * (each when its flag is set); returns the end of the starts. */
static uint32_t tail_operands(const tsr_op_t *op, uint32_t first_dyn,
                              tsr_opview_operand_t *device, tsr_opview_operand_t *core) {
  uint32_t has_device = (op->flags & TSR_OPF_DEVICE) ? 1 : 0;
  uint32_t has_core = (op->flags & TSR_OPF_CORE) ? 1 : 0;
  uint32_t tail = has_device + has_core;
  uint32_t pos = op->num_operands >= tail ? op->num_operands - tail : first_dyn;
  *device = operand_at(op, has_device ? (int64_t)pos : -1);
  *core = operand_at(op, has_core ? (int64_t)(pos + has_device) : -1);
  return TSR_MAX(pos, first_dyn);
}

/* ---- DMA -------------------------------------------------------------------------- */

tsr_opview_status_t tsr_opview_dma_decode(const tsr_op_t *op, tsr_dma_view_t *out) {
  if (!has_syntax(op, TSR_SYN_DMA)) return TSR_OPVIEW_WRONG_OP;
  bool send = (op->flags & TSR_OPF_SEND) != 0;
  uint32_t device = (op->flags & TSR_OPF_DEVICE) ? 1 : 0;
  uint32_t core = (op->flags & TSR_OPF_CORE) ? 1 : 0;
  /* Index counts, clamped to the indices present; without a send
   * semaphore (or without ints[2]) the semaphore takes the rest. */
  uint32_t left = op->num_indices, count[3];
  for (uint32_t i = 0; i < 3; i++) {
    int64_t n = op->ints && i < op->num_ints ? op->ints[i] : 0;
    if (i == 2 && (!send || op->num_ints < 3)) n = left;
    count[i] = n < 0 ? 0 : (uint32_t)TSR_MIN((uint64_t)n, (uint64_t)left);
    left -= count[i];
  }
  out->src = ref_at(op, 0, 0, count[0]);
  out->dst = ref_at(op, 1, count[0], count[1]);
  out->sem = ref_at(op, 2, count[0] + count[1], count[2]);
  out->send = ref_at(op, send ? 3 : -1, count[0] + count[1] + count[2], send ? left : 0);
  out->add = (op->flags & TSR_OPF_DMA_ADD) != 0;
  out->first_dyn = send ? 4 : 3;
  out->end_dyn = tail_operands(op, out->first_dyn, &out->device, &out->core);
  if (stray_flags(op)) return TSR_OPVIEW_FLAGS;
  if (op->num_operands < out->first_dyn + device + core) return TSR_OPVIEW_OPERANDS;
  if (op->num_ints != 3 || !op->ints) return TSR_OPVIEW_NO_COUNTS;
  int64_t used = 0;
  for (uint32_t i = 0; i < 3; i++) {
    if (op->ints[i] < 0 || op->ints[i] > TSR_MAX_RANK) return TSR_OPVIEW_COUNTS;
    used += op->ints[i];
  }
  if (used > op->num_indices || (!send && used != op->num_indices)) return TSR_OPVIEW_COUNTS;
  return TSR_OPVIEW_OK;
}

bool tsr_opview_dma(const tsr_op_t *op, tsr_dma_view_t *out) {
  tsr_dma_view_t v;
  if (tsr_opview_dma_decode(op, &v) != TSR_OPVIEW_OK) return false;
  *out = v;
  return true;
}

/* ---- Semaphore ops ------------------------------------------------------------------ */

tsr_opview_status_t tsr_opview_sem_decode(const tsr_op_t *op, tsr_sem_view_t *out) {
  if (!has_syntax(op, TSR_SYN_SEM)) return TSR_OPVIEW_WRONG_OP;
  bool amount = op->opcode == TSR_OP_SEM_SIGNAL || op->opcode == TSR_OP_SEM_WAIT;
  uint32_t device = (op->flags & TSR_OPF_DEVICE) ? 1 : 0;
  uint32_t core = (op->flags & TSR_OPF_CORE) ? 1 : 0;
  out->sem = ref_at(op, 0, 0, op->num_indices);
  out->amount = operand_at(op, amount ? 1 : -1);
  out->first_dyn = amount ? 2 : 1;
  out->end_dyn = tail_operands(op, out->first_dyn, &out->device, &out->core);
  if (stray_flags(op)) return TSR_OPVIEW_FLAGS;
  if (op->num_operands < out->first_dyn + device + core) return TSR_OPVIEW_OPERANDS;
  return TSR_OPVIEW_OK;
}

bool tsr_opview_sem(const tsr_op_t *op, tsr_sem_view_t *out) {
  tsr_sem_view_t v;
  if (tsr_opview_sem_decode(op, &v) != TSR_OPVIEW_OK) return false;
  *out = v;
  return true;
}

/* ---- Control flow ---------------------------------------------------------------------- */

static tsr_region_t *region_at(const tsr_op_t *op, uint32_t i) {
  return op->regions && i < op->num_regions ? &op->regions[i] : NULL;
}

static tsr_value_t *arg_at(const tsr_region_t *r, uint32_t i) {
  return r && r->args && i < r->num_args ? r->args[i] : NULL;
}

bool tsr_opview_for(const tsr_op_t *op, tsr_for_view_t *out) {
  if (op->opcode != TSR_OP_FOR) return false;
  tsr_for_view_t v;
  v.lo = operand_at(op, 0).value;
  v.hi = operand_at(op, 1).value;
  v.step = operand_at(op, 2).value;
  v.num_inits = op->num_operands > 3 && op->operands ? op->num_operands - 3 : 0;
  v.inits = v.num_inits ? op->operands + 3 : NULL;
  v.body = region_at(op, 0);
  v.iv = arg_at(v.body, 0);
  v.num_carried = v.body && v.body->args && v.body->num_args > 1 ? v.body->num_args - 1 : 0;
  v.carried = v.num_carried ? v.body->args + 1 : NULL;
  *out = v;
  return true;
}

bool tsr_opview_while(const tsr_op_t *op, tsr_while_view_t *out) {
  if (op->opcode != TSR_OP_WHILE) return false;
  out->num_inits = op->operands ? op->num_operands : 0;
  out->inits = out->num_inits ? op->operands : NULL;
  out->cond = region_at(op, 0);
  out->body = region_at(op, 1);
  return true;
}

bool tsr_opview_if(const tsr_op_t *op, tsr_if_view_t *out) {
  if (op->opcode != TSR_OP_IF) return false;
  out->cond = operand_at(op, 0).value;
  out->then_region = region_at(op, 0);
  out->else_region = region_at(op, 1);
  out->has_else = (op->flags & TSR_OPF_HAS_ELSE) != 0;
  return true;
}

bool tsr_opview_scoped(const tsr_op_t *op, tsr_scoped_view_t *out) {
  if (op->opcode != TSR_OP_SCOPED) return false;
  out->body = region_at(op, 0);
  out->num_buffers = out->body && out->body->args ? out->body->num_args : 0;
  out->buffers = out->num_buffers ? out->body->args : NULL;
  return true;
}

/* ---- Building ---------------------------------------------------------------------------- */

uint32_t tsr_opview_layout(tsr_opcode_t opcode, tsr_opview_parts_t *parts,
                           tsr_value_t **out_operands, int64_t *out_ints,
                           uint32_t *out_num_ints, uint32_t *out_flags) {
  bool dma = tsr_op_table[opcode].syntax == TSR_SYN_DMA;
  uint32_t n = 0;
  for (uint32_t i = 0; i < 4; i++) {
    if (!parts->ref[i]) continue;
    out_operands[n++] = parts->ref[i];
    if (dma && i == 3) *out_flags |= TSR_OPF_SEND;
  }
  for (uint32_t i = 0; i < parts->num_indices; i++) {
    if (parts->indices[i].operand >= 0) parts->indices[i].operand += (int32_t)n;
    if (parts->indices[i].kind == TSR_INDEX_DSIZE) parts->indices[i].stop += n;
  }
  for (uint32_t i = 0; i < parts->num_starts; i++) out_operands[n++] = parts->starts[i];
  if (parts->device) {
    out_operands[n++] = parts->device;
    *out_flags |= TSR_OPF_DEVICE;
  }
  if (parts->core) {
    out_operands[n++] = parts->core;
    *out_flags |= TSR_OPF_CORE;
  }
  if (parts->mask) {
    out_operands[n++] = parts->mask;
    *out_flags |= TSR_OPF_MASK;
  }
  if (parts->add) *out_flags |= TSR_OPF_DMA_ADD;
  *out_num_ints = 0;
  if (dma) {
    for (uint32_t i = 0; i < 3; i++) out_ints[i] = parts->count[i];
    *out_num_ints = 3;
  }
  return n;
}
