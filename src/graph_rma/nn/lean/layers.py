"""The whole forwards of ``GATConv`` and ``GATv2Conv`` on the lean functions: the only lean code that reads PyG's
layer internals (``lin``/``lin_src``/``lin_dst``, ``lin_l``/``lin_r``, ``att_*``, ``lin_edge``, ``res``, ``bias``,
``add_self_loops``, ``fill_value``, ``concat``, ``dropout``, ``negative_slope``)."""

from __future__ import annotations

from typing import Any, Optional, Tuple, Union

import torch
from torch import Tensor
from torch_geometric.typing import SparseTensor
from torch_geometric.utils import add_self_loops, is_torch_sparse_tensor, remove_self_loops, to_edge_index
from torch_geometric.utils.sparse import set_sparse_value

from ..._errors import GraphRMAError
from . import csr as csr_kernels
from . import fused
from .csr import EdgeCSR, edge_csr
from .functions import (
    csr_for,
    draw_dropout,
    dropped_weights,
    edge_aggregate,
    edge_softmax,
    gat_attention,
    gat_scores,
    gatv2_scores,
    softmax_aggregate,
)
from .score import head_dot
from .strategy import lean_strategy

__all__ = [
    "gat_forward",
    "gatv2_forward",
    "check_lean",
    "attention_softmax",
    "dropout_mask",
    "cached_csr",
    "fused_csr",
    "layer_dropout",
]


def check_lean(layer: Any, lean: Any) -> bool:
    """Validate a layer's ``lean`` flag: the lean path implements sum aggregation, ``source_to_target`` flow."""
    if not isinstance(lean, bool):
        raise GraphRMAError(f"lean: expected a bool, got {lean!r}")
    if lean:
        aggr = getattr(layer, "aggr", "add")
        if (
            aggr not in ("add", "sum")
            or getattr(layer, "flow", "source_to_target") != "source_to_target"
            or getattr(layer, "decomposed_layers", 1) != 1
        ):
            raise GraphRMAError(
                "lean: the memory-lean path needs aggr='add', flow='source_to_target' and "
                f"decomposed_layers=1, got aggr={aggr!r}, flow={layer.flow!r}, "
                f"decomposed_layers={layer.decomposed_layers}"
            )
    return lean


def attention_softmax(layer: Any, scores: Tensor, src: Tensor, dst: Tensor, num_src: int, num_dst: int) -> Tensor:
    """Edge softmax, or the layer's DropAttention (a softmax over the surviving edges), as the stock path does."""
    drop = getattr(layer, "drop_attention", None)
    if drop is not None:  # DropAttention() without p takes the layer's own rate, as on the stock path
        return drop.sparse_softmax(
            scores, src, dst, num_src, num_dst, softmax_fn=edge_softmax, layer_rate=getattr(layer, "dropout", None)
        )
    return edge_softmax(scores, dst, num_nodes=num_dst)


def dropout_mask(layer: Any, alpha: Tensor) -> Tuple[Optional[Tensor], Optional[Tensor]]:
    """The layer's plain attention dropout as ``(keep, scale)``: the dropped weights are ``alpha * keep * scale``
    (``(None, None)``: no dropout, e.g. in eval mode or with a DropAttention).

    The mask is drawn as ``F.dropout`` draws it on CPU (``bernoulli_(1 - p)`` on an ``[E, H]`` float tensor),
    hence the very same mask from the same seed there, and kept as booleans.
    """
    if getattr(layer, "drop_attention", None) is not None or not layer.training:
        return None, None
    return draw_dropout(alpha.size(0), alpha.size(1), alpha, float(layer.dropout))


def cached_csr(layer: Any, edge_index: Any, num_src: int, num_dst: int, loops: int, x: Tensor) -> Optional[EdgeCSR]:
    """The CSR of a ``[2, E]`` edge index with ``loops`` self-loops added as the stock layers add them, from
    the layer's ``csr_cache`` (built anew without one), where the CSR kernels apply; else ``None``."""
    if not isinstance(edge_index, Tensor) or is_torch_sparse_tensor(edge_index) or not csr_kernels.csr_supported(x):
        return None
    cache = getattr(layer, "csr_cache", None)
    if cache is None:
        return edge_csr(edge_index[0], edge_index[1], num_src, num_dst, loops)
    return cache.get(edge_index, num_src, num_dst, loops)


def fused_csr(layer: Any, edge_index: Tensor, num_src: int, num_dst: int, loops: int) -> EdgeCSR:
    """The CSR the fused kernels walk (rows sorted by source) of a ``[2, E]`` edge index with ``loops`` self-loops
    added as the stock layers add them, from the layer's ``csr_cache`` when it has one."""
    cache = getattr(layer, "csr_cache", None)
    if cache is None:
        return edge_csr(edge_index[0], edge_index[1], num_src, num_dst, loops, by_source=True)
    return cache.get(edge_index, num_src, num_dst, loops, by_source=True)


