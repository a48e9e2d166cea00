r"""GAT's attention score, defined once for every lean path.

.. math::
    s_{e,h} = \mathrm{LeakyReLU}(a_{j,h} + b_{i,h} + c_{e,h}), \qquad
    a_{j,h} = \langle \mathbf{a}^{src}_h, \mathbf{x}_{j,h} \rangle, \quad
    b_{i,h} = \langle \mathbf{a}^{dst}_h, \mathbf{x}^{dst}_{i,h} \rangle

for an edge :math:`e = (j \to i)`, with the edge term :math:`c_{e,h}` (or none). The per-node terms :math:`a, b`
(:func:`node_terms`), their sum over an edge's ends (:func:`logits`, before the LeakyReLU), the LeakyReLU's
backward (:func:`leaky_relu_backward_`) and the terms' backward into the features and attention vectors
(:func:`terms_backward_`) serve the chunked path (all heads, a chunk of edges: ``[chunk, H]``) and the CSR path (one
head, all edges in CSR order: ``[E]``) alike.
"""

from __future__ import annotations

from typing import Optional, Tuple

import torch
from torch import Tensor

__all__ = ["head_dot", "node_terms", "logits", "leaky_relu_backward_", "terms_backward_"]


def head_dot(x: Tensor, att: Tensor) -> Tensor:
    """``(x * att).sum(-1)`` for ``x`` ``[N, H, C]``, ``att`` ``[1, H, C]`` as one batched product per head, with
    no ``[N, H, C]`` temporary: ``[N, H]``."""
    H, C = x.size(1), x.size(2)
    return torch.bmm(x.transpose(0, 1), att.reshape(H, C, 1)).view(H, -1).t()


def _head_outer(g: Tensor, x: Tensor) -> Tensor:
    """``(g.unsqueeze(-1) * x).sum(0, keepdim=True)`` (the gradient of :func:`head_dot` with respect to ``att``) for
    ``g`` ``[N, H]``, ``x`` ``[N, H, C]``, as one batched product per head: ``[1, H, C]``."""
    return torch.bmm(g.t().unsqueeze(1), x.transpose(0, 1)).view(1, x.size(1), x.size(2))


def node_terms(
    x: Tensor, att_src: Tensor, x_dst: Optional[Tensor], att_dst: Optional[Tensor], h: Optional[int] = None
) -> Tuple[Tensor, Optional[Tensor]]:
    """The score terms :math:`a` (from ``x`` ``[N_src, H, C]``) and :math:`b` (from ``x_dst``, or ``x`` itself when
    ``x_dst`` is ``None``; no :math:`b` without ``att_dst``): ``[N, H]`` each, or head ``h``'s ``[N]``."""
    xd = x if x_dst is None else x_dst
    if h is None:
        return head_dot(x, att_src), None if att_dst is None else head_dot(xd, att_dst)
    return torch.mv(x[:, h], att_src[0, h]), None if att_dst is None else torch.mv(xd[:, h], att_dst[0, h])


def logits(
    a: Tensor,
    b: Optional[Tensor],
    c: Optional[Tensor],
    src: Tensor,
    dst: Tensor,
    c_index: Optional[Tensor] = None,
    out: Optional[Tensor] = None,
    tmp: Optional[Tensor] = None,
) -> Tensor:
    """The score before its LeakyReLU, :math:`a_j + b_i + c_e`, for the edges ``src -> dst``: ``c`` holds their
    edge terms (``c[c_index]`` when ``c_index`` is given). ``out``/``tmp``: buffers of the result's shape (the
    result and a work space)."""
    out = torch.index_select(a, 0, src, out=out)
    if b is not None:
        out.add_(torch.index_select(b, 0, dst, out=tmp))
    if c is not None:
        out.add_(c if c_index is None else torch.index_select(c, 0, c_index, out=tmp))
    return out


def leaky_relu_backward_(grad: Tensor, positive: Tensor, slope: float, buffer: Optional[Tensor] = None) -> Tensor:
    """``grad`` times the LeakyReLU's slope (1 where ``positive``, else ``slope``), in place; ``buffer``: a float
    tensor like ``grad`` to hold the factor."""
    factor = (torch.empty_like(grad) if buffer is None else buffer).copy_(positive).mul_(1.0 - slope).add_(slope)
    return grad.mul_(factor)


def terms_backward_(
    g_a: Optional[Tensor],
    g_b: Optional[Tensor],
    x: Tensor,
    att_src: Tensor,
    x_dst: Optional[Tensor],
    att_dst: Optional[Tensor],
    g_x: Optional[Tensor],
    g_att_src: Optional[Tensor],
    g_xd: Optional[Tensor],
    g_att_dst: Optional[Tensor],
    h: Optional[int] = None,
) -> None:
    """Adds the gradients of :func:`node_terms` (``g_a``, ``g_b``: ``[N, H]``, or head ``h``'s ``[N]``) into those
    of the features and attention vectors given (``g_x`` also takes :math:`b`'s share when ``x_dst`` is ``None``),
    in place: no ``[N, H, C]`` temporary, no second gradient for autograd to sum."""
    xd = x if x_dst is None else x_dst
    g_xb = g_x if x_dst is None else g_xd
    for g, feats, att, g_feats, g_att in ((g_a, x, att_src, g_x, g_att_src), (g_b, xd, att_dst, g_xb, g_att_dst)):
        if g is None or att is None:
            continue
        if h is None:
            if g_att is not None:
                g_att.add_(_head_outer(g, feats))
            if g_feats is not None:
                g_feats.addcmul_(g.unsqueeze(-1), att)
        else:
            if g_att is not None:
                g_att[0, h].add_(torch.mv(feats[:, h].t(), g))
            if g_feats is not None:
                g_feats[:, h].addr_(g, att[0, h])
