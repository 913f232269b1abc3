"""The JAX bridge's diagnostics name refs as the kernel names them: every ref
(input, output, scratch, scalar prefetch, run_scoped buffer, semaphore) is
called by its Python parameter in the IR, on both backends, in tessera's
line and in JAX's phrase; a diagnostic at a BlockSpec points at its index
map's column; errors print as tessera's public classes; and a pytest
failure report starts with the diagnostics, without tessera's frames."""

from __future__ import annotations

import functools
import os
import pathlib
import re
import subprocess
import sys
import textwrap
import traceback

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
BACKENDS = ["interp", "cpu"]
SDS = jax.ShapeDtypeStruct((64, 128), F32)


def _x():
    return np.arange(64 * 128, dtype=np.float32).reshape(64, 128)


def _line_col(marker: str, token: str = "lambda", nth: int = 0) -> tuple[int, int]:
    """(line, 1-based column) of the nth `token` on the line of this file
    that ends with `# marker`."""
    with open(__file__) as f:
        for n, line in enumerate(f, 1):
            if "# " + marker + " " in line or line.rstrip().endswith("# " + marker):
                col = -1
                for _ in range(nth + 1):
                    col = line.index(token, col + 1)
                return n, col + 1
    raise LookupError(marker)


def _error(fn):
    with pytest.raises(tessera.KernelError) as info:
        fn()
    return info.value


def double(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2


# ---- the refs' names ------------------------------------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
def test_an_input_block_is_named_by_its_parameter(backend):
    f = tj.pallas_call(double, SDS, grid=(8,), backend=backend,
                       in_specs=[pl.BlockSpec((8, 128), lambda i: (i + 1, 0))],  # IN_MAP
                       out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)))
    e = _error(lambda: f(_x()))
    d = e.errors[0]
    assert d.buffer == "x_ref" and d.op == "in %x_ref", d
    assert "in %x_ref: index map gives block index [8, 0]" in d.text
    assert str(e).startswith('Out-of-bounds block index [8, 0] for input "x_ref" in '
                             "iteration (7,): "), str(e)
    assert "in0" not in str(e)
    assert (d.file, (d.line, d.col)) == (__file__, _line_col("IN_MAP"))


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_output_block_is_named_by_its_parameter(backend):
    f = tj.pallas_call(double, SDS, grid=(8,), backend=backend,
                       in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
                       out_specs=pl.BlockSpec((8, 128), lambda i: (8, i)))  # OUT_MAP
    e = _error(lambda: f(_x()))
    d = e.errors[0]
    assert d.buffer == "o_ref" and d.op == "out %o_ref", d
    assert str(e).startswith('Out-of-bounds block index [8, 0] for output "o_ref"'), str(e)
    # an index map without equations (nothing but its parameter and literals)
    # still names its lambda's column, not the line's first
    assert (d.file, (d.line, d.col)) == (__file__, _line_col("OUT_MAP"))


def scratch_kernel(idx_ref, x_ref, o_ref, acc_scratch):
    acc_scratch[...] = x_ref[...]
    o_ref[...] = acc_scratch[pl.ds(idx_ref[0], 8), :]


@pytest.mark.parametrize("backend", BACKENDS)
def test_scratch_and_prefetch_refs_are_named_by_their_parameters(backend):
    def run(idx, index_at):
        gs = pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1, grid=(1,),
            in_specs=[pl.BlockSpec((8, 128), lambda i, s: (0, 0))],
            out_specs=pl.BlockSpec((8, 128), lambda i, s: (0, 0)),
            scratch_shapes=[pltpu.VMEM((8, 128), F32)])
        return tj.pallas_call(index_at, jax.ShapeDtypeStruct((8, 128), F32), grid_spec=gs,
                              backend=backend)(np.array(idx, np.int32), _x()[:8])

    e = _error(lambda: run([4, 0], scratch_kernel))
    assert e.errors[0].buffer == "acc_scratch", e.errors[0]
    assert str(e).startswith("Out-of-bounds read of %acc_scratch"), str(e)
    assert "of %acc_scratch (shape [8, 128])" in e.errors[0].text

    def prefetch_kernel(idx_ref, x_ref, o_ref, acc_scratch):
        o_ref[...] = x_ref[...] + idx_ref[idx_ref[1]].astype(F32)
    e = _error(lambda: run([0, 5], prefetch_kernel))
    assert e.errors[0].buffer == "idx_ref", e.errors[0]
    assert str(e).startswith("Out-of-bounds read of %idx_ref"), str(e)


