"""The `tessera` console script of an installed package: runs the tessera CLI
bundled inside it (tessera/_lib/tessera, docs/install.md) with the same
arguments, in place of this process, so that its exit status, standard
streams and signals are the CLI's own.

The CLI is a C program, not Python: a wheel carries it beside libtessera.so,
where it finds the cpu backend's and the sort's modules (base/module.c). A
package installed without it (`pip install -e ./python`, the developers'
path) has no bundled CLI; the message says where the source tree's is.
"""

from __future__ import annotations

import os
import pathlib
import sys

__all__ = ["main", "cli_path"]


def cli_path() -> pathlib.Path:
    """The bundled CLI's path (it may not exist)."""
    return pathlib.Path(__file__).resolve().parent / "_lib" / "tessera"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    path = cli_path()
    if not os.access(path, os.X_OK):
        print(f"tessera: this tessera package has no bundled CLI ({path} is missing): it was "
              "installed from python/ (the developers' editable install), which bundles "
              "nothing. Run build/tools/tessera of the source tree, or install the whole "
              "package with `pip install .` at the root of the tree (docs/install.md).",
              file=sys.stderr)
        return 127
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(path, [str(path), *args])
    return 127  # not reached: execv replaces the process or raises OSError


if __name__ == "__main__":
    sys.exit(main())
