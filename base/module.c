/* Where tessera's code lives, and the modules it loads beside it on demand
 * (base/module.h). */
#define _GNU_SOURCE /* dladdr */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "base/module.h"

bool tsr_code_path(char *buf, size_t size) {
  Dl_info info;
  if (!dladdr((void *)tsr_code_path, &info) || !info.dli_fname) return false;
  if (info.dli_fname[0] == '/') {
    int n = snprintf(buf, size, "%s", info.dli_fname);
    return n > 0 && (size_t)n < size;
  }
  /* A library dlopen'd by a relative path ("build/libtessera.so"): dladdr
   * gives that path, relative to the working directory of the dlopen. (The
   * main program's argv[0] is not trusted so: the process may have left
   * the directory it names a file in.) */
  Dl_info main_info;
  const void *main_phdr = (const void *)getauxval(AT_PHDR);
  bool in_main = main_phdr && dladdr(main_phdr, &main_info) &&
                 main_info.dli_fbase == info.dli_fbase;
  char resolved[PATH_MAX];
  if (!in_main && realpath(info.dli_fname, resolved)) {
    int n = snprintf(buf, size, "%s", resolved);
    return n > 0 && (size_t)n < size;
  }
  /* The main program: dladdr gives its argv[0] ("tessera" when found
   * through PATH, or relative to a working directory since left). */
  ssize_t n = readlink("/proc/self/exe", buf, size - 1);
  if (n <= 0) return false;
  buf[n] = 0;
  return true;
}

void tsr_module_path(const char *setting, const char *build_root, const char *build_path,
                     const char *install_path, char *out, size_t size) {
  if (setting && *setting) {
    snprintf(out, size, "%s", setting);
    return;
  }
  char code[4096];
  if (!tsr_code_path(code, sizeof code)) {
    snprintf(out, size, "%s", install_path);
    return;
  }
  size_t root = strlen(build_root);
  if (strncmp(code, build_root, root) == 0 && code[root] == '/') {
    snprintf(out, size, "%s", build_path);
    return;
  }
  /* Beside the code: the Python package keeps libtessera.so, the CLI and
   * the modules in one directory (tessera/_lib/, docs/install.md), wherever
   * pip put it, so the prefix the build was configured with says nothing. */
  const char *slash = strrchr(code, '/');
  const char *name = strrchr(install_path, '/');
  name = name ? name + 1 : install_path;
  char beside[4096 + 256];
  if (slash && *name) {
    int n = snprintf(beside, sizeof beside, "%.*s/%s", (int)(slash - code), code, name);
    if (n > 0 && (size_t)n < sizeof beside && access(beside, F_OK) == 0) {
      snprintf(out, size, "%s", beside);
      return;
    }
  }
  snprintf(out, size, "%s", install_path);
}
