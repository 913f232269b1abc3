"""Runs one Pallas kernel under JAX's interpreters and tessera, and compares.

The three `pallas_call`s the kernels are given (`jax_tpu_interpret`,
`jax_hlo_interpret`, `tessera_call`), the tolerance rules of docs/jax.md
("Validated against JAX"), and how each side's error is classified into
tessera's diagnostic kinds. Shared by test_pdiff_*.py, survey_shipped.py and
bench/python/bench_jax.py.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

#: Run options a kernel module may ask for (its `OPTIONS`), in neutral
#: names, and what each interpreter calls them. tessera's names are those of
#: its run options (docs/api.md, tsr_interp_options_t); if the bridge spells
#: one differently, this table is the one place to change.
JAX_OPTION_NAMES = {
    "cores": "num_cores_or_threads",
    "detect_races": "detect_races",
    "uninit": "uninitialized_memory",  # "nan" | "zero"
    "dma_mode": "dma_execution_mode",  # "eager" | "lazy" (JAX: "on_wait")
}
TESSERA_OPTION_NAMES = {
    "cores": "cores",
    "detect_races": "detect_races",
    "uninit": "uninit",
    "dma_mode": "dma_mode",
}

ALLOW_MISSING_BRIDGE_ENV = "TESSERA_PDIFF_ALLOW_MISSING_BRIDGE"


# --------------------------------------------------------------------------
# The three pallas_calls


def _jax_params(options: dict[str, Any]) -> dict[str, Any]:
    params = {}
    for key, value in options.items():
        if key == "dma_mode" and value == "lazy":
            value = "on_wait"
        params[JAX_OPTION_NAMES[key]] = value
    return params


def jax_tpu_interpret(**options: Any) -> Callable:
    """`pl.pallas_call` under JAX's TPU interpret mode (`InterpretParams`)."""
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    return functools.partial(
        pl.pallas_call, interpret=pltpu.InterpretParams(**_jax_params(options)))


def jax_hlo_interpret(**options: Any) -> Callable:
    """`pl.pallas_call(interpret=True)`: JAX's HLO interpreter (no memory
    model: cores, races and DMA modes do not apply and are ignored)."""
    from jax.experimental import pallas as pl

    return functools.partial(pl.pallas_call, interpret=True)


def bridge_module(*, for_test: bool = True):
    """`tessera.jax`, imported lazily.

    In a test (`for_test`), a missing bridge FAILS the test, unless the
    environment sets TESSERA_PDIFF_ALLOW_MISSING_BRIDGE=1 (only for
    developing these tests before the bridge existed): then it skips.
    Outside tests, returns None when it is missing.
    """
    try:
        import tessera.jax as tessera_jax  # noqa: PLC0415
        return tessera_jax
    except ImportError as exc:
        if not for_test:
            return None
        import pytest

        if os.environ.get(ALLOW_MISSING_BRIDGE_ENV) == "1":
            pytest.skip(f"tessera.jax is not importable ({exc}); "
                        f"{ALLOW_MISSING_BRIDGE_ENV}=1")
        pytest.fail(f"tessera.jax is not importable: {exc}")


def tessera_call(backend: str = "interp", *, for_test: bool = True,
                 **options: Any) -> Callable | None:
    """`tessera.jax.pallas_call` with `backend` and the kernel's options."""
    tj = bridge_module(for_test=for_test)
    if tj is None:
        return None
    kwargs = {TESSERA_OPTION_NAMES[k]: v for k, v in options.items()}
    return functools.partial(tj.pallas_call, backend=backend, **kwargs)


def reset_jax_interpret_state() -> None:
    """JAX's TPU interpret mode must be reset after a kernel raised."""
    from jax.experimental.pallas import tpu as pltpu

    pltpu.reset_tpu_interpret_mode_state()


#: XLA options of the oracle's compilation. XLA:CPU may keep a bf16 (or f16)
#: intermediate in f32 (`xla_allow_excess_precision`, on by default), so a
#: chain of bf16 ops is rounded once instead of after every op; the TPU (and
#: tessera) round every op. With it off, JAX's TPU interpret mode rounds like
#: the TPU and bf16 results can be compared bit for bit.
ORACLE_COMPILER_OPTIONS = {"xla_allow_excess_precision": False}


def run(fn: Callable, pallas_call: Callable, inputs: Sequence[np.ndarray],
        compiler_options: dict[str, Any] | None = None
        ) -> tuple[np.ndarray, ...]:
    """Runs `fn(pallas_call, *inputs)`; outputs as a tuple of numpy arrays.
    With `compiler_options`, the call is jitted and compiled with them."""
    import jax

    if compiler_options:
        f = jax.jit(functools.partial(fn, pallas_call))
        out = f.lower(*inputs).compile(compiler_options)(*inputs)
    else:
        out = fn(pallas_call, *inputs)
    out = jax.block_until_ready(out)
    if isinstance(out, (tuple, list)):
        return tuple(np.asarray(o) for o in out)
    return (np.asarray(out),)


# --------------------------------------------------------------------------
# Comparison


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view(np.dtype(f"u{a.dtype.itemsize}"))


