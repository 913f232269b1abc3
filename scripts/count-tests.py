#!/usr/bin/env python3
"""Totals of meson test runs, read from BUILD/meson-logs/testlog.json.

Usage: count-tests.py [--extra-failure TEXT]... BUILD_DIR...
       count-tests.py --list-built|--list-unbuilt BUILD_DIR [SUITE]
       count-tests.py --list-suite-outputs BUILD_DIR SUITE

The second form lists the tests (of SUITE, if given) whose programs exist (or
do not), so that a partly failed build can still run the tests it has. The
third lists the files, relative to BUILD_DIR, that the tests of SUITE need
built (their programs and the targets they depend on), so that a build
directory can build just one suite: `ninja -C BUILD_DIR FILE...`.

Tests that speak TAP (protocol 'tap' in BUILD/meson-info/intro-tests.json)
count one result per 'ok' / 'not ok' line of their stdout: '# SKIP' lines are
skips, 'not ok ... # TODO' is an expected failure (counted as passed). A TAP
test that meson saw fail without any 'not ok' line (it crashed, timed out,
stopped short of its plan, or a sanitizer failed it at exit) adds one failure;
planned cases that never reported add one failure each. Other tests count
once, by meson's result. Skips count as neither passed nor failed.

The last line printed is exactly "N passed, N failed"; the exit status is 1
if anything failed. Standard library only.
"""

import json
import os
import re
import sys

TAP_RESULT = re.compile(r"^(not ok|ok)\b(.*)$")
TAP_PLAN = re.compile(r"^1\.\.(\d+)")
DIRECTIVE = re.compile(r"#\s*(SKIP|TODO)\b", re.IGNORECASE)

GOOD = {"OK", "EXPECTEDFAIL"}
SKIPPED = {"SKIP"}


def load_tests(build_dir):
    """The tests meson knows (BUILD/meson-info/intro-tests.json), or None."""
    path = os.path.join(build_dir, "meson-info", "intro-tests.json")
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def load_protocols(build_dir):
    """Maps test names and commands to their protocol."""
    by_name, by_cmd = {}, {}
    for t in load_tests(build_dir) or []:
        protocol = t.get("protocol", "exitcode")
        by_cmd[json.dumps(t.get("cmd"))] = protocol
        by_name.setdefault(t.get("name"), set()).add(protocol)
    return by_name, by_cmd


def protocol_of(entry, by_name, by_cmd):
    cmd = json.dumps(entry.get("command"))
    if cmd in by_cmd:
        return by_cmd[cmd]
    # meson names tests "project:suite / name" when there are several suites
    name = entry.get("name", "").rsplit(" / ", 1)[-1]
    protocols = by_name.get(name, set())
    if len(protocols) == 1:
        return next(iter(protocols))
    return "exitcode"


def count_tap(stdout, result):
    passed = failed = skipped = 0
    plan = None
    seen = 0
    for line in stdout.splitlines():
        line = line.rstrip()
        m = TAP_PLAN.match(line)
        if m:
            plan = int(m.group(1))
            if plan == 0 and DIRECTIVE.search(line):
                skipped += 1
            continue
        m = TAP_RESULT.match(line)
        if not m:
            continue
        seen += 1
        ok = m.group(1) == "ok"
        d = DIRECTIVE.search(m.group(2))
        directive = d.group(1).upper() if d else None
        if directive == "SKIP":
            skipped += 1
        elif directive == "TODO":
            if ok:
                failed += 1  # an unexpected pass, as meson counts it
            else:
                passed += 1
        elif ok:
            passed += 1
        else:
            failed += 1
    if plan is not None and plan > seen:
        failed += plan - seen
    if result not in GOOD and result not in SKIPPED and failed == 0:
        failed += 1
    return passed, failed, skipped


