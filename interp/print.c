/* The text of `print` (contract: interp/interp_runtime.h): a format with
 * "{}" holes and the values that fill them, one write per line. Shared by the
 * interpreter and the CPU backend's runtime. */
#include <inttypes.h>
#include <stdio.h>

#include "interp/interp_internal.h"

static void print_element(tsr_strbuf_t *sb, tsr_dtype_t dt, const void *p) {
  switch (dt) {
    case TSR_DTYPE_F32: { float x; memcpy(&x, p, 4); tsr_strbuf_printf(sb, "%g", (double)x); break; }
    case TSR_DTYPE_BF16: { uint16_t h; memcpy(&h, p, 2); tsr_strbuf_printf(sb, "%g", (double)tsr_bf16_to_f32(h)); break; }
    case TSR_DTYPE_F16: { uint16_t h; memcpy(&h, p, 2); tsr_strbuf_printf(sb, "%g", (double)tsr_f16_to_f32(h)); break; }
    case TSR_DTYPE_I32: { int32_t x; memcpy(&x, p, 4); tsr_strbuf_printf(sb, "%" PRId32, x); break; }
    case TSR_DTYPE_U32: { uint32_t x; memcpy(&x, p, 4); tsr_strbuf_printf(sb, "%" PRIu32, x); break; }
    case TSR_DTYPE_I16: { int16_t x; memcpy(&x, p, 2); tsr_strbuf_printf(sb, "%d", x); break; }
    case TSR_DTYPE_U16: { uint16_t x; memcpy(&x, p, 2); tsr_strbuf_printf(sb, "%u", x); break; }
    case TSR_DTYPE_I8: { int8_t x; memcpy(&x, p, 1); tsr_strbuf_printf(sb, "%d", x); break; }
    case TSR_DTYPE_U8: { uint8_t x; memcpy(&x, p, 1); tsr_strbuf_printf(sb, "%u", x); break; }
    case TSR_DTYPE_I1: tsr_strbuf_puts(sb, *(const uint8_t *)p ? "true" : "false"); break;
    case TSR_DTYPE_I4: case TSR_DTYPE_I2: { /* the low bits of the byte, as ml_dtypes */
      int w = (int)tsr_dtype_bits(dt), x = *(const uint8_t *)p & ((1 << w) - 1);
      tsr_strbuf_printf(sb, "%d", x >= 1 << (w - 1) ? x - (1 << w) : x);
      break;
    }
    case TSR_DTYPE_U4: case TSR_DTYPE_U2: { uint8_t x; memcpy(&x, p, 1); tsr_strbuf_printf(sb, "%u", x); break; }
    case TSR_DTYPE_F8E4M3FN: tsr_strbuf_printf(sb, "%g", (double)tsr_f8e4m3fn_to_f32(*(const uint8_t *)p)); break;
    case TSR_DTYPE_F8E5M2: tsr_strbuf_printf(sb, "%g", (double)tsr_f8e5m2_to_f32(*(const uint8_t *)p)); break;
    default: tsr_strbuf_puts(sb, "?"); break;
  }
}

/* A block prints flat, its elements separated by spaces as numpy prints a
 * 1-D array (so `jax.debug.print("{}", x)` reads the same from tessera and
 * from JAX), the first 64 elements then "...". */
static void print_value(tsr_strbuf_t *sb, const tsr_print_value_t *v) {
  size_t es = tsr_dtype_size(v->dtype);
  if (v->vector) tsr_strbuf_puts(sb, "[");
  for (uint64_t i = 0; i < v->n && i < 64; i++) {
    if (i) tsr_strbuf_puts(sb, " ");
    print_element(sb, v->dtype, (const uint8_t *)v->data + i * es);
  }
  if (v->vector) tsr_strbuf_puts(sb, v->n > 64 ? " ...]" : "]");
}

void tsr_interp_print(FILE *f, const char *text, uint32_t count,
                      tsr_print_value_t (*value)(void *ctx, uint32_t i), void *ctx) {
  tsr_strbuf_t line;
  tsr_strbuf_initialize(&line);
  uint32_t next = 0;
  const char *s = text, *literal = text;
  for (; *s; s++) {
    if (s[0] != '{' || s[1] != '}' || next >= count) continue;
    tsr_strbuf_append(&line, literal, (size_t)(s - literal));
    tsr_print_value_t v = value(ctx, next++);
    print_value(&line, &v);
    literal = ++s + 1;
  }
  tsr_strbuf_append(&line, literal, (size_t)(s - literal));
  tsr_strbuf_puts(&line, "\n");
  if (!line.failed) fwrite(line.data, 1, line.size, f);
  tsr_strbuf_deinitialize(&line);
}
