"""dot_general in every form the bridge takes (python/tests/
test_bridge_dot_general.py's FORMS, numerics "cpu" and "tpu"): tessera's
Mosaic of the translated kernel compiles with libtpu, or tsr_tpu_emit
refuses it at the kernel's line (never a crash, never a module libtpu
rejects)."""

from __future__ import annotations

import pathlib
import sys

import pytest

import tpu_proof as P

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from test_bridge_dot_general import FORMS, _dot_kernel, _f32, _numpy_dot_general  # noqa: E402

#: forms libtpu does not take from tessera's emission: index -> a substring
#: of tsr_tpu_emit's refusal
REFUSED: dict[int, str] = {}


@pytest.mark.parametrize("numerics", ["cpu", "tpu"])
@pytest.mark.parametrize("i", range(len(FORMS)))
def test_dot_general_form_compiles_for_tpu(i, numerics):
    import jax
    import jax.numpy as jnp
    import tessera
    import tessera.jax as tj
    from tessera.jax import _tpu
    xs, ys, dims = FORMS[i]
    x, y = _f32(xs), _f32(ys, 1)
    shape = _numpy_dot_general(x, y, dims).shape or (1,)
    call = tj.pallas_call(_dot_kernel(dims), jax.ShapeDtypeStruct(shape, jnp.float32),
                          numerics=numerics)
    kernel = tessera.Module.parse(call.lower_to_tsr(x, y), f"<form {i}>").kernels[0]
    try:
        text = kernel.to_mosaic("v5e")
    except tessera.CompileError as e:
        message = "\n".join(d.text for d in e.diagnostics) or str(e)
        assert i in REFUSED and REFUSED[i] in message, message
        assert "test_bridge_dot_general.py" in message  # located at the kernel's line
        return
    assert i not in REFUSED
    tc = _tpu.tpu_call(kernel, chip="v5e", cpu="error")
    assert P.compile_mosaic(text, tc.in_structs, tc.out_structs, kernel.name, "v5e",
                            tc.aliases) > 0
