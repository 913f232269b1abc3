/* The disk cache's files outside its entries (cache/files.h): directories
 * made on first use, and the key that authenticates entries, loaded from
 * a file outside the cache directory (created on first use). */
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base_internal.h"
#include "cache/files.h"

tsr_status_t tsr_cache_make_dirs(const char *path, mode_t mode, const char *what,
                                 const char *name) {
  struct stat st; /* the common case, one syscall: it is there */
  if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) return NULL;
  char *copy = tsr_strndup(path, strlen(path));
  if (!copy) return TSR_OOM();
  tsr_status_t status = NULL;
  for (char *p = copy + 1;; p++) {
    if (*p != '/' && *p != '\0') continue;
    char saved = *p;
    *p = '\0';
    if (mkdir(copy, mode) != 0 && errno != EEXIST) {
      status = TSR_STATUS(TSR_IO_ERROR, "cannot create %s %s: cannot create %s: %s", what,
                          name, copy, strerror(errno));
      break;
    }
    *p = saved;
    if (!saved) break;
  }
  tsr_free(copy);
  if (status) return status;
  if (stat(path, &st) != 0)
    return TSR_STATUS(TSR_IO_ERROR, "cannot use %s %s: %s: %s", what, name, path,
                      strerror(errno));
  if (!S_ISDIR(st.st_mode))
    return TSR_STATUS(TSR_IO_ERROR, "cannot use %s %s: %s is not a directory", what, name,
                      path);
  return NULL;
}

/* $TESSERA_CACHE_KEY_FILE, $XDG_CONFIG_HOME/tessera/cache.key (absolute
 * only, as the XDG spec says), ~/.config/tessera/cache.key. */
static tsr_status_t key_path(const char *option, char **out) {
  const char *env;
  tsr_strbuf_t sb;
  tsr_strbuf_initialize(&sb);
  if (option && *option) {
    tsr_strbuf_puts(&sb, option);
  } else if ((env = getenv("TESSERA_CACHE_KEY_FILE")) && *env) {
    tsr_strbuf_puts(&sb, env);
  } else if ((env = getenv("XDG_CONFIG_HOME")) && env[0] == '/') {
    tsr_strbuf_printf(&sb, "%s/tessera/cache.key", env);
  } else if ((env = getenv("HOME")) && *env) {
    tsr_strbuf_printf(&sb, "%s/.config/tessera/cache.key", env);
  } else {
    return TSR_STATUS(TSR_IO_ERROR, "no cache key file: none of TESSERA_CACHE_KEY_FILE, "
                                    "XDG_CONFIG_HOME and HOME is set");
  }
  if (sb.failed) {
    tsr_strbuf_deinitialize(&sb);
    return TSR_OOM();
  }
  *out = tsr_strbuf_take(&sb);
  return NULL;
}

/* Creates `path` holding fresh random bytes, atomically: a private
 * temporary file beside it, written and synced, then linked to the name
 * (link fails if another process created the key meanwhile: theirs wins).
 * Its directory is made 0700 if missing. */
static tsr_status_t create_key(const char *path) {
  const char *slash = strrchr(path, '/');
  if (slash && slash != path) {
    char *dir = tsr_strndup(path, (size_t)(slash - path));
    if (!dir) return TSR_OOM();
    tsr_status_t s = tsr_cache_make_dirs(dir, 0700, "the directory of the cache key", path);
    tsr_free(dir);
    TSR_RETURN_IF_ERROR(s);
  }
  tsr_strbuf_t tmp;
  tsr_strbuf_initialize(&tmp);
  tsr_strbuf_printf(&tmp, "%s.tmp-XXXXXX", path);
  if (tmp.failed) return TSR_OOM();
  int fd = mkstemp(tmp.data); /* mode 0600 */
  if (fd < 0) {
    tsr_status_t s = TSR_STATUS(TSR_IO_ERROR, "cannot create the cache key %s: %s: %s", path,
                                tmp.data, strerror(errno));
    tsr_strbuf_deinitialize(&tmp);
    return s;
  }
  uint8_t key[TSR_CACHE_MAC_KEY_BYTES];
  randombytes_buf(key, sizeof key);
  const char *step = NULL;
  if (!tsr_write_all(fd, key, sizeof key)) step = "write";
  else if (fsync(fd) != 0) step = "sync";
  int err = errno;
  sodium_memzero(key, sizeof key);
  if (close(fd) != 0 && !step) {
    err = errno;
    step = "close";
  }
  if (!step && link(tmp.data, path) != 0 && errno != EEXIST) {
    err = errno;
    step = "link into place";
  }
  unlink(tmp.data);
  tsr_status_t s = NULL;
  if (step)
    s = TSR_STATUS(TSR_IO_ERROR, "cannot create the cache key %s: cannot %s %s: %s", path,
                   step, tmp.data, strerror(err));
  tsr_strbuf_deinitialize(&tmp);
  return s;
}

