r"""DropAttention (Zehui et al., 2019): drop attention weights, not hidden units, then renormalise.

For an attention row :math:`a_{i,\cdot}` (the weights one query / destination node :math:`i` puts on its keys /
source nodes), DropAttention draws a binary mask :math:`m` and returns

.. math::
    \hat a_{ij} = \frac{m_{ij}\, a_{ij}}{\sum_k m_{ik}\, a_{ik}} \quad (\texttt{rescale="normalized"}), \qquad
    \hat a_{ij} = \frac{m_{ij}\, a_{ij}}{1 - p} \quad (\texttt{rescale="inverse"}).

The mask follows the paper's Algorithm 1: *window starts* are drawn i.i.d. with probability
:math:`\gamma = p / w`, and each start drops :math:`w` consecutive positions (fewer at the end of a row), so an
interior position is dropped with probability :math:`1 - (1 - p/w)^w` (:math:`= p` for :math:`w = 1`).

* ``mode="element"`` (DropAttention(e)) drops single weights :math:`a_{ij}`. Dense ``[..., L, S]`` matrices:
  consecutive positions along the key axis of each row. Sparse graphs: the incoming edges of each destination,
  ordered by source node id, so that on a complete graph the sparse and dense versions coincide.
* ``mode="column"`` (DropAttention(c)) drops a key / value unit :math:`v_j` for every query: a whole column
  :math:`j` of the attention matrix; on a graph, every edge leaving source node :math:`j`. Windows run over
  consecutive column indices / source node ids.

Masks are drawn independently for every head (every leading index of a dense input).

Defined cases:

* A row left with no surviving weight (all its weights dropped; for ``"normalized"`` also a row whose
  surviving weights sum to zero) is returned **unchanged** rather than as zeros or NaN: that query keeps its full
  attention for this step.
* ``training=False`` or ``p = 0``: the input is returned as is (identity at inference).
* float16 / bfloat16 inputs are rescaled in float32 and returned in their own dtype.
* Randomness comes from ``torch.rand`` with the given ``generator`` (drawn on the generator's device), so a fixed
  seed reproduces the mask. The uniforms are drawn in the order ``[H, P]`` (sparse: head-major, edges sorted by
  destination then source; dense: the input's own layout), hence a complete graph with ``H`` heads and a dense
  ``[H, N, N]`` matrix get the very same mask from the same seed. For ``window=1`` in element mode every edge is
  independent and the sparse draw follows the given edge order (no sort is needed).
"""

from __future__ import annotations

import math
from typing import Optional, Tuple, Union

import torch
from torch import Tensor, nn
from torch_geometric.utils import cumsum, degree, index_sort, scatter, softmax

__all__ = ["DropAttention", "drop_attention", "drop_attention_dense"]

MODES = ("element", "column")
RESCALES = ("normalized", "inverse")
NumNodes = Union[None, int, Tuple[int, int]]


def _is_compiling() -> bool:
    return torch.compiler.is_compiling()


def _check_options(p: Optional[float], window: int, mode: str, rescale: str, allow_none: bool = False) -> None:
    if p is None and allow_none:
        pass
    elif isinstance(p, bool) or not isinstance(p, (int, float)) or not math.isfinite(p) or not 0.0 <= p < 1.0:
        raise ValueError(f"p: expected a drop probability in [0, 1), got {p!r}")
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise ValueError(f"window: expected an integer >= 1, got {window!r}")
    if mode not in MODES:
        raise ValueError(f"mode: expected one of {MODES}, got {mode!r}")
    if rescale not in RESCALES:
        raise ValueError(f"rescale: expected one of {RESCALES}, got {rescale!r}")


