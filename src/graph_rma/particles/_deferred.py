"""Checks whose values live on the device, read without stalling it: :class:`DeferredFlags`.

Reading a CUDA value on the host (``bool(t)``, ``t.item()``, ``if t: ...``) waits until every kernel queued before it
has run, so the host stops queueing work. A sampler's checks (finite gradients and parameters, identical heads) are
therefore computed on the device, copied to pinned host memory asynchronously, and read once the copy has arrived:
on CUDA usually at the next step, at the latest when :meth:`DeferredFlags.poll` is asked to wait. On the CPU the
values are host memory and are read at once.
"""

from __future__ import annotations

from collections import deque
from typing import Callable, Deque, Optional, Tuple

import numpy as np
import torch
from torch import Tensor

Report = Callable[[np.ndarray], None]


class DeferredFlags:
    """A queue of device flag tensors, each with the function that reads it (``report(values)``, values a numpy
    array, which raises or warns as the flags say)."""

    def __init__(self) -> None:
        self._queue: Deque[Tuple[Tensor, Optional[torch.cuda.Event], Report]] = deque()

    def add(self, flags: Tensor, report: Report) -> None:
        """Queue ``flags`` (a tensor computed on its device; not read here)."""
        flags = flags.detach()
        event = None
        if flags.device.type == "cuda":
            host = torch.empty(flags.shape, dtype=flags.dtype, pin_memory=True)
            host.copy_(flags, non_blocking=True)
            event = torch.cuda.Event()
            event.record()
        elif flags.device.type != "cpu":  # other accelerators: a plain (synchronising) copy
            host = flags.to("cpu")
        else:
            host = flags
        self._queue.append((host, event, report))

    def poll(self, wait: bool = False) -> None:
        """Report every queued flag whose values have reached the host, oldest first (all of them with ``wait``).
        A report that raises leaves the flags after it queued."""
        while self._queue:
            host, event, report = self._queue[0]
            if event is not None and not event.query():
                if not wait:
                    return
                event.synchronize()
            self._queue.popleft()
            report(host.numpy())

    def __len__(self) -> int:
        return len(self._queue)
