"""The kernel library's sort and top-k against numpy, Highway's vqsort and
jax.lax.top_k, for docs/benchmarks.md ("The library's sort and top-k").
Run from the source tree with the build in build/:

    TESSERA_LIBRARY=$PWD/build/libtessera.so PYTHONPATH=$PWD/python \\
        JAX_PLATFORMS=cpu .venv/bin/python bench/python/bench_library_sort.py

`bench_library_sort.py 1m [ROUNDS]` times only the 1M sorts, interleaved
round by round with numpy's (for a shared machine).

`bench_library_sort.py --json [--quick]` prints one JSON object per line
per figure for bench/table.py: the warm 1M (u32 key, u32 value) sort of
the cpu backend and of the interpreter against Highway's vqsort
(hwy::K32V32, bench/bench_vqsort.cc), interleaved: each round calls
tessera once, then runs bench_vqsort for two sorts of fresh copies (the
second, warm one counts); medians over the rounds. bench_vqsort is found
through $TESSERA_VQSORT_BENCH, else beside $TESSERA_LIBRARY
(BUILD/bench/bench_vqsort), else in $TESSERA_BUILD.

Whole-process figures run build/tools/tessera as a subprocess; warm
figures call a prepared executable in this process (the array conversion
included, as a user pays it); every figure is the minimum (and the median)
of repeated runs. vqsort runs build/bench/bench_vqsort when it was built.
"""

from __future__ import annotations

import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import tessera
from tessera import _library

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("TESSERA_BUILD", ROOT / "build"))
TESSERA = BUILD / "tools" / "tessera"
VQSORT = BUILD / "bench" / "bench_vqsort"


def timed(fn, reps):
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return min(ts) * 1e3, statistics.median(ts) * 1e3


def row(name, best_med, note=""):
    best, med = best_med
    print(f"| {name} | {best:.3f} | {med:.3f} | {note} |", flush=True)


def process(args, env=None, reps=20):
    e = dict(os.environ, **(env or {}))
    return timed(lambda: subprocess.run(args, env=e, check=True, stdout=subprocess.DEVNULL),
                 reps)


def sort128(tmp):
    x = np.random.default_rng(1).standard_normal(128).astype(np.float32)
    src = tmp / "x128.npy"
    np.save(src, x)
    shm = pathlib.Path("/dev/shm") if pathlib.Path("/dev/shm").is_dir() else tmp
    print("\n### Sort of 128 f32\n")
    print("| what | min ms | median ms | note |\n|---|---:|---:|---|")
    row("interpreter, whole process (`tessera sort x.npy -o /dev/shm/y.npy`)",
        process([TESSERA, "sort", src, "-o", shm / "y128.npy"], reps=40))
    row("interpreter, whole process, output on disk (fsync'ed)",
        process([TESSERA, "sort", src, "-o", tmp / "y128.npy"], reps=20))
    row("interpreter, whole process, printing the result",
        process([TESSERA, "sort", src], reps=40))
    for target in ["host", "tpu"]:
        row(f"cpu backend, {target} kernel, whole process, cold (`TESSERA_CACHE=off`)",
            process([TESSERA, "sort", src, "-o", shm / "y128.npy", "--backend", "cpu",
                     "--target", target], env={"TESSERA_CACHE": "off"}, reps=5),
            "compile included")
    row("interpreter, tpu kernel, whole process",
        process([TESSERA, "sort", src, "-o", shm / "y128.npy", "--target", "tpu"], reps=40))
    with tempfile.TemporaryDirectory() as cache:
        env = {"TESSERA_CACHE_DIR": cache}
        subprocess.run([TESSERA, "sort", src, "-o", shm / "y128.npy", "--backend", "cpu"],
                       env=dict(os.environ, **env), check=True)
        row("cpu backend, whole process, disk cache hit",
            process([TESSERA, "sort", src, "-o", shm / "y128.npy", "--backend", "cpu"],
                    env=env, reps=20))
    for backend in ["interp", "cpu"]:
        for target in ["host", "tpu"]:
            exe = _library.executable("sort", backend, shape=(128,), dtypes=["f32"],
                                      target=_library.TARGETS[target])
            exe(x)
            row(f"{backend}, {target} kernel, warm call in-process", timed(lambda: exe(x), 300))
    row("numpy.sort", timed(lambda: np.sort(x), 1000))
    import jax
    import jax.numpy as jnp
    import tessera.jax as tj
    xa = jnp.asarray(x)
    for backend in ["interp", "cpu"]:
        f = jax.jit(lambda a, backend=backend: tj.sort(a, backend=backend))
        jax.block_until_ready(f(xa))
        row(f"tessera.jax.sort under jax.jit (backend {backend}), warm",
            timed(lambda: jax.block_until_ready(f(xa)), 300), "the JAX bridge (XLA FFI call)")
    g = jax.jit(lambda a: jax.lax.sort(a))
    jax.block_until_ready(g(xa))
    row("jax.lax.sort under jax.jit, CPU", timed(lambda: jax.block_until_ready(g(xa)), 300))


