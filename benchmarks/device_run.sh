#!/usr/bin/env bash
# One call on the GPU machine: build for Hopper, run the C++ and Python test suites, then the
# dense benchmark. Logs and CSVs go to $OUT; the end of the output is a short summary.
#   bash benchmarks/device_run.sh [build-base|wait-base|build|test|sanitize-gtest|sanitize|sanitize-mmq|sanitize-moe|bench|bench-mmq|bench-moe|ab|ab-test|ncu|ncu-moe|ncu-routing|profile-moe|pack|
#   gbench|gdb ...]
#   (default: build test bench). The GPU machine has no gguf package: carry its wheel in .whl/
#   (`pip download --no-deps gguf==0.19.0 -d .whl`, .whl ignored via .git/info/exclude) or the
#   bit-exact decode tests skip there. LOWBIT_COMMIT names the commit in the CSVs (no .git there).
#   A/B against another commit: `mkdir ab-base && git archive REV | tar -x -C ab-base` here (ab-*/
#   are ignored; carry them; benchmarks/candidate_tree.sh makes one with candidate patches applied),
#   then `build-base build ... ab`: build-base compiles the extension of
#   ab-base (or of each tree in AB_DIRS, e.g. "ab-base ab-two") in the background, ab waits for
#   them and runs benchmarks/ab_builds.py (AB_OP: mmvq, the default, mmq, moe_vec or moe_batched;
#   AB_MATH: mmq's and moe_batched's arithmetic) on AB_TYPES (default: the nine I-quants) at AB_M
#   (default 1,2); AB_BUILDS replaces the builds compared
#   (default "new=python base=ab-base/python"; NAME=DIR,KEY=VALUE sets an environment knob for one).
#   ab-test runs the Python tests (AB_TEST_FILES) on each of those trees with its own build, so that
#   a candidate is tested and timed in one call. Carry the ab-* trees on the call that builds them
#   only: a later call that carries them again replaces the trees (and their builds) there.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/lowbit-out}"
mkdir -p "$OUT"
steps=("${@:-build test bench}")
steps=(${steps[*]})
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
site_path="${PYTHONPATH:-}"  # without this tree's package (ab-test puts each tree's first)
export PYTHONPATH="$PWD/python:${PYTHONPATH:-}"
export LOWBIT_COMMIT="${LOWBIT_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv > "$OUT/gpu.txt" 2>&1
use_system_cxx() {
  # The torch process runs on the system libstdc++; a toolchain that links its own copy into
  # lowbit._C gives two C++ runtimes in one process (iostreams crash). Prefer the system g++.
  for cxx in /usr/bin/g++ /usr/bin/g++-13 /usr/bin/g++-12; do
    if [ -x "$cxx" ]; then export CXX="$cxx" CUDAHOSTCXX="$cxx"; break; fi
  done
}
# An ncu report REP.ncu-rep as text (REP.txt, the lines matching $2 printed) and its per-line SASS
# samples (REP-sass.csv, summed by tools/ncu_source.py); the binary report is removed (few files
# come back from the GPU machine).
export_ncu_report() {
  ncu -i "$1.ncu-rep" > "$1.txt" 2>&1
  ncu -i "$1.ncu-rep" --page source --csv --print-source sass > "$1-sass.csv" 2>&1
  rm -f "$1.ncu-rep"
  grep -E "$2" "$1.txt" | head -12
  python3 tools/ncu_source.py "$1-sass.csv" --top 8 --step 200
}
base_pid=""
# the trees build-base started: wait for each once (ab and ab-test both need them)
wait_base_builds() {
  for pid in $base_pid; do
    wait "$pid"; rc=$?; echo "build-base rc=$rc"
    [ $rc -eq 0 ] || { tail -20 "$OUT"/build-ab*.log; exit 1; }
  done
  base_pid=""
}
for step in "${steps[@]}"; do
  case "$step" in
    build-base)
      # every tree of AB_DIRS (default ab-base) in the background, side by side
      dirs=(${AB_DIRS:-ab-base})
      use_system_cxx
      jobs=$(( $(nproc) / (${#dirs[@]} + 1) )); [ $jobs -ge 2 ] || jobs=2
      pids=()
      for d in "${dirs[@]}"; do
        [ -d "$d" ] || { echo "build-base: no $d/ (see the header)"; exit 1; }
        ( cd "$d" && cmake -S . -B build-dev -G Ninja -DLOWBIT_CUDA=ON -DLOWBIT_CUDA_ARCHS=90a -DLOWBIT_BUILD_PYTHON=ON \
            -DPython_EXECUTABLE="$(command -v python3)" > "$OUT/build-$d.log" 2>&1 &&
            cmake --build build-dev -j "$jobs" --target _C >> "$OUT/build-$d.log" 2>&1 ) &
        pids+=($!)
      done
      base_pid="${pids[*]}" ;;
    wait-base)
      # build-base's trees built, for commands that run after this script
      wait_base_builds ;;
    ab)
      wait_base_builds
      build_args=()
      for spec in ${AB_BUILDS:-new=python base=ab-base/python}; do build_args+=(--build "$spec"); done
      python3 benchmarks/ab_builds.py --op "${AB_OP:-mmvq}" --math "${AB_MATH:-auto}" "${build_args[@]}" \
        --types "${AB_TYPES:-iq1_s,iq1_m,iq2_xxs,iq2_xs,iq2_s,iq3_xxs,iq3_s,iq4_nl,iq4_xs}" --m "${AB_M:-1,2}" \
        > "$OUT/ab.txt" 2>&1; echo "ab rc=$?"; cat "$OUT/ab.txt" ;;
    ab-test)
      # the Python tests (AB_TEST_FILES, default the MMQ and MoE files) on each tree of AB_TEST_DIRS
      # (default AB_DIRS) with its own build (build-base), each file in its own process; waits for
      # the builds
      wait_base_builds
      for d in ${AB_TEST_DIRS:-${AB_DIRS:-ab-base}}; do
        for f in ${AB_TEST_FILES:-tests/python/test_mmq.py tests/python/test_moe_ops.py tests/python/test_moe_cuda.py}; do
          ( cd "$d" && PYTHONPATH="$PWD/python${site_path:+:$site_path}" timeout 300 python3 -X faulthandler -m pytest -q -p no:cacheprovider "$f" \
              > "$OUT/ab-test-$d-$(basename "$f" .py).log" 2>&1 )
          echo "ab-test $d $f rc=$? $(tail -1 "$OUT/ab-test-$d-$(basename "$f" .py).log")"
        done
      done ;;
    build)
      use_system_cxx
      echo "CXX=${CXX:-default} $(${CXX:-g++} --version | head -1)"
      cmake -S . -B build-dev -G Ninja -DLOWBIT_CUDA=ON -DLOWBIT_CUDA_ARCHS=90a -DLOWBIT_BUILD_PYTHON=ON \
        -DPython_EXECUTABLE="$(command -v python3)" > "$OUT/build.log" 2>&1 &&
        cmake --build build-dev -j "$(nproc)" >> "$OUT/build.log" 2>&1
      rc=$?; echo "build rc=$rc"; [ $rc -eq 0 ] || { tail -40 "$OUT/build.log"; exit 1; }
      grep -E "spill|warning" "$OUT/build.log" | head -5
      ldd python/lowbit/_C*.so | grep -E "stdc|gcc_s" ;;
    test)
      ctest --test-dir build-dev -j 8 --output-on-failure > "$OUT/ctest.log" 2>&1; echo "ctest rc=$?"; tail -3 "$OUT/ctest.log"
      # GPU tests first, each file in its own process so that one crash cannot hide the others;
      # each file's counts in a JUnit file, the tight checks' measured errors in tight-errors.tsv
      : > "$OUT/pytest.log"
      rm -rf "$OUT/junit" && mkdir -p "$OUT/junit"
      export LOWBIT_TEST_RECORD="$OUT/tight-errors.tsv"
      : > "$LOWBIT_TEST_RECORD"
      files="tests/python/test_cuda_kernels.py $(ls tests/python/test_*.py | grep -v test_cuda_kernels) tests/python/ascend"
      [ -n "${TEST_FILES:-}" ] && files="$TEST_FILES"
      for f in $files; do
        python3 -X faulthandler -m pytest -q -rs -p no:cacheprovider --junitxml="$OUT/junit/$(basename "$f" .py).xml" \
          "$f" >> "$OUT/pytest.log" 2>&1
        rc=$?; echo "pytest $f rc=$rc $(tail -1 "$OUT/pytest.log")"
        [ $rc -ge 128 ] && grep -A6 "Current thread" "$OUT/pytest.log" | tail -8
      done
      grep -E "^(FAILED|ERROR)" "$OUT/pytest.log" | head -20
      python3 tools/test_summary.py --commit "$LOWBIT_COMMIT" --ctest-log "$OUT/ctest.log" --junit "$OUT/junit" \
        --errors "$LOWBIT_TEST_RECORD" > "$OUT/tests-summary.txt"
      cat "$OUT/tests-summary.txt" ;;
    gdb)
      cuda-gdb -batch -ex run -ex bt --args python3 -m pytest -q -p no:cacheprovider ${GDB_TEST:-tests/python/test_errors.py} \
        > "$OUT/gdb.log" 2>&1; grep -E "^#[0-9]+" "$OUT/gdb.log" | head -25 ;;
    sanitize-gtest)
      compute-sanitizer --tool memcheck --error-exitcode 3 build-dev/lowbit_cuda_tests > "$OUT/sanitize-gtest.log" 2>&1
      echo "memcheck gtest rc=$?"; tail -3 "$OUT/sanitize-gtest.log" ;;
    sanitize)
      compute-sanitizer --tool memcheck --error-exitcode 3 \
        timeout 300 python3 -m pytest -q -p no:cacheprovider tests/python/test_cuda_kernels.py -k "${SANITIZE_FILTER:-mmvq or dequantize}" \
        > "$OUT/sanitize-pytest.log" 2>&1
      echo "memcheck pytest rc=$?"; grep -E "ERROR SUMMARY|passed|failed" "$OUT/sanitize-pytest.log" | tail -3 ;;
    sanitize-mmq)
      # MMQ (both arithmetics) under memcheck, the weight beyond 2^31 elements left out
      compute-sanitizer --tool memcheck --error-exitcode 3 \
        timeout 500 python3 -m pytest -q -p no:cacheprovider tests/python/test_mmq.py \
        -k "${SANITIZE_MMQ_FILTER:-not 2_31}" > "$OUT/sanitize-mmq.log" 2>&1
      echo "memcheck mmq rc=$?"; grep -E "ERROR SUMMARY|passed|failed" "$OUT/sanitize-mmq.log" | tail -3 ;;
    sanitize-moe)
      # the MoE kernels and routing under memcheck (small token counts; racecheck for the routing)
      compute-sanitizer --tool memcheck --error-exitcode 3 \
        timeout 500 python3 -m pytest -q -p no:cacheprovider tests/python/test_moe_cuda.py tests/python/test_moe_ops.py \
        -k "${SANITIZE_MOE_FILTER:-not 4096 and not 1000 and not 2_to_the_31 and not graph and not 212992}" > "$OUT/sanitize-moe.log" 2>&1
      echo "memcheck moe rc=$?"; grep -E "ERROR SUMMARY|passed|failed" "$OUT/sanitize-moe.log" | tail -3
      compute-sanitizer --tool racecheck --error-exitcode 3 \
        timeout 300 python3 -m pytest -q -p no:cacheprovider tests/python/test_moe_cuda.py -k routing \
        > "$OUT/racecheck-moe.log" 2>&1
      echo "racecheck moe routing rc=$?"; grep -E "RACECHECK SUMMARY|passed|failed" "$OUT/racecheck-moe.log" | tail -3 ;;
    bench-moe)
      python3 -X faulthandler benchmarks/bench_moe.py --out "$OUT" ${BENCH_MOE_ARGS:-} > "$OUT/bench-moe.log" 2>&1
      echo "bench-moe rc=$?"; tail -40 "$OUT/bench-moe.log" ;;
    bench-mmq)
      python3 -X faulthandler benchmarks/bench_mmq.py --out "$OUT" ${BENCH_MMQ_ARGS:-} > "$OUT/bench-mmq.log" 2>&1
      echo "bench-mmq rc=$?"; tail -30 "$OUT/bench-mmq.log" ;;
    bench)
      python3 -X faulthandler benchmarks/bench_dense.py --out "$OUT" ${BENCH_ARGS:-} > "$OUT/bench.log" 2>&1; echo "bench rc=$?"
      tail -22 "$OUT/bench.log" ;;
    ncu)
      # the MMVQ kernel (NCU_MATH auto | bf16 | int8) or the MMQ tile kernel (NCU_MATH=mmq) of each
      # of NCU_TYPES at each of NCU_M tokens: speed of light, scheduler and warp states (stall
      # reasons), occupancy, compute and memory workload (the clocks left alone: device/METHOD.md),
      # and the warp-state samples of every SASS line (ncu-*-sass.csv, read by tools/ncu_source.py)
      math="${NCU_MATH:-auto}"; kernel=mmvq; [ "$math" = mmq ] && kernel=mmq_wgmma
      for t in ${NCU_TYPES:-iq4_xs}; do
        for m in ${NCU_M:-1}; do
          rep="$OUT/ncu-$kernel-$t-m$m"
          ncu --clock-control none -k regex:$kernel --launch-skip 3 --launch-count 1 --section SpeedOfLight \
            --section SchedulerStats --section WarpStateStats --section Occupancy --section ComputeWorkloadAnalysis \
            --section MemoryWorkloadAnalysis --section SourceCounters -o "$rep" -f \
            python3 benchmarks/profile_mmvq.py "$t" "$m" "$math" > "$rep.log" 2>&1
          echo "ncu $kernel $t M=$m rc=$?"
          export_ncu_report "$rep" "Duration|Issued Warp Per|Warp Cycles Per Issued|Achieved Occupancy|Compute \(SM\) Thr|Memory Thr"
        done
      done ;;
    profile-moe)
      # the kernels of MoE calls replayed in CUDA graphs: mean durations and the span of a call
      python3 -X faulthandler benchmarks/profile_moe.py ${PROFILE_MOE_ARGS:-} > "$OUT/profile-moe.txt" 2>&1
      echo "profile-moe rc=$?"; cat "$OUT/profile-moe.txt" ;;
    ncu-moe)
      # the vector MoE's pairs kernel (the lane or the int8 MMVQ; NCU_MOE_KERNEL=moe_batched: the
      # grouped MMQ) of moe_proj for NCU_TYPES at NCU_M tokens: one of profile_moe.py's warm-up
      # calls, back to back (NCU_SKIP matching launches skipped; L2 left warm, as in its replays),
      # with the warp-state samples of every SASS line (ncu-moe-*-sass.csv, read by tools/ncu_source.py);
      # the fewest, most and mean active cycles of an SM say whether the SMs' idle time is at the
      # launch (the most well below the elapsed cycles) or at an uneven end (the fewest well below)
      moe_kernel="${NCU_MOE_KERNEL:-moe_vec}"
      regex="mmvq_(lane|int8)_(pairs_|staged_)?kernel"; [ "$moe_kernel" = moe_batched ] && regex="mmq_grouped_kernel"
      for t in ${NCU_TYPES:-iq4_xs}; do
        for m in ${NCU_M:-8}; do
          rep="$OUT/ncu-$moe_kernel-$t-m$m"
          ncu --clock-control none --cache-control none -k regex:"$regex" --launch-skip "${NCU_SKIP:-6}" \
            --launch-count 1 --section SpeedOfLight --section SchedulerStats --section WarpStateStats --section Occupancy \
            --section LaunchStats --section MemoryWorkloadAnalysis --section SourceCounters \
            --metrics sm__cycles_active.min,sm__cycles_active.max,sm__cycles_active.avg,smsp__inst_executed.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum \
            -o "$rep" -f python3 benchmarks/profile_moe.py --types "$t" --tokens "$m" --ops moe_proj --kernels "$moe_kernel" \
            > "$rep.log" 2>&1
          echo "ncu $moe_kernel $t T=$m rc=$?"
          export_ncu_report "$rep" "Duration|Elapsed Cycles|sm__cycles_active|Issued Warp Per|Warp Cycles Per Issued|Achieved Occupancy|Memory Thr|DRAM Thr|Registers Per|Block Limit"
        done
      done ;;
    ncu-routing)
      # the one-block routing kernel of moe_batched's moe_align at NCU_M tokens (iq4_xs moe_proj,
      # top-8), sampled every 32 cycles (--warp-sampling-interval 0): the kernel is a few microseconds
      # on one SM, too short for the default interval to place its cycles on SASS lines
      for m in ${NCU_M:-128 512}; do
        rep="$OUT/ncu-routing-t$m"
        ncu --clock-control none -k regex:routing_one_block --launch-skip 4 --launch-count 1 --warp-sampling-interval 0 \
          --section SpeedOfLight --section SchedulerStats --section WarpStateStats --section SourceCounters -o "$rep" -f \
          python3 benchmarks/profile_moe.py --types iq4_xs --tokens "$m" --ops moe_proj --kernels moe_batched \
          > "$rep.log" 2>&1
        echo "ncu routing T=$m rc=$?"
        export_ncu_report "$rep" "Duration|Issued Warp Per|Warp Cycles Per Issued"
      done ;;
    pack)
      # few files come back from the GPU machine: the CSVs and summaries stay, the rest (logs, JUnit
      # files, measured errors) goes into one archive
      ( cd "$OUT" && rest=$(ls | grep -vE '\.csv$|summary|^logs\.tgz$') &&
          { [ -z "$rest" ] || tar czf logs.tgz --remove-files $rest; } )
      echo "pack: $(ls "$OUT" | tr '\n' ' ')" ;;
    gbench)
      build-dev/lowbit_bench_cuda --benchmark_min_time=0.05s --benchmark_out="$OUT/gbench.json" > "$OUT/gbench.log" 2>&1
      echo "gbench rc=$?"; grep -E "cuda_(dequantize|mmvq)" "$OUT/gbench.log" | head -50 ;;
  esac
done
