r"""The lean path's chunked gather-scatter kernels: any device and dtype, and under :func:`torch.compile`.

Each function walks the edges in chunks (:func:`chunks`): a per-edge ``[chunk, H, C]`` product is formed from the
gathered node features and dropped at once, in forward and again in backward, so no ``[E, H, C]`` tensor exists
for long and none is kept for backward. Edges ``src[e] -> dst[e]`` need no particular order. A dropout mask is a
boolean ``keep`` ``[E, H]`` and a one-element ``scale``: the dropped weights are ``w * keep * scale``. Gradients
are written into the tensors the caller passes (``None``: not wanted).
"""

from __future__ import annotations

from typing import Iterator, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor
from torch_geometric.utils import scatter

from .score import leaky_relu_backward_, logits

#: Per-chunk temporaries take about this many bytes (a few of them live at once) ...
CHUNK_BYTES = 1 << 20
#: ... or more, so that one pass has at most this many chunks (each chunk is a few small ops, and small ops cost
#: more than their share when threads wait on each other): the temporaries stay below ~3 / MAX_CHUNKS of an
#: ``[E, H, C]`` tensor.
MAX_CHUNKS = 64


def chunks(num_edges: int, row_bytes: int) -> Iterator[Tuple[int, int]]:
    """``(start, end)`` of consecutive edge chunks whose rows of ``row_bytes`` take at most :data:`CHUNK_BYTES`."""
    if torch.compiler.is_compiling():  # one traced chunk; the compiler fuses gather, product and scatter itself
        yield 0, num_edges
        return
    step = max(1, CHUNK_BYTES // max(1, row_bytes), -(-num_edges // MAX_CHUNKS))
    for a in range(0, num_edges, step):
        yield a, min(a + step, num_edges)


def weights(w: Tensor, keep: Optional[Tensor], scale: Optional[Tensor], a: int, b: int) -> Tensor:
    """Chunk ``[a, b)`` of the weights ``w * keep * scale`` (``keep * scale`` is exactly dropout's float noise)."""
    if keep is None or scale is None:
        return w[a:b]
    return w[a:b] * keep[a:b].to(w.dtype).mul_(scale)


def _row(x: Tensor) -> int:
    return x.size(1) * x.size(2) * x.element_size()


# ----------------------------------------------------------------------------------------------------------------
# Aggregation y_i = sum_{e=(j->i)} w_e x_j and edge softmax
# ----------------------------------------------------------------------------------------------------------------
def aggregate(
    w: Tensor, x: Tensor, src: Tensor, dst: Tensor, num_dst: int, keep: Optional[Tensor], scale: Optional[Tensor]
) -> Tensor:
    out = x.new_zeros(num_dst, x.size(1), x.size(2))
    for a, b in chunks(src.numel(), _row(x)):
        msg = x.index_select(0, src[a:b])
        msg.mul_(weights(w, keep, scale, a, b).unsqueeze(-1))
        out.index_add_(0, dst[a:b], msg)
    return out


def aggregate_backward(
    grad: Tensor,
    w: Tensor,
    x: Tensor,
    src: Tensor,
    dst: Tensor,
    keep: Optional[Tensor],
    scale: Optional[Tensor],
    g_w: Optional[Tensor],
    g_x: Optional[Tensor],
    softmax: bool = False,
) -> None:
    """Adds dL/dx into ``g_x`` and writes dL/dw into ``g_w``; ``softmax``: ``w`` is an edge softmax's output and
    ``g_w`` takes the gradient of its input instead."""
    for a, b in chunks(src.numel(), _row(x)):
        g = grad.index_select(0, dst[a:b])  # dL/dy_i for each edge's destination
        if g_w is not None:
            gw = (x.index_select(0, src[a:b]) * g).sum(-1)  # dL/d(dropped w)
            g_w[a:b] = gw if keep is None else gw.mul_(keep[a:b]).mul_(scale)
        if g_x is not None:
            g_x.index_add_(0, src[a:b], g.mul_(weights(w, keep, scale, a, b).unsqueeze(-1)))
    if softmax and g_w is not None:
        softmax_backward_(g_w, w, dst, grad.size(0))


def softmax(scores: Tensor, index: Tensor, num_nodes: int, inplace: bool = False) -> Tensor:
    """As :func:`torch_geometric.utils.softmax`: ``exp(s - max) / (sum + 1e-16)``, in one ``[E, H]`` buffer
    (``scores``' own with ``inplace``)."""
    peak = scatter(scores, index, dim=0, dim_size=num_nodes, reduce="max")
    rows = scores.size(1) * scores.element_size()
    if inplace:
        out = scores
        for a, b in chunks(index.numel(), rows):
            out[a:b].sub_(peak.index_select(0, index[a:b]))
    else:
        out = peak.index_select(0, index).neg_().add_(scores)  # scores - max, exactly
    out.exp_()
    total = scatter(out, index, dim=0, dim_size=num_nodes, reduce="sum") + 1e-16
    for a, b in chunks(index.numel(), rows):
        out[a:b].div_(total.index_select(0, index[a:b]))
    return out


def softmax_backward_(g: Tensor, alpha: Tensor, index: Tensor, num_nodes: int) -> Tensor:
    r"""The edge softmax's backward in place: ``g`` (``dL/d alpha``) becomes
    :math:`\alpha_e (g_e - \sum_{e' \to i} \alpha_{e'} g_{e'})`."""
    g.mul_(alpha)
    row = scatter(g, index, dim=0, dim_size=num_nodes, reduce="sum")
    for a, b in chunks(index.numel(), alpha.size(1) * alpha.element_size()):
        g[a:b].sub_(row.index_select(0, index[a:b]).mul_(alpha[a:b]))
    return g


# ----------------------------------------------------------------------------------------------------------------
# GAT: scores, and the fused attention (scores, softmax, dropout, aggregation)
# ----------------------------------------------------------------------------------------------------------------
def gat_scores(
    a_src: Tensor, a_dst: Optional[Tensor], a_edge: Optional[Tensor], src: Tensor, dst: Tensor, slope: float
) -> Tensor:
    z = a_src.new_empty(src.numel(), a_src.size(1))
    for a, b in chunks(src.numel(), z.size(1) * z.element_size()):
        z[a:b] = _logits(a_src, a_dst, a_edge, src, dst, a, b)
    return F.leaky_relu(z, slope, inplace=True)


def gat_scores_backward(
    grad: Tensor,
    a_src: Tensor,
    a_dst: Optional[Tensor],
    a_edge: Optional[Tensor],
    src: Tensor,
    dst: Tensor,
    slope: float,
) -> Tensor:
    """dL/d(score before LeakyReLU) ``[E, H]``, the logits recomputed chunk by chunk."""
    g = grad.clone(memory_format=torch.contiguous_format)
    for a, b in chunks(src.numel(), grad.size(1) * grad.element_size()):
        pre = _logits(a_src, a_dst, a_edge, src, dst, a, b)
        leaky_relu_backward_(g[a:b], pre > 0, slope, pre)
    return g


def _logits(
    a_src: Tensor, a_dst: Optional[Tensor], a_edge: Optional[Tensor], src: Tensor, dst: Tensor, a: int, b: int
) -> Tensor:
    return logits(a_src, a_dst, None if a_edge is None else a_edge[a:b], src[a:b], dst[a:b])


def _gat_weights(
    a_src: Tensor,
    a_dst: Optional[Tensor],
    a_edge: Optional[Tensor],
    src: Tensor,
    dst: Tensor,
    slope: float,
    shift: Tensor,
    total: Optional[Tensor],
    a: int,
    b: int,
) -> Tuple[Tensor, Tensor]:
    """Chunk ``[a, b)``: the logits and the softmax weights ``exp(score - shift) [/ total]``."""
    pre = _logits(a_src, a_dst, a_edge, src, dst, a, b)
    w = F.leaky_relu(pre, slope).sub_(shift.index_select(0, dst[a:b])).exp_()
    return pre, (w if total is None else w.div_(total.index_select(0, dst[a:b])))


def gat_forward(
    x: Tensor,
    a_src: Tensor,
    a_dst: Optional[Tensor],
    a_edge: Optional[Tensor],
    src: Tensor,
    dst: Tensor,
    num_dst: int,
    slope: float,
    keep: Optional[Tensor],
    scale: Optional[Tensor],
) -> Tuple[Tensor, Tensor]:
    """The fused GAT attention from the score terms ``[N, H]``: ``(out [num_dst, H, C], lse [num_dst, H])`` with
    the softmax's log-normaliser, from which backward recomputes the weights."""
    E, H = src.numel(), a_src.size(1)
    peak = a_src.new_full((num_dst, H), float("-inf"))
    for a, b in chunks(E, H * a_src.element_size()):
        z = F.leaky_relu(_logits(a_src, a_dst, a_edge, src, dst, a, b), slope, inplace=True)
        peak.scatter_reduce_(0, dst[a:b].view(-1, 1).expand(-1, H), z, "amax")
    total = a_src.new_zeros(num_dst, H)
    for a, b in chunks(E, H * a_src.element_size()):
        z = F.leaky_relu(_logits(a_src, a_dst, a_edge, src, dst, a, b), slope, inplace=True)
        total.index_add_(0, dst[a:b], z.sub_(peak.index_select(0, dst[a:b])).exp_())
    total.add_(1e-16)  # as PyG's softmax: exp(s - max) / (sum + 1e-16)
    out = x.new_zeros(num_dst, H, x.size(2))
    for a, b in chunks(E, _row(x)):
        _, w = _gat_weights(a_src, a_dst, a_edge, src, dst, slope, peak, total, a, b)
        if keep is not None:
            w.mul_(keep[a:b]).mul_(scale)
        out.index_add_(0, dst[a:b], x.index_select(0, src[a:b]).mul_(w.unsqueeze(-1)))
    return out, total.log_().add_(peak)


def gat_backward(
    grad: Tensor,
    x: Tensor,
    a_src: Tensor,
    a_dst: Optional[Tensor],
    a_edge: Optional[Tensor],
    src: Tensor,
    dst: Tensor,
    keep: Optional[Tensor],
    scale: Optional[Tensor],
    lse: Tensor,
    slope: float,
    g_x: Optional[Tensor],
    g_a: Optional[Tensor],
    g_b: Optional[Tensor],
    g_edge: Optional[Tensor],
) -> None:
    """:func:`gat_forward`'s backward: adds into ``g_x`` (the aggregation's share) and the score terms' gradients
    ``g_a``, ``g_b`` ``[N, H]``, writes ``g_edge`` ``[E, H]``. Two passes over the edges; the second recomputes
    dL/dalpha instead of keeping it ([E, H] less)."""
    row = a_src.new_zeros(grad.size(0), a_src.size(1))  # per destination: sum of alpha * dL/dalpha
    for second in (False, True):
        for a, b in chunks(src.numel(), _row(x)):
            pre, s = _gat_weights(a_src, a_dst, a_edge, src, dst, slope, lse, None, a, b)
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
            gs = leaky_relu_backward_(gw.sub_(row.index_select(0, dst[a:b])).mul_(s), pre > 0, slope, pre)
            if g_a is not None:
                g_a.index_add_(0, src[a:b], gs)
            if g_b is not None:
                g_b.index_add_(0, dst[a:b], gs)
            if g_edge is not None:
                g_edge[a:b] = gs
        if g_a is None and g_b is None and g_edge is None:
            break


# ----------------------------------------------------------------------------------------------------------------
# GATv2 scores and dot-product scores
# ----------------------------------------------------------------------------------------------------------------
def _gatv2_pre(
    x_src: Tensor,
    x_dst: Tensor,
    edge_attr: Optional[Tensor],
    w_edge: Optional[Tensor],
    src: Tensor,
    dst: Tensor,
    a: int,
    b: int,
) -> Tensor:
    h = x_src.index_select(0, src[a:b])
    h.add_(x_dst.index_select(0, dst[a:b]))
    if edge_attr is not None and w_edge is not None:
        h.add_((edge_attr[a:b] @ w_edge.t()).view(b - a, x_src.size(1), x_src.size(2)))
    return h


def gatv2_scores(
    x_src: Tensor,
    x_dst: Tensor,
    att: Tensor,
    edge_attr: Optional[Tensor],
    w_edge: Optional[Tensor],
    src: Tensor,
    dst: Tensor,
    slope: float,
) -> Tensor:
    out = x_src.new_empty(src.numel(), x_src.size(1))
    for a, b in chunks(src.numel(), _row(x_src)):
        h = _gatv2_pre(x_src, x_dst, edge_attr, w_edge, src, dst, a, b)
        out[a:b] = (F.leaky_relu(h, slope, inplace=True) * att).sum(-1)
    return out


def gatv2_scores_backward(
    grad: Tensor,
    x_src: Tensor,
    x_dst: Tensor,
    att: Tensor,
    edge_attr: Optional[Tensor],
    w_edge: Optional[Tensor],
    src: Tensor,
    dst: Tensor,
    slope: float,
    g_src: Optional[Tensor],
    g_dst: Optional[Tensor],
    g_att: Optional[Tensor],
    g_attr: Optional[Tensor],
    g_w: Optional[Tensor],
) -> None:
    H, C = x_src.size(1), x_src.size(2)
    for a, b in chunks(src.numel(), _row(x_src)):
        h = _gatv2_pre(x_src, x_dst, edge_attr, w_edge, src, dst, a, b)
        g = grad[a:b].unsqueeze(-1)
        pos = h > 0
        if g_att is not None:
            g_att += (F.leaky_relu(h, slope, inplace=True) * g).sum(0, keepdim=True)
        gh = torch.where(pos, g * att, (g * att).mul_(slope))  # dL/dh [chunk, H, C]
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


def edge_dot(q: Tensor, k: Tensor, src: Tensor, dst: Tensor) -> Tensor:
    out = q.new_empty(src.numel(), q.size(1))
    for a, b in chunks(src.numel(), _row(q)):
        out[a:b] = (q.index_select(0, dst[a:b]) * k.index_select(0, src[a:b])).sum(-1)
    return out


def edge_dot_backward(
    grad: Tensor,
    q: Tensor,
    k: Tensor,
    src: Tensor,
    dst: Tensor,
    scale: float,
    g_q: Optional[Tensor],
    g_k: Optional[Tensor],
) -> None:
    g_all = (grad * scale).unsqueeze(-1)
    for a, b in chunks(src.numel(), _row(q)):
        g = g_all[a:b]
        if g_q is not None:
            g_q.index_add_(0, dst[a:b], k.index_select(0, src[a:b]).mul_(g))
        if g_k is not None:
            g_k.index_add_(0, src[a:b], q.index_select(0, dst[a:b]).mul_(g))
