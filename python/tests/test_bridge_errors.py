"""The JAX bridge's errors point at the user's Python lines: kernel errors
found by tessera (out of bounds, DMAs never waited, revisited outputs,
uninitialized reads) carry this file's line in their diagnostics, and what
tessera cannot translate names the primitive and the line."""

from __future__ import annotations

import pathlib
import sys

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


def line_of(marker: str) -> int:
    """The line of this file that ends with `# marker`."""
    with open(__file__) as f:
        for n, line in enumerate(f, 1):
            if line.rstrip().endswith("# " + marker):
                return n
    raise LookupError(marker)


def _x(shape=(16, 128)):
    return np.random.default_rng(0).standard_normal(shape).astype(np.float32)


# ---- out of bounds -------------------------------------------------------------------

def oob_kernel(x_ref, o_ref):
    start = pl.program_id(0) * 8 + 4
    o_ref[...] = x_ref[pl.ds(start, 8), :]  # OOB


def run_oob(pallas_call):
    return pallas_call(oob_kernel, jax.ShapeDtypeStruct((8, 128), F32), grid=(2,),
                       in_specs=[pl.BlockSpec((16, 128), lambda i: (0, 0))],
                       out_specs=pl.BlockSpec((8, 128), lambda i: (0, 0)))(_x())


def _find(diags, kind):
    return [d for d in diags if d.kind == kind]


def test_bridge_oob_kernel_error_names_the_python_line():
    with pytest.raises(tj.KernelError) as info:
        run_oob(tj.pallas_call)
    oob = _find(info.value.diagnostics, "out_of_bounds")
    assert oob, info.value.diagnostics
    d = oob[0]
    assert d.file == __file__
    assert d.line == line_of("OOB")
    assert d.grid_point == (1,)  # step 0 reads rows 4..12, in bounds; step 1 12..20
    assert f"{pathlib.Path(__file__).name}:{line_of('OOB')}" in str(info.value)


def test_bridge_oob_through_interpret_names_the_python_line():
    with pytest.raises(tj.KernelError) as info:
        with tj.interpret():
            run_oob(pl.pallas_call)
    assert any(d.line == line_of("OOB") and d.file == __file__
               for d in _find(info.value.diagnostics, "out_of_bounds"))


def test_bridge_oob_under_jit_reports_the_python_line():
    f = jax.jit(lambda: run_oob(tj.pallas_call))
    with pytest.raises(Exception) as info:
        jax.block_until_ready(f())
    assert f"{pathlib.Path(__file__).name}:{line_of('OOB')}" in str(info.value)


def test_bridge_error_under_jit_gives_each_diagnostic_once():
    def k(x_ref, o_ref):
        o_ref[...] = x_ref[...] + 1
    f = tj.pallas_call(k, jax.ShapeDtypeStruct((16, 128), F32), grid=(2,),
                       in_specs=[pl.BlockSpec((8, 128), lambda i: (i + 1, 0))],
                       out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)))
    with pytest.raises(Exception) as info:
        jax.block_until_ready(jax.jit(f)(jnp.ones((16, 128), F32)))
    text = str(info.value)
    assert "index map gives block index [2, 0]" in text
    assert text.count("index map gives block index [2, 0]") == 1, text


# ---- a DMA never waited for -------------------------------------------------------

def missing_wait_kernel(x_hbm, o_ref, buf, sem):
    pltpu.make_async_copy(x_hbm.at[pl.ds(0, 8), :], buf, sem).start()  # NO_WAIT
    o_ref[...] = jnp.zeros_like(o_ref)


def test_bridge_dma_never_waited_names_the_start_line():
    f = tj.pallas_call(missing_wait_kernel, jax.ShapeDtypeStruct((8, 128), F32),
                       in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                       out_specs=pl.BlockSpec((8, 128), lambda: (0, 0)),
                       scratch_shapes=[pltpu.VMEM((8, 128), F32), pltpu.SemaphoreType.DMA])
    with pytest.raises(tj.KernelError) as info:
        f(_x())
    lines = {d.line for d in info.value.diagnostics if d.file == __file__}
    assert line_of("NO_WAIT") in lines, info.value.diagnostics


# ---- a revisited output block ----------------------------------------------------

def revisit_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...]  # REVISIT


