/* The chips' memory budgets: what a prepared program keeps live in VMEM
 * and SMEM against what the chip has, checked before any run (an error,
 * since the kernel cannot run on that TPU). Split from prepare.c: it reads
 * only the program's ref table. */
#include <stdio.h>

#include "interp/interp_internal.h"

/* The chips are base/chips.c's, shared with the Mosaic emitter. */
static bool chip_budget(const char *chip, uint64_t *vmem, uint64_t *smem) {
  const tsr_chip_t *c = tsr_chip_find(chip);
  if (!c) return false;
  *vmem = (uint64_t)c->vmem_bytes;
  *smem = (uint64_t)c->smem_bytes;
  return true;
}

bool tsr_interp_chip_vmem_bytes(const char *chip, uint64_t *out_bytes) {
  uint64_t smem;
  return chip && chip_budget(chip, out_bytes, &smem);
}


/* Sums the VMEM and SMEM the kernel keeps live: each windowed operand is
 * double-buffered (2 x block), plus scratch and scoped buffers (all counted as
 * live at once: an upper bound). */
tsr_status_t tsr_interp_check_budget(tsr_interp_program_t *p, tsr_loc_t kernel_loc) {
  const char *chip = p->options.chip ? p->options.chip : "v5e";
  if (!chip_budget(chip, &p->vmem_budget, &p->smem_budget))
    return TSR_STATUS(TSR_INVALID_ARGUMENT,
                      "unknown chip '%s' (known: %s)", chip,
                      tsr_chip_names(false));
  tsr_strbuf_t detail;
  tsr_strbuf_initialize(&detail);
  for (uint32_t i = 0; i < p->num_refs; i++) {
    const ref_info_t *r = &p->refs[i];
    if (r->is_sem) continue;
    /* In VMEM a TPU packs the sub-byte integers (two i4 to a byte), which
     * tessera's host arrays hold one per byte: count them packed, so that
     * no kernel a TPU can run is refused here. */
    uint32_t bits = tsr_dtype_bits((tsr_dtype_t)r->dtype);
    uint64_t bytes = r->space == TSR_SPACE_VMEM && r->dtype != TSR_DTYPE_I1 && bits < 8
                         ? (r->elements * bits + 7) / 8
                         : r->elements * tsr_dtype_size((tsr_dtype_t)r->dtype);
    const char *what = "scratch";
    uint64_t copies = 1;
    if (r->operand >= 0) {
      if (p->operands[r->operand].hbm_direct) continue; /* HBM, not VMEM/SMEM */
      copies = r->role == TSR_ROLE_PREFETCH ? 1 : 2;
      what = r->role == TSR_ROLE_IN ? "in" : r->role == TSR_ROLE_OUT ? "out" : "prefetch";
    } else if (r->decl < 0) {
      what = "scoped";
    }
    char b[32];
    tsr_format_bytes(b, sizeof b, bytes);
    if (r->space == TSR_SPACE_VMEM) {
      p->vmem_used += copies * bytes;
      tsr_strbuf_printf(&detail, "%s%s %%%s %s%s", detail.size ? ", " : "", what,
                        r->name, copies == 2 ? "2 x " : "", b);
    } else if (r->space == TSR_SPACE_SMEM) {
      p->smem_used += copies * bytes;
    }
  }
  tsr_status_t s = NULL;
  if (p->vmem_used > p->vmem_budget) {
    char used[32], budget[32];
    tsr_format_bytes(used, sizeof used, p->vmem_used);
    tsr_format_bytes(budget, sizeof budget, p->vmem_budget);
    s = TSR_STATUS_AT(TSR_RESOURCE_EXHAUSTED, kernel_loc,
                      "kernel @%s needs %s of VMEM but chip %s has "
                      "%s per core (%s; windowed operands are double-buffered)",
                      p->kernel_name, used, chip, budget, detail.data ? detail.data : "");
  } else if (p->smem_used > p->smem_budget) {
    char used[32], budget[32];
    tsr_format_bytes(used, sizeof used, p->smem_used);
    tsr_format_bytes(budget, sizeof budget, p->smem_budget);
    s = TSR_STATUS_AT(TSR_RESOURCE_EXHAUSTED, kernel_loc,
                      "kernel @%s needs %s of SMEM but chip %s has %s", p->kernel_name, used,
                      chip, budget);
  }
  tsr_strbuf_deinitialize(&detail);
  return s;
}
