"""Element-offset block dims (`pl.Element`): overlapping windows whose
index map gives element offsets, every dim an element dim, as Mosaic's
element windows take them (docs/tpu.md). No padding: JAX's TPU interpret
mode does not apply an Element's padding offsets (its start index is the
offset itself), so its results agree with tessera's only without one."""

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl

KIND = "primitives"
PRIMITIVES = ("get", "swap", "add")
TOLERANCE = "exact"


def element_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[pl.ds(0, 8)] + x_ref[pl.ds(8, 8)]


def build(steps: int = 4, n: int = 128):
    def fn(pallas_call, x):
        return pallas_call(
            element_kernel,
            grid=(steps,),
            in_specs=[pl.BlockSpec((pl.Element(16), pl.Element(n)), lambda i: (i * 8, 0))],
            out_specs=pl.BlockSpec((8, n), lambda i: (i, 0)),
            out_shape=jax.ShapeDtypeStruct((8 * steps, n), jnp.float32),
        )(x)

    rng = np.random.default_rng(12)
    return fn, (rng.standard_normal((8 * steps + 8, n), dtype=np.float32),)


def reference(x):
    return (x[:-8] + x[8:],)
