r"""The graph-to-text trainer shared by AGENDA and WebNLG: GraphWriter with plain or repulsive encoder heads.

:func:`train` trains (or resumes) a :class:`~graph_rma.models.GraphWriter` on
:class:`~graph_rma.data.graph_text.GraphTextSplits` into a run folder:

* ``checkpoint.pt``: everything needed to resume (weights, optimizer, sampler and RNG states, the position in the
  epoch), written atomically every ``save_every`` steps, at the end of every epoch and, in one process, when Ctrl-C
  or SIGTERM comes during an epoch (held until the training step it came in is whole, or, if it came in the
  epoch's dev phase, until the epoch's save; then ``KeyboardInterrupt``, :func:`graph_rma.engine.deferred_interrupt`);
  calling :func:`train` again with the same folder resumes from it and ends with the same weights as an
  uninterrupted run with the same seed;
* ``best.pt``: the weights with the lowest dev loss (token-level teacher-forced NLL, :func:`dev_loss`), or with
  ``config["keep"] == "dev_bleu"`` the highest dev BLEU (the dev split decoded after every epoch by the task's
  scorer, ``dev_bleu``);
* ``config.json`` and ``train.json`` (the run summary);
* ``curves.png``: the losses (and dev BLEU) per epoch, redrawn after every epoch (:mod:`graph_rma.tasks.curves`;
  needs the ``plots`` extra, else not written).

The learning rate is constant unless the configuration sets the optional key ``lr_schedule`` (absent or ``None``:
off, so configurations without it train as before). ``{"kind": "plateau", "factor": f, "patience": p, "min_lr": m}``
multiplies the learning rate by ``f`` (down to ``m``) after ``p + 1`` epochs in a row without a lower dev loss than
the best so far (:class:`torch.optim.lr_scheduler.ReduceLROnPlateau` with threshold 0, stepped on the dev loss at
the end of every epoch, the decision of OpenNMT's ``decay`` on validation perplexity). Its state is in
``checkpoint.pt``, so a resumed run decays at the same epochs as an uninterrupted one.

The variant (plain, regularised, SGLD, SVGD, SPOS, DropAttention) is applied by :func:`graph_rma.apply_variant` and
nothing else: the model is built without DropAttention, then ``apply_variant`` installs it in every encoder layer,
attaches the sampler to the optimizer (it runs after gradient clipping, right before ``optimizer.step()``) and gives
the regularisation term. ``reg`` with ``target=outputs`` is not supported (the encoder does not return per-head
outputs); :func:`check_variant` says so before any data is read.

Multi-process training (``torchrun``, after ``torch.distributed`` is initialised): ``config["batch_size"]`` stays the
*global* batch; each rank takes its shard of every batch, sums its token NLL and divides by the global batch's
token count (times ``1/N``), so DDP's all-reduced gradient is the single-process gradient and the sampler runs on
identical gradients with identical noise on every rank. Rank 0 alone writes files and shows progress; the
checkpoint keeps every rank's RNG state (:func:`graph_rma.engine.rng_state`), so resuming with the same ``N`` is
exact. Training ends by checking that the replicas are bitwise equal (``replica_sha1`` in ``train.json``).

The model of a configuration and its use outside training (``build_model``, ``load_model``, which restores
``best.pt``, ``dev_loss``, ``decode_records``: batched greedy or beam search, ``head_diversity``) live in
:mod:`graph_rma.tasks.graph_to_text_model`.
"""

from __future__ import annotations

import json
import math
import sys
import time
import warnings
from contextlib import nullcontext
from pathlib import Path
from typing import Any, Callable, Dict, Mapping, Optional, Union

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from tqdm.auto import tqdm

