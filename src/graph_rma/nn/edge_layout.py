"""Former home of the edges' CSR, now :mod:`graph_rma.nn.lean.csr`: its public names, re-exported.

The process-wide cache is gone: each lean layer owns a :class:`~graph_rma.nn.lean.CSRCache` (``layer.csr_cache``).
:func:`cached_edge_layout` and :func:`clear_layout_cache` remain for old callers, on one cache of their own, and
warn; so do ``EdgeLayout`` and ``edge_layout``, now :class:`~graph_rma.nn.lean.EdgeCSR` and
:func:`~graph_rma.nn.lean.edge_csr`.
"""

from __future__ import annotations

import warnings

from torch import Tensor

from .._deprecation import renamed
from .lean import CSRCache, EdgeCSR, csr_supported, sddmm, segment_max, segment_sum, spmm, spmm_t

__all__ = [  # EdgeLayout and edge_layout: through __getattr__ below, with a warning
    "EdgeCSR",
    "cached_edge_layout",
    "clear_layout_cache",
    "csr_supported",
    "spmm",
    "spmm_t",
    "sddmm",
    "segment_max",
    "segment_sum",
]

_LEGACY = CSRCache()


def _deprecated(name: str) -> None:
    warnings.warn(
        f"graph_rma.nn.edge_layout.{name} is deprecated: use a graph_rma.nn.lean.CSRCache (each lean "
        "layer owns one, layer.csr_cache)",
        DeprecationWarning,
        stacklevel=3,
    )


def cached_edge_layout(edge_index: Tensor, num_src: int, num_dst: int, self_loops: int = 0) -> EdgeCSR:
    """:meth:`CSRCache.get <graph_rma.nn.lean.CSRCache.get>` on this module's own cache (deprecated)."""
    _deprecated("cached_edge_layout")
    return _LEGACY.get(edge_index, num_src, num_dst, self_loops)


def clear_layout_cache() -> None:
    """Empty this module's cache (deprecated; the layers' caches are their own: ``layer.reset_cache()``)."""
    _deprecated("clear_layout_cache")
    _LEGACY.clear()


__getattr__ = renamed(  # the old names of the CSR and its builder, one release
    __name__, {"EdgeLayout": "graph_rma.nn.lean.csr:EdgeCSR", "edge_layout": "graph_rma.nn.lean.csr:edge_csr"}
)
