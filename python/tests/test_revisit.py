"""Outputs of revisit mode any (Pallas `pipeline_mode=pl.Buffered(1,
revisit=pl.RevisitMode.ANY)`; docs/semantics.md, "Blocks and the pipeline"):
the grid may come back to an output block at any later step, and the block
then holds what the earlier visits wrote. JAX's interpret mode raises
"Revisited block" for these kernels, so the reference is numpy. Each kernel
runs on both backends."""

from __future__ import annotations

import pathlib
import sys

import numpy as np
import pytest

import tessera

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

BACKENDS = ("interp", "cpu")


def _rows_sum(x: np.ndarray, rows: int) -> np.ndarray:
    """The sum of the `rows`-row bands of x: what the kernels accumulate."""
    return x.reshape(-1, rows, x.shape[-1]).sum(axis=0)


# ---- The IR (tests/lower/lower_revisit.tsr) ------------------------------------------

@pytest.fixture(scope="module")
def lower_revisit():
    return tessera.Module.load(ROOT / "tests" / "lower" / "lower_revisit.tsr")


@pytest.mark.parametrize("backend", BACKENDS)
def test_inplace_block_accumulates_over_non_consecutive_steps(lower_revisit, backend):
    # grid (2, 3): output block j is entered at steps j and 3 + j
    rng = np.random.default_rng(1)
    x = rng.standard_normal((16, 384)).astype(np.float32)
    o = tessera.run(lower_revisit["inplace"], x, backend=backend)
    # x's block (i, j) goes to output rows 8j..8j+8
    want = np.concatenate([x[0:8, 128 * j:128 * (j + 1)] + x[8:16, 128 * j:128 * (j + 1)]
                           for j in range(3)])
    np.testing.assert_allclose(o, want, rtol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_ragged_edge_block_is_restored_without_its_padding(lower_revisit, backend):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 20, 128)).astype(np.float32)
    o = tessera.run(lower_revisit["ragged"], x, backend=backend)
    np.testing.assert_allclose(o, x[0] + x[1], rtol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_copied_block_accumulates_integers_exactly(lower_revisit, backend):
    # grid (3, 2): output block [0, j] is entered at steps j, 2 + j, 4 + j
    x = np.arange(24 * 256, dtype=np.int32).reshape(24, 256) % 1000
    o = tessera.run(lower_revisit["copied"], x, backend=backend)
    np.testing.assert_array_equal(o, _rows_sum(x, 8))


@pytest.mark.parametrize("backend", BACKENDS)
def test_only_the_revisit_any_output_is_restored(lower_revisit, backend):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((16, 256)).astype(np.float32)
    total, copy = tessera.run(lower_revisit["two_outputs"], x, backend=backend)
    np.testing.assert_allclose(total, _rows_sum(x, 8), rtol=1e-6)
    np.testing.assert_array_equal(copy, x)


@pytest.mark.parametrize("backend", BACKENDS)
def test_each_core_restores_its_own_blocks(backend):
    k = tessera.Module.load(ROOT / "tests" / "lower" / "lower_revisit_cores.tsr")["per_core"]
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 16, 384)).astype(np.float32)
    exe = tessera.compile(k, backend=backend, cores=2, detect_races=True)
    result = exe.run(x)
    assert not result.warnings
    np.testing.assert_allclose(result.outputs[0], x[:, 0:8] + x[:, 8:16], rtol=1e-6)


IMMEDIATE = (ROOT / "tests" / "lower" / "lower_revisit.tsr").read_text().replace(
    " revisit any", "")


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_default_mode_still_reports_the_revisit(backend):
    k = tessera.Module.parse(IMMEDIATE, "immediate.tsr")["copied"]
    x = np.ones((24, 256), np.int32)
    with pytest.raises(tessera.KernelError) as info:
        tessera.run(k, x, backend=backend)
    revisits = [d for d in info.value.diagnostics if d.kind == "revisit"]
    assert revisits, info.value.diagnostics
    assert "output block [0, 0] is revisited at step 2" in revisits[0].message


def test_the_revisit_mode_is_part_of_the_kernel_text(lower_revisit):
    # (and of its canonical bytes: tests/unit/test_canon.c)
    k = lower_revisit["copied"]
    assert "map(%i, %j) -> (0, %j) revisit any" in k.text
    immediate = tessera.Module.parse(IMMEDIATE, "immediate.tsr")["copied"]
    assert "revisit" not in immediate.text


