#!/usr/bin/env python3
"""`dot` compiled by tessera's cpu backend next to OpenBLAS's sgemm (the one
numpy bundles), warm, in one process, A/B interleaved: for docs/benchmarks.md
("matmul"). Speed is measured here, never asserted in tests.

    PYTHONPATH=python TESSERA_LIBRARY=build/libtessera.so \\
        .venv/bin/python bench/python/bench_matmul.py [--quick] [--json]

Figures (each a median over interleaved rounds; `load` is /proc/loadavg):

* `matmul/1024`, `matmul/2048`: an N^3 f32 matmul, the kernel of
  bench/kernels/lowered.tsr's `matmul_1024` (128 x 128 blocks, grid
  (N/128)^3, k innermost, accumulating into the output block) against
  `np.matmul(a, b, out=c)`.
* `matmul/qkT-128`, `matmul/pv-128`: the dots of one attention grid step,
  [128,128] x [128,128]^T (q @ k^T, `dot ... transpose_rhs`) and
  [128,128] x [128,128], over a batch of G blocks (one grid step each),
  against numpy's batched matmul of the same arrays (one sgemm per block).
  Per block.

OpenBLAS's thread count is fixed at process start (OPENBLAS_NUM_THREADS):
the 1-thread figures run in this process, the 2-thread ones in a child
process with OPENBLAS_NUM_THREADS=2 (`--blas-threads 2`). tessera runs the
2-thread figure with `threads=2` when this tessera has that option (the host
thread pool for `parallel` grid dimensions), else its figure is null.

tessera is found through the environment only (PYTHONPATH, TESSERA_LIBRARY).
Every tessera result is checked against numpy (relative error) before it is
timed; bit-for-bit equality with the interpreter is the test suite's job.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def _parse():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="few rounds (a smoke run)")
    ap.add_argument("--json", action="store_true", help="one JSON object per figure")
    ap.add_argument("--rounds", type=int, default=0, help="interleaved rounds (default 9, quick 3)")
    ap.add_argument("--blas-threads", type=int, default=0,
                    help="threads of OpenBLAS and tessera: 1 and 2 by default (2 in a child)")
    ap.add_argument("--figures", nargs="*", default=None,
                    help="figure names to run (default all): 1024 2048 qkT-128 pv-128")
    ap.add_argument("--clock", choices=("cpu", "wall"), default="cpu",
                    help="1-thread figures: process CPU time (default) or wall time")
    return ap.parse_args()


ARGS = _parse() if __name__ == "__main__" else None
if ARGS is not None and ARGS.blas_threads:
    os.environ["OPENBLAS_NUM_THREADS"] = str(ARGS.blas_threads)
elif ARGS is not None:
    os.environ["OPENBLAS_NUM_THREADS"] = "1"

import numpy as np  # noqa: E402  (after OPENBLAS_NUM_THREADS)

import tessera  # noqa: E402

CLOCK = ARGS.clock if ARGS is not None else "cpu"


def matmul_text(n: int, blk: int = 128) -> str:
    g = n // blk
    return f"""
kernel @matmul
  grid({g}, {g}, {g}) semantics(parallel, parallel, arbitrary)
  in %a: f32[{n}, {n}] vmem block[{blk}, {blk}] map(%i, %j, %k) -> (%i, %k)
  in %b: f32[{n}, {n}] vmem block[{blk}, {blk}] map(%i, %j, %k) -> (%k, %j)
  out %c: f32[{n}, {n}] vmem block[{blk}, {blk}] map(%i, %j, %k) -> (%i, %j)
{{
  %k = program_id 2 : i32
  %zero = const 0 : i32
  %first = eq %k, %zero : i1
  if %first {{
    %z = const 0.0 : f32[{blk}, {blk}]
    store %c[:, :], %z
  }}
  %x = load %a[:, :] : f32[{blk}, {blk}]
  %y = load %b[:, :] : f32[{blk}, {blk}]
  %s = load %c[:, :] : f32[{blk}, {blk}]
  %p = dot %x, %y, %s : f32[{blk}, {blk}]
  store %c[:, :], %p
}}
"""


def attn_dot_text(g: int, transpose: bool, blk: int = 128) -> str:
    tr = " transpose_rhs" if transpose else ""
    return f"""
