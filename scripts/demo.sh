#!/usr/bin/env bash
# Sets up what lowbit needs at run time (no test or lint tools), builds and installs it with pip,
# and runs the main job on a GGUF file: a small one it writes with the gguf writer, or the path
# given (`bash scripts/demo.sh model.gguf`). It runs lowbit.linear on the best device here (a GPU
# when the installed torch has CUDA, else the CPU), checks it against a float64 reference and
# prints what ran and how long it took. CUDA kernels are compiled only when the installed torch can
# run them (LOWBIT_CUDA=ON forces them: several minutes per architecture).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh runtime
start=$SECONDS
echo "lowbit: pip install (builds the extension: about a minute on 2 cores for the CPU)"
python3 -m pip install -q --disable-pip-version-check --no-build-isolation \
  ${LOWBIT_CUDA:+--config-settings=cmake.define.LOWBIT_CUDA="$LOWBIT_CUDA"} \
  ${LOWBIT_CUDA_ARCHS:+--config-settings=cmake.define.LOWBIT_CUDA_ARCHS="$LOWBIT_CUDA_ARCHS"} .
echo "lowbit: installed in $((SECONDS - start)) s"
args=()
for a in "$@"; do
  # a file argument relative to the caller's directory
  if [ -f "$a" ]; then args+=("$(cd "$(dirname "$a")" && pwd)/$(basename "$a")"); else args+=("$a"); fi
done
cd /tmp && python3 -m lowbit demo "${args[@]}"
