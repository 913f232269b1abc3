/* .npy file I/O: reads format 1.0/2.0/3.0 files (little-endian, C order) of
 * every tessera dtype into tsr_array_t, and writes arrays atomically through
 * base/outfile.c (temporary file beside the target, fsync, rename). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base_internal.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "base/npy.c copies element bytes as they are: it needs a little-endian host"
#endif

/* The descriptor each dtype is written with. bf16 has no numpy dtype: it is
 * written as raw 2-byte voids (ml_dtypes users view it as bfloat16); the
 * ml_dtypes 1-byte types (int4, uint4, int2, uint2, float8_e4m3fn,
 * float8_e5m2: one value per byte) likewise as raw 1-byte voids. */
static const char *const npy_descr[TSR_DTYPE_COUNT] = {
    [TSR_DTYPE_F32] = "<f4", [TSR_DTYPE_BF16] = "<V2", [TSR_DTYPE_F16] = "<f2",
    [TSR_DTYPE_I32] = "<i4", [TSR_DTYPE_U32] = "<u4",  [TSR_DTYPE_I16] = "<i2",
    [TSR_DTYPE_U16] = "<u2", [TSR_DTYPE_I8] = "|i1",   [TSR_DTYPE_U8] = "|u1",
    [TSR_DTYPE_I1] = "|b1",  [TSR_DTYPE_I4] = "|V1",   [TSR_DTYPE_U4] = "|V1",
    [TSR_DTYPE_I2] = "|V1",  [TSR_DTYPE_U2] = "|V1",   [TSR_DTYPE_F8E4M3FN] = "|V1",
    [TSR_DTYPE_F8E5M2] = "|V1",
};
_Static_assert(TSR_ARRAY_SIZE(npy_descr) == TSR_DTYPE_COUNT,
               "one .npy descriptor per dtype");

#define NPY_SUPPORTED_LIST                                                     \
  "<f4 f32, <V2 (or <u2 read as bf16) bf16, <f2 f16, <i4 i32, <u4 u32, "       \
  "<i2 i16, <u2 u16, |i1 i8, |u1 u8, |b1 i1, |V1 (read as the expected "   \
  "one of) i4 u4 i2 u2 f8e4m3fn f8e5m2"

enum {
  NPY_MAGIC_LEN = 6,
  NPY_MAX_HEADER = 1 << 20, /* numpy itself refuses headers over 10000 bytes */
  NPY_ALIGN = 64,
};
static const char npy_magic[NPY_MAGIC_LEN] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};

/* What a file's descriptor says, before it is matched against a request. */
typedef struct npy_kind {
  tsr_dtype_t dtype; /* what the bytes hold; V2 maps to bf16, V1 to u8 */
  bool is_void2;     /* written as V2 (raw 2 bytes) */
  bool is_void1;     /* written as V1 (raw bytes of an ml_dtypes 1-byte type) */
} npy_kind_t;

/* Maps a descriptor such as "<f4" or "|b1" to a dtype. `descr` is the text
 * between the quotes. */
