"""Reads and writes through `ref.bitcast(dtype)` and `ref.reshape(shape)`
views (and chains of them with `.at[...]`) through tessera.jax: a ref's
bitcast is the TPU's, the second-minor dimension scaled by the ratio of the
widths (docs/jax.md, "What is translated"). Expected values come from numpy
in the test (`_tpu_bitcast` below, written from that rule); both backends.
"""

from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
import ml_dtypes  # noqa: E402
from jax.experimental import pallas as pl  # noqa: E402
from jax.experimental.pallas import tpu as pltpu  # noqa: E402

import tessera.jax as tj  # noqa: E402

BACKENDS = ["interp", "cpu"]


def _tpu_bitcast(x: np.ndarray, dtype) -> np.ndarray:
    """x's bits as `dtype` the TPU's way: k rows of the narrower dtype along
    the second-minor dimension make one row of the wider (row k*r + q is part
    q, the low bits first)."""
    dtype = np.dtype(dtype)
    a, b = x.dtype.itemsize, dtype.itemsize
    if a == b:
        return x.view(dtype)
    *lead, r, c = x.shape
    if a < b:
        k = b // a
        parts = x.reshape(*lead, r // k, k, c).swapaxes(-1, -2)
        return np.ascontiguousarray(parts).view(dtype)[..., 0]
    k = a // b
    parts = np.ascontiguousarray(x)[..., None].view(dtype)  # (.., r, c, k)
    return parts.swapaxes(-1, -2).reshape(*lead, r * k, c)


def _ints(shape, dtype, seed):
    info = np.iinfo(dtype)
    return np.random.default_rng(seed).integers(info.min, info.max, shape, dtype=dtype,
                                                endpoint=True)


def _call(kernel, out_shape, backend, **kw):
    return tj.pallas_call(kernel, out_shape, backend=backend, **kw)


def test_the_reference_is_jaxs_rule():
    # _tpu_bitcast against JAX's own helper, so the tests below compare with
    # the rule JAX's kernels are written for
    from jax._src.state import utils as state_utils
    x = _ints((8, 16), np.int32, 0)
    for dt in (np.int16, np.int8, np.uint32):
        np.testing.assert_array_equal(_tpu_bitcast(x, dt),
                                      np.asarray(state_utils.bitcast(jnp.asarray(x), dt)))
    y = _ints((8, 16), np.int16, 1)
    np.testing.assert_array_equal(_tpu_bitcast(y, np.int32),
                                  np.asarray(state_utils.bitcast(jnp.asarray(y), jnp.int32)))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("slice_first", [True, False])
def test_read_through_a_narrowing_bitcast(backend, slice_first):
    def kernel(x_ref, y_ref):
        if slice_first:
            y_ref[...] = x_ref.at[4:12, 8:40].bitcast(jnp.int16)[...]
        else:
            y_ref[...] = x_ref.bitcast(jnp.int16).at[6:22, 8:40][...]

    x = _ints((16, 64), np.int32, 2)
    got = np.asarray(_call(kernel, jax.ShapeDtypeStruct((16, 32), jnp.int16), backend)(x))
    want = (_tpu_bitcast(x[4:12, 8:40], np.int16) if slice_first
            else _tpu_bitcast(x, np.int16)[6:22, 8:40])
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_strided_rows_of_a_widening_bitcast(backend):
    # as ragged paged attention reads packed bf16 K/V: u32 rows b::step of
    # the bf16 buffer bitcast, the halves taken apart by shifts
    def kernel(x_ref, k_ref, v_ref):
        b = x_ref.bitcast(jnp.uint32)[1::2, :]
        k_ref[...] = pltpu.bitcast(b << 16, jnp.float32)
        v_ref[...] = pltpu.bitcast(b & jnp.uint32(0xFFFF0000), jnp.float32)

    x = np.random.default_rng(3).standard_normal((32, 128)).astype(ml_dtypes.bfloat16)
    out = jax.ShapeDtypeStruct((8, 128), jnp.float32)
    k, v = _call(kernel, (out, out), backend)(x)
    words = _tpu_bitcast(x.view(np.uint16), np.uint32)[1::2]
    np.testing.assert_array_equal(np.asarray(k), (words << 16).view(np.float32))
    np.testing.assert_array_equal(np.asarray(v), (words & 0xFFFF0000).view(np.float32))
    # the same values as the bf16 rows 4r + 2 and 4r + 3, widened
    np.testing.assert_array_equal(np.asarray(k), x[2::4].astype(np.float32))
    np.testing.assert_array_equal(np.asarray(v), x[3::4].astype(np.float32))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("primitive_io", [False, True])
def test_whole_write_through_a_bitcast(backend, primitive_io):
    def kernel(x_ref, y_ref):
        y_ref[...] = jnp.full(y_ref.shape, 7, jnp.int32)
        ref = y_ref.at[8:16, 0:128].bitcast(jnp.bfloat16)
        if primitive_io:
            pltpu.store(ref, pltpu.load(x_ref))
        else:
            ref[...] = x_ref[...]

    x = np.random.default_rng(4).standard_normal((16, 128)).astype(ml_dtypes.bfloat16)
    got = np.asarray(_call(kernel, jax.ShapeDtypeStruct((24, 256), jnp.int32), backend)(x))
    want = np.full((24, 256), 7, np.int32)
    want[8:16, 0:128] = _tpu_bitcast(x, np.int32)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_reshape_then_bitcast_then_index(backend):
    def kernel(x_ref, y_ref):
        ref = (x_ref.at[2:6]                     # i32 (4, 8, 128)
               .reshape(32, 128)                 # i32 (32, 128)
               .bitcast(jnp.int8)                # i8 (128, 128)
               .reshape(2, 64, 128)              # i8 (2, 64, 128)
               .at[1, 8:40, 64:128])             # i8 (32, 64)
        y_ref[...] = ref[...]

    x = _ints((8, 8, 128), np.int32, 6)
    got = np.asarray(_call(kernel, jax.ShapeDtypeStruct((32, 64), jnp.int8), backend)(x))
    want = _tpu_bitcast(x[2:6].reshape(32, 128), np.int8).reshape(2, 64, 128)[1, 8:40, 64:128]
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_whole_write_through_a_reshape(backend):
    def kernel(x_ref, y_ref):
        y_ref.reshape(5, 128)[...] = x_ref[...] + 1

    x = _ints((5, 128), np.int32, 7) // 2
    got = np.asarray(_call(kernel, jax.ShapeDtypeStruct((5, 1, 128), jnp.int32), backend)(x))
    np.testing.assert_array_equal(got, (x + 1).reshape(5, 1, 128))


@pytest.mark.parametrize("backend", BACKENDS)
def test_read_with_a_dynamic_index_after_the_bitcast(backend):
    def kernel(i_ref, x_ref, y_ref):
        i = i_ref[0]
        y_ref[...] = x_ref.bitcast(jnp.int16)[pl.ds(i, 8), :]

    x = _ints((16, 128), np.int32, 8)
    f = _call(kernel, jax.ShapeDtypeStruct((8, 128), jnp.int16), backend,
              in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM), pl.BlockSpec()])
    for i in (0, 5, 24):
        got = np.asarray(f(np.array([i], np.int32), x))
        np.testing.assert_array_equal(got, _tpu_bitcast(x, np.int16)[i:i + 8])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("rows", [(6, 22), (5, 21)])