# ----------------------------------------------------------------------------------------------------------------
# The one mask-drawing routine (shared by the sparse and the dense version)
# ----------------------------------------------------------------------------------------------------------------
def draw_window_mask(
    shape: Tuple[int, ...],
    p: float,
    window: int,
    device: torch.device,
    generator: Optional[torch.Generator] = None,
    rank: Optional[Tensor] = None,
) -> Tensor:
    r"""Boolean *dropped* mask of ``shape``; positions run along the last dimension.

    Window starts are i.i.d. Bernoulli(:math:`\gamma = p / w`), drawn as ``torch.rand(shape) < gamma``; position
    ``k`` is dropped when a start lies in ``[k - w + 1, k]`` within its segment. Segments are whole rows of the
    last dimension unless ``rank`` (``[shape[-1]]``: each position's offset from the start of its segment) splits
    the last dimension into consecutive segments, e.g. the destinations of an edge list sorted by destination.

    The window is applied by doubling, :math:`O(\log w)` shifted ORs: with :math:`D_m[k]` = "a start in the last
    :math:`m` positions of ``k``'s segment", :math:`D_{a+b}[k] = D_a[k] \lor (D_b[k - a]` if ``rank[k] >= a``).
    """
    gen_device = generator.device if generator is not None else device
    u = torch.rand(shape, generator=generator, device=gen_device, dtype=torch.float32)
    starts = u.to(device) < (p / window)
    if window == 1:
        return starts
    size = shape[-1]

    def combine(d_a: Tensor, a: int, d_b: Tensor) -> Tensor:  # D_{a+b} from D_a and D_b
        out = d_a.clone()
        if a < size:
            shifted = d_b.narrow(-1, 0, size - a)
            if rank is not None:
                shifted = shifted & (rank.narrow(0, a, size - a) >= a)
            out.narrow(-1, a, size - a).logical_or_(shifted)
        return out

    result: Optional[Tensor] = None
    covered, power, span, w = 0, starts, 1, window
    while w > 0:
        if w & 1:
            result = power if result is None else combine(result, covered, power)
            covered += span
        w >>= 1
        if w > 0:
            power, span = combine(power, span, power), 2 * span
    assert result is not None
    return result


def _packed(mask: Tensor) -> Tensor:
    """A boolean ``[R, H]`` mask viewed with each row as few wide integers as ``H`` allows (fast row copies)."""
    for dtype, width in ((torch.int64, 8), (torch.int32, 4), (torch.int16, 2)):
        if mask.size(1) % width == 0:
            return mask.view(dtype)
    return mask


def _gather_rows(mask: Tensor, index: Tensor) -> Tensor:
    """``mask[index]`` for a contiguous boolean ``[R, H]`` mask."""
    return _packed(mask).index_select(0, index).view(torch.bool)


def _scatter_rows(mask: Tensor, index: Tensor) -> Tensor:
    """``out[index] = mask`` for a contiguous boolean ``[E, H]`` mask and a permutation ``index``."""
    out = torch.empty_like(mask)
    _packed(out).index_copy_(0, index, _packed(mask))
    return out


# ----------------------------------------------------------------------------------------------------------------
# Rescaling
# ----------------------------------------------------------------------------------------------------------------
def _work(x: Tensor) -> Tensor:
    return x.float() if x.dtype in (torch.float16, torch.bfloat16) else x


def _rescale_sparse(alpha: Tensor, dropped: Tensor, dst: Tensor, num_dst: int, p: float, rescale: str) -> Tensor:
    work = _work(alpha)
    keep = (~dropped).to(work.dtype)
    kept = work * keep
    if rescale == "normalized":
        total = scatter(kept, dst, dim=0, dim_size=num_dst, reduce="sum")  # [N_dst, H]
        alive = total > 0
        # Division (not a reciprocal): finite for tiny surviving sums, and its backward never squares the sum.
        out = kept / torch.where(alive, total, torch.ones_like(total)).index_select(0, dst)
    else:
        alive = scatter(keep, dst, dim=0, dim_size=num_dst, reduce="sum") > 0
        out = kept * (alive.to(work.dtype) * (1.0 / (1.0 - p))).index_select(0, dst)
    # Rows with a survivor are rescaled; rows without one keep their weights: out + work * dead.
    dead = ~alive
    if alpha.device.type == "cpu" and not _is_compiling() and not bool(dead.any()):  # skip a no-op (no sync on GPU)
        return out.to(alpha.dtype)
    return (out + work * dead.to(work.dtype).index_select(0, dst)).to(alpha.dtype)


def _rescale_dense(attn: Tensor, dropped: Tensor, p: float, rescale: str) -> Tensor:
    work = _work(attn)
    kept = work.masked_fill(dropped, 0.0)
    if rescale == "normalized":
        total = kept.sum(dim=-1, keepdim=True)
        alive = total > 0
        out = torch.where(alive, kept / torch.where(alive, total, torch.ones_like(total)), work)
    else:
        alive = (~dropped).expand_as(kept).any(dim=-1, keepdim=True)
        out = torch.where(alive, kept * (1.0 / (1.0 - p)), work)
    return out.to(attn.dtype)


