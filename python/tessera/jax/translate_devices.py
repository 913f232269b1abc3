"""DMAs, semaphores and devices: dma_start (local and remote), dma_wait,
semaphore_signal / wait / read, device ids (lax.axis_index of mesh axes,
the device_id of remote DMAs and signals, numbered as JAX's TPU interpret
mode numbers a mesh's devices) and the barrier semaphore."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import _builder as B
from . import _jax_internal as ji
from .translate_core import VIEW_OPS, RefView, register


#: what a device id (mesh coordinates -> the logical id) builds
_DEVICE_OPS = ("device_id", "div", "rem", "add", "mul", "convert")


def _dma_common(t, env, region, eqn):
    src, dst, dst_sem, src_sem, device_id = ji.unflatten(eqn.params["tree"], eqn.invars)
    return src, dst, dst_sem, src_sem, device_id


# Device ids. tessera's devices are numbered 0..N-1 (`device_id`); JAX's TPU
# interpret mode numbers a mesh's devices the same way: the logical id of the
# mesh coordinates (c0, c1, ...) over the axes (s0, s1, ...) of its axis
# environment is row-major, sum(c_i * prod(s_{i+1:})) (jax/_src/pallas/mosaic/
# interpret/utils.py, device_coords_to_logical_id). A coordinate is therefore
# (id // prod(s_{i+1:})) % s_i.


def _mesh(t) -> tuple:
    if t.mesh is None:
        raise t.fail("a mesh device id needs the mesh (call the kernel inside shard_map)")
    return t.mesh


def _axis_coord(t, region, axis) -> Any:
    """This device's coordinate along the mesh axis `axis` (an i32 Value)."""
    mesh = _mesh(t)
    names = [n for n, _ in mesh]
    if axis not in names:
        raise t.fail(f"mesh axis {axis!r} is not an axis of the enclosing shard_map "
                     f"(its axes: {', '.join(map(repr, names)) or 'none'})")
    i = names.index(axis)
    size = mesh[i][1]
    inner = int(np.prod([s for _, s in mesh[i + 1:]], dtype=np.int64))
    total = int(np.prod([s for _, s in mesh], dtype=np.int64))
    if size == 1:
        return 0
    c = t.emit(region, "device_id", [], B.Type.value("i32", ()))
    if inner != 1:
        c = t.emit(region, "div", [c, t.i32(region, inner)], B.Type.value("i32", ()))
    if size * inner != total:
        c = t.emit(region, "rem", [c, t.i32(region, size)], B.Type.value("i32", ()))
    return c


def _logical_of_coords(t, region, coords: dict) -> Any:
    """The logical id of mesh coordinates {axis: int or Value}; axes not
    given are this device's own (as JAX fills them in)."""
    mesh = _mesh(t)
    out: Any = 0
    stride = 1
    for name, size in reversed(mesh):
        c = coords[name] if name in coords else _axis_coord(t, region, name)
        out = t.iarith(region, "add", out, t.iarith(region, "mul", c, stride))
        stride *= size
    return out


