"""Fails where the TPU fails (docs/jax.md, "Fails where the TPU fails").

What a TPU would refuse of a pallas_call that tessera runs on a CPU: Pallas's
TPU block rules, the chip's VMEM and the kernel's scoped-VMEM limit, and what
has no Mosaic form on the chip (tessera's TPU checks and emitter, tpu/), and,
when asked, libtpu's own compile of the kernel for the chip, deviceless.

Each is a *finding* of a kind (KINDS). With option target="tpu" the kinds the
chip refuses (promoted_kinds) are located errors, raised before the kernel
runs; without it every finding is a warning, given once per prepared kernel
(the bridge caches its translations) to the collected warnings
(tessera.jax.collected_warnings, pytest's "tessera warnings"), never as a
Python warning: a suite that passes under JAX's interpret mode must pass
under `--tessera` too, `-W error` and `pytest.warns` included.
"""

from __future__ import annotations

import dataclasses
import re
import sys
from typing import Any, Callable, Mapping

from .. import _api as T
from . import _jax_internal as ji

#: The kinds of findings. Run diagnostics (tessera.Diagnostic.kind, e.g.
#: "vmem_budget") are looked up by the same names, '_' read as '-'.
KINDS = {
    "tpu-block-rule": "a block shape Pallas's TPU lowering refuses",
    "tpu-vmem": "more VMEM than the chip has, or than the kernel's scoped limit",
    "tpu-mosaic": "an op or dtype with no Mosaic form on the chip",
    "tpu-compile": "libtpu's compile of the kernel for the chip failed",
}

#: Kinds every chip refuses: errors with target="tpu", whatever the chip.
_EVERY_CHIP = frozenset(KINDS)
#: Kinds only megacore chips refuse: chips whose device is two TensorCores
#: that a grid dimension marked parallel is split between (JAX's
#: `tpu_info.ChipVersion.supports_megacore`: v4 and v5p). A kind named here
#: is an error with target="tpu" on those chips and stays a warning on the
#: others, whether it is a run's warning (its Diagnostic.kind: the
#: Executable's warnings hook, promote_run_diagnostics) or a finding the
#: bridge adds to `found` in checker(). v7x has two TensorCores per chip
#: too, but each is a device of its own (libtpu reports one active core for
#: a one-chip v7x topology, base/chips.c): a `parallel` dimension is not
#: split there, so an output accumulated along one is right on v7x.
_TWO_CORES: frozenset[str] = frozenset({"parallel-revisit"})
#: With target="tpu" and chip C, the kinds of findings and run diagnostics
#: that are errors (promoted from warnings); a kind left out of a chip's set
#: stays a warning on that chip.
PROMOTED: dict[str, frozenset[str]] = {
    "v2": _EVERY_CHIP, "v3": _EVERY_CHIP, "v5e": _EVERY_CHIP, "v6e": _EVERY_CHIP,
    "v4": _EVERY_CHIP | _TWO_CORES, "v5p": _EVERY_CHIP | _TWO_CORES,
    "v7x": _EVERY_CHIP,
}
_ALIASES = {"v7": "v7x", "tpu7x": "v7x"}

DEFAULT_CHIP = "v5e"


def chip_name(chip: Any) -> str:
    name = str(chip or DEFAULT_CHIP)
    return _ALIASES.get(name, name)


def promoted_kinds(chip: Any) -> frozenset[str]:
    """The kinds that are errors with target="tpu" on `chip`."""
    return PROMOTED.get(chip_name(chip), _EVERY_CHIP)


def _kind(name: str | None) -> str:
    return (name or "").replace("_", "-")


def check_options(options: Mapping[str, Any]) -> None:
    target = options.get("target")
    if target not in (None, "tpu"):
        raise ValueError(f"tessera.jax: target is 'tpu' or None, got {target!r}")
    chip = options.get("chip")
    # without a target, `chip` is also the interpreter's VMEM budget, which
    # knows chips the Mosaic emitter does not target (tpu8i): no finding then
    if target == "tpu" and chip is not None and chip_name(chip) not in PROMOTED:
        raise ValueError(f"tessera.jax: unknown TPU chip {chip!r} "
                         f"(chips: {', '.join(sorted(PROMOTED))}, v7, tpu7x)")


# ---- VMEM as Pallas asks for it ------------------------------------------------------


def _bits(dtype) -> int:
    import numpy as np
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return 32  # Pallas stores bools as int32
    name = str(dt)
    if name in ("int4", "uint4"):
        return 4
    if name in ("int2", "uint2"):
        return 2
    return dt.itemsize * 8


