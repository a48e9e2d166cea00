r"""One node-classification run (:func:`train_run`): the protocol's graph, model and metric, then Adam, one
full-batch step per epoch, the validation metric and loss after each step, the epoch the protocol's early-stopping
rule keeps (:class:`~graph_rma.engine.EarlyStopping`), and that epoch's test metric: accuracy, or ROC AUC for a
binary task (one output, binary cross-entropy). A training loss that is not finite raises
:class:`TrainingDiverged`.

A long run survives being killed: given a ``partial`` file, :func:`train_run` saves everything the run needs to go
on (weights, Adam's state, the sampler's noise generator, the early-stopping counters, the kept epoch and its
weights, every RNG state) at most every ``save_every_s`` seconds, and a later call with the same file and the same
settings continues from the last save and ends exactly as an uninterrupted run would. Called inside
:func:`graph_rma.engine.interrupt.deferred_interrupt` (as :func:`~graph_rma.tasks.node_classification.run_study` calls
it), a Ctrl-C stops the run at the end of the epoch it is in, saved there. The file is removed when the
run finishes; one saved with other settings (another variant, seed, model, split or schedule) is ignored with a
line on stderr.

The study over variants and seeds that calls it is :func:`graph_rma.tasks.node_classification.run_study`.
"""

from __future__ import annotations

import copy
import hashlib
import math
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Dict, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from .._errors import GraphRMAError
from ..data.transforms import direct_edges, normalize_features
from ..diagnostics import head_distance
from ..engine import (
    CheckpointError,
    EarlyStopping,
    PathLike,
    device_memory,
    interrupt_requested,
    load_checkpoint,
    resolve_device,
    rng_state,
    save_checkpoint,
    seed_everything,
    set_rng_state,
)
from ..metrics.classification import score
from ..models.classic_gat import ClassicGAT
from ..models.gat import TwoLayerGAT
from ..models.residual_gat import ResidualGAT
from ..variants import apply_variant, parse_variant
from .protocols import Protocol

MODEL_CLASSES = {"gat": TwoLayerGAT, "residual": ResidualGAT, "classic": ClassicGAT}


class TrainingDiverged(GraphRMAError):
    """The training loss became NaN or infinite (learning rate too high, or a bad input)."""


# ----------------------------------------------------------------------------------------------------------------
# The protocol: graph, model, metric
# ----------------------------------------------------------------------------------------------------------------
def prepare_graph(data, protocol: Protocol):
    """``data`` (as :func:`graph_rma.data.nodes.load_node_graph` returns it) with the protocol's features and edge
    direction (:mod:`graph_rma.data.transforms`); masks and labels unchanged.

    Raises:
        GraphRMAError: the feature matrix ``x`` holds NaN or infinite entries (training on them could only diverge).
    """
    check_features(data.x)
    out = copy.copy(data)
    out.x = normalize_features(data.x, protocol.features)
    out.edge_index = direct_edges(data.edge_index, protocol.edges, data.y.size(0))
    return out


