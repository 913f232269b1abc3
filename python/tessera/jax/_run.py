"""The bridge's runner: prepares a built kernel and runs it on numpy arrays
through the C API (tessera/api.h) with ctypes.

Uses the package's `KernelError` / `Diagnostic` when the package provides
them (`tessera.KernelError`), else equivalent stand-ins defined here, so the
bridge works on its own. A `Runner` is made once per translated kernel and
reused by every call (item 7): a warm call costs the operand structs, the C
run, and the numpy outputs.
"""

from __future__ import annotations

import ctypes
import dataclasses
import threading
import warnings
from typing import Any, Sequence

import numpy as np

from .. import _builder as B
from .. import _lib

MAX_RANK = B.MAX_RANK

try:  # the numpy-level package's types, when present
    from tessera import Diagnostic as _PkgDiagnostic  # type: ignore[attr-defined]
    from tessera import KernelError as _PkgKernelError  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - depends on the package layout
    _PkgDiagnostic = None
    _PkgKernelError = None
try:
    from tessera import KernelWarning as _PkgKernelWarning  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover
    _PkgKernelWarning = None


class _KernelWarning(UserWarning):
    """A warning a kernel run reported (see tessera.KernelWarning)."""


KernelWarning = _PkgKernelWarning or _KernelWarning


@dataclasses.dataclass(frozen=True)
class _Diagnostic:
    """One tessera diagnostic (see tessera.Diagnostic)."""
    kind: str
    severity: str
    file: str
    line: int
    col: int
    kernel: str
    op: str
    buffer: str
    index_lo: tuple
    index_hi: tuple
    grid_point: tuple
    core: int
    device: int
    other_op: str
    other_line: int
    other_grid_point: tuple
    message: str
    text: str


class _KernelError(_lib.TesseraError):
    """A kernel failed (translation-time verify errors or a run); `.diagnostics`
    holds every record."""

    def __init__(self, code: str, message: str, diagnostics: Sequence[Any] = ()):
        super().__init__(code, message)
        self.diagnostics = list(diagnostics)

    def __str__(self) -> str:
        lines = [d.text for d in self.diagnostics if d.text]
        return "\n".join(lines) if lines else super().__str__()


Diagnostic = _PkgDiagnostic or _Diagnostic
KernelError = _PkgKernelError or _KernelError


class _SV(ctypes.Structure):
    _fields_ = [("data", ctypes.c_char_p), ("size", ctypes.c_size_t)]

    def s(self) -> str:
        return ctypes.string_at(self.data, self.size).decode(errors="replace") if self.size else ""


_I64R = ctypes.c_int64 * MAX_RANK


class _CDiag(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_int), ("severity", ctypes.c_int), ("file", _SV),
                ("line", ctypes.c_int32), ("col", ctypes.c_int32), ("kernel", _SV),
                ("op", _SV), ("buffer", _SV), ("index_rank", ctypes.c_uint32),
                ("index_lo", _I64R), ("index_hi", _I64R), ("grid_rank", ctypes.c_uint32),
                ("grid_point", _I64R), ("core", ctypes.c_int32), ("device", ctypes.c_int32),
                ("other_op", _SV), ("other_line", ctypes.c_int32),
                ("other_grid_rank", ctypes.c_uint32), ("other_grid_point", _I64R),
                ("message", _SV), ("text", _SV)]


class _CArray(ctypes.Structure):
    _fields_ = [("dtype", ctypes.c_int), ("rank", ctypes.c_uint32), ("dims", _I64R),
                ("data", ctypes.c_void_p)]


_OUTFN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t)


class _COutput(ctypes.Structure):
    _fields_ = [("print", ctypes.c_void_p), ("warning", ctypes.c_void_p),
                ("user", ctypes.c_void_p)]


class _CExeOptions(ctypes.Structure):
    _fields_ = [("backend", ctypes.c_int), ("uninit", ctypes.c_int), ("check", ctypes.c_bool),
                ("shuffle_parallel", ctypes.c_bool), ("shuffle_seed", ctypes.c_uint64),
                ("chip", ctypes.c_char_p), ("max_errors", ctypes.c_uint32),
                ("devices", ctypes.c_uint32), ("cores", ctypes.c_uint32),
                ("schedule_seed", ctypes.c_uint64), ("dma_eager", ctypes.c_bool),
                ("detect_races", ctypes.c_bool), ("strict", ctypes.c_bool),
                ("timeout_seconds", ctypes.c_double), ("max_steps", ctypes.c_uint64),
                ("cancel", ctypes.c_void_p), ("trace_path", ctypes.c_char_p),
                ("opt_level", ctypes.c_int), ("output", _COutput)]