def sort1m():
    n = 1 << 20
    rng = np.random.default_rng(2)
    x = rng.standard_normal(n).astype(np.float32)
    k = rng.integers(0, 2**32, size=n, dtype=np.uint64).astype(np.uint32)
    v = np.arange(n, dtype=np.uint32)
    print("\n### Sort of 1M f32 and 1M (u32 key, u32 value)\n")
    print("| what | min ms | median ms | note |\n|---|---:|---:|---|")
    for target in ["host", "tpu"]:
        tgt = _library.TARGETS[target]
        t = time.perf_counter()
        exe = _library.executable("sort", "cpu", shape=(n,), dtypes=["f32"], target=tgt)
        prep = time.perf_counter() - t
        y = exe(x)
        assert np.array_equal(y, np.sort(x))
        row(f"tessera cpu backend, {target} kernel, f32", timed(lambda: exe(x), 5),
            f"prepare {prep * 1e3:.0f} ms (cold compile or cache hit)")
        kv = _library.executable("sort", "cpu", shape=(n,), dtypes=["u32", "u32"], target=tgt)
        sk, sv = kv(k, v)
        assert np.array_equal(sk, np.sort(k)) and np.array_equal(k[sv], sk)
        row(f"tessera cpu backend, {target} kernel, (key, value)", timed(lambda: kv(k, v), 5))
    row("numpy.sort, f32", timed(lambda: np.sort(x), 10))
    row("numpy, (key, value): argsort + 2 takes",
        timed(lambda: (lambda i: (k[i], v[i]))(np.argsort(k)), 10))
    if VQSORT.exists():
        for kind in ["f32", "kv"]:
            out = subprocess.run([VQSORT, kind, str(n), "10"], check=True, capture_output=True,
                                 text=True).stdout.split()
            print(f"| Highway vqsort, {kind} | {float(out[3]):.3f} | | best of 10, C++ |")
    else:
        print("| Highway vqsort | | | not built (libhwy-dev missing) |")
    with tempfile.TemporaryDirectory() as d:
        src = pathlib.Path(d) / "x1m.npy"
        np.save(src, x)
        for target in ["host", "tpu"]:
            row(f"tessera cpu backend, {target} kernel, f32, whole process, cold "
                "(`TESSERA_CACHE=off`)",
                process([TESSERA, "sort", src, "-o", pathlib.Path(d) / "y.npy", "--backend",
                         "cpu", "--target", target], env={"TESSERA_CACHE": "off"}, reps=2),
                "compile and .npy files included")
            row(f"tessera interpreter, {target} kernel, f32, whole process",
                process([TESSERA, "sort", src, "-o", pathlib.Path(d) / "y.npy", "--target",
                         target], reps=2 if target == "tpu" else 10),
                ".npy files included")
    ix = _library.executable("sort", "interp", shape=(n,), dtypes=["f32"],
                             target=_library.TARGETS["host"])
    row("tessera interpreter, host kernel, f32", timed(lambda: ix(x), 5))


def topk():
    import jax
    import jax.numpy as jnp
    rows, n, k = 128, 4096, 16
    x = np.random.default_rng(3).standard_normal((rows, n)).astype(np.float32)
    print(f"\n### Top-{k} of ({rows}, {n}) f32, along the last axis\n")
    print("| what | min ms | median ms | note |\n|---|---:|---:|---|")
    for backend in ["interp", "cpu"]:
        exe = _library.executable("topk", backend, shape=x.shape, dtype="f32", k=k)
        vals, idx = exe(x)
        rv, ri = jax.lax.top_k(jnp.asarray(x), k)
        assert np.array_equal(idx, np.asarray(ri))
        row(f"tessera {backend}", timed(lambda: exe(x), 3 if backend == "interp" else 10))

    def np_topk():
        part = np.argpartition(-x, k - 1, axis=-1)[:, :k]
        vals = np.take_along_axis(x, part, -1)
        order = np.argsort(-vals, axis=-1, kind="stable")
        return np.take_along_axis(vals, order, -1), np.take_along_axis(part, order, -1)

    row("numpy argpartition + sort", timed(np_topk, 20))
    f = jax.jit(lambda a: jax.lax.top_k(a, k))
    xa = jnp.asarray(x)
    jax.block_until_ready(f(xa))
    row("jax.lax.top_k, jit, CPU", timed(lambda: jax.block_until_ready(f(xa)), 20))


