/* Queries derived from the op table's EFFECTS bits and the typed views
 * (ir/ir.h): purity, "may block", the refs an op writes and reads, and
 * store forwarding. No opcode is named here: a new row answers by its
 * table entry alone. */
#include "ir/opview.h"

bool tsr_op_is_pure(tsr_opcode_t opcode) {
  const tsr_op_info_t *info = &tsr_op_table[opcode];
  return !(info->effects & ~(uint32_t)(TSR_E_VALUE | TSR_E_INDEX)) &&
         !(info->flags & (TSR_F_CONTROL | TSR_F_TERMINATOR));
}

bool tsr_op_may_block(tsr_opcode_t opcode) {
  return (tsr_op_table[opcode].effects & TSR_E_SEM_WAIT) != 0;
}

/* The destination and source roles of a memory or DMA op: its ref slots. */
static bool ref_roles(const tsr_op_t *op, int32_t *out_dst, int32_t *out_src, bool *out_add) {
  tsr_access_view_t access;
  tsr_dma_view_t dma;
  *out_add = false;
  if (tsr_opview_access(op, &access)) {
    *out_dst = *out_src = access.ref.base.slot;
    return true;
  }
  if (tsr_opview_dma(op, &dma)) {
    *out_dst = dma.dst.base.slot;
    *out_src = dma.src.base.slot;
    *out_add = dma.add;
    return true;
  }
  return false;
}

int32_t tsr_op_written_ref(const tsr_op_t *op) {
  int32_t dst, src;
  bool add;
  if (!(tsr_op_table[op->opcode].effects & TSR_E_REF_WRITE)) return -1;
  return ref_roles(op, &dst, &src, &add) ? dst : -1;
}

uint32_t tsr_op_read_refs(const tsr_op_t *op, int32_t out_slots[2]) {
  int32_t dst, src;
  bool add;
  uint32_t effects = tsr_op_table[op->opcode].effects;
  if (!(effects & (TSR_E_REF_READ | TSR_E_REF_WRITE)) || !ref_roles(op, &dst, &src, &add))
    return 0;
  uint32_t n = 0;
  if (effects & TSR_E_REF_READ) out_slots[n++] = src;
  if (add && (effects & TSR_E_REF_WRITE)) out_slots[n++] = dst;
  return n;
}

const tsr_op_t *tsr_op_forward_store(const tsr_op_t *op) {
  const tsr_op_t *st = op->next;
  if (!(tsr_op_table[op->opcode].flags & TSR_F_FORWARD) || (op->flags & TSR_OPF_MASK))
    return NULL;
  if (op->num_results != 1 || op->results[0]->type.kind != TSR_TYPE_VECTOR) return NULL;
  tsr_access_view_t store;
  if (!st || !tsr_opview_access(st, &store) || store.stored.slot < 0 ||
      store.mask.slot >= 0 || store.stored.value != op->results[0])
    return NULL;
  return st;
}
