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


def test_import_jax_is_quiet_where_libtpu_is_installed():
    """The environment scripts/setup.sh makes (.venv, whose Python runs these
    tests) has libtpu for the TPU proofs, in .venv/libtpu, outside its
    site-packages: JAX there, without JAX_PLATFORMS, must not find it, else
    it starts a TPU backend at its first use and, on a machine without a
    TPU, libtpu prints errors on standard error (and takes seconds)."""
    import importlib.util
    import os
    import sys
    libtpu_dir = pathlib.Path(sys.prefix) / "libtpu"
    if importlib.util.find_spec("libtpu") is None and not libtpu_dir.is_dir():
        pytest.skip(f"this Python ({sys.executable}) has no libtpu, in site-packages or "
                    f"{libtpu_dir}: nothing could start a TPU backend")
    env = {k: v for k, v in os.environ.items()
           if k not in ("JAX_PLATFORMS", "TPU_SKIP_MDS_QUERY", "TPU_LIBRARY_PATH", "PYTHONPATH")}
    r = subprocess.run([sys.executable, "-c", "import jax; print(jax.devices())"],
                       capture_output=True, text=True, timeout=300, env=env, cwd="/",
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    assert "CpuDevice" in r.stdout, r.stdout
    assert r.stderr == "", f"`import jax; jax.devices()` printed on stderr:\n{r.stderr}"
