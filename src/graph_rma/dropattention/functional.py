"""DropAttention as functions: :func:`drop_attention` on sparse ``[E, H]`` edge-softmax weights and
:func:`drop_attention_dense` on dense ``[..., L, S]`` matrices, with the option checks and the rescaling of the
survivors (``"normalized"`` or ``"inverse"``) that :class:`~graph_rma.dropattention.DropAttention` shares.
"""

from __future__ import annotations

import math
from typing import Optional, Tuple, Union

import torch
from torch import Tensor
from torch_geometric.utils import scatter

from .._errors import GraphRMAError
from .masks import _sparse_mask, draw_window_mask

MODES = ("element", "column")
RESCALES = ("normalized", "inverse")
NumNodes = Union[None, int, Tuple[int, int]]


def _is_compiling() -> bool:
    return torch.compiler.is_compiling()


def _check_options(p: Optional[float], window: int, mode: str, rescale: str, allow_none: bool = False) -> None:
    if p is None and allow_none:
        pass
    elif isinstance(p, bool) or not isinstance(p, (int, float)) or not math.isfinite(p) or not 0.0 <= p < 1.0:
        raise GraphRMAError(f"p: expected a drop probability in [0, 1), got {p!r}")
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise GraphRMAError(f"window: expected an integer >= 1, got {window!r}")
    if mode not in MODES:
        raise GraphRMAError(f"mode: expected one of {MODES}, got {mode!r}")
    if rescale not in RESCALES:
        raise GraphRMAError(f"rescale: expected one of {RESCALES}, got {rescale!r}")


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
            raise GraphRMAError(f"num_nodes: expected a non-negative integer, got {num_nodes}")
        return num_nodes, num_nodes
    if (
        isinstance(num_nodes, (tuple, list))
        and len(num_nodes) == 2
        and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in num_nodes)
    ):
        return int(num_nodes[0]), int(num_nodes[1])
    raise GraphRMAError(f"num_nodes: expected None, an int or a pair (num_src, num_dst), got {num_nodes!r}")


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
        raise GraphRMAError(f"alpha: expected a floating-point tensor of shape [E, H] or [E], got {desc}")
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
        raise GraphRMAError(f"edge_index: expected an integer tensor of shape [2, E], got {desc}")
    if edge_index.size(1) != alpha.size(0):
        raise GraphRMAError(
            f"alpha: expected {edge_index.size(1)} rows (one per edge of edge_index), got {alpha.size(0)}"
        )
    edge_index = edge_index.long()
    src, dst = edge_index[0], edge_index[1]
    num_src, num_dst = _resolve_num_nodes(num_nodes, src, dst)
    if not _is_compiling() and src.numel() > 0:
        if int(edge_index.min()) < 0 or int(src.max()) >= num_src or int(dst.max()) >= num_dst:
            raise GraphRMAError(
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
        raise GraphRMAError(f"attn: expected a floating-point tensor of shape [..., L, S], got {desc}")
    if not training or p == 0.0 or attn.numel() == 0:
        return attn
    shape = tuple(attn.shape)
    if mode == "column":
        shape = shape[:-2] + (1, shape[-1])
    dropped = draw_window_mask(shape, float(p), window, attn.device, generator)
    return _rescale_dense(attn, dropped, float(p), rescale)
