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


# ---- issue 33 item 7: one error policy, one classifier for the commands and for one_line_errors ----------------
def _raise_in(where: str, code: str, **names):
    """Run ``code`` as if it were a module of ``where`` ("package": a file in graph_rma/; else the user's own file)
    and return the exception it raises, with its traceback."""
    import graph_rma

    folder = os.path.dirname(graph_rma.__file__) if where == "package" else os.path.dirname(__file__)
    try:
        exec(compile(code, os.path.join(folder, "_simulated.py"), "exec"), dict(names))
    except Exception as exc:
        return exc
    raise AssertionError("no exception")


def test_the_classifier_shortens_only_the_mistakes_the_package_raised(tmp_path):
    import json

    from graph_rma import _errors, parse_variant
    from graph_rma.data.root import DataNotFoundError

    with pytest.raises(ValueError) as info:
        parse_variant("bogus")
    assert isinstance(info.value, _errors.GraphRMAError)  # the package's bad-input type, a ValueError for old callers
    assert _errors.classify(info.value) == (2, str(info.value))  # one line, exit 2
    assert _errors.classify(_raise_in("user", "raise ValueError('mine')")) is None  # the user's: traceback
    assert _errors.classify(_raise_in("user", "json.loads('{')", json=json)) is None  # a library the user called
    # the type decides, not where it was raised: a plain ValueError inside the package's code is a bug (traceback);
    # the package names a bad file as its own type (a config file that is not JSON)
    assert _errors.classify(_raise_in("package", "raise ValueError('a bug')")) is None
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(_errors.GraphRMAError, match="bad.json: not a JSON file") as info:
        training.read_json(tmp_path / "bad.json")
    assert _errors.classify(info.value)[0] == 2
    # the user's callback raising inside the package's code is the user's
    call = _raise_in("package", "def call(f):\n    f()\ncall(f)", f=lambda: (_ for _ in ()).throw(ValueError("cb")))
    assert isinstance(call, ValueError) and _errors.classify(call) is None
    # a bug in the package (KeyError, IndexError, a TypeError) keeps its traceback; a missing resource does not
    assert _errors.classify(_raise_in("package", "raise KeyError('a bug')")) is None
    assert _errors.classify(_raise_in("package", "raise TypeError('a bug')")) is None
    assert _errors.classify(_raise_in("package", "raise LookupError('no punkt\\nmore')")) == (1, "no punkt")
    assert _errors.classify(_raise_in("user", "raise LookupError('no punkt')")) is None
    # the package's exception type is one line wherever it is raised, and still a ValueError for old callers
    from graph_rma import GraphRMAError

    refused = _raise_in("user", "raise GraphRMAError('no such head: 9')", GraphRMAError=GraphRMAError)
    assert isinstance(refused, ValueError) and _errors.classify(refused) == (2, "no such head: 9")
    # a file-system failure on a named path: one line if the package raised it, the user's own open() a traceback
    missing = str(tmp_path / "none.txt")
    assert _errors.classify(_raise_in("package", f"open({missing!r})")) == (1, f"No such file or directory: {missing}")
    assert _errors.classify(_raise_in("user", f"open({missing!r})")) is None
    # the package's own error types are one line wherever they were raised (a test's offline download, a stub)
    assert _errors.classify(_raise_in("user", "raise E('offline')", E=DataNotFoundError)) == (1, "offline")
    assert _errors.classify(_raise_in("user", "raise E('--x')", E=_errors.UsageError)) == (2, "--x")
    assert _errors.classify(KeyboardInterrupt()) is None


def test_one_line_errors_shows_the_scripts_own_tracebacks(monkeypatch, capsys):
    """Issue 33 item 7: the helper for scripts used to print one line for every ValueError, the script's own too
    (hiding its traceback); now only for what the package raised."""
    import sys

    from graph_rma import parse_variant

    monkeypatch.setattr(sys, "excepthook", sys.__excepthook__)
    training.one_line_errors("script")
    hook = sys.excepthook
    assert hook is not sys.__excepthook__
    with pytest.raises(ValueError) as info:
        parse_variant("bogus")
    hook(type(info.value), info.value, info.value.__traceback__)
    err = capsys.readouterr().err
    assert err.startswith("script: ") and "bogus" in err and err.count("\n") == 1 and "Traceback" not in err
    mine = _raise_in("user", "raise ValueError('a mistake in my own script')")
    hook(type(mine), mine, mine.__traceback__)
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "ValueError: a mistake in my own script" in err


def test_the_commands_use_the_same_classifier(capsys):
    from graph_rma.cli._common import UsageError, run_command

    assert UsageError is __import__("graph_rma._errors", fromlist=["UsageError"]).UsageError
    assert run_command("graph-rma x", lambda: __import__("graph_rma").parse_variant("bogus")) == 2
    assert capsys.readouterr().err.startswith("graph-rma x: ")
    mine = _raise_in("user", "raise ValueError('mine')")
    with pytest.raises(ValueError, match="mine"):  # not raised by the package: a bug, with its traceback
        run_command("graph-rma x", lambda: (_ for _ in ()).throw(mine))
    bug = _raise_in("package", "raise KeyError('a bug')")
    with pytest.raises(KeyError):
        run_command("graph-rma x", lambda: (_ for _ in ()).throw(bug))


def test_a_byte_order_mark_is_not_text(tmp_path):
    from graph_rma.engine import read_json
    from graph_rma.engine.files import read_lines

    path = tmp_path / "hyp.txt"
    path.write_bytes("\ufeffthe cat sat\nline two\n".encode("utf-8"))
    assert read_lines(path) == ["the cat sat", "line two"]
    (tmp_path / "a.json").write_bytes('\ufeff{"a": 1}'.encode("utf-8"))
    assert read_json(tmp_path / "a.json") == {"a": 1}


def test_a_deferred_interrupt_is_held_until_asked_then_raised_and_the_handler_restored():
    import signal
    import threading

    before = signal.getsignal(signal.SIGINT)
    seen = []
    with pytest.raises(KeyboardInterrupt):
        with training.deferred_interrupt():
            assert not training.interrupt_requested()
            signal.raise_signal(signal.SIGINT)  # held: the block goes on
            seen.append(training.interrupt_requested())
            seen.append("after the signal")
    assert seen == [True, "after the signal"] and signal.getsignal(signal.SIGINT) is before
    assert not training.interrupt_requested()  # outside a block
    with training.deferred_interrupt():  # no signal: nothing raised
        pass
    with pytest.raises(ValueError, match="own error"):  # the block's own error passes through, not the interrupt
        with training.deferred_interrupt():
            signal.raise_signal(signal.SIGINT)
            raise ValueError("own error")
    assert signal.getsignal(signal.SIGINT) is before
    term = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt):  # a SIGTERM (kill, a scheduler's stop) is held the same way
        with training.deferred_interrupt():
            signal.raise_signal(signal.SIGTERM)
            seen.append(training.interrupt_requested())
    assert seen[-1] is True and signal.getsignal(signal.SIGTERM) is term
    # outside the main thread no handler can be set: nothing is held, nothing fails
    out = []
    thread = threading.Thread(target=lambda: out.append(_block_in_a_thread(training)))
    thread.start()
    thread.join()
    assert out == [False]


def _block_in_a_thread(engine):
    with engine.deferred_interrupt():
        return engine.interrupt_requested()
