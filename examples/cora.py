"""GAT on Cora with repulsive attention heads, in one page.

    python examples/cora.py                    # SVGD over the first layer's 8 heads
    python examples/cora.py --variant ma       # plain GAT
    python examples/cora.py --variant "spos:alpha=0.1,beta=1000"

The full benchmark (many seeds, all variants, tables and plots) is `graph-rma cora`.
"""
import argparse
import copy

import torch
import torch.nn.functional as F

from graph_rma.cli.cora import SVGD  # the chosen SVGD spec string of the benchmark
from graph_rma.data.planetoid import load_planetoid, prepare_features
from graph_rma.models import GAT
from graph_rma.variants import make_sampler, parse_variant

parser = argparse.ArgumentParser()
parser.add_argument("--variant", default=SVGD)
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--root", default=None, help="planetoid folder (default $GRAPH_RMA_DATA/planetoid)")
args = parser.parse_args()

torch.manual_seed(args.seed)
dataset = load_planetoid("Cora", root=args.root)
data = dataset[0]
x = prepare_features(data.x)  # row-normalised, sparse
variant = parse_variant(args.variant)

model = GAT(dataset.num_features, dataset.num_classes, drop_attention=variant.drop_attention_kwargs)
optimizer = torch.optim.Adam(model.parameters(), lr=0.005, weight_decay=5e-4)
sampler = make_sampler(variant, model, seed=args.seed)  # None for plain multi-head attention
if sampler is not None:
    sampler.attach(optimizer)  # head gradients become -eps * phi before every optimizer.step()

best_val, best_state, bad = 0.0, None, 0
for epoch in range(1, 1001):
    model.train()
    optimizer.zero_grad()
    loss = F.cross_entropy(model(x, data.edge_index)[data.train_mask], data.y[data.train_mask])
    loss.backward()
    optimizer.step()

    model.eval()
    with torch.no_grad():
        pred = model(x, data.edge_index).argmax(dim=-1)
    val = (pred[data.val_mask] == data.y[data.val_mask]).float().mean().item()
    if val > best_val:
        best_val, best_state, bad = val, copy.deepcopy(model.state_dict()), 0
    else:
        bad += 1
        if bad == 100:
            break

model.load_state_dict(best_state)
model.eval()
with torch.no_grad():
    pred = model(x, data.edge_index).argmax(dim=-1)
test = (pred[data.test_mask] == data.y[data.test_mask]).float().mean().item()
print(f"{variant.spec}: stopped at epoch {epoch}, best val {100 * best_val:.1f}%, test {100 * test:.1f}%")