static tsr_status_t parse_descr(const char *path, const char *descr,
                                npy_kind_t *out_kind) {
  size_t len = strlen(descr);
  char order = len ? descr[0] : 0;
  if (len < 3 || !strchr("<>|=", order))
    return TSR_STATUS(TSR_FORMAT_ERROR,
                      "%s: dtype '%s' is not supported (tessera dtypes: %s)",
                      path, descr, NPY_SUPPORTED_LIST);
  char kind = descr[1];
  const char *digits = descr + 2;
  int size = 0;
  for (const char *p = digits; *p; p++) {
    if (*p < '0' || *p > '9' || size > 1000) {
      size = -1;
      break;
    }
    size = size * 10 + (*p - '0');
  }
  static const struct {
    char kind;
    int size;
    tsr_dtype_t dtype;
  } kinds[] = {
      {'f', 4, TSR_DTYPE_F32}, {'f', 2, TSR_DTYPE_F16}, {'i', 4, TSR_DTYPE_I32},
      {'u', 4, TSR_DTYPE_U32}, {'i', 2, TSR_DTYPE_I16}, {'u', 2, TSR_DTYPE_U16},
      {'i', 1, TSR_DTYPE_I8},  {'u', 1, TSR_DTYPE_U8},  {'b', 1, TSR_DTYPE_I1},
      {'V', 2, TSR_DTYPE_BF16}, {'V', 1, TSR_DTYPE_U8},
  };
  for (size_t i = 0; i < TSR_ARRAY_SIZE(kinds); i++) {
    if (kinds[i].kind != kind || kinds[i].size != size) continue;
    /* Byte order matters only for multi-byte numbers; a void is raw bytes
     * whose order is the writer's (little-endian bf16 bits by convention). */
    if (order == '>' && size > 1 && kind != 'V')
      return TSR_STATUS(TSR_FORMAT_ERROR,
                        "%s: dtype %s is big-endian; tessera reads "
                        "little-endian .npy files only (convert with "
                        "a.astype('<%c%d'))",
                        path, descr, kind, size);
    out_kind->dtype = kinds[i].dtype;
    out_kind->is_void2 = kind == 'V' && size == 2;
    out_kind->is_void1 = kind == 'V' && size == 1;
    return NULL;
  }
  return TSR_STATUS(TSR_FORMAT_ERROR,
                    "%s: dtype %s is not supported (tessera dtypes: %s)", path,
                    descr, NPY_SUPPORTED_LIST);
}

/* ---- The header dictionary -------------------------------------------------
 * The header is a Python dict literal, e.g.
 *   {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
 * This parser accepts exactly the keys numpy writes, with either quote style,
 * arbitrary whitespace and an optional trailing comma. */

typedef struct header_parser {
  const char *path;
  const char *text;
  size_t size;
  size_t pos;
} header_parser_t;

typedef struct npy_header {
  char descr[32];
  bool fortran_order;
  uint32_t rank;
  int64_t dims[TSR_MAX_RANK];
} npy_header_t;

static void skip_space(header_parser_t *p) {
  while (p->pos < p->size && strchr(" \t\r\n", p->text[p->pos]) &&
         p->text[p->pos] != 0)
    p->pos++;
}

static int peek(header_parser_t *p) {
  return p->pos < p->size ? (unsigned char)p->text[p->pos] : -1;
}

static tsr_status_t header_error(header_parser_t *p, const char *expected) {
  char found[16];
  if (p->pos >= p->size)
    snprintf(found, sizeof found, "end of header");
  else if (p->text[p->pos] >= 32 && p->text[p->pos] < 127)
    snprintf(found, sizeof found, "'%c'", p->text[p->pos]);
  else
    snprintf(found, sizeof found, "byte 0x%02x", (unsigned char)p->text[p->pos]);
  return TSR_STATUS(TSR_FORMAT_ERROR,
                    "%s: malformed .npy header: expected %s at offset %zu of "
                    "the header, found %s",
                    p->path, expected, p->pos, found);
}

static tsr_status_t expect_char(header_parser_t *p, char c, const char *what) {
  skip_space(p);
  if (peek(p) != (unsigned char)c) return header_error(p, what);
  p->pos++;
  return NULL;
}

/* A quoted string without escapes (numpy never writes any in a header). */
static tsr_status_t parse_string(header_parser_t *p, char *out, size_t out_size) {
  skip_space(p);
  int quote = peek(p);
  if (quote != '\'' && quote != '"') return header_error(p, "a quoted string");
  size_t start = ++p->pos;
  while (p->pos < p->size && p->text[p->pos] != quote) {
    if (p->text[p->pos] == '\\' || p->text[p->pos] == '\n')
      return header_error(p, "a plain string");
    p->pos++;
  }
  if (p->pos >= p->size) return header_error(p, "a closing quote");
  size_t len = p->pos - start;
  p->pos++;
  if (len >= out_size)
    return TSR_STATUS(TSR_FORMAT_ERROR,
                      "%s: malformed .npy header: string of %zu characters "
                      "where at most %zu are expected",
                      p->path, len, out_size - 1);
  memcpy(out, p->text + start, len);
  out[len] = 0;
  return NULL;
}

