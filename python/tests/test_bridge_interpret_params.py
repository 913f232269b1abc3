"""tessera as a drop-in for JAX's TPU interpret mode: a pallas_call's JAX
`pltpu.InterpretParams` is honoured under `tessera.jax.interpret()` (with
tessera's own options winning), faults raise what JAX's interpret mode
raises (its exception type and phrase, then tessera's located diagnostic),
and warnings JAX would not give are collected instead of raised. Each
expectation is JAX's own behaviour, computed here by running the same
kernel under JAX's interpret mode; both backends."""

from __future__ import annotations

import pathlib
import re
import sys
import warnings

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
jax = pytest.importorskip("jax")

import dataclasses  # noqa: E402

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.experimental import pallas as pl  # noqa: E402
from jax.experimental.pallas import tpu as pltpu  # noqa: E402

import tessera  # noqa: E402
import tessera.jax as tj  # noqa: E402
from tessera.jax import _params  # noqa: E402

mosaic_interpret = pytest.importorskip(
    "jax._src.pallas.mosaic.interpret.interpret_pallas_call")

F32 = jnp.float32
BACKENDS = ["interp", "cpu"]

pytestmark = pytest.mark.filterwarnings("error")  # as JAX's own suites run


def jax_error(fn) -> BaseException:
    """What JAX's own interpret mode raises for `fn()` (outside tessera)."""
    try:
        jax.block_until_ready(fn())
    except Exception as e:  # noqa: BLE001 - compared below
        pltpu.reset_tpu_interpret_mode_state()
        return e
    raise AssertionError("JAX's interpret mode raised nothing")


def tessera_error(fn, **options) -> BaseException:
    with tj.interpret(**options):
        try:
            jax.block_until_ready(fn())
        except Exception as e:  # noqa: BLE001 - compared below
            return e
    raise AssertionError("tessera raised nothing")


# ---- the mapping of InterpretParams' fields ------------------------------------------

def test_params_every_field_of_the_installed_jax_is_mapped_or_named():
    names = {f.name for f in dataclasses.fields(pltpu.InterpretParams)}
    assert names <= set(_params._FIELDS), names - set(_params._FIELDS)
    options, notes = _params.options_of(pltpu.InterpretParams())
    # JAX's defaults are tessera's defaults, with the bridge's own: JAX's
    # order of the parallel steps (seed 0) and its refusal of HBM in
    # run_scoped
    assert options == {"detect_races": False, "uninit": "nan", "dma_mode": "lazy",
                       "jax_random_seed": 0, "jax_refuse_scoped_hbm": True}
    assert notes == []


def test_params_fields_map_to_tessera_options():
    options, notes = _params.options_of(pltpu.InterpretParams(
        detect_races=True, uninitialized_memory="zero", num_cores_or_threads=2,
        dma_execution_mode="eager"))
    assert options == {"detect_races": True, "uninit": "zero", "cores": 2, "dma_mode": "eager",
                       "jax_random_seed": 0, "jax_refuse_scoped_hbm": True}
    assert notes == []
    assert _params.options_of(pltpu.InterpretParams(dma_execution_mode="on_wait"))[0][
        "dma_mode"] == "lazy"
    _, notes = _params.options_of(pltpu.InterpretParams(
        vector_clock_size=8))
    assert len(notes) == 1 and "no meaning" in notes[0]
    options, notes = _params.options_of(pltpu.InterpretParams(
        out_of_bounds_reads="uninitialized", buffer_bounds="padded",
        skip_floating_point_ops=True))
    assert options["oob_reads_uninit"] is True and options["padded"] is True
    assert options["jax_skip_float_ops"] is True
    assert notes == []


def uninit_kernel(o_ref, s_ref):
    o_ref[...] = s_ref[...]


def uninit_call(interpret):
    return pl.pallas_call(uninit_kernel, jax.ShapeDtypeStruct((8, 128), F32),
                          scratch_shapes=[pltpu.VMEM((8, 128), F32)], interpret=interpret)()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fill", ["nan", "zero"])
def test_params_uninitialized_memory_is_honoured(backend, fill):
    want = np.asarray(uninit_call(pltpu.InterpretParams(uninitialized_memory=fill)))
    with tj.interpret(backend=backend):
        got = np.asarray(uninit_call(pltpu.InterpretParams(uninitialized_memory=fill)))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(got[~np.isnan(want)], want[~np.isnan(want)])


