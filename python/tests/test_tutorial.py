"""The code of docs/tutorial.md and the first example of README.md runs, and
prints what the pages show (python/tests/doc_blocks.py says how a page's
blocks are run and compared). The tutorial's libtpu compile is run by the
TPU suite (python/tests/tpu/test_tutorial_tpu.py)."""

from __future__ import annotations

import pathlib

import pytest

import doc_blocks

ROOT = doc_blocks.ROOT
TUTORIAL = ROOT / "docs" / "tutorial.md"
README = ROOT / "README.md"


def test_tutorial_blocks_print_what_the_page_shows(tmp_path):
    blocks = doc_blocks.code_blocks(TUTORIAL.read_text())
    if doc_blocks.cli() is None and any(
            b.lang == "sh" and "tessera " in b.code for b in blocks):
        pytest.skip("no tessera CLI (set $TESSERA): the tutorial's CLI steps need it")
    ran = doc_blocks.run_page(TUTORIAL, tmp_path, blocks)
    shown = [b for b, _ in ran if b.shown is not None]
    # the page's steps: the kernel, a run, a pytest run, three bugs, the
    # compiled run, lowering; each with its output but the kernel's file
    assert len(ran) >= 9 and len(shown) >= 8, [b.line for b, _ in ran]
    assert any(b.needs_libtpu for b in blocks), "the libtpu step is gone"


def test_tutorial_shows_each_bug_at_its_line():
    """The tutorial's point: each bug's diagnostic names the user's file and
    line. Checked on the page itself (the run above checks it is printed)."""
    text = TUTORIAL.read_text()
    for where in ("oob.py:16:42: error:", "dma.py:14:5: error:", "dma.py:20:41: warning:",
                  "matmul.py:15:5: warning:", "race.py:19:42: error:", "race.py:19:42: warning:"):
        assert where in text, where


def test_readme_first_python_block_is_a_complete_example(tmp_path):
    """The README's first ```python block runs alone (imports included: CI
    runs it from an installed wheel) and prints the located error shown."""
    blocks = doc_blocks.code_blocks(README.read_text())
    first = next(b for b in blocks if b.lang == "python")
    assert first.shown is not None, "README.md: the first example shows no output"
    assert ": error: " in first.shown, first.shown
    (b, printed), = doc_blocks.run_page(README, tmp_path, [first])
    assert "KernelError" not in printed  # caught and printed, not raised


def test_shown_output_must_match(tmp_path):
    """The comparison fails when a page shows what its block does not print."""
    page = tmp_path / "page.md"
    page.write_text("```python\n# p.py\nprint('one')\n```\n\n```text\ntwo\n```\n")
    with pytest.raises(AssertionError, match="shown but not printed"):
        doc_blocks.run_page(page, tmp_path)
    page.write_text("```python\n# p.py\nprint('a long line')\n```\n\n```text\na ... line\n...\n```\n")
    doc_blocks.run_page(page, tmp_path)
