r"""Heterophilous node-classification graphs of Geom-GCN (Pei et al., ICLR 2020) with their 10 fixed splits.

============  ======  =======  ========  =======  ==============================================
dataset       nodes   edges    features  classes  PyG class, raw folder under ``root``
============  ======  =======  ========  =======  ==============================================
Cornell       183     298      1703      5        ``WebKB``, ``webkb/cornell/raw``
Texas         183     325      1703      5        ``WebKB``, ``webkb/texas/raw``
Wisconsin     251     515      1703      5        ``WebKB``, ``webkb/wisconsin/raw``
chameleon     2277    36101    2325      5        ``WikipediaNetwork``, ``wikipedia_network/chameleon/geom_gcn/raw``
squirrel      5201    217073   2089      5        ``WikipediaNetwork``, ``wikipedia_network/squirrel/geom_gcn/raw``
Actor         7600    30019    932       5        ``Actor``, ``actor/raw`` (file prefix ``film``)
============  ======  =======  ========  =======  ==============================================

``edges`` counts the directed entries of PyG's coalesced ``edge_index`` (kept as stored: directed, with self-loops).
Each raw folder holds ``out1_node_feature_label.txt``, ``out1_graph_edges.txt`` and the split files
``<prefix>_split_0.6_0.2_<i>.npz`` (``i = 0..9``; despite the name the splits are 48/32/20 % train/val/test).

Where the files are looked for (``root`` is the ``pyg`` folder that holds ``webkb/``, ``wikipedia_network/`` and
``actor/``):

1. ``root`` given by the caller,
2. else ``$GRAPH_RMA_DATA/pyg``,
3. else the cache folder (``$GRAPH_RMA_CACHE`` or ``~/.cache/graph_rma``, ``data/pyg``), filled by a download from
   the Geom-GCN repository at the commit PyG pins (:data:`GEOM_GCN_URL`), each file checked against its SHA-256.

Files are only ever downloaded into that cache folder, never into a folder named by ``root`` or
``$GRAPH_RMA_DATA``: a missing file there is a :class:`~graph_rma.data.root.DataNotFoundError`.

Nothing is written anywhere, and nothing is unpickled. The verified raw files are parsed directly, exactly as PyG's
``WebKB``, ``WikipediaNetwork(geom_gcn_preprocess=True)`` and ``Actor`` parse them (``tests/test_heterophilous.py``
checks the tensors against those classes), without PyG's ``processed/`` cache: PyG loads that cache with a
``weights_only=False`` fallback, so a planted file there could run code. The split files are read with
``numpy.load(allow_pickle=False)``. Parsing squirrel's 22 MB text takes a few seconds; the others well under one.
"""

from __future__ import annotations

import os
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np
import torch
from torch_geometric.data import Data
from torch_geometric.utils import coalesce

from .._errors import GraphRMAError
from .root import (
    ENV_VAR,
    DataNotFoundError,
    PathLike,
    download_verified,
    missing_data_message,
    resolve_root,
    verify_checksums,
)

__all__ = [
    "GEOM_GCN_URL",
    "HETEROPHILOUS_DATASETS",
    "HETEROPHILOUS_SHA256",
    "NUM_SPLITS",
    "load_heterophilous_all_splits",
    "select_split",
    "raw_file_names",
    "verify_raw",
    "load_heterophilous",
]

NUM_SPLITS = 10

# The commit that PyG's WikipediaNetwork pins (HEAD of master, 2021-01-28); WebKB and Actor download from master.
GEOM_GCN_COMMIT = "f1fc0d14b3b019c562737240d06ec83b07d16a8f"
GEOM_GCN_URL = f"https://raw.githubusercontent.com/graphdml-uiuc-jlu/geom-gcn/{GEOM_GCN_COMMIT}"


@dataclass(frozen=True)
class _Spec:
    name: str  # display name (the one in HETEROPHILOUS_DATASETS)
    family: str  # folder under the pyg root: webkb, wikipedia_network, actor
    inner: str  # raw folder relative to the PyG root: "<name>/raw", "<name>/geom_gcn/raw" or "raw"
    upstream: str  # geom-gcn's name, also the split files' prefix ("film" for Actor)

    @property
    def raw_rel(self) -> str:
        return f"{self.family}/{self.inner}"


