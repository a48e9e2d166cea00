"""``graph-rma report``: which dataset each checkpoint is of (compared only within one, named in every plot title),
and the one-line answers to a folder or an unfinished run's save given as ``--checkpoint``."""

import pytest
from test_diagnostics_report import train_standin

import graph_rma
import graph_rma.diagnostics.plots as plots
from graph_rma.cli import main as cli_main
from graph_rma.engine import load_checkpoint, save_checkpoint
from graph_rma.tasks.report import compare_reports, report_checkpoint

pytest.importorskip("matplotlib")


@pytest.fixture(scope="module")
def two(tmp_path_factory):
    root = tmp_path_factory.mktemp("two")
    toy, _ = train_standin(root / "toy.pt")
    other = load_checkpoint(toy)
    other["dataset"] = "chameleon"
    return toy, save_checkpoint(root / "cham.pt", other)


def test_checkpoints_of_different_datasets_are_not_compared(two, tmp_path, capsys):
    toy, cham = two
    assert cli_main(["report", "--checkpoint", str(toy), str(cham), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the checkpoints are of different datasets (toy: toy, cham: chameleon)" in err
    assert not (tmp_path / "r").exists()  # refused before any report was computed
    summaries = {p.stem: report_checkpoint(p, tmp_path / p.stem, plots=False) for p in two}
    with pytest.raises(graph_rma.GraphRMAError, match="different datasets"):
        compare_reports(summaries, tmp_path / "cmp", plots=False)


def test_every_plot_title_names_the_dataset(two, tmp_path, monkeypatch):
    titles = []

    def keep(fig, path):
        texts = [ax.get_title() for ax in fig.axes] + ([fig._suptitle.get_text()] if fig._suptitle else [])
        titles.append((path.name, " ".join(texts)))
        return path

    monkeypatch.setattr(plots, "_save", keep)
    toy, _ = two
    summary = report_checkpoint(toy, tmp_path / "one")
    compare_reports({"a": summary, "b": dict(summary, variant="svgd")}, tmp_path / "cmp")
    names = [name for name, _ in titles]
    assert set(names) == {
        "reliability.png",
        "head_importance.png",
        "head_entropy.png",
        "entropy_cdf.png",
        "head_importance_compare.png",
    }
    assert all("toy" in text for _, text in titles), titles


def test_a_folder_or_an_unfinished_save_is_named(two, tmp_path, capsys):
    toy, _ = two
    assert cli_main(["report", "--checkpoint", str(toy.parent)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{toy.parent} is a folder; give a checkpoint file in it (it holds cham.pt" in err
    partial = save_checkpoint(tmp_path / "svgd_seed0.partial.pt", {"model": {}, "epoch": 3})
    assert cli_main(["report", "--checkpoint", str(partial)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "an unfinished run's save" in err and "(svgd_seed0.pt)" in err
