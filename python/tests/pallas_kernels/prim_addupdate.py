"""`addupdate` (ref += value as one primitive). TensorCore Pallas has no
public spelling for it (`x_ref[...] += v` is a get and a swap); it is bound
here through jax's state primitives, as jax's own code does."""

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl

KIND = "primitives"
PRIMITIVES = ("addupdate",)
TOLERANCE = "exact"
#: jax 0.12.0.1's TPU interpret mode has no rule for it: "ValueError:
#: `addupdate` must be called on `Ref` types: int16[]" (it binds the
#: primitive on its buffer ids). tessera is compared with `reference`.
JAX_TPU_INTERPRET = "fails: ValueError: `addupdate` must be called on `Ref` types"


def addupdate_kernel(x_ref, o_ref):
    from jax._src.state.primitives import ref_addupdate  # private: see above

    o_ref[...] = x_ref[...]
    ref_addupdate(o_ref, (slice(None), slice(None)), x_ref[...] * 2.0)
    ref_addupdate(o_ref, (pl.ds(0, 4), slice(None)), jnp.ones((4, 128), jnp.float32))


def build(m: int = 8, n: int = 128):
    def fn(pallas_call, x):
        return pallas_call(
            addupdate_kernel,
            out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
        )(x)

    rng = np.random.default_rng(11)
    return fn, (rng.standard_normal((m, n), dtype=np.float32),)


def reference(x):
    o = x + x * np.float32(2)
    o[0:4] += np.float32(1)
    return (o,)
