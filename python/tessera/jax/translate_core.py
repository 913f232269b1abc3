"""The core of the Pallas-to-tessera translator: the translator's state and
environment, the helpers every rule uses (building ops at the user's line,
reading atoms, ref views, running sub-jaxprs), the kernel header (grid,
operands, index maps, scratch), and the one registry of primitive rules.

Rules live in the translate_* modules, one per family of primitives, and
import only this module; translate.py imports them all (which registers
them) and is the package's entry. A rule is a function `(t, env, region,
eqn, used) -> outputs` registered with `@register(primitive, ...,
emits=(ir ops..))`: it translates the equation `eqn` into `region` with the
Translator `t`, reading its inputs from `env` (jaxpr variable -> Value or
RefView); `used` is the set of variables the jaxpr reads, and the returned
list (or None) gives the equation's outputs. `emits` names the IR ops it may
build (besides `const`): the op coverage of translate.ir_op_coverage() is
read from it, and under the test suite (TESSERA_JAX_CHECK_EMITS=1) an op a
rule builds without declaring it is an error.
"""

from __future__ import annotations

import dataclasses
import os
import re
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from .. import _builder as B
from . import _jax_internal as ji

__all__ = ["TranslationError", "TranslatedKernel", "RefView", "Translator", "Rule",
           "register", "rules", "dtype_name", "type_of_aval", "out_type", "bcast",
           "reshape_to", "convert_value", "as_value", "VIEW_OPS", "BCAST_OPS", "RESHAPE_OPS",
           "WIDTH_OPS", "TPU_BITCAST_OPS", "bitcast_widths", "tpu_bitcast",
           "HEADER_EMITS", "IMPLICIT_EMITS"]


class TranslationError(NotImplementedError):
    """The kernel uses something tessera.jax cannot translate. `primitive`
    names the JAX primitive, `file`/`line` the user's Python line."""

    def __init__(self, message: str, primitive: str = "", file: str = "", line: int = 0):
        where = f"{file}:{line}: " if file else ""
        super().__init__(f"{where}tessera.jax: {message}")
        self.primitive = primitive
        self.file = file
        self.line = line


# where users import it from (and tracebacks name it as before the split)
TranslationError.__module__ = "tessera.jax.translate"


class ScopedHbmError(TranslationError, ValueError):
    """An HBM (or ANY) buffer in `run_scoped` under JAX's InterpretParams
    with allow_hbm_allocation_in_run_scoped=False (its default): the
    ValueError JAX's interpret mode raises, located at the user's line."""


ScopedHbmError.__module__ = "tessera.jax.translate"


_DTYPES = {
    "float32": "f32", "bfloat16": "bf16", "float16": "f16", "int32": "i32",
    "uint32": "u32", "int16": "i16", "uint16": "u16", "int8": "i8", "uint8": "u8",
    "bool": "i1", "int4": "i4", "uint4": "u4", "int2": "i2", "uint2": "u2",
    "float8_e4m3fn": "f8e4m3fn", "float8_e5m2": "f8e5m2",
}


def dtype_name(dtype) -> str:
    """tessera's name for a numpy/JAX dtype; ValueError for one it lacks."""
    name = np.dtype(dtype).name if not hasattr(dtype, "name") else dtype.name
    try:
        return _DTYPES[str(name)]
    except KeyError:
        raise ValueError(f"dtype {name} (tessera has f32 bf16 f16 i32 u32 i16 u16 i8 u8 "
                         "bool int4 uint4 int2 uint2 float8_e4m3fn float8_e5m2)") from None


@dataclasses.dataclass
class TranslatedKernel:
    """A built module plus what running it needs."""
    module: B.ModuleBuilder
    name: str
    num_prefetch: int
    num_inputs: int
    num_outputs: int
    in_avals: tuple
    out_avals: tuple
    aliases: dict  # output index -> flat input index
    text: str = ""
    # operand name -> (file, line, col) for diagnostics tessera reports at an
    # operand (its block copies, index map results): the BlockSpec's index
    # map, else the pallas_call's line.
    operand_locs: dict = dataclasses.field(default_factory=dict)
    # (line, col, mnemonic) -> the JAX primitive whose translation built that
    # load or store there: JAX names it in its errors ("get_p: ...").
    prims_at: dict = dataclasses.field(default_factory=dict)


def _static_in_bounds(start: int, size: int, stride: int, dim: int) -> bool:
    """Whether `size` elements from `start` by `stride` lie in [0, dim)."""
    return start >= 0 and size >= 1 and start + (size - 1) * stride < dim


