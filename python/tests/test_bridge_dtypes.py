"""The sub-byte integers (int4 uint4 int2 uint2), the 8-bit floats
(float8_e4m3fn float8_e5m2) and narrow SMEM scalars through
tessera.jax.pallas_call, on both backends, compared with what JAX computes
for the same expressions outside Pallas."""

from __future__ import annotations

import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
jax = pytest.importorskip("jax")

import jax.numpy as jnp  # noqa: E402
import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402
from jax.experimental import pallas as pl  # noqa: E402
from jax.experimental.pallas import tpu as pltpu  # noqa: E402

import tessera.jax as tj  # noqa: E402

BACKENDS = ("interp", "cpu")
NARROW = ("int4", "uint4", "int2", "uint2", "float8_e4m3fn", "float8_e5m2")


def _f32(shape, seed=0, scale=1.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


def _specials():
    # ties, overflow, subnormals, NaN and the extremes of every narrow dtype
    return np.array([0.0, -0.0, 0.5, 1.5, 2.5, -2.5, 7.5, 8.0, -8.5, 15.5, 16.0, 448.0,
                     464.0, 465.0, 480.0, 1e6, 57344.0, 61440.0, 61441.0, 2.0**-9,
                     2.0**-10, 3 * 2.0**-10, 2.0**-16, 2.0**-17, np.inf, -np.inf, np.nan,
                     -np.nan, 3.0, -3.0, 1.75, -100.0], np.float32)


def _bits(a):
    a = np.asarray(a)
    return a.view(np.uint8) if a.dtype.itemsize == 1 else a


def _same(got, want):
    """Equal bit patterns, every NaN equal to every NaN."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype
    if jnp.issubdtype(want.dtype, jnp.floating):
        gf, wf = got.astype(np.float32), want.astype(np.float32)
        both_nan = np.isnan(gf) & np.isnan(wf)
        np.testing.assert_array_equal(np.where(both_nan, 0, _bits(got)),
                                      np.where(both_nan, 0, _bits(want)))
    else:
        np.testing.assert_array_equal(_bits(got), _bits(want))


def _cast_kernel(dtype):
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...].astype(dtype)
    return kernel


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", NARROW)
def test_bridge_f32_to_narrow_and_back_matches_jax(backend, dtype):
    x = np.concatenate([_specials(), _f32(1024 - len(_specials()), scale=40)]).reshape(8, 128)
    if "int" in dtype:  # float -> int of NaN is unspecified by XLA
        x = np.where(np.isnan(x), 0, x)
    want = jnp.asarray(x).astype(dtype)
    got = tj.pallas_call(_cast_kernel(dtype), jax.ShapeDtypeStruct(x.shape, dtype),
                         backend=backend)(x)
    _same(got, want)
    # and back to f32, from every bit pattern of the dtype
    bits = 1 << jnp.iinfo(dtype).bits if "int" in dtype else 256
    pats = np.arange(1024, dtype=np.uint32) % bits
    if "int" in dtype:
        src = np.asarray(pats.astype(np.uint8), dtype=np.uint8)
        src = jax.lax.bitcast_convert_type(
            jnp.asarray(src).astype(getattr(jnp, "uint" + str(jnp.iinfo(dtype).bits))),
            dtype)
    else:
        src = jnp.asarray(pats.astype(np.uint8).view(np.dtype(getattr(ml_dtypes, dtype))))
    src = jnp.asarray(src).reshape(8, 128)
    want = src.astype(jnp.float32)
    got = tj.pallas_call(_cast_kernel(jnp.float32), jax.ShapeDtypeStruct(src.shape, jnp.float32),
                         backend=backend)(src)
    _same(got, want)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", ("int4", "uint4", "int2", "uint2"))
def test_bridge_sub_byte_integer_arithmetic_wraps_as_jax(backend, dtype):
    info = jnp.iinfo(dtype)
    rng = np.random.default_rng(3)
    a = jnp.asarray(rng.integers(info.min, info.max + 1, (8, 128)).astype(np.int32)).astype(dtype)
    b = jnp.asarray(rng.integers(info.min, info.max + 1, (8, 128)).astype(np.int32)).astype(dtype)

    def kernel(a_ref, b_ref, s_ref, p_ref, m_ref, c_ref):
        x, y = a_ref[...], b_ref[...]
        s_ref[...] = x + y
        p_ref[...] = x * y
        m_ref[...] = jnp.maximum(x, y) - y
        c_ref[...] = (x < y).astype(jnp.int32) + x.astype(jnp.int32)

    shape = jax.ShapeDtypeStruct(a.shape, dtype)
    outs = tj.pallas_call(kernel, (shape, shape, shape, jax.ShapeDtypeStruct(a.shape, jnp.int32)),
                          backend=backend)(a, b)
    wants = (a + b, a * b, jnp.maximum(a, b) - b, (a < b).astype(jnp.int32) + a.astype(jnp.int32))
    for got, want in zip(outs, wants):
        _same(got, want)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", NARROW)
def test_bridge_narrow_dtypes_in_odd_shapes(backend, dtype):
    # Rows of 37 leave a tail after every vector width the cpu backend
    # picks, and a grid of partial blocks writes the array's last rows:
    # under TESSERA_GUARD=1 (the suite's setting) compiled code that wrote a
    # byte past an output would fail the run.
    rng = np.random.default_rng(5)
    if jnp.issubdtype(dtype, jnp.integer):
        info = jnp.iinfo(dtype)
        a, b = (jnp.asarray(rng.integers(info.min, info.max + 1, (13, 37)).astype(np.int32))
                .astype(dtype) for _ in range(2))
    else:
        a, b = (jnp.asarray(rng.uniform(-4, 4, (13, 37)).astype(np.float32)).astype(dtype)
                for _ in range(2))

    def kernel(a_ref, b_ref, o_ref):
        o_ref[...] = a_ref[...] + b_ref[...]
    spec = pl.BlockSpec((8, 37), lambda i: (i, 0))
    got = tj.pallas_call(kernel, jax.ShapeDtypeStruct(a.shape, dtype), grid=(2,),
                         in_specs=[spec, spec], out_specs=spec, backend=backend)(a, b)
    _same(got, a + b)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", ("float8_e4m3fn", "float8_e5m2"))
def test_bridge_f8_arithmetic_rounds_back_as_jax(backend, dtype):
    x = jnp.asarray(_f32((8, 128), 1, 20)).astype(dtype)
    y = jnp.asarray(_f32((8, 128), 2, 20)).astype(dtype)

    def kernel(x_ref, y_ref, o_ref, m_ref):
        o_ref[...] = x_ref[...] * y_ref[...] + x_ref[...]
        m_ref[...] = jnp.max(x_ref[...].astype(jnp.float32), axis=1, keepdims=True).astype(dtype)

    outs = tj.pallas_call(kernel, (jax.ShapeDtypeStruct(x.shape, dtype),
                                   jax.ShapeDtypeStruct((8, 1), dtype)), backend=backend)(x, y)
    # JAX computes x * y + x in f32 and rounds each step back to the dtype
    step = (x.astype(jnp.float32) * y.astype(jnp.float32)).astype(dtype)
    want = (step.astype(jnp.float32) + x.astype(jnp.float32)).astype(dtype)
    _same(outs[0], want)
    _same(outs[1], jnp.max(x.astype(jnp.float32), axis=1, keepdims=True).astype(dtype))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", ("float8_e4m3fn", "float8_e5m2"))
def test_bridge_f8_nextafter_every_bit_pattern_as_jax(backend, dtype):
    # Each of the 256 patterns stepped toward a shuffled one: NaNs, zeros of
    # both signs, subnormals and (e5m2) infinities, bit for bit as JAX.
    dt = getattr(jnp, dtype)

    def k(a_ref, b_ref, o_ref):
        o_ref[...] = jnp.nextafter(a_ref[...], b_ref[...])
    bits = np.tile(np.arange(256, dtype=np.uint8), 4)
    a = bits.reshape(8, 128).view(dt)
    b = np.random.default_rng(3).permutation(bits).reshape(8, 128).view(dt)
    want = np.asarray(jnp.nextafter(jnp.asarray(a), jnp.asarray(b))).view(np.uint8)
    got = tj.pallas_call(k, jax.ShapeDtypeStruct(a.shape, dt), backend=backend)(a, b)
    np.testing.assert_array_equal(np.asarray(got).view(np.uint8), want)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype,index", [(jnp.bfloat16, 129), (jnp.int16, 257),
                                         (jnp.int8, 597), (jnp.float32, 3)])
def test_bridge_narrow_scalar_prefetch_reads_its_element(backend, dtype, index):
    def body(s_ref, o_ref):
        o_ref[...] = jnp.broadcast_to(s_ref[index], o_ref.shape)

    s = (jnp.arange(1024) % 100 - 50).astype(dtype)
    out = tj.pallas_call(body, jax.ShapeDtypeStruct((8, 128), dtype),
                         grid_spec=pltpu.PrefetchScalarGridSpec(
                             num_scalar_prefetch=1,
                             out_specs=pl.BlockSpec((8, 128), lambda i, s: (0, 0)), grid=(1,)),
                         backend=backend)(s)
    _same(out, jnp.broadcast_to(s[index], (8, 128)))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("value", (False, True))
def test_bridge_bool_smem_load_and_store(backend, value):
    def kernel(x_ref, o_ref):
        o_ref[0, 0] = jnp.logical_not(x_ref[0, 0])

    x = jnp.array([[value]])
    out = tj.pallas_call(kernel, jax.ShapeDtypeStruct((1, 1), jnp.bool_),
                         in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM)],
                         out_specs=pl.BlockSpec(memory_space=pltpu.SMEM), backend=backend)(x)
    _same(out, jnp.logical_not(x))
