/* The grid pipeline: the kernel's operands as refs (BlockSpec windows in
 * place or through block buffers, prefetch, hbm/any arrays, scratch), and
 * the grid loop over this core's points: block indices from the index maps,
 * block copies in and out, output fills, the body between them (layer 4,
 * emit_internal.h). The body and the index maps are emitted through the
 * driver's dispatch, em_emit_region. */
#include <stdio.h>

#include "lower/emit_dispatch.h"
#include "lower/emit_internal.h"
#include "lower/emit_runtime.h"
#include "lower/lower_api.h"

/* How the pipeline moves one in/out operand (see docs/lowering_codegen.md). */
typedef struct operand_state {
  const tsr_decl_t *decl;
  uint32_t root;        /* the HBM array: a function argument (or the aliased output's) */
  bool blocked;         /* vmem/smem with a window: block index per step */
  bool inplace;         /* the window of HBM is the ref; else a block buffer */
  bool maybe_padded;    /* some array dim is not a multiple of its block dim */
  bool fill_out;        /* an output block that starts holding the uninitialized
                           value when entered (not fully stored first) */
  bool revisit_any;     /* an output of revisit mode any: a block entered is
                           copied in from the array (in place: is the array) */
  bool tracked;         /* its previous block indices are kept (state) */
  bool read_uninit;     /* an input under TSR_LOWER_OOB_READS_UNINIT whose
                           block index may be out of range: a warning, and
                           the block holds the uninitialized value */
  view_t buf;           /* block buffer (not in place) */
  uint32_t state;       /* first slot of its block indices in the state memref */
  int64_t block[TSR_MAX_RANK];   /* squeezed dims as 1 */
  int64_t nblocks[TSR_MAX_RANK];
  int64_t astrides[TSR_MAX_RANK];
  uint32_t ref_rank;
  int64_t ref_dims[TSR_MAX_RANK];
  int64_t ref_strides[TSR_MAX_RANK]; /* array strides of the kept dims */
  ssa_t bi[TSR_MAX_RANK];  /* this step's block indices (index) */
} operand_state_t;

typedef struct kernel_state {
  operand_state_t *ops; /* per decl */
  ssa_t state;          /* memref<N x index> of previous block indices */
  uint32_t state_slots;
  ssa_t lin, first, last;
  /* the loop: this core's step number, its steps (phi - plo) x inner, the split */
  ssa_t la, mine;
  tsr_ir_core_split_t split;
} kernel_state_t;

/* Block indices of operand `os` at the grid point `pt` (i32 values),
 * clamped into the array: an out-of-range block index is reported (when
 * `check`) as the interpreter reports it, and the nearest block is read or
 * written instead of memory outside the array. With `out_bad`, the i1 that
 * a block index is out of range (false when none may be), for an operand
 * that reads the uninitialized value there (os->read_uninit). */
static void eval_map(emitter_t *em, operand_state_t *os, const ssa_t *pt, ssa_t *out,
                     bool check, ssa_t *out_bad) {
  if (!os->read_uninit) out_bad = NULL;
  if (out_bad) *out_bad = em_cbool(em, 0, false);
  const tsr_decl_t *d = os->decl;
  uint32_t rank = d->array.rank;
  if (!d->index_map) {
    for (uint32_t i = 0; i < rank; i++) out[i] = em_cidx(em, 0);
    return;
  }
  const tsr_region_t *m = d->index_map;
  for (uint32_t i = 0; i < m->num_args; i++) em_set_scalar(em, m->args[i], pt[i]);
  em_emit_region(em, m);
  const tsr_op_t *y = em_terminator(m);
  if (check && y && y->num_operands >= rank) {
    /* the step's own block (the next step's is checked when it begins);
     * no code for a block index known to be in range: a constant, or a
     * grid index whose static extent has no more steps than blocks */
    ssa_t bi[TSR_MAX_RANK];
    bool need[TSR_MAX_RANK], any = false;
    for (uint32_t i = 0; i < rank; i++) {
      const tsr_value_t *v = y->operands[i];
      need[i] = true;
      if (v->def && v->def->opcode == TSR_OP_CONST)
        need[i] = v->def->literal.i < 0 || v->def->literal.i >= os->nblocks[i];
      for (uint32_t a = 0; a < m->num_args && a < em->k->grid_rank; a++)
        if (m->args[a] == v && !em->k->grid_bound[a] && em->k->grid[a] <= os->nblocks[i])
          need[i] = false;
      any = any || need[i];
      bi[i] = em_scalar(em, v);
    }
    if (any) {
      ssa_t bad = em_check_block_range(em, y, (uint32_t)(d - em->k->decls), rank, bi,
                                       os->nblocks, need, os->read_uninit);
      if (out_bad) *out_bad = bad;
    }
  }
  for (uint32_t i = 0; i < rank; i++) {
    if (!y || i >= y->num_operands) {
      out[i] = em_cidx(em, 0);
      continue;
    }
    out[i] = em_clamp_index(em, em_scalar(em, y->operands[i]), os->nblocks[i] - 1);
  }
}

