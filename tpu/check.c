/* The block-shape rules Pallas's TPU lowering checks before it writes a
 * module (jax/_src/pallas/mosaic/lowering.py, _check_block_mappings;
 * docs/tpu.md, "Layout rules"), and the chip's VMEM, as
 * tessera's own located diagnostics. Every rule here is one Pallas
 * enforces: a kernel Pallas accepts passes. */
#include <stdio.h>

#include "tpu/tpu_internal.h"

static bool yields_zeros(const tsr_region_t *map) {
  const tsr_op_t *y = map->last;
  if (!y || y->opcode != TSR_OP_YIELD) return false;
  for (uint32_t i = 0; i < y->num_operands; i++) {
    const tsr_op_t *def = y->operands[i]->def;
    if (!def || def->opcode != TSR_OP_CONST || def->literal.i != 0) return false;
  }
  return true;
}

bool tpu_decl_trivial_window(const tsr_decl_t *d) {
  for (uint32_t i = 0; i < d->array.rank; i++) {
    int64_t b = d->block[i] == TSR_SQUEEZED ? 1 : d->block[i];
    if (b != d->array.dims[i]) return false;
  }
  return !d->index_map || yields_zeros(d->index_map);
}

/* The bits of one element in TPU memory: the sub-byte and 8-bit types
 * packed (an i4 is 4 bits, although tessera's host arrays hold one per
 * byte), i1 as the i32 Pallas stores bools as. */
static int64_t tpu_bits(tsr_dtype_t dtype) {
  return dtype == TSR_DTYPE_I1 ? 32 : (int64_t)tsr_dtype_bits(dtype);
}

/* The rows of Mosaic's memory tile of a buffer whose second-to-last dim is
 * `rows` (jax/_src/tpu_info.py _get_tiling_factor, which mirrors Mosaic's
 * getTilingFactor): 32 / bits rows packed in a 32-bit word, twice that
 * before TPU v4, doubled up to 8 rows (the sublanes) or the packing when
 * more; from a whole large tile of rows on (8 x the packing: 16 rows of
 * 16-bit types, 32 of 8-bit, 64 of 4-bit, 128 of 2-bit), Mosaic may take
 * that large tile (its large-second-minor tiling), which is counted here,
 * so that the figure stays an upper bound. */
static int64_t tile_rows(int64_t bits, int64_t rows, bool before_v4) {
  int64_t packing = 32 / bits, sublanes = 8;
  int64_t large = sublanes * packing;
  if (rows >= large) return large;
  int64_t normal = packing > sublanes ? packing : sublanes;
  int64_t tiling = (before_v4 ? 2 : 1) * packing;
  while (tiling < (rows < normal ? rows : normal)) tiling *= 2;
  return tiling;
}

/* Bytes of one buffer of `dtype` and `dims` in VMEM on `chip`: packed
 * (an (8, 128) i4 block is 512 bytes), the last dim padded to 128 lanes
 * and the one before to whole memory tiles (tile_rows); rank 1 is one row. */
static int64_t padded_bytes(const tpu_chip_t *chip, tsr_dtype_t dtype, uint32_t rank,
                            const int64_t *dims) {
  int64_t bits = tpu_bits(dtype), elems = 1;
  bool before_v4 = !strcmp(chip->name, "v2") || !strcmp(chip->name, "v3");
  for (uint32_t i = 0; i < rank; i++) {
    int64_t d = dims[i] == TSR_SQUEEZED ? 1 : dims[i];
    if (i == rank - 1) d = (d + 127) / 128 * 128;
    if (i + 2 == rank) {
      int64_t t = tile_rows(bits, d, before_v4);
      d = (d + t - 1) / t * t;
    }
    elems *= d;
  }
  return (elems * bits + 7) / 8;
}

typedef struct {
  const tpu_chip_t *chip;
  int64_t total;
} vmem_sum_t;