def _tile_rows(bits: int, rows: int, before_v4: bool) -> int:
    """Rows of Mosaic's memory tile (tpu/check.c, tile_rows: the same rule,
    from jax/_src/tpu_info.py's tiling factor, large tiles counted)."""
    packing, sublanes = 32 // bits, 8
    large = sublanes * packing
    if rows >= large:
        return large
    normal = max(packing, sublanes)
    tiling = (2 if before_v4 else 1) * packing
    while tiling < min(rows, normal):
        tiling *= 2
    return tiling


def _padded_bytes(chip: str, dtype, dims) -> int:
    bits = max(1, min(32, _bits(dtype)))
    dims = [1 if d is None else int(d) for d in dims]
    elems = 1
    for i, d in enumerate(dims):
        if i == len(dims) - 1:
            d = (d + 127) // 128 * 128
        if i + 2 == len(dims):
            t = _tile_rows(bits, d, chip in ("v2", "v3"))
            d = (d + t - 1) // t * t
        elems *= d
    return (elems * bits + 7) // 8


def pallas_vmem(call: "ji.PallasCall", chip: str) -> tuple[int, list[str]]:
    """The VMEM Pallas's module of `call` keeps for its blocks and scratch on
    `chip`, with the parts: each VMEM window buffered as its pipeline mode
    says (two buffers by default, one for a trivial window, which Pallas
    makes synchronous), every VMEM scratch buffer once, each padded to
    Mosaic's memory tiles. Mosaic's own internal scratch is not counted, so
    this is a lower bound of what libtpu allocates."""
    gm = call.grid_mapping
    total, parts = 0, []
    nin = len(call.in_avals) - getattr(gm, "num_index_operands", 0)
    for k, bm in enumerate(gm.block_mappings):
        aval = bm.array_aval
        if ji.semaphore_kind(aval.dtype) is not None:
            continue
        if ji.memory_space_name(bm.transformed_block_aval) not in ("default", "vmem"):
            continue
        dims = [d.size for d in ji.block_dims(bm)]
        trivial = getattr(bm, "has_trivial_window", None)
        mode = getattr(bm, "pipeline_mode", None)
        count = getattr(mode, "buffer_count", None) if mode is not None else None
        if trivial is not None and trivial():
            count = 1
        elif not isinstance(count, int) or count < 1:
            count = 2
        size = _padded_bytes(chip, aval.dtype, dims) if dims else 4
        total += count * size
        what = f"{getattr(bm, 'origin', None) or ('output' if k >= nin else 'input')}"
        parts.append(f"{what} {count} x {_fmt(size)}")
    for aval in getattr(gm, "scratch_avals", ()):
        if ji.memory_space_name(aval) not in ("default", "vmem"):
            continue
        inner = ji.inner_aval(aval)
        if ji.semaphore_kind(inner.dtype) is not None:
            continue
        size = _padded_bytes(chip, inner.dtype, inner.shape) if inner.shape else 4
        total += size
        parts.append(f"scratch {_fmt(size)}")
    return total, parts


def _fmt(n: int) -> str:
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div:
            return f"{n / div:.1f} {unit}".replace(".0 ", " ")
    return f"{n} B"


def vmem_limit_bytes(compiler_params: Any) -> int | None:
    """vmem_limit_bytes of a pallas_call's pltpu.CompilerParams (or of the
    TPU entry of a dict of them), or None."""
    limit = getattr(compiler_params, "vmem_limit_bytes", None)
    if limit is None and isinstance(compiler_params, Mapping):
        for v in compiler_params.values():
            limit = limit or getattr(v, "vmem_limit_bytes", None)
    return int(limit) if limit is not None else None


# ---- The findings -----------------------------------------------------------------


# Messages of tessera's TPU emitter for what it does not emit yet, which is
# tessera's gap and no finding about the kernel.
_EMITTER_GAPS = ("not emitted yet", "malformed", "only 2-D dots are emitted")


def _finding(kind: str, d: T.Diagnostic | None = None, *, message: str = "",
             loc: tuple[str, int, int] | None = None) -> T.Diagnostic:
    if d is None:
        file, line, col = loc or (None, None, None)
        head = f"{file}:{line}:{col}: " if file else ""
        return T.Diagnostic(kind=kind, severity="warning", message=message,
                            text=f"{head}warning: {message}", file=file, line=line, col=col)
    return dataclasses.replace(d, kind=kind)