/* Where the window of block indices bi starts in the array along array dim
 * i: block index x block dim, or for an element dim (pl.Element) its element
 * offset less the low padding, clipped at 0. With `at`, where the array's
 * part starts in the block (nonzero only for an element dim's low padding). */
static ssa_t window_lo(emitter_t *em, const operand_state_t *os, const ssa_t *bi, uint32_t i,
                       ssa_t *at) {
  const tsr_decl_t *d = os->decl;
  if (!d->element[i]) {
    if (at) *at = em_cidx(em, 0);
    return em_imulc(em, bi[i], os->block[i]);
  }
  ssa_t s = em_op2(em, "arith.subi", bi[i], em_cidx(em, d->pad_low[i]), "index");
  ssa_t lo = em_op2(em, "arith.maxsi", s, em_cidx(em, 0), "index");
  if (at) *at = em_op2(em, "arith.subi", lo, s, "index");
  return lo;
}

/* Offset of the window of block indices bi in the array. */
static ssa_t window_offset(emitter_t *em, const operand_state_t *os, const ssa_t *bi) {
  ssa_t off = em_root_base(em, os->root);
  for (uint32_t i = 0; i < os->decl->array.rank; i++) {
    if (os->decl->element[i])
      off = em_iadd(em, off, em_imulc(em, window_lo(em, os, bi, i, NULL), os->astrides[i]));
    else
      off = em_iadd(em, off, em_imulc(em, bi[i], os->block[i] * os->astrides[i]));
  }
  return off;
}

/* The valid extent of the window along each kept dim (min(block, dim -
 * start); an element dim's may be 0, a window wholly in the padding). */
static void window_extent(emitter_t *em, const operand_state_t *os, const ssa_t *bi,
                          dimv_t *ext) {
  uint32_t k = 0;
  const tsr_decl_t *d = os->decl;
  for (uint32_t i = 0; i < d->array.rank; i++) {
    if (d->block[i] == TSR_SQUEEZED) continue;
    if (d->element[i]) {
      ssa_t s = em_op2(em, "arith.subi", bi[i], em_cidx(em, d->pad_low[i]), "index");
      ssa_t hi = em_op2(em, "arith.minsi", em_iaddc(em, s, os->block[i]),
                        em_cidx(em, d->array.dims[i]), "index");
      ssa_t n = em_op2(em, "arith.subi", hi, window_lo(em, os, bi, i, NULL), "index");
      ext[k++] = em_dims(em_op2(em, "arith.maxsi", n, em_cidx(em, 0), "index"));
      continue;
    }
    if (d->array.dims[i] % os->block[i] == 0) {
      ext[k++] = em_dimc(os->block[i]);
      continue;
    }
    ssa_t start = em_imulc(em, bi[i], os->block[i]);
    ssa_t left = em_op2(em, "arith.subi", em_cidx(em, d->array.dims[i]), start, "index");
    ext[k++] = em_dims(em_op2(em, "arith.minsi", left, em_cidx(em, os->block[i]), "index"));
  }
}

/* The block buffer from where the array's part of the window starts in it:
 * itself but for an element dim's low padding. */
static view_t buffer_window(emitter_t *em, const operand_state_t *os, const ssa_t *bi) {
  const tsr_decl_t *d = os->decl;
  bool shifted = false;
  for (uint32_t i = 0; i < d->array.rank; i++) shifted |= d->element[i] && d->pad_low[i] > 0;
  if (!shifted) return os->buf;
  ssa_t off = os->buf.off;
  uint32_t k = 0;
  for (uint32_t i = 0; i < d->array.rank; i++) {
    if (d->block[i] == TSR_SQUEEZED) continue;
    if (d->element[i] && d->pad_low[i] > 0) {
      ssa_t at;
      window_lo(em, os, bi, i, &at);
      off = em_iadd(em, off, em_imulc(em, at, os->buf.strides[k]));
    }
    k++;
  }
  return em_view_make(em, os->buf.root, off, os->buf.rank, os->buf.dims, os->buf.strides, NULL);
}

typedef struct copy_ctx {
  const view_t *dst, *src;
  tsr_dtype_t dtype;
} copy_ctx_t;

