/* The on-disk cache (tessera/cache.h, docs/cache.md "On disk"): one file per
 * entry at <dir>/v2/<2 hex>/<30 hex>.tsc, written atomically (temporary file,
 * fsync, rename), authenticated with a keyed MAC and validated in full on
 * every read, trimmed least recently used first. Every file is reached from
 * the format directory's descriptor, never through a symbolic link, and
 * opened as a regular file only. Safe between threads and processes:
 * readers take no locks. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sodium.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>
#include <zstd.h>

#include "base/base_internal.h"
#include "cache/files.h"
#include "tessera/cache.h"

/* ---- Layout and entry format (docs/cache.md has the same table) ----------- */

#define FORMAT_DIR "v2"             /* one directory per entry format */
#define ENTRY_SUFFIX ".tsc"
#define TEMP_PREFIX ".tmp-"         /* .tmp-<pid>-XXXXXX beside the entries */
#define SIZE_FILE ".size"           /* the running size estimate */
#define LOCK_FILE ".cleanup.lock"   /* held (non-blocking) while trimming */

enum {
  FORMAT_VERSION = 2,
  HEADER_SIZE = 128,
  VERSION_FIELD = 32, /* the tessera version string, NUL-padded */
  HASH_HEX = 32,      /* tsr_cache_key_hex */
  BUCKET_HEX = 2,     /* 256 first-level directories */
  NAME_HEX = HASH_HEX - BUCKET_HEX,
  SUFFIX_LEN = sizeof ENTRY_SUFFIX - 1,
  PATH_TAIL = 1 + BUCKET_HEX + 1 + NAME_HEX + SUFFIX_LEN + 1, /* "/ab/...tsc\0" */
};

/* Byte offsets of the little-endian header fields. */
enum {
  OFF_MAGIC = 0,            /* 8 bytes "TSRCACHE" */
  OFF_FORMAT = 8,           /* u32 FORMAT_VERSION */
  OFF_HEADER_SIZE = 12,     /* u32 HEADER_SIZE */
  OFF_VERSION = 16,         /* char[32] TSR_VERSION_STRING */
  OFF_KEY_LO = 48,          /* u64 key hash, low half */
  OFF_KEY_HI = 56,          /* u64 key hash, high half */
  OFF_KEY_LEN = 64,         /* u64 bytes of key material after the header */
  OFF_PAYLOAD_SIZE = 72,    /* u64 payload bytes, uncompressed */
  OFF_STORED_SIZE = 80,     /* u64 payload bytes as stored */
  OFF_COMPRESSION = 88,     /* u32 COMPRESSION_* */
  OFF_RESERVED = 92,        /* u32 0 */
  OFF_MAC = 96,             /* 32 bytes: keyed BLAKE2b-256 of bytes [0, 96),
                               the key material and the stored payload */
  MAC_BYTES = 32
};
_Static_assert(OFF_MAC + MAC_BYTES == HEADER_SIZE, "header layout");
_Static_assert(MAC_BYTES >= crypto_generichash_BYTES_MIN &&
               MAC_BYTES <= crypto_generichash_BYTES_MAX, "a BLAKE2b output size");
_Static_assert(TSR_CACHE_MAC_KEY_BYTES >= crypto_generichash_KEYBYTES_MIN &&
               TSR_CACHE_MAC_KEY_BYTES <= crypto_generichash_KEYBYTES_MAX,
               "a BLAKE2b key size");
_Static_assert(sizeof TSR_VERSION_STRING <= VERSION_FIELD,
               "the version string fits its header field with a NUL");

enum { COMPRESSION_NONE = 0, COMPRESSION_ZSTD = 1 };

static const char entry_magic[8] = {'T', 'S', 'R', 'C', 'A', 'C', 'H', 'E'};

/* The size file: magic, bytes, puts since the last full scan, XXH3-64 of the
 * first 24 bytes. */
enum { SIZE_RECORD = 32 };
static const char size_magic[8] = {'T', 'S', 'R', 'S', 'I', 'Z', 'E', '1'};

#define DEFAULT_MAX_BYTES ((uint64_t)1 << 30)
#define TOUCH_AFTER_SECONDS 60    /* a hit refreshes an mtime older than this */
#define STALE_TEMP_SECONDS 3600   /* temp files older than this are leftovers */
#define RESCAN_PUTS 4096          /* full scan at least this often, to fix drift */
#define TRIM_PERCENT 90           /* trimming stops at 90% of the limit */
#define UNCOUNTED_SCAN_PUTS 64    /* without a usable size file: scan this often */
/* zstd emits at most a 128 KiB block per 4 stored bytes (3-byte block header
 * + 1 RLE byte), so no valid frame inflates more than 32768 times. A header
 * that claims more is rejected before anything is allocated. */
#define ZSTD_MAX_RATIO 32768

/* ---- The handle ------------------------------------------------------------ */

struct tsr_disk_cache {
  char *dir;                   /* the cache directory, as resolved */
  char *format_dir;            /* dir/v2, for messages */
  size_t format_dir_len;
  int format_fd;               /* dir/v2, opened once: every file is reached
                                  from it, never through a path */
  bool shared;                 /* TESSERA_CACHE_SHARED: no ownership checks */
  mode_t dir_mode, file_mode;  /* of buckets and files made (less the umask) */
  uint8_t mac_key[TSR_CACHE_MAC_KEY_BYTES];
  char *key_path;
  uint64_t max_bytes;
  int compression_level;
  FILE *warn_stream;           /* NULL: silent */
  atomic_uint_fast64_t hits, misses, puts, bad_entries, evictions, errors;
  atomic_uint_fast64_t uncounted_puts; /* puts the size file did not record */
  atomic_bool disk_error_reported;     /* the first disk error was warned of */
  atomic_bool oversize_reported;
};

/* ---- Small helpers ----------------------------------------------------------- */

static void put_u32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put_u64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get_u32(const uint8_t *p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}
static uint64_t get_u64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}

static void counter_add(atomic_uint_fast64_t *counter, uint64_t n) {
  atomic_fetch_add_explicit(counter, n, memory_order_relaxed);
}

/* One warning line "tessera: cache: ...", written with a single call so that
 * lines from several threads do not interleave. */
static void warn(const tsr_disk_cache_t *cache, const char *fmt, ...)
    TSR_PRINTF(2, 3);
static void warn(const tsr_disk_cache_t *cache, const char *fmt, ...) {
  if (!cache->warn_stream) return;
  tsr_strbuf_t sb;
  tsr_strbuf_initialize(&sb);
  tsr_strbuf_puts(&sb, "tessera: cache: ");
  va_list ap;
  va_start(ap, fmt);
  tsr_strbuf_vprintf(&sb, fmt, ap);
  va_end(ap);
  tsr_strbuf_puts(&sb, "\n");
  if (!sb.failed) {
    fputs(sb.data, cache->warn_stream);
    fflush(cache->warn_stream);
  }
  tsr_strbuf_deinitialize(&sb);
}

/* Counts a disk error and warns of the first one of this handle; returns
 * `status` for the caller to pass on. */
static tsr_status_t disk_error(tsr_disk_cache_t *cache, tsr_status_t status) {
  counter_add(&cache->errors, 1);
  if (!atomic_exchange(&cache->disk_error_reported, true))
    warn(cache, "%s (further disk errors of this cache are not reported)",
         tsr_status_message(status));
  return status;
}

static char *concat(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b), total;
  if (!tsr_add_size(la, lb + 1, &total)) return NULL;
  char *s = tsr_malloc(total);
  if (!s) return NULL;
  memcpy(s, a, la);
  memcpy(s + la, b, lb + 1);
  return s;
}

