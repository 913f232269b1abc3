"""Prepared kernels as XLA FFI custom calls on CPU (what a jax.jit'ed call
runs): a ctypes handler per kernel, registered with `jax.ffi`, that points
tessera's operand arrays at XLA's own buffers and runs the executable — no
copies and no Python callback machinery. Measured ~7x cheaper per call than
`jax.pure_callback` (docs/jax.md).

The handler speaks the XLA FFI C ABI (jaxlib/include/xla/ffi/api/c_api.h,
API 0.5 in jaxlib 0.12): it answers the metadata query, ignores the stages
before EXECUTE, and reports a failed run as an XLA FFI error carrying
tessera's diagnostic lines. Handlers are never unregistered (XLA keeps its
registry for the process), so they and their executables live as long as the
process.
"""

from __future__ import annotations

import ctypes
import itertools
import re
import threading
from typing import Any, Callable

import jax
import numpy as np

from .. import _api as T
from .. import _capi
from .._diagnostics import CompileError, _raise_status
from .._executable import _operand_arrays
from .._output import _interrupts
from . import _run

FFI_API_MAJOR, FFI_API_MINOR = 0, 5
_STAGE_EXECUTE = 3
_EXTENSION_METADATA = 1
_ERROR_CODE_CANCELLED = 1
_ERROR_CODE_INTERNAL = 13


class _Ext(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("type", ctypes.c_int),
                ("next", ctypes.c_void_p)]


class _ApiVersion(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("ext", ctypes.c_void_p),
                ("major", ctypes.c_int), ("minor", ctypes.c_int)]


class _Metadata(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("api_version", _ApiVersion),
                ("traits", ctypes.c_uint32), ("state_type_id", ctypes.c_int64)]


class _MetadataExt(ctypes.Structure):
    _fields_ = [("base", _Ext), ("metadata", ctypes.POINTER(_Metadata))]


class _Args(ctypes.Structure):  # XLA_FFI_Args and XLA_FFI_Rets
    _fields_ = [("struct_size", ctypes.c_size_t), ("ext", ctypes.c_void_p),
                ("size", ctypes.c_int64), ("types", ctypes.c_void_p),
                ("args", ctypes.POINTER(ctypes.c_void_p))]


class _Attrs(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("ext", ctypes.c_void_p),
                ("size", ctypes.c_int64), ("types", ctypes.c_void_p),
                ("names", ctypes.c_void_p), ("attrs", ctypes.c_void_p)]


class _CallFrame(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("ext", ctypes.POINTER(_Ext)),
                ("api", ctypes.c_void_p), ("ctx", ctypes.c_void_p), ("stage", ctypes.c_int),
                ("args", _Args), ("rets", _Args), ("attrs", _Attrs),
                ("future", ctypes.c_void_p)]


class _Buffer(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("ext", ctypes.c_void_p),
                ("dtype", ctypes.c_int), ("data", ctypes.c_void_p), ("rank", ctypes.c_int64),
                ("dims", ctypes.POINTER(ctypes.c_int64))]


class _ErrorCreateArgs(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("ext", ctypes.c_void_p),
                ("message", ctypes.c_char_p), ("errc", ctypes.c_int)]


class _ApiHead(ctypes.Structure):  # the start of XLA_FFI_Api
    _fields_ = [("struct_size", ctypes.c_size_t), ("ext", ctypes.c_void_p),
                ("api_version", _ApiVersion), ("internal_api", ctypes.c_void_p),
                ("error_create", ctypes.c_void_p)]


_HANDLER = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.POINTER(_CallFrame))
_ERROR_CREATE = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.POINTER(_ErrorCreateArgs))

_lock = threading.Lock()
_ids = itertools.count()
_keep: list = []  # handlers (and their executables) live as long as the process
_last_error: list = [None]  # XLA runs handlers on its own threads: process-wide


def last_error() -> BaseException | None:
    """The exception of the process's last failed FFI run (XLA reports its
    text; this keeps the object, with its diagnostics)."""
    return _last_error[0]


def _error(api: int, message: str, code: int = _ERROR_CODE_INTERNAL) -> int:
    head = _ApiHead.from_address(api)
    create = _ERROR_CREATE(head.error_create)
    args = _ErrorCreateArgs(ctypes.sizeof(ctypes.c_size_t) * 3 + ctypes.sizeof(ctypes.c_int),
                            None, message.encode(errors="replace"), code)
    return create(ctypes.byref(args))


def _fail(executable: T.Executable, e: BaseException, api: int) -> int:
    """A run's exception as the XLA FFI error to return (an exception leaving
    a ctypes callback is printed and dropped, and XLA would take the call for
    a success). Ctrl-C, the KeyboardInterrupt raised once the run has
    stopped, is reported as XLA's CANCELLED with a message saying so
    (docs/jax.md)."""
    hook = getattr(executable, "_error_hook", None)
    if hook is not None:  # JAX's phrase first (_jax_errors.py)
        try:
            e = hook(e)
        except Exception:  # noqa: BLE001 - never let it leave the handler
            pass
    _last_error[0] = e
    code = _ERROR_CODE_CANCELLED if isinstance(e, KeyboardInterrupt) else _ERROR_CODE_INTERNAL
    return _error(api, _run.describe(e), code)