static void add_scoped(void *p, const tsr_op_t *op, uint32_t position) {
  (void)position;
  vmem_sum_t *sum = p;
  int64_t *total = &sum->total;
  if (op->opcode == TSR_OP_IF) { /* block results go through VMEM buffers (emit_control.c) */
    for (uint32_t i = 0; i < op->num_results; i++) {
      const tsr_type_t *t = &op->results[i]->type;
      if (t->kind == TSR_TYPE_VECTOR)
        *total += padded_bytes(sum->chip, (tsr_dtype_t)t->dtype, t->rank, t->dims);
    }
    return;
  }
  if (op->opcode != TSR_OP_SCOPED || !op->num_regions) return;
  const tsr_region_t *r = &op->regions[0];
  for (uint32_t i = 0; i < r->num_args; i++) {
    const tsr_type_t *t = &r->args[i]->type;
    if (t->kind == TSR_TYPE_REF && t->space == TSR_SPACE_VMEM)
      *total += padded_bytes(sum->chip, (tsr_dtype_t)t->dtype, t->rank, t->dims);
  }
}

int64_t tpu_vmem_need(const tsr_kernel_t *kernel, const tpu_chip_t *chip) {
  vmem_sum_t sum = {chip, 0};
  int64_t *total = &sum.total;
  for (uint32_t i = 0; i < kernel->num_decls; i++) {
    const tsr_decl_t *d = &kernel->decls[i];
    const tsr_type_t *t = &d->ref->type;
    if (t->kind != TSR_TYPE_REF || t->space != TSR_SPACE_VMEM) continue;
    if (d->role == TSR_ROLE_SCRATCH)
      *total += padded_bytes(chip, (tsr_dtype_t)t->dtype, t->rank, t->dims);
    else if (d->role == TSR_ROLE_IN || d->role == TSR_ROLE_OUT)
      *total += 2 * padded_bytes(chip, (tsr_dtype_t)d->array.dtype, d->array.rank, d->block);
  }
  tsr_ir_walk_ops(kernel, add_scoped, &sum);
  return sum.total;
}

static const char *role_name(tsr_role_t r) {
  return r == TSR_ROLE_IN ? "in" : r == TSR_ROLE_OUT ? "out" : "operand";
}

