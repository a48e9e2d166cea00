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
    with pytest.warns(RuntimeWarning, match="without a checksum"):
        with pytest.raises(training.CheckpointError, match=r"evil\.pt: .*(weights_only|Unsupported global)"):
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
    assert training.mean_std([1.0, 3.0]) == (2.0, 2**0.5)


def test_output_files_follow_the_umask(tmp_path):
    old = os.umask(0o022)
    try:
        paths = [
            training.write_json(tmp_path / "r.json", {"a": 1}),
            training.write_csv(tmp_path / "r.csv", [{"a": 1}]),
            training.atomic_write_text(tmp_path / "t.txt", "x"),
            training.save_checkpoint(tmp_path / "c.pt", {"w": torch.zeros(2)}),
        ]
        os.umask(0o077)
        private = training.atomic_write_text(tmp_path / "p.txt", "x")
    finally:
        os.umask(old)
    assert [oct(p.stat().st_mode & 0o777) for p in paths] == ["0o644"] * 4
    assert oct(private.stat().st_mode & 0o777) == "0o600"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.pt", "p.txt", "r.csv", "r.json", "t.txt"]


def _tensor_payload_offset(blob: bytes, values: torch.Tensor) -> int:
    """Where the bytes of ``values`` (a tensor with distinctive content) start inside a saved checkpoint."""
    raw = values.numpy().tobytes()
    at = blob.find(raw)
    assert at > 0 and blob.find(raw, at + 1) == -1
    return at


def test_checkpoint_bit_flip_inside_a_tensor_is_refused(tmp_path):
    w = torch.arange(1.0, 65.0)
    path = training.save_checkpoint(tmp_path / "best.pt", {"model": {"w": w}, "epoch": 3})
    blob = bytearray(path.read_bytes())
    at = _tensor_payload_offset(bytes(blob), w)
    blob[at + 17] ^= 0x04  # one bit of one float: torch.load alone would load a changed weight
    path.write_bytes(bytes(blob))
    with pytest.raises(training.CheckpointError, match=rf"^{path}: corrupt checkpoint \(sha256 [0-9a-f]{{64}}, "):
        training.load_checkpoint(path)


def test_truncated_checkpoint_is_refused(tmp_path):
    path = training.save_checkpoint(tmp_path / "checkpoint.pt", {"model": {"w": torch.randn(100)}})
    blob = path.read_bytes()
    for cut in (len(blob) - 1, len(blob) // 2, 30):
        path.write_bytes(blob[:cut])
        with pytest.raises(
            training.CheckpointError,
            match=rf"^{path}: (truncated or corrupt checkpoint|corrupt "
            r"checkpoint header)",
        ):
            training.load_checkpoint(path)


def test_legacy_checkpoint_loads_with_a_warning(tmp_path):
    path = tmp_path / "old.pt"
    torch.save({"w": torch.arange(3.0)}, path)
    with pytest.warns(RuntimeWarning, match=r"old\.pt: checkpoint without a checksum"):
        assert torch.equal(training.load_checkpoint(path)["w"], torch.arange(3.0))


def test_check_resume_refuses_other_settings_and_reports_allowed_changes():
    saved = {"hidden": 32, "lr": 0.003, "epochs": 8, "beam": 2}
    assert training.check_resume(saved, dict(saved)) == []
    assert training.check_resume(saved, dict(saved, epochs=12, beam=4), may_change=("epochs", "beam")) == [
        "beam: 2 -> 4",
        "epochs: 8 -> 12",
    ]
    with pytest.raises(training.ResumeMismatchError) as err:
        training.check_resume(saved, {"hidden": 64, "lr": 0.003, "epochs": 12, "new": 1}, where="runs/x/checkpoint.pt")
    assert [d[0] for d in err.value.differences] == ["beam", "hidden", "new"]  # epochs may change: not refused
    assert err.value.differences[1] == ("hidden", 32, 64)
    assert str(err.value) == (
        "runs/x/checkpoint.pt was trained with other settings (beam 2 -> (unset), hidden 32 -> "
        "64, new (unset) -> 1); use the same settings to resume it, or another output folder "
        "for a new run"
    )
    assert isinstance(err.value, ValueError)
