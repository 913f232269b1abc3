"""DMAs of a traced size through tessera.jax: `pl.ds(start, size)` with a
size read in the kernel, in `pltpu.async_copy`'s views, is the IR's
`ds(start, %n)` (docs/ir.md, "Views"; docs/dma.md, "Dynamic sizes").
Expected values are computed with numpy in the test; both backends. The
interpreter also reports a size outside the ref, a negative one and views
whose sizes differ, located at the copy's line."""

from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax.experimental import pallas as pl  # noqa: E402
from jax.experimental.pallas import tpu as pltpu  # noqa: E402

import tessera  # noqa: E402
import tessera.jax as tj  # noqa: E402

BACKENDS = ["interp", "cpu"]


def _prefix_copy(n_ref, x_hbm, _, o_hbm, sem):
    """o[:n] = x[:n] with n read from SMEM; the rest of o keeps its value."""
    n = n_ref[0]
    pltpu.async_copy(x_hbm.at[pl.ds(0, n)], o_hbm.at[pl.ds(0, n)], sem).wait()


def _prefix_call(backend, shape=(16, 128), **options):
    return tj.pallas_call(
        _prefix_copy, jax.ShapeDtypeStruct(shape, jnp.int32),
        in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM), pl.BlockSpec(memory_space=pl.ANY),
                  pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=pl.BlockSpec(memory_space=pl.ANY),
        scratch_shapes=[pltpu.SemaphoreType.DMA],
        input_output_aliases={2: 0}, backend=backend, **options)


def _rand(shape, seed):
    return np.random.default_rng(seed).integers(-1000, 1000, shape).astype(np.int32)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("n", [0, 1, 5, 16])
def test_prefix_of_traced_size(backend, n):
    x, o = _rand((16, 128), 1), _rand((16, 128), 2)
    got = np.asarray(_prefix_call(backend)(np.array([n], np.int32), x, o))
    want = o.copy()
    want[:n] = x[:n]
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_one_translation_runs_several_sizes_under_jit(backend):
    x, o = _rand((16, 128), 3), _rand((16, 128), 4)
    f = jax.jit(lambda n, x, o: _prefix_call(backend)(n, x, o))
    for n in (3, 9, 12):
        want = o.copy()
        want[:n] = x[:n]
        np.testing.assert_array_equal(np.asarray(f(np.array([n], np.int32), x, o)), want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_tsr_reads_the_size(backend):
    x = _rand((16, 128), 5)
    text = _prefix_call(backend).lower_to_tsr(np.array([4], np.int32), x, x)
    assert "ds(0, %" in text, text


def _strided_window(n_ref, x_hbm, o_hbm, buf, sems):
    """For each step i: buf = 0, then buf[s:s+n] = x[i, s::2][:n] and the
    row goes to o[i] (s = n_ref[1 + i], n = n_ref[0] - i); in VMEM, with a
    dynamic start and a stride on the source."""
    i = pl.program_id(0)
    n = n_ref[0] - i
    s = n_ref[1 + i]
    buf[...] = jnp.zeros_like(buf)
    pltpu.async_copy(x_hbm.at[i, pl.ds(s, n, stride=2)], buf.at[pl.ds(s, n)], sems.at[0]).wait()
    pltpu.async_copy(buf, o_hbm.at[i], sems.at[1]).wait()


@pytest.mark.parametrize("backend", BACKENDS)
def test_dynamic_start_size_and_stride_into_vmem(backend):
    x = _rand((4, 64), 6)
    meta = np.array([10, 3, 0, 7, 20], np.int32)
    got = np.asarray(tj.pallas_call(
        _strided_window, jax.ShapeDtypeStruct((4, 32), jnp.int32), grid=(4,),
        in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM), pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=pl.BlockSpec(memory_space=pl.ANY),
        scratch_shapes=[pltpu.VMEM((32,), jnp.int32), pltpu.SemaphoreType.DMA((2,))],
        backend=backend)(meta, x))
    want = np.zeros((4, 32), np.int32)
    for i in range(4):
        n, s = 10 - i, meta[1 + i]
        want[i, s:s + n] = x[i, s::2][:n]
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("n, words", [(17, "out of bounds"), (-1, "negative size")])
def test_size_outside_the_ref_is_a_located_error(n, words):
    x = _rand((16, 128), 7)
    with pytest.raises(tj.KernelError) as info:
        _prefix_call("interp")(np.array([n], np.int32), x, x)
    text = str(info.value)
    assert words in text, text
    assert "test_bridge_dma_sizes.py" in text, text


def test_views_of_different_sizes_are_a_located_error():
    def kernel(n_ref, x_hbm, o_hbm, sem):
        n = n_ref[0]
        pltpu.async_copy(x_hbm.at[pl.ds(0, n)], o_hbm.at[pl.ds(0, n + 1)], sem).wait()

    x = _rand((16, 128), 8)
    with pytest.raises(tj.KernelError) as info:
        tj.pallas_call(
            kernel, jax.ShapeDtypeStruct((16, 128), jnp.int32),
            in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM), pl.BlockSpec(memory_space=pl.ANY)],
            out_specs=pl.BlockSpec(memory_space=pl.ANY),
            scratch_shapes=[pltpu.SemaphoreType.DMA], backend="interp")(
                np.array([4], np.int32), x)
    text = str(info.value)
    assert "views differ" in text and "[4, 128]" in text and "[5, 128]" in text, text
    assert "test_bridge_dma_sizes.py" in text, text


def test_the_tpu_emitter_refuses_it_located():
    x = _rand((16, 128), 9)
    text = _prefix_call("interp").lower_to_tsr(np.array([4], np.int32), x, x)
    kernel = tessera.Module.parse(text)[0]
    with pytest.raises(tessera.CompileError) as info:
        kernel.to_mosaic("v5e")
    message = str(info.value)
    assert "dynamic size" in message and "cannot be emitted for TPU" in message, message
    line = 1 + next(i for i, t in enumerate(text.splitlines()) if "dma_start" in t)
    assert f"<string>:{line}:" in message, (message, text)
