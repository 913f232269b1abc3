"""kernels/examples/gather_prefetch.tsr in Pallas: megablox-style scalar
prefetch. A table i32[8] is prefetched to SMEM; the input's index map reads
`tbl[i]` to choose which block to read; output block i = 2 x input block
tbl[i]."""

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

KIND = "example"
SOURCE = "kernels/examples/gather_prefetch.tsr"
TOLERANCE = "exact"  # 2x is exact


def gather_kernel(tbl_ref, x_ref, y_ref):
    y_ref[...] = x_ref[...] * 2.0


def build(blocks: int = 8, bm: int = 128, n: int = 128):
    m = blocks * bm

    def fn(pallas_call, tbl, x):
        return pallas_call(
            gather_kernel,
            out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
            grid_spec=pltpu.PrefetchScalarGridSpec(
                num_scalar_prefetch=1,
                grid=(blocks,),
                in_specs=[pl.BlockSpec((bm, n), lambda i, tbl: (tbl[i], 0))],
                out_specs=pl.BlockSpec((bm, n), lambda i, tbl: (i, 0)),
            ),
            compiler_params=pltpu.CompilerParams(
                dimension_semantics=("parallel",)),
        )(tbl, x)

    rng = np.random.default_rng(5)
    tbl = rng.permutation(blocks).astype(np.int32)
    x = rng.standard_normal((m, n), dtype=np.float32)
    return fn, (tbl, x)


def reference(tbl, x):
    bm = x.shape[0] // tbl.shape[0]
    blocks = x.reshape(tbl.shape[0], bm, -1)
    return ((blocks[tbl] * 2).reshape(x.shape),)
