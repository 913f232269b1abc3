/* Race detection (--detect-races): happens-before with vector clocks, one
 * component per simulated core and one per DMA (docs/dma.md). Accesses are
 * recorded as strided hyper-rectangles (one arithmetic progression per
 * dimension) per memory object; a record that a later access orders after
 * and covers is pruned, so the lists hold only unordered accesses. Then the
 * hooks through which loads, stores, DMAs and block copies of a run tell it
 * what they access. */
#include <stdio.h>
#include <stdlib.h>

#include "base/hashtable.h"
#include "interp/interp_internal.h"

/* ---- Vector clocks ---- */

void tsr_vc_initialize(vclock_t *v, uint32_t n) {
  memset(v, 0, sizeof *v);
  v->n = n;
  v->c = tsr_calloc(n ? n : 1, sizeof *v->c);
}

void tsr_vc_free(vclock_t *v) {
  tsr_free(v->c);
  tsr_free(v->dma);
  memset(v, 0, sizeof *v);
}

static bool vc_has_dma(const vclock_t *v, uint32_t id) {
  uint32_t lo = 0, hi = v->ndma;
  while (lo < hi) {
    uint32_t mid = (lo + hi) / 2;
    if (v->dma[mid] == id) return true;
    if (v->dma[mid] < id) lo = mid + 1; else hi = mid;
  }
  return false;
}

void tsr_vc_add_dma(vclock_t *v, uint32_t id) {
  if (vc_has_dma(v, id)) return;
  if (v->ndma == v->cap) {
    uint32_t cap = v->cap ? v->cap * 2 : 8;
    uint32_t *d = tsr_realloc(v->dma, cap * sizeof *d);
    if (!d) return;
    v->dma = d;
    v->cap = cap;
  }
  uint32_t i = v->ndma;
  while (i > 0 && v->dma[i - 1] > id) {
    v->dma[i] = v->dma[i - 1];
    i--;
  }
  v->dma[i] = id;
  v->ndma++;
}

/* dst = dst joined with src: componentwise max, union of the sorted DMA
 * sets in one merge. On allocation failure dst keeps what it had (fewer
 * observed DMAs: can only report more, never hide a race). */
void tsr_vc_join(vclock_t *dst, const vclock_t *src) {
  if (!dst->c || !src->c) return;
  for (uint32_t i = 0; i < dst->n && i < src->n; i++)
    if (src->c[i] > dst->c[i]) dst->c[i] = src->c[i];
  uint32_t fresh = 0; /* the common case: src has nothing dst lacks */
  for (uint32_t k = 0; k < src->ndma && !fresh; k++) fresh = !vc_has_dma(dst, src->dma[k]);
  if (!fresh) return;
  uint32_t *merged = tsr_malloc(((size_t)dst->ndma + src->ndma) * sizeof *merged);
  if (!merged) return;
  uint32_t i = 0, j = 0, n = 0;
  while (i < dst->ndma || j < src->ndma) {
    uint32_t next;
    if (j == src->ndma || (i < dst->ndma && dst->dma[i] < src->dma[j]))
      next = dst->dma[i++];
    else if (i == dst->ndma || src->dma[j] < dst->dma[i])
      next = src->dma[j++];
    else
      next = dst->dma[i++], j++;
    merged[n++] = next;
  }
  tsr_free(dst->dma);
  dst->dma = merged;
  dst->ndma = n;
  dst->cap = dst->ndma;
}

void tsr_vc_copy(vclock_t *dst, const vclock_t *src) {
  tsr_vc_initialize(dst, src->n);
  if (dst->c && src->c) memcpy(dst->c, src->c, src->n * sizeof *dst->c);
  tsr_vc_join(dst, src);
}

/* ---- Access records ---- */

typedef struct access {
  uint32_t thread;   /* core (global index) or DMA id (DMA) */
  bool dma, write;
  uint32_t clock;    /* cores: their clock at the access */
  uint32_t site;
  uint32_t core, device;
  int64_t point[TSR_MAX_RANK];
  uint32_t rank;
  race_ap_t ap[TSR_MAX_RANK];
} access_t;

typedef struct object {
  uint64_t key;
  access_t *acc;
  uint32_t n, cap;
  UT_hash_handle hh;
} object_t;

