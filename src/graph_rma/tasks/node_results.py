"""Reading a node study's results: the metric keys of earlier versions (:func:`upgrade_metrics`), one summary
row per variant (:func:`summarize`: mean and std over seeds, the paired difference against the first variant) and
its markdown table (:func:`format_table`).
"""

from __future__ import annotations

from typing import Any, Dict, List, Sequence

from ..engine import format_spread, mean_std, paired_comparison

#: Keys of runs and summary rows saved by graph_rma 0.1.0 (``test_acc`` held ROC AUC on binary graphs).
OLD_METRIC_KEYS = {
    old: new
    for o, n in (("test_acc", "test_metric"), ("val_acc", "val_metric"))
    for old, new in ((o, n), (f"{o}_mean", f"{n}_mean"), (f"{o}_std", f"{n}_std"))
}


def upgrade_metrics(entry: Dict[str, Any]) -> Dict[str, Any]:
    """A run's ``metrics`` or a summary row with the keys of graph_rma 0.1.0 renamed (:data:`OLD_METRIC_KEYS`:
    ``test_acc`` -> ``test_metric``, ``val_acc_mean`` -> ``val_metric_mean``, ...), order kept; a new dict. Every
    reader of saved node runs (resume, :func:`summarize`, :func:`format_table`, :func:`plot`) goes through it."""
    return {OLD_METRIC_KEYS.get(k, k): v for k, v in entry.items()}


def summarize(results: List[Dict[str, Any]], variants: Sequence[str]) -> List[Dict[str, Any]]:
    """One row per variant: mean and std over seeds (``std`` is the sample standard deviation), and for every variant
    after the first the paired difference of the test metric against the first (``paired_*``: mean and standard error
    in points, wins/ties/losses over the seeds both ran; :func:`graph_rma.engine.paired_comparison`)."""
    rows = []
    results = [{**r, "metrics": upgrade_metrics(r["metrics"])} for r in results]  # runs saved with the old keys too
    base = {r["seed"]: 100 * r["metrics"]["test_metric"] for r in results if variants and r["variant"] == variants[0]}
    for spec in variants:
        runs = [r for r in results if r["variant"] == spec]
        if not runs:
            continue
        row: Dict[str, Any] = dict(variant=spec, seeds=len(runs))
        for key, scale in (("test_metric", 100), ("val_metric", 100), ("dist", 1), ("epochs", 1), ("sec_per_epoch", 1)):
            values = [r["metrics"][key] * scale for r in runs if r["metrics"].get(key) is not None]
            m, s = mean_std(values) if values else (None, None)  # dist: None for single-head models
            row[f"{key}_mean"], row[f"{key}_std"] = m, s
        if spec != variants[0]:
            pc = paired_comparison(base, {r["seed"]: 100 * r["metrics"]["test_metric"] for r in runs})
            row.update({f"paired_{k}": v for k, v in pc.items()})
        rows.append(row)
    return rows


METRIC_LABELS = {"accuracy": "acc", "roc_auc": "ROC AUC"}


def _spread(mean: float, std: float, seeds: int, digits: int) -> str:
    """``mean ± std`` over the seeds; ``mean`` alone for one seed (a single run has no spread to state)."""
    return format_spread(mean, std, seeds, digits)


def format_table(rows: List[Dict[str, Any]], metric: str = "accuracy") -> str:
    """A markdown table of :func:`summarize`'s rows; the paired column compares each variant with the first row.
    A row of one seed states its values without a spread."""
    m = METRIC_LABELS.get(metric, metric)
    lines = [
        f"| variant | seeds | test {m} (%) | paired diff vs first (W/T/L) | val {m} (%) | Dist | epochs | s/epoch |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in map(upgrade_metrics, rows):
        paired = "—"
        if "paired_mean" in r and r["paired_n"] > 1:
            paired = (
                f"{r['paired_mean']:+.2f} ± {r['paired_se']:.2f} "
                f"({r['paired_wins']}/{r['paired_ties']}/{r['paired_losses']})"
            )
        n = r["seeds"]
        dist = "—" if r["dist_mean"] is None else _spread(r["dist_mean"], r["dist_std"], n, 2)
        lines.append(
            f"| `{r['variant']}` | {n} | {_spread(r['test_metric_mean'], r['test_metric_std'], n, 1)} | {paired} | "
            f"{_spread(r['val_metric_mean'], r['val_metric_std'], n, 1)} | {dist} | "
            f"{r['epochs_mean']:.0f} | {r['sec_per_epoch_mean']:.3f} |"
        )
    return "\n".join(lines)
