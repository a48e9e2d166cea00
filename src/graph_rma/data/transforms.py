r"""What a node-classification protocol does to a graph before training: feature normalisation and edge direction.

PyG's attention layers (``GATConv``, ``GATv2Conv``) take a softmax over each *target* node's incoming edges: node
:math:`i` attends over :math:`\{j : (j, i) \in \texttt{edge\_index}\}`. The edge options say which neighbours that is:

* ``"as-stored"``: the file's edges as the loader returns them (``edge_index[0]`` source, ``edge_index[1]`` target),
  unchanged, order and duplicates included (the order decides which edge each random attention-dropout draw hits,
  so a stored order is kept to keep results reproducible across versions);
* ``"reversed"``: every edge flipped, so node :math:`i` attends over the nodes it links **to** (the dense GAT of the
  GGCN and Geom-GCN code, whose adjacency row :math:`i` holds :math:`i`'s out-links);
* ``"undirected"``: both directions, duplicates removed (Platonov et al.'s protocol, PyG's ``to_undirected``).

Self-loops are the layers' business (``add_self_loops``), not the graph's.

Features: ``"none"`` keeps them as stored; ``"row"`` divides each row by its sum,
:math:`x_i \leftarrow x_i / \sum_j x_{ij}`, with GGCN's rule for a row whose sum has no finite reciprocal
(``r_inv = rowsum ** -1; r_inv[isinf(r_inv)] = 0``): a row summing to 0 (all zeros, or e.g. ``[1, -1]``) becomes
all zeros. A row with a negative sum is divided by it, as in GGCN's code: its signs flip and it sums to 1, like every
row with a non-zero sum. The result is stored as a sparse COO tensor when at most a quarter of the entries are
non-zero (bag-of-words features; the GAT model drops out stored entries only).
"""

from __future__ import annotations

import numbers
from typing import Tuple

import torch
from torch import Tensor
from torch_geometric.utils import coalesce, to_undirected

from .._errors import GraphRMAError

__all__ = ["FEATURE_OPTIONS", "EDGE_OPTIONS", "normalize_features", "direct_edges"]

FEATURE_OPTIONS: Tuple[str, ...] = ("none", "row")
EDGE_OPTIONS: Tuple[str, ...] = ("as-stored", "reversed", "undirected")


def normalize_features(x: Tensor, how: str) -> Tensor:
    """``x`` (``[N, F]``: dense, sparse COO or sparse CSR) as the protocol's ``features`` option says (see the
    module); anything but a 2-D tensor raises a one-line :class:`~graph_rma.GraphRMAError`."""
    if how not in FEATURE_OPTIONS:
        raise GraphRMAError(f"features: expected one of {FEATURE_OPTIONS}, got {how!r}")
    if not isinstance(x, Tensor) or x.dim() != 2:
        got = f"shape {list(x.shape)}" if isinstance(x, Tensor) else type(x).__name__
        raise GraphRMAError(f"x: expected node features of shape [num_nodes, num_features], got {got}")
    if how == "none":
        return x
    dense = x.to_dense() if x.layout != torch.strided else x
    rowsum = dense.sum(dim=1, keepdim=True)
    zero = torch.isinf(rowsum.reciprocal())  # GGCN's rule (r_inv[isinf(r_inv)] = 0): such a row becomes zeros
    dense = torch.where(zero, torch.zeros((), dtype=rowsum.dtype), dense / rowsum)
    if dense.numel() and (dense != 0).sum() <= dense.numel() // 4:
        return dense.to_sparse().coalesce()
    return dense


def direct_edges(edge_index: Tensor, how: str, num_nodes: int) -> Tensor:
    """``edge_index`` as the protocol's ``edges`` option says (see the module): ``"as-stored"`` returns it
    unchanged; ``"reversed"`` and ``"undirected"`` are coalesced (sorted, no duplicate edges). ``num_nodes`` must
    exceed every node id of ``edge_index`` (else a one-line :class:`~graph_rma.GraphRMAError`: PyG's ``coalesce``
    would drop the edges of the nodes beyond it)."""
    if how not in EDGE_OPTIONS:
        raise GraphRMAError(f"edges: expected one of {EDGE_OPTIONS}, got {how!r}")
    if isinstance(num_nodes, bool) or not isinstance(num_nodes, numbers.Integral) or num_nodes < 0:
        raise GraphRMAError(f"num_nodes: expected an integer >= 0, got {num_nodes!r}")
    num_nodes = int(num_nodes)
    if not isinstance(edge_index, Tensor) or edge_index.dim() != 2 or edge_index.size(0) != 2:
        got = f"shape {list(edge_index.shape)}" if isinstance(edge_index, Tensor) else type(edge_index).__name__
        raise GraphRMAError(f"edge_index: expected a tensor of shape [2, num_edges], got {got}")
    if edge_index.numel():
        low, high = int(edge_index.min()), int(edge_index.max())
        if low < 0 or high >= num_nodes:
            raise GraphRMAError(
                f"num_nodes: expected more than every node id of edge_index (ids from {low} to {high}), got "
                f"{num_nodes}: the edges of the nodes outside [0, {num_nodes}) would be dropped"
            )
    if how == "as-stored":
        return edge_index
    if how == "reversed":
        return coalesce(edge_index.flip(0), num_nodes=num_nodes)
    return to_undirected(edge_index, num_nodes=num_nodes)
