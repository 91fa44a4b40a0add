#!/usr/bin/env bash
# Regenerate every result of the repository: run each example script (examples/**/*.py,
# which write docs/results/*.md and their plots) and each experiment file
# (examples/experiments/*.toml → out/experiments/NAME/{*.parquet,summary.json,report.html}
# and docs/results/NAME.md). Uses ../shared/traces when present (the examples fall back to
# the bundled excerpt and synthetic tenants otherwise).
#
#   scripts/reproduce.sh            (or: make reproduce)
#
# Environment: PYTHON (default .venv/bin/python), STORQOS (default .venv/bin/storqos).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
STORQOS=${STORQOS:-.venv/bin/storqos}
export MPLBACKEND=Agg

failed=()
run() {
  echo "==> $*"
  if ! "$@"; then failed+=("$*"); fi
}

# Example scripts, in path order; modules starting with "_" are helpers, not examples.
while IFS= read -r script; do
  case "$(basename "$script")" in _*) continue ;; esac
  # Each script runs from its own folder so that sibling helpers import.
  run env PYTHONPATH="$(dirname "$script")${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" "$script"
done < <(find examples -name '*.py' | sort)

# Experiment files (storqos makes only the last folder of an output path).
mkdir -p out/experiments
for exp in examples/experiments/*.toml; do
  [ -e "$exp" ] || continue
  name=$(basename "$exp" .toml)
  run "$STORQOS" run "$exp" --out "out/experiments/$name" --markdown "docs/results/$name.md"
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "reproduce: ${#failed[@]} step(s) failed:" >&2
  printf '  %s\n' "${failed[@]}" >&2
  exit 1
fi
echo "reproduce: all results regenerated (docs/results/, out/experiments/)"
