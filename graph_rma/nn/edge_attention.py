r"""Memory-lean edge attention: sparse attention layers that keep no ``[E, heads, channels]`` tensor for backward.

A sparse attention layer over edges :math:`e = (j \to i)` with :math:`H` heads of :math:`C` channels computes

.. math::
    s_{e,h} = \mathrm{score}_h(j, i, e), \qquad
    \alpha_{e,h} = \frac{\exp s_{e,h}}{\sum_{e' \to i} \exp s_{e',h}}, \qquad
    \tilde\alpha = \mathrm{drop}(\alpha), \qquad
    \mathbf{y}_{i,h} = \sum_{e = (j \to i)} \tilde\alpha_{e,h}\, \mathbf{x}_{j,h}.

Written with autograd ops (as PyG's ``MessagePassing`` does) the gathered features :math:`\mathbf{x}_{j,h}` and
the messages :math:`\tilde\alpha_{e,h} \mathbf{x}_{j,h}` are ``[E, H, C]`` tensors, and autograd keeps them (and
those of the score) until backward: about 1.5 KB per edge for 8 heads of 8 channels. Backward truly needs much
less. With :math:`\mathbf{g}_i = \partial L / \partial \mathbf{y}_i`:

.. math::
    \frac{\partial L}{\partial \tilde\alpha_{e,h}} = \langle \mathbf{g}_{i,h}, \mathbf{x}_{j,h} \rangle, \qquad
    \frac{\partial L}{\partial \mathbf{x}_{j,h}} = \sum_{e = (j \to i)} \tilde\alpha_{e,h}\, \mathbf{g}_{i,h}
    \qquad \text{(aggregation: } \tilde\alpha, \text{node features, edge index)},

.. math::
    \frac{\partial L}{\partial s_{e,h}} = \alpha_{e,h} \Big(\frac{\partial L}{\partial \alpha_{e,h}}
        - \sum_{e' \to i} \alpha_{e',h} \frac{\partial L}{\partial \alpha_{e',h}}\Big)
    \qquad \text{(edge softmax: its output } \alpha \text{ only)},

and the score's gradient is recomputed from node-level tensors. The functions here are
:class:`torch.autograd.Function` s that save only those: ``[E, H]`` weights, the edge index and node-level
tensors.

Two kernels compute the products. On CPU tensors of ``float32``/``float64`` outside :func:`torch.compile`
(:func:`~graph_rma.nn.edge_layout.csr_supported`) the aggregation, its transpose and
:math:`\langle \mathbf{g}_{i,h}, \mathbf{x}_{j,h} \rangle` are sparse-dense products over the edges' CSR layout
(:mod:`graph_rma.nn.edge_layout`), one head at a time: no ``[E, C]`` tensor is formed at all, per-edge
temporaries are ``[E]`` vectors, and backward keeps the layout (20 bytes per edge) instead of the edge
index. The layers build the layout of a ``[2, E]`` edge index once and keep it while that tensor lives and holds
the same values, checked exactly at every call (:func:`~graph_rma.nn.edge_layout.cached_edge_layout`, for the most
recently used edge indexes): full-batch training sorts its edges once. Elsewhere (GPU, half precision, compiled graphs) a per-edge
``[E, H, C]`` product is formed in chunks of edges (:data:`CHUNK_BYTES`, :data:`MAX_CHUNKS`) and dropped at
once, in forward and again in backward. The GATv2 score, a nonlinearity of the gathered features, is always
chunked. Edges need no particular order.

For GAT, :math:`s_{e,h} = \mathrm{LeakyReLU}(a_{j,h} + b_{i,h} + c_{e,h})` with
:math:`a_{j,h} = \langle \mathbf{a}^{src}_h, \mathbf{x}_{j,h} \rangle` is cheap to recompute from the node features,
so :func:`gat_attention` goes further: it takes the features and attention vectors themselves, and with
per-destination softmax statistics (``[N, H]``) saved, :math:`\alpha_{e,h}` is recomputed in backward. With the CSR
kernels it runs one head at a time from end to end (score terms, scores, softmax, dropout, product, and in backward
the gradients of the features and attention vectors), keeps the dropout mask as one bit per edge and head (one
byte per edge for up to 8 heads) and the softmax's log-normaliser, and allocates its per-edge work vectors once;
its output's storage has a few spare bytes (:func:`_with_slack`), so that the loss's gradients can reuse its
memory. Otherwise it works chunk by chunk, in two backward passes over the edges (the first sums
:math:`\sum_{e' \to i} \alpha \partial L / \partial \alpha` per destination, the second forms
:math:`\partial L / \partial s`), keeping the boolean mask and the softmax maximum and sum. Per edge it keeps only
the mask and the edge layout (or index).

* :func:`edge_aggregate` -- :math:`\mathbf{y} = \sum \tilde\alpha \mathbf{x}_j` (sparse-dense product per head).
* :func:`edge_softmax` -- PyG's :func:`~torch_geometric.utils.softmax` (same signature and values) saving only
  its output.
* :func:`gat_scores` -- GAT: :math:`\mathrm{LeakyReLU}(a_j + b_i + c_e)` from per-node ``[N, H]`` terms,
  recomputed in backward.
* :func:`gatv2_scores` -- GATv2: :math:`\mathbf{a}_h^\top \mathrm{LeakyReLU}(\mathbf{x}_{j,h} + \mathbf{r}_{i,h}
  + W_e \mathbf{e}_{e})_h`, chunked, recomputed in backward.
* :func:`edge_dot` -- dot-product scores :math:`\gamma \langle \mathbf{q}_{i,h}, \mathbf{k}_{j,h} \rangle`
  (graph transformer), chunked.
* :func:`softmax_aggregate` -- edge softmax, dropout and aggregation as one node (GATv2).
* :func:`gat_attention` -- GAT scores, softmax, dropout and aggregation as one node (above).
* :func:`gat_forward` / :func:`gatv2_forward` -- the whole forward of ``GATConv`` / ``GATv2Conv`` built from
  these, used by :class:`~graph_rma.nn.RepulsiveGATConv` and :class:`~graph_rma.nn.RepulsiveGATv2Conv` with
  ``lean=True``.

Outputs equal the stock layers' to float rounding (sums are taken in another order); the same parameters, the
same random draws (plain dropout and DropAttention draw their masks at the same point, on the same ``[E, H]``
shape), the same returned attention weights. Under :func:`torch.compile` the chunk loop is traced as one chunk.
"""
from __future__ import annotations

from typing import Any, Iterator, Optional, Tuple, Union

import torch
import torch.nn.functional as F
from torch import Tensor
from torch_geometric.typing import SparseTensor
from torch_geometric.utils import add_self_loops, is_torch_sparse_tensor, remove_self_loops, scatter, to_edge_index
from torch_geometric.utils.sparse import set_sparse_value

from .edge_layout import (EdgeLayout, cached_edge_layout, csr_supported, edge_layout, sddmm, segment_max,
                          segment_sum, spmm, spmm_t)

__all__ = ["CHUNK_BYTES", "MAX_CHUNKS", "edge_aggregate", "edge_softmax", "gat_scores", "gatv2_scores", "edge_dot",
           "softmax_aggregate", "gat_attention", "gat_forward", "gatv2_forward", "check_lean", "attention_softmax",
           "dropout_mask"]

#: Per-chunk temporaries take about this many bytes (a few of them live at once) ...
CHUNK_BYTES = 1 << 20
#: ... or more, so that one pass has at most this many chunks (each chunk is a few small ops, and small ops cost
#: more than their share when threads wait on each other): the temporaries stay below ~3 / MAX_CHUNKS of an
#: ``[E, H, C]`` tensor.
MAX_CHUNKS = 64


