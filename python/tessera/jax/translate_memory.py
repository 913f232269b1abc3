"""Reads and writes of refs: `get` (also through `ref.reshape`), `swap`,
`addupdate`, and the masked forms `masked_load` / `masked_swap`
(pltpu.load / pltpu.store with a mask). The view a ref is indexed through
(NDIndexers, `.at[...]`) is the core's (Translator.apply_transforms)."""

from __future__ import annotations

import numpy as np

from .. import _builder as B
from . import _jax_internal as ji
from .translate_core import (BCAST_OPS, RESHAPE_OPS, TPU_BITCAST_OPS, VIEW_OPS, RefView, bcast,
                             convert_value, out_type, register, reshape_to, tpu_bitcast)


#: what a read through a reshaped or bitcast ref builds besides the load
#: and reshapes
_GET_RESHAPED = ("iota", "eq", "ge", "lt", "and", "sub", "rem", "roll", "neg", "slice",
                 "reduce_or", "assert", *TPU_BITCAST_OPS)
#: and what a write of part of one builds besides those
_SWAP_RESHAPED = ("div", "max", "min", "mul", "add", "gather", "select", "reduce_and", "not")
#: what indexing a ref by arrays of indices builds besides loads and stores
_BY_ARRAYS = ("gather", "iota", "lt", "add", "mul", "select", "max", "min", "convert",
              *BCAST_OPS)


@register("get", emits=("load", "ne", *VIEW_OPS, *RESHAPE_OPS, *_GET_RESHAPED, *_BY_ARRAYS))
def _get(t, env, region, eqn, used):
    transforms = ji.unflatten(eqn.params["tree"], eqn.invars[1:])
    view = t.apply_transforms(env, region, t.ref(env, eqn.invars[0]), transforms)
    rt = out_type(eqn)
    if view.reshaped is not None:
        return [_get_reshaped(t, region, view, rt)]
    if view.arrays:
        whole = t.emit(region, "load", [view.base], B.Type.value(rt.dtype, view.shape),
                       indices=t.indices(view))
        return [_gather_view(t, env, region, view, whole, rt)]
    narrow = t.narrowed.get(view.base.ptr)
    if narrow is not None:  # a widened prefetch table: read i32, convert back
        wide = t.emit(region, "load", [view.base], B.Type.value("i32", rt.shape),
                      indices=t.indices(view))
        return [convert_value(t, region, wide, rt)]
    return [t.emit(region, "load", [view.base], rt, indices=t.indices(view))]


def _array_positions(view: RefView, rshape) -> tuple[list, int]:
    """Where the dimensions of `x_ref[idx]` go, by numpy's rule: the arrays'
    common shape B in place of the indexed dimensions when they are
    adjacent, else first; the sliced dimensions in order around it. Returns
    the result axis of each sliced dimension (None for an indexed one) and
    B's first axis."""
    nb, n = len(view.index_shape), len(view.shape)
    ords = sorted(view.arrays)
    first = ords[0] if ords == list(range(ords[0], ords[-1] + 1)) else 0
    axes, q = [], 0
    for k in range(n):
        if k in view.arrays:
            axes.append(None)
        else:
            axes.append(q + nb if q >= first else q)
            q += 1
    assert len(rshape) == q + nb
    return axes, first


def _index_along(t, env, region, view: RefView, k: int, rshape, first: int) -> B.Value:
    """The i32 indices into dimension k of the view that the array indexing
    it gives, negative ones counted from the end and the others clamped into
    the dimension (as jnp indexing does), broadcast to the result's shape."""
    a = t.read(env, region, view.arrays[k])
    bshape = view.index_shape
    it = B.Type.value("i32", bshape)
    if a.type.dtype != "i32":
        a = t.emit(region, "convert", [a], it)
    a = bcast(t, region, a, bshape)
    i32 = B.Type.value("i32", ())
    n = view.shape[k]
    neg = t.emit(region, "lt", [a, t.const(region, 0, i32)], B.Type.value("i1", bshape))
    a = t.emit(region, "select", [neg, t.emit(region, "add", [a, t.const(region, n, i32)], it),
                                  a], it)
    # Out of range after that: clamped into the dimension, as JAX reads it
    # (jnp indexing's gather); the flat positions below must never let an
    # index run into the next row.
    a = t.emit(region, "max", [a, t.const(region, 0, i32)], it)
    a = t.emit(region, "min", [a, t.const(region, n - 1, i32)], it)
    shape = [1] * len(rshape)
    shape[first:first + len(bshape)] = bshape
    if tuple(shape) != tuple(bshape):
        a = t.emit(region, "reshape", [a], B.Type.value("i32", shape))
    if tuple(shape) != tuple(rshape):
        a = t.emit(region, "broadcast", [a], B.Type.value("i32", rshape))
    return a