/* The bucket ("ab") and file name ("<30 hex>.tsc") of a hash. */
static void entry_names(uint64_t lo, uint64_t hi, char bucket[BUCKET_HEX + 1],
                        char name[NAME_HEX + SUFFIX_LEN + 1]) {
  tsr_cache_key_t k = {lo, hi, NULL, 0};
  char hex[HASH_HEX + 1];
  tsr_cache_key_hex(&k, hex);
  memcpy(bucket, hex, BUCKET_HEX);
  bucket[BUCKET_HEX] = '\0';
  memcpy(name, hex + BUCKET_HEX, NAME_HEX);
  memcpy(name + NAME_HEX, ENTRY_SUFFIX, SUFFIX_LEN + 1);
}

/* <format_dir>/<bucket>/<name>.tsc for a hash, for messages; the caller
 * frees. */
static char *hash_path(const tsr_disk_cache_t *cache, uint64_t lo, uint64_t hi) {
  char bucket[BUCKET_HEX + 1], name[NAME_HEX + SUFFIX_LEN + 1];
  entry_names(lo, hi, bucket, name);
  tsr_strbuf_t sb;
  tsr_strbuf_initialize(&sb);
  tsr_strbuf_printf(&sb, "%s/%s/%s", cache->format_dir, bucket, name);
  if (!sb.failed) return tsr_strbuf_take(&sb);
  tsr_strbuf_deinitialize(&sb);
  return NULL;
}

static int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

/* Whether `name` in directory `bucket` is an entry file name; if so, the
 * hash it spells. */
static bool parse_entry_name(const char *bucket, const char *name,
                             uint64_t *out_lo, uint64_t *out_hi) {
  if (strlen(name) != NAME_HEX + SUFFIX_LEN ||
      strcmp(name + NAME_HEX, ENTRY_SUFFIX) != 0)
    return false;
  char hex[HASH_HEX];
  memcpy(hex, bucket, BUCKET_HEX);
  memcpy(hex + BUCKET_HEX, name, NAME_HEX);
  uint64_t hi = 0, lo = 0;
  for (int i = 0; i < HASH_HEX; i++) {
    int d = hex_digit(hex[i]);
    if (d < 0) return false;
    if (i < 16) hi = (hi << 4) | (uint64_t)d;
    else lo = (lo << 4) | (uint64_t)d;
  }
  *out_lo = lo;
  *out_hi = hi;
  return true;
}

/* Reads exactly n bytes at `offset`: 0, or -1 with errno (EIO, ...), or 1 if
 * the file ended first (it shrank after fstat). */
