r"""How different are the heads? Four measures, for sparse graph attention and dense attention alike.

Attention comes in two layouts:

* sparse: ``alpha`` ``[E, H]`` with ``index`` ``[E]`` (each edge's destination, ``edge_index[1]``); for every
  node :math:`i`, :math:`A_i \in \mathbb{R}^{H \times d_i}` holds the heads' softmax over :math:`i`'s incoming
  edges. Per-node values are averaged over the nodes that have incoming edges.
* dense: ``attn`` ``[..., H, S]``; each ``[H, S]`` slice is one :math:`A` (rows are distributions over ``S``
  keys). Values are averaged over the leading dimensions.

On a complete graph (every node attends to every node) both layouts give the same numbers.

Measures:

* **Dist** (the repulsive-attention paper): mean pairwise Euclidean distance between heads' outputs
  ``[..., H, C]``, :math:`\frac{2}{H(H-1)}\sum_{h<k}\|o_h - o_k\|_2`, averaged over the leading dimensions
  (nodes / tokens). Larger means more diverse.
* **Div** (Lin et al., 2017): :math:`\|A A^\top - I\|_F^2` (computed by
  :func:`graph_rma.regularizers.frobenius_penalty` / :func:`~graph_rma.regularizers.frobenius_penalty_sparse`).
  Smaller means heads attend to different, peaked positions.
* **Disagreement** (Li et al., 2018): mean pairwise cosine similarity between heads' attention distributions,
  :math:`\frac{2}{H(H-1)}\sum_{h<k}\frac{\langle a_h, a_k\rangle}{\|a_h\|\|a_k\|}`. Smaller means more diverse.
* **Entropy** per head: :math:`-\sum_j a_{hj}\log a_{hj}` (nats), averaged per head; low entropy means peaked
  attention, :math:`\log d_i` is uniform attention.
"""

from __future__ import annotations

from typing import Dict, Optional

import torch
from torch import Tensor
from torch_geometric.utils import scatter

from .._errors import GraphRMAError
from ..regularizers import disagreement, frobenius_penalty, frobenius_penalty_sparse

__all__ = [
    "head_distance",
    "attention_div",
    "attention_disagreement",
    "attention_entropy",
    "head_diversity",
]


def _check_sparse(alpha: Tensor, index: Tensor, num_nodes: Optional[int]) -> int:
    if not isinstance(alpha, Tensor) or alpha.dim() != 2:
        raise GraphRMAError(f"alpha: expected sparse attention of shape [E, H], got {getattr(alpha, 'shape', alpha)}")
    if not isinstance(index, Tensor) or index.dim() != 1 or index.numel() != alpha.size(0):
        raise GraphRMAError(
            f"index: expected one destination node per edge, shape [{alpha.size(0)}], "
            f"got {getattr(index, 'shape', index)}"
        )
    if index.numel() == 0:
        raise GraphRMAError("index: no edges")
    return int(index.max()) + 1 if num_nodes is None else int(num_nodes)


def _check_dense(attn: Tensor) -> None:
    if not isinstance(attn, Tensor) or attn.dim() < 2:
        raise GraphRMAError(f"attn: expected dense attention of shape [..., H, S], got {getattr(attn, 'shape', attn)}")


def _has_edges(index: Tensor, N: int) -> Tensor:
    return torch.bincount(index, minlength=N) > 0


def head_distance(outputs: Tensor) -> float:
    """The paper's Dist: mean pairwise L2 distance between heads' outputs ``[..., H, C]`` (see module doc)."""
    if not isinstance(outputs, Tensor) or outputs.dim() < 2:
        raise GraphRMAError(f"outputs: expected per-head outputs [..., H, C], got {getattr(outputs, 'shape', outputs)}")
    H = outputs.size(-2)
    if H < 2:
        raise GraphRMAError(f"outputs: need at least 2 heads along dimension -2, got {H}")
    x = outputs.detach().double().reshape(-1, H, outputs.size(-1))
    d = torch.cdist(x, x, compute_mode="donot_use_mm_for_euclid_dist")  # [B, H, H]
    iu = torch.triu_indices(H, H, offset=1)
    return float(d[:, iu[0], iu[1]].mean())


