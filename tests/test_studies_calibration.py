"""studies.calibration: the leave-classes-out split, the selection rule, and a tiny study end to end on Cora
(2-epoch runs): one file per run, resumable, the arms computed from the runs' logits, the page rendered."""

import json
import os
from pathlib import Path

import pytest
import torch
from conftest import needs_cora
from torch_geometric.data import Data

from graph_rma.diagnostics import class_probabilities, ensemble_probabilities, expected_calibration_error
from graph_rma.engine import slug, write_json
from studies import calibration as study


def test_hide_classes_drops_their_nodes_from_every_mask_and_renumbers_the_rest():
    y = torch.tensor([0, 1, 2, 2, 3, 1])
    ones = torch.ones(6, dtype=torch.bool)
    data = Data(y=y, train_mask=ones, val_mask=ones.clone(), test_mask=ones.clone(), num_nodes=6)
    out, ood = study.hide_classes(data, (2,))
    assert ood.tolist() == [False, False, True, True, False, False]
    assert out.y.tolist() == [0, 1, -1, -1, 2, 1]  # class 3 becomes 2
    for mask in ("train_mask", "val_mask", "test_mask"):
        assert getattr(out, mask).tolist() == (~ood).tolist()
    assert data.y.tolist() == y.tolist()  # the input is left as it was


def _fake_run(out, key, setting, seed, val_logits, val_y):
    test = {"logits": val_logits.tolist(), "y": val_y.tolist(), "ood": [False] * len(val_y)}
    record = {"setting": setting, "seed": seed, "epochs": 5, "seconds": 1.0}
    record.update(val={"logits": val_logits.tolist(), "y": val_y.tolist()}, test=test)
    write_json(out / key / "id" / slug(setting) / f"seed{seed}.json", record)


def test_each_arm_takes_the_lowest_mean_validation_nll_of_its_family(tmp_path, monkeypatch):
    from graph_rma.diagnostics import fit_temperature, negative_log_likelihood

    grid = {"plain": [("ma", {}), ("ma", study.LOSS)], "svgd": [("svgd:alpha=0.1", {}), ("svgd:alpha=1", {})]}
    monkeypatch.setitem(study.GRID, "cora", grid)
    g = torch.Generator().manual_seed(0)
    nll, nll_ts = {}, {}
    for family in grid.values():
        for i, (spec, o) in enumerate(family):
            setting = study.name(spec, o)
            for seed in study.SELECT_SEEDS:
                z = (1 + 3 * i) * torch.randn(40, 3, generator=g, dtype=torch.float64)
                y = torch.randint(0, 3, (40,), generator=g)
                _fake_run(tmp_path, "cora", setting, seed, z, y)
                nll.setdefault(setting, []).append(negative_log_likelihood(class_probabilities(z), y))
                t = fit_temperature(z, y)
                nll_ts.setdefault(setting, []).append(negative_log_likelihood(class_probabilities(z, t), y))
    rows, choice = study._select(tmp_path, "cora")
    assert len(rows) == 4 * len(study.SELECT_SEEDS)
    for arm, (family, scaled) in study.ARMS.items():
        names = [study.name(s, o) for s, o in grid[family]]
        table = nll_ts if scaled else nll
        assert choice[arm] == min(names, key=lambda s: sum(table[s]))
    # a setting short of a selection seed: no choice yet
    os.remove(tmp_path / "cora" / "id" / slug("ma") / "seed101.json")
    assert study._select(tmp_path, "cora")[1] == {}


@needs_cora
@pytest.mark.usefixtures("planetoid_cache")
def test_a_tiny_study_end_to_end(tmp_path, monkeypatch):
    grid = {"plain": [("ma", {"epochs": 2})], "svgd": [("svgd:alpha=0.1,eps=8", {"epochs": 2})]}
    monkeypatch.setitem(study.GRID, "cora", grid)
    monkeypatch.setattr(study, "SELECT_SEEDS", [100])
    monkeypatch.setattr(study, "FINAL_SEEDS", [0, 1])
    monkeypatch.setattr(study, "MEMBERS", 2)
    monkeypatch.setattr(study, "COMMITTED", tmp_path / "none.json")
    out = tmp_path / "runs"
    study.run(out, ["cora-select", "cora-final", "cora-ood"])
    files = sorted(out.rglob("seed*.json"))
    # select: 2 settings x 1 seed; final and ood: plain on seeds 0, 1 and their members 1000, 1001; svgd on 0, 1
    assert len(files) == 2 + 2 * 6
    # every arm's own run of each seed first, then the ensemble's other members
    assert [seed for *_, seed in study.jobs(out, "cora-final")] == [0, 0, 1, 1, 1000, 1001]
    stamps = {p: p.stat().st_mtime_ns for p in files}
    study.run(out, ["cora-final", "cora-ood"], reverse=True)  # resumes: nothing is trained again
    assert {p: p.stat().st_mtime_ns for p in out.rglob("seed*.json")} == stamps

    ood = json.loads((out / "cora" / "ood" / slug("ma [epochs=2]") / "seed0.json").read_text())
    y = torch.tensor(ood["test"]["y"])
    assert len(ood["val"]["logits"][0]) == 5 and len(ood["test"]["y"]) == 1000
    assert torch.equal(torch.tensor(ood["test"]["ood"]), y == -1) and 0 < int((y == -1).sum()) < 1000

    results = study.collect(out, plots=True)
    pngs = sorted(p.name for p in tmp_path.glob("*.png"))  # beside the results file: every arm, both seeds pooled
    assert len(pngs) == 6 and "cora-entropy-cdf.png" in pngs and "cora-reliability-ensemble_of_5_plain.png" in pngs
    assert all((tmp_path / n).read_bytes()[:4] == b"\x89PNG" for n in pngs)
    cora = results["cora"]
    assert set(cora["final"]) == set(study.ARMS) | {study.ENSEMBLE}
    assert all(sorted(map(int, v)) == [0, 1] for v in cora["final"].values())
    # the ensemble of seed 0: the mean of the probabilities of runs 0 and 1000, scored by hand
    runs = [json.loads((out / "cora" / "id" / slug("ma [epochs=2]") / f"seed{s}.json").read_text()) for s in (0, 1000)]
    probs = ensemble_probabilities([class_probabilities(torch.tensor(r["test"]["logits"])) for r in runs])
    ece = 100 * expected_calibration_error(probs, torch.tensor(runs[0]["test"]["y"]), 15)
    assert cora["final"][study.ENSEMBLE][0]["ece"] == pytest.approx(ece, abs=1e-3)
    assert cora["final"]["plain"][0]["temperature"] == 1.0 and cora["final"]["plain+TS"][0]["temperature"] != 1.0
    assert all(0 <= r["auroc"] <= 100 for v in cora["ood"].values() for r in v.values())

    page = (Path(study.REPO) / "docs" / "calibration.md").read_text()
    text = study.render(page, results)
    assert "| ensemble of 5 plain | `ma [epochs=2]` | 2 |" in text and "| svgd − plain |" in text
    assert "**Cora, calibration** (2 paired seeds, complete): SVGD − plain ECE" in text
    assert "**chameleon_filtered, calibration**: pending" in text
    assert "![svgd+TS](calibration/cora-reliability-svgd_TS.png)" in text and "cora-entropy-cdf.png" in text
