"""The input checks of :class:`~graph_rma.nn.gat_conv.RepulsiveGATConv` and
:class:`~graph_rma.nn.gat_conv.RepulsiveGATv2Conv`: node features, ``edge_index`` (shape, dtype, node range) and
``edge_attr``, each a one-line ``GraphRMAError`` naming the argument, and the constructor's ``heads``, ``out_channels``
and ``drop_attention``. Cheap; the data-dependent range check runs eagerly only (under ``torch.compile`` an assert
op checks it, so a compiled layer has no graph break), with one host read per new or changed ``edge_index`` tensor
and none for a tensor already checked, so that a training step reads from the device no more often than stock
PyG's layer.
"""

from __future__ import annotations

from typing import Any, Optional, Tuple, Union

import torch
from torch import Tensor
from torch.utils.weak import WeakIdKeyDictionary
from torch_geometric.nn.conv import GATConv, GATv2Conv
from torch_geometric.typing import Size, SparseTensor
from torch_geometric.utils import is_torch_sparse_tensor

from .._errors import GraphRMAError
from ..dropattention import DropAttention


def _channels(lin: Optional[torch.nn.Module]) -> int:
    return int(getattr(lin, "in_channels", -1)) if lin is not None else -1


def _check_features(name: str, x: Tensor, expected: int) -> None:
    if not isinstance(x, Tensor) or x.dim() != 2:
        desc = f"shape {list(x.shape)}" if isinstance(x, Tensor) else type(x).__name__
        raise GraphRMAError(
            f"{name}: expected node features of shape [num_nodes, {expected if expected > 0 else 'F'}], got {desc}"
        )
    if expected > 0 and x.size(1) != expected:
        raise GraphRMAError(f"{name}: expected {expected} features per node (in_channels), got {x.size(1)}")


def _check_dtype(name: str, x: Tensor, lin: Optional[torch.nn.Module]) -> None:
    """Features of another floating dtype than the layer's weights (outside autocast): one line naming ``x``."""
    weight = getattr(lin, "weight", None)
    if (
        isinstance(weight, Tensor)
        and not isinstance(weight, torch.nn.parameter.UninitializedParameter)
        and x.is_floating_point()
        and x.dtype != weight.dtype
        and not torch.is_autocast_enabled(x.device.type)
    ):
        raise GraphRMAError(
            f"{name}: expected dtype {weight.dtype} (the layer's parameters), got {x.dtype}; convert the "
            f"input or the layer (.to(dtype))"
        )


def _check_inputs(
    module: Union[GATConv, GATv2Conv],
    x: Any,
    edge_index: Any,
    edge_attr: Optional[Tensor],
    size: Size,
    lin_src: Optional[torch.nn.Module],
    lin_dst: Optional[torch.nn.Module],
) -> None:
    num_src, num_dst = _node_counts(module, x, edge_index, size, lin_src, lin_dst)
    num_edges = _check_adjacency(module, edge_index, num_src, num_dst)
    if edge_attr is not None and module.lin_edge is not None:
        _check_edge_attr(module, edge_attr, num_edges)


def _node_counts(module, x: Any, edge_index: Any, size: Size, lin_src, lin_dst) -> Tuple[Optional[int], Optional[int]]:
    """The node features checked (sizes, dtypes); ``(num_src, num_dst)`` as the layer counts them (``size`` first,
    then the features; ``None`` when only a sparse adjacency can say)."""
    if isinstance(x, Tensor):
        _check_features("x", x, _channels(lin_src))
        _check_features("x", x, _channels(lin_dst))
        _check_dtype("x", x, lin_src)
        num_src = num_dst = x.size(0)
    elif isinstance(x, (tuple, list)) and len(x) == 2:
        _check_features("x[0]", x[0], _channels(lin_src))
        _check_dtype("x[0]", x[0], lin_src)
        num_src = x[0].size(0)
        num_dst = None  # (x_src, None): as in the stock layer, the destinations' count comes from size / adjacency
        if x[1] is not None:
            _check_features("x[1]", x[1], _channels(lin_dst))
            _check_dtype("x[1]", x[1], lin_dst)
            num_dst = x[1].size(0)
    else:
        raise GraphRMAError(
            f"x: expected a tensor [num_nodes, in_channels] or a pair (x_src, x_dst), got {type(x).__name__}"
        )
    if size is not None:
        num_src, num_dst = size[0] if size[0] is not None else num_src, size[1] if size[1] is not None else num_dst
    sparse = isinstance(edge_index, SparseTensor) or (
        isinstance(edge_index, Tensor) and is_torch_sparse_tensor(edge_index)
    )
    if num_dst is None and not sparse:  # as MessagePassing: an unknown destination count is the source count
        num_dst = num_src
    if module.flow == "target_to_source":
        num_src, num_dst = num_dst, num_src
    return num_src, num_dst


