/* The in-process linker (lower/link.c) on objects gcc makes here, which use
 * more of ELF than LLVM's kernel objects do (data, bss, a GOT for a variable
 * of the object and for a libc function's address, calls into libm, .eh_frame): the
 * shared object loads with dlopen, its functions compute what they should,
 * its variables are where dlsym says, it has a PT_GNU_EH_FRAME; and what the
 * linker does not handle (not ELF, a symbol neither libc nor libm defines,
 * an absolute pointer in data) comes back unlinked with the reason, for
 * lower/compile.c to link with cc. The kernels themselves are compared with
 * cc's link in tests/lower/test_link.sh. Needs cc (build-essential, which
 * the cc fallback needs too). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <math.h>
#include <unistd.h>

#include "base/base_internal.h"
#include "lower/link.h"
#include "tests/harness.h"

static char dir[] = "/tmp/tessera-test-link-XXXXXX";

/* Compiles `source` with cc -c -fPIC -O2 into *out_bytes (malloc'd). */
static bool compile_object(const char *name, const char *source, void **out_bytes,
                           size_t *out_size) {
  char c_path[256], o_path[256], command[1024];
  snprintf(c_path, sizeof c_path, "%s/%s.c", dir, name);
  snprintf(o_path, sizeof o_path, "%s/%s.o", dir, name);
  FILE *f = fopen(c_path, "w");
  if (!f) return false;
  fputs(source, f);
  fclose(f);
  snprintf(command, sizeof command, "cc -c -fPIC -O2 -o %s %s", o_path, c_path);
  if (system(command) != 0) {
    printf("# %s failed\n", command);
    return false;
  }
  f = fopen(o_path, "rb");
  if (!f) return false;
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  rewind(f);
  void *bytes = malloc((size_t)size);
  bool ok = bytes && fread(bytes, 1, (size_t)size, f) == (size_t)size;
  fclose(f);
  if (!ok) {
    free(bytes);
    return false;
  }
  *out_bytes = bytes;
  *out_size = (size_t)size;
  return true;
}

/* Links `source`'s object; *why gets the reason when it is not handled. */
static void *link_source(const char *name, const char *source, size_t *out_size, char *why,
                         size_t why_size) {
  void *object = NULL, *shared = NULL;
  size_t size = 0;
  why[0] = 0;
  if (!compile_object(name, source, &object, &size)) return NULL;
  TSR_CHECK_OK(tsr_lower_link_shared(object, size, &shared, out_size, why, why_size));
  free(object);
  return shared;
}

static const char program[] =
    "#include <math.h>\n"
    "#include <string.h>\n"
    "int counter;\n" /* bss, through the GOT (-fPIC, default visibility) */
    "static const char message[] = \"tessera\";\n"
    "static int table[4] = {1, 2, 3, 4};\n"
    "float link_exp(float x) { counter++; return expf(x) + sinf(x); }\n"
    "size_t link_copy(char *dst) { memcpy(dst, message, sizeof message); return sizeof message; }\n"
    "void *link_strlen(void) { return (void *)strlen; }\n"
    "int link_sum(void) { int s = 0; for (int i = 0; i < 4; i++) s += table[i] += 1; "
    "return s + counter; }\n";

static const char *loaded_path;
static int eh_frame_headers;

static int count_eh_frame(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  (void)data;
  if (!info->dlpi_name || strcmp(info->dlpi_name, loaded_path) != 0) return 0;
  for (int i = 0; i < info->dlpi_phnum; i++)
    eh_frame_headers += info->dlpi_phdr[i].p_type == PT_GNU_EH_FRAME;
  return 0;
}

