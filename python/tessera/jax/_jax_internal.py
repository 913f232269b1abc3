"""Every use of JAX's private modules (`jax._src`) by tessera.jax, in one place.

JAX's internals change between releases; this module is the only one to
adapt when they do. Tested against jax/jaxlib 0.12.0.1 (docs/jax.md lists
what is used). Everything here either returns plain Python data or JAX
objects the translator only reads through the helpers below.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import os
import re
import sys
import threading
from typing import Any, Callable, Iterator, Sequence

import jax
import numpy as np
from jax._src import ad_util
from jax._src import core as jax_core
from jax._src import source_info_util
from jax._src import tree_util as jax_tree_util
from jax._src.pallas import core as pallas_core
from jax._src.interpreters import ad
from jax._src.pallas import pallas_call as pallas_call_module
from jax._src.state import indexing as state_indexing
from jax._src.state import types as state_types

try:  # the TPU flavour's DMA semaphore dtype
    from jax._src.pallas.mosaic import core as tpu_core
except ImportError:  # pragma: no cover
    tpu_core = None

JAX_VERSION = jax.__version__
SUPPORTED_JAX = ("0.12",)

Var = jax_core.Var
Literal = jax_core.Literal
DropVar = jax_core.DropVar
Jaxpr = jax_core.Jaxpr
Tracer = jax_core.Tracer


class JaxInternalsError(RuntimeError):
    """JAX's internals are not what this version of tessera.jax expects."""


# ---- Tracing to the pallas_call equation ------------------------------------


@dataclasses.dataclass
class PallasCall:
    """What tessera needs of one traced pallas_call."""
    eqn: Any                  # the pallas_call JaxprEqn
    jaxpr: Any                # the kernel's Jaxpr (over refs)
    grid_mapping: Any         # pallas GridMapping
    out_tree: Any             # PyTreeDef of the outputs
    out_avals: tuple          # flat ShapedArrays
    in_avals: tuple           # flat ShapedArrays of the call's operands
    name: str
    location: tuple = ("", 0, 0)  # the user's line that called the kernel


def _find_pallas_call(jaxpr) -> Iterator[tuple[Any, Any]]:
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "pallas_call":
            yield jaxpr, eqn
        else:
            for sub in jax_core.jaxprs_in_params(eqn.params):
                yield from _find_pallas_call(sub)


# tessera's chip names -> the TPU device kinds JAX knows.
_DEVICE_KINDS = {"v2": "TPU v2", "v3": "TPU v3", "v4": "TPU v4", "v5e": "TPU v5 lite",
                 "v5p": "TPU v5p", "v6e": "TPU v6 lite", "v7x": "TPU7x", "v7": "TPU7x", "tpu7x": "TPU7x",
                 "tpu8i": "TPU8i"}


def _chip_context(chip: str, cores: int):
    """While tracing: make JAX's TPU queries (pltpu.get_tpu_info, which
    emit_pipeline and others ask at trace time) answer for `chip` on a
    machine without a TPU, unless the caller set an abstract mesh."""
    from jax._src import mesh as mesh_lib
    if mesh_lib.get_abstract_mesh().abstract_device is not None:
        return contextlib.nullcontext()
    kind = _DEVICE_KINDS.get(chip)
    if kind is None:
        return contextlib.nullcontext()
    device = mesh_lib.AbstractDevice(device_kind=kind, num_cores=max(1, cores), platform="tpu")
    return jax.sharding.use_abstract_mesh(
        jax.sharding.AbstractMesh((), (), abstract_device=device))


def trace_pallas_call(fn: Callable, args: Sequence[Any], chip: str = "v5e",
                      cores: int = 1) -> PallasCall:
    """Traces `fn(*args)` (a function that makes one pallas_call) on the
    arguments' shapes and returns that call's equation. TPU queries made
    while tracing answer for `chip` with `cores` TensorCores."""
    structs = jax.tree_util.tree_map(
        lambda a: jax.ShapeDtypeStruct(np.shape(a), _dtype_of(a)), list(args))
    try:
        ctx = _chip_context(chip, cores)
    except Exception:  # internals moved: trace without it
        ctx = contextlib.nullcontext()
    with ctx:
        closed, out_shape = jax.make_jaxpr(fn, return_shape=True)(*structs)
    found = list(_find_pallas_call(closed.jaxpr))
    if len(found) != 1:
        raise JaxInternalsError(
            f"tessera.jax: expected one pallas_call in the traced function, found {len(found)}")
    outer, eqn = found[0]
    flat_in = jax.tree_util.tree_leaves(structs)
    gm = eqn.params["grid_mapping"]
    n_in = len(eqn.invars)
    if n_in != len(flat_in):
        raise NotImplementedError(
            "tessera.jax: the kernel captures constants (arrays closed over by the kernel "
            "function); pass them as inputs instead")
    out_tree = jax.tree_util.tree_structure(out_shape)
    return PallasCall(location=caller_location(), eqn=eqn, jaxpr=eqn.params["jaxpr"],
                      grid_mapping=gm,
                      out_tree=out_tree, out_avals=tuple(v.aval for v in eqn.outvars),
                      in_avals=tuple(v.aval for v in eqn.invars),
                      name=eqn.params.get("name") or _kernel_name(eqn))


# ---- Differentiating a pallas_call ----------------------------------------------


class JaxRuleError(Exception):
    """An error JAX's own JVP rule of pallas_call raised (a pallas_call
    Pallas refuses to differentiate), carried through tessera's tracing of
    the differentiated call so that the user gets JAX's error unchanged,
    never a TranslationError."""

    def __init__(self, error: BaseException):
        super().__init__(str(error))
        self.error = error


