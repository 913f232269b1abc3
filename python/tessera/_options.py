"""The options of `tessera.compile` and of a run: their names, and the
checks that turn a keyword argument into a field of
tsr_executable_options_t or tsr_run_options_t."""

from __future__ import annotations

import ctypes
import difflib
import os
import time
from typing import Any, Mapping, Sequence

import numpy as np

from . import _capi
from ._output import CancelToken, PrintCallback

# Options an executable is made with (the fields of tsr_executable_options_t's
# `run`, a tsr_interp_options_t, and its opt_level, plus dma_mode for
# dma_eager and the output callbacks), and those a run may change
# (tsr_run_options_t).
_EXECUTABLE_OPTIONS = (
    "uninit", "check", "shuffle_parallel", "shuffle_seed", "chip", "max_errors", "devices",
    "cores", "schedule_seed", "dma_eager", "dma_mode", "detect_races", "oob_reads_uninit",
    "padded", "out_blocks_copied_in", "strict",
    "timeout_seconds", "max_steps", "cancel", "trace_path", "opt_level", "on_print",
    "on_warning", "parallel_order", "on_grid_step", "on_progress", "progress_interval",
    "overwrite", "threads")
_RUN_OPTIONS = ("strict", "timeout_seconds", "max_steps", "cancel", "trace_path", "on_print",
                "on_warning", "on_progress", "progress_interval", "overwrite")


def _unknown_option(where: str, name: str, known: Sequence[str]) -> TypeError:
    close = difflib.get_close_matches(name, known, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return TypeError(f"{where}: unknown option {name!r}{hint} (options: {', '.join(known)})")


def _check_names(where: str, options: Mapping[str, Any], known: Sequence[str]) -> None:
    for name in options:
        if name not in known:
            raise _unknown_option(where, name, known)


def _int_option(struct: ctypes.Structure, field: str, name: str, v: Any, *,
                positive: bool = False) -> int:
    """Sets option `name` into `struct.field` and returns it: TypeError for a
    non-integer, ValueError below 0 (or 1), OverflowError above what the C
    field holds (_capi.c_int_of)."""
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"tessera: option {name} must be an int, got {v!r}")
    v = int(v)
    if v < (1 if positive else 0):
        raise ValueError(f"tessera: option {name} must be {'>= 1' if positive else '>= 0'}, got {v}")
    _capi.set_checked(struct, field, v, f"tessera: option {name}")
    return v


def _seconds(v: Any, name: str = "timeout_seconds") -> float:
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise TypeError(f"tessera: option {name} must be a number, got {v!r}") from None
    if not f >= 0:
        raise ValueError(f"tessera: option {name} must be >= 0, got {v!r}")
    return f


def _progress_callback(v: Any) -> Any:
    """on_progress: None or False (none), True (the progress line), or a
    callable(done, total)."""
    if v is None or v is True or v is False or callable(v):
        return v
    raise TypeError(f"tessera: option on_progress must be callable(done, total) or True, got {v!r}")


def _trace_target(path: Any, overwrite: bool) -> str:
    """The file a run's trace goes to (as tessera run --trace chooses it):
    an existing regular file only with overwrite=True (FileExistsError
    otherwise); an existing directory gets a new file named by the time
    (UTC), trace-YYYYMMDD-HHMMSS.json, with -2, -3... when that is taken; a
    pipe, FIFO or device is written into."""
    path = os.fspath(path)
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if os.path.isdir(path):
        stamp = time.strftime("trace-%Y%m%d-%H%M%S", time.gmtime())
        for k in range(1, 1000):
            name = os.path.join(path, f"{stamp}.json" if k == 1 else f"{stamp}-{k}.json")
            if not os.path.lexists(name):
                return name
        raise FileExistsError(f"tessera: trace_path {path}: no free file name in the directory")
    if os.path.isfile(path) and not overwrite:
        raise FileExistsError(f"tessera: trace_path {path}: the file exists; pass overwrite=True "
                              "to replace it, or a directory to get a new file in it")
    return path


def _cancel_token(v: Any) -> CancelToken:
    if not isinstance(v, CancelToken):
        raise TypeError(f"tessera: option cancel must be a tessera.CancelToken, got {v!r}")
    return v


def _callback(name: str, v: Any) -> PrintCallback | None:
    if v is not None and not callable(v):
        raise TypeError(f"tessera: option {name} must be callable(text), got {v!r}")
    return v


def _choice(name: str, v: Any, choices: Sequence[str]) -> str:
    if v not in choices:
        raise ValueError(f"tessera: option {name} must be one of {', '.join(map(repr, choices))}, "
                         f"got {v!r}")
    return v
