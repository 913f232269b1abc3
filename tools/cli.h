/* Commands of the tessera CLI that live in files of their own
 * (tools/cmd_*.c), for tools/tessera.c's command table. Each takes argv
 * starting at its own name ("cache") and returns the exit status: 0 success,
 * 1 failure, 2 usage error (docs/cli.md). */
#ifndef TESSERA_TOOLS_CLI_H
#define TESSERA_TOOLS_CLI_H

#include <stddef.h>
#include <stdint.h>

/* tessera cache stats|clear|verify (docs/cache.md, "Command line"). */
int tsr_cli_cache(int argc, char **argv);
extern const char tsr_cli_cache_help[];

/* "512 B", "3.4 KiB", "12.0 MiB", "1.50 GiB" (tools/tessera.c). */
void tsr_cli_format_bytes(char *buf, size_t size, uint64_t bytes);

#endif /* TESSERA_TOOLS_CLI_H */