def pallas_call_jvp(fn: Callable, primals: Sequence[Any], tangents: Sequence[Any],
                    chip: str = "v5e", cores: int = 1) -> tuple[Any, Any]:
    """Differentiates `fn(*primals)` (a function making one pallas_call of
    its flat operands) by JAX's JVP rule of the pallas_call primitive, which
    binds a new pallas_call: the kernel's JVP, taking the primals then the
    nonzero tangents and giving the outputs then their tangents. A None in
    `tangents` is a zero tangent, given to the rule as JAX's symbolic zero
    (no operand), as JAX's own differentiation does. Returns (outputs,
    output tangents), each in fn's output tree. Called while tracing, so
    that the new pallas_call is the one tessera finds and runs.

    One repair: with a zero tangent, JAX's rule (0.12) gives the new call a
    block mapping for every operand's tangent, zero or not, while its kernel
    and operands have only the nonzero ones (JAX's own interpret mode then
    fails in a safe_zip); the new call gets the block mappings of the
    tangents it takes, those of their operands."""
    call = trace_pallas_call(fn, primals, chip, cores)
    eqn = call.eqn
    rule = ad.primitive_jvps[eqn.primitive]
    nonzero = [t is not None for t in tangents]
    taken = [t for t in tangents if t is not None]
    n = len(primals)

    def jvp(*operands):
        rest = iter(operands[n:])
        tans = [next(rest) if nz else ad_util.Zero(v.aval.to_tangent_aval())
                for v, nz in zip(eqn.invars, nonzero)]
        outs, out_tans = rule(list(operands[:n]), tans, **eqn.params)
        return list(outs), [ad.instantiate_zeros(t) for t in out_tans]

    # The rule traced on its own, so that its pallas_call can be repaired
    # before it is bound here (once) with the caller's operands.
    structs = [jax.ShapeDtypeStruct(np.shape(x), _dtype_of(x)) for x in (*primals, *taken)]
    try:
        closed = jax.make_jaxpr(jvp)(*structs)
    except Exception as e:
        raise JaxRuleError(e) from e
    made = [e for e in closed.jaxpr.eqns if e.primitive is eqn.primitive]
    if (len(made) != 1 or list(made[0].invars) != list(closed.jaxpr.invars)
            or list(made[0].outvars) != list(closed.jaxpr.outvars)):
        raise JaxInternalsError("tessera.jax: JAX's JVP rule of pallas_call did not make "
                                "one pallas_call of the primals and nonzero tangents")
    params = dict(made[0].params)
    gm, old = params["grid_mapping"], eqn.params["grid_mapping"]
    if gm.num_inputs != len(primals) + len(taken):
        in_bms, out_bms = _split(old.block_mappings, old.num_inputs)
        tangent_bms = [bm for bm, nz in zip(in_bms, nonzero) if nz]
        params["grid_mapping"] = gm.replace(
            block_mappings=(*in_bms, *tangent_bms, *out_bms, *out_bms),
            num_inputs=len(in_bms) + len(tangent_bms))
    flat = made[0].primitive.bind(*primals, *taken, **params)
    outs, out_tans = flat[:len(flat) // 2], flat[len(flat) // 2:]
    return unflatten(call.out_tree, outs), unflatten(call.out_tree, out_tans)


def mesh_kernel_jvp_error() -> NotImplementedError:
    """The error JAX raises when asked to differentiate a kernel over a mesh
    (`mpmd_map` has no JVP rule: jax/_src/interpreters/ad.py's message)."""
    return NotImplementedError(f"Differentiation rule for '{_mpmd_map_p}' not implemented")


def _split(seq: Sequence[Any], n: int) -> tuple[tuple, tuple]:
    return tuple(seq[:n]), tuple(seq[n:])


def is_dynamic_grid_dim(g) -> bool:
    """Whether a grid mapping's dim is a dynamic bound (its extent one of
    the pallas_call's leading operands)."""
    return g is None or g is getattr(pallas_core, "dynamic_grid_dim", object())


def split_dynamic_grid(kwargs: dict):
    """The dynamic bounds of a pl.pallas_call's grid (every dim that is not
    a Python int: a traced value, or an array, as Pallas's
    unzip_dynamic_grid_bounds decides), and a function giving the call's
    kwargs with other values in their places; None for a static grid."""
    spec = kwargs.get("grid_spec")
    grid = spec.grid if spec is not None else kwargs.get("grid", ())
    if grid is None:
        return None
    if not isinstance(grid, (tuple, list)):
        grid = (grid,)

    def size(g):  # a named dim is (name, size)
        return g[1] if isinstance(g, tuple) and len(g) == 2 and isinstance(g[0], str) else g
    dyn = [i for i, g in enumerate(grid) if not isinstance(size(g), int)]
    if not dyn:
        return None

    def rebuild(values: Sequence[Any]) -> dict:
        new = list(grid)
        for i, v in zip(dyn, values):
            new[i] = (grid[i][0], v) if size(grid[i]) is not grid[i] else v
        kw = dict(kwargs)
        if spec is not None:
            s = copy.copy(spec)
            s.grid = tuple(new)
            kw["grid_spec"] = s
        else:
            kw["grid"] = tuple(new)
        return kw
    return tuple(size(grid[i]) for i in dyn), rebuild


def _kernel_name(eqn) -> str:
    dbg = getattr(eqn.params["jaxpr"], "debug_info", None)
    name = getattr(dbg, "func_name", None) or "kernel"
    return "".join(c if c.isalnum() or c == "_" else "_" for c in name) or "kernel"


def _dtype_of(a) -> Any:
    dt = getattr(a, "dtype", None)
    if dt is None:
        dt = np.asarray(a).dtype
    return dt


def is_tracer(x: Any) -> bool:
    return isinstance(x, jax_core.Tracer)


# ---- Grid mapping -------------------------------------------------------------


def memory_space_name(aval) -> str:
    """'default', 'any', 'vmem', 'smem', 'hbm', 'semaphore_mem', ... of a ref aval."""
    ms = getattr(aval, "memory_space", None)
    if ms is None:
        return "default"
    v = getattr(ms, "value", None)
    return str(v if isinstance(v, str) else ms).lower()


def semaphore_kind(dtype) -> str | None:
    """'sem' / 'dma_sem' for a semaphore dtype, 'barrier' for a barrier
    semaphore, None for an array dtype."""
    if tpu_core is not None and _issub(dtype, tpu_core.dma_semaphore):
        return "dma_sem"
    if _issub(dtype, pallas_core.barrier_semaphore):
        return "barrier"
    if _issub(dtype, pallas_core.semaphore_dtype):
        return "sem"
    return None


def physical_dtype(dtype):
    """The dtype an operand of `dtype` crosses tessera's runs in: a
    semaphore's counts are int32 (Pallas's physical type of a semaphore,
    and what tessera's semaphore operands hold); other dtypes unchanged."""
    return np.dtype(np.int32) if semaphore_kind(dtype) is not None else dtype


def to_physical(x):
    """A traced semaphore array as its int32 counts (other values as they
    are): what an XLA custom call or callback can take."""
    if semaphore_kind(getattr(x, "dtype", None)) is None:
        return x
    from jax._src.lax.lax import _convert_element_type
    return _convert_element_type(x, jax.numpy.int32)


def from_physical(x, dtype):
    """int32 counts as a semaphore array of `dtype` (the inverse of
    to_physical; other dtypes: x as it is). Inside jax.jit only: JAX has no
    concrete semaphore array."""
    if semaphore_kind(dtype) is None:
        return x
    from jax._src.lax.lax import _convert_element_type
    return _convert_element_type(x, dtype)


def _issub(dtype, cls) -> bool:
    try:
        return jax.numpy.issubdtype(dtype, cls)
    except TypeError:
        return False


@dataclasses.dataclass(frozen=True)
class BlockDim:
    kind: str   # "blocked", "squeezed", "element", "bounded"
    size: int
    padding: tuple[int, int] = (0, 0)  # an element dim's (low, high)


def block_dims(block_mapping) -> list[BlockDim]:
    out = []
    for bd in block_mapping.block_shape:
        if isinstance(bd, pallas_core.Squeezed) or bd is None:
            out.append(BlockDim("squeezed", 1))
        elif isinstance(bd, pallas_core.Blocked):
            out.append(BlockDim("blocked", int(bd.block_size)))
        elif isinstance(bd, pallas_core.Element):
            lo, hi = bd.padding
            out.append(BlockDim("element", int(bd.block_size), (int(lo), int(hi))))
        elif isinstance(bd, pallas_core.BoundedSlice):
            out.append(BlockDim("bounded", int(bd.block_size)))
        elif isinstance(bd, int):
            out.append(BlockDim("blocked", bd))
        else:
            raise JaxInternalsError(f"tessera.jax: unknown block dimension {bd!r}")
    return out


def revisit_any(block_mapping) -> tuple[bool, int]:
    """Whether the BlockSpec asks for `pipeline_mode=pl.Buffered(n,
    revisit=pl.RevisitMode.ANY)`, and its buffer count n (1 without a
    pipeline mode). Pallas's TPU lowering single-buffers a trivial VMEM
    window whatever its pipeline mode says (and drops its revisit mode: the
    grid never leaves its one block), so such a window is not ANY here."""
    mode = getattr(block_mapping, "pipeline_mode", None)
    revisit = getattr(mode, "revisit", None)
    any_mode = getattr(getattr(pallas_core, "RevisitMode", None), "ANY", None)
    if mode is None or revisit is None or revisit != any_mode:
        return False, 1
    count = getattr(mode, "buffer_count", 1)
    trivial = getattr(block_mapping, "has_trivial_window", None)
    space = memory_space_name(block_mapping.transformed_block_aval)
    if space in ("default", "vmem") and trivial is not None and trivial():
        return False, 1
    return True, count if isinstance(count, int) else -1


def _src_location(debug_info) -> tuple[str, int, int] | None:
    """Where a traced function was defined, if that is the user's code: an
    operand without a BlockSpec gets Pallas's default index map, defined in
    JAX's own sources, which would name no line of the user's."""
    src = getattr(debug_info, "func_src_info", None) or ""
    m = re.search(r" at (.+):(\d+)$", src)
    if not m or not source_info_util.is_user_filename(m.group(1)):
        return None
    return (m.group(1), int(m.group(2)), 1)


def kernel_arg_names(jaxpr) -> list[str | None]:
    """The Python names of a traced function's parameters, one per invar of
    its jaxpr (JAX's `debug_info.arg_names`: `x_ref`, `refs[0]` for a
    `*refs` parameter; None where JAX does not know one). JAX's interpret
    mode names a kernel's inputs and outputs by them in its errors."""
    names = getattr(getattr(jaxpr, "debug_info", None), "arg_names", None)
    n = len(jaxpr.invars)
    if names is None or len(names) != n:
        return [None] * n
    return [str(a) if a else None for a in names]


@dataclasses.dataclass(frozen=True)
class _FunctionAt:
    """A lambda or def of a source file, as the AST gives it."""
    name: str                 # "<lambda>" or the def's name
    args: tuple               # its positional parameters' names
    start: tuple              # (line, col), col 0-based, of `lambda` / `def`
    end: tuple                # (line, col) just after it


_functions_cache: dict[str, tuple[list, dict]] = {}
_functions_lock = threading.Lock()


def _functions_by_line(file: str) -> dict[int, list[_FunctionAt]]:
    """The lambdas and defs of `file` by the first line of their code
    object (a def's first decorator), in source order; {} when the source
    cannot be read or parsed. Parsed once per file (linecache's text)."""
    import ast
    import linecache
    lines = linecache.getlines(file)
    with _functions_lock:
        hit = _functions_cache.get(file)
        if hit is not None and hit[0] is lines:
            return hit[1]
    table: dict[int, list[_FunctionAt]] = {}
    try:
        tree = ast.parse("".join(lines), file)
    except (SyntaxError, ValueError):
        tree = None
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, ast.Lambda):
            name, first = "<lambda>", node.lineno
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            name = node.name
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
        else:
            continue
        args = tuple(a.arg for a in node.args.posonlyargs + node.args.args)
        table.setdefault(first, []).append(_FunctionAt(
            name, args, (node.lineno, node.col_offset),
            (node.end_lineno or node.lineno, node.end_col_offset or 0)))
    for found in table.values():
        found.sort(key=lambda f: f.start)
    with _functions_lock:
        _functions_cache[file] = (lines, table)
    return table


