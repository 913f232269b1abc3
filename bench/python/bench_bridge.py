"""Per-call overhead of the JAX bridge (tessera.jax) against calling the C
API directly on the same prepared kernel, plus the first (cold) call and
JAX's own interpret=True and dispatch for scale. Figures go to docs/jax.md.

    TESSERA_LIBRARY=build/libtessera.so JAX_PLATFORMS=cpu \
        PYTHONPATH=python python bench/python/bench_bridge.py [--repeat N]

The kernels are the differential tests' (python/tests/pallas_kernels/).
Columns (median of N warm calls, after 3 warm-up calls):
  cold       the first call of a new callable in a warm process (trace,
             translate, prepare, run)
  c_api      tsr_executable_run through ctypes on prebuilt tsr_array_t's
             pointing at numpy buffers: the floor a binding can reach
  eager      the callable tessera.jax.pallas_call returns, numpy arrays in,
             jax arrays out
  eager_jax  the same on jax arrays (on the CPU device): a JAX program's
             eager call
  eager_np   numpy in, numpy out (numpy_outputs=True)
  jit        the call inside jax.jit, on jax arrays (an XLA FFI custom call,
             the default)
  jit_pcb    inside jax.jit with jit_callback="pure_callback"
  jax_floor  a jitted function returning its first argument, on the same
             jax arrays: JAX's own dispatch, below which no JAX call goes
  jax_interp pl.pallas_call(interpret=True) under jax.jit, for scale
"""

from __future__ import annotations

import argparse
import ctypes
import functools
import pathlib
import statistics
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl

import tessera
import tessera.jax as tj
from tessera import _capi

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "python" / "tests"))
from pallas_kernels import add, matmul, softmax  # noqa: E402

CASES = [
    ("add 8x128 (1 step)", add.build(m=8, n=128, bm=8)),
    ("add 1024x512 (8 steps)", add.build()),
    ("matmul 256x512x256 (16 steps)", matmul.build()),
    ("softmax 64x256 (8 steps)", softmax.build()),
]


def callable_of(fn, pallas_call, inputs):
    """The callable `pallas_call` makes inside the test kernel's `fn`."""
    made = []

    def keep(*args, **kwargs):
        made.append(pallas_call(*args, **kwargs))
        return made[-1]
    fn(keep, *inputs)
    return made[0]


def timed(fn, repeat):
    for _ in range(3):
        fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def c_api_loop(exe: tessera.Executable, inputs):
    """A closure calling tsr_executable_run directly on prebuilt arrays."""
    h = _capi.lib()
    arrays = [np.ascontiguousarray(x) for x in inputs]
    arrays += [np.empty(o.shape, o.dtype) for o in exe.outputs]
    operands = list(exe.inputs) + list(exe.outputs)
    structs = (_capi.Array * len(arrays))()
    ptrs = (ctypes.POINTER(_capi.Array) * len(arrays))()
    for i, (x, o) in enumerate(zip(arrays, operands)):
        structs[i].dtype = tessera.dtypes().index(o.dtype_name)
        structs[i].rank = x.ndim
        for d, extent in enumerate(x.shape):
            structs[i].dims[d] = extent
        structs[i].data = x.ctypes.data
        ptrs[i] = ctypes.pointer(structs[i])
    handle, n = exe._handle, len(arrays)
    result = ctypes.c_void_p()
    run, destroy = h.tsr_executable_run, h.tsr_run_result_destroy

    def call():
        status = run(handle, ptrs, n, None, ctypes.byref(result))
        destroy(result)
        assert not status
    return call, arrays


def fmt(s):
    return f"{s * 1e6:.1f} us" if s < 1e-3 else f"{s * 1e3:.2f} ms"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=200)
    args = ap.parse_args(argv)
    print(f"jax {jax.__version__}, python {sys.version.split()[0]}, "
          f"library {tessera._lib.library_path()}")
    cols = ["cold", "c_api", "eager", "eager_jax", "eager_np", "jit", "jit_pcb", "jax_floor",
            "jax_interp"]
    print("| kernel | " + " | ".join(cols) + " | eager / c_api | eager_jax / c_api | "
          "jit / c_api |")
    print("|---" * (len(cols) + 4) + "|")
    for name, (fn, xs) in CASES:
        tj.cache_clear()
        t0 = time.perf_counter()
        f = callable_of(fn, tj.pallas_call, xs)
        jax.block_until_ready(f(*xs))
        t = {"cold": time.perf_counter() - t0}
        exe = f._get(xs, list(xs))[0].runner.executable
        c_call, _keep = c_api_loop(exe, xs)
        t["c_api"] = timed(c_call, args.repeat)
        t["eager"] = timed(lambda: jax.block_until_ready(f(*xs)), args.repeat)
        jxs = [jnp.asarray(x) for x in xs]  # on the CPU device
        t["eager_jax"] = timed(lambda: jax.block_until_ready(f(*jxs)), args.repeat)
        fn_np = callable_of(fn, functools.partial(tj.pallas_call, numpy_outputs=True), xs)
        t["eager_np"] = timed(lambda: fn_np(*xs), args.repeat)
        jf = jax.jit(f)
        t["jit"] = timed(lambda: jax.block_until_ready(jf(*jxs)), args.repeat)
        fp = callable_of(fn, functools.partial(tj.pallas_call, jit_callback="pure_callback"), xs)
        jp = jax.jit(fp)
        t["jit_pcb"] = timed(lambda: jax.block_until_ready(jp(*jxs)), args.repeat)
        first = jax.jit(lambda *a: a[0])
        t["jax_floor"] = timed(lambda: jax.block_until_ready(first(*jxs)), args.repeat)
        ji = jax.jit(lambda *a: fn(functools.partial(pl.pallas_call, interpret=True), *a))
        t["jax_interp"] = timed(lambda: jax.block_until_ready(ji(*jxs)),
                                max(10, args.repeat // 10))
        c = t["c_api"]
        print(f"| {name} | " + " | ".join(fmt(t[k]) for k in cols) +
              f" | {t['eager'] / c:.2f}x | {t['eager_jax'] / c:.2f}x | {t['jit'] / c:.2f}x |",
              flush=True)


if __name__ == "__main__":
    main()
