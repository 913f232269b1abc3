"""One small Pallas kernel per family of primitives the bridge translates,
run through tessera.jax.pallas_call and compared with numpy."""

from __future__ import annotations

import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
jax = pytest.importorskip("jax")

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.experimental import pallas as pl  # noqa: E402
from jax.experimental.pallas import tpu as pltpu  # noqa: E402

import tessera.jax as tj  # noqa: E402

F32, I32 = jnp.float32, jnp.int32


def _f32(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _i32(shape, seed=0, lo=-100, hi=100):
    return np.random.default_rng(seed).integers(lo, hi, shape).astype(np.int32)


def run(kernel, out_shape, *args, **kw):
    return tj.pallas_call(kernel, out_shape, **kw)(*args)


def sds(shape, dtype=F32):
    return jax.ShapeDtypeStruct(shape, dtype)


def test_bridge_unary_float_math():
    def k(x_ref, o_ref):
        x = x_ref[...]
        o_ref[0] = jnp.exp(x[0]) + jnp.log(jnp.abs(x[1]) + 1.0) + jnp.sqrt(jnp.abs(x[2]))
        o_ref[1] = jnp.tanh(x[0]) * jax.nn.sigmoid(x[1]) - jax.lax.rsqrt(jnp.abs(x[2]) + 1.0)
        o_ref[2] = jnp.sin(x[0]) + jnp.cos(x[1]) + jnp.floor(x[2]) + jnp.ceil(x[0])
        o_ref[3] = jnp.round(x[1] * 3.0) + jnp.sign(x[2]) + jnp.exp2(x[0]) + jnp.log1p(
            jnp.abs(x[1]))
        o_ref[4] = jnp.maximum(x[0], x[1]) - jnp.minimum(x[1], x[2]) + x[0] ** 3
        o_ref[5] = jnp.clip(x[0], -0.5, 0.5) + jnp.square(x[1]) + jnp.expm1(x[2] * 0.1)
        o_ref[6] = jnp.where(jnp.isfinite(x[0] / x[1]), x[0] / x[1], 0.0)
        o_ref[7] = jnp.power(jnp.abs(x[2]) + 1.0, x[0]) - 1.0 / (x[1] * x[1] + 1.0)
    x = _f32((3, 8, 128))
    got = np.asarray(run(k, sds((8, 8, 128)), x))
    sig = 1 / (1 + np.exp(-x[1]))
    want = np.stack([
        np.exp(x[0]) + np.log(np.abs(x[1]) + 1) + np.sqrt(np.abs(x[2])),
        np.tanh(x[0]) * sig - 1 / np.sqrt(np.abs(x[2]) + 1),
        np.sin(x[0]) + np.cos(x[1]) + np.floor(x[2]) + np.ceil(x[0]),
        np.round(x[1] * 3) + np.sign(x[2]) + np.exp2(x[0]) + np.log1p(np.abs(x[1])),
        np.maximum(x[0], x[1]) - np.minimum(x[1], x[2]) + x[0] ** 3,
        np.clip(x[0], -0.5, 0.5) + x[1] ** 2 + np.expm1(x[2] * 0.1),
        x[0] / x[1],
        np.power(np.abs(x[2]) + 1, x[0]) - 1 / (x[1] * x[1] + 1)])
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_bridge_float_to_bool_of_subnormals_matches_jax(backend):
    # XLA:CPU (so JAX, and Pallas's interpret mode) converts an f32 or bf16
    # subnormal to False, where numpy says True; f16 subnormals are f32
    # normals, True in both (docs/semantics.md, "Numerics").
    import ml_dtypes
    f32 = np.array([1e-40, -1e-40, 1.4e-45, 1.1754942e-38, 0.0, -0.0, 1.1754944e-38,
                    -3.0, np.nan, np.inf, -np.inf, 1.0], np.float32)
    bf16 = np.array([0x0001, 0x8001, 0x007f, 0x0000, 0x8000, 0x0080, 0x3f80, 0x7fc0,
                     0x7f80, 0xff80, 0x0040, 0x8040], np.uint16).view(ml_dtypes.bfloat16)
    f16 = np.array([0x0001, 0x8001, 0x03ff, 0x0000, 0x8000, 0x0400, 0x3c00, 0x7e00,
                    0x7c00, 0xfc00, 0x0200, 0x8200], np.uint16).view(np.float16)

    def k(a_ref, b_ref, c_ref, o_ref):
        o_ref[0] = a_ref[...].astype(jnp.bool_).astype(I32)
        o_ref[1] = b_ref[...].astype(jnp.bool_).astype(I32)
        o_ref[2] = c_ref[...].astype(jnp.bool_).astype(I32)

    args = [np.resize(v, (8, 128)) for v in (f32, bf16, f16)]
    got = np.asarray(run(k, sds((3, 8, 128), I32), *args, backend=backend))
    want = np.asarray(pl.pallas_call(k, sds((3, 8, 128), I32), interpret=True)(*args))
    np.testing.assert_array_equal(got, want)
    assert not got[0, 0, :4].any() and not got[1, 0, :5].any()  # subnormals and zeros
    assert got[2, 0, :3].all()  # f16 subnormals
    np.testing.assert_array_equal(
        got, np.stack([np.asarray(jnp.asarray(a).astype(bool)) for a in args]).astype(np.int32))


def test_bridge_integer_and_bitwise_ops():
    def k(x_ref, y_ref, o_ref):
        x, y = x_ref[...], y_ref[...]
        o_ref[0] = (x & y) | (x ^ 5)
        o_ref[1] = (x << 2) + (x >> 1) + jax.lax.shift_right_logical(x, 3)
        o_ref[2] = jnp.where(y != 0, x // jnp.where(y == 0, 1, y), 0)
        o_ref[3] = jax.lax.rem(x, jnp.where(y == 0, 7, y)) + ~x
        o_ref[4] = jax.lax.population_count(x) + jax.lax.clz(x)
        o_ref[5] = jax.lax.bitcast_convert_type(x.astype(F32), I32) & 0xFF
        o_ref[6] = (x > y).astype(I32) + (x <= y).astype(I32) * 2 + (x == y).astype(I32) * 4
        o_ref[7] = jnp.abs(x) * jnp.sign(y) - x.astype(F32).astype(I32)
    x, y = _i32((8, 128)), _i32((8, 128), 1, -5, 5)
    got = np.asarray(run(k, sds((8, 8, 128), I32), x, y))
    ysafe = np.where(y == 0, 1, y)
    q = np.where(y != 0, np.floor_divide(x, ysafe), 0)
    r = np.fmod(x, np.where(y == 0, 7, y))
    u = x.view(np.uint32)
    pop = np.array([bin(v).count("1") for v in u.ravel()]).reshape(x.shape)
    clz = np.array([32 - int(v).bit_length() for v in u.ravel()]).reshape(x.shape)
    want = np.stack([
        (x & y) | (x ^ 5),
        (x << 2) + (x >> 1) + (u >> 3).view(np.int32),
        q, r + ~x, pop + clz,
        x.astype(np.float32).view(np.int32) & 0xFF,
        (x > y) + (x <= y) * 2 + (x == y) * 4,
        np.abs(x) * np.sign(y) - x]).astype(np.int32)
    np.testing.assert_array_equal(got, want)


def test_bridge_reductions_and_arg_reductions():
    def k(x_ref, o_ref, i_ref):
        x = x_ref[...]
        o_ref[0, :] = jnp.sum(x, axis=0)
        o_ref[1, :] = jnp.max(x, axis=0)
        o_ref[2, :] = jnp.min(x, axis=0)
        o_ref[3, :] = jnp.prod(x[:4], axis=0)
        o_ref[4, :] = jnp.full((128,), jnp.sum(x))
        o_ref[5, :] = jnp.any(x > 1.5, axis=0).astype(F32) + jnp.all(x > -3.0, axis=0)
        o_ref[6:8, :] = jnp.mean(x, axis=1, keepdims=True)[:2] + jnp.zeros((2, 128), F32)
        i_ref[0, :] = jnp.argmax(x, axis=0).astype(I32)
        i_ref[1, :] = jnp.argmin(x, axis=0).astype(I32)
    x = _f32((8, 128))
    o, i = run(k, (sds((8, 128)), sds((2, 128), I32)), x)
    want = np.stack([x.sum(0), x.max(0), x.min(0), x[:4].prod(0), np.full(128, x.sum()),
                     (x > 1.5).any(0).astype(np.float32) + (x > -3).all(0),
                     *np.broadcast_to(x.mean(1, keepdims=True)[:2], (2, 128))])
    np.testing.assert_allclose(np.asarray(o), want, rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(np.asarray(i), np.stack([x.argmax(0), x.argmin(0)]))


def test_bridge_shape_ops():
    def k(x_ref, o_ref, t_ref):
        x = x_ref[...]                                    # (8, 128)
        o_ref[0:4, :] = x[0:8:2, :]                       # strided slice
        o_ref[4:8, :] = jnp.concatenate([x[4:8, 64:], x[4:8, :64]], axis=1)
        o_ref[8:16, :] = pltpu.roll(x, 3, 1)
        o_ref[16:24, :] = x.reshape(8, 2, 64).reshape(8, 128)
        o_ref[24:25, :] = jnp.expand_dims(jnp.squeeze(x[2:3, :], 0), 0)
        t_ref[...] = x[:, :8].T
    x = _f32((8, 128))
    o, t = run(k, (sds((25, 128)), sds((8, 8))), x)
    want = np.concatenate([x[0:8:2], np.concatenate([x[4:8, 64:], x[4:8, :64]], 1),
                           np.roll(x, 3, 1), x, x[2:3]])
    np.testing.assert_array_equal(np.asarray(o), want)
    np.testing.assert_array_equal(np.asarray(t), x[:, :8].T)


def test_bridge_iota_broadcast_and_select_n():
    def k(x_ref, o_ref):
        x = x_ref[...]
        row = jax.lax.broadcasted_iota(I32, (8, 128), 0)
        which = row % 3
        o_ref[...] = jax.lax.select_n(which, x, x * 2.0, -x) + x[0:1, :] + x[:, 0:1]
    x = _f32((8, 128))
    got = np.asarray(run(k, sds((8, 128)), x))
    which = np.arange(8)[:, None] % 3
    want = np.choose(np.broadcast_to(which, x.shape), [x, 2 * x, -x]) + x[0:1] + x[:, 0:1]
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_bridge_dot_forms():
    def k(a_ref, b_ref, o1, o2, o3):
        a, b = a_ref[...], b_ref[...]
        o1[...] = jnp.dot(a, b, preferred_element_type=F32)
        o2[...] = jax.lax.dot_general(a, b.T, (((1,), (1,)), ((), ())))   # a @ b.T.T
        o3[...] = jax.lax.dot_general(a.T, b, (((0,), (0,)), ((), ())))   # (a.T).T @ b
    a, b = _f32((16, 32)), _f32((32, 128), 1)
    outs = run(k, (sds((16, 128)),) * 3, a, b)
    for o in outs:
        np.testing.assert_allclose(np.asarray(o), a @ b, rtol=1e-4, atol=1e-4)


def test_bridge_ref_views_strided_squeezed_and_at():
    def k(x_ref, o_ref):
        # a squeezed block dim: the kernel sees (16, 128)
        v = x_ref.at[2:10]                               # a view of rows 2..10
        o_ref[0:4, :] = v[pl.ds(1, 4, stride=2), :]      # rows 3, 5, 7, 9
        o_ref[4, :] = x_ref[pl.program_id(0) + 1, :]
        o_ref[5:8, :] = v.at[4:7][...]
    x = _f32((2, 16, 128))
    got = np.asarray(run(
        k, sds((2, 8, 128)), x, grid=(2,),
        in_specs=[pl.BlockSpec((None, 16, 128), lambda i: (i, 0, 0))],
        out_specs=pl.BlockSpec((None, 8, 128), lambda i: (i, 0, 0))))
    for i in range(2):
        np.testing.assert_array_equal(got[i, 0:4], x[i, 3:10:2])
        np.testing.assert_array_equal(got[i, 4], x[i, i + 1])
        np.testing.assert_array_equal(got[i, 5:8], x[i, 6:9])


def test_bridge_smem_scratch_semaphores_and_while():
    def k(x_ref, o_ref, count_ref, sem):
        count_ref[0] = 0

        def cond(c):
            return c < 5

        def body(c):
            count_ref[0] = count_ref[0] + c
            pl.semaphore_signal(sem, 2)
            return c + 1
        jax.lax.while_loop(cond, body, 0)
        pl.semaphore_wait(sem, 10)
        left = pl.semaphore_read(sem)
        o_ref[...] = x_ref[...] + (count_ref[0] + left).astype(F32)
    x = _f32((8, 128))
    got = np.asarray(run(k, sds((8, 128)), x,
                         scratch_shapes=[pltpu.SMEM((1,), I32), pltpu.SemaphoreType.REGULAR]))
    np.testing.assert_array_equal(got, x + 10)


def test_bridge_debug_print_reaches_the_output(capfd):
    def k(x_ref, o_ref):
        pl.debug_print("step {} sees {}", pl.program_id(0), x_ref[0, 0])
        o_ref[...] = x_ref[...]
    x = np.full((16, 128), 3, np.int32)
    run(k, sds((16, 128), I32), x, grid=(2,),
        in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)))
    cap = capfd.readouterr()
    # on standard output, as jax.debug.print writes (docs/jax.md)
    assert "step 0 sees 3" in cap.out and "step 1 sees 3" in cap.out
    assert "sees" not in cap.err


def test_bridge_multiple_of_and_nested_jit():
    @jax.jit
    def helper(v):
        return v * 2.0 + 1.0

    def k(x_ref, o_ref):
        i = pl.multiple_of(pl.program_id(0) * 8, 8)
        o_ref[...] = helper(x_ref[pl.ds(i, 8), :])
    x = _f32((16, 128))
    got = np.asarray(run(k, sds((16, 128)), x, grid=(2,),
                         in_specs=[pl.BlockSpec((16, 128), lambda i: (0, 0))],
                         out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0))))
    np.testing.assert_allclose(got, x * 2 + 1, rtol=1e-6)


