"""The numpy-level API: modules and kernels, contexts, executables for both
backends, runs on numpy arrays, diagnostics as Python objects.

Everything here is a thin layer over tessera/api.h (docs/api.md): a Context
wraps tsr_context_t, an Executable wraps tsr_executable_t, a run passes the
numpy arrays' own buffers to tsr_executable_run (no copy when they are
C-contiguous and of the declared dtype) and turns the result's records into
`Diagnostic`s. docs/python.md is the user's guide.
"""

from __future__ import annotations

import _signal  # getsignal without signal.getsignal's enum conversion (2 us)
import codecs
import ctypes
import dataclasses
import difflib
import itertools
import math
import os
import select
import signal
import sys
import threading
import time
import warnings
import weakref
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import ml_dtypes
import numpy as np

from . import _capi
from ._lib import TesseraError

__all__ = [
    "Module", "Kernel", "Operand", "Context", "default_context", "Executable",
    "compile", "run", "RunResult", "RunStats", "Diagnostic", "CompileError",
    "KernelError", "KernelWarning", "CacheWarning", "CancelToken", "dtypes",
    "numpy_dtype", "backend_names",
]

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))

# ---- dtypes ------------------------------------------------------------------------

# How each tessera dtype is held in numpy. bf16 is ml_dtypes.bfloat16 (the
# same 16-bit patterns tessera stores), i1 is bool (bytes 0 or 1).
_NUMPY_DTYPES: dict[str, np.dtype] = {
    "f32": np.dtype(np.float32),
    "bf16": np.dtype(ml_dtypes.bfloat16),
    "f16": np.dtype(np.float16),
    "i32": np.dtype(np.int32),
    "u32": np.dtype(np.uint32),
    "i16": np.dtype(np.int16),
    "u16": np.dtype(np.uint16),
    "i8": np.dtype(np.int8),
    "u8": np.dtype(np.uint8),
    "i1": np.dtype(np.bool_),
}

_dtype_list: list[str] | None = None


def dtypes() -> tuple[str, ...]:
    """The dtype names of the loaded library, in the order of its enum
    (tessera/dtypes.def): ("f32", "bf16", ...)."""
    global _dtype_list
    if _dtype_list is None:
        h = _capi.lib()
        names = []
        for i in itertools.count():
            name = h.tsr_dtype_name(i).decode()
            if name == "?":
                break
            names.append(name)
        _dtype_list = names
    return tuple(_dtype_list)


def numpy_dtype(name: str) -> np.dtype:
    """The numpy dtype that holds tessera dtype `name` ("f32", "bf16", ...)."""
    try:
        return _NUMPY_DTYPES[name]
    except KeyError:
        raise ValueError(f"tessera: unknown dtype {name!r} (dtypes: "
                         f"{', '.join(dtypes())})") from None


def _dtype_index(name: str) -> int:
    return dtypes().index(name)


def backend_names() -> tuple[str, ...]:
    """The backends an executable can be made for: ("interp", "cpu"). Whether
    this build has the cpu backend shows when compiling for it."""
    return tuple(_capi.BACKENDS)


# ---- diagnostics ----------------------------------------------------------------------


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


# ---- output ---------------------------------------------------------------------------

PrintCallback = Callable[[str], Any]
"""Receives text: a kernel's `print` output or warning lines, in pieces (not
necessarily whole lines); with the cpu backend and several cores, from
several threads."""


class _Sink:
    """Where one run's (or one context's) text goes. C calls the trampolines
    below with the sink's token as `user`. A run's sink without an
    on_warning callback only notes that warnings came (their records are
    read from the result); a context's keeps them for CacheWarnings. A
    callback's exception is kept, the run cancelled (through `cancel`, the
    package's own flag of the run, never a user's CancelToken), and the
    exception raised after the run.

    The callbacks are called holding no lock: one may run a kernel itself
    (which prints through another sink, or this one), or block, without
    stopping the other runs' output."""

    __slots__ = ("on_print", "on_warning", "decoders", "error", "cancel", "warned",
                 "keep_warnings", "cache_text", "lock")

    def __init__(self, on_print: PrintCallback | None, on_warning: PrintCallback | None,
                 cancel: ctypes.c_int | None = None, keep_warnings: bool = False):
        self.on_print = on_print
        self.on_warning = on_warning
        self.decoders: dict[str, codecs.IncrementalDecoder] = {}
        self.error: BaseException | None = None
        self.cancel = cancel
        self.warned = False
        self.keep_warnings = keep_warnings
        self.cache_text: list[str] = []  # a context's warnings, issued later
        # Text may come from several cores' threads: the decoders' state and
        # `error` change under this lock, the callbacks run outside it.
        self.lock = threading.Lock()

    def reset(self, on_print: PrintCallback | None, on_warning: PrintCallback | None) -> None:
        self.on_print = on_print
        self.on_warning = on_warning
        self.error = None
        self.warned = False
        if self.decoders:
            self.decoders.clear()

    def write(self, stream: str, data: bytes) -> None:
        if stream == "print":
            fn = self.on_print
        else:
            self.warned = True
            fn = self.on_warning
            if fn is None and not self.keep_warnings:
                return  # the result's records become KernelWarnings
        with self.lock:
            decoder = self.decoders.get(stream)
            if decoder is None:
                decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
                self.decoders[stream] = decoder
            text = decoder.decode(data)
            if not text or self.error is not None:
                return
            if fn is None and stream != "print":
                self.cache_text.append(text)
                return
        try:
            if fn is not None:
                fn(text)
            else:
                sys.stdout.write(text)
        except BaseException as e:  # raised again after the run
            with self.lock:
                if self.error is None:
                    self.error = e
            if self.cancel is not None:
                self.cancel.value = 1


_sinks: dict[int, _Sink] = {}
_sink_ids = itertools.count(1)


def _trampoline(stream: str) -> Any:
    def on_text(user: int | None, text: Any, size: int) -> None:
        sink = _sinks.get(user or 0)
        if sink is not None:
            sink.write(stream, ctypes.string_at(text, size))
    return _capi.OUTPUT_FN(on_text)


# Kept alive for the life of the process: C holds these pointers.
_PRINT_TRAMPOLINE = _trampoline("print")
_WARNING_TRAMPOLINE = _trampoline("warning")


