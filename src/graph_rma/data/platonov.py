r"""Platonov et al.'s heterophilous graphs (ICLR 2023, "A critical look at the evaluation of GNNs under heterophily")
in their ``.npz`` format, with their 10 fixed splits.

================================  ======  ==========  ========  =======  ========  =====================
graph                             nodes   edges       features  classes  splits    metric
================================  ======  ==========  ========  =======  ========  =====================
``minesweeper``                   10,000  39,402      7         2        50/25/25  ROC AUC
``tolokers``                      11,758  519,000     10        2        50/25/25  ROC AUC
``chameleon_filtered``            890     8,854       2,325     5        48/32/20  accuracy
``chameleon_filtered_directed``   890     13,584      2,325     5        48/32/20  accuracy
================================  ======  ==========  ========  =======  ========  =====================

``edges`` counts the rows of the file's ``edges`` array: each undirected edge once (the ``_directed`` file: each
original link once). Any other graph of the same benchmark works too (``roman_empire``, ``amazon_ratings``,
``questions``, ...): put its file at ``<root>/heterophilous_graph/<name>/raw/<name>.npz``, the layout PyG's
:class:`~torch_geometric.datasets.HeterophilousGraphDataset` uses, and load it by name (``-`` and ``_`` are the
same; case-insensitive).

A file holds ``node_features`` (float [N, F]), ``node_labels`` (int [N]), ``edges`` (int [E, 2]) and
``train_masks``/``val_masks``/``test_masks`` (bool [10, N]; every split needs training, validation and test nodes,
and no node may be in two of them);
it is read with ``numpy.load(allow_pickle=False)``, so nothing in it can run code, and nothing is cached or written
beside it. The graph is returned **as stored**
(``edge_index = edges.T``); PyG's class and the paper's code make it undirected, which is the ``edges="undirected"``
option of :mod:`graph_rma.tasks.protocols` (``tests/test_platonov.py`` checks that the two agree).

Where the files are looked for (``root`` is the ``pyg`` folder that holds ``heterophilous_graph/``): ``root``, else
``$GRAPH_RMA_DATA/pyg``, else the cache, filled by a download from the authors' repository at
:data:`PLATONOV_COMMIT` for the graphs whose SHA-256 is known (:data:`PLATONOV_SHA256`), checked before use.
"""

from __future__ import annotations

import math
import os
import zipfile
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np
import torch
from torch_geometric.data import Data

from .._errors import GraphRMAError
from .root import ENV_VAR, DataNotFoundError, PathLike, download_verified, missing_data_message, resolve_root, sha256sum

__all__ = [
    "PLATONOV_DATASETS",
    "PLATONOV_SHA256",
    "PLATONOV_URL",
    "platonov_name",
    "available_platonov",
    "load_platonov_all_splits",
]

PLATONOV_COMMIT = "a431395582e929d88271309716bea4fe24ce6318"
PLATONOV_URL = f"https://raw.githubusercontent.com/yandex-research/heterophilous-graphs/{PLATONOV_COMMIT}/data"
FOLDER = "heterophilous_graph"

#: SHA-256 of the files this package knows (the authors' repository at :data:`PLATONOV_COMMIT`).
PLATONOV_SHA256: Dict[str, str] = {
    "minesweeper": "e664c8dacf1e8ac466c2c09ed4b237bd2c5541f47a6eae9c6092cb87f16412b3",
    "tolokers": "dacf3ac94cec53d03cd2adb5255c08b33dee1656c33ca8164a464bd9450a1667",
    "chameleon_filtered": "bf46f07e1fb5249280447e5fe3100f3e82fc4b93ad1e13ffcfdec924b6ac0bb5",
    "chameleon_filtered_directed": "5a2d40701407188f1661d37a326484b49cc15251e0dedaa7bd380873dac80f21",
}
#: The graphs known by name (any other is found on disk by :func:`available_platonov`).
PLATONOV_DATASETS: Tuple[str, ...] = tuple(PLATONOV_SHA256)
_KEYS = ("node_features", "node_labels", "edges", "train_masks", "val_masks", "test_masks")


