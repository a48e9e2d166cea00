r"""Calibration of a classifier's confidences (paper Appendix C.4) and out-of-distribution uncertainty (C.5).

Split the :math:`n` predictions by confidence :math:`\hat p_i = \max_k p_{ik}` into :math:`M` equal-width bins
:math:`B_m = \big(\tfrac{m-1}{M}, \tfrac{m}{M}\big]` (a confidence of exactly 0 goes to the first bin). With
:math:`\mathrm{acc}(B_m)` the fraction of correct predictions in the bin and :math:`\mathrm{conf}(B_m)` its mean
confidence,

.. math::
    \mathrm{ECE} = \sum_{m=1}^{M} \frac{|B_m|}{n}\, \big|\mathrm{acc}(B_m) - \mathrm{conf}(B_m)\big|,
    \qquad
    \mathrm{OE} = \sum_{m=1}^{M} \frac{|B_m|}{n}\, \mathrm{conf}(B_m)\,
        \max\big(\mathrm{conf}(B_m) - \mathrm{acc}(B_m),\, 0\big).

ECE (Naeini et al., 2015; Guo et al., 2017) measures miscalibration in both directions; the overconfidence error
(Thulasidasan et al., 2019) penalises only bins whose confidence exceeds their accuracy, weighted by confidence.

For out-of-distribution inputs a good model should be uncertain: the predictive entropy
:math:`H(p_i) = -\sum_k p_{ik}\log p_{ik}` (nats) is summarised by its empirical CDF
:math:`F(t) = \tfrac{1}{n}\,|\{i : H(p_i) \le t\}|`; a curve further right means more uncertainty.
Its power to tell out-of-distribution inputs from in-distribution ones is the AUROC of entropy as a score
(:func:`entropy_auroc`: the probability that an out-of-distribution input has the higher entropy, ties counting
one half).

The strong baselines of both claims are here too: **temperature scaling** (Guo et al., 2017) divides the logits
by one temperature :math:`T > 0` fitted on validation logits by their negative log-likelihood
(:func:`fit_temperature`, :func:`apply_temperature`), and a **deep ensemble** (Lakshminarayanan et al., 2017)
averages its members' class probabilities (:func:`ensemble_probabilities`). The proper scores beside ECE are the
negative log-likelihood :math:`-\tfrac{1}{n}\sum_i \log p_{i y_i}` (:func:`negative_log_likelihood`) and the
Brier score :math:`\tfrac{1}{n}\sum_i \sum_k (p_{ik} - [y_i = k])^2` (:func:`brier_score`). A binary model's
one logit :math:`z` is read through the sigmoid as the two class probabilities :math:`(1 - \sigma(z), \sigma(z))`
(:func:`class_probabilities`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

import torch
from torch import Tensor

from .._errors import GraphRMAError

__all__ = [
    "CalibrationBins",
    "calibration_bins",
    "expected_calibration_error",
    "overconfidence_error",
    "predictive_entropy",
    "empirical_cdf",
    "class_probabilities",
    "fit_temperature",
    "apply_temperature",
    "ensemble_probabilities",
    "negative_log_likelihood",
    "brier_score",
    "entropy_auroc",
]


@dataclass
class CalibrationBins:
    """Per-bin statistics: ``edges`` ``[M+1]``, ``count`` ``[M]``, ``accuracy`` and ``confidence`` ``[M]``
    (NaN for empty bins)."""

    edges: Tensor
    count: Tensor
    accuracy: Tensor
    confidence: Tensor

    @property
    def num_samples(self) -> int:
        return int(self.count.sum())

    def to_dict(self) -> dict:
        def clean(t: Tensor) -> list:
            return [None if v != v else float(v) for v in t.tolist()]

        return {
            "edges": self.edges.tolist(),
            "count": self.count.tolist(),
            "accuracy": clean(self.accuracy),
            "confidence": clean(self.confidence),
        }


def _confidence_and_correct(
    probs: Tensor, labels: Optional[Tensor], correct: Optional[Tensor]
) -> Tuple[Tensor, Tensor]:
    if not isinstance(probs, Tensor):
        raise GraphRMAError(f"probs: expected a tensor, got {type(probs).__name__}")
    if probs.dim() == 2:
        if labels is None:
            raise GraphRMAError("labels: required when probs is a [n, K] matrix of class probabilities")
        if labels.dim() != 1 or labels.numel() != probs.size(0):
            raise GraphRMAError(f"labels: expected shape [{probs.size(0)}], got {list(labels.shape)}")
        conf, pred = probs.max(dim=1)
        return conf.double(), (pred == labels.to(pred.device)).double()
    if probs.dim() == 1:
        if correct is None:
            raise GraphRMAError("correct: required when probs is a vector of confidences [n]")
        if correct.shape != probs.shape:
            raise GraphRMAError(f"correct: expected shape {list(probs.shape)}, got {list(correct.shape)}")
        return probs.double(), correct.double()
    raise GraphRMAError(f"probs: expected [n, K] probabilities or [n] confidences, got {list(probs.shape)}")


def calibration_bins(
    probs: Tensor,
    labels: Optional[Tensor] = None,
    num_bins: int = 10,
    correct: Optional[Tensor] = None,
) -> CalibrationBins:
    """Bin predictions by confidence into ``num_bins`` equal-width bins on :math:`[0, 1]`.

    Args:
        probs: class probabilities ``[n, K]`` (then ``labels`` ``[n]`` is required), or confidences ``[n]``
            (then ``correct`` ``[n]``, 0/1 or bool, is required).
        labels: true classes for ``[n, K]`` input.
        num_bins: the number of bins :math:`M`.
        correct: whether each prediction is right, for ``[n]`` input.
    """
    if not isinstance(num_bins, int) or num_bins < 1:
        raise GraphRMAError(f"num_bins: expected a positive integer, got {num_bins!r}")
    conf, corr = _confidence_and_correct(probs, labels, correct)
    if conf.numel() == 0:
        raise GraphRMAError("probs: need at least one prediction")
    if bool((conf < 0).any()) or bool((conf > 1).any()):
        raise GraphRMAError("probs: confidences must lie in [0, 1]; pass softmax probabilities, not logits")
    edges = torch.linspace(0, 1, num_bins + 1, dtype=torch.float64)
    # right=False: edges[m-1] < c <= edges[m] -> bin m-1; c == 0 -> bin 0.
    idx = torch.bucketize(conf.cpu(), edges[1:-1], right=False)
    count = torch.bincount(idx, minlength=num_bins)
    sum_conf = torch.zeros(num_bins, dtype=torch.float64).index_add_(0, idx, conf.cpu())
    sum_corr = torch.zeros(num_bins, dtype=torch.float64).index_add_(0, idx, corr.cpu())
    denom = count.double()
    nan = torch.full_like(denom, float("nan"))
    acc = torch.where(count > 0, sum_corr / denom.clamp(min=1), nan)
    mean_conf = torch.where(count > 0, sum_conf / denom.clamp(min=1), nan)
    return CalibrationBins(edges=edges, count=count, accuracy=acc, confidence=mean_conf)


def _bins(probs, labels, num_bins, correct) -> CalibrationBins:
    return probs if isinstance(probs, CalibrationBins) else calibration_bins(probs, labels, num_bins, correct)


def expected_calibration_error(
    probs: Tensor, labels: Optional[Tensor] = None, num_bins: int = 10, correct: Optional[Tensor] = None
) -> float:
    """ECE with ``num_bins`` equal-width bins (see the module docstring). ``probs`` may also be a
    :class:`CalibrationBins`."""
    b = _bins(probs, labels, num_bins, correct)
    w = b.count.double() / b.num_samples
    gap = (b.accuracy - b.confidence).abs().nan_to_num(0.0)
    return float((w * gap).sum())


def overconfidence_error(
    probs: Tensor, labels: Optional[Tensor] = None, num_bins: int = 10, correct: Optional[Tensor] = None
) -> float:
    """Overconfidence error (Thulasidasan et al., 2019) with ``num_bins`` equal-width bins."""
    b = _bins(probs, labels, num_bins, correct)
    w = b.count.double() / b.num_samples
    over = (b.confidence * (b.confidence - b.accuracy).clamp(min=0)).nan_to_num(0.0)
    return float((w * over).sum())


def predictive_entropy(probs: Tensor, dim: int = -1) -> Tensor:
    r"""Entropy :math:`-\sum_k p_k \log p_k` (nats) of each predictive distribution, with :math:`0 \log 0 = 0`."""
    if not isinstance(probs, Tensor) or probs.dim() < 1:
        raise GraphRMAError(f"probs: expected a tensor of probabilities, got {getattr(probs, 'shape', type(probs))}")
    return -torch.special.xlogy(probs, probs).sum(dim=dim)


def empirical_cdf(values: Tensor, at: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
    r"""Empirical CDF :math:`F(t) = \frac{1}{n}|\{i : v_i \le t\}|`.

    Returns ``(t, F(t))``: with ``at`` given, ``t = at``; otherwise ``t`` is the sorted distinct values, so that
    ``(t, F)`` are the corners of the step function (plot with ``where="post"``).
    """
    if not isinstance(values, Tensor) or values.dim() != 1 or values.numel() == 0:
        raise GraphRMAError(f"values: expected a non-empty 1-D tensor, got {getattr(values, 'shape', type(values))}")
    if bool(torch.isnan(values).any()):
        raise GraphRMAError("values: contains NaN")
    v = values.detach().double().sort().values
    t = v.unique() if at is None else torch.as_tensor(at, dtype=torch.float64)
    F = torch.searchsorted(v, t, right=True).double() / v.numel()
    return t, F


def _logits(logits: Tensor) -> Tensor:
    """``[n, K]`` logits (``K >= 2``), or a binary model's ``[n]`` / ``[n, 1]`` logits as ``[n]``."""
    if not isinstance(logits, Tensor) or logits.dim() not in (1, 2) or logits.size(0) == 0:
        raise GraphRMAError(
            f"logits: expected a non-empty [n, K] or binary [n] / [n, 1] tensor, got "
            f"{list(logits.shape) if isinstance(logits, Tensor) else type(logits).__name__}"
        )
    if not bool(torch.isfinite(logits).all()):
        raise GraphRMAError("logits: contains NaN or infinite entries")
    return logits.squeeze(-1) if logits.dim() == 2 and logits.size(-1) == 1 else logits