static void copy_body(emitter_t *em, const nest_t *n, void *p) {
  copy_ctx_t *c = p;
  /* storage to storage: no conversion */
  char il[512] = "";
  size_t len = 0;
  for (uint32_t d = 0; d < n->rank; d++) {
    snprintf(il + len, sizeof il - len, "%s%s", d ? ", " : "", n->idx[d].s);
    len += strlen(il + len);
  }
  tstr_t st = em_view_type(em, c->src), dt = em_view_type(em, c->dst);
  const char *el = em_storage(c->dtype);
  ssa_t v = em_fresh(em);
  if (!n->lanes) {
    em_line(em, "%s = memref.load %s[%s] : %s", v.s, c->src->name.s, il, st.s);
    em_line(em, "memref.store %s, %s[%s] : %s", v.s, c->dst->name.s, il, dt.s);
    return;
  }
  tstr_t vt = em_vtype(el, n->lanes);
  if (n->masked) {
    ssa_t z = strcmp(el, "f32") == 0 ? em_cf32(em, n->lanes, 0.0f) : em_cint(em, el, n->lanes, 0);
    em_line(em, "%s = vector.maskedload %s[%s], %s, %s : %s, vector<%uxi1>, %s into %s", v.s,
            c->src->name.s, il, n->mask.s, z.s, st.s, n->lanes, vt.s, vt.s);
    em_masked_store(em, c->dst, el, n->idx, n->lanes, v, n->mask, n->tail);
  } else {
    em_line(em, "%s = vector.load %s[%s] : %s, %s", v.s, c->src->name.s, il, st.s, vt.s);
    em_line(em, "vector.store %s, %s[%s] : %s, %s", v.s, c->dst->name.s, il, dt.s, vt.s);
  }
}

/* Copies ext (per dim, possibly dynamic) elements from src to dst. */
static void copy_views(emitter_t *em, const view_t *dst, const view_t *src, tsr_dtype_t dtype,
                       const dimv_t *ext) {
  copy_ctx_t c = {.dst = dst, .src = src, .dtype = dtype};
  uint32_t rank = dst->rank, lanes = 0;
  bool unit = rank > 0 && dst->strides[rank - 1] == 1 && src->strides[rank - 1] == 1;
  if (unit) lanes = em_pick_lanes(dst->dims[rank - 1]);
  em_nest(em, rank, ext, lanes, copy_body, &c);
}

/* The HBM window of operand os at block indices bi, as a view. */
static view_t window_view(emitter_t *em, const operand_state_t *os, const ssa_t *bi,
                          const char *key) {
  return em_view_make(em, os->root, window_offset(em, os, bi), os->ref_rank, os->ref_dims,
                      os->ref_strides, key);
}

