/* Calls into the runtime (lower_api.h) from the generated code: the site
 * and semaphore slot numbering the runtime shares, steps of the run against
 * the core's budget, the memory registration and meetings of kernels with
 * remote DMAs, and the ops that are runtime calls: semaphores, DMAs, print
 * and assert (layer 3, emit_internal.h). */
#include <stdio.h>
#include <stdlib.h>

#include "ir/opview.h"
#include "lower/emit_dispatch.h"
#include "lower/emit_internal.h"
#include "lower/emit_runtime.h"
#include "lower/lower_api.h"
#include "base/sort.h"

/* ---- Sites and semaphore slots ---------------------------------------------------------------- */

struct em_site {
  const tsr_op_t *op;
  uint32_t position;
};

static int compare_sites(const void *a, const void *b) {
  uintptr_t x = (uintptr_t)((const struct em_site *)a)->op;
  uintptr_t y = (uintptr_t)((const struct em_site *)b)->op;
  return x < y ? -1 : x > y;
}

/* The op's position in tsr_ir_walk_ops order (its diagnostic site). */
int64_t em_site_of(const emitter_t *em, const tsr_op_t *op) {
  struct em_site key = {op, 0};
  const struct em_site *s =
      bsearch(&key, em->sites, em->num_sites, sizeof *em->sites, compare_sites);
  return s ? s->position : 0;
}

static void note_site(void *ctx, const tsr_op_t *op, uint32_t position) {
  emitter_t *em = ctx;
  em->sites[position] = (struct em_site){op, position};
  /* a DMA of dynamic size is copied by the runtime too (sized_dma) */
  if (op->opcode == TSR_OP_DMA_START && (op->flags & TSR_OPF_DEVICE)) em->remote_dmas = true;
  for (uint32_t i = 0; op->opcode == TSR_OP_DMA_START && i < op->num_indices; i++)
    if (op->indices[i].kind == TSR_INDEX_DSIZE) em->remote_dmas = true;
}

static void note_sem(void *ctx, const tsr_value_t *ref, uint64_t first) {
  emitter_t *em = ctx;
  em->sem_slot[ref->id] = (int64_t)first;
}

/* Sites (tsr_ir_walk_ops) and semaphore slots (tsr_ir_semaphore_slots), as
 * the runtime numbers them. */
bool em_number_sites(emitter_t *em) {
  const tsr_kernel_t *k = em->k;
  em->num_sites = tsr_ir_walk_ops(k, NULL, NULL);
  em->sites = tsr_calloc(em->num_sites + 1, sizeof *em->sites);
  em->sem_slot = tsr_calloc(k->num_values + 1, sizeof *em->sem_slot);
  if (!em->sites || !em->sem_slot) {
    em_fail(em, TSR_OOM());
    return false;
  }
  tsr_ir_walk_ops(k, note_site, em);
  qsort(em->sites, em->num_sites, sizeof *em->sites, compare_sites);
  tsr_ir_semaphore_slots(k, note_sem, em);
  return true;
}

/* ---- Calls ------------------------------------------------------------------------------------ */

ssa_t em_i64_of_index(emitter_t *em, ssa_t v) {
  return em_cast(em, "arith.index_cast", v, "index", "i64");
}

static ssa_t i64_of_i32(emitter_t *em, ssa_t v) { return em_cast(em, "arith.extsi", v, "i32", "i64"); }

/* rt_fn(rt_ctx, call, a, b, c, d) -> i64 */
static ssa_t rt_call(emitter_t *em, tsr_lower_rt_call_t call, ssa_t a, ssa_t b, ssa_t c,
                     ssa_t d) {
  ssa_t r = em_fresh(em);
  em_line(em,
          "%s = llvm.call %s(%s, %s, %s, %s, %s, %s) : !llvm.ptr, "
          "(!llvm.ptr, i64, i64, i64, i64, i64) -> i64",
          r.s, em->rt_fn.s, em->rt_ctx.s, em_cint(em, "i64", 0, call).s, a.s, b.s, c.s, d.s);
  return r;
}

static ssa_t c64(emitter_t *em, int64_t v) { return em_cint(em, "i64", 0, v); }

void em_visit_block(emitter_t *em, uint32_t operand, ssa_t block, ssa_t step) {
  (void)rt_call(em, TSR_RT_VISIT, c64(em, operand), em_i64_of_index(em, block),
                em_i64_of_index(em, step), c64(em, 0));
}

/* A step of the run (a grid step, or a loop iteration when `take`, an i1,
 * holds): takes one from this core's budget in the context and calls the
 * runtime (TSR_RT_STEP) when it runs out, which grants more or stops the
 * run. `point`: for a grid step, the i64 number of the grid point it
 * starts (not yet stored in the context), else 0. Returns an i1: go on. */
