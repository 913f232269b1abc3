/* Unit tests for base/npy.c and base/outfile.c: round trips of every dtype
 * and rank, the three header versions, every malformed-file error, headers
 * that claim more data than there is (files and pipes), atomic and
 * all-or-nothing writes, and writes into devices, FIFOs and symlinks. */
#define _XOPEN_SOURCE 700 /* mknod, S_IFCHR */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/base_internal.h"
#include "tests/harness.h"

static char tmp_dir[2048];

/* A path inside the test's temporary directory (static buffer rotation). */
static const char *tmp_path(const char *name) {
  static char bufs[4][4096];
  static int next;
  char *p = bufs[next++ % 4];
  snprintf(p, 4096, "%s/%s", tmp_dir, name);
  return p;
}

static void write_bytes(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f) return;
  fwrite(data, 1, n, f);
  fclose(f);
}

/* Writes a .npy file by hand: version `major`, header dict text `dict`
 * (padded like numpy), then `data`. */
static void write_npy(const char *path, unsigned major, const char *dict,
                      const void *data, size_t data_size) {
  size_t pre = major == 1 ? 10 : 12;
  size_t dict_len = strlen(dict);
  size_t total = pre + dict_len + 1;
  size_t padded = (total + 63) / 64 * 64;
  size_t header_len = padded - pre;
  unsigned char *buf = malloc(padded + data_size);
  memcpy(buf, "\x93NUMPY", 6);
  buf[6] = (unsigned char)major;
  buf[7] = 0;
  for (size_t i = 8; i < pre; i++)
    buf[i] = (unsigned char)(header_len >> (8 * (i - 8)));
  memcpy(buf + pre, dict, dict_len);
  memset(buf + pre + dict_len, ' ', padded - pre - dict_len - 1);
  buf[padded - 1] = '\n';
  if (data_size) memcpy(buf + padded, data, data_size);
  write_bytes(path, buf, padded + data_size);
  free(buf);
}

static char *slurp(const char *path, size_t *out_size) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = malloc((size_t)n + 1);
  size_t got = fread(buf, 1, (size_t)n, f);
  fclose(f);
  buf[got] = 0;
  *out_size = got;
  return buf;
}

/* Number of directory entries (besides . and ..) whose name starts with
 * `prefix`. */
static int count_entries(const char *dir, const char *prefix) {
  DIR *d = opendir(dir);
  if (!d) return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) n++;
  }
  closedir(d);
  return n;
}

/* Reads `path` expecting failure with `code` and a message that names the
 * file and contains `needle`. */
static void expect_read_error(const char *path, int expect_dtype,
                              tsr_status_code_t code, const char *needle) {
  tsr_array_t a;
  tsr_status_t s = tsr_npy_read(path, expect_dtype, &a);
  if (tsr_status_code(s) != code) {
    TSR_FAIL_AT("%s: expected %s, got %s: %s", path, tsr_status_code_name(code),
                tsr_status_code_name(tsr_status_code(s)), tsr_status_message(s));
  } else {
    const char *msg = tsr_status_message(s);
    if (!strstr(msg, path)) TSR_FAIL_AT("message does not name the file: %s", msg);
    if (needle && !strstr(msg, needle))
      TSR_FAIL_AT("message lacks '%s': %s", needle, msg);
  }
  if (!s) tsr_array_deinitialize(&a);
  tsr_status_free(s);
}

/* Fills an array with a recognisable byte pattern valid for its dtype. */
static void fill_pattern(tsr_array_t *a) {
  unsigned char *b = a->data;
  size_t n = tsr_array_byte_size(a);
  for (size_t i = 0; i < n; i++)
    b[i] = a->dtype == TSR_DTYPE_I1 ? (unsigned char)(i % 3 == 0)
                                    : (unsigned char)(i * 37 + 11);
}

TSR_TEST(round_trip_every_dtype_and_rank) {
  static const int64_t dims[TSR_MAX_RANK] = {3, 2, 4, 1, 2, 3};
  for (int d = 0; d < TSR_DTYPE_COUNT; d++) {
    for (uint32_t rank = 0; rank <= TSR_MAX_RANK; rank++) {
      tsr_array_t a, b;
      TSR_CHECK_OK(tsr_array_initialize((tsr_dtype_t)d, rank, dims, &a));
      fill_pattern(&a);
      const char *path = tmp_path("rt.npy");
      TSR_CHECK_OK(tsr_npy_write(path, &a));
      /* read back both ways: as whatever the file holds, and as asked */
      for (int pass = 0; pass < 2; pass++) {
        tsr_status_t s = tsr_npy_read(path, pass ? d : -1, &b);
        if (s) {
          TSR_FAIL_AT("%s rank %u: %s", tsr_dtype_name((tsr_dtype_t)d), rank,
                      tsr_status_message(s));
          tsr_status_free(s);
          continue;
        }
        /* the ml_dtypes 1-byte types are written as raw bytes (|V1): read
         * without a dtype asked for, they are u8 */
        const bool void1 = d >= TSR_DTYPE_I4;
        TSR_CHECK_EQ_INT(b.dtype, pass || !void1 ? d : TSR_DTYPE_U8);
        TSR_CHECK_EQ_INT(b.rank, rank);
        for (uint32_t i = 0; i < rank; i++) TSR_CHECK_EQ_INT(b.dims[i], dims[i]);
        TSR_CHECK(memcmp(a.data, b.data, tsr_array_byte_size(&a)) == 0);
        tsr_array_deinitialize(&b);
      }
      /* the header is padded so the data starts 64-byte aligned */
      size_t size;
      char *bytes = slurp(path, &size);
      TSR_CHECK(bytes && size >= tsr_array_byte_size(&a));
      if (bytes) {
        size_t data_offset = size - tsr_array_byte_size(&a);
        TSR_CHECK_EQ_INT(data_offset % 64, 0);
        TSR_CHECK_EQ_INT(bytes[data_offset - 1], '\n');
        TSR_CHECK_EQ_INT(bytes[6], 1);
      }
      free(bytes);
      tsr_array_deinitialize(&a);
    }
  }
}

