/* Helpers the commands of the tessera CLI share (tools/cli.h): allocation
 * that ends the process on failure, usage errors and status reports, reading
 * files and .tsr modules, directories and paths, and the option parser. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tools/cli.h"

/* The tool's allocations are small and short-lived: running out of memory
 * ends the process. (The library's tsr_malloc family is internal.) */
static void *must_alloc(void *p, size_t count, size_t size) {
  if (!p) {
    fprintf(stderr, "tessera: out of memory: cannot allocate %zu x %zu bytes\n", count,
            size);
    exit(EXIT_KERNEL);
  }
  return p;
}

void *cli_malloc(size_t n) { return must_alloc(malloc(n ? n : 1), 1, n); }

void *cli_calloc(size_t count, size_t n) {
  return must_alloc(calloc(count ? count : 1, n ? n : 1), count, n);
}

char *cli_strndup(const char *s, size_t n) {
  return must_alloc(strndup(s, n), 1, n + 1);
}

/* Prints a usage error for command `cmd` and returns EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "tessera %s: ", cmd);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\nTry 'tessera %s --help'.\n", cmd);
  va_end(ap);
  return EXIT_USAGE;
}

/* Exit code for a status: I/O and lookup problems are the caller's (usage),
 * everything else is a kernel error. */
int cli_exit_code(tsr_status_t status) {
  switch (tsr_status_code(status)) {
  case TSR_OK:
    return EXIT_OK;
  case TSR_INVALID_ARGUMENT:
  case TSR_IO_ERROR:
  case TSR_FORMAT_ERROR:
  case TSR_NOT_FOUND:
    return EXIT_USAGE;
  default:
    return EXIT_KERNEL;
  }
}

/* Prints a status on stderr. Diagnostics about a kernel already read
 * "file:line:col: error: ..." and are printed as they are; other messages get
 * a "tessera CMD: <code>:" prefix. Frees the status. */
void cli_report(const char *cmd, tsr_status_t status) {
  tsr_status_code_t code = tsr_status_code(status);
  const char *msg = tsr_status_message(status);
  const char *eol = strchr(msg, '\n');
  const char *tag = strstr(msg, ": error: ");
  bool located = tag && (!eol || tag < eol);
  const char *code_name = tsr_status_code_name(code);
  if (located || code == TSR_PARSE_ERROR || code == TSR_VERIFY_ERROR ||
      code == TSR_KERNEL_ERROR) {
    fprintf(stderr, "%s\n", msg);
  } else if (strncmp(msg, code_name, strlen(code_name)) == 0) {
    fprintf(stderr, "tessera %s: %s\n", cmd, msg); /* "out of memory" once */
  } else {
    fprintf(stderr, "tessera %s: %s: %s\n", cmd, tsr_status_code_name(code),
            msg);
  }
  tsr_status_free(status);
}

/* Parses a non-negative decimal (or 0x hex) integer. */
bool cli_parse_u64(const char *s, uint64_t *out) {
  if (!s || !*s || *s == '-' || *s == '+' || *s == ' ') return false;
  int base = (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) ? 16 : 10;
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, base);
  if (errno || *end || end == s) return false;
  *out = (uint64_t)v;
  return true;
}

static char *read_stream(FILE *f, size_t *out_size) {
  size_t cap = 65536, size = 0;
  char *buf = cli_malloc(cap);
  size_t n;
  while ((n = fread(buf + size, 1, cap - size, f)) > 0) {
    size += n;
    if (size == cap) {
      cap *= 2;
      buf = must_alloc(realloc(buf, cap), 1, cap);
    }
  }
  if (ferror(f)) {
    free(buf);
    return NULL;
  }
  *out_size = size;
  return buf;
}

/* Reads a whole file ('-' for stdin). NULL with errno set on failure. */
char *cli_read_file(const char *path, size_t *out_size) {
  if (strcmp(path, "-") == 0) return read_stream(stdin, out_size);
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *text = read_stream(f, out_size);
  int err = errno;
  fclose(f);
  errno = err;
  return text;
}

/* Parses (and optionally verifies) a .tsr file; '-' reads stdin, named
 * "<stdin>" in diagnostics. */