def platonov_name(name: str) -> str:
    """The file name of graph ``name``: lower case, ``-`` as ``_`` (``"Roman-Empire"`` -> ``"roman_empire"``)."""
    if not isinstance(name, str) or not name.strip():
        raise GraphRMAError(f"name: expected a graph name such as 'minesweeper', got {name!r}")
    key = name.strip().lower().replace("-", "_")
    if not all(c.isalnum() or c == "_" for c in key):
        raise GraphRMAError(f"name: expected letters, digits, '-' or '_', got {name!r}")
    return key


def _path(pyg_root: Path, key: str) -> Path:
    return pyg_root / FOLDER / key / "raw" / f"{key}.npz"


def available_platonov(root: Optional[PathLike] = None) -> List[str]:
    """The graphs of this format under ``root`` (default ``$GRAPH_RMA_DATA/pyg``): the known ones that are present
    and any ``heterophilous_graph/<name>/raw/<name>.npz``."""
    base = resolve_root("pyg", root) / FOLDER
    if not base.is_dir():
        return []
    return sorted(p.name for p in base.iterdir() if (p / "raw" / f"{p.name}.npz").is_file())


def _fail(key: str, pyg_root: Path, hint: str = "") -> DataNotFoundError:
    known = (
        ""
        if key in PLATONOV_SHA256
        else (
            f" ('{key}' is not one of the graphs this package downloads, {', '.join(PLATONOV_DATASETS)}: put the file "
            f"from the authors' repository there yourself)"
        )
    )
    return DataNotFoundError(
        missing_data_message(key, pyg_root, [f"{FOLDER}/{key}/raw/{key}.npz"], hint + known, family="pyg")
    )


_ROLES = {"train_masks": "training", "val_masks": "validation", "test_masks": "test"}


def _check_sizes(f, path: Path) -> None:
    """Refuse an array whose ``.npy`` header claims more data than its member of the archive holds (before numpy
    allocates it: a forged header would otherwise end in a ``MemoryError``)."""
    for k in _KEYS:
        member = f"{k}.npy" if f"{k}.npy" in f.zip.namelist() else k
        with f.zip.open(member) as m:
            version = np.lib.format.read_magic(m)
            read_header = (
                np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            )
            shape, _, dtype = read_header(m)
        need = math.prod(shape) * dtype.itemsize
        have = f.zip.getinfo(member).file_size
        if need > have:
            raise GraphRMAError(
                f"{path}: {k} claims shape {shape} of {dtype} ({need} bytes), but the file holds "
                f"{have} bytes for it (a damaged or forged .npy header)"
            )


def _check_values(path: Path, arrays: Dict[str, np.ndarray]) -> None:
    """Refuse values that the conversion to the graph's dtypes would change without a word: features that are not
    numbers (strings), node ids and labels that are not whole numbers (``1.7`` would become ``1``), masks other
    than 0/1."""
    if arrays["node_features"].dtype.kind not in "biuf":
        raise GraphRMAError(
            f"{path}: node_features: expected numbers, got dtype {arrays['node_features'].dtype} "
            f"({_DTYPE_KINDS.get(arrays['node_features'].dtype.kind, 'not numbers')})"
        )
    for k, what in (("edges", "node ids"), ("node_labels", "class labels")):
        a = arrays[k]
        if a.dtype.kind not in "biuf":
            raise GraphRMAError(
                f"{path}: {k}: expected whole numbers ({what}), got dtype {a.dtype} "
                f"({_DTYPE_KINDS.get(a.dtype.kind, 'not numbers')})"
            )
        if a.dtype.kind == "f":
            bad = np.argwhere(~np.isfinite(a) | (a != np.round(a)))
            if bad.size:
                where = tuple(int(v) for v in bad[0])
                raise GraphRMAError(
                    f"{path}: {k} holds {len(bad)} value(s) that are not whole numbers ({what}; first: "
                    f"{k}[{', '.join(map(str, where))}] = {a[where].item()!r})"
                )
    for k in _ROLES:
        m = arrays[k]
        if m.dtype != bool and not (m.dtype.kind in "iuf" and np.isin(m, (0, 1)).all()):
            raise GraphRMAError(f"{path}: {k}: expected booleans (or 0/1), got values other than 0/1 of {m.dtype}")


