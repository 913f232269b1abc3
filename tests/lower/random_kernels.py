#!/usr/bin/env python3
"""Random valid tessera kernels for the differential test of the CPU backend
(tests/lower/test_differential.sh): compiled and interpreted results of each
must agree.

    random_kernels.py --count N --seed S --out DIR [--tessera PATH] [--tpu-tiles]

writes DIR/rand_S_I.tsr (one kernel @rand_S_I each, I = 0..N-1); the same
seed and op table always give the same files. The op list comes from
`tessera ops` of --tessera, else of $TESSERA. Every kernel is meant to verify and to run
without kernel errors in the interpreter: blocks cover the arrays (padded edge
blocks included), each output block is written whole exactly once, scratch is
written before it is read. With --tessera, each file is checked with
`tessera check` and the script fails if one does not verify.

What the kernels contain: 1-3 inputs and 1-3 outputs of one array shape
(rank 1-3, padded or not, squeezed leading dims, odd last dims up to 129:
every vector tail), on a grid with one axis per
blocked dimension (the first one sometimes walked backwards); a body of random elementwise ops over all dtypes (with
scalar operands and constants), comparisons and selects, conversions and
bitcasts, reductions and arg-reductions broadcast back, transposes, reshapes,
rolls, gathers (some scattered back), slices and concatenations, integer dots,
for loops with one or two block carries (two: yielded swapped), while loops with a counter, ifs
with block results, scratch round trips, local DMAs (plain and accumulating)
and semaphores, masked loads and stores. No float dot (the compiled dot uses
fused multiply-adds) and nothing that needs several cores or devices.
"""
import argparse
import os
import random
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import oplist  # noqa: E402  (tests/oplist.py)

FLOATS = ["f32", "bf16", "f16"]
SINTS = ["i32", "i16", "i8"]
UINTS = ["u32", "u16", "u8"]
DTYPES = FLOATS + SINTS + UINTS + ["i1"]
BITS = {"f32": 32, "bf16": 16, "f16": 16, "i32": 32, "u32": 32, "i16": 16, "u16": 16,
        "i8": 8, "u8": 8, "i1": 1}

# Which ops the generator emits comes from the op table (`tessera ops`, read
# through tests/oplist.py): the elementwise, comparison and reduction groups
# by syntax, rule and element-class flags (see load_ops), so a new row of
# ir/ops.def in one of them is generated without a change here. The ops of
# other rules are written by the code below, by name: STRUCTURAL lists them
# and load_ops checks it against the table.
STRUCTURAL = ["const", "load", "store", "program_id", "num_programs", "select", "convert",
              "bitcast", "iota", "broadcast", "reshape", "transpose", "slice", "concatenate",
              "roll", "gather", "scatter", "sort", "argsort", "dot", "for", "while", "if", "scoped", "yield",
              "condition", "print", "assert", "dma_start", "dma_wait", "sem_signal", "sem_wait",
              "sem_read", "multiple_of"]
# Ops of the table's groups left out for some element classes: op -> (classes,
# why). The generator needs none today (every op takes all values of its
# classes: log of a negative is NaN on both backends); load_ops checks each
# entry against the table.
RESTRICTED = {}
CLASS_FLAG = {"float": "float", "sint": "int", "uint": "int", "bool": "bool"}
GROUPS = {}  # (group, element class) -> mnemonics in table order; see load_ops


def load_ops(tessera):
    """Fills GROUPS from the op table of the tessera binary."""
    table = oplist.ops(tessera)
    names = {op["mnemonic"] for op in table}
    stale = [m for m in STRUCTURAL + list(RESTRICTED) if m not in names]
    if stale:
        raise SystemExit("random_kernels.py: not in `tessera ops`: %s" % ", ".join(stale))
    groups = {"unary": ("UNARY", "ELEMWISE"), "binary": ("BINARY", "ELEMWISE"),
              "compare": (None, "COMPARE"), "reduce": (None, "REDUCE"),
              "argreduce": (None, "ARG_REDUCE")}
    for group, (syntax, rule) in groups.items():
        for c, flag in CLASS_FLAG.items():
            GROUPS[group, c] = [
                op["mnemonic"] for op in table
                if op["rule"] == rule and syntax in (None, op["syntax"]) and flag in op["flags"]
                and c not in RESTRICTED.get(op["mnemonic"], ((), ""))[0]]
    # "%r = NAME : i32": the core's and device's ids
    GROUPS["id_query"] = [op["mnemonic"] for op in table if op["rule"] == "ID_QUERY"]


def cls(dt):
    if dt in FLOATS:
        return "float"
    if dt in SINTS:
        return "sint"
    if dt in UINTS:
        return "uint"
    return "bool"