_OPERAND = re.compile(r"^(?:in|out|operand|scratch) '?%([\w.]+)'?:")


def _relocated(d: T.Diagnostic, operand_locs: Mapping[str, tuple],
               kernel_loc: tuple[str, int, int] | None) -> T.Diagnostic:
    """A check's diagnostic about an operand (its message starts "in
    '%in0': ...") or the whole kernel, at the user's line: the operand's
    index-map lambda, or the pallas_call."""
    if d.line and d.file and not d.file.startswith("<"):
        return d
    m = _OPERAND.match(d.message)
    loc = operand_locs.get(m.group(1)) if m else None
    loc = loc or kernel_loc
    if not loc or not loc[0]:
        return d
    file, line, col = loc
    return dataclasses.replace(d, file=file, line=line, col=col,
                               text=f"{file}:{line}:{col}: error: {d.message}")


def findings(kernel: T.Kernel, call: "ji.PallasCall", chip: str,
             operand_locs: Mapping[str, tuple], kernel_loc: tuple[str, int, int] | None
             ) -> list[T.Diagnostic]:
    """What `chip` refuses of the translated `kernel` of `call`, each
    located at the user's line (severity "error"; the caller decides)."""
    found: list[T.Diagnostic] = []
    try:
        kernel.to_mosaic(chip)
    except T.CompileError as e:
        for d in e.diagnostics:
            if d.severity != "error" or any(g in d.message for g in _EMITTER_GAPS):
                continue
            if "of VMEM" in d.message:
                kind = "tpu-vmem"
            elif "cannot be emitted for TPU" in d.message or "f16" in d.message:
                kind = "tpu-mosaic"
            else:
                kind = "tpu-block-rule"
            found.append(_finding(kind, _relocated(d, operand_locs, kernel_loc)))
    if any(f.kind == "tpu-vmem" for f in found):
        return found  # over the chip's VMEM: over any limit too
    try:
        vmem = kernel.tpu_vmem(chip)
    except T.CompileError:
        return found
    need, parts = pallas_vmem(call, chip)
    given = vmem_limit_bytes(call.eqn.params.get("compiler_params"))
    limit = given if given is not None else vmem["default_limit_bytes"]
    capacity = vmem["capacity_bytes"]
    if need > limit and need <= capacity:
        why = ("its vmem_limit_bytes" if given is not None else
               f"the default scoped VMEM limit of {chip}")
        fix = ("raise vmem_limit_bytes or use smaller blocks" if given is not None else
               "set pltpu.CompilerParams(vmem_limit_bytes=...) (at most the chip's "
               f"{_fmt(capacity)}) or use smaller blocks")
        message = (f"kernel '@{kernel.name}' needs {_fmt(need)} of VMEM ({', '.join(parts)}; "
                   f"windows double-buffered) but {why} is {_fmt(limit)} (libtpu: \"Ran out "
                   f"of memory in memory space vmem\"): {fix}")
        found.append(_finding("tpu-vmem", message=message, loc=kernel_loc))
    elif need > capacity and given is not None:
        message = (f"kernel '@{kernel.name}' needs {_fmt(need)} of VMEM ({', '.join(parts)}) "
                   f"but {chip} has {_fmt(capacity)} per core, whatever vmem_limit_bytes "
                   "says: use smaller blocks")
        found.append(_finding("tpu-vmem", message=message, loc=kernel_loc))
    return found


def as_warning(d: T.Diagnostic) -> T.Diagnostic:
    text = d.text.replace(": error: ", ": warning: ", 1)
    if ": warning: " not in text:
        text = f"warning: {d.message}"
    return dataclasses.replace(d, severity="warning", text=text)


def as_error(d: T.Diagnostic) -> T.Diagnostic:
    text = d.text.replace(": warning: ", ": error: ", 1)
    if ": error: " not in text:
        text = f"error: {d.message}"
    return dataclasses.replace(d, severity="error", text=text)


