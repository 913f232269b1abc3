/* What the driver of the MLIR text emitter (emit.c) calls: one entry point
 * per op family, each emitting one op and setting its results' vinfo, and
 * the grid pipeline. Only the driver's dispatch (emit_op) calls them; the
 * files defining them include this header for their prototypes. */
#ifndef TESSERA_LOWER_EMIT_DISPATCH_H
#define TESSERA_LOWER_EMIT_DISPATCH_H

#include "lower/emit_internal.h"

/* emit_memory.c */
void em_op_load(emitter_t *em, const tsr_op_t *op);
void em_op_store(emitter_t *em, const tsr_op_t *op);

/* emit_values.c */
void em_op_elementwise(emitter_t *em, const tsr_op_t *op); /* and compare, select,
                                                              convert, bitcast */
void em_op_const(emitter_t *em, const tsr_op_t *op);
void em_op_iota(emitter_t *em, const tsr_op_t *op);
void em_op_broadcast(emitter_t *em, const tsr_op_t *op);
void em_op_reshape(emitter_t *em, const tsr_op_t *op);
void em_op_slice(emitter_t *em, const tsr_op_t *op);
void em_op_program_id(emitter_t *em, const tsr_op_t *op);
void em_op_num_programs(emitter_t *em, const tsr_op_t *op);
void em_op_device_id(emitter_t *em, const tsr_op_t *op);
void em_op_core_id(emitter_t *em, const tsr_op_t *op);
void em_op_multiple_of(emitter_t *em, const tsr_op_t *op);

/* emit_ops.c */
void em_op_reduce(emitter_t *em, const tsr_op_t *op);
void em_op_argreduce(emitter_t *em, const tsr_op_t *op);
void em_op_dot(emitter_t *em, const tsr_op_t *op);
void em_op_transpose(emitter_t *em, const tsr_op_t *op);
void em_op_concatenate(emitter_t *em, const tsr_op_t *op);
void em_op_roll(emitter_t *em, const tsr_op_t *op);
void em_op_gather(emitter_t *em, const tsr_op_t *op);
void em_op_scatter(emitter_t *em, const tsr_op_t *op);
void em_op_sort(emitter_t *em, const tsr_op_t *op);

/* emit_runtime.c */
void em_op_dma(emitter_t *em, const tsr_op_t *op);
void em_op_sem_signal(emitter_t *em, const tsr_op_t *op);
void em_op_sem_wait(emitter_t *em, const tsr_op_t *op);
void em_op_sem_read(emitter_t *em, const tsr_op_t *op);
void em_op_core_barrier(emitter_t *em, const tsr_op_t *op);
void em_op_print(emitter_t *em, const tsr_op_t *op);
void em_op_assert(emitter_t *em, const tsr_op_t *op);

/* emit_control.c */
void em_op_for(emitter_t *em, const tsr_op_t *op);
void em_op_while(emitter_t *em, const tsr_op_t *op);
void em_op_if(emitter_t *em, const tsr_op_t *op);
void em_op_scoped(emitter_t *em, const tsr_op_t *op);

/* emit_grid.c: the kernel's operands as refs and the grid loop around the
 * body, after the driver's prologue. roots[i]: the root of decl i's array
 * (a function argument; unused for scratch). */
void em_emit_grid(emitter_t *em, const uint32_t *roots);

#endif /* TESSERA_LOWER_EMIT_DISPATCH_H */
