"""The report (``graph-rma report``), all of it: the registry of report tasks, the report of one checkpoint, of a
node-classification model on a split, the comparison of several, and the lines the command prints.

A checkpoint (written by :func:`graph_rma.engine.save_checkpoint`) names its ``task``; the task's builder rebuilds
the model from ``model_kwargs``, loads the weights and the data, and :func:`node_classification_report` (which was
``graph_rma.diagnostics.node_classification_report``) measures on the evaluation nodes: the task's metric
(accuracy for a multi-class model; ROC AUC for a binary one with one output logit, such as ``graph-rma node``
trains on minesweeper and tolokers), accuracy, calibration (ECE, OE, reliability diagram; of the softmax, or of the
sigmoid's confidence for one logit), predictive entropy, head diversity (Dist, Div, Disagreement, entropy) and head
redundancy (the metric's drop per masked head) of the chosen attention layers.

Tasks: ``node`` (a ``graph-rma node``/``graph-rma cora`` checkpoint: any graph, rebuilt with the run's protocol) and
``cora`` (checkpoints of earlier versions: a Planetoid dataset named by the checkpoint's ``dataset``; model
:class:`graph_rma.models.TwoLayerGAT`). Add one with :func:`register_report_task`.

From Python::

    from graph_rma.tasks.report import compare_reports, report_checkpoint
    plain = report_checkpoint("runs/cora/plain.pt", "report/plain")
    svgd = report_checkpoint("runs/cora/svgd.pt", "report/svgd")
    compare_reports({"plain": plain, "svgd": svgd}, "report")

From the shell: ``graph-rma report`` (see ``graph-rma report --help``).
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Union

import torch
from torch import Tensor, nn

from .._errors import GraphRMAError
from ..diagnostics.calibration import (
    calibration_bins,
    expected_calibration_error,
    overconfidence_error,
    predictive_entropy,
)
from ..diagnostics.capture import HeadCapture
from ..diagnostics.diversity import head_diversity
from ..diagnostics.redundancy import HeadImportance, head_importance, resolve_layers
from ..engine import write_json
from ..engine.optional import MissingExtraError, require
from ..metrics.classification import roc_auc

__all__ = [
    "ReportInputs",
    "register_report_task",
    "report_tasks",
    "report_checkpoint",
    "node_classification_report",
    "compare_reports",
    "format_report",
]


class ReportInputs(dict):
    """What a task builder returns: ``model`` (weights loaded), ``x``, ``edge_index``, ``y``, ``mask`` (the nodes
    to evaluate) and ``layers`` (default attention layers, names or modules)."""


TaskBuilder = Callable[[Dict[str, Any], Optional[str]], ReportInputs]
_TASKS: Dict[str, TaskBuilder] = {}


def register_report_task(name: str, builder: TaskBuilder) -> None:
    """Register ``builder(checkpoint, root) -> ReportInputs`` for checkpoints whose ``task`` is ``name``."""
    if not isinstance(name, str) or not name:
        raise GraphRMAError(f"name: expected a non-empty task name, got {name!r}")
    if not callable(builder):
        raise GraphRMAError("builder: expected a callable (checkpoint, root) -> ReportInputs")
    _TASKS[name] = builder


def report_tasks() -> Sequence[str]:
    """The registered task names, sorted."""
    return sorted(_TASKS)


class _WeightsMismatch(GraphRMAError):
    """A checkpoint's weights that the model its ``model_kwargs`` build cannot take (:func:`report_checkpoint` adds
    the file's name)."""