def ty(dt, shape):
    return dt if not shape else "%s[%s]" % (dt, ", ".join(str(d) for d in shape))


class Gen:
    def __init__(self, rng, name, tpu_tiles=False):
        self.r = rng
        self.name = name
        self.tpu_tiles = tpu_tiles  # gen_kernel's: the kernel is drawn to emit for TPU
        self.lines = []
        self.n = 0
        self.pool = []     # (name, dtype): blocks of the ref shape
        self.scalars = []  # (name, dtype)

    def fresh(self, prefix="v"):
        self.n += 1
        return "%%%s%d" % (prefix, self.n)

    def emit(self, text, indent=1):
        self.lines.append("  " * indent + text)

    def literal(self, dt):
        r = self.r
        c = cls(dt)
        if c == "float":
            return r.choice(["0.5", "-0.75", "1.5", "2.0", "-3.0", "0.1", "7.0", "0.001", "-1.0"])
        if c == "bool":
            return r.choice(["true", "false"])
        hi = {"i32": 1000, "i16": 300, "i8": 100, "u32": 1000, "u16": 300, "u8": 200}[dt]
        lo = -hi if c == "sint" else 0
        return str(r.randint(lo, hi))

    def const(self, dt, shape=(), indent=1):
        v = self.fresh("c")
        self.emit("%s = const %s : %s" % (v, self.literal(dt), ty(dt, shape)), indent)
        return v

    def pick(self, pred=lambda dt: True):
        cands = [p for p in self.pool if pred(p[1])]
        if not cands:
            return None
        # prefer recent values so that chains form
        k = len(cands)
        i = k - 1 - min(int(self.r.expovariate(0.6)), k - 1)
        return cands[i]

    def scalar_of(self, dt):
        cands = [s for s in self.scalars if s[1] == dt]
        if cands and self.r.random() < 0.5:
            return self.r.choice(cands)[0]
        v = self.const(dt)
        self.scalars.append((v, dt))
        return v


def tpu_block(r, rank, d):
    """(block dim, number of blocks) for dim d that Pallas's TPU tiling
    takes (docs/tpu.md, "Layout rules"): the last two block dims are
    multiples of (8, 128) or the whole array; a 1-D block is the whole
    array (see below)."""
    if rank == 1:
        # the whole array
        return r.choice([8, 37, 100, 128, 200, 256, 300, 1024, 2048]), 1
    if d == rank - 1:
        if r.random() < 0.5:
            return r.choice([3, 16, 48, 128, 200]), 1
        return r.choice([128, 256]), r.choice([2, 3])
    if d == rank - 2:
        if r.random() < 0.5:
            return r.choice([1, 2, 5, 8, 16]), 1
        return r.choice([8, 16]), r.choice([2, 3])
    return r.choice([1, 2, 4]), r.choice([1, 1, 2, 3])