@pytest.mark.parametrize("backend", BACKENDS)
def test_run_scoped_buffers_and_semaphores_are_named_by_their_parameters(backend):
    def kernel(x_ref, o_ref):
        def body(staging, flag):
            staging[...] = x_ref[...]
            o_ref[...] = staging[pl.ds(jnp.int32(4), 8), :]  # past its 8 rows
        pl.run_scoped(body, pltpu.VMEM((8, 128), F32), pltpu.SemaphoreType.REGULAR)

    def call():
        return tj.pallas_call(kernel, jax.ShapeDtypeStruct((8, 128), F32),
                              backend=backend)(_x()[:8])
    text = tj.lower_to_tsr(kernel, jax.ShapeDtypeStruct((8, 128), F32), _x()[:8])
    assert "scoped(%staging: vmem f32[8, 128])" in text, text
    assert "scratch %flag: sem" in text, text
    e = _error(call)
    assert e.errors[0].buffer == "staging", e.errors[0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_semaphore_is_named_by_its_parameter(backend):
    def kernel(x_ref, o_ref, done_sem):
        o_ref[...] = x_ref[...]
        pl.semaphore_wait(done_sem, 1)  # never signalled: a deadlock
    e = _error(lambda: tj.pallas_call(
        kernel, jax.ShapeDtypeStruct((8, 128), F32), backend=backend,
        scratch_shapes=[pltpu.SemaphoreType.REGULAR])(_x()[:8]))
    assert e.errors[0].kind == "deadlock", e.errors[0]
    assert "%done_sem" in e.errors[0].text, e.errors[0].text


def test_names_of_a_partial_kernel_are_its_function_parameters():
    def scaled(scale, x_ref, o_ref):
        o_ref[...] = x_ref[...] * scale
    text = tj.lower_to_tsr(functools.partial(scaled, 2.0), SDS, _x())
    assert "in %x_ref: f32[64, 128]" in text and "out %o_ref: f32[64, 128]" in text, text


def test_names_the_ir_cannot_take_fall_back_to_tesseras():
    def star(*refs):  # JAX names them refs[0], refs[1]
        refs[1][...] = refs[0][...]
    text = tj.lower_to_tsr(star, SDS, _x())
    assert "in %in0: f32" in text and "out %out0: f32" in text, text

    def builder_like(v1, o_ref):  # %v<N> is the builder's name of unnamed values
        o_ref[...] = v1[...]
    text = tj.lower_to_tsr(builder_like, SDS, _x())
    assert "in %in0: f32" in text and "out %o_ref: f32" in text, text

    def taken(in1, o_ref, s0):  # a user's name is never given to another ref
        o_ref[...] = in1[...]
        s0[...] = in1[...]
    text = tj.lower_to_tsr(taken, SDS, _x(), scratch_shapes=[pltpu.VMEM((64, 128), F32)])
    assert "in %in1: f32" in text and "scratch %s0: vmem" in text, text

    def twice(x_ref, o_ref):  # the second run_scoped of one body: tessera's name
        def body(buf):
            buf[...] = x_ref[...]
            o_ref[...] = buf[...]
        pl.run_scoped(body, pltpu.VMEM((64, 128), F32))
        pl.run_scoped(body, pltpu.VMEM((64, 128), F32))
    text = tj.lower_to_tsr(twice, SDS, _x())
    assert text.count("scoped(%buf: ") == 1 and re.search(r"scoped\(%v\d+: ", text), text
    # the text parses again (no name is defined twice) and runs
    kernel = tessera.Module.parse(text)["twice"]
    np.testing.assert_array_equal(tessera.compile(kernel)(_x()), _x())


def test_kernels_differing_only_in_names_are_not_confused_by_the_cache():
    def a(first, o_ref):
        o_ref[...] = first[...] * 2

    def b(second, o_ref):
        o_ref[...] = second[...] * 2
    texts = [tj.lower_to_tsr(k, SDS, _x()) for k in (a, b)]
    assert "in %first:" in texts[0] and "in %second:" in texts[1], texts


def test_names_leave_the_cache_key_as_it_was(tmp_path):
    # The IR's names are not part of a kernel's canonical bytes: the kernel
    # named by its parameters has the key of the one named %in0/%out0.
    cli = os.environ.get("TESSERA") or str(
        pathlib.Path(tessera._lib.library_path()).resolve().parent / "tools" / "tessera")
    if not pathlib.Path(cli).is_file():
        pytest.skip(f"no tessera CLI at {cli} (set $TESSERA)")
    text = tj.lower_to_tsr(double, SDS, _x())
    assert "%x_ref" in text and "%o_ref" in text
    renamed = text.replace("%x_ref", "%in0").replace("%o_ref", "%out0")
    keys = []
    for name, t in (("named.tsr", text), ("internal.tsr", renamed)):
        (tmp_path / name).write_text(t)
        out = subprocess.run([cli, "hash", str(tmp_path / name)], capture_output=True,
                             text=True, check=True).stdout
        keys.append(out.split()[0])
    assert keys[0] == keys[1], keys


def test_two_index_maps_on_one_line_each_get_their_column():
    f = tj.pallas_call(double, SDS, grid=(8,),
                       in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))], out_specs=pl.BlockSpec((8, 128), lambda i: (9, 0)))  # SAME_LINE  # noqa: E501
    d = _error(lambda: f(_x())).errors[0]
    assert d.buffer == "o_ref" and (d.line, d.col) == _line_col("SAME_LINE", nth=1), d


