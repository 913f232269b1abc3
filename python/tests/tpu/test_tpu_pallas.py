"""Pallas's own modules of the examples (python/tests/pallas_kernels, the
.tsr examples rewritten in Pallas) and tessera's (issue 13 items 6, 7):

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
    assert P.compile_mosaic(text, call.in_structs, call.out_structs, kernel.name, chip,
                            call.aliases) > 0