def _labels(labels: Tensor, n: int, classes: int) -> Tensor:
    if not isinstance(labels, Tensor) or labels.dim() != 1 or labels.numel() != n:
        raise GraphRMAError(f"labels: expected shape [{n}], got {getattr(labels, 'shape', type(labels).__name__)}")
    if labels.numel() and (int(labels.min()) < 0 or int(labels.max()) >= classes):
        raise GraphRMAError(f"labels: expected classes in [0, {classes - 1}], got {labels.min()}..{labels.max()}")
    return labels.long()


def class_probabilities(logits: Tensor, temperature: float = 1.0) -> Tensor:
    r"""Class probabilities ``[n, K]`` of ``logits / temperature``: the softmax of ``[n, K]`` logits; for a binary
    model's ``[n]`` or ``[n, 1]`` logits :math:`z`, the two columns :math:`(1 - \sigma(z), \sigma(z))`."""
    z = apply_temperature(_logits(logits), temperature)
    if z.dim() == 1:
        p = torch.sigmoid(z)
        return torch.stack([1 - p, p], dim=-1)
    return torch.softmax(z, dim=-1)


def apply_temperature(logits: Tensor, temperature: float) -> Tensor:
    """``logits / temperature`` (temperature scaling; the logits of a binary model too)."""
    t = float(temperature)
    if not t > 0 or t == float("inf"):
        raise GraphRMAError(f"temperature: expected a positive finite number, got {temperature!r}")
    return logits / t