typedef struct sem_clock {
  const int32_t *sem;
  vclock_t vc;
  UT_hash_handle hh;
} sem_clock_t;

struct race_state {
  object_t *objects;
  sem_clock_t *sems;
  uint64_t records;      /* access records held */
  uint64_t next_collect; /* collect when records reach this */
  uint32_t collect_dma;  /* ... or when DMA ids reach this (clocks' DMA sets) */
  uint64_t pairs[256]; /* reported (site, site) pairs */
  uint32_t num_pairs;
};

static int64_t gcd64(int64_t a, int64_t b) {
  while (b) {
    int64_t t = a % b;
    a = b;
    b = t;
  }
  return a < 0 ? -a : a;
}

/* Do two arithmetic progressions share an element? (exact) */
static bool ap_meet(race_ap_t a, race_ap_t b) {
  int64_t a_end = a.start + (a.count - 1) * a.stride;
  int64_t b_end = b.start + (b.count - 1) * b.stride;
  int64_t lo = TSR_MAX(a.start, b.start), hi = TSR_MIN(a_end, b_end);
  if (lo > hi) return false;
  /* smallest x >= lo with x = a.start (mod a.stride), x = b.start (mod b.stride) */
  int64_t g = gcd64(a.stride, b.stride);
  if ((b.start - a.start) % g != 0) return false;
  int64_t x = a.start + ((lo - a.start + a.stride - 1) / a.stride) * a.stride;
  int64_t l = a.stride / g * b.stride;
  for (int64_t y = x; y <= hi && y < x + l; y += a.stride)
    if (((y - b.start) % b.stride) == 0) return true;
  return false;
}

/* Is every element of a in b? */
static bool ap_within(race_ap_t a, race_ap_t b) {
  int64_t a_end = a.start + (a.count - 1) * a.stride;
  int64_t b_end = b.start + (b.count - 1) * b.stride;
  if (a.start < b.start || a_end > b_end) return false;
  if ((a.start - b.start) % b.stride != 0) return false;
  return a.count == 1 || a.stride % b.stride == 0;
}

static bool overlap(const access_t *x, const access_t *y) {
  for (uint32_t d = 0; d < x->rank && d < y->rank; d++)
    if (!ap_meet(x->ap[d], y->ap[d])) return false;
  return true;
}

static bool covers(const access_t *outer, const access_t *inner) {
  for (uint32_t d = 0; d < inner->rank && d < outer->rank; d++)
    if (!ap_within(inner->ap[d], outer->ap[d])) return false;
  return true;
}

static bool ordered_before(const access_t *r, const vclock_t *vc) {
  if (r->dma) return vc_has_dma(vc, r->thread);
  return r->thread < vc->n && vc->c[r->thread] >= r->clock;
}

static const char *kind_name(const access_t *a) {
  return a->dma ? (a->write ? "DMA write" : "DMA read") : (a->write ? "write" : "read");
}

static void describe(shared_t *sh, const access_t *a, char *buf, size_t size) {
  const tsr_interp_program_t *p = sh->p;
  char point[120];
  tsr_diag_format_point(point, sizeof point, a->point, p->grid_rank);
  int n = snprintf(buf, size, "%s by %s (line %u)", kind_name(a), p->sites[a->site].what,
                   p->sites[a->site].loc.line);
  if (n < 0 || (size_t)n >= size) return;
  if (sh->devices > 1)
    n += snprintf(buf + n, size - (size_t)n, " on device %u", a->device);
  if (n < 0 || (size_t)n >= size) return;
  if (sh->cores > 1) n += snprintf(buf + n, size - (size_t)n, " core %u", a->core);
  if (n < 0 || (size_t)n >= size) return;
  snprintf(buf + n, size - (size_t)n, " at grid point %s", point);
}

