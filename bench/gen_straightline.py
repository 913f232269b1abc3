#!/usr/bin/env python3
"""Generates a straight-line .tsr kernel of exactly N ops in the shape of a
bitonic sort network on one (8,128) f32 block (docs/benchmarks.md, "Compile
time against kernel size"). Prints the kernel on stdout.

Usage: bench/gen_straightline.py N > sort_N.tsr

Each compare-exchange step of the network, written as a straightforward port
of a Pallas bitonic sort does it (every mask computed inline, 16 ops):
iota, and, eq for "lane has bit j clear" and "lane is in an ascending run",
two rolls for the partners at +j and -j, select, min, max, select. A full
sort of 128 lanes is 28 steps; after each full sort the block is negated so
the next sort does real work. The body is cut at N ops (load and store
included), so N is exact."""
import sys

LANES = 128
TYPE = "f32[8, 128]"
ITYPE = "i32[8, 128]"
BTYPE = "i1[8, 128]"


def steps():
    """(k, j) of a bitonic network on LANES lanes, forever, with None between
    sorts (the negation)."""
    while True:
        k = 2
        while k <= LANES:
            j = k // 2
            while j >= 1:
                yield (k, j)
                j //= 2
            k *= 2
        yield None


def step_ops(n, v, k, j):
    """The ops of one compare-exchange step on %v (suffix n); returns the
    lines and the name of the result."""
    s = f"_{n}"
    r = f"%v{s}"
    return [
        f"%iota{s} = iota 1 : {ITYPE}",
        f"%j{s} = const {j} : i32",
        f"%bj{s} = and %iota{s}, %j{s} : {ITYPE}",
        f"%zero{s} = const 0 : i32",
        f"%low{s} = eq %bj{s}, %zero{s} : {BTYPE}",
        f"%k{s} = const {k} : i32",
        f"%bk{s} = and %iota{s}, %k{s} : {ITYPE}",
        f"%asc{s} = eq %bk{s}, %zero{s} : {BTYPE}",
        f"%takemin{s} = eq %low{s}, %asc{s} : {BTYPE}",
        f"%sf{s} = const {LANES - j} : i32",
        f"%up{s} = roll {v}, %sf{s} axis 1 : {TYPE}",
        f"%down{s} = roll {v}, %j{s} axis 1 : {TYPE}",
        f"%partner{s} = select %low{s}, %up{s}, %down{s} : {TYPE}",
        f"%mn{s} = min {v}, %partner{s} : {TYPE}",
        f"%mx{s} = max {v}, %partner{s} : {TYPE}",
        f"{r} = select %takemin{s}, %mn{s}, %mx{s} : {TYPE}",
    ], r


def generate(n_ops):
    if n_ops < 3:
        raise SystemExit("N must be at least 3 (a load, an op, a store)")
    body = [f"%v = load %x[:, :] : {TYPE}"]
    v = "%v"
    budget = n_ops - 2  # the load and the store
    step = 0
    gen = steps()
    while budget > 0:
        kj = next(gen)
        step += 1
        if kj is None:
            lines, r = [f"%neg_{step} = neg {v} : {TYPE}"], f"%neg_{step}"
        else:
            lines, r = step_ops(step, v, *kj)
        if len(lines) > budget:
            # Fill the rest with negations: the count stays exact.
            lines = []
            for i in range(budget):
                lines.append(f"%fill_{step}_{i} = neg {v} : {TYPE}")
                v = f"%fill_{step}_{i}"
            r = v
        body += lines
        budget -= len(lines)
        v = r
    body.append(f"store %y[:, :], {v}")
    head = [
        f"kernel @sort_{n_ops}",
        "  grid(1) semantics(arbitrary)",
        f"  in %x: {TYPE} vmem block[8, 128] map(%i) -> (0, 0)",
        f"  out %y: {TYPE} vmem block[8, 128] map(%i) -> (0, 0)",
        "{",
    ]
    return "\n".join(head + ["  " + line for line in body] + ["}"]) + "\n"


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    sys.stdout.write(generate(int(sys.argv[1])))
