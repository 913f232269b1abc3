"""The bridge's runner: a translated kernel as a `tessera.Executable` (the
package's binding of tsr_executable_run), with what the bridge adds: the
user's Python lines on diagnostics tessera makes at an operand, prefetch
tables tessera stores widened, and a run on XLA's buffers (the FFI call).

A `Runner` is made once per translated kernel and reused by every call
(docs/jax.md, "Performance"): a warm call costs the package's run and nothing more.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Sequence

import numpy as np

from .. import _api as T
from .. import _builder as B
from . import _jax_errors

KernelError = T.KernelError
CompileError = T.CompileError
KernelWarning = T.KernelWarning
Diagnostic = T.Diagnostic

# Options of the bridge itself, not of the run (see tessera.jax.pallas_call).
#: numerics: "cpu" (the default: f32 dots exact in f32, as XLA:CPU) or
#: "tpu" (f32 dot operands rounded as a TPU's MXU does at the dot's
#: precision; translate_linalg.py): a translation option, not a run option
#: target ("tpu" or None), tpu_compile_check: what a TPU would refuse is an
#: error, not a warning (_tpu_target.py); options of the bridge, whose
#: `chip` is the run's too
BRIDGE_OPTIONS = ("numpy_outputs", "jit_callback", "numerics", "warnings", "jax_state",
                  "target", "tpu_compile_check",
                  "jax_random_seed", "jax_grid_recorder", "jax_refuse_scoped_hbm",
                  "jax_skip_float_ops")
# Set by the bridge itself (a call made with JAX's InterpretParams), not by
# users: _params.py maps JAX's fields to them.
_INTERNAL_OPTIONS = ("jax_state", "jax_random_seed", "jax_grid_recorder",
                     "jax_refuse_scoped_hbm", "jax_skip_float_ops")


def option_names() -> list[str]:
    """The tessera options pallas_call/interpret accept."""
    return sorted({"backend", *T._EXECUTABLE_OPTIONS, *BRIDGE_OPTIONS} -
                  set(_INTERNAL_OPTIONS))


#: the message of a run inside jax.jit stopped by Ctrl-C (docs/jax.md,
#: "Ctrl-C"): JAX raises what a host call reports as its own runtime error,
#: so the KeyboardInterrupt cannot reach the caller as one
INTERRUPTED = ("tessera.jax: the kernel's run was interrupted (Ctrl-C: a KeyboardInterrupt "
               "during a call inside jax.jit, which JAX reports as this error)")


def describe(error: BaseException) -> str:
    """An error's message with its diagnostics' lines: the text XLA shows
    when a run inside jax.jit fails."""
    if isinstance(error, KeyboardInterrupt):  # its own text is empty
        return INTERRUPTED
    head = str(error)
    lines = [head]
    for d in getattr(error, "diagnostics", ()):
        # a line the message already carries (the first error, after JAX's
        # phrase) is not repeated
        if d.text and d.text not in head and d.text not in lines:
            lines.append(d.text)
    return "\n".join(lines)


_NO_LINE = re.compile(r"[^\n]*?:0:0: (?=(?:error|warning|note): )")
_OPERAND = re.compile(r": (?:in|out) %(\w+): ")


class Runner:
    """A translated kernel made ready to run on one backend."""

    def __init__(self, module: B.ModuleBuilder, in_dtypes: Sequence[np.dtype],
                 options: dict, operand_locs: dict | None = None,
                 kernel_loc: tuple[str, int, int] | None = None,
                 prims_at: dict | None = None,
                 tpu_check: Any = None):
        """Takes over `module` (its one kernel is compiled, then the module
        goes). in_dtypes: the numpy dtype each input arrives in (a prefetch
        table tessera stores widened arrives narrower and is converted);
        options: tessera's (option_names() without the bridge's own);
        operand_locs: operand name -> (file, line, col), given to
        diagnostics tessera reports at an operand (block copies, index maps)
        instead of its declaration, which has no line; kernel_loc: the
        pallas_call's, given to those about the whole kernel (VMEM over
        budget); prims_at: (line, col, mnemonic) -> the JAX primitive that
        built that load or store (named in JAX's errors); tpu_check: called
        with the kernel before it is compiled (_tpu_target.py). Raises
        tessera.CompileError when tessera cannot prepare it."""
        __tracebackhide__ = True  # pytest: the report starts at the user's call
        self._prims_at = dict(prims_at or {})
        options = dict(options)
        backend = options.pop("backend", "interp")
        # Runs of a pallas_call made with JAX's InterpretParams keep JAX's
        # interpret-mode state that tests read (races.races_found) current.
        self.jax_state = bool(options.pop("jax_state", False))
        self._operand_locs = dict(operand_locs or {})
        self._kernel_loc = kernel_loc
        on_warning = options.get("on_warning")
        if callable(on_warning):
            # A warning's text reaches on_warning while the kernel runs,
            # before its record is relocated: the same Python lines.
            options["on_warning"] = lambda text: on_warning(self._relocate_text(text))
        kernel = T.Module._from_handle(module.take(), "<jax>").kernels[0]
        # Operand names by role: which side of a copy left its bounds, and an
        # output's position, in the errors JAX's interpret mode would raise.
        self._in_names = [o.name for o in kernel.operands if o.role not in ("out", "scratch")]
        self._out_names = [o.name for o in kernel.operands if o.role == "out"]
        # What a TPU would refuse, found before the run (warnings without
        # target="tpu"): also in every run's entry of pytest's run report.
        self.tpu_findings: tuple = ()
        if tpu_check is not None:
            try:
                self.tpu_findings = tuple(tpu_check(kernel) or ())
            except T.CompileError as e:
                raise self.as_jax(e) from None
        try:
            self.executable = T.compile(kernel, backend, **options)
        except T.CompileError as e:
            diagnostics, moved = T._hooked(self._relocate, e.diagnostics)
            raise self.as_jax(T.CompileError(e.code, T._requote(e.message, moved),
                                             diagnostics)) from None
        self.executable._diagnostic_hook = self._relocate
        from . import _report  # pytest --tessera-report: its observer, else none
        self.executable._observer = _report.observer_for(self)
        self.executable._error_hook = self.as_jax  # the FFI call's errors (_ffi.py)
        # Outputs XLA can adopt without a copy (_jax_internal.adopt_host_arrays).
        self.executable._empty = T._aligned_empty
        # The inputs arriving in another dtype than tessera stores them in.
        self._convert = [i for i, (o, d) in enumerate(zip(self.executable.inputs, in_dtypes))
                         if o.dtype != np.dtype(d)]

    def __call__(self, *inputs: Any) -> tuple[np.ndarray, ...]:
        """Runs on arrays (one per prefetch/input operand, of the prepared
        shapes); returns the outputs."""
        __tracebackhide__ = True  # pytest: the report starts at the user's call
        if self._convert and len(inputs) == len(self.executable.inputs):
            inputs = list(inputs)
            for i in self._convert:
                inputs[i] = np.asarray(inputs[i], dtype=self.executable.inputs[i].dtype)
        if self.jax_state:
            self.before_run()
        try:
            return self.executable._run(inputs, {}, want_stats=False)[0]
        except KernelError as e:
            # The kernel's fault, found in the run: the package's frames
            # below this one say nothing about it (a short traceback).
            raise self.as_jax(e).with_traceback(None) from None

    def before_run(self) -> None:
        """What JAX's interpret mode resets at each call (_params.py)."""
        from . import _params
        _params.reset_races()

    def as_jax(self, error: BaseException) -> BaseException:
        """`error` as the exception JAX's TPU interpret mode raises for the
        same fault (still a tessera error with its diagnostics;
        _jax_errors.py), or itself."""
        if self.jax_state and any(getattr(d, "kind", None) == "race"
                                  for d in getattr(error, "diagnostics", ())):
            from . import _params
            _params.note_race()
        return _jax_errors.as_jax(error, self._in_names, self._out_names, self._prims_at)

    def _relocate_text(self, text: str) -> str:
        """`_relocate` for a diagnostic's text alone (what on_warning
        gets): a line at `file:0:0` names its operand's (`in %x_ref: `,
        `out %o_ref: `) or the pallas_call's Python location."""
        lines = []
        for line in text.split("\n"):
            m = _NO_LINE.match(line)
            if m is not None:
                op = _OPERAND.search(line, m.end())
                loc = self._operand_locs.get(op.group(1)) if op else None
                loc = loc or self._kernel_loc
                if loc is not None:
                    line = f"{loc[0]}:{loc[1]}:{loc[2]}: " + line[m.end():]
            lines.append(line)
        return "\n".join(lines)

    def _relocate(self, d: Diagnostic) -> Diagnostic:
        """Gives a diagnostic without a line (made at an operand declaration
        or about the whole kernel) the operand's or the pallas_call's Python
        location."""
        if d.line is not None:
            return d
        loc = self._operand_locs.get(d.buffer) if d.buffer else self._kernel_loc
        if loc is None:
            return d
        file, line, col = loc
        text = d.text
        head = f"{d.file}:" if d.file else ""
        if head and text.startswith(head):
            rest = text[len(head):]
            while rest[:1].isdigit():  # drop the declaration's ":0:0" if printed
                rest = rest.lstrip("0123456789").removeprefix(":")
            text = f"{file}:{line}:{col}: " + rest.lstrip()
        return dataclasses.replace(d, file=file, line=line, col=col, text=text)