static void report(run_t *run, const access_t *a, const access_t *b, const char *what) {
  race_state_t *rs = run->sh->race;
  /* A fixed order (by site, then core) so that a report does not depend on
   * which access happened to be recorded first (DMA mode, schedule seed). */
  if (b->site < a->site || (b->site == a->site && b->core * 1000u + b->device <
                                                      a->core * 1000u + a->device)) {
    const access_t *t = a;
    a = b;
    b = t;
  }
  uint32_t s1 = TSR_MIN(a->site, b->site), s2 = TSR_MAX(a->site, b->site);
  uint64_t pair = (uint64_t)s1 << 32 | s2;
  for (uint32_t i = 0; i < rs->num_pairs; i++)
    if (rs->pairs[i] == pair) return;
  if (rs->num_pairs < TSR_ARRAY_SIZE(rs->pairs)) rs->pairs[rs->num_pairs++] = pair;
  /* the overlap of the two ranges, per dimension (bounding); the record
   * names the buffer ("%x" or "%x (HBM)"), the range and the second access */
  const tsr_interp_program_t *p = run->p;
  char buffer[96];
  const char *name = what + (what[0] == '%');
  snprintf(buffer, sizeof buffer, "%.*s", (int)strcspn(name, " "), name);
  tsr_diag_detail_t detail = {.buffer = buffer,
                              .index_rank = TSR_MIN(a->rank, TSR_MAX_RANK),
                              .other_what = p->sites[b->site].what,
                              .other_line = p->sites[b->site].loc.line,
                              .other_point = b->point,
                              .other_grid_rank = p->grid_rank};
  char range[200] = "[";
  size_t used = 1;
  for (uint32_t d = 0; d < a->rank && used < sizeof range; d++) {
    int64_t lo = TSR_MAX(a->ap[d].start, b->ap[d].start);
    int64_t hi = TSR_MIN(a->ap[d].start + (a->ap[d].count - 1) * a->ap[d].stride,
                         b->ap[d].start + (b->ap[d].count - 1) * b->ap[d].stride);
    detail.index_lo[d] = lo;
    detail.index_hi[d] = hi + 1;
    used += (size_t)snprintf(range + used, sizeof range - used, "%s%lld:%lld",
                             d ? ", " : "", (long long)lo, (long long)hi + 1);
  }
  if (used < sizeof range) snprintf(range + used, sizeof range - used, "]");
  char first[300], second[300];
  describe(run->sh, a, first, sizeof first);
  describe(run->sh, b, second, sizeof second);
  tsr_diag_reopen(&run->sh->diag, a->site, TSR_DIAG_ERROR); /* one report per pair */
  tsr_interp_kernel_report_detail(run, a->site, &detail, TSR_DIAG_RACE, TSR_DIAG_ERROR,
                                  "data race on %s%s: %s and %s, not ordered by any "
                                  "semaphore, DMA wait or barrier",
                                  what, range, first, second);
}

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return x < y ? -1 : x > y;
}

/* Keeps only the DMA ids in `live` (sorted) in a clock's set. */
static void vc_keep(vclock_t *v, const uint32_t *live, uint32_t nlive) {
  uint32_t keep = 0;
  for (uint32_t i = 0; i < v->ndma; i++)
    if (bsearch(&v->dma[i], live, nlive, sizeof *live, cmp_u32)) v->dma[keep++] = v->dma[i];
  v->ndma = keep;
}

/* Garbage collection that keeps memory flat as the grid grows: a record
 * ordered before every clock that can still access memory (every core, every
 * DMA in flight, and the access being recorded) can never race with anything
 * again and is dropped; then DMA ids that no record names are dropped from
 * every clock (nothing will ask about them). */
typedef struct id_list {
  uint32_t *ids;
  uint32_t n, cap;
  bool failed;
} id_list_t;

static void push_id(id_list_t *l, uint32_t id) {
  if (l->n == l->cap) {
    uint32_t cap = l->cap ? l->cap * 2 : 64;
    uint32_t *ids = tsr_realloc(l->ids, cap * sizeof *ids);
    if (!ids) {
      l->failed = true;
      return;
    }
    l->ids = ids;
    l->cap = cap;
  }
  l->ids[l->n++] = id;
}