TSR_TEST(header_text_matches_numpy) {
  int64_t dims[2] = {2, 3};
  tsr_array_t a;
  TSR_CHECK_OK(tsr_array_initialize(TSR_DTYPE_F32, 2, dims, &a));
  TSR_CHECK_OK(tsr_npy_write(tmp_path("h.npy"), &a));
  size_t size;
  char *bytes = slurp(tmp_path("h.npy"), &size);
  const char *expect = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  TSR_CHECK(bytes && strncmp(bytes + 10, expect, strlen(expect)) == 0);
  TSR_CHECK_EQ_INT(size, 128 + 24);
  TSR_CHECK_EQ_INT((unsigned char)bytes[8] | (unsigned char)bytes[9] << 8, 118);
  free(bytes);
  tsr_array_deinitialize(&a);

  /* rank 1 keeps Python's one-element tuple comma; bf16 is <V2 */
  int64_t n = 5;
  TSR_CHECK_OK(tsr_array_initialize(TSR_DTYPE_BF16, 1, &n, &a));
  TSR_CHECK_OK(tsr_npy_write(tmp_path("h.npy"), &a));
  bytes = slurp(tmp_path("h.npy"), &size);
  expect = "{'descr': '<V2', 'fortran_order': False, 'shape': (5,), }";
  TSR_CHECK(bytes && strncmp(bytes + 10, expect, strlen(expect)) == 0);
  free(bytes);
  tsr_array_deinitialize(&a);

  /* rank 0 */
  TSR_CHECK_OK(tsr_array_initialize(TSR_DTYPE_I1, 0, NULL, &a));
  TSR_CHECK_OK(tsr_npy_write(tmp_path("h.npy"), &a));
  bytes = slurp(tmp_path("h.npy"), &size);
  expect = "{'descr': '|b1', 'fortran_order': False, 'shape': (), }";
  TSR_CHECK(bytes && strncmp(bytes + 10, expect, strlen(expect)) == 0);
  TSR_CHECK_EQ_INT(size, 129);
  free(bytes);
  tsr_array_deinitialize(&a);
}

TSR_TEST(header_versions_1_2_3) {
  const int32_t data[6] = {1, -2, 3, -4, 5, -6};
  const char *dict = "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }";
  for (unsigned major = 1; major <= 3; major++) {
    const char *path = tmp_path("v.npy");
    write_npy(path, major, dict, data, sizeof data);
    tsr_array_t a = {0}; /* a.data stays NULL if the read fails */
    TSR_CHECK_OK(tsr_npy_read(path, TSR_DTYPE_I32, &a));
    if (a.data) {
      TSR_CHECK_EQ_INT(a.rank, 2);
      TSR_CHECK_EQ_INT(a.dims[1], 3);
      TSR_CHECK(memcmp(a.data, data, sizeof data) == 0);
      tsr_array_deinitialize(&a);
    }
  }
  write_npy(tmp_path("v4.npy"), 4, dict, data, sizeof data);
  expect_read_error(tmp_path("v4.npy"), -1, TSR_FORMAT_ERROR, "version 4.0");
}

