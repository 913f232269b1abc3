"""Runs the code blocks of a markdown page (README.md, docs/tutorial.md) and
checks that what they print is what the page shows.

A page's ```python blocks are files: a block whose first line is a comment
naming a file (`# matmul.py`) is written under that name, the others as
`block<N>.py`, all into one directory before any runs, so a later block can
import an earlier one (`from matmul import matmul`). Then each block runs in
order, in this process (`runpy`, the directory its working directory and on
`sys.path`), with its standard output and error captured together. A
```sh block runs in bash in the same directory, with `python`, `pytest` and
`tessera` on its PATH meaning this Python, its pytest and the tessera CLI.

What a block prints is shown in the first ```text block after it (before
the next code block). Every non-blank line shown must be a line printed,
after both are stripped and the directory's path is taken out of what was
printed (so `/tmp/xyz/oob.py:18:62: error: ...` is shown as
`oob.py:18:62: error: ...`); `...` in a shown line stands for any text, so a
line that is only `...` elides lines, and printed lines the page leaves out
are allowed. A block without a text block after it must run without error;
a ```sh block with one may exit non-zero (a pytest run with a failing test),
its output being checked.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import pathlib
import re
import runpy
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]

_FENCE = re.compile(r"^```\s*([\w-]*)\s*$")
_FILE_COMMENT = re.compile(r"^#\s*([\w-]+\.py)\b")


@dataclasses.dataclass
class Block:
    lang: str        # "python", "sh", ...
    code: str
    line: int        # the page's line of the opening fence
    shown: str | None = None  # the output the page shows after it

    @property
    def first_line(self) -> str:
        return self.code.split("\n", 1)[0]

    @property
    def needs_libtpu(self) -> bool:
        """A block that compiles for a TPU with libtpu says so on its first
        line; the TPU suite runs it (python/tests/tpu), under libtpu's lock."""
        return "needs libtpu" in self.first_line


def fenced_blocks(text: str) -> list[Block]:
    """Every fenced block of a markdown text, in order."""
    out: list[Block] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        start, body = i, []
        i += 1
        while i < len(lines) and lines[i].rstrip() != "```":
            body.append(lines[i])
            i += 1
        if i == len(lines):
            raise ValueError(f"line {start + 1}: a fenced block is never closed")
        out.append(Block(m.group(1) or "", "\n".join(body) + "\n", start + 1))
        i += 1
    return out


def code_blocks(text: str) -> list[Block]:
    """The ```python and ```sh blocks of a markdown text, each with the
    ```text block shown after it (before the next code block), if any."""
    code: list[Block] = []
    for b in fenced_blocks(text):
        if b.lang in ("python", "sh"):
            code.append(b)
        elif b.lang == "text" and code and code[-1].shown is None:
            code[-1].shown = b.code
    return code


def file_name(block: Block, index: int) -> str:
    m = _FILE_COMMENT.match(block.first_line)
    return m.group(1) if m else f"block{index}.py"


def cli() -> pathlib.Path | None:
    """The tessera CLI: $TESSERA (as meson's tests give it), else the one
    built beside the library the package opened, else `tessera` on PATH."""
    env = os.environ.get("TESSERA")
    if env:
        return pathlib.Path(env)
    import tessera._lib
    built = pathlib.Path(tessera._lib.library_path()).resolve().parent / "tools" / "tessera"
    if built.is_file():
        return built
    found = shutil.which("tessera")
    return pathlib.Path(found) if found else None


def _shims(workdir: pathlib.Path) -> pathlib.Path:
    """A directory of `python`, `pytest` and `tessera` commands for ```sh
    blocks: this Python, its pytest (with tessera's plugin loaded, as an
    installed package registers it) and the CLI."""
    bindir = workdir / ".bin"
    bindir.mkdir(exist_ok=True)
    scripts = {
        "python": f'exec "{sys.executable}" "$@"\n',
        "pytest": f'exec "{sys.executable}" -m pytest -p no:cacheprovider '
                  f'-p tessera.jax.pytest_plugin "$@"\n',
    }
    tool = cli()
    if tool is not None:
        scripts["tessera"] = f'exec "{tool}" "$@"\n'
    for name, body in scripts.items():
        path = bindir / name
        path.write_text("#!/bin/sh\n" + body)
        path.chmod(0o755)
    return bindir