static void collect(shared_t *sh, vclock_t *current, int64_t current_dma) {
  race_state_t *rs = sh->race;
  uint32_t ncores = sh->devices * sh->cores;
  uint64_t total = 0;
  id_list_t live = {0};
  object_t *o, *ot;
  HASH_ITER(hh, rs->objects, o, ot) {
    uint32_t keep = 0;
    for (uint32_t i = 0; i < o->n; i++) {
      const access_t *r = &o->acc[i];
      bool dead = ordered_before(r, current);
      for (uint32_t c = 0; dead && c < ncores; c++) dead = ordered_before(r, &sh->core[c].vc);
      for (uint32_t k = 0; dead && k < sh->num_dmas; k++)
        dead = ordered_before(r, &sh->dmas[k].vc);
      if (dead) continue;
      o->acc[keep++] = *r;
      if (r->dma) push_id(&live, r->thread);
    }
    o->n = keep;
    total += keep;
  }
  /* DMAs in flight (and the one recording now) may still record accesses
   * under their own ids. */
  for (uint32_t k = 0; k < sh->num_dmas; k++) push_id(&live, sh->dmas[k].id);
  if (current_dma >= 0) push_id(&live, (uint32_t)current_dma);
  if (!live.failed) {
    qsort(live.ids, live.n, sizeof *live.ids, cmp_u32);
    for (uint32_t c = 0; c < ncores; c++) vc_keep(&sh->core[c].vc, live.ids, live.n);
    for (uint32_t k = 0; k < sh->num_dmas; k++) vc_keep(&sh->dmas[k].vc, live.ids, live.n);
    vc_keep(current, live.ids, live.n);
    sem_clock_t *sc, *st;
    HASH_ITER(hh, rs->sems, sc, st) vc_keep(&sc->vc, live.ids, live.n);
  }
  tsr_free(live.ids);
  rs->records = total;
  rs->next_collect = TSR_MAX(4096, total * 2);
  rs->collect_dma = sh->next_dma_id + 32;
}

/* Records an access by `run` (or by DMA `dma_id` with clock `vc`) and reports
 * the unordered conflicting accesses already recorded. */
void tsr_race_access(run_t *run, vclock_t *vc, int64_t dma_id, uint32_t site,
                     uint64_t key, const char *what, bool write, uint32_t rank,
                     const race_ap_t *ap) {
  race_state_t *rs = run->sh->race;
  object_t *obj;
  HASH_FIND(hh, rs->objects, &key, sizeof key, obj);
  if (!obj) {
    obj = tsr_calloc(1, sizeof *obj);
    if (!obj) return;
    obj->key = key;
    HASH_ADD(hh, rs->objects, key, sizeof obj->key, obj);
  }
  uint32_t me = run->device * run->sh->cores + run->core;
  access_t a;
  memset(&a, 0, sizeof a);
  a.dma = dma_id >= 0;
  a.thread = a.dma ? (uint32_t)dma_id : me;
  a.clock = a.dma ? 0 : vc->c[me];
  a.write = write;
  a.site = site;
  a.core = run->core;
  a.device = run->device;
  memcpy(a.point, run->point, sizeof a.point);
  a.rank = rank;
  for (uint32_t d = 0; d < rank; d++) a.ap[d] = ap[d];
  uint32_t keep = 0, old_n = obj->n;
  for (uint32_t i = 0; i < obj->n; i++) {
    access_t *r = &obj->acc[i];
    bool same_thread = r->dma == a.dma && r->thread == a.thread;
    bool before = same_thread || ordered_before(r, vc);
    if (!before && (r->write || write) && overlap(r, &a)) report(run, r, &a, what);
    /* pruned: ordered before this access, covered by it, and no weaker */
    if (before && covers(&a, r) && (write || !r->write)) continue;
    obj->acc[keep++] = *r;
  }
  obj->n = keep;
  if (obj->n == obj->cap) {
    uint32_t cap = obj->cap ? obj->cap * 2 : 8;
    access_t *acc = tsr_realloc(obj->acc, cap * sizeof *acc);
    if (!acc) return;
    obj->acc = acc;
    obj->cap = cap;
  }
  obj->acc[obj->n++] = a;
  rs->records = rs->records + obj->n - old_n;
  if (rs->records >= rs->next_collect || run->sh->next_dma_id >= rs->collect_dma)
    collect(run->sh, vc, dma_id);
}

vclock_t *tsr_race_sem_clock(shared_t *sh, const int32_t *sem) {
  race_state_t *rs = sh->race;
  sem_clock_t *s;
  HASH_FIND(hh, rs->sems, &sem, sizeof sem, s);
  if (!s) {
    s = tsr_calloc(1, sizeof *s);
    if (!s) return NULL;
    s->sem = sem;
    tsr_vc_initialize(&s->vc, sh->devices * sh->cores);
    HASH_ADD(hh, rs->sems, sem, sizeof s->sem, s);
  }
  return &s->vc;
}

