r"""Head redundancy (Michel et al., 2019; the repulsive-attention paper's Figure 2).

Mask one head at test time (its output multiplied by :math:`\xi_h = 0`, see :class:`HeadCapture`), evaluate,
and record the metric drop :math:`\Delta_h = m(\text{all heads}) - m(\text{head } h \text{ masked})`. Many
drops near zero mean many heads are redundant; repulsive heads should each matter more.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Dict, List, Mapping, Sequence, Union

import torch
from torch import nn

from .._errors import GraphRMAError
from .capture import HeadCapture, num_heads

__all__ = ["mask_heads", "HeadImportance", "head_importance"]

LayerSpec = Union[nn.Module, str]


def mask_heads(layer: nn.Module, heads: Sequence[int]) -> HeadCapture:
    """Context manager removing ``heads``' contributions from ``layer``'s output while open::

    with mask_heads(model.conv1, [2]):
        acc = evaluate()
    """
    return HeadCapture(layer, mask=heads, record=False)


@dataclass
class HeadImportance:
    """Result of :func:`head_importance`: the unmasked metric and, per layer, the metric with each head masked
    and the drop (positive = masking hurts)."""

    baseline: float
    masked: Dict[str, List[float]] = field(default_factory=dict)
    drops: Dict[str, List[float]] = field(default_factory=dict)

    def all_drops(self) -> List[float]:
        return [d for v in self.drops.values() for d in v]

    def to_dict(self) -> dict:
        return {"baseline": self.baseline, "masked": self.masked, "drops": self.drops}


def resolve_layers(model: nn.Module, layers) -> Dict[str, nn.Module]:
    """``{name: layer}`` of ``layers``: a submodule name, a module, a list of either, or a mapping (kept as is)."""
    if isinstance(layers, (nn.Module, str)):
        layers = [layers]
    if isinstance(layers, Mapping):
        return dict(layers)
    names = {id(m): n for n, m in model.named_modules()}
    out: Dict[str, nn.Module] = {}
    for spec in layers:
        if isinstance(spec, str):
            try:
                out[spec] = model.get_submodule(spec)
            except AttributeError as e:
                raise GraphRMAError(f"layers: model has no submodule {spec!r}") from e
        elif isinstance(spec, nn.Module):
            out[names.get(id(spec), type(spec).__name__ + str(len(out)))] = spec
        else:
            raise GraphRMAError(f"layers: expected modules or submodule names, got {type(spec).__name__}")
    if not out:
        raise GraphRMAError("layers: no attention layer given")
    return out


def head_importance(
    model: nn.Module,
    layers: Union[LayerSpec, Sequence[LayerSpec], Mapping[str, nn.Module]],
    evaluate: Callable[[], float],
    higher_is_better: bool = True,
) -> HeadImportance:
    """Mask every head of every layer in turn and record how much ``evaluate()`` gets worse.

    Args:
        model: the model (put in ``eval`` mode for the measurement, its mode restored after).
        layers: attention layers of ``model`` (modules or submodule names like ``"conv1"``), or a name->module map.
        evaluate: runs the model on held-out data and returns a number (accuracy, BLEU, ...).
        higher_is_better: if ``False`` (a loss or error), the drop is ``masked - baseline`` so that a positive drop
            always means masking the head hurts.
    """
    if not callable(evaluate):
        raise GraphRMAError("evaluate: expected a callable returning a number")
    resolved = resolve_layers(model, layers)
    sign = 1.0 if higher_is_better else -1.0
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            base = float(evaluate())
            res = HeadImportance(baseline=base)
            for name, layer in resolved.items():
                masked = []
                for h in range(num_heads(layer)):
                    with mask_heads(layer, [h]):
                        masked.append(float(evaluate()))
                res.masked[name] = masked
                res.drops[name] = [sign * (base - m) for m in masked]
    finally:
        model.train(was_training)
    return res