_fns = None
_decl_lock = threading.Lock()


def _h():
    """The runner's C functions (bound once, privately: see _builder.bind)."""
    global _fns
    if _fns is not None:
        return _fns
    with _decl_lock:
        if _fns is not None:
            return _fns
        vp, sz = ctypes.c_void_p, ctypes.c_size_t
        protos = {
            "tsr_context_create": (vp, [vp, ctypes.POINTER(vp)]),
            "tsr_context_destroy": (None, [vp]),
            "tsr_executable_options_initialize": (None, [ctypes.POINTER(_CExeOptions)]),
            "tsr_executable_create": (vp, [vp, vp, ctypes.POINTER(_CExeOptions),
                                           ctypes.POINTER(vp)]),
            "tsr_executable_destroy": (None, [vp]),
            "tsr_executable_run": (vp, [vp, ctypes.POINTER(ctypes.POINTER(_CArray)), sz, vp,
                                        ctypes.POINTER(vp)]),
            "tsr_run_result_destroy": (None, [vp]),
            "tsr_run_result_diagnostics": (vp, [vp]),
            "tsr_diagnostic_list_count": (sz, [vp]),
            "tsr_diagnostic_list_get": (ctypes.POINTER(_CDiag), [vp, sz]),
            "tsr_diagnostic_list_create_from_status": (vp, [vp, ctypes.POINTER(vp)]),
            "tsr_diagnostic_list_destroy": (None, [vp]),
            "tsr_diagnostic_kind_name": (ctypes.c_char_p, [ctypes.c_int]),
            "tsr_diagnostic_severity_name": (ctypes.c_char_p, [ctypes.c_int]),
            "tsr_backend_from_name": (ctypes.c_bool, [ctypes.c_char_p,
                                                      ctypes.POINTER(ctypes.c_int)]),
            "tsr_status_code": (ctypes.c_int, [vp]),
            "tsr_status_code_name": (ctypes.c_char_p, [ctypes.c_int]),
            "tsr_status_message": (ctypes.c_char_p, [vp]),
            "tsr_status_free": (None, [vp]),
        }
        fns = B.bind(protos)
        fns.tsr_output_discard = ctypes.cast(_lib.lib().tsr_output_discard, ctypes.c_void_p).value
        _fns = fns
    return _fns


def _diag(d: _CDiag) -> Any:
    h = _h()
    kw = dict(
        kind=h.tsr_diagnostic_kind_name(d.kind).decode(),
        severity=h.tsr_diagnostic_severity_name(d.severity).decode(),
        file=d.file.s(), line=d.line, col=d.col, kernel=d.kernel.s(), op=d.op.s(),
        buffer=d.buffer.s(), index_lo=tuple(d.index_lo[:d.index_rank]),
        index_hi=tuple(d.index_hi[:d.index_rank]),
        grid_point=tuple(d.grid_point[:d.grid_rank]), core=d.core, device=d.device,
        other_op=d.other_op.s(), other_line=d.other_line,
        other_grid_point=tuple(d.other_grid_point[:d.other_grid_rank]),
        message=d.message.s(), text=d.text.s())
    if Diagnostic is _Diagnostic:
        return _Diagnostic(**kw)
    try:  # the package's Diagnostic: pass the fields it has
        fields = {f.name for f in dataclasses.fields(Diagnostic)}
        return Diagnostic(**{k: v for k, v in kw.items() if k in fields})
    except Exception:
        return _Diagnostic(**kw)


def _diags_of_list(lst) -> list:
    h = _h()
    return [_diag(h.tsr_diagnostic_list_get(lst, i).contents)
            for i in range(h.tsr_diagnostic_list_count(lst))]


def _raise_status(status: int, what: str) -> None:
    """Raises KernelError with the status's records, freeing it."""
    h = _h()
    lst = ctypes.c_void_p()
    diags = []
    if not h.tsr_diagnostic_list_create_from_status(status, ctypes.byref(lst)):
        diags = _diags_of_list(lst.value)
        h.tsr_diagnostic_list_destroy(lst.value)
    code = h.tsr_status_code_name(h.tsr_status_code(status)).decode()
    message = h.tsr_status_message(status).decode(errors="replace")
    h.tsr_status_free(status)
    raise _make_error(code, f"{what}: {message}", diags)


