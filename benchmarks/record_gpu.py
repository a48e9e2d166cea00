"""Add one GPU lease's results (the folder ``benchmarks/gpu_lease.sh`` filled) to ``benchmarks/recorded/gpu.json``, the
file ``benchmarks/report_gpu.py`` renders; then ``python -m benchmarks.report`` rewrites the page.

    python -m benchmarks.record_gpu OUT --machine "device tool nvidia-h200-x1 (16 CPU cores, 128 GiB)"

The run's conditions come from the suite's ``suite.json`` (card, memory, driver, torch, CUDA, PyG, Triton), its date
from that file's time, the tests' outcomes from the lease's JUnit files (the fused kernels' tests compiled for the
card, then the CUDA tests), turbo-gnn's build from the last lines of its log. Nothing is typed by hand.
"""

from __future__ import annotations

import argparse
import datetime
import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Dict, List, Optional

HERE = Path(__file__).resolve().parent
#: The suite.json keys that describe the run rather than measure something.
META = ("device", "driver", "torch", "cuda", "pyg", "memory_gib", "triton")
JUNIT = ("junit_fused.xml", "junit.xml")


def test_outcomes(path: Path) -> List[Dict[str, str]]:
    """``[{"test": "tests/test_x.py::name", "outcome": passed|failed|error|skipped}]`` from a JUnit file."""
    rows = []
    for case in ET.parse(path).getroot().iter("testcase"):
        module = case.get("classname", "").replace(".", "/") + ".py"
        outcome = "passed"
        for tag in ("failure", "error", "skipped"):
            if case.find(tag) is not None:
                outcome = {"failure": "failed"}.get(tag, tag)
        rows.append({"test": f"{module}::{case.get('name')}", "outcome": outcome})
    return rows


def run_record(out: Path, machine: str, command: Optional[str] = None, note: Optional[str] = None) -> Dict:
    """The gpu.json entry of the lease whose files are in ``out``."""
    suite_file = out / "suite.json"
    suite = json.loads(suite_file.read_text())
    date = datetime.datetime.fromtimestamp(suite_file.stat().st_mtime, datetime.timezone.utc).date().isoformat()
    meta = {"command": command or suite.get("command"), **{k: suite.get(k) for k in META}}
    meta.update(machine=machine, date=date, **({"note": note} if note else {}))
    record: Dict = {"meta": meta, "suite": {k: v for k, v in suite.items() if k not in META}}
    tests = [t for name in JUNIT if (out / name).is_file() for t in test_outcomes(out / name)]
    if tests:
        record["tests"] = tests
    log = out / "turbo_build.log"
    if log.is_file():
        record["turbo_build"] = log.read_text().strip().splitlines()[-2:]
    return record


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out", type=Path, help="the folder the lease filled (its OUT)")
    p.add_argument("--machine", required=True, help="the lent machine, in words (the device tool's description)")
    p.add_argument("--command", default=None, help="the command as run (default: the suite's own command line)")
    p.add_argument("--note", default=None)
    p.add_argument("--file", type=Path, default=HERE / "recorded" / "gpu.json")
    a = p.parse_args(argv)
    if not (a.out / "suite.json").is_file():
        p.error(f"out: {a.out} holds no suite.json (the folder benchmarks/gpu_lease.sh writes)")
    runs = json.loads(a.file.read_text()) if a.file.is_file() else []
    runs.append(run_record(a.out, a.machine, a.command, a.note))
    a.file.write_text(json.dumps(runs, indent=1) + "\n")
    print(f"{a.file}: {len(runs)} runs; now: python -m benchmarks.report")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
