"""Reads and writes of refs: `get` (also through `ref.reshape`), `swap`,
`addupdate`, and the masked forms `masked_load` / `masked_swap`
(pltpu.load / pltpu.store with a mask). The view a ref is indexed through
(NDIndexers, `.at[...]`) is the core's (Translator.apply_transforms)."""

from __future__ import annotations

from .. import _builder as B
from . import _jax_internal as ji
from .translate_core import (BCAST_OPS, RESHAPE_OPS, VIEW_OPS, RefView, bcast, convert_value,
                             out_type, register, reshape_to)


#: what a read through a reshaped ref builds besides the load and reshapes
_GET_RESHAPED = ("iota", "eq", "ge", "lt", "and", "sub", "rem", "roll", "neg", "slice")


@register("get", emits=("load", "ne", *VIEW_OPS, *RESHAPE_OPS, *_GET_RESHAPED))
def _get(t, env, region, eqn, used):
    transforms = ji.unflatten(eqn.params["tree"], eqn.invars[1:])
    view = t.apply_transforms(env, region, t.ref(env, eqn.invars[0]), transforms)
    rt = out_type(eqn)
    if view.reshaped is not None:
        return [_get_reshaped(t, region, view, rt)]
    narrow = t.narrowed.get(view.base.ptr)
    if narrow is not None:  # a widened prefetch table: read i32, convert back
        wide = t.emit(region, "load", [view.base], B.Type.value("i32", rt.shape),
                      indices=t.indices(view))
        return [convert_value(t, region, wide, rt)]
    return [t.emit(region, "load", [view.base], rt, indices=t.indices(view))]


def _get_reshaped(t, region, view: RefView, rt: B.Type) -> B.Value:
    """A read through `ref.reshape(R)[idx]`: a load of the view before the
    reshape, masked to the elements idx selects (others are not read, so no
    uninitialized-read reports for them), reshaped to R, then the selected
    elements taken out of the value (a roll and a strided slice per
    dimension)."""
    R, S = view.reshaped, view.pre_shape
    dt = view.base.type.dtype
    it, bt = B.Type.value("i32", R), B.Type.value("i1", R)
    i32 = B.Type.value("i32", ())
    mask = None
    for d, e in enumerate(view.rdims):
        io = t.emit(region, "iota", [], it, ints=[d])
        if e[0] == "point":
            m = t.emit(region, "eq", [io, t.i32(region, e[1])], bt)
        else:
            _, s, n, st = e
            if not isinstance(s, B.Value) and s == 0 and n == R[d] and st == 1:
                continue
            s32 = t.i32(region, s)
            end = t.emit(region, "add", [s32, t.const(region, n * st, i32)], i32) \
                if isinstance(s, B.Value) else t.const(region, s + n * st, i32)
            m = t.emit(region, "and", [t.emit(region, "ge", [io, s32], bt),
                                       t.emit(region, "lt", [io, end], bt)], bt)
            if st > 1:
                off = t.emit(region, "sub", [io, s32], it)
                r = t.emit(region, "rem", [off, t.const(region, st, i32)], it)
                m = t.emit(region, "and", [m, t.emit(region, "eq", [r, t.const(
                    region, 0, i32)], bt)], bt)
        mask = m if mask is None else t.emit(region, "and", [mask, m], bt)
    vt = B.Type.value(dt, S)
    pre = RefView(view.base, view.dims)
    if mask is None:
        v = t.emit(region, "load", [view.base], vt, indices=t.indices(pre))
    else:
        ms = t.emit(region, "reshape", [mask], B.Type.value("i1", S))
        v = t.emit(region, "load", [view.base], vt, indices=t.indices(pre),
                   extra_operands=[ms], flags=B.OPF_MASK)
    v = t.emit(region, "reshape", [v], B.Type.value(dt, R)) if S != R else v
    idx = []
    out_shape = []
    for d, e in enumerate(view.rdims):
        start = e[1]
        if not (not isinstance(start, B.Value) and start == 0):
            shift = t.emit(region, "neg", [t.i32(region, start)], i32)
            v = t.emit(region, "roll", [v, shift], v.type, ints=[d])
        n, st = (1, 1) if e[0] == "point" else (e[2], e[3])
        idx.append(B.Index("full", 0, R[d], 1) if (n, st) == (R[d], 1)
                   else B.Index("slice", 0, n, st))
        out_shape.append(n)
    if any(i.kind != "full" for i in idx):
        v = t.emit(region, "slice", [v], B.Type.value(dt, out_shape), indices=idx)
    return reshape_to(t, region, v, rt)