def test_an_index_map_with_equations_is_not_taken_for_its_neighbour():
    f = tj.pallas_call(double, SDS, grid=(8,),
                       in_specs=[pl.BlockSpec((8, 128), lambda i: (i * 1, 0))], out_specs=pl.BlockSpec((8, 128), lambda i: (9, 0)))  # NEIGHBOURS  # noqa: E501
    d = _error(lambda: f(_x())).errors[0]
    assert d.buffer == "o_ref" and (d.line, d.col) == _line_col("NEIGHBOURS", nth=1), d


OUT_SPEC = pl.BlockSpec(
    (8, 128),
        lambda i: (i + 1, 0))  # MULTI_LINE


def test_a_spec_made_elsewhere_over_several_lines_names_its_lambda():
    f = tj.pallas_call(double, SDS, grid=(8,),
                       in_specs=[pl.BlockSpec(block_shape=(8, 128), index_map=lambda i: (i, 0))],
                       out_specs=OUT_SPEC)
    d = _error(lambda: f(_x())).errors[0]
    assert d.buffer == "o_ref" and (d.file, (d.line, d.col)) == (
        __file__, _line_col("MULTI_LINE")), d


def test_a_keyword_index_map_names_its_lambda():
    f = tj.pallas_call(double, SDS, grid=(8,),
                       in_specs=[pl.BlockSpec(index_map=lambda i: (i + 2, 0),  # KEYWORD
                                              block_shape=(8, 128))],
                       out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)))
    d = _error(lambda: f(_x())).errors[0]
    assert d.buffer == "x_ref" and (d.line, d.col) == _line_col("KEYWORD"), d


def test_under_jit_the_names_and_each_diagnostic_appear_once():
    f = tj.pallas_call(double, SDS, grid=(8,),
                       in_specs=[pl.BlockSpec((8, 128), lambda i: (i + 1, 0))],
                       out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)))
    with pytest.raises(Exception) as info:
        jax.block_until_ready(jax.jit(f)(_x()))
    text = str(info.value)
    assert 'for input "x_ref"' in text, text
    assert text.count("in %x_ref: index map gives block index [8, 0]") == 1, text


