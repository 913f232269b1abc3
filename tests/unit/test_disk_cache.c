/* Tests of the disk cache (cache/disk.c, docs/cache.md "On disk"): round
 * trips, key material, every kind of damaged entry, several processes and
 * threads at once, LRU trimming, a full disk, unusable directories, and
 * scan/clear/verify. Each test works in its own temporary directory. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <sodium.h>

#include "base/base_internal.h"
#include "tests/harness.h"

/* The entry format, as docs/cache.md describes it. */
enum {
  HEADER = 128,
  OFF_FORMAT = 8,
  OFF_HEADER_SIZE = 12,
  OFF_VERSION = 16,
  OFF_KEY_HASH = 48,
  OFF_KEY_LEN = 64,
  OFF_PAYLOAD_SIZE = 72,
  OFF_STORED_SIZE = 80,
  OFF_COMPRESSION = 88,
  OFF_RESERVED = 92,
  OFF_MAC = 96,
};

/* ---- Helpers ------------------------------------------------------------------ */

/* snprintf for paths (a wrapper, so that gcc does not warn about paths that
 * could in theory be truncated: the test's paths are short). */
static void pathf(char *out, size_t size, const char *fmt, ...) TSR_PRINTF(3, 4);
static void pathf(char *out, size_t size, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(out, size, fmt, ap);
  va_end(ap);
}

static char *make_temp_dir(void) {
  const char *base = getenv("TMPDIR");
  if (!base || !*base) base = "/tmp";
  size_t size = strlen(base) + 32;
  char *path = malloc(size);
  if (!path) exit(1);
  pathf(path, size, "%s/tsr-disk-XXXXXX", base);
  if (!mkdtemp(path)) {
    printf("# mkdtemp in %s: %s\n", base, strerror(errno));
    exit(1);
  }
  return path;
}

static void remove_tree(const char *path) {
  struct stat st;
  if (lstat(path, &st) != 0) return;
  if (S_ISDIR(st.st_mode)) {
    chmod(path, 0700); /* the read-only tests leave 0555 directories */
    DIR *d = opendir(path);
    if (d) {
      struct dirent *de;
      while ((de = readdir(d)) != NULL) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        size_t size = strlen(path) + strlen(de->d_name) + 2;
        char *child = malloc(size);
        if (!child) exit(1);
        pathf(child, size, "%s/%s", path, de->d_name);
        remove_tree(child);
        free(child);
      }
      closedir(d);
    }
    rmdir(path);
  } else {
    unlink(path);
  }
}

/* Borrowed key material lives in the struct: pass it by pointer. */
typedef struct test_key {
  char text[64];
  tsr_cache_key_t key;
} test_key_t;

static void make_key(test_key_t *k, const char *fmt, ...) TSR_PRINTF(2, 3);
static void make_key(test_key_t *k, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(k->text, sizeof k->text, fmt, ap);
  va_end(ap);
  tsr_cache_key_make(&k->key, k->text, strlen(k->text));
}

static void entry_path(const char *dir, const tsr_cache_key_t *key,
                       char *out, size_t size) {
  char hex[33];
  tsr_cache_key_hex(key, hex);
  int n = snprintf(out, size, "%s/v2/%.2s/%s.tsc", dir, hex, hex + 2);
  if (n < 0 || (size_t)n >= size) out[0] = '\0'; /* too long: no such file */
}

static uint64_t splitmix(uint64_t *state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* Incompressible bytes from a seed. */
static void fill_random(uint8_t *p, size_t n, uint64_t seed) {
  for (size_t i = 0; i < n; i++) {
    if (i % 8 == 0) {
      uint64_t r = splitmix(&seed);
      memcpy(p + i, &r, TSR_MIN(8, n - i));
    }
  }
}

/* Compressible text from a seed. */
static void fill_text(uint8_t *p, size_t n, uint64_t seed) {
  static const char *const words[] = {"tile ", "grid ", "vmem ", "block ",
                                      "kernel ", "dma ", "core "};
  size_t i = 0;
  while (i < n) {
    const char *w = words[splitmix(&seed) % TSR_ARRAY_SIZE(words)];
    for (size_t j = 0; w[j] && i < n; j++) p[i++] = (uint8_t)w[j];
  }
}

/* Warnings captured in memory. */
typedef struct warnings {
  char *text;
  size_t len;
  FILE *stream;
} warnings_t;

static void warnings_open(warnings_t *w) {
  w->text = NULL;
  w->len = 0;
  w->stream = open_memstream(&w->text, &w->len);
}
static const char *warnings_text(warnings_t *w) {
  fflush(w->stream);
  return w->text ? w->text : "";
}
static size_t warnings_lines(warnings_t *w) {
  size_t n = 0;
  for (const char *p = warnings_text(w); *p; p++) n += *p == '\n';
  return n;
}
static void warnings_close(warnings_t *w) {
  fclose(w->stream);
  free(w->text);
}

static tsr_disk_cache_t *open_cache(const char *dir, uint64_t max_bytes,
                                    FILE *warn) {
  tsr_disk_cache_options_t o;
  tsr_disk_cache_options_initialize(&o);
  o.dir = dir;
  o.max_bytes = max_bytes;
  o.warn_stream = warn;
  tsr_disk_cache_t *cache = NULL;
  tsr_status_t s = tsr_disk_cache_open(&o, &cache);
  if (s) {
    printf("# open %s: %s\n", dir, tsr_status_message(s));
    tsr_status_free(s);
    return NULL;
  }
  return cache;
}

/* 0: a hit with exactly `want`; 1: a miss; 2: wrong bytes; 3: another error. */
static int get_result(tsr_disk_cache_t *cache, const tsr_cache_key_t *key,
                      const void *want, size_t want_size) {
  void *payload = NULL;
  size_t size = 0;
  tsr_status_t s = tsr_disk_cache_get(cache, key, &payload, &size);
  if (s) {
    int code = tsr_status_code(s) == TSR_NOT_FOUND ? 1 : 3;
    if (code == 3) printf("# get: %s\n", tsr_status_message(s));
    tsr_status_free(s);
    return code;
  }
  int r = size == want_size && (!size || memcmp(payload, want, size) == 0) ? 0 : 2;
  tsr_disk_cache_free(payload);
  return r;
}

static bool exists(const char *path) {
  struct stat st;
  return lstat(path, &st) == 0;
}

static long long file_size(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? (long long)st.st_size : -1;
}

static uint8_t *read_whole(const char *path, size_t *out_len) {
  size_t len = 0;
  char *text = tsr_test_read_source(path, &len);
  *out_len = len;
  return (uint8_t *)text;
}

static bool write_whole(const char *path, const void *data, size_t len) {
  FILE *f = fopen(path, "wb");
  if (!f) return false;
  bool ok = fwrite(data, 1, len, f) == len;
  return fclose(f) == 0 && ok;
}

static void put_u64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint64_t get_u64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}

/* The key of `cache`'s key file. */
static bool read_mac_key(const tsr_disk_cache_t *cache, uint8_t key[32]) {
  size_t len = 0;
  uint8_t *bytes = read_whole(tsr_disk_cache_key_file(cache), &len);
  bool ok = bytes && len == 32;
  if (ok) memcpy(key, bytes, 32);
  free(bytes);
  return ok;
}

/* Recomputes the MAC of an entry image with `cache`'s key (as the writer
 * does: keyed BLAKE2b-256 of the header up to the MAC and everything after
 * it), so that a deliberate change reaches the checks behind it. */
static void reseal(const tsr_disk_cache_t *cache, uint8_t *e, size_t len) {
  uint8_t key[32];
  if (len < HEADER || !read_mac_key(cache, key)) return;
  crypto_generichash_state st;
  crypto_generichash_init(&st, key, sizeof key, 32);
  crypto_generichash_update(&st, e, OFF_MAC);
  crypto_generichash_update(&st, e + HEADER, len - HEADER);
  crypto_generichash_final(&st, e + OFF_MAC, 32);
}

static void set_mtime(const char *path, time_t when) {
  struct timespec ts[2] = {{when, 0}, {when, 0}};
  if (utimensat(AT_FDCWD, path, ts, AT_SYMLINK_NOFOLLOW) != 0)
    printf("# utimensat %s: %s\n", path, strerror(errno));
}

static size_t count_temp_files(const char *dir) {
  tsr_disk_cache_t *cache = open_cache(dir, 0, NULL);
  if (!cache) return (size_t)-1;
  tsr_disk_cache_stats_t st;
  tsr_status_t s = tsr_disk_cache_scan(cache, &st);
  tsr_disk_cache_close(cache);
  if (s) {
    tsr_status_free(s);
    return (size_t)-1;
  }
  return (size_t)st.temp_files;
}

/* ---- Round trips ----------------------------------------------------------------- */

