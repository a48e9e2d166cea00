"""The lean path's autograd Functions: each saves only ``[E, H]`` weights or masks, the edge index or its CSR and
node-level tensors, and computes with the CSR kernels (:mod:`~graph_rma.nn.lean.per_head`) when it has the edges'
CSR, else with the chunked ones (:mod:`~graph_rma.nn.lean.chunked`)."""

from __future__ import annotations

from typing import Any, Optional, Tuple

import torch
from torch import Tensor

from ..._errors import GraphRMAError
from . import chunked, per_head
from . import csr as csr_kernels
from .csr import EdgeCSR, edge_csr
from .score import node_terms, terms_backward_

__all__ = [
    "edge_aggregate",
    "softmax_aggregate",
    "edge_softmax",
    "gat_scores",
    "gat_attention",
    "gatv2_scores",
    "edge_dot",
    "draw_dropout",
    "dropped_weights",
    "csr_for",
]


def _zeros_if(needed: bool, like: Optional[Tensor]) -> Optional[Tensor]:
    return torch.zeros_like(like) if needed and like is not None else None


def _edges_if(
    csr: Optional[EdgeCSR], src: Optional[Tensor], dst: Optional[Tensor]
) -> Tuple[Optional[Tensor], Optional[Tensor]]:
    """What backward keeps of the edge index: nothing when it has the CSR."""
    return (None, None) if csr is not None else (src, dst)


def csr_for(
    csr: Optional[EdgeCSR], src: Tensor, dst: Tensor, num_src: int, num_dst: int, *tensors: Tensor
) -> Optional[EdgeCSR]:
    """The CSR to compute with: the given one, else a new one where the CSR kernels apply, else ``None``."""
    if csr is not None or not csr_kernels.csr_supported(*tensors):
        return csr
    return edge_csr(src, dst, num_src, num_dst)


def draw_dropout(E: int, H: int, like: Tensor, p: float) -> Tuple[Optional[Tensor], Optional[Tensor]]:
    """``(keep, scale)`` for dropout on an ``[E, H]`` tensor like ``like``: ``keep * scale`` is exactly the float
    noise ``F.dropout`` multiplies by on CPU, drawn the same way (same mask from the same seed)."""
    if p == 0.0 or E * H == 0:
        return None, None
    # Drawn straight into booleans: CPU's bernoulli_ yields the same 0/1 sequence for every dtype.
    keep = like.new_empty(E, H, dtype=torch.bool).bernoulli_(1.0 - p)
    return keep, (like.new_ones(1).div_(1.0 - p) if p < 1.0 else like.new_zeros(1))


# ----------------------------------------------------------------------------------------------------------------
# Aggregation, edge softmax
# ----------------------------------------------------------------------------------------------------------------
class _EdgeAggregate(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx: Any,
        w: Tensor,
        x: Tensor,
        src: Tensor,
        dst: Tensor,
        num_dst: int,
        keep: Optional[Tensor],
        scale: Optional[Tensor],
        csr: Optional[EdgeCSR] = None,
    ) -> Tensor:
        ctx.csr, ctx.softmax = csr, False
        # the CSR kernels need the CSR, not the edge index (let the caller's copy with self-loops go)
        ctx.save_for_backward(w, x, *_edges_if(csr, src, dst), keep, scale)
        if csr is not None:
            return per_head.aggregate(csr, w, x, keep, scale)
        return chunked.aggregate(w, x, src, dst, num_dst, keep, scale)

    @staticmethod
    def backward(ctx: Any, grad: Tensor):
        w, x, src, dst, keep, scale = ctx.saved_tensors
        grad = grad.contiguous()
        g_w = torch.empty_like(w) if ctx.needs_input_grad[0] or ctx.softmax else None
        g_x = _zeros_if(ctx.needs_input_grad[1], x)
        if ctx.csr is not None:
            per_head.aggregate_backward(ctx.csr, grad, w, x, keep, scale, g_w, g_x, ctx.softmax)
        else:
            chunked.aggregate_backward(grad, w, x, src, dst, keep, scale, g_w, g_x, ctx.softmax)
        return g_w, g_x, None, None, None, None, None, None


