"""Training-step time of RepulsiveGATConv + DropAttention vs stock GATConv with plain attention dropout.

Both layers are timed in the same run, interleaved (stock, ours, stock, ours, ...), and the ratio of the medians is
printed. Graphs: a Cora-sized random graph (2708 nodes, 10556 edges, 1433 features, GAT 8 heads x 8 -> 7 classes)
and a synthetic graph with 1M edges (100k nodes, 64 features, one GAT layer 8 heads x 8).

    python -m benchmarks.bench_dropattention [--repeats 15] [--threads 2] [--skip-large] [--uncached]

``--uncached`` sorts the element-mode edge order (``window > 1``) at every step, as DropAttention does under
``torch.compile``, instead of keeping it for a fixed graph.
"""

import argparse

import torch
import torch.nn.functional as F
from torch_geometric.nn import GATConv

from graph_rma import DropAttention
from graph_rma.nn import RepulsiveGATConv

from .common import add_json_option, compare, random_graph, save_if_asked, train_step


class UncachedDropAttention(DropAttention):
    """DropAttention that forgets its edge order before every step (its path under ``torch.compile``)."""

    def _order(self, src, dst, num_src, num_dst):
        self._order_cache = None
        return super()._order(src, dst, num_src, num_dst)


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


def run(graph, two_layers, variants, repeats, p):
    x, edge_index, y = graph
    classes = int(y.max()) + 1
    torch.manual_seed(0)
    fns = {"GATConv, attention dropout": train_step(Net(GATConv, x.size(1), classes, p, two_layers), x, edge_index, y)}
    for label, drop in variants:
        torch.manual_seed(0)
        model = Net(RepulsiveGATConv, x.size(1), classes, p, two_layers, drop_attention=drop)
        fns[f"RepulsiveGATConv, {label}"] = train_step(model, x, edge_index, y)
    return fns


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--p", type=float, default=0.6)
    parser.add_argument("--skip-large", action="store_true")
    parser.add_argument("--uncached", action="store_true", help="sort the edge order at every step")
    load_before = add_json_option(parser)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    p = args.p
    Drop = UncachedDropAttention if args.uncached else DropAttention
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, p = {p}, median of {args.repeats} steps")

    cora = random_graph(2708, 10556, 1433, 7)
    variants = [
        ("DropAttention(p) element w=1", Drop(p)),
        ("DropAttention(p) element w=2", Drop(p, window=2)),
        ("DropAttention(p) column w=1", Drop(p, mode="column")),
    ]
    compare(
        "Cora-sized random graph (2708 nodes, 10556 edges, 1433 features, 2-layer GAT 8x8)",
        run(cora, True, variants, args.repeats, p),
        args.repeats,
    )
    if not args.skip_large:
        large = random_graph(100_000, 1_000_000, 64, 7, seed=1)
        variants = [("DropAttention(p) element w=1", Drop(p)), ("DropAttention(p) element w=2", Drop(p, window=2))]
        reps = max(3, args.repeats // 3)
        compare(
            "Synthetic graph (100k nodes, 1M edges, 64 features, 1 GAT layer 8x8 + linear)",
            run(large, False, variants, reps, p),
            reps,
        )
    save_if_asked(args, argv, "bench_dropattention", load_before)


if __name__ == "__main__":
    main()
