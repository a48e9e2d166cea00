r"""The training curves of a graph-to-text run (``curves.png`` in the run folder, redrawn after every epoch).

Per epoch (the ``history`` of ``train.json`` / ``checkpoint.pt``): the training and dev loss, with the epochs after
which the learning-rate schedule lowered the rate; and, for a run that keeps ``best.pt`` by dev BLEU, the dev BLEU.
The epoch ``best.pt`` holds (:func:`kept_epoch`) is marked on the curve that chose it. :func:`plot_runs` draws one
quantity of several runs on one axes (e.g. the dev BLEU of two variants' seeds), a colour per group. Needs
matplotlib (the ``plots`` extra); :func:`graph_rma.tasks.graph_to_text.train` skips the picture without it
(``train.json`` holds the same numbers).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..engine.figures import new_figure, save_png

__all__ = ["curves_figure", "kept_epoch", "lowered", "plot_curves", "plot_runs", "runs_figure"]


def kept_epoch(history: Sequence[Dict[str, Any]], keep: str = "dev_loss") -> Optional[int]:
    """The epoch ``best.pt`` holds under ``keep``: the lowest ``dev_loss`` or the highest ``dev_bleu``, a tie
    going to the earlier epoch (the rule of :func:`~graph_rma.tasks.graph_to_text.train`); ``None`` for an empty
    history."""
    if not history:
        return None
    if keep == "dev_bleu":
        best = max(history, key=lambda h: (h["dev_bleu"], -h["epoch"]))
    else:
        best = min(history, key=lambda h: (h["dev_loss"], h["epoch"]))
    return int(best["epoch"])


def lowered(history: Sequence[Dict[str, Any]]) -> List[int]:
    """The epochs that trained with a lower learning rate than the epoch before them (entries record ``lr``, the
    rate the epoch trained with, when the run has a schedule)."""
    return [b["epoch"] for a, b in zip(history, history[1:]) if "lr" in a and "lr" in b and b["lr"] < a["lr"]]


def curves_figure(history: Sequence[Dict[str, Any]], keep: str = "dev_loss", name: Optional[str] = None):
    """The picture as a matplotlib ``Figure``: the losses on the first axes, the dev BLEU (when the history has it)
    on a second; the kept epoch marked with a star; titled with the run's ``name`` and ``keep``. Raises
    :class:`~graph_rma.engine.optional.MissingExtraError` without matplotlib."""
    epochs = [h["epoch"] for h in history]
    bleu = all("dev_bleu" in h for h in history) and bool(history)
    fig = _figure(5.6 if bleu else 3.4)
    axes = fig.subplots(2 if bleu else 1, 1, sharex=True, squeeze=False)[:, 0]
    loss = axes[0]
    loss.plot(epochs, [h["train_loss"] for h in history], "o-", ms=3, label="training loss")
    loss.plot(epochs, [h["dev_loss"] for h in history], "o-", ms=3, label="dev loss")
    loss.set_ylabel("loss (per token)")
    if bleu:
        axes[1].plot(epochs, [h["dev_bleu"] for h in history], "o-", ms=3, color="tab:green", label="dev BLEU")
        axes[1].set_ylabel("dev BLEU")
    kept = kept_epoch(history, keep)
    if kept is not None:
        ax, key = (axes[1], "dev_bleu") if keep == "dev_bleu" and bleu else (loss, "dev_loss")
        ax.plot(
            [kept], [history[epochs.index(kept)][key]], "*", ms=14, color="tab:red", label=f"best.pt (epoch {kept})"
        )
    for k, epoch in enumerate(lowered(history)):
        for ax in axes:
            ax.axvline(
                epoch - 0.5, ls=":", color="grey", label="learning rate lowered" if k == 0 and ax is loss else None
            )
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    _epoch_axis(axes[-1])
    loss.set_title(f"{name + ': ' if name else ''}best.pt kept by {keep}", fontsize=10)
    fig.tight_layout()
    return fig


def plot_curves(
    history: Sequence[Dict[str, Any]], path: Path, keep: str = "dev_loss", name: Optional[str] = None
) -> Path:
    """Write :func:`curves_figure` to ``path`` (a PNG); returns ``path``."""
    return _save(curves_figure(history, keep, name), path)


#: The names :func:`runs_figure` gives the quantities of a history on its axis.
LABELS = {"dev_bleu": "dev BLEU", "dev_loss": "dev loss", "train_loss": "training loss"}
STYLES = ("-", "--", ":", "-.")


def runs_figure(runs: Sequence[Tuple[str, str, Sequence[Dict[str, Any]]]], metric: str = "dev_bleu"):
    """``metric`` per epoch of several runs on one axes; ``runs``: ``(label, group, history)`` each, a colour per
    group (in order of appearance) and a line style per run within its group."""
    ax = _figure(3.8).add_subplot()
    fig = ax.figure
    groups: Dict[str, int] = {}
    seen: Dict[str, int] = {}
    for label, group, history in runs:
        colour = groups.setdefault(group, len(groups))
        style = STYLES[seen.get(group, 0) % len(STYLES)]
        seen[group] = seen.get(group, 0) + 1
        ax.plot([h["epoch"] for h in history], [h[metric] for h in history], style, color=f"C{colour}", label=label)
    _epoch_axis(ax)
    ax.set_ylabel(LABELS.get(metric, metric))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, ncol=2)
    fig.tight_layout()
    return fig


def plot_runs(runs: Sequence[Tuple[str, str, Sequence[Dict[str, Any]]]], path: Path, metric: str = "dev_bleu") -> Path:
    """Write :func:`runs_figure` to ``path`` (a PNG); returns ``path``."""
    return _save(runs_figure(runs, metric), path)


def _figure(height: float):
    """An empty matplotlib ``Figure`` 6.4 inches wide (:func:`~graph_rma.engine.figures.new_figure`)."""
    return new_figure(6.4, height, "the training curves")


def _epoch_axis(ax) -> None:
    """Label ``ax``'s x axis "epoch" with ticks on whole epochs only."""
    from matplotlib.ticker import MaxNLocator

    ax.set_xlabel("epoch")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def _save(fig, path: Path) -> Path:
    return save_png(fig, path, dpi=110)