def _register(sink: _Sink) -> int:
    token = next(_sink_ids)
    _sinks[token] = sink
    return token


# ---- cancellation -----------------------------------------------------------------------


class CancelToken:
    """`cancel()` from another thread stops the runs given `cancel=token`
    soon after, with a KernelError whose diagnostic says "run stopped:
    cancelled"; a run started with a cancelled token stops at once. Only
    `cancel()` sets it (not a callback's exception, not Ctrl-C, which stop
    their own run). Reusable after `reset()`."""

    def __init__(self) -> None:
        self._set = False
        # The flags of the runs using the token (each run polls a flag of
        # the package's own, so that what else stops a run leaves the token
        # alone), keyed by id.
        self._runs: dict[int, ctypes.c_int] = {}
        self._lock = threading.Lock()

    def cancel(self) -> None:
        """Asks the runs using this token to stop."""
        with self._lock:
            self._set = True
            for flag in self._runs.values():
                flag.value = 1

    def reset(self) -> None:
        """Lets later runs with the token run (runs it stopped stay stopped)."""
        with self._lock:
            self._set = False

    @property
    def cancelled(self) -> bool:
        return self._set

    def _attach(self, flag: ctypes.c_int) -> None:
        """A run polling `flag` starts with this token."""
        with self._lock:
            self._runs[id(flag)] = flag
            if self._set:
                flag.value = 1

    def _detach(self, flag: ctypes.c_int) -> None:
        with self._lock:
            self._runs.pop(id(flag), None)


class _Interrupts:
    """Ctrl-C during a run on the main thread: Python's C-level signal
    handler writes the signal number to the wakeup fd even while the main
    thread is inside the C call; a watcher thread reading it sets the cancel
    flag of the run in progress, the run stops ("run stopped: cancelled"),
    and Python raises KeyboardInterrupt when the call returns.

    Our wakeup fd stays installed between runs, unless another is found
    there (an asyncio loop's): then that one is put back and runs are not
    armed. Only when SIGINT has Python's default handler: otherwise Ctrl-C
    waits for the run's end.

    A Ctrl-C between runs (at a prompt, in an `except KeyboardInterrupt`)
    also writes to the fd; Python raised its KeyboardInterrupt then, and it
    is not for the next run. So the watcher only waits in poll() without the
    lock, then reads and acts under `lock`, and `arm` drops what the pipe
    holds under the same lock before it sets the run's flag: a byte read
    after that came during the run."""

    def __init__(self) -> None:
        self.current: ctypes.c_int | None = None  # the main thread's run's flag
        self.read_fd = self.write_fd = -1
        self.started = False
        self.main = threading.main_thread().ident
        self.checked = -1.0  # time.monotonic() of the last check of the wakeup fd
        self.ours = False
        self.lock = threading.Lock()
        self.pending: Any = None  # arm's select.poll of read_fd (the main thread's)

    def _start(self) -> bool:
        if not self.started:
            try:
                r, w = os.pipe()
                os.set_blocking(w, False)
                os.set_blocking(r, False)
            except OSError:
                return False
            self.read_fd, self.write_fd = r, w
            self.pending = select.poll()
            self.pending.register(r, select.POLLIN)
            threading.Thread(target=self._watch, name="tessera-interrupts",
                             daemon=True).start()
            self.started = True
        return True

    def _drain(self) -> bytes | None:
        """What the pipe holds (under `lock`); None once it is closed."""
        data = b""
        while True:
            try:
                chunk = os.read(self.read_fd, 64)
            except BlockingIOError:
                return data
            except OSError:
                return None
            if not chunk:
                return None
            data += chunk

    def _watch(self) -> None:
        ready = select.poll()  # its own: a poll object is not for two threads
        ready.register(self.read_fd, select.POLLIN)
        while True:
            try:
                ready.poll()
            except OSError:
                return
            with self.lock:
                data = self._drain()
                if data is None:
                    return
                flag = self.current
                if signal.SIGINT in data and flag is not None:
                    flag.value = 1

    def arm(self, flag: ctypes.c_int) -> bool:
        """Arms Ctrl-C for a run on this thread; False when it cannot be."""
        if threading.get_ident() != self.main or \
                _signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
            return False
        now = time.monotonic()
        if now - self.checked > 0.1:
            # Is our wakeup fd (still) there? set_wakeup_fd is the only way
            # to ask, and costs 1.4 us: done at most every 0.1 s. Between two
            # checks another one may have been set; then a run is not
            # cancelled by Ctrl-C (the other's owner gets the signal), but
            # another fd is never replaced.
            self.checked = now
            self.ours = False
            if not self.started and not self._start():
                return False
            try:
                old = signal.set_wakeup_fd(self.write_fd, warn_on_full_buffer=False)
            except (ValueError, OSError):
                return False
            if old != -1 and old != self.write_fd:
                signal.set_wakeup_fd(old)  # someone else's (asyncio): leave it
                return False
            self.ours = True
        if not self.ours:
            return False
        with self.lock:
            if self.pending.poll(0):
                self._drain()  # a Ctrl-C of before this run
            self.current = flag
        return True

    def disarm(self) -> None:
        # Under the lock: once this returns, the watcher no longer sets the
        # flag (which the run's slot reuses).
        with self.lock:
            self.current = None


_interrupts = _Interrupts()


# ---- modules and kernels -------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Operand:
    """One operand of a kernel, as declared."""

    index: int
    """Position among the kernel's operands (prefetch, in, out, scratch)."""
    name: str
    """Without '%'."""
    role: str
    """"prefetch", "in", "out" or "scratch"."""
    dtype_name: str
    """The tessera dtype: "f32", "bf16", ..."""
    shape: tuple[int, ...]
    """The whole array's shape (a scratch buffer's shape; () for a
    semaphore)."""
    space: str
    """Where the kernel sees it: "vmem", "smem", "hbm" or "any"."""
    alias: str | None = None
    """Outputs: the name of the input it aliases."""

    @property
    def dtype(self) -> np.dtype:
        """The numpy dtype holding it (ml_dtypes.bfloat16 for bf16, bool for
        i1)."""
        return numpy_dtype(self.dtype_name)

    def __str__(self) -> str:
        dims = ", ".join(map(str, self.shape))
        return f"{self.role} %{self.name}: {self.dtype_name}[{dims}] {self.space}"


