#!/usr/bin/env python3
"""The kernels jax ships under `jax.experimental.pallas.ops.tpu`, at small
shapes, under JAX's TPU interpret mode (the oracle) and through tessera.

For each kernel: does JAX's TPU interpret mode run it on CPU (and agree with
the kernel's own pure-JAX reference where jax ships one), and does tessera
translate it and match the oracle; when it does not, the first line of
tessera's error (which names the missing feature). Prints the markdown table
of docs/jax.md, "Shipped kernels".

    PYTHONPATH=python TESSERA_LIBRARY=build/libtessera.so JAX_PLATFORMS=cpu \\
        python python/tests/survey_shipped.py [--only NAME ...] \\
        [--backend interp --backend cpu] [--json]

The kernels run unchanged: the oracle under
`pltpu.force_tpu_interpret_mode(InterpretParams())`, tessera under the
bridge's context manager `tessera.jax.interpret(backend=...)` (or, if the
bridge has none, with `pl.pallas_call` replaced by `tessera.jax.pallas_call`
for the duration). jax's caches are cleared between the two, so a jitted
wrapper is traced again. all_gather needs 4 devices: the script asks XLA for
4 CPU devices (XLA_FLAGS) before it imports jax.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib
import json
import os
import re
import sys
import traceback
from collections.abc import Callable
from typing import Any

if __name__ == "__main__":
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_force_host_platform_device_count" not in flags:
        os.environ["XLA_FLAGS"] = (
            flags + " --xla_force_host_platform_device_count=4").strip()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

from pallas_kernels import _harness as H  # noqa: E402

#: attention outputs (softmax-weighted sums of 128-256 terms, exp in XLA
#: vs libm): docs/jax.md, "Validated against JAX".
ATTENTION_TOL = ("close", 1e-5, 1e-5)
DOT_TOL = ("close", 1e-5, 1e-4)


@dataclasses.dataclass
class Shipped:
    """One shipped kernel at small shapes."""

    name: str        # as in the table
    module: str      # under jax.experimental.pallas.ops.tpu
    make: Callable[[], tuple[Callable, tuple, Callable | None]]
    # make() -> (run(*inputs) calling the shipped API, inputs, reference or
    # None: a pure-JAX function of the inputs jax ships beside the kernel)
    tolerance: Any = "exact"
    devices: int = 1
    #: InterpretParams of the oracle (default: JAX's defaults)
    jax_params: dict = dataclasses.field(default_factory=dict)
    #: JAX's result vs jax's own reference (a sanity check of the oracle,
    #: not of numerics): default `tolerance`
    ref_tolerance: Any = None


def _rng(seed):
    return np.random.default_rng(seed)


def _double():
    from jax.experimental.pallas.ops.tpu import example_kernel

    x = _rng(0).standard_normal((8, 128), dtype=np.float32)
    return example_kernel.double, (x,), lambda x: x * 2


def _matmul():
    import jax.numpy as jnp
    from jax.experimental.pallas.ops.tpu import matmul

    r = _rng(1)
    x = r.standard_normal((256, 256), dtype=np.float32)
    y = r.standard_normal((256, 256), dtype=np.float32)

    def run(x, y):
        return matmul.matmul(x, y, block_shape=(128, 128), block_k=128)

    return run, (x, y), lambda x, y: jnp.dot(
        x, y, precision="highest")


def _flash(causal: bool, grad: bool = False):
    def make():
        import jax
        from jax.experimental.pallas.ops.tpu import flash_attention as fa

        r = _rng(2)
        shape = (1, 2, 128, 64)
        q, k, v = (r.standard_normal(shape, dtype=np.float32) for _ in range(3))
        bs = fa.BlockSizes.get_default(1, 2, 128, 128, 64)

        def fwd(q, k, v):
            return fa.flash_attention(q, k, v, causal=causal, block_sizes=bs)

        def ref(q, k, v):
            return fa.mha_reference(q, k, v, None, causal=causal)

        if not grad:
            return fwd, (q, k, v), ref

        def g(f):
            return lambda q, k, v: jax.grad(
                lambda q, k, v: (f(q, k, v) ** 2).sum(), argnums=(0, 1, 2))(
                    q, k, v)

        return g(fwd), (q, k, v), g(ref)
    return make


def _gmm():
    import jax.numpy as jnp
    gmm_mod = importlib.import_module(   # megablox.gmm is also a function
        "jax.experimental.pallas.ops.tpu.megablox.gmm")

    r = _rng(3)
    lhs = r.standard_normal((256, 128), dtype=np.float32)
    rhs = r.standard_normal((2, 128, 128), dtype=np.float32)
    sizes = np.array([96, 160], np.int32)

    def run(lhs, rhs, sizes):
        return gmm_mod.gmm(lhs, rhs, sizes, tiling=(128, 128, 128))

    def ref(lhs, rhs, sizes):
        ends = np.cumsum(sizes)
        starts = ends - sizes
        return jnp.concatenate([
            jnp.dot(lhs[s:e], rhs[g], precision="highest")
            for g, (s, e) in enumerate(zip(starts, ends))])

    return run, (lhs, rhs, sizes), ref


def _tgmm():
    import jax.numpy as jnp
    gmm_mod = importlib.import_module(   # megablox.gmm is also a function
        "jax.experimental.pallas.ops.tpu.megablox.gmm")

    r = _rng(4)
    lhs = r.standard_normal((128, 256), dtype=np.float32)   # [k, m]
    rhs = r.standard_normal((256, 128), dtype=np.float32)   # [m, n]
    sizes = np.array([96, 160], np.int32)

    def run(lhs, rhs, sizes):
        return gmm_mod.tgmm(lhs, rhs, sizes, tiling=(128, 128, 128))

    def ref(lhs, rhs, sizes):
        ends = np.cumsum(sizes)
        starts = ends - sizes
        return jnp.stack([
            jnp.dot(lhs[:, s:e], rhs[s:e], precision="highest")
            for s, e in zip(starts, ends)])

    return run, (lhs, rhs, sizes), ref


def _paged():
    from jax.experimental.pallas.ops.tpu.paged_attention import (
        paged_attention_kernel as pa, util)

    r = _rng(5)
    batch, q_heads, kv_heads, head_dim = 2, 2, 1, 128
    pages, page_size, pages_per_seq = 8, 16, 4
    q = r.standard_normal((batch, q_heads, head_dim), dtype=np.float32)
    k_pages = r.standard_normal((kv_heads, pages, page_size, head_dim),
                                dtype=np.float32)
    v_pages = r.standard_normal((kv_heads, pages, page_size, head_dim),
                                dtype=np.float32)
    lengths = np.array([20, 57], np.int32)
    page_indices = r.permutation(pages).astype(np.int32).reshape(
        batch, pages_per_seq)

    def run(q, k_pages, v_pages, lengths, page_indices):
        return pa.paged_attention(q, k_pages, v_pages, lengths, page_indices,
                                  pages_per_compute_block=2)

    def ref(q, k_pages, v_pages, lengths, page_indices):
        k = k_pages[:, page_indices].transpose(1, 0, 2, 3, 4).reshape(
            batch, kv_heads, pages_per_seq * page_size, head_dim)
        v = v_pages[:, page_indices].transpose(1, 0, 2, 3, 4).reshape(
            batch, kv_heads, pages_per_seq * page_size, head_dim)
        return util.grouped_query_attention_reference(q, k, v, lengths)

    return run, (q, k_pages, v_pages, lengths, page_indices), ref


def _ragged_paged(dtype=np.float32):
    from jax.experimental.pallas.ops.tpu.ragged_paged_attention import kernel as rpa
    import ml_dtypes

    dtype = np.dtype(ml_dtypes.bfloat16 if dtype == "bf16" else dtype)
    r = _rng(6)
    q_heads, kv_heads, head_dim = 2, 1, 128
    pages, page_size, pages_per_seq = 8, 16, 4
    cu_q_lens = np.array([0, 5, 16], np.int32)       # 2 sequences, 16 tokens
    kv_lens = np.array([30, 50], np.int32)
    q = r.standard_normal((16, q_heads, head_dim), dtype=np.float32).astype(dtype)
    kv_pages = r.standard_normal((pages, page_size, 2 * kv_heads, head_dim),
                                 dtype=np.float32).astype(dtype)
    page_indices = r.permutation(pages).astype(np.int32).reshape(2, pages_per_seq)
    num_seqs = np.array([2], np.int32)
    args = (q, kv_pages, kv_lens, page_indices, cu_q_lens, num_seqs)

    def run(*a):
        return rpa.ragged_paged_attention(*a, num_kv_pages_per_block=2,
                                          num_queries_per_block=8)

    return run, args, rpa.ref_ragged_paged_attention


def _splash():
    from jax.experimental.pallas.ops.tpu.splash_attention import (
        splash_attention_kernel as sk, splash_attention_mask as sm)

    r = _rng(7)
    heads, seq, head_dim = 2, 256, 128
    q, k, v = (r.standard_normal((heads, seq, head_dim), dtype=np.float32)
               for _ in range(3))
    mask = sm.MultiHeadMask([sm.CausalMask((seq, seq))] * heads)
    bs = sk.BlockSizes(block_q=128, block_kv=128, block_kv_compute=128)
    kernel = sk.make_splash_mha(mask, block_sizes=bs, head_shards=1,
                                q_seq_shards=1)

    def ref(q, k, v):
        import jax
        import jax.numpy as jnp

        s = jnp.einsum("hqd,hkd->hqk", q, k, precision="highest")
        causal = np.tril(np.ones((seq, seq), bool))
        s = jnp.where(causal, s, -1e30)
        return jnp.einsum("hqk,hkd->hqd", jax.nn.softmax(s, axis=-1), v,
                          precision="highest")

    return kernel, (q, k, v), ref


def _philox():
    from jax.experimental.pallas.ops.tpu.random import philox

    key = np.array([0x12345678, 0x9ABCDEF0], np.uint32)
    return (lambda key: philox.philox_random_bits(key, 32, (16, 256))), \
        (key,), None


def _threefry():
    from jax.experimental.pallas.ops.tpu.random import threefry

    key = np.array([0x12345678, 0x9ABCDEF0], np.uint32)

    def ref(key):
        import jax

        return jax.random.bits(jax.random.wrap_key_data(key, impl="threefry2x32"),
                               (16, 256), "uint32")

    return (lambda key: threefry.plthreefry_random_bits(key, 32, (16, 256))), \
        (key,), ref


def _all_gather():
    import jax
    from jax.experimental.pallas.ops.tpu import all_gather

    n = 4
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:n]), ("x",))
    x = _rng(8).standard_normal((n * 8, 128), dtype=np.float32)

    def run(x):
        return all_gather.all_gather(x, mesh=mesh, axis_name="x")

    return run, (x,), lambda x: x


SHIPPED: dict[str, Shipped] = {s.name: s for s in [
    Shipped("example_kernel.double", "example_kernel", _double),
    Shipped("matmul", "matmul", _matmul, DOT_TOL),
    Shipped("flash_attention", "flash_attention", _flash(False), ATTENTION_TOL),
    Shipped("flash_attention causal", "flash_attention", _flash(True),
            ATTENTION_TOL),
    Shipped("flash_attention bwd (dq, dkv)", "flash_attention",
            _flash(True, grad=True), ("close", 1e-4, 1e-4)),
    Shipped("megablox gmm", "megablox.gmm", _gmm, DOT_TOL),
    Shipped("megablox tgmm", "megablox.gmm", _tgmm, DOT_TOL),
    # JAX's result is within 1e-2 of util.grouped_query_attention_reference
    # (bf16-like differences), not 1e-5
    Shipped("paged_attention", "paged_attention", _paged, ATTENTION_TOL,
            ref_tolerance=("close", 1e-2, 1e-2)),
    # JAX's TPU interpret mode cannot run it (ref reshape views): tessera is
    # compared with ref_ragged_paged_attention instead
    Shipped("ragged_paged_attention", "ragged_paged_attention",
            _ragged_paged, ATTENTION_TOL, ref_tolerance=("close", 1e-4, 1e-4)),
    # bf16 K/V pages are read two rows at a time through the ref's bitcast
    # to u32 (`strided_load_kv`); bf16 outputs: within 2 bf16 ulps of 1
    Shipped("ragged_paged_attention bf16", "ragged_paged_attention",
            lambda: _ragged_paged("bf16"), ATTENTION_TOL,
            ref_tolerance=("close", 2e-2, 2e-2)),
    Shipped("splash_attention (mha, causal)", "splash_attention", _splash,
            ATTENTION_TOL),
    Shipped("random philox", "random.philox", _philox),
    Shipped("random threefry", "random.threefry", _threefry),
    # JAX's default DMA mode (on_wait) leaves rows of the result NaN (never
    # copied) here: at a receiver's wait it completes the most recently
    # started DMA on that semaphore first, so a device forwards a slot whose
    # DMA is still pending (docs/jax.md); with eager DMAs it gathers
    # everything: the oracle is eager. tessera runs it on the 4 devices at once
    Shipped("all_gather (4 devices)", "all_gather", _all_gather, devices=4,
            jax_params={"dma_execution_mode": "eager"}),
]}


# --------------------------------------------------------------------------


def _as_tuple(out) -> tuple[np.ndarray, ...]:
    import jax

    out = jax.device_get(out)
    leaves = jax.tree_util.tree_leaves(out)
    return tuple(np.asarray(x) for x in leaves)


def _first_line(exc: BaseException, limit: int = 300) -> str:
    """The error's message; for an error raised inside a callback (whose
    message holds a traceback), the last "SomeError: ..." line of it."""
    text = f"{type(exc).__name__}: {exc}".strip().splitlines()
    inner = [ln.strip() for ln in text[1:]
             if re.match(r"\s*[A-Za-z_.]*(Error|Exception)\b", ln)]
    line = inner[-1] if inner else (text[0] if text else type(exc).__name__)
    return line if len(line) <= limit else line[:limit - 3] + "..."


def _feature(err: str) -> str:
    """A TranslationError's line as "what (file:line)", the file relative to
    jax's ops/tpu."""
    m = re.match(r"TranslationError: (\S+?):(\d+): (?:tessera\.jax: )?(.*)", err)
    if not m:
        return err
    path = re.sub(r".*/pallas/ops/tpu/", "", m.group(1))
    return f"{m.group(3)} ({path}:{m.group(2)})"


