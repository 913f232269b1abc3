/* Writing user files (run outputs, fmt -i) safely and all or nothing: a
 * regular file, or a new one, is written to a temporary file beside it and
 * renamed over it once every file of the batch is complete; a symlink is
 * followed and the file it names is replaced (the link stays), unless
 * another user planted it in a sticky directory (/tmp); a character device
 * or FIFO (/dev/stdout, a pipe) is written directly (waiting for a FIFO's
 * reader, unless the caller cannot wait: a run's trace). */
#define _XOPEN_SOURCE 700 /* S_ISVTX */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base_internal.h"

enum { MAX_LINK_HOPS = 40 };

struct tsr_outfile {
  const char *path; /* as the caller gave it, for messages (borrowed) */
  char *target;     /* the name replaced: `path` with symlinks followed */
  char *tmp;        /* the temporary file beside `target`; NULL for a stream */
  int fd;           /* -1 when closed */
  bool stream;      /* a character device or FIFO, written in place */
  bool no_wait;     /* a FIFO nobody reads is an error, not a wait */
  bool created;     /* `target` did not exist before */
  bool renamed;     /* the temporary file is in place */
  dev_t dev;        /* of an existing regular target, to find duplicates */
  ino_t ino;
};

bool tsr_write_all(int fd, const void *buf, size_t n) {
  const char *p = buf;
  while (n) {
    ssize_t w = write(fd, p, TSR_MIN(n, (size_t)1 << 30));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= (size_t)w;
  }
  return true;
}

unsigned tsr_process_umask(void) {
  mode_t mask = 022;
  FILE *f = fopen("/proc/self/status", "r");
  if (!f) return mask;
  char line[256];
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "Umask:", 6) == 0) {
      mask = (mode_t)strtoul(line + 6, NULL, 8) & 0777;
      break;
    }
  }
  fclose(f);
  return mask;
}

/* The directory part of `path` ("." when it has none); NULL on OOM. */
static char *dir_of(const char *path) {
  const char *slash = strrchr(path, '/');
  if (!slash) return tsr_strndup(".", 1);
  return tsr_strndup(path, slash == path ? 1 : (size_t)(slash - path));
}

/* Whether following the link `link` (lstat'ed as `st`) is refused: it lies
 * in a sticky, world-writable directory (/tmp) and belongs neither to us nor
 * to the directory's owner, the rule of Linux's fs.protected_symlinks, which
 * a process may run without (a container, another kernel). Else anyone
 * could point a name another user's run writes to at that user's files.
 * Writes the directory to `out_dir` (owned) when refused. */
static bool planted(const char *link, const struct stat *st, char **out_dir) {
  if (st->st_uid == geteuid()) return false;
  char *dir = dir_of(link);
  struct stat d;
  bool refused = dir && stat(dir, &d) == 0 && (d.st_mode & S_ISVTX) &&
                 (d.st_mode & S_IWOTH) && d.st_uid != st->st_uid;
  if (refused) {
    *out_dir = dir;
  } else {
    tsr_free(dir);
  }
  return refused;
}

/* `path` with every symlink in its last component followed, even a dangling
 * one (its target is then the file to create), into *out_target (owned).
 * A link planted by another user in a sticky directory is not followed. */
static tsr_status_t follow_links(const char *path, char **out_target) {
  char *cur = tsr_strndup(path, strlen(path));
  if (!cur) return TSR_OOM();
  for (int hops = 0; hops <= MAX_LINK_HOPS; hops++) {
    struct stat st;
    if (lstat(cur, &st) != 0 || !S_ISLNK(st.st_mode)) {
      *out_target = cur;
      return NULL;
    }
    char *dir = NULL;
    if (planted(cur, &st, &dir)) {
      tsr_status_t s = TSR_STATUS(TSR_IO_ERROR,
                                  "%s: not following the symbolic link %s: it belongs to "
                                  "uid %u, in the sticky directory %s, which is neither "
                                  "yours nor theirs (another user may have planted it)",
                                  path, cur, (unsigned)st.st_uid, dir);
      tsr_free(dir);
      tsr_free(cur);
      return s;
    }
    size_t cap = (size_t)st.st_size + 2;
    char *link = tsr_malloc(cap);
    ssize_t len = link ? readlink(cur, link, cap) : -1;
    if (len < 0 || (size_t)len >= cap) { /* failed, or changed meanwhile */
      int err = len < 0 ? errno : EAGAIN;
      tsr_free(cur);
      if (!link) return TSR_OOM();
      tsr_free(link);
      return TSR_STATUS(TSR_IO_ERROR, "%s: cannot follow the link: %s", path, strerror(err));
    }
    link[len] = 0;
    tsr_strbuf_t next;
    tsr_strbuf_initialize(&next);
    if (link[0] != '/') {
      char *dir_of_link = dir_of(cur);
      tsr_strbuf_printf(&next, "%s/", dir_of_link ? dir_of_link : ".");
      if (!dir_of_link) next.failed = true;
      tsr_free(dir_of_link);
    }
    tsr_strbuf_puts(&next, link);
    tsr_free(link);
    tsr_free(cur);
    cur = next.failed ? NULL : tsr_strbuf_take(&next);
    tsr_strbuf_deinitialize(&next);
    if (!cur) return TSR_OOM();
  }
  tsr_free(cur);
  return TSR_STATUS(TSR_IO_ERROR, "%s: cannot follow the link: %s", path, strerror(ELOOP));
}

