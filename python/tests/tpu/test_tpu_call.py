"""tessera's Python TPU path (docs/tpu.md): Kernel.to_mosaic (the C
API tsr_tpu_emit through ctypes) and tessera.jax.tpu_call, a JAX-callable
that is a Pallas-style `tpu_custom_call` when lowered for TPU and runs in
tessera on CPU."""

from __future__ import annotations

import jax
import numpy as np
import pytest

import tessera
import tessera.jax as tj
from tessera.jax import _jax_internal as ji

import tpu_proof as P


def _kernel(name="add", file="kernels/examples/add.tsr"):
    return P.kernel(file, name)


def _inputs(kernel, seed=1):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(o.shape).astype(o.dtype) for o in kernel.inputs]


def test_to_mosaic_is_a_module_jaxlib_verifies():
    text = _kernel().to_mosaic("v5e")
    module = ji.parse_mosaic(text)
    s = P.structure(text)
    assert s["kernel"] == "add"
    assert s["iteration_bounds"] == "array<i64: 8>"
    assert ji.mosaic_text(module).count("func.func") == 4  # the kernel + 3 transforms


def test_to_mosaic_default_chip_is_v5e():
    k = _kernel()
    assert k.to_mosaic(None) == k.to_mosaic("v5e")


def test_to_mosaic_unknown_chip_is_a_compile_error():
    with pytest.raises(tessera.CompileError):
        _kernel().to_mosaic("v99")


def test_tpu_call_export_for_tpu_round_trips():
    k = _kernel()
    call = tj.tpu_call(k, chip="v5e")
    exported = jax.export.export(jax.jit(call), platforms=["tpu"])(*call.in_structs)
    back = jax.export.deserialize(exported.serialize())
    assert back.platforms == ("tpu",)
    assert [(a.shape, a.dtype) for a in back.in_avals] == \
        [(s.shape, s.dtype) for s in call.in_structs]
    assert [(a.shape, a.dtype) for a in back.out_avals] == \
        [(s.shape, s.dtype) for s in call.out_structs]
    calls = ji.tpu_custom_calls(back.mlir_module())
    assert len(calls) == 1 and calls[0]["kernel_name"] == "add"
    body = calls[0]["body"]
    assert body[:4] == b"ML\xefR"  # MLIR bytecode
    decoded = ji.parse_mosaic(body, serialized=True)
    text = ji.mosaic_text(decoded)
    assert f"stable_mosaic.version = {ji.mosaic_export_version()}" in text
    # The body is tessera's module, unchanged but for the version attribute.
    ours = ji.mosaic_text(ji.parse_mosaic(k.to_mosaic("v5e")))
    strip = lambda t: t.replace(f" attributes {{stable_mosaic.version = "  # noqa: E731
                                f"{ji.mosaic_export_version()} : i64}}", "")
    assert P.structure(strip(text)) == P.structure(ours)
    # ... and libtpu compiles the deserialised export for a chip.
    compiled = ji.compile_for_device(back.call, call.in_structs, ji.tpu_device("v6e"))
    assert compiled.as_text() is not None


def test_tpu_export_does_not_run_on_cpu():
    call = tj.tpu_call(_kernel(), chip="v5e")
    exported = jax.export.export(jax.jit(call), platforms=["tpu"])(*call.in_structs)
    with pytest.raises(ValueError, match="exported for platforms"):
        exported.call(*_inputs(_kernel()))


CPU_KERNELS = [("kernels/examples/add.tsr", "add"), ("kernels/examples/matmul.tsr", "matmul"),
               ("kernels/examples/gather_prefetch.tsr", "gather_prefetch"),  # prefetch
               ("kernels/examples/int_hash.tsr", "int_hash"),                # 3 outputs
               ("kernels/examples/bf16_axpy.tsr", "bf16_axpy")]


def _valid_inputs(k):
    xs = _inputs(k)
    for i, o in enumerate(k.inputs):
        if o.role == "prefetch":  # block indices of gather_prefetch's %x (8 blocks)
            xs[i] = (np.arange(np.prod(o.shape)) * 3 % 8).reshape(o.shape).astype(o.dtype)
        elif np.dtype(o.dtype).kind in "iu":
            xs[i] = np.random.default_rng(i).integers(-1000, 1000, o.shape).astype(o.dtype)
    return xs