ssa_t em_count_step(emitter_t *em, ssa_t take, int64_t site, ssa_t point) {
  ssa_t b = em_fresh(em);
  em_line(em, "%s = llvm.load %s : !llvm.ptr -> i64", b.s, em->budget_p.s);
  ssa_t dec = em_cast(em, "arith.extui", take, "i1", "i64");
  ssa_t b1 = em_op2(em, "arith.subi", b, dec, "i64");
  ssa_t out = em_cmp(em, "cmpi", "slt", b1, c64(em, 0), "i64");
  ssa_t b2 = em_fresh(em);
  em_open(em, "%s = scf.if %s -> (i64) {", b2.s, out.s);
  ssa_t g = rt_call(em, TSR_RT_STEP, c64(em, site), point, c64(em, 0), c64(em, 0));
  em_line(em, "scf.yield %s : i64", g.s);
  em->indent--;
  em_open(em, "} else {");
  em_line(em, "scf.yield %s : i64", b1.s);
  em_close(em, "}");
  em_line(em, "llvm.store %s, %s : i64, !llvm.ptr", b2.s, em->budget_p.s);
  return em_cmp(em, "cmpi", "sge", b2, c64(em, 0), "i64");
}

/* Kernels with remote DMAs: every core tells the runtime where its memory
 * is (in the prologue), then, once its first step's blocks are set up, waits
 * until all have (TSR_RT_START, em_meet_at_start); at the end it waits for all
 * before freeing it (TSR_RT_END), so no DMA from another core can write into
 * memory that is not there yet, not yet initialised, or gone. */

/* TSR_RT_START when `cond` (i1) holds: wait until every core is there. */
void em_meet_at_start(emitter_t *em, ssa_t cond) {
  em_open(em, "scf.if %s {", cond.s);
  (void)rt_call(em, TSR_RT_START, c64(em, 0), c64(em, 0), c64(em, 0), c64(em, 0));
  em_close(em, "}");
}

void em_register_memory(emitter_t *em) {
  tsr_strbuf_t *saved = em->cur;
  int saved_indent = em->indent;
  em->cur = &em->pro;
  em->indent = 2;
  ssa_t zero = c64(em, 0);
  uint32_t roots = em->num_roots;
  for (uint32_t r = 0; r < roots; r++)
    (void)rt_call(em, TSR_RT_REGISTER, c64(em, r),
                  em_root_address(em, r, em_root_base(em, r)), zero, zero);
  tsr_strbuf_t end;
  tsr_strbuf_initialize(&end);
  em->cur = &end;
  (void)rt_call(em, TSR_RT_END, zero, zero, zero, zero);
  if (em->epi.size) tsr_strbuf_append(&end, em->epi.data, em->epi.size);
  if (end.failed) em_fail(em, TSR_OOM());
  tsr_strbuf_deinitialize(&em->epi);
  em->epi = end;
  em->cur = saved;
  em->indent = saved_indent;
}

/* ---- Semaphores, DMAs between cores, print and assert -----------------------------------------
 * Semaphores belong to the runtime (lower_api.h): a sem ref's vinfo is a
 * view that is never materialized, whose offset is its first slot, so that
 * the offset of an element is its slot. Local DMAs copy inline at dma_start
 * (the interpreter's --dma-mode eager); the copy is complete before the
 * runtime signals the semaphore, and a core that waited for it sees it. */

/* The address (index) of a memref<n x i64> made by memref.alloca. */
static ssa_t alloca_address(emitter_t *em, ssa_t m, uint32_t n) {
  ssa_t p = em_fresh(em);
  em_line(em, "%s = memref.extract_aligned_pointer_as_index %s : memref<%uxi64> -> index", p.s,
          m.s, n);
  return p;
}

/* The element offset (index) of op's all-point indices [first, ..) into the
 * view `rv`; for a semaphore ref, its slot. */
static ssa_t point_offset(emitter_t *em, const tsr_op_t *op, const view_t *rv, uint32_t first) {
  bool pts;
  ssa_t points[TSR_MAX_RANK];
  (void)em_ref_view_at(em, op, rv, first, &pts, points);
  if (!pts) {
    em_unimplemented(em, op, "a semaphore indexed by a slice");
    return em_cidx(em, 0);
  }
  ssa_t off = rv->off;
  for (uint32_t d = 0; d < rv->rank; d++) off = em_iadd(em, off, em_imulc(em, points[d], rv->strides[d]));
  return off;
}

/* i64 slot|site of the semaphore element op names at indices [first, ..). */
static ssa_t sem_arg(emitter_t *em, const tsr_op_t *op, const tsr_value_t *sem, uint32_t first) {
  ssa_t slot = em_i64_of_index(em, point_offset(em, op, &em_vi(em, sem)->mem, first));
  return em_op2(em, "arith.addi", slot, c64(em, em_site_of(em, op) << 32), "i64");
}

/* Device-wide scoped buffers: the runtime owns their instances (shared by
 * a device's cores, lower_api.h); the compiled code gets an address and
 * makes it a memref (a descriptor of that pointer, dense strides). */
