"""Dynamic grid bounds through tessera.jax: a grid extent that is a traced
value (under jax.jit) or an array becomes a leading i32 prefetch operand
the grid line names, read when the run starts (docs/jax.md, "What is
translated"; docs/semantics.md, "The grid"). Expected values are computed
with numpy in the test; both backends, eager and under jax.jit."""

from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax.experimental import pallas as pl  # noqa: E402
from jax.experimental.pallas import tpu as pltpu  # noqa: E402

import tessera.jax as tj  # noqa: E402

BACKENDS = ["interp", "cpu"]
ROWS, COLS = 64, 256


def _row_sums(x_ref, o_ref):
    """o[i] = num_programs(1) * sum over the j steps of x's (i, j) blocks."""
    j = pl.program_id(1)

    @pl.when(j == 0)
    def _():
        o_ref[...] = jnp.zeros_like(o_ref)

    n = pl.num_programs(1).astype(jnp.float32)
    o_ref[...] += x_ref[...] * n


def _call(steps, backend, **options):
    return tj.pallas_call(
        _row_sums, jax.ShapeDtypeStruct((16, 128), jnp.float32),
        grid=(2, steps),
        in_specs=[pl.BlockSpec((8, 128), lambda i, j: (i, j))],
        out_specs=pl.BlockSpec((8, 128), lambda i, j: (i, 0)),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary")),
        backend=backend, **options)


def _want(x, steps):
    o = np.zeros((16, 128), np.float32)
    for j in range(steps):
        o += x[:, 128 * j:128 * (j + 1)] * np.float32(steps)
    return o


def _x():
    return np.random.default_rng(7).integers(-50, 50, (16, 1024)).astype(np.float32)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("steps", [1, 3, 8])
def test_traced_extent_under_jit(backend, steps):
    x = _x()
    f = jax.jit(lambda x, n: _call(n, backend)(x))
    got = np.asarray(f(x, np.int32(steps)))
    np.testing.assert_array_equal(got, _want(x, steps))


@pytest.mark.parametrize("backend", BACKENDS)
def test_one_jit_function_runs_several_extents(backend):
    # one trace, one translation: the extent is read at each run
    x = _x()
    f = jax.jit(lambda x, n: _call(n, backend)(x))
    for steps in (2, 5, 1):
        np.testing.assert_array_equal(np.asarray(f(x, np.int32(steps))), _want(x, steps))


@pytest.mark.parametrize("backend", BACKENDS)
def test_array_extent_eagerly(backend):
    # An array bound (not a Python int) is dynamic in Pallas too.
    x = _x()
    got = np.asarray(_call(jnp.int32(4), backend)(x))
    np.testing.assert_array_equal(got, _want(x, 4))


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_tsr_names_the_extent_in_the_grid_line(backend):
    text = _call(jnp.int32(3), backend).lower_to_tsr(_x())
    assert "grid(2, %g1)" in text and "prefetch %g1: i32" in text, text


@pytest.mark.parametrize("backend", BACKENDS)
def test_zero_extent_runs_no_step(backend):
    # Every output element is then unwritten (the uninitialized value, zero
    # here): the grid ran no step.
    x = _x()
    got = np.asarray(_call(jnp.int32(0), backend, uninit="zero")(x))
    np.testing.assert_array_equal(got, np.zeros((16, 128), np.float32))


@pytest.mark.parametrize("backend", BACKENDS)
def test_negative_extent_is_a_kernel_error(backend):
    with pytest.raises(tj.KernelError) as info:
        _call(jnp.int32(-2), backend)(_x())
    assert "extent" in str(info.value) and "-2" in str(info.value), str(info.value)


