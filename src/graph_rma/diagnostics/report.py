r"""All diagnostics for a node-classification model on one node split, written as a JSON summary plus PNGs.

Used by ``graph-rma report``; callable directly for any model ``model(x, edge_index) -> logits`` whose attention
layers :class:`HeadCapture` supports. A model with ``K >= 2`` outputs is a multi-class classifier (softmax
probabilities, scored with accuracy); a model with one output logit is a binary one, as the node task trains it for
ROC AUC (binary cross-entropy): the probability of class 1 is the logit's sigmoid :math:`\sigma`, the prediction is
class 1 where :math:`\sigma > 1/2`, its confidence :math:`\max(\sigma, 1 - \sigma)`, and the task's metric (the
summary's ``score``, and what head masking drops) is the ROC AUC of the logits.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Sequence, Union

import torch
from torch import Tensor, nn

from ..engine import write_json
from ..engine.optional import MissingExtraError, require
from ..metrics.classification import roc_auc
from .calibration import calibration_bins, expected_calibration_error, overconfidence_error, predictive_entropy
from .capture import HeadCapture
from .diversity import head_diversity
from .redundancy import _resolve_layers, head_importance

__all__ = ["node_classification_report"]


def _probabilities(logits: Tensor) -> Tensor:
    """Class probabilities ``[n, K]``: the softmax of ``K >= 2`` logits, ``[1 - sigmoid, sigmoid]`` of one logit."""
    logits = logits.double()
    if logits.size(1) == 1:
        return torch.cat([torch.sigmoid(-logits), torch.sigmoid(logits)], dim=1)
    return logits.softmax(dim=-1)


def node_classification_report(
    model: nn.Module,
    x: Tensor,
    edge_index: Tensor,
    y: Tensor,
    mask: Tensor,
    layers: Union[str, nn.Module, Sequence[Union[str, nn.Module]], Mapping[str, nn.Module]],
    out_dir: Optional[Union[str, os.PathLike]] = None,
    num_bins: int = 10,
    extra: Optional[Dict[str, Any]] = None,
    plots: bool = True,
) -> Dict[str, Any]:
    """The task's metric, accuracy, calibration (ECE, OE, bins), predictive entropy, head diversity and head
    redundancy of ``layers`` on the nodes selected by ``mask``.

    The metric (``metric`` and ``score`` in the summary) is accuracy for a model with ``K >= 2`` outputs and ROC AUC
    for a binary model with one output logit (see the module); calibration and entropy are those of the softmax or
    sigmoid probabilities. Diversity is measured on the selected nodes: Dist over their per-head outputs, attention
    measures over the attention distributions of their incoming edges. Redundancy masks each head of each layer in
    turn and records the drop of the metric on the selected nodes.

    With ``out_dir``, writes ``report.json`` and (``plots=True``) ``reliability.png``, ``head_importance.png``,
    ``head_entropy.png``, ``entropy_cdf.png``. Returns the summary dict (``extra`` is merged in first).
    """
    if not isinstance(mask, Tensor) or mask.dtype != torch.bool or mask.dim() != 1:
        raise ValueError(f"mask: expected a 1-D bool node mask, got {getattr(mask, 'dtype', type(mask))}")
    if y.dim() != 1 or y.numel() != mask.numel():
        raise ValueError(f"y: expected node labels of shape [{mask.numel()}], got {list(y.shape)}")
    idx = mask.nonzero().view(-1)
    if idx.numel() == 0:
        raise ValueError("mask: selects no node")
    resolved = _resolve_layers(model, layers)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad(), contextlib.ExitStack() as stack:
            caps = {name: stack.enter_context(HeadCapture(layer)) for name, layer in resolved.items()}
            logits = model(x, edge_index)
        if not isinstance(logits, Tensor) or logits.dim() != 2 or logits.size(0) != mask.numel():
            raise ValueError(f"model: expected logits [{mask.numel()}, K], got {getattr(logits, 'shape', logits)}")
        binary = logits.size(1) == 1
        metric = "roc_auc" if binary else "accuracy"
        labels = y[idx]

        def task_score(out: Tensor) -> float:
            if binary:
                return roc_auc(out[:, 0], labels)
            return float((out.argmax(dim=-1) == labels).double().mean())

        probs = _probabilities(logits[idx])
        acc = float((probs.argmax(dim=-1) == labels).double().mean())
        score = task_score(logits[idx])
        bins = calibration_bins(probs, labels, num_bins)
        ent = predictive_entropy(probs)

        diversity: Dict[str, Any] = {}
        for name, cap in caps.items():
            if cap.outputs is None or cap.alpha is None:
                raise ValueError(f"layers: layer {name!r} was not called by model(x, edge_index)")
            N = cap.outputs.size(0)
            sel = mask[cap.index] if cap.index.max() < mask.numel() else None
            d = head_diversity(
                outputs=cap.outputs[idx] if N == mask.numel() else cap.outputs,
                attn=cap.alpha if sel is None else cap.alpha[sel],
                index=cap.index if sel is None else cap.index[sel],
                num_nodes=max(N, mask.numel()),
            )
            deg = torch.bincount(cap.index, minlength=mask.numel()).double()
            d["uniform_entropy"] = float(deg[idx].clamp(min=1).log().mean())
            d["num_heads"] = cap.heads
            diversity[name] = d

        def evaluate() -> float:
            return task_score(model(x, edge_index)[idx])

        redundancy = head_importance(model, resolved, evaluate)
    finally:
        model.train(was_training)

    summary: Dict[str, Any] = dict(extra or {})
    summary.update(
        {
            "num_nodes": int(idx.numel()),
            "metric": metric,
            "score": score,
            "accuracy": acc,
            "calibration": {
                "num_bins": num_bins,
                "ece": expected_calibration_error(bins),
                "oe": overconfidence_error(bins),
                "bins": bins.to_dict(),
            },
            "predictive_entropy": {
                "mean": float(ent.mean()),
                "median": float(ent.median()),
                "max_possible": math.log(probs.size(1)),
            },
            "diversity": diversity,
            "redundancy": redundancy.to_dict(),
        }
    )
    if out_dir is not None:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        files = {}
        if plots:
            try:
                require("matplotlib", "plots", "the report's pictures")
            except MissingExtraError as exc:  # optional: the JSON summary is the report
                print(f"plots skipped ({exc.module} not installed): {exc.hint}", file=sys.stderr)
                plots = False
        if plots:
            from .plots import plot_entropy_cdf, plot_head_entropy, plot_head_importance, reliability_diagram

            files["reliability"] = reliability_diagram(bins, path=out / "reliability.png")
            files["head_importance"] = plot_head_importance(
                redundancy.drops, path=out / "head_importance.png", metric="ROC AUC" if binary else "accuracy"
            )
            first = next(iter(diversity.values()))
            files["head_entropy"] = plot_head_entropy(
                {k: v["entropy"] for k, v in diversity.items()},
                path=out / "head_entropy.png",
                uniform=first["uniform_entropy"],
            )
            files["entropy_cdf"] = plot_entropy_cdf({"test nodes": ent}, path=out / "entropy_cdf.png")
        files["summary"] = out / "report.json"
        summary["files"] = {k: str(v) for k, v in files.items()}
        write_json(out / "report.json", summary)
    return summary
