"""Diagnostics of a trained checkpoint, per task: the registry of report tasks and the report of one checkpoint.

A checkpoint (written by :func:`graph_rma.engine.save_checkpoint`) names its ``task``; the task's builder rebuilds
the model from ``model_kwargs``, loads the weights and the data, and
:func:`graph_rma.diagnostics.node_classification_report` measures on the evaluation nodes: the task's metric
(accuracy for a multi-class model; ROC AUC for a binary one with one output logit, such as ``graph-rma node``
trains on minesweeper and tolokers), accuracy, calibration (ECE, OE, reliability diagram; of the softmax, or of the
sigmoid's confidence for one logit), predictive entropy, head diversity (Dist, Div, Disagreement, entropy) and head
redundancy (the metric's drop per masked head) of the chosen attention layers.

Tasks: ``node`` (a ``graph-rma node``/``graph-rma cora`` checkpoint: any graph, rebuilt with the run's protocol) and
``cora`` (checkpoints of earlier versions: a Planetoid dataset named by the checkpoint's ``dataset``; model
:class:`graph_rma.models.gat.GAT`). Add one with :func:`register_report_task`.

From Python::

    from graph_rma.tasks.report import compare_reports, report_checkpoint
    plain = report_checkpoint("runs/cora/plain.pt", "report/plain")
    svgd = report_checkpoint("runs/cora/svgd.pt", "report/svgd")
    compare_reports({"plain": plain, "svgd": svgd}, "report")

From the shell: ``graph-rma report`` (see ``graph-rma report --help``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Dict, Optional, Sequence, Union

from torch import nn

__all__ = ["ReportInputs", "register_report_task", "report_tasks", "report_checkpoint", "compare_reports"]


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


def report_tasks() -> Sequence[str]:
    """The registered task names, sorted."""
    return sorted(_TASKS)


def _planetoid_task(ckpt: Dict[str, Any], root: Optional[str]) -> ReportInputs:
    from ..data.planetoid import load_planetoid, prepare_features  # the features exactly as the task trained on them
    from ..models.gat import GAT

    data = load_planetoid(ckpt.get("dataset", "Cora"), root=root)[0]
    try:
        model = GAT(**ckpt["model_kwargs"])
        model.load_state_dict(ckpt["model"])
    except (TypeError, RuntimeError) as exc:  # settings or weights of another shape than the model they name
        raise ValueError(f"checkpoint settings and weights do not match: {str(exc).strip().splitlines()[0]}") from None
    return ReportInputs(
        model=model,
        x=prepare_features(data.x),
        edge_index=data.edge_index,
        y=data.y,
        mask=data.test_mask,
        layers=["conv1"],
    )


register_report_task("cora", _planetoid_task)


def _node_task(ckpt: Dict[str, Any], root: Optional[str]) -> ReportInputs:
    """A ``graph-rma node`` checkpoint: the graph prepared with the run's protocol settings, its split's test nodes."""
    from dataclasses import fields

    from ..data.nodes import load_node_graph, select_split
    from .node_classification import build_model, prepare_graph
    from .protocols import Protocol

    for key in ("dataset", "settings", "model_name", "split"):
        if key not in ckpt:
            raise ValueError(f"checkpoint has no {key!r} entry (not written by graph-rma node?)")
    known = {f.name for f in fields(Protocol)}
    protocol = Protocol(
        name=str(ckpt.get("protocol", "?")), reproduces="", **{k: v for k, v in ckpt["settings"].items() if k in known}
    )
    data = prepare_graph(load_node_graph(ckpt["dataset"], root=root), protocol)
    model = build_model(ckpt["model_name"], ckpt["model_kwargs"])
    try:
        model.load_state_dict(ckpt["model"])
    except RuntimeError as exc:  # weights of another shape: the checkpoint does not match its own settings
        raise ValueError(f"checkpoint weights do not match its model settings: {str(exc).splitlines()[0]}") from None
    split = int(ckpt["split"])
    return ReportInputs(
        model=model,
        x=data.x,
        edge_index=data.edge_index,
        y=data.y,
        mask=select_split(data, split).test_mask,  # [N] masks (one split) or [N, splits]
        layers=["conv1" if ckpt["model_name"] == "gat" else "convs.0"],
    )


register_report_task("node", _node_task)


def report_checkpoint(
    path: Union[str, Path],
    out: Union[str, Path],
    *,
    root: Optional[str] = None,
    layers: Optional[Sequence[Union[str, nn.Module]]] = None,
    bins: int = 10,
    plots: bool = True,
) -> Dict[str, Any]:
    """The diagnostics of one checkpoint, written to ``out`` (``report.json`` and, with ``plots``, the PNGs).

    Args:
        path: a checkpoint with ``task``, ``model_kwargs`` and ``model`` entries.
        out: output folder.
        root: dataset folder for the task's builder (default ``$GRAPH_RMA_DATA/<dataset>``).
        layers: attention layers to diagnose (default: the task's, e.g. ``conv1``).
        bins: number :math:`M` of equal-width confidence bins.
        plots: also write the PNGs.

    Returns:
        The summary of :func:`graph_rma.diagnostics.node_classification_report`; ``ValueError`` for a checkpoint
        without the entries above or of an unknown task.
    """
    from ..diagnostics import node_classification_report
    from ..engine import load_checkpoint

    if not isinstance(bins, int) or bins < 1:
        raise ValueError(f"bins: expected a positive integer, got {bins!r}")
    path = Path(path)
    ckpt = load_checkpoint(path)
    if "task" not in ckpt and {"config", "vocab", "relations", "model"} <= set(ckpt):
        return graph_to_text_report(path, out)
    for key in ("task", "model_kwargs", "model"):
        if key not in ckpt:
            raise ValueError(f"{path}: checkpoint has no {key!r} entry")
    task = ckpt["task"]
    if task not in _TASKS:
        raise ValueError(f"{path}: unknown task {task!r}; known: {', '.join(sorted(_TASKS))}")
    inputs = _TASKS[task](ckpt, root)
    extra = {
        "checkpoint": str(path),
        "task": task,
        "dataset": ckpt.get("dataset"),
        "variant": ckpt.get("variant"),
        "seed": ckpt.get("seed"),
        "training_metrics": ckpt.get("metrics"),
    }
    return node_classification_report(
        inputs["model"],
        inputs["x"],
        inputs["edge_index"],
        inputs["y"],
        inputs["mask"],
        layers=layers or inputs["layers"],
        out_dir=Path(out),
        num_bins=bins,
        extra=extra,
        plots=plots,
    )


def graph_to_text_report(path: Union[str, Path], out: Union[str, Path]) -> Dict[str, Any]:
    """The report of a GraphWriter checkpoint (``graph-rma agenda|webnlg train``'s ``best.pt`` or
    ``checkpoint.pt``): its variant, epoch and dev loss and how alike its encoder heads' parameters are (mean pairwise
    cosine over head pairs, averaged over layers; no data needed). The attention-based diversity on a split is
    ``graph-rma agenda heads``. Writes ``report.json`` into ``out``."""
    from ..engine import write_json
    from ..regularizers import parameter_disagreement
    from .graph_to_text import load_model

    try:
        model, vocab, ck = load_model(path, "cpu")
    except (KeyError, TypeError, RuntimeError) as exc:
        raise ValueError(
            f"{path}: not a loadable GraphWriter checkpoint ({str(exc).strip().splitlines()[0]})"
        ) from None
    summary = {
        "kind": "graph_to_text",
        "checkpoint": str(path),
        "variant": ck.get("variant"),
        "epoch": ck.get("epoch"),
        "dev_loss": ck.get("dev_loss"),
        "vocab": len(vocab),
        "encoder_heads": ck["config"].get("heads"),
        "encoder_layers": ck["config"].get("layers"),
        "head_parameter_cosine": float(parameter_disagreement(model.encoder)),
    }
    out = Path(out)
    summary["files"] = {"summary": str(write_json(out / "report.json", summary))}
    return summary


def compare_reports(summaries: Dict[str, Dict[str, Any]], out: Union[str, Path], plots: bool = True) -> Path:
    """``comparison.json`` (the metric and its score, accuracy, ECE, OE, diversity and the mean head-masking drop of
    the metric, per report) and, with ``plots``, ``head_importance_compare.png`` (the paper's Figure 2, side by
    side). ``summaries`` maps a name (e.g. the checkpoint's stem) to a :func:`report_checkpoint` summary; entries are
    labelled by their variant. Returns the path of ``comparison.json``."""
    from ..diagnostics import plot_head_importance
    from ..engine import write_json

    def label(name: str) -> str:
        v = summaries[name].get("variant")
        return f"{v} ({name})" if v else name

    comparison = {
        label(name): {
            "metric": s.get("metric", "accuracy"),
            "score": s.get("score", s["accuracy"]),
            "accuracy": s["accuracy"],
            "ece": s["calibration"]["ece"],
            "oe": s["calibration"]["oe"],
            "diversity": {
                k: {m: d[m] for m in ("dist", "div", "disagreement", "entropy_mean")} for k, d in s["diversity"].items()
            },
            "mean_drop": {k: sum(v) / len(v) for k, v in s["redundancy"]["drops"].items()},
        }
        for name, s in summaries.items()
    }
    out = Path(out)
    path = write_json(out / "comparison.json", comparison)
    if plots:
        import sys

        from ..engine.optional import MissingExtraError

        drops = {
            label(name): [d for v in s["redundancy"]["drops"].values() for d in v] for name, s in summaries.items()
        }
        metrics = {"ROC AUC" if s.get("metric") == "roc_auc" else "accuracy" for s in summaries.values()}
        try:
            plot_head_importance(
                drops, path=out / "head_importance_compare.png", metric=metrics.pop() if len(metrics) == 1 else "metric"
            )
        except MissingExtraError as exc:  # optional: comparison.json is the comparison
            print(f"plots skipped ({exc.module} not installed): {exc.hint}", file=sys.stderr)
    return path
