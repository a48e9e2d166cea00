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


def test_a_root_that_is_a_file_is_refused_naming_it(tmp_path, monkeypatch):
    """`--root README.md` used to advise a folder "that contains 'README.md/'" and try to download into
    README.md/Cora/raw/."""
    from graph_rma.data.planetoid import load_planetoid

    readme = tmp_path / "README.md"
    readme.write_text("not a data folder\n")
    with pytest.raises(ValueError, match=f"^root: {readme} is a file, not a data folder$"):
        R.resolve_root("planetoid", readme)
    with pytest.raises(ValueError, match=f"^root: {readme / 'planetoid'} is below {readme}, which is a file"):
        R.resolve_root("planetoid", readme / "planetoid")
    monkeypatch.setenv("GRAPH_RMA_DATA", str(readme))
    with pytest.raises(ValueError, match=r"^\$GRAPH_RMA_DATA: .*README.md is a file, not a data folder$"):
        R.resolve_root("planetoid")
    monkeypatch.delenv("GRAPH_RMA_DATA")
    tried = []
    monkeypatch.setattr(R, "download_verified", lambda *a, **k: tried.append(a))
    with pytest.raises(ValueError, match="is a file"):
        load_planetoid("Cora", root=readme)
    assert tried == [] and readme.read_text() == "not a data folder\n"


def test_a_missing_root_is_said_and_the_advice_names_the_family_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("GRAPH_RMA_DATA", str(tmp_path / "data"))
    missing = tmp_path / "nowhere"
    msg = R.missing_data_message("Cora", missing, ["Cora/raw/ind.cora.x"], family="planetoid")
    assert f"under {missing}, which does not exist." in msg
    assert "a folder that contains 'planetoid/' and leave root unset" in msg and "'nowhere/'" not in msg
    # the folder $GRAPH_RMA_DATA points the loader at: the advice is the variable itself
    default = R.resolve_root("planetoid")
    default.mkdir(parents=True)
    msg = R.missing_data_message("Cora", default, ["Cora/raw/ind.cora.x"], family="planetoid")
    assert f"under {default}. Put" in msg and msg.count("'planetoid/'") == 1 and "leave root unset" not in msg
