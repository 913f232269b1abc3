/* Library-internal utilities shared by every subsystem: checked allocation,
 * the arena, a growable string buffer and the 16-bit float conversions.
 * Not a public header: include "base/base_internal.h" from library sources only. */
#ifndef TESSERA_BASE_INTERNAL_H
#define TESSERA_BASE_INTERNAL_H

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "tessera/base.h"

#define TSR_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define TSR_MIN(a, b) ((a) < (b) ? (a) : (b))
#define TSR_MAX(a, b) ((a) > (b) ? (a) : (b))
#if defined(__GNUC__)
#define TSR_LIKELY(x) __builtin_expect(!!(x), 1)
#define TSR_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define TSR_UNUSED __attribute__((unused))
#else
#define TSR_LIKELY(x) (x)
#define TSR_UNLIKELY(x) (x)
#define TSR_UNUSED
#endif

/* ---- Checked allocation -------------------------------------------------
 * Every size that feeds an allocation goes through these. They return NULL on
 * overflow or exhaustion; callers turn that into TSR_OUT_OF_MEMORY.
 * tsr_alloc_fail_after(n) makes the n-th next allocation fail (tests only;
 * -1 disables), so failure paths can be exercised. */
void *tsr_malloc(size_t size);
void *tsr_calloc(size_t count, size_t size);
void *tsr_realloc(void *ptr, size_t size);
void *tsr_aligned_alloc(size_t alignment, size_t size); /* free with tsr_free */
void tsr_free(void *ptr);
char *tsr_strndup(const char *s, size_t n);
void tsr_alloc_fail_after(long n);
/* Makes `allocator` (borrowed; NULL or one without `allocate`: malloc) the
 * calling thread's allocator for what follows, and returns the one it
 * replaces, to be bound again when the caller is done. Every block records
 * its allocator, so tsr_free needs no binding. */
const tsr_allocator_t *tsr_allocator_bind(const tsr_allocator_t *allocator);
/* pthread_once(once, init) with the process's allocator bound: what
 * process-wide state allocates outlives every context. Library code uses
 * it for every one-time initialization. */
void tsr_process_once(pthread_once_t *once, void (*init)(void));
/* a*b and a+b with overflow detection: false on overflow. */
bool tsr_mul_size(size_t a, size_t b, size_t *out);
bool tsr_add_size(size_t a, size_t b, size_t *out);
bool tsr_mul_i64(int64_t a, int64_t b, int64_t *out);

#define TSR_OOM() TSR_STATUS(TSR_OUT_OF_MEMORY, "out of memory")
/* Out of memory for a large allocation: says how much and what for, e.g.
 * TSR_OOM_BYTES(n, "the VMEM of core %u", core) gives "cannot allocate
 * 2147483648 bytes (2.00 GiB) for the VMEM of core 0". */
#define TSR_OOM_BYTES(bytes, ...)                                              \
  tsr_status_oom_bytes(__FILE__, __LINE__, (bytes), __VA_ARGS__)
tsr_status_t tsr_status_oom_bytes(const char *c_file, int c_line, size_t bytes,
                                  const char *what_fmt, ...) TSR_PRINTF(4, 5);

/* Checks an array shape (dtype known, rank <= TSR_MAX_RANK, dims >= 0) and
 * gives its byte size; TSR_OUT_OF_MEMORY when the size overflows. */
tsr_status_t tsr_array_shape_bytes(tsr_dtype_t dtype, uint32_t rank,
                                   const int64_t *dims, size_t *out_bytes)
    TSR_MUST_USE;

/* The process umask, read from /proc/self/status without changing it
 * (umask(2) cannot be queried without a race between threads); 022 if /proc
 * is unavailable. */
unsigned tsr_process_umask(void);
/* Writes all n bytes to fd (retrying short writes and EINTR); false with
 * errno set on failure. */
bool tsr_write_all(int fd, const void *buf, size_t n);