from .._errors import GraphRMAError
from ..data.graph_text import (
    EncodedRecord,
    GraphTextEncoder,
    GraphTextSplits,
    Vocab,
    build_vocab,
    collate,
)
from ..engine import (
    check_resume,
    deferred_interrupt,
    interrupt_requested,
    load_checkpoint,
    rng_state,
    save_checkpoint,
    seed_everything,
    set_rng_state,
    slug,
    write_json,
)
from ..engine.distributed import all_reduce_sum, barrier, gather_objects, rank_and_world, replica_fingerprints, shard
from ..engine.optional import MissingExtraError
from ..models.graphwriter import GraphWriter
from ..variants import Variant, apply_variant, parse_variant
from .curves import plot_curves
from .generator_config import (
    DECODING_FIELDS,
    LR_SCHEDULES,
    OPTIONAL_FIELDS,
    REQUIRED_FIELDS,
    GeneratorConfig,
    check_lr_schedule,
    saved_config,
)
from .graph_to_text_model import (
    TASK,
    DevScorer,
    EncoderFactory,
    PathLike,
    _batches,
    _device,
    _to,
    build_model,
    dev_loss,
)

__all__ = [
    "CONFIG_KEYS",
    "LR_SCHEDULES",
    "OPTIONAL_CONFIG_KEYS",
    "RESUMABLE_CHANGES",
    "build_lr_scheduler",
    "build_optimizer",
    "check_config",
    "check_variant",
    "run_folder",
    "train",
]

#: The keys every training configuration gives (:data:`graph_rma.tasks.generator_config.REQUIRED_FIELDS`).
CONFIG_KEYS = REQUIRED_FIELDS
#: Settings that may change when a run is resumed: more (or fewer, down to the epochs done) epochs, and the decoding
#: options (used only by generate/evaluate). Anything else differing from the checkpoint is refused.
RESUMABLE_CHANGES = ("epochs", *DECODING_FIELDS)
#: Keys a configuration may leave out (absent = their default, off): the learning-rate schedule.
OPTIONAL_CONFIG_KEYS = OPTIONAL_FIELDS
_clock = time.perf_counter  # an epoch's seconds (one name, so a test can drive it)

VocabBuilder = Callable[..., Vocab]  # (records, min_freq=...) -> Vocab


def run_folder(out: PathLike, variant: Union[str, Variant]) -> Path:
    """``out/<variant>``: one folder per canonical variant spec (two different specs never share one)."""
    return Path(out) / slug(parse_variant(variant).spec)


def check_variant(variant: Union[str, Variant]) -> Variant:
    """The parsed variant; a ``GraphRMAError`` for what the trainer cannot do (``reg`` with ``target=outputs``)."""
    v = parse_variant(variant)
    if v.reg is not None and v.reg_target == "outputs":
        raise GraphRMAError(
            "variant: reg target=outputs is not supported by the graph-to-text trainer "
            "(use target=attention or target=parameters)"
        )
    return v


def check_config(config: Mapping[str, Any]) -> Dict[str, Any]:
    """``config`` checked by :class:`~graph_rma.tasks.generator_config.GeneratorConfig` (a ``GraphRMAError`` naming the
    first setting that cannot train: a count below 1, a missing or unknown key) and returned as the trainer's mapping
    (:meth:`~graph_rma.tasks.generator_config.GeneratorConfig.to_dict`)."""
    return GeneratorConfig.from_mapping(config).to_dict()


_check_lr_schedule = check_lr_schedule


def build_lr_scheduler(
    config: Dict[str, Any], optimizer: torch.optim.Optimizer
) -> Optional[torch.optim.lr_scheduler.ReduceLROnPlateau]:
    """The scheduler of ``config["lr_schedule"]`` (see the module docstring), ``None`` when it is absent or off;
    step it with the epoch's dev loss."""
    spec = config.get("lr_schedule")
    if spec is None:
        return None
    _check_lr_schedule(spec)
    return torch.optim.lr_scheduler.ReduceLROnPlateau(
        optimizer, mode="min", factor=spec["factor"], patience=spec["patience"], threshold=0.0, min_lr=spec["min_lr"]
    )


def build_optimizer(config: Dict[str, Any], model: nn.Module) -> torch.optim.Optimizer:
    """SGD with momentum (GraphWriter's) or Adam, as ``config["optimizer"]`` says."""
    if config["optimizer"] == "sgd":
        return torch.optim.SGD(model.parameters(), lr=config["lr"], momentum=config["momentum"])
    if config["optimizer"] == "adam":
        return torch.optim.Adam(model.parameters(), lr=config["lr"])
    raise GraphRMAError(f"optimizer: expected sgd or adam, got {config['optimizer']!r}")


