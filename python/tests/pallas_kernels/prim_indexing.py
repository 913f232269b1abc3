"""Ref indexing: `get`/`swap` with static slices, `pl.ds` (dynamic start),
strided `pl.ds`, integer (squeezed) indices, `.at[...]` views (read and
write through them), a squeezed block dim; `program_id`, `num_programs`,
`multiple_of`; a VMEM scratch."""

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

KIND = "primitives"
PRIMITIVES = ("get", "swap", "program_id", "multiple_of")
TOLERANCE = "exact"  # copies, one add, one multiply-add by small integers


def indexing_kernel(x_ref, sum_ref, even_ref, row_ref, view_ref, acc_ref):
    i = pl.program_id(0)
    n = pl.num_programs(0)
    top = x_ref[0:8, :]                                  # static slice
    start = pl.multiple_of(i * 0 + 8, 8)                 # multiple_of
    bottom = x_ref[pl.ds(start, 8), :]                   # pl.ds, dynamic
    acc_ref[...] = top                                   # swap
    acc_ref[...] = acc_ref[...] + bottom                 # get + swap
    sum_ref[...] = acc_ref[...]
    even_ref[...] = x_ref[pl.ds(0, 8, stride=2), :]      # strided
    row = x_ref[3, :]                                    # squeezed index
    row_ref[...] = (row * jnp.asarray(n, jnp.float32)     # a Python int
                    + i.astype(jnp.float32))                 # for a static grid
    lower = x_ref.at[8:16]                               # .at view
    view_ref.at[0:4][...] = lower[pl.ds(4, 4), :]        # write via a view
    view_ref.at[4:8][...] = lower.at[0:4][...]


def build(blocks: int = 2, n: int = 256):
    m = 16 * blocks

    def fn(pallas_call, x):
        half = pl.BlockSpec((8, n), lambda i: (i, 0))
        return pallas_call(
            indexing_kernel,
            out_shape=(jax.ShapeDtypeStruct((8 * blocks, n), jnp.float32),
                       jax.ShapeDtypeStruct((8 * blocks, n), jnp.float32),
                       jax.ShapeDtypeStruct((blocks, n), jnp.float32),
                       jax.ShapeDtypeStruct((8 * blocks, n), jnp.float32)),
            grid=(blocks,),
            in_specs=[pl.BlockSpec((16, n), lambda i: (i, 0))],
            out_specs=(half, half,
                       pl.BlockSpec((pl.Squeezed(), n), lambda i: (i, 0)),
                       half),
            scratch_shapes=[pltpu.VMEM((8, n), jnp.float32)],
            compiler_params=pltpu.CompilerParams(
                dimension_semantics=("arbitrary",)),
        )(x)

    rng = np.random.default_rng(10)
    return fn, (rng.standard_normal((m, n), dtype=np.float32),)


def reference(x):
    blocks = x.shape[0] // 16
    xb = x.reshape(blocks, 16, -1)
    s = (xb[:, 0:8] + xb[:, 8:16]).reshape(8 * blocks, -1)
    even = xb[:, 0:16:2].reshape(8 * blocks, -1)
    row = xb[:, 3] * np.float32(blocks) + np.arange(blocks, dtype=np.float32)[:, None]
    view = np.concatenate([xb[:, 12:16], xb[:, 8:12]], axis=1).reshape(8 * blocks, -1)
    return (s, even, row, view)
