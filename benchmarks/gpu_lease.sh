#!/usr/bin/env bash
# One prepared lease of a lent GPU machine, as one bounded command (the device tool's `run`, from the repository
# root there, carrying .whl with turbo-gnn's source distribution, and a Triton wheel if the machine may lack one):
#
#   OUT=... bash benchmarks/gpu_lease.sh [extra gpu_suite arguments]
#
# 0. Triton checked in the first second (triton.json); missing, it is installed from .whl/triton-*.whl if carried;
# 1. turbo-gnn's extension is compiled in the background, on the CPUs, while the GPU works (benchmarks/turbo_peer.py);
# 2. the fused kernels' tests compiled for the card, not interpreted (tests/test_lean_fused.py, TRITON_INTERPRET=0),
#    then the CUDA tests (tests/test_cuda.py and the CUDA variant of the device test in tests/test_protocols.py);
# 3. the GPU suite's device steps, under one deadline, writing suite.json after every step: stock, chunked, fused
#    and turbo-gnn in memory, profile, peer and largest; the sampler and DropAttention in layers.
# Each phase is bounded by its own timeout and writes its file as it ends, so a phase that overruns loses only itself.
# Everything lands in $OUT: triton.json, fused_tests.log, junit_fused.xml, tests.log, junit.xml, suite.json, suite.md,
# suite.log, turbo_build.log. Then, here: python -m benchmarks.record_gpu $OUT --machine "..." && python -m benchmarks.report
set -u
: "${OUT:?set OUT to the folder that comes back}"
FUSED_SECONDS=${FUSED_SECONDS:-150}
TESTS_SECONDS=${TESTS_SECONDS:-120}
SUITE_SECONDS=${SUITE_SECONDS:-230}
export MAX_JOBS=${MAX_JOBS:-6} PYTHONUNBUFFERED=1 PYTHONPATH="$PWD/src:$PWD${PYTHONPATH:+:$PYTHONPATH}"
unset TRITON_INTERPRET GRAPH_RMA_LEAN
mkdir -p "$OUT"
start=$(date +%s)
triton_check='import json, sys
try:
    import triton
    info = {"importable": True, "version": triton.__version__}
except Exception as e:
    info = {"importable": False, "error": f"{type(e).__name__}: {e}"}
json.dump(info, open(sys.argv[1], "w"))
print("triton:", info)'
timeout 60 python3 -c "$triton_check" "$OUT/triton.json"
if ! grep -q '"importable": true' "$OUT/triton.json"; then
  wheel=$(ls .whl/triton-*.whl 2>/dev/null | head -n 1)
  if [ -n "$wheel" ]; then
    timeout 120 python3 -m pip install -q --no-deps --no-index "$wheel" && timeout 60 python3 -c "$triton_check" "$OUT/triton.json"
  fi
fi
sdist=$(ls .whl/turbo_gnn-*.tar.gz 2>/dev/null | head -n 1)
if [ -n "$sdist" ]; then
  (timeout $((FUSED_SECONDS + TESTS_SECONDS + SUITE_SECONDS)) python3 -m benchmarks.turbo_peer build --sdist "$sdist" \
    --dir /tmp/turbo > "$OUT/turbo_build.log" 2>&1; echo "exit $? after $(($(date +%s) - start)) s" >> "$OUT/turbo_build.log") &
else
  echo "no .whl/turbo_gnn-*.tar.gz: the peer column is left out" > "$OUT/turbo_build.log"
fi
TRITON_INTERPRET=0 timeout "$FUSED_SECONDS" python3 -m pytest -q -p no:cacheprovider --junitxml="$OUT/junit_fused.xml" \
  tests/test_lean_fused.py > "$OUT/fused_tests.log" 2>&1
echo "fused kernel tests: exit $? after $(($(date +%s) - start)) s" | tee -a "$OUT/fused_tests.log"
timeout "$TESTS_SECONDS" python3 -m pytest -q -p no:cacheprovider --junitxml="$OUT/junit.xml" tests/test_cuda.py \
  "tests/test_protocols.py::test_a_run_trains_on_the_device_asked_for_and_returns_a_cpu_state" > "$OUT/tests.log" 2>&1
echo "tests: exit $? after $(($(date +%s) - start)) s" | tee -a "$OUT/tests.log"
timeout $((SUITE_SECONDS + 45)) python3 -m benchmarks.gpu_suite --steps memory layers profile peer largest \
  --deadline "$SUITE_SECONDS" --turbo-dir /tmp/turbo --turbo-wait 120 --out "$OUT" "$@" > "$OUT/suite.log" 2>&1
echo "suite: exit $? after $(($(date +%s) - start)) s" | tee -a "$OUT/suite.log"
kill %1 2>/dev/null
wait
tail -n 3 "$OUT/turbo_build.log"
