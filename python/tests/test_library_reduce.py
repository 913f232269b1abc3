"""The kernel library's reductions and scans from Python (tessera.reduce,
tessera.sum, ..., tessera.cumsum, ...; tessera.jax.reduce / cumsum) against
numpy, jax.numpy and jax.lax, on both backends.

Tolerances: integers, max/min, argmax/argmin and orders are exact; float
sums, means, variances and logsumexp are compared with
rtol = atol = 1e-5 (f32: tessera adds in a blocked order, numpy pairwise)
and 2e-2 for bf16/f16 (the result is rounded to 8/11 bits once, from an
f32 accumulator); products get rtol 1e-4 (f32). docs/kernels.md.
"""

from __future__ import annotations

import builtins

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import tessera
import tessera.jax as tj

BF16 = np.dtype(ml_dtypes.bfloat16)
FLOATS = [np.dtype(np.float32), BF16, np.dtype(np.float16)]
INTS = [np.dtype(t) for t in (np.int32, np.uint32, np.int16, np.uint16, np.int8, np.uint8)]

SHAPES_AXES = [
    ((100, 300), 1), ((100, 300), 0), ((100, 300), None), ((7, 9, 130), (0, 2)),
    ((5, 3, 17, 4), (1, 3)), ((1000,), None), ((3, 1, 1025), 2), ((1, 1), None),
    ((257,), 0), ((2, 3, 4, 5), (0, 1, 2, 3)),
]


def tol(dtype):
    return 2e-2 if dtype in (BF16, np.dtype(np.float16)) else 1e-5


def data(shape, dtype, op, seed=0):
    rng = np.random.default_rng(seed)
    if dtype.kind == "f" or dtype == BF16:
        x = rng.standard_normal(shape).astype(np.float32)
        if op in ("prod", "cumprod"):
            x = 1 + 0.01 * x
        return x.astype(dtype)
    if dtype == np.dtype(np.bool_):
        return rng.integers(0, 2, shape).astype(bool)
    info = np.iinfo(dtype)
    if op in ("prod", "cumprod"):
        return rng.integers(max(info.min, -2), 3, shape).astype(dtype)
    return rng.integers(info.min, info.max, shape, endpoint=True).astype(dtype)


def reference(x, op, axis, keepdims=False):
    """numpy's result, in x's dtype (integer sums wrapping in it)."""
    xf = x.astype(np.float64) if x.dtype in FLOATS else x
    if op == "logsumexp":
        m = np.max(xf, axis=axis, keepdims=True)
        r = m + np.log(np.sum(np.exp(xf - m), axis=axis, keepdims=True))
        return r if keepdims else np.squeeze(r, axis=axis)
    if op in ("sum", "prod") and x.dtype in INTS:
        return getattr(np, op)(x, axis=axis, dtype=x.dtype, keepdims=keepdims)
    if op in ("argmax", "argmin"):
        return getattr(np, op)(xf, axis=axis, keepdims=keepdims)
    return getattr(np, op)(xf, axis=axis, keepdims=keepdims)


def assert_close(got, want, dtype, op):
    got = np.asarray(got)
    want = np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    if op in ("argmax", "argmin"):
        assert got.dtype == np.int32
        np.testing.assert_array_equal(got, want)
    elif dtype in INTS or op in ("max", "min"):
        np.testing.assert_array_equal(got.astype(np.float64), want.astype(np.float64))
    else:
        t = tol(dtype) * (10 if op == "prod" else 1)
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                                   rtol=t, atol=t)


F32_CASES = [(op, shape, axis) for shape, axis in SHAPES_AXES
             for op in ["sum", "max", "min", "prod", "mean", "var", "logsumexp", "argmax",
                        "argmin"]
             if not (op in ("argmax", "argmin") and isinstance(axis, tuple))]


@pytest.mark.parametrize("op,shape,axis", F32_CASES,
                         ids=[f"{o}-{s}-{a}" for o, s, a in F32_CASES])
def test_reduce_f32_against_numpy(op, shape, axis):
    x = data(shape, np.dtype(np.float32), op)
    got = tessera.reduce(x, op, axis=axis)
    assert_close(got, reference(x, op, axis), x.dtype, op)


@pytest.mark.parametrize("dtype", FLOATS + INTS, ids=str)
@pytest.mark.parametrize("op", ["sum", "max", "min", "prod", "mean", "var", "logsumexp",
                                "argmax", "argmin"])
