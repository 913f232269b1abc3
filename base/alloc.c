/* Checked allocation through the current allocator, the arena and the string
 * buffer: the only places in tessera that call malloc directly, so failure
 * can be injected in tests and a context can bring its own allocator. */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/base_internal.h"

static long fail_countdown = -1;

void tsr_alloc_fail_after(long n) { fail_countdown = n; }

static bool should_fail(void) {
  if (fail_countdown < 0) return false;
  if (fail_countdown == 0) {
    fail_countdown = -1;
    return true;
  }
  fail_countdown--;
  return false;
}

bool tsr_mul_size(size_t a, size_t b, size_t *out) {
  return !__builtin_mul_overflow(a, b, out);
}
bool tsr_add_size(size_t a, size_t b, size_t *out) {
  return !__builtin_add_overflow(a, b, out);
}
bool tsr_mul_i64(int64_t a, int64_t b, int64_t *out) {
  return !__builtin_mul_overflow(a, b, out);
}

/* ---- Allocation through an allocator ----
 * Every block starts with a header saying how to release it, so a block is
 * freed correctly whichever allocator is current when it dies (a context's
 * objects may be freed after the call that made them, from another thread).
 * The allocator of a thread is the process's (malloc) unless a call bound
 * another one (tsr_allocator_bind): the binding API binds its context's. */

typedef struct header {
  tsr_allocator_release_fn release; /* NULL: the process allocator (free) */
  void *user;
  size_t size;   /* bytes asked for, without the header */
  size_t offset; /* from the start of the underlying block to the data */
} header_t;

enum { HEADER_BYTES = 32 };
_Static_assert(sizeof(header_t) <= HEADER_BYTES, "allocation header");

static _Thread_local const tsr_allocator_t *current;

const tsr_allocator_t *tsr_allocator_bind(const tsr_allocator_t *allocator) {
  const tsr_allocator_t *previous = current;
  current = allocator && allocator->allocate ? allocator : NULL;
  return previous;
}

void tsr_process_once(pthread_once_t *once, void (*init)(void)) {
  const tsr_allocator_t *previous = tsr_allocator_bind(NULL);
  pthread_once(once, init);
  tsr_allocator_bind(previous);
}

static header_t *header_of(void *ptr) { return (header_t *)((char *)ptr - HEADER_BYTES); }

/* `size` bytes aligned to `alignment` (a power of two >= 16) from the
 * current allocator, with the header before them. */
static void *allocate(size_t size, size_t alignment) {
  if (should_fail()) return NULL;
  size_t offset = alignment > HEADER_BYTES ? alignment : HEADER_BYTES, total;
  if (!tsr_add_size(size, offset, &total)) return NULL;
  const tsr_allocator_t *a = current;
  void *block;
  if (a) {
    block = a->allocate(a->user, total, alignment);
    if (block && ((uintptr_t)block & (alignment - 1))) { /* a broken allocator */
      if (a->release) a->release(a->user, block, total);
      block = NULL;
    }
  } else if (alignment <= 16) {
    block = malloc(total);
  } else if (posix_memalign(&block, alignment, total) != 0) {
    block = NULL;
  }
  if (!block) return NULL;
  char *data = (char *)block + offset;
  *header_of(data) = (header_t){a ? a->release : NULL, a ? a->user : NULL, size, offset};
  return data;
}

void *tsr_malloc(size_t size) { return allocate(size, 16); }

void *tsr_calloc(size_t count, size_t size) {
  size_t total;
  if (!tsr_mul_size(count, size, &total)) return NULL;
  void *p = allocate(total, 16);
  if (p) memset(p, 0, total);
  return p;
}

void *tsr_aligned_alloc(size_t alignment, size_t size) {
  if (alignment < 16 || (alignment & (alignment - 1))) return NULL;
  return allocate(size, alignment);
}

void tsr_free(void *ptr) {
  if (!ptr) return;
  header_t *h = header_of(ptr);
  void *block = (char *)ptr - h->offset;
  if (!h->release) {
    free(block);
  } else {
    h->release(h->user, block, h->size + h->offset);
  }
}

void *tsr_realloc(void *ptr, size_t size) {
  if (!ptr) return tsr_malloc(size);
  header_t *h = header_of(ptr);
  if (!h->release && !current && h->offset == HEADER_BYTES) {
    /* Both the process allocator: let it grow in place. */
    size_t total;
    if (should_fail() || !tsr_add_size(size, HEADER_BYTES, &total)) return NULL;
    char *block = realloc((char *)ptr - HEADER_BYTES, total);
    if (!block) return NULL;
    header_of(block + HEADER_BYTES)->size = size;
    return block + HEADER_BYTES;
  }
  void *p = tsr_malloc(size);
  if (!p) return NULL;
  memcpy(p, ptr, h->size < size ? h->size : size);
  tsr_free(ptr);
  return p;
}

char *tsr_strndup(const char *s, size_t n) {
  char *p = tsr_malloc(n + 1);
  if (!p) return NULL;
  memcpy(p, s, n);
  p[n] = 0;
  return p;
}

/* ---- Arena ---- */

