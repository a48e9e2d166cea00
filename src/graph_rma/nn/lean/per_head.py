r"""The lean path's CSR kernels, one head at a time: CPU tensors of ``float32``/``float64`` outside
:func:`torch.compile` (:func:`~graph_rma.nn.lean.csr.csr_supported`).

The aggregation, its transpose and :math:`\langle \mathbf{g}_{i,h}, \mathbf{x}_{j,h} \rangle` are sparse-dense
products over the edges' :class:`~graph_rma.nn.lean.csr.EdgeCSR`, one head at a time: no ``[E, C]`` tensor is
formed at all, per-edge temporaries are ``[E]`` vectors in CSR order (allocated once per call and reused by every
head), and backward keeps the CSR (20 bytes per edge) instead of the edge index. Dropout masks are as in
:mod:`graph_rma.nn.lean.chunked` (``keep`` ``[E, H]`` in edge order, ``scale``), except that the fused GAT keeps
its mask as bits (:func:`pack_mask`: one byte per edge for up to 8 heads, not 8); gradients are written into the
tensors the caller passes.
"""

from __future__ import annotations

from typing import Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor

from .csr import EdgeCSR, sddmm, segment_max, segment_sum, spmm, spmm_t
from .score import leaky_relu_backward_, logits, node_terms, terms_backward_


def _mask(keep: Optional[Tensor], csr: EdgeCSR, h: int) -> Optional[Tensor]:
    """Head ``h``'s boolean dropout mask in CSR order."""
    return None if keep is None else keep[:, h].index_select(0, csr.perm)


