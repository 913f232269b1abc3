/* Frame slots of a prepared program: where each value's buffer sits in the
 * per-run frame. Split from prepare.c, which calls it once per program
 * after compiling the body: it needs only the kernel, its values by id and
 * which ops alias their operand, not the instruction tables. */
#include "interp/interp_internal.h"

/* ---- Frame slots: values share buffers when their lives do not overlap ------
 * A value's buffer in the frame is reused once the value's last use has run,
 * so a straight-line kernel's frame holds its live values only, not one
 * buffer per value (the 6,484-op small-block kernel of docs/benchmarks.md:
 * 22.5 MiB of frame, written once each, a page fault per 4 KiB). Lives are
 * intervals over a pre-order numbering of the body's ops: an op with
 * regions has a start (where its operands are read and its results and
 * region arguments are defined) and an end (after its regions, where its
 * results are written by the moves that leave them). The intervals are
 * closed, so a result never shares a buffer with an operand of its own op.
 * What extends a life:
 *  - a use inside a loop (for, while) of a value defined outside it: the
 *    value lives to the end of the outermost such loop (every iteration
 *    reads it);
 *  - a loop's operands (its bounds and step are read at every iteration),
 *    the arguments of a loop's regions and the results of any op with
 *    regions: they live to the op's end at least (the moves that leave a
 *    loop use its results as temporaries);
 *  - an alias (reshape, bitcast: XOP_ALIAS reads another value's buffer):
 *    its root value, whose buffer it reads, lives as long as the alias.
 * Consts (filled once per run), index-map values (evaluated between the
 * body's runs) and anything else outside the body keep buffers of their
 * own. The other ways a value can point at memory that is not its own
 * buffer do not involve the frame: a load borrowing a ref's memory and a
 * result forwarded into a store's target point into VMEM, and moves copy
 * into their destinations' own buffers. */

typedef struct loop_frame {
  uint32_t start, end;
  const struct loop_frame *outer;
} loop_frame_t;

typedef struct liveness {
  uint32_t *def;       /* value id -> position of its definition; 0: not in the body */
  uint32_t *last;      /* value id -> position of its last use (>= def) */
  uint32_t *root;      /* value id -> the value whose buffer it reads */
  uint32_t *loop_end;  /* k-th loop in walk order -> its end position */
  uint32_t clock, loops;
  bool uses;           /* second pass: record definitions and uses */
  const bool *alias_ops; /* opcode -> its result is its first operand's buffer */
} liveness_t;


static void live_define(liveness_t *lv, const tsr_value_t *v, uint32_t pos) {
  lv->def[v->id] = pos;
  lv->last[v->id] = pos;
}

static void live_use(liveness_t *lv, const tsr_value_t *v, uint32_t pos,
                     const loop_frame_t *loops) {
  uint32_t d = lv->def[v->id];
  if (!d) return; /* a buffer of its own */
  for (const loop_frame_t *f = loops; f && f->start > d; f = f->outer) pos = f->end;
  if (pos > lv->last[v->id]) lv->last[v->id] = pos;
}

/* Two passes over the same numbering: the first finds where each loop ends,
 * the second records definitions and uses with the enclosing loops known. */
static void live_walk(liveness_t *lv, const tsr_region_t *r, const loop_frame_t *loops) {
  for (const tsr_op_t *op = r->first; op; op = op->next) {
    uint32_t pos = ++lv->clock;
    bool loop = op->opcode == TSR_OP_FOR || op->opcode == TSR_OP_WHILE;
    uint32_t loop_index = loop ? lv->loops++ : 0;
    if (lv->uses) {
      if (!loop)
        for (uint32_t i = 0; i < op->num_operands; i++)
          live_use(lv, op->operands[i], pos, loops);
      if (op->opcode != TSR_OP_CONST) {
        for (uint32_t i = 0; i < op->num_results; i++) {
          live_define(lv, op->results[i], pos);
          if (lv->alias_ops[op->opcode]) lv->root[op->results[i]->id] = lv->root[op->operands[0]->id];
        }
        for (uint32_t i = 0; i < op->num_regions; i++)
          for (uint32_t a = 0; a < op->regions[i].num_args; a++)
            live_define(lv, op->regions[i].args[a], pos);
      }
    }
    if (!op->num_regions) continue;
    loop_frame_t frame = {pos, lv->uses ? lv->loop_end[loop_index] : 0, loops};
    for (uint32_t i = 0; i < op->num_regions; i++)
      live_walk(lv, &op->regions[i], loop ? &frame : loops);
    uint32_t end = ++lv->clock;
    if (!lv->uses) {
      if (loop) lv->loop_end[loop_index] = end;
      continue;
    }
    if (loop)
      for (uint32_t i = 0; i < op->num_operands; i++) live_use(lv, op->operands[i], end, loops);
    for (uint32_t i = 0; i < op->num_results; i++) live_use(lv, op->results[i], end, loops);
    for (uint32_t i = 0; i < op->num_regions; i++)
      for (uint32_t a = 0; a < op->regions[i].num_args; a++)
        live_use(lv, op->regions[i].args[a], end, loops);
  }
}

