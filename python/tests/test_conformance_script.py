"""scripts/jax-conformance.sh and its pytest plugin
(scripts/conformance/tessera_conformance.py), on a fake checkout: the plugin
records each test's outcome and loads test helpers the installed jax lacks
from the checkout; the table counts tests passing under both, JAX only and
tessera only."""

import os
import subprocess
import sys
import textwrap

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
SCRIPTS = os.path.join(ROOT, "scripts")


def _env(**extra):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [os.path.join(SCRIPTS, "conformance"), env.get("PYTHONPATH", "")])
    env.update(extra)
    return env


def test_plugin_records_outcomes_and_loads_checkout_helpers(tmp_path):
    src = tmp_path / "jax"
    helper = src / "jax" / "_src" / "tessera_fake_helper_util.py"
    helper.parent.mkdir(parents=True)
    helper.write_text("VALUE = 41\n")
    tests = src / "tests" / "pallas"
    tests.mkdir(parents=True)
    (tests / "fake_test.py").write_text(textwrap.dedent("""
        import pytest
        from jax._src import tessera_fake_helper_util as h

        def test_pass():
            assert h.VALUE + 1 == 42

        def test_fail():
            assert h.VALUE == 0

        def test_skip():
            pytest.skip("not here")
    """))
    out = tmp_path / "outcomes"
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "tessera_conformance",
                        "-p", "no:cacheprovider", "fake_test.py"], cwd=tests,
                       env=_env(TESSERA_JAX_SOURCE_DIR=str(src), TESSERA_CONFORMANCE_OUT=str(out),
                                JAX_PLATFORMS="cpu"),
                       capture_output=True, text=True)
    assert r.returncode == 1, r.stdout + r.stderr  # one test fails
    got = dict(line.split("\t")[::-1] for line in out.read_text().splitlines())
    assert got == {"fake_test.py::test_pass": "passed", "fake_test.py::test_fail": "failed",
                   "fake_test.py::test_skip": "skipped"}


def test_table_counts(tmp_path):
    (tmp_path / "a_test.jax").write_text("passed\tt1\npassed\tt2\nfailed\tt3\nskipped\tt4\n")
    (tmp_path / "a_test.tessera").write_text("passed\tt1\nfailed\tt2\npassed\tt3\nskipped\tt4\n")
    r = subprocess.run([sys.executable, os.path.join(SCRIPTS, "conformance", "table.py"),
                        str(tmp_path), "c0ffee", "0.0", "jax,tessera", "--list", "tessera",
                        "a_test.py"], capture_output=True, text=True, check=True)
    assert "| a_test.py | tessera | 2 | 1 | 1 | 1 | 1 |" in r.stdout, r.stdout
    assert "  t2" in r.stdout.split("not under tessera:")[1]


def test_script_help_and_bad_checkout(tmp_path):
    script = os.path.join(SCRIPTS, "jax-conformance.sh")
    r = subprocess.run(["bash", script, "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and "JAX_SOURCE_DIR" in r.stdout
    r = subprocess.run(["bash", script, str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 2 and "tests/pallas" in r.stderr
