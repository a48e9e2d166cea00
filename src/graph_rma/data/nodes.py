r"""One entry point for node-classification graphs: Planetoid (Cora, CiteSeer) and the heterophilous Geom-GCN sets.

:func:`load_node_dataset` returns a :class:`~torch_geometric.data.Data` with ``x``, ``edge_index``, ``y`` and
one-dimensional boolean ``train_mask``, ``val_mask``, ``test_mask``, whatever the source, so that a task can take
``--dataset`` from :data:`NODE_DATASETS` without knowing where the graph comes from:

* ``Cora``, ``CiteSeer``: :func:`graph_rma.data.planetoid.load_planetoid`, the public split (only ``split=0``);
* ``Cornell``, ``Texas``, ``Wisconsin``, ``chameleon``, ``squirrel``, ``Actor``:
  :func:`graph_rma.data.heterophilous.load_heterophilous`, Geom-GCN's fixed split ``split`` (0-9);
* ``minesweeper``, ``tolokers``, ``chameleon_filtered``, ``chameleon_filtered_directed`` and any other graph in
  Platonov et al.'s format found under the root: :func:`graph_rma.data.platonov.load_platonov_all_splits`, their
  fixed split ``split`` (0-9).

:func:`load_node_graph` returns the graph with the masks of every split, as stored and shaped as PyG shapes them
(``[N]`` for Cora/CiteSeer's one split, ``[N, splits]`` for the others): the node task prepares it with its
protocol (:mod:`graph_rma.data.transforms`).

With ``normalize=True`` (the default) the features get the Cora pipeline's preprocessing,
:func:`graph_rma.data.planetoid.prepare_features`: each row divided by its sum,

.. math::
    \mathbf{x}_i \leftarrow \mathbf{x}_i \,/\, \max\big(\textstyle\sum_j x_{ij},\ 10^{-12}\big),

and stored as a sparse COO tensor (all-zero rows stay zero).
"""

from __future__ import annotations

from typing import Dict, Optional, Sequence, Tuple

from torch_geometric.data import Data

from .._errors import GraphRMAError
from .heterophilous import HETEROPHILOUS_DATASETS, NUM_SPLITS, load_heterophilous_all_splits, select_split
from .planetoid import load_planetoid, prepare_features
from .platonov import PLATONOV_DATASETS, available_platonov, load_platonov_all_splits, platonov_name
from .root import PathLike

__all__ = [
    "NODE_DATASETS",
    "PLANETOID_DATASETS",
    "num_splits",
    "canonical_name",
    "dataset_family",
    "load_node_graph",
    "load_node_dataset",
    "load_node_splits",
    "select_split",
]

PLANETOID_DATASETS: Tuple[str, ...] = ("Cora", "CiteSeer")
NODE_DATASETS: Tuple[str, ...] = PLANETOID_DATASETS + HETEROPHILOUS_DATASETS + PLATONOV_DATASETS


def canonical_name(name: str, root: Optional[PathLike] = None) -> str:
    """``name`` as :data:`NODE_DATASETS` spells it, or the file name of a graph in Platonov et al.'s format present
    under ``root`` (``$GRAPH_RMA_DATA/pyg``); a one-line ``GraphRMAError`` listing the choices otherwise."""
    for known in NODE_DATASETS:
        if known.lower() == str(name).lower() or (known in PLATONOV_DATASETS and known == _key(name)):
            return known
    key = _key(name)
    found = available_platonov(root) if key else []
    if key in found:
        return key
    extra = [n for n in found if n not in NODE_DATASETS]
    raise GraphRMAError(
        f"name: expected one of {NODE_DATASETS + tuple(extra)} (case-insensitive), or a graph in "
        f"Platonov et al.'s format at <root>/heterophilous_graph/<name>/raw/<name>.npz; got {name!r}"
    )


def _key(name: str) -> str:
    try:
        return platonov_name(name)
    except ValueError:
        return ""


def dataset_family(name: str, root: Optional[PathLike] = None) -> str:
    """``"planetoid"``, ``"geom_gcn"`` or ``"platonov"``: which loader reads graph ``name``."""
    name = canonical_name(name, root)
    if name in PLANETOID_DATASETS:
        return "planetoid"
    return "geom_gcn" if name in HETEROPHILOUS_DATASETS else "platonov"


def num_splits(name: str) -> int:
    """How many fixed splits dataset ``name`` has: 1 for Cora/CiteSeer (public split), 10 for the others."""
    return 1 if canonical_name(name) in PLANETOID_DATASETS else NUM_SPLITS


def load_node_graph(name: str, root: Optional[PathLike] = None) -> Data:
    """Graph ``name`` as stored, with its masks as PyG's dataset classes give them: ``[N]`` for a graph with one
    split (Cora and CiteSeer, the public split, as ``Planetoid``), ``[N, splits]`` for the others (as
    ``WikipediaNetwork``, ``WebKB``, ``Actor`` and ``HeterophilousGraphDataset``); dense features as the files hold
    them. ``root`` is the family's data folder (``planetoid`` for Cora/CiteSeer, ``pyg`` for the others).
    :func:`select_split` takes one split's ``[N]`` masks from either; :func:`num_splits` says how many there are."""
    name = canonical_name(name, root)
    family = dataset_family(name, root)
    if family == "planetoid":
        full = load_planetoid(name, root=root)[0]
        return Data(
            x=full.x,
            edge_index=full.edge_index,
            y=full.y,
            train_mask=full.train_mask,
            val_mask=full.val_mask,
            test_mask=full.test_mask,
        )
    if family == "geom_gcn":
        return load_heterophilous_all_splits(name, root=root)
    return load_platonov_all_splits(name, root=root)


def load_node_dataset(name: str, root: Optional[PathLike] = None, split: int = 0, normalize: bool = True) -> Data:
    """Load node-classification graph ``name`` (one of :data:`NODE_DATASETS`) with the masks of fixed split ``split``.

    Args:
        name: a name from :data:`NODE_DATASETS` (case-insensitive).
        root: the data folder of that family: the ``planetoid`` folder for Cora/CiteSeer, the ``pyg`` folder for
            the others; default ``$GRAPH_RMA_DATA/planetoid`` or ``$GRAPH_RMA_DATA/pyg``, else the cache.
        split: ``0 <= split < num_splits(name)``.
        normalize: row-normalise the features and store them sparse (:func:`prepare_features`); else the dense
            0/1 features as PyG reads them.

    Returns:
        :class:`~torch_geometric.data.Data` with ``x``, ``edge_index``, ``y``, ``train_mask``, ``val_mask``,
        ``test_mask`` (``[N]`` booleans).

    Raises:
        GraphRMAError: unknown ``name`` or ``split`` out of range.
        DataNotFoundError: raw files missing or corrupt (see the family's loader).
    """
    return load_node_splits(name, [split], root=root, normalize=normalize)[split]


def load_node_splits(
    name: str, splits: Sequence[int], root: Optional[PathLike] = None, normalize: bool = True
) -> Dict[int, Data]:
    """``{split: load_node_dataset(name, root, split, normalize)}`` for every split in ``splits``, reading and
    verifying the files and preparing the features once (the splits share ``x``, ``edge_index`` and ``y``)."""
    name = canonical_name(name, root)
    n = num_splits(name)
    for split in splits:
        if isinstance(split, bool) or not isinstance(split, int) or not 0 <= split < n:
            raise GraphRMAError(f"split: expected an int in [0, {n}) for {name}, got {split!r}")
    base = load_node_graph(name, root=root)
    if normalize:
        base.x = prepare_features(base.x)
    return {split: select_split(base, split) for split in splits}
