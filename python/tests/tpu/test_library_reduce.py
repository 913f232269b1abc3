"""The kernel library's reductions and scans compiled by libtpu (deviceless
AOT) for v5e and v6e: every kernel class the generators make (each op over
the lanes, the sublanes, a leading axis and everything; one block and many;
padded edge blocks; every dtype) is emitted as Mosaic (tsr_tpu_emit),
parsed and verified by jaxlib's MLIR and compiled for the chip. f16 stops at
emission (TPUs have no f16 vector loads, docs/tpu.md), asserted.
"""

from __future__ import annotations

import pytest

import tpu_proof as P

CHIPS = ["v5e", "v6e"]
OPS = ["sum", "prod", "max", "min", "argmax", "argmin", "mean", "var", "logsumexp"]

# (entry, params): small budgets make multi-step grids with accumulators or
# carries; (100, 300) pads the edge blocks of both tiled dims.
CLASSES: list[tuple[str, dict]] = []
for op in OPS:
    for axes in ([1], [0], [0, 1]):
        if op in ("argmax", "argmin") and len(axes) > 1:
            continue
        CLASSES.append(("reduce", dict(op=op, shape=(100, 300), dtype="f32", axes=axes,
                                       keepdims=True, vmem_budget_bytes=40000)))
    CLASSES.append(("reduce", dict(op=op, shape=(6, 64, 256), dtype="f32",
                                   axes=[0] if op.startswith("arg") else [0, 2],
                                   keepdims=True, vmem_budget_bytes=100000)))
CLASSES += [
    ("reduce", dict(op="sum", shape=(256, 1024), dtype="f32", axes=[0, 1], keepdims=False)),
    ("reduce", dict(op="sum", shape=(16, 1024), dtype="f32", axes=[1], keepdims=True)),
    # 64 MiB with the default budget: the benchmarks' blocks ((128, 4096), (8, 4096), ...)
    ("reduce", dict(op="sum", shape=(4096, 4096), dtype="f32", axes=[0, 1], keepdims=True)),
    ("reduce", dict(op="sum", shape=(4096, 4096), dtype="f32", axes=[0], keepdims=True)),
    ("reduce", dict(op="var", shape=(4096, 4096), dtype="f32", axes=[1], keepdims=True)),
    ("reduce", dict(op="prod", shape=(4096, 4096), dtype="f32", axes=[1], keepdims=True)),
    ("reduce", dict(op="sum", shape=(4096, 8192), dtype="bf16", axes=[0, 1], keepdims=True)),
    ("cumulative", dict(op="sum", shape=(4096, 4096), dtype="f32", axis=1)),
    ("cumulative", dict(op="sum", shape=(4096, 4096), dtype="f32", axis=0)),
]
for dt in ["bf16", "i32", "u32", "i16", "u16", "i8", "u8"]:
    for op in ["sum", "prod", "max", "argmin"] + (["mean"] if dt == "bf16" else []):
        CLASSES.append(("reduce", dict(op=op, shape=(100, 300), dtype=dt, axes=[1],
                                       keepdims=True, vmem_budget_bytes=40000)))
# No i1 kernels: libtpu takes no bool operands in a tpu_custom_call ("Only
# arguments with ... bfloat16 or 32-bit element types are supported"; a
# bool cummax even aborts the process), so tessera.jax converts bools to
# int32 around the call (docs/kernels.md).
for op in ["sum", "prod", "max", "min"]:
    for shape, axis in [((100, 300), 1), ((100, 300), 0), ((5, 40, 130), 0)]:
        for reverse in (False, True):
            CLASSES.append(("cumulative", dict(op=op, shape=shape, dtype="f32", axis=axis,
                                               reverse=reverse, vmem_budget_bytes=20000)))
for dt in ["bf16", "i32", "u32", "i16", "u16", "i8", "u8"]:
    CLASSES.append(("cumulative", dict(op="sum", shape=(64, 300), dtype=dt, axis=1)))
# Rank 1: Mosaic has no 1-D tpu.iota ("iota rank below 2D unsupported") nor
# 1-D index reduction; tessera emits them on (1, n) blocks.
for op, dt in [("sum", "f32"), ("max", "i32"), ("min", "bf16")]:
    CLASSES.append(("cumulative", dict(op=op, shape=(1000,), dtype=dt, axis=0)))
for op, dt in [("argmax", "f32"), ("argmin", "bf16"), ("argmax", "i32"), ("argmin", "u16")]:
    CLASSES.append(("reduce", dict(op=op, shape=(1000,), dtype=dt, axes=[0], keepdims=True)))


def _id(entry: str, p: dict) -> str:
    where = p.get("axes", p.get("axis"))
    extra = "-rev" if p.get("reverse") else ""
    return f"{entry}-{p['op']}-{p['dtype']}-{'x'.join(map(str, p['shape']))}-{where}{extra}"


CELLS = [(e, p, c) for e, p in CLASSES for c in CHIPS]


@pytest.mark.parametrize("entry,params,chip", CELLS,
                         ids=[f"{_id(e, p)}-{c}" for e, p, c in CELLS])
def test_library_kernel_compiles_for_chip(entry, params, chip):
    outcome = P.prove_library(entry, params, chip)
    assert outcome.stage == "ok", f"fails at {outcome.stage}:\n{outcome.message[:2000]}"


@pytest.mark.parametrize("chip", CHIPS)
def test_f16_stops_at_emission_naming_the_operand(chip):
    # libtpu takes no f16 kernel operand ("Only arguments with ... bfloat16
    # or 32-bit element types are supported")
    for entry, params in [("reduce", dict(op="sum", shape=(64, 256), dtype="f16", axes=[1])),
                          ("cumulative", dict(op="sum", shape=(64, 256), dtype="f16"))]:
        outcome = P.prove_library(entry, params, chip)
        assert outcome.stage == "emit" and "in '%x': an f16 operand" in outcome.message, outcome


def test_jax_reduce_exports_and_compiles_for_v6e():
    """tessera.jax.reduce under jax.jit, exported for TPU, then compiled."""
    import jax
    import jax.numpy as jnp
    import tessera.jax as tj
    from tessera.jax import _jax_internal as ji
    x = jax.ShapeDtypeStruct((512, 1000), jnp.float32)
    f = jax.jit(lambda x: tj.reduce(x, "logsumexp", axis=1, chip="v6e")
                + tj.cumsum(x, axis=1, chip="v6e")[:, -1]
                + tj.reduce(x > 0, "max", axis=1, chip="v6e"))
    ji.compile_for_device(f, (x,), ji.tpu_device("v6e"))
