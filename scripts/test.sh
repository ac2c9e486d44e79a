#!/usr/bin/env bash
# Sets up, builds and runs every test: style checks (scripts/lint.sh), GoogleTest (ctest) and
# pytest. GPU tests skip without a GPU, each listed with its reason (-rs). The GGUF reference
# package (gguf-py) is required: without it this fails rather than skipping the strongest checks.
# Where nvcc exists the CUDA code is compiled (LOWBIT_CUDA=ON) even with a CPU-only torch, so that
# a CUDA build break fails CI; the C++ package is installed and used by an external project
# (tests/consumer), from `cmake --install` and from the wheel's layout.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${LOWBIT_CUDA:-}" ] && { command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; }; then
  export LOWBIT_CUDA=ON
fi
bash scripts/setup.sh
bash scripts/lint.sh
build_dir="${LOWBIT_BUILD_DIR:-build}"
python3 -c "import gguf.quants" || {
  echo "gguf-py is missing: the decoders' reference tests need it (pip install gguf==0.19.0)" >&2
  exit 1
}
export LOWBIT_REQUIRE_GGUF=1
# ptxas serializing wgmma (C7514 / C7515: a wait after every wgmma) takes from the MMQ kernels the
# overlap of decode and tensor cores without changing a result, so no test would see it; the build
# of this run must not report it.
if grep -q "C751[45]" "$build_dir/build-output.log" 2>/dev/null; then
  echo "ptxas serialized wgmma in these kernels (C7514/C7515):" >&2
  grep -o "C751[45].*function '[^']*'" "$build_dir/build-output.log" | grep -o "'[^']*'" | sort -u >&2
  exit 1
fi
ctest --test-dir "$build_dir" --output-on-failure -j "$(nproc)"
PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}" python3 -m pytest -q -rs tests/python "$@"
bash scripts/test_consumer.sh cmake "$build_dir"
bash scripts/test_consumer.sh pip
