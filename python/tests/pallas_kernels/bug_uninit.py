"""A read of VMEM scratch that was never written: legal on a TPU (it reads
whatever is there) and silent in JAX's TPU interpret mode (the scratch holds
NaN); tessera warns (kind uninitialized). Both give NaN where the scratch
was not written."""

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

KIND = "bug"
EXPECT = {"jax": "ok", "tessera": "warning:uninitialized"}
TOLERANCE = "exact"


def uninit_kernel(x_ref, o_ref, buf):
    buf[0:4, :] = x_ref[0:4, :]
    o_ref[...] = buf[...] + 1.0           # rows 4..7 were never written


def build():
    def fn(pallas_call, x):
        return pallas_call(
            uninit_kernel,
            out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
            scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32)],
        )(x)

    return fn, (np.ones((8, 128), np.float32),)


def reference(x):
    o = np.full((8, 128), np.nan, np.float32)
    o[0:4] = x[0:4] + 1
    return (o,)
