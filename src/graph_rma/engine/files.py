r"""Result files written atomically: readers see the old file or the new one, never half of one.

A crash never leaves a half-written result; every task writes its JSON/CSV/text outputs through these helpers.
Files get the permissions of any file the user creates (``0666`` minus the umask, e.g. ``0644``), not the ``0600``
of :func:`tempfile.mkstemp`.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import re
import secrets
from pathlib import Path
from typing import Any, Iterable, List, Mapping, Optional, Union

from .._errors import GraphRMAError

PathLike = Union[str, os.PathLike]

__all__ = [
    "PathLike",
    "slug",
    "read_lines",
    "atomic_write_bytes",
    "atomic_write_text",
    "write_json",
    "read_json",
    "write_csv",
]


def atomic_write_bytes(path: PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` through a temporary file in the same folder and ``os.replace``.

    The file is created with mode ``0o666`` so that the kernel applies the user's umask, as for any new file."""
    path = Path(path)
    if path.is_dir():  # os.replace would name the temporary file: name the user's path instead
        raise IsADirectoryError(21, "is a folder, not a file", str(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        tmp = path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
            break
        except FileExistsError:  # pragma: no cover - 48 random bits
            continue
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return path


def atomic_write_text(path: PathLike, text: str) -> Path:
    """Write ``text`` to ``path`` through a temporary file and ``os.replace``: readers see old or new, never half."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def write_json(path: PathLike, obj: Any) -> Path:
    return atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=False) + "\n")


def read_json(path: PathLike) -> Any:
    """The JSON value in ``path``; a file that is not JSON (or not UTF-8) is a :class:`~graph_rma.GraphRMAError`
    naming it."""
    with open(path, encoding="utf-8-sig") as f:  # a byte-order mark (some editors write one) is not content
        try:
            return json.load(f)
        except ValueError as exc:  # json.JSONDecodeError, UnicodeDecodeError
            raise GraphRMAError(f"{path}: not a JSON file ({exc})") from exc


def write_csv(path: PathLike, rows: Iterable[Mapping[str, Any]], fieldnames: Optional[List[str]] = None) -> Path:
    rows = list(rows)
    if fieldnames is None:
        fieldnames = []
        for row in rows:
            fieldnames.extend(k for k in row if k not in fieldnames)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=fieldnames)
    writer.writeheader()
    writer.writerows(rows)
    return atomic_write_text(path, buf.getvalue())


def slug(text: str) -> str:
    """A file-name-safe, unique folder name for ``text`` (e.g. a variant spec): its safe characters, cut at 80, plus
    6 hex digits of its SHA-1 so that two texts never share a folder."""
    clean = re.sub(r"[^A-Za-z0-9.=_-]+", "_", text).strip("_")
    return f"{clean[:80]}-{hashlib.sha1(text.encode()).hexdigest()[:6]}"


def read_lines(path: PathLike) -> List[str]:
    """The lines of a UTF-8 text file without their line ends, as written by ``"\\n".join(lines) + "\\n"``
    (hypotheses, references): ``\\r\\n`` counts as one end, a missing final newline is fine, and U+0085 and
    similar characters are not line breaks. A UTF-8 byte-order mark at the start (some editors write one) is not
    part of the first line."""
    with open(path, encoding="utf-8-sig", newline="") as f:
        text = f.read()
    lines = text.replace("\r\n", "\n").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines
