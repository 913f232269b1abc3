"""Kernels over a mesh of TensorCores (`pl.kernel`, `pl.core_map`) through
tessera.jax: under `tessera.jax.interpret()` they run in tessera (not in JAX)
as the pallas_call JAX lowers them to on a CPU, one simulated core per index
of the mesh's core axis (docs/jax.md, "Kernels over a mesh"). Expected values
are computed with numpy from the inputs; every case runs on both backends and
checks that tessera ran the kernel (its run counter moved)."""

from __future__ import annotations

import re

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402
from jax.experimental import pallas as pl  # noqa: E402
from jax.experimental.pallas import tpu as pltpu  # noqa: E402

import tessera.jax as tj  # noqa: E402

# pl.core_map is deprecated for pl.kernel in this jax, but still what
# kernels over closed-over refs use.
pytestmark = pytest.mark.filterwarnings(
    "ignore:jax.experimental.pallas.core_map is deprecated:DeprecationWarning")

BACKENDS = ["interp", "cpu"]
ROWS = 16


def _runs() -> int:
    return tj.cache_info()["runs"]


def _copy_scale_kernel(cores: int, scale: float):
    """Each core copies its rows to VMEM, scales them and adds its core index,
    and copies them to the output."""
    rows = ROWS // cores

    @pl.kernel(mesh=pltpu.TensorCoreMesh(axis_name="core", num_cores=cores),
               out_type=jax.ShapeDtypeStruct((ROWS, 128), jnp.float32),
               scratch_types=[pltpu.VMEM((rows, 128), jnp.float32),
                              pltpu.SemaphoreType.DMA])
    def kernel(x_ref, o_ref, v_ref, sem):
        c = lax.axis_index("core")
        sl = pl.ds(c * rows, rows)
        pltpu.async_copy(x_ref.at[sl], v_ref, sem).wait()
        v_ref[...] = v_ref[...] * scale + c.astype(jnp.float32)
        pltpu.async_copy(v_ref, o_ref.at[sl], sem).wait()
    return kernel