# ---- the exceptions -------------------------------------------------------------------

def test_errors_print_as_tesseras_public_classes():
    f = tj.pallas_call(double, SDS, grid=(8,),
                       in_specs=[pl.BlockSpec((8, 128), lambda i: (i + 1, 0))],
                       out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)))
    e = _error(lambda: f(_x()))
    # JAX's class too (what JAX's interpret mode raises), printed as tessera's
    assert isinstance(e, IndexError) and type(e) is not tessera.KernelError
    assert repr(type(e)) == "<class 'tessera.KernelError'>"
    assert str(type(e)) == "<class 'tessera.KernelError'>"
    assert traceback.format_exception_only(e)[0].startswith(
        "tessera.KernelError: Out-of-bounds block index")
    try:
        f(_x())
    except IndexError as caught:
        assert isinstance(caught, tessera.KernelError)
    assert repr(tessera.KernelError) == "<class 'tessera.KernelError'>"
    assert repr(tessera.CompileError) == "<class 'tessera.CompileError'>"
    # the traceback stops at the bridge's entry: one frame of the package's
    package = str(pathlib.Path(tessera.__file__).resolve().parent)
    frames = [fr.filename for fr in traceback.extract_tb(e.__traceback__)
              if str(pathlib.Path(fr.filename).resolve()).startswith(package)]
    assert len(frames) == 1 and frames[0].endswith("_api.py"), frames


PYTEST_FILE = '''
import jax, jax.numpy as jnp
from jax.experimental import pallas as pl

def kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2

def test_block_out_of_range():
    f = pl.pallas_call(kernel, grid=(8,),
                       in_specs=[pl.BlockSpec((8, 128), lambda i: (i + 1, 0))],
                       out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
                       out_shape=jax.ShapeDtypeStruct((64, 128), jnp.float32))
    f(jnp.ones((64, 128), jnp.float32))
'''


def test_a_pytest_failure_report_starts_with_the_diagnostics(tmp_path):
    (tmp_path / "test_user.py").write_text(textwrap.dedent(PYTEST_FILE))
    package = str(pathlib.Path(tessera.__file__).resolve().parents[1])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [package, os.environ.get("PYTHONPATH", "")]), JAX_PLATFORMS="cpu")
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tessera.jax.pytest_plugin", "--tessera",
         "-p", "no:cacheprovider", "-q", "test_user.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    out = run.stdout
    assert run.returncode == 1, out + run.stderr
    report = out[out.index("_ test_block_out_of_range _"):]
    lines = report.splitlines()
    # the header, then the diagnostics, then the test's code
    assert lines[1] == "tessera diagnostics:", report
    assert re.match(r".*test_user\.py:10:\d+: error: kernel @kernel, grid point \(7\): "
                    r"in %x_ref: index map gives block index \[8, 0\]", lines[2]), report
    assert "    def test_block_out_of_range():" in lines[3:6], report
    assert "E       tessera.KernelError: Out-of-bounds block index [8, 0] for input " \
           '"x_ref"' in report, report
    # no frame of tessera's: the report ends at the user's call
    assert "tessera/jax/" not in report and "_executable.py" not in report, report
    assert "test_user.py:13: KernelError" in report, report


def test_a_collected_warning_names_the_index_map():
    # collected warnings (interpret mode's default) take the text as the
    # kernel runs: it names the index map's line and column, as the record
    tj.clear_collected_warnings()
    f = tj.pallas_call(double, jax.ShapeDtypeStruct((16, 128), F32), grid=(1,),
                       warnings="collect",
                       in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
                       out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)))  # HALF_WRITTEN
    f(_x()[:16])
    line, col = _line_col("HALF_WRITTEN")
    warned = [t for t in tj.collected_warnings() if "never written" in t]
    assert warned and warned[0].startswith(f"{__file__}:{line}:{col}: warning: "), warned
    assert "out %o_ref: " in warned[0], warned
