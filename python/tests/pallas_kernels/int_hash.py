"""kernels/examples/int_hash.tsr in Pallas: i32 arithmetic that must be bit
exact: a wrapping multiply by a 32-bit constant, a logical shift right, xor;
a wrapping row sum; truncating rem and div of negative numbers; a row min."""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

KIND = "example"
SOURCE = "kernels/examples/int_hash.tsr"
TOLERANCE = "exact"

GOLDEN = -1640531535  # 0x9E3779B1 as i32


def int_hash_kernel(x_ref, h_ref, s_ref, q_ref):
    v = x_ref[...]
    p = v * jnp.int32(GOLDEN)
    mixed = p ^ lax.shift_right_logical(p, jnp.int32(13))
    h_ref[...] = mixed
    s_ref[:, 0] = jnp.sum(mixed, axis=1)
    e = lax.rem(mixed, jnp.int32(7)) + lax.div(mixed, jnp.int32(1000))
    q_ref[:, 0] = jnp.min(e, axis=1)


def build(m: int = 256, n: int = 256, bm: int = 32):
    def fn(pallas_call, x):
        full = pl.BlockSpec((bm, n), lambda i: (i, 0))
        col = pl.BlockSpec((bm, 1), lambda i: (i, 0))
        return pallas_call(
            int_hash_kernel,
            out_shape=(jax.ShapeDtypeStruct((m, n), jnp.int32),
                       jax.ShapeDtypeStruct((m, 1), jnp.int32),
                       jax.ShapeDtypeStruct((m, 1), jnp.int32)),
            grid=(m // bm,),
            in_specs=[full],
            out_specs=(full, col, col),
            compiler_params=pltpu.CompilerParams(
                dimension_semantics=("parallel",)),
        )(x)

    rng = np.random.default_rng(7)
    x = rng.integers(-2**31, 2**31, size=(m, n), dtype=np.int64).astype(np.int32)
    return fn, (x,)


def reference(x):
    with np.errstate(over="ignore"):
        p = (x.astype(np.int64) * GOLDEN).astype(np.int64)
    p = (p & 0xFFFFFFFF).astype(np.uint32)
    mixed = (p ^ (p >> np.uint32(13))).view(np.int32)
    s = (mixed.astype(np.int64).sum(axis=1, keepdims=True) & 0xFFFFFFFF
         ).astype(np.uint32).view(np.int32)
    m64 = mixed.astype(np.int64)
    rem = np.fmod(m64, 7)
    div = np.trunc(m64 / 1000).astype(np.int64)
    q = (rem + div).min(axis=1, keepdims=True).astype(np.int32)
    return (mixed, s, q)
