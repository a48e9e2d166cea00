r"""Node-classification metrics on tensors: accuracy and the area under the ROC curve.

ROC AUC is the Mann-Whitney statistic: the probability that a random positive scores above a random negative,
ties counting one half,

.. math::
    \mathrm{AUC} = \frac{\sum_{i:\,y_i=1} r_i - n_1 (n_1 + 1)/2}{n_1 n_0},

with :math:`r_i` the rank of score :math:`i` among all scores (tied scores get their average rank), :math:`n_1`
positives and :math:`n_0` negatives: scikit-learn's ``roc_auc_score`` (the trapezoidal area under the curve).
``tests/test_protocols.py`` checks it against the pairwise definition on random scores with ties (and against
scikit-learn where it is installed).
"""

from __future__ import annotations

from typing import Tuple

import torch
from torch import Tensor

from .._errors import GraphRMAError

__all__ = ["METRICS", "accuracy", "roc_auc", "score"]

METRICS: Tuple[str, ...] = ("accuracy", "roc_auc")


def accuracy(logits: Tensor, y: Tensor) -> float:
    """Share of rows whose arg-max class is ``y`` (``logits`` ``[n, C]``); 0 for no rows."""
    if y.numel() == 0:
        return 0.0
    return float((logits.argmax(dim=-1) == y).float().mean())


def roc_auc(scores: Tensor, y: Tensor) -> float:
    """ROC AUC of ``scores`` ``[n]`` for binary labels ``y`` ``[n]`` (1 positive, 0 negative; see the module).

    Raises:
        GraphRMAError: shapes differ, a score that is NaN or infinite (refused, as scikit-learn refuses it), labels
            other than 0/1, or only one class present (the AUC is undefined).
    """
    scores, y = scores.detach().reshape(-1).double(), y.detach().reshape(-1)
    if scores.shape != y.shape:
        raise GraphRMAError(f"roc_auc: scores and labels differ in length ({scores.numel()} and {y.numel()})")
    bad = int((~torch.isfinite(scores)).sum())
    if bad:
        raise GraphRMAError(f"roc_auc: scores must be finite, got {bad} NaN or infinite score(s) of {scores.numel()}")
    if y.numel() and not bool(((y == 0) | (y == 1)).all()):
        raise GraphRMAError("roc_auc: labels must be 0 or 1")
    pos = y == 1
    n1, n0 = int(pos.sum()), int((~pos).sum())
    if n1 == 0 or n0 == 0:
        raise GraphRMAError(f"roc_auc: needs both classes, got {n1} positive and {n0} negative labels")
    order = torch.argsort(scores)
    sorted_scores = scores[order]
    ranks = torch.empty_like(scores)
    ranks[order] = torch.arange(1, scores.numel() + 1, dtype=scores.dtype, device=scores.device)
    # average rank within each group of tied scores
    _, inverse, counts = torch.unique_consecutive(sorted_scores, return_inverse=True, return_counts=True)
    ends = counts.cumsum(0).double()
    mean_rank = ends - (counts.double() - 1) / 2
    ranks[order] = mean_rank[inverse]
    return float((ranks[pos].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def score(logits: Tensor, y: Tensor, metric: str) -> float:
    """``metric`` of ``logits`` against ``y``: ``"accuracy"`` (``logits`` ``[n, C]``) or ``"roc_auc"`` (``logits``
    ``[n]`` or ``[n, 1]``: the positive class's logit; ``[n, 2]``: the difference of the two logits)."""
    if metric == "accuracy":
        return accuracy(logits, y)
    if metric == "roc_auc":
        if logits.dim() == 2 and logits.size(1) == 2:
            logits = logits[:, 1] - logits[:, 0]
        return roc_auc(logits.reshape(-1), y)
    raise GraphRMAError(f"metric: expected one of {METRICS}, got {metric!r}")