def _load_weights(model: nn.Module, state: Any) -> None:
    """``model.load_state_dict(state)``, strict; a tensor of another shape, missing or extra (torch's message names
    only the model class on its first line) raises a one-line error naming the first such tensor and both shapes."""
    if not isinstance(state, Mapping):
        raise _WeightsMismatch(f"its 'model' entry is not a state dict of weights (got {type(state).__name__})")
    own = model.state_dict()
    what = f"the weights do not match the {type(model).__name__} its model_kwargs build"
    for key, tensor in own.items():
        theirs = state.get(key)
        if theirs is None:
            raise _WeightsMismatch(f"{what}: {key} (shape {list(tensor.shape)} in the model) is not in the checkpoint")
        got = list(theirs.shape) if isinstance(theirs, Tensor) else type(theirs).__name__
        if not isinstance(theirs, Tensor) or theirs.shape != tensor.shape:
            raise _WeightsMismatch(
                f"{what}: {key} has shape {got} in the checkpoint, {list(tensor.shape)} in the model"
            )
    extra = next((k for k in state if k not in own), None)
    if extra is not None:
        got = list(state[extra].shape) if isinstance(state[extra], Tensor) else type(state[extra]).__name__
        raise _WeightsMismatch(f"{what}: the checkpoint's {extra} (shape {got}) is not in the model")
    model.load_state_dict(state)


def _planetoid_task(ckpt: Dict[str, Any], root: Optional[str]) -> ReportInputs:
    from ..data.planetoid import load_planetoid, prepare_features  # the features exactly as the task trained on them
    from ..models.gat import TwoLayerGAT

    data = load_planetoid(ckpt.get("dataset", "Cora"), root=root)[0]
    try:
        model = TwoLayerGAT(**ckpt["model_kwargs"])
    except TypeError as exc:  # settings the model does not take
        raise GraphRMAError(
            f"checkpoint settings and weights do not match: {str(exc).strip().splitlines()[0]}"
        ) from None
    _load_weights(model, ckpt["model"])
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
    from .node_training import build_model, prepare_graph
    from .protocols import Protocol

    for key in ("dataset", "settings", "model_name", "split"):
        if key not in ckpt:
            raise GraphRMAError(f"checkpoint has no {key!r} entry (not written by graph-rma node?)")
    for key in ("settings", "model_kwargs"):
        if not isinstance(ckpt[key], dict):
            raise GraphRMAError(f"checkpoint: its {key!r} entry is not a mapping ({type(ckpt[key]).__name__})")
    split = ckpt["split"]
    if isinstance(split, bool) or not isinstance(split, int) or split < 0:
        raise GraphRMAError(f"checkpoint: its 'split' entry is not a split number >= 0: {split!r}")
    known = {f.name for f in fields(Protocol)}
    try:
        protocol = Protocol(
            name=str(ckpt.get("protocol", "?")),
            reproduces="",
            **{k: v for k, v in ckpt["settings"].items() if k in known},
        )
    except ValueError as exc:
        raise GraphRMAError(f"checkpoint settings: {exc}") from None
    data = prepare_graph(load_node_graph(ckpt["dataset"], root=root), protocol)
    splits = 1 if data.test_mask.dim() == 1 else data.test_mask.size(1)
    if split >= splits:
        raise GraphRMAError(
            f"checkpoint: split {split} is out of range: {ckpt['dataset']} has {splits} split(s), 0 to {splits - 1}"
        )
    try:
        model = build_model(ckpt["model_name"], ckpt["model_kwargs"])
    except (TypeError, ValueError) as exc:  # settings another version wrote, or edited by hand
        raise GraphRMAError(f"checkpoint model_kwargs: {str(exc).strip().splitlines()[0]}") from None
    _load_weights(model, ckpt["model"])
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
        The summary of :func:`node_classification_report`; ``GraphRMAError`` for a checkpoint without the entries
        above or of an unknown task.
    """
    from ..engine import load_checkpoint

    if not isinstance(bins, int) or bins < 1:
        raise GraphRMAError(f"bins: expected a positive integer, got {bins!r}")
    path = Path(path)
    ckpt = load_checkpoint(path)
    if ckpt.get("task", "graph_to_text") == "graph_to_text" and {"config", "vocab", "relations", "model"} <= set(ckpt):
        if layers:
            raise GraphRMAError(
                f"layers: {path} is a graph-to-text (GraphWriter) checkpoint, whose report covers every encoder "
                f"layer's heads; choose layers of node-classification checkpoints only (attention diversity per "
                f"layer: graph-rma agenda|webnlg heads)"
            )
        return graph_to_text_report(path, out)
    if "task" not in ckpt and path.name.endswith(".partial.pt"):
        raise GraphRMAError(
            f"{path}: an unfinished run's save (written while it trains, resumed by the same command with "
            f"--resume), not a trained model; report the finished checkpoint ({path.name[: -len('.partial.pt')]}.pt)"
        )
    for key in ("task", "model_kwargs", "model"):
        if key not in ckpt:
            raise GraphRMAError(f"{path}: checkpoint has no {key!r} entry")
    if not isinstance(ckpt["model_kwargs"], dict):
        raise GraphRMAError(
            f"{path}: its 'model_kwargs' entry is not a mapping ({type(ckpt['model_kwargs']).__name__})"
        )
    task = ckpt["task"]
    if task not in _TASKS:
        raise GraphRMAError(f"{path}: unknown task {task!r}; known: {', '.join(sorted(_TASKS))}")
    try:
        inputs = _TASKS[task](ckpt, root)
    except _WeightsMismatch as exc:
        raise GraphRMAError(f"{path}: {exc}") from None
    extra = {
        "checkpoint": str(path),
        "task": task,
        "dataset": ckpt.get("dataset"),
        "variant": ckpt.get("variant"),
        "seed": ckpt.get("seed"),
        "training_metrics": _training_metrics(ckpt.get("metrics")),
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


def _training_metrics(metrics: Any) -> Any:
    """A node checkpoint's saved metrics with the keys of earlier versions renamed (``test_acc`` -> ``test_metric``)."""
    if not isinstance(metrics, dict):
        return metrics
    from .node_results import upgrade_metrics

    return upgrade_metrics(metrics)


