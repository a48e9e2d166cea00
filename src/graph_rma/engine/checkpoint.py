r"""Checkpoints: written atomically, verified on load, loaded with ``weights_only=True`` (no code runs), with every
RNG state a run needs to resume exactly (Python, torch CPU and, when present, CUDA).

File format: one header line ``GRAPH_RMA_CHECKPOINT 1 <sha256 hex> <payload bytes>\n`` followed by the payload,
the bytes of :func:`torch.save`. :func:`load_checkpoint` recomputes the SHA-256 of the payload before
:func:`torch.load` sees it, so a truncated or bit-flipped file is refused with a :class:`CheckpointError` naming the
file, instead of an ``EOFError`` or, worse, silently altered weights. Files without the header (written before
checksums existed, or by plain :func:`torch.save`) are still loaded with ``weights_only=True`` after a warning that
they cannot be verified.
"""

from __future__ import annotations

import hashlib
import io
import random
import warnings
from pathlib import Path
from typing import Any, Dict, Union

import torch

from .._errors import GraphRMAError
from .files import PathLike, atomic_write_bytes

__all__ = ["CheckpointError", "save_checkpoint", "load_checkpoint", "rng_state", "set_rng_state"]

_MAGIC = b"GRAPH_RMA_CHECKPOINT"
_VERSION = b"1"


class CheckpointError(GraphRMAError):
    """A checkpoint file is truncated, corrupt or not a checkpoint; the message names the file."""


def save_checkpoint(path: PathLike, state: Dict[str, Any]) -> Path:
    """Save ``state`` (tensors, numbers, strings, lists, dicts only) atomically, with a SHA-256 of its bytes."""
    buf = io.BytesIO()
    torch.save(state, buf)
    payload = buf.getvalue()
    header = b" ".join([_MAGIC, _VERSION, hashlib.sha256(payload).hexdigest().encode(), str(len(payload)).encode()])
    return atomic_write_bytes(path, header + b"\n" + payload)


def _payload(path: Path, blob: bytes) -> bytes:
    """The verified payload of a checksummed file, or ``blob`` itself for a legacy file (with a warning)."""
    if not blob.startswith(_MAGIC + b" "):
        if not blob.startswith((b"PK\x03\x04", b"\x80")):  # neither torch.save's zip nor its legacy pickle
            raise CheckpointError(
                f"{path}: not a checkpoint (neither graph_rma's checkpoint format nor a file of torch.save)"
            )
        warnings.warn(
            f"{path}: checkpoint without a checksum (written by an older graph_rma or plain torch.save); "
            f"loading it unverified",
            RuntimeWarning,
            stacklevel=3,
        )
        return blob
    end = blob.find(b"\n", 0, 256)
    fields = blob[:end].split(b" ") if end > 0 else []
    if len(fields) != 4 or fields[1] != _VERSION or not fields[3].isdigit():
        raise CheckpointError(
            f"{path}: corrupt checkpoint header; the file cannot be used (delete it and train again, or restore a copy)"
        )
    payload, digest, size = blob[end + 1 :], fields[2].decode("ascii", "replace"), int(fields[3])
    if len(payload) != size:
        raise CheckpointError(
            f"{path}: truncated or corrupt checkpoint ({len(payload)} of {size} payload bytes); "
            f"the file cannot be used (delete it and train again, or restore a copy)"
        )
    got = hashlib.sha256(payload).hexdigest()
    if got != digest:
        raise CheckpointError(
            f"{path}: corrupt checkpoint (sha256 {got}, expected {digest}); the file cannot be "
            f"used (delete it and train again, or restore a copy)"
        )
    return payload


def load_checkpoint(path: PathLike, map_location: Union[str, torch.device, None] = "cpu") -> Dict[str, Any]:
    """Load a checkpoint written by :func:`save_checkpoint`: check its SHA-256, then :func:`torch.load` it with
    ``weights_only=True`` (no arbitrary code runs).

    Raises:
        CheckpointError: the file is truncated, bit-flipped, or holds something other than tensors and plain
            Python values; the message names the file.
        FileNotFoundError: there is no file at ``path``.
    """
    path = Path(path)
    payload = _payload(path, path.read_bytes())
    try:
        return torch.load(io.BytesIO(payload), map_location=map_location, weights_only=True)
    except Exception as exc:  # a legacy file that is truncated, or objects weights_only refuses
        lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()] or [type(exc).__name__]
        why = next((ln for ln in lines if "Unsupported global" in ln), lines[0])
        if "Unsupported global" in why:  # objects other than tensors and plain values: never unpickled
            why = f"holds objects that weights_only=True refuses: {why}"
        raise CheckpointError(f"{path}: not a loadable checkpoint ({type(exc).__name__}: {why})") from exc


def rng_state(device: Union[str, torch.device, None] = None) -> Dict[str, Any]:
    """Python and torch RNG states, in a form :func:`load_checkpoint` accepts (tensors and plain lists).

    With a CUDA ``device`` the state also holds that device's generator (``"cuda"``).
    """
    py = random.getstate()
    state: Dict[str, Any] = {"python": [py[0], list(py[1]), py[2]], "torch": torch.get_rng_state()}
    if device is not None and torch.device(device).type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(torch.device(device))
    return state


def set_rng_state(state: Dict[str, Any], device: Union[str, torch.device, None] = None) -> None:
    """Restore what :func:`rng_state` returned (the CUDA generator too when ``device`` is CUDA and it was saved)."""
    py = state["python"]
    random.setstate((py[0], tuple(py[1]), py[2]))
    torch.set_rng_state(state["torch"])
    if device is not None and torch.device(device).type == "cuda" and "cuda" in state:
        torch.cuda.set_rng_state(state["cuda"], torch.device(device))
