"""Differential tests (docs/jax.md, "Validated against JAX"): tessera's example kernels
(kernels/examples/*.tsr) rewritten in Pallas, run under JAX's TPU interpret
mode (the oracle) and through tessera.jax.pallas_call (interpreter and cpu
backend), compared exactly for integers and within the tolerances of
docs/jax.md ("Validated against JAX") for floats.

A missing tessera.jax fails these tests; TESSERA_PDIFF_ALLOW_MISSING_BRIDGE=1
makes them skip instead (only for developing them without the bridge)."""

import pytest

import pallas_kernels as pk
from pallas_kernels import _harness as H
from pallas_kernels import _pdiff as D

CASES = list(pk.EXAMPLES)


@pytest.mark.parametrize("case", CASES)
def test_oracle_matches_numpy(case):
    """The Pallas rewrite computes what the .tsr kernel computes (checked
    against a numpy reference), so the oracle is worth comparing with."""
    outs, outcome = D.oracle(case)
    assert outcome == "ok", f"{case}: JAX TPU interpret mode: {outcome}"
    H.assert_outputs_match(outs, D.reference_outputs(case),
                           pk.attr(case, "TOLERANCE", "exact"),
                           f"{case} (JAX vs numpy)")


@pytest.mark.parametrize("backend", ["interp", "cpu"])
@pytest.mark.parametrize("case", CASES)
def test_tessera_matches_jax(case, backend):
    want, outcome = D.oracle(case)
    assert outcome == "ok", f"{case}: JAX TPU interpret mode: {outcome}"
    got, t_outcome, detail = D.tessera_outcome(case, backend)
    assert t_outcome == "ok", f"{case} [{backend}]: {t_outcome}\n{detail}"
    H.assert_outputs_match(got, want, pk.attr(case, "TOLERANCE", "exact"),
                           f"{case} [{backend}] (tessera vs JAX)")


def test_tessera_under_jit_matches_jax():
    """The bridge's result is a JAX-callable usable under jax.jit."""
    import functools

    import jax

    want, outcome = D.oracle("add")
    assert outcome == "ok"
    fn, inputs = pk.build("add")
    pc = H.tessera_call("interp")
    got = jax.jit(functools.partial(fn, pc))(*inputs)
    H.assert_outputs_match((jax.device_get(got),), want, "exact", "add (jit)")