def _probabilities(logits: Tensor) -> Tensor:
    """Class probabilities ``[n, K]``: the softmax of ``K >= 2`` logits, ``[1 - sigmoid, sigmoid]`` of one logit."""
    logits = logits.double()
    if logits.size(1) == 1:
        return torch.cat([torch.sigmoid(-logits), torch.sigmoid(logits)], dim=1)
    return logits.softmax(dim=-1)


def node_classification_report(
    model: nn.Module,
    x: Tensor,
    edge_index: Tensor,
    y: Tensor,
    mask: Tensor,
    layers: Union[str, nn.Module, Sequence[Union[str, nn.Module]], Mapping[str, nn.Module]],
    out_dir: Optional[Union[str, os.PathLike]] = None,
    num_bins: int = 10,
    extra: Optional[Dict[str, Any]] = None,
    plots: bool = True,
) -> Dict[str, Any]:
    """The task's metric, accuracy, calibration (ECE, OE, bins), predictive entropy, head diversity and head
    redundancy of ``layers`` on the nodes selected by ``mask``.

    The metric (``metric`` and ``score`` in the summary) is accuracy for a model with ``K >= 2`` outputs and ROC AUC
    for a binary model with one output logit (see the module); calibration and entropy are those of the softmax or
    sigmoid probabilities. Diversity is measured on the selected nodes: Dist over their per-head outputs, attention
    measures over the attention distributions of their incoming edges. Redundancy masks each head of each layer in
    turn and records the drop of the metric on the selected nodes.

    With ``out_dir``, writes ``report.json`` and (``plots=True``) ``reliability.png``, ``head_importance.png``,
    ``head_entropy.png``, ``entropy_cdf.png``. Returns the summary dict (``extra`` is merged in first).
    """
    if not isinstance(mask, Tensor) or mask.dtype != torch.bool or mask.dim() != 1:
        raise GraphRMAError(f"mask: expected a 1-D bool node mask, got {getattr(mask, 'dtype', type(mask))}")
    if y.dim() != 1 or y.numel() != mask.numel():
        raise GraphRMAError(f"y: expected node labels of shape [{mask.numel()}], got {list(y.shape)}")
    idx = mask.nonzero().view(-1)
    if idx.numel() == 0:
        raise GraphRMAError("mask: selects no node")
    resolved = resolve_layers(model, layers)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad(), contextlib.ExitStack() as stack:
            caps = {name: stack.enter_context(HeadCapture(layer)) for name, layer in resolved.items()}
            logits = model(x, edge_index)
        if not isinstance(logits, Tensor) or logits.dim() != 2 or logits.size(0) != mask.numel():
            raise GraphRMAError(f"model: expected logits [{mask.numel()}, K], got {getattr(logits, 'shape', logits)}")
        binary = logits.size(1) == 1
        metric = "roc_auc" if binary else "accuracy"
        labels = y[idx]

        def task_score(out: Tensor) -> float:
            if binary:
                return roc_auc(out[:, 0], labels)
            return float((out.argmax(dim=-1) == labels).double().mean())

        probs = _probabilities(logits[idx])
        acc = float((probs.argmax(dim=-1) == labels).double().mean())
        score = task_score(logits[idx])
        bins = calibration_bins(probs, labels, num_bins)
        ent = predictive_entropy(probs)

        for name, cap in caps.items():
            if cap.outputs is None or cap.alpha is None:
                raise GraphRMAError(f"layers: layer {name!r} was not called by model(x, edge_index)")
        skipped = {name: int(cap.heads) for name, cap in caps.items() if cap.heads < 2}  # nothing to compare
        diversity = {name: _layer_diversity(cap, mask, idx) for name, cap in caps.items() if name not in skipped}

        def evaluate() -> float:
            return task_score(model(x, edge_index)[idx])

        several = {name: layer for name, layer in resolved.items() if name not in skipped}
        redundancy = head_importance(model, several, evaluate) if several else HeadImportance(baseline=score)
    finally:
        model.train(was_training)

    summary = {**(extra or {}), **_summary(idx, metric, score, acc, num_bins, bins, probs, ent)}
    # head_diagnostics_skipped: layer -> its heads (< 2): no diversity, no head masking
    summary.update(diversity=diversity, redundancy=redundancy.to_dict(), head_diagnostics_skipped=skipped)
    if out_dir is not None:
        _write_report(Path(out_dir), summary, plots, bins, ent, binary, redundancy.drops)
    return summary