def test_bridge_multiple_of_becomes_the_op_and_is_checked():
    """pl.multiple_of is kept as `multiple_of` (Mosaic's tpu.assume_multiple
    on a TPU), one op per multiple, and a broken promise is a kernel error
    at its line, as it would be a wrong kernel on a TPU."""
    def k(x_ref, o_ref):
        i = pl.multiple_of(pl.program_id(0) * 8, (8, 4))
        o_ref[...] = x_ref[pl.ds(i, 8), :]

    def bad(x_ref, o_ref):
        i = pl.multiple_of(pl.program_id(0) * 4, 8)  # BAD_HINT: 4 at step 1
        o_ref[...] = x_ref[pl.ds(i, 8), :]
    x = _f32((16, 128))
    kw = dict(grid=(2,), in_specs=[pl.BlockSpec((16, 128), lambda i: (0, 0))],
              out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)))
    text = tj.lower_to_tsr(k, sds((16, 128)), sds((16, 128)), **kw)
    hints = [ln.split("=", 1)[1].split(":")[0].split(",")[1].strip()
             for ln in text.splitlines() if "multiple_of" in ln]
    assert hints == ["8", "4"], text
    np.testing.assert_array_equal(np.asarray(run(k, sds((16, 128)), x, **kw)), x)
    with pytest.raises(tj.KernelError) as info:
        run(bad, sds((16, 128)), x, **kw)
    d = [d for d in info.value.diagnostics if d.kind == "bad_value"]
    assert d and d[0].grid_point == (1,), info.value.diagnostics
    assert "4 is not a multiple of 8" in d[0].text