def _chunks(num_edges: int, row_bytes: int) -> Iterator[Tuple[int, int]]:
    """``(start, end)`` of consecutive edge chunks whose ``[chunk, H, C]`` rows take at most :data:`CHUNK_BYTES`."""
    if torch.compiler.is_compiling():  # one traced chunk; the compiler fuses gather, product and scatter itself
        yield 0, num_edges
        return
    step = max(1, CHUNK_BYTES // max(1, row_bytes), -(-num_edges // MAX_CHUNKS))
    for a in range(0, num_edges, step):
        yield a, min(a + step, num_edges)


def _zeros_if(needed: bool, like: Optional[Tensor]) -> Optional[Tensor]:
    return torch.zeros_like(like) if needed and like is not None else None


# ----------------------------------------------------------------------------------------------------------------
# Aggregation: y_i = sum_{e=(j->i)} w_e * x_j, per head
# ----------------------------------------------------------------------------------------------------------------
def _weights(w: Tensor, keep: Optional[Tensor], scale: Optional[Tensor], a: int, b: int) -> Tensor:
    """Chunk ``[a, b)`` of the weights ``w * keep * scale`` (``keep * scale`` is exactly dropout's float noise)."""
    if keep is None or scale is None:
        return w[a:b]
    return w[a:b] * keep[a:b].to(w.dtype).mul_(scale)


def _times_mask(v: Tensor, mask: Tensor, buffer: Optional[Tensor] = None) -> Tensor:
    """``v *= mask`` for a boolean or integer 0/1 ``mask``; ``buffer`` (like ``v``) takes its float copy, which
    ``v.mul_(mask)`` would allocate."""
    return v.mul_(mask if buffer is None else buffer.copy_(mask))


def _csr_mask(keep: Optional[Tensor], layout: EdgeLayout, h: int) -> Optional[Tensor]:
    """Head ``h``'s boolean dropout mask in CSR order."""
    return None if keep is None else keep[:, h].index_select(0, layout.perm)


def _csr_weights(w: Tensor, mask: Optional[Tensor], scale: Optional[Tensor], layout: EdgeLayout, h: int) -> Tensor:
    """Head ``h``'s weights ``w * mask * scale`` in CSR order (``w`` ``[E, H]`` in edge order, ``mask`` the head's
    CSR-order mask from :func:`_csr_mask`)."""
    v = w[:, h].index_select(0, layout.perm)
    return v if mask is None else _times_mask(v, mask).mul_(scale)


def _csr_softmax_backward(layout: EdgeLayout, grad: Tensor, alpha: Tensor, buffer: Optional[Tensor] = None) -> Tensor:
    r""":math:`\alpha_e (g_e - \sum_{e' \to i} \alpha_{e'} g_{e'})` for one head in CSR order, in ``grad``'s
    buffer (the edge softmax's backward; ``buffer``: an ``[E]`` work vector, else a new one)."""
    grad.mul_(alpha)
    per_edge = torch.index_select(segment_sum(layout, grad), 0, layout.row, out=buffer)
    return grad.sub_(per_edge.mul_(alpha))


def _edges_if(layout: Optional[EdgeLayout], src: Tensor, dst: Tensor) -> Tuple[Optional[Tensor], Optional[Tensor]]:
    """What backward keeps of the edge index: nothing when it has the CSR layout."""
    return (None, None) if layout is not None else (src, dst)


def _layout_for(layout: Optional[EdgeLayout], src: Tensor, dst: Tensor, num_src: int, num_dst: int,
                *tensors: Tensor) -> Optional[EdgeLayout]:
    """The layout to compute with: the given one, else a new one where the CSR kernels apply, else ``None``."""
    if layout is not None or not csr_supported(*tensors):
        return layout
    return edge_layout(src, dst, num_src, num_dst)


class _EdgeAggregate(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, w: Tensor, x: Tensor, src: Tensor, dst: Tensor, num_dst: int, keep: Optional[Tensor],
                scale: Optional[Tensor], layout: Optional[EdgeLayout] = None) -> Tensor:
        H, C = x.size(1), x.size(2)
        ctx.layout = layout
        # the CSR kernels need the layout, not the edge index (let the caller's copy with self-loops go)
        ctx.save_for_backward(w, x, *_edges_if(layout, src, dst), keep, scale)
        if layout is not None:  # one sparse-dense product per head
            out = x.new_empty(num_dst, H, C)
            for h in range(H):
                out[:, h] = spmm(layout, _csr_weights(w, _csr_mask(keep, layout, h), scale, layout, h), x[:, h])
            return out
        out = x.new_zeros(num_dst, H, C)
        for a, b in _chunks(src.numel(), H * C * x.element_size()):
            msg = x.index_select(0, src[a:b])
            msg.mul_(_weights(w, keep, scale, a, b).unsqueeze(-1))
            out.index_add_(0, dst[a:b], msg)
        return out

    @staticmethod
    def backward(ctx: Any, grad: Tensor):
        w, x, src, dst, keep, scale = ctx.saved_tensors
        need_w, need_x = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        grad = grad.contiguous()
        g_w = torch.empty_like(w) if need_w else None
        g_x = _zeros_if(need_x, x)
        H, C = x.size(1), x.size(2)
        layout = ctx.layout
        if layout is not None:
            for h in range(H):
                m = _csr_mask(keep, layout, h)
                if g_w is not None:
                    gv = sddmm(layout, grad[:, h], x[:, h])
                    if m is not None:
                        _times_mask(gv, m).mul_(scale)
                    g_w[:, h].index_put_((layout.perm,), gv)
                if g_x is not None:
                    g_x[:, h] = spmm_t(layout, _csr_weights(w, m, scale, layout, h), grad[:, h])
            return g_w, g_x, None, None, None, None, None, None
        for a, b in _chunks(src.numel(), H * C * x.element_size()):
            g = grad.index_select(0, dst[a:b])  # dL/dy_i for each edge's destination
            if g_w is not None:
                gw = (x.index_select(0, src[a:b]) * g).sum(-1)
                g_w[a:b] = gw if keep is None else gw.mul_(keep[a:b]).mul_(scale)
            if g_x is not None:
                g_x.index_add_(0, src[a:b], g.mul_(_weights(w, keep, scale, a, b).unsqueeze(-1)))
        return g_w, g_x, None, None, None, None, None, None


def edge_aggregate(w: Tensor, x: Tensor, src: Tensor, dst: Tensor, num_dst: int, keep: Optional[Tensor] = None,
                   scale: Optional[Tensor] = None, layout: Optional[EdgeLayout] = None) -> Tensor:
    r""":math:`\mathbf{y}_{i,h} = \sum_{e=(j \to i)} w_{e,h} \mathbf{x}_{j,h}`: ``w`` ``[E, H]``, ``x``
    ``[N_src, H, C]``, ``src``/``dst`` ``[E]`` -> ``[num_dst, H, C]``. Saves ``w``, ``x`` and the indices.

    With a boolean ``keep`` ``[E, H]`` and a one-element ``scale``, the weights are ``w * keep * scale``
    (attention dropout fused in: only the boolean mask is kept, not a second ``[E, H]`` float tensor).
    ``layout``: the edges' :class:`~graph_rma.nn.edge_layout.EdgeLayout` (built here when the CSR kernels apply
    and none is given)."""
    layout = _layout_for(layout, src, dst, x.size(0), num_dst, w, x)
    return _EdgeAggregate.apply(w, x, src, dst, num_dst, keep, scale, layout)


class _SoftmaxAggregate(torch.autograd.Function):
    """Edge softmax, plain dropout and aggregation in one node: saves the softmax output ``[E, H]``, the boolean
    dropout mask, ``x`` and the indices; backward writes the scores' gradient into one ``[E, H]`` buffer."""

    @staticmethod
    def forward(ctx: Any, scores: Tensor, x: Tensor, src: Tensor, dst: Tensor, num_dst: int, p: float,
                inplace: bool, layout: Optional[EdgeLayout] = None) -> Tensor:
        alpha = _softmax(scores, dst, num_dst, inplace=inplace)
        keep, scale = _draw_dropout(alpha.size(0), alpha.size(1), alpha, p)
        out = _EdgeAggregate.forward(ctx, alpha, x, src, dst, num_dst, keep, scale, layout)
        return out

    @staticmethod
    def backward(ctx: Any, grad: Tensor):
        alpha, x, src, dst, keep, scale = ctx.saved_tensors
        grad = grad.contiguous()
        H, C = x.size(1), x.size(2)
        g_scores = torch.empty_like(alpha)
        g_x = _zeros_if(ctx.needs_input_grad[1], x)
        layout = ctx.layout
        if layout is not None:
            for h in range(H):
                a = alpha[:, h].index_select(0, layout.perm)
                m = _csr_mask(keep, layout, h)
                if g_x is not None:
                    g_x[:, h] = spmm_t(layout, a if m is None else a * m * scale, grad[:, h])
                ga = sddmm(layout, grad[:, h], x[:, h])  # dL/d(dropped alpha)
                if m is not None:
                    _times_mask(ga, m).mul_(scale)  # dL/dalpha
                g_scores[:, h].index_put_((layout.perm,), _csr_softmax_backward(layout, ga, a))
            return g_scores, g_x, None, None, None, None, None, None
        row = alpha.new_zeros(grad.size(0), H)  # sum over each destination's edges of alpha * dL/dalpha
        for a, b in _chunks(src.numel(), H * C * x.element_size()):
            g = grad.index_select(0, dst[a:b])
            gw = (x.index_select(0, src[a:b]) * g).sum(-1)  # dL/d(dropped alpha)
            if keep is not None:
                gw.mul_(keep[a:b]).mul_(scale)  # dL/dalpha
            if g_x is not None:
                g_x.index_add_(0, src[a:b], g.mul_(_weights(alpha, keep, scale, a, b).unsqueeze(-1)))
            gw.mul_(alpha[a:b])
            g_scores[a:b] = gw
            row.index_add_(0, dst[a:b], gw)
        for a, b in _chunks(src.numel(), H * alpha.element_size()):
            g_scores[a:b].sub_(row.index_select(0, dst[a:b]).mul_(alpha[a:b]))
        return g_scores, g_x, None, None, None, None, None, None


def _draw_dropout(E: int, H: int, like: Tensor, p: float) -> Tuple[Optional[Tensor], Optional[Tensor]]:
    """``(keep, scale)`` for dropout on an ``[E, H]`` tensor like ``like``: ``keep * scale`` is exactly the float
    noise ``F.dropout`` multiplies by on CPU, drawn the same way (same mask from the same seed)."""
    if p == 0.0 or E * H == 0:
        return None, None
    # Drawn straight into booleans: CPU's bernoulli_ yields the same 0/1 sequence for every dtype.
    keep = like.new_empty(E, H, dtype=torch.bool).bernoulli_(1.0 - p)
    return keep, (like.new_ones(1).div_(1.0 - p) if p < 1.0 else like.new_zeros(1))


def softmax_aggregate(scores: Tensor, x: Tensor, src: Tensor, dst: Tensor, num_dst: int, p: float = 0.0,
                      inplace: bool = False, layout: Optional[EdgeLayout] = None) -> Tensor:
    r""":func:`edge_softmax`, attention dropout with probability ``p`` (a mask drawn as ``F.dropout`` draws it on
    CPU) and :func:`edge_aggregate` as one autograd node, which keeps only the softmax output and the boolean mask
    per edge. ``inplace`` lets the softmax overwrite ``scores`` (a fresh tensor nobody else reads); ``layout`` as in
    :func:`edge_aggregate`."""
    layout = _layout_for(layout, src, dst, x.size(0), num_dst, scores, x)
    return _SoftmaxAggregate.apply(scores, x, src, dst, num_dst, float(p), inplace, layout)


# ----------------------------------------------------------------------------------------------------------------
# Edge softmax saving only its output
# ----------------------------------------------------------------------------------------------------------------
def _softmax(logits: Tensor, index: Tensor, num_nodes: int, inplace: bool = False) -> Tensor:
    """As :func:`torch_geometric.utils.softmax`: ``exp(s - max) / (sum + 1e-16)``, in one ``[E, H]`` buffer
    (``logits``' own with ``inplace``)."""
    peak = scatter(logits, index, dim=0, dim_size=num_nodes, reduce="max")
    rows = logits.size(1) * logits.element_size()
    if inplace:
        out = logits
        for a, b in _chunks(index.numel(), rows):
            out[a:b].sub_(peak.index_select(0, index[a:b]))
    else:
        out = peak.index_select(0, index).neg_().add_(logits)  # logits - max, exactly
    out.exp_()
    total = scatter(out, index, dim=0, dim_size=num_nodes, reduce="sum") + 1e-16
    for a, b in _chunks(index.numel(), rows):
        out[a:b].div_(total.index_select(0, index[a:b]))
    return out


class _EdgeSoftmax(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, logits: Tensor, index: Tensor, num_nodes: int) -> Tensor:
        out = _softmax(logits, index, num_nodes)
        ctx.save_for_backward(out, index)
        ctx.num_nodes = num_nodes
        return out

    @staticmethod
    def backward(ctx: Any, grad: Tensor):
        out, index = ctx.saved_tensors
        g = grad * out
        row = scatter(g, index, dim=0, dim_size=ctx.num_nodes, reduce="sum")
        for a, b in _chunks(index.numel(), out.size(1) * out.element_size()):
            g[a:b].sub_(row.index_select(0, index[a:b]).mul_(out[a:b]))
        return g, None, None


def edge_softmax(src: Tensor, index: Optional[Tensor] = None, ptr: Optional[Tensor] = None,
                 num_nodes: Optional[int] = None, dim: int = 0) -> Tensor:
    r"""PyG's :func:`~torch_geometric.utils.softmax` over groups ``index`` of dimension 0, keeping only its output
    for backward (PyG's keeps two ``[E, H]`` tensors besides). ``ptr`` is ignored when ``index`` is given."""
    if index is None:
        if ptr is None:
            raise ValueError("index: expected the group of every row (or ptr), got None")
        index = torch.repeat_interleave(torch.arange(ptr.numel() - 1, device=ptr.device), ptr.diff())
    if dim != 0:
        raise ValueError(f"dim: edge_softmax normalises over dimension 0, got {dim}")
    n = int(index.max()) + 1 if num_nodes is None and index.numel() > 0 else int(num_nodes or 0)
    return _EdgeSoftmax.apply(src, index, n)


# ----------------------------------------------------------------------------------------------------------------
# Scores
# ----------------------------------------------------------------------------------------------------------------
class _GATScores(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, a_src: Tensor, a_dst: Optional[Tensor], a_edge: Optional[Tensor], src: Tensor,
                dst: Tensor, slope: float) -> Tensor:
        z = a_src.new_empty(src.numel(), a_src.size(1))
        for a, b in _chunks(src.numel(), z.size(1) * z.element_size()):
            z[a:b] = _gat_pre(a_src, a_dst, a_edge, src, dst, a, b)
        ctx.save_for_backward(a_src, a_dst, a_edge, src, dst)
        ctx.slope = slope
        return F.leaky_relu(z, slope, inplace=True)

    @staticmethod
    def backward(ctx: Any, grad: Tensor):
        a_src, a_dst, a_edge, src, dst = ctx.saved_tensors
        g = torch.empty_like(grad)
        for a, b in _chunks(src.numel(), grad.size(1) * grad.element_size()):
            z = _gat_pre(a_src, a_dst, a_edge, src, dst, a, b)  # recomputed instead of kept
            g[a:b] = torch.where(z > 0, grad[a:b], grad[a:b] * ctx.slope)
        g_src = a_src.new_zeros(a_src.shape).index_add_(0, src, g) if ctx.needs_input_grad[0] else None
        g_dst = (a_dst.new_zeros(a_dst.shape).index_add_(0, dst, g)
                 if a_dst is not None and ctx.needs_input_grad[1] else None)
        g_edge = g if a_edge is not None and ctx.needs_input_grad[2] else None
        return g_src, g_dst, g_edge, None, None, None


def _gat_pre(a_src: Tensor, a_dst: Optional[Tensor], a_edge: Optional[Tensor], src: Tensor, dst: Tensor, a: int,
             b: int) -> Tensor:
    z = a_src.index_select(0, src[a:b])
    if a_dst is not None:
        z.add_(a_dst.index_select(0, dst[a:b]))
    if a_edge is not None:
        z.add_(a_edge[a:b])
    return z


class _GATAttention(torch.autograd.Function):
    """GAT's per-node score terms, scores, edge softmax, plain dropout and aggregation as one node. Per edge it keeps
    only the boolean dropout mask (and the layout or edge index): the weights are recomputed in backward from the
    node features, the attention vectors and the per-node softmax maximum and sum."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, att_src: Tensor, x_dst: Optional[Tensor], att_dst: Optional[Tensor],
                a_edge: Optional[Tensor], src: Optional[Tensor], dst: Optional[Tensor], num_dst: int, slope: float,
                p: float, layout: Optional[EdgeLayout] = None) -> Tensor:
        H, C = x.size(1), x.size(2)
        ctx.layout, ctx.slope = layout, slope
        if layout is not None:  # per head, in CSR order
            out, bits, scale, lse = _gat_forward_csr(layout, x, att_src, x_dst, att_dst, a_edge, num_dst, slope, p)
            ctx.save_for_backward(x, att_src, x_dst, att_dst, a_edge, None, None, bits, scale, lse, None)
            return out
        a_src, a_dst = _gat_terms(x, att_src, x_dst, att_dst)
        assert src is not None and dst is not None
        E = src.numel()
        row = H * a_src.element_size()
        peak = a_src.new_full((num_dst, H), float("-inf"))
        for a, b in _chunks(E, row):
            z = F.leaky_relu(_gat_pre(a_src, a_dst, a_edge, src, dst, a, b), slope, inplace=True)
            peak.scatter_reduce_(0, dst[a:b].view(-1, 1).expand(-1, H), z, "amax")
        total = a_src.new_zeros(num_dst, H)
        for a, b in _chunks(E, row):
            z = F.leaky_relu(_gat_pre(a_src, a_dst, a_edge, src, dst, a, b), slope, inplace=True)
            total.index_add_(0, dst[a:b], z.sub_(peak.index_select(0, dst[a:b])).exp_())
        total.add_(1e-16)
        keep, scale = _draw_dropout(E, H, a_src, p)
        out = x.new_zeros(num_dst, H, C)
        for a, b in _chunks(E, H * C * x.element_size()):
            _, w = _gat_weights(a_src, a_dst, a_edge, src, dst, peak, total, slope, a, b)
            if keep is not None:
                w.mul_(keep[a:b]).mul_(scale)
            out.index_add_(0, dst[a:b], x.index_select(0, src[a:b]).mul_(w.unsqueeze(-1)))
        ctx.save_for_backward(x, att_src, x_dst, att_dst, a_edge, src, dst, keep, scale, peak, total)
        return out

    @staticmethod
    def backward(ctx: Any, grad: Tensor):
        x, att_src, x_dst, att_dst, a_edge, src, dst, keep, scale, peak, total = ctx.saved_tensors
        need = ctx.needs_input_grad
        grad = grad.contiguous()
        H, C = x.size(1), x.size(2)
        if ctx.layout is not None:
            # CSR: `keep` holds the dropout bits and `peak` the log-normaliser (see _gat_forward_csr)
            return _gat_backward_csr(ctx.layout, grad, x, att_src, x_dst, att_dst, a_edge, keep, scale, peak,
                                     ctx.slope, need) + (None,) * 6
        a_src, a_dst = _gat_terms(x, att_src, x_dst, att_dst)  # recomputed: [N, H] each
        g_x = _zeros_if(need[0], x)
        # dL/da_src, dL/da_dst: needed for the attention vectors and, through them, the features
        g_src = _zeros_if(need[0] or need[1], a_src)
        g_dst = _zeros_if(need[3] or need[2] or (x_dst is None and need[0]), a_dst)
        g_edge = a_edge.new_empty(a_edge.shape) if a_edge is not None and need[4] else None
        E = src.numel()
        row = a_src.new_zeros(grad.size(0), H)  # per destination: sum of alpha * dL/dalpha
        # Two passes over the edges; the second recomputes dL/dalpha instead of keeping it ([E, H] less).
        for second in (False, True):
            for a, b in _chunks(E, H * C * x.element_size()):
                pre, s = _gat_weights(a_src, a_dst, a_edge, src, dst, peak, total, ctx.slope, a, b)
                g = grad.index_select(0, dst[a:b])
                gw = (x.index_select(0, src[a:b]) * g).sum(-1)  # dL/d(weight after dropout)
                m = keep[a:b].to(s.dtype).mul_(scale) if keep is not None else None
                if m is not None:
                    gw.mul_(m)  # dL/dalpha
                if not second:
                    if g_x is not None:
                        g_x.index_add_(0, src[a:b], g.mul_((s if m is None else s * m).unsqueeze(-1)))
                    row.index_add_(0, dst[a:b], gw.mul_(s))
                    continue
                gs = gw.sub_(row.index_select(0, dst[a:b])).mul_(s)  # dL/dscore: softmax backward
                gs = torch.where(pre > 0, gs, gs * ctx.slope)  # LeakyReLU backward
                if g_src is not None:
                    g_src.index_add_(0, src[a:b], gs)
                if g_dst is not None:
                    g_dst.index_add_(0, dst[a:b], gs)
                if g_edge is not None:
                    g_edge[a:b] = gs
            if g_src is None and g_dst is None and g_edge is None:
                break
        return _gat_terms_backward(need, x, att_src, x_dst, att_dst, g_src, g_dst, g_edge, g_x)


def _gat_terms(x: Tensor, att_src: Tensor, x_dst: Optional[Tensor],
               att_dst: Optional[Tensor]) -> Tuple[Tensor, Optional[Tensor]]:
    r"""GAT's per-node score terms :math:`a_{j,h} = \langle \mathbf{a}^{src}_h, \mathbf{x}_{j,h} \rangle` and
    :math:`b_{i,h}` (from ``x_dst``, or ``x`` itself when ``x_dst`` is ``None``; no :math:`b` without ``att_dst``)."""
    a_dst = None if att_dst is None else _head_dot(x if x_dst is None else x_dst, att_dst)
    return _head_dot(x, att_src), a_dst


def _gat_terms_backward(need: Tuple[bool, ...], x: Tensor, att_src: Tensor, x_dst: Optional[Tensor],
                        att_dst: Optional[Tensor], g_src: Optional[Tensor], g_dst: Optional[Tensor],
                        g_edge: Optional[Tensor], g_x: Optional[Tensor]):
    """:class:`_GATAttention`'s gradients from those of the score terms: added into the features' gradient in place
    (no ``[N, H, C]`` temporary, no second gradient for autograd to sum)."""
    g_att_src = _head_outer(g_src, x) if need[1] else None
    g_xd = g_att_dst = None
    if g_dst is not None and att_dst is not None:
        g_att_dst = _head_outer(g_dst, x if x_dst is None else x_dst) if need[3] else None
        if x_dst is None and g_x is not None:
            g_x.addcmul_(g_dst.unsqueeze(-1), att_dst)
        elif x_dst is not None and need[2]:
            g_xd = g_dst.unsqueeze(-1) * att_dst
    if g_x is not None and g_src is not None:
        g_x.addcmul_(g_src.unsqueeze(-1), att_src)
    return g_x, g_att_src, g_xd, g_att_dst, g_edge, None, None, None, None, None, None


#: Spare elements at the end of the output's storage (see :func:`_with_slack`).
_SLACK = 64


def _with_slack(like: Tensor, shape: Tuple[int, ...]) -> Tensor:
    """An empty tensor of ``shape`` whose storage has ``_SLACK`` spare elements at its end.

    The layer's output is freed as soon as the loss has read it, and the next tensors of its size are the loss's
    gradients. torch asks the C allocator for 64-byte aligned blocks, and glibc's ``posix_memalign`` cannot place
    one in a free hole of exactly its own size (it looks for the size plus the alignment); a few spare bytes let
    the gradients reuse the output's memory instead of growing the heap by one more ``[N, H, C]`` block. The
    forward allocates its output last, right above its work space, and nothing large after it: the loss's output
    tends to land right above it, and once the work space, the output and the loss's output are freed, their
    memory is one block, large enough for the features' gradient as well."""
    n = 1
    for d in shape:
        n *= d
    storage = like.new_empty(n + _SLACK).untyped_storage()
    return like.new_empty(0).set_(storage, 0, shape)  # a tensor of its own (not a view) on the larger storage


def _head_terms(x: Tensor, att_src: Tensor, x_dst: Optional[Tensor], att_dst: Optional[Tensor],
                h: int) -> Tuple[Tensor, Optional[Tensor]]:
    """Head ``h``'s score terms of :func:`_gat_terms`: ``[N_src]`` and ``[N_dst]`` (or ``None``)."""
    b = None if att_dst is None else torch.mv((x if x_dst is None else x_dst)[:, h], att_dst[0, h])
    return torch.mv(x[:, h], att_src[0, h]), b


def _gat_pre_csr(a: Tensor, b: Optional[Tensor], a_edge: Optional[Tensor], layout: EdgeLayout, h: int,
                 out: Tensor, tmp: Tensor) -> Tensor:
    """Head ``h``'s GAT score before LeakyReLU, ``[E]`` in CSR order, from its terms ``a`` ``[N_src]``, ``b``
    ``[N_dst]`` (or ``None``) and ``a_edge`` ``[E, H]`` (or ``None``), written into ``out`` (``tmp``: work space)."""
    torch.index_select(a, 0, layout.col, out=out)
    if b is not None:
        out.add_(torch.index_select(b, 0, layout.row, out=tmp))
    if a_edge is not None:
        out.add_(torch.index_select(a_edge[:, h], 0, layout.perm, out=tmp))
    return out


def _gat_forward_csr(layout: EdgeLayout, x: Tensor, att_src: Tensor, x_dst: Optional[Tensor],
                     att_dst: Optional[Tensor], a_edge: Optional[Tensor], num_dst: int, slope: float, p: float):
    r""":class:`_GATAttention`'s forward one head at a time in CSR order: sparse-dense products, two ``[E]`` work
    vectors allocated once, per-node terms of one head. ``(out, dropout bits, scale, lse)`` with the softmax's
    log-normaliser :math:`\log \sum_{e' \to i} \exp s_{e'}` per destination and head, ``[N_dst, H]``, from which
    backward recomputes the weights."""
    E, H, C = layout.col.numel(), x.size(1), x.size(2)
    lse = x.new_empty(num_dst, H)
    bits, scale = _csr_dropout(E, H, x, p, layout)
    w, tmp = x.new_empty(2, E).unbind(0)
    bit = None if bits is None or bits.dim() == 2 else torch.empty_like(bits)
    x_h, out_h = x.new_empty(x.size(0), C), x.new_empty(num_dst, C)  # one head's features and output
    out = _with_slack(x, (num_dst, H, C))  # last, right above the work space (see _with_slack)
    for h in range(H):
        a, b = _head_terms(x, att_src, x_dst, att_dst, h)
        F.leaky_relu_(_gat_pre_csr(a, b, a_edge, layout, h, w, tmp), slope)
        m = segment_max(layout, w)
        w.sub_(torch.index_select(m, 0, layout.row, out=tmp)).exp_()
        z = segment_sum(layout, w).add_(1e-16)
        w.div_(torch.index_select(z, 0, layout.row, out=tmp))  # as PyG's softmax: exp(s - max) / (sum + 1e-16)
        lse[:, h] = z.log_().add_(m)
        if bits is not None:
            _times_mask(w, _csr_keep(bits, h, bit), tmp).mul_(scale)
        out[:, h] = spmm(layout, w, x_h.copy_(x[:, h]), out_h)
    return out, bits, scale, lse


#: Integer types that hold one dropout bit per head, by the number of heads they hold.
_BITS = ((8, torch.uint8), (16, torch.int16), (32, torch.int32), (64, torch.int64))


def _csr_dropout(E: int, H: int, like: Tensor, p: float,
                 layout: EdgeLayout) -> Tuple[Optional[Tensor], Optional[Tensor]]:
    """Dropout drawn as :func:`_draw_dropout` draws it (the same mask), kept in CSR order as ``[E]`` integers
    whose bit ``h`` keeps head ``h`` (one byte per edge for 8 heads, instead of 8), or, beyond 64 heads, as
    ``[H, E]`` booleans. ``(None, None)`` without dropout."""
    dtype = next((t for n, t in _BITS if H <= n), None)
    bits = None
    if p != 0.0 and E * H != 0:  # allocated before the [E, H] draw, which is dropped (a temporary above it)
        bits = like.new_zeros(E, dtype=dtype) if dtype is not None else like.new_empty(H, E, dtype=torch.bool)
    keep, scale = _draw_dropout(E, H, like, p)
    if keep is None or bits is None:
        return None, None
    for h in range(H):
        head = keep[:, h].index_select(0, layout.perm)
        if bits.dim() == 2:
            bits[h] = head
        else:
            bits.bitwise_or_(head.to(dtype).bitwise_left_shift_(h))
    return bits, scale


def _csr_keep(bits: Tensor, h: int, buffer: Optional[Tensor]) -> Tensor:
    """Head ``h``'s 0/1 dropout mask in CSR order from :func:`_csr_dropout`'s bits (``buffer``: like ``bits``)."""
    if bits.dim() == 2:
        return bits[h]
    assert buffer is not None
    return torch.bitwise_right_shift(bits, h, out=buffer).bitwise_and_(1)


def _gat_backward_csr(layout: EdgeLayout, grad: Tensor, x: Tensor, att_src: Tensor, x_dst: Optional[Tensor],
                      att_dst: Optional[Tensor], a_edge: Optional[Tensor], bits: Optional[Tensor],
                      scale: Optional[Tensor], lse: Tensor, slope: float, need: Tuple[bool, ...]):
    """:class:`_GATAttention`'s backward one head at a time in CSR order: the gradients of ``x``, ``att_src``,
    ``x_dst``, ``att_dst`` and ``a_edge``. Three ``[E]`` work vectors and one of booleans, allocated once, hold
    every per-edge temporary; the score terms' gradients (``[N]`` per head) go straight into those of the features
    and attention vectors."""
    H = x.size(1)
    xd = x if x_dst is None else x_dst
    g_x, g_att_src = _zeros_if(need[0], x), _zeros_if(need[1], att_src)
    g_xd = _zeros_if(x_dst is not None and need[2], x_dst)
    g_att_dst = _zeros_if(need[3], att_dst)
    g_edge = a_edge.new_empty(a_edge.shape) if a_edge is not None and need[4] else None
    want_src = need[0] or need[1]  # dL/da, for the source features or att_src
    want_dst = att_dst is not None and (need[3] or g_xd is not None or (x_dst is None and need[0]))
    s, t1, t2 = x.new_empty(3, layout.col.numel()).unbind(0)
    positive = torch.empty(layout.col.numel(), dtype=torch.bool, device=x.device)
    bit = None if bits is None or bits.dim() == 2 else torch.empty_like(bits)
    C = x.size(2)  # one head's output gradient, features and features' gradient, contiguous:
    g_h, x_h, gx_h = grad.new_empty(grad.size(0), C), x.new_empty(x.size(0), C), x.new_empty(x.size(0), C)
    for h in range(H):
        g_h.copy_(grad[:, h])
        x_h.copy_(x[:, h])
        a, b = _head_terms(x, att_src, x_dst, att_dst, h)
        _gat_pre_csr(a, b, a_edge, layout, h, s, t1)
        del a, b
        torch.gt(s, 0, out=positive)  # where LeakyReLU's slope is 1
        F.leaky_relu_(s, slope)  # the softmax weight, recomputed from the score and the log-normaliser
        s.sub_(torch.index_select(lse[:, h], 0, layout.row, out=t1)).exp_()
        m = None if bits is None else _csr_keep(bits, h, bit)
        if g_x is not None:
            g_x[:, h] = spmm_t(layout, s if m is None else torch.mul(s, m, out=t1).mul_(scale), g_h, t2, gx_h)
        if not (want_src or want_dst or g_edge is not None):
            continue
        ga = sddmm(layout, g_h, x_h, t1)  # dL/d(weight after dropout)
        if m is not None:
            _times_mask(ga, m, t2).mul_(scale)  # dL/dalpha
        gs = _csr_softmax_backward(layout, ga, s, t2)  # dL/dscore
        gs.mul_(s.copy_(positive).mul_(1.0 - slope).add_(slope))  # LeakyReLU backward: 1 or slope, in s's buffer
        if want_src:  # dL/da_j = sum of the scores' gradients over j's edges; a_j = <att_src_h, x_jh>
            g_a = gs.new_zeros(x.size(0)).index_add_(0, layout.col, gs)
            if g_x is not None:
                g_x[:, h].addr_(g_a, att_src[0, h])
            if g_att_src is not None:
                g_att_src[0, h] = torch.mv(x[:, h].t(), g_a)
        if want_dst:
            assert att_dst is not None
            g_b = segment_sum(layout, gs)
            if g_xd is not None:
                g_xd[:, h] = torch.outer(g_b, att_dst[0, h])
            elif x_dst is None and g_x is not None:
                g_x[:, h].addr_(g_b, att_dst[0, h])
            if g_att_dst is not None:
                g_att_dst[0, h] = torch.mv(xd[:, h].t(), g_b)
        if g_edge is not None:
            g_edge[:, h].index_put_((layout.perm,), gs)
    return g_x, g_att_src, g_xd, g_att_dst, g_edge


def _gat_weights(a_src: Tensor, a_dst: Optional[Tensor], a_edge: Optional[Tensor], src: Tensor, dst: Tensor,
                 peak: Tensor, total: Tensor, slope: float, a: int, b: int) -> Tuple[Tensor, Tensor]:
    """Chunk ``[a, b)``: the score before LeakyReLU and the softmax weight, exactly as in forward."""
    pre = _gat_pre(a_src, a_dst, a_edge, src, dst, a, b)
    w = F.leaky_relu(pre, slope)
    w.sub_(peak.index_select(0, dst[a:b])).exp_().div_(total.index_select(0, dst[a:b]))
    return pre, w


def gat_attention(x: Tensor, att_src: Tensor, x_dst: Optional[Tensor], att_dst: Optional[Tensor],
                  a_edge: Optional[Tensor], src: Optional[Tensor], dst: Optional[Tensor], num_dst: int,
                  negative_slope: float, p: float = 0.0, layout: Optional[EdgeLayout] = None) -> Tensor:
    r"""The whole GAT attention, :math:`\mathbf{y}_i = \sum_{e = (j \to i)} \mathrm{drop}(\alpha_e)\,
    \mathbf{x}_j` with :math:`\alpha = \operatorname{softmax}(\mathrm{LeakyReLU}(a_j + b_i + c_e))`,
    :math:`a_{j,h} = \langle \mathbf{a}^{src}_h, \mathbf{x}_{j,h} \rangle` and
    :math:`b_{i,h} = \langle \mathbf{a}^{dst}_h, \mathbf{x}^{dst}_{i,h} \rangle`, as one autograd node that keeps
    per edge only the boolean dropout mask (``p`` > 0; drawn as ``F.dropout`` draws it on CPU) and recomputes the
    weights in backward from node-level terms. ``[num_dst, H, C]``.

    ``x`` ``[N_src, H, C]``, ``att_src`` ``[1, H, C]``; ``x_dst`` ``[N_dst, H, C]`` or ``None`` for ``x`` itself;
    ``att_dst`` ``[1, H, C]`` or ``None`` for no destination term; ``a_edge`` ``[E, H]`` or ``None``. ``src``/``dst``
    may be ``None`` when ``layout`` is given."""
    if layout is None:
        assert src is not None and dst is not None
        layout = _layout_for(None, src, dst, x.size(0), num_dst, att_src, x)
    return _GATAttention.apply(x, att_src, x_dst, att_dst, a_edge, src, dst, num_dst, float(negative_slope),
                               float(p), layout)


def gat_scores(a_src: Tensor, a_dst: Optional[Tensor], a_edge: Optional[Tensor], src: Tensor, dst: Tensor,
               negative_slope: float) -> Tensor:
    r"""GAT scores :math:`\mathrm{LeakyReLU}(a_{j,h} + b_{i,h} + c_{e,h})` ``[E, H]`` from ``a_src``
    ``[N_src, H]``, ``a_dst`` ``[N_dst, H]`` (or ``None``) and ``a_edge`` ``[E, H]`` (or ``None``); keeps no
    per-edge tensor but ``a_edge``."""
    return _GATScores.apply(a_src, a_dst, a_edge, src, dst, float(negative_slope))


class _GATv2Scores(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x_src: Tensor, x_dst: Tensor, att: Tensor, edge_attr: Optional[Tensor],
                w_edge: Optional[Tensor], src: Tensor, dst: Tensor, slope: float) -> Tensor:
        E, H, C = src.numel(), x_src.size(1), x_src.size(2)
        out = x_src.new_empty(E, H)
        for a, b in _chunks(E, H * C * x_src.element_size()):
            h = _gatv2_pre(x_src, x_dst, edge_attr, w_edge, src, dst, a, b)
            out[a:b] = (F.leaky_relu(h, slope, inplace=True) * att).sum(-1)
        ctx.save_for_backward(x_src, x_dst, att, edge_attr, w_edge, src, dst)
        ctx.slope = slope
        return out

    @staticmethod
    def backward(ctx: Any, grad: Tensor):
        x_src, x_dst, att, edge_attr, w_edge, src, dst = ctx.saved_tensors
        need = ctx.needs_input_grad
        g_src, g_dst, g_att = _zeros_if(need[0], x_src), _zeros_if(need[1], x_dst), _zeros_if(need[2], att)
        g_attr = torch.empty_like(edge_attr) if edge_attr is not None and need[3] else None
        g_w = _zeros_if(w_edge is not None and need[4], w_edge)
        E, H, C = src.numel(), x_src.size(1), x_src.size(2)
        for a, b in _chunks(E, H * C * x_src.element_size()):
            h = _gatv2_pre(x_src, x_dst, edge_attr, w_edge, src, dst, a, b)
            g = grad[a:b].unsqueeze(-1)
            pos = h > 0
            if g_att is not None:
                g_att += (F.leaky_relu(h, ctx.slope, inplace=True) * g).sum(0, keepdim=True)
            gh = torch.where(pos, g * att, (g * att).mul_(ctx.slope))  # dL/dh [chunk, H, C]
            del h, pos
            if g_src is not None:
                g_src.index_add_(0, src[a:b], gh)
            if g_dst is not None:
                g_dst.index_add_(0, dst[a:b], gh)
            if g_w is not None or g_attr is not None:
                flat = gh.view(b - a, H * C)
                if g_w is not None:
                    g_w += flat.t() @ edge_attr[a:b]
                if g_attr is not None:
                    g_attr[a:b] = flat @ w_edge
        return g_src, g_dst, g_att, g_attr, g_w, None, None, None


def _gatv2_pre(x_src: Tensor, x_dst: Tensor, edge_attr: Optional[Tensor], w_edge: Optional[Tensor], src: Tensor,
               dst: Tensor, a: int, b: int) -> Tensor:
    h = x_src.index_select(0, src[a:b])
    h.add_(x_dst.index_select(0, dst[a:b]))
    if edge_attr is not None and w_edge is not None:
        h.add_((edge_attr[a:b] @ w_edge.t()).view(b - a, x_src.size(1), x_src.size(2)))
    return h


def gatv2_scores(x_src: Tensor, x_dst: Tensor, att: Tensor, edge_attr: Optional[Tensor], w_edge: Optional[Tensor],
                 src: Tensor, dst: Tensor, negative_slope: float) -> Tensor:
    r"""GATv2 scores :math:`\sum_c a_{h,c}\,\mathrm{LeakyReLU}(\mathbf{x}_{j} + \mathbf{r}_{i} + W_e
    \mathbf{e}_e)_{h,c}` ``[E, H]``: ``x_src`` ``[N_src, H, C]``, ``x_dst`` ``[N_dst, H, C]``, ``att``
    ``[1, H, C]``, optional ``edge_attr`` ``[E, D]`` with ``w_edge`` ``[H * C, D]`` (a bias-free edge projection).
    Keeps no per-edge tensor."""
    return _GATv2Scores.apply(x_src, x_dst, att, edge_attr, w_edge, src, dst, float(negative_slope))


class _EdgeDot(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, q: Tensor, k: Tensor, src: Tensor, dst: Tensor, scale: float,
                layout: Optional[EdgeLayout] = None) -> Tensor:
        E, H, C = src.numel(), q.size(1), q.size(2)
        out = q.new_empty(E, H)
        if layout is not None:
            for h in range(H):
                out[:, h].index_put_((layout.perm,), sddmm(layout, q[:, h], k[:, h]))
        else:
            for a, b in _chunks(E, H * C * q.element_size()):
                out[a:b] = (q.index_select(0, dst[a:b]) * k.index_select(0, src[a:b])).sum(-1)
        out.mul_(scale)
        ctx.save_for_backward(q, k, *_edges_if(layout, src, dst))
        ctx.scale, ctx.layout = scale, layout
        return out

    @staticmethod
    def backward(ctx: Any, grad: Tensor):
        q, k, src, dst = ctx.saved_tensors
        g_q, g_k = _zeros_if(ctx.needs_input_grad[0], q), _zeros_if(ctx.needs_input_grad[1], k)
        H, C = q.size(1), q.size(2)
        layout = ctx.layout
        if layout is not None:
            for h in range(H):
                v = grad[:, h].index_select(0, layout.perm).mul_(ctx.scale)
                if g_q is not None:
                    g_q[:, h] = spmm(layout, v, k[:, h])
                if g_k is not None:
                    g_k[:, h] = spmm_t(layout, v, q[:, h])
            return g_q, g_k, None, None, None, None
        g_all = (grad * ctx.scale).unsqueeze(-1)
        for a, b in _chunks(src.numel(), H * C * q.element_size()):
            g = g_all[a:b]
            if g_q is not None:
                g_q.index_add_(0, dst[a:b], k.index_select(0, src[a:b]).mul_(g))
            if g_k is not None:
                g_k.index_add_(0, src[a:b], q.index_select(0, dst[a:b]).mul_(g))
        return g_q, g_k, None, None, None, None


def edge_dot(q: Tensor, k: Tensor, src: Tensor, dst: Tensor, scale: float = 1.0,
             layout: Optional[EdgeLayout] = None) -> Tensor:
    r"""Scores :math:`\gamma \langle \mathbf{q}_{i,h}, \mathbf{k}_{j,h} \rangle` ``[E, H]`` for edges ``j -> i``:
    ``q`` ``[N_dst, H, C]``, ``k`` ``[N_src, H, C]``. Keeps no per-edge tensor; ``layout`` as in
    :func:`edge_aggregate`."""
    layout = _layout_for(layout, src, dst, k.size(0), q.size(0), q, k)
    return _EdgeDot.apply(q, k, src, dst, float(scale), layout)


# ----------------------------------------------------------------------------------------------------------------
# Whole layers
# ----------------------------------------------------------------------------------------------------------------
def check_lean(layer: Any, lean: Any) -> bool:
    """Validate a layer's ``lean`` flag: the lean path implements sum aggregation, ``source_to_target`` flow."""
    if not isinstance(lean, bool):
        raise ValueError(f"lean: expected a bool, got {lean!r}")
    if lean:
        aggr = getattr(layer, "aggr", "add")
        if aggr not in ("add", "sum") or getattr(layer, "flow", "source_to_target") != "source_to_target" \
                or getattr(layer, "decomposed_layers", 1) != 1:
            raise ValueError("lean: the memory-lean path needs aggr='add', flow='source_to_target' and "
                             f"decomposed_layers=1, got aggr={aggr!r}, flow={layer.flow!r}, "
                             f"decomposed_layers={layer.decomposed_layers}")
    return lean


def attention_softmax(layer: Any, scores: Tensor, src: Tensor, dst: Tensor, num_src: int, num_dst: int) -> Tensor:
    """Edge softmax, or the layer's DropAttention (a softmax over the surviving edges), as the stock path does."""
    drop = getattr(layer, "drop_attention", None)
    if drop is not None:  # DropAttention() without p takes the layer's own rate, as on the stock path
        return drop.sparse_softmax(scores, src, dst, num_src, num_dst, softmax_fn=edge_softmax,
                                   layer_rate=getattr(layer, "dropout", None))
    return edge_softmax(scores, dst, num_nodes=num_dst)


def dropout_mask(layer: Any, alpha: Tensor) -> Tuple[Optional[Tensor], Optional[Tensor]]:
    """The layer's plain attention dropout as ``(keep, scale)``: the dropped weights are ``alpha * keep * scale``
    (``(None, None)``: no dropout, e.g. in eval mode or with a DropAttention).

    The mask is drawn as ``F.dropout`` draws it on CPU (``bernoulli_(1 - p)`` on an ``[E, H]`` float tensor),
    hence the very same mask from the same seed there, and kept as booleans.
    """
    if getattr(layer, "drop_attention", None) is not None or not layer.training:
        return None, None
    return _draw_dropout(alpha.size(0), alpha.size(1), alpha, float(layer.dropout))


class _Dropped(torch.autograd.Function):
    """``w * keep * scale`` for the returned attention weights (saves the mask, not the product)."""

    @staticmethod
    def forward(ctx: Any, w: Tensor, keep: Tensor, scale: Tensor) -> Tensor:
        ctx.save_for_backward(keep, scale)
        return _weights(w, keep, scale, 0, w.size(0))

    @staticmethod
    def backward(ctx: Any, grad: Tensor):
        keep, scale = ctx.saved_tensors
        return _weights(grad, keep, scale, 0, grad.size(0)), None, None


def dropped_weights(w: Tensor, keep: Optional[Tensor], scale: Optional[Tensor]) -> Tensor:
    """The attention weights after plain dropout, as the stock layers return them."""
    return w if keep is None else _Dropped.apply(w, keep, scale)


def _self_loops(layer: Any, edge_index: Any, edge_attr: Optional[Tensor], num_nodes: int):
    if not layer.add_self_loops:
        return edge_index, edge_attr
    edge_index, edge_attr = remove_self_loops(edge_index, edge_attr)
    return add_self_loops(edge_index, edge_attr, fill_value=layer.fill_value, num_nodes=num_nodes)


def _cached_layout(edge_index: Any, num_src: int, num_dst: int, loops: int, x: Tensor) -> Optional[EdgeLayout]:
    """The kept CSR layout of a ``[2, E]`` edge index with ``loops`` self-loops added as the stock layers add them
    (:func:`~graph_rma.nn.edge_layout.cached_edge_layout`), where the CSR kernels apply; else ``None``."""
    if not isinstance(edge_index, Tensor) or is_torch_sparse_tensor(edge_index) or not csr_supported(x):
        return None
    return cached_edge_layout(edge_index, num_src, num_dst, loops)


def _edges(edge_index: Tensor, num_src: int, num_dst: int) -> Tuple[Tensor, Tensor, int, int]:
    """``(src, dst, num_src, num_dst)`` of an ``[2, E]`` edge index or a ``[N_dst, N_src]`` torch sparse matrix."""
    if is_torch_sparse_tensor(edge_index):
        ei, _ = to_edge_index(edge_index)
        return ei[1], ei[0], edge_index.size(1), edge_index.size(0)
    ei = edge_index if edge_index.dtype == torch.long else edge_index.long()
    return ei[0], ei[1], num_src, num_dst


def _finish(layer: Any, out: Tensor, res: Optional[Tensor], edge_index: Tensor, alpha: Optional[Tensor],
            keep: Optional[Tensor], scale: Optional[Tensor], return_attention_weights: Optional[bool]):
    if layer.concat:
        # The aggregate is a fresh tensor that autograd does not keep: residual and bias are added in place, on
        # the tensor itself (in place on a view of it would make backward copy it twice).
        if res is not None:
            out.add_(res.view(out.shape))
        if layer.bias is not None:
            out.add_(layer.bias.view(out.shape[1:]))
        out = out.view(-1, layer.heads * layer.out_channels)
    else:
        out = out.mean(dim=1)
        if res is not None:
            out = out + res
        if layer.bias is not None:
            out = out + layer.bias
    if return_attention_weights:
        assert alpha is not None
        alpha = dropped_weights(alpha, keep, scale)
        if is_torch_sparse_tensor(edge_index):
            return out, (set_sparse_value(edge_index, alpha), alpha)
        return out, (edge_index, alpha)
    return out


def _attend(layer: Any, scores: Tensor, x_src: Tensor, src: Tensor, dst: Tensor, num_src: int, num_dst: int,
            res: Optional[Tensor], edge_index: Tensor, return_attention_weights: Optional[bool],
            layout: Optional[EdgeLayout] = None):
    """Softmax, dropout / DropAttention, aggregation and the stock layers' epilogue, from the scores."""
    if getattr(layer, "drop_attention", None) is None and not return_attention_weights:
        p = float(layer.dropout) if layer.training else 0.0
        out = softmax_aggregate(scores, x_src, src, dst, num_dst, p, inplace=not torch.compiler.is_compiling(),
                                layout=layout)
        return _finish(layer, out, res, edge_index, None, None, None, None)
    alpha = attention_softmax(layer, scores, src, dst, num_src, num_dst)
    keep, scale = dropout_mask(layer, alpha)
    out = edge_aggregate(alpha, x_src, src, dst, num_dst, keep, scale, layout)
    return _finish(layer, out, res, edge_index, alpha, keep, scale, return_attention_weights)


def _head_dot(x: Tensor, att: Tensor) -> Tensor:
    """``(x * att).sum(-1)`` for ``x`` ``[N, H, C]``, ``att`` ``[1, H, C]`` as one batched product per head, with
    no ``[N, H, C]`` temporary."""
    H, C = x.size(1), x.size(2)
    return torch.bmm(x.transpose(0, 1), att.reshape(H, C, 1)).view(H, -1).t()


def _head_outer(g: Tensor, x: Tensor) -> Tensor:
    """``(g.unsqueeze(-1) * x).sum(0, keepdim=True)`` (the gradient of :func:`_head_dot` with respect to ``att``) for
    ``g`` ``[N, H]``, ``x`` ``[N, H, C]``, as one batched product per head: ``[1, H, C]``."""
    return torch.bmm(g.t().unsqueeze(1), x.transpose(0, 1)).view(1, x.size(1), x.size(2))


def _no_sparse_tensor(edge_index: Any) -> None:
    if isinstance(edge_index, SparseTensor) and not isinstance(edge_index, Tensor):
        raise ValueError("edge_index: the lean path takes a [2, E] tensor or a torch sparse matrix, not a "
                         "torch_sparse.SparseTensor (use lean=False, or SparseTensor.to_torch_sparse_csr_tensor())")


def gat_forward(layer: Any, x: Union[Tensor, Tuple[Tensor, Optional[Tensor]]], edge_index: Any,
                edge_attr: Optional[Tensor] = None, size: Optional[Tuple[Optional[int], Optional[int]]] = None,
                return_attention_weights: Optional[bool] = None):
    """``GATConv.forward`` of ``layer`` (same arguments and returns) on the memory-lean functions above."""
    _no_sparse_tensor(edge_index)
    H, C = layer.heads, layer.out_channels
    res: Optional[Tensor] = None
    if isinstance(x, Tensor):
        if layer.res is not None:
            res = layer.res(x)
        if layer.lin is not None:
            x_src = x_dst = layer.lin(x).view(-1, H, C)
        else:
            x_src, x_dst = layer.lin_src(x).view(-1, H, C), layer.lin_dst(x).view(-1, H, C)
    else:
        x_src, x_dst = x
        if x_dst is not None and layer.res is not None:
            res = layer.res(x_dst)
        lin_src = layer.lin if layer.lin is not None else layer.lin_src
        lin_dst = layer.lin if layer.lin is not None else layer.lin_dst
        x_src = lin_src(x_src).view(-1, H, C)
        x_dst = lin_dst(x_dst).view(-1, H, C) if x_dst is not None else None
    num_src = x_src.size(0) if size is None or size[0] is None else size[0]
    num_dst = x_dst.size(0) if x_dst is not None else num_src
    num_dst = num_dst if size is None or size[1] is None else size[1]
    loops = 0
    if layer.add_self_loops and isinstance(edge_index, Tensor):
        n = x_src.size(0) if x_dst is None else min(x_src.size(0), x_dst.size(0))
        loops = min(size) if size is not None else n
    fused = getattr(layer, "drop_attention", None) is None and not return_attention_weights
    p = float(layer.dropout) if layer.training else 0.0  # plain attention dropout, in the fused node
    att_dst = None if x_dst is None else layer.att_dst
    x_dst_term = None if x_dst is x_src else x_dst  # None: the destination term reads x_src itself
    # The CSR layout straight from the edge index, self-loops included (no [2, E] int64 copy with loops), kept
    # for as long as the edge index lives.
    layout = _cached_layout(edge_index, num_src, num_dst, loops, x_src)
    if fused and layout is not None and (edge_attr is None or layer.lin_edge is None):
        out = gat_attention(x_src, layer.att_src, x_dst_term, att_dst, None, None, None, num_dst,
                            layer.negative_slope, p, layout)
        return _finish(layer, out, res, edge_index, None, None, None, None)
    if loops:
        edge_index, edge_attr = _self_loops(layer, edge_index, edge_attr, loops)
    src, dst, num_src, num_dst = _edges(edge_index, num_src, num_dst)

    a_edge: Optional[Tensor] = None
    if edge_attr is not None and layer.lin_edge is not None:
        attr = edge_attr.view(-1, 1) if edge_attr.dim() == 1 else edge_attr
        # sum_c att_edge[h, c] (W_e e)[h, c] = e . (sum_c att_edge[h, c] W_e[h, c, :]): one [E, H] product.
        w = layer.lin_edge.weight.view(H, C, -1)
        a_edge = attr @ (w * layer.att_edge.view(H, C, 1)).sum(1).t()
    layout = _layout_for(layout, src, dst, num_src, num_dst, x_src)
    if fused:
        out = gat_attention(x_src, layer.att_src, x_dst_term, att_dst, a_edge, src, dst, num_dst,
                            layer.negative_slope, p, layout)
        return _finish(layer, out, res, edge_index, None, None, None, None)
    a_src = _head_dot(x_src, layer.att_src)
    a_dst = None if x_dst is None else _head_dot(x_dst, layer.att_dst)
    scores = gat_scores(a_src, a_dst, a_edge, src, dst, layer.negative_slope)
    return _attend(layer, scores, x_src, src, dst, num_src, num_dst, res, edge_index, return_attention_weights,
                   layout)


def gatv2_forward(layer: Any, x: Union[Tensor, Tuple[Tensor, Tensor]], edge_index: Any,
                  edge_attr: Optional[Tensor] = None, return_attention_weights: Optional[bool] = None):
    """``GATv2Conv.forward`` of ``layer`` (same arguments and returns) on the memory-lean functions above."""
    _no_sparse_tensor(edge_index)
    H, C = layer.heads, layer.out_channels
    res: Optional[Tensor] = None
    if isinstance(x, Tensor):
        if layer.res is not None:
            res = layer.res(x)
        x_l = layer.lin_l(x).view(-1, H, C)
        x_r = x_l if layer.share_weights else layer.lin_r(x).view(-1, H, C)
    else:
        x_l, x_r = x[0], x[1]
        if x_r is not None and layer.res is not None:
            res = layer.res(x_r)
        x_l = layer.lin_l(x_l).view(-1, H, C)
        if x_r is None:
            raise ValueError("x: GATv2 needs destination features, got (x_src, None)")
        x_r = layer.lin_r(x_r).view(-1, H, C)
    loops = min(x_l.size(0), x_r.size(0)) if layer.add_self_loops and isinstance(edge_index, Tensor) else 0
    layout = _cached_layout(edge_index, x_l.size(0), x_r.size(0), loops, x_l)
    if loops:
        edge_index, edge_attr = _self_loops(layer, edge_index, edge_attr, loops)
    src, dst, num_src, num_dst = _edges(edge_index, x_l.size(0), x_r.size(0))
    attr, w_edge = None, None
    if edge_attr is not None:
        attr = edge_attr.view(-1, 1) if edge_attr.dim() == 1 else edge_attr
        w_edge = layer.lin_edge.weight
    scores = gatv2_scores(x_l, x_r, layer.att, attr, w_edge, src, dst, layer.negative_slope)
    layout = _layout_for(layout, src, dst, num_src, num_dst, x_l)
    return _attend(layer, scores, x_l, src, dst, num_src, num_dst, res, edge_index, return_attention_weights,
                   layout)