def attention_div(attn: Tensor, index: Optional[Tensor] = None, num_nodes: Optional[int] = None) -> float:
    r"""Lin et al.'s :math:`\|AA^\top - I\|_F^2`: dense ``attn`` ``[..., H, S]``, or sparse ``attn`` ``[E, H]`` with
    ``index`` ``[E]``."""
    if index is None:
        _check_dense(attn)
        return float(frobenius_penalty(attn.detach().double()))
    N = _check_sparse(attn, index, num_nodes)
    return float(frobenius_penalty_sparse(attn.detach().double(), index, N))


def attention_disagreement(attn: Tensor, index: Optional[Tensor] = None, num_nodes: Optional[int] = None) -> float:
    """Li et al.'s disagreement of the attention distributions (mean pairwise cosine similarity of heads):
    dense ``attn`` ``[..., H, S]``, or sparse ``attn`` ``[E, H]`` grouped per destination by ``index``."""
    if index is None:
        _check_dense(attn)
        return float(disagreement(attn.detach().double(), head_dim=-2))
    N = _check_sparse(attn, index, num_nodes)
    a = attn.detach().double()
    H = a.size(1)
    if H < 2:
        raise GraphRMAError(f"attn: need at least 2 heads, got {H}")
    outer = (a.unsqueeze(2) * a.unsqueeze(1)).reshape(-1, H * H)
    gram = scatter(outer, index, dim=0, dim_size=N, reduce="sum").view(N, H, H)
    norm = gram.diagonal(dim1=-2, dim2=-1).clamp(min=0).sqrt()  # [N, H]
    cos = gram / (norm.unsqueeze(2) * norm.unsqueeze(1)).clamp(min=1e-12)
    iu = torch.triu_indices(H, H, offset=1)
    per_node = cos[:, iu[0], iu[1]].mean(dim=1)
    return float(per_node[_has_edges(index, N)].mean())


def attention_entropy(attn: Tensor, index: Optional[Tensor] = None, num_nodes: Optional[int] = None) -> Tensor:
    r"""Mean attention entropy of each head, shape ``[H]`` (nats, :math:`0\log 0 = 0`): dense ``attn``
    ``[..., H, S]`` (averaged over the leading dimensions), or sparse ``attn`` ``[E, H]`` (entropy of each node's
    incoming distribution, averaged over nodes with incoming edges)."""
    if index is None:
        _check_dense(attn)
        a = attn.detach().double()
        ent = -torch.special.xlogy(a, a).sum(dim=-1)  # [..., H]
        return ent.reshape(-1, a.size(-2)).mean(dim=0)
    N = _check_sparse(attn, index, num_nodes)
    a = attn.detach().double()
    per_node = scatter(-torch.special.xlogy(a, a), index, dim=0, dim_size=N, reduce="sum")  # [N, H]
    return per_node[_has_edges(index, N)].mean(dim=0)


def head_diversity(
    outputs: Optional[Tensor] = None,
    attn: Optional[Tensor] = None,
    index: Optional[Tensor] = None,
    num_nodes: Optional[int] = None,
) -> Dict[str, object]:
    """All measures that the given tensors allow, as a JSON-ready dict: ``dist`` and ``output_disagreement``
    (from ``outputs`` ``[..., H, C]``), ``div``, ``disagreement``, ``entropy`` (list per head) and
    ``entropy_mean`` (from ``attn``, dense or sparse with ``index``)."""
    if outputs is None and attn is None:
        raise GraphRMAError("outputs, attn: give per-head outputs, attention, or both")
    res: Dict[str, object] = {}
    if outputs is not None:
        res["dist"] = head_distance(outputs)
        res["output_disagreement"] = float(disagreement(outputs.detach().double(), head_dim=-2))
    if attn is not None:
        res["div"] = attention_div(attn, index, num_nodes)
        res["disagreement"] = attention_disagreement(attn, index, num_nodes)
        ent = attention_entropy(attn, index, num_nodes)
        res["entropy"] = ent.tolist()
        res["entropy_mean"] = float(ent.mean())
    return res
