"""Shape ops on values: `iota`, `broadcast_in_dim`, `reshape`, `transpose`,
`concatenate`, `slice` (also strided, on both axes), `dynamic_slice` (on
both axes), `squeeze`, expand_dims (a `broadcast_in_dim`), `pltpu.roll`
(static and dynamic shift). (`rev` and `dynamic_update_slice`, not on the
bridge's list, are in prim_extra.)"""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

KIND = "primitives"
PRIMITIVES = ("iota", "broadcast_in_dim", "reshape", "transpose",
              "concatenate", "slice", "dynamic_slice", "squeeze", "roll")
TOLERANCE = "exact"


def shape_kernel(x_ref, s_ref, io_ref, bc_ref, rs_ref, tr_ref, cat_ref,
                 sl_ref, ds_ref, roll_ref):
    v = x_ref[...]                                   # (8, 128)
    step = s_ref[0]
    io_ref[0] = lax.broadcasted_iota(jnp.int32, (8, 128), 0)
    io_ref[1] = lax.broadcasted_iota(jnp.int32, (8, 128), 1) * 3 + 1
    row = v[0:1, :]                                  # slice
    bc_ref[0] = jnp.broadcast_to(row, (8, 128))
    col = jnp.sum(v, axis=1)                         # (8,)
    bc_ref[1] = jnp.broadcast_to(jnp.expand_dims(col, 1), (8, 128)) * 0.0 + \
        jnp.broadcast_to(lax.squeeze(v[:, 5:6], (1,))[:, None], (8, 128))
    rs_ref[...] = v.reshape(2, 4, 128).reshape(4, 256)
    tr_ref[...] = v.T
    cat_ref[0] = jnp.concatenate([v[:, 64:], v[:, :64] * 2.0], axis=1)
    cat_ref[1] = jnp.concatenate([v[4:], v[:4]], axis=0)
    sl_ref[0] = jnp.concatenate([v[::2], v[1::2]], axis=0)   # strided slices
    sl_ref[1] = jnp.concatenate([v[:, 1::2], v[:, ::2]], axis=1)
    ds_ref[0] = jnp.concatenate(
        [lax.dynamic_slice(v, (step, 0), (4, 128)), v[0:4]], axis=0)
    ds_ref[1] = lax.dynamic_slice(jnp.concatenate([v, v], axis=1),
                                  (0, step * 8), (8, 128))
    roll_ref[0] = pltpu.roll(v, shift=3, axis=1)
    roll_ref[1] = pltpu.roll(v, shift=step + 1, axis=0)


def build():
    def fn(pallas_call, x, s):
        smem = pl.BlockSpec(memory_space=pltpu.SMEM)
        return pallas_call(
            shape_kernel,
            out_shape=(jax.ShapeDtypeStruct((2, 8, 128), jnp.int32),
                       jax.ShapeDtypeStruct((2, 8, 128), jnp.float32),
                       jax.ShapeDtypeStruct((4, 256), jnp.float32),
                       jax.ShapeDtypeStruct((128, 8), jnp.float32),
                       jax.ShapeDtypeStruct((2, 8, 128), jnp.float32),
                       jax.ShapeDtypeStruct((2, 8, 128), jnp.float32),
                       jax.ShapeDtypeStruct((2, 8, 128), jnp.float32),
                       jax.ShapeDtypeStruct((2, 8, 128), jnp.float32)),
            in_specs=[pl.BlockSpec(memory_space=pltpu.VMEM), smem],
        )(x, s)

    rng = np.random.default_rng(13)
    x = rng.standard_normal((8, 128), dtype=np.float32)
    return fn, (x, np.array([3], np.int32))


def reference(x, s):
    st = int(s[0])
    io = np.stack([np.broadcast_to(np.arange(8)[:, None], (8, 128)),
                   np.broadcast_to(np.arange(128)[None, :] * 3 + 1, (8, 128))]
                  ).astype(np.int32)
    bc = np.stack([np.broadcast_to(x[0:1], (8, 128)),
                   np.broadcast_to(x[:, 5:6], (8, 128))])
    rs = x.reshape(4, 256)
    cat = np.stack([np.concatenate([x[:, 64:], x[:, :64] * 2], 1),
                    np.concatenate([x[4:], x[:4]], 0)])
    sl = np.stack([np.concatenate([x[::2], x[1::2]], 0),
                   np.concatenate([x[:, 1::2], x[:, ::2]], 1)])
    ds = np.stack([np.concatenate([x[st:st + 4], x[0:4]], 0),
                   np.concatenate([x, x], 1)[:, st * 8:st * 8 + 128]])
    roll = np.stack([np.roll(x, 3, axis=1), np.roll(x, st + 1, axis=0)])
    return (io, bc, rs, x.T.copy(), cat, sl, ds, roll)
