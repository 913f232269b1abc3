"""Kernels for several devices under `shard_map` (test_multidev_bridge.py):
a ring that shifts each device's block to its right neighbour with a remote
DMA, after a handshake on the barrier semaphore, then signals the right
neighbour's regular semaphore with a LOGICAL device id; a kernel on a 2-D
mesh (a remote DMA along one axis, mesh device ids as dicts and tuples,
`axis_index` of each axis and of both); a kernel with device ids keyed by
tuples of mesh axes; and a kernel whose wait is never signalled (a
deadlock)."""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

AXIS = "x"


def ring_kernel(x_ref, o_ref, send_sem, recv_sem, done_sem):
    me = lax.axis_index(AXIS)
    n = lax.axis_size(AXIS)
    right = lax.rem(me + 1, n)
    left = lax.rem(me + n - 1, n)
    # handshake: tell the left neighbour I am ready to receive, wait for the right one
    barrier = pltpu.get_barrier_semaphore()
    pl.semaphore_signal(barrier, 1, device_id={AXIS: left})
    pl.semaphore_wait(barrier, 1)
    copy = pltpu.make_async_remote_copy(x_ref, o_ref, send_sem, recv_sem,
                                        device_id=(right,),
                                        device_id_type=pl.DeviceIdType.MESH)
    copy.start()
    copy.wait_send()
    copy.wait_recv()
    o_ref[...] = o_ref[...] * 2.0 + me.astype(jnp.float32)
    pl.semaphore_signal(done_sem, me + 1, device_id=right,
                        device_id_type=pl.DeviceIdType.LOGICAL)
    pl.semaphore_wait(done_sem, left + 1)


def ring(pallas_call, mesh, x, jit=True):
    """Device d's output is 2 * (device d-1's block) + d."""
    from jax.sharding import PartitionSpec as P

    def local(xs):
        return pallas_call(
            ring_kernel,
            out_shape=jax.ShapeDtypeStruct(xs.shape, xs.dtype),
            in_specs=[pl.BlockSpec(memory_space=pltpu.VMEM)],
            out_specs=pl.BlockSpec(memory_space=pltpu.VMEM),
            scratch_shapes=[pltpu.SemaphoreType.DMA, pltpu.SemaphoreType.DMA,
                            pltpu.SemaphoreType.REGULAR],
            compiler_params=pltpu.CompilerParams(collective_id=0),
        )(xs)

    f = jax.shard_map(local, mesh=mesh, in_specs=P(AXIS), out_specs=P(AXIS),
                      check_vma=False)
    return (jax.jit(f) if jit else f)(x)


def ring_reference(x, n):
    blocks = np.split(x, n)
    return np.concatenate([blocks[(d - 1) % n] * 2 + d for d in range(n)])


def mesh2d_kernel(x_ref, o_ref, send_sem, recv_sem, sem):
    # 2-D mesh ("a", "b"): each device copies its block to the next device
    # along "b" (a dict naming only "b": "a" is this device's own), signals
    # the transposed device (a tuple of both coordinates) with an amount
    # that names the sender, and adds its coordinates to what it received
    i = lax.axis_index("a")
    j = lax.axis_index("b")
    nb = lax.axis_size("b")
    barrier = pltpu.get_barrier_semaphore()
    pl.semaphore_signal(barrier, 1, device_id={"b": lax.rem(j + nb - 1, nb)})
    pl.semaphore_wait(barrier, 1)
    copy = pltpu.make_async_remote_copy(x_ref, o_ref, send_sem, recv_sem,
                                        device_id={"b": lax.rem(j + 1, nb)})
    copy.start()
    copy.wait()
    pl.semaphore_signal(sem, 1 + 10 * i + 100 * j, device_id=(j, i))
    pl.semaphore_wait(sem, 1 + 10 * j + 100 * i)  # exactly what the transposed device sent
    ab = lax.axis_index(("a", "b"))
    o_ref[...] = o_ref[...] + (100 * i + 10 * j + ab).astype(jnp.float32)


def mesh2d(pallas_call, mesh, x):
    from jax.sharding import PartitionSpec as P

    def local(xs):
        return pallas_call(
            mesh2d_kernel,
            out_shape=jax.ShapeDtypeStruct(xs.shape, xs.dtype),
            in_specs=[pl.BlockSpec(memory_space=pltpu.VMEM)],
            out_specs=pl.BlockSpec(memory_space=pltpu.VMEM),
            scratch_shapes=[pltpu.SemaphoreType.DMA, pltpu.SemaphoreType.DMA,
                            pltpu.SemaphoreType.REGULAR],
            compiler_params=pltpu.CompilerParams(collective_id=0),
        )(xs)

    return jax.jit(jax.shard_map(local, mesh=mesh, in_specs=P(("a", "b")),
                                 out_specs=P(("a", "b")), check_vma=False))(x)


