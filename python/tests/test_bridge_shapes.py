"""Shape and elementwise forms of Pallas kernels: pltpu.roll with a stride,
nextafter, lax.pad / jnp.pad, dynamic_update_slice, broadcast_to, stack, bitcasts and
lax.platform_dependent. Each kernel runs through tessera.jax.pallas_call on
both backends and is compared with JAX's own result for the same
computation outside a kernel (or numpy), computed in the test."""

from __future__ import annotations

import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
jax = pytest.importorskip("jax")

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402
from jax.experimental import pallas as pl  # noqa: E402
from jax.experimental.pallas import tpu as pltpu  # noqa: E402

import tessera.jax as tj  # noqa: E402

BACKENDS = ["interp", "cpu"]


def run(kernel, out_shape, *args, **kw):
    return tj.pallas_call(kernel, out_shape, **kw)(*args)


def sds(shape, dtype=jnp.float32):
    return jax.ShapeDtypeStruct(shape, dtype)


def _f32(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _strided_roll(x, shift, axis, stride, stride_axis):
    """pltpu.roll's stride: slice k along stride_axis rolled by shift + k * stride."""
    parts = np.split(x, x.shape[stride_axis], stride_axis)
    return np.concatenate([np.roll(p, shift + k * stride, axis) for k, p in enumerate(parts)],
                          stride_axis)


# ---- pltpu.roll with stride / stride_axis ----------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape,axis,stride_axis", [
    ((8, 128), 1, 0), ((8, 128), 0, 1), ((4, 8, 128), 2, 0), ((4, 8, 128), 0, 2),
    ((4, 8, 128), 1, 2), ((2, 16, 256), 2, 1)])
@pytest.mark.parametrize("stride", [0, 1, 3, 130])
def test_roll_with_stride_static_shift(backend, shape, axis, stride_axis, stride):
    x = np.arange(np.prod(shape), dtype=np.int32).reshape(shape)
    shift = 5

    def k(x_ref, o_ref):
        o_ref[...] = pltpu.roll(x_ref[...], shift, axis, stride=stride, stride_axis=stride_axis)
    got = np.asarray(run(k, sds(shape, jnp.int32), x, backend=backend))
    np.testing.assert_array_equal(got, _strided_roll(x, shift, axis, stride, stride_axis))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shift", [0, 7, 127, 128, 300, -1, -129])
def test_roll_with_stride_dynamic_shift(backend, shift):
    # A traced shift (from SMEM), negative and beyond the axis included: the
    # IR's roll takes any i32 shift mod n, as jnp.roll does.
    x = _f32((8, 128))

    def k(s_ref, x_ref, o_ref):
        o_ref[...] = pltpu.roll(x_ref[...], s_ref[0], 1, stride=2, stride_axis=0)
    s = np.array([shift], np.int32)
    got = np.asarray(run(k, sds((8, 128)), s, x, backend=backend,
                         in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM),
                                   pl.BlockSpec(memory_space=pltpu.VMEM)]))
    np.testing.assert_array_equal(got, _strided_roll(x, shift, 1, 2, 0))


@pytest.mark.parametrize("backend", BACKENDS)
def test_roll_with_stride_bool_and_bf16(backend):
    x = _f32((16, 128), 1)

    def k(x_ref, o_ref, b_ref):
        v = x_ref[...]
        o_ref[...] = pltpu.roll(v.astype(jnp.bfloat16), 9, 1, stride=1, stride_axis=0)
        b_ref[...] = pltpu.roll(v > 0, 3, 0, stride=5, stride_axis=1).astype(jnp.int32)
    o, b = run(k, (sds((16, 128), jnp.bfloat16), sds((16, 128), jnp.int32)), x,
               backend=backend)
    want_o = _strided_roll(np.asarray(jnp.asarray(x).astype(jnp.bfloat16)), 9, 1, 1, 0)
    np.testing.assert_array_equal(np.asarray(o), want_o)
    np.testing.assert_array_equal(np.asarray(b), _strided_roll(x > 0, 3, 0, 5, 1).astype(np.int32))


# ---- nextafter -------------------------------------------------------------

def _nextafter_operands(dtype):
    """Every pair of interesting values: zeros of both signs, the smallest
    and largest subnormals and normals, infinities, NaN, ordinary values."""
    info = jnp.finfo(dtype)
    vals = [0.0, -0.0, float(info.smallest_subnormal), -float(info.smallest_subnormal),
            float(info.tiny), -float(info.tiny), float(info.max), -float(info.max),
            np.inf, -np.inf, np.nan, 1.0, -1.0, 3.2, -5.1, 1e-3]
    x = np.array(vals, np.float32)
    a, b = np.meshgrid(x, x)
    n = a.size
    pad = -n % 128
    a = np.concatenate([a.ravel(), np.full(pad, 2.0, np.float32)]).reshape(-1, 128)
    b = np.concatenate([b.ravel(), np.full(pad, -2.0, np.float32)]).reshape(-1, 128)
    return jnp.asarray(a).astype(dtype), jnp.asarray(b).astype(dtype)