def mismatch(got: np.ndarray, want: np.ndarray, tolerance: Any) -> str | None:
    """None if `got` matches `want` under `tolerance`, else why not.

    Tolerances (docs/jax.md, "Validated against JAX"):
      "exact"          same bits (floats: NaN where the other has NaN, any
                       payload); integers and bools always use this;
      ("ulp", n)       floats within n units in the last place of the larger
                       magnitude (transcendental functions: libm vs XLA);
      ("close", r, a)  |got - want| <= a + r * |want| (sums and dots, whose
                       order of accumulation differs).
    """
    if got.shape != want.shape:
        return f"shape {got.shape} != {want.shape}"
    if got.dtype != want.dtype:
        return f"dtype {got.dtype} != {want.dtype}"
    if got.dtype.kind not in "fV" and got.dtype.name != "bfloat16":
        tolerance = "exact"
    if tolerance == "exact":
        if got.dtype.kind in "biu":
            bad = got != want
        else:
            gnan, wnan = np.isnan(got.astype(np.float32)), np.isnan(
                want.astype(np.float32))
            bad = (_bits(got) != _bits(want)) & ~(gnan & wnan)
    else:
        g = got.astype(np.float64)
        w = want.astype(np.float64)
        nan_bad = np.isnan(g) != np.isnan(w)
        diff = np.abs(g - w)
        diff[np.isnan(g) & np.isnan(w)] = 0.0
        if tolerance[0] == "ulp":
            mag = np.maximum(np.abs(g), np.abs(w)).astype(np.float32)
            # f32's spacing, widened to the dtype's mantissa (bf16: 7 bits,
            # f16: 10, f32: 23)
            mantissa = {"bfloat16": 7, "float16": 10}.get(got.dtype.name, 23)
            ulp = np.spacing(mag).astype(np.float64) * 2.0 ** (23 - mantissa)
            bad = (diff > tolerance[1] * ulp) | nan_bad
        elif tolerance[0] == "close":
            bad = (diff > tolerance[2] + tolerance[1] * np.abs(w)) | nan_bad
        else:
            raise ValueError(f"unknown tolerance {tolerance!r}")
        bad &= ~(np.isinf(g) & (g == w))
    n_bad = int(np.count_nonzero(bad))
    if n_bad == 0:
        return None
    first = tuple(int(i) for i in np.argwhere(bad)[0])
    return (f"{n_bad} of {bad.size} elements differ beyond {tolerance!r}; "
            f"first at {first}: got {got[first]!r}, want {want[first]!r}")


def assert_outputs_match(got: Sequence[np.ndarray], want: Sequence[np.ndarray],
                         tolerance: Any, what: str = "") -> None:
    """Asserts each output matches; `tolerance` is one rule or one per output."""
    assert len(got) == len(want), f"{what}: {len(got)} outputs, want {len(want)}"
    if tolerance is None or isinstance(tolerance, str) or (
            isinstance(tolerance, tuple) and isinstance(tolerance[0], str)):
        tolerance = [tolerance or "exact"] * len(want)
    for i, (g, w, tol) in enumerate(zip(got, want, tolerance)):
        why = mismatch(np.asarray(g), np.asarray(w), tol)
        assert why is None, f"{what} output {i}: {why}"


# --------------------------------------------------------------------------
# Errors: what kind each side reports


#: JAX TPU interpret mode's messages (jax 0.12.0.1) -> tessera's kinds.
_JAX_ERROR_PATTERNS = [
    (re.compile(r"Out-of-bounds (read|write|swap|masked swap|block index)"),
     "out_of_bounds"),
    (re.compile(r"Revisited block"), "revisit"),
    (re.compile(r"RACE DETECTED"), "race"),
]


def classify_jax_error(exc: BaseException) -> str:
    """tessera's diagnostic kind for an exception JAX's TPU interpret mode
    raised (searching the exception chain), or "other: <type>"."""
    text = []
    e: BaseException | None = exc
    while e is not None and len(text) < 8:
        text.append(f"{type(e).__name__}: {e}")
        e = e.__cause__ or e.__context__
    joined = "\n".join(text)
    for pattern, kind in _JAX_ERROR_PATTERNS:
        if pattern.search(joined):
            return kind
    return f"other: {type(exc).__name__}"


def _kernel_error_classes() -> tuple[type, ...]:
    classes = []
    for modname in ("tessera", "tessera.jax"):
        try:
            mod = __import__(modname, fromlist=["KernelError"])
        except ImportError:
            continue
        cls = getattr(mod, "KernelError", None)
        if isinstance(cls, type) and cls not in classes:
            classes.append(cls)
    return tuple(classes)


def tessera_kernel_error(exc: BaseException):
    """The `tessera.KernelError` (or `tessera.jax.KernelError`, the same
    class once the package provides it) in `exc`'s chain, or None."""
    classes = _kernel_error_classes()
    if not classes:
        return None
    e: BaseException | None = exc
    seen = 0
    while e is not None and seen < 8:
        if isinstance(e, classes):
            return e
        e = e.__cause__ or e.__context__
        seen += 1
    return None


def diagnostic_kind(diagnostic: Any) -> str:
    kind = getattr(diagnostic, "kind", "")
    return str(getattr(kind, "name", kind)).lower()


def diagnostic_severity(diagnostic: Any) -> str:
    sev = getattr(diagnostic, "severity", "")
    return str(getattr(sev, "name", sev)).lower()


def tessera_error_kinds(exc: BaseException) -> set[str]:
    """The kinds of the error diagnostics of the KernelError in `exc`'s
    chain (empty if there is none)."""
    err = tessera_kernel_error(exc)
    if err is None:
        return set()
    return {diagnostic_kind(d) for d in getattr(err, "diagnostics", ())
            if diagnostic_severity(d) in ("error", "")}