@pytest.mark.parametrize("file,name", CPU_KERNELS, ids=[n for _, n in CPU_KERNELS])
def test_tpu_call_runs_in_tessera_on_cpu(file, name):
    k = _kernel(name, file)
    xs = _valid_inputs(k)
    got = tj.tpu_call(k, chip="v5e")(*xs)
    got = got if isinstance(got, tuple) else (got,)
    want = tessera.run(k, *xs)
    want = want if isinstance(want, tuple) else (want,)
    assert len(got) == len(want) == len(k.outputs)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), w)
    if name == "add":
        np.testing.assert_array_equal(np.asarray(got[0]), xs[0] + xs[1])


@pytest.mark.parametrize("file,name", CPU_KERNELS, ids=[n for _, n in CPU_KERNELS])
def test_tpu_call_exports_for_tpu_and_compiles(file, name):
    k = _kernel(name, file)
    call = tj.tpu_call(k, chip="v6e")
    exported = jax.export.export(jax.jit(call), platforms=["tpu"])(*call.in_structs)
    back = jax.export.deserialize(exported.serialize())
    assert len(back.out_avals) == len(k.outputs)
    assert [c["kernel_name"] for c in ji.tpu_custom_calls(back.mlir_module())] == [name]
    ji.compile_for_device(back.call, call.in_structs, ji.tpu_device("v6e"))


def test_tpu_call_on_cpu_under_jit_with_other_ops():
    k = _kernel()
    call = tj.tpu_call(k)
    xs = _inputs(k)
    got = jax.jit(lambda a, b: call(a, b) * 2)(*xs)
    np.testing.assert_array_equal(np.asarray(got), (xs[0] + xs[1]) * 2)


def test_tpu_call_cpu_error_mode_refuses_cpu():
    call = tj.tpu_call(_kernel(), cpu="error")
    with pytest.raises(NotImplementedError, match="cpu='error'"):
        call(*_inputs(_kernel()))


def test_tpu_call_checks_its_arguments():
    call = tj.tpu_call(_kernel())
    with pytest.raises(TypeError, match="takes 2 arrays"):
        call(np.zeros((1024, 512), np.float32))
    with pytest.raises(TypeError, match=r"argument 1 \(%b\)"):
        call(np.zeros((1024, 512), np.float32), np.zeros((8, 512), np.float32))
    with pytest.raises(ValueError, match="unknown chip"):
        tj.tpu_call(_kernel(), chip="v1")
    with pytest.raises(TypeError):
        tj.tpu_call(_kernel(), colour="blue")


def test_serialize_mosaic_round_trips():
    text = _kernel().to_mosaic("v6e")
    module = ji.parse_mosaic(text)
    for version in (ji.mosaic_export_version(), ji.mosaic_export_version() - 2):
        data = ji.serialize_mosaic(module, version)
        assert data[:4] == b"ML\xefR"
        back = ji.mosaic_text(ji.parse_mosaic(data, serialized=True))
        assert f"stable_mosaic.version = {version}" in back
    # the module given is left as it was
    assert ji.mosaic_text(module) == ji.mosaic_text(ji.parse_mosaic(text))


def test_parse_mosaic_reports_mlir_errors():
    with pytest.raises(ji.MosaicParseError, match="tpu.no_such_op"):
        ji.parse_mosaic('module {\n func.func @k() {\n "tpu.no_such_op"() : () -> ()\n'
                        ' return\n }\n}\n')


_NO_MOSAIC = ("tests/diagnostics/ok/dma_add_accumulate.tsr", "dma_add_accumulate")


def test_to_mosaic_failure_is_located():
    k = _kernel(_NO_MOSAIC[1], _NO_MOSAIC[0])
    with pytest.raises(tessera.CompileError) as info:
        k.to_mosaic("v5e")
    errors = [d for d in info.value.diagnostics if d.severity == "error"]
    assert errors, info.value
    d = errors[0]
    assert d.file and d.file.endswith("dma_add_accumulate.tsr")
    assert d.line and d.line > 0 and d.op == "dma_start"
    assert "no Mosaic form" in d.message


def test_tpu_call_of_a_kernel_tessera_cannot_emit():
    k = _kernel(_NO_MOSAIC[1], _NO_MOSAIC[0])
    call = tj.tpu_call(k, chip="v5e")
    # on CPU it runs in tessera: the TPU lowering is never built ...
    xs = _inputs(k)
    got = call(*xs)
    want = tessera.run(k, *xs)
    for g, w in zip(got if isinstance(got, tuple) else (got,),
                    want if isinstance(want, tuple) else (want,)):
        np.testing.assert_array_equal(np.asarray(g), w)
    # ... and lowering it for TPU gives the emitter's located error
    with pytest.raises(tessera.CompileError, match="no Mosaic form"):
        jax.export.export(jax.jit(call), platforms=["tpu"])(*call.in_structs)


