#!/usr/bin/env python3
"""tessera's example kernels, written in Pallas
(python/tests/pallas_kernels/), under JAX's TPU interpret mode
(`interpret=pltpu.InterpretParams()`), JAX's HLO interpreter
(`interpret=True`) and tessera (`tessera.jax.pallas_call`, backends interp
and cpu); cold and warm. Prints a markdown table (milliseconds).

* cold: the first call in a fresh subprocess (`jax.jit` of the kernel: trace,
  translate or lower, compile, run), measured inside that process after its
  imports; the imports (jax, tessera) are reported once in a note.
* warm: in this process, the same jitted function called again, the median
  of --repeat calls after one untimed call.

    PYTHONPATH=python TESSERA_LIBRARY=build/libtessera.so JAX_PLATFORMS=cpu \\
        python bench/python/bench_jax.py [--repeat 10] [--kernel add ...]

Without tessera.jax the tessera columns print "n/a". Speed is measured here,
never asserted in tests.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.normpath(os.path.join(HERE, "..", "..", "python", "tests"))

MODES = {
    "jax-tpu": "JAX TPU interpret",
    "jax-hlo": "JAX interpret=True",
    "tessera-interp": "tessera interp",
    "tessera-cpu": "tessera cpu",
}


def _setup_path():
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    if TESTS not in sys.path:
        sys.path.insert(0, TESTS)


def pallas_call_for(mode: str, options: dict):
    """The pallas_call of a mode, or None if tessera.jax is missing."""
    from pallas_kernels import _harness as H

    if mode == "jax-tpu":
        return H.jax_tpu_interpret(**options)
    if mode == "jax-hlo":
        return H.jax_hlo_interpret(**options)
    backend = mode.split("-", 1)[1]
    return H.tessera_call(backend, for_test=False, **options)


def jitted(case: str, mode: str):
    """(jitted kernel function, device inputs), or None without a bridge."""
    import jax

    import pallas_kernels as pk
    from pallas_kernels import _pdiff as D

    fn, inputs = pk.build(case)
    pc = pallas_call_for(mode, D.case_options(case))
    if pc is None:
        return None
    return jax.jit(functools.partial(fn, pc)), tuple(
        jax.device_put(x) for x in inputs)


def child(case: str, mode: str) -> dict:
    """Runs in a fresh process: imports, then one first call."""
    t0 = time.perf_counter()
    _setup_path()
    import jax  # noqa: F401

    t_jax = time.perf_counter() - t0
    from pallas_kernels import _harness as H

    t1 = time.perf_counter()
    have_bridge = H.bridge_module(for_test=False) is not None
    t_tessera = time.perf_counter() - t1
    made = jitted(case, mode)
    if made is None:
        return {"first_ms": None, "import_jax_ms": t_jax * 1e3}
    f, inputs = made
    t2 = time.perf_counter()
    jax.block_until_ready(f(*inputs))
    first = time.perf_counter() - t2
    return {"first_ms": first * 1e3, "import_jax_ms": t_jax * 1e3,
            "import_tessera_ms": t_tessera * 1e3 if have_bridge else None}


def cold(case: str, mode: str) -> dict:
    proc = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--child", case, mode],
        capture_output=True, text=True, timeout=1800,
        env=dict(os.environ, JAX_PLATFORMS="cpu"))
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["?"])[-1]
        return {"first_ms": None, "error": tail[:120]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def warm(case: str, mode: str, repeat: int) -> float | None:
    import jax

    made = jitted(case, mode)
    if made is None:
        return None
    f, inputs = made
    jax.block_until_ready(f(*inputs))
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        jax.block_until_ready(f(*inputs))
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


#: the speedup over interpret=True the issue asks of each backend
GOALS = {"tessera-interp": 1.0, "tessera-cpu": 1.5}


def json_figures(cases: list[str], modes: list[str], repeat: int) -> int:
    """--json: per kernel and tessera mode, its warm time and interpret=True's,
    measured alternately (each side `repeat` calls per round, 3 rounds;
    the medians of the rounds' medians)."""
    from pallas_kernels import _harness as H

    have_bridge = H.bridge_module(for_test=False) is not None
    for case in cases:
        for m in modes:
            t = a = None
            if have_bridge:
                ts, as_ = [], []
                try:
                    for _ in range(3):
                        ts.append(warm(case, m, repeat))
                        as_.append(warm(case, "jax-hlo", repeat))
                    t, a = statistics.median(ts), statistics.median(as_)
                except Exception as exc:  # noqa: BLE001 - the figure is then null
                    print(f"bench_jax: {case} / {MODES[m]}: {exc}"[:200], file=sys.stderr)
                    t = None
            if a is None:
                a = warm(case, "jax-hlo", repeat)
            backend = m.split("-", 1)[1]
            with open("/proc/loadavg") as f:
                load = " ".join(f.read().split()[:3])
            print(json.dumps({
                "figure": f"{backend}-vs-hlo/{case}",
                "label": f"{case} warm: tessera {backend} vs JAX interpret=True",
                "unit": "ms", "tessera": None if t is None else round(t, 4),
                "anchor": round(a, 4), "anchor_name": "JAX interpret=True",
                "goal": GOALS[m], "load": load}), flush=True)
    return 0


def _fmt(ms: float | None, err: str | None = None) -> str:
    if ms is None:
        return "error" if err else "n/a"
    return f"{ms:.3g}" if ms < 100 else f"{ms:.0f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernel", action="append", default=[])
    parser.add_argument("--mode", action="append", default=[],
                        choices=list(MODES))
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--no-cold", action="store_true")
    parser.add_argument("--json", action="store_true",
                        help="one JSON object per line per figure (bench/table.py): "
                             "each tessera mode's warm time against interpret=True")
    parser.add_argument("--quick", action="store_true", help="3 warm calls, no cold")
    parser.add_argument("--child", nargs=2, metavar=("CASE", "MODE"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(*args.child)))
        return 0
    _setup_path()
    import pallas_kernels as pk

    cases = args.kernel or list(pk.EXAMPLES)
    modes = args.mode or list(MODES)
    if args.quick:
        args.repeat, args.no_cold = 3, True
    if args.json:
        return json_figures(cases, [m for m in modes if m.startswith("tessera")] or
                            ["tessera-interp", "tessera-cpu"], args.repeat)
    head = ["kernel"]
    for m in modes:
        if not args.no_cold:
            head.append(f"{MODES[m]} cold")
        head.append(f"{MODES[m]} warm")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    notes = {}
    from pallas_kernels import _harness as H

    have_bridge = H.bridge_module(for_test=False) is not None
    for case in cases:
        cells = [case]
        for m in modes:
            if m.startswith("tessera") and not have_bridge:
                cells += ["n/a"] * (1 if args.no_cold else 2)
                continue
            if not args.no_cold:
                c = cold(case, m)
                cells.append(_fmt(c.get("first_ms"), c.get("error")))
                if c.get("error"):
                    notes[(case, m)] = c["error"]
                for k in ("import_jax_ms", "import_tessera_ms"):
                    if c.get(k) is not None:
                        notes.setdefault(k, []).append(c[k])
            try:
                cells.append(_fmt(warm(case, m, args.repeat)))
            except Exception as exc:  # noqa: BLE001 - reported in the table
                cells.append("error")
                notes[(case, m)] = f"{type(exc).__name__}: {exc}"[:120]
                if m == "jax-tpu":
                    from pallas_kernels import _harness as H
                    H.reset_jax_interpret_state()
        print("| " + " | ".join(cells) + " |", flush=True)
    print()
    print(f"Milliseconds. Warm: median of {args.repeat} calls of the jitted "
          "kernel after one untimed call. Cold: the first call in a fresh "
          "process, after its imports.")
    for k in ("import_jax_ms", "import_tessera_ms"):
        if k in notes:
            print(f"{k.replace('_ms', '').replace('_', ' ')} in the cold "
                  f"processes: median {statistics.median(notes[k]):.0f} ms.")
    for key, err in notes.items():
        if isinstance(key, tuple):
            print(f"- {key[0]} / {MODES[key[1]]}: {err}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
