#!/usr/bin/env python3
"""tessera's Mosaic emission and libtpu's compile of it,
next to Pallas's own lowering and compile of the same kernel, per example
kernel (the ones python/tests/pallas_kernels rewrites in Pallas) and chip.
Prints a markdown table (milliseconds, the minimum of --repeat runs, in one
process after one untimed warm-up of libtpu):

* emit: `Kernel.to_mosaic(chip)` (tsr_tpu_emit through ctypes: the text);
* parse: jaxlib parses and verifies that text with the TPU dialect;
* lower: `jax.jit(tpu_call).trace(...).lower()` for the chip's device (the
  tpu_custom_call: mosaic-serde, bytecode, StableHLO); for Pallas, the
  same of the `pl.pallas_call` function (tracing the kernel's jaxpr and
  Pallas's Mosaic lowering);
* compile: `.compile()` of that lowered computation by libtpu.

    PYTHONPATH=python TESSERA_LIBRARY=build/libtessera.so JAX_PLATFORMS=cpu \\
        TPU_SKIP_MDS_QUERY=1 python bench/python/bench_tpu.py [--repeat 5] \\
        [--chip v5e --chip v6e] [--kernel add ...]

Needs libtpu (python/requirements-tpu.txt). Measured, never asserted.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python", "tests", "tpu"))
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")


def best(fn, repeat: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return min(times) * 1e3, out


def compile_ms(lower, repeat: int) -> float:
    """The minimum time of libtpu's compile of a freshly lowered computation
    (a Lowered keeps its compiled executable: each run lowers anew)."""
    times = []
    for _ in range(repeat):
        lowered = lower()
        start = time.perf_counter()
        lowered.compile()
        times.append(time.perf_counter() - start)
    return min(times) * 1e3


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--chip", action="append")
    ap.add_argument("--kernel", action="append")
    args = ap.parse_args()

    import jax
    from jax.experimental import pallas as pl
    from jax.sharding import SingleDeviceSharding

    import tpu_proof as P
    from tessera.jax import _jax_internal as ji
    from tessera.jax import _tpu

    chips = args.chip or ["v5e", "v6e"]
    cases = args.kernel or list(P.pallas_examples())
    start = time.perf_counter()
    ji.tpu_device(chips[0])
    print(f"first topology: {(time.perf_counter() - start) * 1e3:.0f} ms", file=sys.stderr)

    print("\n| kernel | chip | tessera emit | parse + verify | tessera lower | tessera "
          "compile | Pallas lower | Pallas compile |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    warmed = False
    for case in cases:
        mod, fn, inputs = P.pallas_case(case)
        _, kwargs = P.pallas_examples()[case]
        name = kwargs.get("kernel") or P._module(mod.SOURCE).kernels[0].name
        kernel = P.kernel(mod.SOURCE, name)
        for chip in chips:
            device = ji.tpu_device(chip)
            sharding = SingleDeviceSharding(device)
            emit_ms, text = best(lambda: kernel.to_mosaic(chip), max(args.repeat, 20))
            parse_ms, _ = best(lambda: ji.parse_mosaic(text), args.repeat)
            call = _tpu.tpu_call(kernel, chip=chip, cpu="error")
            structs = [jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=sharding)
                       for s in call.in_structs]
            pstructs = [jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=sharding)
                        for x in inputs]
            pallas_fn = functools.partial(fn, pl.pallas_call)

            def lower_tessera():
                # a new TpuCall each time: emission, parse, serde and wrapping
                # are all in the measurement, as for a first call
                c = _tpu.tpu_call(kernel, chip=chip, cpu="error")
                return jax.jit(lambda *a: c(*a)).trace(*structs).lower()

            def lower_pallas():
                return jax.jit(lambda *a: pallas_fn(*a)).trace(*pstructs).lower()

            if not warmed:
                t0 = time.perf_counter()
                lower_tessera().compile()
                print(f"first compile (libtpu's start): "
                      f"{(time.perf_counter() - t0) * 1e3:.0f} ms\n", file=sys.stderr)
                lower_pallas().compile()
                warmed = True
            tl_ms, _ = best(lower_tessera, args.repeat)
            tc_ms = compile_ms(lower_tessera, args.repeat)
            pl_ms, _ = best(lower_pallas, args.repeat)
            pc_ms = compile_ms(lower_pallas, args.repeat)
            print(f"| {case} | {chip} | {emit_ms:.3f} | {parse_ms:.2f} | {tl_ms:.1f} | "
                  f"{tc_ms:.1f} | {pl_ms:.1f} | {pc_ms:.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
