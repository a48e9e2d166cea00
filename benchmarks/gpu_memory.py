"""Memory and speed of one attention layer's training step on a device: the contenders, one measured step, and the
search for the largest graph each contender trains. Used by ``benchmarks/gpu_suite.py``.

A contender is a function ``make(x, edge_index, y) -> step`` (it builds the layer and whatever it precomputes per
graph; ``step()`` is one forward + backward). Every contender of one comparison sees the same graph.
"""

from __future__ import annotations

import gc
import time
from typing import Any, Callable, Dict, List, Optional

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


def contender(kind: str, name: str, *, heads: int, channels: int, dropout: float, device, dtype, turbo=None) -> Make:
    """``name`` is ``stock`` (PyG's ``GATConv``/``GATv2Conv``), ``lean`` (``lean=True``) or ``turbo`` (turbo-gnn's
    fused GATv2 aggregation on a stock ``GATv2Conv``'s parameters; ``kind`` must be ``gatv2``)."""
    from torch_geometric.nn import GATConv, GATv2Conv

    from graph_rma.nn import RepulsiveGATConv, RepulsiveGATv2Conv

    def make(x, edge_index, y):
        torch.manual_seed(0)
        if name == "lean":
            cls = RepulsiveGATv2Conv if kind == "gatv2" else RepulsiveGATConv
            conv = cls(x.size(1), channels, heads=heads, dropout=dropout, lean=True)
        else:
            conv = (GATv2Conv if kind == "gatv2" else GATConv)(x.size(1), channels, heads=heads, dropout=dropout)
        conv = conv.to(device=device, dtype=dtype).train()
        if name != "turbo":
            return _loss_step(lambda: conv(x, edge_index), conv, y)
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
