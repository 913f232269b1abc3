"""The bridge's cache (a second call neither traces, translates nor prepares),
interpret()'s patching (restored on exit, per thread), the builder, and the
pytest plugin (`pytest --tessera`)."""

from __future__ import annotations

import pathlib
import sys
import threading

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
jax = pytest.importorskip("jax")

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.experimental import pallas as pl  # noqa: E402

import tessera.jax as tj  # noqa: E402
from tessera import _builder as B  # noqa: E402
from tessera.jax import _jax_internal as ji  # noqa: E402

pytest_plugins = ["pytester"]

F32 = jnp.float32


def double_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2.0


def _double(shape=(16, 128), **kw):
    return tj.pallas_call(double_kernel, jax.ShapeDtypeStruct(shape, F32), grid=(shape[0] // 8,),
                          in_specs=[pl.BlockSpec((8, shape[1]), lambda i: (i, 0))],
                          out_specs=pl.BlockSpec((8, shape[1]), lambda i: (i, 0)), **kw)


def test_bridge_second_call_does_no_tracing_or_translation():
    tj.cache_clear()
    f = _double()
    x = np.ones((16, 128), np.float32)
    np.testing.assert_array_equal(np.asarray(f(x)), 2 * x)
    assert tj.cache_info() == {"hits": 0, "misses": 1, "traces": 1, "runs": 1, "entries": 1}
    for _ in range(3):
        np.testing.assert_array_equal(np.asarray(f(x + 1)), 2 * (x + 1))
    assert tj.cache_info() == {"hits": 0, "misses": 1, "traces": 1, "runs": 4, "entries": 1}


def test_bridge_same_kernel_from_a_new_pallas_call_is_not_translated_again():
    tj.cache_clear()
    x = np.ones((16, 128), np.float32)
    _double()(x)
    _double()(x)  # a new callable: traced, found prepared
    info = tj.cache_info()
    assert (info["misses"], info["hits"], info["traces"]) == (1, 1, 2)


def test_bridge_cache_keys_on_shapes_dtypes_and_options():
    tj.cache_clear()
    f = _double()
    f(np.ones((16, 128), np.float32))
    f(np.ones((16, 128), np.float32))
    _double((32, 128))(np.ones((32, 128), np.float32))         # other shapes
    _double(backend="cpu")(np.ones((16, 128), np.float32))       # other options
    assert tj.cache_info()["misses"] == 3


def test_bridge_cache_keys_on_source_lines():
    # Two kernels with the same jaxpr on different lines are distinct: each
    # one's diagnostics must name its own line.
    def k1(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2.0

    def k2(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2.0
    tj.cache_clear()
    x = np.ones((8, 128), np.float32)
    tj.pallas_call(k1, jax.ShapeDtypeStruct((8, 128), F32))(x)
    tj.pallas_call(k2, jax.ShapeDtypeStruct((8, 128), F32))(x)
    assert tj.cache_info()["misses"] == 2


def test_bridge_jit_traces_once():
    tj.cache_clear()
    f = jax.jit(lambda x: _double()(x) + 1.0)
    x = np.ones((16, 128), np.float32)
    for _ in range(3):
        np.testing.assert_array_equal(np.asarray(f(x)), 3 * x)
    assert tj.cache_info()["traces"] == 1


def test_bridge_interpret_restores_pallas_call_on_exit():
    from jax._src.pallas import pallas_call as pc
    before = pc._pallas_call  # JAX's own, unless an InterpretParams hooked it for good
    original = ji.original_pallas_call_impl()
    with tj.interpret():
        assert pc._pallas_call is not original
        with tj.interpret(backend="cpu"):  # nested
            pass
        assert pc._pallas_call is not original
    assert pc._pallas_call is before
    with pytest.raises(RuntimeError):
        with tj.interpret():
            raise RuntimeError("boom")
    assert pc._pallas_call is before


def test_bridge_interpret_outside_the_block_is_jax():
    x = np.ones((8, 128), np.float32)
    f = pl.pallas_call(double_kernel, jax.ShapeDtypeStruct((8, 128), F32), interpret=True)
    assert not isinstance(f, tj.TesseraPallasCall)
    with tj.interpret():
        g = pl.pallas_call(double_kernel, jax.ShapeDtypeStruct((8, 128), F32))
    assert isinstance(g, tj.TesseraPallasCall)
    np.testing.assert_array_equal(np.asarray(g(x)), 2 * x)


def test_bridge_interpret_is_per_thread():
    seen = {}
    inside = threading.Event()
    checked = threading.Event()

    def other():
        inside.wait(10)
        seen["other"] = pl.pallas_call(double_kernel, jax.ShapeDtypeStruct((8, 128), F32),
                                       interpret=True)
        checked.set()

    t = threading.Thread(target=other)
    t.start()
    with tj.interpret():
        seen["mine"] = pl.pallas_call(double_kernel, jax.ShapeDtypeStruct((8, 128), F32))
        inside.set()
        checked.wait(10)
    t.join()
    assert isinstance(seen["mine"], tj.TesseraPallasCall)
    assert not isinstance(seen["other"], tj.TesseraPallasCall)


def test_bridge_interpret_passes_options():
    x = np.ones((16, 128), np.float32)
    with tj.interpret(backend="cpu"):
        f = pl.pallas_call(double_kernel, jax.ShapeDtypeStruct((16, 128), F32))
    # interpret mode collects warnings JAX would not give (docs/jax.md)
    assert f._options == {"backend": "cpu", "warnings": "collect"}
    np.testing.assert_array_equal(np.asarray(f(x)), 2 * x)


def test_bridge_lower_to_tsr_gives_the_kernel_text():
    text = tj.lower_to_tsr(double_kernel, jax.ShapeDtypeStruct((16, 128), F32),
                           jax.ShapeDtypeStruct((16, 128), F32), grid=(2,),
                           in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
                           out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)))
    assert "kernel @double_kernel" in text
    assert "in %x_ref: f32[16, 128] vmem block[8, 128] map(%x_ref.g0) -> (%x_ref.g0, 0)" in text
    assert "mul" in text


def test_bridge_builder_builds_and_verifies_a_kernel():
    mb = B.ModuleBuilder("built.py")
    kb = mb.kernel("k")
    kb.set_grid([2], ["parallel"])
    t = B.Type.value("f32", (16, 128))
    x, xmap = kb.add_operand(B.ROLE_IN, "x", t, "vmem", [8, 128])
    y, ymap = kb.add_operand(B.ROLE_OUT, "y", t, "vmem", [8, 128])
    for region in (xmap, ymap):
        g = kb.region_arg(region, 0, B.Type.value("i32", ()))
        z = kb.const(region, 0, B.Type.value("i32", ()))
        kb.op(region, "yield", [g, z])
    vt = B.Type.value("f32", (8, 128))
    full = [B.Index.full(), B.Index.full()]
    full = [B.Index("full", 0, 8), B.Index("full", 0, 128)]
    _, (v,) = kb.op(kb.body, "load", [x], [vt], indices=full, loc=("built.py", 7, 3))
    _, (w,) = kb.op(kb.body, "exp", [v], [vt], loc=("built.py", 8, 3))
    kb.op(kb.body, "store", [y, w], [], indices=full, loc=("built.py", 9, 3))
    mb.verify()
    text = mb.text()
    assert "grid(2) semantics(parallel)" in text
    assert "exp" in text and "store %y[:, :]" in text
    # A type error is a verify error at the op's Python location.
    _, (bad,) = kb.op(kb.body, "add", [v, kb.const(kb.body, 1, B.Type.value("i32", ()))],
                      [vt], loc=("built.py", 12, 5))
    with pytest.raises(Exception, match="built.py:12:5"):
        mb.verify()


def test_bridge_internal_reports_the_jax_version():
    assert any(ji.JAX_VERSION.startswith(v) for v in ji.SUPPORTED_JAX)
    assert "dot_general" in tj.supported_primitives()


PLUGIN_TEST = '''
import jax, jax.numpy as jnp, numpy as np
from jax.experimental import pallas as pl

def oob_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[pl.ds(pl.program_id(0) * 8 + 4, 8), :]  # the bad line

def test_ok():
    def k(x_ref, o_ref):
        o_ref[...] = x_ref[...] + 1.0
    x = np.zeros((8, 128), np.float32)
    f = pl.pallas_call(k, jax.ShapeDtypeStruct((8, 128), jnp.float32), interpret=True)
    from tessera.jax import TesseraPallasCall
    assert isinstance(f, TesseraPallasCall)
    np.testing.assert_array_equal(np.asarray(f(x)), x + 1)

def test_oob_under_jit():
    f = pl.pallas_call(oob_kernel, jax.ShapeDtypeStruct((8, 128), jnp.float32), grid=(2,),
                       in_specs=[pl.BlockSpec((16, 128), lambda i: (0, 0))],
                       out_specs=pl.BlockSpec((8, 128), lambda i: (0, 0)), interpret=True)
    jax.block_until_ready(jax.jit(f)(np.zeros((16, 128), np.float32)))

def test_oob():
    pl.pallas_call(oob_kernel, jax.ShapeDtypeStruct((8, 128), jnp.float32), grid=(2,),
                   in_specs=[pl.BlockSpec((16, 128), lambda i: (0, 0))],
                   out_specs=pl.BlockSpec((8, 128), lambda i: (0, 0)),
                   interpret=True)(np.zeros((16, 128), np.float32))
'''


def _plugin_args() -> list[str]:
    """`-p tessera.jax.pytest_plugin` unless the installed package already
    registers it as an entry point."""
    from importlib.metadata import entry_points
    if any(ep.value == "tessera.jax.pytest_plugin" for ep in entry_points(group="pytest11")):
        return []
    return ["-p", "tessera.jax.pytest_plugin"]


def test_bridge_pytest_plugin_named_on_the_command_line_loads_once(pytester):
    # docs/jax.md's `-p tessera.jax.pytest_plugin --tessera`, whether the
    # package is installed (the entry point) or not; its own process, as a
    # user runs it
    pytester.makepyfile(test_once="def test_nothing():\n    assert 1 + 1 == 2\n")
    result = pytester.runpytest_subprocess("-p", "tessera.jax.pytest_plugin", "--tessera")
    result.assert_outcomes(passed=1)
    assert "already registered" not in result.stderr.str() + result.stdout.str()


def test_bridge_pytest_plugin_entry_point_is_named_as_its_module():
    # pytest skips an entry point whose name is already a loaded plugin's:
    # named otherwise, `-p tessera.jax.pytest_plugin` with the package
    # installed stops pytest ("Plugin already registered under a different
    # name").
    from importlib.metadata import entry_points
    eps = [ep for ep in entry_points(group="pytest11") if ep.value == "tessera.jax.pytest_plugin"]
    if not eps:
        pytest.skip("the tessera package is not installed (no pytest11 entry point)")
    assert [ep.name for ep in eps] == ["tessera.jax.pytest_plugin"]


def test_bridge_pytest_plugin_runs_a_suite_through_tessera(pytester):
    from jax._src.pallas import pallas_call as pc
    before = pc._pallas_call
    pytester.makepyfile(test_suite=PLUGIN_TEST)
    result = pytester.runpytest_inprocess(*_plugin_args(), "--tessera",
                                          "--tessera-backend", "interp")
    result.assert_outcomes(passed=1, failed=2)
    bad = next(n for n, line in enumerate(PLUGIN_TEST.lstrip("\n").splitlines(), 1)
               if line.endswith("# the bad line"))
    result.stdout.fnmatch_lines(["*tessera diagnostics*",
                                 f"*test_suite.py:{bad}:*out of bounds*"])
    assert result.stdout.str().count("tessera diagnostics") == 2  # also the jit'ed one
    assert pc._pallas_call is before  # restored after the run


def test_bridge_pytest_plugin_off_without_the_flag(pytester):
    pytester.makepyfile(test_suite=PLUGIN_TEST)
    result = pytester.runpytest_inprocess(*_plugin_args(), "-k", "test_ok")
    result.assert_outcomes(failed=1)  # JAX's own interpret=True: not a TesseraPallasCall


def test_bridge_plugin_import_does_not_import_jax():
    # pytest loads the plugin in every run: it must stay cheap without --tessera.
    import subprocess
    code = ("import sys, tessera.jax.pytest_plugin, tessera.jax; "
            "assert 'jax' not in sys.modules, sorted(m for m in sys.modules if 'jax' in m)")
    python_dir = str(pathlib.Path(__file__).resolve().parents[1])
    env = dict(__import__("os").environ, PYTHONPATH=python_dir)
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_bridge_interpret_retraces_functions_jitted_outside():
    x = np.ones((8, 128), np.float32)

    def fn(v):
        return pl.pallas_call(double_kernel, jax.ShapeDtypeStruct((8, 128), F32),
                              interpret=True)(v)
    jf = jax.jit(fn)
    runs = tj.cache_info()["runs"]
    jf(x)  # JAX's interpret=True, compiled and cached
    assert tj.cache_info()["runs"] == runs
    with tj.interpret():
        np.testing.assert_array_equal(np.asarray(jf(x)), 2 * x)
    assert tj.cache_info()["runs"] == runs + 1  # traced again, through tessera
    np.testing.assert_array_equal(np.asarray(jf(x)), 2 * x)
    assert tj.cache_info()["runs"] == runs + 1  # outside again: JAX's own


def test_bridge_interpret_params_value_runs_one_call_through_tessera():
    x = np.ones((8, 128), np.float32)
    f = pl.pallas_call(double_kernel, jax.ShapeDtypeStruct((8, 128), F32),
                       interpret=tj.InterpretParams(backend="cpu"))
    assert isinstance(f, tj.TesseraPallasCall) and f._options == {"backend": "cpu"}
    np.testing.assert_array_equal(np.asarray(f(x)), 2 * x)
    g = pl.pallas_call(double_kernel, jax.ShapeDtypeStruct((8, 128), F32), interpret=True)
    assert not isinstance(g, tj.TesseraPallasCall)
    assert tj.InterpretParams(uninit="zero") == tj.InterpretParams(uninit="zero")


def _direct_runs() -> int:
    from tessera import _capi
    return _capi.lib().tsr_xla_direct_runs()


def test_bridge_jit_runs_a_quiet_kernel_without_python_and_counts_it():
    tj.cache_clear()
    f = jax.jit(_double())
    x = np.arange(16 * 128, dtype=np.float32).reshape(16, 128)
    before = _direct_runs()
    for i in range(5):
        np.testing.assert_array_equal(np.asarray(f(x + i)), 2 * (x + i))
    assert _direct_runs() == before + 5  # the library's handler ran them all
    assert tj.cache_info()["runs"] == 5


def test_bridge_jit_kernel_that_prints_runs_through_python(capfd):
    def kernel(x_ref, o_ref):
        pl.debug_print("row block {}", pl.program_id(0))
        o_ref[...] = x_ref[...] * 2.0

    f = jax.jit(tj.pallas_call(kernel, jax.ShapeDtypeStruct((16, 128), F32), grid=(2,),
                               in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
                               out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0))))
    x = np.ones((16, 128), np.float32)
    before = _direct_runs()
    np.testing.assert_array_equal(np.asarray(f(x)), 2 * x)
    # its text as it comes (a kernel that never ends still shows its prints)
    assert _direct_runs() == before
    assert "row block 0" in capfd.readouterr().out