static int pread_all(int fd, void *buf, size_t n, uint64_t offset) {
  uint8_t *p = buf;
  while (n) {
    ssize_t r = pread(fd, p, TSR_MIN(n, (size_t)1 << 30), (off_t)offset);
    if (r < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (r == 0) return 1;
    p += r;
    n -= (size_t)r;
    offset += (uint64_t)r;
  }
  return 0;
}

static int64_t mtime_ns(const struct stat *st) {
  return (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
}

static bool same_file(const struct stat *a, const struct stat *b) {
  return a->st_ino == b->st_ino && a->st_dev == b->st_dev;
}

/* Unlinks dir_fd/name if it is still the file `st` describes: another
 * process may have renamed a fresh entry in since it was read, and that one
 * must stay. (The window between the check and the unlink is a few
 * instructions; losing it costs a miss, never wrong data.) Returns 0 when
 * removed (or already gone), else an errno. */
static int remove_if_same(int dir_fd, const char *name, const struct stat *st) {
  struct stat now;
  if (fstatat(dir_fd, name, &now, AT_SYMLINK_NOFOLLOW) != 0)
    return errno == ENOENT ? 0 : errno;
  if (!same_file(&now, st)) return 0;
  if (unlinkat(dir_fd, name, S_ISDIR(now.st_mode) ? AT_REMOVEDIR : 0) != 0)
    return errno == ENOENT ? 0 : errno;
  return 0;
}

/* "123", "10K", "64M", "1G", "2T", optionally followed by "B" or "iB"
 * (binary multiples). False if malformed, zero or overflowing. */
static bool parse_size(const char *s, uint64_t *out) {
  uint64_t v = 0;
  const char *p = s;
  if (*p < '0' || *p > '9') return false;
  for (; *p >= '0' && *p <= '9'; p++)
    if (__builtin_mul_overflow(v, 10, &v) ||
        __builtin_add_overflow(v, (uint64_t)(*p - '0'), &v))
      return false;
  unsigned shift = 0;
  switch (*p) {
  case 'k': case 'K': shift = 10; break;
  case 'm': case 'M': shift = 20; break;
  case 'g': case 'G': shift = 30; break;
  case 't': case 'T': shift = 40; break;
  default: break;
  }
  if (shift) {
    p++;
    if (*p == 'i') p++;
    if (v > (UINT64_MAX >> shift)) return false;
    v <<= shift;
  }
  if (*p == 'B') p++;
  if (*p || v == 0) return false;
  *out = v;
  return true;
}

static tsr_status_t resolve_dir(const tsr_disk_cache_options_t *options,
                                char **out_dir) {
  const char *base = NULL, *suffix = "";
  const char *env;
  if (options->dir && *options->dir) {
    base = options->dir;
  } else if (options->no_environment) {
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "no cache directory given");
  } else if ((env = getenv("TESSERA_CACHE_DIR")) && *env) {
    base = env;
  } else if ((env = getenv("XDG_CACHE_HOME")) && env[0] == '/') {
    base = env; /* the XDG spec ignores relative paths */
    suffix = "/tessera";
  } else if ((env = getenv("HOME")) && *env) {
    base = env;
    suffix = "/.cache/tessera";
  } else {
    return TSR_STATUS(TSR_IO_ERROR, "no cache directory: none of "
                      "TESSERA_CACHE_DIR, XDG_CACHE_HOME and HOME is set");
  }
  char *dir = concat(base, suffix);
  if (!dir) return TSR_OOM();
  size_t len = strlen(dir);
  while (len > 1 && dir[len - 1] == '/') dir[--len] = '\0';
  *out_dir = dir;
  return NULL;
}

/* ---- Options, open, close ------------------------------------------------- */

void tsr_disk_cache_options_initialize(tsr_disk_cache_options_t *options) {
  memset(options, 0, sizeof *options);
  options->compression_level = 1;
  options->warn_stream = stderr;
}

/* Whether environment variable `name` is one of `words` (any case). */
static bool env_is(const char *name, const char *const words[4]) {
  const char *v = getenv(name);
  if (!v) return false;
  for (size_t i = 0; i < 4; i++)
    if (strcasecmp(v, words[i]) == 0) return true;
  return false;
}

bool tsr_disk_cache_disabled_by_env(void) {
  static const char *const off[] = {"off", "0", "false", "no"};
  return env_is("TESSERA_CACHE", off);
}

bool tsr_disk_cache_shared_by_env(void) {
  static const char *const on[] = {"on", "1", "true", "yes"};
  return env_is("TESSERA_CACHE_SHARED", on);
}

/* Unless the cache is shared on purpose, the directory open on `fd` must
 * belong to this user and be writable by nobody else: whoever can write it
 * can remove or replace entries (a forged one is never used, but a cache
 * others control is not this user's cache). */
static tsr_status_t check_owner(const tsr_disk_cache_t *cache, int fd, const char *path) {
  struct stat st;
  if (fstat(fd, &st) != 0)
    return TSR_STATUS(TSR_IO_ERROR, "cannot use the cache directory %s: %s: %s", cache->dir,
                      path, strerror(errno));
  if (cache->shared) return NULL;
  if (st.st_uid != geteuid())
    return TSR_STATUS(TSR_IO_ERROR, "not using the cache directory %s: %s belongs to uid %u, "
                      "not to this user (uid %u) (TESSERA_CACHE_SHARED=1 shares a cache "
                      "between users on purpose; docs/cache.md)", cache->dir, path,
                      (unsigned)st.st_uid, (unsigned)geteuid());
  if (st.st_mode & (S_IWGRP | S_IWOTH))
    return TSR_STATUS(TSR_IO_ERROR, "not using the cache directory %s: %s has mode %04o, "
                      "writable by %s (chmod go-w it, or set TESSERA_CACHE_SHARED=1 to share "
                      "it on purpose; docs/cache.md)", cache->dir, path,
                      (unsigned)(st.st_mode & 07777),
                      st.st_mode & S_IWOTH ? "others" : "its group");
  return NULL;
}

/* Makes the directories, opens the format directory (checking both) and
 * loads the key. */
static tsr_status_t open_dirs(tsr_disk_cache_t *cache, const char *key_file) {
  TSR_RETURN_IF_ERROR(tsr_cache_make_dirs(cache->format_dir, cache->dir_mode,
                                          "the cache directory", cache->dir));
  int dir_fd = open(cache->dir, O_RDONLY | O_DIRECTORY | O_NONBLOCK | O_CLOEXEC);
  if (dir_fd < 0)
    return TSR_STATUS(TSR_IO_ERROR, "cannot open the cache directory %s: %s", cache->dir,
                      strerror(errno));
  tsr_status_t s = check_owner(cache, dir_fd, cache->dir);
  if (!s) {
    cache->format_fd = openat(dir_fd, FORMAT_DIR,
                              O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (cache->format_fd < 0)
      s = TSR_STATUS(TSR_IO_ERROR, "cannot open the cache directory %s: %s: %s", cache->dir,
                     cache->format_dir,
                     errno == ELOOP || errno == ENOTDIR ? "not a directory (a symbolic link?)"
                                                        : strerror(errno));
  }
  close(dir_fd);
  if (!s) s = check_owner(cache, cache->format_fd, cache->format_dir);
  if (!s) s = tsr_cache_mac_key_load(key_file, cache->shared, cache->mac_key, &cache->key_path);
  return s;
}

tsr_status_t tsr_disk_cache_open(const tsr_disk_cache_options_t *options,
                                 tsr_disk_cache_t **out_cache) {
  if (!out_cache)
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "tsr_disk_cache_open: NULL argument");
  tsr_disk_cache_options_t defaults;
  if (!options) {
    tsr_disk_cache_options_initialize(&defaults);
    options = &defaults;
  }
  tsr_disk_cache_t *cache = tsr_calloc(1, sizeof *cache);
  if (!cache) return TSR_OOM();
  cache->format_fd = -1;
  cache->shared =
      options->shared || (!options->no_environment && tsr_disk_cache_shared_by_env());
  /* Private: only this user reads the cache. Shared: the umask decides. */
  cache->dir_mode = cache->shared ? 0777 : 0700;
  cache->file_mode = cache->shared ? 0666 : 0600;
  cache->warn_stream = options->warn_stream;
  cache->compression_level = options->compression_level;
  if (cache->compression_level < ZSTD_minCLevel())
    cache->compression_level = ZSTD_minCLevel();
  if (cache->compression_level > ZSTD_maxCLevel())
    cache->compression_level = ZSTD_maxCLevel();
  cache->max_bytes = options->max_bytes;
  if (!cache->max_bytes) {
    const char *env = options->no_environment ? NULL : getenv("TESSERA_CACHE_MAX_SIZE");
    cache->max_bytes = DEFAULT_MAX_BYTES;
    if (env && *env && !parse_size(env, &cache->max_bytes)) {
      cache->max_bytes = DEFAULT_MAX_BYTES;
      warn(cache, "TESSERA_CACHE_MAX_SIZE='%s' is not a size (examples: "
           "500M, 2G, 1048576); using 1G", env);
    }
  }
  tsr_status_t status = resolve_dir(options, &cache->dir);
  if (!status) {
    cache->format_dir = concat(cache->dir, "/" FORMAT_DIR);
    if (!cache->format_dir) status = TSR_OOM();
  }
  if (!status && options->no_environment && !(options->key_file && *options->key_file))
    status = TSR_STATUS(TSR_INVALID_ARGUMENT, "no cache key file given");
  if (!status) status = open_dirs(cache, options->key_file);
  if (status) {
    tsr_disk_cache_close(cache);
    return status;
  }
  cache->format_dir_len = strlen(cache->format_dir);
  *out_cache = cache;
  return NULL;
}

void tsr_disk_cache_close(tsr_disk_cache_t *cache) {
  if (!cache) return;
  if (cache->format_fd >= 0) close(cache->format_fd);
  sodium_memzero(cache->mac_key, sizeof cache->mac_key);
  tsr_free(cache->key_path);
  tsr_free(cache->dir);
  tsr_free(cache->format_dir);
  tsr_free(cache);
}

const char *tsr_disk_cache_dir(const tsr_disk_cache_t *cache) {
  return cache->dir;
}

const char *tsr_disk_cache_key_file(const tsr_disk_cache_t *cache) {
  return cache->key_path;
}

void tsr_disk_cache_free(void *payload) { tsr_free(payload); }

void tsr_disk_cache_stats(const tsr_disk_cache_t *cache,
                          tsr_disk_cache_stats_t *out_stats) {
  memset(out_stats, 0, sizeof *out_stats);
  out_stats->hits = atomic_load(&cache->hits);
  out_stats->misses = atomic_load(&cache->misses);
  out_stats->puts = atomic_load(&cache->puts);
  out_stats->bad_entries = atomic_load(&cache->bad_entries);
  out_stats->evictions = atomic_load(&cache->evictions);
  out_stats->errors = atomic_load(&cache->errors);
  out_stats->max_bytes = cache->max_bytes;
}

/* ---- Buckets ------------------------------------------------------------------- */

/* Opens bucket `name` of the format directory; never through a symbolic
 * link (ELOOP or ENOTDIR then), and never waiting on a FIFO. */
static int open_bucket_fd(const tsr_disk_cache_t *cache, const char *name) {
  return openat(cache->format_fd, name,
                O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
}

/* What a file that should have been another kind is, for messages. */
static const char *file_kind(mode_t mode) {
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  return "a regular file";
}

/* ---- Reading and validating an entry --------------------------------------- */

typedef enum entry_verdict {
  ENTRY_GOOD,
  ENTRY_BAD,        /* corrupt, truncated, other version, misplaced */
  ENTRY_OTHER_KEY,  /* a valid entry of another key with the same hash */
  ENTRY_READ_ERROR, /* the file could not be read (EIO, ...) */
  ENTRY_NO_MEMORY,
} entry_verdict_t;

typedef struct entry_read {
  char reason[224];  /* ENTRY_BAD: why; ENTRY_READ_ERROR: strerror */
  void *payload;     /* ENTRY_GOOD: the uncompressed bytes (tsr_free) */
  size_t payload_size;
} entry_read_t;

static entry_verdict_t bad(entry_read_t *out, const char *fmt, ...)
    TSR_PRINTF(2, 3);
static entry_verdict_t bad(entry_read_t *out, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(out->reason, sizeof out->reason, fmt, ap);
  va_end(ap);
  return ENTRY_BAD;
}

static entry_verdict_t read_error(entry_read_t *out, int rc) {
  if (rc > 0) return bad(out, "shorter than its size said (changed while read)");
  snprintf(out->reason, sizeof out->reason, "%s", strerror(errno));
  return ENTRY_READ_ERROR;
}

/* The entry's MAC: keyed BLAKE2b-256 (libsodium's crypto_generichash) of
 * the header up to the MAC, the key material and the stored payload. The
 * header holds both lengths, so the three parts cannot be re-split. */
static void entry_mac(const tsr_disk_cache_t *cache, const uint8_t *header,
                      const void *key, size_t key_len, const void *stored,
                      size_t stored_size, uint8_t mac[MAC_BYTES]) {
  crypto_generichash_state st;
  crypto_generichash_init(&st, cache->mac_key, sizeof cache->mac_key, MAC_BYTES);
  crypto_generichash_update(&st, header, OFF_MAC);
  crypto_generichash_update(&st, key, key_len);
  crypto_generichash_update(&st, stored, stored_size);
  crypto_generichash_final(&st, mac, MAC_BYTES);
}

/* Validates the entry open on `fd` (described by `st`): its MAC first, then
 * every header field and the decompressed size, with each size checked
 * against the file's before anything is allocated. The entry must carry
 * hash (lo, hi). With `key`, its material must equal the key's (else
 * ENTRY_OTHER_KEY); without (verify), the material must hash to (lo, hi).
 * On ENTRY_GOOD out->payload holds the payload. */
static entry_verdict_t read_entry(const tsr_disk_cache_t *cache, int fd,
                                  const struct stat *st, uint64_t lo, uint64_t hi,
                                  const tsr_cache_key_t *key, entry_read_t *out) {
  out->payload = NULL;
  out->payload_size = 0;
  if (!S_ISREG(st->st_mode))
    return bad(out, "%s, not a regular file", file_kind(st->st_mode));
  uint64_t file_size = (uint64_t)st->st_size;
  if (file_size < HEADER_SIZE)
    return bad(out, "truncated: %" PRIu64 " bytes, shorter than the %d-byte "
               "header", file_size, HEADER_SIZE);
  uint8_t h[HEADER_SIZE];
  int rc = pread_all(fd, h, HEADER_SIZE, 0);
  if (rc) return read_error(out, rc);
  if (memcmp(h + OFF_MAGIC, entry_magic, sizeof entry_magic) != 0)
    return bad(out, "not a tessera cache entry (bad magic)");
  if (get_u32(h + OFF_FORMAT) != FORMAT_VERSION)
    return bad(out, "entry format %" PRIu32 ", expected %d",
               get_u32(h + OFF_FORMAT), FORMAT_VERSION);
  if (get_u32(h + OFF_HEADER_SIZE) != HEADER_SIZE)
    return bad(out, "header size %" PRIu32 ", expected %d",
               get_u32(h + OFF_HEADER_SIZE), HEADER_SIZE);

  /* Sizes against the file before any allocation: key and stored payload
   * must fill the file exactly. */
  uint64_t key_len = get_u64(h + OFF_KEY_LEN);
  uint64_t stored_size = get_u64(h + OFF_STORED_SIZE);
  uint64_t payload_size = get_u64(h + OFF_PAYLOAD_SIZE);
  uint64_t body = file_size - HEADER_SIZE;
  if (key_len > body)
    return bad(out, "truncated: the header describes a %" PRIu64 "-byte key, "
               "the file has %" PRIu64 " bytes", key_len, file_size);
  if (stored_size != body - key_len) {
    uint64_t want;
    if (__builtin_add_overflow(HEADER_SIZE + key_len, stored_size, &want))
      want = UINT64_MAX;
    return bad(out, "%s: the header describes %" PRIu64 " bytes, the file has "
               "%" PRIu64, want > file_size ? "truncated" : "size mismatch",
               want, file_size);
  }

  /* Key material and stored payload, read once and authenticated before
   * any of it (or the header) is believed. */
  uint8_t *data = tsr_malloc((size_t)body ? (size_t)body : 1);
  if (!data) return ENTRY_NO_MEMORY;
  rc = pread_all(fd, data, (size_t)body, HEADER_SIZE);
  if (rc) {
    tsr_free(data);
    return read_error(out, rc);
  }
  const uint8_t *material = data, *stored = data + key_len;
  uint8_t mac[MAC_BYTES];
  entry_mac(cache, h, material, (size_t)key_len, stored, (size_t)stored_size, mac);
  entry_verdict_t verdict = ENTRY_GOOD;
  uint64_t got_lo = get_u64(h + OFF_KEY_LO), got_hi = get_u64(h + OFF_KEY_HI);
  uint32_t compression = get_u32(h + OFF_COMPRESSION);
  char version[VERSION_FIELD + 1];
  memcpy(version, h + OFF_VERSION, VERSION_FIELD);
  version[VERSION_FIELD] = '\0';
  if (crypto_verify_32(mac, h + OFF_MAC) != 0) {
    verdict = bad(out, "authentication failed: not written with this cache's key "
                  "(planted, forged or damaged)");
  } else if (strcmp(version, TSR_VERSION_STRING) != 0) {
    /* Keys include the version, so this is a foreign or damaged file. */
    verdict = bad(out, "written by tessera %.32s, this is tessera %s", version,
                  TSR_VERSION_STRING);
  } else if (get_u32(h + OFF_RESERVED) || memchr(h + OFF_VERSION, 0, VERSION_FIELD) == NULL) {
    verdict = bad(out, "reserved header fields are not zero");
  } else if (got_lo != lo || got_hi != hi) {
    tsr_cache_key_t got = {got_lo, got_hi, NULL, 0};
    char hex[HASH_HEX + 1];
    tsr_cache_key_hex(&got, hex);
    verdict = bad(out, "holds the entry of key %s (misplaced file)", hex);
  } else if (key) {
    if (key_len != key->len || (key_len && memcmp(material, key->bytes, key_len)))
      verdict = ENTRY_OTHER_KEY;
  } else {
    XXH128_hash_t kh = XXH3_128bits(key_len ? material : (const void *)"",
                                    (size_t)key_len);
    if (kh.low64 != lo || kh.high64 != hi)
      verdict = bad(out, "the key material does not hash to the entry's key");
  }
  if (verdict == ENTRY_GOOD) {
    if (compression == COMPRESSION_NONE) {
      if (payload_size != stored_size)
        verdict = bad(out, "uncompressed entry of %" PRIu64 " bytes says %" PRIu64,
                      stored_size, payload_size);
    } else if (compression == COMPRESSION_ZSTD) {
      if (stored_size == 0 || payload_size / ZSTD_MAX_RATIO > stored_size ||
          payload_size > SIZE_MAX)
        verdict = bad(out, "implausible sizes: %" PRIu64 " bytes inflating to %"
                      PRIu64, stored_size, payload_size);
    } else {
      verdict = bad(out, "unknown compression %" PRIu32, compression);
    }
  }
  if (verdict != ENTRY_GOOD) {
    tsr_free(data);
    return verdict;
  }
  if (compression == COMPRESSION_NONE) {
    memmove(data, stored, (size_t)stored_size);
    out->payload = data;
    out->payload_size = (size_t)stored_size;
    return ENTRY_GOOD;
  }
  unsigned long long frame = ZSTD_getFrameContentSize(stored, (size_t)stored_size);
  if (frame != payload_size) {
    tsr_free(data);
    return bad(out, "zstd frame content size does not match the header's "
               "%" PRIu64 " bytes", payload_size);
  }
  uint8_t *payload = tsr_malloc((size_t)payload_size ? (size_t)payload_size : 1);
  if (!payload) {
    tsr_free(data);
    return ENTRY_NO_MEMORY;
  }
  size_t n = ZSTD_decompress(payload, (size_t)payload_size, stored, (size_t)stored_size);
  tsr_free(data);
  if (ZSTD_isError(n) || n != payload_size) {
    tsr_free(payload);
    if (ZSTD_isError(n)) return bad(out, "zstd: %s", ZSTD_getErrorName(n));
    return bad(out, "decompressed to %zu bytes, the header says %" PRIu64, n,
               payload_size);
  }
  out->payload = payload;
  out->payload_size = (size_t)payload_size;
  return ENTRY_GOOD;
}

/* ---- The size estimate ------------------------------------------------------ */

/* <format_dir>/.size holds an estimate of the bytes in the cache. Writers
 * update it under a short flock (a read and a write of 32 bytes); readers
 * never touch it. Every full scan replaces it with the measured size, and a
 * scan happens at least every RESCAN_PUTS puts, so drift (a crash between
 * rename and update, two puts of one key racing) cannot accumulate. */
typedef struct size_record {
  bool valid;
  uint64_t bytes, puts;
} size_record_t;

/* Opens (creating) the regular file `name` of the format directory for
 * reading and writing: never through a symbolic link, and a FIFO or
 * anything else in its place is refused (-1), not waited on. */
static int open_control_file(const tsr_disk_cache_t *cache, const char *name) {
  int fd = openat(cache->format_fd, name,
                  O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, cache->file_mode);
  struct stat st;
  if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
    close(fd);
    return -1;
  }
  return fd;
}

static int open_size_file(const tsr_disk_cache_t *cache) {
  int fd = open_control_file(cache, SIZE_FILE);
  if (fd < 0) return -1;
  while (flock(fd, LOCK_EX) != 0) {
    if (errno != EINTR) {
      close(fd);
      return -1;
    }
  }
  return fd;
}

static size_record_t read_size(int fd) {
  uint8_t b[SIZE_RECORD];
  size_record_t r = {false, 0, 0};
  if (pread_all(fd, b, sizeof b, 0) != 0) return r;
  if (memcmp(b, size_magic, 8) != 0 || get_u64(b + 24) != XXH3_64bits(b, 24))
    return r;
  r.valid = true;
  r.bytes = get_u64(b + 8);
  r.puts = get_u64(b + 16);
  return r;
}

static void write_size(int fd, uint64_t bytes, uint64_t puts) {
  uint8_t b[SIZE_RECORD];
  memcpy(b, size_magic, 8);
  put_u64(b + 8, bytes);
  put_u64(b + 16, puts);
  put_u64(b + 24, XXH3_64bits(b, 24));
  /* A failed write leaves an invalid record, which forces a scan. */
  (void)!pwrite(fd, b, sizeof b, 0);
}

static void close_size_file(int fd) {
  flock(fd, LOCK_UN);
  close(fd);
}

/* Adds `delta` bytes (and one put if `is_put`) to the estimate. True when
 * a cleanup scan is due: over the limit, RESCAN_PUTS puts since the last
 * scan, or no valid estimate. */
static bool account(tsr_disk_cache_t *cache, int64_t delta, bool is_put) {
  int fd = open_size_file(cache);
  if (fd < 0) {
    /* No usable size file (no flock on this filesystem?): scan now and then. */
    return is_put && atomic_fetch_add(&cache->uncounted_puts, 1) %
                             UNCOUNTED_SCAN_PUTS == UNCOUNTED_SCAN_PUTS - 1;
  }
  size_record_t r = read_size(fd);
  bool due = !r.valid;
  uint64_t bytes = r.valid ? r.bytes : 0;
  if (delta < 0)
    bytes = (uint64_t)-delta > bytes ? 0 : bytes - (uint64_t)-delta;
  else
    bytes += (uint64_t)delta;
  uint64_t puts = (r.valid ? r.puts : 0) + is_put;
  write_size(fd, bytes, puts);
  close_size_file(fd);
  return due || bytes > cache->max_bytes || puts >= RESCAN_PUTS;
}

/* ---- Walking the directory ---------------------------------------------------- */

typedef struct walk_item {
  int dir_fd;         /* the bucket directory (a bad bucket: the format one) */
  const char *bucket; /* its name, "00" .. "ff" */
  const char *name;   /* the file in it (a bad bucket: the bucket's name) */
  bool is_temp;       /* a temporary file, not an entry */
  bool is_bad_bucket; /* a bucket that is not a directory (a symbolic link) */
  uint64_t lo, hi;    /* entries: the hash the name spells */
  struct stat st;
} walk_item_t;

/* "DIR/v2/ab/name" (a bad bucket: "DIR/v2/ab"), for messages. */
static void item_path(const tsr_disk_cache_t *cache, const walk_item_t *item,
                      tsr_strbuf_t *sb) {
  if (item->is_bad_bucket)
    tsr_strbuf_printf(sb, "%s/%s", cache->format_dir, item->bucket);
  else
    tsr_strbuf_printf(sb, "%s/%s/%s", cache->format_dir, item->bucket, item->name);
}

typedef void (*walk_fn)(tsr_disk_cache_t *cache, void *ctx,
                        const walk_item_t *item);

/* Calls fn for every entry and temporary file, bucket by bucket, and for
 * every bucket name that is not a directory (a symbolic link, a file: never
 * followed). Other files are ignored; files that vanish meanwhile are
 * skipped. A bucket that cannot be read is an error returned at the end;
 * the walk goes on. */
static tsr_status_t walk(tsr_disk_cache_t *cache, walk_fn fn, void *ctx) {
  tsr_status_t first = NULL;
  static const char digits[] = "0123456789abcdef";
  for (int b = 0; b < 256; b++) {
    char bucket[3] = {digits[b >> 4], digits[b & 15], '\0'};
    int fd = open_bucket_fd(cache, bucket);
    if (fd < 0) {
      int err = errno;
      walk_item_t item = {cache->format_fd, bucket, bucket, false, true, 0, 0, {0}};
      if ((err == ELOOP || err == ENOTDIR) &&
          fstatat(cache->format_fd, bucket, &item.st, AT_SYMLINK_NOFOLLOW) == 0 &&
          !S_ISDIR(item.st.st_mode))
        fn(cache, ctx, &item);
      else if (err != ENOENT && !first)
        first = TSR_STATUS(TSR_IO_ERROR, "cannot read %s/%s: %s",
                           cache->format_dir, bucket, strerror(err));
      continue;
    }
    DIR *dir = fdopendir(fd);
    if (!dir) {
      close(fd);
      continue;
    }
    struct dirent *de;
    for (errno = 0; (de = readdir(dir)) != NULL; errno = 0) {
      walk_item_t item = {fd, bucket, de->d_name, false, false, 0, 0, {0}};
      if (strncmp(de->d_name, TEMP_PREFIX, sizeof TEMP_PREFIX - 1) == 0)
        item.is_temp = true;
      else if (!parse_entry_name(bucket, de->d_name, &item.lo, &item.hi))
        continue;
      if (fstatat(fd, de->d_name, &item.st, AT_SYMLINK_NOFOLLOW) != 0) continue;
      fn(cache, ctx, &item);
    }
    if (errno && !first)
      first = TSR_STATUS(TSR_IO_ERROR, "cannot read %s/%s: %s",
                         cache->format_dir, bucket, strerror(errno));
    closedir(dir);
  }
  return first;
}

static bool stale_temp(const walk_item_t *item, time_t now) {
  return item->is_temp && S_ISREG(item->st.st_mode) &&
         now - item->st.st_mtim.tv_sec > STALE_TEMP_SECONDS;
}

/* ---- Cleanup: approximate LRU ------------------------------------------------- */

typedef struct lru_entry {
  int64_t mtime_ns;
  uint64_t size, lo, hi;
  ino_t ino;
  dev_t dev;
} lru_entry_t;

typedef struct lru_scan {
  lru_entry_t *entries;
  size_t count, capacity;
  uint64_t bytes;
  bool out_of_memory;
  time_t now;
} lru_scan_t;

static void collect_entry(tsr_disk_cache_t *cache, void *ctx,
                          const walk_item_t *item) {
  lru_scan_t *scan = ctx;
  if (item->is_temp) {
    if (stale_temp(item, scan->now)) (void)remove_if_same(item->dir_fd, item->name, &item->st);
    return;
  }
  if (item->is_bad_bucket || !S_ISREG(item->st.st_mode)) return;
  scan->bytes += (uint64_t)item->st.st_size;
  if (scan->count == scan->capacity) {
    size_t cap = scan->capacity ? 2 * scan->capacity : 256;
    size_t bytes;
    lru_entry_t *grown = NULL;
    if (tsr_mul_size(cap, sizeof *grown, &bytes))
      grown = tsr_realloc(scan->entries, bytes);
    if (!grown) {
      scan->out_of_memory = true;
      return;
    }
    scan->entries = grown;
    scan->capacity = cap;
  }
  scan->entries[scan->count++] = (lru_entry_t){
      mtime_ns(&item->st), (uint64_t)item->st.st_size, item->lo, item->hi,
      item->st.st_ino, item->st.st_dev};
}

static int by_mtime(const void *a, const void *b) {
  int64_t x = ((const lru_entry_t *)a)->mtime_ns;
  int64_t y = ((const lru_entry_t *)b)->mtime_ns;
  return (x > y) - (x < y);
}

/* Unlinks the entry `e` if it is still the file that was scanned: an entry
 * replaced or hit since the scan stays. */
static bool evict(const tsr_disk_cache_t *cache, const lru_entry_t *e) {
  char bucket[BUCKET_HEX + 1], name[NAME_HEX + SUFFIX_LEN + 1];
  entry_names(e->lo, e->hi, bucket, name);
  int fd = open_bucket_fd(cache, bucket);
  if (fd < 0) return false;
  struct stat now;
  bool removed = fstatat(fd, name, &now, AT_SYMLINK_NOFOLLOW) == 0 &&
                 now.st_ino == e->ino && now.st_dev == e->dev &&
                 mtime_ns(&now) == e->mtime_ns && unlinkat(fd, name, 0) == 0;
  close(fd);
  return removed;
}

/* Takes <format_dir>/.cleanup.lock if nobody holds it (with `wait`, waits
 * for it). Returns the descriptor to pass to unlock(); -1 if another
 * process holds it; -2 if locking is unavailable (proceed unlocked). */
static int lock_cleanup(const tsr_disk_cache_t *cache, bool wait) {
  int fd = open_control_file(cache, LOCK_FILE);
  if (fd < 0) return -2;
  while (flock(fd, wait ? LOCK_EX : LOCK_EX | LOCK_NB) != 0) {
    if (errno == EINTR) continue;
    int err = errno;
    close(fd);
    return err == EWOULDBLOCK ? -1 : -2;
  }
  return fd;
}

static void unlock_cleanup(int fd) {
  if (fd < 0) return;
  flock(fd, LOCK_UN);
  close(fd);
}

/* Reads the size estimate (0 if none) for rebasing after a scan. */
static uint64_t size_estimate(const tsr_disk_cache_t *cache) {
  int fd = open_size_file(cache);
  if (fd < 0) return 0;
  size_record_t r = read_size(fd);
  close_size_file(fd);
  return r.valid ? r.bytes : 0;
}

/* Replaces the estimate by `measured` plus whatever other processes added
 * since `before` was read (their files may have been counted twice: an
 * overestimate only brings the next scan forward). */
static void rebase_size(const tsr_disk_cache_t *cache, uint64_t before,
                        uint64_t measured) {
  int fd = open_size_file(cache);
  if (fd < 0) return;
  size_record_t r = read_size(fd);
  uint64_t added = r.valid && r.bytes > before ? r.bytes - before : 0;
  write_size(fd, measured + added, 0);
  close_size_file(fd);
}

/* After a put: if no other process is at it, scans the whole cache, removes
 * stale temporary files and, when over the limit, the least recently used
 * entries until the cache is at TRIM_PERCENT of it. */
static void cleanup(tsr_disk_cache_t *cache) {
  int lock = lock_cleanup(cache, false);
  if (lock == -1) return; /* another process is cleaning up */
  uint64_t before = size_estimate(cache);
  lru_scan_t scan = {NULL, 0, 0, 0, false, time(NULL)};
  tsr_status_t status = walk(cache, collect_entry, &scan);
  if (status) {
    (void)disk_error(cache, status);
    tsr_status_free(status);
  }
  if (scan.out_of_memory) {
    /* An incomplete list cannot say what is oldest: trim nothing now. */
    tsr_free(scan.entries);
    unlock_cleanup(lock);
    return;
  }
  if (scan.bytes > cache->max_bytes) {
    uint64_t target = cache->max_bytes / 100 * TRIM_PERCENT;
    qsort(scan.entries, scan.count, sizeof *scan.entries, by_mtime);
    for (size_t i = 0; i < scan.count && scan.bytes > target; i++) {
      const lru_entry_t *e = &scan.entries[i];
      if (evict(cache, e)) {
        scan.bytes -= e->size;
        counter_add(&cache->evictions, 1);
      }
    }
  }
  rebase_size(cache, before, scan.bytes);
  tsr_free(scan.entries);
  unlock_cleanup(lock);
}

/* ---- get and put ----------------------------------------------------------- */

static tsr_status_t check_key(const char *fn, const tsr_cache_key_t *key) {
  if (!key || (key->len && !key->bytes))
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "%s: NULL key or key material", fn);
  return NULL;
}

