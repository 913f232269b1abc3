"""dot_general in every form the bridge takes (batch dims anywhere and
several of them, several free or contracting dims, vector operands,
transposed operands, mixed and integer dtypes), in both backends, against
numpy; and numerics="tpu" (f32 operands rounded to bf16 passes as a TPU's
MXU does) against a numpy model of that rounding computed here."""

from __future__ import annotations

import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
jax = pytest.importorskip("jax")

import jax.numpy as jnp  # noqa: E402
import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402

import tessera.jax as tj  # noqa: E402

F32 = jnp.float32


def _f32(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _dot_kernel(dims, precision=None, preferred=None):
    def k(x_ref, y_ref, o_ref):
        r = jax.lax.dot_general(x_ref[...], y_ref[...], dims, precision=precision,
                                preferred_element_type=preferred)
        o_ref[...] = r.reshape(o_ref.shape)  # a scalar (vector . vector) as shape (1,)
    return k


def _numpy_dot_general(x, y, dims):
    """dot_general by einsum in float64, from the dimension numbers."""
    (lc, rc), (lb, rb) = dims
    letters = iter("abcdefghijklmnopqrstuvwxyz")
    xs = [next(letters) for _ in range(x.ndim)]
    ys = [None] * y.ndim
    for l, r in zip(lb, rb):
        ys[r] = xs[l]
    for l, r in zip(lc, rc):
        ys[r] = xs[l]
    ys = [c or next(letters) for c in ys]
    out = ([xs[d] for d in lb] + [xs[d] for d in range(x.ndim) if d not in lb + lc]
           + [ys[d] for d in range(y.ndim) if d not in rb + rc])
    spec = f"{''.join(xs)},{''.join(ys)}->{''.join(out)}"
    return np.einsum(spec, x.astype(np.float64), y.astype(np.float64))


# (x shape, y shape, ((lhs contracting, rhs contracting), (lhs batch, rhs batch)))
FORMS = [
    ((8, 128), (128, 16), (((1,), (0,)), ((), ()))),             # matmul
    ((128, 8), (16, 128), (((0,), (1,)), ((), ()))),             # both transposed
    ((128,), (128, 16), (((0,), (0,)), ((), ()))),               # vector x matrix
    ((8, 128), (128,), (((1,), (0,)), ((), ()))),                # matrix x vector
    ((128,), (128,), (((0,), (0,)), ((), ()))),                  # vector . vector
    ((3, 4, 128), (128, 16), (((2,), (0,)), ((), ()))),          # two lhs free dims
    ((8, 128), (2, 16, 128), (((1,), (2,)), ((), ()))),          # two rhs free dims
    ((2, 8, 4, 32), (4, 32, 16), (((2, 3), (0, 1)), ((), ()))),  # two contracting dims
    ((3, 8, 64), (3, 64, 16), (((2,), (1,)), ((0,), (0,)))),     # batched
    ((3, 8, 64), (3, 16, 64), (((2,), (2,)), ((0,), (0,)))),     # batched q.k^T
    ((8, 3, 64), (64, 3, 16), (((2,), (0,)), ((1,), (1,)))),     # batch dims not first
    ((2, 3, 8, 32), (3, 2, 32, 8), (((3,), (2,)), ((0, 1), (1, 0)))),  # two batch dims
    ((2, 64), (2, 64, 8), (((1,), (1,)), ((0,), (0,)))),         # batched vector x matrix
    ((200, 8, 16), (200, 16, 8), (((2,), (1,)), ((0,), (0,)))),  # a batch past any unrolling
]


@pytest.mark.parametrize("xs, ys, dims", FORMS, ids=[str(i) for i in range(len(FORMS))])
def test_dot_general_forms(backend, xs, ys, dims):
    x, y = _f32(xs, 1), _f32(ys, 2)
    want = _numpy_dot_general(x, y, dims)
    got = tj.pallas_call(_dot_kernel(dims), jax.ShapeDtypeStruct(want.shape or (1,), F32),
                         backend=backend)(x, y)
    np.testing.assert_allclose(np.asarray(got).reshape(want.shape), want, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("dtype, preferred", [
    (jnp.int8, jnp.int32), (jnp.int8, jnp.float32), (jnp.bfloat16, jnp.float32),
    (jnp.bfloat16, None), (jnp.int32, None)])
def test_dot_general_dtypes(backend, dtype, preferred):
    rng = np.random.default_rng(3)
    dims = (((1,), (0,)), ((), ()))
    if jnp.issubdtype(dtype, jnp.integer):
        x = rng.integers(-100, 100, (8, 128)).astype(dtype)
        y = rng.integers(-100, 100, (128, 16)).astype(dtype)
    else:
        x, y = _f32((8, 128), 4).astype(dtype), _f32((128, 16), 5).astype(dtype)
    want = jax.lax.dot_general(x, y, dims, preferred_element_type=preferred)
    got = tj.pallas_call(_dot_kernel(dims, preferred=preferred),
                         jax.ShapeDtypeStruct(want.shape, want.dtype), backend=backend)(x, y)
    assert got.dtype == want.dtype
    exact = np.asarray(want).astype(np.float64)
    tol = 1e-2 if want.dtype == jnp.bfloat16 else 1e-5
    np.testing.assert_allclose(np.asarray(got).astype(np.float64), exact, rtol=tol, atol=tol)


def test_dot_general_mixed_operand_dtypes(backend):
    x, y = _f32((8, 128), 6).astype(jnp.bfloat16), _f32((128, 16), 7)
    dims = (((1,), (0,)), ((), ()))
    want = x.astype(np.float64) @ y.astype(np.float64)
    got = tj.pallas_call(_dot_kernel(dims, preferred=F32), jax.ShapeDtypeStruct((8, 16), F32),
                         backend=backend)(x, y)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-4)


def test_dot_general_batch_is_a_loop_of_constant_size():
    """A batched dot is one loop over the batch, not a dot per element: the
    kernel's op count is the same for a batch of 2 and of 200."""
    sizes = []
    for nb in (2, 200):
        dims = (((2,), (1,)), ((0,), (0,)))
        x, y = _f32((nb, 8, 16), 1), _f32((nb, 16, 8), 2)
        text = tj.pallas_call(_dot_kernel(dims), jax.ShapeDtypeStruct((nb, 8, 8), F32)
                              ).lower_to_tsr(x, y)
        sizes.append(sum(" = dot " in line for line in text.splitlines()))
        assert " for " in text
    assert sizes == [1, 1], sizes


# ---- numerics="tpu" --------------------------------------------------------------------


def _bf16_pieces(x, n):
    """x split as a TPU's MXU passes take it: n bf16 pieces, each the
    nearest bf16 to what the previous ones leave."""
    out, rest = [], x.astype(np.float32)
    for _ in range(n):
        p = rest.astype(ml_dtypes.bfloat16).astype(np.float32)
        out.append(p)
        rest = (rest - p).astype(np.float32)
    return out


def _mxu_model(x, y, n):
    """The products of bf16 pieces (i, j) with i + j < n, each exact, summed
    in float64: the TPU's result up to f32 accumulation."""
    xs, ys = _bf16_pieces(x, n), _bf16_pieces(y, n)
    return sum(xs[i].astype(np.float64) @ ys[j].astype(np.float64)
               for i in range(n) for j in range(n) if i + j < n)


@pytest.mark.parametrize("precision, pieces", [
    (None, 1), (jax.lax.Precision.DEFAULT, 1), (jax.lax.Precision.HIGH, 2),
    (jax.lax.Precision.HIGHEST, 3)])
def test_numerics_tpu_rounds_f32_dot_operands(backend, precision, pieces):
    # values with more bits than bf16 keeps, so that every pass matters
    x = _f32((8, 256), 8) * (1 + 2.0 ** -9)
    y = _f32((256, 128), 9) * (1 - 2.0 ** -11)
    dims = (((1,), (0,)), ((), ()))
    call = tj.pallas_call(_dot_kernel(dims, precision=precision),
                          jax.ShapeDtypeStruct((8, 128), F32), backend=backend, numerics="tpu")
    got = np.asarray(call(x, y)).astype(np.float64)
    model = _mxu_model(x, y, pieces)
    exact = x.astype(np.float64) @ y.astype(np.float64)
    scale = np.abs(x).astype(np.float64) @ np.abs(y).astype(np.float64)
    # the model up to f32 accumulation; and (except where the passes reach
    # f32's precision) measurably far from the exact product
    np.testing.assert_allclose(got, model, rtol=0, atol=float(scale.max()) * 2.0 ** -22)
    if pieces < 3:
        assert np.abs(got - exact).max() > 16 * np.abs(model - got).max()
    # numerics="cpu" (the default) is the exact f32 product
    cpu = tj.pallas_call(_dot_kernel(dims, precision=precision),
                         jax.ShapeDtypeStruct((8, 128), F32), backend=backend)(x, y)
    np.testing.assert_allclose(np.asarray(cpu), exact, rtol=0,
                               atol=float(scale.max()) * 2.0 ** -20)


def test_numerics_tpu_leaves_bf16_and_integer_dots(backend):
    dims = (((1,), (0,)), ((), ()))
    x, y = _f32((8, 128), 10).astype(jnp.bfloat16), _f32((128, 16), 11).astype(jnp.bfloat16)
    for numerics in ("cpu", "tpu"):
        got = tj.pallas_call(_dot_kernel(dims, preferred=F32),
                             jax.ShapeDtypeStruct((8, 16), F32), backend=backend,
                             numerics=numerics)(x, y)
        np.testing.assert_allclose(np.asarray(got), x.astype(np.float64) @ y.astype(np.float64),
                                   rtol=1e-5, atol=1e-4)


def test_numerics_option_checked():
    with pytest.raises(ValueError, match="numerics"):
        tj.pallas_call(_dot_kernel((((1,), (0,)), ((), ()))),
                       jax.ShapeDtypeStruct((8, 16), F32), numerics="gpu")