static bool match_word(header_parser_t *p, const char *word) {
  size_t n = strlen(word);
  if (p->size - p->pos < n || memcmp(p->text + p->pos, word, n) != 0)
    return false;
  p->pos += n;
  return true;
}

static tsr_status_t parse_bool(header_parser_t *p, bool *out) {
  skip_space(p);
  if (match_word(p, "True")) {
    *out = true;
  } else if (match_word(p, "False")) {
    *out = false;
  } else {
    return header_error(p, "True or False");
  }
  return NULL;
}

static tsr_status_t parse_shape(header_parser_t *p, npy_header_t *h) {
  TSR_RETURN_IF_ERROR(expect_char(p, '(', "'(' opening the shape"));
  h->rank = 0;
  for (;;) {
    skip_space(p);
    if (peek(p) == ')') {
      p->pos++;
      return NULL;
    }
    if (peek(p) < '0' || peek(p) > '9')
      return header_error(p, "a non-negative dimension or ')'");
    int64_t v = 0;
    while (peek(p) >= '0' && peek(p) <= '9') {
      if (v > (INT64_MAX - 9) / 10)
        return TSR_STATUS(TSR_FORMAT_ERROR,
                          "%s: malformed .npy header: dimension too large",
                          p->path);
      v = v * 10 + (p->text[p->pos++] - '0');
    }
    if (peek(p) == 'L') p->pos++; /* Python 2 long literals */
    if (h->rank == TSR_MAX_RANK)
      return TSR_STATUS(TSR_FORMAT_ERROR,
                        "%s: array has more than %d dimensions; tessera "
                        "arrays have rank 0 to %d",
                        p->path, TSR_MAX_RANK, TSR_MAX_RANK);
    h->dims[h->rank++] = v;
    skip_space(p);
    if (peek(p) == ',') {
      p->pos++;
    } else if (peek(p) != ')') {
      return header_error(p, "',' or ')' in the shape");
    }
  }
}

static tsr_status_t parse_header(const char *path, const char *text,
                                 size_t size, npy_header_t *out) {
  header_parser_t p = {path, text, size, 0};
  bool seen_descr = false, seen_order = false, seen_shape = false;
  memset(out, 0, sizeof *out);
  TSR_RETURN_IF_ERROR(expect_char(&p, '{', "'{' opening the header dict"));
  for (;;) {
    skip_space(&p);
    if (peek(&p) == '}') {
      p.pos++;
      break;
    }
    char key[32];
    TSR_RETURN_IF_ERROR(parse_string(&p, key, sizeof key));
    TSR_RETURN_IF_ERROR(expect_char(&p, ':', "':' after a key"));
    skip_space(&p);
    bool *seen;
    if (strcmp(key, "descr") == 0) {
      seen = &seen_descr;
      if (peek(&p) == '[')
        return TSR_STATUS(TSR_FORMAT_ERROR,
                          "%s: structured dtypes are not supported (tessera "
                          "dtypes: %s)",
                          path, NPY_SUPPORTED_LIST);
      TSR_RETURN_IF_ERROR(parse_string(&p, out->descr, sizeof out->descr));
    } else if (strcmp(key, "fortran_order") == 0) {
      seen = &seen_order;
      TSR_RETURN_IF_ERROR(parse_bool(&p, &out->fortran_order));
    } else if (strcmp(key, "shape") == 0) {
      seen = &seen_shape;
      TSR_RETURN_IF_ERROR(parse_shape(&p, out));
    } else {
      return TSR_STATUS(TSR_FORMAT_ERROR,
                        "%s: malformed .npy header: unexpected key '%s' "
                        "(expected 'descr', 'fortran_order', 'shape')",
                        path, key);
    }
    if (*seen)
      return TSR_STATUS(TSR_FORMAT_ERROR,
                        "%s: malformed .npy header: key '%s' appears twice",
                        path, key);
    *seen = true;
    skip_space(&p);
    if (peek(&p) == ',') {
      p.pos++;
    } else if (peek(&p) != '}') {
      return header_error(&p, "',' or '}' after a value");
    }
  }
  skip_space(&p);
  if (p.pos != p.size) return header_error(&p, "only padding after the dict");
  if (!seen_descr || !seen_order || !seen_shape)
    return TSR_STATUS(TSR_FORMAT_ERROR,
                      "%s: malformed .npy header: missing key '%s'", path,
                      !seen_descr ? "descr"
                      : !seen_order ? "fortran_order"
                                    : "shape");
  return NULL;
}

