"""kernels/examples/matmul.tsr in Pallas (the shape of jax's
ops/tpu/matmul.py): C[256, 256] = A[256, 512] @ B[512, 256] in 128 x 128
blocks, grid (2, 2, 4) (parallel, parallel, arbitrary), an f32 VMEM scratch
accumulator zeroed at k == 0 and copied out at the last k."""

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

KIND = "example"
SOURCE = "kernels/examples/matmul.tsr"
# f32 sums of 512 products, accumulated in another order by XLA:CPU's dot
# than by tessera's (k ascending): docs/jax.md, "Validated against JAX".
TOLERANCE = ("close", 1e-5, 1e-4)


def matmul_kernel(a_ref, b_ref, c_ref, acc_ref):
    k = pl.program_id(2)

    @pl.when(k == 0)
    def _():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += jnp.dot(a_ref[...], b_ref[...],
                            preferred_element_type=jnp.float32)

    @pl.when(k == pl.num_programs(2) - 1)
    def _():
        c_ref[...] = acc_ref[...]


def build(m: int = 256, k: int = 512, n: int = 256, bm: int = 128,
          bk: int = 128, bn: int = 128):
    def fn(pallas_call, a, b):
        return pallas_call(
            matmul_kernel,
            out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32),
            grid=(m // bm, n // bn, k // bk),
            in_specs=[pl.BlockSpec((bm, bk), lambda i, j, kk: (i, kk)),
                      pl.BlockSpec((bk, bn), lambda i, j, kk: (kk, j))],
            out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j)),
            scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)],
            compiler_params=pltpu.CompilerParams(
                dimension_semantics=("parallel", "parallel", "arbitrary")),
        )(a, b)

    rng = np.random.default_rng(2)
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    return fn, (a, b)


def reference(a, b):
    return ((a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32),)
