"""Pallas TPU kernels for tessera's differential tests and benchmarks.

Every module here is one kernel written with `jax.experimental.pallas` and
`pallas.tpu`, exactly as a user would write it, and exposes

    build(**shape) -> (fn, inputs)

where `fn(pallas_call, *inputs)` runs the kernel through whichever
`pallas_call` it is given (`pl.pallas_call` with `interpret=` bound, or
`tessera.jax.pallas_call` with tessera's options bound) and returns its
outputs, and `inputs` is a tuple of numpy arrays (fixed seeds). The same
kernel therefore runs unchanged under JAX's TPU interpret mode (the oracle),
JAX's HLO interpret mode (`interpret=True`) and tessera.

Module attributes read by the tests (`_harness.py` documents them):
`KIND` ("example", "primitives", "bug"), `SOURCE` (the .tsr it mirrors, for
examples), `OPTIONS` (run options both interpreters get: cores, races...),
`TOLERANCE` (per output), `PRIMITIVES` (what a coverage kernel exercises),
`reference(*inputs)` (numpy), and for the bug kernels `EXPECT`.
"""

from __future__ import annotations

import importlib
from types import ModuleType

#: tessera's kernels/examples/*.tsr rewritten in Pallas (one case per .tsr
#: kernel; reduce.tsr has four).
EXAMPLES: dict[str, tuple[str, dict]] = {
    "add": ("add", {}),
    "matmul": ("matmul", {}),
    "softmax": ("softmax", {}),
    "rowsum": ("reduce", {"kernel": "rowsum"}),
    "rowmax": ("reduce", {"kernel": "rowmax"}),
    "colsum": ("reduce", {"kernel": "colsum"}),
    "colmax": ("reduce", {"kernel": "colmax"}),
    "gather_prefetch": ("gather_prefetch", {}),
    "ragged": ("ragged", {}),
    "int_hash": ("int_hash", {}),
    "bf16_axpy": ("bf16_axpy", {}),
}

#: kernels written to cover every primitive of LISTED_PRIMITIVES (test_pdiff_primitives.py).
PRIMITIVES: dict[str, tuple[str, dict]] = {
    "prim_indexing": ("prim_indexing", {}),
    "prim_elementwise": ("prim_elementwise", {}),
    "prim_transcendental": ("prim_transcendental", {}),
    "prim_shape": ("prim_shape", {}),
    "prim_dot_reduce": ("prim_dot_reduce", {}),
    "prim_control": ("prim_control", {}),
    "prim_dma": ("prim_dma", {}),
    "prim_semaphore_read": ("prim_semaphore_read", {}),
    "prim_remote": ("prim_remote", {}),
    "prim_barrier": ("prim_barrier", {}),
    "prim_addupdate": ("prim_addupdate", {}),
    "prim_dynamic_grid": ("prim_dynamic_grid", {}),
    "prim_debug": ("prim_debug", {}),
    "prim_extra": ("prim_extra", {}),
    "prim_element": ("prim_element", {}),
}

#: kernels that are wrong on a TPU.
BUGS: dict[str, tuple[str, dict]] = {
    "bug_oob_index_map": ("bug_oob", {"where": "index_map"}),
    "bug_oob_ds": ("bug_oob", {"where": "ds"}),
    "bug_revisit": ("bug_revisit", {}),
    "bug_race_cores": ("bug_race", {"where": "cores"}),
    "bug_race_cores_no_detection": ("bug_race", {"where": "cores",
                                                  "detect": False}),
    "bug_race_dma": ("bug_race", {"where": "dma"}),
    "bug_deadlock": ("bug_deadlock", {}),
    "bug_uninit": ("bug_uninit", {}),
}

ALL: dict[str, tuple[str, dict]] = {**EXAMPLES, **PRIMITIVES, **BUGS}


def module(case: str) -> ModuleType:
    """The kernel module of a case name (a key of `ALL`)."""
    mod_name, _ = ALL[case]
    return importlib.import_module(f"{__name__}.{mod_name}")


def attr(case: str, name: str, default=None):
    """A module attribute of a case; a callable one (other than `reference`)
    is called with the case's arguments, so variants can differ."""
    mod_name, kwargs = ALL[case]
    value = getattr(module(case), name, default)
    if callable(value) and name != "reference":
        return value(**kwargs)
    return value


def reference(case: str, inputs):
    """The numpy reference of a case: its module's `reference(*inputs,
    **case_kwargs)` (None if the module has none)."""
    mod_name, kwargs = ALL[case]
    ref = getattr(module(case), "reference", None)
    return None if ref is None else ref(*inputs, **kwargs)


def build(case: str, **shape):
    """`build` of a case's module with the case's own arguments."""
    mod_name, kwargs = ALL[case]
    return module(case).build(**{**kwargs, **shape})