def edge_aggregate(
    w: Tensor,
    x: Tensor,
    src: Tensor,
    dst: Tensor,
    num_dst: int,
    keep: Optional[Tensor] = None,
    scale: Optional[Tensor] = None,
    csr: Optional[EdgeCSR] = None,
) -> Tensor:
    r""":math:`\mathbf{y}_{i,h} = \sum_{e=(j \to i)} w_{e,h} \mathbf{x}_{j,h}`: ``w`` ``[E, H]``, ``x``
    ``[N_src, H, C]``, ``src``/``dst`` ``[E]`` -> ``[num_dst, H, C]``. Saves ``w``, ``x`` and the indices.

    With a boolean ``keep`` ``[E, H]`` and a one-element ``scale``, the weights are ``w * keep * scale``
    (attention dropout fused in: only the boolean mask is kept, not a second ``[E, H]`` float tensor).
    ``csr``: the edges' :class:`~graph_rma.nn.lean.csr.EdgeCSR` (built here when the CSR kernels apply
    and none is given)."""
    csr = csr_for(csr, src, dst, x.size(0), num_dst, w, x)
    return _EdgeAggregate.apply(w, x, src, dst, num_dst, keep, scale, csr)


class _SoftmaxAggregate(torch.autograd.Function):
    """Edge softmax, plain dropout and aggregation in one node: saves the softmax output ``[E, H]``, the boolean
    dropout mask, ``x`` and the indices; backward writes the scores' gradient into one ``[E, H]`` buffer."""

    @staticmethod
    def forward(
        ctx: Any,
        scores: Tensor,
        x: Tensor,
        src: Tensor,
        dst: Tensor,
        num_dst: int,
        p: float,
        inplace: bool,
        csr: Optional[EdgeCSR] = None,
    ) -> Tensor:
        alpha = chunked.softmax(scores, dst, num_dst, inplace=inplace)
        keep, scale = draw_dropout(alpha.size(0), alpha.size(1), alpha, p)
        out = _EdgeAggregate.forward(ctx, alpha, x, src, dst, num_dst, keep, scale, csr)
        ctx.softmax = True
        return out

    backward = staticmethod(_EdgeAggregate.backward)


def softmax_aggregate(
    scores: Tensor,
    x: Tensor,
    src: Tensor,
    dst: Tensor,
    num_dst: int,
    p: float = 0.0,
    inplace: bool = False,
    csr: Optional[EdgeCSR] = None,
) -> Tensor:
    r""":func:`edge_softmax`, attention dropout with probability ``p`` (a mask drawn as ``F.dropout`` draws it on
    CPU) and :func:`edge_aggregate` as one autograd node, which keeps only the softmax output and the boolean mask
    per edge. ``inplace`` lets the softmax overwrite ``scores`` (a fresh tensor nobody else reads); ``csr`` as in
    :func:`edge_aggregate`."""
    csr = csr_for(csr, src, dst, x.size(0), num_dst, scores, x)
    return _SoftmaxAggregate.apply(scores, x, src, dst, num_dst, float(p), inplace, csr)


class _EdgeSoftmax(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, logits: Tensor, index: Tensor, num_nodes: int) -> Tensor:
        out = chunked.softmax(logits, index, num_nodes)
        ctx.save_for_backward(out, index)
        ctx.num_nodes = num_nodes
        return out

    @staticmethod
    def backward(ctx: Any, grad: Tensor):
        out, index = ctx.saved_tensors
        g = grad.clone(memory_format=torch.contiguous_format)
        return chunked.softmax_backward_(g, out, index, ctx.num_nodes), None, None


def edge_softmax(
    src: Tensor,
    index: Optional[Tensor] = None,
    ptr: Optional[Tensor] = None,
    num_nodes: Optional[int] = None,
    dim: int = 0,
) -> Tensor:
    r"""PyG's :func:`~torch_geometric.utils.softmax` over groups ``index`` of dimension 0, keeping only its output
    for backward (PyG's keeps two ``[E, H]`` tensors besides). ``ptr`` is ignored when ``index`` is given."""
    if index is None:
        if ptr is None:
            raise GraphRMAError("index: expected the group of every row (or ptr), got None")
        index = torch.repeat_interleave(torch.arange(ptr.numel() - 1, device=ptr.device), ptr.diff())
    if dim != 0:
        raise GraphRMAError(f"dim: edge_softmax normalises over dimension 0, got {dim}")
    n = int(index.max()) + 1 if num_nodes is None and index.numel() > 0 else int(num_nodes or 0)
    return _EdgeSoftmax.apply(src, index, n)