def _make_error(code: str, message: str, diags: list) -> Exception:
    try:
        return KernelError(code, message, diags)
    except TypeError:  # the package's constructor: try keyword form
        err = KernelError(code, message)
        err.diagnostics = diags
        return err


class _Context:
    _lock = threading.Lock()
    _ptr: int | None = None

    @classmethod
    def get(cls) -> int:
        if cls._ptr is None:
            with cls._lock:
                if cls._ptr is None:
                    out = ctypes.c_void_p()
                    _lib.check(_h().tsr_context_create(None, ctypes.byref(out)))
                    cls._ptr = out.value
        return cls._ptr  # type: ignore[return-value]


_OPTION_FIELDS = {"uninit", "check", "shuffle_parallel", "shuffle_seed", "chip", "max_errors",
                  "devices", "cores", "schedule_seed", "dma_eager", "detect_races", "strict",
                  "timeout_seconds", "max_steps", "trace_path", "opt_level"}


def option_names() -> list[str]:
    """The tessera options pallas_call/interpret accept."""
    return sorted(_OPTION_FIELDS | {"backend", "dma_mode", "numpy_outputs", "jit_callback"})


class Runner:
    """A prepared executable for one translated kernel."""

    def __init__(self, kernel_ptr: int, in_specs: Sequence[tuple], out_specs: Sequence[tuple],
                 aliases: dict, options: dict, operand_locs: dict | None = None):
        """in_specs / out_specs: (shape, numpy dtype, tessera dtype name) per
        operand; aliases: output index -> input index; options: tessera's
        run options (option_names()); operand_locs: operand name -> (file,
        line, col) given to diagnostics tessera reports at an operand without a
        line (block copies, index maps)."""
        h = _h()
        eo = _CExeOptions()
        h.tsr_executable_options_initialize(ctypes.byref(eo))
        self._strings = []
        for k, v in options.items():
            if k == "backend":
                b = ctypes.c_int()
                if not h.tsr_backend_from_name(str(v).encode(), ctypes.byref(b)):
                    raise ValueError(f"tessera: unknown backend {v!r} (interp, cpu)")
                eo.backend = b.value
            elif k == "dma_mode":
                if v not in ("eager", "lazy"):
                    raise ValueError(f"tessera: dma_mode is 'eager' or 'lazy', not {v!r}")
                eo.dma_eager = v == "eager"
            elif k == "uninit":
                eo.uninit = {"nan": 0, "zero": 1}[v] if isinstance(v, str) else int(v)
            elif k in ("chip", "trace_path"):
                s = str(v).encode()
                self._strings.append(s)
                setattr(eo, k, s)
            elif k in _OPTION_FIELDS:
                setattr(eo, k, v)
            else:
                raise TypeError(f"tessera: unknown option {k!r} (options: "
                                f"{', '.join(option_names())})")
        # Warnings come back as records and go through Python's warnings:
        # the library does not print them too.
        eo.output.warning = h.tsr_output_discard
        out = ctypes.c_void_p()
        status = h.tsr_executable_create(_Context.get(), kernel_ptr, ctypes.byref(eo),
                                         ctypes.byref(out))
        if status:
            _raise_status(status, "tessera could not prepare the kernel")
        self._exe = out.value
        self._in_specs = [(tuple(s), np.dtype(dt), B._DTYPE_INDEX[td]) for s, dt, td in in_specs]
        self._dtypes = [t for _, _, t in self._in_specs]
        self._out_specs = [(tuple(s), np.dtype(dt), B._DTYPE_INDEX[td]) for s, dt, td in out_specs]
        self._tls = threading.local()
        self._operand_locs = dict(operand_locs or {})
        self._aliases = dict(aliases)
        self._n = len(in_specs) + len(out_specs)

    def _structs(self):
        """This thread's operand structs (shapes and dtypes filled once;
        each call only sets the data pointers)."""
        st = getattr(self._tls, "structs", None)
        if st is None:
            arrays = (_CArray * self._n)()
            ptrs = (ctypes.POINTER(_CArray) * self._n)()
            specs = self._in_specs + [(s, d, t) for s, d, t in self._out_specs]
            for i, (shape, _, dt) in enumerate(specs):
                arrays[i].dtype = dt
                arrays[i].rank = len(shape)
                for k, d in enumerate(shape):
                    arrays[i].dims[k] = d
                ptrs[i] = ctypes.pointer(arrays[i])
            st = self._tls.structs = (arrays, ptrs)
        return st

    def __call__(self, *inputs: np.ndarray) -> list[np.ndarray]:
        """Runs on numpy arrays (one per prefetch/input operand, of the
        declared shapes and dtypes); returns the outputs."""
        if len(inputs) != len(self._in_specs):
            raise TypeError(f"tessera: the kernel takes {len(self._in_specs)} operands, "
                            f"got {len(inputs)}")
        arrays, ptrs = self._structs()
        keep = []
        for i, (x, (shape, npdt, _)) in enumerate(zip(inputs, self._in_specs)):
            if (type(x) is not np.ndarray or x.dtype != npdt
                    or not x.flags.c_contiguous):
                x = np.ascontiguousarray(x, dtype=npdt)
            if x.shape != shape:
                raise ValueError(f"tessera: operand {i} has shape {x.shape}, the kernel "
                                 f"was prepared for {shape}")
            keep.append(x)
            arrays[i].data = x.__array_interface__["data"][0]
        outs = []
        i = len(inputs)
        for j, (shape, npdt, _) in enumerate(self._out_specs):
            if j in self._aliases:
                o = np.array(keep[self._aliases[j]], dtype=npdt, copy=True, order="C")
            else:
                o = np.empty(shape, npdt)
            outs.append(o)
            arrays[i].data = o.__array_interface__["data"][0]
            i += 1
        self._execute(ptrs)
        return outs

    def run_pointers(self, data: Sequence[int]) -> None:
        """Runs on raw buffers (one address per operand, inputs then
        outputs, of the prepared shapes and dtypes): the XLA FFI path."""
        arrays, ptrs = self._structs()
        for i, p in enumerate(data):
            arrays[i].data = p
        self._execute(ptrs)

    def _execute(self, ptrs) -> None:
        """Runs with the operand structs filled; raises KernelError, warns."""
        h = _h()
        if not self._exe:
            raise ValueError("tessera: the kernel's executable was closed")
        result = ctypes.c_void_p()
        status = h.tsr_executable_run(self._exe, ptrs, self._n, None, ctypes.byref(result))
        if status:
            diags = []
            if result.value:
                diags = self._relocate(_diags_of_list(h.tsr_run_result_diagnostics(result.value)))
            code = h.tsr_status_code_name(h.tsr_status_code(status)).decode()
            message = h.tsr_status_message(status).decode(errors="replace")
            h.tsr_status_free(status)
            if result.value:
                h.tsr_run_result_destroy(result.value)
            raise _make_error(code, message, diags)
        if result.value:
            lst = h.tsr_run_result_diagnostics(result.value)
            if lst and h.tsr_diagnostic_list_count(lst):
                for d in self._relocate(_diags_of_list(lst)):
                    if d.severity == "warning":
                        warnings.warn(d.text or d.message, KernelWarning, stacklevel=4)
            h.tsr_run_result_destroy(result.value)

    def _relocate(self, diags: list) -> list:
        """Gives the operand's Python location to diagnostics tessera made at
        an operand declaration (line 0)."""
        out = []
        for d in diags:
            loc = self._operand_locs.get(d.buffer) if d.line <= 0 else None
            if loc and dataclasses.is_dataclass(d):
                file, line, col = loc
                text = d.text
                prefix = f"{d.file}:{d.line}:{d.col}:"
                if text.startswith(prefix):
                    text = f"{file}:{line}:{col}:" + text[len(prefix):]
                try:
                    d = dataclasses.replace(d, file=file, line=line, col=col, text=text)
                except (TypeError, ValueError):
                    pass
            out.append(d)
        return out

    def close(self) -> None:
        if getattr(self, "_exe", None):
            _h().tsr_executable_destroy(self._exe)
            self._exe = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


def _fill(a: _CArray, x: np.ndarray, dt: int) -> None:
    a.dtype = dt
    a.rank = x.ndim
    for k, d in enumerate(x.shape):
        a.dims[k] = d
    a.data = x.ctypes.data
