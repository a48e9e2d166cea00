"""Full-batch training of a 2-layer repulsive GAT (SVGD on every layer) on synthetic graphs of growing size.

    python -m benchmarks.bench_scaling [--edges 1e4 1e5 1e6 1e7] [--steps 3] [--sort-edges] [--lean]
        [--out results/scaling]

Each size runs in its own process so that peak memory (max RSS on CPU, max allocated on GPU) is that size's own.
Graphs have E edges over N = E / 10 nodes (average in-degree 10), 128 features, 7 classes; the model has 8 heads
x 8 hidden units in layer 1 and 8 averaged output heads. Prints a table with the log-log slope of time and
memory against edges (1.0 = linear) and saves a log-log PNG. Random edges in random order are the worst case for
the gathers and scatters of message passing on a CPU (every access a cache miss once the node arrays outgrow the
caches); ``--sort-edges`` orders them by target node first, as PyG's datasets come (``sort_edge_index``).

``--keep-freed-memory`` runs each size with glibc told to keep freed memory (``MALLOC_MMAP_MAX_=0``,
``MALLOC_TRIM_THRESHOLD_`` huge). By default glibc serves every block above 32 MiB with a fresh ``mmap`` and
returns it on free, so each training step page-faults (and zero-fills) all of its large activations again; that
cost per byte grows with the working set and made full-batch time per edge grow 2-3x from 1e5 to 1e7 edges here.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import time

import torch
import torch.nn.functional as F
from torch import nn

from benchmarks.common import RECORDED, add_json_option, save_if_asked


def one(num_edges: int, steps: int, device: str, sort_edges: bool = False, lean: bool = False) -> dict:
    from torch_geometric.nn import GATConv

    try:
        from graph_rma.nn import RepulsiveGATConv as Conv
    except ImportError:  # before the layer lands
        Conv = GATConv
    from graph_rma import SVGD

    g = torch.Generator().manual_seed(0)
    N = max(num_edges // 10, 10)
    x = torch.randn(N, 128, generator=g)
    edge_index = torch.randint(0, N, (2, num_edges), generator=g)
    if sort_edges:
        from torch_geometric.utils import sort_edge_index

        edge_index = sort_edge_index(edge_index, num_nodes=N, sort_by_row=False)
    y = torch.randint(0, 7, (N,), generator=g)
    x, edge_index, y = x.to(device), edge_index.to(device), y.to(device)
    torch.manual_seed(0)
    kw = {"lean": True} if lean else {}
    model = nn.ModuleDict({"conv1": Conv(128, 8, heads=8, **kw), "conv2": Conv(64, 7, heads=8, concat=False, **kw)}).to(
        device
    )
    opt = torch.optim.Adam(model.parameters(), lr=0.005)
    SVGD(model, alpha=0.1).attach(opt)

    def step():
        opt.zero_grad()
        h = F.elu(model["conv1"](x, edge_index))
        F.cross_entropy(model["conv2"](h, edge_index), y).backward()
        opt.step()

    step()  # warm-up
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    if device == "cuda":
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated()
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"edges": num_edges, "nodes": N, "seconds_per_step": (time.perf_counter() - t0) / steps, "peak_bytes": peak}


def slope(xs, ys):
    lx, ly = [math.log(v) for v in xs], [math.log(v) for v in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly)) / sum((a - mx) ** 2 for a in lx)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--edges", type=float, nargs="+", default=[1e4, 1e5, 1e6, 1e7])
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--sort-edges", action="store_true", help="order edges by target node (as PyG datasets are)")
    ap.add_argument("--lean", action="store_true", help="layers with lean=True (graph_rma.nn.lean)")
    ap.add_argument(
        "--keep-freed-memory",
        action="store_true",
        help="glibc: no mmap for large blocks, no trimming (each size's process only)",
    )
    ap.add_argument("--out", default="results/scaling")
    load_before = add_json_option(ap)
    ap.add_argument("--one", type=float, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.one:
        print(json.dumps(one(int(args.one), args.steps, args.device, args.sort_edges, args.lean)))
        return
    rows, failed = [], []
    for e in args.edges:
        cmd = [  # each size in its own process, run as this module (from the repository root, like the parent)
            sys.executable,
            "-m",
            "benchmarks.bench_scaling",
            "--one",
            str(e),
            "--steps",
            str(args.steps),
            "--threads",
            str(args.threads),
            "--device",
            args.device,
        ] + (["--sort-edges"] if args.sort_edges else [])
        cmd += ["--lean"] if args.lean else []
        env = dict(os.environ)
        if args.keep_freed_memory:
            env.update(MALLOC_MMAP_MAX_="0", MALLOC_TRIM_THRESHOLD_=str(1 << 46))
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if proc.returncode != 0:  # e.g. killed for memory (-9): report it and go on with the sizes that fit
            tail = (proc.stderr.strip().splitlines() or ["no message"])[-1]
            print(f"{int(e):>10d} edges  failed (exit code {proc.returncode}: {tail})", flush=True)
            failed.append({"edges": int(e), "error": f"exit code {proc.returncode}"})
            continue
        rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
        r = rows[-1]
        print(
            f"{r['edges']:>10d} edges {r['nodes']:>9d} nodes  {r['seconds_per_step']:9.3f} s/step  "
            f"{r['peak_bytes'] / 2**20:9.1f} MiB peak",
            flush=True,
        )
    if len(rows) < 2:
        raise SystemExit("fewer than two sizes ran; nothing to fit")
    E = [r["edges"] for r in rows]
    st = slope(E, [r["seconds_per_step"] for r in rows])
    big = [r for r in rows if r["edges"] >= 1e5]
    big = big if len(big) >= 2 else rows
    sm = slope([r["edges"] for r in big], [r["peak_bytes"] for r in big])
    print(f"log-log slope vs edges: time {st:.2f}, peak memory {sm:.2f} (from 1e5 edges; 1.00 = linear)")
    os.makedirs(args.out, exist_ok=True)
    RECORDED["scaling"] = {
        "rows": rows,
        "failed": failed,
        "slope_time": st,
        "slope_memory": sm,
        "device": args.device,
        "threads": args.threads,
        "steps": args.steps,
        "lean": args.lean,
        "sorted_edges": args.sort_edges,
        "keep_freed_memory": args.keep_freed_memory,
    }
    with open(os.path.join(args.out, "scaling.json"), "w") as f:
        json.dump(RECORDED["scaling"], f, indent=2)
    save_if_asked(args, argv, "bench_scaling", load_before)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(1, 2, figsize=(9, 3.6))
    ax[0].loglog(E, [r["seconds_per_step"] for r in rows], "o-")
    ax[0].set(xlabel="edges", ylabel="seconds per training step", title=f"time (slope {st:.2f})")
    ax[1].loglog(E, [r["peak_bytes"] / 2**20 for r in rows], "o-", color="C1")
    ax[1].set(xlabel="edges", ylabel="peak MiB", title=f"memory (slope {sm:.2f})")
    for a in ax:
        a.grid(True, which="both", alpha=0.3)
    order = "edges sorted by target" if args.sort_edges else "random edge order"
    order += ", freed memory kept" if args.keep_freed_memory else ""
    order += ", lean=True" if args.lean else ""
    fig.suptitle(f"2-layer repulsive GAT (SVGD, 8 heads), full batch, {args.device}, {order}")
    fig.tight_layout()
    fig.savefig(os.path.join(args.out, "scaling.png"), dpi=120)
    print(f"wrote {args.out}/scaling.png and scaling.json")


if __name__ == "__main__":
    main()