def _summary(idx: Tensor, metric: str, score: float, acc: float, num_bins: int, bins, probs: Tensor, ent: Tensor):
    """The report's scores: the metric, accuracy, calibration (ECE, OE, bins) and predictive entropy."""
    return {
        "num_nodes": int(idx.numel()),
        "metric": metric,
        "score": score,
        "accuracy": acc,
        "calibration": {
            "num_bins": num_bins,
            "ece": expected_calibration_error(bins),
            "oe": overconfidence_error(bins),
            "bins": bins.to_dict(),
        },
        "predictive_entropy": {
            "mean": float(ent.mean()),
            "median": float(ent.median()),
            "max_possible": math.log(probs.size(1)),
        },
    }


def _layer_diversity(cap: HeadCapture, mask: Tensor, idx: Tensor) -> Dict[str, Any]:
    """One layer's head diversity on the selected nodes (their per-head outputs, their incoming edges' attention),
    the entropy of uniform attention over the same edges, and its number of heads."""
    N = cap.outputs.size(0)
    sel = mask[cap.index] if cap.index.max() < mask.numel() else None
    d = head_diversity(
        outputs=cap.outputs[idx] if N == mask.numel() else cap.outputs,
        attn=cap.alpha if sel is None else cap.alpha[sel],
        index=cap.index if sel is None else cap.index[sel],
        num_nodes=max(N, mask.numel()),
    )
    deg = torch.bincount(cap.index, minlength=mask.numel()).double()
    d["uniform_entropy"] = float(deg[idx].clamp(min=1).log().mean())
    d["num_heads"] = cap.heads
    return d


def _write_report(out: Path, summary: Dict[str, Any], plots: bool, bins, ent: Tensor, binary: bool, drops) -> None:
    """``report.json`` in ``out`` and (``plots``, when matplotlib is installed) the report's pictures; the summary
    gets their paths under ``files``."""
    out.mkdir(parents=True, exist_ok=True)
    files = {}
    if plots:
        try:
            require("matplotlib", "plots", "the report's pictures")
        except MissingExtraError as exc:  # optional: the JSON summary is the report
            print(f"plots skipped ({exc.module} not installed): {exc.hint}", file=sys.stderr)
            plots = False
    if plots:
        files.update(_report_pictures(out, summary, bins, ent, binary, drops))
    files["summary"] = out / "report.json"
    summary["files"] = {k: str(v) for k, v in files.items()}
    write_json(out / "report.json", summary)


