"""The run recorder behind `pytest --tessera-report PATH` (docs/jax.md, "The
run report"): every run of a bridge kernel, with the pallas_call's Python
line, the backend, the time, the diagnostics and the grid steps run, by
test. Off unless installed: a Runner made while a recorder is installed
gives its executable an observer (tessera.Executable._observer); without one
a run pays one attribute test.

The report is JSON (schema SCHEMA, below) with a short HTML page next to
it. Under pytest-xdist each worker writes its own part next to PATH
(`PATH-stem.WORKER.part.json`) and the controller merges the parts into PATH
at the end, so no two processes write one file."""

from __future__ import annotations

import datetime
import glob
import html
import json
import os
import threading
from typing import Any

SCHEMA = "tessera-report/1"
#: diagnostics kept per (test, kernel) entry; more are counted
MAX_DIAGNOSTICS = 20

_recorder: "Recorder | None" = None


class Recorder:
    """Collects runs; `entries` is keyed by (test, kernel, file, line, backend)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()  # runs may come from several threads
        self.entries: dict[tuple, dict] = {}
        self.test: str | None = None  # the test running now (the plugin sets it)

    def observe(self, runner: Any, seconds: float, steps: list, warnings: tuple,
                error: BaseException | None) -> None:
        exe = runner.executable
        loc = runner._kernel_loc or (None, None, None)
        key = (self.test, exe.kernel_name, loc[0], loc[1], exe.backend)
        diags = (list(getattr(runner, "tpu_findings", ())) +
                 list(getattr(error, "diagnostics", ()) or ()) + list(warnings))
        with self.lock:
            e = self.entries.get(key)
            if e is None:
                e = self.entries[key] = {
                    "test": self.test, "kernel": exe.kernel_name,
                    "location": {"file": loc[0], "line": loc[1], "col": loc[2]},
                    "backend": exe.backend, "runs": 0, "failed_runs": 0, "seconds": 0.0,
                    "grid_steps_run": 0, "grid_size": 0, "diagnostics": [],
                    "diagnostics_dropped": 0,
                }
            e["runs"] += 1
            e["seconds"] += seconds
            if error is not None:
                e["failed_runs"] += 1
            # the grid of the run that covered the most of its grid
            done, total = int(steps[0]), int(steps[1])
            if total and (not e["grid_size"] or
                          done / total >= e["grid_steps_run"] / e["grid_size"]):
                e["grid_steps_run"], e["grid_size"] = done, total
            if error is not None and not diags:
                diags = [error]
            for d in diags:
                record = _diagnostic(d)
                if record in e["diagnostics"]:
                    continue
                if len(e["diagnostics"]) < MAX_DIAGNOSTICS:
                    e["diagnostics"].append(record)
                else:
                    e["diagnostics_dropped"] += 1

    def document(self, worker: str | None = None) -> dict:
        with self.lock:
            runs = [dict(e, seconds=round(e["seconds"], 6)) for e in self.entries.values()]
        return {"schema": SCHEMA,
                "created": datetime.datetime.now(datetime.timezone.utc).isoformat(
                    timespec="seconds"),
                "workers": [worker] if worker else [],
                "runs": runs, "kernels": _kernels(runs)}


def _diagnostic(d: Any) -> dict:
    if not hasattr(d, "severity"):  # an error without records (a callback's)
        return {"severity": "error", "kind": type(d).__name__, "message": str(d),
                "file": None, "line": None, "col": None, "grid_point": None}
    gp = getattr(d, "grid_point", None)
    return {"severity": d.severity, "kind": d.kind, "message": d.message, "file": d.file,
            "line": d.line, "col": d.col, "grid_point": list(gp) if gp is not None else None}


def _kernels(runs: list[dict]) -> list[dict]:
    """Per kernel (name, file, line, backend): totals over its tests."""
    out: dict[tuple, dict] = {}
    for r in runs:
        key = (r["kernel"], r["location"]["file"], r["location"]["line"], r["backend"])
        k = out.get(key)
        if k is None:
            k = out[key] = {"kernel": r["kernel"], "location": r["location"],
                            "backend": r["backend"], "runs": 0, "failed_runs": 0,
                            "seconds": 0.0, "errors": 0, "warnings": 0, "tests": []}
        k["runs"] += r["runs"]
        k["failed_runs"] += r["failed_runs"]
        k["seconds"] = round(k["seconds"] + r["seconds"], 6)
        k["errors"] += sum(d["severity"] == "error" for d in r["diagnostics"])
        k["warnings"] += sum(d["severity"] == "warning" for d in r["diagnostics"])
        if r["test"] is not None and r["test"] not in k["tests"]:
            k["tests"].append(r["test"])
    return list(out.values())


def install() -> Recorder:
    """Starts recording (new Runners observe their runs)."""
    global _recorder
    _recorder = Recorder()
    return _recorder


def uninstall() -> None:
    global _recorder
    _recorder = None


def active() -> Recorder | None:
    return _recorder


def observer_for(runner: Any):
    """The observer a new Runner's executable gets, or None when no recorder
    is installed."""
    if _recorder is None:
        return None

    def observe(seconds: float, steps: list, warnings: tuple,
                error: BaseException | None) -> None:
        rec = _recorder
        if rec is not None:
            rec.observe(runner, seconds, steps, warnings, error)
    return observe


# ---- files ---------------------------------------------------------------------------


def paths(path: str) -> tuple[str, str]:
    """The JSON and HTML files of --tessera-report PATH: PATH's stem with
    .json and .html (PATH may end with either, or neither)."""
    stem, ext = os.path.splitext(path)
    if ext.lower() not in (".json", ".html", ".htm"):
        stem = path
    return stem + ".json", stem + ".html"


def part_pattern(path: str) -> str:
    return glob.escape(os.path.splitext(paths(path)[0])[0]) + ".*.part.json"


def part_path(path: str, worker: str) -> str:
    return os.path.splitext(paths(path)[0])[0] + f".{worker}.part.json"


def _write(path: str, text: str) -> None:
    """Into place by a rename: a reader never sees half a file."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def write_part(doc: dict, path: str, worker: str) -> None:
    _write(part_path(path, worker), json.dumps(doc))


