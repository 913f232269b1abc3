"""tessera kernels as JAX callables that run on a TPU (docs/tpu.md, "Proved
with libtpu").

`tpu_call(kernel, chip=...)` makes a JAX-callable of a .tsr kernel. Lowered
for TPU it is what Pallas emits for a `pallas_call`: tessera's Mosaic module
(`Kernel.to_mosaic(chip)`, parsed and verified by jaxlib's MLIR with the TPU
dialect) in a `tpu_custom_call`, serialised as MLIR bytecode after the
`mosaic-serde` pass at the version JAX's own lowering asks for. Lowered for
CPU it runs the kernel in tessera (an XLA FFI custom call, the path
`tessera.jax.pallas_call` takes under jax.jit). Each platform's lowering is
built only when a computation is lowered for that platform: a kernel
tessera cannot emit for TPU still runs on CPU, and a TPU export never
prepares the CPU executable.
"""

from __future__ import annotations

import re
import threading
from typing import Any, Callable

import jax
import numpy as np

from .. import _api as T
from . import _jax_internal as ji

__all__ = ["tpu_call", "TpuCall", "mosaic_module", "chips"]


def chips() -> tuple[str, ...]:
    """The chips tpu_call and the libtpu proof know (tessera's chip names)."""
    return tuple(ji.TPU_TOPOLOGIES)


def mosaic_module(kernel: T.Kernel, chip: str = "v5e", ctx=None):
    """tessera's Mosaic module of `kernel` for `chip`, parsed and verified by
    jaxlib's MLIR with the TPU dialect (an ir.Module in `ctx`, a new context
    if None). Raises tessera.CompileError (emission) or
    _jax_internal.MosaicParseError (jaxlib rejects the text)."""
    return ji.parse_mosaic(kernel.to_mosaic(chip), ctx)