@pytest.mark.parametrize("backend", BACKENDS)
def test_params_tessera_options_win(backend):
    with tj.interpret(backend=backend, uninit="nan"):
        got = np.asarray(uninit_call(pltpu.InterpretParams(uninitialized_memory="zero")))
    assert np.isnan(got).all()


def test_params_unhonoured_field_is_reported_once():
    def k(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2.0
    x = np.ones((8, 128), np.float32)
    tj.clear_collected_warnings()
    _params._warned.clear()
    params = pltpu.InterpretParams(vector_clock_size=64)
    with tj.interpret():
        for _ in range(2):
            y = pl.pallas_call(k, jax.ShapeDtypeStruct((8, 128), F32), interpret=params)(x)
            np.testing.assert_array_equal(np.asarray(y), 2 * x)
    notes = [t for t in tj.collected_warnings() if "vector_clock_size" in t]
    assert len(notes) == 1 and tj.collected_warnings()[notes[0]] == 1


# ---- errors as JAX raises them -------------------------------------------------------

def oob_index_kernel(i_ref, x_ref, o_ref):
    o_ref[0] = x_ref[i_ref[0]]


def oob_index_call():
    return pl.pallas_call(
        oob_index_kernel, jax.ShapeDtypeStruct((1,), jnp.int32),
        in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM)] * 2,
        out_specs=pl.BlockSpec(memory_space=pltpu.SMEM),
        interpret=pltpu.InterpretParams())(jnp.array([7], jnp.int32),
                                           jnp.arange(5, dtype=jnp.int32))


def test_errors_out_of_bounds_read_is_jax_index_error():
    want = jax_error(oob_index_call)
    assert "IndexError: Out-of-bounds read" in str(want)
    got = tessera_error(oob_index_call)
    assert isinstance(got, IndexError) and isinstance(got, tj.KernelError)
    assert isinstance(got, type(want))  # JAX's wrapper of a host callback's error
    assert str(got).startswith("Out-of-bounds read")
    assert f"{pathlib.Path(__file__).name}:" in str(got)  # tessera's located diagnostic
    assert got.diagnostics[0].kind == "out_of_bounds"


def dma_write_first_kernel(x_ref, o_ref, s_ref):
    pltpu.sync_copy(x_ref.at[0], s_ref.at[10])  # the first fault: a write
    o_ref[0, :] = s_ref[10, :]


def dma_write_first_call():
    return jax.jit(lambda x: pl.pallas_call(
        dma_write_first_kernel, jax.ShapeDtypeStruct((8, 128), F32),
        in_specs=[pl.BlockSpec(memory_space=pltpu.HBM)],
        out_specs=pl.BlockSpec(memory_space=pltpu.VMEM),
        scratch_shapes=[pltpu.VMEM((10, 128), F32)],
        interpret=pltpu.InterpretParams())(x))(jnp.zeros((8, 128), F32))


def test_errors_first_fault_in_program_order_is_the_dma_write():
    # Both the DMA's destination and the later load are out of bounds with
    # static indices: JAX reports the write, which runs first.
    want = jax_error(dma_write_first_call)
    assert "Out-of-bounds write" in str(want)
    got = tessera_error(dma_write_first_call)
    assert "Out-of-bounds write" in str(got) and "Out-of-bounds read" not in str(got)
    assert "DMA's destination" in str(got)


def test_errors_static_out_of_bounds_on_cpu_backend_is_found_when_it_runs():
    # The cpu backend's compiled code checks its indices: the static index
    # is found when it runs, the write first, as JAX finds it.
    want = jax_error(dma_write_first_call)
    got = tessera_error(dma_write_first_call, backend="cpu")
    assert not isinstance(got, tessera.CompileError)
    assert isinstance(got, type(want))
    assert re.match("(INTERNAL: )?Out-of-bounds write", str(got)), str(got)
    assert "DMA's destination" in str(got)


