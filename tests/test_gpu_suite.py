"""The GPU suite's smoke mode runs every step on tiny sizes on the CPU, so that the suite cannot rot between the
sessions that are lent a GPU."""
import json
import subprocess
import sys

from conftest import REPO


def test_gpu_suite_smoke_runs_every_step_and_writes_its_tables(tmp_path):
    out = tmp_path / "suite"
    proc = subprocess.run([sys.executable, "-m", "benchmarks.gpu_suite", "--smoke", "--device", "cpu", "--out",
                           str(out)], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads((out / "suite.json").read_text())
    assert result["smoke"] is True and set(result) >= {"memory", "layers", "node", "webnlg", "device", "torch"}
    assert {r["contender"] for r in result["memory"]} == {"stock", "lean"}
    assert {r["layer"] for r in result["memory"]} == {"gat", "gatv2"}
    assert result["layers"]["compile_graph_breaks"] == 0  # the drop-in layer compiles without graph breaks
    assert result["layers"]["sampler"]["SVGD on every layer"]["ms"] > 0
    assert result["node"]["seconds_per_epoch"]["graph_rma"]["ms"] > 0
    assert set(result["webnlg"]) == {"ma", "svgd"} and all(r["steps"] > 0 for r in result["webnlg"].values())
    md = (out / "suite.md").read_text()
    assert "## Memory-lean attention against stock PyG" in md and "## Node pipeline" in md
