#!/usr/bin/env python3
"""No silent default: an op without a cpu lowering, or without its row of the
TPU emitter's table, is a build error.

The back ends dispatch per family (a table indexed by the FAMILY column),
then per op through tables expanded from that family's rows of ir/ops.def
(interp/prepare.c PREP_<OP>, lower/emit.c LOWER_<OP>, tpu/emit.c TPU_<OP>;
for the elementwise families, blockops.c's kernels and lower/emit_expr.c's
flt_<OP>/int_<OP>). So a row without a cpu lowering cannot produce a library
that silently computes something: it does not compile. This test shows it
with the test-only row of ir/ops_test.def (TSR_TEST_OPS), a unary op which
has an interpreter implementation and deliberately no lowering:
  - the interpreter's files compile with the row (it is a real, runnable op),
    and so do lower/emit.c and tpu/emit.c (its unary family needs no per-op
    entry);
  - lower/emit_expr.c fails to compile, naming the op's missing entries
    (flt_/int_TEST_UNLOWERED);
  - without TSR_TEST_OPS it compiles (the failures are the row's).
A library with the row is therefore never built, so no run can give a result
for it; what stays a runtime error is an op lowered for some element types
only (em_unimplemented: "op 'x' cannot be lowered to the cpu target yet (...)",
with its location), as in the interpreter ("op 'x' is not implemented in the
interpreter for <dtype>").

The Mosaic TPU emitter is held the same way by the op table's TPU column,
ir/ops_tpu.def: every op has a row there, its MLIR spellings or a declared
refusal (the located "cannot be emitted for TPU" error), and ir/module.c,
which makes tsr_op_tpu_table, names each op's row. The test-only op has no
row, so:
  - ir/module.c fails to compile with it, naming tsr_tpu_row_TEST_UNLOWERED;
  - with its declared refusal (TSR_TEST_OPS_TPU) it compiles again;
  - that refusal without the op (a row for an op ir/ops.def lacks) fails,
    naming TSR_OP_TEST_UNLOWERED.

Usage: test_no_silent_default.py CC [CC ARGS...]  (TAP on stdout)."""
import os
import subprocess
import sys

ROOT = os.environ.get("TSR_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
CC = sys.argv[1:] or ["cc"]
FLAGS = ["-fsyntax-only", "-std=c11", "-D_POSIX_C_SOURCE=200809L", "-Wall", "-Wextra",
         "-Wno-unused-parameter", "-Werror", "-I" + os.path.join(ROOT, "include"), "-I" + ROOT]


def compile_file(path, test_ops, tpu_row=False):
    args = (CC + FLAGS + (["-DTSR_TEST_OPS"] if test_ops else []) +
            (["-DTSR_TEST_OPS_TPU"] if tpu_row else []) + [os.path.join(ROOT, path)])
    p = subprocess.run(args, capture_output=True, text=True)
    return p.returncode, p.stderr


def fails_naming(rc, err, names):
    return rc != 0 and all(n in err for n in names)


checks = []  # (description, ok, detail)
for path in ["interp/prepare.c", "interp/exec.c", "interp/blockops.c", "lower/emit.c",
             "tpu/emit.c"]:
    rc, err = compile_file(path, True)
    checks.append((f"{path} builds with the test-only row (per-family dispatch)", rc == 0, err))
for path, names in [("lower/emit_expr.c", ["flt_TEST_UNLOWERED", "int_TEST_UNLOWERED"]),
                    ("ir/module.c", ["tsr_tpu_row_TEST_UNLOWERED"])]:
    rc, err = compile_file(path, False)
    checks.append((f"{path} builds without the row", rc == 0, err))
    rc, err = compile_file(path, True)
    checks.append((f"{path} does not build with the row, naming {', '.join(names)}",
                   fails_naming(rc, err, names), err or "(compiled)"))
rc, err = compile_file("ir/module.c", True, tpu_row=True)
checks.append(("ir/module.c builds with the row and its TPU row (a declared refusal, "
               "TSR_TEST_OPS_TPU)", rc == 0, err))
rc, err = compile_file("ir/module.c", False, tpu_row=True)
checks.append(("ir/module.c does not build with a TPU row for an op ir/ops.def lacks, "
               "naming TSR_OP_TEST_UNLOWERED",
               fails_naming(rc, err, ["TSR_OP_TEST_UNLOWERED"]), err or "(compiled)"))

print(f"1..{len(checks)}")
for i, (what, ok, detail) in enumerate(checks, 1):
    print(f"{'ok' if ok else 'not ok'} {i} - {what}")
    if not ok:
        for line in detail.splitlines()[:20]:
            print("# " + line)
