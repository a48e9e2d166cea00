"""Dataset loaders. Each one resolves its folder with :func:`graph_rma.data.root.resolve_root`."""

from .root import DataNotFoundError, cache_dir, download_verified, resolve_root

__all__ = ["DataNotFoundError", "cache_dir", "download_verified", "resolve_root"]
