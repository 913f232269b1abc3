"""Finds and opens libtessera, the C library the package binds through ctypes,
and checks that it speaks the ABI the package's mirrors were written for
(tsr_abi_version() against ABI_VERSION) before anything else calls it.

The prototypes are declared elsewhere: `_capi` declares those of the
numpy-level API on the one handle this module opens (`lib()`), `_builder`
binds function objects of its own. `check()` turns a returned status into
an exception.

Where the library is looked for, in order:
  1. $TESSERA_LIBRARY: the path of libtessera.so;
  2. inside the package, `tessera/_lib/libtessera.so`: an installed wheel
     or `pip install .` (docs/install.md), which bundles it. Before the
     source tree, so that a venv made inside a checkout uses what it
     installed;
  3. the build directory of the source tree this package sits in
     (`<tree>/build/libtessera.so`, for `pip install -e ./python`);
  4. the system's loader (an installed prefix: `libtessera.so.0`).
"""

from __future__ import annotations

import ctypes
import os
import pathlib
import threading

__all__ = ["lib", "library_path", "check", "ABI_VERSION", "LibraryNotFound", "LibraryMismatch",
           "TesseraError"]

# TSR_ABI_VERSION (include/tessera/api.h) of the headers the package's
# mirrors (_capi.py) follow; bumped together with them.
ABI_VERSION = 6


class LibraryNotFound(ImportError):
    """libtessera could not be found or opened."""


class LibraryMismatch(ImportError):
    """libtessera was found, but its ABI version is not the package's: it was
    built from another version of tessera."""


class TesseraError(Exception):
    """A tessera call failed; `code` is the status code's name as
    tsr_status_code_name gives it (e.g. "invalid argument", "kernel error"),
    `message` tessera's message."""

    def __init__(self, code: str, message: str):
        super().__init__(f"{message} [{code}]" if message else code)
        self.code = code
        self.message = message


# named where users find them (tessera.TesseraError), as _diagnostics.py's classes
TesseraError.__module__ = "tessera"

_lock = threading.Lock()
_lib: ctypes.CDLL | None = None
_path: str | None = None


def _candidates() -> list[tuple[str, str]]:
    """(how it was found, path or soname), in the order they are tried."""
    out: list[tuple[str, str]] = []
    env = os.environ.get("TESSERA_LIBRARY")
    if env:
        # Absolute: the library finds its lowering library beside itself
        # from the path it was opened by (a relative one names the
        # installed library's place instead).
        out.append(("$TESSERA_LIBRARY", os.path.abspath(env) if os.sep in env else env))
    here = pathlib.Path(__file__).resolve()
    bundled = here.parent / "_lib" / "libtessera.so"
    if bundled.exists():
        out.append(("the package", str(bundled)))
    for parent in here.parents:
        if (parent / "meson.build").is_file() and (parent / "include" / "tessera").is_dir():
            out.append(("the source tree's build directory", str(parent / "build" / "libtessera.so")))
            break
    out.append(("the system's loader", "libtessera.so.0"))
    return out


def _open() -> ctypes.CDLL:
    global _lib, _path
    tried = []
    for how, path in _candidates():
        if os.sep in path and not os.path.exists(path):
            tried.append(f"{path} ({how}): no such file")
            continue
        try:
            handle = ctypes.CDLL(path)
        except OSError as e:
            tried.append(f"{path} ({how}): {e}")
            continue
        _check_abi(handle, path, how)
        _declare_base(handle)
        _lib, _path = handle, path
        return handle
    raise LibraryNotFound(
        "tessera: cannot find libtessera.so. Build it (`meson setup build && "
        "meson compile -C build` in the source tree), or set TESSERA_LIBRARY to its "
        "path. Tried:\n  " + "\n  ".join(tried))


def _check_abi(handle: ctypes.CDLL, path: str, how: str) -> None:
    """Raises LibraryMismatch unless the library at `path` has the ABI
    version the package was written for: calling into a library whose
    structs the mirrors misdescribe would read and write the wrong bytes."""
    try:
        fn = handle.tsr_abi_version
    except AttributeError:
        version = None
    else:
        fn.restype = ctypes.c_uint32
        fn.argtypes = []
        version = fn()
    if version == ABI_VERSION:
        return
    has = "no ABI version (no tsr_abi_version: it predates them)" if version is None \
        else f"ABI version {version}"
    raise LibraryMismatch(
        f"tessera: {path} ({how}) has {has}, but this tessera package "
        f"({os.path.dirname(os.path.abspath(__file__))}) needs ABI version {ABI_VERSION}: "
        "build libtessera from the same tree as the package, or set TESSERA_LIBRARY to a "
        "matching build.")


def lib() -> ctypes.CDLL:
    """The opened library (opened on first use)."""
    if _lib is not None:
        return _lib
    with _lock:
        return _lib if _lib is not None else _open()


def library_path() -> str:
    """The path (or soname) libtessera was opened from."""
    lib()
    assert _path is not None
    return _path


def _declare_base(h: ctypes.CDLL) -> None:
    h.tsr_status_code.restype = ctypes.c_int
    h.tsr_status_code.argtypes = [ctypes.c_void_p]
    h.tsr_status_message.restype = ctypes.c_char_p
    h.tsr_status_message.argtypes = [ctypes.c_void_p]
    h.tsr_status_code_name.restype = ctypes.c_char_p
    h.tsr_status_code_name.argtypes = [ctypes.c_int]
    h.tsr_status_free.restype = None
    h.tsr_status_free.argtypes = [ctypes.c_void_p]


def check(status: int | None, error: type[TesseraError] = TesseraError) -> None:
    """Raises `error` for a failed status (a non-NULL tsr_status_t, as the
    int ctypes gives for a c_void_p restype) and frees it; None is success."""
    if not status:
        return
    h = lib()
    code = h.tsr_status_code_name(h.tsr_status_code(status)).decode()
    message = h.tsr_status_message(status).decode(errors="replace")
    h.tsr_status_free(status)
    raise error(code, message)
