"""tessera's errors as the exceptions JAX's TPU interpret mode raises for the
same fault: a test written for JAX (`assertRaisesRegex(IndexError,
"Out-of-bounds read")`) passes under tessera too, and still sees tessera's
located diagnostic after JAX's phrase.

The exception keeps tessera's class (KernelError or CompileError, with its
`.diagnostics`, and printed under its name: `tessera.KernelError`) and adds
JAX's (IndexError, ValueError, RuntimeError); its message is JAX's phrase,
then tessera's message. Refs are named as the kernel's parameters name them
(the IR's names: translate_core.Translator.fresh_name), as JAX's interpret
mode names its inputs and outputs. The mapping, by the first
error diagnostic's kind and op, is documented in docs/jax.md ("Errors as
JAX raises them").
"""

from __future__ import annotations

import dataclasses
import re
from typing import Mapping, Sequence

from .. import _api as T

_classes: dict[tuple[type, type], type] = {}


def _runtime_error() -> type | None:
    try:
        import jax
        return jax.errors.JaxRuntimeError
    except (ImportError, AttributeError):  # pragma: no cover - an older jax
        return None


def _combined(tessera_cls: type, jax_cls: type, at_run: bool) -> type:
    """A class that is `tessera_cls` and `jax_cls`, and JAX's
    JaxRuntimeError when JAX finds the fault while the kernel runs (its
    interpret mode raises `jax_cls` in a host callback, which reaches the
    caller as a JaxRuntimeError). Made once per combination."""
    key = (tessera_cls, jax_cls, at_run)
    cls = _classes.get(key)
    if cls is None:
        bases: tuple = (tessera_cls, jax_cls)
        wrapper = _runtime_error() if at_run else None
        if wrapper is not None and issubclass(wrapper, jax_cls):
            bases = (tessera_cls, wrapper)  # JaxRuntimeError is a RuntimeError
        elif wrapper is not None and not issubclass(jax_cls, wrapper):
            bases += (wrapper,)
        # Printed as the tessera class it is (`tessera.KernelError: ...` in a
        # traceback, `<class 'tessera.KernelError'>`): the JAX class it also
        # is shows in the message's first words and in isinstance/except.
        cls = type(tessera_cls.__name__, bases,
                   {"__module__": tessera_cls.__module__, "__qualname__": tessera_cls.__qualname__,
                    "__str__": tessera_cls.__str__})
        _classes[key] = cls
    return cls


_HBM_TAIL = ("Buffers with a memory space of HBM or ANY cannot be referenced directly. "
             "Instead, use `pltpu.sync_copy` or `pltpu.async_copy`.")
_STATIC_BOUNDS = re.compile(r"'(\w+)' index \d+ of %(\w+): .*(out of range for dimension|"
                            r"exceeds dimension|starts before 0)")
_BLOCK_INDEX = re.compile(r"block index (\[[^\]]*\])")


def _grid_text(point: tuple[int, ...] | None) -> str:
    return "(" + ", ".join(map(str, point or ())) + ("," if point and len(point) == 1 else "") + ")"


def phrase(d: T.Diagnostic, inputs: Sequence[str], outputs: Sequence[str],
           prims_at: Mapping | None = None) -> tuple[type, str] | None:
    """JAX's exception class and the phrase its interpret mode starts its
    message with, for the fault `d` reports; None when JAX has none."""
    op = d.op or ""
    buffer = d.buffer or ""
    if d.kind == "verify":
        # A static index outside its ref, found before the run: the same
        # fault as at run time.
        m = _STATIC_BOUNDS.match(d.message)
        if m is not None:
            op, buffer = m.group(1), m.group(2)
            d = dataclasses.replace(d, kind="out_of_bounds", op=op, buffer=buffer)
    if d.kind == "out_of_bounds":
        if op.startswith(("in %", "out %")):  # a block copy of the pipeline
            role, _, name = op.partition(" %")
            m = _BLOCK_INDEX.search(d.message)
            bi = m.group(1) if m else "?"
            which = "input" if role == "in" else "output"
            return IndexError, (f'Out-of-bounds block index {bi} for {which} "{name}" in '
                                f"iteration {_grid_text(d.grid_point)}")
        if op == "load":
            return IndexError, f"Out-of-bounds read of %{buffer}"
        if op in ("store", "swap"):
            if "mask" in d.message:
                return ValueError, f"Out-of-bounds masked swap of %{buffer}"
            return ValueError, f"Out-of-bounds swap of %{buffer}"
        if op.startswith("dma"):
            # The interpreter's message names the side of the copy that left
            # its ref; a verify error (a static index) names the operand, whose
            # role says it when it is an input or an output.
            if "(the DMA's source)" in d.message:
                return IndexError, f"Out-of-bounds read of %{buffer}"
            if "(the DMA's destination)" in d.message:
                return ValueError, f"Out-of-bounds write of %{buffer}"
            if buffer in inputs:
                return IndexError, f"Out-of-bounds read of %{buffer}"
            if buffer in outputs:
                return ValueError, f"Out-of-bounds write of %{buffer}"
            return IndexError, f"Out-of-bounds DMA access of %{buffer}"
        return None
    if d.kind == "revisit" and op.startswith("out %"):
        name = op.partition(" %")[2]
        m = _BLOCK_INDEX.search(d.message) or re.search(r"output block (\[[^\]]*\])", d.message)
        k = outputs.index(name) if name in outputs else "?"
        return RuntimeError, (f"Revisited block {m.group(1) if m else '?'} of output {k} in "
                              f"iteration {_grid_text(d.grid_point)}")
    if d.kind == "race":
        return RuntimeError, "RACE DETECTED"
    if re.search(r"\b(hbm|any) refs cannot be", d.message):
        m = re.match(r"'(\w+)'", d.message)
        prim = (prims_at or {}).get((d.line, d.col, m.group(1) if m else op))
        # JAX names the primitive: get/swap for ref[...] reads and writes,
        # load/store for pltpu.load/pltpu.store.
        head = f"{prim}_p: " if prim else ""
        return ValueError, head + _HBM_TAIL
    return None


def as_jax(error: BaseException, inputs: Sequence[str], outputs: Sequence[str],
           prims_at: Mapping | None = None) -> BaseException:
    """`error` (a KernelError or CompileError) as the exception JAX raises
    for its first error, or `error` itself when JAX has no counterpart."""
    if not isinstance(error, (T.KernelError, T.CompileError)) or isinstance(
            error, tuple(_classes.values())):
        return error
    first = next((d for d in error.diagnostics if d.severity == "error"), None)
    if first is None:
        return error
    got = phrase(first, inputs, outputs, prims_at)
    if got is None:
        return error
    jax_cls, text = got
    # Only a direct access of an HBM ref is found by JAX while tracing.
    cls = _combined(type(error), jax_cls, at_run=not text.endswith(_HBM_TAIL))
    message = f"{text}: {error.message}"
    if isinstance(error, T.KernelError):
        new = cls(error.code, message, error.diagnostics, error.stats)
    else:
        new = cls(error.code, message, error.diagnostics)
    new.__traceback__ = error.__traceback__
    return new