static void step_begin(emitter_t *em, kernel_state_t *ks, operand_state_t *os) {
  const tsr_decl_t *d = os->decl;
  vinfo_t *vi = em_vi(em, d->ref);
  ssa_t outside;
  memset(&outside, 0, sizeof outside);
  eval_map(em, os, em->grid_i32, os->bi, true, &outside);
  if (os->inplace) {
    vi->kind = VK_REF;
    vi->mem = window_view(em, os, os->bi, em_key(em, "R%u", d->ref->id));
    vi->mutable_ref = em->stored[d->ref->id];
  }
  if (!os->tracked) return;
  uint32_t rank = d->array.rank;
  ssa_t changed = ks->first;
  for (uint32_t i = 0; i < rank; i++) {
    ssa_t prev = em_fresh(em);
    em_line(em, "%s = memref.load %s[%s] : memref<%uxindex>", prev.s, ks->state.s,
            em_cidx(em, os->state + i).s, ks->state_slots);
    ssa_t ne = em_cmp(em, "cmpi", "ne", prev, os->bi[i], "index");
    changed = em_op2(em, "arith.ori", changed, ne, "i1");
  }
  /* an out-of-range block is filled at every step, and the next in-range
   * one copied (its clamped indices may equal the kept ones) */
  if (os->read_uninit) changed = em_op2(em, "arith.ori", changed, outside, "i1");
  em_open(em, "scf.if %s {", changed.s);
  /* An input's block, a revisit-any output's (docs/semantics.md), and under
   * TSR_LOWER_OUT_COPY_IN an output block read before it is wholly stored:
   * the array's window as it is now (in place: it is that window); else an
   * output block holds the uninitialized value. */
  bool copy_in = d->role == TSR_ROLE_IN || (em->out_copy_in && os->fill_out && !os->inplace) ||
                 (os->revisit_any && !os->inplace);
  if (d->role == TSR_ROLE_IN && os->read_uninit) {
    /* out of range: the block reads as the uninitialized value */
    em_open(em, "scf.if %s {", outside.s);
    em_fill_view(em, &os->buf, (tsr_dtype_t)d->array.dtype);
    em_close(em, "} else {");
    em->indent++;
  }
  if (copy_in) {
    dimv_t ext[TSR_MAX_RANK];
    window_extent(em, os, os->bi, ext);
    if (os->maybe_padded) {
      ssa_t pad = em_cbool(em, 0, false);
      for (uint32_t k = 0; k < os->ref_rank; k++) {
        if (!ext[k].dynamic) continue;
        ssa_t lt = em_cmp(em, "cmpi", "slt", ext[k].s, em_cidx(em, os->ref_dims[k]), "index");
        pad = em_op2(em, "arith.ori", pad, lt, "i1");
      }
      em_open(em, "scf.if %s {", pad.s);
      bool element = false;
      for (uint32_t i = 0; i < rank; i++) element |= d->element[i];
      if ((element && d->role == TSR_ROLE_IN) || em->out_copy_in) /* JAX's padding value */
        em_fill_view_element_pad(em, &os->buf, (tsr_dtype_t)d->array.dtype);
      else
        em_fill_view(em, &os->buf, (tsr_dtype_t)d->array.dtype);
      em_close(em, "}");
    }
    view_t src = window_view(em, os, os->bi, NULL);
    view_t into = buffer_window(em, os, os->bi);
    copy_views(em, &into, &src, (tsr_dtype_t)d->array.dtype, ext);
  }
  if (d->role == TSR_ROLE_IN && os->read_uninit) em_close(em, "}");
  if (os->fill_out && !em->out_copy_in) em_fill_view(em, &vi->mem, (tsr_dtype_t)d->array.dtype);
  if (d->role == TSR_ROLE_OUT && d->alias < 0) {
    /* The revisit check (aliased outputs are exempt, as in Pallas): the
     * runtime keeps the blocks each output has started (for a revisit-any
     * output, only to find blocks two cores write). */
    uint32_t operand = 0;
    for (const tsr_decl_t *e = em->k->decls; e < d; e++) operand += e->role != TSR_ROLE_SCRATCH;
    ssa_t lb = em_cidx(em, 0);
    for (uint32_t i = 0; i < rank; i++) {
      int64_t b = d->block[i] == TSR_SQUEEZED ? 1 : d->block[i];
      int64_t n = b > 0 ? (d->array.dims[i] + b - 1) / b : 1;
      lb = em_iadd(em, em_imulc(em, lb, n > 0 ? n : 1), os->bi[i]);
    }
    em_visit_block(em, operand, lb, ks->la);
  }
  for (uint32_t i = 0; i < rank; i++) {
    ssa_t kept = os->bi[i];
    if (os->read_uninit) { /* no block index: the next step copies */
      kept = em_fresh(em);
      em_line(em, "%s = arith.select %s, %s, %s : index", kept.s, outside.s, em_cidx(em, -1).s,
              os->bi[i].s);
    }
    em_line(em, "memref.store %s, %s[%s] : memref<%uxindex>", kept.s, ks->state.s,
            em_cidx(em, os->state + i).s, ks->state_slots);
  }
  em_close(em, "}");
}

/* a x d, folded when d is a constant. */
static ssa_t em_imul_dim(emitter_t *em, ssa_t a, dimv_t d) {
  return d.dynamic ? em_imul(em, a, d.s) : em_imulc(em, a, d.c);
}

/* a x b, folded when both are constants. */
static dimv_t dim_mul(emitter_t *em, dimv_t a, dimv_t b) {
  if (!a.dynamic && !b.dynamic) return em_dimc(a.c * b.c);
  if (!a.dynamic && a.c == 1) return b;
  if (!b.dynamic && b.c == 1) return a;
  return em_dims(em_imul(em, em_dimv_ssa(em, a), em_dimv_ssa(em, b)));
}

/* The product of the grid's extents [first, end). */
static dimv_t grid_product(emitter_t *em, uint32_t first, uint32_t end) {
  dimv_t p = em_dimc(1);
  for (uint32_t g = first; g < end; g++) p = dim_mul(em, p, em->grid_ext[g]);
  return p;
}

/* `d` as a divisor: a run-time extent may be 0 (then no step runs, but a
 * loop's test may still compute a grid point): at least 1. */
static ssa_t divisor(emitter_t *em, dimv_t d) {
  if (!d.dynamic) return em_cidx(em, d.c);
  return em_op2(em, "arith.maxui", d.s, em_cidx(em, 1), "index");
}