class Module:
    """A parsed .tsr module: one or more kernels. Not thread-safe to share
    while it is being read (tsr_ir_module_t); executables made from its
    kernels borrow nothing from it."""

    def __init__(self) -> None:
        raise TypeError("use tessera.Module.parse(text) or tessera.Module.load(path)")

    @classmethod
    def _from_handle(cls, handle: int, filename: str = "<module>") -> Module:
        """Adopts a tsr_ir_module_t* (the builder's): the Module owns it from
        now on and destroys it."""
        if not handle:
            raise ValueError("tessera: Module._from_handle: NULL module")
        self = object.__new__(cls)
        self._handle = ctypes.c_void_p(handle)
        self.filename = filename
        h = _capi.lib()
        self._kernels = tuple(Kernel._make(self, h.tsr_ir_module_kernel(handle, i))
                              for i in range(h.tsr_ir_module_kernel_count(handle)))
        return self

    @classmethod
    def parse(cls, text: str | bytes, filename: str = "<string>") -> Module:
        """Parses .tsr text (not verified yet: compiling verifies, or
        `verify()`). Raises CompileError (code "parse error") with a
        Diagnostic per error; `filename` names the text in them."""
        data = text.encode() if isinstance(text, str) else bytes(text)
        fname = _capi.c_bytes_of(filename, "tessera: filename")
        h = _capi.lib()
        out = ctypes.c_void_p()
        s = h.tsr_ir_module_parse(_capi.StringView(ctypes.cast(fname, ctypes.c_void_p), len(fname)),
                                  _capi.StringView(ctypes.cast(data, ctypes.c_void_p), len(data)),
                                  ctypes.byref(out))
        if s:
            _raise_status(s)
        return cls._from_handle(out.value, filename)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Module:
        """Reads and parses a .tsr file. CompileError as `parse`
        (code "I/O error" when the file cannot be read)."""
        h = _capi.lib()
        out = ctypes.c_void_p()
        s = h.tsr_ir_module_parse_file(_capi.c_bytes_of(path, "tessera: path"),
                                       ctypes.byref(out))
        if s:
            _raise_status(s)
        return cls._from_handle(out.value, os.fspath(path))

    def verify(self) -> None:
        """Raises CompileError (code "verify error") with every diagnostic if the
        module breaks a rule of docs/ir.md."""
        s = _capi.lib().tsr_ir_module_verify(self._handle)
        if s:
            _raise_status(s)

    @property
    def kernels(self) -> tuple[Kernel, ...]:
        """The kernels, in the order of the text."""
        return self._kernels

    @property
    def text(self) -> str:
        """The canonical text (`tessera fmt`)."""
        return _take_string(_capi.lib().tsr_ir_module_print(self._handle))

    def __getitem__(self, key: str | int) -> Kernel:
        if isinstance(key, int):
            return self._kernels[key]
        name = key[1:] if key.startswith("@") else key
        for k in self._kernels:
            if k.name == name:
                return k
        names = ", ".join("@" + k.name for k in self._kernels)
        raise KeyError(f"tessera: no kernel @{name} in {self.filename} (kernels: {names})")

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and any(
            k.name == name.lstrip("@") for k in self._kernels)

    def __iter__(self) -> Iterator[Kernel]:
        return iter(self._kernels)

    def __len__(self) -> int:
        return len(self._kernels)

    def __repr__(self) -> str:
        return f"<tessera.Module {self.filename!r}: {', '.join('@' + k.name for k in self._kernels)}>"

    def __del__(self) -> None:
        handle = getattr(self, "_handle", None)
        if handle is not None and handle.value:
            _capi.lib().tsr_ir_module_destroy(handle)
            handle.value = None


def _take_string(ptr: int | None) -> str:
    if not ptr:
        raise MemoryError("tessera: out of memory printing a module")
    try:
        return ctypes.string_at(ptr).decode()
    finally:
        _capi.lib().tsr_ir_string_free(ptr)


class Kernel:
    """One kernel of a Module (keeps its module alive). Calling it runs it:
    `kernel(*inputs, **options)` is `tessera.run(kernel, *inputs, **options)`."""

    module: Module
    name: str
    operands: tuple[Operand, ...]

    def __init__(self) -> None:
        raise TypeError("kernels come from a Module: module['name'] or module.kernels")

    @classmethod
    def _make(cls, module: Module, handle: int) -> Kernel:
        self = object.__new__(cls)
        h = _capi.lib()
        self.module = module
        self._handle = handle
        self.name = h.tsr_ir_kernel_name(handle).decode()
        infos = []
        for i in range(h.tsr_ir_kernel_operand_count(handle)):
            info = _capi.OperandInfo()
            h.tsr_ir_kernel_operand_info(handle, i, ctypes.byref(info))
            infos.append(info)
        names = [info.name.decode() for info in infos]
        self.operands = tuple(
            Operand(index=i, name=names[i], role=_capi.ROLES[info.role],
                    dtype_name=dtypes()[info.dtype] if 0 <= info.dtype < len(dtypes()) else "?",
                    shape=tuple(info.dims[:info.rank]),
                    space=_capi.SPACES[info.space] if 0 <= info.space < 4 else "?",
                    alias=names[info.alias] if info.role == 2 and info.alias >= 0 else None)
            for i, info in enumerate(infos))
        return self

    @property
    def inputs(self) -> tuple[Operand, ...]:
        """The operands a run takes, in order: prefetch, then in."""
        return tuple(o for o in self.operands if o.role in ("prefetch", "in"))

    @property
    def outputs(self) -> tuple[Operand, ...]:
        """The operands a run returns, in order."""
        return tuple(o for o in self.operands if o.role == "out")

    @property
    def text(self) -> str:
        """The kernel's canonical text."""
        return _take_string(_capi.lib().tsr_ir_kernel_print(self._handle))

    def to_mosaic(self, chip: str | None = "v5e", *, context: Context | None = None) -> str:
        """The kernel as a Mosaic TPU MLIR module for `chip` (tessera's chip
        names: v5e, v6e, ...; None is v5e): the text `tessera lower --target
        tpu` prints (tsr_tpu_emit, docs/tpu.md). With a `context`, the module
        goes through that context's disk cache (keyed by kernel, target tpu
        and chip); without one it is emitted anew (~0.05-0.2 ms, cheaper than
        a disk hit). Raises CompileError with located diagnostics for what
        the chip or the emitter cannot do."""
        h = _capi.lib()
        if not hasattr(h, "tsr_tpu_emit"):
            raise CompileError("unsupported", "tessera: this libtessera has no TPU emitter "
                               "(tsr_tpu_emit); rebuild it from a tree with tpu/")
        b = None if chip is None else _capi.c_bytes_of(str(chip), "tessera: chip")
        out = ctypes.c_void_p()
        ctx = context._live() if context is not None else None
        s = h.tsr_tpu_emit(ctx, self._handle, b, ctypes.byref(out))
        if context is not None:
            context._flush_warnings()
        if s:
            _raise_status(s, CompileError, f"kernel @{self.name}")
        return _take_string(out.value)

    def tpu_vmem(self, chip: str | None = "v5e") -> dict[str, int]:
        """The VMEM this kernel keeps live on a TPU `chip` (tsr_tpu_vmem,
        docs/tpu.md "VMEM"): `need_bytes` (windows double-buffered, scratch,
        scoped buffers, padded to (8, 128) tiles), `default_limit_bytes` (what
        libtpu gives a call without vmem_limit_bytes) and `capacity_bytes`."""
        h = _capi.lib()
        if not hasattr(h, "tsr_tpu_vmem"):
            raise CompileError("unsupported", "tessera: this libtessera has no tsr_tpu_vmem")
        out = _capi.TpuVmem()
        b = None if chip is None else _capi.c_bytes_of(str(chip), "tessera: chip")
        s = h.tsr_tpu_vmem(self._handle, b, ctypes.byref(out))
        if s:
            _raise_status(s, CompileError, f"kernel @{self.name}")
        return {"need_bytes": out.need_bytes, "default_limit_bytes": out.default_limit_bytes,
                "capacity_bytes": out.capacity_bytes}

    def compile(self, backend: str = "interp", **options: Any) -> Executable:
        """`tessera.compile(self, backend, **options)`."""
        return compile(self, backend, **options)

    def __call__(self, *inputs: Any, **options: Any) -> Any:
        return run(self, *inputs, **options)

    def __repr__(self) -> str:
        return f"<tessera.Kernel @{self.name}: {'; '.join(map(str, self.operands))}>"


