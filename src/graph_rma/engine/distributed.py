r"""Multi-process training with ``torch.distributed``: the engine users already run (``torchrun``, DDP).

The samplers need nothing special under :class:`~torch.nn.parallel.DistributedDataParallel`:

* DDP all-reduces (averages) gradients during ``loss.backward()``; a sampler attached with
  :meth:`~graph_rma.particles.ParticleSampler.attach` runs in the optimizer's step pre-hook, i.e. *after* the
  all-reduce, on identical gradients on every rank.
* SPOS/SGLD noise comes from the sampler's own generator seeded with ``seed``; the same seed on every rank
  draws the same noise, so replicas stay bitwise identical (tested with two gloo processes).

Launch with ``torchrun --nproc_per_node N script.py``; :func:`init_from_env` reads torchrun's variables and picks
``nccl`` on GPU and ``gloo`` on CPU. Without those variables everything runs as a single process.

The training loops (``graph-rma agenda|webnlg train``, ``examples/text_classification.py``) use the helpers below in
the same way: every rank builds the same global batch, keeps its :func:`shard`, sums its loss and divides by the
*global* count (tokens or examples) times ``1 / world_size``, so that DDP's gradient average equals the gradient of
the global batch's mean loss. :func:`replica_fingerprints` checks at the end that the replicas are bitwise equal.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from typing import Any, List, Optional, Sequence, Tuple, TypeVar

import torch
import torch.distributed as dist

from .._errors import GraphRMAError

__all__ = [
    "DistInfo",
    "init_from_env",
    "is_main_process",
    "rank_and_world",
    "shard",
    "all_reduce_mean",
    "all_reduce_sum",
    "barrier",
    "gather_objects",
    "replica_fingerprints",
    "cleanup",
]


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
            raise GraphRMAError(f"backend: expected 'gloo', 'nccl' or 'mpi', got {backend!r}")
        dist.init_process_group(backend=backend)
    return DistInfo(rank, world, local, dev)


def is_main_process() -> bool:
    return not dist.is_initialized() or dist.get_rank() == 0


def rank_and_world() -> Tuple[int, int]:
    """``(rank, world_size)`` of the default process group; ``(0, 1)`` when none is initialised."""
    if dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


T = TypeVar("T")


def shard(items: Sequence[T], rank: Optional[int] = None, world_size: Optional[int] = None) -> List[T]:
    """This rank's contiguous part of ``items`` (sizes differ by at most one, first ranks larger, like
    :func:`torch.tensor_split`); ``rank``/``world_size`` default to the process group's."""
    r, w = rank_and_world()
    rank = r if rank is None else rank
    world_size = w if world_size is None else world_size
    if world_size < 1 or not 0 <= rank < world_size:
        raise GraphRMAError(f"rank: expected 0 <= rank < world_size, got rank={rank}, world_size={world_size}")
    n, extra = divmod(len(items), world_size)
    start = rank * n + min(rank, extra)
    return list(items[start : start + n + (rank < extra)])


def all_reduce_mean(value: torch.Tensor) -> torch.Tensor:
    """Mean of ``value`` over ranks (a copy; unchanged when not distributed)."""
    value = value.detach().clone()
    if dist.is_initialized() and dist.get_world_size() > 1:
        dist.all_reduce(value, op=dist.ReduceOp.SUM)
        value /= dist.get_world_size()
    return value


def all_reduce_sum(value: torch.Tensor) -> torch.Tensor:
    """Sum of ``value`` over ranks (a copy; unchanged when not distributed)."""
    value = value.detach().clone()
    if dist.is_initialized() and dist.get_world_size() > 1:
        dist.all_reduce(value, op=dist.ReduceOp.SUM)
    return value


def barrier() -> None:
    """Wait for every rank (nothing when not distributed)."""
    if dist.is_initialized() and dist.get_world_size() > 1:
        dist.barrier()


def gather_objects(obj: Any) -> List[Any]:
    """Every rank's ``obj`` (picklable), in rank order, on every rank; ``[obj]`` when not distributed."""
    if not (dist.is_initialized() and dist.get_world_size() > 1):
        return [obj]
    out: List[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


def replica_fingerprints(module: torch.nn.Module) -> List[str]:
    """SHA-1 of each rank's parameters and buffers (their bytes, in ``state_dict`` order), in rank order.

    All equal means the replicas are bitwise identical. A collective: every rank must call it."""
    h = hashlib.sha1()
    for name, t in module.state_dict().items():
        h.update(name.encode())
        h.update(t.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy().tobytes())
    return gather_objects(h.hexdigest())


def cleanup() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()