TSR_TEST(header_spellings) {
  const uint8_t data[4] = {1, 0, 2, 255};
  static const char *const dicts[] = {
      "{\"descr\": \"|u1\", \"fortran_order\": False, \"shape\": (4,)}",
      "{'shape': (4L,), 'fortran_order': False, 'descr': '<u1'}",
      "{ 'descr' : '=u1' , 'fortran_order' : False , 'shape' : ( 4 , ) , }",
      "{'descr': '>u1', 'fortran_order': True, 'shape': (4,), }",
  };
  for (size_t i = 0; i < TSR_ARRAY_SIZE(dicts); i++) {
    write_npy(tmp_path("s.npy"), 1, dicts[i], data, sizeof data);
    tsr_array_t a = {0};
    TSR_CHECK_OK(tsr_npy_read(tmp_path("s.npy"), TSR_DTYPE_U8, &a));
    if (a.data) {
      TSR_CHECK(memcmp(a.data, data, 4) == 0);
      tsr_array_deinitialize(&a);
    }
  }
  /* <i1, <b1 */
  write_npy(tmp_path("s.npy"), 1, "{'descr': '<i1', 'fortran_order': False, 'shape': (4,), }",
            data, 4);
  tsr_array_t a = {0};
  TSR_CHECK_OK(tsr_npy_read(tmp_path("s.npy"), -1, &a));
  if (a.data) {
    TSR_CHECK_EQ_INT(a.dtype, TSR_DTYPE_I8);
    TSR_CHECK_EQ_INT(((int8_t *)a.data)[3], -1);
    tsr_array_deinitialize(&a);
  }
  /* booleans are normalised to 0/1 */
  write_npy(tmp_path("s.npy"), 1, "{'descr': '<b1', 'fortran_order': False, 'shape': (4,), }",
            data, 4);
  TSR_CHECK_OK(tsr_npy_read(tmp_path("s.npy"), TSR_DTYPE_I1, &a));
  if (a.data) {
    const uint8_t *b = a.data;
    TSR_CHECK(b[0] == 1 && b[1] == 0 && b[2] == 1 && b[3] == 1);
    tsr_array_deinitialize(&a);
  }
}

TSR_TEST(bf16_as_u2_or_v2) {
  const uint16_t bits[3] = {0x3f80, 0xc040, 0x7fc0};
  write_npy(tmp_path("b.npy"), 1, "{'descr': '<u2', 'fortran_order': False, 'shape': (3,), }",
            bits, sizeof bits);
  tsr_array_t a = {0};
  TSR_CHECK_OK(tsr_npy_read(tmp_path("b.npy"), TSR_DTYPE_BF16, &a));
  if (a.data) {
    TSR_CHECK_EQ_INT(a.dtype, TSR_DTYPE_BF16);
    TSR_CHECK(tsr_bf16_to_f32(((uint16_t *)a.data)[1]) == -3.0f);
    tsr_array_deinitialize(&a);
  }
  /* without an expectation, <u2 is u16 */
  TSR_CHECK_OK(tsr_npy_read(tmp_path("b.npy"), -1, &a));
  if (a.data) {
    TSR_CHECK_EQ_INT(a.dtype, TSR_DTYPE_U16);
    tsr_array_deinitialize(&a);
  }
  write_npy(tmp_path("b.npy"), 1, "{'descr': '|V2', 'fortran_order': False, 'shape': (3,), }",
            bits, sizeof bits);
  TSR_CHECK_OK(tsr_npy_read(tmp_path("b.npy"), -1, &a));
  if (a.data) {
    TSR_CHECK_EQ_INT(a.dtype, TSR_DTYPE_BF16);
    tsr_array_deinitialize(&a);
  }
  /* a V2 file is not u16 data */
  expect_read_error(tmp_path("b.npy"), TSR_DTYPE_U16, TSR_FORMAT_ERROR, "expected u16");
}

TSR_TEST(dtype_mismatch_says_expected_and_found) {
  const float data[2] = {1, 2};
  write_npy(tmp_path("m.npy"), 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }",
            data, sizeof data);
  expect_read_error(tmp_path("m.npy"), TSR_DTYPE_I32, TSR_FORMAT_ERROR,
                    "dtype <f4 (f32) does not match: expected i32 (<i4)");
  expect_read_error(tmp_path("m.npy"), TSR_DTYPE_BF16, TSR_FORMAT_ERROR,
                    "expected bf16");
}

TSR_TEST(malformed_files) {
  static const double d[32]; /* 256 zero bytes: enough for every case */
  const char *path = tmp_path("bad.npy");

  /* Well-formed preamble and padding, bad header dict or data size. */
  static const struct {
    const char *dict;
    size_t data_size;
    const char *needle;
  } cases[] = {
      {"{'descr': '<f8', 'fortran_order': False, 'shape': (4,), }",
       32, "dtype <f8 is not supported (tessera dtypes:"},
      {"{'descr': '>f4', 'fortran_order': False, 'shape': (4,), }",
       16, "big-endian"},
      {"{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }",
       16, "Fortran order"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1024,), }",
       100, "truncated: header says 4096 bytes of data, file has 100"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }",
       12, "header says 8 bytes of data, file has 12"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 1), }",
       4, "more than 6 dimensions"},
      {"{'descr': '<f4', 'shape': (2,), }",
       8, "missing key 'fortran_order'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}",
       8, "unexpected key 'x'"},
      {"{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }",
       8, "structured"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }",
       8, "malformed .npy header"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,)",
       8, "malformed .npy header"},
      {"{'descr': '<f4', 'fortran_order': maybe, 'shape': (2,), }",
       8, "True or False"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999, 99999999999, 99999999999), }",
       8, "too large"},
  };
  for (size_t i = 0; i < TSR_ARRAY_SIZE(cases); i++) {
    write_npy(path, 1, cases[i].dict, d, cases[i].data_size);
    expect_read_error(path, -1, TSR_FORMAT_ERROR, cases[i].needle);
  }

  write_bytes(path, "PK\x03\x04 this is a zip file, not npy", 30);
  expect_read_error(path, -1, TSR_FORMAT_ERROR, "not a .npy file");

  write_bytes(path, "", 0);
  expect_read_error(path, -1, TSR_FORMAT_ERROR, "not a .npy file");

  write_bytes(path, "\x93NUMPY\x01\x00\x40", 9);
  expect_read_error(path, -1, TSR_FORMAT_ERROR, "truncated");

  write_bytes(path, "\x93NUMPY\x01\x00\x40\x00{'descr'", 17);
  expect_read_error(path, -1, TSR_FORMAT_ERROR, "truncated: header says it is 64 bytes");

  expect_read_error(tmp_path("does-not-exist.npy"), -1, TSR_IO_ERROR, "cannot open");
  expect_read_error(tmp_dir, -1, TSR_IO_ERROR, "directory");
}