@dataclasses.dataclass
class RefView:
    """A ref (or semaphore) with a view: per dimension of the base ref, a
    point (start) or a range (start, size, stride); starts are ints or
    Values."""
    base: B.Value
    dims: list  # [("point", start) | ("range", start, size, stride)]
    # After `ref.reshape(R)` or `ref.bitcast(dtype)`: the shape R of the
    # view's value after them, its indexing in `rdims` (same entries as
    # `dims`), and the steps from the view before them in `chain`:
    # ("reshape", shape) or ("bitcast", dtype), each giving `shapes[i + 1]`
    # from `shapes[i]` (shapes[0] the view's shape before them). Reads and
    # whole writes of such views are translated (translate_memory.py).
    reshaped: tuple | None = None
    rdims: list | None = None
    chain: tuple = ()
    shapes: tuple = ()
    # After an indexer with arrays of indices (`x_ref[idx]`, a gather or a
    # scatter): per kept dimension of the view that an array indexes, its
    # ordinal among the kept dimensions -> the array's atom (all of JAX's
    # broadcast shape `index_shape`). Those dimensions stay whole ranges in
    # `dims`: the view is loaded (or stored) whole along them, and the
    # arrays pick elements within it (translate_memory.py).
    arrays: dict | None = None
    index_shape: tuple = ()

    @staticmethod
    def whole(ref: B.Value) -> "RefView":
        return RefView(ref, [("range", 0, d, 1) for d in ref.type.shape])

    @property
    def shape(self) -> tuple[int, ...]:
        if self.reshaped is not None:
            return tuple(d[2] for d in self.rdims if d[0] == "range")
        return tuple(d[2] for d in self.dims if d[0] == "range")

    @property
    def dtype(self) -> str:
        """The dtype of the view's elements (after a bitcast in its chain)."""
        for step in reversed(self.chain):
            if step[0] == "bitcast":
                return step[1]
        return self.base.type.dtype

    @property
    def pre_shape(self) -> tuple[int, ...]:
        """The view's shape before its reshape."""
        return tuple(d[2] for d in self.dims if d[0] == "range")


_BITS = {"f32": 32, "i32": 32, "u32": 32, "bf16": 16, "f16": 16, "i16": 16, "u16": 16,
         "i8": 8, "u8": 8}
_UINT = {32: "u32", 16: "u16", 8: "u8"}
#: what bitcast_widths emits
WIDTH_OPS = ("bitcast", "convert", "shl", "shrl", "or", "slice", "reshape", "concatenate")


def bitcast_widths(t, region, x, dtype: str):
    """lax.bitcast_convert_type of x to `dtype`: the same width is the IR's
    bitcast; a wider dtype takes a trailing dim of the narrow parts, a
    narrower one adds it (little-endian, as XLA: part 0 is the low bits),
    the parts taken apart and put together with shifts on unsigned
    integers of the wide width."""
    src, dst = _BITS[x.type.dtype], _BITS[dtype]
    shape = x.type.shape

    def typ(d, s):
        return B.Type.value(d, tuple(s))

    def cast(v, d):
        return v if v.type.dtype == d else t.emit(region, "bitcast", [v], typ(d, v.type.shape))
    if src == dst:
        return cast(x, dtype)
    if src > dst:  # (...) -> (..., k)
        k = src // dst
        w = cast(x, _UINT[src])
        parts = []
        for i in range(k):
            p = w
            if i:
                p = t.emit(region, "shrl", [w, t.const(region, i * dst, typ(_UINT[src], ()))],
                           w.type)
            p = t.emit(region, "convert", [p], typ(_UINT[dst], shape))
            p = cast(p, dtype)
            parts.append(t.emit(region, "reshape", [p], typ(dtype, shape + (1,)))
                         if shape else t.emit(region, "reshape", [p], typ(dtype, (1,))))
        return t.emit(region, "concatenate", parts, typ(dtype, shape + (k,)), ints=[len(shape)])
    k = dst // src  # (..., k) -> (...)
    lead = shape[:-1]
    acc = None
    for i in range(k):
        idx = [B.Index("full", 0, n, 1) for n in lead] + [B.Index("point", i, 1, 1)]
        p = t.emit(region, "slice", [x], typ(x.type.dtype, lead), indices=idx)
        p = t.emit(region, "convert", [cast(p, _UINT[src])], typ(_UINT[dst], lead))
        if i:
            p = t.emit(region, "shl", [p, t.const(region, i * src, typ(_UINT[dst], ()))], p.type)
        acc = p if acc is None else t.emit(region, "or", [acc, p], p.type)
    return cast(acc, dtype)


#: what tpu_bitcast emits
TPU_BITCAST_OPS = (*WIDTH_OPS, "transpose")


