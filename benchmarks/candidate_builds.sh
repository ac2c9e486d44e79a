#!/usr/bin/env bash
# Builds of candidate trees that change few kernel files, in one CMake tree: the base tree is built
# whole once, then each candidate's differing files are copied into it and only the objects that
# can differ are rebuilt (a whole build per candidate costs minutes of device time; this, seconds).
#   bash benchmarks/candidate_builds.sh BASE_TREE OUT_DIR CANDIDATE_TREE...
# BASE_TREE and each CANDIDATE_TREE are copies of the repository (benchmarks/candidate_tree.sh makes
# them: ab-main with no patch, ab-NAME with a candidate's). Each build's `lowbit` package (with its
# _C) lands in OUT_DIR/NAME (NAME: the tree's name without "ab-"), for ab_builds.py's --build NAME=DIR
# and for running a candidate's tests (they are in BASE_TREE while its build runs). BASE_TREE's
# files are the base; the script puts each candidate's in and takes them out again, so BASE_TREE
# ends as it began (its build too, but for the objects the candidates recompiled).
#
# Valid only where the candidates change no code compiled into the objects kept: by default the
# objects of csrc/cuda/moe, csrc/cuda/api and src are rebuilt, the rest (the dense MMVQ, MMQ and
# dequantize instances) kept from the base build; KEEP_OBJECTS_EXCEPT (a find -path pattern list,
# space separated) names others to rebuild. Check that a candidate's SASS of the kept translation
# units is unchanged before relying on this. A candidate tree with a file .rebuild (candidate_tree.sh
# --rebuild) names its own patterns instead. The copied files get an old time stamp so that ninja
# rebuilds no object because of them; what it rebuilds is what was removed, and the log counts it.
# At the end the base tree gets its own files back and loses the objects the last candidate rebuilt,
# so that a later run on the same tree (and build) starts from the base again.
set -uo pipefail
[ $# -ge 3 ] || { echo "usage: $0 BASE_TREE OUT_DIR CANDIDATE_TREE..." >&2; exit 2; }
base=$(cd "$1" && pwd); out="$2"; shift 2
mkdir -p "$out"
rebuild="${KEEP_OBJECTS_EXCEPT:-*csrc/cuda/moe/* *csrc/cuda/api/* */src/*}"
old_stamp='2000-01-01 00:00'
configure_and_build() {
  (cd "$base" && cmake -S . -B build-dev -G Ninja -DLOWBIT_CUDA="${LOWBIT_CUDA:-ON}" -DLOWBIT_CUDA_ARCHS="${LOWBIT_CUDA_ARCHS:-90a}" \
    -DLOWBIT_BUILD_PYTHON=ON -DPython_EXECUTABLE="$(command -v python3)" > "$out/build-base.log" 2>&1 &&
    cmake --build build-dev -j "$(nproc)" --target _C >> "$out/build-base.log" 2>&1)
}
# the base's own files back in place of `changed`, with the old stamp (a file the base lacks goes)
restore_base_files() {
  for f in "${changed[@]}"; do
    if [ -f "$pristine/$f" ]; then cp "$pristine/$f" "$base/$f" && touch -d "$old_stamp" "$base/$f"; else rm -f "$base/$f"; fi
  done
}
# the objects matching the find -path patterns in $1 (find's patterns, not the shell's)
drop_objects() {
  set -f
  for pattern in $1; do find "$base/build-dev" -name '*.o' -path "$pattern" -delete; done
  set +f
}
# the files of a candidate tree that differ from the pristine base (relative paths)
differing() {
  (cd "$1" && find csrc include src python tests -type f ! -name '*.so' ! -path '*__pycache__*' -print0) |
    while IFS= read -r -d '' f; do cmp -s "$1/$f" "$pristine/$f" || printf '%s\n' "$f"; done
}
configure_and_build || { echo "build base rc=1"; tail -20 "$out/build-base.log"; exit 1; }
echo "build base rc=0"
pristine=$(mktemp -d)
(cd "$base" && tar -c --exclude='*.so' --exclude=__pycache__ csrc include src python tests) | tar -x -C "$pristine"
cp -a "$base/python" "$out/$(basename "$base" | sed 's/^ab-//')"
changed=()
patterns=""
previous=""
for tree in "$@"; do
  name=$(basename "$tree" | sed 's/^ab-//')
  # the previous candidate's files back to the base's, then this one's in, all with the old stamp
  restore_base_files
  mapfile -t changed < <(differing "$tree")
  for f in "${changed[@]}"; do
    mkdir -p "$(dirname "$base/$f")" && cp "$tree/$f" "$base/$f" && touch -d "$old_stamp" "$base/$f"
  done
  # this candidate's objects go, and those the one before rebuilt from its own files
  previous="$patterns"
  patterns="$rebuild"
  [ -f "$tree/.rebuild" ] && patterns=$(cat "$tree/.rebuild")
  drop_objects "$previous $patterns"
  (cd "$base" && cmake --build build-dev -j "$(nproc)" --target _C > "$out/build-$name.log" 2>&1)
  rc=$?
  echo "build $name rc=$rc: ${#changed[@]} files, $(grep -c 'Building' "$out/build-$name.log") objects rebuilt"
  [ $rc -eq 0 ] || { tail -20 "$out/build-$name.log"; exit 1; }
  grep -i "spill" "$out/build-$name.log" | head -3
  cp -a "$base/python" "$out/$name"
done
md5sum "$out"/*/lowbit/_C*.so
restore_base_files
drop_objects "$previous $patterns"  # (the objects the last build recompiled: from its files)
rm -rf "$pristine"
