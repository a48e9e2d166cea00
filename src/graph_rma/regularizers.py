r"""The diversity regularisers the repulsive-attention paper compares against, as loss terms.

* Lin et al. (2017), structured self-attentive sentence embedding: the Frobenius penalty

  .. math:: P = \| A A^\top - I \|_F^2,

  where the rows of :math:`A \in \mathbb{R}^{H \times S}` are the :math:`H` heads' attention distributions
  over the same :math:`S` keys. For sparse graph attention, :math:`A` is taken per destination node over its
  incoming edges: :math:`(A A^\top)_{hk} = \sum_{e \to i} \alpha_{e h} \alpha_{e k}`.
* Li et al. (2018), multi-head attention with disagreement regularisation: the mean pairwise cosine similarity
  between heads (of their parameters, outputs or attention weights); adding it to the loss pushes heads apart.

Both return a scalar averaged over the leading (batch / node) dimensions, to be added to the loss with a weight.
"""

from __future__ import annotations

from typing import Iterable, Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch_geometric.utils import scatter

from ._errors import GraphRMAError

__all__ = ["frobenius_penalty", "frobenius_penalty_sparse", "disagreement", "parameter_disagreement"]


def frobenius_penalty(attn: Tensor) -> Tensor:
    r"""Lin et al.'s :math:`\|A A^\top - I\|_F^2` for dense attention ``attn`` of shape ``[..., H, S]``.

    Rows are heads (each a distribution over ``S`` keys). Returns the mean over the leading dimensions.
    """
    if not isinstance(attn, Tensor) or attn.dim() < 2:
        raise GraphRMAError(f"attn: expected a tensor of shape [..., H, S], got {getattr(attn, 'shape', type(attn))}")
    H = attn.size(-2)
    gram = attn @ attn.transpose(-1, -2)
    eye = torch.eye(H, dtype=attn.dtype, device=attn.device)
    return ((gram - eye) ** 2).sum(dim=(-1, -2)).mean()


def frobenius_penalty_sparse(alpha: Tensor, index: Tensor, num_nodes: Optional[int] = None) -> Tensor:
    r"""Lin et al.'s penalty for sparse edge attention ``alpha`` ``[E, H]`` grouped by ``index`` ``[E]``.

    ``index`` is each edge's destination (``edge_index[1]`` in PyG's flow), so that row ``h`` of :math:`A_i` is
    head ``h``'s softmax over node ``i``'s incoming edges. Averaged over the nodes that have incoming edges.
    """
    if alpha.dim() != 2:
        raise GraphRMAError(f"alpha: expected shape [E, H], got {list(alpha.shape)}")
    if index.dim() != 1 or index.numel() != alpha.size(0):
        raise GraphRMAError(
            f"index: expected shape [{alpha.size(0)}] (one destination per edge), got {list(index.shape)}"
        )
    H = alpha.size(1)
    N = int(index.max()) + 1 if num_nodes is None and index.numel() else (num_nodes or 0)
    outer = (alpha.unsqueeze(2) * alpha.unsqueeze(1)).reshape(-1, H * H)  # [E, H*H]
    gram = scatter(outer, index, dim=0, dim_size=N, reduce="sum").view(N, H, H)
    eye = torch.eye(H, dtype=alpha.dtype, device=alpha.device)
    per_node = ((gram - eye) ** 2).sum(dim=(-1, -2))
    has_edges = torch.bincount(index, minlength=N) > 0
    return per_node[has_edges].mean()


def disagreement(x: Tensor, head_dim: int = -2) -> Tensor:
    r"""Li et al.'s disagreement term: the mean cosine similarity over the :math:`H(H-1)/2` pairs of heads.

    Args:
        x: per-head vectors with heads along ``head_dim`` and features along the last dimension, e.g. head
            outputs ``[N, H, C]``, attention ``[E, H]`` (use ``x.t()`` so heads lead: ``[H, E]`` with
            ``head_dim=0``), or head parameters ``[H, D]``. All other dimensions are averaged over.

    Returns:
        A scalar in ``[-1, 1]``; minimising it makes heads disagree.
    """
    if x.dim() < 2:
        raise GraphRMAError(f"x: expected at least 2 dimensions (heads and features), got {list(x.shape)}")
    x = x.movedim(head_dim, -2)
    H = x.size(-2)
    if H < 2:
        raise GraphRMAError(f"x: need at least 2 heads along head_dim={head_dim}, got {H}")
    u = F.normalize(x, dim=-1)
    cos = u @ u.transpose(-1, -2)  # [..., H, H]
    iu = torch.triu_indices(H, H, offset=1, device=x.device)
    return cos[..., iu[0], iu[1]].mean()


def parameter_disagreement(model: nn.Module, layers=None, roles: Optional[Iterable[str]] = None) -> Tensor:
    """Li et al.'s parameter disagreement: :func:`disagreement` of each attention layer's head parameters
    (the particles of :func:`graph_rma.find_particle_groups`), averaged over layers. Differentiable."""
    from .particles import find_particle_groups

    groups = find_particle_groups(model, layers=layers, roles=roles)
    if not groups:
        raise GraphRMAError("model: no multi-head attention layer found for the parameter disagreement")
    terms = [disagreement(torch.cat([p.heads(p.param) for p in g.params], dim=1), head_dim=0) for g in groups]
    return torch.stack(terms).mean()
