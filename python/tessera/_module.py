"""Modules and kernels: a parsed or built .tsr module (tsr_ir_module_t),
its kernels and their operands, and what a kernel offers besides running
(its text, its Mosaic TPU module, its VMEM on a chip)."""

from __future__ import annotations

import ctypes
import dataclasses
import os
from typing import TYPE_CHECKING, Any, Iterator

import numpy as np

from . import _capi
from ._diagnostics import CompileError, _raise_status
from ._dtypes import dtypes, numpy_dtype

if TYPE_CHECKING:
    from ._context import Context
    from ._executable import Executable

_SPACE_NAMES = tuple(_capi.SPACES)  # by tsr_ir_space_t value


@dataclasses.dataclass(frozen=True)
class Operand:
    """One operand of a kernel, as declared."""

    index: int
    """Position among the kernel's operands (prefetch, in, out, scratch)."""
    name: str
    """Without '%'."""
    role: str
    """"prefetch", "in", "out" or "scratch"."""
    dtype_name: str
    """The tessera dtype: "f32", "bf16", ..."""
    shape: tuple[int, ...]
    """The whole array's shape (a scratch buffer's shape; () for a
    semaphore)."""
    space: str
    """Where the kernel sees it: "vmem", "smem", "hbm" or "any"."""
    alias: str | None = None
    """Outputs: the name of the input it aliases."""

    @property
    def dtype(self) -> np.dtype:
        """The numpy dtype holding it (ml_dtypes.bfloat16 for bf16, bool for
        i1)."""
        return numpy_dtype(self.dtype_name)

    def __str__(self) -> str:
        dims = ", ".join(map(str, self.shape))
        return f"{self.role} %{self.name}: {self.dtype_name}[{dims}] {self.space}"


class Module:
    """A parsed .tsr module: one or more kernels. Not thread-safe to share
    while it is being read (tsr_ir_module_t); executables made from its
    kernels borrow nothing from it."""

    def __init__(self) -> None:
        raise TypeError("use tessera.Module.parse(text) or tessera.Module.load(path)")

    @classmethod
    def _from_handle(cls, handle: int, filename: str = "<module>") -> Module:
        """Adopts a tsr_ir_module_t* (the builder's): the Module owns it from
        now on and destroys it."""
        if not handle:
            raise ValueError("tessera: Module._from_handle: NULL module")
        self = object.__new__(cls)
        self._handle = ctypes.c_void_p(handle)
        self.filename = filename
        h = _capi.lib()
        self._kernels = tuple(Kernel._make(self, h.tsr_ir_module_kernel(handle, i))
                              for i in range(h.tsr_ir_module_kernel_count(handle)))
        return self

    @classmethod
    def parse(cls, text: str | bytes, filename: str = "<string>") -> Module:
        """Parses .tsr text (not verified yet: compiling verifies, or
        `verify()`). Raises CompileError (code "parse error") with a
        Diagnostic per error; `filename` names the text in them."""
        data = text.encode() if isinstance(text, str) else bytes(text)
        fname = _capi.c_bytes_of(filename, "tessera: filename")
        h = _capi.lib()
        out = ctypes.c_void_p()
        s = h.tsr_ir_module_parse(_capi.StringView(ctypes.cast(fname, ctypes.c_void_p), len(fname)),
                                  _capi.StringView(ctypes.cast(data, ctypes.c_void_p), len(data)),
                                  ctypes.byref(out))
        if s:
            _raise_status(s)
        return cls._from_handle(out.value, filename)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Module:
        """Reads and parses a .tsr file. CompileError as `parse`
        (code "I/O error" when the file cannot be read)."""
        h = _capi.lib()
        out = ctypes.c_void_p()
        s = h.tsr_ir_module_parse_file(_capi.c_bytes_of(path, "tessera: path"),
                                       ctypes.byref(out))
        if s:
            _raise_status(s)
        return cls._from_handle(out.value, os.fspath(path))

    def verify(self) -> None:
        """Raises CompileError (code "verify error") with every diagnostic if the
        module breaks a rule of docs/ir.md."""
        s = _capi.lib().tsr_ir_module_verify(self._handle)
        if s:
            _raise_status(s)

    @property
    def kernels(self) -> tuple[Kernel, ...]:
        """The kernels, in the order of the text."""
        return self._kernels

    @property
    def text(self) -> str:
        """The canonical text (`tessera fmt`)."""
        return _take_string(_capi.lib().tsr_ir_module_print(self._handle))

    def __getitem__(self, key: str | int) -> Kernel:
        if isinstance(key, int):
            return self._kernels[key]
        name = key[1:] if key.startswith("@") else key
        for k in self._kernels:
            if k.name == name:
                return k
        names = ", ".join("@" + k.name for k in self._kernels)
        raise KeyError(f"tessera: no kernel @{name} in {self.filename} (kernels: {names})")

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and any(
            k.name == name.lstrip("@") for k in self._kernels)

    def __iter__(self) -> Iterator[Kernel]:
        return iter(self._kernels)

    def __len__(self) -> int:
        return len(self._kernels)

    def __repr__(self) -> str:
        return f"<tessera.Module {self.filename!r}: {', '.join('@' + k.name for k in self._kernels)}>"

    def __del__(self) -> None:
        handle = getattr(self, "_handle", None)
        if handle is not None and handle.value:
            _capi.lib().tsr_ir_module_destroy(handle)
            handle.value = None