TSR_TEST(round_trip_sizes_and_kinds) {
  char *dir = make_temp_dir();
  tsr_disk_cache_t *cache = open_cache(dir, 1ull << 30, stderr);
  TSR_CHECK(cache != NULL);
  if (!cache) return;
  struct {
    const char *name;
    size_t size;
    bool random;
  } cases[] = {
      {"empty", 0, false},
      {"small", 5, false},
      {"text 1 MiB", 1 << 20, false},
      {"random 10 MiB", 10 << 20, true},
      {"random 1 byte", 1, true},
  };
  for (size_t i = 0; i < TSR_ARRAY_SIZE(cases); i++) {
    test_key_t k;
    make_key(&k, "round-trip %s", cases[i].name);
    uint8_t *payload = malloc(cases[i].size + 1);
    if (cases[i].random) fill_random(payload, cases[i].size, i);
    else fill_text(payload, cases[i].size, i);
    TSR_CHECK_EQ_INT(get_result(cache, &k.key, payload, cases[i].size), 1);
    TSR_CHECK_OK(tsr_disk_cache_put(cache, &k.key, payload, cases[i].size));
    int r = get_result(cache, &k.key, payload, cases[i].size);
    if (r != 0) TSR_FAIL_AT("%s: get gave %d", cases[i].name, r);
    char path[4096];
    entry_path(dir, &k.key, path, sizeof path);
    long long raw = HEADER + (long long)k.key.len + (long long)cases[i].size;
    if (cases[i].random) {
      /* Incompressible: stored as it is. */
      TSR_CHECK_EQ_INT(file_size(path), raw);
    } else if (cases[i].size > 1000) {
      TSR_CHECK(file_size(path) < raw / 2);
    }
    free(payload);
  }
  /* A second put replaces the entry. */
  test_key_t k;
  make_key(&k, "replaced");
  TSR_CHECK_OK(tsr_disk_cache_put(cache, &k.key, "first", 5));
  TSR_CHECK_OK(tsr_disk_cache_put(cache, &k.key, "second!", 7));
  TSR_CHECK_EQ_INT(get_result(cache, &k.key, "second!", 7), 0);
  tsr_disk_cache_stats_t st;
  tsr_disk_cache_stats(cache, &st);
  TSR_CHECK_EQ_INT(st.puts, 7);
  TSR_CHECK_EQ_INT(st.hits, 6);
  TSR_CHECK_EQ_INT(st.misses, 5);
  TSR_CHECK_EQ_INT(st.bad_entries, 0);
  TSR_CHECK_EQ_INT(st.errors, 0);
  TSR_CHECK_EQ_INT(st.max_bytes, 1ull << 30);
  tsr_disk_cache_close(cache);
  remove_tree(dir);
  free(dir);
}

/* Two keys forced onto one hash: a hit needs the same key material. */
TSR_TEST(same_hash_other_material_is_a_miss) {
  char *dir = make_temp_dir();
  warnings_t w;
  warnings_open(&w);
  tsr_disk_cache_t *cache = open_cache(dir, 0, w.stream);
  TSR_CHECK(cache != NULL);
  if (!cache) return;
  test_key_t a, b, a_long;
  make_key(&a, "alpha");
  make_key(&b, "bravo");
  make_key(&a_long, "alpha+");
  b.key.lo = a.key.lo;
  b.key.hi = a.key.hi;
  a_long.key.lo = a.key.lo;
  a_long.key.hi = a.key.hi;
  TSR_CHECK_OK(tsr_disk_cache_put(cache, &a.key, "payload of alpha", 16));
  TSR_CHECK_EQ_INT(get_result(cache, &b.key, "payload of alpha", 16), 1);
  TSR_CHECK_EQ_INT(get_result(cache, &a_long.key, "payload of alpha", 16), 1);
  /* Not a damaged entry: it stays, nothing is said. */
  TSR_CHECK_EQ_INT(get_result(cache, &a.key, "payload of alpha", 16), 0);
  TSR_CHECK_EQ_STR(warnings_text(&w), "");
  /* The next put of the other key replaces it. */
  TSR_CHECK_OK(tsr_disk_cache_put(cache, &b.key, "payload of bravo", 16));
  TSR_CHECK_EQ_INT(get_result(cache, &b.key, "payload of bravo", 16), 0);
  TSR_CHECK_EQ_INT(get_result(cache, &a.key, "payload of bravo", 16), 1);
  tsr_disk_cache_stats_t st;
  tsr_disk_cache_stats(cache, &st);
  TSR_CHECK_EQ_INT(st.bad_entries, 0);
  tsr_disk_cache_close(cache);
  warnings_close(&w);
  remove_tree(dir);
  free(dir);
}

/* ---- Damaged entries ----------------------------------------------------------- */

typedef enum damage {
  TRUNCATE,  /* to `offset` */
  APPEND,    /* one byte */
  FLIP,      /* xor 0x5a at `offset` */
  OVERWRITE, /* `bytes` at `offset` */
  RESEAL_U64,/* set the u64 at `offset` to `value`, then fix the MAC */
  GARBAGE,   /* replace with `offset` random bytes */
  SYMLINK,   /* replace with a symbolic link to another valid entry */
  FIFO,      /* replace with a FIFO (a get must not wait on it) */
  WRONG_VERSION, /* tessera version "9.9.9", MAC fixed */
  PAYLOAD_FLIP_RESEALED, /* flip a stored payload byte, MAC fixed */
  FORGED,    /* the payload replaced, MAC'ed with another key */
} damage_t;

/* Offsets: absolute, or relative to the key, the payload or the file end. */
typedef enum base { ABS, KEY, PAYLOAD, MIDDLE, END } base_t;

typedef struct damage_case {
  const char *name;
  damage_t damage;
  base_t base;
  long long offset;
  uint64_t value;
  const char *bytes;
  const char *reason; /* expected in the warning, NULL: any */
  bool compressed_only;
} damage_case_t;

static const damage_case_t damage_cases[] = {
    {"empty file", TRUNCATE, ABS, 0, 0, NULL, "truncated", false},
    {"truncated in the header", TRUNCATE, ABS, 64, 0, NULL, "truncated", false},
    {"truncated after the header", TRUNCATE, ABS, HEADER, 0, NULL, "truncated", false},
    {"truncated in the key", TRUNCATE, KEY, 3, 0, NULL, "truncated", false},
    {"truncated in the payload", TRUNCATE, PAYLOAD, 10, 0, NULL, "truncated", false},
    {"one byte short", TRUNCATE, END, -1, 0, NULL, "truncated", false},
    {"one byte extra", APPEND, ABS, 0, 0, NULL, "size mismatch", false},
    {"flip magic", FLIP, ABS, 0, 0, NULL, "magic", false},
    {"flip format version", FLIP, ABS, OFF_FORMAT, 0, NULL, "format", false},
    {"flip header size", FLIP, ABS, OFF_HEADER_SIZE, 0, NULL, "header size", false},
    {"flip tessera version", FLIP, ABS, OFF_VERSION, 0, NULL, "authentication failed", false},
    {"flip key hash", FLIP, ABS, OFF_KEY_HASH + 3, 0, NULL, "authentication failed", false},
    {"flip key length", FLIP, ABS, OFF_KEY_LEN, 0, NULL, NULL, false},
    {"flip payload size", FLIP, ABS, OFF_PAYLOAD_SIZE, 0, NULL, "authentication failed", false},
    {"flip stored size", FLIP, ABS, OFF_STORED_SIZE, 0, NULL, NULL, false},
    {"flip compression", FLIP, ABS, OFF_COMPRESSION, 0, NULL, "authentication failed", false},
    {"flip MAC start", FLIP, ABS, OFF_MAC, 0, NULL, "authentication failed", false},
    {"flip MAC end", FLIP, ABS, HEADER - 1, 0, NULL, "authentication failed", false},
    {"flip key first byte", FLIP, KEY, 0, 0, NULL, "authentication failed", false},
    {"flip key last byte", FLIP, PAYLOAD, -1, 0, NULL, "authentication failed", false},
    {"flip payload start", FLIP, PAYLOAD, 0, 0, NULL, "authentication failed", false},
    {"flip payload middle", FLIP, MIDDLE, 0, 0, NULL, "authentication failed", false},
    {"flip payload end", FLIP, END, -1, 0, NULL, "authentication failed", false},
    {"wrong magic", OVERWRITE, ABS, 0, 0, "NOTCACHE", "magic", false},
    {"wrong tessera version", WRONG_VERSION, ABS, 0, 0, NULL, "written by tessera 9.9.9", false},
    {"unknown compression", RESEAL_U64, ABS, OFF_COMPRESSION, 7, NULL, "compression", false},
    {"reserved field set", RESEAL_U64, ABS, OFF_RESERVED, 1, NULL, "reserved", false},
    {"huge key length", RESEAL_U64, ABS, OFF_KEY_LEN, 1ull << 62, NULL, "truncated", false},
    {"huge stored size", RESEAL_U64, ABS, OFF_STORED_SIZE, 1ull << 62, NULL, "truncated", false},
    {"huge payload size", RESEAL_U64, ABS, OFF_PAYLOAD_SIZE, 1ull << 62, NULL, NULL, false},
    {"payload size off by one", RESEAL_U64, ABS, OFF_PAYLOAD_SIZE, 0, NULL, NULL, false},
    {"corrupt zstd data, MAC fixed", PAYLOAD_FLIP_RESEALED, MIDDLE, 0, 0, NULL, "zstd", true},
    {"forged with another key", FORGED, ABS, 0, 0, NULL, "authentication failed", false},
    {"garbage file", GARBAGE, ABS, 4096, 0, NULL, "magic", false},
    {"tiny garbage file", GARBAGE, ABS, 10, 0, NULL, "truncated", false},
    {"symbolic link", SYMLINK, ABS, 0, 0, NULL, "symbolic link", false},
    {"FIFO", FIFO, ABS, 0, 0, NULL, "a FIFO, not a regular file", false},
};

/* Writes the entry of `key` with `payload` in cache directory `dir`, as a
 * writer with another key file (`key_file`, made on first use) would. */
static bool forge_entry(const char *dir, const char *key_file, const tsr_cache_key_t *key,
                        const void *payload, size_t size) {
  tsr_disk_cache_options_t o;
  tsr_disk_cache_options_initialize(&o);
  o.dir = dir;
  o.key_file = key_file;
  o.warn_stream = NULL;
  tsr_disk_cache_t *forger = NULL;
  tsr_status_t s = tsr_disk_cache_open(&o, &forger);
  if (!s) s = tsr_disk_cache_put(forger, key, payload, size);
  tsr_disk_cache_close(forger);
  bool ok = s == NULL;
  tsr_status_free(s);
  return ok;
}

/* Damages the entry file `path` (key `key`) of `cache` in `dir` as `c`
 * says; `other` is another valid entry's path. */
