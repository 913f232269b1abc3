"""Out of bounds, two ways:

* where="index_map": grid (3) over a [16, 128] array in [8, 128] blocks:
  step 2's block starts at row 16, past the end;
* where="ds": a `pl.ds` whose dynamic start runs past an [8, 128] block at
  step 1 (a read of rows 8..15 of an 8-row block)."""

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl

KIND = "bug"


def EXPECT(where: str):
    # what each side must do. "error:<kind>" = raises, with tessera's
    # diagnostic kind (JAX's message mapped by _harness.classify_jax_error).
    return {"jax": "error:out_of_bounds", "tessera": "error:out_of_bounds"}


def _copy_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] + 1.0


def _ds_kernel(x_ref, o_ref):
    i = pl.program_id(0)
    o_ref[...] = x_ref[pl.ds(i * 8, 8), :]


def build(where: str = "index_map"):
    def fn(pallas_call, x):
        spec = pl.BlockSpec((8, 128), lambda i: (i, 0))
        if where == "index_map":
            return pallas_call(
                _copy_kernel,
                out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
                grid=(3,),
                in_specs=[spec],
                out_specs=pl.BlockSpec((8, 128), lambda i: (0, 0)),
            )(x)
        return pallas_call(
            _ds_kernel,
            out_shape=jax.ShapeDtypeStruct((16, 128), jnp.float32),
            grid=(2,), in_specs=[spec], out_specs=spec,
        )(x)

    return fn, (np.ones((16, 128), np.float32),)
