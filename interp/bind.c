/* Binding a prepared program to another kernel with the same canonical
 * bytes (the program cache's hit path): the code and plans are shared, the
 * sites, names and options are the new kernel's. Split from prepare.c,
 * which builds the programs this binds. */
#include "interp/interp_internal.h"

typedef struct bind_ops {
  const tsr_op_t **ops; /* position -> op */
} bind_ops_t;

static void collect_op(void *ctx, const tsr_op_t *op, uint32_t position) {
  ((bind_ops_t *)ctx)->ops[position] = op;
}

/* The sites and names of `q` (a copy of `base`) for kernel `k`. */
static tsr_status_t rebind(tsr_interp_program_t *q, const tsr_kernel_t *k,
                           const tsr_op_t **ops) {
  tsr_arena_t *A = &q->arena;
  const char *file = k->module->filename ? k->module->filename : "<input>";
  q->kernel_name = tsr_arena_strndup(A, k->name, strlen(k->name));
  q->file = tsr_arena_strndup(A, file, strlen(file));
  ref_info_t *refs = tsr_arena_alloc_array(A, q->num_refs + 1, sizeof *refs);
  q->sites = tsr_malloc((size_t)(q->num_sites ? q->num_sites : 1) * sizeof *q->sites);
  if (!q->kernel_name || !q->file || !refs || !q->sites) return TSR_OOM();
  memcpy(refs, q->base->refs, q->num_refs * sizeof *refs);
  q->refs = refs;
  q->sites_capacity = q->num_sites;
  tsr_status_t mismatch = NULL;
  for (uint32_t i = 0; i < q->num_sites && !mismatch; i++) {
    const site_t *from = &q->base->sites[i];
    site_t *to = &q->sites[i];
    *to = *from;
    to->loc.file = q->file;
    const tsr_op_t *op = from->origin == SITE_OP || from->origin == SITE_SCOPED
                             ? (from->index < q->num_walked_ops ? ops[from->index] : NULL)
                             : NULL;
    switch ((site_origin_t)from->origin) {
      case SITE_OP:
        if (!op) break;
        to->loc.line = op->loc.line;
        to->loc.col = op->loc.col;
        continue;
      case SITE_SCOPED:
        if (!op || op->opcode != TSR_OP_SCOPED || from->sub >= op->regions[0].num_args)
          break;
        to->loc.line = op->loc.line;
        to->loc.col = op->loc.col;
        continue;
      case SITE_DECL:
        if (from->index >= k->num_decls) break;
        to->loc.line = k->decls[from->index].loc.line;
        to->loc.col = k->decls[from->index].loc.col;
        continue;
      case SITE_KERNEL:
        to->loc.line = k->loc.line;
        to->loc.col = k->loc.col;
        continue;
    }
    mismatch = TSR_STATUS(TSR_INTERNAL, "tsr_interp_program_bind: kernel @%s does "
                          "not match the prepared program (site %u)", k->name, i);
  }
  if (mismatch) return mismatch;
  /* Names of refs, and the "in %x" / "scoped %b" texts of their sites. */
  for (uint32_t i = 0; i < q->num_refs; i++) {
    ref_info_t *ri = &refs[i];
    const site_t *site = &q->sites[ri->site];
    const tsr_value_t *v = NULL;
    if (ri->decl >= 0 && (uint32_t)ri->decl < k->num_decls)
      v = k->decls[ri->decl].ref;
    else if (ri->decl < 0 && site->origin == SITE_SCOPED)
      v = ops[site->index]->regions[0].args[site->sub];
    if (!v || !v->name)
      return TSR_STATUS(TSR_INTERNAL, "tsr_interp_program_bind: kernel @%s does not "
                        "match the prepared program (ref %u)", k->name, i);
    ri->name = tsr_arena_strndup(A, v->name, strlen(v->name));
    if (!ri->name) return TSR_OOM();
  }
  for (uint32_t i = 0; i < q->num_sites; i++) {
    site_t *to = &q->sites[i];
    if (to->origin == SITE_OP || to->origin == SITE_KERNEL) continue;
    const char *name = NULL, *role = NULL;
    if (to->origin == SITE_SCOPED) {
      name = ops[to->index]->regions[0].args[to->sub]->name;
      role = "scoped";
    } else {
      const tsr_decl_t *d = &k->decls[to->index];
      name = d->ref->name;
      role = d->role == TSR_ROLE_SCRATCH ? "scratch" : d->role == TSR_ROLE_IN ? "in"
             : d->role == TSR_ROLE_OUT ? "out" : "prefetch";
    }
    /* "role %name", without snprintf: binding is on the cache's hit path */
    if (!name) name = "?";
    size_t nr = strlen(role), nn = strlen(name);
    char *what = tsr_arena_alloc(A, nr + nn + 3);
    if (!what) return TSR_OOM();
    memcpy(what, role, nr);
    what[nr] = ' ';
    what[nr + 1] = '%';
    memcpy(what + nr + 2, name, nn + 1);
    to->what = what;
  }
  return NULL;
}