# ----------------------------------------------------------------------------------------------------------------
# GAT
# ----------------------------------------------------------------------------------------------------------------
class _GATScores(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx: Any,
        a_src: Tensor,
        a_dst: Optional[Tensor],
        a_edge: Optional[Tensor],
        src: Tensor,
        dst: Tensor,
        slope: float,
    ) -> Tensor:
        ctx.save_for_backward(a_src, a_dst, a_edge, src, dst)
        ctx.slope = slope
        return chunked.gat_scores(a_src, a_dst, a_edge, src, dst, slope)

    @staticmethod
    def backward(ctx: Any, grad: Tensor):
        a_src, a_dst, a_edge, src, dst = ctx.saved_tensors
        g = chunked.gat_scores_backward(grad, a_src, a_dst, a_edge, src, dst, ctx.slope)
        g_src = a_src.new_zeros(a_src.shape).index_add_(0, src, g) if ctx.needs_input_grad[0] else None
        g_dst = (
            a_dst.new_zeros(a_dst.shape).index_add_(0, dst, g)
            if a_dst is not None and ctx.needs_input_grad[1]
            else None
        )
        g_edge = g if a_edge is not None and ctx.needs_input_grad[2] else None
        return g_src, g_dst, g_edge, None, None, None


def gat_scores(
    a_src: Tensor, a_dst: Optional[Tensor], a_edge: Optional[Tensor], src: Tensor, dst: Tensor, negative_slope: float
) -> Tensor:
    r"""GAT scores :math:`\mathrm{LeakyReLU}(a_{j,h} + b_{i,h} + c_{e,h})` ``[E, H]`` from ``a_src``
    ``[N_src, H]``, ``a_dst`` ``[N_dst, H]`` (or ``None``) and ``a_edge`` ``[E, H]`` (or ``None``); keeps no
    per-edge tensor but ``a_edge``."""
    return _GATScores.apply(a_src, a_dst, a_edge, src, dst, float(negative_slope))


class _GATAttention(torch.autograd.Function):
    """GAT's per-node score terms, scores, edge softmax, plain dropout and aggregation as one node. Per edge it keeps
    only the dropout mask (as bits with the CSR kernels) and the CSR or edge index: the weights are recomputed in
    backward from the node features, the attention vectors and the softmax's log-normaliser per destination."""

    @staticmethod
    def forward(
        ctx: Any,
        x: Tensor,
        att_src: Tensor,
        x_dst: Optional[Tensor],
        att_dst: Optional[Tensor],
        a_edge: Optional[Tensor],
        src: Optional[Tensor],
        dst: Optional[Tensor],
        num_dst: int,
        slope: float,
        p: float,
        csr: Optional[EdgeCSR] = None,
    ) -> Tensor:
        ctx.csr, ctx.slope = csr, slope
        E = csr.col.numel() if csr is not None else src.numel()
        keep, scale = draw_dropout(E, x.size(1), x, p)
        if csr is not None:
            keep = per_head.pack_mask(keep, csr)  # the [E, H] booleans go: 1 byte per edge for 8 heads, not 8
            out, lse = per_head.gat_forward(csr, x, att_src, x_dst, att_dst, a_edge, slope, keep, scale)
        else:
            a_src, a_dst = node_terms(x, att_src, x_dst, att_dst)
            out, lse = chunked.gat_forward(x, a_src, a_dst, a_edge, src, dst, num_dst, slope, keep, scale)
        ctx.save_for_backward(x, att_src, x_dst, att_dst, a_edge, *_edges_if(csr, src, dst), keep, scale, lse)
        return out

    @staticmethod
    def backward(ctx: Any, grad: Tensor):
        x, att_src, x_dst, att_dst, a_edge, src, dst, keep, scale, lse = ctx.saved_tensors
        need = ctx.needs_input_grad
        grad = grad.contiguous()
        g_x, g_att_src = _zeros_if(need[0], x), _zeros_if(need[1], att_src)
        g_xd, g_att_dst = _zeros_if(x_dst is not None and need[2], x_dst), _zeros_if(need[3], att_dst)
        g_edge = a_edge.new_empty(a_edge.shape) if a_edge is not None and need[4] else None
        if ctx.csr is not None:
            per_head.gat_backward(
                ctx.csr,
                grad,
                x,
                att_src,
                x_dst,
                att_dst,
                a_edge,
                keep,
                scale,
                lse,
                ctx.slope,
                g_x,
                g_att_src,
                g_xd,
                g_att_dst,
                g_edge,
            )
        else:
            a_src, a_dst = node_terms(x, att_src, x_dst, att_dst)  # recomputed: [N, H] each
            # dL/da, dL/db: needed for the attention vectors and, through them, the features
            g_a = _zeros_if(g_x is not None or g_att_src is not None, a_src)
            g_b = _zeros_if(g_att_dst is not None or g_xd is not None or (x_dst is None and g_x is not None), a_dst)
            chunked.gat_backward(
                grad, x, a_src, a_dst, a_edge, src, dst, keep, scale, lse, ctx.slope, g_x, g_a, g_b, g_edge
            )
            terms_backward_(g_a, g_b, x, att_src, x_dst, att_dst, g_x, g_att_src, g_xd, g_att_dst)
        return g_x, g_att_src, g_xd, g_att_dst, g_edge, None, None, None, None, None, None


