"""The kernel library's top-k (kernels/topk.c) emitted as Mosaic and
compiled by libtpu for v5e and v6e, one case per kernel class: one block
(sorted, folded, slabs), and rows longer than a block (a grid over the
row's blocks with a running top-k in VMEM scratch, per row, or per column
with slabs): k below a block and above one, one row and many, rank 1 and
3, padded last blocks, 16-bit floats, the smallest, the default budget's
blocks and small budgets' ones."""

from __future__ import annotations

import pytest

import tpu_proof

CHIPS = ("v5e", "v6e")

#: name -> params of tessera._library.generate("topk", ...).
CASES = {
    "one_block_sorted": dict(shape=(8, 128), dtype="f32", k=8),
    "one_block_slabs": dict(shape=(8, 4096), dtype="i32", k=20),
    "one_block_columns": dict(shape=(2, 8192), dtype="f32", k=16),
    "one_block_folded": dict(shape=(8, 1024), dtype="f32", k=16),
    "blocks_rows": dict(shape=(16, 5000), dtype="f32", k=16, vmem_budget_bytes=1 << 16),
    "blocks_one_row_long": dict(shape=(1, 100000), dtype="f32", k=16),
    "blocks_rank1": dict(shape=(100000,), dtype="f32", k=16),
    "blocks_three_rows": dict(shape=(3, 70001), dtype="f32", k=64),
    "blocks_k_above_block": dict(shape=(8, 3000), dtype="f32", k=300, vmem_budget_bytes=8192),
    "blocks_k1": dict(shape=(8, 1000), dtype="i32", k=1, vmem_budget_bytes=8192),
    "blocks_bf16_smallest": dict(shape=(16, 3000), dtype="bf16", k=5, smallest=True,
                                 vmem_budget_bytes=1 << 16),
    "blocks_slabs": dict(shape=(128, 20000), dtype="f32", k=16),
    "blocks_slabs_k32": dict(shape=(9, 30000), dtype="i32", k=32),
    "blocks_columns_few_rows": dict(shape=(2, 50000), dtype="f32", k=64),
    "blocks_sublane_slabs": dict(shape=(3, 70001), dtype="f32", k=16),
    "one_block_sublane_slabs": dict(shape=(2, 8192), dtype="bf16", k=4),
    "blocks_rank3": dict(shape=(2, 8, 2000), dtype="f32", k=10, vmem_budget_bytes=1 << 15),
}


def prove(name: str, chip: str) -> tpu_proof.Outcome:
    return tpu_proof.prove_library("topk", CASES[name], chip)


@pytest.mark.parametrize("chip", CHIPS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_library_topk_compiles(name, chip):
    out = prove(name, chip)
    assert out.stage == "ok", f"{out.stage}: {out.message[:2000]}"


if __name__ == "__main__":
    tpu_proof.report(CASES, prove, CHIPS)
