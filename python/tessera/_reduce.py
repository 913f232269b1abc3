"""The kernel library's reductions and scans on numpy arrays (docs/python.md,
"Reductions and cumulative ops").

`tessera.reduce(x, op, axis=..., keepdims=...)` and the numpy-style
shorthands `tessera.sum`, `prod`, `max`, `min`, `mean`, `var`, `argmax`,
`argmin`, `logsumexp`; `tessera.cumsum`, `cumprod`, `cummax`, `cummin`.
Each generates the library kernel for the array's shape and dtype
(tessera/kernels.h) once, prepares it for `backend` ("interp" or "cpu")
and runs it. Results have the input's dtype (argmax/argmin: int32),
integers wrapping as in that dtype; bf16 and f16 accumulate in f32.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from . import _library
from ._api import Context, _NUMPY_DTYPES

_NAMES = {dt: name for name, dt in _NUMPY_DTYPES.items()}
REDUCE_OPS = _library.OPS
SCAN_OPS = ("sum", "prod", "max", "min")


def _dtype_name(x: np.ndarray) -> str:
    try:
        return _NAMES[x.dtype]
    except KeyError:
        raise TypeError(f"tessera: dtype {x.dtype} is not supported (supported: "
                        f"{', '.join(str(d) for d in _NAMES)})") from None


def _axes(axis: Any, ndim: int) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    seq = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
    out = []
    for a in seq:
        a = int(a)
        if not -ndim <= a < ndim:
            raise np.exceptions.AxisError(f"tessera: axis {a} is out of bounds for an array "
                                          f"of dimension {ndim}")
        a %= ndim
        if a in out:
            raise ValueError(f"tessera: repeated axis {a}")
        out.append(a)
    return tuple(sorted(out))


def _merge(shape: Sequence[int], axes: Sequence[int]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Adjacent dims of the same kind (reduced or kept) merged, size-1 dims
    dropped: the same reduction of the same bytes, with fewer kernels and
    bigger blocks. At least rank 2 (a leading 1), as TPU blocks like."""
    dims: list[int] = []
    kinds: list[bool] = []
    for d, n in enumerate(shape):
        if n == 1:
            continue
        red = d in axes
        if kinds and kinds[-1] == red:
            dims[-1] *= n
        else:
            dims.append(n)
            kinds.append(red)
    if True not in kinds:  # every reduced dim has size 1: reduce one of them
        dims.append(1)
        kinds.append(True)
    if len(dims) == 1:
        dims.insert(0, 1)
        kinds.insert(0, False)
    return tuple(dims), tuple(i for i, k in enumerate(kinds) if k)


def reduce(x: Any, op: str, *, axis: Any = None, keepdims: bool = False,
           backend: str = "interp", context: Context | None = None,
           vmem_budget_bytes: int = 0) -> Any:
    """Reduces `x` with `op` ("sum", "prod", "max", "min", "argmax",
    "argmin", "mean", "var", "logsumexp") over `axis` (None: all; an int
    or a tuple; argmax/argmin take one axis, None meaning the flattened
    array, as numpy). Returns an array of the input's dtype (argmax and
    argmin: int32) shaped as numpy's (a 0-d result is a numpy scalar).
    `var` is the population variance (ddof 0); mean/var/logsumexp take
    floats only. Raises ValueError for empty arrays (no identity is
    assumed) and tessera.CompileError for what the library does not
    cover (docs/kernels.md)."""
    if op not in REDUCE_OPS:
        raise ValueError(f"tessera: unknown reduction {op!r}; known: {', '.join(REDUCE_OPS)}")
    x = np.asarray(x)
    dtype = _dtype_name(x)
    if x.size == 0:
        raise ValueError("tessera: reduction of an empty array")
    arg = op in ("argmax", "argmin")
    if x.ndim == 0 and axis is None:  # numpy: a 0-d array reduces as one element
        out_shape: tuple[int, ...] = ()
        x, axes = x.reshape(1), (0,)
    elif arg and axis is None:
        out_shape = (1,) * x.ndim if keepdims else ()
        x, axes = x.reshape(-1), (0,)
    else:
        axes = _axes(axis, x.ndim)
        if arg and len(axes) != 1:
            raise TypeError(f"tessera: {op} takes one axis or None, got {axis!r}")
        out_shape = tuple(1 if d in axes else n for d, n in enumerate(x.shape)
                          if keepdims or d not in axes)
    if not axes:  # numpy: reducing no axis is the identity (sum, max, ...)
        raise ValueError("tessera: no axis to reduce (axis=())")
    shape, merged = _merge(x.shape, axes)
    exe = _library.executable("reduce", backend, context, op=op, shape=shape, dtype=dtype,
                              axes=merged, keepdims=True, vmem_budget_bytes=vmem_budget_bytes)
    y = exe(np.ascontiguousarray(x).reshape(shape)).reshape(out_shape)
    return y[()] if y.ndim == 0 else y


