r"""Where datasets live: an explicit ``root`` argument, else ``$GRAPH_RMA_DATA/<name>``, else a download.

Every loader in :mod:`graph_rma.data` resolves its folder through :func:`resolve_root` and fetches missing files
through :func:`download_verified`, so the rules are the same for Cora, AGENDA, WebNLG and the text sets:

1. ``root`` given by the caller: used as is.
2. ``$GRAPH_RMA_DATA`` set: ``$GRAPH_RMA_DATA/<name>``.
3. Otherwise ``~/.cache/graph_rma/<name>`` (override with ``$GRAPH_RMA_CACHE``), filled by a checksum-verified
   download from the canonical source when the machine is online.

When the files are in none of these places and the download fails, :class:`DataNotFoundError` says where to put
them. Data folders may be read-only: anything a loader derives (PyG's ``processed/``) goes to :func:`cache_dir`.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable, Dict, List, Optional, Union

from .._errors import GraphRMAError

ENV_VAR = "GRAPH_RMA_DATA"
CACHE_ENV_VAR = "GRAPH_RMA_CACHE"

PathLike = Union[str, os.PathLike]


class DataNotFoundError(FileNotFoundError):
    """A dataset file is missing (or corrupt) and could not be downloaded."""


def _cache_base() -> Path:
    return Path(os.environ.get(CACHE_ENV_VAR) or os.path.join(os.path.expanduser("~"), ".cache", "graph_rma"))


def cache_dir(*parts: str) -> Path:
    """A writable cache folder (``$GRAPH_RMA_CACHE`` or ``~/.cache/graph_rma``), created on demand."""
    path = _cache_base().joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


def resolve_root(name: str, root: Optional[PathLike] = None) -> Path:
    """The folder of dataset ``name``: ``root`` if given, else ``$GRAPH_RMA_DATA/name``, else the cache.

    The folder is not required to exist yet (a download may create it); loaders check for their files.

    Raises:
        GraphRMAError: ``root`` (or ``$GRAPH_RMA_DATA``) names a file, or a path below a file: nothing is looked for,
            or downloaded, there.
    """
    if root is not None:
        return _folder(Path(root).expanduser(), "root")
    env = os.environ.get(ENV_VAR)
    if env:
        return _folder(Path(env).expanduser(), f"${ENV_VAR}") / name
    return _cache_base() / "data" / name  # created by the first successful download, not before


def _folder(path: Path, what: str) -> Path:
    """``path``, unless it or a folder above it is an existing file (``GraphRMAError`` naming ``what``)."""
    for p in (path, *path.parents):
        if p.exists():
            if not p.is_dir():
                where = "is a file" if p == path else f"is below {p}, which is a file"
                raise GraphRMAError(f"{what}: {path} {where}, not a data folder")
            break
    return path


def is_default_root(name: str, root: PathLike) -> bool:
    """Whether ``root`` is where :func:`resolve_root` looks for ``name`` without an explicit ``root``."""
    try:
        return Path(root) == resolve_root(name)
    except ValueError:
        return False


def sha256sum(path: PathLike, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(chunk), b""):
            h.update(block)
    return h.hexdigest()


def download_verified(url: str, dest: PathLike, sha256: Optional[str] = None, timeout: float = 30.0) -> Path:
    """Download ``url`` to ``dest`` atomically and check its SHA-256; raise :class:`DataNotFoundError` if either fails.

    ``pooch`` does the transfer and the check, into a temporary folder outside ``dest``'s: only a complete, verified
    file creates ``dest``'s folder (a failed download leaves no trace in the data folder), and readers never see half
    a file.
    """
    import pooch

    dest = Path(dest)
    pooch.get_logger().setLevel("WARNING")  # no "Downloading data from ..." line per file
    with tempfile.TemporaryDirectory(prefix="graph_rma.download.") as tmp:
        try:
            downloader = pooch.HTTPDownloader(timeout=timeout) if url.startswith(("http://", "https://")) else None
            got = Path(
                pooch.retrieve(
                    url,
                    known_hash=f"sha256:{sha256}" if sha256 else None,
                    fname=dest.name,
                    path=tmp,
                    downloader=downloader,
                    progressbar=False,
                )
            )
        except ValueError as exc:
            if "hash" in str(exc):
                raise DataNotFoundError(f"checksum mismatch for {url}: expected sha256 {sha256} ({exc})") from exc
            raise DataNotFoundError(f"could not download {url} to {dest}: {exc}") from exc
        except Exception as exc:  # network down, HTTP error, disk full
            raise DataNotFoundError(f"could not download {url} to {dest}: {exc}") from exc
        try:
            dest.parent.mkdir(parents=True, exist_ok=True)
            # Copy beside dest, then rename: atomic even when the temporary folder is on another file system.
            part = dest.parent / f".{dest.name}.{os.getpid()}.part"
            try:
                shutil.copyfile(got, part)
                os.replace(part, dest)
            finally:
                if part.exists():
                    part.unlink()
        except OSError as exc:  # a read-only or full data folder
            raise DataNotFoundError(f"could not download {url} to {dest}: {exc}") from exc
    return dest


def missing_data_message(name: str, root: Path, files, hint: str = "", family: Optional[str] = None) -> str:
    """One clear message: which files are missing, where they were looked for (saying so when that folder does not
    exist), and how to provide them. ``family`` is the folder :func:`resolve_root` gives the loader under
    ``$GRAPH_RMA_DATA`` (``planetoid``, ``pyg``, ``agenda``, ...; default ``root``'s own name, right when ``root``
    came from ``$GRAPH_RMA_DATA`` or the cache)."""
    files = list(files)
    root = Path(root)
    shown = ", ".join(str(f) for f in files[:4]) + (" ..." if len(files) > 4 else "")
    where = f"{root}, which does not exist" if not root.exists() else str(root)
    folder = family or root.name
    env = f"set ${ENV_VAR} to a folder that contains '{folder}/'"
    if family is not None and not is_default_root(family, root):  # an explicit root: the variable is not read
        env += " and leave root unset"
    return (
        f"{name}: missing {shown} under {where}. Put the dataset files there, pass root=... "
        f"(or --root), or {env}; downloading from the canonical source failed or was not possible. {hint}"
    ).strip()


def verify_checksums(
    folder: PathLike, expected: Dict[str, str], missing: Callable[[List[str]], str], source: Callable[[str], str]
) -> None:
    """Raise :class:`DataNotFoundError` naming the first file of ``expected`` (``{file name: sha256}``) in ``folder``
    that is missing (message ``missing([name])``) or whose checksum differs (truncated or corrupt; the message says
    where the original is: ``source(name)``)."""
    folder = Path(folder)
    for fname, digest in expected.items():
        path = folder / fname
        if not path.is_file():
            raise DataNotFoundError(missing([fname]))
        got = sha256sum(path)
        if got != digest:
            raise DataNotFoundError(
                f"{path}: truncated or corrupt raw file ({path.stat().st_size} bytes, sha256 {got}, expected "
                f"{digest}). Replace {fname} with the original from {source(fname)}."
            )
