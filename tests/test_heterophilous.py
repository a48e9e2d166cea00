"""Geom-GCN heterophilous graphs: a hand-made fixture (exact tensors, checksum refusal, cache safety, downloads) and
the real files (statistics of Pei et al. 2020 / shared/data/README.md section 7, all 10 splits, data root untouched)."""

import hashlib
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import offline_downloads, snapshot
from torch_geometric.utils import homophily

from graph_rma.data import heterophilous as H
from graph_rma.data.heterophilous import HETEROPHILOUS_DATASETS, load_heterophilous, raw_file_names
from graph_rma.data.nodes import NODE_DATASETS, load_node_dataset, num_splits
from graph_rma.data.root import DataNotFoundError

SHARED = Path(os.environ.get("GRAPH_RMA_DATA", "/nonexistent")) / "pyg"


def _have(name):
    spec = H._spec(name)
    return all((SHARED / spec.raw_rel / f).is_file() for f in raw_file_names(name))


needs_data = pytest.mark.skipif(
    not all(_have(n) for n in HETEROPHILOUS_DATASETS),
    reason="Geom-GCN raw files not found under $GRAPH_RMA_DATA/pyg (datasets/heterophilous.md)",
)


@pytest.fixture
def offline(monkeypatch):
    """No network: every download attempt fails as it would offline (and is counted)."""
    return offline_downloads(monkeypatch, H)


# --- a tiny hand-made "Texas": 4 nodes, 3 features, PyG's WebKB file format -------------------------------------

FEATURES = b"node_id\tfeature\tlabel\n0\t1,0,1\t2\n1\t0,1,0\t0\n2\t1,1,0\t4\n3\t0,0,1\t2\n"
EDGES = b"node_id\tnode_id\n0\t1\n2\t1\n1\t0\n3\t3\n0\t1\n"  # (0, 1) twice: coalesce keeps one


def _masks(i):
    """Split i: node i % 4 trains, node (i + 1) % 4 validates, the other two test."""
    train, val = np.zeros(4, bool), np.zeros(4, bool)
    train[i % 4], val[(i + 1) % 4] = True, True
    return train, val, ~(train | val)


def _fixture(pyg_root: Path, monkeypatch) -> Path:
    raw = pyg_root / "webkb" / "texas" / "raw"
    raw.mkdir(parents=True)
    (raw / "out1_node_feature_label.txt").write_bytes(FEATURES)
    (raw / "out1_graph_edges.txt").write_bytes(EDGES)
    for i in range(10):
        tr, va, te = _masks(i)
        np.savez(raw / f"texas_split_0.6_0.2_{i}.npz", train_mask=tr, val_mask=va, test_mask=te)
    digests = tuple(hashlib.sha256((raw / f).read_bytes()).hexdigest() for f in raw_file_names("Texas"))
    monkeypatch.setitem(H.HETEROPHILOUS_SHA256, "texas", digests)
    return raw


def test_fixture_loads_exactly_through_pyg(tmp_path, data_cache, offline, monkeypatch):
    root = tmp_path / "pyg"
    _fixture(root, monkeypatch)
    before = snapshot(root)
    data = load_heterophilous("texas", root=root, split=3)
    assert data.x.tolist() == [[1, 0, 1], [0, 1, 0], [1, 1, 0], [0, 0, 1]]
    assert data.y.tolist() == [2, 0, 4, 2]
    assert data.edge_index.tolist() == [[0, 1, 2, 3], [1, 0, 1, 3]]  # coalesced: sorted, duplicate dropped
    assert data.train_mask.tolist() == [False, False, False, True]
    assert data.val_mask.tolist() == [True, False, False, False]
    assert data.test_mask.tolist() == [False, True, True, False]
    assert load_heterophilous("Texas", root=root, split=9).train_mask.tolist() == [False, True, False, False]
    assert snapshot(root) == before and not (root / "webkb" / "texas" / "processed").exists()
    assert not data_cache.exists()  # no processed cache anywhere
    assert offline == []  # root= given: never downloads
    # the same tensors as PyG's own class (which writes processed/ beside raw/: run it on a copy)
    from torch_geometric.datasets import WebKB

    shutil.copytree(root / "webkb", tmp_path / "copy" / "webkb")
    ref = WebKB(str(tmp_path / "copy" / "webkb"), "texas")[0]
    full = H.load_heterophilous_all_splits("texas", root=root)
    for key in ("x", "edge_index", "y", "train_mask", "val_mask", "test_mask"):
        assert torch.equal(getattr(full, key), getattr(ref, key)), key