static bool apply_damage(const damage_case_t *c, tsr_disk_cache_t *cache, const char *dir,
                         const char *path, const tsr_cache_key_t *key, const char *other) {
  size_t key_len = key->len;
  size_t len = 0;
  uint8_t *e = read_whole(path, &len);
  if (!e) return false;
  long long off = c->offset;
  long long payload_start = HEADER + (long long)key_len;
  switch (c->base) {
  case ABS: break;
  case KEY: off += HEADER; break;
  case PAYLOAD: off += payload_start; break;
  case MIDDLE: off += payload_start + ((long long)len - payload_start) / 2; break;
  case END: off += (long long)len; break;
  }
  bool ok = true;
  switch (c->damage) {
  case TRUNCATE:
    ok = truncate(path, off) == 0;
    break;
  case APPEND:
    e = realloc(e, len + 1);
    e[len] = 0;
    ok = write_whole(path, e, len + 1);
    break;
  case FLIP:
    e[off] ^= 0x5a;
    ok = write_whole(path, e, len);
    break;
  case OVERWRITE:
    memcpy(e + off, c->bytes, strlen(c->bytes));
    ok = write_whole(path, e, len);
    break;
  case RESEAL_U64: {
    uint64_t v = c->value;
    if (!v) v = get_u64(e + off) + 1; /* "off by one" */
    put_u64(e + off, v);
    reseal(cache, e, len);
    ok = write_whole(path, e, len);
    break;
  }
  case GARBAGE: {
    uint8_t *g = malloc((size_t)off);
    fill_random(g, (size_t)off, 99);
    ok = write_whole(path, g, (size_t)off);
    free(g);
    break;
  }
  case SYMLINK:
    ok = unlink(path) == 0 && symlink(other, path) == 0;
    break;
  case FIFO:
    ok = unlink(path) == 0 && mkfifo(path, 0600) == 0;
    break;
  case FORGED: {
    char key_file[4200];
    pathf(key_file, sizeof key_file, "%s.forger.key", dir);
    ok = forge_entry(dir, key_file, key, "forged payload", 14);
    unlink(key_file);
    break;
  }
  case WRONG_VERSION:
    memset(e + OFF_VERSION, 0, 32);
    memcpy(e + OFF_VERSION, "9.9.9", 5);
    reseal(cache, e, len);
    ok = write_whole(path, e, len);
    break;
  case PAYLOAD_FLIP_RESEALED:
    for (long long i = 0; i < 8 && off + i < (long long)len; i++) e[off + i] ^= 0xff;
    reseal(cache, e, len);
    ok = write_whole(path, e, len);
    break;
  }
  free(e);
  return ok;
}

static void check_damage(const damage_case_t *c, bool compressed) {
  char *dir = make_temp_dir();
  warnings_t w;
  warnings_open(&w);
  tsr_disk_cache_t *cache = open_cache(dir, 0, w.stream);
  if (!cache) {
    TSR_FAIL_AT("%s: open failed", c->name);
    return;
  }
  enum { SIZE = 20000 };
  uint8_t *payload = malloc(SIZE);
  if (compressed) fill_text(payload, SIZE, 5);
  else fill_random(payload, SIZE, 5);
  test_key_t k, other;
  make_key(&k, "damaged entry key");
  make_key(&other, "another entry");
  char path[4096], other_path[4096];
  entry_path(dir, &k.key, path, sizeof path);
  entry_path(dir, &other.key, other_path, sizeof other_path);
  TSR_CHECK_OK(tsr_disk_cache_put(cache, &k.key, payload, SIZE));
  TSR_CHECK_OK(tsr_disk_cache_put(cache, &other.key, payload, SIZE));
  if (compressed) TSR_CHECK(file_size(path) < SIZE / 2);
  if (!apply_damage(c, cache, dir, path, &k.key, other_path)) {
    TSR_FAIL_AT("%s: could not damage %s: %s", c->name, path, strerror(errno));
  } else {
    int r = get_result(cache, &k.key, payload, SIZE);
    if (r != 1) TSR_FAIL_AT("%s (%s): get gave %d, expected a miss", c->name,
                            compressed ? "zstd" : "raw", r);
    if (exists(path)) TSR_FAIL_AT("%s: the bad entry is still there", c->name);
    const char *text = warnings_text(&w);
    if (warnings_lines(&w) != 1 || !strstr(text, path) ||
        !strstr(text, "removed bad entry") || (c->reason && !strstr(text, c->reason)))
      TSR_FAIL_AT("%s (%s): warning '%s', expected one line naming %s with '%s'",
                  c->name, compressed ? "zstd" : "raw", text, path,
                  c->reason ? c->reason : "");
    tsr_disk_cache_stats_t st;
    tsr_disk_cache_stats(cache, &st);
    TSR_CHECK_EQ_INT(st.bad_entries, 1);
    /* The other entry (a symlink's target) is untouched. */
    TSR_CHECK_EQ_INT(get_result(cache, &other.key, payload, SIZE), 0);
    /* Rebuilt. */
    TSR_CHECK_OK(tsr_disk_cache_put(cache, &k.key, payload, SIZE));
    TSR_CHECK_EQ_INT(get_result(cache, &k.key, payload, SIZE), 0);
    TSR_CHECK_EQ_INT(warnings_lines(&w), 1);
  }
  free(payload);
  tsr_disk_cache_close(cache);
  warnings_close(&w);
  remove_tree(dir);
  free(dir);
}

TSR_TEST(damaged_entries_are_misses_removed_and_rebuilt) {
  for (size_t i = 0; i < TSR_ARRAY_SIZE(damage_cases); i++) {
    check_damage(&damage_cases[i], true);
    if (!damage_cases[i].compressed_only) check_damage(&damage_cases[i], false);
  }
}

/* Two entries' files swapped: each is the other key's, and both go. */
TSR_TEST(swapped_entries_are_misses) {
  char *dir = make_temp_dir();
  warnings_t w;
  warnings_open(&w);
  tsr_disk_cache_t *cache = open_cache(dir, 0, w.stream);
  TSR_CHECK(cache != NULL);
  if (!cache) return;
  test_key_t a, b;
  make_key(&a, "swap a");
  make_key(&b, "swap b");
  char pa[4096], pb[4096], tmp[4200];
  entry_path(dir, &a.key, pa, sizeof pa);
  entry_path(dir, &b.key, pb, sizeof pb);
  pathf(tmp, sizeof tmp, "%s.swap", pa);
  TSR_CHECK_OK(tsr_disk_cache_put(cache, &a.key, "AAAA", 4));
  TSR_CHECK_OK(tsr_disk_cache_put(cache, &b.key, "BBBB", 4));
  TSR_CHECK(rename(pa, tmp) == 0 && rename(pb, pa) == 0 && rename(tmp, pb) == 0);
  TSR_CHECK_EQ_INT(get_result(cache, &a.key, "AAAA", 4), 1);
  TSR_CHECK_EQ_INT(get_result(cache, &b.key, "BBBB", 4), 1);
  TSR_CHECK(!exists(pa) && !exists(pb));
  TSR_CHECK_EQ_INT(warnings_lines(&w), 2);
  TSR_CHECK(strstr(warnings_text(&w), "misplaced") != NULL);
  TSR_CHECK_OK(tsr_disk_cache_put(cache, &a.key, "AAAA", 4));
  TSR_CHECK_EQ_INT(get_result(cache, &a.key, "AAAA", 4), 0);
  tsr_disk_cache_close(cache);
  warnings_close(&w);
  remove_tree(dir);
  free(dir);
}

/* A silent handle (warn_stream NULL) handles bad entries the same way. */
TSR_TEST(silent_handle_still_removes_bad_entries) {
  char *dir = make_temp_dir();
  tsr_disk_cache_t *cache = open_cache(dir, 0, NULL);
  TSR_CHECK(cache != NULL);
  if (!cache) return;
  test_key_t k;
  make_key(&k, "silent");
  char path[4096];
  entry_path(dir, &k.key, path, sizeof path);
  TSR_CHECK_OK(tsr_disk_cache_put(cache, &k.key, "xyz", 3));
  TSR_CHECK(truncate(path, 100) == 0);
  TSR_CHECK_EQ_INT(get_result(cache, &k.key, "xyz", 3), 1);
  TSR_CHECK(!exists(path));
  tsr_disk_cache_close(cache);
  remove_tree(dir);
  free(dir);
}

/* ---- scan, clear, verify ------------------------------------------------------ */

