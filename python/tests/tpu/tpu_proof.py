"""The TPU proof (docs/tpu.md, "Proved with libtpu"):
tessera's Mosaic module of a kernel, parsed and verified by jaxlib's MLIR
with the TPU dialect, wrapped as a `tpu_custom_call` and compiled ahead of
time by libtpu for a TPU chip, without a TPU. Shared by the tests of this
directory, and a script:

    python python/tests/tpu/tpu_proof.py            # the table of every cell
    python python/tests/tpu/tpu_proof.py --compare  # tessera's module vs Pallas's

Run with JAX_PLATFORMS=cpu TPU_SKIP_MDS_QUERY=1 and TESSERA_LIBRARY set
(scripts/test.sh does). One process does every chip: libtpu starts once
(~0.5 s, ~420 MB), each compile then costs 40-120 ms.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import importlib.util
import os
import pathlib
import re
import sys
import time
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[3]
TESTS = ROOT / "python" / "tests"
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

#: Where scripts/setup.sh installs libtpu: a directory of the environment of
#: its own, not site-packages. JAX that can import libtpu starts a TPU backend
#: at its first use, and on a machine without a TPU libtpu prints errors
#: there, in every program of the environment; so only the TPU proofs (and
#: scripts that import this module) see libtpu, with JAX_PLATFORMS=cpu.
LIBTPU_DIR = pathlib.Path(sys.prefix) / "libtpu"


def use_libtpu() -> None:
    """Makes libtpu importable for JAX's deviceless TPU compile
    (`jax.experimental.topologies`, which imports `libtpu` to find
    libtpu.so): LIBTPU_DIR goes on sys.path, unless libtpu is importable
    already (installed in site-packages, or on PYTHONPATH)."""
    if importlib.util.find_spec("libtpu") is None and LIBTPU_DIR.is_dir() \
            and str(LIBTPU_DIR) not in sys.path:
        sys.path.append(str(LIBTPU_DIR))
        importlib.invalidate_caches()


use_libtpu()

#: The chips every kernel is compiled for (tessera's chip names; libtpu's
#: topologies: tessera.jax._jax_internal.TPU_TOPOLOGIES).
CHIPS = ("v5e", "v6e", "v4", "v5p", "v7x")

#: The correct kernels of the tree.
KERNEL_DIRS = ("kernels/examples", "tests/diagnostics/ok")

DOC = ROOT / "docs" / "tpu.md"
TABLE_HEADING = "### Kernels not proved"


def kernel_files() -> list[str]:
    return sorted(str(p.relative_to(ROOT)) for d in KERNEL_DIRS
                  for p in (ROOT / d).glob("*.tsr"))


@functools.cache
def _module(path: str):
    import tessera
    return tessera.Module.load(ROOT / path)


def kernels() -> list[tuple[str, str]]:
    """(file, kernel name) of every correct kernel of the tree."""
    return [(f, k.name) for f in kernel_files() for k in _module(f).kernels]


def kernel(path: str, name: str):
    return _module(path)[name]


def cell_id(path: str, name: str, chip: str) -> str:
    return f"{pathlib.Path(path).name}@{name}-{chip}"


@dataclasses.dataclass
class Outcome:
    """One cell: `stage` is "ok" or where it failed ("emit": tessera's
    emitter; "parse": jaxlib's parser/verifier; "compile": libtpu), with the
    message; the times in seconds."""
    stage: str
    message: str = ""
    emit_s: float = 0.0
    compile_s: float = 0.0


def _first_lines(text: str, n: int = 6) -> str:
    lines = [line for line in str(text).splitlines() if line.strip()]
    return "\n".join(lines[:n])


def compile_mosaic(text: str, in_structs, out_structs, name: str, chip: str,
                   aliases=(), bounds=()) -> float:
    """Parses + verifies Mosaic `text`, wraps it as a tpu_custom_call and
    compiles it with libtpu for `chip`; returns the compile's seconds.
    `bounds`: the input indices of dynamic grid extents (TpuCall.bounds),
    passed first, as tpu_call does (docs/tpu.md, "Dynamic grids").
    Raises MosaicParseError (parse) or libtpu's error (compile)."""
    from tessera.jax import _jax_internal as ji
    module = ji.parse_mosaic(text)
    n = len(bounds)
    call = ji.mosaic_kernel(module, tuple(out_structs), kernel_name=name,
                            input_output_aliases=tuple((i + n, j) for i, j in aliases))
    device = ji.tpu_device(chip)
    start = time.perf_counter()
    ji.compile_for_device(lambda *a: call(*[a[i] for i in bounds], *a), in_structs, device)
    return time.perf_counter() - start


def prove(path: str, name: str, chip: str) -> Outcome:
    """Emits, parses, verifies and compiles one kernel for one chip."""
    import tessera
    from tessera.jax import _jax_internal as ji
    from tessera.jax import _tpu
    k = kernel(path, name)
    start = time.perf_counter()
    try:
        text = k.to_mosaic(chip)
    except tessera.CompileError as e:
        return Outcome("emit", _first_lines(
            "\n".join(d.text for d in e.diagnostics) or str(e)))
    emit_s = time.perf_counter() - start
    call = _tpu.tpu_call(k, chip=chip, cpu="error")
    try:
        compile_s = compile_mosaic(text, call.in_structs, call.out_structs, name, chip,
                                   call.aliases, call.bounds)
    except ji.MosaicParseError as e:
        return Outcome("parse", _first_lines(e), emit_s)
    except Exception as e:  # noqa: BLE001 - libtpu's errors have no common type
        return Outcome("compile", _first_lines(f"{type(e).__name__}: {e}"), emit_s)
    return Outcome("ok", "", emit_s, compile_s)


def prove_library(entry: str, params: dict, chip: str) -> Outcome:
    """Generates the kernel library's `entry` kernel with `params`
    (tessera._library.generate), then emits, parses, verifies and compiles
    it for one chip. An emitter's failure carries its diagnostics' text."""
    import tessera
    from tessera import _library
    from tessera.jax import _jax_internal as ji
    from tessera.jax import _tpu
    k = _library.generate(entry, **params)
    start = time.perf_counter()
    try:
        text = k.to_mosaic(chip)
    except tessera.CompileError as e:
        return Outcome("emit", "\n".join(d.text for d in e.diagnostics) or str(e))
    emit_s = time.perf_counter() - start
    call = _tpu.tpu_call(k, chip=chip, cpu="error")
    try:
        compile_s = compile_mosaic(text, call.in_structs, call.out_structs, k.name, chip,
                                   call.aliases, call.bounds)
    except ji.MosaicParseError as e:
        return Outcome("parse", str(e), emit_s)
    except Exception as e:  # noqa: BLE001 - libtpu's errors have no common type
        return Outcome("compile", f"{type(e).__name__}: {e}", emit_s)
    return Outcome("ok", "", emit_s, compile_s)


# ---- The table of docs/tpu.md ------------------------------------------------------


@dataclasses.dataclass
class Row:
    file: str
    kernel: str
    chips: tuple[str, ...]   # CHIPS for "all"
    stage: str
    reason: str              # a substring of the failure's message


def report(cases, prove, chips) -> None:
    """Prints each library case's outcome per chip (a test file's __main__)."""
    import sys
    for name in sorted(cases):
        for chip in chips:
            o = prove(name, chip)
            print(f"{name:28} {chip} {o.stage:8} {o.compile_s:6.3f} {o.message[:300]!r}")
            sys.stdout.flush()


def table() -> list[Row]:
    """The rows of docs/tpu.md's table of kernels not proved:
    | `file` | `@kernel` | chips (all, or v5e, v6e) | stage | `reason` | why |"""
    text = DOC.read_text()
    at = text.find(TABLE_HEADING)
    if at < 0:
        raise AssertionError(f"{DOC}: no '{TABLE_HEADING}' section")
    rows: list[Row] = []
    for line in text[at:].splitlines()[1:]:
        if line.startswith("#"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cells) < 5 or set(cells[0]) <= {"-", ":"} \
                or cells[0] == "file":
            continue
        chips = tuple(CHIPS) if cells[2] == "all" else tuple(
            c.strip() for c in cells[2].split(","))
        rows.append(Row(cells[0].strip("`"), cells[1].strip("`").lstrip("@"), chips,
                        cells[3], cells[4].strip("`")))
    return rows


def expected(path: str, name: str, chip: str) -> Row | None:
    for row in table():
        if row.file == path and row.kernel == name and chip in row.chips:
            return row
    return None


# ---- Pallas's modules ------------------------------------------------------------------


def pallas_examples() -> dict[str, tuple[str, dict]]:
    from pallas_kernels import EXAMPLES
    return dict(EXAMPLES)


def pallas_case(case: str):
    """(module, fn, inputs) of one of pallas_kernels.ALL (EXAMPLES,
    PRIMITIVES, ...)."""
    from pallas_kernels import ALL
    mod_name, kwargs = ALL[case]
    mod = importlib.import_module(f"pallas_kernels.{mod_name}")
    fn, inputs = mod.build(**kwargs)
    return mod, fn, inputs


def pallas_mosaic(case: str) -> dict:
    """Pallas's own Mosaic for a case: `jax.export(..., platforms=["tpu"])`,
    its tpu_custom_call decoded (deserialised with mosaic-serde). Returns
    text, kernel_name, config, in_structs, out_structs, lower_s."""
    import jax
    from jax.experimental import pallas as pl
    from tessera.jax import _jax_internal as ji
    _, fn, inputs = pallas_case(case)
    structs = [jax.ShapeDtypeStruct(x.shape, x.dtype) for x in inputs]
    start = time.perf_counter()
    exported = jax.export.export(jax.jit(functools.partial(fn, pl.pallas_call)),
                                 platforms=["tpu"])(*structs)
    lower_s = time.perf_counter() - start
    calls = ji.tpu_custom_calls(exported.mlir_module())
    assert len(calls) == 1, f"{case}: {len(calls)} tpu_custom_calls"
    module = ji.parse_mosaic(calls[0]["body"], serialized=True)
    outs = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in exported.out_avals]
    return dict(text=ji.mosaic_text(module), kernel_name=calls[0]["kernel_name"],
                config=calls[0]["config"], in_structs=structs, out_structs=outs,
                lower_s=lower_s, exported=exported)


