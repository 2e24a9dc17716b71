#!/usr/bin/env bash
# Sets up (scripts/setup.sh --dev) and runs every check: ruff, mypy --strict, import-linter, pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --dev
export PATH="$PWD/.venv/bin:$PATH"
echo "== ruff";          ruff check src tests bench && ruff format --check --quiet src tests bench
echo "== mypy (strict)"; mypy
echo "== import-linter"; lint-imports
echo "== pytest";        python -m pytest "$@"
