"""The JAX bridge on Pallas TPU kernels written for it: each kernel is a
function taking the `pallas_call` to use, so the same kernel runs through
tessera.jax.pallas_call, through unchanged pl.pallas_call under
`with tessera.jax.interpret():`, under jax.jit, and through JAX's own
pl.pallas_call(interpret=True); results are compared with numpy."""

from __future__ import annotations

import functools
import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
jax = pytest.importorskip("jax")

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

F32 = jnp.float32


def rng(seed=0):
    return np.random.default_rng(seed)


# ---- add: the simplest blocked kernel --------------------------------------------

def add_kernel(a_ref, b_ref, c_ref):
    c_ref[...] = a_ref[...] + b_ref[...]


def add(pallas_call, a, b, **kw):
    n, m = a.shape
    spec = pl.BlockSpec((8, m), lambda i: (i, 0))
    return pallas_call(add_kernel, jax.ShapeDtypeStruct(a.shape, a.dtype), grid=(n // 8,),
                       in_specs=[spec, spec], out_specs=spec,
                       compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)),
                       **kw)(a, b)


def add_ref(a, b):
    return a + b


# ---- matmul with a k-loop accumulator in VMEM scratch ----------------------------

def matmul_kernel(a_ref, b_ref, c_ref, acc_ref):
    @pl.when(pl.program_id(2) == 0)
    def _():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += jnp.dot(a_ref[...], b_ref[...], preferred_element_type=F32)

    @pl.when(pl.program_id(2) == pl.num_programs(2) - 1)
    def _():
        c_ref[...] = acc_ref[...].astype(c_ref.dtype)


def matmul(pallas_call, a, b, bm=32, bn=128, bk=128, **kw):
    m, k = a.shape
    _, n = b.shape
    return pallas_call(
        matmul_kernel, jax.ShapeDtypeStruct((m, n), F32), grid=(m // bm, n // bn, k // bk),
        in_specs=[pl.BlockSpec((bm, bk), lambda i, j, kk: (i, kk)),
                  pl.BlockSpec((bk, bn), lambda i, j, kk: (kk, j))],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j)),
        scratch_shapes=[pltpu.VMEM((bm, bn), F32)],
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "parallel", "arbitrary")), **kw)(a, b)


def matmul_ref(a, b):
    return np.asarray(a, np.float32) @ np.asarray(b, np.float32)


# ---- softmax over rows ------------------------------------------------------------

def softmax_kernel(x_ref, o_ref):
    x = x_ref[...]
    m = jnp.max(x, axis=-1, keepdims=True)
    e = jnp.exp(x - m)
    o_ref[...] = e / jnp.sum(e, axis=-1, keepdims=True)


