#!/usr/bin/env python3
"""Op coverage from the op table, in TAP: every op `tessera ops` lists (one
case each) is used by
  golden        a kernel of tests/ir/ok/ (the print/parse round trip of
                tests/unit/test_golden.c),
  differential  a fixed kernel of the interpreter-vs-CPU differential test
                (DIFFERENTIAL_CORPUS of tests/oplist.py), and
  random        the random kernels that test runs (tests/lower/random_kernels.py
                with the same count and seed),
unless EXCEPTIONS says why it cannot be; an exception for an op not in the
table, or for an op now covered there, fails too. A row added to ir/ops.def
without kernels that use it fails here, by name.

    test_op_coverage.py [RANDOM_COUNT [SEED]]   (default 200 1, as meson runs
                                                 test_differential)
Needs $TESSERA and $TSR_SOURCE_ROOT.
"""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oplist  # noqa: E402

PLACES = ["golden", "differential", "random"]

# The one list of ops that cannot be in one of PLACES: (op, place) -> why.
EXCEPTIONS = {
    ("core_barrier", "random"):
        "all cores of a device must reach it equally often, and the random kernels "
        "run on 2 and 3 cores with grids that do not split evenly",
}


def used_in(files, names):
    used = {}
    for path in files:
        with open(path) as f:
            for op in oplist.used_ops(f.read(), names):
                used.setdefault(op, path)
    return used


def main():
    tessera = os.environ.get("TESSERA")
    src = os.environ.get("TSR_SOURCE_ROOT")
    if not tessera or not src:
        print("1..0 # SKIP needs $TESSERA and $TSR_SOURCE_ROOT")
        return 0
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    table = oplist.ops(tessera)
    names = {op["mnemonic"] for op in table}

    with tempfile.TemporaryDirectory(prefix="tessera-cover-") as tmp:
        gen = subprocess.run(
            [sys.executable, os.path.join(src, "tests", "lower", "random_kernels.py"),
             "--count", str(count), "--seed", str(seed), "--out", tmp, "--tessera", tessera],
            capture_output=True, text=True)
        random_files = oplist.corpus(tmp, ["*.tsr"])
        used = {
            "golden": used_in(oplist.corpus(src, oplist.GOLDEN_OK), names),
            "differential": used_in(oplist.corpus(src, oplist.DIFFERENTIAL_CORPUS), names),
            "random": used_in(random_files, names),
        }

    n = 0
    failed = 0

    def case(ok, desc, why=""):
        nonlocal n, failed
        n += 1
        failed += not ok
        print("%s %d - %s" % ("ok" if ok else "not ok", n, desc))
        for line in why.splitlines() if not ok else []:
            print("#   " + line)

    case(gen.returncode == 0, "random_kernels.py --count %d --seed %d" % (count, seed),
         gen.stderr[-1500:])
    for op in table:
        m = op["mnemonic"]
        missing = [p for p in PLACES if m not in used[p] and (m, p) not in EXCEPTIONS]
        stale = [p for p in PLACES if m in used[p] and (m, p) in EXCEPTIONS]
        why = ["no kernel uses it in: %s" % ", ".join(missing)] if missing else []
        why += ["an exception says it cannot be in %s, but %s uses it: remove the exception"
                % (p, os.path.relpath(used[p][m], src) if p != "random" else "a random kernel")
                for p in stale]
        places = [p if (m, p) not in EXCEPTIONS else "not " + p for p in PLACES]
        case(not why, "op %s: %s" % (m, ", ".join(places)), "\n".join(why))
    for (m, p), reason in EXCEPTIONS.items():
        why = []
        if m not in names:
            why.append("no op '%s' in `tessera ops`" % m)
        if p not in PLACES:
            why.append("no place '%s' (one of %s)" % (p, ", ".join(PLACES)))
        case(not why, "exception: %s not in %s (%s)" % (m, p, reason), "\n".join(why))
    print("1..%d" % n)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
