/* How the tessera CLI shows arrays: numpy-style display of a run's outputs
 * with statistics, and the type, shape and byte-size texts of its messages
 * (tools/cli.h). */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "tools/cli.h"

static float half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  float mag;
  if (exp == 0x1f) mag = man ? NAN : INFINITY;
  else if (exp == 0) mag = ldexpf((float)man, -24);
  else mag = ldexpf((float)(man | 0x400u), (int)exp - 25);
  return sign ? -mag : mag;
}

/* float8_e4m3fn (no infinity, S1111111 NaN) or float8_e5m2 (IEEE-like). */
static float f8_to_float(uint8_t h, unsigned mbits, int bias, bool ieee) {
  unsigned sign = h >> 7, exp = (h & 0x7fu) >> mbits, man = h & ((1u << mbits) - 1);
  float mag;
  if (ieee && exp == (0x7fu >> mbits)) mag = man ? NAN : INFINITY;
  else if (!ieee && (h & 0x7fu) == 0x7fu) mag = NAN;
  else if (exp == 0) mag = ldexpf((float)man, 1 - bias - (int)mbits);
  else mag = ldexpf((float)(man | (1u << mbits)), (int)exp - bias - (int)mbits);
  return sign ? -mag : mag;
}

static double element(const tsr_array_t *a, int64_t i) {
  switch (a->dtype) {
  case TSR_DTYPE_F32: return ((const float *)a->data)[i];
  case TSR_DTYPE_BF16: {
    uint32_t bits = (uint32_t)((const uint16_t *)a->data)[i] << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
  }
  case TSR_DTYPE_F16: return half_to_float(((const uint16_t *)a->data)[i]);
  case TSR_DTYPE_I32: return ((const int32_t *)a->data)[i];
  case TSR_DTYPE_U32: return ((const uint32_t *)a->data)[i];
  case TSR_DTYPE_I16: return ((const int16_t *)a->data)[i];
  case TSR_DTYPE_U16: return ((const uint16_t *)a->data)[i];
  case TSR_DTYPE_I8: return ((const int8_t *)a->data)[i];
  case TSR_DTYPE_U8: return ((const uint8_t *)a->data)[i];
  case TSR_DTYPE_I1: return ((const uint8_t *)a->data)[i] != 0;
  case TSR_DTYPE_I4: case TSR_DTYPE_I2: { /* the low bits of the byte, as ml_dtypes */
    int w = (int)tsr_dtype_bits(a->dtype), x = ((const uint8_t *)a->data)[i] & ((1 << w) - 1);
    return x >= 1 << (w - 1) ? x - (1 << w) : x;
  }
  case TSR_DTYPE_U4: case TSR_DTYPE_U2: return ((const uint8_t *)a->data)[i];
  case TSR_DTYPE_F8E4M3FN: return f8_to_float(((const uint8_t *)a->data)[i], 3, 7, false);
  case TSR_DTYPE_F8E5M2: return f8_to_float(((const uint8_t *)a->data)[i], 2, 15, true);
  default: return 0;
  }
}

/* "f32[4, 8]" (or "f32" for rank 0). */
void cli_format_type(char *buf, size_t size, tsr_dtype_t dtype,
                     uint32_t rank, const int64_t *dims) {
  int n = snprintf(buf, size, "%s", tsr_dtype_name(dtype));
  for (uint32_t i = 0; i < rank && n > 0 && (size_t)n < size; i++)
    n += snprintf(buf + n, size - (size_t)n, "%s%" PRId64 "%s", i ? ", " : "[",
                  dims[i], i + 1 == rank ? "]" : "");
}

/* "(4, 8)" as numpy writes shapes. */
void cli_format_shape(char *buf, size_t size, uint32_t rank,
                      const int64_t *dims) {
  int n = snprintf(buf, size, "(");
  for (uint32_t i = 0; i < rank && (size_t)n < size; i++)
    n += snprintf(buf + n, size - (size_t)n, "%s%" PRId64, i ? ", " : "",
                  dims[i]);
  if ((size_t)n < size)
    snprintf(buf + n, size - (size_t)n, "%s)", rank == 1 ? "," : "");
}