# ---- contexts -------------------------------------------------------------------------------


class Context:
    """A tsr_context_t: the disk cache of compiled kernels, the lowering
    library, the default output, the allocator, and in-memory caches of
    prepared programs and loaded compiled kernels of its own. Thread-safe.

    Keyword arguments are the fields of tsr_context_options_t (docs/api.md);
    those left None keep the defaults: no disk cache and nothing read from
    the environment, or, with `from_environment=True`, what the CLI reads
    (TESSERA_CACHE, TESSERA_CACHE_DIR, TESSERA_CACHE_KEY_FILE,
    TESSERA_CACHE_MAX_SIZE, TESSERA_CACHE_SHARED, TESSERA_LOWER_LIBRARY;
    an unusable cache is then one CacheWarning).

    on_print / on_warning: default text callbacks for runs of its
    executables (a run's and an executable's own come first). Without
    any, `print` output goes to sys.stdout and warnings to `warnings.warn`.

    allocator: an object with `allocate(size, alignment) -> int` (an
    address, 0 for failure) and `release(address, size)`, called from any
    thread that runs; they must stay usable until every object made through
    the context is freed (this Context keeps the object alive)."""

    def __init__(self, *, from_environment: bool = False, disk_cache: bool | None = None,
                 cache_dir: str | os.PathLike[str] | None = None,
                 cache_key_file: str | os.PathLike[str] | None = None,
                 cache_max_bytes: int | None = None, cache_shared: bool | None = None,
                 cache_optional: bool | None = None, cache_environment: bool | None = None,
                 lower_library: str | os.PathLike[str] | None = None,
                 on_print: PrintCallback | None = None,
                 on_warning: PrintCallback | None = None,
                 allocator: Any = None):
        h = _capi.lib()
        o = _capi.ContextOptions()
        if from_environment:
            h.tsr_context_options_from_environment(ctypes.byref(o))
        else:
            h.tsr_context_options_initialize(ctypes.byref(o))
        if disk_cache is None and cache_dir is not None:
            disk_cache = True
        # Strings: ctypes keeps no reference for c_char_p fields, so keep ours
        # until tsr_context_create has copied them.
        keep: list[bytes] = []

        def path(field: str, p: str | os.PathLike[str]) -> bytes:
            b = _capi.c_bytes_of(p, f"tessera.Context: {field}")
            keep.append(b)
            return b

        # Only what was given overrides the defaults (or the environment's).
        for field, flag in (("disk_cache", disk_cache), ("cache_shared", cache_shared),
                            ("cache_optional", cache_optional),
                            ("cache_environment", cache_environment)):
            if flag is not None:
                setattr(o, field, bool(flag))
        for field, p in (("cache_dir", cache_dir), ("cache_key_file", cache_key_file),
                         ("lower_library", lower_library)):
            if p is not None:
                setattr(o, field, path(field, p))
        if cache_max_bytes is not None:  # 0: 1 GiB
            _int_option(o, "cache_max_bytes", "cache_max_bytes", cache_max_bytes)
        # The context's own text (cache warnings) goes to its sink; runs set
        # their own (Executable.run).
        self.on_print = on_print
        self.on_warning = on_warning
        self._sink = _Sink(on_print, on_warning, keep_warnings=True)
        self._token = _register(self._sink)
        o.output.print = _PRINT_TRAMPOLINE
        o.output.warning = _WARNING_TRAMPOLINE
        o.output.user = self._token
        self._allocator = None
        if allocator is not None:
            self._allocator = _PythonAllocator(allocator)
            o.allocator.allocate = self._allocator.allocate_fn
            o.allocator.release = self._allocator.release_fn
        self._executables: weakref.WeakSet[Executable] = weakref.WeakSet()
        self._handle = ctypes.c_void_p()
        s = h.tsr_context_create(ctypes.byref(o), ctypes.byref(self._handle))
        self._flush_warnings()
        if s:
            _sinks.pop(self._token, None)
            _raise_status(s, TesseraError, "tessera.Context")

    def _flush_warnings(self) -> None:
        """Issues the cache warnings the library wrote since the last call."""
        sink = self._sink
        if sink.cache_text:
            with sink.lock:
                text, sink.cache_text = "".join(sink.cache_text), []
            for line in text.splitlines():
                if line.strip():
                    warnings.warn(CacheWarning(line), **_warn_kwargs())

    @property
    def has_disk_cache(self) -> bool:
        """Whether the context has a (usable) disk cache."""
        return bool(_capi.lib().tsr_context_disk_cache(self._live()))

    def stats(self) -> dict[str, Any]:
        """The counters of the context's caches: {"programs": {...},
        "compiled": {..., "disk": {...}}} (tsr_context_stats)."""
        st = _capi.ContextStats()
        _capi.lib().tsr_context_stats(self._live(), ctypes.byref(st))
        return _struct_dict(st)

    def _live(self) -> ctypes.c_void_p:
        if not self._handle:
            raise ValueError("tessera: the context is closed")
        return self._handle

    def close(self) -> None:
        """Destroys the context, closing its executables first (each
        Executable keeps its Context alive, so this only happens when called
        by hand or at the end of a `with` block). Runs in progress end
        normally: the C context is freed after the last of them
        (Executable.close)."""
        if getattr(self, "_handle", None):
            for exe in list(self._executables):
                exe.close()
            _capi.lib().tsr_context_destroy(self._handle)
            self._handle = ctypes.c_void_p()
            _sinks.pop(self._token, None)

    def __enter__(self) -> Context:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