def gat_attention(
    x: Tensor,
    att_src: Tensor,
    x_dst: Optional[Tensor],
    att_dst: Optional[Tensor],
    a_edge: Optional[Tensor],
    src: Optional[Tensor],
    dst: Optional[Tensor],
    num_dst: int,
    negative_slope: float,
    p: float = 0.0,
    csr: Optional[EdgeCSR] = None,
) -> Tensor:
    r"""The whole GAT attention, :math:`\mathbf{y}_i = \sum_{e = (j \to i)} \mathrm{drop}(\alpha_e)\,
    \mathbf{x}_j` with :math:`\alpha = \operatorname{softmax}(\mathrm{LeakyReLU}(a_j + b_i + c_e))`
    (:mod:`~graph_rma.nn.lean.score`), as one autograd node that keeps per edge only the boolean dropout mask
    (``p`` > 0; drawn as ``F.dropout`` draws it on CPU) and recomputes the weights in backward from node-level
    terms. ``[num_dst, H, C]``.

    ``x`` ``[N_src, H, C]``, ``att_src`` ``[1, H, C]``; ``x_dst`` ``[N_dst, H, C]`` or ``None`` for ``x`` itself;
    ``att_dst`` ``[1, H, C]`` or ``None`` for no destination term; ``a_edge`` ``[E, H]`` or ``None``. ``src``/``dst``
    may be ``None`` when ``csr`` is given."""
    if csr is None:
        assert src is not None and dst is not None
        csr = csr_for(None, src, dst, x.size(0), num_dst, att_src, x)
    return _GATAttention.apply(
        x, att_src, x_dst, att_dst, a_edge, src, dst, num_dst, float(negative_slope), float(p), csr
    )


# ----------------------------------------------------------------------------------------------------------------
# GATv2 and dot-product scores, dropped weights
# ----------------------------------------------------------------------------------------------------------------
class _GATv2Scores(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx: Any,
        x_src: Tensor,
        x_dst: Tensor,
        att: Tensor,
        edge_attr: Optional[Tensor],
        w_edge: Optional[Tensor],
        src: Tensor,
        dst: Tensor,
        slope: float,
    ) -> Tensor:
        ctx.save_for_backward(x_src, x_dst, att, edge_attr, w_edge, src, dst)
        ctx.slope = slope
        return chunked.gatv2_scores(x_src, x_dst, att, edge_attr, w_edge, src, dst, slope)

    @staticmethod
    def backward(ctx: Any, grad: Tensor):
        x_src, x_dst, att, edge_attr, w_edge, src, dst = ctx.saved_tensors
        need = ctx.needs_input_grad
        g_src, g_dst, g_att = _zeros_if(need[0], x_src), _zeros_if(need[1], x_dst), _zeros_if(need[2], att)
        g_attr = torch.empty_like(edge_attr) if edge_attr is not None and need[3] else None
        g_w = _zeros_if(w_edge is not None and need[4], w_edge)
        chunked.gatv2_scores_backward(
            grad, x_src, x_dst, att, edge_attr, w_edge, src, dst, ctx.slope, g_src, g_dst, g_att, g_attr, g_w
        )
        return g_src, g_dst, g_att, g_attr, g_w, None, None, None


