"""What the node models share: their constructor checks (one line naming the argument; the GAT's too) and the
residual and classic GATs' rebuild-from-kwargs contract.

The checks stay in the constructors although :class:`graph_rma.tasks.protocols.Protocol` validates the same values
where a study's configuration enters: a model is public API, and one built directly must refuse nonsense in one
line too (``hidden_channels=0`` would otherwise build empty layers, ``dropout=1.5`` fail only in ``forward``)."""

from __future__ import annotations

import inspect
import math
from typing import Any, Dict

from torch import Tensor, nn

from .._errors import GraphRMAError


class RebuildableModel(nn.Module):
    """A model that keeps each constructor argument as an attribute of the same name, so that
    ``type(model)(**model.model_kwargs)`` rebuilds its architecture (checkpoints store ``model_kwargs``)."""

    @property
    def model_kwargs(self) -> Dict[str, Any]:
        """The constructor arguments, read back from the attributes of the same names."""
        names = [n for n in inspect.signature(type(self).__init__).parameters if n != "self"]
        return {n: getattr(self, n) for n in names}

    def reset_parameters(self) -> None:
        for module in self.modules():
            if module is not self and hasattr(module, "reset_parameters"):
                module.reset_parameters()


def check_positive_ints(**values: Any) -> None:
    """Each value is a positive integer (not a bool); a one-line ``GraphRMAError`` naming the first that is not."""
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise GraphRMAError(f"{name}: expected a positive integer, got {value!r}")


def check_probabilities(**values: Any) -> None:
    """Each value is a number in [0, 1); a one-line ``GraphRMAError`` naming the first that is not."""
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
            raise GraphRMAError(f"{name}: expected a probability in [0, 1), got {value!r}")


def check_bools(**values: Any) -> None:
    """Each value is a ``bool`` (``"false"``, ``0`` or ``None`` is not); a one-line error naming the first that is
    not."""
    for name, value in values.items():
        if not isinstance(value, bool):
            raise GraphRMAError(f"{name}: expected a bool (True or False), got {value!r}")


def check_positive_number(name: str, value: Any) -> float:
    """``value`` as a float when it is a finite positive real number (not a bool or a string); else a one-line
    error naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise GraphRMAError(f"{name}: expected a finite positive number, got {value!r}")
    return float(value)


def check_features(x: Any, in_channels: int) -> None:
    """``x`` is a node-feature tensor ``[N, in_channels]`` (dense or sparse); else a one-line error naming the
    expected width."""
    if not isinstance(x, Tensor) or x.dim() != 2 or x.size(1) != in_channels:
        got = f"shape {list(x.shape)}" if isinstance(x, Tensor) else type(x).__name__
        raise GraphRMAError(f"x: expected node features of shape [num_nodes, {in_channels}] (in_channels), got {got}")


def check_stack(in_channels, out_channels, hidden, heads, layers, dropout, attn_dropout) -> None:
    """Sizes are positive integers, ``hidden`` splits over the heads, the dropouts are probabilities."""
    check_positive_ints(in_channels=in_channels, out_channels=out_channels, hidden=hidden, heads=heads, layers=layers)
    if hidden % heads:
        raise GraphRMAError(f"hidden: expected a multiple of heads ({heads}), got {hidden}")
    check_probabilities(dropout=dropout, attn_dropout=attn_dropout)
