"""`pl.debug_print` (a `debug_print`/`debug_callback` in the jaxpr) and
`pl.debug_check` under `pl.enable_debug_checks` (a checkify `check`): a
kernel that prints its step and asserts a condition that holds."""

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

KIND = "primitives"
PRIMITIVES = ("debug_print", "check")
TOLERANCE = "exact"


def debug_kernel(x_ref, o_ref):
    i = pl.program_id(0)
    pl.debug_print("step {}", i)
    pl.debug_check(i < 2, "only two steps")
    o_ref[...] = x_ref[...] + 1.0


def build():
    def fn(pallas_call, x):
        spec = pl.BlockSpec((8, 128), lambda i: (i, 0))
        with pl.enable_debug_checks(True):
            return pallas_call(
                debug_kernel,
                out_shape=jax.ShapeDtypeStruct((16, 128), jnp.float32),
                grid=(2,), in_specs=[spec], out_specs=spec,
            )(x)

    return fn, (np.arange(16 * 128, dtype=np.float32).reshape(16, 128),)


def reference(x):
    return (x + np.float32(1),)