def _struct_dict(s: ctypes.Structure) -> dict[str, Any]:
    out = {}
    for name, _ in s._fields_:
        v = getattr(s, name)
        out[name] = _struct_dict(v) if isinstance(v, ctypes.Structure) else v
    return out


class _PythonAllocator:
    """A tsr_allocator_t whose functions call a Python object's allocate and
    release (for counting or testing; every allocation crosses into Python)."""

    def __init__(self, obj: Any):
        if not (callable(getattr(obj, "allocate", None)) and callable(getattr(obj, "release", None))):
            raise TypeError("tessera: allocator needs allocate(size, alignment) -> address "
                            "and release(address, size) methods")
        self.obj = obj

        def allocate(user: Any, size: int, alignment: int) -> int:
            try:
                return int(obj.allocate(size, alignment) or 0)
            except BaseException:
                return 0

        def release(user: Any, block: int | None, size: int) -> None:
            try:
                obj.release(block or 0, size)
            except BaseException:
                pass

        self.allocate_fn = _capi.ALLOCATE_FN(allocate)
        self.release_fn = _capi.RELEASE_FN(release)


_default_context: Context | None = None
_default_lock = threading.Lock()


def default_context() -> Context:
    """The process's default context, made on first use with
    `Context(from_environment=True)`: the disk cache the CLI uses
    (TESSERA_CACHE_DIR, else $XDG_CACHE_HOME/tessera, else ~/.cache/tessera;
    TESSERA_CACHE=off for none), unusable ones a CacheWarning."""
    global _default_context
    if _default_context is None:
        with _default_lock:
            if _default_context is None:
                _default_context = Context(from_environment=True)
    return _default_context


# ---- options -----------------------------------------------------------------------------

# Options an executable is made with (the fields of tsr_executable_options_t,
# plus dma_mode for dma_eager and the output callbacks), and those a run may
# change (tsr_run_options_t).
_EXECUTABLE_OPTIONS = (
    "uninit", "check", "shuffle_parallel", "shuffle_seed", "chip", "max_errors", "devices",
    "cores", "schedule_seed", "dma_eager", "dma_mode", "detect_races", "strict",
    "timeout_seconds", "max_steps", "cancel", "trace_path", "opt_level", "on_print",
    "on_warning")
_RUN_OPTIONS = ("strict", "timeout_seconds", "max_steps", "cancel", "trace_path", "on_print",
                "on_warning")


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


def _seconds(v: Any) -> float:
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise TypeError(f"tessera: option timeout_seconds must be a number, got {v!r}") from None
    if not f >= 0:
        raise ValueError(f"tessera: option timeout_seconds must be >= 0, got {v!r}")
    return f


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


# ---- executables -------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class RunStats:
    """Counters of a run (the interpreter's; the cpu backend leaves them 0)."""

    grid_steps: int
    ops_executed: int
    blocks_copied_in: int
    blocks_copied_out: int
    bytes_copied: int
    vmem_bytes: int
    warnings: int


@dataclasses.dataclass(frozen=True)
class RunResult:
    """What `Executable.run` returns."""

    outputs: tuple[np.ndarray, ...]
    """One array per output operand, in declaration order."""
    warnings: tuple[Diagnostic, ...]
    """The run's warnings (and notes), also issued as KernelWarnings unless
    an on_warning callback took the text."""
    stats: RunStats


_addressof = ctypes.addressof
_char_at = ctypes.c_char.from_buffer  # a writable array's address in 0.5 us, x.ctypes.data's 1.7


