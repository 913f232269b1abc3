/* Checked allocation, the arena and the string buffer: the only places in
 * tessera that call malloc directly, so failure can be injected in tests. */
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

void *tsr_malloc(size_t size) {
  if (should_fail()) return NULL;
  return malloc(size ? size : 1);
}

void *tsr_calloc(size_t count, size_t size) {
  size_t total;
  if (!tsr_mul_size(count, size, &total) || should_fail()) return NULL;
  return calloc(total ? total : 1, 1);
}

void *tsr_realloc(void *ptr, size_t size) {
  if (should_fail()) return NULL;
  return realloc(ptr, size ? size : 1);
}

void *tsr_aligned_alloc(size_t alignment, size_t size) {
  if (should_fail()) return NULL;
  void *p = NULL;
  if (posix_memalign(&p, alignment, size ? size : 1) != 0) return NULL;
  return p;
}

void tsr_free(void *ptr) { free(ptr); }

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
  if (!tsr_add_size(sb->size, extra + 1, &need)) {
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