static uint32_t count_loops(const tsr_region_t *r) {
  uint32_t n = 0;
  for (const tsr_op_t *op = r->first; op; op = op->next) {
    if (op->opcode == TSR_OP_FOR || op->opcode == TSR_OP_WHILE) n++;
    for (uint32_t i = 0; i < op->num_regions; i++) n += count_loops(&op->regions[i]);
  }
  return n;
}

/* The bytes a value's buffer takes in the frame (0: it has none). */
static uint64_t slot_bytes(const tsr_value_t *v) {
  if (!v || v->type.kind == TSR_TYPE_REF || v->type.kind == TSR_TYPE_SEM) return 0;
  uint64_t bytes = (uint64_t)tsr_type_element_count(&v->type) *
                   tsr_dtype_size((tsr_dtype_t)v->type.dtype);
  bytes = bytes < 8 ? 8 : bytes;
  return (bytes + 63) & ~(uint64_t)63;
}

/* Size classes: an open-addressed table from a buffer size to its class
 * (a qsort of the sizes cost as much as the rest of preparing). */
typedef struct size_classes {
  uint64_t *key;    /* size, 0 = empty */
  uint32_t *index;  /* its class */
  uint32_t mask, count;
} size_classes_t;

static uint32_t size_class_of(size_classes_t *sc, uint64_t bytes) {
  uint32_t h = (uint32_t)((bytes >> 6) * 0x9e3779b1u) & sc->mask;
  while (sc->key[h] && sc->key[h] != bytes) h = (h + 1) & sc->mask;
  if (!sc->key[h]) {
    sc->key[h] = bytes;
    sc->index[h] = sc->count++;
  }
  return sc->index[h];
}