/* numpy-style display of an array, summarised like numpy (edge items with
 * "...") when it has more than SUMMARY_THRESHOLD elements; leading dimensions
 * beyond the last two then show only their first entry. */
enum { SUMMARY_THRESHOLD = 64, EDGE_ITEMS = 3 };

typedef struct printer {
  const tsr_array_t *array;
  FILE *out;
  bool summarize;
  bool is_float, is_bool;
  int64_t strides[TSR_MAX_RANK];
  /* measured over the shown elements */
  double max_abs, min_abs_nonzero;
  bool any_finite;
  bool scientific;
  int int_width, frac_width, width; /* fixed: parts around '.'; total */
  int indent;                       /* columns before the first '[' */
} printer_t;

typedef enum { PASS_RANGE, PASS_WIDTH, PASS_PRINT } print_pass_t;

/* Formats a float as the printer shows it; *out_int_len receives the length
 * of the part before the '.' (the whole length outside fixed mode). */
static int format_float(const printer_t *p, double v, char *buf, size_t size,
                        int *out_int_len) {
  int n;
  if (isnan(v)) n = snprintf(buf, size, "nan");
  else if (isinf(v)) n = snprintf(buf, size, v < 0 ? "-inf" : "inf");
  else if (p->scientific) n = snprintf(buf, size, "%.4e", v);
  else {
    n = snprintf(buf, size, "%.4f", v);
    while (n > 0 && buf[n - 1] == '0') buf[--n] = 0; /* "1.5000" -> "1.5" */
  }
  const char *dot = strchr(buf, '.');
  *out_int_len = (!isfinite(v) || p->scientific || !dot) ? n : (int)(dot - buf);
  return n;
}

static void visit_element(printer_t *p, print_pass_t pass, int64_t offset) {
  double v = element(p->array, offset);
  char buf[64];
  if (!p->is_float) {
    if (p->is_bool) snprintf(buf, sizeof buf, "%s", v != 0 ? "True" : "False");
    else snprintf(buf, sizeof buf, "%.0f", v);
    int n = (int)strlen(buf);
    if (pass == PASS_WIDTH && n > p->width) p->width = n;
    if (pass == PASS_PRINT) fprintf(p->out, "%*s", p->width, buf);
    return;
  }
  if (pass == PASS_RANGE) {
    if (isfinite(v)) {
      double a = fabs(v);
      p->any_finite = true;
      if (a > p->max_abs) p->max_abs = a;
      if (a != 0 && (p->min_abs_nonzero == 0 || a < p->min_abs_nonzero))
        p->min_abs_nonzero = a;
    }
    return;
  }
  int int_len;
  int n = format_float(p, v, buf, sizeof buf, &int_len);
  if (pass == PASS_WIDTH) {
    if (!isfinite(v) || p->scientific) {
      if (n > p->width) p->width = n;
    } else {
      if (int_len > p->int_width) p->int_width = int_len;
      if (n - int_len > p->frac_width) p->frac_width = n - int_len;
    }
    return;
  }
  int total = p->int_width + p->frac_width;
  if (p->width > total) total = p->width;
  if (!isfinite(v) || p->scientific) {
    fprintf(p->out, "%*s", total, buf);
  } else { /* align on the '.', pad the fraction on the right, as numpy */
    int lead = total - p->frac_width - int_len;
    fprintf(p->out, "%*s%s%*s", lead, "", buf, p->frac_width - (n - int_len), "");
  }
}

/* Between two entries of dimension `dim`: a space in the last dimension,
 * else one newline per remaining dimension and an indent, as numpy does. */