TSR_TEST(fortran_order_is_fine_for_vectors) {
  const float data[3] = {1, 2, 3};
  write_npy(tmp_path("f.npy"), 1, "{'descr': '<f4', 'fortran_order': True, 'shape': (3, 1), }",
            data, sizeof data);
  tsr_array_t a = {0};
  TSR_CHECK_OK(tsr_npy_read(tmp_path("f.npy"), TSR_DTYPE_F32, &a));
  if (a.data) {
    TSR_CHECK(((float *)a.data)[2] == 3.0f);
    tsr_array_deinitialize(&a);
  }
}

TSR_TEST(zero_size_arrays) {
  int64_t dims[2] = {0, 5};
  tsr_array_t a, b = {0};
  TSR_CHECK_OK(tsr_array_initialize(TSR_DTYPE_F16, 2, dims, &a));
  TSR_CHECK_OK(tsr_npy_write(tmp_path("z.npy"), &a));
  TSR_CHECK_OK(tsr_npy_read(tmp_path("z.npy"), TSR_DTYPE_F16, &b));
  if (b.data) {
    TSR_CHECK_EQ_INT(b.rank, 2);
    TSR_CHECK_EQ_INT(b.dims[0], 0);
    TSR_CHECK_EQ_INT(b.dims[1], 5);
    tsr_array_deinitialize(&b);
  }
  tsr_array_deinitialize(&a);
}

TSR_TEST(large_round_trip) {
  int64_t dims[2] = {1024, 1031};
  tsr_array_t a, b = {0};
  TSR_CHECK_OK(tsr_array_initialize(TSR_DTYPE_F32, 2, dims, &a));
  float *f = a.data;
  for (int64_t i = 0; i < dims[0] * dims[1]; i++) f[i] = (float)i * 0.5f - 7.0f;
  TSR_CHECK_OK(tsr_npy_write(tmp_path("big.npy"), &a));
  TSR_CHECK_OK(tsr_npy_read(tmp_path("big.npy"), TSR_DTYPE_F32, &b));
  if (b.data) {
    TSR_CHECK(memcmp(a.data, b.data, tsr_array_byte_size(&a)) == 0);
    tsr_array_deinitialize(&b);
  }
  tsr_array_deinitialize(&a);
}

TSR_TEST(write_replaces_existing_file_and_keeps_mode) {
  const char *path = tmp_path("replace.npy");
  write_bytes(path, "old contents", 12);
  chmod(path, 0640);
  int64_t n = 4;
  tsr_array_t a, b = {0};
  TSR_CHECK_OK(tsr_array_initialize(TSR_DTYPE_I16, 1, &n, &a));
  fill_pattern(&a);
  TSR_CHECK_OK(tsr_npy_write(path, &a));
  TSR_CHECK_OK(tsr_npy_read(path, TSR_DTYPE_I16, &b));
  if (b.data) {
    TSR_CHECK(memcmp(a.data, b.data, 8) == 0);
    tsr_array_deinitialize(&b);
  }
  struct stat st;
  TSR_CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0640);
  TSR_CHECK_EQ_INT(count_entries(tmp_dir, "replace.npy.tmp"), 0);
  tsr_array_deinitialize(&a);
}