def jax_mode(**params):
    from jax.experimental.pallas import tpu as pltpu

    return pltpu.force_tpu_interpret_mode(pltpu.InterpretParams(**params))


@contextlib.contextmanager
def tessera_mode(backend: str):
    """Every pl.pallas_call inside runs through tessera."""
    tj = H.bridge_module(for_test=False)
    if tj is None:
        raise ImportError("tessera.jax is not importable")
    manager = getattr(tj, "interpret", None)
    if manager is not None:
        with manager(backend=backend):
            yield
        return
    from jax.experimental import pallas as pl

    original = pl.pallas_call

    def via_tessera(*args, interpret=None, **kwargs):
        del interpret
        return tj.pallas_call(*args, backend=backend, **kwargs)

    pl.pallas_call = via_tessera
    try:
        yield
    finally:
        pl.pallas_call = original


def run_under(shipped: Shipped, mode) -> tuple[tuple | None, str]:
    """(outputs or None, "" or the error's first line)."""
    import jax

    jax.clear_caches()
    try:
        run, inputs, _ = shipped.make()
        with mode:
            out = _as_tuple(run(*inputs))
        return out, ""
    except Exception as exc:  # noqa: BLE001 - reported in the table
        if os.environ.get("SURVEY_TRACEBACK"):
            traceback.print_exc()
        try:
            H.reset_jax_interpret_state()
        except Exception:  # noqa: BLE001
            pass
        return None, _first_line(exc)


