"""Seeding: one call that seeds every random number generator a run uses."""

from __future__ import annotations

import operator
import random

import torch

from .._errors import GraphRMAError

__all__ = ["seed_everything"]


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy (if installed) and torch (CPU and CUDA).

    Raises:
        GraphRMAError: ``seed`` is not an integer torch accepts (``-2**63 <= seed < 2**64``).
    """
    try:
        seed = operator.index(seed)  # an int, or a NumPy integer
    except TypeError:
        raise GraphRMAError(f"seed: expected an integer, got {seed!r}") from None
    if not -(2**63) <= seed < 2**64:  # torch.manual_seed's range ("Overflow when unpacking long long" beyond it)
        raise GraphRMAError(f"seed: expected an integer in [0, 2**64 - 1], got {seed}")
    # torch_geometric.seed_everything does the same but hands NumPy seeds >= 2**32, which NumPy refuses.
    random.seed(seed)
    try:
        import numpy as np

        np.random.seed(seed % (2**32))
    except ImportError:  # pragma: no cover
        pass
    torch.manual_seed(seed)
