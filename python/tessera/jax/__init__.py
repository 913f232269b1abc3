"""Run Pallas TPU kernels in tessera, unchanged (docs/jax.md).

Two ways in:

* `tessera.jax.pallas_call(kernel, out_shape, *, grid=..., in_specs=...,
  ..., **tessera_options)`: `pl.pallas_call`'s signature, plus tessera's run
  options (backend="interp"|"cpu", detect_races=True, uninit="nan",
  shuffle_parallel=..., cores=..., ...).
* `pl.pallas_call(..., interpret=tessera.jax.InterpretParams(**options))`
  runs that one call through tessera;
* `with tessera.jax.interpret(**tessera_options):` makes every
  `pl.pallas_call(...)` created inside run through tessera (also through
  `pytest --tessera`, the plugin `tessera.jax.pytest_plugin`). A call's
  JAX `pltpu.InterpretParams` is honoured there (races, uninitialized
  memory, cores, DMA mode...); errors are raised as JAX's interpret mode
  raises them, and warnings JAX would not give are collected
  (`collected_warnings()`) instead of raised.

And out, to a TPU: `tessera.jax.tpu_call(kernel, chip="v5e")` makes a .tsr
kernel a JAX callable that is a Mosaic `tpu_custom_call` on TPU (as Pallas
emits it) and runs in tessera on CPU (docs/tpu.md). The kernel library's
reductions and scans the same way: `tessera.jax.reduce(x, "sum", axis=0)`,
`tessera.jax.cumsum(x, axis=-1)` (docs/jax.md).

The result is a JAX callable: called on concrete arrays it runs the kernel at
once (a `KernelError` names the user's Python lines); under `jax.jit` (or
`vmap`, sequentially) it becomes an XLA FFI custom call on CPU (or a
`jax.pure_callback`, with jit_callback="pure_callback"). The kernel is traced
to its jaxpr, translated to tessera IR (`tessera.jax.translate`) and
prepared once per distinct kernel: later calls reuse the prepared one.
"""

# This package is imported by the pytest plugin (tessera.jax.pytest_plugin)
# in every pytest run where the package is installed: it must not import JAX
# until something of it is used. Names resolve lazily from ._api.

from __future__ import annotations

from typing import Any

__all__ = ["pallas_call", "interpret", "TesseraPallasCall", "TranslationError",
           "KernelError", "lower_to_tsr", "cache_info", "cache_clear", "supported_primitives",
           "option_names", "enable_globally", "InterpretParams", "collected_warnings",
           "clear_collected_warnings",
           "tpu_call", "TpuCall", "mosaic_module", "chips",
           "reduce", "cumsum", "cumulative", "sort", "argsort", "top_k"]

_TPU_NAMES = ("tpu_call", "TpuCall", "mosaic_module", "chips")
_REDUCE_NAMES = ("reduce", "cumsum", "cumulative")
_SORT_NAMES = ("sort", "argsort", "top_k")


def __getattr__(name: str) -> Any:
    if name in _TPU_NAMES:
        from . import _tpu
        value = getattr(_tpu, name)
        globals()[name] = value
        return value
    if name in _REDUCE_NAMES:
        from . import _reduce
        value = getattr(_reduce, name)
        globals()[name] = value
        return value
    if name in _SORT_NAMES:
        from . import _sort
        value = getattr(_sort, name)
        globals()[name] = value
        return value
    if name in __all__:
        from . import _api
        value = getattr(_api, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'tessera.jax' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
