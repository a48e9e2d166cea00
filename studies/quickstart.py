"""The README's expected quick-start output, rendered from two committed results files.

    python -m studies.quickstart measure      # runs the README's quick start as a user does -> docs/quickstart/run.json
    python examples/quickstart_vs_stock.py --lr 0.02 --patience 50 --epochs 300 --out docs/quickstart/quick
    python examples/quickstart_vs_stock.py --seeds 0-9 --out docs/quickstart   # the protocol's own setting
    python -m studies.render                  # renders this block with the others

The block ``quickstart`` of README.md shows the line the quick start printed in a committed run
(``docs/quickstart/run.json``: the README's code block run as a script in a fresh process, with the user's
environment; it sets its own thread count and seed, so a newcomer with the same torch gets the same line) and its
computing time, then the spread over seeds of the quick setting (``docs/quickstart/quick/results.json``, once
:data:`MIN_QUICK_SEEDS` seeds are measured) and of the protocol's own setting (``docs/quickstart/results.json``):
each arm's mean ± SD of the test accuracy and of the first layer's head distance, and the paired difference of the
accuracy.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Dict, List, Optional

from graph_rma import GraphRMAError
from graph_rma.engine import mean_std, paired_comparison, write_json

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "docs" / "quickstart" / "results.json"  # the protocol's setting (lr 0.005, 1500 epochs)
QUICK = REPO / "docs" / "quickstart" / "quick" / "results.json"  # the quick start's setting, over seeds
RUN = REPO / "docs" / "quickstart" / "run.json"  # the README's quick start, run as a script
BLOCK = "quickstart"
ARMS = ("plain", "repulsive")
#: what the README's quick start prints, from one seed's results (its ``run`` formats each arm)
LINE = "test accuracy, split 0: plain heads {plain}, repulsive heads {repulsive}"
ARM = "{test_acc:.1f} % (head distance {head_distance:.2f})"
#: the quick setting's spread is shown from this many seeds on (fewer: a demonstration, like the one line)
MIN_QUICK_SEEDS = 3
#: the quick start's settings (examples/quickstart_vs_stock.py's options that give the README's code)
QUICK_SETTINGS = {"dataset": "chameleon", "alpha": 0.1, "lr": 0.02, "epochs": 300, "patience": 50}


def load(path: Path = RESULTS) -> Dict:
    return json.loads(Path(path).read_text())


def readme_code(readme: Path = REPO / "README.md") -> str:
    """The README's quick-start code block."""
    text = Path(readme).read_text(encoding="utf-8")
    return re.search(r"## Quick start.*?```python\n(.*?)```", text, re.S).group(1)


def printed_line(run: Dict) -> str:
    """The quick start's output line for one seed's results (``{"plain": {...}, "repulsive": {...}}``)."""
    return LINE.format(**{arm: ARM.format(**run[arm]) for arm in ARMS})


def seed_text(seeds: List[int]) -> str:
    """``0-9`` for consecutive seeds, else the seeds separated by spaces."""
    seeds = sorted(seeds)
    if len(seeds) > 1 and seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"{seeds[0]}-{seeds[-1]}"
    return " ".join(map(str, seeds))


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def measure(path: Path = RUN) -> Dict:
    """Run the README's quick start as a user copies it (a script in a fresh folder, the caller's environment but
    ``OMP_NUM_THREADS``, which the script's own ``torch.set_num_threads`` overrides anyway) and record what it
    printed, how long it took (wall clock, and the CPU time of its one thread, which a busy machine does not
    stretch) and the conditions."""
    import torch

    with tempfile.TemporaryDirectory() as work:
        script = Path(work) / "quick_start.py"
        script.write_text(readme_code())
        env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
        start, cpu = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
        proc = subprocess.run([sys.executable, str(script)], cwd=work, env=env, capture_output=True, text=True)
        seconds = round(time.perf_counter() - start, 1)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu_seconds = round(after.ru_utime + after.ru_stime - cpu.ru_utime - cpu.ru_stime, 1)
    if proc.returncode != 0:
        raise SystemExit(f"the quick start failed (exit {proc.returncode}): {proc.stderr.strip()[-2000:]}")
    run = {
        "printed": proc.stdout.strip(),
        "seconds": seconds,  # wall clock, which the machine's load stretches
        "cpu_seconds": cpu_seconds,  # what the one thread computed: the time on an idle core
        "conditions": {
            "torch": torch.__version__,
            "threads": 1,  # the script sets them
            "cpu": _cpu(),
            "cores": os.cpu_count(),
            "load_1min": round(os.getloadavg()[0], 1),
        },
    }
    write_json(path, run)
    return run


