"""Planetoid loader on the real Cora raw files: statistics, read-only roots, missing/truncated files, downloads."""

import pickle
import shutil
import stat
from pathlib import Path

import pytest
from conftest import PLANETOID as SHARED
from conftest import needs_cora as needs_data
from conftest import offline_downloads, snapshot

from graph_rma.data import planetoid
from graph_rma.data.planetoid import load_planetoid, raw_file_names
from graph_rma.data.root import DataNotFoundError


@pytest.fixture
def offline(monkeypatch):
    """No network: every download attempt fails as it would offline (and is counted)."""
    return offline_downloads(monkeypatch, planetoid)


def _copy_cora(dest_root: Path, skip=()):
    raw = dest_root / "Cora" / "raw"
    raw.mkdir(parents=True)
    for fname in raw_file_names("Cora"):
        if fname not in skip:
            shutil.copy(SHARED / "Cora" / "raw" / fname, raw / fname)
    return raw


@needs_data
def test_cora_statistics_from_env_root_and_data_folder_untouched(data_cache, monkeypatch):
    monkeypatch.setenv("GRAPH_RMA_DATA", str(SHARED.parent))
    before = snapshot(SHARED)
    dataset = load_planetoid("Cora")
    data = dataset[0]
    assert (data.num_nodes, dataset.num_features, dataset.num_classes) == (2708, 1433, 7)
    assert data.edge_index.shape == (2, 10556)
    assert data.is_undirected()
    assert [int(m.sum()) for m in (data.train_mask, data.val_mask, data.test_mask)] == [140, 500, 1000]
    assert not bool((data.train_mask & data.val_mask).any() or (data.val_mask & data.test_mask).any())
    # Built in memory: nothing written beside the read-only data, nothing cached.
    assert snapshot(SHARED) == before
    assert not (data_cache / "planetoid").exists()
    again = load_planetoid("cora")[0]
    assert bool((again.edge_index == data.edge_index).all()) and bool((again.x == data.x).all())


@needs_data
def test_read_only_root_is_not_written(tmp_path, data_cache):
    root = tmp_path / "ro"
    raw = _copy_cora(root)
    before = snapshot(root)
    modes = []
    for d in (raw, raw.parent, root):
        modes.append((d, d.stat().st_mode))
        d.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        data = load_planetoid("Cora", root=root, download=False)[0]
    finally:
        for d, mode in modes:
            d.chmod(mode)
    assert data.num_nodes == 2708
    assert snapshot(root) == before
    assert not (root / "Cora" / "processed").exists()


@needs_data
def test_missing_raw_file_is_named(tmp_path, data_cache, offline):
    root = tmp_path / "planetoid"
    _copy_cora(root, skip=("ind.cora.graph",))
    with pytest.raises(DataNotFoundError, match=r"ind\.cora\.graph") as err:
        load_planetoid("Cora", root=root)
    assert offline == [f"{planetoid.PLANETOID_URL}/ind.cora.graph"]  # only the missing file was requested
    assert "ind.cora.x" not in str(err.value)
    with pytest.raises(DataNotFoundError, match=r"ind\.cora\.graph"):
        load_planetoid("Cora", root=root, download=False)


