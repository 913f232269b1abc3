/* tessera cache: look at and maintain the disk cache (docs/cache.md,
 * "Command line"): stats, clear, verify. Built on the public API alone
 * (tessera/tessera.h) and libc. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cli.h"

const char cmd_cache_help[] =
    "Usage: tessera cache stats|clear|verify [OPTIONS]\n"
    "\n"
    "Looks at and maintains the disk cache, where tessera keeps prepared and\n"
    "compiled kernels between runs (docs/cache.md).\n"
    "\n"
    "Subcommands:\n"
    "  stats    print the directory, the number of entries and their size,\n"
    "           the size limit and leftover temporary files\n"
    "  clear    remove every entry (and temporary files over an hour old)\n"
    "  verify   check every entry in full (a regular file, its MAC, header,\n"
    "           versions, key, decompression) and every bucket (a directory,\n"
    "           not a link); print each bad one as 'bad: PATH: REASON' and a\n"
    "           summary\n"
    "\n"
    "Options:\n"
    "  --dir DIR      the cache directory (default: $TESSERA_CACHE_DIR, else\n"
    "                 $XDG_CACHE_HOME/tessera, else ~/.cache/tessera)\n"
    "  --remove-bad   verify: remove the bad entries too (otherwise they are\n"
    "                 only listed; a lookup removes a bad entry anyway)\n"
    "  -h, --help     show this help\n"
    "\n"
    "Environment: TESSERA_CACHE=off (also 0, false, no) disables the cache;\n"
    "the subcommands then say so and do nothing. TESSERA_CACHE_MAX_SIZE is\n"
    "the size limit (e.g. 500M, 2G; default 1G). TESSERA_CACHE_KEY_FILE is\n"
    "the key that authenticates entries (default ~/.config/tessera/cache.key,\n"
    "made on first use); TESSERA_CACHE_SHARED=1 uses a cache shared between\n"
    "users on purpose (otherwise a directory of another user, or one its\n"
    "group or others may write, is refused).\n"
    "\n"
    "Exit status: 0 success; 1 verify found bad entries, or entries could not\n"
    "be read or removed; 2 usage errors, or a cache directory that cannot be\n"
    "used.\n"
    "\n"
    "Examples:\n"
    "  tessera cache stats\n"
    "  tessera cache verify --remove-bad\n"
    "  tessera cache clear --dir /tmp/tessera-cache\n";

/* Prints a status as "tessera cache: <code>: <message>", frees it and
 * returns `exit_status`. */
static int fail(tsr_status_t status, int exit_status) {
  fprintf(stderr, "tessera cache: %s: %s\n",
          tsr_status_code_name(tsr_status_code(status)),
          tsr_status_message(status));
  tsr_status_free(status);
  return exit_status;
}

static int run_stats(tsr_disk_cache_t *cache) {
  tsr_disk_cache_stats_t st;
  tsr_status_t status = tsr_disk_cache_scan(cache, &st);
  if (status) return fail(status, EXIT_FAILED);
  char size[32], limit[32];
  tsr_format_bytes(size, sizeof size, st.bytes);
  tsr_format_bytes(limit, sizeof limit, st.max_bytes);
  printf("directory:   %s\n", tsr_disk_cache_dir(cache));
  printf("entries:     %" PRIu64 "\n", st.entries);
  printf("size:        %s (%" PRIu64 " bytes)\n", size, st.bytes);
  printf("limit:       %s (%" PRIu64 " bytes)\n", limit, st.max_bytes);
  printf("temp files:  %" PRIu64 "\n", st.temp_files);
  return EXIT_OK;
}

static int run_clear(tsr_disk_cache_t *cache) {
  uint64_t removed = 0;
  tsr_status_t status = tsr_disk_cache_clear(cache, &removed);
  printf("removed %" PRIu64 " entr%s from %s\n", removed,
         removed == 1 ? "y" : "ies", tsr_disk_cache_dir(cache));
  return status ? fail(status, EXIT_FAILED) : EXIT_OK;
}

static int run_verify(tsr_disk_cache_t *cache, bool remove_bad) {
  uint64_t good = 0, bad = 0;
  tsr_status_t status = tsr_disk_cache_verify(cache, stdout, remove_bad, &good, &bad);
  printf("%" PRIu64 " entr%s checked in %s: %" PRIu64 " good, %" PRIu64 " bad",
         good + bad, good + bad == 1 ? "y" : "ies", tsr_disk_cache_dir(cache),
         good, bad);
  if (bad && remove_bad) printf(" (removed)");
  else if (bad) printf(" (remove them with 'tessera cache verify --remove-bad')");
  printf("\n");
  if (status) return fail(status, EXIT_FAILED);
  return bad ? EXIT_FAILED : EXIT_OK;
}

int cmd_cache(int argc, char **argv) {
  const char *sub = NULL, *dir = NULL;
  bool remove_bad = false, options_done = false;
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    if (!options_done && arg[0] == '-' && arg[1]) {
      if (strcmp(arg, "--") == 0) {
        options_done = true;
      } else if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
        fputs(cmd_cache_help, stdout);
        return EXIT_OK;
      } else if (strcmp(arg, "--remove-bad") == 0) {
        remove_bad = true;
      } else if (strcmp(arg, "--dir") == 0) {
        if (i + 1 >= argc || !argv[i + 1][0])
          return cli_usage_error("cache", "--dir expects a directory");
        dir = argv[++i];
      } else if (strncmp(arg, "--dir=", 6) == 0) {
        if (!arg[6]) return cli_usage_error("cache", "--dir expects a directory");
        dir = arg + 6;
      } else {
        return cli_usage_error("cache", "unknown option '%s'", arg);
      }
    } else if (sub) {
      return cli_usage_error("cache", "one subcommand expected, got '%s' and '%s'", sub, arg);
    } else {
      sub = arg;
    }
  }
  if (!sub) return cli_usage_error("cache", "a subcommand is needed: stats, clear or verify");
  bool stats = strcmp(sub, "stats") == 0, clear = strcmp(sub, "clear") == 0,
       verify = strcmp(sub, "verify") == 0;
  if (!stats && !clear && !verify)
    return cli_usage_error("cache", "unknown subcommand '%s' (stats, clear, verify)", sub);
  if (remove_bad && !verify)
    return cli_usage_error("cache", "--remove-bad applies to 'verify' only");

  if (tsr_disk_cache_disabled_by_env()) {
    printf("the disk cache is disabled (TESSERA_CACHE=%s)\n", getenv("TESSERA_CACHE"));
    return EXIT_OK;
  }
  tsr_disk_cache_options_t options;
  tsr_disk_cache_options_initialize(&options);
  options.dir = dir;
  tsr_disk_cache_t *cache = NULL;
  tsr_status_t status = tsr_disk_cache_open(&options, &cache);
  if (status) return fail(status, EXIT_USAGE);
  int rc = stats ? run_stats(cache) : clear ? run_clear(cache)
                                            : run_verify(cache, remove_bad);
  tsr_disk_cache_close(cache);
  if (fflush(stdout) != 0 && rc == EXIT_OK) rc = EXIT_FAILED;
  return rc;
}
