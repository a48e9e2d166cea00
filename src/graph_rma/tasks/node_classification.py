r"""Node classification: GAT with and without repulsive attention, on Cora/CiteSeer (public split), the Geom-GCN
heterophilous graphs (Cornell, Texas, Wisconsin, chameleon, squirrel, Actor) and Platonov et al.'s graphs
(minesweeper, tolokers, chameleon_filtered, ...), each with 10 fixed splits: seed ``s`` trains on split
``s mod 10``, so 10 consecutive seeds cover the standard protocol.

What runs is (dataset, protocol, variant, seed) and nothing else. The protocol (:mod:`graph_rma.tasks.protocols`)
is a named preset that reproduces a published number (``gat``: Veličković et al.'s Cora setting; ``ggcn``: Yan et
al.'s GAT on the Geom-GCN graphs; ``platonov``/``platonov-small``: Platonov et al.'s residual GAT), with fields a
caller may override; every variant (:mod:`graph_rma.variants`) runs with exactly the same protocol over the same
seeds. Each graph has a default protocol (:func:`graph_rma.tasks.protocols.default_protocol`).

One run (:func:`train_run`): Adam, one full-batch step per epoch, the validation metric and loss after each step,
the epoch the protocol's early-stopping rule keeps (:class:`~graph_rma.engine.EarlyStopping`), and that epoch's
test metric: accuracy, or ROC AUC for a binary task (one output, binary cross-entropy). A training loss that is
not finite stops the study with a one-line error; finished runs stay saved.

Each finished (variant, seed) run is written atomically (``runs/<variant>/seed<k>.json`` and a checkpoint in
``checkpoints/``), so an interrupted study keeps its finished runs and ``--resume`` skips them. The summary is a
table (mean +- std over seeds of the test and validation metric, the paired difference of each variant against
the first with its standard error and wins/ties/losses, head diversity *Dist*, epochs, seconds per epoch),
``results.json``, ``results.csv`` and ``accuracy.png``.

From Python::

    from graph_rma.tasks.node_classification import run_study
    result = run_study(["ma", "svgd:alpha=0.1,eps=8"], seeds=range(10), out="runs/chameleon",
                       dataset="chameleon", protocol="ggcn")
    print(result["table"])

From the shell: ``graph-rma node --dataset NAME`` (``graph-rma cora`` is its short form for Cora).
"""

from __future__ import annotations

import copy
import inspect
import math
import sys
import time
import warnings
from dataclasses import replace
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import torch
import torch.nn.functional as F
from torch import nn

from .._deprecation import renamed, warn_renamed
from ..data.nodes import canonical_name, load_node_graph, select_split
from ..data.transforms import direct_edges, normalize_features
from ..diagnostics import head_distance
from ..engine import (
    EarlyStopping,
    ResumeMismatchError,
    check_resume,
    device_memory,
    mean_std,
    paired_comparison,
    read_json,
    resolve_device,
    save_checkpoint,
    seed_everything,
    slug,
    write_csv,
    write_json,
)
from ..engine.optional import MissingExtraError, require
from ..metrics.classification import score
from ..models.classic_gat import ClassicGAT
from ..models.gat import TwoLayerGAT
from ..models.residual_gat import ResidualGAT
from ..variants import apply_variant, parse_variant
from .defaults import (  # noqa: F401 (the variant specs of the study)
    CORA_DROPATTN_SPEC,
    CORA_MA_SPEC,
    CORA_REG_SPEC,
    CORA_SGLD_SPEC,
    CORA_SPOS_SPEC,
    CORA_SVGD_SPEC,
)
from .defaults import NODE_DEFAULT_SEEDS as DEFAULT_SEEDS
from .defaults import NODE_DEFAULT_VARIANTS as DEFAULT_VARIANTS
from .protocols import Protocol, protocol_fields, resolve_protocol

MODEL_CLASSES = {"gat": TwoLayerGAT, "residual": ResidualGAT, "classic": ClassicGAT}