def _index_map_candidates(block_mapping) -> tuple[str, int, list[_FunctionAt]] | None:
    """(file, line, the functions there that may be this BlockSpec's index
    map), or None when the index map is not the user's code."""
    cj = block_mapping.index_map_jaxpr
    dbg = getattr(cj.jaxpr, "debug_info", None)
    src = _src_location(dbg)
    if src is None:
        return None
    file, line, _ = src
    fname = dbg.func_name
    cands = [f for f in _functions_by_line(file).get(line, ()) if f.name == fname]
    # Several on the line: the ones whose parameters are the map's, then the
    # one holding the map's first equation.
    names = tuple(getattr(dbg, "arg_names", None) or ())
    if len(cands) > 1 and names and all(n.isidentifier() for n in names):
        cands = [f for f in cands if f.args == names] or cands
    if len(cands) > 1:
        for e in cj.jaxpr.eqns:
            efile, eline, ecol = user_location(e)
            if efile == file:
                inside = [f for f in cands if f.start <= (eline, ecol - 1) < f.end]
                cands = inside or cands
                break
    return file, line, cands


def index_map_locations(grid_mapping) -> list[tuple[str, int, int] | None]:
    """(file, line, col) of each BlockSpec's index map (the user's lambda or
    def, at its column), or None (no BlockSpec: the caller names the
    pallas_call). Where one line holds several index maps that nothing else
    tells apart (`lambda i: (i, 0)` twice), they are taken in order: the
    BlockSpecs of in_specs then out_specs, as written."""
    found = [_index_map_candidates(bm) for bm in grid_mapping.block_mappings]
    # the functions some index map is alone to match are not another's
    claimed = {c[2][0] for c in found if c is not None and len(c[2]) == 1}
    out: list[tuple[str, int, int] | None] = []
    taken: dict[tuple[str, int], int] = {}
    for bm, c in zip(grid_mapping.block_mappings, found):
        if c is None:
            out.append(_first_user_equation(bm))
            continue
        file, line, cands = c
        if not cands:  # no source to read: the line alone
            out.append(_first_user_equation(bm) or (file, line, 1))
            continue
        k = 0
        if len(cands) > 1:
            cands = [f for f in cands if f not in claimed] or cands
            k = taken.get((file, line), 0)
            taken[(file, line)] = k + 1
        f = cands[min(k, len(cands) - 1)]
        out.append((file, f.start[0], f.start[1] + 1))
    return out


