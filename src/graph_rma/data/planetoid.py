r"""The Planetoid citation graphs (Cora, CiteSeer) with the public 140/500/1000-style split.

The raw files are the ones PyG's :class:`torch_geometric.datasets.Planetoid` reads
(``<root>/<Name>/raw/ind.<name>.{x,tx,allx,y,ty,ally,graph,test.index}``), looked for in

1. ``root`` given by the caller,
2. else ``$GRAPH_RMA_DATA/planetoid``,
3. else the cache folder, filled by a download from the canonical source (the ``kimiyoung/planetoid``
   repository, which PyG also downloads from), each file checked against its SHA-256.

Every raw file is checked against its known SHA-256 before use, so a missing, truncated or corrupt file gives an
error naming that file. The raw files are pickles; only files with the canonical checksums are unpickled.

The graph is built in memory from the verified raw files with PyG's own reader
(:func:`torch_geometric.io.planetoid.read_planetoid_data`, what :class:`~torch_geometric.datasets.Planetoid`'s
``process()`` runs). Nothing is cached: PyG's ``processed/data.pt`` cache is loaded with a
``weights_only=False`` fallback, i.e. a pickle placed there would run code, so this loader neither writes nor reads
one, and never writes into the data folder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict, Optional

import torch
from torch_geometric.data import Data, InMemoryDataset

from .._errors import GraphRMAError
from .root import DataNotFoundError, PathLike, download_verified, missing_data_message, resolve_root, verify_checksums

__all__ = [
    "PLANETOID_URL",
    "PLANETOID_SHA256",
    "PlanetoidDataset",
    "raw_file_names",
    "verify_raw",
    "load_planetoid",
    "prepare_features",
]

PLANETOID_URL = "https://github.com/kimiyoung/planetoid/raw/master/data"

# sha256 of the canonical files (kimiyoung/planetoid @ af6abf4, byte-identical in tkipf/gcn and PetarV-/GAT).
PLANETOID_SHA256: Dict[str, Dict[str, str]] = {
    "Cora": {
        "x": "23cfa55d91c6f624233f5eb7b6e3f141f1bd2b2ae39608a63cf5d084bb27baab",
        "tx": "b9afbaa4a400df991f6f02ef677e1e44da55ffc04801fd02f9e673987829226a",
        "allx": "9419ba2f26f5c35243db64aba110e0f35a04851609e0dc5433450676ca6b8543",
        "y": "94465c14eb53e04ca262198dcbb2521ee8af60fb3f3d546cd6ca24a511b0e7d1",
        "ty": "41f5ac76596a1699cc33f53084a2419e92961c42bb75f36fc38e616d348532ad",
        "ally": "2b998f5cc7fedc86e7f97ca2498f47a1ffc1462c29e2d578b23bf3f62b6e7d71",
        "graph": "58f13302f39dde8852dad6fe6d15b89b077b6d7f837626bce671ef80344b383d",
        "test.index": "297ce89af2b51a6a194181c7dbe1796c6a1cf9cd9349a88383b1b1e227867875",
    },
    "CiteSeer": {
        "x": "d20de19150741e555de0ed037195630fc194114ebc7fd72ced62810148aa22f6",
        "tx": "539a8906a2da97628d212f2fdd668c109a8b3f0d36574b59e5d3fd5b5303da21",
        "allx": "2ac30345d95c9ec933a817ee0bdd6a5f077f8c184a20e696910192d534414668",
        "y": "8ba87e515d8e3ee3cf52f6d2c5b86aa73f11ecad825a808455209ec26cd54924",
        "ty": "55e5bd1ba1e733a04598753ad1a8d57957f4b8f89e74519f41f4f4938767e4ce",
        "ally": "f704b2d986dde6c2669934de1f3ae5696a6cf9455c0f6b2646a2d135ea0a1c95",
        "graph": "d79a4ef9d3e7169aee8946145f6b7306e35bc79bffad26346cfb94e10e9912a7",
        "test.index": "2af990671580b6b2df5d158d1038f8292e30c9cd821b5453f399659b25b723d4",
    },
}


def _canonical_name(name: str) -> str:
    for key in PLANETOID_SHA256:
        if key.lower() == str(name).lower():
            return key
    raise GraphRMAError(f"name: expected one of {sorted(PLANETOID_SHA256)} (case-insensitive), got {name!r}")


def raw_file_names(name: str) -> Dict[str, str]:
    """``{file name: sha256}`` of dataset ``name``'s raw files, e.g. ``ind.cora.x``."""
    name = _canonical_name(name)
    return {f"ind.{name.lower()}.{ext}": digest for ext, digest in PLANETOID_SHA256[name].items()}


