r"""Swap stock attention modules inside any model for this package's drop-in versions, weights kept.

``graph_rma.convert(model)`` walks ``model`` and replaces every module whose exact class has a registered
converter (PyG ``GATConv`` -> :class:`~graph_rma.nn.RepulsiveGATConv`, ``GATv2Conv`` ->
:class:`~graph_rma.nn.RepulsiveGATv2Conv`, ``torch.nn.MultiheadAttention`` ->
:class:`~graph_rma.nn.RepulsiveMultiheadAttention`, ...). The new module loads the old one's ``state_dict`` and
keeps its device, dtype and training mode, so outputs are unchanged until an extra option is switched on.

The swap table lives here and is filled when this module is imported (no import side effect elsewhere, no cycle);
:func:`register_conversion` adds a user's own pair.
"""
from __future__ import annotations

from typing import Callable, Dict, Optional, Type

from torch import nn
from torch_geometric.nn.conv import GATConv, GATv2Conv

from .gat_conv import RepulsiveGATConv, RepulsiveGATv2Conv
from .multihead_attention import RepulsiveMultiheadAttention

__all__ = ["convert", "register_conversion"]

Converter = Callable[[nn.Module], nn.Module]
_CONVERTERS: Dict[Type[nn.Module], Converter] = {}


def register_conversion(stock_cls: Type[nn.Module], converter: Converter) -> None:
    """Register ``converter(stock_module) -> new_module`` for modules whose exact class is ``stock_cls``.

    The converter builds the new module with the same constructor arguments; :func:`convert` then copies the
    ``state_dict``, device, dtype and training mode.
    """
    _CONVERTERS[stock_cls] = converter


register_conversion(GATConv, RepulsiveGATConv.from_stock)
register_conversion(GATv2Conv, RepulsiveGATv2Conv.from_stock)
register_conversion(nn.MultiheadAttention, RepulsiveMultiheadAttention.from_stock)


def _convert_one(module: nn.Module, **options) -> Optional[nn.Module]:
    fn = _CONVERTERS.get(type(module))
    if fn is None:
        return None
    new = fn(module, **options)
    new.load_state_dict(module.state_dict())
    ref = next(iter(module.parameters()), None)
    if ref is not None:
        new.to(device=ref.device, dtype=ref.dtype)
    new.train(module.training)
    return new


def convert(model: nn.Module, inplace: bool = True, **options) -> nn.Module:
    """Replace every registered stock attention module in ``model`` (recursively) by its drop-in version.

    Args:
        model: any ``nn.Module`` (a PyG ``GAT``, an ``nn.TransformerEncoder``, a single ``GATConv``, ...).
        inplace: modify ``model`` in place (default); otherwise work on a deep copy.
        **options: extra constructor options for the new layers (e.g. ``drop_attention=DropAttention(0.1)``).

    Returns:
        The converted model (the new layer itself when ``model`` is a single convertible module).
    """
    if not isinstance(model, nn.Module):
        raise ValueError(f"model: expected a torch.nn.Module, got {type(model).__name__}")
    if not inplace:
        import copy

        model = copy.deepcopy(model)
    top = _convert_one(model, **options)
    if top is not None:
        return top
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            new = _convert_one(child, **options)
            if new is not None:
                setattr(parent, name, new)
    return model
