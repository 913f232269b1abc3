/* The disk cache's files outside its entries (cache/files.c): making
 * directories, and the secret key that authenticates entries
 * (docs/cache.md, "Trust model"): where it lives, the checks a key file
 * must pass, and its creation on first use. Internal to the cache. */
#ifndef TSR_CACHE_FILES_H
#define TSR_CACHE_FILES_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "tessera/base.h"

/* mkdir -p `path`, each missing component made with `mode` (less the
 * umask). On failure TSR_IO_ERROR "cannot create WHAT NAME: cannot create
 * COMPONENT: REASON" (or "... PATH is not a directory"). */
tsr_status_t tsr_cache_make_dirs(const char *path, mode_t mode, const char *what,
                                 const char *name) TSR_MUST_USE;

enum { TSR_CACHE_MAC_KEY_BYTES = 32 };

/* Loads the key from `path` (NULL: $TESSERA_CACHE_KEY_FILE, else
 * $XDG_CONFIG_HOME/tessera/cache.key, else ~/.config/tessera/cache.key),
 * creating it with fresh random bytes (mode 0600, its directory 0700) when
 * it does not exist. The file must be a regular file of exactly
 * TSR_CACHE_MAC_KEY_BYTES bytes, owned by the effective user and neither
 * readable nor writable by group or others; with `shared` (a cache shared
 * between users on purpose) any owner will do and its group may use it, but
 * others may not. TSR_IO_ERROR naming the file and the
 * check that failed otherwise. *out_path (may be NULL) is the file used. */
tsr_status_t tsr_cache_mac_key_load(const char *path, bool shared,
                                    uint8_t key[TSR_CACHE_MAC_KEY_BYTES],
                                    char **out_path) TSR_MUST_USE;

#endif /* TSR_CACHE_FILES_H */
