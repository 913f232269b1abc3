"""The op table as tests see it: what `tessera ops` lists (ir/ops.def), and
which op mnemonics a .tsr file uses. Shared by tests/test_op_coverage.py and
tests/lower/random_kernels.py, so that no test keeps its own list of ops.

    ops(tessera) -> [{"mnemonic", "syntax", "rule", "family", "flags",
                      "synopsis", ...}, ...]

from `tessera ops --json`, in table order; "syntax", "rule" and "family" are
upper case ("UNARY", "ELEMWISE"), "flags" a set of lower-case names as
`tessera ops` prints them ("pure", "float", "int", "bool", ...).

    python3 tests/oplist.py corpus SRC   prints the differential test's fixed
                                         kernels (test_differential.sh)
"""
import glob
import json
import os
import re
import subprocess
import sys

# The fixed kernels of the interpreter-vs-CPU differential test
# (tests/lower/test_differential.sh reads them from here), relative to the
# source root.
DIFFERENTIAL_CORPUS = ["kernels/**/*.tsr", "tests/diagnostics/ok/*.tsr", "tests/lower/*.tsr"]

# The golden print/parse round trip kernels (tests/unit/test_golden.c).
GOLDEN_OK = ["tests/ir/ok/*.tsr"]

_FLAG_ALIASES = {"flt": "float", "side_effect": "side-effect", "map_ok": "map"}


def _norm_flag(name):
    name = name.lower()
    if name.startswith("tsr_f_"):
        name = name[len("tsr_f_"):]
    return _FLAG_ALIASES.get(name, name)


def _norm_word(value, prefix):
    value = str(value).upper()
    return value[len(prefix):] if value.startswith(prefix) else value


def _normalize(row):
    flags = row.get("flags", [])
    if isinstance(flags, str):
        flags = flags.replace("|", " ").split()
    out = dict(row)
    out["syntax"] = _norm_word(row.get("syntax", ""), "TSR_SYN_")
    out["rule"] = _norm_word(row.get("rule", ""), "TSR_RULE_")
    out["family"] = _norm_word(row.get("family", ""), "TSR_FAM_")
    out["flags"] = {_norm_flag(f) for f in flags}
    return out


def ops(tessera):
    """The op table from `tessera ops --json`."""
    p = subprocess.run([tessera, "ops", "--json"], capture_output=True, text=True, check=True)
    return [_normalize(r) for r in json.loads(p.stdout)]


# An op in a .tsr line: the first word of a statement, after its results if
# any ("%a, %b = for ...", "store ...", "} do {" has none).
_OP_AT = re.compile(r"^\s*(?:%[\w.]+\s*(?:,\s*%[\w.]+\s*)*=\s*)?([a-z_][a-z0-9_]*)\b")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')


def used_ops(text, mnemonics):
    """The mnemonics of `mnemonics` that the .tsr text uses as ops (comments,
    strings and header keywords do not count)."""
    found = set()
    for line in text.splitlines():
        line = _STRING.sub('""', line).split("//", 1)[0]
        m = _OP_AT.match(line)
        if m and m.group(1) in mnemonics:
            found.add(m.group(1))
    return found


def corpus(src, patterns):
    """The files matching `patterns` under the source root, sorted."""
    files = set()
    for pat in patterns:
        files.update(glob.glob(os.path.join(src, pat), recursive=True))
    return sorted(files)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "corpus":
        for path in corpus(sys.argv[2], DIFFERENTIAL_CORPUS):
            print(path)
        sys.exit(0)
    sys.stderr.write("usage: oplist.py corpus SRC\n")
    sys.exit(2)
