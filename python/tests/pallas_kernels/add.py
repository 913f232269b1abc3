"""kernels/examples/add.tsr in Pallas: c = a + b on f32 [1024, 512] in
[128, 512] blocks over a parallel grid (8)."""

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

KIND = "example"
SOURCE = "kernels/examples/add.tsr"
TOLERANCE = "exact"  # one correctly rounded add per element


def add_kernel(a_ref, b_ref, c_ref):
    c_ref[...] = a_ref[...] + b_ref[...]


def build(m: int = 1024, n: int = 512, bm: int = 128):
    def fn(pallas_call, a, b):
        spec = pl.BlockSpec((bm, n), lambda i: (i, 0))
        return pallas_call(
            add_kernel,
            out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
            grid=(m // bm,),
            in_specs=[spec, spec],
            out_specs=spec,
            compiler_params=pltpu.CompilerParams(
                dimension_semantics=("parallel",)),
        )(a, b)

    rng = np.random.default_rng(1)
    a = rng.standard_normal((m, n), dtype=np.float32)
    b = rng.standard_normal((m, n), dtype=np.float32)
    return fn, (a, b)


def reference(a, b):
    return (a + b,)