class _LossForward(nn.Module):
    """What DDP wraps: its ``forward`` is GraphWriter's summed token NLL (DDP synchronises through ``forward``)."""

    def __init__(self, model: GraphWriter, label_smoothing: float = 0.0) -> None:
        super().__init__()
        self.model, self.label_smoothing = model, label_smoothing

    def forward(self, batch: Dict[str, Any], return_attention: bool = False):
        return self.model.loss(
            batch, return_attention=return_attention, reduction="sum", label_smoothing=self.label_smoothing
        )


def _target_tokens(item: EncodedRecord) -> int:
    return int((torch.as_tensor(item.target_out) != 0).sum())


def _train_loss(
    model: GraphWriter,
    ddp: Optional[DistributedDataParallel],
    batch: Dict[str, Any],
    scale: float,
    return_attention: bool = False,
    label_smoothing: float = 0.0,
):
    """``model.loss`` in one process; under DDP the wrapped summed loss times ``scale`` (its wrapper holds the
    label smoothing)."""
    if ddp is None:
        return model.loss(batch, return_attention=return_attention, label_smoothing=label_smoothing)
    out = ddp(batch, return_attention=return_attention)
    return (out[0] * scale, out[1]) if return_attention else out * scale


def _draw_curves(out: Path, history, keep: str) -> None:
    """``out/curves.png`` (:mod:`graph_rma.tasks.curves`); nothing without matplotlib (``train.json`` and the
    checkpoint hold the same numbers)."""
    try:
        plot_curves(history, out / "curves.png", keep=keep, name=out.name)
    except MissingExtraError:
        pass