def _bits(x):
    x = np.asarray(x)
    return x.view(np.uint32 if x.dtype.itemsize == 4 else np.uint16)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16, jnp.float16])
def test_nextafter_bits_match_jax(backend, dtype):
    a, b = _nextafter_operands(dtype)

    def k(a_ref, b_ref, o_ref):
        o_ref[...] = jnp.nextafter(a_ref[...], b_ref[...])
    got = run(k, sds(a.shape, dtype), a, b, backend=backend)
    want = jax.jit(jnp.nextafter)(a, b)
    np.testing.assert_array_equal(_bits(got), _bits(want))


@pytest.mark.parametrize("backend", BACKENDS)
def test_nextafter_scalar_operand_broadcast(backend):
    x = _f32((8, 128))

    def k(x_ref, o_ref):
        o_ref[...] = jnp.nextafter(x_ref[...], jnp.float32(np.inf))
    got = run(k, sds((8, 128)), x, backend=backend)
    np.testing.assert_array_equal(_bits(got), _bits(jnp.nextafter(x, np.float32(np.inf))))


# ---- lax.pad / jnp.pad -----------------------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("config", [
    ((2, 3, 0), (0, 0, 0)), ((0, 0, 0), (5, 100, 0)), ((1, 1, 1), (0, 0, 2)),
    ((-2, 1, 0), (3, -4, 0)), ((0, -1, 2), (-1, 2, 1)), ((0, 0, 0), (0, 0, 0))])
def test_lax_pad_matches_jax(backend, config):
    x = _f32((8, 24))

    def k(x_ref, o_ref):
        o_ref[...] = lax.pad(x_ref[...], jnp.float32(-1.5), config)
    want = lax.pad(jnp.asarray(x), jnp.float32(-1.5), config)
    got = run(k, sds(want.shape), x, backend=backend)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("starts", [(0, 0), (3, 40), (5, 100), (-4, 7), (100, -100)])
def test_dynamic_update_slice_matches_jax(backend, starts):
    # starts read from SMEM (traced), clamped as lax clamps them when the
    # update would leave the block
    x, u = _f32((8, 128), 3), _f32((3, 29), 4)

    def k(s_ref, x_ref, u_ref, o_ref):
        o_ref[...] = lax.dynamic_update_slice(x_ref[...], u_ref[...], (s_ref[0], s_ref[1]))
    s = np.asarray(starts, np.int32)
    want = lax.dynamic_update_slice(jnp.asarray(x), jnp.asarray(u), starts)
    got = run(k, sds((8, 128)), s, x, u, backend=backend,
              in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM), pl.BlockSpec(), pl.BlockSpec()])
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


@pytest.mark.parametrize("backend", BACKENDS)
def test_dynamic_update_slice_static_starts_and_dtypes(backend):
    x = np.arange(4 * 8 * 128, dtype=np.int32).reshape(4, 8, 128)
    u = -np.arange(2 * 8 * 3, dtype=np.int32).reshape(2, 8, 3)

    def k(x_ref, u_ref, o_ref, b_ref):
        o_ref[...] = lax.dynamic_update_slice(x_ref[...], u_ref[...], (1, 0, 125))
        b_ref[...] = lax.dynamic_update_slice(x_ref[...].astype(jnp.bfloat16),
                                              u_ref[...].astype(jnp.bfloat16), (3, 0, 0))
    got, got_b = run(k, (sds(x.shape, jnp.int32), sds(x.shape, jnp.bfloat16)), x, u,
                     backend=backend)
    np.testing.assert_array_equal(np.asarray(got), lax.dynamic_update_slice(x, u, (1, 0, 125)))
    want_b = lax.dynamic_update_slice(jnp.asarray(x, jnp.bfloat16), jnp.asarray(u, jnp.bfloat16),
                                      (3, 0, 0))
    np.testing.assert_array_equal(np.asarray(got_b, np.float32), np.asarray(want_b, np.float32))


