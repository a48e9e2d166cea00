"""``graph-rma report --checkpoint PATH [--out DIR]``: diagnostics of a trained checkpoint as PNGs + a JSON summary.

The checkpoint (written by :func:`graph_rma.training.save_checkpoint`) names its ``task``; the task's builder
rebuilds the model from ``model_kwargs``, loads the weights and the data, and
:func:`graph_rma.diagnostics.node_classification_report` measures on the test nodes: accuracy, calibration (ECE,
OE, reliability diagram), predictive entropy, head diversity (Dist, Div, Disagreement, entropy) and head
redundancy (accuracy drop per masked head) of the chosen attention layers.

Tasks: ``cora`` (any Planetoid dataset named by the checkpoint's ``dataset``; model
:class:`graph_rma.models.gat.GAT`). Add one with :func:`register_report_task`.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

from torch import nn

__all__ = ["ReportInputs", "register_report_task", "main"]


class ReportInputs(dict):
    """What a task builder returns: ``model`` (weights loaded), ``x``, ``edge_index``, ``y``, ``mask`` (the nodes
    to evaluate) and ``layers`` (default attention layers, names or modules)."""


TaskBuilder = Callable[[Dict[str, Any], Optional[str]], ReportInputs]
_TASKS: Dict[str, TaskBuilder] = {}


def register_report_task(name: str, builder: TaskBuilder) -> None:
    """Register ``builder(checkpoint, root) -> ReportInputs`` for checkpoints whose ``task`` is ``name``."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"name: expected a non-empty task name, got {name!r}")
    if not callable(builder):
        raise ValueError("builder: expected a callable (checkpoint, root) -> ReportInputs")
    _TASKS[name] = builder


def _planetoid_task(ckpt: Dict[str, Any], root: Optional[str]) -> ReportInputs:
    from ..data.planetoid import load_planetoid
    from ..models.gat import GAT

    data = load_planetoid(ckpt.get("dataset", "Cora"), root=root)[0]
    model = GAT(**ckpt["model_kwargs"])
    model.load_state_dict(ckpt["model"])
    return ReportInputs(model=model, x=data.x, edge_index=data.edge_index, y=data.y, mask=data.test_mask,
                        layers=["conv1"])


register_report_task("cora", _planetoid_task)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="graph-rma report", description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", required=True, help="checkpoint written by a graph-rma pipeline")
    p.add_argument("--out", default=None, help="output folder (default: <checkpoint dir>/report_<checkpoint stem>)")
    p.add_argument("--root", default=None, help="dataset folder (default: $GRAPH_RMA_DATA/<dataset>)")
    p.add_argument("--bins", type=int, default=10, help="number M of equal-width confidence bins (default 10)")
    p.add_argument("--layers", nargs="+", default=None,
                   help="attention layers to diagnose, by submodule name (default: the task's, e.g. conv1)")
    p.add_argument("--no-plots", action="store_true", help="write the JSON summary only")
    return p


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    from ..diagnostics import node_classification_report
    from ..training import load_checkpoint

    path = Path(args.checkpoint)
    if not path.is_file():
        print(f"graph-rma report: --checkpoint: no such file {path}", file=sys.stderr)
        return 2
    if args.bins < 1:
        print(f"graph-rma report: --bins: expected a positive integer, got {args.bins}", file=sys.stderr)
        return 2
    ckpt = load_checkpoint(path)
    for key in ("task", "model_kwargs", "model"):
        if key not in ckpt:
            print(f"graph-rma report: {path}: checkpoint has no {key!r} entry", file=sys.stderr)
            return 2
    task = ckpt["task"]
    if task not in _TASKS:
        print(f"graph-rma report: {path}: unknown task {task!r}; known: {', '.join(sorted(_TASKS))}", file=sys.stderr)
        return 2
    inputs = _TASKS[task](ckpt, args.root)
    model: nn.Module = inputs["model"]
    out = Path(args.out) if args.out else path.parent / f"report_{path.stem}"
    extra = {
        "checkpoint": str(path),
        "task": task,
        "dataset": ckpt.get("dataset"),
        "variant": ckpt.get("variant"),
        "seed": ckpt.get("seed"),
        "training_metrics": ckpt.get("metrics"),
    }
    summary = node_classification_report(
        model, inputs["x"], inputs["edge_index"], inputs["y"], inputs["mask"],
        layers=args.layers or inputs["layers"], out_dir=out, num_bins=args.bins, extra=extra,
        plots=not args.no_plots,
    )
    cal = summary["calibration"]
    print(f"accuracy {summary['accuracy']:.4f}  ECE {cal['ece']:.4f}  OE {cal['oe']:.4f}  "
          f"(test nodes: {summary['num_nodes']}, M={cal['num_bins']})")
    for name, d in summary["diversity"].items():
        drops = summary["redundancy"]["drops"][name]
        print(f"{name}: Dist {d['dist']:.4f}  Div {d['div']:.4f}  Disagreement {d['disagreement']:.4f}  "
              f"entropy {d['entropy_mean']:.4f} (uniform {d['uniform_entropy']:.4f})  "
              f"mean drop {sum(drops) / len(drops):.4f}  max drop {max(drops):.4f}")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