# ----------------------------------------------------------------------------------------------------------------
# Sparse (edge-softmax weights)
# ----------------------------------------------------------------------------------------------------------------
def _element_order(src: Tensor, dst: Tensor, num_src: int, num_dst: int) -> Tuple[Tensor, Tensor]:
    """``(perm, rank)``: the (destination, source)-sorted order of the edges and each sorted edge's position
    among its destination's incoming edges. Each destination's incoming edges ordered by source id then form one
    consecutive segment, along which element-mode windows run."""
    key, perm = index_sort(dst * num_src + src, max_value=num_dst * num_src, stable=True)
    ptr = cumsum(degree(dst, num_dst, dtype=torch.long))
    rank = torch.arange(src.numel(), device=src.device) - ptr.index_select(
        0, torch.div(key, num_src, rounding_mode="floor")
    )
    return perm, rank


def _sparse_mask(
    src: Tensor,
    dst: Tensor,
    num_heads: int,
    num_src: int,
    num_dst: int,
    p: float,
    window: int,
    mode: str,
    generator: Optional[torch.Generator],
    order: Optional[Tuple[Tensor, Tensor]] = None,
) -> Tensor:
    """Dropped mask ``[E, H]`` for edges ``src -> dst`` (``order``: a precomputed :func:`_element_order`)."""
    E, device = src.numel(), src.device
    if mode == "column":
        dropped_nodes = draw_window_mask((num_heads, num_src), p, window, device, generator)  # [H, N_src]
        return _gather_rows(dropped_nodes.t().contiguous(), src)
    if window == 1:
        return draw_window_mask((num_heads, E), p, 1, device, generator).t().contiguous()
    perm, rank = order if order is not None else _element_order(src, dst, num_src, num_dst)
    dropped = draw_window_mask((num_heads, E), p, window, device, generator, rank)  # [H, E], sorted order
    return _scatter_rows(dropped.t().contiguous(), perm)


def _drop_sparse(
    alpha: Tensor,
    src: Tensor,
    dst: Tensor,
    num_src: int,
    num_dst: int,
    p: float,
    window: int,
    mode: str,
    rescale: str,
    generator: Optional[torch.Generator],
) -> Tensor:
    """DropAttention on ``alpha`` ``[E, H]`` over edges ``src -> dst`` (training mode, ``p > 0``, checked args)."""
    if alpha.numel() == 0:
        return alpha
    dropped = _sparse_mask(src, dst, alpha.size(1), num_src, num_dst, p, window, mode, generator)
    return _rescale_sparse(alpha, dropped, dst, num_dst, p, rescale)


def _resolve_num_nodes(num_nodes: NumNodes, src: Tensor, dst: Tensor) -> Tuple[int, int]:
    if num_nodes is None:
        num_src = int(src.max()) + 1 if src.numel() > 0 else 0
        num_dst = int(dst.max()) + 1 if dst.numel() > 0 else 0
        n = max(num_src, num_dst)
        return n, n
    if isinstance(num_nodes, int) and not isinstance(num_nodes, bool):
        if num_nodes < 0:
            raise ValueError(f"num_nodes: expected a non-negative integer, got {num_nodes}")
        return num_nodes, num_nodes
    if (
        isinstance(num_nodes, (tuple, list))
        and len(num_nodes) == 2
        and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in num_nodes)
    ):
        return int(num_nodes[0]), int(num_nodes[1])
    raise ValueError(f"num_nodes: expected None, an int or a pair (num_src, num_dst), got {num_nodes!r}")


def drop_attention(
    alpha: Tensor,
    edge_index: Tensor,
    p: float,
    window: int = 1,
    mode: str = "element",
    rescale: str = "normalized",
    training: bool = True,
    num_nodes: NumNodes = None,
    generator: Optional[torch.Generator] = None,
) -> Tensor:
    r"""DropAttention on sparse attention weights (an edge softmax) of shape ``[E, H]`` (or ``[E]``).

    Args:
        alpha: attention weights, one row per edge, one column per head; rows of the attention matrix are the
            destinations (``edge_index[1]``).
        edge_index: ``[2, E]`` edges, row 0 source (key), row 1 destination (query): PyG's ``source_to_target``.
        p: drop probability in ``[0, 1)``; window starts are drawn with probability ``p / window``.
        window: number of consecutive positions each window start drops (element mode: incoming edges of a
            destination ordered by source id; column mode: consecutive source node ids).
        mode: ``"element"`` (drop single weights) or ``"column"`` (drop every edge leaving a source, per head).
        rescale: ``"normalized"`` (each destination's surviving weights are divided by their sum) or
            ``"inverse"`` (surviving weights scaled by ``1 / (1 - p)``).
        training: ``False`` returns ``alpha`` unchanged.
        num_nodes: number of nodes, or ``(num_src, num_dst)`` for a bipartite graph (default: ``max index + 1``).
        generator: random source for the mask.

    Returns:
        A tensor of the shape and dtype of ``alpha``. Destinations with no surviving weight keep their weights.
    """
    _check_options(p, window, mode, rescale)
    if not isinstance(alpha, Tensor) or not alpha.is_floating_point() or alpha.dim() not in (1, 2):
        desc = (
            f"{alpha.dtype} tensor of shape {list(alpha.shape)}" if isinstance(alpha, Tensor) else type(alpha).__name__
        )
        raise ValueError(f"alpha: expected a floating-point tensor of shape [E, H] or [E], got {desc}")
    if (
        not isinstance(edge_index, Tensor)
        or edge_index.dim() != 2
        or edge_index.size(0) != 2
        or edge_index.is_floating_point()
        or edge_index.dtype == torch.bool
    ):
        desc = (
            f"{edge_index.dtype} tensor of shape {list(edge_index.shape)}"
            if isinstance(edge_index, Tensor)
            else type(edge_index).__name__
        )
        raise ValueError(f"edge_index: expected an integer tensor of shape [2, E], got {desc}")
    if edge_index.size(1) != alpha.size(0):
        raise ValueError(f"alpha: expected {edge_index.size(1)} rows (one per edge of edge_index), got {alpha.size(0)}")
    edge_index = edge_index.long()
    src, dst = edge_index[0], edge_index[1]
    num_src, num_dst = _resolve_num_nodes(num_nodes, src, dst)
    if not _is_compiling() and src.numel() > 0:
        if int(edge_index.min()) < 0 or int(src.max()) >= num_src or int(dst.max()) >= num_dst:
            raise ValueError(
                f"edge_index: expected sources in [0, {num_src}) and destinations in [0, {num_dst}), got sources in "
                f"[{int(src.min())}, {int(src.max())}] and destinations in [{int(dst.min())}, {int(dst.max())}]"
            )
    if not training or p == 0.0:
        return alpha
    flat = alpha.dim() == 1
    out = _drop_sparse(
        alpha.unsqueeze(-1) if flat else alpha, src, dst, num_src, num_dst, float(p), window, mode, rescale, generator
    )
    return out.squeeze(-1) if flat else out


# ----------------------------------------------------------------------------------------------------------------
# Dense ([..., L, S] matrices)
# ----------------------------------------------------------------------------------------------------------------
def drop_attention_dense(
    attn: Tensor,
    p: float,
    window: int = 1,
    mode: str = "element",
    rescale: str = "normalized",
    training: bool = True,
    generator: Optional[torch.Generator] = None,
) -> Tensor:
    r"""DropAttention on dense attention matrices ``[..., L, S]`` (rows = queries, columns = keys).

    Every leading index (batch, head) gets its own mask. ``mode="element"`` drops windows of consecutive keys
    within each row; ``mode="column"`` drops windows of consecutive key columns for all ``L`` queries at once.
    Arguments as in :func:`drop_attention`.
    """
    _check_options(p, window, mode, rescale)
    if not isinstance(attn, Tensor) or not attn.is_floating_point() or attn.dim() < 2:
        desc = f"{attn.dtype} tensor of shape {list(attn.shape)}" if isinstance(attn, Tensor) else type(attn).__name__
        raise ValueError(f"attn: expected a floating-point tensor of shape [..., L, S], got {desc}")
    if not training or p == 0.0 or attn.numel() == 0:
        return attn
    shape = tuple(attn.shape)
    if mode == "column":
        shape = shape[:-2] + (1, shape[-1])
    dropped = draw_window_mask(shape, float(p), window, attn.device, generator)
    return _rescale_dense(attn, dropped, float(p), rescale)


# ----------------------------------------------------------------------------------------------------------------
# Module
# ----------------------------------------------------------------------------------------------------------------
class DropAttention(nn.Module):
    r"""DropAttention as a module: dense ``[..., L, S]`` attention, or sparse ``[E, H]`` edge weights.

    Pass it to a layer as ``drop_attention=DropAttention(p)`` (e.g. :class:`~graph_rma.nn.RepulsiveGATConv`,
    where it replaces the plain attention dropout), or call it directly. Active in ``train()`` mode only.

    ``DropAttention()`` without ``p`` takes the rate of the layer it is installed in: the layer's own attention
    ``dropout`` (e.g. GAT's 0.6), so that switching to DropAttention changes *how* attention is dropped, not how
    much. The layer reports the rate in effect (``RepulsiveGATConv.attention_dropout_rate``). Called directly, a
    ``DropAttention()`` without ``p`` raises a ``ValueError``.

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
            raise ValueError(
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
        softmax, e.g. :func:`graph_rma.nn.edge_attention.edge_softmax`.
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
