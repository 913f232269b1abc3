#!/usr/bin/env python3
"""The interpreter's front end (parse + verify + prepare) per op, against the
target of 0.5 us per op, on straight-line kernels of N ops
(bench/gen_straightline.py: a bitonic network on one (8,128) f32 block), and
what a warm in-process call of the same kernel costs (docs/benchmarks.md,
"Front end").

    PYTHONPATH=python TESSERA_LIBRARY=build-bench/libtessera.so \\
        TESSERA=build-bench/tools/tessera .venv/bin/python bench/bench_frontend.py [--json] [--quick]

tessera is found through the environment only: the CLI as --tessera PATH or
$TESSERA, the library as $TESSERA_LIBRARY (with PYTHONPATH naming the
package), so the same script measures any build.

Measured, each as the median of several rounds, the rounds of the sizes and of
the process floor interleaved (the machine is shared: the load average is
printed with every figure):

  in process (the Python package, a fresh Context without disk cache per
  round, so nothing is cached):
    parse      tessera.Module.parse of the text
    verify     module.verify()
    create     tessera.compile(kernel): verify + cache key + prepare
    first run  the first call of the executable (fresh run memory)
    warm call  a second call of the same executable: the run alone
    warm compile  tessera.compile(kernel) again in the same Context (the
               in-memory cache: verify + cache key + lookup) and a call, as
               tessera.run and Kernel.__call__ do on every call
  whole process (TESSERA_CACHE=off):
    `tessera run K --random-inputs 1 -q` for each size, and the same for a
    3-op kernel (process start and exit, reading an input, one run): the
    front end per op in a whole process is
    (t(N) - t(3) - first run(N)) / (N - 3)

CPU TIME: every figure is CPU time (the thread's in process, the child's
user + system for a whole process), not wall time: the machine this was
written on has 2 cores shared with several builds (load 4-12), which puts
wall times of a few milliseconds off by 2-5x while CPU time stays within
about 20%. Page faults are system time, so they count.

Front end per op = (parse + create) / N (create verifies again: that is what
a `tessera run` does). --json prints one JSON object per line per figure
(bench/table.py reads them); without it, a table.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import gen_straightline  # noqa: E402

TARGET_US_PER_OP = 0.5


def load() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def in_process_round(text: str, name: str) -> dict[str, float]:
    import numpy as np
    import tessera

    clock = time.thread_time  # CPU time of this thread: see CPU TIME above
    t0 = clock()
    module = tessera.Module.parse(text, f"{name}.tsr")
    t1 = clock()
    module.verify()
    t2 = clock()
    ctx = tessera.Context(disk_cache=False)
    kernel = module[0]
    t3 = clock()
    exe = tessera.compile(kernel, "interp", context=ctx)
    t4 = clock()
    x = np.linspace(-1.0, 1.0, 8 * 128, dtype=np.float32).reshape(8, 128)
    t5 = clock()
    y = exe(x)
    t6 = clock()
    y1 = exe(x)
    t7 = clock()
    exe2 = tessera.compile(kernel, "interp", context=ctx)
    y2 = exe2(x)
    t8 = clock()
    for other in (y1, y2):
        if not np.array_equal(np.asarray(y), np.asarray(other)):
            raise SystemExit("bench_frontend: a warm call gave another result")
    del exe, exe2
    ctx.close()
    return {"parse": t1 - t0, "verify": t2 - t1, "create": t4 - t3,
            "first_run": t6 - t5, "warm_call": t7 - t6, "warm_compile": t8 - t7}


def whole_process(tessera_cli: str, path: pathlib.Path) -> float:
    """CPU time (user + system) of one `tessera run` process."""
    env = dict(os.environ, TESSERA_CACHE="off")
    p = subprocess.Popen([tessera_cli, "run", str(path), "--random-inputs", "1", "-q"],
                         env=env, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(p.pid, 0)
    if status != 0:
        raise SystemExit(f"bench_frontend: {tessera_cli} run {path} failed")
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="one JSON object per figure")
    ap.add_argument("--quick", action="store_true", help="few rounds (a smoke run)")
    ap.add_argument("--tessera", default=os.environ.get("TESSERA"),
                    help="the tessera CLI (default: $TESSERA, else `tessera` on PATH)")
    ap.add_argument("--sizes", default="1000,6500,20000", help="kernel sizes in ops")
    ap.add_argument("--rounds", type=int, default=None)
    args = ap.parse_args()
    cli = args.tessera or shutil.which("tessera")
    sizes = [int(s) for s in args.sizes.split(",")]
    rounds = args.rounds or (2 if args.quick else 9)

    tmp = pathlib.Path(tempfile.mkdtemp(prefix="bench_frontend_"))
    texts = {n: gen_straightline.generate(n) for n in sizes + [3]}
    paths = {}
    for n, text in texts.items():
        paths[n] = tmp / f"straight_{n}.tsr"
        paths[n].write_text(text)

    inproc: dict[int, list[dict[str, float]]] = {n: [] for n in sizes}
    proc: dict[int, list[float]] = {n: [] for n in sizes + [3]}
    in_process_round(texts[3], "warmup")  # loads the library
    for _ in range(rounds):
        for n in sizes:
            inproc[n].append(in_process_round(texts[n], f"straight_{n}"))
            if cli:
                proc[3].append(whole_process(cli, paths[3]))
                proc[n].append(whole_process(cli, paths[n]))
    shutil.rmtree(tmp, ignore_errors=True)

    la = load()
    figures = []
    for n in sizes:
        ph = {k: median([r[k] for r in inproc[n]]) for k in inproc[n][0]}
        front = ph["parse"] + ph["create"]
        per_op = front / n * 1e6
        figures.append({
            "figure": f"frontend/in-process/{n}",
            "label": f"parse+verify+prepare, {n}-op straight-line kernel, in process: "
                     "us per op vs target",
            "unit": "us/op", "tessera": round(per_op, 4), "anchor": TARGET_US_PER_OP,
            "anchor_name": "target", "goal": 1.0, "load": la,
            "phases_ms": {k: round(v * 1e3, 3) for k, v in ph.items()}})
        if cli:
            t_n, t_3 = median(proc[n]), median(proc[3])
            whole = (t_n - t_3 - ph["first_run"]) / (n - 3) * 1e6
            figures.append({
                "figure": f"frontend/whole-process/{n}",
                "label": f"front end per op in a whole `tessera run` of a {n}-op "
                         "straight-line kernel (minus a 3-op run and the run itself)",
                "unit": "us/op", "tessera": round(whole, 4), "anchor": TARGET_US_PER_OP,
                "anchor_name": "target", "goal": 1.0, "load": la,
                "process_ms": round(t_n * 1e3, 3), "process_3op_ms": round(t_3 * 1e3, 3)})
        if n == 6500 or n == sizes[0] and 6500 not in sizes:
            cold = front + ph["first_run"]
            figures.append({
                "figure": f"frontend/warm-call/{n}",
                "label": f"warm in-process call of the {n}-op kernel (the executable "
                         "kept: the run alone) vs the cold call (parse+verify+prepare+run)",
                "unit": "ms", "tessera": round(ph["warm_call"] * 1e3, 4),
                "anchor": round(cold * 1e3, 4), "anchor_name": "cold in-process call",
                "goal": 1.0, "load": la})
            figures.append({
                "figure": f"frontend/warm-compile/{n}",
                "label": f"tessera.compile again (in-memory cache hit: verify + key) "
                         f"and a call of the {n}-op kernel vs the cold call",
                "unit": "ms", "tessera": round(ph["warm_compile"] * 1e3, 4),
                "anchor": round(cold * 1e3, 4), "anchor_name": "cold in-process call",
                "goal": 1.0, "load": la})
    if args.json:
        for f in figures:
            print(json.dumps(f))
        return
    print(f"front end, median of {rounds} rounds, load {la}")
    for f in figures:
        extra = ""
        if "phases_ms" in f:
            extra = "  " + ", ".join(f"{k} {v} ms" for k, v in f["phases_ms"].items())
        if "process_ms" in f:
            extra = f"  process {f['process_ms']} ms, 3-op process {f['process_3op_ms']} ms"
        print(f"{f['figure']:32s} {f['tessera']!s:>10} {f['unit']:6s} "
              f"(anchor {f['anchor']} {f['anchor_name']}){extra}")


if __name__ == "__main__":
    main()