/* Removes the bad file `name` of `dir_fd` (read as `st`), counts it and
 * warns about it; its path is <format_dir>/<bucket>/<name>, or
 * <format_dir>/<name> for a bucket (bucket NULL). True when it is gone. */
static bool drop_bad(tsr_disk_cache_t *cache, int dir_fd, const char *bucket,
                     const char *name, const struct stat *st, const char *reason) {
  counter_add(&cache->bad_entries, 1);
  walk_item_t item = {dir_fd, bucket ? bucket : name, name, false, !bucket, 0, 0, *st};
  tsr_strbuf_t path;
  tsr_strbuf_initialize(&path);
  item_path(cache, &item, &path);
  const char *shown = path.failed ? name : path.data;
  int err = remove_if_same(dir_fd, name, st);
  if (err) {
    warn(cache, "bad %s %s: %s; cannot remove it: %s", bucket ? "entry" : "bucket", shown,
         reason, strerror(err));
  } else {
    warn(cache, "removed bad %s %s: %s", bucket ? "entry" : "bucket", shown, reason);
    if (S_ISREG(st->st_mode)) (void)account(cache, -(int64_t)st->st_size, false);
  }
  tsr_strbuf_deinitialize(&path);
  return err == 0;
}

/* Opens bucket `name` for a get or a put. A bucket that is not a directory
 * (tessera never makes one: a symbolic link, a file, a FIFO) is removed as
 * bad, never followed; with `create` a missing bucket is made. -1 with
 * errno otherwise (ENOENT: no such bucket). */