/* Whether `d` may be more than 1 (a run-time extent may). */
static bool above_one(dimv_t d) { return d.dynamic || d.c > 1; }

static ssa_t core_grid_point(emitter_t *em, const tsr_ir_core_split_t *split, ssa_t c,
                             ssa_t mine, ssa_t *iv);
static uint32_t leading_parallel(const tsr_kernel_t *k);

static void step_end(emitter_t *em, kernel_state_t *ks, operand_state_t *os) {
  const tsr_decl_t *d = os->decl;
  const tsr_kernel_t *k = em->k;
  uint32_t rank = d->array.rank;
  /* The next step's grid point (wrapping after the last: unused then). */
  ssa_t next[TSR_MAX_RANK];
  if (leading_parallel(k)) {
    /* Permuted: this core's next step, through the run's order (the last
     * step's own point after the last: unused then). */
    ssa_t c1 = em_fresh(em);
    em_line(em, "%s = arith.select %s, %s, %s : index", c1.s, ks->last.s, ks->la.s,
            em_iaddc(em, ks->la, 1).s);
    ssa_t iv[TSR_MAX_RANK];
    core_grid_point(em, &ks->split, c1, ks->mine, iv);
    for (uint32_t g = 0; g < k->grid_rank; g++)
      next[g] = em_cast(em, "arith.index_cast", iv[g], "index", "i32");
  } else {
    dimv_t total = grid_product(em, 0, k->grid_rank);
    ssa_t lin1 = em_iaddc(em, ks->lin, 1);
    lin1 = em_op2(em, "arith.remui", lin1, divisor(em, total), "index");
    dimv_t stride = em_dimc(1);
    for (uint32_t g = k->grid_rank; g-- > 0;) {
      ssa_t q = em_op2(em, "arith.divui", lin1, divisor(em, stride), "index");
      q = em_op2(em, "arith.remui", q, divisor(em, em->grid_ext[g]), "index");
      next[g] = em_cast(em, "arith.index_cast", q, "index", "i32");
      stride = dim_mul(em, stride, em->grid_ext[g]);
    }
  }
  ssa_t nbi[TSR_MAX_RANK];
  eval_map(em, os, next, nbi, false, NULL);
  ssa_t leave = ks->last;
  for (uint32_t i = 0; i < rank; i++) {
    ssa_t ne = em_cmp(em, "cmpi", "ne", nbi[i], os->bi[i], "index");
    leave = em_op2(em, "arith.ori", leave, ne, "i1");
  }
  em_open(em, "scf.if %s {", leave.s);
  dimv_t ext[TSR_MAX_RANK];
  window_extent(em, os, os->bi, ext);
  view_t dst = window_view(em, os, os->bi, NULL);
  view_t from = buffer_window(em, os, os->bi);
  copy_views(em, &dst, &from, (tsr_dtype_t)d->array.dtype, ext);
  em_close(em, "}");
}

/* Writes into iv[first..end) the row-major coordinates of `v` over the grid
 * dims [first, end). */
static void grid_coords(emitter_t *em, ssa_t v, uint32_t first, uint32_t end, ssa_t *iv) {
  dimv_t stride = em_dimc(1);
  for (uint32_t g = end; g-- > first;) {
    ssa_t q = !stride.dynamic && stride.c == 1
                  ? v
                  : em_op2(em, "arith.divui", v, divisor(em, stride), "index");
    iv[g] = g > first ? em_op2(em, "arith.remui", q, divisor(em, em->grid_ext[g]), "index") : q;
    stride = dim_mul(em, stride, em->grid_ext[g]);
  }
}

/* The leading `parallel` grid dims: those the run's order permutes
 * (TSR_RT_CTX_ORDER; tsr_interp_parallel_order). */
static uint32_t leading_parallel(const tsr_kernel_t *k) {
  uint32_t n = 0;
  while (n < k->grid_rank && k->semantics[n] == TSR_DIM_PARALLEL) n++;
  return n;
}

/* iv[0..leading_parallel) through the run's order table: the point the
 * step along each dim runs (one i64 load per dim, the dims' entries laid
 * out in turn). */
static void permute_point(emitter_t *em, ssa_t *iv) {
  uint32_t npar = leading_parallel(em->k);
  ssa_t off = em_cidx(em, 0);
  for (uint32_t g = 0; g < npar; g++) {
    ssa_t at = em_i64_of_index(em, em_iadd(em, off, iv[g]));
    ssa_t p = em_fresh(em), v = em_fresh(em);
    em_line(em, "%s = llvm.getelementptr %s[%s] : (!llvm.ptr, i64) -> !llvm.ptr, i64", p.s,
            em->order_p.s, at.s);
    em_line(em, "%s = llvm.load %s : !llvm.ptr -> i64", v.s, p.s);
    iv[g] = em_cast(em, "arith.index_cast", v, "i64", "index");
    off = em_iadd(em, off, em_dimv_ssa(em, em->grid_ext[g]));
  }
}

