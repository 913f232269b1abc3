"""Dynamic grid extents on TPU (docs/tpu.md, "Dynamic grids"): tessera's
Mosaic gives a dynamic dim MLIR's dynamic size in `iteration_bounds` and
reads its extent with `tpu.iteration_bound`, as Pallas does, and
`tessera.jax.tpu_call` passes each extent as a leading scalar operand of
the `tpu_custom_call`, before the kernel's own operands; libtpu compiles the
result for every chip, and the same call runs in tessera on CPU."""

from __future__ import annotations

import re

import numpy as np
import pytest

import tpu_proof as P

DYNAMIC = "tests/lower/lower_dynamic_grid.tsr"

#: two dynamic dims, num_programs of both, core_id (computed from the
#: extents on v5p's two cores), an aliased output (numbered after the extents)
TWO = """
kernel @two
  grid(%m, %n) semantics(parallel, arbitrary)
  prefetch %m: i32
  prefetch %n: i32
  in %x: f32[64, 1024] vmem block[8, 128] map(%i, %j) -> (%i, %j)
  in %acc: f32[64, 128] vmem block[8, 128] map(%i, %j) -> (%i, 0)
  out %o: f32[64, 128] vmem block[8, 128] map(%i, %j) -> (%i, 0) alias %acc
{
  %j = program_id 1 : i32
  %zero = const 0 : i32
  %first = eq %j, %zero : i1
  if %first {
    %a0 = load %acc[:, :] : f32[8, 128]
    store %o[:, :], %a0
  }
  %c = core_id : i32
  %np = num_programs 0 : i32
  %nq = num_programs 1 : i32
  %t = mul %np, %nq : i32
  %u = add %t, %c : i32
  %f = convert %u : f32
  %b = broadcast %f : f32[8, 128]
  %v = load %x[:, :] : f32[8, 128]
  %a = load %o[:, :] : f32[8, 128]
  %s = add %v, %a : f32[8, 128]
  %w = add %s, %b : f32[8, 128]
  store %o[:, :], %w
}
"""


def _two():
    import tessera
    return tessera.Module.parse(TWO, "two.tsr")["two"]


@pytest.mark.parametrize("chip", P.CHIPS)
def test_dynamic_grid_kernel_compiles_for_chip(chip):
    from tessera.jax import _jax_internal as ji
    from tessera.jax import _tpu
    for kernel in (P.kernel(DYNAMIC, "dynamic_grid"), _two()):
        call = _tpu.tpu_call(kernel, chip=chip, cpu="error")
        text = kernel.to_mosaic(chip)
        assert "-9223372036854775808" in text and "tpu.iteration_bound" in text
        ji.compile_for_device(call, call.in_structs, ji.tpu_device(chip))


def test_the_extents_lead_the_calls_operands():
    import jax
    from tessera.jax import _tpu
    call = _tpu.tpu_call(_two(), chip="v5p", cpu="error")
    assert call.bounds == (0, 1)
    exported = jax.export.export(jax.jit(call), platforms=["tpu"])(*call.in_structs)
    text = exported.mlir_module()
    line = next(t for t in text.splitlines() if "stablehlo.custom_call @tpu_custom_call" in t)
    # %m, %n as extents, then the kernel's %m, %n, %x, %acc
    types = re.search(r"\) -> ", line) and line[line.rindex(": (") + 3:line.rindex(") -> ")]
    assert types.split(", ") == ["tensor<i32>"] * 4 + ["tensor<64x1024xf32>",
                                                       "tensor<64x128xf32>"], line
    # the alias of %acc counts the two extents before it
    assert "output_operand_aliases" in line and "operand_index = 5" in line, line


def test_dynamic_grid_runs_in_tessera_on_cpu():
    import jax.numpy as jnp
    import tessera.jax as tj
    rng = np.random.default_rng(7)
    x = rng.standard_normal((64, 1024)).astype(np.float32)
    acc = rng.standard_normal((64, 128)).astype(np.float32)
    m, n = 5, 3
    got = np.asarray(tj.tpu_call(_two(), chip="v5e")(np.int32(m), np.int32(n), x, jnp.asarray(acc)))
    want = acc.copy()
    for i in range(m):
        for j in range(n):
            want[8 * i:8 * i + 8] += x[8 * i:8 * i + 8, 128 * j:128 * j + 128] + m * n
    np.testing.assert_allclose(got, want, rtol=1e-6)
