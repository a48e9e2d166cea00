r"""``graph-rma agenda train|generate|evaluate``: GraphWriter on AGENDA with plain or repulsive encoder heads.

::

    graph-rma agenda train    --out runs/agenda/ma   --variant ma             # CPU default (< 15 min on 2 cores)
    graph-rma agenda train    --out runs/agenda/svgd --variant svgd:alpha=0.1
    graph-rma agenda generate --out runs/agenda/ma   --split test --beam 4    # hyp/gold files side by side
    graph-rma agenda evaluate --out runs/agenda/ma   --split test             # generate if needed, then score
    graph-rma agenda heads    --out runs/agenda/svgd                          # how alike the encoder heads are
    graph-rma agenda train    --preset full --out runs/agenda/full            # GraphWriter's size; for a GPU

Training writes ``checkpoint.pt`` (everything needed to resume: weights, optimizer, sampler and RNG states, the
position in the epoch) atomically every ``--save-every`` steps and at the end of every epoch, and ``best.pt``
(weights with the lowest dev loss). Running ``train`` again with the same ``--out`` resumes from ``checkpoint.pt``
and ends with the same weights as an uninterrupted run with the same seed.

Multi-process training: ``torchrun --nproc_per_node N -m graph_rma.cli agenda train ...`` (gloo on CPU, nccl on GPU,
one GPU per process). ``--batch-size`` stays the *global* batch: each rank takes its shard of every batch, sums its
token NLL and divides by the global batch's token count (times ``1/N``), so DDP's all-reduced gradient is the
single-process gradient; the sampler then runs on identical gradients with identical noise on every rank. Rank 0
alone writes files and shows progress; the checkpoint keeps every rank's RNG state, so resuming with the same ``N``
is exact. Training ends by checking that the replicas are bitwise equal (``replica_sha1`` in ``train.json``).
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from tqdm.auto import tqdm

from ..data.agenda import AgendaEncoder, AgendaRecord, build_vocab, collate, load_agenda
from ..data.graph_text import Vocab
from ..engine.distributed import (all_reduce_sum, barrier, cleanup, gather_objects, init_from_env, rank_and_world,
                           replica_fingerprints, shard)
from ..metrics import evaluate_generation
from ..models.graphwriter import GraphWriter
from ..regularizers import disagreement, parameter_disagreement
from ..engine import (atomic_write_text, load_checkpoint, rng_state, save_checkpoint, seed_everything,
                        set_rng_state, write_json)
from ..variants import make_drop_attention, make_sampler, parse_variant, regularization_loss

PRESETS: Dict[str, Dict[str, Any]] = {
    # small enough to train and evaluate on 2 CPU cores in under 15 minutes (offline protocol)
    "cpu": dict(hidden=128, layers=2, heads=4, dropout=0.1, attention_dropout=0.1, decoder_heads=4, epochs=8,
                batch_size=24, optimizer="adam", lr=2e-3, momentum=0.9, clip=1.0, min_freq=3,
                max_target_len=120, beam=2, max_len=150, length_penalty=1.0),
    # GraphWriter's configuration (pargs.py / train.py of rikdz/GraphWriter): hidden 500, 6 blocks, 4 heads,
    # SGD lr 0.1 momentum 0.9, gradient clipping 1, batch 32, 20 epochs, vocabulary cut at 5 occurrences
    "full": dict(hidden=500, layers=6, heads=4, dropout=0.1, attention_dropout=0.1, decoder_heads=4, epochs=20,
                 batch_size=32, optimizer="sgd", lr=0.1, momentum=0.9, clip=1.0, min_freq=5,
                 max_target_len=None, beam=4, max_len=200, length_penalty=1.0),
}


def _evaluate_generation(hypotheses: List[str], references: List[str], entities: List[List[str]],
                         meteor: str = "auto") -> Dict[str, Any]:
    """Score relexicalised outputs (already lower-cased and tokenised, as GraphWriter scored them)."""
    return evaluate_generation(hypotheses, references, entities=entities, meteor=meteor, tokenize="split")


# ----------------------------------------------------------------------------------------------------------------
def _device(device: Optional[str]) -> torch.device:
    return torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))


def _to(batch: Dict[str, Any], device: torch.device) -> Dict[str, Any]:
    return {k: v.to(device) for k, v in batch.items()}


def _rng_state(device: torch.device) -> Dict[str, Any]:
    state = rng_state()
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def _set_rng_state(state: Dict[str, Any], device: torch.device) -> None:
    set_rng_state(state)
    if device.type == "cuda" and "cuda" in state:
        torch.cuda.set_rng_state(state["cuda"], device)


def _batches(n: int, size: int, generator: Optional[torch.Generator] = None) -> List[List[int]]:
    order = torch.randperm(n, generator=generator).tolist() if generator is not None else list(range(n))
    return [order[i : i + size] for i in range(0, n, size)]


def build_model(config: Dict[str, Any], vocab_size: int, num_relations: int, variant: str) -> GraphWriter:
    return GraphWriter(vocab_size, num_relations, hidden=config["hidden"], num_layers=config["layers"],
                       heads=config["heads"], dropout=config["dropout"],
                       attention_dropout=config["attention_dropout"], decoder_heads=config["decoder_heads"],
                       drop_attention=make_drop_attention(variant))


def _optimizer(config: Dict[str, Any], model: nn.Module) -> torch.optim.Optimizer:
    if config["optimizer"] == "sgd":
        return torch.optim.SGD(model.parameters(), lr=config["lr"], momentum=config["momentum"])
    if config["optimizer"] == "adam":
        return torch.optim.Adam(model.parameters(), lr=config["lr"])
    raise ValueError(f"optimizer: expected sgd or adam, got {config['optimizer']!r}")


class _LossForward(nn.Module):
    """What DDP wraps: its ``forward`` is GraphWriter's summed token NLL (DDP synchronises through ``forward``)."""

    def __init__(self, model: GraphWriter) -> None:
        super().__init__()
        self.model = model

    def forward(self, batch: Dict[str, Any], return_attention: bool = False):
        return self.model.loss(batch, return_attention=return_attention, reduction="sum")