def _first_user_equation(block_mapping) -> tuple[str, int, int] | None:
    for e in block_mapping.index_map_jaxpr.jaxpr.eqns:
        loc = user_location(e)
        if loc[0]:
            return loc
    return None


def call_location(call: "PallasCall") -> tuple[str, int, int]:
    """(file, line, col) of the user's pl.pallas_call(...)(...) call."""
    return call.location if call.location[0] else user_location(call.eqn)


_TESSERA_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def caller_location() -> tuple[str, int, int]:
    """(file, line, 1) of the innermost frame on the stack that is neither
    JAX's, Python's nor tessera's: the user's line being traced or run."""
    frame = sys._getframe(1)
    while frame is not None:
        fname = frame.f_code.co_filename
        if (not os.path.abspath(fname).startswith(_TESSERA_DIR + os.sep)
                and source_info_util.is_user_filename(fname)):
            return (fname, frame.f_lineno, 1)
        frame = frame.f_back
    return ("", 0, 0)


def index_map(block_mapping):
    """(jaxpr, consts) of a block mapping's index map."""
    cj = block_mapping.index_map_jaxpr
    return cj.jaxpr, list(cj.consts)


def dimension_semantics(compiler_params, grid_rank: int) -> list[str] | None:
    """['parallel', 'arbitrary', ...] from pltpu.CompilerParams, or None."""
    sem = getattr(compiler_params, "dimension_semantics", None)
    if sem is None:
        return None
    out = []
    for s in sem:
        name = getattr(s, "name", None) or getattr(s, "value", None) or str(s)
        name = str(name).lower()
        if "core_parallel" in name:
            out.append("core_parallel")
        elif "parallel" in name:
            out.append("parallel")
        else:
            out.append("arbitrary")
    return out


# ---- Equations -------------------------------------------------------------------


def user_location(eqn) -> tuple[str, int, int]:
    """(file, line, col) of the user's Python line an equation came from, or
    ("", 0, 0)."""
    si = getattr(eqn, "source_info", None)
    tb = getattr(si, "traceback", None)
    try:
        frame = source_info_util.user_frame(tb)
    except Exception:
        frame = None
    if frame is None:
        return ("", 0, 0)
    return (frame.file_name, int(frame.start_line), int(frame.start_column) + 1)


def sub_jaxpr(obj) -> tuple[Any, list]:
    """(Jaxpr, consts) of a Jaxpr or ClosedJaxpr param."""
    # jax 0.12: a Jaxpr carries its consts (ClosedJaxpr is gone); older
    # releases wrap a Jaxpr and its consts in a ClosedJaxpr.
    return obj.jaxpr, list(getattr(obj, "consts", ()) or ())


def scan_groups(params) -> tuple[int, int, int]:
    """(num_consts, num_carry, num_xs) of a scan equation."""
    if "ft_in" in params:
        groups = params["ft_in"].unpack()
        return tuple(len(g) for g in groups)  # type: ignore[return-value]
    nc, nk = params["num_consts"], params["num_carry"]
    return nc, nk, len(params["jaxpr"].in_avals) - nc - nk


def unflatten(tree, leaves: Sequence[Any]) -> Any:
    return tree.unflatten(list(leaves))


@dataclasses.dataclass(frozen=True)
class DimIndex:
    """One dimension of an NDIndexer: a point (start), a slice
    (start, size, stride) or an array of indices ("array": `start` is the
    array, already broadcast by JAX to the indexer's common shape).
    `start` is an int, a Var or a Literal; a slice's `size` is an int, or
    the Var of a traced size."""
    kind: str
    start: Any
    size: int = 1
    stride: int = 1


def reshape_of(transform) -> tuple[int, ...] | None:
    """The new shape of a ref reshape transform (`ref.reshape(...)`), else
    None."""
    if isinstance(transform, getattr(state_types, "ReshapeTransform", ())):
        return tuple(int(d) for d in transform.shape)
    return None


def bitcast_of(transform):
    """The dtype of a ref bitcast transform (`ref.bitcast(dtype)`), else
    None."""
    if isinstance(transform, getattr(state_types, "BitcastTransform", ())):
        return transform.dtype
    return None


def ndindexer_dims(idx) -> list[DimIndex]:
    """Decodes an NDIndexer (static or pl.ds entries) into DimIndex per
    dimension of the ref it indexes."""
    if not isinstance(idx, state_indexing.NDIndexer):
        raise NotImplementedError(f"a ref transform of type {type(idx).__name__}")
    out = []
    for i in idx.indices:
        if isinstance(i, state_indexing.Slice):
            size = i.size
            if isinstance(size, Literal):
                size = size.val
            # a traced size stays its atom: only a DMA's view may take it
            # (the IR's ds(start, %n); docs/jax.md)
            out.append(DimIndex("slice", i.start,
                                int(size) if isinstance(size, (int, np.integer)) else size,
                                int(i.stride)))
        elif len(_aval_shape(i)) > 0:
            out.append(DimIndex("array", i))
        else:
            out.append(DimIndex("point", i))
    return out


