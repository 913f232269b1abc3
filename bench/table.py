#!/usr/bin/env python3
"""One table of every figure of "Faster than XLA on every kernel, on every
core of the host", before and after, against its anchor, in one run.

    bench/table.sh [--quick] [--rounds N] [--only NAME ...] [--raw FILE]

"Before" is commit 4e5cdf6 (override with --before REV): a git worktree of it
under ${XDG_CACHE_HOME:-~/.cache}/tessera-bench/<hash>, outside the
repository's tree, built once with `meson setup build-bench
--buildtype=release` and reused by later runs. "After" is this tree's
release build, build-bench/. Both are built (ninja, a no-op when up to date)
before anything is measured.

This runner times nothing itself. It runs the bench scripts of THIS tree
(the registry BENCHES below), each once with the before build and once with
the after build, one right after the other (alternating which goes first
from one round to the next with --rounds), and collects the JSON lines they
print with --json (docs/benchmarks.md, "Faster than XLA: the table"):

    {"figure": "cpu-vs-hlo/softmax", "label": "...", "unit": "ms",
     "tessera": 0.09, "anchor": 0.14, "anchor_name": "JAX interpret=True",
     "goal": 1.5, "load": "0.93 1.10 1.20"}

A bench finds tessera through its environment only: PYTHONPATH (the side's
python/), TESSERA_LIBRARY, TESSERA (the CLI), TESSERA_BUILD, and CLI benches
also get `--tessera PATH` where their registry entry says so. Each side has
its own disk cache (TESSERA_CACHE_DIR), so the after build never loads an
object the before build compiled.

Every figure of the issue has a row: a bench that does not exist yet shows
"no bench", one that ran but printed nothing for a figure "no result". A few
benches of the tree that predate --json are read through an adapter of their
text output (LEGACY below) until they print JSON themselves.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import time
from typing import Callable

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
BEFORE_REV = "4e5cdf6"


# --------------------------------------------------------------------------
# The registry: one entry per bench; extend here.


@dataclasses.dataclass
class Expect:
    """A figure of the issue. It is covered by any record of its bench whose
    figure id, label and anchor name (lower case) contain every token."""

    tokens: tuple[str, ...]
    label: str
    anchor_name: str
    goal: float | None


@dataclasses.dataclass
class Bench:
    name: str                   # short name, for --only and the notes
    paths: list[str]            # candidate scripts (relative to ROOT); the first that exists runs
    args: list[str]             # arguments of a full run (--json is added)
    quick: list[str]            # arguments of a --quick run
    expect: list[Expect]
    cli: bool = False           # also pass --tessera PATH (if the script takes it)
    timeout: int = 900
    legacy: str | None = None   # script basename whose text output LEGACY reads (no --json yet)


def _kernels_of_bench_jax() -> list[str]:
    return ["add", "softmax", "matmul", "rowsum", "int_hash", "bf16_axpy",
            "gather_prefetch", "ragged"]


# The figures are warm, against interpret=True: no cold runs, no
# JAX TPU interpret mode (minutes per kernel, and not an anchor here).
_JAX_MODES = ["--mode", "jax-hlo", "--mode", "tessera-interp", "--mode", "tessera-cpu"]

HLO = "JAX interpret=True"
XLA = "jitted XLA"
TARGET = "target"

BENCHES: list[Bench] = [
    Bench("steps", ["bench/python/bench_steps.py"], [], ["--quick"], [
        Expect(("step", "interp"), "per grid step, 100-3,000 steps: interp vs interpret=True",
               HLO, 1.0),
    ]),
    Bench("jax", ["bench/python/bench_jax.py"], ["--no-cold", "--repeat", "20"] + _JAX_MODES,
          ["--no-cold", "--repeat", "3"] + _JAX_MODES, [
        e for k in _kernels_of_bench_jax() for e in (
            Expect(("cpu", k), f"{k} warm: cpu vs interpret=True", HLO, 1.5),
            Expect(("interp", k), f"{k} warm: interp vs interpret=True", HLO, 1.0))
    ], legacy="bench_jax.py"),
    Bench("attention", ["bench/python/bench_attention.py"], [], ["--quick"], [
        e for k in ("flash", "splash", "paged") for e in (
            Expect((k, "cpu", "interpret=true"), f"{k} attention warm: cpu vs interpret=True",
                   HLO, 1.5),
            Expect((k, "interp", "interpret=true"),
                   f"{k} attention warm: interp vs interpret=True", HLO, 1.0),
            Expect((k, "cpu", "xla"), f"{k} attention warm: cpu vs jitted XLA", XLA, 0.833))
    ]),
    Bench("threads", ["bench/bench_threads.py", "bench/bench_threads.sh",
                      "bench/python/bench_threads.py"], [], ["--quick"], [
        Expect(("cpu", "thread"), "cpu backend, parallel grid: N threads vs 1 (taskset sweep)",
               "1 thread", None),
        Expect(("interp", "thread"), "interpreter, parallel grid: N threads vs 1",
               "1 thread", None),
        Expect(("xdist",), "pytest -n 2 vs -n 1 over a suite of kernels", "1 worker", None),
    ]),
    Bench("frontend", ["bench/bench_frontend.py", "bench/bench_frontend.sh",
                       "bench/python/bench_frontend.py"], [], ["--quick"], [
        Expect(("front",), "front end (parse + verify + prepare) per op, 6.5k-op kernel, "
               "whole process", TARGET, 1.0),
        Expect(("warm",), "warm in-process call of the 6.5k-op kernel (cached)", TARGET, 1.0),
    ], cli=True),
    Bench("compile", ["bench/bench_compile.py", "bench/compile_time.sh"],
          [], ["--quick"], [
        Expect(("10k",), "cpu compile, s per 10k ops at 10k ops, cold", TARGET, 1.0),
        Expect(("30k",), "cpu compile, s per 10k ops at 30k ops, cold", TARGET, 1.0),
    ], cli=True, legacy="compile_time.sh"),
    Bench("sort", ["bench/python/bench_library_sort.py"], [], ["--quick"], [
        Expect(("sort", "vqsort"), "sort of 1M (u32 key, u32 value): cpu vs Highway vqsort",
               "Highway vqsort", 0.667),
    ], legacy="bench_library_sort.py"),
    Bench("topk", ["bench/python/bench_library_topk.py"], [], ["--quick"], [
        Expect(("top",), "top-16 of (128, 4096) f32: cpu vs jax.lax.top_k", "jax.lax.top_k",
               1.0),
    ], legacy="bench_library_topk.py"),
    # The figure is the 1024^3 one (1 and 2 threads); the bench's
    # 2048^3 and per-step attention dots are for its own section.
    Bench("matmul", ["bench/bench_matmul.py", "bench/bench_matmul.sh",
                     "bench/python/bench_matmul.py"], ["--figures", "1024"],
          ["--quick", "--figures", "1024"], [
        Expect(("matmul", "1 thread"), "matmul 1024^3 f32, 1 thread: cpu vs OpenBLAS",
               "OpenBLAS", 1.0),
        Expect(("matmul", "2 thread"), "matmul 1024^3 f32, 2 threads: cpu vs OpenBLAS",
               "OpenBLAS", 1.0),
    ], cli=True),
]


# --------------------------------------------------------------------------
# Adapters for benches whose text output predates --json. Each takes the
# side's environment and --quick, runs the script, returns records.


def _load() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def _md_rows(text: str) -> list[list[str]]:
    rows = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("|") and not re.match(r"^\|[-:| ]+\|$", line):
            rows.append([c.strip() for c in line.strip("|").split("|")])
    return rows


def _num(s: str) -> float | None:
    try:
        return float(s)
    except ValueError:
        return None


def _legacy_bench_jax(path, env, quick, run):
    args = ["--no-cold", "--repeat", "3" if quick else "20"] + _JAX_MODES
    out = run([sys.executable, path] + args)
    rows = _md_rows(out)
    if not rows:
        return []
    head = rows[0]
    col = {h: i for i, h in enumerate(head)}
    recs = []
    load = _load()
    for r in rows[1:]:
        hlo = _num(r[col["JAX interpret=True warm"]])
        for backend, goal in (("cpu", 1.5), ("interp", 1.0)):
            t = _num(r[col[f"tessera {backend} warm"]])
            recs.append({"figure": f"{backend}-vs-hlo/{r[0]}",
                         "label": f"{r[0]} warm: {backend} vs interpret=True", "unit": "ms",
                         "tessera": t, "anchor": hlo, "anchor_name": HLO, "goal": goal,
                         "load": load})
    return recs


def _legacy_compile_time(path, env, quick, run):
    sizes = ["10000"] if quick else ["10000", "30000"]
    out = run([path, env["TESSERA_BUILD"]] + sizes)
    recs = []
    for m in re.finditer(r"^N=(\d+) whole process ([0-9.]+) s", out, re.M):
        n, s = int(m.group(1)), float(m.group(2))
        recs.append({"figure": f"compile/{n // 1000}k",
                     "label": f"cpu compile at {n // 1000}k ops, cold, whole process: "
                              "s per 10k ops", "unit": "s",
                     "tessera": s * 10000 / n, "anchor": 1.0, "anchor_name": TARGET,
                     "goal": 1.0, "load": _load()})
    return recs


def _legacy_sort(path, env, quick, run):
    out = run([sys.executable, path, "1m", "2" if quick else "5"])
    rows = {r[0]: r for r in _md_rows(out)}
    t = rows.get("tessera cpu backend, host kernel, (key, value)")
    a = rows.get("Highway vqsort, kv")
    return [{"figure": "sort/kv-1m", "label": "sort of 1M (u32 key, u32 value): cpu "
             "(median) vs Highway vqsort (best of 10)", "unit": "ms",
             "tessera": _num(t[2]) if t else None, "anchor": _num(a[1]) if a else None,
             "anchor_name": "Highway vqsort", "goal": 0.667, "load": _load()}]


def _legacy_topk(path, env, quick, run):
    out = run([sys.executable, path, "--shapes", "128,4096,16", "--backends", "cpu",
               "--reps", "5" if quick else "20"])
    rows = {r[0]: r for r in _md_rows(out)}
    t = rows.get("tessera cpu")
    a = rows.get("jax.lax.top_k, jit, CPU")
    return [{"figure": "topk/128x4096-16", "label": "top-16 of (128, 4096) f32: cpu vs "
             "jax.lax.top_k (medians)", "unit": "ms",
             "tessera": _num(t[2]) if t else None, "anchor": _num(a[2]) if a else None,
             "anchor_name": "jax.lax.top_k", "goal": 1.0, "load": _load()}]


LEGACY: dict[str, Callable] = {
    "bench_jax.py": _legacy_bench_jax,
    "compile_time.sh": _legacy_compile_time,
    "bench_library_sort.py": _legacy_sort,
    "bench_library_topk.py": _legacy_topk,
}


# --------------------------------------------------------------------------
# Builds.


def git(*args: str, cwd: str = ROOT) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout.strip()


def log(msg: str) -> None:
    print(f"[table {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def build(tree: str, build_dir: str) -> None:
    if not os.path.exists(os.path.join(build_dir, "build.ninja")):
        log(f"meson setup {build_dir} --buildtype=release")
        subprocess.run(["meson", "setup", build_dir, "--buildtype=release"], cwd=tree,
                       check=True, stdout=subprocess.DEVNULL)
    log(f"ninja -C {build_dir}")
    subprocess.run(["ninja", "-C", build_dir], cwd=tree, check=True,
                   stdout=subprocess.DEVNULL)


def before_tree(rev: str) -> str:
    """The worktree of `rev` under the cache directory, made once."""
    full = git("rev-parse", "--verify", rev + "^{commit}")
    base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    path = os.path.join(base, "tessera-bench", full)
    if not os.path.exists(os.path.join(path, "meson.build")):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        git("worktree", "prune")
        log(f"git worktree add --detach {path} {full[:7]}")
        git("worktree", "add", "--detach", path, full)
    return path


@dataclasses.dataclass
class Side:
    name: str       # "before" or "after"
    tree: str
    build: str
    commit: str

    def env(self, cache_root: str) -> dict[str, str]:
        env = dict(os.environ)
        py = os.path.join(self.tree, "python")
        env["PYTHONPATH"] = py + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        env["TESSERA_LIBRARY"] = os.path.join(self.build, "libtessera.so")
        env["TESSERA"] = os.path.join(self.build, "tools", "tessera")
        env["TESSERA_BUILD"] = self.build
        env["TESSERA_CACHE_DIR"] = os.path.join(cache_root, f"cache-{self.name}")
        env["TESSERA_BENCH_SIDE"] = self.name
        env.setdefault("JAX_PLATFORMS", "cpu")
        return env


def sides(args) -> list[Side]:
    after_build = os.path.abspath(args.after_build or os.path.join(ROOT, "build-bench"))
    if args.before_build:
        before_build = os.path.abspath(args.before_build)
        btree = os.path.dirname(before_build)
        bcommit = args.before
    else:
        btree = before_tree(args.before)
        before_build = os.path.join(btree, "build-bench")
        bcommit = git("rev-parse", "HEAD", cwd=btree)
    if not args.no_build:
        build(btree, before_build)
        build(ROOT, after_build)
    try:
        head = git("rev-parse", "HEAD")
        if git("status", "--porcelain", "--untracked-files=no"):
            head += "+changes"
    except (OSError, subprocess.CalledProcessError):
        head = "unknown (not a git checkout)"
    return [Side("before", btree, before_build, bcommit), Side("after", ROOT, after_build, head)]


# --------------------------------------------------------------------------
# Running benches.


def parse_json_lines(text: str) -> list[dict]:
    recs = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(rec, dict) and "figure" in rec:
            recs.append(rec)
    return recs


def find_script(b: Bench) -> str | None:
    for p in b.paths:
        full = os.path.join(ROOT, p)
        if os.path.exists(full):
            return full
    return None


def run_bench(b: Bench, side: Side, quick: bool, cache_root: str, notes: list[str]) -> list[dict]:
    script = find_script(b)
    env = side.env(cache_root)

    def run(cmd: list[str]) -> str:
        log(f"{side.name}: {' '.join(shlex.quote(c) for c in cmd)}")
        try:
            p = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True,
                               timeout=b.timeout)
        except subprocess.TimeoutExpired:
            notes.append(f"{b.name} ({side.name}): stopped after {b.timeout} s")
            return ""
        if p.returncode != 0:
            tail = " / ".join((p.stderr.strip().splitlines() or ["?"])[-2:])
            notes.append(f"{b.name} ({side.name}): exit {p.returncode}: {tail[:300]}")
        return p.stdout

    if os.path.basename(script) == b.legacy and not _mentions(script, "--json"):
        recs = LEGACY[b.legacy](script, env, quick, run)
        for r in recs:
            r["via"] = "text"
        return recs
    cmd = [script] if not script.endswith(".py") else [sys.executable, script]
    cmd += ["--json"] + (b.quick if quick else b.args)
    if b.cli and _mentions(script, "--tessera"):
        cmd += ["--tessera", env["TESSERA"]]
    return parse_json_lines(run(cmd))


def _mentions(script: str, option: str) -> bool:
    """Whether the script's text names the option (read, not run: a shell
    bench may take --help for a positional argument)."""
    with open(script, errors="replace") as f:
        return option in f.read()


# --------------------------------------------------------------------------
# The table.


def _med(xs: list) -> float | None:
    xs = [x for x in xs if isinstance(x, (int, float))]
    return statistics.median(xs) if xs else None


def merge(rounds: list[list[dict]]) -> dict[str, dict]:
    """Records of several rounds, by figure: medians of tessera and anchor,
    the loads of every round."""
    by: dict[str, dict] = {}
    order: list[str] = []
    for recs in rounds:
        for r in recs:
            fig = str(r["figure"])
            if fig not in by:
                by[fig] = dict(r, _t=[], _a=[], _load=[])
                order.append(fig)
            by[fig]["_t"].append(r.get("tessera"))
            by[fig]["_a"].append(r.get("anchor"))
            by[fig]["_load"].append(str(r.get("load", "")))
    for m in by.values():
        m["tessera"] = _med(m["_t"])
        m["anchor"] = _med(m["_a"])
    return {f: by[f] for f in order}


def _fmt(v: float | None, unit: str = "") -> str:
    if v is None:
        return "n/a"
    s = f"{v:.3g}" if abs(v) < 1000 else f"{v:.0f}"
    return f"{s} {unit}".strip()


def _speedup(anchor: float | None, t: float | None) -> float | None:
    if anchor is None or t is None or t <= 0:
        return None
    return anchor / t


def _load1(loads: list[str]) -> str:
    firsts = [s.split()[0] for s in loads if s.split()]
    return ",".join(firsts) if firsts else "?"


def _covered(e: Expect, recs: list[dict]) -> bool:
    for r in recs:
        hay = " ".join(str(r.get(k, "")) for k in ("figure", "label", "anchor_name")).lower()
        if all(t.lower() in hay for t in e.tokens):
            return True
    return False


HEAD = ["figure", "anchor", "anchor value", "before", "after", "speedup before",
        "speedup after (anchor/after)", "goal", "met?", "load (before / after)"]


def rows_of(b: Bench, script: str | None, before: dict[str, dict],
            after: dict[str, dict]) -> list[list[str]]:
    rows = []
    if script is None:
        for e in b.expect:
            rows.append([e.label, e.anchor_name, "", "no bench", "no bench", "", "",
                         _goal(e.goal), "no bench", ""])
        return rows
    figs = list(after) + [f for f in before if f not in after]
    for f in figs:
        a, bf = after.get(f), before.get(f)
        ref = a or bf
        unit = str(ref.get("unit", ""))
        # The anchor as each side's run measured it: one value if they agree
        # to 3 digits, else "before / after" (a busy machine shows here).
        anc = [_fmt(x["anchor"], unit) for x in (bf, a) if x and x["anchor"] is not None]
        anchor = anc[0] if len(set(anc)) == 1 else " / ".join(anc)
        sp_b = _speedup(bf["anchor"], bf["tessera"]) if bf else None
        sp_a = _speedup(a["anchor"], a["tessera"]) if a else None
        goal = ref.get("goal")
        met = ("" if goal is None else "n/a" if sp_a is None else
               "yes" if sp_a >= goal else f"no ({goal / sp_a:.2f}x short)")
        label = str(ref.get("label") or f)
        if ref.get("via") == "text":
            label += " †"
        rows.append([label, str(ref.get("anchor_name", "")), anchor,
                     _fmt(bf["tessera"], unit) if bf else "no result",
                     _fmt(a["tessera"], unit) if a else "no result",
                     f"{sp_b:.2f}x" if sp_b else "", f"{sp_a:.2f}x" if sp_a else "",
                     _goal(goal), met,
                     f"{_load1(bf['_load']) if bf else '-'} / {_load1(a['_load']) if a else '-'}"])
    every = list(before.values()) + list(after.values())
    for e in b.expect:
        if not _covered(e, every):
            rows.append([e.label, e.anchor_name, "", "no result", "no result", "", "",
                         _goal(e.goal), "no result", ""])
    return rows


def _goal(g: float | None) -> str:
    return "" if g is None else f"≥ {g:g}x"


def markdown(rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(HEAD) + " |", "|" + "---|" * len(HEAD)]
    out += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in rows]
    return "\n".join(out)


def machine() -> str:
    model = "?"
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        m = re.search(r"^Model name:\s*(.+)$", lscpu, re.M)
        model = m.group(1).strip() if m else model
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} CPUs ({len(os.sched_getaffinity(0))} available)"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="few repetitions: a smoke run")
    ap.add_argument("--rounds", type=int, default=1,
                    help="run each bench this many times per side, alternating which "
                         "side goes first; medians (default 1)")
    ap.add_argument("--only", action="append", default=[],
                    help="only these benches: " + ", ".join(b.name for b in BENCHES))
    ap.add_argument("--before", default=BEFORE_REV, help="the before commit (4e5cdf6)")
    ap.add_argument("--before-build", help="use this build directory as before")
    ap.add_argument("--after-build", help="use this build directory as after "
                                          "(default: build-bench)")
    ap.add_argument("--no-build", action="store_true", help="do not run meson/ninja")
    ap.add_argument("--prepare", action="store_true",
                    help="build both sides, print their tessera binaries, stop")
    ap.add_argument("--raw", help="also write every record (JSON lines) to this file")
    args = ap.parse_args(argv)

    sd = sides(args)
    if args.prepare:
        for s in sd:
            print(f"{s.name}={os.path.join(s.build, 'tools', 'tessera')}")
        return 0
    unknown = set(args.only) - {b.name for b in BENCHES}
    if unknown:
        ap.error(f"unknown bench {sorted(unknown)}")
    benches = [b for b in BENCHES if not args.only or b.name in args.only]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    cache_root = os.path.join(base, "tessera-bench")
    os.makedirs(cache_root, exist_ok=True)
    start, load0 = time.time(), _load()
    notes: list[str] = []
    rows: list[list[str]] = []
    raw: list[dict] = []
    for b in benches:
        script = find_script(b)
        got = {"before": [], "after": []}
        if script is not None:
            for r in range(max(1, args.rounds)):
                for s in (sd if r % 2 == 0 else sd[::-1]):
                    recs = run_bench(b, s, args.quick, cache_root, notes)
                    if not recs:
                        notes.append(f"{b.name} ({s.name}): no JSON lines")
                    for rec in recs:
                        raw.append(dict(rec, side=s.name, round=r, bench=b.name))
                    got[s.name].append(recs)
        rows += rows_of(b, script and os.path.relpath(script, ROOT),
                        merge(got["before"]), merge(got["after"]))
    load1 = _load()
    now = datetime.datetime.now(datetime.timezone.utc)
    print(f"# Faster than XLA: the table ({now:%Y-%m-%d %H:%M} UTC)\n")
    print(f"- command: bench/table.sh {' '.join(shlex.quote(a) for a in (argv or sys.argv[1:]))}"
          .rstrip())
    print(f"- machine: {machine()}")
    print(f"- before: {sd[0].commit[:12]} ({sd[0].build})")
    print(f"- after: {sd[1].commit[:12]} ({sd[1].build})")
    print(f"- load average: {load0} at the start, {load1} at the end; "
          f"{(time.time() - start) / 60:.1f} min; {'--quick, ' if args.quick else ''}"
          f"{args.rounds} round(s) per side")
    print()
    print(markdown(rows))
    print()
    print("Times: lower is better. anchor value: as the before and the after runs measured "
          "it (one value when they agree). speedup = anchor / tessera in the same run (an "
          "absolute target counts as the anchor); goal = the speedup the issue asks for; load = the "
          "1-minute load average when each side's figure was taken. † = read from the "
          "bench's text output (it has no --json yet).")
    if notes:
        print("\nNotes:")
        for n in notes:
            print(f"- {n}")
    if args.raw:
        with open(args.raw, "w") as f:
            for rec in raw:
                f.write(json.dumps(rec) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