def _run_python(path: pathlib.Path, workdir: pathlib.Path) -> str:
    buffer = io.StringIO()
    cwd = os.getcwd()
    os.chdir(workdir)
    sys.path.insert(0, str(workdir))
    try:
        with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
            runpy.run_path(str(path), run_name="__main__")
    except BaseException as e:
        raise AssertionError(f"{path.name} failed: {type(e).__name__}: {e}\n"
                             f"its output:\n{buffer.getvalue()}") from e
    finally:
        os.chdir(cwd)
        sys.path.remove(str(workdir))
    return buffer.getvalue()


def _run_sh(block: Block, workdir: pathlib.Path) -> str:
    import tessera
    import tessera._lib
    env = dict(os.environ)
    env["PATH"] = f"{_shims(workdir)}{os.pathsep}{env.get('PATH', '')}"
    # The blocks' modules (matmul.py), then the tessera package and library
    # this process runs (the environment may name them relative to the
    # directory the tests started in), then the rest.
    package = pathlib.Path(tessera.__file__).resolve().parents[1]
    rest = [str(pathlib.Path(p).resolve())
            for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join([str(workdir), str(package), *rest])
    env["TESSERA_LIBRARY"] = str(pathlib.Path(tessera._lib.library_path()).resolve())
    r = subprocess.run(["bash", "-eo", "pipefail", "-c", block.code], cwd=workdir, env=env,
                       capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    out = r.stdout + r.stderr
    # A block whose output the page shows may fail (a pytest run with a
    # failing test): what it printed is checked. Any other must succeed.
    if r.returncode != 0 and block.shown is None:
        raise AssertionError(f"the sh block exited {r.returncode}:\n{block.code}\n"
                             f"its output:\n{out}")
    return out


def _matches(shown: str, printed: list[str]) -> bool:
    pattern = re.compile(".*".join(re.escape(part) for part in shown.split("...")))
    return any(pattern.fullmatch(line) for line in printed)


def check_output(block: Block, printed: str, workdir: pathlib.Path, page: str) -> None:
    """Every line the page shows after `block` is a line it printed."""
    if block.shown is None:
        return
    text = printed.replace(str(workdir.resolve()) + os.sep, "").replace(str(workdir) + os.sep, "")
    lines = [line.strip() for line in text.splitlines()]
    missing = [line.strip() for line in block.shown.splitlines()
               if line.strip() and line.strip() != "..." and not _matches(line.strip(), lines)]
    assert not missing, (
        f"{page}:{block.line}: the output shown after this block is not what it printed.\n"
        f"shown but not printed:\n  " + "\n  ".join(missing) +
        f"\nprinted:\n{text}")


def run_page(page: pathlib.Path, workdir: pathlib.Path, blocks: list[Block] | None = None,
             select=lambda block: not block.needs_libtpu) -> list[tuple[Block, str]]:
    """Writes the page's python blocks into `workdir`, runs the selected
    code blocks in order and checks each one's shown output. Returns
    (block, what it printed) for each block run."""
    blocks = code_blocks(page.read_text()) if blocks is None else blocks
    files = {}
    for i, b in enumerate(blocks):
        if b.lang == "python":
            name = file_name(b, i)
            assert name not in files.values(), f"{page}:{b.line}: a second block names {name}"
            files[id(b)] = name
            (workdir / name).write_text(b.code)
    before = set(sys.modules)
    ran = []
    try:
        for b in blocks:
            if not select(b):
                continue
            if b.lang == "python":
                printed = _run_python(workdir / files[id(b)], workdir)
            else:
                printed = _run_sh(b, workdir)
            check_output(b, printed, workdir, page.name)
            ran.append((b, printed))
    finally:
        # the page's own modules (matmul.py...) are not left for another page
        for name in set(sys.modules) - before:
            origin = getattr(sys.modules[name], "__file__", None) or ""
            if origin.startswith(str(workdir)):
                del sys.modules[name]
    return ran
