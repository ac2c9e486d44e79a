#!/usr/bin/env bash
# Sets up, builds and runs every test: style checks (scripts/lint.sh), GoogleTest (ctest) and
# pytest. GPU tests skip without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/lint.sh
build_dir="${LOWBIT_BUILD_DIR:-build}"
ctest --test-dir "$build_dir" --output-on-failure -j "$(nproc)"
PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}" python3 -m pytest -q tests/python "$@"