def index_shape(idx) -> tuple:
    """The common (broadcast) shape of an NDIndexer's arrays of indices."""
    return tuple(idx.int_indexer_shape)


def _aval_shape(x) -> tuple:
    aval = getattr(x, "aval", None)
    if aval is not None:
        return tuple(aval.shape)
    return np.shape(x)


def ref_transforms(obj) -> tuple[Any, tuple]:
    """(ref, transforms) of a TransformedRef or a plain ref var."""
    if isinstance(obj, state_types.TransformedRef):
        return obj.ref, tuple(obj.transforms)
    return obj, ()


def check_conditions(eqn) -> list[tuple[Any, str]]:
    """(error predicate atom, message) per check of a checkify `check`
    equation (pl.debug_check): the kernel fails where the predicate holds."""
    err = eqn.params["err_tree"].unflatten(list(eqn.invars))
    out = []
    for effect, pred in err._pred.items():
        message = "check failed"
        meta = None
        try:
            meta = err._metadata.get(int(np.asarray(literal_value(err._code.get(effect)))))
        except (TypeError, ValueError):
            pass
        if meta is not None:
            try:  # the error class's static data holds the message string
                data = meta.node_data()
                aux = data[1] if data else ()
                strings = [a for a in (aux if isinstance(aux, tuple) else (aux,))
                           if isinstance(a, str)]
                if strings:
                    message = strings[-1]
            except Exception:
                pass
        out.append((pred, message))
    return out


def literal_value(x) -> Any:
    return x.val if isinstance(x, Literal) else x


def aval_of(x):
    return x.aval if hasattr(x, "aval") else jax_core.get_aval(x)


def inner_aval(aval):
    """The array aval inside a Ref aval."""
    return getattr(aval, "inner_aval", aval)


def jaxpr_key_text(jaxpr) -> str:
    """The jaxpr's text plus every equation's user location and the
    parameter names (which name the refs in the IR), recursively: what
    decides the translated kernel (with the grid mapping)."""
    parts = [str(jaxpr), repr(kernel_arg_names(jaxpr))]

    def walk(j):
        for e in j.eqns:
            parts.append("%s:%d:%d" % user_location(e))
            for sub in jax_core.jaxprs_in_params(e.params):
                parts.append(repr(kernel_arg_names(sub)))
                walk(sub)
    walk(jaxpr)
    return "\n".join(parts)


def grid_mapping_key_text(gm) -> str:
    # The grid's names say which dimension lax.axis_index reads.
    parts = [repr(tuple(gm.grid)), repr(getattr(gm, "grid_names", None)),
             str(gm.num_index_operands), str(gm.num_inputs),
             str(gm.num_outputs), str(gm.num_scratch_operands), repr(gm.scratch_avals)]
    # an index map's location names the diagnostics at its operand
    for bm, loc in zip(gm.block_mappings, index_map_locations(gm)):
        # the pipeline mode holds the revisit mode (pl.Buffered(1,
        # revisit=pl.RevisitMode.ANY)), which changes the kernel
        parts.append(f"{bm.block_shape}|{bm.array_aval}|{bm.transformed_block_aval}|"
                     f"{bm.index_map_jaxpr}|{bm.transforms}|"
                     f"{getattr(bm, 'pipeline_mode', None)}|{loc}")
    return "\n".join(parts)


# ---- Intercepting pl.pallas_call ---------------------------------------------------

_patch_lock = threading.Lock()
_patch_depth = 0
_original_pallas_call = pallas_call_module._pallas_call


def original_pallas_call_impl() -> Callable:
    """jax's own `_pallas_call` (what `pl.pallas_call` ends in), unpatched."""
    return _original_pallas_call


def tpu_interpret_forced() -> Any:
    """The InterpretParams `pltpu.force_tpu_interpret_mode()` sets (JAX's
    config pallas_tpu_interpret_mode_context_manager), which pallas_call
    puts before its own `interpret=` value; None outside it."""
    from jax._src import config as jax_config
    flag = getattr(jax_config, "pallas_tpu_interpret_mode_context_manager", None)
    return flag.value if flag is not None else None


def install_pallas_call_hook(hook: Callable, mpmd_hook: Callable | None = None) -> None:
    """Makes every `pl.pallas_call(...)` go through `hook(original, kernel,
    out_shape, **kwargs)`, whoever imported it: `pl.pallas_call` reads the
    module global `_pallas_call` at each call, so patching that one name
    catches every spelling. With `mpmd_hook`, every kernel over a mesh
    (`pl.kernel`, `pl.core_map`: both bind JAX's `mpmd_map` primitive) goes
    through `mpmd_hook(original_bind, *args, **params)` too.
    Reference-counted; undone by remove."""
    global _patch_depth
    with _patch_lock:
        if _patch_depth == 0:
            def patched(kernel, out_shape, **kwargs):
                return hook(_original_pallas_call, kernel, out_shape, **kwargs)
            pallas_call_module._pallas_call = patched
            if mpmd_hook is not None and _mpmd_map_p is not None:
                def patched_bind(*args, **params):
                    return mpmd_hook(_original_mpmd_bind, *args, **params)
                _mpmd_map_p.bind = patched_bind
        _patch_depth += 1


def remove_pallas_call_hook() -> None:
    global _patch_depth
    with _patch_lock:
        _patch_depth -= 1
        if _patch_depth == 0:
            pallas_call_module._pallas_call = _original_pallas_call
            if _mpmd_map_p is not None and "bind" in vars(_mpmd_map_p):
                del _mpmd_map_p.bind


# ---- Kernels over a mesh: pl.kernel and pl.core_map --------------------------------
#
# Both bind `mpmd_map` with one (mesh, kernel jaxpr) pair; the jaxpr's refs are
# [operands..., closed-over refs..., outputs..., scratch...]. On a CPU JAX
# lowers it as a pallas_call over the grid `mesh.shape.items()` (a named grid:
# lax.axis_index of the core axis is the grid index) whose operands stay in
# the mesh's default memory space (jax/_src/pallas/mpmd.py,
# _mpmd_map_fallback_lowering). tessera takes that same pallas_call, with the
# core dimension `core_parallel` so that each simulated core runs one index.