def _check_adjacency(module, edge_index: Any, num_src: Optional[int], num_dst: Optional[int]) -> Optional[int]:
    """``edge_index`` checked (shape, dtype, node range); its number of edges (``None`` for a sparse adjacency)."""
    if isinstance(edge_index, SparseTensor):
        return None
    if isinstance(edge_index, Tensor) and is_torch_sparse_tensor(edge_index):
        # [num_dst, num_src] (destinations x sources); an unknown count is read from the adjacency.
        expected = (
            edge_index.size(0) if num_dst is None else num_dst,
            edge_index.size(1) if num_src is None or edge_index.dim() != 2 else num_src,
        )
        if edge_index.dim() != 2 or tuple(edge_index.shape) != expected:
            raise GraphRMAError(
                f"edge_index: expected a sparse adjacency of shape [{expected[0]}, {expected[1]}] "
                f"(destinations x sources), got {list(edge_index.shape)}"
            )
        return None
    if not isinstance(edge_index, Tensor):
        raise GraphRMAError(
            f"edge_index: expected a [2, num_edges] tensor, a torch sparse tensor or a SparseTensor, got "
            f"{type(edge_index).__name__}"
        )
    if (
        edge_index.dim() != 2
        or edge_index.size(0) != 2
        or edge_index.is_floating_point()
        or edge_index.dtype == torch.bool
    ):
        raise GraphRMAError(
            f"edge_index: expected an integer tensor of shape [2, num_edges], got "
            f"{edge_index.dtype} tensor of shape {list(edge_index.shape)}"
        )
    num_edges = edge_index.size(1)
    if torch.compiler.is_compiling() and num_edges > 0:
        # inside a compiled graph a Python check would break it: an assert op checks the range instead (its
        # message, one line, is raised as a RuntimeError before any out-of-range gather runs)
        i, j = (1, 0) if module.flow == "source_to_target" else (0, 1)
        ok = edge_index.min() >= 0
        if num_src is not None:
            ok = ok & (edge_index[j].max() < num_src)
        if num_dst is not None:
            ok = ok & (edge_index[i].max() < num_dst)
        torch._assert_async(
            ok, "edge_index: node ids out of range: expected sources and destinations in [0, the node counts of x)"
        )
    elif num_edges > 0:
        _check_range(edge_index, module.flow, num_src, num_dst)
    return num_edges


def _check_edge_attr(module, edge_attr: Any, num_edges: Optional[int]) -> None:
    """``edge_attr`` of a layer with edge features: one row per edge, ``edge_dim`` features."""
    if not isinstance(edge_attr, Tensor) or edge_attr.dim() not in (1, 2):
        raise GraphRMAError(f"edge_attr: expected a tensor of shape [num_edges, {module.edge_dim}]")
    dim = 1 if edge_attr.dim() == 1 else edge_attr.size(1)
    if module.edge_dim is not None and dim != module.edge_dim:
        raise GraphRMAError(f"edge_attr: expected {module.edge_dim} features per edge (edge_dim), got {dim}")
    if num_edges is not None and edge_attr.size(0) != num_edges:
        raise GraphRMAError(
            f"edge_attr: expected {num_edges} rows (one per edge of edge_index), got {edge_attr.size(0)}"
        )


# edge_index tensors whose node range was checked: tensor -> (its version counter, num_src, num_dst, flow)
_CHECKED: WeakIdKeyDictionary = WeakIdKeyDictionary()


def _check_range(edge_index: Tensor, flow: str, num_src: Optional[int], num_dst: Optional[int]) -> None:
    """Node ids within the node counts: one host read the first time an ``edge_index`` tensor is seen with these
    counts, none when the same tensor, unchanged (its version counter), comes again (a training loop's graph)."""
    try:
        key = (edge_index._version, num_src, num_dst, flow)
    except RuntimeError:  # an inference tensor has no version counter: checked every time
        key = None
    if key is not None and _CHECKED.get(edge_index) == key:
        return
    i, j = (1, 0) if flow == "source_to_target" else (0, 1)
    lo, src_max, dst_max = edge_index.min(), edge_index[j].max(), edge_index[i].max()
    ok = lo >= 0
    if num_src is not None:
        ok = ok & (src_max < num_src)
    if num_dst is not None:
        ok = ok & (dst_max < num_dst)
    if not bool(ok):
        raise GraphRMAError(
            f"edge_index: expected sources in [0, {num_src}) and destinations in [0, {num_dst}) "
            f"(the node counts of x), got min {int(lo)}, max source {int(src_max)}, max destination {int(dst_max)}"
        )
    if key is not None:
        _CHECKED[edge_index] = key


def _check_heads(heads: Any, out_channels: Any) -> None:
    if isinstance(heads, bool) or not isinstance(heads, int) or heads < 1:
        raise GraphRMAError(f"heads: expected a positive integer, got {heads!r}")
    if isinstance(out_channels, bool) or not isinstance(out_channels, int) or out_channels < 1:
        raise GraphRMAError(f"out_channels: expected a positive integer, got {out_channels!r}")


def _check_drop_attention(drop_attention: Any) -> Optional[DropAttention]:
    if drop_attention is not None and not isinstance(drop_attention, DropAttention):
        raise GraphRMAError(
            f"drop_attention: expected a graph_rma.DropAttention or None, got {type(drop_attention).__name__}"
        )
    return drop_attention