@pytest.mark.parametrize("backend", BACKENDS)
def test_dynamic_parallel_dim_shared_by_two_cores(backend):
    # The cores' shares of a dynamic parallel dim come from the run's extent.
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] * pl.num_programs(0).astype(jnp.float32) + \
            pl.program_id(0).astype(jnp.float32)

    def call(n, x):
        return tj.pallas_call(
            kernel, jax.ShapeDtypeStruct((ROWS, 128), jnp.float32), grid=(n,),
            in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
            out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
            compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)),
            backend=backend, cores=2, uninit="zero")(x)

    x = np.random.default_rng(3).integers(-9, 9, (ROWS, 128)).astype(np.float32)
    for steps in (5, 8):
        got = np.asarray(jax.jit(call)(np.int32(steps), x))
        want = np.zeros_like(x)
        for i in range(steps):
            want[8 * i:8 * i + 8] = x[8 * i:8 * i + 8] * steps + i
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_dynamic_extent_with_scalar_prefetch(backend):
    # The bound comes before the scalar-prefetch operands, which index maps
    # still see: a gather of rows by a table, over a dynamic number of rows.
    def kernel(idx_ref, x_ref, o_ref):
        o_ref[...] = x_ref[...] + idx_ref[pl.program_id(0)].astype(jnp.float32)

    def call(n, idx, x):
        return tj.pallas_call(
            kernel, jax.ShapeDtypeStruct((ROWS, 128), jnp.float32),
            grid_spec=pltpu.PrefetchScalarGridSpec(
                num_scalar_prefetch=1, grid=(n,),
                in_specs=[pl.BlockSpec((8, 128), lambda i, idx: (idx[i], 0))],
                out_specs=pl.BlockSpec((8, 128), lambda i, idx: (i, 0))),
            backend=backend, uninit="zero")(idx, x)

    x = np.random.default_rng(4).integers(-9, 9, (ROWS, 128)).astype(np.float32)
    idx = np.array([7, 2, 5, 0, 1, 3, 6, 4], np.int32)
    steps = 6
    got = np.asarray(jax.jit(call)(np.int32(steps), idx, x))
    want = np.zeros_like(x)
    for i in range(steps):
        want[8 * i:8 * i + 8] = x[8 * idx[i]:8 * idx[i] + 8] + idx[i]
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_dynamic_extent_with_an_aliased_input(backend):
    # Pallas numbers input_output_aliases without the dynamic bounds.
    def kernel(s_ref, x_ref, o_ref):
        o_ref[...] = x_ref[...] + s_ref[0].astype(jnp.float32) + \
            pl.num_programs(0).astype(jnp.float32)

    def call(n, s, x):
        return tj.pallas_call(
            kernel, jax.ShapeDtypeStruct(x.shape, x.dtype),
            grid_spec=pltpu.PrefetchScalarGridSpec(
                num_scalar_prefetch=1, grid=(n,),
                in_specs=[pl.BlockSpec(x.shape, lambda i, s: (0, 0))],
                out_specs=pl.BlockSpec(x.shape, lambda i, s: (0, 0))),
            input_output_aliases={1: 0}, backend=backend)(s, x)

    x = np.random.default_rng(5).integers(-9, 9, (16, 128)).astype(np.float32)
    s = np.array([3], np.int32)
    got = np.asarray(jax.jit(call)(np.int32(4), s, x))
    # the input block is read once, before the first step: x + 3 + 4
    np.testing.assert_array_equal(got, x + 3 + 4)


@pytest.mark.parametrize("backend", BACKENDS)
def test_named_grid_static_and_dynamic(backend):
    # A named grid dim is (name, size): static sizes stay static, a traced
    # one is a dynamic bound.
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] + jnp.asarray(pl.num_programs(1), jnp.float32)

    def call(n, x):
        return tj.pallas_call(
            kernel, jax.ShapeDtypeStruct((16, 256), jnp.float32),
            grid=(("i", 2), ("j", n)),
            in_specs=[pl.BlockSpec((8, 128), lambda i, j: (i, j))],
            out_specs=pl.BlockSpec((8, 128), lambda i, j: (i, j)),
            backend=backend)(x)

    x = np.random.default_rng(6).integers(-9, 9, (16, 256)).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(call(2, x)), x + 2)
    assert "grid(2, 2)" in tj.pallas_call(
        lambda x_ref, o_ref: None, jax.ShapeDtypeStruct((16, 256), jnp.float32),
        grid=(("i", 2), ("j", 2)),
        in_specs=[pl.BlockSpec((8, 128), lambda i, j: (i, j))],
        out_specs=pl.BlockSpec((8, 128), lambda i, j: (i, j)),
        backend=backend).lower_to_tsr(x)
    np.testing.assert_array_equal(np.asarray(jax.jit(call)(np.int32(2), x)), x + 2)


@pytest.mark.parametrize("backend", BACKENDS)
def test_extents_overflowing_the_step_count_are_a_kernel_error(backend):
    def kernel(o_ref):
        o_ref[...] = jnp.zeros_like(o_ref)

    n = jnp.int32(2**31 - 1)
    with pytest.raises(tj.KernelError) as info:
        tj.pallas_call(kernel, jax.ShapeDtypeStruct((8, 128), jnp.float32), grid=(n, n, n),
                       out_specs=pl.BlockSpec((8, 128), lambda i, j, k: (0, 0)),
                       backend=backend)()
    assert "2^63 steps" in str(info.value), str(info.value)
