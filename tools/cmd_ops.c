/* tessera ops: lists the ops of the kernel IR from the op table
 * (ir/ops.def), as text or as the markdown table of docs/ir.md. */
#include <string.h>

#include "tools/cli.h"

const char cmd_ops_help[] =
    "Usage: tessera ops [--markdown]\n"
    "\n"
    "Lists every op of the kernel IR from the op table (ir/ops.def): its\n"
    "mnemonic, flags and synopsis.\n"
    "\n"
    "Options:\n"
    "  --markdown   print a markdown table: the generated block of docs/ir.md\n"
    "               (between the GENERATED OP TABLE markers)\n"
    "  -h, --help   show this help\n"
    "\n"
    "Flags: pure (no side effects), reads/writes (memory through a ref), map\n"
    "(allowed in index maps), control (holds regions), terminator, side-effect,\n"
    "dma, sync, barrier, reserved (parsed, not yet executable), and the element\n"
    "classes an elementwise op accepts (float, int, bool).\n"
    "\n"
    "Examples:\n"
    "  tessera ops\n"
    "  tessera ops --markdown\n";

/* Splits a synopsis "SYNTAX  -- meaning" into its two halves. */
static void split_synopsis(const char *synopsis, const char **syntax_end,
                           const char **meaning) {
  const char *sep = strstr(synopsis, "  -- ");
  if (sep) {
    *syntax_end = sep;
    *meaning = sep + 5;
  } else {
    *syntax_end = synopsis + strlen(synopsis);
    *meaning = "";
  }
}

/* Writes n bytes of text for a markdown table cell, '|' escaped. */
static void put_cell(const char *s, size_t n) {
  for (const char *end = s + n; s < end; s++) {
    if (*s == '|') fputc('\\', stdout);
    fputc(*s, stdout);
  }
}

int cmd_ops(int argc, char **argv) {
  enum { OPS_HELP, OPS_MARKDOWN };
  static const cli_option_t options[] = {
      {"help", 'h', false, OPS_HELP},
      {"markdown", 0, false, OPS_MARKDOWN},
      {NULL, 0, false, 0},
  };
  bool markdown = false;
  cli_arg_iter_t it = {"ops", argc, argv, 1, false};
  const char *value;
  int id;
  while ((id = cli_next_arg(&it, options, &value)) != CLI_ARG_END) {
    if (id == CLI_ARG_ERROR) return EXIT_USAGE;
    if (id == OPS_HELP) {
      fputs(cmd_ops_help, stdout);
      return EXIT_OK;
    }
    if (id == OPS_MARKDOWN) markdown = true;
    if (id == CLI_ARG_POSITIONAL)
      return cli_usage_error("ops", "unexpected argument '%s'", value);
  }
  size_t count = tsr_ir_op_count();
  char flags[256];
  if (markdown) {
    puts("| op | syntax | flags | meaning |");
    puts("|---|---|---|---|");
    for (size_t op = 0; op < count; op++) {
      const char *syntax_end, *meaning;
      const char *synopsis = tsr_ir_op_synopsis(op);
      split_synopsis(synopsis, &syntax_end, &meaning);
      fputs("| `", stdout);
      put_cell(tsr_ir_op_mnemonic(op), strlen(tsr_ir_op_mnemonic(op)));
      fputs("` | `", stdout);
      put_cell(synopsis, (size_t)(syntax_end - synopsis));
      fputs("` | ", stdout);
      tsr_ir_op_flag_names(op, flags, sizeof flags);
      put_cell(flags, strlen(flags));
      fputs(" | ", stdout);
      put_cell(meaning, strlen(meaning));
      fputs(" |\n", stdout);
    }
  } else {
    int mw = 2, fw = 5;
    for (size_t op = 0; op < count; op++) {
      int m = (int)strlen(tsr_ir_op_mnemonic(op));
      int f = (int)strlen(tsr_ir_op_flag_names(op, flags, sizeof flags));
      if (m > mw) mw = m;
      if (f > fw) fw = f;
    }
    printf("%-*s  %-*s  %s\n", mw, "op", fw, "flags", "synopsis");
    for (size_t op = 0; op < count; op++)
      printf("%-*s  %-*s  %s\n", mw, tsr_ir_op_mnemonic(op), fw,
             tsr_ir_op_flag_names(op, flags, sizeof flags),
             tsr_ir_op_synopsis(op));
  }
  return fflush(stdout) == 0 ? EXIT_OK : EXIT_KERNEL;
}