def test_tpu_call_of_an_aliased_output():
    k = tessera.Module.load(P.ROOT / "tests/cli/alias.tsr")["inc_top"]
    call = tj.tpu_call(k, chip="v5e")
    assert call.aliases == ((0, 0),)
    exported = jax.export.export(jax.jit(call), platforms=["tpu"])(*call.in_structs)
    assert "output_operand_aliases" in exported.mlir_module()
    ji.compile_for_device(exported.call, call.in_structs, ji.tpu_device("v5e"))
    x = _inputs(k)[0]
    np.testing.assert_array_equal(np.asarray(call(x)), tessera.run(k, x))


def test_to_mosaic_with_a_context_uses_its_disk_cache(tmp_path):
    k = _kernel("matmul", "kernels/examples/matmul.tsr")
    with tessera.Context(disk_cache=True, cache_dir=tmp_path / "cache",
                         cache_key_file=tmp_path / "key") as ctx:
        first = k.to_mosaic("v6e", context=ctx)
        second = k.to_mosaic("v6e", context=ctx)
        disk = ctx.stats()["compiled"]["disk"]
    assert first == second == k.to_mosaic("v6e")
    assert disk["puts"] == 1 and disk["hits"] == 1, disk


def _copy_kernel(rows: int):
    """A copy with two (rows, 2048) f32 windows: 4 x rows x 8 KiB of VMEM."""
    text = (f"kernel @copy\n  grid(2)\n"
            f"  in %x: f32[{2 * rows}, 2048] vmem block[{rows}, 2048] map(%i) -> (%i, 0)\n"
            f"  out %y: f32[{2 * rows}, 2048] vmem block[{rows}, 2048] map(%i) -> (%i, 0)\n"
            f"{{\n  %v = load %x[:, :] : f32[{rows}, 2048]\n  store %y[:, :], %v\n}}\n")
    return tessera.Module.parse(text, "copy.tsr")["copy"]


def test_tpu_vmem_counts_double_buffered_windows():
    v = _copy_kernel(1024).tpu_vmem("v5e")
    assert v["need_bytes"] == 4 * 1024 * 2048 * 4
    assert v["default_limit_bytes"] == 16 << 20
    assert (127 << 20) < v["capacity_bytes"] <= 128 << 20


def test_tpu_call_raises_the_vmem_limit_a_big_kernel_needs():
    """32 MiB of windows: more than libtpu's default scoped VMEM on v5e (16
    MiB), which refuses the bare module; tpu_call sets vmem_limit_bytes and
    the same module compiles."""
    from tessera.jax import _tpu
    k = _copy_kernel(1024)
    call = tj.tpu_call(k, chip="v5e")
    assert call.vmem_limit_bytes is not None and call.vmem_limit_bytes >= 32 << 20
    ji.compile_for_device(call, call.in_structs, ji.tpu_device("v5e"))
    bare = ji.mosaic_kernel(_tpu.mosaic_module(k, "v5e"), call.out_structs, kernel_name="copy")
    with pytest.raises(Exception, match="(?i)vmem"):
        ji.compile_for_device(bare, call.in_structs, ji.tpu_device("v5e"))


def test_tpu_call_keeps_the_default_for_kernels_that_fit():
    assert tj.tpu_call(_kernel(), chip="v5e").vmem_limit_bytes is None
    assert tj.tpu_call(_copy_kernel(768), chip="v6e").vmem_limit_bytes is None  # 24 of 32 MiB


def test_more_vmem_than_the_chip_has_is_a_located_compile_error():
    k = _copy_kernel(1024)  # 32 MiB: v4 has 16
    with pytest.raises(tessera.CompileError) as e:
        k.to_mosaic("v4")
    d = e.value.diagnostics[0]
    assert d.file == "copy.tsr" and d.line == 1 and "needs 32.0 MiB of VMEM" in d.text
    assert k.to_mosaic("v5e").startswith("module")


def _scale_kernel(factor: float, shape=(8, 128)):
    rows, cols = shape
    text = (f"kernel @scale\n  in %x: f32[{rows}, {cols}] vmem\n"
            f"  out %y: f32[{rows}, {cols}] vmem\n"
            f"{{\n  %v = load %x[:, :] : f32[{rows}, {cols}]\n  %c = const {factor} : f32\n"
            f"  %w = mul %v, %c : f32[{rows}, {cols}]\n  store %y[:, :], %w\n}}\n")
    return tessera.Module.parse(text, "scale.tsr")["scale"]


