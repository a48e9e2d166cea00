r"""Early stopping from validation metrics: when to keep the model and when to stop training."""

from __future__ import annotations

import math
from typing import Tuple

__all__ = ["EarlyStopping"]


class EarlyStopping:
    r"""When to keep the model and when to stop, from each epoch's validation accuracy and loss.

    ``rule="val_acc"`` (this package's default) and ``rule="val_auc"``: keep the epoch with the highest validation
    metric (accuracy, or ROC AUC for a binary task; ties: lower validation loss); stop ``patience`` epochs after the
    last strict improvement of the metric. The two names differ only in which metric the task passes as ``val_acc``.
    ``rule="val_loss"`` (the GGCN code's ``full-supervised.py``): keep the epoch with the lowest validation loss;
    stop ``patience`` epochs after the last strict improvement of the loss.
    ``rule="gat"`` (the GAT authors' ``execute_cora.py``): with running maxima/minima :math:`a^*` and :math:`l^*`,
    an epoch with :math:`a \ge a^*` or :math:`l \le l^*` resets the counter (and keeps the model if both hold);
    otherwise the counter grows, and training stops when it reaches ``patience``.
    """

    RULES = ("val_acc", "val_auc", "val_loss", "gat")

    def __init__(self, rule: str = "val_acc", patience: int = 100) -> None:
        if rule not in self.RULES:
            raise ValueError(f"rule: expected one of {self.RULES}, got {rule!r}")
        if patience < 1:
            raise ValueError(f"patience: expected >= 1, got {patience}")
        self.rule, self.patience = rule, patience
        self.best_acc, self.best_loss = -math.inf, math.inf  # of the kept model
        self.acc_max, self.loss_min = -math.inf, math.inf  # running extremes
        self.bad = 0

    def update(self, val_acc: float, val_loss: float) -> Tuple[bool, bool]:
        """``(keep, stop)`` for this epoch: keep its model as the selected one; stop training after it.
        ``val_acc`` is the validation metric (accuracy or ROC AUC) whatever the rule's name."""
        if self.rule == "val_loss":
            keep = improved = val_loss < self.loss_min
            self.loss_min = min(self.loss_min, val_loss)
        elif self.rule in ("val_acc", "val_auc"):
            keep = val_acc > self.best_acc or (val_acc == self.best_acc and val_loss < self.best_loss)
            improved = val_acc > self.acc_max
            self.acc_max = max(self.acc_max, val_acc)
        else:
            improved = val_acc >= self.acc_max or val_loss <= self.loss_min
            keep = val_acc >= self.acc_max and val_loss <= self.loss_min
            self.acc_max, self.loss_min = max(self.acc_max, val_acc), min(self.loss_min, val_loss)
        if keep:
            self.best_acc, self.best_loss = val_acc, val_loss
        self.bad = 0 if improved else self.bad + 1
        return keep, self.bad >= self.patience
