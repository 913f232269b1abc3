"""What test_pdiff_*.py share: each case's JAX oracle (computed once per
process), and a run's outcome in one comparable form.

An outcome is a string: "ok", "error:<kind>" (tessera's diagnostic kind; for
JAX, its message mapped by `_harness.classify_jax_error`), "warning:<kind>"
(tessera succeeded with a warning of that kind), "hang".
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from . import _harness as H
from . import attr, build

_ORACLE: dict[str, Any] = {}


def case_options(case: str) -> dict[str, Any]:
    return dict(attr(case, "OPTIONS", None) or {})


def oracle(case: str):
    """(outputs or None, outcome) of `case` under JAX's TPU interpret mode."""
    if case not in _ORACLE:
        fn, inputs = build(case)
        pc = H.jax_tpu_interpret(**case_options(case))
        try:
            _ORACLE[case] = (H.run(fn, pc, inputs,
                                        H.ORACLE_COMPILER_OPTIONS), "ok")
        except Exception as exc:  # noqa: BLE001 - we classify every failure
            H.reset_jax_interpret_state()
            _ORACLE[case] = (None, "error:" + H.classify_jax_error(exc))
    return _ORACLE[case]


def _warning_kind(w: warnings.WarningMessage) -> str:
    msg = w.message
    for name in ("diagnostic", "diagnostics"):
        d = getattr(msg, name, None)
        if isinstance(d, (list, tuple)) and d:
            d = d[0]
        if d is not None:
            return H.diagnostic_kind(d)
    text = str(msg)
    # fall back on the message text (docs/semantics.md's wording)
    if "uninitialized" in text:
        return "uninitialized"
    if "written by core" in text:
        return "core_conflict"
    return "other"


def tessera_outcome(case: str, backend: str):
    """(outputs or None, outcome, detail) of `case` through
    tessera.jax.pallas_call. Fails the test if the bridge is missing."""
    fn, inputs = build(case)
    pc = H.tessera_call(backend, **case_options(case))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            outs = H.run(fn, pc, inputs)
        except Exception as exc:  # noqa: BLE001
            kinds = H.tessera_error_kinds(exc)
            if not kinds:
                return None, f"error:other: {type(exc).__name__}", str(exc)
            return None, "error:" + ",".join(sorted(kinds)), str(exc)
    # tessera.KernelWarning (the bridge has a stand-in of the same name
    # when the package does not provide it)
    kernel_warnings = [w for w in caught
                       if any(c.__name__.endswith("KernelWarning")
                              for c in w.category.__mro__)]
    if kernel_warnings:
        kinds = sorted({_warning_kind(w) for w in kernel_warnings})
        return outs, "warning:" + ",".join(kinds), "\n".join(
            str(w.message) for w in kernel_warnings)
    return outs, "ok", ""


#: tessera's kinds that are JAX's kind (JAX says "race" for two cores
#: writing one output block; tessera names that race core_conflict).
SAME_KIND = {"race": {"race", "core_conflict"}}


def same_kind_as_jax(got: str, jax_outcome: str) -> bool:
    """`got` (tessera's) reports what JAX's `jax_outcome` reports."""
    sev, _, kind = jax_outcome.partition(":")
    return any(outcome_matches(got, f"{sev}:{k}")
               for k in SAME_KIND.get(kind, {kind}))


def outcome_matches(got: str, want: str) -> bool:
    """`got` has the kind `want` names ("error:race" matches "error:race" and
    "error:out_of_bounds,race")."""
    if want in ("ok", "hang"):
        return got == want
    g_sev, _, g_kinds = got.partition(":")
    w_sev, _, w_kind = want.partition(":")
    return g_sev == w_sev and w_kind in g_kinds.split(",")


def reference_outputs(case: str):
    from . import reference

    _, inputs = build(case)
    ref = reference(case, inputs)
    return None if ref is None else tuple(np.asarray(r) for r in ref)
