/* Where tessera's code lives, and the modules it loads beside it only when
 * used (the lowering library, Highway's sort). Not a public header. */
#ifndef TESSERA_BASE_MODULE_H
#define TESSERA_BASE_MODULE_H

#include <stdbool.h>
#include <stddef.h>

/* The absolute path of the file holding tessera's code: the shared library,
 * or the executable it is linked into. false if unknown. */
bool tsr_code_path(char *buf, size_t size);

/* The path of a module loaded on demand: `setting` when set and not empty
 * (a context's choice or an environment variable); else `build_path` when
 * the file holding this code lives in the build tree `build_root`; else the
 * file named as `install_path`'s last component in the directory of the
 * file holding this code, when it exists (the Python package's layout);
 * else `install_path`. */
void tsr_module_path(const char *setting, const char *build_root, const char *build_path,
                     const char *install_path, char *out, size_t size);

#endif /* TESSERA_BASE_MODULE_H */