def test_bridge_index_map_arithmetic_and_smem_prefetch_in_map():
    def k(tbl_ref, x_ref, o_ref):
        o_ref[...] = x_ref[...] + tbl_ref[pl.program_id(1)].astype(F32)
    x = _f32((32, 256))
    tbl = np.array([2, 0], np.int32)
    got = np.asarray(tj.pallas_call(
        k, sds((16, 256)),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1, grid=(2, 2),
            in_specs=[pl.BlockSpec((8, 128), lambda i, j, t: ((t[j] + i) % 4, 1 - j))],
            out_specs=pl.BlockSpec((8, 128), lambda i, j, t: (i, j))))(tbl, x))
    for i in range(2):
        for j in range(2):
            r, c = (tbl[j] + i) % 4, 1 - j
            np.testing.assert_array_equal(got[i * 8:(i + 1) * 8, j * 128:(j + 1) * 128],
                                          x[r * 8:(r + 1) * 8, c * 128:(c + 1) * 128] + np.float32(tbl[j]))


def test_bridge_masked_load_and_store():
    def k(x_ref, o_ref):
        col = jax.lax.broadcasted_iota(I32, (8, 128), 1)
        keep = col < 100
        o_ref[...] = jnp.zeros((8, 128), F32)
        v = jnp.where(keep, pltpu.load(x_ref, mask=keep), -1.0)
        pltpu.store(o_ref, v / 4.0, mask=col % 2 == 0)
    x = _f32((8, 128))
    got = np.asarray(run(k, sds((8, 128)), x))
    col = np.arange(128)[None, :]
    v = np.where(col < 100, x, -1.0) / 4
    np.testing.assert_allclose(got, np.where(col % 2 == 0, v, 0.0), rtol=1e-6)


