import os

import pytest
import torch

from graph_rma import engine as training


def test_checkpoint_round_trip_weights_only(tmp_path):
    state = {"model": {"w": torch.randn(3)}, "epoch": 4, "rng": training.rng_state(), "name": "x"}
    path = training.save_checkpoint(tmp_path / "a" / "ckpt.pt", state)
    loaded = training.load_checkpoint(path)
    assert torch.equal(loaded["model"]["w"], state["model"]["w"]) and loaded["epoch"] == 4
    assert not [p for p in os.listdir(path.parent) if p.endswith(".tmp")]


class Evil:
    pass


def test_checkpoint_refuses_arbitrary_objects(tmp_path):
    path = tmp_path / "evil.pt"
    torch.save({"obj": Evil()}, path)
    with pytest.raises(Exception, match="weights_only|Unsupported global"):
        training.load_checkpoint(path)


def test_rng_state_restores_sequences():
    training.seed_everything(3)
    state = training.rng_state()
    a = (torch.rand(3), __import__("random").random())
    training.set_rng_state(state)
    b = (torch.rand(3), __import__("random").random())
    assert torch.equal(a[0], b[0]) and a[1] == b[1]


def test_atomic_json_csv(tmp_path):
    training.write_json(tmp_path / "r.json", {"acc": 0.5})
    assert training.read_json(tmp_path / "r.json") == {"acc": 0.5}
    training.write_csv(tmp_path / "r.csv", [{"a": 1, "b": 2}, {"a": 3, "c": 4}])
    assert (tmp_path / "r.csv").read_text().splitlines() == ["a,b,c", "1,2,", "3,,4"]


def test_paired_comparison_by_hand():
    a = {0: 80.0, 1: 82.0, 2: 81.0, 3: 79.0, 9: 50.0}
    b = {0: 81.0, 1: 82.0, 2: 84.0, 3: 78.0}  # seed 9 only in a: not compared
    pc = training.paired_comparison(a, b)
    # d = [1, 0, 3, -1]: mean 0.75, sd = sqrt(((.25)^2 + (.75)^2 + (2.25)^2 + (1.75)^2) / 3) = sqrt(8.75 / 3)
    assert pc["n"] == 4 and pc["mean"] == 0.75
    assert abs(pc["se"] - (8.75 / 3) ** 0.5 / 2) < 1e-12 and abs(pc["z"] - 0.75 / pc["se"]) < 1e-12
    assert (pc["wins"], pc["ties"], pc["losses"]) == (2, 1, 1)
    assert training.paired_comparison({}, {1: 2.0})["n"] == 0
    assert training.mean_std([1.0, 3.0]) == (2.0, 2 ** 0.5)