uint32_t em_wide_enter(emitter_t *em, const tsr_op_t *op, uint32_t wide, const tsr_value_t *buf) {
  const tsr_type_t *t = &buf->type;
  int64_t n = tsr_type_element_count(t);
  ssa_t a = rt_call(em, TSR_RT_WIDE_ENTER, c64(em, (int64_t)wide | (em_site_of(em, op) << 32)),
                    c64(em, t->dtype), c64(em, n), c64(em, 0));
  ssa_t p = em_fresh(em);
  em_line(em, "%s = llvm.inttoptr %s : i64 to !llvm.ptr", p.s, a.s);
  char st[96];
  if (t->rank)
    snprintf(st, sizeof st, "!llvm.struct<(ptr, ptr, i64, array<%u x i64>, array<%u x i64>)>",
             t->rank, t->rank);
  else
    snprintf(st, sizeof st, "!llvm.struct<(ptr, ptr, i64)>");
  ssa_t d = em_fresh(em);
  em_line(em, "%s = llvm.mlir.undef : %s", d.s, st);
  int64_t strides[TSR_MAX_RANK];
  em_dense_strides(t->rank, t->dims, strides);
  for (int part = 0; part < 3 + 2 * (int)t->rank; part++) {
    ssa_t v = p;
    char at[32];
    if (part < 2) {
      snprintf(at, sizeof at, "[%d]", part);
    } else if (part == 2) {
      v = c64(em, 0);
      snprintf(at, sizeof at, "[2]");
    } else {
      uint32_t k = (uint32_t)(part - 3) % t->rank;
      bool size = part - 3 < (int)t->rank;
      v = c64(em, size ? t->dims[k] : strides[k]);
      snprintf(at, sizeof at, "[%d, %u]", size ? 3 : 4, k);
    }
    ssa_t next = em_fresh(em);
    em_line(em, "%s = llvm.insertvalue %s, %s%s : %s", next.s, v.s, d.s, at, st);
    d = next;
  }
  ssa_t m = em_fresh(em);
  uint32_t root = em_add_root(em, m, (tsr_dtype_t)t->dtype, t->rank, t->dims);
  tstr_t rt = em_root_type(em, root);
  em_line(em, "%s = builtin.unrealized_conversion_cast %s : %s to %s", m.s, d.s, st, rt.s);
  return root;
}

void em_wide_exit(emitter_t *em, const tsr_op_t *op, uint32_t wide) {
  (void)rt_call(em, TSR_RT_WIDE_EXIT, c64(em, (int64_t)wide | (em_site_of(em, op) << 32)),
                c64(em, 0), c64(em, 0), c64(em, 0));
}

/* The semaphore refs of the kernel and its scoped ops (tsr_ir_semaphore_slots). */
void em_sem_ref_init(emitter_t *em, const tsr_value_t *ref) {
  vinfo_t *vi = em_vi(em, ref);
  const tsr_type_t *t = &ref->type;
  memset(&vi->mem, 0, sizeof vi->mem);
  vi->kind = VK_REF;
  vi->mutable_ref = true;
  vi->mem.root = UINT32_MAX;
  vi->mem.rank = t->rank;
  for (uint32_t d = 0; d < t->rank; d++) vi->mem.dims[d] = t->dims[d];
  em_dense_strides(t->rank, t->dims, vi->mem.strides);
  vi->mem.off = em_cidx(em, em->sem_slot[ref->id]);
}

/* The address (i64) of the first element of op's view [first, ..) of ref
 * `v`, its dims and element strides; *rel: its offset from the root's base. */
static ssa_t view_address(emitter_t *em, const tsr_op_t *op, const tsr_value_t *v, uint32_t first,
                          view_t *out, ssa_t *rel) {
  vinfo_t *vi = em_vi(em, v);
  bool pts;
  ssa_t points[TSR_MAX_RANK];
  view_t w = em_ref_view_at(em, op, &vi->mem, first, &pts, points);
  if (pts) {
    ssa_t off = vi->mem.off;
    for (uint32_t d = 0; d < vi->mem.rank; d++)
      off = em_iadd(em, off, em_imulc(em, points[d], vi->mem.strides[d]));
    memset(&w, 0, sizeof w);
    w.root = vi->mem.root;
    w.off = off;
  }
  *out = w;
  *rel = em_op2(em, "arith.subi", w.off, em_root_base(em, w.root), "index");
  return em_root_address(em, w.root, w.off);
}

/* The size (i32) of index ix (TSR_INDEX_DSIZE) of a DMA view of a
 * dimension `dim`: its operand, kept within what the dimension holds from
 * the start, which the view clamps into [0, dim - 1] (ref_view_ranged).
 * The interpreter reports a size outside; compiled code keeps its memory
 * safe, as with its dynamic starts (docs/dma.md, "Dynamic sizes"). */