def test_corrupted_raw_file_is_refused_with_its_name(tmp_path, data_cache, offline, monkeypatch):
    root = tmp_path / "pyg"
    raw = _fixture(root, monkeypatch)
    bad = raw / "texas_split_0.6_0.2_7.npz"
    blob = bytearray(bad.read_bytes())
    blob[-30] ^= 0xFF
    bad.write_bytes(bytes(blob))
    with pytest.raises(DataNotFoundError, match=r"texas_split_0\.6_0\.2_7\.npz: truncated or corrupt raw file"):
        load_heterophilous("Texas", root=root, split=0)  # any split: all 12 files are checked before PyG reads one
    assert bad.read_bytes() == bytes(blob)  # the user's file is never overwritten
    assert not (data_cache / "pyg").exists() or not any((data_cache / "pyg").iterdir())  # and nothing was processed
    # A missing file under an explicit root is named, relative to the pyg folder, and is not downloaded.
    (raw / "out1_graph_edges.txt").unlink()
    with pytest.raises(DataNotFoundError, match=r"webkb/texas/raw/out1_graph_edges\.txt") as err:
        load_heterophilous("Texas", root=root)
    assert str(root) in str(err.value) and offline == []


def test_planted_processed_file_is_never_unpickled(tmp_path, data_cache, monkeypatch):
    """PyG loads processed/*.pt with a weights_only=False fallback; this loader reads no processed file at all, wherever
    one is planted (beside the raw files, in the cache)."""
    root = tmp_path / "pyg"
    _fixture(root, monkeypatch)
    sentinel = tmp_path / "executed"

    class Evil:
        def __reduce__(self):
            return (os.mkdir, (str(sentinel),))

    for folder in (root / "webkb" / "texas" / "processed", data_cache / "pyg" / "texas" / "processed"):
        folder.mkdir(parents=True)
        for name in ("data.pt", "pre_transform.pt", "pre_filter.pt"):
            torch.save(Evil(), folder / name)
    data = load_heterophilous("Texas", root=root, split=3)
    assert not sentinel.exists() and data.y.tolist() == [2, 0, 4, 2]
    # a split file holding a pickle is refused, not loaded (numpy.load(allow_pickle=False))
    raw = root / "webkb" / "texas" / "raw"
    np.savez(
        raw / "texas_split_0.6_0.2_4.npz",
        train_mask=np.array([Evil()], dtype=object),
        val_mask=np.zeros(4),
        test_mask=np.zeros(4),
    )
    digests = tuple(hashlib.sha256((raw / f).read_bytes()).hexdigest() for f in raw_file_names("Texas"))
    monkeypatch.setitem(H.HETEROPHILOUS_SHA256, "texas", digests)
    with pytest.raises(ValueError, match="texas_split_0.6_0.2_4.npz: not a Geom-GCN split file"):
        load_heterophilous("Texas", root=root)
    assert not sentinel.exists()