def test_uninitialized_reads_are_still_found_in_a_restored_block():
    # the first visit of a block holds the uninitialized value: a kernel
    # that accumulates without zeroing first reads it
    text = (ROOT / "tests" / "lower" / "lower_revisit.tsr").read_text()
    text = text.replace("  if %first {\n    %z = const 0 : i32[8, 128]\n"
                        "    store %o[:, :], %z\n  }\n", "")
    k = tessera.Module.parse(text, "no_zeroing.tsr")["copied"]
    with pytest.warns(tessera.KernelWarning, match="read of uninitialized memory"):
        result = tessera.compile(k).run(np.ones((24, 256), np.int32))
    kinds = {w.kind for w in result.warnings}
    assert "uninitialized" in kinds, result.warnings


# ---- The JAX bridge --------------------------------------------------------------------

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax.experimental import pallas as pl  # noqa: E402

import tessera.jax as tj  # noqa: E402


def _accumulate(x_ref, o_ref):
    @pl.when(pl.program_id(0) == 0)
    def _():
        o_ref[...] = jnp.zeros_like(o_ref)

    o_ref[...] += x_ref[...]


def _reduction(pipeline_mode, grid=(2, 3), **options):
    """JAX's own test of the mode (tests/pallas/tpu_pallas_test.py): the rows
    of x summed, the reduction axis first in the grid."""
    rows, cols = grid
    return tj.pallas_call(
        _accumulate,
        jax.ShapeDtypeStruct((8, 128 * cols), jnp.float32),
        grid=grid,
        in_specs=[pl.BlockSpec((8, 128), lambda i, j: (i, j))],
        out_specs=pl.BlockSpec((8, 128), lambda i, j: (0, j), pipeline_mode=pipeline_mode),
        **options)


ANY = pl.Buffered(1, revisit=pl.RevisitMode.ANY)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("grid", [(2, 3), (3, 3)])
def test_bridge_revisit_any_accumulates_like_numpy(backend, grid):
    x = np.arange(8 * grid[0] * 128 * grid[1], dtype=np.float32).reshape(8 * grid[0], -1)
    got = np.asarray(_reduction(ANY, grid, backend=backend)(x))
    np.testing.assert_allclose(got, _rows_sum(x, 8), rtol=1e-6)


def test_bridge_translates_revisit_any_into_the_ir():
    x = np.zeros((16, 384), np.float32)
    text = _reduction(ANY).lower_to_tsr(x)
    assert text.count("revisit any") == 1, text
    assert "revisit" not in _reduction(None).lower_to_tsr(x)
    assert "revisit" not in _reduction(
        pl.Buffered(1, revisit=pl.RevisitMode.IMMEDIATE)).lower_to_tsr(x)


@pytest.mark.parametrize("backend", BACKENDS)
def test_bridge_default_mode_reports_the_revisit(backend):
    x = np.ones((16, 384), np.float32)
    with pytest.raises(tj.KernelError) as info:
        _reduction(None, backend=backend)(x)
    assert any(d.kind == "revisit" for d in info.value.diagnostics)


def test_bridge_two_calls_differing_only_in_revisit_mode_are_two_kernels():
    # the bridge's translation cache must not give one call the other's kernel
    x = np.ones((16, 384), np.float32)
    np.testing.assert_array_equal(np.asarray(_reduction(ANY)(x)), np.full((8, 384), 2.0))
    with pytest.raises(tj.KernelError):
        _reduction(None)(x)
    np.testing.assert_array_equal(np.asarray(_reduction(ANY)(x)), np.full((8, 384), 2.0))


def test_bridge_revisit_any_with_double_buffering_is_refused_as_pallas_refuses_it():
    x = np.ones((16, 384), np.float32)
    with pytest.raises(tj.TranslationError, match="not supported with double buffering"):
        _reduction(pl.Buffered(2, revisit=pl.RevisitMode.ANY))(x)


def test_bridge_ignores_revisit_on_inputs_as_pallas_does():
    def k(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2.0
    x = np.ones((16, 128), np.float32)
    f = tj.pallas_call(k, jax.ShapeDtypeStruct((16, 128), jnp.float32), grid=(2,),
                       in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0), pipeline_mode=ANY)],
                       out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)))
    assert "revisit" not in f.lower_to_tsr(x)
    np.testing.assert_array_equal(np.asarray(f(x)), 2 * x)