_SPECS: Dict[str, _Spec] = {
    "cornell": _Spec("Cornell", "webkb", "cornell/raw", "cornell"),
    "texas": _Spec("Texas", "webkb", "texas/raw", "texas"),
    "wisconsin": _Spec("Wisconsin", "webkb", "wisconsin/raw", "wisconsin"),
    "chameleon": _Spec("chameleon", "wikipedia_network", "chameleon/geom_gcn/raw", "chameleon"),
    "squirrel": _Spec("squirrel", "wikipedia_network", "squirrel/geom_gcn/raw", "squirrel"),
    "actor": _Spec("Actor", "actor", "raw", "film"),
}

HETEROPHILOUS_DATASETS: Tuple[str, ...] = tuple(s.name for s in _SPECS.values())

# sha256 of the raw files in PyG's raw_file_names order: features+labels, edges, splits 0..9 (geom-gcn @ f1fc0d1;
# chameleon's and squirrel's feature files rebuilt byte-identically, see datasets/heterophilous.md).
# Cornell's feature file is byte-identical to Texas's upstream (same digest below).
HETEROPHILOUS_SHA256: Dict[str, Tuple[str, ...]] = {
    "cornell": (
        "cf5a3ca346cdd1210b8342e22517fcbbdae658065b7a3145f59350e50e6236a3",  # out1_node_feature_label.txt
        "c4522a00cc40873c8a04a3a07c49e24a48a507eb284ac9c9f2d3e0590351bbb7",  # out1_graph_edges.txt
        "14022a1e19ec7fc0a07a2c06a785a2f9dc52809dbcd1c14fc318f7800675d73f",  # split 0
        "5568fa27e968a724c92211bf97026a36a08893cf94b218043e49b4c973c35cfb",  # split 1
        "763fc1f423395e4172617fa5b6bc0d7adad2241e5fedd1a4f0a098a67f9dc8e9",  # split 2
        "4334321cd9ec42de9d51107fb9a6dc310512e0921bc1cff0f390301ee37315fa",  # split 3
        "2b6b3ef396f4dc7fcdc276fb16b88bb87409b25879dd672b3a506eca844dd8d7",  # split 4
        "1a40ef8b20aa9e1aa850e1abdaba3efac1f66c98ef2c6a59eadefa21136ece6b",  # split 5
        "bcddf4ab59eae4c7d47b8a6cec9025a54ec0e6d3f3bdcd7678e201f25ace4642",  # split 6
        "2b497e12dfc123d7e7c9bb4fc4a82b5bee18409e109a3e3a04da439cacec964d",  # split 7
        "5c4e110d252d7ad156b2e4cd34b6dbd1cecbcc1755f8d72e932cc2a54f2b643c",  # split 8
        "80f1531807194d301affbf6f879a4ab4f56a19bdccb62d192e3ecd1b5275f052",  # split 9
    ),
    "texas": (
        "cf5a3ca346cdd1210b8342e22517fcbbdae658065b7a3145f59350e50e6236a3",  # out1_node_feature_label.txt
        "0fe85183243a78cbee9b85a684f8240963d04d1020d10e9cd2b8cfb25e33b476",  # out1_graph_edges.txt
        "7ba77bf7a8856fcc0ab15623a611b8cdce994e820f577da914123fb4f45272b0",  # split 0
        "21cc244a96e3c51ad7993afb4dd227f90e467d82b964bb42d7d9fc500a6ef87f",  # split 1
        "b9e96a699ccf3a4c31ffbd03e52b25570889833425d20fa44e06c37b327cf61e",  # split 2
        "1a7deeb1285009789d5e6045d7e39f7d019c9223d9a75a2b7ce5e26d33b51f63",  # split 3
        "b5419ff3fe31adcae66fdb085d4f47d0b188e9436ab59f438632af969aafc674",  # split 4
        "68405fd1b9ff6105d99717220ecbd198785e338bf4a73abee722bbc9703d2667",  # split 5
        "8ad78b973164e70e5ac0d282e79adcbc6006e373909fbdfd72a13131e09040b8",  # split 6
        "a84bcbf997365bddf5fdf72ed49dc7e435e475f8c6210f8cdee7c8581a2bd6df",  # split 7
        "65ba65f296f91d40d2d7d3c9369b67415094a7e254c6eee48cd6d6531c586fdf",  # split 8
        "4306981d654ad8835c000c1f73fb6c1e60dfe99e26c13a6073f3b0f4cc3ce6ee",  # split 9
    ),
    "wisconsin": (
        "a32b0aa38d42f0d36841e8a8cb646d197f0ff33a182ac75a2b4476aeed3c7e4b",  # out1_node_feature_label.txt
        "ebd213511c88fce1eda450c2f920600c4b8cbb38f02384856bcc47c6ec1807ae",  # out1_graph_edges.txt
        "f66f641e191d35d491cd3b63d6c2cd93c4b436da398984b44c19a8d4d7e7b1a5",  # split 0
        "534aeb97266bd5a85a8587adf8eebad3f2e001c1240610f24b62c0ad0c2466ee",  # split 1
        "047a5b641778ec3a4c76055fd7f18ecb2424c0952f20dfff7e1b17749d8acbdd",  # split 2
        "706c27b4c51d046c0316f1e915f093e4a1fff48b3436b3e7c421eab596a99e77",  # split 3
        "7ee813605eec086457aaff022cf3837f2f893fcf8bd37e3a8d2ff0c80e4c4f87",  # split 4
        "8094ac2bdaf2cbea8f7a48df66a0800c809b2fd5942740e6b0441b660d3a0dd5",  # split 5
        "c423a8deea9b18f9ecb6cfd703578e2159df167de01fe7e6195b88995010252d",  # split 6
        "57ad808c8d4dd94dc4404124370bbcebb3dcc597c2bea6457bf05f220adf1527",  # split 7
        "27d4d62a2a6aea2cdc399302237512ab0d64fb0c84e648112f97c5896274e42f",  # split 8
        "3c149cd124a19021031609e0d7743a7be59aae4f88c8d38410138e8f06f5daaf",  # split 9
    ),
    "chameleon": (
        "5fd29736ff31b43a1bfcf305bc8b4cffc3103fb0957667976b2ea0f78aedcf5b",  # out1_node_feature_label.txt
        "45ac593de9207470090230c8fd76beeb2f60b5371a9be088e8bf31e7f0619a4b",  # out1_graph_edges.txt
        "36605525b69be4e7df5b31fe6a1d044288c6ebf9f9f0514ca151f6a36afc5e8b",  # split 0
        "d0779d5a1bedf1967d394468a52c0175fb00595d361fba897faf73322386c952",  # split 1
        "86ad0d827bf4301dff830598fc0b70d0dd8689c5b4d72dab1d87a6c1970c4c6e",  # split 2
        "37b3e994adf3afc55e16b617ed05af4e3ce308800755839084d77eced0528e9d",  # split 3
        "f6b1d067b2b330132839d8b6120077bdc6cf759f7ce421f881a02e2953ec4596",  # split 4
        "e7661834275c826692510cea0457b18b2c1ee38771f178d06e701b97541a1f6d",  # split 5
        "16648d1197c1d3a2dec385346212c382030b0d5a8c997f4255aa2afa68a6b174",  # split 6
        "61adcc53846becefecd466a5364dda23b983d387d1ac5d58c6e24d080c0fcba7",  # split 7
        "7076ad5341a8218b1f5b6eccf9cfd15d28286ea11ef5c06eeee77af24ff2bf63",  # split 8
        "743c4f813bf6130398a6511eb9ff07d2366c73bd6c7fddaf226a3f9e2917e0e7",  # split 9
    ),
    "squirrel": (
        "ac15ab755983717a187992eef8ce2017aae33ea444fd655b07e4662690dcc03a",  # out1_node_feature_label.txt
        "453d8e96754d68e2ab0a7ebb56f93506b59531d95abaec7a2b46fe1eae7c39cd",  # out1_graph_edges.txt
        "f112b88d3354e86d164d4d915b6a1f695c10f0e01e3e6b9893fc7b09bb93191d",  # split 0
        "2486c687c8befb55930a6237f76f1d86ce2ba345782eda6157f4e752d05f304f",  # split 1
        "d62ff83862ad96022d3400dfc9b7ca405834ca62767319d97c36b3f02db978c0",  # split 2
        "af3d90e0b2718ac7417e10e8b5b382443667412e846cabc3cc4e4a592f4cedae",  # split 3
        "fbe848298bb72b88db0704050cf216e2a93c916540d577906f3e644b679a6a2c",  # split 4
        "cd04fab46a181151ddd97ce93c65fe79558fb79ffa230b62f488ebfaf5fdcd75",  # split 5
        "b9189f7903ca7556a025c54dd5be6c00ec5952d4299e71630bc9876157676412",  # split 6
        "ea7fb3ca5d5aa45b917b99fb7d64d4e87322b2b5303a0156c547aa3f1a6c8941",  # split 7
        "b43faa190ca6dd4885a39dfc2a93d59f56f5174f3567bdbc49b18dd9cd9b7fb4",  # split 8
        "529ade4b86fd191908a96011f25c454653083674b6d4f090b3fdd27af2d14f62",  # split 9
    ),
    "actor": (
        "1d5cdd094f8b91e770f6decfca85b35cf42f75d1efb51055fd6af16e11820ff8",  # out1_node_feature_label.txt
        "997cdce67ea9c29257d3ffe796328391931901cf823830affa453178b60e2c3e",  # out1_graph_edges.txt
        "4505a41d4e90abd94d1ec22571ce528b09ad7cf20d87f764aebd4177590767f5",  # split 0
        "1871b0d24e3977c41e378fd24acc8025b63f86b77739be77a5b558d1287f207d",  # split 1
        "d26680e911ef3ecc9fc2a26d90c9d35028c63aadd7a5aea774649d1496c282cb",  # split 2
        "6755ad5f6a0be8594b344af3d2261eed935b83b73c4d70136e1a7beea7f78cb0",  # split 3
        "328fdca62b25074f21f2922518e042f24b3b8a1fc378f9dfb2cae36439aed902",  # split 4
        "5b3161a8dc8de4b2e651ebd56d68e768d1377044895b325566117fe26ab81cb7",  # split 5
        "e251b38abd4d7931b5e9ae5aba99dcdf87f0be283bdf6e65421274a1c9ef1df6",  # split 6
        "12164ef9f5620a2f12a387f4f2b8636859d42201101d6d32829ade62d5a98326",  # split 7
        "405cd1f7f631f678119f8bf2405809e86614d532985beb59566fcf95abd35b3f",  # split 8
        "505691c5d41bb37b20d085415dcdde2e8e68b5bc4e1feb2c0e361308002012bb",  # split 9
    ),
}


