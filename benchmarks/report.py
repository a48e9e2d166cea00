"""Render benchmark tables into benchmarks/README.md from the committed results of the scripts' ``--json`` runs.

    python -m benchmarks.bench_sampler --repeats 30 --threads 2 --agenda-presets --json benchmarks/recorded/sampler.json
    python -m benchmarks.report          # rewrites the README's generated blocks from benchmarks/recorded/*.json

Each ``--json`` run is appended to its file, so a table shows every run (the spread between identical runs is the
noise of the machine) with the conditions recorded by the run itself.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, List

from benchmarks import report_gpu
from graph_rma.engine.blocks import render_blocks  # the one page writer, shared with studies/

HERE = Path(__file__).resolve().parent

SAMPLER_TABLES = [
    "training step, GAT (1 output head), ratios to no sampler",
    "training step, GAT with 8 averaged output heads, ratios to no sampler",
]
AIM = 1.05


def render_sampler(runs: List[Dict]) -> str:
    lines = ["| training step (Cora GAT 8x8, Adam) | ms per run | paired ratio per run |", "| --- | --- | --- |"]
    for table in SAMPLER_TABLES:
        contenders = list(runs[0]["comparisons"][table])
        for name in contenders:
            ms = " / ".join(f"{r['comparisons'][table][name]['ms']:.1f}" for r in runs)
            paired = " / ".join(f"{r['comparisons'][table][name]['paired']:.3f}" for r in runs)
            label = name if table == SAMPLER_TABLES[0] else f"8 output heads: {name}"
            lines.append(f"| {label} | {ms} | {paired} |")
    pairs = [
        r["comparisons"][t][n]["paired"] for r in runs for t in SAMPLER_TABLES for n in list(r["comparisons"][t])[1:]
    ]
    met = sum(
        all(r["comparisons"][t][n]["paired"] <= AIM for t in SAMPLER_TABLES for n in list(r["comparisons"][t])[1:])
        for r in runs
    )
    meta = runs[-1]["meta"]
    loads = ", ".join(f"{r['meta']['load_average_before']:g}" for r in runs)
    lines += [
        "",
        f"{len(runs)} runs of `{meta['command']}` ({meta['device']}, torch {meta['torch']}, "
        f"{meta['date']}; load average before each run: {loads}). With a sampler the step takes "
        f"{min(pairs):.3f}-{max(pairs):.3f}x the plain step (paired). The aim, at most {AIM}x for every "
        f"sampler row, held in {met} of {len(runs)} runs.",
    ]
    return "\n".join(lines)


def render_runs(runs: List[Dict], aim: float = 0.0) -> str:
    """Every comparison of a script's recorded runs: per contender against the comparison's first entry, the ratio
    of medians and the paired ratio of each run, then the conditions of the runs and, given an ``aim``, in how many
    runs every paired ratio was within it."""
    lines = [
        "| comparison: contender (ratios to the first entry) | ms per run | ratio per run | paired per run |",
        "| --- | ---: | --- | --- |",
    ]
    tables = list(
        dict.fromkeys(
            t
            for r in runs
            for t, c in r["comparisons"].items()  # runs of one script may differ
            if isinstance(c, dict)
        )
    )  # (timings only: not a script's other tables)
    for table in tables:
        having = [r["comparisons"][table] for r in runs if table in r["comparisons"]]
        for i, name in enumerate(having[0]):
            ms = " / ".join(f"{c[name]['ms']:,.{1 if c[name]['ms'] < 100 else 0}f}" for c in having)
            ratio = " / ".join(f"{c[name]['ratio']:.3f}" for c in having) if i else ""
            paired = " / ".join(f"{c[name]['paired']:.3f}" for c in having) if i else ""
            lines.append(f"| {table}: {name} | {ms} | {ratio} | {paired} |")
    meta = runs[-1]["meta"]
    loads = ", ".join(f"{r['meta']['load_average_before']:g}" for r in runs)

    def paired(run: Dict) -> List[float]:
        return [c["paired"] for t in run["comparisons"].values() if isinstance(t, dict) for c in list(t.values())[1:]]

    pairs = [p for r in runs for p in paired(r)]
    commands = "; ".join(f"`{c}`" for c in dict.fromkeys(r["meta"]["command"] for r in runs))
    lines += [
        "",
        f"{_runs(runs)} of {commands} ({meta['device']}, torch {meta['torch']}, {meta['date']}; "
        f"load average before each run: {loads}): paired ratios {min(pairs):.3f}-{max(pairs):.3f}.",
    ]
    if aim:
        held = sum(max(paired(r)) <= aim for r in runs)
        lines[-1] += f" The aim, at most {aim:g}x for every row, held in {held} of {_runs(runs)}."
    return "\n".join(lines)


def _runs(runs: List) -> str:
    return f"{len(runs)} run{'s' * (len(runs) != 1)}"


def _conditions(runs: List[Dict]) -> str:
    """The commands and conditions of recorded runs, as one sentence's parenthesis."""
    commands = "; ".join(f"`{c}`" for c in dict.fromkeys(r["meta"]["command"] for r in runs))
    meta = runs[-1]["meta"]
    memory = f", {meta['memory_gib']:g} GiB of memory" if meta.get("memory_gib") else ""
    loads = ", ".join(f"{r['meta']['load_average_before']:g}" for r in runs)
    return (
        f"{commands} ({meta['machine']}, {meta['cpus']} CPUs{memory}, torch {meta['torch']}, {meta['date']}; "
        f"load average before each run: {loads})"
    )


