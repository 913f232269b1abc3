#!/usr/bin/env python3
"""Host threads (docs/semantics.md, "Host threads"; docs/benchmarks.md,
"threads"): how runs scale with the `threads` option on this machine, with a
taskset sweep, and how `pytest -n` (pytest-xdist) scales over a suite of
kernel tests.

* matmul_1024 (bench/kernels/lowered.tsr: 1024^3 f32, grid (8, 8, 8),
  parallel x parallel x arbitrary) through `tessera.compile`, and JAX's flash
  attention forward, causal, f32 [1, 4, 512, 128], through tessera.jax
  (jax.jit traced under `tessera.jax.interpret(backend=..., threads=N)`),
  on both backends. Each figure is measured in a subprocess pinned with
  `taskset -c 0` or `taskset -c 0,1`; inside it, threads=1 and threads=2
  calls alternate (warm: one untimed call first), medians of the rounds.
  The taskset processes alternate too.
* pytest-xdist: a generated suite of kernel tests run with
  `pytest --tessera --tessera-backend cpu` and `-n 1` against `-n 2`, the
  disk cache warm (a first run fills it), wall time of the whole command,
  alternated.

tessera is found through the environment only (PYTHONPATH with
TESSERA_LIBRARY). `--json` prints one JSON object per figure and line for
bench/table.py; otherwise a table. `--quick`: few repetitions. Speed is
measured here, never asserted in tests.

    PYTHONPATH=python TESSERA_LIBRARY=build/libtessera.so JAX_PLATFORMS=cpu \\
        python bench/bench_threads.py [--json] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
LOWERED = os.path.join(HERE, "kernels", "lowered.tsr")


def load() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


# ---- In a pinned subprocess -------------------------------------------------------

def _matmul(backend: str):
    import numpy as np
    import tessera

    k = tessera.Module.parse(open(LOWERED).read(), LOWERED)["matmul_1024"]
    rng = np.random.default_rng(1)
    a = rng.standard_normal((1024, 1024)).astype(np.float32)
    b = rng.standard_normal((1024, 1024)).astype(np.float32)

    def make(n):
        try:
            exe = tessera.compile(k, backend, threads=n)
        except TypeError:  # a tessera without the option
            if n != 1:
                return None
            exe = tessera.compile(k, backend)
        return lambda: exe(a, b)
    return make


def _flash(backend: str):
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import jax
    import numpy as np
    import tessera.jax as tj
    from jax.experimental.pallas.ops.tpu import flash_attention as fa

    shape = (1, 4, 512, 128)
    rng = np.random.default_rng(2)
    q, k, v = (jax.numpy.asarray(rng.standard_normal(shape, dtype=np.float32)) for _ in range(3))
    bs = fa.BlockSizes.get_default(*shape[:3], shape[2], shape[3])

    def make(n):
        opts = {"backend": backend, "threads": n}
        if n == 1:
            try:
                with tj.interpret(**opts):
                    pass
            except TypeError:
                opts.pop("threads")
        f = jax.jit(lambda q, k, v: fa.flash_attention(q, k, v, causal=True, block_sizes=bs))
        try:
            ctx = tj.interpret(**opts)
        except TypeError:
            return None

        def call():
            with ctx:  # the options are part of jax.jit's key: called inside
                return jax.block_until_ready(f(q, k, v))
        return call
    return make


def child(kind: str, reps: int) -> dict:
    what, backend = kind.rsplit("-", 1)
    make = {"matmul": _matmul, "flash": _flash}[what](backend)
    fns = {n: make(n) for n in (1, 2)}
    times = {n: [] for n in fns if fns[n]}
    for n in times:
        fns[n]()  # warm
    for _ in range(reps):
        for n in times:
            t = time.perf_counter()
            fns[n]()
            times[n].append(time.perf_counter() - t)
    return {str(n): statistics.median(v) for n, v in times.items()}


# ---- The driver -------------------------------------------------------------------

KINDS = [("matmul-cpu", "matmul_1024 (1024^3 f32), cpu backend"),
         ("matmul-interp", "matmul_1024 (1024^3 f32), interpreter"),
         ("flash-cpu", "flash attention fwd causal f32 [1,4,512,128], cpu backend"),
         ("flash-interp", "flash attention fwd causal f32 [1,4,512,128], interpreter")]


def pinned(cpus: str, kind: str, reps: int) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--child", kind, str(reps)]
    if shutil.which("taskset"):
        cmd = ["taskset", "-c", cpus] + cmd
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{kind} on cpus {cpus}: {p.stderr[-2000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


XDIST_SUITE = '''
import jax, jax.numpy as jnp, numpy as np, pytest
from jax.experimental import pallas as pl

@pytest.mark.parametrize("n", range({count}))
def test_kernel(n):
    def k(x_ref, y_ref, o_ref):
        acc = x_ref[...]
        for _ in range(n % 4 + 1):
            acc = jnp.dot(acc, y_ref[...]) * 0.5 + float(n)
        o_ref[...] = acc
    x = np.ones((256, 128), np.float32)
    y = np.eye(128, dtype=np.float32)
    f = pl.pallas_call(k, jax.ShapeDtypeStruct((256, 128), jnp.float32), grid=(4,),
                       in_specs=[pl.BlockSpec((64, 128), lambda i: (i, 0)),
                                 pl.BlockSpec((128, 128), lambda i: (0, 0))],
                       out_specs=pl.BlockSpec((64, 128), lambda i: (i, 0)), interpret=True)
    for _ in range(20):
        out = np.asarray(f(x, y))
    assert out.shape == (256, 128)
'''


def xdist(rounds: int, count: int) -> dict | None:
    try:
        import xdist  # noqa: F401
    except ImportError:
        return None
    tmp = tempfile.mkdtemp(prefix="tessera-xdist-")
    try:
        with open(os.path.join(tmp, "test_suite.py"), "w") as f:
            f.write(XDIST_SUITE.format(count=count))
        env = dict(os.environ, TESSERA_CACHE_DIR=os.path.join(tmp, "cache"))
        env["PYTHONPATH"] = os.pathsep.join(os.path.abspath(p) for p in
                                            env.get("PYTHONPATH", "").split(os.pathsep) if p)
        if env.get("TESSERA_LIBRARY"):
            env["TESSERA_LIBRARY"] = os.path.abspath(env["TESSERA_LIBRARY"])
        from importlib.metadata import entry_points
        plugin = ([] if any(ep.value == "tessera.jax.pytest_plugin"
                            for ep in entry_points(group="pytest11"))
                  else ["-p", "tessera.jax.pytest_plugin"])

        def run(workers):
            cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n",
                   str(workers), *plugin, "--tessera", "--tessera-backend", "cpu",
                   "--tessera-threads", "1", "test_suite.py"]
            t = time.perf_counter()
            p = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True)
            dt = time.perf_counter() - t
            if p.returncode != 0:
                raise RuntimeError(p.stdout[-2000:] + p.stderr[-2000:])
            return dt
        run(2)  # fills the disk cache
        times = {1: [], 2: []}
        for _ in range(rounds):
            for w in (1, 2):
                times[w].append(run(w))
        return {w: statistics.median(v) for w, v in times.items()}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true", help="one JSON object per figure and line")
    ap.add_argument("--quick", action="store_true", help="few repetitions (a smoke run)")
    ap.add_argument("--kind", action="append", help="only these figures (matmul-cpu, ...)")
    ap.add_argument("--no-xdist", action="store_true")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], int(args.child[1]))))
        return 0
    rounds = 1 if args.quick else 3
    reps = 2 if args.quick else 5
    rows = []
    for kind, label in KINDS:
        if args.kind and kind not in args.kind:
            continue
        r = reps if "interp" not in kind or "flash" in kind else max(1, reps // 2)
        got = {"0": [], "0,1": []}
        ld = load()
        for _ in range(rounds):
            for cpus in got:
                got[cpus].append(pinned(cpus, kind, r))
        med = {cpus: {n: statistics.median(x[n] for x in v) if all(n in x for x in v) else None
                      for n in ("1", "2")} for cpus, v in got.items()}
        ms = lambda x: None if x is None else round(x * 1e3, 3)  # noqa: E731
        rows.append({"figure": f"threads/{kind}", "label": f"{label}: 2 threads vs 1 "
                     "(taskset -c 0,1)", "unit": "ms", "tessera": ms(med["0,1"]["2"]),
                     "anchor": ms(med["0,1"]["1"]), "anchor_name": "tessera, 1 thread",
                     "goal": 1.5, "load": ld})
        rows.append({"figure": f"threads/{kind}/one-core", "label": f"{label}: 2 threads vs 1 "
                     "on one core (taskset -c 0)", "unit": "ms", "tessera": ms(med["0"]["2"]),
                     "anchor": ms(med["0"]["1"]), "anchor_name": "tessera, 1 thread",
                     "goal": 0.9, "load": ld})
        for row in rows[-2:]:
            emit(row, args.json)
    if not args.no_xdist and not args.kind:
        ld = load()
        x = xdist(1 if args.quick else 3, 8 if args.quick else 16)
        if x:
            rows.append({"figure": "threads/pytest-xdist", "label": "pytest --tessera (cpu) over "
                         "a suite of kernel tests, warm disk cache: -n 2 vs -n 1", "unit": "s",
                         "tessera": round(x[2], 3), "anchor": round(x[1], 3),
                         "anchor_name": "pytest -n 1", "goal": 1.3, "load": ld})
            emit(rows[-1], args.json)
    return 0


def emit(row: dict, as_json: bool) -> None:
    """Prints one figure as soon as it is measured."""
    if as_json:
        print(json.dumps(row), flush=True)
        return
    t, a = row["tessera"], row["anchor"]
    ratio = f"{a / t:.2f}x" if t and a else "n/a"
    print(f"{row['figure']:34} {str(t):>10} {str(a):>10} {row['unit']:3} speedup "
          f"{ratio:>6} (goal {row['goal']}x)  load {row['load']}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