def test_bridge_jit_call_of_a_closed_kernel_is_an_error_not_a_crash():
    tj.cache_clear()
    f = jax.jit(_double(shape=(24, 128)))
    x = np.ones((24, 128), np.float32)
    np.testing.assert_array_equal(np.asarray(f(x)), 2 * x)
    import tessera.jax._api as api
    (prep,) = [p for p in api._prepared.values() if p.out_structs[0].shape == (24, 128)]
    prep.runner.executable.close()
    before = _direct_runs()
    with pytest.raises(Exception, match="closed"):
        np.asarray(f(x))
    assert _direct_runs() == before


def test_bridge_jit_runs_an_ffi_custom_call_or_a_pure_callback_on_request():
    x = np.arange(16 * 128, dtype=np.float32).reshape(16, 128)
    f = _double()
    text = jax.jit(f).lower(x).as_text()
    # an XLA FFI custom call, no Python callback: the library's one handler,
    # the kernel named by its attributes
    assert "@tessera_run" in text and "tsr_binding" in text and "callback" not in text
    np.testing.assert_array_equal(np.asarray(jax.jit(f)(x)), 2 * x)
    g = _double(jit_callback="pure_callback")
    text = jax.jit(g).lower(x).as_text()
    assert "tessera_run" not in text and "callback" in text
    np.testing.assert_array_equal(np.asarray(jax.jit(g)(x)), 2 * x)
    with pytest.raises(ValueError, match="jit_callback"):
        _double(jit_callback="nope")


