r"""GraphWriter's graph-transformer block (Koncel-Kedziorski et al., NAACL 2019) on sparse PyG graphs.

Each node attends over its *incoming* edges ``j -> i`` (self-loops included when the graph has them) with
multi-head scaled dot-product attention, normalised by a sparse edge softmax
(:func:`torch_geometric.utils.softmax`), so a whole :class:`~torch_geometric.data.Batch` of graphs is one call with
no per-graph Python loop.

For head :math:`h` with head dimension :math:`d = C / H`:

.. math::
    q_i^h = W_Q^h x_i,\quad k_j^h = W_K^h x_j,\quad v_j^h = W_V^h x_j,\qquad
    \alpha_{ij}^h = \operatorname{softmax}_{j \in \mathcal{N}(i)}
        \Big(\frac{\langle q_i^h, k_j^h\rangle}{\sqrt{d}}\Big)

.. math::
    a_i = W_O\,\big\Vert_{h=1}^{H} \sum_{j \in \mathcal{N}(i)} \tilde\alpha_{ij}^h v_j^h,\qquad
    \hat x_i = \mathrm{LN}_1(x_i + \mathrm{drop}(a_i)),\qquad
    x_i' = \mathrm{LN}_2\big(\hat x_i + \mathrm{drop}(W_2\,\mathrm{PReLU}(W_1 \hat x_i))\big)

with :math:`W_1: C \to 4C`, :math:`W_2: 4C \to C`, and :math:`\tilde\alpha` the attention after dropout: plain
dropout with ``attention_dropout``, or, when a :class:`graph_rma.DropAttention` is given, the protocol of
:class:`~graph_rma.nn.RepulsiveGATConv`: one softmax over each target's *surviving* incoming edges
(:meth:`graph_rma.DropAttention.sparse_softmax`; dropped scores set to :math:`-\infty`, a target left without a
survivor keeps its plain softmax), with the element-mode edge order for ``window > 1`` cached by the module while the
edges stay the same.

Differences from the original implementation (``models/last_graph.py`` in rikdz/GraphWriter), on purpose:

* **Keys and values keep their gradient.** The original built its neighbour tensor with
  ``torch.tensor(..., requires_grad=False)``, so gradients flowed only through the query side of every block.
* **Scores are scaled by** :math:`\sqrt{d}` (head dimension), not :math:`\sqrt{C}` (hidden size) as in the original.
* **Attention dropout is off at inference.** The original's attention dropout was applied regardless of
  ``model.eval()``; here dropout (and DropAttention) only act when ``self.training``.
* The original had no residual around the attention sub-block and re-used one LayerNorm twice (its ``ln_2`` was
  unused); here it is the standard post-LN transformer block above with two LayerNorms and an output projection
  :math:`W_O`.
* Sparse edge lists instead of a dense ``N x N`` adjacency per graph, batched over graphs.

The heads are particles for :class:`graph_rma.SVGD` / :class:`graph_rma.SPOS`: head :math:`h` is its rows of
:math:`W_Q, W_K, W_V` (and biases), with roles ``query``, ``key`` and ``value`` (registered with
:func:`graph_rma.register_head_layout`).
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import torch.nn.functional as F
from torch import Tensor, nn
from torch_geometric.utils import softmax

from .._errors import GraphRMAError
from ..dropattention import DropAttention
from ..particles import HeadParam, register_head_layout
from .lean import CSRCache, EdgeCSR, cached_csr, edge_aggregate, edge_dot, edge_softmax, share_csr_cache
from .lean.fused import DOT_SCORE, fused_attention, fused_weights
from .lean.layers import fused_csr, layer_dropout
from .lean.strategy import lean_strategy

__all__ = ["GraphTransformerLayer", "GraphTransformerEncoder"]


class GraphTransformerLayer(nn.Module):
    r"""One graph-transformer block: sparse multi-head attention over incoming edges, residual, LayerNorm,
    4x position-wise feed-forward with PReLU, residual, LayerNorm (see the module docstring for the equations).

    Args:
        channels: hidden size :math:`C` (input and output).
        heads: number of heads :math:`H`; must divide ``channels``.
        dropout: dropout on the attention output and the feed-forward output.
        attention_dropout: dropout on the edge weights :math:`\alpha` (training only); ignored when
            ``drop_attention`` is given.
        ffn_ratio: width of the feed-forward layer as a multiple of ``channels`` (4 in GraphWriter).
        drop_attention: optional :class:`graph_rma.DropAttention`; during training the edge weights are its
            softmax over the surviving edges (:meth:`~graph_rma.DropAttention.sparse_softmax`), in place of
            ``attention_dropout``.
        bias: whether the projections have biases.
        lean: compute scores and aggregation with :mod:`graph_rma.nn.lean`, keeping no
            ``[E, H, C / H]`` tensor for backward (same outputs and parameters; for large graphs). On CPU the
            edges' CSR is kept in ``csr_cache`` (a :class:`~graph_rma.nn.lean.CSRCache`, checked
            exactly against the edge index at every call; ``reset_cache()`` empties it). On CUDA tensors with
            Triton installed, fused Triton kernels (:mod:`graph_rma.nn.lean.fused`; the attention dropout drawn
            in the kernel, the returned weights from a separate kernel); ``GRAPH_RMA_LEAN`` forces a strategy.

    Shapes:
        ``x`` ``[N, C]``, ``edge_index`` ``[2, E]`` (row 0 source ``j``, row 1 target ``i``) -> ``[N, C]``;
        with ``return_attention_weights=True`` also ``(edge_index, alpha [E, H])`` (before dropout).
    """

    accepts_drop_attention = True  # graph_rma.variants.apply_variant installs DropAttention here

    def __init__(
        self,
        channels: int,
        heads: int = 4,
        dropout: float = 0.1,
        attention_dropout: float = 0.1,
        ffn_ratio: int = 4,
        drop_attention: Optional[nn.Module] = None,
        bias: bool = True,
        lean: bool = False,
    ) -> None:
        super().__init__()
        if not isinstance(channels, int) or channels <= 0:
            raise GraphRMAError(f"channels: expected a positive int, got {channels!r}")
        if not isinstance(heads, int) or heads <= 0 or channels % heads != 0:
            raise GraphRMAError(f"heads: expected a positive int dividing channels={channels}, got {heads!r}")
        for name, p in (("dropout", dropout), ("attention_dropout", attention_dropout)):
            if not 0.0 <= p < 1.0:
                raise GraphRMAError(f"{name}: expected a probability in [0, 1), got {p!r}")
        if not isinstance(ffn_ratio, int) or ffn_ratio <= 0:
            raise GraphRMAError(f"ffn_ratio: expected a positive int, got {ffn_ratio!r}")
        self.channels = channels
        self.heads = heads
        self.head_dim = channels // heads
        self.dropout = dropout
        self.attention_dropout = attention_dropout
        self.ffn_ratio = ffn_ratio
        self.lin_query = nn.Linear(channels, channels, bias=bias)
        self.lin_key = nn.Linear(channels, channels, bias=bias)
        self.lin_value = nn.Linear(channels, channels, bias=bias)
        self.lin_out = nn.Linear(channels, channels, bias=bias)
        self.norm1 = nn.LayerNorm(channels)
        self.ffn_in = nn.Linear(channels, ffn_ratio * channels)
        self.act = nn.PReLU(ffn_ratio * channels)
        self.ffn_out = nn.Linear(ffn_ratio * channels, channels)
        self.norm2 = nn.LayerNorm(channels)
        if drop_attention is not None and not isinstance(drop_attention, DropAttention):
            raise GraphRMAError(
                f"drop_attention: expected a graph_rma.DropAttention or None, got {type(drop_attention).__name__}"
            )
        self.drop_attention = drop_attention
        if not isinstance(lean, bool):
            raise GraphRMAError(f"lean: expected a bool, got {lean!r}")
        self.lean = lean
        self.csr_cache = CSRCache()
        self.reset_parameters()

    def reset_cache(self) -> None:
        """Drop the CSRs the lean path keeps (:attr:`csr_cache`)."""
        self.csr_cache.clear()

    def __setstate__(self, state: Dict[str, Any]) -> None:
        if "layout_cache" in state:  # a layer pickled by graph_rma 0.1.0 holds its CSR cache under this name
            state["csr_cache"] = state.pop("layout_cache")
        super().__setstate__(state)

    def reset_parameters(self) -> None:
        for lin in (self.lin_query, self.lin_key, self.lin_value, self.lin_out, self.ffn_in, self.ffn_out):
            nn.init.xavier_uniform_(lin.weight)
            if lin.bias is not None:
                nn.init.zeros_(lin.bias)
        self.norm1.reset_parameters()
        self.norm2.reset_parameters()
        nn.init.constant_(self.act.weight, 0.25)

    def scores(self, x: Tensor, edge_index: Tensor) -> Tensor:
        """The edge scores ``<q_i, k_j> / sqrt(d)`` ``[E, H]`` (before the softmax)."""
        return self._scores(x, edge_index, None)

    def _scores(self, x: Tensor, edge_index: Tensor, csr: Optional[EdgeCSR]) -> Tensor:
        N = x.size(0)
        src, dst = edge_index[0], edge_index[1]
        q = self.lin_query(x).view(N, self.heads, self.head_dim)
        k = self.lin_key(x).view(N, self.heads, self.head_dim)
        if self.lean:  # no [E, H, C] gather kept for backward
            return edge_dot(q, k, src, dst, 1.0 / math.sqrt(self.head_dim), csr)
        return (q[dst] * k[src]).sum(-1) / math.sqrt(self.head_dim)

    def attention(self, x: Tensor, edge_index: Tensor) -> Tensor:
        """The edge weights ``alpha`` ``[E, H]`` (softmax over each target's incoming edges; no dropout)."""
        return self._softmax(self.scores(x, edge_index), edge_index[1], num_nodes=x.size(0))

    @property
    def _softmax(self):
        return edge_softmax if self.lean else softmax

    def forward(
        self, x: Tensor, edge_index: Tensor, return_attention_weights: bool = False
    ) -> Union[Tensor, Tuple[Tensor, Tuple[Tensor, Tensor]]]:
        if x.dim() != 2 or x.size(1) != self.channels:
            raise GraphRMAError(f"x: expected shape [N, {self.channels}], got {tuple(x.shape)}")
        if edge_index.dim() != 2 or edge_index.size(0) != 2:
            raise GraphRMAError(f"edge_index: expected shape [2, E], got {tuple(edge_index.shape)}")
        N = x.size(0)
        if self.lean and lean_strategy(x) == "fused":
            agg, alpha = self._fused(x, edge_index, return_attention_weights)
        else:
            agg, alpha = self._attend(x, edge_index, return_attention_weights)
        a = self.lin_out(agg.reshape(N, self.channels))
        h = self.norm1(x + F.dropout(a, self.dropout, self.training))
        f = self.ffn_out(self.act(self.ffn_in(h)))
        out = self.norm2(h + F.dropout(f, self.dropout, self.training))
        if return_attention_weights:
            return out, (edge_index, alpha)
        return out

    def _fused(self, x: Tensor, edge_index: Tensor, weights: bool) -> Tuple[Tensor, Optional[Tensor]]:
        """``(aggregate [N, H, d], softmax weights [E, H] or None)`` from the fused kernels (lean path on CUDA)."""
        N, H, d = x.size(0), self.heads, self.head_dim
        csr = fused_csr(self, edge_index, N, N, 0)
        # the scale goes into the queries here, exactly (the kernels would take it in float32)
        q = self.lin_query(x).view(N, H, d) * (1.0 / math.sqrt(d))
        k, v = self.lin_key(x).view(N, H, d), self.lin_value(x).view(N, H, d)
        agg = fused_attention(DOT_SCORE, csr, v, q=q, k=k, dropout=layer_dropout(self, self.attention_dropout))
        return agg, (fused_weights(DOT_SCORE, csr, v, q=q, k=k) if weights else None)

    def _attend(self, x: Tensor, edge_index: Tensor, return_attention_weights: bool) -> Tuple[Tensor, Tensor]:
        """``(aggregate [N, H, d], softmax weights [E, H])``: the default path or the CSR / chunked lean path."""
        N = x.size(0)
        src, dst = edge_index[0], edge_index[1]
        # the lean path's CSR of the edges, for the scores and the aggregation (kept with the edge index)
        csr = cached_csr(self, edge_index, N, N, 0, x) if self.lean else None
        score = self._scores(x, edge_index, csr)
        if self.training and self.drop_attention is not None:  # softmax over the surviving edges
            lean = {"softmax_fn": edge_softmax} if self.lean else {}
            weights = self.drop_attention.sparse_softmax(
                score, src, dst, N, N, layer_rate=self.attention_dropout, **lean
            )
            alpha = self._softmax(score, dst, num_nodes=N) if return_attention_weights else weights
        else:
            alpha = weights = self._softmax(score, dst, num_nodes=N)
            if self.training and self.attention_dropout > 0:
                weights = F.dropout(alpha, p=self.attention_dropout, training=True)
        v = self.lin_value(x).view(N, self.heads, self.head_dim)
        if self.lean:
            agg = edge_aggregate(weights, v, src, dst, N, csr=csr)
        else:
            msg = weights.unsqueeze(-1) * v[src]
            agg = x.new_zeros(N, self.heads, self.head_dim).index_add_(0, dst, msg)
        return agg, alpha

    def __repr__(self) -> str:
        extra = f", drop_attention={self.drop_attention}" if self.drop_attention is not None else ""
        return f"{type(self).__name__}({self.channels}, heads={self.heads}, dropout={self.dropout}{extra})"


class GraphTransformerEncoder(nn.Module):
    r"""A stack of :class:`GraphTransformerLayer` blocks (GraphWriter: 6 layers, 4 heads, hidden 500).

    ``forward(x, edge_index, return_attention=False)`` returns the node states ``[N, C]`` and, with
    ``return_attention=True``, also a list with one ``(alpha [E, H], target index [E])`` pair per layer, the form
    :func:`graph_rma.regularization_loss` takes for sparse attention.

    ``drop_attention``: ``None``; a dict of :class:`graph_rma.DropAttention` options (``{"p": 0.1, "window": 2}``),
    giving each layer its own instance; a sequence of ``num_layers`` instances, one per layer; or **one instance,
    which is then shared by every layer** (each call still draws its own mask; the cached edge order is shared).
    :func:`graph_rma.apply_variant` installs one instance per layer.
    """

    def __init__(
        self,
        channels: int,
        num_layers: int = 6,
        heads: int = 4,
        dropout: float = 0.1,
        attention_dropout: float = 0.1,
        ffn_ratio: int = 4,
        drop_attention: Union[None, DropAttention, Dict[str, Any], Sequence[DropAttention]] = None,
        lean: bool = False,
    ) -> None:
        super().__init__()
        if not isinstance(num_layers, int) or num_layers < 1:
            raise GraphRMAError(f"num_layers: expected a positive int, got {num_layers!r}")
        if drop_attention is None or isinstance(drop_attention, DropAttention):
            drops = [drop_attention] * num_layers  # one instance: shared
        elif isinstance(drop_attention, dict):
            drops = [DropAttention(**drop_attention) for _ in range(num_layers)]
        elif isinstance(drop_attention, (list, tuple, nn.ModuleList)) and len(drop_attention) == num_layers:
            drops = list(drop_attention)
        else:
            raise GraphRMAError(
                f"drop_attention: expected None, a DropAttention, a dict of its options or "
                f"{num_layers} instances (one per layer), got {drop_attention!r}"
            )
        self.layers = nn.ModuleList(
            GraphTransformerLayer(channels, heads, dropout, attention_dropout, ffn_ratio, drop, lean=lean)
            for drop in drops
        )
        share_csr_cache(self)  # one CSR of the edges for every layer (lean=True)

    def reset_parameters(self) -> None:
        for layer in self.layers:
            layer.reset_parameters()

    def forward(self, x: Tensor, edge_index: Tensor, return_attention: bool = False):
        attention: List[Tuple[Tensor, Tensor]] = []
        for layer in self.layers:
            if return_attention:
                x, (_, alpha) = layer(x, edge_index, return_attention_weights=True)
                attention.append((alpha, edge_index[1]))
            else:
                x = layer(x, edge_index)
        return (x, attention) if return_attention else x

    def __repr__(self) -> str:
        first = self.layers[0]
        return (
            f"{type(self).__name__}({first.channels}, num_layers={len(self.layers)}, heads={first.heads}, "
            f"dropout={first.dropout})"
        )


def _graph_transformer_layout(m: GraphTransformerLayer) -> List[HeadParam]:
    """Head ``h`` = rows ``h*d:(h+1)*d`` of the query, key and value projections (weights and biases)."""
    out: List[HeadParam] = []
    for attr, role in (("lin_query", "query"), ("lin_key", "key"), ("lin_value", "value")):
        lin = getattr(m, attr)
        out.append(HeadParam(f"{attr}.weight", role, lin.weight, m.heads))
        if lin.bias is not None:
            out.append(HeadParam(f"{attr}.bias", role, lin.bias, m.heads))
    return out


register_head_layout(GraphTransformerLayer, _graph_transformer_layout)