def _shorthand(op: str) -> Any:
    def f(x: Any, axis: Any = None, *, keepdims: bool = False, backend: str = "interp",
          context: Context | None = None) -> Any:
        return reduce(x, op, axis=axis, keepdims=keepdims, backend=backend, context=context)
    f.__name__ = f.__qualname__ = op
    f.__doc__ = (f"tessera.{op}(x, axis=None, *, keepdims=False, backend='interp', "
                 f"context=None): tessera.reduce(x, {op!r}, ...), numpy's "
                 f"{'np.' + op if op != 'logsumexp' else 'scipy.special.logsumexp'} on "
                 "the library's kernel.")
    return f


sum = _shorthand("sum")  # noqa: A001 (numpy's names, on purpose; not in tessera.__all__)
prod = _shorthand("prod")
max = _shorthand("max")  # noqa: A001
min = _shorthand("min")  # noqa: A001
mean = _shorthand("mean")
var = _shorthand("var")
argmax = _shorthand("argmax")
argmin = _shorthand("argmin")
logsumexp = _shorthand("logsumexp")


def cumulative(x: Any, op: str = "sum", *, axis: int | None = -1, reverse: bool = False,
               backend: str = "interp", context: Context | None = None,
               vmem_budget_bytes: int = 0) -> np.ndarray:
    """The inclusive scan of `x` with `op` ("sum", "prod", "max", "min")
    along `axis` (None: the flattened array), from the end with
    `reverse`, as jax.lax.cumsum/cumprod/cummax/cummin. Same shape and
    dtype as `x`; integers wrap; bf16/f16 accumulate in f32."""
    if op not in SCAN_OPS:
        raise ValueError(f"tessera: unknown cumulative op {op!r}; known: {', '.join(SCAN_OPS)}")
    x = np.asarray(x)
    dtype = _dtype_name(x)
    if axis is None:
        x, axis = x.reshape(-1), 0
    if x.ndim == 0:
        raise ValueError("tessera: cumulative op of a 0-d array")
    (axis,) = _axes(axis, x.ndim)
    if x.size == 0:
        return x.copy()
    before = int(np.prod(x.shape[:axis], dtype=np.int64))
    after = int(np.prod(x.shape[axis + 1:], dtype=np.int64))
    n = x.shape[axis]
    shape = (before, n) if after == 1 else (before, n, after)
    exe = _library.executable("cumulative", backend, context, op=op, shape=shape, dtype=dtype,
                              axis=1, reverse=bool(reverse), vmem_budget_bytes=vmem_budget_bytes)
    return exe(np.ascontiguousarray(x).reshape(shape)).reshape(x.shape)


def _scan_shorthand(op: str) -> Any:
    def f(x: Any, axis: int | None = -1, *, reverse: bool = False, backend: str = "interp",
          context: Context | None = None) -> np.ndarray:
        return cumulative(x, op, axis=axis, reverse=reverse, backend=backend, context=context)
    f.__name__ = f.__qualname__ = "cum" + op
    f.__doc__ = (f"tessera.cum{op}(x, axis=-1, *, reverse=False, backend='interp', "
                 f"context=None): tessera.cumulative(x, {op!r}, ...), as jax.lax.cum{op}.")
    return f


cumsum = _scan_shorthand("sum")
cumprod = _scan_shorthand("prod")
cummax = _scan_shorthand("max")
cummin = _scan_shorthand("min")
