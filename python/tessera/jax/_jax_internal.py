"""Every use of JAX's private modules (`jax._src`) by tessera.jax, in one place.

JAX's internals change between releases; this module is the only one to
adapt when they do. Tested against jax/jaxlib 0.12.0.1 (docs/jax.md lists
what is used). Everything here either returns plain Python data or JAX
objects the translator only reads through the helpers below.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import sys
import threading
from typing import Any, Callable, Iterator, Sequence

import jax
import numpy as np
from jax._src import core as jax_core
from jax._src import source_info_util
from jax._src import tree_util as jax_tree_util
from jax._src.pallas import core as pallas_core
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
                 "v5p": "TPU v5p", "v6e": "TPU v6 lite", "v7": "TPU7x", "tpu8i": "TPU8i"}


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
    if getattr(gm, "num_dynamic_grid_bounds", 0):
        raise NotImplementedError("tessera.jax: dynamic grid bounds are not supported")
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


def _issub(dtype, cls) -> bool:
    try:
        return jax.numpy.issubdtype(dtype, cls)
    except TypeError:
        return False


@dataclasses.dataclass(frozen=True)
class BlockDim:
    kind: str   # "blocked", "squeezed", "element", "bounded"
    size: int


def block_dims(block_mapping) -> list[BlockDim]:
    out = []
    for bd in block_mapping.block_shape:
        if isinstance(bd, pallas_core.Squeezed) or bd is None:
            out.append(BlockDim("squeezed", 1))
        elif isinstance(bd, pallas_core.Blocked):
            out.append(BlockDim("blocked", int(bd.block_size)))
        elif isinstance(bd, pallas_core.Element):
            out.append(BlockDim("element", int(bd.block_size)))
        elif isinstance(bd, pallas_core.BoundedSlice):
            out.append(BlockDim("bounded", int(bd.block_size)))
        elif isinstance(bd, int):
            out.append(BlockDim("blocked", bd))
        else:
            raise JaxInternalsError(f"tessera.jax: unknown block dimension {bd!r}")
    return out


def _src_location(debug_info) -> tuple[str, int, int] | None:
    src = getattr(debug_info, "func_src_info", None) or ""
    m = re.search(r" at (.+):(\d+)$", src)
    return (m.group(1), int(m.group(2)), 1) if m else None


def index_map_location(block_mapping) -> tuple[str, int, int] | None:
    """(file, line, col) of a BlockSpec's index map function (the user's
    lambda), or None."""
    cj = block_mapping.index_map_jaxpr
    for e in cj.jaxpr.eqns:
        loc = user_location(e)
        if loc[0]:
            return loc
    return _src_location(getattr(cj.jaxpr, "debug_info", None))


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
    """One dimension of an NDIndexer: a point (start) or a slice
    (start, size, stride). `start` is an int, a Var or a Literal."""
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


def ndindexer_dims(idx) -> list[DimIndex]:
    """Decodes an NDIndexer (static or pl.ds entries) into DimIndex per
    dimension of the ref it indexes."""
    if not isinstance(idx, state_indexing.NDIndexer):
        raise NotImplementedError(f"a ref transform of type {type(idx).__name__}")
    if any(not isinstance(i, state_indexing.Slice) and len(_aval_shape(i)) > 0
           for i in idx.indices):
        raise NotImplementedError("indexing a ref with an array of indices (gather)")
    out = []
    for i in idx.indices:
        if isinstance(i, state_indexing.Slice):
            size = i.size
            if not isinstance(size, (int, np.integer)):
                if isinstance(size, Literal):
                    size = size.val
                else:
                    raise NotImplementedError("a pl.ds with a dynamic size")
            out.append(DimIndex("slice", i.start, int(size), int(i.stride)))
        else:
            out.append(DimIndex("point", i))
    return out


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
    """The jaxpr's text plus every equation's user location, recursively:
    what decides the translated kernel (with the grid mapping)."""
    parts = [str(jaxpr)]

    def walk(j):
        for e in j.eqns:
            parts.append("%s:%d:%d" % user_location(e))
            for sub in jax_core.jaxprs_in_params(e.params):
                walk(sub)
    walk(jaxpr)
    return "\n".join(parts)


def grid_mapping_key_text(gm) -> str:
    parts = [repr(tuple(gm.grid)), str(gm.num_index_operands), str(gm.num_inputs),
             str(gm.num_outputs), str(gm.num_scratch_operands), repr(gm.scratch_avals)]
    for bm in gm.block_mappings:
        parts.append(f"{bm.block_shape}|{bm.array_aval}|{bm.transformed_block_aval}|"
                     f"{bm.index_map_jaxpr}|{bm.transforms}")
    return "\n".join(parts)


# ---- Intercepting pl.pallas_call ---------------------------------------------------

_patch_lock = threading.Lock()
_patch_depth = 0
_original_pallas_call = pallas_call_module._pallas_call


def original_pallas_call_impl() -> Callable:
    """jax's own `_pallas_call` (what `pl.pallas_call` ends in), unpatched."""
    return _original_pallas_call


def install_pallas_call_hook(hook: Callable) -> None:
    """Makes every `pl.pallas_call(...)` go through `hook(original, kernel,
    out_shape, **kwargs)`, whoever imported it: `pl.pallas_call` reads the
    module global `_pallas_call` at each call, so patching that one name
    catches every spelling. Reference-counted; undone by remove."""
    global _patch_depth
    with _patch_lock:
        if _patch_depth == 0:
            def patched(kernel, out_shape, **kwargs):
                return hook(_original_pallas_call, kernel, out_shape, **kwargs)
            pallas_call_module._pallas_call = patched
        _patch_depth += 1


def remove_pallas_call_hook() -> None:
    global _patch_depth
    with _patch_lock:
        _patch_depth -= 1
        if _patch_depth == 0:
            pallas_call_module._pallas_call = _original_pallas_call


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
    written afterwards). Through the device put that jax.device_put ends in:
    ~6 us per array, where jax.device_put and jnp.asarray spend 50-80 us in
    their Python layers (bench/python/bench_bridge.py)."""
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