def _upgrade(config: Dict[str, Any]) -> Dict[str, Any]:
    """A run's saved config with every field it lacks at its default (the :class:`Protocol` field's, the model
    constructor argument's), so that adding an option never retrains finished runs (compare upgraded configs)."""
    config = {**{f.name: f.default for f in protocol_fields()}, **config}
    cls = MODEL_CLASSES.get(config.get("model"))
    if isinstance(config.get("model_kwargs"), dict) and cls is not None:
        defaults = {
            k: p.default
            for k, p in inspect.signature(cls).parameters.items()
            if p.default is not inspect.Parameter.empty
        }
        config["model_kwargs"] = {**defaults, **config["model_kwargs"]}
    return config


class TrainingDiverged(ValueError):
    """The training loss became NaN or infinite (learning rate too high, or a bad input)."""


# ----------------------------------------------------------------------------------------------------------------
# The protocol: graph, model, metric
# ----------------------------------------------------------------------------------------------------------------
def prepare_graph(data, protocol: Protocol):
    """``data`` (as :func:`graph_rma.data.nodes.load_node_graph` returns it) with the protocol's features and edge
    direction (:mod:`graph_rma.data.transforms`); masks and labels unchanged.

    Raises:
        ValueError: the feature matrix ``x`` holds NaN or infinite entries (training on them could only diverge).
    """
    check_features(data.x)
    out = copy.copy(data)
    out.x = normalize_features(data.x, protocol.features)
    out.edge_index = direct_edges(data.edge_index, protocol.edges, data.y.size(0))
    return out


def check_features(x: torch.Tensor) -> None:
    """``ValueError`` naming the feature matrix when ``x`` (dense or sparse) holds NaN or infinite entries: training
    on them can only diverge, and the divergence would blame the learning rate."""
    values = x.coalesce().values() if x.is_sparse else x
    bad = ~torch.isfinite(values)
    if bool(bad.any()):
        where = ""
        if not x.is_sparse and bad.dim() == 2:
            where = f", the first in row {int(bad.any(dim=1).nonzero()[0, 0])} (node)"
        raise ValueError(
            f"x: the feature matrix holds {int(bad.sum())} NaN or infinite entries{where}; fix or drop "
            f"them before training"
        )


def resolve_metric(protocol: Protocol, num_classes: int) -> Tuple[str, str]:
    """``(metric, early-stopping rule)``: ``auto`` is ROC AUC for two classes and accuracy otherwise;
    ``val_metric`` is ``val_auc`` or ``val_acc`` accordingly."""
    metric = protocol.metric
    if metric == "auto":
        metric = "roc_auc" if num_classes == 2 else "accuracy"
    if metric == "roc_auc" and num_classes != 2:
        raise ValueError(f"metric: roc_auc needs a binary task, this graph has {num_classes} classes")
    rule = protocol.early_stopping
    if rule == "val_metric":
        rule = "val_auc" if metric == "roc_auc" else "val_acc"
    if (rule, metric) in (("val_auc", "accuracy"), ("val_acc", "roc_auc")):
        raise ValueError(f"early_stopping: {rule} does not match the metric {metric} (use val_metric)")
    return metric, rule


def model_settings(protocol: Protocol, in_channels: int, num_classes: int, metric: str) -> Tuple[str, Dict[str, Any]]:
    """``(model name, constructor arguments)`` of the protocol's model (:meth:`Protocol.model_settings`)."""
    return protocol.model_settings(in_channels, num_classes, metric)


def build_model(model: str, model_kwargs: Dict[str, Any]) -> nn.Module:
    """The model named ``model`` (a key of :data:`MODEL_CLASSES`) from its constructor arguments."""
    if model not in MODEL_CLASSES:
        raise ValueError(f"model: expected one of {tuple(MODEL_CLASSES)}, got {model!r}")
    return MODEL_CLASSES[model](**model_kwargs)


