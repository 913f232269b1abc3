#!/usr/bin/env python3
"""A bitonic sort of one (8, 128) f32 block (each of the 8 rows of 128
lanes sorted ascending; one vreg),
written as a Pallas user would (tallax-style compare-exchange steps with
iota, pltpu.roll, where, minimum, maximum), timed

* in JAX's HLO interpreter (`interpret=True`) and JAX's TPU interpret mode
  (`interpret=pltpu.InterpretParams()`), cold and warm;
* through tessera's JAX bridge (`tessera.jax.pallas_call`, backends interp
  and cpu), cold and warm;
* as the equivalent .tsr (bench/gen_straightline.py 450: the same 28 steps
  of 16 ops, a load and a store) with `tessera run` as whole processes
  (interpreter; cpu cold with TESSERA_CACHE=off; cpu warm from the disk
  cache), and the compiled kernel called warm through the C API
  (tessera.compile(..., backend="cpu"), numpy in and out).

Cold: the first call in a fresh process after its imports (jax.jit: trace,
lower, compile, run; tessera cpu: with the disk cache off, so the kernel is
compiled). Warm: median of --repeat calls after one untimed call. Whole
processes: median wall time of --repeat runs. Milliseconds.

    PYTHONPATH=python TESSERA_LIBRARY=build/libtessera.so JAX_PLATFORMS=cpu \\
        python bench/python/bench_sort128.py [--repeat 20] [--tessera build/tools/tessera]

Speed is measured here, never asserted in tests; the outputs are checked
against numpy.sort.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
LANES = 128
SHAPE = (8, LANES)

MODES = {
    "jax-hlo": "JAX interpret=True",
    "jax-tpu": "JAX TPU interpret",
    "tessera-interp": "tessera.jax interp",
    "tessera-cpu": "tessera.jax cpu",
}


def bitonic_kernel(x_ref, o_ref):
    """Each row of the block sorted ascending: the bitonic network on 128
    lanes, every mask computed inline as a straightforward port does."""
    import jax.numpy as jnp
    from jax import lax
    from jax.experimental.pallas import tpu as pltpu

    v = x_ref[...]
    lane = lax.broadcasted_iota(jnp.int32, v.shape, 1)
    k = 2
    while k <= LANES:
        j = k // 2
        while j >= 1:
            low = (lane & j) == 0          # this lane's partner is at +j
            ascending = (lane & k) == 0     # this lane is in an ascending run
            up = pltpu.roll(v, LANES - j, 1)  # v[i + j]
            down = pltpu.roll(v, j, 1)        # v[i - j]
            partner = jnp.where(low, up, down)
            smaller = jnp.minimum(v, partner)
            larger = jnp.maximum(v, partner)
            v = jnp.where(low == ascending, smaller, larger)
            j //= 2
        k *= 2
    o_ref[...] = v


def make_call(mode: str):
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    out = jax.ShapeDtypeStruct(SHAPE, jnp.float32)
    if mode == "jax-hlo":
        return jax.jit(pl.pallas_call(bitonic_kernel, out, interpret=True))
    if mode == "jax-tpu":
        return jax.jit(pl.pallas_call(bitonic_kernel, out,
                                      interpret=pltpu.InterpretParams()))
    import tessera.jax as tj

    backend = mode.split("-", 1)[1]
    return tj.pallas_call(bitonic_kernel, out, backend=backend)


def inputs():
    import numpy as np

    return np.random.RandomState(14).standard_normal(SHAPE).astype(np.float32)


def check(y) -> None:
    import numpy as np

    x = inputs()
    if not np.array_equal(np.asarray(y), np.sort(x, axis=1)):
        raise SystemExit("the sort's output differs from numpy.sort")


def child(mode: str) -> dict:
    import jax

    x = inputs()
    f = make_call(mode)
    t = time.perf_counter()
    y = jax.block_until_ready(f(x))
    first = time.perf_counter() - t
    check(y)
    return {"first_ms": first * 1e3}


def cold(mode: str) -> float | None:
    env = dict(os.environ, JAX_PLATFORMS="cpu", TESSERA_CACHE="off")
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", mode],
                          capture_output=True, text=True, timeout=1800, env=env)
    if proc.returncode != 0:
        print(f"# {mode} cold failed: {(proc.stderr.strip().splitlines() or ['?'])[-1][:200]}")
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])["first_ms"]


def warm(mode: str, repeat: int) -> float:
    import jax

    x = inputs()
    f = make_call(mode)
    check(jax.block_until_ready(f(x)))
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        jax.block_until_ready(f(x))
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def process_ms(argv: list[str], env: dict, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        subprocess.run(argv, check=True, env=env, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def tsr_rows(tessera_bin: str, repeat: int) -> list[tuple[str, float]]:
    """`tessera run` whole processes and the compiled kernel's warm call."""
    import numpy as np

    import tessera

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        kernel = os.path.join(tmp, "sort128.tsr")
        with open(kernel, "w") as f:
            subprocess.run([sys.executable, os.path.join(ROOT, "bench", "gen_straightline.py"),
                            "450"], check=True, stdout=f)
        x = inputs()
        np.save(os.path.join(tmp, "x.npy"), x)
        run = [tessera_bin, "run", kernel, "--in", f"x={os.path.join(tmp, 'x.npy')}",
               "--out", f"y={os.path.join(tmp, 'y.npy')}", "-q"]
        env = dict(os.environ, TESSERA_CACHE_DIR=os.path.join(tmp, "cache"))
        rows.append(("tessera run, interpreter (whole process)", process_ms(run, env, repeat)))
        check(np.load(os.path.join(tmp, "y.npy")))
        cold_env = dict(env, TESSERA_CACHE="off")
        rows.append(("tessera run --backend cpu, cold: compiled (whole process)",
                     process_ms(run + ["--backend", "cpu"], cold_env, max(3, repeat // 4))))
        check(np.load(os.path.join(tmp, "y.npy")))
        subprocess.run(run + ["--backend", "cpu"], check=True, env=env)
        rows.append(("tessera run --backend cpu, warm: from the disk cache (whole process)",
                     process_ms(run + ["--backend", "cpu"], env, repeat)))
        check(np.load(os.path.join(tmp, "y.npy")))
        k = tessera.Module.load(kernel).kernels[0]
        for backend in ("interp", "cpu"):
            exe = tessera.compile(k, backend=backend)
            check(exe(x))
            times = []
            for _ in range(max(repeat, 200) if backend == "cpu" else repeat):
                t = time.perf_counter()
                exe(x)
                times.append(time.perf_counter() - t)
            rows.append((f"tessera.compile(backend={backend!r}) call, warm (numpy in and out)",
                         statistics.median(times) * 1e3))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--mode", action="append", default=[], choices=list(MODES))
    parser.add_argument("--tessera", default=os.path.join(ROOT, "build", "tools", "tessera"))
    parser.add_argument("--child", metavar="MODE", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    if args.child:
        print(json.dumps(child(args.child)))
        return 0
    print("| run | cold | warm |")
    print("|---|---:|---:|")
    for mode in args.mode or list(MODES):
        c = cold(mode)
        w = warm(mode, args.repeat)
        print(f"| {MODES[mode]} | {'error' if c is None else f'{c:.3g}'} | {w:.3g} |",
              flush=True)
    for name, ms in tsr_rows(args.tessera, args.repeat):
        print(f"| {name} | | {ms:.3g} |" if "warm" in name and "call" in name
              else f"| {name} | {ms:.3g} | |" if "cold" in name
              else f"| {name} | | {ms:.3g} |", flush=True)
    print()
    print("Milliseconds; every output checked against numpy.sort.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
