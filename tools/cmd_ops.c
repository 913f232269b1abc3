/* tessera ops: lists the ops of the kernel IR from the op table
 * (ir/ops.def), as text, as the markdown table of docs/ir.md, or as JSON for
 * programs (one object per op, its fields from one table below). */
#include <ctype.h>
#include <stddef.h>
#include <string.h>

#include "tools/cli.h"

const char cmd_ops_help[] =
    "Usage: tessera ops [--markdown | --json]\n"
    "\n"
    "Lists every op of the kernel IR from the op table (ir/ops.def): its\n"
    "mnemonic, flags and synopsis.\n"
    "\n"
    "Options:\n"
    "  --markdown   print a markdown table: the generated block of docs/ir.md\n"
    "               (between the GENERATED OP TABLE markers)\n"
    "  --json       print a JSON array with one object per op, in table order:\n"
    "               mnemonic, syntax, rule and family (the SYNTAX, RULE and\n"
    "               FAMILY columns, lower case), min_operands, max_operands\n"
    "               (-1: variadic),\n"
    "               results (-1: as many as the op declares), regions, flags\n"
    "               and effects (lists of the names below), tpu (\"emit\", or\n"
    "               \"refuse: WHY\" for an op the Mosaic TPU emitter never\n"
    "               emits) and synopsis\n"
    "  -h, --help   show this help\n"
    "\n"
    "Flags: pure (no effect but reading its operands; derived from the\n"
    "effects), control (holds regions), terminator, map (allowed in index\n"
    "maps), forward (may compute its result into the store after it),\n"
    "reserved (parsed, not yet executable), and the element classes an\n"
    "elementwise op accepts (float, int, bool).\n"
    "Effects, what the op does through each operand role: value (reads\n"
    "values), ref-read, ref-write (memory through a ref), index (dynamic\n"
    "index starts, masks), sem-signal, sem-wait (may block), sem-read,\n"
    "remote (device/core operands), output (print, assert).\n"
    "\n"
    "Examples:\n"
    "  tessera ops\n"
    "  tessera ops --markdown\n"
    "  tessera ops --json\n";

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

/* ---- --json ------------------------------------------------------------------ */

/* What --json prints of an op: its row of the table and its flag names. */
typedef struct op_row {
  tsr_ir_op_info_t info;
  char flags[256]; /* space-separated, as tsr_ir_op_flag_names writes them */
  char effects[256]; /* ... tsr_ir_op_effect_names */
  char tpu[512];     /* "emit" or "refuse: WHY" (info.tpu_refusal) */
} op_row_t;

typedef enum { FIELD_TEXT, FIELD_NAME, FIELD_INT, FIELD_WORDS, FIELD_CHARS } field_kind_t;

/* The fields of each op's object, in order: adding one is one line here
 * (and, for a new column of the table, one member of tsr_ir_op_info_t). */
static const struct {
  const char *key;
  field_kind_t kind; /* TEXT: a string; NAME: a string in lower case; INT: an
                        int32_t; WORDS: a list of the space-separated words;
                        CHARS: a string held in the row */
  size_t offset;     /* in op_row_t */
} json_fields[] = {
    {"mnemonic", FIELD_TEXT, offsetof(op_row_t, info.mnemonic)},
    {"syntax", FIELD_NAME, offsetof(op_row_t, info.syntax)},
    {"rule", FIELD_NAME, offsetof(op_row_t, info.rule)},
    {"family", FIELD_NAME, offsetof(op_row_t, info.family)},
    {"min_operands", FIELD_INT, offsetof(op_row_t, info.min_operands)},
    {"max_operands", FIELD_INT, offsetof(op_row_t, info.max_operands)},
    {"results", FIELD_INT, offsetof(op_row_t, info.num_results)},
    {"regions", FIELD_INT, offsetof(op_row_t, info.num_regions)},
    {"flags", FIELD_WORDS, offsetof(op_row_t, flags)},
    {"effects", FIELD_WORDS, offsetof(op_row_t, effects)},
    {"tpu", FIELD_CHARS, offsetof(op_row_t, tpu)},
    {"synopsis", FIELD_TEXT, offsetof(op_row_t, info.synopsis)},
};

/* n bytes of s as a JSON string (lower case with `lower`). */
static void put_json_string(const char *s, size_t n, bool lower) {
  fputc('"', stdout);
  for (const char *end = s + n; s < end; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') printf("\\%c", c);
    else if (c < 0x20) printf("\\u%04x", c);
    else fputc(lower ? tolower(c) : c, stdout);
  }
  fputc('"', stdout);
}

/* "a b c" as ["a", "b", "c"]. */
static void put_json_words(const char *s) {
  fputc('[', stdout);
  for (bool first = true; *s;) {
    size_t n = strcspn(s, " ");
    if (n) {
      if (!first) fputs(", ", stdout);
      put_json_string(s, n, false);
      first = false;
    }
    s += n + (s[n] == ' ');
  }
  fputc(']', stdout);
}

static void print_json(size_t count) {
  puts("[");
  for (size_t op = 0; op < count; op++) {
    op_row_t row;
    tsr_ir_op_info(op, &row.info);
    tsr_ir_op_flag_names(op, row.flags, sizeof row.flags);
    tsr_ir_op_effect_names(op, row.effects, sizeof row.effects);
    if (row.info.tpu_refusal)
      snprintf(row.tpu, sizeof row.tpu, "refuse: %s", row.info.tpu_refusal);
    else
      snprintf(row.tpu, sizeof row.tpu, "emit");
    fputs("  {", stdout);
    for (size_t f = 0; f < sizeof json_fields / sizeof json_fields[0]; f++) {
      const char *at = (const char *)&row + json_fields[f].offset;
      printf("%s\"%s\": ", f ? ", " : "", json_fields[f].key);
      switch (json_fields[f].kind) {
      case FIELD_TEXT:
      case FIELD_NAME: {
        const char *text = *(const char *const *)(const void *)at;
        put_json_string(text, strlen(text), json_fields[f].kind == FIELD_NAME);
        break;
      }
      case FIELD_INT:
        printf("%d", (int)*(const int32_t *)(const void *)at);
        break;
      case FIELD_WORDS:
        put_json_words(at);
        break;
      case FIELD_CHARS:
        put_json_string(at, strlen(at), false);
        break;
      }
    }
    fputs(op + 1 < count ? "},\n" : "}\n", stdout);
  }
  puts("]");
}

int cmd_ops(int argc, char **argv) {
  enum { OPS_HELP, OPS_MARKDOWN, OPS_JSON };
  static const cli_option_t options[] = {
      {"help", 'h', false, OPS_HELP},
      {"markdown", 0, false, OPS_MARKDOWN},
      {"json", 0, false, OPS_JSON},
      {NULL, 0, false, 0},
  };
  bool markdown = false, json = false;
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
    if (id == OPS_JSON) json = true;
    if (id == CLI_ARG_POSITIONAL)
      return cli_usage_error("ops", "unexpected argument '%s'", value);
  }
  if (markdown && json)
    return cli_usage_error("ops", "--markdown and --json exclude each other");
  size_t count = tsr_ir_op_count();
  char flags[256];
  if (json) {
    print_json(count);
  } else if (markdown) {
    puts("| op | syntax | flags | effects | meaning |");
    puts("|---|---|---|---|---|");
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
      tsr_ir_op_effect_names(op, flags, sizeof flags);
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