static ssa_t dynamic_size(emitter_t *em, const tsr_op_t *op, const tsr_index_t *ix, int64_t dim) {
  ssa_t start = ix->operand >= 0 ? em_scalar(em, op->operands[ix->operand])
                                 : em_cint(em, "i32", 0, ix->start);
  start = em_op2(em, "arith.maxsi", start, em_cint(em, "i32", 0, 0), "i32");
  start = em_op2(em, "arith.minsi", start, em_cint(em, "i32", 0, dim - 1), "i32");
  ssa_t room = em_op2(em, "arith.subi", em_cint(em, "i32", 0, dim + ix->stride - 1), start, "i32");
  room = em_op2(em, "arith.divsi", room, em_cint(em, "i32", 0, ix->stride), "i32");
  ssa_t n = em_scalar(em, op->operands[ix->stop]);
  n = em_op2(em, "arith.maxsi", n, em_cint(em, "i32", 0, 0), "i32");
  return em_op2(em, "arith.minsi", n, room, "i32");
}

/* The dims (i64) of op's DMA view [first, first + count) of ref `v`, its
 * dynamic sizes read; returns the rank. */
static uint32_t dims_at_run(emitter_t *em, const tsr_op_t *op, const tsr_value_t *v,
                            uint32_t first, uint32_t count, ssa_t *out) {
  uint32_t rank = 0;
  for (uint32_t d = 0; d < count && d < v->type.rank; d++) {
    const tsr_index_t *ix = &op->indices[first + d];
    if (ix->kind == TSR_INDEX_POINT) continue;
    out[rank++] = ix->kind == TSR_INDEX_DSIZE
                      ? i64_of_i32(em, dynamic_size(em, op, ix, v->type.dims[d]))
                      : c64(em, tsr_index_extent(ix, v->type.dims[d]));
  }
  return rank;
}

/* A dma_start's views of dynamic size are checked when it runs, as the
 * interpreter checks them: index `pos` (TSR_INDEX_DSIZE) of a dimension
 * `dim` is reported when its size is negative or the elements it names
 * leave [0, dim) (an empty view may start at dim). The runtime gets the
 * size too (TSR_RT_OUT_OF_BOUNDS, c = pos + 2^32, d = the size); the
 * copy then takes the clamped view (dynamic_size), so memory stays safe. */
static void check_dynamic_size(emitter_t *em, const tsr_op_t *op, uint32_t pos, int64_t dim,
                               bool negative_only) {
  const tsr_index_t *ix = &op->indices[pos];
  ssa_t s = ix->operand >= 0 ? em_scalar(em, op->operands[ix->operand])
                             : em_cint(em, "i32", 0, ix->start);
  ssa_t n = em_scalar(em, op->operands[ix->stop]);
  ssa_t s64 = i64_of_i32(em, s), n64 = i64_of_i32(em, n), zero = c64(em, 0);
  /* the last element named, s + (n - 1) * stride, in i64 (no overflow) */
  ssa_t last = em_op2(em, "arith.addi", s64,
                      em_op2(em, "arith.muli", em_op2(em, "arith.subi", n64, c64(em, 1), "i64"),
                             c64(em, ix->stride), "i64"),
                      "i64");
  ssa_t empty = em_cmp(em, "cmpi", "eq", n64, zero, "i64");
  ssa_t bad = em_op2(em, "arith.ori", em_cmp(em, "cmpi", "slt", n64, zero, "i64"),
                     em_cmp(em, "cmpi", "slt", s64, zero, "i64"), "i1");
  ssa_t over_empty = em_op2(em, "arith.andi", empty,
                            em_cmp(em, "cmpi", "sgt", s64, c64(em, dim), "i64"), "i1");
  ssa_t over_full = em_op2(em, "arith.andi", em_cmp(em, "cmpi", "sgt", n64, zero, "i64"),
                           em_cmp(em, "cmpi", "sge", last, c64(em, dim), "i64"), "i1");
  if (negative_only) /* a dma_wait: its view only sizes the wait */
    bad = em_cmp(em, "cmpi", "slt", n64, zero, "i64");
  else
    bad = em_op2(em, "arith.ori", bad, em_op2(em, "arith.ori", over_empty, over_full, "i1"),
                 "i1");
  em_open(em, "scf.if %s {", bad.s);
  (void)rt_call(em, TSR_RT_OUT_OF_BOUNDS, c64(em, em_site_of(em, op)), s64,
                c64(em, (int64_t)pos + ((int64_t)1 << 32)), n64);
  em_close(em, "}");
}

static bool has_dynamic_size(const tsr_op_t *op, const tsr_dma_view_t *dma) {
  for (uint32_t i = dma->src.first; i < dma->dst.first + dma->dst.count; i++)
    if (op->indices[i].kind == TSR_INDEX_DSIZE) return true;
  return false;
}

/* dma_start .. device %d: the runtime copies into the other core's memory
 * and signals both semaphores. With `dims` (i64, one per view dim), the
 * view's dims are those values (a DMA of dynamic size, on this device). */
