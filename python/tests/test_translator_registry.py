"""The JAX translator's one registry of primitive rules
(python/tessera/jax/translate_core.py): every op of the IR's op table is
either built by some registered rule or declared never built, with its
reason; a primitive cannot be registered twice; a rule that builds an op it
does not declare fails (the suite runs with TESSERA_JAX_CHECK_EMITS=1, see
conftest.py); and the rule modules depend on the core only."""

from __future__ import annotations

import ast
import json
import pathlib
import subprocess

import pytest

jax = pytest.importorskip("jax")

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import tessera  # noqa: E402
import tessera.jax as tj  # noqa: E402
from tessera.jax import translate as T  # noqa: E402
from tessera.jax import translate_core as core  # noqa: E402

JAX_DIR = pathlib.Path(T.__file__).parent


@pytest.fixture(scope="module")
def op_table(tessera_cli) -> list[str]:
    out = subprocess.run([str(tessera_cli), "ops", "--json"], capture_output=True, text=True,
                         check=True).stdout
    return [row["mnemonic"] for row in json.loads(out)]


def test_every_ir_op_is_built_by_a_rule_or_declared_never_built(op_table):
    coverage = T.ir_op_coverage()
    missing = [op for op in op_table if op not in coverage and op not in T.NEVER_PRODUCED]
    assert not missing, (f"IR ops no tessera.jax rule declares it builds (`emits=`) and "
                         f"translate.NEVER_PRODUCED does not list with a reason: {missing}")


def test_an_op_declared_never_built_is_not_built(op_table):
    built = sorted(set(T.NEVER_PRODUCED) & set(T.ir_op_coverage()))
    assert not built, f"ops in translate.NEVER_PRODUCED that rules build: {built}"
    stale = sorted(set(T.NEVER_PRODUCED) - set(op_table))
    assert not stale, f"translate.NEVER_PRODUCED names ops the IR does not have: {stale}"
    assert all(reason.strip() for reason in T.NEVER_PRODUCED.values())


def test_rules_emit_only_ops_of_the_table(op_table):
    unknown = {name: sorted(rule.emits - set(op_table)) for name, rule in core.rules().items()
               if rule.emits - set(op_table)}
    assert not unknown, f"rules declaring ops the IR does not have: {unknown}"


def test_supported_primitives_are_the_registry():
    assert T.supported_primitives() == sorted(core.rules())
    assert tj.supported_primitives() == T.supported_primitives()
    for name in ("add", "add_any", "get", "dot_general", "erf", "cumlogsumexp", "pjit"):
        assert name in T.supported_primitives()


def test_registering_a_primitive_twice_is_an_error():
    before = core.rules()
    with pytest.raises(ValueError, match=r"primitive `add` is registered twice "
                                         r"\(translate_elementwise\..* and "):
        @core.register("add", emits=("add",))
        def other_add(t, env, region, eqn, used):
            raise AssertionError("never runs")
    assert core.rules() == before  # the first registration stays


def test_a_family_member_registered_as_its_own_rule_is_an_error():
    # A table entry (a unary op) shadowed by a rule of its own is what one
    # registry rules out: the second registration fails at import.
    with pytest.raises(ValueError, match="`exp` is registered twice"):
        core.register("exp", emits=("exp",))(lambda t, env, region, eqn, used: None)


def _undeclared_prim():
    from jax.extend.core import Primitive
    p = Primitive("tessera_test_undeclared")
    p.def_abstract_eval(lambda x: x)
    p.def_impl(lambda x: x)
    return p


def test_a_rule_building_an_op_it_does_not_declare_fails_under_the_check(monkeypatch):
    prim = _undeclared_prim()

    def rule(t, env, region, eqn, used):  # builds `neg`, declares only `abs`
        x = t.read(env, region, eqn.invars[0])
        return [t.emit(region, "neg", [x], x.type)]

    core.register(prim.name, emits=("abs",))(rule)
    try:
        def kernel(x_ref, o_ref):
            o_ref[...] = prim.bind(x_ref[...])  # UNDECLARED

        x = np.ones((8, 128), np.float32)
        out = jax.ShapeDtypeStruct((8, 128), jnp.float32)
        monkeypatch.setenv("TESSERA_JAX_CHECK_EMITS", "1")
        with pytest.raises(tj.TranslationError, match=r"the rule of `tessera_test_undeclared` "
                                                      r"built `neg`") as info:
            tj.lower_to_tsr(kernel, out, x)
        assert info.value.primitive == prim.name and info.value.line > 0
        monkeypatch.setenv("TESSERA_JAX_CHECK_EMITS", "0")
        assert "neg" in tj.lower_to_tsr(kernel, out, x)  # users are not held to it
    finally:
        del core._RULES[prim.name]


def test_an_unregistered_primitive_names_itself_and_the_line():
    prim = _undeclared_prim()

    def kernel(x_ref, o_ref):
        o_ref[...] = prim.bind(x_ref[...])

    with pytest.raises(tj.TranslationError, match="primitive `tessera_test_undeclared` is "
                                                  "not supported") as info:
        tj.lower_to_tsr(kernel, jax.ShapeDtypeStruct((8, 128), jnp.float32),
                        np.ones((8, 128), np.float32))
    assert info.value.primitive == prim.name
    assert info.value.file == __file__ and info.value.line > 0


def _relative_imports(path: pathlib.Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                names.add(node.module)
            else:
                names.update(a.name for a in node.names)
    return names


def test_rule_modules_depend_on_the_core_only():
    """core <- rule modules <- translate.py: no rule module imports another
    (or the entry), and the core imports none of them."""
    translators = {p.stem for p in JAX_DIR.glob("translate*.py")}
    rule_modules = translators - {"translate", "translate_core"}
    assert {"translate_math", "translate_memory"} <= rule_modules
    for name in sorted(rule_modules):
        imported = _relative_imports(JAX_DIR / f"{name}.py") & translators
        assert imported == {"translate_core"}, f"{name} imports {sorted(imported)}"
    assert not _relative_imports(JAX_DIR / "translate_core.py") & translators
    assert _relative_imports(JAX_DIR / "translate.py") & translators == translators - {
        "translate"}