def _take_string(ptr: int | None) -> str:
    if not ptr:
        raise MemoryError("tessera: out of memory printing a module")
    try:
        return ctypes.string_at(ptr).decode()
    finally:
        _capi.lib().tsr_ir_string_free(ptr)


class Kernel:
    """One kernel of a Module (keeps its module alive). Calling it runs it:
    `kernel(*inputs, **options)` is `tessera.run(kernel, *inputs, **options)`."""

    module: Module
    name: str
    operands: tuple[Operand, ...]

    def __init__(self) -> None:
        raise TypeError("kernels come from a Module: module['name'] or module.kernels")

    @classmethod
    def _make(cls, module: Module, handle: int) -> Kernel:
        self = object.__new__(cls)
        h = _capi.lib()
        self.module = module
        self._handle = handle
        self.name = h.tsr_ir_kernel_name(handle).decode()
        infos = []
        for i in range(h.tsr_ir_kernel_operand_count(handle)):
            info = _capi.OperandInfo()
            h.tsr_ir_kernel_operand_info(handle, i, ctypes.byref(info))
            infos.append(info)
        names = [info.name.decode() for info in infos]
        self.operands = tuple(
            Operand(index=i, name=names[i], role=_capi.ROLES[info.role],
                    dtype_name=dtypes()[info.dtype] if 0 <= info.dtype < len(dtypes()) else "?",
                    shape=tuple(info.dims[:info.rank]),
                    space=_SPACE_NAMES[info.space] if 0 <= info.space < len(_SPACE_NAMES) else "?",
                    alias=names[info.alias] if info.role == 2 and info.alias >= 0 else None)
            for i, info in enumerate(infos))
        return self

    @property
    def inputs(self) -> tuple[Operand, ...]:
        """The operands a run takes, in order: prefetch, then in."""
        return tuple(o for o in self.operands if o.role in ("prefetch", "in"))

    @property
    def outputs(self) -> tuple[Operand, ...]:
        """The operands a run returns, in order."""
        return tuple(o for o in self.operands if o.role == "out")

    @property
    def text(self) -> str:
        """The kernel's canonical text."""
        return _take_string(_capi.lib().tsr_ir_kernel_print(self._handle))

    def to_mosaic(self, chip: str | None = "v5e", *, context: Context | None = None) -> str:
        """The kernel as a Mosaic TPU MLIR module for `chip` (tessera's chip
        names: v5e, v6e, ...; None is v5e): the text `tessera lower --target
        tpu` prints (tsr_tpu_emit, docs/tpu.md). With a `context`, the module
        goes through that context's disk cache (keyed by kernel, target tpu
        and chip); without one it is emitted anew (~0.05-0.2 ms, cheaper than
        a disk hit). Raises CompileError with located diagnostics for what
        the chip or the emitter cannot do."""
        h = _capi.lib()
        if not hasattr(h, "tsr_tpu_emit"):
            raise CompileError("unsupported", "tessera: this libtessera has no TPU emitter "
                               "(tsr_tpu_emit); rebuild it from a tree with tpu/")
        b = None if chip is None else _capi.c_bytes_of(str(chip), "tessera: chip")
        out = ctypes.c_void_p()
        ctx = context._live() if context is not None else None
        s = h.tsr_tpu_emit(ctx, self._handle, b, ctypes.byref(out))
        if context is not None:
            context._flush_warnings()
        if s:
            _raise_status(s, CompileError, f"kernel @{self.name}")
        return _take_string(out.value)

    def tpu_vmem(self, chip: str | None = "v5e") -> dict[str, int]:
        """The VMEM this kernel keeps live on a TPU `chip` (tsr_tpu_vmem,
        docs/tpu.md "VMEM"): `need_bytes` (windows double-buffered, scratch,
        scoped buffers, packed and padded to Mosaic's memory tiles),
        `default_limit_bytes` (what libtpu gives a call without
        vmem_limit_bytes) and `capacity_bytes`."""
        h = _capi.lib()
        if not hasattr(h, "tsr_tpu_vmem"):
            raise CompileError("unsupported", "tessera: this libtessera has no tsr_tpu_vmem")
        out = _capi.TpuVmem()
        b = None if chip is None else _capi.c_bytes_of(str(chip), "tessera: chip")
        s = h.tsr_tpu_vmem(self._handle, b, ctypes.byref(out))
        if s:
            _raise_status(s, CompileError, f"kernel @{self.name}")
        return {"need_bytes": out.need_bytes, "default_limit_bytes": out.default_limit_bytes,
                "capacity_bytes": out.capacity_bytes}

    def compile(self, backend: str = "interp", **options: Any) -> Executable:
        """`tessera.compile(self, backend, **options)`."""
        from ._executable import compile  # below this module
        return compile(self, backend, **options)

    def __call__(self, *inputs: Any, **options: Any) -> Any:
        from ._executable import run
        return run(self, *inputs, **options)

    def __repr__(self) -> str:
        return f"<tessera.Kernel @{self.name}: {'; '.join(map(str, self.operands))}>"
