"""kernels/examples/ragged.tsr in Pallas: y = 2x + 1 on f32 [1000, 300] in
[128, 128] blocks, grid (8, 3): the edge blocks hang over the array; the
padding is read (uninitialized) but never written back."""

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

KIND = "example"
SOURCE = "kernels/examples/ragged.tsr"
TOLERANCE = "exact"  # 2x is exact, then one rounded add


def ragged_kernel(x_ref, y_ref):
    y_ref[...] = x_ref[...] * 2.0 + 1.0


def build(m: int = 1000, n: int = 300, b: int = 128):
    def fn(pallas_call, x):
        spec = pl.BlockSpec((b, b), lambda i, j: (i, j))
        return pallas_call(
            ragged_kernel,
            out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
            grid=(pl.cdiv(m, b), pl.cdiv(n, b)),
            in_specs=[spec],
            out_specs=spec,
            compiler_params=pltpu.CompilerParams(
                dimension_semantics=("parallel", "parallel")),
        )(x)

    rng = np.random.default_rng(6)
    return fn, (rng.standard_normal((m, n), dtype=np.float32),)


def reference(x):
    return (x * np.float32(2) + np.float32(1),)