def report(found: list[T.Diagnostic], options: Mapping[str, Any], kernel_name: str,
           collect: Callable[[str], None]) -> list[T.Diagnostic]:
    """Raises the findings the target refuses (target="tpu", or strict=True
    for every finding) as one CompileError; gives the others as warnings to
    `collect` (the collected warnings), and, outside interpret mode's
    collecting (warnings="python"), on stderr too, once: never through
    Python's warnings. Returns those warnings."""
    if not found:
        return []
    chip = chip_name(options.get("chip"))
    if options.get("target") == "tpu":
        refused = promoted_kinds(chip)
    elif options.get("strict"):
        refused = frozenset(_kind(f.kind) for f in found)
    else:
        refused = frozenset()
    errors = [as_error(f) for f in found if _kind(f.kind) in refused]
    warns = [as_warning(f) for f in found if _kind(f.kind) not in refused]
    for w in warns:
        text = f"{w.text} [{w.kind}; target='tpu' makes it an error]"
        collect(text)
        if options.get("warnings", "python") != "collect":
            print(f"tessera: {text}", file=sys.stderr)
    if errors:
        target = f"target='tpu', chip {chip}" if options.get("target") == "tpu" else "strict=True"
        n = len(errors)
        raise T.CompileError(
            "verify error",
            f"kernel @{kernel_name}: {n} error{'s' if n != 1 else ''} a TPU ({chip}) would "
            f"give ({target}): {errors[0].text}", errors)
    return warns


def promote_run_diagnostics(options: Mapping[str, Any]) -> Callable | None:
    """For a run's warnings: a function raising KernelError when one of them
    is of a kind the target chip refuses (target="tpu"), else None. Run
    diagnostics of promoted kinds (e.g. a warning kind the interpreter gives
    that a two-core chip refuses) become the run's failure."""
    if options.get("target") != "tpu":
        return None
    refused = promoted_kinds(options.get("chip"))
    if not refused - _EVERY_CHIP:
        return None  # no run diagnostic kind is promoted: nothing to check

    def check(warns) -> None:
        bad = [as_error(d) for d in warns if _kind(d.kind) in refused]
        if bad:
            raise T.KernelError("kernel error", f"{bad[0].text} (target='tpu', chip "
                                f"{chip_name(options.get('chip'))})", bad)
    return check


def checker(call: "ji.PallasCall", options: Mapping[str, Any], operand_locs: Mapping,
            collect: Callable[[str], None]) -> Callable[[T.Kernel], None]:
    """The bridge's check of a translated kernel before it is prepared
    (_run.Runner's tpu_check): the findings, reported (report); with
    tpu_compile_check, libtpu's compile."""
    chip = chip_name(options.get("chip"))
    kernel_loc = ji.call_location(call)

    def check(kernel: T.Kernel) -> None:
        try:
            found = findings(kernel, call, chip, operand_locs, kernel_loc)
        except Exception as e:  # noqa: BLE001 - a bug here must not stop a valid kernel
            if options.get("target") == "tpu":
                raise
            collect(f"tessera: the TPU checks of kernel @{kernel.name} failed "
                    f"({type(e).__name__}: {e}); a bug in tessera, the kernel ran unchecked")
            return []
        # A kernel with findings would fail libtpu's compile for the same
        # reasons (or not emit at all): the compile adds nothing to them.
        if options.get("tpu_compile_check") and not found:
            found = compile_check(
                kernel, vmem_limit_bytes(call.eqn.params.get("compiler_params")), chip,
                kernel_loc)
        return report(found, options, kernel.name, collect)
    return check


# ---- libtpu's compile ---------------------------------------------------------------


def libtpu_problem() -> str | None:
    """Why libtpu's deviceless compile cannot run here, or None."""
    try:
        from importlib import metadata
        metadata.version("libtpu")
    except Exception:  # noqa: BLE001 - not installed
        return ("tpu_compile_check=True needs libtpu, which is not installed in this Python: "
                "`pip install libtpu` (or `pip install 'jax[tpu]'`, the version JAX asks "
                "for); it compiles for a TPU chip without a TPU")
    return None


_MOSAIC_COMMENT = re.compile(r"^\s*// (.+):(\d+):(\d+): (\w+)\s*$")
_MLIR_LOC = re.compile(r"loc\(\"[^\"]*\":(\d+):(\d+)\)|^[^:\s]*:(\d+):(\d+):", re.M)


def _source_of(text: str, mosaic_line: int) -> tuple[str, int, int, str] | None:
    """The user's (file, line, col, op) of the Mosaic text's line
    `mosaic_line` (1-based): the emitter's comment above it (tpu/emit.c
    writes `// FILE:LINE:COL: op` before each op's instructions)."""
    lines = text.splitlines()
    for i in range(min(mosaic_line, len(lines)) - 1, -1, -1):
        m = _MOSAIC_COMMENT.match(lines[i])
        if m:
            return m.group(1), int(m.group(2)), int(m.group(3)), m.group(4)
        if lines[i].lstrip().startswith("func.func"):
            break
    return None