@pytest.mark.parametrize("backend", BACKENDS)
def test_jnp_pad_traced_value_and_bf16(backend):
    # The pad value read from SMEM (a traced scalar), and jnp.pad of a bf16
    # block with a constant, as sort/top-k kernels pad their tiles.
    x = _f32((8, 100), 2)

    def k(v_ref, x_ref, o_ref, b_ref):
        v = x_ref[...]
        o_ref[...] = lax.pad(v, v_ref[0], ((1, 2, 0), (0, 28, 0)))
        b_ref[...] = jnp.pad(v.astype(jnp.bfloat16), ((0, 0), (3, 25)), constant_values=7)
    pv = np.array([2.25], np.float32)
    o, b = run(k, (sds((11, 128)), sds((8, 128), jnp.bfloat16)), pv, x, backend=backend,
               in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM),
                         pl.BlockSpec(memory_space=pltpu.VMEM)])
    np.testing.assert_array_equal(np.asarray(o),
                                  np.asarray(lax.pad(jnp.asarray(x), jnp.float32(2.25),
                                                     ((1, 2, 0), (0, 28, 0)))))
    np.testing.assert_array_equal(
        np.asarray(b), np.asarray(jnp.pad(jnp.asarray(x).astype(jnp.bfloat16), ((0, 0), (3, 25)),
                                          constant_values=7)))


# ---- bitcasts, stack, platform_dependent -----------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
def test_bitcast_convert_type_changing_width(backend):
    x = _f32((8, 128), 3)
    h = np.random.default_rng(4).integers(-30000, 30000, (8, 128, 2)).astype(np.int16)

    def k(x_ref, h_ref, a_ref, b_ref, c_ref):
        a_ref[...] = lax.bitcast_convert_type(x_ref[...], jnp.int16)        # adds a dim
        b_ref[...] = lax.bitcast_convert_type(h_ref[...], jnp.float32)      # drops it
        c_ref[...] = lax.bitcast_convert_type(x_ref[...], jnp.bfloat16).astype(jnp.float32)
    a, b, c = run(k, (sds((8, 128, 2), jnp.int16), sds((8, 128)), sds((8, 128, 2))), x, h,
                  backend=backend)
    jx, jh = jnp.asarray(x), jnp.asarray(h)
    np.testing.assert_array_equal(np.asarray(a), np.asarray(lax.bitcast_convert_type(jx, jnp.int16)))
    np.testing.assert_array_equal(np.asarray(b).view(np.uint32),
                                  np.asarray(lax.bitcast_convert_type(jh, jnp.float32)).view(np.uint32))
    np.testing.assert_array_equal(
        np.asarray(c), np.asarray(lax.bitcast_convert_type(jx, jnp.bfloat16).astype(jnp.float32)))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dim", [-2, -1])
def test_pltpu_bitcast_packs_along_dim(backend, dim):
    x = np.random.default_rng(5).integers(-2**31, 2**31 - 1, (16, 128)).astype(np.int32)
    narrow = (32, 128) if dim == -2 else (16, 256)

    def k(x_ref, a_ref, b_ref):
        y = pltpu.bitcast(x_ref[...], jnp.int16, dim=dim)
        a_ref[...] = y
        b_ref[...] = pltpu.bitcast(y, jnp.int32, dim=dim)
    a, b = run(k, (sds(narrow, jnp.int16), sds((16, 128), jnp.int32)), x, backend=backend)
    # Pallas's own definition of pltpu.bitcast, evaluated by JAX outside a kernel
    from jax._src.pallas.mosaic import primitives as tpu_prims
    want = jax.jit(lambda v: tpu_prims.bitcast(v, jnp.int16, dim=dim))(jnp.asarray(x))
    np.testing.assert_array_equal(np.asarray(a), np.asarray(want))
    np.testing.assert_array_equal(np.asarray(b), x)


@pytest.mark.parametrize("backend", BACKENDS)
def test_stack_and_platform_dependent(backend):
    x = _f32((8, 128), 6)

    def k(x_ref, s_ref, p_ref):
        v = x_ref[...]
        s_ref[...] = jnp.stack([v, v * 2.0, -v], axis=1)
        # The branch JAX's TPU interpret mode takes (it runs on the CPU).
        p_ref[...] = lax.platform_dependent(v, cpu=lambda a: a + 1.0, tpu=lambda a: a * 2.0,
                                            default=lambda a: a - 1.0)
    s, p = run(k, (sds((8, 3, 128)), sds((8, 128))), x, backend=backend)
    np.testing.assert_array_equal(np.asarray(s), np.stack([x, x * 2, -x], axis=1))
    np.testing.assert_array_equal(np.asarray(p), x + 1.0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_state_broadcast_to(backend):
    # Pallas's equal-rank broadcast primitive (what Triton-style kernels use)
    from jax._src.state.primitives import broadcast_to
    x = _f32((1, 128), 8)

    def k(x_ref, o_ref):
        o_ref[...] = broadcast_to(x_ref[...], (8, 128)) + broadcast_to(x_ref[0:1, 0:1], (8, 128))
    got = run(k, sds((8, 128)), x, backend=backend)
    want = np.broadcast_to(x, (8, 128)) + x[0, 0]
    np.testing.assert_array_equal(np.asarray(got), want)