static void check_decl(tsr_diag_list_t *list, const tsr_kernel_t *k, const tsr_decl_t *d) {
  tsr_space_t space = d->ref->type.space;
  const char *what = role_name(d->role), *name = d->ref->name;
  if (d->array.rank == 0 && space != TSR_SPACE_SMEM) {
    /* Pallas's TPU lowering takes a rank-0 array only as an SMEM block
     * (jax/_src/pallas/mosaic/lowering.py, _check_block_mappings). */
    tsr_diag_add(list, d->loc,
                 "%s '%%%s': a rank-0 array is an SMEM block on TPU (Pallas: \"The Pallas TPU "
                 "lowering currently supports only blocks of rank >= 1\"); put it in smem",
                 what, name);
    return;
  }
  if (d->array.rank == 0 && k->grid_rank > 0) {
    /* A kernel with a grid gives each operand a window; libtpu has none of
     * rank 0 (Mosaic: "Failed to set window params for input N: Scalar
     * windows not implemented"). A grid-free kernel takes it. */
    tsr_diag_add(list, d->loc,
                 "%s '%%%s': a rank-0 array in a kernel with a grid has a rank-0 window, which "
                 "Mosaic does not implement (\"Scalar windows not implemented\"); only a "
                 "grid-free kernel takes one on TPU",
                 what, name);
    return;
  }
  if (space == TSR_SPACE_ANY || space == TSR_SPACE_HBM) return; /* no window */
  bool trivial = tpu_decl_trivial_window(d);
  if (space == TSR_SPACE_SMEM && trivial) return;
  if (k->grid_rank == 0 && !trivial) {
    tsr_diag_add(list, d->loc,
                 "%s '%%%s': a kernel without a grid takes only whole arrays at block index 0 "
                 "on TPU (Pallas: \"Non-trivial windowing is not supported for grid-free "
                 "pallas_call\")", what, name);
    return;
  }
  uint32_t rank = d->array.rank;
  if (rank == 0) return;
  bool any_element = false, any_blocked = false;
  for (uint32_t i = 0; i < rank; i++) {
    any_element |= d->element[i];
    any_blocked |= !d->element[i] && d->block[i] != TSR_SQUEEZED;
  }
  if (any_element && any_blocked)
    /* Mosaic's window kinds are per operand: an element window offsets
     * every dim by elements */
    tsr_diag_add(list, d->loc,
                 "%s '%%%s': element block dims mixed with blocked ones, which Mosaic cannot "
                 "window (Pallas: \"All block dimensions must be Elements or none of them can "
                 "be Elements.\"): make every dim an element dim (pl.Element(n) for a whole "
                 "one, its index map giving element offsets) or squeezed",
                 what, name);
  int64_t bs[TSR_MAX_RANK];
  for (uint32_t i = 0; i < rank; i++) bs[i] = d->block[i] == TSR_SQUEEZED ? 1 : d->block[i];
  const int64_t *as = d->array.dims;
  if (rank >= 2) {
    int64_t b0 = bs[rank - 1], a0 = as[rank - 1], b1 = bs[rank - 2], a1 = as[rank - 2];
    bool lane_ok = b0 == a0 || b0 % 128 == 0, sub_ok = b1 == a1 || b1 % 8 == 0;
    if (!lane_ok)
      tsr_diag_add(list, d->loc,
                   "%s '%%%s': block dim %u is %lld, which TPUs cannot tile: the last block "
                   "dim must be a multiple of 128 or equal the array's (%lld)",
                   what, name, rank - 1, (long long)b0, (long long)a0);
    if (!sub_ok)
      tsr_diag_add(list, d->loc,
                   "%s '%%%s': block dim %u is %lld, which TPUs cannot tile: the second-to-last "
                   "block dim must be a multiple of 8 or equal the array's (%lld)",
                   what, name, rank - 2, (long long)b1, (long long)a1);
    uint32_t kept = 0;
    for (uint32_t i = 0; i < rank; i++) kept += d->block[i] != TSR_SQUEEZED;
    if (lane_ok && sub_ok && kept == 1 && space == TSR_SPACE_VMEM)
      /* Mosaic lays a 1-D block out T(128) while XLA tiles the array in 2-D
       * (T(1,128) for (1, 48), T(8,128) for (8, 1)); Pallas's module of such
       * a block is refused the same way. */
      tsr_diag_add(list, d->loc,
                   "%s '%%%s': squeezing a rank-%u array's block down to one dim leaves a 1-D "
                   "block, which libtpu lays out differently from the array (libtpu: \"XLA "
                   "layout ... does not match Mosaic layout\"): keep one of the last two dims as "
                   "a block dim of 1 instead of squeezed",
                   what, name, rank);
    return;
  }
  /* Rank 1: the whole array, a multiple of 8 x 128 elements, or a power
   * of two of at least one packed row (128 x 32 / bitwidth). */
  int64_t b0 = bs[0], a0 = as[0];
  tsr_dtype_t dt = d->array.dtype;
  int64_t bitwidth = tpu_bits(dt); /* Pallas: dtypes.itemsize_bits, 4 for int4 */
  int64_t min_tiling = 128 * (32 / bitwidth);
  bool pow2 = b0 > 0 && (b0 & (b0 - 1)) == 0;
  if (!(b0 == a0 || b0 % 1024 == 0 || (b0 >= min_tiling && pow2)))
    tsr_diag_add(list, d->loc,
                 "%s '%%%s': 1-D block of %lld elements, which TPUs cannot tile: it must equal "
                 "the array (%lld), be a multiple of 1024 (8 x 128), or be a power of two of "
                 "at least %lld (128 x 32 / %lld bits)",
                 what, name, (long long)b0, (long long)a0, (long long)min_tiling,
                 (long long)bitwidth);
}