def _span(values, fmt: str = "{:.2f}", unit: str = "") -> str:
    lo, hi = fmt.format(min(values)), fmt.format(max(values))
    return f"{lo}{unit}" if lo == hi else f"{lo}-{hi}{unit}"


def _failure(cell: Dict, cap: float = 0.0) -> str:
    if "-9" in cell["error"]:
        return "killed (out of memory)"
    if "allocate memory" in cell["error"] or "MemoryError" in cell["error"]:
        return f"out of memory (over the {cap:g} GiB cap)" if cap else "out of memory"
    return f"failed ({cell['error']})"


MEMORY_NAMES = {"pyg": "stock PyG", "ours": "default path", "lean": "`lean=True`"}
MEMORY_TARGET = (200, 7.0, 5.0)  # B/edge at most, times less than stock at least, largest graph at least x stock


def render_memory(runs: List[Dict], layer: str = "GATConv", glibc_defaults: bool = False) -> str:
    """Peak bytes per edge of each contender against edges, every run of ``bench_memory`` with this layer and
    allocator setting (one value per run, ``/``-separated), the stock / lean ratios and, for GAT with freed memory
    kept, the verdicts on the targets and the largest graph each trains."""
    runs = [
        r
        for r in runs
        if r["comparisons"]["memory"]["layer"] == layer
        and r["comparisons"]["memory"]["rows"]
        and r["comparisons"]["memory"]["glibc_defaults"] == glibc_defaults
    ]  # (a time-only run has no rows)
    names = [n for n in MEMORY_NAMES if any(n in row for r in runs for row in r["comparisons"]["memory"]["rows"])]
    cells: Dict[int, Dict[str, List]] = {}
    for r in runs:
        cap = r["comparisons"]["memory"].get("memory_limit_gib") or 0.0
        for row in r["comparisons"]["memory"]["rows"]:
            for n in names:
                if n in row:
                    cells.setdefault(row["edges"], {}).setdefault(n, []).append({**row[n], "cap": cap})
            if "bytes_per_edge" in row.get("pyg", {}) and "bytes_per_edge" in row.get("lean", {}):
                cells[row["edges"]].setdefault("ratio", []).append(
                    row["pyg"]["bytes_per_edge"] / row["lean"]["bytes_per_edge"]
                )

    def show(c: Dict) -> str:
        if "error" in c:
            return _failure(c, c["cap"])
        big = f" ({c['peak_above_inputs'] / 1e9:.1f} GB)" if c["peak_above_inputs"] >= 1e10 else ""
        return f"{c['bytes_per_edge']:,.0f}{big}"

    head = ["edges"] + [
        f"{MEMORY_NAMES[n]} `{layer}`" if n == "pyg" else f"`Repulsive{layer}` {MEMORY_NAMES[n]}" for n in names
    ]
    head += ["stock / lean"] if {"pyg", "lean"} <= set(names) else []
    lines = ["| " + " | ".join(head) + " |", "| " + " | ".join(["---:"] * len(head)) + " |"]
    for e in sorted(cells):
        row = [f"{e:,}"] + [" / ".join(show(c) for c in cells[e].get(n, [])) or "-" for n in names]
        if len(head) > len(names) + 1:
            row.append(" / ".join(f"{v:.1f}x" for v in cells[e].get("ratio", [])))
        lines.append("| " + " | ".join(row) + " |")
    lean = [c["bytes_per_edge"] for e in cells for c in cells[e].get("lean", []) if "error" not in c]
    ratios = [v for e in cells for v in cells[e].get("ratio", [])]
    lines += [
        "",
        f"{_runs(runs)} of {_conditions(runs)}: peak RSS above the inputs, in "
        f"bytes per edge, one value per run that measured the cell.",
    ]
    if lean and ratios:
        most, least = MEMORY_TARGET[0], MEMORY_TARGET[1]
        met = max(lean) <= most and min(ratios) >= least
        lines[-1] += (
            f" `lean=True` keeps {_span(lean, '{:,.0f}')} B/edge, {_span(ratios, '{:.1f}', 'x')} less than "
            f"stock"
            + (
                f" (target: at most {most} B/edge and at least {least:g}x less: {'met' if met else 'not met'})."
                if layer == "GATConv"
                else "."
            )
        )

    def largest(n: str):
        ok = [e for e in cells for c in cells[e].get(n, []) if "error" not in c]
        bad = [e for e in cells for c in cells[e].get(n, []) if "error" in c]
        return (max(ok) if ok else None), (min(bad) if bad else None)

    (stock_ok, stock_bad), (lean_ok, lean_bad) = largest("pyg"), largest("lean")
    if stock_bad and stock_ok and lean_ok and lean_ok > stock_ok:
        times = lean_ok / stock_ok
        caps = {c["cap"] for e in cells for n in ("pyg", "lean") for c in cells[e].get(n, []) if "error" in c}
        where = f"within a {max(caps):g} GiB cap on each process's memory" if max(caps) else "on this machine"
        lines[-1] += (
            f" Largest graph trained {where}: stock {stock_ok:,} edges (failed at {stock_bad:,}), "
            f"`lean=True` {lean_ok:,}"
            + (f" (failed at {lean_bad:,})" if lean_bad else " (the largest tried)")
            + f": {times:.1f}x the stock layer's (target: at least {MEMORY_TARGET[2]:g}x: "
            f"{'met' if times >= MEMORY_TARGET[2] else 'not met'})."
        )
    return "\n".join(lines)