def _target_tokens(item) -> int:
    return int((torch.as_tensor(item.target_out) != 0).sum())


@torch.no_grad()
def dev_loss(model: GraphWriter, items, batch_size: int) -> float:
    """Token-level teacher-forced NLL on ``items`` (eval mode); under torch.distributed each rank scores its share
    of the batches and the sums are all-reduced."""
    was = model.training
    model.eval()
    total, tokens = 0.0, 0
    device = next(model.parameters()).device
    rank, world = rank_and_world()
    for b, idx in enumerate(_batches(len(items), batch_size)):
        if b % world != rank:
            continue
        batch = _to(collate([items[i] for i in idx]), device)
        n = int((batch["target_out"] != 0).sum())
        total += float(model.loss(batch)) * n
        tokens += n
    if world > 1:
        total, tokens = all_reduce_sum(torch.tensor([total, float(tokens)], dtype=torch.float64)).tolist()
    model.train(was)
    return total / max(tokens, 1)


def train(config: Dict[str, Any], out: Path, root=None, protocol: str = "auto", variant: str = "ma", seed: int = 0,
          max_train: Optional[int] = None, max_dev: Optional[int] = None, save_every: int = 0,
          stop_after: Optional[int] = None, progress: bool = True, splits=None,
          device: Optional[str] = None, make_vocab=build_vocab, make_encoder=AgendaEncoder) -> Dict[str, Any]:
    """Train (or resume) into ``out``; returns the run summary. ``stop_after`` ends the run after that many
    optimizer steps in this call (to simulate a kill in tests). ``make_vocab(records, min_freq)`` and
    ``make_encoder(vocab, relation_names, max_target_len=None)`` let another dataset (WebNLG) reuse this loop."""
    out = Path(out)
    rank, world = rank_and_world()
    main_rank = rank == 0
    if main_rank:
        out.mkdir(parents=True, exist_ok=True)
    progress = progress and main_rank
    v = parse_variant(variant)
    splits = splits or load_agenda(root, protocol)
    train_recs = splits.train[:max_train] if max_train else splits.train
    dev_recs = splits.dev[:max_dev] if max_dev else splits.dev
    ckpt_path = out / "checkpoint.pt"
    ckpt = load_checkpoint(ckpt_path) if ckpt_path.exists() else None
    if ckpt is not None:
        if ckpt["variant"] != v.spec or ckpt["seed"] != seed:
            raise ValueError(f"out: {ckpt_path} was written for variant {ckpt['variant']!r} seed {ckpt['seed']}, "
                             f"not {v.spec!r} seed {seed}; use another --out")
        config = dict(ckpt["config"])
        vocab = Vocab.from_list(ckpt["vocab"])
    else:
        seed_everything(seed)
        vocab = make_vocab(train_recs, min_freq=config["min_freq"])
    train_items = make_encoder(vocab, splits.relation_names, config["max_target_len"]).encode_all(train_recs)
    dev_items = make_encoder(vocab, splits.relation_names).encode_all(dev_recs)
    dev = _device(device)
    model = build_model(config, len(vocab), len(splits.relation_names), v.spec).to(dev)
    if world > 1 and ckpt is None:
        torch.manual_seed(seed * 1_000_003 + rank)  # same initial weights, different dropout on each rank
    ddp = None
    if world > 1:
        ddp = DistributedDataParallel(_LossForward(model), device_ids=[dev.index] if dev.type == "cuda" else None)
    optimizer = _optimizer(config, model)
    sampler = make_sampler(v, model, seed=seed)
    if sampler is not None:
        sampler.attach(optimizer)  # runs after clipping, right before optimizer.step()
    state: Dict[str, Any] = {"epoch": 0, "batch": 0, "step": 0, "best_dev": math.inf, "history": []}
    if ckpt is not None:
        model.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
        if sampler is not None and ckpt.get("sampler"):
            sampler.load_state_dict(ckpt["sampler"])
        saved_world = ckpt.get("world_size", 1)
        if saved_world == world:
            _set_rng_state(ckpt["rng_ranks"][rank] if world > 1 else ckpt["rng"], dev)
        else:
            warnings.warn(f"resuming a {saved_world}-process run with {world} processes: weights, optimizer and "
                          "sampler states are restored, but dropout draws differ from an uninterrupted run")
            _set_rng_state(ckpt["rng"], dev)
            if world > 1:
                torch.manual_seed(seed * 1_000_003 + rank + 7919 * ckpt["step"])
        state = {k: ckpt[k] for k in state}
    if main_rank:
        write_json(out / "config.json", {"config": config, "variant": v.spec, "seed": seed, "protocol": splits.protocol,
                                     "data": splits.description, "vocab_size": len(vocab),
                                     "train_records": len(train_recs), "dev_records": len(dev_recs),
                                     "world_size": world})

    def save(epoch: int, batch: int, run_loss: float = 0.0, run_n: int = 0) -> None:
        # a collective: every rank calls save() at the same steps
        ranks = gather_objects({"rng": _rng_state(dev), "run_loss": run_loss})
        if main_rank:
            _write_checkpoint(epoch, batch, [r["rng"] for r in ranks], [r["run_loss"] for r in ranks], run_n)
        barrier()  # no rank reads or moves on before the file is complete

    def _write_checkpoint(epoch: int, batch: int, rngs, run_losses, run_n: int) -> None:
        save_checkpoint(ckpt_path, {
            "run_loss_ranks": run_losses, "run_n": run_n,  # the epoch's running train loss so far
            "model": model.state_dict(), "optimizer": optimizer.state_dict(),
            "sampler": sampler.state_dict() if sampler is not None else {}, "rng": rngs[0],
            "rng_ranks": rngs, "world_size": world,
            "config": config, "vocab": vocab.to_list(), "relations": list(splits.relation_names),
            "variant": v.spec, "seed": seed, "epoch": epoch, "batch": batch, "step": state["step"],
            "best_dev": state["best_dev"], "history": state["history"],
        })

    need_attention = v.reg is not None and v.reg_target == "attention"
    if v.reg is not None and v.reg_target == "outputs":
        raise ValueError("variant: reg target=outputs is not supported by the AGENDA pipeline "
                         "(use target=attention or target=parameters)")
    steps_this_call = 0
    model.train()
    for epoch in range(state["epoch"], config["epochs"]):
        batches = _batches(len(train_items), config["batch_size"], torch.Generator().manual_seed(seed * 1009 + epoch))
        start = state["batch"] if epoch == state["epoch"] else 0
        t0, run_loss, run_n = time.time(), 0.0, 0
        if epoch == state["epoch"] and ckpt is not None and start > 0 and ckpt.get("world_size", 1) == world:
            run_loss, run_n = ckpt.get("run_loss_ranks", [0.0] * world)[rank], ckpt.get("run_n", 0)
        bar = tqdm(range(start, len(batches)), desc=f"epoch {epoch + 1}/{config['epochs']}", disable=not progress,
                   leave=False)
        for b in bar:
            idx = batches[b]
            if world > 1 and len(idx) < world:
                continue  # a last batch smaller than the number of processes (the same on every rank): skipped
            batch = _to(collate([train_items[i] for i in (shard(idx) if world > 1 else idx)]), dev)
            optimizer.zero_grad(set_to_none=True)
            # under DDP: summed NLL / (global tokens / world), so that DDP's mean of gradients is the global batch's
            scale = world / max(sum(_target_tokens(train_items[i]) for i in idx), 1) if ddp is not None else 1.0
            if need_attention:
                loss, attention = _train_loss(model, ddp, batch, scale, return_attention=True)
                reg = regularization_loss(v, model, attention=attention)
            else:
                loss = _train_loss(model, ddp, batch, scale)
                reg = regularization_loss(v, model) if v.reg else None
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
                save(epoch, b + 1, run_loss, run_n)
            if stop_after is not None and steps_this_call >= stop_after:
                save(epoch, b + 1, run_loss, run_n)
                return {"stopped": True, "step": state["step"]}
        dl = dev_loss(model, dev_items, config["batch_size"])
        if world > 1:  # each rank's loss is its part of the global mean, times world: average them
            run_loss = float(all_reduce_sum(torch.tensor(run_loss, dtype=torch.float64))) / world
        entry = {"epoch": epoch + 1, "train_loss": run_loss / max(run_n, 1), "dev_loss": dl,
                 "dev_ppl": math.exp(min(dl, 50)), "seconds": round(time.time() - t0, 1)}
        state["history"].append(entry)
        if main_rank:
            print(json.dumps(entry), file=sys.stderr, flush=True)
        improved = dl < state["best_dev"]
        if improved:
            state["best_dev"] = dl
        if improved and main_rank:
            save_checkpoint(out / "best.pt", {"model": model.state_dict(), "config": config,
                                              "vocab": vocab.to_list(), "relations": list(splits.relation_names),
                                              "variant": v.spec, "seed": seed, "epoch": epoch + 1, "dev_loss": dl})
        state["epoch"], state["batch"] = epoch + 1, 0
        save(epoch + 1, 0)
    summary = {"variant": v.spec, "seed": seed, "best_dev_loss": state["best_dev"], "history": state["history"],
               "steps": state["step"], "data": splits.description}
    if world > 1:
        sha = replica_fingerprints(model)
        if len(set(sha)) != 1:
            raise RuntimeError(f"replicas diverged: parameter SHA-1 per rank {sha}")
        summary.update(world_size=world, replica_sha1=sha[0])
    if main_rank:
        write_json(out / "train.json", summary)
    return summary


