"""Platonov et al.'s ``.npz`` graphs: a tiny hand-made fixture, real files, and agreement with PyG's class."""

import shutil

import numpy as np
import pytest
import torch
from conftest import PYG, offline_downloads, snapshot

import graph_rma
from graph_rma.data import platonov
from graph_rma.data.nodes import canonical_name, dataset_family, load_node_graph
from graph_rma.data.platonov import available_platonov, load_platonov_all_splits, platonov_name
from graph_rma.data.root import DataNotFoundError

needs_platonov = pytest.mark.skipif(
    not (PYG / "heterophilous_graph" / "minesweeper" / "raw").is_dir(),
    reason="Platonov et al.'s graphs not available (set GRAPH_RMA_DATA)",
)


def _write(root, name, n=5, splits=10, **replace):
    arrays = {
        "node_features": np.arange(n * 3, dtype=np.float32).reshape(n, 3),
        "node_labels": np.array([0, 1, 1, 0, 1][:n], dtype=np.int64),
        "edges": np.array([[0, 1], [1, 2], [3, 4]], dtype=np.int64),
        "train_masks": np.tile(np.array([1, 1, 0, 0, 0][:n], dtype=bool), (splits, 1)),
        "val_masks": np.tile(np.array([0, 0, 1, 0, 0][:n], dtype=bool), (splits, 1)),
        "test_masks": np.tile(np.array([0, 0, 0, 1, 1][:n], dtype=bool), (splits, 1)),
    }
    arrays.update(replace)
    folder = root / "heterophilous_graph" / name / "raw"
    folder.mkdir(parents=True, exist_ok=True)
    np.savez(folder / f"{name}.npz", **arrays)
    return folder / f"{name}.npz"


def test_a_dropped_in_graph_loads_by_name_as_stored(tmp_path):
    _write(tmp_path, "roman_empire")
    before = snapshot(tmp_path)
    d = load_platonov_all_splits("Roman-Empire", root=tmp_path)
    assert snapshot(tmp_path) == before  # nothing written beside the data
    assert d.x.dtype == torch.float32 and d.x[4].tolist() == [12.0, 13.0, 14.0]
    assert d.edge_index.tolist() == [[0, 1, 3], [1, 2, 4]]  # as stored: one direction per undirected edge
    assert d.y.tolist() == [0, 1, 1, 0, 1]
    assert d.train_mask.shape == (5, 10) and d.train_mask[:, 7].tolist() == [True, True, False, False, False]
    assert available_platonov(tmp_path) == ["roman_empire"]
    assert canonical_name("roman-empire", tmp_path) == "roman_empire"
    assert dataset_family("roman_empire", tmp_path) == "platonov"
    assert load_node_graph("roman_empire", root=tmp_path).test_mask[:, 0].tolist() == [False] * 3 + [True] * 2


def test_names_and_bad_files_are_one_line_errors(tmp_path, monkeypatch, data_cache):
    assert platonov_name("Amazon-Ratings") == "amazon_ratings"
    for bad in ("", "../x", "a/b", 3):
        with pytest.raises(ValueError, match="name"):
            platonov_name(bad)
    with pytest.raises(ValueError, match="name: expected one of"):
        canonical_name("no_such_graph", tmp_path)
    with pytest.raises(DataNotFoundError, match="heterophilous_graph/questions/raw/questions.npz") as e:
        load_platonov_all_splits("questions", root=tmp_path)
    assert "not one of the graphs this package downloads" in str(e.value)
    # a pickled object array is refused: numpy.load(allow_pickle=False) never runs code
    _write(tmp_path, "evil", node_labels=np.array([object(), 1, 1, 0, 1], dtype=object))
    with pytest.raises(ValueError, match="evil.npz: unreadable .npz file"):
        load_platonov_all_splits("evil", root=tmp_path)
    _write(tmp_path, "wrong", edges=np.array([[0, 9]]))
    with pytest.raises(ValueError, match="edges name nodes outside"):
        load_platonov_all_splits("wrong", root=tmp_path)
    _write(tmp_path, "masks", train_masks=np.zeros((10, 4), dtype=bool))
    with pytest.raises(ValueError, match=r"expected train_masks \[splits, 5\]"):
        load_platonov_all_splits("masks", root=tmp_path)
    (tmp_path / "heterophilous_graph" / "junk" / "raw").mkdir(parents=True)
    (tmp_path / "heterophilous_graph" / "junk" / "raw" / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="junk.npz: unreadable"):
        load_platonov_all_splits("junk", root=tmp_path)
    # a known graph whose bytes differ from the published file is refused, naming the source
    _write(tmp_path, "minesweeper")
    with pytest.raises(DataNotFoundError, match="truncated or corrupt .*minesweeper.npz"):
        load_platonov_all_splits("minesweeper", root=tmp_path)
    # offline, no root: the download fails and the message says where the file is looked for
    monkeypatch.delenv("GRAPH_RMA_DATA", raising=False)
    calls = offline_downloads(monkeypatch, platonov)
    with pytest.raises(DataNotFoundError, match="heterophilous_graph/tolokers/raw/tolokers.npz") as e:
        load_platonov_all_splits("tolokers")
    assert calls == [f"{platonov.PLATONOV_URL}/tolokers.npz"] and "download error" in str(e.value)
    assert not (data_cache / "data" / "pyg" / "heterophilous_graph" / "tolokers").exists()


