"""A semaphore that leaves one pallas_call for another: an output of
semaphore type (`pltpu.SemaphoreType.DMA(())` in out_shape, its BlockSpec in
`pltpu.SEMAPHORE`), passed on to the next call as an input, so that a DMA
started in one call is waited for in the next (the async copy, or "future",
pattern of JAX's tpu_pallas_async_test.py). tessera translates it to a
semaphore operand whose counts cross the calls as an int32 array
(docs/jax.md, docs/semantics.md "Semaphores between kernels"). JAX's own TPU
interpret mode cannot run these kernels (jax 0.12.0.1: it has no
uninitialized value for a semaphore output), so the oracle is the data the
DMA copies."""

from __future__ import annotations

import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.experimental import pallas as pl  # noqa: E402
from jax.experimental.pallas import tpu as pltpu  # noqa: E402

import tessera.jax as tj  # noqa: E402

BACKENDS = ["interp", "cpu"]
ANY = pl.BlockSpec(memory_space=pl.ANY)
SEM = pl.BlockSpec(memory_space=pltpu.SEMAPHORE)


def _x(rows=8):
    return jnp.arange(rows * 128, dtype=jnp.float32).reshape(rows, 128) / 7


def copy_start(x, backend, kind=pltpu.SemaphoreType.DMA):
    """x (aliased through), the copy's destination, and the semaphore its
    DMA signals: the DMA is still in flight when the call returns."""
    def kernel(x_ref, aliased_x_ref, o_ref, sem):
        del aliased_x_ref
        pltpu.make_async_copy(x_ref, o_ref, sem).start()
    return tj.pallas_call(
        kernel, out_shape=(jax.ShapeDtypeStruct.like(x), jax.ShapeDtypeStruct.like(x), kind(())),
        in_specs=[ANY], out_specs=(ANY, ANY, SEM), input_output_aliases={0: 0},
        backend=backend)(x)


def copy_done(x, o, sem, backend, waits=1):
    """Waits (`waits` times) for the DMA of copy_start; returns its
    destination (aliased through)."""
    def kernel(x_ref, o_ref, sem, aliased_o_ref):
        del aliased_o_ref
        for _ in range(waits):
            pltpu.make_async_copy(x_ref, o_ref, sem).wait()
    return tj.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct.like(x), in_specs=[ANY, ANY, SEM],
        out_specs=ANY, input_output_aliases={1: 0}, backend=backend)(x, o, sem)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_dma_started_in_one_call_is_waited_for_in_the_next(backend):
    @jax.jit
    def f(x):
        x, o, sem = copy_start(x, backend)
        return copy_done(x, o, sem, backend)

    x = _x()
    np.testing.assert_array_equal(f(x), x)


@pytest.mark.parametrize("backend", BACKENDS)
def test_two_futures_in_flight_at_once(backend):
    # two copies started before either is waited for (test_multiple_async_copy)
    @jax.jit
    def f(x):
        x, o1, s1 = copy_start(x, backend)
        x, o2, s2 = copy_start(x, backend)
        return copy_done(x, o1, s1, backend), copy_done(x, o2, s2, backend)

    x = _x(16)
    y1, y2 = f(x)
    np.testing.assert_array_equal(y1, x)
    np.testing.assert_array_equal(y2, x)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_semaphore_array_and_a_regular_semaphore_cross_calls(backend):
    # call 1: two DMAs on dma_sem[0] and [1], and a signal of 3 on a regular
    # semaphore; call 2 waits for all of them through its aliased outputs
    def start(x_ref, o_ref, sems, flag):
        pltpu.make_async_copy(x_ref.at[0:8], o_ref.at[0:8], sems.at[0]).start()
        pltpu.make_async_copy(x_ref.at[8:16], o_ref.at[8:16], sems.at[1]).start()
        pl.semaphore_signal(flag, 3)

    def done(x_ref, o_ref, sems, flag, out_o, out_sems, out_flag):
        del out_o, out_sems, out_flag
        pltpu.make_async_copy(x_ref.at[8:16], o_ref.at[8:16], sems.at[1]).wait()
        pltpu.make_async_copy(x_ref.at[0:8], o_ref.at[0:8], sems.at[0]).wait()
        pl.semaphore_wait(flag, 3)

    @jax.jit
    def f(x):
        o, sems, flag = tj.pallas_call(
            start, out_shape=(jax.ShapeDtypeStruct.like(x), pltpu.SemaphoreType.DMA((2,)),
                              pltpu.SemaphoreType.REGULAR(())),
            in_specs=[ANY], out_specs=(ANY, SEM, SEM), backend=backend)(x)
        o, _, _ = tj.pallas_call(
            done, out_shape=(jax.ShapeDtypeStruct.like(x), pltpu.SemaphoreType.DMA((2,)),
                             pltpu.SemaphoreType.REGULAR(())),
            in_specs=[ANY, ANY, SEM, SEM], out_specs=(ANY, SEM, SEM),
            input_output_aliases={1: 0, 2: 1, 3: 2}, backend=backend)(x, o, sems, flag)
        return o

    x = _x(16)
    np.testing.assert_array_equal(f(x), x)


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_eager_semaphore_output_is_its_count(backend):
    # JAX holds no concrete semaphore array; an eager call gives the count
    # (the bytes the DMA signals), as an int32 array
    x = np.asarray(_x())
    xo, o, sem = copy_start(x, backend)
    assert np.asarray(sem).dtype == np.int32 and int(np.asarray(sem)) == x.nbytes
    np.testing.assert_array_equal(np.asarray(o), x)  # the copy landed by the call's end


@pytest.mark.parametrize("backend", BACKENDS)
def test_waiting_twice_for_one_dma_is_a_deadlock(backend):
    @jax.jit
    def f(x):
        x, o, sem = copy_start(x, backend)
        return copy_done(x, o, sem, backend, waits=2)

    with pytest.raises(Exception, match="deadlock") as info:
        f(_x())
    assert "waits for %sem to reach 4096 bytes, it holds 0" in str(info.value), info.value


def test_a_semaphore_input_never_waited_for_is_left_non_zero():
    @jax.jit
    def f(x):
        x, o, sem = copy_start(x, "interp")
        return copy_done(x, o, sem, "interp", waits=0)

    with pytest.raises(Exception, match="holds 4096 at kernel end") as info:
        f(_x())
    assert "test_bridge_semaphore_operands.py" in str(info.value), info.value


def test_the_kernel_has_semaphore_operands():
    text = tj.lower_to_tsr(
        lambda x_ref, ax, o_ref, sem: pltpu.make_async_copy(x_ref, o_ref, sem).start(),
        (jax.ShapeDtypeStruct((8, 128), jnp.float32),) * 2 + (pltpu.SemaphoreType.DMA(()),),
        np.zeros((8, 128), np.float32), in_specs=[ANY], out_specs=(ANY, ANY, SEM),
        input_output_aliases={0: 0})
    assert "  out %sem: dma_sem\n" in text, text
    assert "dma_start %x_ref[:, :] -> %o_ref[:, :], %sem" in text, text
