"""lax elementwise ops on f32, i32, u32 and bf16, comparisons, `select_n`
(jnp.where), `convert_element_type`, `bitcast_convert_type`, integer_pow,
clamp: all bit for bit (correctly rounded float ops, integer ops;
docs/jax.md, "Validated against JAX"). The transcendental functions are in
prim_transcendental."""

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
from jax import lax
from jax.experimental import pallas as pl

KIND = "primitives"
PRIMITIVES = (
    "add", "sub", "mul", "div", "neg", "abs", "max", "min", "floor", "ceil",
    "round", "sign", "sqrt", "integer_pow", "clamp",
    "rem", "and", "or", "xor", "not", "shift_left",
    "shift_right_arithmetic", "shift_right_logical", "eq", "ne", "lt", "le",
    "gt", "ge", "select_n", "convert_element_type", "bitcast_convert_type",
    "is_finite",
)

OUTPUTS = ["f_exact", "i_ops", "u_ops", "cmp_sel", "convert", "bitcast",
           "bf16_ops"]
TOLERANCE = "exact"


def elementwise_kernel(x_ref, y_ref, k_ref, j_ref, u_ref, b_ref, *out_refs):
    outs = dict(zip(OUTPUTS, out_refs))
    x, y, k, j, u, b = (r[...] for r in (x_ref, y_ref, k_ref, j_ref, u_ref,
                                         b_ref))
    # correctly rounded float ops, one per row block of the output
    f = outs["f_exact"]
    f[0] = x + y
    f[1] = x - y
    f[2] = x * y
    f[3] = x / y
    f[4] = -x
    f[5] = jnp.abs(x)
    f[6] = jnp.maximum(x, y)
    f[7] = jnp.minimum(x, y)
    f[8] = jnp.floor(x * 4.0)
    f[9] = jnp.ceil(x * 4.0)
    f[10] = lax.round(x * 4.0, lax.RoundingMethod.TO_NEAREST_EVEN)
    f[11] = jnp.sign(x)
    f[12] = jnp.sqrt(y)
    f[13] = x ** 2
    f[14] = lax.clamp(jnp.float32(-0.5), x, jnp.float32(0.5))
    f[15] = lax.rem(x, y)
    # integer ops (wrapping)
    io = outs["i_ops"]
    io[0] = k + j
    io[1] = k - j
    io[2] = k * j
    io[3] = lax.div(k, j)
    io[4] = lax.rem(k, j)
    io[5] = -k
    io[6] = jnp.abs(k)
    io[7] = jnp.maximum(k, j)
    io[8] = jnp.minimum(k, j)
    io[9] = k & j
    io[10] = k | j
    io[11] = k ^ j
    io[12] = ~k
    io[13] = lax.shift_left(k, j & 31)
    io[14] = lax.shift_right_arithmetic(k, j & 31)
    io[15] = lax.shift_right_logical(k, j & 31)
    uo = outs["u_ops"]
    uo[0] = u + u
    uo[1] = lax.div(u, jnp.uint32(7) + (u & 3))
    uo[2] = lax.rem(u, jnp.uint32(7) + (u & 3))
    uo[3] = lax.shift_right_logical(u, jnp.uint32(5))
    uo[4] = jnp.maximum(u, u ^ jnp.uint32(0x80000000))
    uo[5] = jnp.where(u > jnp.uint32(0x80000000), u, jnp.uint32(1))
    # comparisons (float with NaN, signed, unsigned) and select_n
    xn = jnp.where(x > 1.5, jnp.nan, x)
    c = outs["cmp_sel"]
    c[0] = (xn == y).astype(jnp.int32)
    c[1] = (xn != y).astype(jnp.int32)
    c[2] = (xn < y).astype(jnp.int32)
    c[3] = (xn <= y).astype(jnp.int32)
    c[4] = (k > j).astype(jnp.int32)
    c[5] = (k >= j).astype(jnp.int32)
    c[6] = (u < u ^ jnp.uint32(0x80000000)).astype(jnp.int32)
    c[7] = jnp.where(k > j, k, j)
    c[8] = lax.select_n(jnp.clip(k & 3, 0, 2), k, j, k ^ j)
    c[9] = jnp.isfinite(xn).astype(jnp.int32)
    # conversions
    cv = outs["convert"]
    cv[0] = (x * 1000.0).astype(jnp.int32)                   # truncates
    cv[1] = jnp.where(x > 1.5, jnp.inf, x * 3e9).astype(jnp.int32)  # saturates
    cv[2] = lax.bitcast_convert_type(k.astype(jnp.float32), jnp.int32)
    cv[3] = lax.bitcast_convert_type(
        (x * 3.0).astype(jnp.bfloat16).astype(jnp.float32), jnp.int32)
    cv[4] = u.astype(jnp.float32).astype(jnp.int32)
    cv[5] = (k & 0xFFFF).astype(jnp.int16).astype(jnp.int32)
    cv[6] = k.astype(jnp.int8).astype(jnp.int32)
    cv[7] = (x > 0).astype(jnp.int32) + (x > 0.5).astype(jnp.int32)
    outs["bitcast"][...] = lax.bitcast_convert_type(x, jnp.uint32)
    bo = outs["bf16_ops"]
    bo[0] = b + b
    bo[1] = b * b
    bo[2] = jnp.maximum(b, -b)
    bo[3] = x.astype(jnp.bfloat16)


def build(m: int = 8, n: int = 128):
    shape = (m, n)
    out_shape = [
        jax.ShapeDtypeStruct((16, m, n), jnp.float32),
        jax.ShapeDtypeStruct((16, m, n), jnp.int32),
        jax.ShapeDtypeStruct((6, m, n), jnp.uint32),
        jax.ShapeDtypeStruct((10, m, n), jnp.int32),
        jax.ShapeDtypeStruct((8, m, n), jnp.int32),
        jax.ShapeDtypeStruct((m, n), jnp.uint32),
        jax.ShapeDtypeStruct((4, m, n), jnp.bfloat16),
    ]

    def fn(pallas_call, x, y, k, j, u, b):
        return pallas_call(elementwise_kernel, out_shape=out_shape)(
            x, y, k, j, u, b)

    rng = np.random.default_rng(12)
    x = (rng.standard_normal(shape) * 1.5).astype(np.float32)
    x[0, :4] = [0.0, -0.0, 0.125, -0.375]
    y = rng.uniform(0.1, 4.0, shape).astype(np.float32)
    k = rng.integers(-2**31, 2**31, shape, dtype=np.int64).astype(np.int32)
    j = rng.integers(-1000, 1000, shape, dtype=np.int64).astype(np.int32)
    j[j == 0] = 3
    k[0, 0], j[0, 0] = -2**31, -1           # INT_MIN / -1
    u = rng.integers(0, 2**32, shape, dtype=np.uint64).astype(np.uint32)
    b = rng.standard_normal(shape).astype(ml_dtypes.bfloat16)
    return fn, (x, y, k, j, u, b)
