"""Memory and speed of one attention layer's training step on a device: the contenders, one measured step, and the
search for the largest graph each contender trains. Used by ``benchmarks/gpu_suite.py``.

A contender is a function ``make(x, edge_index, y) -> step`` (it builds the layer and whatever it precomputes per
graph; ``step()`` is one forward + backward). Every contender of one comparison sees the same graph.
"""

from __future__ import annotations

import gc
import importlib
import importlib.util
import os
import time
from contextlib import contextmanager
from typing import Any, Callable, Dict, Iterator, List, Optional

import torch
import torch.nn.functional as F

Step = Callable[[], None]
Make = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], Step]


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _loss_step(forward: Callable[[], torch.Tensor], module: torch.nn.Module, y: torch.Tensor) -> Step:
    def step():
        module.zero_grad(set_to_none=True)
        F.cross_entropy(forward().float(), y).backward()

    return step


#: The lean path's strategies the suite compares (``lean=True`` with ``GRAPH_RMA_LEAN`` set to the name).
STRATEGIES = ("chunked", "fused")


@contextmanager
def lean_strategy(name: Optional[str]) -> Iterator[None]:
    """Force the lean path's strategy (``GRAPH_RMA_LEAN``, read at forward time) inside the block."""
    old = os.environ.get("GRAPH_RMA_LEAN")
    if name is not None:
        os.environ["GRAPH_RMA_LEAN"] = name
    try:
        yield
    finally:
        if name is not None:
            if old is None:
                os.environ.pop("GRAPH_RMA_LEAN", None)
            else:
                os.environ["GRAPH_RMA_LEAN"] = old


def fused_unavailable(device) -> Optional[str]:
    """Why the fused kernels cannot run on ``device`` (``None`` when they can): Triton missing, the kernels' module
    missing, or the CPU without Triton's interpreter (``TRITON_INTERPRET=1``, set before Triton compiles them)."""
    if importlib.util.find_spec("triton") is None:
        return "Triton is not installed"
    try:
        importlib.import_module("graph_rma.nn.lean.fused")
    except ImportError as e:
        return f"the fused kernels cannot be imported ({e})"
    if device.type == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
        return "on the CPU the fused kernels run under Triton's interpreter only (TRITON_INTERPRET=1)"
    if device.type not in ("cpu", "cuda"):
        return f"the fused kernels run on CUDA (or the CPU under Triton's interpreter), not {device.type}"
    return None


def contender(kind: str, name: str, *, heads: int, channels: int, dropout: float, device, dtype, turbo=None) -> Make:
    """``name`` is ``stock`` (PyG's ``GATConv``/``GATv2Conv``), ``chunked`` or ``fused`` (``lean=True`` with that
    strategy forced, :func:`lean_strategy`; ``lean`` is ``chunked``, as recorded before the fused kernels) or
    ``turbo`` (turbo-gnn's fused GATv2 aggregation on a stock ``GATv2Conv``'s parameters; ``kind`` must be
    ``gatv2``)."""
    from torch_geometric.nn import GATConv, GATv2Conv

    from graph_rma.nn import RepulsiveGATConv, RepulsiveGATv2Conv

    strategy = "chunked" if name == "lean" else name if name in STRATEGIES else None

    def make(x, edge_index, y):
        torch.manual_seed(0)
        if strategy is not None:
            cls = RepulsiveGATv2Conv if kind == "gatv2" else RepulsiveGATConv
            conv = cls(x.size(1), channels, heads=heads, dropout=dropout, lean=True)
        else:
            conv = (GATv2Conv if kind == "gatv2" else GATConv)(x.size(1), channels, heads=heads, dropout=dropout)
        conv = conv.to(device=device, dtype=dtype).train()
        if name != "turbo":
            step = _loss_step(lambda: conv(x, edge_index), conv, y)

            def forced():
                with lean_strategy(strategy):
                    step()

            return forced
        from benchmarks.turbo_peer import TurboGATv2

        layer = TurboGATv2(conv, turbo)
        graph = layer.graph(edge_index, x.size(0))
        return _loss_step(lambda: layer(x, graph), conv, y)

    return make


