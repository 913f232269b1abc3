/* The on-disk cache (tessera/cache.h, docs/cache.md "On disk"): one file per
 * entry at <dir>/v2/<2 hex>/<30 hex>.tsc, written atomically (temporary file,
 * fsync, rename), authenticated with a keyed MAC and validated in full on
 * every read, trimmed least recently used first. Every file is reached from
 * the format directory's descriptor, never through a symbolic link, and
 * opened as a regular file only. Safe between threads and processes:
 * readers take no locks. This file holds the handle: options, open and
 * close, get and put; the entry format is in entry.c, the size estimate,
 * cleanup, the counters and the maintenance commands in maintain.c (layers:
 * disk_internal.h). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <sys/stat.h>
#include <sodium.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h> /* the compression level's bounds */

#include "cache/disk_internal.h"

#define DEFAULT_MAX_BYTES ((uint64_t)1 << 30)
#define TOUCH_AFTER_SECONDS 60    /* a hit refreshes an mtime older than this */

static char *concat(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b), total;
  if (!tsr_add_size(la, lb + 1, &total)) return NULL;
  char *s = tsr_malloc(total);
  if (!s) return NULL;
  memcpy(s, a, la);
  memcpy(s + la, b, lb + 1);
  return s;
}

/* <format_dir>/<bucket>/<name>.tsc for a hash, for messages; the caller
 * frees. */
static char *hash_path(const tsr_disk_cache_t *cache, uint64_t lo, uint64_t hi) {
  char bucket[BUCKET_HEX + 1], name[NAME_HEX + SUFFIX_LEN + 1];
  dc_entry_names(lo, hi, bucket, name);
  tsr_strbuf_t sb;
  tsr_strbuf_initialize(&sb);
  tsr_strbuf_printf(&sb, "%s/%s/%s", cache->format_dir, bucket, name);
  if (!sb.failed) return tsr_strbuf_take(&sb);
  tsr_strbuf_deinitialize(&sb);
  return NULL;
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

/* Makes the cache directory, checks it, then makes and opens the format
 * directory from its descriptor (checking it too) and loads the key. Nothing
 * is written into a directory before its check: a refused directory (another
 * user's, say) is left as it was. */
static tsr_status_t open_dirs(tsr_disk_cache_t *cache, const char *key_file) {
  TSR_RETURN_IF_ERROR(tsr_cache_make_dirs(cache->dir, cache->dir_mode,
                                          "the cache directory", cache->dir));
  int dir_fd = open(cache->dir, O_RDONLY | O_DIRECTORY | O_NONBLOCK | O_CLOEXEC);
  if (dir_fd < 0)
    return TSR_STATUS(TSR_IO_ERROR, "cannot open the cache directory %s: %s", cache->dir,
                      strerror(errno));
  tsr_status_t s = check_owner(cache, dir_fd, cache->dir);
  if (!s && mkdirat(dir_fd, FORMAT_DIR, cache->dir_mode) != 0 && errno != EEXIST)
    s = TSR_STATUS(TSR_IO_ERROR, "cannot create the cache directory %s: cannot create %s: %s",
                   cache->dir, cache->format_dir, strerror(errno));
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
      dc_warn(cache, "TESSERA_CACHE_MAX_SIZE='%s' is not a size (examples: "
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
  dc_item_path(cache, &item, &path);
  const char *shown = path.failed ? name : path.data;
  int err = dc_remove_if_same(dir_fd, name, st);
  if (err) {
    dc_warn(cache, "bad %s %s: %s; cannot remove it: %s", bucket ? "entry" : "bucket", shown,
            reason, strerror(err));
  } else {
    dc_warn(cache, "removed bad %s %s: %s", bucket ? "entry" : "bucket", shown, reason);
    if (S_ISREG(st->st_mode)) (void)dc_account(cache, -(int64_t)st->st_size, false);
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
    int fd = dc_open_bucket_fd(cache, name);
    if (fd >= 0) return fd;
    int err = errno;
    struct stat st;
    if ((err == ELOOP || err == ENOTDIR) &&
        fstatat(cache->format_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        !S_ISDIR(st.st_mode)) {
      char reason[64];
      snprintf(reason, sizeof reason, "%s, not a bucket directory", dc_file_kind(st.st_mode));
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
  dc_entry_names(key->lo, key->hi, bucket, name);
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
      status = dc_disk_error(cache, TSR_STATUS(TSR_IO_ERROR,
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
    status = dc_disk_error(cache, TSR_STATUS(TSR_IO_ERROR, "cannot stat the cache "
                           "entry %s: %s", path, strerror(err)));
    tsr_free(path);
    return status;
  }
  entry_read_t r;
  switch (dc_read_entry(cache, fd, &st, key->lo, key->hi, key, &r)) {
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
    status = dc_disk_error(cache, TSR_STATUS(TSR_IO_ERROR, "cannot read the cache "
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
  dc_entry_names(key->lo, key->hi, bucket, name);
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

  const void *stored;
  size_t stored_size;
  void *compressed;
  uint32_t compression =
      dc_compress(cache, payload, size, &stored, &stored_size, &compressed);
  uint64_t entry_size = (uint64_t)HEADER_SIZE + key->len + stored_size;
  tsr_status_t status = NULL;
  if (entry_size > cache->max_bytes / 100 * TRIM_PERCENT) {
    /* The next cleanup would evict it at once. */
    if (!atomic_exchange(&cache->oversize_reported, true))
      dc_warn(cache, "not storing an entry of %" PRIu64 " bytes: larger than %d%% "
              "of the cache limit (%" PRIu64 " bytes)", entry_size, TRIM_PERCENT,
              cache->max_bytes);
    tsr_free(compressed);
    return NULL;
  }
  uint8_t header[HEADER_SIZE];
  dc_build_header(cache, header, key, size, stored, stored_size, compression);
  uint64_t replaced = 0;
  status = write_entry(cache, key, header, stored, stored_size, &replaced);
  tsr_free(compressed);
  if (status) {
    if (tsr_status_code(status) == TSR_IO_ERROR) (void)dc_disk_error(cache, status);
    return status;
  }
  counter_add(&cache->puts, 1);
  if (dc_account(cache, (int64_t)entry_size - (int64_t)replaced, true))
    dc_cleanup(cache);
  return NULL;
}