/* ---- Reading ------------------------------------------------------------- */

static const char *dtype_descr_hint(tsr_dtype_t dtype) {
  return dtype == TSR_DTYPE_BF16 ? "<V2, or <u2 holding bf16 bits"
         : npy_descr[dtype][1] == 'V' ? "|V1, raw bytes of the ml_dtypes type"
                                      : npy_descr[dtype];
}

/* Reads up to n bytes; returns how many were read (short only at EOF/error). */
static size_t read_fully(FILE *f, void *buf, size_t n) {
  size_t got = 0;
  while (got < n) {
    size_t chunk = TSR_MIN(n - got, (size_t)1 << 30);
    size_t r = fread((char *)buf + got, 1, chunk, f);
    got += r;
    if (r < chunk) break;
  }
  return got;
}

static tsr_status_t truncated(const char *path, size_t claimed, size_t found,
                              bool stream) {
  return TSR_STATUS(TSR_FORMAT_ERROR,
                    "%s: truncated: header says %zu bytes of data, %s %zu", path,
                    claimed, stream ? "the stream ended after" : "file has", found);
}

/* Reads a stream's data as it arrives into a buffer that grows with it, so
 * that a header claiming more than the stream holds costs only what it
 * holds. The buffer is 64-byte aligned and ends exactly at `data_bytes`, so
 * it becomes the array's data. */
static tsr_status_t read_stream_data(const char *path, FILE *f, size_t data_bytes,
                                     void **out_data) {
  size_t cap = 0, got = 0;
  unsigned char *buf = NULL;
  while (got < data_bytes) {
    if (got == cap) {
      size_t grown = TSR_MIN(TSR_MAX(cap * 2, (size_t)1 << 20), data_bytes);
      unsigned char *next = tsr_aligned_alloc(64, grown);
      if (!next) {
        tsr_free(buf);
        return TSR_OOM_BYTES(grown, "the data of %s (%zu bytes read so far)", path, got);
      }
      if (got) memcpy(next, buf, got);
      tsr_free(buf);
      buf = next;
      cap = grown;
    }
    size_t r = read_fully(f, buf + got, cap - got);
    got += r;
    if (got < cap) break; /* end of the stream, or an error */
  }
  if (ferror(f) || got < data_bytes) {
    int err = errno;
    tsr_free(buf);
    return ferror(f) ? TSR_STATUS(TSR_IO_ERROR, "%s: read error: %s", path, strerror(err))
                     : truncated(path, data_bytes, got, true);
  }
  *out_data = buf;
  return NULL;
}

/* Reads the array's data, checking the size the header claims against the
 * bytes there are before allocating it: a regular file's size is known; a
 * pipe or device is read as its bytes arrive. */
