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
from dataclasses import dataclass
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
    variant = parse_variant(spec)
    for name in ("train_mask", "val_mask", "test_mask"):
        if not bool(getattr(data, name).any()):
            raise GraphRMAError(f"data: {name} selects no node (a split needs training, validation and test nodes)")
    seed_everything(seed)
    dev = resolve_device(device) if device is not None else data.x.device
    try:
        run = _Run(data, variant, spec, seed, protocol, model, model_kwargs, metric, early_stopping, dev)
        return _train(run, progress, None if partial is None else Path(partial), save_every_s)
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


@dataclass
class _Run:
    """One run's settings, fixed before it starts: the graph, the variant, the seed, the protocol and what it
    resolved to for this graph (the model and its arguments, the metric, the early-stopping rule), the device."""

    data: Any
    variant: Any
    spec: str
    seed: int
    protocol: Protocol
    model: str
    model_kwargs: Dict[str, Any]
    metric: str
    rule: str
    dev: torch.device

    def identity(self) -> Dict[str, Any]:
        """What a saved unfinished run must match to be continued."""
        p = self.protocol
        return {
            "variant": self.spec,
            "seed": self.seed,
            "model": self.model,
            "model_kwargs": self.model_kwargs,
            "epochs": p.epochs,
            "patience": p.patience,
            "lr": p.lr,
            "weight_decay": p.weight_decay,
            "early_stopping": self.rule,
            "metric": self.metric,
            "data": _fingerprint(self.data),
        }


@dataclass
class _State:
    """A run's live state: the model, its optimizer, the variant's setup (sampler, penalty), the early stopping,
    the kept epoch's scores and weights (on the CPU)."""

    net: nn.Module
    optimizer: torch.optim.Optimizer
    setup: Any
    stopper: EarlyStopping
    best: Dict[str, Any]
    best_state: Dict[str, torch.Tensor]

    def cpu_state(self) -> Dict[str, torch.Tensor]:
        return {k: v.detach().to("cpu", copy=True) for k, v in self.net.state_dict().items()}


def _start(run: _Run) -> _State:
    """The model on the run's device, Adam, the variant applied, the early stopping: epoch 0's state."""
    net = build_model(run.model, run.model_kwargs).to(run.dev)
    run.data = run.data.to(run.dev)
    p = run.protocol
    optimizer = torch.optim.Adam(net.parameters(), lr=p.lr, weight_decay=p.weight_decay)
    with warnings.catch_warnings():  # the 1-head output layer is not a particle group; that is expected
        warnings.filterwarnings("ignore", message=".*fewer than 2; not a particle group")
        setup = apply_variant(run.variant, net, optimizer, seed=run.seed)
    best = {"val_metric": -1.0, "val_loss": math.inf, "test_metric": 0.0, "epoch": 0}
    state = _State(net, optimizer, setup, EarlyStopping(run.rule, p.patience), best, {})
    state.best_state = state.cpu_state()
    return state


def _step(run: _Run, st: _State, epoch: int) -> None:
    """One full-batch training step (with the variant's penalty); a non-finite loss is :class:`TrainingDiverged`."""
    d = run.data
    st.net.train()
    st.optimizer.zero_grad()
    if run.variant.reg is not None:
        logits, attention, head_out = st.net.forward_with_attention(d.x, d.edge_index)
        loss = _loss(logits[d.train_mask], d.y[d.train_mask])
        loss = loss + st.setup.penalty(st.net, attention=attention[:1], head_outputs=[head_out])
    else:
        logits = st.net(d.x, d.edge_index)
        loss = _loss(logits[d.train_mask], d.y[d.train_mask])
    if not torch.isfinite(loss):
        raise TrainingDiverged(
            f"training diverged at epoch {epoch} (seed {run.seed}, {run.spec}): the loss is {float(loss)}; lower "
            f"the learning rate ({run.protocol.lr}) or check the inputs"
        )
    loss.backward()
    st.optimizer.step()


def _evaluate(run: _Run, st: _State, epoch: int) -> Tuple[float, bool]:
    """The validation metric and loss after the step; keeps the epoch (its test metric, its weights) when the
    early-stopping rule says so. Returns ``(validation metric, stop)``."""
    d = run.data
    st.net.eval()
    with torch.no_grad():
        logits = st.net(d.x, d.edge_index)
        val_loss = float(_loss(logits[d.val_mask], d.y[d.val_mask]))
        val_metric = score(logits[d.val_mask], d.y[d.val_mask], run.metric)
    keep, stop = st.stopper.update(val_metric, val_loss)
    if keep:
        test_metric = score(logits[d.test_mask], d.y[d.test_mask], run.metric)
        st.best = {"val_metric": val_metric, "val_loss": val_loss, "test_metric": test_metric, "epoch": epoch}
        st.best_state = st.cpu_state()
    return val_metric, stop