class _Slot:
    """What one run of an executable needs in C, made once and reused by the
    runs that find it free: the operands' tsr_array_t's (only `data` changes
    between runs), the run options (output through the trampolines to the
    slot's sink, the cancel flag) and the result pointer.

    The run polls the slot's own flag, which the package sets (a callback's
    exception, Ctrl-C) and a CancelToken given to the run sets through
    CancelToken._attach: stopping one run never cancels the user's token."""

    def __init__(self, exe: Executable):
        n = exe._n
        self.arrays = (_capi.Array * n)()
        self.ptrs = (ctypes.POINTER(_capi.Array) * n)()
        offset = _capi.Array.data.offset
        self.data = []
        for i, (dtype, shape) in enumerate(exe._array_specs):
            a = self.arrays[i]
            a.dtype = dtype
            a.rank = len(shape)
            for d, extent in enumerate(shape):
                a.dims[d] = extent
            self.ptrs[i] = ctypes.pointer(a)
            self.data.append(ctypes.c_void_p.from_address(ctypes.addressof(a) + offset))
        self.flag = ctypes.c_int(0)
        self.cancel: CancelToken | None = exe._cancel  # this run's token
        self.sink = _Sink(None, None, self.flag)
        self.token = _register(self.sink)
        ro = _capi.RunOptions()
        _capi.lib().tsr_run_options_initialize(ctypes.byref(ro))
        ro.output.print = _PRINT_TRAMPOLINE
        ro.output.warning = _WARNING_TRAMPOLINE
        ro.output.user = self.token
        ro.cancel = ctypes.pointer(self.flag)
        self.ro = ro
        self.ro_ref = ctypes.byref(ro)
        self.pristine = bytes(ro)
        self.pristine_cancel = self.cancel
        self.keep: list[Any] = []
        self.result = ctypes.c_void_p()
        self.result_ref = ctypes.byref(self.result)

    def apply(self, options: Mapping[str, Any], on_print: PrintCallback | None,
              on_warning: PrintCallback | None) -> tuple[PrintCallback | None, PrintCallback | None]:
        """Sets one run's options; returns its callbacks."""
        ro = self.ro
        for name, v in options.items():
            if name == "strict":
                ro.strict = -1 if v is None else int(bool(v))
            elif name == "timeout_seconds":
                ro.timeout_seconds = 0.0 if v is None else _seconds(v)
            elif name == "max_steps":
                _int_option(ro, "max_steps", name, 0 if v is None else v)
            elif name == "cancel":
                if v is not None:
                    self.cancel = _cancel_token(v)
            elif name == "trace_path":
                if v is not None:
                    b = _capi.c_bytes_of(v, "tessera: option trace_path")
                    self.keep.append(b)
                    ro.trace_path = b
            elif name == "on_print":
                on_print = _callback(name, v)
            elif name == "on_warning":
                on_warning = _callback(name, v)
        return on_print, on_warning

    def restore(self) -> None:
        """Back to the executable's options after `apply`."""
        ctypes.memmove(ctypes.addressof(self.ro), self.pristine, len(self.pristine))
        self.cancel = self.pristine_cancel
        self.keep.clear()

    def close(self) -> None:
        _sinks.pop(self.token, None)


