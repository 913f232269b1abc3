"""tessera.sort, argsort, sort_multiple and top_k on numpy arrays: the kernel
library's generated sort and top-k kernels (tessera/kernels.h), run by the
interpreter or the cpu backend. docs/python.md, "Sort and top-k"; the
algorithm and the orders: docs/kernels.md.

Orders are jax.lax's: `sort` as jax.lax.sort (NaNs of either sign after
+inf, -0.0 equal to +0.0), `top_k` as jax.lax.top_k (the IEEE total order
of the bits: +NaN largest, -NaN smallest; ties by lower index).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from . import _library
from ._api import Context, _NUMPY_DTYPES

__all__ = ["sort", "argsort", "sort_multiple", "top_k"]

_BY_NUMPY = {dt: name for name, dt in _NUMPY_DTYPES.items() if name != "i1"}


def _dtype_name(x: np.ndarray, what: str) -> str:
    try:
        return _BY_NUMPY[x.dtype]
    except KeyError:
        known = ", ".join(str(d) for d in _BY_NUMPY)
        raise TypeError(f"tessera: {what} has dtype {x.dtype}; the library sorts {known} "
                        "(bf16 as ml_dtypes.bfloat16)") from None


def _as_array(x: Any, what: str) -> np.ndarray:
    a = np.asarray(x)
    if a.ndim == 0:
        raise ValueError(f"tessera: {what} must have at least one dimension")
    return np.ascontiguousarray(a)


def _normalise_axis(axis: int, ndim: int) -> int:
    if not -ndim <= axis < ndim:
        raise ValueError(f"tessera: axis {axis} is out of range for {ndim} dimensions")
    return axis % ndim


def _run_sort(operands: Sequence[np.ndarray], num_keys: int, axis: int, descending: bool,
              stable: bool, return_indices: bool, backend: str, context: Context | None,
              vmem_budget_bytes: int, target: str) -> tuple[np.ndarray, ...]:
    shape = operands[0].shape
    for i, o in enumerate(operands):
        if o.shape != shape:
            raise ValueError(f"tessera: operand {i} has shape {o.shape}, operand 0 {shape}: "
                             "every operand of a sort has one shape")
    dtypes = [_dtype_name(o, f"operand {i}") for i, o in enumerate(operands)]
    if not 1 <= num_keys <= len(operands):
        raise ValueError(f"tessera: num_keys must be 1..{len(operands)}, got {num_keys}")
    if 0 in shape:  # nothing to order: empty results, as numpy.sort and jax.lax.sort give
        _normalise_axis(axis, len(shape))
        empty = tuple(o.copy() for o in operands)
        return empty + (np.zeros(shape, np.int32),) if return_indices else empty
    if target not in _library.TARGETS:
        raise ValueError(f"tessera: target must be 'host' or 'tpu', got {target!r}")
    if vmem_budget_bytes and target != "tpu":
        raise ValueError("tessera: vmem_budget_bytes sizes the blocks of target='tpu' sorts; "
                         "the host sort is one block")
    # Stable network sorts ask for the indices too: rows longer than a block
    # keep the input positions there between merge passes (docs/kernels.md).
    with_indices = bool(return_indices or (stable and target == "tpu"))
    exe = _library.executable("sort", backend, context, shape=shape, dtypes=dtypes,
                              num_keys=num_keys, axis=_normalise_axis(axis, len(shape)),
                              descending=bool(descending), stable=bool(stable),
                              return_indices=with_indices,
                              vmem_budget_bytes=int(vmem_budget_bytes),
                              target=_library.TARGETS[target])
    out = exe(*operands)
    out = out if isinstance(out, tuple) else (out,)
    return out if return_indices or not with_indices else out[:-1]


def sort(x: Any, *, axis: int = -1, descending: bool = False, stable: bool = False,
         backend: str = "interp", context: Context | None = None,
         vmem_budget_bytes: int = 0, target: str = "host") -> np.ndarray:
    """`x` sorted along `axis` (a new array). `descending` reverses the order
    (NaNs first); `stable` keeps equal elements (-0.0 and +0.0, NaNs) in
    their input order. `backend`: "interp" or "cpu". `target`: "host" (the
    fastest kernel here: the sort/argsort ops), or "tpu" (the network kernel
    a TPU runs; `vmem_budget_bytes` sizes its blocks)."""
    a = _as_array(x, "x")
    return _run_sort([a], 1, axis, descending, stable, False, backend, context,
                     vmem_budget_bytes, target)[0]


def argsort(x: Any, *, axis: int = -1, descending: bool = False, stable: bool = False,
            backend: str = "interp", context: Context | None = None,
            vmem_budget_bytes: int = 0, target: str = "host") -> np.ndarray:
    """The int32 indices that sort `x` along `axis` (numpy.argsort's
    meaning; with `stable`, equal elements keep their input order, also when
    descending, as jax.numpy.argsort(stable=True, descending=True)).
    `target` as for `sort`."""
    a = _as_array(x, "x")
    return _run_sort([a], 1, axis, descending, stable, True, backend, context,
                     vmem_budget_bytes, target)[-1]


def sort_multiple(operands: Sequence[Any], *, num_keys: int = 1, axis: int = -1,
                  descending: bool = False, stable: bool = False,
                  return_indices: bool = False, backend: str = "interp",
                  context: Context | None = None,
                  vmem_budget_bytes: int = 0, target: str = "host") -> tuple[np.ndarray, ...]:
    """Sorts several arrays of one shape together along `axis`, ordered by
    the first `num_keys` compared lexicographically (jax.lax.sort with a
    tuple); returns one sorted array per operand, then the int32 indices
    with `return_indices`. At most 8 operands. `target` as for `sort`."""
    arrays = [_as_array(o, f"operand {i}") for i, o in enumerate(operands)]
    if not 1 <= len(arrays) <= _library.MAX_OPERANDS:
        raise ValueError(f"tessera: 1..{_library.MAX_OPERANDS} operands, got {len(arrays)}")
    return _run_sort(arrays, num_keys, axis, descending, stable, return_indices, backend,
                     context, vmem_budget_bytes, target)


def top_k(x: Any, k: int, *, axis: int = -1, smallest: bool = False,
          backend: str = "interp", context: Context | None = None,
          vmem_budget_bytes: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The `k` largest elements of `x` along `axis` and their int32
    indices, as jax.lax.top_k (sorted, largest first, ties by lower index,
    +NaN above +inf, -NaN below -inf); `smallest`: the k smallest, smallest
    first."""
    a = _as_array(x, "x")
    ax = _normalise_axis(axis, a.ndim)
    if not 1 <= int(k) <= a.shape[ax]:
        raise ValueError(f"tessera: k must be 1..{a.shape[ax]} (the length of axis {axis}), "
                         f"got {k}")
    exe = _library.executable("topk", backend, context, shape=a.shape,
                              dtype=_dtype_name(a, "x"), k=int(k), axis=ax,
                              smallest=bool(smallest), vmem_budget_bytes=int(vmem_budget_bytes))
    values, indices = exe(a)
    return values, indices
