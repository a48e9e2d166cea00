"""Shared fixtures and data markers.

Real-data tests read ``$GRAPH_RMA_DATA`` (``make test`` and ``.ci/run`` point it at ``../shared/data``); each marker
skips with its reason when the files are absent, so the suite also runs on a machine without the data.
"""

import os
import sys
import tempfile
from pathlib import Path

import pytest

# The suite never writes into the user's ~/.cache/graph_rma: downloads and caches go to a temporary folder unless
# the caller chose one (tests that need their own set $GRAPH_RMA_CACHE themselves).
os.environ.setdefault("GRAPH_RMA_CACHE", tempfile.mkdtemp(prefix="graph_rma-test-cache-"))


def _no_gpu() -> bool:
    import torch  # imports no triton

    return not torch.cuda.is_available()


# The fused lean kernels' tests (tests/test_lean_fused.py) run Triton's interpreter on a machine without a GPU: it is
# chosen when triton is first imported (torch_geometric imports it), so here, before anything else; with a GPU the
# kernels compile for it and nothing changes.
if "triton" not in sys.modules and "TRITON_INTERPRET" not in os.environ and _no_gpu():
    os.environ["TRITON_INTERPRET"] = "1"

from graph_rma.metrics import java_available  # noqa: E402 (after the interpreter choice above)

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "datasets" / "fixtures"
DATA = Path(os.environ["GRAPH_RMA_DATA"]) if os.environ.get("GRAPH_RMA_DATA") else None


def data_path(*parts: str) -> Path:
    """A path under ``$GRAPH_RMA_DATA`` (a path that does not exist when the variable is unset)."""
    return Path(DATA if DATA is not None else "/nonexistent", *parts)


PLANETOID = data_path("planetoid")
PYG = data_path("pyg")  # the heterophilous graphs in PyG's raw layout
needs_cora = pytest.mark.skipif(
    not (PLANETOID / "Cora" / "raw").is_dir(), reason="real Cora raw files not available (set GRAPH_RMA_DATA)"
)
needs_text = pytest.mark.skipif(
    not data_path("text", "TREC", "TREC.train.all").is_file(),
    reason="real text data not found: set GRAPH_RMA_DATA (datasets/text.md)",
)
needs_webnlg = pytest.mark.skipif(
    not data_path("webnlg").is_dir(), reason="needs $GRAPH_RMA_DATA/webnlg (the real release)"
)
needs_agenda = pytest.mark.skipif(not data_path("agenda").is_dir(), reason="needs $GRAPH_RMA_DATA/agenda")
needs_wordnet = pytest.mark.skipif(
    not data_path("nltk_data", "corpora", "wordnet.zip").is_file(),
    reason="needs $GRAPH_RMA_DATA/nltk_data (WordNet, punkt_tab)",
)
needs_punkt = pytest.mark.skipif(
    not data_path("nltk_data", "tokenizers", "punkt_tab").is_dir(), reason="needs $GRAPH_RMA_DATA/nltk_data (punkt_tab)"
)
needs_java = pytest.mark.skipif(not java_available(), reason="METEOR 1.5 needs java, which is not on PATH")


@pytest.fixture(scope="module")
def planetoid_cache(tmp_path_factory):
    """A fresh processed-data cache (``$GRAPH_RMA_CACHE``) for the module, reading the real raw files."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GRAPH_RMA_CACHE", str(tmp_path_factory.mktemp("cache")))
        if DATA is not None:
            mp.setenv("GRAPH_RMA_DATA", str(DATA))
        yield


def snapshot(folder):
    """Every file under ``folder`` with its size and modification time: equal snapshots mean nothing was written."""
    folder = Path(folder)
    return sorted((str(p.relative_to(folder)), p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*"))


@pytest.fixture
def data_cache(tmp_path, monkeypatch):
    """An empty ``$GRAPH_RMA_CACHE`` for one test (the folder itself is not created)."""
    path = tmp_path / "cache"
    monkeypatch.setenv("GRAPH_RMA_CACHE", str(path))
    return path


def offline_downloads(monkeypatch, module):
    """No network for ``module``'s loader: every download attempt fails as it would offline; returns the list of
    URLs it was asked for."""
    from graph_rma.data.root import DataNotFoundError

    calls = []

    def fail(url, dest, sha256=None, timeout=30.0):
        calls.append(url)
        raise DataNotFoundError(f"could not download {url} to {dest}: offline")

    monkeypatch.setattr(module, "download_verified", fail)
    return calls


@pytest.fixture
def http_folder(tmp_path):
    """A folder served over HTTP on localhost (the canonical sources are HTTP(S); pooch fetches nothing else)."""
    import functools
    import http.server
    import threading

    folder = tmp_path / "served"
    folder.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield folder, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture
def unwritable(tmp_path):
    """A folder nothing can be created in, as this process sees it: a folder made read-only (chmod 555), or, for
    root (whom permissions do not stop), /proc/sys; skips where neither refuses a write."""
    import stat

    folder = tmp_path / "read-only"
    folder.mkdir()
    folder.chmod(stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
    try:
        if not os.access(folder, os.W_OK):
            yield folder
        elif os.path.isdir("/proc/sys") and not os.access("/proc/sys", os.W_OK):
            yield Path("/proc/sys")
        else:
            pytest.skip("no folder this process cannot write to (root without /proc/sys)")
    finally:
        folder.chmod(stat.S_IRWXU)