def softmax(pallas_call, x, **kw):
    n, m = x.shape
    spec = pl.BlockSpec((8, m), lambda i: (i, 0))
    return pallas_call(softmax_kernel, jax.ShapeDtypeStruct(x.shape, F32), grid=(n // 8,),
                       in_specs=[spec], out_specs=spec, **kw)(x)


def softmax_ref(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


# ---- fori_loop over row groups of a block ------------------------------------------

def fori_kernel(x_ref, o_ref):
    def body(i, acc):
        return acc + x_ref[pl.ds(i * 8, 8), :]
    acc = jax.lax.fori_loop(0, x_ref.shape[0] // 8, body, jnp.zeros((8, 128), F32))
    o_ref[...] = jnp.where(acc > 0, acc, -acc * 0.5)


def fori(pallas_call, x, **kw):
    return pallas_call(fori_kernel, jax.ShapeDtypeStruct((8, 128), F32), **kw)(x)


def fori_ref(x):
    acc = x.reshape(-1, 8, 128).sum(0)
    return np.where(acc > 0, acc, -acc * 0.5)


# ---- a while loop with dynamic bounds (fori_loop over a traced bound) -----------

def while_kernel(n_ref, x_ref, o_ref):
    n = n_ref[0]

    def body(i, acc):
        return acc + x_ref[pl.ds(i, 1), :]
    o_ref[...] = jax.lax.fori_loop(0, n, body, jnp.zeros((1, 128), F32))


def while_loop(pallas_call, n, x, **kw):
    return pallas_call(
        while_kernel, jax.ShapeDtypeStruct((1, 128), F32),
        in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM), pl.BlockSpec((16, 128), lambda: (0, 0))],
        out_specs=pl.BlockSpec((1, 128), lambda: (0, 0)), **kw)(n, x)


def while_ref(n, x):
    return x[: int(n[0])].sum(0, keepdims=True)


# ---- cond (lax.cond and a three-way switch) -------------------------------------

def cond_kernel(x_ref, o_ref):
    i = pl.program_id(0)
    x = x_ref[...]
    y = jax.lax.cond(i % 2 == 0, lambda v: v * 2.0, lambda v: v - 1.0, x)
    o_ref[...] = jax.lax.switch(jnp.minimum(i, 2), [lambda v: v, lambda v: v + 10.0,
                                                    lambda v: -v], y)


def cond(pallas_call, x, **kw):
    spec = pl.BlockSpec((8, 128), lambda i: (i, 0))
    return pallas_call(cond_kernel, jax.ShapeDtypeStruct(x.shape, F32),
                       grid=(x.shape[0] // 8,), in_specs=[spec], out_specs=spec, **kw)(x)


def cond_ref(x):
    out = np.empty_like(x)
    for i in range(x.shape[0] // 8):
        v = x[i * 8:(i + 1) * 8]
        y = v * 2.0 if i % 2 == 0 else v - 1.0
        out[i * 8:(i + 1) * 8] = [y, y + 10.0, -y][min(i, 2)]
    return out


# ---- scalar prefetch: a gather of rows by a table in SMEM ------------------------

def gather_kernel(idx_ref, x_ref, o_ref):
    o_ref[...] = x_ref[...] * (idx_ref[pl.program_id(0)] + 1).astype(F32)


def gather(pallas_call, idx, x, **kw):
    n = idx.shape[0]
    return pallas_call(
        gather_kernel, jax.ShapeDtypeStruct((n * 8, 128), F32),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1, grid=(n,),
            in_specs=[pl.BlockSpec((8, 128), lambda i, idx: (idx[i], 0))],
            out_specs=pl.BlockSpec((8, 128), lambda i, idx: (i, 0))), **kw)(idx, x)


def gather_ref(idx, x):
    return np.concatenate([x[j * 8:(j + 1) * 8] * np.float32(j + 1) for j in idx])


# ---- DMA + semaphore inside run_scoped, from an ANY-space input ------------------

def dma_kernel(x_hbm, o_ref):
    def body(buf, sem):
        copy = pltpu.make_async_copy(x_hbm.at[pl.ds(pl.program_id(0) * 8, 8), :], buf, sem)
        copy.start()
        copy.wait()
        o_ref[...] = buf[...] * 2.0
    pl.run_scoped(body, pltpu.VMEM((8, 128), F32), pltpu.SemaphoreType.DMA)


def dma(pallas_call, x, **kw):
    return pallas_call(dma_kernel, jax.ShapeDtypeStruct(x.shape, F32), grid=(x.shape[0] // 8,),
                       in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                       out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)), **kw)(x)


def dma_ref(x):
    return x * 2.0


# ---- manual double buffering: prefetch chunk i+1 while summing chunk i ------------

def double_buffer_kernel(x_hbm, o_ref, buf, sems):
    n = x_hbm.shape[0] // 8

    def copy(i, slot):
        return pltpu.make_async_copy(x_hbm.at[pl.ds(i * 8, 8), :], buf.at[slot], sems.at[slot])

    copy(0, 0).start()

    def body(i, acc):
        slot = i % 2

        @pl.when(i + 1 < n)
        def _():
            copy(i + 1, 1 - slot).start()
        copy(i, slot).wait()
        return acc + buf[slot]
    o_ref[...] = jax.lax.fori_loop(0, n, body, jnp.zeros((8, 128), F32))


def double_buffer(pallas_call, x, **kw):
    return pallas_call(double_buffer_kernel, jax.ShapeDtypeStruct((8, 128), F32),
                       in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                       out_specs=pl.BlockSpec((8, 128), lambda: (0, 0)),
                       scratch_shapes=[pltpu.VMEM((2, 8, 128), F32),
                                       pltpu.SemaphoreType.DMA((2,))], **kw)(x)


def double_buffer_ref(x):
    return x.reshape(-1, 8, 128).sum(0)


# ---- pltpu.emit_pipeline: a pipeline of blocks over HBM refs, inside the kernel --

def pipeline_kernel(x_hbm, o_hbm):
    def inner(x_ref, o_ref):
        o_ref[...] = jnp.sqrt(jnp.abs(x_ref[...])) + 1.0
    pltpu.emit_pipeline(inner, grid=(x_hbm.shape[0] // 8,),
                        in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
                        out_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))])(x_hbm, o_hbm)


