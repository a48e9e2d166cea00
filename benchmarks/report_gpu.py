"""The GPU tables of benchmarks/README.md, rendered from ``benchmarks/recorded/gpu.json``: the runs of
``benchmarks/gpu_suite.py`` on a lent GPU (``benchmarks/gpu_lease.sh``), each with its conditions, the CUDA tests'
outcomes and the suite's JSON as it wrote it. Verdicts against the goals below are computed here, never typed."""

from __future__ import annotations

from typing import Callable, Dict, List, Optional, Tuple

#: The package's goals on a GPU (not promises): memory-lean attention needs at least this many times less peak memory
#: than stock PyG, at no more than stock's step time, and trains a graph at least this many times larger; the sampler
#: costs at most this factor of a plain step.
LEAN_MEMORY_GOAL, LEAN_TIME_GOAL, LARGEST_GOAL, SAMPLER_GOAL = 6.0, 1.0, 6.0, 1.05


def _conditions(runs: List[Dict]) -> str:
    m = runs[0]["meta"]
    commands = "; ".join(f"`{r['meta']['command']}`" for r in runs)
    return (
        f"{len(runs)} run{'s' * (len(runs) != 1)} ({commands}) on {m['device']} ({m['memory_gib']:g} GiB; driver "
        f"{m['driver']}; torch {m['torch']}, CUDA {m['cuda']}, PyG {m['pyg']}; {m['machine']}; {m['date']})"
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


def render_memory(runs: List[Dict]) -> str:
    """``lean=True`` against stock PyG at each size and dtype: peak bytes per edge and step time, with the verdicts on
    the memory and time goals."""
    runs = _with(runs, "memory")
    lines = [
        "| layer | dtype | edges | stock B/edge | lean B/edge | less memory | stock ms / step | lean ms / step | "
        "lean / stock time (paired) |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    less, slower = [], []
    for run in runs:
        for (layer, dtype, edges), c in _pairs(run["suite"]["memory"]).items():
            s, lean = c.get("stock", {}), c.get("lean", {})
            if "ms" not in s or "ms" not in lean:
                lines.append(
                    f"| {layer} | {dtype} | {edges:,} | failed: {s.get('error') or lean.get('error')} | | | | | |"
                )
                continue
            less.append(s["bytes_per_edge"] / lean["bytes_per_edge"])
            slower.append(lean["paired_ratio_to_first"])
            lines.append(
                f"| {layer} | {dtype} | {edges:,} | {s['bytes_per_edge']:,.0f} | {lean['bytes_per_edge']:,.0f} "
                f"| {_x(s['bytes_per_edge'], lean['bytes_per_edge'])} | {s['ms']:.2f} | {lean['ms']:.2f} | "
                f"{lean['paired_ratio_to_first']:.2f} |"
            )
    mem_met = sum(v >= LEAN_MEMORY_GOAL for v in less)
    time_met = sum(v <= LEAN_TIME_GOAL for v in slower)
    lines += [
        "",
        f"{_conditions(runs)}. `lean=True` needs {min(less):.1f}-{max(less):.1f}x less peak memory than "
        f"stock (goal: at least {LEAN_MEMORY_GOAL:g}x; met in {mem_met} of {len(less)} cells) and takes "
        f"{min(slower):.2f}-{max(slower):.2f}x stock's step time (goal: at most {LEAN_TIME_GOAL:g}x; met in "
        f"{time_met} of {len(slower)} cells).",
    ]
    return "\n".join(lines)


def largest_by_contender(runs: List[Dict]) -> Dict[Tuple, Dict]:
    """Every search for the largest graph, merged over runs per (layer, shape, dtype, contender): the largest edge
    count trained in any run, the smallest that failed above it, and whether the two are within 10% (``exact``)."""
    merged: Dict[Tuple, Dict] = {}
    for run in _with(runs, "largest"):
        for r in run["suite"]["largest"]:
            if "error" in r:
                continue
            key = (r["layer"], f"{r['shape']['heads']}x{r['shape']['channels']}", r["dtype"], r["contender"])
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
    """The largest graph each contender trains on the card, and lean / stock against the goal."""
    merged = largest_by_contender(runs)
    groups: Dict[Tuple, Dict[str, Dict]] = {}
    for (layer, shape, dtype, name), m in merged.items():
        groups.setdefault((layer, shape, dtype), {})[name] = m
    has_turbo = any("turbo" in g for g in groups.values())
    lines = [
        "| layer | heads x channels | dtype | stock | lean | "
        + ("turbo-gnn | " if has_turbo else "")
        + "lean / stock |",
        "| --- | --- | --- | ---: | ---: | " + ("---: | " if has_turbo else "") + "---: |",
    ]

    def cell(m: Optional[Dict]) -> str:
        if m is None:
            return "-"
        text = f"{m['largest']:,}" if m["exact"] else f"at least {m['largest']:,}"
        if m["failing"] is not None:
            text += f" (fails at {m['failing']:,}: {m['failure']})"
        return text

    verdicts, undecided = [], 0
    for (layer, shape, dtype), g in groups.items():
        ratio = ""
        if "stock" in g and "lean" in g:
            ratio, value, exact = largest_ratio(g["stock"], g["lean"])
            if value is None:
                undecided += 1
            else:
                verdicts.append((value, exact, g["stock"]["exact"]))
        lines.append(
            f"| {layer} | {shape} | {dtype} | {cell(g.get('stock'))} | {cell(g.get('lean'))} | "
            + (f"{cell(g.get('turbo'))} | " if has_turbo else "")
            + f"{ratio} |"
        )
    met = sum(v >= LARGEST_GOAL for v, _, _ in verdicts)
    unresolved = sum(v < LARGEST_GOAL and not exact for v, exact, _ in verdicts)
    summary = (
        f"Lean trains a graph {min(v for v, _, _ in verdicts):.1f}-{max(v for v, _, _ in verdicts):.1f}x "
        f"larger than stock (goal: at least {LARGEST_GOAL:g}x; met in {met} of {len(verdicts)}, "
        f"{unresolved} of them only bounded below the goal)"
        if verdicts
        else "No ratio is decided"
    )
    if undecided:
        summary += f"; {undecided} not decided (stock's search stopped before any failure: no bound on its size)"
    lines += [
        "",
        f"{_conditions(_with(runs, 'largest'))}. A search doubles the edge count until a training step "
        "fails, then bisects to within 10%; 'at least' marks a search that its time bound stopped first. "
        "Lean / stock is the ratio of the two largest sizes when both searches ended within 10%; otherwise a lower "
        f"bound, lean's largest over the size at which stock failed. {summary}.",
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
    """Stock ``GATv2Conv``, ``lean=True`` and turbo-gnn's fused kernel on the same graphs."""
    runs = _with(runs, "peer")
    lines = [
        "| dtype | edges | contender | B/edge | less memory than stock | ms / step | time / stock (paired) |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: |",
    ]
    notes = []
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
        for (_, dtype, edges), c in _pairs(P["rows"]).items():
            stock = c.get("stock", {})
            for name, r in c.items():
                if "ms" not in r:
                    lines.append(f"| {dtype} | {edges:,} | {name} | failed: {r.get('error')} | | | |")
                    continue
                less = _x(stock["bytes_per_edge"], r["bytes_per_edge"]) if name != "stock" and "ms" in stock else ""
                lines.append(
                    f"| {dtype} | {edges:,} | {name} | {r['bytes_per_edge']:,.0f} | {less} | {r['ms']:.2f} | "
                    f"{r['paired_ratio_to_first']:.2f} |"
                )
    shape = runs[0]["suite"]["peer"]["shape"]
    lines += [
        "",
        f"{_conditions(runs)}; {shape['heads']} heads x {shape['channels']} channels, attention dropout "
        f"{shape['dropout']:g}. " + "; ".join(notes) + ".",
    ]
    return "\n".join(lines)


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
            lines.append(f"| {name} | `{kernel}` | {k['ms']:.2f} | {k['share']:.0%} | {k['calls']} |")
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