_DTYPE_KINDS = {"U": "text", "S": "bytes", "c": "complex numbers", "M": "dates", "m": "time spans", "V": "records"}


def _check_disjoint(path: Path, masks: Dict[str, torch.Tensor]) -> None:
    """Refuse a split that puts a node in two of its training, validation and test sets (a test node trained on,
    or a model selected on test nodes: a leak)."""
    pairs = (("train_masks", "test_masks"), ("train_masks", "val_masks"), ("val_masks", "test_masks"))
    for a, b in pairs:
        both = masks[a] & masks[b]  # [N, splits]
        if both.any():
            split = int(both.any(dim=0).nonzero()[0])
            nodes = both[:, split].nonzero().flatten()
            raise GraphRMAError(
                f"{path}: split {split} puts {nodes.numel()} node(s) in both its {_ROLES[a]} and {_ROLES[b]} sets "
                f"(first: node {int(nodes[0])}; {a} and {b} must not overlap)"
            )


def _read(path: Path, key: str) -> Data:
    try:
        with open(path, "rb") as fh:
            magic = fh.read(6)
        if magic == b"\x93NUMPY":  # numpy.save's one array, not numpy.savez's archive of named arrays
            raise GraphRMAError(
                f"{path}: a .npy file (one array), not a .npz archive of the named arrays "
                f"{', '.join(_KEYS)} (numpy.savez writes one)"
            )
        f = np.load(path, allow_pickle=False)
        if not isinstance(f, np.lib.npyio.NpzFile):
            raise GraphRMAError(f"{path}: not a .npz archive of named arrays ({', '.join(_KEYS)})")
        with f:
            missing = [k for k in _KEYS if k not in f.files]
            if missing:
                raise GraphRMAError(f"{path}: not a heterophilous-graphs .npz file (missing {', '.join(missing)})")
            _check_sizes(f, path)
            arrays = {k: f[k] for k in _KEYS}
    except (OSError, zipfile.BadZipFile, EOFError) as exc:
        raise GraphRMAError(f"{path}: unreadable .npz file ({exc})") from None
    except MemoryError:  # a header within the size of its member that still does not fit in memory
        raise GraphRMAError(f"{path}: an array is too large to load into memory") from None
    except ValueError as exc:  # object arrays (pickles) are refused by allow_pickle=False
        if str(path) in str(exc):
            raise
        raise GraphRMAError(f"{path}: unreadable .npz file ({exc})") from None
    _check_values(path, arrays)
    x, y, edges = arrays["node_features"], arrays["node_labels"], arrays["edges"]
    n = x.shape[0] if x.ndim == 2 else -1
    if x.ndim != 2 or y.shape != (n,) or edges.ndim != 2 or edges.shape[1] != 2:
        raise GraphRMAError(
            f"{path}: expected node_features [N, F], node_labels [N] and edges [E, 2], got "
            f"{x.shape}, {y.shape} and {edges.shape}"
        )
    if n == 0:
        raise GraphRMAError(f"{path}: the graph has no nodes (node_features has shape {x.shape})")
    if edges.size and (edges.min() < 0 or edges.max() >= n):
        raise GraphRMAError(f"{path}: edges name nodes outside [0, {n})")
    masks = {}
    for k in ("train_masks", "val_masks", "test_masks"):
        m = arrays[k]
        if m.ndim != 2 or m.shape[1] != n:
            raise GraphRMAError(f"{path}: expected {k} [splits, {n}], got {m.shape}")
        if m.shape[0] == 0:
            raise GraphRMAError(
                f"{path}: {k} holds no split (shape {m.shape}); expected [splits, {n}] with splits >= 1"
            )
        empty = np.flatnonzero(~m.astype(bool).any(axis=1))
        if empty.size:
            raise GraphRMAError(
                f"{path}: split {int(empty[0])} has no {_ROLES[k]} node ({k}[{int(empty[0])}] is all False)"
            )
        masks[k] = torch.from_numpy(m.astype(bool)).t().contiguous()  # [N, splits], as PyG's Geom-GCN masks
    if len({m.shape[1] for m in masks.values()}) != 1:
        raise GraphRMAError(f"{path}: the three mask arrays have different numbers of splits")
    _check_disjoint(path, masks)
    labels = torch.from_numpy(y.astype(np.int64))
    if labels.numel() and labels.min() < 0:
        raise GraphRMAError(f"{path}: negative class labels")
    with np.errstate(over="ignore"):  # a value beyond float32's range is refused below, naming it
        features = x.astype(np.float32)
    bad = np.argwhere(~np.isfinite(features))
    if bad.size:
        i, j = (int(v) for v in bad[0])
        raise GraphRMAError(
            f"{path}: node_features holds {len(bad)} value(s) that are not finite float32 numbers (first: "
            f"node_features[{i}, {j}] = {x[i, j].item()!r}; float32 holds magnitudes up to 3.4e38)"
        )
    return Data(
        x=torch.from_numpy(features),
        edge_index=torch.from_numpy(edges.astype(np.int64)).t().contiguous(),
        y=labels,
        train_mask=masks["train_masks"],
        val_mask=masks["val_masks"],
        test_mask=masks["test_masks"],
        num_nodes=n,
    )