def _report_pictures(out: Path, summary: Dict[str, Any], bins, ent: Tensor, binary: bool, drops) -> Dict[str, Path]:
    """The reliability diagram, head importance and attention entropy (when a layer has several heads) and the
    predictive entropy's CDF, each title naming the dataset."""
    from ..diagnostics.plots import plot_entropy_cdf, plot_head_entropy, plot_head_importance, reliability_diagram

    diversity = summary["diversity"]
    on = f", {summary['dataset']}" if summary.get("dataset") else ""  # every title names the dataset
    files = {"reliability": reliability_diagram(bins, path=out / "reliability.png", title=f"Reliability diagram{on}")}
    if diversity:  # some layer has several heads
        files["head_importance"] = plot_head_importance(
            drops,
            path=out / "head_importance.png",
            metric="ROC AUC" if binary else "accuracy",
            title=f"Head importance{on}",
        )
        first = next(iter(diversity.values()))
        files["head_entropy"] = plot_head_entropy(
            {k: v["entropy"] for k, v in diversity.items()},
            path=out / "head_entropy.png",
            uniform=first["uniform_entropy"],
            title=f"Attention entropy per head{on}",
        )
    files["entropy_cdf"] = plot_entropy_cdf(
        {"test nodes": ent}, path=out / "entropy_cdf.png", title=f"Predictive entropy, empirical CDF{on}"
    )
    return files


def graph_to_text_report(path: Union[str, Path], out: Union[str, Path]) -> Dict[str, Any]:
    """The report of a GraphWriter checkpoint (``graph-rma agenda|webnlg train``'s ``best.pt`` or
    ``checkpoint.pt``): its variant, epoch and dev loss and how alike its encoder heads' parameters are (mean pairwise
    cosine over head pairs, averaged over layers; no data needed). The attention-based diversity on a split is
    ``graph-rma agenda heads``. Writes ``report.json`` into ``out``."""
    from ..regularizers import parameter_disagreement
    from .graph_to_text_model import checkpoint_dataset, load_model

    try:
        model, vocab, ck = load_model(path, "cpu")
    except (KeyError, TypeError, RuntimeError) as exc:
        raise GraphRMAError(
            f"{path}: not a loadable GraphWriter checkpoint ({str(exc).strip().splitlines()[0]})"
        ) from None
    summary = {
        "kind": "graph_to_text",
        "checkpoint": str(path),
        "dataset": checkpoint_dataset(ck),
        "variant": ck.get("variant"),
        "epoch": ck.get("epoch"),
        "dev_loss": ck.get("dev_loss"),
        "vocab": len(vocab),
        "encoder_heads": ck["config"].get("heads"),
        "encoder_layers": ck["config"].get("layers"),
        "head_parameter_cosine": float(parameter_disagreement(model.encoder).detach()),
    }
    out = Path(out)
    summary["files"] = {"summary": str(write_json(out / "report.json", summary))}
    return summary


def _other_datasets(datasets: Dict[str, Any]) -> str:
    shown = ", ".join(f"{name}: {d}" for name, d in datasets.items())
    return (
        f"the checkpoints are of different datasets ({shown}); a side-by-side comparison needs one dataset: "
        f"report them one at a time"
    )


def checkpoint_datasets(paths: Sequence[Union[str, Path]]) -> Dict[str, Any]:
    """Each checkpoint's dataset (by file stem), read before any report is computed; a one-line
    :class:`graph_rma.GraphRMAError` when they differ (:func:`compare_reports` compares one dataset's models)."""
    from ..engine import load_checkpoint
    from .graph_to_text_model import checkpoint_dataset

    datasets = {}
    for path in paths:
        ck = load_checkpoint(path)
        graph_to_text = ck.get("task", "graph_to_text") == "graph_to_text" and "relations" in ck
        datasets[Path(path).stem] = checkpoint_dataset(ck) if graph_to_text else ck.get("dataset")
    if len(set(datasets.values())) > 1:
        raise GraphRMAError(f"--checkpoint: {_other_datasets(datasets)}")
    return datasets


