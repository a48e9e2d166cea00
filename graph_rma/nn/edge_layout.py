r"""Edges as compressed sparse rows: the products of sparse attention as sparse-dense kernels, per head.

For edges :math:`e = (j \to i)` with weights :math:`w_e` (one head), the aggregation
:math:`\mathbf{y}_i = \sum_{e = (j \to i)} w_e \mathbf{x}_j` is the product :math:`\mathbf{y} = A \mathbf{x}` of
the sparse ``[N_dst, N_src]`` matrix :math:`A_{ij} = w_e` with the dense node features, its gradient with respect
to the features is :math:`A^\top \mathbf{g}`, and the gradient with respect to the weights,
:math:`\langle \mathbf{g}_i, \mathbf{x}_j \rangle` for every edge, is a sampled dense-dense product (SDDMM) on
:math:`A`'s pattern. torch's CSR kernels (``torch.sparse.mm``, :func:`torch.sparse.sampled_addmm`) compute these
without forming any ``[E, C]`` tensor, and on CPU several times faster than gathering the edges' features and
scattering the messages back.

:class:`EdgeLayout` holds the edges sorted by destination (rows of :math:`A`) and by source (rows of
:math:`A^\top`), as ``int32`` indices when they fit: 20 bytes per edge. :func:`edge_layout` builds it with two
stable sorts, so sums run in a fixed order and results repeat exactly from run to run, and can add PyG's self-loops
on the way (without the ``int64`` edge index with loops that ``add_self_loops`` forms). Per-edge quantities in
*CSR order* are those of edge ``perm[p]`` at position ``p``. The kernels take optional ``out`` / ``buffer``
tensors, so that a caller looping over heads allocates its work space once.

The CSR kernels run on CPU tensors of ``float32``/``float64`` outside :func:`torch.compile`
(:func:`csr_supported`); elsewhere the callers in :mod:`graph_rma.nn.edge_attention` use their chunked
gather-scatter code.
"""
from __future__ import annotations

import warnings
import weakref
from collections import OrderedDict
from typing import Dict, NamedTuple, Optional, Tuple

import torch
from torch import Tensor

__all__ = ["EdgeLayout", "edge_layout", "cached_edge_layout", "clear_layout_cache", "csr_supported", "spmm", "spmm_t",
           "sddmm", "segment_max", "segment_sum"]


class EdgeLayout(NamedTuple):
    """The edges as CSR (by destination) and as CSR of the transpose (by source)."""

    perm: Tensor  #: ``[E]``: edge at each CSR position (edges sorted by destination, stable)
    row: Tensor  #: ``[E]``: destination at each CSR position (sorted)
    crow: Tensor  #: ``[num_dst + 1]``: CSR row pointers
    col: Tensor  #: ``[E]``: source at each CSR position
    perm_t: Tensor  #: ``[E]``: CSR position at each position of the transpose (sorted by source, stable)
    crow_t: Tensor  #: ``[num_src + 1]``: row pointers of the transpose
    col_t: Tensor  #: ``[E]``: destination at each position of the transpose
    num_src: int
    num_dst: int


def _row_pointers(sorted_rows: Tensor, num_rows: int) -> Tensor:
    counts = torch.bincount(sorted_rows, minlength=num_rows)
    return torch.cat([counts.new_zeros(1), counts.cumsum(0)]).to(sorted_rows.dtype)


def _with_loops(index: Tensor, kept: Optional[Tensor], num_loops: int, out: Tensor) -> None:
    """``index[kept]`` followed by ``0 .. num_loops - 1``, written into ``out`` (PyG's ``remove_self_loops`` then
    ``add_self_loops`` on one side of the edge index)."""
    k = out.numel() - num_loops
    out[:k] = index if kept is None else torch.masked_select(index, kept)
    torch.arange(num_loops, out=out[k:])


