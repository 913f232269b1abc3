"""Element-offset block dimensions (pl.Element, with padding), the printing
of a ref, literal negative ref indices and 16-bit float cumsum: each kernel
run on both backends and compared with what JAX (or numpy) computes here."""

from __future__ import annotations

import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
jax = pytest.importorskip("jax")

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.experimental import pallas as pl  # noqa: E402

import tessera.jax as tj  # noqa: E402

BACKENDS = ("interp", "cpu")


def sds(shape, dtype=jnp.float32):
    return jax.ShapeDtypeStruct(shape, dtype)


@pytest.mark.parametrize("backend", BACKENDS)
def test_debug_print_of_a_ref_prints_its_contents(backend, capfd):
    # values numpy prints without padding, so its spelling is the whole test
    x = np.array([1.25, 2.75, 3.5, 4.75], np.float32)[[0, 1, 3]]

    def k(x_ref, o_ref):
        jax.debug.print("x = {}", x_ref)
        o_ref[...] = x_ref[...]
    tj.pallas_call(k, sds((3,)), backend=backend)(x)
    text = "".join(capfd.readouterr())
    assert f"x = {np.array2string(x)}" in text, text


@pytest.mark.parametrize("backend", BACKENDS)
def test_literal_negative_index_counts_from_the_end_of_the_view(backend):
    x = np.arange(64, dtype=np.float32).reshape(8, 8)

    def k(x_ref, o_ref):
        v = x_ref.at[:4, 2:6]
        o_ref[...] = jnp.zeros_like(o_ref)
        o_ref[0, :4] = v[:, -1]
        o_ref[1, :4] = v[-2, :]
        o_ref[2, :] = x_ref[-1, :]
    got = np.asarray(tj.pallas_call(k, sds((8, 8)), backend=backend)(x))
    want = np.asarray(pl.pallas_call(k, sds((8, 8)), interpret=True)(x))
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got[0, :4], x[:4, 2:6][:, -1])
    np.testing.assert_array_equal(got[2], x[-1])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("axis,n", [(0, 8), (0, 48), (1, 8), (0, 300)])
def test_16_bit_float_cumsum_rounds_as_jax(backend, dtype, axis, n):
    # XLA:CPU's order and roundings (chunks of 16 scanned one element after
    # the other): the same bits as jax.lax.cumsum outside a kernel
    for seed in range(3):
        x = jax.random.normal(jax.random.key(seed), (n, 8) if axis == 0 else (8, n), dtype=dtype)

        def k(x_ref, o_ref):
            o_ref[...] = jnp.cumsum(x_ref[...], axis=axis)
        got = tj.pallas_call(k, sds(x.shape, dtype), backend=backend)(x)
        want = jnp.cumsum(x, axis=axis)
        np.testing.assert_array_equal(np.asarray(got, np.float32),
                                      np.asarray(want, np.float32))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_16_bit_float_reverse_cumsum_is_close_to_jax(backend, dtype):
    # XLA sums each reversed window on its own; tessera scans the mirrored
    # order: a few ulps of the running sum apart at most
    x = jax.random.normal(jax.random.key(7), (40, 8), dtype=dtype)

    def k(x_ref, o_ref):
        o_ref[...] = jax.lax.cumsum(x_ref[...], axis=0, reverse=True)
    got = np.asarray(tj.pallas_call(k, sds(x.shape, dtype), backend=backend)(x), np.float32)
    want = np.asarray(jax.lax.cumsum(x, axis=0, reverse=True), np.float32)
    exact = np.cumsum(np.asarray(x, np.float64)[::-1], axis=0)[::-1]
    ulp = float(jnp.finfo(dtype).eps) * np.abs(exact).max()
    np.testing.assert_allclose(got, want, rtol=0, atol=8 * ulp)
    assert np.abs(got - exact).max() <= 8 * ulp
