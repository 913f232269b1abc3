#!/usr/bin/env python3
"""Op coverage from the op table, in TAP: every op `tessera ops` lists (one
case each) is used in each place of PLACES:
  golden        a kernel of tests/ir/ok/ (the print/parse round trip of
                tests/unit/test_golden.c),
  differential  a fixed kernel of the interpreter-vs-CPU differential test
                (DIFFERENTIAL_CORPUS of tests/oplist.py),
  random        the random kernels that test runs (tests/lower/random_kernels.py
                with the same count and seed), and
  tpu           a kernel of the above, or of random_kernels.py --tpu-tiles (same
                count and seed), that the Mosaic TPU emitter emits (`tessera
                check --target tpu`, chip v5e): the op's TPU code runs, and
  jax           a rule of the JAX translator's registry that declares it builds
                the op (tessera.jax.translate.ir_op_coverage(), read with
                $TESSERA_JAX_PYTHON, a Python with jax: the rules' `emits`,
                which the Python suite checks against what they build),
unless EXCEPTIONS says why it cannot be, or, for tpu, the op's "tpu" in
`tessera ops --json` is "refuse: WHY" (its row of ir/ops_tpu.def declares that
the TPU emitter never emits it); an exception for an op not in the table, or for
an op now covered there, fails too. Every op's "tpu" must be "emit" or
"refuse: WHY"; for jax, the translator's NEVER_PRODUCED names the op with
its reason. A row added to ir/ops.def without kernels that use it fails
here, by name (without its row of ir/ops_tpu.def, or its TPU_<OP> entry, it
does not build: tests/unit/test_no_silent_default.py).

    test_op_coverage.py [RANDOM_COUNT [SEED]]   (default 200 1, as meson runs
                                                 test_differential)
Needs $TESSERA, $TSR_SOURCE_ROOT and $TESSERA_JAX_PYTHON (meson sets them;
without a Python that imports jax the jax place fails, naming why).
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oplist  # noqa: E402

# The one list of ops that cannot be in one of PLACES: (op, place) -> why.
EXCEPTIONS = {
    ("core_barrier", "random"):
        "all cores of a device must reach it equally often, and the random kernels "
        "run on 2 and 3 cores with grids that do not split evenly",
    ("reduce_prod", "tpu"):
        "Mosaic has no product reduction: tpu_op_reduce refuses every dtype, naming it "
        "(its row of ir/ops_tpu.def has no kind for any class)",
}

REFUSE = "refuse: "


def used_in(files, names):
    """{op: the first of `files` that uses it}."""
    used = {}
    for path in files:
        with open(path) as f:
            for op in oplist.used_ops(f.read(), names):
                used.setdefault(op, path)
    return used


def generate(ctx, out, *extra):
    """The random kernels of the run (random_kernels.py, same count and seed)
    in the directory `out`; a failure is a case of its own."""
    args = ["--count", str(ctx.count), "--seed", str(ctx.seed)] + list(extra)
    gen = subprocess.run(
        [sys.executable, os.path.join(ctx.src, "tests", "lower", "random_kernels.py")] + args +
        ["--out", out, "--tessera", ctx.tessera], capture_output=True, text=True)
    ctx.case(gen.returncode == 0, "random_kernels.py %s" % " ".join(args), gen.stderr[-1500:])
    return oplist.corpus(out, ["*.tsr"])


def golden(ctx):
    return used_in(oplist.corpus(ctx.src, oplist.GOLDEN_OK), ctx.names)


def differential(ctx):
    return used_in(oplist.corpus(ctx.src, oplist.DIFFERENTIAL_CORPUS), ctx.names)


def random(ctx):
    ctx.random_files = generate(ctx, os.path.join(ctx.tmp, "random"))
    return used_in(ctx.random_files, ctx.names)


def tpu(ctx):
    files = (oplist.corpus(ctx.src, oplist.GOLDEN_OK) +
             oplist.corpus(ctx.src, oplist.DIFFERENTIAL_CORPUS) + ctx.random_files +
             generate(ctx, os.path.join(ctx.tmp, "tpu_tiles"), "--tpu-tiles"))
    # One process for all files: it prints "FILE: ok (N kernels)" for each
    # file whose kernels all emit, located errors for the others.
    p = subprocess.run([ctx.tessera, "check", "--target", "tpu"] + files,
                       capture_output=True, text=True)
    emitted = [line.split(": ok (", 1)[0] for line in p.stdout.splitlines() if ": ok (" in line]
    ctx.case(p.returncode in (0, 1) and emitted,
             "tessera check --target tpu: %d of %d files emit" % (len(emitted), len(files)),
             p.stderr[-1500:])
    return used_in(emitted, ctx.names)


def tpu_refusal(row):
    """The reason the TPU emitter never emits the op, None if it does."""
    t = row.get("tpu", "")
    return t[len(REFUSE):] if t.startswith(REFUSE) else None


# The translator's declared reasons, filled by jax() (which runs first).
NEVER_PRODUCED = {}


def jax(ctx):
    python = os.environ.get("TESSERA_JAX_PYTHON", "")
    code = ("import json, tessera.jax.translate as T; "
            "print(json.dumps([T.ir_op_coverage(), T.NEVER_PRODUCED]))")
    env = dict(os.environ, PYTHONPATH=os.path.join(ctx.src, "python"), JAX_PLATFORMS="cpu")
    try:
        p = subprocess.run([python, "-c", code], capture_output=True, text=True, env=env)
        produced, never = json.loads(p.stdout) if p.returncode == 0 else ({}, {})
        why = p.stderr[-1500:]
    except (OSError, ValueError) as e:
        produced, never, why = {}, {}, str(e)
    ctx.case(bool(produced), "the JAX translator's coverage (%s)" % (python or
             "$TESSERA_JAX_PYTHON unset: run scripts/setup.sh, which makes .venv"), why)
    NEVER_PRODUCED.update(never)
    where = os.path.join(ctx.src, "python", "tessera", "jax")
    return {op: "%s (rules: %s)" % (where, prims) for op, prims in produced.items()}


# The places an op must be used in, in order: (name, its ops as {op: file},
# the op's declared reason not to be there or None). Each function runs once
# per test, after those before it (tpu reads random's kernels). A new place
# is one entry here; its exceptions go in EXCEPTIONS, by its name.
PLACES = [
    ("golden", golden, None),
    ("differential", differential, None),
    ("random", random, None),
    ("tpu", tpu, tpu_refusal),
    ("jax", jax, lambda row: NEVER_PRODUCED.get(row["mnemonic"])),
]


class Run:
    """What the places share: the tree, the op table, the cases so far."""

    def __init__(self, tessera, src, count, seed, tmp):
        self.tessera, self.src, self.count, self.seed, self.tmp = tessera, src, count, seed, tmp
        self.table = oplist.ops(tessera)
        self.names = {op["mnemonic"] for op in self.table}
        self.random_files = []
        self.n = self.failed = 0

    def case(self, ok, desc, why=""):
        self.n += 1
        self.failed += not ok
        print("%s %d - %s" % ("ok" if ok else "not ok", self.n, desc))
        for line in why.splitlines() if not ok else []:
            print("#   " + line)


def main():
    tessera = os.environ.get("TESSERA")
    src = os.environ.get("TSR_SOURCE_ROOT")
    if not tessera or not src:
        print("1..0 # SKIP needs $TESSERA and $TSR_SOURCE_ROOT")
        return 0
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 1

    with tempfile.TemporaryDirectory(prefix="tessera-cover-") as tmp:
        run = Run(tessera, src, count, seed, tmp)
        used = {name: ops_of(run) for name, ops_of, _ in PLACES}
    names = [name for name, _, _ in PLACES]

    for op in run.table:
        m = op["mnemonic"]
        why = []
        t = op.get("tpu")
        if t != "emit" and not (isinstance(t, str) and t.startswith(REFUSE) and tpu_refusal(op)):
            why.append('its "tpu" is %r, not "emit" or "refuse: WHY"' % (t,))
        excused = {}
        for name, _, declared in PLACES:
            reason = declared(op) if declared else None
            if reason is not None:
                excused[name] = "declared: " + reason
            elif (m, name) in EXCEPTIONS:
                excused[name] = EXCEPTIONS[(m, name)]
        missing = [p for p in names if m not in used[p] and p not in excused]
        stale = [p for p in names if m in used[p] and p in excused]
        if missing:
            why.append("no kernel uses it in: %s" % ", ".join(missing))
        why += ["%s says it cannot be in %s, but %s uses it: remove the exception or the "
                "refusal" % ("ir/ops_tpu.def" if excused[p].startswith("declared: ")
                             else "an exception", p,
                             "a random kernel" if used[p][m].startswith(tmp)
                             else os.path.relpath(used[p][m], src))
                for p in stale]
        places = [p if p not in excused else "not " + p for p in names]
        run.case(not why, "op %s: %s" % (m, ", ".join(places)), "\n".join(why))
    rows = {op["mnemonic"]: op for op in run.table}
    for (m, p), reason in EXCEPTIONS.items():
        why = []
        if m not in run.names:
            why.append("no op '%s' in `tessera ops`" % m)
        if p not in names:
            why.append("no place '%s' (one of %s)" % (p, ", ".join(names)))
        declared = dict((name, d) for name, _, d in PLACES).get(p)
        if m in rows and declared and declared(rows[m]) is not None:
            why.append("the table already declares it: remove the exception")
        run.case(not why, "exception: %s not in %s (%s)" % (m, p, reason), "\n".join(why))
    print("1..%d" % run.n)
    return 1 if run.failed else 0


if __name__ == "__main__":
    sys.exit(main())