class Executable:
    """A kernel made ready to run on one backend (a tsr_executable_t):
    `executable(*inputs)` runs it on numpy arrays and returns its outputs.
    Made by `tessera.compile`. Thread-safe: runs may be concurrent."""

    def __init__(self, kernel: Kernel, backend: str = "interp", *,
                 context: Context | None = None, **options: Any):
        if not isinstance(kernel, Kernel):
            raise TypeError(f"tessera.compile: expected a tessera.Kernel, got {type(kernel).__name__}")
        _check_names("tessera.compile", options, _EXECUTABLE_OPTIONS)
        self.kernel_name = kernel.name
        self.operands = kernel.operands
        self.backend = _choice("backend", backend, tuple(_capi.BACKENDS))
        self.context = context if context is not None else default_context()
        self.options = dict(options)
        h = _capi.lib()
        eo = _capi.ExecutableOptions()
        h.tsr_executable_options_initialize(ctypes.byref(eo))
        eo.backend = _capi.BACKENDS[backend]
        keep: list[Any] = []
        devices = 1
        for name, v in options.items():
            if name == "uninit":
                eo.uninit = _capi.UNINIT[_choice(name, v, tuple(_capi.UNINIT))]
            elif name == "check":
                eo.check = bool(v)
            elif name == "shuffle_parallel":
                eo.shuffle_parallel = bool(v)
            elif name == "shuffle_seed":
                _int_option(eo, "shuffle_seed", name, v)
            elif name == "chip":
                if v is not None:
                    b = _capi.c_bytes_of(str(v), "tessera: option chip")
                    if not h.tsr_interp_chip_vmem_bytes(b, ctypes.byref(ctypes.c_uint64())):
                        raise ValueError(f"tessera: unknown chip {v!r} (chips: v2, v3, v4, v5e, "
                                         "v5p, v6e, v7x (v7, tpu7x), tpu8i)")
                    keep.append(b)
                    eo.chip = b
            elif name == "max_errors":
                _int_option(eo, "max_errors", name, v, positive=True)
            elif name == "devices":
                devices = _int_option(eo, "devices", name, v, positive=True)
            elif name == "cores":
                _int_option(eo, "cores", name, v, positive=True)
            elif name == "schedule_seed":
                _int_option(eo, "schedule_seed", name, v)
            elif name == "dma_mode":
                eo.dma_eager = _choice(name, v, ("lazy", "eager")) == "eager"
            elif name == "dma_eager":
                eo.dma_eager = bool(v)
            elif name == "detect_races":
                eo.detect_races = bool(v)
            elif name == "strict":
                eo.strict = bool(v)
            elif name == "timeout_seconds":
                eo.timeout_seconds = 0.0 if v is None else _seconds(v)
            elif name == "max_steps":
                _int_option(eo, "max_steps", name, 0 if v is None else v)
            elif name == "cancel":
                if v is not None:
                    _cancel_token(v)  # runs poll their own flags (_Slot)
            elif name == "trace_path":
                if v is not None:
                    b = _capi.c_bytes_of(v, "tessera: option trace_path")
                    keep.append(b)
                    eo.trace_path = b
            elif name == "opt_level":
                _int_option(eo, "opt_level", name, v)
            elif name in ("on_print", "on_warning"):
                _callback(name, v)
        self._keep = keep  # what eo's pointers point at (strings C copies)
        self._devices = devices
        self._on_print = options.get("on_print")
        self._on_warning = options.get("on_warning")
        self._cancel = options.get("cancel")
        # close() during runs leaves the destroy to the last of them. A run
        # appends to `_active`, then looks at `_closed`; close() sets
        # `_closed`, then looks at `_active`: whatever the interleaving, a
        # run that goes on is seen by close(), or it sees `_closed` itself.
        # (list.append and pop are atomic: no lock, which cost a measurable
        # part of a warm call.) `_destroy_once` makes the destroy happen once.
        self._active: list[None] = []
        self._closed = False
        self._destroy_once = [True]
        # Runs write their text to a sink chosen per run; the executable's own
        # output stays unset (the run's wins).
        self._handle = ctypes.c_void_p()
        s = h.tsr_executable_create(self.context._live(), kernel._handle, ctypes.byref(eo),
                                    ctypes.byref(self._handle))
        self.context._flush_warnings()
        if s:
            _raise_status(s, CompileError, f"kernel @{kernel.name}")
        self.context._executables.add(self)
        self._run_fn = h.tsr_executable_run
        self._destroy_fn = h.tsr_run_result_destroy
        # Applied to a run's diagnostics before they are raised or warned
        # (the JAX bridge gives operand records its user's Python lines).
        self._diagnostic_hook: Callable[[Diagnostic], Diagnostic] | None = None
        # Makes each run's output arrays (the bridge's are aligned for XLA).
        self._empty: Callable[[tuple[int, ...], np.dtype], np.ndarray] = np.empty
        self._prepare_binding()

    # -- binding -----------------------------------------------------------------

    def _prepare_binding(self) -> None:
        lead = (self._devices,) if self._devices > 1 else ()
        bound = [o for o in self.operands if o.role != "scratch"]
        self.inputs = tuple(o for o in bound if o.role != "out")
        self.outputs = tuple(o for o in bound if o.role == "out")
        self._in_specs = [(o, o.dtype, lead + o.shape) for o in self.inputs]
        self._out_specs = [(o.dtype, lead + o.shape) for o in self.outputs]
        self._array_specs = [(_dtype_index(o.dtype_name), lead + o.shape) for o in bound]
        self._n = len(bound)
        # Slots (a run's C structs and sink) not in use; a run takes one or
        # makes one, and puts it back (list.pop and append are atomic).
        self._slots: list[_Slot] = []
        self._all_slots: weakref.WeakSet[_Slot] = weakref.WeakSet()
        names = ", ".join("%" + o.name for o in self.inputs)
        self._signature = f"kernel @{self.kernel_name} takes {len(self.inputs)} input" \
                          f"{'s' if len(self.inputs) != 1 else ''}" + (f" ({names})" if names else "")

    def _input(self, spec: tuple[Operand, np.dtype, tuple[int, ...]], x: Any) -> np.ndarray:
        o, dtype, shape = spec
        if type(x) is np.ndarray and (x.dtype is dtype or x.dtype == dtype) and \
                x.shape == shape and x.flags.c_contiguous:
            return x
        if not hasattr(x, "dtype"):
            # lists, Python scalars: converted to the declared dtype
            try:
                x = np.asarray(x, dtype=dtype)
            except (TypeError, ValueError) as e:
                raise TypeError(f"kernel @{self.kernel_name}: operand %{o.name} ({o.dtype_name}): "
                                f"cannot convert {type(x).__name__} to {dtype}: {e}") from None
        else:
            x = np.asarray(x)
            if x.dtype != dtype:
                hint = " (numpy has no bf16: use ml_dtypes.bfloat16)" if o.dtype_name == "bf16" else ""
                raise TypeError(f"kernel @{self.kernel_name}: operand %{o.name} is {o.dtype_name} "
                                f"(numpy {dtype}){hint}, got an array of dtype {x.dtype}")
        if x.shape != shape:
            want = list(shape)
            note = f" (a leading dimension of {self._devices} devices)" if self._devices > 1 else ""
            raise ValueError(f"kernel @{self.kernel_name}: operand %{o.name} has shape {want}{note}, "
                             f"got an array of shape {list(x.shape)}")
        return np.ascontiguousarray(x)

    # -- runs ------------------------------------------------------------------------

    def __call__(self, *inputs: Any, **run_options: Any) -> np.ndarray | tuple[np.ndarray, ...]:
        """Runs the kernel on `inputs` (one array per prefetch and in
        operand, in order); returns its output, or a tuple when it has
        several (or none). Raises KernelError when the run fails; warnings
        are issued as KernelWarnings. run_options: as `run`."""
        outputs = self._run(inputs, run_options, want_stats=False)[0]
        return outputs[0] if len(outputs) == 1 else outputs

    def run(self, *inputs: Any, **run_options: Any) -> RunResult:
        """Runs the kernel and returns its outputs, warnings and counters.

        run_options change this run only (tsr_run_options_t): strict,
        timeout_seconds, max_steps, cancel (a CancelToken), trace_path,
        on_print and on_warning (callables taking text). Ctrl-C on the main
        thread stops the run and raises KeyboardInterrupt."""
        outputs, warns, stats = self._run(inputs, run_options, want_stats=True)
        return RunResult(outputs, warns, stats)

    def _run(self, inputs: Sequence[Any], run_options: Mapping[str, Any],
             want_stats: bool) -> tuple[tuple[np.ndarray, ...], tuple[Diagnostic, ...], RunStats | None]:
        # The common case (warm, no per-run options, no output, no warnings)
        # makes two C calls: the run and the result's destroy. Each step here
        # was timed by bench/python/bench_binding.py (docs/python.md).
        if self._closed:
            raise ValueError("tessera: the executable is closed")
        if len(inputs) != len(self._in_specs):
            raise TypeError(f"{self._signature}, got {len(inputs)}")
        if run_options:
            _check_names("tessera.Executable.run", run_options, _RUN_OPTIONS)
        ins = [self._input(spec, x) for spec, x in zip(self._in_specs, inputs)]
        outs = [self._empty(shape, dtype) for dtype, shape in self._out_specs]
        warns, stats = self._execute(itertools.chain(ins, outs), None, run_options, want_stats)
        return tuple(outs), warns, stats

    def _run_buffers(self, addresses: Sequence[int]) -> None:
        """Runs on raw buffers the caller owns: one address per input, then
        per output, of the executable's shapes and dtypes (an XLA buffer,
        for the JAX bridge's FFI call). Raises and warns as a run does."""
        if self._closed:
            raise ValueError("tessera: the executable is closed")
        if len(addresses) != self._n:
            raise TypeError(f"{self._signature} and gives {self._n - len(self._in_specs)} "
                            f"outputs, got {len(addresses)} buffers")
        self._execute((), addresses, {}, want_stats=False)

    def _execute(self, arrays: Iterable[np.ndarray], addresses: Sequence[int] | None,
                 run_options: Mapping[str, Any],
                 want_stats: bool) -> tuple[tuple[Diagnostic, ...], RunStats | None]:
        """Runs on `arrays` (inputs then outputs), or on `addresses` when
        given; returns the warnings and the stats (when wanted or failed)."""
        active = self._active
        active.append(None)
        try:
            if self._closed:
                raise ValueError("tessera: the executable is closed")
            return self._execute_slot(arrays, addresses, run_options, want_stats)
        finally:
            active.pop()
            if self._closed and not active:
                self._destroy()

    def _execute_slot(self, arrays: Iterable[np.ndarray], addresses: Sequence[int] | None,
                      run_options: Mapping[str, Any],
                      want_stats: bool) -> tuple[tuple[Diagnostic, ...], RunStats | None]:
        try:
            slot = self._slots.pop()
        except IndexError:
            slot = _Slot(self)
            self._all_slots.add(slot)
        token = None
        try:
            on_print = self._on_print
            on_warning = self._on_warning
            if run_options:
                on_print, on_warning = slot.apply(run_options, on_print, on_warning)
            if on_print is None:
                on_print = self.context.on_print
            if on_warning is None:
                on_warning = self.context.on_warning
            sink = slot.sink
            sink.reset(on_print, on_warning)
            flag = slot.flag
            flag.value = 0
            token = slot.cancel
            if token is not None:
                token._attach(flag)
            if addresses is None:
                for field, x in zip(slot.data, arrays):
                    try:
                        field.value = _addressof(_char_at(x))
                    except (TypeError, ValueError):  # read-only (a jax array's view)
                        field.value = x.__array_interface__["data"][0]
            else:
                for field, address in zip(slot.data, addresses):
                    field.value = address
            armed = _interrupts.arm(flag)
            try:
                status = self._run_fn(self._handle, slot.ptrs, self._n, slot.ro_ref,
                                      slot.result_ref)
            finally:
                if armed:
                    _interrupts.disarm()
            result = slot.result
            try:
                diags: tuple[Diagnostic, ...] = ()
                moved: list[tuple[str, str]] = []
                stats = None
                if (status or sink.warned) and result.value:
                    diags = _diagnostics_of_list(
                        _capi.lib().tsr_run_result_diagnostics(result))
                    if self._diagnostic_hook is not None:
                        diags, moved = _hooked(self._diagnostic_hook, diags)
                if want_stats or status:
                    st = _capi.InterpStats()
                    if result.value:
                        _capi.lib().tsr_run_result_stats(result, ctypes.byref(st))
                    stats = RunStats(st.grid_steps, st.ops_executed, st.blocks_copied_in,
                                     st.blocks_copied_out, st.bytes_copied, st.vmem_bytes,
                                     st.warnings)
                if status:
                    h = _capi.lib()
                    code = h.tsr_status_code_name(h.tsr_status_code(status)).decode()
                    message = h.tsr_status_message(status).decode(errors="replace")
                    message = _requote(message, moved)
                    h.tsr_status_free(status)
                    status = None
                    if sink.error is not None:
                        raise sink.error
                    raise KernelError(code, message, diags, stats)
            finally:
                if status:
                    _capi.lib().tsr_status_free(status)
                if result.value:
                    self._destroy_fn(result)
                    result.value = None
            error = sink.error
            sink.reset(None, None)  # drop the references to the callbacks
        finally:
            if token is not None:
                token._detach(slot.flag)
            if run_options:
                slot.restore()
            self._slots.append(slot)
        if error is not None:
            raise error
        if not diags:
            return (), stats
        warns = tuple(d for d in diags if d.severity != "error")
        if on_warning is None:
            for d in warns:
                if d.severity == "warning":
                    warnings.warn(KernelWarning(d), **_warn_kwargs())
        return warns, stats

    def close(self) -> None:
        """Destroys the executable now (else when it is garbage). From another
        thread, or a callback, while runs are in progress: returns at once,
        the runs end normally and the last one destroys it; runs started
        after close() raise ValueError."""
        if not hasattr(self, "_destroy_once"):  # __init__ failed before it was set
            return
        self._closed = True
        if not self._active:
            self._destroy()

    def _destroy(self) -> None:
        try:
            self._destroy_once.pop()
        except IndexError:
            return
        handle, self._handle = self._handle, ctypes.c_void_p()
        if handle:
            _capi.lib().tsr_executable_destroy(handle)
        for slot in list(getattr(self, "_all_slots", ())):
            slot.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        return f"<tessera.Executable @{self.kernel_name} backend={self.backend}>"


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


