"""A revisited output block: grid (3) whose output index map is i % 2, so
block 0 is written at step 0, left for block 1 at step 1, and entered again
at step 2 (its first copy out is lost on a TPU)."""

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl

KIND = "bug"
EXPECT = {"jax": "error:revisit", "tessera": "error:revisit"}


def revisit_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2.0


def build():
    def fn(pallas_call, x):
        return pallas_call(
            revisit_kernel,
            out_shape=jax.ShapeDtypeStruct((16, 128), jnp.float32),
            grid=(3,),
            in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
            out_specs=pl.BlockSpec((8, 128), lambda i: (i % 2, 0)),
        )(x)

    return fn, (np.ones((24, 128), np.float32),)