class TpuCall:
    """What tpu_call returns: call it on arrays (one per prefetch/input
    operand of the kernel, in order); returns the outputs (one array, or a
    tuple when the kernel has several)."""

    def __init__(self, kernel: T.Kernel, chip: str, cpu: str, options: dict,
                 cpu_kernel: T.Kernel | None = None):
        if chip not in ji.TPU_TOPOLOGIES:
            raise ValueError(f"tessera.jax.tpu_call: unknown chip {chip!r} "
                             f"(chips: {', '.join(ji.TPU_TOPOLOGIES)})")
        if cpu not in ("tessera", "error"):
            raise ValueError(f"tessera.jax.tpu_call: cpu={cpu!r} (expected 'tessera' or 'error')")
        self.kernel = kernel
        self.cpu_kernel = cpu_kernel or kernel
        if cpu_kernel is not None:
            def sig(k):
                return ([(o.shape, np.dtype(o.dtype)) for o in k.inputs],
                        [(o.shape, np.dtype(o.dtype)) for o in k.outputs])
            if sig(cpu_kernel) != sig(kernel):
                raise ValueError(f"tessera.jax.tpu_call(@{kernel.name}): cpu_kernel "
                                 f"@{cpu_kernel.name} takes or gives other operands "
                                 f"({sig(cpu_kernel)} against {sig(kernel)})")
        self.chip = chip
        self.cpu = cpu
        self.options = dict(options)
        self.in_structs = tuple(jax.ShapeDtypeStruct(o.shape, o.dtype) for o in kernel.inputs)
        self.out_structs = tuple(jax.ShapeDtypeStruct(o.shape, o.dtype) for o in kernel.outputs)
        names = [o.name for o in kernel.inputs]
        self.aliases = tuple((names.index(o.alias), j) for j, o in enumerate(kernel.outputs)
                             if o.alias is not None)
        self.bounds = _dynamic_bounds(kernel)
        # Semaphore outputs (`out %s: dma_sem`): their int32 counts live in
        # the TPU's semaphore memory, as Pallas asks XLA for them.
        sems = _semaphore_operands(kernel)
        self.semaphore_outputs = tuple(o.name in sems for o in kernel.outputs)
        self._lock = threading.Lock()
        self._tpu: Callable | None = None
        self._cpu: Callable | None = None
        self._jitted = jax.jit(self._bind)

    # The primitive's params must hash; one TpuCall is one kernel.
    __hash__ = object.__hash__

    def __eq__(self, other: object) -> bool:
        return self is other

    @property
    def vmem_limit_bytes(self) -> int | None:
        """The vmem_limit_bytes the TPU call sets: None while the kernel
        fits libtpu's default scoped VMEM for the chip; above it, what the
        kernel needs plus 1/8 (at least 4 MiB) for Mosaic's own scratch,
        rounded up to a MiB and at most the chip's VMEM (docs/tpu.md,
        "VMEM")."""
        vmem = self.kernel.tpu_vmem(self.chip)
        need = vmem["need_bytes"]
        if need <= vmem["default_limit_bytes"]:
            return None
        mib = 1 << 20
        limit = (need + max(need // 8, 4 * mib) + mib - 1) // mib * mib
        return min(limit, vmem["capacity_bytes"])

    def mosaic(self) -> str:
        """The Mosaic text the TPU lowering embeds."""
        return self.kernel.to_mosaic(self.chip)

    def _tpu_kernel(self) -> Callable:
        with self._lock:
            if self._tpu is None:
                module = mosaic_module(self.kernel, self.chip)
                # The call's operands are the dynamic grid extents, then the
                # kernel's (Pallas numbers aliases after the extents too).
                n = len(self.bounds)
                self._tpu = ji.mosaic_kernel(module, self.out_structs,
                                             kernel_name=self.kernel.name,
                                             input_output_aliases=tuple(
                                                 (i + n, j) for i, j in self.aliases),
                                             vmem_limit_bytes=self.vmem_limit_bytes,
                                             semaphore_outputs=self.semaphore_outputs)
            return self._tpu

    def _cpu_kernel(self) -> Callable:
        if self.cpu == "error":
            raise NotImplementedError(
                f"tessera.jax.tpu_call(@{self.kernel.name}): lowered for CPU with "
                "cpu='error' (cpu='tessera' runs it in tessera)")
        with self._lock:
            if self._cpu is None:
                from . import _ffi
                options = dict(self.options)
                backend = options.pop("backend", "interp")
                exe = T.compile(self.cpu_kernel, backend, **options)
                # a kernel that prints runs through Python (its text as it comes)
                direct = not _ffi.PRINT_OP.search(self.cpu_kernel.text)
                self._cpu = _ffi.ffi_callable(exe, self.out_structs, direct=direct)
            return self._cpu

    def _bind(self, *args):
        if len(args) != len(self.in_structs):
            raise TypeError(f"tessera.jax.tpu_call(@{self.kernel.name}): takes "
                            f"{len(self.in_structs)} arrays, got {len(args)}")
        for i, (x, s) in enumerate(zip(args, self.in_structs)):
            if tuple(x.shape) != tuple(s.shape) or np.dtype(x.dtype) != np.dtype(s.dtype):
                raise TypeError(
                    f"tessera.jax.tpu_call(@{self.kernel.name}): argument {i} "
                    f"(%{self.kernel.inputs[i].name}) is {np.dtype(x.dtype)}{list(x.shape)}, "
                    f"the kernel takes {np.dtype(s.dtype)}{list(s.shape)}")
        outs = _primitive().bind(*args, call=self)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def __call__(self, *args):
        return self._jitted(*args)

    def __repr__(self) -> str:
        return f"<tessera.jax.tpu_call @{self.kernel.name} chip={self.chip}>"


def _semaphore_operands(kernel: T.Kernel) -> set[str]:
    """The names of the kernel's semaphore inputs and outputs (their
    operand info holds the counts' i32 array; the header says `sem`)."""
    import re
    return set(re.findall(r"^  (?:in|out) %([\w.]+): (?:dma_)?sem\b", kernel.text, re.M))


def _dynamic_bounds(kernel: T.Kernel) -> tuple[int, ...]:
    """The input indices of the prefetch operands that are dynamic grid
    extents, one per dynamic grid dim in grid order (`grid(2, %n)`: the
    kernel's canonical text names them). Mosaic takes each extent as a
    leading scalar operand of the call, before the kernel's own, as Pallas
    passes its dynamic grid bounds (docs/tpu.md, "Dynamic grids")."""
    m = re.search(r"^\s*grid\(([^)]*)\)", kernel.text, re.M)
    if not m:
        return ()
    names = [o.name for o in kernel.inputs]
    return tuple(names.index(e.strip()[1:]) for e in m.group(1).split(",")
                 if e.strip().startswith("%"))


def _tpu_lowering(call: TpuCall, *args):
    outs = call._tpu_kernel()(*[args[i] for i in call.bounds], *args)
    return list(outs) if isinstance(outs, (tuple, list)) else [outs]


def _cpu_lowering(call: TpuCall, *args):
    return list(call._cpu_kernel()(*args))


_prim = None
_prim_lock = threading.Lock()


def _primitive():
    global _prim
    with _prim_lock:
        if _prim is None:
            _prim = ji.platform_primitive(
                "tessera_tpu_call",
                abstract_eval=lambda call: [jax.core.ShapedArray(s.shape, s.dtype)
                                            for s in call.out_structs],
                lowerings={"tpu": _tpu_lowering, "cpu": _cpu_lowering})
        return _prim


def tpu_call(kernel: T.Kernel | T.Module, *, chip: str = "v5e", cpu: str = "tessera",
             cpu_kernel: T.Kernel | T.Module | None = None,
             **tessera_options: Any) -> TpuCall:
    """A JAX-callable of a tessera kernel (a Kernel, or a Module of one).

    On TPU (and in `jax.export(..., platforms=["tpu"])`) it is a
    `tpu_custom_call` of tessera's Mosaic module for `chip`, embedded as
    Pallas embeds its kernels. Elsewhere, with cpu="tessera" (the default),
    the kernel runs in tessera (an XLA FFI call on CPU; `tessera_options` are
    tessera.compile's: backend="interp"|"cpu", detect_races, ...);
    cpu="error" makes the CPU lowering raise NotImplementedError. Other
    platforms (GPUs) have no lowering. `cpu_kernel`: a kernel with the same
    operands to run there instead, e.g. a faster one Mosaic cannot emit (the
    library's host sorts).

    Emission errors (tessera.CompileError with located diagnostics) are
    raised when the call is first lowered for TPU."""
    kernel = T._kernel_of(kernel)
    T._check_names("tessera.jax.tpu_call", tessera_options,
                   ("backend", *T._EXECUTABLE_OPTIONS))
    return TpuCall(kernel, chip, cpu, tessera_options,
                   T._kernel_of(cpu_kernel) if cpu_kernel is not None else None)
