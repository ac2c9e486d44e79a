#!/usr/bin/env bash
# Sets up a fresh machine for lowbit and builds it in place:
#   system packages through apt (only those missing), Python packages through pip, then CMake.
# The build puts lowbit._C into python/lowbit, so PYTHONPATH=python imports it.
#   setup.sh          everything for development and CI (GoogleTest, Google Benchmark, linters), then build
#   setup.sh deps     stop after those dependencies
#   setup.sh runtime  only what building and running lowbit needs (scripts/demo.sh), no build
# Env: LOWBIT_BUILD_DIR (default build), LOWBIT_CUDA (AUTO|ON|OFF), LOWBIT_CUDA_ARCHS, LOWBIT_JOBS.
# LOWBIT_CUDA=AUTO builds the CUDA kernels only when nvcc exists AND the installed torch has CUDA.
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-build}"

missing=()
command -v cmake >/dev/null || missing+=(cmake)
command -v ninja >/dev/null || missing+=(ninja-build)
command -v g++ >/dev/null || missing+=(g++)
if [ "$mode" != runtime ]; then
  [ -e /usr/include/gtest/gtest.h ] || missing+=(libgtest-dev)
  [ -e /usr/include/benchmark/benchmark.h ] || missing+=(libbenchmark-dev)
fi
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq "${missing[@]}"
fi

pip_install() { python3 -m pip install -q --disable-pip-version-check "$@"; }
if [ "$mode" = runtime ]; then
  # build backend and runtime needs only (the gguf package reads GGUF files for lowbit.gguf and the demo)
  pip_install numpy "pybind11>=2.12" "scikit-build-core>=0.10" ninja "gguf==0.19.0"
else
  pip_install -r requirements-dev.txt
fi
# Keep a torch that is already installed (e.g. a CUDA build); otherwise take the pinned CPU one.
python3 -c "import torch" 2>/dev/null || pip_install "torch==2.13.0"

case "$mode" in deps | runtime) exit 0 ;; esac

# Say what will be built and roughly how long it takes (2 cores; about half with 4).
nvcc_found=no
{ command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; } && nvcc_found=yes
torch_cuda="$(python3 -c "import torch; print(torch.version.cuda or '')")"
cuda="${LOWBIT_CUDA:-AUTO}"
archs="${LOWBIT_CUDA_ARCHS:-80;89;90a;120}"
if [ "$cuda" = ON ] || { [ "$cuda" = AUTO ] && [ "$nvcc_found" = yes ] && [ -n "$torch_cuda" ]; }; then
  n_archs=$(echo "$archs" | tr ';' '\n' | grep -c .)
  echo "lowbit: building the C++ core, tests, the torch extension and CUDA kernels for ${archs}" \
    "(about $((2 + 2 * n_archs)) minutes on 2 cores)"
else
  why="LOWBIT_CUDA=OFF"
  [ "$cuda" = AUTO ] && [ "$nvcc_found" = no ] && why="no nvcc"
  [ "$cuda" = AUTO ] && [ "$nvcc_found" = yes ] && why="the installed torch has no CUDA; LOWBIT_CUDA=ON builds them anyway"
  echo "lowbit: building the C++ core, tests and the torch extension for the CPU, no CUDA kernels (${why})" \
    "(about 2 minutes on 2 cores)"
fi

build_dir="${LOWBIT_BUILD_DIR:-build}"
start=$SECONDS
cmake -S . -B "$build_dir" -G Ninja \
  -DLOWBIT_BUILD_PYTHON=ON \
  -DLOWBIT_CUDA="$cuda" \
  ${LOWBIT_CUDA_ARCHS:+-DLOWBIT_CUDA_ARCHS="$LOWBIT_CUDA_ARCHS"} \
  -DPython_EXECUTABLE="$(command -v python3)"
# the compiler's output kept for scripts/test.sh (ptxas's notes on the wgmma pipelines)
cmake --build "$build_dir" --parallel "${LOWBIT_JOBS:-$(nproc)}" 2>&1 | tee "$build_dir/build-output.log"
echo "lowbit: build done in $((SECONDS - start)) s"