TSR_TEST(verify_finds_each_bad_entry) {
  char *dir = make_temp_dir();
  tsr_disk_cache_t *cache = open_cache(dir, 0, NULL);
  TSR_CHECK(cache != NULL);
  if (!cache) return;
  enum { N = 6 };
  test_key_t k[N];
  char path[N][4096];
  uint8_t payload[3000];
  fill_text(payload, sizeof payload, 1);
  for (int i = 0; i < N; i++) {
    make_key(&k[i], "verify %d", i);
    entry_path(dir, &k[i].key, path[i], sizeof path[i]);
    TSR_CHECK_OK(tsr_disk_cache_put(cache, &k[i].key, payload, sizeof payload));
  }
  /* A key whose forced hash is not the hash of its material. */
  test_key_t forged;
  make_key(&forged, "forged");
  forged.key.lo ^= 1;
  char forged_path[4096];
  entry_path(dir, &forged.key, forged_path, sizeof forged_path);
  TSR_CHECK_OK(tsr_disk_cache_put(cache, &forged.key, "f", 1));
  /* A copy of entry 5 under another key's name. */
  test_key_t moved;
  make_key(&moved, "never put");
  char moved_path[4096];
  entry_path(dir, &moved.key, moved_path, sizeof moved_path);
  size_t len = 0;
  uint8_t *image = read_whole(path[5], &len);
  char bucket[4200];
  pathf(bucket, sizeof bucket, "%s", moved_path);
  *strrchr(bucket, '/') = '\0';
  mkdir(bucket, 0755);
  TSR_CHECK(image && write_whole(moved_path, image, len));
  free(image);
  /* Damage entries 0 and 1; temp and stray files are not entries. */
  TSR_CHECK(truncate(path[0], 50) == 0);
  image = read_whole(path[1], &len);
  image[len - 1] ^= 1;
  TSR_CHECK(write_whole(path[1], image, len));
  free(image);
  /* A FIFO in place of an entry (verify must not wait on it), an entry
   * forged by a writer with another key, and a bucket that is a symbolic
   * link to a directory outside the cache. */
  test_key_t fifo_key, forger_key, link_key;
  make_key(&fifo_key, "a fifo");
  make_key(&forger_key, "forged by another writer");
  char fifo_path[4096], forger_path[4096], forger_key_file[4200], link_path[4200],
      outside[4200];
  entry_path(dir, &fifo_key.key, fifo_path, sizeof fifo_path);
  entry_path(dir, &forger_key.key, forger_path, sizeof forger_path);
  TSR_CHECK_OK(tsr_disk_cache_put(cache, &fifo_key.key, "x", 1));
  TSR_CHECK(unlink(fifo_path) == 0 && mkfifo(fifo_path, 0600) == 0);
  pathf(forger_key_file, sizeof forger_key_file, "%s.forger.key", dir);
  TSR_CHECK(forge_entry(dir, forger_key_file, &forger_key.key, "evil", 4));
  unlink(forger_key_file);
  for (int i = 0;; i++) { /* a key whose bucket does not exist yet */
    make_key(&link_key, "linked bucket %d", i);
    entry_path(dir, &link_key.key, link_path, sizeof link_path);
    *strrchr(link_path, '/') = '\0';
    if (!exists(link_path)) break;
  }
  pathf(outside, sizeof outside, "%s.outside", dir);
  TSR_CHECK(mkdir(outside, 0700) == 0 && symlink(outside, link_path) == 0);
  char stray[4200], temp[4200];
  pathf(stray, sizeof stray, "%s/v2/README", dir);
  pathf(temp, sizeof temp, "%s/.tmp-1-abcdef", bucket);
  TSR_CHECK(write_whole(stray, "x", 1) && write_whole(temp, "half", 4));

  char *report = NULL;
  size_t report_len = 0;
  FILE *f = open_memstream(&report, &report_len);
  uint64_t good = 0, nbad = 0;
  TSR_CHECK_OK(tsr_disk_cache_verify(cache, f, false, &good, &nbad));
  fflush(f);
  TSR_CHECK_EQ_INT(good, N - 2);
  TSR_CHECK_EQ_INT(nbad, 7);
  enum { BAD = 7 };
  const char *want[BAD] = {path[0], path[1], forged_path, moved_path, fifo_path,
                           forger_path, link_path};
  const char *why[BAD] = {"truncated", "authentication failed", "does not hash", "misplaced",
                          "a FIFO, not a regular file", "authentication failed",
                          "a symbolic link, not a bucket directory"};
  for (int i = 0; i < BAD; i++) {
    char line[4400];
    pathf(line, sizeof line, "bad: %s: ", want[i]);
    const char *at = report ? strstr(report, line) : NULL;
    if (!at || !strstr(at, why[i]))
      TSR_FAIL_AT("no line '%s... %s' in the report:\n%s", line, why[i],
                  report ? report : "");
    TSR_CHECK(exists(want[i])); /* reported, not removed */
  }
  fclose(f);
  free(report);
  TSR_CHECK_OK(tsr_disk_cache_verify(cache, NULL, true, &good, &nbad));
  TSR_CHECK_EQ_INT(nbad, BAD);
  for (int i = 0; i < BAD; i++) TSR_CHECK(!exists(want[i]));
  TSR_CHECK(exists(stray) && exists(temp));
  TSR_CHECK(exists(outside)); /* the link went, not what it pointed to */
  rmdir(outside);
  TSR_CHECK_OK(tsr_disk_cache_verify(cache, NULL, true, &good, &nbad));
  TSR_CHECK_EQ_INT(good, N - 2);
  TSR_CHECK_EQ_INT(nbad, 0);
  tsr_disk_cache_close(cache);
  remove_tree(dir);
  free(dir);
}

TSR_TEST(scan_and_clear) {
  char *dir = make_temp_dir();
  tsr_disk_cache_t *cache = open_cache(dir, 0, NULL);
  TSR_CHECK(cache != NULL);
  if (!cache) return;
  tsr_disk_cache_stats_t st;
  TSR_CHECK_OK(tsr_disk_cache_scan(cache, &st));
  TSR_CHECK_EQ_INT(st.entries, 0);
  TSR_CHECK_EQ_INT(st.bytes, 0);
  enum { N = 5 };
  test_key_t k[N];
  long long bytes = 0;
  char bucket[4200];
  for (int i = 0; i < N; i++) {
    make_key(&k[i], "scan %d", i);
    TSR_CHECK_OK(tsr_disk_cache_put(cache, &k[i].key, k[i].text, strlen(k[i].text)));
    char path[4096];
    entry_path(dir, &k[i].key, path, sizeof path);
    bytes += file_size(path);
    pathf(bucket, sizeof bucket, "%s", path);
    *strrchr(bucket, '/') = '\0';
  }
  char fresh[4300], stale[4300], stray[4300];
  pathf(fresh, sizeof fresh, "%s/.tmp-123-fresh1", bucket);
  pathf(stale, sizeof stale, "%s/.tmp-123-stale1", bucket);
  pathf(stray, sizeof stray, "%s/notes.txt", bucket);
  TSR_CHECK(write_whole(fresh, "abc", 3) && write_whole(stale, "abc", 3) &&
            write_whole(stray, "abc", 3));
  set_mtime(stale, time(NULL) - 2 * 3600);
  /* A FIFO in place of an entry and a bucket that is a symbolic link: not
   * counted by scan, removed by clear (the link, not its target). */
  test_key_t fifo_key, link_key;
  char fifo_path[4096], link_path[4096], outside[4200];
  make_key(&fifo_key, "scan fifo");
  entry_path(dir, &fifo_key.key, fifo_path, sizeof fifo_path);
  TSR_CHECK_OK(tsr_disk_cache_put(cache, &fifo_key.key, "x", 1));
  TSR_CHECK(unlink(fifo_path) == 0 && mkfifo(fifo_path, 0600) == 0);
  for (int i = 0;; i++) {
    make_key(&link_key, "scan link %d", i);
    entry_path(dir, &link_key.key, link_path, sizeof link_path);
    *strrchr(link_path, '/') = '\0';
    if (!exists(link_path)) break;
  }
  pathf(outside, sizeof outside, "%s.outside", dir);
  TSR_CHECK(mkdir(outside, 0700) == 0 && symlink(outside, link_path) == 0);
  TSR_CHECK_OK(tsr_disk_cache_scan(cache, &st));
  TSR_CHECK_EQ_INT(st.entries, N);
  TSR_CHECK_EQ_INT(st.bytes, bytes);
  TSR_CHECK_EQ_INT(st.temp_files, 2);
  TSR_CHECK_EQ_INT(st.puts, N + 1); /* the handle's counters come along */

  uint64_t removed = 99;
  TSR_CHECK_OK(tsr_disk_cache_clear(cache, &removed));
  TSR_CHECK_EQ_INT(removed, N + 2);
  TSR_CHECK(!exists(fifo_path) && !exists(link_path) && exists(outside));
  rmdir(outside);
  TSR_CHECK_OK(tsr_disk_cache_scan(cache, &st));
  TSR_CHECK_EQ_INT(st.entries, 0);
  TSR_CHECK_EQ_INT(st.bytes, 0);
  TSR_CHECK_EQ_INT(st.temp_files, 1); /* a put may still be writing it */
  TSR_CHECK(exists(fresh) && !exists(stale) && exists(stray));
  for (int i = 0; i < N; i++)
    TSR_CHECK_EQ_INT(get_result(cache, &k[i].key, k[i].text, strlen(k[i].text)), 1);
  TSR_CHECK_OK(tsr_disk_cache_clear(cache, NULL));
  /* Still usable afterwards. */
  TSR_CHECK_OK(tsr_disk_cache_put(cache, &k[0].key, "again", 5));
  TSR_CHECK_EQ_INT(get_result(cache, &k[0].key, "again", 5), 0);
  tsr_disk_cache_close(cache);
  remove_tree(dir);
  free(dir);
}

/* ---- The size limit ------------------------------------------------------------- */

TSR_TEST(over_the_limit_evicts_least_recently_used) {
  char *dir = make_temp_dir();
  enum { N = 11, SIZE = 8000 };
  test_key_t k[N];
  char path[N][4096];
  uint8_t payload[N][SIZE];
  for (int i = 0; i < N; i++) {
    make_key(&k[i], "lru %02d", i);
    entry_path(dir, &k[i].key, path[i], sizeof path[i]);
    fill_random(payload[i], SIZE, (uint64_t)i);
  }
  long long entry = HEADER + (long long)k[0].key.len + SIZE;
  /* Room for 10.5 entries: the 11th put trims to 90%, 9 entries. */
  tsr_disk_cache_t *cache = open_cache(dir, (uint64_t)(entry * 21 / 2), NULL);
  TSR_CHECK(cache != NULL);
  if (!cache) return;
  time_t now = time(NULL);
  for (int i = 0; i < N - 1; i++) {
    TSR_CHECK_OK(tsr_disk_cache_put(cache, &k[i].key, payload[i], SIZE));
    TSR_CHECK_EQ_INT(file_size(path[i]), entry);
  }
  for (int i = 0; i < N - 1; i++) set_mtime(path[i], now - 10000 + 100 * i);
  char bucket[4200], stale[4300], fresh[4300];
  pathf(bucket, sizeof bucket, "%s", path[0]);
  *strrchr(bucket, '/') = '\0';
  pathf(stale, sizeof stale, "%s/.tmp-9-oldone", bucket);
  pathf(fresh, sizeof fresh, "%s/.tmp-9-newone", bucket);
  TSR_CHECK(write_whole(stale, "x", 1) && write_whole(fresh, "x", 1));
  set_mtime(stale, now - 7200);
  /* Use the three oldest: they become the most recent. */
  for (int i = 0; i < 3; i++)
    TSR_CHECK_EQ_INT(get_result(cache, &k[i].key, payload[i], SIZE), 0);
  TSR_CHECK_OK(tsr_disk_cache_put(cache, &k[N - 1].key, payload[N - 1], SIZE));
  for (int i = 0; i < N; i++) {
    bool evicted = i == 3 || i == 4;
    if (exists(path[i]) == evicted)
      TSR_FAIL_AT("entry %d: %s, expected %s", i, evicted ? "kept" : "evicted",
                  evicted ? "evicted" : "kept");
  }
  TSR_CHECK(!exists(stale) && exists(fresh));
  tsr_disk_cache_stats_t st;
  TSR_CHECK_OK(tsr_disk_cache_scan(cache, &st));
  TSR_CHECK_EQ_INT(st.evictions, 2);
  TSR_CHECK_EQ_INT(st.entries, N - 2);
  TSR_CHECK(st.bytes <= st.max_bytes / 100 * 90);
  tsr_disk_cache_close(cache);
  remove_tree(dir);
  free(dir);
}

