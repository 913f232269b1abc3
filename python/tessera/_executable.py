"""Executables (tsr_executable_t) and their runs: `tessera.compile` makes
one for a backend from the options of tsr_executable_options_t; a run passes
the numpy arrays' own buffers to tsr_executable_run (no copy when they are
C-contiguous and of the declared dtype) and turns the result's records into
diagnostics, warnings and errors. `tessera.run` is compile, then run."""

from __future__ import annotations

import ctypes
import dataclasses
import itertools
import math
import sys
import time
import warnings
import weakref
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from . import _capi
from ._context import Context, default_context
from ._diagnostics import (CompileError, Diagnostic, KernelError, KernelWarning,
                           _diagnostics_of_list, _hooked, _raise_status, _requote,
                           _warn_kwargs)
from ._dtypes import _dtype_index
from ._module import Kernel, Module, Operand
from ._options import (_EXECUTABLE_OPTIONS, _RUN_OPTIONS, _callback, _cancel_token,
                       _check_names, _choice, _int_option, _progress_callback, _seconds,
                       _trace_target)
from ._output import (_PRINT_TRAMPOLINE, _PROGRESS_TRAMPOLINE, _WARNING_TRAMPOLINE, CancelToken,
                      PrintCallback, ProgressLine, _interrupts, _register, _Sink, _sinks)


@dataclasses.dataclass(frozen=True)
class RunStats:
    """Counters of a run (the interpreter's; the cpu backend leaves them 0)."""

    grid_steps: int
    ops_executed: int
    blocks_copied_in: int
    blocks_copied_out: int
    bytes_copied: int
    vmem_bytes: int
    warnings: int


@dataclasses.dataclass(frozen=True)
class RunResult:
    """What `Executable.run` returns."""

    outputs: tuple[np.ndarray, ...]
    """One array per output operand, in declaration order."""
    warnings: tuple[Diagnostic, ...]
    """The run's warnings (and notes), also issued as KernelWarnings unless
    an on_warning callback took the text."""
    stats: RunStats


_addressof = ctypes.addressof
_char_at = ctypes.c_char.from_buffer  # a writable array's address in 0.5 us, x.ctypes.data's 1.7


def _operand_arrays(exe: "Executable") -> ctypes.Array:
    """A tsr_array_t per operand of `exe` with its dtype and shape (no data)."""
    arrays = (_capi.Array * exe._n)()
    for a, (dtype, shape) in zip(arrays, exe._array_specs):
        a.dtype = dtype
        a.rank = len(shape)
        for d, extent in enumerate(shape):
            a.dims[d] = extent
    return arrays