def test_bridge_batched_dot_and_rev():
    def k(q_ref, k_ref, o_ref, r_ref):
        q, kk = q_ref[...], k_ref[...]
        o_ref[...] = jnp.einsum("bqd,bkd->bqk", q, kk, preferred_element_type=F32)
        r_ref[...] = jnp.flip(q[0], axis=(0, 1))
    q, kk = _f32((2, 8, 128)), _f32((2, 16, 128), 1)
    o, r = run(k, (sds((2, 8, 16)), sds((8, 128))), q, kk)
    np.testing.assert_allclose(np.asarray(o), np.einsum("bqd,bkd->bqk", q, kk), rtol=1e-4,
                               atol=1e-4)
    np.testing.assert_array_equal(np.asarray(r), q[0][::-1, ::-1])


def test_bridge_dynamic_slice_of_a_value():
    def k(x_ref, o_ref):
        x = x_ref[...]
        s = pl.program_id(0) * 3 + 1
        o_ref[...] = jax.lax.dynamic_slice(x, (s, s * 5), (8, 64))
    x = _f32((32, 256))
    got = np.asarray(run(k, sds((24, 64)), x, grid=(3,),
                         in_specs=[pl.BlockSpec((32, 256), lambda i: (0, 0))],
                         out_specs=pl.BlockSpec((8, 64), lambda i: (i, 0))))
    for i in range(3):
        s = i * 3 + 1
        np.testing.assert_array_equal(got[i * 8:(i + 1) * 8], x[s:s + 8, s * 5:s * 5 + 64])


def test_bridge_cumulative_ops():
    def k(x_ref, i_ref, o_ref, p_ref):
        x, i = x_ref[...], i_ref[...]
        o_ref[0] = jnp.cumsum(i, axis=1)
        o_ref[1] = jax.lax.cumsum(i, axis=0, reverse=True)
        o_ref[2] = jax.lax.cummax(i, axis=1)
        o_ref[3] = jax.lax.cummin(i, axis=1, reverse=True)
        p_ref[...] = jnp.cumsum(x, axis=1)
    x, i = _f32((8, 128)), _i32((8, 128))
    o, p = run(k, (sds((4, 8, 128), I32), sds((8, 128))), x, i)
    want = np.stack([np.cumsum(i, 1), np.cumsum(i[::-1], 0)[::-1],
                     np.maximum.accumulate(i, 1), np.minimum.accumulate(i[:, ::-1], 1)[:, ::-1]])
    np.testing.assert_array_equal(np.asarray(o), want)
    np.testing.assert_allclose(np.asarray(p), np.cumsum(x, 1), rtol=1e-4, atol=1e-4)


