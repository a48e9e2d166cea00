"""The README's expected quick-start output, rendered from the committed docs/quickstart/results.json.

    python examples/quickstart_vs_stock.py --seeds 0-9 --out docs/quickstart   # measures (keeps the seeds done)
    python -m studies.render                                                   # renders this block with the others

The block ``quickstart`` of README.md shows the line the quick start prints (seed 0 on split 0, the example's seed 0
run: the same code) and the spread over every seed of the results file: each arm's mean ± SD of the test accuracy
and of the first layer's head distance, and the paired difference of the accuracy.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Dict, List

from graph_rma import GraphRMAError
from graph_rma.engine import mean_std, paired_comparison

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "quickstart" / "results.json"
BLOCK = "quickstart"
ARMS = ("plain", "repulsive")
#: what the README's quick start prints, from one seed's results (its ``run`` formats each arm)
LINE = "test accuracy, split 0: plain heads {plain}, repulsive heads {repulsive}"
ARM = "{test_acc:.1f} % (head distance {head_distance:.2f})"


def load(path: Path = RESULTS) -> Dict:
    return json.loads(Path(path).read_text())


def printed_line(run: Dict) -> str:
    """The quick start's output line for one seed's results (``{"plain": {...}, "repulsive": {...}}``)."""
    return LINE.format(**{arm: ARM.format(**run[arm]) for arm in ARMS})


def seed_text(seeds: List[int]) -> str:
    """``0-9`` for consecutive seeds, else the seeds separated by spaces."""
    seeds = sorted(seeds)
    if len(seeds) > 1 and seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"{seeds[0]}-{seeds[-1]}"
    return " ".join(map(str, seeds))


def render(results: Dict, link: str = "docs/") -> str:
    """The block: the line the quick start prints (seed 0's, when the results have it), then the spread over every
    seed."""
    runs = results["runs"]
    if not runs:
        raise GraphRMAError("docs/quickstart/results.json: no runs to render")
    first = next((r for r in runs if r["seed"] == 0), None)
    seeds = seed_text([r["seed"] for r in runs])
    acc = {arm: mean_std([r[arm]["test_acc"] for r in runs]) for arm in ARMS}
    dist = {arm: mean_std([r[arm]["head_distance"] for r in runs]) for arm in ARMS}
    pc = paired_comparison(*({r["seed"]: r[arm]["test_acc"] for r in runs} for arm in ARMS))
    se = "" if len(runs) < 2 else f" ± {pc['se']:.2f} SE"
    cond = results.get("conditions", {})
    where = ""
    if cond:
        where = f", CPU, torch {cond['torch']}, {cond['threads']} thread{'s' if cond['threads'] != 1 else ''}"
    text = "" if first is None else f"It prints `{printed_line(first)}`. "
    text += (
        f"One seed is a demonstration, not evidence; over seeds and splits {seeds} (`examples/quickstart_vs_stock.py "
        f"--seeds {seeds}`, [results]({link}quickstart/results.json){where}), mean ± SD: plain "
        f"{acc['plain'][0]:.1f} ± {acc['plain'][1]:.1f} %, repulsive {acc['repulsive'][0]:.1f} ± "
        f"{acc['repulsive'][1]:.1f} % (paired {pc['mean']:+.2f}{se}, {pc['wins']} wins, {pc['ties']} ties, "
        f"{pc['losses']} losses), head distance {dist['plain'][0]:.2f} ± {dist['plain'][1]:.2f} and "
        f"{dist['repulsive'][0]:.2f} ± {dist['repulsive'][1]:.2f}."
    )
    return "\n".join(textwrap.wrap(text, width=120, break_long_words=False, break_on_hyphens=False))
