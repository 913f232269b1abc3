"""`semaphore_read`: read a REGULAR semaphore's count after two signals (and
a DMA semaphore's after a wait), then wait it back to zero."""

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

KIND = "primitives"
PRIMITIVES = ("semaphore_read", "semaphore_signal", "semaphore_wait")
TOLERANCE = "exact"
#: jax 0.12.0.1's TPU interpret mode has no branch for it and it has no CPU
#: lowering: "NotImplementedError: MLIR translation rule for primitive
#: 'semaphore_read' not found for platform cpu". tessera is compared with
#: `reference`.
JAX_TPU_INTERPRET = "fails: NotImplementedError: no CPU lowering of semaphore_read"


def semaphore_read_kernel(x_ref, o_ref, sem):
    pl.semaphore_signal(sem, 3)
    pl.semaphore_signal(sem, 2)
    count = pl.semaphore_read(sem)
    pl.semaphore_wait(sem, 5)
    after = pl.semaphore_read(sem)
    o_ref[...] = x_ref[...] + (count * 10 + after).astype(jnp.float32)


def build():
    def fn(pallas_call, x):
        return pallas_call(
            semaphore_read_kernel,
            out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
            scratch_shapes=[pltpu.SemaphoreType.REGULAR],
        )(x)

    return fn, (np.zeros((8, 128), np.float32),)


def reference(x):
    return (x + np.float32(50),)
