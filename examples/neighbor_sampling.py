"""Mini-batch training with PyG's NeighborLoader for graphs too large for full batch: repulsive GAT + SVGD.

    python examples/neighbor_sampling.py [--epochs 5] [--batch-size 256]

NeighborLoader needs `pyg-lib` or `torch-sparse` (compiled extensions; there are no wheels for this CPU-only setup).
On a GPU machine install the wheels matching your torch and CUDA versions, e.g.

    pip install pyg-lib torch-sparse -f https://data.pyg.org/whl/torch-${TORCH}+${CUDA}.html

The sampler needs nothing special: each mini-batch's loss.backward() fills the head gradients, SVGD replaces
them before Adam's step, exactly as in full-batch training.
"""

from __future__ import annotations

import argparse
import sys

import torch
import torch.nn.functional as F

import graph_rma
import graph_rma.engine
from graph_rma.argtypes import add_threads_option, positive_int
from graph_rma.nn import RepulsiveGATConv

graph_rma.engine.one_line_errors()  # a mistake or missing data: one line, not a traceback


def neighbor_loader_available() -> tuple:
    import torch_geometric.typing as t

    ok = bool(t.WITH_PYG_LIB or t.WITH_TORCH_SPARSE)
    return ok, "" if ok else "PyG's NeighborLoader needs pyg-lib or torch-sparse, and neither is installed"


class GAT(torch.nn.Module):
    def __init__(self, f_in, classes, heads=8, hidden=8):
        super().__init__()
        self.conv1 = RepulsiveGATConv(f_in, hidden, heads=heads, dropout=0.6)
        self.conv2 = RepulsiveGATConv(hidden * heads, classes, heads=1, concat=False, dropout=0.6)

    def forward(self, x, edge_index):
        x = F.elu(self.conv1(F.dropout(x, 0.6, self.training), edge_index))
        return self.conv2(F.dropout(x, 0.6, self.training), edge_index)


def train(data, epochs=5, batch_size=256, num_neighbors=(10, 10), seed=0):
    from torch_geometric.loader import NeighborLoader

    torch.manual_seed(seed)
    loader = NeighborLoader(
        data, num_neighbors=list(num_neighbors), batch_size=batch_size, input_nodes=data.train_mask, shuffle=True
    )
    model = GAT(data.num_features, int(data.y.max()) + 1)
    opt = torch.optim.Adam(model.parameters(), lr=0.005, weight_decay=5e-4)
    graph_rma.SVGD(model, alpha=0.1, layers=["conv1"]).attach(opt)
    losses = []
    for _ in range(epochs):
        model.train()
        for batch in loader:
            opt.zero_grad()
            out = model(batch.x, batch.edge_index)[: batch.batch_size]  # seed nodes come first
            loss = F.cross_entropy(out, batch.y[: batch.batch_size])
            loss.backward()
            opt.step()
            losses.append(float(loss))
    return model, losses


def main(argv=None):
    ap = argparse.ArgumentParser(prog="neighbor_sampling.py", description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=positive_int, default=5)
    ap.add_argument("--batch-size", type=positive_int, default=256)
    ap.add_argument("--root", default=None)
    add_threads_option(ap)  # torch CPU threads: the one default of every command and example
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    ok, why = neighbor_loader_available()
    if not ok:  # one line on stderr, named like every other example's error, and exit status 1
        print(f"{ap.prog}: {why} (see this file's docstring for the install)", file=sys.stderr)
        return 1
    from graph_rma.data.planetoid import load_planetoid

    data = load_planetoid("Cora", root=args.root)[0]
    model, losses = train(data, args.epochs, args.batch_size)
    model.eval()
    pred = model(data.x, data.edge_index).argmax(-1)
    acc = (pred[data.test_mask] == data.y[data.test_mask]).float().mean().item()
    print(f"final train loss {losses[-1]:.3f}, test accuracy {acc:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
