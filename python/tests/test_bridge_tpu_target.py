"""Fails where the TPU fails (docs/jax.md): with target="tpu" what the chip
would refuse of a pallas_call (Pallas's TPU block rules, its VMEM and the
kernel's scoped limit, what has no Mosaic form) is a located error; without
it, a collected warning given once per kernel, and the kernel runs. libtpu's
own compile (tpu_compile_check) is tested in tpu/test_tpu_target_compile.py."""

from __future__ import annotations

import inspect
import warnings

import pytest

jax = pytest.importorskip("jax")

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.experimental import pallas as pl  # noqa: E402
from jax.experimental.pallas import tpu as pltpu  # noqa: E402

import tessera  # noqa: E402
import tessera.jax as tj  # noqa: E402
from tessera.jax import _tpu_target  # noqa: E402

pytest_plugins = ["pytester"]


def _line_of(fn, text: str) -> int:
    """The file line of `text` within the source of `fn`."""
    lines, start = inspect.getsourcelines(fn)
    for i, line in enumerate(lines):
        if text in line:
            return start + i
    raise AssertionError(f"{text!r} not in {fn.__name__}")


def _double(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2


# ---- Tiling: a (4, 100) block of an f32 (64, 1000) array ------------------------------

def tiling_call(**opts):
    return tj.pallas_call(
        _double, jax.ShapeDtypeStruct((64, 1000), jnp.float32), grid=(16, 10),
        in_specs=[pl.BlockSpec((4, 100), lambda i, j: (i, j))],   # the input's spec
        out_specs=pl.BlockSpec((4, 100), lambda i, j: (i, j)),    # the output's spec
        **opts)


def _at(d: tessera.Diagnostic, line: int) -> bool:
    return d.file == __file__ and d.line == line and (d.col or 0) >= 1


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_block_rules_are_located_errors_with_target_tpu(backend):
    x = jnp.ones((64, 1000), jnp.float32)
    with pytest.raises(tessera.CompileError) as e:
        tiling_call(backend=backend, target="tpu")(x)
    diags = e.value.diagnostics
    assert [d.kind for d in diags] == ["tpu-block-rule"] * 4
    assert all(d.severity == "error" for d in diags)
    in_line = _line_of(tiling_call, "the input's spec")
    out_line = _line_of(tiling_call, "the output's spec")
    assert sum(_at(d, in_line) for d in diags) == 2, diags
    assert sum(_at(d, out_line) for d in diags) == 2, diags
    assert any("multiple of 128" in d.message and "100" in d.message for d in diags)
    assert any("multiple of 8" in d.message and " 4," in d.message for d in diags)
    assert f"{__file__}:{in_line}:" in str(e.value)
    # under jax.jit too (the kernel is prepared while it is traced)
    with pytest.raises(tessera.CompileError, match="which TPUs cannot tile"):
        jax.jit(tiling_call(backend=backend, target="tpu"))(x)


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_block_rules_are_warnings_once_per_kernel_by_default(backend):
    x = jnp.arange(64 * 1000, dtype=jnp.float32).reshape(64, 1000)
    tj.clear_collected_warnings()
    f = tiling_call(backend=backend)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # never a Python warning (JAX's suites: -W error)
        for _ in range(3):
            np.testing.assert_array_equal(np.asarray(f(x)), np.asarray(x) * 2)
        # the same kernel made again (another pallas_call object): still once
        np.testing.assert_array_equal(np.asarray(tiling_call(backend=backend)(x)),
                                      np.asarray(x) * 2)
    found = {t: n for t, n in tj.collected_warnings().items() if "tpu-block-rule" in t}
    assert len(found) == 4 and set(found.values()) == {1}, found
    in_line = _line_of(tiling_call, "the input's spec")
    assert sum(f"{__file__}:{in_line}:" in t and ": warning: " in t for t in found) == 2


def test_block_rules_are_warnings_under_interpret_and_with_strict_errors():
    x = jnp.ones((64, 1000), jnp.float32)

    def jax_call():
        return pl.pallas_call(
            _double, jax.ShapeDtypeStruct((64, 1000), jnp.float32), grid=(16, 10),
            in_specs=[pl.BlockSpec((4, 100), lambda i, j: (i, j))],
            out_specs=pl.BlockSpec((4, 100), lambda i, j: (i, j)), interpret=True)(x)
    tj.clear_collected_warnings()
    with tj.interpret():
        np.testing.assert_array_equal(np.asarray(jax_call()), 2 * np.ones((64, 1000)))
    assert sum("tpu-block-rule" in t for t in tj.collected_warnings()) == 4
    # strict=True: every warning an error, these too (docs/jax.md)
    with pytest.raises(tessera.CompileError, match="strict=True"):
        with tj.interpret(strict=True):
            jax_call()
    with pytest.raises(tessera.CompileError, match="target='tpu', chip v6e"):
        with tj.interpret(target="tpu", chip="v6e"):
            jax_call()
    # InterpretParams takes them too
    with pytest.raises(tessera.CompileError):
        pl.pallas_call(
            _double, jax.ShapeDtypeStruct((64, 1000), jnp.float32), grid=(16, 10),
            in_specs=[pl.BlockSpec((4, 100), lambda i, j: (i, j))],
            out_specs=pl.BlockSpec((4, 100), lambda i, j: (i, j)),
            interpret=tj.InterpretParams(target="tpu"))(x)


def test_a_valid_kernel_has_no_finding():
    x = jnp.ones((64, 1024), jnp.float32)
    tj.clear_collected_warnings()
    f = tj.pallas_call(_double, jax.ShapeDtypeStruct((64, 1024), jnp.float32), grid=(8, 8),
                       in_specs=[pl.BlockSpec((8, 128), lambda i, j: (i, j))],
                       out_specs=pl.BlockSpec((8, 128), lambda i, j: (i, j)), target="tpu")
    np.testing.assert_array_equal(np.asarray(f(x)), 2 * np.ones((64, 1024)))
    assert not any("tpu-" in t for t in tj.collected_warnings())


# ---- VMEM: 64 MiB of windows, the default scoped limit, vmem_limit_bytes ---------------

def vmem_call(limit=None, **opts):
    cp = pltpu.CompilerParams(vmem_limit_bytes=limit) if limit is not None else None
    # (2048, 2048) f32 blocks: 16 MiB, in and out double-buffered: 64 MiB
    return tj.pallas_call(_double, jax.ShapeDtypeStruct((4096, 2048), jnp.float32), grid=(2,),
                          in_specs=[pl.BlockSpec((2048, 2048), lambda i: (i, 0))],
                          out_specs=pl.BlockSpec((2048, 2048), lambda i: (i, 0)),
                          compiler_params=cp, **opts)


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_vmem_over_the_default_scoped_limit(backend):
    x = jnp.ones((4096, 2048), jnp.float32)
    with pytest.raises(tessera.CompileError) as e:
        vmem_call(backend=backend, target="tpu")(x)   # the call
    (d,) = e.value.diagnostics
    assert d.kind == "tpu-vmem" and d.severity == "error"
    assert "needs 64 MiB of VMEM" in d.message and "16 MiB" in d.message, d.message
    assert "vmem_limit_bytes" in d.message
    assert _at(d, _line_of(test_vmem_over_the_default_scoped_limit, "# the call")), d
    # v6e's default scoped limit is 32 MiB: still too little
    with pytest.raises(tessera.CompileError, match="32 MiB"):
        vmem_call(backend=backend, target="tpu", chip="v6e")(x)
    # vmem_limit_bytes within v5e's 128 MiB: it runs
    y = vmem_call(100 << 20, backend=backend, target="tpu")(x)
    assert float(np.asarray(y).min()) == 2.0
    # ...but not within v7x's 64 MiB, whatever the limit says
    with pytest.raises(tessera.CompileError) as e:
        vmem_call(100 << 20, backend=backend, target="tpu", chip="v7x")(x)
    assert [d.kind for d in e.value.diagnostics] == ["tpu-vmem"]
    assert "v7x" in str(e.value)
    # a limit below the need
    with pytest.raises(tessera.CompileError, match="its vmem_limit_bytes is 32 MiB"):
        vmem_call(32 << 20, backend=backend, target="tpu")(x)


def test_vmem_over_the_limit_is_a_warning_by_default():
    x = jnp.ones((4096, 2048), jnp.float32)
    tj.clear_collected_warnings()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = vmem_call(warnings="collect")(x)
        y = vmem_call(warnings="collect")(x)
    assert float(np.asarray(y).max()) == 2.0
    found = [t for t in tj.collected_warnings() if "tpu-vmem" in t]
    assert len(found) == 1 and tj.collected_warnings()[found[0]] == 1
    assert "needs 64 MiB" in found[0] and ": warning: " in found[0]


def test_pallas_vmem_counts_a_trivial_window_once():
    # a grid-free whole-array operand is single-buffered by Pallas
    from tessera.jax import _jax_internal as ji
    x = jnp.ones((512, 1024), jnp.float32)  # 2 MiB
    f = pl.pallas_call(_double, jax.ShapeDtypeStruct(x.shape, x.dtype), interpret=False)
    c = ji.trace_pallas_call(f, [x])
    need, parts = _tpu_target.pallas_vmem(c, "v5e")
    assert need == 2 * (2 << 20), parts        # in and out, one buffer each
    def kernel(x_ref, o_ref, s_ref):
        o_ref[...] = x_ref[...]
    g = pl.pallas_call(kernel, jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(4,),
                       in_specs=[pl.BlockSpec((128, 1024), lambda i: (i, 0))],
                       out_specs=pl.BlockSpec((128, 1024), lambda i: (i, 0)),
                       scratch_shapes=[pltpu.VMEM((8, 100), jnp.bfloat16)])
    need, parts = _tpu_target.pallas_vmem(ji.trace_pallas_call(g, [x]), "v5e")
    # two 512 KiB windows double-buffered, an (8, 100) bf16 scratch padded to
    # 128 lanes (8 rows are a whole tile of Mosaic's for 8 rows of bf16)
    assert need == 4 * (512 << 10) + 8 * 128 * 2, parts


# ---- Dtypes and ops with no Mosaic form ------------------------------------------------

def f16_call(**opts):
    return tj.pallas_call(_double, jax.ShapeDtypeStruct((16, 256), jnp.float16), grid=(2,),
                          in_specs=[pl.BlockSpec((8, 256), lambda i: (i, 0))],  # f16 in
                          out_specs=pl.BlockSpec((8, 256), lambda i: (i, 0)),
                          **opts)


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_an_f16_operand_is_a_located_error_with_target_tpu(backend):
    x = jnp.ones((16, 256), jnp.float16)
    with pytest.raises(tessera.CompileError) as e:
        f16_call(backend=backend, target="tpu")(x)
    diags = e.value.diagnostics
    assert {d.kind for d in diags} == {"tpu-mosaic"}
    assert any(_at(d, _line_of(f16_call, "# f16 in")) and "f16" in d.message for d in diags)
    tj.clear_collected_warnings()
    np.testing.assert_array_equal(np.asarray(f16_call(backend=backend, warnings="collect")(x)),
                                  2 * np.ones((16, 256), np.float16))
    assert sum("tpu-mosaic" in t and "f16" in t for t in tj.collected_warnings()) == 2


def _i8_add(x_ref, o_ref):
    o_ref[...] = x_ref[...] + x_ref[...]   # i8 vector arithmetic


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_an_op_without_mosaic_form_is_located_at_the_kernel_line(backend):
    x = jnp.ones((32, 128), jnp.int8)
    call = tj.pallas_call(_i8_add, jax.ShapeDtypeStruct((32, 128), jnp.int8),
                          backend=backend, target="tpu", chip="v6e")
    with pytest.raises(tessera.CompileError) as e:
        call(x)
    (d,) = e.value.diagnostics
    assert d.kind == "tpu-mosaic" and "'add'" in d.message and "i8" in d.message, d
    line = _line_of(_i8_add, "i8 vector arithmetic")
    assert d.file == __file__ and d.line == line
    # the column of the `+` expression's start (the JAX equation's)
    assert d.col == inspect.getsourcelines(_i8_add)[0][1].index("x_ref[...] +") + 1
    y = tj.pallas_call(_i8_add, jax.ShapeDtypeStruct((32, 128), jnp.int8), backend=backend,
                       warnings="collect")(x)
    assert int(np.asarray(y).max()) == 2


# ---- The options and the promotion table -------------------------------------------

def test_target_and_chip_are_checked():
    with pytest.raises(ValueError, match="target is 'tpu'"):
        tj.pallas_call(_double, jax.ShapeDtypeStruct((8, 128), jnp.float32), target="gpu")
    with pytest.raises(ValueError, match="unknown TPU chip"):
        tj.interpret(target="tpu", chip="v9")
    # a chip only the interpreter's budget knows stays a run option
    y = tj.pallas_call(_double, jax.ShapeDtypeStruct((8, 128), jnp.float32), chip="tpu8i")(
        jnp.ones((8, 128), jnp.float32))
    assert float(np.asarray(y).max()) == 2.0
    with pytest.raises(ValueError, match="unknown TPU chip"):
        tj.pallas_call(_double, jax.ShapeDtypeStruct((8, 128), jnp.float32), chip="tpu8i",
                       target="tpu")
    assert {"target", "tpu_compile_check", "chip"} <= set(tj.option_names())


def test_every_chip_refuses_the_findings_and_two_core_chips_have_their_own_kinds():
    for chip in ("v2", "v3", "v4", "v5e", "v5p", "v6e", "v7x", "tpu7x", "v7"):
        assert set(_tpu_target.KINDS) <= _tpu_target.promoted_kinds(chip)
    single = _tpu_target.promoted_kinds("v5e")
    assert _tpu_target.promoted_kinds("v6e") == single
    for chip in ("v4", "v5p", "v7x"):
        assert _tpu_target.promoted_kinds(chip) >= single
    # megacore chips (two TensorCores per device) also refuse an output
    # accumulated along a parallel dimension; v7x's TensorCores are devices
    for chip in ("v4", "v5p"):
        assert "parallel-revisit" in _tpu_target.promoted_kinds(chip)
    for chip in ("v5e", "v6e", "v7x"):
        assert "parallel-revisit" not in _tpu_target.promoted_kinds(chip)


def _reads_scratch(x_ref, o_ref, s_ref):
    o_ref[...] = x_ref[...] + s_ref[...]   # never written


def test_run_warnings_of_a_promoted_kind_fail_with_target_tpu(monkeypatch):
    # The hook another kind (a megacore one) is wired through: a run's warning
    # of a kind in the chip's promoted set fails the run with target="tpu",
    # stays a warning without it and on other chips.
    monkeypatch.setitem(_tpu_target.PROMOTED, "v5p",
                        _tpu_target.PROMOTED["v5p"] | {"uninitialized"})
    x = jnp.ones((8, 128), jnp.float32)

    def call(**opts):
        return tj.pallas_call(_reads_scratch, jax.ShapeDtypeStruct((8, 128), jnp.float32),
                              scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32)],
                              warnings="collect", **opts)
    with pytest.raises(tessera.KernelError) as e:
        call(target="tpu", chip="v5p")(x)
    assert any(d.kind == "uninitialized" and d.severity == "error"
               for d in e.value.diagnostics)
    assert "target='tpu', chip v5p" in str(e.value)
    tj.clear_collected_warnings()
    call(target="tpu", chip="v5e")(x)
    call(chip="v5p")(x)
    assert sum("uninitialized" in t for t in tj.collected_warnings()) >= 1