def pallas_primitives() -> dict[str, tuple[str, dict]]:
    from pallas_kernels import PRIMITIVES
    return dict(PRIMITIVES)


def pallas_to_tsr(case: str) -> str:
    """The .tsr text tessera.jax's bridge makes of a case's Pallas kernel."""
    import jax
    import jax.numpy as jnp
    import tessera.jax as tj
    _, fn, inputs = pallas_case(case)
    texts: list[str] = []

    def capture(kernel, out_shape, **kwargs):
        def call(*args):
            texts.append(tj.lower_to_tsr(kernel, out_shape, *args, **kwargs))
            return jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), out_shape)
        return call

    fn(capture, *inputs)
    assert len(texts) == 1, f"{case}: {len(texts)} pallas_calls"
    return texts[0]


# ---- Structure of a Mosaic module ----------------------------------------------------


def structure(text: str) -> dict[str, Any]:
    """What tessera's module and Pallas's must share: the kernel function's
    argument types and its attributes (grid, windows, prefetch, scratch,
    semantics, core type), the transform functions' signatures; and what
    may differ, reported: the op counts."""
    from jaxlib.mlir import ir
    from tessera.jax import _jax_internal as ji
    module = ji.parse_mosaic(text)
    out: dict[str, Any] = {"transforms": [], "ops": {}}
    with module.context:
        for op in module.body.operations:
            if op.operation.name != "func.func":
                continue
            attrs = op.operation.attributes
            ftype = ir.FunctionType(ir.TypeAttr(attrs["function_type"]).value)
            sig = ([str(t) for t in ftype.inputs], [str(t) for t in ftype.results])
            name = ir.StringAttr(attrs["sym_name"]).value
            if "window_params" in attrs or "dimension_semantics" in attrs \
                    or not name.startswith("transform_"):
                out["kernel"] = name
                out["signature"] = sig
                for key in ("dimension_semantics", "iteration_bounds", "scalar_prefetch",
                            "scratch_operands", "tpu.core_type"):
                    out[key] = str(attrs[key]) if key in attrs else None
                out["window_params"] = (
                    re.sub(r"@transform_\d+", "@T", str(attrs["window_params"]))
                    if "window_params" in attrs else None)

                def count(o) -> None:
                    for region in o.regions:
                        for block in region.blocks:
                            for inner in block.operations:
                                n = inner.operation.name
                                out["ops"][n] = out["ops"].get(n, 0) + 1
                                count(inner.operation)
                count(op.operation)
            else:
                out["transforms"].append(sig)
    return out


