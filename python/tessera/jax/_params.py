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


def is_generic_interpret(value: Any) -> bool:
    """Whether a pallas_call's `interpret=` asks for JAX's generic
    interpreter (`interpret=True`: hlo_interpreter, which copies every block
    in, output blocks too), rather than its TPU interpret mode
    (InterpretParams), its GPU one (InterpretGPUParams) or no interpreter."""
    if not value or is_jax_params(value):
        return False
    return type(value).__name__ != "InterpretGPUParams"


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
    # The translator leaves out what only makes floating-point values (as
    # JAX's interpret mode skips it): those values are +inf.
    return {"jax_skip_float_ops": True} if v else {}


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
    # JAX permutes each leading parallel grid dimension with jax.random
    # (seed 0 when none is given): the bridge draws the same permutations
    # (jax_parallel_order) and hands them to the run as its parallel_order,
    # so that a kernel runs its steps in the order JAX's interpret mode does.
    return {"jax_random_seed": int(v or 0)}


def _grid_point_recorder(v: Any) -> dict | str:
    # Called at each grid step as JAX calls it (token, grid point, core):
    # through the run's on_grid_step (both backends).
    if v is None:
        return {}
    return {"jax_grid_recorder": v}


def _allow_hbm_in_run_scoped(v: Any) -> dict | str:
    if not v:
        # JAX's default: an HBM (or ANY) buffer in run_scoped is refused
        # with JAX's ValueError when the kernel is translated.
        return {"jax_refuse_scoped_hbm": True}
    # An HBM (or ANY) buffer of run_scoped is then a device-wide `scoped`
    # buffer: one per device, shared by the cores of a core_map.
    return {}


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

# ---- JAX's order of the grid's parallel steps -----------------------------------


def leading_parallel(semantics: Any) -> int:
    """How many leading grid dims are `parallel` (the dims JAX's interpret
    mode permutes, and tessera's parallel_order orders)."""
    n = 0
    for s in semantics or ():
        if s != "parallel":
            break
        n += 1
    return n


def check_static_parallel(grid: Any, semantics: Any) -> None:
    """JAX's interpret mode permutes each leading parallel dim with
    jax.random, so it needs the dim's size when it traces: a traced one is
    jax.errors.ConcretizationTypeError, as JAX raises it."""
    from jax._src import core as jax_core
    for d in range(min(leading_parallel(semantics), len(grid))):
        g = grid[d]
        if isinstance(g, tuple) and len(g) == 2 and isinstance(g[0], str):
            g = g[1]
        if not isinstance(g, int):
            jax_core.concrete_or_error(
                None, g, "the size of a grid dimension with parallel semantics, which "
                "JAX's TPU interpret mode (and tessera under its InterpretParams) permutes")


def jax_parallel_order(grid: Any, semantics: Any, seed: int) -> list[int] | None:
    """The order in which JAX's TPU interpret mode runs the leading parallel
    grid dims for `seed` (each dim's permutation drawn with jax.random from
    one key split per dim), as tessera's parallel_order: the dims' entries
    in turn. None when there is no leading parallel dim, or one has no
    static size (a run-time extent: then the grid runs in order)."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    n = leading_parallel(semantics)
    sizes = list(grid[:n])
    if not n or not all(isinstance(g, (int, np.integer)) for g in sizes):
        return None
    out: list[int] = []
    with jax.ensure_compile_time_eval():
        key = jax.random.key(seed)
        for size in sizes:
            key, sub = jax.random.split(key)
            perm = jax.random.permutation(sub, jnp.arange(int(size), dtype=jnp.int32))
            out.extend(int(x) for x in np.asarray(perm))
    return out


def recorder_hook(recorder: Callable) -> Callable[[int, int, tuple], None]:
    """tessera's on_grid_step calling JAX's grid_point_recorder as JAX's
    interpret mode calls it: (token, the grid point's coordinates as int32
    scalars, the core's index)."""
    import numpy as np

    def hook(device: int, core: int, point: tuple) -> None:
        del device  # JAX's recorder is given the core within the device
        recorder(None, tuple(np.int32(c) for c in point), np.int32(core))
    return hook


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
