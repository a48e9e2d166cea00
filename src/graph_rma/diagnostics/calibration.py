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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

import torch
from torch import Tensor

__all__ = [
    "CalibrationBins",
    "calibration_bins",
    "expected_calibration_error",
    "overconfidence_error",
    "predictive_entropy",
    "empirical_cdf",
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
        raise ValueError(f"probs: expected a tensor, got {type(probs).__name__}")
    if probs.dim() == 2:
        if labels is None:
            raise ValueError("labels: required when probs is a [n, K] matrix of class probabilities")
        if labels.dim() != 1 or labels.numel() != probs.size(0):
            raise ValueError(f"labels: expected shape [{probs.size(0)}], got {list(labels.shape)}")
        conf, pred = probs.max(dim=1)
        return conf.double(), (pred == labels.to(pred.device)).double()
    if probs.dim() == 1:
        if correct is None:
            raise ValueError("correct: required when probs is a vector of confidences [n]")
        if correct.shape != probs.shape:
            raise ValueError(f"correct: expected shape {list(probs.shape)}, got {list(correct.shape)}")
        return probs.double(), correct.double()
    raise ValueError(f"probs: expected [n, K] probabilities or [n] confidences, got {list(probs.shape)}")


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
        raise ValueError(f"num_bins: expected a positive integer, got {num_bins!r}")
    conf, corr = _confidence_and_correct(probs, labels, correct)
    if conf.numel() == 0:
        raise ValueError("probs: need at least one prediction")
    if bool((conf < 0).any()) or bool((conf > 1).any()):
        raise ValueError("probs: confidences must lie in [0, 1]; pass softmax probabilities, not logits")
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
        raise ValueError(f"probs: expected a tensor of probabilities, got {getattr(probs, 'shape', type(probs))}")
    return -torch.special.xlogy(probs, probs).sum(dim=dim)


def empirical_cdf(values: Tensor, at: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
    r"""Empirical CDF :math:`F(t) = \frac{1}{n}|\{i : v_i \le t\}|`.

    Returns ``(t, F(t))``: with ``at`` given, ``t = at``; otherwise ``t`` is the sorted distinct values, so that
    ``(t, F)`` are the corners of the step function (plot with ``where="post"``).
    """
    if not isinstance(values, Tensor) or values.dim() != 1 or values.numel() == 0:
        raise ValueError(f"values: expected a non-empty 1-D tensor, got {getattr(values, 'shape', type(values))}")
    if bool(torch.isnan(values).any()):
        raise ValueError("values: contains NaN")
    v = values.detach().double().sort().values
    t = v.unique() if at is None else torch.as_tensor(at, dtype=torch.float64)
    F = torch.searchsorted(v, t, right=True).double() / v.numel()
    return t, F