def test_bridge_revisited_output_block_is_reported():
    # The output block index goes 0, 1, 0: block 0 is written back, then
    # visited again.
    f = tj.pallas_call(revisit_kernel, jax.ShapeDtypeStruct((16, 128), F32), grid=(3,),
                       in_specs=[pl.BlockSpec((8, 128), lambda i: (0, 0))],
                       out_specs=pl.BlockSpec((8, 128), lambda i: (i % 2, 0)))
    with pytest.raises(tj.KernelError) as info:
        f(_x())
    assert _find(info.value.diagnostics, "revisit"), info.value.diagnostics


# ---- an uninitialized read is a warning with the line --------------------------------

def uninit_kernel(x_ref, o_ref, acc_ref):
    o_ref[...] = x_ref[...] + acc_ref[...]  # UNINIT


def test_bridge_uninitialized_read_warns_with_the_python_line():
    f = tj.pallas_call(uninit_kernel, jax.ShapeDtypeStruct((8, 128), F32),
                       in_specs=[pl.BlockSpec((8, 128), lambda: (0, 0))],
                       out_specs=pl.BlockSpec((8, 128), lambda: (0, 0)),
                       scratch_shapes=[pltpu.VMEM((8, 128), F32)])
    with pytest.warns(UserWarning) as record:
        out = f(_x((8, 128)))
    assert any(f"{pathlib.Path(__file__).name}:{line_of('UNINIT')}" in str(w.message)
               for w in record)
    assert np.isnan(np.asarray(out)).all()  # uninitialized memory reads as NaN


# ---- an operand without a BlockSpec: its warning names the pallas_call ---------------

def half_written_kernel(x_ref, o_ref):
    o_ref[0:4, :] = x_ref[0:4, :]


def test_bridge_warning_on_an_operand_without_blockspec_names_the_call():
    # Pallas gives such an operand its default index map, defined in JAX's
    # pallas/core.py: the warning must name the user's pallas_call instead.
    # (The interpreter checks unwritten outputs; the cpu backend does not.)
    f = tj.pallas_call(half_written_kernel, jax.ShapeDtypeStruct((8, 128), F32))
    with pytest.warns(tessera.KernelWarning) as record:
        f(_x((8, 128)))  # NO_BLOCKSPEC
    unwritten = [w.message.diagnostic for w in record
                 if isinstance(w.message, tessera.KernelWarning) and w.message.diagnostic
                 and w.message.diagnostic.kind == "output_unwritten"]
    assert unwritten, [str(w.message) for w in record]
    d = unwritten[0]
    assert (d.file, d.line) == (__file__, line_of("NO_BLOCKSPEC")), d
    assert "pallas/core.py" not in str(record[0].message)
    assert f"{pathlib.Path(__file__).name}:{line_of('NO_BLOCKSPEC')}:" in d.text


# ---- what tessera cannot translate -----------------------------------------------

def unsupported_kernel(x_ref, o_ref):
    o_ref[...] = jax.lax.igamma(x_ref[...], x_ref[...])  # UNSUPPORTED


def test_bridge_unsupported_primitive_names_it_and_the_line():
    f = tj.pallas_call(unsupported_kernel, jax.ShapeDtypeStruct((8, 128), F32))
    with pytest.raises(tj.TranslationError) as info:
        f(_x((8, 128)))
    e = info.value
    assert e.primitive == "igamma"
    assert e.file == __file__ and e.line == line_of("UNSUPPORTED")
    assert "`igamma` is not supported" in str(e)
    assert f"{__file__}:{line_of('UNSUPPORTED')}" in str(e)


def test_bridge_unsupported_primitive_under_interpret():
    with pytest.raises(tj.TranslationError) as info:
        with tj.interpret():
            pl.pallas_call(unsupported_kernel, jax.ShapeDtypeStruct((8, 128), F32))(_x((8, 128)))
    assert info.value.line == line_of("UNSUPPORTED")


def gather_dma_kernel(x_hbm, i_ref, o_ref):
    def body(sem):
        pltpu.async_copy(x_hbm.at[i_ref[...]], o_ref, sem).wait()  # GATHER
    pl.run_scoped(body, pltpu.SemaphoreType.DMA)


