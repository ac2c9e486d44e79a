#!/usr/bin/env bash
# A tree to time a candidate in: ab-NAME/ holds REV's files (default HEAD) with the patches applied,
# for device_run.sh build-base / ab / ab-test (AB_DIRS="ab-NAME").
#   bash benchmarks/candidate_tree.sh NAME [--rev REV] [--rebuild "PATTERN ..."] [PATCH ...]
# --rebuild: the object patterns candidate_builds.sh rebuilds for this tree (find -path patterns;
# the objects of the translation units the patches can change), in place of its default.
# The patches are applied from the repository root with --directory: `git apply` run inside a
# subdirectory of a repository skips every path outside it without an error, so a tree patched from
# within itself can silently stay unchanged. Each patch must change the tree, or this fails.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: $0 NAME [--rev REV] [PATCH ...]" >&2; exit 2; }
name="$1"; shift
rev=HEAD
if [ "${1:-}" = --rev ]; then rev="$2"; shift 2; fi
rebuild=""
if [ "${1:-}" = --rebuild ]; then rebuild="$2"; shift 2; fi
dir="ab-$name"
rm -rf "$dir"
mkdir "$dir"
git archive "$rev" | tar -x -C "$dir"
[ -z "$rebuild" ] || printf '%s\n' "$rebuild" > "$dir/.rebuild"
for patch in "$@"; do
  before=$(cd "$dir" && find csrc include src python tests -type f -print0 | sort -z | xargs -0 cat | md5sum)
  git apply --directory="$dir" "$patch"
  after=$(cd "$dir" && find csrc include src python tests -type f -print0 | sort -z | xargs -0 cat | md5sum)
  [ "$before" != "$after" ] || { echo "$patch left $dir unchanged" >&2; exit 1; }
  echo "$dir: applied $patch"
done
