"""The README's quick start over many seeds: stock PyG heads against repulsive heads, paired.

    python examples/quickstart_vs_stock.py --seeds 10                    # chameleon, the README's setting
    python examples/quickstart_vs_stock.py --seeds 10 --dataset cora     # the same code on Cora
    python examples/quickstart_vs_stock.py --seeds 0-4 --alpha 0.01      # another strength

For each seed both arms start from the same weights (the repulsive arm converts the stock model after seeding),
train on split ``seed mod 10`` (Cora: its one public split) with the GGCN protocol's recipe (row-normalised
features, each node attending over its out-links, Adam lr 0.005 and weight decay 5e-5) and report the test accuracy
at the epoch with the lowest validation loss, with the paired difference over seeds. The data are read offline
with graph_rma's loader ($GRAPH_RMA_DATA or --root). For the published protocols themselves use
``graph-rma node --dataset NAME`` (docs/baselines.md).
"""
import argparse

import torch
import torch.nn.functional as F
from torch_geometric.nn.models import GAT

import graph_rma
import graph_rma.engine
from graph_rma.data.nodes import load_node_graph
from graph_rma.data.transforms import direct_edges, normalize_features
from graph_rma.engine import paired_comparison

graph_rma.engine.one_line_errors()  # a mistake or missing data: one line, not a traceback


def run(x, edge_index, y, train, val, test, seed: int, repulsive: bool, epochs: int, alpha: float) -> float:
    torch.manual_seed(seed)
    model = GAT(x.size(1), 64, num_layers=2, out_channels=int(y.max()) + 1, heads=8, dropout=0.6)
    if repulsive:
        model = graph_rma.convert(model)
    opt = torch.optim.Adam(model.parameters(), lr=0.005, weight_decay=5e-5)
    if repulsive:
        graph_rma.SVGD(model, alpha=alpha, eps=8, layers=["convs.0"]).attach(opt)
    best_loss, best_test = float("inf"), 0.0
    for _ in range(epochs):
        model.train()
        opt.zero_grad()
        F.cross_entropy(model(x, edge_index)[train], y[train]).backward()
        opt.step()
        model.eval()
        with torch.no_grad():
            out = model(x, edge_index)
        val_loss = F.cross_entropy(out[val], y[val]).item()
        if val_loss < best_loss:
            best_loss, best_test = val_loss, (out[test].argmax(-1) == y[test]).float().mean().item()
    return 100 * best_test


def seeds(text: str):
    """``N`` (seeds 0..N-1), ``A-B`` (A to B inclusive) or ``A,B,C``."""
    try:
        if "-" in text:
            a, b = (int(t) for t in text.split("-", 1))
            out = list(range(a, b + 1))
        elif "," in text:
            out = [int(t) for t in text.split(",")]
        else:
            out = list(range(int(text)))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected N, A-B or A,B,C, got {text!r}") from None
    if not out or min(out) < 0:
        raise argparse.ArgumentTypeError(f"expected at least one seed >= 0, got {text!r}")
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="examples/quickstart_vs_stock.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=seeds, default=list(range(10)), help="N, A-B or A,B,C (default: 10)")
    p.add_argument("--epochs", type=int, default=200, help="epochs per run")
    p.add_argument("--dataset", default="chameleon", help="a graph of graph_rma.data.nodes.NODE_DATASETS")
    p.add_argument("--alpha", type=float, default=0.1, help="SVGD's repulsive weight")
    p.add_argument("--root", default=None, help="data folder (default $GRAPH_RMA_DATA/pyg or .../planetoid)")
    args = p.parse_args(argv)
    if args.epochs < 1:
        p.error(f"--epochs: expected a positive integer, got {args.epochs}")
    try:
        data = load_node_graph(args.dataset, root=args.root)
    except (ValueError, FileNotFoundError) as exc:  # a bad name, or no data: one line
        p.exit(2, f"{p.prog}: {exc}\n")
    x = normalize_features(data.x, "row").to_dense()
    edge_index = direct_edges(data.edge_index, "reversed", data.num_nodes)
    stock, ours = {}, {}
    for seed in args.seeds:
        s = seed % data.train_mask.size(1)
        masks = data.train_mask[:, s], data.val_mask[:, s], data.test_mask[:, s]
        stock[seed] = run(x, edge_index, data.y, *masks, seed, False, args.epochs, args.alpha)
        ours[seed] = run(x, edge_index, data.y, *masks, seed, True, args.epochs, args.alpha)
        print(f"seed {seed}: plain heads {stock[seed]:.1f} %, repulsive heads {ours[seed]:.1f} %")
    pc = paired_comparison(stock, ours)
    print(f"mean: plain {sum(stock.values()) / len(stock):.2f} %, repulsive {sum(ours.values()) / len(ours):.2f} "
          f"%; paired difference {pc['mean']:+.2f} ± {pc['se']:.2f} (SE), wins/ties/losses "
          f"{pc['wins']}/{pc['ties']}/{pc['losses']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
