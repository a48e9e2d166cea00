"""``graph-rma report --checkpoint PATH [--out DIR]``: diagnostics of a trained checkpoint as PNGs + a JSON summary.

Argument parsing only; the report is :mod:`graph_rma.tasks.report`: :func:`~graph_rma.tasks.report.report_checkpoint`
(the task's metric, accuracy, calibration, predictive entropy, head diversity and head redundancy of the chosen
attention layers), for several checkpoints :func:`~graph_rma.tasks.report.compare_reports`, and the printed lines
(:func:`~graph_rma.tasks.report.format_report`).

Checkpoints it reads: node classification (``graph-rma node``/``graph-rma cora``, any graph, and older ``cora``
ones). A multi-class model (Cora, chameleon, ...) is reported with accuracy and the calibration of its softmax; a
binary one (one output logit: minesweeper, tolokers) with ROC AUC, the accuracy of its class-1-above-one-half
prediction and the calibration of its sigmoid confidence; head masking drops the task's metric. GraphWriter
checkpoints (``graph-rma agenda|webnlg train``) get their encoder heads' parameter similarity. Other tasks plug in
with :func:`graph_rma.tasks.report.register_report_task`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import List, Optional

from ._common import Parser, UsageError, description, out_dir, positive_int, require_out_dir, run_command

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="graph-rma report", description=description(__doc__))
    p.add_argument(
        "--checkpoint",
        required=True,
        nargs="+",
        help="checkpoint(s) written by a graph-rma pipeline; with several (e.g. a plain and a repulsive "
        "model), each gets a subfolder and their head-masking drops are plotted side by side",
    )
    p.add_argument(
        "--out",
        type=out_dir,
        default=None,
        help="output folder (default: <first checkpoint dir>/report_<checkpoint stem>)",
    )
    p.add_argument(
        "--root",
        default=None,
        help="the data folder the checkpoint's dataset is read from, as its training command takes it: for a node "
        "checkpoint the dataset family's folder ($GRAPH_RMA_DATA/planetoid for Cora and CiteSeer, "
        "$GRAPH_RMA_DATA/pyg for the others; default: those)",
    )
    p.add_argument("--bins", type=positive_int, default=10, help="number M of equal-width confidence bins")
    p.add_argument(
        "--layers",
        nargs="+",
        default=None,
        help="attention layers to diagnose, by submodule name (default: the task's, e.g. conv1)",
    )
    p.add_argument("--no-plots", action="store_true", help="write the JSON summary only")
    return p


def _run(args: argparse.Namespace) -> int:
    from ..tasks.report import checkpoint_datasets, compare_reports, format_report, report_checkpoint

    paths = [Path(p) for p in args.checkpoint]
    for path in paths:
        if path.is_dir():
            found = sorted(p.name for p in path.glob("*.pt"))[:3]
            inside = f" (it holds {', '.join(found)})" if found else " (it holds no .pt file)"
            raise UsageError(f"--checkpoint: {path} is a folder; give a checkpoint file in it{inside}")
        if not path.is_file():
            raise UsageError(f"--checkpoint: no such file {path}")
    if len({p.stem for p in paths}) != len(paths):
        raise UsageError("--checkpoint: several checkpoints must have distinct file names (they name the subfolders)")
    if len(paths) > 1:
        checkpoint_datasets(paths)  # one dataset, before any report is computed
    first = paths[0]
    out = Path(args.out) if args.out else require_out_dir(first.parent / f"report_{first.stem}")  # before reading
    summaries = {}
    for path in paths:
        where = out if len(paths) == 1 else out / path.stem
        summaries[path.stem] = report_checkpoint(
            path, where, root=args.root, layers=args.layers, bins=args.bins, plots=not args.no_plots
        )
        print(format_report(summaries[path.stem]))
        print(f"wrote {where}")
    if len(paths) > 1 and all(s.get("kind") != "graph_to_text" for s in summaries.values()):
        print(f"wrote {compare_reports(summaries, out, plots=not args.no_plots)}")
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    return run_command("graph-rma report", lambda: _run(build_parser().parse_args(argv)))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