TSR_TEST(failed_writes_leave_nothing) {
  int64_t n = 4;
  tsr_array_t a;
  TSR_CHECK_OK(tsr_array_initialize(TSR_DTYPE_F32, 1, &n, &a));

  /* a directory that does not exist */
  const char *path = tmp_path("missing-dir/x.npy");
  TSR_CHECK_STATUS(tsr_npy_write(path, &a), TSR_IO_ERROR);
  TSR_CHECK(access(path, F_OK) != 0);

  /* a "directory" that is a regular file */
  write_bytes(tmp_path("plain"), "x", 1);
  TSR_CHECK_STATUS(tsr_npy_write(tmp_path("plain/x.npy"), &a), TSR_IO_ERROR);

  /* the target is a non-empty directory: rename fails after the data was
   * written, and the temporary file must be removed */
  const char *dir = tmp_path("target.npy");
  mkdir(dir, 0755);
  write_bytes(tmp_path("target.npy/keep"), "x", 1);
  tsr_status_t s = tsr_npy_write(dir, &a);
  TSR_CHECK_EQ_INT(tsr_status_code(s), TSR_IO_ERROR);
  TSR_CHECK(strstr(tsr_status_message(s), "target.npy") != NULL);
  tsr_status_free(s);
  TSR_CHECK_EQ_INT(count_entries(tmp_dir, "target.npy.tmp"), 0);

  /* an unwritable directory (root ignores permissions: then skip this) */
  const char *ro = tmp_path("readonly");
  mkdir(ro, 0555);
  chmod(ro, 0555);
  if (geteuid() != 0) {
    TSR_CHECK_STATUS(tsr_npy_write(tmp_path("readonly/x.npy"), &a), TSR_IO_ERROR);
    TSR_CHECK_EQ_INT(count_entries(ro, ""), 0);
  }
  chmod(ro, 0755);

  /* allocation failure before anything is created */
  path = tmp_path("oom.npy");
  tsr_alloc_fail_after(0);
  TSR_CHECK_STATUS(tsr_npy_write(path, &a), TSR_OUT_OF_MEMORY);
  tsr_alloc_fail_after(-1);
  TSR_CHECK_EQ_INT(count_entries(tmp_dir, "oom.npy"), 0);
  tsr_array_deinitialize(&a);
}

TSR_TEST(read_allocation_failures) {
  int64_t n = 16;
  tsr_array_t a, b;
  TSR_CHECK_OK(tsr_array_initialize(TSR_DTYPE_U32, 1, &n, &a));
  TSR_CHECK_OK(tsr_npy_write(tmp_path("oomr.npy"), &a));
  /* Fail the k-th allocation for k = 0, 1, ... until the read needs fewer:
   * every failure must be an OOM, and both outcomes must be reached (a read
   * that never allocated, or never recovered, would pass a loop that only
   * looked at the failures). */
  long failures = 0;
  bool succeeded = false;
  for (long k = 0; k < 16 && !succeeded; k++) {
    tsr_alloc_fail_after(k);
    tsr_status_t s = tsr_npy_read(tmp_path("oomr.npy"), -1, &b);
    tsr_alloc_fail_after(-1);
    if (s) {
      TSR_CHECK_EQ_INT(tsr_status_code(s), TSR_OUT_OF_MEMORY);
      tsr_status_free(s);
      failures++;
    } else {
      succeeded = true;
      tsr_array_deinitialize(&b);
    }
  }
  TSR_CHECK(failures > 0);
  TSR_CHECK(succeeded);
  tsr_array_deinitialize(&a);
}

TSR_TEST(write_rejects_bad_arrays) {
  tsr_array_t a;
  memset(&a, 0, sizeof a);
  a.dtype = TSR_DTYPE_F32;
  a.rank = 1;
  a.dims[0] = 4; /* no data */
  TSR_CHECK_STATUS(tsr_npy_write(tmp_path("bad-array.npy"), &a), TSR_INVALID_ARGUMENT);
  a.rank = TSR_MAX_RANK + 1;
  TSR_CHECK_STATUS(tsr_npy_write(tmp_path("bad-array.npy"), &a), TSR_INVALID_ARGUMENT);
  TSR_CHECK(access(tmp_path("bad-array.npy"), F_OK) != 0);
}

/* ---- Sizes claimed by headers ---------------------------------------------- */

/* A pipe whose writer (a child process) sends `n` bytes of `data`, then
 * closes; *out_path names its read end ("/dev/fd/N"). Returns the child. */
static pid_t feed_pipe(const void *data, size_t n, char *out_path, size_t path_size,
                       int *out_fd) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  pid_t child = fork();
  if (child == 0) {
    close(fds[0]);
    const char *p = data;
    while (n) {
      ssize_t w = write(fds[1], p, n);
      if (w <= 0) _exit(1);
      p += w;
      n -= (size_t)w;
    }
    _exit(0);
  }
  close(fds[1]);
  snprintf(out_path, path_size, "/dev/fd/%d", fds[0]);
  *out_fd = fds[0];
  return child;
}

static void end_pipe(pid_t child, int fd) {
  close(fd);
  if (child > 0) waitpid(child, NULL, 0);
}

/* A .npy image in memory: header dict `dict` (version 1.0) and `data_size`
 * bytes of `data`. */
static unsigned char *npy_image(const char *dict, const void *data, size_t data_size,
                                size_t *out_size) {
  write_npy(tmp_path("image.npy"), 1, dict, data, data_size);
  return (unsigned char *)slurp(tmp_path("image.npy"), out_size);
}