/* ---- Output files (base/outfile.c) ----------------------------------------
 * A batch of user files written all or nothing: tsr_outfiles_write sets up
 * every path (a regular or new file gets a temporary file beside it; a
 * symlink is followed to the file it names; a character device or FIFO is
 * written in place; anything else is refused), calls `fill` once per path,
 * files first and streams after them, and renames every temporary file over
 * its target only when all are complete. On failure the temporary files and
 * the files the batch created are removed; what a stream received stays. */
typedef struct tsr_outfile tsr_outfile_t;
typedef tsr_status_t (*tsr_outfile_fill_fn)(void *ctx, size_t index,
                                            tsr_outfile_t *file);
tsr_status_t tsr_outfiles_write(const char *const *paths, size_t count,
                                tsr_outfile_fill_fn fill, void *ctx) TSR_MUST_USE;
/* Appends to an output, inside `fill`. */
tsr_status_t tsr_outfile_write(tsr_outfile_t *file, const void *data,
                               size_t size) TSR_MUST_USE;
/* tsr_file_write for a caller that must not wait (a run writing its trace,
 * which nothing could interrupt then): a FIFO that no process reads is
 * TSR_IO_ERROR instead of a wait for a reader. */
tsr_status_t tsr_file_write_no_wait(const char *path, const void *data,
                                    size_t size) TSR_MUST_USE;

/* ---- Arena --------------------------------------------------------------
 * Bump allocator; everything allocated dies with tsr_arena_deinitialize.
 * Not thread-safe. Allocations are 16-byte aligned and zero-filled. */
typedef struct tsr_arena_chunk tsr_arena_chunk_t;
typedef struct tsr_arena {
  tsr_arena_chunk_t *head;
  size_t used;      /* bytes used in head */
  size_t capacity;  /* bytes available in head */
  size_t total;     /* bytes allocated from the system */
} tsr_arena_t;

void tsr_arena_initialize(tsr_arena_t *arena);
void tsr_arena_deinitialize(tsr_arena_t *arena);
void *tsr_arena_alloc(tsr_arena_t *arena, size_t size); /* NULL on OOM */
void *tsr_arena_alloc_array(tsr_arena_t *arena, size_t count, size_t size);
char *tsr_arena_strndup(tsr_arena_t *arena, const char *s, size_t n);

/* ---- String buffer ------------------------------------------------------
 * Growable NUL-terminated text. On allocation failure it sets `failed` and
 * further appends are ignored, so callers check once at the end. */
typedef struct tsr_strbuf {
  char *data;
  size_t size;
  size_t capacity;
  bool failed;
} tsr_strbuf_t;

void tsr_strbuf_initialize(tsr_strbuf_t *sb);
void tsr_strbuf_deinitialize(tsr_strbuf_t *sb);
/* Room for `extra` more bytes, allocated once (appends then copy only);
 * false (and `failed` set) on allocation failure. */
bool tsr_strbuf_reserve(tsr_strbuf_t *sb, size_t extra);
void tsr_strbuf_append(tsr_strbuf_t *sb, const char *s, size_t n);
void tsr_strbuf_puts(tsr_strbuf_t *sb, const char *s);
void tsr_strbuf_printf(tsr_strbuf_t *sb, const char *fmt, ...) TSR_PRINTF(2, 3);
void tsr_strbuf_vprintf(tsr_strbuf_t *sb, const char *fmt, va_list ap)
    TSR_PRINTF(2, 0);
/* Moves the text out (caller frees with tsr_free); the buffer is reset. */
char *tsr_strbuf_take(tsr_strbuf_t *sb);

/* ---- Diagnostic records of a status ----------------------------------------
 * Besides its text, a status can carry its located diagnostics as records,
 * in the order of its lines: one per line tsr_status_make_at or a
 * tsr_diag_list_t made, notes included. tsr_status_annotate changes the text
 * only. runtime/diagnostic.c turns them into the public tsr_diagnostic_t. */
typedef struct tsr_status_record {
  tsr_diagnostic_severity_t severity;
  bool located;        /* false: no location (a note) */
  tsr_loc_t loc;       /* loc.file NULL: "<unknown>" in the text; strings
                          owned by the status */
  const char *op;      /* the op's mnemonic ("add"), "" when not known */
  const char *text;    /* the line as the message holds it */
  const char *message; /* the text after "severity: " (inside `text`) */
} tsr_status_record_t;