@register("swap", emits=("load", "store", *VIEW_OPS))
def _swap(t, env, region, eqn, used):
    transforms = ji.unflatten(eqn.params["tree"], eqn.invars[2:])
    view = t.apply_transforms(env, region, t.ref(env, eqn.invars[0]), transforms)
    val = t.read(env, region, eqn.invars[1])
    idx = t.indices(view)
    old = None
    if eqn.outvars and eqn.outvars[0] in used:
        old = t.emit(region, "load", [view.base], out_type(eqn), indices=idx)
    t.op(region, "store", [view.base, val], [], indices=idx)
    return [old]


@register("addupdate", emits=("load", "add", "store", *VIEW_OPS))
def _addupdate(t, env, region, eqn, used):
    transforms = ji.unflatten(eqn.params["tree"], eqn.invars[2:])
    view = t.apply_transforms(env, region, t.ref(env, eqn.invars[0]), transforms)
    val = t.read(env, region, eqn.invars[1])
    idx = t.indices(view)
    vt = B.Type.value(view.base.type.dtype, view.shape)
    old = t.emit(region, "load", [view.base], vt, indices=idx)
    new = t.emit(region, "add", [old, val], vt)
    t.op(region, "store", [view.base, new], [], indices=idx)
    return []


def _mask_of(t, env, region, mask, shape) -> B.Value:
    m = t.read(env, region, mask)
    if m.type.kind == "scalar":
        return t.emit(region, "broadcast", [m], B.Type.value("i1", shape))
    return bcast(t, region, m, shape)


@register("masked_load", emits=("load", "select", *BCAST_OPS, *VIEW_OPS))
def _masked_load(t, env, region, eqn, used):
    ref, transforms, mask, other = ji.unflatten(eqn.params["args_tree"], eqn.invars)
    view = t.apply_transforms(env, region, t.ref(env, ref), transforms)
    rt = out_type(eqn)
    idx = t.indices(view)
    if mask is None:
        return [t.emit(region, "load", [view.base], rt, indices=idx)]
    m = _mask_of(t, env, region, mask, rt.shape)
    v = t.emit(region, "load", [view.base], rt, indices=idx, extra_operands=[m],
               flags=B.OPF_MASK)
    if other is not None:
        o = bcast(t, region, t.read(env, region, other), rt.shape)
        v = t.emit(region, "select", [m, v, o], rt)
    return [v]


@register("masked_swap", emits=("load", "store", *BCAST_OPS, *VIEW_OPS))
def _masked_swap(t, env, region, eqn, used):
    ref, transforms, val, mask = ji.unflatten(eqn.params["args_tree"], eqn.invars)
    view = t.apply_transforms(env, region, t.ref(env, ref), transforms)
    vt = B.Type.value(view.base.type.dtype, view.shape)
    idx = t.indices(view)
    v = bcast(t, region, t.read(env, region, val), vt.shape)
    extra, flags = [], 0
    if mask is not None:
        extra, flags = [_mask_of(t, env, region, mask, vt.shape)], B.OPF_MASK
    old = None
    if eqn.outvars and eqn.outvars[0] in used:
        old = t.emit(region, "load", [view.base], vt, indices=idx, extra_operands=extra,
                     flags=flags)
    t.op(region, "store", [view.base, v], [], indices=idx, extra_operands=extra, flags=flags)
    return [old]