def gather_indices(t, env, region, view: RefView, rshape) -> tuple[int | None, B.Value]:
    """The IR's gather indices for reading `view` (loaded whole along the
    indexed dimensions) as `x_ref[idx]` of shape rshape: (axis, indices of
    shape rshape) when one dimension is indexed by a 1-D array (a gather
    along that axis, Mosaic's tpu.dynamic_gather), else (None, the flat
    row-major positions into the view, of shape rshape)."""
    axes, first = _array_positions(view, rshape)
    if len(view.arrays) == 1 and len(view.index_shape) == 1:
        (k,) = view.arrays
        return k, _index_along(t, env, region, view, k, rshape, first)
    it = B.Type.value("i32", rshape)
    i32 = B.Type.value("i32", ())
    flat, stride = None, 1
    for k in reversed(range(len(view.shape))):
        if axes[k] is None:
            c = _index_along(t, env, region, view, k, rshape, first)
        else:
            c = t.emit(region, "iota", [], it, ints=[axes[k]])
        if stride != 1:
            c = t.emit(region, "mul", [c, t.const(region, stride, i32)], it)
        flat = c if flat is None else t.emit(region, "add", [flat, c], it)
        stride *= view.shape[k]
    return None, flat


def _gather_view(t, env, region, view: RefView, whole: B.Value, rt: B.Type) -> B.Value:
    """`x_ref[idx]` from the view loaded whole along its indexed dimensions:
    the IR's gather along the one indexed axis, or of the flattened view by
    flat positions (several arrays, or arrays of rank > 1)."""
    axis, idx = gather_indices(t, env, region, view, rt.shape)
    if axis is not None:
        return t.emit(region, "gather", [whole, idx], rt, ints=[axis])
    n = int(np.prod(whole.type.shape))
    m = int(np.prod(rt.shape))
    flat = reshape_to(t, region, whole, B.Type.value(rt.dtype, (n,)))
    fidx = reshape_to(t, region, idx, B.Type.value("i32", (m,)))
    g = t.emit(region, "gather", [flat, fidx], B.Type.value(rt.dtype, (m,)), ints=[0])
    return reshape_to(t, region, g, rt)


def _mask_back(t, region, view: RefView, mask: B.Value, every: bool = False) -> B.Value:
    """The mask of the view's elements after its chain, as a mask of the
    view before it: a reshape's shape undone; an element of a bitcast that
    widens (k narrow rows to one along the second-minor dimension) needs
    its k parts, one that narrows needs the wide row it is part of (with
    `every`: the wide rows all of whose parts the mask holds)."""
    for step, before, after in reversed(list(zip(view.chain, view.shapes, view.shapes[1:]))):
        if step[0] == "bitcast" and tuple(before) != tuple(after):
            *lead, r, c = after
            if before[-2] > r:  # widening: each row stands for k rows before
                k = before[-2] // r
                m = t.emit(region, "reshape", [mask], B.Type.value("i1", (*lead, r, 1, c)))
                m = t.emit(region, "broadcast", [m], B.Type.value("i1", (*lead, r, k, c)))
                mask = t.emit(region, "reshape", [m], B.Type.value("i1", before))
            else:  # narrowing: k rows are parts of one row before
                k = r // before[-2]
                m = t.emit(region, "reshape", [mask],
                           B.Type.value("i1", (*lead, before[-2], k, c)))
                mask = t.emit(region, "reduce_and" if every else "reduce_or", [m],
                              B.Type.value("i1", before), ints=[len(lead) + 1])
        elif tuple(before) != tuple(after):
            mask = t.emit(region, "reshape", [mask], B.Type.value("i1", before))
    return mask


def chain_forward(t, region, view: RefView, v: B.Value) -> B.Value:
    """The value of the view before its chain (`v`) through the chain's
    reshapes and bitcasts (a ref's bitcast is pltpu.bitcast along the
    second-minor dimension, as the TPU lays memory out)."""
    for step, after in zip(view.chain, view.shapes[1:]):
        if step[0] == "bitcast":
            v = tpu_bitcast(t, region, v, step[1], -2 if len(after) >= 2 else -1)
        elif tuple(v.type.shape) != tuple(after):
            v = t.emit(region, "reshape", [v], B.Type.value(v.type.dtype, after))
    return v


