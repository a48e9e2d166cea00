"""Where a task runs: one check of a ``device`` argument, and how much memory that device has."""

from __future__ import annotations

import os
from typing import Optional, Union

import torch

from .._errors import GraphRMAError

__all__ = ["device_memory", "resolve_device"]


def resolve_device(device: Optional[Union[str, torch.device]] = None) -> torch.device:
    """``device`` as a :class:`torch.device`: ``"cpu"``, ``"cuda"`` or ``"cuda:N"``; ``None``: CUDA when available,
    else the CPU.

    Raises:
        GraphRMAError: naming ``device``: not a device name, a kind the tasks do not run on (``mps``, ``xpu``,
            ``meta``, ...), or a CUDA device this machine does not have.
    """
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise GraphRMAError(f"device: expected cpu, cuda or cuda:N, got {device!r}") from None
    if dev.type not in ("cpu", "cuda") or (dev.type == "cpu" and dev.index not in (None, 0)):
        raise GraphRMAError(
            f"device: expected cpu, cuda or cuda:N, got {device!r} (the tasks train on the CPU or on CUDA GPUs only)"
        )
    if dev.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise GraphRMAError(f"device: {device!r} asked for, but this torch build sees no CUDA device")
        if dev.index is not None and dev.index >= count:
            raise GraphRMAError(
                f"device: {device!r} asked for, but this machine has {count} CUDA device(s): cuda:0 to cuda:{count - 1}"
            )
    return dev


def device_memory(device: torch.device) -> Optional[int]:
    """Bytes of memory of ``device``: a CUDA GPU's total memory, else the machine's physical memory (``None`` where
    the system does not say)."""
    device = torch.device(device)
    if device.type == "cuda":
        return int(torch.cuda.get_device_properties(device.index or 0).total_memory)
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):  # pragma: no cover - not a POSIX system
        return None
