#!/usr/bin/env python3
"""JAX's own TPU attention kernels (from the installed jax:
`jax.experimental.pallas.ops.tpu.flash_attention`, `splash_attention`,
`paged_attention`) at realistic shapes, warm, under JAX's HLO interpreter
(`interpret=True`, what XLA compiles), tessera's interpreter and cpu backend
(`tessera.jax.interpret(backend=...)`), and the same math written in jnp and
jitted by XLA ("plain XLA"). Prints a markdown table (milliseconds).

Every mode's jitted function is called once untimed (trace, translate,
compile), then the modes are called in turn, round after round (A/B
interleaved: the machine's load hits every mode alike), and each figure is
the median of its rounds. The load average is printed with every result.

    PYTHONPATH=python TESSERA_LIBRARY=build/libtessera.so JAX_PLATFORMS=cpu \\
        python bench/python/bench_attention.py [--rounds 7] [--kernel flash ...]
        [--mode cpu ...] [--quick] [--json]

--json prints one JSON object per line per figure (tessera cpu vs JAX
interpret=True, goal 1.5x faster; tessera cpu vs plain XLA, goal within 1.2x;
tessera interp vs JAX interpret=True, goal at least as fast), for
bench/table.py. Without tessera.jax the tessera figures are null. Speed is
measured here, never asserted in tests.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import statistics
import sys
import time

import numpy as np

MODES = {
    "hlo": "JAX interpret=True",
    "interp": "tessera interp",
    "cpu": "tessera cpu",
    "xla": "plain XLA (jnp, jitted)",
}


def _load() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


# --------------------------------------------------------------------------
# Modes: a context every call of the jitted kernel runs in


@contextlib.contextmanager
def _hlo_interpret():
    """Every pl.pallas_call made inside runs under interpret=True."""
    from jax.experimental import pallas as pl

    original = pl.pallas_call

    def forced(*args, interpret=None, **kwargs):
        del interpret
        return original(*args, interpret=True, **kwargs)

    pl.pallas_call = forced
    try:
        yield
    finally:
        pl.pallas_call = original


def _tessera_module():
    try:
        import tessera.jax as tj
        return tj
    except ImportError:
        return None


def mode_context(mode: str):
    if mode == "hlo":
        return _hlo_interpret()
    if mode in ("interp", "cpu"):
        tj = _tessera_module()
        if tj is None:
            return None
        return tj.interpret(backend=mode)
    return contextlib.nullcontext()


# --------------------------------------------------------------------------
# Kernels: (pallas function, inputs, plain jnp function)


def _rng(seed):
    return np.random.default_rng(seed)


def _causal_reference(q, k, v):
    import jax
    import jax.numpy as jnp

    s = jnp.einsum("...qd,...kd->...qk", q, k)
    n, m = s.shape[-2:]
    mask = jnp.arange(n)[:, None] >= jnp.arange(m)[None, :]
    s = jnp.where(mask, s, jnp.finfo(s.dtype).min)
    return jnp.einsum("...qk,...kd->...qd", jax.nn.softmax(s, axis=-1), v)


def flash(shape):
    def make():
        from jax.experimental.pallas.ops.tpu import flash_attention as fa

        r = _rng(1)
        q, k, v = (r.standard_normal(shape, dtype=np.float32) for _ in range(3))

        def run(q, k, v):
            return fa.flash_attention(q, k, v, causal=True)

        return run, (q, k, v), _causal_reference
    return make


def splash(heads, seq, head_dim):
    def make():
        from jax.experimental.pallas.ops.tpu.splash_attention import (
            splash_attention_kernel as sk, splash_attention_mask as sm)

        r = _rng(2)
        q, k, v = (r.standard_normal((heads, seq, head_dim), dtype=np.float32)
                   for _ in range(3))
        mask = sm.MultiHeadMask([sm.CausalMask((seq, seq))] * heads)
        bs = sk.BlockSizes(block_q=128, block_kv=128, block_kv_compute=128)
        kernel = sk.make_splash_mha(mask, block_sizes=bs, head_shards=1,
                                    q_seq_shards=1)
        return kernel, (q, k, v), _causal_reference
    return make


def paged(batch, heads, head_dim, page_size, tokens, pages_per_block):
    def make():
        import jax
        import jax.numpy as jnp
        from jax.experimental.pallas.ops.tpu.paged_attention import (
            paged_attention_kernel as pa)

        r = _rng(3)
        pages_per_seq = tokens // page_size
        pages = batch * pages_per_seq
        q = r.standard_normal((batch, heads, head_dim), dtype=np.float32)
        k_pages = r.standard_normal((heads, pages, page_size, head_dim),
                                    dtype=np.float32)
        v_pages = r.standard_normal((heads, pages, page_size, head_dim),
                                    dtype=np.float32)
        lengths = r.integers(tokens * 3 // 4, tokens + 1, batch).astype(np.int32)
        page_indices = r.permutation(pages).astype(np.int32).reshape(
            batch, pages_per_seq)

        def run(q, k_pages, v_pages, lengths, page_indices):
            return pa.paged_attention(q, k_pages, v_pages, lengths,
                                      page_indices,
                                      pages_per_compute_block=pages_per_block)

        def ref(q, k_pages, v_pages, lengths, page_indices):
            # [heads, batch, pages_per_seq, page, d] -> [batch, heads, t, d]
            k = k_pages[:, page_indices].transpose(1, 0, 2, 3, 4).reshape(
                batch, heads, tokens, head_dim)
            v = v_pages[:, page_indices].transpose(1, 0, 2, 3, 4).reshape(
                batch, heads, tokens, head_dim)
            s = jnp.einsum("bhd,bhtd->bht", q, k)
            valid = jnp.arange(tokens)[None, None, :] < lengths[:, None, None]
            s = jnp.where(valid, s, jnp.finfo(s.dtype).min)
            return jnp.einsum("bht,bhtd->bhd", jax.nn.softmax(s, axis=-1), v)

        return run, (q, k_pages, v_pages, lengths, page_indices), ref
    return make


#: name -> (label, maker); the first of each family is also in --quick
KERNELS = {
    "flash": ("flash fwd causal f32 [1,4,512,128]", flash((1, 4, 512, 128))),
    "flash-big": ("flash fwd causal f32 [1,8,1024,128]",
                  flash((1, 8, 1024, 128))),
    "splash": ("splash mha causal 4x512x512 d128", splash(4, 512, 128)),
    "paged": ("paged batch 8, 8 heads, d128, pages of 16, 1k tokens",
              paged(8, 8, 128, 16, 1024, 8)),
}
QUICK = ("flash", "splash", "paged")


# --------------------------------------------------------------------------


def prepare(kernel: str, mode: str):
    """(call(), first-call seconds), or None when the mode cannot run here."""
    import jax

    run, inputs, ref = KERNELS[kernel][1]()
    ctx = mode_context(mode)
    if ctx is None:
        return None
    fn = ref if mode == "xla" else run
    f = jax.jit(lambda *a: fn(*a))
    args = tuple(jax.device_put(x) for x in inputs)

    def call():
        with mode_context(mode):
            return jax.block_until_ready(f(*args))

    t = time.perf_counter()
    out = call()
    return call, time.perf_counter() - t, np.asarray(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernel", action="append", default=[],
                        choices=list(KERNELS))
    parser.add_argument("--mode", action="append", default=[],
                        choices=list(MODES),
                        help="modes to run (default all; a figure needs its "
                        "tessera mode and its anchor)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--quick", action="store_true",
                        help="3 rounds, the smaller shapes")
    parser.add_argument("--json", action="store_true",
                        help="one JSON object per figure per line")
    args = parser.parse_args(argv)
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    rounds = 3 if args.quick else args.rounds
    kernels = args.kernel or (list(QUICK) if args.quick else list(KERNELS))
    modes = [m for m in MODES if m in args.mode] if args.mode else list(MODES)
    if not args.json:
        import jax
        print(f"jax {jax.__version__}; {rounds} rounds; load {_load()}\n")
        print("| kernel | " + " | ".join(MODES[m] for m in modes)
              + " | load |")
        print("|---" * (len(modes) + 2) + "|")
    errors = []
    for kernel in kernels:
        calls, first, outs = {}, {}, {}
        for m in modes:
            try:
                made = prepare(kernel, m)
            except Exception as exc:  # noqa: BLE001 - reported
                errors.append(f"{kernel} / {MODES[m]}: "
                              f"{type(exc).__name__}: {exc}"[:300])
                continue
            if made is not None:
                calls[m], first[m], outs[m] = made
        times = {m: [] for m in calls}
        for _ in range(rounds):
            for m, call in calls.items():
                t = time.perf_counter()
                call()
                times[m].append(time.perf_counter() - t)
        med = {m: statistics.median(ts) * 1e3 for m, ts in times.items()}
        load = _load()
        if "hlo" in outs:
            for m in ("interp", "cpu"):
                if m in outs:
                    diff = float(np.max(np.abs(outs[m] - outs["hlo"])))
                    if not diff <= 1e-3:
                        errors.append(f"{kernel} / {MODES[m]}: differs from "
                                      f"interpret=True by {diff:g}")
        label = KERNELS[kernel][0]
        if args.json:
            figures = [("cpu", "hlo", 1.5), ("cpu", "xla", 0.833),
                       ("interp", "hlo", 1.0)]
            for tm, am, goal in figures:
                if am not in med or tm not in modes:
                    continue
                print(json.dumps({
                    "figure": f"attention/{kernel}/{tm}-vs-{am}",
                    "label": f"{label} warm: {MODES[tm]} vs {MODES[am]}",
                    "unit": "ms", "tessera": med.get(tm),
                    "anchor": med[am], "anchor_name": MODES[am],
                    "goal": goal, "load": load}), flush=True)
        else:
            cells = [f"{med[m]:.3g}" if m in med else "n/a" for m in modes]
            print(f"| {label} | " + " | ".join(cells) + f" | {load} |",
                  flush=True)
    if not args.json:
        print(f"\nMilliseconds, warm: median of {rounds} interleaved rounds "
              "after one untimed call.")
    for e in errors:
        print(f"- {e}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
