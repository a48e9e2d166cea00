r"""The two-layer GAT of Veličković et al. (2018) for transductive node classification (Cora, CiteSeer).

.. math::
    H^{(1)} = \mathrm{ELU}\Big(\big\Vert_{k=1}^{K} \sum_{j \in \mathcal{N}(i) \cup \{i\}}
        \alpha^{k}_{ij} W^{k} \mathrm{drop}(x_j)\Big), \qquad
    \mathrm{logits} = \frac{1}{K'} \sum_{k=1}^{K'} \sum_{j} \alpha'^{k}_{ij} W'^{k} \mathrm{drop}(H^{(1)}_j),

with :math:`K = 8` heads of 8 hidden units, :math:`K' = 1` output head, dropout 0.6 on both layers' inputs and
on the attention coefficients (the paper's Cora setting). The layers are this package's drop-in
``RepulsiveGATConv`` (``RepulsiveGATv2Conv`` with ``v2=True``), which compute exactly what PyG's ``GATConv`` computes
until DropAttention is installed (:func:`graph_rma.variants.apply_variant`), so the head layouts of
:mod:`graph_rma.particles` find ``conv1``'s 8 heads (and ``conv2``'s when ``out_heads > 1``).

``TwoLayerGAT(**model_kwargs)`` rebuilds a model from the ``model_kwargs`` stored in a Cora checkpoint. It is not
PyG's multi-layer ``torch_geometric.nn.models.GAT``, whose positional arguments differ (``in_channels,
hidden_channels, num_layers, out_channels``).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .._errors import GraphRMAError
from ..dropattention import DropAttention
from ..nn.gat_conv import RepulsiveGATConv, RepulsiveGATv2Conv
from ..nn.lean import share_csr_cache
from ._common import check_bools, check_positive_ints, check_probabilities

__all__ = ["TwoLayerGAT"]


class TwoLayerGAT(nn.Module):
    r"""Two-layer GAT: ``heads`` x ``hidden_channels`` concatenated ELU features, then ``out_heads`` averaged.

    Args:
        in_channels: input feature size.
        out_channels: number of classes.
        hidden_channels: units per first-layer head (8).
        heads: first-layer heads (8).
        out_heads: output-layer heads, averaged (1 on Cora; the GAT paper used 8 on PubMed).
        dropout: dropout on each layer's input features (0.6).
        attn_dropout: dropout on the attention coefficients (0.6).
        v2: use GATv2 attention instead of GAT's.
        drop_attention: keyword arguments of :class:`graph_rma.DropAttention` applied to both layers' attention
            (e.g. ``{"p": 0.1, "window": 1, "mode": "element"}``), or ``None``.
        self_loops: both layers add self-loops (PyG's ``add_self_loops``; the GAT paper's setting).
        lean: the layers' memory-lean attention path (:mod:`graph_rma.nn.lean`; same results to float
            rounding, far less memory per edge, faster on CPU for large graphs).
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        hidden_channels: int = 8,
        heads: int = 8,
        out_heads: int = 1,
        dropout: float = 0.6,
        attn_dropout: float = 0.6,
        v2: bool = False,
        drop_attention: Optional[Dict[str, Any]] = None,
        self_loops: bool = True,
        lean: bool = False,
    ) -> None:
        super().__init__()
        check_positive_ints(
            in_channels=in_channels,
            out_channels=out_channels,
            hidden_channels=hidden_channels,
            heads=heads,
            out_heads=out_heads,
        )
        check_probabilities(dropout=dropout, attn_dropout=attn_dropout)
        check_bools(v2=v2, self_loops=self_loops, lean=lean)
        if drop_attention is not None and not isinstance(drop_attention, dict):
            raise GraphRMAError(
                f"drop_attention: expected None or a dict of DropAttention arguments, got {drop_attention!r}"
            )
        self.in_channels, self.out_channels = in_channels, out_channels
        self.hidden_channels, self.heads, self.out_heads = hidden_channels, heads, out_heads
        self.dropout, self.attn_dropout, self.v2 = float(dropout), float(attn_dropout), v2
        self.drop_attention = dict(drop_attention) if drop_attention is not None else None
        self.self_loops, self.lean = self_loops, lean

        Conv = RepulsiveGATv2Conv if self.v2 else RepulsiveGATConv

        def options() -> Dict[str, Any]:  # each layer gets its own DropAttention module
            drop = DropAttention(**self.drop_attention) if self.drop_attention is not None else None
            return {
                "drop_attention": drop,
                "add_self_loops": self.self_loops,
                "lean": self.lean,
                "dropout": attn_dropout,
            }

        self.conv1 = Conv(in_channels, hidden_channels, heads=heads, **options())
        self.conv2 = Conv(heads * hidden_channels, out_channels, heads=out_heads, concat=False, **options())
        share_csr_cache(self)  # both lean layers read the same graph: one CSR of the edges, built once

    @property
    def model_kwargs(self) -> Dict[str, Any]:
        """The constructor arguments, so that ``TwoLayerGAT(**model.model_kwargs)`` rebuilds the architecture."""
        return {
            "in_channels": self.in_channels,
            "out_channels": self.out_channels,
            "hidden_channels": self.hidden_channels,
            "heads": self.heads,
            "out_heads": self.out_heads,
            "dropout": self.dropout,
            "attn_dropout": self.attn_dropout,
            "v2": self.v2,
            "drop_attention": self.drop_attention,
            "self_loops": self.self_loops,
            "lean": self.lean,
        }

    def reset_parameters(self) -> None:
        self.conv1.reset_parameters()
        self.conv2.reset_parameters()

    def _input_dropout(self, x: Tensor) -> Tensor:
        if not x.is_sparse:
            return F.dropout(x, p=self.dropout, training=self.training)
        # Sparse bag-of-words features: dropping only the stored entries is the same distribution as dense
        # dropout (zeros stay zero) and far cheaper; GATConv's linear layer accepts the sparse COO tensor.
        if not self.training or self.dropout == 0.0:
            return x
        x = x.coalesce()
        return torch.sparse_coo_tensor(
            x.indices(),
            F.dropout(x.values(), p=self.dropout, training=True),
            x.shape,
            is_coalesced=True,
            check_invariants=False,
        )

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        """Class logits ``[N, out_channels]``. ``x`` may be dense or a sparse COO tensor (bag-of-words features);
        input dropout then acts on its stored entries only, which has the same distribution as dense dropout."""
        return self.forward_with_attention(x, edge_index)[0]

    def forward_with_attention(
        self, x: Tensor, edge_index: Tensor
    ) -> Tuple[Tensor, List[Tuple[Tensor, Tensor]], Tensor]:
        """Logits, each layer's ``(alpha [E, H], destination index [E])``, and the first layer's head outputs
        ``[N, heads, hidden_channels]`` (before the ELU)."""
        x = self._input_dropout(x)
        h, (ei1, a1) = self.conv1(x, edge_index, return_attention_weights=True)
        head_out = h.view(-1, self.heads, self.hidden_channels)
        h = F.elu(h)
        h = F.dropout(h, p=self.dropout, training=self.training)
        out, (ei2, a2) = self.conv2(h, edge_index, return_attention_weights=True)
        return out, [(a1, ei1[1]), (a2, ei2[1])], head_out

    @torch.no_grad()
    def head_outputs(self, x: Tensor, edge_index: Tensor) -> Tensor:
        """First-layer head outputs ``[N, heads, hidden_channels]`` in the current mode (no gradient): each head's
        aggregated messages, before ``conv1``'s bias (as :mod:`graph_rma.diagnostics` captures them)."""
        x = self._input_dropout(x)
        out = self.conv1(x, edge_index)
        if self.conv1.bias is not None:
            out = out - self.conv1.bias
        return out.view(-1, self.heads, self.hidden_channels)

    def __repr__(self) -> str:
        da = f", drop_attention={self.drop_attention}" if self.drop_attention else ""
        loops = "" if self.self_loops else ", self_loops=False"
        return (
            f"{type(self).__name__}({self.in_channels}, {self.out_channels}, hidden={self.hidden_channels}, "
            f"heads={self.heads}, out_heads={self.out_heads}, dropout={self.dropout}, "
            f"attn_dropout={self.attn_dropout}, v2={self.v2}{da}{loops})"
        )
