/* uthash, configured for tessera: include this instead of <uthash.h>. Keys
 * are hashed with FNV-1a (a small inline function) instead of uthash's
 * default Jenkins hash, whose switch falls through and trips
 * -Wimplicit-fallthrough under clang --werror. */
#ifndef TESSERA_BASE_HASHTABLE_H
#define TESSERA_BASE_HASHTABLE_H

#include <stddef.h>
#include <stdint.h>

static inline uint32_t tsr_fnv1a32(const void *key, size_t len) {
  const unsigned char *p = key;
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < len; i++) h = (h ^ p[i]) * 16777619u;
  return h;
}

#define HASH_FUNCTION(keyptr, keylen, hashv) \
  ((hashv) = tsr_fnv1a32((keyptr), (size_t)(keylen)))
#include <uthash.h>

#endif /* TESSERA_BASE_HASHTABLE_H */