static tsr_status_t read_data(const char *path, FILE *f, tsr_dtype_t dtype,
                              const npy_header_t *h, size_t data_bytes,
                              tsr_array_t *out_array) {
  struct stat st;
  bool regular = fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode);
  if (regular) {
    off_t pos = ftello(f);
    size_t have = pos >= 0 && st.st_size > pos ? (size_t)(st.st_size - pos) : 0;
    if (have < data_bytes) return truncated(path, data_bytes, have, false);
  } else if (data_bytes) {
    void *data = NULL;
    TSR_RETURN_IF_ERROR(read_stream_data(path, f, data_bytes, &data));
    memset(out_array, 0, sizeof *out_array);
    out_array->dtype = dtype;
    out_array->rank = h->rank;
    memcpy(out_array->dims, h->dims, h->rank * sizeof h->dims[0]);
    out_array->data = data;
    return NULL;
  }
  tsr_array_t array;
  TSR_RETURN_IF_ERROR(tsr_status_annotate(
      tsr_array_initialize(dtype, h->rank, h->dims, &array), "%s", path));
  size_t got = read_fully(f, array.data, data_bytes);
  if (ferror(f) || got < data_bytes) { /* the file shrank meanwhile */
    int err = errno;
    tsr_array_deinitialize(&array);
    return ferror(f) ? TSR_STATUS(TSR_IO_ERROR, "%s: read error: %s", path, strerror(err))
                     : truncated(path, data_bytes, got, false);
  }
  *out_array = array;
  return NULL;
}

static tsr_status_t read_open_file(const char *path, FILE *f, int expect_dtype,
                                   tsr_array_t *out_array) {
  unsigned char pre[12];
  size_t got = read_fully(f, pre, 10);
  if (ferror(f))
    return TSR_STATUS(TSR_IO_ERROR, "%s: read error: %s", path, strerror(errno));
  if (got < NPY_MAGIC_LEN || memcmp(pre, npy_magic, NPY_MAGIC_LEN) != 0)
    return TSR_STATUS(TSR_FORMAT_ERROR,
                      "%s: not a .npy file: expected the magic bytes "
                      "\\x93NUMPY at the start",
                      path);
  if (got < 10)
    return TSR_STATUS(TSR_FORMAT_ERROR,
                      "%s: truncated: file ends inside the .npy preamble "
                      "(%zu bytes)",
                      path, got);
  unsigned major = pre[6], minor = pre[7];
  if (major < 1 || major > 3 || minor != 0)
    return TSR_STATUS(TSR_FORMAT_ERROR,
                      "%s: .npy format version %u.%u is not supported "
                      "(expected 1.0, 2.0 or 3.0)",
                      path, major, minor);
  size_t header_len;
  if (major == 1) {
    header_len = (size_t)pre[8] | (size_t)pre[9] << 8;
  } else {
    if (read_fully(f, pre + 10, 2) < 2)
      return TSR_STATUS(TSR_FORMAT_ERROR,
                        "%s: truncated: file ends inside the .npy preamble",
                        path);
    header_len = (size_t)pre[8] | (size_t)pre[9] << 8 |
                 (size_t)pre[10] << 16 | (size_t)pre[11] << 24;
  }
  if (header_len > NPY_MAX_HEADER)
    return TSR_STATUS(TSR_FORMAT_ERROR,
                      "%s: .npy header length %zu exceeds the limit of %d bytes",
                      path, header_len, NPY_MAX_HEADER);
  char *header = tsr_malloc(header_len + 1);
  if (!header) return TSR_OOM();
  got = read_fully(f, header, header_len);
  if (got < header_len) {
    tsr_free(header);
    return TSR_STATUS(TSR_FORMAT_ERROR,
                      "%s: truncated: header says it is %zu bytes long, file "
                      "has %zu after the preamble",
                      path, header_len, got);
  }
  header[header_len] = 0;
  npy_header_t h;
  tsr_status_t status = parse_header(path, header, header_len, &h);
  tsr_free(header);
  if (status) return status;

  npy_kind_t kind = {TSR_DTYPE_F32, false, false};
  TSR_RETURN_IF_ERROR(parse_descr(path, h.descr, &kind));
  tsr_dtype_t dtype = kind.dtype;
  if (expect_dtype >= 0) {
    if (expect_dtype >= TSR_DTYPE_COUNT)
      return TSR_STATUS(TSR_INVALID_ARGUMENT, "bad expected dtype %d",
                        expect_dtype);
    tsr_dtype_t want = (tsr_dtype_t)expect_dtype;
    const bool want_void1 = npy_descr[want][1] == 'V' && tsr_dtype_size(want) == 1;
    bool ok = (kind.dtype == want && !kind.is_void1) ||
              (want == TSR_DTYPE_BF16 && kind.dtype == TSR_DTYPE_U16) ||
              (want_void1 && kind.is_void1);
    if (!ok)
      return TSR_STATUS(TSR_FORMAT_ERROR,
                        "%s: dtype %s (%s) does not match: expected %s (%s)",
                        path, h.descr,
                        kind.is_void2   ? "raw 2-byte values, read as bf16"
                        : kind.is_void1 ? "raw 1-byte values"
                                        : tsr_dtype_name(kind.dtype),
                        tsr_dtype_name(want), dtype_descr_hint(want));
    dtype = want;
  }

  /* Fortran order is the same layout as C order when at most one dimension
   * has more than one element; otherwise the data would need transposing. */
  if (h.fortran_order) {
    uint32_t big = 0;
    for (uint32_t i = 0; i < h.rank; i++) big += h.dims[i] > 1;
    if (big > 1)
      return TSR_STATUS(TSR_FORMAT_ERROR,
                        "%s: array is in Fortran order; tessera reads C-order "
                        ".npy files only (save np.ascontiguousarray(a))",
                        path);
  }

  size_t data_bytes = tsr_dtype_size(dtype);
  for (uint32_t i = 0; i < h.rank; i++)
    if (!tsr_mul_size(data_bytes, (size_t)h.dims[i], &data_bytes) ||
        data_bytes > (size_t)INT64_MAX)
      return TSR_STATUS(TSR_FORMAT_ERROR,
                        "%s: shape is too large: its size overflows", path);

  tsr_array_t array;
  TSR_RETURN_IF_ERROR(read_data(path, f, dtype, &h, data_bytes, &array));
  /* Anything after the data means the header does not describe the file. */
  size_t extra = 0;
  char scratch[4096];
  size_t r;
  while ((r = fread(scratch, 1, sizeof scratch, f)) > 0) extra += r;
  if (extra) {
    tsr_array_deinitialize(&array);
    return TSR_STATUS(TSR_FORMAT_ERROR,
                      "%s: header says %zu bytes of data, file has %zu (%zu "
                      "unexpected trailing bytes)",
                      path, data_bytes, data_bytes + extra, extra);
  }
  if (dtype == TSR_DTYPE_I1) { /* tessera booleans are exactly 0 or 1 */
    unsigned char *b = array.data;
    for (size_t i = 0; i < data_bytes; i++) b[i] = b[i] != 0;
  }
  *out_array = array;
  return NULL;
}

