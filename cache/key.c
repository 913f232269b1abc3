/* Cache keys: XXH3-128 over the key material (tessera/cache.h). */
#include <xxhash.h>

#include "tessera/cache.h"

void tsr_cache_key_make(tsr_cache_key_t *key, const void *bytes, size_t len) {
  XXH128_hash_t h = XXH3_128bits(bytes, len);
  key->lo = h.low64;
  key->hi = h.high64;
  key->bytes = bytes;
  key->len = len;
}

void tsr_cache_key_hex(const tsr_cache_key_t *key, char out[33]) {
  static const char digits[] = "0123456789abcdef";
  for (int i = 0; i < 16; i++) {
    uint64_t word = i < 8 ? key->hi : key->lo;
    unsigned byte = (unsigned)(word >> (56 - 8 * (i % 8))) & 0xff;
    out[2 * i] = digits[byte >> 4];
    out[2 * i + 1] = digits[byte & 15];
  }
  out[32] = '\0';
}
