"""Device-wide scoped buffers on TPU (docs/tpu.md, "Not supported"): an HBM
or ANY buffer of `pl.run_scoped` is a `memref.alloca` in HBM in the module
Pallas makes, which libtpu refuses; tessera's emitter refuses the same
kernel, located at its `scoped` op. When libtpu takes Pallas's module, the
first test fails, and the emitter should emit the buffer instead."""

from __future__ import annotations

import pytest

import tpu_proof as P

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax.experimental import pallas as pl  # noqa: E402
from jax.experimental.pallas import tpu as pltpu  # noqa: E402

MESSAGE = "Cannot allocate ref in non-VMEM/SMEM memory space using memref.alloca"


def _pallas_core_map(space):
    mesh = pltpu.TensorCoreMesh(axis_name="x", num_cores=2)

    def f(x):
        y = jnp.zeros_like(x)

        def inner(refs):
            x_ref, y_ref = refs

            @pl.core_map(mesh)
            def _():
                def copy(buf):
                    pltpu.sync_copy(x_ref, buf)
                    pltpu.sync_copy(buf, y_ref)
                pl.run_scoped(copy, space(x_ref.shape, x_ref.dtype))
        _, y = pl.run_state(inner)((x, y))
        return y
    return f


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("space", [pltpu.HBM, pl.ANY], ids=["HBM", "ANY"])
@pytest.mark.parametrize("chip", ["v5p", "v7x"])
def test_libtpu_refuses_pallas_module_of_an_hbm_run_scoped(chip, space):
    from tessera.jax import _jax_internal as ji
    x = jax.ShapeDtypeStruct((16, 128), jnp.int32)
    with ji._chip_context(chip, 2):
        with pytest.raises(Exception, match=MESSAGE):
            ji.compile_for_device(_pallas_core_map(space), (x,), ji.tpu_device(chip))


@pytest.mark.parametrize("chip", P.CHIPS)
def test_tessera_refuses_it_located(chip):
    import tessera
    k = P.kernel("tests/diagnostics/ok/scoped_hbm_handoff.tsr", "scoped_hbm_handoff")
    with pytest.raises(tessera.TesseraError) as info:
        k.to_mosaic(chip)
    assert "scoped_hbm_handoff.tsr:12:" in str(info.value)
    assert "which Mosaic cannot allocate in a kernel" in str(info.value)