def render_memory_time(runs: List[Dict]) -> str:
    """Step time of each contender at each size, every ``bench_memory`` run with a time table."""
    lines = [
        "| layer | edges | threads | stock PyG | default path | `lean=True` | lean / stock (ratio, paired) |",
        "| --- | ---: | --- | ---: | ---: | ---: | --- |",
    ]
    timed = [r for r in runs if r["comparisons"]["time"]["rows"]]
    ratios: Dict[str, List[float]] = {}
    for r in timed:
        t = r["comparisons"]["time"]
        for row in t["rows"]:
            if "error" in row:
                continue
            cells = [_duration(row[n]["ms"]) if n in row else "" for n in MEMORY_NAMES]
            lean = row.get("lean", {})
            lines.append(
                f"| {t['layer']} | {row['edges']:,} | {t['threads']} | "
                + " | ".join(cells)
                + (f" | {lean['ratio']:.2f}, {lean['paired']:.2f} |" if lean else " | |")
            )
            if lean:
                ratios.setdefault(t["layer"], []).extend([lean["ratio"], lean["paired"]])
    verdict = "; ".join(
        f"{layer} {_span(v)}"
        + (f" (target: at most 1.0x: {'met' if max(v) <= 1.0 else 'not met'})" if layer == "GATConv" else "")
        for layer, v in ratios.items()
    )
    lines += [
        "",
        f"{_runs(timed)} of {_conditions(timed)}: one training step (forward, "
        f"backward, Adam), the contenders interleaved in one process per size, median over the rounds. "
        f"`lean=True` takes, of the stock layer's step (ratio and paired): {verdict}.",
    ]
    return "\n".join(lines)


def _duration(ms: float) -> str:
    return f"{ms:.0f} ms" if ms < 1e3 else f"{ms / 1e3:.2f} s" if ms < 1e4 else f"{ms / 1e3:.1f} s"


def _scaling_label(s: Dict) -> str:
    words = ["lean=True" if s["lean"] else "default path", "sorted by target" if s["sorted_edges"] else "random order"]
    return ", ".join(words + (["freed memory kept"] if s["keep_freed_memory"] else []))