class _Slot:
    """What one run of an executable needs in C, made once and reused by the
    runs that find it free: the operands' tsr_array_t's (only `data` changes
    between runs), the run options (output through the trampolines to the
    slot's sink, the cancel flag) and the result pointer.

    The run polls the slot's own flag, which the package sets (a callback's
    exception, Ctrl-C) and a CancelToken given to the run sets through
    CancelToken._attach: stopping one run never cancels the user's token."""

    def __init__(self, exe: Executable):
        n = exe._n
        self.arrays = _operand_arrays(exe)
        self.ptrs = (ctypes.POINTER(_capi.Array) * n)()
        offset = _capi.Array.data.offset
        self.data = []
        for i in range(n):
            a = self.arrays[i]
            self.ptrs[i] = ctypes.pointer(a)
            self.data.append(ctypes.c_void_p.from_address(ctypes.addressof(a) + offset))
        self.flag = ctypes.c_int(0)
        self.cancel: CancelToken | None = exe._cancel  # this run's token
        self.sink = _Sink(None, None, self.flag)
        self.token = _register(self.sink)
        ro = _capi.RunOptions()
        _capi.lib().tsr_run_options_initialize(ctypes.byref(ro))
        ro.output.print = _PRINT_TRAMPOLINE
        ro.output.warning = _WARNING_TRAMPOLINE
        ro.output.user = self.token
        ro.cancel = ctypes.pointer(self.flag)
        self.ro = ro
        self.ro_ref = ctypes.byref(ro)
        self.pristine = bytes(ro)
        self.pristine_cancel = self.cancel
        self.keep: list[Any] = []
        self.result = ctypes.c_void_p()
        self.result_ref = ctypes.byref(self.result)

    def apply(self, options: Mapping[str, Any], on_print: PrintCallback | None,
              on_warning: PrintCallback | None) -> tuple[PrintCallback | None, PrintCallback | None]:
        """Sets one run's options; returns its callbacks."""
        ro = self.ro
        for name, v in options.items():
            if name == "strict":
                ro.strict = -1 if v is None else int(bool(v))
            elif name == "timeout_seconds":
                ro.timeout_seconds = 0.0 if v is None else _seconds(v)
            elif name == "max_steps":
                _int_option(ro, "max_steps", name, 0 if v is None else v)
            elif name == "cancel":
                if v is not None:
                    self.cancel = _cancel_token(v)
            elif name == "progress_interval":
                ro.progress_interval = -1.0 if v is None else _seconds(v, name)
            elif name == "on_print":
                on_print = _callback(name, v)
            elif name == "on_warning":
                on_warning = _callback(name, v)
        return on_print, on_warning

    def set_trace(self, path: str) -> None:
        b = _capi.c_bytes_of(path, "tessera: option trace_path")
        self.keep.append(b)
        self.ro.trace_path = b

    def set_progress(self) -> None:
        self.ro.on_progress = _PROGRESS_TRAMPOLINE
        self.ro.on_progress_user = self.token

    def restore(self) -> None:
        """Back to the executable's options after `apply`."""
        ctypes.memmove(ctypes.addressof(self.ro), self.pristine, len(self.pristine))
        self.cancel = self.pristine_cancel
        self.keep.clear()

    def close(self) -> None:
        _sinks.pop(self.token, None)


