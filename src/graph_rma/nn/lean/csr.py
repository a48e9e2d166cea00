r"""Edges as compressed sparse rows: the products of sparse attention as sparse-dense kernels, per head.

For edges :math:`e = (j \to i)` with weights :math:`w_e` (one head), the aggregation
:math:`\mathbf{y}_i = \sum_{e = (j \to i)} w_e \mathbf{x}_j` is the product :math:`\mathbf{y} = A \mathbf{x}` of
the sparse ``[N_dst, N_src]`` matrix :math:`A_{ij} = w_e` with the dense node features, its gradient with respect
to the features is :math:`A^\top \mathbf{g}`, and the gradient with respect to the weights,
:math:`\langle \mathbf{g}_i, \mathbf{x}_j \rangle` for every edge, is a sampled dense-dense product (SDDMM) on
:math:`A`'s pattern. torch's CSR kernels (``torch.sparse.mm``, :func:`torch.sparse.sampled_addmm`) compute these
without forming any ``[E, C]`` tensor, and on CPU several times faster than gathering the edges' features and
scattering the messages back.

:class:`EdgeCSR` holds the edges sorted by destination (rows of :math:`A`) and by source (rows of
:math:`A^\top`), as ``int32`` indices when they fit: 20 bytes per edge. :func:`edge_csr` builds it with two
stable sorts, so sums run in a fixed order and results repeat exactly from run to run, and can add PyG's self-loops
on the way (without the ``int64`` edge index with loops that ``add_self_loops`` forms). Per-edge quantities in
*CSR order* are those of edge ``perm[p]`` at position ``p``. The kernels take optional ``out`` / ``buffer``
tensors, so that a caller looping over heads allocates its work space once.

The CSR kernels run on CPU tensors of ``float32``/``float64`` outside :func:`torch.compile`
(:func:`csr_supported`); elsewhere the lean path uses its chunked gather-scatter code
(:mod:`graph_rma.nn.lean.chunked`).
"""

from __future__ import annotations

import warnings
from typing import NamedTuple, Optional

import torch
from torch import Tensor

from .strategy import forced_strategy

__all__ = ["EdgeCSR", "edge_csr", "csr_supported", "spmm", "spmm_t", "sddmm", "segment_max", "segment_sum"]


class EdgeCSR(NamedTuple):
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

    @property
    def nbytes(self) -> int:
        """Bytes held by the index vectors."""
        return sum(t.numel() * t.element_size() for t in self[:7])


def _row_pointers(sorted_rows: Tensor, num_rows: int) -> Tensor:
    counts = torch.bincount(sorted_rows, minlength=num_rows)
    return torch.cat([counts.new_zeros(1), counts.cumsum(0)]).to(sorted_rows.dtype)


def _with_loops(index: Tensor, kept: Optional[Tensor], num_loops: int, dtype: torch.dtype) -> Tensor:
    """``index[kept]`` followed by ``0 .. num_loops - 1`` as ``dtype`` (PyG's ``remove_self_loops`` then
    ``add_self_loops`` on one side of the edge index)."""
    index = index if kept is None else torch.masked_select(index, kept)
    return torch.cat([index.to(dtype), torch.arange(num_loops, dtype=dtype, device=index.device)])


