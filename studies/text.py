"""The text-classification measurements behind docs/text.md: every named variant on TREC and MR.

    python -m studies.text run [STAGE ...]   # default, mr, tf15 (default: all, one after the other)
    python -m studies.text report            # runs -> docs/text/results.json -> the page's tables

Each stage is one documented ``graph-rma text`` command (two processes can run two stages at once); ``report``
renders the page's tables and summary from the committed results file, so the page is never typed.
"""

from __future__ import annotations

import json
import platform
import sys
from pathlib import Path
from typing import Dict, List

import torch

from graph_rma.engine import mean_std
from studies.pages import cli, publish, renderer, run_child

# stage -> the arguments of `graph-rma text` (each stage's own --out under the study folder)
STAGES: Dict[str, List[str]] = {
    "default": [],  # TREC, both models, the six named variants, seeds 0-1, 6 epochs
    "mr": ["--datasets", "mr", "--models", "transformer"],
    "tf15": [
        "--models",
        "transformer",
        "--epochs",
        "15",
        "--variants",
        "ma",
        "svgd",
        "spos",
        "dropattn-c",
        "dropattn-e",
    ],
}


def command(stage: str, out: Path) -> List[str]:
    return [sys.executable, "-m", "graph_rma.cli", "text", *STAGES[stage], "--out", str(out / stage)]


def run(out: Path, stages: List[str]) -> None:
    for stage in stages or list(STAGES):
        cmd = command(stage, out)
        print("$", " ".join(cmd[2:]), flush=True)
        run_child(cmd)


def collect(out: Path) -> Dict:
    results: Dict = {
        "conditions": f"torch {torch.__version__}, {platform.machine()} CPU, one thread per run, two "
        "stages at a time on the 2-core machine"
    }
    for stage in STAGES:
        path = out / stage / "results.json"
        if not path.is_file():
            continue
        record = json.loads(path.read_text())
        results[stage] = {
            "epochs": record["epochs"],
            "runs": [
                {
                    k: (round(v, 5) if isinstance(v, float) else v)
                    for k, v in r.items()
                    if k
                    in (
                        "dataset",
                        "model",
                        "variant",
                        "spec",
                        "seed",
                        "test_acc",
                        "dev_acc",
                        "best_epoch",
                        "head_cos",
                        "frob",
                        "train_s",
                    )
                }
                for r in record["runs"]
            ],
        }
    return results


def _rows(runs: List[Dict]) -> List[Dict]:
    rows = []
    for key in dict.fromkeys((r["dataset"], r["model"], r["variant"]) for r in runs):
        rs = [r for r in runs if (r["dataset"], r["model"], r["variant"]) == key]
        rows.append(
            {
                "dataset": key[0],
                "model": key[1],
                "variant": key[2],
                "spec": rs[0]["spec"],
                "runs": rs,
                "acc": mean_std([100 * r["test_acc"] for r in rs]),
                "cos": mean_std([r["head_cos"] for r in rs])[0],
                "frob": mean_std([r["frob"] for r in rs])[0],
                "s": mean_std([r["train_s"] for r in rs])[0],
            }
        )
    return rows


def render_stage(results: Dict, stage: str) -> str:
    lines = [
        "| data | model | variant | spec | seeds | test acc % (mean ± std) | head_cos | frob | s/run |",
        "| --- | --- | --- | --- | ---: | --- | --- | --- | ---: |",
    ]
    for r in _rows(results[stage]["runs"]):
        lines.append(
            f"| {r['dataset']} | {r['model']} | {r['variant']} | `{r['spec']}` | {len(r['runs'])} | "
            f"{r['acc'][0]:.2f} ± {r['acc'][1]:.2f} | {r['cos']:.3f} | {r['frob']:.2f} | {r['s']:.0f} |"
        )
    return "\n".join(lines)