def _spec(name: str) -> _Spec:
    key = str(name).lower()
    if key not in _SPECS:
        raise GraphRMAError(f"name: expected one of {HETEROPHILOUS_DATASETS} (case-insensitive), got {name!r}")
    return _SPECS[key]


def raw_file_names(name: str) -> Dict[str, str]:
    """``{file name: sha256}`` of dataset ``name``'s 12 raw files, in the order of PyG's ``raw_file_names``."""
    spec = _spec(name)
    files = ["out1_node_feature_label.txt", "out1_graph_edges.txt"]
    files += [f"{spec.upstream}_split_0.6_0.2_{i}.npz" for i in range(NUM_SPLITS)]
    return dict(zip(files, HETEROPHILOUS_SHA256[spec.name.lower()]))


def _url(name: str, fname: str) -> str:
    spec = _spec(name)
    folder = f"new_data/{spec.upstream}" if fname.startswith("out1_") else "splits"
    return f"{GEOM_GCN_URL}/{folder}/{fname}"


def verify_raw(raw_dir: PathLike, name: str) -> None:
    """Raise :class:`DataNotFoundError` naming the first raw file of ``name`` that is missing, truncated or corrupt."""
    verify_checksums(
        raw_dir, raw_file_names(name), lambda files: _missing(Path(raw_dir), name, files), lambda f: _url(name, f)
    )


