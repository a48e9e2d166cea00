"""The README's quick start next to the same loop with stock PyG, on the same seeds: what the swap costs or gains.

    python examples/quickstart_vs_stock.py --seeds 10                    # chameleon (the README's quick start)
    python examples/quickstart_vs_stock.py --seeds 10 --dataset Cora     # the same code on Cora
    python examples/quickstart_vs_stock.py --seeds 10 --layers convs.0 convs.1   # SVGD on both layers

For each seed both arms start from the same weights (the quick start converts the stock model after seeding) and
train 200 epochs with Adam on split ``seed mod 10`` (chameleon's Geom-GCN splits; Cora has one); the printed number
is the test accuracy after the last epoch (the quick start has no model selection), with the paired difference
over seeds. The data are read offline with graph_rma's loader: the raw features, as PyG's loaders give them.
"""
import argparse

import torch
import torch.nn.functional as F
from torch_geometric.nn.models import GAT

import graph_rma
from graph_rma.data.nodes import load_node_dataset, num_splits
from graph_rma.engine import paired_comparison, seed_everything

parser = argparse.ArgumentParser()
parser.add_argument("--seeds", type=int, default=10)
parser.add_argument("--epochs", type=int, default=200)
parser.add_argument("--dataset", default="chameleon", help="a graph of graph_rma.data.nodes.NODE_DATASETS")
parser.add_argument("--layers", nargs="+", default=["convs.0"],
                    help="layers whose heads are particles (the README's quick start: the first layer)")
parser.add_argument("--root", default=None, help="data folder (default $GRAPH_RMA_DATA/pyg or .../planetoid)")
args = parser.parse_args()


def run(data, seed: int, repulsive: bool) -> float:
    seed_everything(seed)
    classes = int(data.y.max()) + 1
    model = GAT(data.num_features, 64, num_layers=2, out_channels=classes, heads=8, dropout=0.6, v2=True)
    if repulsive:  # the README's quick start: convert, then SVGD over the first layer's heads
        model = graph_rma.convert(model)
    opt = torch.optim.Adam(model.parameters(), lr=0.005, weight_decay=5e-4)
    if repulsive:
        graph_rma.SVGD(model, alpha=0.1, eps=8, layers=args.layers).attach(opt)
    for _ in range(args.epochs):
        model.train()
        opt.zero_grad()
        out = model(data.x, data.edge_index)
        F.cross_entropy(out[data.train_mask], data.y[data.train_mask]).backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        pred = model(data.x, data.edge_index).argmax(-1)
    return 100 * float((pred[data.test_mask] == data.y[data.test_mask]).float().mean())


stock, ours = {}, {}
for seed in range(args.seeds):
    data = load_node_dataset(args.dataset, root=args.root, split=seed % num_splits(args.dataset), normalize=False)
    stock[seed], ours[seed] = run(data, seed, False), run(data, seed, True)
    print(f"seed {seed}: stock PyG GAT {stock[seed]:.1f} %, quick start (convert + SVGD) {ours[seed]:.1f} %")
pc = paired_comparison(stock, ours)
print(f"mean: stock {sum(stock.values()) / len(stock):.2f} %, quick start {sum(ours.values()) / len(ours):.2f} %; "
      f"paired difference {pc['mean']:+.2f} ± {pc['se']:.2f} (SE), wins/ties/losses "
      f"{pc['wins']}/{pc['ties']}/{pc['losses']}")
