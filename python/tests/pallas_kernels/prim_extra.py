"""Primitives Pallas TPU kernels use that are not on the bridge's list
(LISTED_PRIMITIVES): `rev` (jnp.flip), `dynamic_update_slice`, `stack`
(jnp.stack), `remat2` (jax.checkpoint), `erf` (within 6 ulp: JAX's is
3.2 ulp from the exact value here)."""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

KIND = "primitives"
PRIMITIVES = ("rev", "dynamic_update_slice", "stack", "remat2", "erf")
TOLERANCE = ["exact", ("ulp", 6)]


def extra_kernel(x_ref, s_ref, o_ref, e_ref):
    v = x_ref[...]                                   # (8, 128)
    step = s_ref[0]
    o_ref[0] = lax.rev(v, (0, 1))
    o_ref[1] = lax.dynamic_update_slice(v, jnp.zeros((2, 128), v.dtype),
                                        (step + 1, 0))
    o_ref[2] = jnp.stack([v[0], v[1]] * 4)
    o_ref[3] = jax.checkpoint(lambda t: t * 2.0)(v)
    e_ref[...] = lax.erf(v)


def build():
    def fn(pallas_call, x, s):
        return pallas_call(
            extra_kernel,
            out_shape=(jax.ShapeDtypeStruct((4, 8, 128), jnp.float32),
                       jax.ShapeDtypeStruct((8, 128), jnp.float32)),
            in_specs=[pl.BlockSpec(memory_space=pltpu.VMEM),
                      pl.BlockSpec(memory_space=pltpu.SMEM)],
        )(x, s)

    rng = np.random.default_rng(19)
    x = rng.standard_normal((8, 128), dtype=np.float32)
    return fn, (x, np.array([3], np.int32))


def reference(x, s):
    st = int(s[0])
    upd = x.copy()
    upd[st + 1:st + 3] = 0
    import math

    erf = np.vectorize(math.erf)(x.astype(np.float64)).astype(np.float32)
    return (np.stack([x[::-1, ::-1], upd, np.stack([x[0], x[1]] * 4), x * 2]),
            erf)
