"""Races.

* where="cores": two TensorCores (cores=2), a parallel grid (2) whose output
  index map is constant: both cores write output block (0, 0). JAX's TPU
  interpret mode (num_cores_or_threads=2, detect_races=True) raises "RACE
  DETECTED"; without detection it says nothing. tessera: an error of kind
  core_conflict (its name for this race) with detect_races; without, the
  warning parallel_revisit it gives any run of the kernel (the output's
  index map ignores the parallel dim a megacore splits), and no second
  warning for the two cores.
* where="dma": one core reads a VMEM buffer while a DMA into it is still in
  flight (the wait comes after the read)."""

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

KIND = "bug"


def OPTIONS(where: str, detect: bool = True):
    opts = {"detect_races": detect}
    if where == "cores":
        opts["cores"] = 2
    return opts


def EXPECT(where: str, detect: bool = True):
    if not detect:
        return {"jax": "ok", "tessera": "warning:parallel_revisit"}
    if where == "cores":
        return {"jax": "error:race", "tessera": "error:core_conflict"}
    return {"jax": "error:race", "tessera": "error:race"}


def _cores_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] + pl.program_id(0).astype(jnp.float32)


def _dma_kernel(x_hbm, o_ref, buf, sem):
    copy = pltpu.make_async_copy(x_hbm, buf, sem)
    copy.start()
    o_ref[...] = buf[...] + 1.0          # read while the DMA writes buf
    copy.wait()


def build(where: str = "cores", detect: bool = True):
    def fn(pallas_call, x):
        if where == "cores":
            return pallas_call(
                _cores_kernel,
                out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
                grid=(2,),
                in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
                out_specs=pl.BlockSpec((8, 128), lambda i: (0, 0)),
                compiler_params=pltpu.CompilerParams(
                    dimension_semantics=("parallel",)),
            )(x)
        return pallas_call(
            _dma_kernel,
            out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
            in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
            out_specs=pl.BlockSpec(memory_space=pltpu.VMEM),
            scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32),
                            pltpu.SemaphoreType.DMA],
        )(x)

    rows = 16 if where == "cores" else 8
    return fn, (np.ones((rows, 128), np.float32),)
