"""The GPU suite: every measurement the package owes its GPU users, with one command, as ratios to the peer in the
same process. Writes ``suite.json`` and ``suite.md`` into ``--out``.

    python -m benchmarks.gpu_suite --out results/gpu            # on a GPU machine (device cuda when available)
    python -m benchmarks.gpu_suite --smoke --out /tmp/suite     # every step on tiny sizes, on CPU, in about a minute

Steps (``--steps`` picks some):

1. ``memory``: memory-lean attention (``lean=True``) against stock ``GATConv`` / ``GATv2Conv``: one training step
   (forward + backward) of one 8x8-head layer, 64 features, N = E / 10 nodes, for each edge count and dtype (float32,
   bfloat16): peak memory above the inputs (``torch.cuda.max_memory_allocated``; not measured on CPU, where
   ``benchmarks/bench_memory.py`` measures RSS in separate processes) and step time (median, interleaved); on CUDA
   also the largest edge count each contender trains (doubling from the largest size until out of memory).
2. ``layers``: ``RepulsiveGATConv`` / ``GATConv`` step time; the SVGD sampler's overhead on a 2-layer GAT with every
   layer's heads as particles (aim: at most 1.05x); DropAttention against plain attention dropout; ``torch.compile``
   (graph breaks counted by ``torch._dynamo.explain``; compiled / eager time, except in ``--smoke``); on CUDA the
   host synchronisations of one sampler step (``torch.cuda.set_sync_debug_mode``; aim: at most one).
3. ``node``: the node pipeline's seconds per epoch on the largest shared graph (tolokers, strong-baseline protocol
   ``platonov-small``) against the same model built from stock PyG layers (``benchmarks.bench_node``); without the
   data (or in ``--smoke``) a random graph of the same kind.
4. ``webnlg``: GraphWriter on WebNLG (``--webnlg-preset full``), ``ma`` and ``svgd``, the same seed, trained in
   chunks of ``--chunk-steps`` optimizer steps that resume exactly from their checkpoints under ``--out``: rerun the
   command (``--steps webnlg``) to continue; decode and score on a CPU machine afterwards (``graph-rma webnlg evaluate --out ...``; METEOR 1.5 needs
   Java). ``--smoke`` trains one epoch of the tiny fixture.

The suite installs nothing. Preparing a bare GPU machine: see the GPU section of ``benchmarks/README.md``.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Dict, List

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from benchmarks.common import compare, random_graph  # noqa: E402

STEPS = ("memory", "layers", "node", "webnlg")


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _layer(kind: str, lean: bool, device, dtype):
    from torch_geometric.nn import GATConv, GATv2Conv

    from graph_rma.nn import RepulsiveGATConv, RepulsiveGATv2Conv

    torch.manual_seed(0)
    if lean:
        cls = RepulsiveGATv2Conv if kind == "gatv2" else RepulsiveGATConv
        conv = cls(64, 8, heads=8, dropout=0.6, lean=True)
    else:
        conv = (GATv2Conv if kind == "gatv2" else GATConv)(64, 8, heads=8, dropout=0.6)
    return conv.to(device=device, dtype=dtype).train()


def _step_fn(conv, x, edge_index, y) -> Callable[[], None]:
    def step():
        conv.zero_grad(set_to_none=True)
        F.cross_entropy(conv(x, edge_index).float(), y).backward()

    return step


def memory_step(sizes: List[int], dtypes: List[torch.dtype], device, repeats: int, find_largest: bool) -> List[Dict]:
    rows = []
    for kind in ("gat", "gatv2"):
        for dtype in dtypes:
            for edges in sizes:
                x, ei, y = random_graph(max(edges // 10, 2), edges, 64, 64, device=device)
                x = x.to(dtype)
                fns, peaks = {}, {}
                for lean in (False, True):
                    name = ("lean" if lean else "stock") + f" {kind}"
                    conv = _layer(kind, lean, device, dtype)
                    fn = _step_fn(conv, x, ei, y)
                    fn()  # warm-up (and the lean layout)
                    if device.type == "cuda":
                        torch.cuda.synchronize(device)
                        base = torch.cuda.memory_allocated(device)
                        torch.cuda.reset_peak_memory_stats(device)
                        fn()
                        torch.cuda.synchronize(device)
                        peaks[name] = (torch.cuda.max_memory_allocated(device) - base) / edges
                    else:
                        peaks[name] = None
                    fns[name] = fn
                times = compare(None, fns, repeats=repeats, warmup=1)
                for name, t in times.items():
                    rows.append({"layer": kind, "dtype": str(dtype).replace("torch.", ""), "edges": edges,
                                 "contender": name.split()[0], "bytes_per_edge": peaks[name], "ms": t["ms"],
                                 "time_ratio_to_stock": t["ratio"]})
            if find_largest and device.type == "cuda":
                for lean in (False, True):
                    rows.append({"layer": kind, "dtype": str(dtype).replace("torch.", ""), "largest_edges":
                                 _largest(kind, lean, device, dtype, sizes[-1]), "contender": "lean" if lean else "stock"})
    return rows


def _largest(kind, lean, device, dtype, start) -> int:
    edges, ok = start, 0
    while edges <= 4 * 10 ** 9:
        try:
            x, ei, y = random_graph(edges // 10, edges, 64, 64, device=device)
            _step_fn(_layer(kind, lean, device, dtype), x.to(dtype), ei, y)()
            torch.cuda.synchronize(device)
            ok = edges
        except torch.cuda.OutOfMemoryError:
            break
        finally:
            torch.cuda.empty_cache()
        edges *= 2
    return ok


def layers_step(device, repeats: int, smoke: bool) -> Dict[str, Any]:
    import torch._dynamo
    from torch_geometric.nn import GATConv

    import graph_rma
    from graph_rma.models import GAT
    from graph_rma.nn import RepulsiveGATConv

    nodes, edges = (200, 1000) if smoke else (20000, 200000)
    x, ei, y = random_graph(nodes, edges, 64, 8, device=device)
    out: Dict[str, Any] = {"graph": {"nodes": nodes, "edges": edges}}
    torch.manual_seed(0)
    stock = GATConv(64, 8, heads=8, dropout=0.6).to(device)
    ours = RepulsiveGATConv(64, 8, heads=8, dropout=0.6).to(device)
    out["layer"] = compare(None, {"GATConv": _step_fn(stock, x, ei, y), "RepulsiveGATConv": _step_fn(ours, x, ei, y)},
                           repeats=repeats, warmup=1)

    def train_step(sampler: bool, drop: bool):
        torch.manual_seed(0)
        model = GAT(64, 8, heads=8, out_heads=8,
                    drop_attention={"p": 0.6} if drop else None).to(device)
        opt = torch.optim.Adam(model.parameters(), lr=0.005)
        if sampler:
            graph_rma.SVGD(model, alpha=0.1, eps=8).attach(opt)

        def step():
            opt.zero_grad()
            F.cross_entropy(model(x, ei), y).backward()
            opt.step()

        return step, opt

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain, _ = train_step(False, False)
        svgd, svgd_opt = train_step(True, False)
        dropattn, _ = train_step(False, True)
    out["sampler"] = compare(None, {"plain 2-layer GAT": plain, "SVGD on every layer": svgd}, repeats=repeats,
                             warmup=1)
    out["dropattention"] = compare(None, {"attention dropout": plain, "DropAttention": dropattn}, repeats=repeats,
                                   warmup=1)
    if device.type == "cuda":  # host synchronisations in one training step with the sampler
        syncs = []
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
            try:
                svgd()
            finally:
                torch.cuda.set_sync_debug_mode("default")
            syncs = [str(w.message).splitlines()[0] for w in caught if "synchroniz" in str(w.message)]
        out["sampler_host_syncs_per_step"] = len(syncs)
    else:
        out["sampler_host_syncs_per_step"] = None
    layer = RepulsiveGATConv(64, 8, heads=8, add_self_loops=False, dropout=0.1).to(device).train()
    torch._dynamo.reset()
    out["compile_graph_breaks"] = torch._dynamo.explain(layer)(x, ei).graph_break_count
    if not smoke:
        compiled = torch.compile(layer)
        out["compile"] = compare(None, {"eager": lambda: layer(x, ei).sum().backward(),
                                        "compiled": lambda: compiled(x, ei).sum().backward()},
                                 repeats=repeats, warmup=3)
    return out


def node_step(device, repeats: int, smoke: bool) -> Dict[str, Any]:
    import copy

    from torch_geometric.data import Data

    from benchmarks.bench_node import _epoch, _stock
    from graph_rma.data.nodes import load_node_graph
    from graph_rma.tasks import node_classification as nc
    from graph_rma.tasks.protocols import resolve_protocol

    protocol = resolve_protocol("platonov-small", "tolokers")
    source = "tolokers"
    try:
        if smoke:
            raise FileNotFoundError
        data = nc.prepare_graph(load_node_graph("tolokers"), protocol)
    except (FileNotFoundError, ValueError):  # no data, or the smoke run: a random binary graph of the same kind
        source = "random (tolokers' kind: 10 features, 2 classes)"
        n, e = (300, 3000) if smoke else (11758, 1038000)
        x, ei, y = random_graph(n, e, 10, 2)
        masks = torch.rand(n, 1) < 0.5
        data = Data(x=x, edge_index=ei, y=y, train_mask=masks, val_mask=~masks, test_mask=~masks)
    data = data.to(device)
    name, kwargs = nc.model_settings(protocol, data.num_features, 2, "roc_auc")
    torch.manual_seed(0)
    ours = nc.build_model(name, kwargs).to(device)
    times = compare(None, {"stock PyG layers": _epoch(_stock(ours), data), "graph_rma": _epoch(copy.deepcopy(ours), data)},
                    repeats=repeats, warmup=1)
    return {"graph": source, "protocol": protocol.name, "nodes": int(data.num_nodes),
            "edges": int(data.edge_index.size(1)), "seconds_per_epoch": times}


def webnlg_step(out: Path, device, smoke: bool, preset: str, chunk_steps: int) -> Dict[str, Any]:
    from graph_rma.tasks import webnlg

    rows = {}
    for variant in ("ma", "svgd"):
        run_dir = out / "webnlg" / variant
        config = dict(webnlg.PRESETS["cpu" if smoke else preset])
        if smoke:
            config.update(epochs=1, hidden=16, layers=1, batch_size=4)
        root = Path(ROOT) / "datasets" / "fixtures" / "webnlg_tiny" if smoke else None
        start = time.perf_counter()
        summary = webnlg.train(config, run_dir, root, variant, seed=0, progress=False, device=str(device),
                               save_every=0 if smoke else chunk_steps, stop_after=None if smoke else chunk_steps)
        rows[variant] = {"out": str(run_dir), "seconds": time.perf_counter() - start,
                         **{k: summary.get(k) for k in ("best_dev_loss", "steps", "stopped", "step")}}
    return rows


def to_markdown(result: Dict[str, Any]) -> str:
    lines = [f"# GPU suite ({result['device']}; torch {result['torch']}; {'smoke' if result['smoke'] else 'full'})",
             ""]
    if "memory" in result:
        lines += ["## Memory-lean attention against stock PyG", "",
                  "| layer | dtype | edges | contender | bytes / edge | ms / step | time / stock |",
                  "| --- | --- | ---: | --- | ---: | ---: | ---: |"]
        for r in result["memory"]:
            if "largest_edges" in r:
                continue
            b = "—" if r["bytes_per_edge"] is None else f"{r['bytes_per_edge']:.0f}"
            lines.append(f"| {r['layer']} | {r['dtype']} | {r['edges']:,} | {r['contender']} | {b} | {r['ms']:.2f} | "
                         f"{r['time_ratio_to_stock']:.2f} |")
        largest = [r for r in result["memory"] if "largest_edges" in r]
        for r in largest:
            lines.append(f"\nLargest graph ({r['layer']}, {r['dtype']}, {r['contender']}): {r['largest_edges']:,} edges")
        lines.append("")
    if "layers" in result:
        L = result["layers"]
        lines += ["## Layers, sampler, DropAttention, torch.compile", "",
                  f"* RepulsiveGATConv / GATConv step: {L['layer']['RepulsiveGATConv']['ratio']:.3f}",
                  f"* SVGD on every layer / plain (2-layer GAT): {L['sampler']['SVGD on every layer']['ratio']:.3f}",
                  f"* DropAttention / attention dropout: {L['dropattention']['DropAttention']['ratio']:.3f}",
                  f"* torch.compile graph breaks: {L['compile_graph_breaks']}",
                  f"* host synchronisations per sampler step: {L['sampler_host_syncs_per_step']}"]
        if "compile" in L:
            lines.append(f"* compiled / eager (forward + backward): {L['compile']['compiled']['ratio']:.3f}")
        lines.append("")
    if "node" in result:
        N = result["node"]
        t = N["seconds_per_epoch"]
        lines += ["## Node pipeline", "", f"{N['graph']} ({N['nodes']:,} nodes, {N['edges']:,} edges), protocol "
                  f"{N['protocol']}: {t['graph_rma']['ms'] / 1e3:.3f} s per epoch, stock PyG layers "
                  f"{t['stock PyG layers']['ms'] / 1e3:.3f} s (ratio {t['graph_rma']['ratio']:.3f})", ""]
    if "webnlg" in result:
        lines += ["## WebNLG chunks", ""] + [f"* {v}: {json.dumps(r)}" for v, r in result["webnlg"].items()] + [""]
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=Path("results/gpu_suite"))
    p.add_argument("--device", default=None, help="default: cuda when available, else cpu")
    p.add_argument("--smoke", action="store_true", help="every step on tiny sizes (CPU is fine): the suite's own test")
    p.add_argument("--steps", nargs="+", choices=STEPS, default=list(STEPS))
    p.add_argument("--edges", nargs="+", type=float, default=[1e6, 1e7], help="edge counts of the memory step")
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--webnlg-preset", default="full")
    p.add_argument("--chunk-steps", type=int, default=400,
                   help="webnlg: optimizer steps per call (each call resumes from the checkpoint; keep a call under "
                        "the machine's per-command limit)")
    a = p.parse_args(argv)
    device = torch.device(a.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    sizes = [2000, 4000] if a.smoke else [int(e) for e in a.edges]
    dtypes = [torch.float32] if a.smoke and device.type == "cpu" else [torch.float32, torch.bfloat16]
    repeats = 2 if a.smoke else a.repeats
    result: Dict[str, Any] = {"device": torch.cuda.get_device_name(device) if device.type == "cuda" else
                              f"CPU ({platform.machine()}, {torch.get_num_threads()} threads)",
                              "torch": torch.__version__, "cuda": torch.version.cuda, "smoke": a.smoke}
    started = time.perf_counter()
    if "memory" in a.steps:
        result["memory"] = memory_step(sizes, dtypes, device, repeats, find_largest=not a.smoke)
    if "layers" in a.steps:
        result["layers"] = layers_step(device, repeats, a.smoke)
    if "node" in a.steps:
        result["node"] = node_step(device, repeats, a.smoke)
    if "webnlg" in a.steps:
        result["webnlg"] = webnlg_step(a.out, device, a.smoke, a.webnlg_preset, a.chunk_steps)
    result["seconds"] = time.perf_counter() - started
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "suite.json").write_text(json.dumps(result, indent=1, default=str))
    (a.out / "suite.md").write_text(to_markdown(result))
    print(to_markdown(result))
    print(f"wrote {a.out / 'suite.json'} and {a.out / 'suite.md'} in {result['seconds']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