def edge_layout(src: Tensor, dst: Tensor, num_src: int, num_dst: int, self_loops: int = 0) -> EdgeLayout:
    """:class:`EdgeLayout` of the edges ``src[e] -> dst[e]`` (``[E]`` integer tensors).

    ``self_loops`` > 0: the edges as PyG's ``remove_self_loops`` and then ``add_self_loops(num_nodes=self_loops)``
    leave them (the edges ``j -> j`` dropped, order kept, then ``i -> i`` for ``i < self_loops`` appended), without
    forming that ``[2, E]`` ``int64`` edge index.

    All five index vectors live in one buffer allocated before any temporary, and every temporary is freed before
    this returns: what is kept sits below what is dropped in the heap, so the memory of the temporaries is reused by
    whatever comes next instead of staying behind as holes."""
    kept = (src != dst) if self_loops else None
    E = (int(torch.count_nonzero(kept)) if kept is not None else src.numel()) + self_loops
    index = torch.int32 if max(E, num_src, num_dst) < 2**31 - 1 else torch.int64
    perm, row, col, perm_t, col_t = torch.empty(5, E, dtype=index, device=src.device).unbind(0)
    # the edges (with their loops) in the slots of the transpose, filled last
    _with_loops(src, kept, self_loops, perm_t)
    _with_loops(dst, kept, self_loops, col_t)
    del kept
    order = torch.empty(E, dtype=torch.long, device=src.device)
    torch.sort(col_t, stable=True, out=(row, order))
    perm.copy_(order)
    torch.index_select(perm_t, 0, order, out=col)
    sorted_col = torch.empty_like(col)
    torch.sort(col, stable=True, out=(sorted_col, order))
    perm_t.copy_(order)
    crow_t = _row_pointers(sorted_col, num_src)
    del sorted_col
    torch.index_select(row, 0, order, out=col_t)
    del order
    return EdgeLayout(perm, row, _row_pointers(row, num_dst), col, perm_t, crow_t, col_t, int(num_src), int(num_dst))


#: How many edge indexes :func:`cached_edge_layout` keeps layouts for (the most recently used).
CACHE_SIZE = 8
#: At most this many bytes of layouts and edge-index copies are kept (the entry in use is always kept).
CACHE_BYTES = 2 << 30
#: id of an edge index -> (weak reference to it, a copy of its values, {(num_src, num_dst, self_loops): layout}),
#: oldest first
_CACHE: "OrderedDict[int, Tuple[weakref.ref[Tensor], Tensor, Dict[Tuple[int, int, int], EdgeLayout]]]" = OrderedDict()
_CHUNK = 1 << 20


def _copy(edge_index: Tensor) -> Tensor:
    """The values to compare against later: int32 when they fit (8 bytes per edge)."""
    small = edge_index.numel() == 0 or int(edge_index.max()) < 2 ** 31 - 1 and int(edge_index.min()) >= 0
    return edge_index.to(torch.int32 if small else edge_index.dtype, copy=True)


def _same(edge_index: Tensor, copy: Tensor) -> bool:
    """``edge_index`` still holds ``copy``'s values: an exact comparison, chunked (no full-size temporary)."""
    if edge_index.shape != copy.shape or edge_index.device != copy.device:
        return False
    for start in range(0, edge_index.size(1), _CHUNK):
        part = edge_index[:, start:start + _CHUNK]
        if not torch.equal(part.to(copy.dtype) if part.dtype != copy.dtype else part, copy[:, start:start + _CHUNK]):
            return False
    return True


def _bytes(entry) -> int:
    return entry[1].numel() * entry[1].element_size() + sum(
        t.numel() * t.element_size() for layout in entry[2].values() for t in layout[:7])


def cached_edge_layout(edge_index: Tensor, num_src: int, num_dst: int, self_loops: int = 0) -> EdgeLayout:
    """:func:`edge_layout` of a ``[2, E]`` edge index (row 0 sources, row 1 destinations), built once and kept while
    that tensor lives and holds the same values.

    Full-batch training passes the same edge index at every step, and to every layer: the two sorts (about a
    quarter of a lean GAT step on CPU) then run once. Every call compares the tensor's values with a copy kept
    beside the layout (an exact, chunked comparison: about one pass over the indices, a few milliseconds per
    million edges), so a change made in any way (in place, through ``.data``, a NumPy or DLPack view, its storage)
    rebuilds the layout: the cache never returns a layout of other edges. It keeps the layouts (20 bytes per edge)
    and copies (8 bytes per edge) of the :data:`CACHE_SIZE` most recently used edge indexes, within
    :data:`CACHE_BYTES`; an entry is dropped with its tensor, when it is the oldest of more, or by
    :func:`clear_layout_cache`. Tensors made under :func:`torch.inference_mode` are not cached."""
    if edge_index.is_inference():
        return edge_layout(edge_index[0], edge_index[1], num_src, num_dst, self_loops)
    key = id(edge_index)
    entry = _CACHE.get(key)
    if entry is None or entry[0]() is not edge_index or not _same(edge_index, entry[1]):
        # the entry goes when the tensor does (CPython calls this as it frees it, before its id can be reused)
        entry = (weakref.ref(edge_index, lambda _, key=key: _CACHE.pop(key, None)), _copy(edge_index), {})
        _CACHE[key] = entry
    _CACHE.move_to_end(key)
    shape = (int(num_src), int(num_dst), int(self_loops))
    layout = entry[2].get(shape)
    if layout is None:
        layout = entry[2][shape] = edge_layout(edge_index[0], edge_index[1], *shape)
    total = sum(_bytes(e) for e in _CACHE.values())
    while len(_CACHE) > 1 and (len(_CACHE) > CACHE_SIZE or total > CACHE_BYTES):
        _, old = _CACHE.popitem(last=False)
        total -= _bytes(old)
    return layout


