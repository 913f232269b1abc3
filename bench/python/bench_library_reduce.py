#!/usr/bin/env python3
"""The kernel library's reductions and cumulative sums from Python, next to
numpy and JAX on this CPU (docs/benchmarks.md, "The library's scans and
reductions").

    TESSERA_LIBRARY=build/libtessera.so JAX_PLATFORMS=cpu \\
        /work/venv312/bin/python bench/python/bench_library_reduce.py [--reps N]

Each figure is the best of --reps calls (default 10) after one warm-up call
(which generates, compiles and caches the kernel): tessera.reduce /
tessera.cumulative with backend="cpu" and "interp" (the numpy-level API:
the C run plus the binding's copy-free call), numpy, and jax.jit of
jax.numpy / jax.lax on the CPU backend of XLA (block_until_ready, inputs
already on the device). Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "python"))

import ml_dtypes  # noqa: E402

import tessera  # noqa: E402


def best(f, reps):
    f()
    t = 1e30
    for _ in range(reps):
        t0 = time.perf_counter()
        f()
        t = min(t, time.perf_counter() - t0)
    return t


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--no-jax", action="store_true")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    f32 = rng.standard_normal((4096, 4096)).astype(np.float32)
    bf16 = rng.standard_normal((4096, 8192)).astype(np.float32).astype(ml_dtypes.bfloat16)
    one_d = rng.standard_normal(1 << 20).astype(np.float32)
    if not args.no_jax:
        import jax
        import jax.numpy as jnp
    cases = [
        ("sum f32 64 MiB", f32, "reduce", "sum", None),
        ("max f32 64 MiB", f32, "reduce", "max", None),
        ("sum bf16 64 MiB", bf16, "reduce", "sum", None),
        ("row sums f32 (axis 1)", f32, "reduce", "sum", 1),
        ("column sums f32 (axis 0)", f32, "reduce", "sum", 0),
        ("argmax f32 (axis 1)", f32, "reduce", "argmax", 1),
        ("cumsum f32 4096x4096 (axis 1)", f32, "scan", "sum", 1),
        ("cumsum f32 4096x4096 (axis 0)", f32, "scan", "sum", 0),
        ("cumsum f32 1M (1-D)", one_d, "scan", "sum", 0),
    ]
    print("| case | tessera cpu | tessera interp | numpy | jax.jit (XLA CPU) |")
    print("|---|---:|---:|---:|---:|")
    for name, x, kind, op, axis in cases:
        row = [name]
        for backend in ("cpu", "interp"):
            if kind == "reduce":
                f = lambda: tessera.reduce(x, op, axis=axis, backend=backend)  # noqa: E731
            else:
                f = lambda: tessera.cumulative(x, op, axis=axis, backend=backend)  # noqa: E731
            row.append(f"{best(f, args.reps if backend == 'cpu' else 3) * 1e3:.2f} ms")
        if kind == "reduce":
            g = lambda: getattr(np, op)(x, axis=axis)  # noqa: E731
        else:
            g = lambda: np.cumsum(x, axis=axis)  # noqa: E731
        row.append(f"{best(g, 3) * 1e3:.2f} ms")
        if args.no_jax:
            row.append("-")
        else:
            xj = jax.device_put(x)
            if kind == "reduce":
                h = jax.jit(lambda v: getattr(jnp, op)(v, axis=axis))
            else:
                h = jax.jit(lambda v: jax.lax.cumsum(v, axis=axis))
            row.append(f"{best(lambda: h(xj).block_until_ready(), 3) * 1e3:.2f} ms")
        print("| " + " | ".join(row) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