@pytest.mark.parametrize("backend", BACKENDS)
def test_errors_dynamic_out_of_bounds_read_as_jax(backend):
    want = jax_error(oob_index_call)
    got = tessera_error(oob_index_call, backend=backend)
    assert isinstance(got, IndexError) and isinstance(got, type(want))
    assert str(got).startswith("Out-of-bounds read of %x_ref"), str(got)
    assert "index 7 out of bounds for dimension 0 of %x_ref (shape [5])" in str(got)
    assert got.diagnostics[0].line > 0 and got.diagnostics[0].buffer == "x_ref"
    # in bounds: JAX's result
    def ok():
        return pl.pallas_call(
            oob_index_kernel, jax.ShapeDtypeStruct((1,), jnp.int32),
            in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM)] * 2,
            out_specs=pl.BlockSpec(memory_space=pltpu.SMEM),
            interpret=pltpu.InterpretParams())(jnp.array([3], jnp.int32),
                                               jnp.arange(5, dtype=jnp.int32) * 7)
    want_ok = np.asarray(ok())
    with tj.interpret(backend=backend):
        np.testing.assert_array_equal(np.asarray(ok()), want_ok)


def block_index_call(offset, params=None):
    return jax.jit(lambda x: pl.pallas_call(
        lambda x_ref, o_ref: o_ref.__setitem__(..., x_ref[...] + 1.0),
        jax.ShapeDtypeStruct((16, 128), F32), grid=(4,),
        in_specs=[pl.BlockSpec((4, 128), lambda i: (i + offset, 0))],
        out_specs=pl.BlockSpec((4, 128), lambda i: (i, 0)),
        interpret=params or pltpu.InterpretParams())(x))(
            jnp.arange(16 * 128, dtype=F32).reshape(16, 128))


@pytest.mark.parametrize("backend", BACKENDS)
def test_errors_block_index_out_of_range_as_jax(backend):
    want = jax_error(lambda: block_index_call(1))
    m = re.search(r'Out-of-bounds block index .* for input "(\w+)" in iteration \(3,\)',
                  str(want))
    assert m, str(want)
    got = tessera_error(lambda: block_index_call(1), backend=backend)
    # the input named by the kernel's parameter, as JAX names it
    assert m.group(1) == "x_ref"
    assert re.search(r'Out-of-bounds block index \[4, 0\] for input "x_ref" in iteration '
                     r'\(3,\)', str(got)), str(got)
    assert isinstance(got, type(want))


# ---- out_of_bounds_reads="uninitialized", buffer_bounds="padded" ----------------------
# (docs/semantics.md, "Out-of-bounds accesses"): both backends honour them
# (the cpu backend's compiled code masks the lanes outside); each
# expectation is JAX's result for the same kernel.

def oob_reads_kernel(x_ref, o_ref, d_ref, sem):
    o_ref[...] = x_ref[pl.ds(jnp.int32(4), 8), :]
    pltpu.async_copy(x_ref.at[pl.ds(jnp.int32(2), 8)], d_ref, sem).wait()


def oob_reads_call(params):
    x = jnp.arange(8 * 128, dtype=F32).reshape(8, 128)
    return jax.jit(lambda x: pl.pallas_call(
        oob_reads_kernel, [jax.ShapeDtypeStruct((8, 128), F32)] * 2,
        in_specs=[pl.BlockSpec(memory_space=pltpu.VMEM)],
        out_specs=[pl.BlockSpec(memory_space=pltpu.VMEM)] * 2,
        scratch_shapes=[pltpu.SemaphoreType.DMA], interpret=params)(x))(x)


def same_with_nans(got, want):
    got, want = np.asarray(got), np.asarray(want)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(got[~np.isnan(want)], want[~np.isnan(want)])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fill", ["nan", "zero"])
def test_out_of_bounds_reads_uninitialized_as_jax(fill, backend):
    params = pltpu.InterpretParams(out_of_bounds_reads="uninitialized",
                                   uninitialized_memory=fill)
    want = oob_reads_call(params)
    pltpu.reset_tpu_interpret_mode_state()
    assert np.isnan(np.asarray(want[0])[4:]).all() == (fill == "nan")
    tj.clear_collected_warnings()
    _params._warned.clear()
    with tj.interpret(backend=backend):
        got = oob_reads_call(params)
    for g, w in zip(got, want):
        same_with_nans(g, w)
    warned = tj.collected_warnings()
    assert any("read reaches outside %x_ref" in t for t in warned)
    assert not any("not honoured" in t for t in warned)
    # without it, JAX's error and tessera's
    strict = pltpu.InterpretParams()
    want_e = jax_error(lambda: oob_reads_call(strict))
    got_e = tessera_error(lambda: oob_reads_call(strict), backend=backend)
    assert "Out-of-bounds read" in str(want_e)
    assert re.match("(INTERNAL: )?Out-of-bounds read of %x_ref", str(got_e)), str(got_e)


