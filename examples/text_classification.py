"""Repulsive attention and DropAttention for an existing torch Transformer text classifier, in one change.

    python examples/text_classification.py                          # TREC, plain multi-head attention
    python examples/text_classification.py --variant svgd:alpha=1   # heads as SVGD particles
    python examples/text_classification.py --variant dropattn:p=0.1,mode=column --dataset mr
    torchrun --nproc_per_node 2 examples/text_classification.py --variant svgd:alpha=1   # DDP, gloo on CPU

The model is an ordinary ``nn.TransformerEncoder``; ``graph_rma.convert`` swaps its ``nn.MultiheadAttention``
layers for ``RepulsiveMultiheadAttention`` (same weights, same outputs) so that the variant can act on the heads, and
``apply_variant`` applies the variant (DropAttention in every layer, the sampler on the optimizer, the penalty).
Prints test accuracy and head diversity, and writes a per-head attention heatmap (PNG and HTML). The full
benchmark over variants and seeds is ``graph-rma text``.

Under ``torchrun`` every process builds the same batches of 50 and trains on its shard of each (a cross-entropy sum
divided by the global batch size times ``1/N``, so DDP's averaged gradient is the one-process gradient); the
sampler runs after DDP's all-reduce, with the same noise on every rank, and the script ends by checking that the
replicas are bitwise equal. Rank 0 prints and writes.
"""

import argparse
import contextlib
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel

import graph_rma
import graph_rma.engine
from graph_rma.argtypes import add_threads_option, out_dir, positive_int, seed
from graph_rma.data.text import Vocabulary, load_text_dataset, tokenize
from graph_rma.engine import seed_everything
from graph_rma.engine.distributed import cleanup, init_from_env, replica_fingerprints, shard
from graph_rma.nn import record_attention
from graph_rma.regularizers import disagreement
from graph_rma.tasks.text_classification import (
    batches,
    head_heatmap_html,
    head_heatmap_png,
    split_dev,
    stratified_subset,
)
from graph_rma.variants import apply_variant, parse_variant

graph_rma.engine.one_line_errors()  # a mistake or missing data: one line, not a traceback

p = argparse.ArgumentParser()
p.add_argument("--dataset", default="trec", help="trec, mr, sst2 or sst1")
p.add_argument(
    "--variant", default="ma", help="e.g. ma, svgd:alpha=1, spos:alpha=1,beta=1e5, dropattn:p=0.1,mode=column"
)
p.add_argument("--epochs", type=positive_int, default=6)
p.add_argument("--seed", type=seed, default=0)
p.add_argument("--sentence", default="What is the name of the longest river in the world ?")
p.add_argument("--out", type=out_dir, default="runs/example_text")
p.add_argument(
    "--max-train",
    type=positive_int,
    default=None,
    help="train on N training sentences: a stratified subset drawn with --seed (each class keeps its share; "
    "default: all)",
)
add_threads_option(p)  # torch CPU threads: the one default of every command and example
args = p.parse_args()
torch.set_num_threads(args.threads)
parse_variant(args.variant)  # a misspelt variant: one line now, not after the data are read
dist = init_from_env(device="cpu")  # torchrun: one process group (gloo); otherwise rank 0 of 1
log = print if dist.rank == 0 else (lambda *a, **k: None)
seed_everything(args.seed)

# data: nltk tokens, a vocabulary from the training part, a held-out tenth for choosing the epoch
train, test = load_text_dataset(args.dataset, "train"), load_text_dataset(args.dataset, "test")
tr_tok, tr_y, dv_tok, dv_y = split_dev(train)
if args.max_train:  # a seeded stratified subset: a file sorted by label would give one class in its first N lines
    keep = stratified_subset(tr_y, args.max_train, args.seed)
    log(
        f"--max-train {args.max_train}: {len(keep)} of {len(tr_y)} training sentences, stratified by class "
        f"(seed {args.seed})"
    )
    tr_tok, tr_y = [tr_tok[i] for i in keep], [tr_y[i] for i in keep]
vocab = Vocabulary.build(tr_tok)


