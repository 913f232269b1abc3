"""The developer scripts answer --help without doing their work, and refuse
what they do not take (scripts/test.sh would otherwise start the whole
suite, scripts/setup.sh install packages)."""
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _run(script, *args):
    return subprocess.run(["bash", str(ROOT / "scripts" / script), *args],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_test_sh_help_prints_its_usage_and_runs_nothing(flag):
    r = _run("test.sh", flag)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("THE test command")
    assert "N passed, N failed" in r.stdout
    assert "=== " not in r.stdout + r.stderr  # no suite was configured


def test_test_sh_refuses_an_unknown_argument():
    r = _run("test.sh", "--fast")
    assert r.returncode == 2
    assert "unknown argument '--fast'" in r.stderr


def test_setup_sh_help_prints_its_usage():
    r = _run("setup.sh", "--help")
    assert r.returncode == 0, r.stderr
    assert "--deps-only" in r.stdout
