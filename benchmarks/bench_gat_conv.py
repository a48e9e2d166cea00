"""RepulsiveGATConv vs stock GATConv with the extras off: forward, and forward + backward.

Both layers hold the same weights and are timed in the same run, interleaved; the ratio of the medians (and the
median of the per-round ratios, ``paired``) is printed. Aim: <= 1.02x (the only extra work is the input check).

    python -m benchmarks.bench_gat_conv [--repeats 41] [--threads 2] [--skip-large]
"""

import argparse

import torch
from torch_geometric.nn import GATConv, GATv2Conv

from graph_rma.nn import RepulsiveGATConv, RepulsiveGATv2Conv

from .common import add_json_option, compare, random_graph, save_if_asked


def fns_for(stock_cls, ours_cls, x, edge_index):
    torch.manual_seed(0)
    stock = stock_cls(x.size(1), 8, heads=8)
    ours = ours_cls(x.size(1), 8, heads=8)
    ours.load_state_dict(stock.state_dict())

    def forward(conv):
        def f():
            with torch.no_grad():
                conv(x, edge_index)

        return f

    def forward_backward(conv):
        def f():
            conv.zero_grad()
            conv(x, edge_index).sum().backward()

        return f

    s, o = stock_cls.__name__, ours_cls.__name__
    return (
        {f"{s} forward": forward(stock), f"{o} forward": forward(ours)},
        {f"{s} forward+backward": forward_backward(stock), f"{o} forward+backward": forward_backward(ours)},
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=41)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--skip-large", action="store_true")
    load_before = add_json_option(parser)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, median of {args.repeats} calls")
    x, edge_index, _ = random_graph(2708, 10556, 1433, 7)
    for stock_cls, ours_cls in [(GATConv, RepulsiveGATConv), (GATv2Conv, RepulsiveGATv2Conv)]:
        fwd, fb = fns_for(stock_cls, ours_cls, x, edge_index)
        what = f"Cora-sized random graph (2708 nodes, 10556 edges, 1433 -> 8 heads x 8): {stock_cls.__name__}"
        compare(f"{what}, forward", fwd, args.repeats)
        compare(f"{what}, forward+backward", fb, args.repeats)
    if not args.skip_large:
        x, edge_index, _ = random_graph(100_000, 1_000_000, 64, 7, seed=1)
        fwd, fb = fns_for(GATConv, RepulsiveGATConv, x, edge_index)
        reps = max(5, args.repeats // 4)
        compare("Synthetic graph (100k nodes, 1M edges, 64 -> 8 heads x 8): GATConv, forward", fwd, reps)
        compare("Synthetic graph (100k nodes, 1M edges, 64 -> 8 heads x 8): GATConv, forward+backward", fb, reps)
    save_if_asked(args, argv, "bench_gat_conv", load_before)


if __name__ == "__main__":
    main()
