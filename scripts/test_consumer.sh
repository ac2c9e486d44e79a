#!/usr/bin/env bash
# Builds and runs tests/consumer, an external CMake project, against lowbit's installed C++ package:
#   test_consumer.sh cmake BUILD_DIR   `cmake --install BUILD_DIR --prefix <tmp>`, then find_package
#   test_consumer.sh pip               `pip install --target <tmp> .` (the wheel's layout), then
#                                      CMAKE_PREFIX_PATH=<tmp>/lowbit (what lowbit.cmake_prefix_path says)
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:?usage: test_consumer.sh cmake BUILD_DIR | pip}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

case "$mode" in
  cmake)
    cmake --install "${2:?the build dir to install}" --prefix "$work/prefix" >/dev/null
    prefix="$work/prefix"
    ;;
  pip)
    # the wheel as pip builds it, into a private directory (the machine's site-packages untouched)
    python3 -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps --target "$work/site" .
    prefix="$(cd "$work/site" && python3 -c "import lowbit; print(lowbit.cmake_prefix_path)")"
    case "$prefix" in "$work/site/lowbit") ;; *) echo "lowbit.cmake_prefix_path is $prefix" >&2; exit 1 ;; esac
    for top in include lib; do
      if [ -e "$work/site/$top" ]; then echo "the wheel put $top/ at the top of site-packages" >&2; exit 1; fi
    done
    ;;
  *)
    echo "unknown mode $mode" >&2
    exit 2
    ;;
esac

cmake -S tests/consumer -B "$work/consumer" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/consumer" >/dev/null
"$work/consumer/lowbit_consumer"