static int open_bucket(tsr_disk_cache_t *cache, const char *name, bool create) {
  for (int attempt = 0; attempt < 3; attempt++) {
    int fd = open_bucket_fd(cache, name);
    if (fd >= 0) return fd;
    int err = errno;
    struct stat st;
    if ((err == ELOOP || err == ENOTDIR) &&
        fstatat(cache->format_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        !S_ISDIR(st.st_mode)) {
      char reason[64];
      snprintf(reason, sizeof reason, "%s, not a bucket directory", file_kind(st.st_mode));
      if (drop_bad(cache, cache->format_fd, NULL, name, &st, reason)) err = ENOENT;
    }
    if (err != ENOENT || !create) {
      errno = err;
      return -1;
    }
    if (mkdirat(cache->format_fd, name, cache->dir_mode) != 0 && errno != EEXIST) return -1;
  }
  errno = ELOOP;
  return -1;
}

tsr_status_t tsr_disk_cache_get(tsr_disk_cache_t *cache,
                                const tsr_cache_key_t *key, void **out_payload,
                                size_t *out_size) {
  if (!cache || !out_payload || !out_size)
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "tsr_disk_cache_get: NULL argument");
  TSR_RETURN_IF_ERROR(check_key("tsr_disk_cache_get", key));
  char *path = hash_path(cache, key->lo, key->hi);
  if (!path) return TSR_OOM();
  char bucket[BUCKET_HEX + 1], name[NAME_HEX + SUFFIX_LEN + 1];
  entry_names(key->lo, key->hi, bucket, name);
  tsr_status_t status = NULL;
  int bucket_fd = open_bucket(cache, bucket, false);
  /* O_NONBLOCK: a FIFO in place of the entry is opened, found not to be a
   * regular file and removed, never waited on. */
  int fd = bucket_fd < 0 ? -1
                         : openat(bucket_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  struct stat st;
  if (fd < 0) {
    int err = errno;
    if (bucket_fd >= 0 && err == ELOOP &&
        fstatat(bucket_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
      /* A symbolic link is never written by tessera. */
      drop_bad(cache, bucket_fd, bucket, name, &st, "a symbolic link, not a regular file");
      counter_add(&cache->misses, 1);
      status = TSR_STATUS(TSR_NOT_FOUND, "%s: removed a bad cache entry", path);
    } else if (err == ENOENT || err == ENOTDIR || err == ELOOP) {
      counter_add(&cache->misses, 1);
      status = TSR_STATUS(TSR_NOT_FOUND, "%s: no cache entry", path);
    } else {
      status = disk_error(cache, TSR_STATUS(TSR_IO_ERROR,
                          "cannot open the cache entry %s: %s", path, strerror(err)));
    }
    if (bucket_fd >= 0) close(bucket_fd);
    tsr_free(path);
    return status;
  }
  if (fstat(fd, &st) != 0) {
    int err = errno;
    close(fd);
    close(bucket_fd);
    status = disk_error(cache, TSR_STATUS(TSR_IO_ERROR, "cannot stat the cache "
                        "entry %s: %s", path, strerror(err)));
    tsr_free(path);
    return status;
  }
  entry_read_t r;
  switch (read_entry(cache, fd, &st, key->lo, key->hi, key, &r)) {
  case ENTRY_GOOD: {
    time_t now = time(NULL);
    if (now - st.st_mtim.tv_sec > TOUCH_AFTER_SECONDS ||
        st.st_mtim.tv_sec - now > TOUCH_AFTER_SECONDS)
      (void)futimens(fd, NULL); /* LRU; EPERM on another user's file is fine */
    counter_add(&cache->hits, 1);
    *out_payload = r.payload;
    *out_size = r.payload_size;
    break;
  }
  case ENTRY_BAD:
    drop_bad(cache, bucket_fd, bucket, name, &st, r.reason);
    counter_add(&cache->misses, 1);
    status = TSR_STATUS(TSR_NOT_FOUND, "%s: removed a bad cache entry: %s",
                        path, r.reason);
    break;
  case ENTRY_OTHER_KEY:
    /* Same 128-bit hash, other material: a miss; the next put replaces it. */
    counter_add(&cache->misses, 1);
    status = TSR_STATUS(TSR_NOT_FOUND, "%s: the entry holds another key with "
                        "the same hash", path);
    break;
  case ENTRY_READ_ERROR:
    status = disk_error(cache, TSR_STATUS(TSR_IO_ERROR, "cannot read the cache "
                        "entry %s: %s", path, r.reason));
    break;
  case ENTRY_NO_MEMORY:
    status = TSR_OOM();
    break;
  }
  close(fd);
  close(bucket_fd);
  tsr_free(path);
  return status;
}

/* The header of an entry; the MAC covers it, the key and `stored`. */
static void build_header(const tsr_disk_cache_t *cache, uint8_t h[HEADER_SIZE],
                         const tsr_cache_key_t *key, size_t payload_size,
                         const void *stored, size_t stored_size, uint32_t compression) {
  memset(h, 0, HEADER_SIZE);
  memcpy(h + OFF_MAGIC, entry_magic, sizeof entry_magic);
  put_u32(h + OFF_FORMAT, FORMAT_VERSION);
  put_u32(h + OFF_HEADER_SIZE, HEADER_SIZE);
  memcpy(h + OFF_VERSION, TSR_VERSION_STRING, sizeof TSR_VERSION_STRING);
  put_u64(h + OFF_KEY_LO, key->lo);
  put_u64(h + OFF_KEY_HI, key->hi);
  put_u64(h + OFF_KEY_LEN, key->len);
  put_u64(h + OFF_PAYLOAD_SIZE, payload_size);
  put_u64(h + OFF_STORED_SIZE, stored_size);
  put_u32(h + OFF_COMPRESSION, compression);
  entry_mac(cache, h, key->len ? key->bytes : (const uint8_t *)"", key->len,
            stored_size ? stored : "", stored_size, h + OFF_MAC);
}

/* Creates a new temporary file .tmp-<pid>-<8 random hex digits> in the
 * bucket `dir_fd`, never through a symbolic link; its name goes to `name`. */
static int create_temp(const tsr_disk_cache_t *cache, int dir_fd, char name[48]) {
  for (int attempt = 0; attempt < 16; attempt++) {
    uint32_t r = randombytes_random();
    snprintf(name, 48, TEMP_PREFIX "%ld-%08" PRIx32, (long)getpid(), r);
    int fd = openat(dir_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                    cache->file_mode);
    if (fd >= 0 || errno != EEXIST) return fd;
  }
  return -1;
}

/* Writes the entry to a new temporary file in its bucket, syncs it and
 * renames it onto the entry's name. On failure nothing is left behind. */
static tsr_status_t write_entry(tsr_disk_cache_t *cache, const tsr_cache_key_t *key,
                                const uint8_t header[HEADER_SIZE], const void *stored,
                                size_t stored_size, uint64_t *out_replaced) {
  char bucket[BUCKET_HEX + 1], name[NAME_HEX + SUFFIX_LEN + 1], tmp[48] = "";
  entry_names(key->lo, key->hi, bucket, name);
  const char *step = NULL;
  int err = 0, fd = -1;
  /* The bucket is made on first use. */
  int bucket_fd = open_bucket(cache, bucket, true);
  if (bucket_fd < 0) {
    err = errno;
    step = "open the bucket";
  } else if ((fd = create_temp(cache, bucket_fd, tmp)) < 0) {
    err = errno;
    step = "create a temporary file";
  } else {
    if (!tsr_write_all(fd, header, HEADER_SIZE) ||
        !tsr_write_all(fd, key->bytes, key->len) ||
        !tsr_write_all(fd, stored, stored_size))
      step = "write";
    else if (fsync(fd) != 0)
      step = "sync";
    err = errno;
    if (close(fd) != 0 && !step) {
      err = errno;
      step = "close";
    }
    struct stat old;
    *out_replaced = fstatat(bucket_fd, name, &old, AT_SYMLINK_NOFOLLOW) == 0 &&
                            S_ISREG(old.st_mode)
                        ? (uint64_t)old.st_size
                        : 0;
    if (!step && renameat(bucket_fd, tmp, bucket_fd, name) != 0) {
      err = errno;
      step = "rename into place";
    }
    if (step) unlinkat(bucket_fd, tmp, 0);
  }
  if (bucket_fd >= 0) close(bucket_fd);
  /* The directory is not synced: a rename lost in a crash is only a miss. */
  if (!step) return NULL;
  return TSR_STATUS(TSR_IO_ERROR, "cannot write the cache entry %s/%s/%s: cannot %s %s%s%s: %s",
                    cache->format_dir, bucket, name, step, *tmp ? bucket : "", *tmp ? "/" : "",
                    tmp, strerror(err));
}

tsr_status_t tsr_disk_cache_put(tsr_disk_cache_t *cache,
                                const tsr_cache_key_t *key, const void *payload,
                                size_t size) {
  if (!cache || (size && !payload))
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "tsr_disk_cache_put: NULL argument");
  TSR_RETURN_IF_ERROR(check_key("tsr_disk_cache_put", key));

  /* Compress when it helps; a buffer that cannot be had means storing raw. */
  const void *stored = payload;
  size_t stored_size = size;
  uint32_t compression = COMPRESSION_NONE;
  void *compressed = NULL;
  if (size) {
    /* The frame carries its content size and zstd's own checksum of the
     * uncompressed bytes, so decompression itself proves the result. */
    size_t bound = ZSTD_compressBound(size);
    ZSTD_CCtx *cctx = NULL;
    if (!ZSTD_isError(bound) && (compressed = tsr_malloc(bound)) &&
        (cctx = ZSTD_createCCtx()) &&
        !ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel,
                                             cache->compression_level)) &&
        !ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1))) {
      size_t n = ZSTD_compress2(cctx, compressed, bound, payload, size);
      if (!ZSTD_isError(n) && n < size) {
        stored = compressed;
        stored_size = n;
        compression = COMPRESSION_ZSTD;
      }
    }
    ZSTD_freeCCtx(cctx);
  }
  uint64_t entry_size = (uint64_t)HEADER_SIZE + key->len + stored_size;
  tsr_status_t status = NULL;
  if (entry_size > cache->max_bytes / 100 * TRIM_PERCENT) {
    /* The next cleanup would evict it at once. */
    if (!atomic_exchange(&cache->oversize_reported, true))
      warn(cache, "not storing an entry of %" PRIu64 " bytes: larger than %d%% "
           "of the cache limit (%" PRIu64 " bytes)", entry_size, TRIM_PERCENT,
           cache->max_bytes);
    tsr_free(compressed);
    return NULL;
  }
  uint8_t header[HEADER_SIZE];
  build_header(cache, header, key, size, stored, stored_size, compression);
  uint64_t replaced = 0;
  status = write_entry(cache, key, header, stored, stored_size, &replaced);
  tsr_free(compressed);
  if (status) {
    if (tsr_status_code(status) == TSR_IO_ERROR) (void)disk_error(cache, status);
    return status;
  }
  counter_add(&cache->puts, 1);
  if (account(cache, (int64_t)entry_size - (int64_t)replaced, true))
    cleanup(cache);
  return NULL;
}

