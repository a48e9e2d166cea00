"""Render benchmark tables into benchmarks/README.md from the committed results of the scripts' ``--json`` runs.

    python -m benchmarks.bench_sampler --repeats 30 --threads 2 --agenda-presets --json benchmarks/recorded/sampler.json
    python -m benchmarks.report          # rewrites the README's generated blocks from benchmarks/recorded/*.json

Each ``--json`` run is appended to its file, so a table shows every run (the spread between identical runs is the
noise of the machine) with the conditions recorded by the run itself.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Dict, List

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "studies"))
from pages import render_blocks  # noqa: E402  (the studies' page writer: one way to splice generated blocks)

SAMPLER_TABLES = ["training step, GAT (1 output head), ratios to no sampler",
                  "training step, GAT with 8 averaged output heads, ratios to no sampler"]
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
    pairs = [r["comparisons"][t][n]["paired"] for r in runs for t in SAMPLER_TABLES
             for n in list(r["comparisons"][t])[1:]]
    met = sum(all(r["comparisons"][t][n]["paired"] <= AIM for t in SAMPLER_TABLES for n in list(r["comparisons"][t])[1:])
              for r in runs)
    meta = runs[-1]["meta"]
    loads = ", ".join(f"{r['meta']['load_average_before']:g}" for r in runs)
    lines += ["", f"{len(runs)} runs of `{meta['command']}` ({meta['device']}, torch {meta['torch']}, "
                  f"{meta['date']}; load average before each run: {loads}). With a sampler the step takes "
                  f"{min(pairs):.3f}-{max(pairs):.3f}x the plain step (paired). The aim, at most {AIM}x for every "
                  f"sampler row, held in {met} of {len(runs)} runs."]
    return "\n".join(lines)


def render_runs(runs: List[Dict]) -> str:
    """Every comparison of a script's recorded runs: per contender against the comparison's first entry, the ratio
    of medians and the paired ratio of each run, then the conditions of the runs."""
    lines = ["| comparison: contender vs the first entry | ratio per run | paired per run |", "| --- | --- | --- |"]
    tables = list(dict.fromkeys(t for r in runs for t in r["comparisons"]))  # runs of one script may differ
    for table in tables:
        having = [r["comparisons"][table] for r in runs if table in r["comparisons"]]
        for name in list(having[0])[1:]:
            ratio = " / ".join(f"{c[name]['ratio']:.3f}" for c in having)
            paired = " / ".join(f"{c[name]['paired']:.3f}" for c in having)
            lines.append(f"| {table}: {name} | {ratio} | {paired} |")
    meta = runs[-1]["meta"]
    loads = ", ".join(f"{r['meta']['load_average_before']:g}" for r in runs)
    pairs = [c["paired"] for r in runs for t in r["comparisons"].values() for c in list(t.values())[1:]]
    commands = "; ".join(f"`{c}`" for c in dict.fromkeys(r["meta"]["command"] for r in runs))
    lines += ["", f"{len(runs)} runs of {commands} ({meta['device']}, torch {meta['torch']}, {meta['date']}; "
                  f"load average before each run: {loads}): paired ratios {min(pairs):.3f}-{max(pairs):.3f}."]
    return "\n".join(lines)


FILES = {"sampler": "sampler.json", "gat_conv": "gat_conv.json", "dropattention": "dropattention.json",
         "node": "node.json", "compile": "compile.json"}
BLOCKS = {"sampler-cora": lambda results: render_sampler(results["sampler"]),
          "gat-conv": lambda results: render_runs(results["gat_conv"]),
          "dropattention": lambda results: render_runs(results["dropattention"]),
          "node": lambda results: render_runs(results["node"]),
          "compile": lambda results: render_runs(results["compile"])}


def load() -> Dict:
    return {name: json.loads((HERE / "recorded" / f).read_text()) for name, f in FILES.items()}


def main() -> None:
    page = HERE / "README.md"
    page.write_text(render_blocks(page.read_text(), load(), BLOCKS))
    print(f"wrote {page}")


if __name__ == "__main__":
    main()