def layer_dropout(layer: Any, layer_rate: float) -> fused.Dropout:
    """What the fused kernels drop for a layer: its DropAttention, else its plain attention dropout at
    ``layer_rate``."""
    drop = getattr(layer, "drop_attention", None)
    if drop is not None:
        return fused.drop_attention_dropout(drop, layer_rate)
    return fused.plain_dropout(float(layer_rate), layer.training)


def _fused_edges(layer: Any, edge_index: Any, edge_attr: Optional[Tensor], sizes: Tuple[int, int, int], weights):
    """``(csr, edge_index, edge_attr)`` for the fused kernels: the CSR, and the edge index and features with the
    self-loops (formed only when the edge features or the returned ``weights`` need them)."""
    num_src, num_dst, loops = sizes
    if not is_torch_sparse_tensor(edge_index) and edge_attr is None:
        csr = fused_csr(layer, edge_index, num_src, num_dst, loops)
        if weights and loops:
            edge_index, _ = _self_loops(layer, edge_index, None, loops)
        return csr, edge_index, None
    if loops:
        edge_index, edge_attr = _self_loops(layer, edge_index, edge_attr, loops)
    src, dst, num_src, num_dst = _edges(edge_index, num_src, num_dst)
    return edge_csr(src, dst, num_src, num_dst, by_source=True), edge_index, edge_attr


def _fused_run(layer: Any, kind: int, csr: EdgeCSR, v: Tensor, edge_index: Any, res, weights, **score):
    """The fused attention of ``kind`` and the stock layers' epilogue (with the weights after dropout when asked)."""
    args = dict(score, negative_slope=layer.negative_slope, dropout=layer_dropout(layer, layer.dropout))
    args["seed"] = fused.draw_seed()
    out = fused.fused_attention(kind, csr, v, **args)
    alpha = fused.fused_weights(kind, csr, v, **args) if weights else None
    return _finish(layer, out, res, edge_index, alpha, inplace=False)


def _fused_gat(layer: Any, x_src: Tensor, x_dst: Optional[Tensor], edge_index: Any, edge_attr, sizes, res, weights):
    """``GATConv.forward``'s attention on the fused kernels (:mod:`~graph_rma.nn.lean.fused`)."""
    edge_attr = edge_attr if layer.lin_edge is not None else None
    csr, edge_index, edge_attr = _fused_edges(layer, edge_index, edge_attr, sizes, weights)
    a = head_dot(x_src, layer.att_src)
    b = None if x_dst is None else head_dot(x_dst, layer.att_dst)
    c = _gat_edge_term(layer, edge_attr)
    return _fused_run(layer, fused.GAT_SCORE, csr, x_src, edge_index, res, weights, a=a, b=b, c=c)


def _fused_gatv2(layer: Any, x_l: Tensor, x_r: Tensor, edge_index: Any, edge_attr, loops: int, res, weights):
    """``GATv2Conv.forward``'s attention on the fused kernels (:mod:`~graph_rma.nn.lean.fused`)."""
    sizes = (x_l.size(0), x_r.size(0), loops)
    csr, edge_index, edge_attr = _fused_edges(layer, edge_index, edge_attr, sizes, weights)
    attr = w_edge = None
    if edge_attr is not None:
        attr, w_edge = (edge_attr.view(-1, 1) if edge_attr.dim() == 1 else edge_attr), layer.lin_edge.weight
    score = dict(xr=x_r, att=layer.att, edge_attr=attr, w_edge=w_edge)
    return _fused_run(layer, fused.GATV2_SCORE, csr, x_l, edge_index, res, weights, **score)


def _self_loops(layer: Any, edge_index: Any, edge_attr: Optional[Tensor], num_nodes: int):
    if not layer.add_self_loops:
        return edge_index, edge_attr
    edge_index, edge_attr = remove_self_loops(edge_index, edge_attr)
    return add_self_loops(edge_index, edge_attr, fill_value=layer.fill_value, num_nodes=num_nodes)


def _edges(edge_index: Tensor, num_src: int, num_dst: int) -> Tuple[Tensor, Tensor, int, int]:
    """``(src, dst, num_src, num_dst)`` of an ``[2, E]`` edge index or a ``[N_dst, N_src]`` torch sparse matrix."""
    if is_torch_sparse_tensor(edge_index):
        ei, _ = to_edge_index(edge_index)
        return ei[1], ei[0], edge_index.size(1), edge_index.size(0)
    ei = edge_index if edge_index.dtype == torch.long else edge_index.long()
    return ei[0], ei[1], num_src, num_dst