def test_reduce_every_dtype(op, dtype):
    if op in ("mean", "var", "logsumexp") and dtype in INTS:
        with pytest.raises(tessera.CompileError, match="takes floats"):
            tessera.reduce(data((4, 4), dtype, op), op)
        return
    for shape, axis in [((33, 260), 1), ((260, 33), 0), ((5, 7, 9), (0, 2))]:
        if op in ("argmax", "argmin") and isinstance(axis, tuple):
            continue
        x = data(shape, dtype, op, seed=len(shape))
        got = tessera.reduce(x, op, axis=axis, vmem_budget_bytes=8192)
        assert got.dtype == (np.int32 if op in ("argmax", "argmin") else dtype)
        assert_close(got, reference(x, op, axis), dtype, op)


@pytest.mark.parametrize("op", ["max", "min"])
def test_bool_max_min_are_any_all(op):
    x = data((37, 129), np.dtype(np.bool_), op)
    x[3] = True
    got = tessera.reduce(x, op, axis=1)
    np.testing.assert_array_equal(got, x.any(1) if op == "max" else x.all(1))
    assert got.dtype == np.bool_


@pytest.mark.parametrize("keepdims", [False, True])
def test_keepdims_and_scalar_results(keepdims):
    x = data((6, 5, 4), np.dtype(np.float32), "sum")
    for axis in [None, 0, (0, 2), -1]:
        got = tessera.reduce(x, "sum", axis=axis, keepdims=keepdims)
        want = x.sum(axis=axis, keepdims=keepdims)
        assert np.shape(got) == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    s = tessera.sum(x)
    assert isinstance(s, np.float32)                      # a numpy scalar, as numpy's
    assert tessera.max(np.float32(2.5)) == 2.5            # a 0-d array: one element
    assert tessera.argmax(np.array(7, np.int32)) == 0


def test_argmax_nan_and_ties_follow_jax_numpy():
    x = np.zeros((4, 3000), np.float32)
    x[:, 100] = x[:, 2000] = 5
    x[1, 1500] = x[1, 2500] = np.nan
    x[2, 7] = np.nan
    got = tessera.argmax(x, axis=1)
    np.testing.assert_array_equal(got, np.asarray(jnp.argmax(jnp.asarray(x), axis=1)))
    np.testing.assert_array_equal(got, [100, 1500, 7, 100])
    got = tessera.argmin(-x, axis=1)
    np.testing.assert_array_equal(got, np.asarray(jnp.argmin(jnp.asarray(-x), axis=1)))
    assert int(tessera.argmax(x)) == int(jnp.argmax(jnp.asarray(x)))  # flattened


