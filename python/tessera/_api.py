"""The numpy-level API in one namespace: what tessera/__init__.py exports and
what the package's other modules (the kernel library, tessera.jax) use of it.
A thin layer over tessera/api.h (docs/api.md); docs/python.md is the user's
guide. It is written in these modules, each over the ones before it:

  _dtypes       tessera's dtypes as numpy dtypes; the backends' names
  _diagnostics  Diagnostic records, the errors and warnings, statuses
  _output       text sinks (tsr_output_t), CancelToken, Ctrl-C
  _options      the names and checks of compile and run options
  _module       Module, Kernel, Operand
  _context      Context and the default context
  _executable   Executable, its runs, compile and run
"""

from __future__ import annotations

from ._context import Context, default_context
from ._diagnostics import (CacheWarning, CompileError, Diagnostic, KernelError, KernelWarning,
                           _hooked, _raise_status, _requote)
from ._dtypes import _NUMPY_DTYPES, _dtype_index, backend_names, dtypes, numpy_dtype
from ._executable import (Executable, RunResult, RunStats, _aligned_empty, _kernel_of, compile,
                          run)
from ._module import Kernel, Module, Operand
from ._options import _EXECUTABLE_OPTIONS, _RUN_OPTIONS, _check_names
from ._output import CancelToken, PrintCallback

__all__ = [
    "Module", "Kernel", "Operand", "Context", "default_context", "Executable",
    "compile", "run", "RunResult", "RunStats", "Diagnostic", "CompileError",
    "KernelError", "KernelWarning", "CacheWarning", "CancelToken", "dtypes",
    "numpy_dtype", "backend_names",
]

# Used by the package's other modules (kept out of __all__).
_INTERNAL = (_NUMPY_DTYPES, _dtype_index, _raise_status, _hooked, _requote, _aligned_empty,
             _kernel_of, _check_names, _EXECUTABLE_OPTIONS, _RUN_OPTIONS, PrintCallback)