def pipeline(pallas_call, x, **kw):
    return pallas_call(pipeline_kernel, jax.ShapeDtypeStruct(x.shape, F32),
                       in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                       out_specs=pl.BlockSpec(memory_space=pl.ANY), **kw)(x)


def pipeline_ref(x):
    return np.sqrt(np.abs(x)) + 1.0


# ---- aliases, iota/select and integer ops ----------------------------------------

def alias_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] + 1


def alias(pallas_call, x, **kw):
    # Only the second block of rows is written: the first keeps the input's
    # contents through the alias.
    spec = pl.BlockSpec((8, 128), lambda i: (i + 1, 0))
    return pallas_call(alias_kernel, jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(1,),
                       in_specs=[spec], out_specs=spec, input_output_aliases={0: 0}, **kw)(x)


def alias_ref(x):
    out = x.copy()
    out[8:16] += 1
    return out


def iota_kernel(x_ref, o_ref):
    x = x_ref[...]
    col = jax.lax.broadcasted_iota(jnp.int32, x.shape, 1)
    o_ref[...] = jnp.where(col % 3 == 0, x >> 1, (x & 7) * col)


def iota(pallas_call, x, **kw):
    return pallas_call(iota_kernel, jax.ShapeDtypeStruct(x.shape, jnp.int32), **kw)(x)


def iota_ref(x):
    col = np.broadcast_to(np.arange(x.shape[1], dtype=np.int32), x.shape)
    return np.where(col % 3 == 0, x >> 1, (x & 7) * col)


def jax_interpret(fn):
    """fn's pallas_call run by JAX's own interpret=True."""
    return functools.partial(fn, functools.partial(pl.pallas_call, interpret=True))


# ---- the cases --------------------------------------------------------------------

def _f32(shape, seed=0):
    return rng(seed).standard_normal(shape).astype(np.float32)


CASES = {
    # name: (kernel fn, numpy reference, inputs, tolerance)
    "add": (add, add_ref, lambda: (_f32((32, 128)), _f32((32, 128), 1)), 0),
    "matmul": (matmul, matmul_ref, lambda: (_f32((64, 256)), _f32((256, 256), 1)), 1e-4),
    "softmax": (softmax, softmax_ref, lambda: (_f32((16, 128)),), 1e-6),
    "fori_loop": (fori, fori_ref, lambda: (_f32((32, 128)),), 1e-6),
    "while_loop": (while_loop, while_ref,
                   lambda: (np.array([5], np.int32), _f32((16, 128))), 1e-6),
    "cond": (cond, cond_ref, lambda: (_f32((32, 128)),), 0),
    "scalar_prefetch": (gather, gather_ref,
                        lambda: (np.array([3, 0, 2, 2], np.int32), _f32((32, 128))), 0),
    "dma_run_scoped": (dma, dma_ref, lambda: (_f32((32, 128)),), 0),
    "emit_pipeline": (pipeline, pipeline_ref, lambda: (_f32((32, 128)),), 1e-6),
    "double_buffer": (double_buffer, double_buffer_ref, lambda: (_f32((48, 128)),), 1e-6),
    "alias": (alias, alias_ref,
              lambda: (np.arange(16 * 128, dtype=np.int32).reshape(16, 128),), 0),
    "iota_int": (iota, iota_ref,
                 lambda: (rng(3).integers(-1000, 1000, (8, 128)).astype(np.int32),), 0),
}