def _nll_of_logits(z: Tensor, labels: Tensor) -> Tensor:
    if z.dim() == 1:
        return torch.nn.functional.binary_cross_entropy_with_logits(z, labels.to(z.dtype))
    return torch.nn.functional.cross_entropy(z, labels)


def fit_temperature(logits: Tensor, labels: Tensor, max_iter: int = 100) -> float:
    r"""The temperature :math:`T` minimising the mean negative log-likelihood of ``logits / T`` on ``labels`` (Guo
    et al., 2017): :math:`\log T` optimised from 0 by ``torch.optim.LBFGS`` (strong-Wolfe line search) in float64.

    Args:
        logits (Tensor): validation logits ``[n, K]``, or a binary model's ``[n]`` / ``[n, 1]`` (sigmoid, binary
            cross-entropy).
        labels (Tensor): true classes ``[n]`` (0/1 for a binary model).
        max_iter (int, optional): the most LBFGS iterations. (default: ``100``)

    Returns:
        float: :math:`T > 0`; above 1 softens overconfident logits, below 1 sharpens underconfident ones.
    """
    z = _logits(logits).detach().double().cpu()
    y = _labels(labels.cpu(), z.size(0), 2 if z.dim() == 1 else z.size(-1))
    log_t = torch.zeros((), dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([log_t], lr=1.0, max_iter=max_iter, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = _nll_of_logits(z / log_t.exp(), y)
        loss.backward()
        return loss

    opt.step(closure)
    return float(log_t.detach().exp())


def ensemble_probabilities(members) -> Tensor:
    """A deep ensemble's prediction: the mean of its members' class probabilities (a sequence of ``[n, K]``
    tensors, or one ``[m, n, K]`` tensor)."""
    if not isinstance(members, Tensor):
        members = list(members)
        shapes = {tuple(m.shape) if isinstance(m, Tensor) else None for m in members}
        if not members or len(shapes) != 1 or None in shapes:
            raise GraphRMAError(f"members: expected m >= 1 probability matrices [n, K] of one shape, got {shapes}")
        members = torch.stack(members)
    probs = members
    if probs.dim() != 3 or probs.size(0) == 0:
        raise GraphRMAError(
            f"members: expected m >= 1 probability matrices [n, K] of one shape, got {list(probs.shape)}"
        )
    return probs.mean(dim=0)


def _probs_and_labels(probs: Tensor, labels: Tensor) -> Tuple[Tensor, Tensor]:
    if not isinstance(probs, Tensor) or probs.dim() != 2 or probs.size(0) == 0:
        raise GraphRMAError(f"probs: expected class probabilities [n, K], got {getattr(probs, 'shape', type(probs))}")
    return probs.double(), _labels(labels.to(probs.device), probs.size(0), probs.size(1))


def negative_log_likelihood(probs: Tensor, labels: Tensor, eps: float = 1e-12) -> float:
    """Mean negative log-likelihood (nats) of the true classes under ``probs`` ``[n, K]``, each probability clipped
    below at ``eps``."""
    p, y = _probs_and_labels(probs, labels)
    return float(-p.gather(1, y[:, None]).clamp(min=eps).log().mean())


def brier_score(probs: Tensor, labels: Tensor) -> float:
    """Brier score: the mean over predictions of the squared distance between ``probs`` ``[n, K]`` and the one-hot
    label, summed over all ``K`` classes (Brier, 1950; in [0, 2]). For two classes it is twice the one-column form
    :math:`(p_1 - y)^2` (scikit-learn's binary ``brier_score_loss``)."""
    p, y = _probs_and_labels(probs, labels)
    onehot = torch.nn.functional.one_hot(y, p.size(1)).double()
    return float(((p - onehot) ** 2).sum(dim=1).mean())


def entropy_auroc(in_distribution: Tensor, out_of_distribution: Tensor) -> float:
    r"""AUROC of a score (predictive entropy) separating out-of-distribution inputs (positives) from
    in-distribution ones: :math:`P(s_\text{out} > s_\text{in}) + \tfrac12 P(s_\text{out} = s_\text{in})`, by the
    Mann-Whitney rank sum (tied scores share their mean rank). 0.5: no separation; 1: every out-of-distribution
    input scores higher."""
    for name, v in (("in_distribution", in_distribution), ("out_of_distribution", out_of_distribution)):
        if not isinstance(v, Tensor) or v.dim() != 1 or v.numel() == 0 or bool(torch.isnan(v).any()):
            raise GraphRMAError(f"{name}: expected a non-empty 1-D tensor of scores without NaN")
    scores = torch.cat([in_distribution.detach().double().cpu(), out_of_distribution.detach().double().cpu()])
    _, inverse, counts = torch.unique(scores, return_inverse=True, return_counts=True)
    last = counts.cumsum(0).double()  # 1-based rank of the last of each tied group
    ranks = (last - (counts.double() - 1) / 2)[inverse]
    n_in, n_out = in_distribution.numel(), out_of_distribution.numel()
    u = ranks[n_in:].sum() - n_out * (n_out + 1) / 2
    return float(u / (n_in * n_out))
