"""The README is the way into the docs: every page of docs/ is linked from
it, and the relative links of the README and of docs/ lead to files of the
tree (a page renamed or removed breaks them)."""

from __future__ import annotations

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"

# [text](target) or [text](target "title"); the target up to '#'
_LINK = re.compile(r"\]\(\s*<?([^)\s>#]*)(#[^)\s>]*)?>?(?:\s+\"[^\"]*\")?\s*\)")


def _relative_links(page: pathlib.Path) -> list[tuple[int, str]]:
    """(line, target) of every link to a file, outside fenced code."""
    out, fenced = [], False
    for n, line in enumerate(page.read_text().splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            continue
        for m in _LINK.finditer(line):
            target = m.group(1)
            if target and not re.match(r"[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):
                out.append((n, target))
    return out


def test_every_doc_page_is_linked_from_the_readme():
    linked = {(README.parent / target).resolve() for _, target in _relative_links(README)}
    pages = sorted(DOCS.glob("*.md"))
    assert pages, "docs/ has no pages"
    missing = [p.name for p in pages if p.resolve() not in linked]
    assert not missing, f"README.md links no docs/{', docs/'.join(missing)}"


@pytest.mark.parametrize("page", [README, *sorted(DOCS.glob("*.md"))], ids=lambda p: p.name)
def test_relative_links_lead_to_files(page):
    broken = [f"{page.name}:{n}: {target}" for n, target in _relative_links(page)
              if not (page.parent / target).exists()]
    assert not broken, "\n".join(broken)


def test_link_reader_sees_links(tmp_path):
    """The checks above are only as good as the link reader: it finds links
    with anchors and titles, and leaves out addresses and fenced code."""
    page = tmp_path / "p.md"
    page.write_text('[a](docs/a.md) [b](b.md#part "title") [c](https://x.org/c.md)\n'
                    "```\n[d](d.md)\n```\n[e](#anchor)\n")
    assert _relative_links(page) == [(1, "docs/a.md"), (1, "b.md")]