def _checkpoint(partial: Path, st: _State, identity: Dict[str, Any], epoch: int, seconds: float, dev) -> None:
    """Save the unfinished run after ``epoch`` (weights, kept epoch, optimizer, sampler, counters, RNG states)."""
    state = _partial_state(st.net, st.optimizer, st.setup, st.stopper, dev)
    state.update(identity=identity, epoch=epoch, seconds=seconds, best=st.best)
    save_checkpoint(partial, {**state, "model": st.cpu_state(), "best_state": st.best_state})


def _progress(progress: bool, epochs: int, first: int):
    if not progress:
        return None
    from tqdm import tqdm

    return tqdm(
        total=epochs,
        initial=first - 1,
        desc="epochs",
        unit="ep",
        file=sys.stderr,
        leave=False,
        dynamic_ncols=True,
        mininterval=1.0,
    )


def _show(bar, val_metric: float, st: _State, epoch: int, stop: bool, first: int, start: float) -> None:
    if bar is None:
        return
    bar.update()
    if epoch % 10 == 0 or stop:
        seconds = (time.perf_counter() - start) / (epoch - first + 1)
        bar.set_postfix_str(f"val {100 * val_metric:.1f} best {100 * st.best['val_metric']:.1f} ({seconds:.3f} s/ep)")


def _train(run: _Run, progress: bool, partial: Optional[Path], save_every_s: float):
    """:func:`train_run`'s body, once the arguments are checked and the generators seeded: a loop over epochs, each
    a training step, an evaluation and (when one is due, or Ctrl-C was held) a checkpoint of the unfinished run."""
    st, identity, epochs = _start(run), run.identity(), run.protocol.epochs
    first, done_seconds = 1, 0.0
    saved = _read_partial(partial, identity) if partial is not None else None
    if saved is not None:
        _restore(saved, st.net, st.optimizer, st.setup, st.stopper, run.dev)
        st.best, st.best_state = dict(saved["best"]), saved["best_state"]
        first, done_seconds = int(saved["epoch"]) + 1, float(saved["seconds"])
    bar = _progress(progress, epochs, first)
    start = last_save = time.perf_counter()
    epoch = first - 1
    try:
        for epoch in range(first, epochs + 1):
            _step(run, st, epoch)
            val_metric, stop = _evaluate(run, st, epoch)
            _show(bar, val_metric, st, epoch, stop, first, start)
            if stop:
                break
            now = time.perf_counter()
            asked = interrupt_requested() and epoch < epochs  # Ctrl-C held by the caller: stop here, saved
            if partial is not None and epoch < epochs and (asked or now - last_save >= save_every_s):
                _checkpoint(partial, st, identity, epoch, done_seconds + now - start, run.dev)
                last_save = time.perf_counter()
            if asked:
                raise KeyboardInterrupt
    finally:
        if bar is not None:
            bar.close()
    return _finish(run, st, epoch, done_seconds + time.perf_counter() - start, partial)


def _finish(run: _Run, st: _State, epoch: int, seconds: float, partial: Optional[Path]):
    """The kept epoch's weights back in the model, its head distance, the run's metrics; the partial file removed."""
    d, net = run.data, st.net
    net.load_state_dict(st.best_state)
    net.eval()
    with torch.no_grad():
        heads = net.head_outputs(d.x, d.edge_index)[d.test_mask]
        dist = head_distance(heads) if heads.size(-2) > 1 else None  # one head: no distance between heads
    metrics = {
        "test_metric": st.best["test_metric"],
        "val_metric": st.best["val_metric"],
        "val_loss": st.best["val_loss"],
        "best_epoch": st.best["epoch"],
        "epochs": epoch,
        "sec_per_epoch": seconds / max(epoch, 1),
        "dist": dist,
        "metric": run.metric,
        "device": run.dev.type,
        "limited_steps": int(getattr(st.setup.sampler, "limited_steps", 0)),  # steps the repulsion limit capped
    }
    if partial is not None:
        partial.unlink(missing_ok=True)  # the run is finished: nothing left to continue
    return metrics, st.best_state, net


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
