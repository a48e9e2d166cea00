"""graph_rma.tasks.curves: the kept epoch and the lowered rates read from a hand-made history, the picture drawing
exactly those numbers, and the trainer writing curves.png (or, without matplotlib, nothing and no error)."""

from pathlib import Path

import pytest

from graph_rma.data.agenda import load_agenda
from graph_rma.engine import load_checkpoint
from graph_rma.engine.optional import MissingExtraError
from graph_rma.tasks import curves
from graph_rma.tasks import graph_to_text as g2t

pytest.importorskip("matplotlib")

FIXTURE = Path(__file__).resolve().parents[1] / "datasets" / "fixtures" / "agenda_tiny"
HISTORY = [
    {"epoch": 1, "train_loss": 3.0, "dev_loss": 2.0, "lr": 1e-3, "dev_bleu": 40.0},
    {"epoch": 2, "train_loss": 2.0, "dev_loss": 1.5, "lr": 1e-3, "dev_bleu": 45.0},
    {"epoch": 3, "train_loss": 1.5, "dev_loss": 1.5, "lr": 5e-4, "dev_bleu": 50.0},
    {"epoch": 4, "train_loss": 1.2, "dev_loss": 1.6, "lr": 5e-4, "dev_bleu": 50.0},
    {"epoch": 5, "train_loss": 1.1, "dev_loss": 1.7, "lr": 2.5e-4, "dev_bleu": 49.0},
]


def test_kept_epoch_follows_the_trainers_rule_ties_going_to_the_earlier_epoch():
    assert curves.kept_epoch(HISTORY, "dev_loss") == 2  # 1.5 at epochs 2 and 3
    assert curves.kept_epoch(HISTORY, "dev_bleu") == 3  # 50.0 at epochs 3 and 4
    assert curves.kept_epoch([], "dev_bleu") is None


def test_lowered_lists_the_epochs_that_trained_with_a_lower_rate():
    assert curves.lowered(HISTORY) == [3, 5]
    assert curves.lowered([{k: v for k, v in h.items() if k != "lr"} for h in HISTORY]) == []


def test_the_figure_draws_the_history_and_marks_the_kept_epoch():
    fig = curves.curves_figure(HISTORY, keep="dev_bleu", name="run")
    loss, bleu = fig.axes
    assert loss.get_title() == "run: best.pt kept by dev_bleu"
    lines = {line.get_label(): line for ax in fig.axes for line in ax.get_lines()}
    assert list(lines["training loss"].get_ydata()) == [3.0, 2.0, 1.5, 1.2, 1.1]
    assert list(lines["dev loss"].get_ydata()) == [2.0, 1.5, 1.5, 1.6, 1.7]
    assert list(lines["dev BLEU"].get_ydata()) == [40.0, 45.0, 50.0, 50.0, 49.0]
    star = lines["best.pt (epoch 3)"]
    assert star in bleu.get_lines() and (list(star.get_xdata()), list(star.get_ydata())) == ([3], [50.0])
    # a line between the epochs before each lowered rate, on both axes
    vertical = [line.get_xdata()[0] for line in loss.get_lines() if line.get_linestyle() == ":"]
    assert vertical == [2.5, 4.5] and len([x for x in bleu.get_lines() if x.get_linestyle() == ":"]) == 2
    # kept by dev loss and no BLEU in the history: one axes, the star on the dev loss
    plain = [{k: v for k, v in h.items() if k != "dev_bleu"} for h in HISTORY]
    (only,) = curves.curves_figure(plain).axes
    star = next(line for line in only.get_lines() if line.get_label().startswith("best.pt"))
    assert (list(star.get_xdata()), list(star.get_ydata())) == ([2], [1.5])


def test_several_runs_share_one_axes_a_colour_per_group_a_style_per_run(tmp_path):
    later = [dict(h, dev_bleu=h["dev_bleu"] + 1) for h in HISTORY]
    runs = [("plain s0", "plain", HISTORY), ("svgd s0", "svgd", later), ("plain s1", "plain", later)]
    (ax,) = curves.runs_figure(runs).axes
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert list(lines["svgd s0"].get_ydata()) == [41.0, 46.0, 51.0, 51.0, 50.0]
    assert list(lines["plain s0"].get_xdata()) == [1, 2, 3, 4, 5] and ax.get_ylabel() == "dev BLEU"
    colour = {k: line.get_color() for k, line in lines.items()}
    assert colour["plain s0"] == colour["plain s1"] != colour["svgd s0"]
    assert lines["plain s0"].get_linestyle() != lines["plain s1"].get_linestyle()
    assert curves.plot_runs(runs, tmp_path / "runs.png", "dev_loss").read_bytes()[:4] == b"\x89PNG"


def test_the_epoch_axis_has_ticks_on_whole_epochs_only():
    for ax in (curves.runs_figure([("a", "a", HISTORY)]).axes[0], curves.curves_figure(HISTORY).axes[-1]):
        ticks = ax.get_xticks()
        assert ax.get_xlabel() == "epoch" and len(ticks) >= 2 and all(t == int(t) for t in ticks)


SMALL = dict(
    hidden=16, layers=1, heads=2, dropout=0.1, attention_dropout=0.1, decoder_heads=2, epochs=2, batch_size=4,
    optimizer="adam", lr=3e-3, momentum=0.9, clip=1.0, min_freq=1, max_target_len=None, beam=1, max_len=10,
    length_penalty=1.0,
)  # fmt: skip


def test_training_draws_curves_png_after_every_epoch_and_goes_on_without_matplotlib(tmp_path, monkeypatch):
    splits = load_agenda(FIXTURE)
    drawn = []
    real = curves.plot_curves
    monkeypatch.setattr(g2t, "plot_curves", lambda h, path, **kw: drawn.append(len(h)) or real(h, path, **kw))
    g2t.train(SMALL, tmp_path / "run", splits, seed=0, progress=False)
    png = tmp_path / "run" / "curves.png"
    assert drawn == [1, 2] and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    kept = load_checkpoint(tmp_path / "run" / "best.pt")["epoch"]
    assert curves.kept_epoch(load_checkpoint(tmp_path / "run" / "checkpoint.pt")["history"]) == kept

    def missing(*args, **kwargs):
        raise MissingExtraError("the training curves needs matplotlib", "matplotlib", "plots")

    monkeypatch.setattr(g2t, "plot_curves", missing)
    summary = g2t.train(dict(SMALL, epochs=1), tmp_path / "bare", splits, seed=0, progress=False)
    assert len(summary["history"]) == 1 and not (tmp_path / "bare" / "curves.png").exists()