/* Reads the key from the open file `fd` after checking what it is. */
static tsr_status_t read_key(int fd, const char *path, bool shared,
                             uint8_t key[TSR_CACHE_MAC_KEY_BYTES]) {
  struct stat st;
  if (fstat(fd, &st) != 0)
    return TSR_STATUS(TSR_IO_ERROR, "cannot stat the cache key %s: %s", path, strerror(errno));
  const char *advice = "(chmod 600 it, or remove it to have a new key made)";
  if (!S_ISREG(st.st_mode))
    return TSR_STATUS(TSR_IO_ERROR, "the cache key %s is not a regular file", path);
  if (!shared && st.st_uid != geteuid())
    return TSR_STATUS(TSR_IO_ERROR, "the cache key %s belongs to uid %u, not to this user "
                      "(uid %u): refusing it (a key shared on purpose needs "
                      "TESSERA_CACHE_SHARED=1)", path, (unsigned)st.st_uid,
                      (unsigned)geteuid());
  mode_t forbidden = shared ? 0007 : 0077;
  if (st.st_mode & forbidden)
    return TSR_STATUS(TSR_IO_ERROR, "the cache key %s has mode %04o: %s may use it, so they "
                      "could forge cache entries; refusing it %s", path,
                      (unsigned)(st.st_mode & 07777), shared ? "others" : "group or others",
                      shared ? "(chmod o= it)" : advice);
  if (st.st_size != TSR_CACHE_MAC_KEY_BYTES)
    return TSR_STATUS(TSR_IO_ERROR, "the cache key %s has %lld bytes, expected %d (remove it "
                      "to have a new key made)", path, (long long)st.st_size,
                      TSR_CACHE_MAC_KEY_BYTES);
  ssize_t n;
  do {
    n = pread(fd, key, TSR_CACHE_MAC_KEY_BYTES, 0);
  } while (n < 0 && errno == EINTR);
  if (n != TSR_CACHE_MAC_KEY_BYTES)
    return TSR_STATUS(TSR_IO_ERROR, "cannot read the cache key %s: %s", path,
                      n < 0 ? strerror(errno) : "shorter than its size");
  return NULL;
}

tsr_status_t tsr_cache_mac_key_load(const char *option, bool shared,
                                    uint8_t key[TSR_CACHE_MAC_KEY_BYTES], char **out_path) {
  if (sodium_init() < 0)
    return TSR_STATUS(TSR_INTERNAL, "libsodium cannot be initialized");
  char *path = NULL;
  TSR_RETURN_IF_ERROR(key_path(option, &path));
  tsr_status_t s = NULL;
  for (int attempt = 0;; attempt++) {
    /* O_NONBLOCK: a FIFO in its place must not hang the process. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd >= 0) {
      s = read_key(fd, path, shared, key);
      close(fd);
      break;
    }
    if (errno != ENOENT || attempt > 0) {
      s = TSR_STATUS(TSR_IO_ERROR, "cannot open the cache key %s: %s", path, strerror(errno));
      break;
    }
    s = create_key(path);
    if (s) break;
  }
  if (s || !out_path) {
    tsr_free(path);
  } else {
    *out_path = path;
  }
  return s;
}
