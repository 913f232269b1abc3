/* Splitting long kernel bodies into functions of bounded size, with equal
 * parts compiled once (lower/split.c; docs/lowering.md, "Long kernels").
 * Private to the lowering library: only compile.c calls it. */
#ifndef TESSERA_LOWER_SPLIT_H
#define TESSERA_LOWER_SPLIT_H

#include <mlir-c/IR.h>

#include "base/base_internal.h"

typedef struct tsr_lower_split_params {
  size_t min_kernel_ops; /* functions of at most this many ops are left alone */
  size_t max_part_ops;   /* a part holds at most this many ops (nested ones counted) */
  size_t min_part_ops;   /* and at least this many (shorter runs stay in place) */
  bool merge;            /* equal parts are one function */
  size_t max_calls;      /* then, blocks still longer than this (calls of parts,
                            mostly) are split again into parts of at most this
                            many ops; 0: not */
} tsr_lower_split_params_t;

typedef struct tsr_lower_split_stats {
  uint32_t parts;  /* functions made */
  uint32_t merged; /* of which merged into an equal one */
} tsr_lower_split_stats_t;

/* Splits the body of func.func @func_name of `module` (before the pass
 * pipeline, in upstream dialects): runs of consecutive ops of a block longer
 * than params->max_part_ops move into private functions @tsr_part_N, called
 * in their place, taking the values they use from outside as arguments
 * (index and vector constants are copied in instead) and returning the values
 * used after them; then merges parts that are the same function up to
 * names (they print alike). Semantics are
 * unchanged: the ops run in the same order. Returns false when memory ran out
 * (the module is then unusable). Not thread-safe for one module. */
bool tsr_lower_split_module(MlirContext ctx, MlirModule module, const char *func_name,
                            const tsr_lower_split_params_t *params,
                            tsr_lower_split_stats_t *out_stats);

#endif /* TESSERA_LOWER_SPLIT_H */