tsr_status_t tsr_npy_read(const char *path, int expect_dtype,
                          tsr_array_t *out_array) {
  if (!path || !out_array)
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "tsr_npy_read: NULL argument");
  FILE *f = fopen(path, "rb");
  if (!f)
    return TSR_STATUS(TSR_IO_ERROR, "%s: cannot open: %s", path,
                      strerror(errno));
  struct stat st;
  if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
    fclose(f);
    return TSR_STATUS(TSR_IO_ERROR, "%s: is a directory, not a .npy file",
                      path);
  }
  tsr_status_t status = read_open_file(path, f, expect_dtype, out_array);
  fclose(f);
  return status;
}

/* ---- Writing ------------------------------------------------------------- */

/* The header text numpy would write, padded with spaces and a final newline
 * so that preamble + header is a multiple of 64 bytes. */
static tsr_status_t build_header(const tsr_array_t *array, tsr_strbuf_t *sb,
                                 unsigned *out_major) {
  tsr_strbuf_printf(sb, "{'descr': '%s', 'fortran_order': False, 'shape': (",
                    npy_descr[array->dtype]);
  for (uint32_t i = 0; i < array->rank; i++)
    tsr_strbuf_printf(sb, "%s%lld", i ? ", " : "", (long long)array->dims[i]);
  tsr_strbuf_puts(sb, array->rank == 1 ? ",), }" : "), }");
  if (sb->failed) return TSR_OOM();
  size_t preamble = 10;
  size_t total = preamble + sb->size + 1;
  size_t padded = (total + NPY_ALIGN - 1) / NPY_ALIGN * NPY_ALIGN;
  if (padded - preamble > 0xffff) { /* needs version 2.0: 4-byte length */
    preamble = 12;
    total = preamble + sb->size + 1;
    padded = (total + NPY_ALIGN - 1) / NPY_ALIGN * NPY_ALIGN;
  }
  for (size_t i = total; i < padded; i++) tsr_strbuf_puts(sb, " ");
  tsr_strbuf_puts(sb, "\n");
  if (sb->failed) return TSR_OOM();
  *out_major = preamble == 10 ? 1 : 2;
  return NULL;
}