def test_mosaic_line_maps_to_the_user_line():
    text = ("module {\n  func.func @k(%a: i32) {\n    // /u/k.py:12:9: exp\n"
            "    %v7 = math.exp %v6 : vector<8x128xf32>\n    return\n  }\n}\n")
    assert _tpu_target._source_of(text, 4) == ("/u/k.py", 12, 9, "exp")
    assert _tpu_target._source_of(text, 2) is None


def test_compile_check_without_libtpu_says_how_to_install_it(monkeypatch):
    from importlib import metadata

    def missing(name):
        raise metadata.PackageNotFoundError(name)
    monkeypatch.setattr(metadata, "version", missing)
    x = jnp.ones((8, 128), jnp.float32)
    with pytest.raises(tessera.CompileError, match="pip install libtpu"):
        tj.pallas_call(_double, jax.ShapeDtypeStruct((8, 128), jnp.float32), target="tpu",
                       tpu_compile_check=True)(x)


# ---- pytest --tessera-target / --tessera-chip ------------------------------------------

PLUGIN_SUITE = '''
import jax, jax.numpy as jnp, numpy as np
from jax.experimental import pallas as pl

def kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2

def test_untileable_blocks():
    x = jnp.ones((64, 1000), jnp.float32)
    y = pl.pallas_call(kernel, jax.ShapeDtypeStruct((64, 1000), jnp.float32), grid=(16, 10),
                       in_specs=[pl.BlockSpec((4, 100), lambda i, j: (i, j))],
                       out_specs=pl.BlockSpec((4, 100), lambda i, j: (i, j)),
                       interpret=True)(x)
    assert float(np.asarray(y).max()) == 2.0
'''


