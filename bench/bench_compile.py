#!/usr/bin/env python3
"""Cold cpu-backend compile time against kernel size, per phase
(docs/benchmarks.md, "compile"): the straight-line bitonic kernels of
bench/gen_straightline.py at 10k and 30k ops, compiled cold in a fresh
process each (`tessera run --backend cpu`, TESSERA_CACHE=off), against the
target of 1 s per 10k ops; the same 30k kernel with one compile thread
(TESSERA_LOWER_THREADS=1: what the host's cores give); and the small-kernel
cold compile (`tessera sort` of 128 f32, the library's kernel, the disk cache
off), against its 100 ms target, so that it does not regress.

The compile time is the `total` of the $TESSERA_LOWER_TIMING line (emit to
link; docs/lowering.md), the median of the rounds; the small kernel's figure
is the whole process's wall time. `process_wall` and `process_cpu` are the
whole `tessera run`'s wall time and CPU time (user + system, the link's cc
included) per 10k ops: on a loaded machine the CPU time is the steadier
figure (wall time then includes waiting for a core). The load average is printed with every
figure (other jobs share the cores: figures are upper bounds).

Usage: bench/bench_compile.py [--tessera PATH] [--json] [--quick] [--rounds N]
tessera is found as --tessera, else $TESSERA, else `tessera` on PATH."""
import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TIMING = re.compile(r"tessera: lower @\S+: (.*?); total ([0-9.]+) ms(.*)")


def load():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def lower_timing(stderr):
    """(total ms, {phase: ms}, rest of the line) of the timing line."""
    for line in stderr.splitlines():
        m = TIMING.search(line)
        if m:
            phases = {}
            for part in m.group(1).split(", "):
                name, value, _ = part.split(" ")
                phases[name] = float(value)
            return float(m.group(2)), phases, m.group(3).strip("; ")
    return None


def compile_once(tessera, kernel, out_dir, env_extra):
    env = dict(os.environ, TESSERA_CACHE="off", TESSERA_LOWER_TIMING="1", **env_extra)
    shutil.rmtree(out_dir, ignore_errors=True)
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run([tessera, "run", kernel, "--random-inputs", "1", "--backend", "cpu",
                        "-q", "--out-dir", out_dir], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    if p.returncode != 0:
        return None
    t = lower_timing(p.stderr)
    return None if t is None else (t[0], t[1], t[2], wall, cpu)


def small_once(tessera, tmp):
    import numpy as np  # only for the input file
    x = os.path.join(tmp, "x128.npy")
    if not os.path.exists(x):
        np.save(x, np.random.default_rng(0).standard_normal(128).astype(np.float32))
    env = dict(os.environ, TESSERA_CACHE="off")
    t0 = time.perf_counter()
    p = subprocess.run([tessera, "sort", x, "-o", os.path.join(tmp, "y128.npy"), "--backend",
                        "cpu"], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    return wall if p.returncode == 0 else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tessera", default=os.environ.get("TESSERA") or shutil.which("tessera"))
    ap.add_argument("--json", action="store_true", help="one JSON object per figure")
    ap.add_argument("--quick", action="store_true", help="one round (a smoke run)")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    if not args.tessera:
        sys.exit("bench_compile: give --tessera PATH or set $TESSERA")
    rounds = 1 if args.quick else args.rounds
    tmp = tempfile.mkdtemp(prefix="bench-compile-")
    try:
        figures = []
        kernels = {}
        for n in (10000, 30000):
            path = os.path.join(tmp, f"sort_{n}.tsr")
            with open(path, "w") as f:
                subprocess.run([sys.executable, os.path.join(HERE, "gen_straightline.py"), str(n)],
                               stdout=f, check=True)
            kernels[n] = path
        cases = [
            ("compile/10k", 10000, {}, "cpu compile of a 10k-op straight-line kernel, cold (s per 10k ops)"),
            ("compile/30k", 30000, {}, "cpu compile of a 30k-op straight-line kernel, cold (s per 10k ops)"),
            ("compile/30k-1thread", 30000, {"TESSERA_LOWER_THREADS": "1"},
             "cpu compile of a 30k-op kernel, one compile thread (s per 10k ops)"),
        ]
        results = {c[0]: [] for c in cases}
        small = []
        # Rounds interleave the cases, so that a burst of load hits them alike.
        for _ in range(rounds):
            for figure, n, env, _ in cases:
                r = compile_once(args.tessera, kernels[n], os.path.join(tmp, "out"), env)
                if r:
                    results[figure].append(r)
            s = small_once(args.tessera, tmp)
            if s is not None:
                small.append(s)
        for figure, n, env, label in cases:
            runs = results[figure]
            if runs:
                total = statistics.median(r[0] for r in runs) / 1e3
                phases = {k: round(statistics.median(r[1][k] for r in runs), 1)
                          for k in runs[0][1]}
                extra = runs[-1][2]
                value = total * 1e4 / n
                wall = round(statistics.median(r[3] for r in runs) * 1e4 / n, 3)
                cpu = round(statistics.median(r[4] for r in runs) * 1e4 / n, 3)
            else:
                value, phases, extra, wall, cpu = None, {}, "", None, None
            figures.append({"figure": figure, "label": label, "unit": "s/10k ops",
                            "tessera": None if value is None else round(value, 3),
                            "anchor": 1.0, "anchor_name": "target", "goal": 1.0,
                            "load": load(), "phases_ms": phases, "split": extra,
                            "process_wall": wall, "process_cpu": cpu,
                            "rounds": len(runs)})
        figures.append({"figure": "compile/small-cold",
                        "label": "tessera sort of 128 f32, cpu backend, cold whole process",
                        "unit": "ms",
                        "tessera": round(statistics.median(small) * 1e3, 1) if small else None,
                        "anchor": 100.0, "anchor_name": "target", "goal": 1.0, "load": load(),
                        "rounds": len(small)})
        for f in figures:
            if args.json:
                print(json.dumps(f), flush=True)
            else:
                v = "n/a" if f["tessera"] is None else f["tessera"]
                print(f"{f['label']}: {v} {f['unit']} (target {f['anchor']}; load {f['load']})"
                      + (f"; process wall {f['process_wall']}, CPU {f['process_cpu']}"
                         if f.get("process_cpu") is not None else "")
                      + (f"\n  phases (ms): {f['phases_ms']}; {f['split']}" if f.get("phases_ms") else ""))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
