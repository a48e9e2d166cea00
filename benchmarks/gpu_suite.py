"""The GPU suite: every measurement the package owes its GPU users, with one command, as ratios to the peer in the
same process. Writes ``suite.json`` and ``suite.md`` into ``--out``.

    python -m benchmarks.gpu_suite --out results/gpu            # on a GPU machine (device cuda when available)
    python -m benchmarks.gpu_suite --smoke --out /tmp/suite     # every step on tiny sizes, on CPU

Steps (``--steps`` picks some; they run in this order, and ``suite.json`` is rewritten after each):

1. ``memory``: memory-lean attention (``lean=True``, its ``chunked`` and ``fused`` strategies each forced with
   ``GRAPH_RMA_LEAN``) against stock ``GATConv`` / ``GATv2Conv``: one training step (forward + backward) of one
   8x8-head layer, 64 features, N = E / 10 nodes, for each edge count and dtype (float32, bfloat16): peak memory
   above the inputs (``torch.cuda.max_memory_allocated``; not measured on CPU, where ``benchmarks/bench_memory.py``
   measures RSS in separate processes), step time (median, interleaved) and the step's memory-bandwidth bound
   (``benchmarks/bound.py``: the bytes it must move over the device's copy bandwidth, measured at the start).
2. ``layers``: ``RepulsiveGATConv`` / ``GATConv`` step time; the SVGD sampler's overhead on a 2-layer GAT with every
   layer's heads as particles (aim: at most 1.05x); DropAttention against plain attention dropout; ``torch.compile``
   of both drop-in layers (graph breaks counted by ``torch._dynamo.explain``; compiled / eager time, except in
   ``--smoke``); on CUDA the host synchronisations of one sampler step and the source lines they come from;
   DropAttention against attention dropout inside the fused kernels.
3. ``profile``: the kernels with the most device time in one training step of each contender of step 1.
4. ``chunks``: the lean path's step time and memory for each chunk size in ``CHUNK_SIZES``.
5. ``peer``: GATv2 (2 heads x 32, the head size turbo-gnn's kernel takes) with turbo-gnn's fused kernel as a
   further contender when ``--turbo-dir`` holds its build (``benchmarks/turbo_peer.py``), after checking on a small
   graph that it computes stock's function.
6. ``largest``: the largest edge count each contender trains on the card (``benchmarks/gpu_memory.py``: doubling,
   then bisecting to 10%), the searches sharing what is left of ``--deadline``; run last, after every other device
   measurement, since a failing kernel can leave the device unusable.
7. ``node``: the node pipeline's seconds per epoch on the largest shared graph (tolokers, strong-baseline protocol
   ``platonov-small``) against the same model built from stock PyG layers (``benchmarks.bench_node``); without the
   data (or in ``--smoke``) a random graph of the same kind.
8. ``webnlg``: GraphWriter on WebNLG (``--webnlg-preset full``), ``ma`` and ``svgd``, the same seed, trained in
   chunks of ``--chunk-steps`` optimizer steps that resume exactly from their checkpoints under ``--out``: rerun the
   command (``--steps webnlg``) to continue; decode and score on a CPU machine afterwards
   (``graph-rma webnlg evaluate --out ...``; METEOR 1.5 needs Java). ``--smoke`` trains one epoch of the tiny fixture.

The ``fused`` contender runs where its Triton kernels can (``gpu_memory.fused_unavailable``; ``suite.json``'s
``fused`` says where, or why not): on CUDA with Triton, and on the CPU under Triton's interpreter (which ``--smoke``
on the CPU switches on, ``TRITON_INTERPRET=1``) in the memory step's tiny cells only (``INTERPRETER_EDGES``).
``chunks`` times the chunked strategy.

A step that fails is recorded under ``errors`` and the next one runs; the exit status is then 1. A lease of a lent
GPU machine runs ``benchmarks/gpu_lease.sh``.

The suite installs nothing. Preparing a bare GPU machine: see the GPU section of ``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import platform
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

import torch
import torch.nn.functional as F

from benchmarks import bound, turbo_peer
from benchmarks import gpu_memory as gm
from benchmarks.common import compare, random_graph
from graph_rma.argtypes import device as device_name
from graph_rma.argtypes import nonnegative_float, out_dir, positive_float, positive_int

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the repository

#: In the order they run: the risky searches for the largest graph come after every other device measurement.
STEPS = ("memory", "layers", "profile", "chunks", "peer", "largest", "node", "webnlg")


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _step_fn(conv, x, edge_index, y) -> Callable[[], None]:
    def step():
        conv.zero_grad(set_to_none=True)
        F.cross_entropy(conv(x, edge_index).float(), y).backward()

    return step


def _forced(strategy: str, step: Callable[[], None]) -> Callable[[], None]:
    def forced():
        with gm.lean_strategy(strategy):
            step()

    return forced


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def _table(kinds, names, sizes, dtypes, device, repeats, shape, turbo=None, bandwidth=None) -> List[Dict]:
    """Each contender's peak memory per edge and step time (median, interleaved) on the same random graphs, and the
    step's memory-bandwidth bound (``benchmarks/bound.py``) at ``bandwidth`` GB/s; a cell that fails records its
    error and the others go on."""
    rows = []
    for kind in kinds:
        for dtype in dtypes:
            for edges in sizes:
                nodes = max(edges // 10, 2)
                x, ei, y = random_graph(nodes, edges, 64, 64, device=device)
                x = x.to(dtype)
                moved = bound.step_bytes(
                    kind, edges + nodes, nodes, shape["heads"], shape["channels"], 64, _dtype_name(dtype)
                )
                limit = {"step_bytes": moved, "bound_ms": bound.bound_ms(moved, bandwidth)}
                fns, peaks = {}, {}
                for name in names:
                    make = gm.contender(kind, name, device=device, dtype=dtype, turbo=turbo, **shape)
                    try:
                        m = gm.measure(make, x, ei, y, device)
                    except RuntimeError as e:
                        rows.append(
                            {
                                "layer": kind,
                                "dtype": _dtype_name(dtype),
                                "edges": edges,
                                "contender": name,
                                "error": str(e).strip().splitlines()[0][:200],
                            }
                        )
                        continue
                    fns[name], peaks[name] = m["step"], m["bytes_per_edge"]
                times = compare(None, fns, repeats=repeats, warmup=0) if fns else {}
                for name, t in times.items():
                    rows.append(
                        {
                            "layer": kind,
                            "dtype": _dtype_name(dtype),
                            "edges": edges,
                            "contender": name,
                            "bytes_per_edge": peaks[name],
                            "ms": t["ms"],
                            "time_ratio_to_first": t["ratio"],
                            "paired_ratio_to_first": t["paired"],
                            **limit,
                        }
                    )
                del fns, x, ei, y
                gc.collect()
                if device.type == "cuda":
                    torch.cuda.empty_cache()
    return rows


#: The main table's layer: one 8-head x 8-channel layer, 64 features in, attention dropout 0.6.
MAIN = {"heads": 8, "channels": 8, "dropout": 0.6}
#: The fused-kernel peer's table: turbo-gnn's GATv2 kernel takes head sizes 32, 64, 128 or 256 only, so the peer is
#: compared on 2 heads x 32 channels (the same 64 output features), and without attention dropout (it has none).
PEER = {"heads": 2, "channels": 32, "dropout": 0.0}


#: On the CPU the fused kernels run under Triton's interpreter, seconds per step even on tiny graphs (2.4 s at 50
#: edges, 120 s at 2,000, measured on the development machine): there they run in the memory step's cells of this
#: many edges only, beside stock and chunked, and nowhere else.
INTERPRETER_EDGES = 50


def fused_status(device) -> str:
    """``available``, or where the fused contender runs on the CPU, or why it does not run (suite.json's ``fused``)."""
    why = gm.fused_unavailable(device)
    if why:
        return why
    if device.type == "cpu":
        return (
            f"under Triton's interpreter (seconds per step): in the memory step's {INTERPRETER_EDGES}-edge cells only"
        )
    return "available"


def lean_contenders(device) -> List[str]:
    """``stock`` and the lean path's strategies that the timing tables run on ``device``: ``fused`` where
    :func:`benchmarks.gpu_memory.fused_unavailable` finds no reason against it, and not on the CPU (see
    :data:`INTERPRETER_EDGES`)."""
    return ["stock", "chunked"] + ([] if device.type == "cpu" or gm.fused_unavailable(device) else ["fused"])


def memory_step(sizes: List[int], dtypes: List[torch.dtype], device, repeats: int, bandwidth=None) -> List[Dict]:
    """Memory-lean attention (``lean=True``, each strategy forced) against stock ``GATConv``/``GATv2Conv`` at fixed
    edge counts; on the CPU, with Triton's interpreter, also the fused kernels on graphs of :data:`INTERPRETER_EDGES`
    edges."""
    rows = _table(("gat", "gatv2"), lean_contenders(device), sizes, dtypes, device, repeats, MAIN, bandwidth=bandwidth)
    if device.type == "cpu" and not gm.fused_unavailable(device):
        names = ["stock", "chunked", "fused"]
        rows += _table(("gat", "gatv2"), names, [INTERPRETER_EDGES], dtypes, device, repeats, MAIN, bandwidth=bandwidth)
    return rows


def _turbo(folder: Optional[Path], wait: float):
    if folder is None:
        return None, "no --turbo-dir given"
    try:
        return turbo_peer.load(folder, wait)
    except Exception as e:  # the peer is optional: its failure is reported, the suite goes on
        return None, f"turbo-gnn failed to load: {str(e).strip().splitlines()[0][:300]}"


def peer_step(
    sizes, dtypes, device, repeats: int, turbo_dir: Optional[Path], wait: float, bandwidth=None
) -> Dict[str, Any]:
    """Stock ``GATv2Conv``, the lean layer's strategies and turbo-gnn's fused kernel (when it built) on the same
    graphs; first turbo-gnn's output and gradients against stock on a small graph (the same function, or no
    comparison)."""
    turbo, why = _turbo(turbo_dir, wait) if device.type == "cuda" else (None, "turbo-gnn runs on CUDA only")
    out: Dict[str, Any] = {"shape": PEER, "turbo": why or f"turbo-gnn {getattr(turbo, '__version__', '')}".strip()}
    names = lean_contenders(device)
    if turbo is not None:
        try:
            out["turbo_check"] = _turbo_check(turbo, device)
            if out["turbo_check"]["max_abs_diff_output"] < 1e-3:
                names.append("turbo")
        except RuntimeError as e:
            out["turbo_check"] = {"error": str(e).strip().splitlines()[0][:300]}
    out["rows"] = _table(("gatv2",), names, sizes, dtypes, device, repeats, PEER, turbo=turbo, bandwidth=bandwidth)
    out["contenders"] = names
    return out


def _turbo_check(turbo, device) -> Dict[str, float]:
    from torch_geometric.nn import GATv2Conv

    x, ei, y = random_graph(1000, 10000, 64, 8, device=device)
    torch.manual_seed(0)
    conv = GATv2Conv(64, PEER["channels"], heads=PEER["heads"]).to(device)
    layer = turbo_peer.TurboGATv2(conv, turbo)
    grads = []
    outs = []
    for fn in (lambda: conv(x, ei), lambda: layer(x, layer.graph(ei, x.size(0)))):
        conv.zero_grad()
        o = fn()
        o.pow(2).sum().backward()
        outs.append(o.detach())
        grads.append(torch.cat([p.grad.flatten() for p in conv.parameters()]))
    return {
        "max_abs_diff_output": (outs[0] - outs[1]).abs().max().item(),
        "max_abs_diff_grads": (grads[0] - grads[1]).abs().max().item(),
        "max_abs_output": outs[0].abs().max().item(),
    }


def largest_step(
    device,
    dtypes,
    start: int,
    seconds: float,
    turbo_dir: Optional[Path],
    contenders=("stock", "chunked", "fused", "turbo"),
) -> List[Dict]:
    """The largest graph each contender trains on the card (see ``gpu_memory.largest``), the main table's layers
    and then the peer table's; the time is shared among the searches not yet run. ``lean`` in ``contenders`` is
    ``chunked``; ``fused`` is left out where its kernels cannot run."""
    contenders = {"chunked" if c == "lean" else c for c in contenders}
    lean = lean_contenders(device)
    searches = [(kind, name, dtype, MAIN) for kind in ("gat", "gatv2") for dtype in dtypes for name in lean]
    turbo = None
    if device.type == "cuda" and turbo_dir is not None and "turbo" in contenders:
        turbo, _ = _turbo(turbo_dir, 0.0)
    searches += [("gatv2", name, torch.float32, PEER) for name in lean + (["turbo"] if turbo else [])]
    searches = [s for s in searches if s[1] in contenders]
    rows, t0 = [], time.monotonic()
    for i, (kind, name, dtype, shape) in enumerate(searches):
        left = seconds - (time.monotonic() - t0)
        row = {"layer": kind, "contender": name, "dtype": _dtype_name(dtype), "shape": shape}
        if device.type != "cuda":
            rows.append({**row, "error": "the largest graph is searched on CUDA only"})
            continue
        make = gm.contender(kind, name, device=device, dtype=dtype, turbo=turbo, **shape)
        try:
            rows.append({**row, **gm.largest(make, device, dtype, start, max(left / (len(searches) - i), 1.0))})
        except gm.DeviceLost as e:
            rows.append({**row, "error": f"the device failed and the search stopped: {e}"})
            break
    return rows


#: The lean path's chunk sizes tried by the ``chunks`` step (bytes of one chunk's ``[chunk, H, C]`` temporaries).
CHUNK_SIZES = (1 << 20, 1 << 24, 1 << 26, 1 << 28)


def chunks_step(sizes, device, repeats: int) -> List[Dict]:
    """The lean path's step time and peak memory per edge for each chunk size in :data:`CHUNK_SIZES`
    (``graph_rma.nn.lean.chunked.CHUNK_BYTES``), with stock PyG as the reference in the same interleaved rounds:
    the chunk size suited to a device."""
    from graph_rma.nn.lean import chunked as edge_attention

    default = edge_attention.CHUNK_BYTES
    rows = []
    try:
        for kind in ("gat", "gatv2"):
            for edges in sizes:
                x, ei, y = random_graph(max(edges // 10, 2), edges, 64, 64, device=device)
                fns, peaks = {}, {}
                for chunk in (None,) + CHUNK_SIZES:
                    name = "stock" if chunk is None else f"lean {chunk >> 20} MiB"
                    edge_attention.CHUNK_BYTES = chunk or default
                    m = gm.measure(
                        gm.contender(
                            kind, "stock" if chunk is None else "chunked", device=device, dtype=torch.float32, **MAIN
                        ),
                        x,
                        ei,
                        y,
                        device,
                    )

                    def fn(step=m["step"], chunk=chunk or default):
                        edge_attention.CHUNK_BYTES = chunk
                        step()

                    fns[name], peaks[name] = fn, m["bytes_per_edge"]
                for name, t in compare(None, fns, repeats=repeats, warmup=0).items():
                    rows.append(
                        {
                            "layer": kind,
                            "edges": edges,
                            "contender": name,
                            "bytes_per_edge": peaks[name],
                            "ms": t["ms"],
                            "paired_ratio_to_first": t["paired"],
                        }
                    )
                del fns, x, ei, y
                gc.collect()
    finally:
        edge_attention.CHUNK_BYTES = default
    return rows


def profile_step(device, edges: int) -> Dict[str, List[Dict]]:
    """The kernels that take a training step's time, for stock GAT/GATv2 and each lean strategy (float32, ``edges``
    edges): the eight with the most device time each (host time on CPU)."""
    from torch.profiler import ProfilerActivity, profile

    x, ei, y = random_graph(max(edges // 10, 2), edges, 64, 64, device=device)
    out = {}
    for kind in ("gat", "gatv2"):
        for name in lean_contenders(device):
            step = gm.measure(gm.contender(kind, name, device=device, dtype=torch.float32, **MAIN), x, ei, y, device)[
                "step"
            ]
            activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
            with profile(activities=activities) as prof:
                step()
                _sync(device)
            attr = "self_device_time_total" if device.type == "cuda" else "self_cpu_time_total"
            events = [e for e in prof.key_averages() if getattr(e, attr, 0) > 0]
            if device.type == "cuda":  # kernels only: operators' self device time double-counts their kernels
                events = [e for e in events if getattr(e, "device_type", None) != torch.autograd.DeviceType.CPU]
                events = events or [e for e in prof.key_averages() if getattr(e, attr, 0) > 0]
            total = sum(getattr(e, attr) for e in events)
            top = sorted(events, key=lambda e: -getattr(e, attr))[:8]
            out[f"{name} {kind}"] = [
                {
                    "kernel": e.key[:120],
                    "ms": getattr(e, attr) / 1e3,
                    "calls": e.count,
                    "share": getattr(e, attr) / total if total else None,
                }
                for e in top
            ]
            del step
    return out


def layers_step(device, repeats: int, smoke: bool) -> Dict[str, Any]:
    import torch._dynamo
    from torch_geometric.nn import GATConv

    import graph_rma
    from graph_rma.models import TwoLayerGAT
    from graph_rma.nn import RepulsiveGATConv

    nodes, edges = (200, 1000) if smoke else (20000, 200000)
    x, ei, y = random_graph(nodes, edges, 64, 8, device=device)
    out: Dict[str, Any] = {"graph": {"nodes": nodes, "edges": edges}}
    torch.manual_seed(0)
    stock = GATConv(64, 8, heads=8, dropout=0.6).to(device)
    ours = RepulsiveGATConv(64, 8, heads=8, dropout=0.6).to(device)
    out["layer"] = compare(
        None,
        {"GATConv": _step_fn(stock, x, ei, y), "RepulsiveGATConv": _step_fn(ours, x, ei, y)},
        repeats=repeats,
        warmup=1,
    )

    def train_step(sampler: bool, drop: bool):
        torch.manual_seed(0)
        model = TwoLayerGAT(64, 8, heads=8, out_heads=8, drop_attention={"p": 0.6} if drop else None).to(device)
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
    out["sampler"] = compare(None, {"plain 2-layer GAT": plain, "SVGD on every layer": svgd}, repeats=repeats, warmup=1)
    out["dropattention"] = compare(
        None, {"attention dropout": plain, "DropAttention": dropattn}, repeats=repeats, warmup=1
    )
    if "fused" in lean_contenders(device):  # DropAttention's cost inside the fused kernels: one lean layer
        steps = {}
        for name, drop in (("attention dropout", None), ("DropAttention", graph_rma.DropAttention(0.6))):
            torch.manual_seed(0)
            conv = RepulsiveGATConv(64, 8, heads=8, dropout=0.6, drop_attention=drop, lean=True).to(device).train()
            steps[name] = _forced("fused", _step_fn(conv, x, ei, y))
        out["dropattention_fused"] = compare(None, steps, repeats=repeats, warmup=1)
    if device.type == "cuda":  # host synchronisations in one training step with the sampler
        syncs = []
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
            try:
                svgd()
            finally:
                torch.cuda.set_sync_debug_mode("default")
            syncs = [w for w in caught if "synchroniz" in str(w.message)]
        out["sampler_host_syncs_per_step"] = len(syncs)
        sites: Dict[str, int] = {}
        for w in syncs:  # where they come from: the Python line that asked for a host value
            site = f"{os.path.relpath(w.filename, ROOT)}:{w.lineno}"
            sites[site] = sites.get(site, 0) + 1
        out["sampler_host_sync_sites"] = sites
    else:
        out["sampler_host_syncs_per_step"] = None
    from graph_rma.nn import RepulsiveGATv2Conv

    for cls in (RepulsiveGATConv, RepulsiveGATv2Conv):  # the drop-in layers under torch.compile
        name = cls.__name__
        layer = cls(64, 8, heads=8, add_self_loops=False, dropout=0.1).to(device).train()
        torch._dynamo.reset()
        out.setdefault("compile_graph_breaks_by_layer", {})[name] = torch._dynamo.explain(layer)(
            x, ei
        ).graph_break_count
        if not smoke:
            compiled = torch.compile(layer)
            out.setdefault("compile_by_layer", {})[name] = compare(
                None,
                {"eager": lambda: layer(x, ei).sum().backward(), "compiled": lambda: compiled(x, ei).sum().backward()},
                repeats=repeats,
                warmup=3,
            )
    out["compile_graph_breaks"] = sum(out["compile_graph_breaks_by_layer"].values())
    return out


def node_step(device, repeats: int, smoke: bool) -> Dict[str, Any]:
    import copy

    from torch_geometric.data import Data

    from benchmarks.bench_node import _epoch, _stock
    from graph_rma.data.nodes import load_node_graph
    from graph_rma.tasks import node_training as nt
    from graph_rma.tasks.protocols import resolve_protocol

    protocol = resolve_protocol("platonov-small", "tolokers")
    source = "tolokers"
    try:
        if smoke:
            raise FileNotFoundError
        data = nt.prepare_graph(load_node_graph("tolokers"), protocol)
    except (FileNotFoundError, ValueError):  # no data, or the smoke run: a random binary graph of the same kind
        source = "random (tolokers' kind: 10 features, 2 classes)"
        n, e = (300, 3000) if smoke else (11758, 1038000)
        x, ei, y = random_graph(n, e, 10, 2)
        masks = torch.rand(n, 1) < 0.5
        data = Data(x=x, edge_index=ei, y=y, train_mask=masks, val_mask=~masks, test_mask=~masks)
    data = data.to(device)
    name, kwargs = nt.model_settings(protocol, data.num_features, 2, "roc_auc")
    torch.manual_seed(0)
    ours = nt.build_model(name, kwargs).to(device)
    times = compare(
        None,
        {"stock PyG layers": _epoch(_stock(ours), data), "graph_rma": _epoch(copy.deepcopy(ours), data)},
        repeats=repeats,
        warmup=1,
    )
    return {
        "graph": source,
        "protocol": protocol.name,
        "nodes": int(data.num_nodes),
        "edges": int(data.edge_index.size(1)),
        "seconds_per_epoch": times,
    }


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
        summary = webnlg.train(
            config,
            run_dir,
            root,
            variant,
            seed=0,
            progress=False,
            device=str(device),
            save_every=0 if smoke else chunk_steps,
            stop_after=None if smoke else chunk_steps,
        )
        rows[variant] = {
            "out": str(run_dir),
            "seconds": time.perf_counter() - start,
            **{k: summary.get(k) for k in ("best_dev_loss", "steps", "stopped", "step")},
        }
    return rows


def _memory_lines(rows: List[Dict]) -> List[str]:
    lines = [
        "| layer | dtype | edges | contender | bytes / edge | ms / step | time / stock (paired) | bandwidth bound ms |",
        "| --- | --- | ---: | --- | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        if "error" in r:
            lines.append(
                f"| {r['layer']} | {r['dtype']} | {r['edges']:,} | {r['contender']} | failed: {r['error']} | | | |"
            )
            continue
        b = "—" if r["bytes_per_edge"] is None else f"{r['bytes_per_edge']:.0f}"
        limit = "—" if r.get("bound_ms") is None else f"{r['bound_ms']:.3f}"
        lines.append(
            f"| {r['layer']} | {r['dtype']} | {r['edges']:,} | {r['contender']} | {b} | {r['ms']:.2f} | "
            f"{r['paired_ratio_to_first']:.2f} | {limit} |"
        )
    return lines


def to_markdown(result: Dict[str, Any]) -> str:
    lines = [f"# GPU suite ({result['device']}; torch {result['torch']}; {'smoke' if result['smoke'] else 'full'})", ""]
    if "fused" in result:
        lines += [f"Fused kernels: {result['fused']}", ""]
    if result.get("bandwidth_gb_per_s"):
        lines += [f"Memory bandwidth (a copy within the device): {result['bandwidth_gb_per_s']:.0f} GB/s", ""]
    for step, error in result.get("errors", {}).items():
        lines += [f"**{step} failed**: {error}", ""]
    if "memory" in result:
        lines += ["## Memory-lean attention against stock PyG", ""] + _memory_lines(result["memory"]) + [""]
    if "peer" in result:
        P = result["peer"]
        lines += ["## GATv2 with a fused-kernel peer", "", f"{P['shape']}; turbo-gnn: {P['turbo']}", ""]
        if "turbo_check" in P:
            lines += [f"turbo-gnn against stock on a small graph: {json.dumps(P['turbo_check'])}", ""]
        lines += _memory_lines(P["rows"]) + [""]
    if "largest" in result:
        lines += [
            "## Largest graph trained",
            "",
            "| layer | shape | dtype | contender | largest edges | first failing "
            "| ms / step there | bytes / edge there | searched to 10% |",
            "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | --- |",
        ]
        for r in result["largest"]:
            shape = f"{r['shape']['heads']}x{r['shape']['channels']}"
            if "error" in r:
                lines.append(f"| {r['layer']} | {shape} | {r['dtype']} | {r['contender']} | {r['error']} | | | | |")
                continue
            ms = "—" if r["ms_at_largest"] is None else f"{r['ms_at_largest']:.1f}"
            b = "—" if r["bytes_per_edge_at_largest"] is None else f"{r['bytes_per_edge_at_largest']:.0f}"
            bad = "—" if r["first_failing_edges"] is None else f"{r['first_failing_edges']:,} ({r['failure']})"
            lines.append(
                f"| {r['layer']} | {shape} | {r['dtype']} | {r['contender']} | {r['largest_edges']:,} | {bad} "
                f"| {ms} | {b} | {'no (time bound)' if r['bounded'] else 'yes'} |"
            )
        lines.append("")
    if "chunks" in result:
        lines += [
            "## The lean path's chunk size",
            "",
            "| layer | edges | contender | bytes / edge | ms / step | time / stock (paired) |",
            "| --- | ---: | --- | ---: | ---: | ---: |",
        ]
        lines += [
            f"| {r['layer']} | {r['edges']:,} | {r['contender']} | "
            f"{'—' if r['bytes_per_edge'] is None else format(r['bytes_per_edge'], '.0f')} | {r['ms']:.2f} | "
            f"{r['paired_ratio_to_first']:.2f} |"
            for r in result["chunks"]
        ] + [""]
    if "profile" in result:
        lines += ["## Where a training step's time goes", ""]
        for name, top in result["profile"].items():
            lines += (
                [f"{name}:", ""]
                + [f"* {k['ms']:.2f} ms ({k['share']:.0%}), {k['calls']} calls: `{k['kernel']}`" for k in top]
                + [""]
            )
    if "layers" in result:
        L = result["layers"]
        lines += [
            "## Layers, sampler, DropAttention, torch.compile",
            "",
            f"* RepulsiveGATConv / GATConv step: {L['layer']['RepulsiveGATConv']['ratio']:.3f}",
            f"* SVGD on every layer / plain (2-layer GAT): {L['sampler']['SVGD on every layer']['ratio']:.3f}",
            f"* DropAttention / attention dropout: {L['dropattention']['DropAttention']['ratio']:.3f}",
        ]
        if "dropattention_fused" in L:
            lines.append(
                f"* DropAttention / attention dropout, fused kernels: "
                f"{L['dropattention_fused']['DropAttention']['ratio']:.3f}"
            )
        lines += [
            f"* torch.compile graph breaks: {L['compile_graph_breaks']}",
            f"* host synchronisations per sampler step: {L['sampler_host_syncs_per_step']}",
        ]
        for name, c in L.get("compile_by_layer", {}).items():
            lines.append(f"* {name} compiled / eager (forward + backward): {c['compiled']['ratio']:.3f}")
        lines.append("")
    if "node" in result:
        N = result["node"]
        t = N["seconds_per_epoch"]
        lines += [
            "## Node pipeline",
            "",
            f"{N['graph']} ({N['nodes']:,} nodes, {N['edges']:,} edges), protocol "
            f"{N['protocol']}: {t['graph_rma']['ms'] / 1e3:.3f} s per epoch, stock PyG layers "
            f"{t['stock PyG layers']['ms'] / 1e3:.3f} s (ratio {t['graph_rma']['ratio']:.3f})",
            "",
        ]
    if "webnlg" in result:
        lines += ["## WebNLG chunks", ""] + [f"* {v}: {json.dumps(r)}" for v, r in result["webnlg"].items()] + [""]
    return "\n".join(lines)


def edge_count(text: str) -> int:
    """An edge count: a whole number >= 1, digits or a float's notation (``1e6``); ``1.5``, ``inf``, ``nan`` and
    ``0`` are refused (argparse prints one line naming the option)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an edge count such as 1e6, got {text!r}") from None
    if not math.isfinite(value) or value < 1 or value != int(value):
        raise argparse.ArgumentTypeError(f"expected a whole number of edges >= 1, got {text!r}")
    return int(value)


def _writable_folder(path: Path) -> Path:
    """``--out`` checked before any work: a folder (created) that can be written to."""
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"--out: {path} is a file, expected a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        raise argparse.ArgumentTypeError(f"--out: cannot write to {path} ({e.strerror})")
    return path


def _save(out: Path, result: Dict[str, Any]) -> None:
    for name, text in (("suite.json", json.dumps(result, indent=1, default=str)), ("suite.md", to_markdown(result))):
        tmp = out / f".{name}.tmp"
        tmp.write_text(text)
        tmp.replace(out / name)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=out_dir, default=Path("results/gpu_suite"))
    p.add_argument(
        "--device", type=device_name, default=None, help="cpu, cuda or cuda:N (default: cuda when available)"
    )
    p.add_argument("--smoke", action="store_true", help="every step on tiny sizes (CPU is fine): the suite's own test")
    p.add_argument("--steps", nargs="+", choices=STEPS, default=list(STEPS), help="run in the order of the choices")
    p.add_argument("--edges", nargs="+", type=edge_count, default=[10**6, 10**7], help="edge counts of the memory step")
    p.add_argument("--repeats", type=positive_int, default=10)
    p.add_argument(
        "--deadline",
        type=positive_float,
        default=None,
        help="seconds: a step not started by then is skipped; the largest-graph searches share what is "
        "left of it (default: 60 s per search)",
    )
    p.add_argument(
        "--turbo-dir",
        type=Path,
        default=None,
        help="peer: turbo-gnn's build folder (benchmarks/turbo_peer.py build), waited for up to --turbo-wait",
    )
    p.add_argument("--turbo-wait", type=nonnegative_float, default=0.0)
    p.add_argument(
        "--contenders",
        nargs="+",
        choices=("stock", "chunked", "fused", "turbo", "lean"),
        default=["stock", "chunked", "fused", "turbo"],
        help="largest: whose largest graph to search (lean: chunked)",
    )
    p.add_argument(
        "--largest-start",
        type=edge_count,
        default=None,
        help="largest: the first edge count tried (default: the largest of --edges)",
    )
    p.add_argument("--webnlg-preset", default="full")
    p.add_argument(
        "--chunk-steps",
        type=positive_int,
        default=400,
        help="webnlg: optimizer steps per call (each call resumes from the checkpoint; keep a call under "
        "the machine's per-command limit)",
    )
    a = p.parse_args(argv)
    try:
        _writable_folder(a.out)
    except argparse.ArgumentTypeError as e:
        p.error(str(e))
    device = torch.device(a.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if a.smoke and device.type == "cpu":  # the fused kernels run on the CPU under Triton's interpreter only
        os.environ.setdefault("TRITON_INTERPRET", "1")
    sizes = [2000, 4000] if a.smoke else [int(e) for e in a.edges]
    dtypes = [torch.float32] if a.smoke and device.type == "cpu" else [torch.float32, torch.bfloat16]
    repeats = 2 if a.smoke else a.repeats
    result: Dict[str, Any] = {
        "device": torch.cuda.get_device_name(device)
        if device.type == "cuda"
        else f"CPU ({platform.machine()}, {torch.get_num_threads()} threads)",
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "smoke": a.smoke,
        "command": "python -m benchmarks.gpu_suite " + " ".join(argv if argv is not None else sys.argv[1:]),
    }
    if device.type == "cuda":
        import torch_geometric

        result["pyg"] = torch_geometric.__version__
        result["memory_gib"] = round(torch.cuda.get_device_properties(device).total_memory / 2**30, 1)
        try:
            import subprocess

            result["driver"] = subprocess.run(
                ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=30,
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            result["driver"] = None
    try:
        import triton

        result["triton"] = triton.__version__
    except ImportError:
        result["triton"] = None
    result["fused"] = fused_status(device)
    print(f"fused kernels: {result['fused']}", flush=True)
    result["bandwidth_gb_per_s"] = gm.copy_bandwidth(device, 1 << (26 if a.smoke else 30))
    started = time.perf_counter()
    steps = {
        "memory": lambda: memory_step(sizes, dtypes, device, repeats, result["bandwidth_gb_per_s"]),
        "layers": lambda: layers_step(device, repeats, a.smoke),
        "profile": lambda: profile_step(device, sizes[-1]),
        "chunks": lambda: chunks_step(sizes, device, repeats),
        "peer": lambda: peer_step(
            sizes, dtypes, device, repeats, a.turbo_dir, a.turbo_wait, result["bandwidth_gb_per_s"]
        ),
        "largest": lambda: largest_step(
            device,
            dtypes,
            int(a.largest_start or sizes[-1]),
            (a.deadline - (time.perf_counter() - started)) if a.deadline else 60.0 * 10,
            a.turbo_dir,
            a.contenders,
        ),
        "node": lambda: node_step(device, repeats, a.smoke),
        "webnlg": lambda: webnlg_step(a.out, device, a.smoke, a.webnlg_preset, a.chunk_steps),
    }
    for step in [s for s in STEPS if s in a.steps]:
        if a.deadline is not None and time.perf_counter() - started > a.deadline:
            result.setdefault("skipped", []).append(step)
            continue
        t = time.perf_counter()
        try:
            result[step] = steps[step]()
        except Exception as e:  # one step's failure is recorded; the steps after it still run
            result.setdefault("errors", {})[step] = f"{type(e).__name__}: {str(e).strip()[:500]}"
        result.setdefault("step_seconds", {})[step] = round(time.perf_counter() - t, 1)
        result["seconds"] = time.perf_counter() - started
        _save(a.out, result)  # after every step: a later failure or a timeout loses nothing measured
        print(f"{step}: {result['step_seconds'][step]} s", flush=True)
    result["seconds"] = time.perf_counter() - started
    _save(a.out, result)
    print(to_markdown(result))
    print(f"wrote {a.out / 'suite.json'} and {a.out / 'suite.md'} in {result['seconds']:.0f} s")
    return 1 if result.get("errors") else 0


if __name__ == "__main__":
    sys.exit(main())