def compile_check(kernel: T.Kernel, vmem_limit: int | None, chip: str,
                  kernel_loc: tuple[str, int, int] | None) -> list[T.Diagnostic]:
    """Compiles tessera's Mosaic module of `kernel` for `chip` with libtpu,
    deviceless (as the TPU proofs do: python/tests/tpu/tpu_proof.py), with
    `vmem_limit` (the call's vmem_limit_bytes; None: the chip's default
    scoped limit): Mosaic's refusal as a finding (kind
    tpu-compile) located at the user's line of the op libtpu names, else at
    the pallas_call's; [] when it compiles. Raises CompileError when libtpu
    is not installed."""
    problem = libtpu_problem()
    if problem:
        raise T.CompileError("unsupported", f"tessera.jax: {problem}")
    if chip not in ji.TPU_TOPOLOGIES:
        raise T.CompileError("invalid argument", f"tessera.jax: tpu_compile_check: libtpu has "
                             f"no topology for chip {chip} (chips: "
                             f"{', '.join(ji.TPU_TOPOLOGIES)})")
    import os
    os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")
    from . import _tpu
    text = kernel.to_mosaic(chip)
    tc = _tpu.tpu_call(kernel, chip=chip, cpu="error")
    n = len(tc.bounds)
    try:
        module = ji.parse_mosaic(text)
        mk = ji.mosaic_kernel(module, tc.out_structs, kernel_name=kernel.name,
                              input_output_aliases=tuple((i + n, j) for i, j in tc.aliases),
                              vmem_limit_bytes=vmem_limit,
                              semaphore_outputs=tc.semaphore_outputs)
        device = ji.tpu_device(chip)
        ji.compile_for_device(lambda *a: mk(*[a[i] for i in tc.bounds], *a), tc.in_structs,
                              device)
    except Exception as e:  # noqa: BLE001 - libtpu's errors have no common type
        raw = str(e)
        where = None
        for m in _MLIR_LOC.finditer(raw):
            line = int(m.group(1) or m.group(3))
            where = _source_of(text, line)
            if where:
                break
        detail = " ".join(ln.strip() for ln in raw.splitlines()[:6]
                          if ln.strip() and not ln.strip().startswith("Please report"))
        detail = re.sub(r"Mosaic failed to compile TPU kernel with MLIR module name `[^`]*` "
                        r"HLO name `[^`]*`: ", "Mosaic: ", detail)
        detail = detail.replace(" at location: loc(unknown)", "")
        if where:
            file, line, col, op = where
            loc: tuple | None = (file, line, col)
            message = f"libtpu refuses the kernel for {chip} at this {op}: {detail}"
        else:
            loc = kernel_loc
            message = f"libtpu refuses the kernel for {chip}: {detail}"
        return [as_error(_finding("tpu-compile", message=message, loc=loc))]
    return []


def main(argv: list[str]) -> int:
    """`python -m tessera.jax._tpu_target FILE.tsr KERNEL CHIP`: libtpu's
    compile of a .tsr kernel for CHIP (`tessera run --target tpu
    --tpu-compile-check` runs it), with the vmem_limit_bytes tpu_call would
    set. Prints the refusal (FILE:LINE:COL: error: ...) on stderr. Exit
    status: 0 it compiles, 1 libtpu refuses it, 2 it could not be checked."""
    if len(argv) != 3:
        print("usage: python -m tessera.jax._tpu_target FILE.tsr KERNEL CHIP", file=sys.stderr)
        return 2
    path, name, chip = argv
    try:
        kernel = T.Module.load(path)[name]
        from . import _tpu
        limit = _tpu.tpu_call(kernel, chip=chip_name(chip), cpu="error").vmem_limit_bytes
        lines = open(path, encoding="utf-8").read().splitlines()
        at = next((i + 1 for i, ln in enumerate(lines)
                   if re.match(rf"\s*kernel @{re.escape(name)}\b", ln)), 1)
        found = compile_check(kernel, limit, chip_name(chip), (path, at, 1))
    except T.CompileError as e:
        print("\n".join(d.text for d in e.diagnostics) or str(e), file=sys.stderr)
        return 1 if e.diagnostics else 2
    except Exception as e:  # noqa: BLE001 - any failure to check is reported as such
        print(f"tessera: the compile check could not run: {type(e).__name__}: {e}",
              file=sys.stderr)
        return 2
    for d in found:
        print(d.text, file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