/* The size estimate file may be lost or damaged: trimming still happens. */
TSR_TEST(damaged_size_estimate_is_rebuilt) {
  char *dir = make_temp_dir();
  enum { SIZE = 4000 };
  uint8_t payload[SIZE];
  fill_random(payload, SIZE, 3);
  test_key_t k;
  make_key(&k, "estimate 00");
  long long entry = HEADER + (long long)k.key.len + SIZE;
  tsr_disk_cache_t *cache = open_cache(dir, (uint64_t)(entry * 5), NULL);
  TSR_CHECK(cache != NULL);
  if (!cache) return;
  char size_file[4200];
  pathf(size_file, sizeof size_file, "%s/v2/.size", dir);
  for (int i = 0; i < 12; i++) {
    make_key(&k, "estimate %02d", i);
    if (i % 3 == 0) TSR_CHECK(write_whole(size_file, "garbage", 7));
    if (i % 3 == 1) unlink(size_file);
    TSR_CHECK_OK(tsr_disk_cache_put(cache, &k.key, payload, SIZE));
    tsr_disk_cache_stats_t st;
    TSR_CHECK_OK(tsr_disk_cache_scan(cache, &st));
    if ((long long)st.bytes > entry * 5)
      TSR_FAIL_AT("after put %d: %llu bytes over the limit %lld", i,
                  (unsigned long long)st.bytes, entry * 5);
  }
  tsr_disk_cache_close(cache);
  remove_tree(dir);
  free(dir);
}

TSR_TEST(entries_larger_than_the_limit_are_not_stored) {
  char *dir = make_temp_dir();
  warnings_t w;
  warnings_open(&w);
  tsr_disk_cache_t *cache = open_cache(dir, 10000, w.stream);
  TSR_CHECK(cache != NULL);
  if (!cache) return;
  uint8_t payload[20000];
  fill_random(payload, sizeof payload, 8);
  test_key_t small, big;
  make_key(&small, "small");
  make_key(&big, "big");
  TSR_CHECK_OK(tsr_disk_cache_put(cache, &small.key, payload, 100));
  TSR_CHECK_OK(tsr_disk_cache_put(cache, &big.key, payload, sizeof payload));
  TSR_CHECK_OK(tsr_disk_cache_put(cache, &big.key, payload, sizeof payload));
  TSR_CHECK_EQ_INT(get_result(cache, &big.key, payload, sizeof payload), 1);
  TSR_CHECK_EQ_INT(get_result(cache, &small.key, payload, 100), 0);
  TSR_CHECK_EQ_INT(warnings_lines(&w), 1);
  TSR_CHECK(strstr(warnings_text(&w), "not storing") != NULL);
  tsr_disk_cache_close(cache);
  warnings_close(&w);
  remove_tree(dir);
  free(dir);
}

/* ---- Several processes, several threads ------------------------------------------- */

enum { STRESS_KEYS = 40, STRESS_OPS = 300, STRESS_CHILDREN = 4 };

/* Key i's payload: its size and bytes follow from i alone. */
static size_t stress_payload(int i, uint8_t *out) {
  size_t size = 200 + (size_t)((unsigned)i * 2654435761u % 5000u);
  if (i % 2) fill_random(out, size, (uint64_t)i);
  else fill_text(out, size, (uint64_t)i);
  return size;
}

/* One child: random gets (45%), puts (48%), verifies (5%) and clears (1%). The exit status says
 * what went wrong; the counters go up the pipe. */
static int stress_child(const char *dir, int child, int pipe_fd) {
  warnings_t w;
  warnings_open(&w);
  tsr_disk_cache_t *cache = open_cache(dir, 48 * 1024, w.stream);
  if (!cache) return 20;
  test_key_t keys[STRESS_KEYS];
  for (int i = 0; i < STRESS_KEYS; i++) make_key(&keys[i], "stress key %d", i);
  static uint8_t payload[8192];
  uint64_t rng = 1000 + (uint64_t)child;
  int rc = 0;
  for (int op = 0; op < STRESS_OPS && !rc; op++) {
    uint64_t r = splitmix(&rng);
    int i = (int)(r % STRESS_KEYS);
    unsigned kind = (unsigned)(r >> 32) % 128;
    size_t size = stress_payload(i, payload);
    if (kind < 58) {
      int g = get_result(cache, &keys[i].key, payload, size);
      if (g == 2) rc = 10;
      if (g == 3) rc = 12;
    } else if (kind < 120) {
      tsr_status_t s = tsr_disk_cache_put(cache, &keys[i].key, payload, size);
      if (s) {
        printf("# child %d: put: %s\n", child, tsr_status_message(s));
        tsr_status_free(s);
        rc = 11;
      }
    } else if (kind < 127) {
      uint64_t good, nbad;
      tsr_status_t s = tsr_disk_cache_verify(cache, NULL, true, &good, &nbad);
      if (s || nbad) rc = 14;
      tsr_status_free(s);
    } else {
      tsr_status_t s = tsr_disk_cache_clear(cache, NULL);
      if (s) rc = 16;
      tsr_status_free(s);
    }
  }
  tsr_disk_cache_stats_t st;
  tsr_disk_cache_stats(cache, &st);
  if (!rc && st.bad_entries) rc = 13;
  if (!rc && *warnings_text(&w)) {
    printf("# child %d warned: %s", child, warnings_text(&w));
    rc = 15;
  }
  if (write(pipe_fd, &st, sizeof st) != (ssize_t)sizeof st && !rc) rc = 17;
  tsr_disk_cache_close(cache);
  warnings_close(&w);
  return rc;
}

