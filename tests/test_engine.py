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
