"""Cold cpu-backend compile time of the kernel library's kernel classes
(compile time against kernel size), for docs/benchmarks.md.
Each class's kernel is generated (tessera._library), written as .tsr, and
compiled once per repetition by `tessera run --backend cpu` with the disk
cache off and $TESSERA_LOWER_TIMING on. Printed per class: its ops, the
lowering total (min / median of the repetitions, ms, as the lowering
library reports it), the same per 10k ops, and the split parts. Run from
the source tree with the build in build/:

    TESSERA_LIBRARY=$PWD/build/libtessera.so PYTHONPATH=$PWD/python \\
        JAX_PLATFORMS=cpu .venv/bin/python bench/python/bench_compile_library.py [--reps N]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

from tessera import _library

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

#: (name, entry, parameters): one kernel of each class the library makes.
CLASSES = [
    ("sort network (8, 8192) f32", "sort",
     dict(shape=(8, 8192), dtypes=["f32"], target=_library.TARGETS["tpu"])),
    ("sort network (16, 2048) f32+i32, indices", "sort",
     dict(shape=(16, 2048), dtypes=["f32", "i32"], num_keys=1, return_indices=True,
          target=_library.TARGETS["tpu"])),
    ("sort network 128 f32", "sort", dict(shape=(128,), dtypes=["f32"],
                                          target=_library.TARGETS["tpu"])),
    ("sort multi-block (2, 40960) f32", "sort",
     dict(shape=(2, 40960), dtypes=["f32"], target=_library.TARGETS["tpu"])),
    ("top-16 of (128, 4096) f32 (slabs)", "topk", dict(shape=(128, 4096), dtype="f32", k=16)),
    ("top-8 of (64, 2048) i32 (slabs)", "topk", dict(shape=(64, 2048), dtype="i32", k=8)),
    ("top-32 of (16, 8192) f32", "topk", dict(shape=(16, 8192), dtype="f32", k=32)),
    ("top-16 of (4, 4096) f32", "topk", dict(shape=(4, 4096), dtype="f32", k=16)),
    ("top-300 of (8, 2048) f32 (columns)", "topk", dict(shape=(8, 2048), dtype="f32", k=300)),
    ("cumsum (256, 1024) f32 axis 1", "cumulative",
     dict(shape=(256, 1024), dtype="f32", axis=1, op="sum")),
    ("reduce sum (1024, 1024) f32 axes 0,1", "reduce",
     dict(shape=(1024, 1024), dtype="f32", axes=(0, 1), op="sum")),
]


def ops_of(text: str) -> int:
    return sum(1 for line in text.splitlines() if re.match(r"\s*%[\w.,% ]+ = ", line))


def compile_ms(tsr: str, tessera: str) -> tuple[float, str]:
    env = dict(os.environ, TESSERA_CACHE="off", TESSERA_LOWER_TIMING="1")
    with tempfile.TemporaryDirectory() as out:
        p = subprocess.run([tessera, "run", tsr, "--random-inputs", "1", "--backend", "cpu",
                            "--out-dir", out], env=env, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{tsr}: {p.stderr[-2000:]}")
    m = re.search(r"lower @\S+: .*total ([0-9.]+) ms(?:; (\d+ parts, \d+ of them merged))?",
                  p.stderr)
    if not m:
        raise RuntimeError(f"{tsr}: no timing line in {p.stderr[-2000:]}")
    return float(m.group(1)), m.group(2) or "not split"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--tessera", default=os.path.join(ROOT, "build", "tools", "tessera"))
    args = ap.parse_args()
    print("| class | ops | cold compile min / median ms | ms per 10k ops | parts |")
    print("|---|---:|---:|---:|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name, entry, params in CLASSES:
            try:
                k = _library.generate(entry, **params)
            except Exception as e:  # a class this build cannot make: say so
                print(f"| {name} | | {type(e).__name__}: {e} | | |")
                continue
            path = os.path.join(tmp, f"{entry}.tsr")
            with open(path, "w") as f:
                f.write(k.text)
            n = ops_of(k.text)
            times, parts = [], ""
            for _ in range(args.reps):
                t, parts = compile_ms(path, args.tessera)
                times.append(t)
            lo, med = min(times), statistics.median(times)
            print(f"| {name} | {n} | {lo:.0f} / {med:.0f} | {lo / n * 1e4:.0f} | {parts} |")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
