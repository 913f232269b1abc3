"""tessera: run TPU kernels written in the Pallas model on any CPU, from Python.

The numpy level (docs/python.md):

    import numpy as np, tessera
    module = tessera.Module.load("kernels/examples/add.tsr")
    add = tessera.compile(module["add"], backend="interp", detect_races=True)
    c = add(a, b)                     # numpy in, numpy out

The kernel library's reductions and scans take numpy arrays directly:
`tessera.reduce(x, "sum", axis=0)`, `tessera.sum`, `tessera.argmax`, ...,
`tessera.cumsum(x, axis=-1)` (docs/python.md).

Kernel errors raise `tessera.KernelError` with `.diagnostics`
(`tessera.Diagnostic` records); warnings go through `warnings.warn` as
`tessera.KernelWarning`. The JAX bridge is `tessera.jax` (docs/jax.md).
"""

from ._lib import LibraryNotFound, TesseraError, library_path
from ._api import (CacheWarning, CancelToken, CompileError, Context, Diagnostic,
                   Executable, Kernel, KernelError, KernelWarning, Module, Operand,
                   RunResult, RunStats, backend_names, compile, default_context, dtypes,
                   numpy_dtype, run)
# The library's reductions and scans. sum/max/min are tessera.sum etc. but
# stay out of __all__, so `from tessera import *` never shadows the builtins.
from ._reduce import (argmax, argmin, cummax, cummin, cumprod, cumsum, cumulative,
                      logsumexp, mean, prod, reduce, var)
from ._reduce import max, min, sum  # noqa: A004

from ._sort import argsort, sort, sort_multiple, top_k

__version__ = "0.1.0"

__all__ = [
    "CacheWarning", "CancelToken", "CompileError", "Context", "Diagnostic", "Executable",
    "Kernel", "KernelError", "KernelWarning", "LibraryNotFound", "Module", "Operand",
    "RunResult", "RunStats", "TesseraError", "backend_names", "compile",
    "default_context", "dtypes", "library_path", "numpy_dtype", "run",
    # the kernel library (docs/python.md)
    "argmax", "argmin", "cummax", "cummin", "cumprod", "cumsum", "cumulative", "logsumexp",
    "mean", "prod", "reduce", "var",
    "argsort", "sort", "sort_multiple", "top_k",
]
