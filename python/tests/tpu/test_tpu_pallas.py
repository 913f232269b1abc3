"""Pallas's own modules of the examples (python/tests/pallas_kernels, the
.tsr examples rewritten in Pallas) and tessera's (docs/tpu.md, "Compared with Pallas"):

* the harness itself: Pallas's module, captured with jax.export for TPU,
  decoded, parsed, re-wrapped and compiled by libtpu for every chip;
* tessera's module of the same .tsr kernel has Pallas's signature,
  grid, windows and attributes (docs/tpu.md lists the op-level differences,
  printed by `tpu_proof.py --compare`);
* the round trip: the Pallas kernel -> tessera IR (tessera.jax's bridge) ->
  Mosaic (tsr_tpu_emit) -> libtpu compiles it.
"""

from __future__ import annotations

import pytest

import tpu_proof as P

CASES = list(P.pallas_examples())
CELLS = [(case, chip) for case in CASES for chip in P.CHIPS]

#: Structural differences that remain between tessera's module and Pallas's
#: for the same kernel (case -> the keys of tpu_proof.SHARED that differ),
#: each explained in docs/tpu.md ("Compared with Pallas").
KNOWN_DIFFERENCES: dict[str, set[str]] = {}

_captured: dict = {}


def _pallas(case):
    if case not in _captured:
        _captured[case] = P.pallas_mosaic(case)
    return _captured[case]


@pytest.mark.parametrize("case,chip", CELLS, ids=[f"{c}-{chip}" for c, chip in CELLS])
def test_pallas_module_recompiles(case, chip):
    m = _pallas(case)
    assert m["text"].lstrip().startswith("module"), m["text"][:200]
    assert P.compile_mosaic(m["text"], m["in_structs"], m["out_structs"], m["kernel_name"],
                            chip) > 0


def test_pallas_body_is_serialised_bytecode_at_the_export_version():
    from tessera.jax import _jax_internal as ji
    m = _pallas("add")
    calls = ji.tpu_custom_calls(m["exported"].mlir_module())
    assert calls[0]["body"][:4] == b"ML\xefR"
    assert f"stable_mosaic.version = {ji.mosaic_export_version()}" in m["text"]
    assert calls[0]["config"]["custom_call_config"]["serialization_format"] == 1


@pytest.mark.parametrize("case", CASES)
def test_tessera_module_has_pallas_structure(case):
    c = P.compare(case)
    assert set(c["shared_diffs"]) == KNOWN_DIFFERENCES.get(case, set()), (
        f"{case}: tessera's module differs from Pallas's in "
        + "; ".join(f"{k}: tessera {a!r} vs pallas {b!r}"
                    for k, (a, b) in c["shared_diffs"].items()))


@pytest.mark.parametrize("case,chip", [(c, chip) for c in CASES for chip in ("v5e", "v6e")],
                         ids=[f"{c}-{chip}" for c in CASES for chip in ("v5e", "v6e")])
def test_round_trip_pallas_to_tsr_to_mosaic_compiles(case, chip):
    import tessera
    from tessera.jax import _tpu
    tsr = P.pallas_to_tsr(case)
    kernel = tessera.Module.parse(tsr, f"<{case}>").kernels[0]
    text = kernel.to_mosaic(chip)
    call = _tpu.tpu_call(kernel, chip=chip, cpu="error")
    m = _pallas(case)
    assert [(s.shape, s.dtype) for s in call.in_structs] == \
        [(s.shape, s.dtype) for s in m["in_structs"]]
    # through the bridge too, the module has Pallas's signature and attributes
    ours, theirs = P.structure(text), P.structure(m["text"])
    assert {k: ours.get(k) for k in P.SHARED} == {k: theirs.get(k) for k in P.SHARED}
    assert P.compile_mosaic(text, call.in_structs, call.out_structs, kernel.name, chip,
                            call.aliases) > 0


#: The round trip of the primitive-coverage kernels (pallas_kernels.PRIMITIVES)
#: where it does not reach libtpu: case -> (stage, a substring of the error,
#: whether Pallas's own TPU lowering rejects the kernel too). Stages: "bridge"
#: (tessera.jax cannot translate it), "tsr" (the bridge's .tsr text does not
#: parse back), "emit" (tsr_tpu_emit refuses it). docs/tpu.md lists them.
PRIMITIVE_ROUND_TRIP_GAPS: dict[str, tuple[str, str, bool]] = {
    "prim_indexing": ("emit", "which TPUs cannot tile", True),
    "prim_shape": ("emit", "strided slices are not emitted yet", True),
    "prim_dot_reduce": ("emit", "no prod reduction", True),
}

PRIM_CASES = list(P.pallas_primitives())


def _round_trip(case, chip):
    """(stage, message): how far a Pallas kernel gets to libtpu through tessera."""
    import tessera
    import tessera.jax as tj
    from tessera.jax import _tpu
    try:
        tsr = P.pallas_to_tsr(case)
    except tj.TranslationError as e:
        return "bridge", str(e)
    try:
        kernel = tessera.Module.parse(tsr, f"<{case}>").kernels[0]
    except tessera.CompileError as e:
        return "tsr", str(e) + "\n" + "\n".join(d.text for d in e.diagnostics)
    try:
        text = kernel.to_mosaic(chip)
    except tessera.CompileError as e:
        return "emit", "\n".join(d.text for d in e.diagnostics) or str(e)
    call = _tpu.tpu_call(kernel, chip=chip, cpu="error")
    P.compile_mosaic(text, call.in_structs, call.out_structs, kernel.name, chip, call.aliases,
                     call.bounds)
    return "ok", ""


@pytest.mark.parametrize("case,chip", [(c, chip) for c in PRIM_CASES for chip in ("v5e", "v6e")],
                         ids=[f"{c}-{chip}" for c in PRIM_CASES for chip in ("v5e", "v6e")])
def test_round_trip_of_primitive_kernels(case, chip):
    stage, message = _round_trip(case, chip)
    gap = PRIMITIVE_ROUND_TRIP_GAPS.get(case)
    if gap is None:
        assert stage == "ok", f"{case} on {chip}: stops at {stage}: {message}"
    else:
        assert stage == gap[0] and gap[1] in message, (
            f"{case} on {chip}: expected to stop at {gap[0]} ({gap[1]!r}); "
            f"got {stage}: {message}")


@pytest.mark.parametrize("case", [c for c, g in PRIMITIVE_ROUND_TRIP_GAPS.items() if g[2]])
def test_pallas_rejects_the_kernels_tessera_does_not_emit(case):
    # tessera refuses no kernel Pallas's TPU lowering accepts (these are
    # refused by both; Pallas may stop at another primitive of the kernel)
    with pytest.raises((ValueError, NotImplementedError)):
        P.pallas_mosaic(case)