typedef struct tsr_status_records {
  tsr_status_record_t *items;
  size_t count, capacity;
  tsr_arena_t arena; /* the records' strings */
} tsr_status_records_t;

/* A deep copy of `status`: code, text and records (NULL stays NULL); for
 * statuses made by another copy of base/ (the lowering library). */
tsr_status_t tsr_status_copy(const tsr_status_t status);
size_t tsr_status_record_count(const tsr_status_t status);
/* Borrowed, valid while the status lives; NULL past the end. */
const tsr_status_record_t *tsr_status_record_get(const tsr_status_t status, size_t i);

/* A status whose message is one located diagnostic, "FILE:LINE:COL: error:
 * MESSAGE" (FILE "<unknown>" when loc.file is NULL), with its record; `op`
 * (may be NULL) is the mnemonic of the op it is about. */
tsr_status_t tsr_status_make_at(tsr_status_code_t code, const char *c_file, int c_line,
                                tsr_loc_t loc, const char *op, const char *fmt, ...)
    TSR_PRINTF(6, 7);
#define TSR_STATUS_AT(code, loc, ...)                                          \
  tsr_status_make_at((code), __FILE__, __LINE__, (loc), NULL, __VA_ARGS__)
#define TSR_STATUS_AT_OP(code, loc, op, ...)                                   \
  tsr_status_make_at((code), __FILE__, __LINE__, (loc), (op), __VA_ARGS__)

/* ---- Diagnostic lists -----------------------------------------------------
 * "file:line:col: error: msg" (or "warning: msg") lines collected by the
 * parser, the verifier and the interpreter, kept as text and as records;
 * turned into one status at the end. */
typedef struct tsr_diag_list {
  tsr_strbuf_t text;             /* failed: out of memory (text or records) */
  tsr_status_records_t records;  /* one per line of `text` */
  size_t count;
  size_t limit; /* 0 = unlimited; beyond it, diagnostics are counted only */
  tsr_diagnostic_severity_t severity; /* of the diagnostics added: error
                                         (set by initialize) or warning */
} tsr_diag_list_t;

void tsr_diag_list_initialize(tsr_diag_list_t *list, size_t limit);
void tsr_diag_list_deinitialize(tsr_diag_list_t *list);
void tsr_diag_add(tsr_diag_list_t *list, tsr_loc_t loc, const char *fmt, ...)
    TSR_PRINTF(3, 4);
/* tsr_diag_add with the mnemonic of the op the diagnostic is about (`op`
 * may be NULL: not known). */
void tsr_diag_vadd(tsr_diag_list_t *list, tsr_loc_t loc, const char *op, const char *fmt,
                   va_list ap) TSR_PRINTF(4, 0);
/* Appends a "note: ..." line without location (not counted, never left
 * out), with its record. */
void tsr_diag_note(tsr_diag_list_t *list, const char *fmt, ...) TSR_PRINTF(2, 3);
/* NULL if the list is empty, else a status with `code` holding every line
 * (plus a "N more errors not shown" note when the limit was hit) and their
 * records, which move to it. */
tsr_status_t tsr_diag_list_to_status(tsr_diag_list_t *list,
                                     tsr_status_code_t code);

/* The number of elements of a shape (1 for rank 0). */
static inline int64_t tsr_dims_count(uint32_t rank, const int64_t *dims) {
  int64_t n = 1;
  for (uint32_t i = 0; i < rank; i++) n *= dims[i];
  return n;
}

/* ---- 16-bit floats --------------------------------------------------------
 * Conversions with round-to-nearest-even, NaN preserved (quietened). */
static inline uint32_t tsr_f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
static inline float tsr_bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static inline float tsr_bf16_to_f32(uint16_t h) {
  return tsr_bits_f32((uint32_t)h << 16);
}
static inline uint16_t tsr_f32_to_bf16(float f) {
  uint32_t u = tsr_f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}
