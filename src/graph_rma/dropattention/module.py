"""DropAttention as a module (:class:`DropAttention`): what layers take as ``drop_attention=``, the dense or sparse
call, the rate it takes from its host layer, the cached edge order for windows, and the fused softmax-and-drop the
layers use.
"""

from __future__ import annotations

from typing import Optional, Tuple

import torch
from torch import Tensor, nn
from torch_geometric.utils import scatter, softmax

from .._errors import GraphRMAError
from .functional import NumNodes, _check_options, _is_compiling, _rescale_sparse, drop_attention, drop_attention_dense
from .masks import _element_order, _sparse_mask, draw_window_mask


class DropAttention(nn.Module):
    r"""DropAttention as a module: dense ``[..., L, S]`` attention, or sparse ``[E, H]`` edge weights.

    Pass it to a layer as ``drop_attention=DropAttention(p)`` (e.g. :class:`~graph_rma.nn.RepulsiveGATConv`,
    where it replaces the plain attention dropout), or call it directly. Active in ``train()`` mode only.

    ``DropAttention()`` without ``p`` takes the rate of the layer it is installed in: the layer's own attention
    ``dropout`` (e.g. GAT's 0.6), so that switching to DropAttention changes *how* attention is dropped, not how
    much. The layer reports the rate in effect (``RepulsiveGATConv.attention_dropout_rate``). Called directly, a
    ``DropAttention()`` without ``p`` raises a ``GraphRMAError``.

    Args:
        p: drop probability in ``[0, 1)``; ``None`` (default): the layer's own attention dropout rate.
        window: consecutive positions dropped per window start (window starts have probability ``p / window``).
        mode: ``"element"`` or ``"column"`` (see :mod:`graph_rma.dropattention`).
        rescale: ``"normalized"`` (rows renormalised to sum to 1) or ``"inverse"`` (``1 / (1 - p)``).
    """

    def __init__(
        self, p: Optional[float] = None, window: int = 1, mode: str = "element", rescale: str = "normalized"
    ) -> None:
        super().__init__()
        _check_options(p, window, mode, rescale, allow_none=True)
        self.p: Optional[float] = None if p is None else float(p)
        self.window, self.mode, self.rescale = int(window), mode, rescale
        self._order_cache: Optional[tuple] = None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """DropAttention has no parameters; this clears the cached edge order."""
        self._order_cache = None

    def __deepcopy__(self, memo):  # converted layers each get their own module; the cache is not copied
        return type(self)(self.p, self.window, self.mode, self.rescale).train(self.training)

    def forward(
        self,
        attn: Tensor,
        edge_index: Optional[Tensor] = None,
        num_nodes: NumNodes = None,
        generator: Optional[torch.Generator] = None,
    ) -> Tensor:
        """Dense when ``edge_index`` is ``None`` (:func:`drop_attention_dense`), else sparse
        (:func:`drop_attention`)."""
        p = self.rate()
        if edge_index is None:
            return drop_attention_dense(attn, p, self.window, self.mode, self.rescale, self.training, generator)
        return drop_attention(
            attn, edge_index, p, self.window, self.mode, self.rescale, self.training, num_nodes, generator
        )

    def rate(self, layer_rate: Optional[float] = None) -> float:
        """The drop probability in effect: ``p``, or ``layer_rate`` (the host layer's dropout) when ``p`` is None."""
        if self.p is not None:
            return self.p
        if layer_rate is None:
            raise GraphRMAError(
                "p: DropAttention() without p takes its rate from the layer it is installed in; this "
                "layer gives none, so pass p (e.g. DropAttention(0.1))"
            )
        _check_options(layer_rate, self.window, self.mode, self.rescale)
        return float(layer_rate)

    def _order(self, src: Tensor, dst: Tensor, num_src: int, num_dst: int) -> Optional[Tuple[Tensor, Tensor]]:
        """The element-mode edge order for ``window > 1``, cached while the edges stay the same.

        The cache is keyed by the edges' *content* (one ``torch.equal`` pass, much cheaper than the sort), so a
        layer that rebuilds ``edge_index`` every call (e.g. adding self-loops) still hits it; it is bypassed under
        ``torch.compile``.
        """
        if self.mode != "element" or self.window == 1 or _is_compiling():
            return None
        cached = self._order_cache
        if (
            cached is not None
            and cached[0].shape == src.shape
            and cached[0].device == src.device
            and cached[2:4] == (num_src, num_dst)
            and torch.equal(cached[0], src)
            and torch.equal(cached[1], dst)
        ):
            return cached[4]
        order = _element_order(src, dst, num_src, num_dst)
        self._order_cache = (src.detach().clone(), dst.detach().clone(), num_src, num_dst, order)
        return order

    def sparse_softmax(
        self,
        logits: Tensor,
        src: Tensor,
        dst: Tensor,
        num_src: int,
        num_dst: int,
        ptr: Optional[Tensor] = None,
        generator: Optional[torch.Generator] = None,
        layer_rate: Optional[float] = None,
        softmax_fn=softmax,
    ) -> Tensor:
        r"""Edge softmax over each destination's incoming edges followed by DropAttention, for layers.

        With ``rescale="normalized"`` this is computed as one softmax over the *surviving* edges (dropped logits
        set to :math:`-\infty`), which equals renormalising the dropped softmax weights but stays finite, with
        finite gradients, even when the survivors' weights underflow. Rows left without a survivor keep the plain
        softmax. ``logits`` ``[E, H]``; ``ptr`` as in :func:`torch_geometric.utils.softmax`; ``layer_rate``: the
        host layer's dropout, used when ``p`` is None; ``softmax_fn`` (that function's signature) computes the
        softmax, e.g. :func:`graph_rma.nn.lean.edge_softmax`.
        """
        p = self.rate(layer_rate)
        if not self.training or p == 0.0 or logits.numel() == 0:
            return softmax_fn(logits, dst, ptr, num_dst)
        dropped = _sparse_mask(
            src,
            dst,
            logits.size(1),
            num_src,
            num_dst,
            p,
            self.window,
            self.mode,
            generator,
            self._order(src, dst, num_src, num_dst),
        )
        if self.rescale == "inverse":
            return _rescale_sparse(softmax_fn(logits, dst, ptr, num_dst), dropped, dst, num_dst, p, self.rescale)
        survivors = scatter((~dropped).to(torch.int32), dst, dim=0, dim_size=num_dst, reduce="sum")
        dropped = dropped & (survivors > 0).index_select(0, dst)
        return softmax_fn(logits.masked_fill(dropped, float("-inf")), dst, ptr, num_dst)

    def dense_softmax(
        self, scores: Tensor, generator: Optional[torch.Generator] = None, layer_rate: Optional[float] = None
    ) -> Tensor:
        r"""Softmax over the last dimension of ``scores`` ``[..., L, S]`` followed by DropAttention, for layers.

        Draws the same mask as :func:`drop_attention_dense`. With ``rescale="normalized"`` it is one softmax over
        the surviving keys (dropped scores set to :math:`-\infty`): equal to renormalising the dropped softmax
        weights, but finite with finite gradients when the survivors' weights underflow (very peaked rows). Rows
        without a surviving finite score keep the plain softmax.
        """
        p = self.rate(layer_rate)
        if not self.training or p == 0.0 or scores.numel() == 0:
            return torch.softmax(scores, dim=-1)
        if self.rescale == "inverse":
            return drop_attention_dense(
                torch.softmax(scores, dim=-1), p, self.window, self.mode, self.rescale, True, generator
            )
        shape = tuple(scores.shape)
        if self.mode == "column":
            shape = shape[:-2] + (1, shape[-1])
        dropped = draw_window_mask(shape, p, self.window, scores.device, generator)
        masked = scores.masked_fill(dropped, float("-inf"))
        alive = (masked > float("-inf")).any(dim=-1, keepdim=True)
        return torch.softmax(torch.where(alive, masked, scores), dim=-1)

    def extra_repr(self) -> str:
        return f"p={self.p}, window={self.window}, mode={self.mode!r}, rescale={self.rescale!r}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.extra_repr()})"
