"""pytest plugin: `pytest --tessera` runs every `pl.pallas_call` of a test run
through tessera (tessera.jax.interpret for the whole session), and starts
the report of a test that fails with a kernel error with tessera's
diagnostics (tessera's own frames are hidden from it).

Registered by the package (`[project.entry-points.pytest11] tessera`), or
loaded with `-p tessera.jax.pytest_plugin`. Options:

  --tessera                     turn it on (off by default: the plugin does
                                nothing without it)
  --tessera-backend NAME        interp (default, every check) or cpu
  --tessera-option KEY=VALUE    any tessera run option (repeatable), e.g.
                                detect_races=true, uninit=zero, cores=2,
                                numerics=tpu (f32 dots rounded as a TPU's MXU
                                does; docs/jax.md)
  --tessera-target tpu          what the chip would refuse (Pallas's TPU block
                                rules, VMEM, no Mosaic form) fails the test,
                                located; without it, a collected warning
                                (docs/jax.md, "Fails where the TPU fails")
  --tessera-chip CHIP           the TPU chip: v5e (default), v6e, v7x, ...
  --tessera-threads N           host threads per run (default: the cores
                                available, or $TESSERA_THREADS); with
                                pytest-xdist's -n, each worker's runs
                                (docs/semantics.md, "Host threads")
  --tessera-warnings MODE       collect (default): tessera's warnings are
                                shown in the terminal summary, not raised
                                through `warnings` (JAX's suites make
                                warnings errors, and JAX's interpret mode
                                gives none of them); python: issued as
                                KernelWarnings; strict: they fail the run
  --tessera-report PATH         write a report of every kernel run of the
                                session: PATH's stem with .json (the data,
                                docs/jax.md "The run report") and .html (a
                                summary page); with or without --tessera
                                (without it, the runs of tessera.jax's own
                                pallas_call)

A pallas_call's JAX `pltpu.InterpretParams` is honoured (docs/jax.md, "JAX's
InterpretParams"), and one made with `interpret=True` gets its output blocks
copied in as JAX's generic interpreter does (option out_blocks_copied_in);
--tessera-option values win over both.
"""

from __future__ import annotations

import ast
import sys
from typing import Any

import pytest

_STATE_KEY = "_tessera_jax_disable"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("tessera", "run Pallas kernels in tessera")
    group.addoption("--tessera", action="store_true", default=False,
                    help="run every pl.pallas_call through tessera")
    group.addoption("--tessera-backend", default=None, metavar="NAME",
                    help="tessera backend: interp (default) or cpu")
    group.addoption("--tessera-option", action="append", default=[], metavar="KEY=VALUE",
                    help="a tessera run option (repeatable), e.g. detect_races=true")
    group.addoption("--tessera-target", default=None, choices=("tpu",),
                    help="tpu: what the TPU chip would refuse is an error (default: a "
                         "collected warning)")
    group.addoption("--tessera-chip", default=None, metavar="CHIP",
                    help="the TPU chip whose rules and VMEM apply: v5e (default), v6e, v7x...")
    group.addoption("--tessera-threads", default=None, type=int, metavar="N",
                    help="host threads per run (default: the available cores)")
    group.addoption("--tessera-warnings", default="collect",
                    choices=("collect", "python", "strict"),
                    help="tessera's warnings: collect (shown in the summary; default), "
                         "python (KernelWarnings) or strict (errors)")
    group.addoption("--tessera-report", default=None, metavar="PATH",
                    help="write a JSON report (and an HTML page next to it) of every "
                         "kernel run of the session")


def _parse_value(text: str) -> Any:
    low = text.lower()
    if low in ("true", "yes", "on"):
        return True
    if low in ("false", "no", "off"):
        return False
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def options_from_config(config: pytest.Config) -> dict:
    """The tessera options the command line gives."""
    options: dict[str, Any] = {}
    backend = config.getoption("--tessera-backend")
    if backend:
        options["backend"] = backend
    for item in config.getoption("--tessera-option") or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise pytest.UsageError(f"--tessera-option {item!r}: expected KEY=VALUE")
        options[key.strip()] = _parse_value(value.strip())
    if config.getoption("--tessera-target", default=None):
        options.setdefault("target", config.getoption("--tessera-target"))
    if config.getoption("--tessera-chip", default=None):
        options.setdefault("chip", config.getoption("--tessera-chip"))
    if config.getoption("--tessera-threads", default=None):
        options.setdefault("threads", config.getoption("--tessera-threads"))
    mode = config.getoption("--tessera-warnings", default="collect") or "collect"
    if mode == "strict":  # collect is interpret mode's default
        options.setdefault("strict", True)
    if mode != "collect":
        options.setdefault("warnings", "python")
    return options


_REPORT_KEY = "_tessera_jax_report"


