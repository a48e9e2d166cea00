r"""The classic GAT tuned by Luo, Shi and Wu (NeurIPS 2024, "Classic GNNs are Strong Baselines"): a stack of GAT
layers, each with a learned residual map of its input, a normalisation, ReLU and dropout, then a linear read-out.

.. math::
    h^{(0)} &= \mathrm{drop}(W_{in} x) \ \text{(with a pre-linear layer), else } x, \\
    h^{(l)} &= \mathrm{drop}\Big(\mathrm{ReLU}\big(\mathrm{Norm}_l\big(\mathrm{GAT}_l(h^{(l-1)})
               + R_l h^{(l-1)}\big)\big)\Big), \qquad l = 1..L, \\
    \mathrm{logits} &= W_{out}\, h^{(L)},

where :math:`R_l` is a linear map with bias (present with ``residual=True``), :math:`\mathrm{Norm}_l` is
BatchNorm, LayerNorm or nothing, and :math:`\mathrm{GAT}_l` is this package's ``RepulsiveGATConv``
(``RepulsiveGATv2Conv`` with ``v2=True``) without bias, with ``heads`` heads of ``hidden // heads`` units
concatenated back to ``hidden``, so a sampler treats its heads like any other GAT layer's (``layers=["convs.0"]``
selects the first layer's heads). Their published models have one head (``heads=1``) and no attention dropout;
their graph is undirected with self-loops, which ``self_loops=True`` gives on an undirected graph (the layer removes
stored self-loops and adds one per node, as their preprocessing does).
"""

from __future__ import annotations

from typing import List, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .._errors import GraphRMAError
from ..nn.gat_conv import RepulsiveGATConv, RepulsiveGATv2Conv
from ..nn.lean import share_csr_cache
from ._common import RebuildableModel, check_bools, check_features, check_stack

__all__ = ["ClassicGAT", "NORMS"]

NORMS: Tuple[str, ...] = ("batch", "layer", "none")


def _norm(kind: str, width: int) -> nn.Module:
    return {"batch": nn.BatchNorm1d, "layer": nn.LayerNorm}[kind](width) if kind != "none" else nn.Identity()


class ClassicGAT(RebuildableModel):
    r"""``layers`` GAT layers with residual maps, normalisation, ReLU and dropout, then a linear read-out (see the
    module).

    Args:
        in_channels (int): input feature size.
        out_channels (int): outputs (classes; 1 for a binary task scored with ROC AUC).
        hidden (int, optional): width of every layer, split over the heads (``hidden % heads == 0``).
            (default: ``64``)
        heads (int, optional): attention heads per layer. (default: ``1``)
        layers (int, optional): GAT layers. (default: ``2``)
        dropout (float, optional): dropout after each layer (and after the pre-linear layer). (default: ``0.5``)
        attn_dropout (float, optional): dropout on the attention coefficients. (default: ``0.0``)
        norm (str, optional): ``"batch"``, ``"layer"`` or ``"none"``. (default: ``"batch"``)
        residual (bool, optional): add a learned linear map of each layer's input. (default: ``True``)
        pre_linear (bool, optional): a linear layer (with dropout) before the first GAT layer. (default: ``False``)
        v2 (bool, optional): GATv2 attention. (default: ``False``)
        self_loops (bool, optional): each attention layer adds self-loops. (default: ``True``)
        lean (bool, optional): the attention layers' memory-lean path. (default: ``False``)

    Shapes:
        - **input:** node features :math:`(|\mathcal{V}|, F_{in})`, edge indices :math:`(2, |\mathcal{E}|)`
        - **output:** :math:`(|\mathcal{V}|, F_{out})`
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        hidden: int = 64,
        heads: int = 1,
        layers: int = 2,
        dropout: float = 0.5,
        attn_dropout: float = 0.0,
        norm: str = "batch",
        residual: bool = True,
        pre_linear: bool = False,
        v2: bool = False,
        self_loops: bool = True,
        lean: bool = False,
    ) -> None:
        super().__init__()
        check_stack(in_channels, out_channels, hidden, heads, layers, dropout, attn_dropout)
        check_bools(residual=residual, pre_linear=pre_linear, v2=v2, self_loops=self_loops, lean=lean)
        if norm not in NORMS:
            raise GraphRMAError(f"norm: expected one of {NORMS}, got {norm!r}")
        self.in_channels, self.out_channels, self.hidden, self.heads = in_channels, out_channels, hidden, heads
        self.layers, self.dropout, self.attn_dropout, self.norm = layers, float(dropout), float(attn_dropout), norm
        self.residual, self.pre_linear, self.v2 = residual, pre_linear, v2
        self.self_loops, self.lean = self_loops, lean

        Conv = RepulsiveGATv2Conv if self.v2 else RepulsiveGATConv
        widths = [hidden if self.pre_linear else in_channels] + [hidden] * (layers - 1)
        self.input = nn.Linear(in_channels, hidden) if self.pre_linear else None
        self.convs = nn.ModuleList(
            Conv(
                w,
                hidden // heads,
                heads=heads,
                dropout=self.attn_dropout,
                add_self_loops=self.self_loops,
                bias=False,
                lean=self.lean,
            )
            for w in widths
        )
        self.residuals = nn.ModuleList(nn.Linear(w, hidden) for w in widths) if self.residual else None
        self.norms = nn.ModuleList(_norm(norm, hidden) for _ in widths)
        self.output = nn.Linear(hidden, out_channels)
        share_csr_cache(self)  # every lean layer reads the same graph: one CSR of the edges, built once

    def _input(self, x: Tensor) -> Tensor:
        check_features(x, self.in_channels)
        if x.is_sparse:
            x = x.to_dense()
        return F.dropout(self.input(x), self.dropout, self.training) if self.input is not None else x

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        """Outputs ``[N, out_channels]``."""
        return self.forward_with_attention(x, edge_index, attention=False)[0]

    def forward_with_attention(
        self, x: Tensor, edge_index: Tensor, attention: bool = True
    ) -> Tuple[Tensor, List[Tuple[Tensor, Tensor]], Tensor]:
        """Outputs, each layer's ``(alpha [E, H], destination index [E])`` and the first layer's head outputs
        ``[N, heads, hidden // heads]`` (the attention layer's output, before the residual map)."""
        h = self._input(x)
        atts: List[Tuple[Tensor, Tensor]] = []
        first = None
        for layer, conv in enumerate(self.convs):
            out = conv(h, edge_index, return_attention_weights=attention or None)
            msg, att = out if attention else (out, None)
            if layer == 0:
                first = msg
            if att is not None:
                atts.append((att[1], att[0][1]))
            z = msg + self.residuals[layer](h) if self.residuals is not None else msg
            h = F.dropout(F.relu(self.norms[layer](z)), self.dropout, self.training)
        return self.output(h), atts, first.view(-1, self.heads, self.hidden // self.heads)

    def head_outputs(self, x: Tensor, edge_index: Tensor) -> Tensor:
        """First-layer head outputs ``[N, heads, hidden // heads]`` in the current mode (the layer has no bias)."""
        with torch.no_grad():
            return self.convs[0](self._input(x), edge_index).view(-1, self.heads, self.hidden // self.heads)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.in_channels}, {self.out_channels}, hidden={self.hidden}, "
            f"heads={self.heads}, layers={self.layers}, dropout={self.dropout}, norm={self.norm!r}, "
            f"residual={self.residual}, pre_linear={self.pre_linear}, v2={self.v2})"
        )