def chain_backward(t, region, view: RefView, v: B.Value) -> B.Value:
    """A value of the view's shape after its chain, taken back through it:
    what a whole write of the view stores into the view before it."""
    dtypes = [view.base.type.dtype]
    for step in view.chain:
        dtypes.append(step[1] if step[0] == "bitcast" else dtypes[-1])
    for i in reversed(range(len(view.chain))):
        before = view.shapes[i]
        if view.chain[i][0] == "bitcast":
            v = tpu_bitcast(t, region, v, dtypes[i], -2 if len(before) >= 2 else -1)
        elif tuple(v.type.shape) != tuple(before):
            v = t.emit(region, "reshape", [v], B.Type.value(v.type.dtype, before))
    return v


def _check_chain_bounds(t, region, view: RefView) -> None:
    """The last indexer of a reshaped or bitcast view lies within the view's
    shape R: the IR's `assert` of each start that is not known to (a kernel
    error located at the access, as an index outside a ref is; a TPU would
    read or write the wrong elements)."""
    R = view.reshaped
    i32, b1 = B.Type.value("i32", ()), B.Type.value("i1", ())
    for d, e in enumerate(view.rdims):
        s = e[1]
        n, st = (1, 1) if e[0] == "point" else (e[2], e[3])
        last = (n - 1) * st
        if not isinstance(s, B.Value):
            if 0 <= s and s + last < R[d]:
                continue
            s = t.const(region, int(s), i32)
        s = t.i32(region, s)
        ok = t.emit(region, "and", [
            t.emit(region, "ge", [s, t.const(region, 0, i32)], b1),
            t.emit(region, "lt", [s, t.const(region, R[d] - last, i32)], b1)], b1)
        t.op(region, "assert", [ok], [], text=(
            f"index out of bounds for dimension {d} of a reshaped or bitcast ref view of "
            f"shape {list(R)}: {'the index' if e[0] == 'point' else f'a slice of {n}'}"
            f"{f' by {st}' if st > 1 else ''} must start in [0, {R[d] - last})"))


def _selection_mask(t, region, view: RefView) -> B.Value | None:
    """The elements of R, the shape of a reshaped or bitcast view, that its
    last indexer selects (i1 of shape R), or None when it selects all."""
    R = view.reshaped
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
    return mask


def _get_reshaped(t, region, view: RefView, rt: B.Type) -> B.Value:
    """A read through `ref.reshape(R)[idx]` or `ref.bitcast(dtype)[idx]`
    (and chains of them): a load of the view before them, masked to the
    elements idx selects (others are not read, so no uninitialized-read
    reports for them), taken through the chain's reshapes and bitcasts to
    R, then the selected elements taken out of the value (a roll and a
    strided slice per dimension)."""
    R, S = view.reshaped, view.pre_shape
    dt = view.dtype
    i32 = B.Type.value("i32", ())
    _check_chain_bounds(t, region, view)
    mask = _selection_mask(t, region, view)
    vt = B.Type.value(view.base.type.dtype, S)
    pre = RefView(view.base, view.dims)
    if mask is None:
        v = t.emit(region, "load", [view.base], vt, indices=t.indices(pre))
    else:
        ms = _mask_back(t, region, view, mask)
        if tuple(ms.type.shape) != tuple(S):
            ms = t.emit(region, "reshape", [ms], B.Type.value("i1", S))
        v = t.emit(region, "load", [view.base], vt, indices=t.indices(pre),
                   extra_operands=[ms], flags=B.OPF_MASK)
    v = chain_forward(t, region, view, v)
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


def _scatter_into(t, region, base: B.Value, axis, idx: B.Value, val: B.Value) -> B.Value:
    """`base` (a block of the view's shape) with `val` (of the indexed
    shape) put where gather_indices's (axis, idx) point: the IR's scatter,
    along the axis or of the flattened block by flat positions."""
    val = bcast(t, region, val, idx.type.shape)
    if val.type.kind == "scalar":
        val = t.emit(region, "broadcast", [val], B.Type.value(val.type.dtype, idx.type.shape))
    if axis is not None:
        return t.emit(region, "scatter", [base, idx, val], base.type, ints=[axis])
    dt = base.type.dtype
    n = int(np.prod(base.type.shape))
    m = int(np.prod(idx.type.shape))
    flat = reshape_to(t, region, base, B.Type.value(dt, (n,)))
    fidx = reshape_to(t, region, idx, B.Type.value("i32", (m,)))
    fval = reshape_to(t, region, val, B.Type.value(dt, (m,)))
    s = t.emit(region, "scatter", [flat, fidx, fval], flat.type, ints=[0])
    return reshape_to(t, region, s, base.type)