static void remote_dma(emitter_t *em, const tsr_op_t *op, const tsr_dma_view_t *dma,
                       ssa_t device, const ssa_t *dims) {
  const tsr_value_t *dst = dma->dst.base.value;
  view_t sv, dv;
  ssa_t srel, drel;
  ssa_t src_addr = view_address(em, op, dma->src.base.value, dma->src.first, &sv, &srel);
  (void)view_address(em, op, dst, dma->dst.first, &dv, &drel);
  if (dv.root == UINT32_MAX || sv.root == UINT32_MAX) return;
  uint32_t rank = dv.rank;
  uint32_t n = TSR_RDMA_DIMS + 3 * rank;
  ssa_t desc = em_fresh(em);
  tsr_strbuf_printf(&em->pro, "    %s = memref.alloca() : memref<%uxi64>\n", desc.s, n);
  ssa_t f[TSR_RDMA_DIMS + 3 * TSR_MAX_RANK];
  f[TSR_RDMA_DEVICE] = i64_of_i32(em, device);
  f[TSR_RDMA_ROOT] = c64(em, dv.root);
  f[TSR_RDMA_OFFSET] = em_i64_of_index(em, drel);
  f[TSR_RDMA_SRC] = src_addr;
  f[TSR_RDMA_RANK] = c64(em, rank);
  f[TSR_RDMA_DTYPE] = c64(em, dst->type.dtype);
  f[TSR_RDMA_ADD] = c64(em, dma->add);
  f[TSR_RDMA_SEM] = em_i64_of_index(
      em, point_offset(em, op, &em_vi(em, dma->sem.base.value)->mem, dma->sem.first));
  f[TSR_RDMA_SEND] =
      dma->send.base.value
          ? em_i64_of_index(em, point_offset(em, op, &em_vi(em, dma->send.base.value)->mem,
                                             dma->send.first))
          : c64(em, -1);
  for (uint32_t d = 0; d < rank; d++) {
    f[TSR_RDMA_DIMS + d] = dims ? dims[d] : c64(em, dv.dims[d]);
    f[TSR_RDMA_DIMS + rank + d] = c64(em, sv.strides[d]);
    f[TSR_RDMA_DIMS + 2 * rank + d] = c64(em, dv.strides[d]);
  }
  for (uint32_t i = 0; i < n; i++)
    em_line(em, "memref.store %s, %s[%s] : memref<%uxi64>", f[i].s, desc.s, em_cidx(em, i).s, n);
  ssa_t addr = em_cast(em, "arith.index_cast", alloca_address(em, desc, n), "index", "i64");
  (void)rt_call(em, TSR_RT_REMOTE_DMA, c64(em, em_site_of(em, op)), addr, c64(em, 0), c64(em, 0));
}

