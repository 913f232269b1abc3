"""Rank-0 arrays (and Python scalars) as a Pallas kernel's inputs and outputs
through tessera.jax: a rank-0 operand is a rank-0 ref, its own block at every
grid step (docs/jax.md, "What is translated"). Expected values are computed
with numpy in the test; both backends."""

from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax.experimental import pallas as pl  # noqa: E402
from jax.experimental.pallas import tpu as pltpu  # noqa: E402

import tessera.jax as tj  # noqa: E402

BACKENDS = ["interp", "cpu"]


def _scale_and_sum(x_ref, a_ref, o_ref, s_ref):
    o_ref[...] = a_ref[...] * x_ref[...]
    s_ref[...] = jnp.sum(a_ref[...]) + x_ref[...]


@pytest.mark.parametrize("backend", BACKENDS)
def test_rank0_input_and_output_in_vmem(backend):
    a = np.random.default_rng(1).standard_normal((8, 128)).astype(np.float32)
    call = tj.pallas_call(_scale_and_sum,
                          (jax.ShapeDtypeStruct((8, 128), jnp.float32),
                           jax.ShapeDtypeStruct((), jnp.float32)), backend=backend)
    out, s = call(np.float32(1.75), a)
    assert np.shape(s) == ()
    np.testing.assert_allclose(np.asarray(out), a * np.float32(1.75), rtol=1e-6)
    np.testing.assert_allclose(float(s), float(a.sum(dtype=np.float32)) + 1.75, rtol=1e-5)
    assert "in %x_ref: f32 vmem" in call.lower_to_tsr(np.float32(1.75), a)


@pytest.mark.parametrize("backend", BACKENDS)
def test_python_scalar_operands_take_jaxs_dtypes(backend):
    """A Python float and int are rank-0 f32 and i32 operands (as JAX
    canonicalizes them with x64 off), inside and outside jax.jit."""
    def kernel(x_ref, n_ref, o_ref):
        o_ref[...] = x_ref[...] * n_ref[...].astype(jnp.float32)

    with tj.interpret(backend=backend):
        call = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((), jnp.float32))
        eager = call(2.5, 3)
        jitted = jax.jit(call)(2.5, 3)
        traced = jax.jit(lambda x, n: call(x, n))(jnp.float32(-1.5), jnp.int32(4))
    assert float(eager) == 7.5
    assert float(jitted) == 7.5
    assert float(traced) == -6.0


@pytest.mark.parametrize("backend", BACKENDS)
def test_rank0_smem_operands_across_a_grid(backend):
    """Rank-0 SMEM input and output with a grid: every step sees the whole
    rank-0 array; the output keeps what the last step wrote, and an output
    read and written at each step accumulates."""
    rng = np.random.default_rng(5)
    a = rng.integers(-50, 50, (32, 128)).astype(np.int32)

    def kernel(n_ref, a_ref, o_ref, acc_ref):
        i = pl.program_id(0)

        @pl.when(i == 0)
        def _():
            acc_ref[...] = n_ref[...]
        acc_ref[...] += jnp.sum(a_ref[...])
        o_ref[...] = a_ref[...] + n_ref[...]

    with tj.interpret(backend=backend):
        call = pl.pallas_call(
            kernel, grid=(4,),
            in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM),
                      pl.BlockSpec((8, 128), lambda i: (i, 0))],
            out_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0)),
                       pl.BlockSpec(memory_space=pltpu.SMEM)],
            out_shape=(jax.ShapeDtypeStruct((32, 128), jnp.int32),
                       jax.ShapeDtypeStruct((), jnp.int32)))
        before = tj.cache_info()["runs"]
        out, acc = call(np.int32(9), a)
        assert tj.cache_info()["runs"] > before
    np.testing.assert_array_equal(np.asarray(out), a + 9)
    assert int(acc) == 9 + int(a.sum())