@pytest.mark.parametrize("backend", BACKENDS)
def test_out_of_bounds_reads_uninitialized_input_block_as_jax(backend):
    params = pltpu.InterpretParams(out_of_bounds_reads="uninitialized")
    want = block_index_call(1, params)
    pltpu.reset_tpu_interpret_mode_state()
    with tj.interpret(backend=backend):
        got = block_index_call(1, params)
    same_with_nans(got, want)
    assert np.isnan(np.asarray(got)).any()  # the block past the array's end


@pytest.mark.parametrize("fill", ["nan", "zero"])
def test_out_of_bounds_reads_uninitialized_same_bits_on_both_backends(fill):
    # The compiled code gives the interpreter's outputs bit for bit (NaNs'
    # payloads too) and the same warnings.
    params = pltpu.InterpretParams(out_of_bounds_reads="uninitialized",
                                   uninitialized_memory=fill)
    got, warned = {}, {}
    for backend in BACKENDS:
        tj.clear_collected_warnings()
        with tj.interpret(backend=backend):
            got[backend] = [np.asarray(g) for g in oob_reads_call(params)]
        warned[backend] = sorted(tj.collected_warnings())
    for a, b in zip(got["interp"], got["cpu"]):
        assert a.tobytes() == b.tobytes()
    assert warned["interp"] == warned["cpu"] and warned["cpu"]


def padded_kernel(i_ref, x_ref, o_ref, s_ref):
    s_ref[...] = jnp.zeros(s_ref.shape, s_ref.dtype)
    i, j = i_ref[0], pl.multiple_of(i_ref[1], 128)
    s_ref[pl.ds(i, 8), pl.ds(j, 128)] = x_ref[...]   # rows/cols past (10, 150)
    o_ref[...] = s_ref[pl.ds(i, 8), pl.ds(j, 128)]


def padded_call(i, params):
    x = jnp.arange(8 * 128, dtype=F32).reshape(8, 128) + 1.0
    mesh = jax.sharding.AbstractMesh(
        (), (), abstract_device=jax.sharding.AbstractDevice("TPU v6e", 1, "tpu"))
    with jax.sharding.use_abstract_mesh(mesh):
        return jax.jit(lambda i, x: pl.pallas_call(
            padded_kernel, jax.ShapeDtypeStruct((8, 128), F32),
            in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM),
                      pl.BlockSpec(memory_space=pltpu.VMEM)],
            scratch_shapes=[pltpu.VMEM((10, 150), F32)],
            interpret=params)(i, x))(jnp.array([i, 128], jnp.int32), x).block_until_ready()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("row", [0, 3, 8])
def test_buffer_bounds_padded_as_jax(row, backend):
    params = pltpu.InterpretParams(buffer_bounds="padded")
    want = padded_call(row, params)
    pltpu.reset_tpu_interpret_mode_state()
    with tj.interpret(backend=backend):
        got = padded_call(row, params)
    same_with_nans(got, want)
    assert np.isnan(np.asarray(got)).any()  # columns 150.. are padding


@pytest.mark.parametrize("backend", BACKENDS)
def test_buffer_bounds_padded_beyond_the_padding_is_jax_error(backend):
    params = pltpu.InterpretParams(buffer_bounds="padded")
    want = jax_error(lambda: padded_call(9, params))  # rows 9..16 of 16
    got = tessera_error(lambda: padded_call(9, params), backend=backend)
    assert "Out-of-bounds" in str(want)
    assert re.match("(INTERNAL: )?Out-of-bounds swap of %s_ref", str(got)), str(got)
    assert "padded to [16, 256]" in str(got)