void em_op_dma(emitter_t *em, const tsr_op_t *op) {
  tsr_dma_view_t dma;
  if (!tsr_opview_dma(op, &dma)) {
    em_unimplemented(em, op, NULL);
    return;
  }
  const tsr_value_t *src = dma.src.base.value, *dst = dma.dst.base.value;
  const tsr_value_t *sem = dma.sem.base.value;
  const tsr_dtype_t dtype = (tsr_dtype_t)dst->type.dtype;
  vinfo_t *sv = em_vi(em, src), *dv = em_vi(em, dst);
  bool dpts, spts;
  ssa_t dpoints[TSR_MAX_RANK], spoints[TSR_MAX_RANK];
  const bool regular = sem->type.dtype == TSR_SEM_REGULAR;
  const bool dynamic = has_dynamic_size(op, &dma);
  if (op->opcode == TSR_OP_DMA_START && dma.device.value && !dynamic) {
    if (regular) {
      em_unimplemented(em, op, "a remote DMA signalling a regular semaphore");
      return;
    }
    remote_dma(em, op, &dma, em_scalar(em, dma.device.value), NULL);
    return;
  }
  if (dynamic) {
    /* The runtime copies (remote_dma, on this device unless the DMA names
     * one): the dims are run-time values. The common part of the two views
     * is copied; the interpreter reports views that differ. */
    if (regular) {
      em_unimplemented(em, op, "a DMA of dynamic size signalling a regular semaphore");
      return;
    }
    /* a dma_start's two views; a dma_wait's destination, which sizes it */
    const bool wait = op->opcode == TSR_OP_DMA_WAIT;
    for (uint32_t side = wait ? 1 : 0; side < 2; side++) {
      const tsr_opview_ref_t *r = side ? &dma.dst : &dma.src;
      const tsr_value_t *v = r->base.value;
      for (uint32_t d = 0; d < r->count && d < v->type.rank; d++)
        if (op->indices[r->first + d].kind == TSR_INDEX_DSIZE)
          check_dynamic_size(em, op, r->first + d, v->type.dims[d], wait);
    }
    ssa_t sd[TSR_MAX_RANK], dd[TSR_MAX_RANK];
    uint32_t rank = dims_at_run(em, op, dst, dma.dst.first, dma.dst.count, dd);
    ssa_t bytes = c64(em, (int64_t)tsr_dtype_size(dtype));
    for (uint32_t d = 0; d < rank; d++) bytes = em_op2(em, "arith.muli", bytes, dd[d], "i64");
    if (op->opcode == TSR_OP_DMA_WAIT) {
      (void)rt_call(em, TSR_RT_WAIT, sem_arg(em, op, sem, dma.sem.first), bytes, c64(em, -1),
                    c64(em, -1));
      return;
    }
    if (dims_at_run(em, op, src, dma.src.first, dma.src.count, sd) != rank) {
      em_unimplemented(em, op, "DMA views of different ranks");
      return;
    }
    for (uint32_t d = 0; d < rank; d++) dd[d] = em_op2(em, "arith.minsi", dd[d], sd[d], "i64");
    remote_dma(em, op, &dma, dma.device.value ? em_scalar(em, dma.device.value) : em->device,
               dd);
    return;
  }
  /* Under the run's bounds either view may reach outside its ref: the
   * lanes both have inside are copied, the destination's other lanes inside
   * its ref get the uninitialized value (an adding DMA leaves them). */
  soft_bounds_t dsoft, ssoft;
  memset(&ssoft, 0, sizeof ssoft);
  /* under the bounds the source first: its warning is the op's one, as in
   * the interpreter */
  view_t svw;
  memset(&svw, 0, sizeof svw);
  const bool src_first = em->bounds && op->opcode == TSR_OP_DMA_START;
  if (src_first)
    svw = em_ref_view_soft(em, op, &sv->mem, src, dma.src.first, false, &spts, spoints, &ssoft);
  view_t dvw = op->opcode == TSR_OP_DMA_START
                   ? em_ref_view_soft(em, op, &dv->mem, dst, dma.dst.first, true, &dpts, dpoints,
                                      &dsoft)
                   : em_ref_view_at(em, op, &dv->mem, dma.dst.first, &dpts, dpoints);
  if (op->opcode != TSR_OP_DMA_START) memset(&dsoft, 0, sizeof dsoft);
  int64_t elems = 1;
  for (uint32_t d = 0; !dpts && d < dvw.rank; d++) elems *= dvw.dims[d];
  ssa_t bytes = c64(em, elems * (int64_t)tsr_dtype_size(dtype));
  ssa_t none = c64(em, -1);
  if (op->opcode == TSR_OP_DMA_WAIT) {
    (void)rt_call(em, TSR_RT_WAIT, sem_arg(em, op, sem, dma.sem.first), bytes, none, none);
    return;
  }
  const bool add = dma.add;
  if (!src_first)
    svw = em_ref_view_soft(em, op, &sv->mem, src, dma.src.first, false, &spts, spoints, &ssoft);
  if (dpts) {
    nest_t n;
    memset(&n, 0, sizeof n);
    ssa_t sin, din, pt = em_uninit(em, dtype, 0);
    const bool sm = em_soft_point(em, &ssoft, &sin), dm = em_soft_point(em, &dsoft, &din);
    ssa_t v = em_mem_read(em, &sv->mem, dtype, spoints, &n, sm ? &sin : NULL, sm ? &pt : NULL);
    if (add) {
      ssa_t args[2] = {em_mem_read(em, &dv->mem, dtype, dpoints, &n, NULL, NULL), v};
      v = em_elementwise(em, TSR_OP_ADD, dtype, args, 0);
      if (sm) din = dm ? em_op2(em, "arith.andi", din, sin, "i1") : sin;
    }
    em_mem_write(em, &dv->mem, dtype, dpoints, &n, v, dm || (add && sm) ? &din : NULL);
  } else {
    expr_t *smask = em_soft_mask(em, op, &ssoft, NULL, dvw.rank, dvw.dims);
    expr_t *dmask = em_soft_mask(em, op, &dsoft, NULL, dvw.rank, dvw.dims);
    if (add && smask) dmask = dmask ? em_and_mask(em, op, dmask, smask) : smask;
    expr_t *e = ex_new(em, EX_MEM, dtype, dvw.rank, dvw.dims);
    if (!e) return;
    e->mem = svw;
    e->mask = smask;
    if (add) {
      expr_t *d = ex_new(em, EX_MEM, dtype, dvw.rank, dvw.dims), *s2 = e;
      e = ex_new(em, EX_OP, dtype, dvw.rank, dvw.dims);
      if (!d || !e) return;
      d->mem = dvw;
      e->op = TSR_OP_ADD;
      e->arg_dtype = dtype;
      e->nargs = 2;
      e->args[0] = d;
      e->args[1] = s2;
    }
    if (!ex_inplace_safe(em, e, &dvw) || (dmask && !ex_inplace_safe(em, dmask, &dvw))) {
      view_t t = em_materialize(em, e);
      e = ex_new(em, EX_MEM, dtype, dvw.rank, dvw.dims);
      if (!e) return;
      e->mem = t;
      if (dmask) {
        view_t mt = em_materialize(em, dmask);
        dmask = ex_new(em, EX_MEM, TSR_DTYPE_I1, dvw.rank, dvw.dims);
        if (!dmask) return;
        dmask->mem = mt;
      }
    }
    ex_store(em, e, &dvw, dmask);
  }
  /* a regular semaphore counts DMAs (1 each), a DMA semaphore bytes */
  (void)rt_call(em, TSR_RT_SIGNAL, sem_arg(em, op, sem, dma.sem.first), regular ? c64(em, 1) : bytes,
                none, none);
  if (dma.send.base.value)
    (void)rt_call(em, TSR_RT_SIGNAL, sem_arg(em, op, dma.send.base.value, dma.send.first), bytes,
                  none, none);
}