try:
    from jax._src.pallas import mpmd as _mpmd
    _mpmd_map_p = _mpmd.mpmd_map_p
    _original_mpmd_bind = _mpmd_map_p.bind
except (ImportError, AttributeError):  # pragma: no cover - another JAX
    _mpmd = _mpmd_map_p = _original_mpmd_bind = None


@dataclasses.dataclass
class MeshKernel:
    """A pl.kernel / pl.core_map call as a pallas_call over the mesh."""
    fn: Callable          # fn(*values) -> list of outputs: binds the pallas_call
    values: list          # the operands (a ref operand read into its value)
    written: list         # (ref, index of its output) of each ref the kernel writes
    num_outputs: int      # the kernel's own outputs (before the written refs')
    cores: int            # the size of the mesh's core axis
    name: str | None


def _is_ref(x) -> bool:
    return isinstance(jax_core.typeof(x), state_types.AbstractRef)


def mesh_kernel(args: Sequence[Any], params: dict) -> MeshKernel:
    """The pallas_call equivalent of one `mpmd_map` bind (NotImplementedError
    for the forms tessera does not take)."""
    from jax._src import api_util
    from jax._src.interpreters import partial_eval as pe
    from jax._src.state import types as state
    jaxprs, meshes = params["jaxprs"], params["meshes"]
    if len(jaxprs) != 1 or params.get("external_meshes"):
        raise NotImplementedError("tessera.jax: a kernel over several meshes (MPMD)")
    [jaxpr], [mesh] = jaxprs, meshes
    if jaxpr.constvars:
        raise NotImplementedError("tessera.jax: a mesh kernel with constants")
    axes = list(mesh.shape.items())
    if len(axes) != 1 or type(mesh).__name__ != "TensorCoreMesh":
        raise NotImplementedError(
            f"tessera.jax: a kernel over a {type(mesh).__name__} of axes "
            f"{[a for a, _ in axes]} (tessera takes a TensorCoreMesh)")
    (axis, cores), = axes
    out_avals = list(params["out_avals"])
    n_in, n_out = len(args), len(out_avals)
    aliases = dict(params.get("input_output_aliases") or {})
    if aliases:
        raise NotImplementedError("tessera.jax: input_output_aliases of a mesh kernel")
    in_index = {v: i for i, v in enumerate(jaxpr.invars)}
    written = sorted({in_index[e.input] for e in jaxpr.effects
                      if isinstance(e, (state.WriteEffect, state.AccumEffect))
                      and in_index.get(e.input, n_in) < n_in and _is_ref(args[in_index[e.input]])})
    for i, a in enumerate(args):
        if isinstance(a, state_types.TransformedRef):
            raise NotImplementedError(f"tessera.jax: operand {i} of a mesh kernel is a view "
                                      "of a ref (pass the whole ref)")
    all_avals = [v.aval for v in jaxpr.invars]
    in_avals, out_ref_avals, scratch_avals = (all_avals[:n_in], all_avals[n_in:n_in + n_out],
                                              all_avals[n_in + n_out:])
    new_out_avals = [in_avals[i] for i in written]

    # A ref the kernel writes becomes an output aliased to its operand, and
    # the body writes that output (which starts as the operand's contents).
    def body(*refs):
        ins = list(refs[:n_in])
        outs = refs[n_in:n_in + n_out]
        new_outs = refs[n_in + n_out:n_in + n_out + len(written)]
        scratch = refs[n_in + n_out + len(written):]
        for j, i in enumerate(written):
            ins[i] = new_outs[j]
        jax_core.eval_jaxpr(jaxpr, (), *ins, *outs, *scratch)
        return ()

    tracing_avals = in_avals + out_ref_avals + new_out_avals + scratch_avals
    debug = api_util.debug_info("mesh kernel", body, tracing_avals, {},
                                sourceinfo=jaxpr.debug_info.func_src_info)
    with _mpmd.mpmd_map_tracing_context(mesh, (mesh,)):
        closed, _ = pe.trace_to_jaxpr(body, _flat_avals(tracing_avals), debug)
    new_jaxpr = closed if isinstance(closed, Jaxpr) else closed.jaxpr

    def space(aval):
        ms = getattr(aval, "memory_space", None)
        return ms if ms is not None and not isinstance(ms, jax_core.MemorySpace) \
            else mesh.default_memory_space

    value_avals = [a.inner_aval for a in in_avals]
    all_out = [a.inner_aval for a in out_ref_avals + new_out_avals]
    grid_spec = pallas_core.GridSpec(
        grid=((axis, cores),),
        in_specs=tuple(pallas_core.BlockSpec(memory_space=space(a)) for a in in_avals),
        out_specs=tuple(pallas_core.BlockSpec(memory_space=space(a))
                        for a in out_ref_avals + new_out_avals),
        scratch_shapes=tuple(pallas_core.MemoryRef(a.inner_aval, a.memory_space)
                             for a in scratch_avals))
    in_tree = jax.tree_util.tree_structure(tuple(value_avals))
    out_tree = jax.tree_util.tree_structure(tuple(all_out))
    _, grid_mapping = pallas_core.get_grid_mapping(
        grid_spec, value_avals, in_tree, [f"args[{i}]" for i in range(n_in)],
        all_out, out_tree, [f"outputs[{i}]" for i in range(len(all_out))],
        debug=params.get("debug", False))
    cp = params.get("compiler_params")
    if cp is None:
        from jax._src.pallas.mosaic import core as mosaic_core
        cp = mosaic_core.CompilerParams()
    if hasattr(cp, "replace"):
        cp = cp.replace(dimension_semantics=("core_parallel",))
    call_aliases = tuple((i, n_out + j) for j, i in enumerate(written))
    metadata = params.get("metadata")
    name = params.get("name")

    def fn(*values):
        return pallas_call_module.pallas_call_p.bind(
            *values, out_avals=tuple(all_out), jaxpr=new_jaxpr, debug=False,
            interpret=False, grid_mapping=grid_mapping, mesh=None,
            input_output_aliases=call_aliases, compiler_params=cp,
            cost_estimate=params.get("cost_estimate"), metadata=metadata, name=name)

    values = [a[...] if _is_ref(a) else a for a in args]
    return MeshKernel(fn=fn, values=values, written=[(args[i], n_out + j)
                                                     for j, i in enumerate(written)],
                      num_outputs=n_out, cores=int(cores), name=name)