/* f16 <-> f32, rounding to nearest even, NaNs quieted with their payload's
 * top bits kept (test_blockops checks every f16 value and f32 values
 * around every f16 exponent against a reference written with branches).
 * Written with bit masks so that the interpreter's block loops over them
 * vectorize (with ?: GCC 12 made branches and did not vectorize; out of
 * line with branches, add f16 ran at 0.9 GB/s on 64 MiB arrays, memcpy at
 * 19 GB/s). */
static inline uint32_t tsr_select_bits(uint32_t mask, uint32_t yes, uint32_t no) {
  return (yes & mask) | (no & ~mask);
}
static inline float tsr_f16_to_f32(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, em = h & 0x7fffu;
  /* Finite: em << 13 read as f32 is the f16 value times 2^-112, also for
   * subnormals (an f32 subnormal), so one exact multiply rebiases it. */
  const float finite = tsr_bits_f32(em << 13) * 0x1p112f;
  const uint32_t special = 0x7f800000u | (em << 13) |
                           ((uint32_t)((em & 0x3ffu) != 0) << 22); /* quiet NaN */
  const uint32_t is_special = 0u - (uint32_t)(em >= 0x7c00u);
  return tsr_bits_f32(sign | tsr_select_bits(is_special, special, tsr_f32_bits(finite)));
}
static inline uint16_t tsr_f32_to_f16(float f) {
  const uint32_t u = tsr_f32_bits(f), sign = (u >> 16) & 0x8000u;
  const uint32_t a = u & 0x7fffffffu;
  const uint32_t nan_h = 0x7e00u | ((a >> 13) & 0x3ffu);
  const uint32_t r = a - 0x38000000u; /* rebias 127 -> 15 (normal range) */
  const uint32_t normal_h = (r + 0x0fffu + ((r >> 13) & 1u)) >> 13;
  /* Subnormal f16: the ulp of 0.5f is 2^-24, the f16 subnormal step, so
   * |f| + 0.5f rounds |f| * 2^24 to nearest even into the low bits. */
  const uint32_t sub_h = tsr_f32_bits(tsr_bits_f32(a) + 0.5f) - 0x3f000000u;
  uint32_t h = tsr_select_bits(0u - (uint32_t)(a >= 0x38800000u), normal_h, sub_h);
  h = tsr_select_bits(0u - (uint32_t)(a >= 0x477ff000u), 0x7c00u, h); /* to inf */
  h = tsr_select_bits(0u - (uint32_t)(a > 0x7f800000u), nan_h, h);
  return (uint16_t)(sign | h);
}

/* ---- 8-bit floats ------------------------------------------------------------
 * float8_e4m3fn (bias 7, 3 mantissa bits, no infinity, S1111111 is NaN, max
 * 448) and float8_e5m2 (bias 15, 2 mantissa bits, IEEE infinities and NaNs,
 * max 57344), converted as ml_dtypes does: from f32 rounding to nearest
 * even once, subnormals kept; what rounds beyond the largest finite value
 * is NaN for e4m3fn (it has no infinity) and infinity for e5m2; NaN stays
 * NaN with its sign (e4m3fn S1111111, e5m2 S1111110). `mbits` mantissa
 * bits, `bias`; `min_normal` is the f32 bits of 2^(1-bias). */
static inline uint8_t tsr_f32_to_f8(float f, uint32_t mbits, uint32_t bias,
                                    uint32_t overflow_bits, uint32_t overflow_h,
                                    uint32_t nan_h) {
  const uint32_t u = tsr_f32_bits(f), sign = (u >> 24) & 0x80u;
  const uint32_t a = u & 0x7fffffffu, shift = 23u - mbits;
  const uint32_t r = a - ((127u - bias) << 23); /* rebias (normal range) */
  const uint32_t normal_h = (r + ((1u << (shift - 1)) - 1u) + ((r >> shift) & 1u)) >> shift;
  /* Subnormal: the ulp of 2^(1-bias) * 2^shift is the subnormal step, so
   * adding that power of two rounds |f| into the low bits (as f16 above). */
  const float magic = tsr_bits_f32((128u - bias + shift) << 23);
  const uint32_t sub_h = tsr_f32_bits(tsr_bits_f32(a) + magic) - tsr_f32_bits(magic);
  uint32_t h = tsr_select_bits(0u - (uint32_t)(a >= ((128u - bias) << 23)), normal_h, sub_h);
  h = tsr_select_bits(0u - (uint32_t)(a >= overflow_bits), overflow_h, h);
  h = tsr_select_bits(0u - (uint32_t)(a > 0x7f800000u), nan_h, h);
  return (uint8_t)(sign | h);
}
/* 8-bit float bits to f32 (exact): the magnitude bits placed under f32's
 * exponent read as a (possibly subnormal) f32 are the value times
 * 2^-(127-bias) shifted, so one exact multiply rebiases them. */
