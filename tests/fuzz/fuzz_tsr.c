/* Mutation fuzzing of the parser, verifier and interpreter. Every input is
 * parsed; whatever parses is verified; whatever verifies is prepared and run
 * on small random inputs. Nothing may crash (the suite runs this under ASan
 * and UBSan): that is the promise "a verified module cannot crash the
 * interpreter". Failures must be proper diagnostics (file:line:col: error:).
 *
 * Two entry points: LLVMFuzzerTestOneInput for libFuzzer (build with clang,
 * -fsanitize=fuzzer), and a deterministic driver (the test) that mutates every
 * .tsr file of the tree with fixed seeds. */
#include <dirent.h>
#include <stdint.h>
#include <sys/stat.h>

#include "interp/interp_runtime.h"
#include "ir/ir.h"
#include "tests/harness.h"

static uint64_t rng_state;
static uint64_t rng(void) {
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

typedef struct outcome {
  int parsed, verified, ran, bad_diagnostics;
} outcome_t;

/* Kernels this large (operand bytes or grid steps) are verified but not run,
 * to keep the test fast. */
enum { MAX_RUN_BYTES = 4 << 20, MAX_RUN_STEPS = 4096 };

static bool diag_ok(tsr_status_t s) {
  const char *m = tsr_status_message(s);
  return strstr(m, ": error: ") != NULL || tsr_status_code(s) == TSR_OUT_OF_MEMORY;
}

/* The largest value or ref (in elements) a region creates: mutants can make
 * consts of billions of elements, which verify but are too big to run here. */
static int64_t largest_value(const tsr_region_t *r) {
  int64_t most = 0;
  for (uint32_t i = 0; i < r->num_args; i++)
    most = TSR_MAX(most, tsr_type_element_count(&r->args[i]->type));
  for (const tsr_op_t *op = r->first; op; op = op->next) {
    for (uint32_t i = 0; i < op->num_results; i++)
      most = TSR_MAX(most, tsr_type_element_count(&op->results[i]->type));
    for (uint32_t i = 0; i < op->num_regions; i++)
      most = TSR_MAX(most, largest_value(&op->regions[i]));
  }
  return most;
}

static void try_run(const tsr_ir_kernel_t *k, outcome_t *out) {
  int64_t most = largest_value(&k->body);
  for (uint32_t i = 0; i < k->num_decls; i++)
    most = TSR_MAX(most, tsr_type_element_count(&k->decls[i].ref->type));
  if (most > MAX_RUN_BYTES / 4) return;
  size_t n = tsr_ir_kernel_operand_count(k);
  tsr_array_t arrays[16];
  tsr_array_t *ptrs[16];
  size_t count = 0;
  uint64_t bytes = 0;
  for (size_t i = 0; i < n; i++) {
    tsr_ir_operand_info_t info;
    tsr_ir_kernel_operand_info(k, i, &info);
    if (info.role == TSR_ROLE_SCRATCH) continue;
    uint64_t e = 1;
    for (uint32_t d = 0; d < info.rank; d++) e *= (uint64_t)info.dims[d];
    bytes += e * 4;
    if (count == 16 || bytes > MAX_RUN_BYTES) goto done;
    tsr_status_t s = tsr_runtime_random_array(&info, 1, &arrays[count]);
    if (s) {
      tsr_status_free(s);
      goto done;
    }
    ptrs[count] = &arrays[count];
    count++;
  }
  tsr_interp_options_t opts;
  tsr_interp_options_initialize(&opts);
  FILE *sink = fopen("/dev/null", "w");
  tsr_interp_program_t *prog = NULL;
  tsr_status_t s = tsr_interp_program_prepare(k, &opts, &prog);
  if (!s) {
    /* skip kernels with too many steps (and loops that may not end) */
    char *text = tsr_ir_kernel_print(k);
    bool has_while = text && strstr(text, " while ") != NULL;
    tsr_ir_string_free(text);
    tsr_interp_stats_t st = {0};
    (void)st;
    if (!has_while) {
      tsr_interp_run_options_t ro;
      tsr_interp_run_options_of(&opts, &ro);
      ro.print_stream = sink;
      s = tsr_interp_program_run_with(prog, ptrs, count, &ro, &st, NULL);
      out->ran++;
      if (s && !diag_ok(s) && tsr_status_code(s) != TSR_INVALID_ARGUMENT)
        out->bad_diagnostics++;
    }
  } else if (!diag_ok(s) && tsr_status_code(s) != TSR_INVALID_ARGUMENT) {
    out->bad_diagnostics++;
  }
  tsr_status_free(s);
  tsr_interp_program_destroy(prog);
  if (sink) fclose(sink);
done:
  for (size_t i = 0; i < count; i++) tsr_array_deinitialize(&arrays[i]);
}

static bool small_grid(const char *text) {
  /* grid(...) product from the text: cheap guard before running. */
  const char *g = strstr(text, "grid(");
  if (!g) return true;
  uint64_t steps = 1;
  for (const char *p = g + 5; *p && *p != ')';) {
    char *end;
    unsigned long long v = strtoull(p, &end, 10);
    if (end == p) {
      p++;
      continue;
    }
    steps *= v ? v : 1;
    if (steps > MAX_RUN_STEPS) return false;
    p = end;
  }
  return true;
}

static void check_one(const char *data, size_t len, outcome_t *out) {
  tsr_ir_module_t *m = NULL;
  tsr_status_t s = tsr_ir_module_parse(TSR_SV("fuzz.tsr"),
                                       (tsr_string_view_t){data, len}, &m);
  if (s) {
    if (!diag_ok(s)) out->bad_diagnostics++;
    tsr_status_free(s);
    return;
  }
  out->parsed++;
  /* printing must work on anything that parsed */
  char *printed = tsr_ir_module_print(m);
  s = tsr_ir_module_verify(m);
  if (s) {
    if (!diag_ok(s)) out->bad_diagnostics++;
    tsr_status_free(s);
  } else {
    out->verified++;
    if (printed && small_grid(printed))
      for (size_t i = 0; i < tsr_ir_module_kernel_count(m); i++)
        try_run(tsr_ir_module_kernel(m, i), out);
  }
  tsr_ir_string_free(printed);
  tsr_ir_module_destroy(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  outcome_t out = {0};
  check_one((const char *)data, size, &out);
  if (out.bad_diagnostics) __builtin_trap();
  return 0;
}

#ifndef TSR_LIBFUZZER

/* ---- Deterministic driver ---- */

typedef struct lines {
  char **start;
  size_t *len;
  size_t count;
} lines_t;

static void split_lines(const char *text, lines_t *l) {
  size_t n = 1;
  for (const char *p = text; *p; p++) n += *p == '\n';
  l->start = calloc(n, sizeof *l->start);
  l->len = calloc(n, sizeof *l->len);
  l->count = 0;
  const char *p = text;
  while (*p) {
    const char *e = strchr(p, '\n');
    size_t len = e ? (size_t)(e - p) + 1 : strlen(p);
    l->start[l->count] = (char *)p;
    l->len[l->count++] = len;
    p += len;
  }
}

static const char *const tokens[] = {
    "0", "1", "-1", "7", "128", "2147483647", "-2147483648", "99999999999",
    ":", "0:1", "ds(%i, 4)", "%i", "%x", "f32", "i1", "bf16", "u8",
    "[8, 128]", "[0]", "[1, 2, 3, 4, 5, 6, 7]", "vmem", "smem", "hbm", "any",
    "squeezed", "{", "}", "yield", "parallel", "add", "dot", "load", "store",
    "reduce_sum", "axes [0, 1]", "axis 5", "transpose_rhs", "mask %m", "nan",
    "\"", ",", "=", "->", "alias %x", "revisit any", "revisit", "iter(%a = %b)",
    "scoped(%t: vmem f32[8])"};

/* One mutant of `text` into buf (malloc'd). */
static char *mutate(const char *text, const lines_t *l) {
  size_t len = strlen(text);
  char *out = malloc(len * 2 + 256);
  size_t o = 0;
  int kind = (int)(rng() % 6);
  size_t li = l->count ? (size_t)(rng() % l->count) : 0;
  size_t lj = l->count ? (size_t)(rng() % l->count) : 0;
  for (size_t i = 0; i < l->count; i++) {
    const char *s = l->start[i];
    size_t n = l->len[i];
    if (i == li && kind == 0) continue; /* delete a line */
    if (i == li && kind == 1) { /* duplicate a line */
      memcpy(out + o, s, n);
      o += n;
    }
    if (i == li && kind == 2) { /* swap two lines */
      s = l->start[lj];
      n = l->len[lj];
    } else if (i == lj && kind == 2) {
      s = l->start[li];
      n = l->len[li];
    }
    if (i == li && kind == 3 && n > 1) { /* replace a word with a token */
      size_t at = (size_t)(rng() % n);
      size_t end = at;
      while (end < n && s[end] != ' ' && s[end] != ',' && s[end] != '\n') end++;
      const char *t = tokens[rng() % (sizeof tokens / sizeof tokens[0])];
      memcpy(out + o, s, at);
      o += at;
      memcpy(out + o, t, strlen(t));
      o += strlen(t);
      memcpy(out + o, s + end, n - end);
      o += n - end;
      continue;
    }
    memcpy(out + o, s, n);
    o += n;
  }
  out[o] = 0;
  if (kind == 4 && o) out[rng() % o] ^= (char)(1u << (rng() % 7)); /* flip a bit */
  if (kind == 5 && o) out[rng() % o] = 0;                         /* truncate */
  return out;
}

static void walk(const char *root, const char *rel, char ***files, size_t *count) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", root, rel);
  DIR *d = opendir(path);
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    char sub[4096];
    snprintf(sub, sizeof sub, "%s/%s", rel, e->d_name);
    char full[8192];
    snprintf(full, sizeof full, "%s/%s", root, sub);
    struct stat st;
    if (stat(full, &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      walk(root, sub, files, count);
    } else {
      size_t n = strlen(e->d_name);
      if (n > 4 && strcmp(e->d_name + n - 4, ".tsr") == 0) {
        *files = realloc(*files, (*count + 1) * sizeof **files);
        (*files)[(*count)++] = strdup(sub);
      }
    }
  }
  closedir(d);
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv) {
  const char *root = getenv("TSR_SOURCE_ROOT");
  if (!root) root = ".";
  int per_file = argc > 1 ? atoi(argv[1]) : 200;
  char **files = NULL;
  size_t count = 0;
  walk(root, "kernels", &files, &count);
  walk(root, "tests/ir", &files, &count);
  walk(root, "tests/kernels", &files, &count);
  qsort(files, count, sizeof *files, cmp_str);
  outcome_t total = {0};
  for (size_t i = 0; i < count; i++) {
    char *text = tsr_test_read_source(files[i], NULL);
    outcome_t out = {0};
    if (text) {
      lines_t l;
      split_lines(text, &l);
      rng_state = 0x5eed0000u + i;
      for (int m = 0; m < per_file; m++) {
        char *mut = mutate(text, &l);
        check_one(mut, strlen(mut), &out);
        free(mut);
      }
      free(l.start);
      free(l.len);
    }
    tsr_test_case_failed = text == NULL || out.bad_diagnostics != 0;
    if (out.bad_diagnostics)
      printf("# %s: %d failures without a file:line:col diagnostic\n", files[i],
             out.bad_diagnostics);
    tsr_test_count++;
    if (tsr_test_case_failed) tsr_test_failed_count++;
    printf("%s %d - %s (%d mutants: %d parsed, %d verified, %d ran)\n",
           tsr_test_case_failed ? "not ok" : "ok", tsr_test_count, files[i],
           per_file, out.parsed, out.verified, out.ran);
    total.parsed += out.parsed;
    total.verified += out.verified;
    total.ran += out.ran;
    free(text);
    free(files[i]);
  }
  free(files);
  /* The fuzzer must actually reach the interpreter. */
  tsr_test_case_failed = total.ran == 0 || count == 0;
  tsr_test_count++;
  if (tsr_test_case_failed) tsr_test_failed_count++;
  printf("%s %d - mutants reach the interpreter (%d ran)\n",
         tsr_test_case_failed ? "not ok" : "ok", tsr_test_count, total.ran);
  return tsr_test_done();
}
#endif