def clear_layout_cache() -> None:
    """Drop every layout kept by :func:`cached_edge_layout`."""
    _CACHE.clear()


def csr_supported(*tensors: Tensor) -> bool:
    """Whether the CSR kernels apply: CPU tensors of ``float32``/``float64``, not under :func:`torch.compile`."""
    if torch.compiler.is_compiling():
        return False
    return all(t.device.type == "cpu" and t.dtype in (torch.float32, torch.float64) for t in tensors)


_BETA_WARNING_SEEN = False


def _matrix(crow: Tensor, col: Tensor, values: Tensor, shape) -> Tensor:
    global _BETA_WARNING_SEEN
    if not _BETA_WARNING_SEEN:  # torch warns "Sparse CSR tensor support is in beta state" once per process: here
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            matrix = torch.sparse_csr_tensor(crow, col, values, shape, check_invariants=False)
        _BETA_WARNING_SEEN = True
        return matrix
    return torch.sparse_csr_tensor(crow, col, values, shape, check_invariants=False)


def _times(a: Tensor, dense: Tensor, out: Optional[Tensor]) -> Tensor:
    """The sparse-dense product ``a @ dense``, into ``out`` when given (``addmm`` on a zeroed ``out``)."""
    if out is None:
        return torch.sparse.mm(a, dense.contiguous())
    return torch.addmm(out.zero_(), a, dense.contiguous(), out=out)


def spmm(layout: EdgeLayout, values: Tensor, x: Tensor, out: Optional[Tensor] = None) -> Tensor:
    r""":math:`\mathbf{y}_i = \sum_{e = (j \to i)} v_e \mathbf{x}_j`: ``values`` ``[E]`` in CSR order, ``x``
    ``[num_src, C]`` -> ``[num_dst, C]`` (written into ``out``, a contiguous ``[num_dst, C]`` tensor, when given)."""
    return _times(_matrix(layout.crow, layout.col, values, (layout.num_dst, layout.num_src)), x, out)


def spmm_t(layout: EdgeLayout, values: Tensor, g: Tensor, buffer: Optional[Tensor] = None,
           out: Optional[Tensor] = None) -> Tensor:
    r"""The transposed product :math:`\mathbf{z}_j = \sum_{e = (j \to i)} v_e \mathbf{g}_i`: ``values`` ``[E]`` in
    CSR order, ``g`` ``[num_dst, C]`` -> ``[num_src, C]``. ``buffer``: an ``[E]`` tensor to reorder the values in
    (else a new one); ``out``: as in :func:`spmm`."""
    reordered = torch.index_select(values, 0, layout.perm_t, out=buffer)
    return _times(_matrix(layout.crow_t, layout.col_t, reordered, (layout.num_src, layout.num_dst)), g, out)


def sddmm(layout: EdgeLayout, g: Tensor, x: Tensor, out: Optional[Tensor] = None) -> Tensor:
    r""":math:`\langle \mathbf{g}_i, \mathbf{x}_j \rangle` for every edge ``j -> i``, in CSR order: ``g``
    ``[num_dst, C]``, ``x`` ``[num_src, C]`` -> ``[E]`` (written into ``out`` when given)."""
    # beta=0 still multiplies: the input values must be finite
    values = out.zero_() if out is not None else g.new_zeros(layout.col.numel())
    pattern = _matrix(layout.crow, layout.col, values, (layout.num_dst, layout.num_src))
    # in place: the result is written into `values`, the indices are not copied
    torch.sparse.sampled_addmm(pattern, g.contiguous(), x.contiguous().t(), beta=0.0, out=pattern)
    return values


def segment_max(layout: EdgeLayout, values: Tensor) -> Tensor:
    """Per destination, the largest of its edges' ``values`` (``[E]`` in CSR order); ``-inf`` without edges."""
    return torch.segment_reduce(values, "max", offsets=layout.crow, axis=0, unsafe=True, initial=float("-inf"))


def segment_sum(layout: EdgeLayout, values: Tensor) -> Tensor:
    """Per destination, the sum of its edges' ``values`` (``[E]`` in CSR order)."""
    return values.new_zeros(layout.num_dst).index_add_(0, layout.row, values)
