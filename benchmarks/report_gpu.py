"""The GPU tables of benchmarks/README.md, rendered from ``benchmarks/recorded/gpu.json``: the runs of
``benchmarks/gpu_suite.py`` on a lent GPU (``benchmarks/gpu_lease.sh``), each with its conditions, the CUDA tests'
outcomes and the suite's JSON as it wrote it. Verdicts against the goals below are computed here, never typed."""

from __future__ import annotations

from typing import Callable, Dict, List, Optional, Tuple

from benchmarks import bound

#: The package's goals on a GPU (not promises): memory-lean attention needs at least this many times less peak memory
#: than stock PyG, at no more than stock's step time, and trains a graph at least this many times larger; the sampler
#: costs at most this factor of a plain step.
LEAN_MEMORY_GOAL, LEAN_TIME_GOAL, LARGEST_GOAL, SAMPLER_GOAL = 6.0, 1.0, 6.0, 1.05
#: The fused kernels' targets (issue 61): GAT 8x8 float32 at the largest size at most this factor of stock's step
#: time and this many bytes per edge; a graph this many times larger than stock's; within this factor of the
#: bandwidth bound (an aim).
FUSED_TIME_TARGET, FUSED_BYTES_TARGET, FUSED_LARGEST_TARGET, BOUND_AIM = 0.5, 60.0, 15.0, 2.0
#: The order of the contenders in a table. ``lean`` is how runs before the fused kernels named the chunked strategy.
ORDER = ("stock", "chunked", "fused", "turbo")


def _name(contender: str) -> str:
    return "chunked" if contender == "lean" else contender


def _conditions(runs: List[Dict]) -> str:
    m = runs[0]["meta"]
    commands = "; ".join(f"`{r['meta']['command']}`" for r in runs)
    triton = f", Triton {m['triton']}" if m.get("triton") else ""
    return (
        f"{len(runs)} run{'s' * (len(runs) != 1)} ({commands}) on {m['device']} ({m['memory_gib']:g} GiB; driver "
        f"{m['driver']}; torch {m['torch']}, CUDA {m['cuda']}, PyG {m['pyg']}{triton}; {m['machine']}; {m['date']})"
    )


def bandwidth(run: Dict) -> Tuple[Optional[float], str]:
    """The run's memory bandwidth in GB/s and how it is known: measured by the suite, else the card's nominal one
    (:data:`benchmarks.bound.NOMINAL_GB_PER_S`), else ``(None, "")``."""
    measured = run["suite"].get("bandwidth_gb_per_s")
    if measured:
        return measured, "measured"
    nominal = bound.NOMINAL_GB_PER_S.get(run["meta"]["device"])
    return (nominal, "nominal") if nominal else (None, "")