def tpu_bitcast(t, region, x, dtype: str, dim: int):
    """pltpu.bitcast of x to `dtype`: dimension `dim` (the minor or
    second-minor one) scaled by the ratio of the widths, as Pallas's own
    lowering of it: that dimension moved last, grouped (or split) into the
    trailing dim of bitcast_convert_type, and moved back. A ref's bitcast
    (`ref.bitcast(dtype)`) is this along the second-minor dimension."""
    rank = x.type.rank
    dim = dim % rank if rank else 0
    perm = list(range(rank))
    if dim != rank - 1:
        perm[dim], perm[rank - 1] = perm[rank - 1], perm[dim]
        x = t.emit(region, "transpose", [x], B.Type.value(
            x.type.dtype, tuple(x.type.shape[p] for p in perm)), ints=perm)
    src, dst = _BITS[x.type.dtype], _BITS[dtype]
    *lead, n = x.type.shape
    if src < dst:
        x = t.emit(region, "reshape", [x], B.Type.value(
            x.type.dtype, (*lead, n * src // dst, dst // src)))
        y = bitcast_widths(t, region, x, dtype)
    elif src > dst:
        y = bitcast_widths(t, region, x, dtype)
        y = t.emit(region, "reshape", [y], B.Type.value(dtype, (*lead, n * src // dst)))
    else:
        y = bitcast_widths(t, region, x, dtype)
    if dim != rank - 1:
        out = list(y.type.shape)
        out[dim], out[rank - 1] = out[rank - 1], out[dim]
        y = t.emit(region, "transpose", [y], B.Type.value(dtype, tuple(out)), ints=perm)
    return y


def type_of_aval(aval) -> B.Type:
    """tessera's value type of a JAX aval."""
    return B.Type.value(dtype_name(aval.dtype), aval.shape)


# ---- the registry of rules -------------------------------------------------------

#: what every rule may emit without declaring it: literals and constants
IMPLICIT_EMITS = frozenset({"const"})
#: what reading a ref through its view may emit (index arithmetic on i32
#: starts, an index converted to i32): rules that index refs declare these
VIEW_OPS = ("add", "mul", "convert")
#: what `bcast` (JAX's implicit broadcasting of size-1 dimensions) emits
BCAST_OPS = ("reshape", "broadcast")
#: what `reshape_to` emits
RESHAPE_OPS = ("reshape", "broadcast", "reduce_sum")
#: ops the kernel header builds outside any rule, by the pseudo-primitive
#: the translator is in: an index map's results converted to i32, yielded
HEADER_EMITS = {"index_map": frozenset({"yield", "convert"}), "pallas_call": frozenset()}


@dataclasses.dataclass(frozen=True)
class Rule:
    """How one JAX primitive is translated."""
    primitive: str
    handler: Callable  # (t, env, region, eqn, used) -> list of outputs | None
    emits: frozenset   # the IR ops it may build (besides IMPLICIT_EMITS)
    where: str         # module.function, for messages


_RULES: dict[str, Rule] = {}


def register(*primitives: str, emits: Iterable[str] = ()) -> Callable:
    """Decorator: the function translates each of `primitives` (JAX's
    names) and may build the IR ops `emits`. A family of primitives that
    differ only in the IR op they map to registers one closure per member
    (`register(name, emits=(op,))(make_rule(op))`). A primitive registered
    twice is an error when the second module is imported."""
    emits = frozenset(emits)

    def add(handler: Callable) -> Callable:
        where = f"{handler.__module__.rsplit('.', 1)[-1]}.{handler.__qualname__}"
        for p in primitives:
            old = _RULES.get(p)
            if old is not None:
                raise ValueError(f"tessera.jax: primitive `{p}` is registered twice "
                                 f"({old.where} and {where})")
            _RULES[p] = Rule(p, handler, emits, where)
        return handler
    return add


def rules() -> dict[str, Rule]:
    """The registered rules by primitive name (a copy)."""
    return dict(_RULES)


# ---- the translator ----------------------------------------------------------------

#: a %name the IR can spell (docs/ir.md): ASCII letters, digits and `_`
_IR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
#: the builder's names of unnamed values (`%v<N>`), which a user's name must
#: not take
_AUTO_NAME = re.compile(r"v[0-9]+\Z")


def spellable(name: str | None) -> bool:
    """Whether a Python name can be a ref's name in the IR as it is."""
    return bool(name) and _IR_NAME.match(name) is not None and not _AUTO_NAME.match(name)


#: prefetch dtypes tessera's SMEM holds widened to i32 (see Translator.build)
_WIDENED = {"i8", "i16", "u8", "u16", "i1"}


#: what skip_floating_point_ops still computes, as JAX's interpret mode
#: does: memory accesses, DMAs and semaphores, control flow (whose bodies
#: skip in turn), scoped allocations and the pipeline
_COMPUTED_WHEN_SKIPPING = frozenset({
    "get", "swap", "load", "masked_load", "addupdate", "delay", "prng_seed",
    "prng_random_bits", "trace_value", "cond", "scan", "while", "pjit", "jit", "closed_call",
    "run_scoped", "emit_pipeline", "pipeline_body", "dma_start", "dma_wait",
    "get_barrier_semaphore", "semaphore_signal", "semaphore_wait", "semaphore_read",
})


def _is_float_value(aval) -> bool:
    """An array value (not a ref) of a floating-point dtype."""
    dtype = getattr(aval, "dtype", None)
    if dtype is None or hasattr(aval, "inner_aval") or not hasattr(aval, "shape"):
        return False
    try:
        return bool(np.issubdtype(np.dtype(dtype), np.floating)) or str(dtype) == "bfloat16"
    except TypeError:
        return False


class Translator:
    """The state of one kernel's translation (one per `translate` call)."""

    def __init__(self, call: ji.PallasCall, name: str):
        self.call = call
        self.name = name
        self.kernel_file = ""
        dbg = getattr(call.jaxpr, "debug_info", None)
        src = getattr(dbg, "func_src_info", None) or ""
        m = re.search(r" at (.+):(\d+)$", src)
        if m:
            self.kernel_file = m.group(1)
        self.mb = B.ModuleBuilder(self.kernel_file or f"<pallas kernel {name}>")
        self.kb = self.mb.kernel(name)
        self.loc: tuple = ()
        self.prim = "pallas_call"
        self.bounds_at_run = False  # translate()'s option
        self.refuse_scoped_hbm = False  # translate()'s option
        self.skip_float_ops = False  # translate()'s option
        self.num_sems = 0
        self.prefetch_refs: list[B.Value] = []
        self.narrowed: dict[int, str] = {}    # widened ref -> the kernel's dtype
        self.operand_locs: dict = {}
        self.prims_at: dict = {}
        # The names the kernel's refs have in the IR, which every diagnostic
        # prints: the user's Python names where the IR can spell them
        # (fresh_name), so no name table is needed anywhere after.
        self.used_names: set[str] = set()
        # ((axis name, size), ...) of the mesh the kernel runs on (the named
        # axes of the enclosing shard_map, in JAX's axis-environment order),
        # or None when unknown (then `axis_index` is the device id itself).
        self.mesh: tuple | None = None
        self.numerics = "cpu"  # or "tpu": f32 dots as a TPU's MXU rounds them
        self.barrier: B.Value | None = None  # the `sem` get_barrier_semaphore gives
        self.in_index_map = False  # translating an index map (only `map` ops there)
        # the test suite checks each rule builds only the ops it declares
        self.check_emits = os.environ.get("TESSERA_JAX_CHECK_EMITS") == "1"

    # ---- errors and locations ------------------------------------------------

    def fail(self, message: str) -> TranslationError:
        file, line = (self.loc[0], self.loc[1]) if self.loc else ("", 0)
        return TranslationError(message, self.prim, file, line)

    # ---- building helpers -----------------------------------------------------

    def op(self, region, mnemonic, operands=(), results=(), **kw):
        if self.check_emits and mnemonic not in IMPLICIT_EMITS:
            rule = _RULES.get(self.prim)
            declared = rule.emits if rule is not None else HEADER_EMITS.get(self.prim, ())
            if mnemonic not in declared:
                raise self.fail(f"internal: the rule of `{self.prim}` built `{mnemonic}`, "
                                "which its `emits` does not declare")
        if mnemonic in ("load", "store") and len(self.loc) >= 3:
            self.prims_at.setdefault((self.loc[1], self.loc[2], mnemonic), self.prim)
        try:
            return self.kb.op(region, mnemonic, operands, results, loc=self.loc, **kw)
        except Exception as e:  # a builder refusal: name the user's line
            raise self.fail(f"building `{mnemonic}` for `{self.prim}` failed: {e}") from e

    def emit(self, region, mnemonic, operands, rtype: B.Type, **kw) -> B.Value:
        return self.op(region, mnemonic, operands, [rtype], **kw)[1][0]

    def const(self, region, value, t: B.Type) -> B.Value:
        if t.dtype in B.FLOAT_DTYPES:
            lit: Any = float(value)
        elif t.dtype == "i1":
            lit = int(bool(value))
        else:
            lit = int(value)
        return self.op(region, "const", (), [t], literal=lit)[1][0]

    def i32(self, region, x) -> B.Value:
        """x (an int or a scalar Value) as an i32 scalar Value."""
        if isinstance(x, B.Value):
            if x.type.kind != "scalar":
                raise self.fail(f"an index must be a scalar, got {x.type}")
            if x.type.dtype != "i32":
                return self.emit(region, "convert", [x], B.Type.value("i32", ()))
            return x
        return self.const(region, int(x), B.Type.value("i32", ()))

    def iarith(self, region, mnemonic, a, b):
        """a op b on index starts (ints folded, else i32 ops)."""
        if not isinstance(a, B.Value) and not isinstance(b, B.Value):
            return a + b if mnemonic == "add" else a * b
        if mnemonic == "add" and not isinstance(b, B.Value) and b == 0:
            return a
        if mnemonic == "add" and not isinstance(a, B.Value) and a == 0:
            return b
        if mnemonic == "mul" and not isinstance(b, B.Value) and b == 1:
            return a
        if mnemonic == "mul" and not isinstance(a, B.Value) and a == 1:
            return b
        return self.emit(region, mnemonic, [self.i32(region, a), self.i32(region, b)],
                         B.Type.value("i32", ()))

    # ---- environment ----------------------------------------------------------

    def read(self, env, region, atom) -> B.Value:
        """A scalar/block value for a jaxpr atom (a Literal becomes a const)."""
        if isinstance(atom, ji.Literal):
            return self.const_array(region, atom.val, atom.aval)
        try:
            v = env[atom]
        except KeyError:
            raise self.fail(f"internal: variable {atom} is not defined") from None
        if isinstance(v, RefView):
            raise self.fail(f"a ref is used where a value is expected ({atom})")
        return v

    def const_array(self, region, val, aval) -> B.Value:
        t = type_of_aval(aval)
        arr = np.asarray(val)
        flat = np.ascontiguousarray(arr.reshape(-1))
        # a splat is one bit pattern repeated: compared as bytes, so that a
        # NaN splat is one (NaN != NaN) and 0.0 and -0.0 are not
        raw = flat.view(np.uint8).reshape(flat.size, -1) if flat.size else flat
        if flat.size == 0 or not np.all(raw == raw[0]):
            raise self.fail("a constant array that is not a splat (capture it as an input)")
        return self.const(region, flat[0].item(), t)

    def static_int(self, env, atom):
        """An index atom as an int when static, else its Value."""
        if isinstance(atom, (int, np.integer)):
            return int(atom)
        if isinstance(atom, ji.Literal):
            return int(atom.val)
        if hasattr(atom, "shape") and not isinstance(atom, ji.Var) and np.ndim(atom) == 0:
            try:
                return int(atom)
            except Exception:
                pass
        v = env.get(atom)
        if v is None:
            raise self.fail(f"an index ({atom}) that is not a scalar value")
        if isinstance(v, RefView):
            raise self.fail("a ref used as an index")
        return v

    def ref(self, env, atom) -> RefView:
        v = env.get(atom) if isinstance(atom, ji.Var) else None
        if not isinstance(v, RefView):
            raise self.fail(f"expected a ref, got {atom}")
        return v

    # ---- views ---------------------------------------------------------------

    def apply_transforms(self, env, region, view: RefView, transforms) -> RefView:
        for t in transforms:
            shape = ji.reshape_of(t)
            cast = ji.bitcast_of(t)
            if shape is not None or cast is not None:
                view = self._chain_step(view, shape, cast)
                continue
            try:
                dims = ji.ndindexer_dims(t)
            except NotImplementedError as e:
                raise self.fail(f"`{self.prim}` with {e}") from None
            cur = view.rdims if view.reshaped is not None else view.dims
            kept = [i for i, d in enumerate(cur) if d[0] == "range"]
            if len(dims) != len(kept):
                raise self.fail(f"an indexer of rank {len(dims)} on a view of rank {len(kept)}")
            if view.arrays:
                raise self.fail("a ref view of a ref indexed by an array of indices")
            new = list(cur)
            arrays = {}
            for pos, d in zip(kept, dims):
                if d.kind == "array":
                    if view.reshaped is not None:
                        raise self.fail("an array of indices into a reshaped ref")
                    arrays[pos] = d.start
                    continue
                _, s, n, st = cur[pos]
                size = d.size
                if d.kind == "slice" and not isinstance(size, int):
                    size = self.static_int(env, size)
                    if isinstance(size, B.Value):
                        size = self.i32(region, size)
                start = self.static_int(env, d.start)
                if isinstance(start, B.Value):
                    start = self.i32(region, start)
                elif d.kind == "point" and start < 0:
                    # `x_ref[:, -1]`: a literal negative integer counts from
                    # the end of the view's dimension, as in numpy and in
                    # JAX's discharge of ref indexing
                    start += n
                off = self.iarith(region, "add", s, self.iarith(region, "mul", start, st))
                if (self.bounds_at_run and view.reshaped is None
                        and not isinstance(off, B.Value) and not isinstance(size, B.Value)
                        and not _static_in_bounds(off, 1 if d.kind == "point" else size,
                                                  st * (1 if d.kind == "point" else d.stride),
                                                  view.base.type.shape[pos])):
                    # A static index outside the ref: checked when the access
                    # runs (an index operand), as JAX's interpret mode does,
                    # so a kernel's first fault in program order is the one
                    # reported, not every static one before the run.
                    off = self.const(region, int(off), B.Type.value("i32", ()))
                if d.kind == "point":
                    new[pos] = ("point", off)
                else:
                    new[pos] = ("range", off, size, st * d.stride)
            if view.reshaped is not None:
                view = RefView(view.base, view.dims, view.reshaped, new, chain=view.chain,
                               shapes=view.shapes)
            else:
                view = RefView(view.base, new)
            if arrays:
                # ordinals among the kept dimensions after the points of
                # this indexer dropped theirs
                left = [i for i, d in enumerate(new) if d[0] == "range"]
                view.arrays = {left.index(p): a for p, a in arrays.items()}
                view.index_shape = tuple(int(n) for n in ji.index_shape(t))
        return view

    def _chain_step(self, view: RefView, shape, cast) -> RefView:
        """`view` reshaped to `shape` or bitcast to `cast` (a value step
        of its chain: RefView.chain)."""
        if view.arrays:
            raise self.fail("a reshape or bitcast of a ref indexed by an array of indices")
        if view.reshaped is not None and any(
                e[0] != "range" or isinstance(e[1], B.Value) or e[1:] != (0, n, 1)
                for e, n in zip(view.rdims, view.reshaped)):
            # Only the last indexer may select within a transformed ref: the
            # elements a read takes are then known in the view before the
            # transforms (a mask of its load).
            raise self.fail("a reshape or bitcast of a reshaped or bitcast ref that was "
                            "indexed in between")
        cur = view.shape if view.reshaped is None else view.reshaped
        shapes = view.shapes or (tuple(cur),)
        if shape is not None:
            new, step = tuple(int(d) for d in shape), ("reshape", tuple(int(d) for d in shape))
            if int(np.prod(new)) != int(np.prod(cur)):
                raise self.fail(f"a reshape of a ref view of shape {tuple(cur)} to {new}")
        else:
            dt, src = dtype_name(cast), view.dtype
            a, b = _BITS.get(src), _BITS.get(dt)
            if a is None or b is None:
                raise self.fail(f"a bitcast of a {src} ref to {dt}")
            new = tuple(cur)
            if a != b:
                # TPU's rule (jax._src.state.utils.bitcast): the
                # second-minor dimension scales by the ratio of the widths
                if len(cur) < 2 or (cur[-2] * a) % b:
                    raise self.fail(f"a bitcast of a {src} ref view of shape {tuple(cur)} "
                                    f"to {dt}")
                new = (*cur[:-2], cur[-2] * a // b, cur[-1])
            step = ("bitcast", dt)
        return RefView(view.base, view.dims, new, [("range", 0, d, 1) for d in new],
                       chain=view.chain + (step,), shapes=shapes + (new,))

    def indices(self, view: RefView) -> list[B.Index]:
        if view.reshaped is not None and self.prim not in ("get", "swap", "masked_load",
                                                          "masked_swap"):
            raise self.fail(f"`{self.prim}` on a reshaped or bitcast ref (reads and writes "
                            "of such refs are translated)")
        if view.arrays and self.prim not in ("get", "swap"):
            raise self.fail(f"`{self.prim}` through an array of indices (only reads and "
                            "writes of such views are translated)")
        out = []
        for d, full in zip(view.dims, view.base.type.shape):
            if d[0] == "point":
                out.append(B.Index("point", d[1]))
            else:
                _, s, n, st = d
                if isinstance(n, B.Value):
                    # a size the run reads: DMA views only (the verifier
                    # says so, located, for any other op)
                    out.append(B.Index("ds", s, n, st, dim=full))
                elif isinstance(s, B.Value):
                    out.append(B.Index("ds", s, n, st))
                elif s == 0 and n == full and st == 1:
                    out.append(B.Index("full", 0, full, 1))
                else:
                    out.append(B.Index("slice", s, n, st))
        return out

    def fresh_name(self, python_name: str | None, fallback: str | None) -> str | None:
        """The IR name of a ref the user named `python_name` (a parameter of
        the kernel or of a run_scoped body): that name when the IR can spell
        it and no other ref has it, else `fallback` (made unique with `_`),
        or None when there is no fallback (the builder's `%v<N>`)."""
        if spellable(python_name) and python_name not in self.used_names:
            name: str | None = python_name
        elif fallback is None:
            return None
        else:
            name = fallback
            while name in self.used_names:
                name += "_"
        self.used_names.add(name)  # type: ignore[arg-type]
        return name

    def view_of(self, env, region, obj) -> RefView:
        ref, transforms = ji.ref_transforms(obj)
        return self.apply_transforms(env, region, self.ref(env, ref), transforms)

    # ---- jaxprs ---------------------------------------------------------------

    def run_jaxpr(self, region, jaxpr, consts: Sequence[Any], args: Sequence[Any]) -> list:
        """Translates `jaxpr` into `region` with constvars bound to `consts`
        and invars to `args` (env entries); returns its outputs' entries."""
        env: dict = {}
        for v, c in zip(jaxpr.constvars, consts):
            env[v] = c if isinstance(c, (B.Value, RefView)) else self.const_array(
                region, c, ji.aval_of(v))
        for v, a in zip(jaxpr.invars, args):
            env[v] = a
        used = {v for e in jaxpr.eqns for v in e.invars if isinstance(v, ji.Var)}
        used.update(v for v in jaxpr.outvars if isinstance(v, ji.Var))
        outer_loc, outer_prim = self.loc, self.prim
        for eqn in jaxpr.eqns:
            loc = ji.user_location(eqn)
            self.loc = loc if loc[0] else outer_loc
            self.prim = eqn.primitive.name
            self.equation(env, region, eqn, used)
        self.loc, self.prim = outer_loc, outer_prim
        out = []
        for v in jaxpr.outvars:
            out.append(self.const_array(region, v.val, v.aval) if isinstance(v, ji.Literal)
                       else env[v])
        return out

    def yield_(self, region, values: Sequence[B.Value]) -> None:
        self.op(region, "yield", list(values), [])

    def equation(self, env, region, eqn, used) -> None:
        name = eqn.primitive.name
        if self.skip_float_ops and name not in _COMPUTED_WHEN_SKIPPING and eqn.outvars and all(
                _is_float_value(v.aval) for v in eqn.outvars):
            # JAX's skip_floating_point_ops: an equation that only makes
            # floating-point values is not computed; its values read as +inf
            # (what JAX's interpret mode puts in their place, for every
            # floating-point value: see below).
            for v in eqn.outvars:
                if not isinstance(v, ji.DropVar):
                    env[v] = self.const(region, float("inf"), type_of_aval(v.aval))
            return
        rule = _RULES.get(name)
        if rule is None:
            raise self.fail(f"primitive `{name}` is not supported")
        outs = rule.handler(self, env, region, eqn, used)
        if outs is not None:
            for v, o in zip(eqn.outvars, outs):
                if not isinstance(v, ji.DropVar):
                    # skipping: every floating-point value, a loaded one
                    # too, reads as +inf (as in JAX's interpret mode)
                    env[v] = (self.const(region, float("inf"), type_of_aval(v.aval))
                              if self.skip_float_ops and _is_float_value(v.aval) else o)

    # ---- the kernel -----------------------------------------------------------

    def build(self) -> TranslatedKernel:
        call, gm = self.call, self.call.grid_mapping
        params = call.eqn.params
        loc = ji.call_location(call)
        self.loc = loc if loc[0] else ()  # header errors name the pallas_call's line
        # A dynamic grid bound (a traced extent) is one of the call's first
        # operands, in the order of the dims: a rank-0 i32 prefetch operand
        # the grid line names (docs/ir.md, "Kernels").
        dynamic = [d for d, g in enumerate(gm.grid) if ji.is_dynamic_grid_dim(g)]
        grid = tuple(B.GRID_DYNAMIC if d in dynamic else int(g)
                     for d, g in enumerate(gm.grid))
        sem = ji.dimension_semantics(params.get("compiler_params"), len(grid))
        if isinstance(params.get("compiler_params"), dict):
            for v in params["compiler_params"].values():
                sem = sem or ji.dimension_semantics(v, len(grid))
        if sem is not None:
            if len(sem) != len(grid):
                raise self.fail(f"dimension_semantics has {len(sem)} entries for a grid of "
                                f"rank {len(grid)}")
            # Pallas takes the dims' semantics in any order, tessera's
            # verifier wants the parallel ones first: the library rewrites
            # them into its order (a parallel dim after an arbitrary one runs
            # in order, which is always correct; docs/jax.md, "What is
            # translated").
            sem = self.kb.ordered_semantics(sem)
        self.kb.set_grid(grid, sem)
        nidx, nin, nout = gm.num_index_operands, gm.num_inputs, gm.num_outputs
        # The kernel's parameter names (prefetch, in, out, scratch refs, in
        # its signature's order): each ref is named by its parameter in the
        # IR, so diagnostics say `%x_ref`; one the IR cannot spell (`refs[0]`
        # of a `*refs` kernel) or that two refs share keeps tessera's name
        # (`%in0`). Claimed first, so that no fallback takes a user's name.
        py_names = ji.kernel_arg_names(call.jaxpr)
        counts: dict = {}
        for n in py_names:
            counts[n] = counts.get(n, 0) + 1
        py_names = [n if spellable(n) and counts[n] == 1 else None for n in py_names]
        self.used_names.update(n for n in py_names if n)
        params_iter = iter(py_names)

        def ref_name(fallback: str) -> str:
            python_name = next(params_iter, None)
            if python_name:
                return python_name
            return self.fresh_name(None, fallback)  # type: ignore[return-value]
        ndyn = len(dynamic)
        # Pallas numbers aliased inputs without the dynamic bounds (its TPU
        # lowering shifts them by their count): here they are decls before
        # the prefetch and in operands.
        aliases_in_out = {i + ndyn: o for i, o in
                          dict(params.get("input_output_aliases") or ()).items()}
        out_alias = {o: i for i, o in aliases_in_out.items()}
        for n, d in enumerate(dynamic):
            aval = call.in_avals[n]
            if aval.shape != () or dtype_name(aval.dtype) != "i32":
                raise self.fail(f"dynamic grid bound {n}: {aval.str_short()}, expected a "
                                "scalar int32")
            self.kb.add_operand(B.ROLE_PREFETCH, self.fresh_name(None, f"g{d}"),
                                B.Type.value("i32", ()), "smem")
            self.kb.set_grid_bound(d, n)
        refs: list[Any] = []
        for i in range(nidx):
            aval = call.in_avals[ndyn + i]
            try:
                t = B.Type.value(dtype_name(aval.dtype), aval.shape)
            except ValueError as e:
                raise self.fail(f"scalar prefetch operand {i}: {e}") from None
            narrow = None
            if t.dtype in _WIDENED:
                # SMEM holds 32-bit words: a narrow integer table (as Pallas
                # kernels "downcast" SMEM data) is widened to i32 on the way
                # in, and every read converts back to its dtype.
                narrow, t = t.dtype, B.Type.value("i32", t.shape)
            ref, _ = self.kb.add_operand(B.ROLE_PREFETCH, ref_name(f"p{i}"), t, "smem")
            self.prefetch_refs.append(ref)
            if narrow:
                self.narrowed[ref.ptr] = narrow
            refs.append(RefView.whole(ref))
        maps = []
        map_locs = ji.index_map_locations(gm)
        for k, bm in enumerate(gm.block_mappings):
            is_out = k >= nin
            role = B.ROLE_OUT if is_out else B.ROLE_IN
            aval = bm.array_aval
            kind = ji.semaphore_kind(aval.dtype)
            if kind is not None:
                # A semaphore carried from one pallas_call to another (a DMA
                # started in one call and waited for in the next): a
                # semaphore operand, whose array holds its counts (i32)
                # between the calls (docs/jax.md, docs/semantics.md).
                alias = out_alias.get(k - nin, -1) if is_out else -1
                name = ref_name(f"out{k - nin}" if is_out else f"in{k}")
                self.operand_locs[name] = ji.call_location(call)
                ref, _ = self.kb.add_operand(role, name, B.Type.sem(kind == "dma_sem", aval.shape),
                                             "any", None, alias)
                refs.append(RefView.whole(ref))
                continue
            try:
                at = B.Type.value(dtype_name(aval.dtype), aval.shape)
            except ValueError as e:
                raise self.fail(f"{bm.origin}: {e}") from None
            space = ji.memory_space_name(bm.transformed_block_aval)
            if space in ("default", "vmem"):
                space = "vmem"
            elif space not in ("any", "hbm", "smem"):
                raise self.fail(f"{bm.origin}: memory space {space} for a block")
            block, elements = None, {}
            # A rank-0 array is its own (only) block at every grid step: no
            # block line, no index map.
            if space in ("vmem", "smem") and at.kind != "scalar":
                dims = ji.block_dims(bm)
                for d in dims:
                    if d.kind == "bounded":
                        raise self.fail(f"{bm.origin}: pl.BoundedSlice block dimensions "
                                        "are not supported")
                block = [B.SQUEEZED if d.kind == "squeezed" else d.size for d in dims]
                # pl.Element: the index map gives element offsets (into the
                # array padded as it says), the IR's element dims
                elements = {n: d.padding for n, d in enumerate(dims) if d.kind == "element"}
            alias = -1
            if is_out and (k - nin) in out_alias:
                alias = out_alias[k - nin]
            # pl.RevisitMode.ANY on an output with blocks: the IR's revisit
            # mode any (inputs ignore it, as in Pallas; hbm/any outputs have
            # no window for it, and Pallas's lowering ignores it there too)
            revisit, buffers = ji.revisit_any(bm)
            revisit = revisit and is_out and space in ("vmem", "smem")
            if revisit and buffers != 1:
                raise self.fail(f"{bm.origin}: RevisitMode.ANY is not supported with double "
                                "buffering (Pallas's TPU lowering refuses it): use "
                                "pl.Buffered(1, revisit=pl.RevisitMode.ANY)")
            name = ref_name(f"out{k - nin}" if is_out else f"in{k}")
            loc = map_locs[k] if block is not None else None
            self.operand_locs[name] = loc or ji.call_location(call)
            ref, imap = self.kb.add_operand(role, name, at, space, block, alias, elements,
                                            revisit="any" if revisit else None)
            refs.append(RefView.whole(ref))
            if imap is not None:
                maps.append((bm, imap))
        for i, aval in enumerate(gm.scratch_avals):
            refs.append(RefView.whole(self.scratch(aval, ref_name(f"s{i}"))))
        for bm, region in maps:
            self.index_map(bm, region, len(grid))
        body = self.kb.body
        jaxpr = call.jaxpr
        if len(jaxpr.invars) != len(refs):
            raise self.fail(f"the kernel takes {len(jaxpr.invars)} refs, the grid mapping "
                            f"gives {len(refs)}")
        self.run_jaxpr(body, jaxpr, [], refs)
        tk = TranslatedKernel(self.mb, self.name, ndyn + nidx, nin, nout, call.in_avals,
                              call.out_avals, {o: i for i, o in aliases_in_out.items()},
                              operand_locs=dict(self.operand_locs),
                              prims_at=dict(self.prims_at))
        return tk

    def scratch(self, aval, name: str) -> B.Value:
        space = ji.memory_space_name(aval)
        inner = ji.inner_aval(aval)
        kind = ji.semaphore_kind(inner.dtype)
        if kind is not None or space == "semaphore_mem":
            # a barrier semaphore is an ordinary `sem` signalled across
            # devices (docs/dma.md, "Decisions")
            t = B.Type.sem(kind == "dma_sem", inner.shape)
        else:
            if space in ("default", "vmem", "any"):
                space = "vmem"
            if space not in ("vmem", "smem"):
                raise self.fail(f"scratch in memory space {space}")
            try:
                t = B.Type.ref(space, dtype_name(inner.dtype), inner.shape)
            except ValueError as e:
                raise self.fail(f"scratch {name}: {e}") from None
        ref, _ = self.kb.add_operand(B.ROLE_SCRATCH, name, t)
        return ref

    def index_map(self, bm, region, grid_rank: int) -> None:
        jaxpr, consts = ji.index_map(bm)
        args = [self.kb.region_arg(region, i, B.Type.value("i32", ())) for i in range(grid_rank)]
        args += [RefView.whole(r) for r in self.prefetch_refs]
        outer = self.loc
        self.prim = "index_map"
        if len(jaxpr.invars) != len(args):
            raise self.fail(f"{bm.origin}: index map takes {len(jaxpr.invars)} arguments, "
                            f"expected {len(args)}")
        self.in_index_map = True
        try:
            outs = self.run_jaxpr(region, jaxpr, consts, args)
        finally:
            self.in_index_map = False
        vals = []
        for o in outs:
            if isinstance(o, RefView):
                raise self.fail(f"{bm.origin}: an index map that returns a ref")
            vals.append(self.i32(region, o))
        self.yield_(region, vals)
        self.loc, self.prim = outer, "pallas_call"


# ---- helpers of the rules ---------------------------------------------------------

def out_type(eqn, i=0) -> B.Type:
    """The type of the equation's output i."""
    return type_of_aval(eqn.outvars[i].aval)


def bcast(t, region, x: B.Value, shape) -> B.Value:
    """x broadcast (numpy rules) to `shape`, when it is a block of another
    shape (JAX's jaxprs broadcast size-1 dimensions implicitly)."""
    shape = tuple(shape)
    if x.type.kind == "scalar" or x.type.shape == shape:
        return x
    if x.type.rank != len(shape):
        x = t.emit(region, "reshape", [x], B.Type.value(
            x.type.dtype, (1,) * (len(shape) - x.type.rank) + x.type.shape))
    return t.emit(region, "broadcast", [x], B.Type.value(x.type.dtype, shape))


def reshape_to(t, region, x: B.Value, rt: B.Type) -> B.Value:
    """x (of as many elements) as a value of type rt: a reshape, or a
    scalar's broadcast, or a one-element block's sum to a scalar."""
    if rt.shape == x.type.shape:
        return x
    if rt.kind == "scalar":
        return t.emit(region, "reduce_sum", [x], rt, ints=list(range(x.type.rank)))
    if x.type.kind == "scalar":
        return t.emit(region, "broadcast", [x], rt)
    return t.emit(region, "reshape", [x], rt)


def convert_value(t, region, x: B.Value, rt: B.Type) -> B.Value:
    """x converted to rt's dtype as JAX converts (an integer to bool: x != 0;
    a float to bool: `convert`, which says False for a subnormal as XLA does,
    where `ne` would say True; docs/semantics.md, "Numerics")."""
    if rt.dtype == x.type.dtype:
        return x
    if rt.dtype == "i1" and x.type.dtype not in B.FLOAT_DTYPES:
        zero = t.const(region, 0, B.Type.value(x.type.dtype, ()))
        return t.emit(region, "ne", [x, zero], rt)
    return t.emit(region, "convert", [x], rt)


def as_value(t, region, o) -> B.Value:
    """A region's result, which must be a value (not a ref)."""
    if isinstance(o, RefView):
        raise t.fail("a control-flow region that returns a ref")
    return o
