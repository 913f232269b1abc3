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


def _both(kernel, out_shape, *args, backend, **kw):
    """tessera's result and JAX's own interpreter's (pl.pallas_call with
    interpret=True, the reference for pl.Element and its padding)."""
    got = tj.pallas_call(kernel, out_shape, backend=backend, **kw)(*args)
    want = pl.pallas_call(kernel, out_shape, interpret=True, **kw)(*args)
    return got, want


@pytest.mark.parametrize("backend", BACKENDS)
def test_element_windows_overlap(backend):
    # each step sees 24 rows starting at 8 i: windows overlap, the last one
    # ends at the array's end
    x = np.random.default_rng(1).standard_normal((80, 128)).astype(np.float32)

    def k(x_ref, o_ref):
        o_ref[...] = x_ref[pl.ds(0, 8)] * 2.0 + x_ref[pl.ds(8, 8)] - x_ref[pl.ds(16, 8)]
    got, want = _both(k, sds((64, 128)), x, backend=backend, grid=(8,),
                      in_specs=[pl.BlockSpec((pl.Element(24), pl.Element(128)),
                                             lambda i: (i * 8, 0))],
                      out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)))
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    np.testing.assert_array_equal(np.asarray(got)[:8], x[:8] * 2 + x[8:16] - x[16:24])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", ["float32", "int32", "bfloat16"])
def test_element_padding_low_and_high(backend, dtype):
    # offsets in the padded array: the first window starts in the low
    # padding, the last runs into the high padding; the padding reads as
    # JAX's pad value (NaN, the integer minimum)
    x = (np.arange(3 * 20) % 23 - 11).reshape(3, 20).astype(dtype)

    def k(x_ref, o_ref):
        o_ref[...] = x_ref[...]
    got, want = _both(k, sds((4, 3, 8), dtype), x, backend=backend, grid=(4,),
                      in_specs=[pl.BlockSpec((pl.Element(3), pl.Element(8, (3, 5))),
                                             lambda i: (0, i * 7))],
                      out_specs=pl.BlockSpec((None, 3, 8), lambda i: (i, 0, 0)))
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)  # bf16 NaNs compare
    np.testing.assert_array_equal(got, want)
    pad = np.nan if "float" in dtype else np.iinfo(np.int32).min
    padded = np.full((3, 40), pad, np.float64)  # and past the padding: pad too
    padded[:, 3:23] = x.astype(np.float64)
    for i in range(4):
        np.testing.assert_array_equal(got[i], padded[:, 7 * i:7 * i + 8])


@pytest.mark.parametrize("backend", BACKENDS)
def test_element_output_windows(backend):
    # an output's element windows: each step writes 8 rows at offset 6 i
    # (overlapping writes, the later step's copy-out wins)
    x = np.random.default_rng(2).standard_normal((4, 8, 128)).astype(np.float32)

    def k(x_ref, o_ref):
        o_ref[...] = x_ref[...] + 1.0
    got, want = _both(k, sds((26, 128)), x, backend=backend, grid=(4,),
                      in_specs=[pl.BlockSpec((None, 8, 128), lambda i: (i, 0, 0))],
                      out_specs=pl.BlockSpec((pl.Element(8), pl.Element(128)),
                                             lambda i: (i * 6, 0)))
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_element_dims_in_the_ir_and_the_tpu_module():
    def k(x_ref, o_ref):
        o_ref[...] = x_ref[pl.ds(0, 8)]
    text = tj.lower_to_tsr(k, sds((8, 128)), np.zeros((8, 128), np.float32), grid=(1,),
                           in_specs=[pl.BlockSpec((pl.Element(16, (0, 8)), pl.Element(128)),
                                                  lambda i: (0, 0))],
                           out_specs=pl.BlockSpec((8, 128), lambda i: (0, 0)))
    assert "block[element(16, 0, 8), element(128)]" in text, text


@pytest.mark.parametrize("backend", BACKENDS)
def test_gather_of_single_elements(backend):
    # gathers other than take_along_axis: jnp.diagonal (two coordinates per
    # element), integer arrays in two dims, one with a batching dim (vmap)
    x = np.random.default_rng(3).standard_normal((16, 128)).astype(np.float32)
    rows = np.random.default_rng(4).integers(0, 16, (8, 128)).astype(np.int32)
    cols = np.random.default_rng(5).integers(0, 128, (8, 128)).astype(np.int32)

    def k(x_ref, r_ref, c_ref, d_ref, g_ref, b_ref):
        v = x_ref[...]
        d_ref[...] = jnp.diagonal(v, offset=3)
        g_ref[...] = v[r_ref[...], c_ref[...]]
        b_ref[...] = jax.vmap(lambda row, c: row[c])(v[:8], c_ref[...])
    outs = (sds((16,)), sds((8, 128)), sds((8, 128)))
    got = tj.pallas_call(k, outs, backend=backend)(x, rows, cols)
    want = pl.pallas_call(k, outs, interpret=True)(x, rows, cols)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
    np.testing.assert_array_equal(np.asarray(got[0]), np.diagonal(x, offset=3))
    np.testing.assert_array_equal(np.asarray(got[1]), x[rows, cols])
    np.testing.assert_array_equal(np.asarray(got[2]), np.take_along_axis(x[:8], cols, 1))


@pytest.mark.parametrize("backend", BACKENDS)
def test_gather_of_single_elements_out_of_range(backend):
    # a coordinate outside its dim is the kernel's error (undefined on a TPU),
    # never the neighbouring row's element its flat position would name;
    # mode="clip" clamps each coordinate
    x = np.arange(8 * 128, dtype=np.float32).reshape(8, 128)
    rows = np.zeros((8, 128), np.int32)
    cols = np.tile(np.arange(128, dtype=np.int32), (8, 1))
    cols[0, 0] = 128  # flat position 128: row 1's first element

    def clip(x_ref, r_ref, c_ref, o_ref):
        o_ref[...] = x_ref[...].at[r_ref[...], c_ref[...]].get(mode="clip")
    got = np.asarray(tj.pallas_call(clip, sds((8, 128)), backend=backend)(x, rows, cols))
    np.testing.assert_array_equal(got, x[np.clip(rows, 0, 7), np.clip(cols, 0, 127)])

    def k(x_ref, r_ref, c_ref, o_ref):
        o_ref[...] = x_ref[...].at[r_ref[...], c_ref[...]].get(mode="promise_in_bounds")
    call = tj.pallas_call(k, sds((8, 128)), backend=backend)
    if backend == "interp":
        with pytest.raises(Exception, match="out of|range|bounds"):
            jax.block_until_ready(call(x, rows, cols))
    else:  # the cpu backend checks no gather index at run time: it clamps
        assert np.asarray(call(x, rows, cols))[0, 0] != x[1, 0]