def mesh2d_reference(x, na, nb):
    """Device (i, j) gets device (i, j-1)'s block + 100 i + 10 j + its number."""
    blocks = np.split(x, na * nb)
    return np.concatenate([blocks[(d // nb) * nb + (d % nb - 1) % nb]
                           + (100 * (d // nb) + 10 * (d % nb) + d)
                           for d in range(na * nb)])


def deadlock_kernel(x_ref, o_ref, sem):
    me = lax.axis_index(AXIS)
    right = lax.rem(me + 1, lax.axis_size(AXIS))
    pl.semaphore_signal(sem, 1, device_id={AXIS: right})
    pl.semaphore_wait(sem, 2)  # only one signal ever comes
    o_ref[...] = x_ref[...]


#: the line of deadlock_kernel's wait (the diagnostic must name it)
DEADLOCK_LINE = deadlock_kernel.__code__.co_firstlineno + 4


def _one_block_on_mesh(pallas_call, kernel, mesh, axes, x):
    """`kernel` (one VMEM block in, one out, one regular semaphore) on every
    device of `mesh`, x sharded over `axes`."""
    from jax.sharding import PartitionSpec as P

    def local(xs):
        return pallas_call(
            kernel,
            out_shape=jax.ShapeDtypeStruct(xs.shape, xs.dtype),
            in_specs=[pl.BlockSpec(memory_space=pltpu.VMEM)],
            out_specs=pl.BlockSpec(memory_space=pltpu.VMEM),
            scratch_shapes=[pltpu.SemaphoreType.REGULAR],
        )(xs)

    return jax.jit(jax.shard_map(local, mesh=mesh, in_specs=P(axes),
                                 out_specs=P(axes), check_vma=False))(x)


def deadlock(pallas_call, mesh, x):
    return _one_block_on_mesh(pallas_call, deadlock_kernel, mesh, AXIS, x)


def combined_axes_kernel(x_ref, o_ref, send_sem, recv_sem, sem, hub_sem):
    # 2-D mesh ("a", "b"), device ids keyed by tuples of axes: the index over
    # the combined axes is row-major in the tuple's order (as
    # lax.axis_index of the same tuple), and an index out of range wraps
    me = lax.axis_index(("a", "b"))
    ba = lax.axis_index(("b", "a"))
    n = lax.axis_size(("a", "b"))
    barrier = pltpu.get_barrier_semaphore()
    # handshake with the device that will copy to me (the previous in "b, a" order)
    pl.semaphore_signal(barrier, 1, device_id={("b", "a"): lax.rem(ba + n - 1, n)})
    pl.semaphore_wait(barrier, 1)
    # the block goes to the next device in "b, a" order; the last one's ba + 1
    # is n, which wraps to device 0
    copy = pltpu.make_async_remote_copy(x_ref, o_ref, send_sem, recv_sem,
                                        device_id={("b", "a"): ba + 1})
    copy.start()
    copy.wait()
    # a negative index wraps too: me - 5 is device (me + n - 5) mod n, so I
    # hear from device (me + 5) mod n, which sends its own index + 1
    pl.semaphore_signal(sem, me + 1, device_id={("a", "b"): me - 5})
    pl.semaphore_wait(sem, lax.rem(me + 5, n) + 1)
    # a static index: everyone signals ("b", "a") index 1, that is a=1, b=0
    pl.semaphore_signal(hub_sem, 1, device_id={("b", "a"): 1})

    @pl.when(me == 2)
    def _():
        pl.semaphore_wait(hub_sem, n)

    o_ref[...] = o_ref[...] + (10 * me + 100 * ba).astype(jnp.float32)


def combined_axes(pallas_call, mesh, x):
    from jax.sharding import PartitionSpec as P

    def local(xs):
        return pallas_call(
            combined_axes_kernel,
            out_shape=jax.ShapeDtypeStruct(xs.shape, xs.dtype),
            in_specs=[pl.BlockSpec(memory_space=pltpu.VMEM)],
            out_specs=pl.BlockSpec(memory_space=pltpu.VMEM),
            scratch_shapes=[pltpu.SemaphoreType.DMA, pltpu.SemaphoreType.DMA,
                            pltpu.SemaphoreType.REGULAR, pltpu.SemaphoreType.REGULAR],
            compiler_params=pltpu.CompilerParams(collective_id=0),
        )(xs)

    return jax.jit(jax.shard_map(local, mesh=mesh, in_specs=P(("a", "b")),
                                 out_specs=P(("a", "b")), check_vma=False))(x)


def combined_axes_reference(x, na, nb):
    """Device d = (i, j) (logical i * nb + j; j * na + i in "b, a" order) gets
    the block of the device before it in "b, a" order, + 10 d + 100 (j na + i)."""
    n = na * nb
    blocks = np.split(x, n)
    out = []
    for d in range(n):
        ba = (d % nb) * na + d // nb
        src_ba = (ba - 1) % n
        src = (src_ba % na) * nb + src_ba // na
        out.append(blocks[src] + np.float32(10 * d + 100 * ba))
    return np.concatenate(out)


def unknown_combined_axis_kernel(x_ref, o_ref, sem):
    # a device id over combined axes, one of which is not a mesh axis
    me = lax.axis_index(("a", "b"))
    pl.semaphore_signal(sem, 1, device_id={("a", "z"): me})
    pl.semaphore_wait(sem, 1)
    o_ref[...] = x_ref[...]


UNKNOWN_COMBINED_AXIS_LINE = unknown_combined_axis_kernel.__code__.co_firstlineno + 3


def unknown_combined_axis(pallas_call, mesh, x):
    return _one_block_on_mesh(pallas_call, unknown_combined_axis_kernel, mesh, ("a", "b"), x)