def train(
    config: Dict[str, Any],
    out: PathLike,
    splits: GraphTextSplits,
    variant: Union[str, Variant] = "ma",
    seed: int = 0,
    max_train: Optional[int] = None,
    max_dev: Optional[int] = None,
    save_every: int = 0,
    stop_after: Optional[int] = None,
    progress: bool = True,
    device: Optional[str] = None,
    make_vocab: VocabBuilder = build_vocab,
    make_encoder: EncoderFactory = GraphTextEncoder,
    dev_bleu: Optional[DevScorer] = None,
    dataset: Optional[str] = None,
) -> Dict[str, Any]:
    """Train (or resume) GraphWriter on ``splits`` into ``out``; returns the run summary (also ``train.json``).

    Args:
        config: the training configuration (:data:`CONFIG_KEYS`; a preset of a dataset task).
        out: run folder; an existing ``checkpoint.pt`` there is resumed when the variant, seed, data and every
            setting but :data:`RESUMABLE_CHANGES` match it (else :class:`~graph_rma.engine.ResumeMismatchError`
            listing the differences); a changed ``epochs`` or decoding option is applied and reported on stderr.
        splits: the records; ``max_train`` / ``max_dev`` keep only the first records of train / dev.
        variant: spec string or :class:`~graph_rma.variants.Variant`, applied by :func:`graph_rma.apply_variant`.
        seed: seeds the weights, the batch order, dropout and the sampler's noise.
        save_every: also checkpoint every this many optimizer steps (``0``: at the end of each epoch only).
        stop_after: end after this many optimizer steps in this call, with a checkpoint (to simulate a kill);
            returns ``{"stopped": True, "step": ...}``.
        device: ``"cpu"`` or ``"cuda[:k]"`` (default: CUDA when available).
        make_vocab: ``(records, min_freq=...) -> Vocab`` for a fresh run (the dataset's type tags).
        make_encoder: ``(vocab, relation_names, max_target_len=None) -> encoder`` (e.g. WebNLG's relation texts).
        dev_bleu: ``(model, vocab) -> BLEU`` of the dev split decoded with the run's decoding settings (the task's
            scorer); needed by ``config["keep"] == "dev_bleu"``, which keeps in ``best.pt`` the epoch it scores
            highest (ties: the earlier), and records it in each epoch's history as ``dev_bleu``.
        dataset: the dataset's name (``"agenda"``, ``"webnlg"``), recorded with ``task`` (:data:`TASK`) in
            ``config.json``, ``checkpoint.pt`` and ``best.pt``; a task's ``generate`` / ``evaluate`` check it
            (:func:`check_run`) before decoding or writing.

    Each epoch's history entry records ``seconds``: its training and dev-loss time, carried across a stop and
    resume (the checkpoint holds the time trained so far; an epoch resumed from an older release's checkpoint counts
    only the time since the resume and says so with ``seconds_partial``), and ``dev_bleu_seconds``, the dev decode.
    """
    v = check_variant(variant)
    config = check_config(config)
    by_bleu = config.get("keep", "dev_loss") == "dev_bleu"
    if by_bleu and dev_bleu is None:
        raise GraphRMAError(
            "keep: dev_bleu needs the task's dev scorer (train through graph_rma.tasks.webnlg or .agenda)"
        )
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise GraphRMAError(f"out: {out} is a file, not a folder")
    rank, world = rank_and_world()
    main_rank = rank == 0
    if main_rank:
        out.mkdir(parents=True, exist_ok=True)
    progress = progress and main_rank
    train_recs = splits.train[:max_train] if max_train else splits.train
    dev_recs = splits.dev[:max_dev] if max_dev else splits.dev
    ckpt_path = out / "checkpoint.pt"
    ckpt = load_checkpoint(ckpt_path) if ckpt_path.exists() else None
    if ckpt is not None:
        # the same run, or refuse (engine.check_resume); more epochs and decoding options are applied
        saved = saved_config(ckpt["config"])  # saved by any version: a setting it lacks takes its default
        data = {"train_records": len(train_recs), "dev_records": len(dev_recs)}
        data = {k: n for k, n in data.items() if k in ckpt}  # checkpoints of older versions did not keep them
        changes = check_resume(
            {**saved, "variant": ckpt["variant"], "seed": ckpt["seed"], **{k: ckpt[k] for k in data}},
            {**config, "variant": v.spec, "seed": seed, **data},
            may_change=RESUMABLE_CHANGES,
            where=str(ckpt_path),
        )
        if config["epochs"] < ckpt["epoch"]:
            raise GraphRMAError(
                f"epochs: {ckpt_path} has already trained {ckpt['epoch']} epochs, more than "
                f"{config['epochs']}; use another output folder for a shorter run"
            )
        if main_rank:
            for line in changes:
                print(f"resume {out}: {line} (applied)", file=sys.stderr, flush=True)
            if not changes and ckpt["epoch"] >= config["epochs"] and ckpt["batch"] == 0:
                print(f"resume {out}: already trained {ckpt['epoch']} epochs; nothing to do", file=sys.stderr)
        config = {**saved, **{k: config[k] for k in RESUMABLE_CHANGES if k in config}}
        vocab = Vocab.from_list(ckpt["vocab"])
    else:
        seed_everything(seed)
        vocab = make_vocab(train_recs, min_freq=config["min_freq"])
    train_items = make_encoder(vocab, splits.relation_names, config["max_target_len"]).encode_all(train_recs)
    dev_items = make_encoder(vocab, splits.relation_names).encode_all(dev_recs)
    dev = _device(device)
    model = build_model(config, len(vocab), len(splits.relation_names)).to(dev)
    if world > 1 and ckpt is None:
        torch.manual_seed(seed * 1_000_003 + rank)  # same initial weights, different dropout on each rank
    optimizer = build_optimizer(config, model)
    scheduler = build_lr_scheduler(config, optimizer)
    setup = apply_variant(v, model, optimizer, seed=seed)  # DropAttention, sampler, penalty: nothing else
    smoothing = config.get("label_smoothing", 0.0)  # the training loss only: dev loss stays the plain NLL
    ddp = None
    if world > 1:
        ddp = DistributedDataParallel(
            _LossForward(model, smoothing), device_ids=[dev.index] if dev.type == "cuda" else None
        )
    state: Dict[str, Any] = {
        "epoch": 0,
        "batch": 0,
        "step": 0,
        "best_dev": math.inf,
        "best_bleu": -math.inf,
        "history": [],
    }
    if ckpt is not None:
        model.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
        if scheduler is not None:
            scheduler.load_state_dict(ckpt["lr_scheduler"])
        setup.load_state_dict(ckpt.get("sampler") or {})
        saved_world = ckpt.get("world_size", 1)
        if saved_world == world:
            set_rng_state(ckpt["rng_ranks"][rank] if world > 1 else ckpt["rng"], dev)
        else:
            warnings.warn(
                f"resuming a {saved_world}-process run with {world} processes: weights, optimizer and "
                "sampler states are restored, but dropout draws differ from an uninterrupted run"
            )
            set_rng_state(ckpt["rng"], dev)
            if world > 1:
                torch.manual_seed(seed * 1_000_003 + rank + 7919 * ckpt["step"])
        state = {k: ckpt.get(k, state[k]) for k in state}  # best_bleu: absent from older checkpoints
    if main_rank:
        write_json(
            out / "config.json",
            {
                "task": TASK,
                "dataset": dataset,
                "config": config,
                "variant": v.spec,
                "seed": seed,
                "protocol": splits.protocol,
                "data": splits.description,
                "vocab_size": len(vocab),
                "train_records": len(train_recs),
                "dev_records": len(dev_recs),
                "world_size": world,
            },
        )

    def save(epoch: int, batch: int, run_loss: float = 0.0, run_n: int = 0, seconds: float = 0.0) -> None:
        # a collective: every rank calls save() at the same steps
        ranks = gather_objects({"rng": rng_state(dev), "run_loss": run_loss})
        if main_rank:
            rngs = [r["rng"] for r in ranks]
            save_checkpoint(
                ckpt_path,
                {
                    "run_loss_ranks": [r["run_loss"] for r in ranks],
                    "run_n": run_n,  # the epoch's running train loss
                    "epoch_seconds": seconds,  # the epoch's training time so far (a resume carries it on)
                    "model": model.state_dict(),
                    "optimizer": optimizer.state_dict(),
                    "sampler": setup.state_dict(),
                    **({"lr_scheduler": scheduler.state_dict()} if scheduler is not None else {}),
                    "rng": rngs[0],
                    "rng_ranks": rngs,
                    "world_size": world,
                    "task": TASK,
                    "dataset": dataset,
                    "config": config,
                    "vocab": vocab.to_list(),
                    "relations": list(splits.relation_names),
                    "variant": v.spec,
                    "seed": seed,
                    "epoch": epoch,
                    "batch": batch,
                    "step": state["step"],
                    "train_records": len(train_recs),
                    "dev_records": len(dev_recs),
                    "best_dev": state["best_dev"],
                    "best_bleu": state["best_bleu"],
                    "history": state["history"],
                },
            )
        barrier()  # no rank reads or moves on before the file is complete

    steps_this_call = 0
    model.train()
    # Ctrl-C or SIGTERM is held over the whole epoch (steps, dev phase, saves): the run stops after the step it
    # came in, saved there, or after the epoch's save; under DDP the signals act at once
    with deferred_interrupt() if world == 1 else nullcontext():
        for epoch in range(state["epoch"], config["epochs"]):
            batches = _batches(
                len(train_items), config["batch_size"], torch.Generator().manual_seed(seed * 1009 + epoch)
            )
            start = state["batch"] if epoch == state["epoch"] else 0
            run_loss, run_n, done_seconds, partial = 0.0, 0, 0.0, False
            if epoch == state["epoch"] and ckpt is not None and start > 0:
                if ckpt.get("world_size", 1) == world:
                    run_loss, run_n = ckpt.get("run_loss_ranks", [0.0] * world)[rank], ckpt.get("run_n", 0)
                # the time trained before the stop; a checkpoint of an older release lacks it: the epoch's seconds are
                # then only those since the resume, and its entry says so
                partial = "epoch_seconds" not in ckpt
                done_seconds = float(ckpt.get("epoch_seconds", 0.0))
            t0 = _clock() - done_seconds
            bar = tqdm(
                range(start, len(batches)),
                desc=f"epoch {epoch + 1}/{config['epochs']}",
                disable=not progress,
                leave=False,
            )
            for b in bar:
                idx = batches[b]
                if world > 1 and len(idx) < world:
                    continue  # a last batch smaller than the number of processes (the same on every rank): skipped
                batch = _to(collate([train_items[i] for i in (shard(idx) if world > 1 else idx)]), dev)
                optimizer.zero_grad(set_to_none=True)
                # under DDP: summed NLL / (global tokens / world), so that DDP's mean of gradients is the global batch's
                scale = world / max(sum(_target_tokens(train_items[i]) for i in idx), 1) if ddp is not None else 1.0
                if setup.needs_attention:
                    loss, attention = _train_loss(model, ddp, batch, scale, True, smoothing)
                    reg = setup.penalty(model, attention=attention)
                else:
                    loss = _train_loss(model, ddp, batch, scale, label_smoothing=smoothing)
                    reg = setup.penalty(model)
                total = loss if reg is None else loss + reg
                total.backward()
                if config["clip"]:
                    nn.utils.clip_grad_norm_(model.parameters(), config["clip"])
                optimizer.step()
                state["step"] += 1
                steps_this_call += 1
                run_loss += float(loss.detach())
                run_n += 1
                bar.set_postfix(loss=f"{run_loss / run_n:.3f}")
                if save_every and state["step"] % save_every == 0:
                    save(epoch, b + 1, run_loss, run_n, _clock() - t0)
                if stop_after is not None and steps_this_call >= stop_after:
                    save(epoch, b + 1, run_loss, run_n, _clock() - t0)
                    return {"stopped": True, "step": state["step"]}
                if interrupt_requested():  # Ctrl-C or SIGTERM, held until this step was whole: saved here, then stop
                    save(epoch, b + 1, run_loss, run_n, _clock() - t0)
                    raise KeyboardInterrupt
            dl = dev_loss(model, dev_items, config["batch_size"])
            if world > 1:  # each rank's loss is its part of the global mean, times world: average them
                run_loss = float(all_reduce_sum(torch.tensor(run_loss, dtype=torch.float64))) / world
            entry = {
                "epoch": epoch + 1,
                "train_loss": run_loss / max(run_n, 1),
                "dev_loss": dl,
                "dev_ppl": math.exp(min(dl, 50)),
                "seconds": round(_clock() - t0, 1),  # training and dev loss; dev decoding is dev_bleu_seconds
            }
            if partial:
                entry["seconds_partial"] = True
            if scheduler is not None:  # the rate this epoch trained with; the schedule may lower it for the next
                entry["lr"] = optimizer.param_groups[0]["lr"]
                scheduler.step(dl)
            if by_bleu and main_rank:  # rank 0 alone decodes (no dropout); only it writes best.pt
                model.eval()
                t1 = _clock()
                with torch.no_grad():
                    entry["dev_bleu"] = float(dev_bleu(model, vocab))
                entry["dev_bleu_seconds"] = round(_clock() - t1, 1)
                model.train()
            state["history"].append(entry)
            if main_rank:
                print(json.dumps(entry), file=sys.stderr, flush=True)
            improved = entry["dev_bleu"] > state["best_bleu"] if by_bleu and main_rank else dl < state["best_dev"]
            state["best_dev"] = min(state["best_dev"], dl)
            if by_bleu and main_rank:
                state["best_bleu"] = max(state["best_bleu"], entry["dev_bleu"])
            if improved and main_rank:
                save_checkpoint(
                    out / "best.pt",
                    {
                        "task": TASK,
                        "dataset": dataset,
                        "model": model.state_dict(),
                        "config": config,
                        "vocab": vocab.to_list(),
                        "relations": list(splits.relation_names),
                        "variant": v.spec,
                        "seed": seed,
                        "epoch": epoch + 1,
                        "dev_loss": dl,
                        **({"dev_bleu": entry["dev_bleu"]} if by_bleu else {}),
                    },
                )
            state["epoch"], state["batch"] = epoch + 1, 0
            save(epoch + 1, 0)
            if main_rank:
                _draw_curves(out, state["history"], config.get("keep", "dev_loss"))
            if interrupt_requested():  # Ctrl-C or SIGTERM during the epoch's dev phase: stop after its save
                raise KeyboardInterrupt
    summary = {
        "variant": v.spec,
        "seed": seed,
        "best_dev_loss": state["best_dev"],
        **({"best_dev_bleu": state["best_bleu"]} if by_bleu else {}),
        "history": state["history"],
        "steps": state["step"],
        "data": splits.description,
    }
    if world > 1:
        sha = replica_fingerprints(model)
        if len(set(sha)) != 1:
            raise RuntimeError(f"replicas diverged: parameter SHA-1 per rank {sha}")
        summary.update(world_size=world, replica_sha1=sha[0])
    if main_rank:
        write_json(out / "train.json", summary)
    return summary
