"""`dot_general` (plain, transposed lhs and rhs, batched, bf16 inputs into
f32) and reductions: `reduce_sum`, `reduce_max`, `reduce_min`,
`reduce_prod`, `reduce_and`, `reduce_or`, `argmax`, `argmin`, over one axis
and over all, float and integer."""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import pallas as pl

KIND = "primitives"
PRIMITIVES = ("dot_general", "reduce_sum", "reduce_max", "reduce_min",
              "reduce_prod", "reduce_and", "reduce_or", "argmax", "argmin")
# dots and sums: another accumulation order (docs/jax.md); the rest exact
TOLERANCE = [("close", 1e-5, 1e-4)] * 2 + ["exact", ("close", 1e-5, 1e-4),
                                           "exact", "exact"]


def dot_reduce_kernel(a_ref, b_ref, c_ref, k_ref, dot_ref, bdot_ref,
                      ired_ref, fred_ref, fext_ref, arg_ref):
    a, b, c, k = a_ref[...], b_ref[...], c_ref[...], k_ref[...]
    # a: (16, 32), b: (32, 128), c: (2, 16, 32), k: (8, 128) i32
    for ref in (fred_ref, fext_ref, arg_ref):   # rows written in part below
        ref[...] = jnp.zeros(ref.shape, ref.dtype)
    dot_ref[0] = jnp.dot(a, b, preferred_element_type=jnp.float32)
    dot_ref[1] = lax.dot_general(                       # a^T^T: lhs transposed
        a.T, b, (((0,), (0,)), ((), ())), preferred_element_type=jnp.float32)
    dot_ref[2] = lax.dot_general(                       # rhs transposed
        a, b.T, (((1,), (1,)), ((), ())), preferred_element_type=jnp.float32)
    dot_ref[3] = jnp.dot(a.astype(jnp.bfloat16), b.astype(jnp.bfloat16),
                         preferred_element_type=jnp.float32)
    bdot_ref[...] = lax.dot_general(                    # batched
        c, jnp.concatenate([b[None], (b * 0.5)[None]]),
        (((2,), (1,)), ((0,), (0,))),
        preferred_element_type=jnp.float32)
    ired_ref[0, :] = jnp.sum(k, axis=0)
    ired_ref[1, :] = jnp.max(k, axis=0)
    ired_ref[2, :] = jnp.min(k, axis=0)
    ired_ref[3, :] = jnp.all(k > -2**30, axis=0).astype(jnp.int32)
    ired_ref[4, :] = jnp.any(k > 2**30, axis=0).astype(jnp.int32)
    ired_ref[5, :] = jnp.prod(k & 7, axis=0)
    fred_ref[0, :] = jnp.sum(b, axis=0)
    fred_ref[1, :] = jnp.prod(1.0 + b[0:8] * 0.01, axis=0)
    fred_ref[2, 0:16] = jnp.sum(a, axis=1)
    fred_ref[3, 0:1] = jnp.sum(b, keepdims=True)[0]
    fext_ref[0, :] = jnp.max(b, axis=0)
    fext_ref[1, :] = jnp.min(b, axis=0)
    fext_ref[2, 0:1] = jnp.max(b, keepdims=True)[0]
    arg_ref[0, :] = jnp.argmax(b, axis=0).astype(jnp.int32)
    arg_ref[1, :] = jnp.argmin(b, axis=0).astype(jnp.int32)
    arg_ref[2, 0:32] = jnp.argmax(b, axis=1).astype(jnp.int32)
    arg_ref[3, :] = jnp.argmax(k, axis=0).astype(jnp.int32)


def build():
    def fn(pallas_call, a, b, c, k):
        def init(shape, dtype):
            return jax.ShapeDtypeStruct(shape, dtype)
        return pallas_call(
            dot_reduce_kernel,
            out_shape=(init((4, 16, 128), jnp.float32),
                       init((2, 16, 128), jnp.float32),
                       init((6, 128), jnp.int32),
                       init((4, 128), jnp.float32),
                       init((3, 128), jnp.float32),
                       init((4, 128), jnp.int32)),
        )(a, b, c, k)

    rng = np.random.default_rng(14)
    a = rng.standard_normal((16, 32), dtype=np.float32)
    b = rng.standard_normal((32, 128), dtype=np.float32)
    c = rng.standard_normal((2, 16, 32), dtype=np.float32)
    k = rng.integers(-2**31, 2**31, (8, 128), dtype=np.int64).astype(np.int32)
    return fn, (a, b, c, k)
