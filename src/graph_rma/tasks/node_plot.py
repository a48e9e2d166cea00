"""The accuracy plot of a node study (``accuracy.png``: each seed's test and validation metric per variant, with
the mean +- std). Needs matplotlib (the ``plots`` extra).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Sequence

from ..engine import mean_std
from ..engine.figures import new_figure, save_png
from ..variants import parse_variant
from .node_results import upgrade_metrics


def plot(
    results: List[Dict[str, Any]],
    variants: Sequence[str],
    path: Path,
    title: str = "GAT on Cora",
    metric: str = "accuracy",
) -> Path:
    """Accuracy per variant: each seed's test and validation accuracy, with the mean +- std (a PNG at ``path``).

    Needs matplotlib (the ``plots`` extra); raises :class:`~graph_rma.engine.optional.MissingExtraError` without it.
    """
    fig = new_figure(max(4.0, 1.4 * len(variants) + 1.5), 3.6, "the accuracy plot")
    ax = fig.add_subplot()
    for k, spec in enumerate(variants):
        for offset, key, color in ((-0.12, "test_metric", "tab:blue"), (0.12, "val_metric", "tab:orange")):
            vals = [100 * upgrade_metrics(r["metrics"])[key] for r in results if r["variant"] == spec]
            if not vals:
                continue
            m, s = mean_std(vals)
            ax.scatter([k + offset] * len(vals), vals, s=10, color=color, alpha=0.5)
            ax.errorbar(
                [k + offset],
                [m],
                yerr=[s],
                fmt="o",
                color=color,
                capsize=4,
                label=("test" if key == "test_metric" else "validation") if k == 0 else None,
            )
    ax.set_xticks(range(len(variants)))
    names = [parse_variant(v).name for v in variants]
    if len(set(names)) < len(names):  # two configurations of one family: show the specs
        names = [v.replace(",", ",\n") for v in variants]
    ax.set_xticklabels(names, rotation=20, fontsize=8)
    label = "ROC AUC" if metric == "roc_auc" else "accuracy"
    ax.set_ylabel(f"{label} (%)")
    ax.set_title(f"{title}: {label} per variant\n(points: seeds; bars: mean ± std)", fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(loc="lower right")
    fig.tight_layout()
    return save_png(fig, path, dpi=120)