def merge(docs: list[dict]) -> dict:
    runs = [r for d in docs for r in d.get("runs", [])]
    workers = sorted({w for d in docs for w in d.get("workers", [])})
    return {"schema": SCHEMA,
            "created": datetime.datetime.now(datetime.timezone.utc).isoformat(
                timespec="seconds"),
            "workers": workers, "runs": runs, "kernels": _kernels(runs)}


def merge_parts(path: str) -> dict | None:
    """The workers' parts of PATH merged (the parts removed), or None when
    there are none."""
    parts = sorted(glob.glob(part_pattern(path)))
    if not parts:
        return None
    docs = []
    for p in parts:
        with open(p, encoding="utf-8") as f:
            docs.append(json.load(f))
        os.remove(p)
    return merge(docs)


def write_report(doc: dict, path: str) -> tuple[str, str]:
    json_path, html_path = paths(path)
    _write(json_path, json.dumps(doc, indent=1) + "\n")
    _write(html_path, _html(doc))
    return json_path, html_path


def _html(doc: dict) -> str:
    e = html.escape
    rows = []
    for k in doc["kernels"]:
        loc = k["location"]
        where = f"{loc['file']}:{loc['line']}" if loc["file"] else ""
        rows.append(f"<tr><td>{e(k['kernel'])}</td><td>{e(where)}</td><td>{e(k['backend'])}</td>"
                    f"<td>{k['runs']}</td><td>{k['failed_runs']}</td><td>{k['seconds']:.3f}</td>"
                    f"<td>{k['errors']}</td><td>{k['warnings']}</td><td>{len(k['tests'])}</td></tr>")
    diags = []
    for r in doc["runs"]:
        for d in r["diagnostics"]:
            at = f"{d['file']}:{d['line']}" if d["file"] else ""
            diags.append(f"<tr><td>{e(d['severity'])}</td><td>{e(r['kernel'])}</td>"
                         f"<td>{e(at)}</td><td>{e(d['message'])}</td>"
                         f"<td>{e(r['test'] or '')}</td></tr>")
    return ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>tessera report</title>"
            "<style>body{font-family:sans-serif}td,th{padding:2px 8px;text-align:left}"
            "</style></head><body>\n"
            f"<h1>tessera report</h1><p>{len(doc['runs'])} (test, kernel) entries, "
            f"{sum(r['runs'] for r in doc['runs'])} runs; created {e(doc['created'])}. "
            "The data: the JSON file next to this one (docs/jax.md, \"The run report\").</p>\n"
            "<h2>Kernels</h2><table><tr><th>kernel</th><th>pallas_call</th><th>backend</th>"
            "<th>runs</th><th>failed</th><th>seconds</th><th>errors</th><th>warnings</th>"
            "<th>tests</th></tr>\n" + "\n".join(rows) + "</table>\n"
            "<h2>Diagnostics</h2><table><tr><th>severity</th><th>kernel</th><th>at</th>"
            "<th>message</th><th>test</th></tr>\n" + "\n".join(diags) + "</table>\n"
            "</body></html>\n")