def _indexed_shape(view: RefView) -> tuple:
    """The shape of `x_ref[idx]` for a view indexed by arrays (numpy's rule,
    as _array_positions places its dimensions)."""
    nb = len(view.index_shape)
    ords = sorted(view.arrays)
    first = ords[0] if ords == list(range(ords[0], ords[-1] + 1)) else 0
    rest = [n for k, n in enumerate(view.shape) if k not in view.arrays]
    return tuple(rest[:first]) + tuple(view.index_shape) + tuple(rest[first:])


def _placed(t, region, view: RefView, val: B.Value) -> B.Value:
    """A value of R, the shape of a reshaped or bitcast view, holding `val`
    (of the shape its last indexer selects) where that indexer selects:
    each element gathered from the position of val it would be
    (elsewhere: some element of val, which the caller masks off)."""
    R = view.reshaped
    it = B.Type.value("i32", R)
    i32 = B.Type.value("i32", ())
    kept = [(d, e) for d, e in enumerate(view.rdims) if e[0] == "range"]
    vshape = [e[2] for _, e in kept]
    flat, stride = None, 1
    for (d, e), n in reversed(list(zip(kept, vshape))):
        _, s, _, st = e
        k = t.emit(region, "iota", [], it, ints=[d])
        k = t.emit(region, "sub", [k, t.i32(region, s)], it)
        if st > 1:
            k = t.emit(region, "div", [k, t.const(region, st, i32)], it)
        k = t.emit(region, "max", [k, t.const(region, 0, i32)], it)
        k = t.emit(region, "min", [k, t.const(region, n - 1, i32)], it)
        if stride != 1:
            k = t.emit(region, "mul", [k, t.const(region, stride, i32)], it)
        flat = k if flat is None else t.emit(region, "add", [flat, k], it)
        stride *= n
    size = int(np.prod(vshape)) if vshape else 1
    v = val
    if v.type.kind == "scalar":
        v = t.emit(region, "broadcast", [v], B.Type.value(view.dtype, (size,)))
    else:
        v = reshape_to(t, region, v, B.Type.value(view.dtype, (size,)))
    if flat is None:
        flat = t.const(region, 0, it)
    n = int(np.prod(R))
    fidx = reshape_to(t, region, flat, B.Type.value("i32", (n,)))
    g = t.emit(region, "gather", [v, fidx], B.Type.value(view.dtype, (n,)), ints=[0])
    return reshape_to(t, region, g, B.Type.value(view.dtype, R))


def _swap_transformed(t, region, view: RefView, val: B.Value, old_type) -> B.Value | None:
    """`ref.reshape(R)[idx] = val` or `ref.bitcast(dtype)[idx] = val` (and
    chains of them): the value of R with val where idx selects, taken back
    through the chain and stored into the view before it, masked to the
    elements idx covers there. Where a bitcast in the chain narrows, an
    element before it holds parts the write may leave: those elements are
    read first (masked to them) and their other parts kept."""
    R, S = view.reshaped, view.pre_shape
    _check_chain_bounds(t, region, view)
    old = _get_reshaped(t, region, view, old_type) if old_type is not None else None
    vt = B.Type.value(view.dtype, R)
    mask = _selection_mask(t, region, view)
    pre = RefView(view.base, view.dims)
    if mask is None:
        v = val
        if v.type.kind == "scalar":
            v = t.emit(region, "broadcast", [v], vt)
        v = reshape_to(t, region, v, vt) if tuple(v.type.shape) != tuple(R) else v
        v = chain_backward(t, region, view, v)
        if tuple(v.type.shape) != tuple(S):
            v = t.emit(region, "reshape", [v], B.Type.value(v.type.dtype, S))
        t.op(region, "store", [view.base, v], [], indices=t.indices(pre))
        return old
    new = _placed(t, region, view, val)
    ms = _mask_back(t, region, view, mask)
    if tuple(ms.type.shape) != tuple(S):
        ms = t.emit(region, "reshape", [ms], B.Type.value("i1", S))
    narrows = any(step[0] == "bitcast" and len(before) >= 2 and before[-2] < after[-2]
                  for step, before, after in zip(view.chain, view.shapes, view.shapes[1:]))
    if narrows:
        # read only the elements the write covers in part
        whole = _mask_back(t, region, view, mask, every=True)
        if tuple(whole.type.shape) != tuple(S):
            whole = t.emit(region, "reshape", [whole], B.Type.value("i1", S))
        part = t.emit(region, "and", [ms, t.emit(region, "not", [whole], whole.type)],
                      whole.type)
        cur = t.emit(region, "load", [view.base], B.Type.value(view.base.type.dtype, S),
                     indices=t.indices(pre), extra_operands=[part], flags=B.OPF_MASK)
        cur = chain_forward(t, region, view, cur)
        new = t.emit(region, "select", [mask, new, cur], vt)
    v = chain_backward(t, region, view, new)
    if tuple(v.type.shape) != tuple(S):
        v = t.emit(region, "reshape", [v], B.Type.value(v.type.dtype, S))
    t.op(region, "store", [view.base, v], [], indices=t.indices(pre), extra_operands=[ms],
         flags=B.OPF_MASK)
    return old