def _missing(raw_dir: Path, name: str, files, hint: str = "") -> str:
    # Name the files relative to the pyg folder, which is what root= / $GRAPH_RMA_DATA/pyg point at.
    spec = _spec(name)
    pyg_root = raw_dir.parents[len(Path(spec.raw_rel).parts) - 1]
    return missing_data_message(spec.name, pyg_root, [f"{spec.raw_rel}/{f}" for f in files], hint, family="pyg")


def _download_missing(raw_dir: Path, name: str) -> None:
    missing = [f for f in raw_file_names(name) if not (raw_dir / f).is_file()]
    try:
        for fname in missing:
            download_verified(_url(name, fname), raw_dir / fname, raw_file_names(name)[fname])
    except (DataNotFoundError, OSError) as exc:
        still = [f for f in missing if not (raw_dir / f).is_file()]
        raise DataNotFoundError(_missing(raw_dir, name, still, hint=f"(download error: {exc})")) from None


def _lines(path: Path) -> List[List[str]]:
    """The tab-separated rows of a Geom-GCN text file after its header line (as PyG splits them)."""
    return [line.split("\t") for line in path.read_text().split("\n")[1:-1]]


def _parse(raw_dir: Path, spec: _Spec) -> Data:
    """The graph from the verified raw files, as PyG's class for ``spec`` builds it (see the module)."""
    rows = _lines(raw_dir / "out1_node_feature_label.txt")
    if spec.family == "actor":  # features stored as the indices of the node's non-zero entries
        ids = [int(r[0]) for r in rows]
        cols = [[int(v) for v in r[1].split(",")] for r in rows]
        row = torch.tensor([i for i, c in zip(ids, cols) for _ in c])
        col = torch.tensor([v for c in cols for v in c])
        x = torch.zeros(int(row.max()) + 1, int(col.max()) + 1)
        x[row, col] = 1.0
        y = torch.empty(len(rows), dtype=torch.long)
        y[torch.tensor(ids)] = torch.tensor([int(r[2]) for r in rows])
    else:
        x = torch.tensor([[float(v) for v in r[1].split(",")] for r in rows], dtype=torch.float)
        y = torch.tensor([int(r[2]) for r in rows], dtype=torch.long)
    edges = torch.tensor([[int(v) for v in r] for r in _lines(raw_dir / "out1_graph_edges.txt")]).t().contiguous()
    edge_index = coalesce(edges, num_nodes=x.size(0))
    masks: Dict[str, list] = {"train_mask": [], "val_mask": [], "test_mask": []}
    for i in range(NUM_SPLITS):
        path = raw_dir / f"{spec.upstream}_split_0.6_0.2_{i}.npz"
        try:
            with np.load(path, allow_pickle=False) as f:
                for key in masks:
                    masks[key].append(torch.from_numpy(f[key].astype(bool)))
        except (OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:
            raise GraphRMAError(f"{path}: not a Geom-GCN split file ({exc})") from None
    return Data(x=x, edge_index=edge_index, y=y, **{k: torch.stack(v, dim=1) for k, v in masks.items()})


def load_heterophilous(name: str, root: Optional[PathLike] = None, split: int = 0, download: bool = True) -> Data:
    r"""Load one of :data:`HETEROPHILOUS_DATASETS` (as PyG's class reads it) and pick one of its 10 fixed Geom-GCN
    splits.

    Args:
        name: ``"Cornell"``, ``"Texas"``, ``"Wisconsin"``, ``"chameleon"``, ``"squirrel"`` or ``"Actor"``
            (case-insensitive).
        root: the ``pyg`` folder holding ``webkb/``, ``wikipedia_network/``, ``actor/``; default
            ``$GRAPH_RMA_DATA/pyg``, else the cache.
        split: which fixed split, ``0 <= split < 10`` (column ``split`` of PyG's ``[N, 10]`` masks).
        download: when neither ``root`` nor ``$GRAPH_RMA_DATA`` is set, fetch missing raw files (checksum-verified)
            from :data:`GEOM_GCN_URL` into the cache.

    Returns:
        A :class:`~torch_geometric.data.Data` with ``x`` (``[N, F]`` float 0/1 bag of words), ``edge_index``
        (``[2, E]``, directed, as PyG builds it), ``y`` (``[N]``), and boolean ``train_mask``, ``val_mask``,
        ``test_mask`` of shape ``[N]`` for the chosen split (disjoint, together covering every node).

    Raises:
        GraphRMAError: unknown ``name`` or ``split`` out of range.
        DataNotFoundError: a raw file is missing (and could not be downloaded), truncated or corrupt; the message
            names the file and where it was looked for.
    """
    if isinstance(split, bool) or not isinstance(split, int) or not 0 <= split < NUM_SPLITS:
        raise GraphRMAError(f"split: expected an int in [0, {NUM_SPLITS}), got {split!r}")
    return select_split(load_heterophilous_all_splits(name, root, download), split)


def select_split(full: Data, split: int) -> Data:
    """The graph of :func:`load_heterophilous_all_splits` with the ``[N]`` masks of fixed split ``split``.

    ``full``'s masks are ``[N, splits]`` (column ``split`` is taken) or, for a graph with one split such as
    Planetoid's, ``[N]`` (PyG's convention; ``split`` must then be 0)."""

    def pick(mask):
        if mask.dim() == 1:
            if split != 0:
                raise GraphRMAError(f"split: this graph has one split (masks of shape [N]), got split={split!r}")
            return mask.clone()
        return mask[:, split].clone()

    return Data(
        x=full.x,
        edge_index=full.edge_index,
        y=full.y,
        train_mask=pick(full.train_mask),
        val_mask=pick(full.val_mask),
        test_mask=pick(full.test_mask),
    )


def load_heterophilous_all_splits(name: str, root: Optional[PathLike] = None, download: bool = True) -> Data:
    """:func:`load_heterophilous` with the masks of all 10 splits (``[N, 10]``): the raw files are verified and the
    graph is read once however many splits a study uses."""
    spec = _spec(name)
    explicit = root is not None or bool(os.environ.get(ENV_VAR))
    raw_dir = resolve_root("pyg", root) / spec.raw_rel
    if download and not explicit:
        _download_missing(raw_dir, spec.name)
    verify_raw(raw_dir, spec.name)
    return _parse(raw_dir, spec)