def test_bridge_ffi_call_keeps_aliases_and_reports_kernel_errors():
    def k(x_ref, o_ref):
        o_ref[...] = x_ref[...] + 1.0
    spec = pl.BlockSpec((8, 128), lambda i: (i + 1, 0))
    f = tj.pallas_call(k, jax.ShapeDtypeStruct((16, 128), F32), grid=(1,), in_specs=[spec],
                       out_specs=spec, input_output_aliases={0: 0})
    x = np.ones((16, 128), np.float32)
    out = np.asarray(jax.jit(f)(x))
    np.testing.assert_array_equal(out[:8], x[:8])       # kept from the aliased input
    np.testing.assert_array_equal(out[8:], x[8:] + 1)
    bad = tj.pallas_call(k, jax.ShapeDtypeStruct((16, 128), F32), grid=(2,),
                         in_specs=[spec], out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)))
    with pytest.raises(Exception, match="out of range"):
        jax.block_until_ready(jax.jit(bad)(x))


def test_bridge_pytest_plugin_passes_options(pytester):
    pytester.makepyfile(test_opts='''
import tessera.jax._api as api

def test_options():
    assert api._global_options == {"backend": "cpu", "detect_races": True, "max_errors": 3}
''')
    result = pytester.runpytest_inprocess(*_plugin_args(), "--tessera", "--tessera-backend",
                                          "cpu", "--tessera-option", "detect_races=true",
                                          "--tessera-option", "max_errors=3")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["tessera: every pl.pallas_call runs in tessera (*detect_races=True*"])
    bad = pytester.runpytest_inprocess(*_plugin_args(), "--tessera", "--tessera-option", "nope=1")
    assert bad.ret != 0


