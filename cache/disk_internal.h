/* What the disk cache's files (cache/disk.c, disk_io.c, entry.c, maintain.c) share:
 * the directory layout, the handle and the small helpers. Private to the
 * disk cache; docs/cache.md "On disk" describes the format.
 *
 * Layers: a file calls its own functions and those of lower layers only,
 * never a function of a higher layer or of another file of its layer.
 *   0 disk_io.c    warnings and disk errors, entry and bucket names, reading,
 *                  opening and removing files in the format directory
 *   1 entry.c      the entry format: header layout, MAC, compression;
 *                  building an entry's header, reading and validating one
 *   2 maintain.c   the size estimate, walking the directory, cleanup
 *                  (approximate LRU), the counters, scan, clear and verify
 *   3 disk.c       the handle: options, open and close, get and put
 * The static inline helpers below belong to no layer. */
#ifndef TSR_CACHE_DISK_INTERNAL_H
#define TSR_CACHE_DISK_INTERNAL_H

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/stat.h>

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
};

#define TRIM_PERCENT 90           /* trimming stops at 90% of the limit */

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

/* ---- Small helpers (every layer) ------------------------------------------ */

static inline void put_u32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline void put_u64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint32_t get_u32(const uint8_t *p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}
static inline uint64_t get_u64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}

static inline void counter_add(atomic_uint_fast64_t *counter, uint64_t n) {
  atomic_fetch_add_explicit(counter, n, memory_order_relaxed);
}

/* ---- disk_io.c ------------------------------------------------------------ */

/* One warning line "tessera: cache: ...", written with a single call so that
 * lines from several threads do not interleave. */
void dc_warn(const tsr_disk_cache_t *cache, const char *fmt, ...)
    TSR_PRINTF(2, 3);

/* Counts a disk error and warns of the first one of this handle; returns
 * `status` for the caller to pass on. */
tsr_status_t dc_disk_error(tsr_disk_cache_t *cache, tsr_status_t status);

/* The bucket ("ab") and file name ("<30 hex>.tsc") of a hash. */
void dc_entry_names(uint64_t lo, uint64_t hi, char bucket[BUCKET_HEX + 1],
                    char name[NAME_HEX + SUFFIX_LEN + 1]);

/* Reads exactly n bytes at `offset`: 0, or -1 with errno (EIO, ...), or 1 if
 * the file ended first (it shrank after fstat). */
int dc_pread_all(int fd, void *buf, size_t n, uint64_t offset);

/* Unlinks dir_fd/name if it is still the file `st` describes: another
 * process may have renamed a fresh entry in since it was read, and that one
 * must stay. (The window between the check and the unlink is a few
 * instructions; losing it costs a miss, never wrong data.) Returns 0 when
 * removed (or already gone), else an errno. */
int dc_remove_if_same(int dir_fd, const char *name, const struct stat *st);

/* Opens bucket `name` of the format directory; never through a symbolic
 * link (ELOOP or ENOTDIR then), and never waiting on a FIFO. */
int dc_open_bucket_fd(const tsr_disk_cache_t *cache, const char *name);

/* What a file that should have been another kind is, for messages. */
const char *dc_file_kind(mode_t mode);

/* ---- entry.c -------------------------------------------------------------- */

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

/* Sets out->reason from the format; returns ENTRY_BAD. */
entry_verdict_t dc_entry_bad(entry_read_t *out, const char *fmt, ...)
    TSR_PRINTF(2, 3);

/* Validates the entry open on `fd` (described by `st`): its MAC first, then
 * every header field and the decompressed size, with each size checked
 * against the file's before anything is allocated. The entry must carry
 * hash (lo, hi). With `key`, its material must equal the key's (else
 * ENTRY_OTHER_KEY); without (verify), the material must hash to (lo, hi).
 * On ENTRY_GOOD out->payload holds the payload. */
entry_verdict_t dc_read_entry(const tsr_disk_cache_t *cache, int fd,
                              const struct stat *st, uint64_t lo, uint64_t hi,
                              const tsr_cache_key_t *key, entry_read_t *out);

/* The header of an entry; the MAC covers it, the key and `stored`. */
void dc_build_header(const tsr_disk_cache_t *cache, uint8_t h[HEADER_SIZE],
                     const tsr_cache_key_t *key, size_t payload_size,
                     const void *stored, size_t stored_size, uint32_t compression);

/* The bytes to store for `size` bytes of `payload`: zstd-compressed when that
 * helps (*out_compressed then holds them, for the caller to tsr_free), else
 * the payload itself. A buffer that cannot be had means storing raw.
 * Returns the header's compression field. */
uint32_t dc_compress(const tsr_disk_cache_t *cache, const void *payload, size_t size,
                     const void **out_stored, size_t *out_stored_size,
                     void **out_compressed);

/* ---- maintain.c ----------------------------------------------------------- */

/* Adds `delta` bytes (and one put if `is_put`) to the estimate. True when
 * a cleanup scan is due: over the limit, RESCAN_PUTS puts since the last
 * scan, or no valid estimate. */
bool dc_account(tsr_disk_cache_t *cache, int64_t delta, bool is_put);

/* A file the directory walk found (maintain.c); drop_bad in disk.c makes one
 * to name a bad file. */
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
void dc_item_path(const tsr_disk_cache_t *cache, const walk_item_t *item,
                  tsr_strbuf_t *sb);

/* After a put: if no other process is at it, scans the whole cache, removes
 * stale temporary files and, when over the limit, the least recently used
 * entries until the cache is at TRIM_PERCENT of it. */
void dc_cleanup(tsr_disk_cache_t *cache);

#endif /* TSR_CACHE_DISK_INTERNAL_H */