tsr_status_t tsr_interp_program_bind(const tsr_interp_program_t *prepared,
                                     const tsr_ir_kernel_t *kernel,
                                     const tsr_interp_options_t *options,
                                     void (*release)(void *ctx), void *release_ctx,
                                     tsr_interp_program_t **out_program) {
  if (!prepared || !kernel || !out_program)
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "tsr_interp_program_bind: NULL argument");
  if (prepared->base) prepared = prepared->base;
  uint32_t walked = tsr_ir_walk_ops(kernel, NULL, NULL);
  if (walked != prepared->num_walked_ops)
    return TSR_STATUS(TSR_INTERNAL, "tsr_interp_program_bind: kernel @%s has %u ops, "
                      "the prepared program %u", kernel->name, walked,
                      prepared->num_walked_ops);
  bind_ops_t b = {tsr_malloc((size_t)(walked ? walked : 1) * sizeof *b.ops)};
  tsr_interp_program_t *q = tsr_malloc(sizeof *q);
  if (!b.ops || !q) {
    tsr_free(b.ops);
    tsr_free(q);
    return TSR_OOM();
  }
  tsr_ir_walk_ops(kernel, collect_op, &b);
  memcpy(q, prepared, sizeof *q);
  q->base = prepared;
  q->sort_scratch = tsr_sort_scratch_create();
  q->release = NULL;
  q->release_ctx = NULL;
  q->sites = NULL;
  tsr_arena_initialize(&q->arena);
  for (uint32_t i = 0; i < TSR_INTERP_SPARES; i++) atomic_init(&q->spare[i], NULL);
  tsr_status_t s = rebind(q, kernel, b.ops);
  tsr_free(b.ops);
  /* Options: the prepared program's semantics, but the caller's trace,
   * strictness and bounds (what changes only how a run reports or stops). */
  tsr_interp_options_t caller;
  if (options) caller = *options;
  else tsr_interp_options_initialize(&caller);
  q->options.strict = caller.strict;
  q->options.timeout_seconds = caller.timeout_seconds;
  q->options.max_steps = caller.max_steps;
  q->options.cancel = caller.cancel;
  q->options.on_grid_step = caller.on_grid_step;
  q->options.on_grid_step_user = caller.on_grid_step_user;
  q->options.on_progress = caller.on_progress;
  q->options.on_progress_user = caller.on_progress_user;
  q->options.progress_interval = caller.progress_interval;
  q->options.threads = caller.threads;
  q->options.trace_path = NULL;
  if (!s && options && options->trace_path) {
    q->options.trace_path = tsr_arena_strndup(&q->arena, options->trace_path,
                                              strlen(options->trace_path));
    if (!q->options.trace_path) s = TSR_OOM();
  }
  if (s) {
    tsr_interp_program_destroy(q);
    return s;
  }
  q->release = release;
  q->release_ctx = release_ctx;
  *out_program = q;
  return NULL;
}

