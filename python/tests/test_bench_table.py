"""bench/table.py, the runner of the before/after table (docs/benchmarks.md,
"Faster than XLA: the table"): how it reads the benches' JSON lines and the
text of the benches that predate --json, pairs the two sides, decides "met?",
and lists every figure of the issue even without a bench. Nothing is timed
here: the benches are fakes printing fixed figures."""
import importlib.util
import json
import os
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def table():
    path = ROOT / "bench" / "table.py"
    if not path.exists():
        pytest.skip("no bench/table.py (an installed package's tests)")
    spec = importlib.util.spec_from_file_location("bench_table", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bench_table"] = mod
    spec.loader.exec_module(mod)
    return mod


def rec(fig, t, a, goal=1.5, load="1.00 1.00 1.00", **kw):
    return dict({"figure": fig, "label": fig + " label", "unit": "ms", "tessera": t,
                 "anchor": a, "anchor_name": "JAX interpret=True", "goal": goal,
                 "load": load}, **kw)


def test_json_lines_are_picked_out_of_other_output(table):
    text = "\n".join([
        "| a markdown | table |",
        json.dumps(rec("x/1", 1.0, 2.0)),
        "{not json",
        json.dumps({"no figure": 1}),
        "  " + json.dumps(rec("x/2", None, 2.0)),
    ])
    assert [r["figure"] for r in table.parse_json_lines(text)] == ["x/1", "x/2"]


def test_rounds_merge_to_medians_and_keep_every_load(table):
    m = table.merge([[rec("f", 1.0, 10.0, load="1.5 0 0")],
                     [rec("f", 3.0, 30.0, load="2.5 0 0")],
                     [rec("f", 2.0, 20.0, load="0.5 0 0")]])
    assert m["f"]["tessera"] == 2.0 and m["f"]["anchor"] == 20.0
    assert table._load1(m["f"]["_load"]) == "1.5,2.5,0.5"
    # A side that could not run the figure (tessera null) leaves no value.
    assert table.merge([[rec("g", None, 5.0)]])["g"]["tessera"] is None


def _bench(table, *expect):
    return table.Bench("fake", ["bench/nothing.py"], [], [], list(expect))


def test_before_after_speedups_and_met(table):
    b = _bench(table, table.Expect(("f",), "the f figure", "JAX interpret=True", 1.5))
    before = table.merge([[rec("f", 4.0, 2.0)]])
    after = table.merge([[rec("f", 1.0, 2.0), rec("g", 2.0, 2.0, goal=1.0)]])
    rows = table.rows_of(b, "bench/x.py", before, after)
    head = table.HEAD
    f = dict(zip(head, rows[0]))
    assert f["before"] == "4 ms" and f["after"] == "1 ms"
    assert f["anchor value"] == "2 ms"
    assert f["speedup before"] == "0.50x"
    assert f["speedup after (anchor/after)"] == "2.00x"
    # Each side's run measures the anchor too: both show when they differ.
    rows = table.rows_of(b, "bench/x.py", table.merge([[rec("f", 4.0, 3.0)]]), after)
    assert dict(zip(head, rows[0]))["anchor value"] == "3 ms / 2 ms"
    assert f["met?"] == "yes"
    g = dict(zip(head, rows[1]))
    assert g["before"] == "no result"       # the before run did not print it
    assert g["met?"] == "yes"               # 1.00x against a goal of 1x
    # Missed: by how much.
    rows = table.rows_of(b, "bench/x.py", before, table.merge([[rec("f", 2.0, 2.0)]]))
    assert dict(zip(head, rows[0]))["met?"] == "no (1.50x short)"


def test_every_figure_of_the_issue_has_a_row_bench_or_not(table):
    e1 = table.Expect(("flash", "cpu"), "flash: cpu", "JAX interpret=True", 1.5)
    e2 = table.Expect(("paged", "cpu"), "paged: cpu", "JAX interpret=True", 1.5)
    b = _bench(table, e1, e2)
    rows = table.rows_of(b, None, {}, {})
    assert [r[0] for r in rows] == ["flash: cpu", "paged: cpu"]
    assert all(r[3] == r[4] == "no bench" for r in rows)
    # The bench exists and printed flash only: paged is "no result".
    after = table.merge([[rec("attention/flash-cpu", 1.0, 2.0)]])
    rows = table.rows_of(b, "bench/x.py", {}, after)
    assert [r[0] for r in rows] == ["attention/flash-cpu label", "paged: cpu"]
    assert rows[1][3] == "no result"


def test_the_registry_names_every_figure_of_the_issue(table):
    labels = " ".join(e.label for b in table.BENCHES for e in b.expect).lower()
    for words in ["grid step", "int_hash", "bf16_axpy", "flash", "splash", "paged",
                  "jitted xla", "threads", "pytest -n 2", "front end", "10k ops",
                  "30k ops", "vqsort", "top_k", "f32, 1 thread", "f32, 2 threads", "openblas"]:
        assert words.lower() in labels, words
    names = [b.name for b in table.BENCHES]
    assert len(names) == len(set(names))


def test_text_of_benches_without_json(table):
    jax_md = ("| kernel | JAX interpret=True warm | tessera interp warm | tessera cpu warm |\n"
              "|---|---|---|---|\n"
              "| softmax | 0.142 | 0.128 | 0.2 |\n"
              "| add | 3.57 | error | 0.186 |\n")
    recs = table._legacy_bench_jax("bench_jax.py", {}, True, lambda cmd: jax_md)
    by = {r["figure"]: r for r in recs}
    assert by["cpu-vs-hlo/softmax"]["tessera"] == 0.2
    assert by["cpu-vs-hlo/softmax"]["anchor"] == 0.142
    assert by["interp-vs-hlo/softmax"]["goal"] == 1.0
    assert by["interp-vs-hlo/add"]["tessera"] is None
    out = ("N=10000 lower --stage mlir 0.5 s (1 lines)\nN=10000 whole process 1.50 s\n"
           "N=30000 whole process 6.00 s\n")
    recs = table._legacy_compile_time("compile_time.sh", {"TESSERA_BUILD": "b"}, False,
                                      lambda cmd: out)
    assert [(r["figure"], r["tessera"]) for r in recs] == [("compile/10k", 1.5),
                                                           ("compile/30k", 2.0)]
    sort_md = ("| tessera cpu backend, host kernel, (key, value) | 60.0 | 73.5 | |\n"
               "| Highway vqsort, kv | 25.600 | | best of 10, C++ |\n")
    (r,) = table._legacy_sort("s.py", {}, True, lambda cmd: sort_md)
    assert (r["tessera"], r["anchor"]) == (73.5, 25.6)
    topk_md = "| tessera cpu | 2.00 | 2.30 |\n| jax.lax.top_k, jit, CPU | 1.40 | 1.45 |\n"
    (r,) = table._legacy_topk("t.py", {}, True, lambda cmd: topk_md)
    assert (r["tessera"], r["anchor"]) == (2.3, 1.45)


FAKE_BENCH = r'''
import json, os, sys
assert "--json" in sys.argv
side = os.environ["TESSERA_BENCH_SIDE"]
lib = os.environ["TESSERA_LIBRARY"]
assert lib.endswith(os.path.join(side + "-build", "libtessera.so")), lib
assert os.environ["TESSERA_CACHE_DIR"].endswith("cache-" + side)
assert os.environ["PYTHONPATH"].split(os.pathsep)[0].endswith("python")
t = {"before": 4.0, "after": 1.0}[side]
print("some text first")
print(json.dumps({"figure": "fake/one", "label": "the fake figure", "unit": "ms",
                  "tessera": t, "anchor": 2.0, "anchor_name": "JAX interpret=True",
                  "goal": 1.5, "load": "0.25 0.5 0.75"}))
'''


def test_one_run_runs_each_bench_with_both_builds(table, tmp_path, monkeypatch, capsys):
    script = tmp_path / "fake_bench.py"
    script.write_text(FAKE_BENCH)
    for side in ["before", "after"]:
        (tmp_path / f"{side}-build").mkdir()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(table, "BENCHES", [
        table.Bench("fake", [str(script)], [], [], [
            table.Expect(("fake",), "fake", "JAX interpret=True", 1.5)]),
        table.Bench("missing", ["bench/no_such_bench.py"], [], [], [
            table.Expect(("x",), "a figure without a bench", "target", 1.0)]),
    ])
    raw = tmp_path / "raw.jsonl"
    assert table.main(["--no-build", "--before-build", str(tmp_path / "before-build"),
                       "--after-build", str(tmp_path / "after-build"),
                       "--rounds", "2", "--raw", str(raw)]) == 0
    out = capsys.readouterr().out
    assert "Notes:" not in out, out      # the fake's assertions held on both sides
    lines = [line for line in out.splitlines() if line.startswith("| ")]
    assert lines[0].startswith("| figure | anchor | anchor value | before | after |")
    assert ("| the fake figure | JAX interpret=True | 2 ms | 4 ms | 1 ms | 0.50x | 2.00x "
            "| ≥ 1.5x | yes | 0.25,0.25 / 0.25,0.25 |") in lines
    assert any(line.startswith("| a figure without a bench |") and "no bench" in line
               for line in lines)
    got = [json.loads(line) for line in raw.read_text().splitlines()]
    # Two rounds, the sides alternating which goes first.
    assert [(r["round"], r["side"]) for r in got] == [
        (0, "before"), (0, "after"), (1, "after"), (1, "before")]
    assert "load average:" in out and "before:" in out