TSR_TEST(header_claiming_more_than_the_file_holds) {
  /* 2^40 bytes claimed, 64 there: checked against the file's size before
   * anything is allocated (it was allocated first: "out of memory", without
   * the file's name). */
  unsigned char data[64] = {0};
  const char *dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (274877906944,), }";
  write_npy(tmp_path("lie.npy"), 1, dict, data, sizeof data);
  expect_read_error(tmp_path("lie.npy"), -1, TSR_FORMAT_ERROR,
                    "truncated: header says 1099511627776 bytes of data, file has 64");
  /* the same through a pipe: read as the bytes arrive */
  size_t size = 0;
  unsigned char *image = npy_image(dict, data, sizeof data, &size);
  char path[64];
  int fd = -1;
  pid_t child = feed_pipe(image, size, path, sizeof path, &fd);
  TSR_CHECK(child > 0);
  expect_read_error(path, -1, TSR_FORMAT_ERROR,
                    "truncated: header says 1099511627776 bytes of data, the stream "
                    "ended after 64");
  end_pipe(child, fd);
  free(image);
}

TSR_TEST(read_through_a_pipe) {
  /* 3 MiB: more than the first buffer, so the buffer grows as data arrives */
  int64_t dims[2] = {768, 1024};
  tsr_array_t a, b;
  TSR_CHECK_OK(tsr_array_initialize(TSR_DTYPE_F32, 2, dims, &a));
  fill_pattern(&a);
  TSR_CHECK_OK(tsr_npy_write(tmp_path("piped.npy"), &a));
  size_t size = 0;
  char *image = slurp(tmp_path("piped.npy"), &size);
  char path[64];
  int fd = -1;
  pid_t child = feed_pipe(image, size, path, sizeof path, &fd);
  TSR_CHECK_OK(tsr_npy_read(path, TSR_DTYPE_F32, &b));
  end_pipe(child, fd);
  TSR_CHECK_EQ_INT(b.rank, 2);
  TSR_CHECK_EQ_INT(b.dims[0], 768);
  TSR_CHECK_EQ_INT(b.dims[1], 1024);
  TSR_CHECK(memcmp(a.data, b.data, tsr_array_byte_size(&a)) == 0);
  tsr_array_deinitialize(&b);
  /* trailing bytes after the data through a pipe */
  char *longer = malloc(size + 3);
  memcpy(longer, image, size);
  memcpy(longer + size, "xyz", 3);
  child = feed_pipe(longer, size + 3, path, sizeof path, &fd);
  expect_read_error(path, -1, TSR_FORMAT_ERROR, "3 unexpected trailing bytes");
  end_pipe(child, fd);
  free(longer);
  free(image);
  tsr_array_deinitialize(&a);
}

/* ---- Where writes go --------------------------------------------------------- */

static tsr_array_t small_array(void) {
  int64_t n = 16;
  tsr_array_t a;
  if (tsr_array_initialize(TSR_DTYPE_I32, 1, &n, &a)) memset(&a, 0, sizeof a);
  else fill_pattern(&a);
  return a;
}

/* The bytes tsr_npy_write gives `a` in a fresh file. */
static char *expected_bytes(const tsr_array_t *a, size_t *out_size) {
  if (tsr_npy_write(tmp_path("expected.npy"), a)) return NULL;
  return slurp(tmp_path("expected.npy"), out_size);
}

static bool same_file_contents(const char *path, const char *want, size_t want_size) {
  size_t size = 0;
  char *got = slurp(path, &size);
  bool same = got && size == want_size && memcmp(got, want, size) == 0;
  free(got);
  return same;
}

/* A character device: a copy of /dev/null (major 1, minor 3) made with
 * mknod as root, /dev/null itself otherwise (which no one else can replace). */
static const char *null_device(void) {
  static char copy[4096];
  snprintf(copy, sizeof copy, "%s", tmp_path("null"));
  return mknod(copy, S_IFCHR | 0666, makedev(1, 3)) == 0 ? copy : "/dev/null";
}

/* The same for /dev/full (1, 7): every write fails with ENOSPC. */
static const char *full_device(void) {
  static char copy[4096];
  snprintf(copy, sizeof copy, "%s", tmp_path("full"));
  return mknod(copy, S_IFCHR | 0666, makedev(1, 7)) == 0 ? copy : "/dev/full";
}

TSR_TEST(write_into_a_character_device) {
  tsr_array_t a = small_array();
  const char *dev = null_device();
  TSR_CHECK_OK(tsr_npy_write(dev, &a));
  struct stat st;
  TSR_CHECK(stat(dev, &st) == 0 && S_ISCHR(st.st_mode));
  TSR_CHECK_OK(tsr_file_write(dev, "text", 4));
  TSR_CHECK(stat(dev, &st) == 0 && S_ISCHR(st.st_mode));
  tsr_array_deinitialize(&a);
}

