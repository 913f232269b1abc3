"""kernels/examples/bf16_axpy.tsr in Pallas: bf16 z = 0.3 x + y, and the
f32 row sum of z."""

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

KIND = "example"
SOURCE = "kernels/examples/bf16_axpy.tsr"
# z: every op rounded to bf16 (as on the TPU; the oracle is compiled with
# xla_allow_excess_precision off, _harness.ORACLE_COMPILER_OPTIONS), so bit
# for bit. s: an f32 sum of 256 terms.
TOLERANCE = ["exact", ("close", 1e-5, 1e-4)]


def axpy_kernel(x_ref, y_ref, z_ref, s_ref):
    r = x_ref[...] * jnp.bfloat16(0.3) + y_ref[...]
    z_ref[...] = r
    s_ref[:, 0] = jnp.sum(r.astype(jnp.float32), axis=1)


def build(m: int = 64, n: int = 256, bm: int = 16):
    def fn(pallas_call, x, y):
        full = pl.BlockSpec((bm, n), lambda i: (i, 0))
        return pallas_call(
            axpy_kernel,
            out_shape=(jax.ShapeDtypeStruct((m, n), jnp.bfloat16),
                       jax.ShapeDtypeStruct((m, 1), jnp.float32)),
            grid=(m // bm,),
            in_specs=[full, full],
            out_specs=(full, pl.BlockSpec((bm, 1), lambda i: (i, 0))),
            compiler_params=pltpu.CompilerParams(
                dimension_semantics=("parallel",)),
        )(x, y)

    rng = np.random.default_rng(8)
    x = rng.standard_normal((m, n), dtype=np.float32).astype(ml_dtypes.bfloat16)
    y = rng.standard_normal((m, n), dtype=np.float32).astype(ml_dtypes.bfloat16)
    return fn, (x, y)


def reference(x, y):
    bf = ml_dtypes.bfloat16
    p = (x.astype(np.float32) * np.float32(bf(0.3))).astype(bf)
    z = (p.astype(np.float32) + y.astype(np.float32)).astype(bf)
    s = z.astype(np.float64).sum(axis=1, keepdims=True).astype(np.float32)
    return (z, s)
