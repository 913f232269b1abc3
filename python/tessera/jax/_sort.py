"""tessera.jax.sort, argsort and top_k: the kernel library's sort and top-k
as JAX functions (docs/jax.md, "Sort and top-k"). Each call generates the
library kernel for the array's shape and dtype (memoised) and calls it
through `tessera.jax.tpu_call`: on a TPU (and in `jax.export(...,
platforms=["tpu"])`) it is the kernel's Mosaic `tpu_custom_call`; on CPU
it runs in tessera (backend="interp" or "cpu"), sorts with the library's
host kernel (the sort and argsort ops) rather than the TPU's network. They
work on concrete arrays and under `jax.jit`."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from .. import _library
from .._sort import _BY_NUMPY

__all__ = ["sort", "argsort", "top_k"]


def _dtype_name(x: Any) -> str:
    dt = np.dtype(x.dtype)
    try:
        return _BY_NUMPY[dt]
    except KeyError:
        raise TypeError(f"tessera.jax: dtype {dt} is not sortable by the library "
                        f"(known: {', '.join(str(d) for d in _BY_NUMPY)})") from None


@functools.lru_cache(maxsize=64)
def _call(entry: str, chip: str, options: tuple, params: tuple) -> Any:
    from ._tpu import tpu_call
    kernel = _library.generate(entry, **dict(params))
    # Off a TPU, sorts run the library's host kernel (the sort/argsort ops),
    # not the network the TPU needs (docs/kernels.md, "Two kernels").
    cpu_kernel = (_library.generate(entry, **dict(params), target=_library.TARGETS["host"])
                  if entry == "sort" else None)
    return tpu_call(kernel, chip=chip, cpu_kernel=cpu_kernel, **dict(options))


def _axis(axis: int, ndim: int) -> int:
    if not -ndim <= axis < ndim:
        raise ValueError(f"tessera.jax: axis {axis} is out of range for {ndim} dimensions")
    return axis % ndim


def _sort(x: Any, axis: int, descending: bool, stable: bool, indices: bool, chip: str,
          options: dict) -> Any:
    if x.ndim == 0:
        raise ValueError("tessera.jax: sorting needs at least one dimension")
    with_indices = bool(indices or stable)  # stable network rows over a block keep them there
    params = (("shape", tuple(x.shape)), ("dtypes", (_dtype_name(x),)),
              ("axis", _axis(axis, x.ndim)), ("descending", bool(descending)),
              ("stable", bool(stable)), ("return_indices", with_indices))
    out = _call("sort", chip, tuple(sorted(options.items())), params)(x)
    return out if with_indices else (out,)


def sort(x: Any, *, axis: int = -1, descending: bool = False, stable: bool = False,
         chip: str = "v5e", **tessera_options: Any) -> Any:
    """`x` sorted along `axis` as jax.lax.sort orders it (descending:
    reversed; stable: equal elements in input order). `tessera_options`:
    tpu_call's (backend="interp"|"cpu", ...)."""
    return _sort(x, axis, descending, stable, False, chip, tessera_options)[0]


def argsort(x: Any, *, axis: int = -1, descending: bool = False, stable: bool = False,
            chip: str = "v5e", **tessera_options: Any) -> Any:
    """The int32 indices that sort `x` along `axis` (jax.numpy.argsort)."""
    return _sort(x, axis, descending, stable, True, chip, tessera_options)[-1]


def top_k(x: Any, k: int, *, axis: int = -1, smallest: bool = False, chip: str = "v5e",
          **tessera_options: Any) -> tuple[Any, Any]:
    """(values, int32 indices) of the k largest elements along `axis`, as
    jax.lax.top_k (ties by lower index; +NaN largest, -NaN smallest);
    `smallest`: the k smallest, smallest first."""
    if x.ndim == 0:
        raise ValueError("tessera.jax: top_k needs at least one dimension")
    ax = _axis(axis, x.ndim)
    if not 1 <= int(k) <= x.shape[ax]:
        raise ValueError(f"tessera.jax: k must be 1..{x.shape[ax]}, got {k}")
    params = (("shape", tuple(x.shape)), ("dtype", _dtype_name(x)), ("k", int(k)),
              ("axis", ax), ("smallest", bool(smallest)))
    values, indices = _call("topk", chip, tuple(sorted(tessera_options.items())), params)(x)
    return values, indices