/* The grid point of this core's step number `c` (index), as its row-major
 * number over the whole grid; with `iv`, also its coordinates. A core's step
 * c is (o, p, i): o over the dims before the split, p in [plo, phi) over the
 * split dims, i over the dims after them; `mine` is (phi - plo) x inner.
 * The leading parallel dims' coordinates then go through the run's order. */
static ssa_t core_grid_point(emitter_t *em, const tsr_ir_core_split_t *split, ssa_t c,
                             ssa_t mine, ssa_t *iv) {
  const tsr_kernel_t *k = em->k;
  dimv_t outer = grid_product(em, 0, split->first);
  dimv_t inner = grid_product(em, split->end, k->grid_rank);
  /* a core without points runs no step, but the loop's test still asks */
  ssa_t d = above_one(outer) ? em_op2(em, "arith.maxui", mine, em_cidx(em, 1), "index") : mine;
  ssa_t o = above_one(outer) ? em_op2(em, "arith.divui", c, d, "index") : em_cidx(em, 0);
  ssa_t r = above_one(outer) ? em_op2(em, "arith.remui", c, d, "index") : c;
  ssa_t q = above_one(inner) ? em_op2(em, "arith.divui", r, divisor(em, inner), "index") : r;
  ssa_t p = em_op2(em, "arith.addi", (ssa_t){"%plo"}, q, "index");
  ssa_t i = above_one(inner) ? em_op2(em, "arith.remui", r, divisor(em, inner), "index")
                             : em_cidx(em, 0);
  if (leading_parallel(k)) {
    ssa_t local[TSR_MAX_RANK];
    ssa_t *v = iv ? iv : local;
    grid_coords(em, o, 0, split->first, v);
    grid_coords(em, p, split->first, split->end, v);
    grid_coords(em, i, split->end, k->grid_rank, v);
    /* a core without steps still computes a point for the loop's test:
     * keep the table's index inside it (the last entry of each dim) */
    for (uint32_t g = 0; g < leading_parallel(k); g++) {
      ssa_t top = em_op2(em, "arith.maxui", em_dimv_ssa(em, em->grid_ext[g]), em_cidx(em, 1),
                         "index");
      v[g] = em_op2(em, "arith.minui", v[g], em_iaddc(em, top, -1), "index");
    }
    permute_point(em, v);
    ssa_t lin = em_cidx(em, 0);
    for (uint32_t g = 0; g < k->grid_rank; g++)
      lin = em_iadd(em, em_imul_dim(em, lin, em->grid_ext[g]), v[g]);
    return lin;
  }
  if (iv) {
    grid_coords(em, o, 0, split->first, iv);
    grid_coords(em, p, split->first, split->end, iv);
    grid_coords(em, i, split->end, k->grid_rank, iv);
  }
  /* split->points is the product of the split dims (run-time ones too) */
  dimv_t points = grid_product(em, split->first, split->end);
  ssa_t op = em_iadd(em, em_imul_dim(em, o, points), p);
  return em_iadd(em, em_imul_dim(em, op, inner), i);
}

