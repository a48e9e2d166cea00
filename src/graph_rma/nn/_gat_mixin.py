"""What :class:`~graph_rma.nn.gat_conv.RepulsiveGATConv` and :class:`~graph_rma.nn.gat_conv.RepulsiveGATv2Conv`
share beyond their stock PyG class: DropAttention in place of the plain attention dropout (the edge softmax and the
drop), the lean path's CSR cache, the rate in effect, the ``repr``, and :meth:`from_stock`, which builds one from a
stock layer's constructor arguments for :func:`graph_rma.convert`.
"""

from __future__ import annotations

import copy
import inspect
import warnings
from typing import Any, Dict, Optional

import torch
import torch.nn.functional as F
from torch import Tensor
from torch_geometric.nn.resolver import aggregation_resolver as aggr_resolver
from torch_geometric.typing import OptTensor
from torch_geometric.utils import softmax

from .._errors import GraphRMAError
from ..dropattention import DropAttention
from ._gat_checks import _check_drop_attention
from .lean import CSRCache, check_lean


def _message_passing_kwargs(conv: torch.nn.Module) -> Dict[str, Any]:
    """The ``MessagePassing`` options of an existing layer (aggregation, flow, decomposition)."""
    aggr: Any = copy.deepcopy(conv.aggr_module)
    if isinstance(conv.aggr, str) and not any(True for _ in conv.aggr_module.state_dict()):
        try:  # a plain named aggregation ('add', 'mean', ...): pass the name, as the user did
            if type(aggr_resolver(conv.aggr)) is type(conv.aggr_module):
                aggr = conv.aggr
        except Exception:  # e.g. the name of an aggregation module given as an object
            pass
    return dict(aggr=aggr, flow=conv.flow, decomposed_layers=conv.decomposed_layers)


def _conversion_options(options: Dict[str, Any], dropout: float) -> Optional[DropAttention]:
    """The ``drop_attention`` option of :func:`graph_rma.convert` for a layer whose attention dropout is ``dropout``.

    ``DropAttention()`` without ``p`` keeps the layer's rate. An explicit ``p`` different from a non-zero layer
    dropout replaces it, with a warning naming both rates (the layer's ``attention_dropout_rate`` then reads
    ``p``).
    """
    unknown = sorted(set(options) - {"drop_attention"})
    if unknown:
        raise GraphRMAError(f"options: unknown option(s) {unknown} for the GAT layers; expected 'drop_attention'")
    drop = _check_drop_attention(options.get("drop_attention"))
    if drop is not None and drop.p is not None and dropout > 0 and drop.p != dropout:
        warnings.warn(
            f"convert: DropAttention(p={drop.p:g}) replaces the layer's attention dropout {dropout:g} "
            f"(rate in effect: {drop.p:g}); pass DropAttention() without p to keep {dropout:g}",
            UserWarning,
        )
    return copy.deepcopy(drop)


def _stock_arguments(conv: torch.nn.Module, stock: type) -> Dict[str, Any]:
    """Every named argument of ``stock.__init__`` read back from ``conv`` (same-named attributes), so that a
    newer torch-geometric's extra arguments are carried over too. Raises if one cannot be read back."""
    special = {
        "bias": lambda c: c.bias is not None,
        "in_channels": lambda c: c.in_channels,
        "out_channels": lambda c: c.out_channels,
    }
    args: Dict[str, Any] = {}
    for name, param in inspect.signature(stock.__init__).parameters.items():
        if name == "self" or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        if name in special:
            args[name] = special[name](conv)
        elif hasattr(conv, name):
            args[name] = getattr(conv, name)
        elif param.default is not inspect.Parameter.empty:
            warnings.warn(
                f"convert: {stock.__name__} argument {name!r} cannot be read back from the layer; the "
                f"converted layer uses its default {param.default!r}"
            )
        else:
            raise GraphRMAError(f"conv: cannot read the {stock.__name__} argument {name!r} back from the layer")
    return args


class _RepulsiveGATMixin:
    """What :class:`RepulsiveGATConv` and :class:`RepulsiveGATv2Conv` share (``_stock``: the PyG class)."""

    _stock: type
    accepts_drop_attention = True  # graph_rma.variants.apply_variant installs DropAttention here

    def _init_extras(self, drop_attention: Optional[DropAttention], lean: bool) -> None:
        self.drop_attention = _check_drop_attention(drop_attention)
        self.lean = check_lean(self, lean)
        self.csr_cache = CSRCache()

    @classmethod
    def from_stock(cls, conv: torch.nn.Module, **options):
        """A new layer with ``conv``'s constructor arguments (weights are copied by :func:`graph_rma.convert`)."""
        return cls(
            **_stock_arguments(conv, cls._stock),
            drop_attention=_conversion_options(options, conv.dropout),
            **_message_passing_kwargs(conv),
        )

    def reset_cache(self) -> None:
        """Drop the CSRs the lean path keeps (:attr:`csr_cache`)."""
        self.csr_cache.clear()

    def __setstate__(self, state: Dict[str, Any]) -> None:
        if "layout_cache" in state:  # a layer pickled by graph_rma 0.1.0 holds its CSR cache under this name
            state["csr_cache"] = state.pop("layout_cache")
        super().__setstate__(state)

    @property
    def attention_dropout_rate(self) -> float:
        """The attention drop rate in effect: DropAttention's ``p``, or ``dropout`` (plain dropout, or a
        ``DropAttention()`` without ``p``, which takes the layer's rate)."""
        drop = self.drop_attention
        return float(drop.p) if drop is not None and drop.p is not None else float(self.dropout)

    def _softmax_and_drop(
        self, logits: Tensor, src: Tensor, dst: Tensor, ptr: OptTensor, num_src: Optional[int], num_dst: Optional[int]
    ) -> Tensor:
        """Edge softmax, then plain attention dropout (stock behaviour) or DropAttention, on ``[E, H]`` logits."""
        drop = self.drop_attention
        if drop is None:
            alpha = softmax(logits, dst, ptr, num_dst)
            return F.dropout(alpha, p=self.dropout, training=self.training)
        n_dst = num_dst if num_dst is not None else int(dst.max()) + 1
        n_src = num_src if num_src is not None else n_dst
        return drop.sparse_softmax(logits, src, dst, n_src, n_dst, ptr, layer_rate=self.dropout)

    def __repr__(self) -> str:
        extra = f", drop_attention={self.drop_attention!r}" if self.drop_attention is not None else ""
        if self.drop_attention is not None and self.drop_attention.p is None:  # the rate it takes from the layer
            extra += f", attention_dropout_rate={self.attention_dropout_rate:g}"
        extra += ", lean=True" if self.lean else ""
        return f"{type(self).__name__}({self.in_channels}, {self.out_channels}, heads={self.heads}{extra})"