def survey_one(shipped: Shipped, backends: list[str]) -> dict[str, Any]:
    """One row: JAX's status, and each tessera backend's."""
    import jax

    row: dict[str, Any] = {"name": shipped.name, "module": shipped.module}
    if shipped.devices > len(jax.devices()):
        row["jax"] = f"needs {shipped.devices} devices (run as a script)"
        return row
    want, err = run_under(shipped, jax_mode(**shipped.jax_params))
    if want is None:
        row["jax"] = "fails: " + err
    else:
        row["jax"] = "runs"
        _, inputs, ref = shipped.make()
        if ref is not None:
            try:
                ref_out = _as_tuple(ref(*inputs))
                H.assert_outputs_match(
                    tuple(o.astype(r.dtype) for o, r in zip(want, ref_out)),
                    ref_out, shipped.ref_tolerance or shipped.tolerance,
                    "JAX vs reference")
                row["jax"] = "runs, matches reference"
            except AssertionError as exc:
                row["jax"] = "runs, differs from reference: " + _first_line(exc)
            except Exception as exc:  # noqa: BLE001
                row["jax"] = "runs (reference failed: " + _first_line(exc) + ")"
    for backend in backends:
        if H.bridge_module(for_test=False) is None:
            row[backend] = "n/a (no tessera.jax)"
            continue
        got, err = run_under(shipped, tessera_mode(backend))
        if got is None:
            row[backend] = "missing feature: " + _feature(err)
        elif want is None:
            row[backend] = "translates (no oracle)"
            _, inputs, ref = shipped.make()
            if ref is not None:
                try:
                    ref_out = _as_tuple(ref(*inputs))
                    H.assert_outputs_match(
                        tuple(o.astype(r.dtype) for o, r in zip(got, ref_out)),
                        ref_out, shipped.ref_tolerance or shipped.tolerance,
                        "tessera vs reference")
                    row[backend] = "translates, matches reference (no oracle)"
                except AssertionError as exc:
                    row[backend] = ("translates, differs from reference (no "
                                    "oracle): " + _first_line(exc))
        else:
            try:
                H.assert_outputs_match(got, want, shipped.tolerance,
                                       "tessera vs JAX")
                row[backend] = "translates, matches"
            except AssertionError as exc:
                row[backend] = "translates, differs: " + _first_line(exc)
    return row


def markdown(rows: list[dict[str, Any]], backends: list[str]) -> str:
    head = ["kernel", "module (ops/tpu/...)", "JAX TPU interpret on CPU",
            *[f"tessera ({b})" for b in backends]]
    lines = ["| " + " | ".join(head) + " |",
             "|" + "---|" * len(head)]
    for row in rows:
        cells = [row["name"], f"`{row['module']}`", row.get("jax", ""),
                 *[row.get(b, "") for b in backends]]
        lines.append("| " + " | ".join(str(c).replace("|", "\\|")
                                        for c in cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", default=[],
                        help="a kernel name (repeatable)")
    parser.add_argument("--backend", action="append", default=[],
                        choices=["interp", "cpu"])
    parser.add_argument("--json", action="store_true",
                        help="print the rows as JSON instead of markdown")
    args = parser.parse_args(argv)
    backends = args.backend or ["interp", "cpu"]
    names = args.only or list(SHIPPED)
    rows = [survey_one(SHIPPED[n], backends) for n in names]
    print(json.dumps(rows, indent=1) if args.json else markdown(rows, backends))
    return 0


if __name__ == "__main__":
    sys.exit(main())
