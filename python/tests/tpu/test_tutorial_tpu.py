"""The last step of docs/tutorial.md: the matmul's Mosaic module, compiled
by libtpu for v6e without a TPU, prints what the page shows. Its other
blocks run in python/tests/test_tutorial.py; this one needs libtpu."""

from __future__ import annotations

import doc_blocks
import tpu_proof


def test_tutorial_libtpu_step_compiles_and_prints_what_the_page_shows(tmp_path):
    page = tpu_proof.ROOT / "docs" / "tutorial.md"
    blocks = doc_blocks.code_blocks(page.read_text())
    names = {id(b): doc_blocks.file_name(b, i) for i, b in enumerate(blocks)}
    compile_blocks = [b for b in blocks if b.needs_libtpu]
    assert [names[id(b)] for b in compile_blocks] == ["tpu_compile.py"]
    # tpu.py writes the matmul.tsr that tpu_compile.py compiles
    ran = doc_blocks.run_page(page, tmp_path, blocks,
                              select=lambda b: names.get(id(b)) in ("tpu.py", "tpu_compile.py"))
    assert [names[id(b)] for b, _ in ran] == ["tpu.py", "tpu_compile.py"]
    assert "1 Mosaic kernel" in ran[-1][1]
