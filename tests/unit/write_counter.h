/* A FILE that counts the write calls its stream makes (glibc fopencookie,
 * unbuffered): each call's bytes must be whole lines. For the tests of
 * `print`, which must write each printed line with one call. Define
 * _GNU_SOURCE before including any header, then include this first. */
#ifndef TESSERA_TESTS_WRITE_COUNTER_H
#define TESSERA_TESTS_WRITE_COUNTER_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

typedef struct write_counter {
  FILE *stream;
  char *text;         /* everything written, NUL-terminated */
  size_t size;
  unsigned writes;    /* write calls */
  unsigned partial;   /* calls whose bytes do not end with a newline */
} write_counter_t;

static inline ssize_t write_counter_write(void *cookie, const char *buf, size_t n) {
  write_counter_t *wc = cookie;
  char *text = realloc(wc->text, wc->size + n + 1);
  if (!text) return -1;
  memcpy(text + wc->size, buf, n);
  wc->size += n;
  text[wc->size] = '\0';
  wc->text = text;
  wc->writes++;
  if (!n || buf[n - 1] != '\n') wc->partial++;
  return (ssize_t)n;
}

/* Opens wc->stream (NULL on failure). Close it with write_counter_close. */
static inline FILE *write_counter_open(write_counter_t *wc) {
  memset(wc, 0, sizeof *wc);
  cookie_io_functions_t io = {.write = write_counter_write};
  wc->stream = fopencookie(wc, "w", io);
  if (wc->stream) setvbuf(wc->stream, NULL, _IONBF, 0);
  return wc->stream;
}

static inline void write_counter_close(write_counter_t *wc) {
  if (wc->stream) fclose(wc->stream);
  wc->stream = NULL;
}

static inline void write_counter_free(write_counter_t *wc) {
  write_counter_close(wc);
  free(wc->text);
  wc->text = NULL;
}

#endif /* TESSERA_TESTS_WRITE_COUNTER_H */