def gen_kernel(rng, name, tpu_tiles=False):
    """One kernel @name drawn from rng. tpu_tiles: block shapes TPUs can
    tile (tpu_block), so that most kernels get past Pallas's layout rules
    and exercise the TPU emitter; a block squeezed to 1-D from a 2-D array
    still occurs now and then (check --target tpu refuses it)."""
    g = Gen(rng, name, tpu_tiles)
    r = rng
    rank = r.choice([1, 2, 2, 2, 3])
    block, nblocks, array = [], [], []
    for d in range(rank):
        inner = d == rank - 1
        if tpu_tiles:
            b, nb = tpu_block(r, rank, d)
        else:
            # inner blocks: every tail a vector loop can leave (one element
            # included: 17, 129 and the odd draws of 1..99), for every dtype
            b = r.choice([1, 3, 8, 16, 17, 24, 37, 48, 128, 129, 0] if inner else [1, 2, 4, 5, 8])
            if b == 0:
                b = 2 * r.randint(0, 49) + 1
            nb = r.choice([1, 1, 2, 3])
        pad = r.randint(1, b - 1) if b > 1 and nb > 1 and r.random() < 0.4 else 0
        block.append(b)
        nblocks.append(nb)
        array.append(nb * b - pad)
    # a leading dim of block 1 may be squeezed (rarely, for TPU tiles, when
    # that leaves a 1-D block)
    p_squeeze = 0.1 if tpu_tiles and rank == 2 else 0.5
    squeezed = [rank > 1 and d == 0 and block[d] == 1 and r.random() < p_squeeze
                for d in range(rank)]
    shape = [block[d] for d in range(rank) if not squeezed[d]]  # the ref shape
    axes = [d for d in range(rank) if nblocks[d] > 1]
    grid = [nblocks[d] for d in axes]
    gnames = ["%%g%d" % i for i in range(len(grid))]
    mapped = []
    for d in range(rank):
        mapped.append(gnames[axes.index(d)] if d in axes else "0")
    blk = ", ".join("squeezed" if squeezed[d] else str(block[d]) for d in range(rank))
    # sometimes the first blocked dim is walked backwards (a map region)
    reverse = bool(axes) and r.random() < 0.3
    n_specs = [0]

    def spec():
        if not reverse:
            return "block[%s] map(%s) -> (%s)" % (blk, ", ".join(gnames), ", ".join(mapped))
        n_specs[0] += 1
        k = n_specs[0]
        return map_region(blk, ["%%mn%d = const %d : i32" % (k, nblocks[axes[0]] - 1),
                                "%%mr%d = sub %%mn%d, %s : i32" % (k, k, gnames[0]),
                                "%%mz%d = const 0 : i32" % k], "%%mr%d" % k, "%%mz%d" % k)

    def map_region(blk, body, first, zero):
        """An index map as a region: `body`'s lines, then a yield of
        `first` for the first walked dim, the grid index of the other
        walked dims, and `zero` for the rest."""
        ys = [first if d == axes[0] else gnames[axes.index(d)] if d in axes else zero
              for d in range(rank)]
        return "\n".join(["block[%s] map(%s) {" % (blk, ", ".join(gnames))]
                         + ["    " + line for line in body]
                         + ["    yield %s" % ", ".join(ys), "  }"])

    # an input's first walked dim is now and then an element dim (pl.Element:
    # the map gives element offsets into the array padded low and high, the
    # window starting up to `low` elements early), drawn from a generator
    # of its own so that every other draw of the kernel stays as it was
    er = random.Random("element:" + name)

    def in_spec():
        if tpu_tiles or reverse or not axes or squeezed[axes[0]] or er.random() >= 0.25:
            return spec()
        n_specs[0] += 1
        k = n_specs[0]
        d0 = axes[0]
        lo, hi = er.randint(0, 3), er.randint(0, 3)
        early = er.randint(0, lo)
        ents = ["squeezed" if squeezed[d] else str(block[d]) for d in range(rank)]
        ents[d0] = "element(%d, %d, %d)" % (block[d0], lo, hi)
        return map_region(", ".join(ents),
                          ["%%eb%d = const %d : i32" % (k, block[d0]),
                           "%%em%d = mul %s, %%eb%d : i32" % (k, gnames[0], k),
                           "%%es%d = const %d : i32" % (k, lo - early),
                           "%%eo%d = add %%em%d, %%es%d : i32" % (k, k, k),
                           "%%ez%d = const 0 : i32" % k], "%%eo%d" % k, "%%ez%d" % k)

    n_in = r.randint(1, 3)
    in_dtypes = [r.choice(DTYPES) for _ in range(n_in)]
    header = ["kernel @%s" % name]
    if grid:
        sem = ", ".join(r.choice(["parallel", "arbitrary"]) for _ in grid)
        # parallel dims must be a prefix
        parts = sem.split(", ")
        seen_arb = False
        for i, p in enumerate(parts):
            if p == "arbitrary":
                seen_arb = True
            elif seen_arb:
                parts[i] = "arbitrary"
        header.append("  grid(%s) semantics(%s)" % (", ".join(map(str, grid)), ", ".join(parts)))
    for i, dt in enumerate(in_dtypes):
        header.append("  in %%x%d: %s vmem %s" % (i, ty(dt, array), in_spec()))

    full = [":"] * len(shape)
    idx = "[%s]" % ", ".join(full) if shape else "[]"
    for i, dt in enumerate(in_dtypes):
        v = g.fresh("in")
        g.emit("%s = load %%x%d%s : %s" % (v, i, idx, ty(dt, shape)))
        g.pool.append((v, dt))

    scratch = []
    n_ops = r.randint(4, 18)
    for _ in range(n_ops):
        gen_op(g, shape, scratch, len(grid))

    n_out = r.randint(1, 3)
    outs = []
    for i in range(n_out):
        v, dt = g.pick() if r.random() < 0.8 else r.choice(g.pool)
        outs.append((v, dt))
    for i, (v, dt) in enumerate(outs):
        header.append("  out %%y%d: %s vmem %s" % (i, ty(dt, array), spec()))
    for entry in scratch:
        sname, sdt = entry[0], entry[1]
        sshape = entry[2] if len(entry) > 2 else shape
        if sdt in ("sem", "dma_sem"):
            header.append("  scratch %s: %s" % (sname, sdt))
        else:
            header.append("  scratch %s: vmem %s" % (sname, ty(sdt, sshape)))
    for i, (v, dt) in enumerate(outs):
        g.emit("store %%y%d%s, %s" % (i, idx, v))
        if shape and r.random() < 0.25:
            # a masked second store over part of the block
            other = g.pick(lambda t, dt=dt: t == dt)
            io = g.fresh("m")
            ax = r.randrange(len(shape))
            g.emit("%s = iota %d : %s" % (io, ax, ty("i32", shape)))
            k = g.fresh("c")
            g.emit("%s = const %d : i32" % (k, r.randint(0, shape[ax])))
            m = g.fresh("m")
            g.emit("%s = lt %s, %s : %s" % (m, io, k, ty("i1", shape)))
            g.emit("store %%y%d%s, %s mask %s" % (i, idx, other[0], m))
    return "\n".join(header + ["{"] + g.lines + ["}"]) + "\n"