struct tsr_arena_chunk {
  tsr_arena_chunk_t *next;
  size_t capacity;
  _Alignas(16) unsigned char data[];
};

enum { ARENA_CHUNK_BYTES = 64 * 1024 };

void tsr_arena_initialize(tsr_arena_t *arena) { memset(arena, 0, sizeof *arena); }

void tsr_arena_deinitialize(tsr_arena_t *arena) {
  tsr_arena_chunk_t *c = arena->head;
  while (c) {
    tsr_arena_chunk_t *next = c->next;
    tsr_free(c);
    c = next;
  }
  memset(arena, 0, sizeof *arena);
}

void *tsr_arena_alloc(tsr_arena_t *arena, size_t size) {
  size_t rounded;
  if (!tsr_add_size(size, 15, &rounded)) return NULL;
  rounded &= ~(size_t)15;
  if (!arena->head || arena->capacity - arena->used < rounded) {
    size_t cap = rounded > ARENA_CHUNK_BYTES ? rounded : ARENA_CHUNK_BYTES;
    size_t bytes;
    if (!tsr_add_size(sizeof(tsr_arena_chunk_t), cap, &bytes)) return NULL;
    tsr_arena_chunk_t *c = tsr_malloc(bytes);
    if (!c) return NULL;
    c->capacity = cap;
    c->next = arena->head;
    arena->head = c;
    arena->used = 0;
    arena->capacity = cap;
    arena->total += bytes;
  }
  void *p = arena->head->data + arena->used;
  arena->used += rounded;
  memset(p, 0, rounded);
  return p;
}

void *tsr_arena_alloc_array(tsr_arena_t *arena, size_t count, size_t size) {
  size_t total;
  if (!tsr_mul_size(count, size, &total)) return NULL;
  return tsr_arena_alloc(arena, total);
}

char *tsr_arena_strndup(tsr_arena_t *arena, const char *s, size_t n) {
  char *p = tsr_arena_alloc(arena, n + 1);
  if (!p) return NULL;
  memcpy(p, s, n);
  p[n] = 0;
  return p;
}

/* ---- String buffer ---- */

void tsr_strbuf_initialize(tsr_strbuf_t *sb) { memset(sb, 0, sizeof *sb); }

void tsr_strbuf_deinitialize(tsr_strbuf_t *sb) {
  tsr_free(sb->data);
  memset(sb, 0, sizeof *sb);
}

static bool strbuf_reserve(tsr_strbuf_t *sb, size_t extra) {
  if (sb->failed) return false;
  size_t need;
  /* extra + 1 itself may wrap (a request of SIZE_MAX bytes) */
  if (!tsr_add_size(extra, 1, &need) || !tsr_add_size(sb->size, need, &need)) {
    sb->failed = true;
    return false;
  }
  if (need <= sb->capacity) return true;
  size_t cap = sb->capacity ? sb->capacity : 64;
  while (cap < need) {
    if (!tsr_mul_size(cap, 2, &cap)) {
      sb->failed = true;
      return false;
    }
  }
  char *p = tsr_realloc(sb->data, cap);
  if (!p) {
    sb->failed = true;
    return false;
  }
  sb->data = p;
  sb->capacity = cap;
  return true;
}

bool tsr_strbuf_reserve(tsr_strbuf_t *sb, size_t extra) { return strbuf_reserve(sb, extra); }

void tsr_strbuf_append(tsr_strbuf_t *sb, const char *s, size_t n) {
  if (!strbuf_reserve(sb, n) || n == 0) return; /* s may be NULL when n == 0 */
  memcpy(sb->data + sb->size, s, n);
  sb->size += n;
  sb->data[sb->size] = 0;
}

void tsr_strbuf_puts(tsr_strbuf_t *sb, const char *s) {
  tsr_strbuf_append(sb, s, strlen(s));
}

void tsr_strbuf_vprintf(tsr_strbuf_t *sb, const char *fmt, va_list ap) {
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap2);
  va_end(ap2);
  if (n < 0 || !strbuf_reserve(sb, (size_t)n)) return;
  vsnprintf(sb->data + sb->size, (size_t)n + 1, fmt, ap);
  sb->size += (size_t)n;
}

void tsr_strbuf_printf(tsr_strbuf_t *sb, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  tsr_strbuf_vprintf(sb, fmt, ap);
  va_end(ap);
}

char *tsr_strbuf_take(tsr_strbuf_t *sb) {
  char *p = sb->data;
  if (!p) p = tsr_strndup("", 0);
  memset(sb, 0, sizeof *sb);
  return p;
}

void tsr_format_bytes(char *buf, size_t size, uint64_t bytes) {
  if (bytes < 1024) snprintf(buf, size, "%" PRIu64 " B", bytes);
  else if (bytes < (uint64_t)1 << 20) snprintf(buf, size, "%.1f KiB", (double)bytes / 1024.0);
  else if (bytes < (uint64_t)1 << 30) snprintf(buf, size, "%.1f MiB", (double)bytes / 1048576.0);
  else snprintf(buf, size, "%.2f GiB", (double)bytes / 1073741824.0);
}
