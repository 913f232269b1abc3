"""Communication primitives on a one-device mesh (`shard_map`), so it runs
in one process: `lax.axis_index` as the device id, a remote DMA
(`async_remote_copy`, to the right neighbour, which is the device itself),
a remote `semaphore_signal` (device_id=). (The barrier semaphore is in
prim_barrier.)"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

KIND = "primitives"
PRIMITIVES = ("axis_index", "dma_start", "dma_wait", "semaphore_signal",
              "semaphore_wait")
TOLERANCE = "exact"
AXIS = "x"


def remote_kernel(x_ref, o_ref, send_sem, recv_sem, ready):
    me = lax.axis_index(AXIS)
    right = lax.rem(me + 1, lax.axis_size(AXIS))
    pl.semaphore_signal(ready, 1, device_id={AXIS: right})
    pl.semaphore_wait(ready, 1)
    copy = pltpu.async_remote_copy(x_ref, o_ref, send_sem, recv_sem,
                                   device_id={AXIS: right})
    copy.wait()
    o_ref[...] = o_ref[...] + me.astype(jnp.float32)


def build():
    def fn(pallas_call, x):
        from jax.sharding import Mesh, PartitionSpec as P

        mesh = Mesh(np.array(jax.devices()[:1]), (AXIS,))

        def local(xs):
            return pallas_call(
                remote_kernel,
                out_shape=jax.ShapeDtypeStruct(xs.shape, xs.dtype),
                in_specs=[pl.BlockSpec(memory_space=pltpu.VMEM)],
                out_specs=pl.BlockSpec(memory_space=pltpu.VMEM),
                scratch_shapes=[pltpu.SemaphoreType.DMA,
                                pltpu.SemaphoreType.DMA,
                                pltpu.SemaphoreType.REGULAR],
            )(xs)

        return jax.jit(jax.shard_map(local, mesh=mesh, in_specs=P(AXIS),
                                     out_specs=P(AXIS), check_vma=False))(x)

    rng = np.random.default_rng(17)
    return fn, (rng.standard_normal((8, 128), dtype=np.float32),)


def reference(x):
    return (x.copy(),)
