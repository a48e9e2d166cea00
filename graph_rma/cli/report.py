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

    from ..data.planetoid import prepare_features  # the features exactly as the pipeline trained on them

    data = load_planetoid(ckpt.get("dataset", "Cora"), root=root)[0]
    model = GAT(**ckpt["model_kwargs"])
    model.load_state_dict(ckpt["model"])
    return ReportInputs(model=model, x=prepare_features(data.x), edge_index=data.edge_index, y=data.y,
                        mask=data.test_mask, layers=["conv1"])


register_report_task("cora", _planetoid_task)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="graph-rma report", description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", required=True, nargs="+",
                   help="checkpoint(s) written by a graph-rma pipeline; with several (e.g. a plain and a repulsive "
                        "model), each gets a subfolder and their head-masking drops are plotted side by side")
    p.add_argument("--out", default=None,
                   help="output folder (default: <first checkpoint dir>/report_<checkpoint stem>)")
    p.add_argument("--root", default=None, help="dataset folder (default: $GRAPH_RMA_DATA/<dataset>)")
    p.add_argument("--bins", type=int, default=10, help="number M of equal-width confidence bins (default 10)")
    p.add_argument("--layers", nargs="+", default=None,
                   help="attention layers to diagnose, by submodule name (default: the task's, e.g. conv1)")
    p.add_argument("--no-plots", action="store_true", help="write the JSON summary only")
    return p


def _fail(msg: str) -> int:
    print(f"graph-rma report: {msg}", file=sys.stderr)
    return 2


def _report_one(path: Path, out: Path, args) -> Dict[str, Any]:
    from ..diagnostics import node_classification_report
    from ..engine import load_checkpoint

    ckpt = load_checkpoint(path)
    for key in ("task", "model_kwargs", "model"):
        if key not in ckpt:
            raise ValueError(f"{path}: checkpoint has no {key!r} entry")
    task = ckpt["task"]
    if task not in _TASKS:
        raise ValueError(f"{path}: unknown task {task!r}; known: {', '.join(sorted(_TASKS))}")
    inputs = _TASKS[task](ckpt, args.root)
    model: nn.Module = inputs["model"]
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
    label = f"[{summary['variant']}] " if summary.get("variant") else ""
    print(f"{label}accuracy {summary['accuracy']:.4f}  ECE {cal['ece']:.4f}  OE {cal['oe']:.4f}  "
          f"(test nodes: {summary['num_nodes']}, M={cal['num_bins']})")
    for name, d in summary["diversity"].items():
        drops = summary["redundancy"]["drops"][name]
        print(f"{label}{name}: Dist {d['dist']:.4f}  Div {d['div']:.4f}  Disagreement {d['disagreement']:.4f}  "
              f"entropy {d['entropy_mean']:.4f} (uniform {d['uniform_entropy']:.4f})  "
              f"mean drop {sum(drops) / len(drops):.4f}  max drop {max(drops):.4f}")
    print(f"wrote {out}")
    return summary


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    paths = [Path(p) for p in args.checkpoint]
    for path in paths:
        if not path.is_file():
            return _fail(f"--checkpoint: no such file {path}")
    if args.bins < 1:
        return _fail(f"--bins: expected a positive integer, got {args.bins}")
    if len({p.stem for p in paths}) != len(paths):
        return _fail("--checkpoint: several checkpoints must have distinct file names (they name the subfolders)")
    first = paths[0]
    out = Path(args.out) if args.out else first.parent / f"report_{first.stem}"
    summaries = {}
    try:
        for path in paths:
            summaries[path.stem] = _report_one(path, out if len(paths) == 1 else out / path.stem, args)
    except ValueError as exc:
        return _fail(str(exc))
    if len(paths) > 1:
        from ..diagnostics import plot_head_importance
        from ..engine import write_json

        def label(stem: str) -> str:
            v = summaries[stem].get("variant")
            return f"{v} ({stem})" if v else stem

        comparison = {
            label(stem): {
                "accuracy": s["accuracy"],
                "ece": s["calibration"]["ece"],
                "oe": s["calibration"]["oe"],
                "diversity": {k: {m: d[m] for m in ("dist", "div", "disagreement", "entropy_mean")}
                              for k, d in s["diversity"].items()},
                "mean_drop": {k: sum(v) / len(v) for k, v in s["redundancy"]["drops"].items()},
            }
            for stem, s in summaries.items()
        }
        write_json(out / "comparison.json", comparison)
        if not args.no_plots:
            drops = {label(stem): [d for v in s["redundancy"]["drops"].values() for d in v]
                     for stem, s in summaries.items()}
            plot_head_importance(drops, path=out / "head_importance_compare.png")
        print(f"wrote {out / 'comparison.json'}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