/* ---- scan, clear, verify ------------------------------------------------------ */

static void count_item(tsr_disk_cache_t *cache, void *ctx,
                       const walk_item_t *item) {
  tsr_disk_cache_stats_t *stats = ctx;
  if (item->is_bad_bucket) return;
  if (item->is_temp) {
    stats->temp_files++;
  } else if (S_ISREG(item->st.st_mode)) {
    stats->entries++;
    stats->bytes += (uint64_t)item->st.st_size;
  }
}

tsr_status_t tsr_disk_cache_scan(tsr_disk_cache_t *cache,
                                 tsr_disk_cache_stats_t *out_stats) {
  if (!cache || !out_stats)
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "tsr_disk_cache_scan: NULL argument");
  tsr_disk_cache_stats_t stats;
  tsr_disk_cache_stats(cache, &stats);
  TSR_RETURN_IF_ERROR(walk(cache, count_item, &stats));
  *out_stats = stats;
  return NULL;
}

typedef struct clear_state {
  uint64_t removed, kept_bytes;
  time_t now;
  int first_errno;
  char *first_path;
} clear_state_t;

static void clear_item(tsr_disk_cache_t *cache, void *ctx,
                       const walk_item_t *item) {
  clear_state_t *state = ctx;
  /* A young temporary file may be a put in flight; anything that is not a
   * regular file (a FIFO, a symbolic link, a bucket that is not a
   * directory) is never tessera's and goes. */
  bool regular = S_ISREG(item->st.st_mode) && !item->is_bad_bucket;
  if (item->is_temp && regular && !stale_temp(item, state->now)) return;
  int err = remove_if_same(item->dir_fd, item->name, &item->st);
  if (!err) {
    if (!item->is_temp) state->removed++;
    return;
  }
  if (!item->is_temp && regular) state->kept_bytes += (uint64_t)item->st.st_size;
  if (!state->first_errno) {
    state->first_errno = err;
    tsr_strbuf_t sb;
    tsr_strbuf_initialize(&sb);
    item_path(cache, item, &sb);
    state->first_path = tsr_strbuf_take(&sb);
  }
}

