"""Translates a traced Pallas TPU kernel (the pallas_call equation) into a
tessera IR kernel through the C builder (tessera._builder).

The kernel's header comes from the grid mapping: the grid and its dimension
semantics, scalar-prefetch operands, one in/out operand per block mapping
(block shape, memory space, index map translated from its jaxpr), scratch,
input/output aliases. The body is translated equation by equation; every op
carries the equation's user Python file:line, so tessera's diagnostics name
the user's line. A primitive (or a form of one) tessera cannot express is a
`TranslationError` naming it and that line: never a different kernel.

This module is the package's entry: the translator's core and its registry
are translate_core.py; the rules, one module per family of primitives,
register themselves when imported below (docs/jax.md, "The translator's rules").
"""

from __future__ import annotations

import re
from typing import Any, Sequence

from . import _jax_internal as ji
# The rule modules register their primitives when imported (the order does
# not matter: a primitive registered twice is an error).
from . import translate_control as _control  # noqa: F401
from . import translate_devices as _devices  # noqa: F401
from . import translate_elementwise as _elementwise  # noqa: F401
from . import translate_linalg as _linalg  # noqa: F401
from . import translate_math as _math  # noqa: F401
from . import translate_memory as _memory  # noqa: F401
from . import translate_shapes as _shapes  # noqa: F401
from .translate_core import (HEADER_EMITS, IMPLICIT_EMITS, TranslatedKernel, TranslationError,
                             Translator, dtype_name, rules)

__all__ = ["TranslationError", "TranslatedKernel", "translate", "dtype_name",
           "supported_primitives", "ir_op_coverage", "NEVER_PRODUCED"]


#: IR ops no translated kernel contains, and why
NEVER_PRODUCED = {
    "core_barrier": "no Pallas primitive: pltpu.core_barrier is semaphore signals and waits "
                    "over a core axis (core_map kernels), which tessera.jax does not translate",
    "core_id": "no Pallas primitive: a core's index is lax.axis_index of a core axis "
               "(core_map kernels), which tessera.jax does not translate",
}


def supported_primitives() -> list[str]:
    """The names of the JAX primitives the translator handles."""
    return sorted(rules())


def ir_op_coverage() -> dict[str, str]:
    """IR op mnemonic -> the JAX primitives whose rules may build it
    ("add, add_any, addupdate, ..."), read from the rules' `emits`;
    `const` is built by every rule (literals, constants) and the kernel
    header's index maps build `yield` and `convert`. The ops of the IR no
    translated kernel contains are NEVER_PRODUCED's."""
    producers: dict[str, set[str]] = {}
    for name, rule in rules().items():
        for op in rule.emits:
            producers.setdefault(op, set()).add(name)
    for pseudo, ops in HEADER_EMITS.items():
        for op in ops:
            producers.setdefault(op, set()).add(f"({pseudo})")
    for op in IMPLICIT_EMITS:
        producers.setdefault(op, set()).add("(every primitive: literals and constants)")
    return {op: ", ".join(sorted(names)) for op, names in sorted(producers.items())}


def translate(call: ji.PallasCall, name: str | None = None,
              mesh: Sequence[tuple[Any, int]] | None = None,
              numerics: str = "cpu", *, bounds_at_run: bool = False,
              refuse_scoped_hbm: bool = False,
              skip_float_ops: bool = False) -> TranslatedKernel:
    """Builds the tessera kernel of a traced pallas_call. `mesh`: ((axis
    name, size), ...) of the devices it runs on, in JAX's axis-environment
    order (what `lax.axis_index` and mesh device ids refer to); None: the
    kernel runs on one device, `axis_index` is the device id. `numerics`:
    "cpu" (f32 dots exact in f32) or "tpu" (f32 dot operands rounded to
    bf16 passes as a TPU's MXU does at each dot's precision). Raises
    TranslationError for what cannot be translated. bounds_at_run: a
    static index outside its ref becomes an index operand, checked when the
    access runs (both backends check every access; JAX's interpret mode
    reports a kernel's first fault in program order), instead of a verify
    error before the run. refuse_scoped_hbm: an HBM buffer in run_scoped is JAX's
    ValueError (what JAX's interpret mode raises unless its InterpretParams
    allow_hbm_allocation_in_run_scoped), instead of a TranslationError.
    skip_float_ops: JAX's InterpretParams skip_floating_point_ops: equations
    that only make floating-point values are not translated; their values
    are +inf."""
    kname = re.sub(r"[^A-Za-z0-9_]", "_", name or call.name) or "kernel"
    if not re.match(r"[A-Za-z_]", kname):
        kname = "k_" + kname
    tr = Translator(call, kname)
    tr.mesh = tuple((n, int(s)) for n, s in mesh) if mesh is not None else None
    tr.numerics = numerics
    tr.bounds_at_run = bounds_at_run
    tr.refuse_scoped_hbm = refuse_scoped_hbm
    tr.skip_float_ops = skip_float_ops
    return tr.build()