kernel @attn_dot
  grid({g}) semantics(parallel)
  in %q: f32[{g * blk}, {blk}] vmem block[{blk}, {blk}] map(%i) -> (%i, 0)
  in %k: f32[{g * blk}, {blk}] vmem block[{blk}, {blk}] map(%i) -> (%i, 0)
  out %s: f32[{g * blk}, {blk}] vmem block[{blk}, {blk}] map(%i) -> (%i, 0)
{{
  %x = load %q[:, :] : f32[{blk}, {blk}]
  %y = load %k[:, :] : f32[{blk}, {blk}]
  %p = dot %x, %y{tr} : f32[{blk}, {blk}]
  store %s[:, :], %p
}}
"""


def executable(text: str, threads: int):
    kernel = tessera.Module.parse(text)[0]
    # Always say the count: the default is every available core.
    try:
        return tessera.compile(kernel, backend="cpu", threads=threads)
    except (TypeError, ValueError, tessera.TesseraError):
        if threads <= 1:  # a tessera without a host thread pool runs on one
            return tessera.compile(kernel, backend="cpu")
        return None


def interleaved(fa, fb, rounds: int, inner: int, clock, pause: float = 0.0):
    """Medians of fa and fb, alternated `rounds` times, `inner` calls each."""
    ta, tb = [], []
    fa(), fb()  # warm
    for r in range(rounds):
        for f, ts in ((fa, ta), (fb, tb)) if r % 2 == 0 else ((fb, tb), (fa, ta)):
            # OpenBLAS's worker threads keep spinning for a while after a
            # call; timed right after one, a multi-threaded tessera run
            # finds its cores taken. Let them go to sleep first.
            time.sleep(pause)
            t = clock()
            for _ in range(inner):
                f()
            ts.append((clock() - t) / inner)
    return statistics.median(ta), statistics.median(tb)


def loadavg() -> str:
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "n/a"


def check(got, want, what):
    err = float(np.max(np.abs(got - want)) / max(1e-30, float(np.max(np.abs(want)))))
    if not err < 1e-5:
        raise SystemExit(f"bench_matmul: {what}: tessera differs from numpy (relative {err:.2e})")


def run_figure(name: str, threads: int, rounds: int, quick: bool) -> dict:
    rng = np.random.default_rng(7)
    if name in ("1024", "2048"):
        n = int(name)
        a = rng.standard_normal((n, n), dtype=np.float32)
        b = rng.standard_normal((n, n), dtype=np.float32)
        exe = executable(matmul_text(n), threads)
        want = a @ b
        out_t = np.empty((n, n), np.float32)
        out_b = np.empty((n, n), np.float32)
        per, unit, scale = 1, "ms", 1e3
        label = f"matmul {n}^3 f32 ({threads} thread{'s' if threads > 1 else ''}): tessera cpu vs OpenBLAS sgemm"
        anchor_fn = lambda: np.matmul(a, b, out=out_b)  # noqa: E731
        inner = 1
    else:
        tr = name.startswith("qkT")
        g = 16 if quick else 64
        q = rng.standard_normal((g * 128, 128), dtype=np.float32)
        k = rng.standard_normal((g * 128, 128), dtype=np.float32)
        exe = executable(attn_dot_text(g, tr), threads)
        q3, k3 = q.reshape(g, 128, 128), k.reshape(g, 128, 128)
        rhs = k3.transpose(0, 2, 1) if tr else k3
        want = np.matmul(q3, rhs).reshape(g * 128, 128)
        out_t = np.empty((g * 128, 128), np.float32)
        out_b3 = np.empty((g, 128, 128), np.float32)
        a, b = q, k
        per, unit, scale = g, "us", 1e6
        what = "q @ k^T" if tr else "p @ v"
        label = (f"attention dot {what} [128,128] per grid step ({threads} "
                 f"thread{'s' if threads > 1 else ''}): tessera cpu vs OpenBLAS sgemm")
        anchor_fn = lambda: np.matmul(q3, rhs, out=out_b3)  # noqa: E731
        inner = 5 if quick else 20
    fig = {"figure": f"matmul/{name}" + (f"-t{threads}" if threads > 1 else ""), "label": label,
           "unit": unit, "tessera": None, "anchor": None,
           "anchor_name": f"OpenBLAS sgemm (numpy {np.__version__}, "
                          f"{threads} thread{'s' if threads > 1 else ''})",
           "goal": 1.0}
    # One thread: the process's CPU time, which other processes on the
    # shared machine do not inflate (cache sharing still does); with more
    # threads, wall time.
    clock = time.process_time if threads <= 1 and CLOCK == "cpu" else time.perf_counter
    if exe is not None:
        addrs = [a.ctypes.data, b.ctypes.data, out_t.ctypes.data]
        run = lambda: exe._run_buffers(addrs)  # noqa: E731
        run()
        check(out_t, want, name)
        tt, tb = interleaved(run, anchor_fn, rounds, inner, clock,
                             0.2 if threads > 1 else 0.0)
        fig["tessera"] = round(tt / per * scale, 4)
    else:
        tb = interleaved(anchor_fn, anchor_fn, rounds, inner, clock)[0]
    fig["anchor"] = round(tb / per * scale, 4)
    fig["load"] = loadavg()
    return fig


def report(fig: dict, as_json: bool) -> None:
    if as_json:
        print(json.dumps(fig))
    else:
        t, a = fig["tessera"], fig["anchor"]
        ratio = f"{a / t:.2f}x" if t else "n/a"
        ts = f"{t:.3f}" if t is not None else "n/a"
        print(f"{fig['figure']:<22} tessera {ts:>10} {fig['unit']}  OpenBLAS {a:>10.3f} {fig['unit']}"
              f"  speedup {ratio:>6} (goal {fig['goal']})  load {fig['load']}")
    sys.stdout.flush()


def main() -> None:
    args = ARGS
    rounds = args.rounds or (3 if args.quick else 9)
    names = args.figures or ["1024", "2048", "qkT-128", "pv-128"]
    if args.quick and args.figures is None:
        names = ["1024", "qkT-128", "pv-128"]
    if args.blas_threads:
        for name in names:
            report(run_figure(name, args.blas_threads, rounds, args.quick), args.json)
        return
    for name in names:
        report(run_figure(name, 1, rounds, args.quick), args.json)
    # 2 threads: OpenBLAS reads its thread count once, so in a child process
    cmd = [sys.executable, os.path.abspath(__file__), "--blas-threads", "2", "--rounds", str(rounds),
           "--clock", args.clock,
           "--figures", *[n for n in names if n in ("1024", "2048")]]
    if args.quick:
        cmd.append("--quick")
    if args.json:
        cmd.append("--json")
    if any(n in ("1024", "2048") for n in names):
        sys.stdout.flush()
        subprocess.run(cmd, check=True)


if __name__ == "__main__":
    main()