TSR_TEST(write_into_a_fifo) {
  tsr_array_t a = small_array();
  size_t want_size = 0;
  char *want = expected_bytes(&a, &want_size);
  const char *fifo = tmp_path("fifo");
  TSR_CHECK(mkfifo(fifo, 0644) == 0);
  char received[4096];
  snprintf(received, sizeof received, "%s", tmp_path("from-fifo"));
  pid_t reader = fork();
  if (reader == 0) { /* copies what comes through the FIFO into a file */
    FILE *in = fopen(fifo, "rb"), *out = fopen(received, "wb");
    char buf[4096];
    size_t r;
    while (in && out && (r = fread(buf, 1, sizeof buf, in)) > 0) fwrite(buf, 1, r, out);
    _exit(out && fclose(out) == 0 ? 0 : 1);
  }
  TSR_CHECK_OK(tsr_npy_write(fifo, &a));
  struct stat st;
  bool still_fifo = lstat(fifo, &st) == 0 && S_ISFIFO(st.st_mode);
  TSR_CHECK(still_fifo);
  if (!still_fifo) kill(reader, SIGKILL); /* nobody can open its FIFO now */
  waitpid(reader, NULL, 0);
  TSR_CHECK(same_file_contents(received, want, want_size));
  free(want);
  tsr_array_deinitialize(&a);
}

/* A link in a sticky, world-writable directory (/tmp) that belongs to
 * another user than us and the directory's owner may have been planted to
 * make us overwrite a file of ours: not followed, whatever the kernel's
 * fs.protected_symlinks. Making such a link needs chown. */
TSR_TEST(write_refuses_a_link_planted_in_a_sticky_directory) {
  const char *dir = tmp_path("sticky");
  TSR_CHECK(mkdir(dir, 0777) == 0 && chmod(dir, 01777) == 0);
  char victim[4096], planted[4096];
  snprintf(victim, sizeof victim, "%s", tmp_path("victim"));
  snprintf(planted, sizeof planted, "%s", tmp_path("sticky/planted"));
  write_bytes(victim, "mine", 4);
  TSR_CHECK(symlink(victim, planted) == 0);
  if (lchown(planted, 4242, 4242) != 0) {
    tsr_test_skip_reason = "making a link of another user needs chown";
    return;
  }
  TSR_CHECK_ERROR(tsr_file_write(planted, "theirs", 6), TSR_IO_ERROR,
                  "not following the symbolic link");
  TSR_CHECK(same_file_contents(victim, "mine", 4));
  /* Ours there is followed. */
  TSR_CHECK(unlink(planted) == 0 && symlink(victim, planted) == 0);
  TSR_CHECK_OK(tsr_file_write(planted, "ours", 4));
  TSR_CHECK(same_file_contents(victim, "ours", 4));
}

TSR_TEST(write_through_a_symlink_replaces_its_target) {
  tsr_array_t a = small_array();
  size_t want_size = 0;
  char *want = expected_bytes(&a, &want_size);
  write_bytes(tmp_path("real.npy"), "old", 3);
  chmod(tmp_path("real.npy"), 0640);
  TSR_CHECK(symlink("real.npy", tmp_path("link.npy")) == 0);
  TSR_CHECK_OK(tsr_npy_write(tmp_path("link.npy"), &a));
  char target[64] = "";
  ssize_t n = readlink(tmp_path("link.npy"), target, sizeof target - 1);
  TSR_CHECK(n == 8 && memcmp(target, "real.npy", 8) == 0);
  TSR_CHECK(same_file_contents(tmp_path("real.npy"), want, want_size));
  struct stat st;
  TSR_CHECK(stat(tmp_path("real.npy"), &st) == 0 && (st.st_mode & 0777) == 0640);
  /* a dangling link: its target is created */
  TSR_CHECK(symlink("created.npy", tmp_path("dangling.npy")) == 0);
  TSR_CHECK_OK(tsr_npy_write(tmp_path("dangling.npy"), &a));
  TSR_CHECK(lstat(tmp_path("dangling.npy"), &st) == 0 && S_ISLNK(st.st_mode));
  TSR_CHECK(same_file_contents(tmp_path("created.npy"), want, want_size));
  /* tsr_file_write follows links the same way */
  TSR_CHECK_OK(tsr_file_write(tmp_path("link.npy"), "text", 4));
  TSR_CHECK(lstat(tmp_path("link.npy"), &st) == 0 && S_ISLNK(st.st_mode));
  TSR_CHECK(same_file_contents(tmp_path("real.npy"), "text", 4));
  /* a cycle of links is an error, not a hang */
  TSR_CHECK(symlink("cycle-b", tmp_path("cycle-a")) == 0);
  TSR_CHECK(symlink("cycle-a", tmp_path("cycle-b")) == 0);
  TSR_CHECK_STATUS(tsr_npy_write(tmp_path("cycle-a"), &a), TSR_IO_ERROR);
  TSR_CHECK_EQ_INT(count_entries(tmp_dir, "cycle-a.tmp"), 0);
  free(want);
  tsr_array_deinitialize(&a);
}

TSR_TEST(write_refuses_directories) {
  tsr_array_t a = small_array();
  mkdir(tmp_path("a-dir"), 0755);
  tsr_status_t s = tsr_npy_write(tmp_path("a-dir"), &a);
  TSR_CHECK_EQ_INT(tsr_status_code(s), TSR_IO_ERROR);
  TSR_CHECK(strstr(tsr_status_message(s), "a-dir: is a directory") != NULL);
  tsr_status_free(s);
  tsr_array_deinitialize(&a);
}