static void separator(printer_t *p, uint32_t dim) {
  if (dim + 1 == p->array->rank) {
    fputc(' ', p->out);
    return;
  }
  for (uint32_t l = dim + 1; l < p->array->rank; l++) fputc('\n', p->out);
  fprintf(p->out, "%*s", p->indent + (int)dim + 1, "");
}

static void visit(printer_t *p, print_pass_t pass, uint32_t dim, int64_t offset) {
  const tsr_array_t *a = p->array;
  if (dim == a->rank) {
    visit_element(p, pass, offset);
    return;
  }
  int64_t n = a->dims[dim];
  bool leading = a->rank - dim > 2;
  int64_t head = n, tail = 0;
  if (p->summarize) {
    if (leading && n > 1) {
      head = 1;
    } else if (!leading && n > 2 * EDGE_ITEMS) {
      head = EDGE_ITEMS;
      tail = EDGE_ITEMS;
    }
  }
  bool ellipsis = head + tail < n;
  if (pass == PASS_PRINT) fputc('[', p->out);
  for (int64_t k = 0; k < n; k++) {
    if (pass == PASS_PRINT && k > 0) separator(p, dim);
    if (ellipsis && k == head) {
      if (pass == PASS_PRINT) fputs("...", p->out);
      if (tail == 0) break;
      k = n - tail - 1; /* the loop continues at the first tail entry */
      continue;
    }
    visit(p, pass, dim + 1, offset + k * p->strides[dim]);
  }
  if (pass == PASS_PRINT) fputc(']', p->out);
}

void cli_print_array(FILE *out, const char *name, const tsr_array_t *a) {
  char type[128];
  cli_format_type(type, sizeof type, a->dtype, a->rank, a->dims);
  fprintf(out, "%%%s: %s\n", name, type);
  int64_t count = tsr_array_element_count(a);
  printer_t p;
  memset(&p, 0, sizeof p);
  p.array = a;
  p.out = out;
  p.summarize = count > SUMMARY_THRESHOLD;
  p.is_float = tsr_dtype_class(a->dtype) == TSR_CLASS_FLOAT;
  p.is_bool = a->dtype == TSR_DTYPE_I1;
  int64_t stride = 1;
  for (uint32_t d = a->rank; d-- > 0;) {
    p.strides[d] = stride;
    stride *= a->dims[d];
  }
  if (count == 0) {
    fputs("  (no elements)\n", out);
    return;
  }
  visit(&p, PASS_RANGE, 0, 0);
  p.scientific = p.any_finite &&
                 (p.max_abs >= 1e8 ||
                  (p.min_abs_nonzero != 0 && p.min_abs_nonzero < 1e-4));
  visit(&p, PASS_WIDTH, 0, 0);
  p.indent = 2;
  fputs("  ", out);
  visit(&p, PASS_PRINT, 0, 0);
  fputc('\n', out);
  /* Statistics over every element. */
  double lo = INFINITY, hi = -INFINITY, sum = 0;
  int64_t finite = 0, nans = 0, infs = 0;
  for (int64_t i = 0; i < count; i++) {
    double v = element(a, i);
    if (isnan(v)) {
      nans++;
      continue;
    }
    if (isinf(v)) {
      infs++;
      continue;
    }
    finite++;
    sum += v;
    if (v < lo) lo = v;
    if (v > hi) hi = v;
  }
  if (!p.is_float) {
    fprintf(out, "  min %.10g, max %.10g, mean %.6g\n", lo, hi,
            sum / (double)finite);
  } else if (finite) {
    fprintf(out, "  finite values: min %.6g, max %.6g, mean %.6g; %" PRId64
            " NaN", lo, hi, sum / (double)finite, nans);
    if (infs) fprintf(out, ", %" PRId64 " inf", infs);
    fputc('\n', out);
  } else {
    fprintf(out, "  no finite values; %" PRId64 " NaN, %" PRId64 " inf\n",
            nans, infs);
  }
}

