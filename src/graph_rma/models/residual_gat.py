r"""The GAT of Platonov et al. (ICLR 2023): attention layers inside pre-norm residual blocks with a feed-forward net.

.. math::
    h^{(0)} &= \mathrm{GELU}(\mathrm{drop}(W_{in} x)), \\
    h^{(l)} &= h^{(l-1)} + \mathrm{FFN}_l\big(\mathrm{GAT}_l(\mathrm{LN}_l(h^{(l-1)}))\big), \qquad l = 1..L, \\
    \mathrm{FFN}(z) &= \mathrm{drop}(W_2\, \mathrm{GELU}(\mathrm{drop}(W_1 z))), \\
    \mathrm{logits} &= W_{out}\, \mathrm{LN}(h^{(L)}),

where :math:`\mathrm{GAT}_l` is this package's ``RepulsiveGATConv`` (``RepulsiveGATv2Conv`` with ``v2=True``) with
``heads`` heads of ``hidden // heads`` units, concatenated back to ``hidden``, so a sampler treats each of them like
any other GAT layer (``layers=["convs.0"]`` selects the first block's heads). :math:`W_1` maps ``hidden`` to
``ffn_multiplier * hidden``. Their code's defaults: ``hidden=512``, ``heads=8``, ``dropout=0.2``, no attention
dropout, 1-5 blocks, LayerNorm.

One difference from their ``GATModule``: their attention logits of head :math:`k` read the whole projected vector
(``Linear(dim, heads)``) and their heads are strided slices of it; here each head's logit reads its own slice, as
in PyG's ``GATConv`` (the layer a PyG user swaps in). The ``-sep`` variant (the node's own projection concatenated
to the message before the feed-forward net) is ``sep=True``: the block's ``GATConv`` then adds no self-loops.
"""

from __future__ import annotations

from typing import List, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .._errors import GraphRMAError
from ..nn.gat_conv import RepulsiveGATConv, RepulsiveGATv2Conv
from ..nn.lean import share_csr_cache
from ._common import RebuildableModel, check_bools, check_features, check_positive_number, check_stack

__all__ = ["ResidualGAT"]