def check_features(x: torch.Tensor) -> None:
    """``GraphRMAError`` naming the feature matrix when ``x`` (dense or sparse) holds NaN or infinite entries: training
    on them can only diverge, and the divergence would blame the learning rate."""
    values = x.coalesce().values() if x.is_sparse else x
    bad = ~torch.isfinite(values)
    if bool(bad.any()):
        where = ""
        if not x.is_sparse and bad.dim() == 2:
            where = f", the first in row {int(bad.any(dim=1).nonzero()[0, 0])} (node)"
        raise GraphRMAError(
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
        raise GraphRMAError(f"metric: roc_auc needs a binary task, this graph has {num_classes} classes")
    rule = protocol.early_stopping
    if rule == "val_metric":
        rule = "val_auc" if metric == "roc_auc" else "val_acc"
    if (rule, metric) in (("val_auc", "accuracy"), ("val_acc", "roc_auc")):
        raise GraphRMAError(f"early_stopping: {rule} does not match the metric {metric} (use val_metric)")
    return metric, rule


def model_settings(protocol: Protocol, in_channels: int, num_classes: int, metric: str) -> Tuple[str, Dict[str, Any]]:
    """``(model name, constructor arguments)`` of the protocol's model (:meth:`Protocol.model_settings`)."""
    return protocol.model_settings(in_channels, num_classes, metric)


def build_model(model: str, model_kwargs: Dict[str, Any]) -> nn.Module:
    """The model named ``model`` (a key of :data:`MODEL_CLASSES`) from its constructor arguments."""
    if model not in MODEL_CLASSES:
        raise GraphRMAError(f"model: expected one of {tuple(MODEL_CLASSES)}, got {model!r}")
    return MODEL_CLASSES[model](**model_kwargs)


def _loss(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    if logits.size(-1) == 1:  # a binary task scored with ROC AUC: one logit, binary cross-entropy
        return F.binary_cross_entropy_with_logits(logits.squeeze(-1), y.float())
    return F.cross_entropy(logits, y)


# ----------------------------------------------------------------------------------------------------------------
# One run
# ----------------------------------------------------------------------------------------------------------------
def train_run(
    protocol: Protocol,
    data,
    spec: str,
    seed: int,
    *,
    progress: bool = False,
    device: Optional[str] = None,
    partial: Optional[PathLike] = None,
    save_every_s: float = 60.0,
):
    """Train one model under ``protocol`` with variant ``spec`` from ``seed``; returns
    ``(metrics, best_state_dict, model)``.

    Every setting is the protocol's field, read here and declared nowhere else: the model
    (:meth:`Protocol.model_settings` for ``data``'s features and classes), ``lr``, ``weight_decay``, ``epochs``,
    ``patience``, the early-stopping rule and the metric (:func:`resolve_metric`: ``auto`` is ROC AUC for two classes;
    the returned metrics' ``test_metric`` and ``val_metric`` hold it, their ``metric`` names it). ``data`` has ``x``
    (dense or sparse, prepared as the protocol says: :func:`prepare_graph`), ``edge_index``, ``y`` (classes ``0..K-1``)
    and the three ``[N]`` masks. ``progress`` shows a bar over the epochs (validation metric, seconds per epoch).
    ``device``: where to train (default: ``data``'s device); the returned state dict is on the CPU.
    ``partial``: a file where the unfinished run is saved (at most every ``save_every_s`` seconds, after a whole
    epoch); when it holds a run with the same settings, training continues from it (see the module docstring).
    ``None``: nothing is saved.

    Raises:
        GraphRMAError: a mask of ``data`` selects no node (nothing to train on, to select the epoch by, or to test);
            ``device`` is not a CPU or an existing CUDA device; the run ran out of memory (naming the sizes).
        TrainingDiverged: the training loss became NaN or infinite.
    """
    if not isinstance(protocol, Protocol):
        raise GraphRMAError(
            f"protocol: expected a Protocol (graph_rma.tasks.protocols.resolve_protocol), got {type(protocol).__name__}"
        )
    num_classes = int(data.y.max()) + 1
    metric, early_stopping = resolve_metric(protocol, num_classes)
    model, model_kwargs = protocol.model_settings(data.num_features, num_classes, metric)
    epochs, patience = protocol.epochs, protocol.patience
    lr, weight_decay = protocol.lr, protocol.weight_decay
    variant = parse_variant(spec)
    for name in ("train_mask", "val_mask", "test_mask"):
        if not bool(getattr(data, name).any()):
            raise GraphRMAError(f"data: {name} selects no node (a split needs training, validation and test nodes)")
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
            None if partial is None else Path(partial),
            save_every_s,
        )
    except (MemoryError, RuntimeError) as exc:  # torch.OutOfMemoryError (CUDA) is a RuntimeError
        if not isinstance(exc, MemoryError) and not _out_of_memory(exc):
            raise
        raise GraphRMAError(
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


def _attention_bytes(model_kwargs: Dict[str, Any], num_nodes: int, num_edges: int) -> Tuple[int, str]:
    """A lower bound of the bytes one training step keeps for the first attention layer (float32, kept for
    backward and its gradients): the projected features ``[N, width]``, the messages ``[E, width]`` (not on the
    lean path) and three ``[E, heads]`` attention tensors (scores, softmax, dropout), with ``E`` counting one
    self-loop per node. Also says what it counted."""
    heads = int(model_kwargs.get("heads") or 1)
    per_head = model_kwargs.get("hidden_channels")
    width = heads * int(per_head) if per_head is not None else int(model_kwargs.get("hidden") or 0)
    edges = num_edges + num_nodes
    floats = num_nodes * width + (0 if model_kwargs.get("lean") else edges * width) + 3 * edges * heads
    return 2 * 4 * floats, f"{edges:,} edges x {heads:,} heads x width {width:,}"


def check_model_fits(
    model: str,
    model_kwargs: Dict[str, Any],
    device: torch.device,
    num_nodes: Optional[int] = None,
    num_edges: Optional[int] = None,
) -> int:
    """Refuse a model whose training state cannot fit in ``device``'s memory, before anything is allocated: the
    model is built on the ``meta`` device (no memory), and its float32 weights, gradients and Adam's two moments
    (4 x 4 bytes per parameter), plus, given the graph's ``num_nodes`` and ``num_edges``, a lower bound of the first
    attention layer's activations (:func:`_attention_bytes`), are compared with
    :func:`graph_rma.engine.device_memory`. Returns the number of parameters.

    Raises:
        GraphRMAError: bad constructor arguments (the model's own error), or a model too large, naming its sizes.
    """
    with torch.device("meta"):
        net = build_model(model, model_kwargs)
    count = sum(p.numel() for p in net.parameters())
    have = device_memory(device)
    act, counted = (0, "") if num_edges is None else _attention_bytes(model_kwargs, num_nodes or 0, num_edges)
    need = 16 * count + act
    if have is not None and need > have:
        acts = f" and at least {act / 2**30:,.1f} GiB of attention activations ({counted})" if act else ""
        raise GraphRMAError(
            f"model: {model} with {_sizes(model_kwargs)} has {count:,} parameters, "
            f"{16 * count / 2**30:,.1f} GiB with their gradients and Adam's state{acts}: more than the "
            f"{have / 2**30:,.1f} GiB of memory of {device}; lower the hidden size or the number of heads"
        )
    return count


def check_variant_layers(model: str, model_kwargs: Dict[str, Any], variants: Sequence[str]) -> None:
    """Refuse, before any data are read, a sampler variant whose ``layers=`` names no attention layer of the model
    (the message lists the valid names) or that finds no layer with two heads to sample: the model is built on the
    ``meta`` device (its sizes need not be the data's)."""
    from ..particles import SGLD

    sampled = [v for v in map(parse_variant, variants) if v.sampler != "ma"]
    if not sampled:
        return
    with torch.device("meta"):
        net = build_model(model, model_kwargs)
    for v in sampled:
        try:
            SGLD(net, layers=list(v.layers) if v.layers else None, roles=v.roles)  # finds the groups, as the variant
        except ValueError as exc:
            raise GraphRMAError(f"variant {v.spec!r}: {exc}") from None


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
    partial: Optional[Path],
    save_every_s: float,
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
    identity = {
        "variant": spec,
        "seed": seed,
        "model": model,
        "model_kwargs": model_kwargs,
        "epochs": epochs,
        "patience": patience,
        "lr": lr,
        "weight_decay": weight_decay,
        "early_stopping": early_stopping,
        "metric": metric,
        "data": _fingerprint(data),
    }
    first, done_seconds = 1, 0.0
    saved = _read_partial(partial, identity) if partial is not None else None
    if saved is not None:
        _restore(saved, net, optimizer, setup, stopper, dev)
        best, best_state = dict(saved["best"]), saved["best_state"]
        first, done_seconds = int(saved["epoch"]) + 1, float(saved["seconds"])

    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(
            total=epochs,
            initial=first - 1,
            desc="epochs",
            unit="ep",
            file=sys.stderr,
            leave=False,
            dynamic_ncols=True,
            mininterval=1.0,
        )
    start, epoch = time.perf_counter(), first - 1
    last_save = start
    try:
        for epoch in range(first, epochs + 1):
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
                        f"({(time.perf_counter() - start) / (epoch - first + 1):.3f} s/ep)"
                    )
            if stop:
                break
            now = time.perf_counter()
            asked = interrupt_requested() and epoch < epochs  # Ctrl-C held by the caller: stop here, saved
            if partial is not None and epoch < epochs and (asked or now - last_save >= save_every_s):
                state = _partial_state(net, optimizer, setup, stopper, dev)
                state.update(identity=identity, epoch=epoch, seconds=done_seconds + now - start, best=best)
                save_checkpoint(partial, {**state, "model": cpu_state(), "best_state": best_state})
                last_save = time.perf_counter()
            if asked:
                raise KeyboardInterrupt
    finally:
        if bar is not None:
            bar.close()
    seconds = done_seconds + time.perf_counter() - start

    net.load_state_dict(best_state)
    net.eval()
    with torch.no_grad():
        heads = net.head_outputs(x, ei)[test_mask]
        dist = head_distance(heads) if heads.size(-2) > 1 else None  # one head: no distance between heads
    metrics = {
        "test_metric": best["test_metric"],
        "val_metric": best["val_metric"],
        "val_loss": best["val_loss"],
        "best_epoch": best["epoch"],
        "epochs": epoch,
        "sec_per_epoch": seconds / max(epoch, 1),
        "dist": dist,
        "metric": metric,
        "device": dev.type,
        "limited_steps": int(getattr(setup.sampler, "limited_steps", 0)),  # SVGD/SPOS steps the repulsion limit capped
    }
    if partial is not None:
        partial.unlink(missing_ok=True)  # the run is finished: nothing left to continue
    return metrics, best_state, net


def _partial_state(net, optimizer, setup, stopper: EarlyStopping, dev: torch.device) -> Dict[str, Any]:
    """The training state of an unfinished run besides its weights and bookkeeping: Adam's moments, the sampler's
    generator and step-limit count, the early-stopping counters and every RNG state."""
    return {
        "optimizer": optimizer.state_dict(),
        "sampler": setup.state_dict(),
        "limited_steps": int(getattr(setup.sampler, "limited_steps", 0)),
        "stopper": stopper.state_dict(),
        "rng": rng_state(dev),
    }


def _restore(saved: Dict[str, Any], net, optimizer, setup, stopper: EarlyStopping, dev: torch.device) -> None:
    """Put a saved unfinished run's weights and :func:`_partial_state` back."""
    net.load_state_dict(saved["model"])
    optimizer.load_state_dict(saved["optimizer"])
    setup.load_state_dict(saved["sampler"])
    if setup.sampler is not None:
        setup.sampler.limited_steps = int(saved["limited_steps"])
    stopper.load_state_dict(saved["stopper"])
    set_rng_state(saved["rng"], dev)


def _fingerprint(data) -> str:
    """A short digest of the graph a run trains on (sizes, edges, labels, the three masks), so that a saved partial
    run is continued only on the same graph and split."""
    digest = hashlib.sha1()
    for tensor in (data.edge_index, data.y, data.train_mask, data.val_mask, data.test_mask):
        digest.update(str(tuple(tensor.shape)).encode())
        digest.update(tensor.detach().to("cpu").contiguous().numpy().tobytes())
    digest.update(str(tuple(data.x.shape)).encode())
    return digest.hexdigest()[:16]


def _read_partial(path: Path, identity: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """The saved state of the unfinished run in ``path`` when it has the settings ``identity``; ``None`` (with a line
    on stderr saying why) when there is none, it is unreadable, or it was saved with other settings."""
    if not path.is_file():
        return None
    try:
        saved = load_checkpoint(path)
    except CheckpointError as exc:
        print(f"{exc}; the run starts again", file=sys.stderr)
        return None
    if saved.get("identity") != identity:
        old = saved.get("identity") or {}
        differ = [k for k in identity if old.get(k) != identity[k]] or ["(unknown)"]
        print(
            f"{path}: an unfinished run with other settings ({', '.join(differ)}); the run starts again",
            file=sys.stderr,
        )
        return None
    print(f"{path}: continuing the unfinished run after epoch {saved['epoch']}", file=sys.stderr)
    return saved