TSR_TEST(several_processes_share_a_directory) {
  char *dir = make_temp_dir();
  int fds[2];
  TSR_CHECK(pipe(fds) == 0);
  fflush(stdout);
  pid_t pids[STRESS_CHILDREN];
  for (int c = 0; c < STRESS_CHILDREN; c++) {
    pids[c] = fork();
    if (pids[c] == 0) {
      close(fds[0]);
      int rc = stress_child(dir, c, fds[1]);
      fflush(stdout);
      _exit(rc);
    }
  }
  close(fds[1]);
  static const char *const meaning[] = {
      [10] = "a get returned wrong bytes", [11] = "a put failed",
      [12] = "a get failed", [13] = "bad entries were seen",
      [14] = "verify found bad entries", [15] = "warnings were printed",
      [16] = "clear failed", [17] = "pipe", [20] = "open failed"};
  for (int c = 0; c < STRESS_CHILDREN; c++) {
    int status = 0;
    waitpid(pids[c], &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
      TSR_FAIL_AT("child %d: %s", c,
                  !WIFEXITED(status) ? "crashed"
                  : WEXITSTATUS(status) < (int)TSR_ARRAY_SIZE(meaning) &&
                          meaning[WEXITSTATUS(status)]
                      ? meaning[WEXITSTATUS(status)]
                      : "failed");
  }
  uint64_t evictions = 0, hits = 0, puts = 0;
  tsr_disk_cache_stats_t st;
  while (read(fds[0], &st, sizeof st) == (ssize_t)sizeof st) {
    evictions += st.evictions;
    hits += st.hits;
    puts += st.puts;
  }
  close(fds[0]);
  printf("# %llu puts, %llu hits, %llu evictions\n", (unsigned long long)puts,
         (unsigned long long)hits, (unsigned long long)evictions);
  TSR_CHECK(evictions > 0);
  TSR_CHECK(hits > 0);
  tsr_disk_cache_t *cache = open_cache(dir, 48 * 1024, stderr);
  TSR_CHECK(cache != NULL);
  if (cache) {
    uint64_t good = 0, nbad = 1;
    TSR_CHECK_OK(tsr_disk_cache_verify(cache, stderr, false, &good, &nbad));
    TSR_CHECK_EQ_INT(nbad, 0);
    TSR_CHECK_OK(tsr_disk_cache_scan(cache, &st));
    TSR_CHECK_EQ_INT(st.temp_files, 0);
    TSR_CHECK_EQ_INT(st.entries, good);
    /* Approximate: a put may find the cleanup lock taken and leave it to
     * the next one. */
    TSR_CHECK(st.bytes <= 2 * st.max_bytes);
    static uint8_t payload[8192];
    test_key_t k;
    for (int i = 0; i < STRESS_KEYS; i++) {
      make_key(&k, "stress key %d", i);
      size_t size = stress_payload(i, payload);
      TSR_CHECK(get_result(cache, &k.key, payload, size) <= 1);
    }
    tsr_disk_cache_close(cache);
  }
  remove_tree(dir);
  free(dir);
}

typedef struct thread_ctx {
  tsr_disk_cache_t *cache;
  int seed;
  int wrong, gets, puts;
} thread_ctx_t;

static void *thread_main(void *arg) {
  thread_ctx_t *t = arg;
  uint8_t *payload = malloc(8192);
  uint64_t rng = (uint64_t)t->seed;
  for (int op = 0; op < 200; op++) {
    uint64_t r = splitmix(&rng);
    int i = (int)(r % 16);
    test_key_t k;
    make_key(&k, "thread key %d", i);
    size_t size = stress_payload(i, payload);
    if ((r >> 32) % 2) {
      t->gets++;
      if (get_result(t->cache, &k.key, payload, size) > 1) t->wrong++;
    } else {
      t->puts++;
      tsr_status_t s = tsr_disk_cache_put(t->cache, &k.key, payload, size);
      if (s) t->wrong++;
      tsr_status_free(s);
    }
  }
  free(payload);
  return NULL;
}

TSR_TEST(several_threads_share_a_handle) {
  char *dir = make_temp_dir();
  tsr_disk_cache_t *cache = open_cache(dir, 32 * 1024, stderr);
  TSR_CHECK(cache != NULL);
  if (!cache) return;
  enum { THREADS = 4 };
  pthread_t th[THREADS];
  thread_ctx_t ctx[THREADS];
  for (int i = 0; i < THREADS; i++) {
    ctx[i] = (thread_ctx_t){cache, i + 1, 0, 0, 0};
    pthread_create(&th[i], NULL, thread_main, &ctx[i]);
  }
  int gets = 0, puts = 0;
  for (int i = 0; i < THREADS; i++) {
    pthread_join(th[i], NULL);
    TSR_CHECK_EQ_INT(ctx[i].wrong, 0);
    gets += ctx[i].gets;
    puts += ctx[i].puts;
  }
  tsr_disk_cache_stats_t st;
  tsr_disk_cache_stats(cache, &st);
  TSR_CHECK_EQ_INT(st.hits + st.misses, gets);
  TSR_CHECK_EQ_INT(st.puts, puts);
  TSR_CHECK_EQ_INT(st.bad_entries, 0);
  uint64_t good, nbad;
  TSR_CHECK_OK(tsr_disk_cache_verify(cache, stderr, false, &good, &nbad));
  TSR_CHECK_EQ_INT(nbad, 0);
  tsr_disk_cache_close(cache);
  remove_tree(dir);
  free(dir);
}

/* ---- Disk trouble -------------------------------------------------------------- */

/* RLIMIT_FSIZE stands in for a full disk (writes fail with EFBIG). In a
 * child, so the limit does not outlive the test. */
TSR_TEST(full_disk_fails_cleanly_and_reads_go_on) {
  char *dir = make_temp_dir();
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    tsr_test_case_failed = 0;
    warnings_t w;
    warnings_open(&w);
    tsr_disk_cache_t *cache = open_cache(dir, 0, w.stream);
    if (!cache) _exit(1);
    test_key_t a, b, c;
    make_key(&a, "stored before");
    make_key(&b, "too big 1");
    make_key(&c, "too big 2");
    TSR_CHECK_OK(tsr_disk_cache_put(cache, &a.key, "small entry", 11));
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit rl = {4096, 4096};
    TSR_CHECK(setrlimit(RLIMIT_FSIZE, &rl) == 0);
    static uint8_t big[65536];
    fill_random(big, sizeof big, 4);
    tsr_status_t s = tsr_disk_cache_put(cache, &b.key, big, sizeof big);
    TSR_CHECK_EQ_INT(tsr_status_code(s), TSR_IO_ERROR);
    TSR_CHECK(strstr(tsr_status_message(s), "File too large") != NULL);
    TSR_CHECK(strstr(tsr_status_message(s), dir) != NULL);
    tsr_status_free(s);
    TSR_CHECK_STATUS(tsr_disk_cache_put(cache, &c.key, big, sizeof big), TSR_IO_ERROR);
    /* One warning for both failures. */
    TSR_CHECK_EQ_INT(warnings_lines(&w), 1);
    TSR_CHECK(strstr(warnings_text(&w), "File too large") != NULL);
    TSR_CHECK_EQ_INT(get_result(cache, &a.key, "small entry", 11), 0);
    TSR_CHECK_EQ_INT(get_result(cache, &b.key, big, sizeof big), 1);
    tsr_disk_cache_stats_t st;
    TSR_CHECK_OK(tsr_disk_cache_scan(cache, &st));
    TSR_CHECK_EQ_INT(st.temp_files, 0);
    TSR_CHECK_EQ_INT(st.entries, 1);
    TSR_CHECK_EQ_INT(st.errors, 2);
    tsr_disk_cache_close(cache);
    warnings_close(&w);
    fflush(stdout);
    _exit(tsr_test_case_failed);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  TSR_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  remove_tree(dir);
  free(dir);
}

TSR_TEST(unusable_directories_fail_cleanly) {
  char *dir = make_temp_dir();
  char path[4300];
  /* The cache path runs through a regular file. */
  pathf(path, sizeof path, "%s/file", dir);
  TSR_CHECK(write_whole(path, "x", 1));
  pathf(path, sizeof path, "%s/file/cache", dir);
  tsr_disk_cache_options_t o;
  tsr_disk_cache_options_initialize(&o);
  o.dir = path;
  tsr_disk_cache_t *cache = (tsr_disk_cache_t *)&o; /* must stay untouched */
  tsr_status_t s = tsr_disk_cache_open(&o, &cache);
  TSR_CHECK_EQ_INT(tsr_status_code(s), TSR_IO_ERROR);
  TSR_CHECK(strstr(tsr_status_message(s), path) != NULL);
  TSR_CHECK(strstr(tsr_status_message(s), "Not a directory") != NULL);
  TSR_CHECK(cache == (tsr_disk_cache_t *)&o);
  tsr_status_free(s);
  /* The format directory is a regular file. */
  pathf(path, sizeof path, "%s/flat", dir);
  mkdir(path, 0755);
  pathf(path, sizeof path, "%s/flat/v2", dir);
  TSR_CHECK(write_whole(path, "x", 1));
  pathf(path, sizeof path, "%s/flat", dir);
  o.dir = path;
  s = tsr_disk_cache_open(&o, &cache);
  TSR_CHECK_EQ_INT(tsr_status_code(s), TSR_IO_ERROR);
  TSR_CHECK(strstr(tsr_status_message(s), "not a directory") != NULL);
  tsr_status_free(s);

  /* An existing cache whose bucket for one key is a regular file. */
  pathf(path, sizeof path, "%s/cache", dir);
  warnings_t w;
  warnings_open(&w);
  cache = open_cache(path, 0, w.stream);
  TSR_CHECK(cache != NULL);
  if (!cache) return;
  test_key_t k, other;
  make_key(&k, "blocked");
  char entry[4300], bucket[4300];
  entry_path(path, &k.key, entry, sizeof entry);
  pathf(bucket, sizeof bucket, "%s", entry);
  *strrchr(bucket, '/') = '\0';
  TSR_CHECK(write_whole(bucket, "not a directory", 15));
  for (int i = 0;; i++) { /* a key in another bucket */
    make_key(&other, "free %d", i);
    if ((other.key.hi >> 56) != (k.key.hi >> 56)) break;
  }
  /* Not a directory tessera made: removed as bad (one warning), and the
   * put makes the bucket. */
  TSR_CHECK_OK(tsr_disk_cache_put(cache, &k.key, "data", 4));
  TSR_CHECK_EQ_INT(warnings_lines(&w), 1);
  TSR_CHECK(strstr(warnings_text(&w), "a regular file, not a bucket directory") != NULL);
  TSR_CHECK_EQ_INT(get_result(cache, &k.key, "data", 4), 0);
  TSR_CHECK_OK(tsr_disk_cache_put(cache, &other.key, "data", 4));
  TSR_CHECK_EQ_INT(get_result(cache, &other.key, "data", 4), 0);
  uint64_t good = 0, nbad = 0;
  TSR_CHECK_OK(tsr_disk_cache_verify(cache, NULL, false, &good, &nbad));
  TSR_CHECK_EQ_INT(good, 2);
  TSR_CHECK_OK(tsr_disk_cache_clear(cache, NULL));

  /* Permissions: meaningless for root, who ignores them. */
  if (geteuid() != 0) {
    char v1[4300];
    pathf(v1, sizeof v1, "%s/v2", path);
    TSR_CHECK_OK(tsr_disk_cache_put(cache, &other.key, "data", 4));
    TSR_CHECK(chmod(v1, 0555) == 0);
    TSR_CHECK_STATUS(tsr_disk_cache_put(cache, &k.key, "data", 4), TSR_IO_ERROR);
    char other_bucket[4300];
    entry_path(path, &other.key, other_bucket, sizeof other_bucket);
    *strrchr(other_bucket, '/') = '\0';
    TSR_CHECK(chmod(other_bucket, 0555) == 0);
    TSR_CHECK_STATUS(tsr_disk_cache_put(cache, &other.key, "new", 3), TSR_IO_ERROR);
    TSR_CHECK_EQ_INT(get_result(cache, &other.key, "data", 4), 0);
    /* Opening a read-only cache works; reads work. */
    tsr_disk_cache_t *ro = open_cache(path, 0, NULL);
    TSR_CHECK(ro != NULL);
    if (ro) {
      TSR_CHECK_EQ_INT(get_result(ro, &other.key, "data", 4), 0);
      tsr_disk_cache_close(ro);
    }
    chmod(other_bucket, 0700);
    chmod(v1, 0700);
  } else {
    printf("# running as root: the chmod 0555 checks are skipped\n");
  }
  tsr_disk_cache_close(cache);
  warnings_close(&w);
  remove_tree(dir);
  free(dir);
}

/* A bucket that is a symbolic link to a directory outside the cache: a put
 * never writes through it (it replaces the link with a directory), a get
 * never reads through it. */
TSR_TEST(symlinked_buckets_are_never_followed) {
  char *dir = make_temp_dir();
  warnings_t w;
  warnings_open(&w);
  tsr_disk_cache_t *cache = open_cache(dir, 0, w.stream);
  TSR_CHECK(cache != NULL);
  if (!cache) return;
  test_key_t k;
  make_key(&k, "through a link");
  char entry[4096], bucket[4096], outside[4200], planted[4400];
  entry_path(dir, &k.key, entry, sizeof entry);
  pathf(bucket, sizeof bucket, "%s", entry);
  *strrchr(bucket, '/') = '\0';
  /* outside/ holds a genuine entry of the key, made by this cache. */
  TSR_CHECK_OK(tsr_disk_cache_put(cache, &k.key, "outside", 7));
  pathf(outside, sizeof outside, "%s.outside", dir);
  TSR_CHECK(rename(bucket, outside) == 0 && symlink(outside, bucket) == 0);
  pathf(planted, sizeof planted, "%s/%s", outside, strrchr(entry, '/') + 1);
  TSR_CHECK_EQ_INT(get_result(cache, &k.key, "outside", 7), 1);
  TSR_CHECK(strstr(warnings_text(&w), "removed bad bucket") != NULL);
  TSR_CHECK(strstr(warnings_text(&w), "a symbolic link, not a bucket directory") != NULL);
  TSR_CHECK(symlink(outside, bucket) == 0);
  TSR_CHECK_OK(tsr_disk_cache_put(cache, &k.key, "inside", 6));
  struct stat st;
  TSR_CHECK(lstat(bucket, &st) == 0 && S_ISDIR(st.st_mode));
  TSR_CHECK_EQ_INT(get_result(cache, &k.key, "inside", 6), 0);
  size_t len = 0;
  uint8_t *image = read_whole(planted, &len);
  /* Untouched: the entry of "outside", a byte longer than that of "inside". */
  TSR_CHECK(image && (long long)len == file_size(entry) + 1);
  free(image);
  tsr_disk_cache_stats_t stats;
  tsr_disk_cache_stats(cache, &stats);
  TSR_CHECK_EQ_INT(stats.bad_entries, 2);
  tsr_disk_cache_close(cache);
  warnings_close(&w);
  remove_tree(outside);
  remove_tree(dir);
  free(dir);
}

/* Opens `dir` with `shared`; the status (NULL: opened and closed). */
static tsr_status_t try_open(const char *dir, bool shared, const char *key_file) {
  tsr_disk_cache_options_t o;
  tsr_disk_cache_options_initialize(&o);
  o.dir = dir;
  o.shared = shared;
  o.key_file = key_file;
  tsr_disk_cache_t *cache = NULL;
  tsr_status_t s = tsr_disk_cache_open(&o, &cache);
  tsr_disk_cache_close(cache);
  return s;
}

/* TSR_IO_ERROR with `want` in the message. */
static void check_refused(tsr_status_t s, const char *want) {
  if (!s || tsr_status_code(s) != TSR_IO_ERROR || !strstr(tsr_status_message(s), want))
    TSR_FAIL_AT("expected an I/O error with '%s', got %s", want,
                s ? tsr_status_message(s) : "success");
  tsr_status_free(s);
}

/* A cache directory is used only if it is this user's and nobody else may
 * write it, unless shared on purpose. */
TSR_TEST(directory_owner_and_mode) {
  char *dir = make_temp_dir();
  char path[4300];
  /* A new cache is private: 0700 directories, 0600 files. */
  pathf(path, sizeof path, "%s/new", dir);
  tsr_disk_cache_t *cache = open_cache(path, 0, stderr);
  TSR_CHECK(cache != NULL);
  test_key_t k;
  make_key(&k, "modes");
  if (cache) {
    TSR_CHECK_OK(tsr_disk_cache_put(cache, &k.key, "m", 1));
    tsr_disk_cache_close(cache);
  }
  char entry[4096], bucket[4096];
  entry_path(path, &k.key, entry, sizeof entry);
  pathf(bucket, sizeof bucket, "%s", entry);
  *strrchr(bucket, '/') = '\0';
  struct stat st;
  TSR_CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0700);
  TSR_CHECK(stat(bucket, &st) == 0 && (st.st_mode & 0777) == 0700);
  TSR_CHECK(stat(entry, &st) == 0 && (st.st_mode & 0777) == 0600);
  /* Group- or world-writable: refused, unless shared. */
  TSR_CHECK(chmod(path, 0770) == 0);
  check_refused(try_open(path, false, NULL), "has mode 0770, writable by its group");
  TSR_CHECK_OK(try_open(path, true, NULL));
  TSR_CHECK(chmod(path, 0757) == 0);
  check_refused(try_open(path, false, NULL), "writable by others");
  TSR_CHECK(setenv("TESSERA_CACHE_SHARED", "1", 1) == 0);
  TSR_CHECK_OK(try_open(path, false, NULL));
  unsetenv("TESSERA_CACHE_SHARED");
  TSR_CHECK(chmod(path, 0755) == 0);
  TSR_CHECK_OK(try_open(path, false, NULL));
  /* The format directory is checked too. */
  pathf(bucket, sizeof bucket, "%s/v2", path);
  TSR_CHECK(chmod(bucket, 0777) == 0);
  check_refused(try_open(path, false, NULL), "writable by others");
  TSR_CHECK(chmod(bucket, 0700) == 0);
  /* Another user's: refused, unless shared (root can make one). */
  if (geteuid() == 0) {
    TSR_CHECK(chown(path, 65534, 65534) == 0);
    check_refused(try_open(path, false, NULL), "belongs to uid 65534, not to this user");
    TSR_CHECK_OK(try_open(path, true, NULL));
    TSR_CHECK(chown(path, 0, 0) == 0);
  } else {
    printf("# not root: another user's directory is covered by test_cache_run\n");
  }
  remove_tree(dir);
  free(dir);
}