tsr_status_t tsr_interp_assign_frame_slots(tsr_interp_program_t *p, const tsr_kernel_t *k,
                                           tsr_value_t *const *by_id, const bool *alias_ops) {
  uint32_t n = k->num_values;
  tsr_status_t s = NULL;
  liveness_t lv = {.alias_ops = alias_ops};
  uint32_t nloops = count_loops(&k->body);
  lv.def = tsr_calloc(n + 1, sizeof *lv.def);
  lv.last = tsr_calloc(n + 1, sizeof *lv.last);
  lv.root = tsr_calloc(n + 1, sizeof *lv.root);
  lv.loop_end = tsr_calloc(nloops + 1, sizeof *lv.loop_end);
  uint64_t *sizes = tsr_calloc(n + 1, sizeof *sizes);  /* class -> bytes */
  uint32_t *cls = tsr_calloc(n + 1, sizeof *cls);       /* value -> size class */
  uint32_t *count = tsr_calloc(n + 1, sizeof *count);   /* class -> values, then free */
  uint32_t *base = tsr_calloc(n + 1, sizeof *base);     /* class -> first stack entry */
  uint64_t *stack = tsr_calloc(n + 1, sizeof *stack);   /* free offsets, per class */
  size_classes_t sc = {0};
  uint32_t table = 16;
  while (table < 2 * n) table *= 2;
  sc.key = tsr_calloc(table, sizeof *sc.key);
  sc.index = tsr_calloc(table, sizeof *sc.index);
  sc.mask = table - 1;
  uint32_t *by_def = NULL, *by_last = NULL, *def_next = NULL, *last_next = NULL;
  if (!lv.def || !lv.last || !lv.root || !lv.loop_end || !sizes || !cls || !count ||
      !base || !stack || !sc.key || !sc.index) {
    s = TSR_OOM();
    goto done;
  }
  for (uint32_t i = 0; i < n; i++) lv.root[i] = i;
  live_walk(&lv, &k->body, NULL);
  uint32_t positions = lv.clock;
  lv.clock = 0;
  lv.loops = 0;
  lv.uses = true;
  live_walk(&lv, &k->body, NULL);
  for (uint32_t i = 0; i < n; i++) {
    uint32_t r = lv.root[i];
    if (r != i && lv.def[i] && lv.def[r] && lv.last[i] > lv.last[r]) lv.last[r] = lv.last[i];
  }

  /* Values, and the buffers of those outside the body (consts, index maps). */
  uint64_t off = 0;
  for (uint32_t i = 0; i < n; i++) {
    const tsr_value_t *v = by_id[i];
    uint64_t bytes = slot_bytes(v);
    if (!bytes) continue;
    value_info_t *vi = &p->values[i];
    vi->dtype = v->type.dtype;
    vi->vector = v->type.kind == TSR_TYPE_VECTOR;
    vi->bytes = (uint64_t)tsr_type_element_count(&v->type) *
                tsr_dtype_size((tsr_dtype_t)v->type.dtype);
    if (!lv.def[i]) {
      vi->offset = off;
      off += bytes;
    }
  }
  /* Size classes of the body's buffers. */
  for (uint32_t i = 0; i < n; i++) {
    if (!lv.def[i] || lv.root[i] != i || !slot_bytes(by_id[i])) continue;
    uint64_t bytes = slot_bytes(by_id[i]);
    cls[i] = size_class_of(&sc, bytes);
    sizes[cls[i]] = bytes;
    count[cls[i]]++;
  }
  uint32_t nclasses = sc.count;
  for (uint32_t c = 1; c < nclasses; c++) base[c] = base[c - 1] + count[c - 1];
  memset(count, 0, (size_t)(n + 1) * sizeof *count);

  /* Definitions and last uses by position (linked lists). */
  by_def = tsr_calloc(positions + 2, sizeof *by_def);
  by_last = tsr_calloc(positions + 2, sizeof *by_last);
  def_next = tsr_calloc(n + 1, sizeof *def_next);
  last_next = tsr_calloc(n + 1, sizeof *last_next);
  if (!by_def || !by_last || !def_next || !last_next) {
    s = TSR_OOM();
    goto done;
  }
  for (uint32_t i = n; i-- > 0;) { /* ids ascending within a position */
    if (!lv.def[i] || lv.root[i] != i || !slot_bytes(by_id[i])) continue;
    def_next[i] = by_def[lv.def[i]];
    by_def[lv.def[i]] = i + 1;
    last_next[i] = by_last[lv.last[i]];
    by_last[lv.last[i]] = i + 1;
  }
  for (uint32_t pos = 1; pos <= positions; pos++) {
    for (uint32_t e = by_def[pos]; e; e = def_next[e - 1]) {
      uint32_t c = cls[e - 1];
      value_info_t *vi = &p->values[e - 1];
      if (count[c]) {
        vi->offset = stack[base[c] + --count[c]];
      } else {
        vi->offset = off;
        off += sizes[c];
      }
    }
    for (uint32_t e = by_last[pos]; e; e = last_next[e - 1]) {
      uint32_t c = cls[e - 1];
      stack[base[c] + count[c]++] = p->values[e - 1].offset;
    }
  }
  /* Aliases point at their root's buffer (they never write one). */
  for (uint32_t i = 0; i < n; i++)
    if (lv.root[i] != i) p->values[i].offset = p->values[lv.root[i]].offset;
  p->frame_bytes = off;
done:
  tsr_free(lv.def);
  tsr_free(lv.last);
  tsr_free(lv.root);
  tsr_free(lv.loop_end);
  tsr_free(sizes);
  tsr_free(cls);
  tsr_free(count);
  tsr_free(base);
  tsr_free(stack);
  tsr_free(sc.key);
  tsr_free(sc.index);
  tsr_free(by_def);
  tsr_free(by_last);
  tsr_free(def_next);
  tsr_free(last_next);
  return s;
}