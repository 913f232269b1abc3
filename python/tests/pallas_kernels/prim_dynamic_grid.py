"""A grid whose size is a traced value (a dynamic grid bound): then
`pl.num_programs` is a `num_programs` primitive (with a static grid it folds
to a Python int at trace time). Steps beyond the bound are not run, so the
output rows they would write keep what the kernel wrote at step 0."""

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl

KIND = "primitives"
PRIMITIVES = ("num_programs", "program_id")
TOLERANCE = "exact"


def dynamic_grid_kernel(x_ref, o_ref):
    i = pl.program_id(0)
    n = pl.num_programs(0)

    @pl.when(i == 0)
    def _():
        o_ref[...] = jnp.zeros_like(o_ref)

    o_ref[pl.ds(i * 8, 8), :] = x_ref[...] * n.astype(jnp.float32) + \
        i.astype(jnp.float32)


def build(rows: int = 32):
    def fn(pallas_call, x, steps):
        def call(x, steps):
            return pallas_call(
                dynamic_grid_kernel,
                out_shape=jax.ShapeDtypeStruct((rows, 128), jnp.float32),
                grid=(steps,),
                in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
                out_specs=pl.BlockSpec((rows, 128), lambda i: (0, 0)),
            )(x)
        return jax.jit(call)(x, steps)

    rng = np.random.default_rng(18)
    x = rng.integers(-100, 100, (rows, 128)).astype(np.float32)
    return fn, (x, np.int32(3))


def reference(x, steps):
    o = np.zeros_like(x)
    n = int(steps)
    for i in range(n):
        o[8 * i:8 * i + 8] = x[8 * i:8 * i + 8] * n + i
    return (o,)