TSR_TEST(write_all_is_all_or_nothing) {
  tsr_array_t a = small_array();
  const tsr_array_t *arrays[3] = {&a, &a, &a};
  /* the second of two outputs fails: the first is not written */
  char first[4096];
  snprintf(first, sizeof first, "%s", tmp_path("aon-first.npy"));
  const char *paths[2] = {first, full_device()};
  tsr_status_t s = tsr_npy_write_all(paths, arrays, 2);
  TSR_CHECK_EQ_INT(tsr_status_code(s), TSR_IO_ERROR);
  TSR_CHECK(s && strstr(tsr_status_message(s), "No space left on device") != NULL);
  tsr_status_free(s);
  TSR_CHECK(access(tmp_path("aon-first.npy"), F_OK) != 0);
  TSR_CHECK_EQ_INT(count_entries(tmp_dir, "aon-first.npy"), 0);
  /* an existing first output keeps its contents */
  write_bytes(tmp_path("aon-old.npy"), "old", 3);
  snprintf(first, sizeof first, "%s", tmp_path("aon-old.npy"));
  TSR_CHECK_STATUS(tsr_npy_write_all(paths, arrays, 2), TSR_IO_ERROR);
  TSR_CHECK(same_file_contents(tmp_path("aon-old.npy"), "old", 3));
  /* a third output in a directory that does not exist: nothing written */
  char names[3][4096];
  snprintf(names[0], sizeof names[0], "%s", tmp_path("aon-1.npy"));
  snprintf(names[1], sizeof names[1], "%s", tmp_path("aon-2.npy"));
  snprintf(names[2], sizeof names[2], "%s", tmp_path("no-such-dir/aon-3.npy"));
  const char *three[3] = {names[0], names[1], names[2]};
  TSR_CHECK_STATUS(tsr_npy_write_all(three, arrays, 3), TSR_IO_ERROR);
  TSR_CHECK_EQ_INT(count_entries(tmp_dir, "aon-1"), 0);
  TSR_CHECK_EQ_INT(count_entries(tmp_dir, "aon-2"), 0);
  /* two names of one file */
  write_bytes(tmp_path("same.npy"), "old", 3);
  TSR_CHECK(symlink("same.npy", tmp_path("same-link.npy")) == 0);
  char same_names[2][4096];
  snprintf(same_names[0], sizeof same_names[0], "%s", tmp_path("same.npy"));
  snprintf(same_names[1], sizeof same_names[1], "%s", tmp_path("same-link.npy"));
  const char *same[2] = {same_names[0], same_names[1]};
  TSR_CHECK_STATUS(tsr_npy_write_all(same, arrays, 2), TSR_INVALID_ARGUMENT);
  TSR_CHECK(same_file_contents(tmp_path("same.npy"), "old", 3));
  /* and all of them when every one can be written */
  snprintf(names[2], sizeof names[2], "%s", tmp_path("aon-3.npy"));
  TSR_CHECK_OK(tsr_npy_write_all(three, arrays, 3));
  for (int i = 0; i < 3; i++) TSR_CHECK(access(three[i], F_OK) == 0);
  TSR_CHECK_EQ_INT(count_entries(tmp_dir, "aon-3.npy.tmp"), 0);
  tsr_array_deinitialize(&a);
}

int main(void) {
  const char *base = getenv("TMPDIR");
  snprintf(tmp_dir, sizeof tmp_dir, "%s/tessera-npy-XXXXXX",
           base && *base ? base : "/tmp");
  if (!mkdtemp(tmp_dir)) {
    printf("Bail out! cannot create a temporary directory: %s\n", strerror(errno));
    return 1;
  }
  TSR_RUN(round_trip_every_dtype_and_rank);
  TSR_RUN(header_text_matches_numpy);
  TSR_RUN(header_versions_1_2_3);
  TSR_RUN(header_spellings);
  TSR_RUN(bf16_as_u2_or_v2);
  TSR_RUN(dtype_mismatch_says_expected_and_found);
  TSR_RUN(malformed_files);
  TSR_RUN(fortran_order_is_fine_for_vectors);
  TSR_RUN(zero_size_arrays);
  TSR_RUN(large_round_trip);
  TSR_RUN(write_replaces_existing_file_and_keeps_mode);
  TSR_RUN(failed_writes_leave_nothing);
  TSR_RUN(read_allocation_failures);
  TSR_RUN(write_rejects_bad_arrays);
  TSR_RUN(header_claiming_more_than_the_file_holds);
  TSR_RUN(read_through_a_pipe);
  TSR_RUN(write_into_a_character_device);
  TSR_RUN(write_into_a_fifo);
  TSR_RUN(write_through_a_symlink_replaces_its_target);
  TSR_RUN_OR_SKIP(write_refuses_a_link_planted_in_a_sticky_directory);
  TSR_RUN(write_refuses_directories);
  TSR_RUN(write_all_is_all_or_nothing);
  char cmd[4200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp_dir);
  if (system(cmd) != 0) printf("# could not remove %s\n", tmp_dir);
  return tsr_test_done();
}
