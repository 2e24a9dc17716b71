#!/usr/bin/env bash
# Sets up (scripts/setup.sh) and starts the embedded platform with the example policy.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/commons up --policy examples/commons.yaml "$@"
