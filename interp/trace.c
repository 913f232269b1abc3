/* Chrome trace events (chrome://tracing, ui.perfetto.dev) of a run: one
 * process per device, one thread per core (grid steps, waits, barriers) and
 * one per core's DMA engine (copies with their bytes). Time is simulated: one
 * tick ("microsecond" in the viewer) per instruction executed by any core.
 * Names go into the JSON unescaped: kernel and ref names are [A-Za-z0-9_.]. */
#include <stdio.h>

#include "interp/interp_internal.h"

void tsr_trace_event(shared_t *sh, const char *name, uint32_t device, uint32_t tid,
                        uint64_t start, uint64_t end, const char *args_json) {
  if (!sh->tracing) return;
  tsr_strbuf_printf(&sh->trace,
                    "%s{\"name\":\"%s\",\"ph\":\"X\",\"ts\":%llu,\"dur\":%llu,"
                    "\"pid\":%u,\"tid\":%u%s%s}",
                    sh->trace.size ? ",\n" : "", name, (unsigned long long)start,
                    (unsigned long long)(end > start ? end - start : 1), device, tid,
                    args_json ? ",\"args\":" : "", args_json ? args_json : "");
}

tsr_status_t tsr_trace_write(shared_t *sh) {
  const tsr_interp_program_t *p = sh->p;
  if (sh->trace.failed) return TSR_OOM();
  /* The whole file in memory, then written as --out writes (base/outfile.c):
   * a temporary file renamed into place, no link planted by another user
   * followed; and no wait for a FIFO's reader, which nothing (no cancel
   * flag, no Ctrl-C of a Python caller) could end. */
  tsr_strbuf_t text;
  tsr_strbuf_initialize(&text);
  tsr_strbuf_printf(&text, "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"kernel\":\"%s\","
                           "\"time\":\"simulated: 1 unit = 1 instruction\"},\"traceEvents\":[\n",
                    p->kernel_name);
  for (uint32_t d = 0; d < sh->devices; d++) {
    tsr_strbuf_printf(&text, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%u,"
                             "\"args\":{\"name\":\"device %u\"}},\n", d, d);
    for (uint32_t c = 0; c < sh->cores; c++)
      tsr_strbuf_printf(&text, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%u,\"tid\":%u,"
                               "\"args\":{\"name\":\"core %u\"}},\n"
                               "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%u,\"tid\":%u,"
                               "\"args\":{\"name\":\"core %u DMA engine\"}},\n",
                        d, c, c, d, 1000 + c, c);
  }
  tsr_strbuf_append(&text, sh->trace.data ? sh->trace.data : "", sh->trace.size);
  tsr_strbuf_puts(&text, "\n]}\n");
  tsr_status_t s = text.failed ? TSR_OOM()
                                : tsr_file_write_no_wait(sh->trace_path, text.data, text.size);
  tsr_strbuf_deinitialize(&text);
  return s;
}

void tsr_trace_dma(shared_t *sh, const dma_record_t *r) {
  if (!sh->tracing) return;
  char name[160], args[64];
  snprintf(name, sizeof name, "DMA -> %%%s", r->dst_name);
  snprintf(args, sizeof args, "{\"bytes\":%lld}", (long long)r->bytes);
  tsr_trace_event(sh, name, r->device, 1000 + r->core, r->start_tick, sh->tick, args);
}