def test_bridge_dma_through_array_indexing_is_refused_with_the_line():
    # reads and writes through arrays of indices are translated (gather,
    # scatter); a DMA of such a view is not
    f = tj.pallas_call(gather_dma_kernel, jax.ShapeDtypeStruct((8, 128), F32),
                       in_specs=[pl.BlockSpec(memory_space=pl.ANY),
                                 pl.BlockSpec(memory_space=pltpu.VMEM)])
    with pytest.raises(tj.TranslationError) as info:
        f(_x((8, 128)), np.arange(8, dtype=np.int32))
    assert info.value.line == line_of("GATHER")
    assert "array of indices" in str(info.value)


def test_bridge_unknown_option_is_a_type_error():
    with pytest.raises(TypeError, match="no_such_option"):
        tj.pallas_call(unsupported_kernel, jax.ShapeDtypeStruct((8, 128), F32),
                       no_such_option=1)
    with pytest.raises(TypeError, match="no_such_option"):
        tj.interpret(no_such_option=1)


def test_bridge_unsupported_dtype_is_refused():
    def k(x_ref, o_ref):
        o_ref[...] = x_ref[...]
    f = tj.pallas_call(k, jax.ShapeDtypeStruct((8, 128), jnp.complex64))
    with pytest.raises(tj.TranslationError, match="complex64") as info:
        f(np.zeros((8, 128), np.complex64))  # COMPLEX
    assert info.value.file == __file__ and info.value.line == line_of("COMPLEX")


# ---- pl.debug_check becomes an assert ---------------------------------------------

def check_kernel(x_ref, o_ref):
    pl.debug_check(jnp.all(x_ref[...] > 0), "x must be positive")  # CHECK
    o_ref[...] = x_ref[...]


def test_bridge_debug_check_fails_with_its_message_and_line():
    with pl.enable_debug_checks(True):
        f = tj.pallas_call(check_kernel, jax.ShapeDtypeStruct((8, 128), F32))
        ok = np.ones((8, 128), np.float32)
        np.testing.assert_array_equal(np.asarray(f(ok)), ok)
        with pytest.raises(tj.KernelError) as info:
            f(-ok)
    d = _find(info.value.diagnostics, "assert")
    assert d and d[0].line == line_of("CHECK") and "x must be positive" in d[0].message


# ---- races and deadlocks name the lines ----------------------------------------------

def race_kernel(x_hbm, o_ref, buf, sem):
    copy = pltpu.make_async_copy(x_hbm.at[pl.ds(0, 8), :], buf, sem)
    copy.start()  # RACE_WRITE
    o_ref[...] = buf[...]  # RACE_READ
    copy.wait()


def test_bridge_race_names_both_lines():
    f = tj.pallas_call(race_kernel, jax.ShapeDtypeStruct((8, 128), F32),
                       in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                       out_specs=pl.BlockSpec((8, 128), lambda: (0, 0)),
                       scratch_shapes=[pltpu.VMEM((8, 128), F32), pltpu.SemaphoreType.DMA],
                       detect_races=True)
    with pytest.raises(tj.KernelError) as info:
        f(_x())
    races = _find(info.value.diagnostics, "race")
    assert races, info.value.diagnostics
    lines = {races[0].line, races[0].other_line}
    assert lines == {line_of("RACE_WRITE"), line_of("RACE_READ")}
    assert races[0].file == __file__


def deadlock_kernel(x_ref, o_ref, sem):
    pl.semaphore_wait(sem, 1)  # DEADLOCK
    o_ref[...] = x_ref[...]


def test_bridge_deadlock_names_the_wait():
    f = tj.pallas_call(deadlock_kernel, jax.ShapeDtypeStruct((8, 128), F32),
                       scratch_shapes=[pltpu.SemaphoreType.REGULAR])
    with pytest.raises(tj.KernelError) as info:
        f(_x((8, 128)))
    d = _find(info.value.diagnostics, "deadlock")
    assert d and d[0].line == line_of("DEADLOCK") and d[0].file == __file__


# ---- a block index out of range names the BlockSpec's index map ---------------------

def copy_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...]