def pack_mask(keep: Optional[Tensor], csr: EdgeCSR) -> Optional[Tensor]:
    """The boolean dropout mask ``keep`` ``[E, H]`` as bits in CSR order: ``[E, ceil(H / 8)]`` bytes, bit ``h % 8``
    of column ``h // 8`` keeping head ``h``."""
    if keep is None:
        return None
    bits = torch.zeros(keep.size(0), (keep.size(1) + 7) // 8, dtype=torch.uint8, device=keep.device)
    for h in range(keep.size(1)):
        bits[:, h // 8].bitwise_or_(keep[:, h].index_select(0, csr.perm).to(torch.uint8).bitwise_left_shift_(h % 8))
    return bits


def _unpack(bits: Optional[Tensor], h: int, out: Optional[Tensor]) -> Optional[Tensor]:
    """Head ``h``'s 0/1 dropout mask in CSR order from :func:`pack_mask`'s bits (into ``out``, ``uint8`` ``[E]``)."""
    return None if bits is None else torch.bitwise_right_shift(bits[:, h // 8], h % 8, out=out).bitwise_and_(1)


def _with_slack(like: Tensor, shape: Tuple[int, ...]) -> Tensor:
    """An empty tensor of ``shape`` whose storage has 64 spare elements at its end.

    The layer's output is freed as soon as the loss has read it, and the next tensors of its size are the loss's
    gradients; glibc's ``posix_memalign`` (torch's CPU allocator) cannot place a block in a free hole of exactly its
    own size, so without the spare bytes a gradient can grow the heap by one more ``[N, H, C]`` block instead of
    reusing the output's (what this buys is measured with ``benchmarks/bench_memory.py``)."""
    n = 1
    for d in shape:
        n *= d
    return like.new_empty(0).set_(like.new_empty(n + 64).untyped_storage(), 0, shape)


def _drop_(v: Tensor, mask: Optional[Tensor], scale: Optional[Tensor], buffer: Optional[Tensor] = None) -> Tensor:
    """``v * mask * scale`` in place (``buffer``, like ``v``, takes the mask's float copy)."""
    if mask is None:
        return v
    return v.mul_(mask if buffer is None else buffer.copy_(mask)).mul_(scale)


def _softmax_backward_(csr: EdgeCSR, grad: Tensor, alpha: Tensor, buffer: Optional[Tensor] = None) -> Tensor:
    r""":math:`\alpha_e (g_e - \sum_{e' \to i} \alpha_{e'} g_{e'})` for one head in CSR order, in ``grad``'s
    buffer (the edge softmax's backward; ``buffer``: an ``[E]`` work vector, else a new one)."""
    grad.mul_(alpha)
    per_edge = torch.index_select(segment_sum(csr, grad), 0, csr.row, out=buffer)
    return grad.sub_(per_edge.mul_(alpha))


def aggregate(csr: EdgeCSR, w: Tensor, x: Tensor, keep: Optional[Tensor], scale: Optional[Tensor]) -> Tensor:
    out = x.new_empty(csr.num_dst, x.size(1), x.size(2))
    for h in range(x.size(1)):
        out[:, h] = spmm(csr, _drop_(w[:, h].index_select(0, csr.perm), _mask(keep, csr, h), scale), x[:, h])
    return out


def aggregate_backward(
    csr: EdgeCSR,
    grad: Tensor,
    w: Tensor,
    x: Tensor,
    keep: Optional[Tensor],
    scale: Optional[Tensor],
    g_w: Optional[Tensor],
    g_x: Optional[Tensor],
    softmax: bool = False,
) -> None:
    """As :func:`graph_rma.nn.lean.chunked.aggregate_backward`, head by head."""
    for h in range(x.size(1)):
        m, v = _mask(keep, csr, h), w[:, h].index_select(0, csr.perm)
        if g_x is not None:
            g_x[:, h] = spmm_t(csr, v if m is None else v * m * scale, grad[:, h])
        if g_w is not None:
            gv = _drop_(sddmm(csr, grad[:, h], x[:, h]), m, scale)
            g_w[:, h].index_put_((csr.perm,), _softmax_backward_(csr, gv, v) if softmax else gv)


def gat_forward(
    csr: EdgeCSR,
    x: Tensor,
    att_src: Tensor,
    x_dst: Optional[Tensor],
    att_dst: Optional[Tensor],
    a_edge: Optional[Tensor],
    slope: float,
    bits: Optional[Tensor],
    scale: Optional[Tensor],
) -> Tuple[Tensor, Tensor]:
    r"""The fused GAT attention one head at a time from end to end (score terms, scores, softmax, dropout
    (:func:`pack_mask`'s ``bits``), product): ``(out [num_dst, H, C], lse [num_dst, H])`` with the softmax's
    log-normaliser :math:`\log \sum_{e' \to i} \exp s_{e'}`, from which backward recomputes the weights."""
    E, H, C, num_dst = csr.col.numel(), x.size(1), x.size(2), csr.num_dst
    lse = x.new_empty(num_dst, H)
    w, tmp = x.new_empty(2, E).unbind(0)  # the per-edge work space, one block
    bit = None if bits is None else bits.new_empty(E)  # one head's mask
    x_h, out_h = x.new_empty(x.size(0), C), x.new_empty(num_dst, C)  # one head's features and output, contiguous
    out = _with_slack(x, (num_dst, H, C))  # last, right above the work space
    for h in range(H):
        a, b = node_terms(x, att_src, x_dst, att_dst, h)
        c = None if a_edge is None else a_edge[:, h]
        F.leaky_relu_(logits(a, b, c, csr.col, csr.row, csr.perm, w, tmp), slope)
        m = segment_max(csr, w)
        w.sub_(torch.index_select(m, 0, csr.row, out=tmp)).exp_()
        z = segment_sum(csr, w).add_(1e-16)
        w.div_(torch.index_select(z, 0, csr.row, out=tmp))  # as PyG's softmax: exp(s - max) / (sum + 1e-16)
        lse[:, h] = z.log_().add_(m)
        _drop_(w, _unpack(bits, h, bit), scale, tmp)
        out[:, h] = spmm(csr, w, x_h.copy_(x[:, h]), out_h)
    return out, lse


def gat_backward(
    csr: EdgeCSR,
    grad: Tensor,
    x: Tensor,
    att_src: Tensor,
    x_dst: Optional[Tensor],
    att_dst: Optional[Tensor],
    a_edge: Optional[Tensor],
    bits: Optional[Tensor],
    scale: Optional[Tensor],
    lse: Tensor,
    slope: float,
    g_x: Optional[Tensor],
    g_att_src: Optional[Tensor],
    g_xd: Optional[Tensor],
    g_att_dst: Optional[Tensor],
    g_edge: Optional[Tensor],
) -> None:
    """:func:`gat_forward`'s backward head by head into the given gradients. Three ``[E]`` work vectors and two of
    bytes, allocated once, hold every per-edge temporary; the score terms' gradients (``[N]`` per head) go
    straight into those of the features and attention vectors."""
    E, H, C = csr.col.numel(), x.size(1), x.size(2)
    want_src = g_x is not None or g_att_src is not None  # dL/da, for the source features or att_src
    want_dst = att_dst is not None and (
        g_att_dst is not None or g_xd is not None or (x_dst is None and g_x is not None)
    )
    s, t1, t2 = x.new_empty(3, E).unbind(0)  # the per-edge work space, one block
    positive = torch.empty(E, dtype=torch.bool, device=x.device)
    bit = None if bits is None else bits.new_empty(E)  # one head's mask
    g_h, x_h, gx_h = grad.new_empty(grad.size(0), C), x.new_empty(x.size(0), C), x.new_empty(x.size(0), C)
    for h in range(H):
        g_h.copy_(grad[:, h])
        x_h.copy_(x[:, h])
        a, b = node_terms(x, att_src, x_dst, att_dst, h)
        logits(a, b, None if a_edge is None else a_edge[:, h], csr.col, csr.row, csr.perm, s, t1)
        del a, b
        torch.gt(s, 0, out=positive)  # where LeakyReLU's slope is 1
        F.leaky_relu_(s, slope)  # the softmax weight, recomputed from the score and the log-normaliser
        s.sub_(torch.index_select(lse[:, h], 0, csr.row, out=t1)).exp_()
        m = _unpack(bits, h, bit)
        if g_x is not None:
            g_x[:, h] = spmm_t(csr, _drop_(t1.copy_(s), m, scale, t2), g_h, t2, gx_h)
        if not (want_src or want_dst or g_edge is not None):
            continue
        ga = _drop_(sddmm(csr, g_h, x_h, t1), m, scale, t2)  # dL/dalpha
        gs = leaky_relu_backward_(_softmax_backward_(csr, ga, s, t2), positive, slope, s)  # dL/d(logits)
        g_a = gs.new_zeros(x.size(0)).index_add_(0, csr.col, gs) if want_src else None
        g_b = segment_sum(csr, gs) if want_dst else None
        terms_backward_(g_a, g_b, x, att_src, x_dst, att_dst, g_x, g_att_src, g_xd, g_att_dst, h)
        if g_edge is not None:
            g_edge[:, h].index_put_((csr.perm,), gs)


def edge_dot(csr: EdgeCSR, q: Tensor, k: Tensor) -> Tensor:
    out = q.new_empty(csr.col.numel(), q.size(1))
    for h in range(q.size(1)):
        out[:, h].index_put_((csr.perm,), sddmm(csr, q[:, h], k[:, h]))
    return out


def edge_dot_backward(
    csr: EdgeCSR, grad: Tensor, q: Tensor, k: Tensor, scale: float, g_q: Optional[Tensor], g_k: Optional[Tensor]
) -> None:
    for h in range(q.size(1)):
        v = grad[:, h].index_select(0, csr.perm).mul_(scale)
        if g_q is not None:
            g_q[:, h] = spmm(csr, v, k[:, h])
        if g_k is not None:
            g_k[:, h] = spmm_t(csr, v, q[:, h])
