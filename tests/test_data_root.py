import hashlib

import pytest

from graph_rma.data import root as R


def test_resolution_order(tmp_path, monkeypatch):
    monkeypatch.setenv("GRAPH_RMA_DATA", str(tmp_path / "env"))
    monkeypatch.setenv("GRAPH_RMA_CACHE", str(tmp_path / "cache"))
    assert R.resolve_root("cora", tmp_path / "arg") == tmp_path / "arg"
    assert R.resolve_root("cora") == tmp_path / "env" / "cora"
    monkeypatch.delenv("GRAPH_RMA_DATA")
    assert R.resolve_root("cora") == tmp_path / "cache" / "data" / "cora"


def test_download_verified_checks_sha256(tmp_path, http_folder):
    served, base = http_folder
    (served / "src.bin").write_bytes(b"hello")
    good = hashlib.sha256(b"hello").hexdigest()
    out = R.download_verified(f"{base}/src.bin", tmp_path / "d" / "f.bin", good)
    assert out.read_bytes() == b"hello"
    with pytest.raises(R.DataNotFoundError, match="checksum"):
        R.download_verified(f"{base}/src.bin", tmp_path / "d" / "g.bin", "0" * 64)
    assert not (tmp_path / "d" / "g.bin").exists()
    with pytest.raises(R.DataNotFoundError, match="could not download"):
        R.download_verified(f"{base}/missing", tmp_path / "d" / "h.bin")
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == ["f.bin"]
    with pytest.raises(R.DataNotFoundError, match="checksum"):  # a failed first download leaves no folder behind
        R.download_verified(f"{base}/src.bin", tmp_path / "new" / "g.bin", "0" * 64)
    assert not (tmp_path / "new").exists()


def test_missing_message_names_files_and_env():
    msg = R.missing_data_message("Cora", R.Path("/nowhere/planetoid"), ["ind.cora.x", "ind.cora.y"])
    assert "ind.cora.x" in msg and "GRAPH_RMA_DATA" in msg and "/nowhere/planetoid" in msg
