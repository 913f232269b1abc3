/* tsr_tpu_emit and tsr_tpu_check (tessera/api.h): verify, apply Pallas's
 * TPU layout rules, then emit the Mosaic module, through the context's
 * disk cache (docs/cache.md, docs/tpu.md). */
#include <stdio.h>

#include "runtime/api_internal.h"
#include "tpu/tpu_internal.h"

static tsr_status_t find_chip(const char *chip, const tpu_chip_t **out) {
  const char *name = chip ? chip : "v5e";
  const tpu_chip_t *c = tsr_chip_find(name);
  if (!c || !c->mosaic)
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "unknown TPU chip '%s' (known: %s)", name,
                      tsr_chip_names(true));
  *out = c;
  return NULL;
}

TSR_API tsr_status_t tsr_tpu_check(const tsr_ir_kernel_t *kernel, const char *chip) {
  const tpu_chip_t *c = NULL;
  TSR_RETURN_IF_ERROR(find_chip(chip, &c));
  if (!kernel) return NULL; /* the chip name only */
  TSR_RETURN_IF_ERROR(tsr_ir_verify_kernel(kernel));
  TSR_RETURN_IF_ERROR(tpu_check_kernel(kernel, c));
  /* What the emitter cannot write (an op with no Mosaic form, located) is
   * the check's error too: a kernel passes exactly when tsr_tpu_emit
   * would give a module. Emission takes well under a millisecond. */
  char *text = NULL;
  TSR_RETURN_IF_ERROR(tpu_emit_kernel(kernel, c, &text));
  tsr_free(text);
  return NULL;
}

TSR_API tsr_status_t tsr_tpu_vmem(const tsr_ir_kernel_t *kernel, const char *chip,
                                  tsr_tpu_vmem_t *out_vmem) {
  const tpu_chip_t *c = NULL;
  TSR_RETURN_IF_ERROR(find_chip(chip, &c));
  if (!kernel) return TSR_STATUS(TSR_INVALID_ARGUMENT, "tsr_tpu_vmem: no kernel");
  TSR_RETURN_IF_ERROR(tsr_ir_verify_kernel(kernel));
  *out_vmem = (tsr_tpu_vmem_t){tpu_vmem_need(kernel, c), c->scoped_vmem_bytes,
                               c->vmem_bytes - TPU_VMEM_RESERVED};
  return NULL;
}

/* The key material (the encoding of runtime/key.c: name, NUL, 8-byte
 * little-endian length, bytes, per component): the canonical kernel, the
 * target "tpu", the chip, the emitter's version and the producer (this
 * build of tessera). */
static void add_component(tsr_strbuf_t *sb, const char *name, const void *bytes, size_t size) {
  tsr_strbuf_append(sb, name, strlen(name) + 1);
  uint8_t len[8];
  for (int i = 0; i < 8; i++) len[i] = (uint8_t)((uint64_t)size >> (8 * i));
  tsr_strbuf_append(sb, (const char *)len, 8);
  tsr_strbuf_append(sb, bytes, size);
}

static tsr_status_t key_material(const tsr_kernel_t *kernel, const tpu_chip_t *chip,
                                 tsr_strbuf_t *sb) {
  uint8_t *canon = NULL;
  size_t canon_size = 0;
  TSR_RETURN_IF_ERROR(tsr_ir_canon_kernel(kernel, &canon, &canon_size));
  char version[32];
  snprintf(version, sizeof version, "%d", TSR_TPU_EMITTER_VERSION);
  const char *producer = tsr_runtime_producer();
  add_component(sb, "kernel", canon, canon_size);
  add_component(sb, "target", "tpu", 3);
  add_component(sb, "chip", chip->name, strlen(chip->name));
  add_component(sb, "emitter", version, strlen(version));
  add_component(sb, "tessera", producer, strlen(producer));
  tsr_free(canon);
  return sb->failed ? TSR_OOM() : NULL;
}

static tsr_status_t emit_cached(tsr_context_t *context, const tsr_kernel_t *kernel,
                                const tpu_chip_t *chip, char **out_text) {
  tsr_disk_cache_t *disk = context ? tsr_runtime_disk() : NULL;
  if (!disk) return tpu_emit_kernel(kernel, chip, out_text);
  tsr_strbuf_t material;
  tsr_strbuf_initialize(&material);
  tsr_status_t st = key_material(kernel, chip, &material);
  if (st) {
    tsr_strbuf_deinitialize(&material);
    return st;
  }
  tsr_cache_key_t key;
  tsr_cache_key_make(&key, material.data, material.size);
  void *payload = NULL;
  size_t size = 0;
  st = tsr_disk_cache_get(disk, &key, &payload, &size);
  if (!st) { /* a hit: the text as stored */
    char *text = tsr_malloc(size + 1);
    if (text) {
      memcpy(text, payload, size);
      text[size] = 0;
    }
    tsr_disk_cache_free(payload);
    tsr_strbuf_deinitialize(&material);
    if (!text) return TSR_OOM();
    *out_text = text;
    return NULL;
  }
  if (tsr_status_code(st) == TSR_NOT_FOUND) tsr_status_free(st);
  else tsr_runtime_disk_failed(st); /* warned once; no more disk use */
  char *text = NULL;
  st = tpu_emit_kernel(kernel, chip, &text);
  if (!st && (disk = tsr_runtime_disk())) {
    tsr_status_t put = tsr_disk_cache_put(disk, &key, text, strlen(text));
    if (put) tsr_runtime_disk_failed(put);
  }
  tsr_strbuf_deinitialize(&material);
  if (st) return st;
  *out_text = text;
  return NULL;
}

TSR_API tsr_status_t tsr_tpu_emit(tsr_context_t *context, const tsr_ir_kernel_t *kernel,
                                  const char *chip, char **out_text) {
  if (!kernel || !out_text)
    return TSR_STATUS(TSR_INVALID_ARGUMENT, "tsr_tpu_emit: no kernel or no out_text");
  const tpu_chip_t *c = NULL;
  TSR_RETURN_IF_ERROR(find_chip(chip, &c));
  tsr_runtime_binding_t *prev = context ? tsr_runtime_bind(&context->binding) : NULL;
  tsr_status_t st = tsr_ir_verify_kernel(kernel);
  if (!st) st = tpu_check_kernel(kernel, c);
  if (!st) st = emit_cached(context, kernel, c, out_text);
  if (context) tsr_runtime_bind(prev);
  return st;
}