def _train_loss(model: GraphWriter, ddp: Optional[DistributedDataParallel], batch, scale: float,
                return_attention: bool = False):
    """``model.loss`` in one process; under DDP the wrapped summed NLL times ``scale``."""
    if ddp is None:
        return model.loss(batch, return_attention=return_attention)
    out = ddp(batch, return_attention=return_attention)
    return (out[0] * scale, out[1]) if return_attention else out * scale


def load_model(path: Path, device: Optional[str] = None):
    ck = load_checkpoint(path)
    vocab = Vocab.from_list(ck["vocab"])
    model = build_model(ck["config"], len(vocab), len(ck["relations"]), ck["variant"])
    model.load_state_dict(ck["model"])
    model.to(_device(device)).eval()
    return model, vocab, ck


def decode_settings(cfg: Dict[str, Any], beam: Optional[int], max_len: Optional[int],
                    length_penalty: Optional[float]):
    """Beam size, maximum length and length penalty: the arguments, else the training configuration's."""
    return beam or cfg["beam"], max_len or cfg["max_len"], cfg["length_penalty"] if length_penalty is None else length_penalty


def decode_records(model, enc, recs, beam: int, max_len: int, length_penalty: float, batch_size: int = 32,
                   progress: bool = True, desc: str = "decoding"):
    """Batched greedy (``beam == 1``) or beam-search decoding of ``recs``; returns (relexicalised, delexicalised)
    texts, one per record."""
    dev = next(model.parameters()).device
    items = enc.encode_all(recs)
    hyps: List[List[int]] = []
    for idx in tqdm(_batches(len(items), batch_size), desc=desc, disable=not progress, leave=False):
        batch = _to(collate([items[i] for i in idx]), dev)
        if beam == 1:
            hyps += model.greedy(batch, max_len=max_len)
        else:
            hyps += model.beam_search(batch, beam_size=beam, max_len=max_len, length_penalty=length_penalty)
    relex = [enc.decode(h, r) for h, r in zip(hyps, recs)]
    delex = [enc.decode(h, r, relex=False) for h, r in zip(hyps, recs)]
    return relex, delex