class ResidualGAT(RebuildableModel):
    r"""Input projection, ``layers`` residual GAT blocks, output LayerNorm and projection (see the module).

    Args:
        in_channels: input feature size.
        out_channels: outputs (classes; 1 for a binary task scored with ROC AUC).
        hidden: width of the residual stream, split over the heads (``hidden % heads == 0``).
        heads: attention heads per block.
        layers: residual blocks.
        dropout: dropout after the input projection and inside each feed-forward net.
        attn_dropout: dropout on the attention coefficients (0 in the paper).
        ffn_multiplier: the feed-forward net's hidden width over ``hidden``.
        v2: GATv2 attention.
        self_loops: each attention layer adds self-loops (PyG's ``add_self_loops``); ignored with ``sep``.
        sep: the "-sep" variant.
        lean: the attention layers' memory-lean path (:mod:`graph_rma.nn.lean`).
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        hidden: int = 512,
        heads: int = 8,
        layers: int = 1,
        dropout: float = 0.2,
        attn_dropout: float = 0.0,
        ffn_multiplier: float = 1.0,
        v2: bool = False,
        self_loops: bool = True,
        sep: bool = False,
        lean: bool = False,
    ) -> None:
        super().__init__()
        check_stack(in_channels, out_channels, hidden, heads, layers, dropout, attn_dropout)
        check_bools(v2=v2, self_loops=self_loops, sep=sep, lean=lean)
        if int(hidden * check_positive_number("ffn_multiplier", ffn_multiplier)) < 1:
            raise GraphRMAError(
                f"ffn_multiplier: expected at least 1 / hidden ({1 / hidden:g}), got {ffn_multiplier!r} "
                f"(a feed-forward net of no units)"
            )
        self.in_channels, self.out_channels, self.hidden, self.heads = in_channels, out_channels, hidden, heads
        self.layers, self.dropout, self.attn_dropout = layers, float(dropout), float(attn_dropout)
        self.ffn_multiplier, self.v2, self.self_loops, self.sep = float(ffn_multiplier), v2, self_loops, sep
        self.lean = lean

        Conv = RepulsiveGATv2Conv if self.v2 else RepulsiveGATConv
        width = int(hidden * self.ffn_multiplier)
        self.input = nn.Linear(in_channels, hidden)
        self.norms = nn.ModuleList(nn.LayerNorm(hidden) for _ in range(layers))
        self.convs = nn.ModuleList(
            Conv(
                hidden,
                hidden // heads,
                heads=heads,
                dropout=self.attn_dropout,
                add_self_loops=self.self_loops and not self.sep,
                lean=self.lean,
            )
            for _ in range(layers)
        )
        self.ffn_in = nn.ModuleList(nn.Linear(hidden * (2 if self.sep else 1), width) for _ in range(layers))
        self.ffn_out = nn.ModuleList(nn.Linear(width, hidden) for _ in range(layers))
        self.output_norm = nn.LayerNorm(hidden)
        self.output = nn.Linear(hidden, out_channels)
        share_csr_cache(self)  # every lean layer reads the same graph: one CSR of the edges, built once

    def _block(self, i: int, h: Tensor, edge_index: Tensor, attention: bool):
        z = self.norms[i](h)
        out = self.convs[i](z, edge_index, return_attention_weights=attention or None)
        msg, att = out if attention else (out, None)
        if self.sep:
            msg = _with_own_projection(self.convs[i], z, msg)
        y = F.gelu(F.dropout(self.ffn_in[i](msg), self.dropout, self.training))
        y = F.dropout(self.ffn_out[i](y), self.dropout, self.training)
        return h + y, msg, att

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        """Outputs ``[N, out_channels]``."""
        return self.forward_with_attention(x, edge_index, attention=False)[0]

    def forward_with_attention(
        self, x: Tensor, edge_index: Tensor, attention: bool = True
    ) -> Tuple[Tensor, List[Tuple[Tensor, Tensor]], Tensor]:
        """Outputs, each block's ``(alpha [E, H], destination index [E])`` and the first block's head outputs
        ``[N, heads, hidden // heads]`` (the attention layer's output, before the feed-forward net)."""
        check_features(x, self.in_channels)
        if x.is_sparse:
            x = x.to_dense()
        h = F.gelu(F.dropout(self.input(x), self.dropout, self.training))
        atts: List[Tuple[Tensor, Tensor]] = []
        first = None
        for i in range(self.layers):
            h, msg, att = self._block(i, h, edge_index, attention)
            if i == 0:
                first = msg[:, : self.hidden] if self.sep else msg
            if att is not None:
                atts.append((att[1], att[0][1]))
        return self.output(self.output_norm(h)), atts, first.view(-1, self.heads, self.hidden // self.heads)

    def head_outputs(self, x: Tensor, edge_index: Tensor) -> Tensor:
        """First-block head outputs ``[N, heads, hidden // heads]`` in the current mode, before the layer's bias."""
        check_features(x, self.in_channels)
        with torch.no_grad():
            if x.is_sparse:
                x = x.to_dense()
            h = F.gelu(F.dropout(self.input(x), self.dropout, self.training))
            out = self.convs[0](self.norms[0](h), edge_index)
            if self.convs[0].bias is not None:
                out = out - self.convs[0].bias
            return out.view(-1, self.heads, self.hidden // self.heads)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.in_channels}, {self.out_channels}, hidden={self.hidden}, "
            f"heads={self.heads}, layers={self.layers}, dropout={self.dropout}, attn_dropout={self.attn_dropout}, "
            f"ffn_multiplier={self.ffn_multiplier}, v2={self.v2}, self_loops={self.self_loops}, sep={self.sep})"
        )


def _with_own_projection(conv: nn.Module, z: Tensor, msg: Tensor) -> Tensor:
    """The "-sep" input of the feed-forward net: the node's own projection (the layer's source projection) beside
    its aggregated message."""
    lin = getattr(conv, "lin", None) or getattr(conv, "lin_src", None) or getattr(conv, "lin_r", None)
    return torch.cat([lin(z), msg], dim=-1)