def unary_ops(dt):
    return GROUPS["unary", cls(dt)]


def binary_ops(dt):
    return GROUPS["binary", cls(dt)]


def gen_op(g, shape, scratch, grid_rank):
    r = g.r
    kind = r.choices(
        ["unary", "binary", "scalar_binary", "compare_select", "convert", "bitcast", "const",
         "iota", "reduce", "argreduce", "transpose", "reshape", "roll", "rotate", "gather",
         "dot", "for", "while", "if", "scratch", "masked_load", "dma", "semaphore", "query",
         "print", "scoped", "sort"],
        weights=[10, 12, 6, 6, 6, 3, 2, 2, 6, 2, 2, 2, 2, 2, 2, 2, 3, 2, 3, 2, 2, 2, 1, 1, 1,
                 2, 1])[0]
    T = lambda dt: ty(dt, shape)
    rank = len(shape)
    if kind == "unary":
        a, dt = g.pick()
        v = g.fresh()
        g.emit("%s = %s %s : %s" % (v, r.choice(unary_ops(dt)), a, T(dt)))
        g.pool.append((v, dt))
    elif kind in ("binary", "scalar_binary"):
        a, dt = g.pick()
        if kind == "binary":
            b = g.pick(lambda t: t == dt)[0]
        else:
            b = g.scalar_of(dt)
        if r.random() < 0.5:
            a, b = b, a
        if not shape and kind == "scalar_binary":
            pass
        v = g.fresh()
        g.emit("%s = %s %s, %s : %s" % (v, r.choice(binary_ops(dt)), a, b, T(dt)))
        g.pool.append((v, dt))
    elif kind == "compare_select":
        a, dt = g.pick()
        b = g.pick(lambda t: t == dt)[0]
        c = g.fresh("b")
        g.emit("%s = %s %s, %s : %s" % (c, r.choice(GROUPS["compare", cls(dt)]), a, b, T("i1")))
        g.pool.append((c, "i1"))
        x, xdt = g.pick()
        y = g.pick(lambda t: t == xdt)[0]
        if r.random() < 0.3:
            y = g.scalar_of(xdt)
        v = g.fresh()
        g.emit("%s = select %s, %s, %s : %s" % (v, c, x, y, T(xdt)))
        g.pool.append((v, xdt))
    elif kind == "convert":
        a, dt = g.pick()
        to = r.choice(DTYPES)
        v = g.fresh()
        g.emit("%s = convert %s : %s" % (v, a, T(to)))
        g.pool.append((v, to))
    elif kind == "bitcast":
        p = g.pick(lambda t: t != "i1")
        if not p:
            return
        a, dt = p
        to = r.choice([t for t in DTYPES if t != "i1" and BITS[t] == BITS[dt]])
        v = g.fresh()
        g.emit("%s = bitcast %s : %s" % (v, a, T(to)))
        g.pool.append((v, to))
    elif kind == "const":
        dt = r.choice(DTYPES)
        g.pool.append((g.const(dt, shape), dt))
    elif kind == "iota":
        if not shape:
            return
        dt = r.choice(["i32", "f32", "u8", "bf16", "i16"])
        v = g.fresh()
        g.emit("%s = iota %d : %s" % (v, r.randrange(rank), T(dt)))
        g.pool.append((v, dt))
    elif kind == "reduce":
        if not shape:
            return
        a, dt = g.pick()
        op = r.choice(GROUPS["reduce", cls(dt)])
        axes = sorted(r.sample(range(rank), r.randint(1, rank)))
        kept = [shape[d] for d in range(rank) if d not in axes]
        v = g.fresh()
        g.emit("%s = %s %s axes [%s] : %s" % (v, op, a, ", ".join(map(str, axes)), ty(dt, kept)))
        if not kept:
            g.scalars.append((v, dt))
            b = g.fresh()
            g.emit("%s = broadcast %s : %s" % (b, v, T(dt)))
            g.pool.append((b, dt))
            return
        ones = [1 if d in axes else shape[d] for d in range(rank)]
        rs = g.fresh()
        g.emit("%s = reshape %s : %s" % (rs, v, ty(dt, ones)))
        b = g.fresh()
        g.emit("%s = broadcast %s : %s" % (b, rs, T(dt)))
        g.pool.append((b, dt))
    elif kind == "argreduce":
        p = g.pick(lambda t: GROUPS["argreduce", cls(t)])
        if not shape or not p:
            return
        a, dt = p
        ax = r.randrange(rank)
        kept = [shape[d] for d in range(rank) if d != ax]
        v = g.fresh()
        g.emit("%s = %s %s axis %d : %s" % (v, r.choice(GROUPS["argreduce", cls(dt)]), a, ax,
                                            ty("i32", kept)))
        if not kept:
            g.scalars.append((v, "i32"))
            return
        ones = [1 if d == ax else shape[d] for d in range(rank)]
        rs = g.fresh()
        g.emit("%s = reshape %s : %s" % (rs, v, ty("i32", ones)))
        b = g.fresh()
        g.emit("%s = broadcast %s : %s" % (b, rs, T("i32")))
        g.pool.append((b, "i32"))
    elif kind == "transpose":
        if rank < 2:
            return
        a, dt = g.pick()
        perm = list(range(rank))
        r.shuffle(perm)
        inv = [perm.index(d) for d in range(rank)]
        t1 = g.fresh()
        g.emit("%s = transpose %s [%s] : %s" % (t1, a, ", ".join(map(str, perm)),
                                               ty(dt, [shape[p] for p in perm])))
        if r.random() < 0.5:
            u = g.fresh()
            g.emit("%s = %s %s : %s" % (u, r.choice(unary_ops(dt)), t1,
                                        ty(dt, [shape[p] for p in perm])))
            t1 = u
        t2 = g.fresh()
        g.emit("%s = transpose %s [%s] : %s" % (t2, t1, ", ".join(map(str, inv)), T(dt)))
        g.pool.append((t2, dt))
    elif kind == "reshape":
        if not shape:
            return
        a, dt = g.pick()
        n = 1
        for d in shape:
            n *= d
        f = g.fresh()
        g.emit("%s = reshape %s : %s" % (f, a, ty(dt, [n])))
        b = g.fresh()
        g.emit("%s = reshape %s : %s" % (b, f, T(dt)))
        g.pool.append((b, dt))
    elif kind == "roll":
        if not shape:
            return
        a, dt = g.pick()
        s = g.const("i32")
        v = g.fresh()
        g.emit("%s = roll %s, %s axis %d : %s" % (v, a, s, r.randrange(rank), T(dt)))
        g.pool.append((v, dt))
    elif kind == "rotate":
        if not shape:
            return
        ax = r.randrange(rank)
        n = shape[ax]
        if n < 2:
            return
        k = r.randint(1, n - 1)
        a, dt = g.pick()
        s1 = [":"] * rank
        s2 = [":"] * rank
        s1[ax] = "0:%d" % k
        s2[ax] = "%d:%d" % (k, n)
        d1 = list(shape)
        d2 = list(shape)
        d1[ax] = k
        d2[ax] = n - k
        x1, x2 = g.fresh(), g.fresh()
        g.emit("%s = slice %s [%s] : %s" % (x1, a, ", ".join(s1), ty(dt, d1)))
        g.emit("%s = slice %s [%s] : %s" % (x2, a, ", ".join(s2), ty(dt, d2)))
        v = g.fresh()
        g.emit("%s = concatenate %s, %s axis %d : %s" % (v, x2, x1, ax, T(dt)))
        g.pool.append((v, dt))
    elif kind == "gather":
        if not shape:
            return
        a, dt = g.pick()
        ax = r.randrange(rank)
        io = g.fresh()
        g.emit("%s = iota %d : %s" % (io, ax, T("i32")))
        top = g.fresh("c")
        g.emit("%s = const %d : i32" % (top, shape[ax] - 1))
        rev = g.fresh()
        g.emit("%s = sub %s, %s : %s" % (rev, top, io, T("i32")))
        v = g.fresh()
        g.emit("%s = gather %s, %s axis %d : %s" % (v, a, rev, ax, T(dt)))
        g.pool.append((v, dt))
        # and, half the time, back with scatter (not always, and never in a
        # kernel of TPU tiles: Mosaic has no scatter, and those kernels are
        # drawn to reach the TPU emitter): positions (i * 3) mod n along the
        # axis, repeated ones when 3 divides n (the last update wins)
        if r.random() < 0.5 or g.tpu_tiles:
            return
        three = g.fresh("c")
        g.emit("%s = const 3 : i32" % three)
        nn = g.fresh("c")
        g.emit("%s = const %d : i32" % (nn, shape[ax]))
        m3 = g.fresh()
        g.emit("%s = mul %s, %s : %s" % (m3, io, three, T("i32")))
        pos = g.fresh()
        g.emit("%s = rem %s, %s : %s" % (pos, m3, nn, T("i32")))
        s = g.fresh()
        g.emit("%s = scatter %s, %s, %s axis %d : %s" % (s, v, pos, a, ax, T(dt)))
        g.pool.append((s, dt))
    elif kind == "sort":
        # argsort by integer keys only: float keys one rounding apart on the
        # two backends may order differently, which is not a difference
        if not shape:
            return
        ax = r.randrange(rank)
        a, dt = g.pick()
        v = g.fresh()
        g.emit("%s = sort %s axis %d : %s" % (v, a, ax, T(dt)))
        g.pool.append((v, dt))
        keys = [g.pick(lambda t: cls(t) in ("sint", "uint", "bool")) for _ in range(r.randint(1, 2))]
        keys = [k for k in keys if k]
        if keys:
            p = g.fresh()
            g.emit("%s = argsort %s axis %d : %s" % (p, ", ".join(k[0] for k in keys), ax, T("i32")))
            g.pool.append((p, "i32"))
    elif kind == "dot":
        if rank != 2:
            return
        p = g.pick(lambda t: cls(t) in ("sint", "uint"))
        if not p:
            return
        a, dt = p
        b = g.pick(lambda t: t == dt)[0]
        m, k = shape
        acc = "i32"
        v = g.fresh()
        if r.random() < 0.5:
            # accumulate in a scratch ref: load, dot onto it, store back
            sc = "%%s%d" % len(scratch)
            scratch.append((sc, "i32", [m, m]))
            init = g.const("i32", [m, m])
            g.emit("store %s[:, :], %s" % (sc, init))
            l = g.fresh()
            g.emit("%s = load %s[:, :] : %s" % (l, sc, ty(acc, [m, m])))
            g.emit("%s = dot %s, %s, %s transpose_rhs : %s" % (v, a, b, l, ty(acc, [m, m])))
            g.emit("store %s[:, :], %s" % (sc, v))
            v2 = g.fresh()
            g.emit("%s = load %s[:, :] : %s" % (v2, sc, ty(acc, [m, m])))
            v = v2
        else:
            g.emit("%s = dot %s, %s transpose_rhs : %s" % (v, a, b, ty(acc, [m, m])))
        s = g.fresh()
        g.emit("%s = reduce_sum %s axes [1] : %s" % (s, v, ty(acc, [m])))
        rs = g.fresh()
        g.emit("%s = reshape %s : %s" % (rs, s, ty(acc, [m, 1])))
        bb = g.fresh()
        g.emit("%s = broadcast %s : %s" % (bb, rs, T(acc)))
        g.pool.append((bb, acc))
    elif kind == "for":
        a, dt = g.pick()
        w = g.pick(lambda t: t == dt)[0]
        lo, hi, st = g.const("i32"), g.fresh("c"), g.fresh("c")
        g.emit("%s = const %d : i32" % (hi, r.randint(0, 4)))
        g.emit("%s = const 1 : i32" % st)
        k = g.fresh("k")
        shape_t = T(dt)
        if r.random() < 0.5:
            # two block carries, yielded swapped through fused expressions
            b2 = g.pick(lambda t: t == dt)[0]
            res1, res2, acc1, acc2 = g.fresh(), g.fresh(), g.fresh("a"), g.fresh("a")
            g.emit("%s, %s = for %s = %s to %s step %s iter(%s = %s, %s = %s) : %s, %s {" % (
                res1, res2, k, lo, hi, st, acc1, a, acc2, b2, shape_t, shape_t))
            n1, n2 = g.fresh(), g.fresh()
            g.emit("%s = %s %s, %s : %s" % (n1, r.choice(binary_ops(dt)), acc1, w, shape_t), 2)
            g.emit("%s = %s %s, %s : %s" % (n2, r.choice(binary_ops(dt)), acc2, acc1, shape_t), 2)
            g.emit("yield %s, %s" % (n2, n1), 2)
            g.emit("}")
            g.pool.append((res1, dt))
            g.pool.append((res2, dt))
            return
        res, acc = g.fresh(), g.fresh("a")
        g.emit("%s = for %s = %s to %s step %s iter(%s = %s) : %s {" % (res, k, lo, hi, st, acc,
                                                                       a, shape_t))
        op = r.choice(binary_ops(dt))
        n1 = g.fresh()
        g.emit("%s = %s %s, %s : %s" % (n1, op, acc, w, shape_t), 2)
        g.emit("yield %s" % n1, 2)
        g.emit("}")
        g.pool.append((res, dt))
    elif kind == "while":
        a, dt = g.pick()
        w = g.pick(lambda t: t == dt)[0]
        zero, lim, one = g.fresh("c"), g.fresh("c"), g.fresh("c")
        g.emit("%s = const 0 : i32" % zero)
        g.emit("%s = const %d : i32" % (lim, r.randint(0, 3)))
        g.emit("%s = const 1 : i32" % one)
        res, cnt, t, c = g.fresh(), g.fresh(), g.fresh("a"), g.fresh("a")
        g.emit("%s, %s = while iter(%s = %s, %s = %s) : %s, i32 {" % (res, cnt, t, a, c, zero,
                                                                      T(dt)))
        go = g.fresh("b")
        g.emit("%s = lt %s, %s : i1" % (go, c, lim), 2)
        g.emit("condition %s" % go, 2)
        g.emit("} do {")
        t2, c2 = g.fresh(), g.fresh()
        g.emit("%s = %s %s, %s : %s" % (t2, r.choice(binary_ops(dt)), w, t, T(dt)), 2)
        g.emit("%s = add %s, %s : i32" % (c2, c, one), 2)
        g.emit("yield %s, %s" % (t2, c2), 2)
        g.emit("}")
        g.pool.append((res, dt))
        g.scalars.append((cnt, "i32"))
    elif kind == "if":
        a, dt = g.pick()
        b = g.pick(lambda t: t == dt)[0]
        if grid_rank and r.random() < 0.6:
            pid = g.fresh()
            g.emit("%s = program_id 0 : i32" % pid)
            two = g.fresh("c")
            g.emit("%s = const 2 : i32" % two)
            rm = g.fresh()
            g.emit("%s = rem %s, %s : i32" % (rm, pid, two))
            z = g.fresh("c")
            g.emit("%s = const 0 : i32" % z)
            c = g.fresh("b")
            g.emit("%s = eq %s, %s : i1" % (c, rm, z))
        else:
            c = g.fresh("b")
            g.emit("%s = const %s : i1" % (c, r.choice(["true", "false"])))
        res = g.fresh()
        g.emit("%s = if %s : %s {" % (res, c, T(dt)))
        u = g.fresh()
        g.emit("%s = %s %s : %s" % (u, r.choice(unary_ops(dt)), a, T(dt)), 2)
        g.emit("yield %s" % u, 2)
        g.emit("} else {")
        g.emit("yield %s" % b, 2)
        g.emit("}")
        g.pool.append((res, dt))
    elif kind == "scratch":
        a, dt = g.pick()
        s = "%%s%d" % len(scratch)
        scratch.append((s, dt))
        idx = "[%s]" % ", ".join([":"] * rank) if shape else "[]"
        g.emit("store %s%s, %s" % (s, idx, a))
        u = g.fresh()
        op = r.choice(unary_ops(dt))
        v = g.fresh()
        g.emit("%s = load %s%s : %s" % (v, s, idx, T(dt)))
        g.emit("%s = %s %s : %s" % (u, op, v, T(dt)))
        g.pool.append((u, dt))
    elif kind == "dma":
        # a local DMA between two scratch buffers, plain or accumulating
        p = g.pick()
        a, dt = p
        add = dt != "i1" and r.random() < 0.4
        s1, s2 = "%%s%d" % len(scratch), "%%s%d" % (len(scratch) + 1)
        scratch.append((s1, dt))
        scratch.append((s2, dt))
        sem = "%%d%d" % len(scratch)
        scratch.append((sem, "dma_sem"))
        idx = "[%s]" % ", ".join([":"] * rank) if shape else "[]"
        g.emit("store %s%s, %s" % (s1, idx, a))
        if add:
            g.emit("store %s%s, %s" % (s2, idx, g.pick(lambda t: t == dt)[0]))
        g.emit("dma_start %s%s -> %s%s, %s%s" % (s1, idx, s2, idx, sem, " add" if add else ""))
        g.emit("dma_wait %s%s -> %s%s, %s" % (s1, idx, s2, idx, sem))
        v = g.fresh()
        g.emit("%s = load %s%s : %s" % (v, s2, idx, T(dt)))
        g.pool.append((v, dt))
    elif kind == "semaphore":
        sem = "%%q%d" % len(scratch)
        scratch.append((sem, "sem"))
        n = g.const("i32")
        one = g.fresh("c")
        g.emit("%s = const %d : i32" % (one, r.randint(1, 5)))
        g.emit("sem_signal %s, %s" % (sem, one))
        v = g.fresh()
        g.emit("%s = sem_read %s : i32" % (v, sem))
        g.emit("sem_wait %s, %s" % (sem, one))
        w = g.fresh()
        g.emit("%s = add %s, %s : i32" % (w, v, n))
        g.scalars.append((w, "i32"))
    elif kind == "masked_load":
        if not shape:
            return
        a, dt = g.pick()
        s = "%%s%d" % len(scratch)
        scratch.append((s, dt))
        idx = "[%s]" % ", ".join([":"] * rank)
        g.emit("store %s%s, %s" % (s, idx, a))
        ax = r.randrange(rank)
        io = g.fresh()
        g.emit("%s = iota %d : %s" % (io, ax, T("i32")))
        k = g.fresh("c")
        g.emit("%s = const %d : i32" % (k, r.randint(0, shape[ax])))
        m = g.fresh("b")
        g.emit("%s = ge %s, %s : %s" % (m, io, k, T("i1")))
        v = g.fresh()
        g.emit("%s = load %s%s mask %s : %s" % (v, s, idx, m, T(dt)))
        # masked-off elements hold the uninitialized value: select them away
        w = g.fresh()
        g.emit("%s = select %s, %s, %s : %s" % (w, m, v, a, T(dt)))
        g.pool.append((w, dt))
    elif kind == "query":
        # Grid sizes are values; core and device ids differ between the runs
        # on several cores and devices, so they only feed asserts that hold.
        z = g.fresh("c")
        g.emit("%s = const 0 : i32" % z)
        ok = g.fresh("b")
        if grid_rank and r.random() < 0.5:
            ax = r.randrange(grid_rank)
            p, n = g.fresh(), g.fresh()
            g.emit("%s = program_id %d : i32" % (p, ax))
            g.emit("%s = num_programs %d : i32" % (n, ax))
            g.emit("%s = lt %s, %s : i1" % (ok, p, n))
            g.emit('assert %s, "program_id %d stays below num_programs"' % (ok, ax))
            g.scalars.append((n, "i32"))
            # a promise that holds (no draw: the stream of the rest is kept)
            k, kc, pk, h = ax + 2, g.fresh("c"), g.fresh(), g.fresh()
            g.emit("%s = const %d : i32" % (kc, k))
            g.emit("%s = mul %s, %s : i32" % (pk, p, kc))
            g.emit("%s = multiple_of %s, %d : i32" % (h, pk, k))
            g.scalars.append((h, "i32"))
        else:
            q, op = g.fresh(), r.choice(GROUPS["id_query"])
            g.emit("%s = %s : i32" % (q, op))
            g.emit("%s = ge %s, %s : i1" % (ok, q, z))
            g.emit('assert %s, "%s is never negative"' % (ok, op))
    elif kind == "print":
        if g.scalars:
            v, dt = r.choice(g.scalars)
            g.emit('print "%s: %s {}", %s' % (g.name, dt, v))
        else:
            g.emit('print "%s"' % g.name)
    elif kind == "scoped":
        # a round trip through a scoped buffer, the region yielding a value
        a, dt = g.pick()
        buf, res = g.fresh("sb"), g.fresh()
        idx = "[%s]" % ", ".join([":"] * rank) if shape else "[]"
        g.emit("%s = scoped(%s: vmem %s) : %s {" % (res, buf, T(dt), T(dt)))
        g.emit("store %s%s, %s" % (buf, idx, a), 2)
        v, u = g.fresh(), g.fresh()
        g.emit("%s = load %s%s : %s" % (v, buf, idx, T(dt)), 2)
        g.emit("%s = %s %s : %s" % (u, r.choice(unary_ops(dt)), v, T(dt)), 2)
        g.emit("yield %s" % u, 2)
        g.emit("}")
        g.pool.append((res, dt))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", required=True)
    ap.add_argument("--tessera", help="check each kernel with `TESSERA check`")
    ap.add_argument("--tpu-tiles", action="store_true",
                    help="block shapes TPUs can tile (the last two dims multiples of "
                         "(8, 128) or whole)")
    args = ap.parse_args()
    tessera = args.tessera or os.environ.get("TESSERA")
    if not tessera:
        ap.error("the op list comes from `tessera ops`: give --tessera or set $TESSERA")
    load_ops(tessera)
    os.makedirs(args.out, exist_ok=True)
    bad = 0
    for i in range(args.count):
        name = "rand_%d_%d" % (args.seed, i)
        rng = random.Random("%d/%d" % (args.seed, i))
        path = os.path.join(args.out, name + ".tsr")
        with open(path, "w") as f:
            f.write(gen_kernel(rng, name, tpu_tiles=args.tpu_tiles))
        if args.tessera:
            p = subprocess.run([args.tessera, "check", path], capture_output=True, text=True)
            if p.returncode != 0:
                bad += 1
                sys.stderr.write("%s does not verify:\n%s%s" % (path, p.stdout, p.stderr))
    if bad:
        sys.stderr.write("%d of %d kernels do not verify\n" % (bad, args.count))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