def generate(out: Path, split: str = "test", root=None, protocol: str = "auto", checkpoint: Optional[Path] = None,
             beam: Optional[int] = None, max_len: Optional[int] = None, length_penalty: Optional[float] = None,
             batch_size: int = 32, limit: Optional[int] = None, progress: bool = True, splits=None,
             device: Optional[str] = None) -> Dict[str, Path]:
    """Decode ``split`` with the best model and write ``hyp.<split>.txt``, ``gold.<split>.txt`` (relexicalised,
    line-aligned), ``hyp.<split>.delex.txt`` (with ``<type_i>`` placeholders) and ``side_by_side.<split>.tsv``."""
    out = Path(out)
    model, vocab, ck = load_model(checkpoint or out / "best.pt", device)
    beam, max_len, length_penalty = decode_settings(ck["config"], beam, max_len, length_penalty)
    splits = splits or load_agenda(root, protocol)
    recs: List[AgendaRecord] = splits.split(split)[:limit] if limit else splits.split(split)
    relex, delex = decode_records(model, AgendaEncoder(vocab, ck["relations"]), recs, beam, max_len, length_penalty,
                                  batch_size, progress, desc=f"decoding {split}")
    gold = [r.relexicalised() for r in recs]
    paths = {"hyp": out / f"hyp.{split}.txt", "gold": out / f"gold.{split}.txt",
             "delex": out / f"hyp.{split}.delex.txt", "side_by_side": out / f"side_by_side.{split}.tsv"}

    atomic_write_text(paths["hyp"], "\n".join(relex) + "\n")
    atomic_write_text(paths["gold"], "\n".join(gold) + "\n")
    atomic_write_text(paths["delex"], "\n".join(delex) + "\n")
    rows = ["title\thypothesis\treference"] + [f"{r.title}\t{h}\t{g}" for r, h, g in zip(recs, relex, gold)]
    atomic_write_text(paths["side_by_side"], "\n".join(rows) + "\n")
    write_json(out / f"decode.{split}.json", {"beam": beam, "max_len": max_len, "length_penalty": length_penalty,
                                              "records": len(recs), "checkpoint": str(checkpoint or out / "best.pt")})
    return paths