TSR_TEST(gcc_object_links_loads_and_runs) {
  char why[256];
  size_t size = 0;
  void *shared = link_source("program", program, &size, why, sizeof why);
  if (!shared) {
    TSR_FAIL_AT("not linked: %s", why);
    return;
  }
  static char path[300];
  snprintf(path, sizeof path, "%s/program.so", dir);
  FILE *f = fopen(path, "wb");
  TSR_CHECK(f && fwrite(shared, 1, size, f) == size);
  if (f) fclose(f);
  tsr_free(shared);
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    TSR_FAIL_AT("dlopen: %s", dlerror());
    return;
  }
  float (*link_exp)(float) = (float (*)(float))dlsym(h, "link_exp");
  size_t (*link_copy)(char *) = (size_t(*)(char *))dlsym(h, "link_copy");
  void *(*link_strlen)(void) = (void *(*)(void))dlsym(h, "link_strlen");
  int (*link_sum)(void) = (int (*)(void))dlsym(h, "link_sum");
  int *counter = dlsym(h, "counter");
  TSR_CHECK(link_exp && link_copy && link_strlen && link_sum && counter);
  if (!link_exp || !link_copy || !link_strlen || !link_sum || !counter) return;
  volatile float x = 0.75f;
  TSR_CHECK(link_exp(x) == expf(x) + sinf(x));
  TSR_CHECK_EQ_INT(*counter, 1);
  char buf[16] = {0};
  TSR_CHECK_EQ_INT(link_copy(buf), 8);
  TSR_CHECK_EQ_STR(buf, "tessera");
  /* strlen has one version: the GOT slot holds what the process has. */
  TSR_CHECK(link_strlen() == dlsym(RTLD_DEFAULT, "strlen"));
  TSR_CHECK_EQ_INT(link_sum(), 2 + 3 + 4 + 5 + 1);
  TSR_CHECK_EQ_INT(link_sum(), 3 + 4 + 5 + 6 + 1);
  loaded_path = path;
  dl_iterate_phdr(count_eh_frame, NULL);
  TSR_CHECK_EQ_INT(eh_frame_headers, 1);
  dlclose(h);
}

TSR_TEST(not_elf_is_left_to_cc) {
  char why[256] = "";
  void *shared = (void *)1;
  size_t size = 1;
  TSR_CHECK_OK(tsr_lower_link_shared("not an object", 13, &shared, &size, why, sizeof why));
  TSR_CHECK(shared == NULL && size == 0);
  TSR_CHECK(strstr(why, "not an ELF") != NULL);
}

TSR_TEST(symbol_of_neither_libc_nor_libm_is_left_to_cc) {
  char why[256];
  size_t size = 0;
  void *shared = link_source("undefined",
                             "extern int tsr_no_such_function(int);\n"
                             "int f(int x) { return tsr_no_such_function(x) + 1; }\n",
                             &size, why, sizeof why);
  TSR_CHECK(shared == NULL);
  tsr_free(shared);
  TSR_CHECK(strstr(why, "tsr_no_such_function") != NULL);
}

TSR_TEST(absolute_pointer_in_data_is_left_to_cc) {
  char why[256];
  size_t size = 0;
  void *shared = link_source("absolute", "int x;\nint *p = &x;\n", &size, why, sizeof why);
  TSR_CHECK(shared == NULL);
  tsr_free(shared);
  TSR_CHECK(strstr(why, "relocation type 1 ") != NULL); /* R_X86_64_64 */
}

int main(void) {
  if (!mkdtemp(dir)) {
    printf("Bail out! mkdtemp failed\n");
    return 1;
  }
  TSR_RUN(not_elf_is_left_to_cc);
#if defined(__x86_64__)
  TSR_RUN(gcc_object_links_loads_and_runs);
  TSR_RUN(symbol_of_neither_libc_nor_libm_is_left_to_cc);
  TSR_RUN(absolute_pointer_in_data_is_left_to_cc);
#endif
  char command[128];
  snprintf(command, sizeof command, "rm -rf %s", dir);
  if (system(command) != 0) printf("# %s failed\n", command);
  return tsr_test_done();
}