@needs_data
def test_truncated_raw_file_is_named(tmp_path, data_cache):
    root = tmp_path / "planetoid"
    raw = _copy_cora(root)
    blob = (raw / "ind.cora.tx").read_bytes()
    (raw / "ind.cora.tx").write_bytes(blob[: len(blob) // 2])
    with pytest.raises(DataNotFoundError, match=r"ind\.cora\.tx: truncated or corrupt"):
        load_planetoid("Cora", root=root)
    assert (raw / "ind.cora.tx").stat().st_size == len(blob) // 2  # the user's file is never overwritten


def test_no_data_anywhere_gives_one_clear_error(tmp_path, data_cache, monkeypatch, offline):
    monkeypatch.delenv("GRAPH_RMA_DATA", raising=False)
    with pytest.raises(DataNotFoundError) as err:
        load_planetoid("Cora")
    msg = str(err.value)
    assert "Cora/raw/ind.cora.x" in msg and "GRAPH_RMA_DATA" in msg and "root=" in msg
    assert str(data_cache / "data" / "planetoid") in msg  # says where it looked
    assert len(offline) == 1  # gave up after the first failed download
    assert not data_cache.exists()  # and created nothing


@needs_data
def test_download_is_checksum_verified(tmp_path, data_cache, monkeypatch, http_folder):
    # A "remote" served over HTTP on localhost: the real download code path, no network needed.
    served, base = http_folder
    remote = served / "remote"
    shutil.copytree(SHARED / "Cora" / "raw", remote)
    monkeypatch.setattr(planetoid, "PLANETOID_URL", f"{base}/remote")
    monkeypatch.delenv("GRAPH_RMA_DATA", raising=False)
    data = load_planetoid("Cora")[0]
    assert data.num_nodes == 2708
    assert sorted(p.name for p in (data_cache / "data" / "planetoid" / "Cora" / "raw").iterdir()) == sorted(
        raw_file_names("Cora")
    )

    # A corrupted remote file is rejected and not kept.
    (remote / "ind.cora.y").write_bytes(b"not the real file")
    root = tmp_path / "fresh"
    with pytest.raises(DataNotFoundError, match=r"ind\.cora\.y.*checksum mismatch"):
        load_planetoid("Cora", root=root)
    assert not (root / "Cora" / "raw" / "ind.cora.y").exists()


def test_unknown_name_is_a_value_error():
    with pytest.raises(ValueError, match="name: expected one of"):
        load_planetoid("PubMedX")


@needs_data
def test_matches_pygs_own_planetoid_processing(tmp_path):
    from torch_geometric.datasets import Planetoid

    shutil.copytree(SHARED / "Cora" / "raw", tmp_path / "Cora" / "raw")
    ref = Planetoid(str(tmp_path), "Cora", split="public")
    ours = load_planetoid("Cora", root=SHARED, download=False)
    assert (ours.name, ours.num_features, ours.num_classes, len(ours)) == ("Cora", 1433, 7, 1)
    a, b = ours[0], ref[0]
    assert sorted(a.keys()) == sorted(b.keys())
    for key in b.keys():
        assert a[key].dtype == b[key].dtype and bool((a[key] == b[key]).all()), key


def test_failed_download_creates_no_folder_in_the_data_root(tmp_path, data_cache, monkeypatch, http_folder):
    data_root = tmp_path / "nonexistent"
    monkeypatch.setenv("GRAPH_RMA_DATA", str(data_root))
    monkeypatch.setattr(planetoid, "PLANETOID_URL", f"{http_folder[1]}/no-remote")  # the real download path
    with pytest.raises(DataNotFoundError, match=r"ind\.cora\.x.*download error"):
        load_planetoid("Cora")
    assert not data_root.exists()


class _Payload:
    """Unpickling this object creates ``marker``: proof that a pickle ran code."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


@needs_data
def test_pickles_planted_in_the_cache_never_run(tmp_path, data_cache, monkeypatch):
    monkeypatch.setenv("GRAPH_RMA_DATA", str(SHARED.parent))
    marker = tmp_path / "pwned"
    processed = data_cache / "planetoid" / "Cora" / "processed"
    processed.mkdir(parents=True)
    shutil.copytree(SHARED / "Cora" / "raw", data_cache / "planetoid" / "Cora" / "raw")  # what an old version cached
    for fname in ("data.pt", "pre_transform.pt", "pre_filter.pt"):
        (processed / fname).write_bytes(pickle.dumps(_Payload(marker)))
    data = load_planetoid("Cora")[0]
    assert not marker.exists()
    assert data.num_nodes == 2708 and int(data.train_mask.sum()) == 140


@needs_data
def test_planted_raw_pickle_is_refused_unread(tmp_path, data_cache):
    root = tmp_path / "planetoid"
    raw = _copy_cora(root)
    marker = tmp_path / "pwned"
    (raw / "ind.cora.graph").write_bytes(pickle.dumps(_Payload(marker)))
    with pytest.raises(DataNotFoundError, match=r"ind\.cora\.graph: truncated or corrupt raw file"):
        load_planetoid("Cora", root=root, download=False)
    assert not marker.exists()