static inline float tsr_f8_to_f32(uint8_t h, uint32_t mbits, uint32_t bias, bool is_special,
                                  uint32_t special_bits) {
  const uint32_t sign = (uint32_t)(h & 0x80u) << 24, em = h & 0x7fu;
  const float finite = tsr_bits_f32(em << (23u - mbits)) *
                       tsr_bits_f32((127u + 127u - bias) << 23);
  return tsr_bits_f32(sign | (is_special ? special_bits : tsr_f32_bits(finite)));
}
static inline float tsr_f8e4m3fn_to_f32(uint8_t h) {
  return tsr_f8_to_f32(h, 3, 7, (h & 0x7fu) == 0x7fu, 0x7fc00000u);
}
static inline uint8_t tsr_f32_to_f8e4m3fn(float f) {
  /* 464 (0x43e80000), halfway between 448 and the NaN pattern, rounds to
   * even (448); anything above it is NaN. */
  return tsr_f32_to_f8(f, 3, 7, 0x43e80001u, 0x7fu, 0x7fu);
}
static inline float tsr_f8e5m2_to_f32(uint8_t h) {
  const uint32_t em = h & 0x7fu;
  return tsr_f8_to_f32(h, 2, 15, em >= 0x7cu,
                       0x7f800000u | ((em & 3u) << 21) | ((uint32_t)((em & 3u) != 0) << 22));
}
static inline uint8_t tsr_f32_to_f8e5m2(float f) {
  /* 61440 (0x47700000), halfway between 57344 and 2^16, rounds to even:
   * up, to infinity. */
  return tsr_f32_to_f8(f, 2, 15, 0x47700000u, 0x7cu, 0x7eu);
}

/* ---- TPU chips (chips.c) --------------------------------------------------- */

typedef struct tsr_chip {
  const char *name;          /* "v5e" */
  const char *aliases;       /* other names, space-separated ("v7 tpu7x"), or "" */
  int64_t vmem_bytes;        /* per core */
  int64_t smem_bytes;
  int64_t scoped_vmem_bytes; /* what a kernel may use without vmem_limit_bytes */
  uint32_t cores;            /* TensorCores per chip that Mosaic shards over */
  bool mosaic;               /* the TPU emitter targets it */
} tsr_chip_t;

/* The chip called `name` (or one of its aliases); NULL if unknown. */
const tsr_chip_t *tsr_chip_find(const char *name);
/* The known names for messages; with mosaic_only, those the emitter takes. */
const char *tsr_chip_names(bool mosaic_only);
/* Whether `chip` (NULL: v5e) tiles twice the rows of the others, as JAX's
 * tpu_info.infer_tiling has v2 and v3 do. */
bool tsr_chip_doubles_tile_rows(const char *chip);
/* The shape a TPU allocates a ref of `dims` with (buffer_bounds="padded",
 * docs/semantics.md "Out-of-bounds accesses"): the last dim rounded up to
 * 128 lanes, the second-minor to the dtype's row tile (twice as many rows
 * with `double_rows`); a rank-1 ref to 128 x its packing. Shared by the
 * interpreter and the cpu backend's emitter, so both pad alike. */
void tsr_padded_dims(bool double_rows, tsr_dtype_t dtype, uint32_t rank, const int64_t *dims,
                     int64_t *out);

#endif /* TESSERA_BASE_INTERNAL_H */
