/* The runtime driver (tessera/runtime.h): loading and verifying kernel files,
 * picking a kernel by name, and making deterministic pseudo-random input data.
 * The cache and the compiled backends plug in here later. */
#include "base/base_internal.h"
#include "tessera/runtime.h"

tsr_status_t tsr_runtime_load_file(const char *path,
                                   tsr_ir_module_t **out_module) {
  if (!path || !out_module)
    return TSR_STATUS(TSR_INVALID_ARGUMENT,
                      "tsr_runtime_load_file: NULL argument");
  tsr_ir_module_t *module = NULL;
  TSR_RETURN_IF_ERROR(tsr_ir_module_parse_file(path, &module));
  tsr_status_t status = tsr_ir_module_verify(module);
  if (status) {
    tsr_ir_module_destroy(module);
    return status;
  }
  *out_module = module;
  return NULL;
}

/* "@a, @b, @c" for messages. */
/* "@a, @b" for messages; past LISTED_KERNELS names, "@a, ..., @h and 99992
 * more", so a file of many kernels does not make a huge message. */
enum { LISTED_KERNELS = 8 };

static void list_kernels(const tsr_ir_module_t *module, tsr_strbuf_t *sb) {
  size_t n = tsr_ir_module_kernel_count(module);
  for (size_t i = 0; i < n && i < LISTED_KERNELS; i++)
    tsr_strbuf_printf(sb, "%s@%s", i ? ", " : "",
                      tsr_ir_kernel_name(tsr_ir_module_kernel(module, i)));
  if (n > LISTED_KERNELS) tsr_strbuf_printf(sb, " and %zu more", n - LISTED_KERNELS);
}

tsr_status_t tsr_runtime_select_kernel(const tsr_ir_module_t *module,
                                       const char *name,
                                       tsr_ir_kernel_t **out_kernel) {
  if (!module || !out_kernel)
    return TSR_STATUS(TSR_INVALID_ARGUMENT,
                      "tsr_runtime_select_kernel: NULL argument");
  size_t count = tsr_ir_module_kernel_count(module);
  if (count == 0)
    return TSR_STATUS(TSR_NOT_FOUND, "the module has no kernels");
  tsr_ir_kernel_t *kernel = NULL;
  if (name) {
    if (name[0] == '@') name++;
    kernel = tsr_ir_module_find_kernel(module,
                                       (tsr_string_view_t){name, strlen(name)});
  } else if (count == 1) {
    kernel = tsr_ir_module_kernel(module, 0);
  }
  if (!kernel) {
    tsr_strbuf_t sb;
    tsr_strbuf_initialize(&sb);
    list_kernels(module, &sb);
    const char *kernels = sb.failed ? "..." : sb.data;
    tsr_status_t s =
        name ? TSR_STATUS(TSR_NOT_FOUND, "no kernel named @%s; the module has %zu kernel%s: %s",
                          name, count, count == 1 ? "" : "s", kernels)
             : TSR_STATUS(TSR_INVALID_ARGUMENT,
                          "the module has %zu kernels (%s): name the one to "
                          "run",
                          count, kernels);
    tsr_strbuf_deinitialize(&sb);
    return s;
  }
  *out_kernel = kernel;
  return NULL;
}

/* ---- Deterministic random data -------------------------------------------
 * The generator is SplitMix64 used as a counter-based stream, so the values
 * depend only on (seed, operand name, element index) and are the same on
 * every platform and compiler:
 *   key     = mix(seed ^ fnv1a64(name))
 *   x[i]    = mix(key + (i + 1) * 0x9E3779B97F4A7C15)
 *   mix(z)  = SplitMix64's finaliser
 * Element i of the array (row-major) is made from x[i]:
 *   floats   (x >> 40) * 2^-23 - 1: uniform in [-1, 1) on a 2^-23 grid,
 *            exact in f32; bf16/f16 round toward zero so the range holds
 *   signed   ((x >> 32) * 201 >> 32) - 100: in [-100, 100]
 *   unsigned ((x >> 32) * 201 >> 32): in [0, 200]
 *   i1       x >> 63
 *   prefetch x >> 61: whole numbers in [0, 8), also for f32 prefetch
 * The name, not the operand's position, picks the stream: adding an operand
 * to a kernel does not change the data of the others. */

#define GOLDEN_GAMMA UINT64_C(0x9E3779B97F4A7C15)

static uint64_t splitmix64_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
  return z ^ (z >> 31);
}

static uint64_t fnv1a64(const char *s) {
  uint64_t h = UINT64_C(0xcbf29ce484222325);
  for (; *s; s++) {
    h ^= (unsigned char)*s;
    h *= UINT64_C(0x100000001b3);
  }
  return h;
}