def load_platonov_all_splits(name: str, root: Optional[PathLike] = None, download: bool = True) -> Data:
    r"""Graph ``name`` with the masks of all its splits.

    Args:
        name: a graph of this format (``minesweeper``, ``tolokers``, ``chameleon_filtered``,
            ``chameleon_filtered_directed``, or any other whose file is present; ``-`` and ``_`` are the same).
        root: the ``pyg`` folder that holds ``heterophilous_graph/``; default ``$GRAPH_RMA_DATA/pyg``, else the cache.
        download: when neither ``root`` nor ``$GRAPH_RMA_DATA`` is set and the file is missing, download it
            (only graphs with a known SHA-256).

    Returns:
        :class:`~torch_geometric.data.Data` with ``x`` ``[N, F]`` float, ``edge_index`` ``[2, E]`` as stored,
        ``y`` ``[N]`` and boolean ``train_mask``/``val_mask``/``test_mask`` of shape ``[N, splits]``.

    Raises:
        DataNotFoundError: the file is missing (and could not be downloaded) or its SHA-256 is not the known one.
        GraphRMAError: a bad name, a file that is not in this format (a ``.npy`` file, a header claiming more data than
            the file holds, no nodes, no split), or a split whose training, validation or test mask is empty.
        GraphRMAError: values that loading would change (features that are not numbers or not finite in float32,
            node ids or labels that are not whole numbers, masks other than 0/1), or a split that puts a node in two
            of its training, validation and test sets; each names the file and the array.
    """
    key = platonov_name(name)
    pyg_root = resolve_root("pyg", root)
    path = _path(pyg_root, key)
    explicit = root is not None or bool(os.environ.get(ENV_VAR))
    if not path.is_file():
        if download and not explicit and key in PLATONOV_SHA256:
            try:
                download_verified(f"{PLATONOV_URL}/{key}.npz", path, PLATONOV_SHA256[key])
            except DataNotFoundError as exc:
                raise _fail(key, pyg_root, f"(download error: {exc})") from None
        else:
            raise _fail(key, pyg_root)
    if key in PLATONOV_SHA256:
        got = sha256sum(path)
        if got != PLATONOV_SHA256[key]:
            raise DataNotFoundError(
                f"{path}: truncated or corrupt file (sha256 {got}, expected "
                f"{PLATONOV_SHA256[key]}); replace it with {PLATONOV_URL}/{key}.npz"
            )
    return _read(path, key)