@register("swap", emits=("load", "store", "scatter", *VIEW_OPS, *_BY_ARRAYS, *RESHAPE_OPS,
                         *_GET_RESHAPED, *_SWAP_RESHAPED))
def _swap(t, env, region, eqn, used):
    transforms = ji.unflatten(eqn.params["tree"], eqn.invars[2:])
    view = t.apply_transforms(env, region, t.ref(env, eqn.invars[0]), transforms)
    val = t.read(env, region, eqn.invars[1])
    if view.reshaped is not None:
        want_old = eqn.outvars and eqn.outvars[0] in used
        return [_swap_transformed(t, region, view, val, out_type(eqn) if want_old else None)]
    idx = t.indices(view)
    if view.arrays:
        # x_ref[idx] = val: a masked store of the view (whole along the
        # indexed dimensions) of the values scattered into a block, the mask
        # the same scatter of `true`s: only the elements written are
        # touched (nothing is read: the rest may never have been written)
        wt = B.Type.value(view.base.type.dtype, view.shape)
        old = None
        if eqn.outvars and eqn.outvars[0] in used:
            whole = t.emit(region, "load", [view.base], wt, indices=idx)
            old = _gather_view(t, env, region, view, whole, out_type(eqn))
        axis, at = gather_indices(t, env, region, view, _indexed_shape(view))
        new = _scatter_into(t, region, t.const(region, 0, wt), axis, at, val)
        bt = B.Type.value("i1", view.shape)
        mask = _scatter_into(t, region, t.const(region, 0, bt), axis, at,
                             t.const(region, 1, B.Type.value("i1", ())))
        t.op(region, "store", [view.base, new], [], indices=idx, extra_operands=[mask],
             flags=B.OPF_MASK)
        return [old]
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


@register("masked_load", emits=("load", "select", *BCAST_OPS, *VIEW_OPS, *RESHAPE_OPS,
                                *_GET_RESHAPED))
def _masked_load(t, env, region, eqn, used):
    ref, transforms, mask, other = ji.unflatten(eqn.params["args_tree"], eqn.invars)
    view = t.apply_transforms(env, region, t.ref(env, ref), transforms)
    rt = out_type(eqn)
    if view.reshaped is not None:
        if mask is not None:
            raise t.fail("a masked read of a reshaped or bitcast ref")
        return [_get_reshaped(t, region, view, rt)]
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


@register("masked_swap", emits=("load", "store", "select", *BCAST_OPS, *VIEW_OPS,
                                *RESHAPE_OPS, *_GET_RESHAPED, *_SWAP_RESHAPED))
def _masked_swap(t, env, region, eqn, used):
    ref, transforms, val, mask = ji.unflatten(eqn.params["args_tree"], eqn.invars)
    view = t.apply_transforms(env, region, t.ref(env, ref), transforms)
    if view.reshaped is not None:
        if mask is not None:
            raise t.fail("a masked write of a reshaped or bitcast ref")
        want_old = eqn.outvars and eqn.outvars[0] in used
        return [_swap_transformed(t, region, view, t.read(env, region, val),
                                  out_type(eqn) if want_old else None)]
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
        if mask is not None:
            # the lanes the mask leaves out give the value stored, as in both
            # of JAX's interpreters (where(mask, old, val))
            old = t.emit(region, "select", [extra[0], old, v], vt)
    t.op(region, "store", [view.base, v], [], indices=idx, extra_operands=extra, flags=flags)
    return [old]
