"""The narrow dtypes (i4, u4, i2, u2, f8e4m3fn, f8e5m2) on TPU: tessera's
Mosaic of kernels that load, store, convert, compare, select, compute (8-bit
floats in f32, tessera's definition) and multiply them on the MXU compiles
with libtpu for v5e, v6e and v7x, packed as Mosaic lays them out; what
Mosaic refuses is tsr_tpu_emit's located refusal at the op (docs/tpu.md,
"Narrow dtypes"). Each kernel is made here; the chips' outcomes were
measured with libtpu 0.0.50.1."""

from __future__ import annotations

import pytest

import tpu_proof as P

CHIPS = ("v5e", "v6e", "v7x")
INTS = ("i4", "u4", "i2", "u2")
FLOATS = ("f8e4m3fn", "f8e5m2")


def _kernel(name: str, dtypes: tuple[str, str, str], body: str, rows: int = 32) -> str:
    a, b, o = dtypes
    return (f"kernel @{name}\n"
            f"  grid(2) semantics(parallel)\n"
            f"  in %a: {a}[{2 * rows}, 256] vmem block[{rows}, 256] map(%i) -> (%i, 0)\n"
            f"  in %b: {b}[{2 * rows}, 256] vmem block[{rows}, 256] map(%i) -> (%i, 0)\n"
            f"  out %o: {o}[{2 * rows}, 256] vmem block[{rows}, 256] map(%i) -> (%i, 0)\n"
            "{\n"
            f"  %x = load %a[:, :] : {a}[{rows}, 256]\n"
            f"  %y = load %b[:, :] : {b}[{rows}, 256]\n"
            f"{body}"
            "  store %o[:, :], %r\n"
            "}\n")


def _cases() -> dict[str, str]:
    """name -> kernel text, every one of which libtpu compiles."""
    cases = {}
    for d in INTS + FLOATS:
        wide = "f32" if d in FLOATS else "i32"
        n = d
        # loads, converts both ways (and a store of the narrow result)
        cases[f"up_{n}"] = _kernel(f"up_{n}", (d, d, wide),
                                   f"  %r = convert %x : {wide}[32, 256]\n")
        cases[f"down_{n}"] = _kernel(f"down_{n}", (wide, d, d),
                                     f"  %r = convert %x : {d}[32, 256]\n")
        # compares (in 32 bits) and selects of the narrow values; a constant
        k = "1.5" if d in FLOATS else "1"
        cases[f"select_{n}"] = _kernel(
            f"select_{n}", (d, d, d),
            f"  %c = gt %x, %y : i1[32, 256]\n  %k = const {k} : {d}[32, 256]\n"
            f"  %r = select %c, %x, %k : {d}[32, 256]\n")
        if d not in ("i2", "u2"):  # a copy, in blocks of 8 rows (one 4-bit tile)
            cases[f"copy8_{n}"] = _kernel(f"copy8_{n}", (d, d, d),
                                          f"  %r = bitcast %x : {d}[8, 256]\n", rows=8)
    for d in FLOATS:  # arithmetic: in f32, rounded once
        for op in ("add", "sub", "mul", "div"):
            cases[f"{op}_{d}"] = _kernel(f"{op}_{d}", (d, d, d),
                                         f"  %r = {op} %x, %y : {d}[32, 256]\n")
    for d in FLOATS:  # scalars too
        cases[f"scalar_{d}"] = _kernel(
            f"scalar_{d}", (d, d, "f32"),
            f"  %k = const 2.5 : {d}\n  %m = mul %k, %k : {d}\n  %g = gt %m, %k : i1\n"
            f"  %s = select %g, %m, %k : {d}\n  %f = convert %s : f32\n"
            "  %r = broadcast %f : f32[32, 256]\n")
    cases["max_f8e5m2"] = _kernel("max_f8e5m2", ("f8e5m2",) * 3,
                                  "  %r = max %x, %y : f8e5m2[32, 256]\n")
    for d, acc in (("i4", "i32"), ("u4", "i32"), ("f8e4m3fn", "f32"), ("f8e5m2", "f32")):
        cases[f"dot_{d}"] = (
            f"kernel @dot_{d}\n"
            "  grid(2) semantics(parallel)\n"
            f"  in %a: {d}[256, 256] vmem block[128, 256] map(%i) -> (%i, 0)\n"
            f"  in %b: {d}[256, 256] vmem block[256, 256] map(%i) -> (0, 0)\n"
            f"  out %o: {acc}[256, 256] vmem block[128, 256] map(%i) -> (%i, 0)\n"
            "{\n"
            f"  %x = load %a[:, :] : {d}[128, 256]\n"
            f"  %y = load %b[:, :] : {d}[256, 256]\n"
            f"  %r = dot %x, %y : {acc}[128, 256]\n"
            "  store %o[:, :], %r\n"
            "}\n")
    return cases