def test_against_jax_numpy():
    x = data((64, 300), np.dtype(np.float32), "sum")
    xj = jnp.asarray(x)
    for name in ["sum", "max", "min", "mean", "var"]:
        np.testing.assert_allclose(getattr(tessera, name)(x, axis=1),
                                   getattr(jnp, name)(xj, axis=1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(tessera.logsumexp(x, axis=0),
                               jax.nn.logsumexp(xj, axis=0), rtol=1e-5, atol=1e-5)
    # logsumexp of -inf rows and of +inf, as jax.nn.logsumexp
    y = np.full((3, 200), -np.inf, np.float32)
    y[1, 5] = np.inf
    y[2, :100] = 1.0
    np.testing.assert_array_equal(tessera.logsumexp(y, axis=1),
                                  jax.nn.logsumexp(jnp.asarray(y), axis=1))
    np.testing.assert_allclose(tessera.logsumexp(y, axis=1)[2], np.log(100) + 1, rtol=1e-6)


def test_integer_sums_wrap_in_the_input_dtype():
    x = np.full((1000,), 100, np.int8)
    assert tessera.sum(x) == np.int8(np.sum(x, dtype=np.int8))   # -96: wrapped
    u = np.full((70000,), 65535, np.uint16)
    assert tessera.sum(u) == np.sum(u, dtype=np.uint16)


def test_multi_step_grids_agree_with_one_block():
    x = data((300, 1000), np.dtype(np.float32), "sum", seed=3)
    for op in ["sum", "var", "logsumexp", "argmax", "prod"]:
        axis = 1 if op == "argmax" else None
        big = tessera.reduce(x, op, axis=axis)
        small = tessera.reduce(x, op, axis=axis, vmem_budget_bytes=4096)   # hundreds of steps
        np.testing.assert_allclose(np.asarray(big, np.float64), np.asarray(small, np.float64),
                                   rtol=1e-5)


@pytest.mark.parametrize("op", ["sum", "max", "argmax", "logsumexp", "var"])
def test_backends_agree(op, backend):
    x = data((129, 257), np.dtype(np.float32), op)
    for axis in (0, 1):
        got = tessera.reduce(x, op, axis=axis, backend=backend, vmem_budget_bytes=16384)
        assert_close(got, reference(x, op, axis), x.dtype, op)


@pytest.mark.parametrize("op", ["sum", "min", "mean", "var", "argmax", "logsumexp"])
@pytest.mark.parametrize("shape,axis", [((2, 1, 17), 1), ((2, 1, 1, 17), (1, 2)),
                                        ((1, 5), 0), ((3, 1), (1,))])
def test_reducing_only_size_one_dims(op, shape, axis):
    # Every reduced dim has size 1: the result is the input, reshaped
    # (numpy's, with var 0 and argmax 0).
    x = data(shape, np.dtype(np.float32), op)
    if op == "argmax" and isinstance(axis, tuple):  # one axis, as numpy
        return
    ref = {"sum": np.sum, "min": np.min, "mean": np.mean, "var": np.var,
           "argmax": np.argmax, "logsumexp": lambda a, axis: np.log(np.sum(np.exp(a), axis=axis))}
    want = ref[op](x.astype(np.float64), axis=axis)
    for backend in ("interp", "cpu"):
        got = tessera.reduce(x, op, axis=axis, backend=backend)
        assert np.shape(got) == np.shape(want)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_reduce_errors():
    x = np.ones((3, 4), np.float32)
    with pytest.raises(ValueError, match="unknown reduction"):
        tessera.reduce(x, "median")
    with pytest.raises(np.exceptions.AxisError):
        tessera.sum(x, axis=2)
    with pytest.raises(ValueError, match="repeated axis"):
        tessera.sum(x, axis=(1, -1))
    with pytest.raises(TypeError, match="one axis"):
        tessera.argmax(x, axis=(0, 1))
    with pytest.raises(ValueError, match="empty"):
        tessera.sum(np.ones((0, 3), np.float32))
    with pytest.raises(TypeError, match="not supported"):
        tessera.sum(np.ones(3, np.float64))
    with pytest.raises(tessera.CompileError, match="i1"):
        tessera.sum(np.ones(3, bool))


def test_star_import_does_not_shadow_builtins():
    names: dict = {}
    exec("from tessera import *", names)
    assert "sum" not in names and "max" not in names and "min" not in names
    assert "cumsum" in names and "reduce" in names
    assert builtins.sum([1, 2]) == 3
    assert tessera.sum is not builtins.sum


# ---- cumulative ops ------------------------------------------------------------------

SCAN_CASES = [((10, 300), 1), ((10, 300), 0), ((1000,), 0), ((7, 9, 130), 1),
              ((5, 3, 17, 4), 0), ((5, 3, 17, 4), -1), ((3, 1, 1025), 2), ((600, 5), 0),
              ((1, 1), 0)]
LAX = {"sum": jax.lax.cumsum, "prod": jax.lax.cumprod, "max": jax.lax.cummax,
       "min": jax.lax.cummin}


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("op", ["sum", "prod", "max", "min"])
@pytest.mark.parametrize("shape,axis", SCAN_CASES, ids=[f"{s}-{a}" for s, a in SCAN_CASES])
def test_cumulative_against_jax_lax(shape, axis, op, reverse):
    x = data(shape, np.dtype(np.float32), "cum" + op)
    got = tessera.cumulative(x, op, axis=axis, reverse=reverse)
    want = np.asarray(LAX[op](jnp.asarray(x), axis=axis % len(shape), reverse=reverse))
    if op in ("max", "min"):
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", FLOATS + INTS, ids=str)
@pytest.mark.parametrize("op", ["sum", "prod", "max", "min"])
def test_cumulative_every_dtype(op, dtype):
    x = data((33, 260), dtype, "cum" + op, seed=5)
    for axis, reverse in [(1, False), (0, True)]:
        got = tessera.cumulative(x, op, axis=axis, reverse=reverse, vmem_budget_bytes=4096)
        assert got.dtype == dtype and got.shape == x.shape
        f = {"sum": np.cumsum, "prod": np.cumprod, "max": np.maximum.accumulate,
             "min": np.minimum.accumulate}[op]
        xr = np.flip(x, axis) if reverse else x
        if dtype in INTS:
            want = f(xr, axis=axis, dtype=dtype) if op in ("sum", "prod") else f(xr, axis=axis)
            want = np.flip(want, axis) if reverse else want
            np.testing.assert_array_equal(got, want)
        else:
            want = f(xr.astype(np.float64), axis=axis)
            want = np.flip(want, axis) if reverse else want
            t = tol(dtype) * 10 if op == "prod" else tol(dtype)
            np.testing.assert_allclose(got.astype(np.float64), want, rtol=t,
                                       atol=t * (np.sqrt(x.shape[axis]) if op == "sum" else 1))


def test_cumsum_shorthands_and_flattening(backend):
    x = data((40, 30), np.dtype(np.float32), "cumsum")
    np.testing.assert_allclose(tessera.cumsum(x, axis=None, backend=backend),
                               np.cumsum(x), rtol=1e-4, atol=1e-3)
    np.testing.assert_array_equal(tessera.cummax(x, axis=0, backend=backend),
                                  np.maximum.accumulate(x, 0))
    np.testing.assert_array_equal(tessera.cummin(x, reverse=True, backend=backend),
                                  np.flip(np.minimum.accumulate(np.flip(x, 1), 1), 1))
    p = tessera.cumprod(1 + 0.01 * x, axis=0, backend=backend)
    np.testing.assert_allclose(p, np.cumprod(1 + 0.01 * x, 0), rtol=1e-4)


def test_cumulative_errors():
    with pytest.raises(ValueError, match="unknown cumulative op"):
        tessera.cumulative(np.ones(3, np.float32), "argmax")
    with pytest.raises(np.exceptions.AxisError):
        tessera.cumsum(np.ones((2, 3), np.float32), axis=2)
    with pytest.raises(ValueError, match="0-d"):
        tessera.cumsum(np.float32(1))


# ---- tessera.jax ------------------------------------------------------------------------

def test_jax_reduce_and_cumsum_under_jit():
    x = data((5, 300, 7), np.dtype(np.float32), "sum")
    f = jax.jit(lambda x: tj.reduce(x, "sum", axis=(0, 2)) * 2)
    np.testing.assert_allclose(f(x), 2 * x.sum((0, 2)), rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(tj.reduce(x, "argmin", axis=1), x.argmin(1))
    g = jax.jit(lambda x: tj.cumsum(x, axis=1, reverse=True))
    np.testing.assert_allclose(g(x), jax.lax.cumsum(jnp.asarray(x), axis=1, reverse=True),
                               rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(tj.cumsum(x, axis=0, op="max"),
                                  jax.lax.cummax(jnp.asarray(x), axis=0))


def test_jax_bools_go_through_int32():
    x = data((40, 300), np.dtype(np.bool_), "max")
    np.testing.assert_array_equal(tj.reduce(x, "max", axis=1), x.any(1))
    np.testing.assert_array_equal(tj.reduce(x, "argmin", axis=0), x.argmin(0))
    got = tj.cumsum(x, axis=1, op="max")
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(got, np.maximum.accumulate(x, 1))


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.uint8, np.uint16, np.bool_])
@pytest.mark.parametrize("op", ["sum", "prod"])
def test_jax_sums_of_narrow_integers_promote_as_jax_numpy(dtype, op):
    """jnp.sum(int8) is int32 (no wrap at 127): tessera.jax.reduce the same."""
    rng = np.random.default_rng(3)
    x = (rng.integers(0, 2, (4, 300)) if dtype == np.bool_ else
         rng.integers(1, 4, (4, 300)) * (100 if op == "sum" else 1)).astype(dtype)
    got, want = tj.reduce(x, op, axis=1), getattr(jnp, op)(jnp.asarray(x), axis=1)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_jax_reduce_cpu_backend(cpu_backend):
    x = data((64, 257), np.dtype(np.float32), "max")
    np.testing.assert_array_equal(tj.reduce(x, "max", axis=1, backend=cpu_backend),
                                  x.max(1))


def test_jax_reduce_exports_a_tpu_custom_call():
    x = jax.ShapeDtypeStruct((256, 1024), jnp.float32)
    exp = jax.export.export(jax.jit(lambda x: tj.reduce(x, "sum", axis=1)),
                            platforms=["tpu"])(x)
    assert "tpu_custom_call" in exp.mlir_module()
    exp = jax.export.export(jax.jit(lambda x: tj.cumsum(x, axis=0)), platforms=["tpu"])(x)
    assert "tpu_custom_call" in exp.mlir_module()
