"""Seeding: one call that seeds every random number generator a run uses."""

from __future__ import annotations

import random

import torch

from ..kinds import check_seed

__all__ = ["seed_everything"]


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy (if installed) and torch (CPU and CUDA).

    Raises:
        GraphRMAError: ``seed`` is not an integer in ``[0, 2**64 - 1]`` (:func:`graph_rma.kinds.check_seed`, the one
            seed check).
    """
    seed = check_seed(seed)  # an int, or a NumPy integer, in torch.manual_seed's range
    # torch_geometric.seed_everything does the same but hands NumPy seeds >= 2**32, which NumPy refuses.
    random.seed(seed)
    try:
        import numpy as np

        np.random.seed(seed % (2**32))
    except ImportError:  # pragma: no cover
        pass
    torch.manual_seed(seed)