def _loss(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    if logits.size(-1) == 1:  # a binary task scored with ROC AUC: one logit, binary cross-entropy
        return F.binary_cross_entropy_with_logits(logits.squeeze(-1), y.float())
    return F.cross_entropy(logits, y)


# ----------------------------------------------------------------------------------------------------------------
# One run
# ----------------------------------------------------------------------------------------------------------------
def train_run(
    data,
    spec: str,
    seed: int,
    model_kwargs: Dict[str, Any],
    epochs: int = 1000,
    patience: int = 100,
    lr: float = 0.005,
    weight_decay: float = 5e-4,
    early_stopping: str = "val_acc",
    *,
    model: str = "gat",
    metric: str = "accuracy",
    progress: bool = False,
    device: Optional[str] = None,
):
    """Train one model with variant ``spec`` from ``seed``; returns ``(metrics, best_state_dict, model)``.

    ``data`` has ``x`` (dense or sparse), ``edge_index``, ``y`` and the three ``[N]`` masks; ``model`` names the
    architecture built from ``model_kwargs`` (:func:`build_model`); ``early_stopping`` is an
    :class:`EarlyStopping` rule; ``metric`` is ``"accuracy"`` or ``"roc_auc"`` (the returned metrics'
    ``test_metric`` and ``val_metric`` hold it, their ``metric`` names it). ``progress`` shows a bar over the epochs
    (validation metric, seconds per epoch). ``device``: where to train (default: ``data``'s device); the returned
    state dict is on the CPU.

    Raises:
        ValueError: a mask of ``data`` selects no node (nothing to train on, to select the epoch by, or to test);
            ``device`` is not a CPU or an existing CUDA device; the run ran out of memory (naming the sizes).
        TrainingDiverged: the training loss became NaN or infinite.
    """
    variant = parse_variant(spec)
    for name in ("train_mask", "val_mask", "test_mask"):
        if not bool(getattr(data, name).any()):
            raise ValueError(f"data: {name} selects no node (a split needs training, validation and test nodes)")
    seed_everything(seed)
    dev = resolve_device(device) if device is not None else data.x.device
    try:
        return _train(
            data,
            variant,
            spec,
            seed,
            model_kwargs,
            epochs,
            patience,
            lr,
            weight_decay,
            early_stopping,
            model,
            metric,
            progress,
            dev,
        )
    except (MemoryError, RuntimeError) as exc:  # torch.OutOfMemoryError (CUDA) is a RuntimeError
        if not isinstance(exc, MemoryError) and not _out_of_memory(exc):
            raise
        raise ValueError(
            f"out of memory training {spec} (seed {seed}) on {dev}: {model} with {_sizes(model_kwargs)} "
            f"on {data.num_nodes} nodes and {data.edge_index.size(1)} edges does not fit; lower the "
            f"hidden size or the number of heads (or use the lean attention path)"
        ) from None


def _out_of_memory(exc: BaseException) -> bool:
    text = str(exc)
    return (
        isinstance(exc, getattr(torch, "OutOfMemoryError", ()))
        or "out of memory" in text
        or "can't allocate memory" in text
    )


def _sizes(model_kwargs: Dict[str, Any]) -> str:
    keys = ("in_channels", "hidden_channels", "hidden", "heads", "out_heads", "layers", "out_channels")
    return ", ".join(f"{k}={model_kwargs[k]}" for k in keys if k in model_kwargs)


def check_model_fits(model: str, model_kwargs: Dict[str, Any], device: torch.device) -> int:
    """Refuse a model whose training state cannot fit in ``device``'s memory, before anything is allocated: the
    model is built on the ``meta`` device (no memory), and its float32 weights, gradients and Adam's two moments
    (4 x 4 bytes per parameter) are compared with :func:`graph_rma.engine.device_memory`. Returns the number of
    parameters.

    Raises:
        ValueError: bad constructor arguments (the model's own error), or a model too large, naming its sizes.
    """
    with torch.device("meta"):
        net = build_model(model, model_kwargs)
    count = sum(p.numel() for p in net.parameters())
    have = device_memory(device)
    need = 16 * count
    if have is not None and need > have:
        raise ValueError(
            f"model: {model} with {_sizes(model_kwargs)} has {count:,} parameters, "
            f"{need / 2**30:,.1f} GiB with their gradients and Adam's state: more than the "
            f"{have / 2**30:,.1f} GiB of memory of {device}; lower the hidden size or the number of heads"
        )
    return count


def _train(
    data,
    variant,
    spec: str,
    seed: int,
    model_kwargs: Dict[str, Any],
    epochs: int,
    patience: int,
    lr: float,
    weight_decay: float,
    early_stopping: str,
    model: str,
    metric: str,
    progress: bool,
    dev: torch.device,
):
    """:func:`train_run`'s body, once the arguments are checked and the generators seeded."""
    net = build_model(model, model_kwargs).to(dev)
    data = data.to(dev)
    optimizer = torch.optim.Adam(net.parameters(), lr=lr, weight_decay=weight_decay)
    with warnings.catch_warnings():  # the 1-head output layer is not a particle group; that is expected
        warnings.filterwarnings("ignore", message=".*fewer than 2; not a particle group")
        setup = apply_variant(variant, net, optimizer, seed=seed)
    x, ei, y = data.x, data.edge_index, data.y
    train_mask, val_mask, test_mask = data.train_mask, data.val_mask, data.test_mask

    best = {"val_metric": -1.0, "val_loss": math.inf, "test_metric": 0.0, "epoch": 0}

    def cpu_state():
        return {k: v.detach().to("cpu", copy=True) for k, v in net.state_dict().items()}

    best_state = cpu_state()
    stopper = EarlyStopping(early_stopping, patience)
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(
            total=epochs, desc="epochs", unit="ep", file=sys.stderr, leave=False, dynamic_ncols=True, mininterval=1.0
        )
    start, epoch = time.perf_counter(), 0
    try:
        for epoch in range(1, epochs + 1):
            net.train()
            optimizer.zero_grad()
            if variant.reg is not None:
                logits, attention, head_out = net.forward_with_attention(x, ei)
                loss = _loss(logits[train_mask], y[train_mask])
                loss = loss + setup.penalty(net, attention=attention[:1], head_outputs=[head_out])
            else:
                logits = net(x, ei)
                loss = _loss(logits[train_mask], y[train_mask])
            if not torch.isfinite(loss):
                raise TrainingDiverged(
                    f"training diverged at epoch {epoch} (seed {seed}, {spec}): the loss is {float(loss)}; lower "
                    f"the learning rate ({lr}) or check the inputs"
                )
            loss.backward()
            optimizer.step()

            net.eval()
            with torch.no_grad():
                logits = net(x, ei)
                val_loss = float(_loss(logits[val_mask], y[val_mask]))
                val_metric = score(logits[val_mask], y[val_mask], metric)
            keep, stop = stopper.update(val_metric, val_loss)
            if keep:
                best = {
                    "val_metric": val_metric,
                    "val_loss": val_loss,
                    "test_metric": score(logits[test_mask], y[test_mask], metric),
                    "epoch": epoch,
                }
                best_state = cpu_state()
            if bar is not None:
                bar.update()
                if epoch % 10 == 0 or stop:
                    bar.set_postfix_str(
                        f"val {100 * val_metric:.1f} best {100 * best['val_metric']:.1f} "
                        f"({(time.perf_counter() - start) / epoch:.3f} s/ep)"
                    )
            if stop:
                break
    finally:
        if bar is not None:
            bar.close()
    seconds = time.perf_counter() - start

    net.load_state_dict(best_state)
    net.eval()
    with torch.no_grad():
        heads = net.head_outputs(x, ei)[test_mask]
        dist = head_distance(heads) if heads.size(-2) > 1 else None  # one head: no distance between heads
    metrics = Metrics(
        {
            "test_metric": best["test_metric"],
            "val_metric": best["val_metric"],
            "val_loss": best["val_loss"],
            "best_epoch": best["epoch"],
            "epochs": epoch,
            "sec_per_epoch": seconds / max(epoch, 1),
            "dist": dist,
            "metric": metric,
            "device": dev.type,
            "limited_steps": int(
                getattr(setup.sampler, "limited_steps", 0)
            ),  # SVGD/SPOS steps the repulsion limit capped
        }
    )
    return metrics, best_state, net


# ----------------------------------------------------------------------------------------------------------------
# A study: variants x seeds, resumable
# ----------------------------------------------------------------------------------------------------------------
#: Keys of runs and summary rows saved before they said what they hold (``test_acc`` held ROC AUC on binary graphs).
OLD_METRIC_KEYS = {
    old: new
    for o, n in (("test_acc", "test_metric"), ("val_acc", "val_metric"))
    for old, new in ((o, n), (f"{o}_mean", f"{n}_mean"), (f"{o}_std", f"{n}_std"))
}


class Metrics(dict):
    """A dict of a run's metrics or a summary row, where an old key (:data:`OLD_METRIC_KEYS`) still reads its new
    key's value, with a ``DeprecationWarning`` (one release): ``metrics["test_acc"]`` is ``metrics["test_metric"]``.
    Checkpoints store a plain ``dict`` of it (``weights_only`` loading knows no other class)."""

    def __missing__(self, key: Any) -> Any:
        new = OLD_METRIC_KEYS.get(key)
        if new is None or new not in self:
            raise KeyError(key)
        warn_renamed(f"the node results' key {key!r}", f"the key {new!r}")
        return self[new]

    def get(self, key: Any, default: Any = None) -> Any:
        return self[key] if key in self or (key in OLD_METRIC_KEYS and OLD_METRIC_KEYS[key] in self) else default


def upgrade_metrics(entry: Dict[str, Any]) -> Metrics:
    """A run's ``metrics`` or a summary row with the keys of earlier versions renamed (:data:`OLD_METRIC_KEYS`:
    ``test_acc`` -> ``test_metric``, ``val_acc_mean`` -> ``val_metric_mean``, ...), order kept; a new dict. Every
    reader of saved node runs (resume, :func:`summarize`, :func:`format_table`, :func:`plot`) goes through it."""
    return Metrics((OLD_METRIC_KEYS.get(k, k), v) for k, v in entry.items())


def summarize(results: List[Dict[str, Any]], variants: Sequence[str]) -> List[Dict[str, Any]]:
    """One row per variant: mean and std over seeds (``std`` is the sample standard deviation), and for every variant
    after the first the paired difference of the test metric against the first (``paired_*``: mean and standard error
    in points, wins/ties/losses over the seeds both ran; :func:`graph_rma.engine.paired_comparison`)."""
    rows = []
    results = [{**r, "metrics": upgrade_metrics(r["metrics"])} for r in results]  # runs saved with the old keys too
    base = {r["seed"]: 100 * r["metrics"]["test_metric"] for r in results if variants and r["variant"] == variants[0]}
    for spec in variants:
        runs = [r for r in results if r["variant"] == spec]
        if not runs:
            continue
        row: Dict[str, Any] = Metrics(variant=spec, seeds=len(runs))
        for key, scale in (("test_metric", 100), ("val_metric", 100), ("dist", 1), ("epochs", 1), ("sec_per_epoch", 1)):
            values = [r["metrics"][key] * scale for r in runs if r["metrics"].get(key) is not None]
            m, s = mean_std(values) if values else (None, None)  # dist: None for single-head models
            row[f"{key}_mean"], row[f"{key}_std"] = m, s
        if spec != variants[0]:
            pc = paired_comparison(base, {r["seed"]: 100 * r["metrics"]["test_metric"] for r in runs})
            row.update({f"paired_{k}": v for k, v in pc.items()})
        rows.append(row)
    return rows


METRIC_LABELS = {"accuracy": "acc", "roc_auc": "ROC AUC"}


def format_table(rows: List[Dict[str, Any]], metric: str = "accuracy") -> str:
    """A markdown table of :func:`summarize`'s rows; the paired column compares each variant with the first row."""
    m = METRIC_LABELS.get(metric, metric)
    lines = [
        f"| variant | seeds | test {m} (%) | paired diff vs first (W/T/L) | val {m} (%) | Dist | epochs | s/epoch |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in map(upgrade_metrics, rows):
        paired = "—"
        if "paired_mean" in r and r["paired_n"] > 1:
            paired = (
                f"{r['paired_mean']:+.2f} ± {r['paired_se']:.2f} "
                f"({r['paired_wins']}/{r['paired_ties']}/{r['paired_losses']})"
            )
        lines.append(
            f"| `{r['variant']}` | {r['seeds']} | {r['test_metric_mean']:.1f} ± {r['test_metric_std']:.1f} | "
            f"{paired} | {r['val_metric_mean']:.1f} ± {r['val_metric_std']:.1f} | "
            + ("—" if r["dist_mean"] is None else f"{r['dist_mean']:.2f} ± {r['dist_std']:.2f}")
            + " | "
            f"{r['epochs_mean']:.0f} | {r['sec_per_epoch_mean']:.3f} |"
        )
    return "\n".join(lines)


def plot(
    results: List[Dict[str, Any]],
    variants: Sequence[str],
    path: Path,
    title: str = "GAT on Cora",
    metric: str = "accuracy",
) -> Path:
    """Accuracy per variant: each seed's test and validation accuracy, with the mean +- std (a PNG at ``path``).

    Needs matplotlib (the ``plots`` extra); raises :class:`~graph_rma.engine.optional.MissingExtraError` without it.
    """
    figure = require("matplotlib.figure", "plots", "the accuracy plot")
    backend = require("matplotlib.backends.backend_agg", "plots", "the accuracy plot")

    fig = figure.Figure(figsize=(max(4.0, 1.4 * len(variants) + 1.5), 3.6))
    backend.FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    for k, spec in enumerate(variants):
        for offset, key, color in ((-0.12, "test_metric", "tab:blue"), (0.12, "val_metric", "tab:orange")):
            vals = [100 * upgrade_metrics(r["metrics"])[key] for r in results if r["variant"] == spec]
            if not vals:
                continue
            m, s = mean_std(vals)
            ax.scatter([k + offset] * len(vals), vals, s=10, color=color, alpha=0.5)
            ax.errorbar(
                [k + offset],
                [m],
                yerr=[s],
                fmt="o",
                color=color,
                capsize=4,
                label=("test" if key == "test_metric" else "validation") if k == 0 else None,
            )
    ax.set_xticks(range(len(variants)))
    names = [parse_variant(v).name for v in variants]
    if len(set(names)) < len(names):  # two configurations of one family: show the specs
        names = [v.replace(",", ",\n") for v in variants]
    ax.set_xticklabels(names, rotation=20, fontsize=8)
    label = "ROC AUC" if metric == "roc_auc" else "accuracy"
    ax.set_ylabel(f"{label} (%)")
    ax.set_title(f"{title}: {label} per variant\n(points: seeds; bars: mean ± std)", fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(loc="lower right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp, dpi=120, format="png")
    tmp.replace(path)
    return path


def _protocol(protocol: Union[None, str, Protocol], dataset: str, overrides: Dict[str, Any]) -> Protocol:
    if isinstance(protocol, Protocol):
        changes = {k: v for k, v in overrides.items() if v is not None}
        return replace(protocol, **changes) if changes else protocol
    return resolve_protocol(protocol, dataset, overrides)


def _field_keywords(overrides: Dict[str, Any]) -> Dict[str, Any]:
    """``run_study``'s deprecated keyword arguments named after protocol fields; a ``TypeError`` for any other name
    (as for any unknown keyword argument), a ``DeprecationWarning`` when there are some."""
    known = {f.name for f in protocol_fields()}
    unknown = [k for k in overrides if k not in known]
    if unknown:
        raise TypeError(f"run_study() got an unexpected keyword argument {unknown[0]!r}")
    if overrides:
        example = ", ".join(f"{k!r}: {v!r}" for k, v in overrides.items())
        warnings.warn(
            f"run_study({', '.join(f'{k}=...' for k in overrides)}): protocol fields as keyword arguments are "
            f"deprecated; pass protocol=resolve_protocol(name, dataset, {{{example}}}) (graph_rma.tasks.protocols), "
            f"or dataclasses.replace(protocol, ...) of a Protocol",
            DeprecationWarning,
            stacklevel=3,
        )
    return overrides


def run_study(
    variants: Sequence[str] = DEFAULT_VARIANTS,
    seeds: Sequence[int] = tuple(range(DEFAULT_SEEDS)),
    out: Union[str, Path] = "runs/cora",
    *,
    dataset: str = "Cora",
    protocol: Union[None, str, Protocol] = None,
    root: Optional[str] = None,
    resume: bool = False,
    threads: int = 1,
    make_plot: bool = True,
    progress: bool = True,
    device: Optional[str] = None,
    **overrides: Any,
) -> Dict[str, Any]:
    """Train every variant on every seed (seed-major) under one protocol, resumable; write ``results.json``/``.csv``
    and the plot.

    ``protocol`` is a :class:`~graph_rma.tasks.protocols.Protocol` (the whole configuration: a preset with its
    changes, ``resolve_protocol(name, dataset, overrides)``), or names a preset of
    :data:`graph_rma.tasks.protocols.PROTOCOLS` (``None``: the dataset's default, with its per-graph settings).
    Deprecated: further keyword arguments named after a field of the protocol (``epochs=2``, ``lr=0.01``; ``None``
    keeps the protocol's value) override it, with a ``DeprecationWarning``; pass
    ``protocol=resolve_protocol(name, dataset, {"epochs": 2})`` (or ``dataclasses.replace(protocol, epochs=2)``).
    ``device``: ``"cpu"``, ``"cuda"`` (``"cuda:1"``, ...); default: CUDA when available, else the CPU. The device is
    recorded with each run's metrics but is not part of the settings that ``resume`` compares.
    Returns ``{"config", "seeds", "variants", "summary" (one row per variant), "runs", "table" (markdown),
    "files" (written paths), "interrupted"}``. ``resume=True`` reuses finished runs in ``out`` whose settings
    match. A KeyboardInterrupt ends the study early with the finished runs saved (``interrupted`` is then True).
    """
    from tqdm import tqdm

    overrides = _field_keywords(overrides)  # deprecated; as Python would, an unknown name first
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads: expected a positive integer, got {threads!r}")
    seeds = [int(s) for s in seeds]
    if not seeds:
        raise ValueError("seeds: expected at least one seed")
    for seed in seeds:
        if not 0 <= seed < 2**64:  # torch's seed range
            raise ValueError(f"seeds: expected seeds in [0, 2**64 - 1], got {seed}")
    ds_name = canonical_name(dataset, root)  # validates the name before any data is loaded
    proto = _protocol(protocol, ds_name, overrides)
    torch.set_num_threads(threads)
    dev = resolve_device(device)
    variants = [parse_variant(v).spec for v in variants]  # canonical spec strings (also validates them)
    if len(set(variants)) != len(variants):
        raise ValueError(f"variants: duplicates after parsing: {variants}")
    graph = prepare_graph(load_node_graph(ds_name, root=root), proto)
    n_splits = 1 if graph.train_mask.dim() == 1 else graph.train_mask.size(1)  # Cora's [N] masks: one split
    num_classes = int(graph.y.max()) + 1
    metric_name, rule = resolve_metric(proto, num_classes)
    model_name, model_kwargs = model_settings(proto, graph.num_features, num_classes, metric_name)
    try:
        check_model_fits(model_name, model_kwargs, dev)  # a bad or too large size is refused before any run starts
    except ValueError as exc:
        if num_classes > graph.y.size(0):  # labels up to 1e9: say where the output layer's size comes from
            raise ValueError(
                f"{exc} (the labels go up to {num_classes - 1}, so the output layer has {num_classes} "
                f"classes for {graph.y.size(0)} nodes)"
            ) from None
        raise
    config = {
        "dataset": ds_name,
        "protocol": proto.name,
        **proto.settings(),
        "metric": metric_name,
        "stop_on": rule,
        "model": model_name,
        "model_kwargs": model_kwargs,
    }
    out = Path(out)

    def flat(c: Dict[str, Any]) -> Dict[str, Any]:
        return {**{k: v for k, v in c.items() if k != "model_kwargs"}, **c.get("model_kwargs", {})}

    results: List[Dict[str, Any]] = []
    todo = []
    differing: Dict[str, None] = {}  # why finished runs in out were not reused (other settings), in order
    for seed in seeds:  # seed-major: an interrupted study has every variant on the same seeds
        for spec in variants:
            path = out / "runs" / slug(spec) / f"seed{seed}.json"
            ckpt = out / "checkpoints" / f"{slug(spec)}_seed{seed}.pt"
            if resume and path.is_file():
                try:
                    saved = read_json(path)
                except (OSError, ValueError):
                    saved = None
                if (
                    saved is not None
                    and isinstance(saved.get("config"), dict)
                    and _upgrade(saved["config"]) == _upgrade(config)
                    and saved.get("variant") == spec
                ):
                    if ckpt.is_file():  # a run is finished only when everything it leaves behind is there
                        results.append({**saved, "metrics": upgrade_metrics(saved.get("metrics", {}))})
                        continue
                    differing[f"checkpoint {ckpt.name} missing"] = None
                elif saved is not None and isinstance(saved.get("config"), dict):
                    try:
                        check_resume(flat(_upgrade(saved["config"])), flat(_upgrade(config)), may_change=())
                    except ResumeMismatchError as exc:
                        differing.update(dict.fromkeys(f"{k} {o!r} -> {n!r}" for k, o, n in exc.differences))
            todo.append((spec, seed, path, ckpt))
    if resume and results:
        print(f"resume: {len(results)} finished run(s) reused from {out}, {len(todo)} to do", file=sys.stderr)
    if differing:
        print(
            f"resume: runs in {out} made with other settings or incomplete ({', '.join(differing)}) are trained again",
            file=sys.stderr,
        )

    interrupted = False
    bar = tqdm(
        todo, desc=f"{ds_name.lower()} runs", unit="run", file=sys.stderr, dynamic_ncols=True, disable=not progress
    )
    try:
        for spec, seed, path, ckpt in bar:
            bar.set_postfix_str(f"{parse_variant(spec).name} seed {seed}")
            split = seed % n_splits  # a dataset with fixed splits: seed s trains on split s mod splits
            data = select_split(graph, split)
            metrics, state, net = train_run(
                data,
                spec,
                seed,
                model_kwargs,
                epochs=proto.epochs,
                patience=proto.patience,
                lr=proto.lr,
                weight_decay=proto.weight_decay,
                early_stopping=rule,
                model=model_name,
                metric=metric_name,
                progress=progress,
                device=str(dev),
            )
            save_checkpoint(
                ckpt,
                {
                    "task": "node",
                    "dataset": ds_name,
                    "split": split,
                    "protocol": proto.name,
                    "settings": proto.settings(),
                    "model_name": model_name,
                    "model_kwargs": net.model_kwargs,
                    "variant": spec,
                    "seed": seed,
                    "model": state,
                    "metrics": dict(metrics),
                },
            )
            record = {
                "variant": spec,
                "seed": seed,
                "split": split,
                "config": config,
                "metrics": metrics,
                "checkpoint": str(ckpt.relative_to(out)),
            }
            write_json(path, record)  # last: a run counts as finished only once its record exists
            results.append(record)
            bar.set_postfix_str(f"{parse_variant(spec).name} seed {seed}: test {100 * metrics['test_metric']:.1f}")
    except KeyboardInterrupt:
        interrupted = True
        print("\ninterrupted: finished runs are saved; rerun with --resume to continue", file=sys.stderr)
    finally:
        bar.close()

    results.sort(key=lambda r: (variants.index(r["variant"]), r["seed"]))
    rows = summarize(results, variants)
    files: List[Path] = []
    if rows:
        files.append(
            write_json(
                out / "results.json",
                {"config": config, "seeds": seeds, "variants": variants, "summary": rows, "runs": results},
            )
        )
        files.append(write_csv(out / "results.csv", rows))
        if make_plot:
            try:
                files.append(
                    plot(
                        results,
                        variants,
                        out / "accuracy.png",
                        title=f"{proto.model.upper()} on {ds_name} ({proto.name} protocol)",
                        metric=metric_name,
                    )
                )
            except MissingExtraError as exc:  # optional: the results are written, the run goes on
                print(f"plot skipped ({exc.module} not installed): {exc.hint}", file=sys.stderr)
    return {
        "config": config,
        "seeds": seeds,
        "variants": variants,
        "summary": rows,
        "runs": results,
        "table": format_table(rows, metric_name) if rows else "",
        "files": files,
        "interrupted": interrupted,
    }


# Old names of the node benchmark's specs (graph_rma.tasks.defaults.CORA_*_SPEC): one release, with a warning.
__getattr__ = renamed(
    __name__,
    {old: f"graph_rma.tasks.defaults:CORA_{old}_SPEC" for old in ("MA", "REG", "SGLD", "SVGD", "SPOS", "DROPATTN")},
)
