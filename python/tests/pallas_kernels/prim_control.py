"""Control flow: `cond` (value and effect branches), `switch` (a cond with
three branches), `fori_loop` with static bounds (a `scan`) and with a
dynamic bound (a `while`), `while_loop`, a loop that carries a ref effect,
`jax.jit` inside the kernel (`jit`/`pjit`), a custom_jvp function
(`jax.nn.relu`); on a grid (4) whose steps take different
branches, driven by a scalar-prefetch table."""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

KIND = "primitives"
PRIMITIVES = ("cond", "scan", "while", "jit", "custom_jvp_call")
TOLERANCE = "exact"  # small integer-valued float arithmetic


@jax.jit
def _affine(v, s):
    return v * s + 1.0


def control_kernel(tbl_ref, x_ref, o_ref, acc_ref):
    i = pl.program_id(0)
    v = x_ref[...]                                   # (8, 128), integers
    sel = tbl_ref[i]
    # cond with values
    w = lax.cond(sel > 1, lambda t: t * 2.0, lambda t: t - 1.0, v)
    # switch over three branches
    w = lax.switch(sel, [lambda t: t + 10.0, lambda t: t * 3.0,
                         lambda t: -t, lambda t: t], w)
    # fori_loop, static bounds: a scan
    w = lax.fori_loop(0, 3, lambda j, t: t + j.astype(jnp.float32), w)
    # fori_loop, dynamic bound: a while
    w = lax.fori_loop(0, sel + 1, lambda j, t: t * 2.0 - 1.0, w)
    # while_loop with a data-dependent condition
    cnt, w = lax.while_loop(lambda c: (c[0] < 4) & (jnp.max(c[1]) < 1e6),
                            lambda c: (c[0] + 1, c[1] + 1.0), (0, w))
    w = w + cnt.astype(jnp.float32)
    # a loop carrying a ref effect; cond with effect branches
    acc_ref[...] = jnp.zeros_like(v)

    @pl.loop(0, 4)
    def _(j):
        acc_ref[pl.ds(j * 2, 2), :] = w[0:2, :] + j.astype(jnp.float32)

    @pl.when(sel == 0)
    def _():
        acc_ref[0:1, :] = jnp.full((1, 128), 7.0, jnp.float32)

    w = _affine(w, 0.5) + acc_ref[...]                # jit inside the kernel
    w = jax.nn.relu(w - 4.0)                          # custom_jvp_call
    w = w * 2.0
    o_ref[...] = w


def build(steps: int = 4):
    def fn(pallas_call, tbl, x):
        spec = pl.BlockSpec((8, 128), lambda i, tbl: (i, 0))
        return pallas_call(
            control_kernel,
            out_shape=jax.ShapeDtypeStruct((8 * steps, 128), jnp.float32),
            grid_spec=pltpu.PrefetchScalarGridSpec(
                num_scalar_prefetch=1, grid=(steps,), in_specs=[spec],
                out_specs=spec,
                scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32)]),
        )(tbl, x)

    rng = np.random.default_rng(15)
    tbl = (np.arange(steps) % 4).astype(np.int32)
    x = rng.integers(-8, 8, (8 * steps, 128)).astype(np.float32)
    return fn, (tbl, x)


def reference(tbl, x):
    out = np.empty_like(x)
    for i, sel in enumerate(tbl):
        v = x[8 * i:8 * i + 8].astype(np.float64)
        w = v * 2 if sel > 1 else v - 1
        w = [w + 10, w * 3, -w, w][min(max(sel, 0), 3)]
        w = w + 0 + 1 + 2
        for _ in range(sel + 1):
            w = w * 2 - 1
        cnt = 0
        while cnt < 4 and w.max() < 1e6:
            cnt, w = cnt + 1, w + 1
        w = w + cnt
        acc = np.zeros_like(w)
        for j in range(4):
            acc[2 * j:2 * j + 2] = w[0:2] + j
        if sel == 0:
            acc[0] = 7
        w = w * 0.5 + 1 + acc
        w = np.maximum(w - 4, 0) * 2
        out[8 * i:8 * i + 8] = w
    return (out.astype(np.float32),)