def revisit_call():
    return jax.jit(lambda: pl.pallas_call(
        lambda x_ref, o1_ref, o2_ref: None,
        out_shape=[jax.ShapeDtypeStruct((16, 256), F32)] * 2, grid=(4, 4),
        in_specs=[pl.BlockSpec(memory_space=pltpu.HBM)],
        out_specs=[pl.BlockSpec((4, 128), lambda i, j: (i, j // 2)),
                   pl.BlockSpec((4, 128), lambda i, j: (j // 2, i % 2))],
        interpret=pltpu.InterpretParams())(jnp.zeros((8, 128))))()


@pytest.mark.parametrize("backend", BACKENDS)
def test_errors_revisited_output_block_names_output_and_iteration(backend):
    want = jax_error(revisit_call)
    m = re.search(r"Revisited block .* of output (\d+) in iteration (\(\d+, \d+\))", str(want))
    assert m
    got = tessera_error(revisit_call, backend=backend)
    assert re.search(rf"Revisited block .* of output {m.group(1)} in iteration "
                     rf"{re.escape(m.group(2))}", str(got)), str(got)
    assert isinstance(got, RuntimeError)


def hbm_load_call():
    return pl.pallas_call(
        lambda x_ref, o_ref: o_ref.__setitem__(..., x_ref[...]),
        jax.ShapeDtypeStruct((8, 128), F32),
        in_specs=[pl.BlockSpec(memory_space=pltpu.HBM)],
        out_specs=pl.BlockSpec(memory_space=pltpu.VMEM),
        interpret=pltpu.InterpretParams())(jnp.zeros((8, 128), F32))


@pytest.mark.parametrize("backend", BACKENDS)
def test_errors_direct_hbm_access_is_jax_value_error(backend):
    want = jax_error(hbm_load_call)
    assert isinstance(want, ValueError)
    got = tessera_error(hbm_load_call, backend=backend)
    assert isinstance(got, ValueError)
    head = str(want).split(":")[0]  # JAX names the primitive (get_p)
    assert str(got).startswith(head + ":"), (str(got), str(want))


def test_errors_direct_pallas_call_keeps_tessera_error():
    # tessera.jax.pallas_call raises the same JAX-flavoured KernelError.
    f = tj.pallas_call(oob_index_kernel, jax.ShapeDtypeStruct((1,), jnp.int32),
                       in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM)] * 2,
                       out_specs=pl.BlockSpec(memory_space=pltpu.SMEM))
    with pytest.raises(tj.KernelError) as info:
        f(np.array([7], np.int32), np.arange(5, dtype=np.int32))
    assert isinstance(info.value, IndexError)


# ---- warnings JAX would not give -----------------------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
def test_warnings_are_collected_under_interpret(backend):
    tj.clear_collected_warnings()
    with tj.interpret(backend=backend):
        uninit_call(pltpu.InterpretParams())  # filterwarnings=error: would fail
    if backend == "interp":  # the cpu backend has no shadow memory
        assert any("uninitialized" in t for t in tj.collected_warnings())


def test_warnings_collected_under_interpret_are_shown_when_it_ends(capsys):
    with tj.interpret():
        with tj.interpret():  # an inner block leaves the showing to the outer one
            uninit_call(pltpu.InterpretParams())
        assert "uninitialized" not in capsys.readouterr().err
        uninit_call(pltpu.InterpretParams())
    err = capsys.readouterr().err
    assert "warnings in kernels run under tessera.jax.interpret()" in err
    shown = [line for line in err.splitlines() if "uninitialized" in line]
    assert shown and all("[2x]" in line for line in shown), err
    with tj.interpret():  # nothing new: nothing shown
        pass
    assert capsys.readouterr().err == ""


def test_warnings_python_mode_raises_them():
    with tj.interpret(warnings="python"):
        with pytest.raises(tj.KernelWarning if hasattr(tj, "KernelWarning") else Warning):
            uninit_call(pltpu.InterpretParams())


def test_warnings_direct_pallas_call_warns_as_before():
    f = tj.pallas_call(uninit_kernel, jax.ShapeDtypeStruct((8, 128), F32),
                       scratch_shapes=[pltpu.VMEM((8, 128), F32)])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        f()
    assert any("uninitialized" in str(w.message) for w in caught)


# ---- JAX's interpret-mode state -------------------------------------------------------

def race_kernel(x_ref, o_ref, t_ref, sem):
    copy = pltpu.make_async_copy(x_ref, t_ref, sem)
    copy.start()
    o_ref[...] = t_ref[...] + 1.0  # races with the DMA's write of t_ref
    copy.wait()


def no_race_kernel(x_ref, o_ref, t_ref, sem):
    copy = pltpu.make_async_copy(x_ref, t_ref, sem)
    copy.start()
    copy.wait()
    o_ref[...] = t_ref[...] + 1.0


def race_call(kernel):
    x = jnp.zeros((8, 128), F32)
    return pl.pallas_call(
        kernel, jax.ShapeDtypeStruct((8, 128), F32),
        in_specs=[pl.BlockSpec(memory_space=pltpu.HBM)],
        scratch_shapes=[pltpu.VMEM((8, 128), F32), pltpu.SemaphoreType.DMA],
        interpret=pltpu.InterpretParams(detect_races=True))(x)


def test_state_races_found_follows_the_run():
    with tj.interpret():
        y = race_call(no_race_kernel)
        np.testing.assert_array_equal(np.asarray(y), 1.0)
        assert mosaic_interpret.races is not None
        assert not mosaic_interpret.races.races_found
        with pytest.raises(tj.KernelError) as info:
            jax.block_until_ready(race_call(race_kernel))
        assert any(d.kind == "race" for d in info.value.diagnostics)
        assert mosaic_interpret.races.races_found
        race_call(no_race_kernel)  # each call starts afresh, as in JAX
        assert not mosaic_interpret.races.races_found


# ---- the pytest plugin -----------------------------------------------------------------

pytest_plugins = ["pytester"]

PLUGIN_SUITE = '''
import jax, jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

def kernel(o_ref, s_ref):
    o_ref[...] = s_ref[...]

def test_reads_scratch_never_written():
    pl.pallas_call(kernel, jax.ShapeDtypeStruct((8, 128), jnp.float32),
                   scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32)],
                   interpret=pltpu.InterpretParams())()
'''


def _plugin_args() -> list[str]:
    # Warnings are errors, as in JAX's suites. The in-process run re-imports
    # the already-imported (installed) package as a plugin, which pytest
    # notes with an assertion-rewrite warning: about the test harness, not
    # the kernels, so that one stays a warning.
    from importlib.metadata import entry_points
    warn = ["-W", "error", "-W", "ignore::pytest.PytestAssertRewriteWarning"]
    if any(ep.value == "tessera.jax.pytest_plugin" for ep in entry_points(group="pytest11")):
        return warn
    return ["-p", "tessera.jax.pytest_plugin"] + warn


def test_plugin_collects_warnings_into_the_summary(pytester):
    pytester.makepyfile(test_suite=PLUGIN_SUITE)
    result = pytester.runpytest_inprocess(*_plugin_args(), "--tessera")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*tessera warnings*", "*uninitialized*"])


@pytest.mark.parametrize("mode", ["python", "strict"])
def test_plugin_warnings_on_request(pytester, mode):
    pytester.makepyfile(test_suite=PLUGIN_SUITE)
    result = pytester.runpytest_inprocess(*_plugin_args(), "--tessera",
                                          f"--tessera-warnings={mode}")
    result.assert_outcomes(failed=1)


# ---- pl.debug_check in an index map ---------------------------------------------------

def checked_call(limit, interpret=False):
    def index_map(i):
        pl.debug_check(i < limit, "block index past the limit")  # the check
        return (i, 0)

    def k(x_ref, o_ref):
        o_ref[...] = x_ref[...] + 1.0
    return lambda x: pl.pallas_call(
        k, jax.ShapeDtypeStruct((32, 128), F32), grid=(4,),
        in_specs=[pl.BlockSpec((8, 128), index_map)],
        out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)), interpret=interpret)(x)


@pytest.mark.parametrize("backend", BACKENDS)
def test_debug_check_in_an_index_map(backend):
    from jax._src import config
    x = np.arange(32 * 128, dtype=np.float32).reshape(32, 128)
    with config.jax_pallas_enable_debug_checks(True):
        want = np.asarray(jax.jit(checked_call(4, pltpu.InterpretParams()))(x))  # JAX's
        with tj.interpret(backend=backend):
            np.testing.assert_array_equal(np.asarray(checked_call(4)(x)), want)
            with pytest.raises(tj.KernelError) as info:
                checked_call(3)(x)
    d = next(d for d in info.value.diagnostics if d.kind == "assert")
    assert "block index past the limit" in d.message
    assert d.grid_point == (3,)
    with open(__file__) as f:
        line = next(n for n, t in enumerate(f, 1) if t.rstrip().endswith("# the check"))
    assert d.line == line


# ---- the order of the parallel steps, and JAX's recorder ------------------------------

def counter_kernel(s_ref, o_ref):
    s = s_ref[0]
    s_ref[0] = s + 1
    o_ref[...] = jnp.full(o_ref.shape, s, jnp.int32)


def counter_call(params):
    """Each step writes how many steps ran before it (an SMEM counter) into
    its block: the output shows the order the steps ran in."""
    return pl.pallas_call(
        counter_kernel, jax.ShapeDtypeStruct((40, 3 * 128), jnp.int32), grid=(5, 3),
        in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM)],
        out_specs=pl.BlockSpec((8, 128), lambda i, j: (i, j)),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary")),
        interpret=params)(jnp.zeros((1,), jnp.int32))


