/* Keeping the disk cache in shape (cache/disk_internal.h): the running size
 * estimate, walking the directory, cleanup (approximate LRU) after puts, the
 * counters (tsr_disk_cache_stats) and the maintenance commands scan, clear
 * and verify. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "cache/disk_internal.h"

/* The size file: magic, bytes, puts since the last full scan, XXH3-64 of the
 * first 24 bytes. */
enum { SIZE_RECORD = 32 };
static const char size_magic[8] = {'T', 'S', 'R', 'S', 'I', 'Z', 'E', '1'};

#define STALE_TEMP_SECONDS 3600   /* temp files older than this are leftovers */
#define RESCAN_PUTS 4096          /* full scan at least this often, to fix drift */
#define UNCOUNTED_SCAN_PUTS 64    /* without a usable size file: scan this often */

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
  if (dc_pread_all(fd, b, sizeof b, 0) != 0) return r;
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
bool dc_account(tsr_disk_cache_t *cache, int64_t delta, bool is_put) {
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

/* "DIR/v2/ab/name" (a bad bucket: "DIR/v2/ab"), for messages. */
void dc_item_path(const tsr_disk_cache_t *cache, const walk_item_t *item,
                  tsr_strbuf_t *sb) {
  if (item->is_bad_bucket)
    tsr_strbuf_printf(sb, "%s/%s", cache->format_dir, item->bucket);
  else
    tsr_strbuf_printf(sb, "%s/%s/%s", cache->format_dir, item->bucket, item->name);
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
    int fd = dc_open_bucket_fd(cache, bucket);
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

static int64_t mtime_ns(const struct stat *st) {
  return (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
}

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
    if (stale_temp(item, scan->now)) (void)dc_remove_if_same(item->dir_fd, item->name, &item->st);
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
  dc_entry_names(e->lo, e->hi, bucket, name);
  int fd = dc_open_bucket_fd(cache, bucket);
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
void dc_cleanup(tsr_disk_cache_t *cache) {
  int lock = lock_cleanup(cache, false);
  if (lock == -1) return; /* another process is cleaning up */
  uint64_t before = size_estimate(cache);
  lru_scan_t scan = {NULL, 0, 0, 0, false, time(NULL)};
  tsr_status_t status = walk(cache, collect_entry, &scan);
  if (status) {
    (void)dc_disk_error(cache, status);
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

/* ---- counters, scan, clear, verify ---------------------------------------------- */

/* Here, not in disk.c with the handle: scan starts from the counters, and
 * disk.c calls this file (cleanup after puts), never the other way. */
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
  int err = dc_remove_if_same(item->dir_fd, item->name, &item->st);
  if (!err) {
    if (!item->is_temp) state->removed++;
    return;
  }
  if (!item->is_temp && regular) state->kept_bytes += (uint64_t)item->st.st_size;
  if (!state->first_errno) {
    state->first_errno = err;
    tsr_strbuf_t sb;
    tsr_strbuf_initialize(&sb);
    dc_item_path(cache, item, &sb);
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
    verdict = dc_entry_bad(&r, "%s, not a bucket directory", dc_file_kind(st.st_mode));
  } else if ((fd = openat(item->dir_fd, item->name,
                          O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)) < 0) {
    if (errno == ENOENT) return; /* removed meanwhile */
    if (errno == ELOOP) {
      verdict = dc_entry_bad(&r, "a symbolic link, not a regular file");
    } else {
      snprintf(r.reason, sizeof r.reason, "%s", strerror(errno));
      verdict = ENTRY_READ_ERROR;
    }
  } else if (fstat(fd, &st) != 0) {
    snprintf(r.reason, sizeof r.reason, "%s", strerror(errno));
    verdict = ENTRY_READ_ERROR;
  } else {
    verdict = dc_read_entry(cache, fd, &st, item->lo, item->hi, NULL, &r);
  }
  if (fd >= 0) close(fd);
  if (verdict == ENTRY_GOOD) {
    tsr_free(r.payload);
    state->good++;
    return;
  }
  tsr_strbuf_t path;
  tsr_strbuf_initialize(&path);
  dc_item_path(cache, item, &path);
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
  if (state->remove_bad && dc_remove_if_same(item->dir_fd, item->name, &st) == 0 &&
      S_ISREG(st.st_mode))
    (void)dc_account(cache, -(int64_t)st.st_size, false);
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