def _flat_avals(avals):
    from jax._src import flattree as ft
    return ft.flatten_args(*avals)


def write_ref(ref, value) -> None:
    """ref[...] = value (a kernel's write back into a ref it was given)."""
    ref[...] = value


def flatten_with_tree(x):
    return jax_tree_util.tree_flatten(x)


# ---- Host arrays as jax arrays, without a copy ----------------------------------

try:
    from jax._src.interpreters import pxla as _pxla
    _batched_device_put = _pxla.batched_device_put
except (ImportError, AttributeError):  # pragma: no cover - another JAX
    _batched_device_put = None
_cpu_sharding: list = []


def adopt_host_arrays(arrays: Sequence[np.ndarray]) -> list:
    """numpy arrays as jax arrays on the CPU device. XLA's CPU client adopts
    a buffer aligned to 64 bytes without copying (the arrays must not be
    written afterwards), through the device put jax.device_put ends in,
    skipping its Python layers. Measured on an (8, 128) f32 array: 28 us
    (median) adopting one array again and again, 55 us for a new array each
    time (what a run gives); jnp.asarray copies and took 53 us there, 265 us
    on a 2 MiB array (bench/python/bench_bridge.py has the per-call
    figures)."""
    if _batched_device_put is None:  # pragma: no cover
        return [jax.device_put(a) for a in arrays]
    if not _cpu_sharding:
        _cpu_sharding.append(jax.sharding.SingleDeviceSharding(jax.devices("cpu")[0]))
    sharding = _cpu_sharding[0]
    device = list(sharding.device_set)
    return [_batched_device_put(jax_core.ShapedArray(a.shape, a.dtype), sharding, [a], device)
            for a in arrays]


# ---- Named axes (shard_map) -------------------------------------------------------


def axis_env_sizes() -> tuple[tuple[Any, int], ...]:
    """((axis name, size), ...) of the named axes being traced under
    (shard_map's mesh axes), in JAX's axis-environment order: the order JAX's
    TPU interpret mode numbers devices in (row-major). () outside any."""
    return tuple((name, int(size)) for name, size in jax_core.get_axis_env().axis_sizes.items())


# ---- Mosaic TPU modules and libtpu (tessera.jax.tpu, docs/tpu.md) ------------------
#
# jaxlib's MLIR bindings with the TPU dialect parse and verify Mosaic text;
# `mosaic-serde` is the stable-Mosaic serialisation pass Pallas runs before it
# embeds a module in a `tpu_custom_call`; libtpu (when installed) compiles for
# a TPU topology without a TPU (deviceless ahead-of-time compilation).

#: tessera's chip names -> the topology names libtpu's deviceless compiler knows.
#: (tessera's emitter knows v7x as tpu7x too.)
TPU_TOPOLOGIES = {"v3": "v3:1x1", "v4": "v4:1x1x1", "v5e": "v5e:1x1", "v5p": "v5p:1x1x1",
                  "v6e": "v6e:1x1", "v7x": "tpu7x:1x1x1", "tpu7x": "tpu7x:1x1x1"}


def mosaic_export_version() -> int:
    """The stable-Mosaic version Pallas serialises at when no TPU backend is
    present or when exporting (forward compatibility): what JAX itself puts
    in an exported `tpu_custom_call`."""
    from jax._src import tpu_custom_call as tcc
    return int(tcc._FWD_COMPAT_VERSION)


def mosaic_context():
    """A fresh MLIR context with JAX's dialects and the TPU dialect registered."""
    from jax._src.interpreters import mlir as jax_mlir
    from jax._src.lib import tpu as jax_tpu
    ctx = jax_mlir.make_ir_context()
    jax_tpu.register_dialect(ctx)
    return ctx


class MosaicParseError(ValueError):
    """jaxlib's MLIR parser or verifier rejected a Mosaic module; the message
    holds MLIR's diagnostics (line:col in the module text)."""


def parse_mosaic(text: str | bytes, ctx=None, *, serialized: bool = False):
    """Parses Mosaic text (or bytecode) in `ctx` (a new mosaic_context() if
    None) and verifies it; with serialized=True the input is the wire form
    (`stable_mosaic.*` ops) and is deserialised first. Returns the ir.Module.
    Raises MosaicParseError with MLIR's messages."""
    from jaxlib.mlir import ir
    from jaxlib.mlir import passmanager
    ctx = ctx if ctx is not None else mosaic_context()
    with ctx, ir.Location.unknown():
        previous = ctx.allow_unregistered_dialects
        ctx.allow_unregistered_dialects = serialized
        try:
            try:
                module = ir.Module.parse(text)
                if serialized:
                    passmanager.PassManager.parse(
                        "builtin.module(mosaic-serde{serialize=false})").run(module.operation)
                    ctx.allow_unregistered_dialects = False
                if not module.operation.verify():
                    raise MosaicParseError("the module does not verify")
            except ir.MLIRError as e:
                raise MosaicParseError(str(e)) from None
        finally:
            ctx.allow_unregistered_dialects = previous
    return module


def mosaic_text(module) -> str:
    """A module's text as MLIR prints it."""
    return module.operation.get_asm(enable_debug_info=False)


def serialize_mosaic(module, version: int | None = None) -> bytes:
    """The bytes Pallas embeds: the module after `mosaic-serde{serialize=true
    target-version=N}` (ops renamed `stable_mosaic.*`, the version attribute
    added, newer ops downgraded), written as MLIR bytecode (format version 0).
    `module` is not changed."""
    import io
    from jaxlib.mlir import ir
    from jaxlib.mlir import passmanager
    version = mosaic_export_version() if version is None else int(version)
    ctx = module.context
    with ctx, ir.Location.unknown():
        clone = module.operation.clone()
        previous = ctx.allow_unregistered_dialects
        ctx.allow_unregistered_dialects = True
        try:
            passmanager.PassManager.parse(
                f"builtin.module(mosaic-serde{{serialize=true target-version={version}}})"
            ).run(clone)
        finally:
            ctx.allow_unregistered_dialects = previous
        buf = io.BytesIO()
        clone.write_bytecode(buf, desired_version=0)
    return buf.getvalue()


