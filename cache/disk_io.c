/* The disk cache's lowest layer (cache/disk_internal.h): warnings and disk
 * errors of a handle, entry and bucket names, and reading, opening and
 * removing files in the format directory, never through a symbolic link. */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "cache/disk_internal.h"

void dc_warn(const tsr_disk_cache_t *cache, const char *fmt, ...) {
  if (!cache->warn_stream) return;
  tsr_strbuf_t sb;
  tsr_strbuf_initialize(&sb);
  tsr_strbuf_puts(&sb, "tessera: cache: ");
  va_list ap;
  va_start(ap, fmt);
  tsr_strbuf_vprintf(&sb, fmt, ap);
  va_end(ap);
  tsr_strbuf_puts(&sb, "\n");
  if (!sb.failed) {
    fputs(sb.data, cache->warn_stream);
    fflush(cache->warn_stream);
  }
  tsr_strbuf_deinitialize(&sb);
}

/* Counts a disk error and warns of the first one of this handle; returns
 * `status` for the caller to pass on. */
tsr_status_t dc_disk_error(tsr_disk_cache_t *cache, tsr_status_t status) {
  counter_add(&cache->errors, 1);
  if (!atomic_exchange(&cache->disk_error_reported, true))
    dc_warn(cache, "%s (further disk errors of this cache are not reported)",
            tsr_status_message(status));
  return status;
}

/* The bucket ("ab") and file name ("<30 hex>.tsc") of a hash. */
void dc_entry_names(uint64_t lo, uint64_t hi, char bucket[BUCKET_HEX + 1],
                    char name[NAME_HEX + SUFFIX_LEN + 1]) {
  tsr_cache_key_t k = {lo, hi, NULL, 0};
  char hex[HASH_HEX + 1];
  tsr_cache_key_hex(&k, hex);
  memcpy(bucket, hex, BUCKET_HEX);
  bucket[BUCKET_HEX] = '\0';
  memcpy(name, hex + BUCKET_HEX, NAME_HEX);
  memcpy(name + NAME_HEX, ENTRY_SUFFIX, SUFFIX_LEN + 1);
}

/* Reads exactly n bytes at `offset`: 0, or -1 with errno (EIO, ...), or 1 if
 * the file ended first (it shrank after fstat). */
int dc_pread_all(int fd, void *buf, size_t n, uint64_t offset) {
  uint8_t *p = buf;
  while (n) {
    ssize_t r = pread(fd, p, TSR_MIN(n, (size_t)1 << 30), (off_t)offset);
    if (r < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (r == 0) return 1;
    p += r;
    n -= (size_t)r;
    offset += (uint64_t)r;
  }
  return 0;
}

static bool same_file(const struct stat *a, const struct stat *b) {
  return a->st_ino == b->st_ino && a->st_dev == b->st_dev;
}

/* Unlinks dir_fd/name if it is still the file `st` describes: another
 * process may have renamed a fresh entry in since it was read, and that one
 * must stay. (The window between the check and the unlink is a few
 * instructions; losing it costs a miss, never wrong data.) Returns 0 when
 * removed (or already gone), else an errno. */
int dc_remove_if_same(int dir_fd, const char *name, const struct stat *st) {
  struct stat now;
  if (fstatat(dir_fd, name, &now, AT_SYMLINK_NOFOLLOW) != 0)
    return errno == ENOENT ? 0 : errno;
  if (!same_file(&now, st)) return 0;
  if (unlinkat(dir_fd, name, S_ISDIR(now.st_mode) ? AT_REMOVEDIR : 0) != 0)
    return errno == ENOENT ? 0 : errno;
  return 0;
}

/* Opens bucket `name` of the format directory; never through a symbolic
 * link (ELOOP or ENOTDIR then), and never waiting on a FIFO. */
int dc_open_bucket_fd(const tsr_disk_cache_t *cache, const char *name) {
  return openat(cache->format_fd, name,
                O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
}

/* What a file that should have been another kind is, for messages. */
const char *dc_file_kind(mode_t mode) {
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  return "a regular file";
}