def evaluate(out: Path, split: str = "test", root=None, protocol: str = "auto", regenerate: bool = False,
             splits=None, meteor: str = "auto", **gen_kwargs) -> Dict[str, Any]:
    """Score ``hyp.<split>.txt`` against ``gold.<split>.txt`` (generating them first if missing).

    ``meteor``: ``"auto"`` (METEOR 1.5 when Java is found, else nltk), ``"meteor-1.5"``, ``"nltk"`` or ``"none"``;
    the result's ``METEOR_impl`` says which one produced ``METEOR``."""
    out = Path(out)
    splits = splits or load_agenda(root, protocol)
    hyp_path = out / f"hyp.{split}.txt"
    if regenerate or not hyp_path.exists():
        generate(out, split, splits=splits, **gen_kwargs)
    hyps = hyp_path.read_text(encoding="utf-8").split("\n")[:-1]
    refs = (out / f"gold.{split}.txt").read_text(encoding="utf-8").split("\n")[:-1]
    recs = splits.split(split)[: len(hyps)]
    scores = _evaluate_generation(hyps, refs, [r.entities for r in recs], meteor=meteor)
    result = {"split": split, "records": len(hyps), "data": splits.description, **scores}
    write_json(out / f"metrics.{split}.json", result)
    return result


@torch.no_grad()
def head_diversity(out: Path, split: str = "test", root=None, protocol: str = "auto", limit: int = 200,
                   checkpoint: Optional[Path] = None, splits=None, device: Optional[str] = None) -> Dict[str, Any]:
    """How alike the encoder's heads are (mean pairwise cosine similarity over head pairs, as in
    :func:`graph_rma.regularizers.disagreement`): of the head parameters (query/key/value rows), averaged over
    layers, and of the attention weights ``[E, H]`` on the first ``limit`` graphs of ``split``, per layer."""
    model, vocab, ck = load_model(checkpoint or Path(out) / "best.pt", device)
    splits = splits or load_agenda(root, protocol)
    items = AgendaEncoder(vocab, ck["relations"]).encode_all(splits.split(split)[:limit])
    memory = model.encode(_to(collate(items), next(model.parameters()).device), return_attention=True)
    result = {"variant": ck["variant"], "epoch": ck["epoch"], "records": len(items),
              "head_parameter_cosine": float(parameter_disagreement(model.encoder)),
              "attention_cosine": [float(disagreement(alpha.t(), head_dim=0)) for alpha, _ in memory["attention"]]}
    write_json(Path(out) / f"heads.{split}.json", result)
    return result


