#!/usr/bin/env python3
"""Whether a split pays: tessera's learned choice of host threads against
splitting every run and against one thread, warm under jax.jit, with
JAX's `interpret=True` for scale (docs/benchmarks.md, "Whether a split
pays").

Columns, on the same kernels of python/tests/pallas_kernels/, in one
process per backend:
  learned      the default (a kernel's runs measure both ways, then take
               the faster; docs/semantics.md, "Host threads")
  always       TESSERA_SPLIT=always: every run that may split does (what
               every run did before the choice was learned)
  threads=1    the same kernel with threads=1
  interpret=True  JAX's HLO interpreter

Each round runs --calls calls per column and takes their median; the order
of the four columns rotates from round to round, so that no column always
follows XLA's work (its threads go on spinning for a while after it).
Reported: the medians of the rounds' medians, in µs.

    PYTHONPATH=python TESSERA_LIBRARY=build-bench/libtessera.so JAX_PLATFORMS=cpu \\
        python bench/python/bench_split.py [--backend cpu] [--rounds 8] [--calls 50] \\
        [KERNEL ...]

Speed is measured here, never asserted in tests.
"""

from __future__ import annotations

import argparse
import functools
import os
import pathlib
import statistics
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
KERNELS = ("bf16_axpy", "int_hash", "softmax", "matmul", "add")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kernels", nargs="*", default=list(KERNELS))
    parser.add_argument("--backend", action="append", choices=("cpu", "interp"), default=[])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--calls", type=int, default=50)
    args = parser.parse_args(argv)
    sys.path[:0] = [str(ROOT / "python" / "tests"), str(ROOT / "bench" / "python")]
    import jax

    import bench_jax as B
    import pallas_kernels as pk
    from pallas_kernels import _harness as H
    from pallas_kernels import _pdiff as D

    def timed(f, inputs) -> float:
        ts = []
        for _ in range(args.calls):
            t = time.perf_counter()
            jax.block_until_ready(f(*inputs))
            ts.append(time.perf_counter() - t)
        return statistics.median(ts) * 1e6

    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    print(f"load {load}")
    print("| kernel | backend | learned | always split | threads=1 | interpret=True "
          "| interpret=True / learned | always / learned |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for backend in args.backend or ["cpu", "interp"]:
        for case in args.kernels:
            fn, inputs = pk.build(case)
            pc = H.tessera_call(backend, for_test=False, **D.case_options(case))
            if pc is None:
                print(f"| {case} | {backend} | n/a (no tessera.jax) | | | | | |")
                continue
            ins = tuple(jax.device_put(x) for x in inputs)
            f = jax.jit(functools.partial(fn, pc))
            f1 = jax.jit(functools.partial(fn, functools.partial(pc, threads=1)))
            g, _ = B.jitted(case, "jax-hlo")
            for h in (f, f1, g):
                jax.block_until_ready(h(*ins))
            res: dict[str, list[float]] = {"learned": [], "always": [], "one": [], "anchor": []}

            def learned():
                res["learned"].append(timed(f, ins))

            def always():
                os.environ["TESSERA_SPLIT"] = "always"
                try:
                    res["always"].append(timed(f, ins))
                finally:
                    os.environ.pop("TESSERA_SPLIT", None)

            def one():
                res["one"].append(timed(f1, ins))

            def anchor():
                res["anchor"].append(timed(g, ins))

            os.environ.pop("TESSERA_SPLIT", None)
            steps = [learned, always, one, anchor]
            for r in range(args.rounds):
                for k in range(len(steps)):
                    steps[(r + k) % len(steps)]()
            m = {k: statistics.median(v) for k, v in res.items()}
            print(f"| {case} | {backend} | {m['learned']:.1f} | {m['always']:.1f} | "
                  f"{m['one']:.1f} | {m['anchor']:.1f} | {m['anchor'] / m['learned']:.2f}x | "
                  f"{m['always'] / m['learned']:.2f}x |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