static const char *file_kind(mode_t mode) {
  return S_ISDIR(mode)    ? "a directory"
         : S_ISBLK(mode)  ? "a block device"
         : S_ISSOCK(mode) ? "a socket"
                          : "not a regular file";
}

/* Sets up one output: classifies `path` and creates the temporary file of a
 * regular (or new) target. */
static tsr_status_t outfile_open(tsr_outfile_t *f, const char *path) {
  memset(f, 0, sizeof *f);
  f->path = path;
  f->fd = -1;
  struct stat st;
  bool exists = stat(path, &st) == 0;
  if (!exists && errno != ENOENT)
    return TSR_STATUS(TSR_IO_ERROR, "%s: cannot write: %s", path, strerror(errno));
  TSR_RETURN_IF_ERROR(follow_links(path, &f->target));
  if (exists && (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode))) {
    /* The target's name may not be one (/dev/stdout ends in a link to
     * "pipe:[...]"): the stream is opened through `path`, and a FIFO found
     * under its target's name is checked as a link is. */
    struct stat fifo;
    char *dir = NULL;
    if (lstat(f->target, &fifo) == 0 && S_ISFIFO(fifo.st_mode) &&
        planted(f->target, &fifo, &dir)) {
      tsr_status_t s = TSR_STATUS(TSR_IO_ERROR,
                                  "%s: not writing to the FIFO %s: it belongs to uid %u, in "
                                  "the sticky directory %s, which is neither yours nor theirs "
                                  "(another user may have planted it)",
                                  path, f->target, (unsigned)fifo.st_uid, dir);
      tsr_free(dir);
      return s;
    }
    f->stream = true; /* opened when written */
    return NULL;
  }
  if (exists && !S_ISREG(st.st_mode))
    return TSR_STATUS(TSR_IO_ERROR,
                      "%s: is %s; tessera writes regular files, character "
                      "devices and FIFOs only",
                      path, file_kind(st.st_mode));
  f->created = !exists;
  f->dev = exists ? st.st_dev : 0;
  f->ino = exists ? st.st_ino : 0;
  tsr_strbuf_t tmp;
  tsr_strbuf_initialize(&tmp);
  tsr_strbuf_printf(&tmp, "%s.tmp-XXXXXX", f->target);
  if (tmp.failed) {
    tsr_strbuf_deinitialize(&tmp);
    return TSR_OOM();
  }
  f->tmp = tsr_strbuf_take(&tmp);
  f->fd = mkstemp(f->tmp);
  if (f->fd < 0) {
    int err = errno;
    tsr_free(f->tmp);
    f->tmp = NULL;
    char *dir = dir_of(f->target);
    tsr_status_t s = TSR_STATUS(TSR_IO_ERROR,
                                "%s: cannot create a temporary file in %s: %s",
                                path, dir ? dir : "its directory", strerror(err));
    tsr_free(dir);
    return s;
  }
  /* A replaced file keeps its mode (and, where allowed, its owner); a new
   * one gets what open(2) would give it. */
  mode_t mode = exists ? st.st_mode & 07777 : 0666 & ~(mode_t)tsr_process_umask();
  if (exists && (st.st_uid != geteuid() || st.st_gid != getegid()))
    (void)!fchown(f->fd, st.st_uid, st.st_gid);
  if (fchmod(f->fd, mode) != 0)
    return TSR_STATUS(TSR_IO_ERROR, "%s: cannot set the mode of %s: %s", path, f->tmp,
                      strerror(errno));
  return NULL;
}

tsr_status_t tsr_outfile_write(tsr_outfile_t *f, const void *data, size_t size) {
  if (f->fd < 0 && f->stream) {
    /* no_wait: O_NONBLOCK, so that a FIFO nobody reads is an error now
     * rather than a run that never ends; writes then block as usual. */
    int nonblock = f->no_wait ? O_NONBLOCK : 0;
    do {
      f->fd = open(f->path, O_WRONLY | O_NOCTTY | O_CLOEXEC | nonblock);
    } while (f->fd < 0 && errno == EINTR);
    if (f->fd < 0 && errno == ENXIO)
      return TSR_STATUS(TSR_IO_ERROR, "%s: cannot open for writing: no process reads the "
                        "FIFO (tessera does not wait for one)", f->path);
    if (f->fd < 0)
      return TSR_STATUS(TSR_IO_ERROR, "%s: cannot open for writing: %s", f->path,
                        strerror(errno));
    int flags = nonblock ? fcntl(f->fd, F_GETFL) : 0;
    if (nonblock && (flags < 0 || fcntl(f->fd, F_SETFL, flags & ~O_NONBLOCK) < 0))
      return TSR_STATUS(TSR_IO_ERROR, "%s: cannot make it blocking: %s", f->path,
                        strerror(errno));
  }
  if (!tsr_write_all(f->fd, data, size))
    return TSR_STATUS(TSR_IO_ERROR, "%s: cannot write: %s", f->path,
                      errno ? strerror(errno) : "short write");
  return NULL;
}

