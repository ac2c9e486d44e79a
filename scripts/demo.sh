#!/usr/bin/env bash
# Sets up, builds, installs lowbit with pip, and runs the main job: quantize / load weights, run
# lowbit.linear on the best device here (a GPU when there is one, else the CPU), check it against
# a float64 reference and print what ran and how long it took.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh deps
python3 -m pip install -q --disable-pip-version-check --no-build-isolation .
cd /tmp && python3 -m lowbit demo "$@"
