/* The diagnostics sink of a kernel run, shared by the interpreter, its race
 * detector and the CPU backend's runtime: one record per diagnostic (kind,
 * severity, where, text), reported once per site and severity, formatted by
 * one formatter, with the messages both backends give written once here.
 * Depends on base/ only; not thread-safe (the callers serialize). */
#ifndef TESSERA_INTERP_DIAG_H
#define TESSERA_INTERP_DIAG_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "interp/bounds.h"
#include "ir/ir.h"
#include "tessera/api.h"

/* What went wrong: the public closed list (tessera/api.h), so that records
 * leave a run without a translation. */
typedef tsr_diagnostic_kind_t tsr_diag_kind_t;

typedef enum tsr_diag_severity {
  TSR_DIAG_ERROR,
  TSR_DIAG_WARNING, /* legal in Pallas but suspicious; an error when strict */
  TSR_DIAG_NOTE,    /* only in records: what was left out */
} tsr_diag_severity_t;

/* What a reporter knows beyond the site (all optional; NULL / 0: unknown).
 * Borrowed for the call. */
typedef struct tsr_diag_detail {
  const char *buffer;      /* the ref or operand named, without '%' */
  uint32_t index_rank;     /* the index range on `buffer`, [lo, hi) */
  int64_t index_lo[TSR_MAX_RANK], index_hi[TSR_MAX_RANK];
  /* a race's second access */
  const char *other_what;  /* as tsr_diag_where_t.what */
  uint32_t other_line;
  const int64_t *other_point;
  uint32_t other_grid_rank;
} tsr_diag_detail_t;

/* The detail naming one element, idx (rank indices), of `buffer`. */
static inline tsr_diag_detail_t tsr_diag_detail_element(const char *buffer, uint32_t rank,
                                                        const int64_t *idx) {
  tsr_diag_detail_t d = {.buffer = buffer, .index_rank = rank};
  for (uint32_t i = 0; i < rank; i++) {
    d.index_lo[i] = idx[i];
    d.index_hi[i] = idx[i] + 1;
  }
  return d;
}

/* Where a diagnostic happens: the site (an op or declaration; the unit of
 * "once per site") and the core at its grid point. Borrowed for the call. */
typedef struct tsr_diag_where {
  uint32_t site;       /* index in the backend's site table */
  tsr_loc_t loc;
  const char *what;    /* "'load'", "in %x", "the grid step" */
  uint32_t device, core;
  const int64_t *point; /* grid point, grid_rank entries */
  uint32_t grid_rank;
  const tsr_diag_detail_t *detail; /* NULL: nothing more */
} tsr_diag_where_t;

/* One diagnostic the sink kept, for the run's records (tessera/api.h's
 * tsr_diagnostic_t is made from it). Strings are owned by the sink. */
typedef struct tsr_diag_entry {
  tsr_diag_kind_t kind;
  tsr_diag_severity_t severity; /* after strict */
  tsr_loc_t loc;                /* loc.file is the sink's copy */
  const char *what;             /* "'load'", "out %y"; "" for notes */
  int32_t device, core;         /* -1: unknown */
  uint32_t grid_rank;
  int64_t point[TSR_MAX_RANK];
  const char *buffer;           /* "" if unknown */
  uint32_t index_rank;
  int64_t index_lo[TSR_MAX_RANK], index_hi[TSR_MAX_RANK];
  const char *other_what;       /* "" if not a race */
  int32_t other_line;
  uint32_t other_grid_rank;
  int64_t other_point[TSR_MAX_RANK];
  const char *message;          /* the line after "severity: " */
  const char *text;             /* the whole line, as in the status */
} tsr_diag_entry_t;

typedef struct tsr_diag_entries {
  tsr_diag_entry_t *items;
  size_t count, capacity;
} tsr_diag_entries_t;

/* One diagnostic, as the formatter sees it. Borrowed for the call. */
typedef struct tsr_diag_record {
  tsr_diag_kind_t kind;
  tsr_diag_severity_t severity;
  const tsr_diag_where_t *where;
  const char *text; /* the message, after the kernel/core/point context */
} tsr_diag_record_t;

/* The diagnostics of one run: errors and warnings as text lines
 * ("file:line:col: error: kernel @k, grid point (0): 'load': ...") with the
 * per-site "already reported" bits and the counts of what was left out. */
typedef struct tsr_diag_sink {
  const char *kernel_name;
  uint32_t devices, cores;  /* the context names a device/core when > 1 */
  uint32_t max_errors;      /* errors kept; the run stops at this many */
  bool strict;              /* warnings are reported as errors */
  uint32_t num_sites;
  uint8_t *site_reported;   /* per site: bit 0 an error, bit 1 a warning */
  tsr_diag_list_t errors, warnings;
  uint64_t suppressed, warnings_suppressed; /* repeats at a reported site */
  /* The same diagnostics as records, notes included: those of `errors`
   * (with the note tsr_diag_sink_status adds) and of `warnings` (with the
   * notes tsr_diag_sink_write_warnings adds). Strings in `arena`. */
  tsr_diag_entries_t error_entries, warning_entries;
  tsr_arena_t arena;
  bool failed; /* a record could not be kept (out of memory) */
} tsr_diag_sink_t;

/* Sets up an empty sink for a run of kernel @kernel_name (borrowed) with
 * num_sites sites. TSR_RESOURCE_EXHAUSTED when out of memory (the sink is
 * then deinitialized). */
tsr_status_t tsr_diag_sink_initialize(tsr_diag_sink_t *sink, const char *kernel_name,
                                      uint32_t num_sites, uint32_t devices, uint32_t cores,
                                      uint32_t max_errors, bool strict) TSR_MUST_USE;