def render_scaling(runs: List[Dict]) -> str:
    """Seconds per step and peak RSS against edges, one column per recorded ``bench_scaling`` configuration, with
    the log-log slopes and the memory per edge above the smallest graph's process."""
    configs = [r["comparisons"]["scaling"] for r in runs]
    labels = [_scaling_label(s) for s in configs]
    edges = sorted({row["edges"] for s in configs for row in s["rows"] + s["failed"]})

    def cell(s: Dict, e: int, what: str) -> str:
        for row in s["rows"]:
            if row["edges"] == e:
                return f"{row['seconds_per_step']:.3g}" if what == "time" else f"{row['peak_bytes'] / 2**20:,.0f}"
        for row in s["failed"]:
            if row["edges"] == e:
                return "killed (out of memory)" if "-9" in row["error"] else f"failed ({row['error']})"
        return "-"

    lines = []
    for what, title in (("time", "seconds per training step"), ("memory", "peak RSS, MiB")):
        lines += [f"| edges: {title} | " + " | ".join(labels) + " |", "| ---: |" + " ---: |" * len(labels)]
        lines += [f"| {e:,} | " + " | ".join(cell(s, e, what) for s in configs) + " |" for e in edges]
        slopes = [f"{s['slope_time' if what == 'time' else 'slope_memory']:.2f}" for s in configs]
        lines += [f"| log-log slope{' (from 1e5 edges)' if what == 'memory' else ''} | " + " | ".join(slopes) + " |"]
        if what == "memory":
            per_edge = []
            for s in configs:
                rows = sorted(s["rows"], key=lambda r: r["edges"])
                extra = (rows[-1]["peak_bytes"] - rows[0]["peak_bytes"]) / (rows[-1]["edges"] - rows[0]["edges"])
                per_edge.append(f"{extra / 1e3:.2f} KB (to {rows[-1]['edges']:,})")
            lines += ["| bytes per edge above the smallest graph | " + " | ".join(per_edge) + " |"]
        lines.append("")
    lines.append(f"{_runs(runs)} of {_conditions(runs)}.")
    return "\n".join(lines)


def render_sampler_alone(runs: List[Dict]) -> str:
    """The sampler alone on random particles: ms per call and ns per M^2 D, one value per run."""
    key = "sampler alone: svgd_direction on random particles [M, D]"
    runs = [r for r in runs if key in r["comparisons"]]
    cells: Dict[tuple, List[float]] = {}
    for r in runs:
        for c in r["comparisons"][key]:
            cells.setdefault((c["M"], c["D"]), []).append(c["ms"])
    lines = ["| M (particles) | D (entries each) | ms per call | ns per M^2 D |", "| ---: | ---: | ---: | ---: |"]
    for (m, d), ms in sorted(cells.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        lines.append(
            f"| {m} | {d:,} | {' / '.join(f'{v:.3g}' for v in ms)} | "
            f"{' / '.join(f'{1e6 * v / (m * m * d):.2f}' for v in ms)} |"
        )
    lines += ["", f"{_runs(runs)} of {_conditions(runs)}."]
    return "\n".join(lines)


FILES = {
    "sampler": "sampler.json",
    "gat_conv": "gat_conv.json",
    "dropattention": "dropattention.json",
    "node": "node.json",
    "compile": "compile.json",
    "memory": "memory.json",
    "scaling": "scaling.json",
    "sampler_agenda": "sampler_agenda.json",
    "dropattention_uncached": "dropattention_uncached.json",
    "gpu": "gpu.json",
}
BLOCKS = {
    "sampler-cora": lambda results: render_sampler(results["sampler"]),
    "gat-conv": lambda results: render_runs(results["gat_conv"]),
    "dropattention": lambda results: render_runs(results["dropattention"], aim=1.15),
    "node": lambda results: render_runs(results["node"]),
    "compile": lambda results: render_runs(results["compile"]),
    "memory-gat": lambda results: render_memory(results["memory"]),
    "memory-gatv2": lambda results: render_memory(results["memory"], "GATv2Conv"),
    "memory-glibc": lambda results: render_memory(results["memory"], glibc_defaults=True),
    "memory-time": lambda results: render_memory_time(results["memory"]),
    "scaling": lambda results: render_scaling(results["scaling"]),
    "sampler-agenda": lambda results: render_runs(results["sampler_agenda"], aim=1.05),
    "sampler-alone": lambda results: render_sampler_alone(results["sampler_agenda"]),
    "dropattention-uncached": lambda results: render_runs(results["dropattention_uncached"], aim=1.15),
    **report_gpu.BLOCKS,
}


def load() -> Dict:
    return {name: json.loads((HERE / "recorded" / f).read_text()) for name, f in FILES.items()}


def main() -> None:
    page = HERE / "README.md"
    page.write_text(render_blocks(page.read_text(), load(), BLOCKS))
    print(f"wrote {page}")


if __name__ == "__main__":
    main()
