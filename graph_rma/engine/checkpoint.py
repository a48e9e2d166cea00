r"""Checkpoints: written atomically, loaded with ``weights_only=True`` (no code runs), with every RNG state a run
needs to resume exactly (Python, torch CPU and, when present, CUDA).
"""
from __future__ import annotations

import io
import random
from pathlib import Path
from typing import Any, Dict, Union

import torch

from .files import PathLike, atomic_write_bytes

__all__ = ["save_checkpoint", "load_checkpoint", "rng_state", "set_rng_state"]


def save_checkpoint(path: PathLike, state: Dict[str, Any]) -> Path:
    """Save ``state`` (tensors, numbers, strings, lists, dicts only) atomically with :func:`torch.save`."""
    buf = io.BytesIO()
    torch.save(state, buf)
    return atomic_write_bytes(path, buf.getvalue())


def load_checkpoint(path: PathLike, map_location: Union[str, torch.device, None] = "cpu") -> Dict[str, Any]:
    """Load a checkpoint written by :func:`save_checkpoint` with ``weights_only=True`` (no arbitrary code runs)."""
    return torch.load(path, map_location=map_location, weights_only=True)


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
