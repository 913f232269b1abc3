"""Differential tests (docs/jax.md, "Validated against JAX") of kernels written to cover every
primitive of LISTED_PRIMITIVES (python/tests/pallas_kernels/prim_*.py): JAX's TPU
interpret mode vs tessera.jax.pallas_call. Where JAX's TPU interpret mode
cannot run a kernel (`JAX_TPU_INTERPRET` in its module says why), tessera is
compared with the module's numpy reference instead, and a test pins JAX's
failure so that the day it runs, the kernel joins the differential set.

A missing tessera.jax fails these tests; TESSERA_PDIFF_ALLOW_MISSING_BRIDGE=1
makes them skip instead (only while developing them)."""

import re

import pytest

import pallas_kernels as pk
from pallas_kernels import _harness as H
from pallas_kernels import _pdiff as D

CASES = list(pk.PRIMITIVES)
JAX_CASES = [c for c in CASES if pk.attr(c, "JAX_TPU_INTERPRET") is None]
NO_JAX_CASES = [c for c in CASES if c not in JAX_CASES]
REF_CASES = [c for c in JAX_CASES
             if getattr(pk.module(c), "reference", None) is not None]

#: every primitive the bridge must translate, as the kernel jaxpr spells it
#: (expand_dims is a broadcast_in_dim; fori_loop a scan or a while;
#: `jax.jit` inside a kernel a jit; switch a cond with several branches).
LISTED_PRIMITIVES = {
    "get", "swap", "addupdate", "program_id", "num_programs", "add", "sub",
    "mul", "div", "neg", "exp", "eq", "lt", "select_n",
    "convert_element_type", "bitcast_convert_type", "iota",
    "broadcast_in_dim", "reshape", "transpose", "concatenate", "slice",
    "dynamic_slice", "squeeze", "roll", "dot_general", "reduce_sum",
    "reduce_max", "argmax", "argmin", "cond", "scan", "while", "jit",
    "run_scoped", "dma_start", "dma_wait", "semaphore_signal",
    "semaphore_wait", "semaphore_read", "axis_index", "multiple_of",
    "debug_print",
}


def _kernel_primitives(case):
    """Primitive names in the kernel jaxprs of a case (sub-jaxprs too)."""
    import jax
    from jax.extend import core as jex_core

    fn, inputs = pk.build(case)
    pc = H.jax_tpu_interpret()
    closed = jax.make_jaxpr(lambda *a: fn(pc, *a))(*inputs)
    names = set()

    def walk(jaxpr, in_kernel):
        for eqn in jaxpr.eqns:
            if in_kernel:
                names.add(eqn.primitive.name)
            inner = in_kernel or eqn.primitive.name == "pallas_call"
            for sub in jex_core.jaxprs_in_params(eqn.params):
                walk(getattr(sub, "jaxpr", sub), inner)

    walk(closed.jaxpr, False)
    return names


def test_listed_primitives_covered():
    """The prim_* kernels together contain every primitive of LISTED_PRIMITIVES, and
    each contains those its module's PRIMITIVES says."""
    seen = set()
    for case in CASES:
        names = _kernel_primitives(case)
        declared = set(pk.attr(case, "PRIMITIVES", ()))
        assert declared <= names, f"{case}: missing {sorted(declared - names)}"
        seen |= names
    assert LISTED_PRIMITIVES <= seen, sorted(LISTED_PRIMITIVES - seen)


@pytest.mark.parametrize("case", REF_CASES)
def test_oracle_matches_numpy(case):
    outs, outcome = D.oracle(case)
    assert outcome == "ok", f"{case}: JAX TPU interpret mode: {outcome}"
    H.assert_outputs_match(outs, D.reference_outputs(case),
                           pk.attr(case, "TOLERANCE", "exact"),
                           f"{case} (JAX vs numpy)")


@pytest.mark.parametrize("case", NO_JAX_CASES)
def test_jax_tpu_interpret_cannot_run(case):
    """Pins what JAX's TPU interpret mode (jax 0.12.0.1) does with kernels
    it cannot run; `JAX_TPU_INTERPRET` records it."""
    _, outcome = D.oracle(case)
    assert outcome.startswith("error:"), (
        f"{case}: JAX's TPU interpret mode now runs it ({outcome}): "
        "drop JAX_TPU_INTERPRET from its module")


@pytest.mark.parametrize("backend", ["interp", "cpu"])
@pytest.mark.parametrize("case", CASES)
def test_tessera_matches_jax(case, backend):
    unsupported = pk.attr(case, "TESSERA_UNSUPPORTED")
    if unsupported is not None:
        # a documented gap: a clear error naming what and the user's line
        _, t_outcome, detail = D.tessera_outcome(case, backend)
        assert t_outcome == "error:other: TranslationError", (
            f"{case} [{backend}]: {t_outcome} (TESSERA_UNSUPPORTED says "
            f"{unsupported!r}: drop it if tessera now translates this)\n{detail}")
        assert unsupported in detail, detail
        assert re.search(re.escape(pk.module(case).__file__) + r":\d+", detail), detail
        return
    tolerance = pk.attr(case, "TOLERANCE", "exact")
    if case in JAX_CASES:
        want, outcome = D.oracle(case)
        assert outcome == "ok", f"{case}: JAX TPU interpret mode: {outcome}"
        what = "tessera vs JAX"
    else:
        want, what = D.reference_outputs(case), "tessera vs numpy"
    got, t_outcome, detail = D.tessera_outcome(case, backend)
    assert t_outcome == "ok", f"{case} [{backend}]: {t_outcome}\n{detail}"
    H.assert_outputs_match(got, want, tolerance, f"{case} [{backend}] ({what})")
