"""The README's quick start over many seeds: stock PyG heads against repulsive heads, paired.

    python examples/quickstart_vs_stock.py                               # chameleon, seeds 0-9: the README's setting
    python examples/quickstart_vs_stock.py --seeds 0-9 --dataset cora    # the same code on Cora
    python examples/quickstart_vs_stock.py --seeds 0 1 2 --alpha 0.01    # other seeds, another strength

``--seeds`` is a list of seeds, each a number or an inclusive range ``A-B``, as in every ``graph-rma`` command.
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
from graph_rma.argtypes import SeedsAction, nonnegative_float, positive_int, seed_list
from graph_rma.data.nodes import load_node_graph, select_split
from graph_rma.data.transforms import direct_edges, normalize_features
from graph_rma.engine import paired_comparison

graph_rma.engine.one_line_errors()  # a mistake or missing data: one line, not a traceback


def run(
    x, edge_index, y, train, val, test, seed: int, repulsive: bool, epochs: int, alpha: float, patience: int = 100
) -> float:
    torch.manual_seed(seed)
    model = GAT(x.size(1), 64, num_layers=2, out_channels=int(y.max()) + 1, heads=8, dropout=0.6)
    if repulsive:
        model = graph_rma.convert(model)
    opt = torch.optim.Adam(model.parameters(), lr=0.005, weight_decay=5e-5)
    if repulsive:
        graph_rma.SVGD(model, alpha=alpha, eps=8, layers=["convs.0"]).attach(opt)
    best_loss, best_test, waited = float("inf"), 0.0, 0
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
            best_loss, best_test, waited = val_loss, (out[test].argmax(-1) == y[test]).float().mean().item(), 0
        elif (waited := waited + 1) >= patience:
            break
    return 100 * best_test


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="examples/quickstart_vs_stock.py", description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--seeds",
        nargs="+",
        type=seed_list,
        action=SeedsAction,
        default=list(range(10)),
        metavar="S",
        help="the seeds, each a number or a range A-B, e.g. --seeds 0 1 2 or --seeds 0-9 (default: 0-9)",
    )
    p.add_argument(
        "--epochs",
        type=positive_int,
        default=1500,
        help="most epochs per run (the protocol's 1500; it stops after 100 without a lower validation loss)",
    )
    p.add_argument("--dataset", default="chameleon", help="a graph of graph_rma.data.nodes.NODE_DATASETS")
    p.add_argument("--alpha", type=nonnegative_float, default=0.1, help="SVGD's repulsive weight")
    p.add_argument("--root", default=None, help="data folder (default $GRAPH_RMA_DATA/pyg or .../planetoid)")
    args = p.parse_args(argv)
    try:
        data = load_node_graph(args.dataset, root=args.root)
    except (ValueError, FileNotFoundError) as exc:  # a bad name, or no data: one line
        p.exit(2, f"{p.prog}: {exc}\n")
    x = normalize_features(data.x, "row").to_dense()
    edge_index = direct_edges(data.edge_index, "reversed", data.num_nodes)
    stock, ours = {}, {}
    splits = 1 if data.train_mask.dim() == 1 else data.train_mask.size(1)  # PyG's shapes: [N] (Cora) or [N, 10]
    for seed in args.seeds:
        split = select_split(data, seed % splits)  # the [N] masks of split seed mod 10
        masks = split.train_mask, split.val_mask, split.test_mask
        stock[seed] = run(x, edge_index, data.y, *masks, seed, False, args.epochs, args.alpha)
        ours[seed] = run(x, edge_index, data.y, *masks, seed, True, args.epochs, args.alpha)
        print(f"seed {seed}: plain heads {stock[seed]:.1f} %, repulsive heads {ours[seed]:.1f} %")
    pc = paired_comparison(stock, ours)
    print(
        f"mean: plain {sum(stock.values()) / len(stock):.2f} %, repulsive {sum(ours.values()) / len(ours):.2f} "
        f"%; paired difference {pc['mean']:+.2f} ± {pc['se']:.2f} (SE), wins/ties/losses "
        f"{pc['wins']}/{pc['ties']}/{pc['losses']}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
