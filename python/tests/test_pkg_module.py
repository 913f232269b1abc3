"""tessera.Module and tessera.Kernel: parsing, loading, operand info, text,
and the errors of each (python/tessera/_api.py)."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

import tessera

ALIASED = """kernel @scale
  grid(2) semantics(parallel)
  prefetch %n: i32[4]
  in %x: bf16[16, 128] vmem block[8, 128] map(%i) -> (%i, 0)
  out %y: bf16[16, 128] vmem block[8, 128] map(%i) -> (%i, 0) alias %x
  scratch %acc: vmem f32[8, 128]
{
  %v = load %x[:, :] : bf16[8, 128]
  store %y[:, :], %v
}

kernel @second
  out %z: i1[8, 128] vmem
{
  %t = const true : i1[8, 128]
  store %z[:, :], %t
}
"""


def test_parse_lists_kernels_and_operands():
    m = tessera.Module.parse(ALIASED, "two.tsr")
    assert [k.name for k in m.kernels] == ["scale", "second"]
    assert len(m) == 2 and "scale" in m and "@second" in m and "third" not in m
    k = m["scale"]
    assert m["@scale"] is k and m[0] is k
    assert [(o.name, o.role, o.dtype_name, o.shape, o.space) for o in k.operands] == [
        ("n", "prefetch", "i32", (4,), "smem"),
        ("x", "in", "bf16", (16, 128), "vmem"),
        ("y", "out", "bf16", (16, 128), "vmem"),
        ("acc", "scratch", "f32", (8, 128), "vmem"),
    ]
    assert k.operands[2].alias == "x" and k.operands[1].alias is None
    assert [o.name for o in k.inputs] == ["n", "x"]
    assert [o.name for o in k.outputs] == ["y"]
    assert k.operands[1].dtype == np.dtype("bfloat16")
    assert m["second"].outputs[0].dtype == np.dtype(bool)


def test_unknown_kernel_names_the_kernels():
    m = tessera.Module.parse(ALIASED, "two.tsr")
    with pytest.raises(KeyError, match=r"no kernel @third in two.tsr \(kernels: @scale, @second\)"):
        m["third"]


def test_text_is_canonical_and_reparses():
    m = tessera.Module.parse(ALIASED.replace("  %v", "     %v"), "x.tsr")
    text = m.text
    assert "kernel @scale" in text and "     %v" not in text
    again = tessera.Module.parse(text, "again.tsr")
    assert again.text == text
    assert m["second"].text.startswith("kernel @second")


def test_load_example(root):
    m = tessera.Module.load(root / "kernels" / "examples" / "add.tsr")
    assert m.filename.endswith("add.tsr")
    assert [o.name for o in m["add"].operands] == ["a", "b", "c"]


def test_parse_error_has_diagnostics_with_lines():
    with pytest.raises(tessera.CompileError) as info:
        tessera.Module.parse("kernel @k\n{\n  %x = bogus_op : f32\n}\n", "bad.tsr")
    e = info.value
    assert e.code == "parse error"
    assert e.diagnostics, "a parse error carries records"
    d = e.diagnostics[0]
    assert (d.kind, d.severity, d.file, d.line) == ("parse", "error", "bad.tsr", 3)
    assert "bad.tsr:3:" in d.text and "bad.tsr:3:" in str(e)


def test_load_missing_file_is_an_io_error(tmp_path):
    with pytest.raises(tessera.CompileError) as info:
        tessera.Module.load(tmp_path / "nope.tsr")
    assert info.value.code == "I/O error"
    assert "nope.tsr" in str(info.value)


def test_verify_error_names_the_op():
    text = """kernel @v
  out %y: f32[8, 128] vmem
{
  %a = const 1 : i32
  %b = const 1.0 : f32
  %c = add %a, %b : f32
  store %y[:, :], %c
}
"""
    m = tessera.Module.parse(text, "v.tsr")
    with pytest.raises(tessera.CompileError) as info:
        m.verify()
    assert info.value.code == "verify error"
    d = info.value.diagnostics[0]
    assert (d.kind, d.file, d.line) == ("verify", "v.tsr", 6)
    # compiling verifies too, with the same records
    with pytest.raises(tessera.CompileError) as info2:
        tessera.compile(m)
    assert info2.value.diagnostics[0].line == 6


def test_module_and_kernel_cannot_be_made_directly():
    with pytest.raises(TypeError, match="Module.parse"):
        tessera.Module()
    with pytest.raises(TypeError, match="from a Module"):
        tessera.Kernel()
    with pytest.raises(ValueError, match="NULL"):
        tessera.Module._from_handle(0)


def test_kernel_outlives_its_module_reference():
    k = tessera.Module.parse(ALIASED, "two.tsr")["second"]
    # only the kernel is referenced: the module stays alive through it
    out = k()
    assert out.dtype == np.dtype(bool) and out.all()


def test_every_library_dtype_maps_to_numpy():
    h = tessera._capi.lib()
    names = tessera.dtypes()
    assert names[:2] == ("f32", "bf16") and "i1" in names
    for i, name in enumerate(names):
        dt = tessera.numpy_dtype(name)
        assert dt.itemsize == h.tsr_dtype_size(i), name
    with pytest.raises(ValueError, match="unknown dtype 'f64'"):
        tessera.numpy_dtype("f64")


def test_from_handle_adopts_a_module_made_in_c():
    from tessera import _capi
    h = _capi.lib()
    text = ALIASED.encode()
    name = b"made_in_c.tsr"
    out = ctypes.c_void_p()
    status = h.tsr_ir_module_parse(
        _capi.StringView(ctypes.cast(name, ctypes.c_void_p), len(name)),
        _capi.StringView(ctypes.cast(text, ctypes.c_void_p), len(text)), ctypes.byref(out))
    assert not status
    m = tessera.Module._from_handle(out.value, "made_in_c.tsr")
    assert [k.name for k in m.kernels] == ["scale", "second"]
    assert m["second"]().all()
