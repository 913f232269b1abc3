/* Guard bytes around the arrays of a compiled run (docs/lowering.md, "Guard
 * bytes"): with TESSERA_GUARD set, compiled code runs on copies of its
 * operands, each between two runs of patterned bytes, which are checked
 * after the run; outputs are copied back. Compiled code is not instrumented
 * by AddressSanitizer, so this is what sees it write past an array. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "runtime/runtime_internal.h"

/* Bytes before each copy (a multiple of 64: the copy keeps the 64-byte
 * alignment callers give) and right after its last byte (no padding
 * between: an overrun of one byte lands in them). Four 64-byte vectors
 * each: wider than any access the emitter makes. */
#define GUARD_BEFORE 256
#define GUARD_AFTER 256

struct tsr_guard_set {
  uint32_t num;             /* operands */
  uint32_t *copy_of;        /* per operand: its copy (operands sharing data share one) */
  struct guard_copy {
    const tsr_array_t *original;
    uint8_t *block;         /* GUARD_BEFORE + bytes + GUARD_AFTER */
    size_t bytes;
    bool written;           /* an output's: copied back */
  } *copies;
  uint32_t num_copies;
};

bool tsr_guard_enabled(void) {
  const char *v = getenv("TESSERA_GUARD");
  return v && *v && strcmp(v, "0") != 0;
}

/* The guard pattern's byte at `i` (position in its guard): varied so that
 * neither zeros, ones nor a repeated element matches it by chance. */
static uint8_t pattern(size_t i) { return (uint8_t)(0xA5u ^ (i * 0x9Du) ^ (i >> 8)); }

static void fill_guards(struct guard_copy *c) {
  for (size_t i = 0; i < GUARD_BEFORE; i++) c->block[i] = pattern(i);
  uint8_t *after = c->block + GUARD_BEFORE + c->bytes;
  for (size_t i = 0; i < GUARD_AFTER; i++) after[i] = pattern(GUARD_BEFORE + i);
}

void tsr_guard_set_destroy(tsr_guard_set_t *set) {
  if (!set) return;
  for (uint32_t i = 0; i < set->num_copies; i++) tsr_free(set->copies[i].block);
  tsr_free(set->copies);
  tsr_free(set->copy_of);
  tsr_free(set);
}

tsr_status_t tsr_guard_set_create(tsr_array_t *const *operands, uint32_t num,
                                  const bool *is_output, tsr_array_t *out_arrays,
                                  tsr_guard_set_t **out_set) {
  tsr_guard_set_t *set = tsr_calloc(1, sizeof *set);
  if (!set) return TSR_OOM();
  set->num = num;
  set->copy_of = tsr_calloc(num ? num : 1, sizeof *set->copy_of);
  set->copies = tsr_calloc(num ? num : 1, sizeof *set->copies);
  if (!set->copy_of || !set->copies) {
    tsr_guard_set_destroy(set);
    return TSR_OOM();
  }
  for (uint32_t i = 0; i < num; i++) {
    const tsr_array_t *a = operands[i];
    uint32_t k = 0;
    while (k < set->num_copies && set->copies[k].original->data != a->data) k++;
    if (k == set->num_copies) {
      struct guard_copy *c = &set->copies[set->num_copies];
      c->original = a;
      c->bytes = tsr_array_byte_size(a);
      c->block = tsr_aligned_alloc(64, GUARD_BEFORE + c->bytes + GUARD_AFTER);
      if (!c->block) {
        tsr_guard_set_destroy(set);
        return TSR_OOM();
      }
      set->num_copies++;
      fill_guards(c);
      memcpy(c->block + GUARD_BEFORE, a->data, c->bytes);
    }
    set->copy_of[i] = k;
    if (is_output[i]) set->copies[k].written = true;
    out_arrays[i] = *a;
    out_arrays[i].data = set->copies[k].block + GUARD_BEFORE;
  }
  *out_set = set;
  return NULL;
}

/* Appends to `sb` what changed in the `n` guard bytes at `g` (the first
 * one's pattern index `p0`), with `sep` before it; returns false if nothing
 * did. */
static bool describe(tsr_strbuf_t *sb, const char *sep, const uint8_t *g, size_t n, size_t p0,
                     bool before, size_t bytes) {
  size_t first = SIZE_MAX, last = 0, count = 0;
  for (size_t i = 0; i < n; i++) {
    if (g[i] == pattern(p0 + i)) continue;
    if (first == SIZE_MAX) first = i;
    last = i;
    count++;
  }
  if (!count) return false;
  const char *s = count == 1 ? "" : "s";
  if (before)
    tsr_strbuf_printf(sb, "%s%zu byte%s before its start overwritten (offsets -%zu..-%zu)", sep,
                      count, s, n - first, n - last);
  else
    tsr_strbuf_printf(sb, "%s%zu byte%s past its end overwritten (offsets %zu..%zu of an array of %zu bytes)",
                      sep, count, s, bytes + first, bytes + last, bytes);
  return true;
}

tsr_status_t tsr_guard_set_finish(tsr_guard_set_t *set, const char *kernel,
                                  const char *const *names) {
  tsr_strbuf_t sb, one;
  tsr_strbuf_initialize(&sb);
  uint32_t bad = 0;
  for (uint32_t k = 0; k < set->num_copies; k++) {
    struct guard_copy *c = &set->copies[k];
    const uint8_t *data = c->block + GUARD_BEFORE;
    tsr_strbuf_initialize(&one);
    bool hit = describe(&one, "", c->block, GUARD_BEFORE, 0, true, c->bytes);
    hit |= describe(&one, hit ? ", " : "", data + c->bytes, GUARD_AFTER, GUARD_BEFORE, false,
                    c->bytes);
    if (!c->written && memcmp(data, c->original->data, c->bytes) != 0) {
      tsr_strbuf_printf(&one, "%sits data changed (it is no output)", hit ? ", " : "");
      hit = true;
    }
    if (hit) {
      const char *name = "?";
      for (uint32_t i = 0; i < set->num; i++)
        if (set->copy_of[i] == k) {
          name = names[i];
          break;
        }
      char type[160];
      tsr_guard_format_type(type, sizeof type, c->original);
      tsr_strbuf_printf(&sb, "%soperand %%%s (%s): %s", bad++ ? "; " : "", name, type,
                        one.data ? one.data : "");
    }
    tsr_strbuf_deinitialize(&one);
    if (c->written) memcpy(c->original->data, data, c->bytes);
  }
  tsr_status_t status = NULL;
  if (bad)
    status = TSR_STATUS(TSR_INTERNAL,
                        "compiled kernel @%s wrote outside its arrays (TESSERA_GUARD): %s. "
                        "This is a bug of tessera's cpu backend",
                        kernel, sb.data && !sb.failed ? sb.data : "(out of memory)");
  tsr_strbuf_deinitialize(&sb);
  tsr_guard_set_destroy(set);
  return status;
}

void tsr_guard_format_type(char *buf, size_t size, const tsr_array_t *a) {
  int n = snprintf(buf, size, "%s[", tsr_dtype_name(a->dtype));
  for (uint32_t i = 0; i < a->rank && n > 0 && (size_t)n < size; i++)
    n += snprintf(buf + n, size - (size_t)n, "%s%" PRId64, i ? ", " : "", a->dims[i]);
  if (n > 0 && (size_t)n < size) snprintf(buf + n, size - (size_t)n, "]");
}