def _worker(config: pytest.Config) -> str | None:
    """This process's pytest-xdist worker id, or None (no xdist, or its
    controller)."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        return str(workerinput.get("workerid", "gw"))
    return None


def _configure_report(config: pytest.Config) -> None:
    path = config.getoption("--tessera-report", default=None)
    if not path:
        return
    from tessera import jax as tessera_jax
    from tessera.jax import _report
    if _worker(config) is None:  # parts a crashed session left are not this one's
        import glob
        import os
        for stale in glob.glob(_report.part_pattern(path)):
            os.remove(stale)
    tessera_jax.cache_clear()  # every kernel's runner made from now on is observed
    setattr(config, _REPORT_KEY, (str(path), _report.install()))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: Any):
    report = getattr(item.config, _REPORT_KEY, None)
    if report is not None:
        report[1].test = item.nodeid
    try:
        yield
    finally:
        if report is not None:
            report[1].test = None


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    report = getattr(session.config, _REPORT_KEY, None)
    if report is None:
        return
    from tessera.jax import _report
    path, recorder = report
    worker = _worker(session.config)
    doc = recorder.document(worker)
    if worker is not None:  # the controller merges the parts
        _report.write_part(doc, path, worker)
        return
    merged = _report.merge_parts(path)
    if merged is not None:
        doc = _report.merge([doc, merged])
    written = _report.write_report(doc, path)
    setattr(session.config, "_tessera_jax_report_written", written)


def pytest_configure(config: pytest.Config) -> None:
    _configure_report(config)
    if not config.getoption("--tessera", default=False):
        return
    from tessera import jax as tessera_jax
    try:
        disable = tessera_jax.enable_globally(**options_from_config(config))
    except (TypeError, ValueError) as e:
        raise pytest.UsageError(str(e)) from None
    setattr(config, _STATE_KEY, disable)
    config.addinivalue_line("markers", "tessera: run through tessera (set by --tessera)")


def pytest_unconfigure(config: pytest.Config) -> None:
    if getattr(config, _REPORT_KEY, None) is not None:
        from tessera.jax import _report
        _report.uninstall()
        delattr(config, _REPORT_KEY)
    disable = getattr(config, _STATE_KEY, None)
    if disable is not None:
        disable()
        delattr(config, _STATE_KEY)


def pytest_report_header(config: pytest.Config) -> str | None:
    if getattr(config, _STATE_KEY, None) is None:
        return None
    opts = options_from_config(config)
    shown = ", ".join(f"{k}={v!r}" for k, v in opts.items()) or "defaults"
    return f"tessera: every pl.pallas_call runs in tessera ({shown})"


def _diagnostics_text(exc: BaseException | None) -> str | None:
    """Tessera's diagnostics from an exception or its causes (a KernelError,
    or the text a jax.jit'ed callback carried)."""
    seen = set()
    top = exc
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        diags = getattr(exc, "diagnostics", None)
        if diags:
            return "\n".join(getattr(d, "text", "") or getattr(d, "message", "") for d in diags)
        exc = exc.__cause__ or exc.__context__
    # Under jax.jit the kernel ran in an XLA FFI handler: XLA's error carries
    # the text only; the handler kept the KernelError itself.
    ffi = sys.modules.get("tessera.jax._ffi")
    last = ffi.last_error() if ffi is not None else None
    diags = getattr(last, "diagnostics", None)
    if diags and top is not None and str(last) and str(last) in str(top):
        return "\n".join(getattr(d, "text", "") or getattr(d, "message", "") for d in diags)
    return None


def _put_first(longrepr: Any, text: str) -> bool:
    """Puts `text` at the start of a failure's report (before the test's
    source and the exception): the first entry of the first traceback
    pytest prints, an entry printed as it is (which pytest's xdist and
    junitxml carry as any other). False when the report has another shape."""
    try:
        from _pytest._code.code import ReprEntryNative
        entries = longrepr.chain[0][0].reprentries
        entries.insert(0, ReprEntryNative([f"tessera diagnostics:\n{text}\n"]))
        return True
    except (ImportError, AttributeError, IndexError, TypeError):
        return False


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    if getattr(item.config, _STATE_KEY, None) is None or call.excinfo is None:
        return
    text = _diagnostics_text(call.excinfo.value)
    if text:
        report = outcome.get_result()
        # The report starts with the diagnostics (a kernel's fault, at the
        # user's lines); tessera's frames are hidden from the traceback
        # (__tracebackhide__ in the bridge).
        if not _put_first(report.longrepr, text):
            report.sections.append(("tessera diagnostics", text))


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    """The warnings tessera collected (--tessera-warnings=collect): what a
    kernel did that is legal but suspicious, which JAX's interpret mode
    would not have warned about. And where the run report went."""
    written = getattr(config, "_tessera_jax_report_written", None)
    if written:
        terminalreporter.write_line(f"tessera report: {written[0]} ({written[1]})")
    if getattr(config, _STATE_KEY, None) is None:
        return
    from tessera.jax import _api
    collected = _api.collected_warnings()
    if not collected:
        return
    terminalreporter.section("tessera warnings (collected; --tessera-warnings=python "
                             "raises them)")
    for text, count in collected.items():
        terminalreporter.line(f"{text}" + (f"  [x{count}]" if count > 1 else ""))
