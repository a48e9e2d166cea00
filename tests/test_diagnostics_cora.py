"""``graph-rma report`` end to end on real Cora: a short ``graph-rma cora`` run, then the report of its checkpoint."""

import json

import pytest

from graph_rma.cli import main as cli_main
from graph_rma.data.planetoid import load_planetoid
from graph_rma.data.root import DataNotFoundError
from graph_rma.engine import load_checkpoint

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_report_on_a_short_cora_run(tmp_path):
    try:
        load_planetoid("Cora")
    except DataNotFoundError as exc:  # pragma: no cover - only without the data and offline
        pytest.skip(f"Cora not available: {exc}")
    runs = tmp_path / "runs"
    assert (
        cli_main(
            [
                "cora",
                "--variants",
                "ma",
                "--seeds",
                "0",
                "--epochs",
                "20",
                "--patience",
                "20",
                "--out",
                str(runs),
                "--no-plot",
            ]
        )
        == 0
    )
    (ckpt,) = sorted((runs / "checkpoints").glob("*.pt"))
    out = tmp_path / "report"
    assert cli_main(["report", "--checkpoint", str(ckpt), "--out", str(out)]) == 0
    summary = json.loads((out / "report.json").read_text())
    saved = load_checkpoint(ckpt)
    # the report evaluates the very model the pipeline selected: same test accuracy on the same 1000 nodes
    assert summary["num_nodes"] == 1000
    assert summary["accuracy"] == pytest.approx(saved["metrics"]["test_metric"], abs=1e-6)
    assert summary["accuracy"] > 0.5
    assert summary["variant"] == "ma" and summary["dataset"] == "Cora"
    div = summary["diversity"]["conv1"]
    assert div["num_heads"] == 8 and len(summary["redundancy"]["drops"]["conv1"]) == 8
    assert 0.0 < div["entropy_mean"] <= div["uniform_entropy"] + 1e-9
    assert -1.0 <= div["disagreement"] <= 1.0 and div["dist"] > 0
    cal = summary["calibration"]
    assert 0.0 <= cal["oe"] <= cal["ece"] + 1e-12  # conf * max(conf - acc, 0) <= |acc - conf| bin by bin
    for name in ("reliability", "head_importance", "head_entropy", "entropy_cdf"):
        data = (out / f"{name}.png").read_bytes()
        assert data[:8] == PNG and len(data) > 1000
