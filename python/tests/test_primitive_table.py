"""docs/jax.md's table of JAX primitives is generated from the translator's
rules and the installed jax: it must be what the generator gives now, and
the generator must classify each primitive by the registry."""

import os

from tessera.jax import primitive_table
from tessera.jax.translate_core import rules

DOC = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "jax.md")


def test_docs_table_is_current():
    with open(DOC) as f:
        text = f.read()
    assert primitive_table.replaced(text) == text, (
        "docs/jax.md's primitive table is stale: run "
        "python -m tessera.jax.primitive_table --write docs/jax.md")


def test_every_rule_and_every_kernel_primitive_has_one_row():
    rows, _ = primitive_table.table()
    names = [r.primitive for r in rows]
    assert len(names) == len(set(names))
    registered = rules()
    assert set(registered) <= set(names)
    found, _ = primitive_table.jax_primitives()
    assert set(found) <= set(names)
    for r in rows:
        assert (r.status == "unsupported") == (r.primitive not in registered), r
        if r.status == "unsupported":
            assert r.detail, r
        elif r.status in ("translated", "expanded"):
            for op in registered[r.primitive].emits:
                assert f"`{op}`" in r.detail, r


def test_core_lax_primitives_are_listed():
    rows, _ = primitive_table.table()
    by_name = {r.primitive: r for r in rows}
    for name in ("add", "dot_general", "program_id", "get", "swap", "dma_start"):
        assert name in by_name and by_name[name].status == "translated", name


def test_stale_table_is_detected():
    text = f"intro\n{primitive_table.BEGIN}\n| old |\n{primitive_table.END}\nend\n"
    new = primitive_table.replaced(text)
    assert new != text and new.startswith("intro\n") and new.endswith("\nend\n")
    assert primitive_table.replaced(new) == new
