"""A deadlock: the kernel waits on a REGULAR semaphore nothing signals.
JAX's TPU interpret mode polls the semaphore forever (it has no deadlock
detection: the run hangs); tessera reports a deadlock. Run as a script
(`python -m pallas_kernels.bug_deadlock`) to see JAX's behaviour: it prints
"reached the wait" from inside the kernel, then hangs."""

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

KIND = "bug"
EXPECT = {"jax": "hang", "tessera": "error:deadlock"}
MARKER = "reached the wait"


def deadlock_kernel(x_ref, o_ref, sem):
    o_ref[...] = x_ref[...]
    pl.debug_print(MARKER)
    pl.semaphore_wait(sem, 1)            # never signalled


def build():
    def fn(pallas_call, x):
        return pallas_call(
            deadlock_kernel,
            out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
            scratch_shapes=[pltpu.SemaphoreType.REGULAR],
        )(x)

    return fn, (np.ones((8, 128), np.float32),)


if __name__ == "__main__":
    from jax.experimental.pallas import tpu as _pltpu
    import functools

    fn, inputs = build()
    out = fn(functools.partial(pl.pallas_call,
                               interpret=_pltpu.InterpretParams()), *inputs)
    jax.block_until_ready(out)
    print("finished (no hang)", flush=True)