def test_write_into_part_of_a_narrowing_bitcast(backend, rows):
    # i16 rows lo..hi of the view are halves of i32 rows lo // 2 ..: with an
    # odd lo the first and last i32 rows keep their other half, which the
    # write reads back (only those elements)
    lo, hi = rows

    def kernel(x_ref, y0_ref, y_ref):
        y_ref[...] = y0_ref[...]
        y_ref.bitcast(jnp.int16).at[lo:hi, 8:40][...] = x_ref[...]

    x = _ints((16, 32), np.int16, 9)
    y0 = _ints((16, 64), np.int32, 10)
    got = np.asarray(_call(kernel, jax.ShapeDtypeStruct((16, 64), jnp.int32), backend)(x, y0))
    halves = _tpu_bitcast(y0, np.int16)
    halves[lo:hi, 8:40] = x
    np.testing.assert_array_equal(got, _tpu_bitcast(halves, np.int32))


@pytest.mark.parametrize("backend", BACKENDS)
def test_strided_write_into_a_widening_bitcast(backend):
    def kernel(x_ref, y_ref):
        y_ref[...] = jnp.zeros_like(y_ref)
        y_ref.bitcast(jnp.int32)[1::2, :] = x_ref[...]

    x = _ints((4, 128), np.int32, 11)
    got = np.asarray(_call(kernel, jax.ShapeDtypeStruct((16, 128), jnp.int16), backend)(x))
    words = np.zeros((8, 128), np.int32)
    words[1::2] = x
    np.testing.assert_array_equal(got, _tpu_bitcast(words, np.int16))


def test_an_index_outside_the_bitcast_view_is_a_located_error():
    def kernel(i_ref, x_ref, y_ref):
        y_ref[...] = x_ref.bitcast(jnp.int16)[pl.ds(i_ref[0], 8), :]

    x = _ints((16, 128), np.int32, 12)
    f = _call(kernel, jax.ShapeDtypeStruct((8, 128), jnp.int16), "interp",
              in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM), pl.BlockSpec()])
    with pytest.raises(tj.KernelError) as info:
        f(np.array([25], np.int32), x)
    text = str(info.value)
    assert "out of bounds for dimension 0" in text and "[32, 128]" in text, text
    assert "test_bridge_ref_views.py" in text, text
