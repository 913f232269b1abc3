"""kernels/examples/softmax.tsr in Pallas: row softmax of f32 [64, 256] in
[8, 256] blocks: max, subtract, exp, sum, divide."""

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

KIND = "example"
SOURCE = "kernels/examples/softmax.tsr"
# exp is libm's in tessera and XLA's polynomial in JAX (a few ulp apart),
# then a positive sum of 256 terms and a division.
TOLERANCE = ("close", 2e-6, 1e-9)


def softmax_kernel(x_ref, y_ref):
    v = x_ref[...]
    m = jnp.max(v, axis=1, keepdims=True)
    e = jnp.exp(v - m)
    s = jnp.sum(e, axis=1, keepdims=True)
    y_ref[...] = e / s


def build(m: int = 64, n: int = 256, bm: int = 8):
    def fn(pallas_call, x):
        spec = pl.BlockSpec((bm, n), lambda i: (i, 0))
        return pallas_call(
            softmax_kernel,
            out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
            grid=(m // bm,),
            in_specs=[spec],
            out_specs=spec,
            compiler_params=pltpu.CompilerParams(
                dimension_semantics=("parallel",)),
        )(x)

    rng = np.random.default_rng(3)
    return fn, (rng.standard_normal((m, n), dtype=np.float32),)


def reference(x):
    v = x.astype(np.float64)
    e = np.exp(v - v.max(axis=1, keepdims=True))
    return ((e / e.sum(axis=1, keepdims=True)).astype(np.float32),)