SHARED = ("signature", "iteration_bounds", "dimension_semantics", "scalar_prefetch",
          "scratch_operands", "tpu.core_type", "window_params", "transforms")


def compare(case: str, chip: str = "v5e") -> dict[str, Any]:
    """tessera's module of a Pallas example (its .tsr kernel) vs Pallas's."""
    _, kwargs = pallas_examples()[case]
    mod, _, _ = pallas_case(case)
    path = mod.SOURCE
    name = kwargs.get("kernel") or _module(path).kernels[0].name
    ours = structure(kernel(path, name).to_mosaic(chip))
    theirs = structure(pallas_mosaic(case)["text"])
    diffs = {k: (ours.get(k), theirs.get(k)) for k in SHARED if ours.get(k) != theirs.get(k)}
    ops = sorted(set(ours["ops"]) | set(theirs["ops"]))
    op_diffs = {o: (ours["ops"].get(o, 0), theirs["ops"].get(o, 0)) for o in ops
                if ours["ops"].get(o, 0) != theirs["ops"].get(o, 0)}
    return {"case": case, "file": path, "kernel": name, "shared_diffs": diffs,
            "op_diffs": op_diffs}


def main(argv: list[str]) -> int:
    import tessera
    if "--compare" in argv:
        for case in pallas_examples():
            try:
                c = compare(case)
            except tessera.CompileError as e:
                print(f"{case}: tessera cannot emit: {e}")
                continue
            print(f"== {case} ({c['file']} @{c['kernel']})")
            for k, (a, b) in c["shared_diffs"].items():
                print(f"  {k}:\n    tessera: {a}\n    pallas:  {b}")
            for o, (a, b) in c["op_diffs"].items():
                print(f"  {o}: tessera {a}, pallas {b}")
        return 0
    for path, name in kernels():
        for chip in CHIPS:
            o = prove(path, name, chip)
            msg = o.message.splitlines()[0] if o.message else ""
            print(f"{cell_id(path, name, chip):48} {o.stage:8} emit {o.emit_s * 1e3:6.1f} ms "
                  f"compile {o.compile_s * 1e3:7.1f} ms  {msg[:120]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
