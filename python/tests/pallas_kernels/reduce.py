"""kernels/examples/reduce.tsr in Pallas: four kernels on f32 [256, 512].

* rowsum / rowmax: [32, 512] blocks over a parallel grid (8); the [256, 1]
  result is written through the view `s_ref[:, 0]`.
* colsum / colmax: grid (4, 8) = (column blocks: parallel, row blocks:
  arbitrary); the [1, 128] output block ignores the row-block axis, so it
  stays resident over 8 consecutive steps: the first step stores, the others
  accumulate (an if/else: `lax.cond`).
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

KIND = "example"
SOURCE = "kernels/examples/reduce.tsr"


def TOLERANCE(kernel: str):
    # max is exact; f32 sums of 512 (rows) / 256 (columns) terms in another
    # order (docs/jax.md, "Validated against JAX").
    return "exact" if kernel.endswith("max") else ("close", 1e-5, 1e-4)


def _row_kernel(op):
    def kernel(x_ref, s_ref):
        s_ref[:, 0] = op(x_ref[...], axis=1)
    return kernel


def _col_kernel(op, combine):
    def kernel(x_ref, s_ref):
        row_block = pl.program_id(1)
        part = op(x_ref[...], axis=0)

        def first():
            s_ref[0, :] = part

        def rest():
            s_ref[0, :] = combine(s_ref[0, :], part)

        jax.lax.cond(row_block == 0, first, rest)
    return kernel


def build(kernel: str = "rowsum", m: int = 256, n: int = 512):
    op = jnp.sum if kernel.endswith("sum") else jnp.max
    if kernel.startswith("row"):
        bm = 32

        def fn(pallas_call, x):
            return pallas_call(
                _row_kernel(op),
                out_shape=jax.ShapeDtypeStruct((m, 1), jnp.float32),
                grid=(m // bm,),
                in_specs=[pl.BlockSpec((bm, n), lambda i: (i, 0))],
                out_specs=pl.BlockSpec((bm, 1), lambda i: (i, 0)),
                compiler_params=pltpu.CompilerParams(
                    dimension_semantics=("parallel",)),
            )(x)
    else:
        bm, bn = 32, 128
        combine = jnp.add if kernel.endswith("sum") else jnp.maximum

        def fn(pallas_call, x):
            return pallas_call(
                _col_kernel(op, combine),
                out_shape=jax.ShapeDtypeStruct((1, n), jnp.float32),
                grid=(n // bn, m // bm),
                in_specs=[pl.BlockSpec((bm, bn), lambda c, r: (r, c))],
                out_specs=pl.BlockSpec((1, bn), lambda c, r: (0, c)),
                compiler_params=pltpu.CompilerParams(
                    dimension_semantics=("parallel", "arbitrary")),
            )(x)

    rng = np.random.default_rng(4)
    return fn, (rng.standard_normal((m, n), dtype=np.float32),)


def reference(x, kernel: str = "rowsum"):
    v = x.astype(np.float64)
    axis = 1 if kernel.startswith("row") else 0
    r = v.sum(axis=axis, keepdims=True) if kernel.endswith("sum") else v.max(
        axis=axis, keepdims=True)
    return (r.astype(np.float32),)