def device_graph(edges: int, features: int, classes: int, device, dtype, seed: int = 0):
    """A random graph of ``edges`` edges over ``edges // 10`` nodes, drawn on ``device`` (drawing hundreds of
    millions of edges on the host would cost more than the step)."""
    n = max(edges // 10, 2)
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(n, features, generator=g, device=device, dtype=dtype)
    edge_index = torch.randint(0, n, (2, edges), generator=g, device=device)
    y = torch.randint(0, classes, (n,), generator=g, device=device)
    return x, edge_index, y


def measure(make: Make, x, edge_index, y, device) -> Dict[str, Any]:
    """One step after a first one (which builds the edges' CSRs): its time and, on CUDA, its peak memory above what was
    allocated before it (inputs, parameters, cached CSRs), per edge."""
    step = make(x, edge_index, y)
    step()
    _sync(device)
    if device.type == "cuda":
        base = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
    start = time.perf_counter()
    step()
    _sync(device)
    ms = 1e3 * (time.perf_counter() - start)
    peak = (torch.cuda.max_memory_allocated(device) - base) if device.type == "cuda" else None
    return {"ms": ms, "bytes_per_edge": None if peak is None else peak / edge_index.size(1), "step": step}


class DeviceLost(RuntimeError):
    """A probe failed with an error that may have left the device unusable (not an out-of-memory)."""


def _usable(device) -> bool:
    try:
        torch.ones(1, device=device).add_(1)
        _sync(device)
        return True
    except RuntimeError:
        return False


def probe(make: Make, edges: int, features: int, classes: int, device, dtype) -> Dict[str, Any]:
    """Whether a contender trains a graph of ``edges`` edges: ``{"ok": True, "ms", "bytes_per_edge"}`` or
    ``{"ok": False, "error"}``; everything the probe allocated is freed before it returns."""

    def attempt():  # every tensor of the probe lives in this frame, gone once it returns or its error is handled
        m = measure(make, *device_graph(edges, features, classes, device, dtype), device)
        return {"ok": True, "ms": m["ms"], "bytes_per_edge": m["bytes_per_edge"]}

    result: Dict[str, Any]
    try:
        result = attempt()
    except torch.OutOfMemoryError:
        result = {"ok": False, "error": "out of memory"}
    except RuntimeError as e:  # errors other than OOM: kernels refusing a size, or worse
        result = {"ok": False, "error": str(e).strip().splitlines()[0][:200]}
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
    if not result["ok"] and result["error"] != "out of memory" and not _usable(device):
        raise DeviceLost(result["error"])
    return result


def largest(
    make: Make,
    device,
    dtype,
    start: int,
    seconds: float,
    features: int = 64,
    classes: int = 64,
    precision: float = 1.1,
    ceiling: int = 4 * 10**9,
) -> Dict[str, Any]:
    """The largest edge count a contender trains: doubling from ``start`` until a probe fails, then bisecting
    (geometrically) until the last success and the first failure are within ``precision`` of each other, or until
    ``seconds`` have passed (then ``bounded`` is true and the answer is a lower bound at the last success)."""
    t0 = time.monotonic()
    good: Optional[int] = None
    best: Dict[str, Any] = {}
    bad: Optional[int] = None
    failure = ""
    probes: List[int] = []
    edges = start
    while bad is None and edges <= ceiling and time.monotonic() - t0 < seconds:
        r = probe(make, edges, features, classes, device, dtype)
        probes.append(edges)
        if r["ok"]:
            good, best, edges = edges, r, edges * 2
        else:
            bad, failure = edges, r["error"]
    while good is not None and bad is not None and bad / good > precision and time.monotonic() - t0 < seconds:
        mid = int(round((good * bad) ** 0.5))
        r = probe(make, mid, features, classes, device, dtype)
        probes.append(mid)
        if r["ok"]:
            good, best = mid, r
        else:
            bad, failure = mid, r["error"]
    done = bad is not None and good is not None and bad / good <= precision
    return {
        "largest_edges": good or 0,
        "first_failing_edges": bad,
        "failure": failure,
        "ms_at_largest": best.get("ms"),
        "bytes_per_edge_at_largest": best.get("bytes_per_edge"),
        "probes": probes,
        "bounded": not done,
        "seconds": time.monotonic() - t0,
    }


def copy_bandwidth(device, nbytes: int = 1 << 30, repeats: int = 5) -> float:
    """The device's memory bandwidth in GB/s: bytes read plus bytes written per second by a copy of ``nbytes``
    within the device (the best of ``repeats``), the ``bandwidth`` of ``benchmarks/bound.py``'s bound."""
    a = torch.ones(nbytes // 4, dtype=torch.float32, device=device)
    b = torch.empty_like(a)
    best = float("inf")
    for _ in range(repeats):
        _sync(device)
        start = time.perf_counter()
        b.copy_(a)
        _sync(device)
        best = min(best, time.perf_counter() - start)
    del a, b
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return 2 * nbytes / best / 1e9
