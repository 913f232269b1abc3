#!/usr/bin/env python3
"""Generates the small-block benchmark kernels on (8,128) f32/i32 blocks.

A bitonic-sort-like compare-exchange body (iota, and/shl/shrl/xor/or, ne/lt,
roll, select, min, max), either in a `for` loop (--loop N iterations: the run
is dominated by executed ops) or unrolled straight-line (--unroll N copies:
the shape of a generated sort kernel, where preparation per op also counts).
bench/kernels/small_blocks.tsr is `--loop 10000`.
Usage: bench/gen_small_blocks.py (--loop N | --unroll N) > kernel.tsr
"""
import argparse

HEADER = """kernel @small_blocks
  in %x: f32[8, 128] vmem
  in %k: i32[8, 128] vmem
  out %y: f32[8, 128] vmem
  out %z: i32[8, 128] vmem
{
  %zero = const 0 : i32
  %one = const 1 : i32
  %six = const 6 : i32
  %n = const 128 : i32
  %zb = const 0 : i32[8, 128]
  %mask = const 65535 : i32[8, 128]
  %sixteen = const 16 : i32[8, 128]
  %a0 = load %x[:, :] : f32[8, 128]
  %k0 = load %k[:, :] : i32[8, 128]
"""

# One compare-exchange step: 33 ops counting the loop's yield, 31 unrolled
# (the loop body also derives its roll distance from the counter).
BODY = """{p}%idx{s} = iota 1 : i32[8, 128]
{p}%jb{s} = broadcast %j{s} : i32[8, 128]
{p}%bit{s} = and %idx{s}, %jb{s} : i32[8, 128]
{p}%upper{s} = ne %bit{s}, %zb : i1[8, 128]
{p}%kbit{s} = shl %jb{s}, %one : i32[8, 128]
{p}%dbit{s} = and %idx{s}, %kbit{s} : i32[8, 128]
{p}%desc{s} = ne %dbit{s}, %zb : i1[8, 128]
{p}%take_hi{s} = xor %upper{s}, %desc{s} : i1[8, 128]
{p}%a_up{s} = roll {a}, %j{s} axis 1 : f32[8, 128]
{p}%a_dn{s} = roll {a}, %nj{s} axis 1 : f32[8, 128]
{p}%pa{s} = select %upper{s}, %a_up{s}, %a_dn{s} : f32[8, 128]
{p}%lo{s} = min {a}, %pa{s} : f32[8, 128]
{p}%hi{s} = max {a}, %pa{s} : f32[8, 128]
{p}%a2{s} = select %take_hi{s}, %hi{s}, %lo{s} : f32[8, 128]
{p}%k_up{s} = roll {k}, %j{s} axis 1 : i32[8, 128]
{p}%k_dn{s} = roll {k}, %nj{s} axis 1 : i32[8, 128]
{p}%pk{s} = select %upper{s}, %k_up{s}, %k_dn{s} : i32[8, 128]
{p}%lt{s} = lt {k}, %pk{s} : i1[8, 128]
{p}%klo{s} = select %lt{s}, {k}, %pk{s} : i32[8, 128]
{p}%khi{s} = select %lt{s}, %pk{s}, {k} : i32[8, 128]
{p}%k2{s} = select %take_hi{s}, %khi{s}, %klo{s} : i32[8, 128]
{p}%hi16{s} = shrl %k2{s}, %sixteen : i32[8, 128]
{p}%lo16{s} = and %k2{s}, %mask : i32[8, 128]
{p}%mix{s} = xor %hi16{s}, %lo16{s} : i32[8, 128]
{p}%back{s} = shl %hi16{s}, %sixteen : i32[8, 128]
{p}%lo_again{s} = xor %mix{s}, %hi16{s} : i32[8, 128]
{p}%k4{s} = or %back{s}, %lo_again{s} : i32[8, 128]
"""


def main():
    ap = argparse.ArgumentParser()
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--loop", type=int)
    g.add_argument("--unroll", type=int)
    args = ap.parse_args()
    out = [HEADER]
    if args.loop is not None:
        out.append(f"  %iters = const {args.loop} : i32\n")
        out.append("  %af, %kf = for %it = %zero to %iters step %one"
                   " iter(%a = %a0, %kv = %k0) : f32[8, 128], i32[8, 128] {\n")
        out.append("    %s = and %it, %six : i32\n")
        out.append("    %j = shl %one, %s : i32\n")
        out.append("    %nj = sub %n, %j : i32\n")
        out.append(BODY.format(p="    ", s="", a="%a", k="%kv"))
        out.append("    yield %a2, %k4\n  }\n")
        a, k = "%af", "%kf"
    else:
        a, k = "%a0", "%k0"
        for i in range(args.unroll):
            j = 1 << (i % 7)
            out.append(f"  %j_{i} = const {j} : i32\n")
            out.append(f"  %nj_{i} = const {128 - j} : i32\n")
            out.append(BODY.format(p="  ", s=f"_{i}", a=a, k=k))
            a, k = f"%a2_{i}", f"%k4_{i}"
    out.append(f"  store %y[:, :], {a}\n  store %z[:, :], {k}\n}}\n")
    print("".join(out), end="")


if __name__ == "__main__":
    main()
