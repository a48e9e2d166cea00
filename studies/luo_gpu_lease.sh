#!/usr/bin/env bash
# The minesweeper:luo evidence (issue 34) on a lent GPU, as one bounded command (the device tool's `run`, from the
# repository root there; carry .gpudata (the graph: pyg/heterophilous_graph/minesweeper), and the entry's run folders
# runs/baselines/select/minesweeper-luo and runs/baselines/reproduce/minesweeper-luo so that finished runs are reused):
#
#   OUT=... DEADLINE=520 bash studies/luo_gpu_lease.sh
#
# 0. the CUDA tests of the recipe's path (the run stops there if one fails);
# 1. the selection runs left, every (setting, seed) in its own process (`--jobs`), many sharing the GPU (through
#    CUDA's multi-process service when it starts); beside them, the final runs of the arms whose selection is
#    complete (READY_ARMS, default `plain`: every plain setting's selection runs are committed), likewise;
# 2. when the selection is complete and time is left, the final runs of the other arms (LATER_ARMS, default `svgd`);
# 3. the entry's run folders packed into $OUT (runs.tgz.00, .01, ...: at most 4 parts of 15 MiB; unfinished runs'
#    part-way saves are packed while they fit, so that nothing finished is lost and the rest resumes elsewhere).
# Unpack here with `cat runs.tgz.* | tar xz` in the repository root; `python -m studies.baselines plan` says what is left.
# The run folders stay on the machine while it is warm (30 s after a call): a second call at once, with SKIP_TESTS=1
# and a DEADLINE that fits the device time left, goes on from where the first stopped (each run saved at the end of
# the epoch the stop came in).
set -u
: "${OUT:?set OUT to the folder that comes back}"
DEADLINE=${DEADLINE:-520}
start=$(date +%s)
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1 PYTHONPATH="$PWD/src:$PWD${PYTHONPATH:+:$PYTHONPATH}"
export GRAPH_RMA_DATA=${GRAPH_RMA_DATA:-$PWD/.gpudata}
left() { echo $((DEADLINE - ($(date +%s) - start))); }
log() { echo "$* (at $(($(date +%s) - start)) s)" | tee -a "$OUT/machine.txt"; }
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/machine.txt" 2>&1
python3 -c "import torch, torch_geometric as g; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'pyg', g.__version__)" \
  >> "$OUT/machine.txt" 2>&1
if pgrep -f "^nvidia-cuda-mps-control" > /dev/null; then
  log "MPS on (started by an earlier call on this machine)"
elif nvidia-cuda-mps-control -d >> "$OUT/machine.txt" 2>&1; then
  if timeout 60 python3 -c "import torch; torch.ones(1, device='cuda').sum().item()" >> "$OUT/machine.txt" 2>&1; then
    log "MPS on"
  else
    echo quit | nvidia-cuda-mps-control; log "MPS off: a client failed under it"
  fi
else
  log "MPS off: the daemon did not start"
fi
if [ -n "${SKIP_TESTS:-}" ]; then  # a second call on the same warm machine: the first one ran them
  status=0
  log "CUDA tests skipped (SKIP_TESTS)"
else
  timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_cuda.py -k "roc_auc or classic or node_run or sampler" \
    > "$OUT/tests.log" 2>&1
  status=$?
  log "CUDA tests of the recipe's path: exit $status"
fi
if [ "$status" -ne 0 ]; then
  log "nothing trained: a CUDA test failed (tests.log)"
else
  # one log for every `final` process: at most 8 files come back (4 of them the packed runs)
  # shellcheck disable=SC2086
  timeout -s INT -k 60 $(($(left) - 100)) python3 -m studies.baselines final ${READY_ARMS:-plain} \
    --evidence minesweeper:luo --jobs "${READY_JOBS:-10}" >> "$OUT/final.log" 2>&1 &
  ready=$!
  timeout -s INT -k 60 $(($(left) - 100)) python3 -m studies.baselines select --evidence minesweeper:luo \
    --jobs "${SELECT_JOBS:-18}" > "$OUT/select.log" 2>&1
  selected=$?
  log "select: exit $selected"
  if [ "$selected" -eq 0 ] && [ "$(left)" -gt 150 ]; then
    # shellcheck disable=SC2086
    timeout -s INT -k 60 $(($(left) - 100)) python3 -m studies.baselines final ${LATER_ARMS:-svgd} \
      --evidence minesweeper:luo --jobs "${LATER_JOBS:-10}" >> "$OUT/final.log" 2>&1
    log "final ${LATER_ARMS:-svgd}: exit $?"
  fi
  wait "$ready"
  log "final ${READY_ARMS:-plain}: exit $?"
fi
python3 - "$OUT" <<'PY' 2>&1 | tee -a "$OUT/machine.txt"
import io, sys, tarfile
from pathlib import Path
out, cap, part = Path(sys.argv[1]), 56 << 20, 15 << 20
folders = [Path("runs/baselines") / s / "minesweeper-luo" for s in ("select", "final", "reproduce")]
files = sorted(f for d in folders if d.is_dir() for f in d.rglob("*") if f.is_file())
finished = [f for f in files if not f.name.endswith(".partial.pt")]
partial = sorted((f for f in files if f.name.endswith(".partial.pt")), key=lambda f: -f.stat().st_size)
buf, left_out = io.BytesIO(), []
with tarfile.open(fileobj=buf, mode="w:gz") as tar:
    for f in finished + partial:
        if f in partial and buf.tell() + f.stat().st_size > cap:
            left_out.append(str(f))
            continue
        tar.add(f)
data = buf.getvalue()
for i in range(0, len(data), part):
    (out / f"runs.tgz.{i // part:02d}").write_bytes(data[i : i + part])
print(f"packed {len(files) - len(left_out)} files, {len(data) >> 20} MiB; left out {len(left_out)}: {left_out}")
PY