def sort1m_interleaved(rounds):
    """The 1M rows alone, for comparing tessera with numpy on a shared
    machine: `rounds` rounds, each timing every contender once in turn, so
    that load affects them alike; min and median over the rounds."""
    n = 1 << 20
    rng = np.random.default_rng(2)
    x = rng.standard_normal(n).astype(np.float32)
    k = rng.integers(0, 2**32, size=n, dtype=np.uint64).astype(np.uint32)
    v = np.arange(n, dtype=np.uint32)
    host = _library.TARGETS["host"]
    f32 = {b: _library.executable("sort", b, shape=(n,), dtypes=["f32"], target=host)
           for b in ["cpu", "interp"]}
    kv = {b: _library.executable("sort", b, shape=(n,), dtypes=["u32", "u32"], target=host)
          for b in ["cpu", "interp"]}
    for b in f32:
        assert np.array_equal(f32[b](x), np.sort(x))
        sk, sv = kv[b](k, v)
        assert np.array_equal(sk, np.sort(k)) and np.array_equal(k[sv], sk)
    runs = {
        "tessera cpu backend, host kernel, f32": lambda: f32["cpu"](x),
        "tessera interpreter, host kernel, f32": lambda: f32["interp"](x),
        "numpy.sort, f32": lambda: np.sort(x),
        "tessera cpu backend, host kernel, (key, value)": lambda: kv["cpu"](k, v),
        "tessera interpreter, host kernel, (key, value)": lambda: kv["interp"](k, v),
        "numpy, (key, value): argsort + 2 takes":
            lambda: (lambda i: (k[i], v[i]))(np.argsort(k)),
    }
    ts = {name: [] for name in runs}
    for _ in range(rounds):
        for name, fn in runs.items():
            t = time.perf_counter()
            fn()
            ts[name].append(time.perf_counter() - t)
    print(f"\n### Sort of 1M, {rounds} interleaved rounds\n")
    print("| what | min ms | median ms | note |\n|---|---:|---:|---|")
    for name, t in ts.items():
        row(name, (min(t) * 1e3, statistics.median(t) * 1e3))
    if VQSORT.exists():
        for kind in ["f32", "kv"]:
            out = subprocess.run([VQSORT, kind, str(n), "10"], check=True, capture_output=True,
                                 text=True).stdout.split()
            print(f"| Highway vqsort, {kind} | {float(out[3]):.3f} | | best of 10, C++ |")


def vqsort_binary():
    """bench_vqsort, found through the environment (never a fixed build)."""
    if os.environ.get("TESSERA_VQSORT_BENCH"):
        return pathlib.Path(os.environ["TESSERA_VQSORT_BENCH"])
    if os.environ.get("TESSERA_LIBRARY"):
        p = pathlib.Path(os.environ["TESSERA_LIBRARY"]).resolve().parent / "bench" / "bench_vqsort"
        if p.exists():
            return p
    return VQSORT


def vqsort_kv_ms(binary, n):
    """One warm vqsort of n (u32 key, u32 value) pairs: bench_vqsort sorts two
    fresh copies in one process and prints the faster, the warm one."""
    out = subprocess.run([binary, "kv", str(n), "2"], check=True, capture_output=True,
                         text=True).stdout.split()
    return float(out[3])


def json_figures(quick):
    """The 1M (key, value) sort against vqsort, A/B interleaved (docstring)."""
    import json

    def load():
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])

    n = 1 << 20
    rounds = 5 if quick else 25
    rng = np.random.default_rng(2)
    k = rng.integers(0, 2**32, size=n, dtype=np.uint64).astype(np.uint32)
    v = np.arange(n, dtype=np.uint32)
    binary = vqsort_binary()
    have_vq = binary.exists()
    host = _library.TARGETS["host"]
    for backend in ["cpu", "interp"]:
        label = (f"1M (u32 key, u32 value) sort warm: tessera "
                 f"{'cpu' if backend == 'cpu' else 'interpreter'} vs Highway vqsort")
        try:
            kv = _library.executable("sort", backend, shape=(n,), dtypes=["u32", "u32"],
                                     target=host)
            sk, sv = kv(k, v)
            assert np.array_equal(sk, np.sort(k)) and np.array_equal(k[sv], sk)
            assert np.array_equal(sv, np.argsort(k, kind="stable").astype(np.uint32))
        except Exception as e:  # noqa: BLE001 (a build that cannot run it: null)
            print(f"# {backend}: {e}", file=sys.stderr)
            kv = None
        ts, anchor = [], []
        for _ in range(rounds):
            if kv is not None:
                t = time.perf_counter()
                kv(k, v)
                ts.append((time.perf_counter() - t) * 1e3)
            if have_vq:
                anchor.append(vqsort_kv_ms(binary, n))
        print(json.dumps({
            "figure": f"library/sort-kv-1m-{backend}",
            "label": label,
            "unit": "ms",
            "tessera": round(statistics.median(ts), 3) if ts else None,
            "anchor": round(statistics.median(anchor), 3) if anchor else None,
            "anchor_name": "Highway vqsort (hwy::K32V32, C++)",
            "goal": 0.667,
            "load": load(),
        }), flush=True)


def main():
    if "--json" in sys.argv:
        json_figures("--quick" in sys.argv)
        return
    if len(sys.argv) > 1 and sys.argv[1] == "1m":
        print(f"numpy {np.__version__}; load {os.getloadavg()[0]:.2f}; "
              f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
        sort1m_interleaved(int(sys.argv[2]) if len(sys.argv) > 2 else 100)
        print(f"\nload at the end {os.getloadavg()[0]:.2f}")
        return
    print(f"tessera {TESSERA}; numpy {np.__version__}; {os.cpu_count()} CPUs; "
          f"load {os.getloadavg()[0]:.2f}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    with tempfile.TemporaryDirectory() as d:
        sort128(pathlib.Path(d))
    sort1m()
    topk()
    print(f"\nload at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    sys.exit(main())