# ----------------------------------------------------------------------------------------------------------------
def add_generator_commands(sub, common: argparse.ArgumentParser, presets: Dict[str, Dict[str, Any]], unit: str,
                           splits: Sequence[str], save_every: int) -> None:
    """The ``train``, ``generate`` and ``evaluate`` subcommands shared by ``graph-rma agenda`` and ``graph-rma webnlg``
    (``unit``: what one example is called in the help texts)."""
    t = sub.add_parser("train", parents=[common], help="train (resumes from OUT/checkpoint.pt if present)")
    t.add_argument("--preset", default="cpu", choices=sorted(presets))
    t.add_argument("--variant", default="ma",
                   help="ma, svgd:alpha=0.1, spos:..., dropattn:p=0.1, reg:... (see graph_rma.variants)")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--max-train", type=int, default=None, help=f"use only the first N training {unit}")
    t.add_argument("--max-dev", type=int, default=None, help=f"use only the first N dev {unit} for the dev loss")
    t.add_argument("--save-every", type=int, default=save_every, help="checkpoint every N optimizer steps (0: per epoch)")
    for key in ("hidden", "layers", "heads", "epochs", "batch_size", "min_freq", "max_target_len", "beam", "max_len"):
        t.add_argument("--" + key.replace("_", "-"), type=int, default=None)
    for key in ("lr", "dropout", "attention_dropout", "clip", "momentum", "length_penalty"):
        t.add_argument("--" + key.replace("_", "-"), type=float, default=None)
    t.add_argument("--optimizer", choices=["adam", "sgd"], default=None)
    t.add_argument("--evaluate", action="store_true", help="after training, decode and score the test split")
    for name in ("generate", "evaluate"):
        g = sub.add_parser(name, parents=[common], help=f"{name} a split with OUT/best.pt")
        g.add_argument("--split", default="test", choices=list(splits))
        g.add_argument("--checkpoint", type=Path, default=None)
        g.add_argument("--beam", type=int, default=None, help="beam size (1 = greedy); default from training config")
        g.add_argument("--max-len", type=int, default=None)
        g.add_argument("--length-penalty", type=float, default=None)
        g.add_argument("--batch-size", type=int, default=32)
        g.add_argument("--limit", type=int, default=None, help=f"only the first N {unit}")
        if name == "evaluate":
            g.add_argument("--meteor", default="auto", choices=["auto", "meteor-1.5", "nltk", "none"])
            g.add_argument("--regenerate", action="store_true", help="decode again even if OUT/hyp.SPLIT.txt exists")