def _finish(
    layer: Any,
    out: Tensor,
    res: Optional[Tensor],
    edge_index: Tensor,
    alpha: Optional[Tensor] = None,
    keep: Optional[Tensor] = None,
    scale: Optional[Tensor] = None,
    inplace: bool = True,
):
    """The stock layers' epilogue: residual, bias, concatenation or mean of the heads, returned weights (``alpha``
    given: ``(out, (edge_index, alpha after dropout))``). ``inplace=False``: ``out`` is kept for backward."""
    if layer.concat and not inplace:
        if res is not None:
            out = out + res.view(out.shape)
        if layer.bias is not None:
            out = out + layer.bias.view(out.shape[1:])
        out = out.view(-1, layer.heads * layer.out_channels)
    elif layer.concat:
        # The aggregate is a fresh tensor that autograd does not keep: residual and bias are added in place, on
        # the tensor itself (in place on a view of it would make backward copy it twice).
        if res is not None:
            out.add_(res.view(out.shape))
        if layer.bias is not None:
            out.add_(layer.bias.view(out.shape[1:]))
        out = out.view(-1, layer.heads * layer.out_channels)
    else:
        out = out.mean(dim=1)
        if res is not None:
            out = out + res
        if layer.bias is not None:
            out = out + layer.bias
    if alpha is None:
        return out
    alpha = dropped_weights(alpha, keep, scale)
    if is_torch_sparse_tensor(edge_index):
        return out, (set_sparse_value(edge_index, alpha), alpha)
    return out, (edge_index, alpha)


def _attend(
    layer: Any,
    scores: Tensor,
    x_src: Tensor,
    src: Tensor,
    dst: Tensor,
    num_src: int,
    num_dst: int,
    res: Optional[Tensor],
    edge_index: Tensor,
    return_attention_weights: Optional[bool],
    csr: Optional[EdgeCSR] = None,
):
    """Softmax, dropout / DropAttention, aggregation and the stock layers' epilogue, from the scores."""
    if getattr(layer, "drop_attention", None) is None and not return_attention_weights:
        p = float(layer.dropout) if layer.training else 0.0
        out = softmax_aggregate(scores, x_src, src, dst, num_dst, p, inplace=not torch.compiler.is_compiling(), csr=csr)
        return _finish(layer, out, res, edge_index)
    alpha = attention_softmax(layer, scores, src, dst, num_src, num_dst)
    keep, scale = dropout_mask(layer, alpha)
    out = edge_aggregate(alpha, x_src, src, dst, num_dst, keep, scale, csr)
    return _finish(layer, out, res, edge_index, alpha if return_attention_weights else None, keep, scale)


def _start(layer: Any, x: Any, edge_index: Any) -> Tuple[int, int, Optional[Tensor]]:
    """``(heads, channels, residual term)``, once the edge index is known to be of a form the lean path takes."""
    if isinstance(edge_index, SparseTensor) and not isinstance(edge_index, Tensor):
        raise GraphRMAError(
            "edge_index: the lean path takes a [2, E] tensor or a torch sparse matrix, not a "
            "torch_sparse.SparseTensor (use lean=False, or SparseTensor.to_torch_sparse_csr_tensor())"
        )
    x_dst = x if isinstance(x, Tensor) else x[1]
    res = layer.res(x_dst) if layer.res is not None and x_dst is not None else None
    return layer.heads, layer.out_channels, res


def _gat_edge_term(layer: Any, edge_attr: Optional[Tensor]) -> Optional[Tensor]:
    """GAT's edge term ``c`` ``[E, H]``: sum_c att_edge[h, c] (W_e e)[h, c] = e . (sum_c att_edge[h, c] W_e[h, c, :]),
    one ``[E, H]`` product."""
    if edge_attr is None or layer.lin_edge is None:
        return None
    attr = edge_attr.view(-1, 1) if edge_attr.dim() == 1 else edge_attr
    H, C = layer.heads, layer.out_channels
    return attr @ (layer.lin_edge.weight.view(H, C, -1) * layer.att_edge.view(H, C, 1)).sum(1).t()