def _get(results: Dict, stage: str, dataset: str, model: str, variant: str) -> Dict:
    return next(
        r
        for r in _rows(results[stage]["runs"])
        if (r["dataset"].lower(), r["model"], r["variant"]) == (dataset, model, variant)
    )


def render_summary(results: Dict) -> str:
    parts, outside = [], []
    for stage, dataset, model in (
        ("default", "trec", "transformer"),
        ("default", "trec", "selfattn"),
        ("mr", "mr", "transformer"),
        ("tf15", "trec", "transformer"),
    ):
        rows = [r for r in _rows(results[stage]["runs"]) if (r["dataset"].lower(), r["model"]) == (dataset, model)]
        ma = next(r for r in rows if r["variant"] == "ma")
        best = max(rows, key=lambda r: r["acc"][0])
        others = ", ".join(f"{r['variant']} {r['acc'][0]:.2f}" for r in rows if r["variant"] != "ma")
        name = f"{dataset.upper() if dataset == 'mr' else 'TREC'} {model} ({results[stage]['epochs']} epochs)"
        parts.append(f"{name}: plain {ma['acc'][0]:.2f} ± {ma['acc'][1]:.2f}, {others}; best {best['variant']}")
        for r in rows:  # a difference larger than both arms' seed standard deviations
            diff = r["acc"][0] - ma["acc"][0]
            if r is not ma and abs(diff) > max(r["acc"][1], ma["acc"][1]):
                outside.append(f"{r['variant']} on {name} ({diff:+.2f})")
    spread = (
        "every difference from plain heads is within the seed spread"
        if not outside
        else "the differences from plain heads larger than both arms' seed standard deviations are "
        + ", ".join(outside)
        + "; every other one is within the seed spread"
    )
    sa = {v: _get(results, "default", "trec", "selfattn", v) for v in ("ma", "svgd", "spos")}
    return (
        "**Summary.** Two seeds per setting with small CPU-sized models, test accuracy in %: "
        + "; ".join(parts)
        + f". With two seeds, {spread}. Repulsion spreads the self-attentive model's heads "
        f"over different words: head_cos {sa['spos']['cos']:.3f} with SPOS and {sa['svgd']['cos']:.3f} with SVGD "
        f"against {sa['ma']['cos']:.3f} plain, at {sa['spos']['acc'][0]:.2f} and {sa['svgd']['acc'][0]:.2f} "
        f"against {sa['ma']['acc'][0]:.2f} %. Generated by `python -m studies.text report` from "
        f"[text/results.json](text/results.json) ({results['conditions']})."
    )


# The DropAttention paper's Transformer (Zehui et al., 2019): (dataset, plain, column-mode DropAttention)
PUBLISHED = [("TREC", 88.40, 90.80), ("MR", 76.92, 78.80)]


def render_published(_: Dict) -> str:
    lines = ["| data | Transformer | with DropAttention (column) | source |", "| --- | ---: | ---: | --- |"]
    lines += [f"| {d} | {a:.2f} | {b:.2f} | Zehui et al., arXiv:1907.11065 (2019) |" for d, a, b in PUBLISHED]
    return "\n".join(lines)


BLOCKS = {
    "text-summary": render_summary,
    "text-published": render_published,
    "text-default": lambda r: render_stage(r, "default"),
    "text-mr": lambda r: render_stage(r, "mr"),
    "text-tf15": lambda r: render_stage(r, "tf15"),
}


render = renderer(BLOCKS)


def report(out: Path, page: Path) -> None:
    results = collect(out)
    missing = [s for s in STAGES if s not in results]
    if missing:
        raise SystemExit(
            f"report: stages not finished under {out}: {', '.join(missing)} (python -m studies.text "
            f"run {' '.join(missing)})"
        )
    publish(page, results, BLOCKS)


def main() -> None:
    cli(__doc__, run=run, report=report, out="runs/text_study", page="docs/text.md", stages=list(STAGES))


if __name__ == "__main__":
    main()
