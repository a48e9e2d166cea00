"""Memory-lean edge attention: peak memory and step time per edge against stock PyG's GATConv (and DGL's).

    python -m benchmarks.bench_memory [--edges 1e5 1e6 2e6] [--time-edges 1e5 1e6] [--threads 2]
        [--contenders pyg ours lean dgl] [--v2] [--out results/memory]

One ``GATConv(64, 8, heads=8, dropout=0.6)`` (``--v2``: ``GATv2Conv``) or its equivalent in training mode on a random
graph with E edges over N = E / 10 nodes, 64 features, a cross-entropy loss over 64 classes:

* **memory**: forward + backward, peak RSS above the inputs (graph, features, labels, parameters), divided by E.
  Each (contender, size) runs in its own process, with 1 thread and glibc told to keep freed memory
  (``MALLOC_MMAP_MAX_=0``, ``MALLOC_TRIM_THRESHOLD_`` huge: freed blocks stay in RSS, so RSS is the allocator's
  high-water mark, holes included; ``--glibc-defaults`` leaves glibc as it is). The peak is the kernel's
  ``VmHWM``, reset (``/proc/self/clear_refs``) once the inputs exist.
* **time**: one training step (forward, backward, Adam), contenders interleaved in one process per size
  (:func:`benchmarks.common.compare`), ``--threads`` threads, glibc defaults.

Contenders: ``pyg`` (``torch_geometric.nn.GATConv``), ``ours`` (``RepulsiveGATConv``, default path), ``lean``
(``RepulsiveGATConv(..., lean=True)``), ``dgl`` (``dgl.nn.GATConv`` with ``feat_drop=0, attn_drop=0.6``, only if
``import dgl`` works). Prints one table per measurement with ratios to ``pyg`` and writes ``memory.json`` and
``memory.png`` (bytes per edge and seconds per step against edges, log-log) into ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from typing import Optional

import torch
import torch.nn.functional as F

from benchmarks.common import RECORDED, add_json_option, compare, random_graph, save_if_asked
from graph_rma import GraphRMAError

FEATURES, HEADS, CHANNELS, CLASSES = 64, 8, 8, 64


def dgl_problem() -> str:
    """Why DGL cannot be measured here ("" when ``import dgl`` works). The newest DGL wheel on PyPI (2.1.0, CPU)
    ships graphbolt libraries only up to torch 2.2, so with torch 2.13 its import fails."""
    try:
        import dgl  # noqa: F401
    except Exception as exc:  # ImportError, or graphbolt's FileNotFoundError for an unsupported torch
        return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else 'no message'}"
    return ""


def build(name: str, x: torch.Tensor, edge_index: torch.Tensor, v2: bool = False):
    """``(module, forward)`` for one contender: ``forward()`` returns the ``[N, 64]`` output. ``v2``: GATv2
    (``GATv2Conv`` / ``RepulsiveGATv2Conv``) instead of GAT."""
    torch.manual_seed(0)
    if name == "pyg":
        from torch_geometric.nn import GATConv, GATv2Conv

        conv = (GATv2Conv if v2 else GATConv)(FEATURES, CHANNELS, heads=HEADS, dropout=0.6)
        return conv, lambda: conv(x, edge_index)
    if name in ("ours", "lean"):
        from graph_rma.nn import RepulsiveGATConv, RepulsiveGATv2Conv

        cls = RepulsiveGATv2Conv if v2 else RepulsiveGATConv
        conv = cls(FEATURES, CHANNELS, heads=HEADS, dropout=0.6, lean=name == "lean")
        return conv, lambda: conv(x, edge_index)
    if name == "dgl" and v2:
        raise GraphRMAError("contender: DGL has no GATv2 here")
    if name == "dgl":
        import dgl
        from dgl.nn import GATConv as DGLGATConv
        from torch_geometric.utils import add_self_loops, remove_self_loops

        ei, _ = add_self_loops(remove_self_loops(edge_index)[0], num_nodes=x.size(0))
        g = dgl.graph((ei[0], ei[1]), num_nodes=x.size(0))
        conv = DGLGATConv(FEATURES, CHANNELS, num_heads=HEADS, attn_drop=0.6)
        return conv, lambda: conv(g, x).reshape(x.size(0), -1)
    raise GraphRMAError(f"contender: unknown {name!r}")


def _rss_peak_kib() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM"))


def _rss_kib() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS"))


def _backward(forward, y: torch.Tensor, upstream: Optional[torch.Tensor], loss: str) -> None:
    """Forward and backward, holding no reference to the output (as a training loop holds none)."""
    if loss == "ce":
        F.cross_entropy(forward(), y).backward()
    else:  # the layer alone: a given gradient for its output
        forward().backward(upstream)


def one_memory(name: str, num_edges: int, loss: str = "ce", v2: bool = False) -> dict:
    N = max(num_edges // 10, 10)
    x, edge_index, y = random_graph(N, num_edges, FEATURES, CLASSES)
    upstream = torch.randn(N, HEADS * CHANNELS) if loss == "grad" else None  # an input only for --loss grad
    conv, forward = build(name, x, edge_index, v2)
    conv.train()
    small_x, small_ei, small_y = random_graph(100, 1000, FEATURES, CLASSES, seed=1)
    _, small_fwd = build(name, small_x, small_ei, v2)  # load kernels, allocator arenas, autograd engine
    _backward(small_fwd, small_y, torch.randn(100, HEADS * CHANNELS), loss)
    base = _rss_kib()
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset VmHWM to the current RSS
    _backward(forward, y, upstream, loss)
    peak = _rss_peak_kib()
    return {
        "contender": name,
        "edges": num_edges,
        "nodes": N,
        "peak_above_inputs": (peak - base) * 1024,
        "bytes_per_edge": (peak - base) * 1024 / num_edges,
        "rss_before": base * 1024,
    }


def one_time(names, num_edges: int, repeats: int, v2: bool = False) -> dict:
    N = max(num_edges // 10, 10)
    x, edge_index, y = random_graph(N, num_edges, FEATURES, CLASSES)
    steps = {}
    for name in names:
        conv, forward = build(name, x, edge_index, v2)
        conv.train()
        opt = torch.optim.Adam(conv.parameters(), lr=0.005)

        def step(forward=forward, opt=opt):
            opt.zero_grad()
            F.cross_entropy(forward(), y).backward()
            opt.step()

        steps[name] = step
    res = compare(None, steps, repeats=repeats, warmup=1)
    return {"edges": num_edges, **{k: v for k, v in res.items()}}


def _run(args_list, env_extra=None) -> dict:
    env = dict(os.environ)
    env.update(env_extra or {})
    proc = subprocess.run(  # a process of its own, run as this module (from the repository root, like the parent)
        [sys.executable, "-m", "benchmarks.bench_memory"] + args_list, capture_output=True, text=True, env=env
    )
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["no message"])[-1]
        return {"error": f"exit code {proc.returncode}: {tail}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--edges", type=float, nargs="*", default=[1e5, 1e6, 2e6], help="sizes for the memory table")
    ap.add_argument(
        "--lean-edges", type=float, nargs="*", default=[], help="extra sizes measured for the lean path only (e.g. 1e7)"
    )
    ap.add_argument("--time-edges", type=float, nargs="*", default=[1e5, 1e6], help="sizes for the time table")
    ap.add_argument("--contenders", nargs="+", default=["pyg", "ours", "lean", "dgl"])
    ap.add_argument("--threads", type=int, default=2, help="threads for the time table (memory: 1)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", default="results/memory")
    ap.add_argument(
        "--loss",
        choices=["ce", "grad"],
        default="ce",
        help="memory: backward from a cross-entropy loss over the 64 outputs (ce) or from a given "
        "output gradient, an input (grad: the layer alone)",
    )
    ap.add_argument("--v2", action="store_true", help="GATv2 (GATv2Conv, RepulsiveGATv2Conv) instead of GAT")
    ap.add_argument(
        "--glibc-defaults",
        action="store_true",
        help="memory: leave glibc's defaults (freed memory returned, big blocks mmapped) instead of keeping "
        "freed memory, which makes the peak RSS depend on heap fragmentation",
    )
    load_before = add_json_option(ap)
    ap.add_argument(
        "--memory-limit",
        type=float,
        default=None,
        metavar="GIB",
        help="memory: cap each cell's address space at GIB GiB (RLIMIT_AS), so that a graph too large "
        "fails at once with an allocation error instead of the machine's out-of-memory killer "
        "(which first stalls the machine); the largest graph each contender trains is then the "
        "largest within the cap",
    )
    ap.add_argument("--one-memory", nargs=2, help=argparse.SUPPRESS)
    ap.add_argument("--one-time", type=float, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.v2 and "dgl" in args.contenders:
        args.contenders = [c for c in args.contenders if c != "dgl"]  # no DGL GATv2 contender
    problem = dgl_problem() if "dgl" in args.contenders else ""
    names = [c for c in args.contenders if c != "dgl" or not problem]
    if problem:
        print(f"dgl: left out, `import dgl` fails here ({problem})")
    if args.one_memory:
        if args.memory_limit:
            import resource

            cap = int(args.memory_limit * 2**30)
            resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
        torch.set_num_threads(1)
        print(json.dumps(one_memory(args.one_memory[0], int(float(args.one_memory[1])), args.loss, args.v2)))
        return
    if args.one_time:
        torch.set_num_threads(args.threads)
        print(json.dumps(one_time(names, int(args.one_time), args.repeats, args.v2)))
        return

    keep = {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": str(1 << 46), "OMP_NUM_THREADS": "1"}
    if args.glibc_defaults:
        keep = {"OMP_NUM_THREADS": "1"}
    memory = []
    print(
        f"memory: forward + backward ({args.loss} loss), peak RSS above the inputs, 1 thread, "
        f"{'glibc defaults' if args.glibc_defaults else 'freed memory kept'}"
    )
    print(f"{'edges':>10s}  " + "  ".join(f"{n:>16s}" for n in names) + "   (bytes per edge; ratio to pyg)")
    sizes = [(e, names) for e in args.edges] + [(e, ["lean"]) for e in args.lean_edges]
    cell = (
        ["--loss", args.loss]
        + ["--v2"] * args.v2
        + (["--memory-limit", str(args.memory_limit)] if args.memory_limit else [])
    )
    for e, who in sizes:
        row = {"edges": int(e)}
        for n in who:
            row[n] = _run(["--one-memory", n, str(e)] + cell, keep)
        memory.append(row)
        base = row.get("pyg", {}).get("bytes_per_edge")
        cells = []
        for n in names:
            r = row.get(n)
            if r is None:
                cells.append(f"{'-':>16s}")
            elif "error" in r:
                cells.append(f"{'failed':>16s}")
            else:
                ratio = f" ({base / r['bytes_per_edge']:4.1f}x)" if base else ""
                cells.append(f"{r['bytes_per_edge']:>9.0f}{ratio:>7s}")
        print(f"{int(e):>10d}  " + "  ".join(cells), flush=True)
        for n, r in row.items():
            if isinstance(r, dict) and "error" in r:
                print(f"    {n}: {r['error']}")

    timing = []
    if args.time_edges:
        print(
            f"\ntime: one training step (forward, backward, Adam), {args.threads} threads, interleaved, "
            f"median of {args.repeats}"
        )
        print(f"{'edges':>10s}  " + "  ".join(f"{n:>22s}" for n in names) + "   (ms; ratio / paired to pyg)")
    for e in args.time_edges:
        r = _run(
            ["--one-time", str(e), "--threads", str(args.threads), "--repeats", str(args.repeats), "--contenders"]
            + names
            + ["--v2"] * args.v2,
            {"OMP_NUM_THREADS": str(args.threads)},
        )
        timing.append(r)
        if "error" in r:
            print(f"{int(e):>10d}  failed ({r['error']})")
            continue
        print(
            f"{int(e):>10d}  "
            + "  ".join(f"{r[n]['ms']:>9.1f} {r[n]['ratio']:5.2f} / {r[n]['paired']:4.2f}" for n in names),
            flush=True,
        )

    os.makedirs(args.out, exist_ok=True)
    layer = "GATv2Conv" if args.v2 else "GATConv"
    RECORDED["memory"] = {
        "layer": layer,
        "loss": args.loss,
        "glibc_defaults": args.glibc_defaults,
        "memory_limit_gib": args.memory_limit,
        "rows": memory,
    }
    RECORDED["time"] = {"layer": layer, "threads": args.threads, "repeats": args.repeats, "rows": timing}
    with open(os.path.join(args.out, "memory.json"), "w") as f:
        json.dump({"memory": memory, "time": timing, "threads": args.threads}, f, indent=2)
    save_if_asked(args, argv, "bench_memory", load_before)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(1, 2, figsize=(9, 3.6))
    for i, n in enumerate(names):
        pts = [(row["edges"], row[n]["bytes_per_edge"]) for row in memory if "bytes_per_edge" in row.get(n, {})]
        if pts:
            ax[0].loglog(*zip(*pts), "o-", color=f"C{i}", label=n)
        pts = [(r["edges"], r[n]["ms"] / 1e3) for r in timing if n in r]
        if pts:
            ax[1].loglog(*zip(*pts), "o-", color=f"C{i}", label=n)
    ax[0].set(xlabel="edges", ylabel="peak bytes per edge (fwd + bwd)", title="memory (1 thread, freed kept)")
    ax[1].set(xlabel="edges", ylabel="seconds per training step", title=f"time ({args.threads} threads)")
    for a in ax:
        a.grid(True, which="both", alpha=0.3)
        if a.lines:
            a.legend()
    fig.suptitle(f"{'GATv2Conv' if args.v2 else 'GATConv'}(64, 8, heads=8, dropout=0.6), random graph, N = E / 10")
    fig.tight_layout()
    fig.savefig(os.path.join(args.out, "memory.png"), dpi=120)
    print(f"wrote {args.out}/memory.png and memory.json")


if __name__ == "__main__":
    main()