def count_dir(build_dir):
    """Returns (passed, failed, skipped, failing test descriptions)."""
    log = os.path.join(build_dir, "meson-logs", "testlog.json")
    if not os.path.exists(log):
        return 0, 1, 0, [f"{build_dir}: no test log (the suite did not run)"]
    by_name, by_cmd = load_protocols(build_dir)
    passed = failed = skipped = 0
    failing = []
    with open(log, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                entry = json.loads(line)
            except ValueError:
                failed += 1
                failing.append(f"{build_dir}: unreadable test log line")
                continue
            result = entry.get("result", "ERROR")
            name = entry.get("name", "?")
            if protocol_of(entry, by_name, by_cmd) == "tap":
                p, fl, s = count_tap(entry.get("stdout") or "", result)
            elif result in GOOD:
                p, fl, s = 1, 0, 0
            elif result in SKIPPED:
                p, fl, s = 0, 0, 1
            else:
                p, fl, s = 0, 1, 0
            passed += p
            failed += fl
            skipped += s
            if fl:
                failing.append(f"{build_dir}: {name}: {fl} failed ({result})")
    return passed, failed, skipped, failing


def in_suite(test, suite):
    """Whether a test is in SUITE (meson records it as 'project:suite')."""
    if suite is None:
        return True
    return any(s == suite or s.endswith(":" + suite)
               for s in test.get("suite") or [])


def list_tests(build_dir, built, suite=None):
    """Prints the names of the tests (of `suite`) whose program was (not)
    built."""
    tests = load_tests(build_dir)
    if tests is None:
        return 1
    for t in tests:
        cmd = t.get("cmd") or [""]
        if in_suite(t, suite) and os.path.exists(cmd[0]) == built:
            print(t.get("name"))
    return 0


def list_suite_outputs(build_dir, suite):
    """Prints the build-relative files the tests of `suite` need: the outputs
    of the targets they depend on and their programs if built here."""
    tests = load_tests(build_dir)
    try:
        path = os.path.join(build_dir, "meson-info", "intro-targets.json")
        with open(path, encoding="utf-8") as f:
            targets = {t.get("id"): t for t in json.load(f)}
    except (OSError, ValueError):
        targets = None
    if tests is None or targets is None:
        return 1
    root = os.path.realpath(build_dir)
    outputs = []

    def add(filename):
        rel = os.path.relpath(os.path.realpath(filename), root)
        if not rel.startswith(os.pardir) and rel not in outputs:
            outputs.append(rel)

    for t in tests:
        if not in_suite(t, suite):
            continue
        for dep in t.get("depends") or []:
            for filename in targets.get(dep, {}).get("filename") or []:
                add(filename)
        cmd = t.get("cmd") or []
        if cmd:
            add(cmd[0])
    for rel in outputs:
        print(rel)
    return 0 if outputs else 1


def main(argv):
    extra = []
    dirs = []
    if len(argv) in (2, 3) and argv[0] in ("--list-built", "--list-unbuilt"):
        return list_tests(argv[1], argv[0] == "--list-built",
                          argv[2] if len(argv) == 3 else None)
    if len(argv) == 3 and argv[0] == "--list-suite-outputs":
        return list_suite_outputs(argv[1], argv[2])
    args = iter(argv)
    for a in args:
        if a == "--extra-failure":
            extra.append(next(args, "unknown failure"))
        elif a in ("-h", "--help"):
            print(__doc__.strip())
            return 0
        else:
            dirs.append(a)
    total_passed = total_failed = total_skipped = 0
    failing = []
    for d in dirs:
        p, fl, s, why = count_dir(d)
        print(f"{d}: {p} passed, {fl} failed, {s} skipped")
        total_passed += p
        total_failed += fl
        total_skipped += s
        failing += why
    for e in extra:
        failing.append(e)
        total_failed += 1
    for why in failing:
        print(f"FAILED: {why}")
    print(f"skipped: {total_skipped}")
    print(f"{total_passed} passed, {total_failed} failed")
    return 1 if total_failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
