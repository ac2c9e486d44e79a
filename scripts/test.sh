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
ctest --test-dir "$build_dir" --output-on-failure -j "$(nproc)"
PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}" python3 -m pytest -q -rs tests/python "$@"
bash scripts/test_consumer.sh cmake "$build_dir"
bash scripts/test_consumer.sh pip
