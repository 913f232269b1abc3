"""The classic megacore bug through the JAX bridge: a kernel that sums into
one output block along a grid dimension marked "parallel". One TensorCore
computes the right sum; a device with two (megacore) may split the dimension
between them and keep one core's half (docs/semantics.md, "Outputs along a
parallel dimension"). tessera warns (kind parallel_revisit) at the line of
the output's BlockSpec index map, on both backends and whatever the run's
options; with the dimension marked "arbitrary" it says nothing."""

from __future__ import annotations

import pathlib
import sys
import warnings

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
jax = pytest.importorskip("jax")

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.experimental import pallas as pl  # noqa: E402
from jax.experimental.pallas import tpu as pltpu  # noqa: E402

import tessera  # noqa: E402
import tessera.jax as tj  # noqa: E402

F32 = jnp.float32
BACKENDS = ("interp", "cpu")


def line_of(marker: str) -> int:
    """The line of this file that ends with `# marker`."""
    with open(__file__) as f:
        for n, line in enumerate(f, 1):
            if line.rstrip().endswith("# " + marker):
                return n
    raise LookupError(marker)


def sum_kernel(x_ref, o_ref):
    @pl.when(pl.program_id(0) == 0)
    def _():
        o_ref[...] = jnp.zeros_like(o_ref)

    o_ref[...] += x_ref[...]


def sum_rows(semantics: str, **options):
    """Sums the four (8, 128) bands of a (32, 128) array along grid dim 0."""
    return tj.pallas_call(
        sum_kernel, jax.ShapeDtypeStruct((8, 128), F32), grid=(4,),
        in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((8, 128), lambda i: (0, 0)),  # OUT_MAP
        compiler_params=pltpu.CompilerParams(dimension_semantics=(semantics,)),
        **options)


def _x():
    return np.random.default_rng(0).standard_normal((32, 128)).astype(np.float32)


def _run(f, x):
    """f(x) and the tessera warnings it gave (diagnostics)."""
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        out = np.asarray(f(x))
    return out, [w.message.diagnostic for w in record
                 if isinstance(w.message, tessera.KernelWarning) and w.message.diagnostic]


@pytest.mark.parametrize("backend", BACKENDS)
def test_sum_along_a_parallel_dim_warns_at_the_output_index_map(backend):
    x = _x()
    out, diags = _run(sum_rows("parallel", backend=backend), x)
    # one core sums all four bands: the result is right here, not on a megacore
    np.testing.assert_allclose(out, x.reshape(4, 8, 128).sum(0), rtol=1e-5)
    found = [d for d in diags if d.kind == "parallel_revisit"]
    assert len(found) == 1, diags
    d = found[0]
    assert (d.file, d.line) == (__file__, line_of("OUT_MAP")), d
    assert d.severity == "warning" and d.op == "out %o_ref" and d.grid_point == (0,)
    where = f"{pathlib.Path(__file__).name}:{d.line}:{d.col}: warning: "
    assert where in d.text, d.text
    assert "every step along grid dimension 0 (parallel, 4 steps) writes this same " \
           "output block" in d.message
    assert 'mark it "arbitrary"' in d.message


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_same_sum_along_an_arbitrary_dim_is_clean(backend):
    x = _x()
    out, diags = _run(sum_rows("arbitrary", backend=backend), x)
    np.testing.assert_allclose(out, x.reshape(4, 8, 128).sum(0), rtol=1e-5)
    assert diags == [], diags


def test_the_warning_stands_with_shuffled_steps_and_race_detection():
    x = _x()
    right = x.reshape(4, 8, 128).sum(0)
    # Shuffled, step 0 of the walk is some other band: the block is read
    # before the zeroing step writes it (NaN under the default fill), and
    # the zeroing then drops what came before.
    out, diags = _run(sum_rows("parallel", shuffle_parallel=1), x)
    kinds = sorted(d.kind for d in diags)
    assert kinds == ["parallel_revisit", "uninitialized"], diags
    assert not np.allclose(out, right)
    out, diags = _run(sum_rows("parallel", detect_races=True), x)
    assert [d.kind for d in diags] == ["parallel_revisit"], diags
    np.testing.assert_allclose(out, right, rtol=1e-5)


def test_two_cores_give_the_one_warning_not_a_core_conflict_too():
    out, diags = _run(sum_rows("parallel", cores=2), _x())
    assert [d.kind for d in diags] == ["parallel_revisit"], diags


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("chip", ["v4", "v5p"])
def test_target_tpu_on_a_megacore_chip_makes_it_an_error(backend, chip):
    with pytest.raises(tessera.KernelError) as e:
        np.asarray(sum_rows("parallel", backend=backend, target="tpu", chip=chip)(_x()))
    found = [d for d in e.value.diagnostics if d.kind == "parallel_revisit"]
    assert len(found) == 1 and found[0].severity == "error", e.value.diagnostics
    assert (found[0].file, found[0].line) == (__file__, line_of("OUT_MAP"))


@pytest.mark.parametrize("chip", ["v5e", "v6e", "v7x"])
def test_target_tpu_on_a_one_core_device_keeps_it_a_warning(chip):
    x = _x()
    out, diags = _run(sum_rows("parallel", target="tpu", chip=chip), x)
    np.testing.assert_allclose(out, x.reshape(4, 8, 128).sum(0), rtol=1e-5)
    assert [d.kind for d in diags] == ["parallel_revisit"], diags


def test_target_tpu_with_the_dim_arbitrary_runs_on_a_megacore_chip():
    x = _x()
    out, diags = _run(sum_rows("arbitrary", target="tpu", chip="v5p"), x)
    np.testing.assert_allclose(out, x.reshape(4, 8, 128).sum(0), rtol=1e-5)
    assert diags == [], diags