def test_bridge_jax_nn_functions_through_custom_jvp():
    def k(x_ref, o_ref):
        x = x_ref[...]
        o_ref[0] = jax.nn.softmax(x, axis=-1)
        o_ref[1] = jax.nn.relu(x) + jax.nn.gelu(x, approximate=True)
        o_ref[2] = jax.nn.silu(x) - jax.nn.log_sigmoid(x)
    x = _f32((8, 128))
    got = np.asarray(run(k, sds((3, 8, 128)), x))
    e = np.exp(x - x.max(-1, keepdims=True))
    gelu = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
    sig = 1 / (1 + np.exp(-x))
    want = np.stack([e / e.sum(-1, keepdims=True), np.maximum(x, 0) + gelu,
                     x * sig - np.log(sig)])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_bridge_checkpoint_and_checkpoint_name(backend):
    # jax.checkpoint carries its jaxpr (`remat2` in this jax) and
    # checkpoint_name is the identity primitive `name`: both run in a kernel
    # as they do outside one.
    from jax.ad_checkpoint import checkpoint_name

    def k(x_ref, o_ref):
        f = jax.checkpoint(lambda v: jnp.sin(v) * 2)
        o_ref[...] = checkpoint_name(f(x_ref[...]), "h") + 1
    x = _f32((8, 128))
    got = np.asarray(run(k, sds((8, 128)), x, backend=backend))
    np.testing.assert_allclose(got, np.sin(x) * 2 + 1, rtol=1e-6, atol=1e-6)


def _custom_fusion(scale, offset=None):
    """A fuser.custom_fusion function closing over `scale` (inside a kernel, a
    traced value: a const that the primitive takes as an operand), with a
    `def_pallas_impl` closing over `offset` when one is given."""
    from jax.experimental.pallas import fuser

    @fuser.custom_fusion
    def f(x, y):
        return x * scale + y

    f.def_pull_block_spec(lambda bss: (bss[0], bss[0]))
    f.def_eval_rule(lambda _, x, y: (f(x, y),))
    if offset is not None:
        f.def_pallas_impl(lambda x, y: x * scale - y + offset)
    return f


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_bridge_custom_fusion_runs_its_jaxpr(backend):
    # custom_fusion (what fuser.fuse's eval rules call inside the kernel it
    # builds) carries the function's jaxpr, whose consts are operands
    def k(x_ref, y_ref, s_ref, o_ref):
        f = _custom_fusion(s_ref[...])
        o_ref[...] = f(x_ref[...], y_ref[...]) + 1

    # small integers, exact in f32 (so no rounding, with or without an FMA)
    x, y, s = (_i32(shape, seed).astype(np.float32)
               for shape, seed in (((8, 128), 1), ((8, 128), 2), ((1, 128), 3)))
    got = np.asarray(run(k, sds((8, 128)), x, y, s, backend=backend))
    want = np.asarray(_jax_interpret(k, sds((8, 128)), x, y, s))
    np.testing.assert_array_equal(want, x * s + y + 1)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_bridge_custom_fusion_runs_its_pallas_impl_as_mosaic_does(backend):
    # with a def_pallas_impl, Mosaic lowers that jaxpr (with its own consts)
    # in a kernel, not the function's: what a TPU runs, so what tessera runs
    # (JAX's interpret mode evaluates the function's jaxpr instead)
    def k(x_ref, y_ref, s_ref, o_ref):
        f = _custom_fusion(s_ref[...], s_ref[...] * 3)
        o_ref[...] = f(x_ref[...], y_ref[...])

    x, y, s = (_i32(shape, seed).astype(np.float32)
               for shape, seed in (((8, 128), 4), ((8, 128), 5), ((1, 128), 6)))
    got = np.asarray(run(k, sds((8, 128)), x, y, s, backend=backend))
    np.testing.assert_array_equal(got, x * s - y + s * 3)


def test_bridge_take_along_axis():
    def k(x_ref, i_ref, o_ref):
        x, i = x_ref[...], i_ref[...]
        o_ref[0] = jnp.take_along_axis(x, i, axis=1, mode="promise_in_bounds")
        o_ref[1] = jnp.take_along_axis(x, i % 8, axis=0, mode="clip")
    x, i = _f32((8, 128)), _i32((8, 128), 2, 0, 128)
    got = np.asarray(run(k, sds((2, 8, 128)), x, i))
    np.testing.assert_array_equal(got[0], np.take_along_axis(x, i, 1))
    np.testing.assert_array_equal(got[1], np.take_along_axis(x, i % 8, 0))


def test_bridge_narrow_prefetch_table_and_tile():
    def k(tbl_ref, x_ref, o_ref):
        i = pl.program_id(0)
        scale = tbl_ref[i].astype(F32)                  # an int8 table, widened in SMEM
        o_ref[...] = jnp.tile(x_ref[...][:, :64], (1, 2)) * scale
    x = _f32((16, 128))
    tbl = np.array([-3, 7], np.int8)
    got = np.asarray(tj.pallas_call(
        k, sds((16, 128)),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1, grid=(2,),
            in_specs=[pl.BlockSpec((8, 128), lambda i, t: (i + t[i] - t[i], 0))],
            out_specs=pl.BlockSpec((8, 128), lambda i, t: (i, 0))))(tbl, x))
    for i in range(2):
        blk = x[i * 8:(i + 1) * 8, :64]
        np.testing.assert_array_equal(got[i * 8:(i + 1) * 8], np.tile(blk, (1, 2)) * tbl[i])


