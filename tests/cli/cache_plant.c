/* Test helper for tests/cli/test_cache_run.sh: plays an attacker who can
 * write the cache directory. Puts the bytes of PAYLOAD under a key into the
 * disk cache the environment names (TESSERA_CACHE_DIR, and the attacker's
 * own TESSERA_CACHE_KEY_FILE), through the public API as any writer would:
 * the key is either the key material of an existing entry file (a compiled
 * kernel's, copied from a genuine entry) or the interpreter's key of the
 * first kernel in a .tsr file (a "verified" verdict for it).
 * Usage: cache_plant ENTRY.tsc|KERNEL.tsr PAYLOAD */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessera/tessera.h"

/* The whole file; NULL if unreadable. */
static unsigned char *slurp(const char *path, size_t *out_len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 1 << 16, len = 0;
  unsigned char *buf = malloc(cap);
  size_t n;
  while (buf && (n = fread(buf + len, 1, cap - len, f)) > 0) {
    len += n;
    if (len == cap) buf = realloc(buf, cap *= 2);
  }
  fclose(f);
  *out_len = len;
  return buf;
}

static unsigned long long get_u64(const unsigned char *p) {
  unsigned long long v = 0;
  for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fputs("usage: cache_plant ENTRY.tsc|KERNEL.tsr PAYLOAD\n", stderr);
    return 2;
  }
  size_t payload_len = 0, entry_len = 0;
  unsigned char *payload = slurp(argv[2], &payload_len);
  if (!payload) {
    fprintf(stderr, "cache_plant: cannot read %s\n", argv[2]);
    return 1;
  }
  tsr_cache_key_t key;
  tsr_runtime_key_t *runtime_key = NULL;
  tsr_ir_module_t *module = NULL;
  unsigned char *entry = NULL;
  tsr_status_t status = NULL;
  size_t len = strlen(argv[1]);
  if (len > 4 && strcmp(argv[1] + len - 4, ".tsr") == 0) {
    /* The options of `tessera run` without options. */
    tsr_executable_options_t options;
    tsr_executable_options_initialize(&options);
    status = tsr_ir_module_parse_file(argv[1], &module);
    if (!status)
      status = tsr_runtime_key_create(tsr_ir_module_kernel(module, 0), &options, &runtime_key);
    if (!status) key = *tsr_runtime_key_get(runtime_key);
  } else {
    /* The entry header keeps the key material's length at byte 64 and the
     * material itself after the 128-byte header. */
    entry = slurp(argv[1], &entry_len);
    if (!entry || entry_len < 128 || get_u64(entry + 64) > entry_len - 128) {
      fprintf(stderr, "cache_plant: %s is not a cache entry\n", argv[1]);
      return 1;
    }
    tsr_cache_key_make(&key, entry + 128, (size_t)get_u64(entry + 64));
  }
  tsr_disk_cache_t *cache = NULL;
  if (!status) status = tsr_disk_cache_open(NULL, &cache);
  if (!status) status = tsr_disk_cache_put(cache, &key, payload, payload_len);
  tsr_disk_cache_close(cache);
  tsr_runtime_key_destroy(runtime_key);
  tsr_ir_module_destroy(module);
  free(entry);
  free(payload);
  if (status) {
    fprintf(stderr, "cache_plant: %s\n", tsr_status_message(status));
    tsr_status_free(status);
    return 1;
  }
  return 0;
}