tsr_status_t tsr_disk_cache_clear(tsr_disk_cache_t *cache, uint64_t *out_removed) {
  if (!cache)
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "tsr_disk_cache_clear: NULL argument");
  int lock = lock_cleanup(cache, true);
  uint64_t before = size_estimate(cache);
  clear_state_t state = {0, 0, time(NULL), 0, NULL};
  tsr_status_t status = walk(cache, clear_item, &state);
  rebase_size(cache, before, state.kept_bytes);
  unlock_cleanup(lock);
  if (!status && state.first_errno)
    status = TSR_STATUS(TSR_IO_ERROR, "cannot remove the cache entry %s: %s",
                        state.first_path ? state.first_path : "?",
                        strerror(state.first_errno));
  tsr_free(state.first_path);
  if (out_removed) *out_removed = state.removed;
  return status;
}

typedef struct verify_state {
  FILE *report;
  bool remove_bad;
  uint64_t good, bad;
  tsr_status_t first_error;
} verify_state_t;

static void verify_item(tsr_disk_cache_t *cache, void *ctx,
                        const walk_item_t *item) {
  verify_state_t *state = ctx;
  if (item->is_temp) return;
  entry_read_t r;
  entry_verdict_t verdict;
  struct stat st = item->st;
  int fd = -1;
  if (item->is_bad_bucket) {
    verdict = bad(&r, "%s, not a bucket directory", file_kind(st.st_mode));
  } else if ((fd = openat(item->dir_fd, item->name,
                          O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)) < 0) {
    if (errno == ENOENT) return; /* removed meanwhile */
    if (errno == ELOOP) {
      verdict = bad(&r, "a symbolic link, not a regular file");
    } else {
      snprintf(r.reason, sizeof r.reason, "%s", strerror(errno));
      verdict = ENTRY_READ_ERROR;
    }
  } else if (fstat(fd, &st) != 0) {
    snprintf(r.reason, sizeof r.reason, "%s", strerror(errno));
    verdict = ENTRY_READ_ERROR;
  } else {
    verdict = read_entry(cache, fd, &st, item->lo, item->hi, NULL, &r);
  }
  if (fd >= 0) close(fd);
  if (verdict == ENTRY_GOOD) {
    tsr_free(r.payload);
    state->good++;
    return;
  }
  tsr_strbuf_t path;
  tsr_strbuf_initialize(&path);
  item_path(cache, item, &path);
  const char *shown = path.failed ? item->name : path.data;
  if (verdict != ENTRY_BAD) {
    if (!state->first_error)
      state->first_error = verdict == ENTRY_NO_MEMORY
                               ? TSR_OOM()
                               : TSR_STATUS(TSR_IO_ERROR, "cannot read %s: %s", shown,
                                            r.reason);
    tsr_strbuf_deinitialize(&path);
    return;
  }
  state->bad++;
  if (state->report) fprintf(state->report, "bad: %s: %s\n", shown, r.reason);
  tsr_strbuf_deinitialize(&path);
  if (state->remove_bad && remove_if_same(item->dir_fd, item->name, &st) == 0 &&
      S_ISREG(st.st_mode))
    (void)account(cache, -(int64_t)st.st_size, false);
}

tsr_status_t tsr_disk_cache_verify(tsr_disk_cache_t *cache, FILE *report,
                                   bool remove_bad, uint64_t *out_good,
                                   uint64_t *out_bad) {
  if (!cache)
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "tsr_disk_cache_verify: NULL argument");
  verify_state_t state = {report, remove_bad, 0, 0, NULL};
  tsr_status_t status = walk(cache, verify_item, &state);
  if (status) {
    tsr_status_free(state.first_error);
  } else {
    status = state.first_error;
  }
  if (report) fflush(report);
  if (out_good) *out_good = state.good;
  if (out_bad) *out_bad = state.bad;
  return status;
}
