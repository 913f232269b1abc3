"""Contexts (tsr_context_t): the disk cache, the lowering library, default
output and allocator of the executables made in them, and the process's
default context."""

from __future__ import annotations

import ctypes
import os
import threading
import warnings
import weakref
from typing import TYPE_CHECKING, Any

from . import _capi
from ._diagnostics import CacheWarning, _raise_status, _warn_kwargs
from ._lib import TesseraError
from ._options import _int_option
from ._output import (_PRINT_TRAMPOLINE, _WARNING_TRAMPOLINE, PrintCallback, _register, _Sink,
                      _sinks)

if TYPE_CHECKING:
    from ._executable import Executable


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