/* Rounds f (|f| < 1) to f16 toward zero. */
static uint16_t f16_toward_zero(float f) {
  uint16_t h = tsr_f32_to_f16(f);
  float back = tsr_f16_to_f32(h);
  if ((back < 0 ? -back : back) > (f < 0 ? -f : f)) h--; /* magnitude - 1 ulp */
  return h;
}

tsr_status_t tsr_runtime_random_array(const tsr_ir_operand_info_t *info,
                                      uint64_t seed, tsr_array_t *out_array) {
  if (!info || !out_array)
    return TSR_STATUS(TSR_INVALID_ARGUMENT,
                      "tsr_runtime_random_array: NULL argument");
  if (info->role == TSR_ROLE_SCRATCH)
    return TSR_STATUS(TSR_INVALID_ARGUMENT,
                      "operand %%%s is scratch: it has no host data",
                      info->name ? info->name : "?");
  tsr_array_t array;
  TSR_RETURN_IF_ERROR(
      tsr_array_initialize(info->dtype, info->rank, info->dims, &array));
  uint64_t key = splitmix64_mix(seed ^ fnv1a64(info->name ? info->name : ""));
  int64_t n = tsr_array_element_count(&array);
  bool prefetch = info->role == TSR_ROLE_PREFETCH;
  for (int64_t i = 0; i < n; i++) {
    uint64_t x = splitmix64_mix(key + (uint64_t)(i + 1) * GOLDEN_GAMMA);
    /* Prefetch operands get whole numbers in [0, 8) whatever their dtype. */
    uint64_t range201 = ((x >> 32) * 201) >> 32;
    uint64_t small = x >> 61;
    float float_value = prefetch ? (float)small
                                 : (float)((int32_t)(x >> 40) - (1 << 23)) * 0x1p-23f;
    int64_t signed_value = prefetch ? (int64_t)small : (int64_t)range201 - 100;
    uint64_t unsigned_value = prefetch ? small : range201;
    switch (info->dtype) {
#define TSR_STORE(T, v) ((T *)array.data)[i] = (T)(v)
    case TSR_DTYPE_F32:
      TSR_STORE(float, float_value);
      break;
    case TSR_DTYPE_BF16: /* truncating the f32 bits rounds toward zero */
      TSR_STORE(uint16_t, tsr_f32_bits(float_value) >> 16);
      break;
    case TSR_DTYPE_F16:
      TSR_STORE(uint16_t, f16_toward_zero(float_value));
      break;
    case TSR_DTYPE_I32:
      TSR_STORE(int32_t, signed_value);
      break;
    case TSR_DTYPE_I16:
      TSR_STORE(int16_t, signed_value);
      break;
    case TSR_DTYPE_I8:
      TSR_STORE(int8_t, signed_value);
      break;
    case TSR_DTYPE_U32:
      TSR_STORE(uint32_t, unsigned_value);
      break;
    case TSR_DTYPE_U16:
      TSR_STORE(uint16_t, unsigned_value);
      break;
    case TSR_DTYPE_U8:
      TSR_STORE(uint8_t, unsigned_value);
      break;
    case TSR_DTYPE_I1:
      TSR_STORE(uint8_t, x >> 63);
      break;
    /* the narrow dtypes: the same draws, reduced to their range */
    case TSR_DTYPE_I4:
    case TSR_DTYPE_I2: {
      const int64_t half = (int64_t)1 << (tsr_dtype_bits(info->dtype) - 1);
      const int64_t v = prefetch ? TSR_MIN(signed_value, half - 1)
                                 : (int64_t)(range201 % (uint64_t)(2 * half)) - half;
      TSR_STORE(uint8_t, (uint64_t)v & (uint64_t)(2 * half - 1)); /* as ml_dtypes: low bits */
      break;
    }
    case TSR_DTYPE_U4:
    case TSR_DTYPE_U2:
      TSR_STORE(uint8_t, unsigned_value % (1u << tsr_dtype_bits(info->dtype)));
      break;
    case TSR_DTYPE_F8E4M3FN: /* whole numbers or f32 values rounded */
      TSR_STORE(uint8_t, tsr_f32_to_f8e4m3fn(float_value));
      break;
    case TSR_DTYPE_F8E5M2:
      TSR_STORE(uint8_t, tsr_f32_to_f8e5m2(float_value));
      break;
#undef TSR_STORE
    default:
      tsr_array_deinitialize(&array);
      return TSR_STATUS(TSR_INTERNAL, "random data for dtype %d",
                        (int)info->dtype);
    }
  }
  *out_array = array;
  return NULL;
}
