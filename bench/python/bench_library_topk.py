"""Top-k of the kernel library (kernels/topk.c) next to numpy and
jax.lax.top_k on CPU, for docs/benchmarks.md ("Top-k, second round").
Run from the source tree with the build in build/:

    TESSERA_LIBRARY=$PWD/build/libtessera.so PYTHONPATH=$PWD/python \\
        JAX_PLATFORMS=cpu .venv/bin/python bench/python/bench_library_topk.py

Warm figures: a prepared executable called in this process (the
numpy-to-tessera conversion included, as a user pays it); each figure is
the minimum and the median of repeated runs. Every tessera result is
checked against jax.lax.top_k first. `--shapes R,N,K ...` picks the cases;
`--backends` the tessera backends.

`--json [--quick]` prints one JSON object per line per figure for
bench/table.py: the warm top-16 of (128, 4096) f32 of each backend against
`jax.lax.top_k` jitted on CPU, A/B interleaved (one call of each per round,
medians over the rounds; the outputs checked equal first).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

import jax
import jax.numpy as jnp

from tessera import _library


def timed(fn, reps):
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t) * 1e3)
    return min(ts), statistics.median(ts)


def row(what, t):
    print(f"| {what} | {t[0]:.2f} | {t[1]:.2f} |")
    sys.stdout.flush()


def case(rows, n, k, backends, reps):
    x = np.random.default_rng(3).standard_normal((rows, n)).astype(np.float32)
    print(f"\n### Top-{k} of ({rows}, {n}) f32\n")
    print("| what | min ms | median ms |\n|---|---:|---:|")
    rv, ri = jax.lax.top_k(jnp.asarray(x), k)
    for backend in backends:
        exe = _library.executable("topk", backend, shape=x.shape, dtype="f32", k=k)
        vals, idx = exe(x)
        assert np.array_equal(idx, np.asarray(ri)) and np.array_equal(vals, np.asarray(rv))
        row(f"tessera {backend}", timed(lambda: exe(x), max(3, reps // (4 if backend == "interp" else 1))))

    def np_topk():
        part = np.argpartition(-x, k - 1, axis=-1)[:, :k]
        vals = np.take_along_axis(x, part, -1)
        order = np.argsort(-vals, axis=-1, kind="stable")
        return np.take_along_axis(vals, order, -1), np.take_along_axis(part, order, -1)

    row("numpy argpartition + sort", timed(np_topk, reps))
    f = jax.jit(lambda a: jax.lax.top_k(a, k))
    xa = jnp.asarray(x)
    jax.block_until_ready(f(xa))
    row("jax.lax.top_k, jit, CPU", timed(lambda: jax.block_until_ready(f(xa)), reps))


def json_figures(backends, quick):
    import json

    def load():
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])

    rows, n, k = 128, 4096, 16
    rounds = 10 if quick else 60
    x = np.random.default_rng(3).standard_normal((rows, n)).astype(np.float32)
    f = jax.jit(lambda a: jax.lax.top_k(a, k))
    xa = jnp.asarray(x)
    rv, ri = jax.block_until_ready(f(xa))
    for backend in backends:
        try:
            exe = _library.executable("topk", backend, shape=x.shape, dtype="f32", k=k)
            vals, idx = exe(x)
            assert np.array_equal(idx, np.asarray(ri)) and np.array_equal(vals, np.asarray(rv))
        except Exception as e:  # noqa: BLE001 (a build that cannot run it: null)
            print(f"# {backend}: {e}", file=sys.stderr)
            exe = None
        ts, anchor = [], []
        for _ in range(rounds):
            if exe is not None:
                t = time.perf_counter()
                exe(x)
                ts.append((time.perf_counter() - t) * 1e3)
            t = time.perf_counter()
            jax.block_until_ready(f(xa))
            anchor.append((time.perf_counter() - t) * 1e3)
        name = "cpu" if backend == "cpu" else "interpreter"
        print(json.dumps({
            "figure": f"library/topk-16-of-128x4096-{backend}",
            "label": f"top-16 of (128, 4096) f32 warm: tessera {name} vs jax.lax.top_k (jit, CPU)",
            "unit": "ms",
            "tessera": round(statistics.median(ts), 4) if ts else None,
            "anchor": round(statistics.median(anchor), 4),
            "anchor_name": "jax.lax.top_k, jitted, CPU",
            "goal": 1.0,
            "load": load(),
        }), flush=True)


def main():
    if "--json" in sys.argv:
        json_figures(["cpu", "interp"], "--quick" in sys.argv)
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", nargs="*", default=["128,4096,16", "1,100000,16",
                                                    "3,70001,64", "128,100000,16"])
    ap.add_argument("--backends", default="cpu,interp")
    ap.add_argument("--reps", type=int, default=20)
    a = ap.parse_args()
    print(f"tessera {os.environ.get('TESSERA_LIBRARY')}; numpy {np.__version__}; jax "
          f"{jax.__version__}; load {os.getloadavg()[0]:.2f}; "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    for s in a.shapes:
        rows, n, k = (int(v) for v in s.split(","))
        case(rows, n, k, a.backends.split(","), a.reps)
    print(f"\nload at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    sys.exit(main())
