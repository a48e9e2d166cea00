"""Which strategy the lean path takes for a tensor: ``"fused"`` (:mod:`~graph_rma.nn.lean.fused`, Triton kernels),
``"chunked"`` (:mod:`~graph_rma.nn.lean.chunked`) or ``"csr"`` (:mod:`~graph_rma.nn.lean.per_head` where
:func:`~graph_rma.nn.lean.csr.csr_supported` allows, else chunked: the CPU path).

By default: ``"fused"`` for CUDA tensors when Triton can be imported (else ``"chunked"``, with one warning per
process), ``"chunked"`` under :func:`torch.compile`, ``"csr"`` elsewhere. The environment variable
:data:`ENV_VAR` (``GRAPH_RMA_LEAN=fused|chunked|csr``), read at every forward, forces one for any device, for tests
and benchmarks; ``fused`` on the CPU runs the kernels under Triton's interpreter, which needs ``TRITON_INTERPRET=1``
set before Triton is first imported.
"""

from __future__ import annotations

import importlib.util
import os
import warnings
from typing import Optional

import torch
from torch import Tensor

from ..._errors import GraphRMAError

__all__ = ["ENV_VAR", "STRATEGIES", "lean_strategy", "forced_strategy", "triton_available"]

#: The environment variable that forces a strategy.
ENV_VAR = "GRAPH_RMA_LEAN"
#: The strategies it may name.
STRATEGIES = ("fused", "chunked", "csr")

_WARNED = False


def forced_strategy() -> Optional[str]:
    """The strategy :data:`ENV_VAR` names, or ``None`` when it is unset or empty; another value raises
    :class:`~graph_rma.GraphRMAError`."""
    value = os.environ.get(ENV_VAR, "").strip()
    if not value:
        return None
    if value not in STRATEGIES:
        raise GraphRMAError(f"{ENV_VAR}: expected one of {', '.join(STRATEGIES)} (or unset), got {value!r}")
    return value


def triton_available() -> bool:
    """Whether Triton can be imported (without importing it)."""
    return importlib.util.find_spec("triton") is not None


def lean_strategy(t: Tensor) -> str:
    """The lean path's strategy for a tensor on ``t``'s device: ``"fused"``, ``"chunked"`` or ``"csr"``."""
    forced = forced_strategy()
    if forced is not None:
        return forced
    if torch.compiler.is_compiling():
        return "chunked"
    if t.device.type == "cuda":
        if triton_available():
            return "fused"
        global _WARNED
        if not _WARNED:
            _WARNED = True
            warnings.warn(
                "lean=True: Triton is not installed, so the fused GPU kernels are off; using the slower chunked "
                "path (pip install triton)",
                RuntimeWarning,
                stacklevel=3,
            )
        return "chunked"
    return "csr"
