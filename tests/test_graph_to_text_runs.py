"""Which task and dataset a graph-to-text run or checkpoint belongs to: recorded when it trains, checked by every
``graph-rma agenda`` / ``graph-rma webnlg`` command before it decodes or writes (tiny fixtures)."""

import json
from pathlib import Path

import pytest
from conftest import needs_punkt

from graph_rma.cli import agenda as agenda_cli
from graph_rma.cli import webnlg as webnlg_cli
from graph_rma.engine import load_checkpoint, save_checkpoint
from graph_rma.tasks import agenda, webnlg

FIXTURES = Path(__file__).resolve().parents[1] / "datasets" / "fixtures"
pytestmark = needs_punkt  # WebNLG's entries are tokenised with NLTK's punkt
TINY = dict(hidden=16, layers=1, heads=2, decoder_heads=2, epochs=1, batch_size=3, min_freq=1, max_len=8, beam=1)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    agenda.train(dict(agenda.PRESETS["cpu"], **TINY), root / "agenda", FIXTURES / "agenda_tiny", progress=False)
    webnlg.train(dict(webnlg.PRESETS["cpu"], **TINY), root / "webnlg", FIXTURES / "webnlg_tiny", progress=False)
    return root


def one_line(capsys, status, main, argv):
    capsys.readouterr()
    assert main(argv) == status
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    return err


@pytest.mark.parametrize("dataset", ["agenda", "webnlg"])
def test_a_run_records_its_task_and_dataset(runs, dataset):
    saved = json.loads((runs / dataset / "config.json").read_text())
    assert (saved["task"], saved["dataset"]) == ("graph_to_text", dataset)
    for name in ("best.pt", "checkpoint.pt"):
        ck = load_checkpoint(runs / dataset / name)
        assert (ck["task"], ck["dataset"]) == ("graph_to_text", dataset)


def test_webnlg_evaluate_on_an_agenda_run_writes_nothing(runs, capsys):
    out = runs / "agenda"
    before = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    argv = ["evaluate", "--out", str(out), "--root", str(FIXTURES / "webnlg_tiny"), "--regenerate", "--quiet"]
    err = one_line(capsys, 2, webnlg_cli.main, argv + ["--meteor", "none"])
    assert f"{out / 'best.pt'} was trained on agenda, not webnlg; decode it with graph-rma agenda" in err
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == before


def test_agenda_evaluate_on_a_webnlg_run_is_one_line(runs, capsys):
    argv = ["evaluate", "--out", str(runs / "webnlg"), "--root", str(FIXTURES / "agenda_tiny"), "--quiet"]
    err = one_line(capsys, 2, agenda_cli.main, argv + ["--meteor", "none"])
    assert "was trained on webnlg, not agenda" in err


def test_a_checkpoint_of_the_other_dataset_into_its_own_folder_is_refused(runs, tmp_path, capsys):
    argv = ["generate", "--out", str(runs / "agenda"), "--checkpoint", str(runs / "webnlg" / "best.pt"), "--quiet"]
    assert "was trained on webnlg, not agenda" in one_line(capsys, 2, agenda_cli.main, argv)
    # a webnlg checkpoint decoded by webnlg into the agenda run's folder would overwrite it
    argv = ["generate", "--out", str(runs / "agenda"), "--checkpoint", str(runs / "webnlg" / "best.pt"), "--quiet"]
    err = one_line(capsys, 2, webnlg_cli.main, argv + ["--root", str(FIXTURES / "webnlg_tiny")])
    assert f"out: {runs / 'agenda'} is a agenda run; webnlg outputs would overwrite its files" in err


def test_a_node_checkpoint_or_a_text_file_is_named(runs, tmp_path, capsys):
    node = save_checkpoint(tmp_path / "node.pt", {"task": "node", "model_kwargs": {}, "model": {}})
    argv = ["generate", "--out", str(tmp_path / "new"), "--checkpoint", str(node), "--quiet"]
    err = one_line(capsys, 2, agenda_cli.main, argv)
    assert "is not a graph-to-text run's checkpoint; it is a 'node' checkpoint (use graph-rma node" in err
    text = tmp_path / "notes.txt"
    text.write_text("these are notes, not weights\n")
    argv = ["generate", "--out", str(tmp_path / "new"), "--checkpoint", str(text), "--quiet"]
    err = one_line(capsys, 2, agenda_cli.main, argv)
    assert "not a checkpoint (neither graph_rma's checkpoint format nor a file of torch.save)" in err


def test_a_run_saved_before_the_record_is_read_from_its_relations(runs, tmp_path):
    for dataset in ("agenda", "webnlg"):
        ck = load_checkpoint(runs / dataset / "best.pt")
        del ck["task"], ck["dataset"]
        old = save_checkpoint(tmp_path / f"{dataset}.pt", ck)
        assert agenda.g2m.checkpoint_dataset(load_checkpoint(old)) == dataset
        other = "webnlg" if dataset == "agenda" else "agenda"
        with pytest.raises(ValueError, match=f"was trained on {dataset}, not {other}"):
            agenda.g2m.check_run(tmp_path / "fresh", old, other)