class Classifier(nn.Module):  # a plain torch model, nothing from graph_rma in it
    def __init__(self, vocab_size, num_classes, d=64, heads=4, layers=2, max_len=128):
        super().__init__()
        self.embed, self.pos = nn.Embedding(vocab_size, d, padding_idx=0), nn.Embedding(max_len, d)
        layer = nn.TransformerEncoderLayer(d, heads, 2 * d, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.out = nn.Linear(d, num_classes)

    def forward(self, tokens):
        pad = tokens == 0
        h = self.encoder(self.embed(tokens) + self.pos(torch.arange(tokens.size(1))), src_key_padding_mask=pad)
        keep = (~pad).unsqueeze(-1).float()
        return self.out((h * keep).sum(1) / keep.sum(1))


# the one change: repulsive-ready attention layers; weights and outputs are unchanged
model = graph_rma.convert(Classifier(len(vocab), train.num_classes))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
# the variant: DropAttention in every attention layer, SVGD/SPOS/SGLD run before every optimizer.step()
setup = apply_variant(args.variant, model, optimizer, seed=args.seed)
variant = setup.variant
ddp = DistributedDataParallel(model) if dist.distributed else model  # all-reduces gradients in backward()


@torch.no_grad()
def accuracy(tokens, labels):
    model.eval()
    hits = sum(int((model(x).argmax(-1) == y).sum()) for x, y in batches(tokens, labels, vocab, 500))
    return hits / len(labels)


best, best_state, gen = -1.0, None, torch.Generator().manual_seed(args.seed)
for epoch in range(1, args.epochs + 1):
    model.train()
    for x, y in batches(tr_tok, tr_y, vocab, 50, gen):
        if len(y) < dist.world_size:
            continue  # a last batch smaller than the number of processes
        rows = shard(range(len(y)))  # this process's part of the global batch (all of it in one process)
        # the Frobenius penalty needs each layer's attention [B, H, L, S]: record it for reg variants only
        with record_attention(model) if setup.needs_attention else contextlib.nullcontext([]) as layers:
            loss = F.cross_entropy(ddp(x[rows]), y[rows], reduction="sum") * dist.world_size / len(y)
        reg = setup.penalty(model, attention=[m.last_attention.transpose(1, 2) for m in layers])
        optimizer.zero_grad()
        (loss + reg if reg is not None else loss).backward()
        optimizer.step()
    dev = accuracy(dv_tok, dv_y)
    log(f"epoch {epoch}: loss {loss.item():.3f} dev acc {100 * dev:.2f}")
    if dev > best:
        best, best_state = dev, {k: v.clone() for k, v in model.state_dict().items()}
if dist.distributed:  # the replicas must still be bitwise identical after all those steps
    sha = replica_fingerprints(model)
    assert len(set(sha)) == 1, f"replicas diverged: {sha}"
    log(f"{dist.world_size} processes: replicas bitwise equal (parameters SHA-1 {sha[0][:12]})")
    del ddp  # release DDP's reducer (and its hold on the process group) before the group is destroyed
    cleanup()
if dist.rank != 0:
    raise SystemExit(0)
model.load_state_dict(best_state)
print(
    f"{train.name} {variant}: test accuracy {100 * accuracy(test.tokens, test.labels):.2f}% "
    f"(best dev {100 * best:.2f}%)"
)

# heads on one sentence: the attention each token receives from each head of the last layer (query-averaged)
words = tokenize(args.sentence)
model.eval()
with torch.no_grad(), record_attention(model) as layers:
    model(vocab.batch([words]))
w = layers[-1].last_attention[0].mean(dim=1)  # [H, n]
print(f"head similarity (mean pairwise cosine of the heads' attention): {disagreement(w, head_dim=0):.3f}")
out = Path(args.out)
out.mkdir(parents=True, exist_ok=True)
title = f"{train.name} {variant}"
head_heatmap_png(out / "heads.png", words, [(title, w)])
head_heatmap_html(out / "heads.html", words, [(title, w)], title)
print(f"wrote {out}/heads.png and heads.html")
