#!/usr/bin/env bash
# One command, one table: every figure of the issue before (4e5cdf6) and
# after (this tree), against its anchor (bench/table.py, docs/benchmarks.md
# "Faster than XLA: the table"). Runs bench/table.py with the project's venv
# python (jax, numpy) when there is one, else $PYTHON or python3.
#   bench/table.sh [--quick] [--rounds N] [--only NAME] [--raw FILE]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
py=${PYTHON:-}
if [[ -z $py ]]; then
  if [[ -x $root/.venv/bin/python ]]; then py=$root/.venv/bin/python; else py=python3; fi
fi
export JAX_PLATFORMS=${JAX_PLATFORMS:-cpu}
exec "$py" "$root/bench/table.py" "$@"
