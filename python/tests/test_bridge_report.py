"""Progress of a bridge kernel's run (the on_progress option) and the pytest
plugin's run report (`--tessera-report PATH`, docs/jax.md "The run
report")."""

from __future__ import annotations

import json
import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
jax = pytest.importorskip("jax")

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.experimental import pallas as pl  # noqa: E402

import tessera.jax as tj  # noqa: E402
from tessera.jax import _report  # noqa: E402

pytest_plugins = ["pytester"]


def add_one(x_ref, o_ref):
    o_ref[...] = x_ref[...] + 1.0


def test_on_progress_option_of_the_bridge(backend):
    seen = []
    f = tj.pallas_call(add_one, jax.ShapeDtypeStruct((64, 128), jnp.float32), grid=(8,),
                       in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
                       out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)), backend=backend,
                       on_progress=lambda done, total: seen.append((done, total)))
    x = np.zeros((64, 128), np.float32)
    np.testing.assert_array_equal(np.asarray(f(x)), x + 1)
    assert seen and seen[-1] == (8, 8)
    seen.clear()
    with tj.interpret(backend=backend, on_progress=lambda d, t: seen.append((d, t))):
        g = pl.pallas_call(add_one, jax.ShapeDtypeStruct((64, 128), jnp.float32), grid=(4,),
                           in_specs=[pl.BlockSpec((16, 128), lambda i: (i, 0))],
                           out_specs=pl.BlockSpec((16, 128), lambda i: (i, 0)))
        jax.block_until_ready(jax.jit(g)(x))  # through the FFI call too
    assert seen and seen[-1] == (4, 4)


def test_no_recorder_means_no_observer():
    assert _report.active() is None
    tj.cache_clear()
    f = tj.pallas_call(add_one, jax.ShapeDtypeStruct((8, 128), jnp.float32))
    f(np.zeros((8, 128), np.float32))
    runners = [p.runner for p in tj._api._prepared.values()]
    assert runners and all(r.executable._observer is None for r in runners)


REPORTED = '''
import jax, jax.numpy as jnp, numpy as np
from jax.experimental import pallas as pl

def add_one(x_ref, o_ref):
    o_ref[...] = x_ref[...] + 1.0

def oob_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[pl.ds(pl.program_id(0) * 8 + 4, 8), :]  # the bad line

def call_add(grid):
    return pl.pallas_call(add_one, jax.ShapeDtypeStruct((32, 128), jnp.float32),
                          grid=(grid,), in_specs=[pl.BlockSpec((32 // grid, 128), lambda i: (i, 0))],
                          out_specs=pl.BlockSpec((32 // grid, 128), lambda i: (i, 0)),
                          interpret=True)

def test_add_twice():
    x = np.zeros((32, 128), np.float32)
    call_add(4)(x)  # the first call
    call_add(4)(x)

def test_add_jit():
    jax.block_until_ready(jax.jit(call_add(2))(np.zeros((32, 128), np.float32)))

def test_oob():
    pl.pallas_call(oob_kernel, jax.ShapeDtypeStruct((8, 128), jnp.float32), grid=(2,),
                   in_specs=[pl.BlockSpec((16, 128), lambda i: (0, 0))],
                   out_specs=pl.BlockSpec((8, 128), lambda i: (0, 0)),
                   interpret=True)(np.zeros((16, 128), np.float32))
'''


def _line_of(marker: str) -> int:
    return next(n for n, line in enumerate(REPORTED.lstrip("\n").splitlines(), 1)
                if line.rstrip().endswith(marker))


def _plugin_args() -> list[str]:
    from importlib.metadata import entry_points
    if any(ep.value == "tessera.jax.pytest_plugin" for ep in entry_points(group="pytest11")):
        return []
    return ["-p", "tessera.jax.pytest_plugin"]