class Executable:
    """A kernel made ready to run on one backend (a tsr_executable_t):
    `executable(*inputs)` runs it on numpy arrays and returns its outputs.
    Made by `tessera.compile`. Thread-safe: runs may be concurrent."""

    def __init__(self, kernel: Kernel, backend: str = "interp", *,
                 context: Context | None = None, **options: Any):
        if not isinstance(kernel, Kernel):
            raise TypeError(f"tessera.compile: expected a tessera.Kernel, got {type(kernel).__name__}")
        _check_names("tessera.compile", options, _EXECUTABLE_OPTIONS)
        self.kernel_name = kernel.name
        self.operands = kernel.operands
        self.backend = _choice("backend", backend, tuple(_capi.BACKENDS))
        self.context = context if context is not None else default_context()
        self.options = dict(options)
        h = _capi.lib()
        eo = _capi.ExecutableOptions()
        h.tsr_executable_options_initialize(ctypes.byref(eo))
        eo.backend = _capi.BACKENDS[backend]
        runs = eo.run  # tsr_interp_options_t, inside eo: what the runs do
        keep: list[Any] = []
        devices = 1
        for name, v in options.items():
            if name == "uninit":
                runs.uninit = _capi.UNINIT[_choice(name, v, tuple(_capi.UNINIT))]
            elif name == "check":
                runs.check = bool(v)
            elif name == "shuffle_parallel":
                runs.shuffle_parallel = bool(v)
            elif name == "shuffle_seed":
                _int_option(runs, "shuffle_seed", name, v)
            elif name == "chip":
                if v is not None:
                    b = _capi.c_bytes_of(str(v), "tessera: option chip")
                    if not h.tsr_interp_chip_vmem_bytes(b, ctypes.byref(ctypes.c_uint64())):
                        raise ValueError(f"tessera: unknown chip {v!r} (chips: v2, v3, v4, v5e, "
                                         "v5p, v6e, v7x (v7, tpu7x), tpu8i)")
                    keep.append(b)
                    runs.chip = b
            elif name == "max_errors":
                _int_option(runs, "max_errors", name, v, positive=True)
            elif name == "threads":
                _int_option(runs, "threads", name, 0 if v is None else v)
            elif name == "devices":
                devices = _int_option(runs, "devices", name, v, positive=True)
            elif name == "cores":
                _int_option(runs, "cores", name, v, positive=True)
            elif name == "schedule_seed":
                _int_option(runs, "schedule_seed", name, v)
            elif name == "dma_mode":
                runs.dma_eager = _choice(name, v, ("lazy", "eager")) == "eager"
            elif name == "dma_eager":
                runs.dma_eager = bool(v)
            elif name == "detect_races":
                runs.detect_races = bool(v)
            elif name == "oob_reads_uninit":
                runs.oob_reads_uninit = bool(v)
            elif name == "padded":
                runs.padded = bool(v)
            elif name == "out_blocks_copied_in":
                runs.out_blocks_copied_in = bool(v)
            elif name == "strict":
                runs.strict = bool(v)
            elif name == "timeout_seconds":
                runs.timeout_seconds = 0.0 if v is None else _seconds(v)
            elif name == "max_steps":
                _int_option(runs, "max_steps", name, 0 if v is None else v)
            elif name == "cancel":
                if v is not None:
                    _cancel_token(v)  # runs poll their own flags (_Slot)
            elif name == "trace_path":
                if v is not None:  # each run's file is chosen when it starts (_trace_target)
                    _capi.c_bytes_of(v, "tessera: option trace_path")
            elif name == "progress_interval":
                runs.progress_interval = 0.25 if v is None else _seconds(v, name)
            elif name == "on_progress":
                _progress_callback(v)
            elif name == "parallel_order":
                if v is not None:
                    entries = [int(x) for x in v]
                    arr = (ctypes.c_int64 * max(1, len(entries)))(*entries)
                    keep.append(arr)  # C copies it; kept for the call
                    runs.parallel_order = ctypes.cast(arr, ctypes.POINTER(ctypes.c_int64))
                    runs.parallel_order_size = len(entries)
            elif name == "on_grid_step":
                if v is not None:
                    if not callable(v):
                        raise TypeError("tessera: option on_grid_step must be callable "
                                        "(device, core, point)")

                    def step(_user, device, core, rank, point, _f=v):
                        _f(int(device), int(core), tuple(int(point[i]) for i in range(rank)))
                    fn = _capi.GRID_STEP_FN(step)
                    keep.append(fn)
                    runs.on_grid_step = fn
            elif name == "opt_level":
                _int_option(eo, "opt_level", name, v)
            elif name in ("on_print", "on_warning"):
                _callback(name, v)
        self._keep = keep  # what eo's pointers point at (strings C copies)
        self._devices = devices
        self._on_print = options.get("on_print")
        self._on_warning = options.get("on_warning")
        self._cancel = options.get("cancel")
        self._on_progress = options.get("on_progress")
        self._trace_path = options.get("trace_path")
        self._overwrite = bool(options.get("overwrite", False))
        # close() during runs leaves the destroy to the last of them. A run
        # appends to `_active`, then looks at `_closed`; close() sets
        # `_closed`, then looks at `_active`: whatever the interleaving, a
        # run that goes on is seen by close(), or it sees `_closed` itself.
        # (list.append and pop are atomic: no lock, which cost a measurable
        # part of a warm call.) `_destroy_once` makes the destroy happen once.
        self._active: list[None] = []
        self._closed = False
        self._destroy_once = [True]
        # Runs write their text to a sink chosen per run; the executable's own
        # output stays unset (the run's wins).
        self._handle = ctypes.c_void_p()
        s = h.tsr_executable_create(self.context._live(), kernel._handle, ctypes.byref(eo),
                                    ctypes.byref(self._handle))
        self.context._flush_warnings()
        if s:
            _raise_status(s, CompileError, f"kernel @{kernel.name}")
        self.context._executables.add(self)
        self._run_fn = h.tsr_executable_run
        self._destroy_fn = h.tsr_run_result_destroy
        # Applied to a run's diagnostics before they are raised or warned
        # (the JAX bridge gives operand records its user's Python lines).
        self._diagnostic_hook: Callable[[Diagnostic], Diagnostic] | None = None
        # Called with a run's warnings (after _diagnostic_hook); it may raise
        # to make the run fail (the JAX bridge's target="tpu": kinds a TPU
        # refuses are errors).
        self._warnings_hook: Callable[[tuple[Diagnostic, ...]], None] | None = None
        # Told about every run when set (tessera.jax's run recorder, for
        # pytest --tessera-report): observer(seconds, (done, total), warnings,
        # error), where (done, total) are the grid steps the run's last
        # progress call gave. None: runs pay one attribute test.
        self._observer: Callable[[float, list, tuple, BaseException | None], None] | None = None
        # Makes each run's output arrays (the bridge's are aligned for XLA).
        self._empty: Callable[[tuple[int, ...], np.dtype], np.ndarray] = np.empty
        self._prepare_binding()

    # -- binding -----------------------------------------------------------------

    def _prepare_binding(self) -> None:
        lead = (self._devices,) if self._devices > 1 else ()
        bound = [o for o in self.operands if o.role != "scratch"]
        self.inputs = tuple(o for o in bound if o.role != "out")
        self.outputs = tuple(o for o in bound if o.role == "out")
        self._in_specs = [(o, o.dtype, lead + o.shape) for o in self.inputs]
        self._out_specs = [(o.dtype, lead + o.shape) for o in self.outputs]
        self._array_specs = [(_dtype_index(o.dtype_name), lead + o.shape) for o in bound]
        self._n = len(bound)
        # Slots (a run's C structs and sink) not in use; a run takes one or
        # makes one, and puts it back (list.pop and append are atomic).
        self._slots: list[_Slot] = []
        self._all_slots: weakref.WeakSet[_Slot] = weakref.WeakSet()
        names = ", ".join("%" + o.name for o in self.inputs)
        self._signature = f"kernel @{self.kernel_name} takes {len(self.inputs)} input" \
                          f"{'s' if len(self.inputs) != 1 else ''}" + (f" ({names})" if names else "")

    def _input(self, spec: tuple[Operand, np.dtype, tuple[int, ...]], x: Any) -> np.ndarray:
        o, dtype, shape = spec
        if type(x) is np.ndarray and (x.dtype is dtype or x.dtype == dtype) and \
                x.shape == shape and x.flags.c_contiguous:
            return x
        if not hasattr(x, "dtype"):
            # lists, Python scalars: converted to the declared dtype
            try:
                x = np.asarray(x, dtype=dtype)
            except (TypeError, ValueError) as e:
                raise TypeError(f"kernel @{self.kernel_name}: operand %{o.name} ({o.dtype_name}): "
                                f"cannot convert {type(x).__name__} to {dtype}: {e}") from None
        else:
            x = np.asarray(x)
            if x.dtype != dtype:
                hint = " (numpy has no bf16: use ml_dtypes.bfloat16)" if o.dtype_name == "bf16" else ""
                raise TypeError(f"kernel @{self.kernel_name}: operand %{o.name} is {o.dtype_name} "
                                f"(numpy {dtype}){hint}, got an array of dtype {x.dtype}")
        if x.shape != shape:
            want = list(shape)
            note = f" (a leading dimension of {self._devices} devices)" if self._devices > 1 else ""
            raise ValueError(f"kernel @{self.kernel_name}: operand %{o.name} has shape {want}{note}, "
                             f"got an array of shape {list(x.shape)}")
        return np.ascontiguousarray(x)

    # -- runs ------------------------------------------------------------------------

    def __call__(self, *inputs: Any, **run_options: Any) -> np.ndarray | tuple[np.ndarray, ...]:
        """Runs the kernel on `inputs` (one array per prefetch and in
        operand, in order); returns its output, or a tuple when it has
        several (or none). Raises KernelError when the run fails; warnings
        are issued as KernelWarnings. run_options: as `run`."""
        # pytest leaves tessera's frames out of a failure's report (the
        # error is the kernel's, at the user's call), here and below
        __tracebackhide__ = True
        outputs = self._run(inputs, run_options, want_stats=False)[0]
        return outputs[0] if len(outputs) == 1 else outputs

    def run(self, *inputs: Any, **run_options: Any) -> RunResult:
        """Runs the kernel and returns its outputs, warnings and counters.

        run_options change this run only (tsr_run_options_t): strict,
        timeout_seconds, max_steps, cancel (a CancelToken), trace_path,
        on_print and on_warning (callables taking text). Ctrl-C on the main
        thread stops the run and raises KeyboardInterrupt."""
        __tracebackhide__ = True
        outputs, warns, stats = self._run(inputs, run_options, want_stats=True)
        return RunResult(outputs, warns, stats)

    def _run(self, inputs: Sequence[Any], run_options: Mapping[str, Any],
             want_stats: bool) -> tuple[tuple[np.ndarray, ...], tuple[Diagnostic, ...], RunStats | None]:
        # The common case (warm, no per-run options, no output, no warnings)
        # makes two C calls: the run and the result's destroy. Each step here
        # was timed by bench/python/bench_binding.py (docs/python.md).
        __tracebackhide__ = True
        if self._closed:
            raise ValueError("tessera: the executable is closed")
        if len(inputs) != len(self._in_specs):
            raise TypeError(f"{self._signature}, got {len(inputs)}")
        if run_options:
            _check_names("tessera.Executable.run", run_options, _RUN_OPTIONS)
        ins = [self._input(spec, x) for spec, x in zip(self._in_specs, inputs)]
        outs = [self._empty(shape, dtype) for dtype, shape in self._out_specs]
        warns, stats = self._execute(itertools.chain(ins, outs), None, run_options, want_stats)
        return tuple(outs), warns, stats

    def _run_buffers(self, addresses: Sequence[int]) -> None:
        """Runs on raw buffers the caller owns: one address per input, then
        per output, of the executable's shapes and dtypes (an XLA buffer,
        for the JAX bridge's FFI call). Raises and warns as a run does."""
        if self._closed:
            raise ValueError("tessera: the executable is closed")
        if len(addresses) != self._n:
            raise TypeError(f"{self._signature} and gives {self._n - len(self._in_specs)} "
                            f"outputs, got {len(addresses)} buffers")
        self._execute((), addresses, {}, want_stats=False)

    def _execute(self, arrays: Iterable[np.ndarray], addresses: Sequence[int] | None,
                 run_options: Mapping[str, Any],
                 want_stats: bool) -> tuple[tuple[Diagnostic, ...], RunStats | None]:
        """Runs on `arrays` (inputs then outputs), or on `addresses` when
        given; returns the warnings and the stats (when wanted or failed)."""
        __tracebackhide__ = True
        active = self._active
        active.append(None)
        try:
            if self._closed:
                raise ValueError("tessera: the executable is closed")
            observer = self._observer
            if observer is None:
                return self._execute_slot(arrays, addresses, run_options, want_stats)
            steps = [0, 0]
            start = time.perf_counter()
            try:
                out = self._execute_slot(arrays, addresses, run_options, want_stats, steps)
            except BaseException as e:
                observer(time.perf_counter() - start, steps, (), e)
                raise
            observer(time.perf_counter() - start, steps, out[0], None)
            return out
        finally:
            active.pop()
            if self._closed and not active:
                self._destroy()

    def _execute_slot(self, arrays: Iterable[np.ndarray], addresses: Sequence[int] | None,
                      run_options: Mapping[str, Any], want_stats: bool,
                      steps: list | None = None) -> tuple[tuple[Diagnostic, ...], RunStats | None]:
        __tracebackhide__ = True
        try:
            slot = self._slots.pop()
        except IndexError:
            slot = _Slot(self)
            self._all_slots.add(slot)
        token = None
        touched = bool(run_options)  # the slot's C options change for this run
        line = None
        try:
            on_print = self._on_print
            on_warning = self._on_warning
            on_progress = self._on_progress
            trace_path = self._trace_path
            if run_options:
                on_print, on_warning = slot.apply(run_options, on_print, on_warning)
                on_progress = run_options.get("on_progress", on_progress)
                trace_path = run_options.get("trace_path", trace_path)
            if trace_path is not None:
                overwrite = run_options.get("overwrite", self._overwrite) if run_options \
                    else self._overwrite
                slot.set_trace(_trace_target(trace_path, bool(overwrite)))
                touched = True
            if on_progress is not None and on_progress is not False:
                on_progress = _progress_callback(on_progress)
                if on_progress is True:
                    on_progress = line = ProgressLine() if ProgressLine.wanted() else None
            else:
                on_progress = None
            if steps is not None:  # an observer's count of grid steps
                user_progress = on_progress

                def on_progress(done: int, total: int) -> None:
                    steps[0], steps[1] = done, total
                    if user_progress is not None:
                        user_progress(done, total)
            if on_progress is not None:
                slot.set_progress()
                touched = True
            if on_print is None:
                on_print = self.context.on_print
            if on_warning is None:
                on_warning = self.context.on_warning
            sink = slot.sink
            sink.reset(on_print, on_warning)
            sink.on_progress = on_progress or None
            flag = slot.flag
            flag.value = 0
            token = slot.cancel
            if token is not None:
                token._attach(flag)
            if addresses is None:
                for field, x in zip(slot.data, arrays):
                    try:
                        field.value = _addressof(_char_at(x))
                    except (TypeError, ValueError):  # read-only (a jax array's view)
                        field.value = x.__array_interface__["data"][0]
            else:
                for field, address in zip(slot.data, addresses):
                    field.value = address
            armed = _interrupts.arm(flag)
            try:
                status = self._run_fn(self._handle, slot.ptrs, self._n, slot.ro_ref,
                                      slot.result_ref)
            finally:
                if armed:
                    _interrupts.disarm()
                if line is not None:
                    line.end()
            result = slot.result
            try:
                diags, stats = self._outcome(status, result.value, sink.warned, want_stats,
                                             sink.error)
            finally:
                if status:
                    _capi.lib().tsr_status_free(status)
                if result.value:
                    self._destroy_fn(result)
                    result.value = None
            error = sink.error
            sink.reset(None, None)  # drop the references to the callbacks
        finally:
            if token is not None:
                token._detach(slot.flag)
            if touched:
                slot.restore()
            self._slots.append(slot)
        if error is not None:
            raise error
        return self._warn(diags, stats, on_warning)

    def _outcome(self, status: Any, result: int | None, warned: bool, want_stats: bool,
                 first_error: BaseException | None
                 ) -> tuple[tuple[Diagnostic, ...], RunStats | None]:
        """A finished run's diagnostics (when it failed or warned) and stats
        (when wanted or failed), from its status and result (neither freed
        here); raises the run's error: `first_error` (a callback's) first,
        else a KernelError."""
        __tracebackhide__ = True
        diags: tuple[Diagnostic, ...] = ()
        moved: list[tuple[str, str]] = []
        stats = None
        if (status or warned) and result:
            diags = _diagnostics_of_list(_capi.lib().tsr_run_result_diagnostics(result))
            if self._diagnostic_hook is not None:
                diags, moved = _hooked(self._diagnostic_hook, diags)
        if want_stats or status:
            st = _capi.InterpStats()
            if result:
                _capi.lib().tsr_run_result_stats(result, ctypes.byref(st))
            stats = RunStats(st.grid_steps, st.ops_executed, st.blocks_copied_in,
                             st.blocks_copied_out, st.bytes_copied, st.vmem_bytes, st.warnings)
        if status:
            h = _capi.lib()
            code = h.tsr_status_code_name(h.tsr_status_code(status)).decode()
            message = h.tsr_status_message(status).decode(errors="replace")
            if first_error is not None:
                raise first_error
            raise KernelError(code, _requote(message, moved), diags, stats)
        return diags, stats

    def _warn(self, diags: tuple[Diagnostic, ...], stats: RunStats | None,
              on_warning: PrintCallback | None
              ) -> tuple[tuple[Diagnostic, ...], RunStats | None]:
        """Issues a run's warnings (KernelWarnings, unless their text went to
        `on_warning`); returns them with the stats."""
        if not diags:
            return (), stats
        warns = tuple(d for d in diags if d.severity != "error")
        if self._warnings_hook is not None:
            self._warnings_hook(warns)
        if on_warning is None:
            for d in warns:
                if d.severity == "warning":
                    warnings.warn(KernelWarning(d), **_warn_kwargs())
        return warns, stats

    def _finish_direct(self, status: int | None, result: int | None, printed: bytes,
                       warned: bytes) -> None:
        """After a run the library made without Python (tsr_xla_bind's
        direct runs) that printed, warned or failed: its text goes where a
        run's would, then its error is raised or its warnings issued."""
        __tracebackhide__ = True
        on_print = self._on_print or self.context.on_print
        on_warning = self._on_warning or self.context.on_warning
        if printed:
            text = printed.decode(errors="replace")
            if on_print is not None:
                on_print(text)
            else:
                sys.stdout.write(text)
        if warned and on_warning is not None:
            on_warning(warned.decode(errors="replace"))
        diags, _ = self._outcome(status, result, bool(warned), False, None)
        self._warn(diags, None, on_warning)

    def close(self) -> None:
        """Destroys the executable now (else when it is garbage). From another
        thread, or a callback, while runs are in progress: returns at once,
        the runs end normally and the last one destroys it; runs started
        after close() raise ValueError."""
        if not hasattr(self, "_destroy_once"):  # __init__ failed before it was set
            return
        self._closed = True
        if not self._active:
            self._destroy()

    def _destroy(self) -> None:
        try:
            self._destroy_once.pop()
        except IndexError:
            return
        for binding in getattr(self, "_xla_bindings", ()):
            # their direct runs end first (tessera.jax's FFI calls)
            _capi.lib().tsr_xla_retire(binding)
        handle, self._handle = self._handle, ctypes.c_void_p()
        if handle:
            _capi.lib().tsr_executable_destroy(handle)
        for slot in list(getattr(self, "_all_slots", ())):
            slot.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        return f"<tessera.Executable @{self.kernel_name} backend={self.backend}>"


