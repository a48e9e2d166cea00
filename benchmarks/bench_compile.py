"""torch.compile on this package's layers: graph breaks (must be 0 with add_self_loops=False) and compiled/eager time.

    python -m benchmarks.bench_compile [--repeats 30] [--threads 2] [--nodes 2708 --edges 10556]

For RepulsiveGATConv and RepulsiveGATv2Conv (8 heads x 8, 1433 -> 64 features, with and without DropAttention in
training mode), prints the number of graph breaks reported by torch._dynamo.explain and the ratio of compiled to
eager time for forward and forward+backward, measured in the same run, interleaved, median of repeats.
"""

from __future__ import annotations

import argparse

import torch
import torch._dynamo

from graph_rma import DropAttention
from graph_rma.nn import RepulsiveGATConv, RepulsiveGATv2Conv

from .common import add_json_option, compare, device_name, random_graph, save_if_asked


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--nodes", type=int, default=2708)
    ap.add_argument("--edges", type=int, default=10556)
    load_before = add_json_option(ap)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    x, edge_index, _ = random_graph(args.nodes, args.edges, 1433, 7, device=device)
    print(f"device: {device_name()}; graph: {args.nodes} nodes, {args.edges} edges")
    for cls in (RepulsiveGATConv, RepulsiveGATv2Conv):
        for drop in (None, DropAttention(0.1)):
            torch.manual_seed(0)
            layer = cls(1433, 8, heads=8, add_self_loops=False, dropout=0.1, drop_attention=drop).to(device).train()
            torch._dynamo.reset()
            breaks = torch._dynamo.explain(layer)(x, edge_index).graph_break_count
            compiled = torch.compile(layer)

            def fwd(m):
                return lambda: m(x, edge_index)

            def fwd_bwd(m):
                return lambda: m(x, edge_index).sum().backward()

            name = f"{cls.__name__}{' + DropAttention' if drop else ''}"
            print(f"\n{name}: graph breaks = {breaks}")
            compare(
                f"{name} ({breaks} graph breaks), forward, compiled / eager",
                {"eager": fwd(layer), "compiled": fwd(compiled)},
                repeats=args.repeats,
                warmup=3,
            )
            compare(
                f"{name} ({breaks} graph breaks), forward+backward, compiled / eager",
                {"eager": fwd_bwd(layer), "compiled": fwd_bwd(compiled)},
                repeats=args.repeats,
                warmup=3,
            )
    save_if_asked(args, argv, "bench_compile", load_before)


if __name__ == "__main__":
    main()
