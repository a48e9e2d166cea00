#!/usr/bin/env bash
# One prepared lease of a lent GPU machine, as one bounded command (the device tool's `run`, from the repository
# root there, carrying .whl with turbo-gnn's source distribution):
#
#   OUT=... bash benchmarks/gpu_lease.sh [extra gpu_suite arguments]
#
# 1. turbo-gnn's extension is compiled in the background, on the CPUs, while the GPU works (benchmarks/turbo_peer.py);
# 2. the CUDA tests (tests/test_cuda.py and the CUDA variant of the device test in tests/test_protocols.py);
# 3. the GPU suite's device steps, under one deadline, writing suite.json after every step.
# Everything lands in $OUT as it finishes: tests.log, junit.xml, suite.json, suite.md, suite.log, turbo_build.log.
set -u
: "${OUT:?set OUT to the folder that comes back}"
TESTS_SECONDS=${TESTS_SECONDS:-120}
SUITE_SECONDS=${SUITE_SECONDS:-230}
export MAX_JOBS=${MAX_JOBS:-6} PYTHONUNBUFFERED=1 PYTHONPATH="$PWD/src:$PWD${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p "$OUT"
start=$(date +%s)
sdist=$(ls .whl/turbo_gnn-*.tar.gz 2>/dev/null | head -n 1)
if [ -n "$sdist" ]; then
  (timeout $((TESTS_SECONDS + SUITE_SECONDS)) python3 -m benchmarks.turbo_peer build --sdist "$sdist" --dir /tmp/turbo \
    > "$OUT/turbo_build.log" 2>&1; echo "exit $? after $(($(date +%s) - start)) s" >> "$OUT/turbo_build.log") &
else
  echo "no .whl/turbo_gnn-*.tar.gz: the peer column is left out" > "$OUT/turbo_build.log"
fi
timeout "$TESTS_SECONDS" python3 -m pytest -q -p no:cacheprovider --junitxml="$OUT/junit.xml" tests/test_cuda.py \
  "tests/test_protocols.py::test_a_run_trains_on_the_device_asked_for_and_returns_a_cpu_state" > "$OUT/tests.log" 2>&1
echo "tests: exit $? after $(($(date +%s) - start)) s" | tee -a "$OUT/tests.log"
timeout $((SUITE_SECONDS + 45)) python3 -m benchmarks.gpu_suite --steps memory layers profile peer largest \
  --deadline "$SUITE_SECONDS" --turbo-dir /tmp/turbo --turbo-wait 120 --out "$OUT" "$@" > "$OUT/suite.log" 2>&1
echo "suite: exit $? after $(($(date +%s) - start)) s" | tee -a "$OUT/suite.log"
kill %1 2>/dev/null
wait
tail -n 3 "$OUT/turbo_build.log"