CASES = _cases()

#: What tessera refuses, located at the op: name -> (body, dtype, line, message)
REFUSED = {
    "add_i4": ("  %r = add %x, %y : i4[32, 256]\n", "i4", "not i4; convert to i32 first"),
    "mul_u2": ("  %r = mul %x, %y : u2[32, 256]\n", "u2", "not u2; convert to i32 first"),
    "max_f8e4m3fn": ("  %r = max %x, %y : f8e4m3fn[32, 256]\n", "f8e4m3fn",
                     "max of f8e4m3fn vectors"),
    "sign_f8e5m2": ("  %r = sign %x : f8e5m2[32, 256]\n", "f8e5m2",
                    "no one f32 form"),
}


def _compile(text: str, chip: str) -> float:
    import tessera
    from tessera.jax import _tpu
    kernel = tessera.Module.parse(text, "<narrow>").kernels[0]
    mosaic = kernel.to_mosaic(chip)
    tc = _tpu.tpu_call(kernel, chip=chip, cpu="error")
    return P.compile_mosaic(mosaic, tc.in_structs, tc.out_structs, kernel.name, chip,
                            tc.aliases)


@pytest.mark.parametrize("chip", CHIPS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_narrow_dtype_kernel_compiles(case, chip):
    assert _compile(CASES[case], chip) > 0


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_what_mosaic_cannot_do_is_refused_at_the_op(case):
    import tessera
    body, d, message = REFUSED[case]
    kernel = tessera.Module.parse(_kernel(case, (d, d, d), body), "narrow.tsr").kernels[0]
    with pytest.raises(tessera.CompileError) as e:
        kernel.to_mosaic("v6e")
    text = "\n".join(d.text for d in e.value.diagnostics)
    assert "narrow.tsr:9:" in text and "cannot be emitted for TPU" in text, text
    assert message in text, text


def test_two_bit_dots_are_refused_at_the_op():
    import tessera
    text = CASES["dot_i4"].replace("i4", "i2").replace("@dot_i2", "@dot_two")
    kernel = tessera.Module.parse(text, "dot2.tsr").kernels[0]
    with pytest.raises(tessera.CompileError, match="8- and 4-bit integers, not i2"):
        kernel.to_mosaic("v7x")


@pytest.mark.parametrize("d", ("i2", "u2"))
def test_libtpu_cannot_store_a_loaded_two_bit_block(d):
    # libtpu's own limit, not tessera's: Pallas's module of the same copy
    # fails the same way ("layout too complicated"); a 2-bit block that is
    # converted on the way compiles (up_/down_ above). When libtpu takes
    # it, this test fails and docs/tpu.md's sentence goes.
    text = (f"kernel @copy_{d}\n"
            "  grid(2) semantics(parallel)\n"
            f"  in %a: {d}[128, 256] vmem block[32, 256] map(%i) -> (%i, 0)\n"
            f"  out %o: {d}[128, 256] vmem block[32, 256] map(%i) -> (%i, 0)\n"
            "{\n"
            f"  %x = load %a[:, :] : {d}[32, 256]\n"
            "  store %o[:, :], %x\n"
            "}\n")
    with pytest.raises(Exception, match="layout too complicated"):
        _compile(text, "v6e")


def test_packed_vmem_is_what_tpu_call_budgets():
    # An (8, 128) i4 block is 512 bytes in VMEM, an f8 one 1024, not the
    # one-per-byte host figure
    import tessera
    for d, per in (("i4", 512), ("u2", 512), ("f8e5m2", 1024)):
        text = (f"kernel @k\n  grid(2)\n"
                f"  in %a: {d}[16, 128] vmem block[8, 128] map(%i) -> (%i, 0)\n"
                f"  out %o: {d}[16, 128] vmem block[8, 128] map(%i) -> (%i, 0)\n"
                "{\n}\n")
        vmem = tessera.Module.parse(text, "<vmem>").kernels[0].tpu_vmem("v5e")
        assert vmem["need_bytes"] == 4 * per, (d, vmem)