/* The typed view of a semaphore op (ir/opview.h); false after reporting an
 * op without its layout. */
static bool sem_view(emitter_t *em, const tsr_op_t *op, tsr_sem_view_t *out) {
  if (tsr_opview_sem(op, out)) return true;
  em_unimplemented(em, op, NULL);
  return false;
}

/* The semaphore family, one entry per op (emit.c's semaphore_ops). */
void em_op_sem_signal(emitter_t *em, const tsr_op_t *op) {
  tsr_sem_view_t sv;
  if (!sem_view(em, op, &sv)) return;
  ssa_t none = c64(em, -1);
  ssa_t core = none, device = none;
  if (sv.core.value) core = i64_of_i32(em, em_scalar(em, sv.core.value));
  if (sv.device.value) device = i64_of_i32(em, em_scalar(em, sv.device.value));
  (void)rt_call(em, TSR_RT_SIGNAL, sem_arg(em, op, sv.sem.base.value, sv.sem.first),
                i64_of_i32(em, em_scalar(em, sv.amount.value)), device, core);
}

void em_op_sem_wait(emitter_t *em, const tsr_op_t *op) {
  tsr_sem_view_t sv;
  if (!sem_view(em, op, &sv)) return;
  ssa_t none = c64(em, -1);
  (void)rt_call(em, TSR_RT_WAIT, sem_arg(em, op, sv.sem.base.value, sv.sem.first),
                i64_of_i32(em, em_scalar(em, sv.amount.value)), none, none);
}

void em_op_core_barrier(emitter_t *em, const tsr_op_t *op) {
  tsr_sem_view_t sv;
  if (!sem_view(em, op, &sv)) return;
  ssa_t none = c64(em, -1);
  (void)rt_call(em, TSR_RT_BARRIER, sem_arg(em, op, sv.sem.base.value, sv.sem.first), none, none,
                none);
}

void em_op_sem_read(emitter_t *em, const tsr_op_t *op) {
  tsr_sem_view_t sv;
  if (!sem_view(em, op, &sv)) return;
  ssa_t none = c64(em, -1);
  ssa_t v = rt_call(em, TSR_RT_READ, sem_arg(em, op, sv.sem.base.value, sv.sem.first), none, none,
                    none);
  em_set_scalar(em, op->results[0], em_cast(em, "arith.trunci", v, "i64", "i32"));
}

/* print: each operand's elements in a dense buffer (scalars: a rank-0 one),
 * their addresses in an array the runtime formats from. */
void em_op_print(emitter_t *em, const tsr_op_t *op) {
  uint32_t n = op->num_operands ? op->num_operands : 1;
  ssa_t addrs = em_fresh(em);
  tsr_strbuf_printf(&em->pro, "    %s = memref.alloca() : memref<%uxi64>\n", addrs.s, n);
  for (uint32_t i = 0; i < op->num_operands; i++) {
    const tsr_value_t *v = op->operands[i];
    tsr_dtype_t dtype = (tsr_dtype_t)v->type.dtype;
    view_t w;
    if (v->type.kind == TSR_TYPE_SCALAR) {
      w = em_buffer(em, dtype, 0, NULL);
      nest_t nn;
      memset(&nn, 0, sizeof nn);
      ssa_t none[1];
      em_mem_write(em, &w, dtype, none, &nn, em_scalar(em, v), NULL);
    } else {
      w = em_dense_view_of(em, v);
    }
    em_line(em, "memref.store %s, %s[%s] : memref<%uxi64>", em_root_address(em, w.root, w.off).s,
            addrs.s, em_cidx(em, i).s, n);
  }
  ssa_t a = em_cast(em, "arith.index_cast", alloca_address(em, addrs, n), "index", "i64");
  (void)rt_call(em, TSR_RT_PRINT, c64(em, em_site_of(em, op)), a, c64(em, 0), c64(em, 0));
}

/* Run-time bounds checks (docs/lowering.md, "Checks"): a branch, taken
 * only when the index is outside [0, hi], to the runtime's report. One
 * unsigned compare catches both ends. */
ssa_t em_checked_index(emitter_t *em, const tsr_op_t *op, uint32_t pos, ssa_t v, int64_t hi) {
  if (hi < 0) hi = 0;
  (void)em_check_index_within(em, op, pos, v, hi);
  return em_clamp_index(em, v, hi);
}

ssa_t em_check_index_within(emitter_t *em, const tsr_op_t *op, uint32_t pos, ssa_t v,
                            int64_t hi) {
  if (hi < 0) hi = 0;
  ssa_t bad = em_cmp(em, "cmpi", "ugt", v, em_cint(em, "i32", 0, hi), "i32");
  em_open(em, "scf.if %s {", bad.s);
  (void)rt_call(em, TSR_RT_OUT_OF_BOUNDS, c64(em, em_site_of(em, op)), i64_of_i32(em, v),
                c64(em, pos), c64(em, 0));
  em_close(em, "}");
  return bad;
}

