"""The table scripts/jax-conformance.sh prints: per file and mode, the tests
passing under JAX and that mode, under JAX only, under the mode only, and the
tests skipped in that mode."""

from __future__ import annotations

import argparse
import os


def outcomes(path: str) -> dict[str, str] | None:
    if not os.path.exists(path):
        return None
    result = {}
    with open(path) as f:
        for line in f:
            outcome, _, nodeid = line.rstrip("\n").partition("\t")
            result[nodeid] = outcome
    return result


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("commit")
    ap.add_argument("jax_version")
    ap.add_argument("modes")
    ap.add_argument("files", nargs="+")
    ap.add_argument("--list", default=None)
    args = ap.parse_args()
    modes = [m for m in args.modes.split(",") if m != "jax"]
    print(f"\nJAX checkout {args.commit[:12]}, jax {args.jax_version}")
    print("| file | mode | JAX passes | both pass | JAX only | mode only | skipped |")
    print("|---|---|---|---|---|---|---|")
    totals: dict[str, list[int]] = {}
    listed = []
    for f in args.files:
        base = os.path.splitext(os.path.basename(f))[0]
        ref = outcomes(os.path.join(args.out, base + ".jax")) or {}
        jax_pass = {t for t, o in ref.items() if o == "passed"}
        for m in modes:
            got = outcomes(os.path.join(args.out, f"{base}.{m}"))
            if got is None:
                continue
            passed = {t for t, o in got.items() if o == "passed"}
            skipped = sum(1 for o in got.values() if o == "skipped")
            row = [len(jax_pass), len(jax_pass & passed), len(jax_pass - passed),
                   len(passed - jax_pass), skipped]
            t = totals.setdefault(m, [0] * 5)
            for i, v in enumerate(row):
                t[i] += v
            print(f"| {base}.py | {m} | " + " | ".join(map(str, row)) + " |")
            if m == args.list:
                listed += sorted(jax_pass - passed)
    for m, t in totals.items():
        print(f"| **all** | {m} | " + " | ".join(f"**{v}**" for v in t) + " |")
    if listed:
        print(f"\nPassing under JAX, not under {args.list}:")
        for t in listed:
            print("  " + t)


if __name__ == "__main__":
    main()
