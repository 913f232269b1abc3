"""Per-call overhead of the JAX bridge (tessera.jax) against calling the C
API directly on the same prepared kernel, plus the first (cold) call and
JAX's own interpret=True for scale. Figures go to docs/jax.md.

    TESSERA_LIBRARY=build/libtessera.so JAX_PLATFORMS=cpu \
        PYTHONPATH=python python bench/python/bench_bridge.py [--repeat N]

Rows (median of N warm calls, after 3 warm-up calls):
  c_api      tsr_executable_run through ctypes on prebuilt tsr_array_t's
             pointing at numpy buffers: the floor a binding can reach
  runner     the bridge's runner on numpy arrays (operand structs, output
             allocation, the run)
  eager      the callable tessera.jax.pallas_call returns, on numpy arrays,
             returning jax arrays (cache lookup by shapes, conversions)
  eager_np   the same with numpy_outputs=True (numpy arrays back: no
             jnp.asarray of the outputs)
  jit        the same inside jax.jit (an XLA FFI custom call per call, the
             default)
  jit_pcb    inside jax.jit with jit_callback="pure_callback"
  jax_interp pl.pallas_call(interpret=True) under jax.jit, for scale
The jit columns take jax arrays (already on the CPU device); the others numpy.
"""

from __future__ import annotations

import argparse
import ctypes
import functools
import statistics
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

import tessera.jax as tj
from tessera.jax import _run

F32 = jnp.float32


def add_kernel(a_ref, b_ref, c_ref):
    c_ref[...] = a_ref[...] + b_ref[...]


def make_add(pallas_call, n, m, bn):
    spec = pl.BlockSpec((bn, m), lambda i: (i, 0))
    return pallas_call(add_kernel, jax.ShapeDtypeStruct((n, m), F32), grid=(n // bn,),
                       in_specs=[spec, spec], out_specs=spec)


def matmul_kernel(a_ref, b_ref, c_ref, acc_ref):
    @pl.when(pl.program_id(2) == 0)
    def _():
        acc_ref[...] = jnp.zeros_like(acc_ref)
    acc_ref[...] += jnp.dot(a_ref[...], b_ref[...], preferred_element_type=F32)

    @pl.when(pl.program_id(2) == pl.num_programs(2) - 1)
    def _():
        c_ref[...] = acc_ref[...]


def make_matmul(pallas_call, m, k, n, b=128):
    return pallas_call(
        matmul_kernel, jax.ShapeDtypeStruct((m, n), F32), grid=(m // b, n // b, k // b),
        in_specs=[pl.BlockSpec((b, b), lambda i, j, kk: (i, kk)),
                  pl.BlockSpec((b, b), lambda i, j, kk: (kk, j))],
        out_specs=pl.BlockSpec((b, b), lambda i, j, kk: (i, j)),
        scratch_shapes=[pltpu.VMEM((b, b), F32)],
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "parallel", "arbitrary")))


def softmax_kernel(x_ref, o_ref):
    x = x_ref[...]
    e = jnp.exp(x - jnp.max(x, axis=-1, keepdims=True))
    o_ref[...] = e / jnp.sum(e, axis=-1, keepdims=True)


