/* Unit tests for base/npy.c: round trips of every dtype and rank, the three
 * header versions, every malformed-file error, and atomic writes. */
#include <dirent.h>
#include <errno.h>
#include <sys/stat.h>
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
        TSR_CHECK_EQ_INT(b.dtype, d);
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
  char cmd[4200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp_dir);
  if (system(cmd) != 0) printf("# could not remove %s\n", tmp_dir);
  return tsr_test_done();
}