@needs_platonov
@pytest.mark.parametrize(
    "name,nodes,edges,features,classes",
    [
        ("minesweeper", 10000, 39402, 7, 2),
        ("tolokers", 11758, 519000, 10, 2),
        ("chameleon_filtered", 890, 8854, 2325, 5),
        ("chameleon_filtered_directed", 890, 13584, 2325, 5),
    ],
)
def test_the_shared_graphs_have_their_published_sizes(name, nodes, edges, features, classes):
    d = load_platonov_all_splits(name, root=PYG)
    assert d.x.shape == (nodes, features) and d.edge_index.shape == (2, edges)
    assert int(d.y.max()) + 1 == classes and d.train_mask.shape == (nodes, 10)
    for s in range(10):  # each split: disjoint train/val/test
        t, v, te = d.train_mask[:, s], d.val_mask[:, s], d.test_mask[:, s]
        assert not (t & v).any() and not (t & te).any() and not (v & te).any()


@needs_platonov
def test_undirected_minesweeper_equals_pygs_heterophilous_graph_dataset(tmp_path):
    from torch_geometric.datasets import HeterophilousGraphDataset

    from graph_rma.data.transforms import direct_edges

    shutil.copytree(PYG / "heterophilous_graph" / "minesweeper", tmp_path / "minesweeper")
    ref = HeterophilousGraphDataset(str(tmp_path), "Minesweeper")[0]
    ours = load_platonov_all_splits("minesweeper", root=PYG)
    assert torch.equal(ours.x, ref.x) and torch.equal(ours.y, ref.y)
    assert torch.equal(direct_edges(ours.edge_index, "undirected", ours.num_nodes), ref.edge_index)
    for key in ("train_mask", "val_mask", "test_mask"):
        assert torch.equal(getattr(ours, key), getattr(ref, key))


def _forge_header(path, key, shape):
    """Rewrite the archive at ``path`` with member ``key``'s .npy header claiming ``shape`` (its data unchanged)."""
    import io
    import zipfile

    with zipfile.ZipFile(path) as z:
        members = {name: z.read(name) for name in z.namelist()}
    head = io.BytesIO()
    np.lib.format.write_array_header_1_0(head, {"descr": "<f4", "fortran_order": False, "shape": shape})
    members[f"{key}.npy"] = head.getvalue() + b"\0" * 60
    with zipfile.ZipFile(path, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)


def test_malformed_files_are_one_line_errors_naming_the_file(tmp_path):
    """A .npy under the .npz name (was a TypeError about a context manager), a header claiming a huge shape (was a
    MemoryError), masks with 0 splits (was a ZeroDivisionError in the study), 0 nodes (was a RuntimeError from
    max() in the study)."""
    folder = tmp_path / "heterophilous_graph" / "single" / "raw"
    folder.mkdir(parents=True)
    with open(folder / "single.npz", "wb") as f:
        np.save(f, np.zeros((5, 3), dtype=np.float32))
    with pytest.raises(ValueError, match=r"single\.npz: a \.npy file \(one array\), not a \.npz archive"):
        load_platonov_all_splits("single", root=tmp_path)

    _forge_header(_write(tmp_path, "huge"), "node_features", (10**12, 3))
    with pytest.raises(
        ValueError,
        match=r"huge\.npz: node_features claims shape \(1000000000000, 3\) of float32 "
        r"\(12000000000000 bytes\), but the file holds \d+ bytes",
    ):
        load_platonov_all_splits("huge", root=tmp_path)

    _write(tmp_path, "nosplits", splits=0)
    with pytest.raises(ValueError, match=r"nosplits\.npz: train_masks holds no split \(shape \(0, 5\)\)"):
        load_platonov_all_splits("nosplits", root=tmp_path)

    _write(tmp_path, "nonodes", n=0, edges=np.zeros((0, 2), dtype=np.int64))
    with pytest.raises(ValueError, match=r"nonodes\.npz: the graph has no nodes"):
        load_platonov_all_splits("nonodes", root=tmp_path)


def test_a_split_without_validation_or_test_nodes_is_refused_when_loaded(tmp_path):
    """An empty mask used to train on silently: test 0.0 for an empty test mask, epoch 1 kept for ever for an empty
    validation mask, and one such split of ten corrupting the mean."""
    val = np.tile(np.array([0, 0, 1, 0, 0], dtype=bool), (10, 1))
    val[3] = False
    _write(tmp_path, "noval", val_masks=val)
    with pytest.raises(ValueError, match=r"noval\.npz: split 3 has no validation node \(val_masks\[3\] is all False\)"):
        load_platonov_all_splits("noval", root=tmp_path)
    test = np.tile(np.array([0, 0, 0, 1, 1], dtype=bool), (10, 1))
    test[0] = False
    _write(tmp_path, "notest", test_masks=test)
    with pytest.raises(ValueError, match=r"notest\.npz: split 0 has no test node \(test_masks\[0\] is all False\)"):
        load_node_graph("notest", root=tmp_path)
    train = np.zeros((10, 5), dtype=bool)
    _write(tmp_path, "notrain", train_masks=train)
    with pytest.raises(ValueError, match=r"split 0 has no training node \(train_masks\[0\] is all False\)"):
        load_platonov_all_splits("notrain", root=tmp_path)


