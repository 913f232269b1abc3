/* The disk cache's entry format (cache/disk_internal.h, docs/cache.md "On
 * disk"): the header layout, building an entry's header with its MAC and
 * compressing its payload, and reading and validating an entry in full. */
#include <errno.h>
#include <inttypes.h>
#include <sodium.h>
#include <string.h>
#include <xxhash.h>
#include <zstd.h>

#include "cache/disk_internal.h"

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

/* zstd emits at most a 128 KiB block per 4 stored bytes (3-byte block header
 * + 1 RLE byte), so no valid frame inflates more than 32768 times. A header
 * that claims more is rejected before anything is allocated. */
#define ZSTD_MAX_RATIO 32768

entry_verdict_t dc_entry_bad(entry_read_t *out, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(out->reason, sizeof out->reason, fmt, ap);
  va_end(ap);
  return ENTRY_BAD;
}

static entry_verdict_t read_error(entry_read_t *out, int rc) {
  if (rc > 0) return dc_entry_bad(out, "shorter than its size said (changed while read)");
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
entry_verdict_t dc_read_entry(const tsr_disk_cache_t *cache, int fd,
                              const struct stat *st, uint64_t lo, uint64_t hi,
                              const tsr_cache_key_t *key, entry_read_t *out) {
  out->payload = NULL;
  out->payload_size = 0;
  if (!S_ISREG(st->st_mode))
    return dc_entry_bad(out, "%s, not a regular file", dc_file_kind(st->st_mode));
  uint64_t file_size = (uint64_t)st->st_size;
  if (file_size < HEADER_SIZE)
    return dc_entry_bad(out, "truncated: %" PRIu64 " bytes, shorter than the %d-byte "
                        "header", file_size, HEADER_SIZE);
  uint8_t h[HEADER_SIZE];
  int rc = dc_pread_all(fd, h, HEADER_SIZE, 0);
  if (rc) return read_error(out, rc);
  if (memcmp(h + OFF_MAGIC, entry_magic, sizeof entry_magic) != 0)
    return dc_entry_bad(out, "not a tessera cache entry (bad magic)");
  if (get_u32(h + OFF_FORMAT) != FORMAT_VERSION)
    return dc_entry_bad(out, "entry format %" PRIu32 ", expected %d",
                        get_u32(h + OFF_FORMAT), FORMAT_VERSION);
  if (get_u32(h + OFF_HEADER_SIZE) != HEADER_SIZE)
    return dc_entry_bad(out, "header size %" PRIu32 ", expected %d",
                        get_u32(h + OFF_HEADER_SIZE), HEADER_SIZE);

  /* Sizes against the file before any allocation: key and stored payload
   * must fill the file exactly. */
  uint64_t key_len = get_u64(h + OFF_KEY_LEN);
  uint64_t stored_size = get_u64(h + OFF_STORED_SIZE);
  uint64_t payload_size = get_u64(h + OFF_PAYLOAD_SIZE);
  uint64_t body = file_size - HEADER_SIZE;
  if (key_len > body)
    return dc_entry_bad(out, "truncated: the header describes a %" PRIu64 "-byte key, "
                        "the file has %" PRIu64 " bytes", key_len, file_size);
  if (stored_size != body - key_len) {
    uint64_t want;
    if (__builtin_add_overflow(HEADER_SIZE + key_len, stored_size, &want))
      want = UINT64_MAX;
    return dc_entry_bad(out, "%s: the header describes %" PRIu64 " bytes, the file has "
                        "%" PRIu64, want > file_size ? "truncated" : "size mismatch",
                        want, file_size);
  }

  /* Key material and stored payload, read once and authenticated before
   * any of it (or the header) is believed. */
  uint8_t *data = tsr_malloc((size_t)body ? (size_t)body : 1);
  if (!data) return ENTRY_NO_MEMORY;
  rc = dc_pread_all(fd, data, (size_t)body, HEADER_SIZE);
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
    verdict = dc_entry_bad(out, "authentication failed: not written with this cache's key "
                           "(planted, forged or damaged)");
  } else if (strcmp(version, TSR_VERSION_STRING) != 0) {
    /* Keys include the version, so this is a foreign or damaged file. */
    verdict = dc_entry_bad(out, "written by tessera %.32s, this is tessera %s", version,
                           TSR_VERSION_STRING);
  } else if (get_u32(h + OFF_RESERVED) || memchr(h + OFF_VERSION, 0, VERSION_FIELD) == NULL) {
    verdict = dc_entry_bad(out, "reserved header fields are not zero");
  } else if (got_lo != lo || got_hi != hi) {
    tsr_cache_key_t got = {got_lo, got_hi, NULL, 0};
    char hex[HASH_HEX + 1];
    tsr_cache_key_hex(&got, hex);
    verdict = dc_entry_bad(out, "holds the entry of key %s (misplaced file)", hex);
  } else if (key) {
    if (key_len != key->len || (key_len && memcmp(material, key->bytes, key_len)))
      verdict = ENTRY_OTHER_KEY;
  } else {
    XXH128_hash_t kh = XXH3_128bits(key_len ? material : (const void *)"",
                                    (size_t)key_len);
    if (kh.low64 != lo || kh.high64 != hi)
      verdict = dc_entry_bad(out, "the key material does not hash to the entry's key");
  }
  if (verdict == ENTRY_GOOD) {
    if (compression == COMPRESSION_NONE) {
      if (payload_size != stored_size)
        verdict = dc_entry_bad(out, "uncompressed entry of %" PRIu64 " bytes says %" PRIu64,
                               stored_size, payload_size);
    } else if (compression == COMPRESSION_ZSTD) {
      if (stored_size == 0 || payload_size / ZSTD_MAX_RATIO > stored_size ||
          payload_size > SIZE_MAX)
        verdict = dc_entry_bad(out, "implausible sizes: %" PRIu64 " bytes inflating to %"
                               PRIu64, stored_size, payload_size);
    } else {
      verdict = dc_entry_bad(out, "unknown compression %" PRIu32, compression);
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
    return dc_entry_bad(out, "zstd frame content size does not match the header's "
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
    if (ZSTD_isError(n)) return dc_entry_bad(out, "zstd: %s", ZSTD_getErrorName(n));
    return dc_entry_bad(out, "decompressed to %zu bytes, the header says %" PRIu64, n,
                        payload_size);
  }
  out->payload = payload;
  out->payload_size = (size_t)payload_size;
  return ENTRY_GOOD;
}

/* The header of an entry; the MAC covers it, the key and `stored`. */
void dc_build_header(const tsr_disk_cache_t *cache, uint8_t h[HEADER_SIZE],
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

uint32_t dc_compress(const tsr_disk_cache_t *cache, const void *payload, size_t size,
                     const void **out_stored, size_t *out_stored_size,
                     void **out_compressed) {
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
  *out_stored = stored;
  *out_stored_size = stored_size;
  *out_compressed = compressed;
  return compression;
}