def test_bridge_block_index_out_of_range_names_the_index_map():
    f = tj.pallas_call(copy_kernel, jax.ShapeDtypeStruct((16, 128), F32), grid=(2,),
                       in_specs=[pl.BlockSpec((8, 128), lambda i: (i + 1, 0))],  # BAD_MAP
                       out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)))
    with pytest.raises(tj.KernelError) as info:
        f(_x())
    d = _find(info.value.diagnostics, "out_of_bounds")
    assert d and d[0].buffer == "x_ref" and d[0].grid_point == (1,)
    assert d[0].file == __file__ and d[0].line == line_of("BAD_MAP")
    assert f"{pathlib.Path(__file__).name}:{line_of('BAD_MAP')}:" in d[0].text
    # The error's message quotes the records as the user sees them, not the
    # declaration's missing line.
    assert f"{pathlib.Path(__file__).name}:{line_of('BAD_MAP')}:" in str(info.value)
    assert ":0:0:" not in str(info.value)


def test_bridge_vmem_over_budget_is_a_compile_error_at_the_call():
    import tessera

    f = tj.pallas_call(copy_kernel, jax.ShapeDtypeStruct((4096, 4096), F32), chip="v5e")
    x = np.zeros((4096, 4096), np.float32)
    with pytest.raises(tessera.CompileError) as info:
        f(x)  # TOO_BIG
    d = info.value.diagnostics
    assert [r.kind for r in d] == ["vmem_budget"]
    assert d[0].file == __file__ and d[0].line == line_of("TOO_BIG")
    assert f"{pathlib.Path(__file__).name}:{line_of('TOO_BIG')}:" in str(info.value)
    assert "128.0 MiB" in str(info.value)


# ---- what tessera's verifier rejects (ir/verify*.c), at the user's line -------------

def hbm_load_kernel(x_hbm, o_ref):
    o_ref[...] = x_hbm[...]  # HBM_LOAD


def test_bridge_load_from_an_hbm_ref_is_the_verifiers_error_at_the_line():
    import tessera

    f = tj.pallas_call(hbm_load_kernel, jax.ShapeDtypeStruct((8, 128), F32),
                       in_specs=[pl.BlockSpec(memory_space=pl.ANY)])
    with pytest.raises(tessera.CompileError) as info:
        f(_x((8, 128)))
    d = info.value.diagnostics
    assert d and d[0].file == __file__ and d[0].line == line_of("HBM_LOAD")
    assert "any refs cannot be loaded directly, only DMA'd" in d[0].text


def prefetch_kernel(p_ref, x_ref, o_ref):
    o_ref[...] = x_ref[...] + p_ref[0].astype(F32)


def test_bridge_int4_prefetch_is_the_verifiers_error_at_the_call():
    # bf16, i16 and i8 scalar prefetch are Pallas's (SMEM scalars); a
    # sub-byte dtype has no scalar form in SMEM.
    import tessera

    spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=1, grid=(1,),
        in_specs=[pl.BlockSpec((8, 128), lambda i, p: (0, 0))],
        out_specs=pl.BlockSpec((8, 128), lambda i, p: (0, 0)))
    f = tj.pallas_call(prefetch_kernel, jax.ShapeDtypeStruct((8, 128), F32), grid_spec=spec)
    with pytest.raises(tessera.CompileError) as info:
        f(jnp.ones((4,), jnp.int4), _x((8, 128)))  # INT4_PREFETCH
    d = info.value.diagnostics
    assert d[0].file == __file__ and d[0].line == line_of("INT4_PREFETCH")
    assert "scalar prefetch holds 8-, 16- or 32-bit elements or i1, found i4[4]" in d[0].text


def test_bridge_parallel_dim_after_arbitrary_runs_as_arbitrary():
    # The verifier wants parallel dimensions first; Pallas does not, so the
    # translator runs such a dimension in order instead of refusing it.
    spec = pl.BlockSpec((8, 128), lambda i, j: (i, 0))
    f = tj.pallas_call(copy_kernel, jax.ShapeDtypeStruct((16, 128), F32), grid=(2, 2),
                       in_specs=[spec], out_specs=spec,
                       compiler_params=pltpu.CompilerParams(
                           dimension_semantics=("arbitrary", "parallel")))
    x = _x()
    assert "semantics(arbitrary, arbitrary)" in f.lower_to_tsr(x)
    np.testing.assert_array_equal(np.asarray(f(x)), x)