def _overlapping(a_role, b_role, split=2, node=4):
    base = {
        "train_masks": [1, 1, 0, 0, 0],
        "val_masks": [0, 0, 1, 0, 0],
        "test_masks": [0, 0, 0, 1, 1],
    }
    masks = {k: np.tile(np.array(v, dtype=bool), (10, 1)) for k, v in base.items()}
    masks[a_role][split, node] = masks[b_role][split, node] = True
    return masks


@pytest.mark.parametrize(
    "replace,message",
    [
        (
            {"edges": np.array([[0, 1.7], [1, 2], [3, 4]])},
            r"edges holds 1 value\(s\) that are not whole numbers \(node ids; first: edges\[0, 1\] = 1\.7\)",
        ),
        (
            {"edges": np.array([[0, 1], [1, np.nan], [3, 4]])},
            r"edges holds 1 value\(s\) that are not whole numbers \(node ids; first: edges\[1, 1\] = nan\)",
        ),
        (
            {"node_labels": np.array([0, 1, 0.7, 0, 1])},
            r"node_labels holds 1 value\(s\) that are not whole numbers \(class labels; first: "
            r"node_labels\[2\] = 0\.7\)",
        ),
        (
            {"node_features": np.array([[1.0, 2.0, 3.0]] * 4 + [[1e40, 0.0, 0.0]])},
            r"node_features holds 1 value\(s\) that are not finite float32 numbers \(first: node_features\[4, 0\] = "
            r"1e\+40; float32 holds magnitudes up to 3\.4e38\)",
        ),
        (
            {"node_features": np.array([[1.0, np.inf, 3.0]] * 5)},
            r"node_features holds 5 value\(s\) that are not finite float32 numbers \(first: "
            r"node_features\[0, 1\] = inf",
        ),
        (
            {"node_features": np.array([["1", "a", "2"]] * 5)},
            r"node_features: expected numbers, got dtype <U1 \(text\)",
        ),
        ({"edges": np.array([["0", "1"]] * 3)}, r"edges: expected whole numbers \(node ids\), got dtype <U1 \(text\)"),
        ({"val_masks": np.full((10, 5), 0.5)}, r"val_masks: expected booleans \(or 0/1\), got values other than 0/1"),
        (
            _overlapping("train_masks", "test_masks"),
            r"split 2 puts 1 node\(s\) in both its training and test sets \(first: node 4; train_masks and test_masks "
            r"must not overlap\)",
        ),
        (
            {"test_masks": np.tile(np.array([1, 1, 0, 1, 1], dtype=bool), (10, 1))},
            r"split 0 puts 2 node\(s\) in both its training and test sets \(first: node 0;",
        ),
        (_overlapping("train_masks", "val_masks", split=9, node=2), r"split 9 puts 1 node\(s\) in both its training "),
        (_overlapping("val_masks", "test_masks", node=3), r"split 2 puts 1 node\(s\) in both its validation and test "),
    ],
    ids=[
        "float-id",
        "nan-id",
        "float-label",
        "huge-feature",
        "inf-feature",
        "string-features",
        "string-edges",
        "half-mask",
        "train-test",
        "train-test-all",
        "train-val",
        "val-test",
    ],
)
def test_values_that_loading_would_change_are_refused_naming_the_file_and_array(tmp_path, replace, message):
    """Issue 67, item 3: edge ids 1.7 became 1, labels 0.7 became 0, features of 1e40 became inf, a test mask equal
    to the training mask was accepted (every test node trained on), string features gave numpy's message alone."""
    _write(tmp_path, "bad", **replace)
    with pytest.raises(graph_rma.GraphRMAError, match=r"^\S*heterophilous_graph/bad/raw/bad\.npz: " + message) as e:
        load_platonov_all_splits("bad", root=tmp_path)
    assert "\n" not in str(e.value)


def test_whole_numbers_stored_as_floats_and_0_1_masks_still_load(tmp_path):
    _write(
        tmp_path,
        "floats",
        edges=np.array([[0.0, 1.0], [1.0, 2.0], [3.0, 4.0]]),
        node_labels=np.array([0.0, 1.0, 1.0, 0.0, 1.0]),
        node_features=np.arange(15, dtype=np.int64).reshape(5, 3),
        val_masks=np.tile(np.array([0, 0, 1, 0, 0], dtype=np.int8), (10, 1)),
    )
    d = load_platonov_all_splits("floats", root=tmp_path)
    assert d.edge_index.tolist() == [[0, 1, 3], [1, 2, 4]] and d.y.tolist() == [0, 1, 1, 0, 1]
    assert d.x.dtype == torch.float32 and d.val_mask[:, 0].tolist() == [False, False, True, False, False]
