r"""Early stopping from validation metrics: when to keep the model and when to stop training."""

from __future__ import annotations

import math
import numbers
from typing import Any, Dict, Tuple

from .._errors import GraphRMAError
from ..kinds import EARLY_STOPPING_RULES

__all__ = ["EarlyStopping"]


class EarlyStopping:
    r"""When to keep the model and when to stop, from each epoch's validation metric and loss.

    ``rule="val_acc"`` (this package's default) and ``rule="val_auc"``: keep the epoch with the highest validation
    metric (accuracy, or ROC AUC for a binary task; ties: lower validation loss); stop ``patience`` epochs after the
    last strict improvement of the metric. The two names differ only in which metric the task passes as ``val_metric``.
    ``rule="val_loss"`` (the GGCN code's ``full-supervised.py``): keep the epoch with the lowest validation loss;
    stop ``patience`` epochs after the last strict improvement of the loss.
    ``rule="gat"`` (the GAT authors' ``execute_cora.py``): with running maxima/minima :math:`a^*` and :math:`l^*`,
    an epoch with :math:`a \ge a^*` or :math:`l \le l^*` resets the counter (and keeps the model if both hold);
    otherwise the counter grows, and training stops when it reaches ``patience``.

    ``best_metric`` / ``best_loss``: the kept epoch's validation metric and loss. :meth:`state_dict` and
    :meth:`load_state_dict` carry the counters across a resumed run.
    """

    RULES = EARLY_STOPPING_RULES  # the one list (graph_rma.kinds: the torch-free configurations read it too)

    def __init__(self, rule: str = "val_acc", patience: int = 100) -> None:
        if rule not in self.RULES:
            raise GraphRMAError(f"rule: expected one of {self.RULES}, got {rule!r}")
        if isinstance(patience, bool) or not isinstance(patience, numbers.Integral) or patience < 1:
            raise GraphRMAError(f"patience: expected an integer >= 1 (epochs), got {patience!r}")
        self.rule, self.patience = rule, int(patience)
        self.best_metric, self.best_loss = -math.inf, math.inf  # of the kept model
        self.metric_max, self.loss_min = -math.inf, math.inf  # running extremes
        self.bad = 0

    def update(self, val_metric: float, val_loss: float) -> Tuple[bool, bool]:
        """``(keep, stop)`` for this epoch: keep its model as the selected one; stop training after it.
        ``val_metric`` is the validation metric (accuracy or ROC AUC) whatever the rule's name."""
        if self.rule == "val_loss":
            keep = improved = val_loss < self.loss_min
            self.loss_min = min(self.loss_min, val_loss)
        elif self.rule in ("val_acc", "val_auc"):
            keep = val_metric > self.best_metric or (val_metric == self.best_metric and val_loss < self.best_loss)
            improved = val_metric > self.metric_max
            self.metric_max = max(self.metric_max, val_metric)
        else:
            improved = val_metric >= self.metric_max or val_loss <= self.loss_min
            keep = val_metric >= self.metric_max and val_loss <= self.loss_min
            self.metric_max, self.loss_min = max(self.metric_max, val_metric), min(self.loss_min, val_loss)
        if keep:
            self.best_metric, self.best_loss = val_metric, val_loss
        self.bad = 0 if improved else self.bad + 1
        return keep, self.bad >= self.patience

    def state_dict(self) -> Dict[str, Any]:
        """The counters a resumed run continues from (everything but ``rule`` and ``patience``)."""
        return {k: v for k, v in vars(self).items() if k not in ("rule", "patience")}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Put a :meth:`state_dict` back. A run saved part-way by graph_rma 0.1.0 names ``best_metric`` and
        ``metric_max`` ``best_acc`` and ``acc_max``; they are read as the new names."""
        old = {"best_acc": "best_metric", "acc_max": "metric_max"}
        vars(self).update({old.get(k, k): v for k, v in state.items()})