def test_bridge_eager_outputs_are_jax_arrays_that_own_their_buffers():
    """An eager call's outputs are the run's buffers adopted by XLA (no copy):
    jax arrays on the CPU device that stay valid after the call's other
    objects are gone, for f32, bf16 (no DLPack in numpy) and bool."""
    import gc

    import ml_dtypes

    def k(x_ref, f_ref, b_ref, p_ref):
        x = x_ref[...]
        f_ref[...] = x * 3.0
        b_ref[...] = x.astype(jnp.bfloat16)
        p_ref[...] = x > 0

    shapes = (jax.ShapeDtypeStruct((8, 128), F32), jax.ShapeDtypeStruct((8, 128), jnp.bfloat16),
              jax.ShapeDtypeStruct((8, 128), jnp.bool_))
    f = tj.pallas_call(k, shapes)
    x = np.random.default_rng(5).standard_normal((8, 128)).astype(np.float32)
    runs = [f(x) for _ in range(20)]
    gc.collect()
    np.full((1 << 20,), 7.0, np.float32)  # reuse freed memory, were any freed
    for out in runs:
        assert all(isinstance(o, jax.Array) for o in out)
        assert [o.dtype for o in out] == [np.float32, jnp.bfloat16, np.bool_]
        np.testing.assert_array_equal(np.asarray(out[0]), x * 3.0)
        np.testing.assert_array_equal(np.asarray(out[1]), x.astype(ml_dtypes.bfloat16))
        np.testing.assert_array_equal(np.asarray(out[2]), x > 0)
    # Usable by JAX like any array (the results feed a jitted function).
    np.testing.assert_allclose(np.asarray(jax.jit(lambda a: a + 1)(runs[0][0])), x * 3.0 + 1)
