"""GAT on Cora with repulsive attention heads: one run of the benchmark, written out in one page.

    python examples/cora.py                                  # SVGD over the first layer's 8 heads
    python examples/cora.py --variant ma                     # plain GAT
    python examples/cora.py --variant "reg:kind=frobenius,weight=0.01"
    python examples/cora.py --variant "spos:alpha=0.01,eps=8,beta=1e9,roles=att_src/att_dst"

This loop is the benchmark's: with the same seed and variant it selects the same model and prints the same test
accuracy as one run of `graph-rma cora` (graph_rma.tasks.node_classification.train_run). The full study (many seeds,
every variant, tables and plots) is `graph-rma cora`.
"""

import argparse
import copy

import torch
import torch.nn.functional as F

import graph_rma.engine
from graph_rma.argtypes import add_threads_option, positive_int, seed
from graph_rma.data.planetoid import load_planetoid, prepare_features
from graph_rma.engine import EarlyStopping, seed_everything
from graph_rma.models import TwoLayerGAT
from graph_rma.tasks.defaults import CORA_SVGD_SPEC  # the benchmark's chosen SVGD spec
from graph_rma.variants import apply_variant

graph_rma.engine.one_line_errors()  # a mistake or missing data: one line, not a traceback

parser = argparse.ArgumentParser()
parser.add_argument("--variant", default=CORA_SVGD_SPEC, help="a variant spec (graph_rma.variants)")
parser.add_argument("--seed", type=seed, default=0)
parser.add_argument("--epochs", type=positive_int, default=1000)
parser.add_argument("--root", default=None, help="planetoid folder (default $GRAPH_RMA_DATA/planetoid)")
add_threads_option(parser)  # torch CPU threads: the one default of every command and example
args = parser.parse_args()
torch.set_num_threads(args.threads)

dataset = load_planetoid("Cora", root=args.root)
data = dataset[0]
x, edge_index, y = prepare_features(data.x), data.edge_index, data.y  # row-normalised sparse features

seed_everything(args.seed)
model = TwoLayerGAT(dataset.num_features, dataset.num_classes)  # 8 heads x 8 units, dropout 0.6 (the GAT paper's Cora)
optimizer = torch.optim.Adam(model.parameters(), lr=0.005, weight_decay=5e-4)
setup = apply_variant(args.variant, model, optimizer, seed=args.seed)  # DropAttention, sampler, penalty

stopper = EarlyStopping("val_acc", patience=100)
best_state, best_test, epoch = copy.deepcopy(model.state_dict()), 0.0, 0
for epoch in range(1, args.epochs + 1):
    model.train()
    optimizer.zero_grad()
    if setup.variant.reg is not None:  # the regularised baselines need the attention weights
        logits, attention, head_out = model.forward_with_attention(x, edge_index)
        loss = F.cross_entropy(logits[data.train_mask], y[data.train_mask])
        loss = loss + setup.penalty(model, attention=attention[:1], head_outputs=[head_out])
    else:
        loss = F.cross_entropy(model(x, edge_index)[data.train_mask], y[data.train_mask])
    loss.backward()
    optimizer.step()  # an attached sampler turns head gradients into the SVGD/SPOS update first

    model.eval()
    with torch.no_grad():
        logits = model(x, edge_index)
    val_loss = float(F.cross_entropy(logits[data.val_mask], y[data.val_mask]))
    pred = logits.argmax(dim=-1)
    val_acc = float((pred[data.val_mask] == y[data.val_mask]).float().mean())
    keep, stop = stopper.update(val_acc, val_loss)
    if keep:
        best_state = copy.deepcopy(model.state_dict())
        best_test = float((pred[data.test_mask] == y[data.test_mask]).float().mean())
    if stop:
        break

model.load_state_dict(best_state)
print(
    f"{setup.variant.spec}: stopped at epoch {epoch}, best val {100 * stopper.best_metric:.1f}%, "
    f"test {100 * best_test:.1f}%"
)