void em_warn_outside(emitter_t *em, const tsr_op_t *op, uint32_t first, bool write, ssa_t cond) {
  em_open(em, "scf.if %s {", cond.s);
  (void)rt_call(em, TSR_RT_OUTSIDE, c64(em, em_site_of(em, op)), c64(em, first),
                c64(em, write), c64(em, 0));
  em_close(em, "}");
}

ssa_t em_check_block_range(emitter_t *em, const tsr_op_t *yield, uint32_t decl, uint32_t rank,
                           const ssa_t *bi, const int64_t *nblocks, const bool *need,
                           bool read_uninit) {
  if (!rank) return em_cbool(em, 0, false);
  ssa_t bad = em_cbool(em, 0, false);
  for (uint32_t i = 0; i < rank; i++) {
    if (!need[i]) continue;
    ssa_t b = em_cmp(em, "cmpi", "ugt", bi[i], em_cint(em, "i32", 0, nblocks[i] - 1), "i32");
    bad = em_op2(em, "arith.ori", bad, b, "i1");
  }
  em_open(em, "scf.if %s {", bad.s);
  ssa_t m = em_fresh(em);
  tsr_strbuf_printf(&em->pro, "    %s = memref.alloca() : memref<%uxi64>\n", m.s, rank);
  for (uint32_t i = 0; i < rank; i++)
    em_line(em, "memref.store %s, %s[%s] : memref<%uxi64>", i64_of_i32(em, bi[i]).s, m.s,
            em_cidx(em, i).s, rank);
  ssa_t a = em_cast(em, "arith.index_cast", alloca_address(em, m, rank), "index", "i64");
  (void)rt_call(em, TSR_RT_BLOCK_RANGE, c64(em, em_site_of(em, yield)), c64(em, decl), a,
                c64(em, read_uninit));
  em_close(em, "}");
  return bad;
}

void em_op_assert(emitter_t *em, const tsr_op_t *op) {
  ssa_t c = em_scalar(em, op->operands[0]);
  ssa_t failed = em_op2(em, "arith.xori", c, em_cbool(em, 0, true), "i1");
  em_open(em, "scf.if %s {", failed.s);
  (void)rt_call(em, TSR_RT_ASSERT, c64(em, em_site_of(em, op)), c64(em, 0), c64(em, 0), c64(em, 0));
  em_close(em, "}");
}

/* sort, argsort: the keys in dense views and the result in the store that
 * follows (store forwarding: no copy of the sorted block), or in a buffer
 * of its own when that store's view is strided or shares a root with a key
 * (the runtime's sort reads its keys while it writes), described to the
 * runtime, which sorts. */
void em_op_sort(emitter_t *em, const tsr_op_t *op) {
  const tsr_value_t *r = op->results[0];
  const uint32_t keys = op->num_operands, rank = r->type.rank;
  const uint32_t words = TSR_RSORT_DIMS + rank + 2 * keys;
  ssa_t desc = em_fresh(em);
  tsr_strbuf_printf(&em->pro, "    %s = memref.alloca() : memref<%uxi64>\n", desc.s, words);
  int64_t head[TSR_RSORT_DIMS + TSR_MAX_RANK];
  head[TSR_RSORT_ARGSORT] = op->opcode == TSR_OP_ARGSORT;
  head[TSR_RSORT_RANK] = rank;
  head[TSR_RSORT_AXIS] = op->ints[0];
  head[TSR_RSORT_KEYS] = keys;
  for (uint32_t d = 0; d < rank; d++) head[TSR_RSORT_DIMS + d] = r->type.dims[d];
  ssa_t at[TSR_RSORT_DIMS + TSR_MAX_RANK + 2 * TSR_SORT_MAX_KEYS];
  /* The destination's slot is an address, filled below: a constant of its
   * (unset) head word would put stack bytes into the module's text. */
  for (uint32_t i = 0; i < TSR_RSORT_DIMS + rank; i++)
    if (i != TSR_RSORT_DST) at[i] = c64(em, head[i]);
  view_t w[TSR_SORT_MAX_KEYS];
  for (uint32_t k = 0; k < keys; k++) {
    const tsr_value_t *v = op->operands[k];
    w[k] = em_dense_view_of(em, v);
    at[TSR_RSORT_DIMS + rank + 2 * k] = c64(em, v->type.dtype);
    at[TSR_RSORT_DIMS + rank + 2 * k + 1] = em_root_address(em, w[k].root, w[k].off);
  }
  view_t dst = em_result_dest_call(em, op, w, keys);
  at[TSR_RSORT_DST] = em_root_address(em, dst.root, dst.off);
  for (uint32_t i = 0; i < words; i++)
    em_line(em, "memref.store %s, %s[%s] : memref<%uxi64>", at[i].s, desc.s, em_cidx(em, i).s,
            words);
  ssa_t a = em_cast(em, "arith.index_cast", alloca_address(em, desc, words), "index", "i64");
  (void)rt_call(em, TSR_RT_SORT, c64(em, em_site_of(em, op)), a, c64(em, 0), c64(em, 0));
}
