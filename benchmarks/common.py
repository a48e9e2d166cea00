"""Shared pieces of the benchmark scripts (run them as ``python -m benchmarks.<name>`` from the repo root).

Every comparison is timed interleaved (A, B, C, A, B, C, ...) in one process, so that load changes on a shared
machine hit every contender alike, and is reported as medians and ratios to the first contender.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, Mapping, Optional

import torch
import torch.nn.functional as F

#: Every named comparison of this process, as :func:`compare` returned it, and the tables of the scripts that
#: measure more than times (bench_memory, bench_scaling): what ``--json`` writes.
RECORDED: Dict[str, Any] = {}


def write_results(path: str, command: str, load_before: float) -> None:
    """Add this process's recorded comparisons, with the conditions they ran under, as one more run in ``path``
    (a JSON list of runs, so that repeated runs show the spread; benchmarks/report.py renders them)."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    runs = json.loads(out.read_text()) if out.is_file() else []
    meta = {
        "command": command,
        "device": device_name(),
        "torch": torch.__version__,
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "load_average_before": round(load_before, 2),
        "date": time.strftime("%Y-%m-%d"),
    }
    runs.append({"meta": meta, "comparisons": RECORDED})
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(json.dumps(runs, indent=2) + "\n")
    tmp.replace(out)
    print(f"added this run to {out} ({len(runs)} runs)")


def add_json_option(parser) -> float:
    """``--json FILE`` on a script's parser; returns the load average now (recorded with the run)."""
    parser.add_argument("--json", help="also append every comparison, with the conditions of this run, to this file")
    return os.getloadavg()[0]


def save_if_asked(args, argv, script: str, load_before: float) -> None:
    """After a script's comparisons: append them to ``--json`` when it was given."""
    if args.json:
        words = argv if argv is not None else sys.argv[1:]
        write_results(args.json, f"python -m benchmarks.{script} " + " ".join(words), load_before)


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def random_graph(num_nodes: int, num_edges: int, num_features: int, num_classes: int, seed: int = 0, device=None):
    """Random features, edges and labels (a stand-in of a given size)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(num_nodes, num_features, generator=g)
    edge_index = torch.randint(0, num_nodes, (2, num_edges), generator=g)
    y = torch.randint(0, num_classes, (num_nodes,), generator=g)
    return x.to(device), edge_index.to(device), y.to(device)


def train_step(model, x, edge_index, y, lr: float = 0.005, weight_decay: float = 0.0, sampler=None):
    """A closure doing one full-batch training step (Adam), optionally with ``sampler(model)`` attached."""
    opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    if sampler is not None:
        sampler(model).attach(opt)

    def step():
        opt.zero_grad()
        F.cross_entropy(model(x, edge_index), y).backward()
        opt.step()

    return step


def compare(
    name: Optional[str],
    fns: Mapping[str, Callable[[], object]],
    repeats: int = 30,
    warmup: int = 2,
    baseline: Optional[str] = None,
) -> Dict[str, Dict[str, float]]:
    """Time each function once per round, interleaved; print and return medians and ratios to ``baseline``
    (default: the first entry).

    ``ratio`` is the ratio of the medians; ``paired`` the median over rounds of the per-round ratio, which is more
    robust when other processes share the CPU.
    """
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    times: Dict[str, list] = {k: [] for k in fns}
    for _ in range(repeats):
        for k, fn in fns.items():
            _sync()
            t = time.perf_counter()
            fn()
            _sync()
            times[k].append(time.perf_counter() - t)
    base = baseline or next(iter(fns))
    out = {}
    if name:
        print(f"\n{name}")
    for k, v in times.items():
        m = statistics.median(v)
        paired = statistics.median(a / b for a, b in zip(v, times[base]))
        out[k] = {"ms": 1e3 * m, "ratio": m / statistics.median(times[base]), "paired": paired}
        if name is not None:
            print(f"  {k:<44s} {m * 1e3:9.2f} ms   ratio {out[k]['ratio']:5.3f}   paired {paired:5.3f}")
    if name is not None:
        RECORDED[name] = out
    return out


def device_name() -> str:
    if torch.cuda.is_available():
        return torch.cuda.get_device_name()
    import platform

    return f"CPU ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)"
