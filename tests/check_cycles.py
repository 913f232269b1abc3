#!/usr/bin/env python3
"""No call cycles between files: the layering of docs/architecture.md, checked.

Each directory's internal header states the order in which its files may
call each other (a file calls only files below it), and directories call
only the layers below them. This check reads the object files of
libtessera.a (or any objects and archives given) with nm, builds the graph
"file A calls a function defined in file B" from A's undefined references
and B's defined functions, and fails, naming a cycle A -> B -> ... -> A,
when a strongly connected component of that graph holds more than one file.

A cycle listed in ALLOWED (as its exact set of files) does not fail the
check; a listed cycle that no longer exists does, so that the list cannot
outlive what it excuses. tests/test_check_cycles.py shows the check failing
on objects compiled with a cycle.

Usage: check_cycles.py [--nm NM] [--source-root DIR] [--allow FILE,FILE...]...
                       OBJECT|ARCHIVE...
  --nm NM      the nm to run (default: nm)
  --source-root DIR  where object names are looked up as source paths
               (default: $TSR_SOURCE_ROOT, else this file's parent directory)
  --allow F,G  a cycle that may exist, by its files; given once or more, it
               replaces ALLOWED ("--allow none": no cycle may exist)
TAP on stdout; exit status 1 when a test point fails."""
import argparse
import os
import re
import subprocess
import sys

# Cycles that may exist for now, each the exact set of its files. Keep this
# list short: a cycle is fixed by moving functions along the layering the
# directory's internal header states, not by listing it here.
ALLOWED: list[tuple[str, ...]] = []

# Defined function symbols in nm's POSIX output: text, weak, indirect.
FUNCTION_TYPES = set("TWi")


def display_name(obj, root):
    """A source path for an object's name where one can be found.

    meson names an object after its source's path from the target's
    directory, with '/' turned into '_' (runtime_target.c.o is
    runtime/target.c): the first '_' that gives an existing file is taken.
    Other objects keep their name, less ".o"."""
    base = os.path.basename(obj)
    if base.endswith(".o"):
        base = base[:-2]
    for i, c in enumerate(base):
        if c == "_":
            candidate = base[:i] + "/" + base[i + 1:]
            if os.path.isfile(os.path.join(root, candidate)):
                return candidate
    return base