def recorded(cores, seed, run):
    """(output, the grid points the recorder saw with their cores, stably
    sorted by core) of `run(params)`."""
    seen = []

    def recorder(token, point, core):
        seen.append((int(core), tuple(int(c) for c in point)))
        return token
    params = pltpu.InterpretParams(random_seed=seed, num_cores_or_threads=cores,
                                   grid_point_recorder=recorder)
    out = np.asarray(jax.jit(run, static_argnums=0)(params))
    return out, sorted(seen, key=lambda s: s[0])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("cores", [1, 2])
@pytest.mark.parametrize("seed", [None, 5, 12345])
def test_order_of_parallel_steps_is_jax_order(backend, cores, seed):
    want, want_seen = recorded(cores, seed, counter_call)  # JAX's interpret mode
    pltpu.reset_tpu_interpret_mode_state()
    with tj.interpret(backend=backend):
        got, got_seen = recorded(cores, seed, counter_call)
    np.testing.assert_array_equal(got, want)
    assert got_seen == want_seen
    assert len(got_seen) == 15
    # the order is drawn: not the grid's for every seed
    rows = [p[0] for _, p in want_seen[::3]]
    assert seed is None or rows != sorted(rows) or cores == 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_order_tessera_shuffle_option_wins(backend):
    """tessera's own shuffle_parallel replaces JAX's drawn order."""
    params = pltpu.InterpretParams(random_seed=5)
    with tj.interpret(backend=backend, shuffle_parallel=False):
        got = np.asarray(counter_call(params))
    rows = got[::8, 0]
    np.testing.assert_array_equal(rows, np.arange(5) * 3)