def _spread(results: Dict, command: Optional[str], link: str) -> str:
    """One setting's spread: plain vs repulsive test accuracy and head distance (mean ± SD over its seeds) and the
    paired accuracy difference (mean ± SE, wins/ties/losses of the repulsive arm)."""
    runs = results["runs"]
    seeds = seed_text([r["seed"] for r in runs])
    acc = {arm: mean_std([r[arm]["test_acc"] for r in runs]) for arm in ARMS}
    dist = {arm: mean_std([r[arm]["head_distance"] for r in runs]) for arm in ARMS}
    pc = paired_comparison(*({r["seed"]: r[arm]["test_acc"] for r in runs} for arm in ARMS))
    se = "" if len(runs) < 2 else f" ± {pc['se']:.2f} SE"
    return (
        f"seeds and splits {seeds} ({f'`{command} --seeds {seeds}`, ' if command else ''}[results]({link})): accuracy "
        f"{acc['plain'][0]:.1f} ± {acc['plain'][1]:.1f} vs {acc['repulsive'][0]:.1f} ± {acc['repulsive'][1]:.1f} % "
        f"(paired {pc['mean']:+.2f}{se}, {pc['wins']}/{pc['ties']}/{pc['losses']}), head distance "
        f"{dist['plain'][0]:.2f} ± {dist['plain'][1]:.2f} vs {dist['repulsive'][0]:.2f} ± {dist['repulsive'][1]:.2f}"
    )


def render(results: Dict, run: Optional[Dict] = None, quick: Optional[Dict] = None, link: str = "docs/") -> str:
    """The block: the line the committed quick-start run printed and its time and conditions, then the spread over
    seeds of the quick setting (``quick``) and of the protocol's (``results``)."""
    if not results["runs"]:
        raise GraphRMAError("docs/quickstart/results.json: no runs to render")
    text = ""
    if run is not None:
        c = run["conditions"]
        text = (
            f"It prints `{run['printed']}` (torch {c['torch']}, thread count and seed set in the script; "
            f"{run['cpu_seconds']:.0f} s CPU time on one {c['cpu']} core). "
        )
    text += "One seed is a demonstration, not evidence. Plain vs repulsive heads, mean ± SD, "
    if quick is not None and len(quick["runs"]) >= MIN_QUICK_SEEDS:
        text += "this schedule over "
        text += _spread(quick, None, f"{link}quickstart/quick/results.json") + "; "
    s = results["settings"]
    text += f"the protocol's (lr {s['lr']}, {s['epochs']} epochs, patience {s['patience']}) over "
    text += _spread(results, "examples/quickstart_vs_stock.py", f"{link}quickstart/results.json") + "."
    return "\n".join(textwrap.wrap(text, width=120, break_long_words=False, break_on_hyphens=False))


def render_committed(link: str = "docs/") -> str:
    """:func:`render` of the committed files (those not measured yet are left out)."""
    run = load(RUN) if RUN.is_file() else None
    quick = load(QUICK) if QUICK.is_file() else None
    return render(load(RESULTS), run, quick, link)


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m studies.quickstart", description=__doc__.split("\n\n")[0])
    p.add_argument("command", choices=["measure"], help="measure: run the README's quick start into run.json")
    p.parse_args(argv)
    run = measure()
    print(f"{run['printed']} ({run['seconds']} s, {run['cpu_seconds']} s CPU); wrote {RUN.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