def gatv2_scores(
    x_src: Tensor,
    x_dst: Tensor,
    att: Tensor,
    edge_attr: Optional[Tensor],
    w_edge: Optional[Tensor],
    src: Tensor,
    dst: Tensor,
    negative_slope: float,
) -> Tensor:
    r"""GATv2 scores :math:`\sum_c a_{h,c}\,\mathrm{LeakyReLU}(\mathbf{x}_{j} + \mathbf{r}_{i} + W_e
    \mathbf{e}_e)_{h,c}` ``[E, H]``: ``x_src`` ``[N_src, H, C]``, ``x_dst`` ``[N_dst, H, C]``, ``att``
    ``[1, H, C]``, optional ``edge_attr`` ``[E, D]`` with ``w_edge`` ``[H * C, D]`` (a bias-free edge projection).
    Keeps no per-edge tensor; always chunked (a nonlinearity of the gathered features)."""
    return _GATv2Scores.apply(x_src, x_dst, att, edge_attr, w_edge, src, dst, float(negative_slope))


class _EdgeDot(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx: Any, q: Tensor, k: Tensor, src: Tensor, dst: Tensor, scale: float, csr: Optional[EdgeCSR] = None
    ) -> Tensor:
        out = per_head.edge_dot(csr, q, k) if csr is not None else chunked.edge_dot(q, k, src, dst)
        ctx.save_for_backward(q, k, *_edges_if(csr, src, dst))
        ctx.scale, ctx.csr = scale, csr
        return out.mul_(scale)

    @staticmethod
    def backward(ctx: Any, grad: Tensor):
        q, k, src, dst = ctx.saved_tensors
        g_q, g_k = _zeros_if(ctx.needs_input_grad[0], q), _zeros_if(ctx.needs_input_grad[1], k)
        if ctx.csr is not None:
            per_head.edge_dot_backward(ctx.csr, grad, q, k, ctx.scale, g_q, g_k)
        else:
            chunked.edge_dot_backward(grad, q, k, src, dst, ctx.scale, g_q, g_k)
        return g_q, g_k, None, None, None, None


def edge_dot(
    q: Tensor, k: Tensor, src: Tensor, dst: Tensor, scale: float = 1.0, csr: Optional[EdgeCSR] = None
) -> Tensor:
    r"""Scores :math:`\gamma \langle \mathbf{q}_{i,h}, \mathbf{k}_{j,h} \rangle` ``[E, H]`` for edges ``j -> i``:
    ``q`` ``[N_dst, H, C]``, ``k`` ``[N_src, H, C]``. Keeps no per-edge tensor; ``csr`` as in
    :func:`edge_aggregate`."""
    csr = csr_for(csr, src, dst, k.size(0), q.size(0), q, k)
    return _EdgeDot.apply(q, k, src, dst, float(scale), csr)


class _Dropped(torch.autograd.Function):
    """``w * keep * scale`` for the returned attention weights (saves the mask, not the product)."""

    @staticmethod
    def forward(ctx: Any, w: Tensor, keep: Tensor, scale: Tensor) -> Tensor:
        ctx.save_for_backward(keep, scale)
        return chunked.weights(w, keep, scale, 0, w.size(0))

    @staticmethod
    def backward(ctx: Any, grad: Tensor):
        keep, scale = ctx.saved_tensors
        return chunked.weights(grad, keep, scale, 0, grad.size(0)), None, None


def dropped_weights(w: Tensor, keep: Optional[Tensor], scale: Optional[Tensor]) -> Tensor:
    """The attention weights after plain dropout, as the stock layers return them."""
    return w if keep is None else _Dropped.apply(w, keep, scale)
