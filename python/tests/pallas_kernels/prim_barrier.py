"""The barrier semaphore (`pltpu.get_barrier_semaphore`, with a
`collective_id`), as all_gather uses it, on a one-device mesh: signal the
right neighbour's barrier (itself), wait for it, then a remote copy."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

KIND = "primitives"
PRIMITIVES = ("get_barrier_semaphore", "semaphore_signal", "semaphore_wait")
TOLERANCE = "exact"
AXIS = "x"


def remote_kernel(x_ref, o_ref, send_sem, recv_sem):
    me = lax.axis_index(AXIS)
    right = lax.rem(me + 1, lax.axis_size(AXIS))
    barrier = pltpu.get_barrier_semaphore()
    pl.semaphore_signal(barrier, 1, device_id={AXIS: right})
    pl.semaphore_wait(barrier, 1)
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
                                pltpu.SemaphoreType.DMA],
                compiler_params=pltpu.CompilerParams(collective_id=0),
            )(xs)

        return jax.jit(jax.shard_map(local, mesh=mesh, in_specs=P(AXIS),
                                     out_specs=P(AXIS), check_vma=False))(x)

    rng = np.random.default_rng(17)
    return fn, (rng.standard_normal((8, 128), dtype=np.float32),)


def reference(x):
    return (x.copy(),)