def bound_of(run: Dict, row: Dict, shape: Dict) -> Optional[float]:
    """A table row's bandwidth bound in ms: recorded by the suite, or computed from the row's size and the run's
    bandwidth (:func:`bandwidth`)."""
    if row.get("bound_ms") is not None:
        return row["bound_ms"]
    gb_per_s, _ = bandwidth(run)
    nodes = max(row["edges"] // 10, 2)
    moved = bound.step_bytes(
        row["layer"], row["edges"] + nodes, nodes, shape["heads"], shape["channels"], 64, row["dtype"]
    )
    return bound.bound_ms(moved, gb_per_s)


def _bandwidth_note(runs: List[Dict]) -> str:
    known = {bandwidth(r) for r in runs}
    parts = [f"{gb:,.0f} GB/s ({how})" for gb, how in sorted(known, key=str) if gb]
    return (
        "The bandwidth bound is the bytes one step must move (`benchmarks/bound.py`: three passes over the edges, "
        "each reading an index, a node row and its scores, plus the node tensors; no attention weights or masks) "
        f"over the card's memory bandwidth, {', '.join(parts) or 'unknown'}; "
        "measured means a copy within the card at the suite's start, nominal the vendor's figure."
    )


def _with(runs: List[Dict], step: str) -> List[Dict]:
    return [r for r in runs if step in r["suite"]]


def _x(a: float, b: float) -> str:
    return f"{a / b:.1f}x"


def _pairs(rows: List[Dict]) -> Dict[Tuple, Dict[str, Dict]]:
    """The rows of a memory table grouped by (layer, dtype, edges), keyed by contender."""
    out: Dict[Tuple, Dict[str, Dict]] = {}
    for r in rows:
        out.setdefault((r["layer"], r["dtype"], r["edges"]), {})[r["contender"]] = r
    return out


def _contender_rows(run: Dict, rows: List[Dict], shape: Dict, lines: List[str]) -> Dict[Tuple, Dict[str, Dict]]:
    """One table line per contender of each cell (``lines`` grows), stock first; returns the cells by contender."""
    cells = {}
    for key, c in _pairs(rows).items():
        c = {_name(k): v for k, v in c.items()}
        cells[key] = c
        layer, dtype, edges = key
        stock = c.get("stock", {})
        for name in sorted(c, key=lambda n: ORDER.index(n) if n in ORDER else len(ORDER)):
            r = c[name]
            if "ms" not in r:
                lines.append(f"| {layer} | {dtype} | {edges:,} | {name} | failed: {r.get('error')} | | | | | |")
                continue
            less = _x(stock["bytes_per_edge"], r["bytes_per_edge"]) if name != "stock" and "ms" in stock else ""
            limit = bound_of(run, r, shape)
            lines.append(
                f"| {layer} | {dtype} | {edges:,} | {name} | {r['bytes_per_edge']:,.0f} | {less} | {r['ms']:.2f} | "
                f"{r['paired_ratio_to_first']:.2f} | {'-' if limit is None else format(limit, '.2f')} | "
                f"{'-' if limit is None else _x(r['ms'], limit)} |"
            )
    return cells


_HEADER = [
    "| layer | dtype | edges | contender | B/edge | less memory than stock | ms / step | time / stock (paired) | "
    "bandwidth bound ms | ms / bound |",
    "| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
]


def render_memory(runs: List[Dict]) -> str:
    """Stock PyG and ``lean=True``'s strategies (chunked; fused where recorded) at each size and dtype: peak bytes
    per edge, step time and the step's bandwidth bound, with the verdicts on the goals and the fused targets."""
    runs = _with(runs, "memory")
    lines = list(_HEADER)
    less, slower, fused = [], [], []
    for run in runs:
        cells = _contender_rows(run, run["suite"]["memory"], MAIN, lines)
        for (layer, dtype, edges), c in cells.items():
            s, lean, f = c.get("stock", {}), c.get("chunked", {}), c.get("fused", {})
            if "ms" in s and "ms" in lean:
                less.append(s["bytes_per_edge"] / lean["bytes_per_edge"])
                slower.append(lean["paired_ratio_to_first"])
            if "ms" in s and "ms" in f and (layer, dtype) == ("gat", "float32"):
                fused.append((edges, f, bound_of(run, f, MAIN)))
    text = f"{_conditions(runs)}."
    if less:
        mem_met = sum(v >= LEAN_MEMORY_GOAL for v in less)
        time_met = sum(v <= LEAN_TIME_GOAL for v in slower)
        text += (
            f" The chunked strategy needs {min(less):.1f}-{max(less):.1f}x less peak memory than stock (goal: at "
            f"least {LEAN_MEMORY_GOAL:g}x; met in {mem_met} of {len(less)} cells) and takes "
            f"{min(slower):.2f}-{max(slower):.2f}x stock's step time (goal: at most {LEAN_TIME_GOAL:g}x; met in "
            f"{time_met} of {len(slower)} cells)."
        )
    if fused:
        text += " " + _fused_verdict(*max(fused, key=lambda e: e[0]))
    return "\n".join(lines + ["", text, "", _bandwidth_note(runs)])


def _verdict(value: float, target: float, at_most: bool = True) -> str:
    ok = value <= target if at_most else value >= target
    return "met" if ok else f"missed by {abs(value / target - 1):.0%}"


def _fused_verdict(edges: int, f: Dict, limit: Optional[float]) -> str:
    """The fused kernels against their targets on GAT 8x8 float32 at ``edges`` edges."""
    time, per_edge = f["paired_ratio_to_first"], f["bytes_per_edge"]
    text = (
        f"Fused, GAT 8x8 float32 at {edges:,} edges: {time:.2f}x stock's step time (target: at most "
        f"{FUSED_TIME_TARGET:g}x; {_verdict(time, FUSED_TIME_TARGET)}), {per_edge:,.0f} B/edge (target: at most "
        f"{FUSED_BYTES_TARGET:g}; {_verdict(per_edge, FUSED_BYTES_TARGET)})"
    )
    if limit:
        text += f", {f['ms'] / limit:.1f}x the bandwidth bound (aim: within {BOUND_AIM:g}x; "
        text += f"{_verdict(f['ms'] / limit, BOUND_AIM)})"
    return text + "."


#: The shapes of the suite's two tables (benchmarks/gpu_suite.py's MAIN and PEER).
MAIN, PEER = {"heads": 8, "channels": 8}, {"heads": 2, "channels": 32}


def largest_by_contender(runs: List[Dict]) -> Dict[Tuple, Dict]:
    """Every search for the largest graph, merged over runs per (layer, shape, dtype, contender): the largest edge
    count trained in any run, the smallest that failed above it, and whether the two are within 10% (``exact``)."""
    merged: Dict[Tuple, Dict] = {}
    for run in _with(runs, "largest"):
        for r in run["suite"]["largest"]:
            if "error" in r:
                continue
            key = (r["layer"], f"{r['shape']['heads']}x{r['shape']['channels']}", r["dtype"], _name(r["contender"]))
            m = merged.setdefault(key, {"largest": 0, "failing": None, "failure": "", "ms": None})
            if r["largest_edges"] > m["largest"]:
                m.update(largest=r["largest_edges"], ms=r["ms_at_largest"])
            bad = r["first_failing_edges"]
            if bad is not None and (m["failing"] is None or bad < m["failing"]):
                m.update(failing=bad, failure=r["failure"])
    for m in merged.values():
        m["exact"] = m["failing"] is not None and m["largest"] > 0 and m["failing"] / m["largest"] <= 1.1
    return merged


def render_largest(runs: List[Dict]) -> str:
    """The largest graph each contender trains on the card, and each lean strategy / stock against its goal (the
    chunked strategy's goal, the fused kernels' target)."""
    merged = largest_by_contender(runs)
    groups: Dict[Tuple, Dict[str, Dict]] = {}
    for (layer, shape, dtype, name), m in merged.items():
        groups.setdefault((layer, shape, dtype), {})[name] = m
    names = [n for n in ORDER if any(n in g for g in groups.values())]
    lean = [n for n in ("chunked", "fused") if n in names]
    lines = [
        "| layer | heads x channels | dtype | "
        + " | ".join("turbo-gnn" if n == "turbo" else n for n in names)
        + " | "
        + " | ".join(f"{n} / stock" for n in lean)
        + " |",
        "| --- | --- | --- | " + "---: | " * (len(names) + len(lean)),
    ]
    lines[1] = lines[1].rstrip()

    def cell(m: Optional[Dict]) -> str:
        if m is None:
            return "-"
        text = f"{m['largest']:,}" if m["exact"] else f"at least {m['largest']:,}"
        if m["failing"] is not None:
            text += f" (fails at {m['failing']:,}: {m['failure']})"
        return text

    verdicts: Dict[str, List] = {n: [] for n in lean}
    undecided = 0
    for (layer, shape, dtype), g in groups.items():
        ratios = []
        for n in lean:
            ratio = ""
            if "stock" in g and n in g:
                ratio, value, exact = largest_ratio(g["stock"], g[n])
                if value is None:
                    undecided += 1
                else:
                    verdicts[n].append((value, exact))
            ratios.append(ratio)
        lines.append(
            f"| {layer} | {shape} | {dtype} | "
            + " | ".join(cell(g.get(n)) for n in names)
            + " | "
            + " | ".join(ratios)
            + " |"
        )
    summaries = []
    for n, goal, word in (("chunked", LARGEST_GOAL, "goal"), ("fused", FUSED_LARGEST_TARGET, "target")):
        v = verdicts.get(n)
        if not v:
            continue
        met = sum(x >= goal for x, _ in v)
        unresolved = sum(x < goal and not exact for x, exact in v)
        summaries.append(
            f"{n.capitalize()} trains a graph {min(x for x, _ in v):.1f}-{max(x for x, _ in v):.1f}x larger than "
            f"stock ({word}: at least {goal:g}x; met in {met} of {len(v)}, {unresolved} of them only bounded below "
            f"the {word})"
        )
    summary = "; ".join(summaries) if summaries else "No ratio is decided"
    if undecided:
        summary += f"; {undecided} not decided (stock's search stopped before any failure: no bound on its size)"
    lines += [
        "",
        f"{_conditions(_with(runs, 'largest'))}. A search doubles the edge count until a training step "
        "fails, then bisects to within 10%; 'at least' marks a search that its time bound stopped first. "
        "A strategy / stock is the ratio of the two largest sizes when both searches ended within 10%; otherwise a "
        f"lower bound, the strategy's largest over the size at which stock failed. {summary}.",
    ]
    return "\n".join(lines)


def largest_ratio(stock: Dict, lean: Dict) -> Tuple[str, Optional[float], bool]:
    """Lean / stock of :func:`largest_by_contender`'s entries: ``(cell, value, exact)``. Both searches within 10%:
    the ratio of their largest sizes. Otherwise lean's largest over stock's first failure, a lower bound (stock's
    true largest is below it, lean's at or above its largest); stock without a failure bounds nothing
    (``value`` None, ``not decided``)."""
    if stock["exact"] and lean["exact"]:
        value = lean["largest"] / stock["largest"]
        return f"{value:.1f}x", value, True
    if stock["failing"] is None:
        return "not decided", None, False
    value = lean["largest"] / stock["failing"]
    return f"at least {value:.1f}x", value, False


def render_peer(runs: List[Dict]) -> str:
    """Stock ``GATv2Conv``, ``lean=True``'s strategies and turbo-gnn's fused kernel on the same graphs, with the
    fused kernels against turbo-gnn (target: at most its step time and bytes per edge)."""
    runs = _with(runs, "peer")
    lines = list(_HEADER)
    notes, against = [], []
    for run in runs:
        P = run["suite"]["peer"]
        check = P.get("turbo_check", {})
        if "max_abs_diff_output" in check:
            notes.append(
                f"turbo-gnn against stock on a 1,000-node graph: outputs within "
                f"{check['max_abs_diff_output']:.1e} (largest output {check['max_abs_output']:.2f}), "
                f"parameter gradients within {check['max_abs_diff_grads']:.1e}"
            )
        else:
            notes.append(f"turbo-gnn: {check.get('error') or P['turbo']}")
        for (_, dtype, edges), c in _contender_rows(run, P["rows"], PEER, lines).items():
            f, t = c.get("fused", {}), c.get("turbo", {})
            if "ms" in f and "ms" in t:
                against.append((dtype, edges, f["ms"] / t["ms"], f["bytes_per_edge"] / t["bytes_per_edge"]))
    shape = runs[0]["suite"]["peer"]["shape"]
    text = (
        f"{_conditions(runs)}; {shape['heads']} heads x {shape['channels']} channels, attention dropout "
        f"{shape['dropout']:g}. " + "; ".join(notes) + "."
    )
    if against:
        time_met = sum(x <= 1.0 for _, _, x, _ in against)
        bytes_met = sum(b <= 1.0 for _, _, _, b in against)
        text += (
            f" Fused / turbo-gnn: {min(x for _, _, x, _ in against):.2f}-{max(x for _, _, x, _ in against):.2f}x "
            f"its step time (target: at most 1x; met in {time_met} of {len(against)} cells) and "
            f"{min(b for *_, b in against):.2f}-{max(b for *_, b in against):.2f}x its bytes per edge (target: at "
            f"most 1x; met in {bytes_met} of {len(against)})."
        )
    return "\n".join(lines + ["", text, "", _bandwidth_note(runs)])


def render_chunks(runs: List[Dict]) -> str:
    """The lean path's step time and memory per chunk size."""
    runs = _with(runs, "chunks")
    lines = [
        "| layer | edges | contender | B/edge | ms / step | time / stock (paired) |",
        "| --- | ---: | --- | ---: | ---: | ---: |",
    ]
    for run in runs:
        lines += [
            f"| {r['layer']} | {r['edges']:,} | {r['contender']} | {r['bytes_per_edge']:,.0f} | {r['ms']:.2f} | "
            f"{r['paired_ratio_to_first']:.2f} |"
            for r in run["suite"]["chunks"]
        ]
    return "\n".join(lines + ["", f"{_conditions(runs)}."])


def render_layers(runs: List[Dict]) -> str:
    """The drop-in layer, the sampler, DropAttention and ``torch.compile`` on the GPU, one value per run."""
    runs = _with(runs, "layers")
    L = [r["suite"]["layers"] for r in runs]

    def values(get: Callable[[Dict], float]) -> str:
        return " / ".join(f"{get(x):.3f}" for x in L)

    sampler = [x["sampler"]["SVGD on every layer"]["paired"] for x in L]
    g = L[0]["graph"]
    lines = [
        "| comparison (paired ratio, per run) | value |",
        "| --- | ---: |",
        f"| `RepulsiveGATConv` / `GATConv`, one layer's training step | "
        f"{values(lambda x: x['layer']['RepulsiveGATConv']['paired'])} |",
        "| SVGD on every layer / no sampler, 2-layer GAT with Adam | "
        f"{values(lambda x: x['sampler']['SVGD on every layer']['paired'])} |",
        f"| DropAttention / attention dropout, 2-layer GAT with Adam | "
        f"{values(lambda x: x['dropattention']['DropAttention']['paired'])} |",
    ]
    fused = [x for x in L if "dropattention_fused" in x]
    if fused:
        lines.append(
            "| DropAttention / attention dropout inside the fused kernels, one lean layer | "
            + " / ".join(f"{x['dropattention_fused']['DropAttention']['paired']:.3f}" for x in fused)
            + " |"
        )
    for name in L[0].get("compile_by_layer", {}):
        lines.append(
            f"| `{name}` compiled / eager, forward + backward | "
            f"{values(lambda x: x['compile_by_layer'][name]['compiled']['paired'])} |"
        )
    breaks = " / ".join(str(x["compile_graph_breaks"]) for x in L)
    syncs = " / ".join(str(x["sampler_host_syncs_per_step"]) for x in L)
    lines += [
        f"| `torch.compile` graph breaks (both layers) | {breaks} |",
        f"| host synchronisations in one training step with the sampler | {syncs} |",
    ]
    sites = L[-1].get("sampler_host_sync_sites", {})
    where = ", ".join(f"`{site(s)}` ({n})" for s, n in sorted(sites.items(), key=lambda kv: -kv[1]))
    met = sum(s <= SAMPLER_GOAL for s in sampler)
    lines += [
        "",
        f"{_conditions(runs)}; a random graph of {g['nodes']:,} nodes and {g['edges']:,} edges, 64 features, "
        f"8 heads x 8. The sampler's step costs {min(sampler):.2f}-{max(sampler):.2f}x a plain step (goal: at "
        f"most {SAMPLER_GOAL:g}x; met in {met} of {len(sampler)} runs)."
        + (f" Where its host synchronisations come from (last run): {where}." if where else ""),
    ]
    return "\n".join(lines)


def kernel_name(signature: str) -> str:
    """A CUDA kernel's name without its return type, namespaces and template arguments."""
    return signature.replace("void ", "", 1).split("<")[0].split("(")[0].split("::")[-1].strip()


def site(path: str) -> str:
    """A source line of a sync site, relative to the repository or to the installed packages."""
    return path.split("site-packages/")[-1]


def render_profile(runs: List[Dict], top: int = 3) -> str:
    """The kernels that take most of a training step's device time, per contender (first run with a profile)."""
    run = _with(runs, "profile")[0]
    lines = [
        "| contender (float32, 1 layer 8x8) | kernel | ms | share of the step's kernel time | calls |",
        "| --- | --- | ---: | ---: | ---: |",
    ]
    for name, kernels in run["suite"]["profile"].items():
        for k in kernels[:top]:
            kernel = kernel_name(k["kernel"])
            label = name.replace("lean ", "chunked ", 1)  # the chunked strategy, named lean before the fused kernels
            lines.append(f"| {label} | `{kernel}` | {k['ms']:.2f} | {k['share']:.0%} | {k['calls']} |")
    return "\n".join(
        lines
        + ["", f"{_conditions([run])}; one training step at the memory table's largest size under `torch.profiler`."]
    )


def render_tests(runs: List[Dict]) -> str:
    """The CUDA tests' outcomes on the card."""
    run = [r for r in runs if "tests" in r][-1]
    outcomes = [t["outcome"] for t in run["tests"]]
    lines = [
        f"{outcomes.count('passed')} of {len(outcomes)} CUDA tests passed on {run['meta']['device']} "
        f"(torch {run['meta']['torch']}, PyG {run['meta']['pyg']}, {run['meta']['date']}):",
        "",
    ]
    return "\n".join(lines + [f"* `{t['test']}`: {t['outcome']}" for t in run["tests"]])


BLOCKS = {
    "gpu-tests": lambda r: render_tests(r["gpu"]),
    "gpu-memory": lambda r: render_memory(r["gpu"]),
    "gpu-largest": lambda r: render_largest(r["gpu"]),
    "gpu-peer": lambda r: render_peer(r["gpu"]),
    "gpu-chunks": lambda r: render_chunks(r["gpu"]),
    "gpu-layers": lambda r: render_layers(r["gpu"]),
    "gpu-profile": lambda r: render_profile(r["gpu"]),
}