def _expected_copy_scale(x: np.ndarray, cores: int, scale: float) -> np.ndarray:
    core_of_row = np.repeat(np.arange(cores), ROWS // cores)[:, None]
    return x * np.float32(scale) + core_of_row.astype(np.float32)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("cores", [1, 2, 4])
def test_pl_kernel_runs_in_tessera_one_core_per_index(backend, cores):
    x = np.random.default_rng(cores).standard_normal((ROWS, 128)).astype(np.float32)
    with tj.interpret(backend=backend):
        kernel = _copy_scale_kernel(cores, 3.0)
        before = _runs()
        eager = kernel(x)
        jitted = jax.jit(kernel)(x)
        ran = _runs() - before
    want = _expected_copy_scale(x, cores, 3.0)
    np.testing.assert_allclose(np.asarray(eager), want, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(jitted), want, rtol=1e-6)
    assert ran >= 2, "the kernel did not run in tessera"


@pytest.mark.parametrize("backend", BACKENDS)
def test_pl_kernel_several_outputs_and_inputs(backend):
    rng = np.random.default_rng(7)
    a = rng.integers(-100, 100, (8, 128)).astype(np.int32)
    b = rng.integers(-100, 100, (8, 128)).astype(np.int32)

    with tj.interpret(backend=backend):
        @pl.kernel(mesh=pltpu.TensorCoreMesh(axis_name="c", num_cores=1),
                   out_type=(jax.ShapeDtypeStruct((8, 128), jnp.int32),
                             jax.ShapeDtypeStruct((8, 128), jnp.int32)),
                   scratch_types=[pltpu.VMEM((8, 128), jnp.int32),
                                  pltpu.VMEM((8, 128), jnp.int32),
                                  pltpu.SemaphoreType.DMA((2,))])
        def kernel(a_ref, b_ref, s_ref, d_ref, va, vb, sems):
            ca = pltpu.make_async_copy(a_ref, va, sems.at[0])
            cb = pltpu.make_async_copy(b_ref, vb, sems.at[1])
            ca.start()
            cb.start()
            ca.wait()
            cb.wait()
            va[...], vb[...] = va[...] + vb[...], va[...] - vb[...]
            pltpu.sync_copy(va, s_ref)
            pltpu.sync_copy(vb, d_ref)

        before = _runs()
        s, d = kernel(a, b)
        ran = _runs() - before
    np.testing.assert_array_equal(np.asarray(s), a + b)
    np.testing.assert_array_equal(np.asarray(d), a - b)
    assert ran == 1


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("cores", [1, 2, 4])
def test_core_map_writes_closed_over_refs_with_a_barrier_between_cores(backend, cores):
    """core_map inside run_state: the kernel writes refs it closes over
    (they become outputs aliased to their operands), and every core signals
    every other before any goes on: this only finishes if the cores run
    at the same time."""
    mesh = pltpu.TensorCoreMesh(axis_name="x", num_cores=cores)
    rows = ROWS // cores
    x = np.arange(ROWS * 128, dtype=np.int32).reshape(ROWS, 128) * 3 - 1000

    def f(x):
        y = jnp.full_like(x, -7)

        def inner(refs):
            x_ref, y_ref = refs

            @pl.core_map(mesh)
            def _():
                def alloc(xv, yv, dma_sem, sem):
                    for i in range(cores):
                        pl.semaphore_signal(sem, 1, core_index=i)
                    pl.semaphore_wait(sem, cores)
                    c = lax.axis_index("x")
                    sl = pl.ds(c * rows, rows)
                    pltpu.async_copy(x_ref.at[sl], xv, dma_sem).wait()
                    yv[...] = xv[...] * 2 + c
                    pltpu.async_copy(yv, y_ref.at[sl], dma_sem).wait()
                pl.run_scoped(alloc, pltpu.VMEM((rows, 128), jnp.int32),
                              pltpu.VMEM((rows, 128), jnp.int32),
                              pltpu.SemaphoreType.DMA, pltpu.SemaphoreType.REGULAR)
        _, y = pl.run_state(inner)((x, y))
        return y

    with tj.interpret(backend=backend):
        before = _runs()
        y = jax.jit(f)(x)
        ran = _runs() - before
    want = x * 2 + np.repeat(np.arange(cores, dtype=np.int32), rows)[:, None]
    np.testing.assert_array_equal(np.asarray(y), want)
    assert ran == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_core_map_keeps_what_it_does_not_write(backend):
    """A written ref starts as its operand's contents (the kernel writes only
    half of it); a ref only read stays an input."""
    mesh = pltpu.TensorCoreMesh(axis_name="x", num_cores=1)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((16, 128)).astype(np.float32)
    y0 = rng.standard_normal((16, 128)).astype(np.float32)

    def f(x, y):
        def inner(refs):
            x_ref, y_ref = refs

            @pl.core_map(mesh)
            def _():
                pltpu.sync_copy(x_ref.at[pl.ds(8, 8)], y_ref.at[pl.ds(0, 8)])
        x2, y2 = pl.run_state(inner)((x, y))
        return x2, y2

    with tj.interpret(backend=backend):
        before = _runs()
        x2, y2 = jax.jit(f)(x, y0)
        ran = _runs() - before
    want = y0.copy()
    want[:8] = x[8:]
    np.testing.assert_array_equal(np.asarray(y2), want)
    np.testing.assert_array_equal(np.asarray(x2), x)
    assert ran == 1


def test_mesh_kernel_outside_interpret_is_jaxs():
    """Without interpret() a mesh kernel is JAX's business (tessera does not
    take it): the run counter does not move."""
    x = np.ones((ROWS, 128), np.float32)
    kernel = _copy_scale_kernel(1, 2.0)
    before = _runs()
    try:
        kernel(x)
    except Exception:  # no TPU here: JAX refuses to compile it, which is fine
        pass
    assert _runs() == before


# ---- HBM buffers of run_scoped: one per device, shared by its cores ---------------

ALLOW_HBM = pltpu.InterpretParams(allow_hbm_allocation_in_run_scoped=True)


def _handoff(space, params=ALLOW_HBM):
    """Core 0 copies x into an HBM buffer of run_scoped and signals core 1,
    which copies the buffer (never writing it) to y: y is x only if both
    cores see one buffer."""
    mesh = pltpu.TensorCoreMesh(axis_name="x", num_cores=2)

    def f(x):
        y = jnp.zeros_like(x)

        def inner(refs):
            x_ref, y_ref = refs

            @pl.core_map(mesh, interpret=params)
            def _():
                def body(sem):
                    c = lax.axis_index("x")

                    def copy(buf):
                        @pl.when(c == 0)
                        def _():
                            pltpu.sync_copy(x_ref, buf)
                            pl.semaphore_signal(sem, 1, core_index=1)

                        @pl.when(c == 1)
                        def _():
                            pl.semaphore_wait(sem, 1)
                            pltpu.sync_copy(buf, y_ref)
                    pl.run_scoped(copy, space(x_ref.shape, x_ref.dtype))
                pl.run_scoped(body, pltpu.SemaphoreType.REGULAR)
        _, y = pl.run_state(inner)((x, y))
        return y
    return f


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("space", [pltpu.HBM, pl.ANY])
def test_core_map_cores_share_an_hbm_buffer_of_run_scoped(backend, space):
    x = np.arange(ROWS * 128, dtype=np.int32).reshape(ROWS, 128) * 7 - 3
    with tj.interpret(backend=backend):
        before = _runs()
        y = jax.jit(_handoff(space))(x)
        ran = _runs() - before
    np.testing.assert_array_equal(np.asarray(y), x)
    assert ran == 1


def _swap_halves(space, params=ALLOW_HBM):
    """Each core writes its half of x into a shared HBM buffer, a barrier,
    then each copies the other core's half to its own half of y."""
    mesh = pltpu.TensorCoreMesh(axis_name="x", num_cores=2)
    half = ROWS // 2

    def f(x):
        y = jnp.zeros_like(x)

        def inner(refs):
            x_ref, y_ref = refs

            @pl.core_map(mesh, interpret=params)
            def _():
                def body(buf, sem):
                    c = lax.axis_index("x")
                    mine, theirs = pl.ds(c * half, half), pl.ds((1 - c) * half, half)
                    pltpu.sync_copy(x_ref.at[mine], buf.at[mine])
                    pl.semaphore_signal(sem, 1, core_index=1 - c)
                    pl.semaphore_wait(sem, 1)
                    pltpu.sync_copy(buf.at[theirs], y_ref.at[mine])
                    # neither core leaves (and may release the buffer) before
                    # the other has read it
                    pl.semaphore_signal(sem, 1, core_index=1 - c)
                    pl.semaphore_wait(sem, 1)
                pl.run_scoped(body, space(x_ref.shape, x_ref.dtype), pltpu.SemaphoreType.REGULAR)
        _, y = pl.run_state(inner)((x, y))
        return y
    return f


@pytest.mark.parametrize("backend", BACKENDS)
def test_core_map_cores_exchange_halves_through_an_hbm_buffer(backend):
    x = np.random.default_rng(3).standard_normal((ROWS, 128)).astype(np.float32)
    with tj.interpret(backend=backend):
        y = np.asarray(jax.jit(_swap_halves(pltpu.HBM))(x))
    np.testing.assert_array_equal(y, np.concatenate([x[ROWS // 2:], x[:ROWS // 2]]))


def test_core_map_race_on_a_shared_hbm_buffer_is_reported():
    """Both cores stage x through the shared buffer with nothing ordering
    them: a race on the buffer (with a copy per core there would be none)."""
    mesh = pltpu.TensorCoreMesh(axis_name="x", num_cores=2)
    params = pltpu.InterpretParams(allow_hbm_allocation_in_run_scoped=True,
                                   detect_races=True)

    def f(x):
        y = jnp.zeros_like(x)

        def inner(refs):
            x_ref, y_ref = refs

            @pl.core_map(mesh, interpret=params)
            def _():
                def copy(buf):
                    pltpu.sync_copy(x_ref, buf)  # the racy copy in
                    pltpu.sync_copy(buf, y_ref)
                pl.run_scoped(copy, pltpu.HBM(x_ref.shape, x_ref.dtype))
        _, y = pl.run_state(inner)((x, y))
        return y

    x = np.arange(ROWS * 128, dtype=np.int32).reshape(ROWS, 128)
    with tj.interpret():
        with pytest.raises(Exception) as info:
            jax.jit(f)(x)
    text = str(info.value)
    with open(__file__) as src:  # the race is on the buffer, at its copy in
        line = next(n for n, t in enumerate(src, 1) if "# the racy copy in" in t)
    assert re.search(rf":{line}:\d+: error: .*data race on %\w+\[0:{ROWS}, 0:128\]: DMA write "
                     rf"by 'dma_start' \(line {line}\) core \d .* core \d", text), text