/* ---- The hooks the run calls ---- */

/* The memory object a ref of `core` names: its own buffer, or for hbm/any
 * operands the device's HBM array (aliased outputs share their input's). */
static uint64_t hbm_key(const run_t *run, uint32_t j) {
  const operand_plan_t *op = &run->p->operands[j];
  uint32_t k = op->alias >= 0 ? (uint32_t)op->alias : j;
  return (2ull << 60) | ((uint64_t)run->device << 32) | k;
}

uint64_t tsr_race_object_key(const run_t *core, uint32_t ref) {
  const ref_info_t *ri = &core->p->refs[ref];
  /* a device-wide scoped buffer: the instance all the device's cores share */
  if (ri->device_wide && core->wide_cur[ri->wide])
    return (3ull << 60) | core->wide_cur[ri->wide]->serial;
  int32_t j = ri->operand;
  if (j >= 0 && core->p->operands[j].hbm_direct) return hbm_key(core, (uint32_t)j);
  return (1ull << 60) | ((uint64_t)tsr_interp_core_index(core) << 32) | ref;
}

uint32_t tsr_race_view_aps(const view_plan_t *vp, const int64_t *origin, const int64_t *step,
                           race_ap_t *ap) {
  for (uint32_t d = 0; d < vp->rank; d++) {
    ap[d].start = origin[d];
    ap[d].count = vp->idx[d].kind == TSR_INDEX_POINT ? 1 : vp->idx[d].size;
    ap[d].stride = step[d] > 0 ? step[d] : 1;
  }
  return vp->rank;
}

/* Records a load or store of `vp` with the race detector. */
void tsr_race_ref_record(run_t *run, uint32_t site, const view_plan_t *vp,
                         const int64_t *origin, const int64_t *step, bool write) {
  race_ap_t ap[TSR_MAX_RANK];
  uint32_t rank = tsr_race_view_aps(vp, origin, step, ap);
  char what[96];
  snprintf(what, sizeof what, "%%%s", run->p->refs[vp->ref].name);
  tsr_race_access(run, &run->vc, -1, site, tsr_race_object_key(run, vp->ref), what, write,
                  rank, ap);
}

void tsr_race_release(run_t *run, const int32_t *sem) {
  if (!run->sh->race) return;
  vclock_t *sc = tsr_race_sem_clock(run->sh, sem);
  if (sc) tsr_vc_join(sc, &run->vc);
  run->vc.c[tsr_interp_core_index(run)]++;
}

void tsr_race_acquire(run_t *run, const int32_t *sem) {
  if (!run->sh->race) return;
  vclock_t *sc = tsr_race_sem_clock(run->sh, sem);
  if (sc) tsr_vc_join(&run->vc, sc);
}

void tsr_race_window(run_t *run, uint32_t j, const int64_t *start, const int64_t *extent,
                     bool write) {
  if (!run->sh->race) return;
  const operand_plan_t *op = &run->p->operands[j];
  race_ap_t ap[TSR_MAX_RANK];
  for (uint32_t d = 0; d < op->array_rank; d++) {
    ap[d].start = start[d];
    ap[d].count = extent[d];
    ap[d].stride = 1;
  }
  char what[96];
  snprintf(what, sizeof what, "%%%s (HBM)", run->p->refs[op->ref].name);
  tsr_race_access(run, &run->vc, -1, op->site, hbm_key(run, j), what, write,
                  op->array_rank, ap);
}

race_state_t *tsr_race_create(void) {
  race_state_t *rs = tsr_calloc(1, sizeof(race_state_t));
  if (rs) {
    rs->next_collect = 4096;
    rs->collect_dma = 32;
  }
  return rs;
}

void tsr_race_destroy(race_state_t *rs) {
  if (!rs) return;
  object_t *o, *ot;
  HASH_ITER(hh, rs->objects, o, ot) {
    HASH_DEL(rs->objects, o);
    tsr_free(o->acc);
    tsr_free(o);
  }
  sem_clock_t *s, *st;
  HASH_ITER(hh, rs->sems, s, st) {
    HASH_DEL(rs->sems, s);
    tsr_vc_free(&s->vc);
    tsr_free(s);
  }
  tsr_free(rs);
}

