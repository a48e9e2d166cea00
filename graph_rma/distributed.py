r"""Multi-process training with ``torch.distributed``: the engine users already run (``torchrun``, DDP).

The samplers need nothing special under :class:`~torch.nn.parallel.DistributedDataParallel`:

* DDP all-reduces (averages) gradients during ``loss.backward()``; a sampler attached with
  :meth:`~graph_rma.particles.ParticleSampler.attach` runs in the optimizer's step pre-hook, i.e. *after* the
  all-reduce, on identical gradients on every rank.
* SPOS/SGLD noise comes from the sampler's own generator seeded with ``seed``; the same seed on every rank
  draws the same noise, so replicas stay bitwise identical (tested with two gloo processes).

Launch with ``torchrun --nproc_per_node N script.py``; :func:`init_from_env` reads torchrun's variables and picks
``nccl`` on GPU and ``gloo`` on CPU. Without those variables everything runs as a single process.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional

import torch
import torch.distributed as dist

__all__ = ["DistInfo", "init_from_env", "is_main_process", "all_reduce_mean", "cleanup"]


@dataclass(frozen=True)
class DistInfo:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = torch.device("cpu")

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


def init_from_env(backend: Optional[str] = None, device: Optional[str] = None) -> DistInfo:
    """Initialise the default process group from torchrun's ``RANK``/``WORLD_SIZE``/``LOCAL_RANK`` if present.

    Args:
        backend: ``"gloo"`` or ``"nccl"``; default ``nccl`` when CUDA is available, else ``gloo``.
        device: ``"cpu"`` or ``"cuda"``; default CUDA when available. Each rank uses ``cuda:LOCAL_RANK``.
    """
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    use_cuda = (device or ("cuda" if torch.cuda.is_available() else "cpu")) == "cuda"
    dev = torch.device(f"cuda:{local}") if use_cuda else torch.device("cpu")
    if use_cuda:
        torch.cuda.set_device(dev)
    if world > 1 and not dist.is_initialized():
        backend = backend or ("nccl" if use_cuda else "gloo")
        if backend not in ("gloo", "nccl", "mpi"):
            raise ValueError(f"backend: expected 'gloo', 'nccl' or 'mpi', got {backend!r}")
        dist.init_process_group(backend=backend)
    return DistInfo(rank, world, local, dev)


def is_main_process() -> bool:
    return not dist.is_initialized() or dist.get_rank() == 0


def all_reduce_mean(value: torch.Tensor) -> torch.Tensor:
    """Mean of ``value`` over ranks (a copy; unchanged when not distributed)."""
    value = value.detach().clone()
    if dist.is_initialized() and dist.get_world_size() > 1:
        dist.all_reduce(value, op=dist.ReduceOp.SUM)
        value /= dist.get_world_size()
    return value


def cleanup() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()
