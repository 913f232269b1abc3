"""The kernel library's generators (tessera/kernels.h) seen from Python.

`generate(entry, **params)` calls `tsr_kernels_<entry>` and returns the
generated `tessera.Kernel`; `executable(entry, backend, context, **params)`
memoises the prepared `tessera.Executable` per (entry, parameters, backend,
context), so calling a library function twice on arrays of one shape
generates and prepares once. The user-facing functions (tessera.sort,
tessera.reduce, ...) are written on these two. docs/kernels.md.
"""

from __future__ import annotations

import collections
import ctypes
import threading
from ctypes import POINTER, Structure, c_int64, c_void_p
from typing import Any, Sequence

from . import _capi
from ._api import Context, Executable, Kernel, Module, _dtype_index, _raise_status, default_context

MAX_RANK = _capi.MAX_RANK
MAX_OPERANDS = _capi.KERNELS_MAX_OPERANDS

# tsr_kernels_op_t, by index.
OPS = tuple(_capi.KERNELS_OPS)

# The params structs of kernels.h (mirrored in _capi).
SortParams = _capi.SortParams
TopkParams = _capi.TopkParams
CumulativeParams = _capi.CumulativeParams
ReduceParams = _capi.ReduceParams

# tsr_kernels_target_t: what a generated kernel is for.
TARGETS = _capi.KERNELS_TARGETS

_STRUCTS = {"sort": SortParams, "topk": TopkParams, "cumulative": CumulativeParams,
            "reduce": ReduceParams}
_declared: set[str] = set()
_declare_lock = threading.Lock()


def _entry(entry: str) -> tuple[Any, Any]:
    """The ctypes functions tsr_kernels_<entry> and its params initializer."""
    if entry not in _STRUCTS:
        raise ValueError(f"tessera: no library entry {entry!r}; known: {', '.join(_STRUCTS)}")
    h = _capi.lib()
    with _declare_lock:
        if entry not in _declared:
            struct = _STRUCTS[entry]
            _capi._fn(h, f"tsr_kernels_{entry}_params_initialize", None, POINTER(struct))
            _capi._fn(h, f"tsr_kernels_{entry}", c_void_p, POINTER(struct), POINTER(c_void_p))
            _declared.add(entry)
    return getattr(h, f"tsr_kernels_{entry}"), getattr(h, f"tsr_kernels_{entry}_params_initialize")


def _shape_into(p: Any, shape: Sequence[int]) -> None:
    shape = tuple(int(d) for d in shape)
    if len(shape) > MAX_RANK:
        raise ValueError(f"tessera: rank {len(shape)} is more than the library's {MAX_RANK}")
    p.rank = len(shape)
    for i, d in enumerate(shape):
        p.dims[i] = _capi.c_int_of(c_int64, d, "tessera: a dimension")


def _set(p: Any, name: str, value: Any) -> None:
    if name == "shape":
        _shape_into(p, value)
    elif name == "dtype":
        p.dtype = _dtype_index(str(value))
    elif name == "dtypes":
        value = [str(d) for d in value]
        if not 1 <= len(value) <= MAX_OPERANDS:
            raise ValueError(f"tessera: 1..{MAX_OPERANDS} operands, got {len(value)}")
        p.num_operands = len(value)
        for i, d in enumerate(value):
            p.dtypes[i] = _dtype_index(d)
    elif name == "op":
        if value not in OPS:
            raise ValueError(f"tessera: unknown op {value!r}; known: {', '.join(OPS)}")
        p.op = OPS.index(value)
    elif name == "axes":
        mask = 0
        for a in value:
            mask |= 1 << int(a)
        p.axes_mask = mask
    else:
        if name not in dict(p._fields_):
            raise TypeError(f"tessera: {type(p).__name__} has no parameter {name!r}")
        _capi.set_checked(p, name, value, f"tessera: {name}")


def params(entry: str, **values: Any) -> Structure:
    """A params struct for `entry`, initialized by the library's defaults,
    then set from `values`: `shape` (a tuple), `dtype` / `dtypes` (names),
    `op` (a name of OPS), `axes` (normalised, non-negative axis numbers),
    and the struct's own fields by name."""
    _, initialize = _entry(entry)
    p = _STRUCTS[entry]()
    initialize(ctypes.byref(p))
    for name, value in values.items():
        _set(p, name, value)
    return p


def generate(entry: str, **values: Any) -> Kernel:
    """Generates the library kernel `entry` for `values` (see `params`)."""
    fn, _ = _entry(entry)
    p = params(entry, **values)
    out = c_void_p()
    status = fn(ctypes.byref(p), ctypes.byref(out))
    if status:  # _raise_status expects a failure: NULL is success
        _raise_status(status)
    module = Module._from_handle(out.value, f"tessera/kernels/{entry}")
    return module.kernels[0]


_cache: collections.OrderedDict[tuple, Executable] = collections.OrderedDict()
_cache_lock = threading.Lock()
CACHE_SIZE = 64


def _key_part(v: Any) -> Any:
    return tuple(v) if isinstance(v, (list, tuple)) else v


def executable(entry: str, backend: str = "interp", context: Context | None = None,
               **values: Any) -> Executable:
    """The prepared executable of `generate(entry, **values)` on `backend`,
    memoised (the last CACHE_SIZE kinds; the context's own caches keep
    the generated code beyond that)."""
    ctx = context if context is not None else default_context()
    key = (entry, backend, id(ctx), tuple(sorted((k, _key_part(v)) for k, v in values.items())))
    with _cache_lock:
        exe = _cache.get(key)
        if exe is not None and exe.context is ctx:
            _cache.move_to_end(key)
            return exe
    exe = Executable(generate(entry, **values), backend, context=ctx)
    with _cache_lock:
        _cache[key] = exe
        _cache.move_to_end(key)
        while len(_cache) > CACHE_SIZE:
            _cache.popitem(last=False)
    return exe