def dynamic_parallel_call():
    n = jax.random.randint(jax.random.key(1), (), 2, 5, dtype=jnp.int32)
    return pl.pallas_call(
        lambda o_ref: o_ref.__setitem__(0, 1.0), jax.ShapeDtypeStruct((1,), F32), grid=(n,),
        out_specs=pl.BlockSpec((1,), lambda i: (0,)),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)),
        interpret=pltpu.InterpretParams())()


@pytest.mark.parametrize("backend", BACKENDS)
def test_traced_parallel_extent_is_jax_concretization_error(backend):
    want = jax_error(jax.jit(dynamic_parallel_call))
    got = tessera_error(jax.jit(dynamic_parallel_call), backend=backend)
    assert isinstance(want, jax.errors.ConcretizationTypeError)
    assert isinstance(got, jax.errors.ConcretizationTypeError)


def scoped_hbm_call(space, allow):
    mesh = pltpu.TensorCoreMesh(axis_name="x", num_cores=1)

    def kernel(x_ref, y_ref):
        def body(tmp):  # the scoped buffer
            pltpu.sync_copy(x_ref, tmp)
            pltpu.sync_copy(tmp, y_ref)
        pl.run_scoped(body, space(x_ref.shape, x_ref.dtype))
    call = pl.kernel(kernel, mesh=mesh, out_type=jax.ShapeDtypeStruct((8, 128), F32),
                     interpret=pltpu.InterpretParams(allow_hbm_allocation_in_run_scoped=allow))
    return lambda: jax.jit(call)(jnp.arange(8 * 128, dtype=F32).reshape(8, 128))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("space", [pltpu.HBM, pl.ANY])