def gat_forward(
    layer: Any,
    x: Union[Tensor, Tuple[Tensor, Optional[Tensor]]],
    edge_index: Any,
    edge_attr: Optional[Tensor] = None,
    size: Optional[Tuple[Optional[int], Optional[int]]] = None,
    return_attention_weights: Optional[bool] = None,
):
    """``GATConv.forward`` of ``layer`` (same arguments and returns) on the memory-lean functions."""
    H, C, res = _start(layer, x, edge_index)
    if isinstance(x, Tensor):
        if layer.lin is not None:
            x_src = x_dst = layer.lin(x).view(-1, H, C)
        else:
            x_src, x_dst = layer.lin_src(x).view(-1, H, C), layer.lin_dst(x).view(-1, H, C)
    else:
        x_src, x_dst = x
        lin_src = layer.lin if layer.lin is not None else layer.lin_src
        lin_dst = layer.lin if layer.lin is not None else layer.lin_dst
        x_src = lin_src(x_src).view(-1, H, C)
        x_dst = lin_dst(x_dst).view(-1, H, C) if x_dst is not None else None
    num_src = x_src.size(0) if size is None or size[0] is None else size[0]
    num_dst = x_dst.size(0) if x_dst is not None else num_src
    num_dst = num_dst if size is None or size[1] is None else size[1]
    loops = 0
    if layer.add_self_loops and isinstance(edge_index, Tensor):
        n = x_src.size(0) if x_dst is None else min(x_src.size(0), x_dst.size(0))
        loops = min(size) if size is not None else n
    if lean_strategy(x_src) == "fused":
        sizes = (num_src, num_dst, loops)
        return _fused_gat(layer, x_src, x_dst, edge_index, edge_attr, sizes, res, return_attention_weights)
    one_node = getattr(layer, "drop_attention", None) is None and not return_attention_weights
    p = float(layer.dropout) if layer.training else 0.0  # plain attention dropout, in the fused node
    att_dst = None if x_dst is None else layer.att_dst
    x_dst_term = None if x_dst is x_src else x_dst  # None: the destination term reads x_src itself
    # The CSR straight from the edge index, self-loops included (no [2, E] int64 copy with loops).
    csr = cached_csr(layer, edge_index, num_src, num_dst, loops, x_src)
    if one_node and csr is not None and (edge_attr is None or layer.lin_edge is None):
        out = gat_attention(
            x_src, layer.att_src, x_dst_term, att_dst, None, None, None, num_dst, layer.negative_slope, p, csr
        )
        return _finish(layer, out, res, edge_index)
    if loops:
        edge_index, edge_attr = _self_loops(layer, edge_index, edge_attr, loops)
    src, dst, num_src, num_dst = _edges(edge_index, num_src, num_dst)
    a_edge = _gat_edge_term(layer, edge_attr)
    csr = csr_for(csr, src, dst, num_src, num_dst, x_src)
    if one_node:
        out = gat_attention(
            x_src, layer.att_src, x_dst_term, att_dst, a_edge, src, dst, num_dst, layer.negative_slope, p, csr
        )
        return _finish(layer, out, res, edge_index)
    a_src = head_dot(x_src, layer.att_src)
    a_dst = None if x_dst is None else head_dot(x_dst, layer.att_dst)
    scores = gat_scores(a_src, a_dst, a_edge, src, dst, layer.negative_slope)
    return _attend(layer, scores, x_src, src, dst, num_src, num_dst, res, edge_index, return_attention_weights, csr)


def gatv2_forward(
    layer: Any,
    x: Union[Tensor, Tuple[Tensor, Tensor]],
    edge_index: Any,
    edge_attr: Optional[Tensor] = None,
    return_attention_weights: Optional[bool] = None,
):
    """``GATv2Conv.forward`` of ``layer`` (same arguments and returns) on the memory-lean functions."""
    H, C, res = _start(layer, x, edge_index)
    if isinstance(x, Tensor):
        x_l = layer.lin_l(x).view(-1, H, C)
        x_r = x_l if layer.share_weights else layer.lin_r(x).view(-1, H, C)
    else:
        x_l, x_r = x[0], x[1]
        x_l = layer.lin_l(x_l).view(-1, H, C)
        if x_r is None:
            raise GraphRMAError("x: GATv2 needs destination features, got (x_src, None)")
        x_r = layer.lin_r(x_r).view(-1, H, C)
    loops = min(x_l.size(0), x_r.size(0)) if layer.add_self_loops and isinstance(edge_index, Tensor) else 0
    if lean_strategy(x_l) == "fused":
        return _fused_gatv2(layer, x_l, x_r, edge_index, edge_attr, loops, res, return_attention_weights)
    csr = cached_csr(layer, edge_index, x_l.size(0), x_r.size(0), loops, x_l)
    if loops:
        edge_index, edge_attr = _self_loops(layer, edge_index, edge_attr, loops)
    src, dst, num_src, num_dst = _edges(edge_index, x_l.size(0), x_r.size(0))
    attr, w_edge = None, None
    if edge_attr is not None:
        attr = edge_attr.view(-1, 1) if edge_attr.dim() == 1 else edge_attr
        w_edge = layer.lin_edge.weight
    scores = gatv2_scores(x_l, x_r, layer.att, attr, w_edge, src, dst, layer.negative_slope)
    csr = csr_for(csr, src, dst, num_src, num_dst, x_l)
    return _attend(layer, scores, x_l, src, dst, num_src, num_dst, res, edge_index, return_attention_weights, csr)
