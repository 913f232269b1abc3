#!/usr/bin/env python3
"""tests/check_cycles.py fails when it should: on objects compiled here.

Small C files whose functions call each other in known ways are compiled
with the build's C compiler, and the check is run on their objects (and on
archives of some): it passes without a cycle, fails naming a cycle of two
and of three files (A -> B -> ... -> A), passes with that cycle allowed,
fails when an allowed cycle is gone or has grown, and fails when two objects
of one name would merge into one file of the graph.

Usage: test_check_cycles.py NM CC [CC ARGS...]  (TAP on stdout)."""
import contextlib
import io
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_cycles  # noqa: E402  (tests/check_cycles.py, beside this file)

NM = sys.argv[1] if len(sys.argv) > 1 else "nm"
CC = sys.argv[2:] or ["cc"]

# object -> the functions of other files it calls; each object defines the
# function named after its file (grown/b: b with one more call).
SOURCES = {
    "a": ["b"], "b": ["a"], "c": ["a"],  # a <-> b, c outside the cycle
    "x": ["y"], "y": ["z"], "z": ["x"],  # x -> y -> z -> x
    "p": ["q"], "q": [],                 # no cycle
    "d": ["a"], "grown/b": ["a", "d"],   # with a: a <-> b grown to a, b, d
}


def write_objects(tmp):
    """name.c.o for each of SOURCES (one compiler run per directory), xyz.a
    holding x, y and z, and twice.a."""
    os.mkdir(os.path.join(tmp, "grown"))
    by_dir = {}
    for name, calls in SOURCES.items():
        fn = os.path.basename(name)
        decls = "".join(f"void f_{c}(void);\n" for c in calls)
        body = "".join(f"  f_{c}();\n" for c in calls)
        with open(os.path.join(tmp, f"{name}.c"), "w") as f:
            f.write(f"{decls}void f_{fn}(void);\nvoid f_{fn}(void) {{\n{body}}}\n")
        by_dir.setdefault(os.path.join(tmp, os.path.dirname(name)), []).append(fn)
    for d, names in by_dir.items():
        subprocess.run(CC + ["-c"] + [f"{n}.c" for n in names], cwd=d, check=True)
        for n in names:
            os.rename(os.path.join(d, f"{n}.o"), os.path.join(d, f"{n}.c.o"))
    ar = shutil.which("ar") or "ar"
    subprocess.run([ar, "rcs", os.path.join(tmp, "xyz.a")] +
                   [os.path.join(tmp, f"{n}.c.o") for n in "xyz"], check=True)
    # two members named a.c.o (a and b), as two directories' a.c would give
    os.mkdir(os.path.join(tmp, "other"))
    shutil.copy(os.path.join(tmp, "b.c.o"), os.path.join(tmp, "other", "a.c.o"))
    subprocess.run([ar, "qc", os.path.join(tmp, "twice.a"), os.path.join(tmp, "a.c.o"),
                    os.path.join(tmp, "other", "a.c.o")], check=True)


def run(tmp, objects, allow):
    """The check's exit status and output on these objects (in this process:
    a Python start costs more than the check on a busy machine)."""
    args = ["--nm", NM, "--source-root", tmp]
    for a in allow:
        args += ["--allow", a]
    args += [os.path.join(tmp, o) for o in objects]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = check_cycles.main(args)
    return rc, out.getvalue()


def main():
    checks = []  # (description, ok, output)
    with tempfile.TemporaryDirectory() as tmp:
        write_objects(tmp)
        o = lambda names: [f"{n}.c.o" for n in names]

        rc, out = run(tmp, o("pq"), ["none"])
        checks.append(("no cycle: passes", rc == 0 and "not ok" not in out, out))

        rc, out = run(tmp, o("abc"), ["none"])
        checks.append(("a <-> b: fails naming a.c -> b.c -> a.c",
                       rc == 1 and "not ok 2 - no call cycle" in out and
                       "cycle: a.c -> b.c -> a.c" in out and "a.c calls f_b (b.c)" in out and
                       "c.c" not in out.split("cycle:")[1], out))

        rc, out = run(tmp, ["xyz.a"] + o("pq"), ["none"])
        checks.append(("x -> y -> z -> x, from an archive: fails naming the three files",
                       rc == 1 and "cycle: x.c -> y.c -> z.c -> x.c" in out, out))

        rc, out = run(tmp, o("abc"), ["a.c,b.c"])
        checks.append(("a <-> b allowed: passes",
                       rc == 0 and "not ok" not in out and "1 allowed" in out, out))

        rc, out = run(tmp, o("pq"), ["a.c,b.c"])
        checks.append(("a <-> b allowed but gone: fails naming it",
                       rc == 1 and "not ok 3 - the allowed cycle a.c, b.c still exists" in out and
                       "it is gone" in out, out))

        rc, out = run(tmp, o(["a", "grown/b", "d"]), ["a.c,b.c"])
        checks.append(("a <-> b allowed, grown to a, b, d: fails naming the larger cycle",
                       rc == 1 and "not ok 2 - no call cycle" in out and "d.c" in out and
                       "not ok 3 - the allowed cycle a.c, b.c" in out and
                       "it grew: its files are now a.c, b.c, d.c" in out, out))

        rc, out = run(tmp, o("abc"), [])
        checks.append(("without --allow, the built-in list (empty) is used: a <-> b fails",
                       rc == 1 and "not ok 2 - no call cycle" in out and
                       "cycle: a.c -> b.c -> a.c" in out, out))

        rc, out = run(tmp, ["twice.a", "c.c.o"], ["none"])
        checks.append(("two members of one name in an archive: fails (their calls would "
                       "merge)", rc == 1 and "not ok 1" in out and "two objects are both a.c" in out,
                       out))

        rc, out = run(tmp, ["missing.o"], ["none"])
        checks.append(("an unreadable object: fails", rc == 1 and "not ok 1" in out, out))

    print(f"1..{len(checks)}")
    for i, (what, ok, out) in enumerate(checks, 1):
        print(f"{'ok' if ok else 'not ok'} {i} - {what}")
        if not ok:
            for line in out.splitlines()[:30]:
                print("# " + line)
    return 0 if all(ok for _, ok, _ in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
