"""Seconds per epoch of the node pipeline's models against the same model built from stock PyG layers.

    python -m benchmarks.bench_node --dataset minesweeper            # platonov-small's residual GAT
    python -m benchmarks.bench_node --dataset chameleon              # ggcn's 2-layer GAT
    python -m benchmarks.bench_node --dataset tolokers --repeats 5   # the largest shared graph (1.04M edges)
    python -m benchmarks.bench_node --dataset minesweeper --protocol luo --heads 8 --lean   # issue 34's 8-head arms

An epoch is what ``graph_rma.tasks.node_classification.train_run`` does per epoch: one full-batch training step
(Adam) and one evaluation forward pass. Contenders, timed interleaved in one process (``benchmarks.common.compare``):
``stock`` (the protocol's model with PyG's own ``GATConv`` swapped back in, same weights), ``ours`` (the model as the
pipeline trains it), ``ours+svgd`` (with ``SVGD`` attached over the first attention layer) and, with ``--lean``,
``lean`` (``lean=True`` layers). Ratios are to ``stock``.
"""

from __future__ import annotations

import argparse
import copy

import torch
from torch_geometric.nn import GATConv

import graph_rma
from graph_rma.data.nodes import load_node_graph, select_split
from graph_rma.tasks import node_training as nt
from graph_rma.tasks.node_training import _loss
from graph_rma.tasks.protocols import resolve_protocol

from .common import add_json_option, compare, save_if_asked


def _stock(model: torch.nn.Module) -> torch.nn.Module:
    """The same model with every drop-in GAT layer replaced by PyG's GATConv holding the same weights."""
    model = copy.deepcopy(model)
    for parent in list(model.modules()):
        for name, child in list(parent._modules.items()):
            if isinstance(child, graph_rma.nn.RepulsiveGATConv):
                stock = GATConv(
                    child.in_channels,
                    child.out_channels,
                    heads=child.heads,
                    concat=child.concat,
                    dropout=child.dropout,
                    add_self_loops=child.add_self_loops,
                    negative_slope=child.negative_slope,
                    bias=child.bias is not None,  # Luo et al.'s classic GAT has none
                )
                stock.load_state_dict(child.state_dict())
                setattr(parent, name, stock)
    return model


def _epoch(model, data, sampler=None):
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    if sampler is not None:
        sampler(model).attach(opt)
    train, y = select_split(data, 0).train_mask, data.y  # [N] masks (Cora) or [N, splits]

    def run():
        model.train()
        opt.zero_grad()
        out = model(data.x, data.edge_index)
        _loss(out[train], y[train]).backward()
        opt.step()
        model.eval()
        with torch.no_grad():
            model(data.x, data.edge_index)

    return run


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", default="minesweeper")
    p.add_argument("--protocol", default=None, help="default: the graph's own")
    p.add_argument("--heads", type=int, default=None, help="attention heads (default: the protocol's)")
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--lean", action="store_true", help="also time lean=True layers")
    load_before = add_json_option(p)
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    protocol = resolve_protocol(a.protocol, a.dataset, {"heads": a.heads})
    data = nt.prepare_graph(load_node_graph(a.dataset), protocol)
    classes = int(data.y.max()) + 1
    metric, _ = nt.resolve_metric(protocol, classes)
    name, kwargs = nt.model_settings(protocol, data.num_features, classes, metric)
    torch.manual_seed(0)
    ours = nt.build_model(name, kwargs)
    first = "conv1" if name == "gat" else "convs.0"
    fns = {
        "stock": _epoch(_stock(ours), data),
        "ours": _epoch(copy.deepcopy(ours), data),
        "ours+svgd": _epoch(copy.deepcopy(ours), data, lambda m: graph_rma.SVGD(m, alpha=0.1, eps=8, layers=[first])),
    }
    if a.lean:
        lean = copy.deepcopy(ours)
        for m in lean.modules():
            if isinstance(m, graph_rma.nn.RepulsiveGATConv):
                m.lean = True
        fns["lean"] = _epoch(lean, data)
    print(
        f"{a.dataset} ({protocol.name}: {name}, {data.num_nodes} nodes, {data.edge_index.size(1)} edges before "
        f"self-loops), {a.threads} thread(s), torch {torch.__version__}"
    )
    named = [protocol.name] * (a.protocol is not None) + [f"{protocol.heads} heads"] * (a.heads is not None)
    label = f"{a.dataset} ({', '.join(named)})" if named else a.dataset  # the graph's default model: its name alone
    compare(f"seconds per epoch (train step + evaluation), {label}", fns, repeats=a.repeats, warmup=1)
    save_if_asked(a, argv, "bench_node", load_before)


if __name__ == "__main__":
    main()
