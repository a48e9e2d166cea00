r"""What every pipeline shares: seeding, atomic files, checkpoints loaded with ``weights_only=True``.

Pipelines (Cora, AGENDA, WebNLG, text) build on these instead of re-implementing them, so a crash never leaves a
half-written result or checkpoint, and a resumed run reads exactly what was saved.
"""
from __future__ import annotations

import csv
import io
import json
import os
import random
import tempfile
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Union

import torch

PathLike = Union[str, os.PathLike]


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy (if installed) and torch (CPU and CUDA)."""
    random.seed(seed)
    try:
        import numpy as np

        np.random.seed(seed % (2**32))
    except ImportError:  # pragma: no cover
        pass
    torch.manual_seed(seed)


def _atomic_write_bytes(path: PathLike, data: bytes) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
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
    return _atomic_write_bytes(path, text.encode("utf-8"))


def write_json(path: PathLike, obj: Any) -> Path:
    return atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=False) + "\n")


def read_json(path: PathLike) -> Any:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


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


def save_checkpoint(path: PathLike, state: Dict[str, Any]) -> Path:
    """Save ``state`` (tensors, numbers, strings, lists, dicts only) atomically with :func:`torch.save`."""
    buf = io.BytesIO()
    torch.save(state, buf)
    return _atomic_write_bytes(path, buf.getvalue())


def load_checkpoint(path: PathLike, map_location: Union[str, torch.device, None] = "cpu") -> Dict[str, Any]:
    """Load a checkpoint written by :func:`save_checkpoint` with ``weights_only=True`` (no arbitrary code runs)."""
    return torch.load(path, map_location=map_location, weights_only=True)


def rng_state() -> Dict[str, Any]:
    """Python and torch RNG states, in a form :func:`load_checkpoint` accepts (tensors and plain lists)."""
    py = random.getstate()
    return {
        "python": [py[0], list(py[1]), py[2]],
        "torch": torch.get_rng_state(),
    }


def set_rng_state(state: Dict[str, Any]) -> None:
    py = state["python"]
    random.setstate((py[0], tuple(py[1]), py[2]))
    torch.set_rng_state(state["torch"])
