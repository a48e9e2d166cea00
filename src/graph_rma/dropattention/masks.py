r"""The one mask-drawing routine of DropAttention, shared by the sparse and the dense version
(:func:`draw_window_mask`: window starts with probability :math:`p / w`, each dropping :math:`w` consecutive
positions), and the sparse masks built on it: per edge and head, along each destination's incoming edges ordered by
source id (element mode) or per source node (column mode).
"""

from __future__ import annotations

from typing import Optional, Tuple

import torch
from torch import Tensor
from torch_geometric.utils import cumsum, degree, index_sort


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