/* Whether directory `path` has no entries (and exists). */
static bool is_empty_dir(const char *path) {
  DIR *d = opendir(path);
  if (!d) return false;
  bool empty = true;
  for (struct dirent *e; empty && (e = readdir(d));)
    empty = strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0;
  closedir(d);
  return empty;
}

/* A refused cache directory is refused before anything is written into it:
 * no v2/ is made in another user's directory, or in one others may write. */
TSR_TEST(refused_directories_are_left_unchanged) {
  char *dir = make_temp_dir();
  char path[4300];
  pathf(path, sizeof path, "%s/open", dir);
  TSR_CHECK(mkdir(path, 0700) == 0);
  TSR_CHECK(chmod(path, 0777) == 0); /* the umask would have hidden it */
  check_refused(try_open(path, false, NULL), "has mode 0777, writable by others");
  TSR_CHECK(is_empty_dir(path));
  if (geteuid() == 0) {
    pathf(path, sizeof path, "%s/theirs", dir);
    TSR_CHECK(mkdir(path, 0700) == 0);
    TSR_CHECK(chown(path, 65534, 65534) == 0);
    check_refused(try_open(path, false, NULL), "belongs to uid 65534, not to this user");
    TSR_CHECK(is_empty_dir(path));
    struct stat st;
    TSR_CHECK(stat(path, &st) == 0 && st.st_uid == 65534 && (st.st_mode & 07777) == 0700);
  } else {
    printf("# not root: another user's directory cannot be made here\n");
  }
  remove_tree(dir);
  free(dir);
}

/* The key file: made 0600 in a 0700 directory on first use; refused when
 * others may use it, when it is another user's (unless shared), not a
 * regular file (a FIFO must not hang the open) or not 32 bytes. */
TSR_TEST(key_file_checks) {
  char *dir = make_temp_dir();
  char cache_dir[4300], key_dir[4300], key[4400];
  pathf(cache_dir, sizeof cache_dir, "%s/cache", dir);
  pathf(key_dir, sizeof key_dir, "%s/config/tessera", dir);
  pathf(key, sizeof key, "%s/cache.key", key_dir);
  TSR_CHECK_OK(try_open(cache_dir, false, key));
  struct stat st;
  TSR_CHECK(stat(key, &st) == 0 && (st.st_mode & 0777) == 0600 && st.st_size == 32);
  TSR_CHECK(stat(key_dir, &st) == 0 && (st.st_mode & 0777) == 0700);
  size_t len = 0;
  uint8_t *first = read_whole(key, &len);
  TSR_CHECK_OK(try_open(cache_dir, false, key));
  uint8_t *second = read_whole(key, &len);
  TSR_CHECK(first && second && memcmp(first, second, 32) == 0); /* kept */
  free(first);
  free(second);
  TSR_CHECK(chmod(key, 0640) == 0);
  check_refused(try_open(cache_dir, false, key), "has mode 0640");
  TSR_CHECK_OK(try_open(cache_dir, true, key)); /* a shared key: the group may */
  TSR_CHECK(chmod(key, 0604) == 0);
  check_refused(try_open(cache_dir, true, key), "has mode 0604");
  TSR_CHECK(chmod(key, 0600) == 0);
  if (geteuid() == 0) {
    TSR_CHECK(chown(key, 65534, 65534) == 0);
    check_refused(try_open(cache_dir, false, key), "belongs to uid 65534");
    TSR_CHECK_OK(try_open(cache_dir, true, key));
    TSR_CHECK(chown(key, 0, 0) == 0);
  }
  TSR_CHECK(truncate(key, 31) == 0);
  check_refused(try_open(cache_dir, false, key), "has 31 bytes, expected 32");
  TSR_CHECK(unlink(key) == 0 && mkfifo(key, 0600) == 0);
  check_refused(try_open(cache_dir, false, key), "is not a regular file");
  TSR_CHECK(unlink(key) == 0);
  remove_tree(dir);
  free(dir);
}

/* Every allocation of get and put failing in turn: a clean status, no leak
 * (ASan), and the cache still consistent afterwards. */
TSR_TEST(allocation_failures) {
  char *dir = make_temp_dir();
  tsr_disk_cache_t *cache = open_cache(dir, 0, NULL);
  TSR_CHECK(cache != NULL);
  if (!cache) return;
  uint8_t payload[5000];
  fill_text(payload, sizeof payload, 2);
  test_key_t k;
  make_key(&k, "allocation");
  int injected = 0;
  for (long n = 0; n < 12; n++) {
    tsr_alloc_fail_after(n);
    tsr_status_t s = tsr_disk_cache_put(cache, &k.key, payload, sizeof payload);
    tsr_alloc_fail_after(-1);
    if (s) {
      injected++;
      TSR_CHECK_EQ_INT(tsr_status_code(s), TSR_OUT_OF_MEMORY);
      tsr_status_free(s);
    }
    void *out = NULL;
    size_t size = 0;
    tsr_alloc_fail_after(n);
    s = tsr_disk_cache_get(cache, &k.key, &out, &size);
    tsr_alloc_fail_after(-1);
    if (s) {
      injected++;
      tsr_status_code_t code = tsr_status_code(s);
      TSR_CHECK(code == TSR_OUT_OF_MEMORY || code == TSR_NOT_FOUND);
      tsr_status_free(s);
    } else {
      TSR_CHECK(size == sizeof payload && memcmp(out, payload, size) == 0);
      tsr_disk_cache_free(out);
    }
  }
  TSR_CHECK(injected > 0);
  TSR_CHECK_EQ_INT(get_result(cache, &k.key, payload, sizeof payload), 0);
  TSR_CHECK_EQ_INT(count_temp_files(dir), 0);
  tsr_disk_cache_close(cache);
  remove_tree(dir);
  free(dir);
}

