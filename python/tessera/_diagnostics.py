"""Diagnostics and errors: `Diagnostic` (a tsr_diagnostic_t record as a
Python object), the exceptions and warnings the package raises, and turning
a failed status into them. Also where a warning is attributed: the first
frame outside the package."""

from __future__ import annotations

import ctypes
import dataclasses
import os
import sys
from typing import TYPE_CHECKING, Any, Callable, Sequence

from . import _capi
from ._lib import TesseraError

if TYPE_CHECKING:
    from ._executable import RunStats

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


@dataclasses.dataclass(frozen=True)
class Diagnostic:
    """One diagnostic of a parse, a verification, a compilation or a run: a
    `tsr_diagnostic_t` (docs/api.md, "Results and diagnostics"). Fields the
    reporter did not know are None (or empty tuples)."""

    kind: str
    """"out_of_bounds", "uninitialized", "race", "deadlock", "parse", ...
    (tsr_diagnostic_kind_name)."""
    severity: str
    """"error", "warning" or "note"."""
    message: str
    """The message, after "severity: "."""
    text: str
    """The whole line as tessera prints it."""
    file: str | None = None
    line: int | None = None
    col: int | None = None
    kernel: str | None = None
    """Without '@'."""
    op: str | None = None
    """The op's mnemonic ("dma_start"), the pipeline's work ("out %y") or
    "the grid step"."""
    buffer: str | None = None
    """The ref or operand named, without '%'."""
    index_lo: tuple[int, ...] = ()
    """First index per dimension of the range on `buffer`."""
    index_hi: tuple[int, ...] = ()
    """One past the last index per dimension."""
    grid_point: tuple[int, ...] | None = None
    core: int | None = None
    """The simulated core; None when the run has one."""
    device: int | None = None
    """The simulated device; None when the run has one."""
    other_op: str | None = None
    """Races: the second access's op."""
    other_line: int | None = None
    other_grid_point: tuple[int, ...] | None = None

    @property
    def index_range(self) -> tuple[slice, ...] | None:
        """The index range on `buffer` as slices, None when there is none."""
        if not self.index_lo:
            return None
        return tuple(slice(lo, hi) for lo, hi in zip(self.index_lo, self.index_hi))

    def __str__(self) -> str:
        return self.text or self.message


def _str_or_none(view: _capi.StringView) -> str | None:
    s = view.text()
    return s or None


def _diagnostic_from_record(r: _capi.DiagnosticRecord) -> Diagnostic:
    h = _capi.lib()

    def positive(n: int) -> int | None:
        return n if n > 0 else None

    def non_negative(n: int) -> int | None:
        return n if n >= 0 else None

    return Diagnostic(
        kind=h.tsr_diagnostic_kind_name(r.kind).decode(),
        severity=_capi.SEVERITIES[r.severity] if 0 <= r.severity < 3 else "?",
        message=r.message.text(),
        text=r.text.text(),
        file=_str_or_none(r.file),
        line=positive(r.line),
        col=positive(r.col),
        kernel=_str_or_none(r.kernel),
        op=_str_or_none(r.op),
        buffer=_str_or_none(r.buffer),
        index_lo=tuple(r.index_lo[:r.index_rank]),
        index_hi=tuple(r.index_hi[:r.index_rank]),
        grid_point=tuple(r.grid_point[:r.grid_rank]) if r.grid_rank else None,
        core=non_negative(r.core),
        device=non_negative(r.device),
        other_op=_str_or_none(r.other_op),
        other_line=positive(r.other_line),
        other_grid_point=(tuple(r.other_grid_point[:r.other_grid_rank])
                          if r.other_grid_rank else None),
    )


def _diagnostics_of_list(handle: int | None) -> tuple[Diagnostic, ...]:
    h = _capi.lib()
    if not handle:
        return ()
    n = h.tsr_diagnostic_list_count(handle)
    return tuple(_diagnostic_from_record(h.tsr_diagnostic_list_get(handle, i).contents)
                 for i in range(n))


