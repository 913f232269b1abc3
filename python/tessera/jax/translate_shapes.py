"""Shape primitives: iota, broadcasts, reshapes (squeeze, expand_dims),
transpose, concatenate (tile), static and dynamic slices, pltpu.roll, rev
and the take_along_axis form of gather."""

from __future__ import annotations

import numpy as np

from .. import _builder as B
from .translate_core import BCAST_OPS, RESHAPE_OPS, bcast, out_type, register, reshape_to


@register("iota", emits=("iota",))
def _iota(t, env, region, eqn, used):
    rt = out_type(eqn)
    return [t.emit(region, "iota", [], rt, ints=[eqn.params["dimension"]])]


@register("broadcast_in_dim", emits=("broadcast", "reshape"))
def _broadcast_in_dim(t, env, region, eqn, used):
    x = t.read(env, region, eqn.invars[0])
    rt = out_type(eqn)
    if x.type.kind == "scalar":
        return [t.emit(region, "broadcast", [x], rt)]
    bdims = tuple(eqn.params["broadcast_dimensions"])
    shape = [1] * rt.rank
    for d, n in zip(bdims, x.type.shape):
        shape[d] = n
    if tuple(shape) != x.type.shape:
        x = t.emit(region, "reshape", [x], B.Type.value(x.type.dtype, shape))
    if tuple(shape) == rt.shape:
        return [x]
    return [t.emit(region, "broadcast", [x], rt)]


@register("broadcast_to", emits=BCAST_OPS)
def _broadcast_to(t, env, region, eqn, used):
    """Pallas's own broadcast (numpy rules), which NDIndexer applies to the
    arrays and scalars indexing a ref so that they share one shape."""
    x = t.read(env, region, eqn.invars[0])
    rt = out_type(eqn)
    if x.type.kind == "scalar":
        return [t.emit(region, "broadcast", [x], rt)]
    return [bcast(t, region, x, rt.shape)]


@register("reshape", emits=RESHAPE_OPS)
def _reshape(t, env, region, eqn, used):
    if eqn.params.get("dimensions") not in (None, ()):
        raise t.fail("reshape with `dimensions`")
    return [reshape_to(t, region, t.read(env, region, eqn.invars[0]), out_type(eqn))]


@register("squeeze", "expand_dims", emits=RESHAPE_OPS)
def _squeeze(t, env, region, eqn, used):
    return [reshape_to(t, region, t.read(env, region, eqn.invars[0]), out_type(eqn))]


@register("transpose", emits=("transpose",))
def _transpose(t, env, region, eqn, used):
    x = t.read(env, region, eqn.invars[0])
    perm = tuple(eqn.params["permutation"])
    if perm == tuple(range(len(perm))):
        return [x]
    return [t.emit(region, "transpose", [x], out_type(eqn), ints=perm)]


@register("concatenate", emits=("concatenate",))
def _concatenate(t, env, region, eqn, used):
    xs = [t.read(env, region, v) for v in eqn.invars]
    return [t.emit(region, "concatenate", xs, out_type(eqn), ints=[eqn.params["dimension"]])]


