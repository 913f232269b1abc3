"""Random kernels of tests/lower/random_kernels.py on v5e and v6e: a kernel
tessera emits for TPU must parse, verify and compile with libtpu (the path
of tpu_proof.compile_mosaic, wrapped as tpu_call wraps it); a kernel it does
not emit must say why with located diagnostics (FILE:LINE:COL naming the op
or operand), and `tsr_tpu_check` (`tessera check --target tpu`) must refuse
it the same way. The seed set is fixed, so a failure names the kernel to
regenerate: `random_kernels.py --seed S --count N --out DIR`.

All kernels share this one process: libtpu starts once, and each compile
costs 40-150 ms; most kernels of random block shapes stop at emission
(Pallas's tiling rules refuse most), which costs well under a millisecond;
the kernels of TPU tiles (random_kernels.py --tpu-tiles) mostly compile.
"""

from __future__ import annotations

import os
import pathlib
import random
import re
import subprocess
import sys

import pytest

import tpu_proof as P

sys.path.insert(0, str(P.ROOT / "tests" / "lower"))
import random_kernels as RK  # noqa: E402

#: (seed, count): the kernels rand_SEED_I for I < count, of random block
#: shapes (most break Pallas's tiling rules) ...
SEEDS = ((1, 100), (2, 100), (3, 100), (4, 100))
#: ... and of block shapes TPUs can tile (random_kernels.py --tpu-tiles),
#: of which most emit and compile.
TILED_SEEDS = ((5, 100), (6, 100), (7, 100), (8, 100))
CHIPS = ("v5e", "v6e")

#: file:line:col: error: ... naming the op ("op 'x'") or the operand ("in '%x'").
LOCATED = re.compile(r"^\S+\.tsr:\d+:\d+: error: (op '\w+'|(in|out|scratch|operand) '%\w+'|"
                     r"kernel '@\w+')")


def _tessera_cli() -> str:
    cli = os.environ.get("TESSERA")
    if not cli:
        lib = os.environ.get("TESSERA_LIBRARY", "")
        cli = str(pathlib.Path(lib).resolve().parent / "tools" / "tessera") if lib else ""
    if not cli or not os.path.exists(cli):
        pytest.fail("the generator reads the op table from the tessera CLI: set $TESSERA, or "
                    "$TESSERA_LIBRARY to a build's libtessera.so with tools/tessera beside it",
                    pytrace=False)
    return cli


@pytest.fixture(scope="module")
def kernel_dir(tmp_path_factory):
    RK.load_ops(_tessera_cli())
    out = tmp_path_factory.mktemp("random_tpu")
    for seeds, tiled in ((SEEDS, False), (TILED_SEEDS, True)):
        for seed, count in seeds:
            for i in range(count):
                name = "rand_%d_%d" % (seed, i)
                rng = random.Random("%d/%d" % (seed, i))
                (out / (name + ".tsr")).write_text(RK.gen_kernel(rng, name, tpu_tiles=tiled))
    return out


def _names(seeds=SEEDS + TILED_SEEDS):
    return ["rand_%d_%d" % (seed, i) for seed, count in seeds for i in range(count)]


@pytest.mark.parametrize("chip", CHIPS)
def test_random_kernels_compile_or_are_refused_located(kernel_dir, chip):
    import tessera
    from tessera.jax import _jax_internal as ji
    from tessera.jax import _tpu
    failures = []
    emitted = refused = emitted_tiled = compiled = 0
    tiled = set(_names(TILED_SEEDS))
    refusals: dict[str, str] = {}
    for name in _names():
        path = kernel_dir / (name + ".tsr")
        k = tessera.Module.load(path)[name]
        try:
            text = k.to_mosaic(chip)
        except tessera.CompileError as e:
            refused += 1
            texts = [d.text for d in e.diagnostics]
            if not texts or not all(LOCATED.match(t) for t in texts):
                failures.append(f"{name}: refused without a located diagnostic: {texts or e}")
            refusals[str(path)] = texts[0] if texts else ""
            continue
        emitted += 1
        emitted_tiled += name in tiled
        call = _tpu.tpu_call(k, chip=chip, cpu="error")
        try:
            P.compile_mosaic(text, call.in_structs, call.out_structs, name, chip, call.aliases)
            stage, message = "ok", ""
        except ji.MosaicParseError as e:
            stage, message = "parse", str(e)
        except Exception as e:  # noqa: BLE001 - libtpu's errors have no common type
            stage, message = "compile", f"{type(e).__name__}: {e}"
        compiled += stage == "ok"
        if stage != "ok":
            failures.append(f"{name}: {'jaxlib' if stage == 'parse' else 'libtpu'} refuses "
                            f"it: {P._first_lines(message, 4)}")
    # `tessera check --target tpu` refuses each of them with the same error
    # (and accepts the others: it runs the emitter too).
    check = subprocess.run([_tessera_cli(), "check", "--target", "tpu", "--chip", chip, "-q",
                            *(str(kernel_dir / (n + ".tsr")) for n in _names())],
                           capture_output=True, text=True)
    said = set(check.stderr.splitlines())
    for path, first in refusals.items():
        if first not in said:
            failures.append(f"{path}: to_mosaic says {first!r}; check --target tpu does not")
    located_files = {line.split(":", 1)[0] for line in said if LOCATED.match(line)}
    extra = located_files - set(refusals)
    if extra:
        failures.append(f"check --target tpu refuses kernels that emit: {sorted(extra)}")
    print(f"{chip}: {emitted} emitted ({emitted_tiled} of TPU tiles), "
          f"{compiled} compiled, {refused} refused "
          f"with located errors, {len(failures)} failures")
    assert not failures, (f"{chip}: {len(failures)} of {len(_names())} random kernels "
                          f"(files in {kernel_dir}):\n" + "\n".join(failures))
    # The set exercises the compiler, not only the refusals.
    assert emitted >= 25, f"{chip}: only {emitted} random kernels emit"
    assert emitted_tiled >= 100, f"{chip}: only {emitted_tiled} kernels of TPU tiles emit"
