"""DMAs and semaphores on one device: an HBM (`pl.ANY`) input read block by
block with `make_async_copy` (`dma_start`/`dma_wait`) into VMEM scratch, an
HBM output written by DMA, two DMAs in flight on one semaphore array,
`run_scoped` with a scoped VMEM buffer and DMA semaphore, `pltpu.sync_copy`,
a REGULAR semaphore signalled and waited (`semaphore_signal`/`_wait`)."""

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

KIND = "primitives"
PRIMITIVES = ("dma_start", "dma_wait", "run_scoped", "semaphore_signal",
              "semaphore_wait")
TOLERANCE = "exact"


def dma_kernel(x_hbm, o_ref, o_hbm, buf, buf2, sems, flag):
    i = pl.program_id(0)
    n = pl.num_programs(0)
    # two DMAs in flight at once, on two semaphores of an array
    c0 = pltpu.make_async_copy(x_hbm.at[i], buf, sems.at[0])
    c1 = pltpu.make_async_copy(x_hbm.at[n - 1 - i], buf2, sems.at[1])
    c0.start()
    c1.start()
    c1.wait()
    c0.wait()
    # a regular semaphore: signal twice, wait for both
    pl.semaphore_signal(flag, 1)
    pl.semaphore_signal(flag, 1)
    pl.semaphore_wait(flag, 2)

    def scoped(tmp, sem):
        cp = pltpu.make_async_copy(buf, tmp, sem)
        cp.start()
        cp.wait()
        o_ref[...] = tmp[...] * 2.0 + buf2[...]

    pl.run_scoped(scoped, pltpu.VMEM((8, 128), jnp.float32),
                  pltpu.SemaphoreType.DMA)
    # VMEM -> HBM output, through a scoped semaphore (sync_copy)
    buf[...] = buf[...] + i.astype(jnp.float32)
    pltpu.sync_copy(buf, o_hbm.at[i])


def build(steps: int = 4):
    def fn(pallas_call, x):
        return pallas_call(
            dma_kernel,
            out_shape=(jax.ShapeDtypeStruct((steps * 8, 128), jnp.float32),
                       jax.ShapeDtypeStruct((steps, 8, 128), jnp.float32)),
            grid=(steps,),
            in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
            out_specs=(pl.BlockSpec((8, 128), lambda i: (i, 0)),
                       pl.BlockSpec(memory_space=pl.ANY)),
            scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32),
                            pltpu.VMEM((8, 128), jnp.float32),
                            pltpu.SemaphoreType.DMA((2,)),
                            pltpu.SemaphoreType.REGULAR],
            compiler_params=pltpu.CompilerParams(
                dimension_semantics=("arbitrary",)),
        )(x)

    rng = np.random.default_rng(16)
    return fn, (rng.standard_normal((steps, 8, 128), dtype=np.float32),)


def reference(x):
    steps = x.shape[0]
    o = np.concatenate([x[i] * 2 + x[steps - 1 - i] for i in range(steps)])
    o2 = x + np.arange(steps, dtype=np.float32)[:, None, None]
    return (o, o2)
