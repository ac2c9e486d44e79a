#!/usr/bin/env bash
# Sets up a fresh machine for lowbit and builds it in place:
#   system packages through apt (only those missing), Python packages through pip, then CMake.
# The build puts lowbit._C into python/lowbit, so PYTHONPATH=python imports it.
# `setup.sh deps` stops after the dependencies.
# Env: LOWBIT_BUILD_DIR (default build), LOWBIT_CUDA (AUTO|ON|OFF), LOWBIT_CUDA_ARCHS.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v cmake >/dev/null || missing+=(cmake)
command -v ninja >/dev/null || missing+=(ninja-build)
command -v g++ >/dev/null || missing+=(g++)
[ -e /usr/include/gtest/gtest.h ] || missing+=(libgtest-dev)
[ -e /usr/include/benchmark/benchmark.h ] || missing+=(libbenchmark-dev)
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq "${missing[@]}"
fi

python3 -m pip install -q --disable-pip-version-check -r requirements-dev.txt
# Keep a torch that is already installed (e.g. a CUDA build); otherwise take the pinned CPU one.
python3 -c "import torch" 2>/dev/null || python3 -m pip install -q --disable-pip-version-check "torch==2.13.0"

[ "${1:-}" = "deps" ] && exit 0

build_dir="${LOWBIT_BUILD_DIR:-build}"
cmake -S . -B "$build_dir" -G Ninja \
  -DLOWBIT_BUILD_PYTHON=ON \
  -DLOWBIT_CUDA="${LOWBIT_CUDA:-AUTO}" \
  ${LOWBIT_CUDA_ARCHS:+-DLOWBIT_CUDA_ARCHS="$LOWBIT_CUDA_ARCHS"} \
  -DPython_EXECUTABLE="$(command -v python3)"
cmake --build "$build_dir" --parallel "${LOWBIT_JOBS:-$(nproc)}"
