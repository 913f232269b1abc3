"""tpu_compile_check (docs/jax.md, "Fails where the TPU fails"): a
pallas_call's kernel compiled by libtpu for the chip, deviceless, as the
TPU proofs compile tessera's modules; Mosaic's refusal is an error with
target="tpu" and a collected warning without it. Needs libtpu (conftest.py)."""

from __future__ import annotations

import inspect
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl

import tessera
import tessera.jax as tj


def _copy(x_ref, o_ref):
    o_ref[...] = x_ref[...]


def int2_copy(**opts):
    # A 2-bit block loaded and stored as is: tessera emits it, Pallas's own
    # module of it fails the same way in libtpu ("layout too complicated";
    # tpu/test_tpu_narrow_dtypes.py). When libtpu takes it, pick another.
    x = jnp.zeros((128, 256), jnp.int2)
    f = tj.pallas_call(_copy, jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(4,),
                       in_specs=[pl.BlockSpec((32, 256), lambda i: (i, 0))],
                       out_specs=pl.BlockSpec((32, 256), lambda i: (i, 0)),
                       chip="v6e", tpu_compile_check=True, **opts)
    return f(x)   # the call


def _call_line() -> int:
    lines, start = inspect.getsourcelines(int2_copy)
    return start + next(i for i, s in enumerate(lines) if "# the call" in s)


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_mosaic_refusal_is_a_located_error_with_target_tpu(backend):
    with pytest.raises(tessera.CompileError) as e:
        int2_copy(backend=backend, target="tpu")
    (d,) = e.value.diagnostics
    assert d.kind == "tpu-compile" and d.severity == "error"
    assert "layout too complicated" in d.message and "v6e" in d.message
    # libtpu names no location for this op: the kernel's call is given
    assert d.file == __file__ and d.line == _call_line(), d


def test_mosaic_refusal_is_a_collected_warning_without_target():
    tj.clear_collected_warnings()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = int2_copy(warnings="collect")
        int2_copy(warnings="collect")
    assert np.asarray(y).shape == (128, 256)
    found = [t for t in tj.collected_warnings() if "tpu-compile" in t]
    assert len(found) == 1 and "layout too complicated" in found[0], tj.collected_warnings()
    assert f"{__file__}:{_call_line()}:" in found[0]


def test_a_kernel_libtpu_compiles_passes():
    x = jnp.ones((64, 1024), jnp.float32)
    tj.clear_collected_warnings()
    y = tj.pallas_call(_copy, jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(8,),
                       in_specs=[pl.BlockSpec((8, 1024), lambda i: (i, 0))],
                       out_specs=pl.BlockSpec((8, 1024), lambda i: (i, 0)),
                       target="tpu", chip="v5e", tpu_compile_check=True)(x)
    np.testing.assert_array_equal(np.asarray(y), np.asarray(x))
    assert not tj.collected_warnings()
