/* Layer 3 of the MLIR text emitter (emit_internal.h): the runtime calls
 * (lower_api.h) that control flow, the grid pipeline and the driver build
 * on. Defined in emit_runtime.c. */
#ifndef TESSERA_LOWER_EMIT_RUNTIME_H
#define TESSERA_LOWER_EMIT_RUNTIME_H

#include "lower/emit_internal.h"

/* Numbers the kernel's sites (tsr_ir_walk_ops) and semaphore slots
 * (tsr_ir_semaphore_slots) as the runtime does, and notes remote DMAs.
 * False when memory runs out (em->error is then set). */
bool em_number_sites(emitter_t *em);
/* The op's position in tsr_ir_walk_ops order (its diagnostic site). */
int64_t em_site_of(const emitter_t *em, const tsr_op_t *op);
/* A step of the run (a grid step, or a loop iteration when `take`, an i1,
 * holds), counted against this core's budget: an i1, go on. `point`: for
 * a grid step, the i64 number of the grid point it starts, else 0. */
ssa_t em_count_step(emitter_t *em, ssa_t take, int64_t site, ssa_t point);
/* A semaphore ref's vinfo: a view never materialized, whose offsets are
 * the runtime's slots. */
void em_sem_ref_init(emitter_t *em, const tsr_value_t *ref);
/* A device-wide (hbm/any) scoped buffer `buf`, argument `wide` of scoped
 * op `op`: TSR_RT_WIDE_ENTER, and its instance as a memref of
 * buf's type, the name of a new root (returned). em_wide_exit: its
 * TSR_RT_WIDE_EXIT when the scope ends. */
uint32_t em_wide_enter(emitter_t *em, const tsr_op_t *op, uint32_t wide, const tsr_value_t *buf);
void em_wide_exit(emitter_t *em, const tsr_op_t *op, uint32_t wide);
/* Kernels with remote DMAs: TSR_RT_START when `cond` (i1) holds (wait for
 * every core), and the registration of every root in the prologue with
 * TSR_RT_END before the deallocations. */
void em_meet_at_start(emitter_t *em, ssa_t cond);
void em_register_memory(emitter_t *em);
/* Index `pos` of op (i32 value v) clamped to [0, hi] as an index, after a
 * branch to the runtime's out-of-bounds report when it is outside. */
ssa_t em_checked_index(emitter_t *em, const tsr_op_t *op, uint32_t pos, ssa_t v, int64_t hi);
/* The block indices bi (i32) of decl's index map, ended by `yield`: the
 * runtime's block-range report when one of those `need` names is outside
 * [0, nblocks). */
ssa_t em_check_block_range(emitter_t *em, const tsr_op_t *yield, uint32_t decl, uint32_t rank,
                           const ssa_t *bi, const int64_t *nblocks, const bool *need,
                           bool read_uninit);
/* Under the run's bounds (em->bounds): index `pos` of op (i32 value v) is
 * an error only outside [0, hi] (hi: of the ref's padded shape); returns
 * the i1 that it is. */
ssa_t em_check_index_within(emitter_t *em, const tsr_op_t *op, uint32_t pos, ssa_t v,
                            int64_t hi);
/* TSR_RT_OUTSIDE when `cond` (i1) holds: op's view starting at index
 * `first` reaches outside its ref's logical shape, as the bounds allow. */
void em_warn_outside(emitter_t *em, const tsr_op_t *op, uint32_t first, bool write, ssa_t cond);
/* TSR_RT_VISIT: output operand `operand` starts block number `block`
 * (index) at this core's step `step` (index). */
void em_visit_block(emitter_t *em, uint32_t operand, ssa_t block, ssa_t step);
/* An index value as i64. */
ssa_t em_i64_of_index(emitter_t *em, ssa_t v);

#endif /* TESSERA_LOWER_EMIT_RUNTIME_H */
