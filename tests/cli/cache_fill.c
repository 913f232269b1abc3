/* Test helper for tests/cli/test_cache_cli.sh: puts N entries into a disk
 * cache (there is no CLI command that writes entries). Key i is
 * "cli key <i>"; its payload follows from i (odd: incompressible).
 * Usage: cache_fill DIR N */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessera/tessera.h"

int main(int argc, char **argv) {
  if (argc != 3) {
    fputs("usage: cache_fill DIR N\n", stderr);
    return 2;
  }
  tsr_disk_cache_options_t options;
  tsr_disk_cache_options_initialize(&options);
  options.dir = argv[1];
  tsr_disk_cache_t *cache = NULL;
  tsr_status_t status = tsr_disk_cache_open(&options, &cache);
  int n = atoi(argv[2]);
  static unsigned char payload[6000];
  for (int i = 0; !status && i < n; i++) {
    char text[32];
    snprintf(text, sizeof text, "cli key %d", i);
    tsr_cache_key_t key;
    tsr_cache_key_make(&key, text, strlen(text));
    uint64_t x = (uint64_t)i + 1;
    for (size_t j = 0; j < sizeof payload; j++) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      payload[j] = i % 2 ? (unsigned char)(x >> 56) : (unsigned char)"tessera "[j % 8];
    }
    status = tsr_disk_cache_put(cache, &key, payload, sizeof payload);
  }
  tsr_disk_cache_close(cache);
  if (status) {
    fprintf(stderr, "cache_fill: %s\n", tsr_status_message(status));
    tsr_status_free(status);
    return 1;
  }
  return 0;
}
