/* tessera base types: statuses, element types, source locations and arrays.
 * Everything else in the public API builds on these. */
#ifndef TESSERA_BASE_H
#define TESSERA_BASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Marks the public API: the shared library exports these symbols only. */
#if defined(__GNUC__)
#define TSR_API __attribute__((visibility("default")))
#else
#define TSR_API
#endif

#if defined(__GNUC__)
#define TSR_MUST_USE __attribute__((warn_unused_result))
#define TSR_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define TSR_MUST_USE
#define TSR_PRINTF(f, a)
#endif

#define TSR_VERSION_STRING "0.1.0"

/* ---- Status ------------------------------------------------------------ */

/* Status codes: a closed set. */
typedef enum tsr_status_code {
  TSR_OK = 0,
  TSR_INVALID_ARGUMENT, /* the caller passed something malformed (usage) */
  TSR_PARSE_ERROR,      /* .tsr text does not follow the grammar */
  TSR_VERIFY_ERROR,     /* the module breaks a type/shape/space rule */
  TSR_KERNEL_ERROR,     /* the kernel misbehaved while running (OOB, ...) */
  TSR_IO_ERROR,         /* a file could not be read or written */
  TSR_FORMAT_ERROR,     /* a data file (.npy) is malformed or mismatched */
  TSR_NOT_FOUND,        /* a named thing does not exist */
  TSR_OUT_OF_MEMORY,    /* an allocation failed or a size overflowed */
  TSR_RESOURCE_EXHAUSTED, /* a simulated budget (VMEM, ...) was exceeded */
  TSR_UNIMPLEMENTED,    /* valid, but not supported by this version */
  TSR_INTERNAL,         /* a bug in tessera */
  TSR_STATUS_CODE_COUNT
} tsr_status_code_t;

/* A status is NULL on success, else a heap object owned by whoever holds it
 * (free it with tsr_status_free). It carries a code, a message (possibly
 * several diagnostic lines, each "file:line:col: error: ...") and the C
 * source location that created it. A status made from located diagnostics
 * (a parse or verify error, an op a backend cannot run) also carries each of
 * them as a record (severity, file, line, col, op, message): read them with
 * tsr_diagnostic_list_create_from_status (tessera/api.h), never by parsing
 * the message. Not thread-safe to share; safe to move. */
typedef struct tsr_status *tsr_status_t;

/* How serious a diagnostic is: the word after its location in the text. */
typedef enum tsr_diagnostic_severity {
  TSR_SEVERITY_ERROR,
  TSR_SEVERITY_WARNING,
  TSR_SEVERITY_NOTE,
} tsr_diagnostic_severity_t;

/* "error", "warning", "note"; "?" for a value outside the enum. */
TSR_API const char *tsr_diagnostic_severity_name(tsr_diagnostic_severity_t severity);

TSR_API tsr_status_t tsr_status_make(tsr_status_code_t code, const char *c_file,
                             int c_line, const char *fmt, ...) TSR_PRINTF(4, 5);
/* Prepends "context: " to the message; returns the same status (NULL stays
 * NULL). Only the text changes: the status's diagnostic records keep their
 * own lines, without the context. */
TSR_API tsr_status_t tsr_status_annotate(tsr_status_t status, const char *fmt, ...)
    TSR_PRINTF(2, 3);
TSR_API tsr_status_code_t tsr_status_code(const tsr_status_t status);
/* The message; borrowed, valid until the status is freed. "" for NULL. */
TSR_API const char *tsr_status_message(const tsr_status_t status);
/* Number of diagnostics the status carries (lines of its message); 0 for NULL. */
TSR_API size_t tsr_status_diagnostic_count(const tsr_status_t status);
TSR_API const char *tsr_status_code_name(tsr_status_code_t code);
TSR_API void tsr_status_free(tsr_status_t status);

#define TSR_STATUS(code, ...) tsr_status_make((code), __FILE__, __LINE__, __VA_ARGS__)
/* Propagate a failure to the caller. */
#define TSR_RETURN_IF_ERROR(expr)                                              \
  do {                                                                         \
    tsr_status_t tsr_status_ = (expr);                                         \
    if (tsr_status_) return tsr_status_;                                       \
  } while (0)

/* ---- Element types ----------------------------------------------------- */

typedef enum tsr_dtype {
#define TSR_DTYPE(E, n, st, ct, bytes, bits, cls) TSR_DTYPE_##E,
#include "tessera/dtypes.def"
#undef TSR_DTYPE
  TSR_DTYPE_COUNT
} tsr_dtype_t;

typedef enum tsr_dtype_class {
  TSR_CLASS_FLOAT,
  TSR_CLASS_SINT,
  TSR_CLASS_UINT,
  TSR_CLASS_BOOL
} tsr_dtype_class_t;

TSR_API const char *tsr_dtype_name(tsr_dtype_t dtype);
TSR_API size_t tsr_dtype_size(tsr_dtype_t dtype);
/* The width of a value in bits: 4 for i4 (stored one per byte), 1 for i1. */
TSR_API uint32_t tsr_dtype_bits(tsr_dtype_t dtype);
TSR_API tsr_dtype_class_t tsr_dtype_class(tsr_dtype_t dtype);
/* Looks a dtype up by its name ("f32", "bf16", ...); false if unknown. */
TSR_API bool tsr_dtype_from_name(const char *name, size_t len, tsr_dtype_t *out_dtype);