def test_scoped_hbm_refused_as_jax_refuses_it(backend, space):
    want = jax_error(scoped_hbm_call(space, False))
    got = tessera_error(scoped_hbm_call(space, False), backend=backend)
    assert isinstance(want, ValueError) and isinstance(got, ValueError)
    assert "Cannot allocate HBM in `run_scoped`." in str(want)
    assert "Cannot allocate HBM in `run_scoped`." in str(got)
    with open(__file__) as f:  # located at the user's run_scoped line
        line = next(n for n, t in enumerate(f, 1) if "# the scoped buffer" in t) + 3
    assert f":{line}:" in str(got)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("space", [pltpu.HBM, pl.ANY])
def test_scoped_hbm_allowed_runs_as_jax_runs_it(backend, space):
    """allow_hbm_allocation_in_run_scoped=True: the buffer is a device-wide
    scoped buffer of the kernel, with no warning and the value JAX gives."""
    import warnings
    want = np.asarray(scoped_hbm_call(space, True)())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with tj.interpret(backend=backend):
            got = np.asarray(scoped_hbm_call(space, True)())
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, np.arange(8 * 128, dtype=np.float32).reshape(8, 128))


def test_scoped_hbm_allowed_is_an_hbm_scoped_buffer_of_the_ir():
    options, notes = _params.options_of(
        pltpu.InterpretParams(allow_hbm_allocation_in_run_scoped=True))
    assert "jax_refuse_scoped_hbm" not in options and notes == []

    def kernel(x_ref, y_ref):
        def body(tmp):
            pltpu.sync_copy(x_ref, tmp)
            pltpu.sync_copy(tmp, y_ref)
        pl.run_scoped(body, space((8, 128), F32))
    for space in (pltpu.HBM, pl.ANY):  # ANY is HBM here, as in JAX's interpret mode
        text = tj.lower_to_tsr(kernel, jax.ShapeDtypeStruct((8, 128), F32),
                               jax.ShapeDtypeStruct((8, 128), F32),
                               in_specs=[pl.BlockSpec(memory_space=pltpu.HBM)],
                               out_specs=pl.BlockSpec(memory_space=pltpu.HBM))
        assert re.search(r"scoped\(%\w+: hbm f32\[8, 128\]\)", text), text


# ---- skip_floating_point_ops --------------------------------------------------------

def skip_float_kernel(x_ref, i_ref, copy_ref, f_ref, n_ref):
    copy_ref[...] = x_ref[...]                       # a load: its value reads as inf
    f_ref[...] = jnp.sin(x_ref[...]) * 2.0 + 1.0     # floating-point ops: skipped
    n_ref[...] = i_ref[...] * 3 + 1                  # integer ops: done
    big = x_ref[...] > 0.5                           # a comparison makes booleans: done (of inf)
    n_ref[...] += big.astype(jnp.int32)


def skip_float_call(params):
    x = jnp.linspace(0.0, 1.0, 8 * 128, dtype=F32).reshape(8, 128)
    i = jnp.arange(8 * 128, dtype=jnp.int32).reshape(8, 128)
    return pl.pallas_call(
        skip_float_kernel,
        [jax.ShapeDtypeStruct((8, 128), F32), jax.ShapeDtypeStruct((8, 128), F32),
         jax.ShapeDtypeStruct((8, 128), jnp.int32)], interpret=params)(x, i)


@pytest.mark.parametrize("backend", BACKENDS)
def test_skip_floating_point_ops_as_jax_skips_them(backend):
    params = pltpu.InterpretParams(skip_floating_point_ops=True)
    want = [np.asarray(a) for a in jax.jit(skip_float_call, static_argnums=0)(params)]
    with tj.interpret(backend=backend):
        got = [np.asarray(a) for a in jax.jit(skip_float_call, static_argnums=0)(params)]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    assert np.isinf(want[1]).all() and (want[2] == np.arange(8 * 128).reshape(8, 128) * 3 + 2).all()
