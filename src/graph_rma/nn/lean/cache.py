"""The CSRs of the edge indexes a layer sees, built once and kept while each edge index lives unchanged.

A :class:`CSRCache` is owned by a layer (``layer.csr_cache``, as PyG's ``cached=True`` keeps its normalised
graph on the layer) and can be shared by several layers that see the same graph: full-batch training passes the
same edge index at every step, so the two sorts of :func:`~graph_rma.nn.lean.csr.edge_csr` (about a quarter of a
lean GAT step on CPU) run once.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from typing import Dict, Optional, Tuple

import torch
from torch import Tensor

from .csr import EdgeCSR, edge_csr

__all__ = ["CSRCache", "share_csr_cache"]

#: The most CSRs (node counts, self-loops, row orders) kept for one edge index: the most recently used ones.
MAX_CSRS_PER_EDGE_INDEX = 4

#: Compare edge indexes in slices of this many columns (no full-size temporary).
_COMPARE_COLUMNS = 1 << 20


def _copy(edge_index: Tensor) -> Tensor:
    """The values to compare against later: int32 when they fit (8 bytes per edge)."""
    small = edge_index.numel() == 0 or int(edge_index.max()) < 2**31 - 1 and int(edge_index.min()) >= 0
    return edge_index.to(torch.int32 if small else edge_index.dtype, copy=True)


def _same(edge_index: Tensor, copy: Tensor) -> bool:
    """``edge_index`` still holds ``copy``'s values: an exact comparison, chunked."""
    if edge_index.shape != copy.shape or edge_index.device != copy.device:
        return False
    for start in range(0, edge_index.size(1), _COMPARE_COLUMNS):
        part = edge_index[:, start : start + _COMPARE_COLUMNS]
        if not torch.equal(part.to(copy.dtype), copy[:, start : start + _COMPARE_COLUMNS]):
            return False
    return True


class _Entry:
    """One edge index: a weak reference to it, a copy of its values, its CSRs by
    ``(num_src, num_dst, self_loops, by_source)``."""

    __slots__ = ("ref", "values", "csrs")

    def __init__(self, ref: "weakref.ref[Tensor]", values: Tensor) -> None:
        self.ref, self.values = ref, values
        self.csrs: "OrderedDict[Tuple[int, int, int, bool], EdgeCSR]" = OrderedDict()

    @property
    def nbytes(self) -> int:
        return self.values.numel() * self.values.element_size() + sum(c.nbytes for c in self.csrs.values())


class CSRCache:
    """:func:`~graph_rma.nn.lean.csr.edge_csr` of ``[2, E]`` edge indexes, each built once and kept while its
    tensor lives and holds the same values.

    Every :meth:`get` compares the tensor's values with a copy kept beside the CSR (an exact, chunked
    comparison: about one pass over the indices, a few milliseconds per million edges), so a change made in any way
    (in place, through ``.data``, a NumPy or DLPack view, its storage) rebuilds the CSR: the cache never returns a
    CSR of other edges. It keeps the CSRs (20 bytes per edge) and copies (8 bytes per edge) of the
    ``max_entries`` most recently used edge indexes, each with the CSRs of its :data:`MAX_CSRS_PER_EDGE_INDEX`
    most recently used shapes (node counts, self-loops, row order), within ``max_bytes`` (the entry in use is always
    kept); an entry is dropped with its tensor, when it is the oldest of more, or by :meth:`clear`. Tensors made
    under :func:`torch.inference_mode` are not cached. A copy or an unpickled cache starts empty.

    Args:
        max_entries (int, optional): how many edge indexes keep their CSRs. (default: ``8``)
        max_bytes (int, optional): at most this many bytes of CSRs and copies. (default: 2 GiB)
    """

    def __init__(self, max_entries: int = 8, max_bytes: int = 2 << 30) -> None:
        self.max_entries, self.max_bytes = int(max_entries), int(max_bytes)
        self._entries: "OrderedDict[int, _Entry]" = OrderedDict()

    def get(
        self, edge_index: Tensor, num_src: int, num_dst: int, self_loops: int = 0, by_source: bool = False
    ) -> EdgeCSR:
        """The CSR of ``edge_index`` (row 0 sources, row 1 destinations) with ``self_loops`` loops added as PyG
        adds them, its rows sorted by source with ``by_source`` (see :func:`~graph_rma.nn.lean.csr.edge_csr`)."""
        shape = (int(num_src), int(num_dst), int(self_loops), bool(by_source))
        if edge_index.is_inference():
            return edge_csr(edge_index[0], edge_index[1], *shape)
        key, entries = id(edge_index), self._entries
        entry = entries.get(key)
        if entry is None or entry.ref() is not edge_index or not _same(edge_index, entry.values):
            # the entry goes when the tensor does (CPython calls this as it frees it, before its id can be reused)
            ref = weakref.ref(edge_index, lambda _, key=key: entries.pop(key, None))
            entry = entries[key] = _Entry(ref, _copy(edge_index))
        entries.move_to_end(key)
        csr = entry.csrs.get(shape)
        if csr is None:
            csr = entry.csrs[shape] = edge_csr(edge_index[0], edge_index[1], *shape)
            while len(entry.csrs) > MAX_CSRS_PER_EDGE_INDEX:  # the least recently used shape goes
                entry.csrs.popitem(last=False)
        entry.csrs.move_to_end(shape)
        total = self.nbytes
        while len(entries) > 1 and (len(entries) > self.max_entries or total > self.max_bytes):
            total -= entries.popitem(last=False)[1].nbytes
        return csr

    def clear(self) -> None:
        """Drop every kept CSR."""
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def nbytes(self) -> int:
        """Bytes of the kept CSRs and copies."""
        return sum(e.nbytes for e in self._entries.values())

    def __repr__(self) -> str:
        return f"{type(self).__name__}(entries={len(self)}, nbytes={self.nbytes})"

    # A copied or pickled layer gets an empty cache of the same limits (weak references do not copy).
    def __getstate__(self) -> Dict[str, int]:
        return {"max_entries": self.max_entries, "max_bytes": self.max_bytes}

    def __setstate__(self, state: Dict[str, int]) -> None:
        self.__init__(**state)

    def __deepcopy__(self, memo) -> "CSRCache":
        return CSRCache(self.max_entries, self.max_bytes)


def share_csr_cache(module: torch.nn.Module, cache: Optional[CSRCache] = None) -> CSRCache:
    """Give every layer of ``module`` that has a ``csr_cache`` one cache (``cache``, or a new one), so that
    layers seeing the same edge index build and keep its CSR once. Returns that cache."""
    cache = CSRCache() if cache is None else cache
    for m in module.modules():
        if isinstance(getattr(m, "csr_cache", None), CSRCache):
            m.csr_cache = cache
    return cache