def read_symbols(nm, paths, root):
    """{file: set of defined functions}, {file: set of undefined symbols}.
    Two objects read as one file would hide the calls between them: an
    error."""
    defined, undefined, origin, globals_of = {}, {}, {}, {}
    current = None  # nm lists an object's symbols together: a file seen again is another
    p = subprocess.run([nm, "-A", "-P"] + list(paths), capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{nm}: exit status {p.returncode}: {p.stderr.strip()}")
    for line in p.stdout.splitlines():
        # "ARCHIVE[MEMBER]: NAME TYPE [VALUE SIZE]" or "OBJECT: NAME TYPE ..."
        m = re.match(r"^(.*?)(?:\[([^\]]*)\])?: (\S+) (\S)(?: |$)", line)
        if not m:
            continue
        container, member, name, kind = m.groups()
        f = display_name(member if member is not None else container, root)
        # A global name twice in one file: two members of one name in an archive.
        twice = kind.isupper() and name in globals_of.setdefault(f, set())
        if twice or f != current and f in origin or origin.setdefault(
                f, (container, member)) != (container, member):
            raise RuntimeError(f"two objects are both {f} (in {container})")
        if kind.isupper():
            globals_of[f].add(name)
        current = f
        defined.setdefault(f, set())
        undefined.setdefault(f, set())
        if kind == "U":
            undefined[f].add(name)
        elif kind in FUNCTION_TYPES:
            defined[f].add(name)
    return defined, undefined


def call_graph(defined, undefined):
    """{file: {callee file: a function it calls there}}. A function defined
    in several files (a weak definition and its override) names no callee."""
    owner = {}
    for f, names in defined.items():
        for name in names:
            owner[name] = None if name in owner else f
    graph = {f: {} for f in defined}
    for f, names in undefined.items():
        for name in sorted(names):
            g = owner.get(name)
            if g is not None and g != f:
                graph[f].setdefault(g, name)
    return graph


def components(graph):
    """Strongly connected components (Tarjan's algorithm, iterative)."""
    index, low, on_stack, stack, result = {}, {}, set(), [], []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            advanced = False
            for w in children:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    advanced = True
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                result.append(sorted(comp))
    return result


def shortest_cycle(graph, comp):
    """A shortest cycle through the component's first file: the list of its
    files, starting and ending with that file."""
    start, members = comp[0], set(comp)
    previous = {start: None}
    queue = [start]
    for v in queue:
        for w in sorted(graph[v]):
            if w == start:
                path = []
                while v is not None:
                    path.append(v)
                    v = previous[v]
                return path[::-1] + [start]
            if w in members and w not in previous:
                previous[w] = v
                queue.append(w)
    raise AssertionError("a strongly connected component without a cycle")


def describe(graph, comp):
    cycle = shortest_cycle(graph, comp)
    lines = ["cycle: " + " -> ".join(cycle)]
    for a, b in zip(cycle, cycle[1:]):
        lines.append(f"  {a} calls {graph[a][b]} ({b})")
    if len(comp) > len(cycle) - 1:
        lines.append("  the component's files: " + ", ".join(comp))
    return lines


def main(argv=None):
    ap = argparse.ArgumentParser(add_help=True)
    ap.add_argument("--nm", default="nm")
    ap.add_argument("--source-root", default=os.environ.get(
        "TSR_SOURCE_ROOT", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")))
    ap.add_argument("--allow", action="append")
    ap.add_argument("objects", nargs="+")
    args = ap.parse_args(argv)
    allowed = ALLOWED
    if args.allow is not None:
        allowed = [tuple(a.split(",")) for a in args.allow if a != "none"]

    checks = []  # (description, ok, detail lines)
    try:
        defined, undefined = read_symbols(args.nm, args.objects, args.source_root)
        read_error = None
    except (RuntimeError, OSError) as e:
        defined, undefined, read_error = {}, {}, str(e)
    graph = call_graph(defined, undefined)
    calls = sum(len(v) for v in graph.values())
    checks.append((f"read {len(defined)} files, {calls} calls between files",
                   read_error is None and len(defined) > 1,
                   [read_error or "fewer than two object files read"]))

    cyclic = [c for c in components(graph) if len(c) > 1]
    allowed_sets = {frozenset(a): a for a in allowed}
    found = {frozenset(c) for c in cyclic}
    bad = [c for c in cyclic if frozenset(c) not in allowed_sets]
    detail = []
    for c in bad:
        detail += describe(graph, c)
    detail.append("fix: move functions along the layering the directory's internal "
                  "header states (a file calls only files below it)")
    checks.append(("no call cycle between files" +
                   (f" (besides {len(cyclic) - len(bad)} allowed)" if len(cyclic) > len(bad) else ""),
                   not bad, detail))
    for a in allowed:
        grown = [c for c in cyclic if frozenset(a) < frozenset(c)]
        why = (f"it grew: its files are now {', '.join(grown[0])}" if grown else
               "it is gone: remove it from the list")
        checks.append((f"the allowed cycle {', '.join(a)} still exists (ALLOWED in "
                       f"tests/check_cycles.py)", frozenset(a) in found,
                       [f"no cycle has exactly the files {', '.join(a)}: {why}"]))

    print(f"1..{len(checks)}")
    for i, (what, ok, lines) in enumerate(checks, 1):
        print(f"{'ok' if ok else 'not ok'} {i} - {what}")
        if not ok:
            for line in lines:
                print("# " + line)
    return 0 if all(ok for _, ok, _ in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