def _split_combined(t, region, axes: tuple, idx) -> dict:
    """The coordinates {axis: int or Value} that the index `idx` over the
    combined axes `axes` names: row-major over `axes` in the order given (as
    lax.axis_index of that tuple numbers them), the coordinate along axes[i]
    being (idx // prod(sizes[i+1:])) % sizes[i] with floor division and
    modulus, as JAX's TPU interpret mode computes it (so an index out of
    range wraps, the outermost axis included). Mosaic's lowering agrees
    except on a negative index along an axis whose size is not a power of
    two (its lax.rem keeps the sign there, naming no device)."""
    sizes = dict(_mesh(t))
    missing = [a for a in axes if a not in sizes]
    if missing:
        raise t.fail(f"a device id over the combined axes {axes}, of which "
                     f"{', '.join(map(repr, missing))} is not an axis of the enclosing "
                     f"shard_map (its axes: {', '.join(map(repr, sizes))})")
    if len(set(axes)) != len(axes):
        raise t.fail(f"a device id over the combined axes {axes}, naming an axis twice")
    out = {}
    for i, axis in enumerate(axes):
        inner = int(np.prod([sizes[a] for a in axes[i + 1:]], dtype=np.int64))
        span = inner * sizes[axis]
        if not isinstance(idx, B.Value):
            out[axis] = (idx // inner) % sizes[axis]
            continue
        if sizes[axis] == 1:
            out[axis] = 0
            continue
        # floor(idx / inner) mod size == (idx mod span) // inner, with
        # idx mod span >= 0 (so the division truncates as it floors)
        ty = B.Type.value("i32", ())
        v = t.i32(region, idx)
        r = t.emit(region, "rem", [v, t.i32(region, span)], ty)
        r = t.emit(region, "add", [r, t.i32(region, span)], ty)
        r = t.emit(region, "rem", [r, t.i32(region, span)], ty)
        if inner != 1:
            r = t.emit(region, "div", [r, t.i32(region, inner)], ty)
        out[axis] = r
    return out


def _device_operand(t, env, region, device_id, eqn=None):
    """The i32 logical device id of a DMA's or signal's `device_id` (None
    when the op is local)."""
    if device_id is None:
        return None
    kind = getattr((eqn.params if eqn is not None else {}).get("device_id_type"),
                   "value", "mesh")
    if kind == "logical":
        if isinstance(device_id, (tuple, list, dict)):
            raise t.fail("a LOGICAL device id that is not one number")
        return t.i32(region, t.static_int(env, device_id))
    if kind != "mesh":
        raise t.fail(f"device id type {kind!r}")
    if t.mesh is None:  # no mesh known: a one-axis mesh, where the id is the coordinate
        if isinstance(device_id, dict) and len(device_id) == 1:
            (axis, device_id), = device_id.items()
            if isinstance(axis, tuple) and len(axis) > 1:
                raise t.fail(f"a mesh device id over the combined axes {axis} outside "
                             "shard_map")
        if isinstance(device_id, (tuple, list)) and len(device_id) == 1:
            device_id = device_id[0]
        if isinstance(device_id, (tuple, list, dict)):
            raise t.fail("a mesh device id with several axes outside shard_map")
        return t.i32(region, t.static_int(env, device_id))
    names = [n for n, _ in t.mesh]
    if isinstance(device_id, dict):
        coords = {}
        for axis, idx in device_id.items():
            if isinstance(axis, tuple) and len(axis) == 1:
                axis = axis[0]
            if isinstance(axis, tuple):
                coords.update(_split_combined(t, region, axis, t.static_int(env, idx)))
                continue
            if axis not in names:
                raise t.fail(f"a device id on axis {axis!r}, which is not an axis of the "
                             f"enclosing shard_map (its axes: {', '.join(map(repr, names))})")
            coords[axis] = t.static_int(env, idx)
    else:
        ids = list(device_id) if isinstance(device_id, (tuple, list)) else [device_id]
        if len(ids) != len(names):
            raise t.fail(f"a mesh device id of {len(ids)} coordinate(s) on a mesh of "
                         f"{len(names)} axes ({', '.join(map(repr, names))})")
        coords = {n: t.static_int(env, i) for n, i in zip(names, ids)}
    return t.i32(region, _logical_of_coords(t, region, coords))


@register("dma_start", emits=("dma_start", *VIEW_OPS, *_DEVICE_OPS))
def _dma_start(t, env, region, eqn, used):
    src, dst, dst_sem, src_sem, device_id = _dma_common(t, env, region, eqn)
    sv, dv = t.view_of(env, region, src), t.view_of(env, region, dst)
    semv = t.view_of(env, region, dst_sem)
    flags = 0
    fixed = [sv.base, dv.base, semv.base]
    idx = t.indices(sv) + t.indices(dv) + t.indices(semv)
    if src_sem is not None:
        ssv = t.view_of(env, region, src_sem)
        fixed.append(ssv.base)
        idx += t.indices(ssv)
        flags |= B.OPF_SEND
    extra = []
    dev = _device_operand(t, env, region, device_id, eqn)
    if dev is not None:
        extra.append(dev)
        flags |= B.OPF_DEVICE
    if eqn.params.get("add"):
        flags |= B.OPF_DMA_ADD
    ints = [len(sv.dims), len(dv.dims), len(semv.dims)]
    t.op(region, "dma_start", fixed, [], indices=idx, extra_operands=extra, ints=ints,
         flags=flags)
    return []


@register("dma_wait", emits=("dma_wait", *VIEW_OPS))
def _dma_wait(t, env, region, eqn, used):
    src, dst, dst_sem, src_sem, device_id = _dma_common(t, env, region, eqn)
    # wait_read / wait_send (is_wait_send) bind dma_wait with the copy's
    # source and destination (and their semaphores) already swapped (jax
    # 0.12, pallas/mosaic/primitives.py): the semaphore waited on is in the
    # destination-semaphore slot either way, and the view is its own side's.
    if eqn.params.get("is_wait_send") and dst_sem is None:
        raise t.fail("wait_send without a source semaphore")
    dv = t.view_of(env, region, dst)
    sv = t.view_of(env, region, src) if src is not None else dv
    semv = t.view_of(env, region, dst_sem)
    idx = t.indices(sv) + t.indices(dv) + t.indices(semv)
    t.op(region, "dma_wait", [sv.base, dv.base, semv.base], [], indices=idx,
         ints=[len(sv.dims), len(dv.dims), len(semv.dims)])
    return []


@register("semaphore_signal", emits=("sem_signal", *VIEW_OPS, *_DEVICE_OPS))
def _sem_signal(t, env, region, eqn, used):
    ref, transforms, inc, device_id, core_index = ji.unflatten(eqn.params["args_tree"],
                                                               eqn.invars)
    view = t.apply_transforms(env, region, t.ref(env, ref), transforms)
    amount = t.i32(region, t.static_int(env, inc))
    extra, flags = [], 0
    dev = _device_operand(t, env, region, device_id, eqn)
    if dev is not None:
        extra.append(dev)
        flags |= B.OPF_DEVICE
    if core_index is not None:
        extra.append(t.i32(region, t.static_int(env, core_index)))
        flags |= B.OPF_CORE
    t.op(region, "sem_signal", [view.base, amount], [], indices=t.indices(view),
         extra_operands=extra, flags=flags)
    return []


@register("semaphore_wait", emits=("sem_wait", *VIEW_OPS))
def _sem_wait(t, env, region, eqn, used):
    ref, transforms, value, decrement = ji.unflatten(eqn.params["args_tree"], eqn.invars)
    if not ji.literal_value(decrement if decrement is not None else True):
        raise t.fail("semaphore_wait without decrement")
    view = t.apply_transforms(env, region, t.ref(env, ref), transforms)
    amount = t.i32(region, t.static_int(env, value))
    t.op(region, "sem_wait", [view.base, amount], [], indices=t.indices(view))
    return []


@register("semaphore_read", emits=("sem_read", *VIEW_OPS))
def _sem_read(t, env, region, eqn, used):
    ref, transforms = ji.unflatten(eqn.params["args_tree"], eqn.invars)
    view = t.apply_transforms(env, region, t.ref(env, ref), transforms)
    return [t.emit(region, "sem_read", [view.base], B.Type.value("i32", ()),
                   indices=t.indices(view))]


@register("device_id", emits=("device_id",))
def _device_id(t, env, region, eqn, used):
    return [t.emit(region, "device_id", [], B.Type.value("i32", ()))]


def _grid_axes(t) -> dict:
    """{name: (dimension, size)} of the grid's named dimensions (a grid given
    as ((name, size), ...)). The names index the whole grid, vmapped
    dimensions included, as tessera's grid is the whole grid."""
    gm = t.call.grid_mapping
    names = getattr(gm, "grid_names", None) or ()
    return {n: (d, int(s)) for d, (n, s) in enumerate(zip(names, gm.grid)) if n is not None}


@register("axis_index", emits=(*_DEVICE_OPS, "program_id"))
def _axis_index(t, env, region, eqn, used):
    names = eqn.params["axis_name"]
    names = tuple(names) if isinstance(names, (tuple, list)) else (names,)
    # A name of the grid's is the grid step's index along that dimension
    # (what program_id gives), not a device's coordinate: a named grid puts
    # its names in the axis environment the kernel is traced in, and Mosaic
    # and JAX's interpret mode both read them from the grid first.
    grid_axes = _grid_axes(t)
    if t.mesh is None and not any(n in grid_axes for n in names):
        # no mesh known: one axis, whose index is the device id
        if len(names) != 1:
            raise t.fail(f"lax.axis_index over the axes {names} outside shard_map")
        return _device_id(t, env, region, eqn, used)
    sizes = dict(t.mesh or ())
    out: Any = 0
    stride = 1
    for name in reversed(names):  # a tuple of axes: their combined row-major index
        if name in grid_axes:
            dim, size = grid_axes[name]
            c = t.emit(region, "program_id", [], B.Type.value("i32", ()), ints=[dim])
        else:
            c, size = _axis_coord(t, region, name), sizes[name]
        out = t.iarith(region, "add", out, t.iarith(region, "mul", c, stride))
        stride *= size
    return [t.i32(region, out)]


@register("get_barrier_semaphore")
def _barrier_semaphore(t, env, region, eqn, used):
    # One regular semaphore per kernel, kernel scratch (so zero at the start
    # of every run and checked to be zero at its end), signalled across
    # devices like any other (docs/dma.md, "Decisions").
    if t.barrier is None:
        t.barrier, _ = t.kb.add_operand(B.ROLE_SCRATCH, "barrier", B.Type.sem(False, ()))
    return [RefView.whole(t.barrier)]
