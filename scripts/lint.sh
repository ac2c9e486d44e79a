#!/usr/bin/env bash
# Style checks (part of scripts/test.sh): ruff lint and format for Python, clang-format for
# C++ / CUDA (the generated codebook data excepted). Versions pinned in requirements-dev.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m ruff check python tests benchmarks tools
python3 -m ruff format --check python tests benchmarks tools
# the pip package's binary, wherever pip put its launcher script
clang_format="$(python3 -c "import clang_format; print(clang_format.get_executable('clang-format'))")"
git ls-files -z -- '*.h' '*.cpp' '*.cu' '*.cuh' ':!:third_party/**' ':!:include/lowbit/formats/codebook_data.h' |
  xargs -0 "$clang_format" --dry-run -Werror
