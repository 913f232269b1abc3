"""tessera's dtypes seen from numpy: the names the loaded library has, the
numpy dtype holding each, and the backends an executable can be made for."""

from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np

from . import _capi

# How each tessera dtype is held in numpy. bf16 is ml_dtypes.bfloat16 (the
# same 16-bit patterns tessera stores), i1 is bool (bytes 0 or 1); the
# sub-byte integers and 8-bit floats are ml_dtypes' types, which hold one
# value per byte exactly as tessera stores them (int4 -2 is the byte 0x0e).
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
    "i4": np.dtype(ml_dtypes.int4),
    "u4": np.dtype(ml_dtypes.uint4),
    "i2": np.dtype(ml_dtypes.int2),
    "u2": np.dtype(ml_dtypes.uint2),
    "f8e4m3fn": np.dtype(ml_dtypes.float8_e4m3fn),
    "f8e5m2": np.dtype(ml_dtypes.float8_e5m2),
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