def test_download_into_cache_is_checksum_verified(tmp_path, data_cache, monkeypatch, http_folder):
    # A "remote" laid out like the geom-gcn repository, served over HTTP on localhost (the real download code path).
    raw = _fixture(tmp_path / "src", monkeypatch)
    served, base = http_folder
    remote = served / "remote"
    (remote / "new_data" / "texas").mkdir(parents=True)
    (remote / "splits").mkdir()
    for f in raw_file_names("Texas"):
        shutil.copy(raw / f, remote / ("splits" if f.endswith(".npz") else "new_data/texas") / f)
    monkeypatch.setattr(H, "GEOM_GCN_URL", f"{base}/remote")
    monkeypatch.delenv("GRAPH_RMA_DATA", raising=False)
    assert load_heterophilous("Texas", split=3).y.tolist() == [2, 0, 4, 2]
    got = data_cache / "data" / "pyg" / "webkb" / "texas" / "raw"
    assert sorted(p.name for p in got.iterdir()) == sorted(raw_file_names("Texas"))

    # A corrupted remote file is rejected, named, and not kept.
    shutil.rmtree(data_cache)
    (remote / "new_data" / "texas" / "out1_graph_edges.txt").write_bytes(b"node_id\tnode_id\n0\t2\n")
    with pytest.raises(DataNotFoundError, match=r"out1_graph_edges\.txt.*checksum mismatch"):
        load_heterophilous("Texas")
    assert not (got / "out1_graph_edges.txt").exists()


def test_no_data_anywhere_gives_one_clear_error(data_cache, monkeypatch, offline):
    monkeypatch.delenv("GRAPH_RMA_DATA", raising=False)
    with pytest.raises(DataNotFoundError) as err:
        load_heterophilous("chameleon")
    msg = str(err.value)
    assert "wikipedia_network/chameleon/geom_gcn/raw/out1_node_feature_label.txt" in msg
    assert "GRAPH_RMA_DATA" in msg and "root=" in msg and str(data_cache / "data" / "pyg") in msg
    assert offline == [f"{H.GEOM_GCN_URL}/new_data/chameleon/out1_node_feature_label.txt"]  # gave up after one try


def test_bad_arguments_are_value_errors(tmp_path):
    with pytest.raises(ValueError, match="name: expected one of"):
        load_heterophilous("crocodile", root=tmp_path)
    for split in (10, -1, True, "0"):
        with pytest.raises(ValueError, match="split: expected an int"):
            load_heterophilous("Texas", root=tmp_path, split=split)
    with pytest.raises(ValueError, match="split"):
        load_node_dataset("Cora", split=1)  # Planetoid has one public split
    with pytest.raises(ValueError, match="name"):
        load_node_dataset("PubMed")
    assert NODE_DATASETS[:8] == ("Cora", "CiteSeer") + HETEROPHILOUS_DATASETS
    assert (num_splits("cora"), num_splits("ACTOR")) == (1, 10)


# --- the real files -----------------------------------------------------------------------------------------------

# nodes, coalesced directed edges, features, class counts, train/val/test per split, edge homophily
# (Pei et al. 2020, Table 1 for nodes/features/classes; PyG's documented edge counts; shared/data/README.md section 7).
REAL = {
    "Cornell": (183, 298, 1703, [33, 1, 18, 101, 30], (87, 59, 37), 0.3054),
    "Texas": (183, 325, 1703, [33, 1, 18, 101, 30], (87, 59, 37), 0.1077),
    "Wisconsin": (251, 515, 1703, [10, 70, 118, 32, 21], (120, 80, 51), 0.1961),
    "chameleon": (2277, 36101, 2325, [456, 460, 453, 521, 387], (1092, 729, 456), 0.2350),
    "squirrel": (5201, 217073, 2089, [1042, 1040, 1039, 1040, 1040], (2496, 1664, 1041), 0.2239),
    "Actor": (7600, 30019, 932, [853, 1337, 1630, 1815, 1965], (3648, 2432, 1520), 0.2188),
}


