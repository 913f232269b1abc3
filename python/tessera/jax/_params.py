"""JAX's `pltpu.InterpretParams` (the `interpret=` value of a pallas_call) as
tessera's run options, for `tessera.jax.interpret()` and `pytest --tessera`:
a test suite written for JAX's TPU interpret mode asks for races to be
detected, for zero-filled memory or for two cores through that value, and
gets the same from tessera (docs/jax.md, "JAX's InterpretParams").

tessera's own options (interpret(**options), --tessera-option) win over
the mapped ones. A field tessera does not honour gives one warning per
field and value (through the bridge's warning path: collected under
interpret mode), never a silent difference.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any, Callable

try:  # the TPU interpret mode's parameters (jax >= 0.7)
    from jax._src.pallas.mosaic.interpret import params as _jax_params
    _SHARED = _jax_params.SharedInterpretParams
except ImportError:  # pragma: no cover - an older jax: nothing to map
    _jax_params = None
    _SHARED = None


def is_jax_params(value: Any) -> bool:
    """Whether `value` is JAX's TPU InterpretParams (or its shared base)."""
    return _SHARED is not None and isinstance(value, _SHARED)


# Field -> how it maps: a function (value -> dict of tessera options, or a
# string saying why it is not honoured), so every field of the installed
# JAX's dataclass is either mapped, or named in a warning.
def _detect_races(v: Any) -> dict | str:
    return {"detect_races": bool(v)}


def _on_race(v: Any) -> dict | str:
    if v == "raise":
        return {}
    return ("on_race='warn' is not honoured: tessera reports a race as a kernel error "
            "(the run fails)")


def _out_of_bounds_reads(v: Any) -> dict | str:
    if v == "raise":
        return {}
    if v == "uninitialized":
        return {"oob_reads_uninit": True}
    return f"out_of_bounds_reads={v!r} is unknown"


def _skip_floating_point_ops(v: Any) -> dict | str:
    if not v:
        return {}
    return "skip_floating_point_ops=True is not honoured: floating-point ops are computed"


def _uninitialized_memory(v: Any) -> dict | str:
    return {"uninit": v} if v in ("nan", "zero") else f"uninitialized_memory={v!r} is unknown"


def _num_cores(v: Any) -> dict | str:
    return {"cores": int(v)} if int(v) != 1 else {}


def _no_meaning(name: str) -> Callable[[Any], dict | str]:
    def f(v: Any) -> dict | str:
        if v is None:
            return {}
        return f"{name}={v!r} has no meaning in tessera and is ignored"
    return f


def _dma_mode(v: Any) -> dict | str:
    if v == "eager":
        return {"dma_mode": "eager"}
    if v == "on_wait":
        return {"dma_mode": "lazy"}
    return f"dma_execution_mode={v!r} is unknown"


def _random_seed(v: Any) -> dict | str:
    # JAX permutes the grid's parallel dimensions with jax.random (seed 0
    # when none is given); tessera's shuffle_parallel permutes them with its
    # own generator, so the same seed would give another order: the grid is
    # run in order unless tessera's options ask for a shuffle.
    if v is None:
        return {}
    return (f"random_seed={v!r} is not honoured: parallel grid dimensions run in order "
            "(tessera's shuffle_parallel/shuffle_seed options permute them, in another "
            "order than JAX's)")


def _grid_point_recorder(v: Any) -> dict | str:
    if v is None:
        return {}
    return "grid_point_recorder is not honoured: tessera does not call it"


def _allow_hbm_in_run_scoped(v: Any) -> dict | str:
    if not v:
        return {}
    return ("allow_hbm_allocation_in_run_scoped=True is not honoured: tessera follows "
            "the TPU")


def _buffer_bounds(v: Any) -> dict | str:
    if v == "logical":
        return {}
    if v == "padded":
        return {"padded": True}
    return f"buffer_bounds={v!r} is unknown"


_FIELDS: dict[str, Callable[[Any], dict | str]] = {
    "detect_races": _detect_races,
    "on_race": _on_race,
    "out_of_bounds_reads": _out_of_bounds_reads,
    "skip_floating_point_ops": _skip_floating_point_ops,
    "uninitialized_memory": _uninitialized_memory,
    "num_cores_or_threads": _num_cores,
    "vector_clock_size": _no_meaning("vector_clock_size"),
    "logging_mode": _no_meaning("logging_mode"),
    "dma_execution_mode": _dma_mode,
    "random_seed": _random_seed,
    "grid_point_recorder": _grid_point_recorder,
    "allow_hbm_allocation_in_run_scoped": _allow_hbm_in_run_scoped,
    "buffer_bounds": _buffer_bounds,
}

_warned: set[tuple[str, str]] = set()
_warned_lock = threading.Lock()


def options_of(params: Any) -> tuple[dict, list[str]]:
    """The tessera options a JAX InterpretParams asks for, and the texts of
    the fields tessera does not honour (each reported once per process)."""
    options: dict[str, Any] = {}
    notes: list[str] = []
    for field in dataclasses.fields(params):
        value = getattr(params, field.name)
        how = _FIELDS.get(field.name)
        if how is None:
            if value == field.default:
                continue
            got: dict | str = f"{field.name}={value!r} is not known to tessera and is ignored"
        else:
            got = how(value)
        if isinstance(got, str):
            notes.append(got)
        else:
            options.update(got)
    return options, notes


def unreported(notes: list[str]) -> list[str]:
    """The notes not reported before in this process."""
    out = []
    with _warned_lock:
        for n in notes:
            key = ("params", n)
            if key not in _warned:
                _warned.add(key)
                out.append(n)
    return out


# ---- JAX's interpret-mode state a test reads after a run ---------------------------


def reset_races(on_race: str = "raise") -> None:
    """As JAX's interpret mode does at each TPU-interpreted call: a fresh
    race-detection state in `interpret_pallas_call.races`, which tests read
    (`races.races_found`) after the call."""
    try:
        from jax._src.pallas.mosaic.interpret import interpret_pallas_call as mi
        from jax._src.pallas.mosaic.interpret.race_detection_state import RaceDetectionState
    except ImportError:  # pragma: no cover - an older jax
        return
    mi.races = RaceDetectionState(on_race=on_race)


def note_race() -> None:
    """A run found a race: `races.races_found` becomes True."""
    try:
        from jax._src.pallas.mosaic.interpret import interpret_pallas_call as mi
    except ImportError:  # pragma: no cover
        return
    if mi.races is None:
        reset_races()
    mi.races.races_found = True
