"""The kernel library's reductions and scans as JAX functions (docs/jax.md,
"4. The kernel library").

`tessera.jax.reduce(x, op, axis=..., keepdims=...)` and
`tessera.jax.cumsum(x, axis=..., reverse=..., op=...)` take a JAX (or
numpy) array and return one; they trace under `jax.jit`. The kernel is the
library's (tessera/kernels.h), generated for the array's shape and dtype
and called through `tessera.jax.tpu_call`: lowered for a TPU it is the
kernel's Mosaic module in a `tpu_custom_call` (as Pallas emits it), lowered
for CPU it runs in tessera (`backend="interp"` by default, or `"cpu"`).
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from .. import _library
from .. import _reduce as R

__all__ = ["reduce", "cumsum", "cumulative"]

_calls: dict[tuple, Any] = {}
_calls_lock = threading.Lock()


def _call(entry: str, chip: str, cpu: str, options: dict, **params: Any):
    """The tpu_call of library kernel `entry` for `params`, memoised."""
    from ._tpu import tpu_call
    key = (entry, chip, cpu, tuple(sorted(options.items())),
           tuple(sorted((k, tuple(v) if isinstance(v, (list, tuple)) else v)
                        for k, v in params.items())))
    with _calls_lock:
        call = _calls.get(key)
    if call is None:
        call = tpu_call(_library.generate(entry, **params), chip=chip, cpu=cpu, **options)
        with _calls_lock:
            _calls.setdefault(key, call)
            call = _calls[key]
    return call


def _dtype_name(x: Any) -> str:
    dt = np.dtype(x.dtype)
    try:
        return R._NAMES[dt]
    except KeyError:
        raise TypeError(f"tessera.jax: dtype {dt} is not supported") from None


# jax.numpy's sum and prod accumulate bool and narrow integers in 32 bits.
_PROMOTED = {np.dtype(np.bool_): np.int32, np.dtype(np.int8): np.int32,
             np.dtype(np.int16): np.int32, np.dtype(np.uint8): np.uint32,
             np.dtype(np.uint16): np.uint32}


def reduce(x: Any, op: str, axis: Any = None, keepdims: bool = False, *, chip: str = "v5e",
           cpu: str = "tessera", vmem_budget_bytes: int = 0, **tessera_options: Any) -> Any:
    """`op` ("sum", "prod", "max", "min", "argmax", "argmin", "mean",
    "var", "logsumexp") of `x` over `axis` as jax.numpy's function of that
    name (argmax/argmin: one axis, None = flattened; results in x's dtype,
    argmax/argmin int32; sums and products of bool and 8/16-bit integers in
    int32/uint32, as jax.numpy promotes them). On a TPU: the
    library kernel's Mosaic for `chip`; elsewhere tessera
    (`tessera_options`: backend="interp"|"cpu", ...; cpu="error" refuses)."""
    import jax.numpy as jnp
    if op not in R.REDUCE_OPS:
        raise ValueError(f"tessera.jax.reduce: unknown op {op!r}; known: "
                         f"{', '.join(R.REDUCE_OPS)}")
    x = jnp.asarray(x)
    if np.dtype(x.dtype) == np.bool_ and op in ("max", "min", "argmax", "argmin"):
        # libtpu takes no bool operands in a tpu_custom_call: int32 around it.
        r = reduce(jnp.asarray(x, jnp.int32), op, axis, keepdims, chip=chip, cpu=cpu,
                   vmem_budget_bytes=vmem_budget_bytes, **tessera_options)
        return r if op.startswith("arg") else r != 0
    if op in ("sum", "prod") and np.dtype(x.dtype) in _PROMOTED:
        x = jnp.asarray(x, _PROMOTED[np.dtype(x.dtype)])  # jnp.sum(int8) is int32
    dtype = _dtype_name(x)
    shape0 = tuple(x.shape)
    if 0 in shape0:
        raise ValueError("tessera.jax.reduce: reduction of an empty array")
    arg = op in ("argmax", "argmin")
    if arg and axis is None:
        out_shape: tuple[int, ...] = (1,) * len(shape0) if keepdims else ()
        x, axes = jnp.reshape(x, (-1,)), (0,)
    else:
        axes = R._axes(axis, len(shape0))
        if arg and len(axes) != 1:
            raise TypeError(f"tessera.jax.reduce: {op} takes one axis or None, got {axis!r}")
        if not axes:
            raise ValueError("tessera.jax.reduce: no axis to reduce (axis=())")
        out_shape = tuple(1 if d in axes else n for d, n in enumerate(shape0)
                          if keepdims or d not in axes)
    shape, merged = R._merge(x.shape, axes)
    call = _call("reduce", chip, cpu, tessera_options, op=op, shape=shape, dtype=dtype,
                 axes=merged, keepdims=True, vmem_budget_bytes=vmem_budget_bytes)
    return jnp.reshape(call(jnp.reshape(x, shape)), out_shape)


def cumulative(x: Any, op: str = "sum", axis: int | None = -1, reverse: bool = False, *,
               chip: str = "v5e", cpu: str = "tessera", vmem_budget_bytes: int = 0,
               **tessera_options: Any) -> Any:
    """The inclusive scan of `x` with `op` ("sum", "prod", "max", "min")
    along `axis` (None: flattened), from the end with `reverse`, as
    jax.lax.cumsum/cumprod/cummax/cummin; same shape and dtype."""
    import jax.numpy as jnp
    if op not in R.SCAN_OPS:
        raise ValueError(f"tessera.jax.cumulative: unknown op {op!r}; known: "
                         f"{', '.join(R.SCAN_OPS)}")
    x = jnp.asarray(x)
    if np.dtype(x.dtype) == np.bool_ and op in ("max", "min"):
        return cumulative(jnp.asarray(x, jnp.int32), op, axis, reverse, chip=chip, cpu=cpu,
                          vmem_budget_bytes=vmem_budget_bytes, **tessera_options) != 0
    dtype = _dtype_name(x)
    if axis is None:
        x, axis = jnp.reshape(x, (-1,)), 0
    if len(x.shape) == 0:
        raise ValueError("tessera.jax.cumulative: a 0-d array has no axis")
    (axis,) = R._axes(axis, len(x.shape))
    if 0 in x.shape:
        return x
    before = int(np.prod(x.shape[:axis], dtype=np.int64))
    after = int(np.prod(x.shape[axis + 1:], dtype=np.int64))
    shape = (before, x.shape[axis]) if after == 1 else (before, x.shape[axis], after)
    call = _call("cumulative", chip, cpu, tessera_options, op=op, shape=shape, dtype=dtype,
                 axis=1, reverse=bool(reverse), vmem_budget_bytes=vmem_budget_bytes)
    return jnp.reshape(call(jnp.reshape(x, shape)), x.shape)


def cumsum(x: Any, axis: int | None = -1, reverse: bool = False, *, op: str = "sum",
           **kwargs: Any) -> Any:
    """tessera.jax.cumulative(x, op, axis, reverse, ...): jax.lax.cumsum
    (op="prod", "max", "min": cumprod, cummax, cummin)."""
    return cumulative(x, op, axis, reverse, **kwargs)
