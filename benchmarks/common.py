"""Shared timing for the benchmark scripts: interleaved repeats, median, ratios against a peer in the same run."""
from __future__ import annotations

import statistics
import time
from typing import Callable, Dict, Mapping

import torch


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def interleaved_medians(fns: Mapping[str, Callable[[], object]], repeats: int = 30, warmup: int = 3) -> Dict[str, float]:
    """Median seconds per call of each function, timing them in turn (A, B, C, A, B, C, ...) so that load
    changes on a shared machine hit every contender alike."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    times: Dict[str, list] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            _sync()
            t0 = time.perf_counter()
            fn()
            _sync()
            times[name].append(time.perf_counter() - t0)
    return {name: statistics.median(ts) for name, ts in times.items()}


def device_name() -> str:
    if torch.cuda.is_available():
        return torch.cuda.get_device_name()
    import platform

    return f"CPU ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)"
