#!/usr/bin/env bash
# Sets up (scripts/setup.sh --dev) and runs every check: ruff, mypy --strict, import-linter, pytest,
# then (full runs only) the date-sensitive tests again with the clock at this month's first hour.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --dev
export PATH="$PWD/.venv/bin:$PATH"
echo "== ruff";          ruff check src tests bench && ruff format --check --quiet src tests bench
echo "== mypy (strict)"; mypy
echo "== import-linter"; lint-imports
echo "== pytest";        python -m pytest "$@"

# The engine's Python sources are what runs where the compiled build is missing or stale
# (src/gpucommons/_native.py): its suites again on them, with the tests that patch engine internals.
PURE_SUITES=(tests/unit/engine tests/unit/sim tests/property/engine tests/property/sim)
if [ "$#" -eq 0 ] && python -c "import sys, gpucommons._native as n; sys.exit(0 if n.compiled() else 1)"; then
  echo "== pytest, engine from its Python sources (GPUCOMMONS_PURE=1)"
  GPUCOMMONS_PURE=1 python -m pytest -q -p no:cacheprovider "${PURE_SUITES[@]}"
fi

# Budgets, invoices, ledger periods and usage exports must work at any instant; the suite moves the
# server's clock itself (tests/integration/server/test_server_invoices.py), and this smoke check
# runs what reads the real date (the CLI, real `commons up` servers) at a month's first hour.
DATE_SENSITIVE=(tests/unit/chargeback tests/unit/cli tests/e2e/server/test_e2e_invoice.py
                tests/e2e/server/test_e2e_cli.py tests/integration/server/test_server_store.py)
if [ "$#" -eq 0 ]; then
  first_hour="$(date -u +%Y-%m-01) 00:30:00"
  echo "== pytest at $first_hour UTC (faketime)"
  if command -v faketime >/dev/null 2>&1; then
    # An offset from the real clock, not a start time: "@TIME" would restart the clock at TIME in
    # every new process (the CLI would live before the server it talks to). tests/faketime/
    # sitecustomize.py explains the other two settings.
    offset=$(( $(date -u -d "$first_hour" +%s) - $(date -u +%s) ))
    TZ=UTC PYTHONPATH=tests/faketime FAKETIME_DONT_FAKE_MONOTONIC=1 \
      faketime -f "${offset}s" python -m pytest -q -p no:cacheprovider "${DATE_SENSITIVE[@]}"
  else
    echo "faketime is not installed (Debian: apt-get install faketime): the smoke check is skipped"
  fi
fi
