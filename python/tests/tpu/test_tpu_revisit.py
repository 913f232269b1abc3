"""Revisit mode any on TPU (docs/tpu.md, "Revisit mode"): JAX's own test of
the mode (tests/pallas/tpu_pallas_test.py, a reduction whose output block is
entered again at every row of the grid) through tessera.jax's bridge into
tessera's IR, emitted as Mosaic, has Pallas's window parameters
(`revisit_mode = #tpu.revisit_mode<any>` on a synchronous window) and is
compiled by libtpu; the same kernel with the default mode has no revisit
mode. Run under `flock /work/tpu.lock` (libtpu's lock)."""

from __future__ import annotations

import re

import pytest

import tpu_proof as P

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.experimental import pallas as pl  # noqa: E402

import tessera  # noqa: E402
import tessera.jax as tj  # noqa: E402
from tessera.jax import _tpu  # noqa: E402

X = jax.ShapeDtypeStruct((24, 384), jnp.float32)


def _body(x_ref, o_ref):
    @pl.when(pl.program_id(0) == 0)
    def _():
        o_ref[...] = jnp.zeros_like(o_ref)

    o_ref[...] += x_ref[...]


def _call(pallas_call, pipeline_mode):
    return pallas_call(
        _body, jax.ShapeDtypeStruct((8, 384), jnp.float32), grid=(3, 3),
        in_specs=[pl.BlockSpec((8, 128), lambda i, j: (i, j))],
        out_specs=pl.BlockSpec((8, 128), lambda i, j: (0, j), pipeline_mode=pipeline_mode))


ANY = pl.Buffered(1, revisit=pl.RevisitMode.ANY)


def _pallas_text(pipeline_mode) -> str:
    from tessera.jax import _jax_internal as ji
    exported = jax.export.export(jax.jit(_call(pl.pallas_call, pipeline_mode)),
                                 platforms=["tpu"])(X)
    calls = ji.tpu_custom_calls(exported.mlir_module())
    return ji.mosaic_text(ji.parse_mosaic(calls[0]["body"], serialized=True))


def _tessera_kernel(pipeline_mode):
    tsr = tj.lower_to_tsr(_body, jax.ShapeDtypeStruct((8, 384), jnp.float32),
                          np.zeros(X.shape, X.dtype), grid=(3, 3),
                          in_specs=[pl.BlockSpec((8, 128), lambda i, j: (i, j))],
                          out_specs=pl.BlockSpec((8, 128), lambda i, j: (0, j),
                                                 pipeline_mode=pipeline_mode))
    return tessera.Module.parse(tsr, "<revisit>").kernels[0]


def _windows(text: str) -> str:
    return P.structure(text)["window_params"]


@pytest.mark.parametrize("mode", ["any", "default"])
def test_window_params_are_pallas_s(mode):
    pipeline_mode = ANY if mode == "any" else None
    ours = _windows(_tessera_kernel(pipeline_mode).to_mosaic("v5e"))
    theirs = _windows(_pallas_text(pipeline_mode))
    assert ours == theirs
    assert ("revisit_mode = #tpu.revisit_mode<any>" in ours) == (mode == "any"), ours


@pytest.mark.parametrize("chip", ["v5e", "v6e"])
def test_libtpu_compiles_the_revisit_any_window(chip):
    kernel = _tessera_kernel(ANY)
    text = kernel.to_mosaic(chip)
    assert re.search(r"pipeline_mode = #tpu.pipeline_mode<synchronous>, "
                     r"revisit_mode = #tpu.revisit_mode<any>", text), text
    call = _tpu.tpu_call(kernel, chip=chip, cpu="error")
    assert P.compile_mosaic(text, call.in_structs, call.out_structs, kernel.name, chip,
                            call.aliases, call.bounds) > 0