@pytest.fixture(scope="module")
def real_cache(tmp_path_factory):
    """An empty cache for the module (it must stay unused), data root from the env; the data folder is never
    written to."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GRAPH_RMA_CACHE", str(tmp_path_factory.mktemp("hetero-cache")))
        before = snapshot(SHARED) if SHARED.is_dir() else None
        yield before
        if before is not None:
            assert snapshot(SHARED) == before, "the data folder was written to"


@pytest.mark.slow
@needs_data
@pytest.mark.parametrize("name", list(REAL))
def test_real_statistics_and_all_ten_splits(name, real_cache):
    nodes, edges, features, counts, sizes, h = REAL[name]
    data = load_heterophilous(name)  # root from $GRAPH_RMA_DATA/pyg
    assert (data.num_nodes, data.edge_index.size(1), data.x.size(1)) == (nodes, edges, features)
    assert torch.bincount(data.y).tolist() == counts
    assert set(data.x.unique().tolist()) == {0.0, 1.0}
    assert homophily(data.edge_index, data.y, method="edge") == pytest.approx(h, abs=5e-5)
    seen_train = []
    full = H.load_heterophilous_all_splits(name)
    for split in range(10):
        d = H.select_split(full, split)
        m = torch.stack([d.train_mask, d.val_mask, d.test_mask])
        assert tuple(m.sum(dim=1).tolist()) == sizes
        assert bool((m.sum(dim=0) == 1).all())  # disjoint and covering every node
        seen_train.append(d.train_mask)
    assert len({tuple(t.nonzero().flatten().tolist()) for t in seen_train}) == 10  # ten different splits
    assert snapshot(SHARED) == real_cache


@pytest.mark.slow
@needs_data
@pytest.mark.parametrize("name", ["Cornell", "chameleon", "Actor"])  # one per PyG class (WebKB, Wikipedia, Actor)
def test_real_graphs_equal_pygs_own_classes(name, real_cache, tmp_path):
    from torch_geometric.datasets import Actor, WebKB, WikipediaNetwork

    spec = H._spec(name)
    shutil.copytree(SHARED / spec.raw_rel, tmp_path / spec.raw_rel)
    if spec.family == "webkb":
        ref = WebKB(str(tmp_path / "webkb"), name)[0]
    elif spec.family == "actor":
        ref = Actor(str(tmp_path / "actor"))[0]
    else:
        ref = WikipediaNetwork(str(tmp_path / "wikipedia_network"), name, geom_gcn_preprocess=True)[0]
    ours = H.load_heterophilous_all_splits(name)
    for key in ("x", "edge_index", "y", "train_mask", "val_mask", "test_mask"):
        assert torch.equal(getattr(ours, key), getattr(ref, key)), key


@needs_data
def test_cornell_features_and_labels_are_texas_upstream(real_cache):
    cornell, texas = load_heterophilous("Cornell"), load_heterophilous("Texas")
    assert torch.equal(cornell.x, texas.x) and torch.equal(cornell.y, texas.y)
    assert cornell.edge_index.size(1) != texas.edge_index.size(1)  # only edges and splits differ


@needs_data
def test_load_node_dataset_dispatches_and_normalises(real_cache):
    d = load_node_dataset("wisconsin", split=4)
    ref = load_heterophilous("Wisconsin", split=4)
    assert d.x.is_sparse and torch.equal(d.edge_index, ref.edge_index) and torch.equal(d.test_mask, ref.test_mask)
    dense = d.x.to_dense()
    assert torch.allclose(dense.sum(dim=1), torch.ones(251))  # no empty rows in Wisconsin
    assert torch.allclose(dense * ref.x.sum(dim=1, keepdim=True), ref.x)
    raw = load_node_dataset("Wisconsin", split=4, normalize=False)
    assert not raw.x.is_sparse and torch.equal(raw.x, ref.x)
    if (SHARED.parent / "planetoid" / "Cora" / "raw").is_dir():
        cora = load_node_dataset("cora")
        assert cora.train_mask.dim() == 1
        assert [int(m.sum()) for m in (cora.train_mask, cora.val_mask, cora.test_mask)] == [140, 500, 1000]
