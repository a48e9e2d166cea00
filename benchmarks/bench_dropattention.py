"""Training-step time of RepulsiveGATConv + DropAttention vs stock GATConv with plain attention dropout.

Both layers are timed in the same run, interleaved (stock, ours, stock, ours, ...), and the ratio of the medians is
printed. Graphs: a Cora-sized random graph (2708 nodes, 10556 edges, 1433 features, GAT 8 heads x 8 -> 7 classes)
and a synthetic graph with 1M edges (100k nodes, 64 features, one GAT layer 8 heads x 8).

    python benchmarks/bench_dropattention.py [--repeats 15] [--threads 2] [--skip-large]
"""
import argparse
import statistics
import time

import torch
import torch.nn.functional as F
from torch_geometric.nn import GATConv

from graph_rma import DropAttention
from graph_rma.nn import RepulsiveGATConv


def random_graph(num_nodes, num_edges, num_features, num_classes, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(num_nodes, num_features, generator=g)
    edge_index = torch.randint(0, num_nodes, (2, num_edges), generator=g)
    y = torch.randint(0, num_classes, (num_nodes,), generator=g)
    return x, edge_index, y


class Net(torch.nn.Module):
    """GAT as in the paper's Cora setup (optionally one layer only), with a given conv class and attention drop."""

    def __init__(self, conv_cls, in_ch, classes, p, two_layers=True, **extra):
        super().__init__()
        self.conv1 = conv_cls(in_ch, 8, heads=8, dropout=p, **extra)
        self.conv2 = conv_cls(64, classes, heads=1, concat=False, dropout=p, **extra) if two_layers else None
        self.out = None if two_layers else torch.nn.Linear(64, classes)

    def forward(self, x, edge_index):
        h = F.elu(self.conv1(x, edge_index))
        return self.conv2(h, edge_index) if self.conv2 is not None else self.out(h)


def step_fn(model, x, edge_index, y):
    opt = torch.optim.Adam(model.parameters(), lr=0.005)

    def step():
        opt.zero_grad()
        F.cross_entropy(model(x, edge_index), y).backward()
        opt.step()

    return step


def compare(name, fns, repeats):
    """Time each step function once per round, interleaved; print medians and ratios to the first entry.

    ``ratio`` is the ratio of the medians; ``paired`` the median over rounds of the per-round ratio, which is more
    robust when other processes share the CPU.
    """
    for fn in fns.values():  # warm-up
        fn()
    times = {k: [] for k in fns}
    for _ in range(repeats):
        for k, fn in fns.items():
            t = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t)
    base_key = next(iter(fns))
    if name:
        print(f"\n{name}")
    for k, v in times.items():
        m = statistics.median(v)
        paired = statistics.median(a / b for a, b in zip(v, times[base_key]))
        print(f"  {k:<44s} {m * 1e3:9.2f} ms   ratio {m / statistics.median(times[base_key]):5.3f}"
              f"   paired {paired:5.3f}")


def run(graph, two_layers, variants, repeats, p):
    x, edge_index, y = graph
    classes = int(y.max()) + 1
    torch.manual_seed(0)
    fns = {"GATConv, attention dropout": step_fn(Net(GATConv, x.size(1), classes, p, two_layers), x, edge_index, y)}
    for label, drop in variants:
        torch.manual_seed(0)
        model = Net(RepulsiveGATConv, x.size(1), classes, p, two_layers, drop_attention=drop)
        fns[f"RepulsiveGATConv, {label}"] = step_fn(model, x, edge_index, y)
    return fns


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--p", type=float, default=0.6)
    parser.add_argument("--skip-large", action="store_true")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    p = args.p
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, p = {p}, median of {args.repeats} steps")

    cora = random_graph(2708, 10556, 1433, 7)
    variants = [
        ("DropAttention(p) element w=1", DropAttention(p)),
        ("DropAttention(p) element w=2", DropAttention(p, window=2)),
        ("DropAttention(p) column w=1", DropAttention(p, mode="column")),
    ]
    compare("Cora-sized random graph (2708 nodes, 10556 edges, 1433 features, 2-layer GAT 8x8)",
            run(cora, True, variants, args.repeats, p), args.repeats)
    if not args.skip_large:
        large = random_graph(100_000, 1_000_000, 64, 7, seed=1)
        variants = [("DropAttention(p) element w=1", DropAttention(p)),
                    ("DropAttention(p) element w=2", DropAttention(p, window=2))]
        reps = max(3, args.repeats // 3)
        compare("Synthetic graph (100k nodes, 1M edges, 64 features, 1 GAT layer 8x8 + linear)",
                run(large, False, variants, reps, p), reps)


if __name__ == "__main__":
    main()