@pytest.mark.parametrize("given", ["report", "report.json", "report.html"])
def test_report_json_and_html(pytester, given):
    pytester.makepyfile(test_reported=REPORTED)
    result = pytester.runpytest_subprocess(*_plugin_args(), "--tessera",
                                           "--tessera-report", given)
    result.assert_outcomes(passed=2, failed=1)
    json_path = pytester.path / "report.json"
    html_path = pytester.path / "report.html"
    result.stdout.fnmatch_lines([f"tessera report: {json_path.name} ({html_path.name})"])
    doc = json.loads(json_path.read_text())
    assert doc["schema"] == "tessera-report/1"
    assert doc["workers"] == []
    runs = {(r["test"].split("::")[-1], r["kernel"]): r for r in doc["runs"]}
    add = runs[("test_add_twice", "add_one")]
    assert add["runs"] == 2 and add["failed_runs"] == 0
    assert add["backend"] == "interp"
    assert add["location"]["file"].endswith("test_reported.py")
    # where the kernel was first called (the call that prepared it)
    assert add["location"]["line"] == _line_of("# the first call")
    assert (add["grid_steps_run"], add["grid_size"]) == (4, 4)
    assert add["seconds"] > 0 and add["diagnostics"] == []
    jit = runs[("test_add_jit", "add_one")]
    assert (jit["runs"], jit["grid_steps_run"], jit["grid_size"]) == (1, 2, 2)
    oob = runs[("test_oob", "oob_kernel")]
    assert oob["failed_runs"] == 1
    errors = [d for d in oob["diagnostics"] if d["severity"] == "error"]
    assert errors and errors[0]["kind"] == "out_of_bounds"
    assert errors[0]["file"].endswith("test_reported.py")
    assert errors[0]["line"] == _line_of("# the bad line")
    assert errors[0]["grid_point"] is not None
    # per kernel: the grid (4) and grid (2) calls are two kernels, each
    # with its pallas_call's line and its tests
    adds = sorted((k for k in doc["kernels"] if k["kernel"] == "add_one"),
                  key=lambda k: k["location"]["line"])
    assert [(k["runs"], [t.split("::")[-1] for t in k["tests"]]) for k in adds] == \
        [(2, ["test_add_twice"]), (1, ["test_add_jit"])]
    (oob_k,) = [k for k in doc["kernels"] if k["kernel"] == "oob_kernel"]
    assert oob_k["errors"] >= 1 and oob_k["failed_runs"] == 1
    page = html_path.read_text()
    assert page.startswith("<!DOCTYPE html>") and "oob_kernel" in page and "add_one" in page


def test_report_without_tessera_flag_records_tessera_jax_calls(pytester):
    pytester.makepyfile(test_direct='''
import jax, jax.numpy as jnp, numpy as np
import tessera.jax as tj

def k(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2.0

def test_direct():
    tj.pallas_call(k, jax.ShapeDtypeStruct((8, 128), jnp.float32), backend="cpu")(
        np.ones((8, 128), np.float32))
''')
    result = pytester.runpytest_subprocess(*_plugin_args(), "--tessera-report", "out/r.json")
    result.assert_outcomes(passed=1)
    doc = json.loads((pytester.path / "out" / "r.json").read_text())
    (run,) = doc["runs"]
    assert (run["kernel"], run["backend"], run["grid_steps_run"], run["grid_size"]) == \
        ("k", "cpu", 1, 1)


def test_report_parts_of_xdist_workers_are_merged(tmp_path):
    """Each worker writes its part; the controller merges them into PATH and
    removes them (run here without xdist: the functions the plugin calls)."""
    path = str(tmp_path / "r.json")
    for worker, kernel in (("gw0", "a"), ("gw1", "b")):
        rec = _report.Recorder()
        rec.entries[("t", kernel)] = {
            "test": f"test_{kernel}", "kernel": kernel,
            "location": {"file": "f.py", "line": 1, "col": 0}, "backend": "interp",
            "runs": 1, "failed_runs": 0, "seconds": 0.5, "grid_steps_run": 2,
            "grid_size": 2, "diagnostics": [], "diagnostics_dropped": 0}
        _report.write_part(rec.document(worker), path, worker)
    assert len(list(tmp_path.glob("r.*.part.json"))) == 2
    merged = _report.merge_parts(path)
    assert merged["workers"] == ["gw0", "gw1"]
    assert sorted(r["kernel"] for r in merged["runs"]) == ["a", "b"]
    assert list(tmp_path.glob("r.*.part.json")) == []
    _report.write_report(merged, path)
    assert json.loads((tmp_path / "r.json").read_text())["kernels"][0]["runs"] == 1
    assert (tmp_path / "r.html").exists()


def test_report_lists_what_a_tpu_would_refuse_as_warnings(pytester):
    # A (4, 100) block no TPU tiles: without target="tpu" the kernel runs and
    # the finding is a warning, in the run's entry of the report too.
    pytester.makepyfile(test_tiling='''
import jax, jax.numpy as jnp, numpy as np
from jax.experimental import pallas as pl
import tessera.jax as tj

def k(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2.0

def test_tiling():
    spec = pl.BlockSpec((4, 100), lambda i: (i, 0))
    tj.pallas_call(k, jax.ShapeDtypeStruct((64, 100), jnp.float32), grid=(16,),
                   in_specs=[spec], out_specs=spec)(np.ones((64, 100), np.float32))
''')
    result = pytester.runpytest_subprocess(*_plugin_args(), "--tessera-report", "r.json")
    result.assert_outcomes(passed=1)
    doc = json.loads((pytester.path / "r.json").read_text())
    (run,) = doc["runs"]
    found = [d for d in run["diagnostics"] if d["kind"] == "tpu-block-rule"]
    assert found and all(d["severity"] == "warning" for d in found), run["diagnostics"]
    lines = (pytester.path / "test_tiling.py").read_text().splitlines()
    spec_line = next(n for n, t in enumerate(lines, 1) if "spec = pl.BlockSpec" in t)
    assert all(d["file"].endswith("test_tiling.py") and d["line"] == spec_line
               for d in found), found