# Kernels JAX's interpret=True runs too (the others use TPU-only DMAs/semaphores).
JAX_INTERPRETABLE = ["add", "matmul", "softmax", "fori_loop", "while_loop", "cond",
                     "scalar_prefetch", "iota_int"]


def _close(got, want, tol):
    got = np.asarray(got)
    assert got.shape == np.shape(want)
    if tol == 0:
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("name", sorted(CASES))
def test_bridge_pallas_call_matches_numpy(name):
    import tessera.jax as tj
    fn, ref, make, tol = CASES[name]
    args = make()
    _close(fn(tj.pallas_call, *args), ref(*args), tol)


@pytest.mark.parametrize("name", sorted(CASES))
def test_bridge_interpret_runs_unchanged_pl_pallas_call(name):
    import tessera.jax as tj
    fn, ref, make, tol = CASES[name]
    args = make()
    before = tj.cache_info()["traces"]
    with tj.interpret():
        out = fn(pl.pallas_call, *args)
    assert tj.cache_info()["traces"] > before  # it went through tessera
    _close(out, ref(*args), tol)


@pytest.mark.parametrize("name", sorted(CASES))
def test_bridge_under_jit(name):
    import tessera.jax as tj
    fn, ref, make, tol = CASES[name]
    args = make()
    jitted = jax.jit(functools.partial(fn, tj.pallas_call))
    _close(jitted(*args), ref(*args), tol)
    _close(jitted(*args), ref(*args), tol)  # the compiled callback again


@pytest.mark.parametrize("name", JAX_INTERPRETABLE)
def test_bridge_matches_jax_interpret_true(name):
    import tessera.jax as tj
    fn, _, make, tol = CASES[name]
    args = make()
    want = np.asarray(jax_interpret(fn)(*args))
    _close(fn(tj.pallas_call, *args), want, max(tol, 1e-5) if tol else 0)


def test_bridge_vmap_runs_sequentially():
    import tessera.jax as tj
    a, b = _f32((3, 16, 128)), _f32((3, 16, 128), 1)
    out = jax.vmap(functools.partial(add, tj.pallas_call))(a, b)
    _close(out, a + b, 0)


def test_bridge_inside_a_larger_jax_program():
    import tessera.jax as tj
    a, b = _f32((64, 256)), _f32((256, 256), 1)

    @jax.jit
    def f(a, b):
        return jnp.tanh(matmul(tj.pallas_call, a * 2.0, b)).sum(axis=0)
    _close(f(a, b), np.tanh(matmul_ref(a * 2.0, b)).sum(axis=0), 1e-3)


@pytest.mark.parametrize("name", sorted(CASES))
def test_bridge_cpu_backend(name):
    import tessera.jax as tj
    fn, ref, make, tol = CASES[name]
    args = make()
    _close(fn(functools.partial(tj.pallas_call, backend="cpu"), *args), ref(*args), tol)


def test_bridge_interpret_under_jit():
    import tessera.jax as tj
    x = _f32((32, 128))
    with tj.interpret():
        out = jax.jit(lambda v: softmax(pl.pallas_call, v) * 2.0)(x)
    _close(out, softmax_ref(x) * 2.0, 1e-6)


def test_bridge_bf16_matmul():
    import ml_dtypes
    import tessera.jax as tj
    a = _f32((32, 128)).astype(ml_dtypes.bfloat16)
    b = _f32((128, 128), 1).astype(ml_dtypes.bfloat16)
    out = matmul(tj.pallas_call, jnp.asarray(a), jnp.asarray(b), bm=32, bn=128, bk=128)
    _close(out, matmul_ref(a, b), 1e-3)