/* A byte count as tessera's messages state sizes: "512 B", "3.4 KiB",
 * "12.0 MiB", "1.50 GiB" (binary units); public so that the CLI and the
 * library's diagnostics print sizes alike. */
TSR_API void tsr_format_bytes(char *buf, size_t size, uint64_t bytes);

/* ---- Strings and locations --------------------------------------------- */

/* Strings cross the API as pointer + length; data need not be NUL-terminated. */
typedef struct tsr_string_view {
  const char *data;
  size_t size;
} tsr_string_view_t;

#define TSR_SV(s) ((tsr_string_view_t){(s), sizeof(s) - 1})

/* A position in a .tsr source. line/col are 1-based; 0 means unknown. */
typedef struct tsr_loc {
  const char *file; /* borrowed from the module that owns the location */
  uint32_t line;
  uint32_t col;
} tsr_loc_t;

/* ---- Arrays ------------------------------------------------------------ */

#define TSR_MAX_RANK 6

/* A dense row-major host array: the unit of data exchanged with kernels and
 * .npy files. Owns its data (free with tsr_array_deinitialize). bf16 and f16
 * elements are raw 16-bit patterns; i1 elements are bytes 0 or 1. */
typedef struct tsr_array {
  tsr_dtype_t dtype;
  uint32_t rank;
  int64_t dims[TSR_MAX_RANK];
  void *data;
} tsr_array_t;

/* Allocates a zero-filled array; fails with TSR_OUT_OF_MEMORY on overflow. */
TSR_API tsr_status_t tsr_array_initialize(tsr_dtype_t dtype, uint32_t rank,
                                  const int64_t *dims, tsr_array_t *out_array)
    TSR_MUST_USE;
TSR_API void tsr_array_deinitialize(tsr_array_t *array);
TSR_API int64_t tsr_array_element_count(const tsr_array_t *array);
TSR_API size_t tsr_array_byte_size(const tsr_array_t *array);

/* ---- .npy files -------------------------------------------------------- */

/* Reads a .npy file (format 1.0-3.0, little-endian, C order) into a new array.
 * dtypes: <f4 f32, <i4 i32, <u4 u32, <i2 i16, <u2 u16, |i1 i8, |u1 u8, |b1 i1,
 * <f2 f16, and bf16 stored as <V2 or <u2 when `expect` asks for bf16.
 * `expect_dtype` < 0 accepts whatever the file holds; otherwise a u2/V2 file is
 * read as bf16 if asked for bf16, and any other mismatch is TSR_FORMAT_ERROR.
 * Errors name the file and say what was expected and found. */
TSR_API tsr_status_t tsr_npy_read(const char *path, int expect_dtype,
                          tsr_array_t *out_array) TSR_MUST_USE;
/* Writes `array` to `path` atomically (temporary file + rename): on failure
 * nothing is left at `path`. bf16 is written as <V2 (numpy has no bf16).
 * A regular file keeps its mode; a symlink is followed and the file it names
 * replaced (the link stays), unless it lies in a sticky world-writable
 * directory and belongs neither to the caller nor to the directory's owner
 * (then it is an error); a character device or FIFO (/dev/stdout, a pipe)
 * is written directly (a FIFO planted so is an error too); a directory,
 * socket or block device is an error. */
TSR_API tsr_status_t tsr_npy_write(const char *path, const tsr_array_t *array)
    TSR_MUST_USE;
/* Writes arrays[i] to paths[i] as tsr_npy_write does, all or nothing: every
 * file is written to its temporary file first, devices and FIFOs next, and
 * the files are renamed into place only when all of them are complete. On
 * failure no file is replaced or created (what a device or FIFO received
 * cannot be taken back). Two paths naming the same file are
 * TSR_INVALID_ARGUMENT. */
TSR_API tsr_status_t tsr_npy_write_all(const char *const *paths,
                                       const tsr_array_t *const *arrays,
                                       size_t count) TSR_MUST_USE;

/* ---- Allocators ------------------------------------------------------------ */

/* Where tessera's own memory comes from (the kernel's buffers, prepared
 * programs, results, ...), set per context (tessera/api.h). `allocate`
 * returns `size` bytes aligned to `alignment` (a power of two, at least 16)
 * or NULL; `release` gets back a block with the size it was asked for. Both
 * may be called from any thread, also after the context that used them is
 * destroyed (a run result outlives its context): they must stay valid until
 * every object allocated through them is freed. Libraries tessera uses
 * (LLVM, zstd, libsodium) keep their own allocation. */
typedef void *(*tsr_allocator_allocate_fn)(void *user, size_t size, size_t alignment);
typedef void (*tsr_allocator_release_fn)(void *user, void *block, size_t size);
typedef struct tsr_allocator {
  tsr_allocator_allocate_fn allocate; /* NULL: the process's malloc */
  tsr_allocator_release_fn release;   /* required with allocate */
  void *user;
} tsr_allocator_t;

/* ---- Files --------------------------------------------------------------- */

/* Writes `size` bytes to `path` with the rules of tsr_npy_write (temporary
 * file + rename for a regular or new file, keeping its mode; links planted
 * in sticky directories refused; devices and FIFOs written directly).
 * docs/cli.md, "Outputs". */
TSR_API tsr_status_t tsr_file_write(const char *path, const void *data,
                                    size_t size) TSR_MUST_USE;

#ifdef __cplusplus
}
#endif
#endif /* TESSERA_BASE_H */