def mosaic_kernel(module, out_structs, *, kernel_name: str,
                  input_output_aliases: tuple[tuple[int, int], ...] = (),
                  vmem_limit_bytes: int | None = None,
                  semaphore_outputs: tuple[bool, ...] = ()) -> Callable:
    """A JAX-callable running Mosaic `module` as a `tpu_custom_call` (only TPU
    has a lowering for it): JAX's own wrapper, the one Pallas's lowering uses,
    which serialises the module with `mosaic-serde` at the version the
    lowering asks for (mosaic_export_version() when exporting or without a
    TPU backend) and writes the backend config (with `vmem_limit_bytes`,
    the scoped VMEM the kernel may use, as Pallas's CompilerParams sets)."""
    import jax.numpy as jnp
    from jax._src import tpu_custom_call as tcc
    # A bool operand's Mosaic memref is i32 (docs/tpu.md, "i1 memory"): it
    # crosses the call as int32 and outputs are turned back, as Pallas's
    # pallas_call does; a `pred` operand is refused by libtpu ("Only
    # arguments with ... 32-bit element types", or its XLA tiling does not
    # match Mosaic's).
    is_bool = [np.dtype(s.dtype) == np.bool_ for s in out_structs]
    wire = tuple(jax.ShapeDtypeStruct(s.shape, jnp.int32) if b else s
                 for s, b in zip(out_structs, is_bool))
    # A semaphore output (its int32 counts) lives in semaphore memory, as
    # Pallas's lowering asks for it (output_memory_space_colors).
    spaces = (tuple(tcc.MemorySpace.SEMAPHORE_MEM if s else None for s in semaphore_outputs)
              if any(semaphore_outputs) else None)
    call = tcc.as_tpu_kernel(module, wire if len(wire) != 1 else wire[0],
                             kernel_name=kernel_name,
                             input_output_aliases=tuple(input_output_aliases),
                             vmem_limit_bytes=vmem_limit_bytes,
                             output_memory_spaces=spaces)

    def run(*args):
        args = [a.astype(jnp.int32) if np.dtype(a.dtype) == np.bool_ else a for a in args]
        outs = call(*args)
        single = len(wire) == 1
        outs = (outs,) if single else tuple(outs)
        outs = tuple(o.astype(jnp.bool_) if b else o for o, b in zip(outs, is_bool))
        return outs[0] if single else outs

    return run


def tpu_custom_calls(mlir_module_text: str) -> list[dict]:
    """The `tpu_custom_call`s of a StableHLO module's text (what
    `jax.export(...).mlir_module()` gives): for each, `kernel_name`,
    `config` (the backend config's JSON) and `body` (the decoded bytes)."""
    import base64
    import json
    from jaxlib.mlir import ir
    ctx = mosaic_context()
    found: list[dict] = []
    with ctx, ir.Location.unknown():
        module = ir.Module.parse(mlir_module_text)

        def walk(op) -> None:
            for region in op.regions:
                for block in region.blocks:
                    for inner in block.operations:
                        attrs = inner.operation.attributes
                        if (inner.operation.name == "stablehlo.custom_call"
                                and "call_target_name" in attrs
                                and ir.StringAttr(attrs["call_target_name"]).value
                                == "tpu_custom_call"):
                            config = json.loads(ir.StringAttr(attrs["backend_config"]).value)
                            name = (ir.StringAttr(attrs["kernel_name"]).value
                                    if "kernel_name" in attrs else None)
                            found.append({
                                "kernel_name": name, "config": config,
                                "body": base64.b64decode(
                                    config["custom_call_config"]["body"])})
                        walk(inner.operation)

        walk(module.operation)
    return found


def tpu_device(chip: str):
    """The first device of a one-chip TPU topology for `chip` (tessera's chip
    names: TPU_TOPOLOGIES), from libtpu without a TPU (deviceless AOT).
    Needs libtpu installed and JAX_PLATFORMS=cpu; TPU_SKIP_MDS_QUERY=1 keeps
    libtpu from asking a metadata server."""
    if chip not in TPU_TOPOLOGIES:
        raise ValueError(f"no TPU topology for chip {chip!r} "
                         f"(chips: {', '.join(TPU_TOPOLOGIES)})")
    os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")
    from jax.experimental import topologies
    topo = _TOPOLOGIES.get(chip)
    if topo is None:
        topo = _TOPOLOGIES[chip] = topologies.get_topology_desc(TPU_TOPOLOGIES[chip],
                                                                platform="tpu")
    return topo.devices[0]


_TOPOLOGIES: dict[str, Any] = {}


def compile_for_device(fn: Callable, arg_structs, device):
    """Compiles jax.jit(fn) ahead of time for `device` (a tpu_device())
    with arguments shaped like `arg_structs`; returns the jax Compiled."""
    from jax.sharding import SingleDeviceSharding
    sharding = SingleDeviceSharding(device)
    args = [jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=sharding) for s in arg_structs]
    return jax.jit(fn).trace(*args).lower().compile()


def platform_primitive(name: str, *, abstract_eval: Callable,
                       lowerings: dict[str, Callable]) -> Any:
    """A JAX primitive with multiple results whose lowering depends on the
    platform: `lowerings` maps a platform ("tpu", "cpu") to a function of
    (params, *args) -> outputs traced as JAX code at lowering time, so only the
    target platform's is ever built (an export for TPU never builds the CPU
    one, a CPU call never builds the TPU one). Params: `call`, an object
    passed to abstract_eval(call) -> avals and to the lowerings."""
    from jax._src import dispatch
    from jax._src.interpreters import mlir as jax_mlir
    prim = jax_core.Primitive(name)
    prim.multiple_results = True
    prim.def_impl(lambda *args, call: dispatch.apply_primitive(prim, *args, call=call))
    prim.def_abstract_eval(lambda *avals, call: abstract_eval(call))
    for platform, fn in lowerings.items():
        def rule(ctx, *args, call, fn=fn):
            return jax_mlir.lower_fun(lambda *a: fn(call, *a), multiple_results=True)(ctx, *args)
        jax_mlir.register_lowering(prim, rule, platform=platform)
    return prim