def _aligned_empty(shape: tuple[int, ...], dtype: np.dtype, alignment: int = 64) -> np.ndarray:
    """np.empty whose data starts at a multiple of `alignment` bytes (numpy
    gives 16): what XLA's CPU client needs to adopt a buffer without a copy."""
    nbytes = math.prod(shape) * dtype.itemsize
    raw = np.empty(nbytes + alignment, np.uint8)
    start = -raw.__array_interface__["data"][0] % alignment  # .ctypes makes an object
    return raw[start:start + nbytes].view(dtype).reshape(shape)


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


def _kernel_of(kernel: Kernel | Module) -> Kernel:
    if isinstance(kernel, Module):
        if len(kernel) != 1:
            raise ValueError(f"tessera: the module has {len(kernel)} kernels; pick one with "
                             "module['name']")
        return kernel.kernels[0]
    return kernel


def compile(kernel: Kernel | Module, backend: str = "interp", *,
            context: Context | None = None, **options: Any) -> Executable:
    """Verifies `kernel` and prepares it for the interpreter (backend
    "interp") or compiles it to native code ("cpu"); a Module with one kernel
    may stand for it. Raises CompileError with the diagnostics when it
    cannot.

    options, the fields of tsr_executable_options_t (docs/api.md; their
    meaning is that of the `tessera run` options, docs/cli.md): uninit
    ("nan" or "zero"), check, shuffle_parallel and shuffle_seed, chip
    ("v5e", ...), max_errors, devices, cores, schedule_seed, dma_eager (or
    dma_mode="lazy"|"eager"), detect_races, strict, timeout_seconds,
    max_steps, cancel (a CancelToken), trace_path (a Perfetto trace),
    opt_level (cpu, 0-3), and on_print / on_warning (callables taking
    text). The cpu backend uses devices, cores, uninit, max_errors,
    opt_level and the run bounds; it does not check (bounds, uninitialized
    reads, races).

    context: the Context (default: `default_context()`)."""
    return Executable(_kernel_of(kernel), backend, context=context, **options)


def run(kernel: Kernel | Module, *inputs: Any, backend: str = "interp",
        context: Context | None = None, **options: Any) -> np.ndarray | tuple[np.ndarray, ...]:
    """`compile(kernel, backend, context=context, **options)(*inputs)`: the
    context's caches make the preparation a lookup after the first time."""
    return compile(kernel, backend, context=context, **options)(*inputs)