/* Frees the sink's memory; a zero-filled sink may be deinitialized (also
 * after tsr_diag_sink_move). */
void tsr_diag_sink_deinitialize(tsr_diag_sink_t *sink);
/* Moves the sink's contents (its records) to *to, leaving `from` empty:
 * how a run hands its records to its caller. */
void tsr_diag_sink_move(tsr_diag_sink_t *from, tsr_diag_sink_t *to);

/* Reports a diagnostic at `where`, once per site and severity (a repeat is
 * only counted). A warning becomes an error under `strict`. Returns true
 * when the run must stop: max_errors errors have been kept. */
bool tsr_diag_report(tsr_diag_sink_t *sink, const tsr_diag_where_t *where,
                     tsr_diag_kind_t kind, tsr_diag_severity_t severity, const char *fmt, ...)
    TSR_PRINTF(5, 6);
bool tsr_diag_vreport(tsr_diag_sink_t *sink, const tsr_diag_where_t *where,
                      tsr_diag_kind_t kind, tsr_diag_severity_t severity, const char *fmt,
                      va_list ap) TSR_PRINTF(5, 0);
/* Lets the next diagnostic of `severity` at `site` be reported although one
 * was: for reports that are one per pair of accesses (races) or per core
 * (deadlocks, run stops) rather than one per site. */
void tsr_diag_reopen(tsr_diag_sink_t *sink, uint32_t site, tsr_diag_severity_t severity);

/* The run's errors as one TSR_KERNEL_ERROR status (with a note counting the
 * repeats left out), or NULL when there were none. */
tsr_status_t tsr_diag_sink_status(tsr_diag_sink_t *sink);
/* Writes the warnings (with notes on what was left out) to `f` as one
 * write, so that concurrent runs do not interleave their lines. Nothing
 * when there are none. Returns how many there were. */
uint64_t tsr_diag_sink_write_warnings(tsr_diag_sink_t *sink, FILE *f);

/* ---- The messages both backends give (each reports, then returns as
 * tsr_diag_report does) ---- */

/* A device or core index out of the run's range: reports the first of the
 * two that is (the caller has checked that one is). */
bool tsr_diag_device_range(tsr_diag_sink_t *sink, const tsr_diag_where_t *where,
                           int64_t device, int64_t core);
/* One blocked core of a deadlock: every blocked core is reported, so this
 * reopens the site first. `sem` names the semaphore ("%s[1]"). */
bool tsr_diag_deadlock(tsr_diag_sink_t *sink, const tsr_diag_where_t *where, const char *sem,
                       int64_t need, bool bytes, int64_t have);
bool tsr_diag_assert_failed(tsr_diag_sink_t *sink, const tsr_diag_where_t *where,
                            const char *text);
/* A run bound was reached (interp/bounds.h). */
bool tsr_diag_run_stopped(tsr_diag_sink_t *sink, const tsr_diag_where_t *where,
                          const tsr_bounds_t *bounds);
/* The output at `where` (its declaration) is written by every step along
 * grid dim `dim` (tsr_ir_parallel_revisit_dim), whose semantics are
 * `semantics` and which has `steps` steps (-1: not known before a run): a
 * warning, given before the first step; the site's other warnings
 * (never-written elements) are still reported after it. Both backends give it, once per output and run
 * (docs/semantics.md, "Outputs along a parallel dimension"). */
bool tsr_diag_parallel_revisit(tsr_diag_sink_t *sink, const tsr_diag_where_t *where,
                               uint32_t dim, uint8_t semantics, int64_t steps);

/* ---- Indices and their text ---- */

/* The row-major index of position `flat` in an array of shape dims. */
static inline void tsr_interp_unflatten(int64_t flat, uint32_t rank, const int64_t *dims,
                                        int64_t *idx) {
  for (int32_t i = (int32_t)rank - 1; i >= 0; i--) {
    idx[i] = dims[i] ? flat % dims[i] : 0;
    flat = dims[i] ? flat / dims[i] : 0;
  }
}

/* "[1, 2]" */
void tsr_diag_format_dims(char *buf, size_t size, const int64_t *dims, uint32_t rank);
/* "(1, 2)" */
void tsr_diag_format_point(char *buf, size_t size, const int64_t *point, uint32_t rank);
/* "%name[i, j]": element `flat` (row-major) of a ref of shape dims, or
 * "%name" when rank is 0 or flat < 0. */
void tsr_diag_format_element(char *buf, size_t size, const char *name, uint32_t rank,
                             const int64_t *dims, int64_t flat);
/* The text of an index of a view outside its ref, as both backends give
 * it: "index 9 out of bounds for dimension 0 of %s (shape [8, 128])" or
 * "slice 4:12:1 out of bounds for dimension 0 of %x (the DMA's source)
 * (shape [8, 128])". `ref` without '%'; `side` "source"/"destination" or
 * NULL; `limit` the padded shape when it differs from `shape`, or NULL. */
void tsr_diag_format_out_of_bounds(char *buf, size_t size, const char *ref, const char *side,
                                   uint32_t rank, const int64_t *shape, const int64_t *limit,
                                   uint32_t dim, bool point, int64_t start, int64_t count,
                                   int64_t stride);
/* "index map gives block index [4, 0], out of range for array shape ...
 * with block [8, 128] (block counts [4, 1])", as both backends give it. */
void tsr_diag_format_block_range(char *buf, size_t size, uint32_t rank, const int64_t *bi,
                                 const int64_t *array, const int64_t *block);
/* "'mnemonic'": how a diagnostic names an op. */
void tsr_diag_format_op(char *buf, size_t size, tsr_opcode_t opcode);

#endif /* TESSERA_INTERP_DIAG_H */