def make_softmax(pallas_call, n, m):
    spec = pl.BlockSpec((8, m), lambda i: (i, 0))
    return pallas_call(softmax_kernel, jax.ShapeDtypeStruct((n, m), F32), grid=(n // 8,),
                       in_specs=[spec], out_specs=spec)


def rand(*shape):
    return np.random.default_rng(0).standard_normal(shape).astype(np.float32)


CASES = [
    ("add 8x128 (1 step)", lambda pc: make_add(pc, 8, 128, 8), lambda: (rand(8, 128),) * 2),
    ("add 1024x512 (8 steps)", lambda pc: make_add(pc, 1024, 512, 128),
     lambda: (rand(1024, 512), rand(1024, 512))),
    ("matmul 256x512x256", lambda pc: make_matmul(pc, 256, 512, 256),
     lambda: (rand(256, 512), rand(512, 256))),
    ("softmax 64x256", lambda pc: make_softmax(pc, 64, 256), lambda: (rand(64, 256),)),
]


def timed(fn, repeat):
    for _ in range(3):
        fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def c_api_loop(runner: _run.Runner, inputs):
    """A closure calling tsr_executable_run directly on prebuilt arrays."""
    h = _run._h()
    n = runner._n
    arrays = (_run._CArray * n)()
    ptrs = (ctypes.POINTER(_run._CArray) * n)()
    keep = [np.ascontiguousarray(x) for x in inputs]
    keep += [np.empty(s, dt) for s, dt, _ in runner._out_specs]
    dts = runner._dtypes + [d for _, _, d in runner._out_specs]
    for i, (x, dt) in enumerate(zip(keep, dts)):
        _run._fill(arrays[i], x, dt)
        ptrs[i] = ctypes.pointer(arrays[i])
    exe = runner._exe
    result = ctypes.c_void_p()
    run, destroy = h.tsr_executable_run, h.tsr_run_result_destroy

    def call():
        status = run(exe, ptrs, n, None, ctypes.byref(result))
        destroy(result.value)
        assert not status
    return call, keep


def fmt(s):
    return f"{s * 1e6:9.1f} us" if s < 1e-3 else f"{s * 1e3:9.2f} ms"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=200)
    args = ap.parse_args(argv)
    print(f"jax {jax.__version__}, python {sys.version.split()[0]}, "
          f"library {_run._lib.library_path()}")
    print(f"{'kernel':26} {'cold':>12} {'c_api':>12} {'runner':>12} {'eager':>12} "
          f"{'eager_np':>12} {'jit':>12} {'jit_pcb':>12} {'jax_interp':>12}  eager/c_api  "
          f"eager_np/c_api  jit/c_api")
    for name, make, inputs in CASES:
        xs = inputs()
        tj.cache_clear()
        f = make(tj.pallas_call)
        t0 = time.perf_counter()
        jax.block_until_ready(f(*xs))
        cold = time.perf_counter() - t0
        prep = f._get(xs, list(xs))[0]
        c_call, _keep = c_api_loop(prep.runner, xs)
        t_c = timed(c_call, args.repeat)
        t_runner = timed(lambda: prep.runner(*xs), args.repeat)
        t_eager = timed(lambda: jax.block_until_ready(f(*xs)), args.repeat)
        fn = make(functools.partial(tj.pallas_call, numpy_outputs=True))
        t_np = timed(lambda: fn(*xs), args.repeat)
        jxs = [jnp.asarray(x) for x in xs]  # jit columns: inputs already on the device
        jf = jax.jit(lambda *a: f(*a))
        t_jit = timed(lambda: jax.block_until_ready(jf(*jxs)), args.repeat)
        fp = make(functools.partial(tj.pallas_call, jit_callback="pure_callback"))
        jp = jax.jit(lambda *a: fp(*a))
        t_pcb = timed(lambda: jax.block_until_ready(jp(*jxs)), args.repeat)
        ji = jax.jit(lambda *a: make(lambda *p, **k: pl.pallas_call(*p, interpret=True, **k))(*a))
        t_ji = timed(lambda: jax.block_until_ready(ji(*jxs)), max(10, args.repeat // 10))
        print(f"{name:26} {fmt(cold):>12} {fmt(t_c):>12} {fmt(t_runner):>12} "
              f"{fmt(t_eager):>12} {fmt(t_np):>12} {fmt(t_jit):>12} {fmt(t_pcb):>12} "
              f"{fmt(t_ji):>12}  {t_eager / t_c:10.2f}x {t_np / t_c:14.2f}x {t_jit / t_c:9.2f}x")


if __name__ == "__main__":
    main()