/* ---- Environment ------------------------------------------------------------------ */

static void restore_env(const char *name, const char *saved) {
  if (saved) setenv(name, saved, 1);
  else unsetenv(name);
}

static char *saved_env(const char *name) {
  const char *v = getenv(name);
  return v ? strdup(v) : NULL;
}

TSR_TEST(directory_from_options_and_environment) {
  char *dir = make_temp_dir();
  char *env_dir = saved_env("TESSERA_CACHE_DIR");
  char *xdg = saved_env("XDG_CACHE_HOME");
  char *home = saved_env("HOME");
  char want[4300], opt[4300];
  tsr_disk_cache_t *cache;

  pathf(want, sizeof want, "%s/from-env/deep", dir);
  setenv("TESSERA_CACHE_DIR", want, 1);
  pathf(opt, sizeof opt, "%s/from-options", dir);
  cache = open_cache(opt, 0, NULL);
  TSR_CHECK(cache && strcmp(tsr_disk_cache_dir(cache), opt) == 0);
  tsr_disk_cache_close(cache);
  cache = open_cache(NULL, 0, NULL);
  TSR_CHECK(cache && strcmp(tsr_disk_cache_dir(cache), want) == 0);
  tsr_disk_cache_close(cache);
  struct stat st;
  TSR_CHECK(stat(want, &st) == 0 && S_ISDIR(st.st_mode));

  unsetenv("TESSERA_CACHE_DIR");
  pathf(want, sizeof want, "%s/xdg", dir);
  setenv("XDG_CACHE_HOME", want, 1);
  strcat(want, "/tessera");
  cache = open_cache(NULL, 0, NULL);
  TSR_CHECK(cache && strcmp(tsr_disk_cache_dir(cache), want) == 0);
  tsr_disk_cache_close(cache);

  setenv("XDG_CACHE_HOME", "relative/ignored", 1);
  pathf(want, sizeof want, "%s/home", dir);
  setenv("HOME", want, 1);
  strcat(want, "/.cache/tessera");
  cache = open_cache(NULL, 0, NULL);
  TSR_CHECK(cache && strcmp(tsr_disk_cache_dir(cache), want) == 0);
  tsr_disk_cache_close(cache);
  TSR_CHECK(stat(want, &st) == 0 && S_ISDIR(st.st_mode));

  /* Trailing slashes go. */
  pathf(opt, sizeof opt, "%s/slashes//", dir);
  cache = open_cache(opt, 0, NULL);
  opt[strlen(opt) - 2] = '\0';
  TSR_CHECK(cache && strcmp(tsr_disk_cache_dir(cache), opt) == 0);
  tsr_disk_cache_close(cache);

  restore_env("TESSERA_CACHE_DIR", env_dir);
  restore_env("XDG_CACHE_HOME", xdg);
  restore_env("HOME", home);
  free(env_dir);
  free(xdg);
  free(home);
  remove_tree(dir);
  free(dir);
}

TSR_TEST(size_limit_from_environment) {
  char *dir = make_temp_dir();
  char *saved = saved_env("TESSERA_CACHE_MAX_SIZE");
  struct {
    const char *value;
    uint64_t bytes;
    bool warns;
  } cases[] = {
      {NULL, 1ull << 30, false},    {"123", 123, false},
      {"10K", 10240, false},        {"64M", 64ull << 20, false},
      {"1G", 1ull << 30, false},    {"2g", 2ull << 30, false},
      {"5MiB", 5ull << 20, false},  {"7KB", 7ull << 10, false},
      {"1T", 1ull << 40, false},    {"900B", 900, false},
      {"", 1ull << 30, false},      {"abc", 1ull << 30, true},
      {"0", 1ull << 30, true},      {"12Q", 1ull << 30, true},
      {"-5M", 1ull << 30, true},    {"99999999999999999999", 1ull << 30, true},
      {"17179869184G", 1ull << 30, true},
  };
  for (size_t i = 0; i < TSR_ARRAY_SIZE(cases); i++) {
    restore_env("TESSERA_CACHE_MAX_SIZE", cases[i].value);
    warnings_t w;
    warnings_open(&w);
    tsr_disk_cache_t *cache = open_cache(dir, 0, w.stream);
    TSR_CHECK(cache != NULL);
    if (!cache) continue;
    tsr_disk_cache_stats_t st;
    tsr_disk_cache_stats(cache, &st);
    if (st.max_bytes != cases[i].bytes || (warnings_lines(&w) == 1) != cases[i].warns)
      TSR_FAIL_AT("TESSERA_CACHE_MAX_SIZE=%s: limit %llu, warnings '%s'",
                  cases[i].value ? cases[i].value : "(unset)",
                  (unsigned long long)st.max_bytes, warnings_text(&w));
    tsr_disk_cache_close(cache);
    warnings_close(&w);
  }
  /* options->max_bytes wins over the environment. */
  setenv("TESSERA_CACHE_MAX_SIZE", "10K", 1);
  tsr_disk_cache_t *cache = open_cache(dir, 777, NULL);
  tsr_disk_cache_stats_t st;
  tsr_disk_cache_stats(cache, &st);
  TSR_CHECK_EQ_INT(st.max_bytes, 777);
  tsr_disk_cache_close(cache);
  restore_env("TESSERA_CACHE_MAX_SIZE", saved);
  free(saved);
  remove_tree(dir);
  free(dir);
}

TSR_TEST(disabled_by_environment) {
  char *saved = saved_env("TESSERA_CACHE");
  const char *off[] = {"off", "OFF", "0", "false", "False", "no", "NO"};
  const char *on[] = {"on", "1", "yes", "", "offf", "true"};
  for (size_t i = 0; i < TSR_ARRAY_SIZE(off); i++) {
    setenv("TESSERA_CACHE", off[i], 1);
    if (!tsr_disk_cache_disabled_by_env()) TSR_FAIL_AT("'%s' should disable", off[i]);
  }
  for (size_t i = 0; i < TSR_ARRAY_SIZE(on); i++) {
    setenv("TESSERA_CACHE", on[i], 1);
    if (tsr_disk_cache_disabled_by_env()) TSR_FAIL_AT("'%s' should not disable", on[i]);
  }
  unsetenv("TESSERA_CACHE");
  TSR_CHECK(!tsr_disk_cache_disabled_by_env());
  restore_env("TESSERA_CACHE", saved);
  free(saved);
}

TSR_TEST(bad_arguments) {
  char *dir = make_temp_dir();
  tsr_disk_cache_t *cache = open_cache(dir, 0, NULL);
  TSR_CHECK(cache != NULL);
  if (!cache) return;
  test_key_t k;
  make_key(&k, "args");
  void *out;
  size_t size;
  TSR_CHECK_STATUS(tsr_disk_cache_open(NULL, NULL), TSR_INVALID_ARGUMENT);
  TSR_CHECK_STATUS(tsr_disk_cache_get(cache, NULL, &out, &size), TSR_INVALID_ARGUMENT);
  TSR_CHECK_STATUS(tsr_disk_cache_get(cache, &k.key, NULL, &size), TSR_INVALID_ARGUMENT);
  TSR_CHECK_STATUS(tsr_disk_cache_put(cache, &k.key, NULL, 3), TSR_INVALID_ARGUMENT);
  tsr_cache_key_t no_bytes = {1, 2, NULL, 4};
  TSR_CHECK_STATUS(tsr_disk_cache_put(cache, &no_bytes, "x", 1), TSR_INVALID_ARGUMENT);
  /* An empty key is a key. */
  tsr_cache_key_t empty;
  tsr_cache_key_make(&empty, NULL, 0);
  TSR_CHECK_OK(tsr_disk_cache_put(cache, &empty, "for the empty key", 17));
  TSR_CHECK_EQ_INT(get_result(cache, &empty, "for the empty key", 17), 0);
  uint64_t good = 0, nbad = 0;
  TSR_CHECK_OK(tsr_disk_cache_verify(cache, NULL, false, &good, &nbad));
  TSR_CHECK_EQ_INT(good, 1);
  tsr_disk_cache_close(cache);
  tsr_disk_cache_close(NULL);
  remove_tree(dir);
  free(dir);
}

int main(void) {
  /* The tests choose their directories and limits themselves. */
  unsetenv("TESSERA_CACHE_DIR");
  unsetenv("TESSERA_CACHE_MAX_SIZE");
  TSR_RUN(round_trip_sizes_and_kinds);
  TSR_RUN(same_hash_other_material_is_a_miss);
  TSR_RUN(damaged_entries_are_misses_removed_and_rebuilt);
  TSR_RUN(swapped_entries_are_misses);
  TSR_RUN(silent_handle_still_removes_bad_entries);
  TSR_RUN(verify_finds_each_bad_entry);
  TSR_RUN(scan_and_clear);
  TSR_RUN(over_the_limit_evicts_least_recently_used);
  TSR_RUN(damaged_size_estimate_is_rebuilt);
  TSR_RUN(entries_larger_than_the_limit_are_not_stored);
  TSR_RUN(several_processes_share_a_directory);
  TSR_RUN(several_threads_share_a_handle);
  TSR_RUN(full_disk_fails_cleanly_and_reads_go_on);
  TSR_RUN(unusable_directories_fail_cleanly);
  TSR_RUN(symlinked_buckets_are_never_followed);
  TSR_RUN(directory_owner_and_mode);
  TSR_RUN(refused_directories_are_left_unchanged);
  TSR_RUN(key_file_checks);
  TSR_RUN(allocation_failures);
  TSR_RUN(directory_from_options_and_environment);
  TSR_RUN(size_limit_from_environment);
  TSR_RUN(disabled_by_environment);
  TSR_RUN(bad_arguments);
  return tsr_test_done();
}
