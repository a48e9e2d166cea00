"""Former home of the edges' CSR layout, now :mod:`graph_rma.nn.lean.csr`: its public names, re-exported.

The process-wide layout cache is gone: each lean layer owns a :class:`~graph_rma.nn.lean.LayoutCache`
(``layer.layout_cache``). :func:`cached_edge_layout` and :func:`clear_layout_cache` remain for old callers, on one
cache of their own, and warn.
"""

from __future__ import annotations

import warnings

from torch import Tensor

from .lean import EdgeLayout, LayoutCache, csr_supported, edge_layout, sddmm, segment_max, segment_sum, spmm, spmm_t

__all__ = [
    "EdgeLayout",
    "edge_layout",
    "cached_edge_layout",
    "clear_layout_cache",
    "csr_supported",
    "spmm",
    "spmm_t",
    "sddmm",
    "segment_max",
    "segment_sum",
]

_LEGACY = LayoutCache()


def _deprecated(name: str) -> None:
    warnings.warn(
        f"graph_rma.nn.edge_layout.{name} is deprecated: use a graph_rma.nn.lean.LayoutCache (each lean "
        "layer owns one, layer.layout_cache)",
        DeprecationWarning,
        stacklevel=3,
    )


def cached_edge_layout(edge_index: Tensor, num_src: int, num_dst: int, self_loops: int = 0) -> EdgeLayout:
    """:meth:`LayoutCache.get <graph_rma.nn.lean.LayoutCache.get>` on this module's own cache (deprecated)."""
    _deprecated("cached_edge_layout")
    return _LEGACY.get(edge_index, num_src, num_dst, self_loops)


def clear_layout_cache() -> None:
    """Empty this module's cache (deprecated; the layers' caches are their own: ``layer.reset_cache()``)."""
    _deprecated("clear_layout_cache")
    _LEGACY.clear()
