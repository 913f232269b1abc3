"""A semaphore that leaves one pallas_call for another (an output of
semaphore type, `pltpu.SemaphoreType.DMA` in out_shape, passed on to the
next call: a DMA started in one call and waited for in the next) is not
translated yet: tessera's semaphores are kernel scratch. The refusal is a
TranslationError located at the user's pallas_call (docs/jax.md, "What is
translated", its list of what is not). JAX's TPU interpret mode cannot run these kernels either
(jax 0.12.0.1: it has no uninitialized value for a semaphore output)."""

from __future__ import annotations

import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.experimental import pallas as pl  # noqa: E402
from jax.experimental.pallas import tpu as pltpu  # noqa: E402

import tessera.jax as tj  # noqa: E402


def _start(x_hbm, y_hbm, sem_out):
    pltpu.make_async_copy(x_hbm, y_hbm, sem_out).start()


def _wait(x_hbm, y_hbm, sem_in, _):
    pltpu.make_async_copy(x_hbm, y_hbm, sem_in).wait()


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_a_semaphore_output_is_a_located_refusal(backend):
    x = np.arange(8 * 128, dtype=np.float32).reshape(8, 128)
    with pytest.raises(tj.TranslationError) as info:
        tj.pallas_call(
            _start, (jax.ShapeDtypeStruct((8, 128), jnp.float32), pltpu.SemaphoreType.DMA),
            in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
            out_specs=(pl.BlockSpec(memory_space=pl.ANY),
                       pl.BlockSpec(memory_space=pltpu.SEMAPHORE)),
            backend=backend)(x)
    text = str(info.value)
    assert "semaphore output of a pallas_call" in text, text
    assert "test_bridge_semaphore_operands.py" in text, text


def test_a_semaphore_input_is_a_located_refusal():
    x = np.zeros((8, 128), np.float32)
    sem_aval = pltpu.SemaphoreType.DMA.get_array_aval()
    with pytest.raises(tj.TranslationError) as info:
        # traced only (the semaphore array cannot be made outside a kernel)
        jax.make_jaxpr(lambda x, y, s: tj.pallas_call(
            _wait, jax.ShapeDtypeStruct((8, 128), jnp.float32),
            in_specs=[pl.BlockSpec(memory_space=pl.ANY)] * 2
            + [pl.BlockSpec(memory_space=pltpu.SEMAPHORE)],
            out_specs=pl.BlockSpec(memory_space=pl.ANY),
            input_output_aliases={1: 0})(x, y, s))(
                x, x, jax.ShapeDtypeStruct(sem_aval.shape, sem_aval.dtype))
    text = str(info.value)
    assert "semaphore input of a pallas_call" in text, text