tsr_status_t tpu_check_kernel(const tsr_kernel_t *kernel, const tpu_chip_t *chip) {
  tsr_diag_list_t list;
  tsr_diag_list_initialize(&list, 0);
  /* The one chip-dependent rule, libtpu's: a core_parallel dimension runs
   * one index per TensorCore. */
  for (uint32_t g = 0; g < kernel->grid_rank; g++)
    if (kernel->semantics[g] == TSR_DIM_CORE_PARALLEL && kernel->grid_bound[g])
      /* JAX's tpu_custom_call refuses Pallas's module the same way. */
      tsr_diag_add(&list, kernel->loc,
                   "kernel '@%s': grid dimension %u is core_parallel with a dynamic extent; "
                   "Mosaic shards a core_parallel dimension over the cores when it compiles "
                   "the kernel, so its extent must be static (JAX: \"The iteration bound "
                   "corresponding to the core-parallel dimension must be statically known\")",
                   kernel->name, g);
    else if (kernel->semantics[g] == TSR_DIM_CORE_PARALLEL &&
             kernel->grid[g] > (int64_t)chip->cores)
      tsr_diag_add(&list, kernel->loc,
                   "kernel '@%s': grid dimension %u is core_parallel with %lld indices, but %s "
                   "has %u TensorCore%s per device to run them on (libtpu: \"Core-parallel "
                   "dimension has iteration bound greater than the number of active cores\")",
                   kernel->name, g, (long long)kernel->grid[g], chip->name, chip->cores,
                   chip->cores == 1 ? "" : "s");
  for (uint32_t i = 0; i < kernel->num_decls; i++) {
    const tsr_decl_t *d = &kernel->decls[i];
    /* a semaphore operand has no block: Pallas passes it unwindowed */
    if ((d->role == TSR_ROLE_IN || d->role == TSR_ROLE_OUT) && d->ref->type.kind != TSR_TYPE_SEM)
      check_decl(&list, kernel, d);
    /* libtpu's, for every memory space: "Only arguments with float8...,
     * bfloat16 or 32-bit element types are supported" (16- and 8-bit
     * integers are taken). */
    const tsr_type_t *t = &d->ref->type;
    if (t->kind == TSR_TYPE_REF && t->dtype == TSR_DTYPE_F16)
      tsr_diag_add(&list, d->loc,
                   "%s '%%%s': an f16 operand, which TPU kernels cannot take (libtpu: \"Only "
                   "arguments with float8..., bfloat16 or 32-bit element types are "
                   "supported\"): pass bf16 or f32",
                   d->role == TSR_ROLE_SCRATCH ? "scratch" : role_name(d->role), d->ref->name);
  }
  /* More VMEM than the chip has: no vmem_limit_bytes makes it compile
   * (libtpu: "Ran out of memory in memory space vmem"). Over the default
   * scoped limit but within the chip is fine: tpu_call sets the limit. */
  int64_t need = tpu_vmem_need(kernel, chip);
  if (need > chip->vmem_bytes - TPU_VMEM_RESERVED) {
    char need_text[32], chip_text[32];
    tsr_format_bytes(need_text, sizeof need_text, (uint64_t)need);
    tsr_format_bytes(chip_text, sizeof chip_text, (uint64_t)chip->vmem_bytes);
    tsr_diag_add(&list, kernel->loc,
                 "kernel '@%s' needs %s of VMEM (windowed operands double-buffered, "
                 "scratch, scoped buffers, packed and padded to whole tiles) but %s has %s per "
                 "core (libtpu: \"Ran out of memory in memory space vmem\"): use smaller "
                 "blocks",
                 kernel->name, need_text, chip->name, chip_text);
  }
  tsr_status_t st = tsr_diag_list_to_status(&list, TSR_VERIFY_ERROR);
  tsr_diag_list_deinitialize(&list);
  return st;
}