def test_tpu_call_cpu_kernel_runs_on_cpu_and_the_kernel_on_tpu():
    """cpu_kernel replaces the kernel on CPU only; the TPU lowering keeps the
    kernel's Mosaic."""
    call = tj.tpu_call(_scale_kernel(2.0), cpu_kernel=_scale_kernel(3.0))
    x = np.arange(8 * 128, dtype=np.float32).reshape(8, 128)
    np.testing.assert_array_equal(np.asarray(jax.jit(call)(x)), x * 3)
    assert "3.0" not in call.mosaic() and call.mosaic() == _scale_kernel(2.0).to_mosaic("v5e")
    exported = jax.export.export(jax.jit(call), platforms=["tpu"])(
        jax.ShapeDtypeStruct(x.shape, x.dtype))
    assert "tpu_custom_call" in exported.mlir_module()


def test_tpu_call_cpu_kernel_must_take_the_same_operands():
    with pytest.raises(ValueError, match="cpu_kernel @scale takes or gives other operands"):
        tj.tpu_call(_scale_kernel(2.0), cpu_kernel=_scale_kernel(3.0, (16, 128)))


def test_two_tpu_calls_chained_through_a_semaphore_output():
    # a DMA started by one kernel and waited for by the next: the semaphore
    # output is an int32 array in the TPU's semaphore memory (as Pallas
    # asks XLA for it: output_memory_space_colors), and libtpu compiles both
    m = tessera.Module.load(P.ROOT / "tests/cli/sem_chain.tsr")
    start = tj.tpu_call(m["copy_start"], chip="v5e")
    done = tj.tpu_call(m["copy_done"], chip="v5e")
    assert start.semaphore_outputs == (False, False, True)
    assert done.semaphore_outputs == (False,)

    def f(x):
        xo, o, sem = start(x)
        return done(xo, o, sem)

    x = jax.ShapeDtypeStruct((8, 128), np.float32)
    exported = jax.export.export(jax.jit(f), platforms=["tpu"])(x)
    calls = ji.tpu_custom_calls(exported.mlir_module())
    assert calls[0]["config"]["custom_call_config"]["output_memory_space_colors"] == [
        {"color": 2, "shape_index": [2]}], calls[0]["config"]
    assert "output_memory_space_colors" not in calls[1]["config"]["custom_call_config"]
    ji.compile_for_device(exported.call, (x,), ji.tpu_device("v5e"))
    xs = np.arange(8 * 128, dtype=np.float32).reshape(8, 128)
    np.testing.assert_array_equal(np.asarray(jax.jit(f)(xs)), xs)  # in tessera, on CPU


def test_semaphore_operands_are_emitted_as_pallas_emits_them():
    # Pallas's own modules of the two calls (jax.export for TPU): the same
    # kernel signatures (a semaphore_mem memref for the semaphore) and ops
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu
    any_, sem = pl.BlockSpec(memory_space=pl.ANY), pl.BlockSpec(memory_space=pltpu.SEMAPHORE)

    def start_kernel(x_ref, ax, o_ref, s):
        pltpu.make_async_copy(x_ref, o_ref, s).start()

    def done_kernel(x_ref, o_ref, s, ao):
        pltpu.make_async_copy(x_ref, o_ref, s).wait()

    def f(x):
        x, o, s = pl.pallas_call(
            start_kernel, out_shape=(x, x, pltpu.SemaphoreType.DMA(())), in_specs=[any_],
            out_specs=(any_, any_, sem), input_output_aliases={0: 0})(x)
        return pl.pallas_call(done_kernel, out_shape=x, in_specs=[any_, any_, sem],
                              out_specs=any_, input_output_aliases={1: 0})(x, o, s)

    x = jax.ShapeDtypeStruct((8, 128), np.float32)
    calls = ji.tpu_custom_calls(jax.export.export(jax.jit(f), platforms=["tpu"])(x)
                                .mlir_module())
    m = tessera.Module.load(P.ROOT / "tests/cli/sem_chain.tsr")
    for name, call in zip(("copy_start", "copy_done"), calls):
        theirs = P.structure(ji.mosaic_text(ji.parse_mosaic(call["body"], serialized=True)))
        ours = P.structure(m[name].to_mosaic("v5e"))
        assert {k: ours.get(k) for k in P.SHARED} == {k: theirs.get(k) for k in P.SHARED}, name
        assert ours["ops"] == theirs["ops"], name
    assert "memref<!tpu.dma_semaphore, #tpu.memory_space<semaphore_mem>>" in str(ours["signature"])