def _aligned_empty(shape: tuple[int, ...], dtype: np.dtype, alignment: int = 64) -> np.ndarray:
    """np.empty whose data starts at a multiple of `alignment` bytes (numpy
    gives 16): what XLA's CPU client needs to adopt a buffer without a copy."""
    nbytes = math.prod(shape) * dtype.itemsize
    raw = np.empty(nbytes + alignment, np.uint8)
    start = -raw.__array_interface__["data"][0] % alignment  # .ctypes makes an object
    return raw[start:start + nbytes].view(dtype).reshape(shape)


def _kernel_of(kernel: Kernel | Module) -> Kernel:
    if isinstance(kernel, Module):
        if len(kernel) != 1:
            raise ValueError(f"tessera: the module has {len(kernel)} kernels; pick one with "
                             "module['name']")
        return kernel.kernels[0]
    return kernel


def compile(kernel: Kernel | Module, backend: str = "interp", *,
            context: Context | None = None, **options: Any) -> Executable:
    """Verifies `kernel` and prepares it for the interpreter (backend
    "interp") or compiles it to native code ("cpu"); a Module with one kernel
    may stand for it. Raises CompileError with the diagnostics when it
    cannot.

    options, the fields of tsr_executable_options_t's `run`
    (tsr_interp_options_t) and its opt_level (docs/api.md; their meaning is
    that of the `tessera run` options, docs/cli.md): uninit ("nan" or
    "zero"), check, shuffle_parallel and shuffle_seed, chip ("v5e", ...),
    max_errors, devices, cores, schedule_seed, dma_eager (or
    dma_mode="lazy"|"eager"), detect_races, oob_reads_uninit, padded,
    out_blocks_copied_in (output blocks copied in, as JAX's generic
    interpret=True runs them), strict, timeout_seconds,
    max_steps, cancel (a CancelToken), trace_path (a Perfetto trace),
    opt_level (cpu, 0-3), and on_print / on_warning (callables taking text).
    The cpu backend uses devices, cores, uninit, out_blocks_copied_in,
    max_errors, opt_level, oob_reads_uninit, padded and the run bounds; of the checks it makes only
    the bounds of dynamic indices and block indices (not uninitialized reads,
    races).

    context: the Context (default: `default_context()`)."""
    return Executable(_kernel_of(kernel), backend, context=context, **options)


def run(kernel: Kernel | Module, *inputs: Any, backend: str = "interp",
        context: Context | None = None, **options: Any) -> np.ndarray | tuple[np.ndarray, ...]:
    """`compile(kernel, backend, context=context, **options)(*inputs)`: the
    context's caches make the preparation a lookup after the first time."""
    return compile(kernel, backend, context=context, **options)(*inputs)