static tsr_status_t check_array(const tsr_array_t *array) {
  size_t bytes;
  TSR_RETURN_IF_ERROR(tsr_array_shape_bytes(array->dtype, array->rank, array->dims, &bytes));
  if (bytes && !array->data)
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "array has no data");
  return NULL;
}

/* The preamble and header of one array, built before its file is opened. */
typedef struct npy_out {
  const tsr_array_t *array;
  unsigned char pre[12];
  size_t pre_len;
  tsr_strbuf_t header;
} npy_out_t;

static tsr_status_t npy_out_initialize(npy_out_t *o, const tsr_array_t *array) {
  o->array = array;
  tsr_strbuf_initialize(&o->header);
  if (!array) return TSR_STATUS(TSR_INVALID_ARGUMENT, "tsr_npy_write: NULL array");
  TSR_RETURN_IF_ERROR(check_array(array));
  unsigned major = 1;
  TSR_RETURN_IF_ERROR(build_header(array, &o->header, &major));
  memcpy(o->pre, npy_magic, NPY_MAGIC_LEN);
  o->pre[6] = (unsigned char)major;
  o->pre[7] = 0;
  o->pre_len = major == 1 ? 10 : 12;
  for (size_t i = 8; i < o->pre_len; i++)
    o->pre[i] = (unsigned char)(o->header.size >> (8 * (i - 8)));
  return NULL;
}

static tsr_status_t fill_npy(void *ctx, size_t index, tsr_outfile_t *file) {
  const npy_out_t *o = (const npy_out_t *)ctx + index;
  TSR_RETURN_IF_ERROR(tsr_outfile_write(file, o->pre, o->pre_len));
  TSR_RETURN_IF_ERROR(tsr_outfile_write(file, o->header.data, o->header.size));
  return tsr_outfile_write(file, o->array->data, tsr_array_byte_size(o->array));
}

tsr_status_t tsr_npy_write_all(const char *const *paths,
                               const tsr_array_t *const *arrays, size_t count) {
  if (count && (!paths || !arrays))
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "tsr_npy_write_all: NULL argument");
  for (size_t i = 0; i < count; i++)
    if (!paths[i])
      return TSR_STATUS(TSR_INVALID_ARGUMENT, "tsr_npy_write_all: NULL path %zu", i);
  npy_out_t *outs = tsr_calloc(count + 1, sizeof *outs);
  if (!outs) return TSR_OOM();
  tsr_status_t status = NULL;
  size_t ready = 0;
  for (; ready < count && !status; ready++)
    status = tsr_status_annotate(npy_out_initialize(&outs[ready], arrays[ready]), "%s",
                                 paths[ready]);
  if (!status) status = tsr_outfiles_write(paths, count, fill_npy, outs);
  for (size_t i = 0; i < ready; i++) tsr_strbuf_deinitialize(&outs[i].header);
  tsr_free(outs);
  return status;
}

tsr_status_t tsr_npy_write(const char *path, const tsr_array_t *array) {
  if (!path || !array)
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "tsr_npy_write: NULL argument");
  return tsr_npy_write_all(&path, &array, 1);
}