tsr_status_t cli_load_module(const char *path, bool verify,
                             tsr_ir_module_t **out_module) {
  if (strcmp(path, "-") != 0) {
    if (verify) return tsr_runtime_load_file(path, out_module);
    return tsr_ir_module_parse_file(path, out_module);
  }
  size_t size = 0;
  char *text = cli_read_file(path, &size);
  if (!text)
    return TSR_STATUS(TSR_IO_ERROR, "<stdin>: read error: %s", strerror(errno));
  tsr_ir_module_t *module = NULL;
  tsr_status_t status = tsr_ir_module_parse(TSR_SV("<stdin>"),
                                            (tsr_string_view_t){text, size},
                                            &module);
  free(text);
  if (!status && verify) {
    status = tsr_ir_module_verify(module);
    if (status) tsr_ir_module_destroy(module);
  }
  if (!status) *out_module = module;
  return status;
}

bool cli_is_dir(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

bool cli_file_exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

/* mkdir -p. *out_created is the length of the shortest prefix of `path`
 * that this call created (0 if it created nothing). */
bool cli_make_dirs(const char *path, size_t *out_created) {
  size_t len = strlen(path);
  char *p = cli_strndup(path, len);
  *out_created = 0;
  for (size_t i = 1; i <= len; i++) {
    if (p[i] != '/' && p[i] != 0) continue;
    char saved = p[i];
    p[i] = 0;
    if (!cli_is_dir(p)) {
      if (mkdir(p, 0777) == 0) {
        if (!*out_created) *out_created = i;
      } else if (errno != EEXIST) {
        free(p);
        return false;
      }
    }
    p[i] = saved;
  }
  free(p);
  return cli_is_dir(path);
}

/* Undoes cli_make_dirs: removes `path` and its parents down to the prefix of
 * length `created`, each only if it is empty. */
void cli_remove_made_dirs(const char *path, size_t created) {
  if (!created) return;
  char *p = cli_strndup(path, strlen(path));
  for (;;) {
    (void)rmdir(p);
    char *slash = strrchr(p, '/');
    if (!slash || (size_t)(slash - p) < created) break;
    *slash = 0;
  }
  free(p);
}

char *cli_join_path(const char *dir, const char *name, const char *ext) {
  size_t len = strlen(dir) + strlen(name) + strlen(ext) + 2;
  char *p = cli_malloc(len);
  size_t dl = strlen(dir);
  snprintf(p, len, "%s%s%s%s", dir, dl && dir[dl - 1] == '/' ? "" : "/", name,
           ext);
  return p;
}

/* ---- Option parsing ---------------------------------------------------------
 * A small parser: "--name value", "--name=value", "-x value", "-xvalue",
 * "--" ends the options; options and positional arguments may mix. */

int cli_next_arg(cli_arg_iter_t *it, const cli_option_t *options,
                 const char **out_value) {
  *out_value = NULL;
  if (it->next >= it->argc) return CLI_ARG_END;
  const char *arg = it->argv[it->next++];
  if (it->positional_only || arg[0] != '-' || arg[1] == 0) {
    *out_value = arg;
    return CLI_ARG_POSITIONAL;
  }
  if (strcmp(arg, "--") == 0) {
    it->positional_only = true;
    return cli_next_arg(it, options, out_value);
  }
  const cli_option_t *opt = NULL;
  const char *inline_value = NULL;
  if (arg[1] == '-') {
    const char *name = arg + 2;
    const char *eq = strchr(name, '=');
    size_t len = eq ? (size_t)(eq - name) : strlen(name);
    for (const cli_option_t *o = options; o->name; o++)
      if (strlen(o->name) == len && strncmp(o->name, name, len) == 0) opt = o;
    if (!opt) {
      cli_usage_error(it->cmd, "unknown option '--%.*s'", (int)len, name);
      return CLI_ARG_ERROR;
    }
    if (eq) {
      if (!opt->takes_value) {
        cli_usage_error(it->cmd, "option '--%s' takes no value", opt->name);
        return CLI_ARG_ERROR;
      }
      inline_value = eq + 1;
    }
  } else {
    for (const cli_option_t *o = options; o->name; o++)
      if (o->short_name && o->short_name == arg[1]) opt = o;
    if (!opt) {
      cli_usage_error(it->cmd, "unknown option '%s'", arg);
      return CLI_ARG_ERROR;
    }
    if (arg[2]) {
      if (!opt->takes_value) {
        cli_usage_error(it->cmd, "unknown option '%s' (options are not combined)",
                        arg);
        return CLI_ARG_ERROR;
      }
      inline_value = arg + 2;
    }
  }
  if (opt->takes_value) {
    if (!inline_value) {
      if (it->next >= it->argc) {
        cli_usage_error(it->cmd, "option '--%s' needs a value", opt->name);
        return CLI_ARG_ERROR;
      }
      inline_value = it->argv[it->next++];
    }
    *out_value = inline_value;
  }
  return opt->id;
}