def _make_handler(executable: T.Executable, on_run: Callable[[], None]) -> Callable[[int], Any]:
    """The whole call in Python: a function of the call frame's address."""
    n, nin = executable._n, len(executable.inputs)

    def handler(frame_p: int):
        frame = _CallFrame.from_address(frame_p)
        if frame.ext:
            if frame.ext.contents.type == _EXTENSION_METADATA:
                meta = ctypes.cast(frame.ext, ctypes.POINTER(_MetadataExt)).contents.metadata
                meta.contents.api_version.major = FFI_API_MAJOR
                meta.contents.api_version.minor = FFI_API_MINOR
                meta.contents.traits = 0
                return None
        if frame.stage != _STAGE_EXECUTE:
            return None
        try:
            # An aliased output needs no copy here: the run starts it as its
            # input (docs/ir.md, `alias`).
            buffers = [ctypes.cast(frame.args.args[i], ctypes.POINTER(_Buffer)).contents.data
                       for i in range(nin)]
            buffers += [ctypes.cast(frame.rets.args[j], ctypes.POINTER(_Buffer)).contents.data
                        for j in range(n - nin)]
            on_run()
            executable._run_buffers(buffers)
            return None
        except BaseException as e:  # noqa: BLE001 - reported to XLA, never raised
            return _fail(executable, e, frame.api)
    return handler


def _direct_ok(executable: T.Executable) -> bool:
    """Whether a run needs nothing of Python before or during it: no
    observer (the run report times it), progress, trace or cancel token.
    (Its text and errors reach Python after the run.)"""
    return (executable._observer is None and executable._on_progress is None
            and executable._trace_path is None and executable._cancel is None)


def _capsule(address: int) -> Any:
    new = ctypes.pythonapi.PyCapsule_New
    new.restype = ctypes.py_object
    new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    return new(address, None, None)


#: a `print` op in a kernel's text: such a kernel's runs go through Python,
#: so that its text comes as the kernel runs (a kernel that never ends still
#: shows its prints)
PRINT_OP = re.compile(r"^\s*print\b", re.M)

_C_TARGET = "tessera_run"
_c_registered: list[bool] = []


def _c_handler() -> bool:
    """Registers the library's handler (once); False when the library has none."""
    h = _capi.lib()
    if not hasattr(h, "tsr_xla_bind"):
        return False
    with _lock:
        if not _c_registered:
            jax.ffi.register_ffi_target(_C_TARGET, _capsule(h.tsr_xla_handler()), platform="cpu")
            _c_registered.append(True)
    return True


def ffi_callable(executable: T.Executable, out_structs,
                 on_run: Callable[[], None] = lambda: None, direct: bool = True) -> Callable:
    """A function of jax arrays running `executable` (on XLA's buffers, with
    its diagnostic hook) as an XLA FFI custom call (sequential under vmap);
    `on_run` is called at each run that goes through Python.

    With a library that has tsr_xla_bind, the call goes to its C handler:
    with `direct` (and nothing of the executable's needing Python during a
    run) a run that succeeds without text never enters Python; the rest
    comes back to `handler` below, or to the executable's _finish_direct
    after the run. Otherwise each kernel has a Python handler of its own."""
    full = _make_handler(executable, on_run)
    if _c_handler():
        h = _capi.lib()

        # Both answer in `out`: an exception raised as a callback is entered
        # (a pending Ctrl-C) is dropped by ctypes, and the library then sees
        # no answer (tessera/api.h), never a made-up return value.
        def call(_user, frame_p, out):
            out[0] = full(frame_p)

        def finish(_user, frame_p, status, result, printed, printed_size, warned, warned_size,
                   interrupted, out):
            try:
                if interrupted:  # Ctrl-C stopped the run (its signal may be spent already)
                    raise KeyboardInterrupt
                executable._finish_direct(status, result,
                                          ctypes.string_at(printed, printed_size),
                                          ctypes.string_at(warned, warned_size))
                out[0] = None
            except BaseException as e:  # noqa: BLE001 - reported to XLA, never raised
                out[0] = _fail(executable, e, _CallFrame.from_address(frame_p).api)

        call_fn = _capi.XLA_CALL_FN(call)
        finish_fn = _capi.XLA_FINISH_FN(finish)
        operands = _operand_arrays(executable)
        direct = direct and _direct_ok(executable)
        if direct:
            _interrupts.watch_direct_runs()
        binding = ctypes.c_void_p()
        status = h.tsr_xla_bind(executable._handle, operands, executable._n,
                                len(executable.inputs), direct, call_fn, finish_fn, None,
                                ctypes.byref(binding))
        if status:
            _raise_status(status, CompileError, "tsr_xla_bind")
        with _lock:
            executable._xla_bindings = getattr(executable, "_xla_bindings", ()) + (binding.value,)
            _keep.append((call_fn, finish_fn, operands, executable))
        attrs = {"tsr_binding": np.uint64(binding.value),
                 "tsr_process": np.uint64(h.tsr_xla_process())}
        target = jax.ffi.ffi_call(_C_TARGET, tuple(out_structs), vmap_method="sequential")
        return lambda *args: target(*args, **attrs)
    handler = _HANDLER(lambda frame_p: full(ctypes.cast(frame_p, ctypes.c_void_p).value))
    capsule = _capsule(ctypes.cast(handler, ctypes.c_void_p).value)
    with _lock:
        name = f"tessera_kernel_{next(_ids)}"
        jax.ffi.register_ffi_target(name, capsule, platform="cpu")
        _keep.append((handler, executable, capsule))
    return jax.ffi.ffi_call(name, tuple(out_structs), vmap_method="sequential")
