"""Cost of the particle sampler: a GAT training step with SVGD/SPOS attached vs the same step without it.

    python -m benchmarks.bench_sampler [--repeats 30] [--threads 2] [--agenda-presets cpu full]

Part 1: 2-layer GAT (8 heads x 8, on Cora when $GRAPH_RMA_DATA has it, else a random graph of Cora's size), with
1 output head as in the GAT paper (so the first layer is the only multi-head layer), and with 8 averaged output
heads (first layer only vs all layers). Ratios are against the step without sampler, measured in the same run,
interleaved, median of repeats.
Part 2: a GraphWriter training step (graph-transformer encoder + LSTM decoder with copy, gradient clipping, the
preset's optimizer) on a real AGENDA batch (the first records of the offline training split, the preset's batch
size), with SVGD/SPOS on every encoder layer (``svgd:alpha=0.1``, as ``graph-rma agenda train``) vs without.
Skipped with a message when the AGENDA files are not under $GRAPH_RMA_DATA.
Part 3: the sampler alone on random particles [M, D]; its cost is O(M^2 D).
"""

from __future__ import annotations

import argparse
import copy

import torch
import torch.nn.functional as F
from torch import nn
from torch_geometric.nn import GATConv

from graph_rma import SPOS, SVGD, find_particle_groups, svgd_direction
from graph_rma.variants import apply_variant

from .common import RECORDED, add_json_option, compare, device_name, random_graph, save_if_asked, train_step


class GAT(nn.Module):
    def __init__(self, f_in, classes, heads=8, hidden=8, out_heads=1):
        super().__init__()
        self.conv1 = GATConv(f_in, hidden, heads=heads, dropout=0.6)
        self.conv2 = GATConv(hidden * heads, classes, heads=out_heads, concat=False, dropout=0.6)

    def forward(self, x, edge_index):
        x = F.dropout(x, 0.6, self.training)
        x = F.elu(self.conv1(x, edge_index))
        return self.conv2(F.dropout(x, 0.6, self.training), edge_index)


def cora_like():
    try:
        from graph_rma.data.planetoid import load_planetoid  # the real graph when the data are there

        data = load_planetoid("Cora")[0]
        return data.x, data.edge_index, data.y, "Cora"
    except Exception:
        return (*random_graph(2708, 10556, 1433, 7), "random Cora-sized graph")


def agenda_step(preset: str, variant=None):
    """One GraphWriter training step on a real AGENDA batch, as ``graph-rma agenda train`` does it."""
    from graph_rma.data.agenda import AgendaEncoder, build_vocab, collate, load_agenda
    from graph_rma.tasks.agenda import PRESETS
    from graph_rma.tasks.graph_to_text import build_model, build_optimizer

    cfg = PRESETS[preset]
    splits = load_agenda(protocol="offline")
    vocab = build_vocab(splits.train, min_freq=cfg["min_freq"])
    items = AgendaEncoder(vocab, splits.relation_names, cfg["max_target_len"]).encode_all(
        splits.train[: cfg["batch_size"]]
    )
    batch = collate(items)
    torch.manual_seed(0)
    model = build_model(cfg, len(vocab), len(splits.relation_names))
    opt = build_optimizer(cfg, model)
    groups = find_particle_groups(model)
    if variant is not None:
        apply_variant(variant, model, opt)  # as the trainer does

    def step():
        opt.zero_grad(set_to_none=True)
        model.loss(batch).backward()
        nn.utils.clip_grad_norm_(model.parameters(), cfg["clip"])
        opt.step()

    tokens = int((batch["target_out"] != 0).sum())
    return (
        step,
        f"{len(items)} records, {tokens} target tokens, {len(groups)} encoder groups of "
        f"{groups[0].num_heads} heads x D = {groups[0].dim}",
    )


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument(
        "--agenda-presets",
        nargs="*",
        default=["cpu"],
        choices=["cpu", "full"],
        help="GraphWriter sizes for part 2 (none: skip it)",
    )
    load_before = add_json_option(ap)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    x, edge_index, y, what = cora_like()
    print(f"device: {device_name()}; graph: {what} ({x.size(0)} nodes, {edge_index.size(1)} edges)")
    torch.manual_seed(0)
    classes = int(y.max()) + 1
    base1, base8 = GAT(x.size(1), classes), GAT(x.size(1), classes, out_heads=8)
    kw = dict(weight_decay=5e-4)

    def run(model, sampler=None):
        return train_step(copy.deepcopy(model), x, edge_index, y, sampler=sampler, **kw)

    compare(
        "training step, GAT (1 output head), ratios to no sampler",
        {
            "no sampler": run(base1),
            "SVGD on conv1 (= all multi-head layers)": run(base1, lambda m: SVGD(m, alpha=0.1)),
            "SPOS on conv1": run(base1, lambda m: SPOS(m, alpha=0.1, beta=1e3)),
        },
        repeats=args.repeats,
    )
    compare(
        "training step, GAT with 8 averaged output heads, ratios to no sampler",
        {
            "no sampler": run(base8),
            "SVGD first layer only": run(base8, lambda m: SVGD(m, alpha=0.1, layers=["conv1"])),
            "SVGD all layers": run(base8, lambda m: SVGD(m, alpha=0.1)),
        },
        repeats=args.repeats,
    )

    for preset in args.agenda_presets:
        try:
            base, what = agenda_step(preset)
        except FileNotFoundError as e:  # DataNotFoundError
            print(f"\nAGENDA part skipped: {e}")
            break
        reps = max(5, args.repeats // (3 if preset == "cpu" else 6))
        compare(
            f"training step, GraphWriter preset {preset!r} on AGENDA ({what}), ratios to no sampler",
            {
                "no sampler": base,
                "SVGD on every encoder layer": agenda_step(preset, "svgd:alpha=0.1")[0],
                "SPOS on every encoder layer": agenda_step(preset, "spos:alpha=0.1,beta=1e9")[0],
            },
            repeats=reps,
        )

    print(f"\n{'sampler alone: M':>18s} {'D':>8s} {'ms':>8s} {'ns / (M^2 D)':>13s}")
    g = torch.Generator().manual_seed(0)
    alone = RECORDED["sampler alone: svgd_direction on random particles [M, D]"] = []
    for D in (1_000, 10_000, 100_000):
        for M in (2, 4, 8, 16, 32):
            theta, grad = torch.randn(M, D, generator=g), torch.randn(M, D, generator=g)
            ms = compare(
                None, {"s": lambda: svgd_direction(theta, grad, alpha=1.0)}, repeats=max(5, args.repeats // 3)
            )["s"]["ms"]
            print(f"{M:18d} {D:8d} {ms:8.3f} {1e6 * ms / (M * M * D):13.3f}")
            alone.append({"M": M, "D": D, "ms": ms})
    save_if_asked(args, argv, "bench_sampler", load_before)


if __name__ == "__main__":
    main()