def compare_reports(summaries: Dict[str, Dict[str, Any]], out: Union[str, Path], plots: bool = True) -> Path:
    """``comparison.json`` (the metric and its score, accuracy, ECE, OE, diversity and the mean head-masking drop of
    the metric, per report) and, with ``plots``, ``head_importance_compare.png`` (the paper's Figure 2, side by
    side). ``summaries`` maps a name (e.g. the checkpoint's stem) to a :func:`report_checkpoint` summary; entries are
    labelled by their variant. Returns the path of ``comparison.json``."""
    from ..diagnostics.plots import plot_head_importance

    def label(name: str) -> str:
        v = summaries[name].get("variant")
        return f"{v} ({name})" if v else name

    datasets = {name: s.get("dataset") for name, s in summaries.items()}
    if len(set(datasets.values())) > 1:
        raise GraphRMAError(f"checkpoint: {_other_datasets(datasets)}")
    comparison = {
        label(name): {
            "dataset": s.get("dataset"),
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
    drops = {label(name): [d for v in s["redundancy"]["drops"].values() for d in v] for name, s in summaries.items()}
    drops = {name: d for name, d in drops.items() if d}  # a single-head model has no head to mask
    if plots and drops:
        metrics = {"ROC AUC" if s.get("metric") == "roc_auc" else "accuracy" for s in summaries.values()}
        try:
            datasets = sorted({str(s.get("dataset")) for s in summaries.values()})
            plot_head_importance(
                drops,
                path=out / "head_importance_compare.png",
                metric=metrics.pop() if len(metrics) == 1 else "metric",
                title=f"Head importance, {' / '.join(datasets)}",
            )
        except MissingExtraError as exc:  # optional: comparison.json is the comparison
            print(f"plots skipped ({exc.module} not installed): {exc.hint}", file=sys.stderr)
    return path


def format_report(summary: Dict[str, Any]) -> str:
    """The lines ``graph-rma report`` prints for one report (:func:`report_checkpoint`'s summary)."""
    if summary.get("kind") == "graph_to_text":
        dev = summary["dev_loss"]
        return (
            f"[{summary['variant']}] GraphWriter, epoch {summary['epoch']}, dev loss "
            f"{'n/a' if dev is None else f'{dev:.4f}'}: encoder head parameter cosine "
            f"{summary['head_parameter_cosine']:.4f} ({summary['encoder_heads']} heads x "
            f"{summary['encoder_layers']} layers; attention diversity: graph-rma agenda|webnlg heads)"
        )
    cal = summary["calibration"]
    label = f"[{summary['variant']}] " if summary.get("variant") else ""
    auc = f"ROC AUC {summary['score']:.4f}  " if summary.get("metric") == "roc_auc" else ""
    lines: List[str] = [
        f"{label}{auc}accuracy {summary['accuracy']:.4f}  ECE {cal['ece']:.4f}  OE {cal['oe']:.4f}  "
        f"(test nodes: {summary['num_nodes']}, M={cal['num_bins']})"
    ]
    drop = "ROC AUC drop" if auc else "drop"
    for name, d in summary["diversity"].items():
        drops = summary["redundancy"]["drops"][name]
        lines.append(
            f"{label}{name}: Dist {d['dist']:.4f}  Div {d['div']:.4f}  Disagreement {d['disagreement']:.4f}  "
            f"entropy {d['entropy_mean']:.4f} (uniform {d['uniform_entropy']:.4f})  "
            f"mean {drop} {sum(drops) / len(drops):.4f}  max {drop} {max(drops):.4f}"
        )
    skipped = summary.get("head_diagnostics_skipped") or {}
    if skipped:
        which = ", ".join(f"{name} ({heads} head{'s' if heads != 1 else ''})" for name, heads in skipped.items())
        lines.append(
            f"{label}head diagnostics skipped for {which}: head distance, diversity, attention entropy per head and "
            f"head masking need at least 2 heads"
        )
    return "\n".join(lines)