def test_bridge_pallas_own_errors_pass_through():
    table = jnp.arange(8 * 128, dtype=F32).reshape(8, 128)

    def k(x_ref, o_ref):
        o_ref[...] = x_ref[...] + table   # a captured array: not an operand

    f = tj.pallas_call(k, jax.ShapeDtypeStruct((8, 128), F32))
    with pytest.raises(ValueError, match="captures constants"):
        f(_x((8, 128)))


# ---- Ctrl-C inside jax.jit ------------------------------------------------------------

_CTRL_C_SCRIPT = r'''
import json, os, signal, sys, threading
import numpy as np, jax, jax.numpy as jnp
from jax.experimental import pallas as pl
import tessera.jax as tj

def spin(x_ref, o_ref):
    pl.debug_print("started")
    n = jax.lax.while_loop(lambda c: c >= 0, lambda c: c + 1, jnp.int32(0))  # endless
    o_ref[...] = x_ref[...] + n.astype(jnp.float32)

def ctrl_c(text):  # Ctrl-C once the run has started, from outside the run
    if "started" in text:
        threading.Thread(target=os.kill, args=(os.getpid(), signal.SIGINT)).start()

call = tj.pallas_call(spin, jax.ShapeDtypeStruct((8, 128), jnp.float32), on_print=ctrl_c,
                      timeout_seconds=600, jit_callback=sys.argv[1], backend=sys.argv[2])
try:
    np.asarray(jax.jit(call)(np.zeros((8, 128), np.float32)))
    print(json.dumps({"error": None}))
except BaseException as e:
    print(json.dumps({"error": type(e).__name__, "message": str(e)}))
'''


# The same kernel without its print runs in the library's FFI handler alone
# (no Python during the run): Ctrl-C comes once the library counts the run.
_CTRL_C_DIRECT_SCRIPT = r'''
import json, os, signal, sys, threading, time
import numpy as np, jax, jax.numpy as jnp
from jax.experimental import pallas as pl
import tessera.jax as tj
from tessera import _capi

def spin(x_ref, o_ref):
    n = jax.lax.while_loop(lambda c: c >= 0, lambda c: c + 1, jnp.int32(0))  # endless
    o_ref[...] = x_ref[...] + n.astype(jnp.float32)

def ctrl_c_once_running(before):
    while _capi.lib().tsr_xla_direct_runs() == before:
        time.sleep(0.01)
    time.sleep(0.2)
    os.kill(os.getpid(), signal.SIGINT)

call = jax.jit(tj.pallas_call(spin, jax.ShapeDtypeStruct((8, 128), jnp.float32),
                              timeout_seconds=600, backend=sys.argv[2]))
x = np.zeros((8, 128), np.float32)
call.lower(x).compile()
threading.Thread(target=ctrl_c_once_running, args=(_capi.lib().tsr_xla_direct_runs(),),
                 daemon=True).start()
try:
    np.asarray(call(x))
    print(json.dumps({"error": None}))
except BaseException as e:
    print(json.dumps({"error": type(e).__name__, "message": str(e)}))
'''


@pytest.mark.parametrize("jit_callback,backend", [("ffi", "interp"), ("pure_callback", "interp"),
                                                  ("ffi", "cpu"), ("direct", "interp"),
                                                  ("direct", "cpu")])
def test_bridge_ctrl_c_under_jit_says_the_run_was_interrupted(tmp_path, jit_callback, backend):
    # A subprocess: the SIGINT must not reach pytest. The kernel runs until
    # Ctrl-C stops it (its 600 s timeout is past the subprocess's).
    import json
    import os
    import subprocess

    script = tmp_path / "ctrl_c.py"
    script.write_text(_CTRL_C_DIRECT_SCRIPT if jit_callback == "direct" else _CTRL_C_SCRIPT)
    # the tessera this test imported (the tree's, or an installed wheel's)
    package = str(pathlib.Path(tessera.__file__).resolve().parents[1])
    env = dict(os.environ, JAX_PLATFORMS="cpu",
               PYTHONPATH=os.pathsep.join([package, os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, str(script), jit_callback, backend],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["error"] == "JaxRuntimeError", out
    assert "tessera.jax: the kernel's run was interrupted (Ctrl-C" in out["message"], out
    if jit_callback != "pure_callback":  # XLA's status code says it too
        assert out["message"].startswith("CANCELLED: "), out