def test_bridge_core_parallel_on_two_simulated_cores():
    def k(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 3.0
    x = _f32((32, 128))
    spec = pl.BlockSpec((8, 128), lambda c, i: (c * 2 + i, 0))
    for backend in ("interp", "cpu"):
        got = np.asarray(tj.pallas_call(
            k, sds((32, 128)), grid=(2, 2), in_specs=[spec], out_specs=spec,
            compiler_params=pltpu.CompilerParams(
                dimension_semantics=("core_parallel", "arbitrary")),
            cores=2, backend=backend)(x))
        np.testing.assert_array_equal(got, x * 3.0)


def test_bridge_scan_over_xs_with_stacked_ys():
    def k(x_ref, o_ref, y_ref):
        xs = x_ref[...]                                  # (4, 8, 128)

        def step(c, x):
            c = c + x
            return c, c.sum(axis=0)                      # ys: (4, 128)
        total, ys = jax.lax.scan(step, jnp.zeros((8, 128), F32), xs)
        r, _ = jax.lax.scan(lambda c, x: (c * 0.5 + x, None), jnp.zeros((8, 128), F32), xs,
                            reverse=True)
        o_ref[...] = total + r
        y_ref[...] = ys
    x = _f32((4, 8, 128))
    o, y = run(k, (sds((8, 128)), sds((4, 128))), x)
    r = np.zeros((8, 128), np.float32)
    for i in reversed(range(4)):
        r = r * 0.5 + x[i]
    np.testing.assert_allclose(np.asarray(o), x.sum(0) + r, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(y), np.cumsum(x, 0).sum(1), rtol=1e-5, atol=1e-4)


def test_bridge_reads_through_a_reshaped_ref():
    def k(x_ref, o_ref):
        flat = x_ref.reshape(32, 128)                     # (4, 8, 128) seen as (32, 128)
        o_ref[0:16, :] = flat[1::2, :]                    # strided rows
        o_ref[16:24, :] = flat[pl.ds(pl.program_id(0) * 8 + 3, 8), :]
    x = _f32((2, 4, 8, 128))
    got = np.asarray(run(k, sds((2, 24, 128)), x, grid=(2,),
                         in_specs=[pl.BlockSpec((None, 4, 8, 128), lambda i: (i, 0, 0, 0))],
                         out_specs=pl.BlockSpec((None, 24, 128), lambda i: (i, 0, 0))))
    for i in range(2):
        flat = x[i].reshape(32, 128)
        np.testing.assert_array_equal(got[i, :16], flat[1::2])
        np.testing.assert_array_equal(got[i, 16:], flat[i * 8 + 3:i * 8 + 11])


def test_bridge_store_through_a_reshaped_ref():
    # the value taken back through the reshape and stored (more forms, and
    # bitcasts: test_bridge_ref_views.py)
    def k(x_ref, o_ref):
        o_ref.reshape(8 * 128)[...] = x_ref[...].reshape(8 * 128) * 2.0
    x = _f32((8, 128))
    np.testing.assert_array_equal(np.asarray(run(k, sds((8, 128)), x)), x * 2.0)


def test_bridge_sort_inside_a_kernel():
    """jnp.sort / jnp.argsort / lax.sort of a tuple in a kernel body, as
    Pallas's interpret=True runs them (no TPU lowers them): the sort and
    argsort ops, against numpy's stable sorts."""
    def k(x_ref, k_ref, s_ref, a_ref, c_ref, v_ref):
        x = x_ref[...]
        s_ref[...] = jnp.sort(x, axis=1)
        a_ref[...] = jnp.argsort(x, axis=0, stable=True)
        keys = k_ref[...]
        c_ref[...], v_ref[...] = jax.lax.sort((keys, x), dimension=1, num_keys=1,
                                              is_stable=True)
    x = _f32((8, 128))
    x[0, :5] = [np.nan, -0.0, 0.0, np.inf, -np.nan]
    keys = _i32((8, 128), 1, 0, 4)
    s, a, c, v = run(k, (sds((8, 128)), sds((8, 128), I32), sds((8, 128), I32),
                         sds((8, 128))), x, keys)
    ref = np.asarray(jax.lax.sort(jnp.asarray(x), dimension=1, is_stable=True))
    np.testing.assert_array_equal(np.asarray(s).view(np.uint32), ref.view(np.uint32))
    np.testing.assert_array_equal(np.asarray(a), np.argsort(x, axis=0, kind="stable"))
    order = np.argsort(keys, axis=1, kind="stable")
    np.testing.assert_array_equal(np.asarray(c), np.take_along_axis(keys, order, 1))
    np.testing.assert_array_equal(np.asarray(v), np.take_along_axis(x, order, 1))


def _jax_interpret(kernel, out_shape, *args, **kw):
    """The same pallas_call run by JAX's own TPU interpret mode (the oracle)."""
    return pl.pallas_call(kernel, out_shape, interpret=pltpu.InterpretParams(), **kw)(*args)


def test_bridge_axis_index_of_a_named_grid_axis_is_the_grid_step():
    """lax.axis_index of a grid dimension's name is that dimension's
    program_id (not the device id); a tuple of names is their row-major
    index. Two grids naming their dimensions the other way round are two
    different kernels (not one cached translation)."""
    def k(x_ref, o_ref):
        i, j = jax.lax.axis_index("i"), jax.lax.axis_index("j")
        ij = jax.lax.axis_index(("i", "j"))
        o_ref[...] = x_ref[...] + (i * 10 + j + 100 * pl.program_id(1)
                                   + 1000 * ij).astype(F32)
    x = _f32((16, 256))
    for grid in ((("i", 2), ("j", 2)), (("j", 2), ("i", 2))):
        spec = pl.BlockSpec((8, 128), lambda a, b: (a, b))
        gs = pl.GridSpec(grid=grid, in_specs=[spec], out_specs=spec)
        want = np.asarray(_jax_interpret(k, sds(x.shape), x, grid_spec=gs))
        got = np.asarray(run(k, sds(x.shape), x, grid_spec=gs))
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", [F32, jnp.bfloat16])
def test_bridge_pow_of_a_float_base_and_an_integer_exponent(backend, dtype):
    """lax.pow(float, int) is the float power of the exponent converted to
    the base's dtype, as JAX computes it: 0**0 == nan**0 == 1, negative
    exponents, infinities, signs of odd powers, overflow (results clear of
    f32 subnormals, which XLA:CPU flushes to zero)."""
    def k(x_ref, y_ref, o_ref):
        o_ref[...] = jax.lax.pow(x_ref[...], y_ref[...])
    xs = [0, -0.0, 2, -2, 0.5, -3, np.inf, -np.inf, np.nan, 1, -1, 1e-20, 3.3, 10, 0, -0.0,
          2, 2, -1.5, 7]
    ys = [0, 0, -3, 3, 5, -2, -1, 2, 0, 1000, 7, -3, 4, 40, -1, -3, -120, 127, 9, -1]
    base = np.resize(np.array(xs, np.float32), (8, 128)) * np.float32(
        1 + np.arange(8)[:, None] % 2)  # the second row's bases doubled
    x = np.asarray(jnp.asarray(base, dtype))
    y = np.resize(np.array(ys, np.int32), (8, 128))
    want = np.asarray(_jax_interpret(k, sds(x.shape, dtype), x, y))
    got = np.asarray(run(k, sds(x.shape, dtype), x, y, backend=backend))
    np.testing.assert_array_equal(got.astype(np.float32), want.astype(np.float32))


def test_bridge_64_bit_operands_are_canonicalized_as_jax_does():
    """With x64 off JAX takes an int64 / uint64 / float64 numpy operand as
    int32 / uint32 / float32 (wrapping, rounding): the same operands give
    tessera the same kernel and results, and no warning (JAX gives none)."""
    import warnings

    def k(s_ref, x_ref, u_ref, f_ref, o_ref, g_ref):
        o_ref[...] = x_ref[...] * s_ref[0] + (u_ref[...] >> 1).astype(I32)
        g_ref[...] = f_ref[...] * 3.0
    spec = pl.BlockSpec((8, 128), lambda i, s: (0, 0))
    gs = pltpu.PrefetchScalarGridSpec(num_scalar_prefetch=1, grid=(1,),
                                      in_specs=[spec] * 3, out_specs=[spec] * 2)
    s = np.array([3])  # int64, as numpy makes it
    x = np.arange(8 * 128, dtype=np.int64).reshape(8, 128) + (1 << 33) - 500
    u = np.arange(8 * 128, dtype=np.uint64).reshape(8, 128) * 12345
    f = np.linspace(-2, 2, 8 * 128).reshape(8, 128) + 1e-9  # float64
    out = (sds((8, 128), I32), sds((8, 128), F32))
    want = _jax_interpret(k, out, s, x, u, f, grid_spec=gs)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = run(k, out, s, x, u, f, grid_spec=gs)
        text = tj.pallas_call(k, out, grid_spec=gs).lower_to_tsr(s, x, u, f)
    for g, w in zip(got, want):
        assert np.asarray(g).dtype == np.asarray(w).dtype
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
    assert "in %x_ref: i32" in text and "in %u_ref: u32" in text and "in %f_ref: f32" in text


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_bridge_ref_read_through_arrays_of_indices(backend):
    # x_ref[idx] with arrays of indices mixed with points and slices, in
    # numpy's placement (adjacent arrays in place, separated ones first),
    # negative indices counted from the end and others clamped as jnp does
    x = _f32((6, 8, 5, 4), seed=3)
    a = np.array([1, -1, 4, 0, 2, 2], np.int32)
    b = np.array([[0, 3], [7, -2]], np.int32)
    big = np.array([1, 9, 3], np.int32)

    def k(x_ref, a_ref, b_ref, big_ref, o1, o2, o3, o4, o5):
        av, bv, gv = a_ref[...], b_ref[...], big_ref[...]
        o1[...] = x_ref[av]                       # one 1-D array: a gather along axis 0
        o2[...] = x_ref[2, :, av[:4], 1:4]        # separated by a slice: B first
        o3[...] = x_ref[::2, bv, 1:4:2, :]        # a 2-D array of indices in place
        o4[...] = x_ref[av[:2, None], bv[0], ::2, 3]  # broadcast arrays
        o5[...] = x_ref[0, 0, :, gv]              # an index past the end: clamped
    outs = tj.pallas_call(k, (sds((6, 8, 5, 4)), sds((4, 8, 3)), sds((3, 2, 2, 2, 4)),
                              sds((2, 2, 3)), sds((3, 5))), backend=backend)(x, a, b, big)
    aa = np.where(a < 0, a + 6, a)
    bb = np.where(b < 0, b + 8, b)
    want = [x[aa], x[2, :, np.where(a[:4] < 0, a[:4] + 5, a[:4]), 1:4],
            x[::2, bb, 1:4:2, :], x[aa[:2, None], bb[0], ::2, 3],
            x[0, 0, :, np.minimum(big, 3)]]
    for got, w in zip(outs, want):
        np.testing.assert_array_equal(np.asarray(got), w)


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_bridge_ref_write_through_arrays_of_indices(backend):
    # x_ref[idx] = v (a scatter into the view) and its old values (swap)
    x = _f32((8, 16), seed=4)
    rows = np.array([6, 0, -3, 2], np.int32)
    cols = np.array([[15, 1], [2, 14]], np.int32)

    def k(x_ref, r_ref, c_ref, o_ref, p_ref, q_ref):
        r, c = r_ref[...], c_ref[...]
        o_ref[...] = x_ref[...]
        o_ref[r] = x_ref[r] * 2.0 + 1.0           # whole rows
        p_ref[...] = jnp.zeros_like(p_ref)
        p_ref[1:7, c] = x_ref[1:7, c] - 3.0       # a 2-D array of columns in a row range
        q_ref[...] = x_ref[...]
        q_ref[r[:2, None], c[0]] = jnp.full((2, 2), 7.0, F32)  # broadcast arrays
    o, p, q = tj.pallas_call(k, (sds((8, 16)),) * 3, backend=backend)(x, rows, cols)
    want_o = x.copy()
    rr = np.where(rows < 0, rows + 8, rows)
    want_o[rr] = x[rr] * 2 + 1
    want_p = np.zeros_like(x)
    want_p[1:7, cols] = x[1:7, cols] - 3
    want_q = x.copy()
    want_q[rr[:2, None], cols[0]] = 7.0
    np.testing.assert_array_equal(np.asarray(o), want_o)
    np.testing.assert_array_equal(np.asarray(p), want_p)
    np.testing.assert_array_equal(np.asarray(q), want_q)


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_bridge_value_scatter_at_set(backend):
    # x.at[idx].set(u) on values (lax.scatter): static points and slices,
    # arrays of indices, a negative one, one past the end dropped (jnp's
    # default) or clamped (mode="clip"); compared with JAX itself
    x = _f32((8, 16), seed=5)
    idx = np.array([3, -1, 20, 5], np.int32)

    def body(x, i):
        y = jnp.zeros_like(x)
        y = y.at[:, 0].set(x[:, 1])
        y = y.at[:, 2:].set(x[:, 1:-1])
        y = y.at[-1].set(x[0] * 3.0)
        return (y, x.at[i].set(x[:4] + 10.0), x.at[i, 1:3].set(-1.0, mode="drop"),
                x.at[i[:2], 5].set(x[0, :2], mode="clip"))

    def k(x_ref, i_ref, *o_refs):
        for o, v in zip(o_refs, body(x_ref[...], i_ref[...])):
            o[...] = v
    got = tj.pallas_call(k, (sds((8, 16)),) * 4, backend=backend)(x, idx)
    for g, w in zip(got, body(jnp.asarray(x), jnp.asarray(idx))):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_bridge_dma_signalling_a_regular_semaphore(backend):
    # async_copy whose completion signals a regular semaphore (by one; TPU
    # v6+), waited for with pl.semaphore_wait; two DMAs, one wait for both
    x = _f32((16, 128), seed=6)

    def k(x_hbm, y_hbm):
        def body(buf, sem):
            pltpu.async_copy(x_hbm.at[0:8], buf, sem)
            pl.semaphore_wait(sem)
            buf[...] = buf[...] * 2.0 + 1.0
            pltpu.async_copy(buf, y_hbm.at[0:8], sem)
            pltpu.async_copy(x_hbm.at[8:16], y_hbm.at[8:16], sem)
            pl.semaphore_wait(sem, 2)
        pl.run_scoped(body, pltpu.VMEM((8, 128), F32), pltpu.SemaphoreType.REGULAR)
    any_spec = pl.BlockSpec(memory_space=pl.ANY)
    y = run(k, sds((16, 128)), x, in_specs=[any_spec], out_specs=any_spec, backend=backend)
    np.testing.assert_array_equal(np.asarray(y), np.concatenate([x[:8] * 2 + 1, x[8:]]))


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_bridge_ref_write_through_arrays_reads_nothing(backend):
    # An output written only through arrays of indices: the write is a
    # masked store of the scattered values, so no uninitialized read is
    # reported for the elements it leaves (here: none; each written once)
    import warnings
    perm = np.random.default_rng(7).permutation(16).astype(np.int32)
    x = _f32((8, 16), seed=8)

    def k(x_ref, p_ref, o_ref):
        p = p_ref[...]
        o_ref[jnp.arange(8)[:, None], p[None, :]] = x_ref[...] + 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        o = run(k, sds((8, 16)), x, perm, backend=backend)
    want = np.empty_like(x)
    want[:, perm] = x + 1
    np.testing.assert_array_equal(np.asarray(o), want)
