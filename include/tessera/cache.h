/* tessera cache: content-addressed storage of prepared and compiled kernels.
 * The cache knows keys and bytes, nothing of IR or MLIR (docs/cache.md).
 *
 * A key is the full key material (the canonical kernel bytes plus target,
 * options and versions, assembled by the runtime) together with its 128-bit
 * XXH3 hash. The hash picks the slot or file; a hit always compares the full
 * material, so a hash collision can never return another kernel's entry.
 *
 * The disk cache is safe to share between threads and between processes. */
#ifndef TESSERA_CACHE_H
#define TESSERA_CACHE_H

#include <stdio.h>

#include "tessera/base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Keys ------------------------------------------------------------- */

typedef struct tsr_cache_key {
  uint64_t lo, hi;      /* XXH3-128 of bytes[0..len) */
  const uint8_t *bytes; /* the key material; borrowed */
  size_t len;
} tsr_cache_key_t;

/* Hashes `bytes` (borrowed: they must outlive the key). */
TSR_API void tsr_cache_key_make(tsr_cache_key_t *key, const void *bytes,
                                size_t len);
/* 32 lowercase hex digits of the hash (hi then lo) and a NUL. */
TSR_API void tsr_cache_key_hex(const tsr_cache_key_t *key, char out[33]);

/* ---- Disk cache ---------------------------------------------------------- */

typedef struct tsr_disk_cache tsr_disk_cache_t;

typedef struct tsr_disk_cache_options {
  const char *dir;       /* NULL: $TESSERA_CACHE_DIR, else
                            $XDG_CACHE_HOME/tessera, else ~/.cache/tessera */
  uint64_t max_bytes;    /* 0: $TESSERA_CACHE_MAX_SIZE (bytes, or with a
                            K/M/G suffix), else 1 GiB */
  int compression_level; /* zstd level; default 1 */
  FILE *warn_stream;     /* warnings (bad entries removed, disk trouble);
                            default stderr; NULL after initialize = silent */
  const char *key_file;  /* the secret key that authenticates entries; NULL:
                            $TESSERA_CACHE_KEY_FILE, else
                            $XDG_CONFIG_HOME/tessera/cache.key, else
                            ~/.config/tessera/cache.key (made on first use) */
  bool shared;           /* a cache shared between users on purpose (also
                            TESSERA_CACHE_SHARED=1): no ownership checks on
                            the directory, and a key file of any owner that
                            others cannot use (docs/cache.md, "Trust model") */
  bool no_environment;   /* read no environment variable: dir and key_file
                            are required (TSR_INVALID_ARGUMENT), max_bytes 0
                            is 1 GiB, shared is only this field (what a
                            tsr_context_t uses, tessera/api.h) */
} tsr_disk_cache_options_t;

TSR_API void tsr_disk_cache_options_initialize(tsr_disk_cache_options_t *options);

/* Whether the environment disables the disk cache (TESSERA_CACHE=off, also
 * "0", "false", "no"). tsr_disk_cache_open itself does not look at it. */
TSR_API bool tsr_disk_cache_disabled_by_env(void);

/* Whether the environment shares the cache between users on purpose
 * (TESSERA_CACHE_SHARED=1, also "on", "true", "yes"). */
TSR_API bool tsr_disk_cache_shared_by_env(void);

/* Opens (creating if needed) the cache directory and loads (creating if
 * needed) the key that authenticates its entries. TSR_IO_ERROR when the
 * directory cannot be created or used, naming it and why: among others,
 * unless the cache is shared on purpose, a directory that belongs to
 * another user or that its group or others may write, and a key file that
 * is not this user's alone. A cache that is readable but not writable
 * opens: gets work, puts fail. Layout, entry format, trust model, eviction
 * and failure handling: docs/cache.md, "On disk". */
TSR_API tsr_status_t tsr_disk_cache_open(const tsr_disk_cache_options_t *options,
                                         tsr_disk_cache_t **out_cache)
    TSR_MUST_USE;
TSR_API void tsr_disk_cache_close(tsr_disk_cache_t *cache);
/* The directory in use (owned by the cache). */
TSR_API const char *tsr_disk_cache_dir(const tsr_disk_cache_t *cache);
/* The key file in use (owned by the cache). */
TSR_API const char *tsr_disk_cache_key_file(const tsr_disk_cache_t *cache);

/* Looks `key` up. On a hit *out_payload is a tsr_disk_cache_free()-able copy
 * of the stored bytes, authenticated with the cache's key. A miss is
 * TSR_NOT_FOUND. A bad entry (not a regular file, not authenticated by the
 * key: planted or forged, truncated, corrupted, other format or tessera
 * version, other key material) is removed,
 * warned about once, and reported as TSR_NOT_FOUND. (An entry with the same
 * hash but other key material is a miss too, neither removed nor warned
 * about: the next put replaces it.) TSR_IO_ERROR when an entry exists but
 * cannot be read (EACCES, EIO). */
TSR_API tsr_status_t tsr_disk_cache_get(tsr_disk_cache_t *cache,
                                        const tsr_cache_key_t *key,
                                        void **out_payload, size_t *out_size)
    TSR_MUST_USE;
/* Stores `payload` under `key` atomically (temporary file, fsync, rename):
 * readers in any process see the old entry, the new one, or none, never a
 * partial one. May evict least-recently-used entries to stay under the size
 * limit. TSR_IO_ERROR when the entry cannot be written (disk full, read-only);
 * nothing is left behind then, and the handle keeps working (the first disk
 * error of a handle is warned about, later ones only counted). An entry
 * larger than 90% of the limit is not stored (one warning; returns OK). */
TSR_API tsr_status_t tsr_disk_cache_put(tsr_disk_cache_t *cache,
                                        const tsr_cache_key_t *key,
                                        const void *payload, size_t size)
    TSR_MUST_USE;
TSR_API void tsr_disk_cache_free(void *payload);

typedef struct tsr_disk_cache_stats {
  /* this process, since open */
  uint64_t hits, misses, puts, bad_entries, evictions, errors;
  /* the directory now (tsr_disk_cache_scan) */
  uint64_t entries, bytes, temp_files, max_bytes;
} tsr_disk_cache_stats_t;

/* This handle's counters; the directory fields are left zero except
 * max_bytes. */
TSR_API void tsr_disk_cache_stats(const tsr_disk_cache_t *cache,
                                  tsr_disk_cache_stats_t *out_stats);
/* Counts the entries, bytes and leftover temporary files in the directory
 * (no locks: a snapshot); the handle's counters are filled in too. */
TSR_API tsr_status_t tsr_disk_cache_scan(tsr_disk_cache_t *cache,
                                         tsr_disk_cache_stats_t *out_stats)
    TSR_MUST_USE;
/* Removes every entry (and temporary files over an hour old: younger ones
 * may be puts in flight); *out_removed (may be NULL) counts the entries. */
TSR_API tsr_status_t tsr_disk_cache_clear(tsr_disk_cache_t *cache,
                                          uint64_t *out_removed) TSR_MUST_USE;
/* Checks every entry (a regular file, MAC, header, versions, key hash
 * against the file name, decompression) and every bucket (a directory, not
 * a symbolic link). Bad ones are reported on `report` (one line
 * "bad: PATH: REASON" each, may be NULL) and removed when `remove_bad`. */
TSR_API tsr_status_t tsr_disk_cache_verify(tsr_disk_cache_t *cache, FILE *report,
                                           bool remove_bad, uint64_t *out_good,
                                           uint64_t *out_bad) TSR_MUST_USE;

#ifdef __cplusplus
}
#endif
#endif /* TESSERA_CACHE_H */