def verify_raw(raw_dir: PathLike, name: str) -> None:
    """Raise :class:`DataNotFoundError` naming the first raw file of ``name`` that is missing, truncated or corrupt."""
    verify_checksums(
        raw_dir,
        raw_file_names(name),
        lambda files: _missing(Path(raw_dir), name, files),
        lambda f: f"{PLANETOID_URL}/{f}",
    )


def _missing(raw_dir: Path, name: str, files, hint: str = "") -> str:
    # Name the files relative to the planetoid folder, which is what root= / $GRAPH_RMA_DATA/planetoid point at.
    planetoid = raw_dir.parent.parent
    return missing_data_message(
        _canonical_name(name), planetoid, [f"{raw_dir.parent.name}/raw/{f}" for f in files], hint, family="planetoid"
    )


def _download_missing(raw_dir: Path, name: str) -> None:
    missing = [f for f in raw_file_names(name) if not (raw_dir / f).is_file()]
    if not missing:
        return
    try:
        for fname in missing:
            download_verified(f"{PLANETOID_URL}/{fname}", raw_dir / fname, raw_file_names(name)[fname])
    except (DataNotFoundError, OSError) as exc:
        still = [f for f in missing if not (raw_dir / f).is_file()]
        raise DataNotFoundError(_missing(raw_dir, name, still, hint=f"(download error: {exc})")) from None


class PlanetoidDataset(InMemoryDataset):
    """One Planetoid graph held in memory, as :class:`torch_geometric.datasets.Planetoid` with ``split="public"``
    gives it (``dataset[0]``, ``num_features``, ``num_classes``, ``name``), without any file cache."""

    def __init__(self, name: str, data: Data) -> None:
        super().__init__(None)
        self.name = name
        self.data, self.slices = self.collate([data])

    def __repr__(self) -> str:
        return f"{self.name}()"


def load_planetoid(name: str = "Cora", root: Optional[PathLike] = None, download: bool = True) -> PlanetoidDataset:
    """Load Cora or CiteSeer with PyG's public split (Cora: 140 train / 500 validation / 1000 test nodes).

    Args:
        name: ``"Cora"`` or ``"CiteSeer"`` (case-insensitive).
        root: the planetoid folder holding ``<Name>/raw/``; default ``$GRAPH_RMA_DATA/planetoid``, else the cache.
        download: fetch missing raw files from the canonical source (checksum-verified) into ``root``.
            Files are only downloaded into a folder that lacks them; existing files are never overwritten, and a
            failed download creates no folder.

    Returns:
        A :class:`PlanetoidDataset` (``dataset[0]`` is the graph with ``train_mask``, ``val_mask``,
        ``test_mask``), built from the verified raw files; identical to what PyG's ``Planetoid`` processes.

    Raises:
        DataNotFoundError: a raw file is missing (and could not be downloaded), truncated or corrupt; the message
            names the file and where it was looked for.
    """
    from torch_geometric.io.planetoid import read_planetoid_data

    name = _canonical_name(name)
    raw_dir = resolve_root("planetoid", root) / name / "raw"
    if download:
        _download_missing(raw_dir, name)
    verify_raw(raw_dir, name)
    return PlanetoidDataset(name, read_planetoid_data(str(raw_dir), name))


def prepare_features(x: torch.Tensor) -> torch.Tensor:
    """Row-normalise the bag-of-words features (the GAT paper's preprocessing) and store them sparse."""
    x = x / x.sum(dim=1, keepdim=True).clamp(min=1e-12)
    return x.to_sparse().coalesce()
