"""Pictures for the diagnostics, drawn with matplotlib's object API (``Figure`` + Agg canvas): no pyplot state,
no display needed, safe in scripts and tests. Every function writes a PNG to ``path`` and returns the path."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Mapping, Optional, Sequence, Union

import torch
from torch import Tensor

from .._errors import GraphRMAError
from ..engine.figures import new_figure, save_png
from .calibration import (
    CalibrationBins,
    calibration_bins,
    empirical_cdf,
    expected_calibration_error,
    overconfidence_error,
)

__all__ = [
    "reliability_diagram",
    "plot_head_importance",
    "plot_entropy_cdf",
    "plot_heads_sweep",
    "plot_head_entropy",
]

PathLike = Union[str, os.PathLike]


def _figure(width: float = 5.0, height: float = 4.0):
    return new_figure(width, height, "diagnostics plots")


def _save(fig, path: PathLike) -> Path:
    fig.tight_layout()
    return save_png(fig, path)


def _values(v) -> list:
    if isinstance(v, Tensor):
        return v.detach().flatten().tolist()
    return [float(x) for x in v]


def reliability_diagram(
    probs: Union[Tensor, CalibrationBins],
    labels: Optional[Tensor] = None,
    path: PathLike = "reliability.png",
    num_bins: int = 10,
    title: str = "Reliability diagram",
) -> Path:
    """Accuracy per confidence bin against the diagonal, with the gap to each bin's mean confidence shaded and
    ECE / OE in the legend. ``probs`` ``[n, K]`` with ``labels`` ``[n]``, or precomputed :class:`CalibrationBins`."""
    b = probs if isinstance(probs, CalibrationBins) else calibration_bins(probs, labels, num_bins)
    M = b.count.numel()
    width = 1.0 / M
    centers = ((b.edges[:-1] + b.edges[1:]) / 2).tolist()
    acc = b.accuracy.nan_to_num(0.0).tolist()
    conf = b.confidence.nan_to_num(0.0).tolist()
    filled = (b.count > 0).tolist()
    fig = _figure()
    ax = fig.add_subplot(1, 1, 1)
    ax.bar(centers, acc, width=width, edgecolor="black", color="tab:blue", label="accuracy")
    gap_bottom = [min(a, c) for a, c in zip(acc, conf)]
    gap_height = [abs(c - a) if f else 0.0 for a, c, f in zip(acc, conf, filled)]
    ax.bar(
        centers,
        gap_height,
        bottom=gap_bottom,
        width=width,
        edgecolor="red",
        color="tab:red",
        alpha=0.3,
        hatch="//",
        label="gap to confidence",
    )
    ax.plot([0, 1], [0, 1], "k--", lw=1, label="perfect calibration")
    ece, oe = expected_calibration_error(b), overconfidence_error(b)
    ax.set(
        xlim=(0, 1),
        ylim=(0, 1),
        xlabel="confidence",
        ylabel="accuracy",
        title=f"{title}\nECE={ece:.4f}  OE={oe:.4f}  (M={M}, n={b.num_samples})",
    )
    ax.legend(loc="upper left", fontsize=8)
    return _save(fig, path)


def plot_head_importance(
    drops: Mapping[str, Sequence[float]],
    path: PathLike = "head_importance.png",
    num_bins: int = 15,
    metric: str = "accuracy",
    title: Optional[str] = None,
) -> Path:
    """Histograms of per-head metric drops (one panel per model, e.g. ``{"plain": [...], "svgd": [...]}``),
    side by side on shared axes, as in the paper's Figure 2; ``title`` (e.g. the dataset) above the panels."""
    if not drops:
        raise GraphRMAError("drops: expected at least one model's list of drops")
    data = {k: _values(v) for k, v in drops.items()}
    allv = [x for v in data.values() for x in v]
    if not allv:
        raise GraphRMAError("drops: all lists are empty")
    lo, hi = min(allv), max(allv)
    if hi - lo < 1e-12:
        lo, hi = lo - 0.5e-2, hi + 0.5e-2
    edges = [lo + (hi - lo) * i / num_bins for i in range(num_bins + 1)]
    k = len(data)
    fig = _figure(4.0 * k, 3.5)
    first = None
    for i, (name, vals) in enumerate(data.items()):
        ax = fig.add_subplot(1, k, i + 1, sharey=first, sharex=first)
        first = first or ax
        ax.hist(vals, bins=edges, color=f"C{i}", edgecolor="black")
        ax.axvline(0.0, color="k", lw=0.8, ls="--")
        mean = sum(vals) / max(len(vals), 1)
        ax.set_title(f"{name}\n{len(vals)} heads, mean drop {mean:.4f}", fontsize=9)
        ax.set(xlabel=f"{metric} drop when masked", ylabel="heads" if i == 0 else None)
    if title:
        fig.suptitle(title, fontsize=10)
    return _save(fig, path)


