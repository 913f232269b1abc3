#!/usr/bin/env python3
"""Cost of one grid step: tessera's interpreter (tessera.jax.pallas_call,
backend "interp", or --backend cpu) against JAX's `interpret=True` (the
kernel as an XLA program), warm, in process.

The kernel adds 1 to its block: grids of 100, 300, 1,000 and 3,000 steps of
a 1-element block (f32[N], block (1,)) and of an (8, 128) block
(f32[8N, 128]). Both sides are jitted; each round calls tessera then the
anchor (A/B interleaved), --repeat rounds, medians. Reported per size: the
call time divided by the steps, and the slope (least squares of the medians
over the sizes: the cost of one more step, without the call's fixed cost).

    PYTHONPATH=python TESSERA_LIBRARY=build-bench/libtessera.so JAX_PLATFORMS=cpu \\
        python bench/python/bench_steps.py [--repeat 15] [--quick] [--json]

Speed is measured here, never asserted in tests (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

SIZES = (100, 300, 1000, 3000)
BLOCKS = {"1": "1-element block", "8x128": "(8, 128) block"}


def load() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def make(block: str, steps: int, backend: str):
    """(tessera call, anchor call, input): both jitted."""
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl

    import tessera.jax as tj

    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] + 1.0

    if block == "1":
        shape, blk, imap = (steps,), (1,), (lambda i: (i,))
    else:
        shape, blk, imap = (8 * steps, 128), (8, 128), (lambda i: (i, 0))
    kw = dict(grid=(steps,), in_specs=[pl.BlockSpec(blk, imap)],
              out_specs=pl.BlockSpec(blk, imap),
              out_shape=jax.ShapeDtypeStruct(shape, jnp.float32))
    x = jax.device_put(jnp.arange(int(jnp.prod(jnp.array(shape))),
                                  dtype=jnp.float32).reshape(shape))
    # warnings="collect": a 1-element block breaks the TPU's tiling rule
    # (a warning at compile time, nothing per run)
    tess = jax.jit(tj.pallas_call(kernel, backend=backend, warnings="collect", **kw))
    anchor = jax.jit(pl.pallas_call(kernel, interpret=True, **kw))
    return tess, anchor, x


def measure(tess, anchor, x, repeat: int) -> tuple[float, float]:
    """Median seconds per call of (tessera, anchor), interleaved."""
    import jax
    import numpy as np

    a = np.asarray(jax.block_until_ready(tess(x)))
    b = np.asarray(jax.block_until_ready(anchor(x)))
    if not np.array_equal(a, b):
        raise SystemExit("bench_steps: tessera and interpret=True disagree")
    ts, us = [], []
    for _ in range(repeat):
        t = time.perf_counter()
        jax.block_until_ready(tess(x))
        ts.append(time.perf_counter() - t)
        t = time.perf_counter()
        jax.block_until_ready(anchor(x))
        us.append(time.perf_counter() - t)
    return statistics.median(ts), statistics.median(us)


def slope(points: list[tuple[int, float]]) -> float:
    """Least-squares slope of (steps, seconds)."""
    n = len(points)
    mx = sum(p[0] for p in points) / n
    my = sum(p[1] for p in points) / n
    sxx = sum((p[0] - mx) ** 2 for p in points)
    return sum((p[0] - mx) * (p[1] - my) for p in points) / sxx if sxx else 0.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--quick", action="store_true", help="few rounds, two sizes")
    parser.add_argument("--json", action="store_true",
                        help="one JSON object per line per figure (bench/table.py)")
    parser.add_argument("--backend", default="interp", choices=("interp", "cpu"))
    parser.add_argument("--block", action="append", choices=list(BLOCKS), default=[])
    args = parser.parse_args(argv)
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    sizes = (100, 1000) if args.quick else SIZES
    repeat = 3 if args.quick else args.repeat
    try:
        import tessera.jax  # noqa: F401
    except ImportError as exc:
        have = False
        print(f"bench_steps: tessera.jax is not importable ({exc})", file=sys.stderr)
    else:
        have = True
    rows = []
    for block in args.block or list(BLOCKS):
        pts_t, pts_a = [], []
        for n in sizes:
            if not have:
                continue
            tess, anchor, x = make(block, n, args.backend)
            # the (8, 128) anchor copies its whole array at every step: fewer
            # rounds at the large sizes keep the run short
            r = repeat if block == "1" or n <= 300 else max(3, repeat // 3)
            t, a = measure(tess, anchor, x, r)
            pts_t.append((n, t))
            pts_a.append((n, a))
            rows.append((block, str(n), t / n * 1e6, a / n * 1e6, load()))
        if have:
            rows.append((block, "slope", slope(pts_t) * 1e6, slope(pts_a) * 1e6, load()))
        else:
            rows.append((block, "slope", None, None, load()))
    if args.json:
        for block, n, t, a, ld in rows:
            what = "one more step (slope)" if n == "slope" else f"{n} steps, call/steps"
            print(json.dumps({
                "figure": f"interp-steps/{block}/{n}" if args.backend == "interp"
                else f"cpu-steps/{block}/{n}",
                "label": f"µs per grid step, {BLOCKS[block]}, {what}, warm: tessera "
                         f"{args.backend} vs JAX interpret=True",
                "unit": "us", "tessera": None if t is None else round(t, 4),
                "anchor": None if a is None else round(a, 4),
                "anchor_name": "JAX interpret=True", "goal": 1.0, "load": ld}),
                flush=True)
        return 0
    print(f"| block | steps | tessera {args.backend} µs/step | interpret=True µs/step "
          "| ratio | load |")
    print("|---|---|---|---|---|---|")
    for block, n, t, a, ld in rows:
        if t is None:
            print(f"| {BLOCKS[block]} | {n} | n/a | n/a | | {ld} |")
            continue
        print(f"| {BLOCKS[block]} | {n} | {t:.3f} | {a:.3f} | {t / a:.2f}x | {ld} |")
    print(f"\nMedians of {repeat} interleaved rounds; `slope`: least squares over the "
          "sizes (the cost of one more step). ratio = tessera / anchor (< 1: faster).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