def _plugin_args() -> list[str]:
    from importlib.metadata import entry_points
    warn = ["-W", "error", "-W", "ignore::pytest.PytestAssertRewriteWarning"]
    if any(ep.value == "tessera.jax.pytest_plugin" for ep in entry_points(group="pytest11")):
        return warn
    return ["-p", "tessera.jax.pytest_plugin"] + warn


def test_plugin_target_tpu_fails_where_the_default_warns(pytester):
    pytester.makepyfile(test_suite=PLUGIN_SUITE)
    tj.clear_collected_warnings()
    result = pytester.runpytest_inprocess(*_plugin_args(), "--tessera")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*tessera warnings*",
                                 "*test_suite.py:11:*warning*which TPUs cannot tile*"])
    tj.clear_collected_warnings()
    result = pytester.runpytest_inprocess(*_plugin_args(), "--tessera", "--tessera-target",
                                          "tpu", "--tessera-chip", "v6e")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*test_suite.py:11:*error*which TPUs cannot tile*"])
    result.stdout.fnmatch_lines(["*target='tpu', chip v6e*"])


def test_plugin_unknown_chip_is_a_usage_error(pytester):
    pytester.makepyfile(test_suite=PLUGIN_SUITE)
    result = pytester.runpytest_inprocess(*_plugin_args(), "--tessera", "--tessera-target",
                                          "tpu", "--tessera-chip", "v9")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*unknown TPU chip*"])