/* Syncs and closes a written output. */
static tsr_status_t outfile_finish(tsr_outfile_t *f) {
  if (f->fd < 0) return NULL; /* a stream that was given no bytes */
  const char *step = NULL;
  if (!f->stream && fsync(f->fd) != 0) step = "sync";
  int err = errno;
  if (close(f->fd) != 0 && !step) {
    err = errno;
    step = "close";
  }
  f->fd = -1;
  if (!step) return NULL;
  return TSR_STATUS(TSR_IO_ERROR, "%s: cannot %s %s: %s", f->path, step,
                    f->stream ? f->path : f->tmp, strerror(err));
}

/* Closes an output and frees it. With `undo` (the batch failed) it removes
 * what the batch made: its temporary file, and a target that was new. */
static void outfile_release(tsr_outfile_t *f, bool undo) {
  if (f->fd >= 0) close(f->fd);
  if (undo && f->tmp && !f->renamed) unlink(f->tmp);
  if (undo && f->renamed && f->created) unlink(f->target);
  tsr_free(f->tmp);
  tsr_free(f->target);
}

/* Makes a rename durable; a failure here loses nothing written. */
static void sync_dir_of(const char *path) {
  char *dir = dir_of(path);
  if (!dir) return;
  int dfd = open(dir, O_RDONLY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)fsync(dfd);
    close(dfd);
  }
  tsr_free(dir);
}

/* Two outputs of one batch that are the same file would overwrite each other. */
static tsr_status_t check_distinct(const tsr_outfile_t *files, size_t count) {
  for (size_t i = 0; i < count; i++)
    for (size_t j = 0; j < i; j++) {
      const tsr_outfile_t *a = &files[i], *b = &files[j];
      if (a->stream || b->stream) continue;
      bool same = (!a->created && !b->created && a->dev == b->dev && a->ino == b->ino) ||
                  strcmp(a->target, b->target) == 0;
      if (same)
        return TSR_STATUS(TSR_INVALID_ARGUMENT, "%s and %s are the same file: each output "
                          "needs a file of its own", b->path, a->path);
    }
  return NULL;
}

static tsr_status_t write_batch(const char *const *paths, size_t count, bool no_wait,
                                tsr_outfile_fill_fn fill, void *ctx) {
  tsr_outfile_t *files = tsr_calloc(count + 1, sizeof *files);
  if (!files) return TSR_OOM();
  for (size_t i = 0; i < count; i++) files[i].fd = -1;
  tsr_status_t s = NULL;
  size_t opened = 0;
  for (; opened < count && !s; opened++) {
    s = outfile_open(&files[opened], paths[opened]);
    files[opened].no_wait = no_wait;
  }
  if (!s) s = check_distinct(files, count);
  /* Files first, streams after them: a stream cannot be taken back, so it is
   * written only once every file is complete; renames come last. */
  for (int pass = 0; pass < 2 && !s; pass++)
    for (size_t i = 0; i < count && !s; i++) {
      if (files[i].stream != (pass == 1)) continue;
      s = fill(ctx, i, &files[i]);
      if (!s) s = outfile_finish(&files[i]);
    }
  size_t replaced = 0; /* existing files renamed over: a later failure cannot undo them */
  for (size_t i = 0; i < count && !s; i++) {
    tsr_outfile_t *f = &files[i];
    if (f->stream) continue;
    if (rename(f->tmp, f->target) != 0) {
      int err = errno;
      s = TSR_STATUS(TSR_IO_ERROR, "%s: cannot rename %s into place: %s%s", f->path, f->tmp,
                     strerror(err), replaced ? " (the outputs before it were replaced)" : "");
      break;
    }
    f->renamed = true;
    replaced += !f->created;
  }
  for (size_t i = 0; i < count && !s; i++)
    if (!files[i].stream) sync_dir_of(files[i].target);
  for (size_t i = 0; i < opened; i++) outfile_release(&files[i], s != NULL);
  tsr_free(files);
  return s;
}

tsr_status_t tsr_outfiles_write(const char *const *paths, size_t count,
                                tsr_outfile_fill_fn fill, void *ctx) {
  return write_batch(paths, count, false, fill, ctx);
}

static tsr_status_t fill_bytes(void *ctx, size_t index, tsr_outfile_t *f) {
  (void)index;
  const tsr_string_view_t *text = ctx;
  return tsr_outfile_write(f, text->data, text->size);
}

tsr_status_t tsr_file_write(const char *path, const void *data, size_t size) {
  if (!path || (size && !data))
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "tsr_file_write: NULL argument");
  tsr_string_view_t text = {data, size};
  return write_batch(&path, 1, false, fill_bytes, &text);
}

tsr_status_t tsr_file_write_no_wait(const char *path, const void *data, size_t size) {
  if (!path || (size && !data))
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "tsr_file_write_no_wait: NULL argument");
  tsr_string_view_t text = {data, size};
  return write_batch(&path, 1, true, fill_bytes, &text);
}