def edge_csr(
    src: Tensor, dst: Tensor, num_src: int, num_dst: int, self_loops: int = 0, by_source: bool = False
) -> EdgeCSR:
    """:class:`EdgeCSR` of the edges ``src[e] -> dst[e]`` (``[E]`` integer tensors).

    ``by_source``: each destination's incoming edges sorted by source id (edges of one source pair in their order),
    as DropAttention's element-mode windows run (the fused kernels need it); else in their order.

    ``self_loops`` > 0: the edges as PyG's ``remove_self_loops`` and then ``add_self_loops(num_nodes=self_loops)``
    leave them (the edges ``j -> j`` dropped, order kept, then ``i -> i`` for ``i < self_loops`` appended), without
    forming that ``[2, E]`` ``int64`` edge index."""
    kept = (src != dst) if self_loops else None
    E = (int(torch.count_nonzero(kept)) if kept is not None else src.numel()) + self_loops
    index = torch.int32 if max(E, num_src, num_dst) < 2**31 - 1 else torch.int64
    sources, targets = _with_loops(src, kept, self_loops, index), _with_loops(dst, kept, self_loops, index)
    del kept
    if by_source:  # one stable sort on (destination, source)
        order = torch.sort(targets.long() * max(int(num_src), 1) + sources.long(), stable=True)[1]
        row = targets.index_select(0, order)
    else:
        row, order = torch.sort(targets, stable=True)
    del targets
    perm, col = order.to(index), sources.index_select(0, order)
    del sources
    sorted_col, order = torch.sort(col, stable=True)
    crow_t = _row_pointers(sorted_col, num_src)
    del sorted_col
    perm_t, col_t = order.to(index), row.index_select(0, order)
    return EdgeCSR(perm, row, _row_pointers(row, num_dst), col, perm_t, crow_t, col_t, int(num_src), int(num_dst))


def csr_supported(*tensors: Tensor) -> bool:
    """Whether the CSR kernels apply: CPU tensors of ``float32``/``float64``, not under :func:`torch.compile`, unless
    ``GRAPH_RMA_LEAN=chunked`` forces the chunked path (:mod:`~graph_rma.nn.lean.strategy`)."""
    if torch.compiler.is_compiling() or forced_strategy() == "chunked":
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


def spmm(csr: EdgeCSR, values: Tensor, x: Tensor, out: Optional[Tensor] = None) -> Tensor:
    r""":math:`\mathbf{y}_i = \sum_{e = (j \to i)} v_e \mathbf{x}_j`: ``values`` ``[E]`` in CSR order, ``x``
    ``[num_src, C]`` -> ``[num_dst, C]`` (written into ``out``, a contiguous ``[num_dst, C]`` tensor, when given)."""
    return _times(_matrix(csr.crow, csr.col, values, (csr.num_dst, csr.num_src)), x, out)


def spmm_t(
    csr: EdgeCSR, values: Tensor, g: Tensor, buffer: Optional[Tensor] = None, out: Optional[Tensor] = None
) -> Tensor:
    r"""The transposed product :math:`\mathbf{z}_j = \sum_{e = (j \to i)} v_e \mathbf{g}_i`: ``values`` ``[E]`` in
    CSR order, ``g`` ``[num_dst, C]`` -> ``[num_src, C]``. ``buffer``: an ``[E]`` tensor to reorder the values in
    (else a new one); ``out``: as in :func:`spmm`."""
    reordered = torch.index_select(values, 0, csr.perm_t, out=buffer)
    return _times(_matrix(csr.crow_t, csr.col_t, reordered, (csr.num_src, csr.num_dst)), g, out)


def sddmm(csr: EdgeCSR, g: Tensor, x: Tensor, out: Optional[Tensor] = None) -> Tensor:
    r""":math:`\langle \mathbf{g}_i, \mathbf{x}_j \rangle` for every edge ``j -> i``, in CSR order: ``g``
    ``[num_dst, C]``, ``x`` ``[num_src, C]`` -> ``[E]`` (written into ``out`` when given)."""
    # beta=0 still multiplies: the input values must be finite
    values = out.zero_() if out is not None else g.new_zeros(csr.col.numel())
    pattern = _matrix(csr.crow, csr.col, values, (csr.num_dst, csr.num_src))
    # in place: the result is written into `values`, the indices are not copied
    torch.sparse.sampled_addmm(pattern, g.contiguous(), x.contiguous().t(), beta=0.0, out=pattern)
    return values


def segment_max(csr: EdgeCSR, values: Tensor) -> Tensor:
    """Per destination, the largest of its edges' ``values`` (``[E]`` in CSR order); ``-inf`` without edges."""
    return torch.segment_reduce(values, "max", offsets=csr.crow, axis=0, unsafe=True, initial=float("-inf"))


def segment_sum(csr: EdgeCSR, values: Tensor) -> Tensor:
    """Per destination, the sum of its edges' ``values`` (``[E]`` in CSR order)."""
    return values.new_zeros(csr.num_dst).index_add_(0, csr.row, values)