@register("slice", emits=("slice",))
def _slice(t, env, region, eqn, used):
    x = t.read(env, region, eqn.invars[0])
    p = eqn.params
    strides = p.get("strides") or (1,) * x.type.rank
    idx = []
    for s, e, st, n in zip(p["start_indices"], p["limit_indices"], strides, x.type.shape):
        size = max(0, -(-(e - s) // st))
        idx.append(B.Index("full", 0, n, 1) if (s, e, st) == (0, n, 1)
                   else B.Index("slice", s, size, st))
    return [t.emit(region, "slice", [x], out_type(eqn), indices=idx)]


@register("dynamic_slice", emits=("slice", "roll", "max", "min", "neg", "convert"))
def _dynamic_slice(t, env, region, eqn, used):
    """A slice of a value at dynamic starts: a dynamic start s (clamped to
    [0, dim - size] as lax does) becomes a roll by -s, then a static slice
    from 0."""
    x = t.read(env, region, eqn.invars[0])
    starts = [t.static_int(env, v) for v in eqn.invars[1:]]
    sizes = eqn.params["slice_sizes"]
    i32 = B.Type.value("i32", ())
    idx = []
    for axis, (s, n, d) in enumerate(zip(starts, sizes, x.type.shape)):
        if isinstance(s, B.Value):
            if n == d:
                idx.append(B.Index("full", 0, d, 1))
                continue
            s = t.i32(region, s)
            s = t.emit(region, "max", [s, t.const(region, 0, i32)], i32)
            s = t.emit(region, "min", [s, t.const(region, d - n, i32)], i32)
            shift = t.emit(region, "neg", [s], i32)
            x = t.emit(region, "roll", [x, shift], x.type, ints=[axis])
            s = 0
        s = min(max(s, 0), d - n)
        idx.append(B.Index("full", 0, d, 1) if (s, n) == (0, d) else B.Index("slice", s, n, 1))
    if all(i.kind == "full" for i in idx):
        return [x]
    return [t.emit(region, "slice", [x], out_type(eqn), indices=idx)]


@register("dynamic_update_slice", emits=("concatenate", "broadcast", "roll", "iota", "ge",
                                          "lt", "and", "select", "add", "max", "min",
                                          "convert"))
def _dynamic_update_slice(t, env, region, eqn, used):
    """x with u written at starts (each clamped to [0, dim - size], as lax
    does): u is placed at the origin of a block of x's shape (concatenated
    with zeros), rolled to the starts, and selected in where every axis's
    iota falls in [start, start + size). The same shape of code for static
    and dynamic starts, and no op of its own: a select and a roll per axis."""
    x, u = (t.read(env, region, v) for v in eqn.invars[:2])
    if x.type.kind == "scalar" or tuple(u.type.shape) == tuple(x.type.shape):
        return [u]  # every start clamps to 0
    starts = [t.static_int(env, v) for v in eqn.invars[2:]]
    shape, dtype = tuple(x.type.shape), x.type.dtype
    i32 = B.Type.value("i32", ())
    zero = t.const(region, 0, B.Type.value(dtype, ()))
    placed, cur = u, list(u.type.shape)
    for d, (n, dim) in enumerate(zip(u.type.shape, shape)):
        if n < dim:
            pad = t.emit(region, "broadcast", [zero],
                         B.Type.value(dtype, tuple(cur[:d] + [dim - n] + cur[d + 1:])))
            cur[d] = dim
            placed = t.emit(region, "concatenate", [placed, pad],
                            B.Type.value(dtype, tuple(cur)), ints=[d])
    mask = None
    for d, (s, n, dim) in enumerate(zip(starts, u.type.shape, shape)):
        if n == dim:
            continue
        if isinstance(s, B.Value):
            s = t.i32(region, s)
            s = t.emit(region, "max", [s, t.const(region, 0, i32)], i32)
            s = t.emit(region, "min", [s, t.const(region, dim - n, i32)], i32)
            end = t.emit(region, "add", [s, t.const(region, n, i32)], i32)
        else:
            s = min(max(int(s), 0), dim - n)
            end = t.const(region, s + n, i32)
            s = t.const(region, s, i32)
        placed = t.emit(region, "roll", [placed, s], placed.type, ints=[d])
        at = t.emit(region, "iota", [], B.Type.value("i32", shape), ints=[d])
        inside = t.emit(region, "and", [t.emit(region, "ge", [at, s], B.Type.value("i1", shape)),
                                        t.emit(region, "lt", [at, end],
                                               B.Type.value("i1", shape))],
                        B.Type.value("i1", shape))
        mask = inside if mask is None else t.emit(region, "and", [mask, inside], inside.type)
    return [t.emit(region, "select", [mask, placed, x], x.type)]


@register("roll", emits=("roll", "convert"))
def _roll(t, env, region, eqn, used):
    """pltpu.roll; with stride/stride_axis, the slice k along stride_axis is
    rolled by shift + k * stride (the IR's roll carries both)."""
    x = t.read(env, region, eqn.invars[0])
    shift = t.i32(region, t.static_int(env, eqn.invars[1]))
    ints = [eqn.params["axis"]]
    if eqn.params.get("stride") is not None:
        ints += [eqn.params["stride"], eqn.params["stride_axis"]]
    return [t.emit(region, "roll", [x, shift], x.type, ints=ints)]


@register("stack", emits=("concatenate", "reshape", "broadcast"))
def _stack(t, env, region, eqn, used):
    """lax's stack: each operand with a unit axis at `axis`, concatenated."""
    rt = out_type(eqn)
    axis = eqn.params["axis"]
    unit = list(rt.shape)
    unit[axis] = 1
    xs = [reshape_to(t, region, t.read(env, region, v), B.Type.value(rt.dtype, tuple(unit)))
          for v in eqn.invars]
    if len(xs) == 1:
        return xs
    return [t.emit(region, "concatenate", xs, rt, ints=[axis])]


@register("pad", emits=("slice", "concatenate", "broadcast", "reshape"))
def _pad(t, env, region, eqn, used):
    """lax.pad (jnp.pad's constant mode), one dimension at a time as lax
    defines it: interior padding (each element followed by `interior`
    fills: a unit axis after the dimension, concatenated with the fills,
    merged back and the trailing fills sliced off), then negative low/high
    crop (a slice) and positive ones add fills (a concatenation). The fill
    is the pad value broadcast, a traced scalar or a constant. An expansion
    into existing ops, not an op of its own: each dimension costs a copy."""
    x = t.read(env, region, eqn.invars[0])
    if x.type.kind == "scalar":
        return [x]
    value = t.read(env, region, eqn.invars[1])
    dtype = x.type.dtype

    def fill(shape):
        return t.emit(region, "broadcast", [value], B.Type.value(dtype, tuple(shape)))

    def full(n):
        return B.Index("full", 0, n, 1)

    for d, (lo, hi, interior) in enumerate(eqn.params["padding_config"]):
        shape = list(x.type.shape)
        n = shape[d]
        if interior and n > 1:
            unit = shape[:d + 1] + [1] + shape[d + 1:]
            x = t.emit(region, "reshape", [x], B.Type.value(dtype, tuple(unit)))
            gaps = shape[:d + 1] + [interior] + shape[d + 1:]
            x = t.emit(region, "concatenate", [x, fill(gaps)],
                       B.Type.value(dtype, tuple(shape[:d + 1] + [1 + interior] + shape[d + 1:])),
                       ints=[d + 1])
            merged = shape[:d] + [n * (1 + interior)] + shape[d + 1:]
            x = t.emit(region, "reshape", [x], B.Type.value(dtype, tuple(merged)))
            n = n + (n - 1) * interior
            shape = merged[:d] + [n] + merged[d + 1:]
            idx = [full(k) for k in merged]
            idx[d] = B.Index("slice", 0, n, 1)
            x = t.emit(region, "slice", [x], B.Type.value(dtype, tuple(shape)), indices=idx)
        if lo < 0 or hi < 0:
            start, stop = max(-lo, 0), n - max(-hi, 0)
            idx = [full(k) for k in shape]
            idx[d] = B.Index("slice", start, stop - start, 1)
            shape[d] = stop - start
            x = t.emit(region, "slice", [x], B.Type.value(dtype, tuple(shape)), indices=idx)
        parts = []
        if lo > 0:
            parts.append(fill(shape[:d] + [lo] + shape[d + 1:]))
        parts.append(x)
        if hi > 0:
            parts.append(fill(shape[:d] + [hi] + shape[d + 1:]))
        if len(parts) > 1:
            shape[d] += max(lo, 0) + max(hi, 0)
            x = t.emit(region, "concatenate", parts, B.Type.value(dtype, tuple(shape)), ints=[d])
    return [x]


@register("gather", emits=("gather", "reshape", "convert", "max", "min"))
def _gather(t, env, region, eqn, used):
    """lax.gather in the form jnp.take_along_axis gives (one collapsed axis,
    every other dimension batched, slices of size 1) -> tessera `gather`."""
    x = t.read(env, region, eqn.invars[0])
    idx = t.read(env, region, eqn.invars[1])
    dn = eqn.params["dimension_numbers"]
    r = x.type.rank
    axis = tuple(dn.collapsed_slice_dims)
    others = tuple(d for d in range(r) if d not in axis)
    if (len(axis) != 1 or tuple(dn.offset_dims) != () or tuple(dn.start_index_map) != axis
            or tuple(getattr(dn, "operand_batching_dims", ())) != others
            or tuple(getattr(dn, "start_indices_batching_dims", ())) != others
            or tuple(eqn.params["slice_sizes"]) != (1,) * r
            or idx.type.rank != r + 1 or idx.type.shape[-1] != 1):
        raise t.fail("`gather` other than jnp.take_along_axis within a block")
    rt = out_type(eqn)
    it = B.Type.value("i32", rt.shape)
    idx = t.emit(region, "reshape", [idx], B.Type.value(idx.type.dtype, rt.shape))
    if idx.type.dtype != "i32":
        idx = t.emit(region, "convert", [idx], it)
    if "CLIP" in str(eqn.params.get("mode")):
        i32 = B.Type.value("i32", ())
        idx = t.emit(region, "max", [idx, t.const(region, 0, i32)], it)
        idx = t.emit(region, "min", [idx, t.const(region, x.type.shape[axis[0]] - 1, i32)], it)
    # Other modes: an index out of range is a tessera kernel error (it is
    # undefined on the TPU), never a silently different value.
    return [t.emit(region, "gather", [x, idx], rt, ints=[axis[0]])]


@register("scatter", emits=("scatter", "iota", "slice", "reshape", "broadcast", "convert",
                             "add", "mul", "max", "min", "ge", "le", "and", "select",
                             "concatenate"))
def _scatter(t, env, region, eqn, used):
    """lax.scatter (`x.at[idx].set(u)` on a value) -> the IR's scatter of
    the flattened operand at each update element's flat position. Windows
    out of range are dropped (FILL_OR_DROP, jnp's default for updates: they
    go to one extra element past the end, cut off after) or clamped into
    the operand (CLIP, PROMISE_IN_BOUNDS)."""
    x = t.read(env, region, eqn.invars[0])
    ind = t.read(env, region, eqn.invars[1])
    upd = t.read(env, region, eqn.invars[2])
    dn = eqn.params["dimension_numbers"]
    if tuple(getattr(dn, "operand_batching_dims", ())) or eqn.params.get("update_jaxpr"):
        raise t.fail("`scatter` with batching dimensions or a combiner")
    oshape, ushape = x.type.shape, tuple(eqn.invars[2].aval.shape)
    wdims = tuple(dn.update_window_dims)
    inserted = tuple(dn.inserted_window_dims)
    sdod = tuple(dn.scatter_dims_to_operand_dims)
    # the window's size along each operand dimension, and which update
    # dimension walks it
    win_of = {}
    it = iter(wdims)
    for d in range(len(oshape)):
        if d not in inserted:
            win_of[d] = next(it)
    wsize = [ushape[win_of[d]] if d in win_of else 1 for d in range(len(oshape))]
    batch = [i for i in range(len(ushape)) if i not in wdims]
    i32 = B.Type.value("i32", ())
    ut = B.Type.value("i32", ushape)
    bshape = tuple(ushape[i] for i in batch)
    if ind.type.kind != "scalar" and ind.type.dtype != "i32":
        ind = t.emit(region, "convert", [ind], B.Type.value("i32", ind.type.shape))
    # indices: batch dims then the index vector (JAX's canonical form)
    ishape = ind.type.shape
    if tuple(ishape[:-1]) != bshape or ishape[-1] != len(sdod):
        raise t.fail("`scatter` whose indices are not (batch.., index vector)")
    flat = None
    ok = None
    stride = 1
    drop = "FILL_OR_DROP" in str(eqn.params.get("mode"))
    bt = B.Type.value("i1", ushape)
    for d in reversed(range(len(oshape))):
        pos = None
        if d in sdod:
            j = sdod.index(d)
            sl = [B.Index("full", 0, n, 1) for n in ishape[:-1]] + [B.Index("slice", j, 1, 1)]
            s = t.emit(region, "slice", [ind], B.Type.value("i32", ishape[:-1] + (1,)),
                       indices=sl)
            shape = [1] * len(ushape)
            for i, b in zip(batch, bshape):
                shape[i] = b
            s = t.emit(region, "reshape", [s], B.Type.value("i32", shape))
            if tuple(shape) != ushape:
                s = t.emit(region, "broadcast", [s], ut)
            hi = oshape[d] - wsize[d]
            if drop:
                lo_ok = t.emit(region, "ge", [s, t.const(region, 0, i32)], bt)
                hi_ok = t.emit(region, "le", [s, t.const(region, hi, i32)], bt)
                good = t.emit(region, "and", [lo_ok, hi_ok], bt)
                ok = good if ok is None else t.emit(region, "and", [ok, good], bt)
            else:
                s = t.emit(region, "max", [s, t.const(region, 0, i32)], ut)
                s = t.emit(region, "min", [s, t.const(region, hi, i32)], ut)
            pos = s
        if d in win_of:
            w = t.emit(region, "iota", [], ut, ints=[win_of[d]])
            pos = w if pos is None else t.emit(region, "add", [pos, w], ut)
        if pos is not None:
            if stride != 1:
                pos = t.emit(region, "mul", [pos, t.const(region, stride, i32)], ut)
            flat = pos if flat is None else t.emit(region, "add", [flat, pos], ut)
        stride *= oshape[d]
    n, m = int(np.prod(oshape)), int(np.prod(ushape))
    if flat is None:
        flat = t.const(region, 0, ut)
    dt = x.type.dtype
    fx = reshape_to(t, region, x, B.Type.value(dt, (n,)))
    if ok is not None:  # dropped windows write one element past the end
        flat = t.emit(region, "select", [ok, flat, t.const(region, n, i32)], ut)
        fx = t.emit(region, "concatenate", [fx, t.const(region, 0, B.Type.value(dt, (1,)))],
                    B.Type.value(dt, (n + 1,)), ints=[0])
    fi = reshape_to(t, region, flat, B.Type.value("i32", (m,)))
    fu = reshape_to(t, region, bcast(t, region, upd, ushape), B.Type.value(dt, (m,)))
    r = t.emit(region, "scatter", [fx, fi, fu], fx.type, ints=[0])
    if ok is not None:
        r = t.emit(region, "slice", [r], B.Type.value(dt, (n,)),
                   indices=[B.Index("slice", 0, n, 1)])
    return [reshape_to(t, region, r, x.type)]


@register("tile", emits=("concatenate",))
def _tile(t, env, region, eqn, used):
    x = t.read(env, region, eqn.invars[0])
    for axis, r in enumerate(eqn.params["reps"]):
        if r > 1:
            shape = list(x.type.shape)
            shape[axis] *= r
            x = t.emit(region, "concatenate", [x] * r, B.Type.value(x.type.dtype, shape),
                       ints=[axis])
    return [x]


@register("rev", emits=("iota", "sub", "gather"))
def _rev(t, env, region, eqn, used):
    x = t.read(env, region, eqn.invars[0])
    for d in eqn.params["dimensions"]:
        n = x.type.shape[d]
        it = B.Type.value("i32", x.type.shape)
        idx = t.emit(region, "iota", [], it, ints=[d])
        idx = t.emit(region, "sub", [t.const(region, n - 1, B.Type.value("i32", ())), idx], it)
        x = t.emit(region, "gather", [x, idx], x.type, ints=[d])
    return [x]