def _diagnostics_of_status(status: int) -> tuple[Diagnostic, ...]:
    h = _capi.lib()
    lst = ctypes.c_void_p()
    s = h.tsr_diagnostic_list_create_from_status(status, ctypes.byref(lst))
    if s:
        h.tsr_status_free(s)
        return ()
    try:
        return _diagnostics_of_list(lst.value)
    finally:
        h.tsr_diagnostic_list_destroy(lst)


class CompileError(TesseraError):
    """Parsing, verifying, preparing or compiling a kernel failed (a parse or
    verify error, VMEM over budget, an op the backend cannot lower, an
    invalid option). `diagnostics` holds the status's records."""

    def __init__(self, code: str, message: str, diagnostics: Sequence[Diagnostic] = ()):
        super().__init__(code, message)
        self.diagnostics: tuple[Diagnostic, ...] = tuple(diagnostics)


class KernelError(TesseraError):
    """A run failed: the kernel misbehaved (code "kernel error": out of
    bounds, race, deadlock, a failed assert, a run stopped...), or the run
    could not be done (out of memory, a trace that cannot be written).
    `diagnostics` holds every record of the run, errors then warnings."""

    def __init__(self, code: str, message: str, diagnostics: Sequence[Diagnostic] = (),
                 stats: RunStats | None = None):
        super().__init__(code, message)
        self.diagnostics: tuple[Diagnostic, ...] = tuple(diagnostics)
        self.stats = stats

    @property
    def errors(self) -> tuple[Diagnostic, ...]:
        """The records of severity error."""
        return tuple(d for d in self.diagnostics if d.severity == "error")

    def __str__(self) -> str:
        return self.message or self.code


class KernelWarning(UserWarning):
    """A run's warning (legal in Pallas but suspicious: a read of memory
    never written, an output left unwritten...), issued through
    `warnings.warn` after the run; `diagnostic` is its record. `strict=True`
    makes these errors."""

    def __init__(self, diagnostic: Diagnostic | str):
        super().__init__(str(diagnostic))
        self.diagnostic: Diagnostic | None = (
            diagnostic if isinstance(diagnostic, Diagnostic) else None)


class CacheWarning(UserWarning):
    """A warning of the disk cache (an unusable cache directory with
    `cache_optional`, a bad entry...)."""


# Tracebacks and reprs name the classes where users find them (`tessera.KernelError`),
# not the private module that defines them.
for _cls in (CompileError, KernelError, KernelWarning, CacheWarning):
    _cls.__module__ = "tessera"
del _cls


def _raise_status(status: int, error: type[TesseraError] = CompileError,
                  context: str | None = None) -> None:
    """Raises `error` for a non-NULL status, with its records, and frees it."""
    h = _capi.lib()
    try:
        code = h.tsr_status_code_name(h.tsr_status_code(status)).decode()
        message = h.tsr_status_message(status).decode(errors="replace")
        diagnostics = _diagnostics_of_status(status)
    finally:
        h.tsr_status_free(status)
    if context:
        message = f"{context}: {message}"
    if issubclass(error, (CompileError, KernelError)):
        raise error(code, message, diagnostics)
    raise error(code, message)


def _warn_kwargs() -> dict[str, Any]:
    """warnings.warn's arguments that attribute a warning to the first frame
    outside this package (the user's call)."""
    if sys.version_info >= (3, 12):
        return {"skip_file_prefixes": (_PACKAGE_DIR,)}
    depth = 1
    f = sys._getframe(1)
    while f is not None and f.f_code.co_filename.startswith(_PACKAGE_DIR):
        depth += 1
        f = f.f_back
    return {"stacklevel": depth}


def _hooked(hook: Callable[[Diagnostic], Diagnostic], diagnostics: Sequence[Diagnostic]
            ) -> tuple[tuple[Diagnostic, ...], list[tuple[str, str]]]:
    """`hook` applied to each record, and the (old, new) texts it changed."""
    out = tuple(map(hook, diagnostics))
    return out, [(a.text, b.text) for a, b in zip(diagnostics, out)
                 if a.text and a.text != b.text]


def _requote(message: str, moved: Sequence[tuple[str, str]]) -> str:
    """A status message (which quotes its records' lines) with the records'
    changed texts."""
    for before, after in moved:
        message = message.replace(before, after)
    return message
