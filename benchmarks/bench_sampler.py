"""Cost of the particle sampler: a GAT training step with SVGD/SPOS attached vs the same step without it.

    python benchmarks/bench_sampler.py [--repeats 30] [--threads 2]

Part 1: 2-layer GAT (8 heads x 8, Cora-sized graph: real Cora when $GRAPH_RMA_DATA has it, else a random graph
of the same size) -- no sampler, SVGD on the first layer, SVGD on all layers (8 output heads averaged so that
the second layer has heads too), SPOS on all layers. Ratios are against the no-sampler step measured in the
same run, interleaved, median of repeats.
Part 2: the sampler alone on random particles [M, D]: time grows as O(M^2 D).
"""
from __future__ import annotations

import argparse
import os
import sys

import torch
import torch.nn.functional as F
from torch import nn
from torch_geometric.nn import GATConv

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import device_name, interleaved_medians  # noqa: E402

from graph_rma import SPOS, SVGD, svgd_direction  # noqa: E402


class GAT(nn.Module):
    def __init__(self, f_in, classes, heads=8, hidden=8, out_heads=1):
        super().__init__()
        self.conv1 = GATConv(f_in, hidden, heads=heads, dropout=0.6)
        self.conv2 = GATConv(hidden * heads, classes, heads=out_heads, concat=False, dropout=0.6)

    def forward(self, x, edge_index):
        x = F.dropout(x, 0.6, self.training)
        x = F.elu(self.conv1(x, edge_index))
        return self.conv2(F.dropout(x, 0.6, self.training), edge_index)


def cora_like():
    try:
        from graph_rma.data.planetoid import load_planetoid  # available once the Cora loader is merged

        data = load_planetoid("Cora")
        return data.x, data.edge_index, data.y, "Cora"
    except Exception:
        g = torch.Generator().manual_seed(0)
        N, E, Fdim = 2708, 10556, 1433
        x = (torch.rand(N, Fdim, generator=g) < 0.0127).float()
        return x, torch.randint(0, N, (2, E), generator=g), torch.randint(0, 7, (N,), generator=g), "random Cora-sized graph"


def step_fn(model, x, edge_index, y, sampler_cls=None, **kw):
    opt = torch.optim.Adam(model.parameters(), lr=0.005, weight_decay=5e-4)
    if sampler_cls is not None:
        sampler_cls(model, **kw).attach(opt)

    def step():
        opt.zero_grad()
        F.cross_entropy(model(x, edge_index), y).backward()
        opt.step()

    return step


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    x, edge_index, y, what = cora_like()
    print(f"device: {device_name()}; graph: {what} ({x.size(0)} nodes, {edge_index.size(1)} edges)")

    torch.manual_seed(0)
    base1, base8 = GAT(x.size(1), int(y.max()) + 1), GAT(x.size(1), int(y.max()) + 1, out_heads=8)
    import copy

    fns = {
        "no sampler": step_fn(copy.deepcopy(base1), x, edge_index, y),
        "SVGD first layer": step_fn(copy.deepcopy(base1), x, edge_index, y, SVGD, alpha=0.1, layers=["conv1"]),
        "no sampler (8 out heads)": step_fn(copy.deepcopy(base8), x, edge_index, y),
        "SVGD all layers (8 out heads)": step_fn(copy.deepcopy(base8), x, edge_index, y, SVGD, alpha=0.1),
        "SPOS all layers (8 out heads)": step_fn(copy.deepcopy(base8), x, edge_index, y, SPOS, alpha=0.1, beta=1e3),
    }
    med = interleaved_medians(fns, repeats=args.repeats)
    print(f"\n{'training step':34s} {'ms':>8s} {'ratio':>7s}")
    for name, t in med.items():
        ref = med["no sampler (8 out heads)"] if "8 out heads" in name else med["no sampler"]
        print(f"{name:34s} {1e3 * t:8.2f} {t / ref:7.3f}x")

    print(f"\n{'sampler alone: M':>18s} {'D':>8s} {'ms':>8s} {'ns / (M^2 D)':>13s}")
    g = torch.Generator().manual_seed(0)
    for D in (1_000, 10_000, 100_000):
        for M in (2, 4, 8, 16, 32):
            theta, grad = torch.randn(M, D, generator=g), torch.randn(M, D, generator=g)
            t = interleaved_medians({"s": lambda: svgd_direction(theta, grad, alpha=1.0)}, repeats=max(5, args.repeats // 3))["s"]
            print(f"{M:18d} {D:8d} {1e3 * t:8.3f} {1e9 * t / (M * M * D):13.3f}")


if __name__ == "__main__":
    main()