def preset_config(args: argparse.Namespace, presets: Dict[str, Dict[str, Any]]) -> Dict[str, Any]:
    """The chosen preset with every option given on the command line put over it."""
    config = dict(presets[args.preset])
    for key in list(config):
        val = getattr(args, key, None)
        if val is not None:
            config[key] = val
    return config


def generator_parser(name: str, label: str, doc: str):
    """``graph-rma <name>``'s parser, its subcommand action and the options every subcommand shares."""
    p = argparse.ArgumentParser(prog=f"graph-rma {name}", description=doc.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--out", type=Path, default=Path(f"runs/{name}/ma"), help="run folder")
    common.add_argument("--root", default=None, help=f"{label} folder (default $GRAPH_RMA_DATA/{name})")
    common.add_argument("--quiet", action="store_true", help="no progress bars")
    common.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    return p, sub, common


def _parser() -> argparse.ArgumentParser:
    p, sub, common = generator_parser("agenda", "AGENDA", __doc__)
    common.add_argument("--protocol", default="auto", choices=["auto", "official", "offline"])
    add_generator_commands(sub, common, PRESETS, "records", ["dev", "val", "test", "train"], save_every=50)
    h = sub.add_parser("heads", parents=[common], help="head diversity of OUT/best.pt (parameters and attention)")
    h.add_argument("--split", default="test", choices=["dev", "val", "test", "train"])
    h.add_argument("--limit", type=int, default=200, help="graphs used for the attention similarity")
    h.add_argument("--checkpoint", type=Path, default=None)
    return p


def train_command(args: argparse.Namespace, run, evaluate_run) -> int:
    """``train`` (and ``--evaluate``) in one process, or under ``torchrun`` in each of its processes: the process
    group is set up from torchrun's variables, each rank gets its own device, rank 0 prints and evaluates."""
    info = init_from_env(device=args.device)
    device = str(info.device) if info.distributed else args.device
    try:
        summary = run(device)
        if info.rank == 0:
            print(json.dumps({k: summary[k] for k in ("variant", "best_dev_loss", "steps")}))
            if args.evaluate:
                print(json.dumps(evaluate_run(device)))
    finally:
        cleanup()
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = _parser().parse_args(argv)
    progress = not args.quiet
    if args.cmd == "train":
        config = preset_config(args, PRESETS)
        return train_command(
            args,
            lambda device: train(config, args.out, args.root, args.protocol, args.variant, args.seed, args.max_train,
                                 args.max_dev, args.save_every, progress=progress, device=device),
            lambda device: evaluate(args.out, "test", args.root, args.protocol, regenerate=True, progress=progress,
                                    device=device))
    if args.cmd == "heads":
        print(json.dumps(head_diversity(args.out, args.split, args.root, args.protocol, args.limit, args.checkpoint,
                                        device=args.device)))
        return 0
    kwargs = dict(checkpoint=args.checkpoint, beam=args.beam, max_len=args.max_len,
                  length_penalty=args.length_penalty, batch_size=args.batch_size, limit=args.limit, progress=progress,
                  device=args.device)
    if args.cmd == "generate":
        paths = generate(args.out, args.split, args.root, args.protocol, **kwargs)
        print(json.dumps({k: str(v) for k, v in paths.items()}))
        return 0
    regenerate = args.regenerate or args.limit is not None
    result = evaluate(args.out, args.split, args.root, args.protocol, regenerate=regenerate, meteor=args.meteor,
                      **kwargs)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
