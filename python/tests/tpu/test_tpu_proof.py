"""Every correct kernel of the tree (kernels/examples, tests/diagnostics/ok)
on every chip of tpu_proof.CHIPS: tessera emits Mosaic (Kernel.to_mosaic,
the C API tsr_tpu_emit), jaxlib's MLIR parses and verifies it with the TPU
dialect, and libtpu compiles it ahead of time for the chip, wrapped as
Pallas wraps its kernels. A cell that cannot pass is a row of docs/tpu.md's
table "Kernels not proved" with the stage and a substring of the reason: the
cell asserts that failure, so a row goes stale the day the kernel compiles.
"""

from __future__ import annotations

import pytest

import tpu_proof as P

CELLS = [(f, k, c) for f, k in P.kernels() for c in P.CHIPS]


@pytest.mark.parametrize("path,name,chip", CELLS,
                         ids=[P.cell_id(*cell) for cell in CELLS])
def test_kernel_compiles_for_chip(path, name, chip):
    outcome = P.prove(path, name, chip)
    row = P.expected(path, name, chip)
    if row is None:
        assert outcome.stage == "ok", (
            f"{path} @{name} on {chip}: fails at {outcome.stage}:\n{outcome.message}\n"
            f"(a kernel that cannot pass is a row of {P.DOC.name}'s table)")
    else:
        got = "compiles" if outcome.stage == "ok" else f"fails at {outcome.stage}"
        assert outcome.stage == row.stage and row.reason in outcome.message, (
            f"{path} @{name} on {chip}: docs/tpu.md says it fails at {row.stage} with "
            f"{row.reason!r}; it {got}:\n{outcome.message}")


def test_table_rows_name_kernels_and_chips_of_the_tree():
    known = set(P.kernels())
    rows = P.table()
    for row in rows:
        assert (row.file, row.kernel) in known, \
            f"docs/tpu.md: no kernel @{row.kernel} in {row.file}"
        assert row.chips and set(row.chips) <= set(P.CHIPS), f"docs/tpu.md: chips {row.chips}"
        assert row.stage in ("emit", "parse", "compile"), f"docs/tpu.md: stage {row.stage!r}"
        assert row.reason, f"docs/tpu.md: the row of @{row.kernel} gives no reason"


def test_every_kernel_dir_has_kernels():
    files = P.kernel_files()
    for d in P.KERNEL_DIRS:
        assert any(f.startswith(d + "/") for f in files), d
    assert len(P.kernels()) >= 20