void em_emit_grid(emitter_t *em, const uint32_t *roots) {
  const tsr_kernel_t *k = em->k;
  kernel_state_t ks;
  memset(&ks, 0, sizeof ks);
  ks.ops = em_alloc(em, (k->num_decls + 1) * sizeof *ks.ops);
  if (!ks.ops) return;
  for (uint32_t i = 0; i < k->num_decls; i++) {
    ks.ops[i].decl = &k->decls[i];
    ks.ops[i].root = roots[i];
  }

  /* Aliases: the output starts as a copy of the input (the runtime copies
   * it before any core starts, as the interpreter does) and is the input's
   * HBM array from then on. */
  for (uint32_t i = 0; i < k->num_decls; i++) {
    const tsr_decl_t *d = &k->decls[i];
    if (d->role == TSR_ROLE_OUT && d->alias >= 0) ks.ops[d->alias].root = ks.ops[i].root;
  }

  /* Refs that are not windows: prefetch (SMEM copy when written), hbm/any
   * arrays, scratch. Windows: in place or through a block buffer. */
  for (uint32_t i = 0; i < k->num_decls && EM_OK(em); i++) {
    const tsr_decl_t *d = &k->decls[i];
    operand_state_t *os = &ks.ops[i];
    vinfo_t *vi = em_vi(em, d->ref);
    const tsr_type_t *rt = &d->ref->type;
    if (rt->kind == TSR_TYPE_SEM) { /* the runtime's */
      em_sem_ref_init(em, d->ref);
      continue;
    }
    vi->kind = VK_REF;
    vi->mutable_ref = em->stored[d->ref->id];
    const char *key = em_key(em, "R%u", d->ref->id);
    if (d->role == TSR_ROLE_SCRATCH) { /* starts holding the uninitialized value */
      vi->mem = em_buffer(em, (tsr_dtype_t)rt->dtype, rt->rank, rt->dims);
      vi->mem.key = key;
      em_fill_view(em, &vi->mem, (tsr_dtype_t)rt->dtype);
      continue;
    }
    bool windowed = d->role != TSR_ROLE_PREFETCH &&
                    (rt->space == TSR_SPACE_VMEM || rt->space == TSR_SPACE_SMEM);
    if (!windowed) {
      int64_t strides[TSR_MAX_RANK];
      em_dense_strides(d->array.rank, d->array.dims, strides);
      view_t whole = em_view_make(em, os->root, em_root_base(em, os->root), d->array.rank,
                                  d->array.dims, strides, key);
      if (d->role == TSR_ROLE_PREFETCH && vi->mutable_ref) {
        vi->mem = em_buffer(em, (tsr_dtype_t)d->array.dtype, d->array.rank, d->array.dims);
        dimv_t ext[TSR_MAX_RANK];
        for (uint32_t a = 0; a < d->array.rank; a++) ext[a] = em_dimc(d->array.dims[a]);
        copy_views(em, &vi->mem, &whole, (tsr_dtype_t)d->array.dtype, ext);
        vi->mem.key = key;
      } else {
        vi->mem = whole;
      }
      continue;
    }
    os->blocked = true;
    em_dense_strides(d->array.rank, d->array.dims, os->astrides);
    os->ref_rank = 0;
    for (uint32_t a = 0; a < d->array.rank; a++) {
      bool sq = d->block[a] == TSR_SQUEEZED;
      os->block[a] = sq ? 1 : d->block[a];
      os->nblocks[a] = (d->array.dims[a] + os->block[a] - 1) / os->block[a];
      if (d->array.dims[a] % os->block[a] != 0) os->maybe_padded = true;
      if (d->element[a]) {
        /* an element offset into the padded array; its window may reach
         * into the padding (or past the array's end) */
        os->nblocks[a] = d->pad_low[a] + d->array.dims[a] + d->pad_high[a];
        os->maybe_padded = true;
      }
      if (sq) continue;
      os->ref_dims[os->ref_rank] = os->block[a];
      os->ref_strides[os->ref_rank] = os->astrides[a];
      os->ref_rank++;
    }
    bool aliased = d->alias >= 0;
    for (uint32_t j = 0; j < k->num_decls; j++)
      if (k->decls[j].role == TSR_ROLE_OUT && k->decls[j].alias == (int32_t)i) aliased = true;
    /* an input whose block may be out of range reads the uninitialized
     * value there under oob_reads_uninit: a block buffer of its own */
    os->read_uninit = d->role == TSR_ROLE_IN && (em->bounds & TSR_LOWER_OOB_READS_UNINIT) &&
                      d->index_map;
    os->inplace = !os->maybe_padded && !aliased && !os->read_uninit &&
                  !(d->role == TSR_ROLE_IN && vi->mutable_ref);
    os->revisit_any = d->role == TSR_ROLE_OUT && d->revisit == TSR_REVISIT_ANY;
    /* a revisit-any block holds the array's window, never a fill */
    os->fill_out = d->role == TSR_ROLE_OUT && !os->revisit_any &&
                   !em_first_touch_stores_all(&k->body, d->ref);
    os->tracked = !os->inplace || os->fill_out || os->revisit_any;
    if (!os->inplace) {
      os->buf = em_buffer(em, (tsr_dtype_t)d->array.dtype, os->ref_rank, os->ref_dims);
      os->buf.key = key;
      vi->mem = os->buf;
    }
    if (os->tracked) {
      os->state = ks.state_slots;
      ks.state_slots += d->array.rank;
    }
  }
  /* The grid's extents, a dynamic one read from its prefetch operand before
   * any step (the runtime has checked it is >= 0). */
  for (uint32_t g = 0; g < k->grid_rank && EM_OK(em); g++) {
    em->grid_ext[g] = em_dimc(k->grid[g]);
    if (!k->grid_bound[g]) continue;
    const tsr_decl_t *d = &k->decls[k->grid_bound[g] - 1];
    nest_t scalar;
    memset(&scalar, 0, sizeof scalar);
    ssa_t v = em_mem_read(em, &em_vi(em, d->ref)->mem, TSR_DTYPE_I32, NULL, &scalar, NULL, NULL);
    em->grid_ext[g] = em_dims(em_idx_of_i32(em, v));
  }
  if (ks.state_slots) {
    ks.state = em_fresh(em);
    tsr_strbuf_printf(&em->pro, "    %s = memref.alloca() : memref<%uxindex>\n", ks.state.s,
                      ks.state_slots);
  }

  /* The grid: row-major, the last axis fastest. This core runs the split
   * points [plo, phi) (tsr_ir_core_split: the grid dims [first, end)
   * flattened), each with every point of the other dims, as one loop over
   * its own step number c in [0, outer x (phi - plo) x inner); each grid
   * step is a step of the run (em_count_step). */
  /* Which dims are split does not depend on their extents (a dynamic
   * extent counts as more than 1 here); the runtime computes the cores'
   * shares [plo, phi) from the run's extents. */
  int64_t shape[TSR_MAX_RANK];
  for (uint32_t g = 0; g < k->grid_rank; g++) shape[g] = k->grid_bound[g] ? 2 : k->grid[g];
  const tsr_ir_core_split_t split = tsr_ir_core_split(k->grid_rank, shape, k->semantics);
  dimv_t outer = grid_product(em, 0, split.first);
  dimv_t inner = grid_product(em, split.end, k->grid_rank);
  const ssa_t plo = {"%plo"};
  ssa_t mine =
      em_imul_dim(em, em_op2(em, "arith.subi", (ssa_t){"%phi"}, plo, "index"), inner);
  ssa_t steps = em_imul_dim(em, mine, outer);
  ssa_t lb = em_fresh(em), la = em_fresh(em);
  em_open(em, "scf.while (%s = %s) : (index) -> (index) {", lb.s, em_cidx(em, 0).s);
  ssa_t in = em_cmp(em, "cmpi", "slt", lb, steps, "index");
  ssa_t go = em_op2(em, "arith.andi", in,
                    em_count_step(em, in, em->num_sites,
                                  em_i64_of_index(em, core_grid_point(em, &split, lb, mine, NULL))),
                    "i1");
  em_line(em, "scf.condition(%s) %s : index", go.s, lb.s);
  em->indent--;
  em_open(em, "} do {");
  em_line(em, "^bb0(%s: index):", la.s);
  ks.la = la;
  ks.mine = mine;
  ks.split = split;
  ks.lin = core_grid_point(em, &split, la, mine, em->grid_iv);
  for (uint32_t g = 0; g < k->grid_rank; g++)
    em->grid_i32[g] = em_cast(em, "arith.index_cast", em->grid_iv[g], "index", "i32");
  em->lin = ks.lin;
  /* The runtime's context starts with this core's grid point (its messages
   * name it). */
  em_line(em, "llvm.store %s, %s : i64, !llvm.ptr", em_i64_of_index(em, ks.lin).s, em->rt_ctx.s);
  /* This core's first and last steps. */
  ks.first = em_cmp(em, "cmpi", "eq", la, em_cidx(em, 0), "index");
  ks.last = em_cmp(em, "cmpi", "eq", la, em_iaddc(em, steps, -1), "index");

  em_line(em, "// the grid step: block indices and copies in");
  for (uint32_t i = 0; i < k->num_decls && EM_OK(em); i++)
    if (ks.ops[i].blocked) step_begin(em, &ks, &ks.ops[i]);
  /* Cores that DMA into other devices meet once every core's memory is
   * registered and holds its first step's blocks: a DMA that lands early is
   * not overwritten by its destination's start (a core without steps meets
   * after the loop). */
  if (em->remote_dmas) em_meet_at_start(em, ks.first);
  em->region = &k->body;
  em->emit_region(em, &k->body); /* the driver's dispatch (emit_internal.h) */
  em_line(em, "// the grid step: copies out");
  for (uint32_t i = 0; i < k->num_decls && EM_OK(em); i++)
    if (ks.ops[i].blocked && !ks.ops[i].inplace && ks.ops[i].decl->role == TSR_ROLE_OUT)
      step_end(em, &ks, &ks.ops[i]);
  em_line(em, "scf.yield %s : index", em_iaddc(em, la, 1).s);
  em_close(em, "}");
  if (em->remote_dmas) {
    em_meet_at_start(em, em_cmp(em, "cmpi", "eq", steps, em_cidx(em, 0), "index"));
    em_register_memory(em);
  }
}