def plot_entropy_cdf(
    entropies: Mapping[str, Tensor],
    path: PathLike = "entropy_cdf.png",
    title: str = "Predictive entropy, empirical CDF",
) -> Path:
    """Empirical CDFs of predictive entropy, one step curve per model (paper Appendix C.5)."""
    if not entropies:
        raise GraphRMAError("entropies: expected at least one model's entropies")
    fig = _figure()
    ax = fig.add_subplot(1, 1, 1)
    for name, ent in entropies.items():
        t, F = empirical_cdf(torch.as_tensor(ent).flatten())
        ax.step([float(t[0])] + t.tolist(), [0.0] + F.tolist(), where="post", label=name)
    ax.set(xlabel="entropy (nats)", ylabel="fraction of inputs with entropy <= x", ylim=(0, 1.02), title=title)
    ax.legend(fontsize=8)
    return _save(fig, path)


def plot_heads_sweep(
    results: Mapping[str, Mapping[str, Sequence[float]]],
    path: PathLike = "heads_sweep.png",
    ylabel: str = "test error",
) -> Path:
    """Error versus the number of heads M, one line per variant (paper Figure 3). Each value is a dict from
    :func:`graph_rma.diagnostics.heads_sweep` (``num_heads``, ``mean``, optional ``std``)."""
    if not results:
        raise GraphRMAError("results: expected at least one variant")
    fig = _figure()
    ax = fig.add_subplot(1, 1, 1)
    for name, r in results.items():
        if "num_heads" not in r or "mean" not in r:
            raise GraphRMAError(f"results[{name!r}]: expected keys 'num_heads' and 'mean'")
        x, y = list(r["num_heads"]), list(r["mean"])
        std = r.get("std")
        if std is not None and any(s > 0 for s in std):
            ax.errorbar(x, y, yerr=list(std), marker="o", capsize=3, label=name)
        else:
            ax.plot(x, y, marker="o", label=name)
    ax.set(xlabel="number of heads M", ylabel=ylabel, title=f"{ylabel} vs number of heads")
    ax.legend(fontsize=8)
    return _save(fig, path)


def plot_head_entropy(
    entropy: Mapping[str, Sequence[float]],
    path: PathLike = "head_entropy.png",
    uniform: Optional[float] = None,
    title: Optional[str] = None,
) -> Path:
    """Bar chart of each head's mean attention entropy, one group per model/layer; ``uniform`` draws the entropy
    of uniform attention (e.g. mean ``log(degree)``) as a reference line; ``title`` (e.g. the dataset) above it."""
    if not entropy:
        raise GraphRMAError("entropy: expected at least one list of per-head entropies")
    data = {k: _values(v) for k, v in entropy.items()}
    k = len(data)
    width = 0.8 / k
    fig = _figure(max(5.0, 0.4 * max(len(v) for v in data.values()) * k), 3.5)
    ax = fig.add_subplot(1, 1, 1)
    for i, (name, vals) in enumerate(data.items()):
        ax.bar([h + (i - (k - 1) / 2) * width for h in range(len(vals))], vals, width=width, label=name)
    if uniform is not None and math.isfinite(uniform):
        ax.axhline(uniform, color="k", ls="--", lw=1, label="uniform attention")
    ax.set(xlabel="head", ylabel="mean attention entropy (nats)", title=title)
    ax.legend(fontsize=8)
    return _save(fig, path)
